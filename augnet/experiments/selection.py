"""Does selection find the data's invariances on every task? (``augnet reproduce selection``)

The AugNet paper reports three controlled tasks where the right invariance is
known: rotations within ±45° of images (section 4.1; here the generated sprites
and thin-stroke glyphs, five geometric candidates), frequency shifts within
±0.5 Hz of noisy sinusoids (section 4.2; 1, 2 and 4 stacked layers of
FrequencyShift, FTSurrogate and GaussianNoise, all three invariances of the
data, of which a small trunk needs the frequency shift most), and the same
sinusoids under MLP trunks of nine capacities (section 4.3, Fig. 5). This
experiment trains every task under every setting of :data:`SETTINGS`, with
several seeds, and checks each setting against :data:`RULES`
(:mod:`augnet.experiments.selection_rules`), which were written before the runs.

:data:`SETTINGS`: the paper's method (its text), its official code's settings,
augnet's previous default (a weight decay on the magnitudes), magnitudes
calibrated once to the untrained trunk, and the parts of augnet's selection
alone and together (:mod:`augnet.effects`, ``train_mode="sample"``, the
without-replacement rule of :func:`augnet.selective_regularizer`); then
augnet's default selection with each experiment's own settings (its initial
magnitudes, copies, rates and lambda: :data:`DEFAULT_SETTING`); the last row is
the README's first model on every task (:func:`readme_model`,
:data:`README_SETTING`): what ``AugmentationLayer``, ``AugNet``,
``param_groups`` and ``selective_regularizer`` give with no arguments and
lambda 0.5, whatever the experiment's config says; only the data, the trunk,
its learning rate and the epochs are the task's. Every run also records its
first layer's weights after :data:`EARLY_EPOCHS` epochs, and the report counts
the runs that committed by then.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import math
import os
import time
import warnings
from concurrent.futures import as_completed
from dataclasses import dataclass, field
from pathlib import Path

import torch

from augnet._checks import check_bool, folder_problem, is_int, user_path
from augnet.experiments._registry import (
    Report,
    WorkerPool,
    _jsonable,
    _runs_file_problem,
    cut_torn_line,
    read_runs,
    register,
)
from augnet.experiments.demo import PAPER_SELECTION, PRESETS, SIZES, DemoConfig, run_demo
from augnet.experiments.runner import check_distinct, output_folder
from augnet.experiments.selection_rules import EARLY_EPOCHS, ORACLE, RULES, record_problem, selection_report

__all__ = [
    "DEFAULT_SETTING", "README_SETTING", "RULES", "SETTINGS", "TASKS", "SelectionConfig", "readme_model", "run_key",
    "run_one", "run_selection", "weights_at_epoch",
]  # fmt: skip

#: The tasks: the two rotation data sets, the sinusoids with 1, 2 and 4 layers, the capacity experiment.
TASKS = ("sprites", "glyphs", "sinusoids-1", "sinusoids-2", "sinusoids-4", "capacity")

_NO_DECAY = {"magnitude_weight_decay": None}

DEFAULT_SETTING = "augnet default (+ without replacement)"
README_SETTING = "README's first model"


def _translate_default() -> float:
    from augnet.transforms.image import TranslateX

    return inspect.signature(TranslateX).parameters["max_shift"].default


def readme_model() -> dict:
    """The settings of the README's first model, read off the library's own defaults.

    ``AugmentationLayer(transforms)`` (its initial magnitude and temperature), ``AugNet(trunk, layer)``
    (its copies and effect measurements), ``param_groups(model)`` (its rates and decays) and
    ``0.5 * selective_regularizer(model)``: the :data:`README_SETTING` row of :data:`SETTINGS` trains exactly
    this, on every task, with only the data, the trunk, its learning rate and the epochs of the task.
    """
    from augnet.experiments.versus_methods import LAM
    from augnet.layers import AugmentationLayer
    from augnet.model import AugNet
    from augnet.regularizers import param_groups, selective_regularizer

    layer = inspect.signature(AugmentationLayer).parameters
    regularizer = inspect.signature(selective_regularizer).parameters
    net = inspect.signature(AugNet).parameters
    groups = inspect.signature(param_groups).parameters
    picks = {
        "init_magnitude": layer, "temperature": layer, "train_mode": layer, "units": regularizer,
        "diverse": regularizer, "train_copies": net, "eval_copies": net,
        "effect_every": net, "stratify": net, "weight_decay": groups, "aug_weight_decay": groups, "aug_lr": groups,
        "magnitude_weight_decay": groups, "saturation": regularizer, "weight_lr": groups,
    }  # fmt: skip
    return {"lam": LAM, "regularizer": "selective", **{name: params[name].default for name, params in picks.items()}}


#: ``{name: {task kind or "*": config overrides}}``; task kinds are "image", "sinusoids" and "capacity".
SETTINGS: dict[str, dict[str, dict]] = {
    # The paper's text: temperature 1, the blend, magnitudes in the transforms' own units.
    "paper": {"*": {**PAPER_SELECTION, **_NO_DECAY}},
    # The official code: temperature 0.01; images: its optimiser (weight decay 1 on every parameter, lr 5e-4,
    # magnitudes from 1/8); sinusoids (its run_experiments.sh and train_augnet.py defaults): magnitudes from 0,
    # weight decay 1e-4 on every parameter, 1 training copy, 4 at inference; capacity: the same decay.
    "official": {
        "image": {k: v for k, v in PRESETS["official"].items() if k != "width"},
        "sinusoids": {
            **PAPER_SELECTION, **_NO_DECAY, "temperature": 0.01, "init_magnitude": 0.0, "aug_weight_decay": 1e-4,
            "train_copies": 1, "eval_copies": 4,
        },
        "capacity": {**PAPER_SELECTION, **_NO_DECAY, "temperature": 0.01, "aug_weight_decay": 1e-4},
    },
    # augnet before this experiment: the paper's selection with a weight decay of 1 on the magnitudes alone.
    "magnitude decay (previous default)": {"*": {**PAPER_SELECTION, "magnitude_weight_decay": 1.0}},
    # Magnitudes calibrated once, before training, to equal change of the untrained trunk's outputs.
    "calibrated to the trunk, once": {"*": {**PAPER_SELECTION, **_NO_DECAY, "calibrate": "trunk"}},
    # The parts of augnet's selection alone, then together.
    "effect units": {"*": {**_NO_DECAY, "train_mode": "mix", "diverse": False}},
    "sampled training": {"*": {**_NO_DECAY, "regularizer": "paper", "effect_every": 0}},
    "effect units + sampled training": {"*": {**_NO_DECAY, "diverse": False}},
    # augnet's selection with each experiment's own settings (initial magnitudes, copies, rates, lambda).
    DEFAULT_SETTING: {"*": {}},
    # The README's first model (readme_model()): the library's defaults, whatever each experiment's own config says;
    # on images also TranslateX / TranslateY's default range.
    README_SETTING: {"*": readme_model(), "image": {"max_translate": _translate_default()}},
}  # fmt: skip

#: What every setting but :data:`README_SETTING` was run with, before the comparison with hand-designed
#: policies changed the library's defaults (a linear pull, the weight logits at the magnitudes' rate, shifts
#: of up to half the size, independent evaluation copies): the kept table of those settings stays what they
#: train and measure.
HISTORICAL: dict[str, dict] = {
    "*": {"saturation": None, "weight_lr": None, "stratify": False},
    "image": {"max_translate": 0.5},
}


#: The fields :meth:`SelectionConfig.task_config` sets for each run from its task and seed, which ``base`` cannot.
_PER_RUN = frozenset({"seed", "data", "layers", "methods", "seeds"})


def task_kind(task: str) -> str:
    """``"image"``, ``"sinusoids"`` or ``"capacity"``."""
    if task in SIZES:
        return "image"
    return "capacity" if task == "capacity" else "sinusoids"


@dataclass
class SelectionConfig:
    """What :func:`run_selection` trains: every (task, setting, seed)."""

    tasks: tuple[str, ...] = TASKS
    settings: tuple[str, ...] = tuple(SETTINGS)
    seeds: int = 5
    seed: int = 0
    image_epochs: int = 10
    n_train: int = 4000  # images
    n_test: int = 1000  # images
    width: int = 8  # of the paper's CNN on images (the paper's is 32: 16 times the compute)
    quick: bool = False  # reduced runs (fewer epochs and examples) to check the set-up
    workers: int = 1  # processes; each run uses one torch thread
    device: str = "cpu"
    base: dict = field(default_factory=dict)  # overrides applied to every run's config

    def runs(self) -> list[tuple[str, str, int]]:
        """``(task, setting, seed)`` for every run; the capacity task also runs :data:`ORACLE`."""
        seeds = range(self.seed, self.seed + self.seeds)
        out = []
        for task in self.tasks:
            settings = list(self.settings) + ([ORACLE] if task == "capacity" else [])
            out += [(task, name, s) for name in settings for s in seeds]
        return out

    def validate(self) -> None:
        """Raise a ValueError (a TypeError for a value of the wrong type) naming the first field that cannot work,
        with every run's config checked (its ``validate``), before the first run trains."""
        for name in ("tasks", "settings"):  # a string was read letter by letter: each an unknown task
            value = getattr(self, name)
            if isinstance(value, str) or not isinstance(value, (tuple, list)):
                raise TypeError(f"SelectionConfig.{name} must be a tuple of names, got {type(value).__name__}: "
                                f"{value!r}")  # fmt: skip
        unknown = [t for t in self.tasks if t not in TASKS] + [s for s in self.settings if s not in SETTINGS]
        if unknown:
            raise ValueError(f"unknown tasks or settings {unknown}; see TASKS and SETTINGS")
        check_distinct("SelectionConfig", "tasks", self.tasks)
        check_distinct("SelectionConfig", "settings", self.settings)
        if not (is_int(self.seeds) and is_int(self.workers)) or self.seeds < 1 or self.workers < 1:
            raise ValueError(f"seeds and workers must be ints >= 1, got {self.seeds!r} and {self.workers!r}")
        if not is_int(self.seed):
            raise ValueError(f"seed must be an int, got {self.seed!r}")
        check_bool("SelectionConfig.quick", self.quick)  # "no" was a quick run
        if not isinstance(self.base, dict):
            raise TypeError(f"base must be a dict of config overrides, got {self.base!r}")
        fixed = sorted(set(self.base) & _PER_RUN)
        if fixed:  # base={"seed": 3} trained every seed of every task on seed 3, recorded as seeds 0 to 4
            raise ValueError(f"SelectionConfig.base must not set {fixed}: each run's task and seed set them (the "
                             "seeds: SelectionConfig.seed and seeds)")  # fmt: skip
        for task, setting, seed in self.runs():  # every run's config, checked before the first trains
            run_config = self.task_config(task, setting, seed)
            if hasattr(run_config, "validate"):
                run_config.validate()

    def overrides(self, task: str, setting: str) -> dict:
        if setting == ORACLE:
            return {}
        per_kind, kind = SETTINGS[setting], task_kind(task)
        history = {} if setting == README_SETTING else {**HISTORICAL["*"], **HISTORICAL.get(kind, {})}
        return {**history, **per_kind.get("*", {}), **per_kind.get(kind, {}), **self.base}

    def task_config(self, task: str, setting: str, seed: int):
        """The experiment config of one run (a DemoConfig, SinusoidsConfig or CapacityConfig)."""
        from augnet.experiments.capacity import CapacityConfig
        from augnet.experiments.sinusoids import SinusoidsConfig

        kind, over = task_kind(task), self.overrides(task, setting)
        common = dict(seed=seed, threads=1, device=self.device)
        if kind == "image":
            fields = dict(data=task, size=SIZES[task], epochs=self.image_epochs, n_train=self.n_train)
            fields.update(n_test=self.n_test, width=self.width, **common)
            if self.quick:
                fields.update(epochs=3, n_train=1000, n_test=300)
            return dataclasses.replace(DemoConfig(), **{**fields, **over})
        if kind == "sinusoids":
            fields = dict(layers=int(task.split("-")[1]), **common)
            if self.quick:
                fields.update(epochs=15, n_train=200, n_test=100)
            return dataclasses.replace(SinusoidsConfig(), **{**fields, **over})
        methods = ("oracle",) if setting == ORACLE else ("augnet",)
        fields = dict(methods=methods, probe_copies=(), seeds=1, **common)
        if self.quick:
            fields.update(epochs=10, widths=(4, 16), depths=(1,))
        return dataclasses.replace(CapacityConfig(), **{**fields, **over})


