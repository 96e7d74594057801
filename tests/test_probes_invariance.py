"""features, invariance_score, invariance_curve, accuracy_curve, summary."""

import math
import warnings

import pytest
import torch
from helpers import gen
from torch import nn

import augnet
from augnet import probes
from augnet.transforms import image as T
from augnet.transforms import stratified_copies


def images(b=16, seed=0):
    return torch.rand(b, 3, 12, 12, generator=gen(seed))


def circular_net():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1, padding_mode="circular"), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten()
    ).eval()


def test_features_reads_named_layers_without_editing_the_model():
    net = circular_net()
    x = images()
    before = len(net[0]._forward_hooks)
    out = probes.features(net, x, ["0", "1", "output"], reduce="mean")
    assert [k for k in out] == ["0", "1", "output"]
    assert out["0"].shape == (16, 8) and out["output"].shape == (16, 8)
    torch.testing.assert_close(out["1"], out["output"])  # ReLU then global average pooling
    assert len(net[0]._forward_hooks) == before
    full = probes.features(net, x, "0")["0"]
    assert full.shape == (16, 8, 12, 12)
    torch.testing.assert_close(probes.features(net, x, "0", reduce="flatten")["0"], full.flatten(1))
    torch.testing.assert_close(probes.features(net, x, "0", batch_size=5)["0"], full)


def test_features_average_the_copies_of_an_augnet():
    trunk = circular_net()
    layer = augnet.AugmentationLayer([T.HorizontalFlip()], init_magnitude=0.5)
    model = augnet.AugNet(trunk, layer, aggregate="mean").eval()
    x = images(b=4)
    got = probes.features(model, x, "trunk.0", reduce="mean", copies=3, generator=gen(1))["trunk.0"]
    rows = model.augment(x, copies=3, generator=gen(1))
    expected = trunk[0](rows).mean((2, 3)).reshape(3, 4, 8).mean(0)
    torch.testing.assert_close(got, expected)


def test_features_average_only_an_augnets_copies():
    # A plain model whose layer returns 4 rows per image is not an AugNet: nothing is averaged.
    class FourViews(nn.Module):
        def __init__(self):
            super().__init__()
            self.views = nn.Identity()

        def forward(self, x):
            return self.views(torch.cat([x, x.flip(-1), x.flip(-2), x.flip(-1, -2)])).flatten(1)

    x = images(b=3)
    out = probes.features(FourViews(), x, ["views", "output"])
    assert out["views"].shape == (12, 3, 12, 12) and out["output"].shape == (12, 3 * 12 * 12)
    torch.testing.assert_close(out["views"][3:6], x.flip(-1))
    # An AugNet inside another module: its trunk's layers are averaged over its copies, named by full path.
    trunk = circular_net()
    inner = augnet.AugNet(trunk, augnet.AugmentationLayer([T.HorizontalFlip()], init_magnitude=0.5), aggregate="mean")
    outer = nn.Sequential(inner, nn.Identity()).eval()
    got = probes.features(outer, x, ["0.trunk.0", "1"], reduce="mean")
    assert got["0.trunk.0"].shape == (3, 8) and got["1"].shape == (3, 8)


def test_features_logits_of_an_augnet_are_its_copy_averaged_trunk_outputs():
    trunk = circular_net()
    layer = augnet.AugmentationLayer([T.Rotate(), T.ShearX()], init_magnitude=0.5)
    model = augnet.AugNet(trunk, layer).eval()  # aggregates the mean of log-softmax
    x = images(b=5)
    got = probes.features(model, x, ["logits", "output"], copies=3, generator=gen(2))
    with stratified_copies(3):  # the evaluation's draws (AugNet's default stratify=True)
        rows = model.augment(x, copies=3, generator=gen(2))
    torch.testing.assert_close(got["logits"], trunk(rows).reshape(3, 5, 8).mean(0))
    torch.testing.assert_close(got["output"], trunk(rows).reshape(3, 5, 8).log_softmax(2).mean(0))
    plain = probes.features(trunk, x, ["logits", "output"])
    torch.testing.assert_close(plain["logits"], plain["output"])  # a plain model's logits are its output


