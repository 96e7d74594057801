"""Per-neuron invariance and tau by ablation (Zaidi et al.): augnet.probes.neurons."""

import math
import subprocess
import sys
from collections import OrderedDict

import pytest
import torch
from torch import nn

from augnet.probes.features import features
from augnet.probes.neurons import (
    DEFAULT_TAUS,
    layer_units,
    layerwise_invariance,
    neuron_invariance,
    plot_neuron_invariance,
    select_tau,
    unit_scale,
)


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def sparse_acts(b=64, units=12, seed=0):
    """Non-negative, sparse activations and a perturbed copy (many exact zeros, as after a ReLU)."""
    g = gen(seed)
    a = torch.randn(b, units, generator=g).clamp_min(0) * torch.rand(units, generator=g) * 5
    a_t = (a + 0.7 * torch.randn(b, units, generator=g)).clamp_min(0)
    return a, a_t


# --------------------------------------------------------------------------- neuron_invariance


@pytest.mark.parametrize("tau", [0.0, 0.1, 0.5, 0.9])
def test_scores_lie_in_unit_interval(tau):
    a, a_t = sparse_acts()
    out = neuron_invariance(a, a_t, tau)
    inv, scores = out["invariance"], out["scores"]
    assert inv.shape == (12,) and scores.shape == (64, 12) and out["active"].shape == (64, 12)
    finite = inv[~inv.isnan()]
    assert finite.numel() > 0
    assert bool(((finite >= 0) & (finite <= 1)).all())
    s = scores[~scores.isnan()]
    assert bool(((s >= 0) & (s <= 1)).all())
    # Active pairs always have a defined score (one of the two activities is above tau >= 0).
    assert not bool(scores[out["active"]].isnan().any())
    # The perturbation is real: the layer is not perfectly invariant.
    assert float(finite.mean()) < 0.99


def test_hand_computed_values_and_threshold():
    # One unit, max activity 1; h = [1 - 0.5 / 1.5, 1].
    a = torch.tensor([[1.0], [0.5]])
    a_t = torch.tensor([[0.5], [0.5]])
    both = neuron_invariance(a, a_t, tau=0.4)
    assert both["invariance"].item() == pytest.approx((2 / 3 + 1) / 2)
    assert both["n_active"].tolist() == [2]
    only_first = neuron_invariance(a, a_t, tau=0.6)  # row 1 (0.5 and 0.5) is not active any more
    assert only_first["invariance"].item() == pytest.approx(2 / 3)
    assert only_first["active"][:, 0].tolist() == [True, False]
    # Normalisation by the maximum of clean and transformed together: a unit maxed out on T(x).
    a2, a2_t = torch.tensor([[0.2], [0.0]]), torch.tensor([[0.2], [2.0]])
    out = neuron_invariance(a2, a2_t, tau=0.5)
    assert out["scale"].tolist() == [2.0]
    assert out["active"][:, 0].tolist() == [False, True]  # 0.2 / 2 = 0.1 is below tau
    assert out["invariance"].item() == 0.0


def test_exactly_invariant_layer_scores_one():
    a, _ = sparse_acts()
    out = neuron_invariance(a, a.clone(), tau=0.2)
    inv = out["invariance"]
    assert bool((out["n_active"] > 0).all())
    assert torch.equal(inv, torch.ones_like(inv))
    s = out["scores"]
    assert torch.equal(s[~s.isnan()], torch.ones_like(s[~s.isnan()]))


@pytest.mark.parametrize("factor", [7.3, 1e-3, 250.0])
def test_rescaling_a_unit_changes_nothing(factor):
    a, a_t = sparse_acts(seed=1)
    ref = neuron_invariance(a, a_t, tau=0.3)
    k = 4
    scale = torch.ones(a.shape[1])
    scale[k] = factor
    out = neuron_invariance(a * scale, a_t * scale, tau=0.3)
    assert torch.equal(out["active"], ref["active"])
    torch.testing.assert_close(out["invariance"], ref["invariance"], equal_nan=True)
    torch.testing.assert_close(out["scores"], ref["scores"], equal_nan=True)
    assert out["scale"][k].item() == pytest.approx(factor * ref["scale"][k].item())


