"""One per-layer invariance report for any model: every measure of the five papers and the Lie derivative.

:func:`report` reads each chosen layer of a model on clean inputs and on inputs transformed by each
transform at a few magnitudes, and measures, per (layer, transform, magnitude):

=======================  =============================================================  ==========================
measure                  what (on the layer's pooled features)                          paper
=======================  =============================================================  ==========================
inv_augnet               Inv_T: ``(b - d(z, z_t)) / b``, cosine, clean baseline;        AugNet eq. 4
                         median over inputs (1: invariant)
inv_bouchacourt          the same with the transformed baseline; median                 Bouchacourt et al. eq. 1
alignment                displacement alignment minus its column-shuffled baseline      Bouchacourt et al. app. D
equivariance_error       held-out L2 error of the best linear map ``M(z_t) ~ z``        Tensmeyer & Martinez eq. 2
                         (0: equivariant)
invariance_error         the same with ``M = I`` (0: invariant)                         Tensmeyer & Martinez eq. 2
neuron_invariance        mean ``I_k`` over the layer's channels at ``tau`` (non-        Zaidi et al. eq. 1
                         negative layers only; 1: invariant)
ranking_accuracy         held-out accuracy of a linear ranker of the transform's        Yan & Huang Table II
                         parameter on the layer alone (0.5: not encoded)
importance               the layer's share of the ranker on every layer                 Yan & Huang Fig. 5
lie_derivative           mean ``|L phi|`` per feature, per unit of ``t`` (0: locally    Gruver et al.
                         invariant); ``lie_derivative_relative``: ``|L phi| / |phi|``
normalized_variance      per unit, variance across transformations over variance       Quiroga et al. (2023)
                         across samples (0: invariant); its two parts
                         ``transformation_variance``, ``sample_variance``
anova_invariant          fraction of units whose one-way ANOVA (transformations as      Quiroga et al. (2023)
                         groups, Bonferroni) finds no effect at ``alpha`` (1)
goodfellow               per unit, local / global firing rate (``1 / G``: invariant);   Goodfellow et al. (2009)
                         ``goodfellow_local`` (L), ``goodfellow_global`` (G)
normalized_distance      per unit, mean distance across transformations / across        Quiroga et al. (2023)
                         samples (0: invariant)
same_equivariance        per channel, ``g^-1 F(g x)`` against ``F(x)`` over the         Lenc & Vedaldi; Quiroga
                         channel's variance (0), for grid views that are exact          et al.
                         actions, with ``aggregation="positions"``
=======================  =============================================================  ==========================

The per-unit measures (:data:`UNIT_MEASURES`, :mod:`augnet.probes.measures`) are recorded as their
mean over the layer's units; ``per_unit=True`` keeps each unit's value, ``by_class`` measures each
class apart, ``transformations="grid"`` reads every input under a fixed grid of parameters, and
``aggregation`` chooses between pooling a feature map first and measuring every position (see
:func:`report`).

Every layer is read as its channels averaged over positions (``(B, C)``; a transformer's (B, tokens,
D) output averaged over its tokens), Yan & Huang's and Bouchacourt et al.'s reading, so a run on
20,000 inputs holds (20,000, C) features per layer (the unit measures can read every position
instead, ``aggregation="positions"``). The ranking probe and the Lie derivative do not
depend on a magnitude sweep: the ranker orders two copies drawn at one magnitude (the largest probed;
0.5 for a transform applied with a probability, so that half the copies are transformed), the Lie
derivative is taken at the identity; their records carry that magnitude (``None`` for the Lie
derivative). A measure that does not apply (a layer with negative activations for Zaidi et al.'s, a
discrete transform for the Lie derivative, copies that all got the same parameter for the ranker) is
NaN with a ``note``.

The model runs in evaluation mode (its modes are restored), batch by batch, on the inputs' device.
"""

from __future__ import annotations

import csv
import json
import math
import numbers
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor, nn

from augnet.probes._common import (
    Transformed,
    batch_size_of,
    check_flag,
    check_model_input,
    check_seed,
    derangement,
    evaluating,
    forward_kwargs,
    seeded,
)
from augnet.probes.equivariance import equivariance_report
from augnet.probes.families import family, grid_params, grid_values, rank_param
from augnet.probes.features import LOGITS, _Filler, describe, stream_features
from augnet.probes.invariance import invariance_score
from augnet.probes.lie import LIE_BATCH_SIZE, lie_derivative
from augnet.probes.ranking import ranking_probe_per_layer
from augnet.probes.similarity import equivariance_alignment
from augnet.probes.unit_invariance import neuron_invariance

__all__ = [
    "AGGREGATIONS",
    "MEASURES",
    "TRANSFORMATIONS",
    "UNIT_MEASURES",
    "ProbeReport",
    "auto_layers",
    "report",
    "transform_names",
]

