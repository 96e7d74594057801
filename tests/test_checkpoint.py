"""Checkpoints: state_dict round trips with weights_only loading, and exact resumption."""

import io

import pytest
import torch
import torch.nn.functional as F
from helpers import gen
from torch import nn

import augnet
from augnet.training import Callback, TemperatureAnnealing, WeightWarmup, fit
from augnet.transforms import image as T
from augnet.transforms import signal as S


def image_model(seed=0):
    torch.manual_seed(seed)
    trunk = nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3)
    )
    layers = [
        augnet.AugmentationLayer([T.Rotate(), T.ShearX(), T.HorizontalFlip()], init_magnitude=0.3),
        augnet.AugmentationLayer([T.Brightness(), T.Contrast()], init_magnitude=0.2),
    ]
    return augnet.AugNet(trunk, layers, train_copies=2)


def round_trip(obj):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


def test_state_dict_round_trip_with_weights_only_keeps_the_policy_and_outputs():
    a = image_model()
    with torch.no_grad():
        a.augment.layers[0].weight_logits.copy_(torch.tensor([0.5, -1.0, 0.2]))
        a.augment.layers[1].raw_magnitudes.copy_(torch.tensor([0.7, 0.1]))
    b = image_model(seed=1)
    b.load_state_dict(round_trip(a.state_dict()))
    assert a.policy().to_json() == b.policy().to_json()
    x = torch.rand(5, 3, 8, 8, generator=gen(0))
    for mode in (True, False):
        a.train(mode), b.train(mode)
        torch.testing.assert_close(a(x, generator=gen(1)), b(x, generator=gen(1)))


