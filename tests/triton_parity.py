"""Checks of the Triton ``tap_mix`` backend against ``tap_mix_reference``, for Triton's CPU interpreter.

``tests/test_triton.py`` runs this file in a subprocess with ``TRITON_INTERPRET=1``
(which must be set before triton is imported, so it cannot run inside the main
test session)::

    TRITON_INTERPRET=1 python tests/triton_parity.py float64|float32|gradcheck

It prints one line per case and exits with status 1 when any check fails.
Shapes are tiny because the interpreter runs every program in NumPy.

With ``AUGNET_PARITY_DEVICE=cuda`` (and no interpreter) the same checks run the
compiled kernels on a CUDA GPU: the tensors are drawn on the CPU as before and
moved there, and the ground truth is the float64 reference on the same device.
"""

from __future__ import annotations

import os
import sys
import traceback
from dataclasses import dataclass

import torch
import triton
import triton.language as tl
from helpers import gen, tap_mix_inputs, tol

from augnet.ops import tap_mix_reference
from augnet.ops._triton import _layout, supports, tap_mix_triton
from augnet.ops._triton_kernels import _program_row

F64 = torch.float64
#: Where the cases run: "cpu" (Triton's interpreter) or "cuda" (the compiled kernels).
DEVICE = os.environ.get("AUGNET_PARITY_DEVICE", "cpu")


@dataclass(frozen=True)
class Case:
    dtype: torch.dtype
    padding: str
    color: bool
    k: int = 5
    b: int = 3
    ch: int = 3
    h: int = 5
    w: int = 7
    n: int = 4  # not a multiple of b
    layout: str = "contiguous"  # or "channels_last", "strided"
    # Pixels per program; None: the launcher's choice (one program per row in the interpreter), "gpu": its choice
    # on a GPU, for each kernel.
    block_p: int | str | None = None
    spread: float = 0.4  # std of the random part of the affine maps; large values sample far outside
    src: str = "random"  # or "last": every tap reads the last sample (offsets of s > 0, colliding atomics)
    grad_x: bool = True  # whether x requires grad (False: the kernel skips the scatter)
    # Compare by ||actual - expected|| / ||expected|| <= this instead of element by element: float32 sums over
    # many channels and pixels, whose elementwise error is large where terms cancel (a sum near 0).
    norm_tol: float | None = None

    def __str__(self) -> str:
        dt = str(self.dtype).removeprefix("torch.")
        col = "color" if self.color else "no-color"
        extra = f" layout={self.layout}" if self.layout != "contiguous" else ""
        extra += f" block_p={self.block_p}" if self.block_p else ""
        extra += f" spread={self.spread}" if self.spread != 0.4 else ""
        extra += f" src={self.src}" if self.src != "random" else ""
        extra += "" if self.grad_x else " x-no-grad"
        shape = f"B={self.b} Ch={self.ch} {self.h}x{self.w} N={self.n} K={self.k}"
        return f"{dt} {self.padding} {col} {shape}{extra}"


def make_inputs(case: Case, seed: int):
    """The shared tap_mix inputs (tests/helpers.py) of a case, in its dtype and memory layout, and a grad_out."""
    shape = dict(b=case.b, ch=case.ch, h=case.h, w=case.w, n=case.n, k=case.k, dtype=case.dtype)
    options = dict(color=case.color, layout=case.layout, spread=case.spread, signed_weight=True)
    x, src, affine, color, weight = tap_mix_inputs(**shape, **options, seed=seed, device=DEVICE)
    if case.src == "last":
        src = torch.full_like(src, case.b - 1)
    grad_out = torch.randn(case.n, case.ch, case.h, case.w, generator=gen(1000 + seed), dtype=case.dtype)
    grad_out = grad_out.to(DEVICE)
    return x, src, affine, color, weight, grad_out


