"""Invariance scores and curves (AugNet eq. 4; Bouchacourt et al. eq. 1).

For features ``z = phi(x)`` and ``z_t = phi(T(x))`` of a batch,

    score_i = (b_i - d(z_i, z_t_i)) / b_i

with ``d`` the cosine or L2 distance and ``b_i`` a baseline distance between
two different samples, paired by a derangement ``pi`` (a permutation without
fixed points): ``b_i = d(z_i, z_pi(i))`` (``baseline="clean"``, the AugNet
paper's eq. 4) or ``b_i = d(z_t_i, z_t_pi(i))`` (``baseline="transformed"``,
Bouchacourt et al.'s eq. 1, which accounts for how the transformation moves
the whole distribution of features). 1 means invariant, about 0 means the
transformation moves a sample as far as swapping it for another one.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from augnet._stack import PROBES, caller_stacklevel
from augnet.probes._common import (
    Transformed,
    check_classes,
    check_draws,
    check_labels,
    check_model_input,
    check_seed,
    check_transform,
    derangement,
    forward_kwargs,
    magnitude_list,
    seeded,
    summary,
)
from augnet.probes.features import LOGITS, OUTPUT, _features, check_layer, check_rows, describe

__all__ = ["DISTANCES", "RELATIVE_TOLERANCE", "accuracy_curve", "distance", "invariance_curve", "invariance_score"]

DISTANCES = ("cosine", "l2")
BASELINES = ("clean", "transformed")


#: Two feature rows closer than this, relative to their size (an angle in radians for the cosine
#: distance), count as the same point: a baseline that small is 0 and its score NaN. Relative, so that
#: the scores do not depend on the features' scale or on a common offset.
RELATIVE_TOLERANCE = 1e-12


def distance(a: Tensor, b: Tensor, kind: str = "cosine") -> Tensor:
    """Row-wise distance between (B, ...) tensors: ``1 - cos`` or Euclidean. Shape: (B,), float64.

    The cosine distance is computed as ``|a / |a| - b / |b||^2 / 2`` (equal to ``1 - cos``), which
    keeps its precision for rows that are nearly parallel (features with a large common offset) and
    does not depend on the rows' scale. Identical rows are exactly 0 apart; a row of zeros has no
    direction, so its cosine distance to any other row is NaN.

    Args:
        a, b: the rows to compare, (B, ...) each.
        kind: ``"cosine"`` (default) or ``"l2"`` (Euclidean).

    Raises:
        TypeError: ``a`` or ``b`` is not a tensor.
        ValueError: an unknown ``kind``; ``a`` and ``b`` of different shapes (torch broadcast (B, D) against (1, D)
            or (B, 1) silently, pairing rows that are not each other's transformed view), or 0-d ones. A (B,) tensor
            is one number per row.

    Examples:
        >>> a = torch.tensor([[1.0, 0.0], [0.0, 0.0]])
        >>> distance(a, torch.tensor([[0.0, 2.0], [1.0, 0.0]])).tolist()
        [1.0, nan]
    """
    if kind not in DISTANCES:
        raise ValueError(f"distance must be one of {DISTANCES}, got {kind!r}")
    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name} must be a tensor of feature rows (B, ...), got {type(t).__name__}")
    if a.shape != b.shape or a.dim() < 1:
        raise ValueError(f"a and b must be (B, ...) rows of the same shape, got {tuple(a.shape)} and {tuple(b.shape)}")
    a, b = a.reshape(len(a), -1).double(), b.reshape(len(b), -1).double()  # (B,): one number a row (was an IndexError)
    if kind == "l2":
        return (a - b).norm(dim=1)
    na, nb = a.norm(dim=1, keepdim=True), b.norm(dim=1, keepdim=True)
    defined = (na > 0) & (nb > 0)
    unit_a = a / torch.where(defined, na, torch.ones_like(na))
    unit_b = b / torch.where(defined, nb, torch.ones_like(nb))
    d = (unit_a - unit_b).square().sum(1) / 2
    d = torch.where(defined.squeeze(1), d, torch.full_like(d, math.nan))
    return torch.where((a == b).all(1), torch.zeros_like(d), d)  # exactly 0 for identical rows


def invariance_score(
    z: Tensor,
    z_t: Tensor,
    distance: str = "cosine",
    baseline: str = "clean",
    generator: torch.Generator | None = None,
    permutation: Tensor | None = None,
) -> Tensor:
    """Per-sample invariance score ``(b - d(z, z_t)) / b`` (see the module docstring).

    Args:
        z, z_t: features of the clean and of the transformed inputs, (B, ...) with B >= 2.
        distance: ``"cosine"`` or ``"l2"``.
        baseline: ``"clean"`` (AugNet eq. 4) or ``"transformed"`` (Bouchacourt et al. eq. 1).
        generator: draws the derangement pairing each sample with another.
        permutation: a derangement to use instead of drawing one.

    Returns:
        (B,) float64 scores; NaN (with a warning) where the baseline distance is
        0 (e.g. for a model whose features do not depend on its input) or a
        distance is undefined (a cosine with a row of zeros). A baseline counts
        as 0 when it is below ``RELATIVE_TOLERANCE`` relative to the rows'
        size (for the cosine distance: an angle below it), so the scores are
        the same for features scaled by any factor or shifted by a common offset.

    Raises:
        ValueError: if ``z`` or ``z_t`` holds NaN or infinite values (naming the
            rows): such a row would turn its own score and that of the sample
            it serves as a baseline for into NaN.

    Examples:
        >>> z = torch.randn(6, 4)
        >>> bool(torch.allclose(invariance_score(z, z), torch.ones(6, dtype=torch.float64)))
        True
    """
    if baseline not in BASELINES:
        raise ValueError(f"baseline must be one of {BASELINES}, got {baseline!r}")
    if not isinstance(z, Tensor) or not isinstance(z_t, Tensor):
        raise TypeError("z and z_t must be tensors")
    if z.shape != z_t.shape:
        raise ValueError(f"z and z_t must have the same shape, got {tuple(z.shape)} and {tuple(z_t.shape)}")
    if z.dim() < 1 or z.shape[0] < 2:
        raise ValueError(f"need a batch of at least 2 samples to form a baseline, got shape {tuple(z.shape)}")
    for name, t in (("z", z), ("z_t", z_t)):
        bad = ~torch.isfinite(t.reshape(len(t), -1)).all(1)
        if bool(bad.any()):
            raise ValueError(
                f"{name} has NaN or infinite features in rows {bad.nonzero().flatten().tolist()}: each would make "
                "its own score and the score of the sample it is the baseline of NaN; probe finite features"
            )
    n = z.shape[0]
    if permutation is None:
        permutation = derangement(n, generator)
    if not isinstance(permutation, Tensor) or permutation.dtype not in (torch.int64, torch.int32):
        kind = getattr(permutation, "dtype", type(permutation).__name__)
        raise TypeError(f"permutation must be an integer tensor, got {kind}")
    if permutation.shape != (n,):
        raise ValueError(f"permutation must have shape ({n},), got {tuple(permutation.shape)}")
    permutation = permutation.to(z.device, torch.int64)
    if not torch.equal(torch.sort(permutation).values, torch.arange(n, device=z.device)):
        raise ValueError(f"permutation must be a permutation of 0..{n - 1}, got {permutation.tolist()}")
    if (permutation == torch.arange(n, device=z.device)).any():
        raise ValueError("permutation must not map a sample to itself")
    kind = distance
    measure = globals()["distance"]
    d = measure(z, z_t, kind)
    ref = z if baseline == "clean" else z_t
    b = measure(ref, ref[permutation], kind)
    if kind == "cosine":
        zero = b <= RELATIVE_TOLERANCE**2 / 2  # 1 - cos(theta) is about theta^2 / 2
    else:
        flat = ref.reshape(len(ref), -1).double()
        size = torch.maximum(flat.norm(dim=1), flat[permutation].norm(dim=1))
        zero = b <= RELATIVE_TOLERANCE * size
    undefined = zero | b.isnan() | d.isnan()
    if bool(undefined.any()):
        why = "features that do not depend on the input"
        if kind == "cosine" and z[0].numel() == 1:  # the cosine of two numbers is their signs' product
            why = "one feature per row (e.g. a single logit): its cosine is +1 or -1, so two rows of one sign are at 0"
        warnings.warn(
            f"invariance_score: {int(undefined.sum())} score(s) are NaN: {int(zero.sum())} baseline distance(s) are "
            f"0 ({why}), {int((b.isnan() | d.isnan()).sum())} undefined (a row of zeros has no cosine)",
            RuntimeWarning,
            stacklevel=caller_stacklevel(*PROBES),
        )
    safe = torch.where(undefined, torch.ones_like(b), b)
    return torch.where(undefined, torch.full_like(d, math.nan), (safe - d) / safe)


@torch.no_grad()
def invariance_curve(
    model: nn.Module,
    x: Tensor,
    transform,
    magnitudes: Sequence[float],
    layer: str | None = None,
    distance: str = "cosine",
    baseline: str = "clean",
    reduce: str = "flatten",
    copies: int | None = None,
    seed: int = 0,
    batch_size: int | None = None,
    draws: str = "shared",
) -> dict:
    """Invariance score of ``model`` to ``transform`` as a function of its magnitude.

    For each magnitude, the transformation's parameters are drawn once (from
    a generator seeded with ``seed + 1``) and the same derangement is used for
    every magnitude, so the curve varies only with the magnitude.

    By default the features are the activations before the final softmax
    (``layer=None``, ``LOGITS``, the AugNet paper's
    eq. 4 footnote): a plain model's output, or an AugNet's trunk outputs
    averaged over its copies, so that an AugNet and its trunk are compared in
    the same space. ``layer="output"`` reads the model's own output instead (an
    AugNet's aggregated log-probabilities). The result's ``"features"`` says
    which was read.

    Args:
        model: the model, probed in evaluation mode (its modes are restored afterwards).
        x: a batch of inputs, (B, ...) with B >= 2.
        transform: an augnet transform (e.g. ``T.Rotate()``), or any callable
            ``transform(x, magnitude, generator=g)`` returning the B transformed inputs.
        magnitudes: the magnitudes to probe: in [0, 1] for an augnet transform, in
            the callable's own units otherwise.
        layer: a module name for :func:`features`, ``"output"`` or ``"logits"``;
            ``None`` means ``"logits"``.
        distance, baseline: as in :func:`invariance_score`.
        reduce: how a layer's activations are reduced (see :func:`features`).
        copies: for an AugNet, the number of copies it averages.
        seed: seeds the transformation draws, the derangement and AugNet's augmentations.
        batch_size: run the model in chunks of this many rows (default 256); the
            transformed inputs are made chunk by chunk too, for an augnet transform.
            An AugNet draws its augmentations chunk by chunk: another batch size is
            another draw (as another seed is), not the same numbers.
        draws: for an AugNet, ``"shared"`` (its clean and transformed passes draw
            the same augmentations, so they differ only by ``transform``) or
            ``"independent"`` (every pass draws afresh, as two calls of the
            model in use do; the AugNet paper's Fig. B.4, where invariance grows
            with C, needs this).

    Returns:
        ``{"magnitude": [...], "range": [natural range per magnitude, or None for a callable],
        "scores": (M, B) tensor, "summary": [summary dict per magnitude], "features": what was
        read, "draws": draws}``.

    Raises:
        TypeError, ValueError: before the model runs: a bad argument, naming it; images that are
            not finite (naming them), on meta, or in another dtype or on another device than the
            model's parameters; an input an augnet transform cannot take (its shape). After the
            clean pass: features that do not have one row per input, or one number per input with
            ``distance="cosine"`` (pass ``"l2"``).

    Examples:
        >>> from augnet.transforms import image as T
        >>> net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 8 * 8, 4))
        >>> curve = invariance_curve(net, torch.rand(6, 3, 8, 8), T.Rotate(), [0.0, 0.5])
        >>> curve["summary"][0]["median"], curve["features"]
        (1.0, 'logits: the output of Sequential')
    """
    seed = check_seed(seed)  # before anything runs: an int in [0, 2**63 - 3], a NumPy one too
    check_draws(draws)
    check_layer(layer)
    if distance not in DISTANCES:  # (was refused after the clean and the first transformed pass)
        raise ValueError(f"distance must be one of {DISTANCES}, got {distance!r}")
    if baseline not in BASELINES:
        raise ValueError(f"baseline must be one of {BASELINES}, got {baseline!r}")
    check_model_input(model, x)
    magnitudes = magnitude_list(magnitudes)
    is_augnet = check_transform(transform, x, magnitudes)  # its input's shape, before the clean pass
    name = LOGITS if layer is None else layer
    permutation = derangement(len(x), seeded(seed))  # (refuses a batch of fewer than 2 inputs before any pass)
    kwargs = forward_kwargs(model, copies, seed, x.device, draws)
    clean = _features(model, x, name, reduce=reduce, batch_size=batch_size, **kwargs)[name]
    check_rows({name: clean}, len(x))
    if clean.reshape(len(clean), -1).shape[1] == 1 and distance == "cosine":
        raise ValueError(
            f"{name!r} gives one number per input (shape {tuple(clean.shape)}): a cosine needs vectors; "
            "pass distance='l2'"
        )
    scores, ranges = [], []
    for i, m in enumerate(magnitudes):
        xt = Transformed(transform, x, float(m), seeded(seed + 1, x.device))
        kwargs = forward_kwargs(model, copies, seed, x.device, draws, pass_index=i + 1)
        moved = _features(model, xt, name, reduce=reduce, batch_size=batch_size, **kwargs)[name]
        scores.append(invariance_score(clean, moved, distance, baseline, permutation=permutation))
        ranges.append(tuple(transform.natural_range(float(m), tuple(x.shape[2:]) or None)) if is_augnet else None)
    stacked = torch.stack(scores)
    return {
        "magnitude": [float(m) for m in magnitudes],
        "range": ranges,
        "scores": stacked,
        "summary": [summary(s) for s in stacked],
        "features": describe(model, name, copies),
        "draws": draws,
    }


@torch.no_grad()
def accuracy_curve(
    model: nn.Module,
    x: Tensor,
    y: Tensor,
    transform,
    magnitudes: Sequence[float],
    copies: int | None = None,
    seed: int = 0,
    batch_size: int | None = None,
) -> dict:
    """Accuracy of ``model`` on ``transform(x)`` as a function of the magnitude.

    Args:
        model: a classifier returning (B, classes) logits, probed in evaluation mode.
        x: inputs; y: their class labels in ``[0, classes)`` ((B,) or (B, 1), any integer dtype, a
            NumPy array or a list; whole floats too).
        transform, magnitudes, copies, seed, batch_size: as in :func:`invariance_curve`.

    Returns:
        ``{"magnitude": [...], "accuracy": [...]}``.

    Raises:
        TypeError, ValueError: before the model runs: the errors of :func:`invariance_curve`, and
            labels that are not one integer >= 0 per input (one-hot rows, fractions, NaN, bool);
            after the first pass, labels past the model's classes.
    """
    seed = check_seed(seed)  # before anything runs: an int in [0, 2**63 - 3], a NumPy one too
    check_model_input(model, x)
    magnitudes = magnitude_list(magnitudes)
    y = check_labels(x, y)  # a list or an array of class indices too
    check_transform(transform, x, magnitudes)
    accs = []
    for m in magnitudes:
        xt = Transformed(transform, x, float(m), seeded(seed + 1, x.device))
        kwargs = forward_kwargs(model, copies, seed, x.device)
        out = _features(model, xt, OUTPUT, batch_size=batch_size, **kwargs)[OUTPUT]
        check_rows({OUTPUT: out}, len(x))
        if out.dim() != 2:
            raise ValueError(f"the model must return (B, classes) logits, got shape {tuple(out.shape)}")
        if not accs:
            check_classes(y, out.shape[1])
        accs.append(float((out.argmax(1) == y.to(out.device)).double().mean()))
    return {"magnitude": [float(m) for m in magnitudes], "accuracy": accs}
