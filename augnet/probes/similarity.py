"""Which transformations explain the variation within a class? (Bouchacourt et al., section 4 and appendix).

Similarity change (eq. 2). For a pair ``(x_i, x_j)`` of inputs of the same
class, features ``z = phi(x)`` and cosine similarity ``s``, a transformation
``T`` changes the pair's similarity by::

    change_ij = s(z_i, phi(T x_j)) - s(z_i, z_j)

Only the second input of the pair is transformed. The paper's statistic
(eq. 2) is the *percent* similarity change of each pair::

    percent_ij = 100 * change_ij / |s(z_i, z_j)|

(the paper's features follow a ReLU, so their cosine similarities are
non-negative and ``|s| = s``; the absolute value keeps the sign of
``percent_ij`` that of ``change_ij`` for features of any sign). A pair whose
clean similarity is exactly 0 has no percent change: it is left out of the
percent statistics and counted in ``n_undefined``. Per class (and per
transformation and magnitude in :func:`similarity_search`) the probe reports

- ``percent_change``: the mean of ``percent_ij`` over the class's pairs, the
  paper's "average percent similarity change" (a mean of per-pair ratios, not a
  ratio of means; NaN when no pair has a defined percent change);
- ``boosted``: the proportion of pairs whose similarity increases (``change > 0``);
- ``percent_boost``: the mean of ``percent_ij`` over the boosted pairs (NaN when
  none is boosted);
- ``weighted_boost``: ``percent_boost * boosted``, the paper's weighted boost
  (appendix E.2: "average percent boost * proportion of image pairs boosted"),
  in percent; 0 when no pair is boosted. It rewards transformations that bring
  many pairs closer by much rather than a few pairs by a lot or many by a hair;
- ``mean_change``: the mean of ``change_ij`` (cosine units);
- ``clean_similarity``: the mean of ``s(z_i, z_j)``;
- ``percent_change_of_means``: ``100 * mean_change / clean_similarity``, the
  change of the mean similarity relative to the mean similarity (a ratio of
  means, *not* the paper's statistic; NaN when the mean similarity is 0);
- ``mean_positive_change``: ``mean(max(change, 0))``, the mean positive change
  times ``boosted`` in cosine units (a weighted boost of the raw changes, *not*
  the paper's, which weights percent changes);
- ``n_pairs`` and ``n_undefined``.

A transformation that captures a factor of variation of a class brings some of
its pairs closer, so it ranks high by ``weighted_boost`` (the default of
:func:`top_transforms_per_class`) even when it moves other pairs apart: a
randomly drawn rotation is as likely to widen an angle between two rotated
copies as to narrow it, so ``mean_change`` is often negative for every
transformation and ranks the weakest one first. A model invariant to ``T``
gives ``change = 0`` for every pair, whatever the data.
:func:`similarity_change_distributions` gathers, for each transformation, the
per-class values of a statistic (the distributions of the paper's Fig. 3A),
and :func:`plot_similarity_change_distributions` draws them.

Features must be finite: a NaN or infinite feature raises a ValueError rather
than turning the statistics of its class into NaN (or, in the alignment, its
displacement into a zero one).

Equivariance alignment (appendix D). For displacements ``d_i = phi(T x_i) - phi(x_i)``
(rows of a (B, D) matrix), the alignment is the mean cosine similarity of the
displacements of two different samples, ``mean_{i != j} cos(d_i, d_j)``
(``reference="pairwise"``, the paper's choice) or of each displacement with
the mean of the others (``reference="mean"``). The baseline is the same
statistic after each column (feature dimension) of the displacement matrix is
shuffled independently across samples; the probe reports both and their
difference, the paper's score.

What the difference detects, precisely: the shuffle keeps each feature
dimension's distribution of displacements and only breaks which values occur
together in one sample. Two independent rows have the same expected dot product
before and after (it is the squared mean displacement) and the same expected
squared norm, so the score and the baseline differ only through the
normalisation in the cosine: the difference is large when displacements share
a direction while their lengths vary across samples (long and short
coordinates are then mixed by the shuffle). It does not detect:

- a constant shift ``phi(T x) = phi(x) + c``: every displacement is ``c``, each
  column is constant, the shuffle changes nothing, and the difference is
  exactly 0 (up to the rounding of ``z_t - z``), although the map is perfectly
  equivariant (and score and baseline are both 1);
- a generic linear map ``phi(T x) = M phi(x)`` of zero-mean features: the
  displacements ``(M - I) z_i`` point every way, as do their shuffles, so
  score, baseline and difference are all about 0;
- invariance: zero displacements have no direction; they count as cosine 0
  with every other displacement, so an invariant model scores 0.

Bouchacourt, Ibrahim and Morcos, "Grounding inductive biases in natural
images: invariance stems from variations in data", NeurIPS 2021.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from augnet.probes._common import check_draws, forward_kwargs, seeded, summary
from augnet.probes.features import LOGITS, features

__all__ = [
    "REFERENCES",
    "STATISTICS",
    "equivariance_alignment",
    "plot_similarity_change_distributions",
    "same_class_pairs",
    "similarity_change",
    "similarity_change_distributions",
    "similarity_search",
    "top_transforms_per_class",
]

#: The per-class statistics of :func:`similarity_change`, and the keys :func:`top_transforms_per_class` ranks by.
STATISTICS = (
    "percent_change",
    "boosted",
    "percent_boost",
    "weighted_boost",
    "mean_change",
    "percent_change_of_means",
    "mean_positive_change",
    "clean_similarity",
)
REFERENCES = ("pairwise", "mean")


def _check_labels(y, n: int) -> Tensor:
    if not isinstance(y, Tensor):
        raise TypeError(f"y must be a tensor of class labels, got {type(y).__name__}")
    if y.dim() != 1 or y.shape[0] != n:
        raise ValueError(f"y must have shape ({n},), one label per sample, got {tuple(y.shape)}")
    if y.is_floating_point() or y.is_complex() or y.dtype == torch.bool:
        raise TypeError(f"y must hold integer class labels, got dtype {y.dtype}")
    return y.cpu()


def same_class_pairs(y: Tensor, pairs_per_class: int | None = None, generator: torch.Generator | None = None) -> Tensor:
    """Ordered pairs ``(i, j)``, ``i != j``, of samples with the same label.

    Args:
        y: integer class labels.
        pairs_per_class: draw this many pairs per class at random, without
            replacement (all of a class's pairs if it has fewer); ``None`` takes
            every ordered pair.
        generator: draws the pairs.

    Returns:
        (P, 2) int64 indices, grouped by class in increasing label order.

    Examples:
        >>> same_class_pairs(torch.tensor([0, 1, 0, 1])).tolist()
        [[0, 2], [2, 0], [1, 3], [3, 1]]
    """
    if not isinstance(y, Tensor):
        raise TypeError(f"y must be a tensor of class labels, got {type(y).__name__}")
    y = _check_labels(y, len(y) if y.dim() == 1 else -1)
    if pairs_per_class is not None and (
        isinstance(pairs_per_class, bool) or not isinstance(pairs_per_class, numbers.Integral) or pairs_per_class < 1
    ):
        raise ValueError(f"pairs_per_class must be a positive integer or None, got {pairs_per_class!r}")
    chunks = []
    for c in torch.unique(y):
        members = torch.nonzero(y == c).flatten()
        k = len(members)
        if k < 2:
            continue
        i, j = torch.meshgrid(torch.arange(k), torch.arange(k), indexing="ij")
        off = i != j
        pairs = torch.stack([members[i[off]], members[j[off]]], 1)
        if pairs_per_class is not None and len(pairs) > pairs_per_class:
            pairs = pairs[torch.randperm(len(pairs), generator=generator)[:pairs_per_class]]
        chunks.append(pairs)
    if not chunks:
        raise ValueError("no class has two samples, so there is no same-class pair")
    return torch.cat(chunks)


def _cosine(a: Tensor, b: Tensor) -> Tensor:
    return F.cosine_similarity(a.flatten(1).double(), b.flatten(1).double(), dim=1, eps=1e-12)


def _check_finite(z: Tensor, name: str) -> None:
    if z.is_complex():
        raise TypeError(f"{name} must hold real numbers, got dtype {z.dtype}")
    bad = ~torch.isfinite(z.detach())
    if bool(bad.any()):
        rows = torch.nonzero(bad.flatten(1).any(1)).flatten().tolist()
        raise ValueError(
            f"{name} holds non-finite values (NaN or inf) in sample(s) {rows[:10]}"
            f"{' ...' if len(rows) > 10 else ''}; drop those samples (or fix the model) before probing"
        )


def _percent(clean: Tensor, change: Tensor) -> Tensor:
    """Per-pair percent change ``100 * change / |clean|``; NaN where the clean similarity is 0."""
    defined = clean != 0
    return torch.where(defined, 100.0 * change / torch.where(defined, clean.abs(), torch.ones_like(clean)), torch.nan)


def _stats(clean: Tensor, change: Tensor) -> dict[str, float]:
    mean_clean = float(clean.mean())
    mean_change = float(change.mean())
    percent = _percent(clean, change)
    defined = ~percent.isnan()
    up = change > 0
    boosted = float(up.double().mean())
    up_percent = percent[up & defined]
    percent_boost = float(up_percent.mean()) if up_percent.numel() else math.nan
    weighted = percent_boost * boosted if bool(up.any()) else 0.0  # no pair boosted: no boost
    return {
        "n_pairs": int(change.numel()),
        "n_undefined": int((~defined).sum()),
        "clean_similarity": mean_clean,
        "mean_change": mean_change,
        "percent_change": float(percent[defined].mean()) if bool(defined.any()) else math.nan,
        "boosted": boosted,
        "percent_boost": percent_boost,
        "weighted_boost": weighted,
        "percent_change_of_means": 100.0 * mean_change / mean_clean if mean_clean != 0 else math.nan,
        "mean_positive_change": float(change.clamp_min(0).mean()),
    }


def similarity_change(
    z: Tensor,
    z_t: Tensor,
    y: Tensor,
    pairs: Tensor | None = None,
    pairs_per_class: int | None = None,
    generator: torch.Generator | None = None,
) -> dict:
    """Change in same-class pair similarity when the second input is transformed (eq. 2).

    Args:
        z: features of the clean inputs.
        z_t: features of the transformed inputs (row ``j`` is ``phi(T x_j)``).
        y: integer class labels.
        pairs: (P, 2) same-class index pairs ``(i, j)``; by default drawn by
            :func:`same_class_pairs` with ``pairs_per_class`` and ``generator``.
        pairs_per_class, generator: see :func:`same_class_pairs`.

    Returns:
        ``{"pairs": (P, 2), "label": (P,), "clean": (P,) s(z_i, z_j),
        "transformed": (P,) s(z_i, z_t_j), "change": (P,), "percent": (P,)
        per-pair percent change (NaN where undefined), "per_class": {label:
        stats}, "overall": stats}`` with the stats of the module docstring.

    Raises:
        ValueError: if ``z`` or ``z_t`` holds a NaN or infinite value.

    Shape:
        - z, z_t: :math:`(B, ...)`, the same shape
        - y: :math:`(B,)`

    Examples:
        >>> z, y = torch.randn(6, 4), torch.tensor([0, 0, 0, 1, 1, 1])
        >>> out = similarity_change(z, z.clone(), y)
        >>> bool((out["change"] == 0).all()), out["per_class"][1]["boosted"]
        (True, 0.0)
    """
    if not isinstance(z, Tensor) or not isinstance(z_t, Tensor):
        raise TypeError("z and z_t must be tensors")
    if z.shape != z_t.shape:
        raise ValueError(f"z and z_t must have the same shape, got {tuple(z.shape)} and {tuple(z_t.shape)}")
    if z.dim() < 2 or z.shape[0] < 2:
        raise ValueError(f"z must be (B, ...) features with B >= 2, got shape {tuple(z.shape)}")
    y = _check_labels(y, z.shape[0])
    _check_finite(z, "z")
    _check_finite(z_t, "z_t")
    if pairs is None:
        pairs = same_class_pairs(y, pairs_per_class, generator)
    else:
        if not isinstance(pairs, Tensor):
            raise TypeError(f"pairs must be a (P, 2) tensor, got {type(pairs).__name__}")
        if pairs.dim() != 2 or pairs.shape[1] != 2 or pairs.shape[0] < 1 or pairs.is_floating_point():
            raise ValueError(f"pairs must be a non-empty (P, 2) integer tensor, got {tuple(pairs.shape)} {pairs.dtype}")
        pairs = pairs.long().cpu()
        if bool(((pairs < 0) | (pairs >= z.shape[0])).any()):
            raise ValueError(f"pairs index samples outside [0, {z.shape[0]})")
        if bool((pairs[:, 0] == pairs[:, 1]).any()):
            raise ValueError("pairs must pair two different samples")
        if bool((y[pairs[:, 0]] != y[pairs[:, 1]]).any()):
            raise ValueError("pairs must pair samples of the same class")
    i, j = pairs[:, 0].to(z.device), pairs[:, 1].to(z.device)
    clean = _cosine(z[i], z[j]).cpu()
    moved = _cosine(z[i], z_t[j]).cpu()
    change = moved - clean
    label = y[pairs[:, 0]]
    per_class = {int(c): _stats(clean[label == c], change[label == c]) for c in torch.unique(label)}
    return {
        "pairs": pairs,
        "label": label,
        "clean": clean,
        "transformed": moved,
        "change": change,
        "percent": _percent(clean, change),
        "per_class": per_class,
        "overall": _stats(clean, change),
    }


def _magnitudes_for(magnitudes, names: Sequence[str]) -> dict[str, list[float]]:
    if isinstance(magnitudes, Mapping):
        missing = [n for n in names if n not in magnitudes]
        if missing:
            raise ValueError(f"magnitudes has no entry for transform(s) {missing}")
        table = {n: magnitudes[n] for n in names}
    else:
        table = dict.fromkeys(names, magnitudes)
    out = {}
    for name, ms in table.items():
        ms = [ms] if isinstance(ms, numbers.Real) else list(ms)
        if not ms:
            raise ValueError(f"transform {name!r} has no magnitude to probe")
        bad = [m for m in ms if isinstance(m, bool) or not isinstance(m, numbers.Real)]
        if bad:
            raise TypeError(f"magnitudes for {name!r} must be numbers, got {bad}")
        out[name] = [float(m) for m in ms]
    return out


@torch.no_grad()
def similarity_search(
    model: nn.Module,
    x: Tensor,
    y: Tensor,
    transforms: Mapping[str, object],
    magnitudes: Sequence[float] | Mapping[str, Sequence[float]] = (0.5,),
    layer: str | None = None,
    reduce: str = "flatten",
    pairs_per_class: int | None = None,
    copies: int | None = None,
    seed: int = 0,
    batch_size: int | None = None,
    draws: str = "shared",
) -> list[dict]:
    """:func:`similarity_change` for every transformation and magnitude, as a table (Bouchacourt et al., section 4).

    The same same-class pairs (drawn with ``seed``) are used for every
    transformation; each transformation draws its parameters for the whole
    batch once per magnitude, from a generator seeded with ``seed + 1``.

    Args:
        model: probed in its current mode (call ``.eval()``).
        x: the inputs.
        y: their integer class labels.
        transforms: ``{name: transform}``, each called as ``t(x, magnitude, generator=g)``
            (augnet transforms, or any callable with that signature).
        magnitudes: magnitudes probed for every transform, or ``{name: magnitudes}``.
        layer: a module name for :func:`~augnet.probes.features`, ``"output"`` or ``"logits"``;
            ``None`` means ``"logits"`` (an AugNet's trunk outputs averaged over its copies,
            any other model's output).
        reduce: how a layer's activations are reduced (see :func:`~augnet.probes.features`).
        pairs_per_class: see :func:`same_class_pairs`.
        copies: for an AugNet, the number of copies it averages.
        seed: seeds the pairs, the transformations and AugNet's own draws.
        batch_size: run the model in chunks.
        draws: ``"shared"`` or ``"independent"`` AugNet draws in the clean and the
            transformed passes (see :func:`~augnet.probes.invariance_curve`).

    Returns:
        One row per (transform, magnitude, class): ``{"transform", "magnitude",
        "label"}`` and the statistics of :func:`similarity_change`
        (:data:`STATISTICS`, ``"n_pairs"``, ``"n_undefined"``).
    """
    if not isinstance(transforms, Mapping) or not transforms:
        raise ValueError("transforms must be a non-empty dict {name: transform}")
    not_callable = [n for n, t in transforms.items() if not callable(t)]
    if not_callable:
        raise TypeError(f"transform(s) {not_callable} are not callable")
    if not isinstance(x, Tensor):
        raise TypeError(f"x must be a tensor, got {type(x).__name__}")
    y = _check_labels(y, x.shape[0] if x.dim() else -1)
    per_transform = _magnitudes_for(magnitudes, list(transforms))
    check_draws(draws)
    pairs = same_class_pairs(y, pairs_per_class, seeded(seed))
    name = LOGITS if layer is None else layer
    clean = features(
        model, x, name, reduce=reduce, batch_size=batch_size, **forward_kwargs(model, copies, seed, x.device, draws)
    )[name]
    rows, index = [], 0
    for t_name, transform in transforms.items():
        for m in per_transform[t_name]:
            xt = transform(x, m, generator=seeded(seed + 1, x.device))
            index += 1
            kwargs = forward_kwargs(model, copies, seed, x.device, draws, index)
            moved = features(model, xt, name, reduce=reduce, batch_size=batch_size, **kwargs)[name]
            out = similarity_change(clean, moved, y, pairs=pairs)
            for label, stats in out["per_class"].items():
                rows.append({"transform": t_name, "magnitude": m, "label": label, **stats})
    return rows


def top_transforms_per_class(table: Sequence[Mapping], k: int = 5, by: str = "weighted_boost") -> dict[int, list[dict]]:
    """The ``k`` (transform, magnitude) rows that most bring each class's pairs closer.

    Args:
        table: rows of :func:`similarity_search`.
        k: how many rows to keep per class.
        by: the statistic to rank by (highest first), one of :data:`STATISTICS`
            except ``"clean_similarity"``; NaN values rank last.

    Returns:
        ``{label: [row, ...]}``, at most ``k`` rows per class, best first.

    Examples:
        >>> rows = [{"transform": "a", "magnitude": 0.5, "label": 0, "weighted_boost": 0.1},
        ...         {"transform": "b", "magnitude": 0.5, "label": 0, "weighted_boost": 0.3}]
        >>> [r["transform"] for r in top_transforms_per_class(rows, k=1)[0]]
        ['b']
    """
    rankable = tuple(s for s in STATISTICS if s != "clean_similarity")
    if by not in rankable:
        raise ValueError(f"by must be one of {rankable}, got {by!r}")
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    if isinstance(table, Mapping) or not isinstance(table, Sequence):
        raise TypeError(f"table must be a list of rows (dicts), got {type(table).__name__}")
    if not table:
        raise ValueError("table is empty")
    groups: dict[int, list[dict]] = {}
    for row in table:
        if not isinstance(row, Mapping) or "label" not in row or by not in row:
            raise ValueError(f"every row needs 'label' and {by!r}, got {row!r}")
        groups.setdefault(row["label"], []).append(dict(row))

    def key(row):
        v = float(row[by])
        return (math.isnan(v), -v if not math.isnan(v) else 0.0)

    return {label: sorted(rows, key=key)[:k] for label, rows in sorted(groups.items())}


def similarity_change_distributions(
    table: Sequence[Mapping], statistic: str = "percent_change", by_magnitude: bool = True
) -> dict:
    """Per-class values of a statistic for each transformation: the distributions of Bouchacourt et al.'s Fig. 3A.

    Fig. 3A shows, for every transformation, how the average similarity change
    of eq. 2 is distributed over the classes; a transformation that explains
    the variation of every class would sit above 0 for all of them.

    Args:
        table: rows of :func:`similarity_search` (one per transform, magnitude
            and class).
        statistic: the per-class value to gather, one of :data:`STATISTICS`
            (default the paper's ``"percent_change"``).
        by_magnitude: one distribution per ``(transform, magnitude)`` (each
            magnitude of a transformation is a transformation of its own, as in
            the paper's AutoAugment pool); ``False`` pools the magnitudes of a
            transformation, keyed by its name, with one value per (magnitude, class).

    Returns:
        ``{key: {"labels": [class, ...], "magnitudes": [...], "values": (n,)
        float64 tensor, "summary": summary(values)}}`` in the table's order of
        first appearance, ``key`` being ``(transform, magnitude)`` or
        ``transform``. NaN values (e.g. a class whose pairs have no defined
        percent change) stay in ``values`` and are left out of ``summary``.

    Examples:
        >>> rows = [{"transform": "a", "magnitude": 0.5, "label": c, "percent_change": v}
        ...         for c, v in [(0, -2.0), (1, 4.0)]]
        >>> d = similarity_change_distributions(rows)
        >>> d[("a", 0.5)]["values"].tolist(), d[("a", 0.5)]["summary"]["mean"]
        ([-2.0, 4.0], 1.0)
    """
    if statistic not in STATISTICS:
        raise ValueError(f"statistic must be one of {STATISTICS}, got {statistic!r}")
    if isinstance(table, Mapping) or not isinstance(table, Sequence):
        raise TypeError(f"table must be a list of rows (dicts), got {type(table).__name__}")
    if not table:
        raise ValueError("table is empty")
    groups: dict = {}
    for row in table:
        if not isinstance(row, Mapping) or any(k not in row for k in ("transform", "magnitude", "label", statistic)):
            raise ValueError(f"every row needs 'transform', 'magnitude', 'label' and {statistic!r}, got {row!r}")
        key = (row["transform"], float(row["magnitude"])) if by_magnitude else row["transform"]
        g = groups.setdefault(key, {"labels": [], "magnitudes": [], "values": []})
        g["labels"].append(row["label"])
        g["magnitudes"].append(float(row["magnitude"]))
        g["values"].append(float(row[statistic]))
    out = {}
    for key, g in groups.items():
        values = torch.tensor(g["values"], dtype=torch.float64)
        out[key] = {"labels": g["labels"], "magnitudes": g["magnitudes"], "values": values, "summary": summary(values)}
    return out


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
            ``{label: values}`` with 1-D values (NaN values are left out).
        path: where to write the PNG.
        statistic: the axis label (the statistic the values hold).
        title: optional figure title.
        kind: ``"box"`` or ``"violin"``.

    Returns:
        The path written.
    """
    if not isinstance(distributions, Mapping) or not distributions:
        raise ValueError("distributions must be a non-empty dict from similarity_change_distributions")
    values = {
        f"{key[0]} {key[1]:g}" if isinstance(key, tuple) and len(key) == 2 else str(key): (
            entry["values"] if isinstance(entry, Mapping) else entry
        )
        for key, entry in distributions.items()
    }
    from augnet.viz import plot_distributions

    return plot_distributions(values, path, f"{statistic} per class", kind=kind, title=title, zero_line=True)


def _unit(d: Tensor) -> Tensor:
    norm = d.norm(dim=1, keepdim=True)
    return torch.where(norm > 0, d / norm.clamp_min(torch.finfo(d.dtype).tiny), torch.zeros_like(d))


def _alignment(d: Tensor, reference: str) -> Tensor:
    """Per-sample alignment of the rows of ``d`` with the other rows. Shape: (B, D) -> (B,)."""
    b = d.shape[0]
    if reference == "pairwise":
        # mean_{j != i} cos(d_i, d_j) = (u_i . sum_j u_j - |u_i|^2) / (B - 1), with unit rows u.
        u = _unit(d)
        return (u @ u.sum(0) - (u * u).sum(1)) / (b - 1)
    others = (d.sum(0, keepdim=True) - d) / (b - 1)  # the mean of the other rows
    return (_unit(d) * _unit(others)).sum(1)


def _shuffle_columns(d: Tensor, generator: torch.Generator | None) -> Tensor:
    """Each column of ``d`` permuted independently across rows."""
    keys = torch.rand(d.shape, generator=generator, dtype=torch.float64)
    return torch.gather(d, 0, torch.argsort(keys, dim=0).to(d.device))


def equivariance_alignment(
    z: Tensor,
    z_t: Tensor,
    generator: torch.Generator | None = None,
    reference: str = "pairwise",
    shuffles: int = 1,
) -> dict:
    """Alignment of the displacements ``z_t - z`` against a column-shuffled baseline (Bouchacourt et al., app. D).

    See the module docstring for the statistic and for what it does and does
    not detect (a constant shift scores exactly 0 above its baseline).

    Args:
        z: features of the clean inputs.
        z_t: features of the transformed inputs.
        generator: draws the column shuffles.
        reference: ``"pairwise"`` (mean cosine between displacements of two
            different samples, the paper's) or ``"mean"`` (cosine of each
            displacement with the mean of the others).
        shuffles: the baseline averages this many independent shuffles.

    Returns:
        ``{"score", "baseline", "difference"}`` (floats; ``difference = score -
        baseline``, the paper's equivariance), ``"per_sample"`` (B,) and
        ``"baseline_per_sample"`` (B,) (the last shuffle's), ``"n_zero"`` (samples
        that did not move).

    Raises:
        ValueError: if ``z`` or ``z_t`` holds a NaN or infinite value.

    Shape:
        - z, z_t: :math:`(B, ...)` (flattened to :math:`(B, D)`), ``B >= 2``

    Examples:
        >>> z = torch.randn(50, 8)
        >>> out = equivariance_alignment(z, z + 1.0, torch.Generator().manual_seed(0))
        >>> round(out["score"], 6), abs(out["difference"]) < 1e-6
        (1.0, True)
    """
    if reference not in REFERENCES:
        raise ValueError(f"reference must be one of {REFERENCES}, got {reference!r}")
    if not isinstance(z, Tensor) or not isinstance(z_t, Tensor):
        raise TypeError("z and z_t must be tensors")
    if z.shape != z_t.shape:
        raise ValueError(f"z and z_t must have the same shape, got {tuple(z.shape)} and {tuple(z_t.shape)}")
    if z.dim() < 2 or z.shape[0] < 2:
        raise ValueError(f"need (B, D) features with B >= 2 samples, got shape {tuple(z.shape)}")
    _check_finite(z, "z")
    _check_finite(z_t, "z_t")
    if isinstance(shuffles, bool) or not isinstance(shuffles, numbers.Integral) or shuffles < 1:
        raise ValueError(f"shuffles must be a positive integer, got {shuffles!r}")
    d = (z_t.detach().double() - z.detach().double()).flatten(1)
    per_sample = _alignment(d, reference)
    score = float(per_sample.mean())
    base = []
    for _ in range(int(shuffles)):
        base_per_sample = _alignment(_shuffle_columns(d, generator), reference)
        base.append(float(base_per_sample.mean()))
    baseline = sum(base) / len(base)
    return {
        "score": score,
        "baseline": baseline,
        "difference": score - baseline,
        "per_sample": per_sample.cpu(),
        "baseline_per_sample": base_per_sample.cpu(),
        "n_zero": int((d.norm(dim=1) == 0).sum()),
    }
