"""Cost of a per-instance augmentation layer's training step against the global layer's (issue 27).

    python benchmarks/instance_cost.py [--repeats 30] [--callgrind] [--kernel-size 1] [--out benchmarks/results]

The case: B = 64 images of 3 x 32 x 32, C = 4 copies, the same five transforms
(Rotate, TranslateX, ShearX, Brightness, HorizontalFlip) in both layers, CPU,
one thread. A training step is the layer's forward pass, the selective
regulariser, and the backward pass of ``out.square().mean() + lam * R``; the
per-instance layer's includes its conditioner (the default
:class:`~augnet.instance.TinyConditioner`, ``hidden=16``), whose own step
(forward and backward on the clean batch) is timed separately. ``--kernel-size 1``
times the pointwise conditioner instead (1x1 convolutions at full resolution;
saved as ``instance_cost_kernel_1.*``).

Two measures, because wall-clock timings on a shared machine move by tens of
per cent between runs:

- wall clock (default): the three steps interleaved (global, per-instance,
  conditioner alone, repeated), the median of each; the ratio is taken within
  the one run. Backend ``auto`` (the C++ kernel).
- instructions (``--callgrind``): the same steps run under
  ``valgrind --tool=callgrind``, collection switched on only around each step
  (client requests, the helper of ``benchmarks/callgrind_tap_mix.py``); the
  layers use the ``reference`` backend there, because the C++ kernel built for
  this machine may use AVX-512, which valgrind cannot execute.

Prints the table and writes ``instance_cost.json`` and ``instance_cost.png``
under ``--out``. A benchmark reports; it asserts no time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
B, C, CH, H, W = 64, 4, 3, 32, 32
STEPS = ("global", "instance", "conditioner")


def make(backend: str, kernel_size: int):
    import torch

    import augnet
    from augnet.transforms import image as T

    def transforms():
        return [T.Rotate(), T.TranslateX(), T.ShearX(), T.Brightness(), T.HorizontalFlip()]

    torch.manual_seed(0)
    glob = augnet.AugmentationLayer(transforms(), init_magnitude=0.3, backend=backend)
    inst = augnet.ConditionedAugmentationLayer(transforms(), channels=CH, hidden=16, init_magnitude=0.3,
                                               backend=backend, kernel_size=kernel_size)  # fmt: skip
    with torch.no_grad():  # a trained conditioner's outputs are not all 0
        inst.conditioner.head.weight.normal_(0, 0.1)
    x = torch.rand(B, CH, H, W, generator=torch.Generator().manual_seed(1))

    def step(layer):
        def run():
            out = layer(x, copies=C)
            loss = out.square().mean() + 0.5 * augnet.selective_regularizer(layer)
            loss.backward()
            layer.zero_grad(set_to_none=True)

        return run

    def conditioner():
        inst.conditioner(x).square().mean().backward()
        inst.conditioner.zero_grad(set_to_none=True)

    return {"global": step(glob), "instance": step(inst), "conditioner": conditioner}


def wall_clock(repeats: int, kernel_size: int) -> dict:
    import torch

    torch.set_num_threads(1)
    steps = make("auto", kernel_size)
    for fn in steps.values():  # warm-up (the kernel's first call, allocator)
        for _ in range(3):
            fn()
    times = {name: [] for name in steps}
    for _ in range(repeats):
        for name, fn in steps.items():  # interleaved: a slow spell of the machine hits all three alike
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    med = {name: statistics.median(t) for name, t in times.items()}
    return {
        "median_ms": {k: 1e3 * v for k, v in med.items()},
        "ratio_instance_to_global": med["instance"] / med["global"],
        "ratio_conditioner_to_global": med["conditioner"] / med["global"],
        "repeats": repeats,
        "backend": "auto",
    }


def child(repeats: int, kernel_size: int) -> None:
    """Runs under callgrind: each step ``repeats`` times, each call bracketed and dumped."""
    import ctypes

    import torch

    sys.path.insert(0, str(HERE))
    from callgrind_tap_mix import build_dir

    torch.set_num_threads(1)
    bracket = ctypes.CDLL(os.path.join(build_dir(), "bracket.so"))
    steps = make("reference", kernel_size)
    for name in STEPS:
        steps[name]()  # warm-up, not counted
        for _ in range(repeats):
            bracket.augnet_cg_start()
            steps[name]()
            bracket.augnet_cg_stop()


def instructions(repeats: int, kernel_size: int) -> dict:
    sys.path.insert(0, str(HERE))
    from callgrind_tap_mix import build_bracket, read_profile

    build_bracket()
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "cg.out")
        cmd = ["valgrind", "--tool=callgrind", "--collect-atstart=no", f"--callgrind-out-file={out}",
               sys.executable, __file__, "--child", str(repeats), "--kernel-size", str(kernel_size)]  # fmt: skip
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        subprocess.run(cmd, check=True, env=env, capture_output=True, text=True)
        dumps = sorted((p for p in os.listdir(folder) if p.startswith("cg.out.")), key=lambda p: int(p.split(".")[-1]))
        totals = [read_profile(os.path.join(folder, p))[0] for p in dumps]
    if len(totals) != repeats * len(STEPS):
        raise RuntimeError(f"expected {repeats * len(STEPS)} callgrind dumps, got {len(totals)}")
    per = {name: statistics.median(totals[i * repeats : (i + 1) * repeats]) for i, name in enumerate(STEPS)}
    return {
        "instructions": per,
        "ratio_instance_to_global": per["instance"] / per["global"],
        "ratio_conditioner_to_global": per["conditioner"] / per["global"],
        "repeats": repeats,
        "backend": "reference",
    }


def plot(results: dict, path: Path) -> Path:
    sys.path.insert(0, str(HERE.parent))
    from augnet.viz import require_matplotlib, save_figure

    plt = require_matplotlib()
    panels = [(k, results[k]) for k in ("wall_clock", "callgrind") if k in results]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 3.4), squeeze=False)
    for ax, (kind, r) in zip(axes[0], panels, strict=True):
        values = r["median_ms"] if kind == "wall_clock" else {k: v / 1e6 for k, v in r["instructions"].items()}
        ax.bar(list(values), list(values.values()), color=["C1", "C0", "C2"])
        unit = "ms (median)" if kind == "wall_clock" else "million instructions"
        ax.set_ylabel(unit)
        ax.set_title(f"{kind.replace('_', ' ')}: per-instance / global = {r['ratio_instance_to_global']:.2f}",
                     fontsize=9)  # fmt: skip
    return save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--callgrind", action="store_true", help="also count instructions under callgrind")
    parser.add_argument("--callgrind-repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--kernel-size", type=int, default=3, choices=(3, 1), help="the conditioner's (default 3)")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    k = args.kernel_size
    if args.child is not None:
        child(args.child, k)
        return 0
    results = {"case": {"B": B, "C": C, "image": [CH, H, W], "threads": 1, "kernel_size": k,
                        "transforms": ["Rotate", "TranslateX", "ShearX", "Brightness", "HorizontalFlip"]},
               "wall_clock": wall_clock(args.repeats, k)}  # fmt: skip
    w = results["wall_clock"]
    print(f"wall clock (median of {args.repeats}, interleaved): " + ", ".join(
        f"{k} {v:.2f} ms" for k, v in w["median_ms"].items()))  # fmt: skip
    print(f"  per-instance / global = {w['ratio_instance_to_global']:.3f}; conditioner alone / global = "
          f"{w['ratio_conditioner_to_global']:.3f}")  # fmt: skip
    if args.callgrind:
        results["callgrind"] = cg = instructions(args.callgrind_repeats, k)
        print("instructions (callgrind, reference backend): " + ", ".join(
            f"{k} {v / 1e6:.1f} M" for k, v in cg["instructions"].items()))  # fmt: skip
        print(f"  per-instance / global = {cg['ratio_instance_to_global']:.3f}; conditioner alone / global = "
              f"{cg['ratio_conditioner_to_global']:.3f}")  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    name = "instance_cost" + ("" if k == 3 else f"_kernel_{k}")
    (args.out / f"{name}.json").write_text(json.dumps(results, indent=1))
    print("wrote", args.out / f"{name}.json", plot(results, args.out / f"{name}.png"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
