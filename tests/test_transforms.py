"""Image transforms against independent references at fixed parameters (kornia, torch), their
properties and bad inputs. The transform contract runs on each of them in test_transform_contract.py."""

import math

import kornia
import pytest
import torch
from helpers import gen
from transform_cases import IMAGE, images

from augnet.transforms import Transform
from augnet.transforms import image as T


def test_sample_pairing_commutes_with_a_permutation_of_the_batch():
    # A mixing transform is not its samples one by one; instead, permuting the
    # batch (and re-indexing partners) permutes the output.
    t = T.SamplePairing()
    x = images(b=6)
    params = t.sample(x, 0.9, generator=gen(2))
    perm = torch.randperm(6, generator=gen(7))
    inv = torch.argsort(perm)
    permuted = {
        "blend": params["blend"][perm],
        "partner": inv[params["partner"][perm]],
        "own": inv[params["own"][perm]],
    }
    torch.testing.assert_close(t.apply_transform(x[perm], permuted), t.apply_transform(x, params)[perm])


# ------------------------------------------------------------ natural ranges


def test_natural_ranges_in_units():
    assert T.Rotate().natural_range(0.25) == (-45.0, 45.0, "deg")
    assert T.TranslateX().natural_range(0.5, (28, 32)) == (-4.0, 4.0, "px")  # the default: a quarter of the size
    assert T.TranslateY().natural_range(0.5, (28, 32)) == (-3.5, 3.5, "px")
    assert T.TranslateX(max_shift=0.5).natural_range(0.5, (28, 32)) == (-8.0, 8.0, "px")
    low, high, unit = T.Scale().natural_range(1.0)
    assert (low, high, unit) == (0.5, 2.0, "x zoom")
    assert T.ShearX().natural_range(1.0) == (-0.3, 0.3, "")
    assert str(T.Rotate().natural_range(0.25)) == "±45 deg"


@pytest.mark.parametrize("cls", [T.Rotate, T.ShearX, T.ShearY, T.TranslateX, T.TranslateY, T.Brightness, T.Hue])
def test_drawn_values_stay_within_the_range(cls):
    t = cls()
    x = images(b=64)
    params = t.sample(x, 0.3, generator=gen(0))
    key = next(k for k in ("angle", "shear", "shift") if k in params)
    value = params[key]
    if key == "angle":
        limit = 0.3 * t.max_angle
    elif key == "shear":
        limit = 0.3 * t.max_shear
    else:
        limit = 0.3 * t.max_shift
    assert value.abs().max() <= limit + 1e-7
    assert value.abs().max() > 0.5 * limit  # and fill it


# ------------------------------------------------------ independent references

F64 = torch.float64


def _fixed(t, x, **values):
    params = t.sample(x, 0.5, generator=gen(0))
    params.update({k: torch.as_tensor(v, dtype=F64) for k, v in values.items()})
    return params


@pytest.mark.parametrize("size", [(15, 15), (10, 17)])
def test_rotate_matches_kornia(size):
    x = torch.rand(2, 3, *size, dtype=F64)
    t = T.Rotate()
    params = _fixed(t, x, angle=[0.3, -1.0])
    expected = kornia.geometry.transform.rotate(x, torch.rad2deg(params["angle"]), align_corners=True)
    torch.testing.assert_close(t.apply_transform(x, params), expected)


@pytest.mark.parametrize("cls, key", [(T.ShearX, "sx"), (T.ShearY, "sy")])
def test_shear_matches_kornia_about_the_centre(cls, key):
    h, w = 10, 17
    x = torch.rand(2, 3, h, w, dtype=F64)
    t = cls()
    params = _fixed(t, x, shear=[0.2, -0.1])
    centre = torch.tensor([[(w - 1) / 2, (h - 1) / 2]] * 2, dtype=F64)
    m = kornia.geometry.transform.get_shear_matrix2d(centre, **{key: torch.atan(params["shear"])})
    expected = kornia.geometry.transform.warp_affine(x, m[:, :2], (h, w), align_corners=True)
    torch.testing.assert_close(t.apply_transform(x, params), expected)


