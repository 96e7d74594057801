"""The Lie derivative (Gruver et al., ICLR 2023): exact zeros, known slopes, central finite differences."""

import math

import pytest
import torch
from helpers import gen
from torch import nn

import augnet
from augnet.probes import lie_derivative
from augnet.probes.families import family
from augnet.probes.lie import transform_derivative
from augnet.transforms import image as T

F64 = torch.float64


class Pixel(nn.Module):
    """Reads one pixel of channel 0: the model whose slope along a family is the image's derivative there."""

    def __init__(self, row, col):
        super().__init__()
        self.row, self.col = row, col

    def forward(self, x):
        return x[:, :1, self.row, self.col]


def ramp(a, b, c=5.0, size=15):
    """a * cx + b * cy + c, with (cx, cy) the pixel's centred coordinates (y down): bilinear warps are exact on it."""
    cy, cx = torch.meshgrid(torch.arange(size, dtype=F64), torch.arange(size, dtype=F64), indexing="ij")
    centre = (size - 1) / 2
    return (a * (cx - centre) + b * (cy - centre) + c).expand(1, 3, size, size).clone()


@pytest.mark.parametrize(
    ("transform", "slope"),
    [
        # Rotation by t: the content at (cx, cy) comes from (cos t cx - sin t cy, sin t cx + cos t cy).
        (T.Rotate(), lambda a, b, cx, cy: -a * cy + b * cx),
        # A shift by t pixels to the right: the value at cx comes from cx - t.
        (T.TranslateX(), lambda a, b, cx, cy: -a),
        (T.TranslateY(), lambda a, b, cx, cy: -b),
        # A zoom by e^t: the value at p comes from p e^-t.
        (T.Scale(), lambda a, b, cx, cy: -(a * cx + b * cy)),
        # ShearX: the value at (cx, cy) comes from (cx + t cy, cy).
        (T.ShearX(), lambda a, b, cx, cy: a * cy),
        (T.Brightness(), lambda a, b, cx, cy: 1.0),
        (T.Contrast(), lambda a, b, cx, cy: a * cx + b * cy),  # f x + (1 - f) mean, and the mean is c
    ],
)
def test_the_slope_of_a_pixel_of_a_ramp_is_known(transform, slope):
    a, b = 0.7, -0.4
    x = ramp(a, b)
    for row, col in ((7, 7), (4, 10), (9, 5)):
        cx, cy = col - 7, row - 7
        out = lie_derivative(Pixel(row, col).double(), x, transform, return_derivative=True)
        got = float(out["derivative"]["logits"][0, 0])
        assert got == pytest.approx(slope(a, b, cx, cy), abs=1e-9), (row, col)
        assert out["lee"]["logits"].item() == pytest.approx(abs(slope(a, b, cx, cy)), abs=1e-9)
    assert out["unit"] == family(transform).unit


def test_an_exactly_invariant_model_gives_zero():
    from augnet.probes import lie

    zero = 1e-12 if lie._warps_differentiate_twice() else 1e-10  # autograd, or central differences (torch 2.11)
    g = gen(0)
    x = torch.rand(6, 3, 12, 12, generator=g, dtype=F64)
    channel_sum = nn.Sequential(nn.Conv2d(3, 1, 1, bias=False), nn.Flatten()).double()
    nn.init.ones_(channel_sum[0].weight)
    # A hue rotation turns colours about the grey axis: the sum of the channels does not move.
    assert lie_derivative(channel_sum, x, T.Hue())["mean"]["logits"] < zero
    assert lie_derivative(channel_sum, x, T.Saturation())["mean"]["logits"] > 1e-3  # but saturation moves it
    # The sum of an image with a zero border is invariant to a horizontal shift (the symmetric derivative's
    # central differences telescope): exactly 0, while a weighted sum is not.
    bordered = torch.nn.functional.pad(x[:, :, 2:-2, 2:-2], (2, 2, 2, 2))
    total = nn.Sequential(nn.Flatten(), nn.Linear(3 * 144, 1, bias=False)).double()
    nn.init.ones_(total[1].weight)
    assert lie_derivative(total, bordered, T.TranslateX())["mean"]["logits"] < zero
    nn.init.normal_(total[1].weight, generator=gen(1))
    assert lie_derivative(total, bordered, T.TranslateX())["mean"]["logits"] > 1e-2


