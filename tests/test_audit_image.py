"""A mathematical and statistical audit of the image transforms against their docstrings and the catalogue
(docs/guide/transforms.md), checking what the other transform tests do not.

Statistical tests: every test draws with fixed seeds, so its outcome is deterministic; each test of a
distribution is at level ALPHA = 1e-3, i.e. were the code right, a given seed would fail it with probability
1e-3. There are 50 of them: 29 Kolmogorov-Smirnov tests (14 ranged parameters, drawn independently and in a
stratified block, and Posterize's dither), 18 exact binomial tests (6 gates at 3 magnitudes) and 3 chi-square
tests (Posterize's whole bits at two magnitudes, SamplePairing's partners). So new seeds (or a torch whose
generator draws other numbers) fail at least one with probability at most 50 * 1e-3 = 5 % (union bound).

Exact properties are checked on images whose values make bilinear interpolation exact: whole-pixel moves of
any image, and any move of an affine ramp ``a + b * row + c * col`` (bilinear interpolation reproduces an
affine function exactly wherever its four neighbours lie inside the image).
"""

import math

import pytest
import torch
from helpers import gen, tol
from scipy import stats
from transform_cases import images

from augnet.ops import available_backends, tap_mix
from augnet.ops.taps import concat_taps
from augnet.transforms import image as T
from augnet.transforms.base import KINK_STEP, stratified_copies

F64 = torch.float64
ALPHA = 1e-3


# ======================================================================== drawn parameters


def _log(v):
    return v.log()


def _first(v):
    return v[:, 0]


#: (transform, parameter, function of the parameter, its documented distribution at magnitude mu as (low, high))
RANGED = [
    (T.Rotate(), "angle", None, lambda m: (-m * math.pi, m * math.pi)),
    (T.TranslateX(), "shift", None, lambda m: (-0.25 * m, 0.25 * m)),
    (T.TranslateY(max_shift=0.4), "shift", None, lambda m: (-0.4 * m, 0.4 * m)),
    (T.ShearX(), "shear", None, lambda m: (-0.3 * m, 0.3 * m)),
    (T.ShearY(), "shear", None, lambda m: (-0.3 * m, 0.3 * m)),
    (T.Scale(), "zoom", _log, lambda m: (-m * math.log(2), m * math.log(2))),  # log-uniform in [2^-mu, 2^mu]
    (T.Brightness(), "shift", _first, lambda m: (-0.5 * m, 0.5 * m)),
    (T.Contrast(), "factor", None, lambda m: (1 - 0.9 * m, 1 + 0.9 * m)),
    (T.Saturation(), "factor", None, lambda m: (1 - 0.9 * m, 1 + 0.9 * m)),
    (T.Hue(), "angle", None, lambda m: (-m * math.pi, m * math.pi)),
    (T.Sharpness(), "factor", None, lambda m: (1 - 0.9 * m, 1 + 0.9 * m)),
    (T.SamplePairing(), "blend", None, lambda m: (0.0, 0.5 * m)),
    (T.Solarize(min_threshold=0.2), "threshold", None, lambda m: (1 - 0.8 * m, 1.0)),
    (T.Posterize(), "bits", None, lambda m: (0.0, 4 * m)),
]


@pytest.mark.parametrize("stratified", [False, True], ids=["independent", "stratified"])
@pytest.mark.parametrize("t, key, f, support", RANGED, ids=[f"{type(c[0]).__name__}.{c[1]}" for c in RANGED])
def test_ranged_parameters_are_uniform_on_the_documented_range(t, key, f, support, stratified):
    # KS test at level ALPHA of 2000 draws at magnitude 0.6 (inside a stratified block too, where every row must
    # still be uniform on its own), and every draw inside the range.
    x = images(b=500, h=3, w=3)
    mu = 0.6
    if stratified:
        with stratified_copies(4):
            params = t.sample(x, mu, generator=gen(3), copies=4)
    else:
        params = t.sample(x, mu, generator=gen(3), copies=4)
    v = params[key].double()
    v = f(v) if f is not None else v
    low, high = support(mu)
    assert v.min() >= low - 1e-6 and v.max() <= high + 1e-6
    assert stats.kstest(v.numpy(), "uniform", args=(low, high - low)).pvalue > ALPHA


