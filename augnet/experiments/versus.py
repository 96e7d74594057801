"""Does learned augmentation beat hand-designed policies? (``augnet reproduce versus``)

One table of test accuracy, mean ± standard deviation over seeds, for every task × data regime ×
method (:mod:`augnet.experiments.versus_tasks`, :mod:`augnet.experiments.versus_methods`): the same
trunk, optimiser, epochs and batch size for every method of a task; the only tuning is the fixed
augmentation's grid search, on the validation split of the first seed. Each run also records its
accuracy with test-time augmentation and on a shifted test set, the invariance of its logits to the
task's true transformation and its training time on one thread (wall clock and CPU seconds; the table
reads the CPU seconds, which other jobs on the machine change far less).

Seeds 0-4 are the ones any choice was tuned on; seeds 5-9 are reported beside them, and the verdict
(:mod:`augnet.experiments.versus_rules`, written before the runs) reads seeds 5-9 only.

The runs go to ``OUT/versus/runs.jsonl`` as they finish, one line each, with the torch version and the
CPU instruction set they ran with (another install trains to slightly different weights); a run that is
already there is not run again, so an interrupted run resumes where it stopped (same ``--out``). Runs are spread
over worker processes, each on one torch thread.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import time
from concurrent.futures import as_completed
from dataclasses import dataclass, field
from pathlib import Path

from augnet._checks import check_bool, folder_problem, is_int, user_path
from augnet.experiments._registry import (
    MAX_SEED,
    Report,
    SetupError,
    WorkerPool,
    _runs_file_problem,
    cut_torn_line,
    read_runs,
    register,
)
from augnet.experiments.versus_methods import METHODS, QUICK_EPOCHS, applies, fixed_grid, run_method
from augnet.experiments.versus_tasks import REGIMES, TASKS, load

__all__ = ["REPORTED_SEEDS", "TUNING_SEEDS", "VersusConfig", "check_runs_folder", "run_versus", "summarise"]

#: The seeds any setting was chosen on, and the seeds the verdict reads.
TUNING_SEEDS = (0, 1, 2, 3, 4)
REPORTED_SEEDS = (5, 6, 7, 8, 9)
# The training's cost is read as CPU seconds of its one-thread process, which other jobs on the machine
# change far less than the wall clock (both are recorded).
_MEASURES = ("accuracy", "accuracy_tta", "accuracy_1", "accuracy_shift", "invariance", "train_cpu_seconds")


@dataclass
class VersusConfig:
    """What :func:`run_versus` trains: every (task, regime, method, seed), after the fixed augmentation's grid."""

    tasks: tuple[str, ...] = tuple(TASKS)
    regimes: tuple[str, ...] = REGIMES
    methods: tuple[str, ...] = METHODS
    seeds: tuple[int, ...] = TUNING_SEEDS + REPORTED_SEEDS
    workers: int = 1  # processes, one torch thread each
    quick: bool = False  # 2 epochs, smaller test sets, a 3-point grid: a check of the set-up
    grid_seed: int | None = None  # the seed of the fixed augmentation's grid search (None: the first of seeds)
    extra: dict = field(default_factory=dict)  # reserved (must stay empty): the runs take no overrides

    def validate(self) -> None:
        """Refuse a config that would run nothing, or not what it says.

        Raises:
            TypeError: names that are not strings, ``quick`` that is not a bool.
            ValueError: a field that is not a tuple (a string was read as names of one letter each), repeated
                or unknown names (naming the field and the names it may hold), empty fields, seeds that are not
                distinct ints in ``[0, 2**62]``, a bad ``grid_seed`` or ``workers``, a non-empty ``extra``, methods
                none of which applies to any of the tasks (the image policies and Augerino on the sinusoids).
        """
        for name in ("tasks", "regimes", "methods", "seeds"):  # a string was read as names of one letter each
            value = getattr(self, name)
            if not isinstance(value, (tuple, list)):
                raise ValueError(f"{name} must be a tuple (e.g. {name}=({getattr(VersusConfig, name)[0]!r},)), got "
                                 f"{value!r}")  # fmt: skip
            if name == "seeds":
                continue
            if not all(isinstance(v, str) for v in value):  # a list in the tuple failed in set() with no name
                raise TypeError(f"{name} must hold names (strings), got {list(value)!r}")
            if len(set(value)) != len(value):  # each run was trained and written twice
                raise ValueError(f"{name} must be distinct, got {list(value)}")
        for name, known in (("tasks", tuple(TASKS)), ("regimes", REGIMES), ("methods", METHODS)):
            unknown = [v for v in getattr(self, name) if v not in known]
            if unknown:
                raise ValueError(f"{name}: unknown {unknown}; choose from {known}")
        empty = [name for name in ("tasks", "regimes", "methods", "seeds") if not getattr(self, name)]
        if empty:
            raise ValueError(f"{', '.join(empty)} must not be empty: there would be nothing to run")
        # NumPy integers too (np.arange); at most MAX_SEED: the data are seeded with the seed plus offsets, and a
        # larger seed failed in its first run, after the runs before it had trained
        bad = [s for s in self.seeds if not is_int(s) or not 0 <= s <= MAX_SEED]
        if bad or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds must be distinct ints >= 0 and at most 2**62, got {list(self.seeds)}")
        if self.grid_seed is not None and (not is_int(self.grid_seed) or not 0 <= self.grid_seed <= MAX_SEED):
            raise ValueError(f"grid_seed must be None or an int >= 0 and at most 2**62, got {self.grid_seed!r}")
        if not is_int(self.workers) or self.workers < 1:
            raise ValueError(f"workers must be an int >= 1, got {self.workers!r}")
        check_bool("quick", self.quick)  # "no" ran a quick run, and 1 took the folder's quick runs for full ones
        if self.extra:
            raise ValueError(f"extra is reserved and must be empty (the runs take no overrides), got {self.extra!r}")
        if not self.jobs():  # e.g. methods=("crop",) on the sinusoids: nothing ran, and the table was empty
            raise ValueError(f"methods {list(self.methods)} apply to none of tasks {list(self.tasks)} (the image "
                             "policies and Augerino need images): there would be nothing to run")  # fmt: skip

    @property
    def grid_at(self) -> int:
        """The seed the grid search runs on: ``grid_seed``, else the first of ``seeds``."""
        return int(self.seeds[0] if self.grid_seed is None else self.grid_seed)

    def grid_jobs(self) -> list[tuple]:
        """The grid search's runs: ``("grid", task, regime, (q, magnitude), seed)`` on :attr:`grid_at`."""
        if "fixed" not in self.methods:
            return []
        return [("grid", t, r, qm, self.grid_at) for t in self.tasks for r in self.regimes
                for qm in fixed_grid(TASKS[t], self.quick)]  # fmt: skip

    def jobs(self) -> list[tuple]:
        """Every method's runs: ``("run", task, regime, method, seed)``."""
        return [("run", t, r, m, s) for t in self.tasks for r in self.regimes for m in self.methods
                for s in map(int, self.seeds) if applies(m, TASKS[t])]  # fmt: skip