def run_case(case: Case, seed: int) -> list[str]:
    """Forward and backward of the Triton op and of the reference; the failures, as messages."""
    x, src, affine, color, weight, grad_out = make_inputs(case, seed)
    names = ["x", "affine", "color", "weight"]

    def leaves(dtype):
        ts = [x, affine, color, weight]
        ts = [t.detach().to(dtype).requires_grad_() if t is not None else None for t in ts]
        if not case.grad_x:
            ts[0].requires_grad_(False)
        return ts

    tri = leaves(case.dtype)
    assert tri[0].stride() == x.stride(), "the layout under test must reach tap_mix_triton"
    out = tap_mix_triton(tri[0], src, tri[1], tri[2], tri[3], case.padding, block_p=case.block_p)
    out.backward(grad_out)
    # The ground truth is the reference in float64 on the same (rounded) inputs: it measures the
    # kernels' own rounding error, not the float32 reference's as well.
    ref = leaves(F64)
    expected = tap_mix_reference(ref[0], src, ref[1], ref[2], ref[3], case.padding)
    expected.backward(grad_out.to(F64))

    failures = []

    def compare(what, actual, want, like):
        if actual is None or want is None:
            if (actual is None) != (want is None):
                failures.append(f"{what}: got {actual is not None}, expected {want is not None} (gradient present)")
            return
        if actual.dtype != like.dtype or actual.shape != like.shape:
            failures.append(f"{what}: got {actual.dtype} {tuple(actual.shape)}, expected {like.dtype} {like.shape}")
            return
        if case.norm_tol is not None:
            err = float((actual.detach().to(F64) - want).norm() / want.norm().clamp_min(1e-300))
            if not err <= case.norm_tol:  # NaN fails too
                failures.append(f"{what}: relative error {err:.3g} over {case.norm_tol:g}")
            return
        try:
            torch.testing.assert_close(actual.to(F64), want, **tol("triton", case.dtype))
        except AssertionError as e:
            failures.append(f"{what}: {e}")

    compare("output", out, expected, expected.to(case.dtype))
    for name, t, r in zip(names, tri, ref):
        if t is not None:
            compare(f"grad {name}", t.grad, r.grad, t)
    return failures


def parity_cases(dtype: torch.dtype) -> list[Case]:
    layouts = ["contiguous", "channels_last", "strided"]
    combos = [(p, c) for p in ("zeros", "border", "reflection") for c in (True, False)]
    # Every padding with and without colour: K = 5, odd 5x7 images, N = 4 rows from B = 3 sources.
    cases = [
        Case(dtype, p, c, ch=3 if p == "zeros" or not c else 2, layout=layouts[i % 3])
        for i, (p, c) in enumerate(combos)
    ]
    # One tap, several pixel blocks per row (partial sums over blocks), odd 9x7 images, one channel.
    cases.append(Case(dtype, "reflection", True, k=1, ch=1, h=9, w=7, block_p=16))
    cases.append(Case(dtype, "zeros", False, k=1, ch=3, h=9, w=7, n=5, block_p=32, layout="channels_last"))
    # Samples far outside the image (several reflections), every tap reading the same source row.
    cases.append(Case(dtype, "reflection", True, k=3, ch=2, h=5, w=3, n=2, spread=2.0, src="last", block_p=16))
    cases.append(Case(dtype, "border", False, k=5, ch=2, n=2, spread=2.0, layout="strided"))
    # x not requiring grad (the kernel skips the scatter); a one-row image.
    cases.append(Case(dtype, "zeros", True, k=2, ch=2, h=1, w=7, n=2, grad_x=False))
    return cases


def gpu_cases(dtype: torch.dtype) -> list[Case]:
    """Launch configurations the GPU launcher picks (not the interpreter's whole images).

    5 to 64 channels (BLOCK_C 8 to 64, so BLOCK_P 256 down to 16), several pixel blocks per row, K = 1,
    and rows that are whole copies of the batch (N = C * B, up to 48 rows as 16 copies), which the program
    order groups by source row.
    """
    specs = [
        # (padding, colour, ch, h, w, n, k, b)
        ("zeros", False, 5, 12, 23, 12, 3, 3),  # BLOCK_C 8, N = 4 copies of 3
        ("border", True, 8, 21, 13, 6, 2, 3),
        ("reflection", False, 13, 11, 19, 8, 1, 4),  # K = 1, BLOCK_C 16
        ("zeros", True, 16, 9, 23, 4, 2, 2),
        ("reflection", True, 32, 7, 13, 4, 1, 2),  # BLOCK_C 32: BLOCK_P 64 (float32) or 32 (float64)
        ("border", False, 64, 5, 9, 6, 2, 3),  # BLOCK_C 64: BLOCK_P 32 or 16
        ("zeros", True, 64, 6, 7, 2, 1, 1),  # B = 1, N = 2 copies, K = 1
        ("zeros", False, 3, 16, 20, 48, 1, 3),  # large N: 16 copies of 3 rows, BLOCK_P 256 (backward 128)
    ]
    norm = 1e-5 if dtype == torch.float32 else None  # float64: element by element, as the other cases
    return [
        Case(dtype, p, c, k=k, b=b, ch=ch, h=h, w=w, n=n, block_p="gpu", norm_tol=norm)
        for p, c, ch, h, w, n, k, b in specs
    ]


