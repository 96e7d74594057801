"""The check of a copy count given at call time: ``copies`` of a transform's, a layer's or a model's forward,
``aggregate``, ``stratified_copies`` (and, through ``AugNet``'s constructor, its counts).

A Python or NumPy integer, the ordinary argument, takes the one path it always took: a type check and a
comparison, no tensor touched, so a forward on an accelerator gains no synchronisation and ``torch.compile``
traces it as before (an int it specialises on). Anything else is read as the constructors read a count
(:func:`augnet._checks.number`): a 0-d integer tensor or array gives the int it holds, with one ``.item()``
(on an accelerator, one wait for the device: pass an int where that matters, and under ``torch.compile``,
which cannot read a tensor's value into a shape without a graph break); a float or a bool one is refused as
``2.0`` or ``True`` is.
"""

from __future__ import annotations

import torch

from augnet._checks import NotANumberError, is_int, is_real, number

__all__ = ["check_copies"]


def check_copies(copies, name: str = "copies") -> int:
    """``copies`` as a Python int >= 1, or the error naming ``name``.

    Args:
        copies: the count: a Python or NumPy int (checked by type alone), or a 0-d integer tensor or array (read
            once, see the module's docstring).
        name: what the messages call it.

    Returns:
        The count, a Python ``int``.

    Raises:
        NotANumberError: not a number at all (a string, ``None``, a bool, a bool or complex tensor, a tensor of
            several values): a TypeError, and a ValueError too, as every argument that takes a number raises.
        TypeError: a number that is not an int (``2.0``, a 0-d float tensor).
        ValueError: an int below 1, or a 0-d tensor on ``meta`` (no value to read).
    """
    if not is_int(copies):  # the ordinary path skips this: an int is checked by its type alone
        copies = _read(copies, name)
    if copies < 1:
        raise ValueError(f"{name} must be >= 1, got {copies}")
    return int(copies)


def _read(copies, name: str) -> int:
    """The int a count that is not a Python or NumPy int holds (a 0-d integer tensor or array), or the error."""
    read = number(name, copies)
    if is_int(read):
        return read
    what = type(copies).__name__
    if isinstance(copies, torch.Tensor) or what == "ndarray":  # its dtype and shape say why
        what = f"a {what} of dtype {copies.dtype} and shape {tuple(copies.shape)}"
    raise (TypeError if is_real(read) else NotANumberError)(f"{name} must be an int, got {what}")
