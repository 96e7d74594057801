"""Plots of learned policies (needs matplotlib: ``pip install "augnet[viz]"``)."""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from augnet._checks import array_number, as_values, folder_problem, is_int, is_real, user_path

__all__ = [
    "plot_distributions",
    "plot_invariance_curves",
    "plot_layer_importance",
    "plot_policy_history",
    "require_matplotlib",
]


def require_matplotlib():
    """Import matplotlib with a non-interactive backend, or say how to install it."""
    try:
        import matplotlib
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError('plotting needs matplotlib: pip install "augnet[viz]"') from err
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def figure_path(path: str | Path) -> Path:
    """The file a figure goes to: ``path`` (a leading ``~`` the home folder), with ``.png`` added where it has no
    suffix (what matplotlib would add), checked before anything is drawn; its folder is not created here.

    Raises:
        TypeError: ``path`` is not a str or a path-like object (``None``), naming it.
        ValueError: ``path`` (or the file with ``.png`` added) is an existing directory, its suffix is no
            format matplotlib writes (``.png``, ``.pdf``, ``.svg``, ...; a name ending in a dot, ``fig.``, has an
            empty one), or its folder cannot be made or written (a file stands where it or a folder above it would
            go), naming it.
        ImportError: no matplotlib, saying how to install it (as :func:`require_matplotlib` does).
    """
    given = file_path(path)
    if given.is_dir():
        raise ValueError(f"the figure path {given} is an existing directory; give a file name, e.g. {given / 'x.png'}")
    if not given.suffix and given.name.endswith(".") and given.name.strip("."):  # "fig.": it wrote "fig..png"
        raise ValueError(f"the figure path {given} ends in a dot, an empty suffix: name the format (e.g. "
                         f"{given.name.rstrip('.')}.png), or give no suffix for .png")  # fmt: skip
    path = given if given.suffix else given.with_name(given.name + ".png")
    if path.is_dir():
        raise ValueError(f"the figure path {path} is an existing directory")
    try:
        from matplotlib.figure import Figure
    except ImportError as err:  # it was "No module named 'matplotlib'", without the way to install it
        raise ImportError('plotting needs matplotlib: pip install "augnet[viz]"') from err

    formats = Figure().canvas.get_supported_filetypes()
    if path.suffix[1:].lower() not in formats:
        raise ValueError(f"cannot write a figure as {path.suffix!r} ({path}); the formats are {sorted(formats)}")
    problem = folder_problem(path.parent, "folder", "figure")  # (the drawn figure met a FileExistsError)
    if problem:
        raise ValueError(f"cannot write the figure {path}: {problem}")
    return path


def file_path(path, name: str = "path") -> Path:
    """``path`` as a :class:`~pathlib.Path`, ``~`` the home folder (:func:`augnet._checks.user_path`)."""
    return user_path(path, name)


def save_figure(fig, path: str | Path) -> Path:
    """Lay out ``fig``, write it to ``path`` (creating the folder) and close it; return the file written.

    A path without a suffix gets ``.png`` (what matplotlib would add), so the path returned is the file's.
    Its checks (:func:`figure_path`) come first: a refused path leaves no folder behind. ``fig`` is closed
    whatever happens, an error too.
    """
    import matplotlib.pyplot as plt

    try:  # closed whatever fails (a bad path, a warning raised as an error, the disk): it was left open in pyplot
        path = figure_path(path)
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=120)
    finally:
        plt.close(fig)
    return path


def _check_items(name: str, items) -> None:
    """The TypeError / ValueError of a plot's ``{label: data}`` argument that is not a dict or is empty."""
    if not isinstance(items, dict):
        raise TypeError(f"{name} must be a dict {{label: ...}}, got {type(items).__name__}")
    if not items:  # an empty figure (and a legend warning) was written
        raise ValueError(f"{name} is empty: nothing to plot")


