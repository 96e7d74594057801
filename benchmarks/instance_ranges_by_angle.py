"""Whether the per-instance layer's range for each input follows that input's own angle.

``augnet reproduce instance`` reads one number per class: the mean of the conditioned layer's
per-sample rotation range over the class. Pair A's labels are the sprite upright (angle within
±45 degrees) or upside down (180 ± 45): a sample at angle ``a`` from its class's centre stays on
its side of the up/down boundary (90 degrees away) under any rotation of up to ``90 - |a|``, so a
layer that sees the input can learn a range per sample, and the class mean of that range is
about 67 degrees, not 45. This trains the experiment's per-instance model (its
:class:`~augnet.experiments.instance.InstanceConfig`, one thread) on each seed, and fits each
pair-A test sample's learned range against ``|a|`` (the test set's own angles, redrawn from its
seed). Chooses nothing; prints and saves the figures::

    python benchmarks/instance_ranges_by_angle.py --seeds 0 1 2 3 4 [--out benchmarks/results/...]

``--saturation S`` trains with the selective regulariser's falling pull instead of the experiment's
linear one (the instance guide: it does not bring pair A's class ranges within the targets on more
seeds). ``--kernel-size K`` sets the conditioner's convolutions (default 3, the default conditioner
that the saved runs without a suffix used; 1: the pointwise conditioner, whose policy cannot follow
an input's pose: saved with the suffix ``_kernel_1``).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
import time
from pathlib import Path

import torch

from augnet.experiments import instance as I
from augnet.instance import ConditionedAugmentationLayer
from augnet.model import AugNet
from augnet.transforms import image as T

BINS = (0.0, 15.0, 30.0, 45.0)


def run(seed: int, config: I.InstanceConfig) -> dict:
    start = time.perf_counter()
    x, y = I.instance_sprites(config.n_train, config.size, seed)
    x_test, y_test, radians = I.instance_sprites(config.n_test, config.size, seed + 10_000, return_angle=True)
    down = (y_test >= 2) & (y_test < 4)
    angle = torch.rad2deg(radians - down * math.pi).abs()  # pair A: |angle from the class's centre|, degrees
    torch.manual_seed(seed)
    layer = ConditionedAugmentationLayer([T.Rotate()], channels=3, hidden=config.hidden,
                                         init_magnitude=config.init_magnitude,
                                         kernel_size=config.kernel_size)  # fmt: skip
    model = AugNet(I._trunk(config), layer, eval_copies=config.eval_copies, stratify=config.stratify)
    I._train(model, config, x, y, seed, "instance", "selective")
    model.eval()
    with torch.no_grad():
        _, mu = layer.sample_policy(x_test)
    deg = mu[:, 0] * math.degrees(layer.transforms[0].max_angle)
    pair_a = y_test < 4
    r, a = deg[pair_a].double(), angle[pair_a].double()
    (slope, intercept), *_ = torch.linalg.lstsq(torch.stack([a, torch.ones_like(a)], 1), r[:, None])
    return {
        "seed": seed,
        "corr": float(torch.corrcoef(torch.stack([r, a]))[0, 1]),
        "slope": float(slope), "intercept": float(intercept),
        "mean_by_angle": {f"{lo:g}-{hi:g}": float(r[(a >= lo) & (a < hi)].mean())
                          for lo, hi in itertools.pairwise(BINS)},
        "mae_vs_90_minus_angle": float((r - (90 - a)).abs().mean()),
        "class_mean": {I.CLASS_NAMES[k]: float(deg[y_test == k].mean()) for k in range(6)},
        "seconds": time.perf_counter() - start,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--out", default=None, help="default: results/instance_ranges_by_angle[_saturation_S].json")
    parser.add_argument(
        "--saturation", type=float, default=None, help="the pull's saturation (default: the experiment's, linear)"
    )
    parser.add_argument("--kernel-size", type=int, default=3, choices=(3, 1), help="the conditioner's (default 3)")
    args = parser.parse_args()
    suffix = "" if args.saturation is None else f"_saturation_{args.saturation:g}"
    suffix += "" if args.kernel_size == 3 else f"_kernel_{args.kernel_size}"
    args.out = args.out or str(Path(__file__).parent / "results" / f"instance_ranges_by_angle{suffix}.json")
    torch.set_num_threads(1)
    config = dataclasses.replace(I.InstanceConfig(), kernel_size=args.kernel_size)
    if args.saturation is not None:
        config = dataclasses.replace(config, saturation=args.saturation)
    results = []
    for seed in args.seeds:
        res = run(seed, config)
        results.append(res)
        bins = " ".join(f"|a| {k}: {v:.0f}" for k, v in res["mean_by_angle"].items())
        classes = " ".join(f"{v:.0f}" for v in res["class_mean"].values())
        within = I.within_targets({str(k): {"mean": v} for k, v in enumerate(res["class_mean"].values())})
        print(f"seed {seed}: range = {res['intercept']:.0f} {res['slope']:+.2f} |a| (r = {res['corr']:.2f}); {bins}; "
              f"|range - (90 - |a|)| {res['mae_vs_90_minus_angle']:.1f}; class means {classes} "
              f"within the targets: {within} ({res['seconds']:.0f} s)")  # fmt: skip
    payload = {"config": dataclasses.asdict(config), "runs": results}
    Path(args.out).write_text(json.dumps(payload, indent=1) + "\n")
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
