"""Property-based fuzzing (hypothesis) of tap_mix, every transform and the layer.

Over shapes, dtypes, magnitudes, copies and tap counts: no crash, no NaN, no
in-place change of the input, and the reference and compiled backends agree.
The number of examples per test is FUZZ_EXAMPLES (environment variable
AUGNET_FUZZ_EXAMPLES overrides it).
"""

import os

import torch
from helpers import LAYOUTS, tap_mix_inputs, tol
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import augnet
from augnet.ops import _cpp, tap_mix
from augnet.transforms import audio as A
from augnet.transforms import image as T
from augnet.transforms import signal as S

FUZZ_EXAMPLES = int(os.environ.get("AUGNET_FUZZ_EXAMPLES", "100"))
FUZZ = settings(
    max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
BACKENDS = ["reference"] + (["cpp"] if _cpp.load() else [])
DTYPES = st.sampled_from([torch.float32, torch.float64])


def tensor(shape, dtype, seed, low=0.0, high=1.0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(shape, generator=g, dtype=dtype) * (high - low) + low


@st.composite
def tap_mix_args(draw):
    dtype = draw(DTYPES)
    b, ch = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    h, w = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    n, k = draw(st.integers(1, 7)), draw(st.integers(1, 5))
    seed = draw(st.integers(0, 2**16))
    # A strictly random warp: with an exact identity every sample sits on a pixel
    # centre, where bilinear sampling has a kink and one-sided gradients differ.
    spread = draw(st.floats(0.003, 0.9))  # from nearly the identity to samples far outside the image
    options = dict(color=draw(st.booleans()), layout=draw(st.sampled_from(LAYOUTS)), spread=spread)
    x, src, affine, color, weight = tap_mix_inputs(b, ch, h, w, n, k, dtype, seed=seed, **options)
    padding = draw(st.sampled_from(["zeros", "border", "reflection"]))
    return x, src, affine, color, weight, padding


@FUZZ
@given(tap_mix_args())
def test_tap_mix_backends_agree_and_leave_inputs_alone(args):
    x, src, affine, color, weight, padding = args
    before = [t.clone() for t in (x, src, affine, weight)]
    outs = {name: tap_mix(x, src, affine, color, weight, padding=padding, backend=name) for name in BACKENDS}
    for name, out in outs.items():
        assert out.shape == (src.shape[0], *x.shape[1:]) and out.dtype == x.dtype, name
        assert torch.isfinite(out).all(), name
        torch.testing.assert_close(out, outs["reference"], **tol("cpp", x.dtype))
    assert all(torch.equal(a, b) for a, b in zip((x, src, affine, weight), before, strict=True))


@FUZZ
@given(tap_mix_args(), st.integers(0, 2**16))
def test_tap_mix_gradients_agree(args, seed):
    x, src, affine, color, weight, padding = args
    leaves = (x, affine, color, weight)
    grad_out = tensor((src.shape[0], *x.shape[1:]), x.dtype, seed, -1.0, 1.0)
    grads = {}
    for name in BACKENDS:
        ins = [None if t is None else t.detach().requires_grad_() for t in leaves]  # (a clone makes x dense)
        tap_mix(ins[0], src, ins[1], ins[2], ins[3], padding=padding, backend=name).backward(grad_out)
        grads[name] = [None if t is None else t.grad for t in ins]
    for name, gs in grads.items():
        for g, ref in zip(gs, grads["reference"], strict=True):
            if g is not None:
                assert torch.isfinite(g).all(), name
                # Bilinear sampling has kinks on pixel edges, where one-sided gradients may differ.
                torch.testing.assert_close(g, ref, rtol=1e-3, atol=1e-3 * max(1.0, float(ref.abs().max())))


IMAGE = [
    T.TranslateX, T.TranslateY, T.Rotate, T.ShearX, T.ShearY, T.Scale, T.HorizontalFlip, T.VerticalFlip,
    T.Brightness, T.Contrast, T.Saturation, T.Hue, T.SamplePairing,
]  # fmt: skip
SIGNAL = [
    lambda: S.TimeReverse(), lambda: S.SignFlip(), lambda: S.TimeMask(max_length=10), lambda: S.GaussianNoise(),
    lambda: S.FTSurrogate(), lambda: S.FrequencyShift(100.0), lambda: S.BandStop(100.0),
    lambda: S.ChannelsSymmetry([(0, 1)]), lambda: S.ChannelsShuffle(), lambda: S.ChannelsDropout(),
    lambda: A.AddNoise(), lambda: A.Gain(), lambda: A.LowPass(8000), lambda: A.HighPass(8000),
    lambda: A.BandReject(8000), lambda: A.SpeedChange(),
]  # fmt: skip


@FUZZ
@given(
    st.sampled_from(IMAGE), DTYPES, st.integers(0, 4), st.integers(1, 10), st.integers(1, 10), st.floats(0.0, 1.0),
    st.integers(1, 3), st.integers(0, 2**16),
)  # fmt: skip
def test_image_transforms(cls, dtype, b, h, w, magnitude, copies, seed):
    t = cls()
    ch = 3 if cls in (T.Saturation, T.Hue) else 1 + seed % 4
    x = tensor((b, ch, h, w), dtype, seed)
    before = x.clone()
    out = t(x, magnitude, generator=torch.Generator().manual_seed(seed), copies=copies)
    assert out.shape == (b * copies, ch, h, w) and out.dtype == dtype
    assert torch.isfinite(out).all()
    assert torch.equal(x, before)


#: Faster AutoAugment's other operations (colour maps with a gate, and the non-affine ones).
AUTOAUGMENT = [T.Invert, T.Gray, T.AutoContrast, T.Solarize, T.Posterize, T.Equalize, T.Sharpness]


@FUZZ
@given(
    st.sampled_from(AUTOAUGMENT), DTYPES, st.integers(0, 4), st.integers(1, 10), st.integers(1, 10),
    st.floats(0.0, 1.0), st.integers(1, 3), st.sampled_from(["unit", "wide", "constant"]), st.integers(0, 2**16),
)  # fmt: skip
def test_autoaugment_operations(cls, dtype, b, h, w, magnitude, copies, values, seed):
    # Values in [0, 1], beyond it (a colour transform before may leave it), or constant images (flat
    # histograms, zero ranges): finite outputs and gradients, the input untouched.
    t = cls()
    ch = 3 if cls is T.Gray else 1 + seed % 4
    x = tensor((b, ch, h, w), dtype, seed, *{"unit": (0.0, 1.0), "wide": (-1.0, 2.0)}.get(values, (0.0, 1.0)))
    if values == "constant":
        x = torch.full_like(x, 0.25)
    before = x.clone()
    leaf = x.clone().requires_grad_()
    mag = torch.tensor(magnitude, dtype=torch.float64 if dtype == torch.float64 else torch.float32, requires_grad=True)
    out = t(leaf, mag, generator=torch.Generator().manual_seed(seed), copies=copies)
    assert out.shape == (b * copies, ch, h, w) and out.dtype == dtype
    assert torch.isfinite(out).all()
    out.sum().backward()
    assert leaf.grad is not None and torch.isfinite(leaf.grad).all()
    assert b == 0 or (mag.grad is not None and torch.isfinite(mag.grad))
    assert torch.equal(x, before)


@FUZZ
@given(
    st.sampled_from(range(len(SIGNAL))), DTYPES, st.integers(0, 4), st.integers(2, 4), st.integers(8, 80),
    st.floats(0.0, 1.0), st.integers(1, 3), st.integers(0, 2**16),
)  # fmt: skip
def test_signal_and_audio_transforms(index, dtype, b, ch, time, magnitude, copies, seed):
    t = SIGNAL[index]()
    x = tensor((b, ch, time), dtype, seed, -1.0, 1.0)
    before = x.clone()
    out = t(x, magnitude, generator=torch.Generator().manual_seed(seed), copies=copies)
    assert out.shape == (b * copies, ch, time) and out.dtype == dtype
    assert torch.isfinite(out).all()
    assert torch.equal(x, before)


@FUZZ
@given(
    st.lists(st.sampled_from(IMAGE[:-3]), min_size=1, max_size=5), DTYPES, st.integers(1, 4), st.integers(1, 9),
    st.integers(1, 3), st.booleans(), st.integers(0, 2**16),
)  # fmt: skip
def test_layer_backends_agree(classes, dtype, b, size, copies, training, seed):
    x = tensor((b, 3, size, size), dtype, seed)
    outs = {}
    for name in BACKENDS:
        layer = augnet.AugmentationLayer([c() for c in classes], init_magnitude=0.7, backend=name).to(dtype)
        layer.train(training)
        outs[name] = layer(x, copies=copies, generator=torch.Generator().manual_seed(seed))
        assert torch.isfinite(outs[name]).all()
    for out in outs.values():
        torch.testing.assert_close(out, outs["reference"], **tol("cpp", dtype))


def test_the_compiled_backend_takes_part():
    # The fuzzing above compares backends only if the compiled one is there (CI builds it).
    assert "cpp" in BACKENDS, _cpp.cpp_hint()
