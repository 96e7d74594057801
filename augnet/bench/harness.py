"""Timing and peak memory of the augmentation layer: each ``tap_mix`` backend and the eager path.

What is measured (``augnet bench``, or ``python benchmarks/bench_tap_mix.py``):
an :class:`~augnet.AugmentationLayer` of the five geometric transforms
(TranslateX, TranslateY, Rotate, ShearX, ShearY), in training mode, magnitudes
0.5, on a float32 batch of ``B = 64`` images making ``C = 4`` copies
(``layer(x, copies=4)``), for square images of each size (3 x 32 x 32 and
3 x 128 x 128 by default), in two modes:

- ``forward``: the layer's call (parameter sampling, taps and the mixture), the
  layer parameters requiring grad as in training, ``x`` a plain data batch;
- ``forward+backward``: the call, then the gradients of ``out.sum()`` with
  respect to the layer parameters (``torch.autograd.grad``, so that nothing
  accumulates between calls): a training step of a first augmentation layer,
  whose input is a data batch;
- ``forward+backward+dx``: the same, also with respect to ``x``, as for a
  layer that follows another one.

Providers:

- each ``tap_mix`` backend usable on the device (:func:`augnet.ops.available_backends`),
  selected through the layer's ``backend`` attribute. The Triton backend is left
  out on CPU unless asked for with ``--providers``: there it runs in Triton's
  interpreter, a correctness tool that would take far beyond the time budget;
- ``eager``: the per-transform path of the official AugNet code, with kornia
  (:func:`~augnet.bench.eager.eager_augment`).

Timing: :class:`torch.utils.benchmark.Timer` (``blocked_autorange``) with the
process's torch thread count, for at least ``min_run_time`` seconds and at
least ``min_runs`` measurements (blocks of calls; one call per block for calls
slower than about a millisecond); the median time per call is reported, and the
throughput is ``B * C`` augmented images per call divided by it.

Peak memory of one call, above what was allocated before it:

- CUDA: ``torch.cuda.max_memory_allocated()`` after ``reset_peak_memory_stats()``,
  minus ``torch.cuda.memory_allocated()`` before the call;
- CPU: the allocation and free events of the CPU allocator, recorded by
  ``torch.profiler.profile(profile_memory=True)`` over one call, put in time
  order and summed; the peak of that running sum is the peak of live tensor
  bytes the call added (the output and, in forward mode, the tensors autograd
  keeps for the backward pass included). When those events cannot be read, the
  fallback counts the storages autograd saves for the backward pass
  (``torch.autograd.graph.saved_tensors_hooks``) plus the output: a lower bound.
  Each record names the method it used.

Before timing, each backend's forward output on a seeded draw is compared with
the reference backend's (``max_abs_diff_vs_reference`` in the forward records),
so that a fast but wrong backend shows. The JSON also keeps the machine and
the load average before and after the run (:mod:`augnet.bench.machine`).

Examples:
    >>> from augnet.bench import BenchConfig, run_benchmark
    >>> cfg = BenchConfig.quick(sizes=(8,), providers=("eager", "reference"), modes=("forward",))
    >>> result = run_benchmark(cfg, log=None)
    >>> sorted(r["provider"] for r in result["records"])
    ['eager', 'reference']
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import sys
import time
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from augnet._checks import MAX_THREADS, is_int, is_real, number
from augnet.bench.eager import EAGER, _has_kornia, eager_augment
from augnet.bench.machine import _loadavg, machine_info
from augnet.layers import AugmentationLayer
from augnet.ops import available_backends, dispatch
from augnet.transforms import image as T

__all__ = [
    "MODES",
    "BenchConfig",
    "benchmark_classes",
    "cpu_peak_bytes",
    "default_providers",
    "geometric_layer",
    "run_benchmark",
]

MODES = ("forward", "forward+backward", "forward+backward+dx")
#: Backends left out by default on a device type, where they exist for correctness only.
SLOW_BY_DEFAULT = {"cpu": ("triton",)}
MIB = 1024.0**2


@dataclasses.dataclass
class BenchConfig:
    """Settings of a benchmark run (defaults: the full run)."""

    sizes: tuple[int, ...] = (32, 128)
    batch: int = 64
    copies: int = 4
    channels: int = 3
    modes: tuple[str, ...] = MODES
    device: str | torch.device = "cpu"  # "cpu" or "cuda" (a torch.device of either too)
    threads: int | None = None  # torch CPU threads (at most 4096); None keeps torch's choice
    providers: tuple[str, ...] | None = None  # None: eager plus every backend usable on the device
    min_run_time: float = 1.0  # seconds of timed calls per measurement, at least
    min_runs: int = 5  # timed calls per measurement, at least
    init_magnitude: float = 0.5
    seed: int = 0

    @classmethod
    def quick(cls, **overrides) -> BenchConfig:
        """Tiny images and few repeats: checks the setup in seconds (for tests)."""
        settings = dict(sizes=(8, 16), batch=8, min_run_time=0.02, min_runs=3)
        settings.update(overrides)
        return cls(**settings)

    def validate(self) -> None:
        """Raise ``ValueError`` for settings that cannot run (``TypeError`` for a setting of the wrong type).

        The numbers may be NumPy scalars or 0-d tensors, ``sizes`` a 1-D array or tensor: :func:`run_benchmark`
        runs on (and records) the Python numbers they hold. Nothing is changed in place.
        """
        for name in ("sizes", "modes", "providers"):  # a string would be read as its characters
            value = getattr(self, name)
            allowed = isinstance(value, Sequence) or (value is None and name == "providers")
            allowed = allowed or len(getattr(value, "shape", ())) == 1  # a 1-D array or tensor of sizes
            if isinstance(value, (str, bytes)) or not allowed:
                raise TypeError(f"{name} must be a sequence (a tuple or a list), got {type(value).__name__}: {value!r}")
        sizes = [number("sizes", s) for s in self.sizes]  # a tensor's elements: the ints they hold
        # a NumPy scalar's too, said as 8, not repr; a tensor or an array of values (1-D or more) is no size: refused
        sizes = [s.item() if getattr(s, "ndim", None) == 0 else s for s in sizes]
        if not all(is_int(s) for s in sizes):
            raise TypeError(f"sizes must be integers, got {sizes}")
        if not sizes or any(s < 1 for s in sizes):
            raise ValueError(f"sizes must be positive integers, got {sizes}")
        value = {name: number(name, getattr(self, name)) for name in _NUMBERS}
        for name in ("batch", "copies", "channels", "min_runs", "threads", "seed"):
            if not (is_int(value[name]) or (value[name] is None and name == "threads")):  # a bool is not a count
                raise TypeError(f"{name} must be an int, got {type(value[name]).__name__}: {value[name]!r}")
        for name in ("batch", "copies", "channels", "min_runs"):
            if value[name] < 1:
                raise ValueError(f"{name} must be >= 1, got {value[name]}")
        # torch.set_num_threads takes counts no machine can start: 2**31 - 1 ends the process at the first op
        if value["threads"] is not None and not 1 <= value["threads"] <= MAX_THREADS:
            raise ValueError(f"threads must be >= 1 and at most {MAX_THREADS}, got {value['threads']}")
        if not 0 <= value["seed"] < 2**63:  # torch's generators take seeds below 2**64; negatives wrap round
            raise ValueError(f"seed must be in [0, 2**63 - 1], got {value['seed']}")
        for name in ("min_run_time", "init_magnitude"):
            if not is_real(value[name]):
                raise TypeError(f"{name} must be a number, got {value[name]!r}")
        if not (value["min_run_time"] > 0 and math.isfinite(value["min_run_time"])):  # an infinite one never ends
            raise ValueError(f"min_run_time must be positive and finite, got {value['min_run_time']}")
        if not 0.0 <= value["init_magnitude"] <= 1.0:
            raise ValueError(f"init_magnitude must lie in [0, 1], got {value['init_magnitude']}")
        bad = [m for m in self.modes if m not in MODES]
        if bad or not len(self.modes):  # an array of modes has no truth value
            raise ValueError(f"modes must be among {MODES}, got {list(self.modes)}")
        if self.providers is not None and not len(self.providers):  # not the default's every provider
            raise ValueError("providers must name at least one provider (None: eager and every usable backend), "
                             f"got {list(self.providers)}")  # fmt: skip
        odd = [p for p in self.providers or () if not isinstance(p, str)]  # a list among them: no name, unhashable
        if odd:
            raise TypeError(f"providers must be names (strings), got {odd[0]!r} in {list(self.providers)}")
        if not isinstance(self.device, (str, torch.device)):
            raise TypeError(f"device must be 'cpu' or 'cuda', got {type(self.device).__name__}: {self.device!r}")
        if str(self.device) not in ("cpu", "cuda"):
            raise ValueError(f"device must be 'cpu' or 'cuda', got {self.device!r}")
        if str(self.device) == "cuda" and not torch.cuda.is_available():
            raise ValueError("device 'cuda' asked for, but torch sees no CUDA device here")

    def _plain(self) -> BenchConfig:
        """A copy of these (validated) settings in Python's types: what a run uses and its JSON records."""
        value = {name: number(name, getattr(self, name)) for name in _NUMBERS}
        kinds = {"min_run_time": float, "init_magnitude": float}
        value = {name: v if v is None else kinds.get(name, int)(v) for name, v in value.items()}
        providers = None if self.providers is None else tuple(self.providers)
        sizes = tuple(int(number("sizes", s)) for s in self.sizes)
        return dataclasses.replace(
            self, sizes=sizes, modes=tuple(self.modes), providers=providers, device=str(self.device), **value
        )


