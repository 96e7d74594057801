"""The experiments' Python API called as a user calls it: configs with keyword arguments, tiny runs, output folders.

Mended here (each test of a mend fails on the code before it):
- a NumPy integer seed (``seed=np.int64(3)``, what a config read with NumPy holds) was "an integer is required" from
  torch's generators, once the data were made; a seed past torch's generators was "Overflow when unpacking long
  long", ``None`` Python's ``int()`` error: it is the int it holds now (the same run as the Python int), and a seed
  the run cannot take is a TypeError or ValueError naming the config's seed, before any data are made;
- a run left torch on its own thread count (``run_demo(DemoConfig(threads=1))``, ``run_rotation``, ``run_seed``) and
  every run left ``torch.manual_seed(seed)`` behind: torch's thread count and global random state are put back;
- the trunks (``PaperCNN``, ``SmallCNN``, ``Conv1dNet``, ``MLP``, ``resnet18``, ``preact_resnet18``) took a width of
  0 (an empty model, with a warning), a bool (``MLP(depth=True)``: one layer) and ``normalize="no"`` (normalised),
  and a float, string, ``None`` or negative size failed inside torch naming no argument: each is a TypeError or
  ValueError naming the argument now;
- ``SinusoidsConfig`` had no checks: ``layers=2.0`` was Python's "cannot be interpreted as an integer",
  ``transforms="FrequencyShift"`` fourteen unknown letters, ``max_noise=0`` named ``max_std``; ``DemoConfig`` refused
  a NumPy ``max_translate`` and said "'<=' not supported" for a string ``lr``: both validate these now, naming the
  field; a ``SelectionConfig`` whose ``base`` broke its sinusoid or capacity runs passed ``validate`` (the capacity
  configs are checked there too now, through ``CapacityConfig.validate``);
- ``run_capacity`` trained the baseline and oracle models before refusing what only its AugNet reads (``lam``,
  ``regularizer``, ``units``, ``calibrate``), took ``widths=4`` as "'int' object is not iterable", a string ``lr`` as
  Adam's comparison error;
- ``run_copies`` named ``SinusoidsConfig.n_train`` for its own field, returned nothing for no variant (the registered
  run's figures then failed) and read a string of variants letter by letter; ``run_rotation`` with no variant and
  ``plain=False`` trained nothing; ``RotationResult.invariance_median`` at a magnitude not probed was "0.25 is not in
  list", ``run_augnet`` with an unknown regulariser a ``KeyError``;
- ``SelectionConfig(base={"seed": 3})`` trained every seed on seed 3 (recorded as seeds 0 to 4), ``quick="no"`` was a
  quick run, ``tasks="sprites"`` read letter by letter; ``run_selection`` made a folder named ``~`` for a ``path``
  starting with ``~``, raised ``IsADirectoryError`` / ``FileExistsError`` for a ``path`` that is a folder or lies
  under a file, called a ``log`` that was not callable after the first run, and reused a record of ``runs.jsonl``
  that lacked what the report reads (a ``KeyError`` once every run had trained): it trains it again, warning;
- ``selection_rules``: a NaN weight decided a layer's choice by the order of its entries, ``accuracy_min`` was NaN or
  not by the order of the records, a record or entry missing a field was a ``KeyError`` and a record of an unknown
  task was judged by the sinusoids' rule: ``"none"``, NaN, and ValueErrors naming them;
- the registered experiments called as functions: ``capacity``, ``copies`` and ``selection`` took a ``str`` folder
  as "unsupported operand type(s) for /" (after training, for the first two), ``instance`` made a folder named ``~``,
  and a folder that is a file was found once every model had trained: ``out_dir`` is read as every path augnet takes
  now (:func:`augnet._checks.user_path`) and checked before the runs;
- the ``run_*`` functions given another object than their config, or a ``progress`` that is not a bool (a bar shown
  for ``"no"``), raised ``AttributeError`` or ran: TypeErrors naming them.

Checked as they were (pass before and after): a run twice with the same seed gives the same results; valid sizes
given as NumPy ints or 0-d tensors build the same trunks; config dataclasses compare and serialise to JSON.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import warnings

import numpy as np
import pytest
import torch

from augnet.experiments import capacity as cap
from augnet.experiments import copies as cp
from augnet.experiments import instance as inst
from augnet.experiments import rotation as rot
from augnet.experiments import runner
from augnet.experiments import selection as sel
from augnet.experiments import selection_rules as rules
from augnet.experiments.capacity import CapacityConfig, run_capacity
from augnet.experiments.copies import CopiesConfig, run_copies
from augnet.experiments.demo import DemoConfig, run_demo
from augnet.experiments.instance import InstanceConfig, run_instance, run_seed
from augnet.experiments.rotation import RotationConfig, run_rotation
from augnet.experiments.selection import SelectionConfig, run_selection
from augnet.experiments.sinusoids import SinusoidsConfig, run_sinusoids
from augnet.experiments.trunks import MLP, Conv1dNet, PaperCNN, SmallCNN, preact_resnet18, resnet18

DEMO = dict(epochs=1, n_train=32, n_test=8, width=2, batch_size=16, size=16)
SINES = dict(epochs=1, n_train=32, n_test=8, width=2, batch_size=16)
CAPACITY = dict(widths=(2,), depths=(1,), epochs=1, n_train=32, n_test=8, batch_size=16, probe_copies=(1,),
                accuracy_repeats=1)  # fmt: skip
COPIES = dict(copies=(1, 2), timing_copies=(1, 2), accuracy_repeats=1, min_run_time=0.001, rounds=1, epochs=1,
              n_train=32, n_test=8)  # fmt: skip
INSTANCE = dict(n_train=32, n_test=12, size=8, epochs=1, width=2, seeds=(0,), batch_size=16)
ROTATION = dict(**DEMO, n_probe=8)


@pytest.fixture
def no_training(monkeypatch):
    """Every experiment's ``fit`` fails: a test passes only when the call is refused before any model trains."""

    def fit(*args, **kwargs):
        raise AssertionError("a model trained before the call was refused")

    for module in (runner, rot, cap, inst):
        monkeypatch.setattr(module, "fit", fit)


