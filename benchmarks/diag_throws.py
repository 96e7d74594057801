"""Which C++ errors crash the process on this machine: a diagnosis for the GPU machine's segfaults.

On the lent H200 (g++ 13.3, ``-march=native`` on a Xeon, torch 2.11) the tap_mix extension crashed with
signal 11 on exactly the argument checks whose message formats an integer (out-of-range ``src``: the CPU
kernel; a colour tensor of the wrong shape: the CUDA kernel), and raised a RuntimeError on those whose message
is text only (a dtype, the padding's name). The same sources built elsewhere raise on all of them. This calls
the real extension's CPU checks, one of each kind, then builds tiny extensions, with the extension's flags and
without ``-march=native`` (one build where the flags lack it; with a CUDA GPU also one linked with CUDA), whose
functions raise a ``TORCH_CHECK`` with text only, with an integer, and each of those after reading a tensor's
value (``.item()``, which the ``src`` check does first), each call in a fresh process: a crash there shows
which of the three (the flag, the integer, the read) it takes.

Usage: ``python benchmarks/diag_throws.py [OUT.json]`` (builds in a temporary folder; about a minute on
two cores; with a CUDA GPU also a build linked as the extension is there). Prints one line per call and
saves them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE = r"""
#include <torch/extension.h>
void text_only() { TORCH_CHECK(false, "text only"); }
void integer(int64_t n) { TORCH_CHECK(false, "integer ", n); }
void read_then_text(const at::Tensor& t) { auto v = t.max().item<int64_t>(); (void)v; TORCH_CHECK(false, "text"); }
void read_then_integer(const at::Tensor& t) { auto v = t.max().item<int64_t>(); TORCH_CHECK(false, "read ", v); }
"""
FUNCTIONS = ["text_only", "integer", "read_then_text", "read_then_integer"]
CALLS = {
    "text_only": "m.text_only()",
    "integer": "m.integer(3)",
    "read_then_text": "m.read_then_text(torch.arange(4))",
    "read_then_integer": "m.read_then_integer(torch.arange(4))",
}
# The real extension's checks (CPU kernel), one of each kind.
REAL = {
    "src int32 (text)": "{**a, 'src': a['src'].int()}",
    "src out of range (read, integer)": "{**a, 'src': a['src'] + 3}",
    "affine shape (integer)": "{**a, 'affine': a['affine'][:, :, :1]}",
    "padding (text)": "{**a, 'padding': 'wrap'}",
}


def _call(code: str) -> dict:
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return {"exit": None, "said": "timed out after 120 s"}
    last = (done.stdout.strip().splitlines() or [""])[-1]
    return {"exit": done.returncode, "said": last[:120]}


class _Rows(list):
    """The rows so far, each printed and the file rewritten as it comes (a run cut short keeps them)."""

    def __init__(self, out: str | None) -> None:
        super().__init__()
        self.out = out

    def add(self, rows: list[dict]) -> None:
        for r in rows:
            self.append(r)
            print(f"{r['build']:>28} | {r['call']:<34} | exit {r['exit']!s:>4} | {r['said']}", flush=True)
            if self.out:
                Path(self.out).write_text(json.dumps(self, indent=1) + "\n")


CUDA_SOURCE = "__global__ void augnet_diag_nothing() {}\n"


def _tiny(flags: list[str], folder: Path, cuda: bool = False) -> list[dict]:
    from torch.utils.cpp_extension import load_inline

    name = "augnet_diag_throws_" + ("native" if "-march=native" in flags else "generic") + ("_cuda" if cuda else "")
    build = folder / name
    build.mkdir()
    # With a CUDA source the module is linked as the tap_mix extension is on a GPU machine (cudart, torch_cuda).
    load_inline(
        name,
        SOURCE,
        cuda_sources=CUDA_SOURCE if cuda else None,
        functions=FUNCTIONS,
        extra_cflags=flags,
        extra_ldflags=["-fopenmp"],
        build_directory=str(build),
        verbose=False,
        with_cuda=cuda,
    )
    so = next(build.glob(f"{name}*.so"))
    rows = []
    for fn, call in CALLS.items():
        code = (
            "import importlib.util, torch\n"
            f"spec = importlib.util.spec_from_file_location({name!r}, {str(so)!r})\n"
            "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
            f"try:\n    {call}\n    print('no error')\n"
            "except RuntimeError as e:\n    print('RuntimeError:', str(e).splitlines()[0])\n"
        )
        rows.append({"build": " ".join(flags) + (" +cuda" if cuda else ""), "call": fn, **_call(code)})
    return rows


def _real() -> list[dict]:
    rows = []
    root = Path(__file__).resolve().parents[1]
    for what, change in REAL.items():
        code = (
            f"import sys; sys.path[:0] = [{str(root)!r}, {str(root / 'tests')!r}]\n"
            "import torch\nfrom augnet.ops import _cpp\nassert _cpp.load(), _cpp._state\n"
            "from helpers import tap_mix_inputs\nx, src, affine, color, weight = tap_mix_inputs()\n"
            "a = dict(x=x, src=src, affine=affine, color=color, weight=weight, padding='zeros')\n"
            f"try:\n    torch.ops.augnet.tap_mix(**{change})\n    print('no error')\n"
            "except RuntimeError as e:\n    print('RuntimeError:', str(e).splitlines()[0])\n"
        )
        rows.append({"build": "the tap_mix extension", "call": what, **_call(code)})
    return rows


def main(out: str | None = None) -> list[dict]:
    import torch

    from augnet.ops import _cpp

    flags = _cpp._cxx_flags()
    rows = _Rows(out)
    rows.add(_real())  # first: what the H200 showed, with the extension built the usual way
    with tempfile.TemporaryDirectory() as tmp:
        for variant in (flags, [f for f in flags if f != "-march=native"]):
            if variant is not flags and variant == flags:
                continue  # no -march=native here: one build says it all
            rows.add(_tiny(variant, Path(tmp)))
        if torch.cuda.is_available():
            rows.add(_tiny(flags, Path(tmp), cuda=True))
    return list(rows)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
