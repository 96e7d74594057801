"""Reliability of selection and training: effect units, the selective regulariser, ``fit``'s refusals.

A refusal is a ValueError or a TypeError that names the bad value and changes nothing: not the
parameters, not a buffer (the effects, batch-norm statistics, a conditioner's statistics), not the
AugNet's pass count, not the modes.
"""

from __future__ import annotations

import math

import pytest
import torch
from helpers import gen
from torch import nn

import augnet
from augnet import AugmentationLayer, ConditionedAugmentationLayer
from augnet.effects import effect_of_layer, measure_effects
from augnet.regularizers import get_regularizer, selective_regularizer
from augnet.training import fit
from augnet.transforms import image as T

NAN, INF = math.nan, math.inf


def images(b=8, ch=3, h=8, w=8, seed=0, dtype=torch.float32):
    return torch.rand(b, ch, h, w, generator=gen(seed)).to(dtype)


def trunk(classes=3):
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.LazyLinear(classes))


def model(conditioned=False, classes=3):
    transforms = [T.Rotate(), T.TranslateX(), T.Brightness()]
    aug = (ConditionedAugmentationLayer(transforms, channels=3, init_magnitude=0.3) if conditioned
           else AugmentationLayer(transforms, init_magnitude=0.3))  # fmt: skip
    net = augnet.AugNet(trunk(classes), aug, effect_every=1)
    net.eval()(images(2))  # materialise the lazy layer
    return net


def snapshot(module: nn.Module) -> dict:
    state = {k: v.detach().clone() for k, v in module.state_dict().items()}
    return {
        "state": state,
        "modes": [m.training for m in module.modules()],
        "sizes": [getattr(m, "last_size", None) for m in module.modules()],
        "grads": [None if p.grad is None else p.grad.clone() for p in module.parameters()],
        "passes": getattr(module, "passes", None),
    }


def unchanged(module: nn.Module, before: dict) -> bool:
    now = snapshot(module)
    same = now["state"].keys() == before["state"].keys() and all(
        torch.equal(now["state"][k], before["state"][k]) for k in now["state"]
    )
    grads = all(
        (a is None and b is None) or (a is not None and b is not None and torch.equal(a, b))
        for a, b in zip(now["grads"], before["grads"], strict=True)
    )
    return same and grads and all(now[k] == before[k] for k in ("modes", "sizes", "passes"))


# ----------------------------------------------------------------------- AugNet.measure_effects


MEASURE_BAD = {
    "list": (lambda: images().tolist(), {}, TypeError, "tensor"),
    "uint8": (lambda: (images() * 255).to(torch.uint8), {}, TypeError, "floating"),
    "int64": (lambda: images().long(), {}, TypeError, "floating"),
    "rank-3": (lambda: images()[0], {}, ValueError, "4-D"),
    "rank-2": (lambda: images().flatten(1), {}, ValueError, "4-D"),
    "empty-width": (lambda: images(w=0), {}, ValueError, "empty"),
    "rows-0": (lambda: images(), {"rows": 0}, ValueError, "rows"),
    "rows-negative": (lambda: images(), {"rows": -4}, ValueError, "rows"),
    "rows-float": (lambda: images(), {"rows": 2.5}, TypeError, "rows"),
    "rows-bool": (lambda: images(), {"rows": True}, TypeError, "rows"),
    "rows-str": (lambda: images(), {"rows": "8"}, TypeError, "rows"),
}


@pytest.mark.parametrize("conditioned", [False, True], ids=["global", "conditioned"])
@pytest.mark.parametrize("name", list(MEASURE_BAD))
def test_measure_effects_refuses_bad_input_and_changes_nothing(name, conditioned):
    make, kwargs, error, match = MEASURE_BAD[name]
    net = model(conditioned).train()
    before = snapshot(net)
    with pytest.raises(error, match=match):
        net.measure_effects(make(), **kwargs)
    assert unchanged(net, before)


@pytest.mark.parametrize(
    "make",
    [lambda: images(1), lambda: images(0), lambda: images().index_fill(0, torch.tensor([2]), NAN),
     lambda: images().index_fill(0, torch.tensor([0]), INF)],
    ids=["batch-1", "empty", "nan-row", "inf-row"],
)  # fmt: skip
def test_measure_effects_on_what_it_cannot_measure_keeps_the_effects(make):
    net = model().train()
    before = snapshot(net)
    net.measure_effects(make())
    assert unchanged(net, before)


@pytest.mark.parametrize(
    "make",
    [lambda: images().contiguous(memory_format=torch.channels_last), lambda: images(h=9).transpose(2, 3)[..., :8]],
    ids=["channels-last", "non-contiguous"],
)
def test_measure_effects_takes_any_memory_layout(make):
    net = model().train()
    net.measure_effects(make())
    layer = net.augment.layers[0]
    assert bool(layer.effect_measured) and torch.isfinite(layer.effect).all()


