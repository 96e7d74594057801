"""Whether the kept versus table repeats on this install: chosen cells of it trained again, run by run.

``augnet reproduce versus`` keeps its runs (``docs/results/versus/runs.jsonl``) from the day they ran. This
trains the chosen tasks, regimes, methods and seeds again, exactly as the table does
(:func:`augnet.experiments.versus.run_versus`: the same jobs, one torch thread each, the kept grid search's
records copied in so that the fixed augmentation is the one the table chose), then prints, per cell, the
mean accuracy and invariance now and kept, how many runs repeat to the digit, and the verdict's lines
(:func:`augnet.experiments.versus_rules.check_rules`) now and kept for what was trained again. Chooses
nothing; prints and saves the figures::

    python benchmarks/versus_rerun.py                                   # the digits, every method, seeds 5-9
    python benchmarks/versus_rerun.py --tasks digits sinusoids glyphs sprites   # the saved versus_rerun.json
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import tempfile
import time
from pathlib import Path

from augnet.bench.machine import machine_info
from augnet.experiments._registry import read_runs
from augnet.experiments.versus import REPORTED_SEEDS, VersusConfig, job_key, run_versus, summarise
from augnet.experiments.versus_methods import METHODS
from augnet.experiments.versus_rules import check_rules
from augnet.experiments.versus_tasks import REGIMES, TASKS

ROOT = Path(__file__).resolve().parent.parent
KEPT = ROOT / "docs" / "results" / "versus" / "runs.jsonl"
# What a run's record holds that must repeat: the accuracies and the invariance (times never do).
COMPARED = ("accuracy", "accuracy_1", "accuracy_shift", "invariance")


def same(a: dict, b: dict, digits: int = 4) -> bool:
    """Whether two records of one run agree on :data:`COMPARED` to ``digits`` decimals (absent in both counts)."""
    def rounded(record: dict, measure: str) -> float | None:
        value = record.get(measure)
        return None if value is None else round(value, digits)

    return all(rounded(a, m) == rounded(b, m) for m in COMPARED)


def compare(now: dict[str, dict], kept: dict[str, dict], seeds) -> dict:
    """Per (task, regime, method): mean accuracy and invariance now and kept, and the runs that repeat.

    ``now``: the runs trained again (``"run"`` records only), each of which ``kept`` holds.
    """
    cells: dict = {}
    kept = {key: kept[key] for key in now}  # main() refused runs the kept table lacks
    for key, record in now.items():
        cell = cells.setdefault(f"{record['task']}/{record['regime']}/{record['method']}", {"runs": 0, "same": 0})
        cell["runs"] += 1
        cell["same"] += same(record, kept[key])
    s_now, s_kept = summarise(now, seeds), summarise(kept, seeds)
    for name, cell in cells.items():
        task, regime, method = name.split("/")
        for when, summary in (("now", s_now), ("kept", s_kept)):
            measures = summary[task][regime][method]
            cell[when] = {m: measures[m][:2] for m in ("accuracy", "invariance")}
        a, b = cell["now"]["accuracy"], cell["kept"]["accuracy"]
        print(f"{name:<32} accuracy now {a[0]:.3f} ± {a[1]:.3f}, kept {b[0]:.3f} ± {b[1]:.3f}; "
              f"invariance now {cell['now']['invariance'][0]:.3f}, kept {cell['kept']['invariance'][0]:.3f}; "
              f"{cell['same']} of {cell['runs']} runs repeat to 4 decimals")  # fmt: skip
    return {"cells": cells, "verdict_now": check_rules(s_now, now, seeds),
            "verdict_kept": check_rules(s_kept, kept, seeds)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["digits"], choices=list(TASKS))
    parser.add_argument("--regimes", nargs="+", default=list(REGIMES), choices=list(REGIMES))
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--seeds", nargs="+", type=int, default=list(REPORTED_SEEDS))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "versus_rerun.json"))
    args = parser.parse_args()
    kept = read_runs(KEPT)
    # grid_seed=0: the kept grid search (copied in below) chooses the fixed augmentation, not one of these seeds'
    config = VersusConfig(tasks=tuple(args.tasks), regimes=tuple(args.regimes), methods=tuple(args.methods),
                          seeds=tuple(args.seeds), workers=args.workers, grid_seed=0)  # fmt: skip
    missing = [j for j in config.jobs() if job_key(j) not in kept]
    if missing:
        parser.error(f"{len(missing)} of these runs are not in the kept table, e.g. {missing[0]}")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        grid = [r for r in kept.values() if r["kind"] == "grid" and r["task"] in args.tasks]
        (Path(scratch) / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in grid))
        records = run_versus(config, scratch, log=None)
    seconds = time.perf_counter() - start
    now = {k: r for k, r in records.items() if r["kind"] == "run"}
    result = compare(now, kept, args.seeds)
    for when in ("now", "kept"):
        print(f"verdict {when}:\n  " + result[f"verdict_{when}"].replace("\n", "\n  "))
    machine = {**machine_info(), "torchvision_version": importlib.metadata.version("torchvision")}
    print(f"{len(now)} runs in {seconds:.0f} s ({args.workers} workers); torch {machine['torch_version']}, "
          f"torchvision {machine['torchvision_version']}, {machine['cpu_model']} ({machine['cpu_capability']})")
    payload = {"tasks": args.tasks, "regimes": args.regimes, "methods": args.methods, "seeds": args.seeds,
               "machine": machine, "date": time.strftime("%Y-%m-%d"), "seconds": seconds, **result,
               "runs": list(now.values())}  # fmt: skip
    Path(args.out).write_text(json.dumps(payload, indent=1, default=str) + "\n")
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
