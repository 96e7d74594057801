"""The GPU code path, checked on the CPU: gradients at the kink, host synchronisations, bad input.

Two tools of ``tests/syncs.py`` make the GPU path run here: :class:`PretendCuda`
(CPU tensors that say they are on ``cuda:0``: every CPU-only shortcut is
skipped, the values are still computed) and :class:`SyncRecorder` (the
``meta`` device, with every read back, blocking copy and data-dependent shape
recorded with its ``augnet/`` file and line).
"""

from __future__ import annotations

import pytest
import torch
from helpers import gen
from syncs import PretendCuda, SyncRecorder, count, evaluations, fit_syncs, scenarios

import augnet
from augnet.transforms import image as T
from augnet.transforms.base import KINK_STEP

F64 = torch.float64
WARPS = [T.TranslateX, T.TranslateY, T.Rotate, T.ShearX, T.ShearY, T.Scale]


def _images(b=3, ch=2, h=9, w=11):
    return torch.rand(b, ch, h, w, generator=gen(0), dtype=F64)


# ------------------------------------------------------------ the kink at magnitude 0, on the GPU path


@pytest.mark.parametrize("cls", WARPS)
def test_transform_gradient_at_zero_is_one_sided_on_the_gpu_path(cls, monkeypatch):
    # Before: the one-sided derivative was taken only where the magnitude lived on the CPU; on a GPU the
    # gradient at 0 was whatever the rounding of the pixel centres gave (0 for the translations).
    monkeypatch.setenv("AUGNET_BACKEND", "reference")  # "auto" would pick a GPU kernel for a "CUDA" tensor
    x, t = _images(), cls()
    r = torch.randn(6, 2, 9, 11, generator=gen(1), dtype=F64)

    def loss(mag):
        return (t(x, mag, generator=gen(5), copies=2) * r).sum()

    grads = []
    for pretend in (False, True):
        mag = torch.tensor(0.0, dtype=F64, requires_grad=True)
        with PretendCuda() if pretend else torch.enable_grad():
            value = loss(mag)
        value.backward()
        grads.append(float(mag.grad))
    step = 1e-6
    one_sided = float(loss(torch.tensor(step, dtype=F64)) - loss(torch.tensor(0.0, dtype=F64))) / step
    assert grads[1] == grads[0]
    assert grads[1] == pytest.approx(one_sided, rel=20 * KINK_STEP, abs=1e-8)
    assert abs(one_sided) > 1e-3  # a real slope, not a vanishing one


@pytest.mark.parametrize("backend", ["reference", "cpp"])
def test_layer_gradient_at_zero_is_one_sided_on_the_gpu_path(backend):
    # The layer's fused path: five warps at exactly 0 (and a colour map away from it) in one tap_mix call. The
    # compiled CPU kernel cannot take a tensor that says it is on CUDA: with it, the CPU run is checked alone.
    x = _images()
    r = torch.randn(6, 2, 9, 11, generator=gen(1), dtype=F64)
    warps = [T.TranslateX(), T.TranslateY(), T.Rotate(), T.ShearX(), T.ShearY()]
    layer = augnet.AugmentationLayer([*warps, T.Brightness()], init_magnitude=[0.0] * 5 + [0.3], backend=backend)
    layer = layer.double()

    def task_gradient(sign, pretend):
        # The gradient of the magnitudes themselves (before the inward clamp, which drops outward pushes at 0).
        with PretendCuda() if pretend and backend == "reference" else torch.enable_grad():
            mu = layer.magnitudes.detach().requires_grad_()
            layer_mu = type(layer).magnitudes
            try:
                type(layer).magnitudes = property(lambda self: mu)
                out = layer(x, copies=2, generator=gen(3))
            finally:
                type(layer).magnitudes = layer_mu
            (sign * out * r).sum().backward()
        return mu.grad

    cpu, gpu_path = task_gradient(1.0, False), task_gradient(1.0, True)
    torch.testing.assert_close(gpu_path, cpu, rtol=1e-12, atol=1e-12)
    with torch.no_grad():
        base = layer(x, copies=2, generator=gen(3))
        for q in range(5):
            layer.raw_magnitudes[q] += 1e-6
            moved = layer(x, copies=2, generator=gen(3))
            layer.raw_magnitudes[q] -= 1e-6
            one_sided = float(((moved - base) * r).sum()) / 1e-6
            assert float(gpu_path[q]) == pytest.approx(one_sided, rel=20 * KINK_STEP, abs=1e-8), q


