"""The main job: learn the rotation invariance of the built-in rotation task.

``augnet demo`` trains an :class:`~augnet.AugNet` with one augmentation layer
of the five geometric transforms of the AugNet paper (TranslateX, TranslateY,
Rotate, ShearX, ShearY) around the paper's 5-layer CNN, on
:func:`augnet.data.rotated_sprites` (or the thin-stroke glyphs of
:func:`augnet.data.rotated_glyphs`), and records the layer's weights and
magnitudes over training.

:data:`PRESETS` name the settings of the paper's rotation experiment: what its
text states (``"paper"``), what its official code runs (``"official"``), and
augnet's own (``"augnet"``); :meth:`DemoConfig.preset` builds a config from
one. The selection schedules of :mod:`augnet.training.callbacks` (temperature
annealing, a weight warm-up) and calibrated magnitudes
(:meth:`augnet.AugmentationLayer.calibrate`) are fields of the config.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
from torch import Tensor

from augnet._checks import is_int, is_real, number
from augnet.data import rotated_glyphs, rotated_sprites
from augnet.experiments.runner import (
    CALIBRATIONS,
    ExperimentResult,
    calibrate_layers,
    check_rates,
    check_seed,
    kept_global_state,
    run_experiment,
    with_int_seed,
)
from augnet.experiments.trunks import PaperCNN, SmallCNN
from augnet.layers import AugmentationLayer
from augnet.model import AugNet
from augnet.regularizers import AUG_LR, SATURATION, WEIGHT_LR
from augnet.training import TemperatureAnnealing, WeightWarmup
from augnet.transforms import image as T

__all__ = [
    "CALIBRATIONS",
    "DATA",
    "PRESETS",
    "SIZES",
    "TRUNKS",
    "DemoConfig",
    "DemoResult",
    "build_model",
    "demo_callbacks",
    "demo_data",
    "make_trunk",
    "run_demo",
]

#: The data sets of the rotation task.
DATA = ("sprites", "glyphs")
#: Each data set's image size (height and width) in the demo and the experiments.
SIZES = {"sprites": 32, "glyphs": 28}
#: The trunks: the paper's 5-layer CNN (Table A.1), or a smaller three-block CNN.
TRUNKS = ("paper", "small")
#: Magnitude calibrations: none, equal change of the inputs, or of the untrained trunk's outputs.

#: Named settings of the rotation experiment (fields of :class:`DemoConfig`).
#:
#: - ``"paper"``: what the AugNet paper's text states (section 4.1, appendix A.1): Adam with learning
#:   rate 5e-4, weight decay 1, lambda 0.5, magnitudes initialised at the equivalent of pi/8 (1/8 of
#:   Rotate's range), uniform weights, batches of 128, 10,000 training and 5,000 test images, 20 epochs,
#:   the 5-layer CNN of Table A.1 of width 32. The text does not state the softmax temperature (taken
#:   as 1), whether the weight decay also applies to the augmentation parameters (taken as all
#:   parameters, as in the official code), nor the number of training copies (1).
#: - ``"official"``: what the paper's official code runs for this experiment: softmax temperature 0.01,
#:   Adam with learning rate 5e-4 and weight decay 1.0 on *all* parameters (augmentation included),
#:   lambda 0.5, magnitudes initialised at 1/8, batches of 128, 1 training copy, the 5-layer CNN of
#:   width 32 (4,000 training images here).
#: - ``"augnet"``: augnet's defaults: temperature 1, no weight decay, a learning rate of 5e-3 for the
#:   augmentation parameters (5e-4 for the trunk), and augnet's selection (the selective regulariser in
#:   effect units with layers chosen without replacement, sampled training rows: ``augnet reproduce
#:   selection`` and the concepts guide's "Selection").
#: The AugNet paper's selection: the blend in training, magnitudes in the transforms' own units, no
#: discount across layers (augnet's default measures effects, samples and discounts; see the concepts guide).
PAPER_SELECTION: dict = dict(regularizer="paper", train_mode="mix", effect_every=0)

#: TranslateX / TranslateY's default range (a fraction of the size), which the demo's layer uses.
_TRANSLATE_DEFAULT = T.TranslateX().max_shift

PRESETS: dict[str, dict] = {
    "paper": dict(
        temperature=1.0, lr=5e-4, aug_lr=None, weight_decay=1.0, aug_weight_decay=1.0, lam=0.5,
        init_magnitude=0.125, batch_size=128, n_train=10_000, n_test=5_000, epochs=20, width=32,
        magnitude_weight_decay=None, weight_lr=None, max_translate=0.5, **PAPER_SELECTION,
    ),
    "official": dict(
        temperature=0.01, lr=5e-4, aug_lr=None, weight_decay=1.0, aug_weight_decay=1.0, lam=0.5,
        init_magnitude=0.125, batch_size=128, train_copies=1, width=32, magnitude_weight_decay=None,
        weight_lr=None, max_translate=0.5, **PAPER_SELECTION,
    ),
    "augnet": dict(
        temperature=1.0, lr=5e-4, aug_lr=5e-3, weight_decay=0.0, aug_weight_decay=0.0, magnitude_weight_decay=None,
        regularizer="selective", units="effect", diverse=True, train_mode="sample", effect_every=10,
        saturation=SATURATION, weight_lr=WEIGHT_LR, max_translate=_TRANSLATE_DEFAULT,
    ),
}  # fmt: skip


@dataclass
class DemoConfig:
    """Settings of the rotation demo (defaults are the ones docs/guide/concepts.md reports)."""

    data: str = "sprites"
    pair: int = 0  # which sprite pair (data="sprites")
    transforms: tuple[str, ...] = tuple(cls.__name__ for cls in T.GEOMETRIC)
    max_translate: float = _TRANSLATE_DEFAULT  # TranslateX / TranslateY's max_shift (0.5 before the comparison)
    epochs: int = 20
    n_train: int = 4000
    n_test: int = 1000
    size: int = 32
    batch_size: int = 128
    lr: float = 5e-4
    aug_lr: float | None = AUG_LR  # param_groups' default (None: the trunk's lr)
    weight_lr: float | None = WEIGHT_LR  # param_groups' default for the weight logits (None: aug_lr's group)
    lam: float = 0.5
    regularizer: str = "selective"
    units: str = "effect"  # the selective regulariser's units ("magnitude": the paper's)
    diverse: bool = True  # stacked layers choose without replacement (False: the paper's)
    saturation: float | None = SATURATION  # the selective regulariser's (None: a linear pull, the paper's)
    train_mode: str = "sample"  # the layer's training mode ("mix": the paper's blend)
    effect_every: int = 10  # AugNet measures the transforms' effects every this many steps (0: never, the paper)
    init_magnitude: float = 0.125
    temperature: float = 1.0
    weight_decay: float = 0.0
    aug_weight_decay: float = 0.0
    # A weight decay on the magnitudes alone (augnet.param_groups); None: they decay with aug_weight_decay.
    magnitude_weight_decay: float | None = None
    trunk: str = "paper"
    width: int = 8
    train_copies: int = 1
    eval_copies: int = 4
    stratify: bool = True  # AugNet's evaluation copies stratified over the ranges (the library's default)
    # Selection (augnet.training.callbacks): anneal the temperature to this value over the run (None: fixed);
    # hold the weights still for this many epochs; calibrate the magnitudes to equal change of the
    # inputs ("input") or of the untrained trunk's outputs ("trunk"), or not (None).
    anneal_to: float | None = None
    warmup_epochs: int = 0
    calibrate: str | None = None
    seed: int = 0
    threads: int | None = None
    device: str = "cpu"

    @classmethod
    def preset(cls, name: str, **overrides) -> DemoConfig:
        """A config with the settings of :data:`PRESETS` ``[name]``, then ``overrides``.

        Examples:
            >>> DemoConfig.preset("official", epochs=5).temperature
            0.01
        """
        if name not in PRESETS:
            raise ValueError(f"unknown preset {name!r}; choose from {sorted(PRESETS)}")
        return dataclasses.replace(cls(), **{**PRESETS[name], **overrides})

    def validate(self) -> None:
        """Raise a ValueError (a TypeError for a value of the wrong type) naming the first field that cannot work."""
        check_seed("DemoConfig", self.seed)
        if self.data not in DATA:
            raise ValueError(f"data must be one of {DATA}, got {self.data!r}")
        if self.trunk not in TRUNKS:
            raise ValueError(f"trunk must be one of {TRUNKS}, got {self.trunk!r}")
        if isinstance(self.transforms, str):
            raise TypeError(f"transforms must be a tuple of names, got the string {self.transforms!r}")
        unknown = [name for name in self.transforms if not isinstance(getattr(T, name, None), type)]
        if unknown or not self.transforms:
            raise ValueError(f"unknown transforms {unknown or '(none given)'}; see augnet.transforms.image")
        if not is_real(self.max_translate) or not (math.isfinite(self.max_translate) and self.max_translate > 0):
            raise ValueError(f"max_translate must be a positive, finite fraction, got {self.max_translate!r}")
        check_rates("DemoConfig", False, lr=number("lr", self.lr))  # Adam said "'<=' not supported" for a string
        if self.anneal_to is not None and not (is_real(self.anneal_to) and self.anneal_to > 0):
            raise ValueError(f"anneal_to must be a positive temperature or None, got {self.anneal_to!r}")
        if not is_int(self.warmup_epochs) or self.warmup_epochs < 0:
            raise ValueError(f"warmup_epochs must be an int >= 0, got {self.warmup_epochs!r}")
        if self.calibrate not in CALIBRATIONS:
            raise ValueError(f"calibrate must be one of {CALIBRATIONS}, got {self.calibrate!r}")
        if not isinstance(self.diverse, bool):  # 1 ran as True, 0 failed at the first step
            raise TypeError(f"DemoConfig.diverse must be a bool, got {type(self.diverse).__name__}: {self.diverse!r}")


#: What a demo run produced (the experiments' result type).
DemoResult = ExperimentResult


def demo_data(config: DemoConfig):
    """``data(n, seed) -> (x, y)`` of the config's rotation task (sprites or glyphs)."""
    if config.data == "sprites":
        return lambda n, seed: rotated_sprites(n, config.size, seed=seed, pair=config.pair)
    return lambda n, seed: rotated_glyphs(n, config.size, seed=seed)


