"""A mathematical and statistical audit of the signal (EEG) and audio transforms against their documentation.

What test_signal.py, test_audio.py, test_sensors.py and the transform contract already check is not repeated here:
this file checks the laws of the drawn parameters (KS and binomial tests), the operations' defining identities
exactly (phases, spectra, permutations, formulas), the gradient in the magnitude at interior magnitudes other than
the contract's 0.4, and the identity at magnitude 0 in float32 and the half dtypes (the contract: float64 only).

Statistical tests draw from fixed seeds, so each is deterministic. They reject at p < 1e-3: were the seeds
random, a correct transform would fail each such test with probability 1e-3 (the p-value is uniform under the
null hypothesis); over the 46 tests of that kind below, at most 4.6 % per run of the whole file (less: the
three row gates share their draws).
"""

import math
import re

import pytest
import torch
from helpers import gen
from scipy import stats

from augnet.transforms import audio as A
from augnet.transforms import signal as S
from augnet.transforms._sensors import SensorsRotationX, SensorsRotationY, SensorsRotationZ
from augnet.transforms.base import stratified_copies

F64 = torch.float64
P_REJECT = 1e-3
SFREQ, SR = 100.0, 8000.0
N = 2000  # draws per statistical test
POS = torch.randn(10, 3, generator=gen(123), dtype=F64)  # 10 sensors anywhere on the sphere


def ks_uniform(values, low, high):
    """The KS p-value of ``values`` against U(low, high)."""
    return stats.kstest(values.detach().double().flatten().numpy(), stats.uniform(low, high - low).cdf).pvalue


# ------------------------------------------------------------------ laws of the drawn parameters

MU = 0.7
_LAWS = {
    # name: (transform, input, draw -> the quantity the docs say is uniform, its documented range)
    "FrequencyShift.shift": (S.FrequencyShift(SFREQ), "eeg", lambda p: p["shift"], (-MU * 5, MU * 5)),
    "BandStop.centre": (S.BandStop(SFREQ), "eeg", lambda p: p["centre"], (1.0, SFREQ / 2 - 1)),
    "TimeMask.centre": (S.TimeMask(), "eeg", lambda p: p["centre"], (0.0, 64.0)),
    "FTSurrogate.phase": (S.FTSurrogate(), "eeg", lambda p: p["phase"][:, :, 1:-1], (0.0, MU * 2 * math.pi)),
    "SensorsRotationX.angle": (
        SensorsRotationX(POS),
        "sensors",
        lambda p: p["angle"],
        (-MU * math.pi / 6, MU * math.pi / 6),
    ),
    "Gain.gain_db": (A.Gain(), "eeg", lambda p: p["gain_db"], (-MU * 6, MU * 6)),
    "AddNoise.noise_ratio": (A.AddNoise(-6.0), "eeg", lambda p: p["noise_ratio"], (0.0, MU * 10 ** (6 / 20))),
    "SpeedChange.log_factor": (A.SpeedChange(), "eeg", lambda p: p["factor"].log() / math.log(1.25), (-MU, MU)),
    # log-linear cut-offs: max * (min / max) ** (mu * u), resp. min * (max / min) ** (mu * u) (8 kHz: Nyquist 4 kHz)
    "LowPass.exponent": (
        A.LowPass(SR),
        "eeg",
        lambda p: (p["cutoff"].double() / 3600).log() / math.log(200 / 3600),
        (0.0, MU),
    ),
    "HighPass.exponent": (
        A.HighPass(SR),
        "eeg",
        lambda p: (p["cutoff"].double() / 10).log() / math.log(1200 / 10),
        (0.0, MU),
    ),
    "BandReject.log_center": (
        A.BandReject(SR),
        "eeg",
        lambda p: (p["center"].double() / 100).log() / math.log(20),
        (0.0, 1.0),
    ),
    "BandReject.inverse_q": (A.BandReject(SR), "eeg", lambda p: p["width"] / p["center"] * 0.707, (0.0, MU)),
    "TimeMaskSpec.width": (A.TimeMaskSpec(), "spec", lambda p: p["width"], (0.0, MU * 20)),
    "TimeMaskSpec.start": (A.TimeMaskSpec(), "spec", lambda p: p["start"] / (40 - p["width"]), (0.0, 1.0)),
    "FrequencyMaskSpec.width": (A.FrequencyMaskSpec(), "spec", lambda p: p["width"], (0.0, MU * 10)),
    "FrequencyMaskSpec.start": (A.FrequencyMaskSpec(), "spec", lambda p: p["start"] / (24 - p["width"]), (0.0, 1.0)),
}
_INPUTS = {
    "eeg": lambda: torch.zeros(N, 4, 64),
    "sensors": lambda: torch.zeros(N, 10, 4),
    "spec": lambda: torch.zeros(N, 24, 40),
}