@triton.jit
def _order(out_ptr, NPB, ROWS, COPIES):
    pid = tl.program_id(0)
    n, pb = _program_row(pid, NPB, ROWS, COPIES)
    tl.store(out_ptr + 2 * pid, n)
    tl.store(out_ptr + 2 * pid + 1, pb.to(tl.int64))


def run_program_order() -> list[str]:
    """The kernels' program order (``_program_row``): a bijection onto (row, block), copies side by side."""
    failures = []
    for b, n, hw in ((3, 12, 600), (5, 5, 300), (4, 6, 70), (2, 64, 256)):
        lay, programs = _layout((b, 3, 1, hw), n, torch.float32, None)
        got = torch.empty(programs, 2, dtype=torch.long, device=DEVICE)
        _order[(programs,)](got, lay["NPB"], lay["ROWS"], lay["COPIES"])
        pairs = [tuple(p) for p in got.tolist()]
        expected = {(r, p) for r in range(n) for p in range(lay["NPB"])}
        if set(pairs) != expected or len(pairs) != len(expected):
            failures.append(f"B={b} N={n}: programs do not cover each (row, block) once")
        c = lay["COPIES"]
        if n % b == 0 and c != n // b:
            failures.append(f"B={b} N={n}: {c} copies, expected {n // b}")
        for start in range(0, programs, c):  # each group of C consecutive programs: one source row and block
            group = pairs[start : start + c]
            if {(row % b, blk) for row, blk in group} != {(group[0][0] % b, group[0][1])} or len(group) != c:
                failures.append(f"B={b} N={n}: programs {start}..{start + c - 1} are {group}")
                break
    return failures


def run_gradcheck(padding: str, color: bool) -> list[str]:
    case = Case(F64, padding, color, k=2, b=2, ch=2, h=3, w=4, n=3, spread=0.6)
    x, src, affine, col, weight, _ = make_inputs(case, seed=1)
    inputs = tuple(t.requires_grad_() for t in (x, affine, col, weight) if t is not None)

    def f(*ts):
        x, affine, *rest = ts
        col, weight = rest if color else (None, rest[0])
        return tap_mix_triton(x, src, affine, col, weight, padding)

    try:
        # Fast mode (random projections of the Jacobian): the full one takes minutes in the interpreter.
        torch.autograd.gradcheck(f, inputs, fast_mode=True)
    except Exception as e:
        return [f"gradcheck: {e}"]
    return []


# ------------------------------------------------------------------ bad inputs (ops/bad_input.py)


def guarded_reference(x, src, affine, color, weight, padding):
    """The contract of the accelerators' backends, in torch ops: rows with a bad tap NaN, their gradient dropped."""
    from augnet.ops.bad_input import guard_reference

    src, affine, color, weight, bad_row = guard_reference(x, src, affine, color, weight)
    out = tap_mix_reference(x, src, affine, color, weight, padding)
    return torch.where(bad_row[:, None, None, None], torch.nan, out)


#: Each bad value and the flag bit it must raise: (what, row, tap, bit).
BAD = [("affine-nan", 1, 0, 1), ("weight-inf", 2, 1, 4), ("src-high", 3, 2, 8), ("src-negative", 0, 0, 8)]


