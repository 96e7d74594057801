"""The one training recipe of augnet's demo and experiments.

:func:`run_experiment` seeds, makes the train and test data, builds the
model, trains it with :func:`augnet.training.fit` (Adam over
:func:`augnet.param_groups`) and measures its test accuracy;
:class:`ExperimentResult` is what it returns. A config is any dataclass with
the fields it reads: ``seed``, ``threads``, ``n_train``, ``n_test``, ``lr``,
``aug_lr``, ``weight_decay``, ``aug_weight_decay``, (optionally ``magnitude_weight_decay``), ``epochs``,
``batch_size``, ``lam``, ``regularizer``, and optionally ``device`` (the data,
the model and the generators go there; default the CPU).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor, nn

from augnet._checks import MAX_THREADS, folder_problem, is_int, is_real, user_path
from augnet.layers import Policy
from augnet.model import AugNet
from augnet.regularizers import SATURATION, WEIGHT_LR, param_groups, selective_regularizer
from augnet.training import accuracy, fit, resolve_device

__all__ = [
    "CALIBRATIONS", "ExperimentResult", "calibrate_layers", "check_counts", "check_rates", "check_threads",
    "regularizer_of", "run_experiment",
]  # fmt: skip

#: How a config may calibrate its layers before training (:meth:`augnet.AugmentationLayer.calibrate`):
#: not at all, to equal change of the inputs, or of the untrained trunk's outputs.
CALIBRATIONS = (None, "input", "trunk")


def check_counts(owner: str, least: int = 1, **values) -> None:
    """Refuse (ValueError) each of ``values`` that is not an int >= ``least`` (a bool or a float included), naming
    it as ``owner.name``: checked before a run starts, not where the value is first used, after training."""
    for name, value in values.items():
        if not is_int(value) or value < least:
            raise ValueError(f"{owner}.{name} must be an int >= {least}, got {value!r}")


def check_rates(owner: str, positive: bool = True, **values) -> None:
    """Refuse each of ``values`` that is not a finite number ``> 0`` (``positive``) or ``>= 0``, naming it."""
    for name, value in values.items():
        if not is_real(value):
            raise TypeError(f"{owner}.{name} must be a number, got {value!r}")
        if not math.isfinite(value) or value < 0 or (positive and value == 0):
            raise ValueError(f"{owner}.{name} must be finite and {'> 0' if positive else '>= 0'}, got {value!r}")


def check_distinct(owner: str, name: str, values) -> None:
    """The ValueError of a config's tuple ``name`` that repeats an item: each item is one run (or one row) of the
    experiment, and a repeated one trained twice under one record key (the table showed it twice, or once)."""
    seen: list = []
    for v in values:
        if v in seen:
            raise ValueError(f"{owner}.{name} must be distinct, got {v!r} twice in {tuple(values)!r}")
        seen.append(v)


def check_threads(owner: str, threads) -> None:
    """``threads``: None (torch's setting is left) or an int from 1 (``torch.set_num_threads`` refuses 0 late) to
    :data:`augnet._checks.MAX_THREADS` (a count it takes but cannot start ends the process)."""
    if threads is not None:
        check_counts(owner, threads=threads)
        if threads > MAX_THREADS:
            raise ValueError(f"{owner}.threads must be at most {MAX_THREADS}, got {threads!r}")


def regularizer_of(config):
    """The regulariser a config asks for: its ``regularizer`` name, with ``units``, ``diverse`` and
    ``saturation`` when selective.

    A config without ``units`` / ``diverse`` / ``saturation`` gets :func:`augnet.selective_regularizer`'s
    defaults for them.
    """
    name = config.regularizer
    units, diverse = getattr(config, "units", "effect"), getattr(config, "diverse", True)
    saturation = getattr(config, "saturation", SATURATION)
    if not isinstance(diverse, bool):  # 1 was read as True (1 == True), 0 refused at the first step
        raise TypeError(f"{type(config).__name__}.diverse must be a bool, got {type(diverse).__name__}: {diverse!r}")
    if name != "selective" or (units, diverse, saturation) == ("effect", True, SATURATION):
        return name
    return functools.partial(selective_regularizer, units=units, diverse=diverse, saturation=saturation)


@torch.no_grad()
def calibrate_layers(model: AugNet, x: Tensor, how: str | None, rows: int = 256) -> None:
    """Calibrate every layer of ``model`` on (up to ``rows`` of) ``x`` (see :data:`CALIBRATIONS`)."""
    if how not in CALIBRATIONS:
        raise ValueError(f"calibrate must be one of {CALIBRATIONS}, got {how!r}")
    if how is None:
        return
    trunk = model.trunk
    was_training = trunk.training
    trunk.eval()  # the untrained trunk, batch norm on its initial statistics
    try:
        for layer in model.augment.layers:
            layer.calibrate(x[:rows], features=trunk if how == "trunk" else None)
    finally:
        trunk.train(was_training)


@dataclass
class ExperimentResult:
    """What an experiment run produced."""

    config: object
    model: AugNet
    policy: Policy
    test_accuracy: float
    seconds: float
    history: dict[str, list] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        """The transforms of the first layer, in order."""
        return [e["transform"] for e in self.policy[0]]

    def winner(self, layer: int = 0) -> str:
        """Name of the transform with the largest weight in ``layer``."""
        return max(self.policy[layer], key=lambda e: e["weight"])["transform"]

    def to_json(self) -> dict:
        return {
            "config": dataclasses.asdict(self.config),
            "policy": self.policy.to_json(),
            "test_accuracy": self.test_accuracy,
            "seconds": self.seconds,
            "history": self.history,
        }


def run_experiment(
    config,
    data: Callable[[int, int], tuple[Tensor, Tensor]],
    build: Callable[[Tensor], nn.Module],
    desc: str,
    progress: bool = False,
    policy_size: tuple[int, ...] | None = None,
    callbacks: list | None = None,
) -> ExperimentResult:
    """Train and test one AugNet under ``config``.

    Args:
        config: the settings (see the module docstring for the fields read).
        data: ``data(n, seed) -> (x, y)``; the training set uses ``config.seed``,
            the test set ``config.seed + 10_000``.
        build: ``build(x_train)`` makes the model, after ``torch.manual_seed(config.seed)``
            and the data (so its initial weights depend on the seed only); the
            training inputs are there to calibrate on.
        desc: the progress bar's label.
        progress: show a progress bar.
        policy_size: the input size for the policy's natural units (pixels).
        callbacks: :class:`augnet.training.Callback` instances passed to :func:`fit`.

    The batches and augmentations draw from a generator seeded with
    ``config.seed + 1``, the test-time copies from one seeded with
    ``config.seed + 2``.

    torch's thread count and global random state come back after the run as they were before it (it set
    ``config.threads`` and seeded torch with ``config.seed``, and left both behind).

    Raises:
        ValueError: ``threads``, ``n_train`` or ``n_test`` that is not an int >= 1, before any work (no test
            image: measured after the whole run had trained).
    """
    owner = type(config).__name__
    check_threads(owner, config.threads)
    check_counts(owner, n_train=config.n_train, n_test=config.n_test)
    with kept_global_state(config.threads):  # torch's threads and global RNG come back as they were
        return _run_experiment(config, data, build, desc, progress, policy_size, callbacks)


def _run_experiment(config, data, build, desc, progress, policy_size, callbacks) -> ExperimentResult:
    device = resolve_device(getattr(config, "device", "cpu"))
    torch.manual_seed(config.seed)
    x_train, y_train = data(config.n_train, config.seed)
    x_test, y_test = data(config.n_test, config.seed + 10_000)
    model = build(x_train).to(device)
    x_train, y_train, x_test, y_test = (t.to(device) for t in (x_train, y_train, x_test, y_test))
    groups = param_groups(
        model,
        config.weight_decay,
        config.aug_weight_decay,
        config.aug_lr,
        getattr(config, "magnitude_weight_decay", None),
        weight_lr=getattr(config, "weight_lr", WEIGHT_LR),
    )
    opt = torch.optim.Adam(groups, lr=config.lr)
    start = time.perf_counter()
    history = fit(
        model,
        x_train,
        y_train,
        opt,
        epochs=config.epochs,
        batch_size=config.batch_size,
        lam=config.lam,
        regularizer=regularizer_of(config),
        generator=torch.Generator(device).manual_seed(config.seed + 1),
        progress=progress,
        desc=desc,
        callbacks=callbacks,
    )
    seconds = time.perf_counter() - start
    acc = accuracy(model, x_test, y_test, generator=torch.Generator(device).manual_seed(config.seed + 2))
    return ExperimentResult(config, model, model.policy(policy_size), acc, seconds, history)


def check_seed(owner: str, seed, top: int = 10_000) -> int:
    """``seed`` as a Python int (a NumPy integer too, which torch's generators refuse), if the experiment's
    generators take it: they are seeded with the seed plus offsets up to ``top``, within torch's seeds
    ``[-2**63, 2**64)``. Else the TypeError (not an int: a float, a bool, a string, ``None``) or the ValueError
    naming ``owner.seed``, before any data are made (they were "an integer is required" or "Overflow when
    unpacking long long" from inside the run)."""
    if not is_int(seed):
        raise TypeError(f"{owner}.seed must be an int, got {type(seed).__name__}: {seed!r}")
    seed, top = int(seed), int(top)  # (NumPy integers overflow past 2**63)
    if not -(2**63) <= seed <= 2**64 - 1 - top:
        raise ValueError(f"{owner}.seed must be an int in [-2**63, 2**64 - {top + 1}] (the run seeds generators with "
                         f"it plus up to {top}), got {seed!r}")  # fmt: skip
    return seed


def with_int_seed(config):
    """``config`` itself when its ``seed`` is a Python int, else a copy whose seed is (a NumPy integer's)."""
    return config if type(config.seed) is int else dataclasses.replace(config, seed=int(config.seed))


@contextmanager
def kept_global_state(threads: int | None = None) -> Iterator[None]:
    """Run with ``threads`` torch threads (None: leave them), then put back torch's thread count and its global
    random state (the CPU generator's; a CUDA one's too, when CUDA is in use), which a run sets or seeds: after
    ``run_demo(DemoConfig(threads=1))`` torch stayed on one thread, and every run left ``torch.manual_seed(seed)``
    behind. A run draws from its own seeds, so its results are the same."""
    old = torch.get_num_threads()
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
    with torch.random.fork_rng(devices=devices):
        try:
            if threads is not None:
                torch.set_num_threads(threads)
            yield
        finally:
            torch.set_num_threads(old)


def output_folder(out_dir) -> Path:
    """A registered experiment's ``out_dir`` (a str or a path; a leading ``~`` the home folder) as a Path, if files
    can be written there: else the ValueError saying why (a file, a file above it, a folder that is not writable),
    before the experiment trains (its files were written after the runs)."""
    folder = user_path(out_dir, "out_dir")
    problem = folder_problem(folder, "out_dir", "output folder")
    if problem is not None:
        raise ValueError(problem)
    return folder
