"""Every row of docs/bad_input.md, checked (ids match the table)."""

import math

import pytest
import torch
from torch import nn

import augnet
from augnet import probes
from augnet.data import rotated_glyphs, sinusoids
from augnet.transforms import audio as A
from augnet.transforms import image as T
from augnet.transforms import signal as S

EYE = torch.eye(2, 3).expand(1, 1, 2, 3)
ONE = torch.ones(1, 1)
SRC = torch.zeros(1, 1, dtype=torch.long)


def raises(error, match, f):
    with pytest.raises(error, match=match):
        f()


def layer():
    return augnet.AugmentationLayer([T.Rotate(), T.ShearX()], init_magnitude=0.5)


def model():
    return augnet.AugNet(nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 2)), layer())


CASES = {
    "tap_mix-rank": lambda: raises(
        ValueError, r"x must be a \(B, Ch, H, W\)", lambda: augnet.tap_mix(torch.rand(3, 4, 4), SRC, EYE, None, ONE)
    ),
    "tap_mix-dtype": lambda: raises(
        TypeError,
        "x must be a floating-point",
        lambda: augnet.tap_mix(torch.ones(1, 1, 4, 4, dtype=torch.long), SRC, EYE, None, ONE),
    ),
    "tap_mix-src-dtype": lambda: raises(
        TypeError, "src must be int64", lambda: augnet.tap_mix(torch.rand(1, 1, 4, 4), SRC.int(), EYE, None, ONE)
    ),
    "tap_mix-affine-dtype": lambda: raises(
        TypeError,
        "affine must have the dtype of x",
        lambda: augnet.tap_mix(torch.rand(1, 1, 4, 4), SRC, EYE.double(), None, ONE),
    ),
    "tap_mix-src-range": lambda: raises(
        ValueError,
        r"src indices must lie in \[0, 0\]",
        lambda: augnet.tap_mix(torch.rand(1, 1, 4, 4), SRC + 1, EYE, None, ONE),
    ),
    "tap_mix-device": lambda: raises(
        ValueError,
        "src is on meta but x is on cpu",
        lambda: augnet.tap_mix(torch.rand(1, 1, 4, 4), SRC.to("meta"), EYE, None, ONE),
    ),
    "tap_mix-padding": lambda: raises(
        ValueError,
        "padding must be one of",
        lambda: augnet.tap_mix(torch.rand(1, 1, 4, 4), SRC, EYE, None, ONE, padding="wrap"),
    ),
    "tap_mix-backend": lambda: raises(
        ValueError,
        "unknown tap_mix backend",
        lambda: augnet.tap_mix(torch.rand(1, 1, 4, 4), SRC, EYE, None, ONE, backend="gpu"),
    ),
    "image-rank": lambda: raises(
        ValueError, r"Rotate: expected a 4-D input \(B, Ch, H, W\)", lambda: T.Rotate()(torch.rand(3, 8, 8), 0.5)
    ),
    "image-dtype": lambda: raises(
        TypeError,
        "expected a floating-point tensor",
        lambda: T.Rotate()(torch.ones(1, 3, 8, 8, dtype=torch.uint8), 0.5),
    ),
    "image-magnitude": lambda: raises(
        ValueError, r"magnitude must lie in \[0, 1\], got nan", lambda: T.Rotate()(torch.rand(1, 3, 8, 8), math.nan)
    ),
    "image-magnitude-device": lambda: raises(
        ValueError,
        "magnitude is on meta but x is on cpu",
        lambda: T.Rotate()(torch.rand(1, 3, 8, 8), torch.tensor(0.5, device="meta")),
    ),
    "image-rgb": lambda: raises(
        ValueError, "needs RGB images with 3 channels", lambda: T.Hue()(torch.rand(1, 1, 8, 8), 0.5)
    ),
    "signal-rank": lambda: raises(
        ValueError, r"expected a 3-D input \(B, Ch, T\)", lambda: S.TimeMask()(torch.rand(2, 10), 0.5)
    ),
    "audio-rank": lambda: raises(
        ValueError, r"expected a 3-D input \(B, Ch, T\)", lambda: A.Gain()(torch.rand(2, 10), 0.5)
    ),
    "signal-dtype": lambda: raises(
        TypeError, "floating-point", lambda: S.TimeMask()(torch.ones(2, 2, 10, dtype=torch.long), 0.5)
    ),
    "signal-sfreq": lambda: raises(ValueError, "sfreq", lambda: S.FrequencyShift(-1.0)),
    "audio-sample-rate": lambda: raises(ValueError, "sample_rate", lambda: A.LowPass(0)),
    "signal-magnitude": lambda: raises(ValueError, r"got 2\.0", lambda: S.GaussianNoise()(torch.rand(2, 2, 10), 2.0)),
    "layer-construction": lambda: (
        raises(ValueError, "must not be empty", lambda: augnet.AugmentationLayer([])),
        raises(TypeError, "augnet Transform, got ReLU", lambda: augnet.AugmentationLayer([nn.ReLU()])),
    ),
    "layer-init-magnitude": lambda: raises(
        ValueError, r"lie in \[0, 1\], got inf", lambda: augnet.AugmentationLayer([T.Rotate()], init_magnitude=math.inf)
    ),
    "layer-input": lambda: raises(ValueError, "4-D input", lambda: layer()(torch.rand(3, 8, 8))),
    "layer-copies": lambda: (
        raises(ValueError, "copies must be >= 1, got 0", lambda: layer()(torch.rand(2, 3, 8, 8), copies=0)),
        raises(TypeError, "copies must be an int, got bool", lambda: layer()(torch.rand(2, 3, 8, 8), copies=True)),
    ),
    "model-construction": lambda: (
        raises(TypeError, "trunk must be an nn.Module", lambda: augnet.AugNet(lambda x: x, layer())),
        raises(ValueError, "aggregate must be one of", lambda: augnet.Augerino(nn.Flatten(), aggregate="max")),
        raises(ValueError, "eval_copies must be >= 1", lambda: augnet.AugNet(nn.Flatten(), layer(), eval_copies=0)),
        raises(TypeError, "train_copies must be an int", lambda: augnet.AugNet(nn.Flatten(), layer(), train_copies=2.)),
        raises(TypeError, "stratify must be a bool, got int", lambda: augnet.AugNet(nn.Flatten(), layer(), stratify=1)),
    ),
    "augerino-construction": lambda: (
        raises(ValueError, "backend must be 'auto' or a tap_mix backend", lambda: augnet.Augerino(nn.Flatten(),
                                                                                                 backend="bogus")),
        raises(TypeError, "Augerino expects a tensor of", lambda: augnet.Augerino(nn.Flatten()).augment([1, 2])),
    ),
    "model-input": lambda: raises(TypeError, "expects a tensor input, got list", lambda: model()([1, 2])),
    "model-trunk-output": lambda: raises(
        ValueError,
        "needs a class dimension",
        lambda: augnet.AugNet(nn.Sequential(nn.Flatten(), nn.Linear(192, 1), nn.Flatten(0)), layer())(
            torch.rand(2, 3, 8, 8)
        ),
    ),
    "regularizer": lambda: (
        raises(
            ValueError, "no AugmentationLayer found in Linear", lambda: augnet.selective_regularizer(nn.Linear(2, 2))
        ),
        raises(TypeError, "nn.Module", lambda: augnet.param_groups([1])),
    ),
    "probes-features": lambda: (
        raises(ValueError, "unknown layer", lambda: probes.features(nn.Flatten(), torch.rand(2, 3), "fc")),
        raises(ValueError, "non-empty batch", lambda: probes.features(nn.Flatten(), torch.rand(0, 3), "output")),
        raises(
            ValueError,
            "reduce must be one of",
            lambda: probes.features(nn.Flatten(), torch.rand(2, 3), "output", reduce="max"),
        ),
    ),
    "probes-score": lambda: (
        raises(ValueError, "same shape", lambda: probes.invariance_score(torch.rand(3, 2), torch.rand(3, 4))),
        raises(ValueError, "at least 2 samples", lambda: probes.invariance_score(torch.rand(1, 2), torch.rand(1, 2))),
    ),
    "data": lambda: (
        raises(ValueError, "n must be", lambda: rotated_glyphs(-1)),
        raises(ValueError, "sfreq and duration must be positive", lambda: sinusoids(4, sfreq=-1.0)),
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_error_cases(case):
    CASES[case]()


def test_tap_mix_empty():
    assert augnet.tap_mix(torch.rand(1, 1, 4, 4), SRC[:0], EYE[:0], None, ONE[:0]).shape == (0, 1, 4, 4)


def test_tap_mix_nan():
    x = torch.rand(2, 1, 4, 4)
    x[1, 0, 2, 2] = math.nan
    out = augnet.tap_mix(x, torch.tensor([[0], [1]]), EYE.expand(2, 1, 2, 3), None, torch.ones(2, 1))
    assert torch.isfinite(out[0]).all() and torch.isnan(out[1]).any()


@pytest.mark.parametrize(
    "transform, x",
    [(T.Rotate(), torch.rand(0, 3, 8, 8)), (S.FTSurrogate(), torch.rand(0, 2, 16)), (A.Gain(), torch.rand(0, 1, 16))],
    ids=["image-empty", "signal-empty", "audio-empty"],
)
def test_transform_empty(transform, x):
    assert transform(x, 0.5, copies=2).shape == x.shape


def test_image_nan():
    x = torch.rand(2, 3, 8, 8)
    x[0] = math.nan
    out = T.Brightness()(x, 0.5)
    assert torch.isnan(out[0]).all() and torch.isfinite(out[1]).all()


def test_layer_empty():
    for training in (True, False):
        assert layer().train(training)(torch.rand(0, 3, 8, 8), copies=3).shape == (0, 3, 8, 8)


def test_layer_nan_state():
    bad = layer()
    with torch.no_grad():
        bad.raw_magnitudes[0] = math.inf
    raises(ValueError, "magnitudes contains NaN or infinite values", lambda: bad(torch.rand(2, 3, 8, 8)))


def test_model_empty():
    assert model().eval()(torch.rand(0, 3, 8, 8)).shape == (0, 2)


def test_probes_constant_and_nan():
    with pytest.warns(RuntimeWarning, match="baseline distance"):
        assert torch.isnan(probes.invariance_score(torch.ones(3, 2), torch.ones(3, 2))).all()
    with pytest.raises(ValueError, match=r"z has NaN or infinite features in rows \[0, 1, 2\]"):
        probes.invariance_score(torch.full((3, 2), math.nan), torch.rand(3, 2))