def job_key(job: tuple) -> str:
    """A job's key in ``runs.jsonl``."""
    return json.dumps([*list(job[:3]), list(job[3]) if isinstance(job[3], tuple) else job[3], job[4]])


def _run_job(job: tuple, fixed, quick: bool) -> dict:
    import torch

    from augnet.bench.machine import cpu_capability

    torch.set_num_threads(1)
    kind, task_name, regime, what, seed = job
    task = TASKS[task_name]
    split = load(task, regime, seed, quick=quick)
    if kind == "grid":
        record = run_method("fixed", task, regime, split, seed, fixed=tuple(what), quick=quick)
    else:
        record = run_method(what, task, regime, split, seed, fixed=fixed, quick=quick)
    return {"key": job_key(job), "kind": kind, "task": task_name, "regime": regime, "method": what if kind == "run"
            else "fixed", "fixed": list(what) if kind == "grid" else fixed, "seed": seed, "quick": quick,
            **record, "torch": torch.__version__, "cpu_capability": cpu_capability()}  # fmt: skip


def is_quick(record: dict) -> bool:
    """Whether a record comes from a ``quick`` run (records written before the flag: their 2 epochs say so)."""
    return bool(record.get("quick", record.get("epochs") == QUICK_EPOCHS))


def best_fixed(records: dict[str, dict], task: str, regime: str, seed: int | None = None) -> list | None:
    """The grid's ``[q, magnitude]`` with the best validation accuracy for (task, regime); on ties the first in
    the grid's order (transform, then magnitude), not in the order the worker processes finished them.

    ``seed``: the grid's runs of that seed only (a folder may hold the grids of runs with other seeds; the
    best over all of them would let one run's table depend on what the folder held before)."""
    grid = [r for r in records.values() if r["kind"] == "grid" and (r["task"], r["regime"]) == (task, regime)
            and (seed is None or r.get("seed") == seed)]  # fmt: skip
    if not grid:
        return None
    return max(grid, key=lambda r: (r["val_accuracy"], [-v for v in r["fixed"]]))["fixed"]


