"""Experiment configs a user writes by hand: a repeated item of a tuple (one run or row each) and a flag that
is a number are refused, naming the field, before anything trains."""

from __future__ import annotations

import pytest

from augnet.experiments.capacity import CapacityConfig, run_capacity
from augnet.experiments.copies import CopiesConfig, run_copies
from augnet.experiments.demo import DemoConfig
from augnet.experiments.rotation import RotationConfig
from augnet.experiments.selection import SelectionConfig

TINY = {"widths": (4,), "depths": (1,), "methods": ("augnet",), "epochs": 1, "n_train": 40, "n_test": 20, "seeds": 1}


@pytest.mark.parametrize(
    ("field", "value", "item"),
    [
        ("widths", (8, 4, 8), "8"),
        ("depths", (2, 2), "2"),
        ("methods", ("baseline", "augnet", "baseline"), "'baseline'"),
    ],
)
def test_capacity_refuses_a_repeated_width_depth_or_method(field, value, item):
    with pytest.raises(ValueError, match=rf"^CapacityConfig\.{field} must be distinct, got {item} twice"):
        run_capacity(CapacityConfig(**{**TINY, field: value}))


def test_copies_refuses_a_repeated_variant():
    with pytest.raises(ValueError, match=r"^CopiesConfig\.variants must be distinct, got 'paper' twice"):
        run_copies(CopiesConfig(variants=("paper", "paper")))


def test_rotation_refuses_a_repeated_variant():
    with pytest.raises(ValueError, match=r"^RotationConfig\.variants must be distinct, got 'augnet' twice"):
        RotationConfig(variants=("augnet", "augerino", "augnet")).validate()


@pytest.mark.parametrize("field", ["tasks", "settings"])
def test_selection_refuses_a_repeated_task_or_setting(field):
    valid = getattr(SelectionConfig(), field)
    value = (valid[0], valid[0])
    with pytest.raises(ValueError, match=rf"^SelectionConfig\.{field} must be distinct, got {valid[0]!r} twice"):
        SelectionConfig(**{field: value}).validate()


def test_distinct_tuples_still_validate():
    RotationConfig().validate()
    SelectionConfig().validate()
    DemoConfig().validate()
    DemoConfig(diverse=False).validate()


@pytest.mark.parametrize("flag", [1, 0, "yes", None])
def test_demo_diverse_must_be_a_bool(flag):
    """1 ran as True (1 == True) and 0 failed at the first training step."""
    with pytest.raises(TypeError, match=rf"^DemoConfig\.diverse must be a bool, got {type(flag).__name__}: {flag!r}"):
        DemoConfig(diverse=flag).validate()


@pytest.mark.parametrize("flag", [1, 0])
def test_capacity_diverse_must_be_a_bool(flag):
    with pytest.raises(TypeError, match=rf"^CapacityConfig\.diverse must be a bool, got int: {flag!r}"):
        run_capacity(CapacityConfig(**TINY, diverse=flag))