def _check_limits(name: str, limits) -> tuple:
    """Axis limits as two finite numbers (a tensor's or an array's as Python numbers: matplotlib warned that it
    would stop taking them), or the TypeError / ValueError (matplotlib's came after drawing)."""
    limits = as_values(limits, name)  # a NumPy array or a tensor of two numbers: its values
    if isinstance(limits, (str, bytes)) or not isinstance(limits, (tuple, list)) or len(limits) != 2:
        raise TypeError(f"{name} must be two numbers (low, high), got {limits!r}")
    if not all(is_real(v) and math.isfinite(v) for v in limits):
        raise ValueError(f"{name} must be two finite numbers (low, high), got {limits!r}")
    if limits[0] == limits[1]:  # (matplotlib warned, with the figure open, and widened them)
        raise ValueError(f"{name} must be two different numbers (low, high), got {limits!r}")
    return tuple(limits)


@contextlib.contextmanager
def _closed_on_error(fig) -> Iterator[None]:
    """Close ``fig`` if drawing it fails (it was left open in pyplot, one more figure at each failing call)."""
    try:
        yield
    except BaseException:
        import matplotlib.pyplot as plt

        plt.close(fig)
        raise


def _plottable(values, name: str):
    """``values`` checked as real numbers (:func:`real_values`, naming ``name``: strings were drawn as categories,
    ``None`` as a gap, without a word) and as matplotlib draws them: a tensor detached on the CPU and a list holding
    tensors as Python numbers (matplotlib's ``numpy()`` failed on one with a gradient); anything else as given."""
    checked = real_values(values, name)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(values, torch.Tensor):
        return values.detach().cpu()
    if isinstance(values, (list, tuple)) and any(torch is not None and isinstance(v, torch.Tensor) for v in values):
        return checked.tolist()
    return values


