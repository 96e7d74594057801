"""Memory formats, dtypes and autocast: what a user of a PyTorch library expects to hold.

Inputs in channels-last, transposed, sliced and expanded (stride 0) layouts give the contiguous input's values and
gradients, and the caller's tensors are never written; float64 gradchecks through every CPU backend; models cast
with ``.half()`` / ``.bfloat16()`` draw in float32, exactly as their state rebuilt in float32 does; magnitude 0 is
the identity in every format and dtype; a bfloat16 AugNet step and an autocast step of a ResNet-18 run with finite
gradients; a float32 state dict loads into a bfloat16 copy and back.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from helpers import gen
from torch import nn
from torch.func import functional_call
from transform_cases import CASES

import augnet
from augnet import AugmentationLayer, AugmentationModule, AugNet, selective_regularizer
from augnet.augerino import LieAugmentation
from augnet.effects import measure_effects
from augnet.instance import ConditionedAugmentationLayer
from augnet.ops import _cpp, tap_mix
from augnet.transforms import image as T
from augnet.transforms import signal as S

BACKENDS = ["reference"] + (["cpp"] if _cpp.load() else [])
LOW = [torch.bfloat16, torch.float16]
F64 = torch.float64


def layouts(x: torch.Tensor) -> dict[str, torch.Tensor]:
    """``x``'s values in other memory layouts: channels-last, a transposed view, a strided slice of a buffer."""
    out = {}
    if x.dim() == 4:
        out["channels_last"] = x.contiguous(memory_format=torch.channels_last)
    out["transposed"] = x.transpose(-1, -2).contiguous().transpose(-1, -2)
    buffer = torch.zeros(x.shape[0], 2 * x.shape[1], *x.shape[2:], dtype=x.dtype)
    out["sliced"] = buffer[:, ::2]
    out["sliced"].copy_(x)
    return out


def values_and_grads(module, x, copies=2, seed=5):
    x = x.detach().requires_grad_()
    out = module(x, copies=copies, generator=gen(seed))
    grads = torch.autograd.grad(out.square().sum(), [x, *module.parameters()], allow_unused=True)
    return out.detach(), grads


def image_layer(backend, mode="sample"):
    transforms = [T.Rotate(), T.TranslateX(), T.Scale(), T.Brightness(), T.Hue(), T.HorizontalFlip(), T.Sharpness()]
    return AugmentationLayer(transforms, init_magnitude=0.6, backend=backend, train_mode=mode, eval_mode=mode)


def signal_layer(mode="sample"):
    transforms = [S.TimeReverse(), S.TimeMask(max_length=10), S.GaussianNoise(), S.FTSurrogate(), S.BandStop(100.0),
                  S.ChannelsShuffle()]  # fmt: skip
    return AugmentationLayer(transforms, init_magnitude=0.5, train_mode=mode, eval_mode=mode)


class Trunk(nn.Module):
    def __init__(self, classes=5):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(2),
                                 nn.Flatten(), nn.Linear(32, classes))  # fmt: skip

    def forward(self, x):
        return self.net(x)


# ------------------------------------------------------------------ layouts


def _modules():
    for backend in BACKENDS:
        for mode in ("sample", "mix"):
            yield f"image-{backend}-{mode}", lambda b=backend, m=mode: image_layer(b, m), (4, 3, 9, 11)
        yield (
            f"module-{backend}",
            lambda b=backend: AugmentationModule(
                [AugmentationLayer([T.Rotate(), T.Contrast()], backend=b), AugmentationLayer([T.ShearX()], backend=b)]
            ),
            (4, 3, 9, 11),
        )
        yield f"augerino-{backend}", lambda b=backend: LieAugmentation(0.3, "reflection", b), (4, 3, 9, 11)
    yield "signal-mix", lambda: signal_layer("mix"), (4, 5, 64)

    def conditioned():
        torch.manual_seed(0)
        layer = ConditionedAugmentationLayer([T.Rotate(), T.Brightness(), T.HorizontalFlip()], channels=3)
        nn.init.normal_(layer.conditioner.head.weight, std=0.5)
        return layer

    yield "conditioned", conditioned, (4, 3, 9, 11)


