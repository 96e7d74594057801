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
dimension is brought to a similar magnitude (the paper "normalize[s] each
dimension of r to have similar magnitude"): divided by
``sqrt(r_d^2 + m^2)``, with ``r_d`` its root mean square over the rows of
``r`` and ``m`` that of the layer's typical unit, so that neither a few loud
units nor nearly silent ones decide the error and the error is continuous in
the features (see :func:`~augnet.probes.map_evaluation.mapping_error`).
``error="sq"`` gives the squared ratio ``||r - r'||^2 / ||r||^2`` instead, and
``per_dimension=False`` skips the scaling.

Where the code lives: the fitted map and the fit are here; the map modules and
the solvers in :mod:`augnet.probes.map_solvers`; the errors, the held-out split
and the input checks in :mod:`augnet.probes.map_evaluation`. Every name of
``__all__`` can be imported from here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from augnet._checks import check_bool, real
from augnet.probes.map_evaluation import (
    DEFAULT_HOLDOUT,
    ERRORS,
    _check_pair,
    _check_rows,
    _seeded_generator,
    _split,
    mapping_error,
)
from augnet.probes.map_evaluation import _check_tensor as _check_tensor  # re-exported: augnet.losses imports it
from augnet.probes.map_solvers import (
    KINDS,
    SOLVER_DEFAULTS,
    SOLVERS,
    AffineMap,
    ResidualReLUMap,
    _adam,
    _ridge,
    _sgd_paper,
    _solver_settings,
    map_form,
)

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

OUTPUTS = ("auto", "relu", "identity")


# --------------------------------------------------------------------------- the fitted map


@dataclass
class EquivarianceMap:
    """A fitted map and its errors; call it on features to map them.

    Attributes:
        module: the map on flat rows, (B, d_in) -> (B, d_out), float64.
        kind, solver: how it was fitted (see ``KINDS``, ``SOLVERS``).
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
        """Map (B, *in_shape) features (or (B, D) flat ones; B = 0 too) to (B, *out_shape), in ``z``'s dtype
        (float64 for integers)."""
        if not isinstance(z, Tensor):
            raise TypeError(f"z must be a tensor, got {type(z).__name__}")
        if tuple(z.shape[1:]) != self.in_shape and (z.dim() != 2 or z.shape[1] != math.prod(self.in_shape)):
            raise ValueError(f"expected features of shape (B, *{self.in_shape}), got {tuple(z.shape)}")
        p = next(self.module.parameters())
        rows = z.reshape(len(z), math.prod(self.in_shape))  # (not -1: an empty batch has no size to infer)
        out = self.module(rows.to(device=p.device, dtype=p.dtype))
        dtype = z.dtype if z.is_floating_point() else torch.float64
        return out.reshape(len(z), *self.out_shape).to(device=z.device, dtype=dtype)


# --------------------------------------------------------------------------- fitting


#: The relative ridge penalty of ``solver="ridge"`` when none is given.
DEFAULT_RIDGE = 1e-6
_ITERATIVE = ("epochs", "lr", "batch_size", "weight_decay", "momentum")


def _check_fit_settings(kind: str, solver: str, **options) -> dict:
    """``kind``, ``solver`` and the fit's ``options`` (:func:`fit_equivariance_map`'s keywords) checked; the
    iterative solver's settings returned (see ``_solver_settings``).

    An option the solver or map would ignore is refused: the iterative solvers' settings (``epochs``, ``lr``,
    ``batch_size``, ``weight_decay``, ``momentum``) with ``solver="ridge"``, ``ridge`` other than its default
    with an iterative solver, ``hidden`` with a linear map. Options left at their defaults (``None``) pass.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    settings = _solver_settings(solver, *(options.get(k) for k in _ITERATIVE))
    if solver == "ridge":
        given = [k for k in _ITERATIVE if options.get(k) is not None]
        if given:
            shown = ", ".join(f"{k}={options[k]!r}" for k in given)
            raise ValueError(
                f"{shown}: these settings apply only to the iterative solvers 'adam_cosine' and 'sgd_paper'; "
                "solver='ridge' is solved in closed form (its one setting is ridge=)"
            )
    elif options.get("ridge", DEFAULT_RIDGE) != DEFAULT_RIDGE:
        raise ValueError(
            f"ridge={options['ridge']!r} applies only to solver='ridge'; solver={solver!r} minimises the squared "
            "error without it (weight_decay= is its penalty)"
        )
    if options.get("hidden") is not None and kind != "residual_relu":
        raise ValueError(f"hidden={options['hidden']!r} applies only to kind='residual_relu', got kind={kind!r}")
    return settings


