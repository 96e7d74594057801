"""Equivariance reports, curves against the magnitude, and representation distances (Tensmeyer & Martinez).

:func:`equivariance_report` compares the equivariance error ``L(phi(x), M(phi(g x)))``
of a learned map ``M`` (their eq. 2; :func:`augnet.probes.maps.fit_equivariance_map`)
with the invariance error, ``M = I``, as normalised L2 distances (see
:func:`augnet.probes.maps.mapping_error`) and, given the rest of the network,
as classification errors (their section 3.3). Because ``M`` is restricted to
a small family, the equivariance error is an upper bound of the true minimum.

As in the paper (section 5.5), the map is learned on some rows and the errors
are reported on others: by default a seeded 30 % of the rows is held out
(``holdout=0.3, seed=0``). The map's form follows eq. 8, ``sigma((W + I) r + b)``,
when the clean features are non-negative (post-ReLU) and ``(W + I) r + b``
otherwise (``output="auto"``); the reports say which form was used and which
rows were evaluated.

:func:`equivariance_curve` repeats the report for each magnitude of a
transformation (their Fig. 1: one map per magnitude, equivariance against
invariance), and :func:`plot_equivariance_curves` draws it.

Representation distance (eq. 4) fits maps both ways between two
representations of the same inputs, ``E_1: phi_1 -> phi_2`` and
``E_2: phi_2 -> phi_1`` (``sigma(W r + b)`` onto non-negative features, section
5.3, ``W r + b`` otherwise), and adds their held-out errors; eq. 9 is the
absolute difference of the two one-way errors, large when one representation
holds information the other lacks (RGB pixels predict their grey levels, not
the reverse) (:func:`representation_distance`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from torch import Tensor, nn

from augnet._checks import check_bool
from augnet.probes._common import (
    Transformed,
    check_classes,
    check_draws,
    check_labels,
    check_model_input,
    check_seed,
    check_transform,
    evaluating,
    forward_kwargs,
    seeded,
    summary,
)
from augnet.probes._shared_draws import shared_params
from augnet.probes.features import LOGITS, _features, check_layer, check_rows
from augnet.probes.map_evaluation import _given_rows
from augnet.probes.maps import (
    DEFAULT_HOLDOUT,
    DEFAULT_RIDGE,
    ERRORS,
    OUTPUTS,
    EquivarianceMap,
    _check_fit_settings,
    _check_pair,
    _fit,
    _seeded_generator,
    _split,
    fit_equivariance_map,
    mapping_error,
)

__all__ = [
    "equivariance_curve",
    "equivariance_report",
    "plot_equivariance_curves",
    "representation_distance",
]

_FIT_KEYWORDS = ("ridge", "epochs", "lr", "batch_size", "weight_decay", "momentum", "hidden")


# --------------------------------------------------------------------------- reports


@torch.no_grad()
def equivariance_report(
    z: Tensor,
    z_t: Tensor,
    kind: str = "linear",
    solver: str = "ridge",
    *,
    output: str = "auto",
    head: Callable[[Tensor], Tensor] | None = None,
    y: Tensor | None = None,
    fitted: EquivarianceMap | None = None,
    holdout: float | Tensor = DEFAULT_HOLDOUT,
    seed: int | None = 0,
    error: str = "l2",
    per_dimension: bool = True,
    generator: torch.Generator | None = None,
    **fit_kwargs,
) -> dict:
    """Equivariance error (best map) against invariance error (``M = I``) (Tensmeyer & Martinez eq. 2).

    Fits ``M`` with :func:`fit_equivariance_map` on the rows not held out (or
    uses ``fitted``) and evaluates, on the held-out rows (``holdout=0``: on every
    row, then the equivariance error is a training error, biased low):

    - the L2 errors ``L(z, M(z_t))`` and ``L(z, z_t)`` (see :func:`mapping_error`);
    - given ``head`` (the rest of the network, features -> logits) and labels
      ``y``, the classification errors ``1[argmax head(.) != y]`` of
      ``head(M(z_t))`` (equivariance), ``head(z_t)`` (invariance) and ``head(z)``
      (the clean reference). ``head`` sees features of ``z``'s shape, in
      ``z``'s dtype, and is run in evaluation mode (a module's modes are restored afterwards).

    Args:
        z, z_t: clean and transformed features, (B, ...) of the same shape.
        kind, solver, output, holdout, seed, generator, fit_kwargs: passed to
            :func:`fit_equivariance_map` (defaults: the linear map, ridge, eq. 8's form on
            non-negative ``z``, 30 % of the rows held out with seed 0).
        head, y: the classifier on top of the features and the class labels ((B,) or (B, 1), any
            integer dtype, a NumPy array or a list; whole floats too), in ``[0, classes)`` of the
            head's logits (others are refused: they would count every prediction as an error); both
            or neither.
        fitted: a map fitted before, on other rows (``kind``, ``solver``, ``output`` and
            ``fit_kwargs`` are then ignored); with it, ``holdout`` given as rows selects the
            rows evaluated, otherwise every row is.
        error, per_dimension: as in :func:`mapping_error`.

    Returns:
        ``{"map", "form" (the map's formula), "output" ("relu" or "identity"),
        "evaluated_on" ("held_out", "training" when nothing was held out, or "given" with
        ``fitted``), "index": (n,) rows evaluated, "equivariance": (n,), "invariance": (n,),
        "class_error": {"clean", "invariance", "equivariance"} of (n,) 0/1 tensors (with ``head``),
        "summary": {"equivariance", "invariance"} summary dicts,
        "scores": {"equivariance", "invariance", "gap" (invariance - equivariance), and with
        ``head`` "class_error_clean", "class_error_invariance", "class_error_equivariance"}}``;
        the scores are means over the evaluated rows, the values of eq. 2.

    Examples:
        >>> z = torch.randn(80, 6)
        >>> rep = equivariance_report(z, z.roll(1, dims=1))
        >>> rep["scores"]["equivariance"] < 1e-4 < 0.5 < rep["scores"]["invariance"]
        True
        >>> rep["evaluated_on"], len(rep["index"]), rep["form"]
        ('held_out', 24, '(W + I) r + b')
    """
    _check_pair("z", z, "z_t", z_t)
    if z.shape != z_t.shape:
        raise ValueError(f"z and z_t must have the same shape, got {tuple(z.shape)} and {tuple(z_t.shape)}")
    if (head is None) != (y is None):
        raise ValueError("pass both head and y for classification errors, or neither")
    _check_fit_keywords(fit_kwargs)  # a misspelt one (epoch=) was ignored silently with fitted=
    check_bool("per_dimension", per_dimension)
    if y is not None:
        y = check_labels(z, y, "z")  # (B,) integer class indices >= 0; below the head's classes, checked on its output
    if fitted is None:
        fitted = fit_equivariance_map(
            z,
            z_t,
            kind,
            solver,
            output=output,
            holdout=holdout,
            seed=seed,
            error=error,
            per_dimension=per_dimension,
            generator=generator,
            **fit_kwargs,
        )
        held_out = len(fitted.test_index) > 0
        index = fitted.test_index if held_out else torch.arange(len(z), device=z.device)
        evaluated_on = "held_out" if held_out else "training"
    else:
        if not isinstance(fitted, EquivarianceMap):
            raise TypeError(f"fitted must be an EquivarianceMap, got {type(fitted).__name__}")
        if fitted.in_shape != tuple(z.shape[1:]) or fitted.out_shape != tuple(z.shape[1:]):
            raise ValueError(
                f"fitted maps {fitted.in_shape} -> {fitted.out_shape}, but the features have shape {tuple(z.shape[1:])}"
            )
        if isinstance(holdout, Tensor):  # the rows evaluated: nothing is fitted, so every row may be one of them
            index = _given_rows(len(z), holdout, z.device).nonzero().flatten()
            if len(index) == 0:
                raise ValueError("holdout selects no row to evaluate the fitted map on")
        else:
            index = torch.arange(len(z), device=z.device)
        evaluated_on = "given"
    index = index.to(z.device)
    zc, zt = z[index], z_t[index]
    mapped = fitted(zt.double())
    eq = mapping_error(mapped, zc, error, per_dimension, reference=z)
    inv = mapping_error(zt, zc, error, per_dimension, reference=z)
    scores = {"equivariance": float(eq.nanmean()), "invariance": float(inv.nanmean())}
    scores["gap"] = scores["invariance"] - scores["equivariance"]
    out = {
        "map": fitted,
        "form": fitted.form,
        "output": fitted.output,
        "evaluated_on": evaluated_on,
        "index": index,
        "equivariance": eq,
        "invariance": inv,
        "summary": {"equivariance": summary(eq), "invariance": summary(inv)},
        "scores": scores,
    }
    if head is not None:
        labels = y.to(z.device)[index]
        errs = {"clean": _class_error(head, zc, labels, every=y)}  # first: checks y against the head's classes
        errs["invariance"] = _class_error(head, zt, labels)
        errs["equivariance"] = _class_error(head, mapped.to(z.dtype), labels)
        out["class_error"] = errs
        scores.update({f"class_error_{k}": float(v.mean()) for k, v in errs.items()})
    return out


def _logits(head: Callable[[Tensor], Tensor], feats: Tensor) -> Tensor:
    """``head(feats)`` in evaluation mode, checked: (B, classes) logits."""
    with evaluating(head):
        logits = head(feats)
    if not isinstance(logits, Tensor) or logits.dim() != 2 or len(logits) != len(feats):
        shape = tuple(logits.shape) if isinstance(logits, Tensor) else type(logits).__name__
        raise ValueError(f"head must return (B, classes) logits for B = {len(feats)}, got {shape}")
    return logits


def _check_fit_keywords(fit_kwargs: dict) -> None:
    unknown = sorted(set(fit_kwargs) - set(_FIT_KEYWORDS))
    if unknown:
        raise TypeError(f"unexpected keyword argument(s) {unknown}; the fit takes {list(_FIT_KEYWORDS)}")


def _class_error(head: Callable[[Tensor], Tensor], feats: Tensor, y: Tensor, every: Tensor | None = None) -> Tensor:
    """``1[argmax head(feats) != y]``; with ``every`` (all the labels), those are checked against the classes."""
    logits = _logits(head, feats)
    if every is not None:
        check_classes(every, logits.shape[1], "head")
    return (logits.argmax(1) != y.to(logits.device)).double()


# --------------------------------------------------------------------------- curves (Fig. 1)


@torch.no_grad()
def equivariance_curve(
    model_or_features: nn.Module | Callable[[Tensor], Tensor],
    x: Tensor,
    transform,
    magnitudes: Sequence[float],
    *,
    layer: str | None = None,
    reduce: str = "flatten",
    head: Callable[[Tensor], Tensor] | None = None,
    y: Tensor | None = None,
    kind: str = "linear",
    solver: str = "ridge",
    output: str = "auto",
    holdout: float | Tensor = DEFAULT_HOLDOUT,
    seed: int = 0,
    shared: bool = True,
    copies: int | None = None,
    batch_size: int | None = None,
    error: str = "l2",
    per_dimension: bool = True,
    draws: str = "shared",
    **fit_kwargs,
) -> dict:
    """Held-out equivariance and invariance errors against the transformation's magnitude (Tensmeyer & Martinez Fig. 1).

    For each magnitude ``m``, the features ``z = phi(x)`` and ``z_t = phi(g_m x)``
    go through :func:`equivariance_report`: one map ``M_{g_m}`` per magnitude,
    learned on the same training rows, its error and that of ``M = I``
    (invariance) measured on the same held-out rows for every magnitude. The
    paper's Fig. 1 plots classification errors (pass ``head`` and ``y``); the L2
    errors are always reported.

    Args:
        model_or_features: an ``nn.Module`` (its logits, see :func:`augnet.probes.invariance_curve`,
            or the ``layer`` named, read with :func:`augnet.probes.features`, in evaluation mode,
            batch by batch; for an AugNet the forward pass takes ``copies`` and a generator seeded with ``seed``),
            or any callable ``x -> (B, ...)`` features.
        x: (B, ...) inputs.
        transform: an augnet :class:`~augnet.transforms.base.Transform`, called with the
            magnitude in [0, 1], or any callable ``transform(x, magnitude) -> x'`` (then
            ``magnitudes`` may be in any units, e.g. degrees).
        magnitudes: the magnitudes probed, in order.
        layer, reduce, copies, batch_size: as in :func:`augnet.probes.invariance_curve`
            (``layer`` and ``copies`` need a module).
        head, y: the rest of the network (features -> logits) and the class labels ((B,) or (B, 1),
            any integer dtype, a NumPy array or a list; whole floats too), in ``[0, classes)``, for
            the classification errors; both or neither. The labels are
            checked before the model runs, against the head's classes after the clean pass.
        kind, solver, output, holdout, fit_kwargs: as in :func:`fit_equivariance_map`;
            ``holdout`` as a fraction is drawn once (with ``seed``) and shared by every magnitude.
            An option the solver would ignore (``epochs=`` with ``solver="ridge"``) is refused
            before the model runs.
        seed: seeds the split, the maps' fits and the transformation's draws (the same draw
            scaled by each magnitude); an int in ``[0, 2**63 - 3]``, as the other probes take.
        shared: for an augnet transform, draw its parameters once and apply the same
            transformation to every input, as the paper does ("the same exact transform to every
            image"; what each input computes from itself, a contrast's mean, stays its own); ``False``
            draws them per input (then ``M`` must undo a range of transformations).
        error, per_dimension: as in :func:`mapping_error`.
        draws: for an AugNet, ``"shared"`` or ``"independent"`` augmentation draws in the
            clean and transformed passes (see :func:`augnet.probes.invariance_curve`).

    Returns:
        ``{"magnitude": [...], "range": [natural range per magnitude, or None for a callable],
        "form" (the maps' formula), "index": (n,) held-out rows,
        "equivariance": [mean held-out error per magnitude], "invariance": [...],
        "errors": {"equivariance": (M, n), "invariance": (M, n)} per-sample errors,
        "summary": {"equivariance": [summary dict per magnitude], "invariance": [...]},
        "maps": [EquivarianceMap per magnitude]}``, and with ``head``
        ``"class_error": {"clean", "equivariance", "invariance"}`` lists of the mean held-out
        classification errors per magnitude.

    Examples:
        >>> g = torch.Generator().manual_seed(0)
        >>> x = torch.randn(200, 8, generator=g)
        >>> shift = lambda a, m: a.roll(int(m), dims=1)  # phi = identity is equivariant to it
        >>> c = equivariance_curve(lambda a: a, x, shift, [0, 1, 2])
        >>> max(c["equivariance"]) < 1e-4, c["invariance"][0], c["invariance"][2] > 1
        (True, 0.0, True)
    """
    if not isinstance(x, Tensor):
        raise TypeError(f"x must be a tensor, got {type(x).__name__}")
    if x.dim() < 1 or len(x) < 2:
        raise ValueError(f"x must be a batch of at least 2 inputs, got shape {tuple(x.shape)}")
    if not callable(model_or_features):
        raise TypeError(f"model_or_features must be a module or a callable, got {type(model_or_features).__name__}")
    if not callable(transform):
        raise TypeError(f"transform must be an augnet transform or a callable, got {type(transform).__name__}")
    mags = list(magnitudes)
    if not mags:
        raise ValueError("magnitudes must hold at least one magnitude")
    if (head is None) != (y is None):
        raise ValueError("pass both head and y for classification errors, or neither")
    if y is not None:
        y = check_labels(x, y)  # below the head's classes: checked after the clean pass
    seed = check_seed(seed)  # an int in [0, 2**63 - 3]: near 2**63 torch refused seed + 1 after the clean pass
    check_draws(draws)
    check_layer(layer)
    check_bool("shared", shared)  # "no" was a truthy flag
    check_bool("per_dimension", per_dimension)
    _check_fit_keywords(fit_kwargs)
    _check_fit_settings(kind, solver, **fit_kwargs)  # an option the solver would ignore, before any pass
    if output not in OUTPUTS:  # these three were refused after the clean and the first transformed pass
        raise ValueError(f"output must be one of {OUTPUTS}, got {output!r}")
    if error not in ERRORS:
        raise ValueError(f"error must be one of {ERRORS}, got {error!r}")
    _split(len(x), holdout, torch.Generator(), "cpu")  # (a generator of its own: torch's global one is not drawn)
    is_module = isinstance(model_or_features, nn.Module)
    if not is_module and (layer is not None or copies is not None):
        raise ValueError("layer and copies apply to an nn.Module only; a callable returns the features itself")
    if is_module:
        check_model_input(model_or_features, x)
    is_augnet = check_transform(transform, x, mags)  # an input an augnet transform cannot take, before any pass
    if is_augnet and shared and transform.mixes_samples:
        raise ValueError(
            f"{type(transform).__name__} mixes samples and cannot be shared by every input; pass shared=False"
        )

    passes = iter(range(len(mags) + 1))

    def phi(inputs: Tensor) -> Tensor:
        if is_module:
            name = LOGITS if layer is None else layer
            device = inputs.x.device if isinstance(inputs, Transformed) else inputs.device
            kwargs = forward_kwargs(model_or_features, copies, seed, device, draws, next(passes))
            return _features(model_or_features, inputs, name, reduce=reduce, batch_size=batch_size, **kwargs)[name]
        if isinstance(inputs, Transformed):
            inputs = inputs.whole()
        out = model_or_features(inputs)
        if not isinstance(out, Tensor) or out.dim() < 2 or len(out) != len(inputs):
            shape = tuple(out.shape) if isinstance(out, Tensor) else type(out).__name__
            raise ValueError(f"the features must be a (B, ...) tensor with B = {len(inputs)}, got {shape}")
        return out

    z = phi(x)
    if is_module:
        check_rows({LOGITS if layer is None else layer: z}, len(x))
    _check_pair("z", z, "z_t", z)
    if head is not None:
        check_classes(y, _logits(head, z[:2]).shape[1], "head")  # two rows: a head with a batch norm runs
    # One split for every magnitude, so that the points of the curve are measured on the same rows.
    train, test = _split(len(z), holdout, _seeded_generator(seed), z.device)
    rows = torch.zeros(len(z), dtype=torch.bool, device=z.device)
    rows[test] = True
    eq_err, inv_err, maps, ranges = [], [], [], []
    cls = {"clean": [], "equivariance": [], "invariance": []}
    for m in mags:
        if is_augnet:
            xt = _apply_augnet(transform, x, float(m), shared, seed)
            ranges.append(tuple(transform.natural_range(float(m), tuple(x.shape[2:]) or None)))
        else:
            xt = transform(x, m)
            ranges.append(None)
        if not isinstance(xt, (Tensor, Transformed)) or len(xt) != len(x):
            shape = tuple(xt.shape) if isinstance(xt, Tensor) else type(xt).__name__
            raise ValueError(f"transform must return {len(x)} transformed inputs, got {shape} at magnitude {m}")
        z_t = phi(xt)
        if z_t.shape != z.shape:
            raise ValueError(f"features of the transformed inputs have shape {tuple(z_t.shape)}, not {tuple(z.shape)}")
        rep = equivariance_report(
            z,
            z_t,
            kind,
            solver,
            output=output,
            head=head,
            y=y,
            holdout=rows,
            seed=seed,
            error=error,
            per_dimension=per_dimension,
            **fit_kwargs,
        )
        eq_err.append(rep["equivariance"])
        inv_err.append(rep["invariance"])
        maps.append(rep["map"])
        if head is not None:
            for k in cls:
                cls[k].append(rep["scores"][f"class_error_{k}"])
    eq_t, inv_t = torch.stack(eq_err), torch.stack(inv_err)
    out = {
        "magnitude": [float(m) for m in mags],
        "range": ranges,
        "form": maps[0].form,
        "index": test if len(test) else train,
        "equivariance": [float(e.nanmean()) for e in eq_t],
        "invariance": [float(e.nanmean()) for e in inv_t],
        "errors": {"equivariance": eq_t, "invariance": inv_t},
        "summary": {"equivariance": [summary(e) for e in eq_t], "invariance": [summary(e) for e in inv_t]},
        "maps": maps,
    }
    if head is not None:
        out["class_error"] = cls
    return out


def _apply_augnet(transform, x: Tensor, magnitude: float, shared: bool, seed: int) -> Transformed:
    """``transform`` at ``magnitude``: one draw for every row (``shared``) or a draw per row, seeded.

    A shared draw keeps per row what each input computes from itself (a contrast's mean: each image
    is contrasted about its own, not the first image's; a signal's noise is scaled by its own deviation;
    see ``shared_params``). Returned as a
    :class:`~augnet.probes._common.Transformed`, applied batch by batch.
    """
    if not shared:
        return Transformed(transform, x, magnitude, seeded(seed + 1, x.device))
    params = shared_params(transform, x, transform.check_magnitude(magnitude, x), seed + 1)
    return Transformed(transform, x, magnitude, params=params)


def plot_equivariance_curves(
    curves: dict[str, dict] | dict,
    path: str | Path,
    metric: str = "l2",
    title: str | None = None,
) -> Path:
    """Equivariance (solid) and invariance (dashed) errors against the magnitude, as Tensmeyer & Martinez Fig. 1.

    Args:
        curves: one curve from :func:`equivariance_curve`, or ``{label: curve}`` (e.g. a model
            trained with the transformation and a baseline), one colour per label.
        path: where to write the PNG (needs matplotlib: ``pip install "augnet[viz]"``).
        metric: ``"l2"`` (held-out normalised L2 errors) or ``"class_error"`` (needs curves
            computed with ``head`` and ``y``).
        title: optional figure title.

    Returns:
        The path written.
    """
    if metric not in ("l2", "class_error"):
        raise ValueError(f"metric must be 'l2' or 'class_error', got {metric!r}")
    if not isinstance(curves, dict) or not curves:
        raise TypeError(f"curves must be a curve or a non-empty dict of curves, got {type(curves).__name__}")
    named = {"": curves} if "magnitude" in curves else dict(curves)
    for label, curve in named.items():
        if not isinstance(curve, dict) or "magnitude" not in curve:
            raise ValueError(f"curve {label!r} is not an equivariance_curve result")
        if metric == "class_error" and "class_error" not in curve:
            raise ValueError(f"curve {label!r} has no classification errors; compute it with head and y")
    from augnet.viz import require_matplotlib, save_figure

    plt = require_matplotlib()
    fig, ax = plt.subplots(figsize=(6, 4))
    for label, curve in named.items():
        source = curve["class_error"] if metric == "class_error" else curve
        prefix = f"{label}: " if label else ""
        (line,) = ax.plot(curve["magnitude"], source["equivariance"], marker="o", label=f"{prefix}equivariance")
        ax.plot(
            curve["magnitude"],
            source["invariance"],
            marker="s",
            linestyle="--",
            color=line.get_color(),
            label=f"{prefix}invariance",
        )
    ax.set_xlabel("magnitude")
    ax.set_ylabel("classification error (held out)" if metric == "class_error" else "normalised L2 error (held out)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(frameon=False)
    if title:
        ax.set_title(title)
    return save_figure(fig, path)


# --------------------------------------------------------------------------- representation distance


@torch.no_grad()
def representation_distance(
    z1: Tensor,
    z2: Tensor,
    kind: str = "linear",
    solver: str = "ridge",
    *,
    output: str = "auto",
    holdout: float | Tensor = DEFAULT_HOLDOUT,
    seed: int | None = 0,
    error: str = "l2",
    per_dimension: bool = True,
    generator: torch.Generator | None = None,
    **fit_kwargs,
) -> dict:
    """Two-way mapping error between two representations of the same inputs (Tensmeyer & Martinez eqs. 4, 9).

    Fits ``E_1: z1 -> z2`` and ``E_2: z2 -> z1`` on the same rows (plain affine
    maps ``W r + b`` for ``kind="linear"``, shrunk towards 0 by ridge, with the
    paper's ``sigma(W r + b)`` (section 5.3) onto a representation whose values are
    all >= 0 when ``output="auto"``; ``"residual_relu"`` needs representations of
    the same size), and reports each one-way error on the held-out rows (by
    default a seeded 30 %; on every row when ``holdout`` is 0, then they are
    training errors). ``forward`` small means ``z2`` is (linearly) predictable
    from ``z1``, i.e. ``z2`` is a sub-representation of ``z1``.

    Args:
        z1, z2: (B, ...) features of the same B inputs; their sizes may differ.
        kind, solver, output, holdout, seed, generator, fit_kwargs: as in :func:`fit_equivariance_map`.
        error, per_dimension: as in :func:`mapping_error`.

    Returns:
        ``{"maps": (E_1, E_2), "forms": (E_1's formula, E_2's), "evaluated_on" ("held_out" or
        "training"), "index": (n,) rows evaluated, "forward": (n,) errors of
        E_1(z1) against z2, "backward": (n,) errors of E_2(z2) against z1,
        "summary": {"forward", "backward"} summary dicts, "scores": {"forward", "backward",
        "distance" (their sum, eq. 4), "asymmetry" (forward - backward; eq. 9 is its absolute value)}}``.

    Examples:
        >>> g = torch.Generator().manual_seed(0)
        >>> z1 = torch.randn(50, 4, generator=g)
        >>> a = 2 * torch.eye(4) + 0.1 * torch.randn(4, 4, generator=g)  # well conditioned
        >>> d = representation_distance(z1, z1 @ a + 1.0)
        >>> d["scores"]["distance"] < 1e-4, d["forms"]
        (True, ('W r + b', 'W r + b'))
    """
    _check_pair("z1", z1, "z2", z2)
    if len(z1) != len(z2):
        raise ValueError(f"z1 and z2 must hold the same inputs (rows), got {len(z1)} and {len(z2)}")
    _check_fit_keywords(fit_kwargs)
    generator = _seeded_generator(seed, generator)
    _, test = _split(len(z1), holdout, generator, z1.device)
    held = torch.zeros(len(z1), dtype=torch.bool, device=z1.device)
    held[test] = True
    fit_kw = {k: None for k in _FIT_KEYWORDS}
    fit_kw["ridge"] = DEFAULT_RIDGE
    fit_kw.update(fit_kwargs)
    common = dict(output=output, holdout=held, error=error, per_dimension=per_dimension, generator=generator)
    e1 = _fit(z1, z2, kind, solver, residual=False, **common, **fit_kw)
    e2 = _fit(z2, z1, kind, solver, residual=False, **common, **fit_kw)
    index = test if len(test) else torch.arange(len(z1), device=z1.device)
    fwd, bwd = e1.errors[index], e2.errors[index]
    scores = {"forward": float(fwd.nanmean()), "backward": float(bwd.nanmean())}
    scores["distance"] = scores["forward"] + scores["backward"]
    scores["asymmetry"] = scores["forward"] - scores["backward"]
    return {
        "maps": (e1, e2),
        "forms": (e1.form, e2.form),
        "evaluated_on": "held_out" if len(test) else "training",
        "index": index,
        "forward": fwd,
        "backward": bwd,
        "summary": {"forward": summary(fwd), "backward": summary(bwd)},
        "scores": scores,
    }
