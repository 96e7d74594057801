"""Command line: ``augnet demo``, ``augnet bench``, ``augnet reproduce`` and ``augnet probe``."""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import warnings
from pathlib import Path

from augnet._checks import user_path
from augnet._cli_args import (
    NamedAs,
    SpaceList,
    add_progress,
    old_names_used,
    refuse_no_command,
    refuse_unknown,
    show_progress,
)
from augnet._cli_checks import UNIT_FILES as _UNIT_FILES
from augnet._cli_checks import (
    PipeGuard,
    check_bench,
    check_probe,
    grid_points,
    out_of_memory,
    probe_inputs,
    results_problem,
    runs_problem,
    say_replacing,
    threads_problem,
    unused_notice,
)

__all__ = ["main"]  # SpaceList: here, as it was

# Transforms that apply to the demo's images (the last two need RGB: the sprites, not the grey glyphs).
DEMO_TRANSFORMS = (
    "TranslateX", "TranslateY", "Rotate", "ShearX", "ShearY", "Scale",
    "HorizontalFlip", "VerticalFlip", "Brightness", "Contrast", "SamplePairing", "Saturation", "Hue",
)  # fmt: skip
RGB_ONLY = ("Saturation", "Hue")
# The largest `augnet probe --seed` (augnet.probes' check_seed: seed + 2 seeds a generator too) and `augnet demo
# --seed` (torch takes seeds below 2**64 and the demo seeds it with seed + 2 at most); written here so that checking
# the arguments imports no torch.
MAX_SEED = 2**63 - 3
MAX_DEMO_SEED = 2**64 - 3


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
    say_replacing(args)
    build_extension_first()
    result = run_demo(config, progress=show_progress(args))
    print("\nlearned policy (< marks the selected transform):")
    print(result.policy)
    print(f"\ntest accuracy with {config.eval_copies} copies: {result.test_accuracy:.3f}  ({result.seconds:.0f} s)")
    if args.quick and args.epochs is None:  # its accuracy near chance is no failure
        full = demo_config(argparse.Namespace(**{**vars(args), "quick": False}))
        print(f"(--quick checks the set-up: {config.epochs} epochs are too few to learn the task; without --quick "
              f"the demo trains for {full.epochs})")  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    from augnet._json import dumps as strict_json  # a diverged training's NaN: null, not a token strict readers refuse

    (out / "demo.json").write_text(strict_json(result.to_json()))
    try:
        from augnet.viz import plot_policy_history

        title = f"AugNet on rotated {config.data}: weights and magnitudes"
        png = plot_policy_history(result.history, result.names, out / "policy.png", title=title)
        print(f"saved {png} and {out / 'demo.json'}")
    except ImportError as err:
        print(f"augnet demo: no plot: {err}", file=sys.stderr)
        print(f"saved {out / 'demo.json'}")
    return 0


