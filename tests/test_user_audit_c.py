"""A user's audit of AugNet, Augerino, the augmentation layers and the per-instance layer.

AugNet, Augerino and the layers kept their results through state-dict round trips (strict and not), deep
copies, pickling, dtype casts, channels-last and non-contiguous inputs, ``torch.compile``, ``DataParallel``
and frozen policies, and their gradients pass ``gradcheck`` in float64. What was wrong: the default
conditioner's arguments of the wrong type (a str, a bool, a float count) raised a plain ValueError where a
TypeError naming the argument belongs.
"""

from __future__ import annotations

import pytest

from augnet.instance import ConditionedAugmentationLayer, TinyConditioner
from augnet.transforms import image as T


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"channels": "3"}, "channels"),
        ({"channels": 3.0}, "channels"),
        ({"channels": True}, "channels"),
        ({"outputs": None}, "outputs"),
        ({"hidden": 16.5}, "hidden"),
        ({"ndim": "4"}, "ndim"),
        ({"ndim": True}, "ndim"),
        ({"kernel_size": 3.0}, "kernel_size"),
        ({"kernel_size": "1"}, "kernel_size"),
    ],
)
def test_tiny_conditioner_names_an_argument_of_the_wrong_type_with_a_type_error(kwargs, name):
    args = {"channels": 3, "outputs": 4, **kwargs}
    with pytest.raises(TypeError, match=f"TinyConditioner: {name} must be") as info:
        TinyConditioner(**args)
    assert isinstance(info.value, ValueError)  # what it raised before: `except ValueError` still catches it


def test_the_per_instance_layer_names_channels_of_the_wrong_type_with_a_type_error():
    with pytest.raises(TypeError, match="channels must be an int >= 1, got '3'"):
        ConditionedAugmentationLayer([T.Rotate()], channels="3")
