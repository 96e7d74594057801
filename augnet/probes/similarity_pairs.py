"""Same-class pairs and the change of their similarity under a transformation (Bouchacourt et al., eq. 2).

Here live the pairs (:func:`same_class_pairs`), the per-pair and per-class
similarity change (:func:`similarity_change`, whose statistics are
``STATISTICS``), and :func:`similarity_search`, which runs it through a
model for every transformation and magnitude. The statistics are described in
:mod:`augnet.probes.similarity`, which re-exports everything here.

Memory. Pairs are drawn without enumerating a class's ``k (k - 1)`` pairs (by default
``DEFAULT_PAIRS_PER_CLASS`` per class), cosines are computed from the rows' norms and
chunks of dot products (never a (P, D) copy of the features), and :func:`similarity_search`
works class by class, so every ordered pair of 20,000 inputs in 10 classes
(``pairs_per_class=None``) holds one class's per-pair values at a time.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch
from torch import Tensor, nn

from augnet._checks import is_int, is_real, number
from augnet._labels import class_labels
from augnet.probes._common import (
    Transformed,
    _items,
    check_draws,
    check_model_input,
    check_seed,
    check_transform,
    forward_kwargs,
    seeded,
)
from augnet.probes.features import LOGITS, _features, check_rows
from augnet.probes.tau_selection import _check_moved

__all__ = [
    "DEFAULT_PAIRS_PER_CLASS",
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
    "median_percent_change",
    "median_change",
    "clean_similarity",
)
#: Pairs drawn per class when ``pairs_per_class`` is not given (``None`` asks for every ordered pair).
DEFAULT_PAIRS_PER_CLASS = 1000
#: Up to this many ordered pairs in a class, a sample is the head of a random permutation of them all
#: (the draw of earlier versions); above, distinct pairs are drawn by rejection, without listing them.
_PERMUTE_LIMIT = 2**24
#: Values per chunk of dot products.
_CHUNK = 2**22


def _distinct(total: int, m: int, generator: torch.Generator | None) -> Tensor:
    """``m`` distinct integers of ``range(total)``, uniformly at random, without listing the range."""
    got = torch.empty(0, dtype=torch.int64)
    while len(got) < m:
        need = m - len(got)
        cand = torch.cat([got, torch.randint(total, (need + need // 4 + 16,), generator=generator)])
        _, inverse = torch.unique(cand, return_inverse=True)
        first = torch.full((int(inverse.max()) + 1,), len(cand), dtype=torch.int64)
        first = first.scatter_reduce(0, inverse, torch.arange(len(cand)), "amin")
        keep = torch.zeros(len(cand), dtype=torch.bool)
        keep[first] = True
        got = cand[keep][:m]  # the first occurrences, in the order drawn
    return got


def _class_pair_index(k: int, m: int | None, generator: torch.Generator | None) -> Tensor:
    """Indices into the ``k (k - 1)`` ordered pairs of a class (all of them, or ``m`` drawn at random)."""
    total = k * (k - 1)
    if m is None or total <= m:
        return torch.arange(total)
    if total <= _PERMUTE_LIMIT:
        return torch.randperm(total, generator=generator)[:m]
    return _distinct(total, m, generator)


def _pairs_from_index(members: Tensor, index: Tensor) -> Tensor:
    """Pair ``p`` of a class, row-major over ``(i, j)`` with ``j != i``: ``i = p // (k - 1)``."""
    k = len(members)
    i = index // (k - 1)
    r = index % (k - 1)
    j = r + (r >= i).long()
    return torch.stack([members[i], members[j]], 1)


def _check_generator(generator) -> None:
    """``None`` or a CPU ``torch.Generator`` (the pairs and shuffles are drawn on the CPU), else the TypeError
    naming it: torch's own error named no argument, and where no draw was needed a bad one passed unseen."""
    if generator is not None and not isinstance(generator, torch.Generator):
        got = f"{type(generator).__name__}: {generator!r:.60}"
        raise TypeError(f"generator must be a torch.Generator or None, got {got}")
    if generator is not None and generator.device.type != "cpu":
        raise ValueError(f"generator must be a CPU generator (the draws are made on the CPU), got {generator.device}")


def _check_pairs_per_class(pairs_per_class) -> None:
    if pairs_per_class is not None and (
        not is_int(pairs_per_class) or pairs_per_class < 1
    ):
        raise ValueError(f"pairs_per_class must be a positive integer or None, got {pairs_per_class!r}")


