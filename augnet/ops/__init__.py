"""Fused operators of augnet (see :func:`augnet.ops.tap_mix`)."""

from augnet.ops.tap_mix import (
    PADDING_MODES,
    available_backends,
    register_backend,
    resolve_backend,
    tap_mix,
    tap_mix_reference,
)

__all__ = [
    "PADDING_MODES",
    "available_backends",
    "register_backend",
    "resolve_backend",
    "tap_mix",
    "tap_mix_reference",
]
