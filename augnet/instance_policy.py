"""Reading a per-instance layer's policy: per-class summaries, the class-averaged global policy, a plot.

:func:`policy_summary` runs a :class:`~augnet.instance.ConditionedAugmentationLayer`'s
conditioner over a data set and aggregates its per-sample weights, magnitudes
and natural-unit ranges per class (mean and quantiles). A conditional policy is
not a fixed pipeline, so policy files and exports refuse it;
:func:`averaged_policy` (or :meth:`PolicySummary.policy`) gives the
class-averaged global policy instead, which they take.

Axis legend: B samples, Q transforms, K classes.
"""

from __future__ import annotations

import copy
import math
import numbers
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor, nn

from augnet._calibration import evaluating
from augnet._checks import as_values
from augnet._json import strict
from augnet._labels import class_labels
from augnet.instance import ConditionedAugmentationLayer
from augnet.layers import AugmentationLayer, AugmentationModule
from augnet.policy import Policy
from augnet.transforms._ranges import moving_end

__all__ = ["PolicySummary", "averaged_policy", "plot_policy_summary", "policy_summary"]

QUANTILES = (0.1, 0.5, 0.9)


@dataclass
class PolicySummary:
    """Per class, the distribution of a conditioned layer's per-sample policy.

    Attributes:
        transforms: the Q transform names.
        units: the natural unit of each transform's range.
        quantiles: the quantile levels of the ``*_quantiles`` entries.
        classes: per class label: ``count``; ``weight_mean``, ``magnitude_mean``,
            ``range_mean`` (the end of each sample's range that moves with the magnitude, natural units: see
            ``range_end``), each Q values; ``weight_quantiles``, ``magnitude_quantiles``,
            ``range_quantiles``, each one list of Q values per quantile level; ``range_at_mean``, per
            transform the range ``[low, high]`` at the class's ``magnitude_mean`` (what ``str()`` prints).
        layer: the summarised layer (kept for :meth:`policy`; not serialised).
        size: spatial size of the inputs (for ranges in pixels).
        one_sided: per transform, whether every sample's range starts at 0 or above (a probability, a noise
            level) rather than below it (empty: unknown).
        range_end: per transform, the end of its range that ``range_mean`` and ``range_quantiles`` follow:
            ``"high"``, or ``"low"`` for a transform whose upper end does not move with the magnitude
            (``LowPass``'s cut-off, ``AddNoise``'s SNR, ``Solarize``'s threshold); empty: every one ``"high"``.

    ``str()`` prints, per class and transform, the mean weight and the range at the class's mean magnitude:
    ``±x`` for a range symmetric about 0, else ``low to high`` (``0 to 0.25`` for a probability, ``849 to
    3.6e+03`` for a low-pass cut-off).
    """

    transforms: list[str]
    units: list[str]
    quantiles: tuple[float, ...]
    classes: dict[int, dict] = field(default_factory=dict)
    layer: ConditionedAugmentationLayer | None = field(default=None, repr=False)
    size: tuple[int, ...] | None = None
    one_sided: list[bool] = field(default_factory=list)
    range_end: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        """The summary as strict JSON data (class labels as strings), read back by :meth:`from_json`.

        An unbounded range end (``AddNoise``'s SNR at magnitude 0 is infinite) is written as the string ``"inf"``
        (``"-inf"``), as policy files write it (:meth:`augnet.policy.Policy.layers_json`), and a NaN as ``None``:
        ``json.dumps`` of it is strict JSON, which every reader takes (Python's own default writes ``Infinity``,
        which strict readers refuse). A new dict: editing it leaves the summary as it is.
        """
        return strict({
            "transforms": list(self.transforms),
            "units": list(self.units),
            "quantiles": list(self.quantiles),
            "size": None if self.size is None else list(self.size),
            "one_sided": list(self.one_sided),
            "range_end": self.range_end or ["high"] * len(self.transforms),
            "classes": {str(k): copy.deepcopy(v) for k, v in self.classes.items()},
        })  # fmt: skip

    @classmethod
    def from_json(cls, data: dict) -> PolicySummary:
        """The summary of a :meth:`to_json` dict (``"inf"`` / ``"-inf"`` back as floats, class labels as ints).

        It prints and plots (:func:`plot_policy_summary`) as the summary written; it holds no layer, so
        :meth:`policy` asks to summarise the model again.

        Raises:
            ValueError: ``data`` is not a dict with the keys :meth:`to_json` writes, its ``classes`` do not map
                integer labels to entries (dicts), or a field is not what :meth:`to_json` writes there (a string
                for the list of ``transforms`` was read as one transform per letter).
        """
        keys = ("transforms", "units", "quantiles", "classes")
        if not isinstance(data, dict) or not all(k in data for k in keys):
            got = sorted(data) if isinstance(data, dict) else type(data).__name__
            raise ValueError(f"not a policy summary's JSON: expected a dict with keys {list(keys)}, got {got}")
        _check_summary_fields(data)
        try:
            classes = {int(k): _read_floats(v) for k, v in data["classes"].items()}
            if not all(isinstance(v, dict) for v in classes.values()):
                raise TypeError("an entry is not a dict")
        except (TypeError, ValueError, AttributeError):
            raise ValueError(f"a summary's 'classes' must map integer labels to entries, got {data['classes']!r:.80}") \
                from None
        size = data.get("size")
        return cls(list(data["transforms"]), list(data["units"]), tuple(data["quantiles"]), classes,
                   size=None if size is None else tuple(size), one_sided=list(data.get("one_sided", [])),
                   range_end=list(data.get("range_end", [])))  # fmt: skip

    def class_averaged(self) -> tuple[list[float], list[float]]:
        """``(weights, magnitudes)``: each class's mean, averaged over the classes (each class counts once).

        The weights are normalised to sum to 1.

        Raises:
            ValueError: the summary holds no class, or the averaged weights are not finite numbers >= 0 with a sum
                above 0 (a summary edited or written by hand: a conditioned layer's weights are a softmax's).
        """
        k = len(self.classes)
        if not k:
            raise ValueError("this summary holds no class: there is nothing to average")
        w = [sum(c["weight_mean"][q] for c in self.classes.values()) / k for q in range(len(self.transforms))]
        m = [sum(c["magnitude_mean"][q] for c in self.classes.values()) / k for q in range(len(self.transforms))]
        total = sum(w)
        if not (all(v >= 0 for v in w) and math.isfinite(total) and total > 0):  # NaN fails too
            raise ValueError(f"the classes' mean weights average to {w}: not finite numbers >= 0 with a sum above 0, "
                             "so there is no distribution to normalise")  # fmt: skip
        return [v / total for v in w], m

    def policy(self) -> Policy:
        """The class-averaged global policy: a plain layer at :meth:`class_averaged`'s weights and magnitudes.

        It is what the layer does on average over the classes, not what it does
        to any one input; policy files and exports take it.
        """
        if self.layer is None:
            raise ValueError("this summary holds no layer (it was read back from JSON): summarise the model again")
        w, m = self.class_averaged()
        return AugmentationModule([_global_layer(self.layer, w, m)]).policy(self.size)

    def __str__(self) -> str:
        lines = []
        for label, c in self.classes.items():
            parts = [
                f"{name} w {c['weight_mean'][q]:.2f} range {_shown(c, q)} {unit}".rstrip()
                for q, (name, unit) in enumerate(zip(self.transforms, self.units, strict=True))
            ]
            lines.append(f"class {label} ({c['count']}): " + "; ".join(parts))
        return "\n".join(lines)


