"""AugmentationLayer and AugmentationModule."""

import math

import pytest
import torch
from helpers import TOL, gen
from torch.func import functional_call

import augnet
from augnet.layers import inward_clamp
from augnet.transforms import Transform
from augnet.transforms import image as T

F64 = torch.float64


class NoTaps(Transform):
    """Wraps a tap transform but hides its taps, forcing the generic path."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def sample(self, x, magnitude, generator=None, copies=1):
        return self.inner.sample(x, magnitude, generator=generator, copies=copies)

    def apply_transform(self, x, params):
        return self.inner.apply_transform(x, params)


def images(b=4, ch=3, h=8, w=9, dtype=torch.float32, seed=0):
    return torch.rand(b, ch, h, w, generator=gen(seed), dtype=dtype)


def hand_mixture(layer, x, copies, seed):
    """sum_q w_q T_q(x) with the layer's sampling order, written out."""
    g = gen(seed)
    w, mu = layer.weights, layer.magnitudes
    params = [t.sample(x, mu[q], generator=g, copies=copies) for q, t in enumerate(layer.transforms)]
    return sum(w[q] * t.apply_transform(x, p) for q, (t, p) in enumerate(zip(layer.transforms, params, strict=True)))


# ------------------------------------------------------------------ state


def test_weights_are_a_softmax_with_temperature():
    layer = augnet.AugmentationLayer([T.Rotate(), T.ShearX(), T.Scale()], temperature=0.5)
    with torch.no_grad():
        layer.weight_logits.copy_(torch.tensor([1.0, 0.0, -1.0]))
    expected = torch.softmax(torch.tensor([2.0, 0.0, -2.0]), 0)
    torch.testing.assert_close(layer.weights, expected)
    assert math.isclose(float(layer.weights.detach().sum()), 1.0, rel_tol=1e-6)


def test_weights_and_magnitudes_are_read_only():
    layer = augnet.AugmentationLayer([T.Rotate()])
    with pytest.raises(AttributeError):
        layer.weights = torch.ones(1)
    with pytest.raises(AttributeError):
        layer.magnitudes = torch.ones(1)


def test_inward_clamp_keeps_only_gradients_that_point_inside():
    raw = torch.tensor([-0.2, 0.0, 0.5, 1.0, 1.3], requires_grad=True)
    out = inward_clamp(raw)
    torch.testing.assert_close(out, torch.tensor([0.0, 0.0, 0.5, 1.0, 1.0]))
    # d(sum)/d raw = +1: a descent step lowers raw, which is outward at 0 and inward at 1.
    out.sum().backward()
    torch.testing.assert_close(raw.grad, torch.tensor([0.0, 0.0, 1.0, 1.0, 1.0]))
    raw.grad = None
    (-inward_clamp(raw)).sum().backward()
    torch.testing.assert_close(raw.grad, torch.tensor([-1.0, -1.0, -1.0, 0.0, 0.0]))


@pytest.mark.parametrize("init", [0.0, 1.0])
def test_task_gradient_reaches_a_magnitude_sitting_on_a_bound(init):
    # For a linear loss L and its opposite -L, the gradient in a magnitude
    # sitting on a bound survives in exactly the one that points inside.
    layer = augnet.AugmentationLayer([T.Rotate()], init_magnitude=init)
    r = torch.randn(4, 3, 8, 9, generator=gen(2))
    grads = []
    for sign in (1.0, -1.0):
        layer.zero_grad()
        (sign * (layer(images(), generator=gen(1)) * r).sum()).backward()
        grads.append(float(layer.raw_magnitudes.grad))
    inward = [g for g in grads if (g < 0 if init == 0.0 else g > 0)]
    outward = [g for g in grads if g not in inward]
    assert len(inward) == 1 and outward == [0.0]


def test_init_magnitude_per_transform():
    layer = augnet.AugmentationLayer([T.Rotate(), T.ShearX()], init_magnitude=[0.1, 0.7])
    torch.testing.assert_close(layer.magnitudes, torch.tensor([0.1, 0.7]))


