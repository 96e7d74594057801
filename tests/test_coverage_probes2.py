"""Branches of the per-unit invariance probes, the probes' shared pieces and their figures that the other tests
leave unrun (augnet/probes/unit_invariance.py, neurons.py, _common.py, plots.py): each test checks what the branch
should do, as a user's call reaches it (an exact value or property, an error naming its argument)."""

import re

import numpy as np
import pytest
import torch
from helpers import gen
from torch import nn

from augnet.probes import invariance_curve, layerwise_invariance, neuron_invariance, ranking_probe_model, select_tau
from augnet.probes._common import Transformed, check_model_input, derangement, seeded
from augnet.probes.plots import (
    plot_neuron_invariance,
    plot_report_heatmap,
    plot_report_units,
    plot_similarity_change_distributions,
)
from augnet.probes.unit_invariance import UnitInvariance, layer_units, unit_scale
from augnet.transforms import image as T


def _relu_net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU()).eval()


def _activity(seed, *shape):
    return torch.rand(*shape, generator=gen(seed)) * (torch.rand(*shape, generator=gen(seed + 100)) > 0.4)


def _same_result(got, ref, exact=True):
    """Every output of neuron_invariance alike; float sums (taken in another order) to 1e-12 unless ``exact``."""
    close = {} if exact else {"rtol": 1e-12, "atol": 1e-12}
    assert got.keys() == ref.keys()
    for k in ref:
        if isinstance(ref[k], torch.Tensor):
            assert got[k].dtype == ref[k].dtype, k
            torch.testing.assert_close(got[k], ref[k], equal_nan=True, **(close or {"rtol": 0, "atol": 0}))
        elif k == "summary" or isinstance(ref[k], float):
            g = got[k] if k == "summary" else {k: got[k]}
            r = ref[k] if k == "summary" else {k: ref[k]}
            assert g.keys() == r.keys()
            torch.testing.assert_close(
                torch.tensor(list(g.values()), dtype=torch.float64),
                torch.tensor(list(r.values()), dtype=torch.float64),
                equal_nan=True,
                **(close or {"rtol": 0, "atol": 0}),
            )
        else:
            assert got[k] == ref[k], k


# --------------------------------------------------------------------------- unit_invariance: layer_units


def test_layer_units_refuses_what_is_no_layer_output():
    with pytest.raises(TypeError, match=r"^a must be a tensor, got ndarray$"):
        layer_units(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"^a must have shape \(B, units\) or \(B, C, \.\.\.\), got \(3,\)$"):
        layer_units(torch.ones(3), units="channel")
    with pytest.raises(TypeError, match=r"^a must hold real numbers, got dtype torch.bool$"):
        layer_units(torch.ones(1, 2, 2, 2, dtype=torch.bool), "channel")


def test_layer_units_reads_integer_activity_per_channel_in_float64():
    """torch's mean() refuses integers: layer_units(int tensor, "channel") raised a RuntimeError."""
    a = torch.arange(8).reshape(1, 2, 2, 2)
    got = layer_units(a, units="channel")
    assert got.dtype == torch.float64 and got.tolist() == [[1.5, 5.5]]
    assert torch.equal(layer_units(a), a.flatten(1))  # elements keep their dtype
    assert torch.equal(layer_units(torch.arange(6).reshape(2, 3), "channel"), torch.arange(6).reshape(2, 3))


# --------------------------------------------------------------------------- unit_invariance: neuron_invariance


def test_neuron_invariance_refuses_bool_and_complex_activity():
    a = torch.ones(3, 2)
    with pytest.raises(TypeError, match=r"^a must hold real numbers, got dtype torch.bool$"):
        neuron_invariance(a.bool(), a, tau=0.1)
    with pytest.raises(TypeError, match=r"^a_t must hold real numbers, got dtype torch.complex64$"):
        neuron_invariance(a, a.to(torch.complex64), tau=0.1)


