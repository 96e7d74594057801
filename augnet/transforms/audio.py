"""Differentiable audio transforms: waveforms (B, Ch, T) and spectrograms (B, F, T).

Every transform is the identity at magnitude 0 (exactly), draws its per-row
parameters on the input's device from the given generator, and reaches its
documented range at magnitude 1; each range is a constructor argument.

Everything here is plain PyTorch: no torchaudio is needed (the biquads use
the Audio EQ Cookbook's formulas, the default ``Q = 0.707`` of common audio
tools, and are run by ``filter_rows``, an exact FFT form of the IIR
recursion that autograd differentiates in the signal and the coefficients).

Transforms and their parameters (``N = B * copies`` rows):

==================  ==========================================  ===========================================
transform           magnitude 1 means (default)                 params
==================  ==========================================  ===========================================
AddNoise            SNR down to ``min_snr_db`` (0 dB)           ``noise_ratio`` (N,), ``noise`` (N, Ch, T)
Gain                gain up to ±``max_gain_db`` (6 dB)          ``gain_db`` (N,)
LowPass             cut-off down to 0.05 × Nyquist (from 0.9)   ``cutoff`` (N,) Hz
HighPass            cut-off up to 0.3 × Nyquist (from 0.0025)   ``cutoff`` (N,) Hz
BandReject          notch Q down to ``min_q`` (0.707)           ``center`` (N,) Hz, ``width`` (N,) Hz
SpeedChange         speed factor in [1/1.25, 1.25]              ``factor`` (N,)
TimeMaskSpec        a band up to 20 frames wide                 ``start`` (N,), ``width`` (N,) frames
FrequencyMaskSpec   a band up to 10 bins wide                   ``start`` (N,), ``width`` (N,) bins
==================  ==========================================  ===========================================

Examples:
    >>> from augnet.transforms import audio as A
    >>> x = torch.randn(2, 1, 1600) * 0.1
    >>> lp = A.LowPass(sample_rate=16000)
    >>> params = lp.sample(x, 0.5, generator=torch.Generator().manual_seed(0))
    >>> bool(((params["cutoff"] <= 7200) & (params["cutoff"] >= 7200 * (400 / 7200) ** 0.5)).all())
    True
    >>> torch.equal(lp(x, 0.0), x)
    True
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from augnet._checks import NotANumberError, real
from augnet.transforms._biquad import DEFAULT_Q, filter_rows, highpass_coefficients, lowpass_coefficients
from augnet.transforms._biquad import _all_pole_response as _all_pole_response
from augnet.transforms._biquad import bandreject_coefficients as bandreject_coefficients
from augnet.transforms._ranges import drawn_range
from augnet.transforms.base import Range, SignalTransform, draw, in_float32, param_dtype, positive, uniform

__all__ = [
    "AddNoise",
    "BandReject",
    "FrequencyMaskSpec",
    "Gain",
    "HighPass",
    "LowPass",
    "SpeedChange",
    "TimeMaskSpec",
]


_F32 = torch.finfo(torch.float32)


def _number(name: str, value) -> float:
    value = real(name, value, "a finite number")  # a 0-d tensor or array: the number it holds
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def _sample_rate(value) -> float:
    if value is None:  # not a number: the TypeError it was, and a ValueError as every other argument's
        raise NotANumberError("sample_rate is required (in Hz), got None")
    return positive("sample_rate", value)


def _frequency_range(kind: str, low, high, nyquist: float) -> tuple[float, float]:
    """Check ``0 < low < high < nyquist`` for a pair of frequencies in Hz."""
    low = positive(f"min_{kind}", low)
    high = positive(f"max_{kind}", high)
    if low >= high:
        raise ValueError(f"min_{kind} ({low:g} Hz) must be below max_{kind} ({high:g} Hz): the range is inverted")
    if high >= nyquist:
        raise ValueError(f"max_{kind} ({high:g} Hz) must be below the Nyquist frequency ({nyquist:g} Hz)")
    why = "the frequencies are drawn in float32 (give the sample rate and frequencies in other units)"
    in_float32(f"min_{kind}", low, why)
    in_float32("the Nyquist frequency sample_rate / 2", nyquist, why)
    return low, high


def _channel_norm(x: Tensor) -> Tensor:
    """``||x||`` over time, (N, Ch, 1). Where its sum of squares leaves the float range (a float32 signal beyond
    about 1e18 overflowed to an infinite norm, below 1e-22 it lost digits and then underflowed to 0: an infinite
    SNR or no noise at all), the norm of ``x`` over its peak, times the peak; elsewhere the plain norm."""
    norm = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    tiny = torch.finfo(torch.float64 if x.dtype == torch.float64 else torch.float32).tiny  # what the sum is taken in
    peak = x.detach().abs().amax(-1, keepdim=True)
    off = (torch.isinf(norm) | (norm < math.sqrt(tiny * x.shape[-1]))) & torch.isfinite(peak) & (peak > 0)
    peak = torch.where(off, peak, torch.ones_like(peak))
    return torch.where(off, torch.linalg.vector_norm(x / peak, dim=-1, keepdim=True) * peak, norm)


# ---------------------------------------------------------------------- biquads


class _Filter(SignalTransform):
    """A biquad filter with per-row parameters, bypassed exactly where it is the identity."""

    def __init__(self, sample_rate: float) -> None:
        super().__init__()
        self.sample_rate = _sample_rate(sample_rate)

    @property
    def nyquist(self) -> float:
        return self.sample_rate / 2

    def _coefficients(self, params: dict[str, Tensor], active: Tensor) -> tuple[Tensor, Tensor]:
        """The biquads ``(b, a)``, each (N, 3), of the rows (the identity's limit where not ``active``)."""
        raise NotImplementedError(f"{type(self).__name__} must implement _coefficients()")

    def _active(self, params: dict[str, Tensor]) -> Tensor:
        """(N,) bool: the rows whose filter is not the identity."""
        raise NotImplementedError(f"{type(self).__name__} must implement _active()")

    def apply_transform(self, x: Tensor, params: dict[str, Tensor]) -> Tensor:
        """Filter each row with its own biquad; rows whose filter is the identity are bypassed exactly.

        Shape:
            - x: :math:`(B, Ch, T)`.
            - output: :math:`(N, Ch, T)`.
        """
        x = self._rows(x, params)
        active = self._active(params)
        b, a = self._coefficients(params, active)
        # Identity rows are x exactly, plus an exact zero that carries the derivative of the filter family in
        # its coefficients as the magnitude leaves 0 (their coefficients are the limit from inside); their
        # derivative in x is the identity's, so the filter reads them detached.
        source = torch.where(active[:, None, None], x, x.detach())
        y = filter_rows(source.to(b.dtype), b, a).to(x.dtype)
        return torch.where(active[:, None, None], y, x + (y - y.detach()))


class LowPass(_Filter):
    """Biquad low-pass filter whose cut-off goes down as the magnitude grows.

    The cut-off is ``max_cutoff * (min_cutoff / max_cutoff) ** (mu * u)`` Hz,
    ``u ~ U(0, 1)`` (log-linear from ``max_cutoff`` at ``mu * u -> 0`` down to
    ``min_cutoff`` at ``mu * u = 1``). ``mu * u = 0`` draws the cut-off
    ``sample_rate / 2``: a low-pass at the Nyquist frequency is the identity,
    and :meth:`~augnet.transforms.Transform.apply_transform` returns the input exactly there. At ``mu = 0`` the
    gradient in the magnitude is the derivative of the filter family as the
    magnitude leaves 0 (cut-off from ``max_cutoff`` down), so a magnitude at 0
    can grow; elsewhere it is the true derivative.

    Args:
        sample_rate: in Hz (required).
        min_cutoff: cut-off at magnitude 1, in Hz (default 0.05 × Nyquist,
            400 Hz at 16 kHz).
        max_cutoff: cut-off as the magnitude goes to 0, in Hz (default 0.9 ×
            Nyquist, 7.2 kHz at 16 kHz); below the Nyquist frequency.
        q: quality factor (default 0.707, about 1/sqrt(2): no resonance peak).

    Parameters: ``cutoff`` (N,) in Hz; a cut-off at or above the Nyquist
    frequency means no filtering.
    """

    def __init__(
        self, sample_rate: float, min_cutoff: float | None = None, max_cutoff: float | None = None, q: float = DEFAULT_Q
    ) -> None:
        super().__init__(sample_rate)
        nyq = self.nyquist
        low = 0.05 * nyq if min_cutoff is None else min_cutoff
        high = 0.9 * nyq if max_cutoff is None else max_cutoff
        self.min_cutoff, self.max_cutoff = _frequency_range("cutoff", low, high, nyq)
        self.q = drawn_range("q", q)  # a q below float32's range: an infinite alpha, NaN output

    def sample(self, x, magnitude, generator=None, copies=1):
        n = x.shape[0] * copies
        amount = magnitude * uniform(n, x, generator, 0.0, 1.0)
        cutoff = self.max_cutoff * (self.min_cutoff / self.max_cutoff) ** amount
        # mu * u = 0: the Nyquist frequency (no filtering), carrying the cut-off's derivative in mu.
        return {"cutoff": torch.where(amount > 0, cutoff, self.nyquist + (cutoff - cutoff.detach()))}

    def _active(self, params):
        return params["cutoff"] < self.nyquist

    def _coefficients(self, params, active):
        c = params["cutoff"]
        cutoff = torch.where(active, c, self.max_cutoff + (c - c.detach()))  # the limit as mu * u -> 0+
        return lowpass_coefficients(cutoff, self.sample_rate, self.q)

    def natural_range(self, magnitude, size=None):
        low = self.max_cutoff * (self.min_cutoff / self.max_cutoff) ** float(magnitude)
        return Range(low, self.max_cutoff, "Hz cut-off")

    def extra_repr(self):
        return (
            f"sample_rate={self.sample_rate:g}, min_cutoff={self.min_cutoff:g}, "
            f"max_cutoff={self.max_cutoff:g}, q={self.q:g}"
        )


class HighPass(_Filter):
    """Biquad high-pass filter whose cut-off goes up as the magnitude grows.

    The cut-off is ``min_cutoff * (max_cutoff / min_cutoff) ** (mu * u)`` Hz,
    ``u ~ U(0, 1)`` (log-linear from ``min_cutoff`` up to ``max_cutoff`` at
    ``mu * u = 1``). ``mu * u = 0`` draws the cut-off 0 Hz, the identity,
    returned exactly; the gradient there is that of the filter family as the
    magnitude leaves 0 (cut-off from ``min_cutoff`` up).

    Args:
        sample_rate: in Hz (required).
        min_cutoff: cut-off as the magnitude goes to 0, in Hz (default 0.0025
            × Nyquist, 20 Hz at 16 kHz).
        max_cutoff: cut-off at magnitude 1, in Hz (default 0.3 × Nyquist,
            2.4 kHz at 16 kHz); below the Nyquist frequency.
        q: quality factor (default 0.707, about 1/sqrt(2): no resonance peak).

    Parameters: ``cutoff`` (N,) in Hz; a cut-off at or below 0 means no
    filtering.
    """

    def __init__(
        self, sample_rate: float, min_cutoff: float | None = None, max_cutoff: float | None = None, q: float = DEFAULT_Q
    ) -> None:
        super().__init__(sample_rate)
        nyq = self.nyquist
        low = 0.0025 * nyq if min_cutoff is None else min_cutoff
        high = 0.3 * nyq if max_cutoff is None else max_cutoff
        self.min_cutoff, self.max_cutoff = _frequency_range("cutoff", low, high, nyq)
        self.q = drawn_range("q", q)  # a q below float32's range: an infinite alpha, NaN output

    def sample(self, x, magnitude, generator=None, copies=1):
        n = x.shape[0] * copies
        amount = magnitude * uniform(n, x, generator, 0.0, 1.0)
        cutoff = self.min_cutoff * (self.max_cutoff / self.min_cutoff) ** amount
        # mu * u = 0: a cut-off of 0 Hz (no filtering), carrying the cut-off's derivative in mu.
        return {"cutoff": torch.where(amount > 0, cutoff, cutoff - cutoff.detach())}

    def _active(self, params):
        return params["cutoff"] > 0

    def _coefficients(self, params, active):
        c = params["cutoff"]
        cutoff = torch.where(active, c, self.min_cutoff + (c - c.detach()))  # the limit as mu * u -> 0+
        return highpass_coefficients(cutoff, self.sample_rate, self.q)

    def natural_range(self, magnitude, size=None):
        high = self.min_cutoff * (self.max_cutoff / self.min_cutoff) ** float(magnitude)
        return Range(self.min_cutoff, high, "Hz cut-off")

    def extra_repr(self):
        return (
            f"sample_rate={self.sample_rate:g}, min_cutoff={self.min_cutoff:g}, "
            f"max_cutoff={self.max_cutoff:g}, q={self.q:g}"
        )


class BandReject(_Filter):
    """Biquad band-reject (notch) filter at a random centre, its width growing with the magnitude.

    The centre is log-uniform in ``[min_center, max_center]``; the bandwidth
    is ``center * mu * u / min_q`` Hz, ``u ~ U(0, 1)``, i.e. the filter's
    ``Q = center / width = min_q / (mu * u)``: at magnitude 1 the widest notch
    has the default ``Q = 0.707``, and the notch narrows to nothing
    (the identity, bypassed exactly) as ``mu * u -> 0``.

    Args:
        sample_rate: in Hz (required).
        min_center, max_center: range of the centre frequency in Hz (default
            0.025 to 0.5 × Nyquist, 200 Hz to 4 kHz at 16 kHz).
        min_q: the filter's Q at ``mu * u = 1`` (default 0.707).

    Parameters: ``center`` (N,) and ``width`` (N,) in Hz; a width at or below
    0 means no filtering.
    """

    def __init__(
        self,
        sample_rate: float,
        min_center: float | None = None,
        max_center: float | None = None,
        min_q: float = DEFAULT_Q,
    ) -> None:
        super().__init__(sample_rate)
        nyq = self.nyquist
        low = 0.025 * nyq if min_center is None else min_center
        high = 0.5 * nyq if max_center is None else max_center
        self.min_center, self.max_center = _frequency_range("center", low, high, nyq)
        self.min_q = drawn_range("min_q", min_q)

    def sample(self, x, magnitude, generator=None, copies=1):
        n = x.shape[0] * copies
        center = self.min_center * (self.max_center / self.min_center) ** uniform(n, x, generator, 0.0, 1.0)
        width = center * magnitude * uniform(n, x, generator, 0.0, 1.0) / self.min_q
        return {"center": center, "width": width}

    def _active(self, params):
        return params["width"] > 0

    def _coefficients(self, params, active):
        # Written with the bandwidth (alpha = sin(w0) * width / (2 * centre)), not Q = centre / width, so that
        # a zero width is the identity filter (b = a) with a finite derivative in the width.
        center, width = params["center"], params["width"]
        width = torch.where(active, width, width - width.detach())
        w0 = 2 * math.pi * center / self.sample_rate
        alpha = torch.sin(w0) * width / (2 * center)
        cos = torch.cos(w0)
        one = torch.ones_like(cos)
        return torch.stack([one, -2 * cos, one], -1), torch.stack([1 + alpha, -2 * cos, 1 - alpha], -1)

    def natural_range(self, magnitude, size=None):
        return Range(0.0, float(magnitude) / self.min_q, "x centre bandwidth")

    def extra_repr(self):
        return (
            f"sample_rate={self.sample_rate:g}, min_center={self.min_center:g}, "
            f"max_center={self.max_center:g}, min_q={self.min_q:g}"
        )


# ------------------------------------------------------------------ noise, gain


class AddNoise(SignalTransform):
    """White Gaussian noise at a signal-to-noise ratio.

    The noise-to-signal amplitude ratio is ``mu * u * 10 ** (-min_snr_db / 20)``,
    ``u ~ U(0, 1]``, i.e. ``SNR = min_snr_db - 20 log10(mu * u)`` dB: the noise
    amplitude is linear in the magnitude, the SNR is ``min_snr_db`` at
    ``mu * u = 1`` and infinite (no noise, exactly) at ``mu = 0``. The SNR is
    measured per channel (each channel of a row gets the same SNR against its
    own energy). Silent channels stay silent.

    The output is ``x + ratio * (||x|| / ||noise||) * noise`` per channel
    (norms over time), so ``10 log10(||x||^2 / ||x_out - x||^2)`` is the SNR
    exactly. It is linear in the ratio: the gradient in the magnitude is
    finite and correct at ``mu = 0`` too, where the output is ``x`` exactly.

    Args:
        min_snr_db: SNR at magnitude 1 (and ``u = 1``), in dB (default 0 dB).

    Parameters: ``noise_ratio`` (N,), the RMS noise-to-signal ratio
    ``10 ** (-SNR / 20)`` (0 = no noise); ``noise`` (N, Ch, T), standard
    normal noise before scaling.
    """

    def __init__(self, min_snr_db: float = 0.0) -> None:
        super().__init__()
        self.min_snr_db = _number("min_snr_db", min_snr_db)
        # The ratio 10 ** (-min_snr_db / 20) is drawn with in float32: beyond its range the noise was infinite
        # (or Python's OverflowError at the first call), or never added at all.
        if not math.log10(_F32.tiny) <= -self.min_snr_db / 20 <= math.log10(_F32.max):
            raise ValueError(
                f"min_snr_db must give a noise-to-signal ratio 10 ** (-min_snr_db / 20) within float32's range "
                f"(about -770 to 758 dB), got {min_snr_db!r}"
            )

    def sample(self, x, magnitude, generator=None, copies=1):
        n = x.shape[0] * copies
        u = 1.0 - uniform(n, x, generator, 0.0, 1.0)  # (0, 1]
        ratio = magnitude * u * 10 ** (-self.min_snr_db / 20)
        noise = draw(torch.randn, (n, *x.shape[1:]), generator=generator, device=x.device, dtype=param_dtype(x))
        return {"noise_ratio": ratio, "noise": noise}

    def apply_transform(self, x, params):
        """Add the noise, scaled per channel to the drawn SNR against that channel's energy.

        Shape:
            - x: :math:`(B, Ch, T)`; output :math:`(N, Ch, T)`.
        """
        x = self._rows(x, params)
        noise = params["noise"].to(x.dtype)
        ratio = params["noise_ratio"].to(x.dtype)[:, None, None]  # (N, 1, 1)
        norm_x = _channel_norm(x)  # (N, Ch, 1)
        norm_n = torch.linalg.vector_norm(noise, dim=-1, keepdim=True)
        # A silent channel (norm 0) stays silent; an all-zero noise row (never drawn) adds nothing.
        scale = torch.where(norm_n > 0, norm_x / torch.where(norm_n > 0, norm_n, torch.ones_like(norm_n)), 0.0)
        return x + ratio * scale * noise

    def natural_range(self, magnitude, size=None):
        m = float(magnitude)
        low = self.min_snr_db - 20 * math.log10(m) if m > 0 else math.inf
        return Range(low, math.inf, "dB SNR")

    def extra_repr(self):
        return f"min_snr_db={self.min_snr_db:g}"


class Gain(SignalTransform):
    """Gain of ``mu * max_gain_db * u`` dB, ``u ~ U(-1, 1)`` (default up to ±6 dB).

    Multiplies the signal by ``10 ** (gain_db / 20)``, as
    a gain in decibels means.

    Parameters: ``gain_db`` (N,).
    """

    def __init__(self, max_gain_db: float = 6.0) -> None:
        super().__init__()
        self.max_gain_db = positive("max_gain_db", max_gain_db)
        if self.max_gain_db / 20 > math.log10(_F32.max):  # an infinite gain (about 770 dB)
            raise ValueError(f"max_gain_db ({max_gain_db!r}) is beyond float32's range: 10 ** (max_gain_db / 20) "
                             f"overflows it")  # fmt: skip

    def sample(self, x, magnitude, generator=None, copies=1):
        n = x.shape[0] * copies
        return {"gain_db": magnitude * self.max_gain_db * uniform(n, x, generator)}

    def apply_transform(self, x, params):
        x = self._rows(x, params)
        ratio = 10 ** (params["gain_db"].to(x.dtype) / 20)
        return x * ratio[:, None, None]

    def natural_range(self, magnitude, size=None):
        g = float(magnitude) * self.max_gain_db
        return Range(-g, g, "dB")

    def extra_repr(self):
        return f"max_gain_db={self.max_gain_db:g}"


# ------------------------------------------------------------------------ speed


class SpeedChange(SignalTransform):
    """Speed change by fractional resampling: the output at ``t`` reads the input at ``s * t``.

    The factor is ``s = max_factor ** (mu * u)``, ``u ~ U(-1, 1)`` (default
    ``max_factor = 1.25``, so ``s`` lies in [0.8, 1.25] at magnitude 1): a
    tone at frequency ``f`` comes out at ``s * f``. Linear interpolation
    between neighbouring samples, differentiable in ``s``; the length ``T`` is
    kept, with zeros past the end of the input (``s > 1``). ``s = 1`` is
    exactly the identity (every position is an integer). No anti-aliasing
    filter: above ``sample_rate / (2 s)`` a speed-up folds frequencies back.

    Parameters: ``factor`` (N,).

    At magnitude 0 every position is an integer, the interpolation's kink: the derivative in the
    magnitude is taken one-sided, into (0, 1], as the image warps take it (``kink_at_zero``).
    """

    kink_at_zero = True  # s = 1 reads every sample at an integer position, where linear interpolation kinks

    def __init__(self, max_factor: float = 1.25) -> None:
        super().__init__()
        self.max_factor = in_float32("max_factor", positive("max_factor", max_factor))
        if self.max_factor <= 1:
            raise ValueError(f"max_factor must be above 1, got {max_factor!r}")

    def sample(self, x, magnitude, generator=None, copies=1):
        n = x.shape[0] * copies
        return {"factor": self.max_factor ** (magnitude * uniform(n, x, generator))}

    def apply_transform(self, x, params):
        """Read each row at its positions ``s * t``.

        Shape:
            - x: :math:`(B, Ch, T)`; output :math:`(N, Ch, T)`.
            - positions :math:`(N, T)` (one per row, shared by its channels),
              gathered from the input padded with one zero sample.
        """
        x = self._rows(x, params)
        n, ch, t = x.shape
        factor = params["factor"]
        steps = torch.arange(t, device=x.device, dtype=factor.dtype)
        # Position s * t as t + (s - 1) * t: exact at s = 1, and the fraction keeps more bits.
        offset = (factor[:, None] - 1) * steps  # (N, T)
        whole = torch.floor(offset)
        frac = (offset - whole).to(x.dtype)
        left = (steps + whole).long().clamp(0, t)  # index t is the zero pad
        right = (left + 1).clamp(max=t)
        padded = torch.nn.functional.pad(x, (0, 1))
        left = padded.gather(2, left[:, None, :].expand(n, ch, t))
        right = padded.gather(2, right[:, None, :].expand(n, ch, t))
        frac = frac[:, None, :]
        return left * (1 - frac) + right * frac

    def natural_range(self, magnitude, size=None):
        f = self.max_factor ** float(magnitude)
        return Range(1 / f, f, "x speed")

    def extra_repr(self):
        return f"max_factor={self.max_factor:g}"


# ---------------------------------------------------------------- spectrograms


class _SpecMask(SignalTransform):
    """A smooth band mask along one axis of a spectrogram (B, F, T)."""

    axis: int = 2
    unit: str = "frames"

    def __init__(self, max_width: float, edge: float = 1.0) -> None:
        super().__init__()
        self.max_width = in_float32("max_width", positive("max_width", max_width))
        self.edge = drawn_range("edge", edge)

    def _shape_doc(self) -> str:
        return "(B, F, T) spectrogram"

    def sample(self, x, magnitude, generator=None, copies=1):
        n = x.shape[0] * copies
        length = x.shape[self.axis]
        width = magnitude * self.max_width * uniform(n, x, generator, 0.0, 1.0)
        start = uniform(n, x, generator, 0.0, 1.0) * (length - width)
        return {"start": start, "width": width}

    def apply_transform(self, x, params):
        """Multiply by ``1 - mask`` along the masked axis.

        Shape:
            - x: :math:`(B, F, T)`; output :math:`(N, F, T)`.
            - mask: :math:`(N, L)` over the axis of length ``L``, broadcast over the other.
        """
        x = self._rows(x, params)
        start, width = params["start"][:, None], params["width"][:, None]
        pos = torch.arange(x.shape[self.axis], device=x.device, dtype=start.dtype)
        mask = torch.sigmoid((pos - start) / self.edge) - torch.sigmoid((pos - (start + width)) / self.edge)
        mask = mask.to(x.dtype)
        mask = mask[:, None, :] if self.axis == 2 else mask[:, :, None]
        return x * (1 - mask)

    def natural_range(self, magnitude, size=None):
        return Range(0.0, float(magnitude) * self.max_width, self.unit)

    def extra_repr(self):
        return f"max_width={self.max_width:g}, edge={self.edge:g}"


class TimeMaskSpec(_SpecMask):
    """Smooth time mask on spectrograms (B, F, T), SpecAugment-like.

    Masks a band of ``width = mu * max_width * u`` frames, ``u ~ U(0, 1)``,
    starting at ``a ~ U(0, T - width)``: ``mask(t) = sigmoid((t - a) / edge) -
    sigmoid((t - a - width) / edge)``, ``out = x * (1 - mask)``. Width 0 gives
    a mask of exactly 0; the output is differentiable in the width.

    Args:
        max_width: widest band at magnitude 1, in frames (default 20).
        edge: sigmoid edge scale ``tau`` in frames (default 1).

    Parameters: ``start`` (N,) and ``width`` (N,), in frames.
    """

    axis = 2
    unit = "frames"

    def __init__(self, max_width: float = 20.0, edge: float = 1.0) -> None:
        super().__init__(max_width, edge)


class FrequencyMaskSpec(_SpecMask):
    """Smooth frequency mask on spectrograms (B, F, T), SpecAugment-like.

    As :class:`TimeMaskSpec` along the frequency axis: a band of
    ``mu * max_width * u`` bins at a random position.

    Args:
        max_width: widest band at magnitude 1, in bins (default 10).
        edge: sigmoid edge scale ``tau`` in bins (default 1).

    Parameters: ``start`` (N,) and ``width`` (N,), in bins.
    """

    axis = 1
    unit = "bins"

    def __init__(self, max_width: float = 10.0, edge: float = 1.0) -> None:
        super().__init__(max_width, edge)
