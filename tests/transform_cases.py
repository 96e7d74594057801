"""The one registry of transforms under the contract (``test_transform_contract.py``).

A :class:`Case` is one configured transform and the inputs it takes. Every
public transform of ``augnet.transforms`` has at least one case (checked by
``test_every_public_transform_has_a_case``); the per-case options say where a
transform departs from the default checks, and why. The input makers live
here too, for the property tests of each kind (``test_transforms.py``,
``test_signal.py``, ``test_audio.py``, ``test_sensors.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from helpers import gen

from augnet.transforms import Transform
from augnet.transforms import audio as A
from augnet.transforms import image as T
from augnet.transforms import signal as S
from augnet.transforms._sensors import SensorsRotationX, SensorsRotationY, SensorsRotationZ

Make = Callable[[int, torch.dtype], torch.Tensor]

F64 = torch.float64
SFREQ = 100.0  # EEG sampling rate (Hz)
SR = 8000  # audio sample rate (Hz)

# ------------------------------------------------------------------- inputs


def images(b=5, ch=3, h=9, w=11, dtype=torch.float32, seed=0):
    """Images in [0, 1), odd sizes."""
    return torch.rand(b, ch, h, w, generator=gen(seed), dtype=dtype)


def signals(b=4, ch=5, t=120, dtype=torch.float32, seed=0):
    """EEG-like signals, standard normal."""
    return torch.randn(b, ch, t, generator=gen(seed), dtype=dtype)


def waves(b=3, ch=2, t=256, dtype=torch.float32, seed=0):
    """Audio waveforms of RMS 0.3."""
    return 0.3 * torch.randn(b, ch, t, generator=gen(seed), dtype=dtype)


def specs(b=3, f=24, t=40, dtype=torch.float32, seed=0):
    """Spectrograms (B, F, T) in [0, 1)."""
    return torch.rand(b, f, t, generator=gen(seed), dtype=dtype)


def cap(n: int, z_min: float = 0.0, radius: float = 0.09) -> torch.Tensor:
    """``n`` positions spread over the cap ``z >= z_min`` of a sphere of ``radius`` (a Fibonacci spiral)."""
    k = torch.arange(n, dtype=F64)
    z = 1 - (k + 0.5) / n * (1 - z_min)
    r = (1 - z**2).sqrt()
    phi = k * math.pi * (3 - math.sqrt(5))
    return radius * torch.stack([r * phi.cos(), r * phi.sin(), z], 1)


def sensor_signals(ch: int, t: int = 20) -> Make:
    """``make(b, dtype)`` of (b, ch, t) standard normal signals, seeded by ``b``."""

    def make(b, dtype):
        return torch.randn(b, ch, t, generator=gen(b), dtype=dtype)

    return make


POS = cap(24)  # 24 sensors over the upper hemisphere, in metres


# -------------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    """One transform under the contract.

    Attributes:
        id: ``kind.Name``, the test id (kinds: image, eeg, audio, sensors).
        build: a fresh transform.
        make: ``make(b, dtype)``, a batch of ``b`` valid inputs.
        small: ``small(b, dtype)``, tiny inputs for the float64 gradcheck in the
            magnitude; ``None`` where the gradient is not the derivative of the
            forward value (``no_gradcheck`` says why).
        build_small: the transform for ``small`` inputs, where it depends on the
            input size (sensor positions); default ``build``.
        no_gradcheck: why the case has no gradcheck.
        grad_magnitudes: magnitudes at which the gradient must reach both the
            magnitude (finite, non-zero) and the input.
        no_input_grad_at: magnitudes of ``grad_magnitudes`` at which the input
            legitimately gets an all-zero gradient (finite is still checked).
        xfail: ``{check name: reason}``: a check the transform is known to fail
            (run as ``xfail(strict=True)``, so a fix shows up).
    """

    id: str
    build: Callable[[], Transform]
    make: Make
    small: Make | None = None
    build_small: Callable[[], Transform] | None = None
    no_gradcheck: str | None = None
    grad_magnitudes: tuple[float, ...] = (0.5,)
    no_input_grad_at: tuple[float, ...] = ()
    xfail: dict[str, str] = field(default_factory=dict)

    def __post_init__(self):
        if (self.small is None) == (self.no_gradcheck is None):
            raise ValueError(f"{self.id}: give exactly one of small (inputs for gradcheck) and no_gradcheck (why not)")
        if not set(self.no_input_grad_at) <= set(self.grad_magnitudes):
            raise ValueError(f"{self.id}: no_input_grad_at must be among grad_magnitudes")

    @property
    def kind(self) -> str:
        return self.id.split(".")[0]

    @property
    def name(self) -> str:
        return self.id.split(".", 1)[1]

    def transform_for_gradcheck(self) -> Transform:
        return (self.build_small or self.build)()


# Why a case has no gradcheck: a straight-through estimator's gradient is not that of the forward value.
STRAIGHT_THROUGH = "straight-through gate: the gradient in the magnitude is not the derivative of the output"
# Gates (straight-through relaxed Bernoulli): no gradcheck, and a gradient that stays alive at the bounds,
# probability 0 and 1.
GATE = dict(no_gradcheck=STRAIGHT_THROUGH, grad_magnitudes=(0.5, 0.0, 1.0))
# Steps in the parameter (a threshold, a whole number of bits): the value is the step, the gradient in the
# magnitude that of a relaxation (a straight-through estimate), alive at 0 and 1.
STEP = dict(
    no_gradcheck="straight-through estimate of a step: the gradient in the magnitude is not the derivative of "
    "the output",
    grad_magnitudes=(0.5, 0.0, 1.0),
)


def _images(b, dtype):
    return images(b=b, dtype=dtype)


def _small_images(b, dtype):
    return images(b=b, h=5, w=6, dtype=dtype)


def _signals(b, dtype):
    return signals(b=b, dtype=dtype)


def _small_signals(b, dtype):
    return signals(b=b, ch=2, t=32, dtype=dtype)


def _waves(b, dtype):
    return waves(b=b, dtype=dtype)


def _short_waves(b, dtype):
    return waves(b, t=24, dtype=dtype)


def _short_mono(b, dtype):
    return waves(b, ch=1, t=20, dtype=dtype)


def _specs(b, dtype):
    return specs(b=b, dtype=dtype)


#: The sensor rotations (classes, each taking the sensor positions).
SENSORS = [SensorsRotationX, SensorsRotationY, SensorsRotationZ]


def _sensors(cls) -> Case:
    # Finite and non-zero also at the bounds: at mu = 0 the angle is 0, where
    # dM/dangle is the spline's derivative, not 0. The gradcheck uses 8 sensors.
    return Case(
        f"sensors.{cls.__name__}",
        lambda: cls(POS),
        sensor_signals(24),
        small=sensor_signals(8, t=5),
        build_small=lambda: cls(cap(8)),
        grad_magnitudes=(0.0, 0.5, 1.0),
    )


# At mu = 0 the audio filters are the identity and carry the derivative of the filter family as mu leaves 0
# (test_audio.py); the other audio transforms are smooth through mu = 0 (AddNoise by its exact zero term).
_FILTER = (0.5, 1.0, 0.0)
_SMOOTH_AT_ZERO = (0.5, 1.0, 0.0)
# Warps have a bilinear kink at mu = 0; there the gradient is the one-sided derivative into (0, 1].
_WARP = (0.5, 0.0)

CASES: list[Case] = [
    # Images (B, 3, 9, 11); gradcheck on (2, 3, 5, 6). Image cases are built by their class.
    Case("image.TranslateX", T.TranslateX, _images, small=_small_images, grad_magnitudes=_WARP),
    Case("image.TranslateY", T.TranslateY, _images, small=_small_images, grad_magnitudes=_WARP),
    Case("image.Rotate", T.Rotate, _images, small=_small_images, grad_magnitudes=_WARP),
    Case("image.ShearX", T.ShearX, _images, small=_small_images, grad_magnitudes=_WARP),
    Case("image.ShearY", T.ShearY, _images, small=_small_images, grad_magnitudes=_WARP),
    Case("image.Scale", T.Scale, _images, small=_small_images, grad_magnitudes=_WARP),
    Case("image.HorizontalFlip", T.HorizontalFlip, _images, **GATE),
    Case("image.VerticalFlip", T.VerticalFlip, _images, **GATE),
    Case("image.Brightness", T.Brightness, _images, small=_small_images),
    Case("image.Contrast", T.Contrast, _images, small=_small_images),
    Case("image.Saturation", T.Saturation, _images, small=_small_images),
    Case("image.Hue", T.Hue, _images, small=_small_images),
    Case("image.SamplePairing", T.SamplePairing, _images, small=_small_images),
    # Faster AutoAugment's other operations. Colour maps with a gate (tap form), then the non-affine ones
    # (apply_transform); their steps have straight-through gradients in the magnitude, alive at 0 and 1.
    Case("image.Invert", T.Invert, _images, **GATE),
    Case("image.Gray", T.Gray, _images, **GATE),
    Case("image.AutoContrast", T.AutoContrast, _images, **GATE),
    Case("image.Solarize", T.Solarize, _images, **STEP),
    Case("image.Posterize", T.Posterize, _images, **STEP),
    Case("image.Equalize", T.Equalize, _images, **GATE),
    Case("image.Sharpness", T.Sharpness, _images, small=_small_images),
    # EEG (B, 5, 120); gradcheck on (2, 2, 32).
    Case("eeg.TimeReverse", S.TimeReverse, _signals, **GATE),
    Case("eeg.SignFlip", S.SignFlip, _signals, **GATE),
    Case("eeg.TimeMask", lambda: S.TimeMask(max_length=40), _signals, small=_small_signals),
    Case("eeg.GaussianNoise", S.GaussianNoise, _signals, small=_small_signals),
    Case("eeg.FTSurrogate", S.FTSurrogate, _signals, small=_small_signals),
    Case("eeg.FTSurrogateIndependent", lambda: S.FTSurrogate(channel_independent=True), _signals, small=_small_signals),
    Case("eeg.FrequencyShift", lambda: S.FrequencyShift(SFREQ), _signals, small=_small_signals),
    Case("eeg.BandStop", lambda: S.BandStop(SFREQ), _signals, small=_small_signals),
    Case("eeg.ChannelsSymmetry", lambda: S.ChannelsSymmetry([(0, 1), (2, 3)]), _signals, **GATE),
    # At probability 1 every channel is dropped: no gradient reaches the input there.
    Case("eeg.ChannelsDropout", S.ChannelsDropout, _signals, **GATE, no_input_grad_at=(1.0,)),
    Case("eeg.ChannelsShuffle", S.ChannelsShuffle, _signals, no_gradcheck=STRAIGHT_THROUGH, grad_magnitudes=(0.5, 0.0)),
    # Audio: waveforms (B, 2, 256), gradcheck on (2, 2, 24) or, for the filters, (2, 1, 20);
    # spectrograms (B, 24, 40), gradcheck on spectrograms a few bins wide along the masked axis.
    Case("audio.AddNoise", A.AddNoise, _waves, small=_short_waves, grad_magnitudes=_SMOOTH_AT_ZERO),
    Case("audio.Gain", A.Gain, _waves, small=_short_waves, grad_magnitudes=_SMOOTH_AT_ZERO),
    Case("audio.LowPass", lambda: A.LowPass(SR), _waves, small=_short_mono, grad_magnitudes=_FILTER),
    Case("audio.HighPass", lambda: A.HighPass(SR), _waves, small=_short_mono, grad_magnitudes=_FILTER),
    Case("audio.BandReject", lambda: A.BandReject(SR), _waves, small=_short_mono, grad_magnitudes=_FILTER),
    Case("audio.SpeedChange", A.SpeedChange, _waves, small=_short_waves, grad_magnitudes=_SMOOTH_AT_ZERO),
    Case(
        "audio.TimeMaskSpec",
        A.TimeMaskSpec,
        _specs,
        small=lambda b, dtype: specs(b, f=6, t=30, dtype=dtype),
        grad_magnitudes=_SMOOTH_AT_ZERO,
    ),
    Case(
        "audio.FrequencyMaskSpec",
        A.FrequencyMaskSpec,
        _specs,
        small=lambda b, dtype: specs(b, f=16, t=5, dtype=dtype),
        grad_magnitudes=_SMOOTH_AT_ZERO,
    ),
    # Sensor rotations: (B, 24, 20) signals from 24 sensors over the upper hemisphere.
    *(_sensors(cls) for cls in SENSORS),
]

#: The image transforms (classes).
IMAGE = [c.build for c in CASES if c.kind == "image"]


def cases(kind: str | None = None) -> list[Case]:
    """The cases of one kind (``image``, ``eeg``, ``audio``, ``sensors``), or all."""
    return [c for c in CASES if kind is None or c.kind == kind]
