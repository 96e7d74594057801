"""Whether the kept selection table repeats on this install: rows of it trained again, beside the kept figures.

``augnet reproduce selection`` keeps its table (``docs/results/selection/selection.json``) from the day it
ran. The same code on another day's fresh install (another torch, another BLAS) trains every run to
slightly different weights, and a rule that a row met near its threshold can flip. This trains the chosen
tasks of the chosen rows again, exactly as the table does (:func:`augnet.experiments.selection.run_selection`,
one thread per run, the same seeds), and prints each task's verdict now and in the kept table; for the
capacity task, every trunk's median invariance (the rule: at least 0.9 on 7 of the 9 trunks) and the
oracle's. Chooses nothing; prints and saves the figures::

    python benchmarks/selection_rerun.py                      # the default row's capacity task, seeds 0-4
    python benchmarks/selection_rerun.py --tasks sprites glyphs sinusoids-1 sinusoids-2 sinusoids-4 \\
        --out benchmarks/results/selection_rerun_other_tasks.json
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import time
from pathlib import Path

from augnet.bench.machine import machine_info
from augnet.experiments.selection import (
    DEFAULT_SETTING,
    README_SETTING,
    SETTINGS,
    TASKS,
    SelectionConfig,
    run_selection,
)
from augnet.experiments.selection_rules import ORACLE, RULES, check_rules, summarize

ROOT = Path(__file__).resolve().parent.parent
KEPT = ROOT / "docs" / "results" / "selection" / "selection.json"
SHORT = {"default": DEFAULT_SETTING, "readme": README_SETTING}


def trunks_line(row: dict) -> str:
    """``1x4 0.876 ...``: each capacity trunk's median invariance, marked ``*`` where it meets the rule."""
    rule = RULES["capacity"]["invariance"]
    cells = (f"{k} {t['invariance_median']:.3f}{'*' if t['invariance_median'] >= rule else ''}"
             for k, t in row["trunks"].items())  # fmt: skip
    return " ".join(cells)


def compare(now: list[dict], kept: list[dict], settings: list[str]) -> dict:
    """Per setting: the rules' verdicts now and kept, printed with the capacity trunks' figures."""
    out = {}
    for setting in settings:
        tasks = {r["task"] for r in now if r["setting"] == setting}
        kept_rows = [r for r in kept if r["task"] in tasks and r["setting"] in (setting, ORACLE)]
        verdict_now = check_rules(now, setting, oracle=ORACLE)
        verdict_kept = check_rules(kept_rows, setting, oracle=ORACLE)
        out[setting] = {"now": verdict_now, "kept": verdict_kept}
        print(setting)
        for rule, (passed, what) in verdict_now.items():
            if passed is None:  # a rule of a task not trained again
                continue
            kept_passed, kept_what = verdict_kept.get(rule, (None, "not in the kept table"))
            print(f"  {rule}: now {'MET' if passed else 'NOT MET'} ({what})")
            print(f"  {' ' * len(rule)}  kept {'MET' if kept_passed else 'NOT MET'} ({kept_what})")
        for name in (setting, ORACLE) if "capacity" in tasks else ():
            for when, table in (("now", now), ("kept", kept)):
                row = next((r for r in table if r["task"] == "capacity" and r["setting"] == name), None)
                if row is not None:
                    print(f"  capacity, {name}, {when}: {trunks_line(row)}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["capacity"], choices=TASKS)
    parser.add_argument("--settings", nargs="+", default=["default"], help="'default', 'readme' or a row's name")
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0 to N-1, as the table (default 5)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "selection_rerun.json"))
    args = parser.parse_args()
    settings = [SHORT.get(s, s) for s in args.settings]
    unknown = [s for s in settings if s not in SETTINGS]
    if unknown:
        parser.error(f"unknown settings {unknown}; the rows are 'default', 'readme' or one of {sorted(SETTINGS)}")
    start = time.perf_counter()
    config = SelectionConfig(tasks=tuple(args.tasks), settings=tuple(settings), seeds=args.seeds,
                             workers=args.workers)  # fmt: skip
    runs = run_selection(config)
    seconds = time.perf_counter() - start
    now = summarize(runs)
    kept = json.loads(KEPT.read_text())["numbers"]["summary"]
    verdicts = compare(now, kept, settings)
    versions = {name: importlib.metadata.version(name) for name in ("torch", "numpy")}
    machine = machine_info()  # the same torch on another CPU trains to other last digits
    print(f"{len(runs)} runs in {seconds:.0f} s ({args.workers} workers); {versions}; {machine['cpu_model']} "
          f"({machine['cpu_capability']})")
    payload = {"tasks": args.tasks, "settings": settings, "seeds": args.seeds, "versions": versions,
               "machine": machine,
               "date": time.strftime("%Y-%m-%d"), "seconds": seconds, "verdicts": verdicts, "summary": now,
               "runs": runs}  # fmt: skip
    Path(args.out).write_text(json.dumps(payload, indent=1, default=str) + "\n")
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