def test_state_dict_round_trip():
    a = augnet.AugmentationLayer([T.Rotate(), T.ShearX(), T.Brightness()], init_magnitude=0.3)
    with torch.no_grad():
        a.weight_logits.copy_(torch.tensor([0.5, -0.2, 0.1]))
        a.raw_magnitudes.copy_(torch.tensor([0.2, 0.9, 0.4]))
    b = augnet.AugmentationLayer([T.Rotate(), T.ShearX(), T.Brightness()])
    b.load_state_dict(a.state_dict())
    torch.testing.assert_close(b.weights, a.weights)
    torch.testing.assert_close(b.magnitudes, a.magnitudes)
    x = images()
    torch.testing.assert_close(b(x, copies=2, generator=gen(3)), a(x, copies=2, generator=gen(3)))


def test_policy_and_repr():
    layer = augnet.AugmentationLayer([T.Rotate(), T.TranslateX()], init_magnitude=[0.25, 0.5])
    layer(images(h=8, w=20))
    policy = layer.policy()
    assert [e["transform"] for e in policy] == ["Rotate", "TranslateX"]
    assert policy[0]["range"] == (-45.0, 45.0, "deg")
    assert policy[1]["range"] == (-2.5, 2.5, "px")  # half the magnitude-1 shift of a quarter of the width 20
    assert math.isclose(policy[0]["weight"], 0.5)
    text = repr(layer)
    assert "Rotate(w=0.500, mu=0.250)" in text and "TranslateX(w=0.500, mu=0.500)" in text


# ---------------------------------------------------------------- forward


@pytest.mark.parametrize("copies", [1, 3])
def test_training_output_is_the_weighted_sum_of_the_transforms(copies):
    layer = augnet.AugmentationLayer(
        [T.TranslateX(), T.Rotate(padding="border"), T.HorizontalFlip(), T.Contrast(), T.SamplePairing()],
        init_magnitude=[0.3, 0.4, 0.5, 0.6, 0.7],
        train_mode="mix",
    )
    with torch.no_grad():
        layer.weight_logits.copy_(torch.tensor([0.3, -0.1, 0.2, 0.0, -0.4]))
    x = images()
    out = layer(x, copies=copies, generator=gen(9))
    torch.testing.assert_close(out, hand_mixture(layer, x, copies, 9), **TOL[torch.float32])


def test_gradcheck_of_the_layer_in_float64():
    transforms = [
        T.TranslateX(),
        T.Rotate(),
        T.ShearY(),
        T.Scale(),
        T.Brightness(),
        T.Contrast(),
        T.Hue(),
        T.SamplePairing(),
    ]
    layer = augnet.AugmentationLayer(transforms, train_mode="mix").double()
    x = images(b=2, h=5, w=4, dtype=F64).requires_grad_()
    logits = torch.randn(len(transforms), dtype=F64, generator=gen(1)).requires_grad_()
    raw = torch.linspace(0.2, 0.8, len(transforms), dtype=F64).requires_grad_()

    def f(x, logits, raw):
        params = {"weight_logits": logits, "raw_magnitudes": raw}
        return functional_call(layer, params, (x,), {"copies": 2, "generator": gen(4)})

    assert torch.autograd.gradcheck(f, (x, logits, raw))


@pytest.mark.parametrize("wrap", [False, True], ids=["taps", "generic"])
def test_evaluation_draws_one_transform_per_row_with_probability_w(wrap):
    def maybe(t):
        return NoTaps(t) if wrap else t

    # At magnitude 1 the flips are certain, and Rotate at magnitude 0 is the identity.
    layer = augnet.AugmentationLayer(
        [maybe(T.HorizontalFlip()), maybe(T.VerticalFlip()), maybe(T.Rotate())], init_magnitude=[1.0, 1.0, 0.0]
    )
    probs = torch.tensor([0.5, 0.3, 0.2])
    with torch.no_grad():
        layer.weight_logits.copy_(probs.log())
    layer.eval()
    x = images(b=3, dtype=F64)
    out = layer(x, copies=1000, generator=gen(0)).reshape(1000, 3, -1)
    candidates = torch.stack([x.flip(-1), x.flip(-2), x]).reshape(3, 1, 3, -1)
    dist = (out[None] - candidates).abs().amax(-1)  # (3 candidates, 1000 copies, 3 samples)
    match = dist < 1e-9
    assert match.any(0).all(), "every copy must be exactly one of the candidate transforms"
    freq = match.float().mean((1, 2))
    assert torch.allclose(freq, probs, atol=0.03)


