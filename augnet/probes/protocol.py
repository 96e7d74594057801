"""The seen/unseen-transformed category protocol (Zaidi et al., section 2.1 and appendix A).

A model is trained with a transformation applied only to the samples of some
categories (the *seen-transformed* ones), each such sample transformed with
probability ``p`` (the paper uses 1/2); the other categories (*unseen-
transformed*) appear only clean. On transformed test images, the accuracy on
the seen categories is the *within-category* accuracy and the accuracy on the
unseen ones the *across-category* accuracy: robustness that carries over to
categories never seen transformed is the signature of an invariant
representation. Growing sets of seen categories are nested (each contains the
previous one plus new random categories), so that results for different sizes
depend as little as possible on which categories were drawn.

- :class:`SeenTransformedDataset` wraps a dataset (or tensors) for training.
- :func:`nested_splits` draws the nested sets of seen categories.
- :func:`category_accuracy` measures clean, within- and across-category accuracy.

Zaidi, Boix, et al., "Is Robustness To Transformations Driven by Invariant
Neural Representations?".
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import math
import numbers
from collections.abc import Iterable, Sequence

import torch
from torch import Tensor, nn
from torch.utils.data import Dataset

from augnet._checks import is_int
from augnet.probes._common import (
    Transformed,
    check_classes,
    check_labels,
    check_model_input,
    check_seed,
    forward_kwargs,
    seeded,
)
from augnet.probes.features import OUTPUT, _features, check_rows

__all__ = ["SeenTransformedDataset", "category_accuracy", "nested_splits"]


def _class_set(classes, name: str) -> frozenset[int]:
    if isinstance(classes, Tensor):
        if classes.dtype.is_floating_point or classes.is_complex() or classes.dtype == torch.bool:
            raise TypeError(f"{name} must hold integer class indices, got dtype {classes.dtype}")
        classes = classes.flatten().tolist()
    if isinstance(classes, (str, bytes)) or not isinstance(classes, Iterable):
        raise TypeError(f"{name} must be an iterable of integer class indices, got {type(classes).__name__}")
    out = []
    for c in classes:
        if not is_int(c):
            raise TypeError(f"{name} must hold integer class indices, got {c!r}")
        out.append(int(c))
    return frozenset(out)


def _check_magnitude(magnitude) -> float:
    if isinstance(magnitude, bool) or not isinstance(magnitude, numbers.Real):
        raise TypeError(f"magnitude must be a real number, got {type(magnitude).__name__}")
    if not 0.0 <= float(magnitude) <= 1.0:
        raise ValueError(f"magnitude must lie in [0, 1], got {magnitude}")
    return float(magnitude)


def _check_transform(transform) -> None:
    if not callable(transform):
        raise TypeError(f"transform must be callable as transform(x, magnitude, generator=g), got {transform!r}")


def _label(y) -> int:
    if isinstance(y, Tensor):
        if y.numel() != 1 or y.dtype.is_floating_point or y.is_complex() or y.dtype == torch.bool:
            raise ValueError(f"a sample's label must be one integer class index, got {y!r}")
        return int(y)
    if not is_int(y):
        raise ValueError(f"a sample's label must be an integer class index, got {y!r}")
    return int(y)


#: The largest epoch :meth:`SeenTransformedDataset.set_epoch` takes (the epoch is held in an int64 tensor).
MAX_EPOCH = 2**63 - 1


def _shared_epoch(epoch) -> Tensor:
    """A 0-d int64 tensor holding ``epoch`` (an int, or such a tensor: kept when it is already shared), in shared
    memory where torch can put it there, so that the worker processes of a data loader read what the main
    process sets."""
    if isinstance(epoch, Tensor) and epoch.is_shared():
        return epoch
    t = torch.tensor(int(epoch), dtype=torch.int64)
    with contextlib.suppress(RuntimeError):  # no shared memory here: the workers keep the epoch they started with
        t.share_memory_()
    return t


def _index_seed(seed: int, epoch: int, index: int) -> int:
    """A 63-bit seed for one (seed, epoch, index), hashed so that nearby indices get unrelated streams."""
    digest = hashlib.blake2b(f"{seed}/{epoch}/{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


class SeenTransformedDataset(Dataset):
    """A dataset whose seen-transformed categories are transformed with probability ``p``.

    Item ``i`` is ``(x_i, y_i)``, with ``x_i`` replaced by ``transform(x_i,
    magnitude)`` when ``y_i`` is in ``seen_classes`` and a uniform draw for
    ``i`` falls below ``p``. Samples of the other classes are returned
    unchanged. Each index draws from its own generator, seeded from
    ``(seed, epoch, i)``: the choice and the transform's parameters are the
    same on every access and in every worker; :meth:`set_epoch` gives a fresh
    draw per epoch, as in the paper, where each presentation of a
    seen-category image is transformed or not at random.

    Args:
        data: a map-style dataset whose items are ``(x, y, *extra)`` (extra
            fields are passed through; a list of such tuples is one), or a pair
            of tensors ``(x, y)`` with ``y`` (N,) integer labels.
        transform: called as ``transform(x[None], magnitude, generator=g)``
            on one sample with a batch axis (an augnet transform or any such
            callable); transforms that mix samples (sample pairing) are refused.
        seen_classes: the seen-transformed categories (may be empty: no sample
            is transformed).
        p: probability that a sample of a seen class is transformed.
        magnitude: the transform's magnitude, in [0, 1].
        seed: seeds every draw.
        return_flag: items are ``(x, y, transformed)`` with ``transformed`` a
            bool, after any extra fields.

    Shape:
        - x: (N, ...) for tensors; items keep the sample's shape.
        - y: (N,).

    Examples:
        >>> x, y = torch.zeros(6, 1, 4, 4), torch.tensor([0, 1, 0, 1, 0, 1])
        >>> ds = SeenTransformedDataset((x, y), lambda b, m, generator=None: b + 1, seen_classes=[1], p=1.0)
        >>> ds.transformed_mask().tolist()
        [False, True, False, True, False, True]
        >>> float(ds[1][0].max()), float(ds[0][0].max())
        (1.0, 0.0)
    """

    def __init__(
        self,
        data,
        transform,
        seen_classes: Iterable[int],
        p: float = 0.5,
        magnitude: float = 1.0,
        seed: int = 0,
        return_flag: bool = False,
    ) -> None:
        self.x: Tensor | None = None
        self.y: Tensor | None = None
        self.dataset: Dataset | None = None
        samples = isinstance(data, (tuple, list)) and len(data) > 0 and all(isinstance(s, (tuple, list)) for s in data)
        if isinstance(data, (tuple, list)) and not samples:
            if len(data) != 2 or not all(isinstance(t, Tensor) for t in data):
                kinds = [type(t).__name__ for t in data[:3]]
                raise TypeError(
                    f"data must be a pair (x, y) of tensors or a list of samples, got {type(data).__name__} of {kinds}"
                )
            x, y = data
            if y.dim() != 1 or y.dtype.is_floating_point or y.is_complex() or y.dtype == torch.bool:
                raise ValueError(f"y must be a 1-D integer tensor of labels, got shape {tuple(y.shape)} {y.dtype}")
            if x.dim() < 1 or len(x) != len(y):
                raise ValueError(f"x and y must have the same length, got shapes {tuple(x.shape)} and {tuple(y.shape)}")
            self.x, self.y = x, y
        elif isinstance(data, Dataset) or (hasattr(data, "__getitem__") and hasattr(data, "__len__")):
            self.dataset = data
        else:
            raise TypeError(f"data must be a map-style dataset or a pair (x, y) of tensors, got {type(data).__name__}")
        _check_transform(transform)
        if getattr(transform, "mixes_samples", False):
            raise ValueError(f"{type(transform).__name__} mixes samples of a batch and cannot transform one sample")
        if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0.0 <= float(p) <= 1.0:
            raise ValueError(f"p must be a probability in [0, 1], got {p!r}")
        if not is_int(seed):
            raise TypeError(f"seed must be an int, got {type(seed).__name__}")
        self.transform = transform
        self.seen_classes = _class_set(seen_classes, "seen_classes")
        self.p = float(p)
        self.magnitude = _check_magnitude(magnitude)
        self.seed = int(seed)
        self._epoch = _shared_epoch(0)
        self.return_flag = bool(return_flag)

    def __len__(self) -> int:
        return len(self.y) if self.y is not None else len(self.dataset)

    @property
    def epoch(self) -> int:
        """The epoch the draws are for (see :meth:`set_epoch`; assigning it sets it)."""
        return int(self._epoch)

    @epoch.setter
    def epoch(self, epoch: int) -> None:
        self.set_epoch(epoch)

    def set_epoch(self, epoch: int) -> None:
        """Draw afresh: items depend on ``(seed, epoch, index)``.

        The epoch is held in shared memory, so a :class:`~torch.utils.data.DataLoader`'s worker processes read it
        too: persistent ones (``persistent_workers=True``) kept the epoch they started with, and drew every epoch's
        items as the first's, where ``num_workers=0`` drew afresh.
        """
        if not is_int(epoch) or not 0 <= epoch <= MAX_EPOCH:
            raise ValueError(f"epoch must be a non-negative int (at most 2**63 - 1), got {epoch!r}")
        self._epoch.fill_(int(epoch))

    def __setstate__(self, state: dict) -> None:
        """A pickled or deep-copied dataset gets an epoch in shared memory of its own (a worker's copy shares its
        loader's: torch's multiprocessing pickler sends the shared tensor itself); one pickled when the epoch
        was a plain int has it in shared memory now."""
        state = dict(state)
        epoch = state.pop("epoch", None)
        vars(self).update(state)
        kept = state.get("_epoch")
        self._epoch = _shared_epoch(epoch if kept is None else kept)

    def _generator(self, index: int, device) -> torch.Generator:
        return torch.Generator(device=device).manual_seed(_index_seed(self.seed, self.epoch, index))

    def _index(self, index) -> int:
        if not is_int(index):
            raise TypeError(f"index must be an int, got {type(index).__name__}")
        n = len(self)
        if not -n <= index < n:
            raise IndexError(f"index {index} out of range for a dataset of {n} samples")
        return int(index) % n

    def _item(self, i: int) -> tuple:
        if self.y is not None:
            return self.x[i], self.y[i]
        item = self.dataset[i]
        if not isinstance(item, (tuple, list)) or len(item) < 2:
            raise TypeError(f"the dataset's items must be (x, y, ...) tuples, got {type(item).__name__}")
        return tuple(item)

    def _draw(self, i: int, label: int, device) -> tuple[bool, torch.Generator]:
        g = self._generator(i, device)
        u = float(torch.rand((), generator=g, device=device))  # drawn for every index, seen or not
        return (label in self.seen_classes) and u < self.p, g

    def is_transformed(self, index: int) -> bool:
        """Whether item ``index`` is transformed in the current epoch."""
        i = self._index(index)
        item = self._item(i)
        device = item[0].device if isinstance(item[0], Tensor) else "cpu"
        return self._draw(i, _label(item[1]), device)[0]

    def transformed_mask(self) -> Tensor:
        """(N,) bool: which items are transformed in the current epoch (reads every item's label)."""
        return torch.tensor([self.is_transformed(i) for i in range(len(self))], dtype=torch.bool)

    def __getitem__(self, index):
        i = self._index(index)
        item = self._item(i)
        x, y, extra = item[0], item[1], item[2:]
        if not isinstance(x, Tensor):
            raise TypeError(f"a sample must be a tensor, got {type(x).__name__}")
        flag, g = self._draw(i, _label(y), x.device)
        if flag:
            out = self.transform(x[None], self.magnitude, generator=g)
            if out.shape != (1, *x.shape):
                raise ValueError(f"the transform turned a sample of shape {tuple(x.shape)} into {tuple(out.shape)}")
            x = out[0]
        return (x, y, *extra, flag) if self.return_flag else (x, y, *extra)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(n={len(self)}, transform={self.transform!r}, "
            f"seen_classes={sorted(self.seen_classes)}, p={self.p}, magnitude={self.magnitude}, seed={self.seed})"
        )


def nested_splits(
    classes: int | Sequence[int] | Tensor, sizes: Sequence[int], generator: torch.Generator | None = None
) -> list[list[int]]:
    """Nested random subsets of ``classes``: split ``k`` holds ``sizes[k]`` classes and contains split ``k - 1``.

    The classes are permuted once at random and split ``k`` is the first
    ``sizes[k]`` of the permutation, so each larger set keeps the previous one
    and adds classes drawn at random (Zaidi et al., appendix A).

    Args:
        classes: the number of classes (``range(classes)``) or the class ids.
        sizes: non-decreasing sizes, each in ``[0, len(classes)]``.
        generator: draws the permutation.

    Returns:
        One sorted list of class ids per size.

    Examples:
        >>> splits = nested_splits(10, [2, 5, 10], torch.Generator().manual_seed(0))
        >>> [len(s) for s in splits], set(splits[0]) <= set(splits[1]) <= set(splits[2])
        ([2, 5, 10], True)
    """
    if is_int(classes):
        if classes < 1:
            raise ValueError(f"classes must be a positive number of classes or a list of class ids, got {classes}")
        ids = list(range(int(classes)))
    else:
        if not isinstance(classes, (Tensor, str, bytes)) and isinstance(classes, Iterable):
            classes = list(classes)
        ids = sorted(_class_set(classes, "classes"))
        given = classes.numel() if isinstance(classes, Tensor) else len(classes)
        if len(ids) != given:
            raise ValueError(f"classes must not repeat a class, got {classes!r}")
        if not ids:
            raise ValueError("classes is empty")
    if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Sequence) or len(sizes) == 0:
        raise ValueError(f"sizes must be a non-empty sequence of ints, got {sizes!r}")
    for s in sizes:
        if not is_int(s):
            raise TypeError(f"sizes must hold ints, got {s!r}")
        if not 0 <= s <= len(ids):
            raise ValueError(f"each size must lie in [0, {len(ids)}] (the number of classes), got {s}")
    if any(b < a for a, b in itertools.pairwise(sizes)):
        raise ValueError(f"sizes must be non-decreasing for the splits to be nested, got {list(sizes)}")
    order = torch.randperm(len(ids), generator=generator).tolist()
    permuted = [ids[j] for j in order]
    return [sorted(permuted[: int(s)]) for s in sizes]


