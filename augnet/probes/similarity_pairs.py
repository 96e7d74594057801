"""Same-class pairs and the change of their similarity under a transformation (Bouchacourt et al., eq. 2).

Here live the pairs (:func:`same_class_pairs`), the per-pair and per-class
similarity change (:func:`similarity_change`, whose statistics are
``STATISTICS``), and :func:`similarity_search`, which runs it through a
model for every transformation and magnitude. The statistics are described in
:mod:`augnet.probes.similarity`, which re-exports everything here.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from augnet.probes._common import check_draws, forward_kwargs, seeded
from augnet.probes.features import LOGITS, features

__all__ = [
    "STATISTICS",
    "same_class_pairs",
    "similarity_change",
    "similarity_search",
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
        stats}, "overall": stats}`` with the stats of the docstring of :mod:`augnet.probes.similarity`.

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
        A list with one row per (transform, magnitude, class), each a dict of
        ``"transform"``, ``"magnitude"``, ``"label"`` and the statistics of
        :func:`similarity_change` (``STATISTICS``, ``"n_pairs"``, ``"n_undefined"``).
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
