"""The results of ``augnet bench``: the text table, the plot, the saved files, and the command itself."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import torch

from augnet._json import dumps as strict_json
from augnet.bench.harness import BenchConfig, _check_providers, default_providers, run_benchmark
from augnet.bench.inference import _cell, _need, _rows, format_inference, inference_cost
from augnet.bench.machine import _loadavg
from augnet.transforms import image as T

__all__ = ["format_table", "plot_results", "run_from_args", "save_results"]


def format_table(result: dict) -> str:
    """The records as a text table (speed-ups: time of eager / reference over the row's).

    The saved ``tap_mix_<device>.json``, read back, gives the same table (an infinity saved as ``"inf"``, a NaN
    as ``null``; a speed-up of ``None``, no eager or reference row to compare with, is shown ``-``).

    Raises:
        TypeError: ``result`` or a record of it is not a dict, or a cell holds no number.
        ValueError: a key the table shows is missing (the result of another function, or of another version).
    """
    fn, source = "format_table", "the result of run_benchmark (or its saved tap_mix_<device>.json, read back)"
    records = _rows(_need(result, ("records",), "result", fn, source)["records"], _TABLE_KEYS, "result['records']",
                    fn, source)  # fmt: skip
    for i, r in enumerate(records):
        if not isinstance(r["mode"], str):
            raise TypeError(f"{fn}: result['records'][{i}]['mode'] must be a str, got {type(r['mode']).__name__}")

    def ratio(r, key, where):
        return "-" if r[key] is None else _cell(r, key, ".2f", where, fn) + "x"

    wide = max([len("mode")] + [len(r["mode"]) for r in records])  # forward+backward+dx: 19
    header = (
        f"{'provider':<10} {'size':>7} {'mode':<{wide}} {'median ms':>10} {'images/s':>10} "
        f"{'peak MiB':>9} {'vs eager':>9} {'vs ref':>8}"
    )
    lines = [header, "-" * len(header)]
    for i, r in enumerate(records):
        where = f"result['records'][{i}]"
        size = f"{_cell(r, 'size', '', where, fn, number=False)}x{r['size']}"
        cells = [_cell(r, "provider", "<10", where, fn, number=False), f"{size:>7}", f"{r['mode']:<{wide}}"]
        cells += [_cell(r, key, spec, where, fn) for key, spec in
                  (("median_ms", ">10.2f"), ("images_per_s", ">10.0f"), ("peak_mib", ">9.1f"))]  # fmt: skip
        cells += [f"{ratio(r, 'speedup_vs_eager', where):>9}", f"{ratio(r, 'speedup_vs_reference', where):>8}"]
        lines.append(" ".join(cells))
    return "\n".join(lines)


_TABLE_KEYS = ("provider", "size", "mode", "median_ms", "images_per_s", "peak_mib", "speedup_vs_eager",
               "speedup_vs_reference")  # fmt: skip


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


def save_results(result: dict, out_dir: str | Path, quick: bool = False) -> tuple[Path, Path | None, str | None]:
    """Write ``tap_mix_<device>.json`` and ``tap_mix_<device>.png`` under ``out_dir``
    (``tap_mix_<device>_quick.*`` for a ``quick`` run: it never replaces a real run's figures).

    Returns:
        ``(json_path, png_path or None, why no plot or None)``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"tap_mix_{result['config']['device']}{'_quick' if quick else ''}"
    json_path = out / f"{stem}.json"
    tmp = json_path.with_suffix(".json.tmp")
    tmp.write_text(strict_json(result) + "\n")  # a backend's NaN: null
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
        print(f"augnet bench: error: {err}", file=sys.stderr)
        return 2
    load = _loadavg()
    print(
        f"augnet bench: augmentation layer of {len(T.GEOMETRIC)} geometric transforms, B={cfg.batch}, "
        f"C={cfg.copies}, sizes {', '.join(map(str, dict.fromkeys(cfg.sizes)))}, on {cfg.device} "
        f"({torch.get_num_threads()} torch threads; load average {load})\nproviders: {', '.join(providers)}"
    )
    result = run_benchmark(cfg)
    print()
    print(format_table(result))
    print(f"\n({result['seconds']:.0f} s; load average before {load}, after {result['load_average']['after']})")
    json_path, png, why = save_results(result, args.out, quick=args.quick)
    print(f"saved {json_path}" + (f" and {png}" if png else f"; no plot: {why}"))
    if not getattr(args, "no_inference", False):
        settings = dict(copies=(1, 2), batch=2, width=8, min_run_time=0.05) if args.quick else {}
        if args.batch is not None:  # given on the command line: the inference cost is measured at it too
            settings["batch"] = cfg.batch
        if args.copies is not None:
            settings["copies"] = (cfg.copies,)
        given = ", ".join(f"{k}={v}" for k, v, on in (("B", cfg.batch, args.batch), ("C", cfg.copies, args.copies))
                          if on is not None)  # fmt: skip
        print("\ninference cost: AugNet with C copies against C times its trunk" + (f" ({given})" if given else ""))
        cost = inference_cost(device=cfg.device, seed=cfg.seed, log=print, **settings)
        print()
        print(format_inference(cost))
        path = Path(args.out) / f"inference_{cfg.device}{'_quick' if args.quick else ''}.json"
        path.write_text(strict_json(cost))
        print(f"saved {path}")
    return 0
