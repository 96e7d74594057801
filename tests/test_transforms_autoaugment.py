"""Faster AutoAugment's operations (Invert, Gray, AutoContrast, Solarize, Posterize, Equalize, Sharpness)
against torchvision's and kornia's functions at fixed parameters, their draws, their straight-through
gradients and their bad arguments. The transform contract runs on each in test_transform_contract.py.

torchvision's posterize and equalize work on uint8 levels (its float posterize is another definition):
they are compared on images whose values are exact multiples of 1/255, as uint8 images and back.
"""

import kornia
import pytest
import torch
from helpers import gen
from torchvision.transforms.v2 import functional as TF
from transform_cases import images

import augnet
from augnet.transforms import image as T

F64 = torch.float64


def eight_bit(b=4, ch=3, h=9, w=11, seed=0) -> tuple[torch.Tensor, torch.Tensor]:
    """(uint8 images, the same as float32 in [0, 1], exact multiples of 1/255)."""
    x8 = torch.randint(0, 256, (b, ch, h, w), generator=gen(seed), dtype=torch.uint8)
    return x8, x8.float() / 255


def gated(t, x):
    """Params of a gated transform with every gate open."""
    params = t.sample(x, 1.0, generator=gen(0))
    assert (params["gate"] == 1).all()
    return params


# ------------------------------------------------------ references at fixed parameters


@pytest.mark.parametrize("dtype", [torch.float32, F64])
def test_invert_is_one_minus_x(dtype):
    x = images(dtype=dtype)
    t = T.Invert()
    out = t.apply_transform(x, gated(t, x))
    torch.testing.assert_close(out, TF.invert(x))
    torch.testing.assert_close(out, kornia.enhance.invert(x, torch.tensor(1.0, dtype=dtype)))


def test_gray_matches_kornia_and_torchvision():
    x = images(dtype=F64)
    t = T.Gray()
    out = t.apply_transform(x, gated(t, x))
    torch.testing.assert_close(out, kornia.color.rgb_to_grayscale(x).expand_as(x))
    # torchvision weighs red by 0.2989 instead of 0.299: at most 1e-4 apart on images in [0, 1].
    torch.testing.assert_close(out, TF.rgb_to_grayscale(x, num_output_channels=3), rtol=0, atol=1e-4)


@pytest.mark.parametrize("ch", [1, 3])  # (torchvision takes 1 or 3 channels; augnet any number)
def test_autocontrast_matches_torchvision(ch):
    x = 0.2 + 0.5 * images(ch=ch, dtype=F64)  # ranges well inside [0, 1]
    x[1, 0] = 0.4  # a constant channel is left unchanged
    t = T.AutoContrast()
    out = t.apply_transform(x, gated(t, x))
    torch.testing.assert_close(out, TF.autocontrast(x))
    assert out.amin((2, 3))[0].allclose(torch.zeros(ch, dtype=F64))
    assert out.amax((2, 3))[0].allclose(torch.ones(ch, dtype=F64))
    torch.testing.assert_close(out[1, 0], x[1, 0])
    # kornia's normalize_min_max divides by max - min + 1e-6 (and zeroes constant channels).
    torch.testing.assert_close(out[0], kornia.enhance.normalize_min_max(x[:1])[0], rtol=0, atol=1e-5)


@pytest.mark.parametrize("threshold", [0.05, 0.3, 0.77, 0.999])
def test_solarize_matches_torchvision_and_kornia(threshold):
    x = images(dtype=F64)
    t = T.Solarize()
    params = {"threshold": torch.full((5,), threshold, dtype=F64)}
    out = t.apply_transform(x, params)
    torch.testing.assert_close(out, TF.solarize(x, threshold))
    torch.testing.assert_close(out, kornia.enhance.solarize(x, threshold))


