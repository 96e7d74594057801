"""Registry of the experiments behind ``augnet reproduce NAME``."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from augnet._checks import check_bool, folder_problem, is_int, user_path
from augnet._json import dumps as strict_json

__all__ = [
    "Report",
    "SetupError",
    "check_settings",
    "cut_torn_line",
    "names",
    "read_runs",
    "register",
    "reproduce",
]


class SetupError(ValueError):
    """An experiment refused its settings before doing any work (``augnet reproduce`` prints it as one line).

    ``cli``: the same message with the command line's flags for the arguments it names (``--seed 3``
    for ``seed=3``), which ``augnet reproduce`` prints; the message itself when it names none.
    """

    def __init__(self, message: str, cli: str | None = None) -> None:
        super().__init__(message)
        self.cli = message if cli is None else cli


def read_runs(path: Path) -> dict[str, dict]:
    """The records of a ``runs.jsonl`` file by their ``"key"`` (none when it does not exist).

    An experiment that resumes appends one JSON line per finished run; a torn last line, from an interruption, is
    ignored here and cut off by :func:`cut_torn_line` before the next record is appended. So is any other line
    that is not a record (a JSON object with a ``"key"`` string): an empty line, bytes that are not UTF-8, ``null``
    or a list; its run, if it had one, is not there and is trained again.
    """
    done = {}
    if path.exists():
        for line in path.read_bytes().splitlines():
            try:
                record = json.loads(line.decode())
            except (UnicodeDecodeError, json.JSONDecodeError):
                continue
            if isinstance(record, dict) and isinstance(record.get("key"), str):
                done[record["key"]] = record
    return done


def cut_torn_line(path: Path) -> None:
    """Cut a torn last line (an interrupted write) off ``path``, so that the next record starts a line of its own."""
    if not path.exists():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        os.truncate(path, data.rfind(b"\n") + 1)  # in place: the complete lines are never written again


_interrupted = False  # in a worker: whether Ctrl-C has come
_CAN_BLOCK = hasattr(signal, "pthread_sigmask")  # POSIX


def _note_interrupt(signum, frame) -> None:
    global _interrupted
    _interrupted = True


def _on_interrupt(signum, frame) -> None:
    _note_interrupt(signum, frame)
    raise KeyboardInterrupt


def _unless_interrupted(fn: Callable, /, *args, **kwargs):
    if _interrupted:  # a job queued before Ctrl-C: end it unrun
        raise KeyboardInterrupt
    return fn(*args, **kwargs)


class WorkerPool(ProcessPoolExecutor):
    """``workers`` processes for an experiment's runs: spawned (a fork after autograd has run in this process,
    a test session or a notebook, fails), and stopped by Ctrl-C.

    Ctrl-C reaches the terminal's whole process group: each worker's running job stops, and so does every job
    queued to it after (``concurrent.futures`` hands a job's KeyboardInterrupt back as its result and starts the
    next one, so the main process, stopping, waited for whole runs it would not keep).
    """

    def __init__(self, workers: int) -> None:
        super().__init__(workers, mp_context=multiprocessing.get_context("spawn"), initializer=_in_worker)

    def submit(self, fn, /, *args, **kwargs):
        # A worker starts here and imports torch for seconds before its initializer runs. Started with SIGINT
        # blocked (the mask is inherited), a Ctrl-C meanwhile waits for the initializer, which notes it (the
        # worker's jobs then end unrun) instead of printing an import's traceback; here it waits until the
        # submission is done.
        if _CAN_BLOCK:
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            return super().submit(_unless_interrupted, fn, *args, **kwargs)
        finally:
            if _CAN_BLOCK:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _in_worker() -> None:
    if _CAN_BLOCK:
        signal.signal(signal.SIGINT, _note_interrupt)  # a Ctrl-C that came while the worker started: noted
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, _on_interrupt)
    _watch_parent()


_watching: list = []  # in a worker: the thread of _watch_parent, once started


def _watch_parent(every: float = 1.0) -> None:
    """In a worker process, start once a daemon thread that ends the process when its parent is gone.

    An experiment killed by SIGKILL (or the OOM killer) cannot stop its pool: its idle workers waited for jobs
    forever (the call queue's pipe never closes: each worker holds its write end too). The thread checks every
    ``every`` seconds whether the parent has changed (a dead parent's children are re-parented) and then ends the
    process with ``os._exit(1)``; a run it was in the middle of is lost, as it is with the parent. It reads nothing
    else and draws nothing: the results are those of an unwatched worker. In a process that no
    :mod:`multiprocessing` parent started it does nothing.
    """
    import threading

    parent = multiprocessing.parent_process()
    if parent is None or _watching:
        return

    def watch() -> None:
        while os.getppid() == parent.pid:
            time.sleep(every)
        os._exit(1)

    _watching.append(threading.Thread(target=watch, name="augnet-watch-parent", daemon=True))
    _watching[0].start()


@dataclass
class Report:
    """What ``augnet reproduce NAME`` produced.

    Attributes:
        name: the experiment.
        verdict: a few lines saying what happened, with the key numbers.
        numbers: JSON-serialisable results (also written to ``out/NAME/NAME.json``).
        figures: the PNG files written.
        seconds: wall time.
    """

    name: str
    verdict: str
    numbers: dict
    figures: list[Path] = field(default_factory=list)
    seconds: float = 0.0


_REGISTRY: dict[str, Callable[..., Report]] = {}
_CPU_ONLY: set[str] = set()
_FIXED_SEEDS: dict[str, str] = {}


def register(name: str, cpu_only: bool = False, fixed_seeds: str | None = None):
    """Register ``fn(out_dir: Path, quick: bool, seed: int, progress: bool, device: str) -> Report`` as ``name``.

    ``cpu_only``: the experiment runs on the CPU only (its workers, one thread each); another device is refused
    before any work (:func:`check_settings`). ``fixed_seeds``: the seeds a full run trains whatever its ``seed``
    (said in words); a full run given another seed than 0 is refused, the seed being a quick run's only.
    """

    def wrap(fn):
        _REGISTRY[name] = fn
        if cpu_only:
            _CPU_ONLY.add(name)
        if fixed_seeds is not None:
            _FIXED_SEEDS[name] = fixed_seeds
        return fn

    return wrap


#: The largest seed an experiment takes: each seeds its generators with the seed plus offsets, and torch's
#: generators take at most 2**64 - 1 (a seed near it overflowed, after the run had started).
MAX_SEED = 2**62


def check_settings(name: str, device: str = "cpu", seed: int = 0, quick: bool = False) -> None:
    """The :class:`SetupError` of settings experiment ``name`` refuses (an unknown name, a device other than the
    CPU for a CPU-only experiment or a device this machine lacks, a seed outside ``[0, MAX_SEED]``, a seed that a
    full run would ignore); checked before anything is written."""

    if name not in _REGISTRY:
        raise SetupError(f"unknown experiment {name!r}; choose from {names()}")
    if not is_int(seed) or not 0 <= seed <= MAX_SEED:
        raise SetupError(f"seed must be an int >= 0 and at most 2**62, got {seed!r}",
                         f"--seed must be an int >= 0 and at most 2**62, got {seed!r}")  # fmt: skip
    if name in _FIXED_SEEDS and not quick and seed != 0:
        ran = f"a full {name} run trains seeds {_FIXED_SEEDS[name]} whatever its seed"
        raise SetupError(f"{ran}; seed={seed} is for a quick run only",
                         f"{ran}; --seed {seed} is for a --quick run only")  # fmt: skip
    import torch

    from augnet.training.devices import resolve_device

    try:
        kind = torch.device(device).type
    except (RuntimeError, TypeError) as err:  # torch's TypeError runs over lines: its first says what was given
        why = str(err).strip().splitlines()[0]
        raise SetupError(f"device {device!r} is not a device: {why}", f"--device {device!r} is not a device: {why}") \
            from None
    if name in _CPU_ONLY and kind != "cpu":
        only = f"{name} runs on the CPU only, got"
        raise SetupError(f"{only} device={device!r}", f"{only} --device {device!r}")
    try:
        resolve_device(device)  # a device this machine has (not meta)
    except ValueError as err:
        raise SetupError(str(err), f"--device {device!r}: {err}") from None


def names() -> list[str]:
    """The registered experiments."""
    return sorted(_REGISTRY)


def reproduce(
    name: str,
    quick: bool = False,
    out: str | Path = "results",
    seed: int = 0,
    progress: bool = True,
    device: str = "cpu",
) -> Report:
    """Run experiment ``name`` on ``device``; write its figures, numbers (``name.json``) and verdict
    (``verdict.txt``) under ``out/name/``.

    ``name.json`` also keeps the date and the machine (:func:`augnet.bench.machine_info`: the CPU and the
    instruction set torch dispatches to, the versions): the same run on another install or CPU can land on
    slightly different weights, and a figure near a rule's threshold can move across it.

    Raises:
        SetupError: settings the experiment refuses (:func:`check_settings`), or an ``out`` that cannot hold
            the results (a file; a ``runs.jsonl`` there that is a folder or cannot be appended to), before
            anything is written.
        TypeError: ``quick`` or ``progress`` that is not a bool, ``out`` that is not a path.
    """
    from augnet.bench.machine import machine_info  # here: augnet.bench imports augnet.experiments

    check_bool("quick", quick)  # "no" or 1 is not a flag (a full run would be a quick one, or the reverse)
    check_bool("progress", progress)
    check_settings(name, device, seed, quick)
    out = user_path(out, "out")  # "~/results" the home folder
    problem = folder_problem(out / name, "out", "output folder")  # before the run, not when it first writes
    if problem is None:
        problem = _runs_file_problem(out / name / "runs.jsonl")
    if problem is not None:
        raise SetupError(problem)
    seed = int(seed)  # a NumPy integer too: the experiments seed generators with it
    out_dir = Path(out) / name
    out_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    report = _REGISTRY[name](out_dir=out_dir, quick=quick, seed=seed, progress=progress, device=device)
    report.seconds = time.perf_counter() - start
    payload = {"name": name, "quick": quick, "seed": seed, "device": device, "seconds": report.seconds,
               "date": time.strftime("%Y-%m-%d"), "machine": machine_info(device)}  # fmt: skip
    payload["verdict"] = report.verdict
    payload["numbers"] = report.numbers
    (out_dir / f"{name}.json").write_text(strict_json(payload, _jsonable))
    (out_dir / "verdict.txt").write_text(report.verdict + "\n")
    return report


def _runs_file_problem(path: Path) -> str | None:
    """Why the runs file ``path`` of an experiment that resumes cannot take the records of the runs that finish
    (``None`` when it can, or does not exist): a folder there, or a file that cannot be appended to (a read-only
    one). Checked before the run: found where the first record was written (or a torn line cut off), it was a
    traceback, after that run's work."""
    if not path.exists():
        return None
    if not path.is_file():
        return f"{path} is not a file: the runs that finish are kept there (move it away, or give another folder)"
    try:
        with path.open("ab"):  # opened to append, nothing written: the file is left as it is
            pass
    except OSError as err:
        return f"{path} cannot be appended to ({err.strerror}): the runs that finish are kept there"
    return None


def _jsonable(value):
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
