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
def test_quick_stacked_layers_select_a_noise_like_transform_in_every_layer(tmp_path, capsys):
    assert main(["reproduce", "sinusoids", "--quick", "--no-progress", "--threads", "2", "--out", str(tmp_path)]) == 0
    assert "2 layer(s)" in capsys.readouterr().out
    payload = json.loads((tmp_path / "sinusoids" / "sinusoids.json").read_text())
    runs = payload["numbers"]["runs"]
    assert [r["layers"] for r in runs] == [1, 2]
    for run in runs:
        assert run["test_accuracy"] > 0.95
        for winner in run["winners"]:
            # What these data support (README): noise-like transforms are harmless at full range.
            assert winner["winner"] in ("GaussianNoise", "FTSurrogate") and winner["magnitude"] > 0.9
    assert len(list((tmp_path / "sinusoids").glob("*.png"))) == 3