@pytest.mark.parametrize("stratified", [False, True], ids=["independent", "stratified"])
@pytest.mark.parametrize("name", list(_LAWS))
def test_drawn_parameters_are_uniform_on_their_documented_range(name, stratified):
    """Each documented U(low, high) law by a KS test, also inside ``stratified_copies`` (each row stays uniform)."""
    t, kind, quantity, (low, high) = _LAWS[name]
    x = _INPUTS[kind]()
    if stratified:
        with stratified_copies(4):
            params = t.sample(x[: N // 4], MU, generator=gen(1), copies=4)
    else:
        params = t.sample(x, MU, generator=gen(1))
    values = quantity(params)
    assert values.min() >= low - 1e-6 and values.max() <= high + 1e-6
    assert ks_uniform(values, low, high) > P_REJECT


def test_band_reject_centre_and_width_are_drawn_independently():
    params = A.BandReject(SR).sample(torch.zeros(N, 1, 8), 1.0, generator=gen(2))
    r, p = stats.pearsonr(params["center"].numpy(), (params["width"] / params["center"]).numpy())
    assert p > P_REJECT, r


def test_gaussian_noise_is_white_normal_at_the_documented_std():
    """noise = mu * max_std * std(x) * z, z ~ N(0, 1) independent: the std of x per sample over channels and time."""
    x = 3.0 * torch.randn(40, 4, 256, generator=gen(3), dtype=F64) + 1.0
    t = S.GaussianNoise(max_std=0.2)
    noise = t.sample(x, MU, generator=gen(4))["noise"]
    z = noise / (MU * 0.2 * x.flatten(1).std(1, correction=0))[:, None, None]
    assert stats.kstest(z.flatten().numpy(), "norm").pvalue > P_REJECT
    # White: neighbouring samples uncorrelated (the lag-1 correlation of 40960 draws has sd 1 / sqrt(n) ~ 0.005).
    lag1 = float((z[..., 1:] * z[..., :-1]).mean())
    assert abs(lag1) < 0.02
    torch.testing.assert_close(t.apply_transform(x, {"noise": noise}), x + noise, rtol=0, atol=0)


# ------------------------------------------------------------------ Bernoulli gates

GATED = {
    "TimeReverse": lambda: S.TimeReverse(),
    "SignFlip": lambda: S.SignFlip(),
    "ChannelsSymmetry": lambda: S.ChannelsSymmetry([(0, 1)]),
    "ChannelsDropout": lambda: S.ChannelsDropout(),
    "ChannelsShuffle": lambda: S.ChannelsShuffle(),
}


@pytest.mark.parametrize("mu", [0.2, 0.7])
@pytest.mark.parametrize("name", list(GATED))
def test_gates_are_bernoulli_with_the_magnitude_as_probability(name, mu):
    # (TimeReverse, SignFlip and ChannelsSymmetry read the same N draws of the seed: one test, not three.)
    gate = GATED[name]().sample(torch.zeros(N, 4, 8), mu, generator=gen(0))["gate"]
    assert set(gate.unique().tolist()) <= {0.0, 1.0}
    assert stats.binomtest(int(gate.sum()), gate.numel(), mu).pvalue > P_REJECT


@pytest.mark.parametrize("name", list(GATED))
def test_gate_gradient_is_the_documented_relaxation(name):
    """Value ``u < p``, derivative that of ``sigmoid((p - u) / temperature)``, with ``u`` the generator's U(0, 1)."""
    t = GATED[name]()
    x = torch.zeros(50, 4, 8, dtype=F64)
    p = torch.tensor(0.3, dtype=F64, requires_grad=True)
    gate = t.sample(x, p, generator=gen(6))["gate"]
    u = torch.rand(gate.shape, generator=gen(6)).double()
    assert torch.equal(gate.detach(), (u < 0.3).double())
    (gate * torch.arange(gate.numel(), dtype=F64).reshape(gate.shape)).sum().backward()
    s = torch.sigmoid((0.3 - u) / t.temperature)
    expected = (s * (1 - s) / t.temperature * torch.arange(gate.numel(), dtype=F64).reshape(gate.shape)).sum()
    torch.testing.assert_close(p.grad, expected, rtol=1e-12, atol=0)


def test_channels_dropout_zeroes_the_gated_channels_and_nothing_else():
    x = torch.randn(64, 6, 10, generator=gen(7)) + 3.0
    t = S.ChannelsDropout()
    params = t.sample(x, 0.4, generator=gen(8))
    out = t.apply_transform(x, params)
    assert torch.equal(out, torch.where(params["gate"][:, :, None] > 0.5, torch.zeros_like(x), x))


def test_channels_shuffle_draws_uniform_permutations():
    """At mu = 1 all channels are chosen: each of the 3! permutations equally likely (chi-square)."""
    params = S.ChannelsShuffle().sample(torch.zeros(6000, 3, 2), 1.0, generator=gen(9))
    src = params["source"]
    assert (src.sort(1).values == torch.arange(3)).all()
    _, counts = (src[:, 0] * 9 + src[:, 1] * 3 + src[:, 2]).unique(return_counts=True)
    assert counts.numel() == 6 and stats.chisquare(counts.numpy()).pvalue > P_REJECT


def test_channels_shuffle_partner_of_a_kept_channel_is_uniform_over_the_others():
    params = S.ChannelsShuffle().sample(torch.zeros(N, 5, 2), 0.0, generator=gen(10))
    offset = (params["source"] - torch.arange(5)) % 5  # 1..4, uniform
    _, counts = offset.unique(return_counts=True)
    assert counts.numel() == 4 and stats.chisquare(counts.numpy()).pvalue > P_REJECT


# ------------------------------------------------------------------ spectral operations, exactly


@pytest.mark.parametrize("t_len", [64, 63], ids=["even", "odd"])
@pytest.mark.parametrize("independent", [False, True], ids=["shared", "per-channel"])
def test_ft_surrogate_rotates_each_bin_by_its_drawn_phase(independent, t_len):
    """rfft(out) = rfft(x) * exp(i phase): amplitudes kept, DC (and Nyquist for even T) untouched, the phase shared
    by the channels unless ``channel_independent``."""
    t = S.FTSurrogate(channel_independent=independent)
    x = torch.randn(20, 3, t_len, generator=gen(11), dtype=F64)
    params = t.sample(x, 0.6, generator=gen(12))
    assert params["phase"].shape == (20, 3 if independent else 1, t_len // 2 + 1)
    assert (params["phase"][..., 0] == 0).all()
    assert ((params["phase"][..., -1] == 0).all()) == (t_len % 2 == 0)
    spectrum, out = torch.fft.rfft(x), torch.fft.rfft(t.apply_transform(x, params))
    torch.testing.assert_close(
        out, spectrum * torch.polar(torch.ones_like(params["phase"]), params["phase"]), rtol=0, atol=1e-12
    )


def test_frequency_shift_is_exact_on_a_bin_aligned_tone_and_folds_at_zero():
    sfreq, t_len = 64.0, 256  # a power of two: the analytic signal needs no padding
    time = torch.arange(t_len, dtype=F64) / sfreq
    x = torch.cos(2 * math.pi * 10 * time + 0.4).expand(4, 2, t_len)
    shifts = [2.0, -3.25, 0.5, -14.0]  # the last folds at 0 Hz: 10 - 14 = -4 Hz comes out at 4 Hz
    out = S.FrequencyShift(sfreq, max_shift=20).apply_transform(x, {"shift": torch.tensor(shifts, dtype=F64)})
    for n, s in enumerate(shifts):
        expected = torch.cos(2 * math.pi * (10 + s) * time + 0.4)
        torch.testing.assert_close(out[n], expected.expand(2, -1), rtol=0, atol=1e-12)


def test_band_stop_multiplies_the_spectrum_by_the_documented_notch():
    t = S.BandStop(SFREQ)
    x = torch.randn(6, 2, 400, generator=gen(13), dtype=F64)
    params = t.sample(x, 0.8, generator=gen(14))
    ratio = torch.fft.rfft(t.apply_transform(x, params)) / torch.fft.rfft(x)
    f = torch.fft.rfftfreq(400, 1 / SFREQ, dtype=F64)
    edge, c, h = SFREQ / 400, params["centre"][:, None], params["width"][:, None] / 2
    keep = 1 - (torch.sigmoid((f - c + h) / edge) - torch.sigmoid((f - c - h) / edge))
    torch.testing.assert_close(ratio, keep[:, None].to(ratio.dtype).expand_as(ratio), rtol=0, atol=1e-10)


def test_band_stop_docstring_figures_are_the_computed_ones():
    """BandStop's docstring: a 2 Hz notch at 100 Hz keeps half a tone at its centre on 1 s, and N % on 4 s.

    The old docstring said 3 %; the computation keeps 3.6 % (1 - tanh(2)), 4 % rounded.
    """
    kept = {}
    for seconds in (1, 4):
        t_len = int(SFREQ * seconds)
        tone = torch.cos(2 * math.pi * 20 * torch.arange(t_len, dtype=F64) / SFREQ)[None, None]
        params = {"centre": torch.tensor([20.0], dtype=F64), "width": torch.tensor([2.0], dtype=F64)}
        kept[seconds] = float(S.BandStop(SFREQ).apply_transform(tone, params).norm() / tone.norm())
    assert abs(kept[1] - 0.5) < 0.05  # 0.538
    percent = re.search(r"and (\d+) % on a 4 s one", " ".join(S.BandStop.__doc__.split()))
    assert percent and int(percent.group(1)) == round(100 * kept[4]), (percent and percent.group(1), kept[4])


# ------------------------------------------------------------------ masks: the documented formulas


@pytest.mark.parametrize("cls, axis", [(A.TimeMaskSpec, 2), (A.FrequencyMaskSpec, 1)])
def test_spectrogram_masks_are_their_formula(cls, axis):
    """out = x * (1 - sigmoid((p - a) / edge) + sigmoid((p - a - width) / edge)) along the masked axis."""
    t = cls(edge=1.5)
    x = torch.rand(5, 24, 40, generator=gen(15), dtype=F64)
    params = t.sample(x, 0.9, generator=gen(16))
    a, w = params["start"][:, None], params["width"][:, None]
    pos = torch.arange(x.shape[axis], dtype=F64)
    mask = torch.sigmoid((pos - a) / 1.5) - torch.sigmoid((pos - a - w) / 1.5)
    mask = mask[:, None, :] if axis == 2 else mask[:, :, None]
    torch.testing.assert_close(t.apply_transform(x, params), x * (1 - mask), rtol=0, atol=1e-14)


# ------------------------------------------------------------------ sensor rotations about their axes


def _rings(axis: str, k: int) -> torch.Tensor:
    """Three rings of ``k`` sensors about ``axis`` (at three latitudes): a rotation by 2 pi / k maps them onto each
    other, sensor ``r * k + j`` onto ``r * k + j + 1`` (a positive angle turns +u towards +v about w)."""
    uvw = {"x": (1, 2, 0), "y": (2, 0, 1), "z": (0, 1, 2)}[axis]
    rows = []
    for lat in (0.3, 0.8, -0.2):
        for j in range(k):
            a = 2 * math.pi * j / k + lat
            rows.append([math.cos(lat) * math.cos(a), math.cos(lat) * math.sin(a), math.sin(lat)])
    ring = torch.tensor(rows, dtype=F64)
    out = torch.empty_like(ring)
    out[:, list(uvw)] = ring
    return 0.09 * out


@pytest.mark.parametrize("cls", [SensorsRotationX, SensorsRotationY, SensorsRotationZ])
def test_a_rotation_onto_the_sensors_themselves_permutes_the_channels(cls):
    """Rotating by a symmetry of the montage moves each sensor onto another: the spline interpolates exactly at
    sensors, so channel i reads the channel whose sensor its rotated position is (the documented axis and sign)."""
    k = 8
    t = cls(_rings(cls.axis, k), max_angle=math.pi)
    x = torch.randn(2, 3 * k, 5, generator=gen(17), dtype=F64)
    out = t.apply_transform(x, {"angle": torch.tensor([2 * math.pi / k, -2 * math.pi / k], dtype=F64)})
    forward = [r * k + (j + 1) % k for r in range(3) for j in range(k)]
    backward = [r * k + (j - 1) % k for r in range(3) for j in range(k)]
    torch.testing.assert_close(out[0], x[0, forward], rtol=0, atol=1e-10)
    torch.testing.assert_close(out[1], x[1, backward], rtol=0, atol=1e-10)


# ------------------------------------------------------------------ the gradient in the magnitude

SMOOTH = {
    "TimeMask": (lambda: S.TimeMask(40), "eeg"),
    "GaussianNoise": (S.GaussianNoise, "eeg"),
    "FTSurrogate": (S.FTSurrogate, "eeg"),
    "FTSurrogateIndependent": (lambda: S.FTSurrogate(channel_independent=True), "eeg"),
    "FrequencyShift": (lambda: S.FrequencyShift(SFREQ), "eeg"),
    "BandStop": (lambda: S.BandStop(SFREQ), "eeg"),
    "SensorsRotationX": (lambda: SensorsRotationX(POS), "sensors"),
    "SensorsRotationY": (lambda: SensorsRotationY(POS), "sensors"),
    "SensorsRotationZ": (lambda: SensorsRotationZ(POS), "sensors"),
    "AddNoise": (A.AddNoise, "eeg"),
    "Gain": (A.Gain, "eeg"),
    "LowPass": (lambda: A.LowPass(SR), "eeg"),
    "HighPass": (lambda: A.HighPass(SR), "eeg"),
    "BandReject": (lambda: A.BandReject(SR), "eeg"),
    "SpeedChange": (A.SpeedChange, "eeg"),
    "TimeMaskSpec": (A.TimeMaskSpec, "spec"),
    "FrequencyMaskSpec": (A.FrequencyMaskSpec, "spec"),
}
_SMALL = {
    "eeg": lambda: torch.randn(3, 4, 64, generator=gen(18), dtype=F64),
    "sensors": lambda: torch.randn(3, 10, 8, generator=gen(18), dtype=F64),
    "spec": lambda: torch.rand(3, 24, 40, generator=gen(18), dtype=F64),
}


@pytest.mark.parametrize("name", list(SMOOTH))
def test_gradient_in_the_magnitude_is_the_central_difference(name):
    """At magnitudes 0.15 and 0.85 (the contract's gradcheck is at 0.4), with the same draws (a fixed generator).

    The five-point central difference of step 1e-4 (truncation of order 1e-16 times the fifth derivative): the
    three-point one's truncation reached 1.4e-5 relative at that step (BandReject at 0.15, a narrow notch whose
    response curves fast), and a smaller step grows the FFT filters' rounding to 1e-5.
    """
    make, kind = SMOOTH[name]
    t, x = make(), _SMALL[kind]()
    w = torch.randn(t(x, 0.5, generator=gen(19)).shape, generator=gen(20), dtype=F64)

    def f(mu):
        return (t(x, mu, generator=gen(19)) * w).sum()

    eps = 1e-4
    for mu in (0.15, 0.85):
        m = torch.tensor(mu, dtype=F64, requires_grad=True)
        f(m).backward()
        fd = (8 * (f(mu + eps) - f(mu - eps)) - (f(mu + 2 * eps) - f(mu - 2 * eps))) / (12 * eps)
        torch.testing.assert_close(m.grad, fd, rtol=1e-6, atol=1e-9)


# ------------------------------------------------------------------ identity at 0 in float32, dtypes kept

ALL = {
    **{k: v for k, (v, _) in SMOOTH.items() if not k.startswith("Sensors")},
    **GATED,
    "SensorsRotationZ": lambda: SensorsRotationZ(POS[:5]),
}
FFT_ROUND_TRIP = {"FTSurrogate", "FTSurrogateIndependent", "FrequencyShift", "BandStop"}


@pytest.mark.parametrize("name", sorted(ALL))
def test_magnitude_zero_is_the_identity_in_float32(name):
    """Exactly, but for the FFT round trip (within 1e-6 of the signal's peak), at a plain and a learnable magnitude,
    on an odd length and a large amplitude; the input is not written."""
    t = ALL[name]()
    x = 1e3 * torch.randn(3, 5, 1001, generator=gen(21))
    before = x.clone()
    for mu in (0.0, torch.tensor(0.0, requires_grad=True)):
        out = t(x, mu, generator=gen(22), copies=2).detach()
        assert out.dtype == x.dtype and out.shape == (6, 5, 1001)
        if name in FFT_ROUND_TRIP:
            err = (out - x.repeat(2, 1, 1)).abs().amax(-1) / x.abs().amax(-1).repeat(2, 1)
            assert err.max() < 1e-6
        else:
            assert torch.equal(out, x.repeat(2, 1, 1))
    assert torch.equal(x, before)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_inputs_keep_their_dtype_and_shape(dtype):
    x = torch.randn(3, 5, 128, generator=gen(23)).to(dtype)
    before = x.clone()
    for name, make in ALL.items():
        out = make()(x, 0.5, generator=gen(24), copies=2)
        assert out.dtype == dtype and out.shape == (6, 5, 128) and out.device == x.device, name
        assert torch.isfinite(out).all(), name
    assert torch.equal(x, before)