def test_solarize_keeps_the_pixels_at_the_threshold_and_threshold_one_is_the_identity():
    # torchvision and kornia also invert a pixel equal to the threshold; augnet does not, so that
    # threshold 1 (magnitude 0) leaves white pixels (and anything above 1) alone.
    x = torch.tensor([0.2, 0.5, 1.0, 1.5], dtype=F64).view(1, 1, 2, 2)
    t = T.Solarize()
    out = t.apply_transform(x, {"threshold": torch.tensor([0.5], dtype=F64)})
    assert out.flatten().tolist() == [0.2, 0.5, 0.0, -0.5]
    assert torch.equal(t.apply_transform(x, {"threshold": torch.tensor([1.0], dtype=F64)}), x)
    assert torch.equal(t(x, 0.0, generator=gen(0)), x)


@pytest.mark.parametrize("removed", range(9))
def test_posterize_matches_torchvision_and_kornia_on_8_bit_images(removed):
    x8, x = eight_bit()
    t = T.Posterize(max_bits=8)
    params = {"bits": torch.full((4,), float(removed)), "dither": torch.zeros(4)}
    out = t.apply_transform(x, params)
    # torchvision's uint8 posterize keeps the 8 - removed high bits (its float kernel is another definition)
    torch.testing.assert_close(out, TF.posterize(x8, 8 - removed).float() / 255, rtol=0, atol=0)
    if removed < 8:  # kornia's bits=0 would divide by zero
        torch.testing.assert_close(out, kornia.enhance.posterize(x, 8 - removed), rtol=0, atol=0)


def test_posterize_of_other_floats_rounds_down_to_a_level():
    x = images(dtype=F64)
    out = T.Posterize().apply_transform(x, {"bits": torch.full((5,), 3.0, dtype=F64), "dither": torch.zeros(5)})
    levels = out * 255 / 8
    torch.testing.assert_close(levels, levels.round())
    assert (out <= x).all() and (x - out < 8 / 255).all()


def test_equalize_matches_torchvision_and_kornia_on_8_bit_images():
    x8, x = eight_bit(b=6, h=16, w=16)
    x8[2] = x8[2] // 4 + 100  # a narrow histogram: equalisation spreads it
    x8[3, 1] = 7  # a constant channel (step 0) is kept
    x = x8.float() / 255
    t = T.Equalize()
    out = t.apply_transform(x, gated(t, x))
    torch.testing.assert_close(out, TF.equalize(x8).float() / 255, rtol=0, atol=1e-7)
    torch.testing.assert_close(out, kornia.enhance.equalize(x), rtol=0, atol=1e-7)
    # torchvision's float kernel bins the same way (floor(255.999 x)), on any float image
    y = images(b=3, h=16, w=16)
    torch.testing.assert_close(t.apply_transform(y, gated(t, y)), TF.equalize(y), rtol=0, atol=1e-7)
    assert out[2].std() > x[2].std()


@pytest.mark.parametrize("factor", [0.1, 0.6, 1.0, 1.4, 1.9])
@pytest.mark.parametrize("size", [(9, 11), (3, 3), (2, 5)])
def test_sharpness_matches_torchvision_and_kornia(factor, size):
    x = images(h=size[0], w=size[1], dtype=F64)
    out = T.Sharpness().apply_transform(x, {"factor": torch.full((5,), factor, dtype=F64)})
    # torchvision and kornia clip to [0, 1]; augnet does not (sharpening may leave it)
    torch.testing.assert_close(out.clamp(0, 1), TF.adjust_sharpness(x, factor))
    if min(size) >= 3:  # kornia refuses images under 3x3
        torch.testing.assert_close(out.clamp(0, 1), kornia.enhance.sharpness(x, factor))


def test_sharpness_keeps_the_border_and_blurs_inside():
    x = images(dtype=F64)
    out = T.Sharpness().apply_transform(x, {"factor": torch.zeros(5, dtype=F64)})
    inside = torch.nn.functional.conv2d(
        x, (torch.tensor([[1.0, 1, 1], [1, 5, 1], [1, 1, 1]], dtype=F64) / 13).expand(3, 1, 3, 3), groups=3
    )
    torch.testing.assert_close(out[..., 1:-1, 1:-1], inside)
    for edge in (out[..., 0, :] - x[..., 0, :], out[..., -1, :] - x[..., -1, :], out[..., 0] - x[..., 0]):
        assert edge.abs().max() == 0


# ------------------------------------------------------------------------- draws


