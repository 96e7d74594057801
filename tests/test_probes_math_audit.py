"""Mathematical audit of the probes: each measure against an independent NumPy computation of its paper's
formula on a tiny example, and the symmetries it must have (rescaled features, permuted units, reordered
samples, exactly invariant or exactly equivariant models)."""

import numpy as np
import pytest
import torch
from torch import nn

from augnet import probes
from augnet.probes._common import seeded
from augnet.probes.neurons import layerwise_invariance, neuron_invariance
from augnet.probes.stats import f_sf, p_adjust


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def _cos_dist(a, b):
    return 1.0 - (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


# --------------------------------------------------------------------------- AugNet eq. 4, Bouchacourt eq. 1


@pytest.mark.parametrize("baseline", ["clean", "transformed"])
@pytest.mark.parametrize("kind", ["cosine", "l2"])
def test_invariance_score_is_the_papers_formula(baseline, kind):
    g = gen(0)
    z = torch.randn(10, 5, generator=g, dtype=torch.float64)
    zt = z + 0.3 * torch.randn(10, 5, generator=g, dtype=torch.float64)
    perm = probes.derangement(10, gen(1))
    got = probes.invariance_score(z, zt, kind, baseline, permutation=perm).numpy()
    Z, ZT, P = z.numpy(), zt.numpy(), perm.numpy()
    ref = Z if baseline == "clean" else ZT
    if kind == "cosine":
        b, d = _cos_dist(ref, ref[P]), _cos_dist(Z, ZT)
    else:
        b, d = np.linalg.norm(ref - ref[P], axis=1), np.linalg.norm(Z - ZT, axis=1)
    np.testing.assert_allclose(got, (b - d) / b, rtol=1e-12, atol=1e-12)


def test_invariance_score_follows_the_samples_and_ignores_the_units_order():
    g = gen(2)
    z = torch.randn(9, 6, generator=g, dtype=torch.float64)
    zt = z + 0.5 * torch.randn(9, 6, generator=g, dtype=torch.float64)
    perm = probes.derangement(9, gen(3))
    s = probes.invariance_score(z, zt, permutation=perm)
    order = torch.randperm(9, generator=g)
    inverse = torch.argsort(order)
    # the same pairing of samples, written in the new order: sample k of the new order is order[k]
    moved = probes.invariance_score(z[order], zt[order], permutation=inverse[perm[order]])
    torch.testing.assert_close(moved, s[order], rtol=0, atol=1e-14)
    units = torch.randperm(6, generator=g)
    torch.testing.assert_close(probes.invariance_score(z[:, units], zt[:, units], permutation=perm), s)


def test_global_average_pool_is_exactly_invariant_to_quarter_turns():
    x = torch.randn(8, 3, 6, 6, generator=gen(4), dtype=torch.float64)
    model = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten())
    turn = lambda x, m, generator=None: torch.rot90(x, int(m), (2, 3))  # noqa: E731
    for baseline in ("clean", "transformed"):
        curve = probes.invariance_curve(model, x, turn, [0, 1, 2, 3], baseline=baseline)
        torch.testing.assert_close(curve["scores"], torch.ones(4, 8, dtype=torch.float64), rtol=0, atol=1e-12)


# --------------------------------------------------------------------------- Zaidi et al. eq. 1


def _zaidi_numpy(a, at, tau):
    mx = np.maximum(a.max(0), at.max(0))
    with np.errstate(invalid="ignore", divide="ignore"):
        f, ft = a / mx, at / mx
        h = 1 - np.abs(ft - f) / (ft + f)
    active = (f > tau) | (ft > tau)
    return np.array([h[active[:, k], k].mean() if active[:, k].any() else np.nan for k in range(a.shape[1])])


def test_neuron_invariance_is_eq1_and_free_of_each_units_scale_and_order():
    g = gen(5)
    a = torch.rand(14, 5, generator=g, dtype=torch.float64)
    at = torch.rand(14, 5, generator=g, dtype=torch.float64)
    a[a < 0.3], at[at < 0.3] = 0, 0
    a[:, 4], at[:, 4] = 0, 0  # a dead unit: no active input, NaN
    out = neuron_invariance(a, at, tau=0.2)["invariance"]
    np.testing.assert_allclose(out.numpy(), _zaidi_numpy(a.numpy(), at.numpy(), 0.2), rtol=1e-12, equal_nan=True)
    assert torch.isnan(out[4])
    scale = torch.tensor([1.0, 1e3, 1e-4, 7.0, 2.0], dtype=torch.float64)
    units = torch.randperm(5, generator=g)
    other = neuron_invariance((a * scale)[:, units], (at * scale)[:, units], tau=0.2)["invariance"]
    torch.testing.assert_close(other, out[units], equal_nan=True)
    torch.testing.assert_close(
        neuron_invariance(a, a.clone(), 0.2)["invariance"][:4], torch.ones(4, dtype=torch.float64)
    )