def test_scale_matches_kornia():
    x = torch.rand(2, 3, 13, 13, dtype=F64)
    t = T.Scale()
    params = _fixed(t, x, zoom=[1.3, 0.7])
    expected = kornia.geometry.transform.scale(x, params["zoom"][:, None].expand(2, 2), align_corners=True)
    torch.testing.assert_close(t.apply_transform(x, params), expected)


def test_translate_by_whole_pixels_is_a_shift_with_zero_fill():
    x = torch.rand(2, 1, 8, 10, dtype=F64)
    tx, ty = T.TranslateX(), T.TranslateY()
    out = tx.apply_transform(x, _fixed(tx, x, shift=[2 / 10, -3 / 10]))
    assert torch.allclose(out[0, :, :, 2:], x[0, :, :, :-2]) and (out[0, :, :, :2] == 0).all()
    assert torch.allclose(out[1, :, :, :-3], x[1, :, :, 3:]) and (out[1, :, :, -3:] == 0).all()
    out = ty.apply_transform(x, _fixed(ty, x, shift=[0.25, 0.0]))
    assert torch.allclose(out[0, :, 2:], x[0, :, :-2]) and torch.allclose(out[1], x[1])


@pytest.mark.parametrize("cls, dim", [(T.HorizontalFlip, -1), (T.VerticalFlip, -2)])
def test_flip_at_probability_one_is_torch_flip(cls, dim):
    x = images(dtype=F64)
    out = cls()(x, 1.0, generator=gen(0))
    torch.testing.assert_close(out, x.flip(dim))


def test_flip_probability_matches_magnitude():
    x = images(b=4000, h=2, w=3)
    params = T.HorizontalFlip().sample(x, 0.3, generator=gen(0))
    assert abs(float(params["gate"].mean()) - 0.3) < 0.03
    assert set(params["gate"].unique().tolist()) <= {0.0, 1.0}


def test_brightness_adds_the_shift():
    x = images(dtype=F64)
    t = T.Brightness()
    params = t.sample(x, 0.8, generator=gen(0))
    shift = params["shift"][:, 0]
    torch.testing.assert_close(t.apply_transform(x, params), x + shift[:, None, None, None])


@pytest.mark.parametrize("ch", [1, 3])
def test_contrast_blends_towards_the_mean_grey(ch):
    x = images(ch=ch, dtype=F64)
    t = T.Contrast()
    params = t.sample(x, 0.8, generator=gen(0))
    f = params["factor"][:, None, None, None]
    grey = kornia.color.rgb_to_grayscale(x) if ch == 3 else x
    mean = grey.mean((1, 2, 3), keepdim=True)
    torch.testing.assert_close(t.apply_transform(x, params), f * x + (1 - f) * mean)


def test_saturation_blends_with_kornia_greyscale():
    x = images(dtype=F64)
    t = T.Saturation()
    params = t.sample(x, 0.8, generator=gen(0))
    f = params["factor"][:, None, None, None]
    grey = kornia.color.rgb_to_grayscale(x)
    torch.testing.assert_close(t.apply_transform(x, params), f * x + (1 - f) * grey)
    # Factor 0 gives the grey image in every channel.
    torch.testing.assert_close(t.apply_transform(x, {"factor": torch.zeros(5, dtype=F64)}), grey.expand_as(x))


def test_hue_rotation_properties():
    x = images(dtype=F64)
    t = T.Hue()
    third = torch.full((5,), 2 * math.pi / 3, dtype=F64)
    # A third of a turn about the grey axis sends red to green, green to blue, blue to red.
    torch.testing.assert_close(t.apply_transform(x, {"angle": third}), x[:, [2, 0, 1]])
    # Any angle keeps the grey diagonal (channel mean) and the distance to it.
    angle = torch.linspace(-3, 3, 5, dtype=F64)
    out = t.apply_transform(x, {"angle": angle})
    torch.testing.assert_close(out.mean(1), x.mean(1))
    torch.testing.assert_close((out - out.mean(1, keepdim=True)).norm(dim=1), (x - x.mean(1, keepdim=True)).norm(dim=1))


