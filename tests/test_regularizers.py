"""Regularisers against hand-computed values; lambda schedule; parameter groups."""

import functools
import math

import pytest
import torch
from torch import nn

import augnet
from augnet.regularizers import paper_selective_regularizer
from augnet.training import fit
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
    paper = functools.partial(augnet.selective_regularizer, units="magnitude", diverse=False, saturation=None)
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
    augnet.selective_regularizer(layer, saturation=None).backward()
    g = layer.weight_logits.grad
    assert g[1] < 0 < g[0]
    m = layer.raw_magnitudes.grad
    # dR/dmu_i = -w_i^2 mu_i / ||w * mu||
    norm = math.hypot(0.15, 0.3)
    torch.testing.assert_close(m, torch.tensor([-0.25 * 0.3 / norm, -0.25 * 0.6 / norm]))


def _phi(mu, s):
    return s * math.log1p(mu / s)


def test_saturation_by_hand_on_stacked_layers():
    # Each magnitude enters as s log(1 + mu / s); the effects and the without-replacement discount as before.
    a = layer_with([0.5, 0.3, 0.2], [0.4, 1.0, 0.0])
    b = layer_with([0.9, 0.1], [0.2, 0.6])
    module = augnet.AugmentationModule([a, b])
    s = 0.5
    expected = -math.hypot(0.5 * _phi(0.4, s), 0.3 * _phi(1.0, s), 0.0)
    expected -= math.hypot(0.9 * _phi(0.2, s), 0.1 * _phi(0.6, s))
    got = augnet.selective_regularizer(module, units="magnitude", diverse=False, saturation=s)
    assert math.isclose(got.item(), expected, rel_tol=1e-6)
    with torch.no_grad():
        a.effect.copy_(torch.tensor([1.5, 0.5, 1.0]))
    held = torch.tensor([0.5, 0.3])  # b's Rotate and ShearX are a's first two transforms: a's weights discount them
    vb = torch.tensor([0.9 * _phi(0.2, s), 0.1 * _phi(0.6, s)])
    expected = (
        -math.hypot(0.5 * 1.5 * _phi(0.4, s), 0.3 * 0.5 * _phi(1.0, s), 0.0)
        - torch.linalg.vector_norm(vb * (1 - held)).item()
        + torch.linalg.vector_norm(vb * held).item()
    )
    assert math.isclose(augnet.selective_regularizer(module, saturation=s).item(), expected, rel_tol=1e-5)


def test_saturation_scales_the_pull_on_each_magnitude_by_s_over_s_plus_mu():
    # The same layer with phi(mu) = s log(1 + mu / s) in place of mu: dR/dmu = (dR/dphi) * s / (s + mu), and the
    # weights' gradient is that of the linear regulariser evaluated at phi(mu).
    s, mags = 0.3, [0.2, 0.7, 0.45]
    layer = layer_with([0.2, 0.5, 0.3], mags)
    augnet.selective_regularizer(layer, saturation=s).backward()
    phis = [_phi(m, s) for m in mags]
    ref = layer_with([0.2, 0.5, 0.3], phis)
    augnet.selective_regularizer(ref, saturation=None).backward()
    scale = torch.tensor([s / (s + m) for m in mags])
    torch.testing.assert_close(layer.raw_magnitudes.grad, ref.raw_magnitudes.grad * scale)
    torch.testing.assert_close(layer.weight_logits.grad, ref.weight_logits.grad)


def test_a_large_saturation_is_the_linear_regularizer_and_the_default_saturates_at_one_half():
    layer = layer_with([0.2, 0.5, 0.3], [0.2, 0.7, 0.45])
    linear = augnet.selective_regularizer(layer, saturation=None)
    assert math.isclose(linear.item(), -math.hypot(0.2 * 0.2, 0.5 * 0.7, 0.3 * 0.45), rel_tol=1e-6)
    assert math.isclose(augnet.selective_regularizer(layer, saturation=1e7).item(), linear.item(), rel_tol=1e-6)
    assert augnet.SATURATION == 0.5
    default = augnet.selective_regularizer(layer).item()
    assert default == augnet.selective_regularizer(layer, saturation=0.5).item()
    assert math.isclose(default, -math.hypot(0.2 * _phi(0.2, 0.5), 0.5 * _phi(0.7, 0.5), 0.3 * _phi(0.45, 0.5)),
                        rel_tol=1e-6)  # fmt: skip
    assert default > linear.item()  # a smaller reward: phi(mu) < mu
    # small magnitudes: the same value and pull as the linear one to first order
    tiny = layer_with([0.2, 0.5, 0.3], [1e-4, 2e-4, 3e-4])
    lin, sat = augnet.selective_regularizer(tiny, saturation=None).item(), augnet.selective_regularizer(tiny).item()
    assert math.isclose(sat, lin, rel_tol=1e-3)
    # the paper's regulariser and the "paper" name stay linear
    paper = augnet.selective_regularizer(layer, units="magnitude", diverse=False, saturation=None)
    assert paper_selective_regularizer(layer).item() == paper.item()