def test_dead_units_are_nan_and_left_out_of_summaries():
    a, a_t = sparse_acts(units=6)
    a[:, [1, 4]] = 0.0
    a_t[:, [1, 4]] = 0.0
    out = neuron_invariance(a, a_t, tau=0.1)
    inv = out["invariance"]
    assert inv.isnan().tolist() == [False, True, False, False, True, False]
    assert out["n_active"][[1, 4]].tolist() == [0, 0]
    stats = out["summary"]
    assert stats["n"] == 4 and stats["n_units"] == 6 and stats["n_never_active"] == 2
    live = inv[~inv.isnan()]
    assert stats["mean"] == pytest.approx(float(live.mean()))
    assert stats["median"] == pytest.approx(float(live.median()) if live.numel() % 2 else float(live.quantile(0.5)))
    assert not math.isnan(stats["p5"]) and not math.isnan(stats["p95"])
    # tau = 1: nothing exceeds the maximum, every unit is NaN and the summary is empty.
    empty = neuron_invariance(a, a_t, tau=1.0)
    assert bool(empty["invariance"].isnan().all()) and empty["summary"]["n"] == 0


def test_unit_active_only_on_transformed_inputs_scores_zero():
    a, a_t = sparse_acts(units=5)
    a[:, 2] = 0.0
    a_t[:, 2] = torch.rand(a.shape[0], generator=gen(3)) + 0.1
    out = neuron_invariance(a, a_t, tau=0.05)
    assert out["invariance"][2].item() == 0.0
    # ... and the same by symmetry for a unit active only on clean inputs.
    out = neuron_invariance(a_t, a, tau=0.05)
    assert out["invariance"][2].item() == 0.0


def test_rows_restrict_the_means_but_not_the_normalisation():
    a, a_t = sparse_acts(b=40, units=6, seed=2)
    rows = torch.arange(40) < 25
    full = neuron_invariance(a, a_t, tau=0.2)
    part = neuron_invariance(a, a_t, tau=0.2, rows=rows)
    assert torch.equal(part["scale"], full["scale"])
    assert not bool(part["active"][~rows].any())
    assert torch.equal(part["active"][rows], full["active"][rows])
    manual = (full["scores"] * full["active"])[rows].nansum(0) / full["active"][rows].sum(0)
    torch.testing.assert_close(part["invariance"], manual, equal_nan=True)


def test_units_per_input_and_unit_scale():
    a, a_t = sparse_acts(b=10, units=4)
    out = neuron_invariance(a, a_t, tau=0.3)
    assert out["units_per_input"].tolist() == out["active"].sum(1).tolist()
    assert torch.equal(unit_scale(a, a_t), out["scale"])
    assert torch.equal(unit_scale(a), a.double().amax(0))


def test_inputs_are_not_modified():
    a, a_t = sparse_acts()
    a0, at0 = a.clone(), a_t.clone()
    neuron_invariance(a, a_t, 0.2)
    assert torch.equal(a, a0) and torch.equal(a_t, at0)


