"""The sinusoid experiment of the AugNet paper (section 4.2), at CPU scale.

- :func:`run_sinusoids`: learn the frequency-shift invariance of
  :func:`augnet.data.sinusoids` (paper section 4.2) with one (or several)
  layers of FrequencyShift, FTSurrogate and GaussianNoise around a small 1-D CNN.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from augnet._checks import number
from augnet.data import sinusoids
from augnet.experiments._registry import Report, register
from augnet.experiments.runner import (
    CALIBRATIONS,
    ExperimentResult,
    calibrate_layers,
    check_counts,
    check_rates,
    check_seed,
    check_threads,
    kept_global_state,
    output_folder,
    run_experiment,
    with_int_seed,
)
from augnet.experiments.trunks import Conv1dNet
from augnet.layers import AugmentationLayer
from augnet.model import AugNet
from augnet.transforms import signal as S

__all__ = ["ExperimentResult", "SinusoidsConfig", "run_sinusoids"]


@dataclass
class SinusoidsConfig:
    """Settings of the sinusoid experiment (defaults: the ones docs/guide/reproducing.md reports)."""

    transforms: tuple[str, ...] = ("FrequencyShift", "FTSurrogate", "GaussianNoise")
    layers: int = 1
    epochs: int = 50
    n_train: int = 400
    n_test: int = 200
    batch_size: int = 32
    lr: float = 1e-2
    aug_lr: float | None = None
    weight_decay: float = 1e-4
    aug_weight_decay: float = 0.0
    magnitude_weight_decay: float | None = None  # None: the magnitudes decay with aug_weight_decay
    # The selective regulariser's saturation and the weight logits' rate (param_groups): None, the linear pull
    # and one rate for the augmentation group, as the kept results were trained (the README row sets both).
    saturation: float | None = None
    weight_lr: float | None = None
    lam: float = 0.2
    regularizer: str = "selective"
    units: str = "effect"  # the selective regulariser's units ("magnitude": the paper's)
    diverse: bool = True  # stacked layers choose without replacement (False: the paper's)
    calibrate: str | None = None  # calibrate the layers before training: None, "input" or "trunk"
    train_mode: str = "sample"  # the layers' training mode ("mix": the paper's blend)
    effect_every: int = 10  # AugNet measures the transforms' effects every this many steps (0: never, the paper)
    train_copies: int = 4
    eval_copies: int = 10
    stratify: bool = False  # independent evaluation copies, as the kept tables were measured (README row: True)
    init_magnitude: float = 0.5
    temperature: float = 1.0
    max_shift: float = 2.0  # Hz, FrequencyShift at magnitude 1
    max_phase: float = 0.2 * 3.141592653589793  # rad, FTSurrogate at magnitude 1
    max_noise: float = 0.1  # x signal std, GaussianNoise at magnitude 1
    width: int = 16
    seed: int = 0
    threads: int | None = None
    device: str = "cpu"

    def validate(self) -> None:
        """Raise a ValueError (a TypeError for a value of the wrong type) naming the first field that cannot work,
        before any data are made: the candidates, the layers, the trunk's width and the candidates' ranges were
        read while the model was built, as Python's errors (``layers=2.0``: "'float' object cannot be interpreted
        as an integer"; ``transforms="FrequencyShift"``: each letter an unknown candidate) or naming the
        transforms' arguments (``max_noise=0``: ``max_std``)."""
        check_seed("SinusoidsConfig", self.seed)
        if isinstance(self.transforms, str) or not isinstance(self.transforms, (tuple, list)):
            raise TypeError(f"SinusoidsConfig.transforms must be a tuple of names, got {type(self.transforms).__name__}"
                            f": {self.transforms!r}")  # fmt: skip
        if not self.transforms:
            raise ValueError("SinusoidsConfig.transforms must not be empty: a layer needs at least one candidate")
        unknown = [name for name in self.transforms if name not in _CANDIDATES]
        if unknown:
            raise ValueError(f"unknown sinusoid candidates {unknown}; choose from {sorted(_CANDIDATES)}")
        # (a 0-d tensor or array: the number it holds, as the transforms, the trunk and Adam read one)
        read = {name: number(name, getattr(self, name)) for name in ("layers", "width", "max_shift", "max_phase",
                                                                     "max_noise", "lr")}  # fmt: skip
        check_counts("SinusoidsConfig", layers=read["layers"], width=read["width"])
        check_counts("SinusoidsConfig", n_train=self.n_train, n_test=self.n_test)
        check_threads("SinusoidsConfig", self.threads)
        check_rates("SinusoidsConfig", **{name: read[name] for name in ("max_shift", "max_phase", "max_noise")})
        check_rates("SinusoidsConfig", False, lr=read["lr"])
        if self.calibrate not in CALIBRATIONS:
            raise ValueError(f"SinusoidsConfig.calibrate must be one of {CALIBRATIONS}, got {self.calibrate!r}")


