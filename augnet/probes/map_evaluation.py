"""How a fitted equivariance map is evaluated (Tensmeyer & Martinez, sections 3.3 and 5.5).

Here live the per-sample error :func:`mapping_error`, the split of the rows
into fitted and held-out ones (:data:`DEFAULT_HOLDOUT`), the check that the
training rows determine the map, and the input checks shared by the fits of
:mod:`augnet.probes.maps` and :mod:`augnet.probes.equivariance` and by
:class:`augnet.losses.EquivarianceLoss`.
"""

from __future__ import annotations

import math
import warnings

import torch
from torch import Tensor

from augnet._checks import check_bool, is_int, is_real
from augnet._stack import PROBES, caller_stacklevel
from augnet.probes._common import torch_seed

__all__ = [
    "DEFAULT_HOLDOUT",
    "ERRORS",
    "mapping_error",
]

ERRORS = ("l2", "sq")
#: The fraction of rows held out of a fit by default; the errors are reported on them.
DEFAULT_HOLDOUT = 0.3


# --------------------------------------------------------------------------- errors


def mapping_error(
    pred: Tensor, target: Tensor, error: str = "l2", per_dimension: bool = True, reference: Tensor | None = None
) -> Tensor:
    """Per-sample normalised distance of ``pred`` to ``target`` (Tensmeyer & Martinez, section 3.3).

    ``error="l2"``: ``||target - pred|| / ||target||``; ``error="sq"``: its
    square. With ``per_dimension`` (the default), each dimension ``d`` of both
    is first divided by ``sqrt(r_d^2 + m^2)``: ``r_d`` is the dimension's root
    mean square over the rows of ``reference`` (default ``target``, so that
    errors on a subset of rows can share the scale of the whole set), and
    ``m`` the scale of the layer's typical unit: the root mean square of the
    ``r_d`` of its quietest 90 % of dimensions (its loudest tenth left out),
    at least 1 % of that of all of them.

    Why this normalisation: loud dimensions are brought to a common scale, so
    a few large units do not decide the error (the reason to normalise per
    dimension at all); quiet and silent ones are measured on the typical
    unit's scale, so a nearly silent unit's small change stays small.
    Dividing each dimension by its own ``r_d`` alone made nearly silent units
    decide the error (5 of the 512 channels of an untrained resnet18's layer4
    carried 94 % of it), and a unit exactly 0 on the clean rows, left
    unscaled, made the error jump from 0.2 to 5e9 when one of its values
    became 1e-12. This error is a continuous function of the features, does
    not change when all of them are scaled by one factor, and is not decided
    by units that are dead on the clean rows (also when most of them are).

    Returns:
        (B,) float64; NaN, with a warning, for rows whose target is all zeros.

    Raises:
        TypeError, ValueError: an unknown ``error``, a ``per_dimension`` that is not True or False; ``pred``,
            ``target`` or ``reference`` that is not a (B, ...) tensor with rows; ``pred`` and ``target`` of
            different shapes, or a ``reference`` with another number of features per row.

    Shape:
        - pred, target: (B, ...) of the same shape.
        - reference: (R, ...), any number of rows R with as many features per row.

    Examples:
        >>> z = torch.randn(5, 3)
        >>> mapping_error(z, z).abs().max().item()
        0.0
        >>> mapping_error(torch.zeros(5, 3), z).tolist()
        [1.0, 1.0, 1.0, 1.0, 1.0]
    """
    if error not in ERRORS:
        raise ValueError(f"error must be one of {ERRORS}, got {error!r}")
    check_bool("per_dimension", per_dimension)  # "no" was a truthy flag
    _check_tensor("pred", pred)
    _check_tensor("target", target)
    if pred.shape != target.shape:
        raise ValueError(f"pred and target must have the same shape, got {tuple(pred.shape)} and {tuple(target.shape)}")
    p, t = pred.reshape(len(pred), -1).double(), target.reshape(len(target), -1).double()
    if per_dimension:
        if reference is not None:
            _check_tensor("reference", reference)
        ref = t if reference is None else reference.reshape(len(reference), -1).double().to(t.device)
        if ref.shape[1] != t.shape[1]:
            raise ValueError(f"reference must have {t.shape[1]} features per row, got shape {tuple(reference.shape)}")
        power = ref.square().mean(0)  # (D,): r_d^2
        quiet = power.sort().values[: max(1, int(0.9 * power.numel()))]  # the quietest 90 %
        typical = torch.maximum(quiet.mean(), 1e-4 * power.mean())  # m^2
        scale = (power + typical).sqrt()
        scale = torch.where(scale > 0, scale, torch.ones_like(scale))  # a reference of zeros: unscaled
        p, t = p / scale, t / scale
    num, den = (p - t).norm(dim=1), t.norm(dim=1)
    zero = den == 0
    if bool(zero.any()):
        warnings.warn(
            f"mapping_error: {int(zero.sum())} target row(s) are all zeros; their errors are NaN",
            RuntimeWarning,
            stacklevel=caller_stacklevel(*PROBES),  # the caller's line (2 pointed into the probes' own fits)
        )
    ratio = torch.where(zero, torch.full_like(num, math.nan), num / torch.where(zero, torch.ones_like(den), den))
    return ratio if error == "l2" else ratio.square()


