"""Mixed precision: augnet under torch.autocast (bfloat16 on CPU) and with float16 / bfloat16 inputs.

The contract (training guide, "Mixed precision"): augmentation layers switch autocast
off and compute in float32, so sampling coordinates, grids and blends never
drop to reduced precision; a float32 input under autocast gives exactly the
float32 result; a float16 / bfloat16 input is augmented in float32 and the
result rounded once to the input's dtype (error at most one rounding, 2**-8
relative for bfloat16); the trunk itself runs under autocast as usual.
"""


import math

import pytest
import torch
import torch.nn.functional as F
from helpers import TOLERANCES, gen, tap_mix_inputs
from torch import nn

import augnet
from augnet import AugmentationLayer, AugNet, selective_regularizer
from augnet.ops import _cpp, tap_mix
from augnet.ops import reference as tap_mix_module
from augnet.transforms import Transform
from augnet.transforms import audio as A
from augnet.transforms import image as T
from augnet.transforms import signal as S

BACKENDS = ["reference"] + (["cpp"] if _cpp.load() else [])
LOW = [torch.bfloat16, torch.float16]
# One rounding of values in [0, 1] (images) or [-2, 2] (signals) to the low-precision dtype.
ROUNDING = {dtype: TOLERANCES["rounding"][dtype]["atol"] for dtype in LOW}
GEOMETRIC = [T.TranslateX, T.TranslateY, T.Rotate, T.ShearX, T.ShearY, T.Scale]
COLOUR = [T.Brightness, T.Contrast, T.Saturation, T.Hue, T.HorizontalFlip, T.VerticalFlip]


