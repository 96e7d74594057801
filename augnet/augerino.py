"""Augerino (Benton et al., 2020) as an augmentation module: ``Augerino = AugNet(trunk, LieAugmentation(...))``.

:class:`~augnet.augerino.LieAugmentation` draws random affine warps uniformly within learnable
widths over the six generators of aff(2); it has the augmentation-module
interface (``forward(x, copies, generator)``, ``policy(size)``), so
:class:`~augnet.AugNet` runs it like any layer stack. :class:`Augerino` is
that AugNet, with Augerino's constructor arguments.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from augnet._checks import as_values, is_real, loading_or_kept, number
from augnet.layers import Policy, check_generator
from augnet.magnitudes import widened
from augnet.model import AugNet
from augnet.ops import dispatch
from augnet.ops.dispatch import PADDING_MODES, host_readable, tap_mix
from augnet.ops.precision import full_precision
from augnet.ops.taps import Taps, concat_taps
from augnet.policy import check_size
from augnet.transforms.base import Range, check_copies, draw, stratify

__all__ = ["LIE_GENERATORS", "Augerino", "LieAugmentation"]

#: The fixed scaling and squaring, and Taylor degree, of :func:`matrix_exp` off the CPU: the series is taken of
#: ``a / 2**8``, exact to rounding (the first term left out is below 1e-10 of the sum) for ``|a| <= 256`` (a
#: rotation by 256 radians, or shifts by a hundred image widths).
_SQUARINGS, _DEGREE = 8, 12


def matrix_exp(a: Tensor) -> Tensor:
    """``exp`` of (..., n, n) matrices, with no read back to the host on any device.

    On the CPU this is :func:`torch.linalg.matrix_exp`. On a GPU that function reads
    the matrices' norms back to the host to pick its series' degree (ATen's
    ``mexp_impl``), which stalls every training step; there the exponential is
    the Taylor series of degree 12 of ``a / 2**8``, squared 8 times, in float64
    (where the device has it): the same ops whatever the values, within 3e-13 of
    :func:`torch.linalg.matrix_exp` in float64 for ``|a|`` up to 50.
    """
    if a.device.type == "cpu":
        return torch.linalg.matrix_exp(a)
    return _taylor_exp(a)


def _taylor_exp(a: Tensor) -> Tensor:
    """:func:`matrix_exp`'s route off the CPU (on any device)."""
    work = a.to(torch.float32 if a.device.type == "mps" else torch.float64)  # MPS has no float64
    x = work / 2.0**_SQUARINGS
    eye = torch.eye(a.shape[-1], dtype=work.dtype, device=a.device).expand_as(work)
    out = eye
    for k in range(_DEGREE, 0, -1):  # Horner: I + x (I + x/2 (I + x/3 (...)))
        out = eye + (x @ out) / k
    for _ in range(_SQUARINGS):
        out = out @ out
    return out.to(a.dtype)


#: Generators of the affine Lie algebra aff(2), in normalised image coordinates:
#: translations, rotation, uniform scale, stretch and shear (Benton et al., 2020).
LIE_GENERATORS: dict[str, tuple[tuple[float, ...], ...]] = {
    "translate_x": ((0, 0, 1), (0, 0, 0), (0, 0, 0)),
    "translate_y": ((0, 0, 0), (0, 0, 1), (0, 0, 0)),
    "rotate": ((0, -1, 0), (1, 0, 0), (0, 0, 0)),
    "scale": ((1, 0, 0), (0, 1, 0), (0, 0, 0)),
    "stretch": ((1, 0, 0), (0, -1, 0), (0, 0, 0)),
    "shear": ((0, 1, 0), (1, 0, 0), (0, 0, 0)),
}


FLOAT32_MAX = torch.finfo(torch.float32).max


