"""What augnet says to users who pass data in a common layout or type it does not take as given.

- A transform given mono audio (B, T), one image (Ch, H, W) or one grey image (H, W) names the reshape that
  makes a batch (the same ValueError as before, with the hint).
- A transform's number arguments take 0-d tensors and 0-d NumPy arrays as numbers (kept as Python numbers); what is
  not a number is refused with ``NotANumberError``, both a TypeError and the ValueError raised before.
- ``fit`` on inputs of another floating dtype than the model's (MNE's float64 into a float32 model) says so, names
  both dtypes and the cast, when the first step fails; the model is left as it was.
"""

from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from transform_cases import CASES

import augnet
from augnet import _checks
from augnet.data import sinusoids
from augnet.training import fit
from augnet.transforms import audio as A
from augnet.transforms import image as T
from augnet.transforms import signal as S

# ----------------------------------------------------------------------- rank hints

#: The reshapes a hint may name, applied to the input it was given for.
_ADVICE = re.compile(r"x(?:\.unsqueeze\((\d)\)|\[None, None\])")


def _advised(message: str, x: torch.Tensor) -> list[torch.Tensor]:
    """Every reshape the hint names, applied to ``x``."""
    out = []
    for match in _ADVICE.finditer(message):
        out.append(x.unsqueeze(int(match.group(1))) if match.group(1) is not None else x[None, None])
    return out


def _refusal(t, x) -> str:
    with pytest.raises(ValueError, match="-D input") as info:
        t(x, 0.5)
    return str(info.value)


def t_doc(case) -> str:
    return case.build()._shape_doc()


SIGNAL_CASES = [c for c in CASES if c.kind in ("eeg", "audio", "sensors") and t_doc(c) == "(B, Ch, T)"]
SPECTROGRAM_CASES = [c for c in CASES if c.kind == "audio" and t_doc(c) != "(B, Ch, T)"]
IMAGE_CASES = [c for c in CASES if c.kind == "image"]


@pytest.mark.parametrize("case", SIGNAL_CASES, ids=lambda c: c.id)
def test_a_signal_transform_given_mono_signals_says_to_add_the_channel_dimension(case):
    t = case.build()
    x = case.make(3, torch.float32)  # (B, Ch, T)
    mono = x[:, 0]  # (B, T): mono audio, one EEG channel
    message = _refusal(t, mono)
    assert "for mono audio or single-channel signals (B, T) use x.unsqueeze(1)" in message
    # every reshape it names gives the transform's rank; the mono one is the batch of one-channel signals
    shapes = [tuple(v.shape) for v in _advised(message, mono)]
    assert (3, 1, x.shape[2]) in shapes and all(len(s) == 3 for s in shapes)
    if case.kind != "sensors" and case.name != "ChannelsSymmetry":  # these read their montage's channels
        t(mono.unsqueeze(1), 0.5)  # the advice is taken
    one = x[0]  # (Ch, T): one multichannel signal
    assert "for one signal (Ch, T), x.unsqueeze(0)" in _refusal(t, one)
    out = t(one.unsqueeze(0), 0.0)  # a batch of one; the identity at magnitude 0 (the FFTs' within their rounding)
    torch.testing.assert_close(out, x[:1], rtol=0, atol=1e-5 * float(x.abs().max()))
    message = _refusal(t, x[0, 0])  # (T,): one mono signal
    assert "x[None, None]" in message and [tuple(v.shape) for v in _advised(message, x[0, 0])] == [(1, 1, x.shape[2])]


@pytest.mark.parametrize("case", IMAGE_CASES, ids=lambda c: c.id)
def test_an_image_transform_given_one_image_or_grey_images_says_how_to_make_a_batch(case):
    t = case.build()
    x = case.make(2, torch.float32)  # (B, Ch, H, W)
    message = _refusal(t, x[0])
    assert "for one image (Ch, H, W) use x.unsqueeze(0), a batch of one" in message
    assert "for single-channel images (B, H, W), x.unsqueeze(1)" in message
    assert tuple(_advised(message, x[0])[0].shape) == (1, *x.shape[1:])
    t(x[0].unsqueeze(0), 0.5)
    message = _refusal(t, x[0, 0])  # (H, W)
    assert "for one single-channel image (H, W) use x[None, None]" in message
    assert [tuple(v.shape) for v in _advised(message, x[0, 0])] == [(1, 1, *x.shape[2:])]


@pytest.mark.parametrize("case", SPECTROGRAM_CASES, ids=lambda c: c.id)
def test_a_spectrogram_transform_given_one_spectrogram_says_to_make_a_batch_of_one(case):
    t = case.build()
    x = case.make(2, torch.float32)  # (B, F, T)
    message = _refusal(t, x[0])
    assert "for one spectrogram (F, T) use x.unsqueeze(0), a batch of one" in message
    torch.testing.assert_close(t(x[0].unsqueeze(0), 0.0), x[:1], rtol=0, atol=1e-5 * float(x.abs().max()))


