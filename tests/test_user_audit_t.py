"""The image transforms as standalone objects, used as a kornia or torchvision user would: one image in a Dataset,
a seeded generator, one draw of params replayed on another batch (an image and its mask), tiny and rectangular
images, float64, and the AugmentationModule's copies.

Mends (each test below named for one failed on the old code):
- colour params replayed on images of another channel count were broadcast: an RGB draw gave a one-channel mask
  three channels, a grey draw gave an RGB image one; a four-channel image failed in einsum;
- a rigid warp's params (Rotate, ShearX, ShearY) replayed on images of another aspect squashed the content;
- ``AugmentationModule(x, copies=None)`` was refused where the layer and AugNet take ``None``;
- an 8-bit image's dtype error did not say how to convert it.
"""

import math
import warnings

import pytest
import torch
from helpers import gen

from augnet.layers import AugmentationLayer, AugmentationModule
from augnet.transforms import image as T

COLOUR_ANY_CHANNELS = [T.Brightness, T.Contrast, T.Invert, T.AutoContrast]
RIGID = [T.Rotate, T.ShearX, T.ShearY]


# ------------------------------------------------------------ params replayed on another channel count


@pytest.mark.parametrize("cls", COLOUR_ANY_CHANNELS)
@pytest.mark.parametrize(("drawn", "applied"), [(3, 1), (1, 3), (3, 4)])
@pytest.mark.parametrize("how", ["forward", "apply_transform"])
def test_colour_params_replayed_on_another_channel_count_are_refused(cls, drawn, applied, how):
    # Before: (3 -> 1) a (2, 3, 4, 4) output for a (2, 1, 4, 4) mask, (1 -> 3) a one-channel output for an RGB
    # image, both silently; (3 -> 4) einsum's "subscript j has size 4 ... does not broadcast".
    t = cls()
    params = t.draw_params(torch.rand(2, drawn, 4, 4, generator=gen(0)), 0.7, generator=gen(1))
    other = torch.rand(2, applied, 4, 4, generator=gen(2))
    match = rf"^{cls.__name__}: params were drawn for images of {drawn} channels?, but x has {applied}"
    with pytest.raises(ValueError, match=match):
        if how == "forward":
            t(other, 0.7, params=params)
        else:
            t.apply_transform(other, params)


@pytest.mark.parametrize("cls", [*COLOUR_ANY_CHANNELS, T.Saturation, T.Hue, T.Gray])
def test_colour_params_replay_on_images_of_the_same_channels(cls):
    # Unchanged: one draw applied to another batch of the same shape is the same map on that batch.
    t = cls()
    x, y = torch.rand(2, 3, 5, 4, generator=gen(0)), torch.rand(2, 3, 5, 4, generator=gen(1))
    params = t.draw_params(x, 0.7, generator=gen(2))
    assert torch.equal(t(x, 0.7, params=params), t(x, 0.7, generator=gen(2)))
    assert torch.equal(t(y, 0.7, params=params), t.apply_transform(y, params))


# ------------------------------------------------------------ a rigid warp's params on another aspect


@pytest.mark.parametrize("cls", RIGID)
@pytest.mark.parametrize("how", ["forward", "apply_transform"])
def test_rigid_warp_params_replayed_on_another_aspect_are_refused(cls, how):
    # Before: params drawn on 4 x 8 images turned a 6 x 6 mask by a squashed, non-rigid map (a rotation by 90
    # degrees was 0.93 away from torch.rot90).
    t = cls()
    params = t.draw_params(torch.rand(2, 3, 4, 8, generator=gen(0)), 0.7, generator=gen(1))
    mask = torch.rand(2, 1, 6, 6, generator=gen(2))
    with pytest.raises(ValueError, match=rf"^{cls.__name__}: params were drawn for images of aspect H / W = 0\.5, "
                                         r"but x is 6 x 6 \(aspect 1\).*params\['aspect'\]"):  # fmt: skip
        if how == "forward":
            t(mask, 0.7, params=params)
        else:
            t.apply_transform(mask, params)


def test_rotation_replayed_with_the_aspect_the_message_names_is_rigid():
    # What the message says to do turns the mask by the drawn angle: a quarter turn is torch.rot90.
    t = T.Rotate()
    image = torch.rand(1, 3, 4, 8, dtype=torch.float64, generator=gen(0))
    params = {"angle": torch.tensor([math.pi / 2], dtype=torch.float64), "aspect": torch.tensor([0.5]).double()}
    t(image, 1.0, params=params)
    mask = torch.rand(1, 1, 6, 6, dtype=torch.float64, generator=gen(1))
    params["aspect"] = torch.full_like(params["aspect"], 6 / 6)
    torch.testing.assert_close(t(mask, 1.0, params=params), torch.rot90(mask, 1, (-2, -1)), rtol=0, atol=1e-12)


