"""Figures of the probes' results; matplotlib is imported only inside each function.

Here lives :func:`plot_ranking_heatmap` (Yan & Huang, Fig. 5), re-exported by
:mod:`augnet.probes.ranking` and :mod:`augnet.probes`; this module imports no
probe module. The equivariance curves are drawn by
:func:`augnet.probes.equivariance.plot_equivariance_curves`. Needs matplotlib
(``pip install "augnet[viz]"``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

__all__ = ["plot_ranking_heatmap"]


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
    """
    from augnet.viz import require_matplotlib, save_figure

    if not isinstance(table, Mapping) or not {"tasks", "layers", "values"} <= set(table):
        raise ValueError("table must be a dict from ranking_table, with 'tasks', 'layers' and 'values'")
    tasks, layers = list(table["tasks"]), list(table["layers"])
    values = torch.as_tensor(table["values"], dtype=torch.float64)
    if values.shape != (len(tasks), len(layers)):
        raise ValueError(f"values must be (tasks, layers) = ({len(tasks)}, {len(layers)}), got {tuple(values.shape)}")
    what = str(table.get("value", "value"))
    finite = values[torch.isfinite(values)]
    if what.endswith("accuracy") and len(finite):
        vmin = min(0.5, float(finite.min())) if vmin is None else vmin
        vmax = 1.0 if vmax is None else vmax

    plt = require_matplotlib()
    grid = values.T.numpy()  # layers down, tasks across
    fig, ax = plt.subplots(figsize=(max(4.0, 0.9 * len(tasks) + 2.5), max(3.0, 0.45 * len(layers) + 1.5)))
    image = ax.imshow(grid, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
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