def test_generic_path_matches_the_tap_path():
    fast = augnet.AugmentationLayer([T.Rotate(), T.TranslateY(), T.Saturation()], init_magnitude=[0.4, 0.3, 0.8])
    slow = augnet.AugmentationLayer([NoTaps(T.Rotate()), NoTaps(T.TranslateY()), NoTaps(T.Saturation())])
    state = {k: v for k, v in fast.state_dict().items() if k != "_extra_state"}  # other classes (the wrappers)
    slow.load_state_dict(state, strict=False)
    assert fast.uses_taps and not slow.uses_taps
    x = images()
    torch.testing.assert_close(slow(x, copies=2, generator=gen(5)), fast(x, copies=2, generator=gen(5)))
    fast.eval(), slow.eval()
    torch.testing.assert_close(slow(x, copies=2, generator=gen(5)), fast(x, copies=2, generator=gen(5)))


def test_eval_mode_mix_keeps_the_training_blend():
    layer = augnet.AugmentationLayer([T.Rotate(), T.ShearX()], init_magnitude=0.5, eval_mode="mix", train_mode="mix")
    x = images()
    train = layer(x, copies=2, generator=gen(1))
    layer.eval()
    torch.testing.assert_close(layer(x, copies=2, generator=gen(1)), train)


def test_generator_makes_runs_identical():
    layer = augnet.AugmentationLayer([T.Rotate(), T.TranslateX(), T.HorizontalFlip()], init_magnitude=0.5)
    x = images()
    for mode in (layer.train, layer.eval):
        mode()
        assert torch.equal(layer(x, copies=3, generator=gen(7)), layer(x, copies=3, generator=gen(7)))
        assert not torch.equal(layer(x, copies=3, generator=gen(7)), layer(x, copies=3, generator=gen(8)))


@pytest.mark.parametrize("training", [True, False])
def test_copies_are_copy_major_at_magnitude_zero(training):
    layer = augnet.AugmentationLayer([T.Rotate(), T.HorizontalFlip()], init_magnitude=0.0).train(training)
    x = images(b=3)
    out = layer(x, copies=4, generator=gen(0))
    torch.testing.assert_close(out, x.repeat(4, 1, 1, 1), atol=1e-6, rtol=0)


def test_module_makes_copies_once_then_works_row_by_row():
    first = augnet.AugmentationLayer([T.Rotate()], init_magnitude=0.5)
    second = augnet.AugmentationLayer([T.Brightness()], init_magnitude=0.5)
    module = augnet.AugmentationModule([first, second])
    x = images(b=3)
    out = module(x, copies=2, generator=gen(3))
    g = gen(3)
    expected = second(first(x, copies=2, generator=g), generator=g)
    torch.testing.assert_close(out, expected)
    assert out.shape == (6, *x.shape[1:])


def test_layer_without_copies_keeps_the_batch_size():
    layer = augnet.AugmentationLayer([T.Rotate()])
    assert layer(images(b=5)).shape == (5, 3, 8, 9)


def test_empty_batch_gives_an_empty_output():
    layer = augnet.AugmentationLayer([T.Rotate(), T.HorizontalFlip()])
    for mode in (layer.train, layer.eval):
        mode()
        assert layer(images(b=0), copies=2).shape == (0, 3, 8, 9)


