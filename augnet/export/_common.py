"""What both exporters share: the export of one transform, the reasons an export is approximate, policy checks."""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch import nn

from augnet._policy_checks import _close, _is_end, _range_read, naming_source
from augnet._stack import caller_stacklevel
from augnet.policy import Policy, _transform_from_entry, check_policy, refuse_conditioned, transform_classes
from augnet.policy import check_size as check_spatial_size
from augnet.transforms import image as T
from augnet.transforms.base import Transform

EXACT, APPROXIMATE, NONE = "exact", "approximate", "none"


class _Unsupported(Exception):
    """Raised by a builder: the transform has no counterpart in the library (the message says why)."""


@dataclass
class _Export:
    """One transform of a policy, in a library.

    Attributes:
        ops: ``(probability, op)`` pairs: the library ops that together make the
            transform (usually one, with probability 1; ``Posterize`` has one per bit count).
        note: how the export differs from augnet (``None`` when exact).
    """

    ops: list[tuple[float, Any]]
    note: str | None = None


def _join(*notes: str | None) -> str | None:
    kept = [n for n in notes if n]
    return "; ".join(kept) if kept else None


def _cap(value: float, limit: float, what: str) -> tuple[float, str | None]:
    """``value`` capped at ``limit``, and a note when it was."""
    if value <= limit:
        return value, None
    return limit, f"{what} {value:.4g} is capped at {limit:g}"


# Why an export is approximate, where two cases share the reason.
SHEAR = "the shear angle is drawn uniformly, not the shear coefficient (its tangent)"
SCALE = "the zoom is drawn uniformly in [1/z, z], not log-uniformly"
CLIPPED = "the library clips the result to [0, 1]; augnet does not"
HUE = (
    "the library shifts the HSV hue (and clips to [0, 1]); augnet rotates colours about the grey axis of the RGB "
    "cube (grey levels kept)"
)


def _why_none(name: str) -> str:
    # Every other image transform has a counterpart in both libraries (a builder that falls through for one fails
    # the test that says so): the rest are signal and audio transforms.
    if name == "SamplePairing":
        return "it blends each sample with another sample of the batch, which a per-sample pipeline cannot see"
    return "it is not an image transform"


def unsupported(name: str) -> _Unsupported:
    """The exception a builder raises for transform ``name``, saying why it has no counterpart."""
    return _Unsupported(_why_none(name))


#: augnet's image transform classes by name.
IMAGE_NAMES = frozenset(n for n in T.__all__ if isinstance(getattr(T, n), type))

#: A builder: ``(class name, transform, magnitude > 0) -> _Export`` in one library.
Builder = Callable[[str, Transform, float], _Export]

# ----------------------------------------------------------------------- policies


def check_size(size) -> tuple[int, int] | None:
    """``size`` as ``(H, W)``: ``None``, or two ints as a policy's ``size`` takes them (a tuple, a list, a
    ``torch.Size``, a 1-D integer tensor or NumPy array; an item may be a 0-d integer tensor or array, read as the
    int it holds); the TypeError / ValueError naming it otherwise. Read by :func:`augnet.policy.check_size`, which
    every spatial size goes through; an exporter's size has exactly two items."""
    if size is None:
        return None
    pair = f"size must be None or a pair of ints (H, W), got {size!r}"
    try:
        read = check_spatial_size(size)
    except (TypeError, ValueError) as e:  # the reader's own refusals get an exporter's words; an item's (a meta
        if not str(e).startswith(("size must be a spatial size", "size must be a non-empty spatial size")):
            raise  # tensor, a huge value) are the item's, as they were
        if isinstance(e, TypeError) or len(size) != 2:  # empty, or not two items: not a pair
            raise TypeError(pair) from None
        raise ValueError(f"size must be positive, got {size!r}") from None  # an item < 1
    if len(read) != 2:
        raise TypeError(pair)
    return read


