"""What augnet says, and where: infinite values among a distribution's finite ones marked on the figure (they were
dropped without a word), the command line's diagnostics on stderr (a missing plot, options not used), a NaN in the
versus table shown n/a (it printed "nan ± nan"), and the features docstring true of any model."""

import math
import sys
import types

import pytest
import torch
from helpers import probe_model_file
from torch import nn

import augnet.cli
import augnet.experiments.demo
from augnet.cli import main
from augnet.experiments import versus as V
from augnet.probes.features import LOGITS, features

# --------------------------------------------------------------------------- plot_distributions: infinities


def _texts(ax) -> dict:
    """``{(position, top/bottom/middle): text}`` of the marks written on the axes."""
    where = {"top": "top", "bottom": "bottom", "center": "middle"}
    return {(round(t.get_position()[0]), where[t.get_va()]): t.get_text() for t in ax.texts}


@pytest.mark.parametrize("kind", ["violin", "box"])
def test_infinite_values_among_finite_ones_are_counted_on_the_figure(figures, tmp_path, kind):
    """Mended: +/-inf among finite values vanished from the figure without a word (an all-NaN layer said n/a)."""
    from augnet.viz import plot_distributions

    values = {"conv1": [0.1, math.inf, 0.4, 0.2, math.inf], "conv2": [0.5, -math.inf, 0.7, math.nan],
              "both": torch.tensor([0.3, math.inf, -math.inf, 0.9]), "plain": [0.2, 0.6], "none": [math.nan],
              "loud": [math.inf]}  # fmt: skip
    plot_distributions(values, tmp_path / "d.png", ylabel="score", kind=kind)
    (ax,) = figures[0].axes
    assert _texts(ax) == {(1, "top"): "+inf ×2", (2, "bottom"): "-inf ×1", (3, "top"): "+inf ×1",
                          (3, "bottom"): "-inf ×1", (5, "middle"): "n/a", (6, "middle"): "inf"}  # fmt: skip
    marks = [t for t in ax.texts if t.get_va() != "center"]  # inside the axes, at the end of their sign
    assert sorted(t.get_position()[1] for t in marks) == [0.02, 0.02, 0.98, 0.98]
    assert all(t.get_transform() == ax.get_xaxis_transform() for t in marks)
    if kind == "violin":  # the violins are of the finite values: medians 0.2, 0.6, 0.6 and 0.4
        medians = ax.collections[-1].get_segments()
        got = [(float(s[0][0] + s[1][0]) / 2, float(s[0][1])) for s in medians]
        want = [(1.0, 0.2), (2.0, 0.6), (3.0, 0.6), (4.0, 0.4)]
        assert got == [(x, pytest.approx(y)) for x, y in want]


def test_finite_distributions_get_no_mark(figures, tmp_path):
    """What had no infinity is drawn as before: no text on the axes."""
    from augnet.viz import plot_distributions

    plot_distributions({"a": [0.1, 0.2, math.nan], "b": [0.3, 0.4]}, tmp_path / "d.png", ylabel="score")
    assert len(figures[0].axes[0].texts) == 0


def test_similarity_change_plots_count_infinite_changes_too(figures, tmp_path):
    """plot_similarity_change_distributions draws through plot_distributions: its infinite changes are counted."""
    from augnet.probes.plots import plot_similarity_change_distributions

    changes = {("Rotate", 0.5): {"values": [1.0, 2.0, math.inf]}, ("Scale", 0.5): {"values": [-1.0, 0.5]}}
    plot_similarity_change_distributions(changes, tmp_path / "s.png")
    assert _texts(figures[0].axes[0]) == {(1, "top"): "+inf ×1"}


# --------------------------------------------------------------------------- the command line: stderr


def _no_matplotlib(monkeypatch):
    """``import matplotlib`` (and of its submodules, loaded or not by earlier tests) raises ImportError."""
    for name in ["matplotlib", *(m for m in sys.modules if m.startswith("matplotlib."))]:
        monkeypatch.setitem(sys.modules, name, None)


def test_figure_path_without_matplotlib_says_how_to_install_it(monkeypatch, tmp_path):
    """Mended: the check of a figure's path, before drawing, raised "No module named 'matplotlib'" (augnet probe
    said so), not the way to install it."""
    from augnet.viz import figure_path

    _no_matplotlib(monkeypatch)
    with pytest.raises(ImportError, match=r'^plotting needs matplotlib: pip install "augnet\[viz\]"$'):
        figure_path(tmp_path / "h.png")


@pytest.mark.parametrize("per_unit", [False, True])
def test_probe_without_matplotlib_says_so_on_stderr(tmp_path, monkeypatch, capsys, per_unit):
    """Mended: "no heatmap: ..." went to stdout, among the results (and said nothing of units.png)."""
    argv = probe_model_file(tmp_path, monkeypatch, f"output_mends_noplot_{int(per_unit)}")
    _no_matplotlib(monkeypatch)
    assert main([*argv, "--out", str(tmp_path / "out"), *(["--per-unit"] if per_unit else [])]) == 0
    captured = capsys.readouterr()
    assert "no heatmap" not in captured.out and "plotting needs" not in captured.out
    said = "no heatmap nor units plot" if per_unit else "no heatmap"
    assert f"augnet probe: {said}: plotting needs matplotlib" in captured.err
    assert "saved " in captured.out and "heatmap.png" not in captured.out  # the results, on stdout as before