def test_augerino_and_signal_models_round_trip():
    a = augnet.Augerino(nn.Flatten(), init_width=[0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    b = augnet.Augerino(nn.Flatten())
    b.load_state_dict(round_trip(a.state_dict()))
    assert a.policy() == b.policy()
    layer = augnet.AugmentationLayer([S.FrequencyShift(100.0), S.TimeMask(), S.GaussianNoise()], init_magnitude=0.4)
    c = augnet.AugmentationLayer([S.FrequencyShift(100.0), S.TimeMask(), S.GaussianNoise()])
    c.load_state_dict(round_trip(layer.state_dict()))
    assert layer.policy() == c.policy()


def test_an_augerino_that_has_seen_images_round_trips_its_policy_in_pixels():
    # The input size is part of the state, as a layer's: the translations stay in pixels of the size seen.
    a = augnet.Augerino(nn.Flatten(), init_width=0.2)
    a(torch.rand(2, 3, 20, 12, generator=gen(0)), generator=gen(1))
    b = augnet.Augerino(nn.Flatten(), init_width=0.2)
    b.load_state_dict(round_trip(a.state_dict()))
    assert b.augment.last_size == (20, 12)
    assert a.policy() == b.policy()
    translate = {e["transform"]: e["range"] for e in b.policy()[0]}["translate_x"]
    assert translate.unit == "px" and translate.high == pytest.approx(0.2 * 12 / 2, rel=1e-6)
    # A state saved before the size was saved loads (strictly) and keeps the size the receiving model has.
    old = {k: v for k, v in a.state_dict().items() if not k.endswith("_extra_state")}
    c = augnet.Augerino(nn.Flatten())
    c(torch.rand(1, 3, 6, 10, generator=gen(2)), generator=gen(3))
    c.load_state_dict(old)
    assert c.augment.last_size == (6, 10)
    for bad, error in [(torch.tensor([2.0, 3.0]), TypeError), (torch.tensor([0, 3]), ValueError)]:
        with pytest.raises(error, match="Augerino's saved input size"):
            c.load_state_dict({**old, "augment._extra_state": bad})


def train(model, opt, g, steps, x, y):
    for _ in range(steps):
        loss = F.nll_loss(model(x, generator=g), y) + 0.5 * augnet.selective_regularizer(model)
        opt.zero_grad()
        loss.backward()
        opt.step()


def test_resuming_reproduces_the_uninterrupted_run_exactly():
    x = torch.rand(8, 3, 8, 8, generator=gen(0))
    y = torch.randint(0, 3, (8,), generator=gen(1))

    full = image_model()
    opt = torch.optim.Adam(augnet.param_groups(full, weight_decay=1e-4, aug_lr=1e-2), lr=1e-3)
    train(full, opt, gen(2), 6, x, y)

    first = image_model()
    opt = torch.optim.Adam(augnet.param_groups(first, weight_decay=1e-4, aug_lr=1e-2), lr=1e-3)
    g = gen(2)
    train(first, opt, g, 3, x, y)
    checkpoint = round_trip({"model": first.state_dict(), "optim": opt.state_dict(), "generator": g.get_state()})

    resumed = image_model(seed=5)
    opt = torch.optim.Adam(augnet.param_groups(resumed, weight_decay=1e-4, aug_lr=1e-2), lr=1e-3)
    resumed.load_state_dict(checkpoint["model"])
    opt.load_state_dict(checkpoint["optim"])
    g = torch.Generator()
    g.set_state(checkpoint["generator"])
    train(resumed, opt, g, 3, x, y)

    for (name, p), q in zip(full.named_parameters(), resumed.parameters(), strict=True):
        assert torch.equal(p, q), name
    assert full.policy().to_json() == resumed.policy().to_json()


class _Checkpoint(Callback):
    """Saves everything a resumed run needs at the end of epoch ``at``, as a user's checkpoint callback would."""

    def __init__(self, at, generator, scheduler):
        self.at, self.generator, self.scheduler, self.saved = at, generator, scheduler, None

    def on_epoch_end(self, state):
        if state.epoch == self.at:  # fit has stepped an epoch scheduler before on_epoch_end: save it as it is
            scheduler = self.scheduler.state_dict()
            self.saved = round_trip({
                "model": state.model.state_dict(), "optimizer": state.optimizer.state_dict(),
                "scheduler": scheduler, "generator": self.generator.get_state(),
            })  # fmt: skip


def test_fit_resumes_epoch_indexed_schedules_at_start_epoch():
    # A callable lam, an annealed temperature and a weight warm-up depend on the epoch: fit(start_epoch=2) after a
    # checkpoint of epoch 1 must train epochs 2 and 3 as the uninterrupted run did, bit for bit.
    x, y = torch.rand(24, 3, 8, 8, generator=gen(3)), torch.randint(0, 3, (24,), generator=gen(4))

    def run(start_epoch=0, saved=None, checkpoint_at=None):
        model = image_model()
        opt = torch.optim.Adam(augnet.param_groups(model), lr=1e-2)
        scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)  # reads last_epoch, not only lr
        g = torch.Generator().manual_seed(0)
        if saved is not None:
            model.load_state_dict(saved["model"])
            opt.load_state_dict(saved["optimizer"])
            scheduler.load_state_dict(saved["scheduler"])
            g.set_state(saved["generator"])
        keep = _Checkpoint(checkpoint_at, g, scheduler)
        callbacks = [TemperatureAnnealing(1.0, 0.1), WeightWarmup(3), keep]
        fit(model, x, y, opt, 4, 8, lam=lambda e: 0.1 * (e + 1), generator=g, callbacks=callbacks,
            scheduler=scheduler, start_epoch=start_epoch)  # fmt: skip
        return model, keep.saved

    whole, saved = run(checkpoint_at=1)
    resumed, _ = run(start_epoch=2, saved=saved)
    for (name, a), b in zip(whole.state_dict().items(), resumed.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    assert resumed.augment.layers[0].temperature == whole.augment.layers[0].temperature == 0.1


def test_fit_refuses_a_start_epoch_outside_the_run():
    model = image_model()
    x, y = torch.rand(8, 3, 8, 8), torch.randint(0, 3, (8,))
    for bad, error in ((5, ValueError), (-1, ValueError), (1.0, TypeError), (True, TypeError)):
        with pytest.raises(error, match="start_epoch"):
            fit(model, x, y, torch.optim.SGD(model.parameters(), lr=0.1), 4, 8, start_epoch=bad)


# ----------------------------------------------------------------------- partial and failed loads


def _calibrated_measured_model():
    model = image_model()
    x = torch.rand(6, 3, 8, 8, generator=gen(0))
    model.augment.layers[0].calibrate(x)
    model.train()
    model(x, generator=gen(1))  # the first training pass measures the effects
    model.passes = 7
    return model


def _layer_state(layer):
    calibration = None if layer.calibration is None else layer.calibration.clone()
    return (calibration, layer.effect.clone(), bool(layer.effect_measured), layer.temperature, layer.last_size,
            layer.weight_logits.detach().clone(), layer.raw_magnitudes.detach().clone())  # fmt: skip


def _same_layer_state(a, b) -> bool:
    def same(x, y) -> bool:
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            return x.shape == y.shape and x.dtype == y.dtype and torch.equal(x, y)
        return x == y  # None, a bool, the temperature, the size

    return all(same(x, y) for x, y in zip(a, b, strict=True))


def test_a_partial_load_with_strict_false_keeps_calibration_effects_and_passes():
    # Loading a pretrained trunk into a calibrated, trained AugNet: what the state lacks stays as it is.
    model = _calibrated_measured_model()
    layer = model.augment.layers[0]
    before, policy = _layer_state(layer), str(model.policy())
    assert layer.calibration is not None and bool(layer.effect_measured)
    trunk = {k: v for k, v in image_model(seed=1).state_dict().items() if k.startswith("trunk.")}
    result = model.load_state_dict(trunk, strict=False)
    assert _same_layer_state(_layer_state(layer), before) and str(model.policy()) == policy
    assert model.passes == 7
    assert "augment.layers.0.calibration" in result.missing_keys and "_extra_state" in result.missing_keys
    assert all(torch.equal(v, trunk[k]) for k, v in model.state_dict().items() if k in trunk)  # the trunk loaded


def test_an_old_checkpoint_of_the_whole_model_still_loads_with_the_old_defaults():
    # A state saved before the calibration, the effects and the pass count existed: the layer's parameters
    # without the new keys. It loads strictly, with no calibration, unmeasured effects and 0 passes.
    old = {k: v for k, v in image_model(seed=1).state_dict().items()
           if not k.endswith(("calibration", "effect", "effect_measured", "_extra_state"))}  # fmt: skip
    model = _calibrated_measured_model()
    model.load_state_dict(old)
    layer = model.augment.layers[0]
    assert layer.calibration is None and not bool(layer.effect_measured) and torch.equal(layer.effect, torch.ones(3))
    assert model.passes == 0


def test_a_failed_load_leaves_the_layer_as_it_was_and_usable():
    # A calibrated 2-transform layer's state into a 3-transform model: a size mismatch, and the 3-transform
    # layer must not be left holding the (2, 17) calibration.
    x = torch.rand(4, 3, 8, 8, generator=gen(0))
    source = augnet.AugNet(nn.Flatten(), augnet.AugmentationLayer([T.Rotate(), T.TranslateX()]))
    source.augment.layers[0].calibrate(x)
    for calibrated in (False, True):
        target = augnet.AugNet(nn.Flatten(), augnet.AugmentationLayer([T.ShearX(), T.Scale(), T.Rotate()]))
        layer = target.augment.layers[0]
        if calibrated:
            layer.calibrate(x, points=5)
        before = _layer_state(layer)
        with pytest.raises(RuntimeError, match=r"augment\.layers\.0"):
            target.load_state_dict(source.state_dict())
        assert _same_layer_state(_layer_state(layer), before)
        assert target.eval()(x, generator=gen(2)).shape == (4, 3 * 8 * 8)  # still works
    # A failing set_extra_state (a saved temperature of 0) puts the layer's parameters back too.
    layer = augnet.AugmentationLayer([T.Rotate(), T.TranslateX()])
    state = source.augment.layers[0].state_dict()
    bits = torch.tensor([0.0], dtype=torch.float64).view(torch.int64)
    state["_extra_state"] = torch.cat([torch.tensor([-1]), bits])
    before = _layer_state(layer)
    with pytest.raises(ValueError, match="saved temperature must be > 0"):
        layer.load_state_dict(state)
    assert _same_layer_state(_layer_state(layer), before)


def test_an_augerino_load_that_fails_leaves_its_widths():
    a, b = augnet.Augerino(nn.Flatten(), init_width=0.3), augnet.Augerino(nn.Flatten(), init_width=0.1)
    widths = b.augment.widths.detach().clone()
    with pytest.raises(ValueError, match="Augerino's saved input size"):
        b.load_state_dict({**a.state_dict(), "augment._extra_state": torch.tensor([0, 3])})
    assert torch.equal(b.augment.widths.detach(), widths)


def test_a_calibration_of_any_number_of_points_loads_whether_the_layer_is_calibrated_or_not():
    x = torch.rand(4, 3, 8, 8, generator=gen(0))
    source = augnet.AugmentationLayer([T.Rotate(), T.TranslateX()])
    source.calibrate(x, points=9)
    for points in (None, 17):
        layer = augnet.AugmentationLayer([T.Rotate(), T.TranslateX()])
        if points is not None:
            layer.calibrate(x, points=points)
        layer.load_state_dict(round_trip(source.state_dict()))
        assert torch.equal(layer.calibration, source.calibration) and layer.calibration.shape == (2, 9)
        assert torch.equal(layer.transform_magnitudes, source.transform_magnitudes)


# ----------------------------------------------------------------------- the guide's recipe


def _guide_checkpoint_block() -> str:
    from pathlib import Path

    text = (Path(__file__).parents[1] / "docs" / "guide" / "training.md").read_text()
    section = text[text.index("**Checkpoints.**") : text.index("**Fuzzing.**")]
    assert "```python\n" in section, "the guide's Checkpoints section has no recipe"
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_guides_checkpoint_recipe_resumes_a_shuffled_loader_bit_for_bit(tmp_path, monkeypatch):
    # The loader's order comes from torch's global RNG: the recipe saves and restores it. The block asserts
    # the bit-for-bit resumption; without restoring the global RNG the same block fails.
    monkeypatch.chdir(tmp_path)
    code = _guide_checkpoint_block()
    restore = 'torch.set_rng_state(saved["rng"])\n'
    assert restore in code
    exec(compile(code, "training.md", "exec"), {"__name__": "__docs__"})
    with pytest.raises(AssertionError):
        exec(compile(code.replace(restore, ""), "training.md", "exec"), {"__name__": "__docs__"})


def test_an_old_checkpoint_of_an_augnet_whose_augmentation_has_no_state_loads_strictly():
    class Flip(torch.nn.Module):  # a user's augmentation with no parameter or buffer
        def forward(self, x, copies=1, generator=None):
            return torch.cat([x.flip(-1)] * copies)

        def policy(self, size=None):
            return augnet.Policy([[]])

    trunk = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 8 * 8, 2))
    model = augnet.AugNet(trunk, Flip())
    old = {k: v for k, v in model.state_dict().items() if k != "_extra_state"}  # before the pass counter
    fresh = augnet.AugNet(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 8 * 8, 2)), Flip())
    fresh.load_state_dict(old)
    assert fresh.passes == 0 and torch.equal(fresh.trunk[1].weight, trunk[1].weight)


