"""Count the instructions of the compiled CPU tap_mix kernel under callgrind.

    python benchmarks/callgrind_tap_mix.py [--out FILE] [--label TEXT] [--source FILE] [--cxxflags "..."] [--keep DIR]

Wall-clock timings of the kernel move by +-30 % between runs on a shared
machine; instruction counts do not. This script builds csrc/tap_mix.cpp of
this checkout (its own build, see below), then runs a fixed small case under
``valgrind --tool=callgrind`` with collection switched on (client requests,
from a small helper it compiles) only around each call of the two ops
(``tap_mix`` and ``tap_mix_backward``, everything they do included: the call
from Python, argument checks, the channels-last copy of x, allocations, the
kernel), and a profile dumped after each call. It prints and saves (JSON,
``benchmarks/results/callgrind_tap_mix.json`` by default) the instructions
per output pixel x tap x channel, ``N * K * Ch * H * W``, of each call, and
where they go (the functions with the largest self cost).

The case (fixed, seeded): B = 16 images of 3 x 32 x 32, float32, C = 4 copies,
so N = 64 output rows of K = 5 taps, each tap reading its row's own image
(``src[n, k] = n % B``, as the augmentation layer does) through a near-identity
affine warp (identity + N(0, 0.2^2) noise: some samples fall outside the
image). The calls, each made twice (the second is reported; the two agree to
about 0.01 %, allocator bookkeeping):

- ``forward``: zeros padding, no colour map (the layer of geometric transforms
  that ``augnet bench`` times);
- ``backward``: its backward for a first layer, whose input is data: gradients
  of affine and weight only (``output_mask = [False, True, False, True]``);
- ``backward_dx``: the same plus the gradient of x (a layer after another);
- ``backward_expanded``: as ``backward`` with the expanded gradient of
  ``out.sum()`` (stride 0), the gradient ``augnet bench`` passes;
- ``forward_color`` / ``backward_color``: with a colour map, border padding,
  every gradient;
- ``forward_reflection`` / ``backward_reflection``: reflection padding, no
  colour map, gradients of x, affine and weight.

Measurement details. The ops run on one torch thread: valgrind serialises
threads anyway, and one thread gives a count that does not depend on how
OpenMP waits. The kernels' algorithm (and so their work) does not depend on the
thread count (their results are bitwise the same for any count). Valgrind
cannot execute AVX-512, so on x86-64 the extension is built with
``-march=x86-64-v3`` (AVX2 + FMA) instead of ``-march=native``; the counts are
those of that build (``--cxxflags`` replaces the flags). The build is cached in
``$TORCH_EXTENSIONS_DIR/augnet_callgrind`` (or torch's default folder).
Needs valgrind (Debian/Ubuntu: ``apt-get install valgrind``); under callgrind
the run takes a few minutes (most of it importing torch).
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CSRC = ROOT / "csrc" / "tap_mix.cpp"
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "callgrind_tap_mix.json"
DEFAULT_FLAGS = ["-O3", "-fopenmp"] + (["-march=x86-64-v3"] if platform.machine() in ("x86_64", "AMD64") else [])

# The fixed case.
CASE = dict(b=16, ch=3, h=32, w=32, copies=4, k=5, dtype="float32", spread=0.2, seed=0)
# (name, padding, colour map?, output_mask of the backward or None for the forward), in call order.
CALLS = [
    ("forward", "zeros", False, None),
    ("backward", "zeros", False, [False, True, False, True]),
    ("backward_dx", "zeros", False, [True, True, False, True]),
    ("backward_expanded", "zeros", False, [False, True, False, True]),
    ("forward_color", "border", True, None),
    ("backward_color", "border", True, [True, True, True, True]),
    ("forward_reflection", "reflection", False, None),
    ("backward_reflection", "reflection", False, [True, True, False, True]),
]
REPEATS = 2


def build_dir() -> str:
    root = os.environ.get("TORCH_EXTENSIONS_DIR")
    if not root:
        from torch.utils.cpp_extension import get_default_build_root

        root = get_default_build_root()
    path = os.path.join(root, "augnet_callgrind")
    os.makedirs(path, exist_ok=True)
    return path


NAME = "augnet_tap_mix_callgrind"


def build_extension(flags: list[str], source: Path = CSRC, verbose: bool = False) -> None:
    """Build (or find up to date) ``source`` with ``flags``; also registers torch.ops.augnet.*."""
    import logging

    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)  # the CUDA_HOME warning
    from torch.utils import cpp_extension

    cpp_extension.load(
        name=NAME,
        sources=[str(source)],
        extra_cflags=flags,
        extra_ldflags=["-fopenmp"],
        build_directory=build_dir(),
        is_python_module=False,
        verbose=verbose,
    )


# Client requests bracket each op call: collection on, the call, collection off and a
# dump (callgrind's function-name triggers, --toggle-collect and --zero-before, miss an
# op's entry when the dispatcher reaches it through a jump, e.g. on its first call).
BRACKET_C = r"""
#include <valgrind/callgrind.h>
void augnet_cg_start(void) { CALLGRIND_ZERO_STATS; CALLGRIND_TOGGLE_COLLECT; }
void augnet_cg_stop(void) { CALLGRIND_TOGGLE_COLLECT; CALLGRIND_DUMP_STATS; }
"""


def build_bracket() -> str:
    """Compile the client-request helper (needs valgrind's headers, shipped with Debian's valgrind)."""
    folder = build_dir()
    source, library = os.path.join(folder, "bracket.c"), os.path.join(folder, "bracket.so")
    with open(source, "w") as f:
        f.write(BRACKET_C)
    cc = os.environ.get("CC") or shutil.which("cc") or "gcc"
    subprocess.run([cc, "-O2", "-shared", "-fPIC", source, "-o", library], check=True)
    return library


def make_inputs(color: bool):
    import torch

    c = CASE
    g = torch.Generator().manual_seed(c["seed"])
    dtype = getattr(torch, c["dtype"])
    n = c["b"] * c["copies"]
    x = torch.rand(c["b"], c["ch"], c["h"], c["w"], generator=g, dtype=dtype)
    src = (torch.arange(n) % c["b"])[:, None].expand(n, c["k"]).contiguous()
    affine = torch.eye(2, 3, dtype=dtype) + c["spread"] * torch.randn(n, c["k"], 2, 3, generator=g, dtype=dtype)
    weight = torch.rand(n, c["k"], generator=g, dtype=dtype)
    col = torch.eye(c["ch"], c["ch"] + 1, dtype=dtype) + 0.2 * torch.randn(
        n, c["k"], c["ch"], c["ch"] + 1, generator=g, dtype=dtype
    )
    grad = torch.randn(n, c["ch"], c["h"], c["w"], generator=g, dtype=dtype)
    return x, src, affine, col if color else None, weight, grad


def child(only: list[str]) -> None:
    """Runs under callgrind: the calls of CALLS (those named in only), REPEATS times each, in order."""
    import ctypes

    import torch

    torch.set_num_threads(1)
    torch.ops.load_library(os.path.join(build_dir(), NAME + ".so"))  # built by the parent
    bracket = ctypes.CDLL(os.path.join(build_dir(), "bracket.so"))
    start, stop = bracket.augnet_cg_start, bracket.augnet_cg_stop
    forward, backward = torch.ops.augnet.tap_mix.default, torch.ops.augnet.tap_mix_backward.default
    for name, padding, color, mask in CALLS:
        if only and name not in only:
            continue
        x, src, affine, col, weight, grad = make_inputs(color)
        if name == "backward_expanded":
            grad = torch.ones((), dtype=grad.dtype).expand(grad.shape)
        for _ in range(REPEATS):
            # Counted: the op call from Python (a few ten thousand instructions of dispatch) and the op.
            if mask is None:
                start()
                forward(x, src, affine, col, weight, padding)
                stop()
            else:
                start()
                backward(grad, x, src, affine, col, weight, padding, mask)
                stop()


# ------------------------------------------------------------------ reading callgrind's output


def read_profile(path: str) -> tuple[int, dict[str, int]]:
    """Total instructions of one callgrind dump and the self cost of each function in it."""
    names: dict[str, str] = {}
    self_cost: dict[str, int] = {}
    total = None
    fn = None
    skip_next = False
    positions = 1  # position columns before the cost ("positions: line", or "instr line" with --dump-instr)
    name_re = re.compile(r"^\((\d+)\)(?: (.*))?$")

    def resolve(spec: str) -> str:
        m = name_re.match(spec)
        if not m:
            return spec
        if m.group(2) is not None:
            names[m.group(1)] = m.group(2)
        return names.get(m.group(1), spec)

    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("positions:"):
                positions = len(line.split()) - 1
            elif line.startswith("fn="):
                fn = resolve(line[3:])
            elif line.startswith(("cfn=", "cfi=", "cfl=")):
                if line.startswith("cfn="):
                    resolve(line[4:])  # registers a compressed name
            elif line.startswith("calls="):
                skip_next = True  # the next cost line is the inclusive cost of the call
            elif line.startswith(("summary:", "totals:")):
                total = int(line.split()[1])
            elif line and (line[0].isdigit() or line[0] in "+-*"):
                if skip_next:
                    skip_next = False
                    continue
                parts = line.split()
                if fn is not None and len(parts) > positions:
                    self_cost[fn] = self_cost.get(fn, 0) + int(parts[positions])
    if total is None:
        total = sum(self_cost.values())
    return total, self_cost


def short(name: str) -> str:
    """A function name without its argument list and namespaces, for the table."""
    name = re.sub(r"\(anonymous namespace\)::", "", name)
    depth, out = 0, []
    for ch in name:  # drop the outermost parenthesised argument lists
        if ch == "(":
            depth += 1
        if depth == 0:
            out.append(ch)
        if ch == ")":
            depth -= 1
    return "".join(out)[:120]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON file to write (default: %(default)s)")
    p.add_argument("--label", default="", help="a note stored in the JSON (e.g. which kernel)")
    p.add_argument(
        "--source",
        type=Path,
        default=CSRC,
        help="the kernel source to measure (default: this checkout's csrc/tap_mix.cpp; e.g. an older version "
        "from `git show REV:csrc/tap_mix.cpp`)",
    )
    p.add_argument("--cxxflags", default=None, help=f"compiler flags (default: {' '.join(DEFAULT_FLAGS)})")
    p.add_argument("--keep", type=Path, default=None, help="keep callgrind's output files in this folder")
    p.add_argument("--top", type=int, default=8, help="functions listed per call (default: %(default)s)")
    p.add_argument("--only", default="", help="comma-separated names of the calls to make (default: all)")
    p.add_argument(
        "--valgrind-args",
        default="",
        help='more callgrind options, e.g. "--dump-instr=yes" (with --cxxflags "... -g", --keep: callgrind_annotate)',
    )
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    flags = args.cxxflags.split() if args.cxxflags is not None else DEFAULT_FLAGS

    only = [c for c in args.only.split(",") if c]
    unknown = sorted(set(only) - {c[0] for c in CALLS})
    if unknown:
        p.error(f"unknown calls {unknown}; known: {[c[0] for c in CALLS]}")
    if args.child:
        child(only)
        return 0

    valgrind = shutil.which("valgrind")
    if valgrind is None:
        print("callgrind_tap_mix: valgrind not found (Debian/Ubuntu: apt-get install valgrind)", file=sys.stderr)
        return 2
    print(f"building {args.source} with {' '.join(flags)} ...", file=sys.stderr)
    build_extension(flags, args.source.resolve())  # outside valgrind: the child loads the library built here
    build_bracket()

    workdir = Path(tempfile.mkdtemp(prefix="augnet_callgrind_")) if args.keep is None else args.keep
    workdir.mkdir(parents=True, exist_ok=True)
    for old in glob.glob(str(workdir / "cg.out*")):
        os.remove(old)
    cmd = [valgrind, "--tool=callgrind", "--collect-atstart=no", f"--callgrind-out-file={workdir / 'cg.out'}"]
    cmd += args.valgrind_args.split()
    cmd += [sys.executable, str(Path(__file__).resolve()), "--child", "--only", args.only]
    env = dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="passive")
    print("running the case under callgrind (a few minutes) ...", file=sys.stderr)
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        print(proc.stdout[-3000:], proc.stderr[-3000:], sep="\n", file=sys.stderr)
        print(f"callgrind_tap_mix: valgrind exited with {proc.returncode}", file=sys.stderr)
        return 1

    # One dump per op call (cg.out.1, cg.out.2, ...), in call order; the final dump at exit is empty.
    dumps = sorted(
        (p for p in glob.glob(str(workdir / "cg.out.*")) if re.search(r"\.\d+$", p)),
        key=lambda p: int(p.rsplit(".", 1)[1]),
    )
    calls = [c for c in CALLS if not only or c[0] in only]
    expected = len(calls) * REPEATS
    if len(dumps) < expected:
        print(f"callgrind_tap_mix: expected {expected} profile dumps, found {len(dumps)}", file=sys.stderr)
        return 1
    c = CASE
    n = c["b"] * c["copies"]
    units = n * c["k"] * c["ch"] * c["h"] * c["w"]
    records = []
    print(f"\ninstructions per output pixel x tap x channel ({units} of them per call), one thread:")
    for i, (name, padding, color, mask) in enumerate(calls):
        totals = []
        for r in range(REPEATS):
            total, costs = read_profile(dumps[i * REPEATS + r])
            totals.append(total)
        top = sorted(costs.items(), key=lambda kv: -kv[1])[: args.top]
        rec = {
            "call": name,
            "padding": padding,
            "color": color,
            "output_mask": mask,
            "instructions": totals[-1],
            "instructions_each_repeat": totals,
            "per_pixel_tap_channel": totals[-1] / units,
            "top_self_cost": [{"function": short(f), "instructions": v, "share": v / total} for f, v in top],
        }
        records.append(rec)
        spread = (max(totals) - min(totals)) / max(totals)
        rec["repeat_spread"] = spread
        agree = f"  (repeats differ by {100 * spread:.2f} %)" if spread > 1e-3 else ""
        print(f"  {name:20s} {rec['per_pixel_tap_channel']:8.2f}   ({totals[-1]:,} instructions){agree}")
        for t in rec["top_self_cost"][:4]:
            print(f"      {100 * t['share']:5.1f} %  {t['function']}")

    result = {
        "label": args.label,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "case": dict(CASE, n=n, units_per_call=units, threads=1),
        "source": str(args.source),
        "cxxflags": flags,
        "valgrind": subprocess.run([valgrind, "--version"], capture_output=True, text=True).stdout.strip(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "torch": __import__("torch").__version__,
        "records": records,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwrote {args.out}", file=sys.stderr)
    if args.keep is None:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
