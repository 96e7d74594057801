"""Signal (EEG) transforms: each transform's defining property, and bad inputs.

The transform contract runs on each of them in test_transform_contract.py.
"""

import math

import numpy as np
import pytest
import torch
from helpers import gen
from transform_cases import SFREQ, cases, signals

import augnet
from augnet.transforms import signal as S

EEG = cases("eeg")


@pytest.mark.parametrize("training", [True, False])
def test_all_run_in_an_augmentation_layer(training):
    layer = augnet.AugmentationLayer([c.build() for c in EEG], init_magnitude=0.4).train(training)
    assert not layer.uses_taps
    x = signals()
    out = layer(x, copies=2, generator=gen(1))
    assert out.shape == (8, 5, 120) and torch.isfinite(out).all()
    if training:
        out.square().sum().backward()
        assert torch.isfinite(layer.raw_magnitudes.grad).all() and layer.raw_magnitudes.grad.abs().sum() > 0


# ------------------------------------------------------------- properties


def tone(freq, t=1000, sfreq=SFREQ, phase=0.3, dtype=torch.float64):
    time = torch.arange(t, dtype=dtype) / sfreq
    return torch.cos(2 * math.pi * freq * time + phase)


def peak_frequency(x, sfreq=SFREQ):
    spectrum = torch.fft.rfft(x, dim=-1).abs()
    freqs = torch.fft.rfftfreq(x.shape[-1], 1 / sfreq, dtype=x.dtype)
    return freqs[spectrum.argmax(-1)]


def test_frequency_shift_moves_a_tone_by_the_drawn_shift():
    t = S.FrequencyShift(SFREQ)
    x = tone(10.0).expand(3, 1, -1)
    params = {"shift": torch.tensor([2.3, -4.1, 0.7], dtype=torch.float64)}
    out = t.apply_transform(x, params)
    torch.testing.assert_close(peak_frequency(out)[:, 0], 10.0 + params["shift"], atol=0.051, rtol=0)
    # The amplitude of the shifted tone is kept (away from the window's ends).
    assert torch.allclose(out[..., 100:-100].abs().amax(-1), torch.ones(3, 1, dtype=torch.float64), atol=0.05)


def test_ft_surrogate_keeps_the_amplitude_spectrum():
    x = signals(dtype=torch.float64)
    out = S.FTSurrogate()(x, 1.0, generator=gen(0))
    assert not torch.allclose(out, x)
    torch.testing.assert_close(torch.fft.rfft(out, dim=-1).abs(), torch.fft.rfft(x, dim=-1).abs())


@pytest.mark.parametrize("cls, expected", [(S.TimeReverse, lambda x: x.flip(-1)), (S.SignFlip, lambda x: -x)])
def test_reverse_and_sign_flip_at_probability_one_are_involutions(cls, expected):
    t = cls()
    x = signals()
    once = t(x, 1.0, generator=gen(0))
    torch.testing.assert_close(once, expected(x))
    torch.testing.assert_close(t(once, 1.0, generator=gen(1)), x)


def test_band_stop_removes_its_centre_and_keeps_far_frequencies():
    t = S.BandStop(SFREQ)
    centre = torch.tensor([20.0], dtype=torch.float64)
    params = {"centre": centre, "width": torch.tensor([2.0], dtype=torch.float64)}
    inside = tone(20.0)[None, None]
    far = tone(30.0)[None, None]
    gain_inside = t.apply_transform(inside, params).norm() / inside.norm()
    gain_far = t.apply_transform(far, params).norm() / far.norm()
    assert 20 * math.log10(float(gain_inside)) <= -20.0
    assert abs(float(gain_far) - 1.0) < 1e-3


def test_band_stop_width_grows_with_the_magnitude():
    t = S.BandStop(SFREQ)
    x = signals(b=1, ch=1, t=1000, dtype=torch.float64)
    params = t.sample(x, 0.5)
    widths = [torch.tensor([w], dtype=torch.float64) for w in (0.5, 1, 2)]
    removed = [(x - t.apply_transform(x, {**params, "width": w})).norm() for w in widths]
    assert removed[0] < removed[1] < removed[2]


def test_channels_symmetry_swaps_exactly_the_pairs():
    t = S.ChannelsSymmetry([(0, 3), (1, 4)])
    x = signals()
    out = t(x, 1.0, generator=gen(0))
    torch.testing.assert_close(out, x[:, [3, 4, 2, 0, 1]])