MODULES = list(_modules())


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("make,shape", [m[1:] for m in MODULES], ids=[m[0] for m in MODULES])
def test_every_layout_gives_the_contiguous_values_and_gradients_and_writes_nothing(make, shape, training):
    module = make().train(training)
    x = torch.rand(*shape, generator=gen(0)) if len(shape) == 4 else torch.randn(*shape, generator=gen(0))
    tol = dict(rtol=0, atol=0)
    if "conditioner" in dict(module.named_children()):
        # A convolution (the conditioner's) sums in another order in another layout: compared in float64.
        module, x, tol = module.double(), x.double(), dict(rtol=1e-10, atol=1e-10)
    if training:  # a conditioner's running statistics: set once, so that every call below sees the same
        module(x, copies=2, generator=gen(1))
    expected, expected_grads = values_and_grads(module, x)
    for name, view in layouts(x).items():
        kept = view.clone()
        got, grads = values_and_grads(module, view)
        torch.testing.assert_close(got, expected, **tol, msg=name)
        for g, e in zip(grads, expected_grads, strict=True):
            torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5, msg=name)
        assert torch.equal(view, kept), name
    if not training:  # expanded (stride 0) rows: the values of the materialised batch
        expanded = x[:1].expand_as(x)
        torch.testing.assert_close(module(expanded, copies=2, generator=gen(2)),
                                   module(expanded.contiguous(), copies=2, generator=gen(2)), **tol)  # fmt: skip


@pytest.mark.parametrize("backend", BACKENDS)
def test_tap_mix_takes_expanded_and_strided_arguments(backend):
    g = gen(3)
    x = torch.rand(3, 3, 7, 9, generator=g, dtype=F64)
    src = torch.randint(0, 3, (8, 4), generator=g)
    affine = torch.eye(2, 3, dtype=F64) + 0.3 * torch.randn(8, 1, 2, 3, generator=g, dtype=F64)
    color = torch.eye(3, 4, dtype=F64) + 0.2 * torch.randn(1, 4, 3, 4, generator=g, dtype=F64)
    weight = torch.rand(8, 1, generator=g, dtype=F64)
    xe = x[:1].expand(3, -1, -1, -1)
    args = (xe, affine.expand(-1, 4, -1, -1), color.expand(8, -1, -1, -1), weight.expand(-1, 4))
    contiguous = [t.contiguous() for t in args]
    probe = torch.randn(8, 3, 7, 9, generator=g, dtype=F64)

    def run(ts):
        ts = [t.detach().requires_grad_() for t in ts]
        out = tap_mix(ts[0], src, *ts[1:], padding="border", backend=backend)
        return out, torch.autograd.grad((out * probe).sum(), ts)

    out, grads = run(args)
    expected, expected_grads = run(contiguous)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)
    for got, want in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    assert args[0].stride(0) == 0  # the caller's expanded view is still one row


@pytest.mark.parametrize("backend", BACKENDS)
def test_layer_gradcheck_in_float64_in_channels_last(backend):
    layer = AugmentationLayer([T.TranslateX(), T.Rotate(), T.Scale(), T.Contrast(), T.Hue(), T.SamplePairing()],
                              train_mode="mix", backend=backend).double()  # fmt: skip
    x = torch.rand(2, 3, 5, 4, dtype=F64, generator=gen(0)).contiguous(memory_format=torch.channels_last)
    logits = torch.randn(6, dtype=F64, generator=gen(1)).requires_grad_()
    raw = torch.linspace(0.2, 0.8, 6, dtype=F64).requires_grad_()

    def f(x, logits, raw):
        return functional_call(layer, {"weight_logits": logits, "raw_magnitudes": raw}, (x,),
                               {"copies": 2, "generator": gen(4)})  # fmt: skip

    assert torch.autograd.gradcheck(f, (x.requires_grad_(), logits, raw), eps=1e-6, atol=1e-5, fast_mode=True)


