"""``augnet.experiments.versus`` called as a user calls it (run_versus, VersusConfig, summarise): each test failed
before its fix."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

from augnet.experiments import SetupError
from augnet.experiments import versus as V


def _fake_run(method, task, regime, split, seed, fixed=None, quick=False):
    """A stand-in for one versus run (draws from torch's global generator as a real one does)."""
    torch.manual_seed(seed)
    torch.rand(3)
    return {"accuracy": 0.5 + seed / 100, "accuracy_tta": 1.0, "accuracy_1": 1.0, "invariance": 1.0,
            "train_seconds": 0.0, "train_cpu_seconds": 0.0, "epochs": 2, "policy": None,
            "val_accuracy": 0.5 if fixed is None else 0.5 + fixed[0] / 10}  # fmt: skip


@pytest.fixture
def fake(monkeypatch):
    """Runs that take no time; the list of the runs trained."""
    ran = []

    def run(*args, **kwargs):
        ran.append(args[:2])
        return _fake_run(*args, **kwargs)

    monkeypatch.setattr(V, "run_method", run)
    monkeypatch.setattr(V, "load", lambda task, regime, seed, quick=False: None)
    monkeypatch.setattr(V, "fixed_grid", lambda task, quick=False: [(0, 0.1), (1, 0.25)])
    return ran


def _config(**kw):
    base = {"tasks": ("sinusoids",), "regimes": ("small",), "methods": ("none", "fixed"), "seeds": (0,), "quick": True}
    return V.VersusConfig(**{**base, **kw})


def test_an_out_dir_with_a_tilde_is_the_home_folder(home, fake):
    # run_versus took "~/results" as a folder named "~" in the working directory (reproduce expanded it)
    home, work = home
    records = V.run_versus(_config(), "~/results", log=None)
    assert (home / "results" / "runs.jsonl").is_file() and not (work / "~").exists()
    again = V.run_versus(_config(), "~/results", log=None)  # resumes from the same folder: nothing trained again
    assert again == records and len(fake) == 4  # the grid's 2 points, none and fixed
    with pytest.raises(SetupError, match="full"):  # check_runs_folder reads the same folder
        V.check_runs_folder("~/results", quick=False)


def test_methods_that_apply_to_none_of_the_tasks_are_refused(fake, tmp_path):
    # the image policies on the sinusoids ran nothing, silently, and the table was empty
    config = _config(methods=("crop", "augerino"))
    with pytest.raises(ValueError, match=r"methods \['crop', 'augerino'\] apply to none of tasks \['sinusoids'\]"):
        config.validate()
    with pytest.raises(ValueError, match="nothing to run"):
        V.run_versus(config, tmp_path / "out", log=None)
    assert not (tmp_path / "out").exists() and not fake
    _config(methods=("crop", "none")).validate()  # one that applies is enough: crop is left out on signals


@pytest.mark.parametrize("field", ["seeds", "grid_seed"])
def test_a_seed_above_2_62_is_refused_before_any_run(fake, tmp_path, field):
    # the data are seeded with the seed plus offsets: load refused it in its own run, after the others had trained
    config = _config(seeds=(0, 2**63)) if field == "seeds" else _config(grid_seed=2**63)
    with pytest.raises(ValueError, match=rf"{field} must be .*at most 2\*\*62"):
        V.run_versus(config, tmp_path, log=None)
    assert not fake and not (tmp_path / "runs.jsonl").exists()
    _config(seeds=(np.int64(2**62),), methods=("none",)).validate()  # the largest is taken, a NumPy int too


def test_a_config_that_is_not_a_versus_config_is_refused(fake, tmp_path):
    # a dict of its fields failed with "'dict' object has no attribute 'validate'"
    with pytest.raises(TypeError, match="config must be a VersusConfig"):
        V.run_versus({"tasks": ("sinusoids",)}, tmp_path, log=None)


@pytest.mark.parametrize(("kw", "match"), [({"log": "print"}, "log must be callable"),
                                           ({"progress": "no"}, "progress must be True or False")])  # fmt: skip
def test_a_bad_log_or_progress_is_refused_before_any_run(fake, tmp_path, kw, match):
    # log="print" failed ("'str' object is not callable") once the first run had trained; progress="no" showed bars
    with pytest.raises(TypeError, match=match):
        V.run_versus(_config(), tmp_path, **{"log": None, **kw})
    assert not fake and not (tmp_path / "runs.jsonl").exists()


def test_an_out_dir_that_cannot_hold_the_runs_is_refused_naming_it(fake, tmp_path):
    # a file there failed in mkdir (FileExistsError), a runs.jsonl that is a folder in reading it
    # (IsADirectoryError), an int in pathlib naming no argument
    (tmp_path / "file").write_text("mine")
    with pytest.raises(SetupError, match=r"out_dir .*file.* is an existing file"):
        V.run_versus(_config(), tmp_path / "file", log=None)
    assert (tmp_path / "file").read_text() == "mine"
    (tmp_path / "runs" / "runs.jsonl").mkdir(parents=True)
    with pytest.raises(SetupError, match=r"runs\.jsonl is not a file"):
        V.run_versus(_config(), tmp_path / "runs", log=None)
    for bad in (None, 3):
        with pytest.raises(TypeError, match="out_dir must be a str or a path-like object"):
            V.run_versus(_config(), bad, log=None)
    assert not fake


def test_the_summary_is_in_the_tables_order_whatever_order_the_runs_finished_in(fake, tmp_path):
    # worker processes race (a task's full regime could finish before its small one, augmix after fixed), and a
    # folder keeps its earlier runs' order: the summary (versus.json) followed it
    config = _config(tasks=("digits", "sinusoids"), regimes=("small", "full"), methods=("none", "augmix", "fixed"),
                     seeds=(0, 1))  # fmt: skip
    records = V.run_versus(config, tmp_path, log=None)
    runs = [(k, r) for k, r in records.items() if r["kind"] == "run"]
    expected = V.summarise(records, (0, 1))
    assert list(expected) == ["digits", "sinusoids"]
    assert list(expected["digits"]) == ["small", "full"]
    assert list(expected["digits"]["small"]) == ["none", "augmix", "fixed"]
    shuffled = dict(runs[::-1])
    mixed = V.summarise(shuffled, (0, 1))
    assert json.dumps(mixed) == json.dumps(expected)
    assert V.table_markdown(mixed, "t") == V.table_markdown(expected, "t")
    # the values are those of the runs: digits small "none" over seeds 0 and 1 (0.50, 0.51)
    assert expected["digits"]["small"]["none"]["accuracy"] == pytest.approx([0.505, 0.005, 2])


def test_valid_calls_run_as_before(fake, tmp_path):
    # what the checks let through: lists, NumPy seeds, a str and a Path folder, extra left empty
    config = _config(methods=["none"], seeds=[np.int64(0), 1], extra={})
    records = V.run_versus(config, str(tmp_path), progress=False, log=[].append)
    assert sorted(r["seed"] for r in records.values()) == [0, 1]
    assert V.run_versus(config, tmp_path, log=None) == records
    assert os.path.isfile(tmp_path / "runs.jsonl")