def _entries(policy) -> tuple[list[list[dict]], bool]:
    """The policy's layers of entries, checked, and whether the policy is entries-only (has no layer settings).

    A full policy (one with layer settings, as :meth:`augnet.AugmentationModule.policy`
    makes) is checked as :meth:`augnet.AugmentationModule.from_policy` checks it
    (:func:`augnet.policy.check_policy`), and its entries are those its state
    gives: a file means the same to the exporters as to ``from_policy``. A layer of an entries-only policy may be
    empty, or have only weights of 0: it has nothing to draw, and is exported as the identity.
    """
    if isinstance(policy, dict):
        policy = Policy.from_json(policy)
    if isinstance(policy, nn.Module):  # a model or a layer: its policy() is what exports
        raise TypeError(
            f"policy must be an augnet Policy (or its to_json() dict), got the module {type(policy).__name__}: "
            "pass its policy(), e.g. to_kornia(model.policy())"
        )
    if isinstance(policy, (str, os.PathLike)):
        raise TypeError(f"policy must be an augnet Policy (or its to_json() dict), got the path {str(policy)!r}: "
                        "read the file first, e.g. augnet.Policy.load(path).to_kornia()")  # fmt: skip
    if not isinstance(policy, list):
        raise TypeError(f"policy must be an augnet Policy (or its to_json() dict), got {type(policy).__name__}")
    refuse_conditioned(policy, "exported")
    if not policy:
        raise ValueError("the policy has no layers")
    for i, layer in enumerate(policy):
        if not isinstance(layer, list):
            raise ValueError(f"policy layer {i} must be a list of entries, got {layer!r}")
    rebuilt = check_policy(policy)
    if rebuilt is not None:
        mixed = [i for i, (s, layer) in enumerate(zip(policy.settings, policy, strict=True))
                 if s.get("eval_mode") == "mix" and sum(e["weight"] > 0 for e in layer) > 1]  # fmt: skip
        if mixed:
            warnings.warn(
                f"augnet.export: policy layer(s) {mixed} evaluate as a mix (eval_mode='mix': every transform's "
                "output blended by its weight); the export draws one transform per sample by the weights, as a "
                "layer with eval_mode='sample' (the default) does",
                UserWarning,
                stacklevel=caller_stacklevel(("augnet.export", "augnet.policy")),
            )
        sizes = [None if s.get("range_size") is None else tuple(s["range_size"]) for s in policy.settings]
        policy = [layer.policy(size) for layer, size in zip(rebuilt, sizes, strict=True)]
    entries_only = rebuilt is None
    for i, layer in enumerate(policy):
        for e in layer:
            w, m = e["weight"], e.get("transform_magnitude", e["magnitude"])
            if w < 0:
                raise ValueError(f"policy layer {i}: {e['transform']} has weight {w!r}, not a finite number >= 0")
            if not 0.0 <= m <= 1.0:
                raise ValueError(f"policy layer {i}: {e['transform']} has magnitude {m!r}, not in [0, 1]")
        total = sum(e["weight"] for e in layer)  # 0: nothing to draw, the identity (see build)
        if not math.isfinite(total):
            weights = [e["weight"] for e in layer]
            raise ValueError(f"policy layer {i}: the weights {weights} sum beyond a float's range; scale them down")
    return policy, entries_only


