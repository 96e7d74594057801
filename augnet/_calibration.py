"""What :meth:`augnet.AugmentationLayer.calibrate` measures: each transform's expected change per magnitude.

Kept apart from the layer so that the checks of a measurement (inputs and
features that are finite, of one shape, a trunk left as it was) read in one
place. Nothing here changes the layer; the layer stores the curves only once
they are all measured and checked.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence

import torch
from torch import Tensor, nn

from augnet._checks import is_int

__all__ = ["change_curves"]


@contextlib.contextmanager
def evaluating(features) -> Iterator[None]:
    """The module behind ``features`` (a module or one's bound method) in evaluation mode, restored after.

    Measuring must not change the model: a trunk in training mode would update
    its batch-norm statistics and draw dropout masks.
    """
    module = features if isinstance(features, nn.Module) else getattr(features, "__self__", None)
    if not isinstance(module, nn.Module):
        yield
        return
    modes = {m: m.training for m in module.modules()}
    module.eval()
    try:
        yield
    finally:
        for m, training in modes.items():
            m.training = training


def _measured(measure: Callable[[Tensor], Tensor], x: Tensor, dtype: torch.dtype, shape=None) -> Tensor:
    out = measure(x)
    if not isinstance(out, Tensor):
        raise TypeError(f"calibrate: features must return a tensor, got {type(out).__name__}")
    if out.is_complex():  # its imaginary part was dropped (a cast to real), and the change measured on the rest
        raise TypeError(f"calibrate: features must return real values, got a {out.dtype} tensor (measure on "
                        "torch.view_as_real of it, or its abs())")  # fmt: skip
    if out.numel() == 0:  # its mean square is NaN: this read as features that are all zero
        raise ValueError(f"calibrate: features returned an empty tensor (shape {tuple(out.shape)}): nothing to measure")
    if shape is not None and out.shape != shape:
        raise ValueError(
            f"calibrate: features returned shape {tuple(out.shape)} for a transformed batch and {tuple(shape)} "
            "for the batch itself: they must have one shape"
        )
    if not bool(torch.isfinite(out).all()):
        raise ValueError("calibrate: the features contain NaN or infinite values; the change cannot be measured")
    return out.to(dtype)


def change_curves(
    transforms: Sequence[nn.Module],
    x: Tensor,
    points: int,
    generator: torch.Generator | None,
    features: Callable[[Tensor], Tensor] | None,
    layer_dtype: torch.dtype = torch.float32,
) -> Tensor:
    """The (Q, points) monotone change curves of :meth:`augnet.AugmentationLayer.calibrate`, checked.

    Measured in float32, or in float64 where float32 would overflow or underflow (features
    beyond its range, or whose mean square is: the change is relative, so any scale of the
    features gives the same curves). Returned in ``layer_dtype``, the layer's (as ``.to(dtype)`` of a calibrated
    layer and a state loaded into one give them), from their float32 values.

    Raises:
        ValueError, TypeError: inputs or features that cannot be measured (see the layer's method).
    """
    if not isinstance(x, Tensor):
        raise TypeError(f"calibrate needs a tensor of inputs, got {type(x).__name__}")
    if x.device.type == "meta":
        raise ValueError("calibrate needs the inputs' values: x is on meta, which holds none")
    if x.dim() < 2 or len(x) == 0:
        raise ValueError(f"calibrate needs a non-empty batch of inputs, got {getattr(x, 'shape', type(x).__name__)}")
    if not is_int(points) or points < 2:
        raise ValueError(f"points must be an int >= 2, got {points!r}")
    points = int(points)
    for t in transforms:
        t.check_input(x)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"calibrate: generator must be a torch.Generator or None, got {type(generator).__name__}")
    if features is not None and not callable(features):
        raise TypeError(f"features must be a callable (inputs -> features), got {type(features).__name__}")
    if not bool(torch.isfinite(x).all()):
        raise ValueError("calibrate: x contains NaN or infinite values; the change of such inputs cannot be measured")
    x = x.float()
    if not bool(torch.isfinite(x).all()):
        raise ValueError("calibrate: x has values beyond float32's range (±3.4e38); transforms run in float32")
    if features is not None:
        x = x.clone()  # the features read a copy: one that works in place on its input would write the caller's x
    measure = features if features is not None else (lambda inputs: inputs)
    with evaluating(features):
        base = _measured(measure, x, torch.float64)
        dtype = torch.float32
        if not bool(torch.finfo(torch.float32).tiny <= base.float().pow(2).mean() < torch.inf):
            dtype = torch.float64  # float32 would overflow, or underflow to 0 or subnormals: measure in float64
        base = base.to(dtype)
        scale = base.pow(2).mean()
        if not bool(scale > 0):
            raise ValueError("calibrate needs inputs (features) that are not all zero: the change is relative to them")
        generator = generator if generator is not None else torch.Generator(device=x.device).manual_seed(0)
        state = generator.get_state()
        grid = torch.linspace(0, 1, points).tolist()
        curves = torch.zeros(len(transforms), points, dtype=dtype)
        for q, t in enumerate(transforms):
            for k, m in enumerate(grid):
                generator.set_state(state)  # the same draws at every magnitude: a smooth curve
                moved = _measured(measure, t(x, m, generator=generator), dtype, base.shape)
                curves[q, k] = ((moved - base).pow(2).mean() / scale).sqrt()
    curves = curves.cummax(1).values.float()
    if not bool(torch.isfinite(curves).all()):
        raise ValueError("calibrate: the measured change overflows float32; the features change beyond measure")
    if bool((curves[:, -1] <= 0).any()):
        dead = [type(transforms[q]).__name__ for q in (curves[:, -1] <= 0).nonzero().flatten().tolist()]
        raise ValueError(f"cannot calibrate {dead}: they do not change these inputs at any magnitude")
    cast = curves.to(layer_dtype)
    if not bool(torch.isfinite(cast).all() and (cast[:, -1] > 0).all()):  # float16's range: 6e-8 to 65504
        raise ValueError(f"calibrate: the measured change (up to {float(curves.max()):.3g}, at full magnitude from "
                         f"{float(curves[:, -1].min()):.3g}) is beyond {layer_dtype}'s range, the layer's: calibrate "
                         "the layer in float32")  # fmt: skip
    return cast
