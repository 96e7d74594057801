"""Argument checks shared across augnet's modules, and the guard that keeps a failed state load from changing one."""

from __future__ import annotations

import math
import numbers
import os
import sys
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path

__all__ = [
    "MAX_THREADS", "NotANumberError", "array_number", "as_values", "check_bool", "folder_problem", "is_int",
    "is_real", "loading_or_kept", "number", "positive", "real", "sizes",
]  # fmt: skip


#: The most CPU threads a setting takes: ``torch.set_num_threads`` takes a C int, and a count it takes but cannot
#: start (2**31 - 1) ends the process in libgomp's "Out of memory" at the first parallel operation; no machine needs
#: more threads than this.
MAX_THREADS = 4096


class NotANumberError(TypeError, ValueError):
    """A value given where a number belongs that is not one: a string, ``None``, a bool, a complex number, a tensor
    or an array of more than one value.

    A TypeError (what the value is), and a ValueError too: augnet raised a ValueError for these before, and code
    that catches it (``except ValueError``) keeps catching them.
    """


def is_int(value) -> bool:
    """Whether ``value`` is an integer: a Python or NumPy integer, not a ``bool``.

    ``True`` is an ``int`` to Python, but a flag passed where a count, a size or a seed is
    expected is a mistake to report, not ``1``.
    """
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_real(value) -> bool:
    """Whether ``value`` is a real number: a Python or NumPy int or float, not a ``bool``.

    NumPy's scalars (``np.float32(0.5)``, what an array's element or a config read with NumPy gives) are
    numbers to every argument that takes one; store them with ``float(value)``.
    """
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def number(name: str, value):
    """``value`` with a 0-d tensor or a 0-d NumPy array read as the Python number it holds; anything else as given.

    What the constructors' arguments that take one number read their values through (a transform's range, a
    layer's temperature, a count such as ``AugNet``'s copies), before their own checks. A 0-d tensor on any
    device that holds values gives its ``.item()`` (a tensor on an accelerator waits for the device once, which is
    fine for an argument read once, at construction, and the result keeps no tensor): a Python ``float`` of a
    floating tensor, an ``int`` of an integer one (so a count takes ``torch.tensor(4)``, and refuses
    ``torch.tensor(4.0)`` as it refuses ``4.0``), a ``bool`` of a bool one and a ``complex`` of a complex one,
    which the caller's check then refuses as it refuses ``True`` or ``1j`` (:func:`is_real`, :func:`is_int`). A
    0-d array gives its ``.item()`` alike. Other values (a tensor or an array of several values, a NumPy scalar,
    which is a number already) come back as they were, for the caller's type check to take or refuse.

    Beside :func:`as_values`: both give the values a tensor or an array holds, in Python's types, and both refuse
    a tensor on ``meta`` with the same ValueError; they differ in shape (see there).

    Raises:
        ValueError: a 0-d tensor on ``meta``, which holds no value (naming ``name``).
    """
    torch, np = sys.modules.get("torch"), sys.modules.get("numpy")  # neither imported: the value is neither
    if torch is not None and isinstance(value, torch.Tensor):
        if value.dim() != 0:
            return value
        if value.device.type == "meta":
            raise ValueError(f"{name} is a tensor on meta, which holds no value: give a number")
        return value.item()
    if np is not None and isinstance(value, np.ndarray) and value.ndim == 0:
        return value.item()
    return value


def array_number(value):
    """``value`` with a 0-d NumPy array read as the Python number it holds (``.item()``); anything else as given.

    :func:`number` without its reading of tensors: for arguments that take a tensor as a tensor (a transform's
    magnitude keeps its gradient) and a 0-d array as the number it holds, as a NumPy scalar is (a 0-d float32
    array gives the Python float ``float(np.float32(v))`` gives). A 0-d bool, complex or string array gives a
    ``bool``, a ``complex`` or a ``str``, for the caller's :func:`is_real` to refuse.
    """
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, np.ndarray) and value.ndim == 0:
        return value.item()
    return value