@pytest.mark.parametrize("s, c", [(0.5, 0.3), (0.2, 0.1), (1.0, 0.4)])
def test_saturation_meets_a_linear_task_loss_at_the_interior_point(s, c):
    # One transform (weight 1, effect 1) and a task loss c * mu: the linear pull (lambda > c) runs the magnitude to
    # 1, the saturated one stops where lambda s / (s + mu) = c, i.e. mu* = s (lambda / c - 1).
    lam = 0.5
    out = {}
    for saturation in (None, s):
        layer = augnet.AugmentationLayer([T.Rotate()], init_magnitude=0.05)
        opt = torch.optim.SGD([layer.raw_magnitudes], lr=0.2)
        for _ in range(600):
            opt.zero_grad()
            loss = c * layer.magnitudes[0] + lam * augnet.selective_regularizer(layer, saturation=saturation)
            loss.backward()
            opt.step()
        out[saturation] = layer.magnitudes[0].item()
    assert out[None] > 0.9  # at the bound 1 (within one step: the task loss's inward gradient passes there)
    assert out[s] == pytest.approx(min(1.0, s * (lam / c - 1)), abs=1e-3)


def test_saturation_on_a_conditioned_layer_is_the_batch_mean_of_each_rows_term():
    layer = augnet.ConditionedAugmentationLayer([T.Rotate(), T.TranslateX()], channels=1)
    layer(torch.rand(5, 1, 12, 12, generator=torch.Generator().manual_seed(0)), copies=1)
    w, mu = layer.latest_policy()
    s = 0.25
    expected = -torch.linalg.vector_norm(w * layer.effect * s * torch.log1p(mu / s), dim=1).mean()
    torch.testing.assert_close(augnet.selective_regularizer(layer, saturation=s), expected)


@pytest.mark.parametrize("bad, error", [(0.0, ValueError), (-1.0, ValueError), (math.nan, ValueError),
                                        (math.inf, ValueError), (True, TypeError), ("0.5", TypeError)])  # fmt: skip
def test_saturation_must_be_a_positive_number(bad, error):
    layer = layer_with([0.5, 0.5], [0.3, 0.6])
    with pytest.raises(error, match="saturation"):
        augnet.selective_regularizer(layer, saturation=bad)


def test_saturation_through_fit_with_a_partial():
    # How a user passes it to fit: a partial of the regulariser.
    torch.manual_seed(0)
    x, y = torch.rand(32, 1, 8, 8), torch.randint(0, 2, (32,))
    trunk = nn.Sequential(nn.Flatten(), nn.Linear(64, 2))
    model = augnet.AugNet(trunk, augnet.AugmentationLayer([T.Rotate(), T.TranslateX()], init_magnitude=0.1))
    opt = torch.optim.Adam(augnet.param_groups(model), lr=1e-2)
    before = model.augment.layers[0].magnitudes.detach().clone()
    reg = functools.partial(augnet.selective_regularizer, saturation=0.5)
    history = fit(model, x, y, opt, epochs=2, batch_size=16, regularizer=reg, lam=0.5)
    assert len(history["loss"]) > 0
    assert not torch.equal(model.augment.layers[0].magnitudes.detach(), before)


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
    groups = augnet.param_groups(model, weight_decay=1e-4, aug_weight_decay=0.0, aug_lr=1e-2, weight_lr=None)
    assert {id(p) for p in groups[0]["params"]} == {id(p) for p in trunk.parameters()}
    assert {id(p) for p in groups[1]["params"]} == {id(p) for p in model.augment.parameters()}
    assert groups[0]["weight_decay"] == 1e-4 and groups[1]["weight_decay"] == 0.0 and groups[1]["lr"] == 1e-2
    torch.optim.AdamW(groups, lr=1e-3)  # accepted by an optimiser as is
    # by default the weight logits (of both layers) have a group of their own at WEIGHT_LR
    groups = augnet.param_groups(model)
    layers = model.augment.layers
    assert [id(p) for p in groups[1]["params"]] == [id(layer.weight_logits) for layer in layers]
    assert [id(p) for p in groups[2]["params"]] == [id(layer.raw_magnitudes) for layer in layers]
    assert [g.get("lr") for g in groups] == [None, augnet.WEIGHT_LR, augnet.AUG_LR]
    assert augnet.WEIGHT_LR == 3 * augnet.AUG_LR


