"""Selection in effect units: the sampled training mode, the measured effects, the discount across layers."""

import math

import pytest
import torch
from torch import nn

import augnet
from augnet.effects import effect_of_layer, measure_effects
from augnet.transforms import image as T
from augnet.transforms import signal as S


def gen(seed):
    return torch.Generator().manual_seed(seed)


def images(b=4, seed=0):
    return torch.rand(b, 3, 8, 8, generator=gen(seed))


def signals(b=4, seed=0):
    return torch.randn(b, 2, 32, generator=gen(seed))


# ------------------------------------------------------------------ train_mode="sample"


@pytest.mark.parametrize("kind", ["taps", "generic"])
def test_sampled_training_rows_are_one_transform_each_with_the_blend_gradient(kind):
    # At magnitude 1 these flips are deterministic (always applied), so each transform's output is known.
    if kind == "taps":
        transforms, x = [T.HorizontalFlip(), T.VerticalFlip(), T.Invert()], images()
    else:
        transforms, x = [S.TimeReverse(), S.SignFlip()], signals()
    logits = torch.tensor([0.3, -0.2, 0.1][: len(transforms)])
    outs = [t(x, 1.0, generator=gen(0)) for t in transforms]  # (B, ...) each, the same at every draw

    layers = {}
    for mode in ("sample", "mix"):
        layer = augnet.AugmentationLayer(transforms, init_magnitude=1.0, train_mode=mode)
        with torch.no_grad():
            layer.weight_logits.copy_(logits)
        out = layer(x, copies=3, generator=gen(1))
        g = torch.randn(out.shape, generator=gen(2))
        (out * g).sum().backward()
        layers[mode] = (layer, out)
    out = layers["sample"][1]
    rows = out.reshape(3, *x.shape)
    for c in range(3):
        for b in range(len(x)):
            assert any(torch.allclose(rows[c, b], o[b], atol=1e-6) for o in outs), (c, b)
    # A linear loss: the straight-through gradient of the logits is the blend's.
    torch.testing.assert_close(layers["sample"][0].weight_logits.grad, layers["mix"][0].weight_logits.grad)


def test_sampled_training_gives_a_magnitude_only_the_gradient_of_its_rows():
    layer = augnet.AugmentationLayer([S.GaussianNoise(), S.FTSurrogate()], init_magnitude=0.5)
    with torch.no_grad():
        layer.weight_logits.copy_(torch.tensor([20.0, -20.0]))  # every row draws the noise
    out = layer(signals(), copies=2, generator=gen(3))
    out.square().sum().backward()
    grad = layer.raw_magnitudes.grad
    assert grad[0] != 0 and grad[1] == 0


def test_sampled_training_draws_per_row_from_the_weights():
    layer = augnet.AugmentationLayer([S.SignFlip(), S.TimeReverse()], init_magnitude=1.0)
    with torch.no_grad():
        layer.weight_logits.copy_(torch.tensor([math.log(0.8), math.log(0.2)]))
    x = torch.arange(8.0).reshape(1, 1, 8).expand(500, 1, 8).contiguous()
    out = layer(x, copies=4, generator=gen(4))
    flipped = (out[:, 0, 0] == -x[0, 0, 0]).float().mean()  # SignFlip keeps the first sample's position
    assert abs(float(flipped) - 0.8) < 0.03


def test_train_mode_is_checked_and_stated():
    with pytest.raises(ValueError, match="train_mode must be one of"):
        augnet.AugmentationLayer([T.Rotate()], train_mode="blend")
    layer = augnet.AugmentationLayer([T.Rotate()], train_mode="mix")
    assert "train_mode='mix'" in repr(layer)
    assert augnet.AugmentationLayer([T.Rotate()]).train_mode == "sample"


# ------------------------------------------------------------------ effects


def pooled_trunk(classes=3):
    torch.manual_seed(0)
    return nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(3, classes))


def test_a_transform_the_trunk_ignores_has_no_effect():
    # Global average pooling is exactly invariant to flips, not to rotations with zero padding.
    trunk = pooled_trunk()
    layer = augnet.AugmentationLayer([T.HorizontalFlip(), T.Rotate()], init_magnitude=0.5)
    x = images(16)
    effect = effect_of_layer(trunk, layer, x, trunk(x), gen(0))
    assert effect[0] < 1e-5 and effect[1] > 0.05  # a flip through bilinear sampling: exact up to rounding
    measure_effects(trunk, [layer], x)
    # Normalised to mean 1 under the (uniform) weights: all of it on Rotate.
    torch.testing.assert_close(layer.effect, torch.tensor([0.0, 2.0]), atol=1e-4, rtol=0)
    assert bool(layer.effect_measured)


def test_effect_is_the_relative_output_change_per_unit_of_magnitude():
    trunk = nn.Identity()
    layer = augnet.AugmentationLayer([T.Brightness(max_shift=0.5)], init_magnitude=0.4)
    x = images(32)
    effect = effect_of_layer(trunk, layer, x, x, gen(5))
    moved = T.Brightness(max_shift=0.5)(x, 0.4, generator=gen(5))
    expected = ((moved - x).pow(2).mean() / (x - x.mean(0)).pow(2).mean()).sqrt() / 0.4
    torch.testing.assert_close(effect, expected[None])


