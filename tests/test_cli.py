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
    layer = result["policy"][0]
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
    assert [e["transform"] for e in result["policy"][0]] == ["Rotate", "Scale"]


def test_bad_arguments(capsys):
    assert main(["demo", "--epochs", "0"]) == 2
    assert "--epochs must be >= 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["demo", "--transforms", "Hue"])  # needs RGB; not offered for the grey demo
    with pytest.raises(SystemExit):
        main([])


def test_entry_point_runs_as_a_module():
    proc = subprocess.run([sys.executable, "-m", "augnet.cli", "demo", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "--quick" in proc.stdout
