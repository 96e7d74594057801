"""The augmentation layer's GPU cost on paper: a model of bytes moved and occupancy, not a measurement.

For the layer ``augnet bench`` times (the five geometric transforms, training
mode: K = 6 taps per copy with the warps' identity tap, zeros padding, no
colour map, float32, C = 4 copies) at B = 64 and 256 and 3 x 32 x 32 and
3 x 224 x 224 images, in the three modes of ``augnet bench``:

- ``floor``: the fewest bytes any implementation must move through device
  memory: ``x`` read once and the output written once (forward); the output
  gradient read once more and ``x`` once more (backward of the layer's
  parameters); the gradient of ``x`` written once (``+dx``). The taps'
  parameters (warps, weights) are counted too; they are small.
- ``Triton, L2 holds``: what the Triton kernels move when a source image stays
  in L2 between its C copies: the floor, plus the partial sums of the
  per-tap gradients (written by each program, read back by torch's sum) and
  the zero-fill of ``x``'s gradient (a separate kernel).
- ``Triton, L2 does not``: the same when it does not: ``x`` read once per copy,
  and each copy's atomic adds into ``x``'s gradient fetching and writing back
  its lines. The kernels order their programs so that the C copies of one
  pixel block run side by side (:mod:`augnet.ops._triton_kernels`): then the
  first figure applies whatever the batch. In the former copy-major order
  the second applied once ``2 B`` images (a batch of ``x`` and of output
  written between two copies of an image) outgrew half of L2, a margin for
  the rest of the traffic (``old order`` column).
- times: bytes over the device's memory bandwidth (datasheet figures,
  :data:`DEVICES`): what a bandwidth-bound kernel would take;
- occupancy: programs per SM and warps per SM (of 64) implied by the compiled
  kernel's registers per thread and shared memory (compiled for the device's
  architecture by :mod:`augnet.bench.gpu_compile`, no GPU needed), and the
  number of programs over the resident slots (waves).

Not modelled: instruction throughput (4 bilinear corners per tap and channel,
float atomics), caches above L2, launch latency, and torch's own kernels around
the op (sampling the parameters, the softmax). A real GPU is the only judge:
``augnet bench --device cuda`` measures the same cases.

``python -m augnet.bench.gpu_model --model h100`` prints the table.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

from augnet._checks import is_int

__all__ = ["DEVICES", "GpuSpec", "format_on_paper", "occupancy", "on_paper"]


@dataclass(frozen=True)
class GpuSpec:
    """Datasheet figures of one GPU (per SM: the CUDA occupancy limits of its architecture)."""

    name: str
    arch: int  # compute capability, e.g. 90
    sms: int
    bandwidth: float  # bytes per second (HBM)
    l2: int  # bytes
    registers_per_sm: int = 65536
    shared_per_sm: int = 228 * 1024
    max_warps_per_sm: int = 64
    max_blocks_per_sm: int = 32


#: The models known to :func:`on_paper`: SXM parts, datasheet bandwidths.
DEVICES = {
    "h100": GpuSpec("H100 SXM5 80 GB", 90, 132, 3.35e12, 50 * 2**20),
    "h200": GpuSpec("H200 SXM 141 GB", 90, 132, 4.8e12, 50 * 2**20),
    "a100": GpuSpec("A100 SXM4 80 GB", 80, 108, 2.039e12, 40 * 2**20, shared_per_sm=164 * 1024),
}

MODES = ("forward", "forward+backward", "forward+backward+dx")
CASES = [(b, size) for size in (32, 224) for b in (64, 256)]
CH, COPIES, TAPS, FLOAT = 3, 4, 6, 4  # channels, copies, taps (5 warps + the identity), bytes per value


def occupancy(spec: GpuSpec, registers: int, shared: int, warps: int) -> tuple[int, int]:
    """``(programs per SM, warps per SM)`` for a kernel of ``registers`` per thread, ``shared`` bytes and ``warps``.

    Registers are allocated per warp in units of 256; shared memory as asked.

    Raises:
        TypeError: ``spec`` is not a :class:`GpuSpec`, or a count is not an int.
        ValueError: ``registers`` or ``shared`` is negative, or ``warps`` below 1.
    """
    if not isinstance(spec, GpuSpec):
        raise TypeError(f"spec must be a GpuSpec (e.g. DEVICES['h100']), got {type(spec).__name__}: {spec!r}")
    for name, value, least in (("registers", registers, 0), ("shared", shared, 0), ("warps", warps, 1)):
        if not is_int(value):
            raise TypeError(f"{name} must be an int, got {type(value).__name__}: {value!r}")
        if value < least:
            raise ValueError(f"{name} must be >= {least}, got {value}")
    per_warp = math.ceil(registers * 32 / 256) * 256
    by_registers = (spec.registers_per_sm // per_warp) // warps if per_warp else spec.max_blocks_per_sm
    by_shared = spec.shared_per_sm // shared if shared else spec.max_blocks_per_sm
    blocks = min(by_registers, by_shared, spec.max_blocks_per_sm, spec.max_warps_per_sm // warps)
    return blocks, blocks * warps


def _traffic(b: int, size: int, mode: str, npb: int) -> dict[str, int]:
    """Bytes through device memory: the floor, and the Triton kernels' with and without L2 reuse across copies
    (``npb``: the backward kernel's programs per row, each writing a partial sum per tap)."""
    image = CH * size * size * FLOAT
    n = b * COPIES
    taps = n * TAPS * (7 * FLOAT + 8)  # warp (6) and weight per tap, src (int64)
    floor = b * image + n * image + taps  # x once, out once
    held = floor
    lost = n * image + n * image + taps  # x once per copy
    if mode != "forward":
        grads = n * TAPS * 7 * FLOAT  # gradients of the warps and weights, written once
        floor += n * image + b * image + grads  # grad_out once, x once more
        partial = n * npb * TAPS * 7 * FLOAT  # the per-program partial sums, written then read by torch
        held += n * image + b * image + 2 * partial + grads
        lost += n * image + n * image + 2 * partial + grads
        if mode == "forward+backward+dx":
            floor += b * image  # grad_x written once
            held += b * image + b * image  # zero-filled, then written back once from L2
            lost += b * image + 2 * n * image  # zero-filled, then fetched and written back per copy
    return {"floor": floor, "held": held, "lost": lost}


@functools.cache
def _resources(spec: GpuSpec, kernel: str, b: int, size: int) -> dict | None:
    """Registers, shared memory and warps of a kernel for this device: compiled here, else the saved table."""
    from augnet.bench.gpu_compile import TritonCase, compile_triton

    case = TritonCase(kernel, "zeros", False, "float32", CH, b=b, size=size, copies=COPIES, k=TAPS)
    try:
        record = compile_triton(case, spec.arch)
    except ImportError:  # no triton: the table benchmarks/gpu_compile.py saved, same case where it has one
        saved = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "triton_resources.json"
        if not saved.exists():
            return None
        for r in json.loads(saved.read_text())["records"]:
            same = (r["kernel"], r["padding"], r["color"], r["dtype"], r["channels"], r["arch"])
            if same == (kernel, "zeros", False, "float32", CH, f"sm_{spec.arch}") and r["k"] == TAPS:
                return r
        return None
    return None if record["error"] else record


def on_paper(model: str = "h100") -> list[dict]:
    """One row per (batch, image size, mode) of the model described above, for GPU ``model`` (:data:`DEVICES`)."""
    if not isinstance(model, str) or model not in DEVICES:  # a list: no key to look up
        raise ValueError(f"model must be one of {sorted(DEVICES)}, got {model!r}")
    from augnet.ops._triton import gpu_block_p

    spec = DEVICES[model]
    rows = []
    for b, size in CASES:
        hw = size * size
        blocks = {k: -(-hw // gpu_block_p(hw, 4, _float32(), backward=k != "forward")) for k in ("forward", "backward")}
        image = CH * hw * FLOAT
        old_order_holds = 2 * b * image <= spec.l2 // 2  # a batch of x and of output between two copies
        for mode in MODES:
            t = _traffic(b, size, mode, blocks["backward"])
            backward = "backward+dx" if mode.endswith("dx") else "backward"
            kernels = ["forward"] if mode == "forward" else ["forward", backward]
            occ = []
            for kernel in kernels:
                r = _resources(spec, kernel, b, size)
                if r is None:
                    occ.append(None)
                    continue
                per_sm, warps = occupancy(spec, r["registers"], r["shared"], r["num_warps"])
                programs = b * COPIES * blocks["forward" if kernel == "forward" else "backward"]
                occ.append(
                    {
                        "kernel": kernel,
                        "BLOCK_P": r["BLOCK_P"],
                        "registers": r["registers"],
                        "shared": r["shared"],
                        "programs": programs,
                        "programs_per_sm": per_sm,
                        "warps_per_sm": warps,
                        "waves": programs / (per_sm * spec.sms) if per_sm else float("inf"),
                    }
                )
            rows.append(
                {
                    "device": spec.name,
                    "B": b,
                    "image": f"{CH}x{size}x{size}",
                    "mode": mode,
                    "bytes_floor": t["floor"],
                    "bytes_l2_holds": t["held"],
                    "bytes_l2_does_not": t["lost"],
                    "old_order": "holds" if old_order_holds else "does not",
                    "time_floor_s": t["floor"] / spec.bandwidth,
                    "time_l2_holds_s": t["held"] / spec.bandwidth,
                    "time_l2_does_not_s": t["lost"] / spec.bandwidth,
                    "occupancy": occ,
                }
            )
    return rows


def _float32():
    import torch

    return torch.float32


def _mb(x: float) -> str:
    return f"{x / 1e6:.1f} MB"


def _us(s: float) -> str:
    return f"{s * 1e6:.1f} us" if s < 1e-3 else f"{s * 1e3:.2f} ms"


def format_on_paper(rows: list[dict]) -> str:
    """The rows of :func:`on_paper` as a markdown table.

    The ``rows`` of the file ``--json`` writes, read back, give the same table (an infinite ``waves`` saved as
    ``"inf"``).

    Raises:
        TypeError: ``rows`` is not a list of dicts (the whole ``--json`` file: pass its ``"rows"``), or a cell
            holds no number.
        ValueError: a key the table shows is missing (the rows of another function, or of another version).
    """
    from augnet.bench.inference import _cell, _need, _rows, _value

    fn, source = "format_on_paper", "the rows of on_paper (or the 'rows' of the file --json writes, read back)"
    if isinstance(rows, dict) and "rows" in rows:
        raise TypeError(f"{fn}: rows must be a list of dicts, got the dict of the --json file: pass its 'rows'")
    keys = ("B", "image", "mode", "bytes_floor", "bytes_l2_holds", "bytes_l2_does_not", "old_order",
            "time_floor_s", "time_l2_holds_s", "occupancy")  # fmt: skip
    rows = _rows(rows, keys, "rows", fn, source)
    for i, r in enumerate(rows):
        if not isinstance(r["occupancy"], (list, tuple)):
            raise TypeError(f"{fn}: rows[{i}]['occupancy'] must be a list (a dict or None per kernel), got "
                            f"{type(r['occupancy']).__name__}")  # fmt: skip
        for j, o in enumerate(r["occupancy"]):
            if o is not None:
                _need(o, ("registers", "warps_per_sm", "programs", "waves"), f"rows[{i}]['occupancy'][{j}]", fn,
                      source)  # fmt: skip
    head = (
        "| B | image | mode | floor | Triton, L2 holds | Triton, L2 does not | old order | time at floor "
        "| time, L2 holds | registers / warps per SM (fwd; bwd) | programs / waves (fwd; bwd) |"
    )
    lines = [head, "|" + "---|" * 11]
    for i, r in enumerate(rows):
        where = f"rows[{i}]"
        kernels = [(o, f"{where}['occupancy'][{j}]") for j, o in enumerate(r["occupancy"])]
        occ = "; ".join("?" if o is None else f"{o['registers']} / {o['warps_per_sm']}" for o, _ in kernels)
        waves = "; ".join("?" if o is None else f"{o['programs']} / {_cell(o, 'waves', '.1f', at, fn)}"
                          for o, at in kernels)  # fmt: skip
        floor, held, lost = (_mb(_value(r, k, where, fn)) for k in ("bytes_floor", "bytes_l2_holds",
                                                                      "bytes_l2_does_not"))  # fmt: skip
        at_floor, at_held = (_us(_value(r, k, where, fn)) for k in ("time_floor_s", "time_l2_holds_s"))
        lines.append(
            f"| {r['B']} | {r['image']} | {r['mode']} | {floor} | {held} | {lost} | {r['old_order']} | {at_floor} | "
            f"{at_held} | {occ} | {waves} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="h100", choices=sorted(DEVICES))
    parser.add_argument("--json", default=None, help="also write the rows to this JSON file")
    args = parser.parse_args(argv)
    if args.json is not None:  # checked before the model runs and prints: not a table followed by a traceback
        from augnet._checks import folder_problem

        target = Path(args.json)
        problem = folder_problem(target.parent, "--json")
        if not args.json.strip():  # e.g. --json "$FILE" with FILE unset: no file would be written, silently
            problem = f"--json is empty ({args.json!r}); name a file"
        elif target.is_dir():
            problem = f"--json {args.json} is a folder, not a file"
        if problem is not None:
            print(f"{parser.prog}: error: {problem}", file=sys.stderr)
            return 2
    rows = on_paper(args.model)
    spec = DEVICES[args.model]
    print(
        f"{spec.name} on paper (a model, not a measurement): {spec.bandwidth / 1e12:.2f} TB/s, "
        f"{spec.l2 // 2**20} MiB L2, {spec.sms} SMs; layer of augnet bench: C = {COPIES}, K = {TAPS}, float32"
    )
    print(format_on_paper(rows))
    if args.json is not None:
        from augnet._json import dumps as strict_json  # an unplaceable kernel's infinite waves: "inf", not Infinity

        Path(args.json).parent.mkdir(parents=True, exist_ok=True)  # a folder that is not there yet: made
        Path(args.json).write_text(strict_json({"model": args.model, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
