"""A user's audit (round x): a failed load of an AugNet, calibration curves of a float64 / half layer, an exported
torchvision pipeline called on a batch, and SamplePairing's params replayed on another batch."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
from torch import nn

import augnet
from augnet.transforms import image as T


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def model(classes: int) -> augnet.AugNet:
    trunk = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, classes))
    return augnet.AugNet(trunk, augnet.AugmentationLayer([T.Rotate(), T.Brightness()], init_magnitude=0.3))


def trained(classes: int) -> augnet.AugNet:
    net = model(classes)
    layer = net.augment.layers[0]
    layer.calibrate(torch.rand(4, 3, 8, 8, generator=gen(0)), points=5)
    with torch.no_grad():
        layer.weight_logits.copy_(torch.tensor([1.0, -1.0]))
        layer.effect.copy_(torch.tensor([0.5, 2.0]))
        layer.effect_measured.fill_(True)
    layer.temperature, layer.last_size, net.passes = 0.5, (8, 8), 7
    return net


def augnet_state(net: augnet.AugNet):
    layer = net.augment.layers[0]
    tensors = {k: v.clone() for k, v in net.augment.state_dict().items()}
    return net.passes, layer.temperature, layer.last_size, layer.calibration is None, tensors


def same(a, b) -> bool:
    return a[:4] == b[:4] and a[4].keys() == b[4].keys() and all(torch.equal(a[4][k], b[4][k]) for k in a[4])


# ---------------------------------------------------------------- 1. a failed load of an AugNet


@pytest.mark.parametrize("assign", [False, True])
@pytest.mark.parametrize("how", ["size", "missing", "unexpected"])
def test_a_failed_load_leaves_augnets_own_state_as_it_was(how, assign):
    # The trunk's size mismatch (or a strict key missing or unexpected) raised at the end of torch's load, after
    # the pass count, the layer's weights, magnitudes, calibration, effects, temperature and size had been loaded.
    source = trained(5 if how == "size" else 10)
    state = source.state_dict()
    if how == "missing":
        del state["trunk.1.bias"]
    if how == "unexpected":
        state["trunk.extra"] = torch.zeros(1)
    net = model(10)
    before = augnet_state(net)
    with pytest.raises(RuntimeError, match="Error"):
        net.load_state_dict(state, assign=assign)
    assert same(augnet_state(net), before)
    out = net.eval()(torch.rand(2, 3, 8, 8, generator=gen(1)), generator=gen(2))  # still a working model
    assert out.shape == (2, 10)


def test_a_valid_load_is_unchanged():
    source = trained(10)
    net = model(10)
    result = net.load_state_dict(source.state_dict())
    assert not result.missing_keys and not result.unexpected_keys
    assert same(augnet_state(net), augnet_state(source))
    partial = model(10)
    result = partial.load_state_dict({"trunk.1.weight": source.trunk[1].weight}, strict=False)
    assert "trunk.1.bias" in result.missing_keys and torch.equal(partial.trunk[1].weight, source.trunk[1].weight)


# ---------------------------------------------------------------- 2. calibration curves in the layer's dtype


def layer_of(dtype) -> augnet.AugmentationLayer:
    return augnet.AugmentationLayer([T.Rotate(), T.Brightness()], init_magnitude=0.3).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16])
def test_calibrate_gives_curves_in_the_layers_dtype(dtype):
    # A float64 or half layer kept float32 curves, which .to(dtype) after calibrate and a load into a fresh layer
    # of that dtype both give in the layer's dtype: a half layer's state reloaded into a half layer gave other
    # magnitudes and another policy than the layer it was saved from.
    x = torch.rand(4, 3, 8, 8, generator=gen(3))
    layer = layer_of(dtype)
    curves = layer.calibrate(x, points=5)
    assert curves.dtype == dtype and layer.calibration.dtype == dtype
    cast_after = layer_of(torch.float32)
    cast_after.calibrate(x, points=5)
    assert torch.equal(curves, cast_after.to(dtype).calibration)
    again = layer_of(dtype)
    again.load_state_dict(layer.state_dict())
    assert torch.equal(again.calibration, layer.calibration) and torch.equal(again.magnitudes, layer.magnitudes)
    assert again.policy() == layer.policy()


def test_a_change_beyond_a_half_layers_range_is_refused_and_the_layer_kept():
    x = torch.rand(4, 3, 8, 8, generator=gen(4))
    layer = layer_of(torch.float16)
    before = copy.deepcopy(layer.state_dict())
    features = lambda z: z.flatten(1) - x.flatten(1) + 1e-6  # noqa: E731 - a change 1e5 times the clean features'
    with pytest.raises(ValueError, match=r"beyond torch.float16's range"):
        layer.calibrate(x, points=3, features=features)
    assert layer.calibration is None
    assert all(torch.equal(v, layer.state_dict()[k]) for k, v in before.items())
    assert layer_of(torch.float32).calibrate(x, points=3, features=features).dtype == torch.float32  # float32 takes it


# ---------------------------------------------------------------- 3. a torchvision pipeline called on a batch


def pipeline():
    pytest.importorskip("torchvision")
    module = augnet.AugmentationModule([augnet.AugmentationLayer([T.Rotate(), T.HorizontalFlip()])])
    return module.policy().to_torchvision()


def test_a_torchvision_pipeline_warns_once_when_called_on_a_batch():
    # torchvision draws once per call: on a (B, Ch, H, W) batch every sample got the same augmentation, silently.
    from torchvision import tv_tensors
    from torchvision.transforms import v2

    pipe = pipeline()
    assert isinstance(pipe, v2.Compose)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pipe(torch.rand(3, 8, 8))  # one image: no warning
        pipe(torch.rand(1, 3, 8, 8))  # a batch of one: nothing to tell apart
        pipe(tv_tensors.Video(torch.rand(4, 3, 8, 8)))  # one video: one draw is torchvision's meaning
    with pytest.warns(UserWarning, match=r"batch of images \(shape \(4, 3, 8, 8\)\).*same augmentation.*to_kornia"):
        pipe(torch.rand(4, 3, 8, 8))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pipe(torch.rand(4, 3, 8, 8))  # once per pipeline
    outer = v2.Compose([v2.ToDtype(torch.float32), pipeline()])  # nested, as the docs put it
    with pytest.warns(UserWarning, match="batch of images"):
        outer(tv_tensors.Image(torch.rand(2, 3, 8, 8)), 1)


def test_a_torchvision_pipelines_draws_and_stages_are_unchanged():
    from torchvision.transforms import v2

    pipe = pipeline()
    plain = v2.Compose(list(pipe.transforms))
    x = torch.rand(3, 8, 8, generator=gen(5))
    torch.manual_seed(0)
    a = [pipe(x) for _ in range(4)]
    torch.manual_seed(0)
    b = [plain(x) for _ in range(4)]
    assert all(torch.equal(u, v) for u, v in zip(a, b, strict=True))
    assert repr(pipe).partition("(")[2] == repr(plain).partition("(")[2]


# ---------------------------------------------------------------- 4. SamplePairing's params on another batch


def test_sample_pairing_params_of_another_batch_are_refused():
    # Params of 3 samples x 2 copies replayed on 6 samples x 1 copy had the right rows: rows 3 to 5 blended
    # samples 0 to 2 (their 'own' indices) into the output of samples 3 to 5, silently.
    t = T.SamplePairing()
    x3, x6 = torch.rand(3, 3, 4, 4, generator=gen(6)), torch.rand(6, 3, 4, 4, generator=gen(7))
    params = t.draw_params(x3, 1.0, generator=gen(8), copies=2)
    with pytest.raises(ValueError, match=r"SamplePairing: params were drawn for a batch of 3 samples.*x has 6"):
        t(x6, 1.0, params=params)
    with pytest.raises(ValueError, match=r"a batch of 3 samples"):
        t.apply_transform(x6, params)
    six = t.draw_params(x6, 1.0, generator=gen(9))
    with pytest.raises(ValueError, match=r"SamplePairing: params were drawn for a batch of 6 samples.*x has 3"):
        t(x3, 1.0, params=six, copies=2)


def test_sample_pairing_replays_its_own_params_exactly():
    t = T.SamplePairing()
    x = torch.rand(3, 3, 4, 4, generator=gen(10))
    params = t.draw_params(x, 0.7, generator=gen(11), copies=2)
    assert torch.equal(t(x, 0.7, params=params, copies=2), t(x, 0.7, generator=gen(11), copies=2))
    layer = augnet.AugmentationLayer([T.SamplePairing(), T.Rotate()])
    assert layer(x, copies=2, generator=gen(12)).shape == (6, 3, 4, 4)


def test_a_torchvision_pipeline_that_draws_nothing_does_not_warn_on_a_batch():
    from augnet.policy import Policy

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pipe = Policy([[], []]).to_torchvision()
        x = torch.rand(4, 3, 8, 8, generator=gen(13))
        assert torch.equal(pipe(x), x)