def _check_summary_fields(data: dict) -> None:
    """The ValueError naming the first field of a summary's JSON that is not of the form :meth:`PolicySummary.to_json`
    writes (lists where a string was read letter by letter, a size that is not a list, ...)."""

    def is_list(value, item) -> bool:
        return isinstance(value, list) and all(item(v) for v in value)

    def is_level(v) -> bool:
        return isinstance(v, numbers.Real) and not isinstance(v, bool) and 0.0 <= v <= 1.0

    def is_size(v) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and v >= 1

    q = len(data["transforms"]) if isinstance(data["transforms"], list) else None
    fields = (
        ("transforms", data["transforms"], is_list(data["transforms"], lambda v: isinstance(v, str)),
         "a list of transform names"),
        ("units", data["units"], is_list(data["units"], lambda v: isinstance(v, str)) and len(data["units"]) == q,
         "a list of one unit (a string) per transform"),
        ("quantiles", data["quantiles"], is_list(data["quantiles"], is_level) and len(data["quantiles"]) > 0,
         "a list of levels in [0, 1]"),
        ("size", data.get("size"), data.get("size") is None or is_list(data.get("size"), is_size),
         "null or a list of sizes >= 1"),
        ("one_sided", data.get("one_sided", []), is_list(data.get("one_sided", []), lambda v: isinstance(v, bool))
         and len(data.get("one_sided", [])) in (0, q), "a list of one bool per transform"),
        ("range_end", data.get("range_end", []), is_list(data.get("range_end", []), lambda v: v in ("high", "low"))
         and len(data.get("range_end", [])) in (0, q), "a list of one 'high' or 'low' per transform"),
    )  # fmt: skip
    for name, value, good, what in fields:
        if not good:
            raise ValueError(f"a summary's {name!r} must be {what}, got {value!r:.80}")