@pytest.mark.parametrize("shape, units", [((3, 0), "element"), ((3, 2, 0), "channel"), ((3, 0, 4, 4), "channel")])
def test_neuron_invariance_refuses_a_layer_without_units(shape, units):
    """min() of no value raised torch's RuntimeError; a channel of no position has no mean."""
    a = torch.zeros(shape)
    with pytest.raises(ValueError, match=rf"^a has no unit: .* {re.escape(f'(shape {tuple(shape)})')}$"):
        neuron_invariance(a, a, tau=0.1, units=units)
    with pytest.raises(ValueError, match=r"^a has no unit"):
        unit_scale(a, units=units)


def test_tau_as_a_0d_tensor_or_array_is_the_number_it_holds():
    """tau=torch.linspace(0, 1, 11)[2] was refused ("tau must be a real number, got Tensor")."""
    a, a_t = _activity(0, 12, 5), _activity(1, 12, 5)
    ref = neuron_invariance(a, a_t, tau=0.2)
    _same_result(neuron_invariance(a, a_t, tau=torch.tensor(0.2, dtype=torch.float64)), ref)
    f32 = float(torch.tensor(0.2))  # a float32 tensor holds 0.2000000029...
    _same_result(neuron_invariance(a, a_t, tau=torch.tensor(0.2)), neuron_invariance(a, a_t, f32))
    _same_result(neuron_invariance(a, a_t, tau=np.array(0.2)), ref)
    with pytest.raises(TypeError, match=r"^tau must be a real number, got Tensor$"):
        neuron_invariance(a, a_t, tau=torch.tensor([0.2, 0.3]))
    with pytest.raises(TypeError, match=r"^tau must be a real number, got bool$"):
        neuron_invariance(a, a_t, tau=torch.tensor(True))
    with pytest.raises(ValueError, match=r"^tau must lie in \[0, 1\] .*got 1.5$"):
        neuron_invariance(a, a_t, tau=torch.tensor(1.5))
    net, x = _relu_net(), torch.randn(6, 4, generator=gen(2))
    by_float = layerwise_invariance(net, x, ["1", "3"], {"1": 0.1, "3": 0.3}, x_t=-x)
    taus = {"1": torch.tensor(0.1, dtype=torch.float64), "3": np.float64(0.3)}
    by_tensor = layerwise_invariance(net, x, ["1", "3"], taus, x_t=-x)
    assert by_tensor["mean"] == by_float["mean"] and by_tensor["tau"] == {"1": 0.1, "3": 0.3}


def test_neuron_invariance_rows_as_a_numpy_bool_mask():
    """A NumPy mask (np.isin(labels, seen)) was refused as 'not a bool tensor'; other masks still are."""
    a, a_t = _activity(3, 10, 4), _activity(4, 10, 4)
    mask = np.arange(10) % 3 == 0
    ref = neuron_invariance(a, a_t, 0.1, rows=torch.from_numpy(mask))
    _same_result(neuron_invariance(a, a_t, 0.1, rows=mask), ref)
    assert not np.shares_memory(mask, ref["active"].numpy()) and mask.tolist() == (np.arange(10) % 3 == 0).tolist()
    with pytest.raises(TypeError, match=r"^rows must be a bool tensor, got ndarray int64$"):
        neuron_invariance(a, a_t, 0.1, rows=np.arange(10))
    with pytest.raises(TypeError, match=r"^rows must be a bool tensor, got list"):
        neuron_invariance(a, a_t, 0.1, rows=mask.tolist())
    with pytest.raises(ValueError, match=r"^rows must have shape \(10,\), got \(9,\)$"):
        neuron_invariance(a, a_t, 0.1, rows=mask[:9])


