"""Equivariance maps: learned maps ``M(phi(g x)) ≈ phi(x)``, their fitting and their errors (Tensmeyer & Martinez).

A representation ``phi`` is equivariant to a transformation ``g`` when some
map ``M_g`` undoes ``g`` in feature space, ``M_g(phi(g x)) ≈ phi(x)``
(Tensmeyer & Martinez eq. 1, after Lenc & Vedaldi); it is invariant when
``M_g`` is the identity. Their eq. 2 measures both with a loss ``L``,

    Equivariance(g; L) = min_M 1/N sum_i L(phi(x_i), M(phi(g x_i)))

and invariance is the same sum with ``M = I``. Here ``M`` is learned from
paired features (:func:`fit_equivariance_map`): an affine map ``r + W r + b``
(ridge regression in closed form, or Adam) or a residual block with one
hidden ReLU layer (Adam), both written as the identity plus a correction,
which starts at (Adam) or is shrunk towards (ridge) zero, so that ``M`` is
biased towards the identity as in their section 5.2. Because ``M`` is
restricted to a small family, the equivariance error is an upper bound of
the true minimum.

The reports built on these maps are in :mod:`augnet.probes.equivariance`; the
equivariance loss, which trains such maps with the network, is
:class:`augnet.losses.EquivarianceLoss`.

Errors (section 3.3): ``L_L2(r, r') = ||r - r'|| / ||r||`` per sample, with
``r = phi(x)`` the target and ``r' = M(phi(g x))``, after each feature
dimension is divided by its root mean square over the rows of ``r`` (the
paper "normalize[s] each dimension of r to have similar magnitude"; a
dimension that is 0 on every row is left as is). ``error="sq"`` gives the
squared ratio ``||r - r'||^2 / ||r||^2`` instead, and ``per_dimension=False``
skips the scaling.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = [
    "ERRORS",
    "KINDS",
    "SOLVERS",
    "AffineMap",
    "EquivarianceMap",
    "ResidualReLUMap",
    "fit_equivariance_map",
    "mapping_error",
]

KINDS = ("linear", "residual_relu")
SOLVERS = ("ridge", "sgd")
ERRORS = ("l2", "sq")


# --------------------------------------------------------------------------- maps


class AffineMap(nn.Module):
    """``x W^T + b``, or ``x + x W^T + b`` when ``residual`` (then the identity at W = 0, b = 0).

    Shape:
        - Input: (B, d_in).
        - Output: (B, d_out).
    """

    def __init__(
        self, d_in: int, d_out: int, residual: bool = False, dtype: torch.dtype | None = None, device=None
    ) -> None:
        super().__init__()
        if residual and d_in != d_out:
            raise ValueError(f"a residual map needs d_in == d_out, got {d_in} and {d_out}")
        self.residual = bool(residual)
        self.weight = nn.Parameter(torch.zeros(d_out, d_in, dtype=dtype, device=device))
        self.bias = nn.Parameter(torch.zeros(d_out, dtype=dtype, device=device))

    def forward(self, x: Tensor) -> Tensor:
        out = F.linear(x, self.weight, self.bias)
        return x + out if self.residual else out

    def extra_repr(self) -> str:
        d_out, d_in = self.weight.shape
        return f"d_in={d_in}, d_out={d_out}, residual={self.residual}"


class ResidualReLUMap(nn.Module):
    """``x + W_2 relu(W_1 x + b_1) + b_2``: the identity at initialisation (``W_2 = 0``, ``b_2 = 0``).

    ``W_1`` is drawn from ``N(0, 1 / dim)`` with ``generator``.

    Shape:
        - Input: (B, dim).
        - Output: (B, dim).
    """

    def __init__(
        self,
        dim: int,
        hidden: int | None = None,
        generator: torch.Generator | None = None,
        dtype: torch.dtype | None = None,
        device=None,
    ) -> None:
        super().__init__()
        hidden = dim if hidden is None else int(hidden)
        if hidden < 1:
            raise ValueError(f"hidden must be >= 1, got {hidden}")
        dtype = torch.get_default_dtype() if dtype is None else dtype
        w1 = torch.randn(hidden, dim, generator=generator, dtype=dtype) / math.sqrt(dim)
        self.w1 = nn.Parameter(w1.to(device))
        self.b1 = nn.Parameter(torch.zeros(hidden, dtype=dtype, device=device))
        self.w2 = nn.Parameter(torch.zeros(dim, hidden, dtype=dtype, device=device))
        self.b2 = nn.Parameter(torch.zeros(dim, dtype=dtype, device=device))

    def forward(self, x: Tensor) -> Tensor:
        return x + F.linear(F.relu(F.linear(x, self.w1, self.b1)), self.w2, self.b2)

    def extra_repr(self) -> str:
        return f"dim={self.w1.shape[1]}, hidden={self.w1.shape[0]}"


@dataclass
class EquivarianceMap:
    """A fitted map and its errors; call it on features to map them.

    Attributes:
        module: the map on flat rows, (B, d_in) -> (B, d_out), float64.
        kind, solver: how it was fitted.
        in_shape, out_shape: the per-sample shapes of the source and target features.
        train_index, test_index: the rows it was fitted on and the held-out rows.
        errors: (B,) per-sample error of every row (see :func:`mapping_error`).
        train_error, test_error: mean of ``errors`` over the fitted and the
            held-out rows (``test_error`` is NaN when no row was held out).
        losses: per epoch, the mean squared error of the standardised targets (``solver="sgd"``;
            1 is the error of predicting their mean; empty for ridge).
    """

    module: nn.Module
    kind: str
    solver: str
    in_shape: tuple[int, ...]
    out_shape: tuple[int, ...]
    train_index: Tensor
    test_index: Tensor
    errors: Tensor
    train_error: float
    test_error: float
    losses: list[float] = field(default_factory=list)

    @torch.no_grad()
    def __call__(self, z: Tensor) -> Tensor:
        """Map (B, *in_shape) features to (B, *out_shape), in ``z``'s dtype (float64 for integers)."""
        if not isinstance(z, Tensor):
            raise TypeError(f"z must be a tensor, got {type(z).__name__}")
        if tuple(z.shape[1:]) != self.in_shape and (z.dim() != 2 or z.shape[1] != math.prod(self.in_shape)):
            raise ValueError(f"expected features of shape (B, *{self.in_shape}), got {tuple(z.shape)}")
        p = next(self.module.parameters())
        out = self.module(z.reshape(len(z), -1).to(device=p.device, dtype=p.dtype))
        dtype = z.dtype if z.is_floating_point() else torch.float64
        return out.reshape(len(z), *self.out_shape).to(device=z.device, dtype=dtype)


