"""Checks of the transforms' constructor ranges: angles in radians, factors and blends in their meaning, float32.

The transforms draw their parameters in float32, so a range float32 cannot hold (beyond about 3.4e38, or below
its smallest normal number, 1.2e-38) gave infinite or NaN parameters, or draws of 0 (a transform that never
acts): ``drawn_range`` refuses it at construction. Angles are in radians; a value above a full turn
(``2 * pi``) is almost surely meant in degrees, and ``angle`` warns about it (a rotation by ``a + 2 * pi``
is the rotation by ``a``, so no range above a full turn draws anything a full turn does not), but not when
augnet rebuilds a transform from a saved policy: the value was warned about when the transform was made.
``at_most_one`` refuses a range whose parameter would leave its meaning at magnitude 1 (a contrast or
saturation factor below 0, a blend weight above 1). ``moving_end`` says which end of a range the magnitude
moves (what the policy log and the per-instance summary report).
"""

from __future__ import annotations

import math
import sys
import warnings

from augnet._stack import caller_stacklevel
from augnet.transforms.base import in_float32, positive

__all__ = ["FULL_TURN", "angle", "at_most_one", "drawn_range", "moving_end"]

#: The modules that rebuild transforms from a saved policy's constructor arguments (``from_policy``,
#: ``Policy.load`` / ``from_json``, the exporters): they restore a value, which ``angle`` does not warn about.
REBUILDERS = ("augnet.policy", "augnet.export")

#: A full turn in radians: an angle range above it is taken for one given in degrees (see ``angle``).
FULL_TURN = 2 * math.pi


def drawn_range(name: str, value, why: str = "the parameters are drawn in float32") -> float:
    """``value`` as a float, or the ValueError naming ``name`` unless it is positive and within float32's range."""
    return in_float32(name, positive(name, value), why)


def angle(owner: str, name: str, value) -> float:
    """An angle range in radians as a float (see ``drawn_range``), with a UserWarning above a full turn.

    Args:
        owner: the class the argument belongs to, named in the warning.
        name: the argument's name.
        value: the angle in radians.

    Returns:
        ``value`` as a float.

    Warns:
        UserWarning: ``value`` is above ``2 * pi`` (the value is most likely in degrees); it names the class, the
            argument, the value in radians and in degrees, and the value ``math.radians(value)`` gives. It points
            at the first caller outside augnet, so Python's default filter shows it once per calling line and
            value. A transform rebuilt from a saved policy (built by a module of ``REBUILDERS``) does not
            warn again, nor do copies (``copy.deepcopy``, pickling, ``load_state_dict``: they do not run the
            constructor).

    Raises:
        ValueError: a ``value`` that is not a positive number within float32's range.
    """
    value = drawn_range(name, value, "the angles are drawn in float32")
    if value > FULL_TURN and not _rebuilt():
        given = f"{value:g}" if float(f"{value:g}") == value else repr(value)  # 30, not 30.0; every digit kept
        warnings.warn(
            f"{owner}({name}={given}): {name} is in radians, and {given} rad is {math.degrees(value):.6g} "
            f"degrees, more than a full turn (2*pi = {FULL_TURN:.4f} rad): if you meant {given} degrees, "
            f"pass {name}=math.radians({given}) (= {math.radians(value):.6g} rad)",
            UserWarning,
            stacklevel=caller_stacklevel(("augnet.",)),
        )
    return value


def at_most_one(name: str, value, why: str) -> float:
    """``value`` as a float in (0, 1] (see ``drawn_range``), or the ValueError naming it, its range and ``why``."""
    value = positive(name, value)
    if value > 1.0:
        raise ValueError(f"{name} must lie in (0, 1], got {value!r}: {why}")
    return in_float32(name, value)


def _rebuilt() -> bool:
    """Whether the transform being made is rebuilt from a saved policy: whether the first frame outside the
    transforms' own constructors (a subclass's ``__init__`` calls its base's) is in a module of ``REBUILDERS``."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__", "").startswith("augnet.transforms"):
        frame = frame.f_back
    return frame is not None and frame.f_globals.get("__name__", "").startswith(REBUILDERS)


def moving_end(transform, size: tuple[int, ...] | None = None) -> int:
    """Which end of ``transform``'s natural range moves with the magnitude: 1 (``high``), or 0 (``low``) when the
    upper end is the same at magnitudes 0 and 1 and the lower end is not (a low-pass cut-off, an SNR, a
    threshold). A range with no end that moves gives 1."""
    r0, r1 = transform.natural_range(0.0, size), transform.natural_range(1.0, size)
    return 0 if r0.high == r1.high and r0.low != r1.low else 1
