"""Reliability of Augerino and the per-instance layers used as a researcher would: ``torch.jit``, ``torch.func``,
wrapped models and keyword arguments (a user sweep's findings)."""

from __future__ import annotations

import copy

import pytest
import torch
from helpers import gen
from torch import nn
from torch.func import functional_call, grad, stack_module_state, vmap

import augnet
from augnet.augerino import Augerino, LieAugmentation
from augnet.instance import ConditionedAugmentationLayer
from augnet.instance_policy import policy_summary
from augnet.ops import available_backends
from augnet.transforms import image as T

HAS_CPP = "cpp" in available_backends(torch.zeros(1))


def flat_trunk(numel=3 * 8 * 9, classes=3):
    return nn.Sequential(nn.Flatten(), nn.Linear(numel, classes))


def conditioned(init=0.3, **kwargs):
    return ConditionedAugmentationLayer([T.Rotate(), T.Brightness()], channels=3, hidden=4, init_magnitude=init,
                                        **kwargs)  # fmt: skip


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated")
@pytest.mark.parametrize(
    "make",
    [lambda: LieAugmentation(), lambda: Augerino(flat_trunk()), lambda: nn.Sequential(Augerino(flat_trunk()))],
)
def test_torch_jit_script_refuses_augerino_in_words(make):
    # It raised "ValueError: Unknown type annotation: 'bool'" (Augerino) or TorchScript's "cannot statically infer
    # the expected size of a list" (LieAugmentation), from deep inside TorchScript.
    with pytest.raises(TypeError, match=r"torch\.jit\.script does not support Augerino's LieAugmentation"):
        torch.jit.script(make())


@pytest.mark.filterwarnings("ignore:There is a performance drop")
@pytest.mark.parametrize("training", [False, True])
def test_vmap_over_data_runs_through_a_conditioned_layer(training):
    # The layer's CPU value checks (finite pixels, a finite conditioner output) read vmap's batched tensors:
    # "data-dependent control flow" from inside torch. At magnitude 0 the layer is the identity, sample by sample.
    layer = conditioned(init=0.0).train(training)
    x = torch.rand(4, 3, 8, 9, generator=gen(0))
    out = vmap(lambda xi: layer(xi[None], copies=2), randomness="different")(x)
    torch.testing.assert_close(out, x[:, None].expand(4, 2, 3, 8, 9), rtol=1e-5, atol=1e-5)


@pytest.mark.filterwarnings("ignore:There is a performance drop")
def test_vmap_over_an_ensemble_of_augerino_models():
    # torch.func's model ensembling (stack_module_state, then vmap over the stacked widths) failed on Augerino's
    # check that its widths are finite (a batched tensor read back). Near width 0 each member is its own trunk.
    models = [Augerino(flat_trunk(), init_width=1e-30).eval() for _ in range(3)]
    params, buffers = stack_module_state(models)
    base = copy.deepcopy(models[0]).to("meta")
    x = torch.rand(4, 3, 8, 9, generator=gen(0))
    out = vmap(lambda p, b, xx: functional_call(base, (p, b), (xx,)), in_dims=(0, 0, None), randomness="different")(
        params, buffers, x
    )
    want = torch.stack([torch.log_softmax(m.trunk(x), 1) for m in models])
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("training", [False, True])
def test_torch_func_grad_through_a_conditioned_model_is_a_plain_backwards(training):
    # In training the default conditioner updates its running statistics, as BatchNorm does: under torch.func the
    # buffers are passed with the parameters (functional_call(model, (params, buffers), ...)).
    torch.manual_seed(0)
    layer = conditioned()
    nn.init.normal_(layer.conditioner.head.weight, std=0.3)
    model = augnet.AugNet(flat_trunk(), layer, effect_every=0, train_copies=2).train(training)
    x = torch.rand(4, 3, 8, 9, generator=gen(0))
    twin = copy.deepcopy(model)
    params, buffers = dict(model.named_parameters()), dict(model.named_buffers())

    def loss(p, b, xx):
        return functional_call(model, (p, b), (xx,), {"generator": gen(1)}).sum()

    got = grad(loss)(params, buffers, x)
    twin(x, generator=gen(1)).sum().backward()
    for name, p in twin.named_parameters():  # a sampled transform's weight logits get no gradient (None)
        want = p.grad if p.grad is not None else torch.zeros_like(p)
        torch.testing.assert_close(got[name], want, rtol=1e-4, atol=1e-5)
    for name, b in twin.named_buffers():  # the running statistics moved alike
        torch.testing.assert_close(buffers[name], b)


