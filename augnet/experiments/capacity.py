"""Invariance against trunk capacity on the sinusoid task (AugNet paper, section 4.3, Fig. 5 and B.4).

Small MLP trunks of several widths and depths, on the raw 1000-sample signals
of :func:`augnet.data.sinusoids` (labels invariant to frequency shifts of up
to ±0.5 Hz), each trained three ways:

- ``baseline``: the MLP alone, on the raw data;
- ``oracle``: the MLP trained on batches shifted by the true invariance,
  ``FrequencyShift(100, max_shift=0.5)`` at magnitude 1 (every sample of every
  batch, a new shift per sample);
- ``augnet``: an :class:`~augnet.AugNet` with the MLP as trunk and one layer of
  the paper's three candidates (FrequencyShift up to ±2 Hz, FTSurrogate,
  GaussianNoise: :func:`~augnet.experiments.sinusoids.sinusoid_layer`),
  lambda 0.8, magnitudes initialised at 0.05, 10 copies at inference.

and optionally ``augnet_fs``: the same AugNet whose layer holds FrequencyShift
alone, which is what the paper's official run script trains for this figure
(``--l_types freq``).

Each model is scored on the test set by its accuracy and by the invariance
score of its output to the true frequency shift (:func:`frequency_shift_invariance`:
AugNet eq. 4, cosine distance, clean baseline; median and 25/75 percentiles).
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
import warnings
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from augnet._checks import check_bool, number
from augnet.data import sinusoids
from augnet.experiments._registry import Report, register
from augnet.experiments.runner import (
    CALIBRATIONS,
    calibrate_layers,
    check_counts,
    check_distinct,
    check_rates,
    check_seed,
    check_threads,
    kept_global_state,
    output_folder,
    regularizer_of,
    with_int_seed,
)
from augnet.experiments.sinusoids import SinusoidsConfig, sinusoid_layer
from augnet.experiments.trunks import MLP
from augnet.model import AugNet
from augnet.probes import invariance_curve, summary
from augnet.probes._common import DRAWS
from augnet.regularizers import get_regularizer, param_groups
from augnet.training import fit, resolve_device
from augnet.transforms import signal as S

__all__ = [
    "CAPACITY_METHODS",
    "CapacityConfig",
    "evaluate",
    "frequency_shift_invariance",
    "run_capacity",
    "summarize",
    "train_capacity_model",
]

#: The ways each trunk is trained; ``augnet_fs`` is the FrequencyShift-only AugNet.
CAPACITY_METHODS = ("baseline", "oracle", "augnet", "augnet_fs")

SFREQ = 100.0
TRUE_SHIFT = 0.5  # Hz: the data's invariance


@dataclass
class CapacityConfig:
    """Settings of the capacity experiment (the paper's section 4.3 where it gives them)."""

    widths: tuple[int, ...] = (4, 16, 64)
    depths: tuple[int, ...] = (1, 2, 3)
    methods: tuple[str, ...] = CAPACITY_METHODS
    epochs: int = 50
    n_train: int = 400
    n_test: int = 200
    batch_size: int = 32
    lr: float = 1e-2
    aug_lr: float | None = None  # None: the trunk's lr, as the kept results were trained (param_groups)
    weight_decay: float = 1e-4
    lam: float = 0.8
    regularizer: str = "selective"
    units: str = "effect"  # the selective regulariser's units ("magnitude": the paper's)
    diverse: bool = True  # stacked layers choose without replacement (False: the paper's)
    calibrate: str | None = None  # calibrate the layer before training: None, "input" or "trunk"
    temperature: float = 1.0
    aug_weight_decay: float = 0.0  # weight decay of the augmentation parameters
    train_mode: str = "sample"  # the layer's training mode ("mix": the paper's blend)
    effect_every: int = 10  # AugNet measures the transforms' effects every this many steps (0: never, the paper)
    magnitude_weight_decay: float | None = None  # a weight decay on the magnitudes alone (param_groups)
    # The selective regulariser's saturation and the weight logits' rate (param_groups): None, the linear pull
    # and one rate for the augmentation group, as the kept results were trained (the README row sets both).
    saturation: float | None = None
    weight_lr: float | None = None
    init_magnitude: float = 0.05
    train_copies: int = 1  # the official code's default (--ncopies-tr 1)
    eval_copies: int = 10
    stratify: bool = False  # independent evaluation copies, as the kept tables were measured (README row: True)
    probe_copies: tuple[int, ...] = (1, 4, 10)  # AugNet also scored with these C (Fig. B.4)
    accuracy_repeats: int = 5  # AugNet accuracy: mean over this many draws of its copies
    seed: int = 0
    seeds: int = 1  # runs with seeds seed, seed + 1, ...: new data, initialisation and draws
    draws: str = "independent"  # an AugNet's clean and shifted passes draw their copies independently (Fig. B.4)
    device: str = "cpu"
    threads: int | None = 1  # these models are tiny: a second thread only adds contention (see run_capacity)

    def validate(self) -> None:
        """Raise a ValueError (a TypeError for a value of the wrong type) naming the first field that cannot work,
        before any model trains (see :func:`run_capacity`)."""
        _check(self)


@torch.no_grad()
def frequency_shift_invariance(
    model: nn.Module,
    x: Tensor,
    copies: int | None = None,
    seed: int = 0,
    output: str = "logits",
    max_shift: float = TRUE_SHIFT,
    sfreq: float = SFREQ,
    draws: str = "independent",
) -> dict:
    """Invariance score of ``model``'s output to the true frequency shift, per test sample.

    ``FrequencyShift(sfreq, max_shift)`` at magnitude 1 (a shift drawn uniformly
    in ±0.5 Hz per sample), AugNet eq. 4: cosine distance, clean baseline (a
    derangement of the clean outputs).

    Args:
        model: a trained model; it is put in evaluation mode.
        x: the test signals.
        copies: an AugNet's number of copies (None: its ``eval_copies``).
        seed: seeds the shifts, the derangement and the AugNet's draws.
        output: ``"logits"`` (the activations before the softmax, as in the
            paper's footnote: a plain model's logits, an AugNet's mean over
            copies of its trunk's logits) or ``"log_probs"`` (a plain model's
            log-softmax, an AugNet's mean over copies of its trunk's log-softmax).
        draws: an AugNet's clean and shifted passes draw ``"independent"``
            augmentations (the default: two calls of the model in use, as the
            paper's Figs. 5 and B.4 measure, where invariance grows with C) or
            ``"shared"`` ones (see :func:`augnet.probes.invariance_curve`).

    Returns:
        ``{"scores": (B,) tensor, "summary": {"median", "p25", "p75", "interval75_low", ...}}``.
    """
    if output not in ("logits", "log_probs"):
        raise ValueError(f"output must be 'logits' or 'log_probs', got {output!r}")
    transform = S.FrequencyShift(sfreq, max_shift=max_shift)
    was_training = model.training
    model.eval()
    # Log-probabilities of a plain model: its logits through log_softmax; of an AugNet: its trunk's, averaged.
    probed = model
    if output == "log_probs" and isinstance(model, AugNet):
        log_probs = nn.Sequential(model.trunk, nn.LogSoftmax(1))
        probed = AugNet(log_probs, model.augment, model.train_copies, model.eval_copies, "mean",
                        stratify=model.stratify).eval()  # fmt: skip
    elif output == "log_probs":
        probed = nn.Sequential(model, nn.LogSoftmax(1))
    # A tiny MLP with dead units can give two inputs the same output: their score is NaN (counted
    # out of the summary's ``n``), which invariance_score warns about; the summary says how many.
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "invariance_score: .* baseline distance", RuntimeWarning)
            kwargs = {"copies": copies, "draws": draws} if isinstance(model, AugNet) else {}
            curve = invariance_curve(probed, x, transform, [1.0], seed=seed, **kwargs)
    finally:
        model.train(was_training)
    return {"scores": curve["scores"][0], "summary": curve["summary"][0]}