@pytest.fixture
def quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield


def fingerprint(result) -> str:
    """A run's accuracy, history and weights, as text (NaN equal to NaN)."""
    state = {k: v.tolist() for k, v in result.model.state_dict().items()}
    return repr((result.test_accuracy, result.history, result.policy.to_json(), state))


# --------------------------------------------------------------------------- seeds


@pytest.mark.parametrize(
    ("run", "config"),
    [(lambda c: run_demo(c, progress=False), DemoConfig(**DEMO)), (run_sinusoids, SinusoidsConfig(**SINES))],
)
def test_a_numpy_seed_is_the_run_of_the_int_it_holds(run, config, quiet):
    numpy_seeded = dataclasses.replace(config, seed=np.int64(3))
    assert fingerprint(run(numpy_seeded)) == fingerprint(run(dataclasses.replace(config, seed=3)))
    assert numpy_seeded.seed == 3 and isinstance(numpy_seeded.seed, np.int64)  # the caller's config unchanged


@pytest.mark.parametrize(
    ("make", "field"),
    [(lambda s: CapacityConfig(**CAPACITY, seed=s), "CapacityConfig.seed"),
     (lambda s: CopiesConfig(**COPIES, seed=s), "CopiesConfig.seed")],
)  # fmt: skip
def test_capacity_and_copies_take_a_numpy_seed(make, field, quiet):
    run = run_capacity if field.startswith("Capacity") else run_copies
    strip = (lambda r: repr([{k: v for k, v in x.items() if k != "seconds"} for x in r])) if run is run_capacity \
        else (lambda r: repr({k: v["by_copies"] for k, v in r.items()}))  # fmt: skip
    assert strip(run(make(np.int64(1)))) == strip(run(make(1)))


