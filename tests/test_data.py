"""The generated rotation task."""

import math

import pytest
import torch

from augnet.data import render_glyphs, rotated_glyphs, sinusoids
from augnet.transforms import image as T


def test_shapes_range_and_balance():
    x, y = rotated_glyphs(2000, size=24, seed=3)
    assert x.shape == (2000, 1, 24, 24) and x.dtype == torch.float32 and y.dtype == torch.int64
    assert x.min() >= 0 and x.max() <= 1
    counts = torch.bincount(y, minlength=4)
    assert counts.min() > 400


def test_seeded_and_reproducible():
    a, b = rotated_glyphs(50, seed=1), rotated_glyphs(50, seed=1)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[0], rotated_glyphs(50, seed=2)[0])


def test_down_classes_are_the_up_classes_turned_half_a_turn():
    glyph = torch.tensor([0, 1, 0, 1])
    angle = torch.tensor([0.3, -0.7, 0.0, 0.78])
    up = render_glyphs(glyph, angle, size=20)
    down = render_glyphs(glyph, angle + math.pi, size=20)
    torch.testing.assert_close(down, up.flip(-1, -2), atol=1e-5, rtol=0)


def test_glyphs_are_not_symmetric():
    img = render_glyphs(torch.tensor([0, 1]), torch.zeros(2), size=28)
    for flipped in (img.flip(-1), img.flip(-2), img.flip(-1, -2), img.transpose(-1, -2)):
        assert (flipped - img).abs().mean() > 0.05


def test_rendering_angle_agrees_with_the_rotate_transform():
    # Rendering at a + b is rotating the rendering at a by b (counter-clockwise both).
    glyph = torch.tensor([0, 1])
    a, b = torch.tensor([0.2, -0.4]), torch.tensor([0.5, 0.6])
    base = render_glyphs(glyph, a, size=32)
    rotate = T.Rotate()
    params = rotate.sample(base, 0.5)
    params["angle"] = b
    turned = rotate.apply_transform(base, params)
    same = (turned - render_glyphs(glyph, a + b, size=32)).abs().mean()
    wrong_way = (turned - render_glyphs(glyph, a - b, size=32)).abs().mean()
    assert same < 0.03 < wrong_way


def test_labels_follow_glyph_and_angle():
    x, y, angle = rotated_glyphs(400, size=20, seed=0, return_angle=True)
    up = y < 2
    wrapped = torch.remainder(angle + math.pi, 2 * math.pi) - math.pi  # in [-pi, pi)
    assert (wrapped[up].abs() <= math.pi / 4).all()
    assert (wrapped[~up].abs() >= 3 * math.pi / 4).all()
    torch.testing.assert_close(x, render_glyphs(y % 2, angle, size=20))


@pytest.mark.parametrize("n, size", [(-1, 28), (2.5, 28), (4, 4)])
def test_bad_arguments(n, size):
    with pytest.raises(ValueError):
        rotated_glyphs(n, size)


# ------------------------------------------------------------------ sinusoids


def test_sinusoids_shapes_and_labels_follow_the_frequency():
    x, y, f = sinusoids(400, seed=1, return_freq=True)
    assert x.shape == (400, 1, 1000) and x.dtype == torch.float32
    base = torch.tensor([2.0, 4.0, 6.0, 8.0], dtype=torch.float64)[y]
    assert ((f - base).abs() <= 0.5).all() and (f - base).abs().max() > 0.45
    assert torch.bincount(y, minlength=4).min() > 70


def test_sinusoids_spectral_peak_is_the_drawn_frequency():
    x, _, f = sinusoids(50, seed=2, noise=0.0, return_freq=True)
    spectrum = torch.fft.rfft(x[:, 0].double(), dim=-1).abs()
    peak = torch.fft.rfftfreq(1000, 1 / 100.0, dtype=torch.float64)[spectrum.argmax(-1)]
    assert ((peak - f).abs() <= 0.05 + 1e-9).all()  # within half a frequency bin (0.1 Hz)


def test_sinusoids_noise_level():
    clean = sinusoids(20, seed=3, noise=0.0)[0]
    noisy = sinusoids(20, seed=3, noise=0.5)[0]
    assert abs(float((noisy - clean).std()) - 0.5) < 0.02


@pytest.mark.parametrize("kwargs", [dict(n=-1), dict(n=4, sfreq=0.0), dict(n=4, noise=-1.0)])
def test_sinusoids_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        sinusoids(**kwargs)
