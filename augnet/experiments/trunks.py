"""The trunks of augnet's experiments, demo and benchmarks: plain PyTorch modules.

- :class:`PaperCNN`: images, the AugNet paper's 5-layer CNN of its rotation experiment (Table A.1);
- :class:`SmallCNN`: images, three conv-BN-ReLU blocks (the glyph variant of the demo);
- :class:`Conv1dNet`: 1-D signals, three strided conv blocks (the sinusoid experiment);
- :class:`MLP`: flattened signals, ``depth`` x ``width`` (the capacity and copies experiments);
- :func:`resnet18`: 32x32 images (the inference-cost benchmark).

Any of them can be the trunk of an :class:`~augnet.AugNet`.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["MLP", "Conv1dNet", "PaperCNN", "SmallCNN", "resnet18"]


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
        if width < 1:
            raise ValueError(f"width must be >= 1, got {width}")

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
        if width < 1 or depth < 1:
            raise ValueError(f"width and depth must be >= 1, got {width} and {depth}")
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
    layers, cin = [nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU()], width
    for i, stride in enumerate((1, 2, 2, 2)):
        cout = width * 2**i
        layers += [_BasicBlock(cin, cout, stride), _BasicBlock(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*layers)
