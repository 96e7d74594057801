"""The invariance measures of activations (augnet.probes.measures): hand-computed values, exactly invariant and
exactly same-equivariant models, and bad arguments."""

import math
from itertools import combinations

import numpy as np
import pytest
import torch
from torch import nn

from augnet.probes.measures import (
    act,
    anova_invariance,
    channel_mean,
    distance_invariance,
    f_sf,
    goodfellow_invariance,
    normalized_variance,
    p_adjust,
    same_equivariance,
)

ACTIONS = ["identity", "hflip", "vflip", "rot90", "rot180", "rot270", "transpose"]


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def images(n=12, size=8, seed=0):
    return torch.rand(n, 3, size, size, generator=gen(seed), dtype=torch.float64)


def pooled_model(seed=0):
    """A 1x1 convolution, tanh, global average pooling: exactly invariant to every permutation of the pixels."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(3, 5, 1), nn.Tanh(), nn.AdaptiveAvgPool2d(1), nn.Flatten()).double().eval()


def flat_model(seed=0):
    """A linear map of the flattened pixels and a ReLU: reads where things are, so not invariant."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 64, 6), nn.ReLU()).double().eval()


def activations(model, x, actions=ACTIONS):
    with torch.no_grad():
        return torch.stack([model(act(x, a)) for a in actions])  # (T, N, U)


# --------------------------------------------------------------------------- normalised variance


@pytest.mark.parametrize("ddof", [0, 1])
def test_normalized_variance_against_numpy(ddof):
    a = torch.randn(4, 9, 3, generator=gen(), dtype=torch.float64)
    out = normalized_variance(a, ddof=ddof)
    x = a.numpy()
    tv = x.var(0, ddof=ddof).mean(0)
    sv = x.var(1, ddof=ddof).mean(0)
    np.testing.assert_allclose(out["transformation_variance"].numpy(), tv, rtol=1e-12)
    np.testing.assert_allclose(out["sample_variance"].numpy(), sv, rtol=1e-12)
    np.testing.assert_allclose(out["normalized_variance"].numpy(), tv / sv, rtol=1e-12)
    assert all(v.shape == (3,) and v.dtype == torch.float64 for v in out.values())


def test_normalized_variance_of_standard_deviations_against_numpy():
    a = torch.randn(5, 8, 3, generator=gen(9), dtype=torch.float64)
    out = normalized_variance(a, spread="std")
    x = a.numpy()
    expected = x.std(0, ddof=1).mean(0) / x.std(1, ddof=1).mean(0)
    np.testing.assert_allclose(out["normalized_variance"].numpy(), expected, rtol=1e-12)


def test_normalized_variance_hand_example_and_zero_divisions():
    # unit 0: samples 0 and 2 under two transformations that add 0 and 1; unit 1 constant; unit 2 moves only
    # with the transformation.
    a = torch.tensor([[[0.0, 5.0, 1.0], [2.0, 5.0, 1.0]], [[1.0, 5.0, 2.0], [3.0, 5.0, 2.0]]])
    out = normalized_variance(a)
    # transformation variance of unit 0: each sample (0, 1) or (2, 3): var 0.5; sample variance: (0, 2): var 2.
    assert out["transformation_variance"][0] == 0.5 and out["sample_variance"][0] == 2.0
    assert out["normalized_variance"][0] == 0.25
    assert math.isnan(out["normalized_variance"][1])
    assert math.isinf(out["normalized_variance"][2])


def test_normalized_variance_is_scale_free_and_leaves_input():
    a = torch.randn(3, 6, 4, generator=gen(1))
    before = a.clone()
    one = normalized_variance(a)["normalized_variance"]
    two = normalized_variance(a * 7.5 + 2)["normalized_variance"]
    torch.testing.assert_close(one, two)
    assert torch.equal(a, before)


# --------------------------------------------------------------------------- ANOVA


def test_f_sf_against_scipy():
    stats = pytest.importorskip("scipy.stats")
    f = torch.tensor([0.0, 0.05, 0.3, 1.0, 2.5, 7.0, 40.0, 1e4])
    # (1, 39998): two views of 20,000 inputs, the report's random mode at scale.
    for dfn, dfd in [(1, 1), (1, 10), (3, 40), (8, 8), (20, 400), (5, 2), (1, 39998), (8, 160000)]:
        np.testing.assert_allclose(f_sf(f, dfn, dfd).numpy(), stats.f.sf(f.numpy(), dfn, dfd), rtol=1e-9, atol=1e-10)