#: Every measure of a report: ``{name: (paper, what it is, the value of an invariant layer)}``.
MEASURES = {
    "inv_augnet": ("AugNet eq. 4", "Inv_T, cosine, clean baseline (median)", "1"),
    "inv_bouchacourt": ("Bouchacourt et al. eq. 1", "invariance, transformed baseline (median)", "1"),
    "alignment": ("Bouchacourt et al. app. D", "displacement alignment - shuffled", "0"),
    "equivariance_error": ("Tensmeyer & Martinez eq. 2", "held-out error, best linear map", "0"),
    "invariance_error": ("Tensmeyer & Martinez eq. 2", "held-out error, M = I", "0"),
    "neuron_invariance": ("Zaidi et al. eq. 1", "mean I_k over channels", "1"),
    "ranking_accuracy": ("Yan & Huang Table II", "ranking accuracy, layer alone", "0.5"),
    "importance": ("Yan & Huang Fig. 5", "share of the all-layer ranker", "-"),
    "lie_derivative": ("Gruver et al.", "mean |L phi| per feature", "0"),
    "lie_derivative_relative": ("Gruver et al.", "|L phi| / |phi|", "0"),
    "normalized_variance": ("Quiroga et al. (2023)", "variance across transformations / samples", "0"),
    "transformation_variance": ("Quiroga et al. (2023)", "variance across transformations", "0"),
    "sample_variance": ("Quiroga et al. (2023)", "variance across samples", "-"),
    "anova_invariant": ("Quiroga et al. (2023)", "fraction of units ANOVA finds unmoved", "1"),
    "goodfellow": ("Goodfellow et al. (2009)", "local / global firing rate", "1/G"),
    "goodfellow_local": ("Goodfellow et al. (2009)", "local firing rate L", "1"),
    "goodfellow_global": ("Goodfellow et al. (2009)", "global firing rate G", "-"),
    "normalized_distance": ("Quiroga et al. (2023)", "distance across transformations / samples", "0"),
    "same_equivariance": ("Lenc & Vedaldi; Quiroga et al.", "g^-1 F(gx) against F(x), normalised", "0"),
}
#: The per-unit measures (:mod:`augnet.probes.measures`): a value per unit, their mean per layer.
UNIT_MEASURES = (
    "normalized_variance",
    "transformation_variance",
    "sample_variance",
    "anova_invariant",
    "goodfellow",
    "goodfellow_local",
    "goodfellow_global",
    "normalized_distance",
    "same_equivariance",
)
_SWEPT = (
    "inv_augnet",
    "inv_bouchacourt",
    "alignment",
    "equivariance_error",
    "invariance_error",
    "neuron_invariance",
    *UNIT_MEASURES,
)
_COLUMNS = ("layer", "transform", "magnitude", "range", "measure", "value", "paper", "note", "class")
#: A class is called invariant to a transform, in the verdict, where its normalised variance at the last layer is at
#: most this: the transformation moves the layer at most a tenth as much as a change of input.
INVARIANT_NV = 0.1
TRANSFORMATIONS = ("random", "grid")
AGGREGATIONS = ("pool", "positions")


def auto_layers(model: nn.Module, x: Tensor | None = None, **forward_kwargs) -> list[str]:
    """The layers :func:`report` reads by default: the outputs of the model's top-level blocks, and its logits.

    The blocks are the model's children that hold submodules, except its last child (whose output
    is the logits). A model whose body is one block (a ViT's ``encoder``, itself holding one
    ``layers`` container) is read inside it, down to the level with several blocks; a flat model
    (a ``Sequential`` of layers) gives its children but the last, at most 8, evenly spaced. For an
    AugNet, the blocks of its trunk.

    With inputs ``x``, the blocks are those of a forward pass (on ``x[:1]``, see
    :func:`~augnet.probes.layer_calls`; ``forward_kwargs`` go to the model): a block called
    ``k > 1`` times is read at each call, ``name#0`` ... ``name#{k-1}`` (its plain name is no layer),
    and a block the pass never calls is left out. :func:`report` passes its inputs.

    Examples:
        >>> block = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU())
        >>> auto_layers(nn.Sequential(block, nn.Sequential(nn.Flatten()), nn.LazyLinear(2)))
        ['0', '1', 'logits']
    """
    from augnet.model import AugNet
    from augnet.probes.features import CALL, layer_calls

    root, prefix = (model.trunk, "trunk.") if isinstance(model, AugNet) else (model, "")
    children = list(root.named_children())

    def blocks(items):
        return [(n, m) for n, m in items if next(m.children(), None) is not None]

    cands = blocks(children[:-1])
    while len(cands) == 1 and blocks(cands[0][1].named_children()):
        name, module = cands[0]
        cands = [(f"{name}.{n}", m) for n, m in blocks(module.named_children())]
    if not cands:
        cands = children[:-1]
        if len(cands) > 8:
            cands = [cands[round(i * (len(cands) - 1) / 7)] for i in range(8)]
    names = [prefix + n for n, _ in cands]
    if x is not None and names:
        calls = layer_calls(model, x, names, **forward_kwargs)
        names = [n if calls[n] == 1 else f"{n}{CALL}{i}" for n in names for i in range(calls[n])]
    return [*names, LOGITS]


def _pool(a: Tensor, image_input: bool) -> Tensor:
    """A layer's output as (B, C): channels averaged over positions, or a transformer's tokens averaged."""
    if a.dim() == 3 and image_input:
        return a.mean(1)  # (B, tokens, D): the tokens' mean
    return a.flatten(2).mean(2) if a.dim() > 2 else a.reshape(len(a), -1)