def _accuracy(correct: Tensor, mask: Tensor) -> float:
    n = int(mask.sum())
    return float(correct[mask].double().mean()) if n else math.nan


@torch.no_grad()
def category_accuracy(
    model: nn.Module,
    x: Tensor,
    y: Tensor,
    transform,
    seen_classes: Iterable[int],
    magnitude: float = 1.0,
    copies: int | None = None,
    seed: int = 0,
    batch_size: int | None = None,
) -> dict:
    """Clean, within-category and across-category accuracy (Zaidi et al., section 2.1).

    Every test sample is transformed once (parameters drawn from a generator
    seeded with ``seed + 1``, so that they are not the same random numbers as
    an AugNet's own draws, from ``seed``; the convention of every probe); the
    within-category accuracy is the accuracy on
    the transformed samples of ``seen_classes``, the across-category accuracy
    that on the transformed samples of the other classes. The model predicts
    among all classes in both cases.

    Args:
        model: a classifier returning (B, classes) logits, probed in
            evaluation mode (its modes are restored afterwards).
        x: test inputs; y: their class labels in ``[0, classes)`` ((B,) or (B, 1), any integer
            dtype, a NumPy array or a list; whole floats too).
        transform: called as ``transform(x, magnitude, generator=g)``.
        seen_classes: the categories seen transformed in training.
        magnitude: the transform's magnitude, in [0, 1].
        copies: for an AugNet, the copies it averages (the same augmentation
            draws, from ``seed``, for the clean and the transformed pass).
        seed: an AugNet's augmentations are drawn from ``seed``, the
            transform's parameters from ``seed + 1``.
        batch_size: run the model in chunks.

    Returns:
        ``{"clean": accuracy on every clean sample, "transformed": on every
        transformed sample, "within": transformed seen, "across": transformed
        unseen, "clean_seen", "clean_unseen": clean accuracy per group,
        "n_seen", "n_unseen": group sizes, "seen": (B,) bool mask of the
        samples of seen classes, "correct_clean", "correct_transformed": (B,)
        bool}``. A group with no sample has NaN accuracies.

    Raises:
        TypeError, ValueError: before the model runs: labels that are not (B,) integers; images
            that are not finite (naming them), on meta, or in another dtype or on another device
            than the model's parameters; a bad transform, magnitude, ``seen_classes`` or ``batch_size``.
            After the first pass: labels past the model's classes. A class of ``seen_classes`` that
            no label holds is no error: it adds no sample to the seen group.

    Examples:
        >>> net = nn.Sequential(nn.Flatten(), nn.Linear(4, 3))
        >>> x, y = torch.randn(8, 1, 2, 2), torch.tensor([0, 1, 2, 0, 1, 2, 0, 1])
        >>> out = category_accuracy(net, x, y, lambda b, m, generator=None: b, seen_classes=[0])
        >>> out["within"] == out["clean_seen"], out["n_seen"] + out["n_unseen"]
        (True, 8)
    """
    seed = check_seed(seed)  # before anything runs: an int in [0, 2**63 - 3], a NumPy one too
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    y = check_labels(x, y)
    check_model_input(model, x)
    _check_transform(transform)
    seen_set = _class_set(seen_classes, "seen_classes")
    magnitude = _check_magnitude(magnitude)
    if batch_size is not None and (not is_int(batch_size) or batch_size < 1):
        raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
    batch_size = None if batch_size is None else int(batch_size)
    xt = Transformed(transform, x, magnitude, seeded(seed + 1, x.device))  # applied batch by batch
    if xt.shape != x.shape:
        raise ValueError(f"the transform must keep the input's shape {tuple(x.shape)}, got {tuple(xt.shape)}")
    outs = []
    for inputs in (x, xt):
        out = _features(model, inputs, OUTPUT, batch_size=batch_size, **forward_kwargs(model, copies, seed, x.device))[
            OUTPUT
        ]
        check_rows({OUTPUT: out}, len(x))
        if out.dim() != 2:
            raise ValueError(f"the model must return (B, classes) logits, got shape {tuple(out.shape)}")
        if not outs:
            check_classes(y, out.shape[1])
        outs.append(out)
    labels = y.to(outs[0].device)
    correct_clean = outs[0].argmax(1) == labels
    correct_t = outs[1].argmax(1) == labels
    seen = torch.tensor([int(c) in seen_set for c in y.tolist()], dtype=torch.bool, device=labels.device)
    everyone = torch.ones_like(seen)
    return {
        "clean": _accuracy(correct_clean, everyone),
        "transformed": _accuracy(correct_t, everyone),
        "within": _accuracy(correct_t, seen),
        "across": _accuracy(correct_t, ~seen),
        "clean_seen": _accuracy(correct_clean, seen),
        "clean_unseen": _accuracy(correct_clean, ~seen),
        "n_seen": int(seen.sum()),
        "n_unseen": int((~seen).sum()),
        "seen": seen,
        "correct_clean": correct_clean,
        "correct_transformed": correct_t,
    }
