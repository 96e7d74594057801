"""Ready-made augmentation modules and schedules of the AugNet paper's experiments.

``cifar10_augmentation()`` is the augmentation module of the paper's CIFAR-10
experiment (section 5.1): three augmentation layers, the first two of the five
geometric transforms, the third of a horizontal flip, sample pairing,
contrast and brightness; ``cifar10_lambda()`` its regularisation schedule
(appendix A.3).

Examples:
    >>> import torch
    >>> from augnet.presets import cifar10_augmentation, cifar10_lambda
    >>> module = cifar10_augmentation()
    >>> [len(layer.transforms) for layer in module.layers]
    [5, 5, 4]
    >>> module(torch.rand(2, 3, 32, 32), copies=4).shape
    torch.Size([8, 3, 32, 32])
    >>> cifar10_lambda()(39), cifar10_lambda()(40)
    (0.5, 0.05)
"""

from __future__ import annotations

from collections.abc import Sequence

from augnet._checks import as_values
from augnet.layers import AugmentationLayer, AugmentationModule
from augnet.regularizers import LambdaSchedule
from augnet.transforms import image as T
from augnet.transforms.base import Transform

__all__ = ["cifar10_augmentation", "cifar10_lambda", "cifar10_transforms"]


def cifar10_transforms(full: bool = False) -> list[list[Transform]]:
    """Fresh transforms of the three layers of :func:`cifar10_augmentation`, with their default ranges.

    Args:
        full: add Faster AutoAugment's other operations to the third layer:
            ``Invert``, ``Gray``, ``AutoContrast``, ``Solarize``, ``Posterize``,
            ``Equalize`` and ``Sharpness``.

    Returns:
        Per layer, its transforms: two layers of ``TranslateX``, ``TranslateY``,
        ``Rotate``, ``ShearX``, ``ShearY``; a third of ``HorizontalFlip``,
        ``SamplePairing``, ``Contrast``, ``Brightness`` (and with ``full`` the
        operations above, in that order).
    """
    if not isinstance(full, bool):
        raise TypeError(f"full must be a bool, got {full!r}")
    geometric = [[cls() for cls in T.GEOMETRIC] for _ in range(2)]
    third = [T.HorizontalFlip(), T.SamplePairing(), T.Contrast(), T.Brightness()]
    if full:
        third += [T.Invert(), T.Gray(), T.AutoContrast(), T.Solarize(), T.Posterize(), T.Equalize(), T.Sharpness()]
    return [*geometric, third]


def cifar10_augmentation(
    init_magnitude: float = 0.5, temperature: float = 1.0, full: bool = False
) -> AugmentationModule:
    """The augmentation module of the AugNet paper's CIFAR-10 experiment (section 5.1).

    Three :class:`~augnet.AugmentationLayer` applied in order (see
    :func:`cifar10_transforms`): two of the five geometric transforms, then
    one of a horizontal flip, sample pairing, contrast and brightness, with
    uniform weights and every magnitude at ``init_magnitude``. Images are RGB
    (``Gray`` needs three channels); at 3x32x32 translations of magnitude 1
    reach ±8 pixels (their default range, a quarter of the side).

    Args:
        init_magnitude: the initial magnitude of every transform, in [0, 1] (the paper's 0.5).
        temperature: the softmax temperature of the layers' weights.
        full: the third layer also holds Faster AutoAugment's other colour operations
            (``Invert``, ``Gray``, ``AutoContrast``, ``Solarize``, ``Posterize``,
            ``Equalize``, ``Sharpness``); the layer then runs each transform on the
            copies and sums them instead of one fused ``tap_mix`` call.

    Raises:
        TypeError, ValueError: ``init_magnitude`` not one number in [0, 1] (a sequence is refused: the layers
            hold different numbers of transforms), ``temperature`` not a positive finite number, ``full`` not a
            bool; naming the argument.

    Returns:
        A new :class:`~augnet.AugmentationModule`, e.g. for
        ``AugNet(trunk, cifar10_augmentation(), ...)``, trained with
        ``selective_regularizer`` weighted by :func:`cifar10_lambda`.
    """
    per_layer = cifar10_transforms(full)
    values = as_values(init_magnitude, "init_magnitude")  # (a tensor, an array: its values)
    if isinstance(values, Sequence) and not isinstance(values, (str, bytes)):  # the layers' sizes differ: it failed
        raise ValueError(f"init_magnitude must be one number in [0, 1] (every transform's initial magnitude; the "
                        f"layers hold {', '.join(str(len(t)) for t in per_layer)} transforms), got {values!r}: set "
                        "one layer's magnitudes with module.layers[i].raw_magnitudes")  # fmt: skip
    layers = [
        AugmentationLayer(transforms, init_magnitude=init_magnitude, temperature=temperature)
        for transforms in per_layer
    ]
    return AugmentationModule(layers)


def cifar10_lambda() -> LambdaSchedule:
    """The AugNet paper's regularisation strength on CIFAR-10 (appendix A.3): 0.5 for 40 epochs, then 0.05."""
    return LambdaSchedule((0.5, 0.05), milestones=(40,))
