"""Fused operators of augnet (see :func:`augnet.ops.tap_mix`).

Backends of ``tap_mix``: ``reference`` (plain PyTorch, always there), ``cpp``
(csrc/ CPU kernel), ``cuda`` (csrc/ CUDA kernel) and ``triton`` (GPU, or CPU
under ``TRITON_INTERPRET=1``). The compiled ones load lazily, on first use.
Modules: :mod:`augnet.ops.dispatch` (the function, its reference, the backend
registry), :mod:`augnet.ops._cpp` (the compiled csrc/ extension),
:mod:`augnet.ops._triton` (the Triton kernels), :mod:`augnet.ops.bad_input`
(the bad-input contract on accelerators, :func:`check_bad_input`) and
:mod:`augnet.ops.constants` (constants made on their device).
"""

from augnet.ops.bad_input import check_bad_input
from augnet.ops.dispatch import (
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
    "check_bad_input",
    "register_backend",
    "resolve_backend",
    "tap_mix",
    "tap_mix_reference",
]
