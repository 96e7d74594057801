"""The pairwise ranking probe on given features (Yan & Huang, sections III and V-D).

Here live the pairwise logistic rank loss (:func:`pairwise_rank_loss`), the
per-layer importance of a fitted scorer (:func:`layer_importance`), and
:func:`ranking_probe`, which fits the linear scorer on pooled features and
scores it on held-out pairs. The probe is described in
:mod:`augnet.probes.ranking`, which holds the per-layer probe and the tasks x
layers table and re-exports everything here.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import Tensor

from augnet._checks import is_int
from augnet._stack import PROBES, caller_stacklevel
from augnet.probes.features import reduce_features

__all__ = [
    "AGGREGATES",
    "layer_importance",
    "pairwise_rank_loss",
    "ranking_probe",
]

AGGREGATES = ("mean", "max")
REDUCTIONS = ("mean", "sum", "none")
#: The name given to features passed as a single tensor rather than a dict of layers.
FEATURES = "features"


def pairwise_rank_loss(s_hi: Tensor, s_lo: Tensor, sign: Tensor | None = None, reduction: str = "mean") -> Tensor:
    """Pairwise logistic rank loss ``log(1 + exp(-sign * (s_hi - s_lo)))`` (Yan & Huang, section III).

    With ``sign`` left out, ``s_hi`` is the score of the copy that should rank
    higher. ``sign = sgn(v_1 - v_2)`` says which of the two should rank higher
    (+1: the first, -1: the second, 0: a tie, which costs ``log 2`` and has no
    gradient), so ``pairwise_rank_loss(a, b, sign) == pairwise_rank_loss(b, a, -sign)``.
    Computed as ``softplus``, stable for large score gaps.

    Args:
        s_hi, s_lo: scores of the two copies of each pair (floating point).
        sign: optional per-pair order in {-1, 0, +1}, broadcastable to the scores (a tensor, or anything
            ``torch.as_tensor`` takes).
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.

    Raises:
        TypeError: scores that are not floating-point tensors; a ``sign`` that is not numbers.
        ValueError: scores of different shapes; a ``sign`` not in {-1, 0, +1} or not broadcastable to the
            scores' shape; an unknown ``reduction``.

    Shape:
        - s_hi, s_lo: :math:`(P,)` (any shape, the same for both)
        - output: scalar, or :math:`(P,)` for ``reduction="none"``

    Examples:
        >>> round(float(pairwise_rank_loss(torch.tensor([1.0]), torch.tensor([1.0]))), 4)  # log 2
        0.6931
        >>> float(pairwise_rank_loss(torch.tensor([30.0]), torch.tensor([0.0]))) < 1e-12
        True
    """
    if not isinstance(s_hi, Tensor) or not isinstance(s_lo, Tensor):
        raise TypeError(f"s_hi and s_lo must be tensors, got {type(s_hi).__name__} and {type(s_lo).__name__}")
    if s_hi.shape != s_lo.shape:
        raise ValueError(f"s_hi and s_lo must have the same shape, got {tuple(s_hi.shape)} and {tuple(s_lo.shape)}")
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    for name, t in (("s_hi", s_hi), ("s_lo", s_lo)):
        if not t.is_floating_point():  # softplus of integer scores was torch's NotImplementedError
            raise TypeError(f"{name} must hold floating-point scores, got dtype {t.dtype}")
    gap = s_hi - s_lo
    if sign is not None:
        try:
            sign = torch.as_tensor(sign, dtype=gap.dtype, device=gap.device)
        except (TypeError, ValueError, RuntimeError):
            raise TypeError(f"sign must be a tensor or sequence of -1, 0 and +1, got {sign!r:.60}") from None
        try:  # a larger sign broadcast the scores up to its shape; a mismatched one was torch's RuntimeError
            fits = torch.broadcast_shapes(sign.shape, gap.shape) == gap.shape
        except RuntimeError:
            fits = False
        if not fits:
            raise ValueError(
                f"sign must be broadcastable to the scores' shape {tuple(gap.shape)}, got {tuple(sign.shape)}"
            )
        if not bool(((sign == -1) | (sign == 0) | (sign == 1)).all()):
            raise ValueError("sign must hold -1, 0 or +1 only")
        gap = sign * gap
    loss = F.softplus(-gap)
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def layer_importance(
    weight: Tensor, std: Tensor, sizes: Mapping[str, int], aggregate: str = "mean"
) -> dict[str, float]:
    """Per-layer importance ``|w| * std`` aggregated over each layer's channels, summing to 1.

    Args:
        weight: the scorer's weights on the concatenated pooled channels, in raw units.
        std: each channel's standard deviation over the probed copies.
        sizes: ``{layer: channels}`` in the order the layers were concatenated.
        aggregate: ``"mean"`` or ``"max"`` over a layer's channels (Yan & Huang, Fig. 5).

    Returns:
        ``{layer: importance}``, non-negative and summing to 1; every value is
        NaN (with a warning) when every weight is 0.

    Raises:
        TypeError: ``weight`` or ``std`` not a tensor.
        ValueError: an unknown ``aggregate``; shapes that differ or do not add up to ``sizes``; NaN, infinite
            or complex values in ``weight`` or ``std``; a negative ``std``.

    Shape:
        - weight, std: :math:`(D,)` with ``D = sum(sizes.values())``

    Examples:
        >>> imp = layer_importance(torch.tensor([2.0, 0.0, 1.0]), torch.tensor([1.0, 5.0, 1.0]), {"a": 2, "b": 1})
        >>> imp == {"a": 0.5, "b": 0.5}
        True
    """
    if aggregate not in AGGREGATES:
        raise ValueError(f"aggregate must be one of {AGGREGATES}, got {aggregate!r}")
    if not isinstance(weight, Tensor) or not isinstance(std, Tensor):
        raise TypeError("weight and std must be tensors")
    if weight.dim() != 1 or weight.shape != std.shape:
        raise ValueError(
            f"weight and std must be 1-D of the same length, got {tuple(weight.shape)} and {tuple(std.shape)}"
        )
    if not isinstance(sizes, Mapping):  # a list failed in sizes.items() (AttributeError)
        raise TypeError(f"sizes must be a {{layer: channels}} dict, got {type(sizes).__name__}")
    if not sizes:
        raise ValueError("sizes must name at least one layer")
    bad = {k: v for k, v in sizes.items() if not is_int(v) or v < 1}
    if bad:
        raise ValueError(f"sizes must be positive channel counts, got {bad}")
    if sum(sizes.values()) != weight.numel():
        raise ValueError(f"sizes add up to {sum(sizes.values())} channels, but weight has {weight.numel()}")
    for name, t in (("weight", weight), ("std", std)):
        if t.is_complex() or not bool(torch.isfinite(t).all()):  # NaN shares, summing to NaN, said nothing
            raise ValueError(f"{name} must hold finite real numbers, got {t.tolist()[:8]}")
    if bool((std < 0).any()):
        raise ValueError("std must be non-negative")
    contribution = weight.detach().double().abs() * std.detach().double()
    parts = torch.split(contribution, list(sizes.values()))
    agg = torch.stack([p.mean() if aggregate == "mean" else p.max() for p in parts])
    total = float(agg.sum())
    if total <= 0.0:
        warnings.warn(
            "layer_importance: every weight is 0 (the features did not separate the pairs); importances are NaN",
            RuntimeWarning,
            stacklevel=caller_stacklevel(*PROBES),
        )
        return {name: math.nan for name in sizes}
    return {name: float(a / total) for name, a in zip(sizes, agg, strict=True)}


def _as_layers(z, name: str) -> dict[str, Tensor]:
    """A tensor or a mapping of tensors -> {layer: (P, Ch)} float64, globally average pooled."""
    if isinstance(z, Tensor):
        z = {FEATURES: z}
    if not isinstance(z, Mapping):
        raise TypeError(f"{name} must be a tensor or a dict of tensors, got {type(z).__name__}")
    if not z:
        raise ValueError(f"{name} must hold at least one layer")
    out = {}
    for layer, a in z.items():
        if not isinstance(a, Tensor):
            raise TypeError(f"{name}[{layer!r}] must be a tensor, got {type(a).__name__}")
        if a.dim() < 2:
            raise ValueError(f"{name}[{layer!r}] must be (P, channels, ...), got shape {tuple(a.shape)}")
        if a.is_complex() or a.dtype == torch.bool:
            raise TypeError(f"{name}[{layer!r}] must hold real numbers, got dtype {a.dtype}")
        a = a.detach() if a.is_floating_point() else a.detach().double()  # integers of any width: pooled in float64
        out[layer] = reduce_features(a, "mean").double().cpu()  # pooled: small, fitted on CPU
        if not bool(torch.isfinite(out[layer]).all()):
            raise ValueError(f"{name}[{layer!r}] holds NaN or infinite values")
    return out


#: A channel whose copies differ by at most this many units of its features' precision (relative to the channel's
#: RMS) does not move (ranking_probe): float32 4.8e-7, float16 3.9e-3, bfloat16 3.1e-2.
ROUNDING_ULPS = 4


def _precision(z) -> dict[str, float]:
    """Per layer of ``z`` (checked by :func:`_as_layers`): the relative precision of its features as given
    (``torch.finfo(dtype).eps``; 0 for integers, which have no rounding)."""
    z = {FEATURES: z} if isinstance(z, Tensor) else z
    return {layer: torch.finfo(a.dtype).eps if a.is_floating_point() else 0.0 for layer, a in z.items()}


def _as_magnitudes(m, n: int, name: str) -> Tensor:
    if not isinstance(m, Tensor):
        raise TypeError(f"{name} must be a tensor, got {type(m).__name__}")
    if m.dim() != 1 or m.shape[0] != n:
        raise ValueError(f"{name} must have shape ({n},), one magnitude per pair, got {tuple(m.shape)}")
    if m.is_complex():  # its imaginary part was dropped (with a warning), ranking by the real part alone
        raise TypeError(f"{name} must hold real magnitudes, got dtype {m.dtype}")
    m = m.detach().double().cpu()
    if bool(torch.isnan(m).any()):
        raise ValueError(f"{name} holds NaN")
    if bool(torch.isinf(m).any()):  # two infinite magnitudes made a NaN order: the fit's weights went NaN
        raise ValueError(f"{name} holds infinite magnitudes")
    return m


def _check_generator(generator) -> None:
    """``None`` or a CPU ``torch.Generator`` (the split is drawn on the CPU), else the error naming it."""
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    if generator is not None and generator.device.type != "cpu":
        raise ValueError(f"generator must be a CPU generator (the split is drawn on the CPU), got {generator.device}")


def _fit(d: Tensor, l2: float, max_iter: int) -> tuple[Tensor, float]:
    """Minimise ``mean softplus(-d @ w) + l2 / 2 |w|^2`` from ``w = 0`` (d: oriented differences)."""
    w = torch.zeros(d.shape[1], dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS(
        [w], lr=1.0, max_iter=max_iter, tolerance_grad=1e-9, tolerance_change=1e-12, line_search_fn="strong_wolfe"
    )

    def closure():
        opt.zero_grad()
        loss = F.softplus(-(d @ w)).mean() + 0.5 * l2 * (w * w).sum()
        loss.backward()
        return loss

    with torch.enable_grad():
        opt.step(closure)
    w = w.detach()
    return w, float(F.softplus(-(d @ w)).mean())


def _correct(gap: Tensor) -> Tensor:
    """1 where the higher-magnitude copy scores higher, 0 where lower, 0.5 on a score tie."""
    return torch.where(gap > 0, 1.0, torch.where(gap < 0, 0.0, 0.5)).double()


def ranking_probe(
    z_a: Tensor | Mapping[str, Tensor],
    z_b: Tensor | Mapping[str, Tensor],
    m_a: Tensor,
    m_b: Tensor,
    test_fraction: float = 0.5,
    l2: float = 1e-3,
    aggregate: str = "mean",
    generator: torch.Generator | None = None,
    max_iter: int = 500,
) -> dict:
    """Fit a linear pairwise ranker of augmentation magnitude on pooled features; held-out accuracy.

    Pair ``p`` is two augmented copies of one image: features ``z_a[p]``,
    ``z_b[p]`` and magnitudes ``m_a[p]``, ``m_b[p]``. Pairs with equal
    magnitudes carry no order and are dropped. The others are split at random
    (``generator``) into training and held-out pairs; the scorer is fitted on
    the training pairs (see the docstring of :mod:`augnet.probes.ranking`) and scored on both.

    Args:
        z_a, z_b: pooled features of the two copies, a (P, D) tensor or
            ``{layer: (P, Ch) or (P, Ch, ...)}`` (feature maps are globally
            average pooled; layers are concatenated in the order of ``z_a``), of any floating or
            integer dtype (bool and complex features are refused).
        m_a, m_b: the augmentation magnitudes of the two copies, (P,) tensors of finite real numbers.
        test_fraction: the share of pairs held out, in (0, 1).
        l2: L2 penalty on the weights of the standardised features, a finite number >= 0.
        aggregate: ``"mean"`` or ``"max"``, for :func:`layer_importance`.
        generator: draws the train / test split (a CPU ``torch.Generator``, or ``None``).
        max_iter: L-BFGS iterations.

    Returns:
        ``{"accuracy", "train_accuracy"}`` (floats in [0, 1]; chance is 0.5),
        ``"correct"`` (per held-out pair: 1, 0, or 0.5 on a score tie),
        ``"test_index"``, ``"train_index"`` (pair indices), ``"weight"`` (D,)
        in raw units (score a copy with ``concatenated features @ weight``),
        ``"std"`` (D,) (0 for channels constant up to rounding, which get no
        weight), ``"sizes"`` (``{layer: channels}``), ``"importance"``
        (``{layer: share}``), ``"loss"`` (final training rank loss),
        ``"n_train"``, ``"n_test"``, ``"n_ties"`` (pairs dropped).

    Shape:
        - z_a, z_b: :math:`(P, D)` or a dict of :math:`(P, Ch_l, ...)`
        - m_a, m_b: :math:`(P,)`

    Examples:
        >>> g = torch.Generator().manual_seed(0)
        >>> m_a, m_b = torch.rand(200, generator=g), torch.rand(200, generator=g)
        >>> noise = torch.randn(200, 3, generator=g)
        >>> z_a, z_b = torch.stack([m_a, noise[:, 0], noise[:, 1]], 1), torch.stack([m_b, noise[:, 2], noise[:, 1]], 1)
        >>> ranking_probe(z_a, z_b, m_a, m_b, generator=g)["accuracy"]
        1.0
    """
    la, lb = _as_layers(z_a, "z_a"), _as_layers(z_b, "z_b")
    if list(la) != list(lb):
        raise ValueError(f"z_a and z_b must name the same layers, got {list(la)} and {list(lb)}")
    eps_a, eps_b = _precision(z_a), _precision(z_b)
    n = next(iter(la.values())).shape[0]
    for layer in la:
        if la[layer].shape != lb[layer].shape or la[layer].shape[0] != n:
            raise ValueError(
                f"layer {layer!r}: z_a and z_b must be (P, Ch) with the same P for every layer, "
                f"got {tuple(la[layer].shape)} and {tuple(lb[layer].shape)}"
            )
    ma, mb = _as_magnitudes(m_a, n, "m_a"), _as_magnitudes(m_b, n, "m_b")
    if aggregate not in AGGREGATES:
        raise ValueError(f"aggregate must be one of {AGGREGATES}, got {aggregate!r}")
    if isinstance(test_fraction, bool) or not isinstance(test_fraction, numbers.Real) or not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must lie in (0, 1), got {test_fraction!r}")
    if isinstance(l2, bool) or not isinstance(l2, numbers.Real) or l2 < 0:
        raise ValueError(f"l2 must be a non-negative number, got {l2!r}")
    if not math.isfinite(l2):  # went through to the fit, whose NaN weights were refused as layer_importance's
        raise ValueError(f"l2 must be a finite number, got {l2!r}")
    if not is_int(max_iter) or max_iter < 1:
        raise ValueError(f"max_iter must be a positive integer, got {max_iter!r}")
    _check_generator(generator)  # torch.randperm's own error named no argument

    sizes = {layer: a.shape[1] for layer, a in la.items()}
    za, zb = torch.cat(list(la.values()), 1), torch.cat(list(lb.values()), 1)
    sign = torch.sign(ma - mb)
    kept = torch.nonzero(sign != 0).flatten()
    order = kept[torch.randperm(len(kept), generator=generator)]
    n_test = round(len(order) * float(test_fraction))
    if n_test < 1 or len(order) - n_test < 1:
        raise ValueError(
            f"need at least one training and one held-out pair with different magnitudes; got {len(kept)} of {n} "
            f"pairs with different magnitudes and test_fraction={test_fraction}"
        )
    test, train = order[:n_test], order[n_test:]

    seen = torch.cat([za[train], zb[train]])
    std = seen.std(0, unbiased=False)
    rms = seen.pow(2).mean(0).sqrt()
    # Channels constant up to rounding carry no signal; standardising them would amplify the rounding.
    # Relative to each channel's size, so that features scaled by any factor rank the same. Nor does a channel
    # whose two copies never differ by more than the rounding of the features as given (ROUNDING_ULPS units
    # of their dtype's precision): a ranker fitted to that rounding would report a signal that is not there.
    ulp = torch.cat([torch.full((sizes[k],), max(eps_a[k], eps_b[k]), dtype=torch.float64) for k in la])
    change = (za[train] - zb[train]).abs().amax(0)
    live = (std > 1e-12 * rms) & (change > ROUNDING_ULPS * ulp * rms)
    if not bool(live.any()) and bool(((std > 1e-12 * rms) & (change > 0)).any()):  # moved, by rounding alone
        warnings.warn(
            f"ranking_probe: the copies' features differ only at the rounding of their dtype (at most "
            f"{ROUNDING_ULPS} units of its precision): no channel moves with the magnitude",
            RuntimeWarning,
            stacklevel=caller_stacklevel(*PROBES),
        )
    std = torch.where(live, std, torch.zeros_like(std))
    scale = torch.where(live, std, torch.ones_like(std))
    # Differences oriented so that the copy with the larger magnitude comes first.
    d = sign[:, None] * (za - zb) / scale * live
    w_std, loss = _fit(d[train], float(l2), int(max_iter))
    weight = torch.where(live, w_std / scale, torch.zeros_like(w_std))

    gap = d @ w_std
    correct = _correct(gap[test])
    return {
        "accuracy": float(correct.mean()),
        "train_accuracy": float(_correct(gap[train]).mean()),
        "correct": correct,
        "test_index": test,
        "train_index": train,
        "weight": weight,
        "std": std,
        "sizes": sizes,
        "importance": layer_importance(weight, std, sizes, aggregate),
        "loss": loss,
        "n_train": len(train),
        "n_test": len(test),
        "n_ties": n - len(kept),
    }
