"""The branches of versus, versus_tasks, sinusoids and instance that the other tests leave: argument checks, the
worker pool, logging, summaries and the registered experiments' reporting, on tiny runs or hand-made records.

The kept results (docs/results) are read back through the reporting code: the tables, verdicts and numbers those
functions write from the kept runs are the kept files, exactly.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

import numpy as np
import pytest
import torch

from augnet.data import make_sprite_pair, render_sprites
from augnet.experiments import instance as I
from augnet.experiments import sinusoids as SN
from augnet.experiments import versus as V
from augnet.experiments import versus_tasks as VT
from augnet.experiments.trunks import Conv1dNet, PaperCNN

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"


# ------------------------------------------------------------------------------------------------ versus


def _fake_run_method(method, task, regime, split, seed, fixed=None, quick=False):
    """A versus run's record without training: its accuracy says which run it is (seed / 10)."""
    torch.manual_seed(seed)
    return {"accuracy": seed / 10, "accuracy_tta": 1.0, "accuracy_1": 1.0, "invariance": 0.5, "train_seconds": 2.6,
            "train_cpu_seconds": 1.0, "epochs": 2, "policy": None,
            "val_accuracy": 0.5 if fixed is None else fixed[1]}  # fmt: skip


class _Pool(ThreadPoolExecutor):
    """WorkerPool in threads (the spawned processes would not see the test's stand-ins); notes its shutdowns."""

    shutdowns: ClassVar[list] = []

    def shutdown(self, wait=True, *, cancel_futures=False):
        _Pool.shutdowns.append(cancel_futures)
        super().shutdown(wait, cancel_futures=cancel_futures)


@pytest.fixture
def fake_versus(monkeypatch):
    monkeypatch.setattr(V, "run_method", _fake_run_method)
    monkeypatch.setattr(V, "load", lambda task, regime, seed, quick=False: None)
    monkeypatch.setattr(V, "fixed_grid", lambda task, quick=False: [(0, 0.1), (1, 0.25)])
    monkeypatch.setattr(V, "WorkerPool", _Pool)
    monkeypatch.setattr(_Pool, "shutdowns", [])


def _config(**kw):
    return V.VersusConfig(**{"tasks": ("sinusoids",), "regimes": ("small",), "methods": ("none",), "seeds": (0,),
                             "quick": True, **kw})  # fmt: skip


@pytest.mark.parametrize(("field", "value"), [("tasks", ("digits", "mnist")), ("regimes", ("tiny",)),
                                              ("methods", ("none", "mixup"))])  # fmt: skip
def test_an_unknown_name_is_refused_naming_its_field_and_the_names_it_takes(field, value):
    # The message was "unknown tasks, regimes or methods ['mixup']; see TASKS, REGIMES and METHODS".
    known = {"tasks": tuple(VT.TASKS), "regimes": VT.REGIMES, "methods": V.METHODS}[field]
    bad = [v for v in value if v not in known]
    with pytest.raises(ValueError) as caught:
        _config(**{field: value}).validate()
    assert str(caught.value) == f"{field}: unknown {bad}; choose from {known}"


def test_names_that_are_not_strings_are_refused_naming_the_field():
    # tasks=(["digits"],) failed in set() with "unhashable type: 'list'"
    with pytest.raises(TypeError, match=r"tasks must hold names \(strings\), got \[\['digits'\]\]"):
        _config(tasks=(["digits"],)).validate()


@pytest.mark.parametrize("quick", ["no", 1, None])
def test_quick_must_be_a_bool(quick):
    # quick="no" ran a quick run; quick=1 took the folder's quick runs for its own kind either way
    with pytest.raises(TypeError, match=f"quick must be True or False, got {quick!r}"):
        _config(quick=quick).validate()