def real_values(values, name: str):
    """``values`` (a tensor, an array, nested lists of numbers) as a float64 tensor on the CPU, or the error naming
    ``name``: a TypeError for what holds no real numbers (strings, complex numbers), a ValueError for a tensor on
    meta (it holds no values). Python floats are read as float64 (torch's default float32 made 1e40 infinite and
    1e-50 zero); a tensor's or an array's values are exact in float64 whatever their dtype."""
    import torch

    if isinstance(values, torch.Tensor) and values.device.type == "meta":
        raise ValueError(f"{name} is a tensor on meta, which holds no values")
    try:
        v = torch.as_tensor(values)
        if v.is_floating_point() and v.dtype != torch.float64 and not hasattr(values, "dtype"):  # Python floats
            v = torch.as_tensor(values, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        raise TypeError(f"{name} must hold real numbers, got {values!r:.80}") from None
    if v.is_complex():
        raise TypeError(f"{name} must hold real numbers, got dtype {v.dtype}")
    return v.detach().to("cpu", torch.float64)


def plot_distributions(
    distributions: dict,
    path: str | Path,
    ylabel: str,
    kind: str = "violin",
    title: str | None = None,
    ylim: tuple[float, float] | None = None,
    zero_line: bool = False,
) -> Path:
    """One box or violin per labelled 1-D distribution of its finite values (NaN values left out).

    A distribution with no finite value (all NaN, say a layer whose score is undefined for every unit, or
    empty) keeps its place and its label, marked ``n/a`` (``inf``, ``-inf`` or ``±inf`` when the values it has
    are infinite), as the other plots mark a value they cannot draw: it does not vanish from the figure.
    Infinite values among finite ones have no place on the axis either, and are not dropped without a word:
    their count is written at the top (``+inf ×k``) or the bottom (``-inf ×k``) of their distribution's place,
    and the box or violin is of its finite values.

    Args:
        distributions: ``{label: values}``; values are anything ``torch.as_tensor`` reads.
        path: where to write the PNG.
        ylabel: the axis label.
        kind: ``"violin"`` (median marked) or ``"box"``.
        title: optional figure title.
        ylim: optional y-axis limits.
        zero_line: draw a dashed line at 0.

    Returns:
        The path written.

    Raises:
        TypeError, ValueError: ``distributions`` not a dict, values that are not real numbers (strings, ``None``,
            complex) or that hold no value (a tensor on meta), naming the label; no distribution with a finite
            value; an unknown ``kind``; ``ylim`` not two different finite numbers; before anything is drawn.
    """
    import torch

    if kind not in ("box", "violin"):
        raise ValueError(f"kind must be 'box' or 'violin', got {kind!r}")
    if not isinstance(distributions, dict):
        raise TypeError(f"distributions must be a dict {{label: values}}, got {type(distributions).__name__}")
    if ylim is not None:
        ylim = _check_limits("ylim", ylim)
    names, series, missing = [], [], {}  # missing: {position: mark} of the distributions with no finite value
    marks = {}  # {(position, sign): text}: the infinite values among finite ones, counted at the top or bottom
    for label, values in distributions.items():
        v = real_values(values, f"distribution {label!r}").flatten()
        names.append(str(label))
        finite = v[torch.isfinite(v)]  # NaN (undefined scores) and infinities have no place on an axis
        if finite.numel():
            series.append((len(names), finite.tolist()))
            ends = [(int((v == sign * math.inf).sum()), sign) for sign in (1, -1)]
            marks.update({(len(names), sign): f"{'+' if sign > 0 else '-'}inf ×{k}" for k, sign in ends if k})
        else:  # (it vanished from the figure, its label with it, without a word)
            signs = {x > 0 for x in v[torch.isinf(v)].tolist()}
            missing[len(names)] = {(): "n/a", (True,): "inf", (False,): "-inf"}.get(tuple(signs), "±inf")
    if not series:
        raise ValueError("every distribution is empty (or all NaN / infinite): nothing to plot")
    plt = require_matplotlib()
    fig, ax = plt.subplots(figsize=(max(4.0, 0.6 * len(names) + 2.0), 4.0))
    with _closed_on_error(fig):  # a figure that fails to draw is closed too
        drawn, values = [p for p, _ in series], [v for _, v in series]
        if kind == "box":
            ax.boxplot(values, positions=drawn)
        else:
            ax.violinplot(values, positions=drawn, showmedians=True)
        for position, mark in missing.items():  # x in data units, y in the middle of the axes
            ax.text(position, 0.5, mark, transform=ax.get_xaxis_transform(), ha="center", va="center", color="grey")
        for (position, sign), mark in marks.items():  # inside the axes, at the end of the infinities' sign
            y, align = (0.98, "top") if sign > 0 else (0.02, "bottom")
            ax.text(position, y, mark, transform=ax.get_xaxis_transform(), ha="center", va=align, color="grey")
        if zero_line:
            ax.axhline(0.0, color="grey", linewidth=0.8, linestyle="--")
        positions = list(range(1, len(names) + 1))
        ax.set_xlim(0.5, len(names) + 0.5)
        ax.set_xticks(positions)
        tilted = len(names) > 4
        ax.set_xticklabels(names, rotation=60 if tilted else 0, ha="right" if tilted else "center")
        ax.set_ylabel(ylabel)
        if ylim is not None:
            ax.set_ylim(*ylim)
        ax.grid(alpha=0.3, axis="y")
        if title:
            ax.set_title(title)
    return save_figure(fig, path)


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

    Raises:
        TypeError, ValueError: ``history`` not a dict, a history without the policy's records (``fit`` of a model
            without layers, or of no step), records of different lengths (as many steps as weights and
            magnitudes, the same transforms in each), a ``layer`` it does not have, ``names`` that are not
            one per transform of that layer, or steps, weights or magnitudes that are not real numbers (a string,
            ``None``), naming the record; before anything is drawn. Tensors (with a gradient too) are drawn as
            their values.
    """
    if not isinstance(history, dict):
        raise TypeError(f"history must be the dict fit() returned, got {type(history).__name__}")
    if isinstance(names, (str, bytes)) or not isinstance(names, Iterable):  # any iterable of names, not one string
        raise TypeError(f"names must be a list of the layer's transform names, got {names!r}")
    missing = [k for k in ("step", "weights", "magnitudes") if k not in history]
    if missing or not len(history["step"]) or not len(history["weights"]):
        what = f"no {missing}" if missing else "no record (a run of no step)"
        raise ValueError(f"history has {what}: pass what fit() returned for a model with augmentation layers "
                         "(fit records the weights and magnitudes of AugmentationLayers only, not an Augerino's "
                         "widths: read those from model.augment.widths, e.g. in a callback)")
    lengths = {k: len(history[k]) for k in ("step", "weights", "magnitudes")}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"history's records differ in length: {lengths}; each step has its weights and magnitudes")
    layers, names = len(history["weights"][0]), list(names)
    if not layers:
        raise ValueError("history's records hold no layer: pass what fit() returned for a model with augmentation "
                         "layers")
    if not is_int(layer) or not 0 <= layer < layers:
        raise ValueError(f"layer must be an int in 0..{layers - 1} (the history's layers), got {layer!r}")
    layer = int(layer)
    if len(names) != len(history["weights"][0][layer]):
        raise ValueError(f"names has {len(names)} names for the {len(history['weights'][0][layer])} transforms of "
                         f"layer {layer}: {list(names)!r}")  # fmt: skip
    for key in ("weights", "magnitudes"):
        odd = [i for i, record in enumerate(history[key]) if len(record) <= layer or len(record[layer]) != len(names)]
        if odd:
            raise ValueError(f"history[{key!r}] record {odd[0]} does not hold {len(names)} values for layer {layer}")
    steps = _plottable(history["step"], "history['step']")
    records = {  # (a value that is no number was drawn as a category, or failed inside matplotlib)
        key: [_plottable(record[layer], f"history[{key!r}] record {i}, layer {layer}")
              for i, record in enumerate(history[key])]
        for key in ("weights", "magnitudes")
    }  # fmt: skip
    plt = require_matplotlib()
    fig, axes = plt.subplots(2, 1, figsize=(7, 5), sharex=True)
    with _closed_on_error(fig):  # a figure that fails to draw is closed too
        for key, ax, label in (("weights", axes[0], "weight"), ("magnitudes", axes[1], "magnitude")):
            values = list(zip(*records[key], strict=True))
            for name, series in zip(names, values, strict=True):
                ax.plot(steps, series, label=name)
            ax.set_ylabel(label)
            ax.set_ylim(-0.02, 1.02)
            ax.grid(alpha=0.3)
        axes[0].legend(loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
        axes[1].set_xlabel("training step")
        if title:
            fig.suptitle(title)
    return save_figure(fig, path)


def plot_invariance_curves(
    curves: dict[str, dict], path: str | Path, title: str | None = None, band: tuple[str, str] = ("p25", "p75")
) -> Path:
    """Plot median invariance scores against the magnitude, one line per curve.

    Args:
        curves: ``{label: curve}`` with curves from
            :func:`augnet.probes.invariance_curve`; the shaded band spans the
            ``band`` percentiles.
        path: where to write the PNG.
        title: optional figure title.

    Returns:
        The path written.

    Raises:
        TypeError, ValueError: ``curves`` not a dict, empty (nothing to plot), or holding something other than an
            :func:`~augnet.probes.invariance_curve` result with the ``band`` percentiles; magnitudes, medians or
            percentiles that are not real numbers (a string, ``None``), naming the curve; before anything is drawn.
    """
    _check_items("curves", curves)
    if isinstance(band, (str, bytes)) or not isinstance(band, (tuple, list)) or len(band) != 2:
        raise TypeError(f"band must be two percentile names, e.g. ('p25', 'p75'), got {band!r}")
    drawn = {}  # {label: [magnitudes, medians, lows, highs]}, as matplotlib takes them
    for label, curve in curves.items():
        summary = curve.get("summary") if isinstance(curve, dict) else None
        entries = summary if isinstance(summary, (list, tuple)) and summary else [{}]
        keys = set.intersection(*(set(e) if isinstance(e, dict) else set() for e in entries))
        missing = [k for k in ("median", *band) if k not in keys]
        if not isinstance(curve, dict) or "magnitude" not in curve or missing:
            have = sorted(k for k in keys if k.startswith(("p", "interval")))
            raise ValueError(f"curve {label!r} is not an invariance_curve() result with the band {band} "
                             f"(missing {missing or ['magnitude']}; its summary has {have})")  # fmt: skip
        if len(curve["magnitude"]) != len(summary):
            raise ValueError(f"curve {label!r} has {len(curve['magnitude'])} magnitudes for {len(summary)} summaries")
        # (strings were drawn as categories on the axis, without a word)
        drawn[label] = [_plottable(curve["magnitude"], f"curve {label!r}'s magnitude")] + [
            _plottable([e[key] for e in summary], f"curve {label!r}'s {key}") for key in ("median", *band)
        ]
    plt = require_matplotlib()
    fig, ax = plt.subplots(figsize=(6, 4))
    with _closed_on_error(fig):  # a figure that fails to draw is closed too
        for label, (m, med, lo, hi) in drawn.items():
            (line,) = ax.plot(m, med, marker="o", label=label)
            ax.fill_between(m, lo, hi, color=line.get_color(), alpha=0.2)
        ax.set_xlabel("magnitude")
        ax.set_ylabel("invariance score (median)")
        ax.grid(alpha=0.3)
        ax.legend(frameon=False)
        if title:
            ax.set_title(title)
    return save_figure(fig, path)


def plot_layer_importance(importance: dict[str, float], path: str | Path, title: str | None = None) -> Path:
    """Bar chart of per-layer importances (e.g. from :func:`augnet.probes.layer_importance`).

    Args:
        importance: ``{layer name: importance}``, in the order to draw.
        path: where to write the PNG.
        title: optional figure title.

    Returns:
        The path written.

    Raises:
        TypeError, ValueError: ``importance`` not a dict or empty (nothing to plot), a value that is not a real
            number (or a 0-d tensor or NumPy array of one) or is infinite, naming the layer, or every value NaN
            (nothing to plot); before anything is drawn. A NaN value is a missing bar.
    """
    _check_items("importance", importance)
    names = list(importance)
    values = [_importance(n, importance[n]) for n in names]
    if all(math.isnan(v) for v in values):
        raise ValueError(f"every importance is NaN: nothing to plot ({importance!r:.80})")
    plt = require_matplotlib()
    fig, ax = plt.subplots(figsize=(max(4, 0.8 * len(names) + 2), 3.5))
    with _closed_on_error(fig):  # a figure that fails to draw is closed too
        ax.bar(range(len(names)), values)
        ax.set_xticks(range(len(names)), names, rotation=30, ha="right")
        ax.set_ylabel("importance")
        ax.grid(axis="y", alpha=0.3)
        if title:
            ax.set_title(title)
    return save_figure(fig, path)


def _importance(name, value) -> float:
    """One layer's importance as a float: a real number or a 0-d real tensor or array, finite or NaN; else the error."""
    if hasattr(value, "dim") and hasattr(value, "device") and value.dim() == 0 and value.device.type != "meta":
        value = value.detach().tolist()  # a 0-d tensor (one with a gradient too): its number
    value = array_number(value)  # a 0-d NumPy array (np.array(0.3)): its number, as a 0-d tensor's
    if not is_real(value):
        raise TypeError(f"importance of {name!r} must be a real number, got {value!r:.80}")
    if math.isinf(value):
        raise ValueError(f"importance of {name!r} is {value}: an infinite bar cannot be drawn")
    return float(value)
