"""Does learned augmentation beat hand-designed policies on *your* data? :func:`compare`.

The methods of ``augnet reproduce versus`` (:mod:`augnet.experiments.versus_methods`), run on the tensors
you give: the same trunk (a fresh one per run, from your factory), optimiser (Adam), epochs and batch size for
every method; they differ only in the augmentation. Each run records the test accuracy as the method predicts
by default (AugNet and Augerino average their evaluation copies, the others read one image), with 4 copies of
test-time augmentation and with one copy, optionally the invariance of the logits to a transformation you
name, and the training's wall-clock and CPU seconds (with torch's threads as you set them).

Examples:
    >>> import torch
    >>> from augnet.experiments import compare
    >>> x, y = torch.rand(64, 1, 12, 12), torch.arange(64) % 2
    >>> def trunk():
    ...     return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(144, 2))
    >>> result = compare(trunk, (x, y), (x, y), ["none", "augnet"], epochs=1, seeds=[0], progress=False)
    >>> [r["method"] for r in result.records]
    ['none', 'augnet']
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor, nn

from augnet._checks import check_bool, folder_problem, is_int, is_real, user_path
from augnet._json import dumps as strict_json
from augnet._labels import INTEGER_DTYPES, int64_labels, labels_in_range
from augnet.experiments.versus import _mean_std as versus_mean_std
from augnet.experiments.versus_methods import (
    HAND_DESIGNED,
    _policy,
    accuracies_on,
    build,
    invariance_at_logits,
    train,
)
from augnet.transforms.base import Transform

__all__ = ["COMPARE_METHODS", "Comparison", "compare"]

#: The methods :func:`compare` runs (``versus``'s ``fixed`` needs a grid search on a validation split: not here).
COMPARE_METHODS = ("none", "crop", *HAND_DESIGNED, "augerino", "augnet", "instance")
#: Those that need images: torchvision's policies work on (C, H, W) uint8 images, Augerino's warps are affine.
_IMAGE_ONLY = ("crop", *HAND_DESIGNED, "augerino")
_MEASURES = ("accuracy", "accuracy_tta", "accuracy_1", "invariance", "train_seconds", "train_cpu_seconds")


@dataclass
class Comparison:
    """What :func:`compare` measured: one record per (method, seed), in ``records``.

    A record holds ``method``, ``seed``, ``accuracy`` (as the method predicts by default), ``accuracy_tta``
    (4 test-time copies), ``accuracy_1`` (one copy), ``invariance`` (NaN without ``invariance=``),
    ``train_seconds``, ``train_cpu_seconds`` and ``policy`` (the ``augnet`` method's learned policy as JSON;
    None for the others, the per-instance layer's included). :meth:`save` writes them as strict JSON and
    :meth:`load` reads them back.
    """

    records: list[dict] = field(default_factory=list)

    def summary(self) -> dict[str, dict[str, tuple[float, float, int]]]:
        """``{method: {measure: (mean, standard deviation, runs)}}`` over the seeds, in the methods' order."""
        out: dict = {}
        for i, r in enumerate(self.records):
            missing = [m for m in ("method", *_MEASURES) if m not in r]
            if missing:  # a record compare did not make (a foreign file read by load): named, not a KeyError
                raise ValueError(f"record {i} ({r.get('method', '?')!r}) lacks {missing}: every record of compare "
                                 f"holds {['method', 'seed', *_MEASURES]}")  # fmt: skip
            cell = out.setdefault(r["method"], {})
            for m in _MEASURES:
                cell.setdefault(m, []).append(r[m])
        return {method: {m: _mean_std(v) for m, v in c.items()} for method, c in out.items()}

    def table(self) -> str:
        """The summary as a markdown table (mean ± std over the seeds)."""
        lines = [
            "| method | accuracy | with TTA (4) | one copy | invariance | train s (CPU s) | runs |",
            "|---|---|---|---|---|---|---|",
        ]
        for method, c in self.summary().items():
            cells = [f"{c[m][0]:.3f} ± {c[m][1]:.3f}" for m in ("accuracy", "accuracy_tta", "accuracy_1")]
            inv = "-" if math.isnan(c["invariance"][0]) else f"{c['invariance'][0]:.3f} ± {c['invariance'][1]:.3f}"
            seconds = f"{c['train_seconds'][0]:.1f} ({c['train_cpu_seconds'][0]:.1f})"
            lines.append(f"| {method} | {' | '.join(cells)} | {inv} | {seconds} | {c['accuracy'][2]} |")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()

    def save(self, path) -> Path:
        """Write the records to ``path`` as strict JSON (a NaN, an invariance not measured, as ``null``); the path.

        Its folder is made if needed; a ``path`` that is an existing directory (or under a file) is a ValueError.

        Examples:
            >>> import tempfile, pathlib
            >>> result = Comparison([{"method": "none", "seed": 0, "accuracy": 0.5, "invariance": math.nan}])
            >>> path = result.save(pathlib.Path(tempfile.mkdtemp()) / "comparison.json")
            >>> Comparison.load(path).records[0]["invariance"]
            nan
        """
        path = user_path(path)  # "~/..." the home folder
        if path.is_dir():
            raise ValueError(f"cannot save to {path}: it is an existing directory (name a file in it, e.g. "
                             f"{path / 'comparison.json'})")  # fmt: skip
        problem = folder_problem(path.parent, "folder", "output")
        if problem:
            raise ValueError(f"cannot save to {path}: {problem}")
        text = strict_json({"comparison": self.records})
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
        return path

    @classmethod
    def load(cls, path) -> Comparison:
        """The comparison :meth:`save` wrote (``null`` measures read back as NaN): its table as the saved one's."""
        path = user_path(path)  # "~/..." the home folder
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or not isinstance(data.get("comparison"), list):
            raise ValueError(f"{path} is not a saved Comparison (a JSON object with a 'comparison' list of records)")
        bad = next((i for i, r in enumerate(data["comparison"]) if not isinstance(r, dict) or "method" not in r), None)
        if bad is not None:
            raise ValueError(f"{path} is not a saved Comparison: record {bad} is not an object with a 'method', got "
                             f"{data['comparison'][bad]!r:.80}")  # fmt: skip
        nan = lambda k, v: math.nan if k in _MEASURES and v is None else v  # noqa: E731
        return cls([{k: nan(k, v) for k, v in r.items()} for r in data["comparison"]])


def _mean_std(values: list[float]) -> tuple[float, float, int]:
    if any(math.isnan(v) for v in values):  # a measure not taken (invariance without ``invariance=``)
        return math.nan, math.nan, len(values)
    return (*versus_mean_std(values), len(values))


def _stacked(name: str, data: torch.utils.data.Dataset) -> tuple[Tensor, Tensor]:
    """A data set of ``(input tensor, label)`` items as two tensors (all of it, in memory)."""
    if isinstance(data, torch.utils.data.IterableDataset) or not hasattr(data, "__len__"):
        raise TypeError(f"{name}: a data set that can be indexed and has a length is needed, got "
                        f"{type(data).__name__} (an iterable data set: collect it into (inputs, labels) tensors)")
    xs, ys = [], []
    with torch.random.fork_rng(devices=[]):  # a data set's random transforms: drawn once, the caller's state restored
        for i in range(len(data)):
            item = data[i]
            if isinstance(item, Mapping):  # e.g. {"image": ..., "label": ...}: the hint below would be wrong
                raise TypeError(f"{name}: item {i} of the data set is a dict with keys {list(item)[:8]}; compare "
                                "reads (input tensor, label) pairs: wrap the data set to return them")  # fmt: skip
            if isinstance(item, (tuple, list)) and len(item) != 2:  # TensorDataset(x, y, w): the hint below is wrong
                raise TypeError(f"{name}: item {i} of the data set must be an (input tensor, label) pair, got a "
                                f"{type(item).__name__} of {len(item)} items: wrap the data set to return "
                                "two")  # fmt: skip
            if not isinstance(item, (tuple, list)) or not isinstance(item[0], Tensor):
                pair = isinstance(item, (tuple, list))
                got = f"({type(item[0]).__name__}, ...)" if pair else type(item).__name__
                raise TypeError(f"{name}: item {i} of the data set must be an (input tensor, label) pair, got "
                                f"{got} (give the data set a transform to tensors, e.g. "
                                "v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=True)]))")  # fmt: skip
            label = item[1]
            if isinstance(label, Tensor) and label.numel() == 1 and not label.is_floating_point():
                label = label.item()
            if not is_int(label):
                raise TypeError(f"{name}: item {i}'s label must be an integer class index, got {label!r}")
            if xs and item[0].shape != xs[0].shape:
                raise ValueError(f"{name}: items of the data set differ in shape, {tuple(xs[0].shape)} (item 0) and "
                                 f"{tuple(item[0].shape)} (item {i}): give it a transform to one size (e.g. "
                                 "v2.Resize and v2.CenterCrop)")  # fmt: skip
            xs.append(item[0])
            ys.append(int(label))
    if not xs:
        raise ValueError(f"{name}: the data set is empty")
    return torch.stack(xs), torch.tensor(ys, dtype=torch.long)


def _pair(name: str, pair) -> tuple[Tensor, Tensor]:
    if isinstance(pair, torch.utils.data.Dataset) and not isinstance(pair, (tuple, list)):
        pair = _stacked(name, pair)
    if not isinstance(pair, (tuple, list)) or len(pair) != 2:
        raise TypeError(f"{name} must be an (inputs, labels) pair of tensors or a data set of such items, got "
                        f"{type(pair).__name__}")  # fmt: skip
    x, y = pair
    if not isinstance(x, Tensor) or not isinstance(y, Tensor):
        hint = " (NumPy arrays: torch.from_numpy each)" * any(type(t).__module__ == "numpy" for t in (x, y))
        raise TypeError(f"{name} must be an (inputs, labels) pair of tensors, got ({type(x).__name__}, "
                        f"{type(y).__name__}){hint}")  # fmt: skip
    if not x.is_floating_point() or x.dim() not in (3, 4):
        hint = " (8-bit images: x.float() / 255, images in [0, 1])" * (x.dtype == torch.uint8)
        raise ValueError(f"{name}: inputs must be float (N, C, H, W) images or (N, C, T) signals, got {x.dtype} "
                         f"of shape {tuple(x.shape)}{hint}")  # fmt: skip
    if len(x) == 0:
        raise ValueError(f"{name}: no inputs (shape {tuple(x.shape)})")
    if y.dtype not in INTEGER_DTYPES or y.dim() != 1 or len(y) != len(x):
        narrow = ", ".join(str(t).removeprefix("torch.") for t in INTEGER_DTYPES if t != torch.long)
        raise ValueError(f"{name}: labels must be int64 class indices (or {narrow}, read as int64, as fit does), "
                         f"one per input, got {y.dtype} of shape {tuple(y.shape)} for {len(x)} inputs")  # fmt: skip
    for what, t in (("inputs", x), ("labels", y)):
        if t.device.type != "cpu":
            raise ValueError(f"{name}: the comparison runs on the CPU; got {what} on {t.device}")
    labels = int64_labels(y)  # any integer labels (NumPy's int32, uint16...) as int64, as fit and the probes read them
    labels_in_range(labels, y.dtype, f"{name}: labels", "must be class indices >= 0")
    if not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name}: inputs contain NaN or infinite values")
    return x, labels