def make_trunk(config: DemoConfig) -> torch.nn.Module:
    """The config's trunk: the paper's CNN or the small CNN, of ``config.width``, for its data's channels."""
    channels = 3 if config.data == "sprites" else 1
    if config.trunk == "paper":
        return PaperCNN(channels, 4, config.width)
    return SmallCNN(channels, 4, config.width)


def image_transform(name: str, max_translate: float):
    """The image transform ``name`` at its defaults, the shifts (TranslateX, TranslateY) reaching ``max_translate``."""
    cls = getattr(T, name)
    return cls(max_shift=max_translate) if issubclass(cls, T.TranslateX) else cls()


def build_model(config: DemoConfig, x_train: Tensor | None = None) -> AugNet:
    """The demo's AugNet; with ``config.calibrate`` the layer is calibrated on (up to 256 of) ``x_train``."""
    layer = AugmentationLayer(
        [image_transform(name, config.max_translate) for name in config.transforms],
        init_magnitude=config.init_magnitude,
        temperature=config.temperature,
        train_mode=config.train_mode,
    )
    trunk = make_trunk(config)
    model = AugNet(
        trunk, layer, train_copies=config.train_copies, eval_copies=config.eval_copies,
        effect_every=config.effect_every, stratify=config.stratify,
    )
    if config.calibrate is not None:
        if x_train is None:
            raise ValueError("calibrate needs the training images to measure the transforms' change")
        calibrate_layers(model, x_train, config.calibrate)
    return model


