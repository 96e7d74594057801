"""Equivariance maps: learned maps ``M(phi(g x)) ≈ phi(x)``, their fitting and their errors (Tensmeyer & Martinez).

A representation ``phi`` is equivariant to a transformation ``g`` when some
map ``M_g`` undoes ``g`` in feature space, ``M_g(phi(g x)) ≈ phi(x)``
(Tensmeyer & Martinez eq. 1, after Lenc & Vedaldi); it is invariant when
``M_g`` is the identity. Their eq. 2 measures both with a loss ``L``,

    Equivariance(g; L) = min_M 1/N sum_i L(phi(x_i), M(phi(g x_i)))

and invariance is the same sum with ``M = I``. Here ``M`` is learned from
paired features (:func:`fit_equivariance_map`).

Map forms (``kind`` and ``output``):

- ``kind="linear"``: the residual affine map ``r + W r + b = (W + I) r + b``,
  biased towards the identity as in their section 5.2;
- ``kind="residual_relu"``: ``r + W_2 relu(W_1 r + b_1) + b_2``, their "neural
  network with a single hidden layer";
- ``output="relu"`` applies ``sigma(x) = max(x, 0)`` to the map's output, which
  with ``kind="linear"`` is the paper's eq. 8, ``M(r) = sigma((W + I) r + b)``,
  for post-ReLU (non-negative) features; ``output="identity"`` leaves it
  linear; ``output="auto"`` (the default) picks ``"relu"`` when every target
  value is >= 0 and ``"identity"`` otherwise. The fitted map says which form
  it is in :attr:`EquivarianceMap.form`.

Solvers (``solver``):

- ``"ridge"`` (default): closed-form ridge regression (float64) of the map's
  pre-activation; with ``output="relu"`` the ReLU is applied afterwards,
  which on non-negative targets never increases any error;
- ``"adam_cosine"``: Adam with a cosine-decayed learning rate (500 epochs,
  lr 3e-2, full batch), on standardised coordinates, through the ReLU;
- ``"sgd_paper"``: the paper's optimiser (section 5.2): fully online SGD
  (batch size 1), 10 epochs, static lr 1e-3, momentum 0.9, L2 weight decay
  1e-5, on the loss ``1/2 ||M(phi(g x)) - phi(x)||^2`` in the features' own
  units, through the ReLU.

Because ``M`` is restricted to a small family, the equivariance error is an
upper bound of the true minimum (the paper's "lower bound on the actual
equivariance").

Held-out errors: the paper learns the maps on one set of images and reports
the errors on another (section 5.5). By default (``holdout=0.3, seed=0``) a
seeded 30 % of the rows is held out of the fit and the errors are reported on
those rows (:attr:`EquivarianceMap.test_error`). An affine map has ``D + 1``
parameters per output: with fewer training rows than that it can fit any
targets exactly (unrelated features give an in-sample error of 0), so the fit
warns (rows held out) or refuses (no rows held out).

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
import sys
import warnings
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = [
    "DEFAULT_HOLDOUT",
    "ERRORS",
    "KINDS",
    "OUTPUTS",
    "SOLVERS",
    "SOLVER_DEFAULTS",
    "AffineMap",
    "EquivarianceMap",
    "ResidualReLUMap",
    "fit_equivariance_map",
    "map_form",
    "mapping_error",
]

KINDS = ("linear", "residual_relu")
SOLVERS = ("ridge", "adam_cosine", "sgd_paper")
OUTPUTS = ("auto", "relu", "identity")
ERRORS = ("l2", "sq")
#: The fraction of rows held out of a fit by default; the errors are reported on them.
DEFAULT_HOLDOUT = 0.3
#: Each iterative solver's settings when ``epochs``, ``lr``, ``batch_size``, ``weight_decay``, ``momentum``
#: are left as ``None`` (``batch_size=None`` in the table: full batch).
SOLVER_DEFAULTS = {
    "adam_cosine": {"epochs": 500, "lr": 3e-2, "batch_size": None, "weight_decay": 0.0, "momentum": None},
    "sgd_paper": {"epochs": 10, "lr": 1e-3, "batch_size": 1, "weight_decay": 1e-5, "momentum": 0.9},
}
_RENAMED = {
    "sgd": "solver='sgd' was Adam with a cosine schedule and is now named 'adam_cosine'; the paper's "
    "online SGD (10 epochs, lr 1e-3, momentum 0.9, weight decay 1e-5) is 'sgd_paper'"
}


# --------------------------------------------------------------------------- maps


class AffineMap(nn.Module):
    """``x W^T + b``, or ``x + x W^T + b`` when ``residual`` (then the identity at W = 0, b = 0).

    With ``output_relu`` the result goes through ``max(., 0)``: ``sigma((W + I) x + b)``
    for a residual map (Tensmeyer & Martinez eq. 8), ``sigma(W x + b)`` otherwise (their E, section 5.3).

    Shape:
        - Input: (B, d_in).
        - Output: (B, d_out).
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        residual: bool = False,
        dtype: torch.dtype | None = None,
        device=None,
        output_relu: bool = False,
    ) -> None:
        super().__init__()
        if residual and d_in != d_out:
            raise ValueError(f"a residual map needs d_in == d_out, got {d_in} and {d_out}")
        self.residual = bool(residual)
        self.output_relu = bool(output_relu)
        self.weight = nn.Parameter(torch.zeros(d_out, d_in, dtype=dtype, device=device))
        self.bias = nn.Parameter(torch.zeros(d_out, dtype=dtype, device=device))

    def forward(self, x: Tensor) -> Tensor:
        out = F.linear(x, self.weight, self.bias)
        out = x + out if self.residual else out
        return F.relu(out) if self.output_relu else out

    def extra_repr(self) -> str:
        d_out, d_in = self.weight.shape
        return f"d_in={d_in}, d_out={d_out}, residual={self.residual}, output_relu={self.output_relu}"


