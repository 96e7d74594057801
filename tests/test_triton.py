"""The Triton tap_mix backend: parity with the reference, run on CPU by Triton's interpreter.

The interpreter is switched on by ``TRITON_INTERPRET=1``, which must be set
before triton is imported; this session imports triton normally, so the kernel
checks (``tests/triton_parity.py``) run in a subprocess and a failure shows its
output. The rest checks the backend's availability functions in-process.
"""

import importlib.util
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

from augnet.ops import _triton

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent

needs_triton = pytest.mark.skipif(
    _triton.unavailable_hint() is not None, reason=f"triton cannot be imported: {_triton.unavailable_hint()}"
)


#: The checks that run the kernels in Triton's CPU interpreter (3.8 or newer; compiled on a GPU, 3.6 runs them).
needs_interpreter = pytest.mark.skipif(
    _triton.interpreter_hint() is not None, reason=f"no interpreter for the kernels: {_triton.interpreter_hint()}"
)


def run_parity_script(group: str, device: str = "cpu") -> str:
    """Run triton_parity.py's ``group`` in the interpreter (``device="cpu"``) or compiled on ``device``."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "AUGNET_PARITY_DEVICE": device}
    if device != "cpu":
        del env["TRITON_INTERPRET"]
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    proc = subprocess.run(
        [sys.executable, str(TESTS / "triton_parity.py"), group],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    output = proc.stdout + proc.stderr
    if proc.returncode != 0:
        pytest.fail(f"triton_parity.py {group} failed (exit status {proc.returncode}):\n{output}", pytrace=False)
    return output


@needs_interpreter
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_output_and_gradients_match_the_reference(dtype):
    # Output and the gradients of x, affine, color and weight, every padding, colour or not, K = 1 and 5,
    # odd image sizes, channels_last and strided x, several pixel blocks per row (see triton_parity.py).
    output = run_parity_script(dtype)
    assert "11 of 11 cases passed" in output, output


@needs_triton
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (the interpreter runs these above)")
@pytest.mark.parametrize("group", ["float64", "float32", "gpu-float64", "gpu-float32", "bad", "order", "gradcheck"])
def test_the_kernels_match_the_reference_on_a_cuda_gpu(group):
    # The interpreter's checks, compiled for the GPU that is there: its block sizes, its float rounding (FMA) and
    # its atomics' order, which the interpreter does not reproduce.
    output = run_parity_script(group, device="cuda")
    assert " cases passed" in output and "FAIL" not in output, output


@needs_interpreter
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_parity_at_the_gpu_launch_configurations(dtype):
    # The block sizes the GPU launcher picks (not the interpreter's whole images): 5 to 64 channels (BLOCK_C 8
    # to 64, BLOCK_P 256 down to 16), several pixel blocks per row, K = 1, B = 1, and N = 48 rows that are 16
    # copies of the batch (the program order groups the copies of a source row).
    output = run_parity_script(f"gpu-{dtype}")
    assert "8 of 8 cases passed" in output, output


@needs_interpreter
def test_program_order_puts_the_copies_of_a_source_row_side_by_side():
    output = run_parity_script("order")
    assert "1 of 1 cases passed" in output, output


@needs_interpreter
def test_bad_taps_follow_the_accelerator_contract():
    # NaN warps and weights, sources outside [0, B) and a NaN colour entry: the rows they are in are NaN, their
    # gradient is dropped, the rest matches the guarded reference, and the flag has the bit of each (bad_input.py).
    output = run_parity_script("bad")
    assert "3 of 3 cases passed" in output, output


@needs_interpreter
def test_gradcheck_float64():
    output = run_parity_script("gradcheck")
    assert "2 of 2 cases passed" in output, output


def test_supports_follows_device_dtype_and_interpreter(monkeypatch):
    # CPU tensors count only when the kernels were defined for the interpreter, i.e. TRITON_INTERPRET=1
    # before import (checked in triton_parity.py); setting it now, in a session that compiles, does not.
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert not _triton.supports(torch.zeros(1))
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert _triton.supports(torch.zeros(1)) == (_triton._kernels_interpreted() and _triton.interpreter_hint() is None)
    assert not _triton.supports(torch.zeros(1, dtype=torch.float16))
    assert not _triton.supports(torch.zeros(1, dtype=torch.int64))
    assert not _triton.supports(torch.zeros(1, device="meta"))


@needs_triton
def test_no_hint_when_triton_imports():
    assert _triton.unavailable_hint() is None


@pytest.mark.parametrize(
    "version, refused", [("3.6.0", True), ("3.7.1", True), ("3.8.0", False), ("3.10.0+git1", False)]
)
def test_the_interpreter_needs_triton_3_8(version, refused, monkeypatch):
    # triton 3.6 (torch 2.11's pin) imports and runs the kernels compiled on a GPU, but its interpreter cannot:
    # CPU tensors are not supported there, and the interpreter's checks say why they do not run.
    monkeypatch.setattr(_triton, "triton", type("FakeTriton", (), {"__version__": version}))
    hint = _triton.interpreter_hint()
    assert (hint is not None) == refused
    if refused:
        assert version in hint and "3.8 or newer" in hint


def test_module_imports_without_triton_and_says_how_to_install_it(monkeypatch):
    # A fresh copy of the module, loaded while ``import triton`` fails.
    monkeypatch.setitem(sys.modules, "triton", None)
    monkeypatch.setitem(sys.modules, "triton.language", None)
    spec = importlib.util.spec_from_file_location("augnet_triton_without_triton", _triton.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    hint = module.unavailable_hint()
    assert hint is not None and 'pip install "augnet[triton]"' in hint
    x = torch.zeros(1, 1, 2, 2)
    with pytest.raises(RuntimeError, match="augnet\\[triton\\]"):
        module.tap_mix_triton(x, torch.zeros(1, 1, dtype=torch.long), torch.zeros(1, 1, 2, 3), None, torch.ones(1, 1))


def _nvidia_compiler_missing() -> str | None:
    if _triton.unavailable_hint() is not None:
        return "triton cannot be imported"
    if os.environ.get("TRITON_INTERPRET") == "1":
        return "the kernels are interpreted in this session"
    import triton.backends

    if "nvidia" not in triton.backends.backends:
        return "triton has no NVIDIA backend here"
    from augnet.bench.gpu_compile import compile_hint

    return compile_hint()


needs_nvidia_compiler = pytest.mark.skipif(
    _nvidia_compiler_missing() is not None, reason=str(_nvidia_compiler_missing())
)


def _compile_all(cases) -> list[dict]:
    from augnet.bench.gpu_compile import compile_all

    records = compile_all(cases)  # in one process per core
    failed = [
        f"{r['kernel']} {r['padding']} color={r['color']} {r['dtype']} Ch={r['channels']} {r['arch']}: "
        + (r["error"] or f"spills ({r['stack']} bytes stack, {r['local']} bytes local memory)")
        for r in records
        if r["error"] or r["spills"]
    ]
    assert not failed, "\n".join(failed)
    return records


@needs_nvidia_compiler
def test_kernels_compile_for_sm80_and_sm90_without_spills():
    # The interpreter generates no code; this runs the whole pipeline to a cubin (no GPU needed) for a few
    # specialisations the launcher makes (every kernel, dtype and padding, colour or not, 1 to 64 channels,
    # K = 1 as constants), and fails on a compile error or any local memory. The full matrix is in the slow set.
    from augnet.bench.gpu_compile import quick_cases

    records = _compile_all(quick_cases())
    assert len(records) == 2 * len(quick_cases()) and all(r["registers"] > 0 for r in records)


@needs_nvidia_compiler
@pytest.mark.parametrize("default", [None, "0"])
def test_kernels_ask_for_fused_multiply_adds_whatever_tritons_default(default, monkeypatch):
    # Triton 3.9 warns at every first compile that its default (fused multiply-adds on) turns off in 3.10, which
    # is TRITON_DEFAULT_FP_FUSION=0: the kernels name the option, so neither the warning nor --fmad=false comes.
    from augnet.bench.gpu_compile import compile_triton, quick_cases

    if default is None:
        monkeypatch.delenv("TRITON_DEFAULT_FP_FUSION", raising=False)
    else:
        monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", default)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # compile_triton reports a warning raised so as an error in its record
        record = compile_triton(quick_cases()[0], 90)
    assert record["error"] is None and record["fp_fusion"] is True


@needs_nvidia_compiler
def test_compiles_in_worker_processes_give_the_records_of_one_process_in_order():
    from augnet.bench.gpu_compile import compile_all, quick_cases

    cases = quick_cases()[:2]
    one = compile_all(cases, workers=1)
    assert compile_all(cases, workers=2) == one and [r["arch"] for r in one] == ["sm_80", "sm_90"] * 2
    with pytest.raises(ValueError, match="workers must be >= 1, got 0"):
        compile_all(cases, workers=0)


@pytest.mark.slow
@needs_nvidia_compiler
def test_every_kernel_specialisation_compiles_without_spills():
    # Every specialisation of augnet.bench.gpu_compile.triton_cases() for sm_80 and sm_90; the registers and
    # shared memory go to benchmarks/results/triton_resources.json (the on-paper model reads them).
    import json

    from augnet.bench.gpu_compile import triton_cases, versions

    records = _compile_all(triton_cases(full=True))
    out = ROOT / "benchmarks" / "results" / "triton_resources.json"
    out.write_text(json.dumps({"versions": versions(), "records": records}, indent=1))


def test_asking_for_triton_on_cpu_tensors_says_why_not_and_how(monkeypatch):
    # It said only "does not support torch.float32 tensors on cpu", also where the cause was triton 3.6's
    # interpreter, which cannot run the kernels.
    from augnet.ops import resolve_backend

    x = torch.rand(2, 3, 8, 8)
    monkeypatch.setattr(_triton, "_interpreting", lambda: False)
    with pytest.raises(RuntimeError, match=r"does not support torch\.float32 tensors on cpu: .*TRITON_INTERPRET=1"):
        resolve_backend("triton", x)
    monkeypatch.setattr(_triton, "_interpreting", lambda: True)
    monkeypatch.setattr(_triton, "_kernels_interpreted", lambda: True)
    monkeypatch.setattr(_triton, "triton", type("FakeTriton", (), {"__version__": "3.6.0"}))
    with pytest.raises(RuntimeError, match=r"triton 3\.6\.0's interpreter cannot run the kernels"):
        resolve_backend("triton", x)
