"""A user's audit of the EEG/signal and audio transforms: what was silently wrong or a raw error.

Each test names what was wrong before: the FFT transforms at magnitude 0 were the input only to their round trip's
rounding, past the documented 1e-6 of the peak on long float32 signals; ``FTSurrogate.apply_transform`` on float16
/ bfloat16 raised torch's NotImplementedError where every other transform computes in float32; ``AddNoise`` gave an
infinite output or no noise at all for signals whose sum of squares leaves float32's range; ``rotation_matrix``
turned a bool tensor by 1 radian and a complex one into a complex matrix, where its docstring promises a TypeError.
"""

from __future__ import annotations

import math

import pytest
import torch

from augnet.transforms import audio as A
from augnet.transforms import signal as S
from augnet.transforms._sensors import rotation_matrix

F64 = torch.float64


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


FFT = {
    "FTSurrogate": lambda: S.FTSurrogate(channel_independent=True),
    "FrequencyShift": lambda: S.FrequencyShift(sfreq=250, max_shift=5.0),
    "BandStop": lambda: S.BandStop(sfreq=torch.tensor(250.0), max_width=4.0),
}


@pytest.mark.parametrize("name", sorted(FFT))
def test_fft_transforms_are_the_input_itself_at_magnitude_zero(name):
    # The FFT round trip was up to 1.7e-6 of the peak on 2**20 + 1 float32 samples of a +-1 signal (the docs said
    # 1e-6); any length gave a few ulps. Rows at magnitude 0 are now the input bit for bit, the others unchanged.
    t = FFT[name]()
    x = torch.randn(3, 4, 1001, generator=_gen(1)).sign()
    assert torch.equal(t(x, 0.0, generator=_gen(), copies=2), x.repeat(2, 1, 1))
    mu = torch.tensor([0.0, 0.7, 0.0, 0.3, 0.0, 1.0])
    params = t.draw_params(x, mu, generator=_gen(), copies=2)
    out = t(x, mu, params=params, copies=2)
    assert torch.equal(out[mu == 0], x.repeat(2, 1, 1)[mu == 0])
    with torch.no_grad():  # the rows that move are apply_transform's, as before
        assert torch.equal(out[mu > 0], t.apply_transform(x, params)[mu > 0])


@pytest.mark.parametrize("name", sorted(FFT))
def test_fft_transforms_keep_the_derivative_in_the_magnitude_at_zero(name):
    t = FFT[name]()
    x = torch.randn(2, 3, 64, dtype=F64, generator=_gen(2))
    w = torch.randn(4, 3, 64, dtype=F64, generator=_gen(3))
    mu = torch.tensor(0.0, dtype=F64, requires_grad=True)
    out = t(x, mu, generator=_gen(), copies=2)
    assert torch.equal(out.detach(), x.repeat(2, 1, 1))  # the FFT round trip before: off by about 1e-16
    (out * w).sum().backward()
    h = 1e-6  # magnitudes lie in [0, 1]: the one-sided difference into (0, 1]
    one_sided = ((t(x, h, generator=_gen(), copies=2) - x.repeat(2, 1, 1)) * w).sum() / h
    assert math.isclose(mu.grad.item(), one_sided.item(), rel_tol=1e-4, abs_tol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_ft_surrogate_apply_transform_takes_half_precision(dtype):
    # NotImplementedError("Unsupported dtype Half") from torch.fft: the other FFT transforms compute in float32.
    t = S.FTSurrogate()
    x = torch.randn(2, 3, 50, generator=_gen()).to(dtype)
    params = t.draw_params(x, 0.7, generator=_gen())
    out = t.apply_transform(x, params)
    assert out.dtype == dtype and torch.equal(out, t(x, 0.7, params=params))


@pytest.mark.parametrize("scale", [1e-30, 1e-25, 1e-23, 1e19, 1e30])
def test_add_noise_snr_does_not_depend_on_the_signals_scale(scale):
    # float32 signals beyond about 1e18 gave an infinite (then NaN) output; below 1e-22 the SNR drifted (15 dB for
    # 6 dB) and at 1e-25 no noise was added at all: the sum of squares left float32's range.
    x = torch.randn(2, 3, 16000, generator=_gen(1))
    t = A.AddNoise(min_snr_db=0.0)

    def snr(signal):
        y = t(signal, 0.8, generator=_gen())
        assert torch.isfinite(y).all()
        s, n = signal.double(), (y.double() - signal.double())
        return 10 * torch.log10((s**2).sum(-1) / (n**2).sum(-1))

    torch.testing.assert_close(snr(x * scale), snr(x), rtol=0, atol=1e-4)


def test_add_noise_keeps_silent_channels_silent_and_finite_gradients_at_a_tiny_scale():
    x = torch.randn(2, 3, 100, generator=_gen(1)) * 1e-25
    x[0, 1] = 0
    x.requires_grad_(True)
    mu = torch.tensor(0.5, requires_grad=True)
    y = A.AddNoise()(x, mu, generator=_gen())
    assert torch.equal(y[0, 1], torch.zeros(100)) and not torch.equal(y[1], x[1])  # noise where there is signal
    y.sum().backward()
    assert torch.isfinite(x.grad).all() and torch.isfinite(mu.grad)


@pytest.mark.parametrize("angle", [torch.tensor(True), torch.tensor([0.5j])])
def test_rotation_matrix_refuses_angles_that_are_not_real(angle):
    # A bool tensor was a rotation by 1 radian, a complex one a complex matrix; numbers and arrays were refused.
    with pytest.raises(TypeError, match="angle"):
        rotation_matrix("z", angle)


def test_rotation_matrix_still_takes_real_tensors():
    a = torch.tensor([0.3, -1.0], dtype=F64)
    r = rotation_matrix("z", a)
    assert r.dtype == F64 and torch.equal(r[:, 0, 0], torch.cos(a))
    assert rotation_matrix("x", torch.tensor(1)).dtype == torch.float32  # an integer tensor: torch.cos's float
