"""Time augnet's augmentation layer with each tap_mix backend against the eager path.

    python benchmarks/bench_tap_mix.py [--quick] [--sizes 32 128] [--device cpu|cuda] [--threads N] [--out DIR]

The same as ``augnet bench``; the code and what it measures are in
``augnet/bench/``. Results go to ``benchmarks/results/tap_mix_<device>.json``
and ``.png``.
"""

import sys
from pathlib import Path

try:
    from augnet.cli import main
except ImportError:  # a source checkout that is not installed
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from augnet.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
