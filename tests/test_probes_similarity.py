"""similarity_change, similarity_search, top_transforms_per_class, equivariance_alignment (Bouchacourt et al.)."""

import math
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from helpers import gen
from torch import nn

import augnet
from augnet.probes.similarity import (
    STATISTICS,
    equivariance_alignment,
    plot_similarity_change_distributions,
    same_class_pairs,
    similarity_change,
    similarity_change_distributions,
    similarity_search,
    top_transforms_per_class,
)
from augnet.transforms import image as T


def identity(x, magnitude, generator=None):
    return x


def hflip(x, magnitude, generator=None):
    return torch.flip(x, dims=[-1])


# ---------------------------------------------------------------- pairs and similarity change


def test_same_class_pairs():
    y = torch.tensor([2, 0, 2, 2, 1, 0])
    pairs = same_class_pairs(y)
    assert pairs.shape == (3 * 2 + 0 + 2 * 1, 2)  # class 1 has one sample and no pair
    assert bool((y[pairs[:, 0]] == y[pairs[:, 1]]).all()) and bool((pairs[:, 0] != pairs[:, 1]).all())
    assert len({tuple(p) for p in pairs.tolist()}) == len(pairs)
    some = same_class_pairs(y, pairs_per_class=1, generator=gen(0))
    assert sorted(y[some[:, 0]].tolist()) == [0, 2]
    assert torch.equal(some, same_class_pairs(y, pairs_per_class=1, generator=gen(0)))


def test_similarity_change_is_exactly_zero_for_the_identity():
    z = torch.randn(12, 5, generator=gen(0))
    y = torch.arange(12) % 3
    out = similarity_change(z, z.clone(), y)
    assert torch.equal(out["change"], torch.zeros_like(out["change"]))
    for stats in [*out["per_class"].values(), out["overall"]]:
        assert stats["mean_change"] == 0.0 and stats["boosted"] == 0.0 and stats["weighted_boost"] == 0.0
        assert stats["percent_change"] == 0.0


def test_similarity_change_by_hand():
    z = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [1.0, 0.0]])
    z_t = torch.tensor([[9.0, 9.0], [1.0, 0.0], [1.0, 0.0], [5.0, 5.0]])
    y = torch.tensor([0, 0, 1, 1])
    pairs = torch.tensor([[0, 1], [1, 0], [2, 3]])
    out = similarity_change(z, z_t, y, pairs=pairs)
    r = 1 / math.sqrt(2)
    # (0, 1): s(z0, z1) = 0 -> s(z0, T z1) = 1; (1, 0): 0 -> s(z1, T z0) = r; (2, 3): r -> s(z2, T z3) = 1.
    torch.testing.assert_close(out["clean"], torch.tensor([0.0, 0.0, r], dtype=torch.float64))
    torch.testing.assert_close(out["change"], torch.tensor([1.0, r, 1 - r], dtype=torch.float64))
    c0 = out["per_class"][0]
    assert c0["n_pairs"] == 2 and c0["boosted"] == 1.0
    assert c0["mean_change"] == pytest.approx((1 + r) / 2) and c0["mean_positive_change"] == pytest.approx((1 + r) / 2)
    # The clean pairs are orthogonal: no percent change is defined, so none of the percent statistics is.
    assert c0["n_undefined"] == 2
    for key in ("percent_change", "percent_boost", "weighted_boost", "percent_change_of_means"):
        assert math.isnan(c0[key])
    c1 = out["per_class"][1]
    assert c1["percent_change"] == pytest.approx(100 * (1 - r) / r) and c1["n_undefined"] == 0
    assert c1["weighted_boost"] == pytest.approx(100 * (1 - r) / r)  # one pair, boosted
    torch.testing.assert_close(out["label"], torch.tensor([0, 0, 1]))


def at_cosine(c):
    """A 2-D unit vector whose cosine with (1, 0) is c."""
    return [c, math.sqrt(1.0 - c * c)]


