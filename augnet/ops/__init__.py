"""Fused operators of augnet (see :func:`augnet.ops.tap_mix`).

Backends of ``tap_mix``: ``reference`` (plain PyTorch, always there), ``cpp``
(csrc/ CPU kernel), ``cuda`` (csrc/ CUDA kernel) and ``triton`` (GPU, or CPU
under ``TRITON_INTERPRET=1``). The compiled ones load lazily, on first use.
"""

import torch

from augnet.ops import _ext, _triton
from augnet.ops.tap_mix import (
    PADDING_MODES,
    available_backends,
    register_backend,
    resolve_backend,
    tap_mix,
    tap_mix_reference,
)

_FLOATS = (torch.float32, torch.float64)
register_backend("cpp", _ext.tap_mix_compiled, lambda x: x.device.type == "cpu" and x.dtype in _FLOATS, _ext.cpp_hint)
register_backend("cuda", _ext.tap_mix_compiled, lambda x: x.is_cuda and x.dtype in _FLOATS, _ext.cuda_hint)
register_backend("triton", _triton.tap_mix_triton, _triton.supports, _triton.unavailable_hint)

__all__ = [
    "PADDING_MODES",
    "available_backends",
    "register_backend",
    "resolve_backend",
    "tap_mix",
    "tap_mix_reference",
]