class ResidualReLUMap(nn.Module):
    """``x + W_2 relu(W_1 x + b_1) + b_2``: the identity at initialisation (``W_2 = 0``, ``b_2 = 0``).

    ``W_1`` is drawn from ``N(0, 1 / dim)`` with ``generator``. With ``output_relu``
    the result goes through ``max(., 0)`` (the paper's ``sigma(r + R(r))``, section 5.2).

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
        output_relu: bool = False,
    ) -> None:
        super().__init__()
        hidden = dim if hidden is None else int(hidden)
        if hidden < 1:
            raise ValueError(f"hidden must be >= 1, got {hidden}")
        dtype = torch.get_default_dtype() if dtype is None else dtype
        w1 = torch.randn(hidden, dim, generator=generator, dtype=dtype) / math.sqrt(dim)
        self.output_relu = bool(output_relu)
        self.w1 = nn.Parameter(w1.to(device))
        self.b1 = nn.Parameter(torch.zeros(hidden, dtype=dtype, device=device))
        self.w2 = nn.Parameter(torch.zeros(dim, hidden, dtype=dtype, device=device))
        self.b2 = nn.Parameter(torch.zeros(dim, dtype=dtype, device=device))

    def forward(self, x: Tensor) -> Tensor:
        out = x + F.linear(F.relu(F.linear(x, self.w1, self.b1)), self.w2, self.b2)
        return F.relu(out) if self.output_relu else out

    def extra_repr(self) -> str:
        return f"dim={self.w1.shape[1]}, hidden={self.w1.shape[0]}, output_relu={self.output_relu}"


def map_form(kind: str, output: str, residual: bool = True) -> str:
    """The formula of a map, e.g. ``"sigma((W + I) r + b)"`` (eq. 8) for ``("linear", "relu")``.

    Examples:
        >>> map_form("linear", "relu"), map_form("linear", "identity", residual=False)
        ('sigma((W + I) r + b)', 'W r + b')
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if output not in ("relu", "identity"):
        raise ValueError(f"output must be 'relu' or 'identity' here, got {output!r}")
    inner = "r + W_2 relu(W_1 r + b_1) + b_2"
    if kind == "linear":
        inner = "(W + I) r + b" if residual else "W r + b"
    return f"sigma({inner})" if output == "relu" else inner