def hand_built_pairs():
    """Class 0: anchor 0 paired with 1, 2, 3, clean cosines 0.5, 0.8, 0.25, after T 0.6, 0.4, 0.25
    (percent changes +20, -50, 0). Class 1: anchor 4 with 5, clean cosine -0.5, after T -0.25 (+50 %)."""
    e = [1.0, 0.0]
    z = torch.tensor([e, at_cosine(0.5), at_cosine(0.8), at_cosine(0.25), e, at_cosine(-0.5)], dtype=torch.float64)
    z_t = torch.tensor([e, at_cosine(0.6), at_cosine(0.4), at_cosine(0.25), e, at_cosine(-0.25)], dtype=torch.float64)
    y = torch.tensor([0, 0, 0, 0, 1, 1])
    pairs = torch.tensor([[0, 1], [0, 2], [0, 3], [4, 5]])
    return z, z_t, y, pairs


def test_percent_change_is_the_mean_of_per_pair_percent_changes():
    # The paper's eq. 2 averaged over pairs; the old statistic (a ratio of means) gave -19.35 for class 0.
    z, z_t, y, pairs = hand_built_pairs()
    out = similarity_change(z, z_t, y, pairs=pairs)
    torch.testing.assert_close(out["percent"], torch.tensor([20.0, -50.0, 0.0, 50.0], dtype=torch.float64))
    c0, c1, overall = out["per_class"][0], out["per_class"][1], out["overall"]
    assert c0["percent_change"] == pytest.approx(-10.0)  # (20 - 50 + 0) / 3
    assert c0["percent_change_of_means"] == pytest.approx(100 * (-0.3 / 3) / (1.55 / 3))  # -19.35, kept by name
    assert c0["mean_change"] == pytest.approx(-0.1)
    # Appendix E.2: average percent boost (20, over the one boosted pair) x proportion boosted (1/3), in percent.
    assert c0["boosted"] == pytest.approx(1 / 3) and c0["percent_boost"] == pytest.approx(20.0)
    assert c0["weighted_boost"] == pytest.approx(20.0 / 3)
    assert c0["mean_positive_change"] == pytest.approx(0.1 / 3)  # the old weighted boost, cosine units
    # A negative clean similarity: the percent change keeps the sign of the change (the ratio of means flips it).
    assert c1["percent_change"] == pytest.approx(50.0) and c1["weighted_boost"] == pytest.approx(50.0)
    assert c1["percent_change_of_means"] == pytest.approx(-50.0)
    assert overall["percent_change"] == pytest.approx(5.0)  # (20 - 50 + 0 + 50) / 4
    assert overall["percent_change_of_means"] == pytest.approx(100 * -0.0125 / 0.2625)  # -4.76: the other sign
    assert overall["n_undefined"] == 0


def test_weighted_boost_is_percent_boost_times_proportion_boosted():
    z = torch.randn(30, 6, generator=gen(1))
    z_t = z + 0.5 * torch.randn(30, 6, generator=gen(2))
    y = torch.arange(30) % 2
    out = similarity_change(z, z_t, y)
    for c, stats in out["per_class"].items():
        mine = out["label"] == c
        change, clean = out["change"][mine], out["clean"][mine]
        percent = 100 * change / clean.abs()
        up = change > 0
        assert 0 < stats["boosted"] < 1
        assert stats["percent_change"] == pytest.approx(float(percent.mean()))
        assert stats["percent_boost"] == pytest.approx(float(percent[up].mean()))
        assert stats["weighted_boost"] == pytest.approx(float(percent[up].mean()) * stats["boosted"])
        assert stats["weighted_boost"] == pytest.approx(float(percent.clamp_min(0).mean()))
        # The former statistics, under names that say what they are.
        assert stats["mean_positive_change"] == pytest.approx(float(change[up].mean()) * stats["boosted"])
        assert stats["percent_change_of_means"] == pytest.approx(100 * stats["mean_change"] / stats["clean_similarity"])


def test_a_nan_feature_is_refused_not_spread_over_its_class():
    z = torch.randn(6, 4, generator=gen(0))
    z_t = z + 0.1
    y = torch.tensor([0, 0, 0, 1, 1, 1])
    bad = z.clone()
    bad[2, 1] = math.nan
    with pytest.raises(ValueError, match=r"non-finite.*\[2\]"):
        similarity_change(bad, z_t, y)
    with pytest.raises(ValueError, match="z_t holds non-finite"):
        similarity_change(z, z_t.masked_fill(torch.arange(4) == 0, math.inf), y)
    with pytest.raises(ValueError, match="non-finite"):
        equivariance_alignment(bad, z_t, gen(0))


