"""The command line as a new user meets it: reruns that replace results say so, Ctrl-C before a command starts is one
line, and what ``--help`` gives as defaults is what the commands run with."""

import argparse
import json
import re
from pathlib import Path

import pytest

import augnet.cli
from augnet.cli import main


def _notices(err: str, command: str) -> list[str]:
    said = [line for line in err.splitlines() if line.startswith(f"augnet {command}:")]
    return [line for line in said if "replacing" in line or "removing" in line]


def _names_exactly(line: str, folder: Path, existed: set[str], candidates: set[str]) -> None:
    """``line`` names the folder and each file of ``existed``, and no other of ``candidates``."""
    assert str(folder) in line, line
    for name in candidates:
        named = re.search(rf"(?<![\w.]){re.escape(name)}(?![\w.])", line) is not None
        assert named == (name in existed), (name, line)


# ------------------------------------------------------------------------------- replaced results


def test_a_demo_rerun_names_on_stderr_each_result_it_replaces_and_still_replaces_it(tmp_path, monkeypatch, capsys):
    import augnet.experiments.demo as demo
    import augnet.viz

    runs = []

    class Result:
        policy, test_accuracy, seconds, history, names = "policy", 0.5, 1.0, {"loss": [1.0]}, ["Rotate"]

        def to_json(self):
            return {"run": len(runs)}

    def fake_run(config, progress):
        runs.append(config)
        return Result()

    def plot(history, names, path, title=None):
        if len(runs) == 1:
            raise ImportError("no matplotlib")  # the first run writes demo.json only
        Path(path).write_bytes(b"png %d" % len(runs))
        return Path(path)

    monkeypatch.setattr(demo, "run_demo", fake_run)
    monkeypatch.setattr(augnet.viz, "plot_policy_history", plot)
    out, candidates = tmp_path / "out", {"demo.json", "policy.png"}
    argv = ["demo", "--quick", "--no-progress", "--out", str(out)]
    for run in (1, 2, 3):
        existed = {p.name for p in out.iterdir()} if out.exists() else set()
        assert main(argv) == 0
        err = capsys.readouterr().err
        notices = _notices(err, "demo")
        if not existed:  # a first run into a new folder: nothing to say
            assert notices == [], err
        else:
            assert len(notices) == 1 and err.count("\n") == 1, err  # one line, and nothing else on stderr
            _names_exactly(notices[0], out, existed, candidates)
        assert json.loads((out / "demo.json").read_text()) == {"run": run}  # overwritten as before


def test_a_probe_rerun_names_what_it_replaces_and_the_unit_files_it_removes(tmp_path, monkeypatch, capsys):
    (tmp_path / "polish_tiny_net.py").write_text(
        "from torch import nn\n\n\n"
        "def make():\n"
        "    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),\n"
        "                         nn.Linear(4, 2))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "out"
    argv = ["probe", "--model", "polish_tiny_net:make", "--fake", "--n", "8", "--size", "8", "--transforms", "Rotate",
            "--magnitudes", "1", "--no-lie", "--no-progress", "--layers", "logits", "--out", str(out)]  # fmt: skip
    candidates = {"probe.json", "probe.csv", "verdict.txt", "heatmap.png", "probe.units.json", "units.png"}
    assert main([*argv, "--per-unit"]) == 0
    assert _notices(capsys.readouterr().err, "probe") == []
    existed = {p.name for p in out.iterdir()}
    assert {"probe.json", "probe.units.json"} <= existed
    assert main(argv) == 0  # without --per-unit: the earlier unit files are removed, the rest replaced
    notices = _notices(capsys.readouterr().err, "probe")
    assert len(notices) == 1
    _names_exactly(notices[0], out, existed, candidates)
    replacing, removing = notices[0].split("removing")
    assert "probe.units.json" in removing and "probe.units.json" not in replacing
    assert "probe.json" in replacing and "probe.json" not in removing.replace("probe.units.json", "")
    assert not (out / "probe.units.json").exists()


def test_a_bench_rerun_names_only_the_files_that_existed(tmp_path, monkeypatch, capsys):
    import augnet.bench

    def fake_bench(args):  # writes the timing JSON only: no plot, no inference cost
        path = Path(args.out) / "tap_mix_cpu_quick.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}")
        return 0

    monkeypatch.setattr(augnet.bench, "run_from_args", fake_bench)
    out = tmp_path / "out"
    argv = ["bench", "--quick", "--out", str(out)]
    assert main(argv) == 0
    assert _notices(capsys.readouterr().err, "bench") == []
    assert main(argv) == 0
    notices = _notices(capsys.readouterr().err, "bench")
    assert len(notices) == 1
    candidates = {"tap_mix_cpu_quick.json", "tap_mix_cpu_quick.png", "inference_cpu_quick.json",
                  "tap_mix_cpu_quick.json.tmp"}  # fmt: skip
    _names_exactly(notices[0], out, {"tap_mix_cpu_quick.json"}, candidates)
    assert main(["bench", "--out", str(out)]) == 0  # a full run's files are other files: nothing replaced
    assert _notices(capsys.readouterr().err, "bench") == []


