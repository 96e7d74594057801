"""The checks of ``augnet``'s arguments made before any work, and the command's guards (:mod:`augnet.cli`).

Nothing here imports torch at import time: checking the arguments stays quick.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

from augnet._checks import MAX_THREADS


def threads_problem(threads: int | None) -> str | None:
    """Why ``--threads`` cannot be used (``None`` if it can, or was not given)."""
    if threads is not None and not 1 <= threads <= MAX_THREADS:
        return f"--threads must be >= 1 and at most {MAX_THREADS}, got {threads}"
    return None


def result_files(args: argparse.Namespace) -> tuple[str, ...]:
    """The files the command writes in ``--out`` (``augnet reproduce``'s experiments check their own)."""
    if args.command == "demo":
        return ("demo.json", "policy.png")
    if args.command == "probe":
        return probe_files(args.per_unit)
    if args.command == "bench" and args.model is None:
        stem = f"{args.device}{'_quick' if args.quick else ''}"
        inference = () if args.no_inference else (f"inference_{stem}.json",)
        return (f"tap_mix_{stem}.json", f"tap_mix_{stem}.json.tmp", f"tap_mix_{stem}.png", *inference)
    return ()


def results_problem(args: argparse.Namespace) -> str | None:
    """A result file of the command that is an existing directory: found after the work, it would end the command
    with a traceback and the work lost. For ``augnet reproduce``, a file where its folder ``OUT/NAME`` goes."""
    if args.command == "reproduce" and (Path(args.out) / args.name).exists() and not (
            Path(args.out) / args.name).is_dir():  # fmt: skip
        return f"--out {args.out}: {Path(args.out) / args.name} is an existing file where the experiment's folder goes"
    for name in result_files(args):
        if (Path(args.out) / name).is_dir():
            return f"--out {args.out}: {Path(args.out) / name} is an existing directory where the results go"
    return None


def check_probe(args: argparse.Namespace) -> str | None:
    """The first problem with ``augnet probe``'s arguments (``None`` if there is none)."""
    from augnet.probes.report import AGGREGATIONS, TRANSFORMATIONS, transform_names

    if ":" not in args.model:
        return f"--model must be 'package.module:name' (e.g. torchvision.models:resnet18), got {args.model!r}"
    names = args.transforms
    unknown = [n for n in names if n not in transform_names()]
    if not names or unknown:
        given = " ".join(unknown) or "(none)"
        return f"--transforms {given}: not augnet image transforms ({', '.join(transform_names())})"
    # (a name given twice: refused before, by augnet.cli.check_args, for every command)
    try:
        mags = [float(m) for m in args.magnitudes]
    except ValueError:
        return f"--magnitudes must be numbers, got {' '.join(args.magnitudes)}"
    if not mags or not all(0 < m <= 1 for m in mags):
        return f"--magnitudes must lie in (0, 1], got {' '.join(args.magnitudes) or 'none'}"
    for name, value, known in (("transformations", args.transformations, TRANSFORMATIONS),
                               ("aggregation", args.aggregation, AGGREGATIONS)):  # fmt: skip
        if value not in known:
            return f"--{name} must be one of {', '.join(known)}, got {value!r}"
    if "auto" in args.layers and args.layers != ["auto"]:
        return f"--layers auto stands alone (the default layers), got {' '.join(args.layers)}"
    if args.grid_points is not None and args.grid_points < 2:
        return f"--grid-points must be >= 2, got {args.grid_points}"
    if args.by_class is not None and args.by_class != "data" and not Path(args.by_class).is_file():
        return f"--by-class {args.by_class} is neither 'data' nor a file"
    if args.by_class == "data" and args.data is None:
        return "--by-class data reads the labels of --data; with --fake, give a labels file"
    for name in ("n", "size", "channels", "batch_size"):
        value = getattr(args, name)
        if value is not None and value < (8 if name in ("n", "size") else 1):
            return f"--{name.replace('_', '-')} must be >= {8 if name in ('n', 'size') else 1}, got {value}"
    if args.data is not None and not Path(args.data).exists():
        return f"--data {args.data} does not exist"
    if args.weights is not None and not Path(args.weights).is_file():
        return f"--weights {args.weights} is not a file"
    if args.model_args is not None:
        try:
            if not isinstance(json.loads(args.model_args), dict):
                raise ValueError
        except ValueError:
            return f"--model-args must be a JSON object, got {args.model_args!r}"
    return None


def check_bench(args: argparse.Namespace) -> str | None:
    """The first problem with the arguments of ``augnet bench``'s timing run (``None`` if there is none): what
    :class:`~augnet.bench.BenchConfig` and the run would refuse only once started, named by the flags."""
    if args.seed is not None and not 0 <= args.seed < 2**63:  # torch's generators take seeds below 2**64
        return f"--seed must be in [0, 2**63 - 1], got {args.seed}"
    from augnet.training import resolve_device

    try:
        resolve_device(args.device)
    except ValueError as err:
        return f"--device {args.device}: {err}"
    if args.providers:
        import torch

        from augnet.bench.harness import _check_providers

        try:
            _check_providers(args.providers, torch.zeros(1, 1, 1, 1, device=args.device), flag="--providers")
        except ValueError as err:
            return str(err)
    return None


def runs_problem(args: argparse.Namespace) -> str | None:
    """Earlier runs in ``--out`` that ``augnet reproduce`` would refuse to go on from (``None`` if none): versus's
    full runs for a ``--quick`` run, or the reverse (:func:`augnet.experiments.versus.check_runs_folder`)."""
    if args.command != "reproduce" or args.name != "versus":
        return None
    from augnet.experiments import SetupError, versus

    try:
        versus.check_runs_folder(Path(args.out) / args.name, args.quick)
    except SetupError as err:
        return err.cli
    return None


def probe_inputs(args: argparse.Namespace):
    """``augnet probe``'s model, images, labels and layers, read and checked before any probing: a problem is the
    ValueError or TypeError of one line. The refusals of :func:`augnet.probes.report` that come before its first
    pass are made here too, so that the command refuses before it says what it replaces."""
    import torch

    from augnet.probes._common import check_model_input
    from augnet.probes.inputs import _kept as kept
    from augnet.probes.inputs import fake_images, image_files, load_images, load_model
    from augnet.transforms import image as T

    if args.weights is None:  # a model's random initialisation: repeatable with --seed as the rest
        torch.manual_seed(args.seed)
    import_from_here()
    model = load_model(args.model, args.model_args, args.weights)
    if args.fake:
        x = fake_images(args.n or 256, args.size or 64, args.channels or 3, args.seed)
        total = len(x)
    elif Path(args.data).is_dir():  # only the files --n keeps are read; the folder's count, for the labels
        x = load_images(args.data, args.size, args.n)
        total = len(image_files(Path(args.data)))
    else:  # a file is read whole in any case: --n's rows are taken from it here, its count kept for the labels
        whole = load_images(args.data, args.size)
        x, total = kept(whole, args.n), len(whole)
    if len(x) < 8:
        raise ValueError(f"--data {args.data} holds {len(x)} images; the probes need at least 8")
    check_dtype(model, x, args.model)
    try:  # report's refusals of the model (a compiled AugNet, before the first call compiles it; its dtype)
        check_model_input(model, x)
    except (TypeError, ValueError) as err:
        raise type(err)(f"--model {args.model}: {err}") from None
    labels = None
    if args.by_class is not None:
        labels = read_labels(args)  # --by-class data: the kept images' own; a file: all of them, checked first
        if args.by_class != "data" and len(labels) != total:  # (they were thinned by --n before the count:
            # a file of another count passed, its labels paired with other images)
            kept_note = f" (--n {args.n} keeps {len(x)} of them)" if len(x) != total else ""
            raise ValueError(f"--by-class {args.by_class} holds {len(labels)} labels for {total} images{kept_note}")
        if args.by_class != "data" and not args.fake:
            labels = kept(labels, args.n)  # the rows --n keeps of the images
        if len(labels) != len(x):
            raise ValueError(f"--by-class {args.by_class} holds {len(labels)} labels for {len(x)} images")
        # (a negative label, of a text or a tensor file: refused by load_labels, naming the file)
    if args.transformations == "grid":
        from augnet.probes.families import grid_values

        for name in args.transforms:
            grid_values(getattr(T, name)(), 1.0, grid_points(args), tuple(x.shape[-2:]))
    for name in args.transforms:
        getattr(T, name)().check_input(x[:1])  # e.g. Hue needs RGB images
    from augnet.probes.features import CHECK_ROWS

    where = f"--channels {args.channels or 3}" if args.fake else f"--data {args.data}"
    check_takes(model, x[:CHECK_ROWS], where)  # two images: a batch norm without running statistics runs
    layers = "auto" if args.layers == ["auto"] else args.layers
    if layers != "auto":
        from augnet.probes.features import check_layers

        if not layers or len(set(layers)) != len(layers):
            raise ValueError(f"--layers must name distinct layers (or auto), got {' '.join(args.layers) or 'none'}")
        check_layers(model, x, layers)  # unknown layers, calls of a reused module: one pass of two images
    return model, x, labels, layers


#: What ``augnet probe --by-class`` reads from a file (:func:`augnet.probes.inputs.load_labels`).
LABEL_FILES = (
    "a text file (.txt or .csv) of one integer per line, a NumPy .npy file (numpy.save) of (N,) integer labels, "
    "a NumPy .npz file (numpy.savez) with them as 'y' or 'labels' or alone, "
    "or a tensor file (torch.save) of (N,) integer labels, alone, as 'y' or 'labels' of a dict, or as the second "
    "item of (x, y)"
)


def read_labels(args: argparse.Namespace):
    """The labels of ``--by-class`` (:func:`~augnet.probes.inputs.load_labels`). A file that is neither a text file
    of labels nor a tensor file torch reads with ``weights_only=True`` is one line naming the formats read; not
    torch's message, which says to load it with ``weights_only=False``: unsafe for a file of unknown origin (nor
    the warnings torch gave while failing to read it)."""
    import warnings

    from augnet.probes.inputs import load_labels

    try:
        with warnings.catch_warnings(record=True) as caught:
            labels = load_labels(args.by_class, args.data, args.n if args.by_class == "data" else None)
    except ValueError as err:
        if args.by_class == "data" or not str(err).startswith("cannot read --by-class "):
            raise
        raise ValueError(f"--by-class {args.by_class} {not_labels(Path(args.by_class))}") from None
    for w in caught:  # read after all: torch's warnings, given as they came
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return labels


def not_labels(path: Path) -> str:
    """Why ``path``, a file torch cannot read as tensors, is no labels file, and what is read instead."""
    import codecs
    import zipfile

    try:
        with path.open("rb") as f:
            start = f.read(4096)
    except OSError as err:  # e.g. a file this user may not read
        return f"cannot be read: {err.strerror or err}"
    if start.startswith(b"\x93NUMPY"):  # read by load_labels, which names what it refuses: kept for safety
        return f"is a NumPy .npy file that cannot be read: give {LABEL_FILES} (numpy.save('labels.npy', y) writes one)"
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (OSError, zipfile.BadZipFile):  # no zip archive, as torch.save writes
        names = []
    if any(name.endswith("data.pkl") for name in names):  # torch.save's archive
        return (f"is a torch.save file holding more than tensors (e.g. NumPy arrays), or saved with a "
                f"pickle_protocol other than the default: torch reads neither safely; give {LABEL_FILES} "
                f"(torch.save(torch.as_tensor(y), 'labels.pt') writes one)")  # fmt: skip
    try:  # text (a last character cut at 4096 bytes is no matter): labels, but not named so
        text = b"\0" not in start and bool(codecs.getincrementaldecoder("utf-8")().decode(start, final=False))
    except UnicodeDecodeError:
        text = False
    if text:
        return f"is read as text only when named .txt or .csv; give {LABEL_FILES}"
    return f"is not a labels file: give {LABEL_FILES}"


def check_dtype(model, x, spec: str) -> None:
    """The TypeError of a model whose floating-point parameters are none of them of ``x``'s dtype (float32: the
    images ``augnet probe`` reads or makes), saying what a command-line user can do about it; the library's own
    message (:func:`~augnet.probes._common.check_model_input`) asks for ``x.to(...)``, which the command does not
    offer."""
    kinds = sorted({str(p.dtype).removeprefix("torch.") for p in model.parameters() if p.is_floating_point()})
    images = str(x.dtype).removeprefix("torch.")
    if kinds and x.is_floating_point() and images not in kinds:
        raise TypeError(
            f"--model {spec} has {' and '.join(kinds)} parameters, and augnet probe gives it {images} images (of "
            f"--data and --fake alike): name in --model a function of your own module that returns the model cast "
            f"to {images}, e.g. def make(): return MyNet().float(), then --model my_module:make (--weights of any "
            "floating-point dtype load into it)"
        )


def check_takes(model, x, source: str) -> None:
    """The ValueError of a model that cannot take ``x`` (two images), as one line, before any probing.

    E.g. grey images for a model whose first convolution wants 3 channels: its RuntimeError would
    otherwise come as a traceback from inside the first probe.
    """
    import torch

    from augnet.probes._common import evaluating

    try:
        with torch.no_grad(), evaluating(model):
            model(x)
    except RuntimeError as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(
            f"{type(model).__name__} cannot take {tuple(x.shape[1:])} images ({source}): {first}"
        ) from None


def grid_points(args: argparse.Namespace) -> int:
    """``--grid-points``, or :func:`augnet.probes.report`'s own default when it is not given."""
    if args.grid_points is not None:
        return args.grid_points
    import inspect

    from augnet.probes.report import report

    return inspect.signature(report).parameters["grid_points"].default


def unused_notice(args: argparse.Namespace) -> str | None:
    """The line naming ``augnet probe``'s options given that this run does not use (``None`` when there are
    none): a setting silently ignored reads as a setting applied."""
    unused = [f"--channels {args.channels} (--data images keep their own channels)"] if (
        args.channels is not None and not args.fake) else []  # fmt: skip
    if args.grid_points is not None and args.transformations != "grid":
        unused.append(f"--grid-points {args.grid_points} (only --transformations grid uses it)")
    return f"augnet probe: not used: {'; '.join(unused)}" if unused else None


def probe_files(per_unit: bool) -> tuple[str, ...]:
    """The files ``augnet probe`` writes in ``--out``."""
    return ("probe.json", "probe.csv", "verdict.txt", "heatmap.png", *(UNIT_FILES if per_unit else ()))


UNIT_FILES = ("probe.units.json", "units.png")  # without --per-unit, an earlier run's are removed


def replacing_notice(args: argparse.Namespace) -> str | None:
    """The line that names the results of an earlier run in ``--out`` that this run replaces (``None`` when there
    are none): a rerun into the same folder overwrites them, as it should (CI and the README's commands rerun into
    one place), but not silently. Read before the work, so that a long run can still be stopped."""
    folder = Path(args.out)
    if args.command == "reproduce":  # the summary the experiment writes, and its figures (the runs it resumes from
        folder = folder / args.name  # in runs.jsonl are kept, not replaced)
        names = [n for n in (f"{args.name}.json", "verdict.txt") if (folder / n).is_file()]
        names += ["its figures"] if names and any(p.is_file() for p in folder.glob("*.png")) else []
    else:
        names = [n for n in result_files(args) if not n.endswith(".tmp") and (folder / n).is_file()]
    gone = [n for n in UNIT_FILES if (folder / n).is_file()] if args.command == "probe" and not args.per_unit else []
    if not names and not gone:
        return None
    said = ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else "".join(names)
    line = f"replacing the results of an earlier run in {folder}: {said}" if names else ""
    if gone:
        line += ("; " if line else f"in {folder}, ") + f"removing {' and '.join(gone)} (this run has no --per-unit)"
    return f"augnet {args.command}: {line}"


def say_replacing(args: argparse.Namespace) -> None:
    """Print :func:`replacing_notice` on stderr, if there is one."""
    notice = replacing_notice(args)
    if notice is not None:
        print(notice, file=sys.stderr)


def out_of_memory(err: BaseException) -> str | None:
    """One line for an allocation that failed because the settings ask for more memory than there is (``None`` for
    any other error): torch's own message is a C++ assertion, or an overflow of the size of a tensor."""
    text = str(err).strip().splitlines()[0] if str(err).strip() else ""
    if not (isinstance(err, MemoryError) or type(err).__name__ == "OutOfMemoryError"
            or "can't allocate memory" in text or "Storage size calculation overflowed" in text):  # fmt: skip
        return None
    asked = re.search(r"tried to allocate (\d+) bytes", text)  # the CPU allocator's
    sized = re.search(r"Tried to allocate (\d+(?:\.\d+)? [KMGTP]?i?B)", text)  # CUDA's, a line of advice after it
    if asked or sized:
        detail = f"{int(asked.group(1)) / 2**30:.3g} GiB" if asked else sized.group(1)
        detail += " asked for at once"
    else:
        detail = text or type(err).__name__
    return f"not enough memory for these settings ({detail}); smaller sizes, batches or counts need less"


def import_from_here() -> None:
    """Let ``--model`` name a module of the working directory, as ``python -m augnet`` does: the ``augnet``
    script's own folder, not the working directory, is first on ``sys.path``. Added last, so that no file of the
    working directory hides an installed package."""
    here = os.getcwd()
    if not any(entry in ("", ".", here) for entry in sys.path):
        sys.path.append(here)


class PipeGuard:
    """``sys.stdout`` / ``sys.stderr`` of the ``augnet`` command: once the reader of a pipe has gone
    (``augnet ... | head -1``), the rest of that stream's output is dropped and the command carries on (its files
    are still written), instead of ending in a ``BrokenPipeError`` traceback.

    A stream that is ``None`` (Python's, for a descriptor closed at start: ``augnet bench 2>&-``) drops what is
    written to it, as ``print`` does with no ``sys.stdout``: the command runs, quietly, to its end."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        if self._stream is None:
            return len(text)
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._gone()
            return len(text)

    def flush(self):
        if self._stream is None:
            return
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._gone()

    def _gone(self) -> None:
        # What is still buffered, and whatever is written later, goes to the null device: no error at exit either.
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, self._stream.fileno())
        finally:
            os.close(null)

    def __getattr__(self, name):
        return getattr(self._stream, name)
