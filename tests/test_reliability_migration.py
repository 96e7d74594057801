"""Reliability of the layers and the fused op used as a user migrating from kornia, torchvision or braindecode would:
second derivatives, ``torch.func`` and ``torch.jit`` (a user sweep's findings)."""

from __future__ import annotations

import copy
import re

import pytest
import torch
from helpers import gen
from torch import nn
from torch.func import functional_call, grad, jacrev, stack_module_state, vmap

import augnet
from augnet.ops import available_backends
from augnet.transforms import image as T
from augnet.transforms import signal as S

HAS_CPP = "cpp" in available_backends(torch.zeros(1))


def image_layer(backend="auto", init=0.3):
    return augnet.AugmentationLayer([T.Rotate(), T.TranslateX(), T.Brightness()], init_magnitude=init, backend=backend)


def penalty_grads(backend):
    """A gradient penalty through a layer (R1 / input-gradient regularisation): its gradients in the layer's state."""
    layer = image_layer(backend)
    x = torch.rand(2, 3, 9, 11, generator=gen(0)).requires_grad_()
    y = layer(x, copies=2, generator=gen(1))
    (gx,) = torch.autograd.grad((y**2).sum(), x, create_graph=True)
    gx.pow(2).sum().backward()
    return layer.raw_magnitudes.grad, layer.weight_logits.grad


@pytest.mark.skipif(not HAS_CPP, reason="the C++ backend is not built here")
def test_a_second_derivative_through_the_compiled_backend_is_the_references():
    # The C++ op's backward had no gradient of its own: a gradient penalty gave the magnitudes and weights a
    # gradient of exactly 0 (with only torch's warning), where the reference gives the true one.
    try:
        want = penalty_grads("reference")
    except RuntimeError as err:  # torch < 2.5 has no second derivative of grid_sampler_2d (the reference's warp)
        with pytest.raises(RuntimeError, match=re.escape(str(err).splitlines()[0])):
            penalty_grads("cpp")  # the same refusal, not a silent 0
        return
    got = penalty_grads("cpp")
    assert want[0].abs().sum() > 0
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kind", ["image", "signal"])
def test_torch_func_grad_and_jacrev_run_through_a_model_with_layers(kind):
    # torch.func.grad / jacrev raised "an autograd.Function ... must override the setup_context staticmethod" (the
    # magnitudes' clamp, and the compiled tap_mix): now they run and give the gradients of a plain backward.
    if kind == "image":
        layer, x = image_layer(), torch.rand(4, 3, 9, 11, generator=gen(0))
    else:
        layer, x = augnet.AugmentationLayer([S.TimeReverse(), S.GaussianNoise()], 0.3), torch.randn(4, 2, 50)
    model = augnet.AugNet(nn.Sequential(nn.Flatten(), nn.Linear(x[0].numel(), 5)), layer, effect_every=0)
    params = dict(model.named_parameters())

    def loss(p, xx):
        return functional_call(model, p, (xx,), {"generator": gen(1)}).sum()

    got = grad(loss)(params, x)["augment.layers.0.raw_magnitudes"]
    loss(params, x).backward()
    torch.testing.assert_close(got, layer.raw_magnitudes.grad, rtol=1e-4, atol=1e-5)
    jac = jacrev(lambda xx: layer(xx, generator=gen(2)).sum())(x)
    assert jac.shape == x.shape and torch.isfinite(jac).all()


@pytest.mark.filterwarnings("ignore:There is a performance drop")
def test_vmap_over_an_image_layer_runs():
    # The CPU value checks of tap_mix read vmap's batched tensors: "data-dependent control flow" from inside torch.
    x = torch.rand(4, 3, 9, 11, generator=gen(0))
    out = vmap(lambda xi: image_layer(init=0.0)(xi[None]), randomness="different")(x)
    torch.testing.assert_close(out[:, 0], x, rtol=1e-5, atol=1e-5)  # magnitude 0: the identity


@pytest.mark.filterwarnings("ignore:There is a performance drop")
def test_vmap_over_an_ensemble_of_layers_runs():
    # torch.func's model ensembling (stack_module_state, then vmap over the stacked parameters) failed on the layer's
    # check that its magnitudes and weight logits are finite (a batched tensor read back on the host).
    layers = [image_layer(init=0.0) for _ in range(3)]
    params, buffers = stack_module_state(layers)
    base = copy.deepcopy(layers[0]).to("meta")
    x = torch.rand(4, 3, 9, 11, generator=gen(0))
    out = vmap(lambda p, b, xx: functional_call(base, (p, b), (xx,)), in_dims=(0, 0, None), randomness="different")(
        params, buffers, x
    )
    torch.testing.assert_close(out, x.expand(3, *x.shape), rtol=1e-5, atol=1e-5)  # magnitude 0: the identity


@pytest.mark.skipif(not HAS_CPP, reason="the C++ backend is not built here")
def test_a_compiled_backend_asked_for_by_name_under_torch_func_says_why():
    layer, x = image_layer("cpp"), torch.rand(2, 3, 9, 11)
    with pytest.raises(RuntimeError, match=r"cannot run under a torch\.func transform"):
        jacrev(lambda xx: layer(xx).sum())(x)


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated")
@pytest.mark.parametrize(
    "make",
    [lambda: image_layer(), lambda: T.Rotate(), lambda: nn.Sequential(image_layer(), nn.Flatten()),
     lambda: augnet.AugNet(nn.Flatten(), image_layer()),
     lambda: augnet.AugmentationLayer([S.TimeReverse(), S.GaussianNoise()])],
)  # fmt: skip
def test_torch_jit_script_is_refused_in_words(make):
    # It raised "ValueError: Unknown type annotation: 'str'" from deep inside TorchScript.
    with pytest.raises(TypeError, match=r"torch\.jit\.script does not support augnet.s transforms"):
        torch.jit.script(make())
