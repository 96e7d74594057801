"""Checkpoints: state_dict round trips with weights_only loading, and exact resumption."""

import io

import torch
import torch.nn.functional as F
from helpers import gen
from torch import nn

import augnet
from augnet.transforms import image as T
from augnet.transforms import signal as S


def image_model(seed=0):
    torch.manual_seed(seed)
    trunk = nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3)
    )
    layers = [
        augnet.AugmentationLayer([T.Rotate(), T.ShearX(), T.HorizontalFlip()], init_magnitude=0.3),
        augnet.AugmentationLayer([T.Brightness(), T.Contrast()], init_magnitude=0.2),
    ]
    return augnet.AugNet(trunk, layers, train_copies=2)


def round_trip(obj):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


def test_state_dict_round_trip_with_weights_only_keeps_the_policy_and_outputs():
    a = image_model()
    with torch.no_grad():
        a.augment.layers[0].weight_logits.copy_(torch.tensor([0.5, -1.0, 0.2]))
        a.augment.layers[1].raw_magnitudes.copy_(torch.tensor([0.7, 0.1]))
    b = image_model(seed=1)
    b.load_state_dict(round_trip(a.state_dict()))
    assert a.policy().to_json() == b.policy().to_json()
    x = torch.rand(5, 3, 8, 8, generator=gen(0))
    for mode in (True, False):
        a.train(mode), b.train(mode)
        torch.testing.assert_close(a(x, generator=gen(1)), b(x, generator=gen(1)))


def test_augerino_and_signal_models_round_trip():
    a = augnet.Augerino(nn.Flatten(), init_width=[0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    b = augnet.Augerino(nn.Flatten())
    b.load_state_dict(round_trip(a.state_dict()))
    assert a.policy() == b.policy()
    layer = augnet.AugmentationLayer([S.FrequencyShift(100.0), S.TimeMask(), S.GaussianNoise()], init_magnitude=0.4)
    c = augnet.AugmentationLayer([S.FrequencyShift(100.0), S.TimeMask(), S.GaussianNoise()])
    c.load_state_dict(round_trip(layer.state_dict()))
    assert layer.policy() == c.policy()


def train(model, opt, g, steps, x, y):
    for _ in range(steps):
        loss = F.nll_loss(model(x, generator=g), y) + 0.5 * augnet.selective_regularizer(model)
        opt.zero_grad()
        loss.backward()
        opt.step()


def test_resuming_reproduces_the_uninterrupted_run_exactly():
    x = torch.rand(8, 3, 8, 8, generator=gen(0))
    y = torch.randint(0, 3, (8,), generator=gen(1))

    full = image_model()
    opt = torch.optim.Adam(augnet.param_groups(full, weight_decay=1e-4, aug_lr=1e-2), lr=1e-3)
    train(full, opt, gen(2), 6, x, y)

    first = image_model()
    opt = torch.optim.Adam(augnet.param_groups(first, weight_decay=1e-4, aug_lr=1e-2), lr=1e-3)
    g = gen(2)
    train(first, opt, g, 3, x, y)
    checkpoint = round_trip({"model": first.state_dict(), "optim": opt.state_dict(), "generator": g.get_state()})

    resumed = image_model(seed=5)
    opt = torch.optim.Adam(augnet.param_groups(resumed, weight_decay=1e-4, aug_lr=1e-2), lr=1e-3)
    resumed.load_state_dict(checkpoint["model"])
    opt.load_state_dict(checkpoint["optim"])
    g = torch.Generator()
    g.set_state(checkpoint["generator"])
    train(resumed, opt, g, 3, x, y)

    for (name, p), q in zip(full.named_parameters(), resumed.parameters(), strict=True):
        assert torch.equal(p, q), name
    assert full.policy().to_json() == resumed.policy().to_json()