def test_a_calibrated_layers_effect_is_per_unit_of_its_own_magnitude():
    trunk = nn.Identity()
    layer = augnet.AugmentationLayer([T.Brightness(max_shift=0.5), T.Rotate()], init_magnitude=0.4)
    x = images(32)
    layer.calibrate(x)
    mu = layer.magnitudes.detach()
    effect = effect_of_layer(trunk, layer, x, x, gen(5))
    run = layer.transform_magnitudes.detach()
    moved = T.Brightness(max_shift=0.5)(x, run[0], generator=gen(5))
    expected = ((moved - x).pow(2).mean() / (x - x.mean(0)).pow(2).mean()).sqrt() / mu[0]
    torch.testing.assert_close(effect[0], expected)


def test_measuring_changes_neither_the_model_nor_the_random_stream():
    trunk = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.LazyLinear(2))
    model = augnet.AugNet(trunk, augnet.AugmentationLayer([T.Rotate(), T.TranslateX()]))
    model(images())  # the lazy layer
    before = {k: v.clone() for k, v in model.state_dict().items() if "effect" not in k and "extra" not in k}
    state = torch.get_rng_state()
    model.measure_effects(images(8, seed=1))
    assert torch.equal(torch.get_rng_state(), state)
    assert model.trunk.training
    for k, v in model.state_dict().items():
        if k in before:
            assert torch.equal(v, before[k]), k


@pytest.mark.parametrize("how", ["measure_effects", "training pass"])
def test_measuring_keeps_each_submodules_own_mode(how):
    # Fine-tuning with a frozen batch norm: the model trains, its batch norm does not.
    trunk = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.LazyLinear(2))
    model = augnet.AugNet(trunk, augnet.AugmentationLayer([T.Rotate(), T.TranslateX()]), effect_every=1)
    model(images())  # the lazy layer
    model.train()
    trunk[1].eval()
    running = trunk[1].running_mean.clone()
    if how == "measure_effects":
        model.measure_effects(images(8, seed=1))
    else:
        model(images(8, seed=1))  # measures the effects first (effect_every=1)
    assert model.training and trunk.training and trunk[0].training
    assert not trunk[1].training
    assert torch.equal(trunk[1].running_mean, running)


def test_unusable_measurements_leave_the_effects_alone():
    layer = augnet.AugmentationLayer([T.Rotate(), T.TranslateX()])
    constant = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 2))
    nn.init.zeros_(constant[1].weight)
    measure_effects(constant, [layer], images())  # the outputs do not vary: nothing to compare against
    assert torch.equal(layer.effect, torch.ones(2)) and not bool(layer.effect_measured)
    class NaNs(nn.Module):
        def forward(self, z):
            return z.flatten(1) * float("nan")

    measure_effects(NaNs(), [layer], images())
    assert torch.equal(layer.effect, torch.ones(2))


def test_effects_are_averaged_over_measurements():
    trunk = pooled_trunk()
    layer = augnet.AugmentationLayer([T.HorizontalFlip(), T.Rotate()], init_magnitude=0.5)
    measure_effects(trunk, [layer], images(16))
    with torch.no_grad():
        layer.effect.copy_(torch.tensor([1.0, 1.0]))
    measure_effects(trunk, [layer], images(16), momentum=0.25)
    torch.testing.assert_close(layer.effect, torch.tensor([0.75, 1.25]))