def test_bad_inputs_raise():
    a, a_t = sparse_acts(b=8, units=3)
    with pytest.raises(ValueError, match="negative"):
        neuron_invariance(a - 1.0, a_t, 0.1)
    with pytest.raises(ValueError, match="negative"):
        neuron_invariance(a, a_t - 1.0, 0.1)
    with pytest.raises(ValueError, match="same shape"):
        neuron_invariance(a, a_t[:5], 0.1)
    with pytest.raises(ValueError, match=r"\(B, units\)"):
        neuron_invariance(a[:, 0], a_t[:, 0], 0.1)
    with pytest.raises(ValueError, match="empty"):
        neuron_invariance(a[:0], a_t[:0], 0.1)
    with pytest.raises(ValueError, match="tau"):
        neuron_invariance(a, a_t, 1.5)
    with pytest.raises(ValueError, match="tau"):
        neuron_invariance(a, a_t, -0.1)
    with pytest.raises(TypeError, match="tau"):
        neuron_invariance(a, a_t, True)
    with pytest.raises(TypeError, match="tensor"):
        neuron_invariance(a.tolist(), a_t, 0.1)
    nan = a.clone()
    nan[0, 0] = math.nan
    with pytest.raises(ValueError, match="non-finite"):
        neuron_invariance(nan, a_t, 0.1)
    with pytest.raises(ValueError, match="rows"):
        neuron_invariance(a, a_t, 0.1, rows=torch.ones(3, dtype=torch.bool))
    with pytest.raises(TypeError, match="rows"):
        neuron_invariance(a, a_t, 0.1, rows=torch.ones(8))


# --------------------------------------------------------------------------- select_tau


def known_model():
    """ReLU -> Linear with logits (h0, h1, 1e-3): class 2 (never a label) wins when both units are zeroed."""
    head = nn.Linear(2, 3)
    with torch.no_grad():
        head.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]))
        head.bias.copy_(torch.tensor([0.0, 0.0, 1e-3]))
    return nn.Sequential(OrderedDict(relu=nn.ReLU(), head=head)).eval()


def known_data():
    """100 samples; each class's unit peaks at 1. With sub-threshold activity zeroed, the accuracy is
    1 for tau < 0.12, 0.99 up to 0.33, 0.98 up to 0.9 and 0.02 from 0.9 on."""
    v0 = [1.0, 0.12] + [0.9] * 48
    v1 = [1.0, 0.33] + [0.9] * 48
    x = torch.zeros(100, 2)
    x[:50, 0] = torch.tensor(v0)
    x[50:, 1] = torch.tensor(v1)
    y = torch.tensor([0] * 50 + [1] * 50)
    return x, y


@pytest.mark.parametrize(("max_drop", "expected"), [(0.01, 0.30), (0.0, 0.10), (0.02, 0.85), (0.5, 0.85)])
def test_select_tau_known_answer(max_drop, expected):
    model = known_model()
    x, y = known_data()
    out = select_tau(model, "relu", x, y, max_drop=max_drop, x_t=x)
    assert out["tau"] == pytest.approx(expected)
    assert out["taus"] == list(DEFAULT_TAUS)
    assert out["accuracy"] == 1.0
    acc = dict(zip(out["taus"], out["accuracy_inactive_ablated"], strict=True))
    assert acc[0.1] == 1.0 and acc[0.15] == pytest.approx(0.99) and acc[0.5] == pytest.approx(0.98)
    assert acc[0.9] == pytest.approx(0.02)
    # Ablating the active activity instead leaves only the null class: accuracy 0 at tau = 0.
    assert out["accuracy_active_ablated"][0] == 0.0
    assert out["active_fraction"][0] == pytest.approx(0.5)


def test_select_tau_uses_normalised_activity():
    model = known_model()
    x, y = known_data()
    assert select_tau(model, "relu", x * 40.0, y, x_t=x * 40.0)["tau"] == pytest.approx(0.30)


def test_select_tau_picks_largest_passing_value_in_any_order():
    model = known_model()
    x, y = known_data()
    assert select_tau(model, "relu", x, y, taus=[0.3, 0.0, 0.5, 0.1], x_t=x)["tau"] == pytest.approx(0.3)
    with pytest.warns(RuntimeWarning, match="no tau"):
        out = select_tau(model, "relu", x, y, taus=[0.5, 0.95], x_t=x)
    assert out["tau"] is None


def test_select_tau_with_transform_normalises_over_both():
    # T doubles the inputs: the units now peak at 2, so the clean activities count half as much.
    model = known_model()
    x, y = known_data()
    out = select_tau(model, "relu", x, y, transform=lambda b, m, generator=None: 2 * b)
    assert out["tau"] == pytest.approx(0.15)
    assert out["accuracy"] == 1.0