def test_augerino_gradcheck_in_float64():
    lie = LieAugmentation(0.3, padding="border").double()
    x = torch.rand(2, 3, 5, 4, dtype=F64, generator=gen(0)).transpose(2, 3).contiguous().transpose(2, 3)
    raw = lie.raw_width.detach().clone().requires_grad_()

    def f(x, raw):
        return functional_call(lie, {"raw_width": raw}, (x,), {"copies": 2, "generator": gen(3)})

    assert torch.autograd.gradcheck(f, (x.requires_grad_(), raw), eps=1e-6, atol=1e-5)


# --------------------------------------------------- the caller's tensors


class InPlaceCentre(nn.Module):
    """A trunk's first step that works in place on its input (as ``nn.ReLU(inplace=True)`` would)."""

    def forward(self, x):
        return x.sub_(0.5)


def test_measuring_effects_never_writes_the_callers_batch():
    # The trunk sees only augmented rows in training, but measure_effects ran it on the caller's clean batch itself:
    # a trunk that centres its input in place shifted the caller's data by 0.5 every effect_every steps.
    trunk = nn.Sequential(InPlaceCentre(), nn.Conv2d(3, 4, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3))
    model = AugNet(trunk, AugmentationLayer([T.Rotate(), T.Brightness()]), train_copies=2)
    data = torch.rand(8, 3, 8, 8, generator=gen(0))
    kept = data.clone()
    model(data[:4], generator=gen(1))  # the first training pass measures the effects
    assert bool(model.augment.layers[0].effect_measured)
    assert torch.equal(data, kept)
    model.measure_effects(data)
    assert torch.equal(data, kept)
    measure_effects(trunk, [model.augment.layers[0]], data, rows=None)  # called directly too
    assert torch.equal(data, kept)


def test_calibrating_with_features_never_writes_the_callers_batch():
    data = torch.rand(8, 3, 8, 8, generator=gen(0))
    kept = data.clone()
    layer = AugmentationLayer([T.Rotate(), T.Brightness()])
    curves = layer.calibrate(data, features=nn.Sequential(InPlaceCentre(), nn.Flatten()))
    assert torch.equal(data, kept) and torch.isfinite(curves).all()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_no_transform_or_layer_returns_the_callers_storage(case):
    x = case.make(3, torch.float32)
    for magnitude in (0.0, torch.tensor(0.0, requires_grad=True), 0.5):
        out = case.build()(x, magnitude, generator=gen(1))
        assert out.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
    for training in (True, False):
        layer = AugmentationLayer([case.build()], init_magnitude=0.0).train(training)
        out = layer(x, generator=gen(2))
        assert out.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()


# ------------------------------------------------------ low-precision parameters


@pytest.mark.parametrize("dtype", LOW, ids=["bfloat16", "float16"])
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_low_precision_magnitude_is_drawn_with_in_float32(case, dtype):
    # A bfloat16 magnitude of 0.5 (exact) drew in bfloat16: Rotate's angle 0.5 * pi rounded to 1.5703 (1.6e-3 in
    # the output), a float16 one likewise; a layer widens its magnitudes, a transform's own call did not.
    x = case.make(3, torch.float32)
    t = case.build()
    low = torch.tensor(0.5, dtype=dtype, requires_grad=True)
    full = torch.tensor(0.5, requires_grad=True)
    got, expected = t(x, low, generator=gen(1)), t(x, full, generator=gen(1))
    assert got.dtype == x.dtype
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    got.square().sum().backward()
    expected.square().sum().backward()
    assert low.grad.dtype == dtype
    torch.testing.assert_close(low.grad, full.grad.to(dtype), rtol=0, atol=0)