def _positive_int(name: str, value) -> int:
    if not is_int(value) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    return int(value)


def _methods(methods, image: bool, x: Tensor) -> list[str]:
    if isinstance(methods, str):
        raise ValueError(f"methods must be a list of names from {COMPARE_METHODS}, got the string {methods!r}")
    if not isinstance(methods, Iterable):
        raise TypeError(f"methods must be a list of names from {COMPARE_METHODS}, got {methods!r}")
    if isinstance(methods, (set, frozenset)):  # (its order changed with Python's string hashing, run to run)
        methods = sorted(methods, key=lambda m: (COMPARE_METHODS.index(m) if m in COMPARE_METHODS else len(
            COMPARE_METHODS), str(m)))  # fmt: skip
    methods = list(methods)
    unknown = [m for m in methods if m not in COMPARE_METHODS]
    if not methods or unknown or len(set(methods)) != len(methods):
        why = "fixed needs a grid search on a validation split (augnet reproduce versus); " * ("fixed" in unknown)
        raise ValueError(f"methods must be distinct names from {COMPARE_METHODS}; {why}got {methods}")
    methods = [str(m) for m in methods]  # a NumPy string as the records' plain str
    if not image and any(m in _IMAGE_ONLY for m in methods):
        raise ValueError(f"{[m for m in methods if m in _IMAGE_ONLY]} need images (N, C, H, W); inputs of shape "
                         f"{tuple(x.shape)} are taken as (N, C, T) signals, for which choose from ['none', 'augnet', "
                         "'instance'] (images of one channel without its axis: x.unsqueeze(1))")  # fmt: skip
    if any(m in ("crop", *HAND_DESIGNED) for m in methods) and x.dtype != torch.float32:
        raise ValueError(f"torchvision's policies give float32 images, and the inputs are {x.dtype}: pass x.float() "
                         "with a float32 trunk")  # fmt: skip
    if any(m in HAND_DESIGNED for m in methods) and x.shape[1] not in (1, 3):
        raise ValueError(f"{[m for m in methods if m in HAND_DESIGNED]}: torchvision's policies need images of 1 or 3 "
                         f"channels, got {x.shape[1]} (inputs of shape {tuple(x.shape)})")  # fmt: skip
    if any(m in ("crop", *HAND_DESIGNED) for m in methods):
        try:
            import torchvision.transforms.v2  # noqa: F401
        except ImportError as err:
            hint = "the hand-designed policies are torchvision's: pip install 'augnet[versus]'"
            raise ImportError(f"{err}: {hint}") from err
    return methods


