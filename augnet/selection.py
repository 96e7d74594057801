"""Deprecated: the selection schedules moved to :mod:`augnet.training` (``augnet.training.callbacks``).

``from augnet.selection import TemperatureAnnealing`` keeps working for one
release, with a :class:`DeprecationWarning`; write
``from augnet.training import TemperatureAnnealing`` instead. (The selection
*experiment* is :mod:`augnet.experiments.selection`.)
"""

from __future__ import annotations

import warnings

__all__ = ["TemperatureAnnealing", "WeightWarmup"]  # noqa: F822 (served by __getattr__)

_MOVED = {"TemperatureAnnealing", "WeightWarmup"}


def __getattr__(name: str):
    if name in _MOVED:
        warnings.warn(
            f"augnet.selection.{name} moved to augnet.training.{name}; the old path will be removed in the next "
            "release",
            DeprecationWarning,
            stacklevel=2,
        )
        from augnet.training import callbacks

        return getattr(callbacks, name)
    raise AttributeError(f"module 'augnet.selection' has no attribute {name!r}")
