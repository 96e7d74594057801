"""The measures of :func:`augnet.probes.report.report`: their table, and how each (layer, transform, magnitude) is
measured.

:data:`MEASURES` lists every measure with its paper and the value of an invariant layer;
:func:`_layer_measures` records the pairwise measures of one layer (on pooled features, averaged over
a grid's views) and :func:`_unit_records` the per-unit ones (:mod:`augnet.probes.measures`), for
every input or one class; the rest finds the exact actions of a grid's views for same-equivariance.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import torch
from torch import Tensor

from augnet._labels import class_labels
from augnet.probes._common import Transformed, seeded
from augnet.probes.equivariance import equivariance_report
from augnet.probes.features import reduce_features
from augnet.probes.invariance import invariance_score
from augnet.probes.measures import (
    act,
    anova_invariance,
    channel_mean,
    distance_invariance,
    goodfellow_invariance,
    normalized_variance,
    same_equivariance,
)
from augnet.probes.similarity import equivariance_alignment
from augnet.probes.stats import p_adjust
from augnet.probes.unit_invariance import neuron_invariance

__all__ = ["AGGREGATIONS", "INVARIANT_NV", "MEASURES", "TRANSFORMATIONS", "UNIT_MEASURES"]

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


def _pool(a: Tensor, image_input: bool) -> Tensor:
    """A layer's output as (B, C): channels averaged over positions, or, for an image model, a 3-D output's
    tokens averaged (``reduce="tokens"`` of :func:`~augnet.probes.features.reduce_features`)."""
    if a.dim() == 3 and image_input:
        return reduce_features(a, "tokens")
    return reduce_features(a, "mean") if a.dim() > 2 else a.reshape(len(a), -1)


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


def _labels(by_class, n: int) -> Tensor | None:
    """``by_class`` checked: ``None``, or (N,) int64 labels >= 0 on the CPU, read as every probe reads labels
    (``augnet.probes._labels.class_labels``: any integer dtype, a NumPy array or a sequence, whole floats,
    (N,) or (N, 1))."""
    return None if by_class is None else class_labels(by_class, n, "by_class")


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
    """The exact action (``augnet.probes.measures.ACTIONS``) a grid view applies to the images, or ``None``.

    A candidate is read from the transform and its grid value (a gate of a flip, a rotation by a
    multiple of 90 degrees, a whole-pixel shift), then checked on the first images.
    """
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
    """An exact action on the images (not ``None``) as one on a layer's (H', W') maps (``shape``), or ``None`` where
    it is not exact there."""
    if isinstance(action, str):
        return None if action in ("rot90", "rot270") and shape[0] != shape[1] else action
    sy, sx = size[0] / shape[0], size[1] / shape[1]
    _, dy, dx = action
    if sy != int(sy) or sx != int(sx) or dy % int(sy) or dx % int(sx):
        return None
    return ("translate", dy // int(sy), dx // int(sx))


#: The note of a measure read on a layer whose features take one value over the inputs and their transformations
#: (e.g. a zero-initialised head: only its bias): NaN where a measure divides by their spread, chance or 0 elsewhere.
CONSTANT = "features constant over the inputs"


def _constant(clean: Tensor, views: list[Tensor]) -> bool:
    """Whether every unit of ``clean`` and of every view takes one value over the inputs (and the views)."""
    first = clean[:1]
    return all(bool((v == first).all()) for v in (clean, *views))


def _with_constant(value: float, note: str, measure: str, constant: bool) -> str:
    """``note``, with :data:`CONSTANT` where the features are constant and the value NaN without a note, or a
    measure that reads them as such (``alignment`` 0)."""
    if constant and ((math.isnan(value) and not note) or measure == "alignment"):
        return "; ".join(filter(None, [CONSTANT, note]))
    return note


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
    constant = _constant(z, [_pooled(v) for v in views])
    for measure in found[0]:
        values = torch.tensor([f[measure][0] for f in found], dtype=torch.float64)
        value = float(values.nanmean()) if len(found) > 1 and bool((~values.isnan()).any()) else float(values[0])
        note = "; ".join(dict.fromkeys(f[measure][1] for f in found if f[measure][1]))
        if len(found) > 1:
            note = "; ".join(filter(None, [f"mean over the {len(found)} grid views", note]))
        note = _with_constant(value, note, measure, constant)
        _record(records, layer, t_name, m, rng, measure, value, note, cls)


#: Units measured at once by :func:`_by_units`: bounds the measures' float64 temporaries to
#: ``T * N * 64`` values whatever the layer's width (20,000 inputs of a 1,000-class head: 20 MB, not 320).
UNIT_CHUNK = 64


def _by_units(measure, *activations: Tensor) -> dict[str, Tensor]:
    """``measure`` on slices of :data:`UNIT_CHUNK` units (the last dimension) of every tensor; its (U,) outputs joined.

    Exact for the per-unit measures, each unit's value depending on that unit alone (the layer-wide
    outputs, 0-d, are dropped).
    """
    width = activations[0].shape[-1]
    parts = [measure(*(a[..., i : i + UNIT_CHUNK] for a in activations)) for i in range(0, width, UNIT_CHUNK)]
    return {k: torch.cat([p[k] for p in parts]) for k, v in parts[0].items() if v.dim() == 1}


def _unit_records(records, units, key, clean, views, actions, shape, opts: _Options, cls=None) -> None:
    """The per-unit measures of one layer at one magnitude: a record of each's mean over units, and the units."""
    layer, t_name, m, rng = key
    stack = torch.stack(views if opts.grid else [clean, *views])  # (T, N, C[, P])
    channels = stack.shape[2]

    def per_channel(v: Tensor) -> Tensor:
        return channel_mean(v, channels) if opts.positions else v

    found: dict[str, tuple[Tensor | None, str]] = {}
    try:
        flat = stack.reshape(stack.shape[0], stack.shape[1], -1)
        nv = _by_units(normalized_variance, flat)
        for name in ("normalized_variance", "transformation_variance", "sample_variance"):
            found[name] = (per_channel(nv[name]), "")
        # The F tests unit by unit, the multiple-testing correction over every unit of the layer at once.
        p_value = _by_units(lambda a: anova_invariance(a, opts.alpha), flat)["p_value"]
        adjusted = p_adjust(p_value, "bonferroni")
        invariant = torch.where(adjusted.isnan(), torch.nan, (adjusted > opts.alpha).double())
        found["anova_invariant"] = (per_channel(invariant), "")
        moved = torch.stack(views).reshape(len(views), flat.shape[1], -1)
        good = _by_units(lambda c, v: goodfellow_invariance(c[0], v, opts.rate), clean.reshape(1, flat.shape[1], -1),
                         moved)  # fmt: skip
        found["goodfellow"] = (per_channel(good["invariance"]), "")
        found["goodfellow_local"] = (per_channel(good["local_rate"]), "")
        found["goodfellow_global"] = (per_channel(good["global_rate"]), "")
        found["normalized_distance"] = (per_channel(_by_units(distance_invariance, flat)["normalized_distance"]), "")
    except ValueError as err:
        note = f"class {cls}: {str(err).split(';')[0]}" if cls is not None else str(err).split(";")[0]
        found = {name: (None, note) for name in UNIT_MEASURES[:-1]}
    found["same_equivariance"] = _same_values(clean, views, actions, shape, opts)
    constant = _constant(clean, views)
    for name in UNIT_MEASURES:
        values, note = found[name]
        value = math.nan if values is None or bool(values.isnan().all()) else float(values.nanmean())
        note = _with_constant(value, note, name, constant)
        _record(records, layer, t_name, m, rng, name, value, note, cls)
        if opts.per_unit and values is not None:
            units[(layer, t_name, m, name, cls)] = values


def _same_values(clean, views, actions, shape, opts: _Options) -> tuple[Tensor | None, str]:
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
    if n * math.prod(shape) < 2:
        few = f"got {n} x {math.prod(shape)}"
        return out["normalized"], f"same_equivariance needs at least 2 values per channel (samples x positions), {few}"
    return out["normalized"], f"{len(pairs)} of {len(views)} views compared ({names})"
