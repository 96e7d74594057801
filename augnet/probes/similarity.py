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
percent statistics and counted in ``n_undefined``. A pair with an all-zero
feature row (``z_i``, ``z_j`` or ``phi(T x_j)``) has no cosine at all: it is
left out of every statistic and counted in ``n_no_cosine`` (and in
``n_undefined``). Per class (and per transformation and magnitude in
:func:`similarity_search`) the probe reports

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
- ``median_percent_change``: the median of ``percent_ij`` over the pairs where
  it is defined, and ``median_change`` the median of ``change_ij``: robust
  companions of the paper's means. On features of any sign (logits, the
  default) a pair whose clean cosine is near 0 has a huge percent change, and
  a few such pairs can decide the mean (a class at -14 % while its median pair
  is at -1.6 %, in ``benchmarks/probe_defects.py``);
- ``n_pairs``, ``n_undefined`` and ``n_no_cosine``.

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

Rounding noise is no movement. A displacement smaller than ``sqrt(eps)`` of
the features' dtype relative to the row's size (``max(|z_i|, |z_t_i|)``;
3.5e-4 for float32 features) counts as zero: at that size it is rounding
noise, whose direction is random. The rows a transform applied with
probability ``mu < 1`` (a flip, ``Invert``) leaves untouched move by about
1e-7 relative through an identity warp, or through another memory layout of
the same images; normalised to unit length, those directions made the score
depend on the layout (channels-last images gave another value).

Where the code lives: the per-class distributions and the equivariance
alignment are here; the pairs, :func:`similarity_change` and
:func:`similarity_search` in :mod:`augnet.probes.similarity_pairs`;
:func:`plot_similarity_change_distributions` in :mod:`augnet.probes.plots`.
Every name of ``__all__`` can be imported from here.

Bouchacourt, Ibrahim and Morcos, "Grounding inductive biases in natural
images: invariance stems from variations in data", NeurIPS 2021.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

from augnet._checks import check_bool, is_int, is_real, number
from augnet.probes._common import summary
from augnet.probes.plots import plot_similarity_change_distributions
from augnet.probes.similarity_pairs import (
    STATISTICS,
    _check_finite,
    _check_generator,
    same_class_pairs,
    similarity_change,
    similarity_search,
)

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

REFERENCES = ("pairwise", "mean")


# --------------------------------------------------------------------------- per-class distributions (Fig. 3A)


def top_transforms_per_class(table: Sequence[Mapping], k: int = 5, by: str = "weighted_boost") -> dict[int, list[dict]]:
    """The ``k`` (transform, magnitude) rows that most bring each class's pairs closer.

    Args:
        table: rows of :func:`similarity_search`.
        k: how many rows to keep per class.
        by: the statistic to rank by (highest first), one of ``STATISTICS``
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
    if not is_int(k) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    if isinstance(table, Mapping) or not isinstance(table, Sequence):
        raise TypeError(f"table must be a list of rows (dicts), got {type(table).__name__}")
    if not table:
        raise ValueError("table is empty")
    groups: dict[int, list[tuple[float, dict]]] = {}
    for row in table:
        if not isinstance(row, Mapping) or "label" not in row or by not in row:
            raise ValueError(f"every row needs 'label' and {by!r}, got {row!r}")
        # A 0-d tensor label hashed by identity (a group per row); a string value failed in float() naming nothing.
        label, value = number("label", row["label"]), number(by, row[by])
        if isinstance(label, Tensor) or getattr(label, "ndim", 0):  # several values: no one label
            raise TypeError(f"every row's 'label' must be one class label, got {row['label']!r:.60}")
        if not is_real(value):
            raise TypeError(f"every row's {by!r} must be a number, got {type(row[by]).__name__} in {row!r:.200}")
        groups.setdefault(label, []).append((float(value), dict(row)))

    def key(item):
        v = item[0]
        return (math.isnan(v), -v if not math.isnan(v) else 0.0)

    try:
        ordered = sorted(groups.items(), key=lambda item: item[0])
    except TypeError:
        raise TypeError(f"the rows' labels must be comparable, got {list(groups)[:8]}") from None
    return {label: [row for _, row in sorted(rows, key=key)[:k]] for label, rows in ordered}


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
        statistic: the per-class value to gather, one of ``STATISTICS``
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
    check_bool("by_magnitude", by_magnitude)  # "no" was truthy: one distribution per magnitude
    if isinstance(table, Mapping) or not isinstance(table, Sequence):
        raise TypeError(f"table must be a list of rows (dicts), got {type(table).__name__}")
    if not table:
        raise ValueError("table is empty")
    groups: dict = {}
    for row in table:
        if not isinstance(row, Mapping) or any(k not in row for k in ("transform", "magnitude", "label", statistic)):
            raise ValueError(f"every row needs 'transform', 'magnitude', 'label' and {statistic!r}, got {row!r}")
        for field in ("magnitude", statistic):  # a string failed in float(), naming neither the row nor the key
            if not is_real(number(field, row[field])):
                got = f"{type(row[field]).__name__} in {row!r:.200}"
                raise TypeError(f"every row's {field!r} must be a number, got {got}")
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


# --------------------------------------------------------------------------- equivariance alignment (appendix D)


def _moved(z: Tensor, z_t: Tensor) -> Tensor:
    """The (B, D) float64 displacements ``z_t - z``, rows below rounding noise set to 0 (see the module docstring)."""
    a, b = z.double().flatten(1), z_t.double().flatten(1)
    d = b - a
    eps = max(torch.finfo(t.dtype).eps if t.is_floating_point() else 0.0 for t in (z, z_t))
    size = torch.maximum(a.norm(dim=1), b.norm(dim=1))
    noise = d.norm(dim=1) <= math.sqrt(eps) * size
    return torch.where(noise[:, None], torch.zeros_like(d), d)


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
        that did not move, or moved by rounding noise only: see the module docstring).

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
    if not is_int(shuffles) or shuffles < 1:
        raise ValueError(f"shuffles must be a positive integer, got {shuffles!r}")
    _check_generator(generator)  # torch.rand's own error named no argument
    d = _moved(z.detach(), z_t.detach())
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
