"""The probes' measures against the papers' formulas on hand-computable cases, as users call them.

Each test here failed before its fix:

- ``equivariance_curve`` (``shared=True``, its default: "the same exact transform to every image",
  Tensmeyer & Martinez) gave every image the first image's data-derived parameters: a contrast moved
  image ``i`` towards the first image's mean (``f x_i + (1 - f) mean(x_0)``, not ``f x_i + (1 - f)
  mean(x_i)``), an autocontrast stretched every image by the first image's range. A grey image, which a
  contrast leaves as it is, got an invariance error of 0.32 at magnitude 1.
"""

from __future__ import annotations

import warnings

import pytest
import torch

from augnet.probes import equivariance_curve
from augnet.probes.equivariance import _apply_augnet
from augnet.transforms import image as T
from augnet.transforms import signal as S


def _recording():
    """A features callable ``x -> x.flatten(1)`` that keeps every input batch it is given."""
    seen: list[torch.Tensor] = []

    def phi(a: torch.Tensor) -> torch.Tensor:
        seen.append(a.detach().clone())
        return a.flatten(1)

    return phi, seen


def test_a_shared_contrast_leaves_grey_images_as_they_are():
    # A contrast scales an image about its own mean: a grey (constant) image does not move, so the identity
    # features of grey images are exactly invariant (eq. 2 with M = I: error 0) at every magnitude.
    levels = torch.linspace(0.1, 0.9, 40)
    x = levels[:, None, None, None].expand(40, 3, 2, 2).contiguous()
    phi, seen = _recording()
    curve = equivariance_curve(phi, x, T.Contrast(), [0.0, 1.0], per_dimension=False)
    assert max(curve["invariance"]) < 1e-6  # was [0.0, 0.316]: each image pulled towards the first one's grey
    torch.testing.assert_close(seen[-1], x, atol=1e-6, rtol=0)


def test_a_shared_contrast_commutes_with_a_brightness_offset_of_the_image():
    # f (x + c) + (1 - f) mean(x + c) = [f x + (1 - f) mean(x)] + c: the same contrast applied to an image and to
    # that image made brighter by c gives outputs c apart (the old draw gave f c apart: 0.1 f, not 0.1).
    g = torch.Generator().manual_seed(0)
    base = torch.rand(1, 3, 6, 6, generator=g) * 0.5
    x = torch.cat([base, base + 0.1, base + 0.3])
    phi, seen = _recording()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # 3 rows: the map is under-determined; not measured here
        equivariance_curve(phi, x, T.Contrast(), [1.0], holdout=0.34)
    moved = seen[-1]
    assert not torch.allclose(moved[0], base[0], atol=1e-3)  # the draw does change the image
    torch.testing.assert_close(moved[1] - moved[0], torch.full_like(base[0], 0.1), atol=1e-5, rtol=0)
    torch.testing.assert_close(moved[2] - moved[0], torch.full_like(base[0], 0.3), atol=1e-5, rtol=0)


def test_a_shared_autocontrast_stretches_each_image_by_its_own_range():
    # At magnitude 1 AutoContrast maps every channel of every image onto [0, 1]: images a_i * p + b_i of one
    # pattern p all become the stretched pattern (the old draw stretched each by the first image's range).
    g = torch.Generator().manual_seed(1)
    p = torch.rand(1, 3, 5, 5, generator=g)
    a = torch.tensor([1.0, 0.5, 0.25, 0.8])[:, None, None, None]
    b = torch.tensor([0.0, 0.2, 0.6, 0.1])[:, None, None, None]
    x = a * p + b
    stretched = (p - p.amin((2, 3), keepdim=True)) / (p.amax((2, 3), keepdim=True) - p.amin((2, 3), keepdim=True))
    phi, seen = _recording()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        curve = equivariance_curve(phi, x, T.AutoContrast(), [1.0], holdout=0.25, per_dimension=False)
    torch.testing.assert_close(seen[-1], stretched.expand_as(x), atol=1e-5, rtol=0)
    # eq. 2 with M = I by hand on the evaluated rows: ||x_i - T(x_i)|| / ||x_i||
    rows = curve["index"]
    flat, moved = x.flatten(1)[rows].double(), stretched.expand_as(x).flatten(1)[rows].double()
    hand = ((flat - moved).norm(dim=1) / flat.norm(dim=1)).mean()
    assert curve["invariance"][0] == pytest.approx(float(hand), abs=1e-5)


def test_a_shared_draw_is_the_first_images_draw_applied_to_each_image_alone():
    # What "shared" means, for every kind of parameter: row i is the transform applied to image i alone with the
    # random part of the first image's draw. Transforms whose parameters are all drawn (a rotation's angle,
    # a brightness shift, a signal's noise) keep the draw they had, bit for bit.
    g = torch.Generator().manual_seed(2)
    x = torch.rand(5, 3, 6, 6, generator=g) * torch.linspace(0.2, 1.0, 5)[:, None, None, None]
    signals = torch.randn(4, 2, 16, generator=g)
    for t, inputs in (
        (T.Contrast(), x),
        (T.AutoContrast(), x),
        (T.Rotate(), x),
        (T.Brightness(), x),
        (S.GaussianNoise(), signals),
    ):
        mag = t.check_magnitude(1.0, inputs)
        shared = _apply_augnet(t, inputs, 1.0, True, 0).whole()
        # the old draw: the first image's parameters, every tensor expanded to every row
        first = t.sample(inputs[:1], mag, generator=torch.Generator().manual_seed(1))
        old = t(inputs, 1.0, params={k: v.expand(len(inputs), *v.shape[1:]) for k, v in first.items()})
        if isinstance(t, (T.Rotate, T.Brightness)):
            assert torch.equal(shared, old), type(t).__name__
            continue
        alone = torch.cat(
            [
                t(
                    inputs[i : i + 1],
                    1.0,
                    params=t.sample(inputs[i : i + 1], mag, generator=torch.Generator().manual_seed(1)),
                )
                for i in range(len(inputs))
            ]
        )
        torch.testing.assert_close(shared, alone, atol=1e-6, rtol=0)
        assert not torch.allclose(shared, old, atol=1e-3), type(t).__name__
