"""Regularisers against hand-computed values; lambda schedule; parameter groups."""

import functools
import math

import pytest
import torch
from torch import nn

import augnet
from augnet.regularizers import paper_selective_regularizer
from augnet.transforms import image as T


def layer_with(weights, mags):
    layer = augnet.AugmentationLayer([T.Rotate(), T.ShearX(), T.TranslateY()][: len(weights)], init_magnitude=mags)
    with torch.no_grad():
        layer.weight_logits.copy_(torch.tensor(weights).log())
    return layer


def test_selective_regularizer_by_hand():
    a = layer_with([0.5, 0.3, 0.2], [0.4, 1.0, 0.0])
    b = layer_with([0.9, 0.1], [0.2, 0.6])
    module = augnet.AugmentationModule([a, b])
    expected = -math.hypot(0.5 * 0.4, 0.3 * 1.0, 0.0) - math.hypot(0.9 * 0.2, 0.1 * 0.6)
    paper = functools.partial(augnet.selective_regularizer, units="magnitude", diverse=False)
    assert math.isclose(paper(module).item(), expected, rel_tol=1e-6)
    model = augnet.AugNet(nn.Linear(2, 2), module)
    assert math.isclose(paper(model).item(), expected, rel_tol=1e-6)
    assert math.isclose(paper_selective_regularizer(model).item(), expected, rel_tol=1e-6)


def test_augerino_regularizer_by_hand_ignores_the_weights():
    module = augnet.AugmentationModule(
        [layer_with([0.5, 0.3, 0.2], [0.4, 1.0, 0.0]), layer_with([0.9, 0.1], [0.2, 0.6])]
    )
    expected = -math.hypot(0.4, 1.0, 0.0) - math.hypot(0.2, 0.6)
    assert math.isclose(augnet.augerino_regularizer(module).item(), expected, rel_tol=1e-6)
    assert augnet.no_regularizer(module).item() == 0.0


def test_selective_gradient_favours_the_transform_with_the_larger_magnitude():
    # dR/dw_i is proportional to -w_i mu_i^2: gradient descent on R raises the
    # weight of the transform with the larger magnitude (paper, section 3.4).
    layer = layer_with([0.5, 0.5], [0.3, 0.6])
    augnet.selective_regularizer(layer).backward()
    g = layer.weight_logits.grad
    assert g[1] < 0 < g[0]
    m = layer.raw_magnitudes.grad
    # dR/dmu_i = -w_i^2 mu_i / ||w * mu||
    norm = math.hypot(0.15, 0.3)
    torch.testing.assert_close(m, torch.tensor([-0.25 * 0.3 / norm, -0.25 * 0.6 / norm]))


def test_get_regularizer_by_name():
    assert augnet.regularizers.get_regularizer("selective") is augnet.selective_regularizer
    with pytest.raises(ValueError, match="unknown regularizer 'l1'"):
        augnet.regularizers.get_regularizer("l1")


def test_regularizer_needs_augmentation_layers():
    with pytest.raises(ValueError, match="no AugmentationLayer found in Linear"):
        augnet.selective_regularizer(nn.Linear(2, 2))
    with pytest.raises(TypeError, match=r"nn\.Module"):
        augnet.selective_regularizer([1, 2])


def test_lambda_schedule():
    s = augnet.LambdaSchedule((0.5, 0.1, 0.05), milestones=(2, 5))
    assert [s(e) for e in range(7)] == [0.5, 0.5, 0.1, 0.1, 0.1, 0.05, 0.05]
    with pytest.raises(ValueError, match="one more value than milestones"):
        augnet.LambdaSchedule((0.5,), (3,))
    with pytest.raises(ValueError, match="increasing"):
        augnet.LambdaSchedule((0.5, 0.1, 0.0), (5, 3))
    with pytest.raises(ValueError, match="non-negative"):
        augnet.LambdaSchedule((0.5, -0.1), (3,))
    with pytest.raises(ValueError, match="epoch must be >= 0"):
        s(-1)


def test_param_groups_separate_augmentation_parameters():
    trunk = nn.Linear(4, 2)
    model = augnet.AugNet(trunk, [layer_with([0.5, 0.5], [0.1, 0.1]), layer_with([0.5, 0.5], [0.1, 0.1])])
    groups = augnet.param_groups(model, weight_decay=1e-4, aug_weight_decay=0.0, aug_lr=1e-2)
    assert {id(p) for p in groups[0]["params"]} == {id(p) for p in trunk.parameters()}
    assert {id(p) for p in groups[1]["params"]} == {id(p) for p in model.augment.parameters()}
    assert groups[0]["weight_decay"] == 1e-4 and groups[1]["weight_decay"] == 0.0 and groups[1]["lr"] == 1e-2
    torch.optim.AdamW(groups, lr=1e-3)  # accepted by an optimiser as is


def test_param_groups_give_the_augmentation_its_own_rate_by_default():
    """The augmentation learns at AUG_LR whatever the optimiser's rate; aug_lr=None leaves it the optimiser's."""
    model = augnet.AugNet(torch.nn.Linear(4, 2), augnet.AugmentationLayer([T.Rotate(), T.TranslateX()]))
    for lr in (5e-4, 1e-2):
        opt = torch.optim.Adam(augnet.param_groups(model), lr=lr)
        assert [g["lr"] for g in opt.param_groups] == [lr, augnet.AUG_LR] and augnet.AUG_LR == 5e-3
        opt = torch.optim.Adam(augnet.param_groups(model, aug_lr=None), lr=lr)
        assert [g["lr"] for g in opt.param_groups] == [lr, lr]
    # Adam's first step moves each augmentation parameter by the group's rate, not the trunk's
    opt = torch.optim.Adam(augnet.param_groups(model), lr=1e-4)
    layer = model.augment.layers[0]
    before = layer.weight_logits.detach().clone()
    (-(layer.weights[0] * layer.magnitudes[0])).backward()
    opt.step()
    assert torch.allclose((layer.weight_logits - before).abs().max(), torch.tensor(augnet.AUG_LR), rtol=1e-3)
