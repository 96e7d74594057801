"""Equivariance reports and representation distances (Tensmeyer & Martinez).

:func:`equivariance_report` compares the equivariance error ``L(phi(x), M(phi(g x)))``
of a learned map ``M`` (their eq. 2; :func:`augnet.probes.maps.fit_equivariance_map`)
with the invariance error, ``M = I``, as normalised L2 distances (see
:func:`augnet.probes.maps.mapping_error`) and, given the rest of the network,
as classification errors (their section 3.3). Because ``M`` is restricted to
a small family, the equivariance error is an upper bound of the true minimum.

Representation distance (eq. 4) fits maps both ways between two
representations of the same inputs, ``E_1: phi_1 -> phi_2`` and
``E_2: phi_2 -> phi_1``, and adds their errors; eq. 9 is the absolute
difference of the two one-way errors, large when one representation holds
information the other lacks (RGB pixels predict their grey levels, not the
reverse) (:func:`representation_distance`).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from augnet.probes._common import summary
from augnet.probes.maps import EquivarianceMap, _check_pair, _fit, _split, fit_equivariance_map, mapping_error

__all__ = [
    "equivariance_report",
    "representation_distance",
]


# --------------------------------------------------------------------------- reports


@torch.no_grad()
def equivariance_report(
    z: Tensor,
    z_t: Tensor,
    kind: str = "linear",
    solver: str = "ridge",
    *,
    head: Callable[[Tensor], Tensor] | None = None,
    y: Tensor | None = None,
    fitted: EquivarianceMap | None = None,
    holdout: float | Tensor = 0.0,
    error: str = "l2",
    per_dimension: bool = True,
    generator: torch.Generator | None = None,
    **fit_kwargs,
) -> dict:
    """Equivariance error (best map) against invariance error (``M = I``) (Tensmeyer & Martinez eq. 2).

    Fits ``M`` with :func:`fit_equivariance_map` (or uses ``fitted``) and
    evaluates, on the held-out rows when ``holdout`` holds some out and on
    every row otherwise (then the equivariance error is a training error):

    - the L2 errors ``L(z, M(z_t))`` and ``L(z, z_t)`` (see :func:`mapping_error`);
    - given ``head`` (the rest of the network, features -> logits) and labels
      ``y``, the classification errors ``1[argmax head(.) != y]`` of
      ``head(M(z_t))`` (equivariance), ``head(z_t)`` (invariance) and ``head(z)``
      (the clean reference). ``head`` sees features of ``z``'s shape, in
      ``z``'s dtype, and is run in its current mode.

    Args:
        z, z_t: clean and transformed features, (B, ...) of the same shape.
        kind, solver, holdout, generator, fit_kwargs: passed to :func:`fit_equivariance_map`.
        head, y: the classifier on top of the features and the (B,) labels; both or neither.
        fitted: a map fitted before (``kind``, ``solver`` and ``fit_kwargs`` are then ignored);
            with it, ``holdout`` given as rows selects the rows evaluated, otherwise every row is.
        error, per_dimension: as in :func:`mapping_error`.

    Returns:
        ``{"map", "index": (n,) rows evaluated, "equivariance": (n,), "invariance": (n,),
        "class_error": {"clean", "invariance", "equivariance"} of (n,) 0/1 tensors (with ``head``),
        "summary": {"equivariance", "invariance"} summary dicts,
        "scores": {"equivariance", "invariance", "gap" (invariance - equivariance), and with
        ``head`` "class_error_clean", "class_error_invariance", "class_error_equivariance"}}``;
        the scores are means over the evaluated rows, the values of eq. 2.

    Examples:
        >>> z = torch.randn(80, 6)
        >>> rep = equivariance_report(z, z.roll(1, dims=1), holdout=0.25, generator=torch.Generator().manual_seed(0))
        >>> rep["scores"]["equivariance"] < 1e-4 < 0.5 < rep["scores"]["invariance"]
        True
    """
    _check_pair("z", z, "z_t", z_t)
    if z.shape != z_t.shape:
        raise ValueError(f"z and z_t must have the same shape, got {tuple(z.shape)} and {tuple(z_t.shape)}")
    if (head is None) != (y is None):
        raise ValueError("pass both head and y for classification errors, or neither")
    if y is not None:
        if not isinstance(y, Tensor):
            raise TypeError(f"y must be a tensor of labels, got {type(y).__name__}")
        if y.shape != (len(z),):
            raise ValueError(f"y must have shape ({len(z)},), got {tuple(y.shape)}")
    if fitted is None:
        fitted = fit_equivariance_map(
            z,
            z_t,
            kind,
            solver,
            holdout=holdout,
            error=error,
            per_dimension=per_dimension,
            generator=generator,
            **fit_kwargs,
        )
        index = fitted.test_index if len(fitted.test_index) else torch.arange(len(z), device=z.device)
    else:
        if not isinstance(fitted, EquivarianceMap):
            raise TypeError(f"fitted must be an EquivarianceMap, got {type(fitted).__name__}")
        if fitted.in_shape != tuple(z.shape[1:]) or fitted.out_shape != tuple(z.shape[1:]):
            raise ValueError(
                f"fitted maps {fitted.in_shape} -> {fitted.out_shape}, but the features have shape {tuple(z.shape[1:])}"
            )
        if isinstance(holdout, Tensor):
            index = _split(len(z), holdout, None, z.device)[1]
        else:
            index = torch.arange(len(z), device=z.device)
    index = index.to(z.device)
    zc, zt = z[index], z_t[index]
    mapped = fitted(zt.double())
    eq = mapping_error(mapped, zc, error, per_dimension, reference=z)
    inv = mapping_error(zt, zc, error, per_dimension, reference=z)
    scores = {"equivariance": float(eq.nanmean()), "invariance": float(inv.nanmean())}
    scores["gap"] = scores["invariance"] - scores["equivariance"]
    out = {
        "map": fitted,
        "index": index,
        "equivariance": eq,
        "invariance": inv,
        "summary": {"equivariance": summary(eq), "invariance": summary(inv)},
        "scores": scores,
    }
    if head is not None:
        labels = y.to(z.device)[index]
        errs = {
            "clean": _class_error(head, zc, labels),
            "invariance": _class_error(head, zt, labels),
            "equivariance": _class_error(head, mapped.to(z.dtype), labels),
        }
        out["class_error"] = errs
        scores.update({f"class_error_{k}": float(v.mean()) for k, v in errs.items()})
    return out


def _class_error(head: Callable[[Tensor], Tensor], feats: Tensor, y: Tensor) -> Tensor:
    logits = head(feats)
    if not isinstance(logits, Tensor) or logits.dim() != 2 or len(logits) != len(feats):
        shape = tuple(logits.shape) if isinstance(logits, Tensor) else type(logits).__name__
        raise ValueError(f"head must return (B, classes) logits for B = {len(feats)}, got {shape}")
    return (logits.argmax(1) != y.to(logits.device)).double()


@torch.no_grad()
def representation_distance(
    z1: Tensor,
    z2: Tensor,
    kind: str = "linear",
    solver: str = "ridge",
    *,
    holdout: float | Tensor = 0.0,
    error: str = "l2",
    per_dimension: bool = True,
    generator: torch.Generator | None = None,
    **fit_kwargs,
) -> dict:
    """Two-way mapping error between two representations of the same inputs (Tensmeyer & Martinez eqs. 4, 9).

    Fits ``E_1: z1 -> z2`` and ``E_2: z2 -> z1`` (plain affine maps ``W r + b``
    for ``kind="linear"``, shrunk towards 0 by ridge; ``"residual_relu"`` needs
    representations of the same size) on the same rows, and reports each
    one-way error on the held-out rows (or on every row when ``holdout`` is 0).
    ``forward`` small means ``z2`` is (linearly) predictable from ``z1``,
    i.e. ``z2`` is a sub-representation of ``z1``.

    Args:
        z1, z2: (B, ...) features of the same B inputs; their sizes may differ.
        kind, solver, holdout, generator, fit_kwargs: as in :func:`fit_equivariance_map`.
        error, per_dimension: as in :func:`mapping_error`.

    Returns:
        ``{"maps": (E_1, E_2), "index": (n,) rows evaluated, "forward": (n,) errors of
        E_1(z1) against z2, "backward": (n,) errors of E_2(z2) against z1,
        "summary": {"forward", "backward"} summary dicts, "scores": {"forward", "backward",
        "distance" (their sum, eq. 4), "asymmetry" (forward - backward; eq. 9 is its absolute value)}}``.

    Examples:
        >>> g = torch.Generator().manual_seed(0)
        >>> z1 = torch.randn(50, 4, generator=g)
        >>> a = 2 * torch.eye(4) + 0.1 * torch.randn(4, 4, generator=g)  # well conditioned
        >>> d = representation_distance(z1, z1 @ a + 1.0)
        >>> d["scores"]["distance"] < 1e-4
        True
    """
    _check_pair("z1", z1, "z2", z2)
    if len(z1) != len(z2):
        raise ValueError(f"z1 and z2 must hold the same inputs (rows), got {len(z1)} and {len(z2)}")
    _, test = _split(len(z1), holdout, generator, z1.device)
    held = torch.zeros(len(z1), dtype=torch.bool, device=z1.device)
    held[test] = True
    common = dict(error=error, per_dimension=per_dimension, generator=generator, **fit_kwargs)
    fit_kw = {"ridge": 1e-6, "epochs": 500, "lr": 3e-2, "batch_size": None, "weight_decay": 0.0, "hidden": None}
    fit_kw.update(common)
    e1 = _fit(z1, z2, kind, solver, residual=False, holdout=held, **fit_kw)
    e2 = _fit(z2, z1, kind, solver, residual=False, holdout=held, **fit_kw)
    index = test if len(test) else torch.arange(len(z1), device=z1.device)
    fwd, bwd = e1.errors[index], e2.errors[index]
    scores = {"forward": float(fwd.nanmean()), "backward": float(bwd.nanmean())}
    scores["distance"] = scores["forward"] + scores["backward"]
    scores["asymmetry"] = scores["forward"] - scores["backward"]
    return {
        "maps": (e1, e2),
        "index": index,
        "forward": fwd,
        "backward": bwd,
        "summary": {"forward": summary(fwd), "backward": summary(bwd)},
        "scores": scores,
    }