def test_select_tau_leaves_no_hook_and_same_outputs():
    model = known_model()
    x, y = known_data()
    before = model(x)
    select_tau(model, "relu", x, y, batch_size=17, x_t=x)
    assert all(len(m._forward_hooks) == 0 for m in model.modules())
    assert torch.equal(model(x), before)
    # Also after an error raised inside the hook (a layer with negative outputs: before its ReLU).
    net = nn.Sequential(nn.Linear(2, 5), nn.ReLU(), nn.Linear(5, 3)).eval()
    before = net(x)
    with pytest.raises(ValueError, match="negative"):
        select_tau(net, "0", x - 0.5, y, x_t=x - 0.5)
    assert all(len(m._forward_hooks) == 0 for m in net.modules())
    assert torch.equal(net(x), before)


def test_select_tau_bad_inputs():
    model = known_model()
    x, y = known_data()
    with pytest.raises(ValueError, match="unknown layer"):
        select_tau(model, "nope", x, y, x_t=x)
    with pytest.raises(ValueError, match="same length"):
        select_tau(model, "relu", x, y[:5], x_t=x)
    with pytest.raises(TypeError, match="integer"):
        select_tau(model, "relu", x, y.bool(), x_t=x)
    with pytest.raises(ValueError, match="taus"):
        select_tau(model, "relu", x, y, x_t=x, taus=[])
    with pytest.raises(ValueError, match="tau"):
        select_tau(model, "relu", x, y, x_t=x, taus=[0.1, 1.2])
    with pytest.raises(ValueError, match="max_drop"):
        select_tau(model, "relu", x, y, x_t=x, max_drop=-0.1)
    with pytest.raises(ValueError, match="empty"):
        select_tau(model, "relu", x[:0], y[:0], x_t=x[:0])
    with pytest.raises(ValueError, match="batch_size"):
        select_tau(model, "relu", x, y, x_t=x, batch_size=0)
    with pytest.raises(TypeError, match="layer"):
        select_tau(model, 0, x, y, x_t=x)
    with pytest.raises(ValueError, match="units must be one of"):
        select_tau(model, "relu", x, y, x_t=x, units="pixel")
    with pytest.raises(ValueError, match="score must be one of"):
        select_tau(model, "relu", x, y, x_t=x, score="clean")
    with pytest.raises(ValueError, match="only applies to score='within'"):
        select_tau(model, "relu", x, y, x_t=x, seen_classes=[0])
    with pytest.raises(ValueError, match="no input of the seen classes"):
        select_tau(model, "relu", x, y, x_t=x, score="within", seen_classes=[7])
    with pytest.raises(ValueError, match="inputs' shape"):
        select_tau(model, "relu", x, y, x_t=x[:5])
    with pytest.raises(ValueError, match="one of the two"):
        select_tau(model, "relu", x, y, x_t=x, transform=lambda b, m, generator=None: b)


# --------------------------------------------------------------------------- the paper's normalisation


def test_select_tau_refuses_clean_inputs_alone():
    # The paper normalises each unit over clean AND transformed inputs; a tau chosen on clean inputs alone
    # (the old default) is on another scale than the one neuron_invariance applies it to.
    model = known_model()
    x, y = known_data()
    with pytest.raises(ValueError, match="needs the transformed inputs"):
        select_tau(model, "relu", x, y)
    # Transformed inputs given directly normalise exactly as the transform that makes them.
    double = select_tau(model, "relu", x, y, x_t=2 * x)
    assert double["tau"] == pytest.approx(0.15) and double["active_fraction"] == pytest.approx(
        select_tau(model, "relu", x, y, transform=lambda b, m, generator=None: 2 * b)["active_fraction"]
    )


def test_select_tau_transform_is_drawn_from_seed_plus_one():
    model = known_model()
    x, y = known_data()
    seen = []

    def spy(b, m, generator=None):
        seen.append(torch.randint(0, 2**62, (1,), generator=generator).item())
        return b

    select_tau(model, "relu", x, y, taus=[0.0], transform=spy, seed=5)
    assert seen == [torch.randint(0, 2**62, (1,), generator=torch.Generator().manual_seed(6)).item()]