#: The settings that hold one number (read with :func:`augnet._checks.number`).
_NUMBERS = ("batch", "copies", "channels", "min_runs", "threads", "seed", "min_run_time", "init_magnitude")


def geometric_layer(init_magnitude: float = 0.5, backend: str = "auto") -> AugmentationLayer:
    """The benchmarked layer: the five geometric transforms, in training mode.

    It blends (``train_mode="mix"``), as the eager baseline does; sampled training rows run the same taps
    (every transform's, for the weights' gradient), so the cost is the same.
    """
    layer = AugmentationLayer(
        [cls() for cls in T.GEOMETRIC], init_magnitude=init_magnitude, backend=backend, train_mode="mix"
    )
    return layer.train()


def _make_call(provider: str, layer: AugmentationLayer, x: Tensor, copies: int, mode: str) -> Callable[[], object]:
    if provider == EAGER:

        def augment():
            return eager_augment(layer, x, copies)

    else:
        layer.backend = provider

        def augment():
            return layer(x, copies=copies)

    if mode == "forward":
        return augment
    inputs = [x, *layer.parameters()] if x.requires_grad else list(layer.parameters())

    def step():
        return torch.autograd.grad(augment().sum(), inputs)

    return step


# --------------------------------------------------------------------------- measurements


def benchmark_classes():
    """``torch.utils.benchmark``'s Measurement and Timer, imported without the
    CUDA_HOME warning its extension builder logs on machines without a GPU."""
    from augnet.ops._cpp import quiet_cpp_extension_log

    with quiet_cpp_extension_log():
        from torch.utils.benchmark import Measurement, Timer
    return Measurement, Timer