def test_a_pointwise_map_is_exactly_equivariant_to_every_warp():
    torch.manual_seed(0)
    x = torch.rand(4, 3, 10, 10, generator=gen(2), dtype=F64)
    pointwise = nn.Sequential(nn.Conv2d(3, 5, 1, bias=False)).double()  # a bias map meets the zero padding
    for transform in (T.Rotate(), T.TranslateY(), T.ShearX(), T.Scale()):
        out = lie_derivative(pointwise, x, transform, layers="0")
        assert out["equivariant"] == {"0": True}
        assert out["mean"]["0"] < 1e-12, type(transform).__name__
        invariant = lie_derivative(pointwise, x, transform, layers="0", equivariant=False)
        assert invariant["mean"]["0"] > 1e-2  # its maps move with the image
    # A 3x3 convolution is equivariant to shifts, not exactly to rotations of a pixel grid.
    conv = nn.Sequential(nn.Conv2d(3, 5, 3, padding=1)).double()
    rotated = lie_derivative(conv, x, T.Rotate(), layers="0")["mean_relative"]["0"]
    assert rotated > 1e-3


def smooth_net():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 6, 3, padding=1), nn.Tanh(), nn.AvgPool2d(2), nn.Conv2d(6, 4, 3), nn.Tanh(), nn.Flatten()
    ).double()


def warped(transform, x, t):
    """``g_t x`` through the transform's own call, with its parameter set to ``t``."""
    fam = family(transform)
    params = dict(transform.sample(x, torch.tensor(1.0, dtype=F64), generator=gen(0)))
    params[fam.param] = fam.value(torch.full((len(x),), t, dtype=F64), params[fam.param], tuple(x.shape[-2:]))
    return transform(x, 1.0, params=params)


def central(f, h=1e-4):
    """The central difference of ``f`` at 0, Richardson-extrapolated: ``2 D(h / 2) - D(h)``.

    A bilinear warp has a kink at t = 0 (every pixel sampled at its centre): ``f`` is smooth on each side,
    with different second derivatives, so the plain central difference ``D(h)`` converges only as O(h)
    (an error of about 20 h here); the extrapolated one as O(h^2). For a smooth ``f`` both agree.
    """

    def d(step):
        return (f(step) - f(-step)) / (2 * step)

    return 2 * d(h / 2) - d(h)


@pytest.mark.parametrize("transform", [T.Rotate(), T.TranslateX(), T.ShearY(), T.Scale(), T.Hue(), T.Contrast()])
def test_agrees_with_a_central_finite_difference(transform):
    net = smooth_net()
    x = torch.rand(5, 3, 12, 12, generator=gen(3), dtype=F64)
    out = lie_derivative(net, x, transform, layers=["1", "5"], equivariant=False, return_derivative=True)
    with torch.no_grad():
        for layer, stop in (("1", 2), ("5", 6)):
            fd = central(lambda t, stop=stop: net[:stop](warped(transform, x, t)))
            torch.testing.assert_close(out["derivative"][layer], fd, rtol=1e-5, atol=1e-6)
    assert out["mode"] == "forward"
    if not transform.kink_at_zero:  # a colour map is smooth: the plain central difference agrees too
        with torch.no_grad():
            plain = (net(warped(transform, x, 1e-6)) - net(warped(transform, x, -1e-6))) / 2e-6
        torch.testing.assert_close(out["derivative"]["5"], plain, rtol=1e-5, atol=1e-8)


