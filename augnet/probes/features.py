"""Activations of named layers, read with forward hooks (no model edits), batch by batch.

What a layer is. A layer is one *call* of a module in the model's forward pass. Most modules are
called once, and their name (from ``model.named_modules()``) is the layer. A module called several
times per forward pass (torchvision's ResNet blocks call their ``relu`` twice, Bottlenecks three
times) is several layers, named ``"name#0"``, ``"name#1"``, ... in the order of the calls
(:data:`CALL`); its plain name is refused with a ValueError that lists them, rather than standing
for one call silently. Every probe reads, normalises and (in :func:`~augnet.probes.select_tau`)
ablates exactly the call named. :func:`layer_calls` says how often each module is called.

Every function here runs the model in evaluation mode and restores its modes afterwards
(:func:`augnet.probes._common.evaluating`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import contextmanager

import einops
import torch
from torch import Tensor, nn

from augnet.probes._common import Transformed, batch_size_of, check_model_input, evaluating, rows_of

__all__ = [
    "CALL",
    "LOGITS",
    "OUTPUT",
    "REDUCTIONS",
    "check_layers",
    "describe",
    "features",
    "layer_calls",
    "reduce_features",
    "split_call",
    "stream_features",
]

REDUCTIONS = ("none", "mean", "tokens", "flatten")
#: The model's own output (for an AugNet: its aggregate, by default the mean of log-softmax over the copies).
OUTPUT = "output"
#: For an AugNet, its trunk's outputs averaged over the C copies: the scores before its final softmax (the AugNet
#: paper's eq. 4 footnote); for any other model, its output as it is (as :data:`OUTPUT`), whatever that holds.
LOGITS = "logits"
#: Separates a module's name from the index of one of its calls: ``"layer1.0.relu#1"`` is the second call.
CALL = "#"


def reduce_features(a: Tensor, reduce: str) -> Tensor:
    """Reduce a (B, ...) activation: ``"none"``, ``"mean"``, ``"tokens"`` or ``"flatten"`` (B, -1).

    ``"mean"`` is the global average pool: every axis after the channel axis averaged, giving (B, Ch)
    (a (B, C, H, W) feature map, or a (B, C, T) one of a signal model). ``"tokens"`` reads a
    transformer's (B, tokens, D) output and averages its tokens, giving (B, D), as
    :func:`~augnet.probes.report` reads a 3-D layer of an image model; (B, D) outputs (the logits)
    are kept as they are, and any other shape is refused.

    Examples:
        >>> tokens = torch.rand(2, 17, 16)  # a ViT block's output: 17 tokens of 16 dimensions
        >>> reduce_features(tokens, "tokens").shape, reduce_features(tokens, "mean").shape
        (torch.Size([2, 16]), torch.Size([2, 17]))
    """
    if reduce not in REDUCTIONS:
        raise ValueError(f"reduce must be one of {REDUCTIONS}, got {reduce!r}")
    if reduce == "none":
        return a
    if reduce == "flatten":
        return a.reshape(len(a), -1)  # a (B,) output, one number per input: (B, 1)
    if reduce == "tokens":
        if a.dim() not in (2, 3):
            raise ValueError(f'reduce="tokens" reads (B, tokens, D) outputs (or (B, D) ones), got {tuple(a.shape)}')
        return a.mean(1) if a.dim() == 3 else a
    return a.flatten(2).mean(2) if a.dim() > 2 else a


def check_rows(feats: Mapping[str, Tensor], n: int) -> None:
    """Refuse features without one row per input: what a probe pairing each input with its own features needs.

    A model that returns several rows per input, or a batch statistic, would otherwise be paired row by
    row with the wrong inputs (or fail deep inside a measure).
    """
    for name, a in feats.items():
        if a.dim() == 0 or a.shape[0] != n:
            what = "the model's output" if name in (OUTPUT, LOGITS) else f"layer {name!r}"
            raise ValueError(
                f"{what} has shape {tuple(a.shape)} for {n} inputs: the probe pairs each input with its own "
                "features and needs one row per input, batch first"
            )


def split_call(name: str) -> tuple[str, int | None]:
    """``"relu#1"`` -> ``("relu", 1)``; a name without :data:`CALL` -> ``(name, None)``.

    Examples:
        >>> split_call("layer1.0.relu#1"), split_call("fc")
        (('layer1.0.relu', 1), ('fc', None))
    """
    module, sep, index = name.rpartition(CALL)
    if not sep:
        return name, None
    if not index.isdigit():
        raise ValueError(f"layer {name!r}: the call index after {CALL!r} must be an integer >= 0")
    return module, int(index)


def describe(model: nn.Module, name: str, copies: int | None = None) -> str:
    """What :func:`features` reads under ``name`` for ``model``, in words (the probes report it).

    Examples:
        >>> describe(nn.Linear(2, 3), "logits")
        'logits: the output of Linear'
    """
    from augnet.model import AugNet

    if name == LOGITS:
        if isinstance(model, AugNet):
            c = copies if copies is not None else model.eval_copies
            return f"logits: the AugNet's trunk outputs averaged over its {c} copies (before any softmax)"
        return f"logits: the output of {type(model).__name__}"
    if name == OUTPUT:
        if isinstance(model, AugNet):
            return f"output: the AugNet's aggregate ({model.aggregation!r} over the copies)"
        return f"output: the output of {type(model).__name__}"
    module, index = split_call(name)
    return f"layer {name!r}" if index is None else f"layer {module!r}, call {index}"


def _augnets(model: nn.Module) -> dict[str, nn.Module]:
    from augnet.model import AugNet

    return {name: m for name, m in model.named_modules() if isinstance(m, AugNet)}


def _owner(name: str, augnets: dict[str, nn.Module]) -> str | None:
    """The name of the innermost AugNet that contains the module ``name`` (``""`` for the model itself)."""
    best = None
    for prefix in augnets:
        if prefix == name:
            continue  # an AugNet's own output has one row per sample
        inside = prefix == "" or name.startswith(prefix + ".")
        if inside and (best is None or len(prefix) > len(best)):
            best = prefix
    return best


#: Rows of the checking pass of :func:`layer_calls` (and :func:`check_layers`): two, not one, so that a
#: model computing a batch statistic (a batch norm without running statistics) runs as in the probe.
CHECK_ROWS = 2


def _probe_kwargs(model: nn.Module, x: Tensor, forward_kwargs: dict) -> dict:
    """The forward arguments with every generator replaced by a fresh seeded one, and one given to an AugNet
    that was passed none: a checking pass draws nothing from the caller's generators or torch's global one."""
    from augnet.model import AugNet

    out = {
        k: torch.Generator(device=v.device).manual_seed(0) if isinstance(v, torch.Generator) else v
        for k, v in forward_kwargs.items()
    }
    if isinstance(model, AugNet) and out.get("generator") is None:
        out["generator"] = torch.Generator(device=x.device).manual_seed(0)
    return out


@contextmanager
def _global_rng_kept(x: Tensor):
    """Restore torch's global random state (the CPU's, and the CUDA device of ``x``) on exit: a module that draws
    from it (dropout left in training mode, an AugNet nested in another model) leaves no trace."""
    devices = [x.device.index if x.device.index is not None else torch.cuda.current_device()] if x.is_cuda else []
    with torch.random.fork_rng(devices=devices):
        yield


@torch.no_grad()
def layer_calls(model: nn.Module, x: Tensor, layers: Sequence[str] | None = None, **forward_kwargs) -> dict[str, int]:
    """How many times each module is called in one forward pass of ``model`` on ``x[:2]``.

    The pass runs two rows (``CHECK_ROWS``; all of ``x`` when it has fewer), so that a model that
    needs more than one row (a batch norm without running statistics) runs; it leaves torch's global
    random state as it found it (an AugNet draws from a seeded generator of its own).

    Args:
        model: any module (run in evaluation mode, its modes restored).
        x: inputs; only the first two rows are run (checked as a probe checks its images).
        layers: a module name or names to count (default every named submodule).
        forward_kwargs: passed to the model (an AugNet's ``copies``; any generator is replaced).

    Returns:
        ``{name: calls}``; a module called ``k > 1`` times is read as the layers ``name#0`` ... ``name#{k-1}``.

    Raises:
        TypeError: ``model`` is not a module, ``x`` is not a tensor.
        ValueError: ``x`` is 0-d or empty, or a name is not one of the model's modules.

    Examples:
        >>> relu = nn.ReLU()
        >>> net = nn.Sequential(nn.Linear(2, 2), relu, nn.Linear(2, 2), relu)
        >>> layer_calls(net, torch.rand(3, 2), ["1", "2"])
        {'1': 2, '2': 1}
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    if not isinstance(x, Tensor):  # an array was "a non-empty batch of inputs, got (3, 2)", which it was
        raise TypeError(f"x must be a tensor of inputs, got {type(x).__name__}")
    if x.dim() == 0 or len(x) == 0:
        raise ValueError(f"x must be a non-empty batch of inputs, got shape {tuple(x.shape)}")
    check_model_input(model, x[:CHECK_ROWS])
    modules = dict(model.named_modules())
    # One name as a string, as features() takes it (list("fc") counted modules "f" and "c").
    names = [n for n in modules if n] if layers is None else layer_names(layers, model)
    unknown = [n for n in names if n not in modules]
    if unknown:
        raise ValueError(f"unknown module(s) {unknown}; the model's modules are {[n for n in modules if n]}")
    counts = dict.fromkeys(names, 0)
    handles = []
    for name in names:

        def count(mod, inputs, out, name=name):
            counts[name] += 1

        handles.append(modules[name].register_forward_hook(count))
    try:
        with evaluating(model), _global_rng_kept(x):
            model(x[:CHECK_ROWS], **_probe_kwargs(model, x, forward_kwargs))
    finally:
        for h in handles:
            h.remove()
    return counts


def _named(model: nn.Module, value) -> str:
    """`` (the module named 'x': pass its name)`` when ``value`` is a submodule of ``model``, else ``""``."""
    if isinstance(value, nn.Module) and isinstance(model, nn.Module):
        for name, module in model.named_modules():
            if module is value:
                return f" (the module named {name!r}: pass its name)" if name else " (the model itself: pass 'output')"
    return ""


def layer_names(layers, model: nn.Module | None = None, name: str = "layers") -> list:
    """``layers`` as a list: one name (a string) or an iterable of them; the TypeError naming ``name`` for
    anything else (a module, a number, None, bytes, a tensor: they failed in ``list()`` with Python's message,
    or were read item by item). The items are checked by the caller (:func:`_resolve`)."""
    if isinstance(layers, str):
        return [layers]
    if isinstance(layers, (bytes, Tensor, nn.Module)) or not hasattr(layers, "__iter__"):
        shown = type(layers).__name__ if isinstance(layers, nn.Module) else f"{type(layers).__name__}: {layers!r:.60}"
        raise TypeError(f"{name} must be a layer name or a list of them, got {shown}{_named(model, layers)}")
    return list(layers)


def check_layer(layer) -> None:
    """The TypeError of a ``layer`` that is neither ``None`` nor one layer name (a module, a list of names: they
    failed inside the probe with Python's message, "'Conv2d' object is not iterable" or "unhashable type")."""
    if layer is not None and not isinstance(layer, str):
        shown = type(layer).__name__ if isinstance(layer, nn.Module) else f"{type(layer).__name__}: {layer!r:.60}"
        raise TypeError(f"layer must be one layer name (a str) or None, got {shown}")


def _resolve(model: nn.Module, names: list[str]) -> dict[str, tuple[str, int | None]]:
    """``{layer: (module name, call index or None)}`` for the module layers of ``names`` (not ``"output"``).

    Whether a plain name is called once, and a call index exists, is checked by :func:`call_hooks` in
    the first forward pass (a separate pass could break models that need more than one row).
    """
    from augnet.model import AugNet

    modules = dict(model.named_modules())
    wanted: dict[str, tuple[str, int | None]] = {}
    for n in names:
        if not isinstance(n, str):
            raise TypeError(f"layers must be module names (str), got {n!r}{_named(model, n)}")
        if n == LOGITS and isinstance(model, AugNet):
            wanted[n] = ("trunk", None)
        elif n not in (OUTPUT, LOGITS):
            wanted[n] = split_call(n)
    unknown = [n for n, (m, _) in wanted.items() if m not in modules or m == ""]
    if unknown:
        raise ValueError(f"unknown layer(s) {unknown}; the model's modules are {[n for n in modules if n]}")
    return wanted


def check_layers(model: nn.Module, x: Tensor, layers: str | Sequence[str], **forward_kwargs) -> None:
    """Raise the ValueError of a name in ``layers`` that is not one layer of ``model``'s forward pass.

    An unknown module, a module never called, the plain name of a module called several times (its calls
    are ``name#0``, ``name#1``, ...) or a call index past the calls, found by one forward pass on ``x[:2]``
    (see :func:`layer_calls`): what the probes would otherwise find in their first pass, after work began.
    """
    targets = _resolve(model, layer_names(layers, model))  # one name, or several
    if targets:
        modules = sorted({m for m, _ in targets.values()})
        _check_calls(targets, layer_calls(model, x, modules, **forward_kwargs))


def _check_calls(targets: dict[str, tuple[str, int | None]], counts: dict[str, int]) -> None:
    """Refuse a plain name for a module called several times, a call index past the calls, a layer not called."""
    for n, (m, index) in targets.items():
        calls = counts[m]
        if calls == 0:
            raise ValueError(f"layer {n!r} is not called by the model's forward pass")
        if index is None and calls > 1:
            named = ", ".join(repr(f"{m}{CALL}{i}") for i in range(calls))
            raise ValueError(
                f"module {m!r} is called {calls} times in one forward pass (e.g. a ReLU a ResNet block reuses); "
                f"each call is a layer of its own: name one of {named}"
            )
        if index is not None and index >= calls:
            raise ValueError(
                f"layer {n!r}: module {m!r} is called {calls} time(s) per forward pass (calls 0 to {calls - 1})"
            )


@contextmanager
def call_hooks(model: nn.Module, targets: dict[str, tuple[str, int | None]], fn: Callable):
    """Forward hooks calling ``fn(layer, output)`` on the chosen call of each target's module.

    ``targets`` is ``{layer: (module name, call index)}`` (``None``: the module's only call); a hook
    that returns a value replaces the module's output for that call (as an ``nn.Module`` forward hook
    does). The calls are counted afresh in every forward pass of ``model``. Yields ``check()``, to call
    after each forward pass: it raises a ValueError for a plain name whose module was called several
    times, or a call index past the calls. The hooks are removed on exit, also on error.
    """
    modules = dict(model.named_modules())
    counters = dict.fromkeys({m for m, _ in targets.values()}, 0)
    by_module: dict[str, list[tuple[str, int]]] = {}
    for layer, (m, index) in targets.items():
        by_module.setdefault(m, []).append((layer, 0 if index is None else index))

    def reset(mod, inputs):
        for key in counters:
            counters[key] = 0

    handles = [model.register_forward_pre_hook(reset)]
    for m, wanted in by_module.items():

        def hook(mod, inputs, out, m=m, wanted=wanted):
            index = counters[m]
            counters[m] += 1
            result = None
            for layer, i in wanted:
                if i == index:
                    got = fn(layer, out if result is None else result)
                    result = got if got is not None else result
            return result

        handles.append(modules[m].register_forward_hook(hook))
    try:
        yield lambda: _check_calls(targets, counters)
    finally:
        for h in handles:
            h.remove()


def _check_inputs(x) -> None:
    if not isinstance(x, (Tensor, Transformed)):
        raise TypeError(f"x must be a tensor, got {type(x).__name__}")
    if len(x.shape) == 0 or len(x) == 0:
        raise ValueError(f"x must be a non-empty batch, got shape {tuple(x.shape)}")


def stream_features(
    model: nn.Module,
    x: Tensor | Transformed,
    layers: str | Sequence[str],
    on_batch: Callable[[int, int, dict[str, Tensor]], None],
    reduce: str = "none",
    batch_size: int | None = None,
    **forward_kwargs,
) -> None:
    """Call ``on_batch(start, stop, {layer: (stop - start, ...) activations})`` for each batch of ``x``.

    The engine of :func:`features` (which concatenates the batches); probes that only accumulate
    statistics use it to hold one batch at a time. ``x`` may be a
    :class:`~augnet.probes._common.Transformed`, whose rows are transformed batch by batch. Autograd
    is left as the caller set it. Arguments are as in :func:`features`.
    """
    names = layer_names(layers, model)
    if not names:
        raise ValueError("layers must name at least one module")
    if reduce not in REDUCTIONS:
        raise ValueError(f"reduce must be one of {REDUCTIONS}, got {reduce!r}")
    _check_inputs(x)
    step = batch_size_of(batch_size)
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    targets = _resolve(model, names)
    augnets = _augnets(model)
    owners = {n: _owner(m, augnets) for n, (m, _) in targets.items()}
    record: dict[str, Tensor] = {}
    rows: dict[str, list[int]] = {p: [] for p in augnets}  # per AugNet: its input's and its trunk's rows
    handles = []
    for p, net in augnets.items():
        count = rows[p].append  # the AugNet's input rows, then its trunk's
        handles.append(net.register_forward_pre_hook(lambda mod, i, count=count: count(len(i[0]))))
        handles.append(net.trunk.register_forward_pre_hook(lambda mod, i, count=count: count(len(i[0]))))

    def read(layer, o):
        record[layer] = _unshared(_first_tensor(o, f"layer {layer!r}"))

    try:
        with evaluating(model), call_hooks(model, targets, read) as check:
            for start in range(0, len(x), step):
                stop = min(start + step, len(x))
                record.clear()
                for r in rows.values():
                    r.clear()
                out = model(rows_of(x, start, stop), **forward_kwargs)
                check()
                if OUTPUT in names or (LOGITS in names and LOGITS not in targets):  # read only if asked for
                    record[OUTPUT] = _first_tensor(out, "the model's output")
                if LOGITS in names and LOGITS not in targets:
                    record[LOGITS] = record[OUTPUT]
                batch = {}
                for n in names:
                    a = record[n]
                    if a.dim() == 0:
                        what = "the model's output" if n in (OUTPUT, LOGITS) and n not in targets else f"layer {n!r}"
                        raise ValueError(
                            f"{what} is a 0-d tensor (one number for {stop - start} inputs): the probes read "
                            "(B, ...) outputs, one row per input, batch first"
                        )
                    owner = owners.get(n)
                    if owner is not None and len(rows[owner]) >= 2:
                        b, seen = rows[owner][-2], rows[owner][-1]
                        copies = seen // b if b else 1
                        if copies > 1 and seen == b * copies and a.shape[0] == seen:
                            a = einops.reduce(a, "(c b) ... -> b ...", "mean", c=copies)  # c copies of b samples
                    batch[n] = reduce_features(a, reduce)
                on_batch(start, stop, batch)
    finally:
        for h in handles:
            h.remove()


@torch.no_grad()
def features(
    model: nn.Module,
    x: Tensor,
    layers: str | Sequence[str],
    reduce: str = "none",
    batch_size: int | None = None,
    **forward_kwargs,
) -> dict[str, Tensor]:
    """Activations of the named layers of ``model`` on ``x``.

    Forward hooks record each named layer's output (the model is not edited,
    the hooks are removed afterwards), as the layer returned it: a later
    in-place module (``ReLU(inplace=True)`` after a batch norm) does not change
    what is read. Two names are special: ``"output"``
    (``OUTPUT``) is the model's own output, whatever it is (for an
    :class:`~augnet.AugNet`, its aggregate over the copies), and ``"logits"``
    (``LOGITS``) is, for a model that is an :class:`~augnet.AugNet`, its
    trunk's outputs averaged over the copies (the scores before the AugNet's
    final softmax); for any other model (one that holds an AugNet inside it
    too) it is the same as ``"output"``: scores before a softmax only if that
    is what the model returns (probabilities or any other output are read as
    they are). An output, or a layer's, that is not a tensor is read at a named
    tuple's ``logits`` field, a tuple's first item or a mapping's ``"logits"``.
    A module called several times per forward pass is several layers,
    ``"name#0"``, ``"name#1"``, ... (see the module docstring).

    Inside an AugNet, whose trunk sees ``B * C`` rows (copy-major), the
    activations of a module of that AugNet with ``B * C`` rows are averaged
    over the C copies, giving one row per input; pass ``copies=`` (and
    ``generator=``) through ``forward_kwargs``. Nothing else is averaged: a
    module of any other model that returns several rows per input is returned
    as it is.

    Args:
        model: any module; it is run in evaluation mode, and every submodule's
            mode is restored afterwards.
        x: the inputs, batch first.
        layers: a name or names from ``model.named_modules()`` (``"name#k"`` for
            the k-th call of a reused module), ``"output"`` or ``"logits"``.
        reduce: ``"none"``, ``"mean"`` (global average pool: a feature map's channels
            averaged over positions, (B, C)), ``"tokens"`` (a transformer's (B, tokens, D)
            output averaged over its tokens, (B, D), as :func:`~augnet.probes.report` reads a
            3-D layer of an image model) or ``"flatten"``; see ``augnet.probes.features.reduce_features``.
        batch_size: run ``x`` in chunks of this many rows (default
            ``DEFAULT_BATCH_SIZE``).

    Returns:
        ``{name: (B, ...) tensor}`` in the order of ``layers``.

    Raises:
        TypeError, ValueError: before the model runs: inputs that are not a batch, on meta or on
            another device than the model's parameters, an unknown layer; in the first pass, a 0-d
            output or one with no tensor to read. (Their dtype and values are the model's to take: it
            may cast them; the probes that measure check those too.)

    Examples:
        >>> net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.LazyLinear(2))
        >>> out = features(net, torch.rand(5, 3, 8, 8), ["0", "output"], reduce="mean")
        >>> out["0"].shape, out["output"].shape
        (torch.Size([5, 4]), torch.Size([5, 2]))
    """
    if isinstance(model, nn.Module):  # (anything else is refused by stream_features)
        check_model_input(model, x.x if isinstance(x, Transformed) else x, values=False)
    return _features(model, x, layers, reduce, batch_size, **forward_kwargs)


def _features(model, x, layers, reduce="none", batch_size=None, **forward_kwargs) -> dict[str, Tensor]:
    """:func:`features` without its check of ``x``: for the probes, which check their images once, up front
    (not once per batch: the finiteness check reads every value and waits for the device)."""
    names = layer_names(layers, model)
    keep = _Filler(len(x) if isinstance(x, (Tensor, Transformed)) else 0)  # a bad x is refused below
    stream_features(model, x, names, keep, reduce, batch_size, **forward_kwargs)
    out = keep.result()
    return {n: out[n] for n in names}


class _Filler:
    """``keep(start, stop, batch)``: each layer's batches written into one tensor, allocated at the first batch.

    One allocation per layer rather than one small tensor per batch kept until the end: small
    long-lived blocks interleaved with a batch's large short-lived ones fragment the heap, and the
    process's resident memory then grows with the number of inputs (2.3 GB of it at 20,000 inputs
    in ``layerwise_invariance``). A layer whose batches do not have one row per input (a model that
    returns several views of each) is kept batch by batch and concatenated by :meth:`result`.
    """

    def __init__(self, rows: int, convert: Callable[[Tensor], Tensor] | None = None) -> None:
        self.rows, self.convert = rows, convert
        self.out: dict[str, Tensor] = {}
        self.parts: dict[str, list[Tensor]] = {}

    def __call__(self, start: int, stop: int, batch: dict[str, Tensor]) -> None:
        for n, value in batch.items():
            value = value if self.convert is None else self.convert(value)
            if n in self.parts or value.shape[0] != stop - start:
                self.parts.setdefault(n, [self.out.pop(n)[:start]] if n in self.out else []).append(value)
                continue
            if n not in self.out:
                self.out[n] = value.new_empty((self.rows, *value.shape[1:]))
            self.out[n][start:stop] = value

    def result(self) -> dict[str, Tensor]:
        return {**self.out, **{n: torch.cat(p) for n, p in self.parts.items()}}


def _unshared(a: Tensor) -> Tensor:
    """A copy of a layer's output as the hook sees it, which the rest of the forward pass cannot overwrite.

    The next module may work in place on it (torchvision's ``ReLU(inplace=True)`` after a batch norm, MobileNet's
    ``Hardswish(inplace=True)``): the tensor kept then held that module's output, and a batch norm's features
    were read rectified. A dense output (contiguous, or channels-last) is copied with its own strides, so the
    values and their layout (and every measure on them) are those of the output; a strided view (a slice, an
    expanded tensor) is kept as it is.
    """
    last = {4: torch.channels_last, 5: torch.channels_last_3d}.get(a.dim())
    dense = a.is_contiguous() or (last is not None and a.is_contiguous(memory_format=last))
    return a.clone() if dense else a


def _first_tensor(o, what: str = "a module output") -> Tensor:
    """The tensor an output stands for: itself, a named tuple's ``logits`` field, a tuple's first item, or a
    mapping's ``"logits"``."""
    if isinstance(o, Tensor):
        return o
    if isinstance(o, tuple) and "logits" in getattr(o, "_fields", ()) and isinstance(o.logits, Tensor):
        return o.logits  # a named tuple (probs, logits) is read at its logits, as a mapping is
    if isinstance(o, (tuple, list)) and o and isinstance(o[0], Tensor):
        return o[0]
    if isinstance(o, Mapping) and isinstance(o.get("logits"), Tensor):  # e.g. a transformers ModelOutput
        return o["logits"]
    keys = f" with keys {list(o)[:8]}" if isinstance(o, Mapping) else ""
    raise TypeError(
        f"cannot read a tensor from {what} of type {type(o).__name__}{keys}: a tensor, a tuple whose first item "
        "is one, or a mapping with a 'logits' tensor is read; probe a layer that returns one, or wrap the model"
    )