# --------------------------------------------------------------------------- errors


def mapping_error(
    pred: Tensor, target: Tensor, error: str = "l2", per_dimension: bool = True, reference: Tensor | None = None
) -> Tensor:
    """Per-sample normalised distance of ``pred`` to ``target`` (Tensmeyer & Martinez, section 3.3).

    ``error="l2"``: ``||target - pred|| / ||target||``; ``error="sq"``: its
    square. With ``per_dimension``, each dimension of both is first divided
    by its root mean square over the rows of ``reference`` (default
    ``target``; dimensions that are 0 on every row are left unscaled), so
    that errors on a subset of rows can share the scale of the whole set.

    Returns:
        (B,) float64; NaN, with a warning, for rows whose target is all zeros.

    Shape:
        - pred, target: (B, ...) of the same shape.

    Examples:
        >>> z = torch.randn(5, 3)
        >>> mapping_error(z, z).abs().max().item()
        0.0
        >>> mapping_error(torch.zeros(5, 3), z).tolist()
        [1.0, 1.0, 1.0, 1.0, 1.0]
    """
    if error not in ERRORS:
        raise ValueError(f"error must be one of {ERRORS}, got {error!r}")
    _check_tensor("pred", pred)
    _check_tensor("target", target)
    if pred.shape != target.shape:
        raise ValueError(f"pred and target must have the same shape, got {tuple(pred.shape)} and {tuple(target.shape)}")
    p, t = pred.reshape(len(pred), -1).double(), target.reshape(len(target), -1).double()
    if per_dimension:
        ref = t if reference is None else reference.reshape(len(reference), -1).double().to(t.device)
        if ref.shape[1] != t.shape[1]:
            raise ValueError(f"reference must have {t.shape[1]} features per row, got shape {tuple(reference.shape)}")
        rms = ref.square().mean(0).sqrt()
        scale = torch.where(rms > 0, rms, torch.ones_like(rms))
        p, t = p / scale, t / scale
    num, den = (p - t).norm(dim=1), t.norm(dim=1)
    zero = den == 0
    if bool(zero.any()):
        warnings.warn(
            f"mapping_error: {int(zero.sum())} target row(s) are all zeros; their errors are NaN",
            RuntimeWarning,
            stacklevel=2,
        )
    ratio = torch.where(zero, torch.full_like(num, math.nan), num / torch.where(zero, torch.ones_like(den), den))
    return ratio if error == "l2" else ratio.square()