#: The candidates a sinusoid layer can hold (:func:`sinusoid_layer`).
_CANDIDATES = ("FrequencyShift", "FTSurrogate", "GaussianNoise")


def sinusoid_layer(config: SinusoidsConfig, sfreq: float = 100.0) -> AugmentationLayer:
    """One layer of the experiment's candidates (by default the paper's three)."""
    make = {
        "FrequencyShift": lambda: S.FrequencyShift(sfreq, max_shift=config.max_shift),
        "FTSurrogate": lambda: S.FTSurrogate(max_phase=config.max_phase),
        "GaussianNoise": lambda: S.GaussianNoise(max_std=config.max_noise),
    }
    unknown = [name for name in config.transforms if name not in make]
    if unknown:
        raise ValueError(f"unknown sinusoid candidates {unknown}; choose from {sorted(make)}")
    transforms = [make[name]() for name in config.transforms]
    return AugmentationLayer(
        transforms, init_magnitude=config.init_magnitude, temperature=config.temperature, train_mode=config.train_mode
    )


def run_sinusoids(config: SinusoidsConfig | None = None, progress: bool = False) -> ExperimentResult:
    """Train AugNet on the sinusoid task and record its policy over training.

    torch's thread count and global random state come back after the run as they were before it
    (``augnet.experiments.runner.kept_global_state``).

    Raises:
        TypeError: ``config`` that is not a :class:`SinusoidsConfig` (or None, the default one).
        ValueError, TypeError: what :meth:`SinusoidsConfig.validate` refuses, before any data are made.
    """
    if config is not None and not isinstance(config, SinusoidsConfig):
        raise TypeError(f"config must be a SinusoidsConfig or None, got {type(config).__name__}")
    config = config or SinusoidsConfig()
    config.validate()
    config = with_int_seed(config)

    def build(x_train) -> AugNet:
        layers = [sinusoid_layer(config) for _ in range(int(number("layers", config.layers)))]
        trunk = Conv1dNet(1, 4, config.width)
        model = AugNet(trunk, layers, config.train_copies, config.eval_copies, effect_every=config.effect_every,
                       stratify=config.stratify)  # fmt: skip
        calibrate_layers(model, x_train, config.calibrate)
        return model

    with kept_global_state():
        return run_experiment(config, lambda n, seed: sinusoids(n, seed=seed), build, desc="sinusoids",
                              progress=progress)  # fmt: skip


@register("sinusoids")
def stacked_layers(
    out_dir: Path, quick: bool = False, seed: int = 0, progress: bool = True, device: str = "cpu"
) -> Report:
    """Frequency-shift invariance with 1, 2 and 4 stacked layers (paper Fig. 3b, B.1-B.3).

    Every layer holds the same three candidates. The paper reports that one
    layer keeps a positive magnitude while the others go to the identity.
    """
    out_dir = output_folder(out_dir)  # a str too, '~' the home folder: checked before the runs train
    counts = (1, 2) if quick else (1, 2, 4)
    numbers: dict = {"runs": []}
    figures, lines = [], []
    for layers in counts:
        config = SinusoidsConfig(layers=layers, seed=seed, device=device)
        if quick:
            config.epochs, config.n_train, config.n_test = 15, 200, 100
        result = run_sinusoids(config, progress=progress)
        policy = result.policy.layers_json()
        summary = []
        for i, layer in enumerate(policy):
            top = max(layer, key=lambda e: e["weight"])
            summary.append(
                {"layer": i, "winner": top["transform"], "weight": top["weight"], "magnitude": top["magnitude"]}
            )
        numbers["runs"].append(
            {"layers": layers, "test_accuracy": result.test_accuracy, "policy": policy, "winners": summary}
        )
        desc = "; ".join(
            f"layer {s['layer']}: {s['winner']} (w {s['weight']:.2f}, mu {s['magnitude']:.2f})" for s in summary
        )
        lines.append(f"{layers} layer(s), test accuracy {result.test_accuracy:.3f}: {desc}")
        try:
            from augnet.viz import plot_policy_history

            names = [e["transform"] for e in policy[0]]
            for i in range(layers):
                path = out_dir / f"sinusoids_{layers}layers_layer{i}.png"
                title = f"sinusoids, {layers} layer(s): layer {i}"
                figures.append(plot_policy_history(result.history, names, path, title=title, layer=i))
        except ImportError:
            pass
    return Report("sinusoids", "\n".join(lines), numbers, figures)
