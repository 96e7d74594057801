"""What a transform's rank error says about reshaping: the common layouts one dimension or two short of a batch.

A transform takes a batch: images :math:`(B, Ch, H, W)`, signals :math:`(B, Ch, T)`, spectrograms
:math:`(B, F, T)`. What users pass instead is mostly one of these without a dimension: mono audio or
single-channel signals :math:`(B, T)` (no channel dimension), one image :math:`(Ch, H, W)` or one signal
:math:`(Ch, T)` (no batch dimension), or one grey image :math:`(H, W)` (neither). ``rank_hint`` names the call
that gives the batch for the rank given; it guesses nothing beyond what the rank says, and so names both
readings of an ambiguous rank (a (B, T) or a (Ch, T) signal). Only shapes are read.
"""

from __future__ import annotations

__all__ = ["rank_hint"]


def rank_hint(shape_doc: str, shape: tuple[int, ...]) -> str:
    """The hint appended to a transform's rank error: ``": for ... use x.unsqueeze(1); ..."``, or ``""``.

    Args:
        shape_doc: the layout the transform takes, as its error names it: ``"(B, Ch, H, W)"``, ``"(B, Ch, T)"``
            or another ``"(B, ...) name"`` (``"(B, F, T) spectrogram"``).
        shape: the shape of the input given.

    Returns:
        ``""`` when no common layout has that rank (more dimensions than taken, or several fewer).

    Examples:
        >>> rank_hint("(B, Ch, T)", (4, 16000))
        ': for mono audio or single-channel signals (B, T) use x.unsqueeze(1), giving (B, 1, T); for one signal (Ch, T), x.unsqueeze(0), a batch of one'
        >>> rank_hint("(B, Ch, H, W)", (28, 28))
        ': for one single-channel image (H, W) use x[None, None], giving (1, 1, H, W)'
        >>> rank_hint("(B, Ch, H, W)", (2, 3, 3, 8, 8))
        ''
    """  # noqa: E501
    dims = shape_doc[1 : shape_doc.index(")")].split(", ")
    name = shape_doc[shape_doc.index(")") + 1 :].strip()
    missing = len(dims) - len(shape)
    if dims == ["B", "Ch", "H", "W"]:
        hints = {
            1: ["for one image (Ch, H, W) use x.unsqueeze(0), a batch of one",
                "for single-channel images (B, H, W), x.unsqueeze(1), giving (B, 1, H, W)"],
            2: ["for one single-channel image (H, W) use x[None, None], giving (1, 1, H, W)"],
        }  # fmt: skip
    elif dims == ["B", "Ch", "T"]:
        hints = {
            1: ["for mono audio or single-channel signals (B, T) use x.unsqueeze(1), giving (B, 1, T)",
                "for one signal (Ch, T), x.unsqueeze(0), a batch of one"],
            2: ["for one mono signal (T,) use x[None, None], giving (1, 1, T)"],
        }  # fmt: skip
    else:  # another layout: only the batch dimension is known
        one = f"one {name} ({', '.join(dims[1:])})" if name else f"one input ({', '.join(dims[1:])})"
        hints = {1: [f"for {one} use x.unsqueeze(0), a batch of one"]} if dims[0] == "B" else {}
    return ": " + "; ".join(hints[missing]) if missing in hints else ""
