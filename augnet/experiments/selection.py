"""Which transform does the selective regulariser select, and how reliably? (``augnet reproduce selection``)

The rotation task of the AugNet paper (section 4.1) has one true invariance,
rotations within ±45 degrees, among the five geometric candidates of one
augmentation layer. This experiment trains the demo's AugNet
(:mod:`augnet.experiments.demo`) over several seeds per setting, on the
generated sprites and on the thin-stroke glyphs, and counts how often each
transform ends with the largest weight (its win rate), with the learned
Rotate range and the test accuracy of every run (a trunk broken by weight
decay shows as a low accuracy).

:data:`SETTINGS` vary what the AugNet paper's text leaves out and its official
code sets: the softmax temperature (1 or the official 0.01) and a weight decay
of 1.0 (none, on all parameters as in the official code, or on the
augmentation parameters only), plus the official code's settings as a whole.
:data:`CANDIDATES` are changes to the selection itself (beyond the paper):
temperature annealing and a weight warm-up (:mod:`augnet.training.callbacks`),
magnitudes calibrated to equal change of the inputs or of the untrained
trunk's outputs (:meth:`augnet.AugmentationLayer.calibrate`), and a weight
decay on the magnitudes alone (:func:`augnet.param_groups`'
``magnitude_weight_decay``). A run whose largest weight stays under
:data:`SELECTED` selected nothing (``"none"``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from augnet.experiments._registry import Report, register
from augnet.experiments.demo import PRESETS, SIZES, DemoConfig, run_demo

__all__ = [
    "CANDIDATES",
    "PAPER_METHOD",
    "SELECTED",
    "SETTINGS",
    "SelectionConfig",
    "plot_selection",
    "run_selection",
    "summarize_selection",
]

#: Settings of the paper's method: ``{name: DemoConfig overrides}`` on top of augnet's learning rates and the
#: paper's selection (temperature 1, learning rate 5e-4 for the trunk and 5e-3 for the augmentation parameters,
#: no weight decay: :data:`PAPER_METHOD`, which also drops the demo's magnitude decay). "decay all" is a
#: weight decay of 1.0 on every parameter (the official code's), "decay aug" on the augmentation parameters
#: only; "official" is the official code's settings as a whole (its learning rate 5e-4 for every parameter).
#: What every run starts from: the demo's defaults without augnet's magnitude decay (the paper's selection).
PAPER_METHOD: dict = {"magnitude_weight_decay": None}

SETTINGS: dict[str, dict] = {
    "T 1": {},
    "T 1, decay all": {"weight_decay": 1.0, "aug_weight_decay": 1.0},
    "T 1, decay aug": {"aug_weight_decay": 1.0},
    "T 0.01": {"temperature": 0.01},
    "T 0.01, decay all": {"temperature": 0.01, "weight_decay": 1.0, "aug_weight_decay": 1.0},
    "T 0.01, decay aug": {"temperature": 0.01, "aug_weight_decay": 1.0},
    "official": {k: v for k, v in PRESETS["official"].items() if k != "width"},
    "official, decay aug": {
        **{k: v for k, v in PRESETS["official"].items() if k != "width"},
        "weight_decay": 0.0,
    },
}

#: Changes to the selection (beyond the paper): ``{name: DemoConfig overrides}`` on top of :data:`PAPER_METHOD`.
#: "magnitude decay" is what the demo does by default (:data:`~augnet.experiments.demo.PRESETS` ``["augnet"]``).
CANDIDATES: dict[str, dict] = {
    "anneal 1 -> 0.01": {"anneal_to": 0.01},
    "warm-up 3 epochs": {"warmup_epochs": 3},
    "calibrated (input)": {"calibrate": "input"},
    "calibrated (trunk)": {"calibrate": "trunk"},
    "magnitude decay": {"magnitude_weight_decay": 1.0},
    "magnitude decay, T 0.01": {"magnitude_weight_decay": 1.0, "temperature": 0.01},
}

#: Below this weight the largest one is no selection (the weights stayed near uniform): counted as "none".
SELECTED = 0.5


@dataclass
class SelectionConfig:
    """What :func:`run_selection` trains: every (data, setting or candidate, seed)."""

    data: tuple[str, ...] = ("sprites", "glyphs")
    settings: tuple[str, ...] = tuple(SETTINGS)
    candidates: tuple[str, ...] = tuple(CANDIDATES)
    seeds: int = 5
    seed: int = 0
    epochs: int = 10
    n_train: int = 4000
    n_test: int = 1000
    width: int = 8  # of the paper's CNN (the paper's is 32: 16 times the compute)
    threads: int | None = 1  # these small models gain little from a second thread, which then can run other work
    device: str = "cpu"
    base: dict = field(default_factory=dict)  # DemoConfig overrides applied to every run

    def runs(self) -> list[tuple[str, str, str, int]]:
        """``(data, kind, name, seed)`` for every run, kind ``"setting"`` or ``"candidate"``."""
        named = [("setting", n) for n in self.settings] + [("candidate", n) for n in self.candidates]
        seeds = range(self.seed, self.seed + self.seeds)
        return [(d, kind, name, s) for d in self.data for kind, name in named for s in seeds]

    def demo_config(self, data: str, kind: str, name: str, seed: int) -> DemoConfig:
        overrides = (SETTINGS if kind == "setting" else CANDIDATES)[name]
        fields = dict(data=data, size=SIZES[data], epochs=self.epochs, n_train=self.n_train, n_test=self.n_test)
        fields.update(width=self.width, threads=self.threads, seed=seed, device=self.device)
        return dataclasses.replace(DemoConfig(), **{**PAPER_METHOD, **fields, **self.base, **overrides})


def _record(data: str, kind: str, name: str, seed: int, result) -> dict:
    policy = result.policy.layers_json()[0]
    winner = max(policy, key=lambda e: e["weight"])
    rotate = next((e for e in policy if e["transform"] == "Rotate"), None)
    return {
        "data": data,
        "kind": kind,
        "name": name,
        "seed": seed,
        "winner": winner["transform"] if winner["weight"] >= SELECTED else "none",
        "winner_weight": winner["weight"],
        "winner_magnitude": winner["magnitude"],
        "rotate_weight": rotate["weight"] if rotate else None,
        "rotate_range_deg": rotate["range"][1] if rotate else None,
        "accuracy": result.test_accuracy,
        "seconds": result.seconds,
        "policy": policy,
    }


def run_selection(config: SelectionConfig | None = None, progress: bool = False, log=None) -> list[dict]:
    """Train every run of ``config``; one record per run (see :func:`_record`)."""
    config = config or SelectionConfig()
    unknown = [n for n in config.settings if n not in SETTINGS] + [n for n in config.candidates if n not in CANDIDATES]
    if unknown:
        raise ValueError(f"unknown settings or candidates {unknown}; see SETTINGS and CANDIDATES")
    from tqdm.auto import tqdm

    records = []
    runs = config.runs()
    bar = tqdm(runs, disable=not progress, desc="selection", unit="run")
    for data, kind, name, seed in bar:
        bar.set_postfix(data=data, run=name, seed=seed)
        result = run_demo(config.demo_config(data, kind, name, seed), progress=False)
        records.append(_record(data, kind, name, seed, result))
        if log is not None:
            r = records[-1]
            log(
                f"{data:<8} {name:<22} seed {seed}: {r['winner']:<10} (w {r['winner_weight']:.2f}), "
                f"Rotate ±{r['rotate_range_deg']:.0f} deg, accuracy {r['accuracy']:.3f}"
            )
    bar.close()
    return records


def summarize_selection(records: list[dict]) -> list[dict]:
    """One row per (data, kind, name): win counts, Rotate's learned range when it wins, accuracies."""
    keys = list(dict.fromkeys((r["data"], r["kind"], r["name"]) for r in records))
    rows = []
    for data, kind, name in keys:
        runs = [r for r in records if (r["data"], r["kind"], r["name"]) == (data, kind, name)]
        wins = Counter(r["winner"] for r in runs)
        rotate = [r["rotate_range_deg"] for r in runs if r["winner"] == "Rotate"]
        acc = [r["accuracy"] for r in runs]
        rows.append(
            {
                "data": data,
                "kind": kind,
                "name": name,
                "runs": len(runs),
                "wins": dict(wins.most_common()),
                "rotate_wins": wins.get("Rotate", 0),
                "rotate_range_deg": rotate,
                "rotate_range_median": statistics.median(rotate) if rotate else math.nan,
                "accuracy": acc,
                "accuracy_min": min(acc),
                "accuracy_median": statistics.median(acc),
            }
        )
    return rows


