"""augnet.probes.report's ProbeReport: its lookups, save, verdict and figures refuse or state what holds."""

import math

import numpy as np
import pytest
import torch
from torch import nn

from augnet import probes
from augnet.probes.report import ProbeReport


def small_net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(4, 2)).eval()  # fmt: skip


@pytest.fixture(scope="module")
def rep32():
    x = torch.rand(16, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    mags = np.array([0.3, 0.7], dtype=np.float32)
    return probes.report(small_net(), x, ["Rotate"], ["1"], magnitudes=mags, lie=False, per_unit=True,
                         by_class=torch.arange(16) % 2)  # fmt: skip


def test_float32_magnitudes_are_found_by_their_decimal(rep32):
    assert rep32.magnitudes == [float(np.float32(0.3)), float(np.float32(0.7))]  # stored as given
    nv = rep32.value("normalized_variance", "1", "Rotate", float(np.float32(0.3)))
    assert rep32.value("normalized_variance", "1", "Rotate", 0.3) == nv
    assert torch.equal(rep32.unit_values("normalized_variance", "1", "Rotate", 0.3),
                       rep32.units[("1", "Rotate", rep32.magnitudes[0], "normalized_variance", None)])  # fmt: skip
    with pytest.raises(ValueError, match=r"magnitude 0.3001 was not swept"):
        rep32.value("normalized_variance", "1", "Rotate", 0.3001)
    with pytest.raises(ValueError, match=r"magnitude nan was not swept"):
        rep32.value("normalized_variance", "1", "Rotate", math.nan)
    plain = ProbeReport([{"measure": "inv_augnet", "layer": "a", "transform": "T", "magnitude": 0.3, "value": 0.5,
                          "class": None}], ["a"], ["T"], [0.3])  # fmt: skip
    assert plain.value("inv_augnet", "a", "T", np.float32(0.3)) == 0.5


def test_unit_values_checks_its_arguments_as_value_does_and_returns_a_copy(rep32):
    got = rep32.unit_values("normalized_variance", "1", "Rotate", cls=torch.tensor(0))
    assert torch.equal(got, rep32.unit_values("normalized_variance", "1", "Rotate", cls=0))
    got[:] = 123.0
    assert not (rep32.unit_values("normalized_variance", "1", "Rotate", cls=0) == 123.0).any()
    with pytest.raises(TypeError, match=r"magnitude must be a number, got str: '1'"):
        rep32.unit_values("normalized_variance", "1", "Rotate", "1")
    with pytest.raises(TypeError, match=r"magnitude must be a number, got bool: True"):
        rep32.unit_values("normalized_variance", "1", "Rotate", True)
    for f in (rep32.unit_values, rep32.value):
        for cls in (True, np.bool_(True), 0.0, 5):
            with pytest.raises(ValueError, match=r"cls .* is not a class of this report; its classes are \[0, 1\]"):
                f("normalized_variance", "1", "Rotate", cls=cls)
    with pytest.raises(ValueError, match=r"unknown measure 'inv_augnet'; the measures are \['normalized_variance'"):
        rep32.unit_values("inv_augnet", "1", "Rotate")
    with pytest.raises(ValueError, match=r"layer 'nope' was not probed; the report's layers are \['1'\]"):
        rep32.unit_values("normalized_variance", "nope", "Rotate")
    with pytest.raises(ValueError, match=r"cls True is not a class"):
        rep32.units_plot("/tmp/never.png", cls=True)


def test_save_refuses_a_directory_before_writing_anything(rep32, tmp_path):
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(ValueError, match=r"cannot save to .*dir.json: it is an existing directory"):
        rep32.save(tmp_path / "dir.json")
    (tmp_path / "b.units.json").mkdir()
    with pytest.raises(ValueError, match=r"cannot save to .*b.units.json: it is an existing directory"):
        rep32.save(tmp_path / "b.json")
    (tmp_path / "f").write_text("")
    with pytest.raises(ValueError, match=r"cannot save to .*f/r.json: folder .*f is an existing file"):
        rep32.save(tmp_path / "f" / "r.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.units.json", "dir.json", "f"]
    assert not any((tmp_path / "dir.json").iterdir())


def _rep(values: dict, layers, logits_rank=None):
    records = [{"measure": "inv_augnet", "layer": k, "transform": "T", "magnitude": 1.0, "value": v, "class": None}
               for k, v in values.items()]  # fmt: skip
    if logits_rank is not None:
        records.append({"measure": "ranking_accuracy", "layer": layers[-1], "transform": "T", "magnitude": 1.0,
                        "value": logits_rank, "class": None})  # fmt: skip
    return ProbeReport(records, layers, ["T"], [1.0], {"model": "M", "features": "f"})


def test_the_verdict_says_only_what_the_numbers_hold():
    one = _rep({"a": 0.5}, ["a"]).verdict().splitlines()[1]
    assert one == "T at mu = 1: Inv_T 0.500 at a."
    nan_last = _rep({"a": 0.2, "b": 0.9, "c": math.nan}, ["a", "b", "c"]).verdict().splitlines()[1]
    assert nan_last == ("T at mu = 1: Inv_T not measured (see the notes) at c (grows from 0.200 at a to 0.900 at b, "
                        "from the first layer given to the last; highest 0.900 at b).")  # fmt: skip
    ranked = _rep({"a": 0.2, "b": 0.2}, ["a", "b"], logits_rank=0.75).verdict().splitlines()[1]
    assert ranked == ("T at mu = 1: Inv_T 0.200 at b (about the same from the first layer given to the last, within "
                      "0.01: 0.200 at a, 0.200 at b; highest 0.200 at a); its parameter ranked at 0.75 from b "
                      "(chance 0.5; pairs of views drawn at mu = 1).")  # fmt: skip


def test_same_equivariance_of_one_value_per_channel_is_nan_without_a_warning(recwarn):
    from augnet.probes.measures import same_equivariance

    z = torch.tensor([[[[1.0]], [[2.0]]]])  # (1, 2, 1, 1): one sample, one position
    out = same_equivariance(z, [z + 1], ["hflip"])
    assert torch.isnan(out["normalized"]).all() and torch.isnan(out["scale"]).all()
    assert out["error"].tolist() == [1.0, 1.0] and not recwarn.list
    x = torch.rand(16, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    labels = torch.arange(16) % 2
    labels[0] = 2
    rep = probes.report(nn.Sequential(small_net()[0], nn.Tanh(), nn.AdaptiveAvgPool2d(1)), x, ["HorizontalFlip"],
                        ["2"], magnitudes=[1.0], lie=False, transformations="grid", aggregation="positions",
                        by_class=labels)  # fmt: skip
    (rec,) = [r for r in rep.records if r["measure"] == "same_equivariance" and r["class"] == 2]
    assert math.isnan(rec["value"])
    assert rec["note"] == "same_equivariance needs at least 2 values per channel (samples x positions), got 1 x 1"
    assert not [w for w in recwarn.list if "degrees of freedom" in str(w.message)]


def test_heatmap_cells_mark_infinity_and_colour_a_signed_measure_by_its_size():
    from augnet.probes.plots import _heat_cells

    f64 = torch.float64
    drawn, texts, lo, hi, signed = _heat_cells(torch.tensor([[0.5, math.inf], [math.nan, 2.0]], dtype=f64), "0")
    assert texts == [["0.5", "inf"], ["n/a", "2"]] and (lo, hi, signed) == (0.5, 2.0, False)
    assert drawn[0].tolist() == [0.5, 2.0] and math.isnan(drawn[1, 0])  # inf at the scale's end, NaN stays grey
    drawn, texts, lo, hi, signed = _heat_cells(torch.tensor([[-0.4, 0.1, -math.inf]], dtype=f64), "0")
    assert texts == [["-0.4", "0.1", "-inf"]] and (lo, hi, signed) == (0.1, 0.4, True)
    assert drawn.tolist() == [[0.4, 0.1, 0.4]]  # |value|: the reversed map makes 0.1 the brightest


def test_figure_paths_are_checked_before_drawing(rep32, tmp_path):
    pytest.importorskip("matplotlib")
    (tmp_path / "plots").mkdir()
    (tmp_path / "a.png").mkdir()
    with pytest.raises(ValueError, match=r"the figure path .*plots is an existing directory; give a file name"):
        rep32.heatmap(tmp_path / "plots")
    with pytest.raises(ValueError, match=r"the figure path .*a.png is an existing directory"):
        rep32.units_plot(tmp_path / "a.png")
    with pytest.raises(ValueError, match=r"cannot write a figure as '.txt' \(.*new/h.txt\); the formats are \["):
        rep32.heatmap(tmp_path / "new" / "h.txt")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.png", "plots"]
    assert rep32.heatmap(tmp_path / "new" / "h") == tmp_path / "new" / "h.png"


def test_constant_features_explain_their_nan_and_chance_values():
    net = small_net()
    with torch.no_grad():
        net[4].weight.zero_()  # a zero-initialised head (a ViT's): 0 whatever the input
        net[4].bias.zero_()
    x = torch.rand(16, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    rep = probes.report(net, x, ["Rotate"], ["4"], magnitudes=[1.0], lie=False)
    notes = {r["measure"]: (r["value"], r["note"]) for r in rep.records}
    for m in ("invariance_error", "neuron_invariance", "normalized_variance", "anova_invariant", "goodfellow",
              "goodfellow_local", "normalized_distance"):  # fmt: skip
        assert math.isnan(notes[m][0]) and notes[m][1].startswith("features constant over the inputs"), m
    assert notes["alignment"] == (0.0, "features constant over the inputs")
    assert notes["ranking_accuracy"][0] == 0.5 and "features constant over the inputs" in notes["ranking_accuracy"][1]
    assert all(note for value, note in notes.values() if math.isnan(value))


def test_report_checks_by_class_and_grid_points_whatever_the_transformations():
    x = torch.rand(8, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    args = (small_net(), x, ["Rotate"], ["1"])
    with pytest.raises(ValueError, match=r"^by_class must hold class labels >= 0, got -1$"):
        probes.report(*args, magnitudes=[1.0], by_class=torch.tensor([-1, 0, 1, 0, 1, 0, 1, 0]))
    for bad in ("x", -5, True):
        with pytest.raises(ValueError, match=rf"^grid_points must be an integer >= 2, got {bad!r}$"):
            probes.report(*args, grid_points=bad)
    rep = probes.report(*args, magnitudes=[1.0], lie=False, by_class=np.array([0, 1] * 4))
    assert rep.classes() == [0, 1]