def _trained(model: nn.Module) -> list[Tensor]:
    """What training writes: the parameters and the running statistics of normalisation layers (a constant buffer
    shared between models, a normalisation's mean, is harmless)."""
    norms = (nn.modules.batchnorm._NormBase,)
    return [*model.parameters(), *(b for m in model.modules() if isinstance(m, norms) for b in m.buffers())]


def _check_trunk(trunk, x: Tensor, classes: int, batch_size: int) -> None:
    """A dry run of a model ``trunk()`` makes: a new one each call, its dtype, its output's shape, something to
    train, batch norm on a batch of one (torch's random state and ``x`` as they were)."""
    with torch.random.fork_rng(devices=[]):
        try:
            model = trunk()
        except TypeError as err:  # e.g. a class whose constructor needs arguments (nn.Linear)
            raise TypeError(f"trunk() raised TypeError: {err} (trunk is called with no arguments and must make a "
                            "fresh model, e.g. lambda: MyNet(64, 10))") from err  # fmt: skip
        other = trunk()
        if not isinstance(model, nn.Module):
            raise TypeError(f"trunk() must return an nn.Module, got {type(model).__name__}")
        if model is other:
            raise ValueError("trunk() returned the same model twice: make a new one in each call (each run "
                             "starts from fresh weights), e.g. lambda: MyNet()")  # fmt: skip
        shared = {id(t) for t in _trained(model)} & {id(t) for t in _trained(other)}
        if shared:
            names = [n for n, t in (*model.named_parameters(), *model.named_buffers()) if id(t) in shared]
            listed = ", ".join(names[:3]) + ", ..." * (len(names) > 3)
            raise ValueError(f"trunk() returned models sharing {len(names)} parameters or buffers ({listed}): each "
                             "run would start from what the previous one trained, and yours would be changed; "
                             "build every submodule inside trunk() (or deepcopy a pretrained one there)")  # fmt: skip
        p = next((p for p in model.parameters() if p.is_floating_point()), None)
        if p is None or not any(q.requires_grad for q in model.parameters()):
            raise ValueError("trunk()'s model has no parameters to train")
        if p.dtype != x.dtype:
            raise ValueError(f"the inputs are {x.dtype} but trunk()'s parameters {p.dtype}: convert one to the "
                             "other (e.g. x.float())")  # fmt: skip
        try:
            with torch.no_grad():
                out = model.eval()(x[:2].clone())
        except Exception as err:
            raise ValueError(f"trunk()'s model fails on two training inputs of shape {tuple(x[:2].shape)}: "
                             f"{err}") from err  # fmt: skip
    if not isinstance(out, Tensor) or out.dim() != 2 or len(out) != len(x[:2]) or out.shape[1] < classes:
        shape = tuple(out.shape) if isinstance(out, Tensor) else type(out).__name__
        raise ValueError(f"trunk()'s model must map a batch to logits (N, classes >= {classes}, the labels' "
                         f"largest + 1), got {shape} for {len(x[:2])} inputs")  # fmt: skip
    if len(x) % batch_size == 1 and any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules()):
        raise ValueError(f"the last batch of every epoch would hold one input ({len(x)} inputs, batch_size "
                         f"{batch_size}), on which batch norm cannot train: choose another batch_size")  # fmt: skip
    if batch_size == 1 and any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules()):
        try:  # every batch holds one input: a batch norm over (N, C) cannot train on it, one over (N, C, H, W) can
            with torch.random.fork_rng(devices=[]), torch.no_grad():
                model.train()(x[:1].clone())
        except ValueError as err:
            raise ValueError(f"batch_size 1: every batch holds one input, on which trunk()'s batch norm cannot "
                             f"train ({err}): choose a batch_size of at least 2") from err  # fmt: skip