@pytest.mark.parametrize("units", ["element", "channel"])
def test_layerwise_groups_in_small_batches_equal_neuron_invariance_on_their_rows(units):
    g = gen(6)
    net = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.ReLU()).eval()
    x = torch.randn(20, 2, 5, 5, generator=g)
    xt = x.flip(-1) + 0.1 * torch.randn(20, 2, 5, 5, generator=g)
    y = torch.arange(20) % 3
    out = layerwise_invariance(net, x, ["1"], tau=0.1, x_t=xt, units=units, y=y, seen_classes=[0, 2], batch_size=7)
    with torch.no_grad():
        a, at = net(x), net(xt)
    for group, rows in (("all", None), ("seen", (y == 0) | (y == 2)), ("unseen", y == 1)):
        ref = neuron_invariance(a, at, 0.1, rows=rows, units=units)
        got = out["groups"][group]["1"]
        torch.testing.assert_close(got["invariance"], ref["invariance"], equal_nan=True)
        assert torch.equal(got["n_active"], ref["n_active"])
        assert out["mean"][group]["1"] == pytest.approx(float(ref["invariance"].nanmean()), rel=1e-12)


# --------------------------------------------------------------------------- Tensmeyer & Martinez eqs. 2, 8


def test_equivariance_curve_recovers_the_channel_swap_of_a_flip():
    # channels 2, 3 are channels 0, 1 with mirrored kernels: under a left-right flip the pooled features swap
    g = gen(7)
    torch.manual_seed(0)
    conv = nn.Conv2d(2, 4, 3, padding=1, bias=False).double()
    with torch.no_grad():
        conv.weight[2:] = conv.weight[:2].flip(-1)
    model = nn.Sequential(conv, nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
    x = torch.randn(80, 2, 6, 6, generator=g, dtype=torch.float64)
    swap = [2, 3, 0, 1]
    with torch.no_grad():
        torch.testing.assert_close(model(x.flip(-1)), model(x)[:, swap], rtol=0, atol=1e-14)
    flip = lambda x, m: x.flip(-1) if m else x  # noqa: E731
    curve = probes.equivariance_curve(model, x, flip, [0, 1])
    assert curve["form"] == "sigma((W + I) r + b)"  # post-ReLU features: eq. 8
    assert curve["equivariance"][0] == 0.0 and curve["invariance"][0] == 0.0  # the identity: the trivial score
    assert curve["equivariance"][1] < 1e-5 < 0.1 < curve["invariance"][1]
    fitted = curve["maps"][1].module
    matrix = fitted.weight + torch.eye(4, dtype=torch.float64)
    torch.testing.assert_close(matrix, torch.eye(4, dtype=torch.float64)[swap], rtol=0, atol=1e-4)


def test_mapping_errors_ignore_a_common_scale_and_the_units_order():
    g = gen(8)
    z = torch.randn(60, 6, generator=g, dtype=torch.float64)
    zt = z + 0.5 * torch.randn(60, 6, generator=g, dtype=torch.float64)
    ref = probes.equivariance_report(z, zt)["scores"]
    units = torch.randperm(6, generator=g)
    for other in (
        probes.equivariance_report(z * 1e-6, zt * 1e-6),
        probes.equivariance_report(z[:, units], zt[:, units]),
    ):
        for key in ("equivariance", "invariance"):
            assert other["scores"][key] == pytest.approx(ref[key], rel=1e-9)


# --------------------------------------------------------------------------- Bouchacourt et al., app. D and eq. 2


@pytest.mark.parametrize("reference", ["pairwise", "mean"])
def test_alignment_against_numpy_and_its_symmetries(reference):
    g = gen(9)
    z = torch.randn(9, 5, generator=g, dtype=torch.float64)
    shift = torch.tensor([1.0, 2.0, 0.0, 0.0, 1.0], dtype=torch.float64)
    zt = z + torch.randn(9, 5, generator=g, dtype=torch.float64) + shift
    zt[3] = z[3]  # one sample does not move: cosine 0 with every other
    out = probes.equivariance_alignment(z, zt, gen(0), reference=reference)
    d = (zt - z).numpy()
    norms = np.linalg.norm(d, axis=1, keepdims=True)
    u = np.divide(d, norms, out=np.zeros_like(d), where=norms > 0)
    b = len(d)
    if reference == "pairwise":
        want = np.array([np.mean([u[i] @ u[j] for j in range(b) if j != i]) for i in range(b)])
    else:
        others = [np.mean([d[j] for j in range(b) if j != i], 0) for i in range(b)]
        want = np.array([u[i] @ o / np.linalg.norm(o) for i, o in enumerate(others)])
    np.testing.assert_allclose(out["per_sample"].numpy(), want, rtol=0, atol=1e-14)
    assert out["n_zero"] == 1
    units, order = torch.randperm(5, generator=g), torch.randperm(9, generator=g)
    other = probes.equivariance_alignment(3 * z[order][:, units], 3 * zt[order][:, units], gen(0), reference=reference)
    assert other["score"] == pytest.approx(out["score"], abs=1e-14)


def test_similarity_change_per_class_is_eq2_by_hand_and_search_agrees():
    g = gen(10)
    y = torch.tensor([0, 0, 0, 1, 1, 1, 1])
    z = torch.randn(7, 4, generator=g, dtype=torch.float64)
    zt = z + 0.4 * torch.randn(7, 4, generator=g, dtype=torch.float64)
    out = probes.similarity_change(z, zt, y, pairs_per_class=None)
    Z, ZT = z.numpy(), zt.numpy()
    cos = lambda a, b: a @ b / np.linalg.norm(a) / np.linalg.norm(b)  # noqa: E731
    for c in (0, 1):
        idx = np.flatnonzero(y.numpy() == c)
        pairs = [(i, j) for i in idx for j in idx if i != j]
        clean = np.array([cos(Z[i], Z[j]) for i, j in pairs])
        change = np.array([cos(Z[i], ZT[j]) for i, j in pairs]) - clean
        percent = 100 * change / np.abs(clean)
        up = change > 0
        stats = out["per_class"][c]
        assert stats["percent_change"] == pytest.approx(percent.mean(), rel=1e-12)
        assert stats["boosted"] == pytest.approx(up.mean())
        assert stats["weighted_boost"] == pytest.approx(percent[up].mean() * up.mean() if up.any() else 0.0, rel=1e-12)
        assert stats["mean_change"] == pytest.approx(change.mean(), abs=1e-15)
    still = probes.similarity_change(z, z.clone(), y)["overall"]  # an invariant model: no change at all
    assert (still["mean_change"], still["percent_change"], still["weighted_boost"], still["boosted"]) == (0, 0, 0, 0)
    # the model-level search reads the same statistics off the model's features, with the same pairs
    model = nn.Sequential(nn.Flatten(), nn.Linear(12, 5)).double()
    x = torch.randn(30, 3, 2, 2, generator=g, dtype=torch.float64)
    labels = torch.arange(30) % 3
    add = lambda x, m, generator=None: x + m  # noqa: E731
    rows = probes.similarity_search(model, x, labels, {"add": add}, magnitudes=[0.5], pairs_per_class=20, seed=3)
    with torch.no_grad():
        ref = probes.similarity_change(model(x), model(x + 0.5), labels, pairs_per_class=20, generator=seeded(3))
    for row in rows:
        for key in ("percent_change", "weighted_boost", "median_change", "clean_similarity"):
            assert row[key] == pytest.approx(ref["per_class"][row["label"]][key], rel=1e-12, abs=1e-15)


# --------------------------------------------------------------------------- Yan & Huang


def test_ranking_weights_follow_a_rescaling_and_a_permutation_of_channels():
    g = gen(11)
    n = 300
    m_a, m_b = torch.rand(n, generator=g), torch.rand(n, generator=g)
    noise = torch.randn(n, 5, generator=g, dtype=torch.float64)
    z_a = torch.stack([m_a.double() + 0.5 * noise[:, 0], noise[:, 1], noise[:, 2]], 1)
    z_b = torch.stack([m_b.double() + 0.5 * noise[:, 3], noise[:, 4], noise[:, 2]], 1)
    ref = probes.ranking_probe(z_a, z_b, m_a, m_b, generator=gen(1))
    scale, channels = torch.tensor([1e3, 1e-2, 5.0], dtype=torch.float64), torch.tensor([2, 0, 1])
    scaled = probes.ranking_probe(z_a * scale, z_b * scale, m_a, m_b, generator=gen(1))
    moved = probes.ranking_probe(z_a[:, channels], z_b[:, channels], m_a, m_b, generator=gen(1))
    assert scaled["accuracy"] == ref["accuracy"] == moved["accuracy"]
    torch.testing.assert_close(scaled["weight"] * scale, ref["weight"], rtol=1e-6, atol=1e-9)
    torch.testing.assert_close(moved["weight"][torch.argsort(channels)], ref["weight"], rtol=1e-6, atol=1e-9)
    # section V-D: a layer's importance is its channels' mean |w| * std, normalised over the layers
    split = probes.ranking_probe(
        {"a": z_a[:, :1], "b": z_a[:, 1:]}, {"a": z_b[:, :1], "b": z_b[:, 1:]}, m_a, m_b, generator=gen(1)
    )
    contribution = (split["weight"].abs() * split["std"]).tolist()
    a, b = contribution[0], (contribution[1] + contribution[2]) / 2
    assert split["importance"]["a"] == pytest.approx(a / (a + b), rel=1e-12)
    assert split["importance"]["b"] == pytest.approx(b / (a + b), rel=1e-12)


# --------------------------------------------------------------------------- statistics


def test_f_survival_and_benjamini_hochberg_against_scipy_at_large_degrees_of_freedom():
    stats = pytest.importorskip("scipy.stats")
    f = torch.tensor([0.0, 0.5, 0.99, 1.0, 1.01, 2.0, 30.0], dtype=torch.float64)
    for dfn, dfd in ((99, 1e7), (8, 79992), (1e5, 1e5), (0.5, 0.7)):
        np.testing.assert_allclose(f_sf(f, dfn, dfd).numpy(), stats.f.sf(f.numpy(), dfn, dfd), rtol=0, atol=1e-9)
    p = torch.rand(25, generator=gen(12), dtype=torch.float64)
    np.testing.assert_allclose(p_adjust(p, "bh").numpy(), stats.false_discovery_control(p.numpy()), atol=1e-14)


# --------------------------------------------------------------------------- degenerate inputs


def test_degenerate_inputs_give_their_documented_values():
    from augnet.probes.measures import anova_invariance, goodfellow_invariance, normalized_variance

    g = gen(13)
    z = torch.randn(6, 3, generator=g, dtype=torch.float64)
    constant = torch.ones(6, 3, dtype=torch.float64)  # a model that ignores its input: no baseline distance
    with pytest.warns(RuntimeWarning, match="baseline"):
        assert torch.isnan(probes.invariance_score(constant, constant.clone(), generator=gen(0))).all()
    a = torch.randn(3, 5, 2, generator=g, dtype=torch.float64)
    a[..., 1] = 2.0  # a unit constant over samples and transformations
    assert torch.isnan(normalized_variance(a)["normalized_variance"][1])
    assert torch.isnan(anova_invariance(a)["f"][1]) and not anova_invariance(a)["invariant"][1]
    assert torch.isnan(goodfellow_invariance(a[0], a[1:])["invariance"][1])
    # Zaidi: a unit active and constant is perfectly invariant; an identity transform gives 1 everywhere active
    active = torch.rand(6, 3, generator=g, dtype=torch.float64) + 0.5
    assert torch.equal(
        neuron_invariance(active, active.clone(), 0.05)["invariance"], torch.ones(3, dtype=torch.float64)
    )
    # no moving feature: the ranking is at chance and the alignment 0
    m_a, m_b = torch.rand(40, generator=g), torch.rand(40, generator=g)
    feats = torch.randn(40, 3, generator=g, dtype=torch.float64)
    with pytest.warns(RuntimeWarning, match="every weight is 0"):
        assert probes.ranking_probe(feats, feats.clone(), m_a, m_b, generator=gen(0))["accuracy"] == 0.5
    still = probes.equivariance_alignment(z, z.clone(), gen(0))
    assert (still["score"], still["difference"], still["n_zero"]) == (0.0, 0.0, 6)