def test_input_is_not_modified():
    layer = augnet.AugmentationLayer([T.Rotate(), T.Contrast(), T.SamplePairing()], init_magnitude=0.5)
    x = images().requires_grad_()
    before = x.detach().clone()
    layer(x, copies=2).sum().backward()
    assert torch.equal(x.detach(), before)


# -------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(transforms=[]), ValueError, "transforms must not be empty"),
        (dict(transforms=T.Rotate()), TypeError, "sequence of Transform"),
        (dict(transforms=[torch.nn.ReLU()]), TypeError, "augnet Transform, got ReLU"),
        (dict(transforms=[T.Rotate]), TypeError, r"augnet Transform, got the class Rotate; pass Rotate\(\)"),
        (dict(init_magnitude=float("nan")), ValueError, r"lie in \[0, 1\], got nan"),
        (dict(init_magnitude=1.5), ValueError, r"got 1.5"),
        (dict(init_magnitude=[0.1, 0.2, 0.3]), ValueError, "3 values for 2 transforms"),
        (dict(temperature=0.0), ValueError, "temperature must be positive"),
        (dict(eval_mode="average"), ValueError, "eval_mode must be one of"),
    ],
)
def test_bad_construction(kwargs, error, match):
    kwargs = {"transforms": [T.Rotate(), T.ShearX()], **kwargs}
    with pytest.raises(error, match=match):
        augnet.AugmentationLayer(**kwargs)


def test_bad_forward_inputs():
    layer = augnet.AugmentationLayer([T.Rotate(), T.ShearX()])
    with pytest.raises(ValueError, match=r"4-D input \(B, Ch, H, W\), got shape \(3, 8, 8\)"):
        layer(torch.rand(3, 8, 8))
    with pytest.raises(TypeError, match=r"floating-point tensor, got dtype torch\.int64"):
        layer(torch.ones(2, 3, 8, 8, dtype=torch.long))
    with pytest.raises(ValueError, match="copies must be >= 1, got 0"):
        layer(images(), copies=0)
    with pytest.raises(TypeError, match="copies must be an int"):
        layer(images(), copies=2.0)
    module = augnet.AugmentationModule([layer])
    with pytest.raises(ValueError, match="copies must be >= 1, got -1"):
        module(images(), copies=-1)


def test_nan_magnitude_in_the_state_is_reported():
    layer = augnet.AugmentationLayer([T.Rotate(), T.ShearX()])
    state = layer.state_dict()
    state["raw_magnitudes"] = torch.tensor([0.5, float("nan")])
    layer.load_state_dict(state)
    x = images()
    before = x.clone()
    with pytest.raises(ValueError, match="magnitudes contains NaN"):
        layer(x)
    assert torch.equal(x, before)


def test_module_rejects_what_is_not_a_layer():
    with pytest.raises(ValueError, match="layers must not be empty"):
        augnet.AugmentationModule([])
    with pytest.raises(TypeError, match="AugmentationLayer, got Linear"):
        augnet.AugmentationModule([torch.nn.Linear(2, 2)])


# ------------------------------------------------------------------ calibrated magnitudes


