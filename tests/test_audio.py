"""Audio transforms: each one against SciPy or a property of the maths, in a layer, and bad inputs.

The transform contract runs on each of them in test_transform_contract.py.
No test here skips: the audio transforms are plain PyTorch and must load wherever augnet does.
"""

import importlib.util
import math
import sys

import numpy as np
import pytest
import scipy.signal
import torch
from helpers import gen
from transform_cases import SR, cases, specs, waves

import augnet
from augnet.transforms import audio as A

F64 = torch.float64
AUDIO = {c.name: c for c in cases("audio")}
NAMES = list(AUDIO)
FILTERS = ["LowPass", "HighPass", "BandReject"]


def build(name):
    """A fresh transform of the case ``name`` and its input maker ``make(b, dtype)``."""
    return AUDIO[name].build(), AUDIO[name].make


def tone(freq, t=2048, sr=SR, dtype=F64):
    return torch.sin(2 * math.pi * freq * torch.arange(t, dtype=dtype) / sr)


@pytest.mark.parametrize("name", FILTERS)
def test_filter_gradient_at_magnitude_zero_is_finite_and_useful(name):
    # At mu = 0 the output is the input exactly, and the magnitude's gradient is that of the filter family as mu
    # leaves 0: finite (no NaN from the marginal biquad) and not 0, so a magnitude at 0 can grow.
    t, make = build(name)
    x = make(4, torch.float32).requires_grad_()
    mag = torch.tensor(0.0, requires_grad=True)
    out = t(x, mag, generator=gen(1), copies=2)
    r = torch.randn(out.shape, generator=gen(2))
    (out * r).sum().backward()
    assert torch.equal(out, x.detach().repeat(2, 1, 1))
    assert torch.isfinite(mag.grad) and mag.grad != 0
    torch.testing.assert_close(x.grad, r.reshape(2, *x.shape).sum(0))  # the identity's gradient


# ------------------------------------------------- against SciPy and the maths


def test_gain_is_the_decibel_factor():
    x = waves(b=4, dtype=F64)
    gains = [-6.0, -1.5, 0.0, 4.25]
    out = A.Gain().apply_transform(x, {"gain_db": torch.tensor(gains, dtype=F64)})
    for i, g in enumerate(gains):
        torch.testing.assert_close(out[i], x[i] * 10 ** (g / 20), rtol=1e-12, atol=1e-12)


def test_gain_range():
    params = A.Gain(max_gain_db=6.0).sample(waves(b=64), 0.5, generator=gen(0))
    g = params["gain_db"]
    assert g.abs().max() <= 3.0 and g.abs().max() > 2.5 and g.min() < 0 < g.max()


def test_add_noise_reaches_the_snr_exactly_per_channel():
    x = waves(b=2, t=512, dtype=F64)
    t = A.AddNoise()
    noise = torch.randn(x.shape, generator=gen(4), dtype=F64)
    for snr in (-5.0, 0.0, 10.0, 30.0):
        ratio = torch.full((2,), 10 ** (-snr / 20), dtype=F64)
        out = t.apply_transform(x, {"noise_ratio": ratio, "noise": noise})
        added = out - x
        # The added part is the drawn noise, rescaled per channel (not reshaped or re-drawn).
        scale = added.norm(dim=-1) / noise.norm(dim=-1)
        torch.testing.assert_close(added, scale[..., None] * noise, rtol=1e-10, atol=1e-12)
        achieved = 10 * torch.log10(x.square().sum(-1) / added.square().sum(-1))
        torch.testing.assert_close(achieved, torch.full_like(achieved, snr), rtol=0, atol=1e-9)


def test_add_noise_snr_follows_the_magnitude():
    # SNR = min_snr_db - 20 log10(mu * u): at mu = 1 never below min_snr_db, at mu = 0.1 20 dB higher.
    x = waves(b=64, dtype=F64)
    t = A.AddNoise(min_snr_db=3.0)
    snr1 = -20 * torch.log10(t.sample(x, 1.0, generator=gen(0))["noise_ratio"])
    snr01 = -20 * torch.log10(t.sample(x, 0.1, generator=gen(0))["noise_ratio"])
    assert snr1.min() >= 3.0 - 1e-9 and snr1.min() < 3.5
    torch.testing.assert_close(snr01, snr1 + 20.0)