def test_numpy_seeds_grid_seed_and_workers_are_taken_as_python_ints(tmp_path, fake_versus):
    # seeds=tuple(np.arange(2)) was refused as "seeds must be distinct ints >= 0" (np.int64 is no Python int);
    # the jobs' seeds must be Python ints, since the runs' keys are JSON.
    config = _config(methods=("none", "fixed"), seeds=tuple(np.arange(2)), grid_seed=np.int64(1), workers=np.int64(1))
    config.validate()
    assert config.grid_at == 1 and type(config.grid_at) is int
    assert all(type(job[4]) is int for job in config.jobs() + config.grid_jobs())
    records = V.run_versus(config, tmp_path / "numpy", log=None)
    plain = V.run_versus(_config(methods=("none", "fixed"), seeds=(0, 1), grid_seed=1), tmp_path / "plain", log=None)
    assert records == plain
    assert (tmp_path / "numpy" / "runs.jsonl").read_text() == (tmp_path / "plain" / "runs.jsonl").read_text()
    for bad in (np.int64(-1), np.float64(1.0)):
        with pytest.raises(ValueError, match="seeds must be distinct ints >= 0"):
            _config(seeds=(bad,)).validate()


def test_runs_in_worker_processes_are_all_written_and_the_pool_is_shut(tmp_path, fake_versus):
    config = _config(methods=("none", "augnet", "instance"), seeds=(0, 1, 2), workers=2)
    records = V.run_versus(config, tmp_path, log=None)
    lines = [json.loads(line) for line in (tmp_path / "runs.jsonl").read_text().splitlines()]
    assert sorted(r["key"] for r in lines) == sorted(records) == sorted(V.job_key(j) for j in config.jobs())
    assert {r["key"]: r["accuracy"] for r in lines} == {V.job_key(j): j[4] / 10 for j in config.jobs()}
    assert _Pool.shutdowns == [True]  # what was still queued is cancelled


def test_a_failing_run_in_a_worker_shuts_the_pool_and_keeps_what_finished(tmp_path, fake_versus, monkeypatch):
    def run(method, task, regime, split, seed, fixed=None, quick=False):
        if method == "augnet":
            raise RuntimeError("this run failed")
        return _fake_run_method(method, task, regime, split, seed, fixed, quick)

    monkeypatch.setattr(V, "run_method", run)
    threads = torch.get_num_threads()
    with pytest.raises(RuntimeError, match="this run failed"):
        V.run_versus(_config(methods=("none", "augnet"), workers=2), tmp_path, log=None)
    assert _Pool.shutdowns == [True] and torch.get_num_threads() == threads
    kept = V.read_runs(tmp_path / "runs.jsonl")
    assert set(kept) <= {V.job_key(("run", "sinusoids", "small", "none", 0))}  # never the failed run


def test_each_finished_run_is_logged_on_one_line(tmp_path, fake_versus):
    lines: list[str] = []
    V.run_versus(_config(methods=("none", "fixed"), seeds=(3,)), tmp_path, log=lines.append)
    assert lines == [  # the grid's two points (as "fixed"), then the runs
        "sinusoids  small  fixed           seed 3: accuracy 0.300 (3 s)",
        "sinusoids  small  fixed           seed 3: accuracy 0.300 (3 s)",
        "sinusoids  small  none            seed 3: accuracy 0.300 (3 s)",
        "sinusoids  small  fixed           seed 3: accuracy 0.300 (3 s)",
    ]


def _run(task, regime, method, seed, accuracy, **more):
    return {"key": V.job_key(("run", task, regime, method, seed)), "kind": "run", "task": task, "regime": regime,
            "method": method, "seed": seed, "accuracy": accuracy, "train_cpu_seconds": 2.0, **more}  # fmt: skip


def test_summarise_reads_the_runs_of_the_seeds_only_and_leaves_out_measures_not_recorded():
    records = [
        _run("digits", "small", "none", 5, 0.5, accuracy_shift=0.25),
        _run("digits", "small", "none", 6, 0.75, accuracy_shift=0.75),
        _run("digits", "small", "none", 0, 0.0, accuracy_shift=0.0),  # a tuning seed: not in this summary
        _run("sinusoids", "small", "none", 5, 1.0, accuracy_shift=None),  # signals: no shifted test set
        {"key": "g", "kind": "grid", "task": "digits", "regime": "small", "method": "fixed", "seed": 5,
         "accuracy": 0.0, "fixed": [0, 0.1]},  # the grid: not a method's run
    ]  # fmt: skip
    summary = V.summarise({r["key"]: r for r in records}, range(5, 10))
    assert summary == {
        "digits": {"small": {"none": {"accuracy": [0.625, 0.125, 2], "accuracy_shift": [0.5, 0.25, 2],
                                      "train_cpu_seconds": [2.0, 0.0, 2]}}},
        "sinusoids": {"small": {"none": {"accuracy": [1.0, 0.0, 1], "train_cpu_seconds": [2.0, 0.0, 1]}}},
    }  # fmt: skip
    table = V.table_markdown(summary, "t")
    assert "| none | 1.000 ± 0.000 | – | – | – | – | 2.0 |" in table  # not recorded: a dash
    assert "| none | 0.625 ± 0.125 | – | – | 0.500 ± 0.250 | – | 2.0 |" in table