def _shown(entry: dict, q: int) -> str:
    """Transform ``q``'s range in a class ``entry``: ``±x`` when symmetric about 0, else ``low to high``."""
    if "range_at_mean" not in entry:  # a summary made by hand, without the ranges' two ends
        return f"{entry['range_mean'][q]:.3g}"
    low, high = (v + 0.0 for v in entry["range_at_mean"][q])  # + 0.0: -0.0 shows as 0
    return f"±{high:.3g}" if low == -high and high != 0 else f"{low:.3g} to {high:.3g}"


def _read_floats(value):
    """``value`` (JSON data) with the strings ``"inf"`` / ``"-inf"`` as floats and ``None`` (a NaN) as NaN."""
    if isinstance(value, dict):
        return {k: _read_floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_read_floats(v) for v in value]
    if value is None:
        return float("nan")
    return _ENDS.get(value, value) if isinstance(value, str) else value


_ENDS = {"inf": float("inf"), "-inf": float("-inf")}


def _quantiles(values: Tensor, level: Tensor) -> Tensor:
    """``torch.quantile(values, level, dim=0)``, but a quantile between two infinite values of one sign (or at an
    infinite one) is that infinity, not the NaN of ``inf - inf``."""
    out = torch.quantile(values, level, dim=0)
    if not values.isinf().any():
        return out
    low = torch.quantile(values, level, dim=0, interpolation="lower")
    high = torch.quantile(values, level, dim=0, interpolation="higher")
    frac = (level * (len(values) - 1)).frac()[:, None]
    # between equal ends, or exactly at the lower one: it; else between a finite end and an infinite one: that one
    fixed = torch.where((low == high) | (frac == 0), low, torch.where(low.isinf(), low, high))
    return torch.where(out.isnan() & ~low.isnan() & ~high.isnan(), fixed, out)


def _global_layer(layer: ConditionedAugmentationLayer, weights: Sequence[float], magnitudes: Sequence[float]):
    """A plain :class:`~augnet.AugmentationLayer` like ``layer`` with the given weights and magnitudes."""
    plain = AugmentationLayer(
        copy.deepcopy(list(layer.transforms)),
        temperature=layer.temperature,
        eval_mode=layer.eval_mode,
        backend=layer.backend,
        train_mode=layer.train_mode,
    )
    w = torch.tensor(weights, dtype=torch.float64).clamp_min(1e-30)
    with torch.no_grad():
        plain.weight_logits.copy_((layer.temperature * w.log()).to(plain.weight_logits))
        plain.raw_magnitudes.copy_(torch.tensor(magnitudes, dtype=plain.raw_magnitudes.dtype).clamp(0, 1))
    plain.last_size = layer.last_size
    return plain


