#!/usr/bin/env bash
# The checks that need a real CUDA GPU, in one run, most important first (a GPU is lent rarely and briefly):
#   1. the machine and the extension build (CPU and CUDA kernels of tap_mix);
#   2. the GPU tests: tests/test_on_gpu.py (no host synchronisation per step, each GPU backend against the
#      reference at the layer level, fit on the device), the compiled Triton kernels' parity
#      (tests/test_triton.py) and the CUDA kernels' (tests/test_cuda_build.py), and the test files
#      with branches for a CUDA device (test_cpp, test_bench, test_training);
#   3. `augnet bench --device cuda` (tap_mix_cuda.json and .png);
#   4. `augnet demo --quick --device cuda`;
#   5. which C++ errors crash the process there (benchmarks/diag_throws.py: the H200's extension segfaulted on
#      the argument checks whose message holds an integer), saved in throws.json;
#   6. the rest of the default test suite, in what time is left.
# Usage, from the repository root (augnet on PYTHONPATH, no install needed):
#   bash benchmarks/gpu_checks.sh OUT_DIR [SECONDS]
# GPU_CHECK_STEPS picks the steps after the build (default: "tests bench demo throws suite").
# The steps' output goes to OUT_DIR/log.txt, the GPU tests' to gpu_tests.txt, the suite's end to suite.txt, and
# the benchmark's figures to tap_mix_cuda.json; SECONDS (default 400) bounds the whole run.
set -u
out=${1:?usage: gpu_checks.sh OUT_DIR [SECONDS]}
budget=${2:-400}
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
left() { echo $((budget - SECONDS)); }
steps=" ${GPU_CHECK_STEPS:-tests bench demo throws suite} "
want() { [[ $steps == *" $1 "* ]]; }

{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  $py - <<'EOF'
import sys, time, torch
print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda,
      torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0))
try:
    import triton
    print("triton", triton.__version__)
except ImportError as err:
    print("triton: not importable:", err)
from augnet.ops import _cpp, available_backends
start = time.perf_counter()
ok = _cpp.load()
print(f"extension loaded: {ok} in {time.perf_counter() - start:.0f} s; state {_cpp._state}")
print("backends on cuda float32:", available_backends(torch.zeros(1, device="cuda")))
print("backends on cpu float32:", available_backends(torch.zeros(1)))
EOF
} 2>&1 | tee "$out/log.txt"

gpu_files=(test_on_gpu.py test_triton.py test_cuda_build.py test_cpp.py test_gpu_path.py test_gpu_model.py
  test_bench.py test_training.py)
if want tests; then
  # -v: a line per test as it ends, which survives a worker that crashes; --dist load: its scheduler carries on
  # after one (loadfile's stopped with an internal error and no summary, after a segfaulting test).
  # -k: not the ahead-of-time compiles for sm_80/sm_90 (CPU work, which CI runs).
  echo "::: [$SECONDS s] GPU tests" | tee -a "$out/log.txt"
  timeout $(($(left) - 170)) $py -m pytest -v -p no:cacheprovider -n 8 --dist load -m "not slow" -k "not compile" \
    "${gpu_files[@]/#/tests/}" 2>&1 | tee "$out/gpu_tests.txt" | grep -E "FAILED|ERROR|crash|passed|failed" \
    | tail -60 | tee -a "$out/log.txt"
fi
if want bench; then
  echo "::: [$SECONDS s] bench" | tee -a "$out/log.txt"
  timeout $(($(left) - 90)) $py -m augnet bench --device cuda --out "$out" 2>&1 | tee -a "$out/log.txt"
fi
if want demo; then
  echo "::: [$SECONDS s] demo" | tee -a "$out/log.txt"
  timeout 60 $py -m augnet demo --quick --device cuda --no-progress 2>&1 | tail -15 | tee -a "$out/log.txt"
fi
if want throws; then
  echo "::: [$SECONDS s] which C++ errors crash" | tee -a "$out/log.txt"
  timeout 150 $py benchmarks/diag_throws.py "$out/throws.json" 2>&1 | grep "|" | tee -a "$out/log.txt"
fi
if want suite; then
  echo "::: [$SECONDS s] the rest of the suite" | tee -a "$out/log.txt"
  timeout $(($(left) - 10)) $py -m pytest -q -p no:cacheprovider -n 14 --maxfail=30 \
    "${gpu_files[@]/#/--ignore=tests/}" --ignore=tests/test_docs.py 2>&1 | tail -60 > "$out/suite.txt"
  tail -25 "$out/suite.txt" | tee -a "$out/log.txt"
fi
echo "::: [$SECONDS s] done" | tee -a "$out/log.txt"