# --------------------------------------------------------------------------- held-out rows


def _seeded_generator(seed: int | None, generator: torch.Generator | None = None) -> torch.Generator | None:
    """``generator`` if given, else a CPU generator seeded with ``seed`` (``None`` for neither)."""
    if generator is not None:
        if not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
        return generator
    if seed is None:
        return None
    if not is_int(seed):
        raise TypeError(f"seed must be an int or None, got {type(seed).__name__}")
    return torch.Generator().manual_seed(torch_seed(seed))  # 2**64 was "Overflow when unpacking long long"


def _check_rows(n_train: int, n_test: int, d_in: int) -> None:
    """Refuse (nothing held out) or warn (rows held out) when the training rows cannot determine the map."""
    need = d_in + 1
    if n_train >= need:
        return
    frac = n_test / (n_train + n_test) if n_test else DEFAULT_HOLDOUT
    total = math.ceil(need / (1.0 - frac))
    core = (
        f"{n_train} training rows for a map with {need} parameters per output feature (D = {d_in} inputs and a "
        f"bias): it can fit any targets on those rows, even features unrelated to the transformed ones"
    )
    fix = (
        f"pass at least {need} training rows (N >= {total} with {frac:.0%} held out), or fewer features "
        f"(pool them, e.g. reduce='mean', or project them onto at most {n_train - 1} dimensions)"
    )
    if n_test == 0:
        raise ValueError(
            f"{core}, so the in-sample error is about 0 whatever the features. Hold rows out "
            f"(holdout={DEFAULT_HOLDOUT}, the default) and {fix}"
        )
    warnings.warn(
        f"{core}; the map is under-determined and its held-out error overstates the features' equivariance "
        f"error. To measure it, {fix}",
        RuntimeWarning,
        stacklevel=caller_stacklevel(*PROBES),
    )


def _given_rows(n: int, holdout: Tensor, device) -> Tensor:
    """The (n,) boolean mask of the rows ``holdout`` names: a boolean mask, or 1-D integer indices in [0, n)."""
    h = holdout.to(device)
    if h.dtype == torch.bool:
        if h.shape != (n,):
            raise ValueError(f"a boolean holdout mask must have shape ({n},), got {tuple(h.shape)}")
        return h
    if h.is_floating_point() or h.is_complex() or h.dim() != 1:
        raise ValueError(f"holdout indices must be a 1-D integer tensor, got {h.dtype} of shape {tuple(h.shape)}")
    if len(h) and (int(h.min()) < 0 or int(h.max()) >= n):
        raise ValueError(f"holdout indices must lie in [0, {n}), got {h.tolist()}")
    mask = torch.zeros(n, dtype=torch.bool, device=device)
    mask[h] = True
    return mask


def _split(n: int, holdout: float | Tensor, generator: torch.Generator | None, device) -> tuple[Tensor, Tensor]:
    """(train, test) row indices: a random fraction ``holdout`` held out, or the given rows."""
    if isinstance(holdout, Tensor):
        mask = _given_rows(n, holdout, device)
        test = mask.nonzero().flatten()
        train = (~mask).nonzero().flatten()
    else:
        if not is_real(holdout):
            raise TypeError(f"holdout must be a fraction or a tensor of rows, got {type(holdout).__name__}")
        frac = float(holdout)
        if not 0.0 <= frac < 1.0:
            raise ValueError(f"holdout must be a fraction in [0, 1) or a tensor of rows, got {holdout}")
        n_test = round(frac * n)
        if frac > 0 and n_test == 0:
            n_test = 1
        perm = torch.randperm(n, generator=generator).to(device)
        test, train = perm[:n_test].sort().values, perm[n_test:].sort().values
    if len(train) < 2:
        raise ValueError(f"need at least 2 rows to fit a map, got {len(train)} (of {n}, holdout={holdout})")
    return train, test


# --------------------------------------------------------------------------- checks


def _check_tensor(name: str, t) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"{name} must be a tensor, got {type(t).__name__}")
    if t.dim() < 2:
        raise ValueError(f"{name} must have a batch axis and feature axes, (B, ...), got shape {tuple(t.shape)}")
    if t.shape[0] == 0:
        raise ValueError(f"{name} is an empty batch, shape {tuple(t.shape)}")


def _check_finite_rows(name: str, t: Tensor) -> None:
    """A ValueError naming the rows of ``t`` that hold NaN or infinite values (the other probes do the same)."""
    if t.is_complex() or t.dtype == torch.bool:
        raise TypeError(f"{name} must hold real numbers, got dtype {t.dtype}")
    bad = ~torch.isfinite(t.detach().reshape(len(t), -1)).all(1)
    if bool(bad.any()):
        rows = bad.nonzero().flatten().tolist()
        raise ValueError(
            f"{name} holds NaN or infinite values in row(s) {rows[:10]}{' ...' if len(rows) > 10 else ''}: "
            "in a training row it would spoil the fitted map, in a held-out row its error would be dropped "
            "from the mean; drop those rows (or fix the model) first"
        )


def _check_pair(name1: str, a, name2: str, b) -> None:
    """Both tensors (B, ...) with finite values."""
    _check_tensor(name1, a)
    _check_tensor(name2, b)
    _check_finite_rows(name1, a)
    _check_finite_rows(name2, b)
