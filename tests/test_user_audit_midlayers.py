"""Augmentation layers dropped into the middle of a model: transforms that assume images in [0, 1] on feature maps.

``Invert`` (``1 - x``), ``Solarize`` (thresholds in [0, 1]), ``Posterize`` (8-bit levels) and ``Equalize`` (8-bit
levels, values clamped into [0, 255]) gave a silently meaningless result on a feature map of 64 unbounded channels
(after a convolution and batch norm): they now warn once per transform, naming it, the values' range, the channel
count and the assumption. Images in [0, 1], also after a warp's rounding, give no warning and the same values.
"""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
from torch import nn

import augnet
from augnet.transforms import image as T

RANGED = [T.Invert, T.Solarize, T.Posterize, T.Equalize]


def _features(seed: int = 0) -> torch.Tensor:
    """A (4, 64, 8, 8) feature map as a trunk's early block gives it: conv, batch norm (values of both signs)."""
    torch.manual_seed(seed)
    block = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1), nn.BatchNorm2d(64))
    with torch.no_grad():
        return block(torch.rand(4, 3, 8, 8))


def _range_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, UserWarning) and "[0, 1]" in str(w.message)]


@pytest.mark.parametrize("cls", RANGED, ids=lambda c: c.__name__)
def test_a_transform_that_assumes_images_in_0_1_warns_once_on_a_feature_map(cls):
    t, x = cls(), _features()
    g = torch.Generator().manual_seed(0)
    with pytest.warns(UserWarning, match=rf"{cls.__name__} assumes images with values in \[0, 1\]") as caught:
        out = t(x, 0.8, generator=g)
    message = _range_warnings(caught)[0]
    assert "64 channels" in message and "feature map" in message
    low, high = float(x.amin()), float(x.amax())
    assert f"{low:.4g}" in message and f"{high:.4g}" in message
    with warnings.catch_warnings():  # once per transform: a training loop is not flooded
        warnings.simplefilter("error")
        again = t(x, 0.8, generator=torch.Generator().manual_seed(0))
    assert torch.equal(out, again)  # the warning changes no value and no draw


@pytest.mark.parametrize("cls", RANGED, ids=lambda c: c.__name__)
def test_a_layer_in_the_middle_of_a_sequential_warns_on_its_feature_map(cls):
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1),
        nn.BatchNorm2d(64),
        augnet.AugmentationLayer([T.Rotate(), cls()], init_magnitude=0.5),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(64, 10),
    )
    with pytest.warns(UserWarning, match=rf"{cls.__name__} assumes images with values in \[0, 1\]"):
        out = model(torch.rand(4, 3, 8, 8))
    assert out.shape == (4, 10)
    # the same layer in front of the model, on images in [0, 1]: silent (the warning is per transform instance)
    front = nn.Sequential(augnet.AugmentationLayer([T.Rotate(), cls()], init_magnitude=0.5), copy.deepcopy(model))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        front[0](torch.rand(4, 3, 8, 8))


@pytest.mark.parametrize("cls", RANGED, ids=lambda c: c.__name__)
@pytest.mark.parametrize("channels", [1, 3])
def test_images_in_0_1_do_not_warn_even_after_a_warp_while_features_do(cls, channels):
    torch.manual_seed(1)
    images = torch.rand(4, channels, 9, 7)
    warped = augnet.AugmentationLayer([T.Rotate(), T.Scale()], init_magnitude=0.7)(images)  # rounding past [0, 1]
    t = cls()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        for x in (images, warped, images.double(), torch.zeros(2, channels, 3, 3), torch.ones(2, channels, 3, 3)):
            t(x, 1.0, generator=torch.Generator().manual_seed(0))
        augnet.AugmentationLayer([t], init_magnitude=1.0)(images, copies=2)
    with pytest.warns(UserWarning, match=rf"{cls.__name__} assumes"):  # values in [-1, 1] (normalised images)
        t(images * 2 - 1, 1.0, generator=torch.Generator().manual_seed(0))