def test_param_groups_weight_lr_gives_the_weight_logits_their_own_rate():
    layer = augnet.AugmentationLayer([T.Rotate(), T.TranslateX()], init_magnitude=[0.2, 0.6])
    model = augnet.AugNet(torch.nn.Linear(4, 2), layer)
    groups = augnet.param_groups(model, weight_lr=1.5e-2, aug_weight_decay=1e-3)
    assert [[id(p) for p in g["params"]] for g in groups[1:]] == [[id(layer.weight_logits)], [id(layer.raw_magnitudes)]]
    assert [g.get("lr") for g in groups] == [None, 1.5e-2, augnet.AUG_LR]
    assert [g["weight_decay"] for g in groups] == [0.0, 1e-3, 1e-3]  # the magnitudes keep aug_weight_decay
    with_decay = augnet.param_groups(model, weight_lr=1.5e-2, magnitude_weight_decay=0.5, aug_lr=None)
    assert [g.get("lr") for g in with_decay] == [None, 1.5e-2, None] and with_decay[2]["weight_decay"] == 0.5
    # Adam's first step moves the weight logits by weight_lr and the magnitudes by aug_lr
    opt = torch.optim.Adam(groups, lr=1e-4)
    w0, m0 = layer.weight_logits.detach().clone(), layer.raw_magnitudes.detach().clone()
    augnet.selective_regularizer(layer).backward()
    opt.step()
    torch.testing.assert_close((layer.weight_logits - w0).abs().max(), torch.tensor(1.5e-2), rtol=1e-3, atol=0)
    torch.testing.assert_close((layer.raw_magnitudes - m0).abs().max(), torch.tensor(augnet.AUG_LR), rtol=1e-3, atol=0)


@pytest.mark.parametrize("bad, error", [(0.0, ValueError), (-1e-3, ValueError), (math.inf, ValueError),
                                        ("1e-2", TypeError)])  # fmt: skip
def test_param_groups_weight_lr_must_be_positive(bad, error):
    model = augnet.AugNet(torch.nn.Linear(4, 2), augnet.AugmentationLayer([T.Rotate()]))
    with pytest.raises(error, match="weight_lr"):
        augnet.param_groups(model, weight_lr=bad)


def test_param_groups_give_the_augmentation_its_own_rate_by_default():
    """The augmentation learns at AUG_LR whatever the optimiser's rate; aug_lr=None leaves it the optimiser's."""
    model = augnet.AugNet(torch.nn.Linear(4, 2), augnet.AugmentationLayer([T.Rotate(), T.TranslateX()]))
    for lr in (5e-4, 1e-2):
        opt = torch.optim.Adam(augnet.param_groups(model), lr=lr)
        assert [g["lr"] for g in opt.param_groups] == [lr, augnet.WEIGHT_LR, augnet.AUG_LR] and augnet.AUG_LR == 5e-3
        opt = torch.optim.Adam(augnet.param_groups(model, aug_lr=None, weight_lr=None), lr=lr)
        assert [g["lr"] for g in opt.param_groups] == [lr, lr]
    # Adam's first step moves each augmentation parameter by the group's rate, not the trunk's
    opt = torch.optim.Adam(augnet.param_groups(model, weight_lr=None), lr=1e-4)
    layer = model.augment.layers[0]
    before = layer.weight_logits.detach().clone()
    (-(layer.weights[0] * layer.magnitudes[0])).backward()
    opt.step()
    assert torch.allclose((layer.weight_logits - before).abs().max(), torch.tensor(augnet.AUG_LR), rtol=1e-3)