def _first_conditioned(model: nn.Module) -> ConditionedAugmentationLayer:
    """The conditioned layer that reads the clean input: the first layer of an augmentation module inside ``model``
    (an AugNet, or a module wrapping one: ``nn.Sequential(model, ...)``, an attribute), or ``model`` itself."""
    if isinstance(model, ConditionedAugmentationLayer):
        return model
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a model or a ConditionedAugmentationLayer, got {type(model).__name__}")
    stacks = [m for m in model.modules() if isinstance(m, AugmentationModule)]
    firsts = [m.layers[0] for m in stacks if len(m.layers) and isinstance(m.layers[0], ConditionedAugmentationLayer)]
    if len(firsts) == 1:
        return firsts[0]
    if firsts:
        raise ValueError(f"{type(model).__name__} holds {len(firsts)} augmentation modules whose first layer is "
                         "conditioned: summarise one of those layers itself")
    layers = [m for m in model.modules() if isinstance(m, ConditionedAugmentationLayer)]
    if any(layer in list(m.layers) for m in stacks for layer in layers):
        raise ValueError(
            "the conditioned layer is not the first layer of its module: its input is the earlier layers' "
            "augmented rows, which a summary of clean data would not show; summarise that layer itself"
        )
    if layers:
        raise ValueError(f"the conditioned layer in {type(model).__name__} is not in an AugNet or "
                         "AugmentationModule, so what it reads is not known here: summarise that layer itself")
    raise ValueError(f"no ConditionedAugmentationLayer found in {type(model).__name__}")


def _batches(data) -> Iterable:
    """One ``(x, y)`` pair (a tensor of inputs and its labels) as a loader of one batch; a loader as it is."""
    if isinstance(data, (tuple, list)) and len(data) == 2 and (isinstance(data[0], Tensor) or _is_array(data[0])):
        return [data]  # an (x, y) pair; a NumPy x too, refused below as an x (it read as a loader of 2 bad batches)
    if not (hasattr(type(data), "__iter__") or hasattr(type(data), "__getitem__")):  # no iter(): a loader's workers
        raise TypeError(f"loader must be an iterable of (x, y) batches or one (x, y) pair, got {data!r:.80}")
    return data


def _is_array(value) -> bool:
    np = sys.modules.get("numpy")
    return np is not None and isinstance(value, np.ndarray)


def _quantile_levels(quantiles) -> tuple[float, ...]:
    quantiles = as_values(quantiles, "quantiles")  # a NumPy array or a tensor of levels: its values
    if isinstance(quantiles, (str, bytes)) or not isinstance(quantiles, Sequence):
        raise TypeError(f"quantiles must be a sequence of levels in [0, 1], got {quantiles!r}")
    if not all(isinstance(q, numbers.Real) and not isinstance(q, bool) for q in quantiles):
        raise TypeError(f"quantiles must be numbers (levels in [0, 1]), got {list(quantiles)!r}")
    qs = tuple(float(q) for q in quantiles)
    if not qs or any(not 0.0 <= q <= 1.0 for q in qs):  # NaN fails too
        raise ValueError(f"quantiles must be levels in [0, 1], got {list(quantiles)!r}")
    return qs


def _labels(y, rows: int, index: int) -> Tensor:
    """Batch ``index``'s labels as a (rows,) int64 CPU tensor, read as every probe reads labels, or the error
    naming the batch."""
    return class_labels(y, rows, f"labels of batch {index}")


