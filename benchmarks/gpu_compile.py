"""Compile the GPU kernels for sm_80 and sm_90 without a GPU; record registers, shared memory and spills.

    python benchmarks/gpu_compile.py [--quick]

The same as ``python -m augnet.bench.gpu_compile`` (see ``augnet/bench/gpu_compile.py``):
every Triton kernel specialisation the launcher makes, through Triton's own
ptxas, and csrc/tap_mix_cuda.cu with ``nvcc --resource-usage`` where nvcc
exists. Writes ``benchmarks/results/triton_resources.json`` and
``cuda_resources.json``; exit status 1 on any compile error or spill.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from augnet.bench.gpu_compile import _command  # noqa: E402

if __name__ == "__main__":
    # --help says what it does, a misspelt option exits 2 (anything but --quick was a full compile)
    sys.exit(_command(out_dir=str(ROOT / "benchmarks" / "results"), prog="python benchmarks/gpu_compile.py"))