def _bench(args: argparse.Namespace) -> int:
    for line in old_names_used(args):  # a command-line user sees no DeprecationWarning
        print(line, file=sys.stderr)
    if args.model is not None:  # the GPU cost on paper: nothing is timed
        from augnet.bench import gpu_model

        given = [
            args.batch_flag if name == "batch" else f"--{name.replace('_', '-')}"
            for name in ("sizes", "batch", "copies", "threads", "providers", "min_time", "seed")
            if getattr(args, name) is not None
        ]
        given += [flag for flag, on in (("--quick", args.quick), ("--no-inference", args.no_inference),
                                        ("--device cuda", args.device != "cpu"),
                                        ("--out", args.out != "benchmarks/results")) if on]  # fmt: skip
        if given:
            print(f"augnet bench: --model prints the cost on paper of augnet bench's layer at its own batch sizes, "
                  f"images and C = 4; not used: {' '.join(given)}", file=sys.stderr)  # fmt: skip
        return gpu_model.main(["--model", args.model])
    from augnet.bench import run_from_args

    say_replacing(args)
    return run_from_args(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="augnet", description="Learn invariances end to end with augmentation layers."
    )
    from augnet import __version__

    parser.add_argument("--version", action="version", version=f"augnet {__version__}")
    sub = parser.add_subparsers(dest="command")  # none given: refuse_no_command, which names them
    demo = sub.add_parser(
        "demo",
        help="train AugNet on the built-in rotation task and show the learned policy",
        description="Train AugNet on the built-in rotation task (RGB sprites, or grey glyphs with --data glyphs), "
        "print the learned policy and the test accuracy, and save policy.png and demo.json under --out.",
    )
    demo.add_argument("--out", default="augnet-demo", help="folder for the plot and JSON (default: %(default)s)")
    demo.add_argument("--epochs", type=int, default=None, help="training epochs (default: 20; 3 with --quick)")
    demo.add_argument("--seed", type=int, default=0, help="seed of the data and the training (default: %(default)s)")
    demo.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    demo.add_argument(
        "--transforms",
        nargs="+",
        action=SpaceList,
        metavar="NAME",
        choices=DEMO_TRANSFORMS,
        help=f"candidate transforms, from: {', '.join(DEMO_TRANSFORMS)}, e.g. --transforms Rotate Scale (default: "
        "TranslateX TranslateY Rotate ShearX ShearY)",
    )
    demo.add_argument(
        "--data", choices=("sprites", "glyphs"), default=None, help="the rotated images (default: sprites)"
    )
    demo.add_argument(
        "--preset",
        choices=("augnet", "official", "paper"),
        default=None,
        help="settings: augnet's defaults, the paper's official code, or the paper's text (docs/guide/concepts.md; "
        "default: augnet)",
    )
    demo.add_argument("--device", default="cpu", help="where to train, e.g. cpu or cuda (default: %(default)s)")
    demo.add_argument("--quick", action="store_true", help="a short run (3 epochs, 1000 images) to check the setup")
    add_progress(demo, "a progress bar")
    demo.set_defaults(func=_demo)

    bench = sub.add_parser(
        "bench",
        help="time the augmentation layer with each tap_mix backend against the eager per-transform path",
        description="Time an augmentation layer of the five geometric transforms (training mode: forward, "
        "forward+backward, and forward+backward+dx with the input's gradient too) with each available tap_mix "
        "backend and with the eager kornia path of the official AugNet code; print a table, save "
        "tap_mix_<device>.json and .png, then the inference cost's inference_<device>.json, under --out "
        "(with --quick: tap_mix_<device>_quick.json and so on, which leave a full run's alone).",
    )
    bench.add_argument("--sizes", nargs="+", type=int, metavar="PX",
                       help="square image sizes (default: 32 128; 8 16 with --quick)")  # fmt: skip
    bench.add_argument("--batch-size", "--batch", dest="batch", type=int, default=None, metavar="B", action=NamedAs,
                       help="batch size B (default: 64; 8 with --quick); given, the inference cost's too "
                       "(else its own: 16, 2 with --quick); --batch is its deprecated old name")  # fmt: skip
    bench.set_defaults(batch_flag="--batch-size")
    bench.add_argument("--copies", type=int, default=None,
                       help="copies C per image (default: 4); given, the inference cost's only C "
                       "(else 1 4 10 20; 1 2 with --quick)")  # fmt: skip
    bench.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where to time (default: %(default)s)")
    bench.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    bench.add_argument(
        "--providers",
        nargs="+",
        metavar="NAME",
        help="what to time: 'eager' and/or tap_mix backend names (default: eager and every usable backend)",
    )
    bench.add_argument(
        "--min-time", type=float, default=None,
        help="seconds of timed calls per measurement, at least (default: 1; 0.02 with --quick)",
    )  # fmt: skip
    bench.add_argument("--seed", type=int, default=None, help="seed of the images and of the check draw (default: 0)")
    bench.add_argument("--quick", action="store_true", help="tiny images, B=8 and few repeats, to check the setup")
    bench.add_argument(
        "--out", default="benchmarks/results", help="folder for the JSON and the plot (default: %(default)s)"
    )
    bench.add_argument(
        "--no-inference", action="store_true", help="skip the inference-cost measurement (AugNet vs C x its trunk)"
    )
    bench.add_argument(
        "--model",
        choices=("a100", "h100", "h200"),
        default=None,
        help="instead of timing, print the layer's cost on this GPU on paper (a model, not a measurement)",
    )
    bench.set_defaults(func=_bench)

    from augnet.experiments import names as experiment_names

    rep = sub.add_parser(
        "reproduce",
        help="run one of the AugNet paper's controlled experiments at CPU scale",
        description="Run an experiment, write its figures (PNG) and numbers (JSON) under OUT/NAME/, print a verdict.",
    )
    rep.add_argument("name", choices=experiment_names(), help="the experiment")
    rep.add_argument(
        "--quick", action="store_true",
        help="a reduced run, to check the set-up (under a minute to a few minutes on 2 CPU cores)",
    )  # fmt: skip
    rep.add_argument("--out", default="results", help="results folder (default: %(default)s)")
    rep.add_argument("--seed", type=int, default=0,
                     help="the first seed (default: %(default)s; a full versus run trains seeds 0-9, no other)")
    rep.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    rep.add_argument("--device", default="cpu", help="where to train, e.g. cpu or cuda (default: %(default)s)")
    add_progress(rep, "progress bars")
    rep.set_defaults(func=_reproduce)

    probe = sub.add_parser(
        "probe",
        help="measure, layer by layer, what a model is invariant to (every probe of the five papers, and the "
        "Lie derivative)",
        description="Probe a model: per layer, transform and magnitude, the invariance and equivariance measures "
        "of augnet.probes.report; write probe.json, probe.csv, heatmap.png and verdict.txt under --out.",
    )
    probe.add_argument("--model", required=True, help="import path of the model, e.g. torchvision.models:resnet18")
    probe.add_argument(
        "--model-args",
        default=None,
        metavar="JSON",
        help="keyword arguments of the model, e.g. '{\"num_classes\": 10}'",
    )
    probe.add_argument(
        "--weights", default=None, metavar="FILE", help="a state_dict file (read with weights_only=True)"
    )
    source = probe.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--data",
        metavar="FILE_OR_FOLDER",
        help="a tensor file (torch.save, or NumPy .npy or .npz) or a folder of images",
    )
    source.add_argument("--fake", action="store_true", help="random images (--n of them, --size pixels)")
    probe.add_argument(
        "--n", type=int, default=None,
        help="number of images (default: all of --data; fewer are taken spread evenly over it, so data stored "
        "class by class keep every class; 256 with --fake)",
    )  # fmt: skip
    probe.add_argument(
        "--size", type=int, default=None, help="image side in pixels (resize --data; default 64 with --fake)"
    )
    probe.add_argument("--channels", type=int, default=None, help="channels of --fake images (default: 3)")
    probe.add_argument(
        "--transforms",
        required=True,
        nargs="+",
        action=SpaceList,
        metavar="NAME",
        help="augnet image transforms, e.g. --transforms Rotate HorizontalFlip",
    )
    probe.add_argument(
        "--layers",
        nargs="+",
        action=SpaceList,
        default=["auto"],
        metavar="LAYER",
        help="layer names, e.g. --layers layer4 fc, or auto: the top-level blocks and the logits (default)",
    )
    probe.add_argument(
        "--magnitudes",
        nargs="+",
        action=SpaceList,
        default=["0.25", "0.5", "1"],
        metavar="MU",
        help="magnitudes in (0, 1] (default: 0.25 0.5 1)",
    )
    probe.add_argument("--batch-size", type=int, default=None,
                       help="rows per forward pass (default: 256; 64 for the Lie derivative)")  # fmt: skip
    probe.add_argument("--no-lie", action="store_true", help="skip the Lie derivative")
    probe.add_argument(
        "--per-unit",
        action="store_true",
        help="also write every per-unit measure, one value per channel, to probe.units.json (and units.png)",
    )
    probe.add_argument(
        "--by-class",
        default=None,
        metavar="LABELS",
        help="measure each class apart: 'data' (the labels of --data: its 'y' tensor or its subfolders) or a "
        "file of labels (a tensor file, a NumPy .npy or .npz file, or a text file, .txt or .csv, of one integer "
        "per line)",
    )
    probe.add_argument(
        "--transformations",
        metavar="{random,grid}",
        default="random",
        help="random: one draw per image and magnitude (default); grid: every image under every value of a "
        "fixed grid of the transform's parameter (--grid-points values; a flip's off and on)",
    )
    probe.add_argument(
        "--grid-points",
        type=int,
        default=None,
        help="values of a continuous transform's grid, with --transformations grid (default: 9)",
    )
    probe.add_argument(
        "--aggregation",
        metavar="{pool,positions}",
        default="pool",
        help="feature maps to units: pool the positions, then measure (default; (N, C) per layer); or measure "
        "every position, then average per channel (holds every map; needed for same-equivariance)",
    )
    probe.add_argument(
        "--seed", type=int, default=0,
        help="seed of the draws and, without --weights, of the model's initialisation (default: %(default)s)",
    )  # fmt: skip
    probe.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    probe.add_argument("--device", default="cpu", help="where to run, e.g. cpu or cuda (default: %(default)s)")
    probe.add_argument("--out", default="augnet-probe", help="results folder (default: %(default)s)")
    add_progress(probe, "a progress bar")
    probe.set_defaults(func=_probe)
    return parser