@dataclass
class ProbeReport:
    """The result of :func:`report`: one tidy table of records, with its figure and verdict.

    Attributes:
        records: one dict per (layer, transform, magnitude, measure, class) with the keys ``layer``,
            ``transform``, ``magnitude``, ``range`` (natural units), ``measure``, ``value``,
            ``paper``, ``note``, ``class`` (``None``: every input; a label: that class's inputs, with
            ``by_class``).
        layers, transforms: in the order probed.
        magnitudes: the magnitudes swept.
        info: the model, the inputs, the settings and the time taken.
        units: with ``per_unit=True``, ``{(layer, transform, magnitude, measure, class): (U,) float64
            tensor}`` for the measures of :data:`UNIT_MEASURES` (``U``: the layer's channels); the
            record's value is the mean of the finite-or-infinite (non-NaN) entries. Read with
            :meth:`unit_values`.
    """

    records: list[dict]
    layers: list[str]
    transforms: list[str]
    magnitudes: list[float]
    info: dict = field(default_factory=dict)
    units: dict = field(default_factory=dict)

    def table(self) -> dict[str, list]:
        """The records as columns, ``{column: [values]}`` (what ``pandas.DataFrame`` takes)."""
        return {c: [r[c] for r in self.records] for c in _COLUMNS}

    def value(
        self, measure: str, layer: str, transform: str, magnitude: float | None = None, cls: int | None = None
    ) -> float:
        """One value (for a swept measure at ``magnitude``, default the largest; of class ``cls``, default every
        input); NaN if absent."""
        if measure in _SWEPT and magnitude is None:
            magnitude = max(self.magnitudes)
        for r in self.records:
            if (r["measure"], r["layer"], r["transform"], r.get("class")) == (measure, layer, transform, cls) and (
                measure not in _SWEPT or r["magnitude"] == magnitude
            ):
                return r["value"]
        return math.nan

    def classes(self) -> list[int]:
        """The classes of ``by_class`` (empty without it)."""
        return list(self.info.get("classes", []))

    def unit_values(
        self, measure: str, layer: str, transform: str, magnitude: float | None = None, cls: int | None = None
    ) -> Tensor:
        """The per-unit values of one measure of :data:`UNIT_MEASURES` (``report(..., per_unit=True)``), (U,).

        Raises:
            ValueError: the report holds no per-unit values (``per_unit=False``), or none for these keys.
        """
        if not self.units:
            raise ValueError("this report holds no per-unit values: run report(..., per_unit=True)")
        magnitude = max(self.magnitudes) if magnitude is None else float(magnitude)
        key = (layer, transform, magnitude, measure, cls)
        if key not in self.units:
            raise ValueError(f"no per-unit values for {key}; the measures with some are {list(UNIT_MEASURES)}")
        return self.units[key]

    def save(self, path) -> Path:
        """Write the records to ``path``: ``.json`` (with ``info``) or ``.csv``.

        With per-unit values, they go beside it, to ``<stem>.units.json``: ``{"info", "units": [{"layer",
        "transform", "magnitude", "measure", "class", "values": [U numbers, NaN as null]}]}``.
        """
        path = Path(path)
        if path.suffix not in (".json", ".csv"):
            raise ValueError(f"save writes .json or .csv, got {path.suffix!r} ({path})")
        path.parent.mkdir(parents=True, exist_ok=True)
        if self.units:
            rows = [
                {
                    "layer": k[0],
                    "transform": k[1],
                    "magnitude": k[2],
                    "measure": k[3],
                    "class": k[4],
                    "values": [None if math.isnan(v) else v for v in values.tolist()],
                }
                for k, values in self.units.items()
            ]
            beside = path.with_name(f"{path.stem}.units.json")
            beside.write_text(json.dumps({"info": self.info, "units": rows}, allow_nan=True))
        if path.suffix == ".json":
            rows = [
                {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()} for r in self.records
            ]
            path.write_text(json.dumps({"info": self.info, "records": rows}, indent=1))
        elif path.suffix == ".csv":
            with path.open("w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=_COLUMNS)
                writer.writeheader()
                writer.writerows(self.records)
        else:
            raise ValueError(f"save writes .json or .csv, got {path.suffix!r} ({path})")
        return path

    def heatmap(
        self, path, magnitude: float | None = None, measures: Sequence[str] | None = None, cls: int | None = None
    ) -> Path:
        """Layers x transforms, one panel per measure (swept measures at ``magnitude``, default the largest; of class
        ``cls`` of ``by_class``, default every input)."""
        from augnet.probes.plots import plot_report_heatmap

        magnitude = self._swept(magnitude)
        present = [m for m in MEASURES if any(r["measure"] == m for r in self.records)]
        names = present if measures is None else self._measures(measures, present)
        panels = {}
        for m in names:
            grid = [[self.value(m, layer, t, magnitude, cls) for t in self.transforms] for layer in self.layers]
            if m in _SWEPT:
                what = f"{m} (mu = {magnitude:g})"
            elif m.startswith("lie"):
                what = f"{m} (at the identity)"
            else:
                at = {r["transform"]: r["magnitude"] for r in self.records if r["measure"] == m}
                what = f"{m} (mu = {', '.join(f'{v:g}' for v in dict.fromkeys(at.values()))})"
            panels[what] = (torch.tensor(grid, dtype=torch.float64), MEASURES[m][0], MEASURES[m][2])
        if cls is not None and cls not in self.classes():
            raise ValueError(f"cls {cls!r} is not a class of this report; its classes are {self.classes()}")
        title = (
            f"{self.info.get('model', 'model')} on {self.info.get('n_inputs', '?')} inputs"
            f"{'' if cls is None else f' of class {cls}'} (bright: closer to invariant; grey: n/a)"
        )
        return plot_report_heatmap(panels, self.layers, self.transforms, path, title=title)

    def units_plot(
        self, path, measure: str = "normalized_variance", magnitude: float | None = None, cls: int | None = None
    ) -> Path:
        """Per transform, each layer's per-unit values of ``measure`` (``per_unit=True``), their median marked.

        Args:
            path: where to write the PNG.
            measure: one of :data:`UNIT_MEASURES` (default the normalised variance).
            magnitude: a swept magnitude (default the largest).
            cls: a class of ``by_class`` (default every input).

        Raises:
            ValueError: no per-unit values in this report, an unknown measure, magnitude or class.
        """
        from augnet.probes.plots import plot_report_units

        if not self.units:
            raise ValueError("this report holds no per-unit values: run report(..., per_unit=True)")
        if measure not in UNIT_MEASURES:
            raise ValueError(f"measure must be one of {list(UNIT_MEASURES)}, got {measure!r}")
        magnitude = self._swept(magnitude)
        if cls is not None and cls not in self.classes():
            raise ValueError(f"cls {cls!r} is not a class of this report; its classes are {self.classes()}")
        panels = {}
        for t in self.transforms:
            layers = {
                layer: self.units[(layer, t, magnitude, measure, cls)]
                for layer in self.layers
                if (layer, t, magnitude, measure, cls) in self.units
            }
            if layers:
                panels[f"{t} (mu = {magnitude:g})"] = layers
        if not panels:
            raise ValueError(f"no per-unit values of {measure!r} at magnitude {magnitude:g}")
        who = "" if cls is None else f", class {cls}"
        title = f"{self.info.get('model', 'model')}: {measure} per unit{who} ({MEASURES[measure][0]})"
        return plot_report_units(panels, path, f"{measure} (invariant: {MEASURES[measure][2]})", title)

    def _swept(self, magnitude) -> float:
        """``magnitude`` (default the largest) if the report swept it, else the TypeError / ValueError."""
        if magnitude is None:
            return max(self.magnitudes)
        if isinstance(magnitude, bool) or not isinstance(magnitude, numbers.Real):
            raise TypeError(f"magnitude must be a number, got {type(magnitude).__name__}: {magnitude!r}")
        if float(magnitude) not in self.magnitudes:
            raise ValueError(f"magnitude {magnitude!r} was not swept; the report's magnitudes are {self.magnitudes}")
        return float(magnitude)

    @staticmethod
    def _measures(measures, present: list[str]) -> list[str]:
        """``measures`` checked: names of :data:`MEASURES` that the report holds records of."""
        if isinstance(measures, str) or not isinstance(measures, Sequence):
            raise TypeError(f"measures must be a list of measure names, got {measures!r}")
        if not all(isinstance(m, str) for m in measures):
            raise TypeError(f"measures must be measure names (str), got {list(measures)!r}")
        unknown = [m for m in measures if m not in MEASURES]
        if unknown:
            raise ValueError(f"unknown measure(s) {unknown}; the measures are {list(MEASURES)}")
        absent = [m for m in measures if m not in present]
        if absent or not measures:
            raise ValueError(f"no record of measure(s) {absent or list(measures)} in this report; it has {present}")
        return list(measures)

    def verdict(self) -> str:
        """A few lines: per transform, which layers are invariant, and where the logits stand."""
        top = max(self.magnitudes)
        lines = [f"{self.info.get('model', 'model')}: {self.info.get('features', '')}"]
        for t in self.transforms:
            inv = {layer: self.value("inv_augnet", layer, t, top) for layer in self.layers}
            finite = {k: v for k, v in inv.items() if math.isfinite(v)}
            if not finite:
                lines.append(f"{t}: no invariance score (see the notes)")
                continue
            best = max(finite, key=finite.get)
            first, last = self.layers[0], self.layers[-1]
            trend = "grows" if inv[last] > inv[first] + 0.01 else "falls" if inv[last] < inv[first] - 0.01 else "stays"
            eq, ie = self.value("equivariance_error", last, t, top), self.value("invariance_error", last, t, top)
            line = (
                f"{t} at mu = {top:g}: Inv_T {inv[last]:.3f} at {last} ({trend} with depth from {inv[first]:.3f} at "
                f"{first}; highest {finite[best]:.3f} at {best}); held-out error {ie:.3f} as invariant, "
                f"{eq:.3f} through the best linear map"
            )
            lie = self.value("lie_derivative_relative", last, t)
            if math.isfinite(lie):
                line += f"; Lie derivative |L phi| / |phi| {lie:.3g} per {self.info.get('units', {}).get(t, 'unit')}"
            rank = self.value("ranking_accuracy", last, t)
            if math.isfinite(rank):
                at = next(
                    r["magnitude"] for r in self.records if r["measure"] == "ranking_accuracy" and r["transform"] == t
                )
                line += f"; its parameter ranked at {rank:.2f} from the logits (chance 0.5; copies at mu = {at:g})"
            nv = self.value("normalized_variance", last, t, top)
            if math.isfinite(nv):
                line += f"; normalised variance {nv:.3g} at {last} (0: invariant)"
            lines.append(line + ".")
            if self.classes():
                lines.append(self._class_line(t, last, top))
        return "\n".join(lines)

    def _class_line(self, t: str, layer: str, top: float) -> str:
        """Which classes ``layer`` treats invariantly to ``t`` (normalised variance at most :data:`INVARIANT_NV`)."""
        nv = {k: self.value("normalized_variance", layer, t, top, k) for k in self.classes()}
        yes = [f"{k} ({v:.3g})" for k, v in nv.items() if v <= INVARIANT_NV]
        no = [f"{k} ({v:.3g})" for k, v in nv.items() if v > INVARIANT_NV]
        none = [str(k) for k, v in nv.items() if not v <= INVARIANT_NV and not v > INVARIANT_NV]
        text = f"{t} by class at {layer} (normalised variance; invariant at <= {INVARIANT_NV:g}): "
        text += f"invariant: {', '.join(yes) or 'none'}; not invariant: {', '.join(no) or 'none'}"
        return text + (f"; not measured: {', '.join(none)}." if none else ".")


def transform_names() -> list[str]:
    """The names of augnet's image transforms (what :func:`report` and ``augnet probe`` take by name)."""
    from augnet.transforms import image as T
    from augnet.transforms.base import Transform

    return sorted(n for n in T.__all__ if isinstance(getattr(T, n), type) and issubclass(getattr(T, n), Transform))


def _transforms(transforms) -> dict[str, object]:
    from augnet.transforms import image as T
    from augnet.transforms.base import Transform

    if isinstance(transforms, (str, Transform)):
        transforms = [transforms]
    if isinstance(transforms, Mapping):
        items = list(transforms.items())
    elif isinstance(transforms, Sequence) and transforms:
        items = []
        for t in transforms:
            if isinstance(t, str):
                if t not in transform_names():
                    raise ValueError(f"unknown transform {t!r}; the image transforms are {transform_names()}")
                items.append((t, getattr(T, t)()))
            else:
                items.append((type(t).__name__, t))
    else:
        raise ValueError(f"transforms must name one or more transforms, got {transforms!r}")
    for name, t in items:
        if not isinstance(t, Transform) or t.input_ndim != 4:
            raise TypeError(f"transform {name!r} must be an augnet image transform, got {type(t).__name__}")
    if len({n for n, _ in items}) != len(items):
        raise ValueError(f"transforms must not repeat a name, got {[n for n, _ in items]}")
    return dict(items)


def _magnitudes(magnitudes) -> list[float]:
    ms = [magnitudes] if isinstance(magnitudes, numbers.Real) else list(magnitudes)
    if not ms or any(isinstance(m, bool) or not isinstance(m, numbers.Real) or not 0 < float(m) <= 1 for m in ms):
        raise ValueError(f"magnitudes must be numbers in (0, 1], got {magnitudes!r}")
    return sorted({float(m) for m in ms})


def _record(records, layer, transform, magnitude, rng, measure, value, note="", cls=None):
    records.append(
        {
            "layer": layer,
            "transform": transform,
            "magnitude": magnitude,
            "range": rng,
            "measure": measure,
            "value": float(value),
            "paper": MEASURES[measure][0],
            "note": note,
            "class": cls,
        }
    )


def _notes(caught) -> str:
    """The warnings caught, each up to its first colon or semicolon, without repeats."""
    return "; ".join(dict.fromkeys(str(w.message).split(";")[0].split(": it")[0] for w in caught))


def report(
    model: nn.Module,
    x: Tensor,
    transforms,
    layers: str | Sequence[str] = "auto",
    magnitudes: float | Sequence[float] = (0.25, 0.5, 1.0),
    *,
    tau: float = 0.05,
    holdout: float = 0.3,
    lie: bool = True,
    batch_size: int | None = None,
    copies: int | None = None,
    seed: int = 0,
    progress: bool = False,
    per_unit: bool = False,
    by_class=None,
    transformations: str = "random",
    aggregation: str = "pool",
    grid_points: int = 9,
    alpha: float = 0.05,
    firing_rate: float = 0.01,
) -> ProbeReport:
    """Every measure of the probes, per layer, transform and magnitude, as one table (see the module docstring).

    Args:
        model: any module taking (B, C, H, W) images (a torchvision or timm model, a ViT, an AugNet).
        x: (N, C, H, W) images, N >= 8, on the model's device.
        transforms: augnet image transforms, their names (``"Rotate"``), or ``{name: transform}``.
        layers: ``"auto"`` (:func:`auto_layers`: the top-level blocks and the logits) or layer
            names as for :func:`~augnet.probes.features` (``"name#k"`` for a reused module's call).
        magnitudes: the magnitudes in (0, 1] swept (default 0.25, 0.5, 1).
        tau: Zaidi et al.'s activity threshold on the normalised channel activity (0.05, their
            ImageNet value; :func:`~augnet.probes.select_tau` chooses one by ablation).
        holdout: the fraction of inputs the equivariance maps are evaluated on (Tensmeyer & Martinez).
        lie: compute the Lie derivative (one forward-mode pass per continuous transform).
        batch_size: rows per forward pass (default 256; at most 64 for the Lie derivative, whose
            forward-mode pass holds every activation's tangent too).
        copies: for an AugNet, the copies it averages.
        seed: seeds every draw: the transforms' parameters (``seed + 1``; the ranker's second copies
            ``seed + 2``), the baseline pairing, the held-out rows, an AugNet's own draws. An int in
            ``[0, 2**63 - 3]``.
        progress: show a progress bar (one step per pass over the inputs).
        per_unit: keep the per-unit values of the measures of :data:`UNIT_MEASURES` (one per channel)
            in :attr:`ProbeReport.units`; :meth:`ProbeReport.save` writes them beside the table.
        by_class: (N,) integer labels: every swept measure is also measured on each class's inputs
            alone (records with ``class`` set), and the verdict says which classes the last layer
            treats invariantly (normalised variance at most :data:`INVARIANT_NV`). A class with too
            few inputs for a measure gets NaN with a note.
        transformations: ``"random"`` (default: each input under one random draw of the transform
            per magnitude, the unit measures comparing that draw with the clean input, ``T = 2``) or
            ``"grid"`` (each input under every value of a fixed grid per magnitude,
            :func:`~augnet.probes.families.grid_values`: ``grid_points`` values of a continuous
            transform's parameter, evenly spaced over its range at the magnitude, or a gate's 0 and 1;
            the unit measures read the ``T = grid_points`` views, the pairwise measures are averaged
            over the grid's views, and ``info["grid"]`` lists the values).
        aggregation: how a feature map becomes units for the unit measures. ``"pool"`` (default): its
            channels averaged over positions first, then measured (``U = C``); ``"positions"``: each
            (channel, position) measured as a unit, then the statistics averaged over the positions
            of each channel (:func:`~augnet.probes.measures.channel_mean`), which also allows the
            same-equivariance of ``"grid"`` views that are exact actions (quarter turns, flips,
            whole-pixel shifts, compared where the shifted-back map has content: the border
            effects of a padded convolution count against it). The default pools because it
            holds (N, C) per layer and view as the rest of the report does (``"positions"`` holds
            (N, C, H, W), every position of every layer, for a few hundred inputs rather than
            20,000) and reads the layer as the pairwise measures and a classifier head do; the two
            can rank layers differently. The pairwise measures always read pooled features.
        grid_points: the values of a continuous transform's grid (default 9, >= 2).
        alpha: the level of the per-unit ANOVA (Bonferroni over the layer's units; default 0.05).
        firing_rate: Goodfellow et al.'s global firing rate (default 0.01).

    Raises:
        TypeError, ValueError: before the model runs on the inputs (one checking pass of one image
            finds layers that are not one call of a module): a bad argument, naming it; images that
            are not finite (naming them), on meta, or in another dtype or on another device than the
            model's parameters.

    Returns:
        A :class:`ProbeReport`: ``.records`` (the tidy table), ``.table()``, ``.save(path)`` (JSON or
        CSV), ``.heatmap(path)`` and ``.verdict()``; ``.units`` with ``per_unit``.

    Examples:
        >>> from augnet.transforms import image as T
        >>> net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3))
        >>> rep = report(net, torch.rand(16, 3, 8, 8), [T.Rotate()], layers=["1", "logits"], magnitudes=[1.0])
        >>> sorted({r["measure"] for r in rep.records})[:3], rep.value("inv_augnet", "1", "Rotate") <= 1
        (['alignment', 'anova_invariant', 'equivariance_error'], True)
    """
    from augnet.probes.features import check_layers
    from augnet.probes.measures import _check_alpha
    from augnet.probes.ranking_model import _row_values
    from augnet.probes.unit_invariance import _check_tau

    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    if not isinstance(x, Tensor):
        raise TypeError(f"x must be a tensor of images, got {type(x).__name__}")
    if x.dim() != 4 or not x.is_floating_point() or len(x) < 8:
        raise ValueError(f"x must be (N, C, H, W) floating-point images with N >= 8, got {x.dtype} {tuple(x.shape)}")
    named = _transforms(transforms)
    for t in named.values():
        t.check_input(x)
    mags = _magnitudes(magnitudes)
    if layers != "auto" and not isinstance(layers, str) and not isinstance(layers, Sequence):
        raise TypeError(f"layers must be 'auto', a layer name or a list of them, got {type(layers).__name__}")
    names = None if layers == "auto" else [layers] if isinstance(layers, str) else list(layers)
    if names is not None and (not names or not all(isinstance(n, str) for n in names) or len(set(names)) != len(names)):
        raise ValueError(f"layers must be 'auto' or distinct layer names, got {layers!r}")
    tau = _check_tau(tau)
    if isinstance(holdout, bool) or not isinstance(holdout, numbers.Real) or not 0 < holdout < 1:
        raise ValueError(f"holdout must be a fraction in (0, 1), got {holdout!r}")
    step = batch_size_of(batch_size)
    seed = check_seed(seed)
    check_flag("lie", lie)
    check_flag("progress", progress)
    check_flag("per_unit", per_unit)
    if transformations not in TRANSFORMATIONS:
        raise ValueError(f"transformations must be one of {TRANSFORMATIONS}, got {transformations!r}")
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {aggregation!r}")
    alpha = _check_alpha(alpha)
    if isinstance(firing_rate, bool) or not isinstance(firing_rate, numbers.Real) or not 0 < firing_rate < 1:
        raise ValueError(f"firing_rate must be a rate in (0, 1), got {firing_rate!r}")
    labels = _labels(by_class, len(x))
    n, size = len(x), tuple(x.shape[-2:])
    grid = transformations == "grid"
    grids = {name: {m: grid_values(t, m, grid_points, size) for m in mags} for name, t in named.items()} if grid else {}
    check_model_input(model, x)
    kwargs0 = forward_kwargs(model, copies, seed, x.device)
    if names is None:
        names = auto_layers(model, x, **kwargs0)
    check_layers(model, x, names, **kwargs0)  # unknown layers, calls of a reused module: one pass of one image
    start_time = time.perf_counter()
    positions = aggregation == "positions"
    opts = _Options(tau, holdout, seed, alpha, float(firing_rate), positions, grid, per_unit, size)
    plan = {name: (rank_param(t), 0.5 if rank_param(t) == "gate" else max(mags)) for name, t in named.items()}
    views = {name: sum(len(grids[name][m]) for m in mags) if grid else len(mags) for name in named}
    passes = 1 + sum(views[k] + 1 + (p is not None and (grid or m not in mags)) for k, (p, m) in plan.items())
    passes += sum(3 for t in named.values() if lie and family(t) is not None)
    from tqdm.auto import tqdm

    bar = tqdm(total=passes, disable=not progress, desc="probe", unit="pass")
    shapes: dict[str, tuple] = {}

    def read(source, index: int, what: str) -> dict[str, Tensor]:
        bar.set_postfix_str(what)
        keep = _Filler(n)

        def on_batch(start: int, stop: int, batch: dict[str, Tensor]) -> None:
            for nm, a in batch.items():
                shapes.setdefault(nm, tuple(a.shape[2:]) if a.dim() == 4 else ())
            keep(start, stop, {nm: _read_units(a.detach(), positions).cpu() for nm, a in batch.items()})

        kwargs = forward_kwargs(model, copies, seed, x.device, "shared", index)
        with torch.no_grad():
            stream_features(model, source, names, on_batch, "none", step, **kwargs)
        bar.update(1)
        got = keep.result()
        return {nm: got[nm] for nm in names}

    records: list[dict] = []
    units: dict = {}
    perm = derangement(n, seeded(seed))
    with evaluating(model):
        clean = read(x, 0, "clean")
        index = 0
        for t_name, t in named.items():
            param, rank_mag = plan[t_name]
            kept = None
            for m in mags:
                rng = str(t.natural_range(m, size))
                if grid:
                    base = t.draw_params(x, m, seeded(seed + 1, x.device))
                    read_views, actions = [], []
                    for v in grids[t_name][m]:
                        index += 1
                        inputs = Transformed(t, x, m, params=grid_params(t, base, v, size))
                        read_views.append(read(inputs, index, f"{t_name} {m:g} at {v:.3g}"))
                        actions.append(_exact_action(t, v, inputs, x))
                else:
                    index += 1
                    moved_inputs = Transformed(t, x, m, seeded(seed + 1, x.device))
                    read_views, actions = [read(moved_inputs, index, f"{t_name} {m:g}")], [None]
                    if param is not None and m == rank_mag:
                        kept = (read_views[0], moved_inputs)
                for layer in names:
                    layer_views = [v[layer] for v in read_views]
                    key = (layer, t_name, m, rng)
                    _layer_measures(records, units, key, clean[layer], layer_views, perm, opts)
                    _unit_records(records, units, key, clean[layer], layer_views, actions, shapes[layer], opts)
                    for k in labels.unique().tolist() if labels is not None else []:
                        rows = (labels == k).nonzero().flatten()
                        sub = [v[rows] for v in layer_views]
                        kperm = derangement(len(rows), seeded(seed)) if len(rows) >= 2 else None
                        _layer_measures(records, units, key, clean[layer][rows], sub, kperm, opts, k)
                        _unit_records(records, units, key, clean[layer][rows], sub, actions, shapes[layer], opts, k)
            if param is not None:
                if kept is None:
                    index += 1
                    moved_inputs = Transformed(t, x, rank_mag, seeded(seed + 1, x.device))
                    kept = (read(moved_inputs, index, f"{t_name} {rank_mag:g}"), moved_inputs)
                index += 1
                second = Transformed(t, x, rank_mag, seeded(seed + 2, x.device))
                other = read(second, index, f"{t_name} ranking")
                za, inputs_a = kept
                rng = str(t.natural_range(rank_mag, size))
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    try:
                        m_a = _row_values(inputs_a.params[param], param, n)
                        m_b = _row_values(second.params[param], param, n)
                        ranked = ranking_probe_per_layer(_pooled(za), _pooled(other), m_a, m_b, generator=seeded(seed))
                        note = ""
                    except ValueError as err:
                        ranked, note = None, str(err).split(";")[0]
                for layer in names:
                    acc = math.nan if ranked is None else ranked["accuracy"][layer]
                    share = math.nan if ranked is None else ranked["importance"][layer]
                    extra = note or _notes([w for w in caught if repr(layer) in str(w.message)])
                    _record(records, layer, t_name, rank_mag, rng, "ranking_accuracy", acc, extra)
                    _record(records, layer, t_name, rank_mag, rng, "importance", share, note)
            if lie and family(t) is not None:
                bar.set_postfix_str(f"{t_name} Lie derivative")
                out = lie_derivative(
                    model, x, t, names, lambda a: _pool(a, True), False, min(step, LIE_BATCH_SIZE), copies, seed
                )
                bar.update(3)
                for layer in names:
                    _record(records, layer, t_name, None, "", "lie_derivative", out["mean"][layer])
                    _record(records, layer, t_name, None, "", "lie_derivative_relative", out["mean_relative"][layer])
            elif lie:
                for layer in names:
                    note = f"{t_name} is not a continuous family: no Lie derivative"
                    _record(records, layer, t_name, None, "", "lie_derivative", math.nan, note)
                    _record(records, layer, t_name, None, "", "lie_derivative_relative", math.nan, note)
    bar.close()
    info = {
        "model": type(model).__name__,
        "features": describe(model, LOGITS, copies),
        "n_inputs": n,
        "input_shape": list(x.shape[1:]),
        "device": str(x.device),
        "layers": names,
        "transforms": list(named),
        "magnitudes": mags,
        "tau": tau,
        "holdout": holdout,
        "seed": seed,
        "batch_size": step,
        "units": {k: family(t).unit for k, t in named.items() if family(t) is not None},
        "transformations": transformations,
        "aggregation": aggregation,
        "alpha": alpha,
        "firing_rate": float(firing_rate),
        "per_unit": per_unit,
        "seconds": round(time.perf_counter() - start_time, 2),
    }
    if grid:
        info["grid"] = {k: {str(m): v for m, v in g.items()} for k, g in grids.items()}
    if labels is not None:
        info["classes"] = labels.unique().tolist()
    return ProbeReport(records, names, list(named), mags, info, units)


def _labels(by_class, n: int) -> Tensor | None:
    """``by_class`` checked: ``None``, or (N,) integer labels as a CPU tensor."""
    if by_class is None:
        return None
    if isinstance(by_class, Tensor):
        labels = by_class.detach().cpu()
    elif isinstance(by_class, Sequence) and not isinstance(by_class, str):
        if not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in by_class):
            raise TypeError("by_class must hold integer class labels")
        labels = torch.tensor(list(by_class), dtype=torch.long)
    else:
        raise TypeError(f"by_class must be None or (N,) integer labels, got {type(by_class).__name__}")
    if labels.dtype.is_floating_point or labels.dtype == torch.bool or labels.is_complex():
        raise TypeError(f"by_class must hold integer class labels, got {labels.dtype}")
    if labels.shape != (n,):
        raise ValueError(f"by_class must hold one label per input, shape ({n},), got {tuple(labels.shape)}")
    return labels.long()