def test_select_tau_scored_within_category_on_transformed_images():
    # Fig. 7: the ablations scored by the accuracy on the transformed images of the seen classes. T doubles
    # the inputs: over every input tau is 0.15 (the clean activities count half); on the transformed
    # images alone the normalised activities are those of known_data, so tau is 0.30 as without T.
    model = known_model()
    x, y = known_data()
    double = lambda b, m, generator=None: 2 * b  # noqa: E731
    everything = select_tau(model, "relu", x, y, transform=double)
    assert everything["tau"] == pytest.approx(0.15) and everything["n_scored"] == 200
    within = select_tau(model, "relu", x, y, transform=double, score="within")
    assert within["tau"] == pytest.approx(0.30) and within["n_scored"] == 100 and within["score"] == "within"
    # Class 0 alone: its weakest sample (0.12) is lost from tau = 0.15 on, a 2 % drop among its 50 images.
    seen0 = select_tau(model, "relu", x, y, transform=double, score="within", seen_classes=[0])
    assert seen0["tau"] == pytest.approx(0.10) and seen0["n_scored"] == 50
    acc = dict(zip(seen0["taus"], seen0["accuracy_inactive_ablated"], strict=True))
    assert acc[0.1] == 1.0 and acc[0.15] == pytest.approx(0.98) and acc[0.9] == pytest.approx(0.02)
    assert seen0["accuracy_active_ablated"][0] == 0.0
    seen1 = select_tau(model, "relu", x, y, transform=double, score="within", seen_classes=torch.tensor([1]))
    assert seen1["tau"] == pytest.approx(0.30)
    # The active fraction is over every input, whatever is scored.
    assert within["active_fraction"] == everything["active_fraction"]


def test_select_tau_refuses_non_finite_activity():
    class NanAt(nn.Module):
        def forward(self, x):
            out = x.relu().clone()
            out[3, 0] = math.nan
            return out

    model = nn.Sequential(OrderedDict(relu=NanAt(), head=known_model().head)).eval()
    x, y = known_data()
    with pytest.raises(ValueError, match="non-finite"):
        select_tau(model, "relu", x, y, x_t=x)
    assert all(len(m._forward_hooks) == 0 for m in model.modules())


def test_nan_activity_names_its_inputs():
    a, a_t = sparse_acts(b=8, units=3)
    a[5, 1] = math.nan
    with pytest.raises(ValueError, match=r"non-finite values \(NaN or inf\) in input\(s\) \[5\]"):
        neuron_invariance(a, a_t, 0.1)


# --------------------------------------------------------------------------- units: one reading for every probe


def conv_net():
    torch.manual_seed(0)
    return nn.Sequential(
        OrderedDict(
            conv=nn.Conv2d(3, 16, 3, padding=1),
            relu=nn.ReLU(),
            pool=nn.AdaptiveAvgPool2d(1),
            flat=nn.Flatten(),
            head=nn.Linear(16, 4),
        )
    ).eval()


def hflip(b, m, generator=None):
    return torch.flip(b, dims=[-1])


