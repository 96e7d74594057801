"""Cost of the input checks on the hot path: a training step now against the tree before, one thread.

    python benchmarks/reliability_cost.py [--base-rev REV | --base PATH] [--rounds 7] [--repeats 40] [--quick]

Three cases, CPU, one thread: an AugNet on a small CNN with one image
``AugmentationLayer`` (Rotate, TranslateX, ShearX, Brightness, HorizontalFlip),
and the same AugNet with a ``ConditionedAugmentationLayer`` of those
transforms (its default conditioner). A training step is the forward pass
(which measures the effects every 10 passes, as in training), the task loss
plus ``0.5 *`` the selective regulariser, the backward pass and an SGD step:
B = 32 images of 3 x 32 x 32, one copy; and ``fit`` itself on the comparison's
smallest step (32 images of 1 x 8 x 8 through an MLP trunk, an epoch of 10
steps per call, reported per step), where its own checks weigh most.

The tree before is ``git archive REV`` (default: the merge base of ``HEAD``
and ``main``) unpacked into a temporary folder; the tree after is this
checkout. Each tree runs in a process of its own (both import ``augnet``),
with its own build cache of the tap_mix extension (two checkouts sharing one
would rebuild it over each other). The rounds interleave the trees (their
order alternates), each round timing both steps ``--repeats`` times after a
warm-up; the ratio after / before is taken within a round, and the median
over the rounds is reported: a slow spell of a shared machine hits both
trees of a round alike. Writes ``reliability_cost.json`` under ``--out``.

``--quick`` checks that the script runs (tiny images, the reference backend,
so nothing is compiled; one round): its numbers are no measurement. A
benchmark reports; it asserts no time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CASES = ("global", "instance", "fit")


# ----------------------------------------------------------------------------------------- the worker


def worker(repeats: int, quick: bool, backend: str) -> dict:
    """Time both cases' training steps in this process (``augnet`` from ``PYTHONPATH``): median ms each."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    import augnet
    from augnet.transforms import image as T

    torch.set_num_threads(1)
    b, size = (8, 16) if quick else (32, 32)

    def transforms():
        return [T.Rotate(), T.TranslateX(), T.ShearX(), T.Brightness(), T.HorizontalFlip()]

    def model(conditioned: bool):
        torch.manual_seed(0)
        trunk = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                              nn.Linear(32, 10))  # fmt: skip
        kwargs = dict(init_magnitude=0.3, backend=backend)
        layer = (augnet.ConditionedAugmentationLayer(transforms(), channels=3, **kwargs) if conditioned
                 else augnet.AugmentationLayer(transforms(), **kwargs))  # fmt: skip
        return augnet.AugNet(trunk, layer, effect_every=10).train()

    x = torch.rand(b, 3, size, size, generator=torch.Generator().manual_seed(1))
    y = torch.arange(b) % 10

    def step_of(net):
        opt = torch.optim.SGD(net.parameters(), lr=1e-3)
        g = torch.Generator().manual_seed(2)

        def step():
            opt.zero_grad(set_to_none=True)
            loss = F.nll_loss(net(x, generator=g), y) + 0.5 * augnet.selective_regularizer(net)
            loss.backward()
            opt.step()

        return step

    def fit_of(steps: int = 10):
        """``fit`` on the comparison's smallest step (32 digits-sized images, 1 x 8 x 8, an MLP trunk): an
        epoch of ``steps`` steps per call, so its checks per step and per call are in the time."""
        from augnet.training import fit

        torch.manual_seed(0)
        trunk = nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10), nn.LogSoftmax(-1))
        layer = augnet.AugmentationLayer(transforms(), init_magnitude=0.3, backend=backend)
        net = augnet.AugNet(trunk, layer, effect_every=10)
        xs = torch.rand(32 * steps, 1, 8, 8, generator=torch.Generator().manual_seed(3))
        ys = torch.arange(32 * steps) % 10
        opt = torch.optim.Adam(augnet.param_groups(net), lr=1e-3)
        g = torch.Generator().manual_seed(4)
        return lambda: fit(net, xs, ys, opt, epochs=1, batch_size=32, generator=g, progress=False)

    steps = {"global": step_of(model(False)), "instance": step_of(model(True)), "fit": fit_of()}
    for step in steps.values():  # warm-up: the kernel's first call (a build, if not cached), the allocator
        for _ in range(3):
            step()
    times = {name: [] for name in steps}
    for _ in range(repeats):
        for name, step in steps.items():  # interleaved within the process too
            start = time.perf_counter()
            step()
            times[name].append(time.perf_counter() - start)
    per_step = {"fit": 10}  # fit's call is an epoch of 10 steps
    return {name: 1e3 * statistics.median(t) / per_step.get(name, 1) for name, t in times.items()}