def test_brightness_shift_is_one_number_per_row_and_posterize_dither_is_uniform():
    x = images(b=2000, h=2, w=2)
    shift = T.Brightness().sample(x, 0.7, generator=gen(1))["shift"]
    assert torch.equal(shift, shift[:, :1].expand_as(shift))
    dither = T.Posterize().sample(x, 0.7, generator=gen(1))["dither"].double()
    assert stats.kstest(dither.numpy(), "uniform").pvalue > ALPHA


GATED = [T.HorizontalFlip, T.VerticalFlip, T.Invert, T.Gray, T.AutoContrast, T.Equalize]


@pytest.mark.parametrize("mu", [0.1, 0.5, 0.9])
@pytest.mark.parametrize("cls", GATED)
def test_gates_open_with_probability_mu(cls, mu):
    # Exact binomial test at level ALPHA on 2000 rows; the gates are exactly 0 or 1. One seed per class (the gate
    # is u < mu of the generator's first draws: with one seed for all six, one unlucky seed fails them all; seed 5
    # has 1075 of its first 2000 draws below 0.5, p = 8.6e-4, and 99881 of 200000, p = 0.60).
    x = images(b=2000, h=2, w=2)
    gate = cls().sample(x, mu, generator=gen(10 + GATED.index(cls)))["gate"]
    assert set(gate.unique().tolist()) <= {0.0, 1.0}
    assert stats.binomtest(int(gate.sum()), 2000, mu).pvalue > ALPHA


@pytest.mark.parametrize("cls", GATED)
def test_gates_follow_per_row_magnitudes_and_are_exact_at_the_bounds(cls):
    x = images(b=4, h=2, w=2)
    mu = torch.tensor([0.0, 1.0, 0.0, 1.0] * 50)
    gate = cls().sample(x, mu, generator=gen(2), copies=50)["gate"]
    assert torch.equal(gate, mu)


@pytest.mark.parametrize("mu, stratified", [(0.4, False), (0.7, True)])
def test_posterize_whole_bits_follow_bits_distribution(mu, stratified):
    # Chi-square at level ALPHA of the whole bits removed in 4000 rows against bits_distribution (the
    # catalogue's example: at 0.4, 2 bits in 11 % of rows); inside a stratified block the bit count and its
    # dither are stratified by independent permutations, so the rounding stays unbiased.
    t = T.Posterize()
    x = images(b=1000, h=1, w=1)
    with stratified_copies(4 if stratified else 1):
        k = t.removed_bits(t.sample(x, mu, generator=gen(9), copies=4)).long()
    expected = t.bits_distribution(mu)
    assert sum(expected.values()) == pytest.approx(1.0)
    if mu == 0.4:
        assert expected[2] == pytest.approx(0.1125)
    counts = torch.bincount(k, minlength=len(expected)).tolist()
    assert len(counts) == len(expected)
    assert stats.chisquare(counts, [4000 * expected[i] for i in range(len(expected))]).pvalue > ALPHA


def test_sample_pairing_partners_are_uniform_over_the_other_samples():
    b = 7
    params = T.SamplePairing().sample(images(b=b, h=2, w=2), 1.0, generator=gen(4), copies=600)
    assert torch.equal(params["own"], torch.arange(b * 600) % b)
    offset = (params["partner"] - params["own"]) % b
    counts = torch.bincount(offset, minlength=b).tolist()
    assert counts[0] == 0  # never the sample itself
    assert stats.chisquare(counts[1:]).pvalue > ALPHA


# ======================================================================== geometry


