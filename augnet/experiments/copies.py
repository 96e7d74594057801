"""The number of copies C at inference: invariance, accuracy and cost (AugNet paper, Fig. B.4 and B.6).

One AugNet is trained on the sinusoid task with the default settings of
:func:`~augnet.experiments.sinusoids.run_sinusoids` (the paper's three
candidates around the small 1-D CNN, 4 copies in training), then evaluated
with C = 1, 4 and 10 copies: test accuracy and invariance of its output to the
true frequency shift (±0.5 Hz; :func:`~augnet.experiments.capacity.frequency_shift_invariance`).
Its forward time with C copies is divided by the time of its trunk alone on
the same test batch (medians of ``torch.utils.benchmark``), for C = 1, 2, 4, 10.

A second AugNet, whose layer holds FrequencyShift alone (the candidate that
matches the data's invariance), is run the same way for comparison.

The trunk alone is also timed on the ``C * B`` rows, to tell the cost of the
trunk on a larger batch from that of the augmentation. On CPU with glibc, the
activations of a large batch are fresh ``mmap`` allocations on every call, so
their page faults make the trunk's time grow faster than its number of rows
(raising ``MALLOC_MMAP_THRESHOLD_`` removes most of it).
"""

from __future__ import annotations

import dataclasses
import os
import statistics
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from augnet._calibration import evaluating
from augnet._checks import check_bool, number
from augnet.data import sinusoids
from augnet.experiments._registry import Report, register
from augnet.experiments.capacity import check_scoring, evaluate
from augnet.experiments.runner import (
    check_counts,
    check_distinct,
    check_rates,
    check_seed,
    check_threads,
    kept_global_state,
    output_folder,
    with_int_seed,
)
from augnet.experiments.sinusoids import SinusoidsConfig, run_sinusoids
from augnet.model import AugNet
from augnet.training import resolve_device

__all__ = ["COPIES_VARIANTS", "CopiesConfig", "run_copies", "time_copies"]

#: The trained AugNets: the default run (three candidates) and FrequencyShift alone.
COPIES_VARIANTS = {
    "paper": ("FrequencyShift", "FTSurrogate", "GaussianNoise"),
    "frequency_shift": ("FrequencyShift",),
}
LABELS = {"paper": "AugNet (3 candidates, default run)", "frequency_shift": "AugNet (FrequencyShift alone)"}


@dataclass
class CopiesConfig:
    """Settings of the copies experiment; the AugNets are trained with :class:`SinusoidsConfig`'s defaults."""

    variants: tuple[str, ...] = ("paper", "frequency_shift")
    copies: tuple[int, ...] = (1, 4, 10)
    timing_copies: tuple[int, ...] = (1, 2, 4, 10)
    accuracy_repeats: int = 5  # accuracy: mean over this many draws of the copies
    # The clean and shifted passes draw their copies independently, as two calls of the model in use do:
    # with shared draws the AugNet's own augmentation noise cancels and C would change nothing (Fig. B.4).
    draws: str = "independent"
    min_run_time: float = 0.5  # seconds per torch.utils.benchmark measurement
    rounds: int = 3  # timing rounds (trunk, then each C); the ratio is the median over rounds
    epochs: int = 50
    n_train: int = 400
    n_test: int = 200
    seed: int = 0
    threads: int | None = 1  # training and timing threads (None: leave torch's setting)
    device: str = "cpu"


