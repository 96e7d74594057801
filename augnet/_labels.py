"""Class labels as every probe reads them, and ``augnet.instance_policy.policy_summary`` too; the rule for
integer labels that ``augnet.fit`` (and ``accuracy``) and ``augnet.experiments.compare`` follow as well.

One reader, so that the same labels in another form (int32 or int64, a NumPy array, a list, whole floats,
a (N, 1) column) give the same classes, hence the same per-class results, wherever labels are taken. One
rule for integer dtypes (:data:`INTEGER_DTYPES`, read as int64 by :func:`int64_labels`), so that the same
labels as int8, uint16 or int64 give the same run in the probes, in ``fit`` and in ``compare``: torch's
losses, ``F.one_hot`` and comparisons refuse most of them (``nll_loss`` takes int64 and uint8 targets only;
uint16, uint32 and uint64 cannot even be compared with int64). A bool tensor is a mask, not classes, and is
refused (fit's default loss refuses bool targets too). Whole floats are taken here, as a float array of labels
holds them; fractions are refused.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

__all__ = ["INTEGER_DTYPES", "class_labels", "host_int64_labels", "int64_labels", "labels_in_range"]


def _integer_dtypes() -> tuple[torch.dtype, ...]:
    names = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
    return tuple(d for d in (getattr(torch, n, None) for n in names) if isinstance(d, torch.dtype))


#: The integer dtypes class labels are taken in, each read as int64: int8, int16, int32, int64, uint8, and
#: uint16, uint32, uint64 where the installed torch has them (2.3 and later). Not bool (a mask).
INTEGER_DTYPES: tuple[torch.dtype, ...] = _integer_dtypes()
_WIDENED = frozenset(INTEGER_DTYPES) - {torch.int64}


def int64_labels(y: Tensor) -> Tensor:
    """``y`` as int64 if it is of another dtype of :data:`INTEGER_DTYPES`; else ``y`` itself (int64 labels, and
    tensors of any other dtype, such as a loss's float targets, for the caller to take or refuse).

    Reads the dtype alone: no value, so no synchronisation with an accelerator (``fit`` calls it on every
    batch). Values of uint64 labels of 2**63 and above wrap below 0, as ``.long()`` wraps them:
    :func:`labels_in_range` and :func:`host_int64_labels` say so where the values are read.

    Examples:
        >>> int64_labels(torch.tensor([0, 2], dtype=torch.uint16)).dtype
        torch.int64
    """
    return y.long() if y.dtype in _WIDENED else y


def host_int64_labels(y: Tensor, name: str) -> Tensor:
    """:func:`int64_labels`, and the ValueError of uint64 labels of 2**63 and above (which int64 cannot hold, and
    ``.long()`` wraps below 0, where -100 is a loss's ``ignore_index``: such a label would be skipped silently).

    Reads values only for uint64 labels held on the host, so no other dtype pays for it and nothing waits for an
    accelerator (uint64 labels on a GPU are widened unchecked, as :func:`int64_labels` widens them).

    Examples:
        >>> host_int64_labels(torch.tensor([2**63], dtype=torch.uint64), "y")
        Traceback (most recent call last):
            ...
        ValueError: y holds labels past int64's range (uint64 labels of 2**63 and above)
    """
    wide = int64_labels(y)
    if y.dtype == getattr(torch, "uint64", None) and y.device.type == "cpu" and len(wide) and bool((wide < 0).any()):
        raise ValueError(f"{name} holds labels past int64's range (uint64 labels of 2**63 and above)")
    return wide


def labels_in_range(labels: Tensor, given: torch.dtype, name: str, rule: str = "must hold class labels >= 0") -> None:
    """The ValueError of int64 ``labels`` (read from labels of dtype ``given``) that hold one below 0: a negative
    label (``"{name} {rule}, got -1"``), or a uint64 label of 2**63 or above, which int64 cannot hold. Reads the
    values (once: their minimum), so for labels on the host."""
    if len(labels):
        low = int(labels.min())
        if low < 0:
            if given == torch.uint64:  # values of 2**63 and above wrap below 0 in int64
                raise ValueError(f"{name} holds labels past int64's range (uint64 labels of 2**63 and above)")
            raise ValueError(f"{name} {rule}, got {low}")


_NAMES_HINT = "map names to integers first (e.g. numpy.unique(names, return_inverse=True)[1])"


def _looks_like_names(y) -> bool:
    kind = getattr(getattr(y, "dtype", None), "kind", None)
    if kind in ("U", "S"):
        return True
    items = y.tolist() if kind == "O" else y
    return isinstance(items, Sequence) and any(isinstance(v, (str, bytes)) for v in items)


def _past_int64(y) -> list[int]:
    """The Python ints of a list (or (N, 1) column) of labels that int64 cannot hold (torch's ``as_tensor``
    refused them with a bare overflow, read as labels that are not integers)."""
    items = [v for row in y for v in (row if isinstance(row, (list, tuple)) else [row])]
    ints = all(isinstance(v, int) and not isinstance(v, bool) for v in items)
    return [v for v in items if not -(2**63) <= v < 2**63] if ints else []


def _unreadable(y, name: str) -> TypeError | ValueError:
    if isinstance(y, (list, tuple)) and _past_int64(y):
        big = _past_int64(y)[0]
        if big < 0:
            return ValueError(f"{name} must hold class labels >= 0, got {big}")
        return ValueError(f"{name} holds labels past int64's range, up to {max(_past_int64(y))}")
    if hasattr(y, "dtype") and hasattr(y, "shape"):
        got = f"an array of {y.dtype}"
    elif isinstance(y, Sequence) and not isinstance(y, (str, bytes)):
        got = f"{list(y)[:8]!r}"
    else:
        got = f"{type(y).__name__} {y!r:.40}"
    hint = f": {_NAMES_HINT}" if isinstance(y, (str, bytes)) or _looks_like_names(y) else ""
    return TypeError(
        f"{name} must hold integer class labels (a tensor, a NumPy array or a sequence of ints), got {got}{hint}"
    )


def class_labels(y, n: int | None = None, name: str = "y") -> Tensor:
    """``y`` as (N,) int64 class labels >= 0 on the CPU, or the error naming ``name``.

    Taken: a tensor of any integer dtype, a NumPy integer array, a list or tuple of ints, and whole floats
    (``torch.tensor([0., 1., 2.])``: labels kept in a float array), each shaped (N,) or (N, 1). Refused,
    before any model runs: bool (a mask, not classes), complex, strings or other names (map them to
    integers first), fractions, NaN or inf, negative labels, labels past int64's range, any other shape
    (one-hot rows among them), and with ``n`` another number of labels than ``n``.

    A tensor on a GPU is read once, here (one copy to the host, before the model loops); the labels
    returned are on the CPU, where the per-class grouping reads them without further synchronisation.

    Args:
        y: the labels.
        n: the number of inputs they label; ``None``: any number (the caller compares it).
        name: what ``y`` is called in an error (``"y"``, ``"by_class"``, ``"labels of batch 3"``).

    Returns:
        (N,) int64 tensor on the CPU. An (N,) int64 CPU tensor ``y`` is not copied: the result shares its memory.

    Raises:
        TypeError: labels that are not numbers (strings, objects), bool or complex labels.
        ValueError: another shape or number of labels, fractions, NaN or inf, negative labels, labels past
            int64, labels on meta (no values).

    Shape:
        - y: :math:`(N,)` or :math:`(N, 1)`
        - Output: :math:`(N,)`

    Examples:
        >>> class_labels([[0], [2], [1]]).tolist(), class_labels(torch.tensor([0.0, 2.0]), 2).dtype
        ([0, 2, 1], torch.int64)
    """
    if isinstance(y, (str, bytes)):
        raise _unreadable(y, name)
    if not isinstance(y, Tensor):
        try:
            y = torch.as_tensor(y.tolist() if getattr(getattr(y, "dtype", None), "kind", None) == "O" else y)
        except (TypeError, ValueError, RuntimeError, OverflowError):  # torch's own messages name no argument
            raise _unreadable(y, name) from None
    if y.is_complex() or y.dtype == torch.bool:
        hint = " (a mask? class labels are integers: .long() if it holds two classes)" if y.dtype == torch.bool else ""
        raise TypeError(f"{name} must hold integer class labels, got dtype {y.dtype}{hint}")
    shape = tuple(y.shape)
    column = len(shape) == 2 and shape[1] == 1
    if not (len(shape) == 1 or column) or (n is not None and shape[0] != n):
        want = "N" if n is None else n
        hint = " (one-hot rows? pass their argmax(1))" if len(shape) == 2 and not column else ""
        if len(shape) == 2 and shape[0] == 1 < shape[1] and n in (None, shape[1]):  # labels given as one row
            hint = f" (one row of labels? pass y.reshape(-1){'' if n else '; one-hot rows? their argmax(1)'})"
        raise ValueError(f"{name} must have shape ({want},) or ({want}, 1), one label per input, got {shape}{hint}")
    if y.device.type == "meta":
        raise ValueError(f"{name} is on meta, which holds no values: class labels need them")
    y = y.detach().reshape(-1).cpu()
    if y.is_floating_point():
        whole = torch.isfinite(y) & (y == y.round())
        if not bool(whole.all()):
            raise ValueError(f"{name} must hold whole numbers (class labels), got {y[~whole][:5].tolist()}")
        if len(y) and float(y.max()) >= 2.0**63:  # .long() would wrap it
            raise ValueError(f"{name} holds labels past int64's range, up to {float(y.max()):g}")
        if len(y) and float(y.min()) < 0:
            raise ValueError(f"{name} must hold class labels >= 0, got {int(y.min())}")
    # The same tensor when y is int64 already; whole floats (checked above) are read as int64 too.
    labels = int64_labels(y) if y.dtype in INTEGER_DTYPES else y.long()
    labels_in_range(labels, y.dtype, name)
    return labels