@pytest.mark.parametrize("seeds", [5, "56", np.int64(5)])
def test_summarise_refuses_one_seed_for_a_collection_of_them(seeds):
    records = {"k": _run("digits", "small", "none", 5, 0.5)}
    with pytest.raises(TypeError, match="seeds must be a collection of seeds"):
        V.summarise(records, seeds)


def test_the_runs_folder_check_reads_the_folder_only(tmp_path):
    from augnet.experiments import SetupError

    V.check_runs_folder(tmp_path / "none", quick=True)  # no folder: nothing to refuse, and nothing made
    assert not (tmp_path / "none").exists()
    record = {**_run("digits", "small", "none", 0, 0.5), "epochs": 20}  # from before the flag: its epochs say full
    (tmp_path / "runs.jsonl").write_text(json.dumps(record) + "\n")
    V.check_runs_folder(str(tmp_path), quick=False)
    with pytest.raises(SetupError, match=r"holds 1 full run\(s\); a --quick run would take them for its own"):
        V.check_runs_folder(tmp_path, quick=True)


def test_the_full_versus_run_writes_the_kept_table_verdict_and_numbers_from_the_kept_runs(tmp_path, monkeypatch):
    kept = V.read_runs(RESULTS / "versus" / "runs.jsonl")
    seen = []

    def run_versus(config, out_dir, progress=False, log=print):
        seen.append((config, out_dir, log))
        return kept

    monkeypatch.setattr(V, "run_versus", run_versus)
    report = V.versus(tmp_path, progress=False)
    config, out_dir, log = seen[0]
    workers = max(1, min(__import__("os").cpu_count() or 1, 2))
    assert config == V.VersusConfig(workers=workers) and out_dir == tmp_path and log is None
    assert (tmp_path / "table.md").read_text() == (RESULTS / "versus" / "table.md").read_text()
    assert report.verdict == (RESULTS / "versus" / "verdict.txt").read_text().strip()
    stored = json.loads((RESULTS / "versus" / "versus.json").read_text())["numbers"]
    from augnet._json import strict

    numbers = json.loads(json.dumps(strict(report.numbers)))
    assert {k: numbers[k] for k in ("tuned", "reported", "config", "grid")} == {
        k: stored[k] for k in ("tuned", "reported", "config", "grid")}  # fmt: skip


def test_a_quick_versus_run_tables_its_seed_and_gives_no_verdict(tmp_path, fake_versus):
    # The folder as a str, as run_versus takes it: the table was written with out_dir / "table.md" once every
    # run had trained, which a str refused (TypeError) and the runs' summary was lost.
    out = tmp_path / "quick"
    report = V.versus(str(out), quick=True, seed=3, progress=False)
    assert report.verdict == "quick run: the set-up works (no verdict on 2 epochs)"
    assert report.numbers["config"] == {"quick": True, "seeds": [3]} and report.numbers["reported"] == {}
    assert report.numbers["grid"] == {"digits/small": [1, 0.25], "sinusoids/small": [1, 0.25]}
    assert set(report.numbers["tuned"]) == {"digits", "sinusoids"}
    table = (out / "table.md").read_text()
    assert table.startswith("## Seed 3, quick (2 epochs: a check of the set-up)\n")
    assert table.count("### ") == 2 and "Reported seeds" not in table
    assert table.count("| 0.300 ± 0.000 |") == len(report.numbers["tuned"]["digits"]["small"]) + 4


# ------------------------------------------------------------------------------------------------ versus_tasks


def test_load_refuses_an_unknown_regime():
    with pytest.raises(ValueError, match=r"regime must be one of \('small', 'full'\), got 'tiny'"):
        VT.load(VT.TASKS["digits"], "tiny", 0)