def _probe(args: argparse.Namespace) -> int:
    import time

    import torch

    from augnet.probes import report

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    start = time.perf_counter()
    try:  # reading the model and the data: a problem is one line on stderr, before any probing
        model, x, labels, layers = probe_inputs(args)
    except (ValueError, TypeError) as err:
        print(f"augnet probe: error: {err}", file=sys.stderr)
        return 2
    if unused_notice(args) is not None:
        print(unused_notice(args), file=sys.stderr)
    say_replacing(args)
    model, x = model.to(args.device), x.to(args.device)
    print(
        f"augnet probe: {type(model).__name__} ({args.model}) on {len(x)} images {tuple(x.shape[1:])}, "
        f"transforms {', '.join(args.transforms)}"
    )
    rep = report(
        model,
        x,
        args.transforms,
        layers,
        [float(m) for m in args.magnitudes],
        lie=not args.no_lie,
        batch_size=args.batch_size,
        seed=args.seed,
        progress=show_progress(args),
        per_unit=args.per_unit,
        by_class=labels,
        transformations=args.transformations,
        aggregation=args.aggregation,
        grid_points=grid_points(args),
    )
    out = Path(args.out)
    rep.info.update(command="augnet " + " ".join(args.argv), data="fake" if args.fake else str(args.data))
    for name in () if rep.units else _UNIT_FILES:  # an earlier --per-unit run's: not this run's results
        (out / name).unlink(missing_ok=True)
    saved = [rep.save(out / "probe.json"), rep.save(out / "probe.csv")]
    if rep.units:
        saved.append(out / "probe.units.json")
    verdict = rep.verdict()
    (out / "verdict.txt").write_text(verdict + "\n")
    saved.append(out / "verdict.txt")
    for name in ("heatmap.png", "units.png"):  # an earlier run's (said replaced) are not this run's, drawn or not
        (out / name).unlink(missing_ok=True)
    try:
        saved.append(rep.heatmap(out / "heatmap.png"))
        if rep.units:
            saved.append(rep.units_plot(out / "units.png"))
    except ImportError as err:  # no matplotlib: no figure, and no earlier run's in its place
        print(f"augnet probe: no heatmap{' nor units plot' if rep.units else ''}: {err}", file=sys.stderr)
    print(f"\n{verdict}\n")
    print(f"saved {', '.join(str(p) for p in saved)}  ({time.perf_counter() - start:.0f} s)")
    return 0