def test_per_input_must_be_a_flag():
    """per_input="no" was truthy: the (B, units) tensors it asks to leave out were kept."""
    a = _activity(5, 4, 3)
    with pytest.raises(TypeError, match=r"^per_input must be True or False, got 'no'$"):
        neuron_invariance(a, a, 0.1, per_input="no")
    with pytest.raises(TypeError, match=r"^per_input must be True or False, got 0$"):
        UnitInvariance(0.1, n_rows=4, per_input=0)
    net, x = _relu_net(), torch.randn(4, 4, generator=gen(6))
    calls = []

    def transform(b, m, generator=None):
        calls.append(1)
        return b

    with pytest.raises(TypeError, match=r"^per_input must be True or False, got 'no'$"):
        layerwise_invariance(net, x, "1", 0.1, transform=transform, per_input="no")
    assert not calls  # refused before the transform ran
    assert "scores" not in layerwise_invariance(net, x, "1", 0.1, x_t=x, per_input=False)["groups"]["all"]["1"]


# --------------------------------------------------------------------------- unit_invariance: unit_scale


def test_unit_scale_pairs_units_by_shape():
    a, a_t = torch.tensor([[1.0, 0.0], [3.0, 0.0]]), torch.tensor([[2.0, 5.0]])
    assert unit_scale(a, a_t).tolist() == [3.0, 5.0]  # another number of rows is fine
    with pytest.raises(ValueError, match=r"^a and a_t must have the same units, got shapes \(2, 2\) and \(2, 3\)$"):
        unit_scale(a, torch.ones(2, 3))
    # (B, 4) and (B, 2, 2) have four elements each, but not the same units: they were paired silently.
    with pytest.raises(ValueError, match=r"^a and a_t must have the same units, got shapes \(2, 4\) and \(2, 2, 2\)$"):
        unit_scale(torch.ones(2, 4), torch.ones(2, 2, 2))
    with pytest.raises(TypeError, match=r"^a_t must be a tensor, got list$"):
        unit_scale(a, [[1.0, 2.0]])


# --------------------------------------------------------------------------- unit_invariance: UnitInvariance


def test_unit_invariance_without_n_rows_in_any_batch_order_is_neuron_invariance():
    a, a_t = _activity(7, 9, 2, 3), _activity(8, 9, 2, 3)
    acc = UnitInvariance(0.2, "channel")
    for lo, hi in ((5, 9), (0, 2), (2, 5)):
        acc.observe(a[lo:hi], a_t[lo:hi], lo)
    for lo, hi in ((2, 5), (5, 9), (0, 2)):
        acc.score(lo, a[lo:hi], a_t[lo:hi])
    _same_result(acc.result(), neuron_invariance(a, a_t, 0.2, units="channel", per_input=False), exact=False)


def test_unit_invariance_order_of_passes():
    with pytest.raises(ValueError, match=r"^per_input needs n_rows, the number of inputs$"):
        UnitInvariance(0.1, per_input=True)
    acc = UnitInvariance(0.1, n_rows=2)
    with pytest.raises(RuntimeError, match=r"^observe every batch \(pass 1\) before scoring any$"):
        acc.score(0, torch.ones(2, 3), torch.ones(2, 3))
    acc.observe(torch.ones(2, 3), torch.ones(2, 3))
    with pytest.raises(RuntimeError, match=r"^no batch was scored$"):
        acc.result()
    with pytest.raises(ValueError, match=r"^a batch has 4 units, an earlier one 3$"):
        acc.observe(torch.ones(2, 4), torch.ones(2, 4))


def test_unit_invariance_refuses_unpaired_batches():
    """A longer a_t's extra rows went unobserved (its maximum lost), a shorter one was read as far as it went."""
    acc = UnitInvariance(0.1)
    with pytest.raises(ValueError, match=r"^a and a_t must have the same shape, got \(2, 2\) and \(3, 2\)$"):
        acc.observe(torch.ones(2, 2), torch.cat([torch.ones(2, 2), torch.full((1, 2), 5.0)]))
    with pytest.raises(ValueError, match=r"^a and a_t must have the same shape, got \(3, 2\) and \(2, 2\)$"):
        acc.observe(torch.ones(3, 2), torch.ones(2, 2))
    with pytest.raises(ValueError, match=r"^a and a_t must have the same shape, got \(2, 4\) and \(2, 2, 2\)$"):
        acc.observe(torch.ones(2, 4), torch.ones(2, 2, 2))
    with pytest.raises(TypeError, match=r"^a must be a tensor, got list$"):  # was AttributeError
        acc.observe([[1.0]], [[1.0]])
    with pytest.raises(ValueError, match=r"^a is an empty batch \(shape \(0, 2\)\)$"):  # was IndexError
        acc.observe(torch.ones(0, 2), torch.ones(0, 2))
    assert acc.scale is None  # nothing observed