def test_layer_at_zero_is_the_identity_with_the_kink_tap():
    # The identity tap weighted by sum_q w_q (1 - gate_q) gives back x exactly where every magnitude is 0.
    x = _images()
    layer = augnet.AugmentationLayer([T.Rotate(), T.ShearX()], init_magnitude=0.0).double()
    out = layer(x, copies=2, generator=gen(3))
    torch.testing.assert_close(out, x.repeat(2, 1, 1, 1), rtol=0, atol=1e-12)


# ------------------------------------------------------------ host synchronisations


@pytest.mark.parametrize("kind", list(scenarios()))
def test_a_training_step_makes_no_host_synchronisation(kind):
    step = scenarios()[kind]()
    with SyncRecorder() as rec:
        step()
    assert not rec.syncs, f"{kind}: {len(rec.syncs)} synchronisations per training step:\n{rec.summary()}"


@pytest.mark.parametrize("kind", list(evaluations()))
def test_an_evaluation_forward_makes_no_host_synchronisation(kind):
    # Each copy draws one transform (select_taps' index lists used to be copied from the host on every call).
    forward = evaluations()[kind]()
    with torch.no_grad(), SyncRecorder() as rec:
        forward()
    assert not rec.syncs, f"{kind}: {len(rec.syncs)} synchronisations per evaluation call:\n{rec.summary()}"


def test_count_covers_every_kind_and_runs():
    results = count()
    assert {"tap: geometric", "tap: colour", "generic: image", "signal", "audio", "Augerino"} <= set(results)
    assert all(not any(s.kind.startswith("stopped") for s in r.syncs) for r in results.values())


def test_the_recorder_finds_each_kind_of_synchronisation():
    # A test must be able to fail: every kind the recorder looks for, named with its line here.
    t = torch.rand(4, device="meta")
    with SyncRecorder() as rec:
        float(t.sum())
        t.tolist()
        torch.tensor([1.0, 2.0], device="meta")
        torch.ones(3).to("meta")
        _ = t[t > 0]
        t.nonzero()
        bool((t > 0).any())
        torch.linalg.matrix_exp(torch.rand(2, 3, 3, device="meta"))
        t[0] = 1.0  # one element from a host number (found on an H200: flips and signal layers did this)
        t[1] = torch.tensor(2.0)
        t[2] = torch.tensor([2.0])  # a one-element host tensor, viewed down to the element and copied
        t[3].copy_(torch.tensor(1.0))
    kinds = [s.kind.split(" (")[0] for s in rec.syncs]
    assert kinds == [
        "read of a value",
        "copy from the device to the host",
        "blocking copy from the host to the device",
        "blocking copy from the host to the device",
        "boolean-mask indexing",
        "data-dependent output size: nonzero",
        "read of a value",
        "read back inside the op: linalg.matrix_exp",
        "blocking copy from the host to the device",
        "blocking copy from the host to the device",
        "blocking copy from the host to the device",
        "blocking copy from the host to the device",
    ]
    assert all(s.where.startswith("test_gpu_path.py:") for s in rec.syncs), rec.summary()
    with SyncRecorder() as rec:
        torch.ones(3).to("meta", non_blocking=True)
        torch.ones(3).sum().item()  # a CPU tensor: no device involved
        t[1:3] = 2.0  # a slice is filled, not copied into
        t[0].fill_(3.0)
        t[torch.full((1,), 2, device="meta")] = t[:1]
        torch.zeros(2)[0] = 1.0
    assert not rec.syncs, rec.summary()


