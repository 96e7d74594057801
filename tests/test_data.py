"""The generated data: the rotation task (sprites and glyphs), the sinusoids."""

import math

import pytest
import torch

from augnet.data import (
    SPRITE_GRID,
    make_sprite_pair,
    render_glyphs,
    render_sprites,
    rotated_glyphs,
    rotated_sprites,
    sinusoids,
)
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


# ------------------------------------------------------------------ sprites


def test_sprites_shapes_range_balance_and_seeds():
    x, y = rotated_sprites(2000, seed=3)
    assert x.shape == (2000, 3, 32, 32) and x.dtype == torch.float32 and y.dtype == torch.int64
    assert x.min() >= 0 and x.max() <= 1
    assert torch.bincount(y, minlength=4).min() > 400
    a, b = rotated_sprites(50, seed=1), rotated_sprites(50, seed=1)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[0], rotated_sprites(50, seed=2)[0])
    assert rotated_sprites(3, size=20)[0].shape == (3, 3, 20, 20)


def test_sprites_are_coloured_filled_figures_in_one_piece():
    for pair in range(4):
        cells, palettes = make_sprite_pair(pair)
        assert cells.shape == (2, SPRITE_GRID, SPRITE_GRID) and palettes.shape[1:] == (6, 3)
        assert torch.equal(palettes[:, 0], torch.zeros(2, 3))  # cell value 0 is the black background
        assert (palettes[:, 1:].amax(-1) > 0.5).all()  # every part colour is bright
        for sprite in cells:
            assert len(torch.unique(sprite[sprite > 0])) >= 4  # several colours
            # filled regions, not strokes: most occupied cells have at least two occupied neighbours
            occ = torch.nn.functional.pad(sprite > 0, (1, 1, 1, 1)).int()
            neighbours = occ[:-2, 1:-1] + occ[2:, 1:-1] + occ[1:-1, :-2] + occ[1:-1, 2:]
            assert int((sprite > 0).sum()) >= 40 and float((neighbours[sprite > 0] >= 2).double().mean()) > 0.7
            # one 4-connected figure: a flood fill from one cell reaches every occupied cell
            occupied = {(int(r), int(c)) for r, c in (sprite > 0).nonzero()}
            todo, seen = [next(iter(occupied))], set()
            while todo:
                r, c = todo.pop()
                if (r, c) in seen or (r, c) not in occupied:
                    continue
                seen.add((r, c))
                todo += [(r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)]
            assert seen == occupied
    # different pairs are different figures
    assert not torch.equal(make_sprite_pair(0)[0], make_sprite_pair(1)[0])


def test_sprites_have_no_symmetry_a_flip_or_quarter_turn_could_mimic():
    for pair in range(4):
        cells, palettes = make_sprite_pair(pair)
        img = render_sprites(torch.tensor([0, 1]), torch.zeros(2), cells, palettes, size=32)
        for other in (img.flip(-1), img.flip(-2), img.flip(-1, -2), img.transpose(-1, -2), img.rot90(1, (-2, -1))):
            assert ((other - img).abs().sum(1) > 0.1).double().mean(dim=(-1, -2)).min() > 0.1
        # the two sprites of a pair are told apart by their shape, not only by their colours
        grey = img.mean(1) > 0
        assert (grey[0] != grey[1]).double().mean() > 0.05


def test_sprite_labels_follow_sprite_and_angle_and_down_is_a_half_turn():
    x, y, angle = rotated_sprites(400, seed=0, return_angle=True)
    up = y < 2
    wrapped = torch.remainder(angle + math.pi, 2 * math.pi) - math.pi
    assert (wrapped[up].abs() <= math.pi / 4).all() and (wrapped[~up].abs() >= 3 * math.pi / 4).all()
    cells, palettes = make_sprite_pair(0)
    torch.testing.assert_close(x, render_sprites(y % 2, angle, cells, palettes, size=32))
    # on an even grid a half turn of the points of the pixels is exact: "down" is "up" flipped both ways
    a = torch.tensor([0.3, -0.6])
    upright = render_sprites(torch.tensor([0, 1]), a, cells, palettes)
    torch.testing.assert_close(render_sprites(torch.tensor([0, 1]), a + math.pi, cells, palettes),
                               upright.flip(-1, -2), atol=0.07, rtol=0)  # fmt: skip


