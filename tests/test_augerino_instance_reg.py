"""augerino_regularizer on a per-instance layer: the mean over the latest batch of -||mu_b||, as selective takes it.

A :class:`~augnet.instance.ConditionedAugmentationLayer` augments each input at that input's magnitudes, its global
ones plus its conditioner's offsets. ``augerino_regularizer`` read the global magnitudes alone (an input on which the
conditioner outputs 0), so the conditioner's offsets got no gradient from it. It now reads the latest forward pass's
per-sample magnitudes, as :func:`augnet.selective_regularizer` reads the per-sample policy, and refuses a layer that
has not run yet with selective's error.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch
from syncs import SyncRecorder
from torch import nn

import augnet
from augnet.instance import ConditionedAugmentationLayer
from augnet.regularizers import augerino_regularizer, norm_outward_at_zero, selective_regularizer
from augnet.training import fit
from augnet.transforms import image as T

F64 = torch.float64
B, CH, H, W = 5, 2, 6, 6


def _images(b=B, dtype=F64):
    return torch.rand(b, CH, H, W, generator=torch.Generator().manual_seed(0), dtype=dtype)


class _Linear(nn.Module):
    """A conditioner whose output is known by hand: ``x.flatten(1) @ weight.T + bias``."""

    def __init__(self, q: int) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(1)
        self.weight = nn.Parameter(0.02 * torch.randn(2 * q, CH * H * W, generator=g, dtype=F64))
        self.bias = nn.Parameter(0.1 * torch.randn(2 * q, generator=g, dtype=F64))

    def forward(self, x):
        return x.flatten(1) @ self.weight.T + self.bias


def _layer(init=(0.3, 0.45, 0.6)):
    transforms = [T.Rotate(), T.TranslateX(), T.Brightness()][: len(init)]
    layer = ConditionedAugmentationLayer(transforms, conditioner=_Linear(len(init)), init_magnitude=list(init))
    return layer.double()


def _by_hand(layer, x) -> float:
    """-mean_b sqrt(sum_q mu_bq^2), mu_b = clamp(raw + offsets_b, 0, 1), in Python floats from the parameters."""
    q = len(layer.transforms)
    raw = layer.raw_magnitudes.tolist()
    weight, bias = layer.conditioner.weight.tolist(), layer.conditioner.bias.tolist()
    rows = x.flatten(1).tolist()
    norms = []
    for row in rows:
        offsets = [sum(w * v for w, v in zip(weight[q + k], row, strict=True)) + bias[q + k] for k in range(q)]
        mu = [min(1.0, max(0.0, r + o)) for r, o in zip(raw, offsets, strict=True)]
        norms.append(math.sqrt(sum(m * m for m in mu)))
    return -sum(norms) / len(norms)


def test_the_value_is_the_batch_mean_of_each_inputs_magnitude_norm_by_hand():
    layer, x = _layer(), _images()
    with torch.no_grad():  # one input's range past 1: clamped there, as the layer augments it
        layer.conditioner.bias[len(layer.transforms)] = 0.9
    layer(x, copies=2)
    value = augerino_regularizer(layer)
    assert value.dtype == F64 and value.dim() == 0
    assert value.item() == pytest.approx(_by_hand(layer, x), rel=1e-13, abs=1e-13)
    mu = layer.latest_policy()[1]
    assert (mu[:, 0] == 1).any() and not (mu == mu[:1]).all()  # the case is what it claims: clamped, per sample
    assert value.item() != pytest.approx(-layer.magnitudes.norm().item(), abs=1e-6)  # not the global part alone


def test_the_value_reads_the_latest_pass():
    layer = _layer()
    x1, x2 = _images(), _images(3) * 2.0
    layer(x1)
    layer(x2)
    assert augerino_regularizer(layer).item() == pytest.approx(_by_hand(layer, x2), rel=1e-13)


def test_the_gradient_agrees_with_finite_differences_in_float64():
    layer, x = _layer(), _images()
    names = ["raw_magnitudes", "conditioner.weight", "conditioner.bias"]
    params = dict(layer.named_parameters())

    def reg(raw, weight, bias):
        values = {**params, "raw_magnitudes": raw, "conditioner.weight": weight, "conditioner.bias": bias}
        torch.func.functional_call(layer, values, (x,), {"copies": 1})
        return augerino_regularizer(layer)

    inputs = tuple(params[n].detach().clone().requires_grad_(True) for n in names)
    mu = layer.sample_policy(x)[1]
    assert ((mu > 0.05) & (mu < 0.95)).all()  # inside the clamp: a derivative to check
    assert torch.autograd.gradcheck(reg, inputs, eps=1e-6, atol=1e-8, rtol=1e-6)


def test_the_conditioner_gets_the_regularisers_gradient():
    # The default conditioner starts at 0 (its head zero-initialised): the policy is the global one, and before,
    # nothing of the regulariser reached the conditioner.
    layer = ConditionedAugmentationLayer([T.Rotate(), T.TranslateX()], channels=CH, init_magnitude=0.4)
    layer(_images(dtype=torch.float32), copies=2)
    augerino_regularizer(layer).backward()
    head = layer.conditioner.head
    assert head.bias.grad is not None and head.weight.grad is not None
    q = len(layer.transforms)
    # d/d(offset_bq) of -mean_b ||mu_b|| at mu_b = mu for every b: -mu_q / ||mu|| / B each, so the bias's is -mu/||mu||
    mu = layer.magnitudes.detach()
    torch.testing.assert_close(head.bias.grad[q:], -mu / mu.norm())
    assert torch.equal(head.bias.grad[:q], torch.zeros(q))  # the weights' offsets: Augerino's ignores the weights
    assert head.weight.grad[q:].abs().sum() > 0


def test_a_conditioner_at_zero_gives_the_global_layers_value():
    layer = ConditionedAugmentationLayer([T.Rotate(), T.TranslateX()], channels=CH, init_magnitude=[0.2, 0.7])
    layer(_images(dtype=torch.float32))
    plain = augnet.AugmentationLayer([T.Rotate(), T.TranslateX()], init_magnitude=[0.2, 0.7])
    torch.testing.assert_close(augerino_regularizer(layer), augerino_regularizer(plain), rtol=1e-6, atol=1e-7)


def test_before_a_forward_pass_it_raises_selectives_error():
    layer = _layer()
    with pytest.raises(ValueError) as by_selective:
        selective_regularizer(layer)
    with pytest.raises(ValueError) as by_augerino:
        augerino_regularizer(layer)
    assert str(by_augerino.value) == str(by_selective.value)
    assert "has not run on a batch yet" in str(by_augerino.value)
    layer(_images())
    augerino_regularizer(layer)
    with pytest.raises(ValueError, match="has not run on a batch yet"):  # a copy has not run
        augerino_regularizer(copy.deepcopy(layer))


def test_an_empty_batch_gives_0_in_the_graph():
    layer = _layer()
    layer(_images(0))
    value = augerino_regularizer(layer)
    assert value.item() == 0 and value.requires_grad
    value.backward()
    assert torch.equal(layer.conditioner.bias.grad, torch.zeros_like(layer.conditioner.bias))


def test_a_stack_sums_the_per_sample_term_and_the_global_layers_term():
    conditioned = _layer((0.3, 0.45))
    plain = augnet.AugmentationLayer([T.ShearX(), T.Contrast()], init_magnitude=[0.1, 0.2]).double()
    module = augnet.AugmentationModule([conditioned, plain])
    x = _images()
    module(x, copies=2)
    expected = _by_hand(conditioned, x) - math.hypot(0.1, 0.2)
    assert augerino_regularizer(module).item() == pytest.approx(expected, rel=1e-6)


def test_an_ordinary_layer_and_an_augerino_are_read_as_before():
    layer = augnet.AugmentationLayer([T.Rotate(), T.TranslateX()], init_magnitude=[0.0, 0.0])
    assert torch.equal(augerino_regularizer(layer), -norm_outward_at_zero(layer.magnitudes))
    model = augnet.Augerino(nn.Flatten(), init_width=[0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    assert torch.equal(augerino_regularizer(model), -norm_outward_at_zero(model.augment.widths))


@pytest.mark.parametrize("conditioned", [True, False], ids=["per-instance", "global"])
def test_the_regulariser_and_its_backward_make_no_host_synchronisation(conditioned):
    torch.manual_seed(0)
    kind = ConditionedAugmentationLayer if conditioned else augnet.AugmentationLayer
    extra = {"channels": CH} if conditioned else {}
    layer = kind([T.Rotate(), T.TranslateX()], init_magnitude=[0.0, 0.3], **extra).to("meta")
    model = augnet.AugNet(nn.Sequential(nn.Flatten(), nn.Linear(CH * H * W, 3)), layer, effect_every=0).to("meta")
    model.train()
    model(torch.rand(4, CH, H, W, device="meta"))
    with SyncRecorder() as rec:
        augerino_regularizer(model).backward()
    assert not rec.syncs, rec.summary()


def test_fit_with_the_augerino_regulariser_trains_a_per_instance_model():
    torch.manual_seed(0)
    x, y = torch.rand(8, CH, H, W), torch.randint(0, 2, (8,))
    layer = ConditionedAugmentationLayer([T.Rotate(), T.TranslateX()], channels=CH, init_magnitude=0.3)
    model = augnet.AugNet(nn.Sequential(nn.Flatten(), nn.Linear(CH * H * W, 2), nn.LogSoftmax(1)), layer)
    opt = torch.optim.SGD(augnet.param_groups(model), lr=0.1)
    head = layer.conditioner.head.bias.detach().clone()
    history = fit(model, x, y, opt, 1, 4, regularizer="augerino", lam=1.0, shuffle=False)
    assert len(history["loss"]) == 1 and all(math.isfinite(v) for v in history["loss"])
    assert not torch.equal(layer.conditioner.head.bias.detach(), head)