@pytest.mark.parametrize(
    ("seed", "error", "match"),
    [(None, TypeError, r"seed must be an int, got NoneType"), ("0", TypeError, "seed must be an int, got str"),
     (2**70, ValueError, r"seed must be an int in \[-2\*\*63"), (2**64 - 10, ValueError, r"plus up to")],
)  # fmt: skip
@pytest.mark.parametrize(
    "call",
    [lambda s: run_demo(DemoConfig(**DEMO, seed=s), progress=False),
     lambda s: run_sinusoids(SinusoidsConfig(**SINES, seed=s)),
     lambda s: run_capacity(CapacityConfig(**CAPACITY, seed=s)), lambda s: run_copies(CopiesConfig(**COPIES, seed=s)),
     lambda s: run_rotation(RotationConfig(**ROTATION, seed=s))],
)  # fmt: skip
def test_a_seed_the_run_cannot_take_is_refused_naming_the_config(no_training, call, seed, error, match):
    with pytest.raises(error, match=r"Config\.seed must be") as caught:
        call(seed)
    assert caught.type is error and re.search(match, str(caught.value))


# --------------------------------------------------------------------------- global state


def _global_state():
    return torch.get_num_threads(), torch.get_rng_state()


@pytest.mark.parametrize(
    "run",
    [lambda: run_demo(DemoConfig(**DEMO, threads=1), progress=False),
     lambda: run_sinusoids(SinusoidsConfig(**SINES, threads=1)),
     lambda: run_rotation(RotationConfig(**ROTATION, variants=("augnet", "augerino"), threads=1)),
     lambda: run_capacity(CapacityConfig(**CAPACITY)), lambda: run_copies(CopiesConfig(**COPIES, variants=("paper",))),
     lambda: run_instance(InstanceConfig(**INSTANCE, threads=1))],
)  # fmt: skip
def test_a_run_puts_back_torchs_threads_and_random_state(run, quiet):
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        torch.manual_seed(1234)
        threads, rng = _global_state()
        run()
        after_threads, after_rng = _global_state()
    finally:
        torch.set_num_threads(before)
    assert after_threads == threads == 2
    assert torch.equal(after_rng, rng)
    assert torch.is_grad_enabled() and torch.get_default_dtype() == torch.float32


def test_a_run_twice_gives_the_same_results(quiet):  # (as before)
    config = RotationConfig(**ROTATION, variants=("augnet", "augerino"))
    first, second = run_rotation(config), run_rotation(config)
    for name in first.runs:
        assert first.runs[name].test_accuracy == second.runs[name].test_accuracy
        assert first.runs[name].history == second.runs[name].history
    assert repr(first.invariance) == repr(second.invariance)


# --------------------------------------------------------------------------- trunks


TRUNKS = {
    "PaperCNN": lambda w: PaperCNN(3, 4, w), "SmallCNN": lambda w: SmallCNN(1, 4, w),
    "Conv1dNet": lambda w: Conv1dNet(1, 4, w), "MLP": lambda w: MLP(w, 1), "resnet18": lambda w: resnet18(10, w),
    "preact_resnet18": lambda w: preact_resnet18(10, w),
}  # fmt: skip


@pytest.mark.parametrize(
    ("name", "width", "error"),
    [(name, width, error) for name in TRUNKS
     for width, error in ((0, ValueError), (-1, ValueError), (2.0, TypeError), (2.5, TypeError), ("2", TypeError),
                          (None, TypeError), (True, TypeError))
     if not (name == "MLP" and width in (0, -1))],  # (MLP refused those, naming them)
)  # fmt: skip
def test_a_trunk_refuses_a_width_that_is_not_an_int_of_1_or_more(name, width, error):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a 0 width was only torch's "Initializing zero-element tensors" warning
        with pytest.raises(error, match=r"width( and depth)? must be .*>= 1") as caught:
            TRUNKS[name](width)
    assert name in str(caught.value) or "width and depth" in str(caught.value)


