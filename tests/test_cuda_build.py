"""The CUDA tap_mix kernels: they compile with nvcc, and (given a GPU) match the reference.

The compile check needs only nvcc and the CUDA headers, no GPU. It builds
csrc/tap_mix_cuda.cu alone (the op schema lives in csrc/tap_mix.cpp, which the
object file does not need). The parity tests JIT-build the extension and run
only where ``torch.cuda.is_available()``.
"""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from helpers import tap_mix_inputs, tol
from torch.utils import cpp_extension

from augnet.ops import tap_mix_reference

CSRC = Path(__file__).resolve().parent.parent / "csrc"
CUDA_SOURCE = CSRC / "tap_mix_cuda.cu"
OP_SOURCE = CSRC / "tap_mix.cpp"
PADDINGS = ("zeros", "border", "reflection")
#: tap_mix_backward's output_mask: every gradient (x, affine, color, weight).
ALL = [True, True, True, True]


def _cuda_toolkit() -> tuple[Path, Path] | None:
    """(nvcc, CUDA include dir) of the first CUDA install that has both, else None.

    Looked up as torch.utils.cpp_extension does (CUDA_HOME, CUDA_PATH, then the
    nvcc on PATH), then /usr/local/cuda: CUDA_HOME can resolve to a prefix such
    as /usr/local that holds an nvcc wrapper but not the CUDA headers.
    """
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), cpp_extension.CUDA_HOME]
    on_path = shutil.which("nvcc")
    if on_path:
        roots += [str(Path(on_path).parent.parent), str(Path(on_path).resolve().parent.parent)]
    roots.append("/usr/local/cuda")
    for root in filter(None, roots):
        nvcc, include = Path(root) / "bin" / "nvcc", Path(root) / "include"
        if nvcc.is_file() and (include / "cuda_runtime.h").is_file():
            return nvcc, include
    return None


def test_cuda_source_compiles_for_sm80_and_sm90_without_spills():
    # nvcc --resource-usage for A100 and H100 (no GPU needed): every kernel compiles, with no stack frame and no
    # spill (the float forward spilled a little on sm_80 before its rewrite for the bad-input contract).
    if _cuda_toolkit() is None:
        pytest.skip("no nvcc with the CUDA headers (set CUDA_HOME to a CUDA toolkit to run this check)")
    from augnet.bench.gpu_compile import cuda_resources

    start = time.perf_counter()
    records = cuda_resources((80, 90))
    kinds = {(r["kernel"], r["dtype"], r["arch"]) for r in records}
    kernels, dtypes, archs = ("forward", "backward", "backward_finish"), ("float32", "float64"), ("sm_80", "sm_90")
    assert kinds == {(k, d, a) for k in kernels for d in dtypes for a in archs}
    spilled = [r for r in records if r["spills"]]
    assert not spilled, spilled
    assert all(r["registers"] <= 255 for r in records)
    print(f"compiled {CUDA_SOURCE.name} for sm_80 and sm_90 in {time.perf_counter() - start:.1f} s")


# ---------------------------------------------------------------------------
# The toolkit torch builds with, and a build that loads (no GPU needed)
# ---------------------------------------------------------------------------

ROOT = CSRC.parent


def _run_python(code: str, timeout: int = 900) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    cmd = [sys.executable, "-c", code]
    return subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


_TOOLKIT_CHECK = """
import json
import torch.utils.benchmark  # imports torch.utils.cpp_extension, which reads CUDA_HOME now, once
from torch.utils import cpp_extension
from augnet.ops import _cpp
before = cpp_extension.CUDA_HOME
with _cpp.cuda_toolkit() as root:
    inside, nvcc = cpp_extension.CUDA_HOME, cpp_extension._join_cuda_home("bin", "nvcc")
print(json.dumps(dict(before=before, root=root, inside=inside, nvcc=nvcc, after=cpp_extension.CUDA_HOME)))
"""


def test_the_cuda_build_takes_a_complete_toolkit_even_after_torch_utils_benchmark():
    # cpp_extension keeps the CUDA_HOME it found when first imported (torch.utils.benchmark imports it): here
    # /usr/local, from the nvcc wrapper in /usr/local/bin, which has no CUDA headers. Setting the environment
    # variable afterwards, as augnet did, changed nothing; cuda_toolkit() sets the module's value for the build.
    if _cuda_toolkit() is None:
        pytest.skip("no nvcc with the CUDA headers (set CUDA_HOME to a CUDA toolkit to run this check)")
    result = _run_python(_TOOLKIT_CHECK)
    assert result.returncode == 0, result.stderr
    got = json.loads(result.stdout.strip().splitlines()[-1])
    assert got["root"] is not None and (Path(got["root"]) / "include" / "cuda_runtime.h").is_file()
    assert got["inside"] == got["root"] and Path(got["nvcc"]).is_file()
    assert got["after"] == got["before"]  # restored: the user's own builds are left as they were


