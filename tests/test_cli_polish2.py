"""The command line as a user meets it, second pass: a float64 model's refusal says what a command-line user can
do, progress bars only on a terminal (``--progress / --no-progress`` to choose), ``--batch-size`` on ``bench`` as
on ``probe`` (``--batch`` kept, said to be deprecated), and the errors of a missing command, a misspelt option, a
file where ``reproduce``'s folder goes and options a probe run does not use."""

import argparse
import inspect
import io
import subprocess
import sys

import pytest
import torch
from torch import nn

import augnet.cli
from augnet.cli import main

NETS = """
from torch import nn


def net():
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(4, 2))


def double():
    return net().double()


def half():
    return net().half()


def make():  # the remedy the message gives: a function of one's own module returning the model cast to float32
    return double().float()
"""

PROBE = ["--fake", "--n", "8", "--size", "8", "--transforms", "Rotate", "--magnitudes", "1", "--no-lie", "--layers",
         "logits"]  # fmt: skip


class Stop(Exception):
    """Raised by a stand-in for the work, once it has recorded what it was given."""


@pytest.fixture
def nets(tmp_path, monkeypatch):
    (tmp_path / "polish2_nets.py").write_text(NETS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _one_error_line(err: str, command: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"augnet {command}: error: "), err
    return lines[0]


# ------------------------------------------------------------------------------- a model of another dtype


@pytest.mark.parametrize("model, dtype", [("double", "float64"), ("half", "float16")])
def test_a_probe_of_a_model_of_another_dtype_says_what_a_command_line_user_can_do(model, dtype, nets, monkeypatch,
                                                                                   capsys):  # fmt: skip
    # Was: "--model m:double: x is torch.float32 but the model's parameters are torch.float64: pass x.to(...)".
    import augnet.probes

    monkeypatch.setattr(augnet.probes, "report", lambda *a, **k: pytest.fail("augnet probe ran"))
    assert main(["probe", "--model", f"polish2_nets:{model}", *PROBE, "--out", str(nets / "out")]) == 2
    line = _one_error_line(capsys.readouterr().err, "probe")
    assert f"--model polish2_nets:{model} has {dtype} parameters" in line
    assert "float32 images" in line and ".float()" in line and "--model my_module:make" in line
    assert "x.to(" not in line and " x " not in line  # no tensor the user could cast
    assert not (nets / "out").exists()


def test_the_remedy_the_message_gives_is_taken(nets):
    from augnet._cli_checks import probe_inputs

    args = augnet.cli.build_parser().parse_args(["probe", "--model", "polish2_nets:make", *PROBE])
    model, x, _, _ = probe_inputs(args)
    assert x.dtype == torch.float32 and {p.dtype for p in model.parameters()} == {torch.float32}


def test_the_library_keeps_its_own_message_for_library_users():
    from augnet.probes._common import check_model_input

    with pytest.raises(TypeError, match=r"x is torch\.float32 but the model's parameters are torch\.float64: "
                                        r"pass x\.to\(torch\.float64\)"):  # fmt: skip
        check_model_input(nn.Linear(2, 2).double(), torch.zeros(8, 2))


def test_a_model_with_float32_parameters_among_others_is_not_refused_for_its_dtype():
    from augnet._cli_checks import check_dtype

    mixed = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2).double())
    check_dtype(mixed, torch.zeros(8, 2), "m:mixed")  # as check_model_input: float32 is among its dtypes
    check_dtype(nn.ReLU(), torch.zeros(8, 2), "m:relu")  # no parameters: nothing to refuse
    with pytest.raises(TypeError, match="has float64 parameters"):
        check_dtype(nn.Linear(2, 2).double(), torch.zeros(8, 2), "m:double")


# ------------------------------------------------------------------------------- progress bars


class _Stderr(io.StringIO):
    def __init__(self, tty: bool):
        super().__init__()
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