def wrapped(model):
    class Lightning(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

    return Lightning()


@pytest.mark.parametrize("wrap", [lambda m: nn.Sequential(m, nn.Softmax(1)), wrapped])
def test_policy_summary_of_a_wrapped_augnet_is_the_augnets(wrap):
    # nn.Sequential(model, ...) or a module holding the AugNet as an attribute was refused with "the conditioned
    # layer is not the first layer of its module", though it was.
    torch.manual_seed(0)
    layer = conditioned()
    nn.init.normal_(layer.conditioner.head.weight, std=0.3)
    model = augnet.AugNet(flat_trunk(), layer)
    x, y = torch.rand(6, 3, 8, 9, generator=gen(0)), torch.tensor([0, 1, 0, 1, 2, 2])
    assert policy_summary(wrap(model), (x, y)).classes == policy_summary(model, (x, y)).classes


def test_policy_summary_says_why_it_cannot_summarise_a_layer_outside_a_module():
    x, y = torch.rand(6, 3, 8, 9, generator=gen(0)), torch.tensor([0, 1, 0, 1, 2, 2])
    with pytest.raises(ValueError, match="not in an AugNet or AugmentationModule"):
        policy_summary(nn.Sequential(conditioned(), nn.Flatten()), (x, y))
    two = nn.ModuleList([augnet.AugNet(flat_trunk(), conditioned()), augnet.AugNet(flat_trunk(), conditioned())])
    with pytest.raises(ValueError, match="holds 2 augmentation modules whose first layer is conditioned"):
        policy_summary(two, (x, y))
    later = augnet.AugmentationModule([augnet.AugmentationLayer([T.Rotate()]), conditioned()])
    with pytest.raises(ValueError, match="not the first layer of its module"):
        policy_summary(later, (x, y))


def test_hidden_with_a_conditioner_passed_in_is_refused():
    # hidden= sizes the default conditioner; with conditioner= it was dropped without a word (kernel_size= is refused).
    with pytest.raises(ValueError, match=r"hidden=32 is the default conditioner's"):
        ConditionedAugmentationLayer([T.Rotate()], conditioner=nn.Sequential(nn.Flatten(), nn.LazyLinear(2)), hidden=32)


def penalty_grad_x(backend, conditioned=True):
    """The inner gradient of a gradient penalty (create_graph=True) with respect to x, through a per-instance layer
    (its conditioner reads x, so affine and weight do) or a plain AutoContrast layer (its colour map reads x)."""
    torch.manual_seed(0)
    if conditioned:
        layer = ConditionedAugmentationLayer([T.Rotate()], channels=3, hidden=4, init_magnitude=0.3, backend=backend)
        nn.init.normal_(layer.conditioner.head.weight, std=0.3)
    else:
        layer = augnet.AugmentationLayer([T.AutoContrast(), T.Rotate()], init_magnitude=0.6, backend=backend)
    layer = layer.double().eval()
    x = torch.rand(3, 3, 8, 9, generator=gen(5), dtype=torch.float64).requires_grad_()
    (gx,) = torch.autograd.grad((layer(x, copies=2, generator=gen(1)) ** 2).sum(), x, create_graph=True)
    return gx.detach()


@pytest.mark.skipif(not HAS_CPP, reason="the C++ backend is not built here")
@pytest.mark.parametrize("conditioned", [True, False])
def test_a_gradient_with_create_graph_through_the_compiled_backend_is_the_references(conditioned):
    # The C++ op's differentiable backward took the gradient in its saved inputs, which are functions of one
    # another here: the path from x through affine / colour was counted twice (209.0 against 153.3 for
    # AutoContrast). It differentiates in aliases of them now.
    got, want = penalty_grad_x("cpp", conditioned), penalty_grad_x("reference", conditioned)
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)


@pytest.mark.filterwarnings("ignore:augnet.export")  # the exports' notes on approximate transforms
def test_the_averaged_policy_of_a_stack_keeps_the_layers_after_the_conditioned_one():
    # Exports refuse a conditioned layer and send the user to averaged_policy, which gave the conditioned layer's
    # average alone: a [conditioned, plain] stack exported without its second layer, without a word.
    from augnet.instance_policy import averaged_policy, policy_summary

    torch.manual_seed(0)
    cond = ConditionedAugmentationLayer([T.Rotate(), T.TranslateX()], channels=3, init_magnitude=0.3)
    plain = augnet.AugmentationLayer([T.Brightness(), T.Contrast()], init_magnitude=[0.2, 0.7])
    model = augnet.AugNet(flat_trunk(), augnet.AugmentationModule([cond, plain]))
    x, y = torch.rand(8, 3, 8, 9, generator=gen(0)), torch.arange(8) % 2
    got = averaged_policy(model, [(x, y)])
    assert len(got) == 2
    assert str(got).split("layer 1:")[0] == str(policy_summary(model, [(x, y)]).policy()) + "\n"
    assert got[1] == augnet.AugmentationModule([plain]).policy((8, 9))[0]
    got.to_torchvision()  # a fixed pipeline now: both layers export
