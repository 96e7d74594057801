"""Augmentation layers inside an AugNet's trunk: what policy(), a refused call and fit's checks say of them."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import augnet
from augnet.training import fit
from augnet.transforms import image as T


def _model(nested: bool = False) -> augnet.AugNet:
    torch.manual_seed(0)
    inner = augnet.AugmentationLayer([T.Rotate(), T.ShearX()], init_magnitude=0.3)
    block = nn.Sequential(nn.Identity(), inner) if nested else inner
    trunk = nn.Sequential(block, nn.Flatten(), nn.Linear(3 * 8 * 8, 3))
    return augnet.AugNet(trunk, augnet.AugmentationLayer([T.TranslateX()], init_magnitude=0.2))


def test_policy_warns_of_a_layer_inside_the_trunk_and_names_its_path():
    model = _model()
    with pytest.warns(UserWarning, match=r"trunk\.0 is not in it") as caught:
        policy = model.policy()
    assert "model.trunk.get_submodule('0').policy()" in str(caught[0].message)
    assert caught[0].filename == __file__  # pointed at the user's call
    assert len(policy) == 1  # still the augment module's: what from_policy and the exporters take
    assert model.trunk.get_submodule("0").policy()[0]["transform"] == "Rotate"  # the way the warning names
    nested = _model(nested=True)
    with pytest.warns(UserWarning, match=r"trunk\.0\.1 is not in it"):
        nested.policy((8, 8))
    plain = augnet.AugNet(nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 3)), augnet.AugmentationLayer([T.Rotate()]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(plain.policy()) == 1  # the standard set-up: no warning


def test_a_refused_call_leaves_a_trunk_layers_size_as_it_was():
    model = _model()
    model(torch.rand(2, 3, 8, 8))
    with pytest.raises(RuntimeError):  # the Linear refuses 9x9 images, after the trunk's layer ran on them
        model(torch.rand(2, 3, 9, 9))
    assert model.trunk[0].last_size == (8, 8)
    assert model.augment.layers[0].last_size == (8, 8)


def test_fit_warns_that_selective_counts_a_trunk_layer_in_other_units():
    x, y = torch.rand(8, 3, 8, 8), torch.randint(0, 3, (8,))
    model = _model(nested=True)
    opt = torch.optim.SGD(augnet.param_groups(model), lr=0.01)
    with pytest.warns(UserWarning, match=r"AugmentationLayer\(s\) at trunk\.0\.1 inside its trunk") as caught:
        fit(model, x, y, opt, epochs=1, batch_size=4)
    assert any(w.filename == __file__ for w in caught)
    for regularizer in ("paper", "none"):  # magnitudes in their own units, or none: nothing to warn of
        model = _model()
        opt = torch.optim.SGD(augnet.param_groups(model), lr=0.01)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            fit(model, x, y, opt, epochs=1, batch_size=4, regularizer=regularizer)
    standard = augnet.AugNet(
        nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 3)), augnet.AugmentationLayer([T.Rotate()])
    )
    opt = torch.optim.SGD(augnet.param_groups(standard), lr=0.01)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit(standard, x, y, opt, epochs=1, batch_size=4)  # layers in augment only: no warning
    model = _model()
    model.effect_every = 0  # nothing measured: every layer in its own units
    opt = torch.optim.SGD(augnet.param_groups(model), lr=0.01)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit(model, x, y, opt, epochs=1, batch_size=4)


def test_fit_names_the_trunk_layer_of_a_wrapped_augnet():
    x, y = torch.rand(8, 3, 8, 8), torch.randint(0, 3, (8,))
    wrapper = nn.Sequential(_model())
    opt = torch.optim.SGD(augnet.param_groups(wrapper), lr=0.01)
    with pytest.warns(UserWarning, match=r"at 0\.trunk\.0 inside"):
        fit(wrapper, x, y, opt, epochs=1, batch_size=4)
