"""The probe report and the figures (``augnet.probes.report``, ``ProbeReport``, ``augnet.viz``,
``augnet.probes.plots``) used as a user would, on a small CNN: what was silently wrong, raw or leaked.

A figure whose folder could not be made (a file in its place) was drawn, then met a ``FileExistsError`` and
stayed open in pyplot, as did one whose ``save_figure`` failed in any other way (a path of ``None``, a warning
raised as an error); ``ProbeReport.save`` / ``load`` / ``heatmap`` of ``None`` raised pathlib's TypeError naming
no argument, and of ``"~/r.json"`` wrote a folder named ``~`` in the working directory. ``ProbeReport.load`` of
a file that ``save`` did not write (a record that is not a dict of its fields, a value or magnitude that is not
a number, layers that are not names, no magnitude, a per-unit file of other rows) raised raw TypeErrors and
KeyErrors, or loaded and failed later in ``table()`` / ``verdict()``. The plots read Python floats as float32
(``1e40`` drawn as ``inf``, ``1e-50`` as 0); ``plot_invariance_curves`` drew string magnitudes or medians as
categories; ``plot_ranking_heatmap`` raised torch's error on string values, dropped complex values' imaginary
parts with a warning, read a string of tasks letter by letter and took a string ``vmin`` until matplotlib
failed with the figure open; ``plot_report_heatmap`` read a string of layers letter by letter;
``plot_similarity_change_distributions`` met a raw format error on a key ``("rot", "x")``;
``plot_layer_importance`` refused a 0-d NumPy array that it takes as a 0-d tensor; ``ylim=(1, 1)`` warned with
the figure open.
"""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
import torch
from torch import nn

from augnet import viz
from augnet.probes import plots, report
from augnet.probes.report import ProbeReport

plt = pytest.importorskip("matplotlib.pyplot")


def _net():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1),
        nn.ReLU(),
        nn.Sequential(nn.Conv2d(4, 4, 3, padding=1), nn.ReLU()),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(4, 3),
    )


@pytest.fixture(scope="module")
def rep():
    x = torch.rand(16, 3, 16, 16, generator=torch.Generator().manual_seed(0))
    return report(_net(), x, ["Rotate"], magnitudes=1.0, lie=False, per_unit=True, by_class=np.arange(16) % 2)


@pytest.fixture
def no_leak():
    """Fails the test when it leaves a pyplot figure open."""
    before = set(plt.get_fignums())
    yield
    left = set(plt.get_fignums()) - before
    plt.close("all")
    assert not left, f"figures left open: {left}"


# --------------------------------------------------------------------------- paths


def test_a_figure_whose_folder_is_a_file_is_refused_before_drawing_and_leaves_no_figure(rep, tmp_path, no_leak):
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    with pytest.raises(ValueError, match="afile is an existing file"):
        rep.heatmap(blocker / "h.png")
    with pytest.raises(ValueError, match="afile is an existing file"):
        viz.plot_distributions({"a": [1.0, 2.0]}, blocker / "d.png", "y")
    with pytest.raises(ValueError, match="afile is a file, not a folder"):
        viz.plot_distributions({"a": [1.0, 2.0]}, blocker / "sub" / "d.png", "y")
    with pytest.raises(ValueError, match="afile is an existing file"):
        viz.figure_path(blocker / "h")


@pytest.mark.parametrize("bad", [None, 3, b"r.json"])
def test_save_load_and_figures_name_a_path_that_is_not_one(rep, bad, no_leak):
    for call in (rep.save, ProbeReport.load, rep.heatmap, rep.units_plot):
        with pytest.raises(TypeError, match="path must be a str or a path-like object"):
            call(bad)
    with pytest.raises(TypeError, match="path must be a str or a path-like object"):
        viz.plot_layer_importance({"a": 1.0}, bad)


def test_a_path_with_a_tilde_is_under_the_home_folder(rep, tmp_path, monkeypatch, no_leak):
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    assert rep.save("~/out/r.json") == home / "out" / "r.json"
    assert ProbeReport.load("~/out/r.json").records[0] == rep.records[0]
    assert rep.heatmap("~/out/h") == home / "out" / "h.png" and (home / "out" / "h.png").is_file()
    assert viz.plot_layer_importance({"a": 1.0}, "~/i.png") == home / "i.png"
    assert not list(work.iterdir())  # (a folder named "~" was made here)


def test_save_figure_closes_its_figure_whatever_fails(tmp_path, no_leak):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # tight_layout's warning on a very long label, raised as an error
        with pytest.raises(UserWarning):
            viz.plot_distributions({"x" * 400: [1.0, 2.0]}, tmp_path / "long.png", "y")