@dataclass(frozen=True)
class _Options:
    tau: float
    holdout: float
    seed: int
    alpha: float
    rate: float
    positions: bool
    grid: bool
    per_unit: bool
    size: tuple


def _read_units(a: Tensor, positions: bool) -> Tensor:
    """A batch of a layer's output as (B, C) pooled (:func:`_pool`), or as (B, C, P) every position kept."""
    if not positions:
        return _pool(a, True)
    if a.dim() == 3:
        return a.transpose(1, 2)  # (B, tokens, D): D channels, the tokens as positions
    return a.flatten(2) if a.dim() > 2 else a.reshape(len(a), -1, 1)


def _pooled(read: dict[str, Tensor] | Tensor):
    """The pooled (B, C) features of a read (``"positions"`` reads are averaged over their positions)."""
    if isinstance(read, dict):
        return {k: _pooled(v) for k, v in read.items()}
    return read.mean(-1) if read.dim() == 3 else read


def _exact_action(t, value: float, inputs: Transformed, x: Tensor):
    """The exact action (:data:`~augnet.probes.measures.ACTIONS`) a grid view applies to the images, or ``None``.

    A candidate is read from the transform and its grid value (a gate of a flip, a rotation by a
    multiple of 90 degrees, a whole-pixel shift), then checked on the first images.
    """
    from augnet.probes.measures import act

    name = type(t).__name__
    if name in ("HorizontalFlip", "VerticalFlip"):
        cands = [("hflip" if name == "HorizontalFlip" else "vflip")] if value == 1 else []
    elif name == "Rotate":
        k = value / (math.pi / 2)
        cands = ["rot90", "rot270"] if abs(k - round(k)) < 1e-9 and round(k) % 2 else []
        cands += ["rot180"] if abs(k - round(k)) < 1e-9 and round(k) % 4 == 2 else []
    elif name in ("TranslateX", "TranslateY") and abs(value - round(value)) < 1e-6 and round(value) != 0:
        d = round(value)
        cands = [("translate", 0, d), ("translate", 0, -d)] if name == "TranslateX" else []
        cands += [("translate", d, 0), ("translate", -d, 0)] if name == "TranslateY" else []
    else:
        cands = []
    few = x[: min(4, len(x))]
    moved = inputs.rows(0, len(few))
    tol = 1e-4 * (1 + float(few.abs().max()))
    for c in cands:
        try:
            if float((act(few, c) - moved).abs().max()) <= tol:
                return c
        except ValueError:  # a quarter turn of non-square images
            continue
    return None


