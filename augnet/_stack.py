"""Where a warning should point: the first frame of the caller's code, outside the given modules."""

from __future__ import annotations

import sys


def caller_stacklevel(inside: tuple[str, ...], also: tuple[str, ...] = ()) -> int:
    """The ``stacklevel`` for ``warnings.warn`` called here of the first frame outside ``inside``.

    Args:
        inside: module-name prefixes of the library's own frames (e.g. ``("augnet.export",)``).
        also: exact module names to skip as well (e.g. ``("contextlib",)``).

    Returns:
        The level, counted from the function that calls this one (1: that function's own line);
        1 when every frame is inside.
    """
    frame, level = sys._getframe(1), 1
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if not (name.startswith(inside) or name in also):
            return level
        frame, level = frame.f_back, level + 1
    return 1


#: ``caller_stacklevel(*PROBES)``: the probes' frames, and the torch, loss and context-manager frames they run in.
PROBES = (("augnet.probes", "torch."), ("augnet.losses", "contextlib"))