# --------------------------------------------------------------------------- fitting


def fit_equivariance_map(
    z: Tensor,
    z_t: Tensor,
    kind: str = "linear",
    solver: str = "ridge",
    *,
    ridge: float = 1e-6,
    holdout: float | Tensor = 0.0,
    epochs: int = 500,
    lr: float = 3e-2,
    batch_size: int | None = None,
    weight_decay: float = 0.0,
    hidden: int | None = None,
    error: str = "l2",
    per_dimension: bool = True,
    generator: torch.Generator | None = None,
) -> EquivarianceMap:
    """Learn ``M`` with ``M(z_t) ≈ z`` from paired features (Tensmeyer & Martinez eq. 2, section 5.2).

    ``kind="linear"``: ``M(r) = r + W r + b``, an affine map written as a
    residual so that the ridge penalty on ``W`` shrinks it towards the
    identity (the bias is not penalised). ``solver="ridge"`` solves

        min_{W, b} sum_i ||z_i - M(z_t_i)||^2 + lambda ||W||_F^2

    in closed form (float64), with ``lambda = ridge * trace(C) / D`` for the
    centred Gram matrix ``C`` of ``z_t`` (so ``ridge`` does not depend on the
    features' scale; ``ridge=0`` gives the minimum-norm least-squares map).
    ``solver="sgd"`` minimises the same squared error (without the penalty)
    with full-batch (or mini-batch) Adam and a cosine-decayed learning rate,
    on inputs and corrections ``z - z_t`` standardised per dimension (which
    weights the dimensions equally), folded back into ``W, b`` at the end.

    ``kind="residual_relu"``: ``M(r) = r + W_2 relu(W_1 r + b_1) + b_2``,
    trained with ``solver="sgd"`` only.

    Args:
        z: clean features ``phi(x)``, the targets.
        z_t: features of the transformed inputs ``phi(g x)``, the map's inputs.
        kind: ``"linear"`` or ``"residual_relu"``.
        solver: ``"ridge"`` or ``"sgd"``.
        ridge: the relative ridge penalty (>= 0).
        holdout: fraction of rows in [0, 1) held out from the fit (drawn with
            ``generator``), or the held-out rows as a boolean mask or indices.
        epochs, lr, batch_size, weight_decay: Adam's settings (``solver="sgd"``);
            ``batch_size=None`` is full-batch; ``weight_decay`` is an L2 penalty on
            the weights (not the biases) in standardised coordinates.
        hidden: hidden width of ``"residual_relu"`` (default ``D``).
        error, per_dimension: the per-sample error reported (see :func:`mapping_error`).
        generator: draws the held-out rows, the initialisation and the mini-batches.

    Returns:
        an :class:`EquivarianceMap`, callable on (B, D) features.

    Shape:
        - z, z_t: (B, ...) of the same shape, flattened to (B, D) for the fit.

    Examples:
        >>> z = torch.randn(64, 5)
        >>> fitted = fit_equivariance_map(z, z.flip(1))  # phi(g x) reverses the coordinates
        >>> fitted.train_error < 1e-4, torch.allclose(fitted(z.flip(1)), z, atol=1e-4)
        (True, True)
    """
    _check_pair("z", z, "z_t", z_t)
    if z.shape != z_t.shape:
        raise ValueError(f"z and z_t must have the same shape, got {tuple(z.shape)} and {tuple(z_t.shape)}")
    return _fit(
        z_t,
        z,
        kind,
        solver,
        residual=True,
        ridge=ridge,
        holdout=holdout,
        epochs=epochs,
        lr=lr,
        batch_size=batch_size,
        weight_decay=weight_decay,
        hidden=hidden,
        error=error,
        per_dimension=per_dimension,
        generator=generator,
    )


