"""The command line: augnet demo."""

import json
import subprocess
import sys

import pytest

from augnet.cli import main


def test_quick_demo_writes_policy_json_and_plot(tmp_path, capsys):
    assert main(["demo", "--quick", "--no-progress", "--threads", "2", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "learned policy" in out and "Rotate" in out and "test accuracy" in out
    result = json.loads((tmp_path / "demo.json").read_text())
    assert result["policy"]["format"] == "augnet.policy"  # a policy file: AugmentationModule.from_policy reads it
    layer = result["policy"]["layers"][0]["transforms"]
    assert [e["transform"] for e in layer] == ["TranslateX", "TranslateY", "Rotate", "ShearX", "ShearY"]
    assert abs(sum(e["weight"] for e in layer) - 1) < 1e-5
    assert len(result["history"]["step"]) == len(result["history"]["weights"]) > 1
    png = (tmp_path / "policy.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_demo_with_chosen_transforms(tmp_path):
    argv = [
        "demo",
        "--quick",
        "--epochs",
        "1",
        "--no-progress",
        "--transforms",
        "Rotate",
        "Scale",
        "--out",
        str(tmp_path),
    ]
    assert main(argv) == 0
    result = json.loads((tmp_path / "demo.json").read_text())
    assert [e["transform"] for e in result["policy"]["layers"][0]["transforms"]] == ["Rotate", "Scale"]
    import augnet

    module = augnet.AugmentationModule.from_policy(tmp_path / "demo.json")  # demo.json holds a policy file
    assert [type(t).__name__ for t in module.layers[0].transforms] == ["Rotate", "Scale"]


def test_bad_arguments(capsys):
    assert main(["demo", "--epochs", "0"]) == 2
    assert "--epochs must be >= 1" in capsys.readouterr().err
    assert main(["demo", "--data", "glyphs", "--transforms", "Rotate", "Hue"]) == 2  # Hue needs RGB
    assert "--transforms Hue need RGB images" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["demo", "--transforms", "Solarise"])
    with pytest.raises(SystemExit):
        main(["demo", "--preset", "fastest"])
    with pytest.raises(SystemExit):
        main([])


def test_a_device_this_machine_lacks_is_refused_before_any_work(capsys, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the refusal concerns machines without one")
    for argv in (["demo", "--device", "cuda"], ["reproduce", "sinusoids", "--quick", "--device", "cuda"]):
        assert main([*argv, "--out", str(tmp_path)]) == 2
        assert "CUDA is not available" in capsys.readouterr().err
    assert main(["demo", "--device", "toaster", "--out", str(tmp_path)]) == 2
    assert "not a device" in capsys.readouterr().err


def test_demo_config_follows_preset_data_and_overrides():
    from augnet.cli import build_parser, demo_config

    args = build_parser().parse_args(["demo", "--preset", "official", "--data", "glyphs", "--epochs", "2"])
    config = demo_config(args)
    assert (config.temperature, config.weight_decay, config.aug_lr) == (0.01, 1.0, None)
    assert (config.data, config.size, config.epochs) == ("glyphs", 28, 2)
    default = demo_config(build_parser().parse_args(["demo"]))
    assert (default.data, default.size, default.device) == ("sprites", 32, "cpu")


def test_entry_point_runs_as_a_module():
    proc = subprocess.run([sys.executable, "-m", "augnet.cli", "demo", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "--quick" in proc.stdout