@dataclass
class EquivarianceMap:
    """A fitted map and its errors; call it on features to map them.

    Attributes:
        module: the map on flat rows, (B, d_in) -> (B, d_out), float64.
        kind, solver: how it was fitted (see :data:`KINDS`, :data:`SOLVERS`).
        in_shape, out_shape: the per-sample shapes of the source and target features.
        train_index, test_index: the rows it was fitted on and the held-out rows.
        errors: (B,) per-sample error of every row (see :func:`mapping_error`).
        train_error, test_error: mean of ``errors`` over the fitted and the
            held-out rows (``test_error`` is NaN when no row was held out).
            ``test_error`` is the figure to report; ``train_error`` is biased low.
        losses: per epoch, the training loss of the iterative solvers (empty for ridge):
            ``"adam_cosine"``: the mean squared error of the targets standardised per
            dimension (1 is the error of predicting their mean); ``"sgd_paper"``: the mean
            of ``1/2 ||M(r_t) - r||^2`` over the rows, in the features' units.
        output: ``"relu"`` or ``"identity"``, the output non-linearity used (``"auto"`` resolved).
        form: the map's formula, e.g. ``"sigma((W + I) r + b)"`` (eq. 8).
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
    output: str = "identity"
    form: str = ""

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
    output: str = "auto",
    ridge: float = 1e-6,
    holdout: float | Tensor = DEFAULT_HOLDOUT,
    seed: int | None = 0,
    epochs: int | None = None,
    lr: float | None = None,
    batch_size: int | None = None,
    weight_decay: float | None = None,
    momentum: float | None = None,
    hidden: int | None = None,
    error: str = "l2",
    per_dimension: bool = True,
    generator: torch.Generator | None = None,
) -> EquivarianceMap:
    """Learn ``M`` with ``M(z_t) ≈ z`` from paired features (Tensmeyer & Martinez eqs. 2 and 8, section 5.2).

    ``kind="linear"``: ``M(r) = sigma((W + I) r + b)`` (eq. 8) with ``output="relu"``,
    ``(W + I) r + b`` with ``output="identity"``; ``output="auto"`` uses the
    former when every value of ``z`` is >= 0 (post-ReLU features, as the
    paper's fc7) and the latter otherwise. The fitted map's ``form`` and
    ``output`` say which was used. ``kind="residual_relu"``:
    ``M(r) = r + W_2 relu(W_1 r + b_1) + b_2``, with the same optional ``sigma``.

    ``solver="ridge"`` solves

        min_{W, b} sum_i ||z_i - ((W + I) z_t_i + b)||^2 + lambda ||W||_F^2

    in closed form (float64), with ``lambda = ridge * trace(C) / D`` for the
    centred Gram matrix ``C`` of ``z_t`` (so ``ridge`` does not depend on the
    features' scale; ``ridge=0`` gives the minimum-norm least-squares map); the
    penalty shrinks ``M`` towards the identity (the bias is not penalised).
    With ``output="relu"`` the ReLU is applied to that solution (on
    non-negative targets this can only lower each error). ``solver="adam_cosine"``
    minimises the squared error (through the ReLU, without the ridge penalty)
    with Adam and a cosine-decayed learning rate, on inputs and corrections
    ``z - z_t`` standardised per dimension (which weights the dimensions
    equally), folded back into ``W, b`` at the end. ``solver="sgd_paper"`` is
    the paper's: online SGD with momentum on ``1/2 ||M(z_t_i) - z_i||^2`` in the
    features' own units (it diverges, with a ValueError, when ``lr`` is too large
    for the features' scale).

    The fit uses the rows not held out; the errors of every row are kept and
    ``test_error`` (the held-out mean) is the one to report.

    Args:
        z: clean features ``phi(x)``, the targets.
        z_t: features of the transformed inputs ``phi(g x)``, the map's inputs.
        kind: ``"linear"`` or ``"residual_relu"`` (:data:`KINDS`).
        solver: ``"ridge"``, ``"adam_cosine"`` or ``"sgd_paper"`` (:data:`SOLVERS`).
        output: ``"auto"``, ``"relu"`` or ``"identity"`` (:data:`OUTPUTS`).
        ridge: the relative ridge penalty (>= 0; ``solver="ridge"``).
        holdout: fraction of rows in [0, 1) held out from the fit (default 0.3,
            drawn with ``generator``), or the held-out rows as a boolean mask or
            indices. ``holdout=0`` fits and evaluates on every row (training errors,
            biased low); it is refused when there are fewer than D + 1 rows.
        seed: seeds the split, the initialisation and the mini-batch order when
            ``generator`` is None (``None``: unseeded); the default split is reproducible.
        epochs, lr, batch_size, weight_decay, momentum: the iterative solvers'
            settings; ``None`` takes :data:`SOLVER_DEFAULTS` (``"adam_cosine"``: 500
            epochs, lr 3e-2, full batch, no decay; ``"sgd_paper"``: 10 epochs, lr
            1e-3, batch size 1, weight decay 1e-5, momentum 0.9). ``weight_decay`` is an
            L2 penalty on the weights (``"adam_cosine"``, standardised coordinates) or on
            every parameter (``"sgd_paper"``, as Caffe's solver); ``momentum`` is
            ``"sgd_paper"``'s only.
        hidden: hidden width of ``"residual_relu"`` (default ``D``).
        error, per_dimension: the per-sample error reported (see :func:`mapping_error`).
        generator: draws the held-out rows, the initialisation and the mini-batches
            (takes precedence over ``seed``).

    Returns:
        an :class:`EquivarianceMap`, callable on (B, D) features.

    Raises:
        ValueError: bad settings, or ``holdout=0`` with fewer than D + 1 rows.

    Warns:
        RuntimeWarning: fewer than D + 1 training rows (the map can fit any
        training targets; pass more rows or fewer features).

    Shape:
        - z, z_t: (B, ...) of the same shape, flattened to (B, D) for the fit.

    Examples:
        >>> z = torch.randn(64, 5)
        >>> fitted = fit_equivariance_map(z, z.flip(1))  # phi(g x) reverses the coordinates
        >>> fitted.test_error < 1e-4, len(fitted.test_index), fitted.form
        (True, 19, '(W + I) r + b')
        >>> fit_equivariance_map(z.abs(), z.abs().flip(1)).form  # non-negative features: eq. 8
        'sigma((W + I) r + b)'
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
        output=output,
        ridge=ridge,
        holdout=holdout,
        epochs=epochs,
        lr=lr,
        batch_size=batch_size,
        weight_decay=weight_decay,
        momentum=momentum,
        hidden=hidden,
        error=error,
        per_dimension=per_dimension,
        generator=_seeded_generator(seed, generator),
    )


def _seeded_generator(seed: int | None, generator: torch.Generator | None = None) -> torch.Generator | None:
    """``generator`` if given, else a CPU generator seeded with ``seed`` (``None`` for neither)."""
    if generator is not None:
        if not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
        return generator
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int or None, got {type(seed).__name__}")
    return torch.Generator().manual_seed(seed)


def _solver_settings(
    solver: str,
    epochs: int | None = None,
    lr: float | None = None,
    batch_size: int | None = None,
    weight_decay: float | None = None,
    momentum: float | None = None,
) -> dict:
    """The iterative solver's settings, ``None`` replaced by :data:`SOLVER_DEFAULTS`, checked."""
    if solver in _RENAMED:
        raise ValueError(_RENAMED[solver])
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    if solver == "ridge":
        return {}
    given = {"epochs": epochs, "lr": lr, "batch_size": batch_size, "weight_decay": weight_decay}
    if momentum is not None and solver != "sgd_paper":
        raise ValueError(f"momentum applies to solver='sgd_paper' only, got momentum={momentum} with {solver!r}")
    given["momentum"] = momentum
    s = {k: (SOLVER_DEFAULTS[solver][k] if v is None else v) for k, v in given.items()}
    if int(s["epochs"]) < 1:
        raise ValueError(f"epochs must be >= 1, got {s['epochs']}")
    if not s["lr"] > 0:
        raise ValueError(f"lr must be > 0, got {s['lr']}")
    if s["batch_size"] is not None and int(s["batch_size"]) < 1:
        raise ValueError(f"batch_size must be >= 1, got {s['batch_size']}")
    if not s["weight_decay"] >= 0:
        raise ValueError(f"weight_decay must be >= 0, got {s['weight_decay']}")
    if s["momentum"] is not None and not 0 <= s["momentum"] < 1:
        raise ValueError(f"momentum must be in [0, 1), got {s['momentum']}")
    return s


def _fit(
    source: Tensor,
    target: Tensor,
    kind: str,
    solver: str,
    residual: bool,
    output: str,
    ridge: float,
    holdout: float | Tensor,
    epochs: int | None,
    lr: float | None,
    batch_size: int | None,
    weight_decay: float | None,
    momentum: float | None,
    hidden: int | None,
    error: str,
    per_dimension: bool,
    generator: torch.Generator | None,
) -> EquivarianceMap:
    """Fit ``target ≈ M(source)`` on flat rows; ``residual`` writes a linear map as ``(W + I) r + b``."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    settings = _solver_settings(solver, epochs, lr, batch_size, weight_decay, momentum)
    if output not in OUTPUTS:
        raise ValueError(f"output must be one of {OUTPUTS}, got {output!r}")
    if error not in ERRORS:
        raise ValueError(f"error must be one of {ERRORS}, got {error!r}")
    if kind == "residual_relu" and solver == "ridge":
        raise ValueError(
            "kind='residual_relu' has no closed form; use solver='adam_cosine' or 'sgd_paper', got solver='ridge'"
        )
    if not ridge >= 0:
        raise ValueError(f"ridge must be >= 0, got {ridge}")
    x = source.detach().reshape(len(source), -1).double()
    y = target.detach().reshape(len(target), -1).double()
    if kind == "residual_relu" and x.shape[1] != y.shape[1]:
        raise ValueError(
            f"kind='residual_relu' maps features to features of the same size, got {x.shape[1]} and {y.shape[1]}"
        )
    if output == "auto":
        output = "relu" if bool((y >= 0).all()) else "identity"
    relu = output == "relu"
    train, test = _split(len(x), holdout, generator, x.device)
    _check_rows(len(train), len(test), x.shape[1])
    xs, ys = x[train], y[train]
    losses: list[float] = []
    if solver == "ridge":
        module = _ridge(xs, ys, ridge, residual)
        module.output_relu = relu
    elif solver == "adam_cosine":
        module, losses = _adam(xs, ys, kind, residual, relu, hidden, generator, **settings)
    else:
        module, losses = _sgd_paper(xs, ys, kind, residual, relu, hidden, generator, **settings)
    with torch.no_grad():
        errs = mapping_error(module(x), y, error, per_dimension)
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
        test_error=float(errs[test].nanmean()) if len(test) else math.nan,
        losses=losses,
        output=output,
        form=map_form(kind, output, residual),
    )


def _caller_stacklevel() -> int:
    """The ``stacklevel`` of the first frame outside augnet's probes and torch (the user's call)."""
    frame, level = sys._getframe(1), 1
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if not (name.startswith(("augnet.probes", "torch.")) or name in ("augnet.losses", "contextlib")):
            return level
        frame, level = frame.f_back, level + 1
    return 1


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
        stacklevel=_caller_stacklevel(),
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
        if isinstance(holdout, bool) or not isinstance(holdout, (int, float)):
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
    relu: bool,
    hidden: int | None,
    generator: torch.Generator | None,
    epochs: int,
    lr: float,
    batch_size: int | None,
    weight_decay: float,
    momentum: None = None,
) -> tuple[nn.Module, list[float]]:
    """Adam with a cosine-decayed lr on standardised coordinates (``solver="adam_cosine"``).

    The correction ``y - x`` (or ``y``) is fitted with inputs and targets standardised per
    dimension, through the output ReLU when ``relu``; the scalings are folded into the map.
    """
    n, d_in = x.shape
    keeps_input = residual or kind == "residual_relu"
    t = y - x if keeps_input else y
    mu, sd = _standardiser(x)
    mt, st = _standardiser(t)
    xs = (x - mu) / sd
    if kind == "linear":
        delta = AffineMap(d_in, t.shape[1], dtype=x.dtype, device=x.device)
        decayed, free = [delta.weight], [delta.bias]
    else:
        delta = ResidualReLUMap(d_in, hidden, generator=generator, dtype=x.dtype, device=x.device)
        decayed, free = [delta.w1, delta.w2], [delta.b1, delta.b2]

    def predict(idx: Tensor) -> Tensor:
        # ResidualReLUMap adds its input; in standardised coordinates only the correction is wanted.
        corr = delta(xs[idx]) if kind == "linear" else delta(xs[idx]) - xs[idx]
        pre = st * corr + mt + (x[idx] if keeps_input else 0.0)
        return F.relu(pre) if relu else pre

    opt = torch.optim.Adam(
        [{"params": decayed, "weight_decay": float(weight_decay)}, {"params": free, "weight_decay": 0.0}], lr=lr
    )
    step = n if batch_size is None else min(int(batch_size), n)
    total, k = int(epochs) * math.ceil(n / step), 0
    losses = []
    with torch.enable_grad():
        for _ in range(int(epochs)):
            order = torch.randperm(n, generator=generator) if step < n else torch.arange(n)
            order = order.to(x.device)
            running = 0.0
            for start in range(0, n, step):
                idx = order[start : start + step]
                for group in opt.param_groups:
                    group["lr"] = lr * 0.5 * (1.0 + math.cos(math.pi * k / total))
                loss = ((predict(idx) - y[idx]) / st).square().mean()
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
    module.output_relu = relu
    return module.requires_grad_(False), losses


def _sgd_paper(
    x: Tensor,
    y: Tensor,
    kind: str,
    residual: bool,
    relu: bool,
    hidden: int | None,
    generator: torch.Generator | None,
    epochs: int,
    lr: float,
    batch_size: int | None,
    weight_decay: float,
    momentum: float,
) -> tuple[nn.Module, list[float]]:
    """Tensmeyer & Martinez's optimiser (section 5.2): online SGD with momentum and weight decay.

    Minimises ``1/2 ||M(x_i) - y_i||^2`` (Caffe's Euclidean loss; mean over a mini-batch) in the
    features' own units, one row at a time by default, with a static learning rate. The map starts
    at the identity (``W = 0, b = 0``); a non-residual linear map starts at ``W = 0`` and ``b`` the
    mean target, so that a ReLU output does not start with zero gradient.
    """
    n, d_in = x.shape
    if kind == "linear":
        module = AffineMap(d_in, y.shape[1], residual=residual, dtype=x.dtype, device=x.device, output_relu=relu)
        if not residual:
            with torch.no_grad():
                module.bias.copy_(y.mean(0))
    else:
        module = ResidualReLUMap(d_in, hidden, generator=generator, dtype=x.dtype, device=x.device, output_relu=relu)
    opt = torch.optim.SGD(module.parameters(), lr=lr, momentum=float(momentum), weight_decay=float(weight_decay))
    step = n if batch_size is None else min(int(batch_size), n)
    losses = []
    with torch.enable_grad():
        for epoch in range(int(epochs)):
            order = torch.randperm(n, generator=generator).to(x.device)
            running = 0.0
            for start in range(0, n, step):
                idx = order[start : start + step]
                loss = 0.5 * (module(x[idx]) - y[idx]).square().sum(1).mean()
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                running += float(loss.detach()) * len(idx)
            if not math.isfinite(running) or not all(bool(p.isfinite().all()) for p in module.parameters()):
                raise ValueError(
                    f"solver='sgd_paper' diverged in epoch {epoch + 1} (lr={lr} is too large for features of "
                    f"squared norm up to {float(x.square().sum(1).max()):.3g}); scale the features down, lower lr, "
                    "or use solver='ridge' or 'adam_cosine'"
                )
            losses.append(running / n)
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
