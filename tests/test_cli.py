"""The command line: augnet demo, and the one convention of every option that takes several values."""

import json
import subprocess
import sys
import warnings
from pathlib import Path

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


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc, where nothing can be created")
def test_an_output_folder_that_cannot_be_made_is_refused_before_any_work(capsys):
    # os.access says /proc is writable to root; only trying to write there shows that it is not.
    for argv in (["demo", "--epochs", "1"], ["bench", "--quick"]):
        assert main([*argv, "--out", "/proc/augnet-out"]) == 2
        assert "cannot create the output folder --out /proc/augnet-out" in capsys.readouterr().err


def test_a_device_this_machine_lacks_is_refused_before_any_work(capsys, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the refusal concerns machines without one")
    for argv in (["demo", "--device", "cuda"], ["reproduce", "sinusoids", "--quick", "--device", "cuda"]):
        assert main([*argv, "--out", str(tmp_path)]) == 2
        assert "CUDA is not available" in capsys.readouterr().err
    assert main(["demo", "--device", "toaster", "--out", str(tmp_path)]) == 2
    assert "not a device" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("command", "seed", "top"),
    [("demo", "99999999999999999999999", "2**64 - 3"), ("demo", "-1", "2**64 - 3"),
     ("demo", str(2**64 - 2), "2**64 - 3"), ("probe", "-1", "2**63 - 3"), ("probe", str(2**63 - 2), "2**63 - 3")],
)  # fmt: skip
def test_a_seed_out_of_range_is_one_line_before_any_work(capsys, tmp_path, monkeypatch, command, seed, top):
    # No header, no traceback, exit 2. The demo seeds torch (which takes seeds below 2**64) with seed + 2 at most;
    # the probes' seed + 2 seeds a generator of theirs, below 2**63.
    import augnet.cli

    for name in ("_demo", "_probe"):  # were the seed let through, nothing would be trained or probed here
        monkeypatch.setattr(augnet.cli, name, lambda args: pytest.fail(f"augnet {args.command} ran"))
    out = tmp_path / "out"
    argv = {"demo": ["demo", "--epochs", "1"], "probe": ["probe", "--model", "m:f", "--fake", "--transforms", "Rotate"]}
    assert main([*argv[command], "--seed", seed, "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and not out.exists()
    assert captured.err == f"augnet {command}: error: --seed must be in [0, {top}], got {seed}\n"


def test_the_largest_demo_seed_reaches_the_demo(tmp_path, monkeypatch):
    import augnet.cli

    ran = []
    monkeypatch.setattr(augnet.cli, "_demo", lambda args: ran.append(args.seed) or 0)
    assert main(["demo", "--epochs", "1", "--seed", str(2**64 - 3), "--out", str(tmp_path / "out")]) == 0
    assert ran == [2**64 - 3]


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


# ------------------------------------------------------------------------------- lists of values


def _subcommands(parser):
    import argparse

    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


#: Every option of ``augnet`` that takes several values, with two values it accepts and the arguments its
#: subcommand needs besides. A new list option must be added here (the test below finds every one).
LIST_OPTIONS = {
    ("demo", "--transforms"): (["Rotate", "Scale"], []),
    ("bench", "--sizes"): (["32", "128"], []),
    ("bench", "--providers"): (["eager", "reference"], []),
    ("probe", "--transforms"): (["Rotate", "HorizontalFlip"], ["--model", "m:f", "--fake"]),
    ("probe", "--layers"): (["layer4", "fc"], ["--model", "m:f", "--fake", "--transforms", "Rotate"]),
    ("probe", "--magnitudes"): (["0.5", "1"], ["--model", "m:f", "--fake", "--transforms", "Rotate"]),
}


def test_every_list_option_takes_space_separated_values():
    from augnet.cli import build_parser

    found = set()
    for command, sub in _subcommands(build_parser()).items():
        for action in sub._actions:
            if action.nargs in ("+", "*") or (isinstance(action.nargs, int) and action.nargs > 1):
                found.add((command, action.option_strings[-1]))
            assert "comma" not in (action.help or ""), f"augnet {command} {action.option_strings}: {action.help}"
            assert not (isinstance(action.default, str) and "," in action.default), (command, action.dest)
    assert found == set(LIST_OPTIONS)
    for (command, option), (values, needed) in LIST_OPTIONS.items():
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the space-separated form is the documented one: no warning
            args = build_parser().parse_args([command, *needed, option, *values, "--out", "o"])
        got = getattr(args, option.lstrip("-").replace("-", "_"))
        assert [str(v) for v in got] == values, (command, option, got)


def test_probe_transforms_separated_by_spaces_or_by_commas_parse_the_same():
    from augnet.cli import build_parser

    base = ["probe", "--model", "torchvision.models:resnet18", "--fake"]
    spaced = build_parser().parse_args([*base, "--transforms", "Rotate", "HorizontalFlip", "--magnitudes", "0.5", "1"])
    with pytest.warns(DeprecationWarning, match="separate them with spaces: --transforms Rotate HorizontalFlip"):
        commas = build_parser().parse_args([*base, "--transforms", "Rotate,HorizontalFlip"])
    with pytest.warns(DeprecationWarning, match="separate them with spaces: --magnitudes 0.5 1"):
        build_parser().parse_args([*base, "--transforms", "Rotate", "--magnitudes", "0.5,1"])
    with pytest.warns(DeprecationWarning, match="--layers layer4 fc"):
        layers = build_parser().parse_args([*base, "--transforms", "Rotate", "--layers", "layer4,", "fc"]).layers
    assert commas.transforms == spaced.transforms == ["Rotate", "HorizontalFlip"]
    assert spaced.magnitudes == ["0.5", "1"] and layers == ["layer4", "fc"]
    defaults = build_parser().parse_args([*base, "--transforms", "Rotate"])
    assert (defaults.layers, defaults.magnitudes) == (["auto"], ["0.25", "0.5", "1"])


def test_the_comma_form_warns_on_the_command_line(tmp_path):
    """Run as a command, the deprecation is printed (Python would hide it), and the run goes on as before."""
    argv = ["--model", "no_module_here", "--fake", "--transforms", "Rotate,HorizontalFlip", "--out", str(tmp_path)]
    proc = subprocess.run([sys.executable, "-m", "augnet", "probe", *argv], capture_output=True, text=True)
    assert proc.returncode == 2  # refused for its --model, after the lists were read
    assert "DeprecationWarning" in proc.stderr and "--transforms Rotate HorizontalFlip" in proc.stderr
    assert "--model must be 'package.module:name'" in proc.stderr
    argv[argv.index("Rotate,HorizontalFlip")] = "Rotate"
    proc = subprocess.run([sys.executable, "-m", "augnet", "probe", *argv], capture_output=True, text=True)
    assert proc.returncode == 2 and "Warning" not in proc.stderr


def test_probe_list_options_refuse_bad_values_in_one_line(capsys, tmp_path):
    base = ["probe", "--model", "torch.nn:Identity", "--fake", "--out", str(tmp_path)]
    for extra, message in (
        (["--transforms", "Rotate", "--layers", "auto", "fc"], "--layers auto stands alone"),
        (["--transforms", "Rotate", "--magnitudes", "0.5", "big"], "--magnitudes must be numbers, got 0.5 big"),
        (["--transforms", "Rotate", "Spin"], "--transforms Spin: not augnet image transforms"),
        (["--transforms", "Rotate", "Rotate"], "--transforms names a transform more than once: Rotate Rotate"),
    ):
        assert main([*base, *extra]) == 2
        err = capsys.readouterr().err
        assert err.startswith("augnet probe: error:") and message in err and err.count("\n") == 1, err


def test_bench_model_says_which_options_it_does_not_use(capsys, tmp_path):
    assert main(["bench", "--model", "h200", "--batch", "256", "--copies", "8", "--out", str(tmp_path / "x")]) == 0
    err = capsys.readouterr().err
    assert "not used: --batch --copies --out" in err and not (tmp_path / "x").exists()
    assert main(["bench", "--model", "h200"]) == 0
    assert "not used" not in capsys.readouterr().err


def test_ctrl_c_in_reproduce_says_what_is_kept_and_exits_130(tmp_path, capsys, monkeypatch):
    # A long run stopped by Ctrl-C: one line naming the kept runs (the command resumes from them), no traceback.
    import augnet.experiments

    def interrupted(name, out, **kwargs):
        folder = Path(out) / name
        folder.mkdir(parents=True)
        (folder / "runs.jsonl").write_text("{}\n")
        raise KeyboardInterrupt

    monkeypatch.setattr(augnet.experiments, "reproduce", interrupted)
    assert main(["reproduce", "versus", "--quick", "--out", str(tmp_path)]) == 130
    err = capsys.readouterr().err
    assert "augnet reproduce: interrupted" in err and str(tmp_path / "versus" / "runs.jsonl") in err
    assert "Traceback" not in err


def test_ctrl_c_in_any_command_exits_130_without_a_traceback(tmp_path, capsys, monkeypatch):
    import augnet.cli

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(augnet.cli, "_demo", interrupted)  # the parser built by main() takes it
    assert main(["demo", "--quick", "--out", str(tmp_path)]) == 130
    assert capsys.readouterr().err.strip() == "augnet demo: interrupted"


def test_the_command_stopped_by_ctrl_c_ends_as_killed_by_it_so_a_shell_script_stops_too(tmp_path):
    # A program that catches SIGINT and exits 130 tells bash it handled it, and a script's loop carries on.
    import signal

    code = (
        "import sys, augnet.cli\n"
        "def interrupted(args):\n    raise KeyboardInterrupt\n"
        "augnet.cli._demo = interrupted\n"
        f"sys.argv = ['augnet', 'demo', '--quick', '--out', {str(tmp_path)!r}]\n"
        "augnet.cli.run()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGINT, (done.returncode, done.stderr[-2000:])
    assert done.stderr.strip().splitlines()[-1] == "augnet demo: interrupted"  # and no traceback
    assert "Traceback" not in done.stderr