def _table(rows: list[dict]) -> list[str]:
    lines = [
        f"{'data':<8} {'setting / candidate':<24} {'Rotate wins':>11}  {'other winners':<30} "
        f"{'Rotate range when it wins':<26} {'accuracy (min / median)':>24}"
    ]
    for r in rows:
        others = ", ".join(f"{k} {v}" for k, v in r["wins"].items() if k != "Rotate") or "-"
        rng = (
            f"±{min(r['rotate_range_deg']):.0f} to ±{max(r['rotate_range_deg']):.0f} deg"
            if r["rotate_range_deg"]
            else "-"
        )
        lines.append(
            f"{r['data']:<8} {r['name']:<24} {r['rotate_wins']:>5} of {r['runs']:<3}  {others:<30} {rng:<26} "
            f"{r['accuracy_min']:>11.3f} / {r['accuracy_median']:.3f}"
        )
    return lines


def plot_selection(rows: list[dict], path: Path) -> Path:
    """Win rates (stacked bars, one colour per transform) and accuracies, per setting, one panel per data set."""
    from augnet.viz import require_matplotlib, save_figure

    plt = require_matplotlib()
    datasets = list(dict.fromkeys(r["data"] for r in rows))
    names = list(dict.fromkeys(r["name"] for r in rows))
    transforms = sorted({t for r in rows for t in r["wins"]}, key=lambda t: (t != "Rotate", t))
    colours = dict(zip(transforms, plt.get_cmap("tab10").colors, strict=False))
    fig, axes = plt.subplots(1, len(datasets), figsize=(6 * len(datasets), 0.45 * len(names) + 1.8), sharey=True)
    axes = [axes] if len(datasets) == 1 else list(axes)
    for ax, data in zip(axes, datasets, strict=True):
        mine = {r["name"]: r for r in rows if r["data"] == data}
        ys = list(range(len(names)))[::-1]
        for t in transforms:
            left = [sum(mine[n]["wins"].get(u, 0) / mine[n]["runs"] for u in transforms[: transforms.index(t)])
                    if n in mine else 0.0 for n in names]  # fmt: skip
            width = [mine[n]["wins"].get(t, 0) / mine[n]["runs"] if n in mine else 0.0 for n in names]
            ax.barh(ys, width, left=left, color=colours[t], label=t, height=0.7)
        for y, n in zip(ys, names, strict=True):
            if n in mine:
                ax.text(1.02, y, f"acc ≥ {mine[n]['accuracy_min']:.3f}", va="center", fontsize=7)
        ax.set_xlim(0, 1.25)
        ax.set_xticks([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
        ax.set_yticks(ys, names)
        ax.set_xlabel("fraction of seeds won")
        ax.set_title(f"{data}")
        ax.grid(alpha=0.3, axis="x")
    axes[-1].legend(frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))  # beside the panels
    fig.suptitle("Which transform AugNet selects (largest weight), per setting")
    return save_figure(fig, path)


def selection_report(config: SelectionConfig, records: list[dict], out_dir: Path, seconds: float) -> Report:
    """The report of ``records`` (from :func:`run_selection` with ``config``): the table, the figure, the numbers."""
    rows = summarize_selection(records)
    lines = [
        f"{len(records)} runs: {config.seeds} seed(s) per data set and setting, {config.epochs} epochs of "
        f"{config.n_train} images, the paper's CNN of width {config.width} ({seconds:.0f} s)",
        *_table(rows),
    ]
    figures = []
    with contextlib.suppress(ImportError):  # no matplotlib: numbers only
        figures.append(plot_selection(rows, Path(out_dir) / "selection.png"))
    numbers = {"config": dataclasses.asdict(config), "summary": rows, "runs": records}
    return Report("selection", "\n".join(lines), numbers, figures)


@register("selection")
def selection(out_dir: Path, quick: bool = False, seed: int = 0, progress: bool = True, device: str = "cpu") -> Report:
    """Win rate of each transform over seeds, per setting of the paper and per selection candidate."""
    config = SelectionConfig(seed=seed, device=device)
    if quick:
        config.seeds, config.epochs, config.n_train, config.n_test = 1, 3, 1000, 300
        config.settings, config.candidates = ("T 1", "official"), ("magnitude decay",)
    start = time.perf_counter()
    records = run_selection(config, progress=progress)
    return selection_report(config, records, out_dir, time.perf_counter() - start)