def _sync(device: str | torch.device) -> None:
    """Wait for the work queued on a CUDA device (``"cuda"``, ``"cuda:1"`` or a :class:`torch.device` of one);
    nothing to wait for on another device. A timing that skipped it would time the kernels' launches only."""
    if str(device).partition(":")[0] == "cuda":
        torch.cuda.synchronize(device)


def _time(fn: Callable[[], object], cfg: BenchConfig, estimate_s: float) -> dict:
    Measurement, Timer = benchmark_classes()

    timer = Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
    parts = [timer.blocked_autorange(min_run_time=max(cfg.min_run_time, cfg.min_runs * estimate_s))]
    # Calls slower than the warm-up estimate can leave fewer than min_runs measurements: top up.
    while (missing := cfg.min_runs - sum(len(m.times) for m in parts)) > 0:
        parts.append(timer.blocked_autorange(min_run_time=missing * parts[-1].median * 1.05))
    m = parts[0] if len(parts) == 1 else Measurement.merge(parts)[0]
    return {
        "median_ms": m.median * 1e3,
        "iqr_ms": m.iqr * 1e3,
        "runs": sum(len(p.times) * p.number_per_run for p in parts),
        "measurements": len(m.times),
    }


@contextlib.contextmanager
def _quiet_stderr():
    """Silence the profiler's C-level start/stop lines on file descriptor 2."""
    if sys.stderr is not None:  # None: Python found no descriptor 2 at start (e.g. `augnet bench 2>&-`)
        sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no usable descriptor 2: nothing to silence
        yield
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def cpu_peak_bytes(fn: Callable[[], object]) -> tuple[int, int]:
    """Peak and final live bytes that one call of ``fn`` adds on the CPU allocator.

    Replays the allocation (positive) and free (negative) events that
    ``torch.profiler.profile(profile_memory=True)`` records, in time order;
    the result of ``fn`` is alive at the end, so the final count includes it.

    Returns:
        ``(peak, final)`` in bytes.

    Raises:
        TypeError: ``fn`` is not callable.
        RuntimeError: the profiler gives no readable memory events (a torch without them, or an ``fn`` that
            allocates nothing on the CPU).

    Examples:
        >>> peak, final = cpu_peak_bytes(lambda: torch.empty(1 << 20, dtype=torch.uint8))
        >>> peak >= 1 << 20 and final >= 1 << 20
        True
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}: {fn!r}")
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        result = fn()
    try:
        raw = prof.profiler.kineto_results.events()
        events = [
            (e.start_ns(), e.nbytes()) for e in raw if e.name() == "[memory]" and e.device_type() == DeviceType.CPU
        ]
    except AttributeError as err:
        raise RuntimeError(f"the profiler's memory events are not readable in this torch version ({err})") from err
    if not events:
        raise RuntimeError("the profiler recorded no CPU memory events")
    del result
    live = peak = 0
    for _, nbytes in sorted(events, key=lambda e: e[0]):  # stable: ties keep the recording order
        live += nbytes
        peak = max(peak, live)
    return peak, live


def _saved_tensor_bytes(fn: Callable[[], object]) -> int:
    """Fallback: bytes of the storages autograd saves during ``fn`` plus its output's (a lower bound)."""
    storages: dict[int, int] = {}

    def pack(t):
        s = t.untyped_storage()
        storages[s.data_ptr()] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        result = fn()
    outputs = result if isinstance(result, tuple) else (result,)
    for t in outputs:
        if isinstance(t, Tensor):
            storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    return sum(storages.values())