def _fit(
    source: Tensor,
    target: Tensor,
    kind: str,
    solver: str,
    residual: bool,
    ridge: float,
    holdout: float | Tensor,
    epochs: int,
    lr: float,
    batch_size: int | None,
    weight_decay: float,
    hidden: int | None,
    error: str,
    per_dimension: bool,
    generator: torch.Generator | None,
) -> EquivarianceMap:
    """Fit ``target ≈ M(source)`` on flat rows; ``residual`` writes a linear map as ``r + W r + b``."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    if error not in ERRORS:
        raise ValueError(f"error must be one of {ERRORS}, got {error!r}")
    if kind == "residual_relu" and solver != "sgd":
        raise ValueError(f"kind='residual_relu' has no closed form; use solver='sgd', got solver={solver!r}")
    if not ridge >= 0:
        raise ValueError(f"ridge must be >= 0, got {ridge}")
    if solver == "sgd":
        if int(epochs) < 1:
            raise ValueError(f"epochs must be >= 1, got {epochs}")
        if not lr > 0:
            raise ValueError(f"lr must be > 0, got {lr}")
        if batch_size is not None and int(batch_size) < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if not weight_decay >= 0:
            raise ValueError(f"weight_decay must be >= 0, got {weight_decay}")
    x = source.detach().reshape(len(source), -1).double()
    y = target.detach().reshape(len(target), -1).double()
    if kind == "residual_relu" and x.shape[1] != y.shape[1]:
        raise ValueError(
            f"kind='residual_relu' maps features to features of the same size, got {x.shape[1]} and {y.shape[1]}"
        )
    train, test = _split(len(x), holdout, generator, x.device)
    xs, ys = x[train], y[train]
    losses: list[float] = []
    if solver == "ridge":
        module = _ridge(xs, ys, ridge, residual)
    else:
        module, losses = _adam(
            xs, ys, kind, residual, int(epochs), float(lr), batch_size, float(weight_decay), hidden, generator
        )
    with torch.no_grad():
        errs = mapping_error(module(x), y, error, per_dimension)
    nan = math.nan
    return EquivarianceMap(
        module=module,
        kind=kind,
        solver=solver,
        in_shape=tuple(source.shape[1:]),
        out_shape=tuple(target.shape[1:]),
        train_index=train,
        test_index=test,
        errors=errs,
        train_error=float(errs[train].nanmean()),
        test_error=float(errs[test].nanmean()) if len(test) else nan,
        losses=losses,
    )


def _split(n: int, holdout: float | Tensor, generator: torch.Generator | None, device) -> tuple[Tensor, Tensor]:
    """(train, test) row indices: a random fraction ``holdout`` held out, or the given rows."""
    if isinstance(holdout, Tensor):
        h = holdout.to(device)
        if h.dtype == torch.bool:
            if h.shape != (n,):
                raise ValueError(f"a boolean holdout mask must have shape ({n},), got {tuple(h.shape)}")
            mask = h
        else:
            if h.is_floating_point() or h.dim() != 1:
                raise ValueError(
                    f"holdout indices must be a 1-D integer tensor, got {h.dtype} of shape {tuple(h.shape)}"
                )
            if len(h) and (int(h.min()) < 0 or int(h.max()) >= n):
                raise ValueError(f"holdout indices must lie in [0, {n}), got {h.tolist()}")
            mask = torch.zeros(n, dtype=torch.bool, device=device)
            mask[h] = True
        test = mask.nonzero().flatten()
        train = (~mask).nonzero().flatten()
    else:
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


def _ridge(x: Tensor, y: Tensor, ridge: float, residual: bool) -> AffineMap:
    """Closed-form ridge regression of ``y`` (minus ``x`` when residual) on ``x``, unpenalised intercept."""
    n, d_in = x.shape
    t = y - x if residual else y
    mx, mt = x.mean(0), t.mean(0)
    xc, tc = x - mx, t - mt
    lam = ridge * float(xc.square().sum()) / d_in
    if lam > 0 and n >= d_in:  # primal: (Xc^T Xc + lam I)^-1 Xc^T Tc
        gram = xc.T @ xc + lam * torch.eye(d_in, dtype=x.dtype, device=x.device)
        w = torch.linalg.solve(gram, xc.T @ tc)
    elif lam > 0:  # dual: Xc^T (Xc Xc^T + lam I)^-1 Tc, cheaper when B < D
        gram = xc @ xc.T + lam * torch.eye(n, dtype=x.dtype, device=x.device)
        w = xc.T @ torch.linalg.solve(gram, tc)
    else:  # minimum-norm least squares (also covers features that are constant)
        w = torch.linalg.pinv(xc) @ tc
    module = AffineMap(d_in, t.shape[1], residual=residual, dtype=x.dtype, device=x.device)
    with torch.no_grad():
        module.weight.copy_(w.T)
        module.bias.copy_(mt - mx @ w)
    return module.requires_grad_(False)


def _adam(
    x: Tensor,
    y: Tensor,
    kind: str,
    residual: bool,
    epochs: int,
    lr: float,
    batch_size: int | None,
    weight_decay: float,
    hidden: int | None,
    generator: torch.Generator | None,
) -> tuple[nn.Module, list[float]]:
    """Fit the correction ``y - x`` (or ``y``) with Adam, inputs and targets standardised, then fold the scalings in."""
    n, d_in = x.shape
    t = y - x if residual or kind == "residual_relu" else y
    mu, sd = _standardiser(x)
    mt, st = _standardiser(t)
    xs, ts = (x - mu) / sd, (t - mt) / st
    if kind == "linear":
        delta = AffineMap(d_in, t.shape[1], dtype=x.dtype, device=x.device)
        decayed, free = [delta.weight], [delta.bias]
    else:
        delta = ResidualReLUMap(d_in, hidden, generator=generator, dtype=x.dtype, device=x.device)
        decayed, free = [delta.w1, delta.w2], [delta.b1, delta.b2]

    def correction(inp: Tensor) -> Tensor:
        # ResidualReLUMap adds its input; in standardised coordinates only the correction is wanted.
        return delta(inp) if kind == "linear" else delta(inp) - inp

    opt = torch.optim.Adam(
        [{"params": decayed, "weight_decay": weight_decay}, {"params": free, "weight_decay": 0.0}], lr=lr
    )
    step = n if batch_size is None else min(int(batch_size), n)
    total, k = epochs * math.ceil(n / step), 0
    losses = []
    with torch.enable_grad():
        for _ in range(epochs):
            order = torch.randperm(n, generator=generator) if step < n else torch.arange(n)
            order = order.to(x.device)
            running = 0.0
            for start in range(0, n, step):
                idx = order[start : start + step]
                for group in opt.param_groups:
                    group["lr"] = lr * 0.5 * (1.0 + math.cos(math.pi * k / total))
                loss = (correction(xs[idx]) - ts[idx]).square().mean()
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                running += float(loss.detach()) * len(idx)
                k += 1
            losses.append(running / n)
    with torch.no_grad():
        if kind == "linear":
            module = AffineMap(d_in, t.shape[1], residual=residual, dtype=x.dtype, device=x.device)
            module.weight.copy_(st[:, None] * delta.weight / sd)
            module.bias.copy_(st * (delta.bias - delta.weight @ (mu / sd)) + mt)
        else:
            module = ResidualReLUMap(d_in, delta.w1.shape[0], dtype=x.dtype, device=x.device)
            module.w1.copy_(delta.w1 / sd)
            module.b1.copy_(delta.b1 - delta.w1 @ (mu / sd))
            module.w2.copy_(st[:, None] * delta.w2)
            module.b2.copy_(st * delta.b2 + mt)
    return module.requires_grad_(False), losses


def _standardiser(a: Tensor) -> tuple[Tensor, Tensor]:
    """Per-column mean and standard deviation of ``a`` (1 where a column is constant)."""
    sd = a.std(0, unbiased=False)
    return a.mean(0), torch.where(sd > 0, sd, torch.ones_like(sd))


# --------------------------------------------------------------------------- checks


def _check_tensor(name: str, t) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"{name} must be a tensor, got {type(t).__name__}")
    if t.dim() < 2:
        raise ValueError(f"{name} must have a batch axis and feature axes, (B, ...), got shape {tuple(t.shape)}")
    if t.shape[0] == 0:
        raise ValueError(f"{name} is an empty batch, shape {tuple(t.shape)}")


def _check_pair(name1: str, a, name2: str, b) -> None:
    _check_tensor(name1, a)
    _check_tensor(name2, b)
