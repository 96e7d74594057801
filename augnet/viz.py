"""Plots of learned policies (needs matplotlib: ``pip install "augnet[viz]"``)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["plot_policy_history", "require_matplotlib"]


def require_matplotlib():
    """Import matplotlib with a non-interactive backend, or say how to install it."""
    try:
        import matplotlib
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError('plotting needs matplotlib: pip install "augnet[viz]"') from err
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def plot_policy_history(
    history: dict, names: list[str], path: str | Path, title: str | None = None, layer: int = 0
) -> Path:
    """Plot each transform's weight and magnitude over training, for one layer.

    Args:
        history: as returned by :func:`augnet.training.fit`: ``step`` (list of
            ints) and ``weights``, ``magnitudes`` (per record, per layer, per
            transform).
        names: the layer's transform names, in order.
        path: where to write the PNG.
        title: optional figure title.
        layer: which augmentation layer to plot.

    Returns:
        The path written.
    """
    plt = require_matplotlib()
    steps = history["step"]
    fig, axes = plt.subplots(2, 1, figsize=(7, 5), sharex=True)
    for key, ax, label in (("weights", axes[0], "weight"), ("magnitudes", axes[1], "magnitude")):
        values = list(zip(*(record[layer] for record in history[key]), strict=True))
        for name, series in zip(names, values, strict=True):
            ax.plot(steps, series, label=name)
        ax.set_ylabel(label)
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    axes[0].legend(loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    axes[1].set_xlabel("training step")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