_BUILD_AND_LOAD = """
import json, os, sys
import torch.utils.benchmark  # as a user's script may have: the CUDA_HOME trap above
import torch
from augnet.ops import _cpp
os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0"
_cpp.build_and_load("augnet_tap_mix_cuda_check", cuda=True, cxx_flags=["-O0"], build_directory=sys.argv[1])
has = torch._C._dispatch_has_kernel_for_dispatch_key
keys = {op: {k: has("augnet::" + op, k) for k in ("CPU", "CUDA")} for op in ("tap_mix", "tap_mix_backward")}
keys["_set_bad_input_flag"] = {"CUDA": has("augnet::_set_bad_input_flag", "CUDA")}
print(json.dumps(keys))
"""


def test_the_cuda_extension_builds_and_loads_without_a_gpu(tmp_path_factory):
    # The whole extension (csrc/tap_mix.cpp at -O0, the CUDA kernels for sm_90), built through augnet's own
    # build function and loaded into a fresh process: the CUDA kernels register their dispatch keys.
    if _cuda_toolkit() is None:
        pytest.skip("no nvcc with the CUDA headers (set CUDA_HOME to a CUDA toolkit to run this check)")
    # One folder per torch: two environments sharing one rebuild over each other, and a build killed in one
    # leaves a lock that torch 2.11's loader waits on forever.
    default = Path.home() / ".cache" / "augnet" / f"cuda_check-{torch.__version__}"
    build = Path(os.environ.get("AUGNET_TEST_BUILD_DIR", str(default)))
    build.mkdir(parents=True, exist_ok=True)
    result = _run_python(_BUILD_AND_LOAD.replace("sys.argv[1]", repr(str(build))))
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-20000:]
    keys = json.loads(result.stdout.strip().splitlines()[-1])
    assert keys == {
        "tap_mix": {"CPU": True, "CUDA": True},
        "tap_mix_backward": {"CPU": True, "CUDA": True},
        "_set_bad_input_flag": {"CUDA": True},
    }


# ---------------------------------------------------------------------------
# Parity with the reference (GPU only)
# ---------------------------------------------------------------------------


def _has_cuda_kernel() -> bool:
    try:
        return torch._C._dispatch_has_kernel_for_dispatch_key("augnet::tap_mix", "CUDA")
    except RuntimeError:  # op not defined
        return False


def _op_defined() -> bool:
    try:
        torch._C._dispatch_find_schema_or_throw("augnet::tap_mix", "")
    except RuntimeError:
        return False
    return True