def max_pool_net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 6, 1), nn.ReLU(), nn.AdaptiveMaxPool2d(1), nn.Flatten()).eval()


def test_search_is_exactly_zero_for_the_identity_and_for_an_invariant_model():
    x = torch.rand(16, 3, 8, 8, generator=gen(3))
    y = torch.arange(16) % 4
    net = max_pool_net()  # 1x1 convolutions then a global max: exactly invariant to a flip
    table = similarity_search(net, x, y, {"identity": identity, "flip": hflip, "bright": T.Brightness()}, (0.3, 1.0))
    assert len(table) == 3 * 2 * 4
    for row in table:
        if row["transform"] in ("identity", "flip"):
            assert row["mean_change"] == 0.0 and row["boosted"] == 0.0 and row["weighted_boost"] == 0.0
        assert row["n_pairs"] == 12
    # The same model is not invariant to a brightness shift.
    moved = [row["mean_change"] for row in table if row["transform"] == "bright"]
    assert max(abs(m) for m in moved) > 1e-3


def test_search_on_an_augnet_draws_the_same_augmentations_for_both_passes():
    torch.manual_seed(0)
    trunk = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Flatten())
    model = augnet.AugNet(trunk, augnet.AugmentationLayer([T.Rotate()], init_magnitude=0.5)).eval()
    x, y = torch.rand(8, 3, 6, 6, generator=gen(4)), torch.arange(8) % 2
    table = similarity_search(model, x, y, {"identity": identity}, copies=2)
    assert all(row["mean_change"] == 0.0 for row in table)


def smooth_pattern(seed):
    b = torch.randn(1, 3, 4, 4, generator=gen(seed), dtype=torch.float64)
    b = F.interpolate(b, size=(16, 16), mode="bicubic", align_corners=False)
    return b - b.mean()


def two_class_data(n=12):
    """Class 0: one pattern under random rotations; class 1: another under random brightness shifts."""
    rotate, brighten = T.Rotate(max_angle=math.pi / 6, padding="border"), T.Brightness(max_shift=1.0)
    x0 = rotate(smooth_pattern(1).expand(n, -1, -1, -1).contiguous(), 1.0, generator=gen(10))
    x1 = brighten(smooth_pattern(2).expand(n, -1, -1, -1).contiguous(), 1.0, generator=gen(11))
    return torch.cat([x0, x1]), torch.tensor([0] * n + [1] * n), {"rotate": rotate, "brightness": brighten}


@pytest.mark.parametrize("by", ["weighted_boost", "boosted"])
def test_search_finds_the_transform_each_class_varies_by(by):
    x, y, transforms = two_class_data()
    table = similarity_search(nn.Flatten(), x, y, {**transforms, "identity": identity}, magnitudes=(0.5, 1.0))
    top = top_transforms_per_class(table, k=2, by=by)
    assert sorted(top) == [0, 1]
    assert [row["transform"] for row in top[0]] == ["rotate", "rotate"]
    assert [row["transform"] for row in top[1]] == ["brightness", "brightness"]
    assert {row["magnitude"] for row in top[0]} == {0.5, 1.0}


def test_mean_change_alone_prefers_doing_nothing():
    # Random draws move as many pairs apart as together, so by mean change the identity wins or ties:
    # the reason weighted_boost is the default ranking.
    x, y, transforms = two_class_data()
    table = similarity_search(nn.Flatten(), x, y, {**transforms, "identity": identity}, magnitudes=(0.5, 1.0))
    assert top_transforms_per_class(table, k=1, by="mean_change")[0][0]["transform"] == "identity"
    right = [r for r in table if r["label"] == 1 and r["transform"] == "brightness"]  # class 1 varies by it
    assert all(abs(r["mean_change"]) < 0.02 for r in right)  # by mean change, about as good as doing nothing
    assert all(r["weighted_boost"] > 10 for r in right)  # by weighted boost, far ahead of the identity's 0


