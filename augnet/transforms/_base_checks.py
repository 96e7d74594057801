"""Checks of the transforms' base (:mod:`augnet.transforms.base`): magnitudes, float32 ranges, temperatures.

Kept apart from ``base`` for room; ``base`` imports every name here, and the transform modules import them
from there.
"""

from __future__ import annotations

import functools
import math

import torch
from torch import Tensor

from augnet._checks import NotANumberError, is_real, number, positive, sizes
from augnet.magnitudes import widened

__all__ = [
    "check_temperature", "checked_natural_range", "digits_apart", "foreign_rows", "in_float32", "jsonable",
    "misshapen_param", "param_dtype", "param_rows", "range_magnitude", "range_size", "shape_checked",
    "shown_number", "tensor_magnitude",
]  # fmt: skip


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


def range_magnitude(name: str, magnitude) -> float:
    """``natural_range``'s ``magnitude`` as a Python float, or the error naming ``name`` and the value.

    A number in [0, 1]: a Python or NumPy int or float, a 0-d (or one-element) tensor or a 0-d array, read as the
    number it holds (``float(magnitude)``, as every transform's ``natural_range`` read it). A magnitude tensor of
    several values (per-row magnitudes) has no one range.

    Raises:
        NotANumberError: not a number (a string, a bool, ``None``, a list, a bool or complex tensor, a tensor of
            several values), a TypeError and a ValueError.
        ValueError: NaN, infinite or outside [0, 1]; a tensor on ``meta``.
    """
    value = magnitude
    if isinstance(value, Tensor):
        if value.numel() != 1:
            raise NotANumberError(f"{name}: magnitude must be one number in [0, 1] (a 0-d tensor), got a tensor of "
                                  f"shape {tuple(value.shape)}")  # fmt: skip
        value = value.reshape(())
    value = number(f"{name}: magnitude", value)  # a 0-d tensor or array: the number it holds
    if not is_real(value):
        raise NotANumberError(f"{name}: magnitude must be a number in [0, 1] (a float, a 0-d tensor or array), "
                              f"got {magnitude!r}")  # fmt: skip
    if not 0 <= value <= 1:  # (NaN too; compared before float(): an int of 400 digits is no OverflowError)
        raise ValueError(f"{name}: magnitude must lie in [0, 1], got {shown_number(value)}")
    return float(value)


def shown_number(value) -> str:
    """A real number for a message: ``str(value)``, but an int that float() cannot hold (whose ``str()`` may be
    thousands of digits, or refused past Python's limit) as its size in bits."""
    if isinstance(value, int):
        try:
            float(value)
        except OverflowError:
            return f"an int of {value.bit_length()} bits"
    return str(value)


def range_size(name: str, size, transform) -> tuple[int, ...] | None:
    """``natural_range``'s ``size`` as a tuple of ints (``None`` as given), or the error naming ``name`` and it.

    The input's sizes after its first two dimensions (an image's ``(H, W)``, a signal's ``(T,)``; see
    :func:`~augnet._checks.sizes` for the types taken): at least ``transform.input_ndim - 2`` of them (the
    image transforms read the last two, a pixel range the height or the width), more allowed (a larger
    size's last ones are read).
    """
    if size is None:
        return None
    read = sizes(f"{name}: size", size)
    need = max(transform.input_ndim - 2, 0)
    if len(read) < need:
        dims = transform._shape_doc().partition(")")[0].strip("(").split(", ")  # "(B, Ch, H, W)": H, W
        named = f" ({', '.join(dims[2:])}{',' * (need == 1)})" if len(dims) == transform.input_ndim else ""
        what = "size" if need == 1 else f"{need} sizes"
        raise ValueError(f"{name}: size must hold the input's last {what}{named}, got {size!r}")
    return read


#: ``size`` not given to ``natural_range``: the subclass's own default is left to apply.
_NOT_GIVEN = object()


def checked_natural_range(fn):
    """A transform's ``natural_range(self, magnitude, size=None)`` that checks its arguments first.

    ``Transform.__init_subclass__`` wraps each subclass's own with it: ``fn`` gets ``magnitude`` as a float
    (:func:`range_magnitude`) and ``size``, when given, as a tuple of ints (:func:`range_size`), so a string, a
    bool, NaN or a magnitude outside [0, 1], or a size without the sizes the transform reads, is an error naming
    the argument, where it gave a range or a raw ``TypeError`` / ``IndexError``.
    """
    if getattr(fn, "_checks_arguments", False):
        return fn

    @functools.wraps(fn)
    def natural_range(self, magnitude, size=_NOT_GIVEN):
        name = f"{type(self).__name__}.natural_range"
        value = range_magnitude(name, magnitude)
        if size is _NOT_GIVEN:
            return fn(self, value)
        return fn(self, value, range_size(name, size, self))

    natural_range._checks_arguments = True
    return natural_range


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