def _median_time(fn, min_run_time: float) -> float:
    from augnet.bench import benchmark_classes  # torch.utils.benchmark, without its CUDA_HOME warning

    timer = benchmark_classes()[1](stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
    return timer.blocked_autorange(min_run_time=min_run_time).median


@torch.no_grad()
def time_copies(
    model: AugNet, x: Tensor, copies=(1, 2, 4, 10), min_run_time: float = 0.5, rounds: int = 3, seed: int = 0
) -> dict:
    """Forward time of ``model`` with C copies, relative to its trunk alone on the same batch ``x``.

    After a warm-up call, each round times the AugNet (evaluation mode) with
    each C between two timings of the trunk on ``x``; a round's ratio divides
    by the mean of that round's two trunk times, and the reported ratio is the
    median over rounds. To tell the augmentation's cost
    from the trunk's, the trunk alone is also timed on the ``C * B`` rows of
    ``x`` repeated C times (``trunk_ratio``). Every submodule's training mode comes back as it was.

    Returns:
        ``{"copies": [...], "ratio": [...] (median over rounds), "ratio_rounds": [[...] per round],
        "trunk_ratio": [...] (trunk on C * B rows / trunk on B rows, median over rounds),
        "trunk_seconds": [... per round], "augnet_seconds": [[...] per round],
        "trunk_rows_seconds": [[... the trunk on C * B rows] per round], "threads": int}``.
    """
    generator = torch.Generator(x.device).manual_seed(seed)
    trunk_s, aug_s, rows_s = [], [], []
    repeated = {c: x.repeat(c, *[1] * (x.dim() - 1)) for c in copies}
    with evaluating(model):  # each submodule's own mode comes back (a frozen batch norm left in eval stays so)
        model(x, copies=max(copies), generator=generator)  # warm-up: first calls allocate and load code
        model.trunk(repeated[max(copies)])
        for _ in range(rounds):
            before = _median_time(lambda: model.trunk(x), min_run_time)
            aug_s.append(
                [_median_time(lambda c=c: model(x, copies=c, generator=generator), min_run_time) for c in copies]
            )
            rows_s.append([_median_time(lambda c=c: model.trunk(repeated[c]), min_run_time) for c in copies])
            trunk_s.append((before + _median_time(lambda: model.trunk(x), min_run_time)) / 2)
    ratio_rounds = [[a / t for a in row] for t, row in zip(trunk_s, aug_s, strict=True)]
    trunk_rounds = [[a / t for a in row] for t, row in zip(trunk_s, rows_s, strict=True)]
    return {
        "copies": list(copies),
        "ratio": [statistics.median(col) for col in zip(*ratio_rounds, strict=True)],
        "ratio_rounds": ratio_rounds,
        "trunk_ratio": [statistics.median(col) for col in zip(*trunk_rounds, strict=True)],
        "trunk_seconds": trunk_s,
        "augnet_seconds": aug_s,
        "trunk_rows_seconds": rows_s,
        "threads": torch.get_num_threads(),
    }


def _linear_fit(xs: list[float], ys: list[float]) -> dict:
    """Least-squares line ``y = intercept + slope * x`` and its R^2."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((a - mx) ** 2 for a in xs)
    slope = sum((a - mx) * (b - my) for a, b in zip(xs, ys, strict=True)) / sxx
    intercept = my - slope * mx
    ss_res = sum((b - intercept - slope * a) ** 2 for a, b in zip(xs, ys, strict=True))
    ss_tot = sum((b - my) ** 2 for b in ys)
    return {"slope": slope, "intercept": intercept, "r2": 1 - ss_res / ss_tot if ss_tot > 0 else 1.0}


def run_copies(config: CopiesConfig | None = None, progress: bool = False) -> dict:
    """Train each variant's AugNet; score it at each C; time it at each C. One entry per variant.

    An entry: ``transforms``, ``train_copies``, ``policy``, ``train_seconds``, ``test_accuracy_default``,
    ``by_copies`` (``{str(C): evaluate(...)}`` without the per-sample scores) and ``timing``
    (:func:`time_copies`, with ``fit``: the line through its ratios). torch's thread count and global random
    state come back after the run as they were before it.

    Raises:
        TypeError: ``config`` that is not a :class:`CopiesConfig` (or None, the default one); ``variants`` that
            is not a tuple.
        ValueError: a field that cannot work (an unknown or no variant, scoring or timing copies, a seed, the
            training's sizes), before any model trains.
    """
    if config is not None and not isinstance(config, CopiesConfig):
        raise TypeError(f"config must be a CopiesConfig or None, got {type(config).__name__}")
    config = config or CopiesConfig()
    check_bool("progress", progress)
    if isinstance(config.variants, str) or not isinstance(config.variants, (tuple, list)):
        raise TypeError(f"CopiesConfig.variants must be a tuple of names (from {sorted(COPIES_VARIANTS)}), got "
                        f"{type(config.variants).__name__}: {config.variants!r}")  # fmt: skip
    if not config.variants:  # an empty result, and an error in the figures of the registered run
        raise ValueError("CopiesConfig.variants must not be empty (there would be nothing to train)")
    unknown = [v for v in config.variants if v not in COPIES_VARIANTS]
    if unknown:
        raise ValueError(f"unknown variants {unknown!r}; choose from {sorted(COPIES_VARIANTS)}")
    check_distinct("CopiesConfig", "variants", config.variants)
    # Named here: their errors named SinusoidsConfig (n_train) or the training loop (epochs).
    check_counts("CopiesConfig", n_train=config.n_train)
    check_counts("CopiesConfig", 0, epochs=number("epochs", config.epochs))
    check_seed("CopiesConfig", config.seed)
    # What the scoring and the timing read after training, refused before it.
    check_scoring("CopiesConfig", "copies", config.copies, config.accuracy_repeats, config.draws, config.n_test)
    timing = config.timing_copies
    if isinstance(timing, str) or not isinstance(timing, (tuple, list)):
        raise ValueError(f"CopiesConfig.timing_copies must be a tuple of ints >= 1, got {timing!r}")
    for c in timing:
        check_counts("CopiesConfig", timing_copies=c)
    if len(set(timing)) < 2:  # the line through the timings
        raise ValueError(f"CopiesConfig.timing_copies must hold at least 2 distinct counts, got {timing!r}")
    check_counts("CopiesConfig", rounds=config.rounds)
    check_rates("CopiesConfig", min_run_time=config.min_run_time)
    check_threads("CopiesConfig", config.threads)
    config = with_int_seed(config)
    out = {}
    with kept_global_state(config.threads):
        device = resolve_device(config.device)
        x_test, y_test = (t.to(device) for t in sinusoids(config.n_test, seed=config.seed + 10_000))  # run_sinusoids'

        for variant in config.variants:
            sin_config = SinusoidsConfig(
                transforms=COPIES_VARIANTS[variant],
                epochs=config.epochs,
                n_train=config.n_train,
                n_test=config.n_test,
                seed=config.seed,
                device=config.device,
            )
            result = run_sinusoids(sin_config, progress=progress)
            model = result.model.eval()
            scores = {}
            for c in config.copies:
                ev = evaluate(
                    model, x_test, y_test, copies=c, seed=config.seed, repeats=config.accuracy_repeats,
                    draws=config.draws,
                )  # fmt: skip
                scores[str(c)] = {k: v for k, v in ev.items() if not k.startswith("scores")}
            timing = time_copies(
                model, x_test, config.timing_copies, config.min_run_time, config.rounds, seed=config.seed
            )
            timing["fit"] = _linear_fit([float(c) for c in timing["copies"]], timing["ratio"])
            out[variant] = {
                "transforms": list(COPIES_VARIANTS[variant]),
                "train_copies": sin_config.train_copies,
                "policy": result.policy.layers_json(),
                "train_seconds": result.seconds,
                "test_accuracy_default": result.test_accuracy,
                "by_copies": scores,
                "timing": timing,
            }
    return out


def _plot_scores(runs: dict, copies, path: Path) -> Path:
    from augnet.viz import require_matplotlib, save_figure

    plt = require_matplotlib()
    fig, axes = plt.subplots(2, 1, figsize=(6, 6), sharex=True)
    for variant, run in runs.items():
        ev = [run["by_copies"][str(c)] for c in copies]
        med = [e["invariance"]["median"] for e in ev]
        lo = [m - e["invariance"]["interval75_low"] for m, e in zip(med, ev, strict=True)]
        hi = [e["invariance"]["interval75_high"] - m for m, e in zip(med, ev, strict=True)]
        axes[0].errorbar(copies, med, yerr=[lo, hi], marker="o", capsize=3, label=LABELS[variant])
        axes[1].plot(copies, [e["accuracy"] for e in ev], marker="o", label=LABELS[variant])
    axes[0].set_ylabel("invariance to ±0.5 Hz shifts\n(median, 75 % interval)")
    axes[0].axhline(1.0, color="k", lw=0.6, ls="--")
    axes[1].set_ylabel("test accuracy")
    axes[1].set_xlabel("copies C at inference")
    axes[1].set_xticks(list(copies))
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[0].legend(frameon=False, fontsize=8)
    fig.suptitle("AugNet with C copies (Fig. B.4 style)")
    return save_figure(fig, path)


def _plot_time(runs: dict, path: Path) -> Path:
    from augnet.viz import require_matplotlib, save_figure

    plt = require_matplotlib()
    fig, ax = plt.subplots(figsize=(6, 4))
    for variant, run in runs.items():
        t = run["timing"]
        lo = [min(col) for col in zip(*t["ratio_rounds"], strict=True)]
        hi = [max(col) for col in zip(*t["ratio_rounds"], strict=True)]
        (line,) = ax.plot(t["copies"], t["ratio"], marker="o", label=LABELS[variant])
        ax.fill_between(t["copies"], lo, hi, color=line.get_color(), alpha=0.2)
    cs = next(iter(runs.values()))["timing"]["copies"]
    first = next(iter(runs.values()))["timing"]
    ax.plot(cs, first["trunk_ratio"], color="gray", marker="x", ls="-", lw=0.8, label="trunk alone on C x B rows")
    ax.plot(cs, cs, color="gray", ls=":", label="y = C")
    ax.axhline(1.0, color="k", ls="--", lw=0.8, label="trunk alone")
    ax.set_xlabel("copies C at inference")
    ax.set_ylabel("forward time / trunk's time")
    ax.set_xticks(cs)
    ax.grid(alpha=0.3)
    ax.legend(frameon=False, fontsize=8)
    ax.set_title("Cost of C copies (Fig. B.6 style)")
    return save_figure(fig, path)


@register("copies")
def copies(out_dir: Path, quick: bool = False, seed: int = 0, progress: bool = True, device: str = "cpu") -> Report:
    """Invariance, accuracy and forward time of a trained AugNet against its number of copies C."""
    out_dir = output_folder(out_dir)  # a str too ('~' the home folder): the figures were written into it last
    config = CopiesConfig(seed=seed, device=device)
    if quick:
        config.epochs, config.n_train, config.n_test = 15, 200, 100
        config.min_run_time, config.rounds = 0.2, 2
    load_before = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    runs = run_copies(config, progress=progress)
    numbers = {
        "config": dataclasses.asdict(config),
        "load_average": {"before": load_before, "after": list(os.getloadavg()) if load_before else None},
        "runs": runs,
    }
    lines = []
    for variant, run in runs.items():
        top = max(run["policy"][0], key=lambda e: e["weight"])
        lines.append(
            f"{LABELS[variant]}: selected {top['transform']} (weight {top['weight']:.2f}, "
            f"magnitude {top['magnitude']:.2f}, range {top['range'][0]:.3g} to {top['range'][1]:.3g} {top['range'][2]})"
        )
        cells = [
            f"C={c}: acc {e['accuracy']:.3f}, inv {e['invariance']['median']:.3f} "
            f"[{e['invariance']['interval75_low']:.2f}, {e['invariance']['interval75_high']:.2f}]"
            for c, e in run["by_copies"].items()
        ]
        lines.append("  " + "; ".join(cells))
        first, last = run["by_copies"][str(config.copies[0])], run["by_copies"][str(config.copies[-1])]
        lines.append(
            f"  C={config.copies[0]} -> C={config.copies[-1]}: median invariance "
            f"{last['invariance']['median'] - first['invariance']['median']:+.3f}, "
            f"accuracy {last['accuracy'] - first['accuracy']:+.3f}"
        )
        t = run["timing"]
        ratios = ", ".join(f"C={c}: {r:.2f}x" for c, r in zip(t["copies"], t["ratio"], strict=True))
        fit = t["fit"]
        trunk_rows = ", ".join(f"C={c}: {r:.2f}x" for c, r in zip(t["copies"], t["trunk_ratio"], strict=True))
        lines.append(
            f"  time / trunk: {ratios} (line: {fit['intercept']:.2f} + {fit['slope']:.2f} C, R^2 {fit['r2']:.3f}; "
            f"trunk {1e3 * statistics.median(t['trunk_seconds']):.1f} ms on {config.n_test} signals, "
            f"{t['threads']} thread(s))"
        )
        lines.append(f"  trunk alone on C x {config.n_test} rows / on {config.n_test} rows: {trunk_rows}")
        extra = ", ".join(
            f"C={c}: {a - b:+.2f}" for c, a, b in zip(t["copies"], t["ratio"], t["trunk_ratio"], strict=True)
        )
        lines.append(f"  AugNet minus trunk on C x {config.n_test} rows in trunk times: {extra}")
    if load_before:
        lines.append(f"load average during the run: {load_before[0]:.1f} -> {numbers['load_average']['after'][0]:.1f}")
    figures = []
    try:
        figures.append(_plot_scores(runs, config.copies, out_dir / "copies.png"))
        figures.append(_plot_time(runs, out_dir / "copies_time.png"))
    except ImportError:
        pass
    return Report("copies", "\n".join(lines), numbers, figures)
