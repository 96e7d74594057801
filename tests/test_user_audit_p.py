"""A user's journey through AugNet, its layers and the regularisers: the mends of this audit."""

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import augnet
from augnet.transforms import image as T


def _model(out_features=1, **kwargs):
    trunk = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, out_features))
    return augnet.AugNet(trunk, augnet.AugmentationLayer([T.Rotate(), T.Brightness()]), **kwargs)


# ------------------------------------------------------------- one logit per row and the softmax aggregates
@pytest.mark.parametrize("how", ["log_softmax", "softmax"])
def test_a_single_logit_per_row_is_refused_by_the_softmax_aggregates(how):
    # A binary classifier's one logit: its log-softmax over one class is 0 whatever the trunk gives, so the model
    # predicted 0 for every input and its trunk got no gradient, without a sound.
    model = _model(out_features=1, train_copies=2, aggregate=how)
    x, y = torch.rand(4, 3, 8, 8), torch.tensor([[0.0], [1.0], [1.0], [0.0]])
    passes = model.passes
    with pytest.raises(ValueError, match=rf"aggregate='{how}' needs at least 2 classes.*\(8, 1\).*aggregate='mean'"):
        F.binary_cross_entropy_with_logits(model(x), y)
    assert model.passes == passes  # a refused call changes none of augnet's state
    with pytest.raises(ValueError, match="at least 2 classes"):
        augnet.aggregate(torch.randn(6, 1, 5, 5), 3, how)  # a one-class segmentation map alike


def test_a_single_logit_aggregated_by_its_mean_trains_the_trunk():
    model = _model(out_features=1, train_copies=2, aggregate="mean")
    x, y = torch.rand(4, 3, 8, 8), torch.tensor([[0.0], [1.0], [1.0], [0.0]])
    F.binary_cross_entropy_with_logits(model(x), y).backward()
    assert model.trunk[1].weight.grad.abs().sum() > 0


def test_two_classes_and_more_aggregate_as_before():
    out = torch.randn(6, 2, generator=torch.Generator().manual_seed(0))
    logp = out.log_softmax(1).reshape(3, 2, 2)
    assert torch.equal(augnet.aggregate(out, 3), logp.mean(0))
    assert torch.equal(augnet.aggregate(out, 3, "softmax"), torch.logsumexp(logp, 0) - np.log(3))
    assert torch.equal(augnet.aggregate(out[:, :1], 3, "mean"), out[:, :1].reshape(3, 2, 1).mean(0))


# ------------------------------------------------------------------------ calibration made in inference mode
def _calibrated(x):
    layer = augnet.AugmentationLayer([T.Rotate(), T.Brightness()], init_magnitude=0.3)
    layer.calibrate(x)
    return layer


def test_a_layer_calibrated_in_inference_mode_loads_a_state_afterwards():
    # calibrate() kept the curves it measured in inference mode as an inference tensor: every later
    # load_state_dict of the layer (or of the model holding it) failed with torch's RuntimeError.
    x = torch.rand(4, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    layer = augnet.AugmentationLayer([T.Rotate(), T.Brightness()], init_magnitude=0.3)
    with torch.inference_mode():
        curves = layer.calibrate(x)
    assert not layer.calibration.is_inference() and not curves.is_inference()
    assert torch.equal(layer.calibration, _calibrated(x).calibration)  # the same curves as out of it
    other = _calibrated(2 * x)
    layer.load_state_dict(other.state_dict())
    assert torch.equal(layer.calibration, other.calibration)
    assert torch.equal(layer.transform_magnitudes, other.transform_magnitudes)


def test_a_state_loaded_in_inference_mode_loads_again_out_of_it():
    x = torch.rand(4, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    first, second = _calibrated(x), _calibrated(2 * x)
    model = augnet.AugNet(nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 3)), augnet.AugmentationLayer(
        [T.Rotate(), T.Brightness()]))  # fmt: skip
    with torch.inference_mode():
        model.augment.layers[0].load_state_dict(first.state_dict())
    assert not model.augment.layers[0].calibration.is_inference()
    model.augment.layers[0].load_state_dict(second.state_dict())
    assert torch.equal(model.augment.layers[0].calibration, second.calibration)
    again = copy.deepcopy(model)
    again.load_state_dict(model.state_dict())  # and a whole model's round trip
    model.train()
    model(x).sum().backward()  # trains as a layer loaded out of inference mode does
    assert model.augment.layers[0].raw_magnitudes.grad is not None


# ------------------------------------------------------------------------------------------------- messages
def test_a_numpy_bool_for_stratify_is_named_by_its_value():
    # The message said "stratify must be a bool, got bool" (np.bool_'s class is named bool).
    with pytest.raises(TypeError, match=r"stratify must be a bool, got bool: np\.True_"):
        _model(stratify=np.bool_(True))