def test_augnet_measures_every_effect_every_passes_and_saves_the_count():
    calls = []

    class Counting(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = pooled_trunk()

        def forward(self, z):
            calls.append(len(z))
            return self.net(z)

    layer = augnet.AugmentationLayer([T.HorizontalFlip(), T.Rotate()])
    model = augnet.AugNet(Counting(), layer, train_copies=2, effect_every=3)
    for _ in range(4):
        model(images())
    # Passes 0 and 3 measure on the 4 clean rows (the batch, then each transform) before the 8 training rows.
    assert calls == [4, 4, 4, 8, 8, 8, 4, 4, 4, 8]
    assert model.passes == 4
    again = augnet.AugNet(pooled_trunk(), augnet.AugmentationLayer([T.HorizontalFlip(), T.Rotate()]), effect_every=3)
    again.load_state_dict({k.replace("trunk.net.", "trunk."): v for k, v in model.state_dict().items()})
    assert again.passes == 4
    assert torch.equal(again.augment.layers[0].effect, model.augment.layers[0].effect)
    calls.clear()
    with torch.no_grad():
        model(images())  # not training: no gradient, no measurement
    model.eval()(images())
    assert calls == [8, 16]


def test_a_state_saved_before_the_effects_loads_unmeasured():
    model = augnet.AugNet(pooled_trunk(), augnet.AugmentationLayer([T.HorizontalFlip(), T.Rotate()]))
    model(images())
    old = {k: v for k, v in model.state_dict().items() if "effect" not in k and "extra_state" not in k}
    fresh = augnet.AugNet(pooled_trunk(), augnet.AugmentationLayer([T.HorizontalFlip(), T.Rotate()]))
    fresh.load_state_dict(old)
    assert fresh.passes == 0 and not bool(fresh.augment.layers[0].effect_measured)


def test_effect_every_is_checked():
    with pytest.raises(ValueError, match="effect_every must be an int >= 0"):
        augnet.AugNet(pooled_trunk(), augnet.AugmentationLayer([T.Rotate()]), effect_every=-1)


# ------------------------------------------------------------------ the regulariser


def two_layers(w0, w1, mags=(0.5, 0.5)):
    layers = []
    for w in (w0, w1):
        layer = augnet.AugmentationLayer([T.Rotate(), T.ShearX()], init_magnitude=list(mags))
        with torch.no_grad():
            layer.weight_logits.copy_(torch.tensor(w).log())
        layers.append(layer)
    return augnet.AugmentationModule(layers)


def test_a_later_layer_discounts_what_an_earlier_one_chose():
    module = two_layers([0.9, 0.1], [0.6, 0.4])
    new = math.hypot(0.6 * 0.5 * (1 - 0.9), 0.4 * 0.5 * (1 - 0.1))
    repeated = math.hypot(0.6 * 0.5 * 0.9, 0.4 * 0.5 * 0.1)
    expected = -math.hypot(0.9 * 0.5, 0.1 * 0.5) - new + repeated
    got = augnet.selective_regularizer(module, saturation=None)
    assert math.isclose(got.item(), expected, rel_tol=1e-6)
    got.backward()
    # The first layer's weights are constants in the second layer's term: its gradient is its own term's.
    first = module.layers[0]
    alone = two_layers([0.9, 0.1], [0.6, 0.4]).layers[0]
    augnet.selective_regularizer(alone, saturation=None).backward()
    torch.testing.assert_close(first.weight_logits.grad, alone.weight_logits.grad)


def test_the_same_transform_means_the_same_class_and_arguments():
    a = augnet.AugmentationLayer([T.Rotate(), T.ShearX()], init_magnitude=0.5)
    b = augnet.AugmentationLayer([T.Rotate(max_angle=1.0), T.ShearX()], init_magnitude=0.5)
    with torch.no_grad():
        a.weight_logits.copy_(torch.tensor([0.9, 0.1]).log())
    module = augnet.AugmentationModule([a, b])
    expected = -math.hypot(0.9 * 0.5, 0.1 * 0.5) - math.hypot(0.5 * 0.5, 0.5 * 0.5 * (1 - 0.1)) + 0.5 * 0.5 * 0.1
    assert math.isclose(augnet.selective_regularizer(module, saturation=None).item(), expected, rel_tol=1e-6)


def test_effect_units_weigh_each_magnitude_by_its_effect():
    layer = augnet.AugmentationLayer([T.Rotate(), T.ShearX()], init_magnitude=[0.2, 0.8])
    with torch.no_grad():
        layer.effect.copy_(torch.tensor([1.8, 0.2]))
    expected = -math.hypot(0.5 * 1.8 * 0.2, 0.5 * 0.2 * 0.8)
    assert math.isclose(augnet.selective_regularizer(layer, saturation=None).item(), expected, rel_tol=1e-6)
    paper = -math.hypot(0.5 * 0.2, 0.5 * 0.8)
    got = augnet.selective_regularizer(layer, units="magnitude", saturation=None).item()
    assert math.isclose(got, paper, rel_tol=1e-6)
    with pytest.raises(ValueError, match="units must be one of"):
        augnet.selective_regularizer(layer, units="pixels")
    with pytest.raises(TypeError, match="diverse must be a bool"):
        augnet.selective_regularizer(layer, diverse="yes")


def test_fit_takes_the_paper_regulariser_by_name_or_any_callable():
    from augnet.regularizers import get_regularizer, paper_selective_regularizer

    assert get_regularizer("paper") is paper_selective_regularizer
    mine = lambda model: torch.zeros(())  # noqa: E731
    assert get_regularizer(mine) is mine
    with pytest.raises(ValueError, match="or a callable"):
        get_regularizer("nope")


# ------------------------------------------------------------------ policy files


def test_policy_files_keep_the_train_mode_and_the_effects():
    layer = augnet.AugmentationLayer([T.Rotate(), T.ShearX()], train_mode="mix")
    measure_effects(pooled_trunk(), [layer], images(16))
    module = augnet.AugmentationModule([layer])
    again = augnet.AugmentationModule.from_policy(module.policy().to_json())
    assert again.layers[0].train_mode == "mix"
    assert torch.equal(again.layers[0].effect, layer.effect) and bool(again.layers[0].effect_measured)
    data = module.policy().to_json()
    for key in ("train_mode", "effect"):
        del data["layers"][0][key]
    old = augnet.AugmentationModule.from_policy(data)  # a file from before: trained with the blend
    assert old.layers[0].train_mode == "mix" and not bool(old.layers[0].effect_measured)