def _layer_action(action, shape: tuple, size: tuple):
    """An action on the images as one on a layer's (H', W') maps, or ``None`` where it is not exact there."""
    if action is None or len(shape) != 2:
        return None
    if isinstance(action, str):
        return None if action in ("rot90", "rot270") and shape[0] != shape[1] else action
    sy, sx = size[0] / shape[0], size[1] / shape[1]
    _, dy, dx = action
    if sy != int(sy) or sx != int(sx) or dy % int(sy) or dx % int(sx):
        return None
    return ("translate", dy // int(sy), dx // int(sx))


def _swept_values(z: Tensor, z_t: Tensor, perm, opts: _Options) -> dict[str, tuple[float, str]]:
    """The pairwise measures of one layer on pooled (N, C) clean and moved features: ``{measure: (value, note)}``."""
    out = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        clean_base = invariance_score(z, z_t, "cosine", "clean", permutation=perm)
        moved_base = invariance_score(z, z_t, "cosine", "transformed", permutation=perm)
    note = _notes(caught)
    out["inv_augnet"] = (float(clean_base.nanmedian()), note)
    out["inv_bouchacourt"] = (float(moved_base.nanmedian()), note)
    aligned = equivariance_alignment(z, z_t, generator=seeded(opts.seed))
    out["alignment"] = (float(aligned["difference"]), "")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scores = equivariance_report(z, z_t, holdout=opts.holdout, seed=opts.seed)["scores"]
    note = _notes(caught)
    out["equivariance_error"] = (float(scores["equivariance"]), note)
    out["invariance_error"] = (float(scores["invariance"]), "")  # M = I: nothing fitted
    if bool((z >= 0).all()) and bool((z_t >= 0).all()):
        found = neuron_invariance(z, z_t, opts.tau, units="channel", per_input=False)
        out["neuron_invariance"] = (float(found["summary"]["mean"]), "")
    else:
        note = "negative activations: Zaidi et al.'s measure needs a layer after its ReLU"
        out["neuron_invariance"] = (math.nan, note)
    return out


def _layer_measures(records, units, key, clean, views, perm, opts: _Options, cls=None) -> None:
    """The pairwise measures of one layer at one magnitude (averaged over a grid's views), of every input or a class."""
    layer, t_name, m, rng = key
    z = _pooled(clean)
    try:
        if perm is None:
            raise ValueError("fewer than 2 inputs")
        found = [_swept_values(z, _pooled(v), perm, opts) for v in views]
    except (ValueError, TypeError) as err:
        if cls is None:
            raise type(err)(f"layer {layer!r}, {t_name} at magnitude {m:g}: {err}") from err
        for measure in _SWEPT[:6]:
            _record(records, layer, t_name, m, rng, measure, math.nan, f"class {cls}: {str(err).split(';')[0]}", cls)
        return
    for measure in found[0]:
        values = torch.tensor([f[measure][0] for f in found], dtype=torch.float64)
        value = float(values.nanmean()) if len(found) > 1 and bool((~values.isnan()).any()) else float(values[0])
        note = "; ".join(dict.fromkeys(f[measure][1] for f in found if f[measure][1]))
        if len(found) > 1:
            note = "; ".join(filter(None, [f"mean over the {len(found)} grid views", note]))
        _record(records, layer, t_name, m, rng, measure, value, note, cls)


def _unit_records(records, units, key, clean, views, actions, shape, opts: _Options, cls=None) -> None:
    """The per-unit measures of one layer at one magnitude: a record of each's mean over units, and the units."""
    from augnet.probes.measures import (
        anova_invariance,
        channel_mean,
        distance_invariance,
        goodfellow_invariance,
        normalized_variance,
        same_equivariance,
    )

    layer, t_name, m, rng = key
    stack = torch.stack(views if opts.grid else [clean, *views])  # (T, N, C[, P])
    channels = stack.shape[2]

    def per_channel(v: Tensor) -> Tensor:
        return channel_mean(v, channels) if opts.positions else v

    found: dict[str, tuple[Tensor | None, str]] = {}
    try:
        flat = stack.reshape(stack.shape[0], stack.shape[1], -1)
        nv = normalized_variance(flat)
        for name in ("normalized_variance", "transformation_variance", "sample_variance"):
            found[name] = (per_channel(nv[name]), "")
        anova = anova_invariance(flat, opts.alpha)
        invariant = torch.where(anova["p_adjusted"].isnan(), torch.nan, anova["invariant"].double())
        found["anova_invariant"] = (per_channel(invariant), "")
        moved = torch.stack(views).reshape(len(views), flat.shape[1], -1)
        good = goodfellow_invariance(clean.reshape(flat.shape[1], -1), moved, opts.rate)
        found["goodfellow"] = (per_channel(good["invariance"]), "")
        found["goodfellow_local"] = (per_channel(good["local_rate"]), "")
        found["goodfellow_global"] = (per_channel(good["global_rate"]), "")
        found["normalized_distance"] = (per_channel(distance_invariance(flat)["normalized_distance"]), "")
    except ValueError as err:
        note = f"class {cls}: {str(err).split(';')[0]}" if cls is not None else str(err).split(";")[0]
        found = {name: (None, note) for name in UNIT_MEASURES[:-1]}
    found["same_equivariance"] = _same_values(clean, views, actions, shape, opts, same_equivariance)
    for name in UNIT_MEASURES:
        values, note = found[name]
        value = math.nan if values is None or bool(values.isnan().all()) else float(values.nanmean())
        _record(records, layer, t_name, m, rng, name, value, note, cls)
        if opts.per_unit and values is not None:
            units[(layer, t_name, m, name, cls)] = values


def _same_values(clean, views, actions, shape, opts: _Options, same_equivariance) -> tuple[Tensor | None, str]:
    """Per-channel same-equivariance over the grid views that are exact actions, with a note; ``None`` where n/a."""
    if not opts.grid or not opts.positions:
        return None, "same-equivariance needs transformations='grid' and aggregation='positions'"
    if len(shape) != 2:
        return None, "not a feature map (N, C, H, W)"
    pairs = [(v, _layer_action(a, shape, opts.size)) for v, a in zip(views, actions) if a is not None]
    pairs = [(v, a) for v, a in pairs if a is not None]
    if not pairs:
        return None, "no view of the grid is an exact action on this layer (quarter turn, flip, whole-pixel shift)"
    n, c = clean.shape[:2]
    maps = clean.reshape(n, c, *shape)
    try:
        out = same_equivariance(maps, [v.reshape(n, c, *shape) for v, _ in pairs], [a for _, a in pairs])
    except ValueError as err:
        return None, str(err).split(";")[0]
    names = ", ".join(dict.fromkeys(a if isinstance(a, str) else f"shift {a[1:]}" for _, a in pairs))
    return out["normalized"], f"{len(pairs)} of {len(views)} views compared ({names})"