def test_unit_invariance_score_refuses_a_mask_or_units_it_would_broadcast():
    """A (1,) mask was broadcast over the batch, and a batch of one unit over every observed unit, silently."""
    a = torch.tensor([[1.0, 0.5, 0.0], [0.2, 1.0, 0.7]])
    acc = UnitInvariance(0.1, n_rows=2)
    acc.observe(a, a)
    with pytest.raises(ValueError, match=r"^rows must have shape \(2,\), got \(1,\)$"):
        acc.score(0, a, a, rows=torch.tensor([False]))
    with pytest.raises(TypeError, match=r"^rows must be a bool tensor, got Tensor torch.int64$"):
        acc.score(0, a, a, rows=torch.tensor([1, 0]))
    with pytest.raises(ValueError, match=r"^a batch has 1 units, the observed ones 3$"):
        acc.score(0, a[:, :1], a[:, :1])
    with pytest.raises(ValueError, match=r"^a and a_t must have the same shape, got \(2, 3\) and \(1, 3\)$"):
        acc.score(0, a, a[:1])
    assert acc._sums is None  # nothing scored
    acc.score(0, a, a, rows=torch.tensor([False, True]))
    out = acc.result()
    assert out["n_active"].tolist() == [1, 1, 1] and out["invariance"].tolist() == [1.0, 1.0, 1.0]


# --------------------------------------------------------------------------- neurons: layerwise_invariance


def test_layerwise_invariance_argument_errors():
    net, x = _relu_net(), torch.randn(6, 4, generator=gen(9))
    with pytest.raises(TypeError, match=r"^model must be an nn.Module, got function$"):
        layerwise_invariance(lambda b: b, x, "1", 0.1, x_t=x)
    with pytest.raises(ValueError, match=r"^layers must name one or more modules, got \[\]$"):
        layerwise_invariance(net, x, [], 0.1, x_t=x)
    with pytest.raises(ValueError, match=r"^layers must name one or more modules, got \[1\]$"):
        layerwise_invariance(net, x, [1], 0.1, x_t=x)
    with pytest.raises(TypeError, match=r"^x must be a tensor, got ndarray$"):
        layerwise_invariance(net, x.numpy(), "1", 0.1, x_t=x)
    with pytest.raises(ValueError, match=r"^x must be a non-empty batch, got shape \(\)$"):
        layerwise_invariance(net, torch.tensor(1.0), "1", 0.1, x_t=x)
    with pytest.raises(ValueError, match=r"^x must be a non-empty batch, got shape \(0, 4\)$"):
        layerwise_invariance(net, x[:0], "1", 0.1, x_t=x[:0])


def test_layerwise_invariance_checks_labels_given_without_seen_classes():
    """y alone is checked (one label per input) and changes nothing: only the 'all' group."""
    net, x = _relu_net(), torch.randn(6, 4, generator=gen(10))
    x_t = torch.randn(6, 4, generator=gen(11))
    ref = layerwise_invariance(net, x, ["1", "3"], 0.2, x_t=x_t)
    got = layerwise_invariance(net, x, ["1", "3"], 0.2, x_t=x_t, y=np.array([0, 1, 0, 1, 2, 2]))
    assert list(got["groups"]) == ["all"] and got["mean"] == ref["mean"] and got["median"] == ref["median"]
    with pytest.raises(ValueError, match=r"^x and y must have the same length, got 6 and 2$"):
        layerwise_invariance(net, x, "1", 0.2, x_t=x_t, y=[0, 1])


# --------------------------------------------------------------------------- _common


