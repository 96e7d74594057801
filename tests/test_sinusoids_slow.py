"""The sinusoid example's claims at its default settings (slow: about half a minute on 2 cores).

What the data support, measured (docs/guide/reproducing.md, "What the sinusoid example learns"):
the labels are invariant to frequency shifts of up to ±0.5 Hz, and also to
Gaussian noise far beyond the example's range and to phase noise that keeps the
amplitude spectrum. augnet's selection (concepts guide, "Selection") weighs each
magnitude by its measured effect on the trunk, so among the paper's three
candidates it selects FrequencyShift, the invariance the trunk needs most, at
about the data's range (checked on the selection table's runs of the same
settings, tests/test_selection_slow.py); given FrequencyShift alone, the layer
learns that range too.
"""

import pytest

from augnet.experiments import SinusoidsConfig, run_sinusoids

pytestmark = pytest.mark.slow


def test_frequency_shift_alone_learns_the_data_range():
    result = run_sinusoids(SinusoidsConfig(transforms=("FrequencyShift",), threads=2))
    _, high, unit = result.policy[0][0]["range"]
    assert unit == "Hz" and 0.3 <= high <= 0.7
    assert result.test_accuracy > 0.95