@pytest.mark.parametrize("units", ["element", "channel"])
def test_select_tau_and_neuron_invariance_read_the_same_units(units):
    # Before, select_tau thresholded every element (active fraction 0.23 at tau 0.3 here) while
    # neuron_invariance was given mean-pooled channels (0.83): a tau did not carry from one to the other.
    net = conv_net()
    x = torch.rand(64, 3, 8, 8, generator=gen(1))
    y = net(x).argmax(1)
    taus = [0.0, 0.1, 0.3, 0.5]
    chosen = select_tau(net, "relu", x, y, taus=taus, transform=hflip, units=units)
    a = features(net, x, "relu")["relu"]
    a_t = features(net, hflip(x, 1.0), "relu")["relu"]
    for tau, fraction in zip(taus, chosen["active_fraction"], strict=True):
        out = neuron_invariance(a, a_t, tau, units=units)
        assert out["active_fraction"] == pytest.approx(fraction, abs=1e-12)
        assert out["units"] == units
    # The same as handing neuron_invariance the layer read by layer_units (e.g. features(reduce="mean")).
    pooled = neuron_invariance(layer_units(a, units), layer_units(a_t, units), 0.3)
    direct = neuron_invariance(a, a_t, 0.3, units=units)
    torch.testing.assert_close(direct["invariance"], pooled["invariance"], equal_nan=True)
    assert direct["invariance"].shape == ((16 * 8 * 8,) if units == "element" else (16,))
    if units == "channel":
        reduced = features(net, x, "relu", reduce="mean")["relu"]
        torch.testing.assert_close(layer_units(a, "channel"), reduced)


def test_the_two_readings_of_a_unit_differ_and_channel_ablation_zeroes_whole_maps():
    net = conv_net()
    x = torch.rand(64, 3, 8, 8, generator=gen(1))
    y = net(x).argmax(1)
    element = select_tau(net, "relu", x, y, taus=[0.3], transform=hflip)
    channel = select_tau(net, "relu", x, y, taus=[0.3], transform=hflip, units="channel")
    assert element["units"] == "element" and channel["units"] == "channel"
    assert element["active_fraction"][0] < 0.5 < channel["active_fraction"][0]
    # Known answer for channels: a channel map whose mean is at or below tau is zeroed as a whole.
    maps = torch.zeros(2, 2, 2, 2)
    maps[0, 0] = torch.tensor([[4.0, 0.0], [0.0, 0.0]])  # mean 1: the channel's maximum
    maps[1, 0] = torch.tensor([[2.0, 0.0], [0.0, 0.0]])  # mean 0.5: kept, with its zeros
    maps[0, 1] = torch.tensor([[1.0, 1.0], [1.0, 1.0]])  # mean 1
    maps[1, 1] = torch.tensor([[0.2, 0.9, 0.2, 0.2]]).reshape(2, 2)  # mean 0.375
    expected = maps.clone()
    expected[1, 1] = 0.0  # 0.375 is at or below tau = 0.4, although one element (0.9) is far above it
    assert torch.equal(ablated_output(maps, 0.4, "channel"), expected)
    # Per element the same tau keeps 4, 2, the 1s and 0.9 (0.9 / 1 > 0.4) and zeroes the rest.
    per_element = maps * ((maps / maps.amax(0)) > 0.4)
    assert torch.equal(ablated_output(maps, 0.4, "element"), per_element)


class MeanHead(nn.Module):
    def forward(self, z):
        return z.flatten(2).mean(2)


def ablated_output(maps, tau, units):
    """The ReLU's output in select_tau's inactive-ablation pass on the clean rows.

    select_tau runs the clean inputs, then the transformed ones: forward passes 0 and 1 are unablated,
    pass 2 is the clean rows of the first ablated pass.
    """
    model = nn.Sequential(OrderedDict(relu=nn.ReLU(), spy=nn.Identity(), head=MeanHead())).eval()
    outputs = []
    model.spy.register_forward_hook(lambda m, i, o: outputs.append(o.clone()))
    select_tau(model, "relu", maps, torch.tensor([0, 1]), taus=[tau], x_t=maps, units=units, batch_size=2 * len(maps))
    return outputs[2]


# --------------------------------------------------------------------------- layer-wise invariance (Fig. 10)


def pooled_model():
    """ReLU on the image, then a global max: the max is exactly invariant to a flip; the ReLU map is not."""
    torch.manual_seed(0)
    return nn.Sequential(
        OrderedDict(relu=nn.ReLU(), pool=nn.AdaptiveMaxPool2d(1), flat=nn.Flatten(), fc=nn.Linear(3, 3))
    ).eval()