def test_derangement_checks_n():
    with pytest.raises(ValueError, match=r"^a derangement needs at least 2 elements, got 1$"):
        derangement(1)
    # torch.randperm's error named no argument; "5" failed comparing a str with 2; True was taken for 1.
    for bad in (5.0, "5", True, torch.tensor([5])):
        with pytest.raises(TypeError, match=rf"^n must be an int \(the number of elements\), got {type(bad).__name__}"):
            derangement(bad)
    ref = derangement(7, gen(3))
    for n in (np.int64(7), torch.tensor(7)):
        got = derangement(n, gen(3))
        assert torch.equal(got, ref)
    assert sorted(ref.tolist()) == list(range(7)) and bool((ref != torch.arange(7)).all())


def test_seeded_none_is_no_generator():
    assert seeded(None) is None
    assert torch.equal(torch.rand(3, generator=seeded(4)), torch.rand(3, generator=gen(4)))


def test_labelled_probe_checks_its_inputs_first():
    """select_tau reads x beside y through check_labels: a list, a 0-d tensor."""
    net, y = _relu_net(), torch.tensor([0, 1, 0, 1])
    with pytest.raises(TypeError, match=r"^x must be a tensor, got list$"):
        select_tau(net, "1", [[0.0] * 4] * 4, y, x_t=torch.zeros(4, 4))
    with pytest.raises(ValueError, match=r"^x must be a batch, one row per label, got a 0-d tensor$"):
        select_tau(net, "1", torch.tensor(1.0), [0], x_t=torch.zeros(4, 4))


def test_invariance_curve_refuses_a_0d_input_and_a_transform_that_is_no_callable():
    net = nn.Sequential(nn.Flatten(), nn.Linear(3 * 4 * 4, 3))
    with pytest.raises(ValueError, match=r"^x must be a batch of images \(B, \.\.\.\), got a 0-d tensor"):
        invariance_curve(net, torch.tensor(1.0), T.Rotate(), [0.5])
    with pytest.raises(TypeError, match=r"^transform must be an augnet transform or a callable, got int$"):
        invariance_curve(net, torch.rand(4, 3, 4, 4), 5, [0.5])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a second device")
def test_check_model_input_refuses_inputs_on_another_device():
    with pytest.raises(ValueError, match=r"^x is on cuda:0 but the model is on cpu$"):
        check_model_input(nn.Linear(2, 2), torch.ones(3, 2, device="cuda"))


def test_transformed_checks_its_arguments():
    x = torch.rand(3, 3, 4, 4, generator=gen(12))
    with pytest.raises(TypeError, match=r"^transform must be callable, got str$"):
        Transformed("Rotate", x, 0.5)
    with pytest.raises(TypeError, match=r"^x must be a tensor, got ndarray$"):
        Transformed(T.Rotate(), x.numpy(), 0.5)


def test_transformed_replays_the_params_of_a_transform_that_mixes_samples():
    x, t = torch.rand(5, 3, 4, 4, generator=gen(13)), T.SamplePairing()
    params = t.draw_params(x, 1.0, gen(14))
    moved = Transformed(t, x, 1.0, params=params)
    ref = t(x, 1.0, params=params)
    assert moved.params is None and torch.equal(moved.whole(), ref) and torch.equal(moved.rows(1, 4), ref[1:4])


def test_ranking_probe_model_with_a_sampler_on_a_transform_that_mixes_samples():
    """The sampled blends replace SamplePairing's own: its output is the blend of each row with its partner."""
    x = torch.rand(12, 3, 4, 4, generator=gen(15))
    net = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten())
    out = ranking_probe_model(net, x, T.SamplePairing(max_blend=1.0), param="blend", sampler=(0.0, 0.5), seed=2)
    assert out["m_a"].shape == (12,) and bool(((out["m_a"] >= 0) & (out["m_a"] <= 0.5)).all())
    assert not torch.equal(out["m_a"], out["m_b"])