def _stale(job: tuple, records: dict[str, dict], grid_seed: int) -> bool:
    """Whether ``job`` has no record, or is a run of the fixed method with another augmentation than the grid's
    best now (a record from before the grid was complete, or from an older tie-break)."""
    record = records.get(job_key(job))
    if record is None:
        return True
    best = best_fixed(records, job[1], job[2], grid_seed)
    return job[0] == "run" and job[3] == "fixed" and record.get("fixed") != best


def check_runs_folder(out_dir: str | Path, quick: bool) -> None:
    """The :class:`~augnet.experiments.SetupError` :func:`run_versus` would raise for the runs already in
    ``out_dir/runs.jsonl``: runs of the other kind (full runs for a ``quick`` one, or the reverse), which it would
    take for its own. Reads the folder only; nothing when it holds no runs."""
    check_bool("quick", quick)
    path = user_path(out_dir, "out_dir") / "runs.jsonl"  # "~/results": the home folder's, as run_versus reads it
    if path.is_file():
        _refuse_other_kind(read_runs(path), path, quick)


def _refuse_other_kind(records: dict[str, dict], path: Path, quick: bool) -> None:
    other = [r for r in records.values() if is_quick(r) != quick]
    if other:
        kinds = ("--quick", "full") if quick else ("full", "--quick")
        raise SetupError(
            f"{path} holds {len(other)} {kinds[1]} run(s); a {kinds[0]} run would take them for its own: give it "
            "another output folder (--out)"
        )


def run_versus(config: VersusConfig, out_dir: str | Path, progress: bool = False, log=print) -> dict[str, dict]:
    """Run every job of ``config`` not yet in ``out_dir/runs.jsonl``; return every record by key.

    ``out_dir``: a str or a path-like object, a leading ``~`` the home folder. ``log``: called with a line per
    finished run, or None.

    Raises:
        TypeError: ``config`` that is not a :class:`VersusConfig`, ``out_dir`` that is not a path, ``progress``
            that is not a bool, ``log`` that is neither callable nor None (all before any run).
        ValueError: a config :meth:`VersusConfig.validate` refuses; an ``out_dir`` that cannot hold the runs (a
            file, or a ``runs.jsonl`` there that is a folder or cannot be appended to), as a
            :class:`~augnet.experiments.SetupError`, like runs of the other kind (``quick``) in the folder.
    """
    _check_call(config, progress, log)
    config.validate()
    out_dir = user_path(out_dir, "out_dir")  # "~/results" was a folder named "~" in the working directory
    problem = folder_problem(out_dir, "out_dir", "output folder")  # a file there failed in mkdir, unnamed
    if problem is None:
        problem = _runs_file_problem(out_dir / "runs.jsonl")
    if problem is not None:
        raise SetupError(problem)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "runs.jsonl"
    records = read_runs(path)
    _refuse_other_kind(records, path, config.quick)
    cut_torn_line(path)
    for task in config.tasks:  # task by task: a task's table is complete before the next task starts
        for phase in ("grid", "run"):
            jobs = config.grid_jobs() if phase == "grid" else config.jobs()
            todo = [j for j in jobs if j[1] == task and _stale(j, records, config.grid_at)]
            if todo:
                _run_jobs(todo, config, records, path, progress, log, f"versus {task} ({phase})")
    return records