# ----------------------------------------------------------------------------------------- the trees


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()


def base_tree(rev: str | None, folder: Path) -> tuple[Path, str]:
    """``git archive`` of ``rev`` (default: the merge base of HEAD and main) unpacked under ``folder``."""
    rev = rev or _git("merge-base", "HEAD", "main")
    commit = _git("rev-parse", rev)
    target = folder / f"before-{commit[:10]}"
    if not (target / "augnet" / "__init__.py").exists():
        target.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", "--format=tar", commit], cwd=ROOT, check=True,
                                 capture_output=True).stdout  # fmt: skip
        with tempfile.TemporaryFile() as f:
            f.write(archive)
            f.seek(0)
            with tarfile.open(fileobj=f) as tar:
                tar.extractall(target, filter="data")
    return target, commit


def run_tree(tree: Path, cache: Path, name: str, args: argparse.Namespace) -> dict:
    """One worker process on ``tree``: its median step times (ms)."""
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "TORCH_EXTENSIONS_DIR": str(cache / f"ext-{name}")}  # fmt: skip
    env.pop("AUGNET_BACKEND", None)
    if args.backend != "auto":  # the transforms' own calls (the effects' measurement) too
        env["AUGNET_BACKEND"] = args.backend
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--repeats", str(args.repeats),
           "--backend", args.backend] + (["--quick"] if args.quick else [])  # fmt: skip
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"the worker on {tree} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base-rev", default=None, help="the tree before (default: git merge-base HEAD main)")
    parser.add_argument("--base", type=Path, default=None, help="a checkout of the tree before, instead")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=40, help="timed steps per case and round")
    parser.add_argument("--backend", default=None, help="tap_mix backend (default: auto; reference with --quick)")
    parser.add_argument("--quick", action="store_true", help="check that the script runs (no measurement)")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.backend = args.backend or ("reference" if args.quick else "auto")
    if args.quick:
        args.rounds, args.repeats = 1, 3
    if args.worker:
        print(json.dumps(worker(args.repeats, args.quick, args.backend)))
        return 0

    cache = Path(tempfile.gettempdir()) / "augnet-reliability-cost"
    if args.base is not None:
        before, commit = args.base.resolve(), "(given folder)"
    else:
        before, commit = base_tree(args.base_rev, cache)
    trees = {"before": before, "after": ROOT}
    rounds = []
    for r in range(args.rounds):
        order = ("before", "after") if r % 2 == 0 else ("after", "before")
        got = {name: run_tree(trees[name], cache, name, args) for name in order}
        ratio = {case: got["after"][case] / got["before"][case] for case in CASES}
        rounds.append({"order": list(order), "ms": got, "ratio": ratio})
        print(f"round {r + 1}/{args.rounds}: " + "; ".join(
            f"{case} {got['before'][case]:.2f} -> {got['after'][case]:.2f} ms ({ratio[case]:.3f})" for case in CASES))
    median = {case: statistics.median(r["ratio"][case] for r in rounds) for case in CASES}
    spread = {case: [min(r["ratio"][case] for r in rounds), max(r["ratio"][case] for r in rounds)] for case in CASES}
    import torch

    results = {
        "what": "training step time, after / before, one thread; median over interleaved rounds",
        "quick": args.quick,
        "backend": args.backend,
        "before": commit,
        "after": _git("rev-parse", "HEAD") + (" (with uncommitted changes)" if _git("status", "--porcelain") else ""),
        "median_ratio": median,
        "ratio_range": spread,
        "rounds": rounds,
        "machine": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "cpu": platform.processor(),
            "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
        },
    }
    print("median ratio after / before: " + ", ".join(f"{c} {median[c]:.3f} (rounds {spread[c][0]:.3f}-"
                                                     f"{spread[c][1]:.3f})" for c in CASES))  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    name = "reliability_cost_quick.json" if args.quick else "reliability_cost.json"
    (args.out / name).write_text(json.dumps(results, indent=1) + "\n")
    print("wrote", args.out / name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
