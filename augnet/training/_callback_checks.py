"""What :mod:`augnet.training.callbacks` checks and reads: the ``callbacks`` argument of :func:`fit`, a number that
must be positive, a log folder, the Augerino augmentations of a model, and the row of a run's last step."""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Iterable, Iterator, Mapping, Set
from pathlib import Path

import torch

from augnet._checks import folder_problem, is_real, number, user_path


def callback_list(callbacks, base: type) -> list:
    """``callbacks`` (``None``, one ``base`` instance, or a list, tuple, generator or other ordered iterable of them,
    read once) as a list; a TypeError naming ``callbacks`` for anything else (a set or a dict, whose order is not
    the hooks' order; a class for an instance), a ValueError for an instance given twice (its hooks would run
    twice at every event: a :class:`~augnet.training.PolicyLogger` would write every row twice)."""
    if callbacks is None:
        return []
    if isinstance(callbacks, base):
        return [callbacks]
    if isinstance(callbacks, (Set, Mapping)):
        raise TypeError(
            f"callbacks must be Callback instances, one or a list or tuple of them (in the order their hooks run), "
            f"got a {type(callbacks).__name__}: {callbacks!r}"
        )
    items = list(callbacks) if isinstance(callbacks, Iterable) and not isinstance(callbacks, (str, bytes)) else None
    if items is None:
        items = [callbacks]
    bad = [_named(c) for c in items if not isinstance(c, base)]
    if bad:
        classes = [c.__name__ for c in items if isinstance(c, type) and issubclass(c, base)]
        hint = f" (classes: pass instances, e.g. {classes[0]}())" if classes else ""
        raise TypeError(f"callbacks must be augnet.training.Callback instances, got {bad}{hint}")
    for i, c in enumerate(items):
        j = next((j for j in range(i) if items[j] is c), None)
        if j is not None:
            raise ValueError(
                f"callbacks holds the same {type(c).__name__} instance twice (items {j} and {i}): each of its hooks "
                "would run twice at every event; list it once"
            )
    return items


def _named(c) -> str:
    return f"the class {c.__name__}" if isinstance(c, type) else type(c).__name__


def positive(name: str, value) -> float:
    """``value`` as a float if it is a finite number > 0 (a 0-d tensor or array: the number it holds)."""
    value = number(name, value)  # a 0-d tensor or array: the number it holds
    if not is_real(value):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}: {value!r}")
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be positive and finite, got {value}")
    return value


def usable_log_dir(log_dir) -> Path:
    """``log_dir`` as a Path, refused (ValueError) when it cannot be a folder for the logs; nothing is created."""
    folder = user_path(log_dir, "log_dir")  # "~/runs" the home folder
    problem = folder_problem(folder, "log_dir", "log folder")
    if problem is not None:
        raise ValueError(f"PolicyLogger: {problem}")
    return folder


def lie_augmentations(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The model's Augerino augmentations (:class:`~augnet.augerino.LieAugmentation`)."""
    from augnet.augerino import LieAugmentation

    return [m for m in model.modules() if isinstance(m, LieAugmentation)]


def step_point(state) -> tuple:
    """What a row of the step just taken reads from ``state`` besides the model's parameters: the step, its epoch,
    its ``lam`` and its layers' temperatures (which a hook may change before the run's last row is written)."""
    return state.step, state.epoch, state.lam, [layer.temperature for layer in state.layers]


@contextlib.contextmanager
def as_at_step(state, point: tuple | None) -> Iterator:
    """``state`` as it was at the end of its last step (``point``, from :func:`step_point`, if of that step): a run
    that stops between epochs (in ``on_epoch_start``, or loading the next epoch's first batch) has moved on to the
    next epoch, its ``lam`` and (``TemperatureAnnealing``) its temperature. The layers' temperatures are put back
    after."""
    if point is None or point[0] != state.step:
        yield state
        return
    _, epoch, lam, temperatures = point
    if (epoch, lam) != (state.epoch, state.lam):
        state = dataclasses.replace(state, epoch=epoch, lam=lam)
    now = [layer.temperature for layer in state.layers]
    try:
        for layer, t in zip(state.layers, temperatures, strict=True):
            layer.temperature = t
        yield state
    finally:
        for layer, t in zip(state.layers, now, strict=True):
            layer.temperature = t


def warn_no_layers(callback, state, what: str) -> None:
    """Warn that ``callback`` (a selection schedule) changes nothing: the model has no augmentation layers."""
    if state.layers:
        return
    import warnings

    from augnet._stack import caller_stacklevel

    warnings.warn(
        f"{type(callback).__name__}: {type(state.model).__name__} has no augmentation layers (augnet.AugmentationLayer)"
        f", so {what}: it changes nothing in this run",
        UserWarning,
        stacklevel=caller_stacklevel(("augnet.",)),
    )