@torch.no_grad()
def policy_summary(
    model: nn.Module, loader, quantiles: Sequence[float] = QUANTILES, device: str | torch.device | None = None
) -> PolicySummary:
    """Per class, the mean and quantiles of a conditioned layer's per-sample weights, magnitudes and ranges.

    Args:
        model: an :class:`~augnet.AugNet` or module whose first augmentation layer is
            a :class:`~augnet.instance.ConditionedAugmentationLayer`, or that layer.
        loader: an iterable of ``(x, y)`` batches (a DataLoader), or one ``(x, y)`` pair of tensors;
            ``y`` one class label >= 0 per input, read as the probes read labels: a (B,) or (B, 1) tensor of
            any integer dtype, a NumPy array or a list; whole floats are taken.
        quantiles: quantile levels in [0, 1] (a sequence, a NumPy array or a tensor).
        device: where to run the conditioner: the layer's device (the default), to which each batch is moved;
            another device is refused (move the model there first).

    Returns:
        A :class:`PolicySummary`. The layer's mode is restored.

    Raises:
        ValueError, TypeError: inputs the layer cannot take (see
            :meth:`~augnet.instance.ConditionedAugmentationLayer.check_input`), labels that are
            not one integer >= 0 per input (another length, one-hot rows, fractions, NaN, negative or bool
            labels, strings), no batch or no sample, bad quantiles, a ``device`` other than the layer's;
            naming the batch. Nothing is changed.

    Examples:
        >>> from augnet.transforms import image as T
        >>> layer = ConditionedAugmentationLayer([T.Rotate()], channels=3, init_magnitude=0.25)
        >>> summary = policy_summary(layer, (torch.rand(6, 3, 8, 8), torch.tensor([0, 1, 0, 1, 0, 1])))
        >>> summary.classes[0]["range_mean"]
        [45.0]
    """
    layer = _first_conditioned(model)
    qs = _quantile_levels(quantiles)
    device = _layer_device(layer, device)
    ws, mus, highs, lows, labels, size, pol, batches = [], [], [], [], [], None, None, 0
    with evaluating(layer):  # each submodule back in its own mode
        for i, batch in enumerate(_batches(loader)):
            batches += 1
            if not isinstance(batch, (tuple, list)) or len(batch) < 2:
                raise ValueError(f"loader must give (x, y) batches, got {type(batch).__name__} in batch {i}")
            x, y = batch[0], batch[1]
            if not isinstance(x, Tensor):
                raise TypeError(f"batch {i}: x must be a tensor of inputs, got {type(x).__name__}")
            y = _labels(y, len(x), i)
            if len(x) == 0:
                continue
            if x.device.type == "meta":
                raise ValueError(f"batch {i}: x is on meta, which holds no values: a policy needs them")
            pol = layer.policy(x.to(device))  # checks x
            size = tuple(x.shape[2:]) if x.dim() > 2 else None
            ws.append(pol["weights"])
            mus.append(pol["magnitudes"])
            highs.append(pol["ranges"][..., 1])
            lows.append(pol["ranges"][..., 0])
            labels.append(y)
    if not batches:
        raise ValueError("the loader gave no batch")
    if not ws:
        raise ValueError(f"the data hold no sample ({batches} empty batch(es)): there is nothing to summarise")
    w, mu, y = torch.cat(ws).double(), torch.cat(mus).double(), torch.cat(labels)
    high, low = torch.cat(highs), torch.cat(lows)
    level = torch.tensor(qs, dtype=torch.float64)
    ends = [moving_end(t, size) for t in layer.transforms]
    moving = torch.where(torch.tensor(ends, dtype=torch.bool), high, low)  # (B, Q): each range's end that moves
    summary = PolicySummary(pol["transforms"], pol["units"], qs, layer=layer, size=size,
                            one_sided=(low >= 0).all(0).tolist(), range_end=[("low", "high")[e] for e in ends])
    for label in sorted(set(y.tolist())):
        rows = y == label
        entry = {"count": int(rows.sum())}
        for name, values in (("weight", w[rows]), ("magnitude", mu[rows]), ("range", moving[rows])):
            entry[f"{name}_mean"] = values.mean(0).tolist()
            entry[f"{name}_quantiles"] = _quantiles(values, level).tolist()
        entry["range_at_mean"] = [list(t.natural_range(m, size)[:2])
                                  for t, m in zip(layer.transforms, entry["magnitude_mean"], strict=True)]
        summary.classes[int(label)] = entry
    return summary