def _augmentations():
    def layer():
        return AugmentationLayer([T.Rotate(), T.TranslateX(), T.Brightness()], init_magnitude=[0.3, 0.61, 0.77])

    def lie():
        return LieAugmentation([0.1, 0.2, 0.3, 0.15, 0.05, 0.33])

    def conditioned():  # the head starts at 0: its output is exactly 0 in any dtype
        return ConditionedAugmentationLayer([T.Rotate(), T.TranslateX(), T.Brightness()], channels=3,
                                            init_magnitude=[0.3, 0.61, 0.77])  # fmt: skip

    return {"layer": layer, "augerino": lie, "conditioned": conditioned}


AUGMENTATIONS = _augmentations()


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("dtype", LOW, ids=["bfloat16", "float16"])
@pytest.mark.parametrize("kind", list(AUGMENTATIONS))
def test_a_low_precision_model_augments_as_its_state_rebuilt_in_float32(kind, dtype, training):
    # A global layer widens its parameters; Augerino's widths (softplus in bfloat16) and a conditioned layer's
    # per-sample weights and magnitudes (softmax, clamp and the draws in bfloat16) did not: 4e-3 and 2e-3 apart.
    torch.manual_seed(0)
    low = AUGMENTATIONS[kind]().to(dtype).train(training)
    torch.manual_seed(0)
    rebuilt = AUGMENTATIONS[kind]().train(training)
    rebuilt.load_state_dict(low.state_dict())
    x = torch.rand(4, 3, 16, 16, generator=gen(0))
    for inputs in (x, x.to(dtype)):
        got = low(inputs, copies=2, generator=gen(1))
        assert got.dtype == inputs.dtype
        torch.testing.assert_close(got, rebuilt(inputs, copies=2, generator=gen(1)), rtol=0, atol=0)
    assert low.magnitudes.dtype == torch.float32
    if kind == "conditioned":
        w, mu = low.sample_policy(x)
        assert w.dtype == mu.dtype == torch.float32
        torch.testing.assert_close((w, mu), rebuilt.sample_policy(x), rtol=0, atol=0)


# ------------------------------------------------------------- magnitude 0