def _apply(t, x, **values):
    """``t`` applied to ``x`` with the given parameter values (the others as ``t`` draws them)."""
    params = t.sample(x, 0.5, generator=gen(0))
    params.update({k: torch.as_tensor(v, dtype=x.dtype).expand(x.shape[0]) for k, v in values.items()})
    return t.apply_transform(x, params)


def _ramp(h, w, a=0.3, b=0.05, c=-0.02):
    """The affine image ``a + b * row + c * col`` (1, 1, H, W), float64, and its function."""
    f = lambda row, col: a + b * row + c * col  # noqa: E731
    rows, cols = torch.meshgrid(torch.arange(h, dtype=F64), torch.arange(w, dtype=F64), indexing="ij")
    return f(rows, cols)[None, None], f, rows, cols


@pytest.mark.parametrize("size", [5, 6])
def test_rotate_by_a_quarter_turn_is_the_counter_clockwise_permutation(size):
    # Positive angles turn the content counter-clockwise on screen (rows down) about the centre (size - 1) / 2:
    # out[i, j] = x[j, size - 1 - i] for +90 degrees and x[size - 1 - j, i] for -90 (what the top of the image
    # shows is its right edge at +90), for odd and even sizes.
    x = torch.rand(2, 3, size, size, dtype=F64, generator=gen(1))
    i, j = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
    out = _apply(T.Rotate(), x, angle=math.pi / 2)
    torch.testing.assert_close(out, x[:, :, j, size - 1 - i], rtol=0, atol=1e-12)
    out = _apply(T.Rotate(), x, angle=-math.pi / 2)
    torch.testing.assert_close(out, x[:, :, size - 1 - j, i], rtol=0, atol=1e-12)
    dot = torch.zeros(1, 1, size, size, dtype=F64)
    dot[..., 0, size // 2] = 1.0  # the middle of the top row, odd size: turned to the middle of the left column
    if size % 2:
        assert _apply(T.Rotate(), dot, angle=math.pi / 2)[0, 0, size // 2, 0] == pytest.approx(1.0)


@pytest.mark.parametrize("h, w", [(21, 21), (17, 26)])
def test_rotate_is_rigid_about_the_centre_and_rotate_back_returns_the_interior(h, w):
    # On an affine ramp, out(p) = ramp(c + R(-theta) (p - c)) in pixel units (y down, c the centre), wherever
    # the read point is inside; rotating back by -theta returns it.
    x, f, rows, cols = _ramp(h, w)
    theta = 0.37
    cy, cx = (h - 1) / 2, (w - 1) / 2
    dy, dx = rows - cy, cols - cx
    # input = [[cos, -sin], [sin, cos]] @ output in (x, y) pixel units: the inverse of a counter-clockwise turn
    rx = cx + math.cos(theta) * dx - math.sin(theta) * dy
    ry = cy + math.sin(theta) * dx + math.cos(theta) * dy
    inside = (dx**2 + dy**2).sqrt() <= min(h, w) / 2 - 2
    t = T.Rotate()
    out = _apply(t, x, angle=theta)
    torch.testing.assert_close(out[0, 0][inside], f(ry, rx)[inside], rtol=0, atol=1e-12)
    back = _apply(t, out, angle=-theta)
    torch.testing.assert_close(back[0, 0][inside], x[0, 0][inside], rtol=0, atol=1e-12)


@pytest.mark.parametrize("s", [1.0, -1.0])
def test_shears_read_at_the_documented_point_about_the_centre(s):
    # ShearX: out(x, y) = in(x + s y, y); ShearY: out(x, y) = in(x, y + s x), centred pixel coordinates.
    # With s = +-1 on odd sizes every read is a whole pixel, and outside reads are 0.
    h, w = 7, 11
    x = torch.rand(2, 2, h, w, dtype=F64, generator=gen(2))
    cy, cx = (h - 1) // 2, (w - 1) // 2
    expected = torch.zeros_like(x)
    for i in range(h):
        for j in range(w):
            jj = j + round(s * (i - cy))
            if 0 <= jj < w:
                expected[..., i, j] = x[..., i, jj]
    torch.testing.assert_close(_apply(T.ShearX(), x, shear=s), expected, rtol=0, atol=1e-12)
    expected = torch.zeros_like(x)
    for i in range(h):
        for j in range(w):
            ii = i + round(s * (j - cx))
            if 0 <= ii < h:
                expected[..., i, j] = x[..., ii, j]
    torch.testing.assert_close(_apply(T.ShearY(), x, shear=s), expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("size", [9, 10])
def test_scale_zooms_about_the_centre(size):
    # zoom z: out(c + d) = in(c + d / z), c = (size - 1) / 2; z > 1 magnifies.
    x, f, rows, cols = _ramp(size, size)
    c = (size - 1) / 2
    t = T.Scale()
    for z in (2.0, 1.5, 0.5):
        out = _apply(t, x, zoom=z)
        ry, rx = c + (rows - c) / z, c + (cols - c) / z
        inside = (ry >= 0) & (ry <= size - 1) & (rx >= 0) & (rx <= size - 1)
        torch.testing.assert_close(out[0, 0][inside], f(ry, rx)[inside], rtol=0, atol=1e-12)
    # whole pixels: zoom 2 on an odd size keeps the centre and spreads it; zoom 1/2 reads every other pixel
    y = torch.rand(1, 1, 9, 9, dtype=F64, generator=gen(3))
    torch.testing.assert_close(_apply(t, y, zoom=2.0)[..., ::2, ::2], y[..., 2:7, 2:7], rtol=0, atol=1e-12)
    assert _apply(t, y, zoom=2.0)[0, 0, 4, 4] == pytest.approx(float(y[0, 0, 4, 4]), abs=1e-12)
    shrunk = _apply(t, y, zoom=0.5)
    torch.testing.assert_close(shrunk[..., 2:7, 2:7], y[..., 0:9:2, 0:9:2], rtol=0, atol=1e-12)
    assert (shrunk[..., :2, :] == 0).all() and (shrunk[..., :, 7:] == 0).all()


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_translate_y_up_by_whole_pixels_and_by_fractions_of_the_height(padding):
    # -3 / 12 of the height moves the content 3 rows up; the bottom rows read rows 12..14: 0, row 11, or rows
    # 11, 10, 9 mirrored about the edge. A fraction of the size is that fraction of H or W in pixels.
    x = torch.rand(2, 3, 12, 7, dtype=F64, generator=gen(4))
    out = _apply(T.TranslateY(padding=padding), x, shift=-3 / 12)
    torch.testing.assert_close(out[..., :-3, :], x[..., 3:, :], rtol=0, atol=1e-12)
    fill = {
        "zeros": torch.zeros_like(x[..., :3, :]),
        "border": x[..., [11] * 3, :],
        "reflection": x[..., [11, 10, 9], :],
    }
    torch.testing.assert_close(out[..., -3:, :], fill[padding], rtol=0, atol=1e-12)
    ramp, f, rows, cols = _ramp(12, 7)
    for t, key in ((T.TranslateX(), "col"), (T.TranslateY(), "row")):
        out = _apply(t, ramp, shift=0.13)
        d = 0.13 * (7 if key == "col" else 12)
        expected = f(rows, cols - d) if key == "col" else f(rows - d, cols)
        read = cols - d if key == "col" else rows - d
        inside = (read >= 0) & (read <= (6 if key == "col" else 11))
        torch.testing.assert_close(out[0, 0][inside], expected[inside], rtol=0, atol=1e-12)


@pytest.mark.parametrize("h, w", [(6, 8), (7, 4)])
def test_flips_are_exact_on_even_and_odd_sizes(h, w):
    # In float64 to 1e-12 (float32 resamples through rounded coordinates: within 1e-6); gate 0 is the image.
    x = torch.rand(2, 3, h, w, generator=gen(5), dtype=F64)
    torch.testing.assert_close(_apply(T.HorizontalFlip(), x, gate=1.0), x.flip(-1), rtol=0, atol=1e-12)
    torch.testing.assert_close(_apply(T.VerticalFlip(), x, gate=1.0), x.flip(-2), rtol=0, atol=1e-12)
    torch.testing.assert_close(_apply(T.VerticalFlip(), x, gate=0.0), x, rtol=0, atol=1e-12)
    y = x.float()
    torch.testing.assert_close(_apply(T.HorizontalFlip(), y, gate=1.0), y.flip(-1), rtol=0, atol=1e-6)


# ======================================================================== colour


def test_colour_maps_at_explicit_numbers():
    # Pure red, green, blue and a grey pixel: Saturation 0 gives the ITU-R BT.601 luma (0.299, 0.587, 0.114)
    # in every channel, Gray the same, Contrast 0 the image's mean luma, Brightness adds, Invert is 1 - x.
    x = torch.tensor([[1.0, 0, 0, 0.5], [0, 1, 0, 0.5], [0, 0, 1, 0.5]], dtype=F64).view(1, 3, 2, 2)
    luma = torch.tensor([0.299, 0.587, 0.114, 0.5], dtype=F64).view(1, 1, 2, 2).expand(1, 3, 2, 2)
    torch.testing.assert_close(_apply(T.Saturation(), x, factor=0.0), luma, rtol=0, atol=1e-15)
    torch.testing.assert_close(_apply(T.Gray(), x, gate=1.0), luma, rtol=0, atol=1e-15)
    mean = (0.299 + 0.587 + 0.114 + 0.5) / 4
    torch.testing.assert_close(_apply(T.Contrast(), x, factor=0.0), torch.full_like(x, mean), rtol=0, atol=1e-15)
    torch.testing.assert_close(_apply(T.Contrast(), x, factor=1.5), 1.5 * x - 0.5 * mean, rtol=0, atol=1e-15)
    shift = {"shift": torch.full((1, 3), -0.25, dtype=F64)}
    torch.testing.assert_close(T.Brightness().apply_transform(x, shift), x - 0.25, rtol=0, atol=0)
    torch.testing.assert_close(_apply(T.Invert(), x, gate=1.0), 1.0 - x, rtol=0, atol=0)


def test_hue_is_a_proper_rotation_about_the_grey_axis_turning_red_towards_green():
    # The 3x3 map is orthogonal with determinant 1, fixes (1, 1, 1), composes by adding angles, keeps each
    # pixel's channel mean (not its luma), and a small positive angle moves red towards green.
    t = T.Hue()
    angles = torch.tensor([0.3, -1.1, 2.5], dtype=F64)
    m = t.taps({"angle": angles}).color[:, 0]  # (3, 3, 4)
    rot, bias = m[..., :3], m[..., 3]
    assert bias.abs().max() == 0
    torch.testing.assert_close(rot @ rot.transpose(1, 2), torch.eye(3, dtype=F64).expand(3, 3, 3))
    torch.testing.assert_close(torch.linalg.det(rot), torch.ones(3, dtype=F64))
    torch.testing.assert_close(rot @ torch.ones(3, dtype=F64), torch.ones(3, 3, dtype=F64))
    both = t.taps({"angle": angles[:1] + angles[1:2]}).color[0, 0, :, :3]
    torch.testing.assert_close(rot[0] @ rot[1], both)
    red = torch.tensor([1.0, 0.0, 0.0], dtype=F64)
    turned = rot[0] @ red
    assert turned[1] > turned[2]
    assert turned.mean() == pytest.approx(1 / 3)
    luma = torch.tensor([0.299, 0.587, 0.114], dtype=F64)
    assert float(luma @ turned) != pytest.approx(0.299, abs=1e-3)  # luma is not kept (see the docstring)


@pytest.mark.parametrize("dtype", [torch.float32, F64])
def test_posterize_clears_the_low_bits_of_every_8_bit_level(dtype):
    # All 256 levels, 0 to 8 bits removed: (255 x) with its k low bits cleared, over 255, exactly.
    levels = torch.arange(256)
    x = (levels.to(dtype) / 255).view(1, 1, 16, 16).expand(9, 1, 16, 16)
    k = torch.arange(9.0)
    out = T._posterize(x, k)
    expected = torch.stack([(levels >> int(b)) << int(b) for b in k]).view(9, 1, 16, 16).to(dtype) / 255
    assert torch.equal(out, expected)


def test_equalize_is_pils_on_each_channel():
    PIL = pytest.importorskip("PIL.Image")
    from PIL import ImageOps

    g = gen(6)
    x8 = torch.randint(0, 256, (3, 2, 12, 10), generator=g, dtype=torch.uint8)
    x8[0] = x8[0] // 8 + 40  # a narrow histogram
    x8[1, 0] = 17  # one level: kept
    x8[1, 1, :6] = 0  # two levels
    x8[1, 1, 6:] = 200
    x = x8.float() / 255
    out = T._equalize(x)
    for n in range(3):
        for c in range(2):
            pil = ImageOps.equalize(PIL.fromarray(x8[n, c].numpy(), mode="L"))
            expected = torch.frombuffer(bytearray(pil.tobytes()), dtype=torch.uint8).view(12, 10).float() / 255
            assert torch.equal(out[n, c], expected), (n, c)
    # a non-decreasing map of the levels, per channel
    for n in range(3):
        for c in range(2):
            order = x[n, c].flatten().argsort()
            assert (out[n, c].flatten()[order].diff() >= 0).all()


# ======================================================================== backends


TAPPED = [
    T.TranslateX(),
    T.TranslateY(padding="reflection"),
    T.Rotate(padding="border"),
    T.ShearX(),
    T.ShearY(padding="reflection"),
    T.Scale(),
    T.HorizontalFlip(),
    T.VerticalFlip(padding="border"),
    T.Brightness(),
    T.Contrast(),
    T.Saturation(),
    T.Hue(),
    T.SamplePairing(),
    T.Invert(),
    T.Gray(),
    T.AutoContrast(),
]


@pytest.mark.parametrize("dtype", [torch.float32, F64])
@pytest.mark.parametrize("t", TAPPED, ids=[type(t).__name__ for t in TAPPED])
def test_cpp_backend_equals_the_reference_and_the_transform(t, dtype):
    # Every tap transform's taps through tap_mix: the C++ backend against the reference (values and input
    # gradients, within the backends' parity tolerance) and against apply_transform (colour maps run there
    # without tap_mix).
    x = images(b=3, h=8, w=7, dtype=dtype)
    if "cpp" not in available_backends(x):
        pytest.skip("the C++ backend is not built here")
    params = t.sample(x, 0.8, generator=gen(7), copies=2)
    n = x.shape[0] * 2
    src, affine, color, weight = concat_taps([t.taps(params)], x, n)
    outs, grads = [], []
    w = torch.randn(n, 3, 8, 7, generator=gen(8), dtype=dtype)
    for backend in ("reference", "cpp"):
        xx = x.clone().requires_grad_()
        out = tap_mix(xx, src, affine, color, weight, padding=t.padding, backend=backend)
        (out * w).sum().backward()
        outs.append(out.detach())
        grads.append(xx.grad)
    torch.testing.assert_close(outs[1], outs[0], **tol("cpp", dtype))
    torch.testing.assert_close(grads[1], grads[0], **tol("cpp", dtype))
    torch.testing.assert_close(t.apply_transform(x, params), outs[0], **tol("cpp", dtype))


# ======================================================================== gradients in the magnitude


SMOOTH = [T.TranslateX, T.TranslateY, T.Rotate, T.ShearX, T.ShearY, T.Scale, T.Brightness, T.Contrast]
SMOOTH += [T.Saturation, T.Hue, T.Sharpness, T.SamplePairing]


@pytest.mark.parametrize("mu", [0.15, 0.85])
@pytest.mark.parametrize("cls", SMOOTH)
def test_magnitude_gradient_is_the_central_difference_with_the_same_draws(cls, mu):
    t = cls()
    x = images(b=3, h=7, w=8, dtype=F64)
    w = torch.randn(6, 3, 7, 8, generator=gen(1), dtype=F64)

    def loss(m):
        return (t(x, m, generator=gen(2), copies=2) * w).sum()

    m = torch.tensor(mu, dtype=F64, requires_grad=True)
    loss(m).backward()
    h = 1e-6
    with torch.no_grad():
        fd = (loss(torch.tensor(mu + h, dtype=F64)) - loss(torch.tensor(mu - h, dtype=F64))) / (2 * h)
    torch.testing.assert_close(m.grad, fd, rtol=1e-6, atol=1e-7)


def _sigmoid_slope(z, temperature):
    s = torch.sigmoid(z / temperature)
    return s * (1 - s) / temperature


@pytest.mark.parametrize("mu", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("cls", GATED)
def test_gated_magnitude_gradient_is_the_relaxed_bernoullis(cls, mu):
    # d/dmu sum(w * out) = sum over rows of sigmoid'((mu - u) / T) / T * sum(w * (mapped - x)), with u the
    # row's uniform draw (the generator's first) and mapped the operation at gate 1.
    t = cls(temperature=0.2)
    x = images(b=3, h=6, w=5, dtype=F64)
    n = 6
    w = torch.randn(n, 3, 6, 5, generator=gen(1), dtype=F64)
    m = torch.tensor(mu, dtype=F64, requires_grad=True)
    (t(x, m, generator=gen(3), copies=2) * w).sum().backward()
    u = torch.rand(n, generator=gen(3), dtype=torch.float32).double()
    xs = x.repeat(2, 1, 1, 1)
    mapped = _apply(t, xs, gate=1.0)
    expected = (_sigmoid_slope(mu - u, 0.2) * ((mapped - xs) * w).sum((1, 2, 3))).sum()
    torch.testing.assert_close(m.grad, expected)


@pytest.mark.parametrize("mu", [0.0, 0.6])
def test_solarize_magnitude_gradient_is_the_relaxation_through_the_drawn_threshold(mu):
    # threshold = 1 - mu (1 - min) u, so d/dmu = sum(w * (1 - min) u sigmoid'((x - t) / T) / T * (1 - 2 x)).
    t = T.Solarize(min_threshold=0.2, temperature=0.15)
    x = images(b=3, h=6, w=5, dtype=F64)
    w = torch.randn(3, 3, 6, 5, generator=gen(1), dtype=F64)
    m = torch.tensor(mu, dtype=F64, requires_grad=True)
    (t(x, m, generator=gen(3)) * w).sum().backward()
    u = torch.rand(3, generator=gen(3), dtype=torch.float32).double().view(3, 1, 1, 1)
    threshold = 1 - mu * 0.8 * u
    expected = (w * 0.8 * u * _sigmoid_slope(x - threshold, 0.15) * (1 - 2 * x)).sum()
    torch.testing.assert_close(m.grad, expected)


@pytest.mark.parametrize("mu", [0.0, 0.55])
def test_posterize_magnitude_gradient_is_the_interpolation_through_the_drawn_bits(mu):
    # bits = mu * max_bits * u, so d/dmu = max_bits * u * sum(w * (P(x, floor + 1) - P(x, floor))).
    t = T.Posterize(max_bits=4)
    x = images(b=3, h=6, w=5, dtype=F64)
    w = torch.randn(3, 3, 6, 5, generator=gen(1), dtype=F64)
    m = torch.tensor(mu, dtype=F64, requires_grad=True)
    (t(x, m, generator=gen(3)) * w).sum().backward()
    u = torch.rand(3, generator=gen(3), dtype=torch.float32).double()
    low = torch.floor(mu * 4 * u)
    step = T._posterize(x, low + 1) - T._posterize(x, low)
    expected = (4 * u * (w * step).sum((1, 2, 3))).sum()
    torch.testing.assert_close(m.grad, expected)


@pytest.mark.parametrize("cls", SMOOTH)
def test_magnitude_gradient_at_zero_is_the_one_sided_derivative(cls):
    # At magnitude 0 a warp (kink_at_zero) documents the one-sided difference (T(KINK_STEP) - T(0)) / KINK_STEP
    # with the same draws; the others are smooth there, and their derivative is the right derivative
    # (a forward difference of step 1e-7 in float64).
    t = cls()
    x = images(b=3, h=7, w=8, dtype=F64)
    w = torch.randn(6, 3, 7, 8, generator=gen(1), dtype=F64)

    def loss(m):
        return (t(x, m, generator=gen(2), copies=2) * w).sum()

    m = torch.tensor(0.0, dtype=F64, requires_grad=True)
    value = loss(m)
    value.backward()
    with torch.no_grad():
        assert float(value) == pytest.approx(float(loss(torch.tensor(0.0, dtype=F64))), abs=1e-12)
        if cls.kink_at_zero:
            expected = (loss(torch.tensor(KINK_STEP, dtype=F64)) - value) / KINK_STEP
            torch.testing.assert_close(m.grad, expected, rtol=1e-9, atol=1e-9)
        else:
            expected = (loss(torch.tensor(1e-7, dtype=F64)) - value) / 1e-7
            torch.testing.assert_close(m.grad, expected, rtol=1e-5, atol=1e-6)


# ======================================================================== docstrings


def test_hue_docstring_names_the_invariant_it_keeps():
    # Hue keeps the channel mean, not the luma that the docstrings call the grey level: pure red turned by
    # 2 pi / 3 is pure green, luma 0.299 -> 0.587. The docstring said "grey levels are unchanged".
    red = torch.tensor([1.0, 0.0, 0.0], dtype=F64).view(1, 3, 1, 1)
    green = _apply(T.Hue(), red, angle=2 * math.pi / 3)
    luma = torch.tensor(T.LUMA, dtype=F64)
    assert float(luma @ green.flatten()) == pytest.approx(0.587)
    doc = " ".join(T.Hue.__doc__.split())
    assert "grey levels are unchanged" not in doc and "channel mean" in doc and "not its luma" in doc


def test_solarize_docstring_says_black_pixels_are_never_inverted():
    # The lowest thresholds leave black (0) pixels black (the comparison is strict, and a drawn threshold is
    # above min_threshold): the docstring said the whole image is inverted at threshold 0.
    black = torch.tensor([0.0, 0.5], dtype=F64).view(1, 1, 1, 2)
    assert _apply(T.Solarize(), black, threshold=1e-9).flatten().tolist() == [0.0, 0.5]
    doc = " ".join(T.Solarize.__doc__.split())
    assert "whole image is inverted" not in doc and "black pixels, at 0, never are" in doc


def test_the_markdown_files_the_image_docstrings_name_exist():
    # The package docstring pointed at DESIGN.md for the ranges, a file the repository does not have.
    import pathlib
    import re
    import sys

    root = pathlib.Path(__file__).resolve().parents[1]
    import augnet.transforms.audio
    import augnet.transforms.signal  # noqa: F401  (its docstring named DESIGN.md too)

    image = [f"augnet.transforms.image{n}" for n in ("", ".warps", ".color", ".autoaugment", ".pairing", "._common")]
    for name in [*image, "augnet.transforms.signal", "augnet.transforms.audio"]:
        module = sys.modules[name]
        for path in re.findall(r"[\w./-]+\.md\b", module.__doc__ or ""):
            assert (root / path).exists() or any(root.glob(f"docs/**/{path}")), (name, path)
