"""Examples not run elsewhere: the CIFAR-10 recipe on FakeData (no download), the probe demo, the rotation ablation."""

import importlib.util
import json
from pathlib import Path

import pytest

import augnet

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cifar10_recipe_runs_a_few_steps_on_fake_data_and_saves_a_policy_file(tmp_path):
    cifar = load("cifar10")
    log = tmp_path / "log"
    argv = ["--fake", "--fake-size", "32", "--epochs", "1", "--batch", "16", "--width", "4", "--eval-copies", "2"]
    acc = cifar.main([*argv, "--log", str(log), "--tensorboard", "--device", "cpu"])
    assert 0.0 <= acc <= 1.0
    policy = json.loads((log / "policy.json").read_text())
    module = augnet.AugmentationModule.from_policy(policy)  # the saved policy rebuilds the module
    assert [len(layer.transforms) for layer in module.layers] == [5, 5, 4]
    rows = (log / "policy.csv").read_text().splitlines()
    assert rows[0].startswith("step,epoch,task_loss,loss,lambda,lr0") and len(rows) == 3  # header, steps 1 and 2
    assert any(p.name.startswith("events.out.tfevents") for p in log.iterdir())
    assert float(rows[1].split(",")[4]) == 0.5  # lambda 0.5 in the first 40 epochs (appendix A.3)


def test_cifar10_recipe_refuses_missing_data_instead_of_downloading(tmp_path):
    cifar = load("cifar10")
    with pytest.raises(SystemExit, match="no CIFAR-10 under"):
        cifar.main(["--data", str(tmp_path / "nothing"), "--epochs", "1"])
    assert not any((tmp_path / "nothing").glob("*.tar.gz"))  # nothing was fetched


def test_probe_demo_probes_the_demos_model_on_its_own_task():
    from augnet.experiments.demo import DemoConfig

    probe_demo = load("probe_demo")
    config = DemoConfig(epochs=1, n_train=64, n_test=32, width=2, threads=2)
    rows = probe_demo.main(config, n_probe=16)
    names = [row[0] for row in rows]
    assert len(rows) == 8 and len(set(names)) == 2  # the selected transform and one other, 4 magnitudes each
    for _, magnitude, _, shared, independent, trunk in rows:
        if magnitude == 0.0:
            assert shared == pytest.approx(1.0)  # identical passes: exactly invariant
            assert trunk == pytest.approx(1.0)
        assert -1.0 <= independent <= 1.0


def test_rotation_ablation_prints_every_run_and_writes_its_figures(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from augnet.experiments.rotation import LABELS, RotationConfig, run_rotation

    ablation = load("rotation_ablation")
    config = RotationConfig(n_train=48, n_test=32, epochs=1, batch_size=8, n_probe=16, width=2, threads=2)
    result = run_rotation(config)
    ablation.show(result, tmp_path)
    printed = capsys.readouterr().out
    assert all(LABELS[name] in printed for name in result.runs)
    assert "rotate       width" in printed  # Augerino's generators, with their widths
    assert (tmp_path / "rotation_range.png").exists() and (tmp_path / "rotation_policy_augnet.png").exists()