def smooth_images(b=16, size=16, seed=0):
    """Images with structure at the scale of a few pixels (upsampled noise), as natural images have."""
    coarse = torch.rand(b, 3, size // 4, size // 4, generator=gen(seed))
    return torch.nn.functional.interpolate(coarse, size=(size, size), mode="bilinear", align_corners=False)


def calibrated_layer(init=0.25, seed=0, points=33):
    layer = augnet.AugmentationLayer([T.TranslateX(max_shift=0.5), T.Rotate(), T.ShearX()], init_magnitude=init)
    x = smooth_images(seed=seed)
    layer.calibrate(x, points=points)
    return layer, x


def rms_change(t, x, m, seed=0):
    return float((((t(x, m, generator=gen(seed)) - x) ** 2).mean() / (x**2).mean()).sqrt())


def test_calibration_makes_equal_magnitudes_equal_input_changes():
    layer, x = calibrated_layer()
    caps = layer.magnitude_caps
    assert caps.shape == (3,) and float(caps.max()) == 1.0 and (caps > 0).all()
    # magnitudes keep their values (here all 0.25, under every cap) ...
    torch.testing.assert_close(layer.magnitudes.detach(), torch.full((3,), 0.25))
    # ... and now mean the same expected input change for every transform
    ref = float(layer.calibration[:, -1].max())
    m = layer.transform_magnitudes.detach()
    changes = [rms_change(t, x, float(m[q])) for q, t in enumerate(layer.transforms)]
    for c in changes:  # up to the piecewise-linear reading of the measured curve between grid points
        assert c == pytest.approx(0.25 * ref, rel=0.05)
    # the curve is the measured change at every grid point, monotone
    grid = torch.linspace(0, 1, 33)
    assert (layer.calibration.diff(dim=1) >= 0).all()
    assert float(layer.calibration[1, 8]) == pytest.approx(rms_change(layer.transforms[1], x, float(grid[8])), rel=1e-5)


def test_a_transform_cannot_exceed_its_cap_and_the_regulariser_sees_calibrated_magnitudes():
    layer, _ = calibrated_layer(init=1.0)
    caps = layer.magnitude_caps
    torch.testing.assert_close(layer.magnitudes.detach(), caps)  # raised to at most each cap
    torch.testing.assert_close(layer.transform_magnitudes.detach(), torch.ones(3))  # each at its full range
    shear = 2
    assert float(caps[shear]) < 0.6  # a shear of 0.3 changes these images far less than a half-width shift
    expected = -(layer.weights * caps).norm()
    torch.testing.assert_close(augnet.selective_regularizer(layer, saturation=None), expected)


def test_calibrated_magnitudes_are_differentiable_and_identity_at_zero():
    layer, x = calibrated_layer()
    mu = layer.magnitudes
    m = layer.transform_magnitudes
    (m.sum()).backward()
    assert (layer.raw_magnitudes.grad > 0).all()  # more magnitude, more of each transform
    with torch.no_grad():
        layer.raw_magnitudes.zero_()
    assert torch.equal(layer.transform_magnitudes.detach(), torch.zeros(3))
    torch.testing.assert_close(layer(x, copies=2), x.repeat(2, 1, 1, 1))
    assert mu.shape == (3,)


def test_calibration_round_trips_through_the_state_dict_and_can_be_cleared():
    layer, _ = calibrated_layer()
    copy = augnet.AugmentationLayer([T.TranslateX(), T.Rotate(), T.ShearX()])  # never calibrated
    copy.load_state_dict(layer.state_dict())
    torch.testing.assert_close(copy.transform_magnitudes, layer.transform_magnitudes)
    plain = augnet.AugmentationLayer([T.TranslateX(), T.Rotate(), T.ShearX()])
    layer.load_state_dict(plain.state_dict())  # an uncalibrated state clears the calibration
    assert layer.calibration is None
    layer.load_state_dict(copy.state_dict())
    assert "calibrated" in repr(layer)
    before = layer.transform_magnitudes.detach().clone()
    layer.clear_calibration()
    assert layer.calibration is None
    torch.testing.assert_close(layer.magnitudes.detach(), before)  # the transforms run as before
    policy = layer.policy((16, 16))
    assert policy[1]["range"].high == pytest.approx(float(before[1]) * 180, rel=1e-4)


def test_calibration_bad_input():
    layer = augnet.AugmentationLayer([T.Rotate()])
    with pytest.raises(ValueError, match="non-empty batch"):
        layer.calibrate(torch.rand(0, 3, 8, 8))
    with pytest.raises(ValueError, match="points must be"):
        layer.calibrate(images(), points=1)
    with pytest.raises(ValueError, match="not all zero"):
        layer.calibrate(torch.zeros(2, 3, 8, 8))
    assert layer.calibration is None  # nothing was changed


# ------------------------------------------------------------------ policy files


def test_policy_file_round_trip_rebuilds_an_identical_module(tmp_path):
    import json

    first = augnet.AugmentationLayer([T.Rotate(max_angle=1.0), T.Brightness(max_shift=0.2)], temperature=0.5)
    second = augnet.AugmentationLayer([T.HorizontalFlip(temperature=0.2), T.ShearX(padding="border")], eval_mode="mix")
    with torch.no_grad():
        first.weight_logits.copy_(torch.tensor([0.3, -0.1]))
        first.raw_magnitudes.copy_(torch.tensor([0.7, 0.2]))
        second.raw_magnitudes.copy_(torch.tensor([1.0, 0.05]))
    module = augnet.AugmentationModule([first, second])
    x = smooth_images(b=4)
    first.calibrate(x, points=9)
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(module.policy((16, 16)).to_json()))
    again = augnet.AugmentationModule.from_policy(path)
    assert again.policy((16, 16)).to_json() == module.policy((16, 16)).to_json()
    for a, b in zip(module.state_dict().values(), again.state_dict().values(), strict=True):
        assert torch.equal(a, b)  # bit for bit: the file keeps the exact parameters and the calibration
    assert again.layers[0].temperature == 0.5 and again.layers[1].eval_mode == "mix"
    assert again.layers[1].transforms[1].padding == "border"
    for training in (True, False):
        module.train(training), again.train(training)
        torch.testing.assert_close(again(x, copies=2, generator=gen(5)), module(x, copies=2, generator=gen(5)))
    entry = module.policy()[0][0]
    assert entry["args"] == {"max_angle": 1.0, "padding": "zeros"} and "transform_magnitude" in entry