def test_add_noise_gradient_at_zero_is_the_derivative():
    # The noisy output is linear in mu, so the gradient at mu = 0 equals a finite difference.
    t = A.AddNoise()
    x = waves(b=3, dtype=F64)
    r = torch.randn(x.shape, generator=gen(9), dtype=F64)
    mag = torch.tensor(0.0, dtype=F64, requires_grad=True)
    (t(x, mag, generator=gen(5)) * r).sum().backward()
    step = 1e-3
    diff = ((t(x, step, generator=gen(5)) - x) * r).sum() / step
    torch.testing.assert_close(mag.grad, diff, rtol=1e-8, atol=1e-10)


def test_add_noise_leaves_silent_channels_silent_with_finite_gradients():
    x = waves(b=2, dtype=F64)
    x[0, 1] = 0.0
    x.requires_grad_()
    mag = torch.tensor(0.7, dtype=F64, requires_grad=True)
    out = A.AddNoise()(x, mag, generator=gen(0))
    assert torch.equal(out[0, 1], torch.zeros_like(out[0, 1]))
    assert not torch.equal(out[0, 0], x[0, 0])
    out.square().sum().backward()
    assert torch.isfinite(x.grad).all() and torch.isfinite(mag.grad)


def lfilter_reference(x, b, a):
    return torch.from_numpy(scipy.signal.lfilter(b.numpy(), a.numpy(), x.numpy(), axis=-1))


@pytest.mark.parametrize("t", [1, 2, 3, 7, 64, 401])
def test_filter_rows_is_lfilter(t):
    # Random stable biquads (poles inside the unit circle), one per row, against SciPy's IIR recursion.
    g = gen(t)
    radius = 0.2 + 0.79 * torch.rand(5, generator=g, dtype=F64)
    angle = math.pi * torch.rand(5, generator=g, dtype=F64)
    a = torch.stack([torch.ones(5, dtype=F64), -2 * radius * torch.cos(angle), radius**2], -1) * 1.7
    a[3, 2] = 0.0  # a first-order denominator
    b = torch.randn(5, 3, generator=g, dtype=F64)
    x = torch.randn(5, 2, t, generator=g, dtype=F64)
    out = A.filter_rows(x, b, a)
    for i in range(5):
        torch.testing.assert_close(out[i], lfilter_reference(x[i], b[i], a[i]), rtol=1e-9, atol=1e-10)


def test_filter_rows_repeated_and_real_poles():
    # Critically damped (a double real pole) and two distinct real poles: no special case may divide by zero.
    a = torch.tensor([[1.0, -1.8, 0.81], [1.0, -0.3, -0.4], [1.0, 0.0, 0.0]], dtype=F64)
    b = torch.tensor([[0.5, 0.2, -0.1]], dtype=F64).expand(3, 3)
    x = torch.randn(3, 1, 300, generator=gen(2), dtype=F64)
    out = A.filter_rows(x, b, a)
    for i in range(3):
        torch.testing.assert_close(out[i], lfilter_reference(x[i], b[i], a[i]), rtol=1e-9, atol=1e-10)


def test_filter_rows_gradients():
    x = torch.randn(2, 2, 9, generator=gen(3), dtype=F64, requires_grad=True)
    b = torch.randn(2, 3, generator=gen(4), dtype=F64, requires_grad=True)
    a = torch.tensor([[1.2, -0.5, 0.3], [0.9, 0.4, 0.1]], dtype=F64, requires_grad=True)
    assert torch.autograd.gradcheck(A.filter_rows, (x, b, a))


@pytest.mark.parametrize("kind", ["lowpass", "highpass", "bandreject"])
def test_filter_rows_float32_is_close_to_float64(kind):
    # Cut-offs down to the transforms' lowest (20 Hz): a pole near z = 1, which a high-pass's double zero at z = 1
    # cancels; float32 lost 15 % of the signal there (0.65 on a signal of 4.3) before the response went float64.
    x = waves(b=3, t=16000, dtype=F64)
    f = torch.tensor([20.0, 100.0, 2000.0], dtype=F64)
    if kind == "bandreject":
        b, a = A.bandreject_coefficients(f, torch.full_like(f, 0.707), SR)
    else:
        b, a = getattr(A, f"{kind}_coefficients")(f, SR)
    ref = A.filter_rows(x, b, a)
    for i in range(3):  # float64: SciPy's recursion
        torch.testing.assert_close(ref[i], lfilter_reference(x[i], b[i], a[i]), rtol=1e-7, atol=1e-8)
    out = A.filter_rows(x.float(), b.float(), a.float())
    assert out.dtype == torch.float32
    torch.testing.assert_close(out.double(), ref, rtol=0, atol=2e-5 * float(ref.abs().max()))


