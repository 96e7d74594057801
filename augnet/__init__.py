"""augnet: learn a model's invariances end to end with augmentation layers.

Examples:
    >>> import torch
    >>> import augnet
    >>> from augnet.transforms import image as T
    >>> trunk = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 16 * 16, 4))
    >>> layer = augnet.AugmentationLayer([T.TranslateX(), T.Rotate()], init_magnitude=0.1)
    >>> model = augnet.AugNet(trunk, layer)
    >>> out = model(torch.rand(8, 3, 16, 16))          # (B, classes) log-probabilities
    >>> loss = torch.nn.functional.nll_loss(out, torch.zeros(8, dtype=torch.long))
    >>> loss = loss + 0.5 * augnet.selective_regularizer(model)
"""

from augnet import (
    _interrupt,  # first: a Ctrl-C while `python -m augnet` imports torch is one line
    export,  # noqa: F401 (registers Policy.to_kornia / to_torchvision; kornia loads on use)
)
from augnet.augerino import Augerino
from augnet.instance import ConditionedAugmentationLayer
from augnet.layers import AugmentationLayer, AugmentationModule
from augnet.model import AugNet, aggregate
from augnet.ops.dispatch import tap_mix
from augnet.policy import Policy
from augnet.regularizers import (
    AUG_LR,
    SATURATION,
    WEIGHT_LR,
    LambdaSchedule,
    augerino_regularizer,
    no_regularizer,
    paper_selective_regularizer,
    param_groups,
    selective_regularizer,
)

__version__ = "0.1.0"

__all__ = [
    "AUG_LR",
    "SATURATION",
    "WEIGHT_LR",
    "AugNet",
    "Augerino",
    "AugmentationLayer",
    "AugmentationModule",
    "ConditionedAugmentationLayer",
    "LambdaSchedule",
    "Policy",
    "__version__",
    "aggregate",
    "augerino_regularizer",
    "no_regularizer",
    "paper_selective_regularizer",
    "param_groups",
    "selective_regularizer",
    "tap_mix",
]

_interrupt.restore()  # the package is imported: a later error or Ctrl-C is its program's own
