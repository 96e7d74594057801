"""EEG and audio researchers' journeys through augnet: signals (B, Ch, T) and mono audio (B, 1, T) through a 1-D
conv trunk inside AugNet, trained with ``fit`` on a DataLoader, per-instance layers on signals, float64, odd and
very short lengths, NumPy sample rates, sensor positions as the EEG tools give them, policies in natural units,
state-dict round trips and deep copies."""

import copy
import math
import warnings

import numpy as np
import pytest
import torch
from helpers import gen
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import augnet
from augnet.training import fit
from augnet.transforms import audio as A
from augnet.transforms import signal as S

CH, SFREQ = 6, np.float64(100.0)  # a NumPy sample rate, as MNE's info["sfreq"] read with NumPy gives


def cap(ch: int = CH) -> np.ndarray:
    """(Ch, 3) sensor positions on the upper half of a sphere (a cap), as a NumPy array."""
    rng = np.random.RandomState(0)
    pos = rng.randn(ch, 3)
    pos[:, 2] = np.abs(pos[:, 2]) + 0.2
    return pos


def eeg_transforms() -> list:
    return [
        S.FrequencyShift(SFREQ), S.FTSurrogate(), S.GaussianNoise(), S.BandStop(SFREQ), S.TimeMask(max_length=20),
        S.ChannelsSymmetry([(0, 1), (2, 3)]), S.ChannelsShuffle(), S.ChannelsDropout(), S.SensorsRotationZ(cap()),
        S.TimeReverse(), S.SignFlip(), A.HighPass(SFREQ), A.SpeedChange(),
    ]  # fmt: skip


def shallow_trunk(ch: int = CH, classes: int = 2) -> nn.Module:
    """A small ShallowConvNet-like trunk: temporal then spatial convolution, square, mean pool, log, linear."""
    return nn.Sequential(
        nn.Conv1d(ch, 8, 7, padding=3), nn.Conv1d(8, 8, 1), nn.BatchNorm1d(8), nn.ReLU(),
        nn.AdaptiveAvgPool1d(4), nn.Flatten(), nn.Linear(32, classes), nn.LogSoftmax(1),
    )  # fmt: skip


# ------------------------------------------------------------------ journeys


def test_an_eeg_augnet_trains_on_a_loader_and_round_trips():
    torch.manual_seed(0)
    x, y = torch.randn(24, CH, 63), torch.randint(0, 2, (24,))  # T odd
    model = augnet.AugNet(shallow_trunk(), augnet.AugmentationLayer(eeg_transforms()), train_copies=2)
    opt = torch.optim.Adam(augnet.param_groups(model), lr=1e-2)
    history = fit(model, DataLoader(TensorDataset(x, y), batch_size=8, shuffle=True), optimizer=opt, epochs=2)
    assert all(math.isfinite(v) for v in history["loss"])
    policy = model.policy()
    units = {e["transform"]: e["range"].unit for e in policy[0]}
    assert units["FrequencyShift"] == "Hz" and units["SensorsRotationZ"] == "deg" and units["HighPass"].startswith("Hz")
    shift = next(e for e in policy[0] if e["transform"] == "FrequencyShift")
    assert shift["range"].high == pytest.approx(5.0 * shift["magnitude"])  # ±mu * 5 Hz, in Hz
    # A deep copy and a model rebuilt from the state dict evaluate alike, on a batch of one too.
    again = augnet.AugNet(shallow_trunk(), augnet.AugmentationLayer(eeg_transforms()), train_copies=2)
    again.load_state_dict(model.state_dict())
    for other in (copy.deepcopy(model), again):
        for batch in (x[:1], x[:5]):
            torch.testing.assert_close(model.eval()(batch, generator=gen(3)), other.eval()(batch, generator=gen(3)),
                                       rtol=0, atol=0)  # fmt: skip


@pytest.mark.parametrize("length", [1, 2, 7])
def test_every_signal_and_audio_transform_in_a_float64_model_on_very_short_signals(length):
    torch.manual_seed(0)
    audio = [A.AddNoise(), A.Gain(), A.LowPass(SFREQ), A.BandReject(SFREQ), A.TimeMaskSpec(), A.FrequencyMaskSpec()]
    layer = augnet.AugmentationLayer(eeg_transforms() + audio, init_magnitude=0.8, train_mode="mix")
    trunk = nn.Sequential(nn.Flatten(), nn.Linear(CH * length, 3), nn.LogSoftmax(1))
    model = augnet.AugNet(trunk, layer, train_copies=3).double()
    x = torch.randn(2, CH, length, dtype=torch.float64)
    out = model(x, generator=gen(0))
    assert out.dtype == torch.float64 and out.shape == (2, 3)
    (out.sum() + augnet.selective_regularizer(model)).backward()
    assert torch.isfinite(layer.raw_magnitudes.grad).all() and torch.isfinite(layer.weight_logits.grad).all()