@pytest.mark.parametrize(("name", "btype", "cutoffs"), [("LowPass", "low", [150.0, 1000.0, 3500.0]),
                                                        ("HighPass", "high", [20.0, 700.0, 3000.0])])
def test_cutoff_filters_are_butterworth_at_q_one_over_root_two(name, btype, cutoffs):
    # The cookbook biquad with Q = 1/sqrt(2) is the 2nd-order Butterworth filter of the bilinear transform.
    t = getattr(A, name)(SR, q=1 / math.sqrt(2))
    x = 0.2 * torch.rand(3, 2, 400, generator=gen(0), dtype=F64) - 0.1
    out = t.apply_transform(x, {"cutoff": torch.tensor(cutoffs, dtype=F64)})
    for i, c in enumerate(cutoffs):
        b, a = scipy.signal.butter(2, c, btype=btype, fs=SR)
        expected = torch.from_numpy(scipy.signal.lfilter(b, a, x[i].numpy(), axis=-1))
        torch.testing.assert_close(out[i], expected, rtol=1e-9, atol=1e-11)


def response(b, a, freq):
    _, h = scipy.signal.freqz(b.numpy(), a.numpy(), worN=np.atleast_1d(freq), fs=SR)
    return np.abs(h)


def test_biquad_responses_at_their_frequencies():
    # Cookbook properties: |H| = Q at the cut-off of the low- and high-pass, 0 at the notch's centre, 1 far from it.
    f = torch.tensor([300.0, 1200.0, 3100.0], dtype=F64)
    q = torch.tensor([0.5, 0.707, 4.0], dtype=F64)
    for i in range(3):
        b, a = A.lowpass_coefficients(f[i : i + 1], SR, float(q[i]))
        assert response(b[0], a[0], float(f[i])) == pytest.approx(float(q[i]), rel=1e-9)
        assert response(b[0], a[0], 0.0) == pytest.approx(1.0, rel=1e-12)
        b, a = A.highpass_coefficients(f[i : i + 1], SR, float(q[i]))
        assert response(b[0], a[0], float(f[i])) == pytest.approx(float(q[i]), rel=1e-9)
        assert response(b[0], a[0], SR / 2) == pytest.approx(1.0, rel=1e-9)
    b, a = A.bandreject_coefficients(f, q, SR)
    for i in range(3):
        assert response(b[i], a[i], float(f[i])) < 1e-9
        assert response(b[i], a[i], 0.0) == pytest.approx(1.0, rel=1e-12)


def test_band_reject_q_is_centre_over_width():
    t = A.BandReject(SR)
    x = 0.2 * torch.rand(3, 2, 400, generator=gen(1), dtype=F64) - 0.1
    center = torch.tensor([300.0, 1200.0, 3100.0], dtype=F64)
    width = torch.tensor([50.0, 1200.0 / 0.707, 900.0], dtype=F64)
    out = t.apply_transform(x, {"center": center, "width": width})
    b, a = A.bandreject_coefficients(center, center / width, SR)
    for i in range(3):
        torch.testing.assert_close(out[i], lfilter_reference(x[i], b[i], a[i]), rtol=1e-9, atol=1e-11)


def test_filter_defaults_use_q_0707():
    assert A.LowPass(SR).q == A.HighPass(SR).q == A.BandReject(SR).min_q == 0.707


def rms_gain(t, params, freq):
    x = tone(freq)[None, None]
    y = t.apply_transform(x, params)
    return float(y[..., 1024:].square().mean().sqrt() / x[..., 1024:].square().mean().sqrt())


def test_low_pass_attenuates_above_the_cutoff_and_keeps_below():
    t = A.LowPass(SR)
    params = {"cutoff": torch.tensor([500.0], dtype=F64)}
    assert rms_gain(t, params, 2000.0) < 0.08  # two octaves above: about -24 dB
    assert abs(rms_gain(t, params, 60.0) - 1) < 0.01