def _layer_device(layer: nn.Module, device) -> torch.device:
    """The layer's device, or the ValueError for a ``device`` that is not it (torch's mismatch came mid-loop)."""
    own = layer.weight_logits.device
    if device is None:
        return own
    try:
        asked = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"device must name a device, got {device!r} ({str(err).strip().splitlines()[0]})") from None
    if asked.type != own.type or (own.type != "cpu" and asked.index not in (None, own.index)):
        raise ValueError(f"device {asked} is not the layer's ({own}): move the model there first, or leave device")
    return own


def averaged_policy(model: nn.Module, loader, device: str | torch.device | None = None) -> Policy:
    """The class-averaged global policy of a model's conditioned first layer (see :meth:`PolicySummary.policy`),
    followed by the policies of the layers after it in the model's augmentation module, as they are.

    Policy files (:meth:`~augnet.policy.Policy.to_json`) and exports (``to_kornia``,
    ``to_torchvision``) refuse a conditioned layer; they take this policy,
    which is what the layer does on average over the classes of ``loader``.
    """
    summary = policy_summary(model, loader, device=device)
    stacks = [m for m in model.modules() if isinstance(m, AugmentationModule)] if isinstance(model, nn.Module) else []
    stack = next((m for m in stacks if len(m.layers) and m.layers[0] is summary.layer), None)
    if stack is None or len(stack.layers) == 1:
        return summary.policy()
    # The layers after the conditioned one are part of the policy: they were dropped (a one-layer policy).
    w, m = summary.class_averaged()
    return AugmentationModule([_global_layer(summary.layer, w, m), *list(stack.layers)[1:]]).policy(summary.size)