def _check_transforms(transforms, x: Tensor) -> None:
    """AugNet's candidates, in a layer, on two inputs (torch's random state as it was)."""
    from augnet.layers import AugmentationLayer

    try:
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            AugmentationLayer(transforms())(x[:2].clone())
    except Exception as err:
        raise ValueError(f"transforms() must make AugNet's candidates for these inputs (shape "
                         f"{tuple(x.shape[1:])}): {type(err).__name__}: {err}") from err  # fmt: skip


def _check_invariance(invariance, x: Tensor):
    if invariance is None:
        return None
    ok = isinstance(invariance, (tuple, list)) and len(invariance) == 2 and isinstance(invariance[0], Transform)
    if not ok or not is_real(invariance[1]):
        raise ValueError(f"invariance must be a (transform, magnitude) pair, e.g. (Rotate(), 0.25), got {invariance!r}")
    transform, magnitude = invariance[0], float(invariance[1])
    if not 0 < magnitude <= 1:
        raise ValueError(f"invariance's magnitude must lie in (0, 1] (the transform's range: Rotate's 1 is 180 "
                         f"degrees), got {invariance[1]!r}")  # fmt: skip
    try:
        with torch.random.fork_rng(devices=[]):
            transform(x[:2], magnitude)
    except Exception as err:
        raise ValueError(f"invariance: {type(transform).__name__} cannot transform these inputs: {err}") from err
    return transform, magnitude