def test_search_magnitudes_per_transform_and_pair_sampling():
    x, y, transforms = two_class_data(n=8)
    table = similarity_search(
        nn.Flatten(), x, y, transforms, magnitudes={"rotate": [0.2], "brightness": (0.1, 0.4)}, pairs_per_class=10
    )
    assert [(r["transform"], r["magnitude"]) for r in table if r["label"] == 0] == [
        ("rotate", 0.2),
        ("brightness", 0.1),
        ("brightness", 0.4),
    ]
    assert all(r["n_pairs"] == 10 for r in table)
    again = similarity_search(
        nn.Flatten(), x, y, transforms, magnitudes={"rotate": [0.2], "brightness": (0.1, 0.4)}, pairs_per_class=10
    )
    assert table == again


# ---------------------------------------------------------------- per-class distributions (Fig. 3A)


def test_distributions_gather_one_value_per_class_for_each_transform():
    x, y, transforms = two_class_data(n=8)
    table = similarity_search(nn.Flatten(), x, y, {**transforms, "identity": identity}, magnitudes=(0.5, 1.0))
    dists = similarity_change_distributions(table)
    assert list(dists) == [(t, m) for t in ("rotate", "brightness", "identity") for m in (0.5, 1.0)]
    for (t, m), d in dists.items():
        assert d["labels"] == [0, 1] and d["magnitudes"] == [m, m]
        expected = [r["percent_change"] for r in table if r["transform"] == t and r["magnitude"] == m]
        assert d["values"].tolist() == expected
        assert d["summary"]["n"] == 2 and d["summary"]["mean"] == pytest.approx(sum(expected) / 2)
    assert dists[("identity", 0.5)]["values"].tolist() == [0.0, 0.0]  # the identity changes no pair
    pooled = similarity_change_distributions(table, statistic="weighted_boost", by_magnitude=False)
    assert list(pooled) == ["rotate", "brightness", "identity"]
    assert pooled["rotate"]["labels"] == [0, 1, 0, 1] and pooled["rotate"]["magnitudes"] == [0.5, 0.5, 1.0, 1.0]
    assert pooled["rotate"]["values"].tolist() == [r["weighted_boost"] for r in table if r["transform"] == "rotate"]


def test_distributions_bad_input():
    with pytest.raises(ValueError, match="statistic must be one of"):
        similarity_change_distributions([{"transform": "a", "magnitude": 0.5, "label": 0}], statistic="median")
    with pytest.raises(ValueError, match="every row needs"):
        similarity_change_distributions([{"transform": "a", "label": 0, "percent_change": 1.0}])
    with pytest.raises(ValueError, match="table is empty"):
        similarity_change_distributions([])
    with pytest.raises(TypeError, match="list of rows"):
        similarity_change_distributions({"a": 1})
    assert "percent_change" in STATISTICS and "percent_change_of_means" in STATISTICS


def test_distribution_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    x, y, transforms = two_class_data(n=6)
    table = similarity_search(nn.Flatten(), x, y, transforms, magnitudes=(0.5, 1.0))
    dists = similarity_change_distributions(table)
    path = plot_similarity_change_distributions(dists, tmp_path / "fig" / "fig3a.png", title="Fig. 3A")
    assert path == tmp_path / "fig" / "fig3a.png" and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    violin = plot_similarity_change_distributions(
        {"a": [1.0, 2.0, math.nan], "b": [0.5]}, tmp_path / "v.png", kind="violin"
    )
    assert violin.stat().st_size > 1000
    with pytest.raises(ValueError, match="kind"):
        plot_similarity_change_distributions(dists, tmp_path / "x.png", kind="bar")
    with pytest.raises(ValueError, match="nothing to plot"):
        plot_similarity_change_distributions({"a": [math.nan]}, tmp_path / "x.png")


def test_matplotlib_is_imported_only_to_plot():
    code = "import sys, augnet.probes.similarity; assert 'matplotlib' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


# ---------------------------------------------------------------- equivariance alignment