@pytest.mark.parametrize(("name", "quick"), [("digits", False), ("sinusoids", True)])
def test_load_takes_a_numpy_seed_as_the_same_int(name, quick):
    # The digits' permutation was seeded with torch.Generator().manual_seed(seed), which refuses np.int64
    # ("an integer is required"); the generated tasks took it.
    a, b = (VT.load(VT.TASKS[name], "small", s, quick=quick) for s in (np.int64(3), 3))
    for field in dataclasses.fields(a):
        x, y = getattr(a, field.name), getattr(b, field.name)
        assert (x is None and y is None) or torch.equal(x, y), field.name


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        (("digits", "small", 0), {}, TypeError, r"task must be a Task \(one of TASKS, e.g. TASKS\['digits'\]\), "
                                                r"got str: 'digits'"),
        ((VT.TASKS["digits"], "small", 1.5), {}, TypeError, "seed must be an int, got float: 1.5"),
        ((VT.TASKS["glyphs"], "small", 2**64 - 5000), {"quick": True}, ValueError, r"seed must be an int in"),
        ((VT.TASKS["digits"], "small", 0), {"quick": "no"}, TypeError, "quick must be True or False, got 'no'"),
    ],
)  # fmt: skip
def test_load_refuses_what_it_cannot_load_naming_the_argument(args, kwargs, error, match):
    # These were AttributeError ('str' object has no attribute 'n_train_of'), torch's RuntimeError ("manual_seed
    # expected a long") and ValueError ("Overflow when unpacking long long"); quick="no" shrank the sets.
    with pytest.raises(error, match=match):
        VT.load(*args, **kwargs)


def test_a_task_of_ones_own_is_refused_rather_than_given_another_tasks_data():
    # An image Task by another name was given the sinusoids (signals) as its data, and an invariance by another
    # name was probed as the sinusoids' frequency shift, without a word.
    mine = dataclasses.replace(VT.TASKS["glyphs"], name="letters")
    with pytest.raises(ValueError, match=r"load makes the data of the tasks in TASKS only .* got task 'letters'"):
        VT.load(mine, "small", 0, quick=True)
    other = dataclasses.replace(VT.TASKS["glyphs"], invariance=("TranslateX", 0.25))
    with pytest.raises(ValueError, match=r"task.invariance must name 'Rotate' or 'FrequencyShift', got 'TranslateX'"):
        VT.true_invariance(other)
    for fn in (VT.make_trunk, VT.candidates, VT.true_invariance):
        with pytest.raises(TypeError, match="task must be a Task"):
            fn("glyphs")
    same = dataclasses.replace(VT.TASKS["glyphs"], n_val=3)  # a Task of the table's, with other sizes: its data
    assert len(VT.load(same, "small", 0, quick=True).x_val) == 3


@pytest.mark.parametrize(("name", "make"), [("sprites", lambda: PaperCNN(3, 4, 8)),
                                            ("glyphs", lambda: PaperCNN(1, 4, 8)),
                                            ("sinusoids", lambda: Conv1dNet(1, 4, 16))])  # fmt: skip
def test_the_trunk_of_each_generated_task_takes_its_data(name, make):
    task = VT.TASKS[name]
    torch.manual_seed(0)
    trunk = VT.make_trunk(task)
    torch.manual_seed(0)
    reference = make()
    assert type(trunk) is type(reference)
    for (k, a), (k2, b) in zip(trunk.state_dict().items(), reference.state_dict().items(), strict=True):
        assert k == k2 and torch.equal(a, b), k
    x = VT.load(task, "small", 0, quick=True).x_test[:3]
    trunk.eval()
    assert trunk(x).shape == (3, task.classes)


def test_the_sinusoids_true_invariance_is_a_frequency_shift_of_half_a_hertz():
    transform, magnitude = VT.true_invariance(VT.TASKS["sinusoids"])
    assert type(transform).__name__ == "FrequencyShift" and magnitude == 0.25
    assert transform.sfreq == VT.SFREQ == 100.0 and transform.max_shift * magnitude == 0.5  # the table's ±0.5 Hz


# ------------------------------------------------------------------------------------------------ sinusoids


def _policy_stub(policy, accuracy, history=None):
    return SimpleNamespace(policy=SimpleNamespace(layers_json=lambda: policy), test_accuracy=accuracy,
                           history=history or {})  # fmt: skip