def test_layerwise_invariance_an_exactly_invariant_layer_scores_one():
    model = pooled_model()
    x = torch.randn(40, 3, 6, 6, generator=gen(2))
    out = layerwise_invariance(model, x, ["relu", "pool", "flat"], tau=0.2, transform=hflip)
    assert out["layers"] == ["relu", "pool", "flat"] and out["units"] == "element"
    assert out["mean"]["all"]["pool"] == 1.0 and out["mean"]["all"]["flat"] == 1.0
    assert out["median"]["all"]["pool"] == 1.0
    assert out["mean"]["all"]["relu"] < 0.9  # each position sees another pixel after the flip
    # The same numbers as neuron_invariance on the layer's activity.
    a = features(model, x, "relu")["relu"]
    ref = neuron_invariance(a, hflip(a, 1.0), 0.2)
    torch.testing.assert_close(out["groups"]["all"]["relu"]["invariance"], ref["invariance"], equal_nan=True)
    # Per channel, the mean over positions of a flipped map is the same: invariant up to rounding.
    channel = layerwise_invariance(model, x, "relu", tau=0.2, transform=hflip, units="channel")
    assert channel["mean"]["all"]["relu"] == pytest.approx(1.0, abs=1e-6)


def test_layerwise_invariance_seen_and_unseen_groups_and_per_layer_tau():
    model = pooled_model()
    x = torch.randn(40, 3, 6, 6, generator=gen(3))
    y = torch.arange(40) % 4
    out = layerwise_invariance(
        model, x, ["relu", "pool"], tau={"relu": 0.1, "pool": 0.4}, x_t=hflip(x, 1.0), y=y, seen_classes=[0, 1]
    )
    assert sorted(out["groups"]) == ["all", "seen", "unseen"] and out["tau"] == {"relu": 0.1, "pool": 0.4}
    a = features(model, x, "relu")["relu"]
    seen = y < 2
    for group, rows in (("seen", seen), ("unseen", ~seen)):
        ref = neuron_invariance(a, hflip(a, 1.0), 0.1, rows=rows)
        torch.testing.assert_close(out["groups"][group]["relu"]["invariance"], ref["invariance"], equal_nan=True)
        assert out["mean"][group]["pool"] == 1.0
    assert out["groups"]["seen"]["relu"]["n_active"].sum() < out["groups"]["all"]["relu"]["n_active"].sum()


def test_layerwise_invariance_bad_inputs():
    model = pooled_model()
    x = torch.randn(8, 3, 6, 6, generator=gen(4))
    with pytest.raises(ValueError, match="needs the transformed inputs"):
        layerwise_invariance(model, x, ["relu"], tau=0.1)
    with pytest.raises(ValueError, match="no entry for layer"):
        layerwise_invariance(model, x, ["relu", "pool"], tau={"relu": 0.1}, x_t=x)
    with pytest.raises(ValueError, match="needs the labels"):
        layerwise_invariance(model, x, ["relu"], tau=0.1, x_t=x, seen_classes=[0])
    with pytest.raises(ValueError, match=r"layer 'fc'.*negative"):
        layerwise_invariance(model, x, ["relu", "fc"], tau=0.1, x_t=-x)
    with pytest.raises(ValueError, match="unknown layer"):
        layerwise_invariance(model, x, ["nope"], tau=0.1, x_t=x)
    with pytest.raises(ValueError, match="repeat"):
        layerwise_invariance(model, x, ["relu", "relu"], tau=0.1, x_t=x)
    with pytest.raises(ValueError, match="tau"):
        layerwise_invariance(model, x, ["relu"], tau=1.5, x_t=x)


# --------------------------------------------------------------------------- plots (Figs. 3-4)


