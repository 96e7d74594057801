"""The main job: learn the rotation invariance of the built-in glyph task.

``augnet demo`` trains an :class:`~augnet.AugNet` with one augmentation layer
of the five geometric transforms of the AugNet paper (TranslateX, TranslateY,
Rotate, ShearX, ShearY) around a small CNN, on :func:`augnet.data.rotated_glyphs`,
and records the layer's weights and magnitudes over training.
"""

from __future__ import annotations

from dataclasses import dataclass

from augnet.data import rotated_glyphs
from augnet.experiments.runner import ExperimentResult, run_experiment
from augnet.experiments.trunks import SmallCNN
from augnet.layers import AugmentationLayer
from augnet.model import AugNet
from augnet.transforms import image as T

__all__ = ["DemoConfig", "DemoResult", "build_model", "run_demo"]


@dataclass
class DemoConfig:
    """Settings of the rotation demo (defaults are the ones the README reports)."""

    transforms: tuple[str, ...] = tuple(cls.__name__ for cls in T.GEOMETRIC)
    epochs: int = 20
    n_train: int = 4000
    n_test: int = 1000
    size: int = 28
    batch_size: int = 128
    lr: float = 5e-4
    aug_lr: float | None = 5e-3
    lam: float = 0.5
    regularizer: str = "selective"
    init_magnitude: float = 0.125
    temperature: float = 1.0
    weight_decay: float = 0.0
    aug_weight_decay: float = 0.0
    width: int = 16
    train_copies: int = 1
    eval_copies: int = 4
    seed: int = 0
    threads: int | None = None


#: What a demo run produced (the experiments' result type).
DemoResult = ExperimentResult


def build_model(config: DemoConfig) -> AugNet:
    layer = AugmentationLayer(
        [getattr(T, name)() for name in config.transforms],
        init_magnitude=config.init_magnitude,
        temperature=config.temperature,
    )
    trunk = SmallCNN(1, 4, config.width)
    return AugNet(trunk, layer, train_copies=config.train_copies, eval_copies=config.eval_copies)


def run_demo(config: DemoConfig | None = None, progress: bool = True) -> DemoResult:
    """Train AugNet on the rotation task and record its policy over training."""
    config = config or DemoConfig()
    return run_experiment(
        config,
        lambda n, seed: rotated_glyphs(n, config.size, seed=seed),
        lambda: build_model(config),
        desc="augnet demo",
        progress=progress,
        policy_size=(config.size, config.size),
    )