def _check_range(e: dict, t: Transform, m: float, where: str) -> None:
    """Refuse an entries-only policy's entry whose ``range`` is not the one its transform gives at ``m``.

    The exporters run the transform that the entry's ``args`` build, at its magnitude: a range written beside them
    (by hand, or edited) that says otherwise was ignored, and the pipeline drew another range than the one written.
    A range in a unit that depends on the image size (TranslateX in pixels, as ``policy(size)`` writes it) is left
    unchecked: an entries-only policy does not say at which size it was written (the export's shifts are fractions
    of each image's size, as augnet's).
    """
    if "range" not in e:
        return
    r = e["range"]
    if not (isinstance(r, (list, tuple)) and len(r) == 3 and all(_is_end(v) for v in r[:2]) and isinstance(r[2], str)):
        raise ValueError(f"{where}: range of {e['transform']} must be [low, high, unit] (numbers, or \"inf\" / "
                         f"\"-inf\" for an unbounded end; not NaN), got {r!r}")  # fmt: skip
    low, high, unit = _range_read(r)
    try:
        want = t.natural_range(m)
    except (TypeError, ValueError):  # a transform whose range needs a size: not checkable
        return
    if want.unit != unit or (_close(low, want.low) and _close(high, want.high)):
        return
    args = e.get("args") or {}
    raise ValueError(
        f"{where}: range {[low, high, unit]!r} of {e['transform']} disagrees with the one its args {args!r} give "
        f"at magnitude {m!r}, {[want.low, want.high, want.unit]!r}: the exporters run the transform that 'args' "
        "build at the entry's magnitude ('transform_magnitude', else 'magnitude'), not the written range; set "
        "the args and magnitude that give the range you want, or leave 'range' out"
    )


def build(policy, library: str, builder: Builder) -> list[tuple[list[float], list[Any], list[int]]]:
    """Per layer: the probabilities, the ops (made by ``builder``) and the index of the entry each op comes from.

    An entry of weight 0 is never drawn: it gives no op (and no warning, nor an error for a transform with no
    counterpart). A layer with no op left (no entries, or weights all 0) has nothing to apply: it is the identity,
    one op of probability 1 from no entry (index -1). An entries-only policy's entry whose ``range`` disagrees with
    its ``args`` at its magnitude is refused (:func:`_check_range`). The errors about a
    policy read from a file (``Policy.load``) start with the file's path.
    """
    with naming_source(policy):
        return _build(policy, library, builder)


def _build(policy, library: str, builder: Builder) -> list[tuple[list[float], list[Any], list[int]]]:
    classes = transform_classes()
    layers, notes = [], {}
    entries, entries_only = _entries(policy)
    for i, layer in enumerate(entries):
        probs, ops, sources = [], [], []
        for q, e in enumerate(layer):
            name = e["transform"]
            if name not in classes:
                from augnet.augerino import LIE_GENERATORS

                if name in LIE_GENERATORS:
                    raise ValueError(
                        f"policy layer {i}: {name!r} is one of Augerino's generators, not an augnet transform: "
                        "an Augerino policy (its generators' widths) cannot be exported"
                    )
                raise ValueError(f"policy layer {i}: unknown transform {name!r}; augnet has {sorted(classes)}")
            m = float(e.get("transform_magnitude", e["magnitude"]))
            t = _transform_from_entry({**e, "args": e.get("args", {})}, f"policy layer {i}, entry {q}", classes)
            if entries_only:  # (a full policy's entries are the ones its state gives: their ranges agree)
                _check_range(e, t, m, f"policy layer {i}, entry {q}")
            if e["weight"] == 0:  # never drawn (its arguments are checked above all the same)
                continue
            if m == 0.0:  # the identity, whatever the transform
                export = _Export([(1.0, _identity(library))])
            else:
                try:
                    export = builder(name, t, m)
                except _Unsupported as why:
                    raise ValueError(f"augnet.export: {name} cannot be exported to {library}: {why}") from None
                if export.note is not None:
                    notes.setdefault(name, export.note)
            for p, op in export.ops:
                probs.append(float(e["weight"]) * p)
                ops.append(op)
                sources.append(q)
        if not ops:  # nothing to draw: the identity
            probs, ops, sources = [1.0], [_identity(library)], [-1]
        layers.append((probs, ops, sources))
    for name, note in notes.items():
        warnings.warn(
            f"augnet.export: {name} is exported to {library} approximately: {note}",
            UserWarning,
            stacklevel=caller_stacklevel(("augnet.export", "augnet.policy")),
        )
    return layers


def _identity(library: str) -> Any:
    if library == "torchvision":
        from torchvision.transforms import v2

        return v2.Identity()
    return nn.Identity()