@torch.no_grad()
def evaluate(
    model: nn.Module,
    x: Tensor,
    y: Tensor,
    copies: int | None = None,
    seed: int = 0,
    repeats: int = 1,
    draws: str = "independent",
) -> dict:
    """Test accuracy (mean over ``repeats`` draws of an AugNet's copies) and invariance to the true shift.

    ``draws`` is passed to :func:`frequency_shift_invariance`.

    Returns:
        ``{"accuracy", "invariance": summary (logits), "invariance_log_probs": summary,
        "scores", "scores_log_probs": the per-sample scores}``.
    """
    was_training = model.training
    model.eval()
    accs = []
    for r in range(repeats if isinstance(model, AugNet) else 1):
        if isinstance(model, AugNet):
            out = model(x, copies=copies, generator=torch.Generator(x.device).manual_seed(seed + 100 + r))
        else:
            out = model(x)
        accs.append(float((out.argmax(1) == y).double().mean()))
    model.train(was_training)
    inv = frequency_shift_invariance(model, x, copies=copies, seed=seed, draws=draws)
    inv_lp = frequency_shift_invariance(model, x, copies=copies, seed=seed, output="log_probs", draws=draws)
    return {
        "accuracy": sum(accs) / len(accs),
        "invariance": inv["summary"],
        "invariance_log_probs": inv_lp["summary"],
        "scores": inv["scores"],
        "scores_log_probs": inv_lp["scores"],
    }


