"""compare and versus as a user runs them on their own data, from a sweep: each test failed before its fix."""

from __future__ import annotations

import json
import math

import pytest
import torch
from torch import nn

from augnet.experiments import compare
from augnet.experiments import versus as V
from augnet.experiments.comparison import Comparison


def _images(n=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 1, 6, 6, generator=g)
    return x, torch.arange(n) % 2


def _trunk():
    return nn.Sequential(nn.Flatten(), nn.Linear(36, 2))


def _fake_run_method(val):
    """A stand-in for a versus run that draws from torch's global generator as a real one does; ``val(seed, fixed)``
    is a grid point's validation accuracy."""

    def run(method, task, regime, split, seed, fixed=None, quick=False):
        torch.manual_seed(seed)
        torch.rand(3)
        return {"accuracy": 1.0, "accuracy_tta": 1.0, "accuracy_1": 1.0, "invariance": 1.0, "train_seconds": 0.0,
                "train_cpu_seconds": 0.0, "epochs": 2, "policy": None,
                "val_accuracy": val(seed, None if fixed is None else list(fixed))}  # fmt: skip

    return run


def _fake_versus(monkeypatch, val=lambda seed, fixed: 0.5):
    monkeypatch.setattr(V, "run_method", _fake_run_method(val))
    monkeypatch.setattr(V, "load", lambda task, regime, seed, quick=False: None)
    monkeypatch.setattr(V, "fixed_grid", lambda task, quick=False: [(0, 0.1), (1, 0.25)])


def test_run_versus_in_process_leaves_the_callers_threads_and_random_state(tmp_path, monkeypatch):
    # VersusConfig's default is one worker, in the caller's process: each run set torch to one thread and seeded
    # torch's global generator, and both stayed so after run_versus returned (the caller's training then ran on
    # one thread, and its draws were the last run's).
    _fake_versus(monkeypatch)
    config = V.VersusConfig(tasks=("sinusoids",), regimes=("small",), methods=("none", "augnet"), seeds=(0,),
                            quick=True)  # fmt: skip
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        torch.manual_seed(1234)
        state = torch.get_rng_state()
        records = V.run_versus(config, tmp_path, log=None)
        assert len(records) == 2
        assert torch.get_num_threads() == 2
        assert torch.equal(torch.get_rng_state(), state)
    finally:
        torch.set_num_threads(threads)


def test_a_comparison_saves_strict_json_and_reads_it_back(tmp_path):
    # The records hold NaN for an invariance not measured: json.dump(result.records) wrote bare NaN tokens, which
    # strict readers refuse, and records read back from strict JSON (null) broke table(). save / load now.
    x, y = _images()
    result = compare(_trunk, (x, y), (x, y), ["none", "augnet"], epochs=1, seeds=[0], progress=False)
    path = result.save(tmp_path / "comparison.json")
    text = path.read_text()
    assert "NaN" not in text
    json.loads(text, parse_constant=lambda token: pytest.fail(f"bare {token} in the file"))
    again = Comparison.load(path)
    assert str(again) == str(result)
    assert math.isnan(again.records[0]["invariance"])
    assert again.records[1]["policy"] == json.loads(json.dumps(result.records[1]["policy"]))
    with pytest.raises(ValueError, match="not a saved Comparison"):
        (tmp_path / "other.json").write_text("[1, 2]")
        Comparison.load(tmp_path / "other.json")


@pytest.mark.parametrize("methods", [None, 3])
def test_methods_that_are_not_a_list_are_refused_naming_the_argument(methods):
    # methods=None gave Python's "'NoneType' object is not iterable", not saying which argument.
    x, y = _images()
    with pytest.raises(TypeError, match="methods must be a list of names"):
        compare(_trunk, (x, y), (x, y), methods, epochs=1, seeds=[0], progress=False)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"methods": ("none", "none")}, r"methods must be distinct, got \['none', 'none'\]"),
        ({"tasks": ("digits", "digits")}, "tasks must be distinct"),
        ({"tasks": "digits"}, r"tasks must be a tuple \(e.g. tasks=\('digits',\)\), got 'digits'"),
        ({"seeds": 0}, r"seeds must be a tuple \(e.g. seeds=\(0,\)\), got 0"),
        ({"seeds": 5}, "seeds must be a tuple"),
    ],
)
def test_a_config_with_duplicates_or_one_name_for_a_tuple_is_refused(change, match):
    # Duplicated methods or tasks trained every run twice (two lines each in runs.jsonl); tasks="digits" was refused
    # as the unknown tasks 'd', 'i', 'g', ...; seeds=0 said "seeds must not be empty" and seeds=5 failed in Python.
    import dataclasses

    config = dataclasses.replace(V.VersusConfig(quick=True), **change)
    with pytest.raises(ValueError, match=match):
        config.validate()


def test_grayscale_images_without_their_channel_axis_are_told_how_to_add_it():
    # (N, H, W) images with methods that also take signals were told only that "signals need transforms=".
    x = torch.rand(12, 6, 6)
    y = torch.arange(12) % 2
    with pytest.raises(ValueError, match=r"shape \(12, 6, 6\) are taken as \(N, C, T\) signals.*x\.unsqueeze\(1\)"):
        compare(_trunk, (x, y), (x, y), ["none", "augnet"], epochs=1, seeds=[0], progress=False)


def test_a_run_of_another_seed_in_the_same_folder_uses_its_own_grid(tmp_path, monkeypatch):
    # Both `--quick` and `--quick --seed 1` write to the same folder by default: the second run's fixed method took
    # the best point over both seeds' grids, so its table depended on what the folder held before.
    best = {(0, (0, 0.1)): 0.9, (1, (1, 0.25)): 0.7}  # each seed's grid has its own best point
    _fake_versus(monkeypatch, val=lambda seed, fixed: best.get((seed, tuple(fixed)), 0.5))

    def config(seed, **kw):
        return V.VersusConfig(tasks=("sinusoids",), regimes=("small",), methods=("fixed",), seeds=(seed,), quick=True,
                              **kw)  # fmt: skip

    def fixed_of(records, seed):
        return records[V.job_key(("run", "sinusoids", "small", "fixed", seed))]["fixed"]

    assert fixed_of(V.run_versus(config(0), tmp_path, log=None), 0) == [0, 0.1]
    assert fixed_of(V.run_versus(config(1), tmp_path / "alone", log=None), 1) == [1, 0.25]
    assert fixed_of(V.run_versus(config(1), tmp_path, log=None), 1) == [1, 0.25]  # was [0, 0.1], seed 0's
    # grid_seed: a run that asks for another seed's grid (the rerun benchmark asks for the kept table's) uses it
    # and trains no grid of its own.
    reuse = V.run_versus(config(2, grid_seed=0), tmp_path, log=None)
    assert {r["seed"] for r in reuse.values() if r["kind"] == "grid"} == {0, 1}
    assert fixed_of(reuse, 2) == [0, 0.1]
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="grid_seed"):
            V.run_versus(config(2, grid_seed=bad), tmp_path, log=None)