def _check_call(config, progress, log) -> None:
    """The TypeError of a call of :func:`run_versus` with arguments that failed late, or not at all."""
    if not isinstance(config, VersusConfig):  # a dict of its fields failed with an AttributeError
        raise TypeError(f"config must be a VersusConfig (e.g. VersusConfig(tasks=('digits',))), got "
                        f"{type(config).__name__}: {config!r:.80}")  # fmt: skip
    check_bool("progress", progress)  # "no" showed the bars
    if log is not None and not callable(log):  # failed once the first run had trained
        raise TypeError(f"log must be callable (e.g. print) or None, got {type(log).__name__}: {log!r:.80}")


def _run_jobs(todo: list[tuple], config: VersusConfig, records: dict, path: Path, progress, log, desc: str) -> None:
    """Run ``todo`` (in ``config.workers`` processes), appending each record to ``path`` as it finishes."""
    import torch
    from tqdm.auto import tqdm

    fixed = {(t, r): best_fixed(records, t, r, config.grid_at) for t in config.tasks for r in config.regimes}
    bar = tqdm(total=len(todo), disable=not progress, desc=desc, unit="run")
    args = [(j, fixed[(j[1], j[2])], config.quick) for j in todo]
    pool = WorkerPool(int(config.workers)) if config.workers > 1 else None
    threads = torch.get_num_threads()  # runs in this process set one thread and seed torch: the caller's back after
    with path.open("a") as sink, torch.random.fork_rng(devices=[]):
        try:  # from the first submission: a Ctrl-C while submitting still cancels what was queued
            if pool is None:
                results = (_run_job(*a) for a in args)
            else:
                results = (f.result() for f in as_completed([pool.submit(_run_job, *a) for a in args]))
            for record in results:
                records[record["key"]] = record
                sink.write(json.dumps(record) + "\n")
                sink.flush()
                bar.update()
                if log is not None:
                    log(f"{record['task']:<10} {record['regime']:<6} {record['method']:<15} seed "
                        f"{record['seed']}: accuracy {record['accuracy']:.3f} "
                        f"({record['train_seconds']:.0f} s)")  # fmt: skip
        finally:
            if pool is not None:
                pool.shutdown(cancel_futures=True)
            torch.set_num_threads(threads)
            bar.close()


def _mean_std(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), statistics.pstdev(values) if len(values) > 1 else 0.0


def summarise(records: dict[str, dict], seeds) -> dict:
    """``{task: {regime: {method: {measure: [mean, std, n]}}}}`` over ``seeds`` (runs only, not the grid), in the
    order of :data:`TASKS`, :data:`REGIMES` and :data:`METHODS` whatever order the records are in.

    ``seeds``: a collection of seeds (a tuple, a range); a measure a run did not record (the signals' shifted
    accuracy) is left out of that cell. A record that cannot be placed in the table (no ``kind``, or a run's
    without its ``task``, ``regime``, ``method`` or ``seed``: a hand-edited or older ``runs.jsonl``) is left out,
    with a warning naming its key and what it misses, as reading ``runs.jsonl`` leaves out a line that is not a
    record.

    Raises:
        TypeError: ``seeds`` that is one seed or a string, not a collection of them.
    """
    if is_int(seeds) or isinstance(seeds, (str, bytes)) or not hasattr(seeds, "__contains__"):
        raise TypeError(f"seeds must be a collection of seeds (e.g. (5, 6, 7)), got {seeds!r}")
    out: dict = {}
    unusable = []
    for key, r in records.items():
        if r.get("kind", "run") != "run" or (r.get("seed") is not None and r["seed"] not in seeds):
            continue  # the grid's, or another seed's
        missing = [f for f in ("kind", "task", "regime", "method", "seed") if r.get(f) is None]
        if missing:
            unusable.append(f"{key!r} (no {', '.join(missing)})")
            continue
        cell = out.setdefault(r["task"], {}).setdefault(r["regime"], {}).setdefault(r["method"], {})
        for m in _MEASURES:
            if r.get(m) is not None:  # signals have no shifted test set
                cell.setdefault(m, []).append(r[m])
    if unusable:
        import warnings

        more = f" and {len(unusable) - 5} more" if len(unusable) > 5 else ""
        warnings.warn(f"summarise: left out {len(unusable)} run record(s) that cannot be placed in the table: "
                      f"{'; '.join(unusable[:5])}{more}", UserWarning, stacklevel=2)  # fmt: skip
    # in the order of TASKS, REGIMES and METHODS, not the order the runs finished in (worker processes race: a
    # task's full regime could come before its small one) or a folder's earlier runs were written in
    return {task: {regime: {method: {m: [*_mean_std(v), len(v)] for m, v in cell.items()}
                            for method, cell in _in_order(regimes[regime], METHODS)}
                   for regime in _in_order(regimes, REGIMES, keys=True)}
            for task, regimes in _in_order(out, tuple(TASKS))}  # fmt: skip