def test_anova_against_hand_formula_and_scipy():
    a = torch.randn(5, 7, 4, generator=gen(2), dtype=torch.float64)
    a[2, :, 1] += 1.5  # one transformation moves unit 1
    out = anova_invariance(a, alpha=0.05, correction="none")
    x = a.numpy()
    for u in range(4):
        groups = [x[t, :, u] for t in range(5)]
        grand = np.concatenate(groups).mean()
        ssb = sum(len(g) * (g.mean() - grand) ** 2 for g in groups) / 4
        ssw = sum(((g - g.mean()) ** 2).sum() for g in groups) / (5 * 6)
        assert out["f"][u].item() == pytest.approx(ssb / ssw, rel=1e-12)
    assert out["dfn"] == 4 and out["dfd"] == 30
    stats = pytest.importorskip("scipy.stats")
    for u in range(4):
        ref = stats.f_oneway(*[x[t, :, u] for t in range(5)])
        assert out["f"][u].item() == pytest.approx(ref.statistic, rel=1e-10)
        assert out["p_value"][u].item() == pytest.approx(ref.pvalue, rel=1e-8, abs=1e-15)
    assert bool(out["invariant"][u]) == (out["p_value"][u].item() > 0.05)


def test_p_adjust_hand_examples():
    p = torch.tensor([0.01, 0.04, 0.03, 0.5, float("nan")])
    bonf = p_adjust(p, "bonferroni")
    torch.testing.assert_close(bonf[:4], torch.tensor([0.04, 0.16, 0.12, 1.0], dtype=torch.float64))
    # Benjamini-Hochberg, m = 4: sorted 0.01, 0.03, 0.04, 0.5 -> 0.04, 0.06, 0.0533, 0.5 -> running min from the top.
    bh = p_adjust(p, "bh")
    torch.testing.assert_close(bh[:4], torch.tensor([0.04, 0.16 / 3, 0.16 / 3, 0.5], dtype=torch.float64))
    assert math.isnan(bh[4]) and math.isnan(bonf[4])
    torch.testing.assert_close(p_adjust(p, "none"), p.double(), equal_nan=True)


def test_anova_correction_counts_fewer_significant_units():
    a = torch.randn(3, 30, 40, generator=gen(3), dtype=torch.float64)
    a[1, :, :4] += 0.45  # a weak effect on four units
    frac = {c: anova_invariance(a, 0.05, c)["invariant_fraction"].item() for c in ("none", "bh", "bonferroni")}
    assert frac["none"] <= frac["bh"] <= frac["bonferroni"]
    assert frac["none"] < 1


# --------------------------------------------------------------------------- Goodfellow et al.


def test_goodfellow_hand_example():
    clean = torch.tensor([[0.0], [1.0], [2.0], [3.0], [4.0]])
    # rate 0.4 -> k = 2: the threshold is the 3rd largest (2.0); inputs 3 and 4 fire, G = 0.4.
    moved = torch.tensor([[[0.0], [1.0], [2.0], [3.0], [1.0]], [[0.0], [9.0], [2.0], [2.5], [5.0]]])
    out = goodfellow_invariance(clean, moved, rate=0.4)
    assert out["threshold"].item() == 2.0 and out["global_rate"].item() == pytest.approx(0.4)
    # the 4 transformed versions of the firing inputs: 3.0, 1.0, 2.5, 5.0 -> 3 fire.
    assert out["local_rate"].item() == pytest.approx(0.75)
    assert out["invariance"].item() == pytest.approx(0.75 / 0.4)


def test_goodfellow_dead_unit_is_nan():
    clean = torch.zeros(6, 2)
    clean[:, 1] = torch.arange(6.0)
    out = goodfellow_invariance(clean, clean[None], rate=0.2)
    assert math.isnan(out["invariance"][0]) and out["global_rate"][0] == 0
    assert out["invariance"][1].item() == pytest.approx(1 / out["global_rate"][1].item())


# --------------------------------------------------------------------------- distance