def test_a_callable_that_does_not_return_one_row_per_input_is_named():
    net, x = nn.Sequential(nn.Flatten(), nn.Linear(3 * 4 * 4, 3)), torch.rand(4, 3, 4, 4, generator=gen(16))
    with pytest.raises(ValueError, match=r"^the transform must return 4 transformed inputs, got \(1, 3, 4, 4\)$"):
        invariance_curve(net, x, lambda b, m, generator=None: b[:1], [0.5])
    with pytest.raises(ValueError, match=r"^the transform must return 4 transformed inputs, got ndarray$"):
        invariance_curve(net, x, lambda b, m, generator=None: b.numpy(), [0.5])
    # A 0-d output raised IndexError (tuple index out of range) from its shape[0].
    with pytest.raises(ValueError, match=r"^the transform must return 4 transformed inputs, got \(\)$"):
        invariance_curve(net, x, lambda b, m, generator=None: b.sum(), [0.5])


# --------------------------------------------------------------------------- plots


def _open_figures():
    import matplotlib.pyplot as plt

    return list(plt.get_fignums())


def test_plot_neuron_invariance_argument_errors(tmp_path):
    path = tmp_path / "n.png"
    with pytest.raises(ValueError, match=r"non-empty dict \{label: neuron_invariance output or values\}, got list$"):
        plot_neuron_invariance([1.0, 2.0], path)
    with pytest.raises(ValueError, match=r"non-empty dict .*, got an empty dict$"):
        plot_neuron_invariance({}, path)
    with pytest.raises(ValueError, match=r"^'a' has no 'n_active': pass neuron_invariance outputs$"):
        plot_neuron_invariance({"a": {"invariance": torch.rand(3)}}, path, quantity="n_active")
    net, x = _relu_net(), torch.randn(6, 4, generator=gen(17))
    out = layerwise_invariance(net, x, ["1", "3"], 0.1, x_t=-x)
    # A list was looked up in the dict of groups: TypeError "unhashable type: 'list'".
    with pytest.raises(ValueError, match=r"^group must be one of \['all'\], got \['all'\]$"):
        plot_neuron_invariance(out, path, group=["all"])
    assert not path.exists()


def test_plot_neuron_invariance_draws_one_violin_per_layer(figures, tmp_path):
    net, x = _relu_net(), torch.randn(6, 4, generator=gen(18))
    out = layerwise_invariance(net, x, ["1", "3"], 0.1, x_t=-x)
    plot_neuron_invariance(out, tmp_path / "n.png", quantity="units_per_input")
    (ax,) = figures[0].axes
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "3"] and ax.get_ylabel() == "units per input"


def test_plot_similarity_change_distributions_argument_errors(tmp_path):
    with pytest.raises(ValueError, match=r"from similarity_change_distributions, got tuple$"):
        plot_similarity_change_distributions((1.0,), tmp_path / "s.png")
    with pytest.raises(ValueError, match=r"from similarity_change_distributions, got an empty dict$"):
        plot_similarity_change_distributions({}, tmp_path / "s.png")


def _panel(invariant="0"):
    return (torch.tensor([[0.1, 0.4], [float("nan"), 0.9]]), "paper", invariant)


def test_plot_report_heatmap_refuses_bad_panels_before_making_a_figure(tmp_path):
    """A panel of the wrong shape (or not a triple) raised after the figure was made, leaving it open in pyplot."""
    path, before = tmp_path / "h.png", _open_figures()
    with pytest.raises(ValueError, match=r"^panels must be a non-empty .* dict, got an empty dict$"):
        plot_report_heatmap({}, ["a", "b"], ["s", "t"], path)
    with pytest.raises(ValueError, match=r"^panel 'q': values must be \(layers, transforms\) = \(2, 2\), got \(1, 2"):
        plot_report_heatmap({"p": _panel(), "q": (torch.zeros(1, 2), "paper", "1")}, ["a", "b"], ["s", "t"], path)
    with pytest.raises(ValueError, match=r"^panel 'p' must be \(values, paper, invariant value\), got \("):
        plot_report_heatmap({"p": _panel()[:2]}, ["a", "b"], ["s", "t"], path)
    with pytest.raises(TypeError, match=r"^panel 'p' must hold real numbers, got 'abc'$"):
        plot_report_heatmap({"p": ("abc", "paper", "0")}, ["a", "b"], ["s", "t"], path)
    with pytest.raises(ValueError, match=r"^cmap must be a matplotlib colour map or its name, got 'nope'"):
        plot_report_heatmap({"p": _panel()}, ["a", "b"], ["s", "t"], path, cmap="nope")
    assert _open_figures() == before and not path.exists()


