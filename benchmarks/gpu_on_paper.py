"""The augmentation layer on a GPU, on paper: bytes moved, bandwidth-bound times and occupancy (a model).

    python benchmarks/gpu_on_paper.py [--model h100|h200|a100]

The same as ``python -m augnet.bench.gpu_model``; what it models is in
``augnet/bench/gpu_model.py``. Prints the table and writes
``benchmarks/results/gpu_on_paper_<model>.json``. No GPU needed (the kernels'
registers come from compiling them for the model's architecture).
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from augnet.bench.gpu_model import main  # noqa: E402

if __name__ == "__main__":
    args = sys.argv[1:]
    model = args[args.index("--model") + 1] if "--model" in args else "h100"
    out = ROOT / "benchmarks" / "results" / f"gpu_on_paper_{model}.json"
    sys.exit(main([*args, "--json", str(out)]))
