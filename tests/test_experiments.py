"""The sinusoid experiment's plumbing (short runs; the claims are in test_sinusoids_slow.py)."""

import pytest

from augnet.experiments import SinusoidsConfig, run_sinusoids


def test_short_run_records_the_policy_of_every_layer():
    result = run_sinusoids(SinusoidsConfig(epochs=1, n_train=64, n_test=32, layers=2, threads=2))
    assert len(result.policy) == 2
    assert [e["transform"] for e in result.policy[1]] == ["FrequencyShift", "FTSurrogate", "GaussianNoise"]
    assert result.policy[0][0]["range"].unit == "Hz"
    record = result.history["weights"][-1]
    assert len(record) == 2 and all(abs(sum(w) - 1) < 1e-5 for w in record)
    assert 0.0 <= result.test_accuracy <= 1.0
    assert result.to_json()["config"]["layers"] == 2


def test_chosen_candidates_and_bad_names():
    result = run_sinusoids(SinusoidsConfig(transforms=("FrequencyShift",), epochs=1, n_train=32, n_test=16))
    assert [e["transform"] for e in result.policy[0]] == ["FrequencyShift"]
    with pytest.raises(ValueError, match="unknown sinusoid candidates"):
        run_sinusoids(SinusoidsConfig(transforms=("Rotate",), epochs=1, n_train=8, n_test=8))


def test_reproduce_writes_strict_json_whatever_the_numbers_hold(tmp_path, monkeypatch):
    # NAME.json is read by other tools too: NaN is written as null and an infinity as "inf" (as policy files do),
    # tensors as lists, so that every strict JSON reader takes the file.
    import json
    import math

    import torch

    from augnet.experiments import _registry
    from augnet.experiments._registry import Report

    def fake(out_dir, quick, seed, progress, device):
        numbers = {"median": math.nan, "ratio": math.inf, "scores": torch.tensor([0.5, math.nan, -math.inf])}
        return Report("fake", "nothing to say", numbers, [])

    monkeypatch.setitem(_registry._REGISTRY, "fake", fake)
    _registry.reproduce("fake", quick=True, out=tmp_path, progress=False)

    def refuse(token):
        raise ValueError(f"not strict JSON: {token}")

    payload = json.loads((tmp_path / "fake" / "fake.json").read_text(), parse_constant=refuse)
    assert payload["numbers"] == {"median": None, "ratio": "inf", "scores": [0.5, None, "-inf"]}


def _interrupt_myself(marker):
    import os
    import signal
    import time

    os.kill(os.getpid(), signal.SIGINT)  # what Ctrl-C sends every process of the terminal's group
    time.sleep(5)
    return "not interrupted"


def _write(marker):
    from pathlib import Path

    Path(marker).write_text("ran")
    return "ran"


def test_ctrl_c_stops_a_workers_job_and_the_jobs_queued_to_it(tmp_path):
    # concurrent.futures hands a job's KeyboardInterrupt back as its result and starts the next queued job: an
    # interrupted experiment then waited for whole runs it would not keep. A WorkerPool's worker ends them unrun.
    from augnet.experiments._registry import WorkerPool

    marker = tmp_path / "second job ran"
    pool = WorkerPool(1)
    try:
        first, second = pool.submit(_interrupt_myself, 0), pool.submit(_write, str(marker))
        with pytest.raises(KeyboardInterrupt):
            first.result(timeout=60)
        with pytest.raises(KeyboardInterrupt):
            second.result(timeout=60)
    finally:
        pool.shutdown()
    assert not marker.exists()
    with WorkerPool(1) as fresh:  # a new pool's workers start uninterrupted
        assert fresh.submit(_write, str(marker)).result(timeout=60) == "ran"


def _keywords(a, *, b):
    return a + b


def _handler_name():
    import signal

    return signal.getsignal(signal.SIGINT).__name__


def test_a_ctrl_c_while_a_worker_starts_ends_its_jobs_unrun_without_a_traceback(capfd):
    # A worker imports torch for seconds before its initializer runs: a Ctrl-C then printed an import's
    # traceback from every worker (or, ignored, was lost while the main process waited for whole runs). Started
    # with SIGINT blocked, the worker notes it when its initializer runs, and its jobs end unrun.
    import os
    import signal
    import time

    from augnet.experiments._registry import WorkerPool

    with WorkerPool(1) as pool:
        future = pool.submit(time.sleep, 30)
        for pid in list(pool._processes):  # still importing
            os.kill(pid, signal.SIGINT)
        start = time.perf_counter()
        with pytest.raises(KeyboardInterrupt):
            future.result(timeout=120)
        assert time.perf_counter() - start < 20  # not the 30 s job
    assert "Traceback" not in capfd.readouterr().err
    with WorkerPool(1) as pool:  # a new pool's workers start uninterrupted; jobs take keywords
        assert pool.submit(_keywords, 1, b=2).result(timeout=120) == 3
        assert pool.submit(_handler_name).result(timeout=60) == "_on_interrupt"