def test_high_pass_and_band_reject_on_tones():
    hp = {"cutoff": torch.tensor([1000.0], dtype=F64)}
    assert rms_gain(A.HighPass(SR), hp, 200.0) < 0.06
    assert abs(rms_gain(A.HighPass(SR), hp, 3500.0) - 1) < 0.02
    br = {"center": torch.tensor([1000.0], dtype=F64), "width": torch.tensor([200.0], dtype=F64)}
    assert rms_gain(A.BandReject(SR), br, 1000.0) < 0.01
    assert abs(rms_gain(A.BandReject(SR), br, 3000.0) - 1) < 0.02


@pytest.mark.parametrize("name", FILTERS)
def test_larger_magnitude_filters_more(name):
    t, _ = build(name)
    x = waves(b=32)
    lo, hi = t.sample(x, 0.2, generator=gen(3)), t.sample(x, 0.8, generator=gen(3))
    if name == "LowPass":
        assert (hi["cutoff"] < lo["cutoff"]).all() and (lo["cutoff"] <= t.max_cutoff).all()
        assert hi["cutoff"].min() >= t.max_cutoff * (t.min_cutoff / t.max_cutoff) ** 0.8 * (1 - 1e-6)
    elif name == "HighPass":
        assert (hi["cutoff"] > lo["cutoff"]).all() and (lo["cutoff"] >= t.min_cutoff).all()
    else:
        torch.testing.assert_close(hi["center"], lo["center"])
        assert (hi["width"] > lo["width"]).all()
    # and the filtered signal moves further from the input
    d = [(t.apply_transform(x, p) - x).square().mean() for p in (lo, hi)]
    assert d[1] > d[0]


# ------------------------------------------------------------------------ speed


def peak_frequency(y, sr=SR):
    spectrum = torch.fft.rfft(y * torch.hann_window(y.shape[-1], dtype=y.dtype)).abs()
    return float(torch.argmax(spectrum)) * sr / y.shape[-1]


@pytest.mark.parametrize("factor", [0.8, 0.9, 1.15, 1.25])
def test_speed_change_moves_the_spectral_peak_by_the_factor(factor):
    t = A.SpeedChange()
    x = tone(440.0, t=8192)[None, None]
    y = t.apply_transform(x, {"factor": torch.tensor([factor], dtype=F64)})
    valid = int(8192 / max(factor, 1.0)) - 1  # zeros past the end of the input for a speed-up
    assert abs(peak_frequency(y[0, 0, :valid]) - 440.0 * factor) <= 2 * SR / valid
    assert abs(peak_frequency(x[0, 0]) - 440.0) <= SR / 8192


def test_speed_change_reads_the_input_at_scaled_positions():
    t = A.SpeedChange()
    x = waves(b=2, t=64, dtype=F64)
    y = t.apply_transform(x, {"factor": torch.tensor([1.0, 2.0], dtype=F64)})
    assert torch.equal(y[0], x[0])
    torch.testing.assert_close(y[1, :, :32], x[1, :, ::2])
    assert torch.equal(y[1, :, 33:], torch.zeros_like(y[1, :, 33:]))


def test_speed_factor_range():
    t = A.SpeedChange(max_factor=1.25)
    f = t.sample(waves(b=256), 1.0, generator=gen(0))["factor"]
    assert f.min() >= 0.8 - 1e-6 and f.max() <= 1.25 + 1e-6 and f.min() < 0.82 and f.max() > 1.22
    assert t.natural_range(1.0) == pytest.approx((0.8, 1.25, "x speed"))


# ------------------------------------------------------------------------ masks


@pytest.mark.parametrize(("cls", "axis"), [(A.TimeMaskSpec, 2), (A.FrequencyMaskSpec, 1)])
def test_masks_zero_the_middle_of_their_band(cls, axis):
    t = cls(max_width=30.0)
    x = torch.ones(1, 60, 70, dtype=F64)
    out = t.apply_transform(x, {"start": torch.tensor([15.0], dtype=F64), "width": torch.tensor([24.0], dtype=F64)})
    profile = out[0, :, 35] if axis == 1 else out[0, 30, :]
    assert profile[22:33].max() < 1e-3  # the middle of the band [15, 39], 7 edge scales inside
    assert profile[:9].min() > 0.997 and profile[46:].min() > 0.997  # far from it
    other = out[0, 27, :] if axis == 1 else out[0, :, 27]  # the other axis: constant
    torch.testing.assert_close(other, other[:1].expand_as(other))