def _reproduce(args: argparse.Namespace) -> int:
    import torch

    from augnet.experiments import reproduce

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    print(f"augnet reproduce {args.name}{' (quick)' if args.quick else ''}")
    build_extension_first()
    from augnet.experiments._registry import SetupError

    say_replacing(args)
    try:
        report = reproduce(
            args.name, quick=args.quick, out=args.out, seed=args.seed, progress=show_progress(args), device=args.device
        )
    except SetupError as err:  # refused before any work (e.g. --quick runs in the folder of a full versus run)
        print(f"augnet reproduce: error: {err.cli}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: one line, not the traceback of wherever the runs were waited for
        runs = Path(args.out) / args.name / "runs.jsonl"
        kept = (
            f"; the runs that finished are kept in {runs} and the same command carries on from them"
            if runs.is_file() else ""
        )
        print(f"\naugnet reproduce: interrupted{kept}", file=sys.stderr)
        return 130
    print(f"\n{report.verdict}\n")
    folder = Path(args.out) / args.name
    saved = [str(p) for p in report.figures] + [str(folder / f"{args.name}.json"), str(folder / "verdict.txt")]
    print(f"saved {', '.join(saved)}  ({report.seconds:.0f} s)")
    return 0


def build_extension_first() -> None:
    """Load the tap_mix C++ extension before a progress bar starts (:func:`augnet.ops._cpp.load_first`)."""
    from augnet.ops._cpp import load_first

    load_first()


def check_args(args: argparse.Namespace) -> str | None:
    """The first problem with the arguments, as one line (``None`` if there is none); checked before any work."""
    for name in ("epochs", "threads", "batch", "copies"):
        value = getattr(args, name, None)
        if value is not None and value < 1:
            return f"{getattr(args, f'{name}_flag', f'--{name}')} must be >= 1, got {value}"
    if threads_problem(args.threads) is not None:
        return threads_problem(args.threads)
    if getattr(args, "sizes", None) and min(args.sizes) < 1:
        return f"--sizes must be positive, got {' '.join(map(str, args.sizes))}"
    transforms = getattr(args, "transforms", None) or ()
    if getattr(args, "transforms", None) == []:  # `--transforms ,`: commas and no name (None: the default)
        return "--transforms names no transform"
    grey = [t for t in transforms if t in RGB_ONLY] if getattr(args, "data", None) == "glyphs" else []
    if grey:
        return f"--transforms {' '.join(grey)} need RGB images; the glyphs are grey (use --data sprites)"
    if len(set(transforms)) < len(transforms):
        return f"--transforms names a transform more than once: {' '.join(transforms)}"
    if args.command == "bench" and args.model is None:  # bench --model: the cost on paper, nothing is run
        problem = check_bench(args)  # its seed, device and providers: refused before the notice, not by the run
        if problem is not None:
            return problem
    if args.command in ("demo", "probe"):  # reproduce: the experiments' own check
        top, shown = (MAX_DEMO_SEED, "2**64 - 3") if args.command == "demo" else (MAX_SEED, "2**63 - 3")
        if not 0 <= args.seed <= top:
            return f"--seed must be in [0, {shown}], got {args.seed}"
    if args.command == "probe":
        problem = check_probe(args)
        if problem is not None:
            return problem
    if args.command == "reproduce":
        from augnet.experiments import _registry

        try:
            _registry.check_settings(args.name, args.device, args.seed, args.quick)
        except _registry.SetupError as err:
            return err.cli
    device = getattr(args, "device", None)
    if device is not None and args.command in ("demo", "reproduce", "probe"):  # bench: check_bench
        from augnet.training import resolve_device

        try:
            resolve_device(device)
        except ValueError as err:
            return f"--device {device}: {err}"
    min_time = getattr(args, "min_time", None)
    if min_time is not None and not 0 < min_time < math.inf:  # inf: the timing loop would never end
        return f"--min-time must be > 0 and finite, got {min_time}"
    if args.command == "bench" and getattr(args, "model", None) is not None:
        return None  # the cost on paper: nothing is written
    if not args.out.strip():  # e.g. --out "$DIR" with DIR unset: the results would land in the working directory
        return f"--out is empty ({args.out!r}); name a folder (--out . for the working directory)"
    from augnet._checks import folder_problem  # made when the first result is written: a refused run leaves none

    return folder_problem(args.out, "--out", "output folder") or results_problem(args) or runs_problem(args)


#: the options that name a file or folder
_PATH_OPTIONS = ("out", "data", "weights", "by_class")


def _expand_home(args: argparse.Namespace) -> None:
    """A leading ``~`` of a path option is the home folder, where the shell left it (``--out=~/x``, a quoted
    ``"~/x"``): the commands wrote part of their output under a folder named ``~`` in the working directory, and
    the rest (the reports, which read paths with :func:`augnet._checks.user_path`) under the home folder."""
    for name in _PATH_OPTIONS:
        value = getattr(args, name, None)
        if isinstance(value, str) and value.startswith("~"):
            setattr(args, name, str(user_path(value)))


def main(argv: list[str] | None = None) -> int:
    if argv is None and not sys.warnoptions:
        # Run as the ``augnet`` command: its own deprecations are for the person typing it, so they are shown
        # (Python hides a DeprecationWarning raised outside ``__main__``), unless -W or PYTHONWARNINGS say otherwise.
        warnings.filterwarnings("default", category=DeprecationWarning, module=r"augnet\.(cli|_cli_args)$")
    try:
        parser = build_parser()
        args, extra = parser.parse_known_args(argv)
    except KeyboardInterrupt:  # Ctrl-C while the parser imports the experiments: as below, before a command is known
        print("\naugnet: interrupted", file=sys.stderr)
        return 130
    if args.command is None:
        refuse_no_command(parser, extra)
    if extra:  # a misspelt option: the command's usage and the options it is close to, not the top level's usage
        refuse_unknown(parser, args.command, extra)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    _expand_home(args)
    try:
        problem = check_args(args)
        if problem is not None:
            print(f"augnet {args.command}: error: {problem}", file=sys.stderr)
            return 2
        return args.func(args)
    except KeyboardInterrupt:  # Ctrl-C stops a command: one line, not a traceback
        print(f"\naugnet {args.command}: interrupted", file=sys.stderr)
        return 130
    except (MemoryError, RuntimeError) as err:  # e.g. --size 100000: torch's allocation error, as one line
        if out_of_memory(err) is None:
            raise
        print(f"augnet {args.command}: error: {out_of_memory(err)}", file=sys.stderr)
        return 1


def run() -> None:
    """The ``augnet`` command: :func:`main`, ending as a program stopped by Ctrl-C ends when it was.

    A program that catches SIGINT and exits with 130 tells a shell script that it handled the signal, and the
    script goes on; Python ends an uncaught KeyboardInterrupt as killed by SIGINT, after its clean-up (exit
    handlers, flushed output). Here that is raised with its traceback silenced: :func:`main` said it in a line.
    """
    sys.stdout, sys.stderr = PipeGuard(sys.stdout), PipeGuard(sys.stderr)  # `augnet ... | head -1`: no traceback
    code = main()
    sys.stdout.flush()  # what is left in the buffer, while a reader that has gone is still caught
    if code == 130:
        sys.excepthook = _quiet_interrupt
        raise KeyboardInterrupt
    sys.exit(code)


def _quiet_interrupt(kind, value, traceback) -> None:
    if not issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, value, traceback)


if __name__ == "__main__":  # pragma: no cover
    run()