def digits_apart(low: float, high: float, least: int = 3) -> int:
    """The significant digits (``least`` or more, up to 17) at which ``low`` and ``high`` print differently.

    ``Range.__str__`` prints its bounds with them: at 3 digits a narrow range read as none (``Contrast`` at
    magnitude 1e-4 printed ``[1, 1] factor``). Bounds that are equal, or differ at ``least`` digits, take ``least``.
    """
    digits = least
    while digits < 17 and low != high and f"{low:.{digits}g}" == f"{high:.{digits}g}":
        digits += 1
    return digits


def param_rows(params: dict[str, Tensor], name: str = "Transform") -> int:
    """The rows ``params`` were drawn for (those of its first tensor), or the error saying why they are not params."""
    if not isinstance(params, dict):
        raise TypeError(f"{name}: params must be a dict of tensors (as sample() returns), got {type(params).__name__}")
    first = next(iter(params.values()), None)  # (an empty dict: not a StopIteration, which a caller's loop would eat)
    if not isinstance(first, Tensor) or first.dim() == 0:
        what = "an empty dict" if not params else f"{type(first).__name__} as its first entry"
        raise ValueError(f"{name}: params must be a dict of per-row tensors (as sample() returns), got {what}")
    return first.shape[0]


def foreign_rows(n: int, b: int, name: str = "") -> str:
    """Why params drawn for ``n`` rows cannot be applied to a batch of ``b`` (``n`` not a multiple of ``b``)."""
    return (f"{name + ': ' if name else ''}params are for {n} rows, not a multiple of the batch's {b} rows: apply "
            "params to the batch they were drawn for (B * copies rows, copy-major)")  # fmt: skip


def misshapen_param(transform, x: Tensor, params: dict[str, Tensor]) -> str | None:
    """Why ``params`` cannot be applied to ``x``: an entry of another shape than ``transform.sample`` gives for
    this batch and these rows (None when every entry has its shape, or the shapes cannot be drawn).

    Draws with a generator of its own (the caller's random state is left as it was); compares shapes only.
    """
    name = type(transform).__name__
    try:
        n, b = param_rows(params, name), x.shape[0]
        if b == 0 or n % b:
            return None
        with torch.no_grad():
            drawn = transform.sample(x, 0.5, generator=torch.Generator(x.device).manual_seed(0), copies=n // b)
    except Exception:  # no shapes to compare: the caller's own error stands
        return None
    for key, given in params.items():
        want = drawn.get(key) if isinstance(drawn, dict) else None
        if isinstance(given, Tensor) and isinstance(want, Tensor) and given.shape != want.shape:
            return (f"{name}: params[{key!r}] has shape {tuple(given.shape)}, but {name}.sample gives shape "
                    f"{tuple(want.shape)} for x of shape {tuple(x.shape)} with copies={n // b}: pass the params "
                    "that sample() or draw_params() drew for this batch")  # fmt: skip
    return None


def shape_checked(fn):
    """A transform's ``apply_transform(self, x, params)`` that names a params entry of another shape than
    ``sample`` gives (:func:`misshapen_param`), where it raised a raw torch error ("stack expects each tensor
    to be equal size", "too many values to unpack") or returned rows of another rank.

    ``Transform.__init_subclass__`` wraps each subclass's own with it. Shapes are compared only after a call
    failed or returned another rank than ``x``'s: a call that works costs nothing more.
    """
    if getattr(fn, "_checks_param_shapes", False):
        return fn

    @functools.wraps(fn)
    def apply_transform(self, x, params):
        if torch.compiler.is_compiling():
            return fn(self, x, params)
        name = type(self).__name__
        try:
            out = fn(self, x, params)
        except (RuntimeError, ValueError, TypeError, IndexError) as err:
            said = str(err)  # augnet's own named errors stand (another channel count, aspect, rows); taps' do not
            if isinstance(err, (ValueError, TypeError)) and said.startswith(f"{name}: ") and "Taps." not in said:
                raise
            why = misshapen_param(self, x, params)
            if why is None:
                raise
            raise ValueError(why) from err
        if isinstance(out, Tensor) and isinstance(x, Tensor) and out.dim() != x.dim():
            why = misshapen_param(self, x, params)
            if why is not None:
                raise ValueError(why)
        return out

    apply_transform._checks_param_shapes = True
    return apply_transform
