"""Cost of keeping each step's buffers in ``fit`` (so a step whose loss is not finite can be undone), one thread.

    python benchmarks/fit_step_undo_cost.py [--rounds 7] [--steps 30] [--quick] [--out benchmarks/results]

On a CPU, ``fit`` copies every buffer of the model (batch-norm statistics, an AugNet's measured effects, a
conditioner's statistics) into kept tensors before each step's forward pass, so that a step whose loss is NaN
or infinite puts them back (:class:`augnet.training._checks.StepUndo`). This times ``fit`` on three models
with that copy and with it replaced by nothing, in one process, the two alternating within every round; the
ratio with / without is taken within a round and its median over the rounds reported (a slow spell of a
shared machine hits both alike). It also times ``StepUndo.keep()`` alone.

Models (one :class:`augnet.AugmentationLayer` of the five geometric transforms in an :class:`augnet.AugNet`,
Adam over :func:`augnet.param_groups`, lambda 0.5):

- ``small-cnn``: a two-convolution CNN without batch norm, 32 images of 3 x 32 x 32 per step;
- ``digits``: the comparison's digits trunk (:func:`augnet.experiments.versus_tasks.make_trunk`), 32 images
  of 1 x 8 x 8 per step: the smallest step of ``augnet reproduce versus``;
- ``resnet18``: torchvision's ResNet-18 (10 classes, 20 batch norms: 60 buffers), 16 images of 3 x 32 x 32.

``--quick`` checks that the script runs (one round, few steps): its numbers are no measurement. A benchmark
reports; it asserts no time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch
from torch import nn

import augnet
from augnet.bench.machine import machine_info
from augnet.training import _checks, fit
from augnet.transforms import image as T


class _NoUndo:
    """``StepUndo`` replaced by nothing: what ``fit`` did before it kept the buffers."""

    def __init__(self, model) -> None:
        pass

    def keep(self) -> None:
        pass

    def restore(self) -> None:
        pass


def _models() -> dict:
    from augnet.experiments.versus_tasks import TASKS, make_trunk

    def small_cnn():
        return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                             nn.Linear(32, 10))  # fmt: skip

    def resnet18():
        import torchvision

        return torchvision.models.resnet18(num_classes=10)

    return {
        "small-cnn": (small_cnn, (32, 3, 32, 32), 10),
        "digits": (lambda: make_trunk(TASKS["digits"]), (32, 1, 8, 8), TASKS["digits"].classes),
        "resnet18": (resnet18, (16, 3, 32, 32), 10),
    }


def _fit_seconds(build, shape, classes, steps: int, undo) -> float:
    torch.manual_seed(0)
    model = augnet.AugNet(build(), augnet.AugmentationLayer([cls() for cls in T.GEOMETRIC]))
    x = torch.rand(shape[0] * steps, *shape[1:], generator=torch.Generator().manual_seed(1))
    y = torch.arange(len(x)) % classes
    opt = torch.optim.Adam(augnet.param_groups(model))
    kept, _checks.StepUndo = _checks.StepUndo, undo
    try:
        start = time.perf_counter()
        fit(model, x, y, opt, 1, shape[0], generator=torch.Generator().manual_seed(2), progress=False)
        return time.perf_counter() - start
    finally:
        _checks.StepUndo = kept


def _keep_microseconds(build, repeats: int = 200) -> tuple[float, int]:
    model = augnet.AugNet(build(), augnet.AugmentationLayer([cls() for cls in T.GEOMETRIC]))
    undo = _checks.StepUndo(model)
    undo.keep()
    start = time.perf_counter()
    for _ in range(repeats):
        undo.keep()
    return 1e6 * (time.perf_counter() - start) / repeats, sum(1 for _ in model.buffers())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.steps = 1, 3
    torch.set_num_threads(1)
    results = {}
    for name, (build, shape, classes) in _models().items():
        _fit_seconds(build, shape, classes, 2, _checks.StepUndo)  # warm-up: the kernel's build, the allocator
        ratios, with_undo, without = [], [], []
        for r in range(args.rounds):
            order = [(True, _checks.StepUndo), (False, _NoUndo)][:: 1 if r % 2 == 0 else -1]
            times = {kept: _fit_seconds(build, shape, classes, args.steps, undo) for kept, undo in order}
            with_undo.append(times[True])
            without.append(times[False])
            ratios.append(times[True] / times[False])
        keep_us, buffers = _keep_microseconds(build)
        results[name] = {
            "buffers": buffers,
            "step_ms_with": 1e3 * statistics.median(with_undo) / args.steps,
            "step_ms_without": 1e3 * statistics.median(without) / args.steps,
            "ratio_median": statistics.median(ratios),
            "ratios": ratios,
            "keep_us": keep_us,
        }
        row = results[name]
        print(f"{name:10s} {buffers:3d} buffers  step {row['step_ms_without']:.2f} ms without, "
              f"{row['step_ms_with']:.2f} ms with (ratio {row['ratio_median']:.3f}, rounds "
              f"{min(ratios):.3f}-{max(ratios):.3f}); keep() {keep_us:.1f} us")  # fmt: skip
    out = {"quick": args.quick, "rounds": args.rounds, "steps": args.steps, "machine": machine_info(),
           "results": results}  # fmt: skip
    if not args.quick:
        args.out.mkdir(parents=True, exist_ok=True)
        path = args.out / "fit_step_undo_cost.json"
        path.write_text(json.dumps(out, indent=1) + "\n")
        print(f"saved {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