def test_demo_without_matplotlib_says_so_on_stderr(tmp_path, monkeypatch, capsys):
    """Mended: "saved demo.json; no plot: ..." put the missing plot's reason on stdout."""
    history = {"step": [0], "weights": [[[0.5, 0.5]]], "magnitudes": [[[0.25, 0.75]]]}  # checked, then no plot
    result = types.SimpleNamespace(policy="policy", test_accuracy=0.5, seconds=1.0, history=history,
                                   names=["Rotate", "ShearX"], to_json=lambda: {"accuracy": 0.5})  # fmt: skip
    monkeypatch.setattr(augnet.experiments.demo, "run_demo", lambda config, progress: result)
    monkeypatch.setattr(augnet.cli, "build_extension_first", lambda: None)
    _no_matplotlib(monkeypatch)
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), "--epochs", "1", "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert "no plot" not in captured.out and "plotting needs" not in captured.out
    assert f"saved {out / 'demo.json'}\n" in captured.out
    assert captured.err == 'augnet demo: no plot: plotting needs matplotlib: pip install "augnet[viz]"\n'
    assert sorted(p.name for p in out.iterdir()) == ["demo.json"]


def test_bench_model_names_the_options_it_does_not_use_on_stderr(capsys, tmp_path):
    """Mended: the notice went to stdout, with the cost on paper; augnet probe's "not used" notice is on stderr."""
    assert main(["bench", "--model", "h200", "--batch-size", "256", "--out", str(tmp_path / "x")]) == 0
    captured = capsys.readouterr()
    assert "not used" not in captured.out and "h200" in captured.out.lower()
    assert captured.err.startswith("augnet bench: --model prints the cost on paper")
    assert captured.err.endswith("not used: --batch-size --out\n") and not (tmp_path / "x").exists()


# --------------------------------------------------------------------------- the versus table


def _summary(invariance):
    cell = {"accuracy": [0.625, 0.125, 2], "accuracy_tta": [0.75, 0.0, 2], "accuracy_1": [0.5, 0.25, 2],
            "invariance": invariance, "train_cpu_seconds": [2.0, 0.0, 2]}  # fmt: skip
    return {"digits": {"small": {"none": cell}}}


def test_a_nan_in_the_versus_table_is_n_a():
    """Mended: a NaN invariance (a model whose logits are not finite) printed "nan ± nan"."""
    table = V.table_markdown(_summary([math.nan, math.nan, 2]), "t")
    assert "| none | 0.625 ± 0.125 | 0.750 ± 0.000 | 0.500 ± 0.250 | – | n/a | 2.0 |" in table
    assert "nan" not in table


def test_finite_figures_of_the_versus_table_are_unchanged():
    table = V.table_markdown(_summary([0.8125, 0.0625, 2]), "t")
    assert table.split("\n") == [
        "## t", "", "### digits, small", "",
        "| method | accuracy | with TTA (4) | one copy | shifted | invariance | train CPU s |",
        "|---|---|---|---|---|---|---|",
        "| none | 0.625 ± 0.125 | 0.750 ± 0.000 | 0.500 ± 0.250 | – | 0.812 ± 0.062 | 2.0 |", "",
    ]  # fmt: skip


# --------------------------------------------------------------------------- features' docstring


def test_features_says_what_logits_are_for_any_model():
    """Mended: the docstring called "logits" the activations before the final softmax, for any model; for a model
    that is not an AugNet they are its output as it is, probabilities included."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 2), nn.Softmax(dim=1))
    got = features(net, torch.rand(4, 3), [LOGITS, "output"])
    assert torch.equal(got[LOGITS], got["output"]) and torch.allclose(got[LOGITS].sum(1), torch.ones(4))
    doc = " ".join(features.__doc__.split())
    assert "the activations before the final softmax" not in doc
    assert 'for any other model (one that holds an AugNet inside it too) it is the same as ``"output"``' in doc
    assert "probabilities or any other output are read as they are" in doc


def test_the_invariance_rule_skips_a_method_whose_invariance_is_nan_and_says_so():
    from augnet.experiments import versus_rules as VR

    def cell(acc, inv):
        return {"accuracy": [acc, 0.01, 5], "invariance": [inv, 0.0, 5]}

    nan = float("nan")
    summary = {"digits": {"small": {"none": cell(0.90, nan), "crop": cell(0.91, 0.5), "augnet": cell(0.94, 0.8)}}}
    line = next(ln for ln in VR.check_rules(summary).split("\n") if ln.startswith("3 "))
    assert (
        line
        == "3 digits small: AugNet's invariance 0.800 vs next crop 0.500: MET (+0.3000) (skipped, invariance NaN: none)"
    )
    summary["digits"]["small"]["augnet"] = cell(0.94, nan)
    line = next(ln for ln in VR.check_rules(summary).split("\n") if ln.startswith("3 "))
    assert line == "3 digits small: NOT MET, AugNet's invariance is NaN (skipped, invariance NaN: none)"
    summary["digits"]["small"] = {"none": cell(0.90, nan), "augnet": cell(0.94, 0.8)}
    line = next(ln for ln in VR.check_rules(summary).split("\n") if ln.startswith("3 "))
    assert line == "3 digits small: NOT MET, no other method's invariance is defined (skipped, invariance NaN: none)"
