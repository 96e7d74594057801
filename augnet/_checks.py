"""Argument checks shared across augnet's modules."""

from __future__ import annotations

import numbers

__all__ = ["is_int", "is_real"]


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