def same_class_pairs(y: Tensor, pairs_per_class: int | None = None, generator: torch.Generator | None = None) -> Tensor:
    """Ordered pairs ``(i, j)``, ``i != j``, of samples with the same label.

    A sample of ``m`` pairs from a class of ``k`` samples is drawn without listing its ``k (k - 1)``
    pairs when there are more than 2^24 of them (a class of 20,000 has 4 * 10^8), so the memory is
    that of the ``m`` pairs drawn.

    Args:
        y: class labels >= 0 ((N,) or (N, 1), any integer dtype, a NumPy array or a list; whole floats too).
        pairs_per_class: draw this many pairs per class at random, without
            replacement (all of a class's pairs if it has fewer); ``None`` takes
            every ordered pair.
        generator: draws the pairs.

    Returns:
        (P, 2) int64 indices, grouped by class in increasing label order. A class of one sample has
        no pair; if no class has two, a ValueError.

    Examples:
        >>> same_class_pairs(torch.tensor([0, 1, 0, 1])).tolist()
        [[0, 2], [2, 0], [1, 3], [3, 1]]
    """
    y = class_labels(y)
    _check_pairs_per_class(pairs_per_class)
    _check_generator(generator)
    chunks = []
    for c in torch.unique(y):
        members = torch.nonzero(y == c).flatten()
        if len(members) < 2:
            continue
        chunks.append(_pairs_from_index(members, _class_pair_index(len(members), pairs_per_class, generator)))
    if not chunks:
        raise ValueError("no class has two samples, so there is no same-class pair")
    return torch.cat(chunks)


def _norms(z: Tensor) -> Tensor:
    return z.flatten(1).double().norm(dim=1)