@pytest.mark.parametrize("cls", [T.Invert, T.Gray, T.AutoContrast, T.Equalize])
def test_gated_operations_apply_with_probability_mu(cls):
    x = images(b=4000, h=2, w=3)
    gate = cls().sample(x, 0.3, generator=gen(0))["gate"]
    assert set(gate.unique().tolist()) <= {0.0, 1.0}
    assert abs(float(gate.mean()) - 0.3) < 0.03


def test_solarize_thresholds_fill_their_range():
    t = T.Solarize(min_threshold=0.2)
    threshold = t.sample(images(b=4000, h=2, w=2), 0.5, generator=gen(0))["threshold"]
    low, high, _ = t.natural_range(0.5)
    assert (low, high) == pytest.approx((0.6, 1.0))
    assert threshold.min() >= low and threshold.max() <= high
    assert threshold.min() < low + 0.01 and threshold.max() > high - 0.01


def test_posterize_removes_whole_bits_with_the_mean_of_the_continuous_count():
    x = images(b=20000, h=1, w=1)
    t = T.Posterize(max_bits=4)
    params = t.sample(x, 0.7, generator=gen(0))
    k = t.removed_bits(params)
    assert set(k.unique().tolist()) == {0.0, 1.0, 2.0, 3.0}  # up to 0.7 * 4 = 2.8 bits: 3 sometimes
    torch.testing.assert_close(k.mean(), params["bits"].mean(), rtol=0, atol=0.02)  # E[k] = r
    assert abs(float(params["bits"].mean()) - 1.4) < 0.02
    assert t.natural_range(0.7) == (0.0, pytest.approx(2.8), "bits removed")


def test_sharpness_factor_range():
    t = T.Sharpness()
    factor = t.sample(images(b=4000), 0.5, generator=gen(0))["factor"]
    assert factor.min() >= 0.55 and factor.max() <= 1.45 and factor.min() < 0.56 and factor.max() > 1.44
    assert t.natural_range(1.0) == (pytest.approx(0.1), pytest.approx(1.9), "factor")


def test_natural_ranges_of_the_gated_operations():
    for cls in (T.Invert, T.Gray, T.AutoContrast, T.Equalize):
        assert cls().natural_range(0.4) == (0.0, 0.4, "probability")


# ---------------------------------------------------------- straight-through gradients


def test_solarize_gradient_in_x_is_exact_and_in_the_threshold_is_the_relaxation():
    x = torch.tensor([0.1, 0.45, 0.55, 0.9], dtype=F64).view(1, 1, 2, 2).requires_grad_()
    t = T.Solarize(temperature=0.1)
    threshold = torch.tensor([0.5], dtype=F64, requires_grad=True)
    out = t.apply_transform(x, {"threshold": threshold})
    out.sum().backward()
    assert x.grad.flatten().tolist() == [1.0, 1.0, -1.0, -1.0]
    # d/dt sum(sigmoid((x - t) / T) * (1 - 2x)) = -sum(sigmoid' / T * (1 - 2x))
    xs = x.detach().flatten()
    s = torch.sigmoid((xs - 0.5) / 0.1)
    torch.testing.assert_close(threshold.grad, -(s * (1 - s) / 0.1 * (1 - 2 * xs)).sum().view(1))


def test_posterize_gradient_is_the_interpolation_between_bit_counts():
    x = images(b=2, dtype=F64).requires_grad_()
    t = T.Posterize()
    bits = torch.tensor([1.3, 2.6], dtype=F64, requires_grad=True)
    out = t.apply_transform(x, {"bits": bits, "dither": torch.tensor([0.9, 0.1], dtype=F64)})
    # forward: the stochastic rounding (1.3 with dither 0.9 -> 1 bit, 2.6 with dither 0.1 -> 3 bits)
    torch.testing.assert_close(out[0], T._posterize(x.detach()[:1], torch.tensor([1.0]))[0])
    torch.testing.assert_close(out[1], T._posterize(x.detach()[1:], torch.tensor([3.0]))[0])
    weights = torch.randn(out.shape, generator=gen(1), dtype=F64)
    (out * weights).sum().backward()
    torch.testing.assert_close(x.grad, weights)  # straight through in x
    for row, low in ((0, 1.0), (1, 2.0)):
        step = T._posterize(x.detach()[row : row + 1], torch.tensor([low + 1])) - T._posterize(
            x.detach()[row : row + 1], torch.tensor([low])
        )
        torch.testing.assert_close(bits.grad[row], (step * weights[row]).sum())