def test_distance_against_brute_force():
    a = torch.randn(4, 6, 3, generator=gen(4), dtype=torch.float64)
    out = distance_invariance(a)
    x = a.numpy()
    td = np.mean([np.mean([abs(x[t, n] - x[s, n]) for t, s in combinations(range(4), 2)], 0) for n in range(6)], 0)
    sd = np.mean([np.mean([abs(x[t, n] - x[t, m]) for n, m in combinations(range(6), 2)], 0) for t in range(4)], 0)
    np.testing.assert_allclose(out["transformation_distance"].numpy(), td, rtol=1e-12)
    np.testing.assert_allclose(out["sample_distance"].numpy(), sd, rtol=1e-12)
    np.testing.assert_allclose(out["normalized_distance"].numpy(), td / sd, rtol=1e-12)
    assert out["layer"].item() == pytest.approx(td.sum() / sd.sum(), rel=1e-12)


# --------------------------------------------------------------------------- models with known answers


def test_invariant_model_scores_invariant_under_every_measure():
    x = images(16)
    a = activations(pooled_model(), x)
    assert float(a.std(1).min()) > 0  # the units do vary across samples
    nv = normalized_variance(a)["normalized_variance"]
    assert float(nv.max()) < 1e-20
    anova = anova_invariance(a)
    assert anova["invariant_fraction"].item() == 1.0 and float(anova["p_value"].min()) > 0.999
    good = goodfellow_invariance(a[0], a[1:], rate=0.25)
    torch.testing.assert_close(good["local_rate"], torch.ones(5, dtype=torch.float64))
    torch.testing.assert_close(good["invariance"], 1 / good["global_rate"])
    dist = distance_invariance(a)
    assert float(dist["normalized_distance"].max()) < 1e-10 and dist["layer"].item() < 1e-10


def test_position_reading_model_is_not_invariant():
    # Images brighter on the right: a flip or a turn changes what a position-reading unit sees on average too,
    # which is what ANOVA tests.
    x = images(40) + torch.linspace(0, 1, 8, dtype=torch.float64)
    a = activations(flat_model(), x)
    keep = a.std((0, 1)) > 0
    a = a[..., keep]
    assert float(normalized_variance(a)["normalized_variance"].min()) > 0.05
    assert anova_invariance(a)["invariant_fraction"].item() < 1
    good = goodfellow_invariance(a[0], a[1:], rate=0.25)
    assert bool((good["invariance"] < 1 / good["global_rate"]).any())
    assert distance_invariance(a)["layer"].item() > 0.1


def symmetric_conv(symmetry, seed=0, padding=1):
    """A 3x3 convolution whose kernels are symmetric under ``symmetry`` (a flip, or all quarter turns)."""
    torch.manual_seed(seed)
    conv = nn.Conv2d(3, 4, 3, padding=padding).double()
    with torch.no_grad():
        w = conv.weight
        if symmetry == "hflip":
            w.copy_((w + w.flip(-1)) / 2)
        elif symmetry == "rot90":
            w.copy_(sum(torch.rot90(w, k, (-2, -1)) for k in range(4)) / 4)
    return conv.eval()


@pytest.mark.parametrize(("symmetry", "actions"), [("hflip", ["hflip"]), ("rot90", ["rot90", "rot180", "rot270"])])
def test_symmetric_kernels_are_same_equivariant_but_not_invariant(symmetry, actions):
    x = images(10)
    conv = symmetric_conv(symmetry)
    with torch.no_grad():
        z = conv(x)
        moved = [conv(act(x, g)) for g in actions]
    out = same_equivariance(z, moved, actions)
    assert float(out["normalized"].max()) < 1e-20 and out["relative"].item() < 1e-12
    # Not invariant: every (channel, position) as a unit moves under the action.
    a = torch.stack([z, *moved]).flatten(2)
    nv = channel_mean(normalized_variance(a)["normalized_variance"], z.shape[1])
    assert float(nv.min()) > 0.05
    # A generic convolution is not same-equivariant.
    plain = symmetric_conv("none")
    with torch.no_grad():
        other = same_equivariance(plain(x), [plain(act(x, g)) for g in actions], actions)
    assert float(other["normalized"].min()) > 0.05