def test_the_equivariant_derivative_agrees_with_a_finite_difference_of_the_warped_back_map():
    net = smooth_net()
    x = torch.rand(3, 3, 12, 12, generator=gen(4), dtype=F64)
    out = lie_derivative(net, x, T.Rotate(), layers="1", return_derivative=True)
    head = net[:2]
    with torch.no_grad():
        fd = central(lambda t: warped(T.Rotate(), head(warped(T.Rotate(), x, t)), -t))
    torch.testing.assert_close(out["derivative"]["1"], fd, rtol=1e-5, atol=1e-6)


def test_transform_derivative_is_the_symmetric_derivative_of_the_warp():
    x = torch.rand(2, 3, 9, 9, generator=gen(5), dtype=F64)
    for transform in (T.Rotate(), T.TranslateX(), T.Scale(), T.ShearX(), T.Brightness(), T.Saturation()):
        fd = central(lambda t, transform=transform: warped(transform, x, t))
        torch.testing.assert_close(transform_derivative(transform, x), fd, rtol=1e-6, atol=1e-6)


def test_batches_attention_and_augnets():
    torchvision = pytest.importorskip("torchvision")
    x = torch.rand(10, 3, 16, 16, generator=gen(6))
    net = smooth_net().float()
    whole = lie_derivative(net, x, T.Rotate(), ["1", "5"], batch_size=10)
    parts = lie_derivative(net, x, T.Rotate(), ["1", "5"], batch_size=3)
    for layer in ("1", "5"):
        torch.testing.assert_close(parts["lee"][layer], whole["lee"][layer], rtol=1e-5, atol=1e-7)
    # A vision transformer: PyTorch's fused attention has no forward-mode rule; the math one is used.
    torch.manual_seed(0)
    vit = torchvision.models.VisionTransformer(16, 8, 1, 2, 16, 32, num_classes=4).double()
    xd = x.double()
    out = lie_derivative(vit, xd, T.Rotate(), "encoder", return_derivative=True)
    assert out["mode"] == "forward_math"
    with torch.no_grad():
        fd = central(lambda t: vit.encoder(_tokens(vit, warped(T.Rotate(), xd, t))), h=1e-5)
    torch.testing.assert_close(out["derivative"]["encoder"], fd, rtol=1e-5, atol=1e-6)
    # An AugNet whose augmentation is the identity has its trunk's Lie derivative (through tap_mix's
    # reference backend and the double-backward trick).
    trunk = smooth_net().float()
    model = augnet.AugNet(trunk, augnet.AugmentationLayer([T.Rotate()], init_magnitude=0.0)).eval()
    from augnet.probes import lie

    if not lie._warps_differentiate_twice():  # torch 2.11: neither forward mode nor double backward of a warp
        with pytest.raises(RuntimeError, match=r"cannot differentiate AugNet.*grid_sample's backward"):
            lie_derivative(model, x, T.Rotate(), ["logits", "trunk.1"], copies=2)
        return
    through = lie_derivative(model, x, T.Rotate(), ["logits", "trunk.1"], copies=2)
    alone = lie_derivative(trunk, x, T.Rotate(), ["5", "1"])
    # Forward mode where torch has its rule through the warp (torch 2.15), else the double-backward trick (2.14).
    assert through["mode"] in ("forward", "double_backward")
    torch.testing.assert_close(through["lee"]["logits"], alone["lee"]["5"], rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(through["lee"]["trunk.1"], alone["lee"]["1"], rtol=1e-4, atol=1e-6)


def _tokens(vit, inputs):
    tokens = vit._process_input(inputs)
    cls = vit.class_token.expand(len(tokens), -1, -1)
    return torch.cat([cls, tokens], dim=1)


def test_bad_input_and_no_side_effects():
    net = smooth_net().float().train()
    x = torch.rand(4, 3, 12, 12, generator=gen(7))
    before = {k: v.clone() for k, v in net.state_dict().items()}
    lie_derivative(net, x, T.Rotate())
    assert net.training and all(torch.equal(v, before[k]) for k, v in net.state_dict().items())
    assert all(p.grad is None for p in net.parameters())
    with pytest.raises(ValueError, match=r"HorizontalFlip is not a continuous family.*Rotate"):
        lie_derivative(net, x, T.HorizontalFlip())
    with pytest.raises(TypeError, match="augnet image transform"):
        lie_derivative(net, x, lambda b, m: b)
    with pytest.raises(ValueError, match="reduce"):
        lie_derivative(net, x, T.Rotate(), reduce="max")
    with pytest.raises(ValueError, match="not a feature map"):
        lie_derivative(net, x, T.Rotate(), "5", equivariant=True)
    for truthy in (1, 1.0, "yes", None):  # 1 == True, but 1 is not the flag: refused, not read as False
        with pytest.raises(ValueError, match="equivariant must be True, False or 'auto'"):
            lie_derivative(net, x, T.Rotate(), "1", equivariant=truthy)
    with pytest.raises(ValueError, match="Brightness is a colour map, not a warp"):
        lie_derivative(net, x, T.Brightness(), "1", equivariant=True)
    with pytest.raises(ValueError, match="4-D"):
        lie_derivative(net, x[0], T.Rotate())
    assert math.isfinite(lie_derivative(net, x, T.Rotate(), "1", reduce="mean")["mean"]["1"])


_FRESH_PROCESS = """
import warnings
import torch
from torch import nn
from augnet.probes import lie_derivative
from augnet.transforms import image as T


class Loud(nn.Module):
    def forward(self, x):
        warnings.warn("the model's own notice", FutureWarning)
        return x.mean((2, 3))


warnings.simplefilter("error", FutureWarning)
try:
    lie_derivative(Loud(), torch.rand(2, 1, 8, 8), T.Rotate())
except FutureWarning as e:
    print("raised:", e)
warnings.simplefilter("ignore", FutureWarning)
lie_derivative(Loud(), torch.rand(2, 1, 8, 8), T.Rotate())
warnings.simplefilter("error", FutureWarning)
try:
    lie_derivative(nn.Flatten(), torch.rand(2, 1, 8, 8), T.Rotate())
    print("quiet")
except FutureWarning as e:
    print("raised:", e)
"""


def test_forward_mode_setup_raises_no_torch_deprecation_but_passes_the_model_warnings_on():
    # Forward mode loads torch's decompositions once per process, which warns (torch 2.14+) that torch.jit.script
    # is deprecated: a notice about torch's internals. A fresh process, so that the load happens in the probe.
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _FRESH_PROCESS], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["raised: the model's own notice", "quiet"], proc.stdout


@pytest.mark.parametrize("transform", [T.Rotate(), T.TranslateX(), T.TranslateY(), T.ShearX(), T.Scale(), T.Hue(),
                                       T.Contrast(), T.Brightness()])
def test_the_difference_route_of_older_torch_agrees_with_autograd(transform, monkeypatch):
    # torch 2.11 cannot differentiate grid_sample's backward ("derivative for aten::grid_sampler_2d_backward is not
    # implemented"): there the derivative of the warp is a central difference, which must give what autograd gives.
    from augnet.probes import lie

    if not lie._warps_differentiate_twice():
        pytest.skip("this torch has only the difference route (checked by the known slopes above)")
    x = torch.rand(3, 3, 24, 20, generator=gen(2), dtype=F64)
    exact = transform_derivative(transform, x)
    monkeypatch.setattr(lie, "_warps_differentiate_twice", lambda: False)
    by_difference = transform_derivative(transform, x)
    assert not torch.equal(by_difference, exact)  # the other route ran
    torch.testing.assert_close(by_difference, exact, rtol=1e-7, atol=1e-7 * float(exact.abs().max()))