def test_sample_pairing_blends_with_another_sample():
    x = images(b=6, dtype=F64)
    t = T.SamplePairing()
    params = t.sample(x, 1.0, generator=gen(0))
    lam = params["blend"][:, None, None, None]
    assert (params["partner"] != torch.arange(6)).all()
    assert params["blend"].max() <= 0.5
    torch.testing.assert_close(t.apply_transform(x, params), (1 - lam) * x + lam * x[params["partner"]])


def test_sample_pairing_with_one_sample_is_the_identity():
    x = images(b=1, dtype=F64)
    torch.testing.assert_close(T.SamplePairing()(x, 1.0, generator=gen(0)), x)


def test_border_padding_matches_kornia():
    x = images(dtype=F64)
    t = T.Rotate(padding="border")
    params = _fixed(t, x, angle=[0.5] * 5)
    expected = kornia.geometry.transform.rotate(
        x, torch.rad2deg(params["angle"]), padding_mode="border", align_corners=True
    )
    torch.testing.assert_close(t.apply_transform(x, params), expected)


@pytest.mark.parametrize("padding, first_cols", [("border", [0, 0]), ("reflection", [1, 0]), ("zeros", None)])
def test_padding_of_a_whole_pixel_shift(padding, first_cols):
    # Shifting right by 2 pixels reads columns -2 and -1: clamped to column 0
    # (border), mirrored about the image edge to columns 1 and 0 (reflection), or 0.
    x = images(dtype=F64)
    t = T.TranslateX(padding=padding)
    out = t.apply_transform(x, _fixed(t, x, shift=[2 / 11] * 5))
    torch.testing.assert_close(out[..., 2:], x[..., :-2])
    expected = torch.zeros_like(x[..., :2]) if first_cols is None else x[..., first_cols]
    torch.testing.assert_close(out[..., :2], expected)


# ------------------------------------------------------------------- bad input


@pytest.mark.parametrize("cls", IMAGE)
def test_bad_inputs_raise_clear_errors(cls):
    t = cls()
    with pytest.raises(ValueError, match="4-D input"):
        t(torch.rand(3, 8, 8), 0.5)
    with pytest.raises(TypeError, match="floating-point"):
        t(torch.zeros(2, 3, 8, 8, dtype=torch.uint8), 0.5)
    with pytest.raises(ValueError, match=r"magnitude must lie in \[0, 1\], got nan"):
        t(images(), float("nan"))
    with pytest.raises(ValueError, match=r"got 1.5"):
        t(images(), torch.tensor(1.5))
    with pytest.raises(ValueError, match="copies must be >= 1, got 0"):
        t(images(), 0.5, copies=0)


@pytest.mark.parametrize("cls", [T.Saturation, T.Hue, T.Gray])
def test_rgb_only_transforms_reject_other_channel_counts(cls):
    with pytest.raises(ValueError, match="3 channels, got 1"):
        cls()(images(ch=1), 0.5)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: T.Rotate(max_angle=-1.0), "max_angle"),
        (lambda: T.Rotate(padding="wrap"), "padding"),
        (lambda: T.Scale(max_zoom=0.5), "max_zoom"),
        (lambda: T.HorizontalFlip(temperature=0), "temperature"),
    ],
)
def test_bad_configuration(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_params_for_the_wrong_number_of_rows():
    t = T.Rotate()
    params = t.sample(images(b=5), 0.5, copies=2)
    with pytest.raises(ValueError, match="params are for 10 rows"):
        t(images(b=5), 0.5, params=params)


def test_image_transforms_have_taps_unless_not_affine():
    # Warps and affine colour maps run through tap_mix; Faster AutoAugment's non-affine operations do not.
    assert all(issubclass(c, Transform) for c in IMAGE)
    without = {c.__name__ for c in IMAGE if not c.has_taps()}
    assert without == {"Solarize", "Posterize", "Equalize", "Sharpness"}
