"""The image transforms and the sensor rotations called as a user calls them: what was silently wrong or raw.

``Posterize.bits_distribution`` lost its digits at small magnitudes (at 1e-12 ``P(0)`` was 1.0000056, below
about 1e-16 every probability was 0: an exported policy's choice of bit counts weighed nothing); ``Sharpness``
took a ``max_delta`` below float32's smallest normal number, with which every factor drawn was 1 (``Contrast``
and ``Saturation`` refuse it); ``AutoContrast``'s docstring said its output stays in [0, 1] where a channel's
maximum comes out a unit in the last place above 1. The sensor rotations and ``spline_interpolation_matrix``
met positions on meta with a raw ``NotImplementedError`` or ``RuntimeError``, an ``order`` of 400 digits with a
raw ``OverflowError``, and positions beyond about 1e154 (or below 1e-154) either refused as "at the origin" or,
for ``positions_to``, read in wrong directions without a word.

The rest pins what the audit found to hold over inputs the other tests do not reach (1 x 1, 1 x W, H x 1 and
2 x 2 images, 1 and 4 channels, half precision, strided layouts, magnitudes of every kind, per-row
magnitudes): the identity at magnitude 0, inputs left alone, batch-independence, gradients and determinism.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch
from helpers import gen
from transform_cases import cap

from augnet import AugmentationLayer
from augnet.transforms import image as T
from augnet.transforms._sensors import (
    SensorsRotationX,
    SensorsRotationY,
    SensorsRotationZ,
    spline_interpolation_matrix,
)

F32, F64 = torch.float32, torch.float64
CLASSES = [getattr(T, name) for name in T.__all__ if name != "GEOMETRIC"]
RGB_ONLY = {"Saturation", "Hue", "Gray"}
SENSORS = [SensorsRotationX, SensorsRotationY, SensorsRotationZ]
#: Sizes no other test feeds every transform: one pixel, one row, one column, 2 x 2, odd and non-square.
SIZES = [(1, 1), (1, 5), (5, 1), (2, 2), (3, 4), (9, 11)]


def _channels(cls) -> list[int]:
    return [3] if cls.__name__ in RGB_ONLY else [1, 3, 4]


def _ids(classes):
    return [c.__name__ for c in classes]


# ================================================================== mends


@pytest.mark.parametrize("magnitude", [5e-324, 1e-300, 1e-17, 1e-15, 1e-12, 1e-9, 1e-6])
@pytest.mark.parametrize("max_bits", [1, 4, 8])
def test_posterize_bits_distribution_is_a_distribution_at_small_magnitudes(magnitude, max_bits):
    # Before: 1e-17 gave {0: 0.0, 1: 0.0}, 1e-12 gave P(0) = 1.0000056 (below(R) - 1/2 cancelled R's digits).
    top = magnitude * max_bits
    p = T.Posterize(max_bits=max_bits).bits_distribution(magnitude)
    assert set(p) == {0, 1}
    assert 0.0 <= p[1] <= p[0] <= 1.0
    assert p[0] + p[1] == pytest.approx(1.0, abs=1e-15)
    assert p[1] == pytest.approx(top / 2, rel=1e-12)  # E[k] = E[r] = R / 2, all of it from one bit


def test_posterize_bits_distribution_is_continuous_where_its_closed_form_takes_over():
    # The closed form below 1e-4 bits and the general integral above agree where they meet.
    t = T.Posterize(max_bits=1)
    below, above = t.bits_distribution(math.nextafter(1e-4, 0.0)), t.bits_distribution(1e-4)
    assert below[0] == pytest.approx(above[0], abs=1e-12) and below[1] == pytest.approx(above[1], rel=1e-9)


@pytest.mark.parametrize("value", [1e-39, 1e-300, 5e-324, np.float64(1e-40), torch.tensor(1e-300, dtype=F64)])
def test_sharpness_refuses_a_factor_range_float32_cannot_hold(value):
    # Before: taken; every factor 1 + mu * max_delta * u was drawn as 1, a Sharpness that never acts.
    with pytest.raises(ValueError, match=r"max_delta \(\S+\) is beyond float32's range"):
        T.Sharpness(max_delta=value)
    with pytest.raises(ValueError, match="max_delta"):  # as Contrast's
        T.Contrast(max_delta=value)


def test_sharpness_takes_the_smallest_range_float32_holds_and_it_acts():
    t = T.Sharpness(max_delta=1e-7)
    x = torch.rand(2, 3, 5, 5, generator=gen(0))
    assert not torch.equal(t(x, 1.0, generator=gen(1)), x)


def test_autocontrast_docstring_says_a_maximum_may_round_above_one_and_that_bound_holds():
    # Before: "for images in [0, 1] the output is in [0, 1] anyway", where one channel in ten of random float32
    # images came out at 1.0000001 (and through a layer's warp a minimum at -1e-8).
    doc = " ".join(T.AutoContrast.__doc__.split())
    assert "to rounding" in doc and "one unit in the last place above 1" in doc and "a rounding below 0" in doc
    layer = AugmentationLayer([T.AutoContrast()], init_magnitude=1.0)
    above = 0
    for dtype in (F32, F64):
        ulp = torch.finfo(dtype).eps
        for seed in range(20):
            x = torch.rand(8, 3, 4, 5, generator=gen(seed), dtype=dtype)
            for out in (T.AutoContrast()(x, 1.0, generator=gen(seed)), layer(x, generator=gen(seed))):
                assert out.min() >= -ulp and out.max() <= 1 + ulp
                above += int((out > 1).sum())
    assert above > 0  # the rounding the docstring describes does happen


@pytest.mark.parametrize("cls", SENSORS, ids=_ids(SENSORS))
def test_sensor_positions_on_meta_are_a_value_error_naming_them(cls):
    # Before: NotImplementedError: Cannot copy out of meta tensor; no data!
    with pytest.raises(ValueError, match="sensor_positions is a tensor on meta"):
        cls(cap(8).to("meta"))


@pytest.mark.parametrize("which", ["positions_from", "positions_to"])
def test_spline_interpolation_matrix_refuses_positions_on_meta_naming_them(which):
    # Before: a raw NotImplementedError (positions_from) or RuntimeError "Tensor.item() cannot be called on meta".
    p = cap(8)
    args = {"positions_from": p, "positions_to": p, which: p.to("meta")}
    with pytest.raises(ValueError, match=f"{which} is a tensor on meta"):
        spline_interpolation_matrix(**args)


@pytest.mark.parametrize("cls", SENSORS, ids=_ids(SENSORS))
def test_an_order_float_cannot_hold_is_a_value_error_naming_it(cls):
    # Before: OverflowError: int too large to convert to float.
    with pytest.raises(ValueError, match=re.escape("order=an int of 1329 bits is too high for n_terms=50")):
        cls(cap(8), order=10**400)
    with pytest.raises(ValueError, match=re.escape("order=4 is too high for n_terms=an int of 1329 bits")):
        cls(cap(8), n_terms=10**400)


@pytest.mark.parametrize("scale", [1e160, 1e200, 1e300, 1e-160, 1e-200, 1e-300])
@pytest.mark.parametrize("cls", SENSORS, ids=_ids(SENSORS))
def test_sensor_positions_of_any_float64_scale_give_the_rotation_of_their_directions(cls, scale):
    # Before: refused as "sensor_positions must not lie at the origin (zero norm)" (the norm's squares over- or
    # underflowed). The positions are projected onto the unit sphere: the scale does not matter.
    p = cap(8, z_min=-0.3)
    x = torch.randn(3, 8, 6, generator=gen(2))
    scaled, plain = cls(p * scale), cls(p)
    torch.testing.assert_close(scaled.positions, plain.positions, rtol=0, atol=1e-15)
    torch.testing.assert_close(scaled(x, 0.7, generator=gen(1)), plain(x, 0.7, generator=gen(1)), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("scale", [1e160, 1e200, 1e300, 1e-160, 1e-200, 1e-300])
def test_spline_interpolation_matrix_reads_positions_of_any_float64_scale_as_their_directions(scale):
    # Before: positions_to at 1e200 read as the origin (every row the same) and at 1e-160 in a direction off by
    # 0.04, without a word; positions_from beyond them refused as "at the origin".
    p = cap(10, z_min=-0.5)
    q = torch.randn(4, 3, generator=gen(3), dtype=F64)
    ref = spline_interpolation_matrix(p, q)
    torch.testing.assert_close(spline_interpolation_matrix(p, q * scale), ref, rtol=0, atol=1e-12)
    torch.testing.assert_close(spline_interpolation_matrix(p * scale, q), ref, rtol=0, atol=1e-12)
    # A row of mixed scales too (each row is a direction of its own).
    mixed = q * torch.tensor([1.0, scale, 1.0 / scale if scale > 1 else 1e-3, 7.0], dtype=F64)[:, None]
    torch.testing.assert_close(spline_interpolation_matrix(p, mixed), ref, rtol=0, atol=1e-12)


def test_positions_truly_at_the_origin_are_still_refused():
    p = cap(8)
    with pytest.raises(ValueError, match="must be finite and away from the origin"):
        spline_interpolation_matrix(p, torch.zeros(2, 3, dtype=F64))
    with pytest.raises(ValueError, match="must not lie at the origin"):
        SensorsRotationZ(torch.cat([p, torch.zeros(1, 3, dtype=F64)]))


# ================================================================== properties that hold (pinned)


@pytest.mark.parametrize("cls", CLASSES, ids=_ids(CLASSES))
def test_magnitude_zero_is_the_input_and_the_input_is_left_alone_at_every_size_channel_count_and_dtype(cls):
    for ch in _channels(cls):
        for h, w in SIZES:
            for dtype in (F32, F64, torch.float16, torch.bfloat16):
                x = torch.rand(3, ch, h, w, generator=gen(h * 7 + w)).to(dtype)
                kept = x.clone()
                for mu in (0.0, torch.tensor(0.0), torch.zeros(3, dtype=F64), np.float32(0.0)):
                    out = cls()(x, mu, generator=gen(1))
                    assert torch.equal(out, x) and out.data_ptr() != x.data_ptr(), (ch, h, w, dtype, mu)
                for mu in (0.5, 1.0):
                    out = cls()(x, mu, generator=gen(1))
                    assert out.shape == x.shape and out.dtype == dtype and bool(torch.isfinite(out).all())
                    assert torch.equal(out, cls()(x, mu, generator=gen(1)))  # a seed gives the same output
                assert torch.equal(x, kept)


def _layouts(x):
    buffer = torch.zeros(x.shape[0], x.shape[1], x.shape[2] + 2, 2 * x.shape[3], dtype=x.dtype)
    strided = buffer[:, :, 1:-1, ::2]
    strided.copy_(x)
    return {
        "channels_last": x.contiguous(memory_format=torch.channels_last),
        "transposed": x.transpose(-1, -2).contiguous().transpose(-1, -2),
        "strided": strided,
        "expanded": x[:1].expand_as(x),
    }


@pytest.mark.parametrize("cls", CLASSES, ids=_ids(CLASSES))
def test_every_layout_gives_the_contiguous_inputs_values_and_is_not_written(cls):
    for ch in _channels(cls):
        x = torch.rand(4, ch, 5, 7, generator=gen(ch))
        for name, view in _layouts(x).items():
            kept = view.clone()
            for mu in (0.0, 0.6):
                ref = cls()(view.contiguous(), mu, generator=gen(3))
                assert torch.equal(cls()(view, mu, generator=gen(3)), ref), (name, mu)
            assert torch.equal(view, kept)


PER_SAMPLE = [c for c in CLASSES if not c.mixes_samples]  # SamplePairing reads other samples


@pytest.mark.parametrize("cls", PER_SAMPLE, ids=_ids(PER_SAMPLE))
def test_per_row_magnitudes_give_each_sample_alone_with_its_own(cls):
    # Per image, not per batch: Contrast's mean and AutoContrast's range are each image's own.
    x = torch.rand(4, 3, 5, 7, generator=gen(4), dtype=F64)
    mu = torch.tensor([0.0, 0.2, 0.7, 1.0], dtype=F64)
    params = cls().sample(x, mu, generator=gen(5))
    out = cls()(x, mu, params=params)
    for i in range(4):
        alone = cls()(x[i : i + 1], mu[i : i + 1], params={k: v[i : i + 1] for k, v in params.items()})
        torch.testing.assert_close(alone, out[i : i + 1], rtol=0, atol=1e-12)
        # and a per-row magnitude draws as the scalar magnitude does, with the same generator state
        torch.testing.assert_close(cls()(x, float(mu[i]), generator=gen(6))[i], cls()(x, mu, generator=gen(6))[i])


SMOOTH = [T.TranslateX, T.TranslateY, T.Rotate, T.ShearX, T.ShearY, T.Scale, T.Brightness, T.Contrast, T.Saturation,
          T.Hue, T.SamplePairing, T.Sharpness]  # fmt: skip


@pytest.mark.parametrize("cls", SMOOTH, ids=_ids(SMOOTH))
def test_gradcheck_in_per_row_magnitudes_on_small_and_one_pixel_images(cls):
    for h, w in [(1, 1), (1, 4), (4, 1), (2, 2), (3, 4)]:
        x = torch.rand(3, 3, h, w, generator=gen(h + w), dtype=F64)
        mu = torch.tensor([0.3, 0.55, 0.8], dtype=F64, requires_grad=True)
        assert torch.autograd.gradcheck(lambda m, x=x: cls()(x, m, generator=gen(4)), (mu,), eps=1e-6, atol=1e-5)


@pytest.mark.parametrize("cls", CLASSES, ids=_ids(CLASSES))
@pytest.mark.parametrize("b", [0, 1])
def test_batches_of_none_and_one_in_a_layer_and_alone(cls, b):
    x = torch.rand(b, 3, 5, 6, generator=gen(0), requires_grad=True)
    layer = AugmentationLayer([cls()], init_magnitude=0.5)
    for training in (True, False):
        layer.train(training)
        out = layer(x, copies=2, generator=gen(1))
        assert out.shape == (2 * b, 3, 5, 6)
    mu = torch.full((b,), 0.5, requires_grad=True)
    out = cls()(x, mu, generator=gen(1))
    assert out.shape == x.shape
    out.sum().backward()
    assert mu.grad is not None and x.grad is not None


@pytest.mark.parametrize("cls", SENSORS, ids=_ids(SENSORS))
def test_sensor_rotations_at_small_batches_lengths_dtypes_and_layouts(cls):
    t = cls(cap(8))
    for dtype in (F32, F64, torch.float16, torch.bfloat16):
        for b, length in [(0, 4), (1, 1), (3, 2), (2, 7)]:
            x = torch.randn(b, 8, length, generator=gen(b + length)).to(dtype)
            kept = x.clone()
            assert torch.equal(t(x, 0.0), x)
            out = t(x, torch.full((b,), 0.6), generator=gen(2))
            assert out.shape == x.shape and out.dtype == dtype and bool(torch.isfinite(out).all())
            assert torch.equal(x, kept)
        x = torch.randn(3, 8, 6, generator=gen(9)).to(dtype)
        ref = t(x, 0.5, generator=gen(3))
        strided = torch.zeros(3, 16, 12, dtype=dtype)[:, ::2, ::2]
        strided.copy_(x)
        for view in (x.transpose(1, 2).contiguous().transpose(1, 2), strided):
            assert torch.equal(t(view, 0.5, generator=gen(3)), ref)
