"""Shared pieces of the probes: summaries, derangements, paired transforms, batches and the model's mode.

Two rules every probe that runs a model follows, here:

- **The model is evaluated in evaluation mode and left as it was.** :func:`evaluating` switches every
  submodule to ``eval()`` for the probe and restores each one's own ``training`` flag afterwards, also on
  error. A probe therefore never updates batch-norm running statistics, never draws dropout masks, and
  gives the same numbers whatever mode the model was left in (the papers measure trained networks at
  test time). Refusing a model in training mode was the other option; it would make every caller wrap
  the probe in ``eval()`` / ``train()`` for no benefit, since a probe has no use for the training mode.
- **Inputs are streamed in batches** of ``batch_size`` rows (default :data:`DEFAULT_BATCH_SIZE`), and a
  transformed copy of the inputs is never built whole when the transform is an augnet transform: its
  parameters are drawn for every row at once (the same draw as ``transform(x, magnitude, generator=g)``)
  and applied batch by batch (:class:`Transformed`), so a probe on 20,000 images holds one batch of
  images and activations at a time.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager

import torch
from torch import Tensor, nn

from augnet._checks import is_int, is_real, number
from augnet._labels import class_labels

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DRAWS",
    "Transformed",
    "apply_paired",
    "batch_size_of",
    "check_draws",
    "derangement",
    "evaluating",
    "forward_kwargs",
    "rows_of",
    "seeded",
    "summary",
]

#: Rows per forward pass when a probe's ``batch_size`` is ``None``.
DEFAULT_BATCH_SIZE = 256

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
#: The central 75 % interval of the AugNet paper's Figs. 5 and B.4 ("median ... with a 75% confidence
#: interval"): from the 12.5th to the 87.5th percentile.
INTERVAL75 = (0.125, 0.875)
#: How an AugNet's own augmentations are drawn in paired clean / transformed passes:
#: ``"shared"`` (the same draws: the passes differ only by the probed transformation) or
#: ``"independent"`` (fresh draws in every pass, as two calls of the model in use would make).
DRAWS = ("shared", "independent")


def summary(values: Tensor, quantiles: Sequence[float] = QUANTILES) -> dict[str, float]:
    """Median, mean and percentiles of ``values``, ignoring NaN.

    Args:
        values: a tensor (or anything ``torch.as_tensor`` takes) of any shape.
        quantiles: the percentiles to give, as fractions in [0, 1] (default ``QUANTILES``).

    Raises:
        TypeError, ValueError: ``quantiles`` is not a sequence of numbers in [0, 1].

    Returns:
        ``{"median", "mean", "n", "p5", "p25", ..., "interval75_low", "interval75_high"}``:
        ``n`` counts the values that are not NaN; ``interval75_low`` and
        ``interval75_high`` bound the central 75 % of the values (the 12.5th and
        87.5th percentiles: the "75% confidence interval" around the median of the
        AugNet paper's Figs. 5 and B.4); every statistic is NaN when there are none.

    Examples:
        >>> summary(torch.tensor([1.0, 2.0, float("nan"), 3.0]))["median"]
        2.0
        >>> s = summary(torch.arange(9.0))
        >>> s["interval75_low"], s["interval75_high"]
        (1.0, 7.0)
    """
    items = _items(quantiles)
    if items is None:
        raise TypeError(f"quantiles must be a sequence of numbers in [0, 1], got {quantiles!r}")
    quantiles = items
    if not all(is_real(q) and 0 <= q <= 1 for q in quantiles):
        raise ValueError(f"quantiles must be numbers in [0, 1], got {list(quantiles)!r}")
    v = torch.as_tensor(values, dtype=torch.float64).flatten()
    v = v[~torch.isnan(v)]
    out: dict[str, float] = {"n": int(v.numel())}
    names = [f"p{round(q * 100)}" for q in quantiles] + ["interval75_low", "interval75_high"]
    if v.numel() == 0:
        out.update({"median": math.nan, "mean": math.nan})
        out.update(dict.fromkeys(names, math.nan))
        return out
    v = v.sort().values
    out["median"] = float(_quantiles(v, [0.5])[0])
    out["mean"] = float(v.mean())
    qs = _quantiles(v, [*quantiles, *INTERVAL75])
    out.update({name: float(x) for name, x in zip(names, qs, strict=True)})
    return out


def _quantiles(v: Tensor, qs: Sequence[float]) -> Tensor:
    """Quantiles of the sorted ``v`` by linear interpolation (``torch.quantile``'s), infinite values included.

    At a position on a value, or between two equal ends (two infinities), the quantile is that value; between
    a finite value and an infinity it is the infinity, where ``lo + frac * (hi - lo)`` gives NaN (``inf - inf``,
    ``0 * inf``); between -inf and +inf it is NaN.
    """
    pos = torch.tensor([float(q) for q in qs], dtype=torch.float64) * (v.numel() - 1)
    lo, hi = pos.floor().long(), pos.ceil().long()
    a, b, frac = v[lo], v[hi], pos - pos.floor()
    out = a + frac * (b - a)
    low_inf, high_inf = a == -math.inf, b == math.inf
    out = torch.where(low_inf & ~high_inf, a, torch.where(high_inf & ~low_inf, b, out))
    return torch.where((frac == 0) | (a == b), a, out)


def derangement(n: int, generator: torch.Generator | None = None, device=None) -> Tensor:
    """A random permutation of ``range(n)`` with no fixed point (``n >= 2``).

    Conjugating a cyclic shift by a random permutation: ``sigma(i) = pi[(pi^-1[i] + s) % n]``
    with ``s`` in ``[1, n)``, which never maps ``i`` to itself.

    Args:
        n: the number of elements, an int >= 2 (a NumPy integer or a 0-d integer tensor too).
        generator: the random draws' generator (``None``: torch's global one).
        device: where the permutation goes (default the CPU).

    Raises:
        TypeError: ``n`` is not an integer (a float, a bool, a string).
        ValueError: ``n < 2`` (one element has no derangement).

    Examples:
        >>> p = derangement(5, torch.Generator().manual_seed(0))
        >>> bool((p != torch.arange(5)).all()), sorted(p.tolist())
        (True, [0, 1, 2, 3, 4])
    """
    read = number("n", n)
    if not is_int(read):  # torch.randperm's own error named no argument; "5" failed comparing a str with 2
        raise TypeError(f"n must be an int (the number of elements), got {type(n).__name__}: {n!r}")
    n = int(read)
    if n < 2:
        raise ValueError(f"a derangement needs at least 2 elements, got {n}")
    pi = torch.randperm(n, generator=generator)
    s = int(torch.randint(1, n, (1,), generator=generator))
    inverse = torch.argsort(pi)
    sigma = pi[(inverse + s) % n]
    return sigma.to(device) if device is not None else sigma


def apply_paired(transform, x: Tensor, magnitude, generator: torch.Generator | None = None) -> tuple[Tensor, dict]:
    """Transform ``x`` once and return the output with the parameters drawn.

    The probes pass the same parameters to every pass that must see the same
    transformation (e.g. several models, or several layers), through
    ``transform(x, magnitude, params=params)``.
    """
    params = transform.draw_params(x, magnitude, generator)
    return transform(x, magnitude, params=params), params


def seeded(seed: int | None, device=None) -> torch.Generator | None:
    """A generator seeded with ``seed`` on ``device`` (``None`` for no seed)."""
    if seed is None:
        return None
    return torch.Generator(device=device if device is not None else "cpu").manual_seed(seed)


def check_draws(draws) -> str:
    """``draws`` if it is one of :data:`DRAWS`, else a ValueError naming it."""
    if draws not in DRAWS:
        raise ValueError(f"draws must be one of {DRAWS}, got {draws!r}")
    return draws


def forward_kwargs(
    model, copies: int | None, seed: int | None, device=None, draws: str = "shared", pass_index: int = 0
) -> dict:
    """Keyword arguments of a probing forward pass.

    For an :class:`~augnet.AugNet`, ``copies`` and a generator on the inputs'
    ``device``. With ``draws="shared"`` every pass is seeded with ``seed``, so
    paired clean / transformed passes draw the same augmentations and differ
    only by the probed transformation. With ``draws="independent"`` pass
    ``pass_index`` (0 for the clean pass, 1, 2, ... for transformed ones) is
    seeded with a different seed derived from ``seed`` and ``pass_index``, so
    the passes draw independent augmentations, as two calls of the model in
    use would (the AugNet paper's Fig. B.4 measures that: its invariance grows
    with the number of copies C). Other models take no arguments.
    """
    from augnet.model import AugNet

    check_draws(draws)
    if not isinstance(model, AugNet):
        if copies is not None:
            raise ValueError("copies applies to AugNet models only")
        return {}
    if draws == "independent" and seed is not None:
        seed = (seed * 1_000_003 + 7919 * (pass_index + 1)) % (2**63)
    return {"copies": copies, "generator": seeded(seed, device)}


@contextmanager
def evaluating(model) -> Iterator:
    """Run ``model`` in evaluation mode; restore every submodule's ``training`` flag afterwards.

    Each submodule gets back its own flag (a model half in training mode stays so), also when the
    probe raises. A callable that is not an ``nn.Module`` is left alone. What a forward pass of an
    augmentation remembers is put back too: a layer's last input size (from which its ``policy()``
    gives ranges in pixels: probing at another image size would change them) and a per-instance
    layer's latest per-sample policy (what the regulariser of the training step reads).

    Examples:
        >>> net = nn.Sequential(nn.Linear(2, 2), nn.Dropout()).train()
        >>> with evaluating(net):
        ...     net.training, net[1].training
        (False, False)
        >>> net.training, net[1].training
        (True, True)
    """
    if not isinstance(model, nn.Module):
        yield model
        return
    modes = [(m, m.training) for m in model.modules()]
    remembered = [(m, {k: vars(m)[k] for k in _REMEMBERED if k in vars(m)}) for m in model.modules()]
    remembered = [(m, kept) for m, kept in remembered if kept]
    model.eval()
    try:
        yield model
    finally:
        for module, flag in modes:
            module.training = flag
        for module, kept in remembered:
            vars(module).update(kept)


#: What an augmentation layer (or Augerino's) remembers of its latest forward pass, beyond its state.
_REMEMBERED = ("last_size", "_latest")


def batch_size_of(batch_size, name: str = "batch_size") -> int:
    """``batch_size`` checked (an int >= 1), :data:`DEFAULT_BATCH_SIZE` for ``None``."""
    if batch_size is None:
        return DEFAULT_BATCH_SIZE
    if not is_int(batch_size) or batch_size < 1:
        raise ValueError(f"{name} must be >= 1 (an int), got {batch_size!r}")
    return int(batch_size)


#: The largest seed a probe takes: it seeds generators with ``seed``, ``seed + 1`` and ``seed + 2`` (int64).
MAX_SEED = 2**63 - 3


def torch_seed(seed, what: str = "seed") -> int:
    """``seed`` as an int if torch's generators take it (a Python or NumPy int in ``[-2**63, 2**64 - 1]``, as
    ``torch.manual_seed`` takes), else the TypeError / ValueError naming ``what`` (torch's own named nothing:
    "Overflow when unpacking long long", "manual_seed expected a long, but got Tensor")."""
    if not is_int(seed):
        raise TypeError(f"{what} must be an int, got {type(seed).__name__}: {seed!r}")
    if not -(2**63) <= seed < 2**64:
        raise ValueError(f"{what} must be an int in [-2**63, 2**64 - 1] (torch's seeds), got {seed}")
    return int(seed)


def check_seed(seed) -> int:
    """``seed`` if it is an int in ``[0, MAX_SEED]``, else the TypeError / ValueError naming it."""
    if not is_int(seed):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}: {seed!r}")
    if not 0 <= seed <= MAX_SEED:
        raise ValueError(f"seed must be an int in [0, 2**63 - 3] (seed + 2 seeds a generator too), got {seed}")
    return int(seed)


def _items(values) -> list | None:
    """``values`` as a list: a 1-D tensor or NumPy array, or any iterable but a string or a mapping (``None``
    for anything else, e.g. a single number or a 0-d tensor): the forms the probes' sequence arguments take."""
    if isinstance(values, Tensor) or type(values).__module__ == "numpy":
        return values.tolist() if getattr(values, "ndim", 0) == 1 else None
    if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Iterable):
        return None
    return list(values)