def test_layers_and_models_pass_the_hint_on_and_ranks_without_a_common_layout_get_none():
    layer = augnet.AugmentationLayer([S.TimeReverse(), S.SignFlip()])
    with pytest.raises(ValueError, match=r"got shape \(4, 100\): for mono audio .* use x\.unsqueeze\(1\)"):
        layer(torch.randn(4, 100))
    with pytest.raises(ValueError, match=r"x\.unsqueeze\(1\)"):
        A.Gain()(torch.randn(4, 16000), 0.5)
    for t, x in ((T.Rotate(), torch.rand(2, 1, 3, 8, 8)), (S.TimeReverse(), torch.randn(2, 1, 3, 10))):
        message = _refusal(t, x)  # more dimensions than taken: nothing to guess
        assert message.endswith(f"got shape {tuple(x.shape)}") and not _advised(message, x)


# ----------------------------------------------------------------------- numbers as 0-d tensors and arrays


def _real_arguments():
    """``(case, argument)`` for each number argument of every transform class (its first case)."""
    seen, out = set(), []
    for case in CASES:
        t = case.build()
        for name, value in t.config().items():
            if _checks.is_real(value) and (type(t), name) not in seen:
                seen.add((type(t), name))
                out.append((case, name))
    return out


#: Number arguments not read through ``augnet._checks.positive`` (their modules read them themselves): they take no
#: tensor yet. Strict: an argument that starts taking one fails here, to be removed from the list.
_NOT_YET: dict[str, str] = {}  # arguments that do not take a 0-d tensor yet (none)


def _argument_params():
    out = []
    for case, name in _real_arguments():
        key = f"{type(case.build()).__name__}.{name}"
        marks = [pytest.mark.xfail(strict=True, reason=_NOT_YET[key])] if key in _NOT_YET else []
        out.append(pytest.param(case, name, id=key, marks=marks))
    return out