def test_the_full_sinusoids_run_reports_the_kept_numbers_from_the_kept_policies(tmp_path, monkeypatch):
    kept = json.loads((RESULTS / "sinusoids" / "sinusoids.json").read_text())["numbers"]["runs"]
    configs, plots = [], []

    def run(config, progress=False):
        configs.append(config)
        entry = next(r for r in kept if r["layers"] == config.layers)
        return _policy_stub(entry["policy"], entry["test_accuracy"])

    def plot(history, names, path, title=None, layer=0):
        plots.append((names, path, title, layer))
        return path

    import augnet.viz

    monkeypatch.setattr(SN, "run_sinusoids", run)
    monkeypatch.setattr(augnet.viz, "plot_policy_history", plot)
    report = SN.stacked_layers(tmp_path, progress=False)
    assert configs == [SN.SinusoidsConfig(layers=n) for n in (1, 2, 4)]  # the defaults, seed 0, on the CPU
    assert report.numbers["runs"] == kept
    kept_lines = (RESULTS / "sinusoids" / "verdict.txt").read_text().splitlines()
    assert report.verdict.splitlines() == [line for line in kept_lines if " layer(s), test accuracy " in line]
    assert [p[1] for p in plots] == report.figures == [
        tmp_path / f"sinusoids_{n}layers_layer{i}.png" for n in (1, 2, 4) for i in range(n)]  # fmt: skip
    assert plots[-1][0] == ["FrequencyShift", "FTSurrogate", "GaussianNoise"]
    assert plots[-1][2:] == ("sinusoids, 4 layer(s): layer 3", 3)


def test_a_quick_sinusoids_run_with_a_str_folder_draws_every_layer(tmp_path, monkeypatch):
    # The figures' paths were made as out_dir / "..." once the runs had trained: a str folder failed (TypeError).
    configs = []
    real = SN.run_sinusoids

    def tiny(config, progress=False):
        configs.append(dataclasses.replace(config))
        config.epochs, config.n_train, config.n_test, config.width = 1, 16, 8, 2
        return real(config, progress=progress)

    monkeypatch.setattr(SN, "run_sinusoids", tiny)
    report = SN.stacked_layers(str(tmp_path), quick=True, seed=2, progress=False)
    assert [(c.layers, c.epochs, c.n_train, c.n_test, c.seed) for c in configs] == [(1, 15, 200, 100, 2),
                                                                                    (2, 15, 200, 100, 2)]  # fmt: skip
    assert report.figures == [tmp_path / "sinusoids_1layers_layer0.png", tmp_path / "sinusoids_2layers_layer0.png",
                              tmp_path / "sinusoids_2layers_layer1.png"]  # fmt: skip
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in report.figures)
    for run in report.numbers["runs"]:
        for i, (layer, winner) in enumerate(zip(run["policy"], run["winners"], strict=True)):
            top = max(layer, key=lambda e: e["weight"])
            assert winner == {"layer": i, "winner": top["transform"], "weight": top["weight"],
                              "magnitude": top["magnitude"]}  # fmt: skip


def test_a_sinusoids_run_without_matplotlib_keeps_its_numbers(tmp_path, monkeypatch):
    def run(config, progress=False):  # one transform per layer, and the history fit records for it
        n = config.layers
        history = {"step": [0], "weights": [[[1.0]] * n], "magnitudes": [[[0.25]] * n]}
        return _policy_stub([[{"transform": "FrequencyShift", "weight": 1.0, "magnitude": 0.25}]] * n, 1.0, history)

    monkeypatch.setattr(SN, "run_sinusoids", run)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    report = SN.stacked_layers(tmp_path, quick=True, progress=False)
    assert report.figures == [] and [r["layers"] for r in report.numbers["runs"]] == [1, 2]
    assert report.verdict.splitlines()[1] == ("2 layer(s), test accuracy 1.000: layer 0: FrequencyShift (w 1.00, mu "
                                              "0.25); layer 1: FrequencyShift (w 1.00, mu 0.25)")  # fmt: skip


# ------------------------------------------------------------------------------------------------ instance

