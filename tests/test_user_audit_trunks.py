"""User audit (trunks): AugNet and the probes on the trunks users have (torchvision models, wrapped ones)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from augnet import AugmentationLayer, AugNet
from augnet.probes import features
from augnet.probes.report import auto_layers
from augnet.transforms import image as T

torchvision = pytest.importorskip("torchvision")


def _resnet() -> nn.Module:
    torch.manual_seed(0)
    return torchvision.models.resnet18(weights=None, num_classes=10).eval()


def _augnet(trunk: nn.Module) -> AugNet:
    return AugNet(trunk, AugmentationLayer([T.Rotate(), T.TranslateX()], init_magnitude=0.2))


class _Wrapper(nn.Module):
    """What a user writes to give AugNet a trunk's logits (a Hugging Face model's, GoogLeNet's)."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, x):
        return self.net(x)


@torch.no_grad()
def test_a_batch_norm_before_an_in_place_relu_is_read_as_it_returned():
    """torchvision's ResNet applies ReLU(inplace=True) to bn1's output: features read it rectified."""
    net, x = _resnet(), torch.rand(3, 3, 32, 32)
    got = features(net, x, ["bn1", "layer1.0.bn1"])
    expected = net.bn1(net.conv1(x))
    torch.testing.assert_close(got["bn1"], expected, rtol=0, atol=0)
    assert got["layer1.0.bn1"].min() < 0  # a batch norm's output, not a ReLU's


@torch.no_grad()
def test_mobilenet_batch_norm_before_in_place_hardswish():
    torch.manual_seed(0)
    net, x = torchvision.models.mobilenet_v3_small(weights=None).eval(), torch.rand(2, 3, 32, 32)
    got = features(net, x, "features.0.1")["features.0.1"]
    torch.testing.assert_close(got, net.features[0][1](net.features[0][0](x)), rtol=0, atol=0)


@torch.no_grad()
def test_inside_an_augnet_the_batch_norm_is_averaged_before_its_relu():
    net = _resnet()
    model = _augnet(net).eval()
    model.stratify = False  # the copies drawn as model.augment draws them
    x = torch.rand(2, 3, 32, 32)
    got = features(model, x, "trunk.bn1", copies=2, generator=torch.Generator().manual_seed(0))["trunk.bn1"]
    rows = model.augment(x, copies=2, generator=torch.Generator().manual_seed(0))
    expected = net.bn1(net.conv1(rows)).reshape(2, 2, *got.shape[1:]).mean(0)
    torch.testing.assert_close(got, expected)
    assert got.min() < 0


@torch.no_grad()
def test_channels_last_features_are_the_outputs_bit_for_bit():
    net = _resnet().to(memory_format=torch.channels_last)
    x = torch.rand(2, 3, 32, 32).to(memory_format=torch.channels_last)
    got = features(net, x, ["layer1", "layer2.0.conv1"], reduce="mean")
    out = net.layer1(net.maxpool(net.relu(net.bn1(net.conv1(x)))))
    torch.testing.assert_close(got["layer1"], out.mean((2, 3)), rtol=0, atol=0)
    torch.testing.assert_close(got["layer2.0.conv1"], net.layer2[0].conv1(out).mean((2, 3)), rtol=0, atol=0)


BLOCKS = ["layer1", "layer2", "layer3", "layer4"]


@pytest.mark.parametrize(
    ("wrap", "prefix"),
    [
        (nn.DataParallel, "module."),  # passes through on a CPU
        (_Wrapper, "net."),
        (lambda net: _augnet(nn.DataParallel(net)), "trunk.module."),
        (lambda net: _augnet(_Wrapper(net)), "trunk.net."),
    ],
)
def test_auto_layers_see_through_a_wrapper_of_one_module(wrap, prefix):
    """A wrapper's only child is the whole network: the report read only the logits, without a word."""
    model, x = wrap(_resnet()), torch.rand(2, 3, 32, 32)
    assert auto_layers(model, x) == [prefix + b for b in BLOCKS] + ["logits"]
    assert auto_layers(model) == [prefix + b for b in BLOCKS] + ["logits"]


def test_auto_layers_of_unwrapped_models_are_as_before():
    assert auto_layers(_resnet()) == [*BLOCKS, "logits"]
    assert auto_layers(_augnet(_resnet())) == [f"trunk.{b}" for b in BLOCKS] + ["logits"]
    flat = nn.Sequential(nn.Flatten(), nn.Linear(12, 4), nn.ReLU(), nn.Linear(4, 2))
    assert auto_layers(flat) == ["0", "1", "2", "logits"]
    assert auto_layers(nn.Sequential(nn.Linear(2, 2))) == ["logits"]  # one leaf: nothing to see through