def magnitude_list(magnitudes) -> list[float]:
    """``magnitudes`` (a non-empty sequence or iterable of numbers, a 1-D tensor or array) as floats, or the
    error naming it.

    Their range is the transform's to check (an augnet transform takes [0, 1]; a callable, its own).
    """
    items = _items(magnitudes)
    if items is None:
        raise TypeError(f"magnitudes must be a sequence of numbers or a 1-D tensor or array, got {magnitudes!r}")
    magnitudes = items
    if not magnitudes:
        raise ValueError("magnitudes must hold at least one magnitude, got none")
    if not all(is_real(m) for m in magnitudes):
        raise TypeError(f"magnitudes must be numbers, got {list(magnitudes)!r}")
    return [float(m) for m in magnitudes]


def check_labels(x, y, name: str = "x") -> Tensor:
    """``y`` as (N,) int64 class indices >= 0 on the CPU, one per row of ``x`` (N >= 1), or the error of a probe
    given bad ones.

    The check of every probe that takes labels beside its inputs (``select_tau``, ``layerwise_invariance``,
    ``category_accuracy``, ``accuracy_curve``, the equivariance probes' ``y``; ``name`` is what ``x`` is
    called there). The labels are read by ``augnet.probes._labels.class_labels``, as every probe reads
    them: any integer dtype, a list or a NumPy array, whole floats, (N,) or (N, 1); one-hot rows, fractions,
    negative or bool labels are refused (they would broadcast against the predictions or compare unequal to
    every class index, scoring every prediction wrong without an error).
    """
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a tensor, got {type(x).__name__}")
    y = class_labels(y, None, "y")
    if x.dim() == 0:
        raise ValueError(f"{name} must be a batch, one row per label, got a 0-d tensor")
    if len(x) != len(y):
        raise ValueError(f"{name} and y must have the same length, got {len(x)} and {len(y)}")
    if len(x) == 0:
        raise ValueError(f"{name} is an empty batch")
    return y


