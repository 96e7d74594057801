"""The demo's claims at its default settings (slow: about a minute each on 2 cores).

What the rotated-glyph data support, measured (README, "What the demo learns"):
the labels survive translations and shears over their whole DESIGN ranges, and
rotations only up to about ±45 degrees. The selective regulariser favours the
candidate with the highest admissible magnitude, so among the five geometric
candidates a shear is selected at its full range; given Rotate alone, the layer
learns the data's rotation range.
"""

import pytest

from augnet.experiments.demo import DemoConfig, run_demo

pytestmark = pytest.mark.slow


def test_default_demo_selects_one_transform_the_data_tolerate_at_full_range():
    result = run_demo(DemoConfig(threads=2), progress=False)
    layer = {e["transform"]: e for e in result.policy[0]}
    winner = layer[result.winner()]
    assert winner["weight"] > 0.9  # one transform is selected
    assert winner["transform"] in ("ShearX", "ShearY")
    assert winner["magnitude"] > 0.95  # at the top of its range, which the data tolerate
    assert result.test_accuracy > 0.98
    assert layer["Rotate"]["weight"] < 0.05


def test_rotation_alone_learns_the_data_range():
    result = run_demo(DemoConfig(transforms=("Rotate",), threads=2), progress=False)
    _, high, unit = result.policy[0][0]["range"]
    assert unit == "deg" and 30.0 <= high <= 60.0
    assert result.test_accuracy > 0.98