def test_a_reproduce_rerun_names_the_summary_it_replaces_not_the_runs_it_resumes_from(tmp_path, monkeypatch, capsys):
    import augnet.experiments

    def fake_reproduce(name, out, **kwargs):
        folder = Path(out) / name
        folder.mkdir(parents=True, exist_ok=True)
        for file in (f"{name}.json", "verdict.txt", "rotation_range.png", "runs.jsonl"):
            (folder / file).write_text("x")
        return augnet.experiments.Report(name, "verdict", {}, [folder / "rotation_range.png"])

    monkeypatch.setattr(augnet.experiments, "reproduce", fake_reproduce)
    argv = ["reproduce", "rotation", "--quick", "--no-progress", "--out", str(tmp_path)]
    assert main(argv) == 0
    assert _notices(capsys.readouterr().err, "reproduce") == []
    assert main(argv) == 0
    notices = _notices(capsys.readouterr().err, "reproduce")
    assert len(notices) == 1
    _names_exactly(notices[0], tmp_path / "rotation", {"rotation.json", "verdict.txt"},
                   {"rotation.json", "verdict.txt", "runs.jsonl"})  # fmt: skip
    assert "figures" in notices[0]


def _refused_before_the_notice(err: str, command: str, flag: str) -> None:
    """``err`` is one error line of ``command`` that names ``flag``, and no notice of replaced results."""
    assert err.count("\n") == 1 and err.startswith(f"augnet {command}: error: "), err
    assert flag in err and _notices(err, command) == [] and "replacing" not in err, err