def _peak_memory(fn: Callable[[], object], device: str) -> tuple[int, str]:
    if device == "cuda":
        _sync(device)
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        result = fn()
        _sync(device)
        peak = torch.cuda.max_memory_allocated() - before
        del result
        return peak, "cuda.max_memory_allocated"
    try:
        return cpu_peak_bytes(fn)[0], "profiler allocation events"
    except RuntimeError:
        return _saved_tensor_bytes(fn), "saved tensors + output (lower bound)"


def default_providers(x: Tensor) -> list[str]:
    """``eager`` (where kornia is installed) plus the ``tap_mix`` backends usable on ``x`` (registry order).

    Raises:
        TypeError: ``x`` is not a tensor (its device is what is asked about).
    """
    if not isinstance(x, Tensor):
        raise TypeError(f"x must be a tensor (on the device to ask about), got {type(x).__name__}: {x!r}")
    slow = SLOW_BY_DEFAULT.get(x.device.type, ())
    return [*([EAGER] if _has_kornia() else []), *(b for b in available_backends(x) if b not in slow)]


def _check_providers(names: Sequence[str], x: Tensor, flag: str | None = None) -> list[str]:
    """``names`` without repeats, or the ValueError of a provider that is unknown or cannot run on ``x``'s device.

    ``flag``: the command line's option (``"--providers"``), which the messages then name, with the names as typed.
    """
    given = (lambda bad: f"{flag} {' '.join(bad)}") if flag else (lambda bad: f"providers {bad}")
    if EAGER in names and not _has_kornia():
        who = given([EAGER]) if flag else "the eager provider"
        raise ValueError(f'{who} needs kornia, which is not installed: pip install "augnet[bench]"')
    usable = set(available_backends(x)) | ({EAGER} if _has_kornia() else set())  # named usable only if it is
    unknown = [n for n in names if n != EAGER and n not in dispatch._BACKENDS]
    if unknown and flag:
        raise ValueError(f"{given(unknown)}: unknown; the providers are 'eager' and the tap_mix backends "
                         f"({', '.join(sorted(dispatch._BACKENDS))})")  # fmt: skip
    if unknown:
        raise ValueError(f"unknown providers {unknown}: 'eager' or a tap_mix backend {sorted(dispatch._BACKENDS)}")
    bad = [n for n in names if n not in usable]
    if bad:
        shown = ", ".join(sorted(usable)) if flag else sorted(usable)
        raise ValueError(f"{given(bad)} cannot run on {x.device.type} here; usable: {shown}")
    return list(dict.fromkeys(names))