def demo_callbacks(config: DemoConfig) -> list:
    """The selection schedules the config asks for (:mod:`augnet.training.callbacks`)."""
    callbacks = []
    if config.anneal_to is not None:
        callbacks.append(TemperatureAnnealing(config.temperature, config.anneal_to))
    if config.warmup_epochs:
        callbacks.append(WeightWarmup(config.warmup_epochs))
    return callbacks


def run_demo(config: DemoConfig | None = None, progress: bool = True) -> DemoResult:
    """Train AugNet on the rotation task and record its policy over training.

    torch's thread count and global random state come back after the run as they were before it
    (``augnet.experiments.runner.kept_global_state``).

    Raises:
        TypeError: ``config`` that is not a :class:`DemoConfig` (or None, the default one).
        ValueError, TypeError: what :meth:`DemoConfig.validate` refuses, before any data are made.
    """
    if config is not None and not isinstance(config, DemoConfig):
        raise TypeError(f"config must be a DemoConfig or None, got {type(config).__name__}")
    config = config or DemoConfig()
    config.validate()
    config = with_int_seed(config)
    with kept_global_state():
        return run_experiment(
            config,
            demo_data(config),
            lambda x_train: build_model(config, x_train),
            desc="augnet demo",
            progress=progress,
            policy_size=(config.size, config.size),
            callbacks=demo_callbacks(config),
        )