def _progress_given(command: str, flags: list[str], tty: bool, nets, monkeypatch) -> bool:
    """The ``progress`` ``augnet COMMAND`` passes to the library, with stderr a terminal or not."""
    import augnet.experiments
    import augnet.experiments.demo
    import augnet.probes

    given = []

    def record(*args, progress, **kwargs):
        given.append(progress)
        raise Stop

    monkeypatch.setattr(augnet.cli, "build_extension_first", lambda: None)
    monkeypatch.setattr(augnet.experiments.demo, "run_demo", lambda config, progress: record(progress=progress))
    monkeypatch.setattr(augnet.experiments, "reproduce", record)
    monkeypatch.setattr(augnet.probes, "report", record)
    argv = {"demo": ["demo", "--quick"], "reproduce": ["reproduce", "rotation", "--quick"],
            "probe": ["probe", "--model", "polish2_nets:net", *PROBE]}[command]  # fmt: skip
    monkeypatch.setattr(sys, "stderr", _Stderr(tty))
    with pytest.raises(Stop):
        main([*argv, *flags, "--out", str(nets / "out")])
    assert len(given) == 1
    return given[0]


@pytest.mark.parametrize("command", ["demo", "reproduce", "probe"])
@pytest.mark.parametrize("tty", [False, True])
def test_progress_bars_are_shown_only_on_a_terminal_unless_asked(command, tty, nets, monkeypatch):
    # Was: bars whatever stderr was (in a CI log or a file, every update of a bar a line of its own).
    assert _progress_given(command, [], tty, nets, monkeypatch) is tty
    assert _progress_given(command, ["--progress"], tty, nets, monkeypatch) is True
    assert _progress_given(command, ["--no-progress"], tty, nets, monkeypatch) is False


def test_a_stderr_that_cannot_say_whether_it_is_a_terminal_gets_no_bars(monkeypatch):
    from augnet._cli_args import show_progress

    class Closed:
        def isatty(self):
            raise ValueError("I/O operation on closed file")

    for stream in (Closed(), object(), None):
        monkeypatch.setattr(sys, "stderr", stream)
        assert show_progress(argparse.Namespace(progress=None)) is False


def _help(command: str) -> str:
    from augnet._cli_args import subcommand

    return " ".join(subcommand(augnet.cli.build_parser(), command).format_help().split())


def test_help_documents_progress_and_no_progress_on_the_commands_with_bars():
    for command in ("demo", "reproduce", "probe"):
        text = _help(command)
        assert "--progress, --no-progress" in text and "only when stderr is a terminal" in text
    assert "--progress" not in _help("bench")  # it shows no bar


def test_the_librarys_progress_defaults_are_unchanged():
    from augnet.experiments import reproduce
    from augnet.experiments.demo import run_demo
    from augnet.probes import report
    from augnet.training import fit

    defaults = [inspect.signature(f).parameters["progress"].default for f in (fit, report, run_demo, reproduce)]
    assert defaults == [False, False, True, True]


# ------------------------------------------------------------------------------- bench --batch-size


def _bench_args(monkeypatch, argv: list[str], capsys) -> tuple[argparse.Namespace, str]:
    import augnet.bench

    ran = []
    monkeypatch.setattr(augnet.bench, "run_from_args", lambda args: ran.append(args) or 0)
    assert main(argv) == 0
    assert len(ran) == 1
    return ran[0], capsys.readouterr().err