@pytest.mark.parametrize(
    ("make", "match"),
    [(lambda: MLP(2, True), "MLP: depth must be an int"), (lambda: MLP(2, 1, in_features=0), "in_features must be"),
     (lambda: MLP(2, 1, classes=2.0), "classes must be an int"), (lambda: PaperCNN(True, 4, 2), "in_channels"),
     (lambda: PaperCNN(3, -1, 2), "classes must be >= 1"), (lambda: Conv1dNet(1, 4, 2, kernel=0), "kernel must be"),
     (lambda: resnet18(0, 2), "classes must be >= 1"), (lambda: preact_resnet18(10, 2, normalize="no"), "normalize")],
)  # fmt: skip
def test_a_trunk_names_its_other_sizes_and_flags(make, match):
    with pytest.raises((TypeError, ValueError), match=match):
        make()


@pytest.mark.parametrize("name", list(TRUNKS))
def test_a_trunk_of_a_numpy_or_tensor_width_is_the_int_ones(name):  # (as before)
    counts = {sum(p.numel() for p in TRUNKS[name](w).parameters()) for w in (2, np.int64(2), torch.tensor(2))}
    assert len(counts) == 1


# --------------------------------------------------------------------------- configs


@pytest.mark.parametrize(
    ("changes", "error", "match"),
    [({"layers": 2.0}, ValueError, "SinusoidsConfig.layers must be an int >= 1"),
     ({"layers": True}, ValueError, "SinusoidsConfig.layers"),
     ({"transforms": "FrequencyShift"}, TypeError, "SinusoidsConfig.transforms must be a tuple of names"),
     ({"max_noise": 0}, ValueError, "SinusoidsConfig.max_noise"), ({"width": -1}, ValueError, "SinusoidsConfig.width"),
     ({"lr": "x"}, TypeError, "SinusoidsConfig.lr must be a number")],
)  # fmt: skip
def test_sinusoids_config_names_its_fields(no_training, changes, error, match):
    with pytest.raises(error, match=match):
        run_sinusoids(SinusoidsConfig(**{**SINES, **changes}))


def test_demo_config_takes_a_numpy_max_translate_and_names_a_bad_lr(quiet):
    shift = np.float32(0.3)
    assert fingerprint(run_demo(DemoConfig(**DEMO, max_translate=shift), progress=False)) == \
        fingerprint(run_demo(DemoConfig(**DEMO, max_translate=float(shift)), progress=False))  # fmt: skip
    with pytest.raises(TypeError, match=r"DemoConfig\.lr must be a number, got 'x'"):
        DemoConfig(lr="x").validate()


def test_configs_compare_and_serialise():  # (as before)
    for config in (DemoConfig(), SinusoidsConfig(), RotationConfig(), CapacityConfig(), CopiesConfig(),
                   InstanceConfig(), SelectionConfig()):  # fmt: skip
        assert json.loads(json.dumps(dataclasses.asdict(config))) is not None
        assert config == dataclasses.replace(config)


@pytest.mark.parametrize(
    ("field", "value", "error", "match"),
    [("lam", -1.0, ValueError, "CapacityConfig.lam"), ("regularizer", "x", ValueError, "unknown regularizer 'x'"),
     ("units", "x", ValueError, "units must be one of"), ("diverse", "no", TypeError, "diverse must be a bool"),
     ("calibrate", "x", ValueError, "CapacityConfig.calibrate"), ("lr", "x", TypeError, "CapacityConfig.lr"),
     ("widths", 4, TypeError, "CapacityConfig.widths must be a tuple"),
     ("depths", 1, TypeError, "CapacityConfig.depths must be a tuple")],
)  # fmt: skip
def test_capacity_refuses_what_its_augnet_reads_before_the_baselines_train(no_training, field, value, error, match):
    config = CapacityConfig(**{**CAPACITY, "methods": ("baseline", "oracle", "augnet"), field: value})
    with pytest.raises(error, match=match):
        run_capacity(config)