def sizes(name: str, value, what: str | None = None) -> tuple[int, ...]:
    """``value``, sizes, as a tuple of Python ints >= 1: a sequence of ints (a tuple, a list, a ``torch.Size``) or
    a 1-D integer tensor or NumPy array; an item may be a 0-d integer tensor or array, read as the int it holds
    (:func:`number`). An empty sequence gives ``()``: the caller checks how many sizes it needs. ``what`` names
    the kind of sizes in the messages (``"a spatial size"``: ":func:`augnet.policy.check_size`'s words).

    Raises:
        TypeError: not such a sequence (a string, a number, a mapping, a float or bool tensor, a 2-D one), or an
            item that is not an int (a bool, a float), naming ``name`` and the value.
        ValueError: an item below 1, or a tensor on ``meta`` (which holds no values).
    """
    seq = "a sequence of ints" if what is None else f"{what} (a sequence of ints)"
    items = value
    if hasattr(value, "tolist") and hasattr(value, "shape"):  # a tensor or an array: its values, when 1-D integers
        dtype = str(getattr(value, "dtype", ""))
        if len(value.shape) != 1 or "int" not in dtype:  # (torch.int64, uint8, np.int32...; not bool, float)
            kind = "a sequence of ints (a 1-D integer tensor or array)" if what is None else f"{what} (1-D integers)"
            raise TypeError(f"{name} must be {kind}, got a {type(value).__name__} of shape {tuple(value.shape)} "
                            f"and dtype {dtype}")  # fmt: skip
        items = as_values(value, name)
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise TypeError(f"{name} must be {seq}, got {type(value).__name__}: {value!r}")
    read = [number(name, item) for item in items]  # (torch.tensor(32), 32): the ints they hold
    if not all(is_int(item) for item in read):
        raise TypeError(f"{name} must be {seq}, got {value!r}")
    if any(item < 1 for item in read):
        below = "hold sizes >= 1" if what is None else f"be a non-empty {what.removeprefix('a ')} of ints >= 1"
        raise ValueError(f"{name} must {below}, got {value!r}")
    return tuple(int(item) for item in read)


def real(name: str, value, what: str = "a number"):
    """``value`` read with :func:`number` (a 0-d tensor or array: the number it holds), if it is a real number
    (:func:`is_real`: an int or a float, a NumPy one too), as read: an int stays an int, for the caller's own
    checks of its kind and range.

    What every argument that takes one number reads it through first, so that anything that is not a number
    (a string, ``None``, a bool, a complex number, a list, a tensor or an array of several values) is refused
    alike, with the :class:`NotANumberError` ``"{name} must be {what}, got {value!r}"``.

    Raises:
        NotANumberError: ``value`` is not a number (a TypeError and a ValueError), naming ``name``.
        ValueError: a 0-d tensor on ``meta`` (see :func:`number`).
    """
    read = number(name, value)
    if not is_real(read):
        raise NotANumberError(f"{name} must be {what}, got {value!r}")
    return read


def positive(name: str, value) -> float:
    """``value`` as a float: a real number (see :func:`real`; a 0-d tensor or array too, see :func:`number`)
    that is positive and finite.

    Raises:
        NotANumberError: ``value`` is not a number (a TypeError and a ValueError), naming ``name``.
        ValueError: a number that is not positive and finite, naming ``name``.
    """
    read = real(name, value, "a positive finite number")
    try:
        finite = math.isfinite(read)
    except OverflowError:  # an int past float's range (10**400): no float holds it
        raise ValueError(f"{name} must be a positive finite number, got an int of {read.bit_length()} bits, past "
                         "a float's range") from None  # fmt: skip
    if not finite or read <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {read!r}")
    return float(read)