def run_one(task: str, setting: str, seed: int, config: SelectionConfig) -> dict:
    """Train one (task, setting, seed) and return its record (see :mod:`augnet.experiments.selection_rules`)."""
    run_config = config.task_config(task, setting, seed)
    start = time.perf_counter()
    record = {"task": task, "setting": setting, "seed": seed}
    kind = task_kind(task)
    if kind == "capacity":
        from augnet.experiments.capacity import run_capacity

        trunks = []
        for r in run_capacity(run_config):
            names = [e["transform"] for e in r["policy"][0]] if r.get("policy") else []
            trunks.append(
                {
                    "depth": r["depth"], "width": r["width"], "accuracy": r["accuracy"],
                    # NaN scores (two inputs a tiny trunk maps to one output: no baseline distance) left out, as
                    # capacity.json leaves them: the pooled summary leaves them out anyway, and the line stays JSON
                    "invariance": r["invariance"],
                    "scores": [round(v, 4) for v in r["scores"].tolist() if not math.isnan(v)],
                    "layers": r.get("policy", []),
                    "early": weights_at_epoch(r["history"], run_config, names, EARLY_EPOCHS) if names else None,
                }
            )  # fmt: skip
        record.update(trunks=trunks, accuracy=sum(t["accuracy"] for t in trunks) / len(trunks))
    else:
        if kind == "image":
            result = run_demo(run_config, progress=False)
        else:
            from augnet.experiments.sinusoids import run_sinusoids

            result = run_sinusoids(run_config)
        record.update(accuracy=result.test_accuracy, layers=result.policy.layers_json())
        record["early"] = weights_at_epoch(result.history, run_config, result.names, EARLY_EPOCHS)
    record["seconds"] = time.perf_counter() - start
    return record


