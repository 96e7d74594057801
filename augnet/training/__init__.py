"""Training: :func:`fit` (tensors or a DataLoader, device, AMP, scheduler, callbacks) and what it uses.

- :mod:`augnet.training.loop`: :func:`fit` and :func:`accuracy` (and :class:`NonFiniteLossError`,
  raised when a step's loss is not finite);
- :mod:`augnet.training.callbacks`: :class:`Callback`, :class:`TrainState`,
  :class:`PolicyLogger` and the selection schedules :class:`TemperatureAnnealing`
  and :class:`WeightWarmup`;
- :mod:`augnet.training.devices`: :func:`resolve_device`, :func:`rank_generator`.

Every name is importable from ``augnet.training`` directly.
"""

from augnet.training.callbacks import Callback, PolicyLogger, TemperatureAnnealing, TrainState, WeightWarmup
from augnet.training.devices import rank_generator, resolve_device
from augnet.training.loop import NonFiniteLossError, accuracy, fit

__all__ = [
    "Callback",
    "NonFiniteLossError",
    "PolicyLogger",
    "TemperatureAnnealing",
    "TrainState",
    "WeightWarmup",
    "accuracy",
    "fit",
    "rank_generator",
    "resolve_device",
]
