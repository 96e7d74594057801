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
from pathlib import Path

import pytest
import torch

from augnet.ops import _triton

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent

needs_triton = pytest.mark.skipif(
    _triton.unavailable_hint() is not None, reason=f"triton cannot be imported: {_triton.unavailable_hint()}"
)


def run_parity_script(group: str) -> str:
    env = {**os.environ, "TRITON_INTERPRET": "1"}
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


@needs_triton
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_output_and_gradients_match_the_reference(dtype):
    # Output and the gradients of x, affine, color and weight, every padding, colour or not, K = 1 and 5,
    # odd image sizes, channels_last and strided x, several pixel blocks per row (see triton_parity.py).
    output = run_parity_script(dtype)
    assert "11 of 11 cases passed" in output, output


@needs_triton
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_parity_at_the_gpu_launch_configurations(dtype):
    # The block sizes the GPU launcher picks (not the interpreter's whole images): 5 to 64 channels (BLOCK_C 8
    # to 64, BLOCK_P 256 down to 16), several pixel blocks per row, K = 1, B = 1, and N = 96 rows that are 32
    # copies of the batch (the program order groups the copies of a source row).
    output = run_parity_script(f"gpu-{dtype}")
    assert "8 of 8 cases passed" in output, output


@needs_triton
def test_program_order_puts_the_copies_of_a_source_row_side_by_side():
    output = run_parity_script("order")
    assert "1 of 1 cases passed" in output, output


@needs_triton
def test_bad_taps_follow_the_accelerator_contract():
    # NaN warps and weights, sources outside [0, B) and a NaN colour entry: the rows they are in are NaN, their
    # gradient is dropped, the rest matches the guarded reference, and the flag has the bit of each (bad_input.py).
    output = run_parity_script("bad")
    assert "3 of 3 cases passed" in output, output


@needs_triton
def test_gradcheck_float64():
    output = run_parity_script("gradcheck")
    assert "2 of 2 cases passed" in output, output


def test_supports_follows_device_dtype_and_interpreter(monkeypatch):
    # CPU tensors count only when the kernels were defined for the interpreter, i.e. TRITON_INTERPRET=1
    # before import (checked in triton_parity.py); setting it now, in a session that compiles, does not.
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert not _triton.supports(torch.zeros(1))
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert _triton.supports(torch.zeros(1)) == _triton._kernels_interpreted()
    assert not _triton.supports(torch.zeros(1, dtype=torch.float16))
    assert not _triton.supports(torch.zeros(1, dtype=torch.int64))
    assert not _triton.supports(torch.zeros(1, device="meta"))


@needs_triton
def test_no_hint_when_triton_imports():
    assert _triton.unavailable_hint() is None


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
    return None


@pytest.mark.skipif(_nvidia_compiler_missing() is not None, reason=str(_nvidia_compiler_missing()))
@pytest.mark.parametrize("dtype", ["fp32", "fp64"])
@pytest.mark.parametrize(("padding", "color", "ones"), [(2, True, True), (0, False, False), (1, True, False)])
def test_kernels_compile_for_an_nvidia_gpu(dtype, padding, color, ones):
    # The interpreter skips code generation; this runs it (to a cubin for sm_90, no GPU needed), including
    # the specialisation of integer arguments equal to 1 into constants that a real launch does.
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    consts = {"PADDING": padding, "HAS_COLOR": color, "BLOCK_C": 1 if ones else 4, "BLOCK_P": 128, "NEED_X": True}
    if ones:
        consts.update(B=1, CH=1, H=1, W=1, K=1, NPB=1)
    for kernel in (_triton._fwd_kernel, _triton._bwd_kernel):
        names = kernel.arg_names
        kc = {k: v for k, v in consts.items() if k in names}
        sig = {
            a: "constexpr"
            if a in kc
            else "*i64"
            if a == "src_ptr"
            else "*i32"
            if a == "flag_ptr"
            else f"*{dtype}"
            if a.endswith("_ptr")
            else "i32"
            for a in names
        }
        compiled = triton.compile(ASTSource(kernel, sig, constexprs=kc), target=GPUTarget("cuda", 90, 32))
        assert compiled.asm.get("cubin"), kernel.__name__
