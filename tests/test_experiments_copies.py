"""`augnet reproduce copies`: a trained AugNet evaluated and timed with C copies (paper Fig. B.4 and B.6).

The fast tests check the plumbing on tiny runs; the slow one runs the quick
version and checks what it supports (the same held for seeds 0, 1 and 2).
"""

import json
import time

import pytest
import torch

import augnet.experiments.copies as cp
from augnet.experiments import reproduce
from augnet.experiments.sinusoids import SinusoidsConfig, sinusoid_layer
from augnet.experiments.trunks import MLP
from augnet.model import AugNet

TINY = {"epochs": 1, "n_train": 32, "n_test": 16, "accuracy_repeats": 1, "min_run_time": 0.01, "rounds": 1}


def test_time_copies_reports_ratios_per_round():
    model = AugNet(MLP(4, 1), sinusoid_layer(SinusoidsConfig()), eval_copies=10).train()
    x = torch.randn(8, 1, 1000)
    timing = cp.time_copies(model, x, copies=(1, 3), min_run_time=0.01, rounds=2)
    assert model.training  # restored
    assert timing["copies"] == [1, 3] and len(timing["ratio"]) == 2 and len(timing["trunk_ratio"]) == 2
    assert len(timing["ratio_rounds"]) == 2 and all(r > 0 for r in timing["ratio"])
    assert timing["threads"] == torch.get_num_threads()


def test_linear_fit():
    fit = cp._linear_fit([1.0, 2.0, 4.0], [3.0, 5.0, 9.0])
    assert fit["slope"] == pytest.approx(2.0) and fit["intercept"] == pytest.approx(1.0)
    assert fit["r2"] == pytest.approx(1.0)


def test_run_copies_scores_each_c_and_restores_threads():
    threads = torch.get_num_threads()
    config = cp.CopiesConfig(**TINY, copies=(1, 2), timing_copies=(1, 2))
    runs = cp.run_copies(config)
    assert torch.get_num_threads() == threads
    assert set(runs) == {"paper", "frequency_shift"}
    assert runs["frequency_shift"]["transforms"] == ["FrequencyShift"]
    for run in runs.values():
        assert set(run["by_copies"]) == {"1", "2"}
        assert {"accuracy", "invariance", "invariance_log_probs"} <= set(run["by_copies"]["1"])
        assert run["timing"]["copies"] == [1, 2] and "fit" in run["timing"]
    json.dumps(runs)
    with pytest.raises(ValueError, match="unknown variants"):
        cp.run_copies(cp.CopiesConfig(variants=("mixup",)))


def test_registered_experiment_writes_numbers_and_figures(tmp_path, monkeypatch):
    real = cp.run_copies

    def tiny(config, progress=False):
        for key, value in TINY.items():
            setattr(config, key, value)
        config.variants = ("frequency_shift",)
        return real(config, progress)

    monkeypatch.setattr(cp, "run_copies", tiny)
    report = reproduce("copies", quick=True, out=tmp_path, progress=False)
    payload = json.loads((tmp_path / "copies" / "copies.json").read_text())
    assert set(payload["numbers"]["runs"]) == {"frequency_shift"}
    # the figures' last digits depend on the install and the CPU: the file says which made them
    assert payload["machine"]["torch_version"] == torch.__version__ and payload["machine"]["cpu_capability"]
    time.strptime(payload["date"], "%Y-%m-%d")  # a date
    assert "time / trunk" in report.verdict and "C=10" in report.verdict
    pytest.importorskip("matplotlib")
    assert (tmp_path / "copies" / "copies.png").exists() and (tmp_path / "copies" / "copies_time.png").exists()


@pytest.mark.slow
def test_quick_copies_claims(tmp_path):
    reproduce("copies", quick=True, out=tmp_path, progress=False)
    runs = json.loads((tmp_path / "copies" / "copies.json").read_text())["numbers"]["runs"]
    top = max(runs["paper"]["policy"][0], key=lambda e: e["weight"])
    assert top["transform"] == "FrequencyShift"  # the invariance a small trunk needs most (concepts guide, "Selection")
    for run in runs.values():
        by_c = run["by_copies"]
        # The 1-D CNN is already nearly invariant to the ±0.5 Hz shift: more copies keep it there.
        assert by_c["10"]["accuracy"] >= 0.95 and by_c["10"]["invariance"]["median"] > 0.9
        assert by_c["10"]["invariance"]["median"] >= by_c["1"]["invariance"]["median"] - 0.02
        assert by_c["10"]["accuracy"] >= by_c["1"]["accuracy"]
        # Timed for every C (the times themselves are figures, not claims: reproducing guide, "copies").
        assert run["timing"]["copies"] == [1, 2, 4, 10] and all(r > 0 for r in run["timing"]["ratio"])
