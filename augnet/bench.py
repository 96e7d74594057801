"""Benchmark of the augmentation layer: each ``tap_mix`` backend against the eager path.

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
- ``eager``: the per-transform path of the official AugNet code
  (:func:`eager_augment`): ``x.repeat(C)``, each transform applied on its own
  with kornia (``translate``, ``rotate``, ``shear``), then the sum weighted by
  the layer's mixture weights.

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
so that a fast but wrong backend shows. The JSON also keeps the machine (CPU
model, cores, torch threads, versions, device name) and the load average
before and after the run, since timings on a shared machine depend on it.

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
import importlib.util
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from torch import Tensor

from augnet.experiments.trunks import resnet18
from augnet.layers import AugmentationLayer
from augnet.model import AugNet, aggregate
from augnet.ops import available_backends
from augnet.transforms import image as T
from augnet.transforms.base import Transform

__all__ = [
    "EAGER",
    "MODES",
    "BenchConfig",
    "cpu_peak_bytes",
    "default_providers",
    "eager_augment",
    "format_table",
    "geometric_layer",
    "kornia_warp",
    "machine_info",
    "plot_results",
    "run_benchmark",
    "run_from_args",
    "save_results",
]

#: Name of the eager (per-transform, kornia) provider.
EAGER = "eager"
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
    device: str = "cpu"
    threads: int | None = None  # torch CPU threads; None keeps torch's choice
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
        """Raise ``ValueError`` for settings that cannot run."""
        if not self.sizes or any(int(s) < 1 for s in self.sizes):
            raise ValueError(f"sizes must be positive integers, got {list(self.sizes)}")
        for name in ("batch", "copies", "channels", "min_runs"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads must be >= 1, got {self.threads}")
        if not self.min_run_time > 0:
            raise ValueError(f"min_run_time must be positive, got {self.min_run_time}")
        bad = [m for m in self.modes if m not in MODES]
        if bad or not self.modes:
            raise ValueError(f"modes must be among {MODES}, got {list(self.modes)}")
        if self.device not in ("cpu", "cuda"):
            raise ValueError(f"device must be 'cpu' or 'cuda', got {self.device!r}")
        if self.device == "cuda" and not torch.cuda.is_available():
            raise ValueError("device 'cuda' asked for, but torch sees no CUDA device here")


# --------------------------------------------------------------------------- the two paths


def geometric_layer(init_magnitude: float = 0.5, backend: str = "auto") -> AugmentationLayer:
    """The benchmarked layer: the five geometric transforms, in training mode."""
    layer = AugmentationLayer([cls() for cls in T.GEOMETRIC], init_magnitude=init_magnitude, backend=backend)
    return layer.train()


def eager_augment(
    layer: AugmentationLayer, x: Tensor, copies: int = 1, generator: torch.Generator | None = None
) -> Tensor:
    """The training-time mixture of a geometric layer, computed the eager way.

    This is how the official AugNet code runs an augmentation layer: the batch
    is repeated ``copies`` times, each transform warps the whole repeated batch
    on its own with kornia, and the results are summed with the layer's
    weights. Parameters are drawn with the transforms' own ``sample`` (same
    distributions, same dependence on the magnitudes), so gradients reach the
    weights, the magnitudes and ``x``.

    Translations and rotations give the images of the augnet transforms for
    the same parameters. Shears go through ``kornia.geometry.transform.shear``,
    which shears about the top-left pixel rather than the image centre (same
    coefficient, different fixed point); the cost is that of one warp either way.

    Args:
        layer: a layer whose transforms are among TranslateX, TranslateY,
            Rotate, ShearX and ShearY.
        x: images :math:`(B, Ch, H, W)`.
        copies: number of copies C (copy-major output, as the layer's).
        generator: source of randomness.

    Returns:
        :math:`(B \\cdot C, Ch, H, W)` augmented images.
    """
    xs = x.repeat(copies, 1, 1, 1)  # row c * B + b is x[b]
    weights, mags = layer.weights, layer.magnitudes
    out = None
    for q, t in enumerate(layer.transforms):
        y = kornia_warp(t, xs, t.sample(x, mags[q], generator=generator, copies=copies))
        term = weights[q].to(y.dtype) * y
        out = term if out is None else out + term
    return out


def kornia_warp(transform: Transform, images: Tensor, params: dict[str, Tensor]) -> Tensor:
    """Apply one geometric augnet transform's ``params`` to ``images`` (one row each) with kornia.

    Args:
        transform: a TranslateX, TranslateY, Rotate, ShearX or ShearY.
        images: :math:`(N, Ch, H, W)`, one image per row of ``params``.
        params: as drawn by ``transform.sample`` for ``N`` rows.
    """
    try:
        from kornia.geometry.transform import rotate, shear, translate
    except ImportError as err:
        hint = 'the eager baseline of augnet bench needs kornia: pip install "augnet[bench]"'
        raise ImportError(f"{hint} ({err})") from err

    h, w = images.shape[-2:]
    if isinstance(transform, T.TranslateX):  # TranslateY included; shift is a fraction of the size
        zero = torch.zeros_like(params["shift"])
        pixels = [params["shift"] * w, zero] if transform.axis == 0 else [zero, params["shift"] * h]
        return translate(images, torch.stack(pixels, 1))
    if isinstance(transform, T.Rotate):
        return rotate(images, torch.rad2deg(params["angle"]))
    if isinstance(transform, T.ShearX):  # ShearY included
        # kornia's output at (x, y) reads its input at (x - s y, y): pass -s for augnet's direction.
        zero = torch.zeros_like(params["shear"])
        coef = [-params["shear"], zero] if transform.axis == 0 else [zero, -params["shear"]]
        return shear(images, torch.stack(coef, 1))
    raise TypeError(f"the eager path covers the geometric transforms only, got {type(transform).__name__}")


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


def _benchmark_classes():
    """``torch.utils.benchmark``'s Measurement and Timer, imported without the
    CUDA_HOME warning its extension builder logs on machines without a GPU."""
    from augnet.ops._cpp import quiet_cpp_extension_log

    with quiet_cpp_extension_log():
        from torch.utils.benchmark import Measurement, Timer
    return Measurement, Timer


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _time(fn: Callable[[], object], cfg: BenchConfig, estimate_s: float) -> dict:
    Measurement, Timer = _benchmark_classes()

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
        ``(peak, final)`` in bytes. Raises ``RuntimeError`` if the profiler
        gives no readable memory events.

    Examples:
        >>> peak, final = cpu_peak_bytes(lambda: torch.empty(1 << 20, dtype=torch.uint8))
        >>> peak >= 1 << 20 and final >= 1 << 20
        True
    """
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


def _has_kornia() -> bool:
    return importlib.util.find_spec("kornia") is not None


def default_providers(x: Tensor) -> list[str]:
    """``eager`` (where kornia is installed) plus the ``tap_mix`` backends usable on ``x`` (registry order)."""
    slow = SLOW_BY_DEFAULT.get(x.device.type, ())
    return [*([EAGER] if _has_kornia() else []), *(b for b in available_backends(x) if b not in slow)]


def _check_providers(names: Sequence[str], x: Tensor) -> list[str]:
    if EAGER in names and not _has_kornia():
        raise ValueError('the eager provider needs kornia, which is not installed: pip install "augnet[bench]"')
    usable = set(available_backends(x)) | {EAGER}
    bad = [n for n in names if n not in usable]
    if bad:
        raise ValueError(f"providers {bad} cannot run on {x.device.type} here; usable: {sorted(usable)}")
    return list(dict.fromkeys(names))


def run_benchmark(cfg: BenchConfig, log: Callable[[str], None] | None = print) -> dict:
    """Run every provider, size and mode of ``cfg``; return the result (JSON-ready dict).

    Args:
        cfg: the settings.
        log: called with one line per finished measurement (``None``: silent).
    """
    cfg.validate()
    if cfg.threads is not None:
        torch.set_num_threads(cfg.threads)
    device = cfg.device
    gen = torch.Generator().manual_seed(cfg.seed)
    probe = torch.zeros(1, 1, 1, 1, device=device)
    providers = _check_providers(cfg.providers, probe) if cfg.providers else default_providers(probe)
    load_before = _loadavg()
    start = time.perf_counter()
    records = []
    for size in cfg.sizes:
        x = torch.rand(cfg.batch, cfg.channels, size, size, generator=gen).to(device)
        reference_out = None
        for mode in cfg.modes:
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
                    if reference_out is not None:
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
                    log(
                        f"  {provider:<10} {size:>4}px  {mode:<17} {record['median_ms']:10.2f} ms "
                        f"({record['runs']} runs)  peak {record['peak_mib']:8.1f} MiB"
                    )
    _add_speedups(records)
    return {
        "benchmark": "tap_mix",
        "description": (
            "AugmentationLayer of the 5 geometric transforms (training mode) vs the eager per-transform "
            "kornia path; median time per call"
        ),
        "config": dataclasses.asdict(cfg) | {"providers": providers},
        "machine": machine_info(device),
        "load_average": {"before": load_before, "after": _loadavg()},
        "seconds": time.perf_counter() - start,
        "records": records,
    }


def _add_speedups(records: list[dict]) -> None:
    base = {(r["provider"], r["size"], r["mode"]): r["median_ms"] for r in records}
    for r in records:
        for name, key in ((EAGER, "speedup_vs_eager"), ("reference", "speedup_vs_reference")):
            ref = base.get((name, r["size"], r["mode"]))
            r[key] = ref / r["median_ms"] if ref is not None and r["median_ms"] > 0 else None


def _loadavg() -> list[float] | None:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:  # not available on this platform
        return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info(device: str = "cpu") -> dict:
    """CPU model, core counts, torch threads, versions and the device's name."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        usable = os.cpu_count()
    info = {
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": usable,
        "torch_threads": torch.get_num_threads(),
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "device": device,
        "device_name": torch.cuda.get_device_name() if device == "cuda" else _cpu_model(),
    }
    try:
        import kornia

        info["kornia_version"] = kornia.__version__
    except ImportError:  # kornia is optional (augnet[bench])
        info["kornia_version"] = None
    return info


# --------------------------------------------------------------------------- reporting


def format_table(result: dict) -> str:
    """The records as a text table (speed-ups: time of eager / reference over the row's)."""

    def ratio(v):
        return "-" if v is None else f"{v:.2f}x"

    header = (
        f"{'provider':<10} {'size':>7} {'mode':<17} {'median ms':>10} {'images/s':>10} "
        f"{'peak MiB':>9} {'vs eager':>9} {'vs ref':>8}"
    )
    lines = [header, "-" * len(header)]
    for r in result["records"]:
        size = f"{r['size']}x{r['size']}"
        lines.append(
            f"{r['provider']:<10} {size:>7} {r['mode']:<17} {r['median_ms']:>10.2f} {r['images_per_s']:>10.0f} "
            f"{r['peak_mib']:>9.1f} {ratio(r['speedup_vs_eager']):>9} {ratio(r['speedup_vs_reference']):>8}"
        )
    return "\n".join(lines)


def plot_results(result: dict, path: str | Path) -> Path:
    """Grouped bars of the median time per provider, by image size, one panel per mode."""
    from augnet.viz import require_matplotlib, save_figure

    plt = require_matplotlib()
    records = result["records"]
    providers = list(dict.fromkeys(r["provider"] for r in records))
    sizes = list(dict.fromkeys(r["size"] for r in records))
    modes = list(dict.fromkeys(r["mode"] for r in records))
    times = {(r["provider"], r["size"], r["mode"]): r["median_ms"] for r in records}
    fig, axes = plt.subplots(1, len(modes), figsize=(5.5 * len(modes), 4.2), squeeze=False)
    width = 0.8 / max(len(providers), 1)
    for ax, mode in zip(axes[0], modes):
        for i, provider in enumerate(providers):
            xs = [j + (i - (len(providers) - 1) / 2) * width for j in range(len(sizes))]
            ys = [times.get((provider, s, mode), math.nan) for s in sizes]
            bars = ax.bar(xs, ys, width, label=provider)
            ax.bar_label(bars, labels=[f"{y:.0f}" if y >= 100 else f"{y:.3g}" for y in ys], fontsize=7, padding=1)
        ax.set_xticks(range(len(sizes)), [f"{s}x{s}" for s in sizes])
        ax.set_yscale("log")
        ax.set_title(mode)
        ax.set_xlabel("image size")
        ax.set_ylabel("median time per call (ms, log scale)")
        ax.grid(axis="y", alpha=0.3, which="both")
    axes[0][0].legend(frameon=False)
    cfg, machine = result["config"], result["machine"]
    threads = f", {machine['torch_threads']} threads" if cfg["device"] == "cpu" else ""
    fig.suptitle(
        f"augmentation layer, B={cfg['batch']} x C={cfg['copies']} copies: {machine['device_name']}{threads}",
        fontsize=10,
    )
    return save_figure(fig, path)


def save_results(result: dict, out_dir: str | Path) -> tuple[Path, Path | None, str | None]:
    """Write ``tap_mix_<device>.json`` and ``tap_mix_<device>.png`` under ``out_dir``.

    Returns:
        ``(json_path, png_path or None, why no plot or None)``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"tap_mix_{result['config']['device']}"
    json_path = out / f"{stem}.json"
    tmp = json_path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=1) + "\n")
    tmp.replace(json_path)
    try:
        png = plot_results(result, out / f"{stem}.png")
    except ImportError as err:
        return json_path, None, str(err)
    return json_path, png, None


def run_from_args(args) -> int:
    """``augnet bench``: run, print the table, save JSON and plot (arguments from :mod:`augnet.cli`)."""
    overrides = {
        "sizes": tuple(args.sizes) if args.sizes else None,
        "batch": args.batch,
        "copies": args.copies,
        "min_run_time": args.min_time,
        "threads": args.threads,
        "providers": tuple(args.providers) if args.providers else None,
        "device": args.device,
        "seed": args.seed,
    }
    overrides = {k: v for k, v in overrides.items() if v is not None}
    cfg = BenchConfig.quick(**overrides) if args.quick else BenchConfig(**overrides)
    try:
        cfg.validate()
        if cfg.threads is not None:
            torch.set_num_threads(cfg.threads)
        probe = torch.zeros(1, 1, 1, 1, device=cfg.device)
        providers = _check_providers(cfg.providers, probe) if cfg.providers else default_providers(probe)
    except ValueError as err:
        print(f"augnet bench: {err}", file=sys.stderr)
        return 2
    load = _loadavg()
    print(
        f"augnet bench: augmentation layer of {len(T.GEOMETRIC)} geometric transforms, B={cfg.batch}, "
        f"C={cfg.copies}, sizes {', '.join(map(str, cfg.sizes))}, on {cfg.device} "
        f"({torch.get_num_threads()} torch threads; load average {load})\nproviders: {', '.join(providers)}"
    )
    result = run_benchmark(cfg)
    print()
    print(format_table(result))
    print(f"\n({result['seconds']:.0f} s; load average before {load}, after {result['load_average']['after']})")
    json_path, png, why = save_results(result, args.out)
    print(f"saved {json_path}" + (f" and {png}" if png else f"; no plot: {why}"))
    if not getattr(args, "no_inference", False):
        print("\ninference cost: AugNet with C copies against C times its trunk")
        quick = dict(copies=(1, 2), batch=2, width=8, min_run_time=0.05) if args.quick else {}
        cost = inference_cost(device=cfg.device, seed=cfg.seed, log=print, **quick)
        print()
        print(format_inference(cost))
        path = Path(args.out) / f"inference_{cfg.device}.json"
        path.write_text(json.dumps(cost, indent=1))
        print(f"saved {path}")
    return 0


# --------------------------------------------------------------------------- inference cost


def inference_cost(
    copies: Sequence[int] = (1, 4, 10, 20),
    batch: int = 16,
    size: int = 32,
    width: int = 64,
    device: str = "cpu",
    min_run_time: float = 1.0,
    seed: int = 0,
    log: Callable[[str], None] | None = print,
) -> dict:
    """AugNet's forward time with C copies, divided by C times the trunk's own forward time.

    The trunk is a ResNet-18 (:func:`resnet18`) at ``size`` x ``size``; the
    AugNet puts an evaluation-mode layer of the five geometric transforms in
    front of it and aggregates the C predictions. A ratio of 1 means the
    augmentation and the aggregation cost nothing beyond the copies
    themselves. The trunk's time on ``B`` rows is measured again next to every
    C (CPU timings drift), and two further figures separate the parts:
    ``trunk_rows_ratio``, the trunk alone on the ``C * B`` rows divided by
    ``C`` times its time on ``B`` rows (how the trunk's own cost scales with
    the batch), and ``overhead``, the time of the augmentation module and the
    aggregation alone divided by ``C`` times the trunk's time (what augnet
    adds: ``1 + overhead`` is the ratio for a trunk that scales linearly).

    Returns:
        ``{"trunk_ms": ..., "records": [{"copies", "augnet_ms", "trunk_ms", "ratio", "trunk_rows_ms",
        "trunk_rows_ratio", "augment_ms", "overhead", "augnet_vs_trunk_rows"}], ...}``.
    """
    torch.manual_seed(seed)
    trunk = resnet18(width=width).to(device).eval()
    model = AugNet(trunk, geometric_layer(0.5), eval_copies=1).to(device).eval()
    x = torch.rand(batch, 3, size, size, generator=torch.Generator().manual_seed(seed)).to(device)

    def timed(fn) -> float:
        with torch.inference_mode():
            fn()
            _sync(device)
            timer = _benchmark_classes()[1](stmt="fn(); sync()", globals={"fn": fn, "sync": lambda: _sync(device)})
            return timer.blocked_autorange(min_run_time=min_run_time).median * 1e3

    def augment_and_aggregate(c: int, logits: Tensor) -> Tensor:
        model.augment(x, copies=c)
        return aggregate(logits, c, model.aggregate)

    records = []
    for c in copies:
        trunk_ms = timed(lambda: trunk(x))
        augnet_ms = timed(lambda c=c: model(x, copies=c))
        rows = x.repeat(c, 1, 1, 1)
        rows_ms = timed(lambda rows=rows: trunk(rows))
        with torch.inference_mode():
            logits = trunk(rows)
        augment_ms = timed(lambda c=c, logits=logits: augment_and_aggregate(c, logits))
        record = {
            "copies": c,
            "augnet_ms": augnet_ms,
            "trunk_ms": trunk_ms,
            "ratio": augnet_ms / (c * trunk_ms),
            "trunk_rows_ms": rows_ms,
            "trunk_rows_ratio": rows_ms / (c * trunk_ms),
            "augment_ms": augment_ms,
            "overhead": augment_ms / (c * trunk_ms),
            "augnet_vs_trunk_rows": augnet_ms / rows_ms,
        }
        records.append(record)
        if log is not None:
            log(
                f"  C={c:>2}: AugNet {augnet_ms:9.2f} ms = {record['ratio']:.3f} x C x trunk; "
                f"trunk on C*B rows {record['trunk_rows_ratio']:.3f} x C x trunk; "
                f"augmentation + aggregation {augment_ms:.2f} ms = {record['overhead']:.4f} x C x trunk"
            )
    return {
        "benchmark": "inference_cost",
        "trunk": f"ResNet-18 (width {width}), {size}x{size}, batch {batch}",
        "device": device,
        "trunk_ms": statistics.median(r["trunk_ms"] for r in records),
        "records": records,
        "machine": machine_info(device),
        "load_average": _loadavg(),
    }


def format_inference(result: dict) -> str:
    lines = [
        f"AugNet inference cost, {result['trunk']} (trunk alone {result['trunk_ms']:.2f} ms)",
        f"{'C':>3} {'AugNet ms':>10} {'/ (C x trunk)':>14} {'trunk on C*B rows / (C x trunk)':>32}"
        f" {'augment + aggregate / (C x trunk)':>34}",
    ]
    for r in result["records"]:
        lines.append(
            f"{r['copies']:>3} {r['augnet_ms']:>10.2f} {r['ratio']:>14.3f} {r['trunk_rows_ratio']:>32.3f} "
            f"{r['overhead']:>34.4f}"
        )
    return "\n".join(lines)
