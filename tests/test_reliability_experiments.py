"""The experiments' configs and entry points refuse what cannot work before any model trains.

Each test replaces the experiment's ``fit`` by one that fails: a config refused only after (or while) a first
model trained would reach it. Every run here is refused before any work, so the tests take no training time.
"""

from __future__ import annotations

import pytest
import torch

from augnet.experiments import _registry, capacity, instance, rotation, runner
from augnet.experiments.capacity import CapacityConfig, run_capacity
from augnet.experiments.copies import CopiesConfig, run_copies
from augnet.experiments.demo import DemoConfig, run_demo
from augnet.experiments.instance import InstanceConfig, run_instance
from augnet.experiments.rotation import RotationConfig, run_rotation
from augnet.experiments.selection import SelectionConfig
from augnet.experiments.sinusoids import SinusoidsConfig, run_sinusoids

TINY = dict(epochs=1, n_train=16, n_test=8, batch_size=8)


@pytest.fixture
def no_training(monkeypatch):
    """Every experiment's ``fit`` fails: a test passes only when the config is refused before training."""

    def fit(*args, **kwargs):
        raise AssertionError("a model trained before the config was refused")

    for module in (runner, rotation, capacity, instance):
        monkeypatch.setattr(module, "fit", fit)


@pytest.mark.parametrize("make", [lambda: run_demo(DemoConfig(**{**TINY, "n_test": 0}), progress=False),
                                  lambda: run_sinusoids(SinusoidsConfig(**{**TINY, "n_test": 0}))])  # fmt: skip
def test_no_test_inputs_are_refused_before_training(no_training, make):
    with pytest.raises(ValueError, match="n_test must be an int >= 1, got 0"):
        make()


@pytest.mark.parametrize("threads", [0, -1, 1.5, True])
def test_bad_threads_are_refused_naming_the_field(no_training, threads):
    before = torch.get_num_threads()
    with pytest.raises(ValueError, match="threads must be an int >= 1"):
        run_demo(DemoConfig(**TINY, threads=threads), progress=False)
    assert torch.get_num_threads() == before


@pytest.mark.parametrize(
    ("field", "value", "error", "match"),
    [
        ("anneal_to", "x", ValueError, "anneal_to must be a positive temperature"),
        ("warmup_epochs", 1.5, ValueError, "warmup_epochs must be an int >= 0, got 1.5"),
        ("warmup_epochs", "3", ValueError, "warmup_epochs must be an int >= 0"),
        ("transforms", "Rotate", TypeError, "transforms must be a tuple of names, got the string 'Rotate'"),
    ],
)
def test_demo_config_validate_names_the_field(field, value, error, match):
    with pytest.raises(error, match=match):
        DemoConfig(**{field: value}).validate()


@pytest.mark.parametrize(
    ("field", "value"),
    [("augerino_lr", -1.0), ("augerino_init_width", 0.0), ("augerino_lam", float("nan")),
     ("augerino_weight_decay", -1.0), ("n_probe", 1), ("probe_magnitudes", (2.0,)), ("probe_magnitudes", ())],
)  # fmt: skip
def test_rotation_refuses_late_fields_before_the_first_run(no_training, field, value):
    config = RotationConfig(**TINY, width=2, n_probe=8, variants=("augnet", "augerino"), plain=False)
    setattr(config, field, value)
    with pytest.raises(ValueError, match=f"RotationConfig.{field}"):
        run_rotation(config)


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [("probe_copies", (0,), "probe_copies must be an int >= 1"), ("accuracy_repeats", 0, "accuracy_repeats"),
     ("draws", "both", "draws must be one of"), ("n_test", 1, "n_test must be an int >= 2"),
     ("seeds", 0, "seeds must be an int >= 1"), ("widths", (), "widths must not be empty"),
     ("threads", 0, "threads must be an int >= 1"), ("eval_copies", 0, "eval_copies"),
     ("init_magnitude", 2.0, "init_magnitude"), ("aug_lr", -1.0, "aug_lr")],
)  # fmt: skip
def test_capacity_refuses_before_any_model_trains(no_training, field, value, match):
    config = CapacityConfig(**TINY, widths=(2,), depths=(1,), methods=("baseline", "augnet"), probe_copies=(1,))
    setattr(config, field, value)
    with pytest.raises(ValueError, match=match):
        run_capacity(config)


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [("copies", (0,), "copies must be an int >= 1"), ("timing_copies", (4, 4), "at least 2 distinct"),
     ("rounds", 0, "rounds must be an int >= 1"), ("min_run_time", 0.0, "min_run_time must be finite and > 0"),
     ("accuracy_repeats", 0, "accuracy_repeats"), ("draws", "x", "draws must be one of")],
)  # fmt: skip
def test_copies_refuses_before_training(no_training, field, value, match):
    config = CopiesConfig(epochs=1, n_train=16, n_test=8)
    setattr(config, field, value)
    with pytest.raises(ValueError, match=match):
        run_copies(config)


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [("hidden", 0, "hidden"), ("conditioner_lr", -1.0, "conditioner_lr"), ("init_magnitude", 2.0, "init_magnitude"),
     ("n_test", 1, "n_test must be an int >= 2"), ("lam", -1.0, "lam"), ("seeds", (), "seeds must be a non-empty"),
     ("seeds", (0.5,), "seeds must be a non-empty")],
)  # fmt: skip
def test_instance_refuses_before_the_trunk_trains(no_training, field, value, match):
    config = InstanceConfig(n_train=12, n_test=12, size=16, width=2, epochs=1, batch_size=4, seeds=(0,))
    setattr(config, field, value)
    with pytest.raises(ValueError, match=match):
        run_instance(config)


@pytest.mark.parametrize(
    ("changes", "match"),
    [({"seeds": 1.5}, "seeds and workers must be ints"), ({"workers": True}, "seeds and workers must be ints"),
     ({"base": {"anneal_to": -1.0}}, "anneal_to")],
)  # fmt: skip
def test_selection_config_validate_checks_every_run(changes, match):
    config = SelectionConfig(tasks=("glyphs",), settings=("paper",), **{"seeds": 1, **changes})
    with pytest.raises(ValueError, match=match):
        config.validate()


@pytest.fixture
def no_experiment(monkeypatch):
    def run(**kwargs):
        raise AssertionError("the experiment ran")

    monkeypatch.setitem(_registry._REGISTRY, "sinusoids", run)


@pytest.mark.parametrize("flags", [{"quick": "no"}, {"quick": 1}, {"progress": None}])
def test_reproduce_refuses_flags_that_are_not_bools(no_experiment, tmp_path, flags):
    with pytest.raises(TypeError, match="must be True or False"):
        _registry.reproduce("sinusoids", out=tmp_path, **flags)
    assert not (tmp_path / "sinusoids").exists()


def test_reproduce_refuses_an_out_that_is_a_file(no_experiment, tmp_path):
    out = tmp_path / "results"
    out.write_text("not a folder")
    with pytest.raises(_registry.SetupError, match="is a file, not a folder"):
        _registry.reproduce("sinusoids", out=out)
    assert out.read_text() == "not a folder"