class LieAugmentation(nn.Module):
    r"""Augerino's augmentation: random affine warps drawn uniformly within learnable widths.

    Each copy draws coefficients :math:`\epsilon_k \sim U(-\theta_k, \theta_k)`
    of the six generators :math:`G_k` of aff(2) and warps the image by the
    matrix exponential :math:`\exp(\sum_k \epsilon_k G_k)` (normalised
    coordinates, output to input, computed on the input's device), through
    :func:`augnet.ops.tap_mix`. The widths are :math:`\theta = \mathrm{softplus}(\rho)`
    with learnable :math:`\rho`; widths of 0 give the identity.

    Args:
        init_width: initial width of every generator (> 0), or one per generator (a sequence, tensor or NumPy
            array of 6; a 0-d tensor or array for one).
        padding: ``tap_mix`` padding mode.
        backend: ``tap_mix`` backend.

    Shape:
        - input: :math:`(B, Ch, H, W)`
        - output: :math:`(B \cdot C, Ch, H, W)`, copy-major.
    """

    def __init__(self, init_width: float | Sequence[float] = 0.1, padding: str = "zeros", backend: str = "auto"):
        super().__init__()
        k = len(LIE_GENERATORS)
        init_width = as_values(init_width, "init_width")  # a tensor, a NumPy array or scalar: its values
        if isinstance(init_width, Sequence) and not isinstance(init_width, str):
            init_width = [number("init_width", w) for w in init_width]  # 0-d tensors in a list: their numbers
        if is_real(init_width):
            widths = [float(init_width)] * k
        elif isinstance(init_width, list) and all(is_real(w) for w in init_width):
            widths = [float(w) for w in init_width]
        else:
            raise TypeError(f"init_width must be a number or a sequence of {k} numbers, got {init_width!r}")
        if padding not in PADDING_MODES:
            raise ValueError(f"padding must be one of {PADDING_MODES}, got {padding!r}")
        if len(widths) != k or any(not math.isfinite(w) or not 0 < w <= FLOAT32_MAX for w in widths):
            raise ValueError(f"init_width must be one positive width (< 3.4e38) or {k} of them, got {init_width!r}")
        dispatch.check_backend(backend)
        # softplus^-1(w) = log(expm1(w)), written as w + log(-expm1(-w)) where expm1(w) would overflow
        inverse = [math.log(math.expm1(w)) if w < 20 else w + math.log(-math.expm1(-w)) for w in widths]
        self.raw_width = nn.Parameter(torch.tensor(inverse))
        if not bool((self.widths > 0).all()):  # softplus underflows in float32 below about 1e-45
            raise ValueError(f"init_width {init_width!r} rounds to a width of 0 in float32: give at least 1e-38")
        self.register_buffer("generators", torch.tensor(list(LIE_GENERATORS.values())), persistent=False)
        self.padding = padding
        self.backend = backend
        self.last_size: tuple[int, ...] | None = None

    @property
    def widths(self) -> Tensor:
        """(6,) widths of the uniform distributions, in the order of ``LIE_GENERATORS``; in at least float32 (a model
        cast with ``.half()`` / ``.bfloat16()`` draws and reports the widths its state gives in float32)."""
        return nn.functional.softplus(widened(self.raw_width))

    @property
    def magnitudes(self) -> Tensor:
        """The widths, under the name the layers use (what the regularisers and the policy read)."""
        return self.widths

    def matrices(self, n: int, x: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """(n, 3, 3) random warps for ``n`` rows, drawn on ``x``'s device."""
        dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
        u = draw(torch.rand, n, len(LIE_GENERATORS), generator=generator, device=x.device, dtype=dtype)
        u = stratify(u, generator) * 2 - 1  # stratified over an evaluation's copies (AugNet.forward)
        coeffs = u * self.widths.to(dtype)
        algebra = torch.einsum("nk,kij->nij", coeffs, self.generators.to(device=x.device, dtype=dtype))
        return matrix_exp(algebra)

    def forward(self, x: Tensor, copies: int = 1, generator: torch.Generator | None = None) -> Tensor:
        if not isinstance(x, Tensor):
            raise TypeError(f"Augerino expects a tensor of (B, Ch, H, W) images, got {type(x).__name__}")
        if x.dim() != 4:
            raise ValueError(f"Augerino expects (B, Ch, H, W) images, got {tuple(x.shape)}")
        if not x.is_floating_point():
            raise TypeError(f"Augerino expects floating-point images, got {x.dtype}")
        copies = check_copies(copies)
        check_generator(generator)
        if host_readable(self.raw_width) and not bool(torch.isfinite(self.widths).all()):
            raise ValueError(f"Augerino widths contain NaN or infinite values: {self.widths.tolist()}")
        n = x.shape[0] * copies
        with full_precision(x) as dtype:  # warps in full precision
            affine = self.matrices(n, x, generator)[:, None, :2, :].to(dtype)
        taps = Taps(weight=torch.ones(n, 1, dtype=dtype, device=x.device), affine=affine)
        src, affine, color, weight = concat_taps([taps], x, n)
        out = tap_mix(x, src, affine, color, weight, padding=self.padding, backend=self.backend)
        self.last_size = tuple(x.shape[2:])  # once the call has succeeded: a refused call changes nothing
        return out

    def __prepare_scriptable__(self):  # torch.jit.script calls it on every submodule of what it is given
        raise TypeError("torch.jit.script does not support Augerino's LieAugmentation: it draws its warps in Python "
                        "code TorchScript cannot compile; use torch.compile, or script the trunk alone")

    def extra_repr(self) -> str:
        widths = "?" if self.raw_width.is_meta else "[" + ", ".join(f"{w:.3g}" for w in self.widths.tolist()) + "]"
        return f"widths={widths}, padding={self.padding!r}"

    def get_extra_state(self) -> Tensor:
        """The last input's spatial size as int64 (empty before a run): :meth:`policy` gives its translations in
        pixels from it, so a state-dict round trip gives the same policy, as a layer's does."""
        return torch.tensor(self.last_size or (), dtype=torch.long)

    def set_extra_state(self, state) -> None:
        if not isinstance(state, Tensor) or state.dim() != 1 or state.is_floating_point() or state.is_complex():
            raise TypeError(f"Augerino's saved input size must be a 1-D int tensor, got {state!r}")
        size = tuple(int(s) for s in state.tolist())
        if any(s < 1 for s in size):
            raise ValueError(f"Augerino's saved input size must be positive, got {list(size)}")
        self.last_size = size or None

    def _load_from_state_dict(
        self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
    ):
        # A state saved before the input size was saved keeps the size this augmentation has; a load that fails
        # changes nothing (the widths are put back).
        state_dict.setdefault(prefix + "_extra_state", self.get_extra_state())
        with loading_or_kept(self, strict, missing_keys, unexpected_keys, error_msgs):
            args = (local_metadata, strict, missing_keys, unexpected_keys, error_msgs)
            super()._load_from_state_dict(state_dict, prefix, *args)

    def policy(self, size: tuple[int, ...] | None = None) -> Policy:
        """The learned policy, in the shape of the layers' (one layer, one entry per generator).

        Each entry has ``transform`` (the generator's name), ``weight`` 1 (every
        generator acts on every copy), ``magnitude`` (its width) and ``range``
        in natural units (translations in pixels once an image size is known).
        """
        size = check_size(size) if size is not None else self.last_size  # (..., H, W): its last two, as layers read it
        if size is not None and len(size) < 2:
            raise ValueError(f"size must end with an image's spatial size (H, W), got {size!r}")
        with torch.no_grad():
            widths = self.widths.tolist()
        entries = []
        for name, w in zip(LIE_GENERATORS, widths, strict=True):
            if name == "rotate":
                rng = Range(-math.degrees(w), math.degrees(w), "deg")
            elif name.startswith("translate") and size is not None:
                extent = size[-1] if name == "translate_x" else size[-2]
                rng = Range(-w * extent / 2, w * extent / 2, "px")
            elif name in ("scale", "stretch"):
                rng = Range(math.exp(-w), math.exp(w), "x")
            else:
                rng = Range(-w, w, "")
            entries.append({"transform": name, "weight": 1.0, "magnitude": w, "range": rng})
        return Policy([entries])


class Augerino(AugNet):
    """The Augerino baseline: an :class:`~augnet.AugNet` augmented by a :class:`~augnet.augerino.LieAugmentation`.

    Copies and aggregation are those of :class:`~augnet.AugNet`; the
    augmentation draws uniform coefficients within learned widths over the
    Aff(2) generators. Train it with :func:`augnet.augerino_regularizer`
    (``-||width||_2``).

    Args:
        trunk: any image model, taking :math:`(B \\cdot C, Ch, H, W)` images.
        init_width: initial width of every generator (> 0, default 0.1), or one per generator (6).
        train_copies, eval_copies, aggregate: as for :class:`~augnet.AugNet` (defaults 1, 4, ``"log_softmax"``;
            the copies ints or 0-d integer tensors).
        padding, backend: the warps' ``tap_mix`` padding mode (default ``"zeros"``) and backend (default ``"auto"``).
        stratify: as for :class:`~augnet.AugNet` (its coefficients stratified over an evaluation's copies).

    Shape:
        - input: :math:`(B, Ch, H, W)`
        - output: :math:`(B, ...)`, the aggregated trunk output.

    Raises:
        TypeError, ValueError: bad widths, padding or backend, or any argument :class:`~augnet.AugNet` refuses.

    Examples:
        >>> trunk = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 10))
        >>> model = Augerino(trunk, init_width=0.2).eval()
        >>> model(torch.rand(5, 3, 8, 8)).shape
        torch.Size([5, 10])
        >>> isinstance(model.augment, LieAugmentation)
        True
    """

    def __init__(
        self,
        trunk: nn.Module,
        init_width: float | Sequence[float] = 0.1,
        train_copies: int = 1,
        eval_copies: int = 4,
        aggregate: str = "log_softmax",
        padding: str = "zeros",
        backend: str = "auto",
        stratify: bool = True,
    ) -> None:
        super().__init__(trunk, LieAugmentation(init_width, padding, backend), train_copies, eval_copies, aggregate,
                         stratify=stratify)  # fmt: skip
