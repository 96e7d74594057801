"""Checks of the transforms' base (:mod:`augnet.transforms.base`): magnitudes, float32 ranges, temperatures.

Kept apart from ``base`` for room; ``base`` imports every name here, and the transform modules import them
from there.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from augnet._checks import positive
from augnet.magnitudes import widened

__all__ = ["check_temperature", "in_float32", "jsonable", "param_dtype", "tensor_magnitude"]


def param_dtype(x: Tensor) -> torch.dtype:
    """dtype of sampled parameters: float64 for float64 inputs, else float32."""
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def in_float32(name: str, value: float, why: str = "the parameters are drawn in float32") -> float:
    """``value``, or the ValueError naming ``name`` where float32 cannot hold it (draws from it were 0, NaN or inf)."""
    f32 = torch.finfo(torch.float32)
    if not f32.tiny <= value <= f32.max:
        raise ValueError(f"{name} ({value:g}) is beyond float32's range ({f32.tiny:.3g} to {f32.max:.3g}): {why}")
    return value


def check_temperature(name: str, value: float) -> float:
    """A relaxation's temperature as a float: :func:`positive`, and large enough that ``1 / value`` is finite in
    float32 (the relaxed gates divide by it in the parameters' dtype: below that, the magnitude's gradient is NaN)."""
    value = positive(name, value)
    if value < 1.0 / torch.finfo(torch.float32).max:
        raise ValueError(f"{name} {value!r} is too small: 1 / {name} overflows float32 (the gradient would be NaN)")
    return value


def check_unit_interval(name: str, value: float) -> None:
    """The ValueError of a magnitude outside [0, 1] (or not finite), naming the transform ``name``."""
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{name}: magnitude must lie in [0, 1], got {value}")


def tensor_magnitude(name: str, magnitude: Tensor, x: Tensor, rows: int | None) -> Tensor:
    """A magnitude tensor checked (see ``Transform.check_magnitude``) and on ``x``'s device.

    A floating tensor keeps its dtype (float16 / bfloat16 widened to float32); an integer one (``torch.tensor(1)``,
    as the int ``1`` is taken) is read in the parameters' dtype; a bool or complex one is a TypeError.
    """
    if magnitude.dim() != 0 and (rows is None or tuple(magnitude.shape) != (rows,)):
        allowed = "a scalar" if rows is None else f"a scalar or one per output row, shape ({rows},)"
        raise ValueError(f"{name}: magnitude must be {allowed}, got shape {tuple(magnitude.shape)}")
    if not magnitude.is_floating_point():
        if magnitude.dtype == torch.bool or magnitude.is_complex():
            raise TypeError(f"{name}: magnitude must be a tensor of real numbers, got dtype {magnitude.dtype}")
        magnitude = magnitude.to(param_dtype(x))  # integers: the numbers they hold (0 or 1), as a Python int is
    # A value check on an accelerator would synchronise; it is done on CPU only.
    if magnitude.device.type == "cpu" and not torch.compiler.is_compiling():
        values = magnitude.detach().reshape(-1)
        bad = ~(torch.isfinite(values) & (values >= 0) & (values <= 1))
        if bool(bad.any()):
            check_unit_interval(name, float(values[bad][0]))
    elif magnitude.device != x.device:
        raise ValueError(f"{name}: magnitude is on {magnitude.device} but x is on {x.device}")
    return widened(magnitude).to(x.device)


def jsonable(value):
    """A constructor argument as JSON data: tensors, NumPy arrays and NumPy numbers become lists or Python numbers,
    tuples lists."""
    if isinstance(value, Tensor):
        return value.detach().cpu().tolist()
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):  # np.float32(0.5), np.int64(3), arrays
        return value.tolist()
    if isinstance(value, (tuple, list)):
        return [jsonable(v) for v in value]
    return value
