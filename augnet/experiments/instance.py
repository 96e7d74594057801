"""Per-instance augmentation: ``augnet reproduce instance``.

Generated data where the invariance differs by instance: two sprite pairs
(:func:`augnet.data.make_sprite_pair` 0 and 1), six classes.

- Pair A (classes 0 to 3): the rotation task of the AugNet paper. Sprite 0 /
  1 upright (angle in ±45 degrees) is class 0 / 1, upside down (180 ± 45) is
  class 2 / 3: the labels are invariant to rotations of up to ±45 degrees.
- Pair B (classes 4 and 5): sprite 0 / 1 of pair B at any angle: the labels are
  invariant to every rotation.

Three models with the same trunk (the paper's CNN), trained alike: the trunk
alone, AugNet with a global rotation layer (one range for every input), and
AugNet with a per-instance rotation layer
(:class:`~augnet.ConditionedAugmentationLayer` with the pointwise conditioner,
``kernel_size=1``: one range for every pose of a sprite, where the default one
learns a range per pose).
Each run reports the learned rotation range per class (for the global layer the
same for all), the test accuracy and the rotation invariance per class
(:func:`augnet.probes.invariance_curve`, cosine on the logits, at ±45 and
±180 degrees). The targets: about ±45 degrees for pair A (between
:data:`A_RANGE`) and at least :data:`B_MIN` for pair B.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
from torch import Tensor, nn

from augnet import probes
from augnet._checks import check_bool, is_int
from augnet._json import dumps as strict_json
from augnet.data import make_sprite_pair, render_sprites
from augnet.experiments._registry import Report, register
from augnet.experiments.runner import check_counts, check_rates, check_threads, kept_global_state, output_folder
from augnet.experiments.trunks import PaperCNN
from augnet.instance import ConditionedAugmentationLayer
from augnet.instance_policy import plot_policy_summary, policy_summary
from augnet.layers import AugmentationLayer
from augnet.model import AugNet
from augnet.regularizers import param_groups, selective_regularizer
from augnet.training import accuracy, fit
from augnet.transforms import image as T

__all__ = ["A_RANGE", "B_MIN", "InstanceConfig", "instance_sprites", "run_instance", "run_seed"]

#: Pair A's target range (degrees, the upper end of ±r): about ±45.
A_RANGE = (30.0, 65.0)
#: Pair B's target: at least ±150 degrees.
B_MIN = 150.0
CLASS_NAMES = {0: "A0 up", 1: "A1 up", 2: "A0 down", 3: "A1 down", 4: "B0 any", 5: "B1 any"}
MODELS = ("trunk", "global", "instance")
# The seeds a run takes: its generators are seeded with the seed plus offsets, within torch's 64-bit seeds.
_SEEDS = (-(2**62), 2**62)


def _check_seed(name: str, seed) -> None:
    if not is_int(seed) or not _SEEDS[0] <= seed <= _SEEDS[1]:
        raise ValueError(f"{name} must be an int in [-2**62, 2**62], got {seed!r}")


def instance_sprites(n: int, size: int = 32, seed: int = 0, return_angle: bool = False) -> tuple[Tensor, ...]:
    """``n`` images (n, 3, size, size) of the two sprite pairs and their labels (n,) in 0..5 (see the module).

    With ``return_angle``, also each image's rotation (n,) in radians (pair A's "down" classes about pi).

    Raises:
        ValueError: ``n`` that is not an int >= 0, ``size`` that is not an int >= 1, ``seed`` outside torch's
            seeds (``[-2**63, 2**64)``).
        TypeError: ``seed`` that is not an int (a NumPy integer is one), ``return_angle`` that is not a bool.
    """
    if not is_int(n) or n < 0:
        raise ValueError(f"n must be an int >= 0, got {n!r}")
    if not is_int(size) or size < 1:
        raise ValueError(f"size must be an int >= 1, got {size!r}")
    if not is_int(seed):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}: {seed!r}")
    if not -(2**63) <= seed < 2**64:
        raise ValueError(f"seed must be an int in [-2**63, 2**64), got {seed!r}")
    check_bool("return_angle", return_angle)
    n, size = int(n), int(size)
    g = torch.Generator().manual_seed(int(seed))  # a NumPy integer too, which manual_seed refuses
    y = torch.randint(0, 6, (n,), generator=g)
    u = torch.rand(n, generator=g) * 2 - 1
    down = (y >= 2) & (y < 4)
    angle = torch.where(y >= 4, u * math.pi, u * math.pi / 4 + down * math.pi)
    x = torch.empty(n, 3, size, size)
    for pair, rows in ((0, y < 4), (1, y >= 4)):
        cells, palettes = make_sprite_pair(pair)
        if rows.any():
            x[rows] = render_sprites(y[rows] % 2, angle[rows], cells, palettes, size)
    return (x, y, angle) if return_angle else (x, y)


@dataclass
class InstanceConfig:
    """Settings of the experiment (the demo's optimiser: Adam, 5e-4 for the trunk, 5e-3 for the augmentation)."""

    n_train: int = 3000
    n_test: int = 900
    size: int = 32
    width: int = 8
    epochs: int = 20  # 12 epochs met the targets in 3 of 5 seeds (pair A not yet settled), 20 in 4 of 5
    batch_size: int = 128
    lr: float = 5e-4
    aug_lr: float = 5e-3
    conditioner_lr: float | None = None  # None: aug_lr (an oracle conditioner needs about that; 2e-3 was too slow)
    # 0: 5-seed runs with 1e-2 (2 of 5 seeds met the targets; 3 seeds' conditioners collapsed to the global
    # range) and 1e-3 (2 of 5; pair A's spread was not reduced) did no better than 0 (3 of 5)
    conditioner_weight_decay: float = 0.0
    hidden: int = 8
    # The conditioner's convolutions. 3 (the library's default conditioner) sees each input's pose and learns a range
    # per pose, 90 - |a| for pair A, whose class mean is about ±67.5, past the target: the per-instance model alone on
    # seeds 0-4 (one thread) met the targets on 0 of 5 (pair A ±56..75). 1 (pointwise) gives every pose of a sprite
    # one range: 5 of 5 (pair A ±38..60, pair B ±180; benchmarks/instance_ranges_by_angle.py --kernel-size 1).
    kernel_size: int = 1
    # lambda (the README's 0.5). With the 3x3 conditioner, tuned on seeds 0-4 with the instance model alone (the
    # seeds within the targets; pair A's class ranges): 0.5: 0 of 5 (±56..75); 0.3: 2 of 5 (±47..76); 0.15: 3 of 5
    # (±14..66); 0.1: 4 of 5 (±29..61, pair B ±154..180). Held out, 0.1 met them on 0 of seeds 5-9 (pair A ±21..66 on
    # average, pair B ±138..180): the class ranges move with the seed more than with lambda, so the README's value
    # stays.
    lam: float = 0.5
    # The selective regulariser's saturation and the weight logits' rate: None, a linear pull and the weights at
    # aug_lr, as the kept results were trained. Tried on seeds 0-4 (3x3 conditioner) with the library's later
    # defaults: saturation 1 met the targets on 3 of 5 (pair A ±45-72 degrees), saturation 0.5 with the weights at
    # 3 x aug_lr on 1 of 3.
    saturation: float | None = None
    weight_lr: float | None = None
    init_magnitude: float = 0.125
    eval_copies: int = 4
    stratify: bool = False  # independent evaluation copies, as the kept results were measured
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    threads: int | None = None


def quick_config() -> InstanceConfig:
    """The quick version (CI): fewer images and epochs, two seeds."""
    return InstanceConfig(n_train=1500, n_test=450, size=24, epochs=8, seeds=(0, 1))


def _trunk(config: InstanceConfig) -> nn.Module:
    return PaperCNN(3, 6, config.width)


def _train(model, config, x, y, seed, name, regularizer):
    torch.manual_seed(seed)
    if regularizer == "none":
        opt = torch.optim.Adam(model.parameters(), lr=config.lr)
    else:
        groups = param_groups(model, aug_lr=config.aug_lr, conditioner_lr=config.conditioner_lr,
                              conditioner_weight_decay=config.conditioner_weight_decay, weight_lr=config.weight_lr)
        opt = torch.optim.Adam(groups, lr=config.lr)
    if regularizer == "selective":
        regularizer = functools.partial(selective_regularizer, saturation=config.saturation)
    fit(model, x, y, opt, config.epochs, config.batch_size, lam=config.lam if regularizer != "none" else 0.0,
        regularizer=regularizer, generator=torch.Generator().manual_seed(seed + 1), desc=name)  # fmt: skip


def _invariance_per_class(model, x, y, copies) -> dict:
    """Per class, the median invariance score of the logits to rotations of ±45 and ±180 degrees.

    Scored on the whole test set (the baseline distance is that of a derangement of every class), then
    split by class. A score is NaN where its sample's baseline distance is 0 (the probe warns); the median is
    that of the class's other scores, as the probes' own summaries drop NaN.
    """
    curve = probes.invariance_curve(model, x, T.Rotate(), [0.25, 1.0], copies=copies, seed=0)
    scores = curve["scores"]  # (2, n)
    out = {}
    for label in sorted(set(y.tolist())):
        rows = y == label
        out[str(label)] = {"45": float(scores[0][rows].nanmedian()), "180": float(scores[1][rows].nanmedian())}
    return out


def check_config(config: InstanceConfig) -> None:
    """Refuse (ValueError / TypeError naming it) what the global and the per-instance models would refuse only
    after the trunk alone had trained: their layers, rates and lambda are built and checked here, aside."""
    check_counts("InstanceConfig", 2, n_test=config.n_test)  # the invariance's baseline: a derangement
    check_counts("InstanceConfig", n_train=config.n_train)
    check_counts("InstanceConfig", 8, size=config.size)  # the paper's CNN pools 8 x 8 to 1 x 1
    check_threads("InstanceConfig", config.threads)
    check_rates("InstanceConfig", lr=config.lr)  # Adam said "Invalid learning rate", naming no field
    check_rates("InstanceConfig", False, lam=config.lam)
    if config.saturation is not None:
        check_rates("InstanceConfig", saturation=config.saturation)
    with torch.random.fork_rng(devices=[]):  # the models of the runs are made from their own seeds
        layers = [AugmentationLayer([T.Rotate()], init_magnitude=config.init_magnitude),
                  ConditionedAugmentationLayer([T.Rotate()], channels=3, hidden=config.hidden,
                                               init_magnitude=config.init_magnitude, kernel_size=config.kernel_size)]
        for layer in layers:
            model = AugNet(_trunk(config), layer, eval_copies=config.eval_copies, stratify=config.stratify)
            param_groups(model, aug_lr=config.aug_lr, conditioner_lr=config.conditioner_lr,
                         conditioner_weight_decay=config.conditioner_weight_decay, weight_lr=config.weight_lr)
            torch.optim.Adam(model.parameters(), lr=config.lr)


def run_seed(config: InstanceConfig, seed: int) -> dict:
    """Train the three models on one seed; their accuracies, per-class ranges and per-class invariance.

    A class with no test image has a NaN range (the per-instance layer's is measured on the test images).
    torch's thread count and global random state come back after the run as they were before it.

    Raises:
        ValueError, TypeError: what :func:`check_config` refuses; a ``seed`` that is not an int in
            ``[-2**62, 2**62]`` (a NumPy integer is one).
    """
    _check_seed("seed", seed)
    seed = int(seed)  # a NumPy integer too: torch.Generator().manual_seed refuses one
    if not isinstance(config, InstanceConfig):
        raise TypeError(f"config must be an InstanceConfig, got {type(config).__name__}")
    check_config(config)
    with kept_global_state(config.threads):  # torch's threads and global random state put back after
        return _run_seed(config, seed)


def _run_seed(config: InstanceConfig, seed: int) -> dict:
    x, y = instance_sprites(config.n_train, config.size, seed)
    x_test, y_test = instance_sprites(config.n_test, config.size, seed + 10_000)
    result: dict = {"seed": seed}

    torch.manual_seed(seed)
    trunk = nn.Sequential(_trunk(config), nn.LogSoftmax(1))
    start = time.perf_counter()
    _train(trunk, config, x, y, seed, "trunk", "none")
    trunk.eval()
    result["trunk"] = {
        "accuracy": accuracy(trunk, x_test, y_test),
        "invariance": _invariance_per_class(trunk[0], x_test, y_test, None),
        "seconds": time.perf_counter() - start,
    }

    for name in ("global", "instance"):
        torch.manual_seed(seed)
        if name == "global":
            layer = AugmentationLayer([T.Rotate()], init_magnitude=config.init_magnitude)
        else:
            layer = ConditionedAugmentationLayer([T.Rotate()], channels=3, hidden=config.hidden,
                                                 init_magnitude=config.init_magnitude,
                                                 kernel_size=config.kernel_size)  # fmt: skip
        model = AugNet(_trunk(config), layer, eval_copies=config.eval_copies, stratify=config.stratify)
        start = time.perf_counter()
        _train(model, config, x, y, seed, name, "selective")
        model.eval()
        entry = {
            "accuracy": accuracy(model, x_test, y_test, generator=torch.Generator().manual_seed(seed + 2)),
            "invariance": _invariance_per_class(model, x_test, y_test, config.eval_copies),
        }
        if name == "global":
            deg = math.degrees(float(layer.magnitudes.detach()[0]) * layer.transforms[0].max_angle)
            entry["range"] = {str(k): {"mean": deg, "quantiles": [deg] * 3} for k in CLASS_NAMES}
        else:
            summary = policy_summary(model, (x_test, y_test))
            # Every class, as the global layer's (NaN for a class with no test image): a missing one failed the
            # verdict with a KeyError once every seed had trained.
            entry["range"] = {str(k): _class_range(summary, k) for k in CLASS_NAMES}
            entry["summary"] = summary
        entry["seconds"] = time.perf_counter() - start
        result[name] = entry
    return result


def _class_range(summary, label: int) -> dict:
    """Class ``label``'s mean range and its quantiles in a policy summary (NaN where the class had no input)."""
    c = summary.classes.get(label)
    if c is None:
        return {"mean": math.nan, "quantiles": [math.nan] * len(summary.quantiles)}
    return {"mean": c["range_mean"][0], "quantiles": [q[0] for q in c["range_quantiles"]]}


def within_targets(ranges: dict) -> bool:
    """Whether per-class mean ranges meet the targets: pair A in :data:`A_RANGE`, pair B at least :data:`B_MIN`
    (both ends included; a NaN range, a class with no test image, does not meet them)."""
    a = all(A_RANGE[0] <= ranges[str(k)]["mean"] <= A_RANGE[1] for k in range(4))
    b = all(ranges[str(k)]["mean"] >= B_MIN for k in (4, 5))
    return a and b


def run_instance(config: InstanceConfig | None = None, progress: bool = False) -> list[dict]:
    """Every seed of ``config``.

    Raises:
        TypeError: ``config`` that is not an :class:`InstanceConfig` (or None, the default one).
        ValueError: ``config.seeds`` that is not a non-empty tuple of ints in ``[-2**62, 2**62]``; what
            :func:`check_config` refuses; before any model trains.
    """
    if config is not None and not isinstance(config, InstanceConfig):
        raise TypeError(f"config must be an InstanceConfig or None, got {type(config).__name__}")
    check_bool("progress", progress)
    config = config or InstanceConfig()
    seeds = config.seeds
    if (isinstance(seeds, str) or not isinstance(seeds, (tuple, list)) or not seeds
            or not all(is_int(s) and _SEEDS[0] <= s <= _SEEDS[1] for s in seeds)):  # fmt: skip
        raise ValueError(f"InstanceConfig.seeds must be a non-empty tuple of ints, got {seeds!r}")
    results = []
    for seed in config.seeds:
        results.append(run_seed(config, seed))
        if progress:
            r = results[-1]
            print(f"seed {seed}: acc trunk {r['trunk']['accuracy']:.3f} global {r['global']['accuracy']:.3f} "
                  f"instance {r['instance']['accuracy']:.3f}; global ±{r['global']['range']['0']['mean']:.0f}; "
                  "instance " + " ".join(f"{v['mean']:.0f}" for v in r["instance"]["range"].values()),
                  flush=True)  # fmt: skip
    return results


def _numbers(config: InstanceConfig, results: list[dict]) -> dict:
    runs = []
    for r in results:
        runs.append({
            "seed": r["seed"],
            **{m: {k: v for k, v in r[m].items() if k != "summary"} for m in MODELS},
            "instance_within_targets": within_targets(r["instance"]["range"]),
            "global_within_targets": within_targets(r["global"]["range"]),
            "instance_accuracy_at_least_global": r["instance"]["accuracy"] >= r["global"]["accuracy"],
        })  # fmt: skip
    wins = sum(r["instance_within_targets"] and not r["global_within_targets"] for r in runs)
    acc_ok = sum(r["instance_accuracy_at_least_global"] for r in runs)
    both = sum(
        r["instance_within_targets"] and not r["global_within_targets"] and r["instance_accuracy_at_least_global"]
        for r in runs
    )
    need = math.ceil(0.8 * len(runs))
    return {
        "config": asdict(config),
        "targets": {"A_range_deg": list(A_RANGE), "B_min_deg": B_MIN},
        "class_names": CLASS_NAMES,
        "runs": runs,
        "seeds_instance_within_targets_global_not": wins,
        "seeds_instance_accuracy_at_least_global": acc_ok,
        "seeds_meeting_both": both,
        "done": both >= need,
        "needed": need,
    }


def _verdict(numbers: dict, quick: bool = False) -> str:
    """The verdict's lines: each seed's accuracies and ranges, then whether the targets are met; for the quick
    run, which is too short to learn them (see docs/guide/instance.md), what it checks instead: each range of pair
    B above every range of pair A under the per-instance layer, and no verdict on the targets."""
    runs = numbers["runs"]
    lines = [f"per-instance augmentation, {len(runs)} seeds (targets: pair A in ±{A_RANGE[0]:g}..{A_RANGE[1]:g} deg, "
             f"pair B >= ±{B_MIN:g} deg)"]  # fmt: skip
    for r in runs:
        a, b = _pair_means(r)
        lines.append(
            f"seed {r['seed']}: accuracy trunk {r['trunk']['accuracy']:.3f}, global {r['global']['accuracy']:.3f}, "
            f"per-instance {r['instance']['accuracy']:.3f}; global ±{r['global']['range']['0']['mean']:.0f} deg; "
            f"per-instance A ±{a:.0f}, B ±{b:.0f} deg; within targets: {r['instance_within_targets']}"
        )
    if quick:
        wider = sum(_b_above_a(r) for r in runs)
        lines.append(f"quick run: the set-up works (no verdict on the targets in {numbers['config']['epochs']} "
                     f"epochs); per-instance ranges of pair B above each of pair A's on {wider} of {len(runs)} "
                     "seeds")  # fmt: skip
        return "\n".join(lines)
    lines.append(
        f"{numbers['seeds_meeting_both']} of {len(runs)} seeds: per-instance within the targets, global not, and "
        f"per-instance accuracy >= global's (needed {numbers['needed']}): "
        + ("DONE" if numbers["done"] else "NOT MET")
    )
    return "\n".join(lines)


def _b_above_a(run: dict) -> bool:
    """Whether the per-instance layer's range of each class of pair B (4, 5) is above that of every class of A."""
    inst = run["instance"]["range"]
    return min(inst[str(k)]["mean"] for k in (4, 5)) > max(inst[str(k)]["mean"] for k in range(4))


def _pair_means(run: dict) -> tuple[float, float]:
    """The per-instance layer's mean range over pair A's classes (0-3) and pair B's (4, 5), in degrees."""
    inst = run["instance"]["range"]
    return sum(inst[str(k)]["mean"] for k in range(4)) / 4, sum(inst[str(k)]["mean"] for k in (4, 5)) / 2


def _figures(results: list[dict], out_dir: Path) -> list[Path]:
    """The policy of the first seed and every seed's ranges, as PNGs; none without matplotlib (the ``viz`` extra):
    the runs' numbers are kept, as the other experiments keep theirs."""
    from augnet.viz import require_matplotlib, save_figure

    try:
        plt = require_matplotlib()
    except ImportError:
        return []
    figures = [plot_policy_summary(results[0]["instance"]["summary"], out_dir / "instance_policy.png", CLASS_NAMES)]
    fig, ax = plt.subplots(figsize=(7, 3.6))
    labels = list(CLASS_NAMES)
    for i, r in enumerate(results):
        inst = [r["instance"]["range"][str(k)]["mean"] for k in labels]
        glob = [r["global"]["range"][str(k)]["mean"] for k in labels]
        ax.plot(labels, inst, "o-", color="C0", alpha=0.7, label="per-instance" if i == 0 else None)
        ax.plot(labels, glob, "s--", color="C1", alpha=0.7, label="global" if i == 0 else None)
    ax.axhspan(*A_RANGE, xmin=0, xmax=0.6, color="C2", alpha=0.15, label="target, pair A")
    ax.axhspan(B_MIN, 180, xmin=0.6, xmax=1, color="C3", alpha=0.15, label="target, pair B")
    ax.set_xticks(labels, [CLASS_NAMES[k] for k in labels])
    ax.set_ylabel("learned rotation range ± (deg)")
    ax.set_title("learned rotation range per class, every seed")
    ax.legend(fontsize=7)
    figures.append(save_figure(fig, out_dir / "instance_ranges.png"))
    return figures


@register("instance", cpu_only=True)
def instance(out_dir: Path, quick: bool = False, seed: int = 0, progress: bool = True, device: str = "cpu") -> Report:
    """Per-instance vs global AugNet on two sprite pairs with different rotation invariance (see the module)."""
    out_dir = output_folder(out_dir)  # a str too, '~' the home folder: checked before the seeds train
    config = quick_config() if quick else InstanceConfig()
    if seed:
        config = replace(config, seeds=tuple(seed + s for s in config.seeds))
    results = run_instance(config, progress=progress)
    numbers = _numbers(config, results)
    verdict = _verdict(numbers, quick)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "instance_numbers.json").write_text(strict_json(numbers))  # before the figures, which may fail
    figures = _figures(results, out_dir)
    return Report("instance", verdict, numbers, figures)
