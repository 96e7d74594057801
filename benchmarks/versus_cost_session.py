"""The comparison's training cost, measured in one session: chosen runs again, beside their stored times.

``augnet reproduce versus`` keeps every run's CPU seconds (one thread) in ``runs.jsonl``, but runs
trained again at another time (the learned methods, after a change of their defaults) were timed
on another day, when the same training may take another time. This trains, in one session, the
runs named (by default: no augmentation, RandAugment and AugNet on the small digits and glyphs,
seeds 5-9), checks that each reproduces its stored accuracy, and prints each method's CPU seconds
now beside the stored ones. Prints and saves the figures::

    python benchmarks/versus_cost_session.py [--runs none:digits:small:5 ...] [--workers 2] [--out ...]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from augnet.experiments.versus import read_runs

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_RUNS = [f"{m}:{t}:small:{s}" for t in ("digits", "glyphs") for m in ("none", "randaugment", "augnet")
                for s in range(5, 10)]  # fmt: skip


def _train(spec: str) -> dict:
    import torch

    from augnet.experiments import versus_methods as VM
    from augnet.experiments.versus_tasks import TASKS, load

    torch.set_num_threads(1)  # as the comparison's workers
    method, task, regime, seed = spec.split(":")
    seed = int(seed)
    record = VM.run_method(method, TASKS[task], regime, load(TASKS[task], regime, seed), seed)
    return {"method": method, "task": task, "regime": regime, "seed": seed, "accuracy": record["accuracy"],
            "train_cpu_seconds": record["train_cpu_seconds"]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", nargs="+", default=DEFAULT_RUNS, help="method:task:regime:seed")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--stored", default=str(ROOT / "docs" / "results" / "versus" / "runs.jsonl"))
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "versus_cost_session.json"))
    args = parser.parse_args()
    stored = {(r["method"], r["task"], r["regime"], r["seed"]): r
              for r in read_runs(Path(args.stored)).values() if r["kind"] == "run"}  # fmt: skip
    with ProcessPoolExecutor(args.workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        runs = list(pool.map(_train, args.runs))
    groups: dict[tuple, list] = {}
    for run in runs:
        old = stored[(run["method"], run["task"], run["regime"], run["seed"])]
        run["stored_accuracy"], run["stored_train_cpu_seconds"] = old["accuracy"], old["train_cpu_seconds"]
        run["same_accuracy"] = run["accuracy"] == old["accuracy"]
        groups.setdefault((run["task"], run["regime"], run["method"]), []).append(run)
    summary = []
    for (task, regime, method), rows in groups.items():
        now = statistics.mean(r["train_cpu_seconds"] for r in rows)
        then = statistics.mean(r["stored_train_cpu_seconds"] for r in rows)
        same = sum(r["same_accuracy"] for r in rows)
        summary.append({"task": task, "regime": regime, "method": method, "runs": len(rows), "cpu_now": now,
                        "cpu_stored": then, "same_accuracy": same})  # fmt: skip
        print(f"{task:<9} {regime:<6} {method:<12} CPU s now {now:6.2f}, stored {then:6.2f} ({now / then - 1:+.0%}); "
              f"accuracy as stored in {same} of {len(rows)}")  # fmt: skip
    Path(args.out).write_text(json.dumps({"summary": summary, "runs": runs}, indent=1) + "\n")
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