def test_alignment_per_sample_matches_the_pairwise_cosines():
    d = torch.randn(9, 4, generator=gen(0), dtype=torch.float64) + 1.0
    z = torch.zeros_like(d)
    out = equivariance_alignment(z, d, generator=gen(1))
    cos = F.cosine_similarity(d[:, None], d[None], dim=-1)
    expected = (cos.sum(1) - cos.diagonal()) / 8
    torch.testing.assert_close(out["per_sample"], expected)
    assert out["score"] == pytest.approx(float(expected.mean()))
    mean_ref = equivariance_alignment(z, d, generator=gen(1), reference="mean")
    others = torch.stack([torch.cat([d[:i], d[i + 1 :]]).mean(0) for i in range(9)])
    torch.testing.assert_close(mean_ref["per_sample"], F.cosine_similarity(d, others, dim=1))


def intensity_features(n=300, dim=32, seed=0):
    """Features whose first coordinate is a positive intensity spread over a decade."""
    z = torch.randn(n, dim, generator=gen(seed), dtype=torch.float64)
    z[:, 0] = torch.randn(n, generator=gen(seed + 1), dtype=torch.float64).exp()
    return z


@pytest.mark.parametrize("reference", ["pairwise", "mean"])
def test_alignment_of_a_linear_map_along_one_direction_is_high(reference):
    z = intensity_features()
    u = torch.randn(32, generator=gen(2), dtype=torch.float64)
    m = torch.eye(32, dtype=torch.float64) + torch.outer(u, torch.eye(32, dtype=torch.float64)[0])
    out = equivariance_alignment(z, z @ m.T, generator=gen(3), reference=reference, shuffles=3)
    # Every displacement is z_0 * u: one direction, lengths that vary; the shuffle mixes the lengths.
    assert out["score"] == pytest.approx(1.0)
    assert out["difference"] > 0.25
    assert out["difference"] == pytest.approx(out["score"] - out["baseline"])


@pytest.mark.parametrize("reference", ["pairwise", "mean"])
def test_alignment_of_random_displacements_is_about_zero(reference):
    z = intensity_features()
    z_t = z + torch.randn(300, 32, generator=gen(4), dtype=torch.float64)
    out = equivariance_alignment(z, z_t, generator=gen(5), reference=reference)
    assert abs(out["score"]) < 0.05 and abs(out["difference"]) < 0.05


def test_a_constant_shift_is_equivariant_but_scores_zero_above_its_baseline():
    # Integer-valued features: z + c - z is exactly c, every column of the displacements is
    # constant, the shuffled baseline is the same matrix and the difference is exactly 0.
    z = torch.randint(-50, 50, (200, 16), generator=gen(6)).double()
    c = torch.randint(-5, 6, (16,), generator=gen(7)).double()
    out = equivariance_alignment(z, z + c, generator=gen(8))
    assert out["score"] == pytest.approx(1.0) and out["baseline"] == pytest.approx(1.0)
    assert out["difference"] == 0.0
    # On real-valued features the rounding of z + c - z leaves it at about 0, and a little
    # noise on top of the shift does not change that, although the map is still equivariant.
    z = torch.randn(200, 16, generator=gen(9), dtype=torch.float64)
    assert abs(equivariance_alignment(z, z + c, generator=gen(10))["difference"]) < 1e-9
    noisy = z + c + 0.05 * torch.randn(200, 16, generator=gen(11), dtype=torch.float64)
    out = equivariance_alignment(z, noisy, generator=gen(12))
    assert out["score"] > 0.99 and abs(out["difference"]) < 0.01


def test_a_generic_linear_map_of_centred_features_is_not_detected():
    z = torch.randn(300, 32, generator=gen(13), dtype=torch.float64)
    m = torch.randn(32, 32, generator=gen(14), dtype=torch.float64) / math.sqrt(32)
    out = equivariance_alignment(z, z @ m.T, generator=gen(15))
    assert abs(out["score"]) < 0.05 and abs(out["baseline"]) < 0.05 and abs(out["difference"]) < 0.05


def test_an_invariant_model_scores_zero():
    z = torch.randn(20, 4, generator=gen(16))
    out = equivariance_alignment(z, z.clone(), generator=gen(17))
    assert out["n_zero"] == 20 and out["score"] == 0.0 and out["difference"] == 0.0