def _in_order(d: dict, order: tuple, keys: bool = False):
    """The items (or keys) of ``d``, those in ``order`` first in its order, then any other in ``d``'s."""
    ranked = sorted(d, key=lambda k: order.index(k) if k in order else len(order))  # stable: others keep d's order
    return ranked if keys else [(k, d[k]) for k in ranked]


def _cell(mean: float, std: float) -> str:
    """One table cell, mean ± std; ``n/a`` for a NaN mean (a measure undefined in some seed's run, e.g. the
    invariance of a model whose logits are not finite), as the probes' tables mark it."""
    return "n/a" if math.isnan(mean) else f"{mean:.3f} ± {std:.3f}"


def table_markdown(summary: dict, title: str) -> str:
    """The summary as one markdown table per task and regime (``–``: a measure the task has not, ``n/a``: NaN)."""
    lines = [f"## {title}", ""]
    head = "| method | accuracy | with TTA (4) | one copy | shifted | invariance | train CPU s |"
    for task, regimes in summary.items():
        for regime, methods in regimes.items():
            lines += [f"### {task}, {regime}", "", head, "|---|---|---|---|---|---|---|"]
            for method in METHODS:
                if method not in methods:
                    continue
                c = methods[method]
                cells = [_cell(*c[m][:2]) if m in c else "–" for m in _MEASURES[:-1]]
                lines.append(f"| {method} | {' | '.join(cells)} | {c['train_cpu_seconds'][0]:.1f} |")
            lines.append("")
    return "\n".join(lines)


@register("versus", cpu_only=True, fixed_seeds="0-9 (tuned on 0-4, reported on 5-9)")
def versus(out_dir: Path, quick: bool = False, seed: int = 0, progress: bool = True, device: str = "cpu") -> Report:
    """Every method on every task and regime (see the module docstring); resumes from ``out_dir/runs.jsonl``."""
    from augnet.experiments.versus_rules import check_rules

    out_dir = Path(out_dir)  # a str too, as run_versus takes it: the table was written after every run had trained
    workers = max(1, min(os.cpu_count() or 1, 2))
    config = VersusConfig(workers=workers)
    if quick:
        config = VersusConfig(tasks=("digits", "sinusoids"), regimes=("small",), seeds=(seed,), workers=workers,
                              quick=True)  # fmt: skip
    start = time.perf_counter()
    records = run_versus(config, out_dir, progress=progress, log=None)
    tuned, reported = summarise(records, TUNING_SEEDS), summarise(records, REPORTED_SEEDS)
    if quick:
        tuned, reported = summarise(records, config.seeds), {}
    title = "Seeds the settings were tuned on (0-4)"
    if quick:
        title = f"Seed {seed}, quick (2 epochs: a check of the set-up)"
    table = table_markdown(tuned, title)
    if reported:
        table += "\n" + table_markdown(reported, "Reported seeds (5-9), which the verdict reads")
    (out_dir / "table.md").write_text(table + "\n")
    verdict = check_rules(reported, records, REPORTED_SEEDS) if reported else (
        "quick run: the set-up works (no verdict on 2 epochs)")
    numbers = {"tuned": tuned, "reported": reported, "config": {"quick": quick, "seeds": list(config.seeds)},
               "grid": {f"{t}/{r}": best_fixed(records, t, r, config.grid_at) for t in config.tasks
                        for r in config.regimes},
               "seconds": time.perf_counter() - start}  # fmt: skip
    return Report("versus", verdict, numbers)
