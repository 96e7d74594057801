"""`augnet reproduce sinusoids` (stacked layers) and the experiment registry."""

import json

import pytest

from augnet.cli import main
from augnet.experiments import names, reproduce


def test_registry_and_unknown_names(tmp_path):
    assert "sinusoids" in names()
    with pytest.raises(ValueError, match="unknown experiment 'mnist'"):
        reproduce("mnist", out=tmp_path)
    with pytest.raises(SystemExit):
        main(["reproduce", "mnist"])


@pytest.mark.slow
def test_quick_stacked_layers_learn_the_frequency_shift_first_and_different_transforms(tmp_path, capsys):
    assert main(["reproduce", "sinusoids", "--quick", "--no-progress", "--threads", "2", "--out", str(tmp_path)]) == 0
    assert "2 layer(s)" in capsys.readouterr().out
    payload = json.loads((tmp_path / "sinusoids" / "sinusoids.json").read_text())
    runs = payload["numbers"]["runs"]
    assert [r["layers"] for r in runs] == [1, 2]
    for run in runs:
        assert run["test_accuracy"] > 0.95
        # What these data need most (concepts guide, "Selection"): the frequency shift, within the data's +-0.5 Hz.
        first = run["winners"][0]
        assert first["winner"] == "FrequencyShift" and 0.1 <= first["magnitude"] <= 0.4  # +-0.2 to +-0.8 Hz
        chosen = [w["winner"] for w in run["winners"]]
        assert len(set(chosen)) == len(chosen)  # stacked layers learn different invariances
    assert len(list((tmp_path / "sinusoids").glob("*.png"))) == 3
