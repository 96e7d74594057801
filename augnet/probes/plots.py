"""Figures of the probes' results; matplotlib is imported only inside each function.

Here live :func:`plot_neuron_invariance` (Zaidi et al., Figs. 3-4, 8-9),
:func:`plot_ranking_heatmap` (Yan & Huang, Fig. 5),
:func:`plot_similarity_change_distributions` (Bouchacourt et al., Fig. 3A) and
:func:`plot_report_heatmap` (the panels of :meth:`augnet.probes.report.ProbeReport.heatmap`),
:func:`plot_report_units` (the units of :meth:`augnet.probes.report.ProbeReport.units_plot`),
each re-exported by its probe's module (:mod:`augnet.probes.neurons`,
:mod:`augnet.probes.ranking`, :mod:`augnet.probes.similarity`) and by
:mod:`augnet.probes`; this module imports no probe module. The equivariance
curves are drawn by :func:`augnet.probes.equivariance.plot_equivariance_curves`.
Needs matplotlib (``pip install "augnet[viz]"``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch

from augnet._checks import is_real

__all__ = [
    "PLOTTED",
    "plot_neuron_invariance",
    "plot_ranking_heatmap",
    "plot_report_heatmap",
    "plot_report_units",
    "plot_similarity_change_distributions",
]

#: What :func:`plot_neuron_invariance` can draw: the coefficients among units (Figs. 3b-c, 4), the size of
#: each unit's active set, or how many units each input activates (Fig. 3a).
PLOTTED = ("invariance", "n_active", "units_per_input")


# --------------------------------------------------------------------------- per-unit invariance (Zaidi et al.)


def plot_neuron_invariance(
    distributions: Mapping,
    path,
    quantity: str = "invariance",
    group: str = "all",
    title: str | None = None,
) -> Path:
    """Violin plots of a per-unit (or per-input) quantity, one violin per layer or condition (Zaidi et al., Figs. 3-4).

    Needs matplotlib (``pip install "augnet[viz]"``), imported only here.

    Args:
        distributions: ``{label: neuron_invariance output}`` (e.g. one per
            training condition, or seen / unseen), ``{label: values}``, or the
            output of :func:`layerwise_invariance` (one violin per layer, from
            ``group``).
        path: where to write the PNG.
        quantity: ``"invariance"`` (``I_k`` among units, NaN units left out),
            ``"n_active"`` (images that activate each unit) or
            ``"units_per_input"`` (units active per image), see ``PLOTTED``.
        group: for a :func:`layerwise_invariance` result, ``"all"``, ``"seen"``
            or ``"unseen"``.
        title: optional figure title.

    Returns:
        The path written.
    """
    if quantity not in PLOTTED:
        raise ValueError(f"quantity must be one of {PLOTTED}, got {quantity!r}")
    if not isinstance(distributions, Mapping) or not distributions:
        raise ValueError(
            "distributions must be a non-empty dict {label: neuron_invariance output or values}, got "
            f"{_what(distributions)}"
        )
    if "groups" in distributions and "layers" in distributions:
        if not isinstance(group, str) or group not in distributions["groups"]:  # a list was unhashable
            raise ValueError(f"group must be one of {sorted(distributions['groups'])}, got {group!r}")
        distributions = distributions["groups"][group]
    values = {}
    for label, entry in distributions.items():
        if isinstance(entry, Mapping):
            if quantity not in entry:
                raise ValueError(f"{label!r} has no {quantity!r}: pass neuron_invariance outputs")
            entry = entry[quantity]
        values[label] = entry
    from augnet.viz import plot_distributions

    labels = {
        "invariance": "invariance coefficient",
        "n_active": "inputs per unit",
        "units_per_input": "units per input",
    }
    ylim = (-0.02, 1.02) if quantity == "invariance" else None
    return plot_distributions(values, path, labels[quantity], kind="violin", title=title, ylim=ylim)


# --------------------------------------------------------------------------- ranking (Yan & Huang)


def plot_ranking_heatmap(
    table: Mapping,
    path,
    title: str | None = None,
    annotate: bool = True,
    cmap: str = "viridis",
    vmin: float | None = None,
    vmax: float | None = None,
):
    """Heatmap of a :func:`ranking_table`: layers down, tasks across, as in Yan & Huang's Fig. 5.

    Needs matplotlib (``pip install "augnet[viz]"``), imported only here.

    Args:
        table: from :func:`ranking_table`.
        path: where to write the PNG.
        title: optional figure title.
        annotate: write each cell's value in it (NaN cells are left blank).
        cmap: a matplotlib colour map.
        vmin, vmax: the colour scale; for accuracies it defaults to
            [min(0.5, lowest), 1] (chance at the bottom), otherwise to the data's range.

    Returns:
        The path written.

    Raises:
        TypeError, ValueError: before any figure is made: ``table`` not a :func:`ranking_table`, its tasks or
            layers a string, values that are not real numbers (strings, complex) or not (tasks, layers),
            ``vmin`` / ``vmax`` not numbers, an unknown ``cmap``, naming them.
    """
    from augnet.viz import require_matplotlib, save_figure

    if not isinstance(table, Mapping) or not {"tasks", "layers", "values"} <= set(table):
        raise ValueError("table must be a dict from ranking_table, with 'tasks', 'layers' and 'values'")
    tasks, layers = _labels(table["tasks"], "table['tasks']"), _labels(table["layers"], "table['layers']")
    values = _real_values(table["values"], "table['values']")  # (strings: torch's error; complex: cast to real)
    for name, limit in (("vmin", vmin), ("vmax", vmax)):  # (matplotlib's error came with the figure open)
        if limit is not None and not is_real(limit):
            raise TypeError(f"{name} must be a number or None, got {limit!r}")
    if values.shape != (len(tasks), len(layers)):
        raise ValueError(f"values must be (tasks, layers) = ({len(tasks)}, {len(layers)}), got {tuple(values.shape)}")
    what = str(table.get("value", "value"))
    finite = values[torch.isfinite(values)]
    if what.endswith("accuracy") and len(finite):
        vmin = min(0.5, float(finite.min())) if vmin is None else vmin
        vmax = 1.0 if vmax is None else vmax

    plt = require_matplotlib()
    colormap = _colormap(plt, cmap)  # before the figure: an unknown name left it open in pyplot
    grid = values.T.numpy()  # layers down, tasks across
    fig, ax = plt.subplots(figsize=(max(4.0, 0.9 * len(tasks) + 2.5), max(3.0, 0.45 * len(layers) + 1.5)))
    image = ax.imshow(grid, cmap=colormap, vmin=vmin, vmax=vmax, aspect="auto")
    ax.set_xticks(range(len(tasks)), tasks, rotation=30, ha="right")
    ax.set_yticks(range(len(layers)), layers)
    ax.set_xlabel("task")
    ax.set_ylabel("layer")
    fig.colorbar(image, ax=ax, label=what.replace("_", " "))
    if annotate:
        lo, hi = image.get_clim()
        for i in range(len(layers)):
            for j in range(len(tasks)):
                v = float(grid[i, j])
                if math.isfinite(v):
                    dark = (v - lo) / (hi - lo) < 0.5 if hi > lo else True
                    ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=8, color="w" if dark else "k")
    if title:
        ax.set_title(title)
    return save_figure(fig, path)


# --------------------------------------------------------------------------- similarity change (Bouchacourt et al.)


def plot_similarity_change_distributions(
    distributions: Mapping,
    path,
    statistic: str = "percent_change",
    title: str | None = None,
    kind: str = "box",
):
    """Box (or violin) plots of per-class similarity changes, one per transformation (Bouchacourt et al., Fig. 3A).

    Needs matplotlib (``pip install "augnet[viz]"``), imported only here.

    Args:
        distributions: from :func:`similarity_change_distributions`, or any
            ``{label: values}`` with 1-D values (NaN values are left out; infinite ones are counted on the
            figure, as :func:`augnet.viz.plot_distributions` marks them).
        path: where to write the PNG.
        statistic: the axis label (the statistic the values hold).
        title: optional figure title.
        kind: ``"box"`` or ``"violin"``.

    Returns:
        The path written.
    """
    if not isinstance(distributions, Mapping) or not distributions:
        raise ValueError(
            f"distributions must be a non-empty dict from similarity_change_distributions, got {_what(distributions)}"
        )
    values = {  # (a key whose second item is no number, ("rot", "x"), met a raw format error)
        _pair_label(key) if isinstance(key, tuple) and len(key) == 2 else str(key): (
            entry["values"] if isinstance(entry, Mapping) else entry
        )
        for key, entry in distributions.items()
    }
    from augnet.viz import plot_distributions

    return plot_distributions(values, path, f"{statistic} per class", kind=kind, title=title, zero_line=True)


# --------------------------------------------------------------------------- the report (every measure)


def plot_report_heatmap(panels: Mapping, layers, transforms, path, title: str | None = None, cmap: str = "viridis"):
    """Layers down, transforms across, one panel per measure: the figure of a probe report.

    Needs matplotlib (``pip install "augnet[viz]"``), imported only here.

    Args:
        panels: ``{panel title: (values (layers, transforms), paper, the value of an invariant layer)}``.
        layers, transforms: the row and column labels.
        path: where to write the PNG.
        title: optional figure title.
        cmap: a matplotlib colour map or its name, reversed for the measures an invariant layer has at 0 (so that
            bright means closer to invariant in every panel); NaN cells are grey and marked n/a, infinite
            ones take the colour map's end and are marked inf; a measure invariant at 0 that takes both signs
            (``alignment``) is coloured by its absolute value, so that bright is near 0.

    Returns:
        The path written.

    Raises:
        TypeError, ValueError: before any figure is made: ``panels`` empty or not a dict, a panel that is not
            ``(values, paper, invariant value)``, values that are not real numbers or not (layers, transforms),
            ``layers`` or ``transforms`` a string (not a list of labels), an unknown ``cmap``, naming the panel
            or the argument.
    """
    from augnet.viz import require_matplotlib, save_figure

    if not isinstance(panels, Mapping) or not panels:
        raise ValueError(
            f"panels must be a non-empty {{title: (values, paper, invariant value)}} dict, got {_what(panels)}"
        )
    layers = [str(v) for v in _labels(layers, "layers")]
    transforms = [str(v) for v in _labels(transforms, "transforms")]
    grids = {}  # every panel checked before the figure is made: an error left it open in pyplot
    for name, entry in panels.items():
        if isinstance(entry, (str, bytes)) or not isinstance(entry, Sequence) or len(entry) != 3:
            raise ValueError(f"panel {name!r} must be (values, paper, invariant value), got {entry!r:.80}")
        grid = _real_values(entry[0], f"panel {name!r}")
        if grid.shape != (len(layers), len(transforms)):
            raise ValueError(
                f"panel {name!r}: values must be (layers, transforms) = ({len(layers)}, {len(transforms)}), "
                f"got {tuple(grid.shape)}"
            )
        grids[name] = grid
    plt = require_matplotlib()
    base = _colormap(plt, cmap)
    cols = min(4, len(panels))
    rows = math.ceil(len(panels) / cols)
    width = max(2.6, 0.9 * len(transforms) + 2.2)
    height = max(2.2, 0.32 * len(layers) + 1.4)
    fig, axes = plt.subplots(rows, cols, figsize=(cols * width, rows * height), squeeze=False)
    for ax, (name, (_, paper, invariant)) in zip(axes.flat, panels.items(), strict=False):
        # Bright is closer to invariant: the scale runs backwards for the measures an invariant layer has at 0.
        # (base.reversed(), not the name + "_r": "viridis_r" became "viridis_r_r", a colour map object its repr)
        colormap = (base if str(invariant) in ("1", "-", "1/G") else base.reversed()).with_extremes(bad="0.85")
        grid = grids[name]
        drawn, texts, lo, hi, signed = _heat_cells(grid, str(invariant))
        image = ax.imshow(drawn.numpy(), cmap=colormap, vmin=lo, vmax=hi if hi > lo else lo + 1e-12, aspect="auto")
        ax.set_xticks(range(len(transforms)), transforms, rotation=30, ha="right", fontsize=8)
        ax.set_yticks(range(len(layers)), layers, fontsize=8)
        ax.set_title(f"{name}\n{paper}; invariant: {invariant}{'; colour: |value|' if signed else ''}", fontsize=8)
        for i in range(len(layers)):
            for j in range(len(transforms)):
                v = float(drawn[i, j])
                level = 0.0 if hi <= lo else min(max((v - lo) / (hi - lo), 0.0), 1.0)
                dark = math.isfinite(v) and (level < 0.5 if str(invariant) in ("1", "-", "1/G") else level > 0.5)
                ax.text(j, i, texts[i][j], ha="center", va="center", fontsize=7, color="w" if dark else "k")
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    if title:
        fig.suptitle(title, fontsize=10)
    return save_figure(fig, path)


def _colormap(plt, cmap):
    """The colour map ``cmap`` names (or is), or the ValueError naming ``cmap`` (matplotlib's named ``name``)."""
    try:
        return plt.get_cmap(cmap)
    except (ValueError, TypeError) as err:
        raise ValueError(f"cmap must be a matplotlib colour map or its name, got {cmap!r}: {err}") from None


def _labels(labels, name: str) -> list:
    """Row or column labels (any iterable; a tensor or array of values too) as a list, else the TypeError naming
    ``name``: a string is one label, not a list of them (``"ab"`` was read as the labels ``a`` and ``b``)."""
    if isinstance(labels, (str, bytes)) or not hasattr(labels, "__iter__"):
        raise TypeError(f"{name} must be a list of labels, got {type(labels).__name__}: {labels!r:.80}")
    return list(labels)


def _pair_label(key: tuple) -> str:
    """The label of a ``(transform, magnitude)`` key: the magnitude with ``:g`` where it is a number (a real
    number, a NumPy one, a 0-d real tensor), else as it prints."""
    name, value = key
    if isinstance(value, torch.Tensor):
        number = value.dim() == 0 and value.device.type != "meta" and not value.is_complex()
    else:
        number = is_real(value)
    return f"{name} {value:g}" if number else f"{name} {value}"


def _what(value) -> str:
    """How an error names a bad container argument: its type, or that it is empty."""
    return f"an empty {type(value).__name__}" if isinstance(value, Mapping) else type(value).__name__


def _real_values(values, name: str) -> torch.Tensor:
    """``values`` as a float64 tensor on the CPU, or the error naming ``name`` (as :func:`augnet.viz.plot_distributions`
    refuses them: :func:`augnet.viz.real_values`)."""
    from augnet.viz import real_values

    return real_values(values, name)


def _heat_cells(grid: torch.Tensor, invariant: str) -> tuple[torch.Tensor, list[list[str]], float, float, bool]:
    """What a heatmap panel draws: ``(colour values, cell texts, vmin, vmax, coloured by |value|)``.

    NaN stays NaN (grey, "n/a"); an infinite value is drawn as the finite values' end on its side, "inf";
    a measure invariant at 0 with negative values is coloured by its absolute value (its text keeps the sign).
    """
    texts = [["n/a" if math.isnan(v) else f"{v:.3g}" for v in row] for row in grid.tolist()]
    signed = invariant == "0" and bool((grid[torch.isfinite(grid)] < 0).any())
    shown = grid.abs() if signed else grid.clone()
    finite = shown[torch.isfinite(shown)]
    lo, hi = (float(finite.min()), float(finite.max())) if len(finite) else (0.0, 1.0)
    if invariant == "0.5":  # a ranking accuracy: chance (0.5) and below are the bright end
        lo, hi = 0.5, max(hi, 0.5)
    shown = torch.where(shown == math.inf, hi, torch.where(shown == -math.inf, lo, shown))
    return shown, texts, lo, hi, signed


def plot_report_units(panels: Mapping, path, ylabel: str, title: str | None = None):
    """One panel per transform: each layer's per-unit values as points, with their median as a bar.

    Needs matplotlib (``pip install "augnet[viz]"``), imported only here.

    Args:
        panels: ``{panel title: {layer: (U,) values}}`` (NaN values are left out; infinite ones are
            drawn at the top of the panel, as a triangle).
        path: where to write the PNG.
        ylabel: the measure's name and its invariant value.
        title: optional figure title.

    Returns:
        The path written.

    Raises:
        TypeError, ValueError: before any figure is made: ``panels`` empty or not a dict, a panel that is not a
            dict, values that are not real numbers (or a tensor on meta), naming the panel and the layer.
    """
    from augnet.viz import require_matplotlib, save_figure

    if not isinstance(panels, Mapping) or not panels:
        raise ValueError(f"panels must be a non-empty {{title: {{layer: values}}}} dict, got {_what(panels)}")
    read = {}  # every value checked before the figure is made: an error left it open in pyplot
    for name, layers in panels.items():
        if not isinstance(layers, Mapping):
            raise TypeError(f"panel {name!r} must be a dict {{layer: values}}, got {type(layers).__name__}")
        read[name] = {
            layer: _real_values(values, f"panel {name!r}, layer {layer!r}").flatten()
            for layer, values in layers.items()
        }
    panels = read
    plt = require_matplotlib()
    cols = min(3, len(panels))
    rows = math.ceil(len(panels) / cols)
    width = max(3.0, 0.8 * max(len(v) for v in panels.values()) + 1.6)
    fig, axes = plt.subplots(rows, cols, figsize=(cols * width, rows * 3.0), squeeze=False)
    for ax, (name, layers) in zip(axes.flat, panels.items(), strict=False):
        finite_all = [v[torch.isfinite(v)] for v in layers.values()]
        finite_all = torch.cat(finite_all) if finite_all else torch.zeros(0)
        top = float(finite_all.max()) if len(finite_all) else 1.0
        for i, v in enumerate(layers.values()):
            v = v[~torch.isnan(v)]
            finite, infinite = v[torch.isfinite(v)], int(torch.isinf(v).sum())
            jitter = (torch.rand(len(finite), generator=torch.Generator().manual_seed(i)) - 0.5) * 0.5
            ax.scatter((i + jitter).numpy(), finite.numpy(), s=6, alpha=0.5)
            if len(finite):
                median = float(finite.median())
                ax.plot([i - 0.3, i + 0.3], [median, median], color="k", lw=1.5)
            if infinite:
                ax.scatter([i], [top], marker="^", color="r", s=20)
        ax.set_xticks(range(len(layers)), [str(k) for k in layers], rotation=30, ha="right", fontsize=8)
        ax.set_title(name, fontsize=9)
        ax.set_ylabel(ylabel, fontsize=8)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    if title:
        fig.suptitle(title, fontsize=10)
    return save_figure(fig, path)
