"""augnet.probes.report's per-unit measures and options: per_unit, by_class, transformations="grid", aggregation."""

import json
import math

import pytest
import torch
from helpers import gen
from torch import nn

from augnet import probes
from augnet.probes.families import family, grid_values
from augnet.probes.report import UNIT_MEASURES
from augnet.transforms import image as T

KW = {"lie": False, "magnitudes": [1.0]}


def symmetric_net(symmetry="hflip", seed=0):
    """A 3x3 convolution with kernels symmetric under ``symmetry``, tanh, global average pooling, a linear head.

    The convolution is exactly same-equivariant to the symmetry (and its maps are not invariant to it); the
    pooled features are invariant to it.
    """
    torch.manual_seed(seed)
    conv = nn.Conv2d(3, 4, 3, padding=1)
    with torch.no_grad():
        w = conv.weight
        if symmetry == "hflip":
            w.copy_((w + w.flip(-1)) / 2)
        else:
            w.copy_(sum(torch.rot90(w, k, (-2, -1)) for k in range(4)) / 4)
    return nn.Sequential(conv, nn.Tanh(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3)).eval()


def reader_net(seed=0):
    """Reads every position with its own weight: not invariant to a flip unless the image is symmetric."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 64, 6), nn.Tanh(), nn.Linear(6, 3)).eval()


def test_per_unit_arrays_have_one_value_per_channel_and_agree_with_the_layer(tmp_path):
    x = torch.rand(16, 3, 8, 8, generator=gen(0))
    for aggregation in ("pool", "positions"):
        rep = probes.report(
            symmetric_net(), x, ["Rotate"], ["1", "3", "logits"], per_unit=True, aggregation=aggregation, **KW
        )
        for layer, channels in (("1", 4), ("3", 4), ("logits", 3)):
            for measure in UNIT_MEASURES[:-1]:
                values = rep.unit_values(measure, layer, "Rotate")
                assert values.shape == (channels,) and values.dtype == torch.float64, (measure, layer)
                assert rep.value(measure, layer, "Rotate") == pytest.approx(float(values.nanmean()), rel=1e-12)
    # Saved beside the table, and read back as they were.
    rep.save(tmp_path / "r.csv")
    saved = json.loads((tmp_path / "r.units.json").read_text())
    row = next(r for r in saved["units"] if (r["layer"], r["measure"]) == ("1", "normalized_variance"))
    assert row["values"] == pytest.approx(rep.unit_values("normalized_variance", "1", "Rotate").tolist())
    plain = probes.report(symmetric_net(), x, ["Rotate"], ["1"], **KW)
    assert not plain.units and not (tmp_path / "p.units.json").exists()
    plain.save(tmp_path / "p.json")
    assert not (tmp_path / "p.units.json").exists()
    with pytest.raises(ValueError, match="per_unit=True"):
        plain.unit_values("normalized_variance", "1", "Rotate")


class SideDetector(nn.Module):
    """Channel 0: how much brighter channel 0 is on the left (0 on every clean image below); 1: the mean."""

    def forward(self, x):
        half = x.shape[-1] // 2
        left, right = x[:, 0, :, :half].mean((1, 2)), x[:, 0, :, half:].mean((1, 2))
        return torch.stack([torch.relu(left - right), x.mean((1, 2, 3))], 1)


def test_saved_reports_are_strict_json_with_infinities_as_strings(tmp_path):
    # A unit constant on the clean images and not under the flip has an infinite normalised variance (documented):
    # the files write it as "inf", as policy files do, and NaN as null, so every strict JSON reader takes them.
    x = torch.rand(16, 3, 8, 8, generator=gen(5))
    x[:, 0, :, :4], x[:, 0, :, 4:] = 0.0, 1.0
    model = nn.Sequential(SideDetector(), nn.Linear(2, 2)).eval()
    rep = probes.report(model, x, ["HorizontalFlip"], ["0"], per_unit=True, **KW)
    assert math.isinf(rep.unit_values("normalized_variance", "0", "HorizontalFlip")[0])
    rep.save(tmp_path / "p.json")

    def refuse(token):
        raise ValueError(f"not strict JSON: {token}")

    table = json.loads((tmp_path / "p.json").read_text(), parse_constant=refuse)
    units = json.loads((tmp_path / "p.units.json").read_text(), parse_constant=refuse)
    row = next(r for r in units["units"] if r["measure"] == "normalized_variance")
    assert row["values"][0] == "inf" and isinstance(row["values"][1], float)
    nv = [r["value"] for r in table["records"] if r["measure"] == "normalized_variance"]
    assert nv and all(v == "inf" or isinstance(v, float) for v in nv)


def test_unit_measures_of_the_report_are_the_measures_on_its_features():
    x = torch.rand(12, 3, 8, 8, generator=gen(1))
    net = reader_net()
    rep = probes.report(net, x, ["Brightness"], ["2"], per_unit=True, seed=4, **KW)
    z = probes.features(net, x, ["2"])["2"]
    z_t = probes.features(net, T.Brightness()(x, 1.0, generator=gen(5)), ["2"])["2"]  # seed + 1
    a = torch.stack([z, z_t])
    expected = probes.normalized_variance(a)["normalized_variance"]
    torch.testing.assert_close(rep.unit_values("normalized_variance", "2", "Brightness"), expected, rtol=1e-5, atol=0)
    good = probes.goodfellow_invariance(z, z_t[None])
    assert rep.value("goodfellow_global", "2", "Brightness") == pytest.approx(float(good["global_rate"].mean()))


def test_grid_mode_evaluates_exactly_the_grid():
    x = torch.rand(10, 3, 8, 8, generator=gen(2))
    net = reader_net()
    rep = probes.report(net, x, ["Rotate", "HorizontalFlip"], ["2"], transformations="grid", grid_points=5, **KW)
    angles = rep.info["grid"]["Rotate"]["1.0"]
    assert angles == pytest.approx([-math.pi, -math.pi / 2, 0.0, math.pi / 2, math.pi])
    assert rep.info["grid"]["HorizontalFlip"]["1.0"] == [0.0, 1.0]
    # The unit measures read exactly the grid's views: the rotations by each angle.
    views = []
    for angle in angles:
        params = {"angle": torch.full((10,), angle), "aspect": torch.ones(10)}
        views.append(probes.features(net, T.Rotate()(x, 1.0, params=params), ["2"])["2"])
    expected = probes.normalized_variance(torch.stack(views))["normalized_variance"]
    assert rep.value("normalized_variance", "2", "Rotate") == pytest.approx(float(expected.mean()), rel=1e-5)
    flips = torch.stack([probes.features(net, v, ["2"])["2"] for v in (x, x.flip(-1))])
    expected = probes.normalized_variance(flips)["normalized_variance"]
    assert rep.value("normalized_variance", "2", "HorizontalFlip") == pytest.approx(float(expected.mean()), rel=1e-4)
    # The pairwise measures leave the identity view (angle 0, the flip's off) out: it is the clean input again.
    assert "mean over the 4 grid views" in next(
        r["note"] for r in rep.records if (r["measure"], r["transform"]) == ("inv_augnet", "Rotate")
    )


@pytest.mark.parametrize("measure", ["inv_augnet", "invariance_error", "inv_bouchacourt"])
def test_grid_pairwise_measures_leave_the_identity_view_out(measure):
    # A flip at magnitude 1 is always applied: the grid's one moved view is the random mode's only view.
    x = torch.rand(32, 3, 8, 8, generator=gen(3))
    net = nn.Sequential(nn.Flatten(), nn.Linear(192, 16))
    got = {
        mode: probes.report(net, x, ["HorizontalFlip"], ["logits"], transformations=mode, **KW)
        for mode in ("random", "grid")
    }
    random_value = got["random"].value(measure, "logits", "HorizontalFlip")
    assert got["grid"].value(measure, "logits", "HorizontalFlip") == pytest.approx(random_value, rel=1e-6)
    assert random_value < 0.95  # the flat model is far from flip-invariant: the identity view would lift it


@pytest.mark.parametrize(
    ("symmetry", "transform", "compared"), [("hflip", "HorizontalFlip", "1 of 2"), ("rot", "Rotate", "4 of 5")]
)
def test_symmetric_convolution_is_same_equivariant_not_invariant(symmetry, transform, compared):
    # Brighter to the right: the flips and turns move each position's mean too, which ANOVA tests.
    x = torch.rand(12, 3, 8, 8, generator=gen(3)) + torch.linspace(0, 2, 8)
    rep = probes.report(
        symmetric_net(symmetry), x, [transform], ["1", "3"], transformations="grid", aggregation="positions",
        grid_points=5, **KW,
    )  # fmt: skip
    assert rep.value("same_equivariance", "1", transform) < 1e-8
    note = next(r["note"] for r in rep.records if (r["measure"], r["layer"]) == ("same_equivariance", "1"))
    assert note.startswith(f"{compared} views compared")
    # Its maps move with the symmetry, position by position: not invariant ...
    assert rep.value("normalized_variance", "1", transform) > 0.05
    assert rep.value("anova_invariant", "1", transform) < 1
    # ... while the pooled features are.
    assert rep.value("normalized_variance", "3", transform) < 1e-8
    assert rep.value("anova_invariant", "3", transform) == 1
    assert math.isnan(rep.value("same_equivariance", "3", transform))  # (N, C): no map to turn
    # A generic convolution is not same-equivariant.
    torch.manual_seed(7)
    plain = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.Tanh(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
    other = probes.report(plain, x, [transform], ["1"], transformations="grid", aggregation="positions",
                          grid_points=5, **KW)  # fmt: skip
    assert other.value("same_equivariance", "1", transform) > 0.05
    # Random draws and pooled features have no same-equivariance, and say why.
    pooled = probes.report(symmetric_net(symmetry), x, [transform], ["1"], **KW)
    assert math.isnan(pooled.value("same_equivariance", "1", transform))


def test_an_invariant_layer_scores_invariant_under_every_unit_measure():
    x = torch.rand(40, 3, 8, 8, generator=gen(4))
    rep = probes.report(symmetric_net(), x, ["HorizontalFlip"], ["3"], per_unit=True, **KW)
    assert rep.value("normalized_variance", "3", "HorizontalFlip") < 1e-8
    assert rep.value("normalized_distance", "3", "HorizontalFlip") < 1e-4
    assert rep.value("anova_invariant", "3", "HorizontalFlip") == 1
    assert rep.value("goodfellow_local", "3", "HorizontalFlip") == 1
    g = rep.unit_values("goodfellow_global", "3", "HorizontalFlip")
    torch.testing.assert_close(rep.unit_values("goodfellow", "3", "HorizontalFlip"), 1 / g)


def test_by_class_tells_an_invariantly_treated_class_from_another():
    # Class 0: left-right symmetric images, which a flip leaves as they are; class 1: any images. The model
    # reads every position with its own weight, so it is flip-invariant on class 0 only.
    r = torch.rand(24, 3, 8, 8, generator=gen(5))
    x = torch.cat([(r[:12] + r[:12].flip(-1)) / 2, r[12:]])
    labels = torch.tensor([0] * 12 + [1] * 12)
    for mode in ("random", "grid"):
        rep = probes.report(reader_net(), x, ["HorizontalFlip"], ["2", "logits"], by_class=labels,
                            transformations=mode, **KW)  # fmt: skip
        assert rep.classes() == [0, 1]
        for layer in ("2", "logits"):
            assert rep.value("normalized_variance", layer, "HorizontalFlip", cls=0) < 1e-6
            assert rep.value("normalized_variance", layer, "HorizontalFlip", cls=1) > 0.05
            assert rep.value("inv_augnet", layer, "HorizontalFlip", cls=0) == pytest.approx(1.0, abs=1e-5)
            assert rep.value("inv_augnet", layer, "HorizontalFlip", cls=1) < 0.99
        line = rep.verdict().splitlines()[-1]
        assert line.startswith("HorizontalFlip by class at logits") and "invariant: 0 (" in line
        assert "not invariant: 1 (" in line
    assert {r["class"] for r in rep.records} == {None, 0, 1}


def test_by_class_with_a_class_too_small_gives_nan_with_a_note():
    x = torch.rand(10, 3, 8, 8, generator=gen(6))
    rep = probes.report(reader_net(), x, ["Rotate"], ["2"], by_class=[0] * 9 + [1], **KW)
    assert math.isnan(rep.value("normalized_variance", "2", "Rotate", cls=1))
    assert math.isnan(rep.value("inv_augnet", "2", "Rotate", cls=1))
    notes = {r["note"] for r in rep.records if r["class"] == 1 and r["measure"] == "inv_augnet"}
    assert notes and all(n.startswith("class 1:") for n in notes)
    assert "not measured: 1" in rep.verdict()


def test_grid_values_span_each_transform_range():
    # The grid reaches the parameters the transform draws at that magnitude, and no further.
    x = torch.rand(4000, 3, 8, 8, generator=gen(7))
    for name in ("Rotate", "TranslateX", "ShearY", "Scale", "Brightness", "Contrast", "Hue"):
        t = getattr(T, name)()
        fam = family(t)
        values = grid_values(t, 0.5, 3, (8, 8))
        drawn = t.draw_params(x, 0.5, gen(8))[fam.param].flatten()
        top = fam.value(torch.tensor([values[-1]]), drawn[:1], (8, 8))
        bottom = fam.value(torch.tensor([values[0]]), drawn[:1], (8, 8))
        lo, hi = sorted([float(bottom), float(top)])
        assert lo <= float(drawn.min()) and float(drawn.max()) <= hi, name
        assert float(drawn.max()) > hi - 0.01 * (hi - lo) and float(drawn.min()) < lo + 0.01 * (hi - lo), name


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        ({"transformations": "all"}, ValueError, "transformations"),
        ({"aggregation": "mean"}, ValueError, "aggregation"),
        ({"per_unit": "yes"}, TypeError, "per_unit"),
        ({"by_class": torch.zeros(16, dtype=torch.bool)}, TypeError, "integer"),
        ({"by_class": torch.zeros(5, dtype=torch.long)}, ValueError, r"one label per input"),
        ({"by_class": "abc"}, TypeError, "by_class"),
        ({"transformations": "grid", "grid_points": 1}, ValueError, "grid_points"),
        ({"alpha": 2}, ValueError, "alpha"),
        ({"firing_rate": 0}, ValueError, "firing_rate"),
    ],
)
def test_bad_options_are_refused_before_the_model_runs(args, error, match):
    class Refuse(nn.Module):
        def forward(self, x):
            raise AssertionError("the model ran")

    with pytest.raises(error, match=match):
        probes.report(Refuse(), torch.rand(16, 3, 8, 8), ["Rotate"], ["logits"], **KW, **args)


def test_grid_refuses_a_transform_without_a_grid():
    with pytest.raises(ValueError, match="no grid"):
        probes.report(reader_net(), torch.rand(16, 3, 8, 8), ["Solarize"], ["2"], transformations="grid", **KW)


def test_units_plot_and_heatmap_of_a_class(tmp_path):
    pytest.importorskip("matplotlib")
    x = torch.rand(12, 3, 8, 8, generator=gen(9))
    rep = probes.report(reader_net(), x, ["Rotate", "HorizontalFlip"], ["2", "logits"], per_unit=True,
                        by_class=torch.arange(12) % 2, **KW)  # fmt: skip
    png = rep.units_plot(tmp_path / "u.png", "goodfellow", cls=1)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert rep.heatmap(tmp_path / "h.png", cls=0).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="measure must be one of"):
        rep.units_plot(tmp_path / "u.png", "inv_augnet")
    with pytest.raises(ValueError, match="not a class"):
        rep.units_plot(tmp_path / "u.png", cls=5)
    with pytest.raises(ValueError, match="not a class"):
        rep.heatmap(tmp_path / "h.png", cls=5)
    with pytest.raises(ValueError, match="per_unit=True"):
        probes.report(reader_net(), x, ["Rotate"], ["2"], **KW).units_plot(tmp_path / "u.png")


def test_the_unit_measures_taken_a_few_units_at_a_time_equal_all_at_once(monkeypatch):
    # The report measures units in slices (UNIT_CHUNK) to bound its memory; every per-unit value, and the
    # ANOVA's correction over the whole layer, must be those of one pass over every unit.
    from augnet.probes import report_measures

    x = torch.rand(24, 3, 8, 8, generator=gen(3))
    y = torch.arange(24) % 2
    kwargs = {"per_unit": True, "by_class": y, "aggregation": "positions", **KW}
    whole = probes.report(reader_net(), x, ["Rotate", "HorizontalFlip"], ["0", "2", "logits"], **kwargs)
    monkeypatch.setattr(report_measures, "UNIT_CHUNK", 2)
    sliced = probes.report(reader_net(), x, ["Rotate", "HorizontalFlip"], ["0", "2", "logits"], **kwargs)
    assert whole.units.keys() == sliced.units.keys() and len(whole.units) > 0
    for key, values in whole.units.items():
        torch.testing.assert_close(sliced.units[key], values, rtol=1e-12, atol=0, equal_nan=True, msg=str(key))
    measures = [(r["layer"], r["transform"], r["measure"], r["class"]) for r in whole.records]
    assert [r["value"] for r in sliced.records] == pytest.approx([r["value"] for r in whole.records], nan_ok=True)
    assert ("logits", "Rotate", "anova_invariant", None) in measures


def _same(a, b) -> bool:
    """Equal, NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def test_a_saved_report_loads_back_as_it_was(tmp_path):
    x = torch.rand(12, 3, 8, 8, generator=gen(1))
    labels = torch.arange(12) % 2
    net = symmetric_net()
    with torch.no_grad():  # one dead channel: its per-unit values are NaN, saved as null
        net[0].weight[0].zero_()
        net[0].bias[0] = 0.0
    rep = probes.report(
        net, x, ["Rotate", "HorizontalFlip"], ["1", "logits"], per_unit=True, by_class=labels,
        magnitudes=[0.5, 1.0], lie=True,
    )  # fmt: skip
    assert torch.cat(list(rep.units.values())).isnan().any() and any(math.isnan(r["value"]) for r in rep.records)
    key = next(iter(rep.units))
    rep.units[key][1] = -math.inf  # as a unit whose clean variance is 0 gives (saved as "-inf")
    rep.records[0]["value"] = math.inf
    back = probes.ProbeReport.load(rep.save(tmp_path / "r.json"))
    assert (back.layers, back.transforms, back.magnitudes, back.classes()) == (
        rep.layers, rep.transforms, rep.magnitudes, rep.classes()
    )  # fmt: skip
    assert len(back.records) == len(rep.records)
    for r, s in zip(rep.records, back.records):
        assert all(_same(r[k], s[k]) for k in r), (r, s)
    assert back.verdict() == rep.verdict() and repr(back) == repr(rep)
    assert _same(back.value("inv_augnet", "1", "Rotate", 0.5, cls=1), rep.value("inv_augnet", "1", "Rotate", 0.5, 1))
    assert back.units.keys() == rep.units.keys()
    for k, v in rep.units.items():
        torch.testing.assert_close(back.units[k], v, equal_nan=True, rtol=0, atol=0)
    assert back.heatmap(tmp_path / "h.png").stat().st_size > 0
    # Without its per-unit file it loads the table alone.
    (tmp_path / "r.units.json").unlink()
    assert not probes.ProbeReport.load(tmp_path / "r.json").units


def test_load_refuses_what_save_did_not_write(tmp_path):
    with pytest.raises(ValueError, match=r"a \.csv holds only the records"):
        probes.ProbeReport.load(tmp_path / "r.csv")
    with pytest.raises(ValueError, match="no such file"):
        probes.ProbeReport.load(tmp_path / "none.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="not JSON"):
        probes.ProbeReport.load(tmp_path / "bad.json")
    (tmp_path / "other.json").write_text(json.dumps({"records": [], "info": {"layers": []}}))
    with pytest.raises(ValueError, match="missing transforms, magnitudes"):
        probes.ProbeReport.load(tmp_path / "other.json")
