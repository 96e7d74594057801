"""Differentiable transforms: the :class:`Transform` base and the catalogues.

Import sets by module: ``from augnet.transforms import image as T``,
``signal`` (EEG) and ``audio`` (waveforms and spectrograms; plain PyTorch).
"""

from augnet.ops.taps import Taps
from augnet.transforms import audio, image, signal
from augnet.transforms.base import Range, SignalTransform, Transform, stratified_copies

__all__ = ["Range", "SignalTransform", "Taps", "Transform", "audio", "image", "signal", "stratified_copies"]