TINY = dict(n_train=12, n_test=12, size=16, width=2, epochs=1, batch_size=4, hidden=2, seeds=(0,))


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [({"n": -1}, ValueError, "n must be an int >= 0, got -1"), ({"n": 1.5}, ValueError, "n must be an int >= 0"),
     ({"n": True}, ValueError, "n must be an int >= 0, got True"),
     ({"n": 0, "size": -1}, ValueError, "size must be an int >= 1, got -1"),
     ({"n": 3, "seed": 1.5}, TypeError, "seed must be an int, got float: 1.5"),
     ({"n": 3, "seed": 2**64 + 1}, ValueError, r"seed must be an int in \[-2\*\*63, 2\*\*64\)"),
     ({"n": 3, "return_angle": "no"}, TypeError, "return_angle must be True or False, got 'no'")],
)  # fmt: skip
def test_instance_sprites_refuse_bad_arguments_naming_them(kwargs, error, match):
    # These were torch's RuntimeError (negative dimension, manual_seed expected a long), randint's TypeError and
    # ValueError "Overflow when unpacking long long"; return_angle="no" returned the angles.
    with pytest.raises(error, match=match):
        I.instance_sprites(**kwargs)


def test_instance_sprites_take_a_numpy_seed_and_draw_one_pair_or_none():
    a = I.instance_sprites(5, 16, np.int32(4), return_angle=True)  # refused: "an integer is required"
    b = I.instance_sprites(5, 16, 4, return_angle=True)
    assert all(torch.equal(u, v) for u, v in zip(a, b, strict=True))
    x, y = I.instance_sprites(np.int64(0), 16)
    assert x.shape == (0, 3, 16, 16) and y.shape == (0,)
    x, y, angle = I.instance_sprites(1, 16, seed=0, return_angle=True)  # one image: one pair has no rows
    pair = int(y[0] >= 4)
    cells, palettes = make_sprite_pair(pair)
    assert torch.equal(x, render_sprites(y % 2, angle, cells, palettes, 16))


def test_the_quick_config_is_the_full_one_smaller():
    assert I.quick_config() == dataclasses.replace(I.InstanceConfig(), n_train=1500, n_test=450, size=24, epochs=8,
                                                   seeds=(0, 1))  # fmt: skip


@pytest.fixture
def no_training(monkeypatch):
    def fit(*args, **kwargs):
        raise AssertionError("a model trained before the config was refused")

    monkeypatch.setattr(I, "fit", fit)


@pytest.mark.parametrize(
    ("field", "value", "error", "match"),
    [("n_train", -1, ValueError, r"InstanceConfig.n_train must be an int >= 1, got -1"),
     ("size", 4, ValueError, r"InstanceConfig.size must be an int >= 8, got 4"),
     ("lr", -1.0, ValueError, r"InstanceConfig.lr must be finite and > 0, got -1.0"),
     ("lr", float("inf"), ValueError, r"InstanceConfig.lr must be finite and > 0, got inf"),
     ("lr", "0.1", TypeError, r"InstanceConfig.lr must be a number, got '0.1'"),
     ("saturation", -1.0, ValueError, r"InstanceConfig.saturation must be finite and > 0, got -1.0")],
)  # fmt: skip
def test_instance_config_refuses_before_any_model_trains_naming_the_field(no_training, field, value, error, match):
    # n_train=-1 and size=4 were torch's RuntimeErrors, lr=-1 Adam's "Invalid learning rate: -1.0", lr=inf a run
    # to NaN weights.
    config = dataclasses.replace(I.InstanceConfig(**TINY), **{field: value})
    with pytest.raises(error, match=match):
        I.run_instance(config)
    I.check_config(dataclasses.replace(config, **{field: getattr(I.InstanceConfig(), field)}))  # the default: taken


@pytest.mark.parametrize(("config", "match"), [({"n_train": 12}, "config must be an InstanceConfig or None, got dict"),
                                               (I.quick_config, "got function")])  # fmt: skip
def test_run_instance_refuses_a_config_that_is_not_one(no_training, config, match):
    with pytest.raises(TypeError, match=match):
        I.run_instance(config)


