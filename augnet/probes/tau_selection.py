"""The activity threshold ``tau`` chosen by ablation (Zaidi et al., section 3.2 and appendix C).

Here live :func:`select_tau`, its grid (:data:`DEFAULT_TAUS`) and scores
(:data:`SCORES`), and the checks of labels, batch sizes and transformed inputs
that :func:`augnet.probes.neurons.layerwise_invariance` shares with it. The
procedure is described in :mod:`augnet.probes.neurons`, which re-exports
everything here.
"""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Iterable, Sequence

import torch
from torch import Tensor, nn

from augnet._checks import is_int
from augnet._stack import PROBES, caller_stacklevel
from augnet.probes._common import (
    Transformed,
    batch_size_of,
    check_classes,
    check_labels,
    check_model_input,
    check_seed,
    evaluating,
    forward_kwargs,
    rows_of,
    seeded,
)
from augnet.probes.features import _resolve, call_hooks, split_call
from augnet.probes.unit_invariance import _check_tau, _check_units

__all__ = [
    "DEFAULT_TAUS",
    "SCORES",
    "select_tau",
]

#: What :func:`select_tau` scores: accuracy on every evaluated input (clean and transformed, every
#: class), or within-category accuracy, on the transformed inputs of the seen-transformed classes (Fig. 7).
SCORES = ("all", "within")

#: The paper's grid, 0 to 0.95 in steps of 0.05 (``tau = 1`` leaves no unit active).
DEFAULT_TAUS: tuple[float, ...] = tuple(round(0.05 * i, 2) for i in range(20))

#: Accuracies are ratios of counts; a drop equal to ``max_drop`` up to this rounding passes.
_ROUNDING = 1e-9


# --------------------------------------------------------------------------- tau by ablation


def _check_batch_size(batch_size, n: int) -> int:
    return batch_size_of(batch_size)


def _predict(model: nn.Module, x, step: int, copies, seed: int, check, labels: Tensor | None = None) -> Tensor:
    """Class predictions, chunk by chunk; an AugNet gets the same augmentation draws on every call.

    ``check`` is called after each forward pass (the ``check()`` of :func:`~augnet.probes.features.call_hooks`
    the pass runs under); ``labels`` (CPU, no synchronisation) are checked against the classes of the first
    chunk's logits.
    """
    kwargs = forward_kwargs(model, copies, seed, x.x.device if isinstance(x, Transformed) else x.device)
    preds = torch.empty(len(x), dtype=torch.int64)  # one allocation, not one kept per batch
    for start in range(0, len(x), step):
        out = model(rows_of(x, start, min(start + step, len(x))), **kwargs)
        check()
        if isinstance(out, (tuple, list)):
            out = out[0]
        if not isinstance(out, Tensor) or out.dim() != 2:
            raise ValueError(
                f"the model must return (B, classes) logits, got {getattr(out, 'shape', type(out).__name__)}"
            )
        if labels is not None and start == 0:
            check_classes(labels, out.shape[1])
        preds = preds.to(out.device)
        preds[start : start + len(out)] = out.argmax(1)
    return preds


def _check_transform_inputs(x: Tensor, transform, magnitude, x_t, seed: int, who: str) -> Tensor | Transformed:
    """The transformed inputs: ``x_t`` as given, or ``transform(x, magnitude)`` drawn from ``seed + 1``.

    A transform is returned as a :class:`~augnet.probes._common.Transformed`, applied batch by batch.
    """
    if (transform is None) == (x_t is None):
        raise ValueError(
            f"{who} needs the transformed inputs, as transform= or x_t= (one of the two): the paper normalises "
            "each unit by its maximum over clean and transformed inputs; for clean inputs alone pass x_t=x"
        )
    if transform is not None:
        if not callable(transform):
            raise TypeError(f"transform must be callable, got {type(transform).__name__}")
        moved = Transformed(transform, x, magnitude, seeded(seed + 1, x.device))
        if moved.shape != x.shape:
            raise ValueError(
                f"the transformed inputs must have the inputs' shape {tuple(x.shape)}, got {tuple(moved.shape)}"
            )
        return moved
    if not isinstance(x_t, Tensor) or x_t.shape != x.shape:
        raise ValueError(
            f"the transformed inputs must have the inputs' shape {tuple(x.shape)}, got "
            f"{tuple(getattr(x_t, 'shape', ())) if isinstance(x_t, Tensor) else type(x_t).__name__}"
        )
    return x_t.to(x.device)