def test_sprite_rendering_angle_agrees_with_the_rotate_transform():
    cells, palettes = make_sprite_pair(1)
    sprite = torch.tensor([0, 1])
    a, b = torch.tensor([0.2, -0.4]), torch.tensor([0.5, 0.6])
    base = render_sprites(sprite, a, cells, palettes)
    rotate = T.Rotate()
    params = rotate.sample(base, 0.5)
    params["angle"] = b
    turned = rotate.apply_transform(base, params)
    same = (turned - render_sprites(sprite, a + b, cells, palettes)).abs().mean()
    wrong_way = (turned - render_sprites(sprite, a - b, cells, palettes)).abs().mean()
    assert same < 0.5 * wrong_way


@pytest.mark.parametrize(
    "kwargs", [dict(n=-1), dict(n=2.5), dict(n=4, size=4), dict(n=4, pair=-1), dict(n=4, pair=1.5)]
)
def test_sprites_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        rotated_sprites(**kwargs)


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


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(freqs=(2.0, 4.0, 2.0)), "freqs must be distinct"),
        (dict(freqs=(2.0, -2.0)), "f and -f are one frequency"),
        (dict(sfreq=10.0), "reach the Nyquist frequency sfreq / 2 = 5 Hz"),  # 8 Hz + 0.5 jitter
        (dict(freqs=(2.0, 4.5), sfreq=10.0), "reach the Nyquist"),  # 4.5 + 0.5 jitter = 5
    ],
)
def test_sinusoids_whose_classes_cannot_be_told_apart_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        sinusoids(4, **kwargs)
    assert sinusoids(4, freqs=(2.0, 4.0), sfreq=10.0)[0].shape == (4, 1, 100)  # 4.5 Hz < 5 Hz: fine
    assert sinusoids(4, freqs=(2.0, 3.0), jitter=0.5)[0].shape == (4, 1, 1000)  # bands that touch: fine


@pytest.mark.parametrize(
    ("freqs", "match"),
    [((2.0, 2.5), r"2 and 2\.5 Hz are closer than 2 x jitter = 1 Hz"), ((6.0, -2.0, 2.9), r"2 and 2\.9 Hz")],
)
def test_sinusoids_of_overlapping_classes_say_so(freqs, match):
    # A task with a Bayes error above 0 may be wanted: a warning, and the signals as asked.
    with pytest.warns(UserWarning, match=match):
        _, y, f = sinusoids(400, freqs=freqs, jitter=0.5, return_freq=True)
    assert ((f - torch.tensor(freqs, dtype=torch.float64)[y]).abs() <= 0.5).all()


def test_sinusoids_refuse_an_unordered_set_of_frequencies():
    with pytest.raises(TypeError, match=r"ordered sequence \(class k is freqs\[k\]\), got the set"):
        sinusoids(4, freqs={4.0, 2.0})


@pytest.mark.parametrize("make", [lambda g: rotated_glyphs(2, generator=g), lambda g: rotated_sprites(2, generator=g),
                                  lambda g: sinusoids(2, generator=g)])  # fmt: skip
def test_a_generator_that_is_not_one_is_refused(make):
    with pytest.raises(TypeError, match=r"generator must be a torch\.Generator or None, got int"):
        make(5)
    x = make(torch.Generator().manual_seed(0))[0]
    assert torch.equal(x, make(torch.Generator().manual_seed(0))[0])


@pytest.mark.parametrize(
    ("render", "args", "error", "match"),
    [
        ("glyphs", (torch.tensor([2]), torch.zeros(1)), ValueError, r"glyph must hold indices in \[0, 2\), got \[2\]"),
        ("sprites", (torch.tensor([-1]), torch.zeros(1)), ValueError, r"sprite must hold indices in \[0, 2\)"),
        ("sprites", (torch.tensor([0, 1]), torch.zeros(1)), ValueError, r"one per sprite, got \(1,\) for 2"),
        ("glyphs", (torch.tensor([0.0]), torch.zeros(1)), TypeError, r"glyph must be a \(B,\) integer tensor"),
        ("glyphs", (torch.tensor([0]), torch.zeros(1), 0), ValueError, "size must be an int >= 1, got 0"),
    ],
)
def test_the_renderers_refuse_what_they_cannot_draw(render, args, error, match):
    # (Were: sprite -1 drawn as sprite 1, one angle broadcast to every sprite, an IndexError, a reshape error.)
    cells, palettes = make_sprite_pair(0)
    with pytest.raises(error, match=match):
        if render == "glyphs":
            render_glyphs(*args)
        else:
            render_sprites(args[0], args[1], cells, palettes, *args[2:])


@pytest.mark.parametrize(
    "make", [lambda: rotated_sprites(2, return_angle="no"), lambda: rotated_glyphs(2, return_angle=1),
             lambda: sinusoids(2, return_freq="yes")],
)  # fmt: skip
def test_return_flags_must_be_bools(make):
    with pytest.raises(TypeError, match=r"return_(angle|freq) must be True or False"):
        make()