def test_plot_neuron_invariance_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    model = pooled_model()
    x = torch.randn(30, 3, 6, 6, generator=gen(5))
    y = torch.arange(30) % 3
    result = layerwise_invariance(model, x, ["relu", "pool"], tau=0.2, transform=hflip, y=y, seen_classes=[0])
    path = plot_neuron_invariance(result, tmp_path / "fig" / "layers.png", title="Fig. 10")
    assert path == tmp_path / "fig" / "layers.png" and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    a, a_t = sparse_acts()
    conditions = {"x": neuron_invariance(a, a_t, 0.2), "x + T(x)": neuron_invariance(a, a, 0.2)}
    for quantity in ("invariance", "n_active", "units_per_input"):
        assert plot_neuron_invariance(conditions, tmp_path / f"{quantity}.png", quantity=quantity).stat().st_size > 1000
    assert plot_neuron_invariance(result, tmp_path / "seen.png", group="seen").exists()
    with pytest.raises(ValueError, match="quantity"):
        plot_neuron_invariance(conditions, tmp_path / "x.png", quantity="scale")
    with pytest.raises(ValueError, match="group must be one of"):
        plot_neuron_invariance(result, tmp_path / "x.png", group="other")
    with pytest.raises(ValueError, match="nothing to plot"):
        plot_neuron_invariance({"dead": torch.tensor([math.nan])}, tmp_path / "x.png")


def test_matplotlib_is_imported_only_to_plot():
    code = "import sys, augnet.probes.neurons; assert 'matplotlib' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


# --------------------------------------------------------------------------- batches (issue 26)


def test_layerwise_invariance_in_batches_equals_neuron_invariance_on_every_input():
    model = pooled_model()
    x = torch.randn(37, 3, 6, 6, generator=gen(6))
    y = torch.arange(37) % 3
    whole_a = features(model, x, "relu")["relu"]
    ref = neuron_invariance(whole_a, hflip(whole_a, 1.0), 0.2)
    for batch_size in (5, 37):
        out = layerwise_invariance(
            model, x, ["relu", "pool"], tau=0.2, transform=hflip, batch_size=batch_size, per_input=True
        )
        got = out["groups"]["all"]["relu"]
        torch.testing.assert_close(got["invariance"], ref["invariance"], equal_nan=True)
        assert torch.equal(got["n_active"], ref["n_active"]) and torch.equal(got["active"], ref["active"])
        assert torch.equal(got["units_per_input"], ref["units_per_input"])
        torch.testing.assert_close(got["scores"], ref["scores"], equal_nan=True)
        assert got["active_fraction"] == pytest.approx(ref["active_fraction"])
    lean = layerwise_invariance(model, x, "relu", tau=0.2, transform=hflip, batch_size=5, y=y, seen_classes=[1])
    assert "scores" not in lean["groups"]["all"]["relu"] and "active" not in lean["groups"]["all"]["relu"]
    seen = neuron_invariance(whole_a, hflip(whole_a, 1.0), 0.2, rows=y == 1)
    torch.testing.assert_close(lean["groups"]["seen"]["relu"]["invariance"], seen["invariance"], equal_nan=True)


def test_neuron_invariance_in_chunks_and_without_per_input_tensors():
    # 70 x 20,000 units: chunks of 52 rows; the per-unit results do not depend on the chunking.
    a = torch.rand(70, 20_000, generator=gen(7)) ** 4
    a_t = a.roll(1, dims=1)
    full = neuron_invariance(a, a_t, 0.3)
    lean = neuron_invariance(a, a_t, 0.3, per_input=False)
    assert "scores" not in lean and "active" not in lean
    torch.testing.assert_close(lean["invariance"], full["invariance"], equal_nan=True)
    # Against eq. 1 computed directly on the whole matrices.
    scale = torch.maximum(a.amax(0), a_t.amax(0)).double()
    f, f_t = a.double() / scale, a_t.double() / scale
    h = 1 - (f_t - f).abs() / (f + f_t)
    active = (f > 0.3) | (f_t > 0.3)
    expected = torch.where(active, h, 0).sum(0) / active.sum(0)
    torch.testing.assert_close(full["invariance"], torch.where(active.any(0), expected, torch.nan), equal_nan=True)
    with pytest.raises(ValueError, match=r"input\(s\) \[65\]"):
        bad = a.clone()
        bad[65, 3] = math.nan
        neuron_invariance(bad, a_t, 0.3)