def run_benchmark(cfg: BenchConfig, log: Callable[[str], None] | None = print) -> dict:
    """Run every provider, size and mode of ``cfg``; return the result (JSON-ready dict).

    Args:
        cfg: the settings.
        log: called with one line per finished measurement (``None``: silent).

    A size or mode listed twice is run once. ``cfg.threads`` holds during the run only: the caller's
    thread count is restored at the end. NumPy scalars or 0-d tensors in ``cfg`` are run and recorded as the
    Python numbers they hold (``cfg`` itself is left as it is).

    Raises:
        ValueError, TypeError: settings :meth:`BenchConfig.validate` refuses (a ``cfg`` that is not a
            :class:`BenchConfig`: a TypeError), or providers that are unknown or cannot run on the device, before
            anything is timed; a ``log`` that is neither callable nor ``None``: a TypeError, before anything too.
    """
    if not isinstance(cfg, BenchConfig):
        raise TypeError(f"cfg must be a BenchConfig, got {type(cfg).__name__}: {cfg!r}")
    if log is not None and not callable(log):  # else found after the first measurement
        raise TypeError(f"log must be a callable or None, got {type(log).__name__}: {log!r}")
    cfg.validate()
    cfg = cfg._plain()
    threads = torch.get_num_threads()
    if cfg.threads is not None:
        torch.set_num_threads(cfg.threads)
    try:
        return _run(cfg, log)
    finally:  # the caller's thread count, as it was
        torch.set_num_threads(threads)


