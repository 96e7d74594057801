"""Argument checks shared across augnet's modules."""

from __future__ import annotations

import numbers

__all__ = ["is_int"]


def is_int(value) -> bool:
    """Whether ``value`` is an integer: a Python or NumPy integer, not a ``bool``.

    ``True`` is an ``int`` to Python, but a flag passed where a count, a size or a seed is
    expected is a mistake to report, not ``1``.
    """
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)
