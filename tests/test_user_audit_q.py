"""User audit of the per-instance layers, Augerino, the losses and the effects: inputs of the wrong shape that ran
silently or failed inside torch now raise a ValueError or TypeError naming them, before anything changes."""

from __future__ import annotations

import copy
import io

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import augnet
from augnet.augerino import Augerino, LieAugmentation
from augnet.effects import effect_of_layer, measure_effects
from augnet.instance import (
    ConditionedAugmentationLayer,
    RunningStandardize,
    TinyConditioner,
    conditioned_layers,
    conditioner_entropy,
)
from augnet.losses import EquivarianceLoss
from augnet.transforms import image as T
from augnet.transforms import signal as S


def _buffers(module: nn.Module) -> list[torch.Tensor]:
    return [b.clone() for b in module.buffers()]


def _same(before: list[torch.Tensor], module: nn.Module) -> bool:
    return all(torch.equal(a, b) for a, b in zip(before, module.buffers(), strict=True))


# ----------------------------------------------------------------- RunningStandardize / TinyConditioner
def test_running_standardize_refuses_a_vector_in_training():
    # A (F,) vector was read as a batch of F scalars: its mean and variance were written into every feature's
    # running statistics.
    norm = RunningStandardize(4).train()
    before = _buffers(norm)
    with pytest.raises(ValueError, match=r"shape \(B, 4\), got \(4,\).*h\[None\]"):
        norm(torch.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True))
    assert _same(before, norm)


@pytest.mark.parametrize("shape", [(3, 5), (2, 4, 3)])
def test_running_standardize_refuses_other_features(shape):
    norm = RunningStandardize(4)
    with pytest.raises(ValueError, match=r"RunningStandardize: expected features of shape \(B, 4\)"):
        norm(torch.rand(shape))


def test_running_standardize_refuses_integer_features():
    with pytest.raises(TypeError, match="floating-point"):
        RunningStandardize(4)(torch.ones(3, 4, dtype=torch.long))


def test_running_standardize_valid_batches_as_before():
    norm = RunningStandardize(3).train()
    h = torch.randn(5, 3, dtype=torch.float64)
    out = norm(h.requires_grad_())
    expected = (h - h.mean(0)) * torch.rsqrt(h.var(0, unbiased=False) + 1e-2)
    assert torch.equal(out, expected)
    assert torch.equal(norm.eval()(h), (h - norm.running_mean.to(h)) * torch.rsqrt(norm.running_var.to(h) + 1e-2))


def test_tiny_conditioner_refuses_an_unbatched_image():
    # A (Ch, H, W) image ran as an unbatched convolution: 16 rows (one per hidden channel) for one input, and the
    # running statistics of those rows replaced the conditioner's.
    g = TinyConditioner(3, 4).train()
    before = _buffers(g)
    with pytest.raises(ValueError, match=r"4-D inputs.*got shape \(3, 64, 64\).*x\[None\]"):
        g(torch.rand(3, 64, 64))
    assert _same(before, g)


def test_tiny_conditioner_refuses_other_channels_ranks_and_dtypes():
    with pytest.raises(ValueError, match="reads 3 channels, got an input with 1 channels"):
        TinyConditioner(3, 4)(torch.rand(2, 1, 8, 8))
    with pytest.raises(ValueError, match="3-D inputs"):
        TinyConditioner(3, 4, ndim=3)(torch.rand(3, 64))
    with pytest.raises(ValueError, match="4-D inputs"):
        TinyConditioner(3, 4)(torch.rand(2, 3))
    with pytest.raises(TypeError, match="floating-point"):
        TinyConditioner(3, 4)(torch.ones(2, 3, 8, 8, dtype=torch.uint8))


@pytest.mark.parametrize(
    ("transforms", "conditioner", "x", "ndim"),
    [
        ([S.TimeReverse()], lambda: TinyConditioner(3, 2), torch.randn(4, 3, 50), 3),
        ([S.TimeReverse()], lambda: TinyConditioner(3, 2), torch.randn(3, 3, 50), 3),  # B == Ch: no conv error
        ([T.Rotate()], lambda: TinyConditioner(3, 2, ndim=3), torch.rand(4, 3, 8, 8), 4),
    ],
)
def test_layer_refuses_a_conditioner_of_another_rank(transforms, conditioner, x, ndim):
    layer = ConditionedAugmentationLayer(transforms, conditioner=conditioner()).train()
    before = _buffers(layer)
    with pytest.raises(ValueError, match=rf"conditioner reads {5 - ndim + 2}-D inputs.*ndim={ndim}"):
        layer(x, copies=2)
    assert _same(before, layer) and layer._latest is None and layer.last_size is None
    with pytest.raises(ValueError, match="ndim="):
        layer.policy(x)


@pytest.mark.parametrize("bad", [3, [1], None])
def test_conditioner_helpers_refuse_a_non_module(bad):
    with pytest.raises(TypeError, match=r"conditioner_entropy: module must be an nn\.Module"):
        conditioner_entropy(bad)
    with pytest.raises(TypeError, match=r"conditioned_layers: module must be an nn\.Module"):
        conditioned_layers(bad)