def _run(cfg: BenchConfig, log: Callable[[str], None] | None) -> dict:
    # A size or mode given twice would be timed twice and its speed-ups read from the other run: once each.
    sizes, modes = list(dict.fromkeys(int(s) for s in cfg.sizes)), list(dict.fromkeys(cfg.modes))
    device = cfg.device
    gen = torch.Generator().manual_seed(cfg.seed)
    probe = torch.zeros(1, 1, 1, 1, device=device)
    providers = _check_providers(cfg.providers, probe) if cfg.providers else default_providers(probe)
    load_before = _loadavg()
    start = time.perf_counter()
    records = []
    widths = _progress_widths(providers, sizes, modes)
    for size in sizes:
        x = torch.rand(cfg.batch, cfg.channels, size, size, generator=gen).to(device)
        reference_out = None
        for mode in modes:
            for provider in providers:
                layer = geometric_layer(cfg.init_magnitude).to(device)
                xi = x.detach().clone().requires_grad_(mode == "forward+backward+dx")
                fn = _make_call(provider, layer, xi, cfg.copies, mode)
                record = {"provider": provider, "kind": "eager" if provider == EAGER else "layer", "size": size}
                record["mode"] = mode
                if mode == "forward" and provider != EAGER:
                    # Warm-up call on a seeded draw, compared with the reference backend's output.
                    draw = torch.Generator(device=device).manual_seed(cfg.seed)
                    t0 = time.perf_counter()
                    out = layer(xi, copies=cfg.copies, generator=draw).detach()
                    _sync(device)
                    estimate = time.perf_counter() - t0
                    if provider == "reference":
                        reference_out = out
                    elif reference_out is None:  # a backend listed before the reference (or without it): its draw
                        check = geometric_layer(cfg.init_magnitude, backend="reference").to(device)
                        draw = torch.Generator(device=device).manual_seed(cfg.seed)
                        reference_out = check(xi, copies=cfg.copies, generator=draw).detach()
                        del check
                    record["max_abs_diff_vs_reference"] = float((out - reference_out).abs().max())
                    del out
                else:
                    t0 = time.perf_counter()
                    fn()
                    _sync(device)
                    estimate = time.perf_counter() - t0
                peak, method = _peak_memory(fn, device)
                record.update(_time(fn, cfg, estimate))
                record["images_per_s"] = cfg.batch * cfg.copies / (record["median_ms"] / 1e3)
                record["peak_bytes"] = int(peak)
                record["peak_mib"] = peak / MIB
                record["memory_method"] = method
                records.append(record)
                if log is not None:
                    log(_progress_line(record, widths))
    _add_speedups(records)
    return {
        "benchmark": "tap_mix",
        "description": (
            "AugmentationLayer of the 5 geometric transforms (training mode) vs the eager per-transform "
            "kornia path; median time per call"
        ),
        "config": dataclasses.asdict(cfg) | {"sizes": sizes, "modes": modes, "providers": providers},
        "machine": machine_info(device),
        "load_average": {"before": load_before, "after": _loadavg()},
        "seconds": time.perf_counter() - start,
        "records": records,
    }


def _progress_widths(providers, sizes, modes) -> tuple[int, int, int]:
    """The widths of the provider, size and mode columns of :func:`_progress_line`: the longest of the run's, so
    that every line of a run has its numbers in the same columns (``forward+backward+dx`` is 19 characters)."""
    return max([10, *map(len, providers)]), max([4, *(len(str(s)) for s in sizes)]), max([17, *map(len, modes)])


def _progress_line(record: dict, widths: tuple[int, int, int]) -> str:
    """The line :func:`run_benchmark` logs for one finished measurement, its columns ``widths`` wide
    (:func:`_progress_widths`)."""
    provider, size, mode = widths
    return (
        f"  {record['provider']:<{provider}} {record['size']:>{size}}px  {record['mode']:<{mode}} "
        f"{record['median_ms']:10.2f} ms ({record['runs']} runs)  peak {record['peak_mib']:8.1f} MiB"
    )


def _add_speedups(records: list[dict]) -> None:
    base = {(r["provider"], r["size"], r["mode"]): r["median_ms"] for r in records}
    for r in records:
        for name, key in ((EAGER, "speedup_vs_eager"), ("reference", "speedup_vs_reference")):
            ref = base.get((name, r["size"], r["mode"]))
            r[key] = ref / r["median_ms"] if ref is not None and r["median_ms"] > 0 else None
