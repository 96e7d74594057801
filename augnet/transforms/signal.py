"""Differentiable transforms of multichannel signals (EEG), shape (B, Ch, T).

Ranges at magnitude 1 follow the transform catalogue (docs/guide/transforms.md)
and are constructor arguments. Every transform is the identity at magnitude 0, draws its per-row
parameters on the input's device from the given generator (no Python loop over
the batch), and runs in :class:`~augnet.AugmentationLayer` through the generic
path (each transform applied to the copies, then the weighted sum).

Copies: ``sample(x, mu, copies=C)`` draws parameters for ``N = B * C`` rows,
copy-major; ``apply_transform(x, params)`` repeats ``x`` to those rows
(``repeat_rows``). Parameters computed from the
signal itself (e.g. its standard deviation) are computed per source sample and
repeated, so C copies equal one draw for ``x`` repeated C times.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from augnet._checks import NotANumberError, as_values, check_bool, is_int, is_real, number
from augnet.transforms._ranges import angle, drawn_range
from augnet.transforms._sensors import SensorsRotationX, SensorsRotationY, SensorsRotationZ
from augnet.transforms.base import (
    Range,
    SignalTransform,
    check_temperature,
    draw,
    param_dtype,
    per_row,
    relaxed_bernoulli,
    uniform,
)

__all__ = [
    "BandStop",
    "ChannelsDropout",
    "ChannelsShuffle",
    "ChannelsSymmetry",
    "FTSurrogate",
    "FrequencyShift",
    "GaussianNoise",
    "SensorsRotationX",
    "SensorsRotationY",
    "SensorsRotationZ",
    "SignFlip",
    "SignalTransform",
    "TimeMask",
    "TimeReverse",
]


def _sfreq(value) -> float:
    if value is None:  # not a number: the ValueError it was, and a TypeError as every other argument's
        raise NotANumberError("sfreq (the sampling rate in Hz) is required, got None")
    return drawn_range("sfreq", value, "the times and frequencies are computed in float32")


def _no_rows(x: Tensor, param: Tensor) -> Tensor:
    """The output for a batch of no rows (an FFT of no rows is an error): empty, like ``x``, still in the graph of
    ``x`` and ``param`` (a zero gradient, as the other transforms give)."""
    return x * param.reshape(0, *[1] * (x.dim() - 1)).to(x.dtype)


def _probability_apply(x: Tensor, gate: Tensor, changed: Tensor) -> Tensor:
    g = gate.to(x.dtype).reshape(-1, *[1] * (x.dim() - 1))
    return g * changed + (1 - g) * x


# ----------------------------------------------------------------- flips and masks


class TimeReverse(SignalTransform):
    """Reverse the signal in time with probability ``mu`` (straight-through relaxed Bernoulli).

    Parameters: ``gate`` (N,) in {0, 1}, with a gradient to ``mu``.
    """

    def __init__(self, temperature: float = 0.1) -> None:
        super().__init__()
        self.temperature = check_temperature("temperature", temperature)

    def sample(self, x, magnitude, generator=None, copies=1):
        return {"gate": relaxed_bernoulli((x.shape[0] * copies,), x, magnitude, self.temperature, generator)}

    def apply_transform(self, x, params):
        x = self._rows(x, params)
        return _probability_apply(x, params["gate"], self._changed(x))

    def _changed(self, x: Tensor) -> Tensor:
        return x.flip(-1)

    def natural_range(self, magnitude, size=None):
        return Range(0.0, float(magnitude), "probability")

    def extra_repr(self):
        return f"temperature={self.temperature}"


class SignFlip(TimeReverse):
    """Flip the sign of the signal with probability ``mu`` (see :class:`TimeReverse`)."""

    def _changed(self, x: Tensor) -> Tensor:
        return -x


def _smooth_band(t: Tensor, start: Tensor, stop: Tensor, edge: float) -> Tensor:
    """1 inside [start, stop], 0 outside, with sigmoid edges; exactly 0 when start == stop.

    Shape: t (L,), start and stop (N,) -> (N, L).
    """
    return torch.sigmoid((t - start[:, None]) / edge) - torch.sigmoid((t - stop[:, None]) / edge)


class TimeMask(SignalTransform):
    """Zero a window of ``mu * max_length`` samples (default up to 200) at a random centre.

    The mask has sigmoid edges ``edge`` samples wide, so the output is
    differentiable in the window's length (hence in ``mu``); a length of 0 is
    exactly the identity. Parameters: ``centre`` (N,) and ``length`` (N,), in samples.
    """

    def __init__(self, max_length: float = 200.0, edge: float = 2.0) -> None:
        super().__init__()
        self.max_length = drawn_range("max_length", max_length)
        self.edge = drawn_range("edge", edge)

    def sample(self, x, magnitude, generator=None, copies=1):
        n, t = x.shape[0] * copies, x.shape[-1]
        centre = uniform(n, x, generator, 0.0, float(t))
        return {"centre": centre, "length": (magnitude * self.max_length) * torch.ones_like(centre)}

    def apply_transform(self, x, params):
        x = self._rows(x, params)
        t = torch.arange(x.shape[-1], device=x.device, dtype=params["centre"].dtype)
        half = params["length"] / 2
        mask = _smooth_band(t, params["centre"] - half, params["centre"] + half, self.edge)
        return x * (1 - mask[:, None, :]).to(x.dtype)

    def natural_range(self, magnitude, size=None):
        return Range(0.0, float(magnitude) * self.max_length, "samples")

    def extra_repr(self):
        return f"max_length={self.max_length}, edge={self.edge}"


class GaussianNoise(SignalTransform):
    """Add white Gaussian noise of standard deviation up to ``max_std`` times the signal's (default 0.2).

    The signal's standard deviation is taken per sample over channels and time.
    Parameters: ``noise`` (N, Ch, T), the noise to add (scaled by ``mu``).
    """

    def __init__(self, max_std: float = 0.2) -> None:
        super().__init__()
        self.max_std = drawn_range("max_std", max_std)

    def sample(self, x, magnitude, generator=None, copies=1):
        b = x.shape[0]
        dtype = param_dtype(x)
        flat = x.to(dtype).flatten(1)  # no rows: no std to take (torch warns of its degrees of freedom)
        scale = (flat.std(1, correction=0) if b else flat.sum(1)).repeat(copies)
        z = draw(torch.randn, (b * copies, *x.shape[1:]), generator=generator, device=x.device, dtype=dtype)
        return {"noise": per_row(magnitude, 3) * self.max_std * scale[:, None, None] * z}

    def apply_transform(self, x, params):
        return self._rows(x, params) + params["noise"].to(x.dtype)

    def natural_range(self, magnitude, size=None):
        return Range(0.0, float(magnitude) * self.max_std, "x signal std")

    def extra_repr(self):
        return f"max_std={self.max_std}"


# ----------------------------------------------------------------- spectral


class FTSurrogate(SignalTransform):
    """Fourier-transform surrogate: random phases up to ``mu * max_phase`` (default 2 pi).

    The amplitude spectrum is kept; each frequency's phase is shifted by
    ``mu * max_phase * u``, ``u ~ U(0, 1)``, the same for all channels unless
    ``channel_independent``. The DC and Nyquist terms keep their phase so the
    output stays real. Parameters: ``phase`` (N, 1 or Ch, T // 2 + 1) in radians.

    Args:
        max_phase: the largest phase shift at magnitude 1, in radians, not degrees (default 2 pi, a full turn:
            uniform phases).
        channel_independent: one phase per channel rather than one for all (default False).

    Raises:
        ValueError: a ``max_phase`` that is not a positive number within float32's range.
        TypeError: a ``channel_independent`` that is not a bool.

    Warns:
        UserWarning: a ``max_phase`` above a full turn, ``2 * pi`` (surely meant in degrees).
    """

    # The FFT round trip is the identity only to rounding (1.7e-6 of the peak on 2**20 float32 samples of +-1, past
    # the 1e-6 documented): a call at magnitude 0 returns the input itself (see Transform._identity_at_zero).
    resamples = True

    def __init__(self, max_phase: float = 2 * math.pi, channel_independent: bool = False) -> None:
        super().__init__()
        self.max_phase = angle(type(self).__name__, "max_phase", max_phase)
        self.channel_independent = check_bool("channel_independent", channel_independent)

    def sample(self, x, magnitude, generator=None, copies=1):
        n, ch, t = x.shape[0] * copies, x.shape[1], x.shape[-1]
        bins = t // 2 + 1
        shape = (n, ch if self.channel_independent else 1, bins)
        u = draw(torch.rand, shape, generator=generator, device=x.device, dtype=param_dtype(x))
        u[..., 0] = 0  # DC
        if t % 2 == 0:
            u[..., -1] = 0  # Nyquist
        return {"phase": per_row(magnitude, u.dim()) * self.max_phase * u}

    def apply_transform(self, x, params):
        x = self._rows(x, params)
        if x.shape[0] == 0:
            return _no_rows(x, params["phase"])
        wide = x if x.dtype in (torch.float32, torch.float64) else x.float()  # float16 / bfloat16: no CPU FFT
        spectrum = torch.fft.rfft(wide, dim=-1)
        rotation = torch.polar(torch.ones_like(params["phase"]), params["phase"]).to(spectrum.dtype)
        return torch.fft.irfft(spectrum * rotation, n=x.shape[-1], dim=-1).to(x.dtype)

    def natural_range(self, magnitude, size=None):
        return Range(0.0, math.degrees(float(magnitude) * self.max_phase), "deg phase")

    def extra_repr(self):
        return f"max_phase={self.max_phase:.4g}, channel_independent={self.channel_independent}"


def _analytic(x: Tensor) -> Tensor:
    """Analytic signal of x along time (zero-padded to a power of two, cropped back).

    Shape: (N, Ch, T) real -> (N, Ch, T) complex, whose real part is x.
    """
    t = x.shape[-1]
    n_fft = 1 << max(t - 1, 1).bit_length()
    spectrum = torch.fft.fft(x, n=n_fft, dim=-1)
    # Slices, not h[0] = 1: one element of a CUDA tensor set from a number is copied from the host, which waits.
    h = torch.zeros(n_fft, dtype=x.dtype, device=x.device)
    h[:1] = 1
    h[1 : n_fft // 2] = 2
    h[n_fft // 2 : n_fft // 2 + 1] = 1  # n_fft is a power of two, at least 2: even, with a Nyquist bin
    return torch.fft.ifft(spectrum * h, dim=-1)[..., :t]


class FrequencyShift(SignalTransform):
    """Shift every frequency by up to ``±mu * max_shift`` Hz (default 5 Hz).

    The signal is made analytic (Hilbert transform by FFT), multiplied by
    ``exp(2 i pi f t)`` and its real part kept (as braindecode's
    ``FrequencyShift``). Content shifted past 0 Hz or past the Nyquist
    frequency folds back (a 2 Hz tone shifted by -4 Hz is at 2 Hz): the shift
    is a shift for frequencies at least ``mu * max_shift`` Hz from both ends.
    Parameters: ``shift`` (N,) in Hz.

    Args:
        sfreq: sampling rate in Hz (required).
        max_shift: shift at magnitude 1, in Hz; below the Nyquist frequency ``sfreq / 2``.
    """

    resamples = True  # an FFT round trip: magnitude 0 returns the input itself (see FTSurrogate)

    def __init__(self, sfreq: float, max_shift: float = 5.0) -> None:
        super().__init__()
        self.sfreq = _sfreq(sfreq)
        self.max_shift = drawn_range("max_shift", max_shift)
        if self.max_shift >= self.sfreq / 2:
            raise ValueError(
                f"max_shift (5 Hz by default) must be below the Nyquist frequency sfreq / 2 = {self.sfreq / 2:g} Hz, "
                f"got {max_shift!r}: pass a smaller max_shift"
            )

    def sample(self, x, magnitude, generator=None, copies=1):
        return {"shift": magnitude * self.max_shift * uniform(x.shape[0] * copies, x, generator)}

    def apply_transform(self, x, params):
        x = self._rows(x, params)
        shift = params["shift"]
        if x.shape[0] == 0:
            return _no_rows(x, shift)
        t = torch.arange(x.shape[-1], device=x.device, dtype=shift.dtype) / self.sfreq
        phase = 2 * math.pi * shift[:, None] * t  # (N, T)
        carrier = torch.polar(torch.ones_like(phase), phase)[:, None, :]
        # .real is a view, every other value of the complex product: a contiguous copy (a stride-2 result
        # refused .view() and kept the complex tensor, twice its size, alive)
        return (_analytic(x.to(shift.dtype)) * carrier).real.to(x.dtype).contiguous()

    def natural_range(self, magnitude, size=None):
        r = float(magnitude) * self.max_shift
        return Range(-r, r, "Hz")

    def extra_repr(self):
        return f"sfreq={self.sfreq}, max_shift={self.max_shift}"


class BandStop(SignalTransform):
    """Remove a band ``mu * max_width`` Hz wide (default up to 2 Hz) at a random centre frequency.

    A differentiable notch: the spectrum is multiplied by ``1 - G(f)`` with
    ``G`` a band with sigmoid edges ``edge`` Hz wide (default: the frequency
    resolution ``sfreq / T``), so the output is differentiable in the width and
    a width of 0 is exactly the identity. A notch no wider than a few edges
    is shallow: at 100 Hz a 2 Hz notch keeps half of a tone at its centre on
    a 1 s signal (edges of 1 Hz) and 4 % on a 4 s one; pass a narrower
    ``edge`` for short signals. The centre is drawn uniformly in
    ``band`` (default from 1 Hz to 1 Hz below Nyquist). Parameters:
    ``centre`` (N,) and ``width`` (N,), in Hz.
    """

    resamples = True  # an FFT round trip: magnitude 0 returns the input itself (see FTSurrogate)

    def __init__(
        self, sfreq: float, max_width: float = 2.0, band: tuple[float, float] | None = None, edge: float | None = None
    ) -> None:
        super().__init__()
        self.sfreq = _sfreq(sfreq)
        self.max_width = drawn_range("max_width", max_width)
        if isinstance(band, Tensor) and band.dim() == 1:
            band = band.tolist()
        if band is not None:
            pair = (not isinstance(band, (str, bytes, Tensor)) and hasattr(band, "__len__")
                    and getattr(band, "ndim", 1) == 1 and len(band) == 2)  # fmt: skip
            if not pair:
                raise TypeError(f"band must be a (low, high) pair of frequencies in Hz, got {band!r}")
            read = [number("band", b) for b in band]  # 0-d tensors in a pair: their numbers
            if not all(is_real(b) for b in read):  # a pair, of things that are not numbers
                raise NotANumberError(f"band must be a (low, high) pair of frequencies in Hz, got {band!r}")
            band = read
        low, high = band if band is not None else (1.0, self.sfreq / 2 - 1.0)
        if not 0 <= low < high <= self.sfreq / 2:
            what = "band" if band is not None else f"the default band (1 Hz to 1 Hz below Nyquist) at sfreq {sfreq!r}"
            raise ValueError(f"{what} must satisfy 0 <= low < high <= sfreq / 2 = {self.sfreq / 2}, got {(low, high)}"
                             f"{'' if band is not None else ': pass band=(low, high)'}")  # fmt: skip
        self.band = (float(low), float(high))
        self.edge = None if edge is None else drawn_range("edge", edge)

    def sample(self, x, magnitude, generator=None, copies=1):
        centre = uniform(x.shape[0] * copies, x, generator, *self.band)
        return {"centre": centre, "width": (magnitude * self.max_width) * torch.ones_like(centre)}

    def apply_transform(self, x, params):
        x = self._rows(x, params)
        if x.shape[0] == 0:
            return _no_rows(x, params["centre"] + params["width"])
        t = x.shape[-1]
        dtype = params["centre"].dtype
        freqs = torch.fft.rfftfreq(t, d=1.0 / self.sfreq, device=x.device, dtype=dtype)
        edge = self.edge if self.edge is not None else self.sfreq / t
        half = params["width"] / 2
        keep = 1 - _smooth_band(freqs, params["centre"] - half, params["centre"] + half, edge)
        spectrum = torch.fft.rfft(x.to(dtype), dim=-1) * keep[:, None, :]
        return torch.fft.irfft(spectrum, n=t, dim=-1).to(x.dtype)

    def natural_range(self, magnitude, size=None):
        return Range(0.0, float(magnitude) * self.max_width, "Hz wide")

    def extra_repr(self):
        return f"sfreq={self.sfreq}, max_width={self.max_width}, band={self.band}"


# ----------------------------------------------------------------- channels


class ChannelsSymmetry(SignalTransform):
    """Swap left and right channels with probability ``mu`` (straight-through relaxed Bernoulli).

    Args:
        pairs: the (left, right) channel index pairs to swap; an index may
            appear once.
        temperature: of the relaxation.

    Parameters: ``gate`` (N,) in {0, 1}.
    """

    def __init__(self, pairs, temperature: float = 0.1) -> None:
        super().__init__()
        pairs = as_values(pairs, "pairs")  # a (P, 2) tensor or NumPy array: its values
        try:
            pairs = [(a, b) for a, b in pairs]
        except (TypeError, ValueError) as err:
            raise ValueError(f"pairs must be a sequence of (left, right) channel indices, got {pairs!r}") from err
        read = [tuple(number("pairs", i) for i in p) for p in pairs]  # 0-d tensors among the indices: their ints
        bad = [i for p in read for i in p if not is_int(i)]
        if bad:  # 0.5 must not become channel 0; "1" or None is not a number at all
            error = TypeError if is_real(bad[0]) else NotANumberError
            raise error(f"pairs must hold integer channel indices, got {bad[0]!r} in {pairs!r}")
        pairs = [tuple(int(i) for i in p) for p in read]
        flat = [i for p in pairs for i in p]
        if not pairs or min(flat) < 0 or len(set(flat)) != len(flat):
            raise ValueError(f"pairs must be non-empty, non-negative and use each channel once, got {pairs}")
        self.pairs = pairs
        self.temperature = check_temperature("temperature", temperature)

    def check_input(self, x):
        super().check_input(x)
        biggest = max(i for p in self.pairs for i in p)
        if biggest >= x.shape[1]:
            raise ValueError(
                f"ChannelsSymmetry: channel pair index {biggest} is out of range for {x.shape[1]} channels"
            )

    def _permutation(self, channels: int, device) -> Tensor:
        perm = torch.arange(channels, device=device)
        for a, b in self.pairs:  # fill_: perm[a] = b copies b from the host to a CUDA tensor, and waits
            perm[a].fill_(b)
            perm[b].fill_(a)
        return perm

    def sample(self, x, magnitude, generator=None, copies=1):
        return {"gate": relaxed_bernoulli((x.shape[0] * copies,), x, magnitude, self.temperature, generator)}

    def apply_transform(self, x, params):
        x = self._rows(x, params)
        return _probability_apply(x, params["gate"], x[:, self._permutation(x.shape[1], x.device)])

    def natural_range(self, magnitude, size=None):
        return Range(0.0, float(magnitude), "probability")

    def extra_repr(self):
        return f"pairs={self.pairs}, temperature={self.temperature}"


class ChannelsDropout(SignalTransform):
    """Zero each channel with probability ``mu`` (straight-through relaxed Bernoulli per channel).

    Parameters: ``gate`` (N, Ch) in {0, 1}, 1 where the channel is dropped.
    """

    def __init__(self, temperature: float = 0.1) -> None:
        super().__init__()
        self.temperature = check_temperature("temperature", temperature)

    def sample(self, x, magnitude, generator=None, copies=1):
        shape = (x.shape[0] * copies, x.shape[1])
        return {"gate": relaxed_bernoulli(shape, x, magnitude, self.temperature, generator)}

    def apply_transform(self, x, params):
        x = self._rows(x, params)
        return x * (1 - params["gate"].to(x.dtype))[:, :, None]

    def natural_range(self, magnitude, size=None):
        return Range(0.0, float(magnitude), "fraction of channels")

    def extra_repr(self):
        return f"temperature={self.temperature}"


class ChannelsShuffle(ChannelsDropout):
    """Shuffle a random subset of the channels, each chosen with probability ``mu``.

    The chosen channels are permuted among themselves at random; the others
    stay. Each output channel is ``g * x[source] + (1 - g) * x`` with a
    straight-through gate ``g``, so the output is differentiable in ``mu``;
    a channel that stays (``g = 0``) names a random other channel as its
    source, which gives the gate a useful derivative at ``mu = 0``.
    Parameters: ``gate`` (N, Ch) in {0, 1} and ``source`` (N, Ch) int64, the
    channel each output channel reads.
    """

    def sample(self, x, magnitude, generator=None, copies=1):
        params = super().sample(x, magnitude, generator, copies)
        gate = params["gate"]
        n, ch = gate.shape
        chosen = gate.detach() > 0.5
        index = torch.arange(ch, device=x.device).expand(n, ch)
        keys = draw(torch.rand, (n, ch), generator=generator, device=x.device)
        # Chosen channels first (in index order, resp. in random order), then the
        # others in index order in both lists: pairing the two lists maps the
        # chosen channels to a random permutation of themselves and fixes the rest.
        positions = torch.argsort(torch.where(chosen, index, index + ch), dim=1)
        shuffled = torch.argsort(torch.where(chosen, keys, 1.0 + index.to(keys.dtype)), dim=1)
        source = torch.empty_like(positions).scatter_(1, positions, shuffled)
        # A channel left in place (gate 0) reads a random other channel: its output is x all the same, but
        # the gate's derivative, x[partner] - x, is not 0, so a magnitude at 0 can grow.
        partner = (index + 1 + (keys * (ch - 1)).long().clamp_max(max(ch - 2, 0))) % ch
        return {"gate": gate, "source": torch.where(chosen, source, partner)}

    def apply_transform(self, x, params):
        x = self._rows(x, params)
        moved = torch.gather(x, 1, params["source"][:, :, None].expand_as(x))
        g = params["gate"].to(x.dtype)[:, :, None]
        return g * moved + (1 - g) * x