def fit_equivariance_map(
    z: Tensor,
    z_t: Tensor,
    kind: str = "linear",
    solver: str = "ridge",
    *,
    output: str = "auto",
    ridge: float = DEFAULT_RIDGE,
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
        kind: ``"linear"`` or ``"residual_relu"`` (``KINDS``).
        solver: ``"ridge"``, ``"adam_cosine"`` or ``"sgd_paper"`` (``SOLVERS``).
        output: ``"auto"``, ``"relu"`` or ``"identity"`` (``OUTPUTS``).
        ridge: the relative ridge penalty (a finite number >= 0; ``solver="ridge"`` only: another value with
            an iterative solver is refused).
        holdout: fraction of rows in [0, 1) held out from the fit (default 0.3,
            drawn with ``generator``), or the held-out rows as a boolean mask or
            indices. ``holdout=0`` fits and evaluates on every row (training errors,
            biased low); it is refused when there are fewer than D + 1 rows.
        seed: seeds the split, the initialisation and the mini-batch order when
            ``generator`` is None (``None``: unseeded); the default split is reproducible.
        epochs, lr, batch_size, weight_decay, momentum: the iterative solvers'
            settings; ``None`` takes ``SOLVER_DEFAULTS`` (``"adam_cosine"``: 500
            epochs, lr 3e-2, full batch, no decay; ``"sgd_paper"``: 10 epochs, lr
            1e-3, batch size 1, weight decay 1e-5, momentum 0.9). ``weight_decay`` is an
            L2 penalty on the weights (``"adam_cosine"``, standardised coordinates) or on
            every parameter (``"sgd_paper"``, as Caffe's solver); ``momentum`` is
            ``"sgd_paper"``'s only. They are refused with ``solver="ridge"``, which would ignore them.
        hidden: hidden width of ``"residual_relu"`` (default ``D``; refused with a linear map).
        error, per_dimension: the per-sample error reported (see :func:`mapping_error`).
        generator: draws the held-out rows, the initialisation and the mini-batches
            (takes precedence over ``seed``).

    Returns:
        an :class:`EquivarianceMap`, callable on (B, D) features.

    Raises:
        ValueError: bad settings (an option the solver or map would ignore among them: ``epochs=``
            with ``solver="ridge"``, ``hidden=`` with ``kind="linear"``), or ``holdout=0`` with fewer
            than D + 1 rows.

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
    settings = _check_fit_settings(
        kind, solver, ridge=ridge, epochs=epochs, lr=lr, batch_size=batch_size, weight_decay=weight_decay,
        momentum=momentum, hidden=hidden,
    )  # fmt: skip
    if output not in OUTPUTS:
        raise ValueError(f"output must be one of {OUTPUTS}, got {output!r}")
    if error not in ERRORS:
        raise ValueError(f"error must be one of {ERRORS}, got {error!r}")
    check_bool("per_dimension", per_dimension)  # "no" was a truthy flag: the scaling it would skip was applied
    if kind == "residual_relu" and solver == "ridge":
        raise ValueError(
            "kind='residual_relu' has no closed form; use solver='adam_cosine' or 'sgd_paper', got solver='ridge'"
        )
    # A string failed in the comparison (a TypeError naming nothing); inf gave a map of NaN (test_error NaN).
    ridge = real("ridge", ridge, "a finite number >= 0")
    if not 0 <= ridge < math.inf:
        raise ValueError(f"ridge must be a finite number >= 0, got {ridge}")
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