def test_alignment_is_deterministic_given_the_generator():
    z = intensity_features(n=50)
    z_t = z + torch.randn(50, 32, generator=gen(18), dtype=torch.float64)
    assert equivariance_alignment(z, z_t, gen(19))["baseline"] == equivariance_alignment(z, z_t, gen(19))["baseline"]


# ---------------------------------------------------------------- bad input


def test_bad_input():
    z = torch.randn(6, 3)
    y = torch.tensor([0, 0, 1, 1, 2, 2])
    with pytest.raises(ValueError, match="same shape"):
        similarity_change(z, torch.randn(6, 4), y)
    with pytest.raises(ValueError, match=r"y must have shape \(6,\)"):
        similarity_change(z, z, y[:5])
    with pytest.raises(TypeError, match="integer class labels"):
        similarity_change(z, z, y.bool())
    with pytest.raises(ValueError, match="same class"):
        similarity_change(z, z, y, pairs=torch.tensor([[0, 2]]))
    with pytest.raises(ValueError, match="two different samples"):
        similarity_change(z, z, y, pairs=torch.tensor([[0, 0]]))
    with pytest.raises(ValueError, match="outside"):
        similarity_change(z, z, y, pairs=torch.tensor([[0, 6]]))
    with pytest.raises(ValueError, match="no same-class pair"):
        similarity_change(z, z, torch.arange(6))
    with pytest.raises(ValueError, match="pairs_per_class"):
        same_class_pairs(y, pairs_per_class=0)
    with pytest.raises(ValueError, match="B >= 2"):
        similarity_change(z[:1], z[:1], y[:1])
    x = torch.rand(6, 3, 8, 8)
    with pytest.raises(ValueError, match="non-empty dict"):
        similarity_search(nn.Flatten(), x, y, {})
    with pytest.raises(TypeError, match="not callable"):
        similarity_search(nn.Flatten(), x, y, {"a": 3})
    with pytest.raises(ValueError, match="no entry for transform"):
        similarity_search(nn.Flatten(), x, y, {"a": identity}, magnitudes={"b": [0.5]})
    with pytest.raises(ValueError, match="by must be one of"):
        top_transforms_per_class([{"label": 0, "weighted_boost": 1.0}], by="median")
    with pytest.raises(ValueError, match="k must be a positive integer"):
        top_transforms_per_class([{"label": 0, "weighted_boost": 1.0}], k=0)
    with pytest.raises(ValueError, match="table is empty"):
        top_transforms_per_class([])
    with pytest.raises(ValueError, match="reference must be one of"):
        equivariance_alignment(z, z, reference="median")
    with pytest.raises(ValueError, match="same shape"):
        equivariance_alignment(z, z[:5])
    with pytest.raises(ValueError, match="B >= 2"):
        equivariance_alignment(z[:1], z[:1])
    with pytest.raises(ValueError, match="shuffles"):
        equivariance_alignment(z, z, shuffles=0)
    with pytest.raises(TypeError, match="must be tensors"):
        equivariance_alignment(z.tolist(), z)


# -------------------------------------------------------- undefined pairs, a robust statistic, memory (issue 26)


def test_pairs_with_a_row_of_zeros_are_left_out_and_counted():
    g = gen(5)
    z = torch.randn(40, 6, generator=g).relu()
    z_t = (z + 0.3 * torch.randn(40, 6, generator=g)).relu()
    y = torch.arange(40) % 4
    zero = torch.arange(40) % 5 == 0
    z0, zt0 = z.masked_fill(zero[:, None], 0.0), z_t.masked_fill(zero[:, None], 0.0)
    with_zero = similarity_change(z0, zt0, y, pairs_per_class=None)
    without = similarity_change(z[~zero], z_t[~zero], y[~zero], pairs_per_class=None)
    # Before, a row of zeros counted as cosine 0: mean change 0.022 with them against 0.034 without.
    for c in range(4):
        got, ref = with_zero["per_class"][c], without["per_class"][c]
        for key in ("mean_change", "percent_change", "median_percent_change", "boosted", "weighted_boost"):
            assert got[key] == pytest.approx(ref[key], rel=1e-12), key
        members = int((y == c).sum())
        zeros = int((zero & (y == c)).sum())
        no_cosine = members * (members - 1) - (members - zeros) * (members - zeros - 1)
        assert got["n_no_cosine"] == no_cosine and got["n_pairs"] == members * (members - 1)
        assert got["n_undefined"] >= no_cosine
    assert bool(with_zero["change"][with_zero["pairs"][:, 0] == 0].isnan().all())


