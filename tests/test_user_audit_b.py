"""A user's audit of effects, magnitudes, calibration, the layer's saved state and per-instance summaries.

Each test names what was wrong before: silently wrong results (an effect of the wrong length broadcast over a
layer's transforms, a summary's JSON whose string fields were read letter by letter, a plot whose quantile bars
followed the order the levels were given in, complex features whose imaginary part was dropped), and raw errors
where a TypeError / ValueError naming the argument belongs.
"""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest
import torch

import augnet
from augnet import _layer_state
from augnet.effects import measure_effects, update_effect
from augnet.instance import ConditionedAugmentationLayer
from augnet.instance_policy import PolicySummary, plot_policy_summary, policy_summary
from augnet.magnitudes import invert_change, inward_clamp
from augnet.transforms import image as T


def _setup():
    torch.manual_seed(0)
    trunk = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 8 * 8, 4))
    layer = augnet.AugmentationLayer([T.Rotate(), T.TranslateX(), T.Brightness()])
    x = torch.rand(6, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    return trunk, layer, x


def _effects(layer):
    return layer.effect.clone(), layer.effect_measured.clone()


# ----------------------------------------------------------------------------------------------- augnet.effects


@pytest.mark.parametrize("effect", [torch.tensor([2.0]), torch.ones(3, 3), torch.ones(4)])
def test_update_effect_refuses_an_effect_that_is_not_one_per_transform(effect):
    """A (1,) effect was broadcast over the three transforms (each got the same effect, silently), a (3, 3) one
    failed in torch's copy_."""
    _, layer, _ = _setup()
    before = _effects(layer)
    with pytest.raises(ValueError, match=r"^update_effect: effect must have shape \(3,\), one value per transform"):
        update_effect(layer, effect, 0.5)
    assert torch.equal(layer.effect, before[0]) and torch.equal(layer.effect_measured, before[1])


def test_update_effect_refuses_an_effect_that_is_not_a_tensor():
    _, layer, _ = _setup()
    with pytest.raises(
        TypeError, match=r"^update_effect: effect must be a tensor of one value per transform, got list"
    ):
        update_effect(layer, [1.0, 2.0, 3.0], 0.5)  # an AttributeError ('list' has no 'device') before
    assert not bool(layer.effect_measured)


@pytest.mark.parametrize(
    "given, plain",
    [(torch.tensor(1), 1), (np.array(0.3), 0.3), (torch.tensor(0.3, dtype=torch.float64), 0.3), (np.float32(0.5), 0.5)],
)
def test_measure_effects_reads_a_momentum_of_zero_dimensions_as_the_number(given, plain):
    """A 0-d integer tensor or a 0-d array was refused as 'not a number' (an int or a 0-d float tensor was taken)."""
    trunk, layer, x = _setup()
    twin = copy.deepcopy(layer)
    for momentum in (0.5, given):  # the second measurement is the one the momentum weighs
        measure_effects(trunk, [layer], x, momentum=momentum if momentum is given else 0.5)
    for momentum in (0.5, plain):
        measure_effects(trunk, [twin], x, momentum=momentum)
    assert torch.equal(layer.effect, twin.effect)


def test_measure_effects_refuses_a_momentum_or_rows_on_meta_naming_it():
    trunk, layer, x = _setup()
    with pytest.raises(ValueError, match=r"^momentum is a tensor on meta"):
        measure_effects(trunk, [layer], x, momentum=torch.tensor(0.3, device="meta"))  # RuntimeError from .item()
    with pytest.raises(ValueError, match=r"^rows is a tensor on meta"):
        measure_effects(trunk, [layer], x, rows=torch.tensor(4, device="meta"))
    with pytest.raises(ValueError, match=r"^momentum is a tensor on meta"):
        update_effect(layer, torch.ones(3), torch.tensor(0.3, device="meta"))
    assert not bool(layer.effect_measured)


def test_measure_effects_reads_rows_given_as_a_zero_dimensional_array():
    """``rows=np.array(4)`` was refused (a 0-d integer tensor was taken); it is the int it holds."""
    trunk, layer, x = _setup()
    twin = copy.deepcopy(layer)
    measure_effects(trunk, [layer], x, rows=np.array(4))
    measure_effects(trunk, [twin], x, rows=4)
    assert bool(layer.effect_measured) and torch.equal(layer.effect, twin.effect)


def test_measure_effects_refuses_layers_that_are_not_a_list_of_layers_before_the_trunk_runs():
    """One layer not in a list raised 'not iterable' after the trunk ran; a module that is no augmentation layer in
    the list an AttributeError."""
    trunk, layer, x = _setup()
    calls = []
    trunk.register_forward_hook(lambda *args: calls.append(1))
    with pytest.raises(
        TypeError, match=r"^measure_effects: layers must be a list of .*AugmentationLayer: pass \[layer\]"
    ):
        measure_effects(trunk, layer, x)
    with pytest.raises(TypeError, match=r"^measure_effects: layers must hold augmentation layers, got Linear"):
        measure_effects(trunk, [layer, torch.nn.Linear(2, 2)], x)
    assert not calls and not bool(layer.effect_measured)
    measure_effects(trunk, torch.nn.ModuleList([layer]), x)  # any iterable of layers, as before
    assert bool(layer.effect_measured)


# -------------------------------------------------------------------------------------------- augnet.magnitudes


@pytest.mark.parametrize(
    "curves, change, error, match",
    [
        (torch.tensor([0.0, 0.5, 1.0]), torch.tensor([0.3]), ValueError, r"curves must have shape \(Q, K\)"),
        (torch.tensor([[0.5]]), torch.tensor([0.3]), ValueError, r"curves must .* K >= 2 magnitudes, got \(1, 1\)"),
        (torch.tensor([[0.0, 1.0]]), torch.tensor(0.3), ValueError, r"change must have shape \(1,\)"),
        (torch.tensor([[0.0, 1.0]]), torch.tensor([0.3, 0.4]), ValueError, r"change must have shape \(1,\)"),
        (torch.tensor([[0.0, 1.0]]), [0.3], TypeError, r"change must be a floating-point tensor, got list"),
        ([[0.0, 1.0]], torch.tensor([0.3]), TypeError, r"curves must be a floating-point tensor, got list"),
        (torch.tensor([[0, 1]]), torch.tensor([0.3]), TypeError, r"curves must be .* got a torch.int64 tensor"),
    ],
)
def test_invert_change_names_bad_curves_and_changes(curves, change, error, match):
    """IndexError, torch's RuntimeError (searchsorted, an index -1) or AttributeError before."""
    with pytest.raises(error, match=r"^invert_change: " + match):
        invert_change(curves, change)


def test_invert_change_of_a_column_does_not_warn_and_gives_the_same_values():
    """A change that is a column of a matrix made torch.searchsorted warn about a non-contiguous input."""
    curves = torch.tensor([[0.0, 0.25, 0.5, 1.0], [0.0, 0.1, 0.7, 0.9]], dtype=torch.float64)
    table = torch.tensor([[0.3, 0.0], [0.6, 0.2]], dtype=torch.float64)
    column = table[:, 0]
    assert not column.is_contiguous()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = invert_change(curves, column)
    assert torch.equal(got, invert_change(curves, column.contiguous()))


def test_inward_clamp_refuses_what_is_not_a_floating_point_tensor():
    with pytest.raises(TypeError, match=r"^inward_clamp: raw must be a floating-point tensor, got list"):
        inward_clamp([0.5])  # an AttributeError ('list' has no 'clamp') before
    with pytest.raises(TypeError, match=r"^inward_clamp: raw must be a floating-point tensor, got a torch.int64"):
        inward_clamp(torch.tensor([2]))


# ---------------------------------------------------------------------------------------------- calibration


def test_calibrate_refuses_complex_features_instead_of_dropping_their_imaginary_part():
    """Complex features were cast to real (the imaginary part dropped) and the curves measured on the rest."""
    _, layer, x = _setup()
    with pytest.raises(TypeError, match=r"^calibrate: features must return real values, got a torch.complex64"):
        layer.calibrate(x, points=3, features=lambda t: torch.complex(t, 2 * t))
    assert layer.calibration is None


def test_calibrate_says_features_are_empty_not_all_zero():
    """Empty features (mean square NaN) read as 'inputs (features) that are not all zero'."""
    _, layer, x = _setup()
    with pytest.raises(ValueError, match=r"^calibrate: features returned an empty tensor \(shape \(6, 0\)\)"):
        layer.calibrate(x, points=3, features=lambda t: t.flatten(1)[:, :0])
    assert layer.calibration is None


# --------------------------------------------------------------------------------------- a layer's saved state


def test_a_saved_state_of_bools_or_on_meta_is_refused_naming_it():
    """A bool state ``[True, True]`` loaded as the size (1, 1); a state on meta raised torch's RuntimeError."""
    _, layer, _ = _setup()
    with pytest.raises(TypeError, match=r"saved temperature and size must be 1-D ints"):
        _layer_state.decode(torch.tensor([True, True]), 1.0, layer.transforms)
    state = layer.get_extra_state()
    with pytest.raises(ValueError, match=r"saved temperature and size are on meta, which holds no values"):
        layer.set_extra_state(state.to("meta"))
    assert layer.temperature == 1.0 and layer.last_size is None
    assert _layer_state.decode(state, 2.0, layer.transforms) == (1.0, None)  # the valid state as before


# ------------------------------------------------------------------------------------- per-instance summaries


def _summary_json():
    layer = ConditionedAugmentationLayer([T.Rotate(), T.Brightness()], channels=3, init_magnitude=0.25)
    return policy_summary(layer, (torch.rand(4, 3, 8, 8), torch.tensor([0, 1, 0, 1]))).to_json()


@pytest.mark.parametrize(
    "field, value",
    [
        ("transforms", "RotateBrightness"),  # read as one transform per letter
        ("units", "deg"),
        ("units", ["deg"]),  # one unit for two transforms
        ("quantiles", "abc"),  # ('a', 'b', 'c')
        ("quantiles", [0.1, 2.0]),
        ("size", 8),  # TypeError: 'int' object is not iterable
        ("size", [8, 0]),
        ("one_sided", [1, 0]),
        ("range_end", ["up", "high"]),
    ],
)
def test_summary_from_json_refuses_fields_that_to_json_does_not_write(field, value):
    data = {**_summary_json(), field: value}
    with pytest.raises(ValueError, match=rf"^a summary's '{field}' must be "):
        PolicySummary.from_json(data)


def test_summary_from_json_still_reads_what_to_json_writes():
    data = _summary_json()
    back = PolicySummary.from_json(data)
    assert back.to_json() == data
    minimal = {k: data[k] for k in ("transforms", "units", "quantiles", "classes")}
    assert PolicySummary.from_json(minimal).range_end == []


def _plotted_bars(monkeypatch, tmp_path, quantiles, order):
    """The error bars' segments and titles of a hand-made summary plotted with its levels in ``order``."""
    import matplotlib

    matplotlib.use("Agg")
    import augnet.viz

    levels = [quantiles[i] for i in order]
    entry = {"count": 3, "weight_mean": [0.6, 0.4], "range_mean": [30.0, 0.2],
             "weight_quantiles": [[[0.5, 0.3], [0.6, 0.4], [0.7, 0.5]][i] for i in order],
             "range_quantiles": [[[20.0, 0.1], [30.0, 0.2], [40.0, 0.3]][i] for i in order]}  # fmt: skip
    summary = PolicySummary(["Rotate", "Brightness"], ["deg", "shift"], tuple(levels), {0: entry})
    seen = {}

    def keep(fig, path):
        seen["fig"] = fig
        return tmp_path / "unused.png"

    monkeypatch.setattr(augnet.viz, "save_figure", keep)
    plot_policy_summary(summary, tmp_path / "summary.png")
    axes = seen["fig"].axes
    bars = [[seg.tolist() for c in ax.collections for seg in c.get_segments()] for ax in axes]
    return bars, [ax.get_title() for ax in axes]


def test_plot_policy_summary_draws_the_outer_quantiles_whatever_the_levels_order(monkeypatch, tmp_path):
    """Levels given as (0.9, 0.5, 0.1) drew each bar from the 0.9 quantile to the 0.1 one: no bar below the mean
    (clipped at 0) and the title said '0.9-0.1 quantiles'."""
    pytest.importorskip("matplotlib")
    quantiles = (0.1, 0.5, 0.9)
    sorted_bars, sorted_titles = _plotted_bars(monkeypatch, tmp_path, quantiles, [0, 1, 2])
    reversed_bars, reversed_titles = _plotted_bars(monkeypatch, tmp_path, quantiles, [2, 1, 0])
    assert reversed_bars == sorted_bars and reversed_titles == sorted_titles
    assert "0.1-0.9 quantiles" in sorted_titles[0]


def test_policy_summary_of_a_numpy_pair_says_x_must_be_a_tensor():
    """A NumPy (x, y) pair read as a loader of two batches: 'loader must give (x, y) batches, got ndarray'."""
    layer = ConditionedAugmentationLayer([T.Rotate()], channels=3)
    x, y = np.random.default_rng(0).random((4, 3, 8, 8), dtype=np.float32), np.array([0, 1, 0, 1])
    with pytest.raises(TypeError, match=r"^batch 0: x must be a tensor of inputs, got ndarray$"):
        policy_summary(layer, (x, y))
    got = policy_summary(layer, (torch.as_tensor(x), y))  # the labels as an array, as before
    assert sorted(got.classes) == [0, 1]