@pytest.mark.parametrize("seed", [1.5, "0", 2**63])
def test_run_seed_refuses_a_seed_that_is_not_an_int_before_training(no_training, seed):
    with pytest.raises(ValueError, match=r"seed must be an int in \[-2\*\*62, 2\*\*62\]"):
        I.run_seed(I.InstanceConfig(**TINY), seed)
    with pytest.raises(ValueError, match=r"InstanceConfig\.seeds must be a non-empty tuple of ints"):
        I.run_instance(I.InstanceConfig(**{**TINY, "seeds": (0, 2**63)}))  # refused before seed 0 trains


def _without_times(result):
    return {k: {m: v for m, v in r.items() if m not in ("seconds", "summary")} if isinstance(r, dict) else r
            for k, r in result.items()}  # fmt: skip


def test_a_tiny_seed_trains_the_three_models_and_reports_each_layers_range():
    config = I.InstanceConfig(**{**TINY, "threads": 1})
    threads = torch.get_num_threads()
    try:  # the config's threads: torch's for the run (and after it, as the other experiments leave them)
        result = I.run_seed(config, np.int64(0))  # a NumPy seed: refused by the data's generator before
        assert torch.get_num_threads() == 1
        again = I.run_seed(config, 0)
    finally:
        torch.set_num_threads(threads)
    assert result["seed"] == 0 and type(result["seed"]) is int
    assert _without_times(result) == _without_times(again)
    assert set(result) == {"seed", *I.MODELS}
    ranges = result["global"]["range"]  # one range for every class, the layer's
    assert list(ranges) == [str(k) for k in I.CLASS_NAMES] and len({json.dumps(v) for v in ranges.values()}) == 1
    summary = result["instance"]["summary"]
    assert list(result["instance"]["range"]) == [str(k) for k in I.CLASS_NAMES]
    for k, c in summary.classes.items():
        assert result["instance"]["range"][str(k)] == {"mean": c["range_mean"][0],
                                                       "quantiles": [q[0] for q in c["range_quantiles"]]}  # fmt: skip
    for name in I.MODELS:
        assert 0.0 <= result[name]["accuracy"] <= 1.0
        labels = sorted(set(I.instance_sprites(config.n_test, config.size, 10_000)[1].tolist()))
        assert list(result[name]["invariance"]) == [str(k) for k in labels]


def test_a_class_with_no_test_image_has_a_nan_range_and_the_run_still_reports(tmp_path, monkeypatch):
    # Four test images hold classes 1 and 2 only: the per-instance ranges lacked classes 0, 3, 4 and 5, and the
    # verdict failed with KeyError '0' once every seed had trained.
    config = I.InstanceConfig(**{**TINY, "n_test": 4})
    assert sorted(set(I.instance_sprites(4, 16, 10_000)[1].tolist())) == [1, 2]
    monkeypatch.setattr(I, "quick_config", lambda: config)
    report = I.instance(tmp_path, quick=True, progress=False)
    ranges = report.numbers["runs"][0]["instance"]["range"]
    assert list(ranges) == [str(k) for k in I.CLASS_NAMES]
    assert [math.isnan(ranges[str(k)]["mean"]) for k in I.CLASS_NAMES] == [True, False, False, True, True, True]
    assert ranges["0"]["quantiles"] == [None] * 3 or all(math.isnan(q) for q in ranges["0"]["quantiles"])
    assert report.numbers["runs"][0]["instance_within_targets"] is False
    stored = json.loads((tmp_path / "instance_numbers.json").read_text())  # strict JSON: NaN as null
    assert stored["runs"][0]["instance"]["range"]["0"] == {"mean": None, "quantiles": [None, None, None]}
    assert "per-instance A ±nan, B ±nan deg" in report.verdict


def test_within_targets_includes_both_ends_and_refuses_nan():
    def ranges(a, b):
        return {str(k): {"mean": a if k < 4 else b} for k in range(6)}

    assert I.within_targets(ranges(I.A_RANGE[0], I.B_MIN)) and I.within_targets(ranges(I.A_RANGE[1], 180.0))
    assert not I.within_targets(ranges(math.nextafter(I.A_RANGE[0], 0), 180.0))
    assert not I.within_targets(ranges(math.nextafter(I.A_RANGE[1], 90), 180.0))
    assert not I.within_targets(ranges(45.0, math.nextafter(I.B_MIN, 0)))
    assert not I.within_targets(ranges(math.nan, 180.0)) and not I.within_targets(ranges(45.0, math.nan))