@pytest.mark.parametrize("cls", [*RIGID, T.TranslateX, T.Scale, T.HorizontalFlip])
def test_warp_params_replay_on_a_mask_of_the_same_aspect(cls):
    # Unchanged: an image's draw replayed on its one-channel mask at twice the size, and on float64, runs (the
    # aspect drawn in float32 is H / W to float32's rounding).
    t = cls()
    image = torch.rand(2, 3, 6, 9, generator=gen(0))
    params = t.draw_params(image, 0.8, generator=gen(1))
    assert t(torch.rand(2, 1, 12, 18, generator=gen(2)), 0.8, params=params).shape == (2, 1, 12, 18)
    twice = t(image.double(), 0.8, params=params)
    torch.testing.assert_close(twice, t(image, 0.8, params=params).double(), rtol=0, atol=1e-5)


# ------------------------------------------------------------ AugmentationModule's copies


def test_module_takes_copies_none_as_the_layer_does():
    # Before: "copies must be an int, got NoneType", where AugmentationLayer (and AugNet) take None.
    module = AugmentationModule([AugmentationLayer([T.Rotate(), T.Brightness()]), AugmentationLayer([T.Hue()])])
    x = torch.rand(3, 3, 8, 8, generator=gen(0))
    want = module(x, copies=1, generator=gen(1))
    assert torch.equal(module(x, copies=None, generator=gen(1)), want)
    assert torch.equal(module(x, None, gen(1)), want)
    layer = module.layers[0]
    assert torch.equal(layer(x, copies=None, generator=gen(2)), layer(x, copies=1, generator=gen(2)))


# ------------------------------------------------------------ messages


def test_an_eight_bit_image_is_told_how_to_convert():
    x = torch.randint(0, 256, (1, 3, 8, 8), dtype=torch.uint8, generator=gen(0))
    with pytest.raises(TypeError, match=r"^Rotate: expected a floating-point tensor, got dtype torch\.uint8: "
                                        r"convert 8-bit images with x\.float\(\) / 255$"):  # fmt: skip
        T.Rotate()(x, 0.5)
    with pytest.raises(TypeError, match=r"got dtype torch\.int64$"):  # no hint for other integer images
        T.Rotate()(x.long(), 0.5)


# ------------------------------------------------------------ journeys that hold (guards)


NAMES = [n for n in T.__all__ if n != "GEOMETRIC"]


@pytest.mark.parametrize("name", NAMES)
def test_one_image_in_a_dataset_is_refused_with_the_reshape(name):
    with pytest.raises(ValueError, match=r"for one image \(Ch, H, W\) use x\.unsqueeze\(0\), a batch of one"):
        getattr(T, name)()(torch.rand(3, 5, 7), 0.5)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("size", [(1, 1), (2, 3), (5, 7)])
def test_a_generator_reproduces_and_leaves_the_global_generator_alone(name, size):
    t = getattr(T, name)()
    x = torch.rand(3, 3, *size, generator=gen(0))
    torch.manual_seed(0)
    state = torch.get_rng_state()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning from a normal call (torch.func.vmap's are torch's own)
        out = t(x, 0.7, generator=gen(3), copies=2)
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(out, t(x, 0.7, generator=gen(3), copies=2))
    torch.testing.assert_close(t(x.double(), 0.7, generator=gen(3), copies=2), out.double(), rtol=0, atol=1e-4)
    assert torch.equal(t(x, 0.0, generator=gen(3)), x)


def test_a_dataset_with_one_image_per_item_in_a_dataloader():
    class Items(torch.utils.data.Dataset):
        def __init__(self):
            self.t, self.g = T.Rotate(), gen(0)

        def __len__(self):
            return 4

        def __getitem__(self, i):
            return self.t(torch.rand(3, 8, 8, generator=gen(i))[None], 0.5, generator=self.g)[0]

    batches = [b for b in torch.utils.data.DataLoader(Items(), batch_size=2, num_workers=0)]
    assert [tuple(b.shape) for b in batches] == [(2, 3, 8, 8)] * 2