def test_equal_ylim_is_refused_before_drawing(tmp_path, no_leak):
    with pytest.raises(ValueError, match="ylim must be two different numbers"):
        viz.plot_distributions({"a": [1.0, 2.0]}, tmp_path / "d.png", "y", ylim=(1, 1))
    assert not (tmp_path / "d.png").exists()


# --------------------------------------------------------------------------- load


def _doctored(tmp_path, rep, change, units=None):
    path = rep.save(tmp_path / "r.json")
    saved = json.loads(path.read_text())
    change(saved)
    path.write_text(json.dumps(saved))
    if units is not None:
        beside = tmp_path / "r.units.json"
        rows = json.loads(beside.read_text())
        units(rows)
        beside.write_text(json.dumps(rows))
    return path


def _set(where, key, value):
    def change(saved):
        (saved if where is None else saved[where])[key] = value

    return change


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda s: s.__setitem__("records", [1, 2]), "record 0 must be a dict of the fields"),
        (lambda s: s.__setitem__("records", [{"layer": "2"}]), "record 0 must be a dict of the fields"),
        (lambda s: s["records"][3].__setitem__("value", "abc"), "record 3's value must be a number"),
        (lambda s: s["records"][0].__setitem__("magnitude", "big"), "record 0's magnitude must be a number"),
        (_set("info", "layers", "abc"), "info's layers must be a non-empty list of names"),
        (_set("info", "transforms", [1]), "info's transforms must be a non-empty list of names"),
        (_set("info", "magnitudes", ["a"]), "info's magnitudes must be a non-empty list of numbers"),
        (_set("info", "magnitudes", 1.0), "info's magnitudes must be a non-empty list of numbers"),
        (_set("info", "magnitudes", []), "info's magnitudes must be a non-empty list of numbers"),
    ],
)
def test_load_names_a_report_file_that_save_did_not_write(rep, tmp_path, change, says):
    path = _doctored(tmp_path, rep, change)
    with pytest.raises(ValueError, match=f"cannot load {path}: not a report that ProbeReport.save wrote.*{says}"):
        ProbeReport.load(path)


@pytest.mark.parametrize(
    ("units", "says"),
    [
        (lambda u: u.__setitem__("units", 3), "it needs a list 'units'"),
        (lambda u: u.__setitem__("units", [{"layer": "2"}]), "row 0 must be a dict of the fields"),
        (lambda u: u["units"][1].__setitem__("values", ["x"]), "row 1's values must be a list of numbers"),
        (lambda u: u["units"][0].__setitem__("values", 2.0), "row 0's values must be a list of numbers"),
    ],
)
def test_load_names_a_per_unit_file_that_save_did_not_write(rep, tmp_path, units, says):
    path = _doctored(tmp_path, rep, lambda s: None, units)
    with pytest.raises(ValueError, match=f"r.units.json: not the per-unit values that ProbeReport.save wrote.*{says}"):
        ProbeReport.load(path)


def test_load_of_a_report_saved_before_by_class_reads_every_record_as_every_inputs(rep, tmp_path):
    def drop_class(saved):
        for r in saved["records"]:
            del r["class"]
        saved["info"].pop("classes")

    loaded = ProbeReport.load(_doctored(tmp_path, rep, drop_class))
    assert set(loaded.table()["class"]) == {None}  # (a KeyError)
    assert loaded.value("inv_augnet", "logits", "Rotate") == rep.value("inv_augnet", "logits", "Rotate")


def test_load_of_save_is_the_report_again(rep, tmp_path):
    loaded = ProbeReport.load(rep.save(tmp_path / "deep" / "er" / "r.json"))
    text = json.loads((tmp_path / "deep" / "er" / "r.json").read_text())  # strict JSON: no NaN token
    assert json.dumps(text, allow_nan=False)
    assert json.dumps(loaded.records, default=str) == json.dumps(rep.records, default=str)
    assert loaded.info == rep.info and loaded.verdict() == rep.verdict()
    assert set(loaded.units) == set(rep.units)
    assert all(torch.equal(loaded.units[k].nan_to_num(7.0), v.nan_to_num(7.0)) for k, v in rep.units.items())


# --------------------------------------------------------------------------- the plots' values


def test_python_floats_are_drawn_as_float64(figures, tmp_path):
    assert viz.real_values([0.1], "v").item() == 0.1
    viz.plot_distributions({"big": [1e40, 2e40, 3e40], "tiny": [1e-50, 3e-50, 2e-50]}, tmp_path / "d.png", "y")
    texts = [t.get_text() for t in figures[0].axes[0].texts]
    assert not any("inf" in t for t in texts)  # 1e40 was float32's inf: "n/a"-like "inf" marks, no violin
    lo, hi = figures[0].axes[0].get_ylim()
    assert hi > 1e40 and lo < 0.5e40