@pytest.mark.parametrize("folder", ["instance", "instance-seeds-5-9"])
def test_the_kept_instance_numbers_and_verdict_are_what_the_kept_runs_give(folder):
    kept = json.loads((RESULTS / folder / "instance_numbers.json").read_text())
    config = I.InstanceConfig(seeds=tuple(kept["config"]["seeds"]))  # the defaults: as the kept runs trained
    results = [{"seed": r["seed"], **{m: r[m] for m in I.MODELS}} for r in kept["runs"]]
    from augnet._json import dumps

    numbers = I._numbers(config, results)
    assert json.loads(dumps(numbers)) == kept
    assert I._verdict(numbers) == (RESULTS / folder / "verdict.txt").read_text().strip()


def test_run_instance_prints_each_seed_as_it_finishes(monkeypatch, capsys):
    def run_seed(config, seed):
        rng = {str(k): {"mean": 10.0 * k + seed} for k in I.CLASS_NAMES}
        return {"seed": seed, "trunk": {"accuracy": 0.5}, "global": {"accuracy": 0.625, "range": rng},
                "instance": {"accuracy": 0.75, "range": rng}}  # fmt: skip

    monkeypatch.setattr(I, "run_seed", run_seed)
    results = I.run_instance(I.InstanceConfig(**{**TINY, "seeds": (1, 2)}), progress=True)
    assert [r["seed"] for r in results] == [1, 2]
    assert capsys.readouterr().out.splitlines() == [
        "seed 1: acc trunk 0.500 global 0.625 instance 0.750; global ±1; instance 1 11 21 31 41 51",
        "seed 2: acc trunk 0.500 global 0.625 instance 0.750; global ±2; instance 2 12 22 32 42 52",
    ]


def test_the_instance_experiment_writes_its_numbers_and_figures_into_a_str_folder(tmp_path, monkeypatch):
    # A str folder failed (TypeError) at out_dir / "instance_policy.png", once every seed had trained.
    seen = []
    real = I.run_instance

    def run(config, progress=False):
        seen.append(config)
        return real(config, progress=progress)

    monkeypatch.setattr(I, "quick_config", lambda: I.InstanceConfig(**{**TINY, "seeds": (0, 1)}))
    monkeypatch.setattr(I, "run_instance", run)
    out = tmp_path / "new" / "instance"  # not made yet: the experiment makes it
    report = I.instance(str(out), quick=True, seed=3, progress=False)
    assert seen[0].seeds == (3, 4)
    assert report.figures == [out / "instance_policy.png", out / "instance_ranges.png"]
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in report.figures)
    stored = json.loads((out / "instance_numbers.json").read_text())
    assert stored["config"]["seeds"] == [3, 4] and [r["seed"] for r in stored["runs"]] == [3, 4]
    assert stored["needed"] == 2 and stored["done"] == (stored["seeds_meeting_both"] >= 2)
    assert report.verdict.splitlines()[0].startswith("per-instance augmentation, 2 seeds")


def test_the_instance_experiment_keeps_its_numbers_without_matplotlib(tmp_path, monkeypatch):
    # _figures needs matplotlib (the viz extra): without it the experiment failed after every seed had trained,
    # before its numbers were written; the other experiments leave their figures out.
    monkeypatch.setattr(I, "quick_config", lambda: I.InstanceConfig(**TINY))
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    report = I.instance(tmp_path, quick=True, progress=False)
    assert report.figures == [] and list(tmp_path.iterdir()) == [tmp_path / "instance_numbers.json"]
    assert json.loads((tmp_path / "instance_numbers.json").read_text())["runs"][0]["seed"] == 0


def test_the_full_instance_experiment_runs_the_default_config_from_its_seed(tmp_path, monkeypatch):
    seen = []

    class Stop(Exception):
        pass

    def run(config, progress=False):
        seen.append(config)
        raise Stop

    monkeypatch.setattr(I, "run_instance", run)
    for seed, seeds in ((0, (0, 1, 2, 3, 4)), (5, (5, 6, 7, 8, 9))):
        with pytest.raises(Stop):
            I.instance(tmp_path, seed=seed, progress=False)
        assert seen[-1] == dataclasses.replace(I.InstanceConfig(), seeds=seeds)