def train_capacity_model(
    method: str,
    width: int,
    depth: int,
    x: Tensor,
    y: Tensor,
    config: CapacityConfig | None = None,
    *,
    history: dict | None = None,
) -> nn.Module:
    """Train one MLP of ``width`` x ``depth`` by ``method`` (one of :data:`CAPACITY_METHODS`).

    The trunk's initial weights depend only on the seed, the width and the
    depth, so the methods start from the same MLP (it seeds torch's global generator with ``config.seed``;
    :func:`run_capacity` puts that back after its runs). It trains on ``x``'s device;
    a ``history`` dict receives :func:`augnet.fit`'s history (an AugNet's weights and magnitudes over training).
    """
    config = config or CapacityConfig()
    if method not in CAPACITY_METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {CAPACITY_METHODS}")
    torch.manual_seed(config.seed)
    trunk = MLP(width, depth, in_features=x.shape[1] * x.shape[2]).to(x.device)
    generator = torch.Generator(x.device).manual_seed(config.seed + 1)
    if method in ("baseline", "oracle"):
        # The plain trunk (cross-entropy on its logits); the oracle sees every batch shifted by the true invariance.
        shift = S.FrequencyShift(SFREQ, max_shift=TRUE_SHIFT)
        oracle = (lambda xb, g: shift(xb, 1.0, generator=g)) if method == "oracle" else None
        opt = torch.optim.Adam(trunk.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        fit(trunk, x, y, opt, config.epochs, config.batch_size, lam=0.0, regularizer="none", generator=generator,
            loss_fn=F.cross_entropy, augment_batch=oracle)  # fmt: skip
        return trunk.eval()
    transforms = ("FrequencyShift",) if method == "augnet_fs" else SinusoidsConfig.transforms
    layer_config = SinusoidsConfig(transforms=transforms, init_magnitude=config.init_magnitude)
    layer_config = dataclasses.replace(layer_config, train_mode=config.train_mode, temperature=config.temperature)
    layer = sinusoid_layer(layer_config, SFREQ)
    model = AugNet(trunk, layer, config.train_copies, config.eval_copies, effect_every=config.effect_every,
                   stratify=config.stratify).to(x.device)  # fmt: skip
    calibrate_layers(model, x, config.calibrate)
    groups = param_groups(
        model, config.weight_decay, config.aug_weight_decay, config.aug_lr,
        magnitude_weight_decay=config.magnitude_weight_decay, weight_lr=config.weight_lr,
    )  # fmt: skip
    opt = torch.optim.Adam(groups, lr=config.lr)
    trained = fit(model, x, y, opt, epochs=config.epochs, batch_size=config.batch_size, lam=config.lam,
                  generator=generator, regularizer=regularizer_of(config))  # fmt: skip
    if history is not None:
        history.update(trained)
    return model.eval()


def _params(width: int, depth: int, in_features: int = 1000, classes: int = 4) -> int:
    return in_features * width + width + (depth - 1) * (width * width + width) + width * classes + classes


def check_scoring(owner: str, name: str, copies, repeats, draws, n_test) -> None:
    """What :func:`evaluate` reads after training, refused (ValueError naming it) before any model trains;
    ``name``: the field of the copies to score with."""
    if isinstance(copies, str) or not isinstance(copies, (tuple, list)):
        raise ValueError(f"{owner}.{name} must be a tuple of ints >= 1, got {copies!r}")
    for c in copies:
        check_counts(owner, **{name: c})
    check_counts(owner, accuracy_repeats=repeats)
    check_counts(owner, 2, n_test=n_test)  # the invariance's baseline: a derangement of the test inputs
    if draws not in DRAWS:
        raise ValueError(f"{owner}.draws must be one of {DRAWS}, got {draws!r}")


def _check(config: CapacityConfig) -> None:
    if not isinstance(config, CapacityConfig):
        raise TypeError(f"config must be a CapacityConfig or None, got {type(config).__name__}")
    for name in ("widths", "depths", "methods"):  # an int or a string was "'int' object is not iterable" or letters
        value = getattr(config, name)
        if isinstance(value, str) or not isinstance(value, (tuple, list)):
            raise TypeError(f"CapacityConfig.{name} must be a tuple, got {type(value).__name__}: {value!r}")
        if not value:
            raise ValueError(f"CapacityConfig.{name} must not be empty (there would be nothing to train), "
                             f"got {value!r}")  # fmt: skip
        check_distinct("CapacityConfig", name, value)
    unknown = [m for m in config.methods if m not in CAPACITY_METHODS]
    if unknown:
        raise ValueError(f"unknown methods {unknown!r}; choose from {CAPACITY_METHODS}")
    for w in config.widths:
        check_counts("CapacityConfig", width=w)
    for d in config.depths:
        check_counts("CapacityConfig", depth=d)
    check_counts("CapacityConfig", seeds=config.seeds, n_train=config.n_train)
    check_scoring("CapacityConfig", "probe_copies", config.probe_copies, config.accuracy_repeats, config.draws,
                  config.n_test)  # fmt: skip
    # the seeds seed, seed + 1, ... and their test data (+ 10_000)
    check_seed("CapacityConfig", config.seed, config.seeds - 1 + max(10_000, 100 + config.accuracy_repeats))
    check_threads("CapacityConfig", config.threads)
    check_rates("CapacityConfig", False, lr=number("lr", config.lr))  # Adam said "'<=' not supported" for a string
    if any(m.startswith("augnet") for m in config.methods):  # its AugNet, made aside: refused before the baselines
        # What only the AugNet reads (the baselines train with lam 0, no regulariser, no calibration): refused
        # after every baseline and oracle model of the first seed had trained.
        if not callable(config.lam):  # (a schedule is fit's to ask)
            check_rates("CapacityConfig", False, lam=number("lam", config.lam))
        get_regularizer(config.regularizer)
        if config.calibrate not in CALIBRATIONS:
            raise ValueError(f"CapacityConfig.calibrate must be one of {CALIBRATIONS}, got {config.calibrate!r}")
        with torch.random.fork_rng(devices=[]):
            layer_config = SinusoidsConfig(init_magnitude=config.init_magnitude, train_mode=config.train_mode,
                                           temperature=config.temperature)  # fmt: skip
            model = AugNet(MLP(1, 1, in_features=4), sinusoid_layer(layer_config, SFREQ), config.train_copies,
                           config.eval_copies, effect_every=config.effect_every, stratify=config.stratify)  # fmt: skip
            param_groups(model, config.weight_decay, config.aug_weight_decay, config.aug_lr,
                         magnitude_weight_decay=config.magnitude_weight_decay, weight_lr=config.weight_lr)  # fmt: skip
            regularizer = regularizer_of(config)
            if not isinstance(regularizer, str):  # the selective one's units, diverse and saturation
                regularizer(model)


def run_capacity(config: CapacityConfig | None = None, progress: bool = False) -> list[dict]:
    """Train and score every (depth, width, method); one record per model.

    A record: ``seed``, ``depth``, ``width``, ``params``, ``method``, ``seconds`` and what :func:`evaluate`
    returns; an AugNet's also ``copies``, ``policy``, ``history`` (``step`` and ``weights``) and ``by_copies``
    (``{str(C): evaluate(...)}`` for each of ``probe_copies``). torch's thread count and global random state come
    back after the run as they were before it.

    Raises:
        TypeError: ``config`` that is not a :class:`CapacityConfig` (or None, the default one).
        ValueError, TypeError: a field that cannot work (an unknown method; no width, depth, method or seed; a
            seed, a rate, lambda, regulariser or calibration that cannot work; scoring copies, repeats, draws or
            test inputs :func:`evaluate` refuses), before any model trains.
    """
    config = CapacityConfig() if config is None else config
    _check(config)
    check_bool("progress", progress)
    config = with_int_seed(config)
    with kept_global_state(config.threads):
        return _run_capacity(config, progress)


@contextmanager
def _threads(n: int | None):
    """Run with ``n`` torch threads (None: leave them), restoring the previous count."""
    old = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def _run_capacity(config: CapacityConfig, progress: bool) -> list[dict]:
    from tqdm.auto import tqdm

    seeds = [config.seed + k for k in range(config.seeds)]
    grid = [(s, d, w, m) for s in seeds for d in config.depths for w in config.widths for m in config.methods]
    records, data = [], {}
    bar = tqdm(grid, disable=not progress, desc="capacity", unit="model")
    for seed, depth, width, method in bar:
        bar.set_postfix(seed=seed, model=f"{depth}x{width}", method=method)
        if seed not in data:
            device = resolve_device(config.device)
            train, test = sinusoids(config.n_train, seed=seed), sinusoids(config.n_test, seed=seed + 10_000)
            data = {seed: tuple(tuple(t.to(device) for t in pair) for pair in (train, test))}
        (x_train, y_train), (x_test, y_test) = data[seed]
        run_config = dataclasses.replace(config, seed=seed)
        start = time.perf_counter()
        history: dict = {}
        model = train_capacity_model(method, width, depth, x_train, y_train, run_config, history=history)
        seconds = time.perf_counter() - start
        record = {
            "seed": seed,
            "depth": depth,
            "width": width,
            "params": _params(width, depth, x_train.shape[-1]),
            "method": method,
            "seconds": seconds,
            **evaluate(model, x_test, y_test, seed=seed, repeats=config.accuracy_repeats, draws=config.draws),
        }
        if isinstance(model, AugNet):
            record["copies"] = model.eval_copies
            record["policy"] = model.policy().layers_json()
            record["history"] = {k: history[k] for k in ("step", "weights") if k in history}
            record["by_copies"] = {
                str(c): evaluate(
                    model, x_test, y_test, copies=c, seed=seed, repeats=config.accuracy_repeats, draws=config.draws
                )
                for c in config.probe_copies
            }
        records.append(record)
    bar.close()
    return records


def _order(method: str) -> int:
    """A method's place in :data:`CAPACITY_METHODS` (the summary's order; a set's order changes per process)."""
    return CAPACITY_METHODS.index(method) if method in CAPACITY_METHODS else len(CAPACITY_METHODS)


def _pool(evals: list[dict]) -> dict:
    """Accuracy (mean over seeds) and invariance pooled over the seeds' test samples."""
    return {
        "accuracy": sum(e["accuracy"] for e in evals) / len(evals),
        "accuracy_per_seed": [e["accuracy"] for e in evals],
        "invariance": summary(torch.cat([e["scores"] for e in evals])),
        "invariance_median_per_seed": [e["invariance"]["median"] for e in evals],
        "invariance_log_probs": summary(torch.cat([e["scores_log_probs"] for e in evals])),
    }


def summarize(records: list[dict]) -> list[dict]:
    """One row per (depth, width, method), pooling the seeds: mean accuracy, pooled invariance summary."""
    keys = sorted({(r["depth"], r["width"], r["method"]) for r in records}, key=lambda k: (k[0], k[1], _order(k[2])))
    rows = []
    for depth, width, method in keys:
        runs = [r for r in records if (r["depth"], r["width"], r["method"]) == (depth, width, method)]
        row = {"depth": depth, "width": width, "params": runs[0]["params"], "method": method, **_pool(runs)}
        if "policy" in runs[0]:
            row["selected"] = []
            for r in runs:
                top = max(r["policy"][0], key=lambda e: e["weight"])
                row["selected"].append(
                    {"transform": top["transform"], "weight": top["weight"], "magnitude": top["magnitude"]}
                )
            row["by_copies"] = {c: _pool([r["by_copies"][c] for r in runs]) for c in runs[0]["by_copies"]}
        rows.append(row)
    return rows


def _strip(record: dict) -> dict:
    """A JSON-ready copy of a record: the per-sample scores dropped (their summaries stay)."""
    out = {k: v for k, v in record.items() if not k.startswith("scores")}
    if "by_copies" in out:
        out["by_copies"] = {c: _strip(e) for c, e in out["by_copies"].items()}
    return out


LABELS = {
    "baseline": "baseline (no augmentation)",
    "oracle": "oracle augmentation (±0.5 Hz shifts)",
    "augnet": "AugNet (3 candidates)",
    "augnet_fs": "AugNet (FrequencyShift alone)",
}


def _plot(rows: list[dict], methods, path: Path, title: str) -> Path:
    """Median invariance (central 75 % interval as bars) and accuracy against the trunk, per method (Fig. 5)."""
    from augnet.viz import require_matplotlib, save_figure

    plt = require_matplotlib()
    sizes = sorted({(r["params"], r["depth"], r["width"]) for r in rows})
    labels = [f"{d}x{w}\n{p / 1000:.1f}k" for p, d, w in sizes]
    xs = list(range(len(sizes)))
    fig, axes = plt.subplots(2, 1, figsize=(7.5, 6), sharex=True)
    for i, method in enumerate(methods):
        by_size = {(r["depth"], r["width"]): r for r in rows if r["method"] == method}
        if not by_size:
            continue
        ev = [by_size.get((d, w)) for _, d, w in sizes]
        med = [e["invariance"]["median"] if e else math.nan for e in ev]
        lo = [m - e["invariance"]["interval75_low"] if e else 0.0 for m, e in zip(med, ev, strict=True)]
        hi = [e["invariance"]["interval75_high"] - m if e else 0.0 for m, e in zip(med, ev, strict=True)]
        off = [x + 0.08 * (i - (len(methods) - 1) / 2) for x in xs]
        label = LABELS.get(method, method)
        axes[0].errorbar(off, med, yerr=[lo, hi], marker="o", capsize=3, label=label)
        axes[1].plot(off, [e["accuracy"] if e else math.nan for e in ev], marker="o", label=label)
    axes[0].set_ylabel("invariance to ±0.5 Hz shifts\n(median, 75 % interval)")
    axes[0].axhline(1.0, color="k", lw=0.6, ls="--")
    axes[1].set_ylabel("test accuracy")
    axes[1].set_xticks(xs, labels)
    axes[1].set_xlabel("trunk: hidden layers x width (parameters)")
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[0].legend(frameon=False, fontsize=8)
    fig.suptitle(title)
    return save_figure(fig, path)


def _spread(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f}"


@register("capacity")
def capacity(out_dir: Path, quick: bool = False, seed: int = 0, progress: bool = True, device: str = "cpu") -> Report:
    """Invariance and accuracy against the MLP trunk's size, three (four) ways (paper Fig. 5, B.4)."""
    out_dir = output_folder(out_dir)  # a str too ('~' the home folder): the figures were written into it last
    config = CapacityConfig(seed=seed, seeds=3, device=device)
    if quick:
        config.widths, config.depths, config.epochs, config.seeds = (4, 64), (1, 3), 25, 1
        config.probe_copies = (1, 10)
    records = run_capacity(config, progress=progress)
    rows = summarize(records)
    numbers = {
        "config": dataclasses.asdict(config),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "summary": rows,
        "runs": [_strip(r) for r in records],
    }
    n_seeds = f"{config.seeds} seed{'s' if config.seeds > 1 else ''}"
    lines = [f"{len(config.depths) * len(config.widths)} MLP trunks x {len(config.methods)} methods, {n_seeds}:"]
    for method in config.methods:
        mine = [r for r in rows if r["method"] == method]
        inv = [r["invariance"]["median"] for r in mine]
        acc = [r["accuracy"] for r in mine]
        line = f"{LABELS[method]}: median invariance {_spread(inv)}, accuracy {_spread(acc)} across the trunks"
        if method.startswith("augnet"):
            picks = [p for r in mine for p in r["selected"]]
            counts = Counter(p["transform"] for p in picks)
            shifts = [p["magnitude"] for p in picks if p["transform"] == "FrequencyShift"]
            fs = SinusoidsConfig.max_shift
            chosen = ", ".join(f"{name} in {n}" for name, n in counts.most_common())
            line += f"; selected {chosen} of {len(picks)} runs"
            if shifts:  # the magnitude of the one transform whose range is in Hz
                line += f" (FrequencyShift at ±{min(shifts) * fs:.2f} to ±{max(shifts) * fs:.2f} Hz)"
        lines.append(line)
    counts = []
    for method in config.methods:
        mine = [r for r in rows if r["method"] == method]
        counts.append(f"{method} {sum(r['invariance']['median'] >= 0.9 for r in mine)}/{len(mine)}")
    lines.append("trunks with median invariance >= 0.9: " + ", ".join(counts))
    for method in [m for m in config.methods if m.startswith("augnet")]:
        mine = [r for r in rows if r["method"] == method]
        per_c = []
        for c in config.probe_copies:
            inv = sum(r["by_copies"][str(c)]["invariance"]["median"] for r in mine) / len(mine)
            acc = sum(r["by_copies"][str(c)]["accuracy"] for r in mine) / len(mine)
            per_c.append(f"C={c}: {inv:.2f} / {acc:.2f}")
        lines.append(f"{LABELS[method]}, mean over trunks of median invariance / accuracy: " + ", ".join(per_c))
    header = "trunk  " + "".join(f"{m:>19}" for m in config.methods)
    table = ["", "median invariance (pooled over seeds) / mean accuracy", header]
    for depth in config.depths:
        for width in config.widths:
            cells = []
            for m in config.methods:
                r = next(r for r in rows if (r["depth"], r["width"], r["method"]) == (depth, width, m))
                cells.append(f"{r['invariance']['median']:5.2f} / {r['accuracy']:.2f}")
            table.append(f"{depth}x{width:<5}" + "".join(f"{c:>19}" for c in cells))
    figures = []
    try:
        figures.append(_plot(rows, config.methods, out_dir / "capacity.png", "Invariance vs trunk capacity"))
        for m in [m for m in config.methods if m.startswith("augnet")]:
            per_c = [
                dict(r, method=f"C = {c}", **ev) for r in rows if r["method"] == m for c, ev in r["by_copies"].items()
            ]
            title = f"{LABELS[m]} at C copies (Fig. B.4 style)"
            figures.append(
                _plot(per_c, [f"C = {c}" for c in config.probe_copies], out_dir / f"capacity_{m}_copies.png", title)
            )
    except ImportError:
        pass
    return Report("capacity", "\n".join(lines + table), numbers, figures)