def _trained_layer(transforms):
    layer = augnet.AugmentationLayer(transforms, init_magnitude=[0.1, 0.2, 0.3, 0.4])
    with torch.no_grad():
        layer.weight_logits.copy_(torch.tensor([2.0, -1.0, 0.5, 0.0]))
    layer(torch.rand(2, 3, 9, 11, generator=gen(0)))
    return layer


def test_a_state_of_other_transforms_of_the_same_count_is_refused_and_changes_nothing():
    # The weights' shapes cannot tell [Rotate, TranslateX, ...] from [ShearX, ShearY, ...]: the state loaded and
    # gave Rotate's learned weight and magnitude to ShearX. A checksum of the transforms' names is saved now.
    state = _trained_layer([T.Rotate(), T.TranslateX(), T.Brightness(), T.HorizontalFlip()]).state_dict()
    other = augnet.AugmentationLayer([T.ShearX(), T.ShearY(), T.Contrast(), T.VerticalFlip()])
    before = _layer_state(other)
    with pytest.raises(ValueError, match=r"other transforms than this one's \(ShearX, ShearY, Contrast, VerticalFlip"):
        other.load_state_dict(state)
    assert _same_layer_state(_layer_state(other), before)
    reordered = augnet.AugmentationLayer([T.TranslateX(), T.Rotate(), T.Brightness(), T.HorizontalFlip()])
    with pytest.raises(ValueError, match="same transforms in the same order"):
        reordered.load_state_dict(state)
    model = augnet.AugNet(nn.Flatten(), other)
    with pytest.raises(ValueError, match="other transforms"):
        model.load_state_dict({f"augment.layers.0.{k}": v for k, v in state.items()}, strict=False)
    assert _same_layer_state(_layer_state(other), before)
    # Left out, the layer's extra state is its own: what the user asks for when the transforms differ on purpose.
    other.load_state_dict({k: v for k, v in state.items() if k != "_extra_state"}, strict=False)
    assert torch.equal(other.weight_logits, state["weight_logits"]) and other.last_size is None


def test_the_same_transforms_with_other_settings_and_states_saved_before_the_checksum_load():
    layer = _trained_layer([T.Rotate(), T.TranslateX(), T.Brightness(), T.HorizontalFlip()])
    state = layer.state_dict()
    assert state["_extra_state"][0] == -2  # [-2, temperature bits, checksum, *size]
    settings = augnet.AugmentationLayer([T.Rotate(max_angle=1.0), T.TranslateX(max_shift=0.1), T.Brightness(),
                                         T.HorizontalFlip()])  # fmt: skip
    settings.load_state_dict(state)
    assert torch.equal(settings.weights, layer.weights) and settings.last_size == (9, 11)
    old = dict(state, _extra_state=torch.cat([torch.tensor([-1]), state["_extra_state"][1:2], torch.tensor([9, 11])]))
    anything = augnet.AugmentationLayer([T.ShearX(), T.ShearY(), T.Contrast(), T.VerticalFlip()])
    anything.load_state_dict(old)  # no checksum in a state saved before it: taken as it comes, as it was
    assert anything.last_size == (9, 11) and torch.equal(anything.weights, layer.weights)