def test_per_instance_model_round_trips_as_a_user_writes_it():
    torch.manual_seed(0)
    layer = ConditionedAugmentationLayer(transforms=[T.Rotate(), T.TranslateX()], channels=3, hidden=4)
    trunk = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 3), nn.LogSoftmax(1))
    model = augnet.AugNet(trunk, layer)
    x, y = torch.rand(6, 3, 8, 8), torch.randint(0, 3, (6,))
    with torch.no_grad():
        layer.conditioner.head.weight.normal_()
    loss = F.nll_loss(model(x), y) + 0.5 * augnet.selective_regularizer(model)
    loss.backward()
    model.eval()

    def out(m, inputs=x):
        return m(inputs, generator=torch.Generator().manual_seed(1))

    expected = out(model)
    fresh = augnet.AugNet(
        nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 3), nn.LogSoftmax(1)),
        ConditionedAugmentationLayer([T.Rotate(), T.TranslateX()], channels=3, hidden=4),
    ).eval()
    fresh.load_state_dict(model.state_dict())
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    for other in (fresh, copy.deepcopy(model), torch.load(buffer, weights_only=False)):
        assert torch.equal(out(other), expected)
    assert torch.allclose(out(model, x.to(memory_format=torch.channels_last)), expected, atol=1e-5)
    assert out(model, x[:1]).shape == (1, 3)


# ----------------------------------------------------------------- effects
def _effect_setup():
    torch.manual_seed(0)
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 5)), augnet.AugmentationLayer([T.Rotate(), T.Contrast()])


@pytest.mark.parametrize(
    ("x", "error", "match"),
    [
        (torch.rand(8, 8, 8), ValueError, "Rotate: expected a 4-D input"),  # the trunk's matmul error
        (torch.randint(0, 3, (8, 3, 8, 8)), TypeError, "Rotate: expected a floating-point"),
    ],
)
def test_measure_effects_checks_x_before_the_trunk(x, error, match):
    trunk, layer = _effect_setup()
    before = _buffers(layer)
    with pytest.raises(error, match=match):
        measure_effects(trunk, [layer], x)
    assert _same(before, layer)


def test_measure_effects_refuses_a_trunk_that_is_not_callable():
    _, layer = _effect_setup()
    with pytest.raises(TypeError, match="trunk must be a model"):
        measure_effects(None, [layer], torch.rand(8, 3, 8, 8))
    with pytest.raises(TypeError, match="trunk must be a model"):
        effect_of_layer("trunk", layer, torch.rand(8, 3, 8, 8), torch.rand(8, 5))


@pytest.mark.parametrize("rows", [3, 1])
def test_effect_of_layer_refuses_a_base_of_other_rows(rows):
    # 3 rows failed inside torch's broadcast; 1 row broadcast silently (an effect of NaN).
    trunk, layer = _effect_setup()
    x = torch.rand(8, 3, 8, 8)
    with pytest.raises(ValueError, match=rf"base must be trunk\(x\).*\(8, 5\), got shape \({rows}, 5\)"):
        effect_of_layer(trunk, layer, x, trunk(x)[:rows])
    with pytest.raises(TypeError, match="base must be trunk"):
        effect_of_layer(trunk, layer, x, [0.0])


# ----------------------------------------------------------------- EquivarianceLoss
def _loss_setup(weight=0.3):
    torch.manual_seed(0)
    return EquivarianceLoss(8, num_transforms=2, transformed_weight=weight), nn.Linear(8, 3)


@pytest.mark.parametrize("weight", [0.3, 0.0])
@pytest.mark.parametrize("label", [3, -1, 7])
def test_equivariance_loss_refuses_labels_past_the_classes(weight, label):
    loss, head = _loss_setup(weight)
    z, z_t = torch.randn(4, 8), torch.randn(2, 4, 8)
    with pytest.raises(ValueError, match=rf"y must hold class indices in \[0, 3\).*\[{label}\]"):
        loss(z, z_t, torch.tensor([0, 1, 2, label]), head)
    with pytest.raises(ValueError, match="y must hold class indices"):
        loss(z, z_t, torch.tensor([0, 1, 2, label]), head, logits=head(z))


def test_equivariance_loss_keeps_ignore_index():
    loss, head = _loss_setup()
    z, z_t, y = torch.randn(4, 8), torch.randn(2, 4, 8), torch.tensor([0, 1, 2, -100])
    _, terms = loss(z, z_t, y, head, return_terms=True)
    assert terms["clean"] == pytest.approx(float(F.cross_entropy(head(z), y).detach()))


def test_equivariance_loss_refuses_one_unstacked_transformed_batch():
    loss, head = _loss_setup()
    z, y = torch.randn(4, 8), torch.tensor([0, 1, 2, 0])
    with pytest.raises(ValueError, match=r"got one tensor of shape \(4, 8\): for one transformation pass z_t\[None\]"):
        loss(z, torch.randn(4, 8), y, head)
    assert bool(loss(z, torch.randn(1, 4, 8), y, head, maps=[1]).isfinite())


def test_equivariance_map_refuses_an_index_past_the_maps():
    loss, _ = _loss_setup()
    z = torch.randn(4, 8)
    with pytest.raises(ValueError, match=r"map: j must index the 2 maps \(0 to 1\), got 5"):
        loss.map(5, z)
    for bad in (True, 1.0, "0"):
        with pytest.raises(TypeError, match="map: j must be the index of a map"):
            loss.map(bad, z)
    assert torch.equal(loss.map(-1, z), loss.map(1, z))  # negative indices count from the end, as before


# ----------------------------------------------------------------- Augerino (checks that held before)
def test_augerino_widths_near_zero_are_the_identity_and_regulariser_is_minus_the_norm():
    aug = LieAugmentation(0.1)
    with torch.no_grad():
        aug.raw_width.fill_(-1e4)  # softplus: widths of exactly 0
    x = torch.rand(2, 3, 8, 8)
    assert torch.equal(aug(x, copies=3), x.repeat(3, 1, 1, 1))
    model = Augerino(nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 4)), init_width=[0.1, 0.2, 0.3, 0.1, 0.05, 0.1])
    assert torch.equal(augnet.augerino_regularizer(model), -torch.linalg.vector_norm(model.augment.widths))