@pytest.mark.parametrize("cls", [A.TimeMaskSpec, A.FrequencyMaskSpec])
def test_mask_width_zero_is_the_identity_and_width_is_bounded(cls):
    t = cls()
    x = specs(b=64)
    assert torch.equal(t.apply_transform(x, {"start": torch.full((64,), 7.3), "width": torch.zeros(64)}), x)
    params = t.sample(x, 0.5, generator=gen(0))
    assert params["width"].max() <= 0.5 * t.max_width + 1e-6 and params["width"].max() > 0.4 * t.max_width
    length = x.shape[t.axis]
    assert (params["start"] >= 0).all() and (params["start"] + params["width"] <= length + 1e-4).all()


def test_mask_defaults():
    assert A.TimeMaskSpec().max_width == 20 and A.FrequencyMaskSpec().max_width == 10
    assert A.TimeMaskSpec().natural_range(0.5) == (0.0, 10.0, "frames")
    assert A.FrequencyMaskSpec().natural_range(0.5) == (0.0, 5.0, "bins")


# -------------------------------------------------------------- in the layer


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("training", [True, False])
def test_runs_inside_an_augmentation_layer(name, training):
    t, make = build(name)
    layer = augnet.AugmentationLayer([t, A.Gain()] if name not in ("TimeMaskSpec", "FrequencyMaskSpec") else [t])
    layer.train(training)
    assert not layer.uses_taps
    x = make(4, torch.float32)
    out = layer(x, copies=2, generator=gen(0))
    assert out.shape == (8, *x.shape[1:]) and torch.isfinite(out).all()
    out.square().sum().backward()
    assert torch.isfinite(layer.raw_magnitudes.grad).all()
    if training:
        assert layer.raw_magnitudes.grad[0] != 0
    assert str(layer.policy()[0]["range"])


def test_all_waveform_transforms_in_one_layer():
    transforms = [A.AddNoise(), A.Gain(), A.LowPass(SR), A.HighPass(SR), A.BandReject(SR), A.SpeedChange()]
    layer = augnet.AugmentationLayer(transforms, init_magnitude=0.3, train_mode="mix")  # every transform on every row
    x = waves(b=4)
    out = layer(x, copies=2, generator=gen(0))
    out.sum().backward()
    assert out.shape == (8, 2, 256) and torch.isfinite(layer.raw_magnitudes.grad).all()
    assert (layer.raw_magnitudes.grad != 0).all()
    layer.eval()
    assert layer(x, copies=3, generator=gen(1)).shape == (12, 2, 256)


# --------------------------------------------------------------- bad inputs


@pytest.mark.parametrize("name", NAMES)
def test_wrong_rank_and_dtype_are_rejected(name):
    t, make = build(name)
    x = make(2, torch.float32)
    with pytest.raises(ValueError, match=rf"3-D input .*got shape \(2, {x.shape[2]}\)"):
        t(x[:, 0], 0.5)
    with pytest.raises(ValueError, match="3-D input"):
        t(x[None], 0.5)
    with pytest.raises(TypeError, match="floating-point"):
        t(x.to(torch.int32), 0.5)


def test_spectrogram_masks_name_their_input_shape():
    with pytest.raises(ValueError, match=r"\(B, F, T\) spectrogram"):
        A.TimeMaskSpec()(torch.rand(4, 40), 0.5)


@pytest.mark.parametrize("cls", [A.LowPass, A.HighPass, A.BandReject])
def test_sample_rate_is_required_and_checked(cls):
    with pytest.raises(TypeError, match="sample_rate"):
        cls()
    with pytest.raises(TypeError, match="sample_rate is required"):
        cls(None)
    for bad in (0, -16000, float("nan"), float("inf"), True, "16k"):
        with pytest.raises(ValueError, match="sample_rate must be a positive"):
            cls(bad)


@pytest.mark.parametrize("cls", [A.LowPass, A.HighPass])
def test_inverted_or_too_high_cutoff_range(cls):
    with pytest.raises(ValueError, match=r"min_cutoff \(2000 Hz\) must be below max_cutoff \(500 Hz\).*inverted"):
        cls(SR, min_cutoff=2000, max_cutoff=500)
    with pytest.raises(ValueError, match=r"max_cutoff \(4000 Hz\) must be below the Nyquist frequency \(4000 Hz\)"):
        cls(SR, min_cutoff=100, max_cutoff=4000)
    with pytest.raises(ValueError, match="min_cutoff must be a positive"):
        cls(SR, min_cutoff=0.0)
    with pytest.raises(ValueError, match="q must be a positive"):
        cls(SR, q=-1.0)