def test_features_bad_input():
    net = circular_net()
    with pytest.raises(ValueError, match="unknown layer"):
        probes.features(net, images(), "fc")
    with pytest.raises(ValueError, match="reduce must be one of"):
        probes.features(net, images(), "0", reduce="max")
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        probes.features(net, images(), "0", batch_size=0)


# ---------------------------------------------------------------- scores


@pytest.mark.parametrize("dist", ["cosine", "l2"])
@pytest.mark.parametrize("baseline", ["clean", "transformed"])
def test_identity_scores_exactly_one(dist, baseline):
    z = torch.randn(10, 6, generator=gen(0))
    assert torch.equal(probes.invariance_score(z, z.clone(), dist, baseline), torch.ones(10, dtype=torch.float64))


def test_circular_convolution_with_average_pooling_is_invariant_to_roll():
    net = circular_net()
    x = images(b=12)
    z = probes.features(net, x, "output")["output"]
    z_t = probes.features(net, torch.roll(x, shifts=(3, -5), dims=(2, 3)), "output")["output"]
    scores = probes.invariance_score(z, z_t, generator=gen(0))
    assert torch.allclose(scores, torch.ones_like(scores), atol=1e-6)
    # Not invariant to a transform it has no reason to be invariant to.
    z_r = probes.features(net, x.transpose(2, 3).flip(2), "output")["output"]
    assert probes.summary(probes.invariance_score(z, z_r, generator=gen(0)))["median"] < 0.9


@pytest.mark.parametrize("dist", ["cosine", "l2"])
def test_unrelated_inputs_score_about_zero(dist):
    z = torch.randn(400, 16, generator=gen(0))
    z_other = torch.randn(400, 16, generator=gen(1))
    scores = probes.invariance_score(z, z_other, dist, generator=gen(2))
    assert abs(probes.summary(scores)["mean"]) < 0.1


def test_baseline_pairs_never_a_sample_with_itself():
    for seed in range(50):
        for n in (2, 3, 7, 30):
            p = probes.derangement(n, gen(seed))
            assert sorted(p.tolist()) == list(range(n)) and (p != torch.arange(n)).all()
    with pytest.raises(ValueError, match="must not map a sample to itself"):
        probes.invariance_score(torch.randn(3, 2), torch.randn(3, 2), permutation=torch.tensor([0, 2, 1]))


@pytest.mark.parametrize("dist", ["cosine", "l2"])
@pytest.mark.parametrize("baseline", ["clean", "transformed"])
def test_score_is_unchanged_by_a_positive_rescaling(dist, baseline):
    z, z_t = torch.randn(20, 5, generator=gen(0)), torch.randn(20, 5, generator=gen(1))
    a = probes.invariance_score(z, z_t, dist, baseline, generator=gen(3))
    b = probes.invariance_score(7.5 * z, 7.5 * z_t, dist, baseline, generator=gen(3))
    torch.testing.assert_close(a, b)


@pytest.mark.parametrize("dist", ["cosine", "l2"])
@pytest.mark.parametrize("factor", [1e-13, 1e13])
def test_score_does_not_depend_on_the_features_scale_however_small(dist, factor):
    # Before, absolute thresholds (cosine eps 1e-12, zero baseline <= 1e-12) gave NaN (l2) or 0.32 instead
    # of 0.98 (cosine) at a scale of 1e-13.
    z = torch.randn(64, 32, generator=gen(8)).double()
    z_t = z + 0.2 * torch.randn(64, 32, generator=gen(9)).double()
    perm = probes.derangement(64, gen(0))
    ref = probes.invariance_score(z, z_t, dist, permutation=perm)
    torch.testing.assert_close(probes.invariance_score(factor * z, factor * z_t, dist, permutation=perm), ref)


