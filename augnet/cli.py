"""Command line: ``augnet demo`` and ``augnet bench``."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path

__all__ = ["main"]

# Transforms that apply to the demo's images (the last two need RGB: the sprites, not the grey glyphs).
DEMO_TRANSFORMS = (
    "TranslateX", "TranslateY", "Rotate", "ShearX", "ShearY", "Scale",
    "HorizontalFlip", "VerticalFlip", "Brightness", "Contrast", "SamplePairing", "Saturation", "Hue",
)  # fmt: skip
RGB_ONLY = ("Saturation", "Hue")


def demo_config(args: argparse.Namespace):
    """The :class:`~augnet.experiments.demo.DemoConfig` of ``augnet demo``'s arguments."""
    from augnet.experiments.demo import SIZES, DemoConfig

    data = {} if args.data is None else {"data": args.data, "size": SIZES[args.data]}
    base = DemoConfig.preset(args.preset) if args.preset else DemoConfig()
    config = dataclasses.replace(base, seed=args.seed, threads=args.threads, device=args.device, **data)
    if args.quick:
        config.epochs, config.n_train, config.n_test = 3, 1000, 500
    if args.epochs is not None:
        config.epochs = args.epochs
    if args.transforms:
        config.transforms = tuple(args.transforms)
    return config


def _demo(args: argparse.Namespace) -> int:
    from augnet.experiments.demo import run_demo

    config = demo_config(args)
    out = Path(args.out)
    task = {"sprites": "rotated-sprite", "glyphs": "rotated-glyph"}[config.data]
    print(
        f"augnet demo: learning the invariance of the {task} task "
        f"({config.n_train} images, {config.epochs} epochs, candidates: {', '.join(config.transforms)})"
    )
    build_extension_first()
    result = run_demo(config, progress=not args.no_progress)
    print("\nlearned policy (< marks the selected transform):")
    print(result.policy)
    print(f"\ntest accuracy with {config.eval_copies} copies: {result.test_accuracy:.3f}  ({result.seconds:.0f} s)")
    out.mkdir(parents=True, exist_ok=True)
    (out / "demo.json").write_text(json.dumps(result.to_json(), indent=1))
    try:
        from augnet.viz import plot_policy_history

        title = f"AugNet on rotated {config.data}: weights and magnitudes"
        png = plot_policy_history(result.history, result.names, out / "policy.png", title=title)
        print(f"saved {png} and {out / 'demo.json'}")
    except ImportError as err:
        print(f"saved {out / 'demo.json'}; no plot: {err}")
    return 0


def _bench(args: argparse.Namespace) -> int:
    from augnet.bench import run_from_args

    return run_from_args(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="augnet", description="Learn invariances end to end with augmentation layers."
    )
    from augnet import __version__

    parser.add_argument("--version", action="version", version=f"augnet {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="train AugNet on the built-in rotation task and show the learned policy")
    demo.add_argument("--out", default="augnet-demo", help="folder for the plot and JSON (default: %(default)s)")
    demo.add_argument("--epochs", type=int, default=None, help="training epochs (default: 20)")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    demo.add_argument(
        "--transforms",
        nargs="+",
        metavar="NAME",
        choices=DEMO_TRANSFORMS,
        help="candidate transforms, from: %(choices)s (default: the five geometric ones)",
    )
    demo.add_argument(
        "--data", choices=("sprites", "glyphs"), default=None, help="the rotated images (default: sprites)"
    )
    demo.add_argument(
        "--preset",
        choices=("augnet", "official", "paper"),
        default=None,
        help="settings: augnet's defaults, the paper's official code, or the paper's text (README)",
    )
    demo.add_argument("--device", default="cpu", help="where to train, e.g. cpu or cuda (default: %(default)s)")
    demo.add_argument("--quick", action="store_true", help="a short run (3 epochs, 1000 images) to check the setup")
    demo.add_argument("--no-progress", action="store_true", help="no progress bar")
    demo.set_defaults(func=_demo)

    bench = sub.add_parser(
        "bench",
        help="time the augmentation layer with each tap_mix backend against the eager per-transform path",
        description="Time an augmentation layer of the five geometric transforms (training mode, forward and "
        "forward+backward) with each available tap_mix backend and with the eager kornia path of the "
        "official AugNet code; print a table, save tap_mix_<device>.json and .png.",
    )
    bench.add_argument("--sizes", nargs="+", type=int, metavar="PX", help="square image sizes (default: 32 128)")
    bench.add_argument("--batch", type=int, default=None, help="batch size B (default: 64)")
    bench.add_argument("--copies", type=int, default=None, help="copies C per image (default: 4)")
    bench.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="(default: %(default)s)")
    bench.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    bench.add_argument(
        "--providers",
        nargs="+",
        metavar="NAME",
        help="what to time: 'eager' and/or tap_mix backend names (default: eager and every usable backend)",
    )
    bench.add_argument(
        "--min-time", type=float, default=None, help="seconds of timed calls per measurement, at least (default: 1)"
    )
    bench.add_argument("--seed", type=int, default=None, help="seed of the images and of the check draw")
    bench.add_argument("--quick", action="store_true", help="tiny images, B=8 and few repeats, to check the setup")
    bench.add_argument(
        "--out", default="benchmarks/results", help="folder for the JSON and the plot (default: %(default)s)"
    )
    bench.add_argument(
        "--no-inference", action="store_true", help="skip the inference-cost measurement (AugNet vs C x its trunk)"
    )
    bench.set_defaults(func=_bench)

    from augnet.experiments import names as experiment_names

    rep = sub.add_parser(
        "reproduce",
        help="run one of the AugNet paper's controlled experiments at CPU scale",
        description="Run an experiment, write its figures (PNG) and numbers (JSON) under OUT/NAME/, print a verdict.",
    )
    rep.add_argument("name", choices=experiment_names(), help="the experiment")
    rep.add_argument("--quick", action="store_true", help="a reduced run (minutes become seconds)")
    rep.add_argument("--out", default="results", help="results folder (default: %(default)s)")
    rep.add_argument("--seed", type=int, default=0)
    rep.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    rep.add_argument("--device", default="cpu", help="where to train, e.g. cpu or cuda (default: %(default)s)")
    rep.add_argument("--no-progress", action="store_true", help="no progress bars")
    rep.set_defaults(func=_reproduce)
    return parser


