"""`augnet reproduce selection`: win rates of the transforms per setting and candidate; the demo's presets."""

import json
import math

import pytest

import augnet.experiments.selection as S
from augnet.experiments import reproduce
from augnet.experiments.demo import PRESETS, DemoConfig, build_model, run_demo


def tiny_config(**kwargs):
    fields = dict(seeds=2, epochs=1, n_train=64, n_test=32, width=2, threads=2)
    fields.update(kwargs)
    return S.SelectionConfig(**fields)


def test_runs_cover_every_data_setting_candidate_and_seed():
    config = tiny_config(settings=("T 1", "official"), candidates=("magnitude decay",), seed=3)
    runs = config.runs()
    assert len(runs) == 2 * 3 * 2
    assert runs[0] == ("sprites", "setting", "T 1", 3) and runs[-1] == ("glyphs", "candidate", "magnitude decay", 4)
    demo = config.demo_config("glyphs", "setting", "official", 4)
    assert (demo.data, demo.size, demo.seed, demo.width) == ("glyphs", 28, 4, 2)  # the experiment's width wins
    assert (demo.temperature, demo.weight_decay, demo.aug_weight_decay, demo.aug_lr) == (0.01, 1.0, 1.0, None)
    cand = config.demo_config("sprites", "candidate", "magnitude decay", 3)
    assert cand.magnitude_weight_decay == 1.0 and cand.temperature == 1.0 and cand.weight_decay == 0.0
    with pytest.raises(ValueError, match="unknown settings or candidates"):
        S.run_selection(tiny_config(settings=("T 2",)))


def test_summary_counts_wins_and_keeps_rotates_range_and_accuracies():
    def rec(name, winner, deg, acc, weight=0.9):
        return {"data": "sprites", "kind": "setting", "name": name, "seed": 0, "winner": winner,
                "winner_weight": weight, "rotate_range_deg": deg, "accuracy": acc}  # fmt: skip

    records = [rec("a", "Rotate", 44.0, 1.0), rec("a", "ShearX", 10.0, 0.75), rec("a", "Rotate", 50.0, 0.99)]
    records.append(rec("b", "none", 20.0, 1.0))
    rows = S.summarize_selection(records)
    a = rows[0]
    assert (a["runs"], a["rotate_wins"], a["wins"]) == (3, 2, {"Rotate": 2, "ShearX": 1})
    assert a["rotate_range_deg"] == [44.0, 50.0] and a["rotate_range_median"] == 47.0
    assert (a["accuracy_min"], a["accuracy_median"]) == (0.75, 0.99)  # a broken trunk shows
    assert rows[1]["wins"] == {"none": 1} and math.isnan(rows[1]["rotate_range_median"])
    assert any("2 of 3" in line for line in S._table(rows))


def test_registered_experiment_writes_numbers_and_figure(tmp_path, monkeypatch):
    real = S.run_selection

    def small(config, progress=False, log=None):
        return real(tiny_config(seeds=1, settings=("T 1",), candidates=("magnitude decay",)), progress, log)

    monkeypatch.setattr(S, "run_selection", small)
    report = reproduce("selection", quick=True, out=tmp_path, progress=False)
    payload = json.loads((tmp_path / "selection" / "selection.json").read_text())
    runs = payload["numbers"]["runs"]
    assert len(runs) == 4 and {r["data"] for r in runs} == {"sprites", "glyphs"}
    for r in runs:
        assert r["winner"] in ("none", "TranslateX", "TranslateY", "Rotate", "ShearX", "ShearY")
        assert r["winner"] == "none" or r["winner_weight"] >= S.SELECTED
        assert 0 <= r["accuracy"] <= 1 and len(r["policy"]) == 5
    assert "magnitude decay" in report.verdict and "Rotate wins" in report.verdict
    pytest.importorskip("matplotlib")
    assert (tmp_path / "selection" / "selection.png").exists()


def test_presets_say_what_the_paper_and_its_code_use():
    official = DemoConfig.preset("official")
    assert (official.temperature, official.lr, official.aug_lr) == (0.01, 5e-4, None)
    assert (official.weight_decay, official.aug_weight_decay, official.width) == (1.0, 1.0, 32)
    paper = DemoConfig.preset("paper")
    assert (paper.n_train, paper.n_test, paper.epochs, paper.init_magnitude) == (10_000, 5_000, 20, 0.125)
    assert DemoConfig.preset("augnet", epochs=3).epochs == 3
    # augnet's selection decays the magnitudes alone; the paper's text and code decay them with the rest.
    assert DemoConfig().magnitude_weight_decay == DemoConfig.preset("augnet").magnitude_weight_decay == 1.0
    assert paper.magnitude_weight_decay is None and official.magnitude_weight_decay is None
    # The selection experiment's settings are the paper's method; its candidate is the demo's default.
    config = tiny_config()
    assert config.demo_config("sprites", "setting", "T 1", 0).magnitude_weight_decay is None
    assert config.demo_config("sprites", "candidate", "magnitude decay", 0).magnitude_weight_decay == 1.0
    assert set(PRESETS) == {"augnet", "official", "paper"}
    with pytest.raises(ValueError, match="unknown preset"):
        DemoConfig.preset("fast")


@pytest.mark.parametrize(
    "field, value, match",
    [
        ("data", "mnist", "data must be one of"),
        ("trunk", "resnet", "trunk must be one of"),
        ("transforms", ("Rotate", "Twist"), "unknown transforms"),
        ("calibrate", "output", "calibrate must be one of"),
        ("warmup_epochs", -1, "warmup_epochs"),
        ("anneal_to", 0.0, "anneal_to"),
    ],
)
def test_demo_config_is_checked_before_any_work(field, value, match):
    with pytest.raises(ValueError, match=match):
        run_demo(DemoConfig(**{field: value}), progress=False)


def test_the_paper_trunk_and_calibration_in_the_demo_model():
    import torch

    from augnet.data import rotated_sprites
    from augnet.experiments.trunks import PaperCNN

    x, _ = rotated_sprites(32)
    model = build_model(DemoConfig(width=4, calibrate="trunk"), x)
    assert isinstance(model.trunk, PaperCNN) and model.trunk.training  # back in training mode
    layer = model.augment.layers[0]
    assert layer.calibration is not None and float(layer.magnitude_caps.max()) == 1.0
    convs = [m for m in model.trunk.modules() if isinstance(m, torch.nn.Conv2d)]
    assert [c.out_channels for c in convs] == [4, 8, 16, 32]  # c, 2c, 4c, 8c
    with pytest.raises(ValueError, match="needs the training images"):
        build_model(DemoConfig(calibrate="input"))