def _check_moved(model: nn.Module, xt, name: str) -> None:
    """:func:`~augnet.probes._common.check_model_input` on transformed inputs held whole: ``x_t`` as given, or a
    plain callable's output (a :class:`~augnet.probes._common.Transformed` computed at once), its messages naming
    ``name``. An augnet transform's rows, made batch by batch, keep the inputs' dtype and device."""
    moved = xt._whole if isinstance(xt, Transformed) else xt
    if moved is None:
        return
    try:
        check_model_input(model, moved)
    except (TypeError, ValueError) as err:  # a callable's float64 output was torch's RuntimeError in the first pass
        msg = str(err)
        if msg.startswith("x "):
            msg = f"{name} {msg[2:]}".replace("pass x.", f"pass {name}.")
        raise type(err)(msg) from None


def _seen_mask(y: Tensor, seen_classes) -> Tensor:
    if seen_classes is None:
        return torch.ones(len(y), dtype=torch.bool, device=y.device)
    if isinstance(seen_classes, Tensor):
        seen_classes = seen_classes.flatten().tolist()
    if isinstance(seen_classes, (str, bytes)) or not isinstance(seen_classes, Iterable):
        raise TypeError(f"seen_classes must be an iterable of class indices, got {type(seen_classes).__name__}")
    seen = []
    for c in seen_classes:
        if not is_int(c):
            raise TypeError(f"seen_classes must hold integer class indices, got {c!r}")
        if not 0 <= c < 2**63:  # a negative class matched no label; past int64 torch's overflow named nothing
            raise ValueError(f"seen_classes must hold class indices >= 0 (within int64), got {c!r}")
        seen.append(int(c))
    return torch.isin(y, torch.tensor(seen, dtype=y.dtype, device=y.device))


