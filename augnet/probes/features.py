"""Activations of named layers, read with forward hooks (no model edits)."""

from __future__ import annotations

from collections.abc import Sequence

import einops
import torch
from torch import Tensor, nn

__all__ = ["LOGITS", "OUTPUT", "REDUCTIONS", "describe", "features", "reduce_features"]

REDUCTIONS = ("none", "mean", "flatten")
#: The model's own output (for an AugNet: its aggregate, by default the mean of log-softmax over the copies).
OUTPUT = "output"
#: The activations before the final softmax (the AugNet paper's eq. 4 footnote): for an AugNet, its trunk's
#: outputs averaged over the C copies; for any other model, its output.
LOGITS = "logits"


def reduce_features(a: Tensor, reduce: str) -> Tensor:
    """Reduce a (B, ...) activation: ``"none"``, ``"mean"`` (global average over
    every axis after the channel axis, giving (B, Ch)) or ``"flatten"`` (B, -1)."""
    if reduce not in REDUCTIONS:
        raise ValueError(f"reduce must be one of {REDUCTIONS}, got {reduce!r}")
    if reduce == "none":
        return a
    if reduce == "flatten":
        return a.flatten(1)
    return a.flatten(2).mean(2) if a.dim() > 2 else a


def describe(model: nn.Module, name: str, copies: int | None = None) -> str:
    """What :func:`features` reads under ``name`` for ``model``, in words (the probes report it).

    Examples:
        >>> describe(nn.Linear(2, 3), "logits")
        'logits: the output of Linear'
    """
    from augnet.model import AugNet

    if name == LOGITS:
        if isinstance(model, AugNet):
            c = copies if copies is not None else model.eval_copies if not model.training else model.train_copies
            return f"logits: the AugNet's trunk outputs averaged over its {c} copies (before any softmax)"
        return f"logits: the output of {type(model).__name__}"
    if name == OUTPUT:
        if isinstance(model, AugNet):
            return f"output: the AugNet's aggregate ({model.aggregation!r} over the copies)"
        return f"output: the output of {type(model).__name__}"
    return f"layer {name!r}"


def _augnets(model: nn.Module) -> dict[str, nn.Module]:
    from augnet.model import AugNet

    return {name: m for name, m in model.named_modules() if isinstance(m, AugNet)}


def _owner(name: str, augnets: dict[str, nn.Module]) -> str | None:
    """The name of the innermost AugNet that contains the module ``name`` (``""`` for the model itself)."""
    best = None
    for prefix in augnets:
        if prefix == name:
            continue  # an AugNet's own output has one row per sample
        inside = prefix == "" or name.startswith(prefix + ".")
        if inside and (best is None or len(prefix) > len(best)):
            best = prefix
    return best


@torch.no_grad()
def features(
    model: nn.Module,
    x: Tensor,
    layers: str | Sequence[str],
    reduce: str = "none",
    batch_size: int | None = None,
    **forward_kwargs,
) -> dict[str, Tensor]:
    """Activations of the named submodules of ``model`` on ``x``.

    Forward hooks record each named module's output (the model is not edited,
    the hooks are removed afterwards). Two names are special: ``"output"``
    (``OUTPUT``) is the model's own output, and ``"logits"``
    (``LOGITS``) the activations before the final softmax: for an
    :class:`~augnet.AugNet` its trunk's outputs averaged over the copies, for
    any other model its output.

    Inside an AugNet, whose trunk sees ``B * C`` rows (copy-major), the
    activations of a module of that AugNet with ``B * C`` rows are averaged
    over the C copies, giving one row per input; pass ``copies=`` (and
    ``generator=``) through ``forward_kwargs``. Nothing else is averaged: a
    module of any other model that returns several rows per input is returned
    as it is.

    Args:
        model: any module; it is run in its current mode (call ``.eval()`` first
            for deterministic layers such as batch norm).
        x: the inputs, batch first.
        layers: a name or names from ``model.named_modules()``, ``"output"`` or ``"logits"``.
        reduce: ``"none"``, ``"mean"`` (global average pool) or ``"flatten"``.
        batch_size: run ``x`` in chunks of this many rows.

    Returns:
        ``{name: (B, ...) tensor}`` in the order of ``layers``.

    Examples:
        >>> net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.LazyLinear(2))
        >>> out = features(net, torch.rand(5, 3, 8, 8), ["0", "output"], reduce="mean")
        >>> out["0"].shape, out["output"].shape
        (torch.Size([5, 4]), torch.Size([5, 2]))
    """
    from augnet.model import AugNet

    names = [layers] if isinstance(layers, str) else list(layers)
    if not names:
        raise ValueError("layers must name at least one module")
    modules = dict(model.named_modules())
    unknown = [n for n in names if n not in (OUTPUT, LOGITS) and n not in modules]
    if unknown:
        raise ValueError(f"unknown layer(s) {unknown}; the model's modules are {[n for n in modules if n]}")
    if reduce not in REDUCTIONS:
        raise ValueError(f"reduce must be one of {REDUCTIONS}, got {reduce!r}")
    if not isinstance(x, Tensor):
        raise TypeError(f"x must be a tensor, got {type(x).__name__}")
    if x.dim() == 0 or len(x) == 0:
        raise ValueError(f"x must be a non-empty batch, got shape {tuple(x.shape)}")
    step = len(x) if batch_size is None else int(batch_size)
    if step < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    # Where each name is read: "logits" of an AugNet is its trunk's output.
    hooked = {n: ("trunk" if isinstance(model, AugNet) else OUTPUT) if n == LOGITS else n for n in names}
    augnets = _augnets(model)
    owners = {n: _owner(m, augnets) if m != OUTPUT else None for n, m in hooked.items()}
    chunks: dict[str, list[Tensor]] = {n: [] for n in names}
    for start in range(0, len(x), step):
        xb = x[start : start + step]
        record: dict[str, Tensor] = {}
        rows: dict[str, list[int]] = {p: [] for p in augnets}  # per AugNet: its input's and its trunk's rows
        handles = [
            modules[m].register_forward_hook(lambda mod, i, o, m=m, rec=record: rec.__setitem__(m, _first_tensor(o)))
            for m in set(hooked.values())
            if m != OUTPUT
        ]
        for p, net in augnets.items():
            count = rows[p].append  # the AugNet's input rows, then its trunk's
            handles.append(net.register_forward_pre_hook(lambda mod, i, count=count: count(len(i[0]))))
            handles.append(net.trunk.register_forward_pre_hook(lambda mod, i, count=count: count(len(i[0]))))
        try:
            out = model(xb, **forward_kwargs)
        finally:
            for h in handles:
                h.remove()
        record[OUTPUT] = _first_tensor(out)
        for n in names:
            a = record[hooked[n]]
            owner = owners[n]
            if owner is not None and len(rows[owner]) >= 2:
                batch, seen = rows[owner][-2], rows[owner][-1]
                copies = seen // batch if batch else 1
                if copies > 1 and seen == batch * copies and a.shape[0] == seen:
                    a = einops.reduce(a, "(c b) ... -> b ...", "mean", c=copies)  # c copies of b samples
            chunks[n].append(reduce_features(a, reduce))
    return {n: torch.cat(chunks[n]) for n in names}


def _first_tensor(o) -> Tensor:
    if isinstance(o, Tensor):
        return o
    if isinstance(o, (tuple, list)) and o and isinstance(o[0], Tensor):
        return o[0]
    raise TypeError(f"cannot read a tensor from a module output of type {type(o).__name__}")
