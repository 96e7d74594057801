"""User audit S: Posterize and Equalize on float16 / bfloat16 images (``apply_transform`` called directly is
``forward``'s float32 result rounded, as every transform's); ``sinusoids`` refusing a dict of frequencies; and the
class-label reader's errors for labels given as one row or past int64."""

import numpy as np
import pytest
import torch

from augnet._labels import class_labels
from augnet.data import sinusoids
from augnet.transforms import image as T

LEVELS = torch.arange(256, dtype=torch.float64)


def _level_image(dtype):
    """Every 8-bit level once, k / 255 rounded to ``dtype``, as a (1, 3, 16, 16) image."""
    return (LEVELS / 255).to(dtype).reshape(1, 1, 16, 16).expand(1, 3, 16, 16).contiguous()


def _posterized_levels(removed: int) -> torch.Tensor:
    """torchvision's (PIL's) uint8 posterize keeping ``8 - removed`` bits: ``k & mask``."""
    return (LEVELS.long() & (255 - (2**removed - 1))).double()


def _read_levels(out: torch.Tensor) -> torch.Tensor:
    return (out[0, 0].flatten().double() * 255).round()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("removed", range(1, 8))
def test_posterize_of_a_half_image_called_directly_is_the_float32_result_rounded(removed, dtype):
    # In float16, 255 * x + POSTERIZE_SLACK lost the slack (apply_transform computed in the image's dtype), so a
    # direct call and forward (which computes in float32, as every transform does) posterized different levels.
    x = _level_image(dtype)
    params = {"bits": torch.tensor([float(removed)]), "dither": torch.tensor([0.5])}
    direct = T.Posterize(max_bits=8).apply_transform(x, params)
    assert direct.dtype == dtype
    assert torch.equal(direct, T.Posterize(max_bits=8).apply_transform(x.float(), params).to(dtype))
    assert torch.equal(direct, T.Posterize(max_bits=8)(x, 1.0, params=params))
    # Removing no bits is still the image itself, the gradient in x still the identity's.
    x.requires_grad_()
    assert torch.equal(T.Posterize().apply_transform(x, {"bits": torch.zeros(1), "dither": torch.full((1,), 0.5)}), x)
    (grad,) = torch.autograd.grad(T.Posterize().apply_transform(x, params).float().sum(), x)
    assert grad.dtype == dtype and torch.equal(grad, torch.ones_like(grad))
    # float32 images are posterized as before, with POSTERIZE_SLACK.
    x = torch.rand(4, 3, 8, 8, generator=torch.Generator().manual_seed(removed))
    params = {"bits": torch.tensor([0.0, 1.0, 3.0, float(removed)]), "dither": torch.tensor([0.5, 0.2, 0.9, 0.1])}
    scale = torch.exp2(T.Posterize.removed_bits(params))[:, None, None, None]
    expected = torch.where(scale > 1, torch.floor((x * 255.0 + T.POSTERIZE_SLACK) / scale) * scale / 255.0, x)
    assert torch.equal(T.Posterize().apply_transform(x, params), expected)
    assert torch.equal(T.Posterize()(x, 1.0, params=params), expected)


@pytest.mark.parametrize(
    ("make", "dtype"),
    [
        (lambda: T.Posterize(max_bits=8), torch.float16),
        (lambda: T.Posterize(max_bits=8), torch.bfloat16),
        (T.Equalize, torch.float16),
        (T.Equalize, torch.bfloat16),
    ],
)
def test_apply_transform_on_a_half_image_is_what_forward_gives(make, dtype):
    # Posterize and Equalize computed in float16 / bfloat16 when called directly: Equalize's 255.999 is 256 in
    # float16 (the top 15 levels binned one up; in bfloat16 half of them), and forward computes in float32.
    t = make()
    x = _level_image(dtype).repeat(3, 1, 1, 1)
    x[1:] = x[1:].flip(-1) * 0.5 + 0.25  # uneven histograms for Equalize
    params = t.draw_params(x, 1.0, generator=torch.Generator().manual_seed(0))
    if "gate" in params:
        params = {"gate": torch.ones_like(params["gate"])}
    else:
        params = {"bits": torch.tensor([1.0, 4.0, 2.0]), "dither": torch.full((3,), 0.5)}
    direct = t.apply_transform(x, params)
    assert direct.dtype == dtype
    assert torch.equal(direct, t(x, 1.0, params=params))
    assert torch.equal(direct, t.apply_transform(x.float(), params).to(dtype))


def test_equalize_bins_a_float16_image_by_its_levels():
    x = _level_image(torch.float16)  # every level once: a flat histogram, which equalisation keeps
    out = T.Equalize().apply_transform(x, {"gate": torch.ones(1)})
    assert torch.equal(_read_levels(out), torch.floor(LEVELS * 256 / 255).clamp(max=255))
    reference = T.Equalize().apply_transform(x.float(), {"gate": torch.ones(1)})
    assert torch.equal(out, reference.half())


def test_sinusoids_refuse_a_dict_of_frequencies():
    # A dict of class -> Hz ({0: 2.0, 1: 4.0}) was read by its keys: classes at 0 and 1 Hz, silently.
    with pytest.raises(TypeError, match=r"ordered sequence \(class k is freqs\[k\]\), got the dict"):
        sinusoids(4, freqs={0: 2.0, 1: 4.0})
    x, y = sinusoids(4, freqs=list({0: 2.0, 1: 4.0}.values()))
    assert x.shape == (4, 1, 1000) and y.dtype == torch.int64


@pytest.mark.parametrize("labels", [[2**64, 1], [2**63], [[0], [2**70]]])
def test_class_labels_past_int64_are_named_as_such(labels):
    # Python ints past int64 read as "not integer class labels" (a TypeError): they are integers, too large.
    with pytest.raises(ValueError, match=r"y holds labels past int64's range, up to \d+"):
        class_labels(labels)


def test_class_labels_below_int64_are_negative_labels():
    with pytest.raises(ValueError, match=r"must hold class labels >= 0, got -9223372036854775809"):
        class_labels([0, -(2**63) - 1])


def test_class_labels_as_one_row_get_the_reshape_hint():
    with pytest.raises(ValueError, match=r"got \(1, 3\) \(one row of labels\? pass y\.reshape\(-1\)\)$"):
        class_labels(torch.tensor([[0, 1, 2]]), 3)
    with pytest.raises(ValueError, match=r"one row of labels\? pass y\.reshape\(-1\); one-hot rows\?"):
        class_labels(np.array([[0, 1, 2]]))
    with pytest.raises(ValueError, match=r"got \(1, 3\) \(one-hot rows\? pass their argmax\(1\)\)"):
        class_labels(torch.tensor([[0, 1, 0]]), 1)  # one input's one-hot row