def _reproduce(args: argparse.Namespace) -> int:
    import torch

    from augnet.experiments import reproduce

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    print(f"augnet reproduce {args.name}{' (quick)' if args.quick else ''}")
    build_extension_first()
    report = reproduce(
        args.name, quick=args.quick, out=args.out, seed=args.seed, progress=not args.no_progress, device=args.device
    )
    print(f"\n{report.verdict}\n")
    saved = [str(p) for p in report.figures] + [str(Path(args.out) / args.name / f"{args.name}.json")]
    print(f"saved {', '.join(saved)}  ({report.seconds:.0f} s)")
    return 0


def build_extension_first() -> None:
    """Load the tap_mix C++ extension before a progress bar starts (its first step would hold the whole build).

    A first run compiles it (about a minute), which is said in one line first.
    """
    from augnet.ops import _cpp

    if _cpp._state["tried"] or os.environ.get("AUGNET_BACKEND", "auto") not in ("auto", "cpp"):
        return
    if not extension_cached():
        print("augnet: compiling the tap_mix C++ extension first (once, about a minute)...", flush=True)
    _cpp.load()


def extension_cached() -> bool:
    """Whether the tap_mix extension is prebuilt or in torch's extension cache (loading it is then quick)."""
    from augnet.ops import _cpp

    if list(_cpp._PACKAGE.glob("_C*.so")) + list(_cpp._PACKAGE.glob("_C*.pyd")):
        return True
    try:
        with _cpp.quiet_cpp_extension_log():
            from torch.utils.cpp_extension import _get_build_directory

        name = f"augnet_tap_mix_{_cpp._cpu_tag()}"
        return (Path(_get_build_directory(name, verbose=False)) / f"{name}.so").exists()
    except Exception:  # a torch without the helper: say so, to be safe
        return False


def _usable_folder(path: str) -> str | None:
    """Why ``path`` cannot hold the results (``None`` when it can): made now, so nothing is lost later."""
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        return f"--out {path} is an existing file, not a folder"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        return f"cannot create the output folder --out {path}: {err.strerror or err}"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"the output folder --out {path} is not writable"
    return None


def check_args(args: argparse.Namespace) -> str | None:
    """The first problem with the arguments, as one line (``None`` if there is none); checked before any work."""
    for name in ("epochs", "threads", "batch", "copies"):
        value = getattr(args, name, None)
        if value is not None and value < 1:
            return f"--{name} must be >= 1, got {value}"
    if getattr(args, "sizes", None) and min(args.sizes) < 1:
        return f"--sizes must be positive, got {args.sizes}"
    transforms = getattr(args, "transforms", None) or ()
    grey = [t for t in transforms if t in RGB_ONLY] if getattr(args, "data", None) == "glyphs" else []
    if grey:
        return f"--transforms {' '.join(grey)} need RGB images; the glyphs are grey (use --data sprites)"
    device = getattr(args, "device", None)
    if device is not None and args.command in ("demo", "reproduce"):  # bench checks its own device
        from augnet.training import resolve_device

        try:
            resolve_device(device)
        except ValueError as err:
            return f"--device {device}: {err}"
    min_time = getattr(args, "min_time", None)
    if min_time is not None and not min_time > 0:
        return f"--min-time must be > 0, got {min_time}"
    return _usable_folder(args.out) if getattr(args, "out", None) is not None else None


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    problem = check_args(args)
    if problem is not None:
        print(f"augnet {args.command}: error: {problem}", file=sys.stderr)
        return 2
    return args.func(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