def _earlier_results(folder: Path, names) -> dict[str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_text(f"earlier {name}")
    return {p.name: p.read_text() for p in folder.iterdir() if p.is_file()}


def _kept(folder: Path, before: dict[str, str]) -> None:
    assert {p.name: p.read_text() for p in folder.iterdir() if p.is_file()} == before


def _no_cuda(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def _no_kornia(monkeypatch):
    import augnet.bench.harness

    monkeypatch.setattr(augnet.bench.harness, "_has_kornia", lambda: False)


@pytest.mark.parametrize(
    "extra, said, setup",
    [
        (["--seed", "-1"], ("--seed", "got -1"), None),
        (["--seed", str(2**63)], ("--seed", f"got {2**63}"), None),  # torch's generators: below 2**63 as BenchConfig
        (["--providers", "reference", "no-such-backend"], ("--providers no-such-backend:", "unknown"), None),
        (["--providers", "eager"], ("--providers eager", "kornia"), _no_kornia),
        (["--device", "cuda"], ("--device cuda:", "CUDA"), _no_cuda),  # a machine without CUDA
    ],
)
def test_a_refused_bench_run_says_nothing_of_replacing_and_keeps_the_results(extra, said, setup, tmp_path,
                                                                             monkeypatch, capsys):  # fmt: skip
    # The device, the providers and the seed were refused by the run itself, after the notice of what it replaces
    # (a rerun refused said it was replacing results it then left), and the seed's message named no flag.
    import augnet.bench

    if setup is not None:
        setup(monkeypatch)
    monkeypatch.setattr(augnet.bench, "run_from_args", lambda args: pytest.fail("augnet bench ran"))
    out = tmp_path / "out"
    before = _earlier_results(out, ["tap_mix_cpu_quick.json", "tap_mix_cuda_quick.json", "inference_cpu_quick.json"])
    assert main(["bench", "--quick", *extra, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    _refused_before_the_notice(err, "bench", said[0])
    assert all(part in err for part in said), err
    _kept(out, before)


def _versus_runs(folder: Path, quick: bool) -> dict[str, str]:
    folder.mkdir(parents=True)
    records = [{"key": f"run {i}", "kind": "run", "quick": quick} for i in range(2)]
    (folder / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return _earlier_results(folder, ["versus.json", "verdict.txt", "table.md", "accuracy.png"])


@pytest.mark.parametrize("quick", [True, False])
def test_versus_into_the_folder_of_the_other_kind_of_run_is_refused_before_the_notice(quick, tmp_path, monkeypatch,
                                                                                    capsys):  # fmt: skip
    # `augnet reproduce versus --quick` into a full run's folder (or the reverse) said it was replacing its
    # summary, then refused in the experiment.
    import augnet.experiments

    monkeypatch.setattr(augnet.experiments, "reproduce", lambda *a, **k: pytest.fail("the experiment ran"))
    folder = tmp_path / "versus"
    before = _versus_runs(folder, quick=not quick)
    argv = ["reproduce", "versus", *(["--quick"] if quick else []), "--no-progress", "--out", str(tmp_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    _refused_before_the_notice(err, "reproduce", "--out")
    assert str(folder / "runs.jsonl") in err and ("--quick run would" if quick else "--quick run(s)") in err
    _kept(folder, before)


def test_versus_into_the_folder_of_its_own_kind_of_run_goes_on(tmp_path, monkeypatch, capsys):
    import augnet.experiments
    from augnet.experiments import SetupError, versus

    ran = []
    monkeypatch.setattr(augnet.experiments, "reproduce",
                        lambda name, out, **kwargs: ran.append(kwargs["quick"]) or augnet.experiments.Report(
                            name, "verdict", {}, []))  # fmt: skip
    _versus_runs(tmp_path / "versus", quick=True)
    assert main(["reproduce", "versus", "--quick", "--no-progress", "--out", str(tmp_path)]) == 0
    assert ran == [True] and len(_notices(capsys.readouterr().err, "reproduce")) == 1  # replaces its summary
    # The check is the experiment's own: what run_versus refuses, in its words.
    versus.check_runs_folder(tmp_path / "versus", quick=True)
    versus.check_runs_folder(tmp_path / "nothing here", quick=False)
    with pytest.raises(SetupError, match=r"holds 2 --quick run\(s\); a full run would take them"):
        versus.check_runs_folder(tmp_path / "versus", quick=False)


_REFUSED_NETS = """
import torch
from torch import nn


def net():
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(4, 2))


class Casting(nn.Module):  # takes any images (it casts them), but its parameters are float64
    def __init__(self):
        super().__init__()
        self.net = net().double()

    def forward(self, x):
        return self.net(x.double())


def compiled_augnet():
    from augnet import AugmentationLayer, AugNet
    from augnet.transforms import image as T

    return torch.compile(AugNet(net(), AugmentationLayer([T.Rotate()])))
"""


@pytest.mark.parametrize(
    "model, extra, flag",
    [
        ("net", ["--by-class", "labels.txt"], "--by-class"),  # a negative class label
        ("Casting", [], "--model polish_refused_nets:Casting"),  # report's dtype check
        ("compiled_augnet", [], "--model polish_refused_nets:compiled_augnet"),  # refused before compiling
    ],
)
def test_a_refused_probe_run_says_nothing_of_replacing_and_keeps_the_results(model, extra, flag, tmp_path,
                                                                             monkeypatch, capsys):  # fmt: skip
    # Refused by report() after the notice, as a traceback.
    import augnet.probes

    (tmp_path / "polish_refused_nets.py").write_text(_REFUSED_NETS)
    (tmp_path / "labels.txt").write_text("\n".join(str(v) for v in [-1, 0, 1, 0, 1, 0, 1, 0]) + "\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(augnet.probes, "report", lambda *a, **k: pytest.fail("augnet probe ran"))
    out = tmp_path / "out"
    before = _earlier_results(out, ["probe.json", "probe.csv", "verdict.txt", "probe.units.json"])
    argv = ["probe", "--model", f"polish_refused_nets:{model}", "--fake", "--n", "8", "--size", "8", "--transforms",
            "Rotate", "--magnitudes", "1", "--no-lie", "--no-progress", *extra, "--out", str(out)]  # fmt: skip
    assert main(argv) == 2
    _refused_before_the_notice(capsys.readouterr().err, "probe", flag)
    _kept(out, before)


# ------------------------------------------------------------------------------- Ctrl-C before a command runs


def test_ctrl_c_while_the_arguments_are_read_is_one_line_and_130(monkeypatch, capsys):
    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(augnet.cli, "build_parser", interrupted)  # building it imports the experiments
    try:
        code = main(["demo", "--quick"])
    except KeyboardInterrupt:
        pytest.fail("Ctrl-C while the arguments were read ended in a traceback")
    assert code == 130
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [err.strip()] and "interrupted" in err and "Traceback" not in err


# ------------------------------------------------------------------------------- what --help says


def _help(command: str) -> str:
    sub = next(a for a in augnet.cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return " ".join(sub.choices[command].format_help().split())


def _option_help(command: str, option: str) -> str:
    sub = next(a for a in augnet.cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    action = next(a for a in sub.choices[command]._actions if option in a.option_strings)
    return action.help % {"default": action.default, "choices": ", ".join(action.choices or ())}


def test_demo_help_gives_the_defaults_the_demo_runs_with():
    from augnet.experiments.demo import DemoConfig

    parser = augnet.cli.build_parser()
    default = augnet.cli.demo_config(parser.parse_args(["demo"]))
    quick = augnet.cli.demo_config(parser.parse_args(["demo", "--quick"]))
    assert f"default: {default.epochs}; {quick.epochs} with --quick" in _option_help("demo", "--epochs")
    assert f"default: {' '.join(default.transforms)})" in _option_help("demo", "--transforms")
    assert "default: augnet" in _option_help("demo", "--preset") and default == DemoConfig.preset("augnet")
    assert "demo.json" in _help("demo") and "policy.png" in _help("demo")  # the page says what the command does


def test_bench_help_gives_the_defaults_of_a_full_and_of_a_quick_run():
    from augnet.bench.harness import BenchConfig

    full, quick = BenchConfig(), BenchConfig.quick()
    sizes = _option_help("bench", "--sizes")
    assert f"default: {' '.join(map(str, full.sizes))}; {' '.join(map(str, quick.sizes))} with --quick" in sizes
    assert f"default: {full.batch}; {quick.batch} with --quick" in _option_help("bench", "--batch")
    assert f"default: {full.min_run_time:g}; {quick.min_run_time:g} with --quick" in _option_help("bench", "--min-time")
    assert "inference_" in _help("bench")  # the page names every file it writes


def test_probe_help_gives_the_batch_sizes_and_the_seed_the_probes_use():
    from augnet.probes._common import DEFAULT_BATCH_SIZE
    from augnet.probes.lie import LIE_BATCH_SIZE

    batch = _option_help("probe", "--batch-size")
    assert f"default: {DEFAULT_BATCH_SIZE}; {LIE_BATCH_SIZE} for the Lie derivative" in batch
    assert "default: 0" in _option_help("probe", "--seed")


def test_a_quick_demo_says_its_accuracy_is_a_set_up_check(tmp_path, monkeypatch, capsys):
    import augnet.experiments.demo as demo
    from augnet.experiments.demo import DemoConfig

    class Result:
        policy, test_accuracy, seconds, history, names = "policy", 0.2, 1.0, {"loss": [1.0]}, ["Rotate"]

        def to_json(self):
            return {}

    monkeypatch.setattr(demo, "run_demo", lambda config, progress: Result())
    monkeypatch.setattr("augnet.viz.plot_policy_history", lambda *a, **k: (_ for _ in ()).throw(ImportError("no")))
    for extra, said in (([], True), (["--epochs", "2"], False)):
        assert main(["demo", "--quick", "--no-progress", "--out", str(tmp_path), *extra]) == 0
        out = capsys.readouterr().out
        hint = [line for line in out.splitlines() if "--quick" in line]
        assert bool(hint) == said, out
        if said:
            assert str(DemoConfig().epochs) in hint[0]
