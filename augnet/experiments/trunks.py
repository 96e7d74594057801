"""The trunks of augnet's experiments, demo and benchmarks: plain PyTorch modules.

- :class:`PaperCNN`: images, the AugNet paper's 5-layer CNN of its rotation experiment (Table A.1);
- :class:`SmallCNN`: images, three conv-BN-ReLU blocks (the glyph variant of the demo);
- :class:`Conv1dNet`: 1-D signals, three strided conv blocks (the sinusoid experiment);
- :class:`MLP`: flattened signals, ``depth`` x ``width`` (the capacity and copies experiments);
- :func:`resnet18`: 32x32 images (the inference-cost benchmark);
- :func:`preact_resnet18`: 32x32 images, the pre-activated ResNet-18 of the paper's CIFAR-10 experiment.

Any of them can be the trunk of an :class:`~augnet.AugNet`. Their sizes (channels, classes, width, depth, kernel)
are ints >= 1 (a NumPy int or a 0-d integer tensor too); anything else is a TypeError or a ValueError naming the
argument, at construction.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from augnet._checks import check_bool, is_int, number

__all__ = ["MLP", "Conv1dNet", "PaperCNN", "SmallCNN", "preact_resnet18", "resnet18"]


def _size(owner: str, name: str, value) -> int:
    """``value`` (a channel count, a width, a depth...) as an int >= 1: a Python or NumPy int, or a 0-d integer
    tensor or array (:func:`augnet._checks.number`); else the TypeError (a float, a bool, a string, ``None``: torch's
    own error named no argument, or a float width made a model of fractional channels fail in a layer) or the
    ValueError (below 1: a negative size was torch's RuntimeError, a 0 one an empty model) naming ``name``."""
    read = number(name, value)
    if not is_int(read):
        raise TypeError(f"{owner}: {name} must be an int >= 1, got {type(value).__name__}: {value!r}")
    if read < 1:
        raise ValueError(f"{owner}: {name} must be >= 1, got {value!r}")
    return int(read)


class PaperCNN(nn.Module):
    """The 5-layer CNN of the AugNet paper's rotation experiment (Table A.1), of width ``c``.

    Four 3x3 conv-BN-ReLU layers of ``c, 2c, 4c, 8c`` channels (stride 1,
    padding 1), the last three each followed by 2x2 max pooling, then a 4x4
    max pooling (stride 1) and a linear head. The paper's width is ``c = 32``.
    On 32x32 inputs the last pooling sees the whole 4x4 map (a global maximum);
    on other sizes the map is first pooled to 4x4.

    Shape:
        - input: :math:`(B, Ch, H, W)` with H, W >= 8
        - output: :math:`(B, \text{classes})` logits

    Examples:
        >>> PaperCNN(3, 4, width=8)(torch.rand(2, 3, 32, 32)).shape
        torch.Size([2, 4])
    """

    def __init__(self, in_channels: int = 3, classes: int = 4, width: int = 32) -> None:
        super().__init__()
        in_channels, classes = _size("PaperCNN", "in_channels", in_channels), _size("PaperCNN", "classes", classes)
        width = _size("PaperCNN", "width", width)

        def block(i, o, pool):
            layers = [nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o), nn.ReLU()]
            return nn.Sequential(*layers, *([nn.MaxPool2d(2)] if pool else []))

        c = width
        self.features = nn.Sequential(
            block(in_channels, c, False),
            block(c, 2 * c, True),
            block(2 * c, 4 * c, True),
            block(4 * c, 8 * c, True),
            nn.AdaptiveMaxPool2d(4),
            nn.MaxPool2d(4, stride=1),
            nn.Flatten(),
        )
        self.head = nn.Linear(8 * c, classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.features(x))


class SmallCNN(nn.Module):
    """A small convolutional trunk: three conv-BN-ReLU blocks, max pooling, a linear head.

    Shape:
        - input: :math:`(B, Ch, H, W)`
        - output: :math:`(B, \\text{classes})` logits
    """

    def __init__(self, in_channels: int = 1, classes: int = 4, width: int = 16) -> None:
        super().__init__()
        in_channels, classes = _size("SmallCNN", "in_channels", in_channels), _size("SmallCNN", "classes", classes)
        width = _size("SmallCNN", "width", width)

        def block(i, o):
            return nn.Sequential(nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o), nn.ReLU())

        self.features = nn.Sequential(
            block(in_channels, width),
            nn.MaxPool2d(2),
            block(width, 2 * width),
            nn.MaxPool2d(2),
            block(2 * width, 4 * width),
            nn.AdaptiveMaxPool2d(1),
            nn.Flatten(),
        )
        self.head = nn.Linear(4 * width, classes)

    def forward(self, x):
        return self.head(self.features(x))