def test_equalize_gradient_in_x_is_straight_through_and_in_the_gate_is_the_change():
    x = images(b=3, dtype=F64).requires_grad_()
    gate = torch.tensor([1.0, 0.0, 1.0], dtype=F64, requires_grad=True)
    out = T.Equalize().apply_transform(x, {"gate": gate})
    weights = torch.randn(out.shape, generator=gen(1), dtype=F64)
    (out * weights).sum().backward()
    torch.testing.assert_close(x.grad, weights)
    change = T._equalize(x.detach()) - x.detach()
    torch.testing.assert_close(gate.grad, (change * weights).sum((1, 2, 3)))
    assert torch.equal(out[1], x.detach()[1])


@pytest.mark.parametrize("cls", [T.Solarize, T.Posterize, T.Equalize, T.Sharpness, T.Invert])
def test_magnitudes_leave_zero_in_a_layer(cls):
    # In a training layer (the generic path for the non-affine ones) the magnitude gets a gradient at 0:
    # for one of a loss and its opposite, the one whose descent moves the magnitude into (0, 1].
    layer = augnet.AugmentationLayer([cls(), T.Rotate()], init_magnitude=0.0)
    x = images(b=6)
    weights = torch.randn(12, 3, 9, 11, generator=gen(1))
    grads = []
    for sign in (1.0, -1.0):
        layer.zero_grad()
        out = layer(x, copies=2, generator=gen(0))
        torch.testing.assert_close(out, x.repeat(2, 1, 1, 1))
        (sign * out * weights).sum().backward()
        grads.append(float(layer.raw_magnitudes.grad[0]))
    assert grads[0] != 0 or grads[1] != 0


def test_layer_of_every_operation_in_eval_draws_real_operations():
    ops = [T.Invert(), T.Gray(), T.AutoContrast(), T.Solarize(), T.Posterize(), T.Equalize(), T.Sharpness()]
    layer = augnet.AugmentationLayer(ops, init_magnitude=0.7, train_mode="mix").eval()  # mix: every op on every row
    x = images(b=4, h=8, w=8)
    out = layer(x, copies=3, generator=gen(0))
    assert out.shape == (12, 3, 8, 8) and torch.isfinite(out).all()
    layer.train()
    out = layer(x, copies=3, generator=gen(0))
    out.square().sum().backward()
    assert torch.isfinite(layer.raw_magnitudes.grad).all() and (layer.raw_magnitudes.grad != 0).all()


# ------------------------------------------------------------------- bad arguments


@pytest.mark.parametrize(
    "make, error, match",
    [
        (lambda: T.Solarize(min_threshold=1.0), ValueError, "min_threshold.*1.0"),
        (lambda: T.Solarize(min_threshold=-0.1), ValueError, "min_threshold.*-0.1"),
        (lambda: T.Solarize(min_threshold="0"), TypeError, "min_threshold.*'0'"),
        (lambda: T.Solarize(temperature=0), ValueError, "temperature.*0"),
        (lambda: T.Posterize(max_bits=0), ValueError, "max_bits.*0"),
        (lambda: T.Posterize(max_bits=9), ValueError, "max_bits.*9"),
        (lambda: T.Posterize(max_bits=2.5), TypeError, "max_bits.*2.5"),
        (lambda: T.Posterize(max_bits=True), TypeError, "max_bits.*True"),
        (lambda: T.Sharpness(max_delta=1.5), ValueError, "max_delta.*1.5"),
        (lambda: T.Sharpness(max_delta=-1), ValueError, "max_delta.*-1"),
        (lambda: T.Invert(temperature=-1.0), ValueError, "temperature.*-1.0"),
        (lambda: T.Equalize(temperature=float("nan")), ValueError, "temperature.*nan"),
    ],
)
def test_bad_configuration(make, error, match):
    with pytest.raises(error, match=match):
        make()