@pytest.mark.parametrize(("case", "name"), _argument_params())
def test_every_number_argument_takes_a_0d_tensor_or_array_and_keeps_a_python_number(case, name):
    t = case.build()
    config = t.config()
    value = config[name]
    as_integer = isinstance(value, int) or float(value).is_integer()
    if isinstance(value, int):  # an int argument takes integer tensors and arrays (a float 4.0 is refused, as is 4.0)
        given = [torch.tensor(value), torch.tensor(value, dtype=torch.int32), np.array(value)]
    else:
        given = [torch.tensor(value, dtype=torch.float64), np.array(value)]
        if as_integer:
            given.append(torch.tensor(int(value)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # FTSurrogate's max_phase of a full turn and such
        for g in given:
            u = type(t)(**{**config, name: g})
            assert u.config() == config
            kept = getattr(u, name)
            assert type(kept) is type(getattr(t, name)) and not isinstance(kept, (torch.Tensor, np.ndarray))


def test_sfreq_as_a_tensor_gives_the_transform_of_the_number():
    x, _ = sinusoids(4, seed=0)
    g = torch.Generator().manual_seed(3)
    for cls in (S.FrequencyShift, S.BandStop):
        by_number = cls(sfreq=100.0)
        by_tensor = cls(sfreq=torch.tensor(100.0))
        assert by_tensor.sfreq == 100.0 and type(by_tensor.sfreq) is float
        params = by_number.draw_params(x, 0.7, generator=g)
        assert torch.equal(by_tensor(x, 0.7, params=params), by_number(x, 0.7, params=params))


def test_a_float32_tensor_gives_its_own_value_and_a_tensor_with_a_gradient_gives_it_quietly():
    assert T.Rotate(max_angle=torch.tensor(0.1)).max_angle == float(torch.tensor(0.1))  # float32's 0.1, not 0.1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # float() of a tensor that requires grad warns
        assert T.Rotate(max_angle=torch.tensor(0.5, requires_grad=True)).max_angle == 0.5
    assert T.Scale(max_zoom=np.array(1.5)).max_zoom == 1.5


@pytest.mark.parametrize(
    "bad",
    ["30", None, True, np.bool_(True), np.array(True), torch.tensor(True), torch.tensor([1.0, 2.0]),
     np.array([1.0]), torch.tensor(1 + 1j), 1j, [1.0]],
    ids=["str", "None", "bool", "numpy-bool", "0d-bool-array", "bool-tensor", "tensor-of-two", "array-of-one",
         "complex-tensor", "complex", "list"],
)  # fmt: skip
def test_what_is_not_a_number_is_refused_as_both_a_type_error_and_the_value_error_it_was(bad):
    builds = [(lambda v: T.Rotate(max_angle=v), "max_angle"), (lambda v: T.VerticalFlip(temperature=v), "temperature")]
    if bad is not None:  # FrequencyShift(sfreq=None) says that sfreq is required
        builds.append((lambda v: S.FrequencyShift(sfreq=v), "sfreq"))
    for build, name in builds:
        with pytest.raises(_checks.NotANumberError, match=f"{name} must be a positive finite number, got") as info:
            build(bad)
        assert isinstance(info.value, TypeError) and isinstance(info.value, ValueError)


@pytest.mark.parametrize("bad", [torch.tensor(-1.0), torch.tensor(0), np.array(float("nan")), torch.tensor(math.inf)])
def test_a_0d_tensor_that_is_not_positive_and_finite_is_refused_naming_its_value(bad):
    with pytest.raises(ValueError, match=rf"max_angle must be a positive finite number, got {bad.item()!r}$") as info:
        T.Rotate(max_angle=bad)
    assert not isinstance(info.value, TypeError)  # a number, of a bad value


def test_a_0d_tensor_on_meta_is_refused_as_holding_no_value():
    with pytest.raises(ValueError, match="max_angle is a tensor on meta, which holds no value: give a number"):
        T.Rotate(max_angle=torch.tensor(0.5, device="meta"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_a_0d_cuda_tensor_is_read_once_at_construction():
    t = S.FrequencyShift(sfreq=torch.tensor(100.0, device="cuda"))
    assert t.sfreq == 100.0 and type(t.sfreq) is float


# ----------------------------------------------------------------------- fit on data of another dtype


def _signal_model(dtype=torch.float32):
    torch.manual_seed(0)
    trunk = nn.Sequential(nn.Conv1d(1, 4, 5), nn.ReLU(), nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(4, 3),
                          nn.LogSoftmax(1))  # fmt: skip
    model = augnet.AugNet(trunk, augnet.AugmentationLayer([S.TimeReverse(), S.SignFlip(), S.GaussianNoise()]))
    return model.to(dtype), torch.optim.Adam(model.parameters(), lr=0.01)


def _signals(n=16):
    return sinusoids(n, freqs=(5.0, 10.0, 20.0), duration=0.5, seed=0)


def _state(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


def _same(model, before) -> bool:
    now = model.state_dict()
    return now.keys() == before.keys() and all(
        now[k].dtype == v.dtype and torch.equal(now[k], v) for k, v in before.items()
    )


@pytest.mark.parametrize("amp", [False, True], ids=["plain", "amp"])
def test_fit_on_float64_data_into_a_float32_model_names_both_dtypes_and_the_cast(amp):
    model, opt = _signal_model()
    x, y = _signals()
    before, training = _state(model), model.training
    data = DataLoader(TensorDataset(x.double(), y), batch_size=8)  # what MNE's arrays give
    with pytest.raises(TypeError, match="the inputs are float64 and the model's parameters float32") as info:
        fit(model, data, opt, 1, amp=amp)
    message = str(info.value)
    assert "TensorDataset(x.float(), y)" in message and "fit does not cast the batches" in message
    assert ("model.double()" in message) != amp  # under autocast a float64 model is no fix for float32 weights
    if amp:
        assert "autocast (amp) casts float32 inputs to bfloat16, never float64 ones" in message
    assert isinstance(info.value.__cause__, RuntimeError)  # torch's own error, kept
    assert _same(model, before) and model.training == training and not opt.state  # nothing changed, nothing stepped
    fit(model, DataLoader(TensorDataset(x.double().float(), y), batch_size=8), opt, 1, amp=amp)  # the advice works


def test_fit_on_float32_tensors_into_a_float64_model_says_to_cast_them_to_float64():
    model, opt = _signal_model(torch.float64)
    x, y = _signals()
    before = _state(model)
    with pytest.raises(TypeError, match=r"inputs are float32 and the model's parameters float64: .* x\.double\(\)"):
        fit(model, x, y, opt, 1, 8)
    assert _same(model, before)
    fit(model, x.double(), y, opt, 1, 8)


class _Casting(nn.Module):
    """A model that casts its inputs to its weights' dtype itself (as some pretrained models do)."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(50, 3), nn.LogSoftmax(1))

    def forward(self, x):
        return self.net(x.to(self.net[1].weight.dtype))


def test_a_model_that_casts_its_inputs_trains_on_float64_data_as_on_the_cast_data():
    x, y = _signals()
    runs = []
    for data in (x.double(), x):
        torch.manual_seed(0)
        model = _Casting()
        fit(model, data, y, torch.optim.SGD(model.parameters(), lr=0.1), 2, 8, regularizer="none", shuffle=False)
        runs.append(model.state_dict())
    assert all(torch.equal(runs[0][k], runs[1][k]) for k in runs[0])


def test_a_first_step_that_fails_for_another_reason_with_matching_dtypes_keeps_its_error():
    model, opt = _signal_model()
    x, y = _signals()
    with pytest.raises(RuntimeError) as info:  # float targets: nll_loss refuses them
        fit(model, x, y.float(), opt, 1, 8)
    assert not isinstance(info.value, TypeError)
    model, opt = _signal_model()
    integer = [(torch.zeros(4, 50, dtype=torch.long), torch.zeros(4, dtype=torch.long))]  # token ids: not floating
    with pytest.raises((TypeError, RuntimeError)) as info:
        fit(model, integer, opt, 1)
    assert "the model's parameters" not in str(info.value)