def image_layer(backend, transforms=None):
    transforms = transforms or [c() for c in GEOMETRIC + COLOUR]
    return AugmentationLayer(transforms, init_magnitude=0.6, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("training", [True, False])
def test_float32_input_under_autocast_is_exactly_float32(backend, training):
    layer = image_layer(backend).train(training)
    x = torch.rand(6, 3, 11, 9, generator=gen(1))
    expected = layer(x, copies=3, generator=gen(2))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = layer(x, copies=3, generator=gen(2))
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("training", [True, False])
def test_low_precision_input_is_one_rounding_of_float32(backend, dtype, training):
    layer = image_layer(backend).train(training)
    x = torch.rand(6, 3, 11, 9, generator=gen(1)).to(dtype)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = layer(x, copies=3, generator=gen(2))
    expected = layer(x.float(), copies=3, generator=gen(2))
    assert got.dtype == dtype and torch.isfinite(got).all()
    scale = max(1.0, float(expected.detach().abs().max()))
    torch.testing.assert_close(got.float(), expected, rtol=0, atol=ROUNDING[dtype] * scale)
    torch.testing.assert_close(got, expected.to(dtype), rtol=0, atol=0)  # exactly the rounded float32 result


def test_grids_stay_float32_under_autocast(monkeypatch):
    """The reference backend's affine_grid and grid_sample receive float32 under bfloat16 autocast."""
    seen = []
    real_grid, real_sample = tap_mix_module.F.affine_grid, tap_mix_module.F.grid_sample

    def affine_grid(theta, *args, **kwargs):
        grid = real_grid(theta, *args, **kwargs)
        seen.append(("theta", theta.dtype, grid.dtype))
        return grid

    def grid_sample(inp, grid, *args, **kwargs):
        seen.append(("sample", inp.dtype, grid.dtype))
        return real_sample(inp, grid, *args, **kwargs)

    monkeypatch.setattr(tap_mix_module.F, "affine_grid", affine_grid)
    monkeypatch.setattr(tap_mix_module.F, "grid_sample", grid_sample)
    layer = image_layer("reference", [T.Rotate(), T.Scale()])
    for x in (torch.rand(2, 3, 8, 8), torch.rand(2, 3, 8, 8).bfloat16()):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            layer(x, copies=2, generator=gen())
    assert seen and all(kind[1:] == (torch.float32, torch.float32) for kind in seen), seen


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", LOW)
def test_tap_mix_low_precision_and_gradients(backend, dtype):
    x, src, affine, color, weight = tap_mix_inputs(3, 2, 7, 6, 4, 2, torch.float32, seed=3)
    leaves = [t.clone().requires_grad_() for t in (affine, color, weight)]
    xl = x.to(dtype).requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = tap_mix(xl, src, *leaves, padding="border", backend=backend)
    assert out.dtype == dtype and torch.isfinite(out).all()
    ref = tap_mix(x.to(dtype).float(), src, affine, color, weight, padding="border", backend="reference")
    torch.testing.assert_close(out, ref.to(dtype), rtol=0, atol=0)
    out.float().square().sum().backward()
    assert xl.grad.dtype == dtype
    for leaf in leaves:  # float32 parameters keep float32, finite gradients
        assert leaf.grad.dtype == torch.float32 and torch.isfinite(leaf.grad).all()


SIGNAL = [
    S.TimeReverse, S.SignFlip, lambda: S.TimeMask(max_length=10), S.GaussianNoise, S.FTSurrogate,
    lambda: S.FrequencyShift(100.0), lambda: S.BandStop(100.0), S.ChannelsShuffle, S.ChannelsDropout,
    A.AddNoise, A.Gain, A.SpeedChange, lambda: A.LowPass(8000),
]  # fmt: skip


@pytest.mark.parametrize("dtype", [torch.float32, *LOW])
@pytest.mark.parametrize("training", [True, False])
def test_signal_layer_under_autocast(dtype, training):
    """FFT-based transforms have no bfloat16 CPU kernel: the layer's float32 computation makes them work."""
    layer = AugmentationLayer([make() for make in SIGNAL], init_magnitude=0.5).train(training)
    x = (torch.randn(4, 3, 64, generator=gen(7)) * 0.5).clamp(-2, 2)
    expected = layer(x.to(dtype).float(), copies=2, generator=gen(8))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = layer(x.to(dtype), copies=2, generator=gen(8))
    assert got.dtype == dtype and torch.isfinite(got).all()
    torch.testing.assert_close(got, expected.to(dtype), rtol=0, atol=0)


class Trunk(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten())
        self.head = nn.Linear(32, 5)
        self.dtypes = []

    def forward(self, x):
        h = self.net(x)
        self.dtypes.append(h.dtype)
        return self.head(h)


@pytest.mark.parametrize("backend", BACKENDS)
def test_augnet_training_step_under_autocast(backend):
    """The trunk runs in bfloat16, the augmentation in float32; the loss is within bfloat16 error of float32."""
    torch.manual_seed(0)
    model = AugNet(Trunk(), image_layer(backend), train_copies=2)
    x, y = torch.rand(8, 3, 12, 12, generator=gen(9)), torch.randint(0, 5, (8,), generator=gen(10))

    def step(autocast: bool):
        model.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            out = model(x, generator=gen(11))
            loss = F.nll_loss(out, y) + 0.5 * selective_regularizer(model)
        loss.backward()
        return out, loss, [p.grad.clone() for p in model.augment.parameters()]

    out32, loss32, grads32 = step(False)
    assert model.trunk.dtypes[-1] == torch.float32
    out16, loss16, grads16 = step(True)
    assert model.trunk.dtypes[-1] == torch.bfloat16  # autocast reached the trunk
    assert torch.isfinite(out16).all() and torch.isfinite(loss16)
    torch.testing.assert_close(out16.float(), out32, rtol=0, atol=0.05)
    torch.testing.assert_close(loss16.float(), loss32, rtol=0, atol=0.02)
    for g16, g32 in zip(grads16, grads32, strict=True):
        assert g16.dtype == torch.float32 and torch.isfinite(g16).all()
        torch.testing.assert_close(g16, g32, rtol=0.1, atol=0.02)


def test_augerino_under_autocast():
    model = augnet.Augerino(Trunk(), init_width=0.3)
    x = torch.rand(4, 3, 10, 10, generator=gen(12))
    expected = model.augment(x, copies=2, generator=gen(13))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = model.augment(x, copies=2, generator=gen(13))
        got16 = model.augment(x.bfloat16(), copies=2, generator=gen(13))
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    assert got16.dtype == torch.bfloat16
    torch.testing.assert_close(got16.float(), expected, rtol=0, atol=ROUNDING[torch.bfloat16])


@pytest.mark.parametrize("backend", BACKENDS)
def test_float16_autocast_with_a_grad_scaler(backend):
    """What a CUDA user's fp16 step does (autocast float16 and a GradScaler), here on CPU: the augmentation
    gradients, unscaled, are within float16 error of float32; a step that overflows is skipped and the scale
    backs off, the augmentation parameters included."""
    torch.manual_seed(0)
    model = AugNet(Trunk(), image_layer(backend), train_copies=2)
    x, y = torch.rand(8, 3, 12, 12, generator=gen(9)), torch.randint(0, 5, (8,), generator=gen(10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def backward(scaler):
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.float16, enabled=scaler is not None):
            out = model(x, generator=gen(11))
            loss = F.nll_loss(out, y) + 0.5 * selective_regularizer(model)
        if scaler is None:
            loss.backward()
        else:
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
        return loss, [p.grad.clone() for p in model.augment.parameters()]

    loss32, grads32 = backward(None)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10)
    loss16, grads16 = backward(scaler)
    assert model.trunk.dtypes[-1] == torch.float16  # autocast reached the trunk
    torch.testing.assert_close(loss16.float(), loss32, rtol=0, atol=0.02)
    for g16, g32 in zip(grads16, grads32, strict=True):
        assert g16.dtype == torch.float32 and torch.isfinite(g16).all()
        torch.testing.assert_close(g16, g32, rtol=0.1, atol=0.02)
    before = [p.detach().clone() for p in model.augment.parameters()]
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 2.0**10  # no overflow: the scale stays
    assert any(not torch.equal(p, q) for p, q in zip(model.augment.parameters(), before, strict=True))
    # A scale that overflows float16 in the trunk's backward: the step is skipped, the scale halves.
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**40)
    backward(scaler)
    before = [p.detach().clone() for p in model.parameters()]
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 2.0**39
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), before, strict=True))