def compare(
    trunk: Callable[[], nn.Module],
    train_data: tuple[Tensor, Tensor],
    test_data: tuple[Tensor, Tensor],
    methods: Sequence[str] = ("none", "randaugment", "trivialaugment", "augerino", "augnet"),
    *,
    transforms: Callable[[], list] | None = None,
    epochs: int = 10,
    batch_size: int = 32,
    lr: float = 1e-3,
    seeds: Sequence[int] = (0, 1, 2),
    invariance: tuple | None = None,
    progress: bool = True,
) -> Comparison:
    """Train each of ``methods`` on ``train_data`` for each seed and measure it on ``test_data``.

    Args:
        trunk: makes a fresh model mapping a batch to logits (N, classes), called once per run (after the
            run's seed is set, so every method of a seed starts from the same weights), and twice before the
            runs to check it (a new model each call, sharing no parameter or buffer with the last, its dtype the
            inputs', its output (N, classes) covering the labels, its batch norm on a batch of one where a batch
            holds one).
        train_data, test_data: ``(x, y)``: float images (N, C, H, W) in [0, 1] (C = 1 or 3 for torchvision's
            policies), or signals (N, C, T), float32, float64 or bfloat16 (Adam
            cannot train float16); integer class indices (N,) of any integer dtype (int64, int32,
            int16, int8, uint8, uint16, uint32, uint64: read as int64, as :func:`~augnet.training.fit` and the
            probes read them). CPU tensors.
            Or a data set of ``(input, label)`` items of one shape (a torchvision data set with a transform to
            tensors and one size), indexed and read whole into memory.
        methods: from :data:`COMPARE_METHODS`: ``none``, ``crop`` (a random crop of the image padded by 1/8 of
            its shorter side, at least one pixel),
            torchvision v2's ``randaugment``, ``trivialaugment``, ``autoaugment`` (CIFAR-10 policy) and
            ``augmix`` (per sample, in a DataLoader), ``augerino``, ``augnet`` (the README's first model: one
            :class:`~augnet.AugmentationLayer` of ``transforms()`` in :class:`~augnet.AugNet`, Adam over
            :func:`~augnet.param_groups`, lambda 0.5), ``instance`` (the same, per-instance). Signals take
            ``none``, ``augnet`` and ``instance``. Run and tabled in the order given (a set: in
            ``COMPARE_METHODS``' order).
        transforms: makes AugNet's candidate transforms (default: the five geometric image transforms,
            ``augnet.transforms.image.GEOMETRIC``); required for signals.
        epochs, batch_size: the same for every method (defaults 10 and 32).
        lr: the trunk's learning rate (Adam; default 1e-3), the same for every method (AugNet's and
            Augerino's augmentation parameters take :func:`~augnet.param_groups`' own rates).
        seeds: a list, one run per method and seed (``[0]`` for one); each seeds the initial weights, the
            batches and every draw.
        invariance: ``(transform, magnitude)``, the magnitude in (0, 1]: also measure each trained model's
            invariance at the logits to it (Inv_T, 1 = invariant, no lower bound; :func:`augnet.probes.report`
            for images, the median of :func:`augnet.probes.invariance_curve` for signals) on 256 test inputs
            drawn by the seed (all of them if fewer; at least 8), e.g. ``(Rotate(), 30 / 180)`` for rotations
            within ±30°.
        progress: print a line per run (True or False).

    Returns:
        A :class:`Comparison` (``print`` it for the table), at the end of the last run (nothing is kept of an
        interrupted call). The runs leave torch's global random state as they found it. Training runs on
        the CPU; torchvision's policies and ``crop`` read the images as 8-bit (``x * 255`` rounded). A data
        set's random transforms are drawn once, when it is read.
    """
    if isinstance(trunk, nn.Module) or not callable(trunk):  # a model would carry one run's training into the next
        raise TypeError(f"trunk must be a function making a fresh model (e.g. lambda: MyNet()), got "
                        f"{type(trunk).__name__}")  # fmt: skip
    x, y = _pair("train_data", train_data)
    x_test, y_test = _pair("test_data", test_data)
    if x.shape[1:] != x_test.shape[1:] or x.dtype != x_test.dtype:
        raise ValueError(f"train and test inputs differ: {x.dtype} {tuple(x.shape[1:])} and {x_test.dtype} "
                         f"{tuple(x_test.shape[1:])}")  # fmt: skip
    if x.dtype == torch.float16:  # Adam's eps, 1e-8, is 0 in float16: its first steps divide by zero (NaN weights)
        raise ValueError("inputs are torch.float16: Adam, compare's optimiser, cannot train float16 parameters (its "
                         "eps, 1e-8, rounds to 0 there); pass float32 (x.float() with a float32 trunk) or bfloat16")
    check_bool("progress", progress)
    image = x.dim() == 4
    methods = _methods(methods, image, x)
    if image and (float(x.min()) < 0 or float(x.max()) > 1 or float(x_test.min()) < 0 or float(x_test.max()) > 1):
        raise ValueError("images must lie in [0, 1] (the policies read them as uint8, the colour transforms "
                         "expect it): normalise inside the trunk")  # fmt: skip
    if transforms is None and not image:
        raise ValueError("signals need transforms=, a function making AugNet's candidates, e.g. lambda: "
                         f"[FrequencyShift(sfreq), FTSurrogate(), GaussianNoise()]; inputs of shape {tuple(x.shape)} "
                         "are taken as (N, C, T) signals (images of one channel without its axis: "
                         "x.unsqueeze(1))")  # fmt: skip
    if transforms is None:
        from augnet.transforms import image as T

        transforms = lambda: [cls() for cls in T.GEOMETRIC]  # noqa: E731
    elif not callable(transforms):
        raise TypeError(f"transforms must be a function making the candidate transforms, got {transforms!r}")
    epochs, batch_size = _positive_int("epochs", epochs), _positive_int("batch_size", batch_size)
    if not is_real(lr) or not 0 < lr < math.inf:
        raise ValueError(f"lr must be a positive number, got {lr!r}")
    if is_int(seeds) or not isinstance(seeds, Iterable) or isinstance(seeds, (str, bytes)):
        raise TypeError(f"seeds must be a list of ints (seeds=[0] for one run per method, range(3) for three), "
                        f"got {seeds!r}")  # fmt: skip
    seeds = list(seeds)
    if not seeds or len(set(seeds)) != len(seeds) or not all(is_int(s) and 0 <= s < 2**62 for s in seeds):
        raise ValueError(f"seeds must be distinct ints in [0, 2**62), got {seeds}")
    seeds = [int(s) for s in seeds]
    invariance = _check_invariance(invariance, x_test)
    if invariance is not None and len(x_test) < 8:
        raise ValueError(f"invariance= needs at least 8 test inputs (the probes' batch), got {len(x_test)}")
    if image and any(m in ("augnet", "instance", "augerino") for m in methods):
        from augnet.ops._cpp import load_first

        load_first()  # first, said in a line: its first load (or build) is no method's cost, nor a silent wait
    _check_trunk(trunk, x, int(max(y.max(), y_test.max())) + 1, batch_size)
    if any(m in ("augnet", "instance") for m in methods):
        _check_transforms(transforms, x)
    size = tuple(x.shape[-2:]) if image else 0
    data, setting = (x, y, x_test, y_test), (epochs, batch_size, lr, size, invariance)
    result = Comparison()
    for seed in seeds:
        for method in methods:
            with torch.random.fork_rng(devices=[]):
                result.records.append(_one(method, seed, trunk, transforms, data, setting))
            if progress:
                r = result.records[-1]
                print(f"{method:<15} seed {seed}: accuracy {r['accuracy']:.3f} ({r['train_seconds']:.1f} s)")
    return result


def _one(method, seed, trunk, transforms, data, setting) -> dict:
    (x, y, x_test, y_test), (epochs, batch_size, lr, size, invariance) = data, setting
    torch.manual_seed(seed)
    model = trunk()
    if not isinstance(model, nn.Module):
        raise TypeError(f"trunk() must return an nn.Module, got {type(model).__name__}")
    model, opt, kwargs, augment = build(method, model, transforms, lr, size, x.shape[1])
    generator = torch.Generator().manual_seed(seed + 1)
    wall, cpu = train(model, opt, kwargs, x, y, epochs, batch_size, generator)
    record = {"method": method, "seed": seed, **accuracies_on(model, augment, x_test, y_test, seed)}
    record["invariance"] = math.nan
    if invariance is not None:  # 256 inputs drawn by the seed: a test set in class order would give few classes
        pick = torch.randperm(len(x_test), generator=torch.Generator().manual_seed(seed + 7))[:256]
        record["invariance"] = invariance_at_logits(model, x_test[pick], invariance[0], float(invariance[1]), seed)
    return {**record, "train_seconds": wall, "train_cpu_seconds": cpu, "policy": _policy(model)}
