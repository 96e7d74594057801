"""Leftovers of earlier audits: an unknown versus method, time_copies' per-module modes, the layer's
temperature set after construction, narrow ranges printed as none, and misshapen params replayed."""

from __future__ import annotations

import copy
import io
import pickle

import pytest
import torch
from torch import nn

import augnet
import augnet.experiments.copies as cp
from augnet.experiments import versus_methods as VM
from augnet.experiments import versus_tasks as VT
from augnet.transforms import audio as TA
from augnet.transforms import image as T
from augnet.transforms import signal as TS
from augnet.transforms.base import Range

# ---------------------------------------------------------------- (a) run_method with an unknown method


@pytest.mark.parametrize("method", ["baseline", "AugNet", 3])
def test_run_method_names_an_unknown_method(method):
    with pytest.raises(ValueError, match=r"unknown method .*choose from .*'augnet'"):
        VM.run_method(method, VT.TASKS["digits"], "full", None, 0)


def test_build_names_an_unknown_method():
    with pytest.raises(ValueError, match="unknown method 'baseline'"):
        VM.build("baseline", nn.Linear(2, 2), lambda: [T.Rotate()], 0.1, 8, 1)


# ---------------------------------------------------------------- (b) time_copies keeps each module's mode


def test_time_copies_gives_back_each_submodules_own_mode():
    trunk = nn.Sequential(nn.Conv1d(1, 2, 3), nn.BatchNorm1d(2), nn.Flatten(), nn.LazyLinear(2))
    model = augnet.AugNet(trunk, augnet.AugmentationLayer([TS.GaussianNoise()])).train()
    model(torch.randn(4, 1, 32))  # the lazy layer's size
    trunk[1].eval()  # a frozen batch norm
    before = {name: m.training for name, m in model.named_modules()}
    cp.time_copies(model, torch.randn(4, 1, 32), copies=(1, 2), min_run_time=0.001, rounds=1)
    assert {name: m.training for name, m in model.named_modules()} == before
    assert not trunk[1].training and model.training


# ---------------------------------------------------------------- (c) the temperature checked on assignment


def _layer(**kw):
    return augnet.AugmentationLayer([T.Rotate(), T.TranslateX()], **kw)


@pytest.mark.parametrize(
    ("value", "error", "text"),
    [
        (-1.0, ValueError, "temperature must be positive and finite, got -1.0"),
        (0, ValueError, "temperature must be positive and finite, got 0"),
        (float("nan"), ValueError, "temperature must be positive and finite, got nan"),
        (float("inf"), ValueError, "temperature must be positive and finite, got inf"),
        (1e-45, ValueError, "too small"),
        ("2", TypeError, "temperature must be a number, got str"),
        (None, TypeError, "temperature must be a number, got NoneType"),
    ],
)
def test_a_bad_temperature_is_refused_on_assignment_as_in_the_constructor(value, error, text):
    layer = _layer(temperature=0.5)
    with torch.no_grad():
        layer.weight_logits.copy_(torch.tensor([1.0, 0.0]))
    weights = layer.weights.detach().clone()
    with pytest.raises(error, match=text) as assigned:
        layer.temperature = value
    with pytest.raises(error) as built:
        _layer(temperature=value)
    assert str(assigned.value) == str(built.value)
    assert layer.temperature == 0.5 and torch.equal(layer.weights, weights)  # nothing changed


def test_a_valid_temperature_assigned_gives_the_constructors_results():
    torch.manual_seed(0)
    a, b = _layer(temperature=0.25), _layer()
    with torch.no_grad():
        a.weight_logits.copy_(torch.tensor([0.3, -0.2]))
        b.weight_logits.copy_(a.weight_logits)
    b.temperature = torch.tensor(0.25)  # a 0-d tensor: the number it holds, as the constructor reads it
    assert type(b.temperature) is float and b.temperature == 0.25
    assert torch.equal(a.weights, b.weights)
    x = torch.rand(2, 3, 8, 8)
    out_a = a(x, copies=2, generator=torch.Generator().manual_seed(1))
    out_b = b(x, copies=2, generator=torch.Generator().manual_seed(1))
    assert torch.equal(out_a, out_b)


def test_the_checked_temperature_survives_copies_saves_and_loads():
    layer = _layer(temperature=0.3)
    buffer = io.BytesIO()
    torch.save(layer, buffer)
    buffer.seek(0)
    copies = [copy.deepcopy(layer), pickle.loads(pickle.dumps(layer)), torch.load(buffer, weights_only=False)]
    loaded = _layer()
    loaded.load_state_dict(layer.state_dict())
    policy = augnet.AugmentationModule.from_policy(augnet.AugmentationModule(layer).policy().to_json()).layers[0]
    for other in [*copies, loaded, policy]:
        assert other.temperature == 0.3
        with pytest.raises(ValueError):
            other.temperature = -1.0


