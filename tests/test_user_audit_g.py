"""augnet.bench as a user calls it: odd arguments refused naming them, before any work (audit G).

Nothing here times anything: the runs that would are stopped by a stand-in before they start.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from augnet.bench import BenchConfig, default_providers, gpu_compile, gpu_model, harness, run_benchmark
from augnet.bench.gpu_compile import TritonCase

TINY = dict(sizes=(8,), batch=2, copies=1, min_run_time=0.001, min_runs=1, providers=("reference",), modes=("forward",))
H100 = gpu_model.DEVICES["h100"]


def _no_run(*args, **kwargs):
    raise AssertionError("the run started before the arguments were checked")


# --------------------------------------------------------------------------- harness


@pytest.mark.parametrize("providers", [[["eager"]], ["reference", 3], ("reference", None)])
def test_bench_config_refuses_providers_that_are_not_names(providers, monkeypatch):
    # A list among them was torch-free "unhashable type: 'list'" from inside the run, naming nothing.
    cfg = BenchConfig.quick(**{**TINY, "providers": providers})
    with pytest.raises(TypeError, match=r"providers must be names \(strings\)"):
        cfg.validate()
    monkeypatch.setattr(harness, "_run", _no_run)
    with pytest.raises(TypeError, match="providers must be names"):
        run_benchmark(cfg, log=None)
    assert cfg.providers is providers  # nothing changed in place


def test_bench_config_still_takes_provider_names_of_numpy():
    cfg = BenchConfig.quick(**{**TINY, "providers": np.array(["reference"])})
    cfg.validate()


@pytest.mark.parametrize("log", [3, "print"])
def test_run_benchmark_refuses_a_log_that_is_not_callable_before_any_timing(log, monkeypatch):
    # It was found when the first measurement was logged: "'int' object is not callable", the timing lost.
    monkeypatch.setattr(harness, "_run", _no_run)
    with pytest.raises(TypeError, match="log must be a callable or None"):
        run_benchmark(BenchConfig.quick(**TINY), log=log)


@pytest.mark.parametrize("x", [3, "cpu", None])
def test_default_providers_refuses_what_is_not_a_tensor(x):
    with pytest.raises(TypeError, match="x must be a tensor"):
        default_providers(x)


def test_default_providers_of_a_tensor_is_as_before():
    assert "reference" in default_providers(torch.zeros(1, 1, 1, 1))


# --------------------------------------------------------------------------- gpu_model


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        ((H100, 32, 0, 0), ValueError, "warps must be >= 1, got 0"),  # ZeroDivisionError
        ((H100, -1, 0, 4), ValueError, "registers must be >= 0, got -1"),  # (16, 64): more than 32 registers give
        ((H100, 32, -1024, 4), ValueError, "shared must be >= 0, got -1024"),
        ((H100, 32.5, 0, 4), TypeError, "registers must be an int"),  # (12, 48), silently
        ((H100, 32, 0, True), TypeError, "warps must be an int"),
        (("h100", 32, 0, 4), TypeError, "spec must be a GpuSpec"),  # AttributeError
    ],
)
def test_occupancy_refuses_counts_no_kernel_has(args, error, match):
    with pytest.raises(error, match=match):
        gpu_model.occupancy(*args)


def test_occupancy_of_valid_counts_is_as_before():
    assert gpu_model.occupancy(H100, 128, 0, 4) == (4, 16)
    assert gpu_model.occupancy(H100, np.int64(32), 100 * 1024, 4) == (2, 8)


def test_on_paper_json_into_a_folder_not_made_yet_is_written(tmp_path, capsys):
    # The table was printed, then a FileNotFoundError traceback: the folder is made, as --out's are.
    target = tmp_path / "new" / "deeper" / "rows.json"
    assert gpu_model.main(["--model", "a100", "--json", str(target)]) == 0
    assert json.loads(target.read_text())["model"] == "a100"
    capsys.readouterr()


@pytest.mark.parametrize("given", ["", "  "])
def test_on_paper_json_empty_is_refused_not_ignored(given, capsys):
    # `--json "$FILE"` with FILE unset printed the table, wrote nothing and exited 0.
    assert gpu_model.main(["--model", "h100", f"--json={given}"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "--json is empty" in err and len(err.strip().splitlines()) == 1


def test_on_paper_json_is_strict_when_a_kernel_fits_no_sm(tmp_path, monkeypatch, capsys):
    # waves = inf (no program fits an SM) was written as a bare Infinity token, which strict readers refuse.
    monkeypatch.setattr(gpu_model, "occupancy", lambda spec, registers, shared, warps: (0, 0))
    target = tmp_path / "rows.json"
    assert gpu_model.main(["--model", "h100", "--json", str(target)]) == 0
    capsys.readouterr()

    def refuse(token):
        raise ValueError(f"not strict JSON: {token}")

    rows = json.loads(target.read_text(), parse_constant=refuse)["rows"]
    assert {o["waves"] for r in rows for o in r["occupancy"] if o is not None} <= {"inf"}


# --------------------------------------------------------------------------- gpu_compile


@pytest.mark.parametrize(
    ("fields", "error", "match"),
    [
        (dict(kernel="fwd"), ValueError, "kernel must be one of forward, backward, backward\\+dx, got 'fwd'"),
        (dict(padding="zero"), ValueError, "padding must be one of zeros, border, reflection"),
        (dict(dtype="float16"), ValueError, "dtype must be one of float32, float64, got 'float16'"),
        (dict(dtype=torch.float32), ValueError, "dtype must be one of"),
        (dict(color=1), TypeError, "color must be a bool"),
        (dict(channels=0), ValueError, "channels must be >= 1, got 0"),
        (dict(b=-2), ValueError, "b must be >= 1, got -2"),
        (dict(size=2.0), TypeError, "size must be an int, got float"),
        (dict(copies=True), TypeError, "copies must be an int, got bool"),
        (dict(k=0), ValueError, "k must be >= 1"),
        (dict(aligned="yes"), TypeError, "aligned must be a bool"),
    ],
)
def test_triton_case_refuses_a_launch_that_cannot_be(fields, error, match):
    # An unknown kernel was compiled as the backward and recorded under its name; an unknown dtype or padding was
    # a KeyError from inside the launcher; no channels or images compiled a launch that cannot be, silently.
    base = dict(kernel="forward", padding="zeros", color=False, dtype="float32", channels=3)
    with pytest.raises(error, match=match):
        TritonCase(**{**base, **fields})


def test_triton_case_of_numpy_ints_holds_python_ints():
    case = TritonCase("forward", "zeros", True, "float32", np.int64(3), b=np.int32(8))
    assert case == TritonCase("forward", "zeros", True, "float32", 3, b=8)
    assert type(case.channels) is int and type(case.b) is int
    assert len(gpu_compile.triton_cases()) == 234 and len(gpu_compile.quick_cases()) == 5  # the matrices build


@pytest.mark.parametrize(
    ("case", "arch", "error", "match"),
    [
        (None, 90, TypeError, "case must be a TritonCase"),
        ("quick", 90, TypeError, "case must be a TritonCase"),
        (0, "90", TypeError, "arch must be an int compute capability"),  # an error record: '>=' of str and int
        (0, 90.0, TypeError, "arch must be an int"),
        (0, 0, ValueError, "arch must be a positive compute capability"),  # ptxas's dump, then an error record
    ],
)
def test_compile_triton_refuses_a_case_or_arch_before_compiling(case, arch, error, match):
    case = gpu_compile.quick_cases()[0] if case == 0 else case
    with pytest.raises(error, match=match):
        gpu_compile.compile_triton(case, arch)


def test_compile_all_refuses_archs_and_cases_naming_them(monkeypatch):
    monkeypatch.setattr(gpu_compile, "compile_triton", _no_run)
    case = gpu_compile.quick_cases()[0]
    with pytest.raises(TypeError, match="archs must be a tuple or list of ints"):
        gpu_compile.compile_all([case], archs=80, workers=1)  # 'int' object is not iterable
    with pytest.raises(TypeError, match=r"archs .*: each must be an int"):
        gpu_compile.compile_all([case], archs=("sm_90",), workers=1)
    with pytest.raises(TypeError, match="cases must be a list of TritonCase"):
        gpu_compile.compile_all(None, workers=1)
    with pytest.raises(TypeError, match="cases must be TritonCase, got NoneType"):
        gpu_compile.compile_all([None], workers=1)


def test_compile_all_reads_archs_given_as_a_generator_once_for_every_case(monkeypatch):
    # The generator was spent on the first case: the others were compiled for no arch, silently.
    monkeypatch.setattr(gpu_compile, "compile_triton", lambda case, arch: (case.name, arch))
    cases = gpu_compile.quick_cases()[:2]
    got = gpu_compile.compile_all(cases, archs=(a for a in (80, 90)), workers=1)
    assert got == [(c.name, a) for c in cases for a in (80, 90)]
    assert gpu_compile.compile_all(cases, archs=(80, 90), workers=1) == got  # as before
    assert gpu_compile.compile_all([], workers=1) == [] and gpu_compile.compile_all(cases, archs=(), workers=1) == []


def test_cuda_resources_refuses_no_archs_before_nvcc(monkeypatch):
    # () ran nvcc without -gencode: records of nvcc's own default (sm_75), not of an arch asked for.
    import augnet.ops._cpp as cpp

    monkeypatch.setattr(cpp, "find_cuda_toolkit", _no_run)
    with pytest.raises(ValueError, match="archs must name at least one compute capability"):
        gpu_compile.cuda_resources(archs=())
    with pytest.raises(TypeError, match="archs must be a tuple or list"):
        gpu_compile.cuda_resources(archs="sm_90")


def test_gpu_compile_command_reads_its_arguments(monkeypatch, capsys):
    # `python -m augnet.bench.gpu_compile --help` (or a misspelt --quik) started the full compile, 468 of them.
    seen = []
    monkeypatch.setattr(gpu_compile, "main", lambda **kw: seen.append(kw) or 0)
    with pytest.raises(SystemExit) as help_exit:
        gpu_compile._command(["--help"])
    assert help_exit.value.code == 0 and "--quick" in capsys.readouterr().out
    with pytest.raises(SystemExit) as bad_exit:
        gpu_compile._command(["--quik"])
    assert bad_exit.value.code == 2 and "unrecognized arguments: --quik" in capsys.readouterr().err
    assert gpu_compile._command(["--quick"]) == 0 and gpu_compile._command([]) == 0
    assert seen == [{"out_dir": "benchmarks/results", "full": False}, {"out_dir": "benchmarks/results", "full": True}]
    assert gpu_compile._command(["--quick"], out_dir="elsewhere") == 0 and seen[-1]["out_dir"] == "elsewhere"


def test_the_benchmark_script_reads_its_arguments_too():
    # benchmarks/gpu_compile.py took anything but --quick (--help, a misspelt --quik) for the full compile
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parent.parent / "benchmarks" / "gpu_compile.py"
    done = subprocess.run([sys.executable, str(script), "--quik"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "unrecognized arguments: --quik" in done.stderr and done.stdout == ""
