"""Activations of named layers, read with forward hooks (no model edits)."""

from __future__ import annotations

from collections.abc import Sequence

import einops
import torch
from torch import Tensor, nn

__all__ = ["REDUCTIONS", "features", "reduce_features"]

REDUCTIONS = ("none", "mean", "flatten")
OUTPUT = "output"


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
    the hooks are removed afterwards). ``"output"`` names the model's own
    output. For an :class:`~augnet.AugNet`, whose trunk sees ``B * C`` rows, a
    trunk layer's activations are averaged over the C copies, giving one row
    per input; pass ``copies=`` (and ``generator=``) through ``forward_kwargs``.

    Args:
        model: any module; it is run in its current mode (call ``.eval()`` first
            for deterministic layers such as batch norm).
        x: the inputs, batch first.
        layers: a name or names from ``model.named_modules()``, or ``"output"``.
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
    names = [layers] if isinstance(layers, str) else list(layers)
    if not names:
        raise ValueError("layers must name at least one module")
    modules = dict(model.named_modules())
    unknown = [n for n in names if n != OUTPUT and n not in modules]
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
    chunks: dict[str, list[Tensor]] = {n: [] for n in names}
    for start in range(0, max(len(x), 1), step):
        xb = x[start : start + step]
        record: dict[str, Tensor] = {}
        handles = [
            modules[n].register_forward_hook(lambda m, i, o, n=n, rec=record: rec.__setitem__(n, _first_tensor(o)))
            for n in names
            if n != OUTPUT
        ]
        try:
            out = model(xb, **forward_kwargs)
        finally:
            for h in handles:
                h.remove()
        if OUTPUT in names:
            record[OUTPUT] = _first_tensor(out)
        for n in names:
            a = record[n]
            if a.shape[0] != len(xb) and len(xb) and a.shape[0] % len(xb) == 0:
                # AugNet: the trunk saw C copies of each input (copy-major); average them.
                a = einops.reduce(a, "(c b) ... -> b ...", "mean", b=len(xb))  # c copies of b samples
            chunks[n].append(reduce_features(a, reduce))
    return {n: torch.cat(chunks[n]) for n in names}


def _first_tensor(o) -> Tensor:
    if isinstance(o, Tensor):
        return o
    if isinstance(o, (tuple, list)) and o and isinstance(o[0], Tensor):
        return o[0]
    raise TypeError(f"cannot read a tensor from a module output of type {type(o).__name__}")
