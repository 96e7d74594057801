"""What only a real CUDA GPU can show: no host synchronisation where the ``meta`` device found none, the GPU
backends against the reference at the layer level, and training with ``fit`` on the device.

``tests/test_gpu_path.py`` checks the same code path on the CPU (tensors that say they are on ``cuda:0``, and
the ``meta`` device under a dispatch mode). These tests run only where ``torch.cuda.is_available()``; the
Triton kernels' own parity on the GPU is in ``tests/test_triton.py`` and the CUDA kernels' in
``tests/test_cuda_build.py``.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from helpers import tol
from syncs import evaluations, scenarios

import augnet
from augnet.ops import available_backends
from augnet.ops.dispatch import _why_not
from augnet.training import fit
from augnet.transforms import image as T

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

GPU_BACKENDS = ["triton", "cuda"]


def _backend_or_skip(name: str) -> None:
    probe = torch.zeros(1, device="cuda")
    if name not in available_backends(probe):
        pytest.skip(f"the {name} backend is not usable here: {_why_not(name, probe)}")


def _synchronisations(fn, warm_up: int = 3) -> list[str]:
    """Where ``fn`` synchronises with the host (torch's CUDA sync debug mode), after ``warm_up`` calls.

    The first calls build what is built once (Triton's compiles, the extension's load, cuBLAS's and cuFFT's
    handles and plans), which may wait for the device, and a layer that draws one transform per copy meets
    each transform's first use in any of them; the claim is about the calls after those.
    """
    for _ in range(warm_up):
        fn()
    torch.cuda.synchronize()
    previous = torch.cuda.get_sync_debug_mode()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            fn()
        finally:
            torch.cuda.set_sync_debug_mode(previous)
    torch.cuda.synchronize()
    # Torch's own note on turning the mode on ("Synchronization debug mode is a prototype feature ...", once per
    # process: in the first test a pytest worker runs) is no synchronisation: only the ops' warnings count.
    return [f"{w.filename}:{w.lineno}: {w.message}" for w in caught
            if "synchroniz" in str(w.message) and "debug mode is a prototype" not in str(w.message)]  # fmt: skip


@pytest.mark.parametrize("kind", list(scenarios()))
def test_a_training_step_makes_no_host_synchronisation_on_the_gpu(kind):
    syncs = _synchronisations(scenarios("cuda")[kind]())
    assert not syncs, "\n".join(syncs)


@pytest.mark.parametrize("kind", list(evaluations()))
def test_an_evaluation_forward_makes_no_host_synchronisation_on_the_gpu(kind):
    forward = evaluations("cuda")[kind]()
    with torch.no_grad():
        syncs = _synchronisations(forward)
    assert not syncs, "\n".join(syncs)


def test_the_sync_debug_mode_catches_a_read_back():
    # A test must be able to fail: the mode the two tests above rely on finds a read of a value, with its line.
    t = torch.rand(3, device="cuda")
    syncs = _synchronisations(lambda: float(t.sum()), warm_up=0)
    assert len(syncs) == 1 and "test_on_gpu.py" in syncs[0], syncs


@pytest.mark.parametrize("backend", GPU_BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_layer_on_a_gpu_backend_matches_the_reference(backend, dtype):
    # The whole layer (draws, fused taps, colour maps, mixing by the weights) on the GPU: the same draws (one
    # seeded CUDA generator), so only the tap_mix backend differs. Output and every gradient.
    _backend_or_skip(backend)
    transforms = [T.TranslateX(), T.TranslateY(), T.Rotate(), T.ShearX(), T.Scale(), T.Brightness(), T.Contrast()]
    x0 = torch.rand(5, 3, 17, 23, device="cuda", dtype=dtype)
    r = torch.randn(15, 3, 17, 23, device="cuda", dtype=dtype)
    results = []
    for name in ("reference", backend):
        layer = augnet.AugmentationLayer(transforms, init_magnitude=0.4, backend=name, train_mode="mix")
        layer = layer.to(device="cuda", dtype=dtype)
        x = x0.clone().requires_grad_()
        out = layer(x, copies=3, generator=torch.Generator("cuda").manual_seed(4))
        (out * r).sum().backward()
        grads = [x.grad] + [p.grad for p in layer.parameters()]
        results.append((out.detach(), grads))
    (ref, ref_grads), (out, grads) = results
    torch.testing.assert_close(out, ref, **tol(backend, dtype))
    assert not torch.equal(ref, x0.repeat(3, 1, 1, 1))  # the layer changed the images
    for g, rg in zip(grads, ref_grads):
        torch.testing.assert_close(g, rg, **tol(backend, dtype))


def test_fit_trains_an_augnet_on_the_gpu():
    # A user's run on the device: an AugNet of a small CNN, fit(device="cuda") from CPU tensors, two epochs.
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(64, 1, 16, 16, generator=gen)
    y = (x[:, 0, :8].mean((1, 2)) > x[:, 0, 8:].mean((1, 2))).long()
    trunk = torch.nn.Sequential(
        torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(4), torch.nn.Flatten(),
        torch.nn.Linear(128, 2),
    )
    layer = augnet.AugmentationLayer([T.Rotate(), T.TranslateX(), T.Brightness()])
    model = augnet.AugNet(trunk, layer)
    before = layer.weight_logits.detach().clone()
    opt = torch.optim.Adam(augnet.param_groups(model))
    history = fit(model, x, y, opt, epochs=2, batch_size=16, device="cuda", progress=False)
    assert next(model.parameters()).is_cuda
    assert history["loss"] and all(torch.isfinite(torch.tensor(history["loss"])))
    assert not torch.equal(layer.weight_logits.detach().cpu(), before)  # the augmentation learned
    with torch.no_grad():
        pred = model.eval()(x[:8].cuda())
    assert pred.shape == (8, 2) and bool(torch.isfinite(pred).all())