@pytest.mark.parametrize(
    ("changes", "error", "match"),
    [({"n_train": 0}, ValueError, "CopiesConfig.n_train must be an int >= 1"),
     ({"epochs": 1.0}, ValueError, "CopiesConfig.epochs"), ({"variants": ()}, ValueError, "must not be empty"),
     ({"variants": "paper"}, TypeError, "CopiesConfig.variants must be a tuple")],
)  # fmt: skip
def test_copies_names_its_own_fields(no_training, changes, error, match):
    with pytest.raises(error, match=match):
        run_copies(CopiesConfig(**{**COPIES, **changes}))


def test_rotation_refuses_nothing_to_train_and_names_a_magnitude_not_probed(no_training):
    with pytest.raises(ValueError, match="nothing to train"):
        run_rotation(RotationConfig(**ROTATION, variants=(), plain=False))
    with pytest.raises(TypeError, match=r"RotationConfig\.variants must be a tuple"):
        run_rotation(RotationConfig(**ROTATION, variants="augnet"))
    with pytest.raises(ValueError, match="regularizer must be one of"):
        rot.run_augnet(RotationConfig(**ROTATION), "paper")
    result = rot.RotationResult(RotationConfig(), {}, {"plain": {"magnitude": [0.5, 1.0], "summary": [{}, {}]}})
    with pytest.raises(ValueError, match=r"magnitude 0.25 was not probed; the probe magnitudes: \[0.5, 1.0\]"):
        result.invariance_median("plain")
    with pytest.raises(ValueError, match="no run named 'augnet'"):
        result.invariance_median("augnet", 0.5)


@pytest.mark.parametrize(
    "call",
    [lambda: run_demo(SinusoidsConfig(), progress=False), lambda: run_sinusoids(DemoConfig()),
     lambda: run_capacity({"widths": (4,)}), lambda: run_copies(CapacityConfig()), lambda: run_rotation(DemoConfig()),
     lambda: run_selection(DemoConfig()), lambda: run_seed(DemoConfig(), 0),
     lambda: run_capacity(CapacityConfig(**CAPACITY), progress="no"),
     lambda: run_instance(InstanceConfig(**INSTANCE), progress="no"),
     lambda: run_rotation(RotationConfig(**ROTATION), progress="no")],
)  # fmt: skip
def test_a_run_refuses_another_config_or_a_progress_that_is_not_a_bool(no_training, call):
    with pytest.raises(TypeError, match=r"config must be a|progress must be True or False"):
        call()


# --------------------------------------------------------------------------- selection


def tiny_selection(**changes) -> SelectionConfig:
    return SelectionConfig(**{"tasks": ("sinusoids-1",), "settings": ("paper",), "seeds": 1, **changes})


@pytest.mark.parametrize(
    ("changes", "error", "match"),
    [({"base": {"seed": 3}}, ValueError, r"base must not set \['seed'\]"),
     ({"base": {"layers": 4}}, ValueError, r"must not set \['layers'\]"),
     ({"quick": "no"}, TypeError, "SelectionConfig.quick must be True or False"),
     ({"tasks": "sprites"}, TypeError, "SelectionConfig.tasks must be a tuple of names"),
     ({"base": {"max_noise": 0}}, ValueError, "SinusoidsConfig.max_noise"),
     ({"tasks": ("capacity",), "base": {"n_test": 1}}, ValueError, "CapacityConfig.n_test must be an int >= 2")],
)  # fmt: skip
def test_selection_config_validate_refuses_what_would_train_wrong_or_fail_late(changes, error, match):
    with pytest.raises(error, match=match):
        tiny_selection(**changes).validate()