@pytest.mark.parametrize(
    ("key", "value"),
    [("magnitude", ["a", "b"]), ("median", "x"), ("median", None), ("p75", "high")],
)
def test_invariance_curves_refuse_what_is_not_a_number(key, value, tmp_path, no_leak):
    curve = {"magnitude": [0.5, 1.0], "summary": [{"median": 0.9, "p25": 0.8, "p75": 0.95} for _ in range(2)]}
    if key == "magnitude":
        curve["magnitude"] = value
    else:
        for s in curve["summary"]:
            s[key] = value
    with pytest.raises(TypeError, match=f"curve 'c''s {key} must hold real numbers"):
        viz.plot_invariance_curves({"c": curve}, tmp_path / "c.png")
    assert not (tmp_path / "c.png").exists()


_TABLE = {"tasks": ["a", "b"], "layers": ["l1", "l2", "l3"], "values": [[0.6, 0.7, 0.8], [0.5, math.nan, 1.0]]}


@pytest.mark.parametrize(
    ("change", "kwargs", "error", "says"),
    [
        ({"values": [["a"] * 3] * 2}, {}, TypeError, r"table\['values'\] must hold real numbers"),
        ({"values": torch.ones(2, 3, dtype=torch.complex64)}, {}, TypeError, r"table\['values'\] must hold real"),
        ({"values": torch.ones(2, 3, device="meta")}, {}, ValueError, r"table\['values'\] is a tensor on meta"),
        ({"tasks": "ab"}, {}, TypeError, r"table\['tasks'\] must be a list of labels"),
        ({"layers": "l1"}, {}, TypeError, r"table\['layers'\] must be a list of labels"),
        ({}, {"vmin": "a"}, TypeError, "vmin must be a number or None"),
        ({}, {"vmax": [1]}, TypeError, "vmax must be a number or None"),
    ],
)
def test_ranking_heatmap_refuses_before_drawing(change, kwargs, error, says, tmp_path, no_leak):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # complex values were cast to real with a warning
        with pytest.raises(error, match=says):
            plots.plot_ranking_heatmap({**_TABLE, **change}, tmp_path / "r.png", **kwargs)
    assert not (tmp_path / "r.png").exists()


def test_ranking_heatmap_takes_values_with_a_gradient(tmp_path, no_leak):
    values = torch.tensor(_TABLE["values"], requires_grad=True)
    assert plots.plot_ranking_heatmap({**_TABLE, "values": values}, tmp_path / "r.png").exists()


def test_report_heatmap_refuses_a_string_of_labels(tmp_path, no_leak):
    panels = {"m": (torch.ones(2, 1), "paper", "1")}
    with pytest.raises(TypeError, match="layers must be a list of labels"):
        plots.plot_report_heatmap(panels, "ab", ["t"], tmp_path / "h.png")
    with pytest.raises(TypeError, match="transforms must be a list of labels"):
        plots.plot_report_heatmap({"m": (torch.ones(1, 1), "paper", "1")}, ["l"], "t", tmp_path / "h.png")


def test_similarity_distributions_label_a_key_whose_second_item_is_no_number(figures, tmp_path):
    plots.plot_similarity_change_distributions({("rot", "x"): [1.0, 2.0], ("flip", 0.5): [0.5, 1.5]}, tmp_path / "s")
    labels = [t.get_text() for t in figures[0].axes[0].get_xticklabels()]
    assert labels == ["rot x", "flip 0.5"]


def test_layer_importance_takes_a_0d_array_as_its_number(figures, tmp_path):
    viz.plot_layer_importance({"a": np.array(0.3), "b": torch.tensor(0.5), "c": 0.25}, tmp_path / "i.png")
    heights = [p.get_height() for p in figures[0].axes[0].patches]
    assert heights == [0.3, 0.5, 0.25]


# --------------------------------------------------------------------------- what held (checked, kept)


def test_an_input_ignoring_model_is_invariant_and_a_report_is_reproducible():
    class Ignore(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
            self.head = nn.Linear(4, 3)
            self.c = nn.Parameter(torch.randn(16, 3, generator=torch.Generator().manual_seed(1)))

        def forward(self, a):
            return self.head(self.block(self.c[: len(a)] + 0 * a.mean((2, 3))))

    x = torch.rand(16, 3, 16, 16, generator=torch.Generator().manual_seed(0))
    net = Ignore().train()
    first = report(net, x, ["Rotate", "HorizontalFlip"], magnitudes=[0.5, 1.0], lie=False, seed=5)
    assert net.training  # its mode restored
    for t in ("Rotate", "HorizontalFlip"):
        for m in (0.5, 1.0):
            assert first.value("inv_augnet", "logits", t, m) == 1.0
            assert first.value("normalized_variance", "logits", t, m) == 0.0
    again = report(net, x, ["Rotate", "HorizontalFlip"], magnitudes=[0.5, 1.0], lie=False, seed=5)
    assert json.dumps(again.records) == json.dumps(first.records)