def test_a_layer_pickled_with_a_plain_temperature_attribute_loads():
    layer = _layer(temperature=0.7)
    state = layer.__getstate__()
    state = {**state, "temperature": state["_temperature"]}
    del state["_temperature"]  # as a layer pickled before the property
    old = augnet.AugmentationLayer.__new__(augnet.AugmentationLayer)
    old.__setstate__(state)
    assert old.temperature == 0.7 and torch.equal(old.weights, layer.weights)


# ---------------------------------------------------------------- (d) narrow ranges print as ranges


def test_a_narrow_range_prints_its_bounds_apart():
    text = str(T.Contrast().natural_range(0.0001))
    low, high = text.removeprefix("[").partition("]")[0].split(", ")
    assert low != high, text


@pytest.mark.parametrize(
    ("rng", "text"),
    [
        (Range(0.55, 1.45, "factor"), "[0.55, 1.45] factor"),
        (Range(-45.0, 45.0, "deg"), "±45 deg"),
        (Range(0.0, 0.123456, ""), "[0, 0.123]"),
        (Range(1.0, 1.0, "x"), "[1, 1] x"),
        (Range(0.1, 0.1000001, ""), "[0.1, 0.1000001]"),
    ],
)
def test_ranges_print_three_digits_unless_more_tell_them_apart(rng, text):
    assert str(rng) == text


# ---------------------------------------------------------------- (e) misshapen params named


def _misshapen(t, x, key, bad, copies=1):
    params = t.draw_params(x, 0.5, generator=torch.Generator().manual_seed(0), copies=copies)
    want = tuple(params[key].shape)
    params[key] = bad(params[key])
    return params, want


@pytest.mark.parametrize(
    ("t", "key"),
    [
        (T.Rotate(), "angle"),
        (T.ShearX(), "shear"),
        (T.Scale(), "zoom"),
        (T.TranslateX(), "shift"),
        (T.Equalize(), "gate"),  # its output had another rank: silently wrong
        (T.Solarize(), "threshold"),
        (T.Brightness(), "shift"),
    ],
)
@pytest.mark.parametrize("call", ["forward", "apply_transform"])
def test_image_params_of_another_shape_are_named(t, key, call):
    x = torch.rand(2, 3, 8, 8)
    params, want = _misshapen(t, x, key, lambda p: p.unsqueeze(-1), copies=2)
    name = type(t).__name__
    pattern = rf"{name}: params\['{key}'\] has shape .*but {name}\.sample gives shape {want}".replace("(", r"\(")
    with pytest.raises(ValueError, match=pattern.replace(")", r"\)")):
        t(x, 0.5, params=params, copies=2) if call == "forward" else t.apply_transform(x, params)


def test_brightness_given_three_dimensional_shifts_is_named():
    t, x = T.Brightness(), torch.rand(2, 3, 8, 8)
    params = {"shift": torch.zeros(2, 2, 3)}
    with pytest.raises(ValueError, match=r"Brightness: params\['shift'\] has shape \(2, 2, 3\).*\(2, 3\)"):
        t(x, 0.5, params=params)


@pytest.mark.parametrize(
    ("t", "key"), [(TS.GaussianNoise(), "noise"), (TA.Gain(), "gain_db"), (TS.TimeMask(), "length")]
)
def test_signal_params_of_another_shape_are_named(t, key):
    x = torch.rand(4, 2, 64)
    params, _ = _misshapen(t, x, key, lambda p: p.unsqueeze(1))
    with pytest.raises(ValueError, match=rf"{type(t).__name__}: params\['{key}'\] has shape"):
        t(x, 0.5, params=params)


def test_good_params_and_other_errors_are_as_before():
    t, x = T.Brightness(), torch.rand(2, 3, 8, 8)
    params, grey = t.draw_params(x, 0.5, generator=torch.Generator().manual_seed(0)), torch.rand(2, 1, 8, 8)
    state = torch.get_rng_state()
    assert torch.equal(t(x, 0.5, params=params), t.apply_transform(x, params))
    with pytest.raises(ValueError, match="channel"):  # the channel count's own message stands
        t(grey, 0.5, params=params)
    bad = {"shift": params["shift"][:, :, None]}
    with pytest.raises(ValueError, match=r"Brightness\.sample gives shape"):  # diagnosed with a generator of its own
        t(x, 0.5, params=bad)
    assert torch.equal(torch.get_rng_state(), state)