@pytest.mark.parametrize("progress", [False, True])
def test_fit_synchronises_only_at_record_steps(progress):
    # Steps 2 to 4 are not record steps (record_every=100): they add nothing to what step 1 costs.
    one, four = fit_syncs(1, 100, progress), fit_syncs(4, 100, progress)
    extra = [s for s in four.syncs if str(s) not in {str(t) for t in one.syncs}]
    assert len(four.syncs) == len(one.syncs) and not extra, "\n".join(map(str, extra)) or four.summary()
    # A record step costs one read of everything it records.
    assert len(one.syncs) <= 2, one.summary()


# ------------------------------------------------------------ bad input on the GPU path (ops/bad_input.py)


@pytest.fixture
def fresh_flags():
    """The bad-input flags, emptied before and after (PretendCuda keeps a CPU tensor under cuda:0)."""
    from augnet.ops import bad_input

    saved = dict(bad_input._flags)
    bad_input._flags.clear()
    yield bad_input
    bad_input._flags.clear()
    bad_input._flags.update(saved)


def _bad_taps():
    x = torch.rand(3, 2, 5, 6, generator=gen(0))
    src = torch.tensor([[0, 1], [1, 2], [2, 0], [0, 0]])
    affine = torch.eye(2, 3).repeat(4, 2, 1, 1) + 0.1 * torch.randn(4, 2, 2, 3, generator=gen(1))
    weight = torch.rand(4, 2, generator=gen(2))
    affine[1, 0, 0, 2] = float("nan")
    src[2, 1] = 3  # B = 3
    return x, src, affine, weight


def test_dispatch_on_an_accelerator_makes_bad_rows_nan_and_raises_at_the_check(fresh_flags):
    x, src, affine, weight = _bad_taps()
    leaves = [t.clone().requires_grad_() for t in (x, affine, weight)]
    with PretendCuda():
        out = augnet.tap_mix(leaves[0], src, leaves[1], None, leaves[2], backend="reference")
        out.sum().backward()
    nan_rows = [bool(out[i].isnan().all()) for i in range(4)]
    assert nan_rows == [False, True, True, False]
    assert bool(torch.isfinite(out[[0, 3]]).all())
    for t in leaves:  # the bad rows send no gradient: every gradient is finite
        assert bool(torch.isfinite(t.grad).all())
    assert int(fresh_flags.flag(torch.device("cuda", 0))) == 1 | 8
    with pytest.raises(ValueError, match=r"affine contains NaN or infinite values; src indices must lie in"):
        fresh_flags.check_bad_input("cuda:0")
    fresh_flags.check_bad_input("cuda:0")  # cleared: raises once
    # The good rows are what the CPU gives for them.
    torch.testing.assert_close(out[[0, 3]], augnet.tap_mix(x, src[[0, 3]], affine[[0, 3]], None, weight[[0, 3]]))


def test_the_cpu_still_refuses_bad_input_at_once():
    x, src, affine, weight = _bad_taps()
    with pytest.raises(ValueError, match="affine contains NaN"):
        augnet.tap_mix(x, src, affine, None, weight)


def test_fit_on_an_accelerator_stops_at_the_record_step_after_a_bad_input(fresh_flags):
    # A NaN magnitude on a GPU: no check on the host (it would synchronise), NaN warps, NaN rows, the flag, and
    # fit() raises the CPU's error at its next record step.
    from augnet.training import fit

    x, y = torch.rand(8, 3, 6, 6, generator=gen(0)), torch.arange(8) % 2
    layer = augnet.AugmentationLayer([T.Rotate()], init_magnitude=0.3, backend="reference")
    # effect_every=0: PretendCuda only relabels CPU tensors, and the measurement's generator would be a real CUDA one.
    model = augnet.AugNet(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(108, 2)), layer, effect_every=0)
    with torch.no_grad():
        layer.raw_magnitudes.fill_(float("nan"))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with PretendCuda(), pytest.raises(ValueError, match=r"tap_mix: affine contains NaN .*seen on cuda:0"):
        fit(model, x, y, opt, epochs=1, batch_size=4, record_every=1)