def weights_at_epoch(history: dict, config, names: list[str], epochs: int) -> dict | None:
    """The first layer's weights at the last record of :func:`augnet.fit`'s ``history`` within ``epochs`` epochs.

    ``{"epoch": epochs, "step": step, "weights": {name: weight}}``, or ``None`` without a record then.
    """
    steps = epochs * -(-config.n_train // config.batch_size)  # fit's steps per epoch on tensors
    rows = [i for i, step in enumerate(history.get("step", ())) if step <= steps]
    if not rows or not history.get("weights"):
        return None
    weights = history["weights"][rows[-1]][0]
    return {"epoch": epochs, "step": history["step"][rows[-1]], "weights": dict(zip(names, weights, strict=True))}


def _run_one_packed(args) -> dict:
    return run_one(*args)


def run_key(config: SelectionConfig, task: str, setting: str, seed: int) -> str:
    """A run's key in ``runs.jsonl``: its task, setting and seed, and a digest of everything it trains with
    (:meth:`SelectionConfig.task_config`), so that a record is only reused for the same settings. The code
    is not in the key: records trained by an older augnet are reused too (give a new version another folder)."""
    run_config = config.task_config(task, setting, seed)
    if hasattr(run_config, "device"):  # "cpu" and "cpu:0" train alike
        device = torch.device(run_config.device)
        run_config = dataclasses.replace(run_config, device=device.type if device.index in (None, 0) else str(device))
    digest = hashlib.sha256(repr(run_config).encode()).hexdigest()[:16]
    return json.dumps([task, setting, seed, digest])


def run_selection(
    config: SelectionConfig | None = None, progress: bool = False, log=None, path: str | Path | None = None
) -> list[dict]:
    """Train every run of ``config`` (in ``config.workers`` processes); one record per run, in order.

    With ``path`` (a ``runs.jsonl`` file; a leading ``~`` the home folder), each record is appended there as its
    run finishes, and the runs already there (same task, setting, seed and settings: :func:`run_key`) are not
    trained again: an interrupted run goes on where it stopped. A record there that lacks what the report reads
    (:func:`~augnet.experiments.selection_rules.record_problem`: hand-edited, or of another augnet) is trained
    again, with a warning.

    Raises:
        TypeError: ``config`` that is not a :class:`SelectionConfig` (or None), ``progress`` not a bool, ``log``
            neither callable nor None, ``path`` not a path.
        ValueError: what :meth:`SelectionConfig.validate` refuses; a ``path`` that is a folder, cannot be
            appended to, or lies under a file; before the first run.
    """
    from tqdm.auto import tqdm

    if config is not None and not isinstance(config, SelectionConfig):
        raise TypeError(f"config must be a SelectionConfig or None, got {type(config).__name__}")
    check_bool("progress", progress)
    if log is not None and not callable(log):  # called after the first run had trained
        raise TypeError(f"log must be callable (or None), got {type(log).__name__}: {log!r}")
    config = config or SelectionConfig()
    config.validate()
    if path is not None:
        path = user_path(path, "path")
        problem = folder_problem(path.parent, "path's folder", "folder") or _runs_file_problem(path)
        if problem is not None:  # the folder was made, or the file read, as an OSError
            raise ValueError(problem)
    keyed = [(run, run_key(config, *run)) for run in config.runs()]
    done = read_runs(path) if path is not None else {}
    for key in [key for _, key in keyed if key in done and record_problem(done[key]) is not None]:
        warnings.warn(f"{path}: the record of {key} {record_problem(done.pop(key))}: trained again", stacklevel=2)
    todo = [(run, key) for run, key in keyed if key not in done]
    bar = tqdm(total=len(todo), disable=not progress, desc="selection", unit="run")
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        cut_torn_line(path)
    pool = WorkerPool(config.workers) if config.workers > 1 else None
    try:  # from the first submission: a Ctrl-C while submitting still cancels what was queued
        if pool is None:
            results = ((key, run_one(*run, config)) for run, key in todo)
        else:
            futures = {pool.submit(_run_one_packed, (*run, config)): key for run, key in todo}
            results = ((futures[f], f.result()) for f in as_completed(futures))
        for key, record in results:
            done[key] = {**record, "key": key}
            if path is not None:
                with path.open("a") as sink:
                    sink.write(json.dumps(done[key], default=_jsonable) + "\n")
            bar.update()
            if log is not None:
                log(f"{record['task']:<12} {record['setting']:<40} seed {record['seed']}: "
                    f"accuracy {record['accuracy']:.3f} ({record['seconds']:.0f} s)")  # fmt: skip
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
        bar.close()
    return [done[key] for _, key in keyed]


@register("selection")
def selection(out_dir: Path, quick: bool = False, seed: int = 0, progress: bool = True, device: str = "cpu") -> Report:
    """Selection over every task and setting, against rules written before the runs (see the module docstring)."""
    out_dir = output_folder(out_dir)  # a str was "unsupported operand type(s) for /"; '~' the home folder
    workers = max(1, min(os.cpu_count() or 1, 2))
    config = SelectionConfig(seed=seed, device=device, workers=workers)
    if quick:
        config.seeds, config.quick = 1, True
        config.settings = ("paper", DEFAULT_SETTING)
    start = time.perf_counter()
    records = run_selection(config, progress=progress, path=out_dir / "runs.jsonl")  # resumable
    return selection_report(config, records, out_dir, time.perf_counter() - start)