def run_bad_case(padding: str, color: bool, dtype: torch.dtype, seed: int) -> list[str]:
    """Bad taps in some rows: the Triton op's output, gradients and flag against the guarded reference."""
    from augnet.ops.bad_input import flag

    case = Case(dtype, padding, color, k=3, b=3, ch=3, h=5, w=6, n=6)
    x, src, affine, col, weight, grad_out = make_inputs(case, seed)
    affine, weight, src = affine.clone(), weight.clone(), src.clone()
    expected_bits = 0
    for what, row, tap, bit in BAD:
        if what == "affine-nan":
            affine[row, tap, 0, 1] = float("nan")
        elif what == "weight-inf":
            weight[row, tap] = float("inf")
        elif what == "src-high":
            src[row, tap] = case.b
        else:
            src[row, tap] = -1
        expected_bits |= bit
    if color:
        col = col.clone()
        col[4, 1, 2, 3] = float("nan")  # the bias of the last channel
        expected_bits |= 2
    bad_rows = {0, 1, 2, 3} | ({4} if color else set())
    failures = []
    results = []
    for fn in (tap_mix_triton, guarded_reference):
        f = flag(x.device)
        f.zero_()
        leaves = [t.detach().clone().requires_grad_() if t is not None else None for t in (x, affine, col, weight)]
        out = fn(leaves[0], src, leaves[1], leaves[2], leaves[3], padding)
        out.backward(grad_out)
        results.append((out.detach(), [t.grad if t is not None else None for t in leaves], int(f.item())))
    (out, grads, bits), (ref, ref_grads, ref_bits) = results
    nan_rows = {i for i in range(case.n) if bool(out[i].isnan().all())}
    if nan_rows != bad_rows:
        failures.append(f"NaN rows {sorted(nan_rows)}, expected {sorted(bad_rows)}")
    if bits != expected_bits or ref_bits != expected_bits:
        failures.append(f"flag {bits} (triton) and {ref_bits} (reference), expected {expected_bits}")
    try:
        torch.testing.assert_close(out, ref, equal_nan=True, **tol("triton", dtype))
        for name, g, r in zip(("x", "affine", "color", "weight"), grads, ref_grads):
            if g is not None:
                if not bool(torch.isfinite(g).all()):
                    failures.append(f"grad {name} is not finite")
                torch.testing.assert_close(g, r, **tol("triton", dtype), msg=f"grad {name}")
    except AssertionError as e:
        failures.append(str(e))
    return failures


def main(group: str) -> int:
    if DEVICE == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        print("set TRITON_INTERPRET=1 to run the Triton kernels on CPU")
        return 2
    if DEVICE != "cpu" and os.environ.get("TRITON_INTERPRET") == "1":
        print(f"unset TRITON_INTERPRET to run the compiled kernels on {DEVICE}")
        return 2
    for dtype, expected in ((torch.float32, True), (torch.float64, True), (torch.float16, False)):
        if supports(torch.zeros(1, dtype=dtype, device=DEVICE)) != expected:
            print(f"FAIL supports({DEVICE} {dtype} tensor) is not {expected}")
            return 1
    if group == "bad":
        bad = [("zeros", True, F64), ("border", False, F64), ("reflection", True, torch.float32)]
        work = [
            (f"bad taps {dt} {p} color={c}", lambda p=p, c=c, dt=dt, i=i: run_bad_case(p, c, dt, i))
            for i, (p, c, dt) in enumerate(bad)
        ]
    elif group == "order":
        work = [("program order", run_program_order)]
    elif group in ("gpu-float32", "gpu-float64"):
        dtype = torch.float32 if group == "gpu-float32" else F64
        work = [(str(c), lambda c=c, i=i: run_case(c, seed=100 + i)) for i, c in enumerate(gpu_cases(dtype))]
    elif group == "gradcheck":
        work = [
            (f"gradcheck float64 {p} {'color' if c else 'no-color'}", lambda p=p, c=c: run_gradcheck(p, c))
            for p, c in (("reflection", True), ("zeros", False))
        ]
    else:
        dtype = {"float64": torch.float64, "float32": torch.float32}[group]
        work = [(str(c), lambda c=c, i=i: run_case(c, seed=i)) for i, c in enumerate(parity_cases(dtype))]
    failed = 0
    for name, fn in work:
        try:
            failures = fn()
        except Exception:
            failures = [traceback.format_exc()]
        print(("FAIL " if failures else "ok   ") + name, flush=True)
        for f in failures:
            print("    " + f.replace("\n", "\n    "), flush=True)
        failed += bool(failures)
    print(f"{len(work) - failed} of {len(work)} cases passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
