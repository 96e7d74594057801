"""Strict JSON for the files augnet writes: no bare ``NaN`` or ``Infinity`` tokens, which strict readers refuse."""

from __future__ import annotations

import json
import math

__all__ = ["dumps", "strict"]


def strict(value, default=None):
    """``value`` with its floats made strict JSON: NaN as ``None``, an infinity as ``"inf"`` / ``"-inf"``.

    Policy files write an unbounded range end the same way (``"inf"``), and read it back. ``default``, as
    :func:`json.dumps`' own, turns what JSON has no form for (a tensor) into what it has, made strict in turn.

    Examples:
        >>> strict({"a": [1.0, float("nan"), float("-inf")]})
        {'a': [1.0, None, '-inf']}
    """
    if isinstance(value, float):
        if math.isnan(value):
            return None
        return ("inf" if value > 0 else "-inf") if math.isinf(value) else value
    if isinstance(value, dict):
        return {k: strict(v, default) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict(v, default) for v in value]
    if default is not None and not isinstance(value, (str, int, bool, type(None))):
        return strict(default(value), default)
    return value


def dumps(value, default=None, indent: int | None = 1) -> str:
    """``value`` as strict JSON text (:func:`strict`, then ``json.dumps`` refusing any NaN left)."""
    return json.dumps(strict(value, default), indent=indent, allow_nan=False)
