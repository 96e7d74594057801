"""Per-neuron invariance and tau by ablation (Zaidi et al.): augnet.probes.neurons."""

import math
from collections import OrderedDict

import pytest
import torch
from torch import nn

from augnet.probes.neurons import DEFAULT_TAUS, neuron_invariance, select_tau, unit_scale


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
    out = select_tau(model, "relu", x, y, max_drop=max_drop)
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
    assert select_tau(model, "relu", x * 40.0, y)["tau"] == pytest.approx(0.30)


def test_select_tau_picks_largest_passing_value_in_any_order():
    model = known_model()
    x, y = known_data()
    assert select_tau(model, "relu", x, y, taus=[0.3, 0.0, 0.5, 0.1])["tau"] == pytest.approx(0.3)
    with pytest.warns(RuntimeWarning, match="no tau"):
        out = select_tau(model, "relu", x, y, taus=[0.5, 0.95])
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
    select_tau(model, "relu", x, y, batch_size=17)
    assert all(len(m._forward_hooks) == 0 for m in model.modules())
    assert torch.equal(model(x), before)
    # Also after an error raised inside the hook (a layer with negative outputs: before its ReLU).
    net = nn.Sequential(nn.Linear(2, 5), nn.ReLU(), nn.Linear(5, 3)).eval()
    before = net(x)
    with pytest.raises(ValueError, match="negative"):
        select_tau(net, "0", x - 0.5, y)
    assert all(len(m._forward_hooks) == 0 for m in net.modules())
    assert torch.equal(net(x), before)


def test_select_tau_bad_inputs():
    model = known_model()
    x, y = known_data()
    with pytest.raises(ValueError, match="unknown layer"):
        select_tau(model, "nope", x, y)
    with pytest.raises(ValueError, match="same length"):
        select_tau(model, "relu", x, y[:5])
    with pytest.raises(ValueError, match="integer"):
        select_tau(model, "relu", x, y.float())
    with pytest.raises(ValueError, match="taus"):
        select_tau(model, "relu", x, y, taus=[])
    with pytest.raises(ValueError, match="tau"):
        select_tau(model, "relu", x, y, taus=[0.1, 1.2])
    with pytest.raises(ValueError, match="max_drop"):
        select_tau(model, "relu", x, y, max_drop=-0.1)
    with pytest.raises(ValueError, match="empty"):
        select_tau(model, "relu", x[:0], y[:0])
    with pytest.raises(ValueError, match="batch_size"):
        select_tau(model, "relu", x, y, batch_size=0)
    with pytest.raises(TypeError, match="layer"):
        select_tau(model, 0, x, y)