def test_plot_report_heatmap_reverses_any_colour_map(figures, tmp_path):
    """cmap="viridis_r" became "viridis_r_r" for a measure invariant at 0, and a Colormap object its repr + "_r"."""
    import matplotlib.pyplot as plt

    panels = {"zero": _panel("0"), "one": _panel("1")}
    for cmap in ("viridis_r", plt.get_cmap("magma")):
        plot_report_heatmap(panels, ["a", "b"], ["s", "t"], tmp_path / "h.png", cmap=cmap)
    got = [ax.images[0].get_cmap() for fig in figures for ax in fig.axes if ax.images]
    levels = np.linspace(0, 1, 9)
    for drawn, name in zip(got, ["viridis", "viridis_r", "magma_r", "magma"], strict=True):
        assert np.array_equal(drawn(levels), plt.get_cmap(name)(levels)), name  # bright: closer to invariant
    assert all(fig._suptitle is None for fig in figures)  # no title given: none drawn


def test_plot_report_units_argument_errors(tmp_path):
    path, before = tmp_path / "u.png", _open_figures()
    with pytest.raises(ValueError, match=r"^panels must be a non-empty .* dict, got an empty dict$"):
        plot_report_units({}, path, "v")
    # A list of values raised AttributeError ('list' object has no attribute 'values'), a figure left open.
    with pytest.raises(TypeError, match=r"^panel 'p' must be a dict \{layer: values\}, got list$"):
        plot_report_units({"p": [1.0, 2.0]}, path, "v")
    with pytest.raises(TypeError, match=r"^panel 'p', layer 'l' must hold real numbers, got 'abc'$"):
        plot_report_units({"p": {"k": [1.0], "l": "abc"}}, path, "v")
    with pytest.raises(TypeError, match=r"^panel 'p', layer 'l' must hold real numbers, got dtype torch.complex64$"):
        plot_report_units({"p": {"l": torch.ones(2, dtype=torch.complex64)}}, path, "v")
    with pytest.raises(ValueError, match=r"^panel 'p', layer 'l' is a tensor on meta, which holds no values$"):
        plot_report_units({"p": {"l": torch.ones(2, device="meta")}}, path, "v")
    assert _open_figures() == before and not path.exists()


def test_plot_report_units_marks_medians_and_infinite_values(figures, tmp_path):
    inf, nan = float("inf"), float("nan")
    panels = {
        "p": {"a": [1.0, 3.0, inf, nan], "b": [nan, nan], "c": np.array([2.0, 4.0, 6.0])},
        "q": {"a": [0.5]},
        "r": {"a": torch.tensor([0.25, 0.75])},
        "s": {},
    }
    plot_report_units(panels, tmp_path / "u.png", "measure")
    (fig,) = figures
    axes = fig.axes
    assert len(axes) == 6 and [ax.axison for ax in axes] == [True] * 4 + [False] * 2
    assert fig._suptitle is None
    first = axes[0]
    medians = [tuple(line.get_ydata()) for line in first.lines]
    assert medians == [(1.0, 1.0), (4.0, 4.0)]  # torch's lower median of [1, 3]; "b" (all NaN) has none
    assert [tuple(line.get_xdata()) for line in first.lines] == [(-0.3, 0.3), (1.7, 2.3)]
    triangles = [c.get_offsets().tolist() for c in first.collections if len(c.get_offsets()) and c.get_sizes()[0] == 20]
    assert triangles == [[[0.0, 6.0]]]  # the inf of layer "a", at the panel's largest finite value
    assert [t.get_text() for t in first.get_xticklabels()] == ["a", "b", "c"]
