"""Schedules that change how an augmentation layer selects its transform during training.

The selective regulariser makes each layer promote the transform with the
highest admissible magnitude. How fast the weights move decides how early the
selection is made: at a low softmax temperature (the AugNet paper's official
code uses 0.01) the winner is settled in the first epochs, a race; at
temperature 1 the weights follow the magnitudes slowly. These callbacks of
:func:`augnet.training.fit` change that schedule:

- :class:`TemperatureAnnealing`: the layers' softmax temperature goes from
  ``start`` to ``end`` geometrically over the epochs (1 towards 0.01: the
  weights move slowly while the magnitudes find their ranges, then sharpen);
- :class:`WeightWarmup`: the weights are held still for the first epochs,
  so that every magnitude reaches its admissible range before the weights
  may move.

Both act on every :class:`~augnet.AugmentationLayer` of the model and leave
everything else as it is. (Weight decay on the augmentation parameters only is
:func:`augnet.param_groups`' ``aug_weight_decay``.)

Examples:
    >>> import torch
    >>> import augnet
    >>> from augnet.transforms import image as T
    >>> layer = augnet.AugmentationLayer([T.Rotate(), T.ShearX()])
    >>> model = augnet.AugNet(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.LazyLinear(4)), layer)
    >>> x, y = torch.rand(8, 3, 8, 8), torch.randint(0, 4, (8,))
    >>> model(x).shape  # initialise the lazy layer
    torch.Size([8, 4])
    >>> opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    >>> anneal = TemperatureAnnealing(start=1.0, end=0.01)
    >>> _ = augnet.training.fit(model, x, y, opt, epochs=3, batch_size=4, callbacks=[anneal, WeightWarmup(1)])
    >>> layer.temperature
    0.01
"""

from __future__ import annotations

import math

from augnet.training import Callback, TrainState

__all__ = ["TemperatureAnnealing", "WeightWarmup"]


def _positive(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be positive and finite, got {value}")
    return value


class TemperatureAnnealing(Callback):
    """Anneal every layer's softmax temperature from ``start`` to ``end`` over the run.

    In epoch ``e`` of ``E`` the temperature is ``start * (end / start) ** (e / (E' - 1))``
    with ``E' = epochs`` if given (then it stays at ``end`` after epoch ``E' - 1``),
    else the run's number of epochs. The layers keep the last temperature
    after training (so evaluation uses it).

    Args:
        start: the temperature of the first epoch (> 0).
        end: the temperature of the last epoch (> 0).
        epochs: the number of epochs the annealing takes (default: the whole run).
    """

    def __init__(self, start: float = 1.0, end: float = 0.01, epochs: int | None = None) -> None:
        self.start = _positive("start", start)
        self.end = _positive("end", end)
        if 1.0 / self.end > 3.4e38:
            raise ValueError(f"end temperature {end} is too small: logits / temperature overflows float32")
        if epochs is not None and (isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1):
            raise ValueError(f"epochs must be an int >= 1 or None, got {epochs!r}")
        self.epochs = epochs

    def temperature(self, epoch: int, epochs: int) -> float:
        """The temperature of ``epoch`` (0-based) in a run of ``epochs`` epochs."""
        span = (self.epochs if self.epochs is not None else epochs) - 1
        if span <= 0:
            return self.end
        frac = min(epoch / span, 1.0)
        return self.start * (self.end / self.start) ** frac

    def on_epoch_start(self, state: TrainState) -> None:
        t = self.temperature(state.epoch, state.epochs)
        for layer in state.layers:
            layer.temperature = t

    def __repr__(self) -> str:
        return f"TemperatureAnnealing(start={self.start:g}, end={self.end:g}, epochs={self.epochs})"


class WeightWarmup(Callback):
    """Hold every layer's weights still for the first ``epochs`` epochs; the magnitudes train from the start.

    During the warm-up the weight logits get no gradient (``grad`` is set to
    ``None`` before the optimiser's step, so optimisers that skip such
    parameters, e.g. Adam and SGD, neither move them nor update their
    moments). The magnitudes meanwhile rise to what the task loss admits
    under the uniform blend, so that when the weights may move they compare
    settled magnitudes rather than the first steps' race.

    Args:
        epochs: the warm-up's length in epochs (>= 0).
    """

    def __init__(self, epochs: int = 3) -> None:
        if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 0:
            raise ValueError(f"epochs must be an int >= 0, got {epochs!r}")
        self.epochs = epochs

    def on_before_optimizer_step(self, state: TrainState) -> None:
        if state.epoch < self.epochs:
            for layer in state.layers:
                layer.weight_logits.grad = None

    def __repr__(self) -> str:
        return f"WeightWarmup(epochs={self.epochs})"
