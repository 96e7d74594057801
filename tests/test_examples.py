"""The examples that are not run elsewhere: the CIFAR-10 recipe on torchvision's FakeData (no download)."""

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
