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
