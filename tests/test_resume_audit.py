"""Resuming an experiment from its ``runs.jsonl`` after an interruption, or from a damaged file.

The interruptions are simulated by writing the partial files a killed run leaves (a torn last line, a line that is
not a record); the runs are replaced by a stand-in that returns a record at once, so no test trains.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from augnet.experiments import _registry
from augnet.experiments import versus as V
from augnet.experiments._registry import Report, SetupError, cut_torn_line, read_runs, reproduce

CONFIG = dict(tasks=("sinusoids",), regimes=("small",), methods=("none", "fixed"), seeds=(0,), quick=True)


def _fake_job(job: tuple, fixed, quick: bool) -> dict:
    """A record as ``versus._run_job`` makes one, at once (the grid's best is its last point)."""
    kind, task, regime, what, seed = job
    score = 0.5 + (0.1 * what[1] if kind == "grid" else 0.0)
    return {"key": V.job_key(job), "kind": kind, "task": task, "regime": regime,
            "method": what if kind == "run" else "fixed", "fixed": list(what) if kind == "grid" else fixed,
            "seed": seed, "quick": quick, "accuracy": score, "accuracy_tta": score, "accuracy_1": score,
            "val_accuracy": score, "invariance": 0.9, "train_seconds": 0.0, "train_cpu_seconds": 0.0}  # fmt: skip


@pytest.fixture
def counted(monkeypatch):
    calls = []

    def job(*args):
        calls.append(args[0])
        return _fake_job(*args)

    monkeypatch.setattr(V, "_run_job", job)
    return calls


def test_read_runs_skips_lines_that_are_not_records(tmp_path):
    # a line of null, a list, an object without a key string, bytes that are not UTF-8, an empty line: a
    # TypeError, KeyError or UnicodeDecodeError that stopped the rerun (and `augnet reproduce`'s own check)
    path = tmp_path / "runs.jsonl"
    good = [{"key": "a", "x": 1}, {"key": "b", "x": 2}]
    lines = [json.dumps(good[0]).encode(), b"null", b"[1, 2]", b'{"a": 1}', b'{"key": 3}', b"\xff\xfe junk", b"",
             json.dumps(good[1]).encode(), b'{"key": "c", "x"']  # fmt: skip
    path.write_bytes(b"\n".join(lines))
    assert read_runs(path) == {"a": good[0], "b": good[1]}
    cut_torn_line(path)  # the torn last line goes; every other line is kept as it was
    assert path.read_bytes() == b"\n".join(lines[:-1]) + b"\n"


def test_versus_resumes_past_damaged_lines_and_ends_as_an_uninterrupted_run(tmp_path, counted):
    whole = V.run_versus(V.VersusConfig(**CONFIG), tmp_path / "whole", log=None)
    assert len(counted) == len(whole) == 5  # 3 grid points, 2 runs
    lines = (tmp_path / "whole" / "runs.jsonl").read_text().splitlines()
    folder = tmp_path / "cut"
    folder.mkdir()
    # what a killed run and a damaged file leave: two records, a line that is no record, a torn line
    (folder / "runs.jsonl").write_text("\n".join([lines[0], "null", lines[1], "[]", lines[2][:25]]))
    counted.clear()
    records = V.run_versus(V.VersusConfig(**CONFIG), folder, log=None)
    assert sorted(map(V.job_key, counted)) == sorted(json.loads(line)["key"] for line in lines[2:])
    assert records == whole and read_runs(folder / "runs.jsonl") == whole
    assert V.summarise(records, (0,)) == V.summarise(whole, (0,))
    counted.clear()
    assert V.run_versus(V.VersusConfig(**CONFIG), folder, log=None) == whole and not counted  # nothing redone


def test_reproduce_refuses_a_runs_file_that_is_a_folder(tmp_path):
    (tmp_path / "versus" / "runs.jsonl").mkdir(parents=True)  # IsADirectoryError from the run, a traceback
    with pytest.raises(SetupError, match=r"runs\.jsonl is not a file"):
        reproduce("versus", quick=True, out=tmp_path, progress=False)
    assert sorted(p.name for p in (tmp_path / "versus").iterdir()) == ["runs.jsonl"]


def test_reproduce_refuses_a_runs_file_it_cannot_append_to(tmp_path, monkeypatch):
    # a read-only runs.jsonl (its file system, or its mode for anyone but root): the run failed at its first
    # record, or at cutting a torn line off, with a traceback
    path = tmp_path / "versus" / "runs.jsonl"
    path.parent.mkdir()
    path.write_text('{"key": "a"}\n{"ke')
    ran = []
    monkeypatch.setitem(_registry._REGISTRY, "versus", lambda **kw: ran.append(kw) or Report("versus", "", {}))
    real_open = Path.open

    def read_only(self, mode="r", *args, **kwargs):
        if self == path and mode != "r":
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, mode, *args, **kwargs)

    monkeypatch.setattr(Path, "open", read_only)
    with pytest.raises(SetupError, match=r"runs\.jsonl cannot be appended to \(Permission denied\)"):
        reproduce("versus", quick=True, out=tmp_path, progress=False)
    assert not ran and path.read_text() == '{"key": "a"}\n{"ke'
    monkeypatch.setattr(Path, "open", real_open)
    assert reproduce("versus", quick=True, out=tmp_path, progress=False).name == "versus" and len(ran) == 1