@torch.no_grad()
def select_tau(
    model: nn.Module,
    layer: str,
    x: Tensor,
    y: Tensor,
    taus: Sequence[float] = DEFAULT_TAUS,
    max_drop: float = 0.01,
    transform=None,
    magnitude: float = 1.0,
    copies: int | None = None,
    seed: int = 0,
    batch_size: int | None = None,
    x_t: Tensor | None = None,
    units: str = "element",
    score: str = "all",
    seen_classes: Iterable[int] | None = None,
) -> dict:
    """The largest activity threshold whose ablation of sub-threshold activity costs at most ``max_drop`` accuracy.

    Zaidi et al. (section 3.2, appendix C) pick ``tau`` by a grid search: for
    each ``tau`` every unit of ``layer`` whose normalised activity is at or
    below ``tau`` (the inactive units of each input) is set to 0, and the
    highest ``tau`` whose accuracy drops by at most 1% is kept. The ablation is
    a forward hook on ``layer`` that returns the masked output (the model is
    not edited; the hook is removed afterwards, also on error). As a check of
    the converse, the accuracy with the *active* units zeroed is reported too
    (the paper expects it near chance).

    The evaluation set is the clean inputs and their transformed versions
    together, and each unit's normaliser is its maximum over both, as in
    :func:`neuron_invariance` (the paper's ``f_k``): a ``transform`` or the
    transformed inputs ``x_t`` are required. A unit is read as ``units``
    (see :func:`layer_units`): with ``"element"`` each activation is thresholded
    and zeroed on its own, with ``"channel"`` a channel's mean activity over
    the positions is thresholded and the whole channel map is zeroed. Give
    :func:`neuron_invariance` the same ``units`` for the chosen ``tau`` to
    mean the same thing. Every grid value is evaluated; the answer is the
    largest one that passes, even if the accuracy is not monotone in ``tau``.

    Args:
        model: a classifier returning (B, classes) logits, probed in evaluation
            mode (its modes are restored afterwards).
        layer: name of a submodule (``model.named_modules()``) whose output is
            a non-negative tensor, e.g. a ReLU (NaN or inf raise a ValueError);
            for a module called several times per forward pass, ``"name#k"``
            names its k-th call, the only one normalised and ablated (see
            :func:`~augnet.probes.features`).
        x: inputs; y: their class labels in ``[0, classes)`` ((B,) or (B, 1), any integer dtype,
            a NumPy array or a list; whole floats too); labels past the model's classes are refused
            at its first batch.
        taus: the grid (values in [0, 1]); default 0, 0.05, ..., 0.95.
        max_drop: largest accepted accuracy drop, a fraction (0.01 is 1%); a
            drop equal to it up to rounding passes.
        transform: the transform, called as ``transform(x, magnitude,
            generator=g)`` with ``g`` seeded with ``seed + 1``.
        magnitude: the transform's magnitude.
        copies: for an AugNet, the copies it averages (the same augmentation
            draws, from ``seed``, in every pass).
        seed: an AugNet's augmentations are drawn from ``seed``, the
            transform's parameters from ``seed + 1``.
        batch_size: run the model in chunks of this many rows (default 256);
            the transformed inputs are made chunk by chunk for an augnet transform.
        x_t: the transformed inputs, instead of ``transform`` (row ``i`` the
            transformed ``x[i]``); ``x_t=x`` evaluates the clean inputs alone.
        units: ``"element"`` or ``"channel"``, see ``UNITS``.
        score: the accuracy every ablation is scored by: ``"all"`` (every
            clean and transformed input) or ``"within"`` (within-category
            accuracy, on the transformed inputs of ``seen_classes``: the
            paper's Fig. 7). The normalisation uses every input either way.
        seen_classes: the seen-transformed categories for ``score="within"``;
            ``None`` counts every class as seen (the paper's setting where all
            categories are seen transformed).

    Returns:
        ``{"tau": the chosen value, or None (with a RuntimeWarning) when no grid
        value passes, "taus": [...], "accuracy": accuracy without ablation,
        "accuracy_inactive_ablated": [...], "accuracy_active_ablated": [...],
        "drop": [...], "active_fraction": [...] (fraction of the units'
        normalised activities, over clean and transformed inputs, above tau),
        "max_drop": max_drop, "units": units, "score": score, "n_scored":
        number of inputs scored}``, lists in grid order.

    Examples:
        >>> net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).eval()
        >>> x, y = torch.randn(32, 4), torch.randint(0, 3, (32,))
        >>> out = select_tau(net, "1", x, y, taus=[0.0, 0.5], transform=lambda b, m, generator=None: -b)
        >>> out["tau"] in (0.0, 0.5), out["drop"][0]
        (True, 0.0)
    """
    seed = check_seed(seed)  # before anything runs: an int in [0, 2**63 - 3], a NumPy one too
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    if not isinstance(layer, str):
        raise TypeError(f"layer must be a module name (str), got {type(layer).__name__}")
    modules = dict(model.named_modules())
    if split_call(layer)[0] not in modules or split_call(layer)[0] == "":
        raise ValueError(f"unknown layer {layer!r}; the model's modules are {[n for n in modules if n]}")
    y = check_labels(x, y)
    check_model_input(model, x)
    if isinstance(taus, (str, bytes)) or not isinstance(taus, Sequence) or len(taus) == 0:
        raise ValueError(f"taus must be a non-empty sequence of thresholds, got {taus!r}")
    grid = [_check_tau(t, "each tau") for t in taus]
    if isinstance(max_drop, bool) or not isinstance(max_drop, numbers.Real) or not 0.0 <= max_drop <= 1.0:
        raise ValueError(f"max_drop must be a fraction in [0, 1], got {max_drop!r}")
    units = _check_units(units)
    if score not in SCORES:
        raise ValueError(f"score must be one of {SCORES}, got {score!r}")
    if score == "all" and seen_classes is not None:
        raise ValueError("seen_classes only applies to score='within' (within-category accuracy)")
    step = _check_batch_size(batch_size, len(x))
    xt = _check_transform_inputs(x, transform, magnitude, x_t, seed, "select_tau")
    _check_moved(model, xt, "x_t" if x_t is not None else "transform(x, magnitude)")
    targets = _resolve(model, [layer])
    n = len(x)
    scored = torch.ones(2 * n, dtype=torch.bool)
    if score == "within":
        scored[:n] = False
        scored[n:] = _seen_mask(y.cpu(), seen_classes)
        if not bool(scored.any()):
            raise ValueError(f"no input of the seen classes {seen_classes!r} to score")
    labels, y = y, torch.cat([y, y]).to(x.device)
    scored = scored.to(x.device)

    def accuracy(pred: Tensor) -> float:
        return float((pred == y)[scored].double().mean())

    def predict(check, labels: Tensor | None = None) -> Tensor:  # the clean inputs, then the transformed ones
        return torch.cat([_predict(model, source, step, copies, seed, check, labels) for source in (x, xt)])

    # Pass 1: each unit's maximum over clean and transformed inputs, and the unablated accuracy.
    state: dict = {"max": None}

    def record(name, out):
        if not isinstance(out, Tensor):
            raise TypeError(f"layer {layer!r} must output a tensor to be ablated, got {type(out).__name__}")
        if out.dim() < 2:
            raise ValueError(f"layer {layer!r} must output (B, ...) activations, got shape {tuple(out.shape)}")
        if not bool(torch.isfinite(out).all()):
            raise ValueError(
                f"layer {layer!r} outputs non-finite activity (NaN or inf); its units' normalisers would be NaN "
                "and every ablation meaningless: fix the model or drop the inputs that cause it"
            )
        low = float(out.min()) if out.numel() else 0.0
        if low < 0:
            raise ValueError(
                f"layer {layer!r} outputs negative activations (minimum {low:.4g}); select_tau needs a "
                "non-negative layer, e.g. the ReLU after it"
            )
        m = _unit_view(out.detach(), units).amax(0)
        state["max"] = m if state["max"] is None else torch.maximum(state["max"], m)

    with evaluating(model):
        with call_hooks(model, targets, record) as check:
            base = accuracy(predict(check, labels))  # labels past the model's classes: refused at its first chunk
        scale = state["max"]  # set: check() refuses a layer the first forward pass did not call
        div = torch.where(scale > 0, scale, torch.ones_like(scale))

        def ablate(tau: float, keep_active: bool, count: list):
            def hook(name, out):
                active = (_unit_view(out, units) / div) > tau
                count[0] += int(active.sum())
                count[1] += active.numel()
                if units == "channel" and out.dim() > 2:
                    active = active.reshape(*active.shape, *([1] * (out.dim() - 2)))
                return torch.where(active if keep_active else ~active, out, torch.zeros_like(out))

            return hook

        acc_inactive, acc_active, fractions = [], [], []
        for tau in grid:
            for keep_active, sink in ((True, acc_inactive), (False, acc_active)):
                count = [0, 0]
                with call_hooks(model, targets, ablate(tau, keep_active, count)) as check:
                    sink.append(accuracy(predict(check)))
                if keep_active:
                    fractions.append(count[0] / max(count[1], 1))
    drops = [base - acc for acc in acc_inactive]
    passing = [t for t, d in zip(grid, drops, strict=True) if d <= max_drop + _ROUNDING]
    chosen = max(passing) if passing else None
    if chosen is None:
        warnings.warn(
            f"select_tau: no tau in {grid} keeps the accuracy drop within {max_drop} (smallest drop "
            f"{min(drops):.4g}); include 0 in the grid (ablating nothing) or raise max_drop",
            RuntimeWarning,
            stacklevel=caller_stacklevel(*PROBES),
        )
    return {
        "tau": chosen,
        "taus": grid,
        "accuracy": base,
        "accuracy_inactive_ablated": acc_inactive,
        "accuracy_active_ablated": acc_active,
        "drop": drops,
        "active_fraction": fractions,
        "max_drop": float(max_drop),
        "units": units,
        "score": score,
        "n_scored": int(scored.sum()),
    }


def _unit_view(out: Tensor, units: str) -> Tensor:
    """A layer output's units, keeping the layout for elements: (N, ...) for ``"element"``, (N, C) for ``"channel"``."""
    if units == "channel" and out.dim() > 2:
        return out.flatten(2).mean(2)
    return out
