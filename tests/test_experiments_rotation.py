"""`augnet reproduce rotation`: AugNet, Augerino and two ablations on the rotated sprites (paper Fig. 3a, 4)."""

import json
import math

import pytest
import torch

import augnet.experiments.rotation as R
from augnet.data import rotated_sprites
from augnet.experiments import reproduce
from augnet.experiments._registry import names


def tiny(**kwargs):
    fields = dict(n_train=48, n_test=32, epochs=1, batch_size=8, n_probe=16, width=2, threads=2)
    return R.RotationConfig(**{**fields, **kwargs})


def test_registered_run_writes_numbers_and_figures(tmp_path, monkeypatch):
    assert "rotation" in names()
    monkeypatch.setattr(R, "quick_config", lambda seed=0: tiny(seed=seed))
    report = reproduce("rotation", quick=True, out=tmp_path, progress=False)
    payload = json.loads((tmp_path / "rotation" / "rotation.json").read_text())
    runs = payload["numbers"]["runs"]
    assert list(runs) == ["augnet", "augerino", "augnet_none", "augnet_augerino_reg", "augerino_lam_augnet", "plain"]
    for name in ("augnet", "augnet_none", "augnet_augerino_reg"):
        history = runs[name]["history"]
        assert history["step"] == [1, 5]  # recorded at the first step and every 5th (6 batches here)
        assert len(history["weights"][0][0]) == 5 and len(history["rotation_deg"]) == 2
        # Rotate's magnitude, initialised at 1/8, is recorded in degrees (x 180).
        assert history["rotation_deg"][0] == pytest.approx(22.5, abs=1.0)
        assert runs[name]["selected"]["transform"] in ("TranslateX", "TranslateY", "Rotate", "ShearX", "ShearY")
    for name in ("augerino", "augerino_lam_augnet"):
        history = runs[name]["history"]
        assert len(history["widths"][0]) == 6
        assert history["rotation_deg"][0] == pytest.approx(22.5, abs=1.0)  # width pi/8
    assert "history" not in runs["plain"] and runs["plain"]["rotation_deg"] is None
    for run in runs.values():
        assert -1.5 <= run["invariance_rotate_45deg_median"] <= 1.0
        assert run["invariance_curve"]["range_deg"] == pytest.approx([45.0, 90.0, 180.0])
    assert "Augerino (paper settings) (lr 0.01, lambda 0.05)" in report.verdict
    assert "Augerino, AugNet's lambda (lr 0.01, lambda 0.5)" in report.verdict
    assert report.verdict.count("\n") == 6  # a header, then one line per model
    if report.figures:  # matplotlib present
        assert sorted(p.name for p in report.figures) == sorted(
            [
                "rotation_range.png",
                "rotation_policy_augnet.png",
                "rotation_policy_augnet_none.png",
                "rotation_policy_augnet_augerino_reg.png",
                "rotation_invariance.png",
            ]
        )
        assert all(p.exists() for p in report.figures)


def test_augerino_probe_pairs_its_draws():
    """The same draws in the clean and the rotated pass: rotating by 0 degrees scores 1."""
    config = tiny(variants=("augerino",), plain=False)
    run = R.run_augerino(config)
    assert run.policy[0][list(R.LIE_GENERATORS).index("rotate")]["range"][2] == "deg"
    x, _ = rotated_sprites(16, seed=3)
    config.probe_magnitudes = (0.0, 0.25)
    curve = R.rotation_invariance(run, x, config)
    torch.testing.assert_close(curve["scores"][0], torch.ones(16, dtype=torch.float64), atol=1e-6, rtol=0)
    assert curve["summary"][1]["median"] < 1.0
    # Augerino is an AugNet: probed directly, the probe seeds its draws as for any AugNet (no wrapper needed).
    bare = R.probes.invariance_curve(run.model.eval(), x, R.T.Rotate(), [0.0], seed=0, copies=config.eval_copies)
    torch.testing.assert_close(bare["scores"][0], torch.ones(16, dtype=torch.float64), atol=1e-6, rtol=0)


def test_settings_and_bad_variants():
    config = R.RotationConfig()
    demo = config.demo_config("augerino")
    assert (demo.n_train, demo.epochs, demo.lr, demo.aug_lr, demo.lam) == (4000, 20, 5e-4, 5e-3, 0.5)
    assert demo.regularizer == "augerino" and demo.init_magnitude == 0.125
    assert (demo.data, demo.trunk, demo.width) == ("sprites", "paper", 8)  # the demo's data and trunk
    glyphs = R.RotationConfig(data="glyphs", size=28, trunk="small", width=16).demo_config()
    assert (glyphs.data, glyphs.size, glyphs.trunk) == ("glyphs", 28, "small")
    assert math.degrees(config.augerino_init_width) == pytest.approx(22.5)
    with pytest.raises(ValueError, match="unknown rotation variants"):
        R.run_rotation(tiny(variants=("augnet", "mario")))


@pytest.mark.slow
def test_quick_run_claims(tmp_path):
    """What the quick run (10 epochs of 2000 images, about 2 minutes on 2 cores) supports; seeds 0 to 2 checked."""
    report = reproduce("rotation", quick=True, out=tmp_path, progress=False)
    check_quick_claims(report.numbers["runs"])
    assert len(report.figures) in (0, 5)


def check_quick_claims(runs):
    start = 22.5  # every rotation range starts at ±22.5 degrees (magnitude 1/8, width pi/8)
    for run in runs.values():
        assert run["test_accuracy"] > 0.98
        # The data hold every rotation within ±45 degrees: every model, the plain CNN included, is nearly invariant.
        assert run["invariance_rotate_45deg_median"] > 0.95
    # The demo's AugNet (augnet's selection): Rotate takes the top weight and its range grows towards the data's
    # ±45 degrees; every other transform keeps less than half of Rotate's weight.
    augnet = runs["augnet"]
    assert augnet["selected"]["transform"] == "Rotate" and augnet["selected"]["weight"] > 0.4
    assert start + 5 < augnet["rotation_deg"] < 60
    others = [e["weight"] for e in augnet["policy"][0] if e["transform"] != "Rotate"]
    assert max(others) < augnet["selected"]["weight"] / 2
    # No regulariser (the paper's method): nothing is selected, no magnitude reaches 0.5, Rotate's range does not grow.
    none = runs["augnet_none"]
    assert max(e["weight"] for e in none["policy"][0]) < 0.3
    assert max(e["magnitude"] for e in none["policy"][0]) < 0.5
    assert none["rotation_deg"] < start + 1
    # Augerino's regulariser on AugNet: it pushes up the magnitudes whatever their weights (three or more
    # transforms above 0.85), Rotate's included although its weight stays low.
    reg = runs["augnet_augerino_reg"]
    assert sum(e["magnitude"] > 0.85 for e in reg["policy"][0]) >= 3
    assert reg["rotation_deg"] > start + 20 and reg["rotate"]["weight"] < 0.2
    # Augerino: its rotation width grows far less with the paper's lambda (0.05) than with AugNet's (0.5).
    assert runs["augerino_lam_augnet"]["rotation_deg"] > start + 20
    assert runs["augerino"]["rotation_deg"] < runs["augerino_lam_augnet"]["rotation_deg"] - 20
