"""The command line as a user at a shell meets it: bad values, existing folders, pipes, strict output files."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from augnet.cli import main


def _strict_json(path: Path):
    def refuse(token):
        raise ValueError(f"{path} holds a bare {token}")

    return json.loads(path.read_text(), parse_constant=refuse)


def _must_not_run(monkeypatch, *names):
    import augnet.cli

    for name in names:
        monkeypatch.setattr(augnet.cli, name, lambda args: pytest.fail(f"augnet {args.command} ran"))


@pytest.mark.parametrize("command", [["demo"], ["bench"], ["reproduce", "rotation"],
                                     ["probe", "--model", "m:f", "--fake", "--transforms", "Rotate"]])  # fmt: skip
def test_a_thread_count_torch_cannot_take_is_one_line_before_any_work(command, tmp_path, capsys, monkeypatch):
    # torch.set_num_threads(99999999999) raised "Overflow when unpacking long" (a traceback from augnet probe), and
    # a count it takes but cannot start (2**31 - 1) ended the process in libgomp's "Out of memory".
    _must_not_run(monkeypatch, "_demo", "_bench", "_reproduce", "_probe")
    for threads in ("99999999999", str(2**31 - 1)):
        assert main([*command, "--threads", threads, "--out", str(tmp_path)]) == 2
        err = capsys.readouterr().err
        assert "--threads must be" in err and threads in err and len(err.strip().splitlines()) == 1


def test_demo_refuses_a_transform_named_twice(tmp_path, capsys, monkeypatch):
    # It trained two identical Rotate candidates and printed a policy of two "Rotate" rows.
    _must_not_run(monkeypatch, "_demo")
    assert main(["demo", "--transforms", "Rotate", "Rotate", "--out", str(tmp_path)]) == 2
    assert "--transforms names a transform more than once: Rotate Rotate" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, blocked",
    [
        (["demo", "--quick"], "demo.json"),
        (["demo"], "policy.png"),
        (["bench", "--quick"], "tap_mix_cpu_quick.json"),
        (["bench"], "tap_mix_cpu.png"),
        (["bench", "--quick"], "inference_cpu_quick.json"),
    ],
)
def test_a_result_file_that_is_a_directory_is_refused_before_any_work(argv, blocked, tmp_path, capsys, monkeypatch):
    # The demo trained, the benchmark timed, then the write ended in an IsADirectoryError traceback: the work lost.
    _must_not_run(monkeypatch, "_demo", "_bench")
    (tmp_path / blocked).mkdir()
    assert main([*argv, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / blocked} is an existing directory" in err and len(err.strip().splitlines()) == 1


def test_bench_no_inference_does_not_need_the_inference_file(tmp_path, monkeypatch):
    import augnet.cli

    (tmp_path / "inference_cpu_quick.json").mkdir()
    monkeypatch.setattr(augnet.cli, "_bench", lambda args: 0)
    assert main(["bench", "--quick", "--no-inference", "--out", str(tmp_path)]) == 0


@pytest.mark.parametrize("argv", [["bench", "--quick", "--no-inference", "--providers", "reference", "--sizes",
                                   str(2**31)],
                                  ["probe", "--model", "torch.nn:Identity", "--fake", "--n", "8", "--size", str(2**31),
                                   "--transforms", "Rotate"]])  # fmt: skip
def test_settings_too_large_for_memory_end_in_one_line(argv, tmp_path, capsys):
    # torch's "can't allocate memory" / "Storage size calculation overflowed" came as a traceback.
    assert main([*argv, "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"augnet {argv[0]}: error: not enough memory") and len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_bench_help_gives_the_inference_costs_real_defaults(capsys):
    # --batch said "(default: 64; the inference's too)": the inference cost ran at 16 (C 1 4 10 20) unless given.
    import inspect

    from augnet.bench.inference import inference_cost

    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    defaults = inspect.signature(inference_cost).parameters
    assert f"its own: {defaults['batch'].default}" in text
    assert f"else {' '.join(map(str, defaults['copies'].default))}" in text
    assert "seed of the images and of the check draw (default: 0)" in text


def test_bench_table_columns_line_up(tmp_path, capsys):
    from augnet.bench.report import format_table

    records = [dict(provider="cpp", size=8, mode=mode, median_ms=1.0, images_per_s=10.0, peak_mib=0.1,
                    speedup_vs_eager=1.0, speedup_vs_reference=None)
               for mode in ("forward", "forward+backward+dx")]  # fmt: skip
    lines = format_table({"records": records}).splitlines()
    assert len({len(line) for line in lines}) == 1, lines  # the longest mode pushed its row's columns right


def test_demo_json_is_strict_with_a_nan(tmp_path, monkeypatch, capsys):
    # A diverged training (NaN history, NaN accuracy) wrote bare NaN tokens.
    import augnet.experiments.demo as demo

    class Result:
        policy, test_accuracy, seconds, history, names = "policy", math.nan, 1.0, {"loss": [math.nan]}, ["Rotate"]

        def to_json(self):
            return {"test_accuracy": self.test_accuracy, "history": self.history}

    monkeypatch.setattr(demo, "run_demo", lambda config, progress: Result())
    monkeypatch.setattr("augnet.viz.plot_policy_history", lambda *a, **k: (_ for _ in ()).throw(ImportError("no")))
    assert main(["demo", "--quick", "--no-progress", "--out", str(tmp_path)]) == 0
    assert _strict_json(tmp_path / "demo.json")["test_accuracy"] is None


def test_bench_json_is_strict_with_a_nan(tmp_path, monkeypatch):
    # A backend whose output is NaN (what the check against the reference is for) wrote a bare NaN token.
    import augnet.bench.report as report

    result = {"config": {"device": "cpu"}, "records": [{"max_abs_diff_vs_reference": math.nan}]}
    monkeypatch.setattr(report, "plot_results", lambda *a: (_ for _ in ()).throw(ImportError("no")))
    json_path, _, _ = report.save_results(result, tmp_path)
    assert _strict_json(json_path)["records"][0]["max_abs_diff_vs_reference"] is None


def _augnet(*argv, tmp_path, stdout=subprocess.PIPE):
    """``augnet ARGV`` run in ``tmp_path / "here"`` as its console script runs: a script whose own folder, not the
    working directory, is on ``sys.path``."""
    script, cwd = tmp_path / "bin" / "augnet_script.py", tmp_path / "here"
    script.parent.mkdir(exist_ok=True)
    cwd.mkdir(exist_ok=True)
    script.write_text("import sys\nfrom augnet.cli import run\nsys.exit(run())\n")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, str(script), *argv], cwd=cwd, env=env, stdout=stdout,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip


def test_output_piped_into_a_reader_that_has_gone_is_no_traceback(tmp_path):
    # `augnet bench --model h100 | head -1` ended in a BrokenPipeError traceback.
    read, write = os.pipe()
    os.close(read)  # the reader has gone before the first line: every write to the pipe fails
    with os.fdopen(write, "w") as pipe:
        proc = _augnet("bench", "--model", "h100", tmp_path=tmp_path, stdout=pipe)
    _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert proc.returncode == 0


def test_probe_imports_a_model_module_of_the_current_folder(tmp_path):
    # `python -m augnet probe --model mynet:Net` found ./mynet.py, the `augnet` command (run here as the entry
    # point's script is, its own folder first on sys.path) did not: "cannot import 'mynet'".
    (tmp_path / "here").mkdir()
    (tmp_path / "here" / "mynet_rel.py").write_text(
        "import torch.nn as nn\n"
        "def Net():\n"
        "    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 2))\n"
    )
    proc = _augnet("probe", "--model", "mynet_rel:Net", "--fake", "--n", "8", "--size", "8", "--transforms", "Rotate",
                   "--no-lie", "--no-progress", "--out", "out dir ü", tmp_path=tmp_path)  # fmt: skip
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert _strict_json(tmp_path / "here" / "out dir ü" / "probe.json")
