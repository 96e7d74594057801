"""The demo's claims at its default settings (slow: about a minute each on 2 cores).

What the rotated sprites support, measured (the concepts guide, "What the demo learns"):
the labels survive translations and shears over their whole ranges, and
rotations only up to about ±45 degrees. With augnet's selection (concepts
guide, "Selection") the layer selects Rotate and learns about the data's range;
given Rotate alone, it learns that range too.
"""

import pytest

from augnet.experiments.demo import DemoConfig, run_demo

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("seed", [0, 1])  # a third seed cost CI about a minute
def test_default_demo_selects_rotate_at_the_datas_range(seed):
    result = run_demo(DemoConfig(seed=seed, threads=2), progress=False)
    layer = {e["transform"]: e for e in result.policy.layers_json()[0]}
    assert result.winner() == "Rotate" and layer["Rotate"]["weight"] > 0.8
    _, high, unit = layer["Rotate"]["range"]
    assert unit == "deg" and 30.0 <= high <= 60.0  # the data's rotations are within ±45 degrees
    # The transforms the task does not need keep almost no weight (their magnitudes do not matter then).
    assert all(e["weight"] < 0.05 for name, e in layer.items() if name != "Rotate")
    assert result.test_accuracy > 0.98


def test_rotation_alone_learns_the_data_range():
    result = run_demo(DemoConfig(transforms=("Rotate",), threads=2), progress=False)
    _, high, unit = result.policy.layers_json()[0][0]["range"]
    assert unit == "deg" and 30.0 <= high <= 60.0
    assert result.test_accuracy > 0.98