@pytest.fixture(scope="module")
def cuda_ops(tmp_path_factory):
    """torch.ops.augnet with the CUDA kernels: already registered, or JIT-built from csrc/."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    toolkit = _cuda_toolkit()
    with pytest.MonkeyPatch.context() as mp:
        if toolkit is not None:
            # cpp_extension takes nvcc, headers and libraries from CUDA_HOME.
            mp.setattr(cpp_extension, "CUDA_HOME", str(toolkit[0].parent.parent))
        if not _has_cuda_kernel():
            _load_through_the_package()
        if not _has_cuda_kernel():
            if toolkit is None:
                pytest.skip("no nvcc with the CUDA headers to JIT-build the CUDA kernels")
            sources = [str(CUDA_SOURCE)]
            if not _op_defined():  # the op schema comes with csrc/tap_mix.cpp (built with the other C++ sources)
                if not OP_SOURCE.is_file():
                    pytest.skip(f"{OP_SOURCE} (the op schema) is missing")
                sources = [str(p) for p in sorted(CSRC.glob("*.cpp"))] + sources
            cpp_extension.load(
                name="augnet_tap_mix_cuda_test",
                sources=sources,
                build_directory=str(tmp_path_factory.mktemp("tap_mix_cuda_build")),
                is_python_module=False,
            )
    return torch.ops.augnet


def _load_through_the_package() -> None:
    """Let augnet load its own extension first: TORCH_LIBRARY(augnet) can be loaded only once per process."""
    try:
        from augnet.ops import _cpp
    except ImportError:
        return
    loader = getattr(_cpp, "load", None)
    if loader is not None:
        loader()


def _args(b, ch, h, w, n, k, color, dtype, seed, scale=0.5):
    """The shared tap_mix inputs (tests/helpers.py) on the GPU, with signed weights and warps of spread ``scale``."""
    return tap_mix_inputs(
        b, ch, h, w, n, k, dtype, color=color, seed=seed, spread=scale, signed_weight=True, device="cuda"
    )


def _reference_grads(args, padding, grad_out):
    x, src, affine, color, weight = args
    leaves = [t.detach().clone().requires_grad_(True) for t in (x, affine, weight)]
    col = None if color is None else color.detach().clone().requires_grad_(True)
    out = tap_mix_reference(leaves[0], src, leaves[1], col, leaves[2], padding)
    inputs = [*leaves, *([col] if col is not None else [])]
    grads = torch.autograd.grad(out, inputs, grad_out)
    gx, ga, gw = grads[:3]
    return out.detach(), gx, ga, (grads[3] if col is not None else None), gw


# Ch 1 and 3: colour sums fused into the main pass; Ch 6: the tiled colour passes.
@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("color", [True, False])
@pytest.mark.parametrize("ch", [1, 3, 6])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_cuda_matches_reference(cuda_ops, padding, color, ch, dtype):
    args = _args(3, ch, 9, 11, 5, 3, color, dtype, seed=ch, scale=1.0)
    out = cuda_ops.tap_mix(*args, padding)
    grad_out = torch.randn_like(out)
    ref, rgx, rga, rgc, rgw = _reference_grads(args, padding, grad_out)
    torch.testing.assert_close(out, ref, **tol("cuda", dtype))
    gx, ga, gc, gw = cuda_ops.tap_mix_backward(grad_out, *args, padding, ALL)
    torch.testing.assert_close(gx, rgx, **tol("cuda", dtype))
    torch.testing.assert_close(ga, rga, **tol("cuda", dtype))
    torch.testing.assert_close(gw, rgw, **tol("cuda", dtype))
    if color:
        torch.testing.assert_close(gc, rgc, **tol("cuda", dtype))
    else:
        assert gc.shape == (0,)


@pytest.mark.parametrize("padding", PADDINGS)
def test_cuda_backward_over_pixel_chunks(cuda_ops, padding):
    # Few taps and a larger image: each tap's pixels are split over several blocks.
    args = _args(2, 3, 96, 80, 2, 2, True, torch.float64, seed=7)
    grad_out = torch.randn(2, 3, 96, 80, dtype=torch.float64, device="cuda")
    ref, rgx, rga, rgc, rgw = _reference_grads(args, padding, grad_out)
    torch.testing.assert_close(cuda_ops.tap_mix(*args, padding), ref, **tol("cuda", torch.float64))
    first = cuda_ops.tap_mix_backward(grad_out, *args, padding, ALL)
    for got, want in zip(first, (rgx, rga, rgc, rgw)):
        torch.testing.assert_close(got, want, **tol("cuda", torch.float64))
    # The per-tap reductions are fixed-order (only grad_x uses atomics).
    second = cuda_ops.tap_mix_backward(grad_out, *args, padding, ALL)
    for a, b in zip(first[1:], second[1:]):
        assert torch.equal(a, b)


def test_cuda_backward_accepts_an_expanded_grad(cuda_ops):
    args = _args(2, 3, 6, 5, 3, 2, False, torch.float64, seed=3)
    grad_out = torch.ones(1, 1, 1, 1, dtype=torch.float64, device="cuda").expand(3, 3, 6, 5)
    _, rgx, rga, _, rgw = _reference_grads(args, "border", grad_out)
    gx, ga, _, gw = cuda_ops.tap_mix_backward(grad_out, *args, "border", ALL)
    torch.testing.assert_close(gx, rgx, **tol("cuda", torch.float64))
    torch.testing.assert_close(ga, rga, **tol("cuda", torch.float64))
    torch.testing.assert_close(gw, rgw, **tol("cuda", torch.float64))


def test_cuda_rejects_bad_inputs(cuda_ops):
    x, src, affine, color, weight = _args(2, 3, 4, 4, 3, 2, True, torch.float32, seed=1)
    with pytest.raises(RuntimeError, match="src must be int64"):
        cuda_ops.tap_mix(x, src.int(), affine, color, weight, "zeros")
    with pytest.raises(RuntimeError, match="weight must have the dtype of x"):
        cuda_ops.tap_mix(x, src, affine, color, weight.double(), "zeros")
    with pytest.raises(RuntimeError, match="affine must be contiguous"):
        cuda_ops.tap_mix(x, src, affine.transpose(0, 1).contiguous().transpose(0, 1), color, weight, "zeros")
    with pytest.raises(RuntimeError, match="color must be None or of shape"):
        cuda_ops.tap_mix(x, src, affine, color[..., :3].contiguous(), weight, "zeros")
    with pytest.raises(RuntimeError, match="padding must be one of"):
        cuda_ops.tap_mix(x, src, affine, color, weight, "wrap")
