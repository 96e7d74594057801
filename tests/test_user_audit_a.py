"""A user's audit of augnet.data, augnet.losses and augnet.regularizers: what was silently wrong or a raw error."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from augnet.data import (
    digits,
    make_sprite_pair,
    render_glyphs,
    render_sprites,
    rotated_glyphs,
    rotated_sprites,
    sinusoids,
)
from augnet.layers import AugmentationLayer
from augnet.losses import EquivarianceLoss
from augnet.regularizers import selective_regularizer
from augnet.transforms import image as T

INDEX, ANGLE = torch.tensor([1, 0, 1]), torch.tensor([0.2, -1.0, 2.5])


def test_the_renderers_draw_a_uint8_index_as_its_int64_one():
    # A uint8 glyph index was read as a mask by torch's indexing: every image drew glyph 1 (and sprites an IndexError).
    cells, palettes = make_sprite_pair(0)
    assert torch.equal(render_glyphs(INDEX.to(torch.uint8), ANGLE, 16), render_glyphs(INDEX, ANGLE, 16))
    want = render_sprites(INDEX, ANGLE, cells, palettes, 16)
    assert torch.equal(render_sprites(INDEX.to(torch.uint8), ANGLE, cells, palettes, 16), want)


def test_render_sprites_reads_uint8_cells_as_their_int64_ones():
    cells, palettes = make_sprite_pair(0)  # uint8 cells were read as masks by torch's indexing: an IndexError
    want = render_sprites(INDEX, ANGLE, cells, palettes, 16)
    assert torch.equal(render_sprites(INDEX, ANGLE, cells.to(torch.uint8), palettes, 16), want)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_the_renderers_refuse_angles_that_are_not_finite(bad):
    # Were NaN images (glyphs) and black ones (sprites), silently.
    angle = torch.tensor([0.0, bad, 1.0])
    cells, palettes = make_sprite_pair(0)
    with pytest.raises(ValueError, match=r"angle must hold finite radians, got \[(nan|inf|-inf)\]"):
        render_glyphs(INDEX, angle)
    with pytest.raises(ValueError, match=r"angle must hold finite radians"):
        render_sprites(INDEX, angle, cells, palettes)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(width=-0.1), ValueError, r"width must be a finite number >= 0, got -0.1"),  # was blank images
        (dict(width=float("nan")), ValueError, r"width must be a finite number >= 0, got nan"),  # was NaN images
        (dict(width="0.1"), TypeError, r"width must be a finite number >= 0, got '0.1'"),  # was Python's TypeError
        (dict(extent=0.0), ValueError, r"extent must be a finite number > 0, got 0.0"),  # was NaN images
        (dict(extent=-0.42), ValueError, r"extent must be a finite number > 0, got -0.42"),  # was mirrored figures
        (dict(extent=float("inf")), ValueError, r"extent must be a finite number > 0, got inf"),
    ],
)
def test_render_glyphs_refuses_a_width_or_extent_out_of_range(kwargs, error, match):
    with pytest.raises(error, match=match):
        render_glyphs(INDEX, ANGLE, 16, **kwargs)


@pytest.mark.parametrize("extent", [0.0, -0.34, float("nan"), "0.3"])
def test_render_sprites_refuses_an_extent_out_of_range(extent):
    # 0 and NaN drew black images, a negative extent the figures turned by 180 degrees.
    cells, palettes = make_sprite_pair(0)
    with pytest.raises((TypeError, ValueError), match=r"extent must be a finite number > 0"):
        render_sprites(INDEX, ANGLE, cells, palettes, extent=extent)


def test_the_renderers_take_a_0d_size_or_scale_as_the_number_it_holds():
    cells, palettes = make_sprite_pair(0)
    assert torch.equal(render_glyphs(INDEX, ANGLE, torch.tensor(12), width=np.array(0.1), extent=np.array(0.4)),
                       render_glyphs(INDEX, ANGLE, 12, width=0.1, extent=0.4))  # fmt: skip
    assert torch.equal(render_sprites(INDEX, ANGLE, cells, palettes, np.array(12), extent=np.array(0.3)),
                       render_sprites(INDEX, ANGLE, cells, palettes, 12, extent=0.3))  # fmt: skip


def test_render_sprites_names_cells_or_palettes_that_are_not_make_sprite_pairs():
    # Were an AttributeError ('list' object has no attribute 'shape') and torch's IndexErrors.
    cells, palettes = make_sprite_pair(0)
    cases = [
        ((cells.tolist(), palettes), TypeError, r"cells must be a tensor \(from make_sprite_pair\), got list"),
        ((cells, palettes.tolist()), TypeError, r"palettes must be a tensor \(from make_sprite_pair\), got list"),
        ((cells.float(), palettes), TypeError, r"cells must hold integer colour indices, got dtype torch.float32"),
        ((cells[0], palettes), ValueError, r"cells must have shape \(K, G, G\), .* got \(12, 12\)"),
        (
            (cells, palettes[:1]),
            ValueError,
            r"palettes must be a float tensor of shape \(2, C, 3\), .* got \(1, 6, 3\)",
        ),
        ((cells, palettes[:, :3]), ValueError, r"cells must hold colour indices in \[0, 3\) \(the palettes' colours\)"),
    ]
    for (c, p), error, match in cases:
        with pytest.raises(error, match=match):
            render_sprites(INDEX, ANGLE, c, p)


def test_the_renderers_refuse_tensors_on_meta_with_a_value_error():
    # Were torch's RuntimeError ('Tensor.item() cannot be called on meta tensors').
    with pytest.raises(ValueError, match=r"glyph and angle must hold values .* got tensors on meta"):
        render_glyphs(INDEX.to("meta"), ANGLE.to("meta"))
    cells, palettes = make_sprite_pair(0)
    with pytest.raises(ValueError, match=r"cells must hold values .* got a tensor on meta"):
        render_sprites(INDEX, ANGLE, cells.to("meta"), palettes)


@pytest.mark.parametrize("wrap", [torch.tensor, np.array], ids=["tensor", "array"])
def test_the_generators_read_a_0d_integer_count_as_the_int_it_holds(wrap):
    # n, size, seed and pair refused torch.tensor(3) ("must be a non-negative int, got tensor(3)"), as fit does not.
    for make, kwargs in [
        (rotated_glyphs, dict(n=3, size=12, seed=5)),
        (rotated_sprites, dict(n=3, size=12, seed=5, pair=2)),
        (sinusoids, dict(n=3, seed=5)),
    ]:
        got = make(**{k: wrap(v) for k, v in kwargs.items()})
        want = make(**kwargs)
        assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
    assert torch.equal(make_sprite_pair(wrap(3))[0], make_sprite_pair(3)[0])


def test_digits_reads_a_0d_size():
    pytest.importorskip("sklearn")
    assert digits(np.array(8))[0].shape == (1797, 1, 8, 8)


def test_sinusoids_reads_0d_arrays_and_refuses_meta_with_a_value_error():
    # A 0-d array sfreq was refused ("sfreq must be a number") where a 0-d tensor was taken.
    got = sinusoids(4, sfreq=np.array(50.0), duration=np.array(2.0), jitter=np.array(0.25), noise=np.array(0.1))
    want = sinusoids(4, sfreq=50.0, duration=2.0, jitter=0.25, noise=0.1)
    assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
    # Were torch's RuntimeError (Tensor.item() cannot be called on meta tensors).
    with pytest.raises(ValueError, match=r"sfreq is a tensor on meta"):
        sinusoids(4, sfreq=torch.tensor(50.0, device="meta"))
    with pytest.raises(ValueError, match=r"freqs is a tensor on meta"):
        sinusoids(4, freqs=torch.tensor([2.0, 4.0], device="meta"))


def _loss_batch():
    torch.manual_seed(0)
    return nn.Linear(8, 3), torch.randn(4, 8), torch.randn(2, 4, 8), torch.tensor([0, 2, 1, 0])


def test_equivariance_loss_refuses_logits_of_other_classes_than_heads():
    # logits of 5 classes were taken for the clean term while head's 3 classes made the transformed ones.
    head, z, z_t, y = _loss_batch()
    loss = EquivarianceLoss(8, num_transforms=2)
    with pytest.raises(
        ValueError, match=r"logits must be head\(z\), shaped as head's outputs \(4, 3\), got shape \(4, 5\)"
    ):
        loss(z, z_t, y, head, logits=torch.randn(4, 5))
    assert torch.equal(loss(z, z_t, y, head, logits=head(z)), loss(z, z_t, y, head))


def test_equivariance_loss_reads_a_0d_array_weight_and_names_a_0d_maps():
    head, z, z_t, y = _loss_batch()
    # A 0-d array weight was refused ("must be a number, got ndarray") where a 0-d tensor was taken.
    assert EquivarianceLoss(8, equivariance_weight=np.array(2.0)).equivariance_weight == 2.0
    # maps=torch.tensor(1) was Python's "iteration over a 0-d tensor", naming nothing.
    with pytest.raises(TypeError, match=r"maps must be a sequence of map indices \(ints\), got tensor\(1\)"):
        EquivarianceLoss(8, num_transforms=2)(z, z_t, y, head, maps=torch.tensor(1))


def test_equivariance_loss_on_meta_refuses_return_terms_with_a_value_error():
    head, z, z_t, y = _loss_batch()
    loss = EquivarianceLoss(8, num_transforms=2).to("meta")
    head, z, z_t, y = head.to("meta"), z.to("meta"), z_t.to("meta"), y.to("meta")
    assert loss(z, z_t, y, head).device.type == "meta"
    with pytest.raises(ValueError, match=r"return_terms=True reads the terms' values"):  # was torch's RuntimeError
        loss(z, z_t, y, head, return_terms=True)


def test_selective_regularizer_shows_a_diverse_that_is_not_a_bool():
    # "diverse must be a bool, got bool" for np.True_.
    layer = AugmentationLayer([T.Rotate(), T.TranslateX()])
    with pytest.raises(TypeError, match=r"diverse must be a bool, got bool_?: (np\.)?True"):
        selective_regularizer(layer, diverse=np.bool_(True))