@pytest.fixture
def fake_runs(monkeypatch):
    """``run_one`` returns a readable record without training; the calls made are kept."""
    calls = []

    def run_one(task, setting, seed, config):
        calls.append((task, setting, seed))
        entry = {"transform": "FrequencyShift", "weight": 0.9, "magnitude": 0.2, "range": [-0.4, 0.4, "Hz"]}
        return {"task": task, "setting": setting, "seed": seed, "accuracy": 1.0, "layers": [[entry]], "early": None,
                "seconds": 0.0}  # fmt: skip

    monkeypatch.setattr(sel, "run_one", run_one)
    return calls


def test_run_selection_reads_a_path_from_the_home_folder(fake_runs, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    run_selection(tiny_selection(), path="~/sel/runs.jsonl")
    assert (tmp_path / "home" / "sel" / "runs.jsonl").is_file()
    assert not (tmp_path / "~").exists()


def test_run_selection_refuses_a_path_it_cannot_keep_runs_in(no_training, tmp_path):
    (tmp_path / "runs.jsonl").mkdir()
    with pytest.raises(ValueError, match="is not a file"):
        run_selection(tiny_selection(), path=tmp_path / "runs.jsonl")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match=r"path's folder .*file is an existing file, not a folder"):
        run_selection(tiny_selection(), path=tmp_path / "file" / "runs.jsonl")
    with pytest.raises(TypeError, match="log must be callable"):
        run_selection(tiny_selection(), log="runs.log")


def test_run_selection_trains_again_a_kept_record_it_cannot_read(fake_runs, tmp_path):
    path = tmp_path / "runs.jsonl"
    config = tiny_selection(seeds=2)
    keys = [sel.run_key(config, *run) for run in config.runs()]
    path.write_text(json.dumps({"key": keys[0], "task": "sinusoids-1", "setting": "paper", "seed": 0}) + "\n")
    with pytest.warns(UserWarning, match=r"lacks \['accuracy', 'layers'\]: trained again"):
        records = run_selection(config, path=path)
    assert fake_runs == [("sinusoids-1", "paper", 0), ("sinusoids-1", "paper", 1)]
    assert rules.summarize(records)[0]["runs"] == 2


# --------------------------------------------------------------------------- selection rules


def entry(transform, weight, magnitude=0.3, high=45.0):
    return {"transform": transform, "weight": weight, "magnitude": magnitude, "range": [-high, high, "deg"]}


def test_a_nan_weight_is_no_choice_whatever_the_order():
    layer = [entry("Rotate", 0.9), entry("ShearX", math.nan)]
    assert rules.layer_choice(layer) == rules.layer_choice(layer[::-1]) == "none"
    assert rules.layer_choice([entry("Rotate", 0.9), entry("ShearX", 0.1)]) == "Rotate"  # (as before)