def test_policy_file_bad_input():
    from augnet.layers import Policy

    good = augnet.AugmentationModule([augnet.AugmentationLayer([T.Rotate()])]).policy().to_json()
    with pytest.raises(ValueError, match="not an augnet policy file"):
        augnet.AugmentationModule.from_policy({"layers": []})
    with pytest.raises(ValueError, match="unsupported policy file version 7"):
        Policy.from_json({**good, "version": 7})
    broken = {**good, "layers": [{**good["layers"][0], "transforms": [{**good["layers"][0]["transforms"][0],
                                                                       "transform": "Twirl"}]}]}  # fmt: skip
    with pytest.raises(ValueError, match="unknown transform 'Twirl'"):
        augnet.AugmentationModule.from_policy(broken)
    bare_entry = {"transform": "Rotate", "weight": 1.0, "magnitude": 0.5, "range": [0, 1, ""]}
    no_args = {**good, "layers": [{**good["layers"][0], "transforms": [bare_entry]}]}
    with pytest.raises(ValueError, match="has no 'args'"):
        augnet.AugmentationModule.from_policy(no_args)
    with pytest.raises(ValueError, match="no layer settings"):
        augnet.AugmentationModule.from_policy(Policy([[]]))
    with pytest.raises(TypeError, match="policy must be"):
        augnet.AugmentationModule.from_policy(42)


@pytest.mark.parametrize("train_mode", ["mix", "sample"])
def test_a_layer_at_magnitude_zero_passes_the_input_gradient_through_unchanged(train_mode):
    # Solarize has no tap form, so the layer runs each transform's own call: at magnitude 0 each is the identity,
    # in value and in the derivative in the input (the flips' and the pairing's counted the input twice).
    layer = augnet.AugmentationLayer([T.HorizontalFlip(), T.SamplePairing(), T.Solarize()], init_magnitude=0.0,
                                     train_mode=train_mode).double()  # fmt: skip
    x = torch.rand(4, 3, 8, 8, dtype=torch.float64, requires_grad=True)
    out = layer(x, generator=torch.Generator().manual_seed(0))
    upstream = torch.randn(out.shape, dtype=out.dtype, generator=torch.Generator().manual_seed(1))
    (grad,) = torch.autograd.grad(out, x, upstream)
    torch.testing.assert_close(grad, upstream, atol=1e-9, rtol=1e-9)
