"""Reliability of the models as a user meets them: AugNet, Augerino, the regularisers, param_groups and the exports.

Each test here failed before its fix: a refusal is a ValueError or a TypeError that names the bad value and leaves
the model as it was; a value a user gets (a regulariser, a policy) is never NaN or silently wrong.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

import augnet
from augnet import AugmentationLayer, AugmentationModule, ConditionedAugmentationLayer
from augnet.augerino import LieAugmentation
from augnet.instance import conditioner_entropy
from augnet.transforms import image as T


def trunk() -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 3))


def images(b: int = 4) -> torch.Tensor:
    return torch.rand(b, 3, 8, 8, generator=torch.Generator().manual_seed(0))


# ------------------------------------------------------------------ regularisers on an empty batch


def test_an_empty_batch_through_a_conditioned_layer_gives_a_finite_regulariser_and_entropy():
    cond = ConditionedAugmentationLayer([T.Rotate(), T.TranslateX()], channels=3, init_magnitude=0.3)
    plain = AugmentationLayer([T.Rotate(), T.Brightness()], init_magnitude=0.3)
    model = augnet.AugNet(trunk(), [cond, plain])
    out = model(images(0))
    assert out.shape == (0, 3)
    reg = augnet.selective_regularizer(model)
    entropy = conditioner_entropy(model)
    assert torch.isfinite(reg) and torch.isfinite(entropy), (reg, entropy)  # both were NaN (a mean over no sample)
    assert float(entropy.detach()) == 0.0
    # The conditioned layer adds nothing; the plain layer its own term, as if it stood alone (nothing held before it).
    torch.testing.assert_close(reg, augnet.selective_regularizer(plain))
    (out.sum() + reg - entropy).backward()
    for name, p in model.named_parameters():
        assert p.grad is None or bool(torch.isfinite(p.grad).all()), name


def test_a_non_empty_batch_keeps_the_regulariser_of_a_conditioned_layer():
    cond = ConditionedAugmentationLayer([T.Rotate(), T.TranslateX()], channels=3, init_magnitude=0.3)
    model = augnet.AugNet(trunk(), [cond, AugmentationLayer([T.Rotate(), T.Brightness()], init_magnitude=0.3)])
    model(images(4))
    w, mu = cond.latest_policy()
    v = w * augnet.regularizers.saturate(mu) * cond.effect
    first = -torch.linalg.vector_norm(v, dim=1).mean()
    second = model.augment.layers[1]
    h = torch.stack([w.detach().mean(0)[0], torch.zeros(())])  # Rotate held by the first layer
    v2 = second.weights * augnet.regularizers.saturate(second.magnitudes) * second.effect
    expected = first - torch.linalg.vector_norm(v2 * (1 - h)) + torch.linalg.vector_norm(v2 * h)
    torch.testing.assert_close(augnet.selective_regularizer(model), expected)


# ------------------------------------------------------------------ Augerino


def test_a_refused_augerino_call_leaves_the_size_it_last_saw():
    aug = LieAugmentation()
    aug(images(2))
    assert aug.last_size == (8, 8)
    with pytest.raises(ValueError, match="empty channel or spatial"):
        aug(torch.rand(2, 0, 5, 7))
    assert aug.last_size == (8, 8)  # was (5, 7): policy()'s pixel ranges then read a size never augmented
    fresh = LieAugmentation()
    with pytest.raises(ValueError):
        fresh(torch.rand(2, 3, 0, 7))
    assert fresh.last_size is None


@pytest.mark.parametrize(
    ("size", "error"),
    [((0, 0), ValueError), ((-8, 8), ValueError), ((8,), ValueError), (5, TypeError), ("ab", TypeError),
     ((8.0, 8.0), TypeError), ((True, 8), TypeError), (torch.rand(2, 3, 8, 8), TypeError)],
    ids=["zeros", "negative", "one-dim", "int", "str", "floats", "bool", "tensor"],
)
def test_augerino_policy_refuses_a_bad_size(size, error):
    model = augnet.Augerino(trunk())
    model(images())
    before = model.policy().to_json()
    with pytest.raises(error, match="size"):
        model.policy(size)
    assert model.policy().to_json() == before
    assert model.policy((16, 32))[0][0]["range"].high == pytest.approx(0.1 * 32 / 2, rel=1e-5)  # translate_x: W


def test_augerino_takes_its_widths_as_an_array_or_a_tensor():
    widths = [0.1, 0.2, 0.3, 0.05, 0.05, 0.02]
    listed = LieAugmentation(widths).widths
    for given in (np.array(widths), torch.tensor(widths, dtype=torch.float64), np.float32(0.2)):
        aug = LieAugmentation(given)
        expected = listed if not isinstance(given, np.floating) else LieAugmentation(0.2).widths
        torch.testing.assert_close(aug.widths, expected)
    for bad, error in ((np.array([0.1] * 5), ValueError), (np.array([True] * 6), TypeError),
                       (torch.tensor([math.nan] * 6), ValueError)):  # fmt: skip
        with pytest.raises(error, match="init_width"):
            LieAugmentation(bad)


def test_augerino_repr_shows_its_widths_and_padding():
    text = repr(augnet.Augerino(trunk(), init_width=0.25, padding="border"))
    assert "LieAugmentation(widths=[0.25, 0.25, 0.25, 0.25, 0.25, 0.25], padding='border')" in text
    assert "widths=?" in repr(LieAugmentation().to("meta"))


def test_no_regularizer_takes_an_augerino():
    model = augnet.Augerino(trunk())
    zero = augnet.no_regularizer(model)  # was: ValueError "no AugmentationLayer found in Augerino"
    assert zero.shape == () and float(zero) == 0.0
    with pytest.raises(ValueError, match="no AugmentationLayer or Augerino"):
        augnet.no_regularizer(trunk())


# ------------------------------------------------------------------ argument types


@pytest.mark.parametrize(
    ("epoch", "error"), [(math.nan, ValueError), (True, TypeError), ("3", TypeError), (None, TypeError)],
    ids=["nan", "bool", "str", "none"],
)
def test_lambda_schedule_refuses_an_epoch_that_is_not_a_number(epoch, error):
    schedule = augnet.LambdaSchedule((0.5, 0.05), milestones=(40,))
    with pytest.raises(error, match="epoch must be"):
        schedule(epoch)  # NaN and True gave 0.5 without a sound, "3" a comparison error
    assert schedule(np.int64(40)) == 0.05 and schedule(39) == 0.5
    assert schedule(39.5) == 0.5 and schedule(40.0) == 0.05 and schedule(torch.tensor(41)) == 0.05  # fractional


@pytest.mark.parametrize("every", [True, 1.0, "10", None], ids=["bool", "float", "str", "none"])
def test_effect_every_of_another_type_is_a_type_error(every):
    with pytest.raises(TypeError, match="effect_every must be an int"):
        augnet.AugNet(trunk(), AugmentationLayer([T.Rotate()]), effect_every=every)


# ------------------------------------------------------------------ exports


@pytest.mark.parametrize("what", ["model", "layer", "module"])
def test_exporting_a_module_instead_of_its_policy_says_to_pass_the_policy(what):
    pytest.importorskip("kornia")
    layer = AugmentationLayer([T.Rotate(), T.HorizontalFlip()], init_magnitude=0.25)
    given = {"model": augnet.AugNet(trunk(), layer), "layer": layer, "module": AugmentationModule([layer])}[what]
    for export in (augnet.export.to_kornia, augnet.export.to_torchvision):
        with pytest.raises(TypeError, match=r"pass its policy\(\)"):  # a layer was "'method' object is not iterable"
            export(given)


def test_a_size_given_as_a_tensor_or_an_array_is_read_as_its_values():
    layer = AugmentationLayer([T.TranslateX(), T.Rotate()])
    model = augnet.Augerino(trunk())
    for policy in (layer.policy, model.policy):
        expected = repr(policy((16, 32)))
        assert "px" in expected  # the size is read: ranges in pixels
        for size in (torch.tensor([16, 32]), np.array([16, 32]), torch.Size([16, 32])):
            assert repr(policy(size)) == expected
        for bad in (torch.tensor([16.0, 32.0]), np.array([[16, 32]]), torch.tensor([True, True])):
            with pytest.raises(TypeError, match=r"size must be a spatial size \(1-D integers\), got a .* of shape"):
                policy(bad)
    # A whole input shape reads as its last two, as layers read it (Augerino refused x.shape for a while).
    x = images()
    assert repr(model.policy(x.shape)) == repr(model.policy(x.shape[-2:]))
    augnet_model = augnet.AugNet(trunk(), AugmentationLayer([T.TranslateX()]))
    assert repr(augnet_model.policy(torch.tensor([16, 32]))) == repr(augnet_model.policy((16, 32)))
    with pytest.raises(TypeError, match="got a tensor of images"):
        augnet_model.policy(x)


def test_a_calibrated_layer_at_magnitude_zero_is_the_identity_where_a_curve_starts_flat():
    # A gate's change curve measured on few rows starts flat (the gate fired on none of them at 1/16): the
    # inverse gave the flat stretch's end, so the layer flipped about 6 % of its rows at magnitude 0.
    from augnet.transforms import audio as A
    from augnet.transforms import signal as S

    layer = AugmentationLayer([S.TimeReverse(), A.Gain()], init_magnitude=0.0)
    x = torch.randn(4, 2, 64, generator=torch.Generator().manual_seed(0))
    curves = layer.calibrate(x)
    assert curves[0, 1] == 0  # the case: flat at its start
    assert layer.transform_magnitudes.tolist() == [0.0, 0.0]
    out = layer(x, copies=3)
    torch.testing.assert_close(out, x.repeat(3, 1, 1), rtol=0, atol=0)
    # Above 0 the inverse is the curve's, as before (the first rising piece's magnitude, not 0).
    with torch.no_grad():
        layer.raw_magnitudes.fill_(0.5)
    assert (layer.transform_magnitudes > 0).all()


def test_a_policy_summary_prints_one_sided_ranges_as_such_and_refuses_to_average_no_class():
    from augnet.instance_policy import PolicySummary, policy_summary

    layer = ConditionedAugmentationLayer([T.Rotate(), T.HorizontalFlip()], channels=3, init_magnitude=0.25)
    summary = policy_summary(layer, (torch.rand(6, 3, 8, 8), torch.tensor([0, 1, 0, 1, 0, 1])))
    text = str(summary)
    assert "Rotate w 0.50 range ±45 deg" in text
    assert "HorizontalFlip w 0.50 range 0 to 0.25 probability" in text  # was "±0.25 probability"
    with pytest.raises(ValueError, match="holds no class"):  # was ZeroDivisionError
        PolicySummary(["Rotate"], ["deg"], (0.5,)).class_averaged()