@pytest.mark.parametrize(
    ("call", "match"),
    [(lambda: rules.layer_choice([]), "non-empty list of entries"),
     (lambda: rules.layer_choice([{"transform": "Rotate", "magnitude": 0.3}]), r"lacks \['weight'\]"),
     (lambda: rules.succeeds({"layers": [[entry("Rotate", 0.9)]]}), "task must be"),
     (lambda: rules.succeeds({"task": "digits", "layers": [[entry("Rotate", 0.9)]]}), "got 'digits'"),
     (lambda: rules.succeeds({"task": "sprites", "layers": [[]]}), "not a non-empty list")],
)  # fmt: skip
def test_rules_name_what_a_layer_or_record_lacks(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def record(seed=0, accuracy=0.9, **changes):
    return {"task": "sprites", "setting": "paper", "seed": seed, "accuracy": accuracy,
            "layers": [[entry("Rotate", 0.9)]], **changes}  # fmt: skip


def test_summarize_names_a_record_that_lacks_a_field_and_reads_nan_accuracies_in_any_order():
    for missing in ("accuracy", "layers", "setting"):
        with pytest.raises(ValueError, match=rf"record 1 \('sprites'.*lacks \['{missing}'\]"):
            rules.summarize([record(), {k: v for k, v in record(1).items() if k != missing}])
    with pytest.raises(ValueError, match="early entry without weights"):
        rules.summarize([record(early={"epoch": 10})])
    nan_first, nan_last = rules.summarize([record(accuracy=math.nan), record(1)]), rules.summarize(
        [record(1), record(accuracy=math.nan)])  # fmt: skip
    assert math.isnan(nan_first[0]["accuracy_min"]) and math.isnan(nan_last[0]["accuracy_min"])
    assert rules.summarize([record(), record(1, 0.8)])[0]["accuracy_min"] == 0.8  # (as before)


def test_check_rules_names_a_row_that_lacks_a_field():
    rows = rules.summarize([record(), record(1)])
    with pytest.raises(ValueError, match=r"row 0 of the summary lacks \['successes'\]"):
        rules.check_rules([{k: v for k, v in rows[0].items() if k != "successes"}], "paper")
    capacity = {"task": "capacity", "setting": "paper", "runs": 1, "accuracy_mean": 0.5,
                "trunks": {"1x4": {"width": 4, "accuracy": 0.5}}}  # fmt: skip
    with pytest.raises(ValueError, match=r"has a trunk 1x4 without \['invariance_median'\]"):
        rules.check_rules([capacity], "paper")
    assert rules.check_rules(rows, "paper")["images"][0]  # (as before)


# --------------------------------------------------------------------------- registered experiments' folders


def _tiny(config_class, **fields):
    """A subclass of ``config_class`` whose every instance has ``fields`` (the registered run's own included)."""

    class Tiny(config_class):
        def __init__(self, **kwargs):
            super().__init__(**{**kwargs, **fields})

    return Tiny


def test_capacity_and_copies_write_into_a_str_folder(tmp_path, monkeypatch, quiet):
    pytest.importorskip("matplotlib")
    monkeypatch.setattr(cap, "CapacityConfig", _tiny(CapacityConfig, **CAPACITY, seeds=1))
    report = cap.capacity(str(tmp_path / "capacity"), progress=False)
    assert (tmp_path / "capacity" / "capacity.png").is_file() and report.figures
    monkeypatch.setattr(cp, "CopiesConfig", _tiny(CopiesConfig, **COPIES))
    report = cp.copies(str(tmp_path / "copies"), progress=False)
    assert (tmp_path / "copies" / "copies.png").is_file()


def test_instance_and_selection_read_a_home_folder(tmp_path, monkeypatch, fake_runs, quiet):
    pytest.importorskip("matplotlib")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(inst, "InstanceConfig", _tiny(InstanceConfig, **INSTANCE))
    inst.instance("~/instance", progress=False)
    assert (tmp_path / "home" / "instance" / "instance_numbers.json").is_file()
    monkeypatch.setattr(sel, "SelectionConfig", _tiny(SelectionConfig, tasks=("sinusoids-1",), settings=("paper",),
                                                      seeds=1, workers=1))  # fmt: skip
    sel.selection("~/selection", progress=False)
    assert (tmp_path / "home" / "selection" / "runs.jsonl").is_file()
    assert not (tmp_path / "~").exists()


@pytest.mark.parametrize("name", ["rotation", "capacity", "copies", "instance", "sinusoids", "selection"])
def test_a_registered_experiment_refuses_a_file_as_its_folder_before_training(no_training, fake_runs, tmp_path,
                                                                              monkeypatch, name):  # fmt: skip
    import augnet.experiments._registry as registry

    out = tmp_path / "results"
    out.write_text("not a folder")
    monkeypatch.setattr(sel, "SelectionConfig", _tiny(SelectionConfig, workers=1))
    with pytest.raises(ValueError, match="is an existing file, not a folder"):
        registry._REGISTRY[name](out_dir=out, quick=True, seed=0, progress=False, device="cpu")
    assert out.read_text() == "not a folder"
