"""Which transformations explain the variation within a class? (Bouchacourt et al., section 4 and appendix).

Similarity change (eq. 2). For a pair ``(x_i, x_j)`` of inputs of the same
class, features ``z = phi(x)`` and cosine similarity ``s``, a transformation
``T`` changes the pair's similarity by::

    change_ij = s(z_i, phi(T x_j)) - s(z_i, z_j)

Only the second input of the pair is transformed. Per class (and per
transformation and magnitude in :func:`similarity_search`) the probe reports

- ``mean_change``: the mean of ``change_ij`` over the class's pairs;
- ``percent_change``: ``100 * mean_change / clean_similarity``, with
  ``clean_similarity`` the mean of ``s(z_i, z_j)`` over the same pairs (the
  change relative to how similar the pairs already are; NaN when that mean is 0);
- ``boosted``: the proportion of pairs whose similarity increases (``change > 0``);
- ``weighted_boost``: ``mean(max(change, 0))``, which equals the mean positive
  change (over the boosted pairs) times ``boosted``: the paper's weighted boost
  (appendix E.2) in cosine units, rewarding transformations that bring many
  pairs closer by much rather than a few pairs by a lot or many by a hair.

A transformation that captures a factor of variation of a class brings some of
its pairs closer, so it ranks high by ``weighted_boost`` (the default of
:func:`top_transforms_per_class`) even when it moves other pairs apart: a
randomly drawn rotation is as likely to widen an angle between two rotated
copies as to narrow it, so ``mean_change`` is often negative for every
transformation and ranks the weakest one first. A model invariant to ``T``
gives ``change = 0`` for every pair, whatever the data.

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

from augnet.probes._common import forward_kwargs, seeded
from augnet.probes.features import OUTPUT, features

__all__ = [
    "REFERENCES",
    "STATISTICS",
    "equivariance_alignment",
    "same_class_pairs",
    "similarity_change",
    "similarity_search",
    "top_transforms_per_class",
]

#: The per-class statistics of :func:`similarity_change`, and the keys :func:`top_transforms_per_class` ranks by.
STATISTICS = ("mean_change", "percent_change", "boosted", "weighted_boost", "clean_similarity")
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


def _stats(clean: Tensor, change: Tensor) -> dict[str, float]:
    mean_clean = float(clean.mean())
    mean_change = float(change.mean())
    return {
        "n_pairs": int(change.numel()),
        "clean_similarity": mean_clean,
        "mean_change": mean_change,
        "percent_change": 100.0 * mean_change / mean_clean if mean_clean != 0 else math.nan,
        "boosted": float((change > 0).double().mean()),
        "weighted_boost": float(change.clamp_min(0).mean()),
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
        "transformed": (P,) s(z_i, z_t_j), "change": (P,),
        "per_class": {label: stats}, "overall": stats}`` with the stats of the
        module docstring (and ``"n_pairs"``).

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
        layer: a module name for :func:`~augnet.probes.features`; ``None`` uses the model's output.
        reduce: how a layer's activations are reduced (see :func:`~augnet.probes.features`).
        pairs_per_class: see :func:`same_class_pairs`.
        copies: for an AugNet, the number of copies it averages.
        seed: seeds the pairs, the transformations and AugNet's own draws.
        batch_size: run the model in chunks.

    Returns:
        One row per (transform, magnitude, class): ``{"transform", "magnitude",
        "label", "n_pairs", "clean_similarity", "mean_change",
        "percent_change", "boosted", "weighted_boost"}``.
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
    pairs = same_class_pairs(y, pairs_per_class, seeded(seed))
    name = OUTPUT if layer is None else layer
    clean = features(
        model, x, name, reduce=reduce, batch_size=batch_size, **forward_kwargs(model, copies, seed, x.device)
    )[name]
    rows = []
    for t_name, transform in transforms.items():
        for m in per_transform[t_name]:
            xt = transform(x, m, generator=seeded(seed + 1, x.device))
            kwargs = forward_kwargs(model, copies, seed, x.device)
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
