"""Which augmentation buys the small digits' test accuracy? (why AugNet trails RandAugment there)

On the comparison's small digits (``augnet reproduce versus``: 110 training images, the task's trunk,
optimiser, batch size and steps), train the trunk with a few fixed augmentations beside the
comparison's own methods, on seeds 0-19, and print and save the test accuracy per seed set:

- the comparison's ``none``, ``crop``, ``randaugment`` and ``augnet`` (the README's first model);
- ``rotate``: every training image rotated uniformly within ±20 degrees (about AugNet's learned range
  on these digits);
- ``shift``: every image shifted uniformly within ±2 pixels on each axis (1/8 of the size, the crop's
  padding);
- ``rotate or shift``: each image either rotated (±20) or shifted (±2 px), half of them each;
- ``rotate then shift``: every image rotated, then shifted;
- ``augnet, 2 layers``: the README's model with two stacked layers of the candidates.

Nothing here sets a default: it reads what kind of augmentation the clean test accuracy rewards.
The seeds any setting was tuned on are 0-4 (and 10-19 were used for nothing else); the comparison's
verdict reads seeds 5-9. Two worker processes, one thread each::

    python benchmarks/versus_digits_augmentations.py [--seeds 0-19] [--out benchmarks/results/...]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

CONFIGS = ("none", "crop", "randaugment", "augnet", "rotate", "shift", "rotate or shift", "rotate then shift",
           "augnet, 2 layers")  # fmt: skip
ROTATE_DEG, SHIFT = 20.0, 0.125  # ±20 degrees; ±1/8 of the size (±2 px of 16)


def _augment(name: str):
    import torch

    from augnet.transforms import image as T

    rotate, tx, ty = T.Rotate(), T.TranslateX(max_shift=SHIFT), T.TranslateY(max_shift=SHIFT)

    def rot(x, g):
        return rotate(x, ROTATE_DEG / 180, generator=g)

    def shift(x, g):
        return ty(tx(x, 1.0, generator=g), 1.0, generator=g)

    def augment(x, generator=None):
        if name == "rotate":
            return rot(x, generator)
        if name == "shift":
            return shift(x, generator)
        if name == "rotate then shift":
            return shift(rot(x, generator), generator)
        pick = (torch.rand(len(x), generator=generator) < 0.5).view(-1, *[1] * (x.dim() - 1))
        return torch.where(pick, rot(x, generator), shift(x, generator))  # "rotate or shift"

    return augment


def run(config: str, seed: int) -> dict:
    import torch
    import torch.nn.functional as F

    from augnet.experiments import versus_methods as VM
    from augnet.experiments.versus_tasks import TASKS, candidates, load, make_trunk
    from augnet.layers import AugmentationLayer
    from augnet.model import AugNet
    from augnet.regularizers import param_groups
    from augnet.training import fit

    torch.set_num_threads(1)
    task = TASKS["digits"]
    split = load(task, "small", seed)
    start = time.process_time()
    if config in ("none", "crop", "randaugment", "augnet"):
        record = VM.run_method(config, task, "small", split, seed)
        return {"config": config, "seed": seed, "accuracy": record["accuracy"],
                "accuracy_shift": record["accuracy_shift"], "cpu_seconds": record["train_cpu_seconds"]}  # fmt: skip
    torch.manual_seed(seed)
    trunk = make_trunk(task)
    generator = torch.Generator().manual_seed(seed + 1)
    epochs, batch = task.epochs_of("small"), task.batch_size
    if config == "augnet, 2 layers":
        model = AugNet(trunk, [AugmentationLayer(candidates(task)) for _ in range(2)])
        opt = torch.optim.Adam(param_groups(model), lr=task.lr)
        fit(model, split.x_train, split.y_train, opt, epochs, batch, generator=generator, lam=VM.LAM)
    else:
        model = trunk
        opt = torch.optim.Adam(trunk.parameters(), lr=task.lr)
        fit(trunk, split.x_train, split.y_train, opt, epochs, batch, generator=generator, lam=0.0,
            regularizer="none", loss_fn=F.cross_entropy, augment_batch=_augment(config))  # fmt: skip
    cpu = time.process_time() - start
    g = lambda k: torch.Generator().manual_seed(seed + k)  # noqa: E731  (the comparison's evaluation draws)
    clean = VM._log_probs(model, split.x_test, generator=g(2))
    shifted = VM._log_probs(model, split.x_shift, generator=g(6))
    return {"config": config, "seed": seed, "cpu_seconds": cpu, "accuracy": VM._accuracy(clean, split.y_test),
            "accuracy_shift": VM._accuracy(shifted, split.y_test)}  # fmt: skip


def _seeds(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0-19", help="a range such as 0-19")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "versus_digits_augmentations.json"))
    args = parser.parse_args()
    jobs = [(c, s) for s in _seeds(args.seeds) for c in CONFIGS]
    with ProcessPoolExecutor(args.workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        runs = list(pool.map(run, *zip(*jobs, strict=True)))
    sets = {"tuning (0-4)": range(5), "reported (5-9)": range(5, 10), "unused (10-19)": range(10, 20),
            "all": range(10**6)}  # fmt: skip
    summary: dict = {}
    print(f"{'augmentation':<20}" + "".join(f"{name:>26}" for name in sets))
    for config in CONFIGS:
        row = {}
        for name, seeds in sets.items():
            mine = [r for r in runs if r["config"] == config and r["seed"] in seeds]
            if mine:
                acc = [r["accuracy"] for r in mine]
                row[name] = {"accuracy": statistics.fmean(acc), "std": statistics.pstdev(acc), "n": len(acc),
                             "accuracy_shift": statistics.fmean(r["accuracy_shift"] for r in mine)}  # fmt: skip
        summary[config] = row
        print(f"{config:<20}" + "".join(f"{row[n]['accuracy']:>12.3f} ± {row[n]['std']:.3f} (n {row[n]['n']:>2})"
                                        if n in row else f"{'-':>26}" for n in sets))  # fmt: skip
    Path(args.out).write_text(json.dumps({"summary": summary, "runs": runs}, indent=1) + "\n")
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