def test_other_bad_configurations():
    with pytest.raises(ValueError, match="inverted"):
        A.BandReject(SR, min_center=3000, max_center=1000)
    with pytest.raises(ValueError, match="min_q must be a positive"):
        A.BandReject(SR, min_q=0)
    with pytest.raises(ValueError, match="max_factor must be above 1"):
        A.SpeedChange(max_factor=0.9)
    with pytest.raises(ValueError, match="min_snr_db must be a finite number"):
        A.AddNoise(min_snr_db=float("nan"))
    with pytest.raises(ValueError, match="max_gain_db must be a positive"):
        A.Gain(max_gain_db=-3)
    with pytest.raises(ValueError, match="max_width must be a positive"):
        A.TimeMaskSpec(max_width=0)
    with pytest.raises(ValueError, match="magnitude must lie in"):
        A.Gain()(waves(), 1.5)


class _BrokenTorchaudio:
    """A meta-path finder that makes ``import torchaudio`` raise, as a torchaudio built for another torch does."""

    def find_spec(self, name, path=None, target=None):
        if name == "torchaudio" or name.startswith("torchaudio."):
            raise RuntimeError("Detected that PyTorch and TorchAudio were compiled with different CUDA versions")
        return None


@pytest.mark.parametrize("name", NAMES)
def test_every_audio_transform_works_beside_a_broken_torchaudio(monkeypatch, name):
    # A fresh copy of the module, loaded and run while importing torchaudio raises a RuntimeError.
    for mod in [m for m in sys.modules if m == "torchaudio" or m.startswith("torchaudio.")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setattr(sys, "meta_path", [_BrokenTorchaudio(), *sys.meta_path])
    with pytest.raises(RuntimeError, match="different CUDA versions"):
        importlib.import_module("torchaudio")
    spec = importlib.util.spec_from_file_location("_audio_beside_broken_torchaudio", A.__file__)
    fresh = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fresh)
    make = AUDIO[name].make
    t = getattr(fresh, name)(SR) if name in FILTERS else getattr(fresh, name)()
    x = make(3, torch.float32)
    out = t(x, 0.8, generator=gen(0))
    assert out.shape == x.shape and torch.isfinite(out).all() and not torch.equal(out, x)


def test_natural_ranges_and_repr():
    assert A.Gain().natural_range(0.5) == (-3.0, 3.0, "dB")
    low, high, unit = A.LowPass(SR).natural_range(1.0)
    assert (low, high, unit) == pytest.approx((200.0, 3600.0, "Hz cut-off"))
    low, high, _ = A.HighPass(SR).natural_range(1.0)
    assert (low, high) == pytest.approx((10.0, 1200.0))
    low, high, unit = A.AddNoise().natural_range(0.1)
    assert low == pytest.approx(20.0) and high == math.inf and unit == "dB SNR"
    assert "sample_rate=8000" in repr(A.LowPass(SR)) and "max_factor=1.25" in repr(A.SpeedChange())


def test_speed_change_takes_the_one_sided_derivative_at_magnitude_zero():
    # At magnitude 0 every position is an integer, the linear interpolation's kink: autograd took the right-hand
    # slope for every row, of the wrong sign for the rows whose factor goes below 1. Now, as the image warps: the
    # value is the input, the derivative the one-sided difference into (0, 1] with the same draws.
    t = A.SpeedChange()
    x = waves(b=4, dtype=F64)
    r = torch.randn(x.shape, generator=gen(7), dtype=F64)
    mu = torch.zeros(4, dtype=F64, requires_grad=True)
    out = t(x, mu, generator=gen(1))
    assert torch.equal(out, x)
    (grad,) = torch.autograd.grad((out * r).sum(), mu)
    from augnet.transforms.base import KINK_STEP

    step = KINK_STEP  # the one-sided difference's own step: the same figure to rounding
    moved = t(x, torch.full((4,), step, dtype=F64), generator=gen(1))
    one_sided = ((moved - x) * r).flatten(1).sum(1) / step
    torch.testing.assert_close(grad, one_sided, rtol=1e-9, atol=1e-9)
    factors = t.draw_params(x, 1.0, gen(1))["factor"]
    assert (factors < 1).any() and (factors > 1).any()  # both sides of the kink are in the test
