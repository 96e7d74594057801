"""Invariance measures of activations under a fixed set of transformations, per unit (Quiroga et al.'s family).

Every measure here reads activations already computed: ``a`` of shape ``(T, N, U)``, unit ``u`` of
sample ``n`` under transformation ``t`` (the identity may be one of the ``T``). A layer's feature
maps become units by pooling them first (``U = C``) or by taking every position as a unit
(``U = C * H * W``) and averaging the statistic over positions after (:func:`channel_mean`).

=========================  ===================================================  ===============================
measure                    per unit (``u``)                                     paper
=========================  ===================================================  ===============================
normalized_variance        variance across transformations / across samples     Quiroga et al. (2023), tmeasures
                           (0: invariant)
anova_invariance           one-way ANOVA, transformations as groups: F, p,      Quiroga et al. (2023), tmeasures
                           corrected p, invariant where not significant
goodfellow_invariance      local firing rate / global firing rate               Goodfellow et al. (2009)
                           (``1 / G``: invariant)
distance_invariance        mean distance across transformations / across        Quiroga et al. (2023), tmeasures
                           samples (0: invariant)
same_equivariance          ``g^-1 F(g x)`` against ``F(x)``, normalised by      Quiroga et al. (2023), tmeasures;
                           the channel's variance (0: same-equivariant)         Lenc & Vedaldi (2015)
=========================  ===================================================  ===============================

References: F. Quiroga, J. Torrents-Barrena, L. Lanzarini, D. Puig-Valls, "Invariance measures for
neural networks", Applied Soft Computing 132 (2023), and its library ``tmeasures``; I. Goodfellow,
Q. Le, A. Saxe, H. Lee, A. Ng, "Measuring invariances in deep networks", NeurIPS 2009; K. Lenc,
A. Vedaldi, "Understanding image representations by measuring their equivariance and
equivalence", CVPR 2015.

Everything is computed in float64 on the activations' device; no input is modified.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import torch
from torch import Tensor

from augnet._checks import check_bool, is_int
from augnet.probes.stats import CORRECTIONS, _check_alpha, f_sf, p_adjust

__all__ = [
    "ACTIONS",
    "act",
    "anova_invariance",
    "channel_mean",
    "distance_invariance",
    "f_sf",
    "goodfellow_invariance",
    "normalized_variance",
    "p_adjust",
    "same_equivariance",
]

#: The exact actions on images and feature maps that :func:`act` and :func:`same_equivariance` know.
ACTIONS = ("identity", "rot90", "rot180", "rot270", "hflip", "vflip", "transpose", "translate")


def _check_activations(a, name: str = "a", min_t: int = 2, min_n: int = 2) -> Tensor:
    """``a`` checked as (T, N, U) finite floating activations; returned in float64."""
    if not isinstance(a, Tensor):
        raise TypeError(f"{name} must be a tensor of activations (T, N, U), got {type(a).__name__}")
    if a.dim() != 3 or not a.is_floating_point():
        raise ValueError(f"{name} must be floating activations of shape (T, N, U), got {a.dtype} {tuple(a.shape)}")
    t, n, u = a.shape
    if t < min_t or n < min_n or u < 1:
        raise ValueError(
            f"{name} needs at least {min_t} transformations, {min_n} samples and 1 unit, got shape {tuple(a.shape)}"
        )
    if not bool(torch.isfinite(a).all()):
        raise ValueError(f"{name} holds {int((~torch.isfinite(a)).sum())} non-finite values")
    return a.detach().to(torch.float64)


def _ratio(num: Tensor, den: Tensor) -> Tensor:
    """``num / den`` with ``0 / 0 = nan``, ``x / 0 = inf`` for ``x > 0`` (numerators are >= 0) and ``x / nan = nan``."""
    out = num / den.clamp_min(torch.finfo(den.dtype).tiny)
    out = torch.where(den > 0, out, torch.where((num > 0) & (den == 0), torch.full_like(num, torch.inf), torch.nan))
    return out


def _check_ddof(ddof) -> int:
    if not is_int(ddof) or ddof not in (0, 1):
        raise ValueError(f"ddof must be 0 or 1, got {ddof!r}")
    return int(ddof)


def normalized_variance(a: Tensor, ddof: int = 1, spread: str = "variance") -> dict[str, Tensor]:
    """Per-unit normalised variance: variance across transformations over variance across samples.

    Quiroga et al. (2023), section 3 ("Normalized Variance"), the ``NormalizedVarianceInvariance`` of
    tmeasures: the transformation variance of unit ``u`` is the mean over samples of the variance of
    ``a[:, n, u]`` across the ``T`` transformations; its sample variance is the mean over
    transformations of the variance of ``a[t, :, u]`` across the ``N`` samples; the normalised
    variance is their quotient. 0: the unit does not move under the transformations; about 1: they
    move it as much as changing the input does.

    Both variances use ``ddof`` (default 1, the unbiased ``n - 1`` that tmeasures' running variance
    divides by). ``spread="std"`` averages standard deviations instead of variances (the mean over
    samples of the standard deviation across transformations, over the mean over transformations of
    the standard deviation across samples): the quotient tmeasures 1.2's numpy
    ``NormalizedVarianceInvariance`` computes. A unit that is constant over every sample and
    transformation (both parts 0) gets NaN (tmeasures gives 1); one that varies across
    transformations but not across samples gets ``inf`` (as tmeasures).

    Shape:
        - a: (T, N, U), T >= 2 transformations, N >= 2 samples.
        - every output: (U,), float64.

    Args:
        a: activations, ``a[t, n, u]``.
        ddof: 1 (default) or 0.
        spread: ``"variance"`` (default) or ``"std"``.

    Returns:
        ``{"transformation_variance", "sample_variance", "normalized_variance"}``, each (U,).

    Raises:
        TypeError: ``a`` is not a tensor.
        ValueError: ``a`` is not (T, N, U) floating with T, N >= 2, holds non-finite values, ``ddof`` is
            not 0 or 1, or ``spread`` is neither ``"variance"`` nor ``"std"``.

    Examples:
        >>> a = torch.tensor([[[1.0], [3.0]], [[1.0], [3.0]]])  # two transformations that change nothing
        >>> normalized_variance(a)["normalized_variance"]
        tensor([0.], dtype=torch.float64)
    """
    a = _check_activations(a)
    ddof = _check_ddof(ddof)
    if spread not in ("variance", "std"):
        raise ValueError(f"spread must be 'variance' or 'std', got {spread!r}")
    of = torch.var if spread == "variance" else torch.std
    tv = of(a, 0, correction=ddof).mean(0)
    sv = of(a, 1, correction=ddof).mean(0)
    return {"transformation_variance": tv, "sample_variance": sv, "normalized_variance": _ratio(tv, sv)}


def anova_invariance(a: Tensor, alpha: float = 0.05, correction: str = "bonferroni") -> dict[str, Tensor]:
    """Per-unit one-way ANOVA with the transformation as the factor, and the fraction of invariant units.

    Quiroga et al. (2023), section 3 ("ANOVA"), the ``ANOVAInvariance`` of tmeasures: for each unit,
    the ``T`` transformations are the groups and the ``N`` samples their observations; the null
    hypothesis is that the unit's mean activation is the same under every transformation. With
    ``m_t`` the mean of group ``t`` and ``m`` the grand mean,

    ``F = [N sum_t (m_t - m)^2 / (T - 1)] / [sum_{t,n} (a_tn - m_t)^2 / (T (N - 1))]``

    on ``(T - 1, T (N - 1))`` degrees of freedom (tmeasures' ``d_b`` and ``d_w``), ``p = P(F' > F)``
    (:func:`f_sf`). A unit is invariant at level ``alpha`` where the null is not rejected: its
    corrected p-value (:func:`p_adjust` over the units) is above ``alpha``. An exactly invariant unit
    has ``F = 0``, ``p = 1``. A constant unit (no variance at all) has NaN ``F`` and ``p`` and is not
    counted; one with variance between groups only has ``F = inf``, ``p = 0``.

    Shape:
        - a: (T, N, U), T >= 2, N >= 2.
        - ``f``, ``p_value``, ``p_adjusted``, ``invariant``: (U,); ``invariant_fraction``: 0-d.

    Args:
        a: activations ``a[t, n, u]``.
        alpha: the level in (0, 1) (default 0.05).
        correction: ``"bonferroni"`` (default; tmeasures' choice), ``"bh"`` (Benjamini-Hochberg) or
            ``"none"``.

    Returns:
        ``{"f", "p_value", "p_adjusted", "invariant" (bool), "invariant_fraction" (over the units with a
        finite p-value; NaN if none), "dfn", "dfd"}``.

    Raises:
        TypeError: ``a`` is not a tensor.
        ValueError: bad ``a`` (see :func:`normalized_variance`), ``alpha`` or ``correction``.
    """
    a = _check_activations(a)
    alpha = _check_alpha(alpha)
    if correction not in CORRECTIONS:
        raise ValueError(f"correction must be one of {CORRECTIONS}, got {correction!r}")
    t, n, _ = a.shape
    group = a.mean(1)  # (T, U)
    grand = group.mean(0)  # (U,): equal groups, so the mean of the means
    dfn, dfd = t - 1, t * (n - 1)
    between = n * ((group - grand) ** 2).sum(0) / dfn
    within = ((a - group[:, None]) ** 2).sum((0, 1)) / dfd
    f = _ratio(between, within)
    p = f_sf(f, dfn, dfd)
    adjusted = p_adjust(p, correction)
    finite = ~torch.isnan(adjusted)
    invariant = finite & (adjusted > alpha)
    fraction = invariant.sum().double() / finite.sum() if bool(finite.any()) else torch.tensor(torch.nan)
    return {
        "f": f,
        "p_value": p,
        "p_adjusted": adjusted,
        "invariant": invariant,
        "invariant_fraction": fraction.to(torch.float64),
        "dfn": torch.tensor(float(dfn), dtype=torch.float64),
        "dfd": torch.tensor(float(dfd), dtype=torch.float64),
    }


def goodfellow_invariance(clean: Tensor, moved: Tensor, rate: float = 0.01) -> dict[str, Tensor]:
    """Goodfellow et al.'s firing-rate invariance per unit: local firing rate over global firing rate.

    Goodfellow, Le, Saxe, Lee & Ng, "Measuring invariances in deep networks" (NeurIPS 2009),
    section 3: each unit ``u`` gets a threshold ``thr_u`` so that it fires (``a > thr_u``) on a fixed
    fraction ``rate`` of the inputs; here, of the clean inputs: ``thr_u`` is the
    ``(k + 1)``-th largest clean activation with ``k = max(1, round(rate * N))``, so at most ``k`` of
    the ``N`` clean inputs fire (exactly ``k`` without ties). The global firing rate ``G_u`` is the
    fraction of clean inputs that fire; the local firing rate ``L_u`` is, over the clean inputs that
    fire, the fraction of their transformed versions that fire too. The score ``L_u / G_u`` is
    largest, ``1 / G_u``, for a unit whose firing no transformation changes; a unit that never fires
    (constant, or tied at its top) has NaN ``L`` and score.

    Shape:
        - clean: (N, U), N >= 2; moved: (T, N, U), the same inputs under ``T`` transformations.
        - every output: (U,), float64.

    Args:
        clean: the activations of the clean inputs.
        moved: their activations under each transformation.
        rate: the target global firing rate in (0, 1) (default 0.01, Goodfellow et al.'s).

    Returns:
        ``{"threshold", "global_rate", "local_rate", "invariance"}``, each (U,).

    Raises:
        TypeError: an activation is not a tensor.
        ValueError: bad shapes (``moved`` not (T, N, U) with ``clean``'s N and U), non-finite values, or
            ``rate`` outside (0, 1).

    Examples:
        >>> clean = torch.arange(10.0)[:, None]
        >>> out = goodfellow_invariance(clean, clean[None].repeat(3, 1, 1), rate=0.2)
        >>> out["global_rate"], out["invariance"]
        (tensor([0.2000], dtype=torch.float64), tensor([5.], dtype=torch.float64))
    """
    if not isinstance(clean, Tensor):
        raise TypeError(f"clean must be a tensor of activations (N, U), got {type(clean).__name__}")
    if clean.dim() != 2:
        raise ValueError(f"clean must be activations of shape (N, U), got {tuple(clean.shape)}")
    moved = _check_activations(moved, "moved", min_t=1)
    clean = _check_activations(clean[None], "clean", min_t=1)[0]
    if moved.shape[1:] != clean.shape:
        raise ValueError(
            f"moved must be (T, N, U) with clean's (N, U) = {tuple(clean.shape)}, got {tuple(moved.shape)}"
        )
    if isinstance(rate, bool) or not isinstance(rate, numbers.Real) or not 0 < rate < 1:
        raise ValueError(f"rate must be a firing rate in (0, 1), got {rate!r}")
    n = len(clean)
    k = min(max(1, round(float(rate) * n)), n - 1)
    threshold = clean.sort(0, descending=True).values[k]  # (U,): the (k + 1)-th largest
    fires = clean > threshold  # (N, U)
    g = fires.double().mean(0)
    moved_fires = (moved > threshold).double()  # (T, N, U)
    hits = (moved_fires * fires.double()).sum((0, 1))
    total = fires.double().sum(0) * moved.shape[0]
    local = torch.where(total > 0, hits / total.clamp_min(1), torch.nan)
    score = torch.where(g > 0, local / g.clamp_min(torch.finfo(g.dtype).tiny), torch.nan)
    return {"threshold": threshold, "global_rate": g, "local_rate": local, "invariance": score}


def _pair_abs_sum(v: Tensor, dim: int) -> Tensor:
    """``sum_{i < j} |v_i - v_j|`` along ``dim``, by sorting: ``sum_i v_(i) (2 i - n + 1)``, O(n log n)."""
    s = v.sort(dim).values
    n = s.shape[dim]
    w = 2 * torch.arange(n, dtype=s.dtype, device=s.device) - n + 1
    shape = [1] * s.dim()
    shape[dim] = n
    return (s * w.reshape(shape)).sum(dim)


def distance_invariance(a: Tensor) -> dict[str, Tensor]:
    """Per-unit distance-based invariance: mean distance across transformations over across samples.

    Quiroga et al. (2023), the ``NormalizedDistanceInvariance`` of tmeasures, with the absolute
    difference as the distance of a unit: the transformation distance of unit ``u`` is the mean over
    samples of the mean ``|a[t, n, u] - a[t', n, u]|`` over the pairs ``t < t'``; its sample distance
    the mean over transformations of the mean ``|a[t, n, u] - a[t, n', u]|`` over the pairs ``n < n'``
    (every pair, in O(N log N) by sorting). ``layer`` is the same quotient for whole activation
    vectors under the L1 (Manhattan) distance: the sum of the units' transformation distances over
    the sum of their sample distances. 0: invariant. Zero divisions as in :func:`normalized_variance`.

    Shape:
        - a: (T, N, U), T >= 2, N >= 2.
        - ``transformation_distance``, ``sample_distance``, ``normalized_distance``: (U,); ``layer``: 0-d.

    Returns:
        ``{"transformation_distance", "sample_distance", "normalized_distance", "layer"}``.

    Raises:
        TypeError, ValueError: as :func:`normalized_variance`.

    Examples:
        >>> a = torch.tensor([[[0.0], [2.0]], [[1.0], [3.0]]])  # the transformation adds 1, samples differ by 2
        >>> distance_invariance(a)["normalized_distance"]
        tensor([0.5000], dtype=torch.float64)
    """
    a = _check_activations(a)
    t, n, _ = a.shape
    td = _pair_abs_sum(a, 0).mean(0) / (t * (t - 1) / 2)
    sd = _pair_abs_sum(a, 1).mean(0) / (n * (n - 1) / 2)
    return {
        "transformation_distance": td,
        "sample_distance": sd,
        "normalized_distance": _ratio(td, sd),
        "layer": _ratio(td.sum(), sd.sum()),
    }


def _parse_action(action) -> tuple[str, int, int]:
    """``action`` as (name, dy, dx): a name of ``ACTIONS``, or ``("translate", dy, dx)``."""
    if isinstance(action, str) and action in ACTIONS and action != "translate":
        return action, 0, 0
    if (
        isinstance(action, Sequence)
        and not isinstance(action, str)
        and len(action) == 3
        and action[0] == "translate"
        and all(is_int(v) for v in action[1:])
    ):
        return "translate", int(action[1]), int(action[2])
    raise ValueError(
        f"action must be one of {[a for a in ACTIONS if a != 'translate']} or ('translate', dy, dx) with integer "
        f"pixels, got {action!r}"
    )


def _check_maps(z, name: str) -> Tensor:
    if not isinstance(z, Tensor):
        raise TypeError(f"{name} must be a tensor of feature maps (N, C, H, W), got {type(z).__name__}")
    if z.dim() != 4 or not z.is_floating_point():
        raise ValueError(f"{name} must be floating feature maps (N, C, H, W), got {z.dtype} {tuple(z.shape)}")
    return z


def act(z: Tensor, action, inverse: bool = False) -> Tensor:
    """An exact action ``g`` on images or feature maps, or its inverse (quarter turns, flips, translations).

    Args:
        z: the maps to move.
        action: ``"identity"``, ``"rot90"``, ``"rot180"``, ``"rot270"``, ``"hflip"``, ``"vflip"``, ``"transpose"``
            or ``("translate", dy, dx)`` with integer ``dy``, ``dx``.
        inverse: apply ``g``'s inverse instead (default ``False``).

    The actions are rotations by multiples of 90 degrees, flips, the transpose and integer translations:
    ``"rot90"`` turns counter-clockwise on screen (``torch.rot90`` over the (H, W) axes), ``"hflip"``
    mirrors left-right, ``"vflip"`` top-bottom, ``"transpose"`` swaps H and W; ``("translate", dy, dx)``
    moves the content ``dy`` pixels down and ``dx`` right, zeros coming in (a new tensor, nothing
    wraps around). The rotations by 90 and 270 degrees and the transpose need square maps.

    Shape:
        - z: (N, C, H, W); output: the same shape.

    Raises:
        TypeError: ``z`` is not a tensor.
        ValueError: ``z`` is not (N, C, H, W) floating, ``action`` is unknown, or a quarter turn of a
            non-square map. TypeError: ``inverse`` is not True or False.

    Examples:
        >>> z = torch.arange(4.0).reshape(1, 1, 2, 2)
        >>> act(z, "hflip")[0, 0].tolist(), act(z, ("translate", 0, 1))[0, 0].tolist()
        ([[1.0, 0.0], [3.0, 2.0]], [[0.0, 0.0], [0.0, 2.0]])
    """
    z = _check_maps(z, "z")
    check_bool("inverse", inverse)  # "no" was a truthy flag: the inverse was applied
    name, dy, dx = _parse_action(action)
    if name in ("rot90", "rot270", "transpose") and z.shape[-1] != z.shape[-2]:
        raise ValueError(f"action {name!r} needs square maps, got H x W = {tuple(z.shape[-2:])}")
    if name == "identity":
        return z.clone()
    if name in ("rot90", "rot180", "rot270"):
        k = {"rot90": 1, "rot180": 2, "rot270": 3}[name]
        return torch.rot90(z, -k if inverse else k, (-2, -1))
    if name == "hflip":
        return z.flip(-1)
    if name == "vflip":
        return z.flip(-2)
    if name == "transpose":
        return z.transpose(-2, -1).contiguous()
    if inverse:
        dy, dx = -dy, -dx
    out = torch.zeros_like(z)
    h, w = z.shape[-2:]
    if abs(dy) < h and abs(dx) < w:
        out[..., max(dy, 0) : h + min(dy, 0), max(dx, 0) : w + min(dx, 0)] = z[
            ..., max(-dy, 0) : h + min(-dy, 0), max(-dx, 0) : w + min(-dx, 0)
        ]
    return out


def _valid(shape, dy: int, dx: int, margin: int, device) -> Tensor:
    """(H, W) mask of the positions of ``F(x)`` that ``g^-1 F(g x)`` covers for a translation, less ``margin``."""
    h, w = shape
    mask = torch.zeros(h, w, dtype=torch.bool, device=device)
    top, left = max(-dy, 0) + margin, max(-dx, 0) + margin
    bottom, right = h - max(dy, 0) - margin, w - max(dx, 0) - margin
    if top < bottom and left < right:
        mask[top:bottom, left:right] = True
    return mask


def same_equivariance(z: Tensor, moved: Sequence[Tensor], actions: Sequence, margin: int = 0) -> dict[str, Tensor]:
    """Same-equivariance of feature maps: ``F(g x)`` transformed back by ``g^-1``, against ``F(x)``, per channel.

    A layer ``F`` is same-equivariant to ``g`` when ``F(g x) = g F(x)``: the transformation acts on
    its feature maps as on the images (Lenc & Vedaldi, 2015; Quiroga et al., 2023, the
    "same-equivariance" measures of tmeasures, which transform the feature maps back before
    comparing). For each action, ``g^-1 F(g x)`` (:func:`act` with ``inverse=True``) is compared
    with ``F(x)``, exactly for the rotations by multiples of 90 degrees, the flips and the transpose;
    for a translation by whole pixels, within the valid region only (the positions whose content
    did not come in from the border), less ``margin`` more pixels on every side (for the border
    effects of padded convolutions).

    Per channel ``c``: ``error`` is the mean squared difference over actions, samples and compared
    positions; ``scale`` the variance of ``F(x)[:, c]`` over samples and positions (ddof 1; NaN, and
    ``normalized`` with it, for one sample of one position);
    ``normalized = error / scale`` (0: same-equivariant; about 2 for maps unrelated to the
    originals; zero divisions as :func:`normalized_variance`); ``relative`` the root of the summed
    squared differences over that of ``F(x)`` on the compared positions, for the whole layer.

    Shape:
        - z: (N, C, H, W), ``F(x)``; moved: T tensors (N, C, H, W), ``F(g_t x)``; actions: T actions.
        - ``error``, ``scale``, ``normalized``: (C,); ``relative``: 0-d; all float64.

    Args:
        z: the feature maps of the clean inputs.
        moved: the feature maps of the inputs under each action (same pixel units as the maps: a
            translation of the images by ``s`` pixels is one of ``s / stride`` on the maps).
        actions: one per ``moved``: a name of ``ACTIONS`` or ``("translate", dy, dx)``.
        margin: extra pixels left out on every side for translations (default 0).

    Returns:
        ``{"error", "scale", "normalized", "relative"}``.

    Raises:
        TypeError: a map is not a tensor.
        ValueError: shapes differ, maps are not finite, an action is unknown or does not fit the maps,
            ``margin`` is negative, or nothing is left to compare.

    Examples:
        >>> z = torch.rand(4, 2, 5, 5)
        >>> same_equivariance(z, [z.flip(-1)], ["hflip"])["normalized"]
        tensor([0., 0.], dtype=torch.float64)
    """
    z = _check_maps(z, "z")
    if isinstance(moved, Tensor) or not isinstance(moved, Sequence) or not moved:
        raise TypeError("moved must be a non-empty list of feature maps (N, C, H, W), one per action")
    if isinstance(actions, str) or not isinstance(actions, Sequence) or len(actions) != len(moved):
        raise ValueError(f"actions must be a list of {len(moved)} actions, one per moved map, got {actions!r}")
    if not is_int(margin) or margin < 0:
        raise ValueError(f"margin must be a non-negative integer, got {margin!r}")
    for i, m in enumerate(moved):
        _check_maps(m, f"moved[{i}]")
        if m.shape != z.shape:
            raise ValueError(f"moved[{i}] must have z's shape {tuple(z.shape)}, got {tuple(m.shape)}")
    for name, maps in (("z", z), *((f"moved[{i}]", m) for i, m in enumerate(moved))):  # which, and how many
        bad = int((~torch.isfinite(maps)).sum())
        if bad:
            raise ValueError(f"{name} holds {bad} non-finite values (NaN or inf): the feature maps must be finite")
    ref = z.detach().double()
    sq = torch.zeros(z.shape[1], dtype=torch.float64, device=z.device)
    norm = torch.zeros((), dtype=torch.float64, device=z.device)
    count = 0
    for m, action in zip(moved, actions):
        name, dy, dx = _parse_action(action)
        back = act(m.detach().double(), action, inverse=True)
        if name == "translate":
            mask = _valid(z.shape[-2:], dy, dx, int(margin), z.device)
        else:
            mask = torch.ones(z.shape[-2:], dtype=torch.bool, device=z.device)
        if not bool(mask.any()):
            raise ValueError(f"action {action!r} with margin {margin} leaves no position to compare")
        diff = (back - ref)[..., mask]  # (N, C, P)
        sq = sq + (diff**2).sum((0, 2))
        norm = norm + (ref[..., mask] ** 2).sum()
        count += diff.shape[0] * diff.shape[2]
    error = sq / count
    # One sample of one position has no variance (torch would warn and give NaN, and _ratio turn it into inf).
    spread = ref.transpose(0, 1).flatten(1)
    scale = spread.var(1) if spread.shape[1] >= 2 else torch.full_like(error, torch.nan)
    return {
        "error": error,
        "scale": scale,
        "normalized": _ratio(error, scale),
        "relative": _ratio(sq.sum().sqrt(), norm.sqrt()),
    }


def channel_mean(values: Tensor, channels: int) -> Tensor:
    """A per-unit statistic over ``C * P`` units (channel-major, every position a unit) averaged per channel.

    The ``"positions"`` aggregation of a feature map: measure each (channel, position) as a unit, then
    average the statistic over the positions, ignoring NaN (a position where it is undefined); a
    channel with no finite value is NaN. ``inf`` values are kept (and make the mean ``inf``).

    Shape:
        - values: (C * P,); output: (C,).

    Raises:
        TypeError: ``values`` is not a tensor.
        ValueError: ``channels`` is not a positive int, or ``values`` is not 1-D with a multiple of ``channels``
            entries.

    Examples:
        >>> channel_mean(torch.tensor([1.0, 3.0, float("nan"), 4.0]), 2)
        tensor([2., 4.])
    """
    if not isinstance(values, Tensor):
        raise TypeError(f"values must be a tensor, got {type(values).__name__}")
    if not is_int(channels) or channels < 1:
        raise ValueError(f"channels must be a positive integer, got {channels!r}")
    if values.dim() != 1 or len(values) % channels:
        raise ValueError(f"values must be 1-D with a multiple of {channels} entries, got {tuple(values.shape)}")
    return values.reshape(channels, -1).nanmean(1)