def test_cosine_score_survives_a_large_common_offset():
    # 1 - cos between rows offset by 1e6 is about 1e-12; computed as 1 - cos it drowned in rounding (59 % NaN).
    z = torch.randn(64, 32, generator=gen(8)).double()
    z_t = z + 0.2 * torch.randn(64, 32, generator=gen(9)).double()
    perm = probes.derangement(64, gen(0))
    shifted = probes.invariance_score(z + 1e6, z_t + 1e6, "cosine", permutation=perm)
    assert not bool(shifted.isnan().any())
    # Against the cosine distances computed with 50 significant digits.
    zz, tt = (z + 1e6).to(torch.float64), (z_t + 1e6).to(torch.float64)

    def exact(a, b):
        import decimal

        decimal.getcontext().prec = 50
        out = []
        for ra, rb in zip(a.tolist(), b.tolist(), strict=True):
            da, db = [decimal.Decimal(v) for v in ra], [decimal.Decimal(v) for v in rb]
            dot = sum(p * q for p, q in zip(da, db, strict=True))
            na, nb = sum(p * p for p in da).sqrt(), sum(q * q for q in db).sqrt()
            out.append(float(1 - dot / (na * nb)))
        return torch.tensor(out, dtype=torch.float64)

    d, b = exact(zz[:8], tt[:8]), exact(zz[:8], zz[perm][:8])
    torch.testing.assert_close(shifted[:8], (b - d) / b, rtol=1e-6, atol=0)