def _cosines(a: Tensor, norm_a: Tensor, b: Tensor, norm_b: Tensor, i: Tensor, j: Tensor) -> Tensor:
    """``cos(a_i, b_j)`` for index pairs, float64, in chunks; NaN where a row is all zeros (no direction)."""
    a, b = a.flatten(1), b.flatten(1)
    step = max(1, _CHUNK // max(a.shape[1], 1))
    out = torch.empty(len(i), dtype=torch.float64)
    for start in range(0, len(i), step):
        ii, jj = i[start : start + step].to(a.device), j[start : start + step].to(a.device)
        dot = (a[ii].double() * b[jj].double()).sum(1)
        den = norm_a[ii] * norm_b[jj]
        out[start : start + step] = torch.where(den > 0, dot / torch.where(den > 0, den, 1.0), torch.nan).cpu()
    return out


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
    """Per-pair percent change ``100 * change / |clean|``; NaN where the clean similarity is 0 or undefined."""
    defined = (clean != 0) & ~clean.isnan()
    return torch.where(defined, 100.0 * change / torch.where(defined, clean.abs(), torch.ones_like(clean)), torch.nan)


def _stats(clean: Tensor, change: Tensor) -> dict[str, float]:
    """The statistics of a class's pairs; pairs without a cosine (NaN) are left out of every one."""
    n_pairs = int(change.numel())
    has_cosine = ~(clean.isnan() | change.isnan())
    clean, change = clean[has_cosine], change[has_cosine]
    mean_clean = float(clean.mean()) if clean.numel() else math.nan
    mean_change = float(change.mean()) if change.numel() else math.nan
    percent = _percent(clean, change)
    defined = ~percent.isnan()
    up = change > 0
    boosted = float(up.double().mean()) if change.numel() else math.nan
    up_percent = percent[up & defined]
    percent_boost = float(up_percent.mean()) if up_percent.numel() else math.nan
    weighted = percent_boost * boosted if bool(up.any()) else 0.0  # no pair boosted: no boost
    kept = percent[defined]
    return {
        "n_pairs": n_pairs,
        "n_undefined": n_pairs - int(defined.sum()),
        "n_no_cosine": n_pairs - int(has_cosine.sum()),
        "clean_similarity": mean_clean,
        "mean_change": mean_change,
        "percent_change": float(kept.mean()) if kept.numel() else math.nan,
        "median_percent_change": float(kept.quantile(0.5)) if kept.numel() else math.nan,
        "median_change": float(change.quantile(0.5)) if change.numel() else math.nan,
        "boosted": boosted,
        "percent_boost": percent_boost,
        "weighted_boost": weighted,
        "percent_change_of_means": 100.0 * mean_change / mean_clean if mean_clean != 0 else math.nan,
        "mean_positive_change": float(change.clamp_min(0).mean()) if change.numel() else math.nan,
    }


def _pairs_tensor(pairs) -> Tensor:
    """``pairs`` as a (P, 2) int64 CPU tensor (from a tensor, a NumPy array or a list of pairs), or the error naming
    it. A bool tensor is refused: its True and False read as the indices 1 and 0."""
    if not isinstance(pairs, Tensor):
        if isinstance(pairs, (str, bytes, Mapping)) or not (
            type(pairs).__module__ == "numpy" or isinstance(pairs, Sequence)
        ):
            raise TypeError(
                f"pairs must be a (P, 2) tensor, NumPy array or list of index pairs, got {type(pairs).__name__}"
            )
        try:
            pairs = torch.as_tensor(pairs)
        except (TypeError, ValueError, RuntimeError):
            raise TypeError(f"pairs must be (P, 2) integer index pairs, got {pairs!r:.80}") from None
    kind_ok = not (pairs.is_floating_point() or pairs.is_complex() or pairs.dtype == torch.bool)
    if pairs.dim() != 2 or pairs.shape[1] != 2 or pairs.shape[0] < 1 or not kind_ok:
        raise ValueError(f"pairs must be a non-empty (P, 2) integer tensor, got {tuple(pairs.shape)} {pairs.dtype}")
    return pairs.long().cpu()


def similarity_change(
    z: Tensor,
    z_t: Tensor,
    y: Tensor,
    pairs: Tensor | None = None,
    pairs_per_class: int | None = DEFAULT_PAIRS_PER_CLASS,
    generator: torch.Generator | None = None,
) -> dict:
    """Change in same-class pair similarity when the second input is transformed (eq. 2).

    A pair with a row of zeros among ``z_i``, ``z_j``, ``z_t_j`` has no cosine: its values are NaN
    and it is left out of every statistic (counted in ``n_no_cosine`` and ``n_undefined``); a pair
    whose clean cosine is 0 has no percent change and is left out of the percent statistics
    (counted in ``n_undefined``). ``median_percent_change`` is the robust companion of the paper's
    mean: on features of any sign (logits) a few pairs with a near-zero clean cosine can dominate
    the mean of per-pair percents.

    Args:
        z: features of the clean inputs.
        z_t: features of the transformed inputs (row ``j`` is ``phi(T x_j)``).
        y: class labels >= 0 ((B,) or (B, 1), any integer dtype, a NumPy array or a list; whole floats too).
        pairs: (P, 2) same-class index pairs ``(i, j)`` (any integer dtype; a NumPy array or a list of
            pairs too); by default drawn by :func:`same_class_pairs` with ``pairs_per_class`` and ``generator``.
        pairs_per_class: pairs drawn per class (default
            ``DEFAULT_PAIRS_PER_CLASS``, 1000); ``None`` takes every ordered pair
            (the per-pair outputs then take 56 bytes per pair).
        generator: draws the pairs.

    Returns:
        ``{"pairs": (P, 2), "label": (P,), "clean": (P,) s(z_i, z_j),
        "transformed": (P,) s(z_i, z_t_j), "change": (P,), "percent": (P,)
        per-pair percent change (NaN where undefined), "per_class": {label:
        stats}, "overall": stats}`` with the stats of the docstring of :mod:`augnet.probes.similarity`;
        ``per_class`` has the classes of ``pairs`` only (a class of one sample has no pair).

    Raises:
        TypeError: ``z`` or ``z_t`` is not a tensor of real numbers; ``pairs`` is not a tensor, an array or a list.
        ValueError: if ``z`` or ``z_t`` holds a NaN or infinite value; labels that are not one integer
            >= 0 per row (TypeError for bool, complex or strings); ``pairs`` that are not (P, 2) integers
            (bool ones among them) indexing two different samples of one class; no class with two samples.

    Shape:
        - z, z_t: :math:`(B, ...)`, the same shape
        - y: :math:`(B,)`

    Examples:
        >>> z, y = torch.randn(6, 4), torch.tensor([0, 0, 0, 1, 1, 1])
        >>> out = similarity_change(z, z.clone(), y)
        >>> bool((out["change"] == 0).all()), out["per_class"][1]["boosted"]
        (True, 0.0)
    """
    for name, value in (("z", z), ("z_t", z_t)):
        if not isinstance(value, Tensor):  # "z and z_t must be tensors" named neither the one nor what it was
            raise TypeError(f"{name} must be a tensor of features, got {type(value).__name__}")
    if z.shape != z_t.shape:
        raise ValueError(f"z and z_t must have the same shape, got {tuple(z.shape)} and {tuple(z_t.shape)}")
    if z.dim() < 2 or z.shape[0] < 2:
        raise ValueError(f"z must be (B, ...) features with B >= 2, got shape {tuple(z.shape)}")
    y = class_labels(y, z.shape[0])
    _check_finite(z, "z")
    _check_finite(z_t, "z_t")
    _check_generator(generator)
    z, z_t = z.detach(), z_t.detach()  # features that require grad gave per-pair outputs holding a graph
    if pairs is None:
        pairs = same_class_pairs(y, pairs_per_class, generator)
    else:
        pairs = _pairs_tensor(pairs)
        if bool(((pairs < 0) | (pairs >= z.shape[0])).any()):
            raise ValueError(f"pairs index samples outside [0, {z.shape[0]})")
        if bool((pairs[:, 0] == pairs[:, 1]).any()):
            raise ValueError("pairs must pair two different samples")
        if bool((y[pairs[:, 0]] != y[pairs[:, 1]]).any()):
            raise ValueError("pairs must pair samples of the same class")
    _check_pairs_per_class(pairs_per_class)
    i, j = pairs[:, 0], pairs[:, 1]
    norm, norm_t = _norms(z), _norms(z_t)
    clean = _cosines(z, norm, z, norm, i, j)
    moved = _cosines(z, norm, z_t, norm_t, i, j)
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
    """``{transform: magnitudes as floats}`` from the magnitudes of every transform, or ``{name: magnitudes}``."""
    if isinstance(magnitudes, Mapping):
        missing = [n for n in names if n not in magnitudes]
        if missing:
            raise ValueError(f"magnitudes has no entry for transform(s) {missing}")
        empty = "transform {!r} has no magnitude to probe"
        return {n: _magnitude_floats(magnitudes[n], f"magnitudes for {n!r}", empty.format(n)) for n in names}
    shared = _magnitude_floats(magnitudes, "magnitudes", "magnitudes must hold at least one magnitude, got none")
    return dict.fromkeys(names, shared)  # read once: an iterator is read once


def _magnitude_floats(given, name: str, empty: str) -> list[float]:
    """One number (a 0-d tensor or array too), or a sequence, a 1-D tensor or array of them, as floats, as the
    other probes take magnitudes (a tensor was refused, a 0-d one and None failed in list(), a string was split
    into characters, an iterator shared by the transforms gave the second none)."""
    read = number(name, given)
    ms = [read] if is_real(read) else _items(read)
    if ms is None:
        raise TypeError(
            f"{name} must be a number or a sequence of numbers (a 1-D tensor or array too), got {given!r:.80}"
        )
    if not ms:
        raise ValueError(empty)
    bad = [m for m in ms if not is_real(m)]
    if bad:
        raise TypeError(f"{name} must be numbers, got {bad}")
    return [float(m) for m in ms]


@torch.no_grad()
def similarity_search(
    model: nn.Module,
    x: Tensor,
    y: Tensor,
    transforms: Mapping[str, object],
    magnitudes: Sequence[float] | Mapping[str, Sequence[float]] = (0.5,),
    layer: str | None = None,
    reduce: str = "flatten",
    pairs_per_class: int | None = DEFAULT_PAIRS_PER_CLASS,
    copies: int | None = None,
    seed: int = 0,
    batch_size: int | None = None,
    draws: str = "shared",
) -> list[dict]:
    """:func:`similarity_change` for every transformation and magnitude, as a table (Bouchacourt et al., section 4).

    The same same-class pairs (drawn with ``seed``) are used for every
    transformation; each transformation draws its parameters for the whole
    batch once per magnitude, from a generator seeded with ``seed + 1``, and is
    applied batch by batch. The statistics are computed class by class, so the
    memory is that of one class's pairs (every ordered pair of a class of 2,000
    inputs, ``pairs_per_class=None``, takes 64 MB; 1000 pairs, the default, 40 kB).

    Args:
        model: probed in evaluation mode (its modes are restored afterwards).
        x: the inputs.
        y: their class labels >= 0 ((B,) or (B, 1), any integer dtype, a NumPy array or a list; whole floats too).
        transforms: ``{name: transform}``, each called as ``t(x, magnitude, generator=g)``
            (augnet transforms, or any callable with that signature).
        magnitudes: magnitudes probed for every transform (a number, a sequence, or a 1-D tensor or array of
            them), or ``{name: magnitudes}``.
        layer: a module name for :func:`~augnet.probes.features`, ``"output"`` or ``"logits"``;
            ``None`` means ``"logits"`` (an AugNet's trunk outputs averaged over its copies,
            any other model's output).
        reduce: how a layer's activations are reduced (see :func:`~augnet.probes.features`).
        pairs_per_class: pairs drawn per class (default 1000; ``None``: every ordered pair),
            see :func:`same_class_pairs`.
        copies: for an AugNet, the number of copies it averages.
        seed: seeds the pairs, the transformations and AugNet's own draws.
        batch_size: run the model in chunks of this many rows (default 256).
        draws: ``"shared"`` or ``"independent"`` AugNet draws in the clean and the
            transformed passes (see :func:`~augnet.probes.invariance_curve`).

    Returns:
        One row per (transform, magnitude, class): ``{"transform", "magnitude",
        "label"}`` and the statistics of :func:`similarity_change`
        (``STATISTICS``, ``"n_pairs"``, ``"n_undefined"``, ``"n_no_cosine"``). A class of one sample has
        no pair and no row; if no class has two, a ValueError before the model runs.

    Raises:
        TypeError, ValueError: before the model runs: a bad argument, naming it; images that are
            not finite (naming them), on meta, or in another dtype or on another device than the
            model's parameters; an input an augnet transform cannot take.
    """
    seed = check_seed(seed)  # before anything runs: an int in [0, 2**63 - 3], a NumPy one too
    if not isinstance(transforms, Mapping) or not transforms:
        raise ValueError("transforms must be a non-empty dict {name: transform}")
    not_callable = [n for n, t in transforms.items() if not callable(t)]
    if not_callable:
        raise TypeError(f"transform(s) {not_callable} are not callable")
    if not isinstance(x, Tensor):
        raise TypeError(f"x must be a tensor, got {type(x).__name__}")
    if x.dim() == 0:
        raise ValueError("x must be a batch of inputs, one row per label, got a 0-d tensor")
    y = class_labels(y, x.shape[0])
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    check_model_input(model, x)
    per_transform = _magnitudes_for(magnitudes, list(transforms))
    for t_name, transform in transforms.items():  # an input an augnet transform cannot take, before any pass
        check_transform(transform, x, per_transform[t_name])
    check_draws(draws)
    _check_pairs_per_class(pairs_per_class)
    if layer is not None and not isinstance(layer, str):  # a list or an int raised a TypeError naming nothing
        raise TypeError(f"layer must be a module name (str) or None, got {type(layer).__name__}: {layer!r}")
    # Each class's pairs, drawn once (in increasing label order, as same_class_pairs does); every
    # ordered pair of a class is listed afresh when needed rather than kept.
    g = seeded(seed)
    classes = {}
    for c in torch.unique(y):
        members = torch.nonzero(y == c).flatten()
        if len(members) >= 2:
            k = len(members)
            every = pairs_per_class is None or k * (k - 1) <= pairs_per_class
            classes[int(c)] = (members, None if every else _class_pair_index(k, pairs_per_class, g))
    if not classes:
        raise ValueError("no class has two samples, so there is no same-class pair")
    name = LOGITS if layer is None else layer
    clean = _features(
        model, x, name, reduce=reduce, batch_size=batch_size, **forward_kwargs(model, copies, seed, x.device, draws)
    )[name]
    check_rows({name: clean}, len(x))
    _check_finite(clean, "the clean features")
    norm = _norms(clean)
    rows, index = [], 0
    for t_name, transform in transforms.items():
        for m in per_transform[t_name]:
            xt = Transformed(transform, x, m, seeded(seed + 1, x.device))
            _check_moved(model, xt, f"transforms[{t_name!r}](x, {m})")
            index += 1
            kwargs = forward_kwargs(model, copies, seed, x.device, draws, index)
            moved = _features(model, xt, name, reduce=reduce, batch_size=batch_size, **kwargs)[name]
            _check_finite(moved, f"the features of {t_name!r} at magnitude {m}")
            norm_t = _norms(moved)
            for label, (members, drawn) in classes.items():
                k = len(members)
                pairs = _pairs_from_index(members, torch.arange(k * (k - 1)) if drawn is None else drawn)
                i, j = pairs[:, 0], pairs[:, 1]
                base = _cosines(clean, norm, clean, norm, i, j)
                change = _cosines(clean, norm, moved, norm_t, i, j) - base
                rows.append({"transform": t_name, "magnitude": m, "label": label, **_stats(base, change)})
    return rows
