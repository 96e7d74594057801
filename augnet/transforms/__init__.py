"""Differentiable transforms: the :class:`Transform` base and the image catalogue.

Import sets by module: ``from augnet.transforms import image as T``.
"""

from augnet.transforms import image
from augnet.transforms.base import Range, Taps, Transform

__all__ = ["Range", "Taps", "Transform", "image"]