def test_channels_shuffle_permutes_the_chosen_channels_only():
    t = S.ChannelsShuffle()
    x = signals(b=64, ch=8, t=16)
    params = t.sample(x, 0.5, generator=gen(2))
    out = t.apply_transform(x, params)
    chosen = params["gate"] > 0.5
    source = params["source"]
    # Chosen channels read a permutation of the chosen channels; the others stay in place.
    moved = torch.gather(x, 1, source[:, :, None].expand_as(x))
    torch.testing.assert_close(out, torch.where(chosen[:, :, None], moved, x))
    assert chosen.gather(1, source)[chosen].all()
    for n in range(64):
        assert sorted(source[n][chosen[n]].tolist()) == torch.arange(8)[chosen[n]].tolist()
    # A channel that stays names another channel as its source: the gate's derivative there is not 0.
    assert (source[~chosen] != torch.arange(8).expand(64, 8)[~chosen]).all()
    assert abs(float(chosen.float().mean()) - 0.5) < 0.08


def test_channels_dropout_drops_a_fraction_mu():
    x = signals(b=200, ch=10, t=8) + 5.0
    out = S.ChannelsDropout()(x, 0.3, generator=gen(0))
    dropped = (out == 0).all(-1).float().mean()
    assert abs(float(dropped) - 0.3) < 0.03


def test_time_mask_zeroes_its_window_and_nothing_far_from_it():
    t = S.TimeMask(max_length=200, edge=2.0)
    x = torch.ones(1, 2, 500, dtype=torch.float64)
    params = {
        "centre": torch.tensor([250.0], dtype=torch.float64),
        "length": torch.tensor([100.0], dtype=torch.float64),
    }
    out = t.apply_transform(x, params)
    # 20 samples (10 edge widths) inside the window it is zero, 20 outside it is the input.
    assert out[..., 220:281].abs().max() < 1e-4
    torch.testing.assert_close(out[..., :180], x[..., :180], atol=1e-4, rtol=0)
    assert abs(float((1 - out[0, 0]).sum()) - 100.0) < 1e-3  # the masked area is the length


def test_gaussian_noise_std_is_relative_to_the_signal():
    x = 3.0 * signals(b=8, t=4000)
    out = S.GaussianNoise(max_std=0.2)(x, 0.5, generator=gen(0))
    ratio = (out - x).std() / x.std()
    assert abs(float(ratio) - 0.1) < 0.005


def test_natural_ranges():
    assert S.FrequencyShift(SFREQ).natural_range(0.1) == (-0.5, 0.5, "Hz")
    assert S.BandStop(SFREQ).natural_range(0.5) == (0.0, 1.0, "Hz wide")
    assert S.TimeMask().natural_range(0.5) == (0.0, 100.0, "samples")


# -------------------------------------------------------------- bad input


@pytest.mark.parametrize("case", EEG, ids=lambda c: c.name)
def test_wrong_rank(case):
    with pytest.raises(ValueError, match=r"3-D input \(B, Ch, T\)"):
        case.build()(torch.randn(4, 100), 0.5)


def test_missing_or_bad_sampling_rate():
    with pytest.raises(TypeError, match="sfreq"):
        S.FrequencyShift()
    with pytest.raises(ValueError, match=r"sfreq .* is required"):
        S.BandStop(None)
    with pytest.raises(ValueError, match="sfreq must be a positive"):
        S.FrequencyShift(-100.0)
    with pytest.raises(ValueError, match=r"^band must satisfy"):
        S.BandStop(SFREQ, band=(30.0, 80.0))
    with pytest.raises(ValueError, match=r"^the default band .* at sfreq 4\.0 .*pass band=\(low, high\)"):
        S.BandStop(4.0)
    for band in ((30.0,), ("a", "b"), "ab", 30.0):
        with pytest.raises(TypeError, match=r"band must be a \(low, high\) pair of frequencies in Hz"):
            S.BandStop(SFREQ, band=band)
    assert S.BandStop(SFREQ, band=np.array([10, 20])).band == S.BandStop(SFREQ, band=torch.tensor([10, 20.0])).band
    assert S.BandStop(SFREQ, band=np.array([10, 20])).band == (10.0, 20.0)
    with pytest.raises(ValueError, match=r"max_shift \(5 Hz by default\) must be below .* = 4 Hz, got 5\.0"):
        S.FrequencyShift(8.0)
    with pytest.raises(ValueError, match=r"max_shift \(5 Hz by default\) must be below .* sfreq / 2 = 50 Hz, got 60"):
        S.FrequencyShift(100.0, max_shift=60.0)
    with pytest.raises(TypeError, match="channel_independent must be True or False, got 'no'"):
        S.FTSurrogate(channel_independent="no")


def test_channel_pairs_out_of_range_or_repeated():
    with pytest.raises(ValueError, match="index 7 is out of range for 5 channels"):
        S.ChannelsSymmetry([(0, 7)])(signals(), 0.5)
    with pytest.raises(ValueError, match="use each channel once"):
        S.ChannelsSymmetry([(0, 1), (1, 2)])
    with pytest.raises(ValueError, match="pairs must be a sequence"):
        S.ChannelsSymmetry([0, 1])
