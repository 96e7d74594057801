"""Checks of the inputs of the per-instance conditioner, the effects and the losses: each raises the ValueError or
TypeError naming the bad argument, before anything changes (torch's own errors came from deep inside a convolution
or a broadcast, and some inputs of the wrong shape ran silently: an unbatched image gave ``hidden`` rows).

Shape and dtype reads only, except :func:`check_class_indices`, which reads the labels' values on the host only.
"""

from __future__ import annotations

from torch import Tensor, nn

from augnet.ops.dispatch import host_readable

__all__ = ["check_class_indices", "check_features", "check_images", "check_module"]


def check_module(module, what: str) -> None:
    """The TypeError of a ``module`` that is not an ``nn.Module`` (its ``.modules()`` raised an AttributeError)."""
    if not isinstance(module, nn.Module):
        raise TypeError(f"{what}: module must be an nn.Module (a model or a layer), got {type(module).__name__}")


def check_features(h, features: int) -> None:
    """``h`` must be a floating-point (B, features) tensor: a (features,) vector was read as a batch of scalars (its
    mean and variance broadcast over every feature's running statistics)."""
    if not isinstance(h, Tensor):
        raise TypeError(f"RunningStandardize: expected a (B, {features}) tensor of features, got {type(h).__name__}")
    if not h.is_floating_point():
        raise TypeError(f"RunningStandardize: expected floating-point features, got dtype {h.dtype}")
    if h.dim() != 2 or h.shape[1] != features:
        one = " (one sample: h[None])" if tuple(h.shape) == (features,) else ""
        raise ValueError(f"RunningStandardize: expected features of shape (B, {features}), got {tuple(h.shape)}{one}")


def check_images(x, channels: int, ndim: int, who: str = "TinyConditioner") -> None:
    """``x`` must be a floating-point batch of rank ``ndim`` with ``channels`` channels: a convolution reads an
    unbatched (Ch, H, W) image as a batch, and the conditioner gave one row per hidden channel."""
    doc = "(B, Ch, H, W) images" if ndim == 4 else "(B, Ch, T) signals"
    if not isinstance(x, Tensor):
        raise TypeError(f"{who}: expected a tensor of {doc}, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{who}: expected a floating-point tensor, got dtype {x.dtype}")
    if x.dim() != ndim:
        one = " (one input: x[None])" if x.dim() == ndim - 1 and len(x) == channels else ""
        raise ValueError(f"{who}: its convolutions read {ndim}-D inputs, {doc}, got shape {tuple(x.shape)}{one}")
    if x.shape[1] != channels:
        raise ValueError(f"{who}: it reads {channels} channels, got an input with {x.shape[1]} channels, shape "
                         f"{tuple(x.shape)}")  # fmt: skip


def check_class_indices(y: Tensor, logits: Tensor, name: str = "y", ignore_index: int = -100) -> None:
    """The ValueError of int64 labels ``y`` that are not class indices of ``logits`` (B, C, ...): below 0 (other than
    ``ignore_index``, which cross-entropy skips) or ``C`` and above. torch raised an IndexError. Reads the labels'
    values only on the host (nothing waits for an accelerator)."""
    if logits.dim() < 2 or not len(y) or not host_readable(y):
        return
    classes = logits.shape[1]
    bad = ((y < 0) & (y != ignore_index)) | (y >= classes)
    if bool(bad.any()):
        values = y[bad].unique().tolist()
        raise ValueError(f"{name} must hold class indices in [0, {classes}) for the head's {classes} classes, got "
                         f"{values[:5]}{' ...' if len(values) > 5 else ''}")  # fmt: skip