def test_median_percent_change_is_the_median_pair_and_resists_near_orthogonal_pairs():
    z, z_t, y, pairs = hand_built_pairs()
    out = similarity_change(z, z_t, y, pairs=pairs)
    assert out["per_class"][0]["median_percent_change"] == pytest.approx(0.0)  # of +20, -50, 0
    assert out["per_class"][0]["median_change"] == pytest.approx(0.0)
    # Signed features: a pair at clean cosine 1e-4 turns a change of 0.01 into +10,000 %.
    e = [1.0, 0.0]
    z = torch.tensor([e, at_cosine(1e-4), at_cosine(0.5), at_cosine(0.6)], dtype=torch.float64)
    z_t = torch.tensor([e, at_cosine(1e-4 + 0.01), at_cosine(0.49), at_cosine(0.59)], dtype=torch.float64)
    stats = similarity_change(z, z_t, torch.zeros(4, dtype=torch.long), pairs=torch.tensor([[0, 1], [0, 2], [0, 3]]))
    c = stats["per_class"][0]
    assert c["percent_change"] > 3000 and c["median_percent_change"] == pytest.approx(-100 * 0.01 / 0.6)  # -2, -1.7


def test_default_draws_1000_pairs_per_class():
    y = torch.arange(120) % 2  # 60 per class: 3540 ordered pairs each
    z = torch.randn(120, 4, generator=gen(0))
    out = similarity_change(z, z + 0.1, y)
    assert out["per_class"][0]["n_pairs"] == 1000 and out["per_class"][1]["n_pairs"] == 1000
    assert len(similarity_change(z, z + 0.1, y, pairs_per_class=None)["pairs"]) == 2 * 3540


def test_same_class_pairs_of_a_large_class_are_drawn_without_listing_them():
    y = torch.zeros(5000, dtype=torch.long)  # 24,995,000 ordered pairs, above the 2^24 listed ones
    pairs = same_class_pairs(y, pairs_per_class=3000, generator=gen(0))
    assert pairs.shape == (3000, 2) and bool((pairs[:, 0] != pairs[:, 1]).all())
    assert len({tuple(p) for p in pairs.tolist()}) == 3000
    assert torch.equal(pairs, same_class_pairs(y, pairs_per_class=3000, generator=gen(0)))
    # Uniform: the first index of the pairs is spread over the class (a chi-square over 10 bins).
    counts = torch.bincount(pairs[:, 0] // 500, minlength=10).double()
    assert float(((counts - 300) ** 2 / 300).sum()) < 30  # 27.9 is the 0.1 % point of chi2(9)
    # A small class draws the head of one permutation of its listed pairs, as before.
    small = torch.tensor([0] * 7 + [1] * 3)
    listed = same_class_pairs(small[:7])
    torch.testing.assert_close(
        same_class_pairs(small[:7], pairs_per_class=5, generator=gen(1)),
        listed[torch.randperm(42, generator=gen(1))[:5]],
    )


def test_search_class_by_class_equals_similarity_change_on_every_pair():
    x, y, transforms = two_class_data(n=9)
    for ppc in (None, 20):
        table = similarity_search(nn.Flatten(), x, y, transforms, magnitudes=(0.5,), pairs_per_class=ppc, batch_size=4)
        z = nn.Flatten()(x)
        pairs = same_class_pairs(y, ppc, gen(0))
        for row in table:
            moved = nn.Flatten()(transforms[row["transform"]](x, 0.5, generator=gen(1)))
            ref = similarity_change(z, moved, y, pairs=pairs)["per_class"][row["label"]]
            for key, value in ref.items():
                assert row[key] == pytest.approx(value, rel=1e-9, abs=1e-12, nan_ok=True), key