def test_the_effect_units_are_those_of_the_documented_formula():
    net = model().eval()
    x = images()
    layer = net.augment.layers[0]
    base = net.trunk(x)
    effect = effect_of_layer(net.trunk, layer, x, base, gen(0))
    assert effect.shape == (3,) and torch.isfinite(effect).all() and (effect >= 0).all()
    measure_effects(net.trunk, [layer], x, generator=gen(0))
    torch.testing.assert_close((layer.weights.detach() * layer.effect).sum(), torch.tensor(1.0))


# ----------------------------------------------------------------------- the selective regulariser


def _stack(n=2, weights=None):
    layers = [AugmentationLayer([T.Rotate(), T.TranslateX()], init_magnitude=1.0) for _ in range(n)]
    if weights is not None:
        with torch.no_grad():
            for layer in layers:
                layer.weight_logits.copy_(torch.tensor(weights))
    return augnet.AugmentationModule(layers)


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("weights", [[20.0, -20.0], [0.0, 0.0], [1.0, -1.0]])
def test_the_diverse_regulariser_is_within_its_documented_bounds(n, weights):
    module = _stack(n, weights)
    value = float(selective_regularizer(module, diverse=True).detach())
    norms = [float(torch.linalg.vector_norm(layer.weights * layer.effect * layer.magnitudes).detach())
             for layer in module.layers]  # fmt: skip
    # documented: between -(sum of the layers' norms) and (the later layers' norms)
    assert -sum(norms) - 1e-6 <= value <= sum(norms[1:]) + 1e-6
    assert float(selective_regularizer(module, diverse=False).detach()) <= 0.0


def test_the_diverse_regulariser_can_be_positive_and_the_docstring_says_so():
    two = float(selective_regularizer(_stack(2, [20.0, -20.0]), diverse=True).detach())
    assert two == pytest.approx(0.0, abs=1e-6)
    value = float(selective_regularizer(_stack(3, [20.0, -20.0]), diverse=True, saturation=None).detach())
    assert value == pytest.approx(1.0, abs=1e-6)  # reward -1, then two repeats of the first layer's choice: +2
    value = float(selective_regularizer(_stack(3, [20.0, -20.0]), diverse=True).detach())
    assert value == pytest.approx(0.5 * math.log(3.0), abs=1e-6)  # the same with magnitude 1 entering as phi(1)
    returns = selective_regularizer.__doc__.split("Returns:")[1].split("Examples:")[0]
    assert "non-positive" not in returns.replace("is non-positive with", "")
    assert "positive" in returns


# ----------------------------------------------------------------------- fit


def _xy(n=12, classes=3):
    return images(n), torch.arange(n) % classes


@pytest.mark.parametrize(
    "regularizer",
    [["selective"], ("selective",), {"selective": 1}, {"selective"}, 3, b"selective", 1.5],
    ids=["list", "tuple", "dict", "set", "int", "bytes", "float"],
)
def test_fit_names_a_regularizer_of_the_wrong_type(regularizer):
    net = model()
    x, y = _xy()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    before = snapshot(net)
    with pytest.raises(TypeError, match="regularizer"):
        fit(net, x, y, opt, 1, 4, regularizer=regularizer)
    assert unchanged(net, before)


@pytest.mark.parametrize("name", [["selective"], {"a": 1}, 3, None])
def test_get_regularizer_names_a_value_of_the_wrong_type(name):
    with pytest.raises(TypeError, match="regularizer"):
        get_regularizer(name)


BAD_LABELS = {
    "column": lambda y: y[:, None],
    "floats": lambda y: y.float(),
    "one-hot": lambda y: torch.eye(3)[y],
    "out-of-range": lambda y: y + 3,
    "negative": lambda y: y - 1,
    "wrong-length-per-batch": lambda y: y.repeat(2).reshape(len(y), 2),
}


@pytest.mark.parametrize("conditioned", [False, True], ids=["global", "conditioned"])
@pytest.mark.parametrize("name", list(BAD_LABELS))
def test_fit_with_labels_the_loss_refuses_changes_nothing(name, conditioned):
    net = model(conditioned)
    x, y = _xy()
    y = BAD_LABELS[name](y)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    net(x[:2]).sum().backward()  # gradients from before: fit must not leave them changed either
    before = snapshot(net)
    with pytest.raises((RuntimeError, ValueError, IndexError)):
        fit(net, x, y, opt, 1, 4)
    assert unchanged(net, before)
    assert opt.state_dict()["state"] == {}


def test_fit_with_a_loss_that_raises_on_a_later_step_keeps_the_first_steps():
    net = model()
    x, y = _xy()
    calls = []

    def loss(out, target):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("the second step's loss")
        return nn.functional.nll_loss(out, target)

    before = snapshot(net)
    with pytest.raises(RuntimeError, match="second step"):
        fit(net, x, y, torch.optim.SGD(net.parameters(), lr=0.1), 1, 4, loss_fn=loss)
    assert not unchanged(net, before)  # the first step was taken, and stays