def as_values(value, name: str | None = None):
    """A tensor's or a NumPy array's (or scalar's) values as Python numbers or lists (``.tolist()``); anything
    else as given. Arguments that take numbers or sequences of them read arrays and tensors through it, and then
    check the values as they check a list (an item of a list given as is, a 0-d tensor among numbers, is read with
    :func:`number`).

    Where it differs from :func:`number`, and why: :func:`number` reads one value (an argument that takes a
    number), so it reads 0-d tensors and arrays only, and gives a tensor of several values back as it was, for
    the caller to refuse as not a number; this reads any shape (an argument that takes a sequence: a (Q,) tensor
    of magnitudes is a list of Q numbers) and reads NumPy scalars too. Otherwise they read alike: a bool or a
    complex tensor gives Python bools or complex numbers, refused by the caller's :func:`is_real` as ``True`` is,
    and a tensor on ``meta`` holds no values and is refused, with the ValueError naming ``name`` (``"value"``
    when not given; torch's own ``NotImplementedError`` named nothing).

    Raises:
        ValueError: a tensor on ``meta``.
    """
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor) and value.device.type == "meta":
        raise ValueError(f"{name or 'value'} is a tensor on meta, which holds no values: give numbers")
    return value.tolist() if hasattr(value, "tolist") and not isinstance(value, (str, bytes)) else value


def check_bool(name: str, value) -> bool:
    """``value`` if it is a bool, else the TypeError naming ``name`` (a flag: 1, "no" or None is not one)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return value


def folder_problem(path: str | os.PathLike, name: str, kind: str = "folder") -> str | None:
    """Why the folder ``path`` cannot hold files written there (``None`` when it can), checked without creating it.

    ``name`` and ``kind`` say what it is in the message (``"--out"``, ``"output folder"``). The folder itself
    may not exist yet (it is made when the first file is written): then the nearest folder above it that exists
    must be writable. ``os.access`` says yes to root everywhere and knows nothing of read-only or special file
    systems (``/proc``), so a temporary file is made there and removed.
    """
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        return f"{name} {path} is an existing file, not a folder"
    existing = folder
    while not existing.exists() and existing != existing.parent:  # the nearest folder that exists
        existing = existing.parent
    if not existing.is_dir():
        return f"cannot create the {kind} {name} {path}: {existing} is a file, not a folder"
    unwritable = not os.access(existing, os.W_OK | os.X_OK)
    if not unwritable:
        import tempfile

        try:
            with tempfile.TemporaryFile(dir=existing):
                pass
        except OSError:
            unwritable = True
    if unwritable:
        if existing == folder:
            return f"the {kind} {name} {path} is not writable"
        return f"cannot create the {kind} {name} {path}: {existing} is not writable"
    return None


@contextmanager
def loading_or_kept(module, strict: bool, missing: list, unexpected: list, errors: list):
    """Around a module's ``_load_from_state_dict``: if loading its own keys fails, put the module back as it was.

    PyTorch copies a module's tensors one by one and reports the keys that failed once every module has been
    loaded; this puts back the module's own parameters and buffers (values and tensors: a buffer that loading
    made, replaced or removed too) and its extra state when its part of the load failed: a shape that does not
    fit, an error of ``set_extra_state``, or (``strict``) a key of its own missing or unexpected. For a module
    with its own ``get_extra_state`` / ``set_extra_state``.
    """
    import torch

    own = [(table, name, t, None if t is None else t.detach().clone())
           for table in (module._parameters, module._buffers) for name, t in table.items()]  # fmt: skip
    extra = module.get_extra_state()
    counts = len(missing), len(unexpected), len(errors)

    def put_back() -> None:
        with torch.no_grad():
            for table, name, t, kept in own:
                table[name] = t
                if t is not None:
                    t.copy_(kept)
        module.set_extra_state(extra)

    try:
        yield
    except BaseException:
        put_back()
        raise
    if len(errors) > counts[2] or (strict and (len(missing), len(unexpected)) != counts[:2]):
        put_back()


def user_path(path, name: str = "path") -> Path:
    """``path`` (a str or a path-like object) as a :class:`~pathlib.Path`, a leading ``~`` the home folder (as a
    shell reads it; pathlib made a folder named ``~`` in the working directory), else the TypeError naming
    ``name`` (pathlib's named no argument). Every path augnet writes or reads from a user's call goes through it."""
    if not isinstance(path, (str, os.PathLike)) or isinstance(os.fspath(path), bytes):
        raise TypeError(f"{name} must be a str or a path-like object, got {type(path).__name__}: {path!r:.80}")
    try:
        return Path(path).expanduser()
    except RuntimeError:  # no home folder known: the path as given
        return Path(path)