def test_fit_with_float16_and_its_grad_scaler():
    # fit(amp=torch.float16) makes the GradScaler a CUDA run would; on CPU it runs the same code.
    from augnet.training import fit

    torch.manual_seed(0)
    layer = image_layer("reference", [T.Rotate(), T.TranslateX(), T.Brightness()])
    model = AugNet(Trunk(), layer, train_copies=2)
    x, y = torch.rand(16, 3, 12, 12, generator=gen(9)), torch.randint(0, 5, (16,), generator=gen(10))
    start = layer.raw_magnitudes.detach().clone()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    history = fit(model, x, y, opt, epochs=2, batch_size=8, amp=torch.float16, record_every=1)
    assert model.trunk.dtypes[-1] == torch.float16
    assert all(math.isfinite(v) for v in history["loss"]) and len(history["loss"]) == 4
    assert not torch.equal(layer.raw_magnitudes.detach(), start)


IMAGE_TRANSFORMS = [n for n in T.__all__ if isinstance(getattr(T, n), type) and issubclass(getattr(T, n), Transform)]


@pytest.mark.parametrize("dtype", LOW, ids=["bfloat16", "float16"])
@pytest.mark.parametrize("name", IMAGE_TRANSFORMS)
def test_every_image_transform_on_low_precision_input_is_the_float32_result_rounded(name, dtype):
    # A transform's own call widens as a layer does, its data-dependent parameters too: Contrast took its grey
    # mean of a bfloat16 image in bfloat16 (1.492 for 1.496), 0.016 away from the float32 result rounded.
    t = getattr(T, name)()
    x = (3 * torch.rand(3, 3, 16, 16, generator=gen(0))).to(dtype)
    low = t(x, 0.7, generator=gen(1))
    assert low.dtype == dtype
    assert torch.equal(low, t(x.float(), 0.7, generator=gen(1)).to(dtype))
