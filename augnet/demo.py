"""The main job: learn the rotation invariance of the built-in glyph task.

``augnet demo`` trains an :class:`~augnet.AugNet` with one augmentation layer
of the five geometric transforms of the AugNet paper (TranslateX, TranslateY,
Rotate, ShearX, ShearY) around a small CNN, on :func:`augnet.data.rotated_glyphs`,
and records the layer's weights and magnitudes over training.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

import torch

from augnet.data import rotated_glyphs
from augnet.experiments.trunks import SmallCNN
from augnet.layers import AugmentationLayer, Policy
from augnet.model import AugNet
from augnet.regularizers import param_groups
from augnet.training import accuracy, fit
from augnet.transforms import image as T

__all__ = ["DemoConfig", "DemoResult", "run_demo"]


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


@dataclass
class DemoResult:
    """What a demo run produced."""

    config: DemoConfig
    model: AugNet
    policy: Policy
    test_accuracy: float
    seconds: float
    history: dict[str, list] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return [e["transform"] for e in self.policy[0]]

    def winner(self) -> str:
        """Name of the transform with the largest weight in the (only) layer."""
        layer = self.policy[0]
        return max(layer, key=lambda e: e["weight"])["transform"]

    def to_json(self) -> dict:
        return {
            "config": dataclasses.asdict(self.config),
            "policy": self.policy.to_json(),
            "test_accuracy": self.test_accuracy,
            "seconds": self.seconds,
            "history": self.history,
        }


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
    if config.threads is not None:
        torch.set_num_threads(config.threads)
    torch.manual_seed(config.seed)
    x_train, y_train = rotated_glyphs(config.n_train, config.size, seed=config.seed)
    x_test, y_test = rotated_glyphs(config.n_test, config.size, seed=config.seed + 10_000)
    model = build_model(config)
    opt = torch.optim.Adam(
        param_groups(model, config.weight_decay, config.aug_weight_decay, config.aug_lr), lr=config.lr
    )
    start = time.perf_counter()
    history = fit(
        model,
        x_train,
        y_train,
        opt,
        epochs=config.epochs,
        batch_size=config.batch_size,
        lam=config.lam,
        regularizer=config.regularizer,
        generator=torch.Generator().manual_seed(config.seed + 1),
        progress=progress,
        desc="augnet demo",
    )
    seconds = time.perf_counter() - start
    acc = accuracy(model, x_test, y_test, generator=torch.Generator().manual_seed(config.seed + 2))
    return DemoResult(config, model, model.policy((config.size, config.size)), acc, seconds, history)
