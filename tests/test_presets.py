"""augnet.presets: the AugNet paper's CIFAR-10 augmentation module (section 5.1) and lambda schedule (A.3)."""

import json

import pytest
import torch
import torch.nn.functional as F
from helpers import gen

import augnet
from augnet.presets import cifar10_augmentation, cifar10_lambda

GEOMETRIC = ["TranslateX", "TranslateY", "Rotate", "ShearX", "ShearY"]
THIRD = ["HorizontalFlip", "SamplePairing", "Contrast", "Brightness"]
FAA = ["Invert", "Gray", "AutoContrast", "Solarize", "Posterize", "Equalize", "Sharpness"]


def names(layer):
    return [type(t).__name__ for t in layer.transforms]


@pytest.mark.parametrize("full", [False, True])
def test_structure_of_the_paper_module(full):
    module = cifar10_augmentation(full=full)
    assert isinstance(module, augnet.AugmentationModule) and len(module.layers) == 3
    assert names(module.layers[0]) == GEOMETRIC and names(module.layers[1]) == GEOMETRIC
    assert names(module.layers[2]) == THIRD + (FAA if full else [])
    for layer in module.layers:
        q = len(layer.transforms)
        torch.testing.assert_close(layer.weights, torch.full((q,), 1 / q))
        torch.testing.assert_close(layer.magnitudes, torch.full((q,), 0.5))
        assert layer.temperature == 1.0
    # the layers hold their own transforms (no module shared between them)
    assert module.layers[0].transforms[0] is not module.layers[1].transforms[0]
    # the third layer is fused (one tap_mix) unless it holds the non-affine operations
    assert module.layers[2].uses_taps == (not full)


def test_settings_are_passed_on():
    module = cifar10_augmentation(init_magnitude=0.2, temperature=0.5)
    for layer in module.layers:
        torch.testing.assert_close(layer.magnitudes, torch.full_like(layer.magnitudes, 0.2))
        assert layer.temperature == 0.5


@pytest.mark.parametrize("full", [False, True])
def test_forward_and_backward_on_cifar_sized_images(full):
    module = cifar10_augmentation(full=full)
    x = torch.rand(4, 3, 32, 32, generator=gen(0)).requires_grad_()
    out = module(x, copies=2, generator=gen(1))
    assert out.shape == (8, 3, 32, 32) and out.dtype == torch.float32 and torch.isfinite(out).all()
    (out * torch.randn(out.shape, generator=gen(2))).sum().backward()
    assert torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0
    for layer in module.layers:
        for p in (layer.raw_magnitudes, layer.weight_logits):
            assert p.grad is not None and torch.isfinite(p.grad).all() and (p.grad != 0).any()
    module.eval()
    assert module(x.detach(), copies=3, generator=gen(3)).shape == (12, 3, 32, 32)


def test_one_training_step_of_augnet_with_the_paper_lambda():
    trunk = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 32 * 32, 10))
    model = augnet.AugNet(trunk, cifar10_augmentation(), train_copies=1, eval_copies=2)
    opt = torch.optim.Adam(augnet.param_groups(model, aug_lr=5e-3), lr=5e-4)
    x, y = torch.rand(8, 3, 32, 32, generator=gen(0)), torch.randint(0, 10, (8,), generator=gen(1))
    before = [layer.raw_magnitudes.detach().clone() for layer in model.augment.layers]
    loss = F.nll_loss(model(x), y) + cifar10_lambda()(0) * augnet.selective_regularizer(model)
    opt.zero_grad()
    loss.backward()
    opt.step()
    moved = [not torch.equal(b, layer.raw_magnitudes) for b, layer in zip(before, model.augment.layers)]
    assert all(moved)


def test_full_module_survives_a_policy_file():
    module = cifar10_augmentation(full=True)
    data = json.loads(json.dumps(module.policy((32, 32)).to_json()))
    again = augnet.AugmentationModule.from_policy(data)
    assert [names(layer) for layer in again.layers] == [names(layer) for layer in module.layers]
    x = torch.rand(3, 3, 32, 32, generator=gen(0))
    torch.testing.assert_close(again(x, copies=2, generator=gen(4)), module(x, copies=2, generator=gen(4)))


def test_lambda_schedule_of_appendix_a3():
    schedule = cifar10_lambda()
    assert isinstance(schedule, augnet.LambdaSchedule)
    assert [schedule(e) for e in (0, 39, 40, 100)] == [0.5, 0.5, 0.05, 0.05]


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(init_magnitude=1.5), ValueError, "1.5"),
        (dict(temperature=0.0), ValueError, "temperature"),
        (dict(full="yes"), TypeError, "full.*'yes'"),
    ],
)
def test_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        cifar10_augmentation(**kwargs)
