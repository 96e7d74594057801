"""No silent wrong results, no crashes, no lost work: each defect of the reliability review, tested.

Each test names the item of the review it covers; every one failed on the code before the fix.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import gen
from torch import nn

import augnet
from augnet import probes
from augnet.ops import tap_mix
from augnet.transforms import audio as A
from augnet.transforms import image as T
from augnet.transforms import signal as S
from augnet.transforms.base import KINK_STEP

F64 = torch.float64
ROOT = Path(__file__).resolve().parents[1]


def images(b=4, ch=3, h=8, w=8, dtype=torch.float32, seed=0):
    return torch.rand(b, ch, h, w, generator=gen(seed), dtype=dtype)


def flat_trunk(classes=4, ch=3, h=8, w=8):
    return nn.Sequential(nn.Flatten(), nn.Linear(ch * h * w, classes))


# ------------------------------------------------------------ 1. trunk rows


class _Bad(nn.Module):
    def __init__(self, how):
        super().__init__()
        self.inner, self.how = flat_trunk(classes=3), how  # 3 classes: a transposed output is never square

    def forward(self, x):
        out = self.inner(x)
        return {
            "first_row": out[:1],
            "batch_mean": out.mean(0, keepdim=True),
            "twice": torch.cat([out, out]),
            "one_less": out[:-1],
            "transposed": out.t(),
        }[self.how]


@pytest.mark.parametrize("how", ["first_row", "batch_mean", "twice", "one_less", "transposed"])
@pytest.mark.parametrize("kind", ["augnet", "augerino"])
@pytest.mark.parametrize("copies", [1, 4])
def test_trunk_with_the_wrong_number_of_rows_is_refused(how, kind, copies):
    trunk = _Bad(how)
    model = augnet.AugNet(trunk, augnet.AugmentationLayer([T.Rotate()])) if kind == "augnet" else augnet.Augerino(trunk)
    with pytest.raises(ValueError, match=rf"for an input of {4 * copies} rows \(4 samples x {copies} copies\)"):
        model(images(), copies=copies)


def test_aggregate_refuses_zero_copies():
    with pytest.raises(ValueError, match="copies must be >= 1"):
        augnet.aggregate(torch.zeros(4, 3), copies=0)


# ------------------------------------------------------------ 2. the kink at magnitude 0


@pytest.mark.parametrize("cls", [T.TranslateX, T.TranslateY, T.Rotate, T.ShearX, T.ShearY, T.Scale])
def test_gradient_at_zero_is_the_one_sided_derivative_in_every_backend(cls):
    x = images(b=3, ch=2, h=9, w=11, dtype=F64)
    r = torch.randn(6, 2, 9, 11, generator=gen(1), dtype=F64)
    t = cls()

    def loss(mag, backend):
        os.environ["AUGNET_BACKEND"] = backend
        try:
            return (t(x, mag, generator=gen(5), copies=2) * r).sum()
        finally:
            del os.environ["AUGNET_BACKEND"]

    grads = {}
    for backend in ("reference", "cpp"):
        mag = torch.tensor(0.0, dtype=F64, requires_grad=True)
        loss(mag, backend).backward()
        grads[backend] = float(mag.grad)
    step = 1e-6
    zero, moved = torch.tensor(0.0, dtype=F64), torch.tensor(step, dtype=F64)
    one_sided = float(loss(moved, "reference") - loss(zero, "reference")) / step
    assert grads["reference"] == pytest.approx(grads["cpp"], rel=1e-9)
    # Exact up to the curvature over one step of KINK_STEP (rotation and zoom are not linear in mu).
    assert grads["reference"] == pytest.approx(one_sided, rel=20 * KINK_STEP, abs=1e-8)


@pytest.mark.parametrize("backend", ["reference", "cpp"])
def test_layer_gradient_at_zero_is_the_one_sided_derivative(backend):
    x = images(b=3, ch=2, h=9, w=11, dtype=F64)
    r = torch.randn(6, 2, 9, 11, generator=gen(1), dtype=F64)
    layer = augnet.AugmentationLayer(
        [T.Rotate(), T.ShearX(), T.Brightness()], init_magnitude=[0.0, 0.0, 0.3], backend=backend
    ).double()
    out = layer(x, copies=2, generator=gen(3))
    assert torch.equal(out, layer(x, copies=2, generator=gen(3)))
    mu = layer.magnitudes
    grad = torch.autograd.grad((layer(x, copies=2, generator=gen(3)) * r).sum(), layer.raw_magnitudes)[0]
    for q in (0, 1):
        with torch.no_grad():
            layer.raw_magnitudes[q] += 1e-6
            moved = layer(x, copies=2, generator=gen(3))
            layer.raw_magnitudes[q] -= 1e-6
        one_sided = float(((moved - out.detach()) * r).sum()) / 1e-6
        if one_sided < 0 or grad[q] != 0:  # the inward clamp drops a gradient that points below 0
            assert float(grad[q]) == pytest.approx(one_sided, rel=20 * KINK_STEP)
    assert mu[0] == 0 and mu[1] == 0


# ------------------------------------------------------------ 3. magnitudes can leave 0


@pytest.mark.parametrize("reg", [augnet.selective_regularizer, augnet.augerino_regularizer])
def test_regularizers_have_the_outward_subgradient_at_zero(reg):
    layer = augnet.AugmentationLayer([T.Rotate(), T.TranslateX(), T.Brightness()], init_magnitude=0.0)
    reg(layer).backward()
    assert (layer.raw_magnitudes.grad < 0).all()  # descent raises every magnitude


def test_a_layer_initialised_at_zero_moves_under_the_regulariser_alone():
    layer = augnet.AugmentationLayer([T.Rotate(), T.Hue(), T.Brightness()], init_magnitude=0.0)
    opt = torch.optim.SGD(layer.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        augnet.selective_regularizer(layer).backward()
        opt.step()
    assert (layer.magnitudes > 0).all()


def _magnitude_gradient_at_zero(t, x):
    mag = torch.tensor(0.0, dtype=F64, requires_grad=True)
    out = t(x, mag, generator=gen(1), copies=2)
    r = torch.randn(out.shape, generator=gen(2), dtype=out.dtype)
    (g,) = torch.autograd.grad((out * r).sum(), mag, allow_unused=True)
    return 0.0 if g is None else float(g)


@pytest.mark.parametrize(
    "make",
    [
        lambda: (S.ChannelsShuffle(), torch.randn(5, 4, 64, generator=gen(0), dtype=F64)),
        lambda: (A.LowPass(8000), torch.randn(5, 2, 64, generator=gen(0), dtype=F64)),
        lambda: (A.HighPass(8000), torch.randn(5, 2, 64, generator=gen(0), dtype=F64)),
        lambda: (A.BandReject(8000), torch.randn(5, 2, 64, generator=gen(0), dtype=F64)),
    ],
    ids=["ChannelsShuffle", "LowPass", "HighPass", "BandReject"],
)
def test_transform_output_has_a_useful_magnitude_gradient_at_zero(make):
    t, x = make()
    out = t(x, 0.0, generator=gen(1), copies=2)
    assert torch.equal(out, x.repeat(2, 1, 1))  # still exactly the identity
    assert abs(_magnitude_gradient_at_zero(t, x)) > 1e-6


# ------------------------------------------------------------ 4, 5. non-finite values


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("what", ["affine", "color", "weight"])
def test_tap_mix_refuses_non_finite_inputs_in_every_backend(bad, what):
    x = images()
    src = torch.arange(4)[:, None]
    args = {"affine": torch.eye(2, 3).expand(4, 1, 2, 3).clone(), "color": torch.eye(3, 4).expand(4, 1, 3, 4).clone(),
            "weight": torch.ones(4, 1)}  # fmt: skip
    args[what].view(-1)[0] = bad
    for backend in ("reference", "cpp"):
        with pytest.raises(ValueError, match=f"{what} contains NaN or infinite"):
            tap_mix(x, src, args["affine"], args["color"], args["weight"], backend=backend)


def test_nan_warp_backward_with_reflection_does_not_crash_the_process():
    # It used to segfault inside grid_sample's backward; in a subprocess so a crash fails the test, not the run.
    code = (
        "import torch, augnet\n"
        "x = torch.rand(2, 3, 6, 6, requires_grad=True)\n"
        "aff = torch.eye(2, 3).expand(2, 1, 2, 3).clone().requires_grad_()\n"
        "aff.data[0, 0, 0, 0] = float('nan')\n"
        "for pad in ('border', 'reflection'):\n"
        "    try:\n"
        "        y = augnet.tap_mix(x, torch.arange(2)[:, None], aff, None, torch.ones(2, 1), pad, 'reference')\n"
        "        y.sum().backward()\n"
        "    except ValueError as e:\n"
        "        print('refused', e)\n"
        "m = augnet.Augerino(torch.nn.Flatten(), backend='reference', padding='reflection')\n"
        "with torch.no_grad():\n"
        "    m.augment.raw_width[0] = float('nan')\n"
        "try:\n"
        "    m(torch.rand(2, 3, 6, 6)).sum().backward()\n"
        "except ValueError as e:\n"
        "    print('refused', e)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("refused") == 3, proc.stdout


def test_augerino_with_a_nan_width_is_refused():
    model = augnet.Augerino(flat_trunk())
    with torch.no_grad():
        model.augment.raw_width[2] = math.nan
    with pytest.raises(ValueError, match="Augerino widths contain NaN"):
        model(images())


def test_temperatures_whose_softmax_is_not_finite_are_refused():
    with pytest.raises(ValueError, match="temperature 1e-300 is too small"):
        augnet.AugmentationLayer([T.Rotate(), T.Hue()], temperature=1e-300)
    layer = augnet.AugmentationLayer([T.Rotate(), T.Hue()], temperature=1e-38)
    with torch.no_grad():
        layer.weight_logits[0] = 10.0  # 10 / 1e-38 overflows float32
    with pytest.raises(ValueError, match="raise the temperature"):
        layer.eval()(images())


@pytest.mark.parametrize("value", [1e38, -1e38, 1e30])
def test_extreme_finite_warps_with_reflection_stay_finite_in_every_backend(value):
    x = images(b=2)
    aff = torch.eye(2, 3).expand(2, 1, 2, 3).clone()
    aff[0, 0, 0, 0] = value
    aff[1, 0, 1, 2] = value
    for backend in ("reference", "cpp"):
        out = tap_mix(x, torch.arange(2)[:, None], aff, None, torch.ones(2, 1), "reflection", backend)
        assert torch.isfinite(out).all(), backend


# ------------------------------------------------------------ 6. meta tensors


def test_meta_tensors_give_shapes():
    x = torch.empty(4, 3, 8, 8, device="meta")
    layer = augnet.AugmentationLayer([T.Rotate(), T.Brightness(), T.SamplePairing()])
    assert layer(x, copies=2).shape == (8, 3, 8, 8)
    assert layer.eval()(x, copies=2).shape == (8, 3, 8, 8)
    trunk = flat_trunk(5).to("meta")
    assert augnet.AugNet(trunk, augnet.AugmentationLayer([T.Rotate()]))(x).shape == (4, 5)
    assert augnet.Augerino(trunk).to("meta")(x).shape == (4, 5)
    src = torch.zeros(4, 1, dtype=torch.long, device="meta")
    assert tap_mix(x, src, torch.empty(4, 1, 2, 3, device="meta"), None, torch.empty(4, 1, device="meta")).shape == (
        4, 3, 8, 8,
    )  # fmt: skip
    signal = augnet.AugmentationLayer([S.TimeReverse(), S.GaussianNoise()])
    assert signal(torch.empty(2, 3, 50, device="meta"), copies=3).shape == (6, 3, 50)


# ------------------------------------------------------------ 7. empty inputs


@pytest.mark.parametrize(
    "make",
    [
        lambda: (T.Rotate(), torch.rand(2, 3, 5, 0)),
        lambda: (T.ShearX(), torch.rand(2, 3, 5, 0)),
        lambda: (T.ShearY(), torch.rand(2, 3, 0, 5)),
        lambda: (S.BandStop(100.0), torch.rand(2, 3, 0)),
        lambda: (S.FTSurrogate(), torch.rand(2, 3, 0)),
        lambda: (T.Brightness(), torch.rand(2, 0, 4, 4)),
    ],
)
def test_empty_non_batch_dimensions_are_a_clear_error(make):
    t, x = make()
    with pytest.raises(ValueError, match="empty non-batch dimension"):
        t(x, 0.5)
    with pytest.raises(ValueError, match="empty non-batch dimension"):
        augnet.AugmentationLayer([t])(x)


def test_tap_mix_with_an_empty_channel_or_spatial_dimension_is_one_clear_error():
    for shape in ((2, 0, 4, 4), (2, 3, 0, 4), (2, 3, 4, 0)):
        for backend in ("reference", "cpp"):
            with pytest.raises(ValueError, match="empty channel or spatial dimension"):
                tap_mix(torch.rand(shape), torch.zeros(2, 1, dtype=torch.long), torch.eye(2, 3).expand(2, 1, 2, 3),
                        None, torch.ones(2, 1), backend=backend)  # fmt: skip


def test_empty_batch_results_stay_in_the_graph():
    x = torch.rand(0, 3, 4, 4, requires_grad=True)
    w = torch.ones(0, 1, requires_grad=True)
    out = tap_mix(x, torch.zeros(0, 1, dtype=torch.long), torch.eye(2, 3).expand(0, 1, 2, 3), None, w)
    assert out.shape == (0, 3, 4, 4) and out.requires_grad
    out.sum().backward()
    assert x.grad.shape == x.shape and w.grad.shape == w.shape
    layer = augnet.AugmentationLayer([T.Rotate()])
    y = layer(x, copies=2)
    assert y.shape == (0, 3, 4, 4)
    y.sum().backward()
    assert layer.raw_magnitudes.grad is not None


# ------------------------------------------------------------ 8. half precision, probe inputs


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_ft_surrogate_in_half_precision(dtype):
    x = torch.randn(3, 2, 64, generator=gen(0)).to(dtype)
    out = S.FTSurrogate()(x, 0.5, generator=gen(1))
    assert out.dtype == dtype and torch.isfinite(out.float()).all()
    ref = S.FTSurrogate()(x.float(), 0.5, generator=gen(1))
    torch.testing.assert_close(out.float(), ref, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize(
    ("permutation", "error", "match"),
    [
        (torch.tensor([1, 2, 3, -1]), ValueError, "must be a permutation of 0..3"),
        (torch.tensor([1, 2, 0]), ValueError, r"must have shape \(4,\)"),
        (torch.tensor([1, 0, 3, 2, 4]), ValueError, r"must have shape \(4,\)"),
        (torch.tensor([1, 1, 3, 2]), ValueError, "must be a permutation"),
        (torch.tensor([1.0, 0.0, 3.0, 2.0]), TypeError, "integer tensor"),
    ],
)
def test_invariance_score_checks_the_permutation(permutation, error, match):
    z = torch.randn(4, 6, generator=gen(0))
    with pytest.raises(error, match=match):
        probes.invariance_score(z, z + 0.1, permutation=permutation)


# ------------------------------------------------------------ 9. constructor checks


@pytest.mark.parametrize(
    ("build", "error", "match"),
    [
        (lambda: augnet.Augerino(nn.Flatten(), init_width="0.1"), TypeError, "init_width must be a number"),
        (lambda: augnet.Augerino(nn.Flatten(), init_width=None), TypeError, "init_width must be a number"),
        (lambda: augnet.Augerino(nn.Flatten(), init_width=True), TypeError, "init_width must be a number"),
        (lambda: augnet.Augerino(nn.Flatten(), padding="zero"), ValueError, "padding must be one of"),
        (lambda: S.ChannelsSymmetry([(0.5, 1)]), TypeError, "integer channel indices"),
        (lambda: augnet.AugmentationLayer([T.Rotate(), T.Hue()], init_magnitude=[True, 0.5]), TypeError,
         "init_magnitude values must be numbers"),
        (lambda: augnet.LambdaSchedule((math.nan,), ()), ValueError, "finite and non-negative"),
    ],
)  # fmt: skip
def test_bad_constructor_arguments_are_refused_at_construction(build, error, match):
    with pytest.raises(error, match=match):
        build()


# ------------------------------------------------------------ 10. the command line


def run_cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "augnet", *args], capture_output=True, text=True, cwd=cwd, timeout=300)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["demo", "--threads", "0"], "--threads must be >= 1, got 0"),
        (["demo", "--threads", "-2"], "--threads must be >= 1, got -2"),
        (["demo", "--epochs", "0"], "--epochs must be >= 1"),
        (["bench", "--batch", "0"], "--batch must be >= 1"),
        (["bench", "--min-time", "0"], "--min-time must be > 0"),
        (["bench", "--min-time", "inf"], "--min-time must be > 0 and finite, got inf"),  # timed forever
        (["reproduce", "copies", "--threads", "0"], "--threads must be >= 1"),
    ],
)
def test_bad_arguments_are_one_line_errors_before_any_work(args, message):
    proc = run_cli(*args)
    assert proc.returncode == 2
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("command", [["demo"], ["bench", "--quick"], ["reproduce", "copies", "--quick"]])
def test_an_unusable_output_folder_is_refused_before_any_work(tmp_path, command):
    existing_file = tmp_path / "taken"
    existing_file.write_text("not a folder")
    for out, message in ((existing_file, "is an existing file"), (existing_file / "sub", "cannot create")):
        proc = run_cli(*command, "--out", str(out))
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert message in proc.stderr and "Traceback" not in proc.stderr
        assert proc.stdout == ""  # nothing was trained or timed


def test_python_dash_m_augnet_is_the_command():
    proc = run_cli("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"augnet {augnet.__version__}"