class Conv1dNet(nn.Module):
    """A small 1-D CNN: three strided conv-BN-ReLU blocks, global average pooling, a linear head.

    Shape:
        - input: :math:`(B, Ch, T)`
        - output: :math:`(B, \\text{classes})` logits
    """

    def __init__(self, in_channels: int = 1, classes: int = 4, width: int = 16, kernel: int = 9) -> None:
        super().__init__()
        in_channels, classes = _size("Conv1dNet", "in_channels", in_channels), _size("Conv1dNet", "classes", classes)
        width, kernel = _size("Conv1dNet", "width", width), _size("Conv1dNet", "kernel", kernel)

        def block(i, o):
            return nn.Sequential(
                nn.Conv1d(i, o, kernel, stride=2, padding=kernel // 2, bias=False), nn.BatchNorm1d(o), nn.ReLU()
            )

        self.features = nn.Sequential(
            block(in_channels, width), block(width, 2 * width), block(2 * width, 2 * width), nn.AdaptiveAvgPool1d(1)
        )
        self.head = nn.Linear(2 * width, classes)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


class MLP(nn.Module):
    """A small multi-layer perceptron on the flattened signal: ``depth`` hidden Linear-ReLU layers of ``width``.

    Shape:
        - input: :math:`(B, Ch, T)` (flattened to ``Ch * T`` features)
        - output: :math:`(B, \\text{classes})` logits

    Examples:
        >>> MLP(width=4, depth=2)(torch.randn(3, 1, 1000)).shape
        torch.Size([3, 4])
    """

    def __init__(self, width: int, depth: int, in_features: int = 1000, classes: int = 4) -> None:
        super().__init__()
        read = number("width", width), number("depth", depth)
        for name, value, n in zip(("width", "depth"), (width, depth), read, strict=True):
            if not is_int(n):
                raise TypeError(f"MLP: {name} must be an int >= 1, got {type(value).__name__}: {value!r}")
        width, depth = int(read[0]), int(read[1])
        if width < 1 or depth < 1:
            raise ValueError(f"width and depth must be >= 1, got {width} and {depth}")
        in_features, classes = _size("MLP", "in_features", in_features), _size("MLP", "classes", classes)
        layers: list[nn.Module] = [nn.Flatten()]
        size = in_features
        for _ in range(depth):
            layers += [nn.Linear(size, width), nn.ReLU()]
            size = width
        layers.append(nn.Linear(size, classes))
        self.net = nn.Sequential(*layers)
        self.width, self.depth = width, depth

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)


class _BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.skip = nn.Sequential()
        if stride != 1 or cin != cout:
            self.skip = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + self.skip(x))


def resnet18(classes: int = 10, width: int = 64) -> nn.Module:
    """A ResNet-18 for 32x32 images (3x3 stem, four stages of two basic blocks), as trunk of the cost benchmark."""
    classes, width = _size("resnet18", "classes", classes), _size("resnet18", "width", width)
    layers, cin = [nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU()], width
    for i, stride in enumerate((1, 2, 2, 2)):
        cout = width * 2**i
        layers += [_BasicBlock(cin, cout, stride), _BasicBlock(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*layers)


class _PreActBlock(nn.Module):
    """BN-ReLU-conv twice, the shortcut taken after the first BN-ReLU when it must change shape (He et al. 2016b)."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.bn1 = nn.BatchNorm2d(cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.shortcut = None
        if stride != 1 or cin != cout:
            self.shortcut = nn.Conv2d(cin, cout, 1, stride, bias=False)

    def forward(self, x):
        out = torch.relu(self.bn1(x))
        skip = self.shortcut(out) if self.shortcut is not None else x
        out = self.conv1(out)
        out = self.conv2(torch.relu(self.bn2(out)))
        return out + skip


class Normalize(nn.Module):
    """``(x - mean) / std`` per channel, inside the trunk, so that augmentations see images in [0, 1].

    Shape:
        - input: :math:`(B, Ch, H, W)`; output: the same.
    """

    def __init__(self, mean, std) -> None:
        super().__init__()
        self.register_buffer("mean", torch.as_tensor(mean, dtype=torch.float32).reshape(1, -1, 1, 1))
        self.register_buffer("std", torch.as_tensor(std, dtype=torch.float32).reshape(1, -1, 1, 1))

    def forward(self, x: Tensor) -> Tensor:
        return (x - self.mean) / self.std


#: The normalisation of the AugNet paper's CIFAR-10 experiment (appendix A.3, ImageNet's statistics).
CIFAR_MEAN, CIFAR_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def preact_resnet18(classes: int = 10, width: int = 64, normalize: bool = True) -> nn.Module:
    """The pre-activated ResNet-18 of the AugNet paper's CIFAR-10 experiment (section 5.1), for 32x32 images.

    With ``normalize`` the first module standardises the channels with the
    paper's statistics (:data:`CIFAR_MEAN`, :data:`CIFAR_STD`), so that the
    augmentation layers in front of it work on images in [0, 1], as the
    colour transforms expect.

    Shape:
        - input: :math:`(B, 3, 32, 32)` in [0, 1]
        - output: :math:`(B, \\text{classes})` logits

    Examples:
        >>> preact_resnet18(classes=10, width=8)(torch.rand(2, 3, 32, 32)).shape
        torch.Size([2, 10])
    """
    classes, width = _size("preact_resnet18", "classes", classes), _size("preact_resnet18", "width", width)
    check_bool("normalize", normalize)
    layers: list[nn.Module] = [Normalize(CIFAR_MEAN, CIFAR_STD)] if normalize else []
    layers.append(nn.Conv2d(3, width, 3, 1, 1, bias=False))
    cin = width
    for i, stride in enumerate((1, 2, 2, 2)):
        cout = width * 2**i
        layers += [_PreActBlock(cin, cout, stride), _PreActBlock(cout, cout, 1)]
        cin = cout
    layers += [nn.BatchNorm2d(cin), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*layers)