def test_mono_audio_with_a_per_instance_layer_trains_and_copies():
    torch.manual_seed(0)
    sr = np.float32(8000)
    x, y = 0.1 * torch.randn(12, 1, 401), torch.randint(0, 3, (12,))
    trunk = nn.Sequential(nn.Conv1d(1, 4, 9, stride=4), nn.ReLU(), nn.AdaptiveAvgPool1d(1), nn.Flatten(),
                          nn.Linear(4, 3), nn.LogSoftmax(1))  # fmt: skip
    layer = augnet.ConditionedAugmentationLayer(
        [A.AddNoise(), A.Gain(), A.LowPass(sr), A.BandReject(sr), A.SpeedChange(), S.FrequencyShift(sr)], channels=1
    )
    model = augnet.AugNet(trunk, layer, train_copies=2, eval_copies=2)
    fit(model, DataLoader(TensorDataset(x, y), batch_size=4), optimizer=torch.optim.Adam(augnet.param_groups(model)),
        epochs=1)  # fmt: skip
    per_sample = layer.policy(x[:3])
    assert per_sample["ranges"].shape == (3, 6, 2) and per_sample["units"][2] == "Hz cut-off"
    twin = copy.deepcopy(model).eval()
    torch.testing.assert_close(model.eval()(x[:1], generator=gen(1)), twin(x[:1], generator=gen(1)), rtol=0, atol=0)


# ------------------------------------------------------------------ sensor positions as the EEG tools give them


def test_sensor_positions_as_a_three_by_channels_matrix_say_to_transpose():
    with pytest.raises(ValueError, match=r"got shape \(3, 6\).*transpose"):
        S.SensorsRotationZ(cap().T)  # braindecode's sensors_positions_matrix is (3, Ch)
    assert S.SensorsRotationZ(cap().T.T).n_sensors == CH
    with pytest.raises(ValueError, match=r"got shape \(6, 2\)$"):  # not a transposed matrix: no such hint
        S.SensorsRotationZ(cap()[:, :2])


def test_sensor_positions_as_a_dict_of_names_say_to_stack_them_in_channel_order():
    ch_pos = {f"E{i}": p for i, p in enumerate(cap())}  # MNE's montage.get_positions()["ch_pos"]
    with pytest.raises(TypeError, match=r"a dict of 6 entries.*np\.stack"):
        S.SensorsRotationX(ch_pos)
    assert S.SensorsRotationX(np.stack([ch_pos[name] for name in ch_pos])).n_sensors == CH


# ------------------------------------------------------------------ a per-instance layer on EEG in volts


def _eeg(scale: float) -> torch.Tensor:
    x = torch.randn(8, 4, 100, generator=gen(0))
    return x * torch.linspace(1, 3, 8).view(8, 1, 1) * scale  # inputs that differ (their amplitudes)


def test_a_conditioner_on_eeg_in_volts_warns_that_it_cannot_tell_the_inputs_apart():
    torch.manual_seed(0)
    layer = augnet.ConditionedAugmentationLayer([S.GaussianNoise(), S.TimeReverse()], channels=4)
    volts = _eeg(1e-5)
    with pytest.warns(UserWarning, match=r"microvolts"):
        layer.train()(volts, copies=2)
    # What it warns about: the standardised features of these inputs hardly differ (under 1 % of unit scale) ...
    conditioner = layer.conditioner
    features = conditioner.features(volts).flatten(2).mean(2).detach()
    assert float(conditioner.norm.eval()(features).std(0).max()) < 1e-2
    # ... where in microvolts they do.
    micro = conditioner.features(volts * 1e6).flatten(2).mean(2).detach()
    assert float(conditioner.norm.train()(micro).std(0).max()) > 0.1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        layer(volts, copies=2)  # once per conditioner


@pytest.mark.parametrize("case", ["microvolts", "one input repeated", "evaluation", "batch of one"])
def test_a_conditioner_that_can_tell_its_inputs_apart_or_has_nothing_to_tell_does_not_warn(case):
    torch.manual_seed(0)
    layer = augnet.ConditionedAugmentationLayer([S.GaussianNoise(), S.TimeReverse()], channels=4).train()
    x = {"microvolts": _eeg(1e-5) * 1e6, "one input repeated": _eeg(1e-5)[:1].expand(8, -1, -1),
         "evaluation": _eeg(1e-5), "batch of one": _eeg(1e-5)[:1]}[case]  # fmt: skip
    if case == "evaluation":
        layer.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        layer(x, copies=2)
