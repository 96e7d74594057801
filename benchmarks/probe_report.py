"""Time and memory of the probes: ``augnet probe`` on 2,000 images, and every probe on 20,000 inputs of a resnet18.

    PYTHONPATH=. python benchmarks/probe_report.py [--part cli|memory|all] [--n-cli 2000] [--n 20000] [--threads 1]

Each measurement runs in a fresh process (so that memory freed by an earlier one cannot hide a new
one's), which builds an untrained torchvision resnet18 (``weights=None``) and seeded random 3x64x64
images, reads its resident memory, resets the peak (``/proc/self/clear_refs``), runs the probe and
reports the peak's excess over that starting point (``VmHWM``), the wall time, and the load averages
of the machine before and after (another process may be running). ``cli`` runs ``augnet probe`` itself
(its extra memory includes the model and the images it builds); ``memory`` runs every probe on
``--n`` inputs held by the process beforehand (their memory is not counted: they are the user's);
``report_units`` is the report with ``per_unit=True`` and ``by_class`` (10 classes).
Results go to ``benchmarks/results/probe_report.json`` (updated after every measurement) and print.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results" / "probe_report.json"
PROBES = (
    "features",
    "invariance_curve",
    "accuracy_curve",
    "layerwise_invariance",
    "select_tau",
    "similarity_search",
    "equivariance_curve",
    "ranking_probe_model",
    "category_accuracy",
    "lie_derivative",
    "report",
    "report_units",
)


def status_mb(key: str) -> float:
    return int(re.search(rf"{key}:\s+(\d+)", Path("/proc/self/status").read_text()).group(1)) / 1024


def load() -> list[float]:
    return [float(v) for v in Path("/proc/loadavg").read_text().split()[:3]]


def run_one(name: str, n: int, threads: int) -> dict:
    """In this (fresh) process: build the model and the inputs, then measure one probe."""
    import torch
    import torchvision

    from augnet import probes
    from augnet.transforms import image as T

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None, num_classes=10).eval()
    g = torch.Generator().manual_seed(0)
    x = torch.rand(n, 3, 64, 64, generator=g)
    y = torch.arange(n) % 10
    rotate = T.Rotate()
    rotate(x[:2], 0.5)  # loads (or builds) the compiled tap_mix before anything is timed
    calls = {
        "features": lambda: probes.features(model, x, ["layer4", "logits"], reduce="mean"),
        "invariance_curve": lambda: probes.invariance_curve(model, x, rotate, [0.5]),
        "accuracy_curve": lambda: probes.accuracy_curve(model, x, y, rotate, [0.5]),
        # Every element of layer1 (64 x 16 x 16 units): 20 GB before the fix.
        "layerwise_invariance": lambda: probes.layerwise_invariance(model, x, ["layer1"], tau=0.1, transform=rotate),
        "select_tau": lambda: probes.select_tau(model, "layer1.0.relu#1", x, y, taus=[0.5], transform=rotate),
        # Every ordered pair of every class (10 classes of 2,000): 120 GB before the fix.
        "similarity_search": lambda: probes.similarity_search(model, x, y, {"rotate": rotate}, pairs_per_class=None),
        "equivariance_curve": lambda: probes.equivariance_curve(model, x, rotate, [0.5]),
        "ranking_probe_model": lambda: probes.ranking_probe_model(model, x, rotate, ["layer4", "logits"], "angle"),
        "category_accuracy": lambda: probes.category_accuracy(model, x, y, rotate, seen_classes=[0, 1]),
        "lie_derivative": lambda: probes.lie_derivative(model, x, rotate, ["layer4", "logits"], reduce="mean"),
        "report": lambda: probes.report(model, x, ["Rotate", "HorizontalFlip"], magnitudes=[1.0]),
        # Every measure, each unit's value kept, and every measure again for each of the 10 classes.
        "report_units": lambda: probes.report(
            model, x, ["Rotate", "HorizontalFlip"], magnitudes=[1.0], per_unit=True, by_class=y
        ),
    }
    base = status_mb("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")
    before = load()
    start = time.perf_counter()
    calls[name]()
    seconds = time.perf_counter() - start
    return {
        "probe": name,
        "n": n,
        "extra_peak_mb": round(status_mb("VmHWM") - base, 1),
        "inputs_mb": round(x.numel() * 4 / 2**20, 1),
        "seconds": round(seconds, 1),
        "threads": threads,
        "loadavg_before": before,
        "loadavg_after": load(),
    }


def run_cli(n: int, threads: int, out: str) -> dict:
    """In this (fresh) process: ``augnet probe`` on ``n`` random 3x64x64 images, timed, with its peak memory."""
    import torch

    from augnet.cli import main
    from augnet.transforms import image as T

    T.Rotate()(torch.rand(1, 3, 8, 8), 0.5)  # loads (or builds) the compiled tap_mix before anything is timed

    argv = ["probe", "--model", "torchvision.models:resnet18", "--fake", "--n", str(n), "--size", "64"]
    argv += ["--transforms", "Rotate", "HorizontalFlip", "--threads", str(threads), "--out", out, "--no-progress"]
    base = status_mb("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")
    before = load()
    start = time.perf_counter()
    code = main(argv)
    seconds = time.perf_counter() - start
    return {
        "command": "augnet " + " ".join(argv),
        "exit": code,
        "seconds": round(seconds, 1),
        "extra_peak_mb": round(status_mb("VmHWM") - base, 1),
        "note": "extra memory over the imports: includes the model (45 MB) and the images it builds",
        "threads": threads,
        "loadavg_before": before,
        "loadavg_after": load(),
    }


def child(args: list[str]) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    done = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, env=env)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        return {"args": args, "error": (done.stderr or done.stdout).strip().splitlines()[-1:]}
    result = json.loads(lines[-1])
    built = [line for line in done.stderr.splitlines() if "built the tap_mix extension" in line]
    if built:  # before the timed part, but the machine was busy compiling
        result["tap_mix_build"] = built
    return result


def save(results: dict, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("cli", "memory", "all"), default="all")
    parser.add_argument("--n-cli", type=int, default=2000)
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--probes", nargs="+", choices=PROBES, default=list(PROBES))
    parser.add_argument("--out", type=Path, default=OUT, help="the JSON file (default: %(default)s)")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--cli-run", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one, args.n, args.threads)))
        return
    if args.cli_run:
        print(json.dumps(run_cli(args.n_cli, args.threads, str(args.out.parent / "probe_cli"))))
        return
    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    results["machine"] = {"cpus": os.cpu_count(), "uptime": Path("/proc/uptime").read_text().split()[0]}
    if args.part in ("cli", "all"):
        r = child(["--cli-run", "--n-cli", str(args.n_cli), "--threads", str(args.threads), "--out", str(args.out)])
        results["cli"] = r
        save(results, args.out)
        print("augnet probe:", json.dumps(r))
    if args.part in ("memory", "all"):
        results.setdefault("memory", {})
        for name in args.probes:
            r = child(["--one", name, "--n", str(args.n), "--threads", str(args.threads)])
            results["memory"][name] = r
            save(results, args.out)
            print(name, json.dumps(r))
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