def test_bench_takes_batch_size_as_probe_does_and_batch_still_with_one_line_on_stderr(tmp_path, monkeypatch, capsys):
    new, err_new = _bench_args(monkeypatch, ["bench", "--quick", "--batch-size", "3", "--out", str(tmp_path)], capsys)
    old, err_old = _bench_args(monkeypatch, ["bench", "--quick", "--batch", "3", "--out", str(tmp_path)], capsys)
    assert new.batch == old.batch == 3  # the same setting, read by augnet.bench as before
    assert "deprecated" not in err_new
    said = [line for line in err_old.splitlines() if "deprecated" in line]
    assert said == ["augnet bench: --batch is deprecated and will stop working in a future release; use --batch-size "
                    "(the same option)"]  # fmt: skip
    probe = augnet.cli.build_parser().parse_args(["probe", "--model", "m:n", "--fake", "--transforms", "Rotate",
                                                  "--batch-size", "5"])  # fmt: skip
    assert probe.batch_size == 5
    both, err_both = _bench_args(monkeypatch, ["bench", "--quick", "--batch", "2", "--batch-size", "3", "--out",
                                               str(tmp_path)], capsys)  # fmt: skip
    assert both.batch == 3 and [line for line in err_both.splitlines() if "deprecated" in line] == said
    assert "--batch-size B, --batch B" in _help("bench") and "--batch is its deprecated old name" in _help("bench")


@pytest.mark.parametrize("flag", ["--batch-size", "--batch"])
def test_a_refused_batch_size_names_the_flag_as_typed_in_one_line(flag, monkeypatch, capsys):
    monkeypatch.setattr(augnet.cli, "_bench", lambda args: pytest.fail("augnet bench ran"))
    assert main(["bench", flag, "0"]) == 2
    assert _one_error_line(capsys.readouterr().err, "bench") == f"augnet bench: error: {flag} must be >= 1, got 0"


def test_bench_model_names_the_batch_flag_as_typed_among_those_it_does_not_use(capsys):
    assert main(["bench", "--model", "h200", "--batch-size", "256"]) == 0
    captured = capsys.readouterr()
    assert "not used: --batch-size" in captured.err and "deprecated" not in captured.err
    assert main(["bench", "--model", "h200", "--batch", "256"]) == 0
    captured = capsys.readouterr()
    assert "not used: --batch\n" in captured.err and "use --batch-size" in captured.err


# ------------------------------------------------------------------------------- errors a user meets


def test_no_command_names_the_commands(capsys):
    # Was: "augnet: error: the following arguments are required: command".
    with pytest.raises(SystemExit) as stop:
        main([])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "augnet: error: give a command: demo, bench, reproduce or probe ('augnet COMMAND --help'" in err
    with pytest.raises(SystemExit):
        main(["--quick"])
    assert "unrecognized arguments: --quick; give a command" in capsys.readouterr().err