@pytest.mark.parametrize("dtype", [torch.float32, F64, *LOW], ids=["float32", "float64", "bfloat16", "float16"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_magnitude_zero_is_the_identity_in_every_layout_and_dtype(backend, dtype):
    # 32 x 32: a size where an identity warp's sampling coordinates are exact (torch's affine_grid rounds them at
    # 16 x 16, by 6e-7 in the reference backend: the rounding bad_input.md documents at other sizes).
    x = torch.rand(3, 3, 32, 32, generator=gen(0)).to(dtype)
    transforms = [T.Rotate(), T.TranslateY(), T.ShearX(), T.Scale(), T.HorizontalFlip(), T.Brightness(),
                  T.Saturation(), T.Sharpness(), T.Posterize()]  # fmt: skip
    expected = torch.cat([x, x])
    for model_dtype in {torch.float32, dtype if dtype in LOW else torch.float32}:
        for training, mode in ((True, "sample"), (True, "mix"), (False, "sample"), (False, "mix")):
            layer = AugmentationLayer(transforms, init_magnitude=0.0, backend=backend, train_mode=mode,
                                      eval_mode=mode).to(model_dtype).train(training)  # fmt: skip
            for name, view in {"contiguous": x, **layouts(x), "expanded": x[:1].expand_as(x)}.items():
                want = expected if name != "expanded" else torch.cat([view, view]).contiguous()
                got = layer(view, copies=2, generator=gen(1))
                assert got.dtype == dtype, name
                # A blend ("mix") is x times the weights' sum, 1 only to the rounding of the (float32) weights:
                # within a few of their ulps (rounded away in float16 / bfloat16); "sample" is exact.
                # The reference backend's identity grid (torch's affine_grid) is exact at 32 x 32 in float32, to
                # 3e-15 in float64: the sampling rounding bad_input.md documents.
                rtol = 4 * torch.finfo(torch.float32).eps if mode == "mix" and dtype not in LOW else 0
                atol = 16 * torch.finfo(dtype).eps if backend == "reference" and dtype == F64 else 0
                where = f"{name} {mode} {training}"
                torch.testing.assert_close(got, want, rtol=rtol, atol=atol, msg=lambda m, where=where: f"{where}: {m}")
    lie = LieAugmentation(0.1, backend=backend)
    with torch.no_grad():
        lie.raw_width.fill_(-1e4)  # widths exactly 0
    got = lie(x.contiguous(memory_format=torch.channels_last), copies=2)
    torch.testing.assert_close(got, expected, rtol=0, atol=16 * torch.finfo(dtype).eps if dtype == F64 else 0)


# ---------------------------------------------------- whole models, dtypes


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", LOW, ids=["bfloat16", "float16"])
def test_a_model_cast_to_low_precision_trains(backend, dtype):
    torch.manual_seed(0)
    model = AugNet(Trunk(), image_layer(backend), train_copies=2).to(dtype)
    x, y = torch.rand(6, 3, 12, 12, generator=gen(0)).to(dtype), torch.randint(0, 5, (6,), generator=gen(1))
    out = model(x, generator=gen(2))
    loss = F.nll_loss(out, y) + 0.5 * selective_regularizer(model)
    loss.backward()
    assert out.dtype == dtype and torch.isfinite(loss)
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.dtype == dtype and torch.isfinite(p.grad).all(), name
    model.eval()
    assert torch.isfinite(model(x, generator=gen(3))).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_resnet18_training_step_under_bfloat16_autocast_in_channels_last(backend):
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    model = AugNet(torchvision.models.resnet18(num_classes=10), image_layer(backend), train_copies=1)
    model = model.to(memory_format=torch.channels_last)
    x = torch.rand(2, 3, 32, 32, generator=gen(0)).contiguous(memory_format=torch.channels_last)
    y = torch.tensor([1, 3])
    torch.manual_seed(0)
    plain = AugNet(torchvision.models.resnet18(num_classes=10), image_layer(backend), train_copies=1).eval()
    torch.testing.assert_close(model.eval()(x, generator=gen(2)), plain(x.contiguous(), generator=gen(2)),
                               rtol=1e-4, atol=1e-4)  # fmt: skip
    model.train()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(x, generator=gen(1))
        loss = F.nll_loss(out, y) + 0.5 * selective_regularizer(model)
    loss.backward()
    assert out.dtype == torch.bfloat16 and torch.isfinite(loss)
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.dtype == torch.float32 and torch.isfinite(p.grad).all(), name


@pytest.mark.parametrize("kind", ["augnet", "augerino", "conditioned"])
def test_a_float32_state_dict_loads_into_a_bfloat16_copy_and_back(kind):
    def make():
        torch.manual_seed(0)
        if kind == "augerino":
            return augnet.Augerino(Trunk(), init_width=0.123)
        if kind == "conditioned":
            return AugNet(Trunk(), ConditionedAugmentationLayer([T.Rotate(), T.Brightness()], channels=3), 2)
        layer = AugmentationLayer([T.Rotate(), T.Brightness(), T.TranslateX()], init_magnitude=[0.25, 0.5, 0.75])
        return AugNet(Trunk(), layer, train_copies=2)

    x = torch.rand(4, 3, 12, 12, generator=gen(0))
    model = make()
    if kind == "augnet":
        model.augment.layers[0].calibrate(x)
    model(x, generator=gen(1))  # measures the effects, sets the sizes and the statistics
    state = copy.deepcopy(model.state_dict())
    low = make().bfloat16()
    low.load_state_dict(state)
    back = make()
    back.load_state_dict(low.state_dict())
    for key, value in state.items():
        got = back.state_dict()[key]
        assert got.dtype == value.dtype, key
        if value.is_floating_point():  # one rounding to bfloat16
            torch.testing.assert_close(got, value, rtol=2**-8, atol=1e-6, msg=key)
        else:  # the layers' temperature and size, the pass count: exact
            assert torch.equal(got, value), key
    assert back.passes == model.passes == 1
    low.eval()
    out = low(x.bfloat16(), generator=gen(2))
    assert out.dtype == torch.bfloat16 and torch.isfinite(out).all()