def plot_policy_summary(summary: PolicySummary, path: str | Path, names: dict[int, str] | None = None) -> Path:
    """Per class: each transform's weight and range (mean, with the outer quantiles as a bar); a PNG.

    The range plotted is the end that moves with the magnitude (``range_mean``): the upper end, or the lower
    end for the transforms whose upper end is fixed (their legend says ``lower end``). ``names`` maps class
    labels to the names on the axis (default: the labels). An unbounded value (``AddNoise``'s SNR at magnitude
    0 is infinite) is drawn clipped a quarter of the panel's finite span past its finite values (with 0; 1 when
    none is finite) and marked ``inf`` (``-inf``), a clipped mean's bar hatched, and the panel says so.

    Raises:
        TypeError, ValueError: ``summary`` not a :class:`PolicySummary` or holding no class (nothing to plot),
            ``names`` not a dict; before anything is drawn.
    """
    from augnet.viz import require_matplotlib, save_figure

    if not isinstance(summary, PolicySummary):
        more = " (a summary's JSON: read it with PolicySummary.from_json)" if isinstance(summary, dict) else ""
        raise TypeError(f"summary must be a PolicySummary (from policy_summary), got {type(summary).__name__}{more}")
    if not summary.classes:
        raise ValueError("the summary holds no class: nothing to plot")
    if names is not None and not isinstance(names, dict):
        raise TypeError(f"names must be a dict {{class label: name}} or None, got {type(names).__name__}")
    plt = require_matplotlib()
    labels = list(summary.classes)
    q = len(summary.transforms)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    width = 0.8 / q
    lower = [end == "low" for end in summary.range_end] or [False] * q
    ranges = "range (the end that moves)" if any(lower) else "range (upper end)"
    # The outer quantiles: the lowest and the highest level, in whatever order they were asked for (the first and
    # the last, (0.9, 0.1) drew the bar from 0.9 to 0.1: none below the mean and the title's levels reversed).
    levels = list(summary.quantiles)
    lowest, highest = levels.index(min(levels)), levels.index(max(levels))
    for j, (key, title) in enumerate((("weight", "weight"), ("range", ranges))):
        ax = axes[j]
        stats = [[[summary.classes[k][f"{key}_mean"][t] for k in labels],
                  [summary.classes[k][f"{key}_quantiles"][lowest][t] for k in labels],
                  [summary.classes[k][f"{key}_quantiles"][highest][t] for k in labels]] for t in range(q)]  # fmt: skip
        clip, ends = _clipping([v for per_t in stats for row in per_t for v in row])
        for t, (means, lo, hi) in enumerate(stats):
            xs = [i + (t - (q - 1) / 2) * width for i in range(len(labels))]
            bounds = [[v for v in row if math.isinf(v)] for row in zip(means, lo, hi, strict=True)]  # per class
            hatched = [math.isinf(m) for m in means]  # the bar itself clipped (else a quantile only)
            means, lo, hi = [clip(v) for v in means], [clip(v) for v in lo], [clip(v) for v in hi]
            # a saturated class (every sample at the bound) can have its mean a rounding error past a quantile
            err = [[max(m - a, 0.0) for m, a in zip(means, lo, strict=True)],
                   [max(b - m, 0.0) for m, b in zip(means, hi, strict=True)]]
            unit = f" ({summary.units[t]})" if key == "range" and summary.units[t] else ""
            unit = f", lower end{unit}" if key == "range" and lower[t] else unit
            bars = ax.bar(xs, means, width, yerr=err, capsize=2, label=summary.transforms[t] + unit)
            for x, patch, infinite, clipped, m, a, b in zip(xs, bars.patches, bounds, hatched, means, lo, hi,
                                                             strict=True):  # fmt: skip
                if clipped:  # drawn clipped: hatched; "inf" at each clipped end, the bar's or its quantile's
                    patch.set_hatch("//")
                for sign, at, va in ((1, max(m, b), "bottom"), (-1, min(m, a), "top")):
                    if sign * math.inf in infinite:
                        ax.text(x, at, "inf" if sign > 0 else "-inf", ha="center", va=va, fontsize=7)
        if ends:
            ax.set_ylim(*ends)
            ax.text(0.01, 0.99, "inf: an unbounded value, drawn clipped (a hatched bar)", transform=ax.transAxes,
                    ha="left", va="top", fontsize=7)  # fmt: skip
        ax.set_xticks(range(len(labels)), [(names or {}).get(k, str(k)) for k in labels])
        ax.set_xlabel("class")
        ax.set_title(f"{title}, mean and {levels[lowest]:g}-{levels[highest]:g} quantiles")
        ax.legend(fontsize=7)
    return save_figure(fig, path)


def _clipping(values: list[float]):
    """``(clip, ends)`` for a panel of ``values``: ``clip(v)`` is ``v``, or, for an infinite one, a finite stand-in a
    quarter of the finite values' span (with 0 among them; 1 if they span nothing) past them; ``ends`` are y-limits
    that leave room for the ``inf`` marks, ``None`` when no value is infinite (matplotlib's own limits)."""
    finite = [v for v in values if math.isfinite(v)] + [0.0]
    low, high = min(finite), max(finite)
    span = (high - low) or 1.0
    top, bottom = high + 0.25 * span, low - 0.25 * span

    def clip(v: float) -> float:
        return top if v == math.inf else bottom if v == -math.inf else v

    if not any(math.isinf(v) for v in values):
        return clip, None
    return clip, (
        bottom - 0.15 * span if -math.inf in values else low - 0.05 * span,
        top + 0.15 * span if math.inf in values else high + 0.05 * span,
    )