def test_python_dash_m_augnet_alone_names_the_commands():
    proc = subprocess.run([sys.executable, "-m", "augnet"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "give a command: demo, bench, reproduce or probe" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_misspelt_option_gets_its_commands_usage_and_the_options_it_is_close_to(monkeypatch, capsys):
    # Was: the top level's usage ("augnet [-h] [--version] {demo,...}") and "augnet: error: unrecognized arguments".
    monkeypatch.setattr(augnet.cli, "_demo", lambda args: pytest.fail("augnet demo ran"))
    with pytest.raises(SystemExit) as stop:
        main(["demo", "--quik"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: augnet demo ")
    assert err.strip().splitlines()[-1] == "augnet demo: error: unrecognized arguments: --quik (did you mean --quick?)"
    with pytest.raises(SystemExit):
        main(["bench", "--batchsize=3", "--seeds", "1"])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == ("augnet bench: error: unrecognized arguments: --batchsize=3 --seeds 1 (--batchsize: did you mean "
                    "--batch-size?; --seeds: did you mean --seed or --sizes?)")  # fmt: skip
    with pytest.raises(SystemExit):
        main(["demo", "--zzz"])
    assert capsys.readouterr().err.strip().splitlines()[-1] == "augnet demo: error: unrecognized arguments: --zzz"


def test_a_file_where_reproduces_folder_goes_is_refused_before_any_work(tmp_path, monkeypatch, capsys):
    # Was: the header line, then "augnet reproduce: error: out DIR/rotation is an existing file, not a folder".
    import augnet.experiments

    monkeypatch.setattr(augnet.experiments, "reproduce", lambda *a, **k: pytest.fail("augnet reproduce ran"))
    (tmp_path / "rotation").write_text("not a folder")
    assert main(["reproduce", "rotation", "--quick", "--out", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    line = _one_error_line(captured.err, "reproduce")
    assert line.endswith(f"--out {tmp_path}: {tmp_path / 'rotation'} is an existing file where the experiment's "
                         "folder goes")  # fmt: skip
    assert captured.out == "" and (tmp_path / "rotation").read_text() == "not a folder"


@pytest.mark.parametrize(
    "extra, notice",
    [
        (["--data", "x.pt", "--channels", "1"], "--channels 1 (--data images keep their own channels)"),
        (["--fake", "--channels", "3"], None),
        (["--fake", "--grid-points", "5"], "--grid-points 5 (only --transformations grid uses it)"),
        (["--fake", "--grid-points", "5", "--transformations", "grid"], None),
        (["--fake", "--transformations", "grid"], None),  # report's own grid_points, in the checks too
        (["--data", "x.pt", "--channels", "3", "--grid-points", "3"],
         "--channels 3 (--data images keep their own channels); --grid-points 3 (only --transformations grid uses it)"),
    ],
)  # fmt: skip
def test_a_probe_run_names_the_options_it_does_not_use(extra, notice, nets, monkeypatch, capsys):
    import augnet.probes
    from augnet.probes.report import report

    given = {}

    def record(*args, **kwargs):
        given.update(kwargs)
        raise Stop

    torch.save(torch.rand(8, 3, 8, 8), nets / "x.pt")
    monkeypatch.setattr(augnet.probes, "report", record)
    argv = ["probe", "--model", "polish2_nets:net", "--n", "8", "--size", "8", "--transforms", "Rotate", "--no-lie"]
    with pytest.raises(Stop):
        main([*argv, *extra, "--out", str(nets / "out")])
    said = [line for line in capsys.readouterr().err.splitlines() if "not used" in line]
    assert said == ([] if notice is None else [f"augnet probe: not used: {notice}"])
    grid = inspect.signature(report).parameters["grid_points"].default
    asked = int(extra[extra.index("--grid-points") + 1]) if "--grid-points" in extra else grid
    assert given["grid_points"] == asked  # as before: the value given, else report's own


def test_probe_help_gives_the_defaults_that_are_no_longer_argparse_defaults():
    from augnet.probes.inputs import fake_images
    from augnet.probes.report import report

    grid = inspect.signature(report).parameters["grid_points"].default
    assert f"with --transformations grid (default: {grid})" in _help("probe")
    assert "channels of --fake images (default: 3)" in _help("probe") and fake_images(8, 8, 3, 0).shape[1] == 3


def test_bench_sizes_error_gives_the_sizes_as_typed(monkeypatch, capsys):
    monkeypatch.setattr(augnet.cli, "_bench", lambda args: pytest.fail("augnet bench ran"))
    assert main(["bench", "--sizes", "8", "0"]) == 2
    assert _one_error_line(capsys.readouterr().err, "bench") == "augnet bench: error: --sizes must be positive, got 8 0"


@pytest.mark.parametrize("command", [["demo", "--quick"], ["bench", "--quick"], ["reproduce", "rotation", "--quick"],
                                     ["probe", "--model", "m:n", *PROBE]])  # fmt: skip
@pytest.mark.parametrize("out", ["", "  "])
def test_an_empty_output_folder_is_refused_not_taken_as_the_working_directory(command, out, tmp_path, monkeypatch,
                                                                              capsys):  # fmt: skip
    # Was: --out "" (a shell variable left unset) wrote the results into the working directory.
    for name in ("_demo", "_bench", "_reproduce", "_probe"):
        monkeypatch.setattr(augnet.cli, name, lambda args: pytest.fail(f"augnet {args.command} ran"))
    monkeypatch.chdir(tmp_path)
    assert main([*command, "--out", out]) == 2
    line = _one_error_line(capsys.readouterr().err, command[0])
    assert line.endswith(f"--out is empty ({out!r}); name a folder (--out . for the working directory)")
    assert list(tmp_path.iterdir()) == []