def check_classes(y: Tensor, classes: int, what: str = "the model") -> None:
    """Refuse labels past the ``classes`` of a model's or head's output (every prediction would count as wrong)."""
    if len(y) and int(y.max()) >= classes:
        raise ValueError(
            f"y holds class {int(y.max())}, but {what} returns {classes} classes: labels must be in [0, {classes})"
        )


def compiled_inner(model) -> nn.Module | None:
    """The module a ``torch.compile`` wrapper (an ``OptimizedModule``) runs, its ``_orig_mod``; ``None`` for any
    other model (checked by name: importing ``torch._dynamo`` to ask would cost every probe a second)."""
    if not isinstance(model, nn.Module) or type(model).__name__ != "OptimizedModule":
        return None
    inner = model._modules.get("_orig_mod")
    return inner if isinstance(inner, nn.Module) else None


def check_model_input(model: nn.Module, x, values: bool = True) -> None:
    """Refuse images a probe could not run ``model`` on, before it runs: the checks of every model-level probe.

    ``x`` must be a tensor with values (not on meta), in a dtype and on a device the model's floating-point
    parameters have (the model's own error would come in its first pass, as a RuntimeError), and finite
    (a NaN image spoils its own measures and those it is a baseline of; its rows are named). A model with
    parameters or buffers on meta (all of them, or a part never loaded) is refused, naming them. Integer inputs
    are the model's to take (one may convert 8-bit images itself, or embed token ids); the augnet
    transforms refuse them (:func:`check_transform`). ``values=False`` checks the tensor and its device
    only (what :func:`~augnet.probes.features` asks: a model may cast its inputs, or be read on any values).
    A ``torch.compile`` wrapper of an AugNet is refused: through the wrapper the probes would read the
    AugNet as a plain model (its aggregated log-probabilities as its logits, its own draws not shared, no
    ``copies``); probe the module it wraps, ``model._orig_mod`` (the same parameters).
    """
    from augnet.model import AugNet

    if isinstance(compiled_inner(model), AugNet):
        raise TypeError(
            "model is a torch.compile'd AugNet: probe the AugNet itself, model._orig_mod (the same parameters); "
            "through the compiled wrapper its logits (the trunk's outputs averaged over the copies), its shared "
            "draws and copies= are out of the probes' reach"
        )
    if not isinstance(x, Tensor):
        raise TypeError(f"x must be a tensor of images, got {type(x).__name__}")
    if x.dim() == 0:
        raise ValueError(f"x must be a batch of images (B, ...), got a 0-d tensor {x!r}")
    if x.device.type == "meta":
        raise ValueError("x is on meta (shapes only): the probes measure values")
    named = [*model.named_parameters(), *model.named_buffers()]
    meta = [name for name, t in named if t.device.type == "meta"]
    if meta:  # no values to probe (a model partly on meta would fail deep in torch, in its first pass)
        listed = ", ".join(meta[:5]) + ", ..." * (len(meta) > 5)
        part = "is on meta" if len(meta) == len(named) else f"has {len(meta)} parameters or buffers on meta ({listed})"
        raise ValueError(
            f"the model {part}, where tensors hold no values: load its weights (load_state_dict(..., assign=True)) or "
            "materialise it (to_empty(device=...) and initialise it) before probing it"
        )
    params = [p for p in model.parameters() if p.is_floating_point()]
    dtypes, devices = {p.dtype for p in params}, {p.device for p in params}
    kinds = ", ".join(sorted(str(d) for d in dtypes))
    if values and params and x.is_floating_point() and x.dtype not in dtypes:
        raise TypeError(f"x is {x.dtype} but the model's parameters are {kinds}: pass x.to({kinds.split(', ')[0]})")
    if params and x.device not in devices:
        raise ValueError(f"x is on {x.device} but the model is on {', '.join(sorted(map(str, devices)))}")
    if values and x.is_floating_point() and x.numel():
        finite = torch.isfinite(x.detach()).reshape(len(x), -1).all(1)
        if not bool(finite.all()):
            bad = (~finite).nonzero().flatten().tolist()
            raise ValueError(f"x has NaN or infinite values in images {bad[:20]}: probe finite images")