def test_a_row_of_zeros_has_no_cosine():
    a = torch.tensor([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
    b = torch.tensor([[0.0, 3.0], [1.0, 0.0], [0.0, 0.0]])
    d = probes.distance(a, b)
    assert d[0] == 1.0 and math.isnan(d[1]) and d[2] == 0.0  # identical rows are 0 apart, even zeros


def test_constant_features_give_nan_with_a_warning():
    z = torch.ones(6, 3)
    with pytest.warns(RuntimeWarning, match="baseline distance"):
        scores = probes.invariance_score(z, z.clone())
    assert torch.isnan(scores).all()
    assert probes.summary(scores)["n"] == 0 and math.isnan(probes.summary(scores)["median"])


def test_a_single_logit_says_why_its_cosine_scores_are_nan():
    # A binary classifier's one logit: rows of one sign are at cosine distance 0 from each other, whatever the input.
    z = torch.linspace(1.0, 3.0, 6)[:, None]
    with pytest.warns(RuntimeWarning, match=r"one feature per row \(e\.g\. a single logit\)"):
        assert torch.isnan(probes.invariance_score(z, z + 0.1)).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not torch.isnan(probes.invariance_score(z, z + 0.1, distance="l2")).any()  # l2 has no such limit


class _Constant(nn.Module):
    def forward(self, x):
        return torch.ones(x.shape[0], 3)


@pytest.mark.parametrize("route", ["score", "curve"])
def test_the_nan_warning_points_at_the_callers_line(route):
    # However deep in the probes the score is taken, the warning names the line that called the probe.
    x = torch.rand(6, 1, 8, 8, generator=gen(0))
    with pytest.warns(RuntimeWarning, match="baseline distance") as record:
        if route == "score":
            probes.invariance_score(torch.ones(6, 3), torch.ones(6, 3))
        else:
            probes.invariance_curve(_Constant(), x, T.Rotate(), [0.5])
    assert {w.filename for w in record if "baseline distance" in str(w.message)} == {__file__}


def test_score_bad_input():
    with pytest.raises(ValueError, match="same shape"):
        probes.invariance_score(torch.randn(4, 3), torch.randn(4, 2))
    with pytest.raises(ValueError, match="at least 2 samples"):
        probes.invariance_score(torch.randn(1, 3), torch.randn(1, 3))
    with pytest.raises(ValueError, match="distance must be one of"):
        probes.invariance_score(torch.randn(4, 3), torch.randn(4, 3), distance="l1")
    with pytest.raises(ValueError, match="baseline must be one of"):
        probes.invariance_score(torch.randn(4, 3), torch.randn(4, 3), baseline="random")


def test_summary_percentiles():
    s = probes.summary(torch.arange(101, dtype=torch.float64))
    assert (s["median"], s["p5"], s["p95"], s["n"]) == (50.0, 5.0, 95.0, 101)
    # The AugNet paper's "75% confidence interval" (Figs. 5 and B.4): the central 75 % of the values.
    assert (s["interval75_low"], s["interval75_high"]) == (12.5, 87.5)
    v = torch.randn(1000, generator=gen(0), dtype=torch.float64)
    s = probes.summary(v)
    inside = ((v >= s["interval75_low"]) & (v <= s["interval75_high"])).double().mean()
    assert abs(float(inside) - 0.75) < 0.002
    assert math.isnan(probes.summary(torch.tensor([math.nan]))["interval75_low"])


def test_a_nan_feature_is_refused_instead_of_spoiling_its_baseline_partner():
    z = torch.randn(6, 4, generator=gen(0))
    bad = z.clone()
    bad[2, 1] = math.nan
    for args in ((bad, z), (z, bad)):
        with pytest.raises(ValueError, match=r"NaN or infinite features in rows \[2\]"):
            probes.invariance_score(*args, permutation=torch.tensor([1, 2, 3, 4, 5, 0]))
    inf = z.clone()
    inf[0, 0] = math.inf
    with pytest.raises(ValueError, match=r"z_t has NaN or infinite features in rows \[0\]"):
        probes.invariance_score(z, inf)


# ---------------------------------------------------------------- curves


def test_summary_quantiles_of_infinite_values_are_the_infinities_torch_quantile_makes_nan():
    # Per-unit normalised variances are infinite for a unit constant on the clean inputs (documented): their
    # summary keeps the quantiles that lie on or next to an infinity, where torch.quantile gives inf - inf = NaN.
    s = probes.summary(torch.tensor([1.0, 2.0, 3.0, math.inf]))
    got = (s["p25"], s["median"], s["p75"], s["p95"], s["interval75_high"])
    assert got == (1.75, 2.5, math.inf, math.inf, math.inf)
    s = probes.summary(torch.tensor([-math.inf, 1.0, 2.0, 3.0, math.inf, math.inf]))
    assert (s["p5"], s["interval75_low"], s["p95"]) == (-math.inf, -math.inf, math.inf) and s["median"] == 2.5
    v = torch.randn(37, generator=gen(3), dtype=torch.float64)  # finite values: torch.quantile's figures exactly
    s = probes.summary(v)
    want = v.quantile(torch.tensor([0.05, 0.25, 0.75, 0.95, 0.125, 0.875], dtype=torch.float64)).tolist()
    assert [s[k] for k in ("p5", "p25", "p75", "p95", "interval75_low", "interval75_high")] == want
    assert s["median"] == float(v.median())


@pytest.mark.parametrize("quantiles, error", [((1.5,), ValueError), ((-0.1, 0.5), ValueError), (0.5, TypeError),
                                              (("0.5",), ValueError)])  # fmt: skip
def test_summary_refuses_quantiles_outside_zero_one(quantiles, error):
    with pytest.raises(error, match="quantiles must be"):
        probes.summary(torch.rand(5), quantiles=quantiles)


def test_summary_takes_quantiles_as_an_array_or_a_tensor():
    import numpy as np

    v, want = torch.arange(9.0), probes.summary(torch.arange(9.0), quantiles=(0.1, 0.9))
    in_float64 = torch.tensor([0.1, 0.9], dtype=torch.float64)
    assert probes.summary(v, quantiles=np.array([0.1, 0.9])) == want == probes.summary(v, in_float64)


@pytest.mark.parametrize(
    "case, error, match",
    [
        ("loader", TypeError, "x must be a tensor of images, got DataLoader"),
        ("no-magnitudes", ValueError, "magnitudes must hold at least one magnitude"),
        ("magnitude-names", TypeError, "magnitudes must be numbers"),
        ("float64", TypeError, "x is torch.float64 but the model's parameters are torch.float32"),
        ("nan-image", ValueError, r"NaN or infinite values in images \[2\]"),
    ],
)  # fmt: skip
def test_the_curves_refuse_bad_arguments_naming_them_before_the_model_runs(case, error, match):
    net = circular_net()
    runs = []
    net.register_forward_pre_hook(lambda *_: runs.append(1))
    x, mags = images(b=6), [0.5]
    if case == "loader":
        x = torch.utils.data.DataLoader(x, batch_size=2)
    elif case == "no-magnitudes":
        mags = []
    elif case == "magnitude-names":
        mags = ["half"]
    elif case == "float64":
        x = x.double()
    else:
        x = x.clone()
        x[2, 0, 0, 0] = math.nan
    with pytest.raises(error, match=match):
        probes.invariance_curve(net, x, T.Rotate(), mags)
    with pytest.raises(error, match=match):
        probes.accuracy_curve(net, x, torch.zeros(6, dtype=torch.long), T.Rotate(), mags)
    assert not runs


def test_invariance_curve_is_one_at_magnitude_zero_and_for_an_invariant_model():
    net = circular_net()
    x = images(b=10)
    curve = probes.invariance_curve(net, x, T.Rotate(), [0.0, 0.25, 1.0])
    assert curve["scores"].shape == (3, 10)
    assert torch.allclose(curve["scores"][0], torch.ones(10, dtype=torch.float64))
    assert curve["summary"][2]["median"] < curve["summary"][0]["median"]
    assert curve["range"][1] == (-45.0, 45.0, "deg")
    at_layer = probes.invariance_curve(net, x, T.HorizontalFlip(), [0.5, 1.0], layer="2", reduce="flatten")
    assert at_layer["scores"].shape == (2, 10)
    # The network is not flip invariant in general, but a flip of a
    # horizontally symmetric input is the identity:
    sym = torch.cat([x, x.flip(-1)], -1)
    flips = probes.invariance_curve(net, sym, T.HorizontalFlip(), [1.0])
    assert torch.allclose(flips["scores"], torch.ones_like(flips["scores"]), atol=1e-6)


def test_invariance_curve_of_an_augnet_shares_its_draws_between_passes():
    trunk = circular_net()
    layer = augnet.AugmentationLayer([T.Rotate(), T.ShearX()], init_magnitude=0.5)
    model = augnet.AugNet(trunk, layer, aggregate="mean").eval()
    curve = probes.invariance_curve(model, images(b=8), T.Brightness(), [0.0], copies=4)
    torch.testing.assert_close(curve["scores"][0], torch.ones(8, dtype=torch.float64))
    with pytest.raises(ValueError, match="copies applies to AugNet"):
        probes.invariance_curve(trunk, images(b=8), T.Brightness(), [0.0], copies=4)


def test_an_augnet_and_its_trunk_are_probed_in_the_same_space():
    # An AugNet whose layer is the identity (magnitude 0) is its trunk: the default probe (logits) must score
    # them the same. On the aggregated log-probabilities (the old default) the scores differ.
    trunk = circular_net()
    model = augnet.AugNet(trunk, augnet.AugmentationLayer([T.Brightness()], init_magnitude=0.0)).eval()
    x = images(b=12)
    net_curve = probes.invariance_curve(trunk, x, T.Rotate(), [0.25, 1.0])
    aug_curve = probes.invariance_curve(model, x, T.Rotate(), [0.25, 1.0], copies=4)
    torch.testing.assert_close(aug_curve["scores"], net_curve["scores"], rtol=0, atol=1e-3)  # float32 resampling
    assert aug_curve["features"].startswith("logits: the AugNet's trunk outputs averaged over its 4 copies")
    on_output = probes.invariance_curve(model, x, T.Rotate(), [0.25, 1.0], copies=4, layer="output")
    assert on_output["features"].startswith("output: the AugNet's aggregate")
    assert (on_output["scores"] - net_curve["scores"]).abs().max() > 0.05


def test_independent_draws_let_invariance_grow_with_the_copies():
    # Under the identity transform, shared draws give 1 whatever C; independent draws measure the AugNet's own
    # augmentation noise, which averaging over more copies reduces (the AugNet paper's Fig. B.4).
    trunk = circular_net()
    layer = augnet.AugmentationLayer([T.TranslateX(), T.TranslateY()], init_magnitude=0.5)
    model = augnet.AugNet(trunk, layer).eval()
    x = images(b=24)

    def median(copies, draws):
        curve = probes.invariance_curve(model, x, T.Rotate(), [0.0], copies=copies, draws=draws)
        assert curve["draws"] == draws
        return curve["summary"][0]["median"]

    assert median(1, "shared") == pytest.approx(1.0, abs=1e-9) and median(8, "shared") == pytest.approx(1.0, abs=1e-9)
    c1, c8, c64 = median(1, "independent"), median(8, "independent"), median(64, "independent")
    assert c1 < 0.9 and c1 < c8 < c64 < 1.0
    with pytest.raises(ValueError, match="draws must be one of"):
        probes.invariance_curve(model, x, T.Rotate(), [0.0], copies=2, draws="fresh")


def test_accuracy_curve_at_zero_is_the_plain_accuracy():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Flatten(), nn.Linear(3 * 12 * 12, 3)).eval()
    x, y = images(b=30), torch.randint(0, 3, (30,), generator=gen(5))
    curve = probes.accuracy_curve(net, x, y, T.Rotate(), [0.0, 0.5])
    plain = float((net(x).argmax(1) == y).double().mean())
    assert curve["accuracy"][0] == plain and len(curve["accuracy"]) == 2
    with pytest.raises(ValueError, match="same length"):
        probes.accuracy_curve(net, x, y[:5], T.Rotate(), [0.0])


def test_probes_do_not_modify_their_inputs():
    net = circular_net()
    x = images()
    before = x.clone()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        probes.invariance_curve(net, x, T.Rotate(), [0.5])
    assert torch.equal(x, before)


def test_plots_of_curves_and_importances(tmp_path):
    from augnet.viz import plot_invariance_curves, plot_layer_importance

    net = circular_net()
    curve = probes.invariance_curve(net, images(b=6), T.Rotate(), [0.0, 0.5, 1.0])
    png = plot_invariance_curves({"net": curve}, tmp_path / "curves.png", title="rotation")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    png = plot_layer_importance({"conv1": 0.2, "conv2": 0.8}, tmp_path / "importance.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match=r"curve 'net' is not an invariance_curve\(\) result with the band \('p10'"):
        plot_invariance_curves({"net": curve}, tmp_path / "band.png", band=("p10", "p90"))  # KeyError 'p10' before
    with pytest.raises(ValueError, match="missing \\['magnitude'\\]"):
        plot_invariance_curves({"net": {"summary": curve["summary"]}}, tmp_path / "x.png")
    from augnet.viz import plot_distributions

    with pytest.raises(ValueError, match="all NaN / infinite"):
        plot_distributions({"a": [math.inf, math.nan]}, tmp_path / "d.png", ylabel="score")


def test_the_curves_take_magnitudes_as_any_sequence_a_user_has():
    # np.linspace, a tensor, a tuple, a generator: the same curve as the list (the check added for a bad
    # argument must not refuse what worked).
    import numpy as np

    net, x = circular_net(), images(b=6)
    want = probes.invariance_curve(net, x, T.Rotate(), [0.0, 0.5, 1.0])["scores"]
    for given in (np.linspace(0, 1, 3), torch.tensor([0.0, 0.5, 1.0]), (0.0, 0.5, 1.0), (m / 2 for m in range(3))):
        assert torch.equal(probes.invariance_curve(net, x, T.Rotate(), given)["scores"], want)
    acc = probes.accuracy_curve(net, x, torch.zeros(6, dtype=torch.long), T.Rotate(), np.array([0.0, 1.0]))
    assert acc["magnitude"] == [0.0, 1.0]
    for labels in (np.zeros(6, dtype=np.int64), [0] * 6):  # class indices as an array or a list, as a tensor
        assert probes.accuracy_curve(net, x, labels, T.Rotate(), np.array([0.0, 1.0])) == acc
    with pytest.raises(TypeError, match="1-D tensor or array"):
        probes.invariance_curve(net, x, T.Rotate(), np.float64(0.5))