def test_translation_compares_the_valid_region_only():
    x = images(6, size=10)
    conv = symmetric_conv("none")
    shift = ("translate", 1, 2)
    with torch.no_grad():
        z, moved = conv(x), conv(act(x, shift))
    # A zero-padded convolution commutes with a zero-filled shift away from the far border (its receptive field
    # reads real pixels there that the shifted image lost): exact with a margin of one pixel.
    assert float(same_equivariance(z, [moved], [shift], margin=1)["normalized"].max()) < 1e-20
    assert float(same_equivariance(z, [moved], [shift])["normalized"].max()) > 1e-4


def test_act_inverse_and_translation_values():
    z = torch.randn(2, 3, 5, 5, generator=gen(5))
    for a in [*ACTIONS, ("translate", 0, 0)]:
        assert torch.equal(act(act(z, a), a, inverse=True), z)
    t = act(z, ("translate", 2, -1))
    assert torch.equal(t[..., 2:, :4], z[..., :3, 1:]) and not bool(t[..., :2, :].any()) and not bool(t[..., 4].any())
    assert torch.equal(act(z, ("translate", 9, 0)), torch.zeros_like(z))


def test_channel_mean_positions():
    v = torch.tensor([1.0, 2.0, 3.0, float("nan"), float("nan"), float("nan")])
    out = channel_mean(v, 2)
    assert out[0] == 2.0 and math.isnan(out[1])


# --------------------------------------------------------------------------- bad arguments


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: normalized_variance([[1.0]]), TypeError, "a must be a tensor"),
        (lambda: normalized_variance(torch.zeros(2, 3)), ValueError, r"\(T, N, U\)"),
        (lambda: normalized_variance(torch.zeros(1, 3, 2)), ValueError, "at least 2 transformations"),
        (lambda: normalized_variance(torch.zeros(2, 3, 2, dtype=torch.long)), ValueError, "floating"),
        (lambda: normalized_variance(torch.full((2, 3, 2), float("nan"))), ValueError, "non-finite"),
        (lambda: normalized_variance(torch.zeros(2, 3, 2), ddof=2), ValueError, "ddof"),
        (lambda: normalized_variance(torch.zeros(2, 3, 2), spread="mad"), ValueError, "spread"),
        (lambda: anova_invariance(torch.zeros(2, 3, 2), alpha=1.5), ValueError, "alpha"),
        (lambda: anova_invariance(torch.zeros(2, 3, 2), correction="holm"), ValueError, "correction"),
        (lambda: p_adjust(torch.tensor([1.5]), "bh"), ValueError, "p-values"),
        (lambda: f_sf(torch.ones(2), 0, 3), ValueError, "dfn"),
        (lambda: goodfellow_invariance(torch.zeros(4, 2), torch.zeros(2, 4, 3)), ValueError, "clean's"),
        (lambda: goodfellow_invariance(torch.zeros(4, 2), torch.zeros(2, 4, 2), rate=0), ValueError, "rate"),
        (lambda: goodfellow_invariance("x", torch.zeros(2, 4, 2)), TypeError, "clean"),
        (lambda: act(torch.zeros(1, 1, 2, 3), "rot90"), ValueError, "square"),
        (lambda: act(torch.zeros(1, 1, 2, 2), "rot45"), ValueError, "action"),
        (lambda: act(torch.zeros(1, 1, 2, 2), ("translate", 1.5, 0)), ValueError, "integer"),
        (lambda: same_equivariance(torch.zeros(2, 1, 3, 3), [torch.zeros(2, 1, 3, 4)], ["hflip"]), ValueError, "shape"),
        (lambda: same_equivariance(torch.zeros(2, 1, 3, 3), [torch.zeros(2, 1, 3, 3)], []), ValueError, "actions"),
        (lambda: same_equivariance(torch.zeros(2, 1, 3, 3), torch.zeros(2, 1, 3, 3), ["hflip"]), TypeError, "list"),
        (
            lambda: same_equivariance(torch.zeros(2, 1, 3, 3), [torch.zeros(2, 1, 3, 3)], [("translate", 1, 0)], 1),
            ValueError,
            "no position",
        ),
        (lambda: channel_mean(torch.zeros(5), 2), ValueError, "multiple"),
    ],
)
def test_bad_arguments(call, error, match):
    with pytest.raises(error, match=match):
        call()