def check_transform(transform, x: Tensor, magnitudes: Sequence[float] = ()) -> bool:
    """Refuse, before any pass, a transform that is not callable, or an augnet transform that cannot take ``x``
    (its shape, dtype) or one of ``magnitudes``; return whether ``transform`` is an augnet transform.

    A plain callable's inputs and magnitudes are its own to check (it is called as the probe documents).
    """
    if not callable(transform):
        raise TypeError(f"transform must be an augnet transform or a callable, got {type(transform).__name__}")
    if not _is_augnet_transform(transform):
        return False
    transform.check_input(x)
    for m in magnitudes:
        transform.check_magnitude(m, x)
    return True


def _is_augnet_transform(transform) -> bool:
    from augnet.transforms.base import Transform

    return isinstance(transform, Transform)


class Transformed:
    """``transform(x, magnitude, generator=g)``, computed batch by batch when it can be.

    For an augnet transform that does not mix samples, the parameters of every row are drawn at
    once from ``generator`` (exactly the draw ``transform(x, magnitude, generator=g)`` makes) and
    :meth:`rows` applies those of the rows asked for: the transformed inputs are never built whole,
    and any batching gives the rows of the whole call. ``params`` replays given parameters instead
    (one row of parameters per input). Any other callable, or a transform that mixes samples, is
    called once on all of ``x`` and its output is sliced.

    Shape:
        - x: (N, ...); :meth:`rows` returns (stop - start, ...).

    Examples:
        >>> from augnet.transforms import image as T
        >>> x = torch.rand(5, 3, 8, 8)
        >>> t = Transformed(T.Rotate(), x, 0.5, torch.Generator().manual_seed(0))
        >>> whole = T.Rotate()(x, 0.5, generator=torch.Generator().manual_seed(0))
        >>> bool(torch.equal(torch.cat([t.rows(0, 2), t.rows(2, 5)]), whole))
        True
    """

    def __init__(self, transform, x: Tensor, magnitude, generator=None, params: dict | None = None) -> None:
        if not callable(transform):
            raise TypeError(f"transform must be callable, got {type(transform).__name__}")
        if not isinstance(x, Tensor):
            raise TypeError(f"x must be a tensor, got {type(x).__name__}")
        self.transform, self.x, self.magnitude = transform, x, magnitude
        self.params: dict | None = None
        self._whole: Tensor | None = None
        if _is_augnet_transform(transform) and not transform.mixes_samples:
            transform.check_input(x)
            if params is None:
                params = transform.draw_params(x, magnitude, generator)  # the draw of transform(x, m, generator=g)
            self.params = dict(params)
        elif params is not None:
            self._whole = transform(x, magnitude, params=params)
        else:
            self._whole = transform(x, magnitude, generator=generator)
        whole = self._whole
        if whole is not None and (not isinstance(whole, Tensor) or whole.dim() == 0 or whole.shape[0] != len(x)):
            got = tuple(self._whole.shape) if isinstance(self._whole, Tensor) else type(self._whole).__name__
            raise ValueError(f"the transform must return {len(x)} transformed inputs, got {got}")

    def __len__(self) -> int:
        return len(self.x)

    @property
    def shape(self) -> torch.Size:
        return self.x.shape if self._whole is None else self._whole.shape

    def rows(self, start: int, stop: int) -> Tensor:
        """The transformed rows ``start:stop``."""
        if self._whole is not None:
            return self._whole[start:stop]
        n = len(self.x)
        part = {
            k: v[start:stop] if isinstance(v, Tensor) and v.dim() and v.shape[0] == n else v
            for k, v in self.params.items()
        }
        return self.transform(self.x[start:stop], self.magnitude, params=part)

    def whole(self) -> Tensor:
        """All the transformed rows at once (the memory of a copy of ``x``)."""
        return self._whole if self._whole is not None else self.rows(0, len(self.x))


def rows_of(inputs, start: int, stop: int) -> Tensor:
    """Rows ``start:stop`` of a tensor or of a :class:`Transformed`."""
    return inputs.rows(start, stop) if isinstance(inputs, Transformed) else inputs[start:stop]
