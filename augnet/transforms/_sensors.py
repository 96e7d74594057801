"""EEG sensor rotations re-interpolated with spherical splines (Perrin et al., 1989).

:class:`SensorsRotationX`, :class:`SensorsRotationY` and :class:`SensorsRotationZ`
rotate the sensor positions by an angle about the x, y or z axis and read the
signals at the rotated positions: output channel ``i`` is the spherical-spline
interpolant of the input (known at the sensor positions ``P``) evaluated at
``R(angle) @ p_i``. The angle is ``mu * max_angle * u`` with ``u ~ U(-1, 1)``,
so the output is differentiable in the magnitude ``mu``.

Sign convention: ``R(angle)`` is the right-handed rotation about the axis, so a
positive angle about z moves a sensor at +x towards +y (about x: +y towards
+z; about y: +z towards +x). Channel ``i`` then reads the field at that moved
position, i.e. the scalp pattern turns by ``-angle`` relative to the sensors.

Interpolation (Perrin et al., 1989). With the kernel

.. math::
    g(t) = \\frac{1}{4\\pi} \\sum_{n=1}^{N} \\frac{2n + 1}{n^m (n + 1)^m} P_n(t)

(``m = 4``, ``N = 50``, Legendre polynomials ``P_n``) and ``G_PP[i, j] =
g(p_i . p_j)``, the spline through data ``v`` at ``P`` is ``f(q) = c_0 + sum_j
w_j g(q . p_j)`` with ``[[G_PP, 1], [1^T, 0]] [w; c_0] = [v; 0]``. Evaluated at
positions ``Q`` it is ``M v`` with ``M = [G_QP, 1] Z`` and ``Z`` the first ``Ch``
columns of the inverse of that augmented matrix. Since ``[G_PP, 1] Z = I``,

.. math::
    M = I + (G_{QP} - G_{PP}) W, \\qquad W = Z_{:Ch, :Ch},

which is how the transforms compute it: ``W`` and ``G_PP`` are solved for once
at construction (float64), only ``G_QP`` depends on the row's angle, and an
angle of exactly 0 gives ``G_QP == G_PP`` bit for bit, hence exactly the
identity. Rows of ``M`` sum to 1 (a constant field is kept) since ``W 1 = 0``.
Interpolation matrices are computed in float64 and cast to the input's dtype.

Examples:
    >>> pos = torch.randn(12, 3)
    >>> pos[:, 2] = pos[:, 2].abs()                  # an upper-hemisphere cap
    >>> t = SensorsRotationZ(pos)                     # up to ±30 degrees
    >>> x = torch.randn(4, 12, 100)
    >>> t(x, 0.5, generator=torch.Generator().manual_seed(0)).shape
    torch.Size([4, 12, 100])
    >>> torch.equal(t(x, 0.0), x)                    # magnitude 0 is the identity
    True
    >>> str(t.natural_range(0.5))
    '±15 deg'
"""

from __future__ import annotations

import math
import sys

import torch
from torch import Tensor

from augnet._checks import is_int, real
from augnet.transforms._base_checks import shown_number
from augnet.transforms._ranges import angle
from augnet.transforms.base import Range, SignalTransform, uniform

__all__ = [
    "SensorsRotationX",
    "SensorsRotationY",
    "SensorsRotationZ",
    "rotation_matrix",
    "spherical_spline_kernel",
    "spline_interpolation_matrix",
]

#: Coordinates (u, v, w) per rotation axis, with (u, v, w) right-handed: a
#: positive rotation turns u towards v and keeps w.
_AXES = {"x": (1, 2, 0), "y": (2, 0, 1), "z": (0, 1, 2)}

#: How far the rows of an interpolation matrix may sum from 1 (a constant field kept) before the spline system is
#: taken for singular: 1e-10 for 64 sensors, at most 1e-4 for 256 at random (default order and terms).
_MAX_DRIFT = 1e-2

#: The log of the largest float: the kernel's coefficients divide by ``(n + 1) ** order``, which overflows past it.
_LOG_FLOAT_MAX = math.log(sys.float_info.max)

#: The range of position entries whose squares float64 holds with room for a sum of three (2**-450 to 2**450).
_SQUARES_LOW, _SQUARES_HIGH = 2.0**-450, 2.0**450


# ------------------------------------------------------------------ the maths
def _spline_coefficients(order: int, n_terms: int) -> list[float]:
    """``(2n + 1) / (4 pi n^m (n + 1)^m)`` for ``n = 1..N``."""
    return [(2 * n + 1) / (4 * math.pi * float(n) ** order * float(n + 1) ** order) for n in range(1, n_terms + 1)]


def _kernel_value(t: Tensor, order: int, n_terms: int) -> Tensor:
    """``g(t)`` by the Legendre recurrence ``P_{n+1} = ((2n + 1) t P_n - n P_{n-1}) / (n + 1)``.

    Works in place on a few buffers of ``t``'s shape (no autograd). Only
    separate multiplies and adds, never a fused multiply-add, so that equal
    inputs give equal outputs bit for bit whatever the tensor's shape (the
    exact identity at angle 0 relies on it).
    """
    coef = _spline_coefficients(order, n_terms)
    p_prev, p, tmp = torch.ones_like(t), t.clone(), torch.empty_like(t)  # P_0, P_1
    g = p * coef[0]
    for n in range(1, n_terms):
        _legendre_step(t, p_prev, p, tmp, n)  # p_prev <- P_{n+1}
        p_prev, p = p, p_prev
        torch.mul(p, coef[n], out=tmp)
        g.add_(tmp)
    return g


def _kernel_derivative(t: Tensor, order: int, n_terms: int) -> Tensor:
    """``g'(t)``, with ``P'_{n+1} = P'_{n-1} + (2n + 1) P_n`` beside the recurrence of :func:`_kernel_value`."""
    coef = _spline_coefficients(order, n_terms)
    p_prev, p, tmp = torch.ones_like(t), t.clone(), torch.empty_like(t)  # P_0, P_1
    d_prev, d = torch.zeros_like(t), torch.ones_like(t)  # P'_0, P'_1
    dg = torch.full_like(t, coef[0])
    for n in range(1, n_terms):
        torch.mul(p, 2 * n + 1, out=tmp)
        d_prev.add_(tmp)  # d_prev <- P'_{n+1}
        d_prev, d = d, d_prev
        torch.mul(d, coef[n], out=tmp)
        dg.add_(tmp)
        _legendre_step(t, p_prev, p, tmp, n)
        p_prev, p = p, p_prev
    return dg


def _legendre_step(t: Tensor, p_prev: Tensor, p: Tensor, tmp: Tensor, n: int) -> None:
    """Overwrite ``p_prev`` (``P_{n-1}``) with ``P_{n+1}``, given ``p`` (``P_n``); ``tmp`` is scratch."""
    torch.mul(t, p, out=tmp)
    tmp.mul_((2 * n + 1) / (n + 1))
    p_prev.mul_(n / (n + 1))
    torch.sub(tmp, p_prev, out=p_prev)


class _SplineKernel(torch.autograd.Function):
    """``g(t)`` with its exact derivative, recomputed in backward (saves only ``t``)."""

    @staticmethod
    def forward(t: Tensor, order: int, n_terms: int) -> Tensor:
        # A copy of the buffer the recurrence wrote in place: torch 2.11's compile (dynamo and AOT autograd) gave
        # an output written in place inside the function no gradient at all.
        return _kernel_value(t, order, n_terms).clone()

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        t, ctx.order, ctx.n_terms = inputs
        ctx.save_for_backward(t)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: Tensor):
        (t,) = ctx.saved_tensors
        return grad * _kernel_derivative(t, ctx.order, ctx.n_terms), None, None


def spherical_spline_kernel(cos_gamma: Tensor, order: int = 4, n_terms: int = 50) -> Tensor:
    """Perrin's spherical-spline kernel ``g(cos gamma)``, elementwise, differentiable.

    .. math::
        g(t) = \\frac{1}{4\\pi} \\sum_{n=1}^{N} \\frac{2n + 1}{n^m (n + 1)^m} P_n(t)

    Args:
        cos_gamma: cosines of the angles between pairs of unit vectors; any
            shape and floating dtype (float64 recommended). A number, an array
            or an integer tensor is read as float64.
        order: the spline order ``m`` (>= 2; 4 as in Perrin et al.).
        n_terms: the number ``N`` of Legendre terms.

    Returns:
        ``g`` with the shape and dtype of ``cos_gamma`` (float64 for what is
        read as float64). The gradient is exact (first order only: the
        derivative itself is not differentiable).

    Raises:
        TypeError: ``cos_gamma`` not real numbers (bool or complex), or ``order`` / ``n_terms`` not numbers.
        ValueError: ``order`` below 2 or ``n_terms`` below 1 (or not ints), or ``(n_terms + 1) ** order`` past
            the largest float (the coefficients overflow).
    """
    order, n_terms = _check_spline_config(order, n_terms)
    return _SplineKernel.apply(_real_tensor("cos_gamma", cos_gamma), order, n_terms)


def _real_tensor(name: str, value) -> Tensor:
    """``value`` as a floating tensor: a floating tensor as it is, numbers, arrays and integer tensors in float64;
    the TypeError naming ``name`` for anything else (bool, complex, text)."""
    if isinstance(value, Tensor) and value.is_floating_point():
        return value
    try:
        t = torch.as_tensor(value)
    except (TypeError, ValueError, RuntimeError) as e:
        raise TypeError(f"{name} must be real numbers (a tensor, an array or a number), got {value!r}") from e
    if t.is_complex() or t.dtype == torch.bool:
        raise TypeError(f"{name} must hold real numbers, got dtype {t.dtype}")
    return t.to(torch.float64)


def rotation_matrix(axis: str, angle: Tensor) -> Tensor:
    """Right-handed rotation matrices about ``axis`` (``"x"``, ``"y"`` or ``"z"``).

    A positive angle about z turns +x towards +y (about x: +y towards +z, about
    y: +z towards +x).

    Args:
        axis: ``"x"``, ``"y"`` or ``"z"``.
        angle: in radians: a tensor (the output takes its dtype), or a number or an array (read as float64).

    Shape:
        - angle: :math:`(...)` in radians.
        - output: :math:`(..., 3, 3)`, applied to column vectors.

    Raises:
        TypeError: ``axis`` not a string, or ``angle`` not real numbers.
        ValueError: ``axis`` not one of the three.
    """
    if not isinstance(axis, str):
        raise TypeError(f"axis must be one of {sorted(_AXES)} (a string), got {axis!r}")
    if axis not in _AXES:
        raise ValueError(f"axis must be one of {sorted(_AXES)}, got {axis!r}")
    if isinstance(angle, Tensor) and (angle.is_complex() or angle.dtype == torch.bool):  # True turned by 1 rad
        raise TypeError(f"angle must hold real numbers (radians), got dtype {angle.dtype}")
    angle = angle if isinstance(angle, Tensor) else _real_tensor("angle", angle)
    iu, iv, iw = _AXES[axis]
    c, s = torch.cos(angle), torch.sin(angle)
    one, zero = torch.ones_like(c), torch.zeros_like(c)
    rows = [[zero] * 3 for _ in range(3)]
    rows[iu][iu], rows[iu][iv] = c, -s
    rows[iv][iu], rows[iv][iv] = s, c
    rows[iw][iw] = one
    return torch.stack([torch.stack(r, -1) for r in rows], -2)


def spline_interpolation_matrix(
    positions_from: Tensor, positions_to: Tensor, order: int = 4, n_terms: int = 50
) -> Tensor:
    """Matrix mapping data at ``positions_from`` to its spherical-spline interpolant at ``positions_to``.

    The general (slower) form ``M = [G_QP, 1] Z`` of the module docstring, in
    float64; positions are projected onto the unit sphere.

    Shape:
        - positions_from: :math:`(P, 3)`, ``P >= 4`` distinct directions.
        - positions_to: :math:`(..., Q, 3)`.
        - output: :math:`(..., Q, P)`.

    Both may be tensors or arrays (the output is on ``positions_from``'s device, the CPU for an array).

    Raises:
        TypeError: positions that are not real numbers (or a dict).
        ValueError: positions of another shape, not finite or at the origin, ``positions_from`` with fewer
            than 4 sensors or two of them in one direction; a bad ``order`` or ``n_terms`` (see
            :func:`spherical_spline_kernel`); a spline system singular for these positions.
    """
    order, n_terms = _check_spline_config(order, n_terms)
    _sensor_positions(positions_from, "positions_from")  # checked (P >= 4 distinct finite directions) on the CPU
    positions_from = _real_tensor("positions_from", positions_from)
    positions_to = _real_tensor("positions_to", positions_to)
    _check_directions("positions_to", positions_to)
    p = _unit(positions_from.to(torch.float64))
    q = _unit(positions_to.to(device=p.device, dtype=torch.float64))
    z = _augmented_inverse_columns(spherical_spline_kernel(p @ p.T, order, n_terms))
    g_qp = spherical_spline_kernel(q @ p.T, order, n_terms)
    m = torch.cat([g_qp, torch.ones_like(g_qp[..., :1])], -1) @ z
    # A system singular to rounding solves to finite nonsense; its rows would not sum to 1 (as the transforms check).
    drift = float((m.detach().sum(-1) - 1).abs().max()) if m.numel() else 0.0
    if not drift <= _MAX_DRIFT:
        raise ValueError(f"positions_from ({p.shape[0]} sensors) with order={order} and n_terms={n_terms} give a "
                         f"numerically singular spline system: the interpolation matrix's rows sum to 1 off by up to "
                         f"{drift:.3g} (a constant field is not kept); use more n_terms or a lower order")  # fmt: skip
    return m


def _unit(p: Tensor) -> Tensor:
    """``p`` (..., 3) over its norm; a row beyond the range the squares of the norm hold is first divided by its
    largest entry (at 1e200 the norm overflowed and the row read as 0, at 1e-160 it lost its direction)."""
    big = p.detach().abs().amax(-1, keepdim=True)
    scaled = p / torch.where(_squares_hold(big), torch.ones_like(big), big)  # (x / 1 is x: other rows as they were)
    return scaled / torch.linalg.vector_norm(scaled, dim=-1, keepdim=True)


def _squares_hold(big: Tensor) -> Tensor:
    """Where the squares of numbers up to ``big`` neither overflow nor underflow float64 (or ``big`` is 0, or not
    finite: no scale helps); elsewhere, positions are scaled by their largest entry before a norm is taken."""
    return ((big >= _SQUARES_LOW) & (big <= _SQUARES_HIGH)) | (big == 0) | ~torch.isfinite(big)


def _check_directions(name: str, q: Tensor) -> None:
    """The ValueError of positions ``q`` (..., 3) that are not finite directions (a zero vector has none)."""
    if q.dim() < 1 or q.shape[-1] != 3:
        raise ValueError(f"{name} must have shape (..., 3), got shape {tuple(q.shape)}")
    if q.is_meta:
        raise ValueError(f"{name} is a tensor on meta, which holds no value: give the positions")
    bad = ~torch.isfinite(q).all(-1) | (q.detach() == 0).all(-1)  # (a norm of 1e-200 read as 0: not the origin)
    if bool(bad.any()):
        raise ValueError(f"{name} must be finite and away from the origin, got {q[bad][0].tolist()}")


def _augmented_inverse_columns(g_pp: Tensor) -> Tensor:
    """``Z``: the first ``Ch`` columns of ``[[G_PP, 1], [1^T, 0]]^{-1}``, shape (Ch + 1, Ch), or the ValueError of a
    singular system (sensors too close together for the kernel)."""
    ch = g_pp.shape[-1]
    a = g_pp.new_zeros(ch + 1, ch + 1)
    a[:ch, :ch] = g_pp
    a[:ch, ch] = 1.0
    a[ch, :ch] = 1.0
    try:
        z = torch.linalg.solve(a, torch.eye(ch + 1, ch, dtype=a.dtype, device=a.device))
    except torch.linalg.LinAlgError:
        z = None
    if z is None or not bool(torch.isfinite(z).all()):
        raise ValueError(f"the positions of these {ch} sensors give a singular spline system (sensors too close "
                         "together for the kernel's order and terms)")  # fmt: skip
    return z


def _check_spline_config(order: int, n_terms: int) -> tuple[int, int]:
    """``(order, n_terms)`` as Python ints, or the ValueError naming the bad one (a NotANumberError, a TypeError
    too, for one that is not a number at all)."""
    order, n_terms = real("order", order, "an int >= 2"), real("n_terms", n_terms, "a positive int")  # 0-d: numbers
    if not is_int(order) or order < 2:
        raise ValueError(f"order must be an int >= 2, got {order!r}")
    if not is_int(n_terms) or n_terms < 1:
        raise ValueError(f"n_terms must be a positive int, got {n_terms!r}")
    try:
        too_high = order * math.log(n_terms + 1) >= _LOG_FLOAT_MAX
    except OverflowError:  # an order float() cannot hold (10**400): a raw OverflowError here
        too_high = True
    if too_high:  # float(n + 1) ** order: Python's OverflowError
        raise ValueError(f"order={shown_number(order)} is too high for n_terms={shown_number(n_terms)}: the "
                         "coefficients divide by (n + 1) ** order, past the largest float for n = "
                         f"{shown_number(n_terms)}; use a lower order")  # fmt: skip
    return int(order), int(n_terms)


def _sensor_positions(positions, name: str = "sensor_positions") -> Tensor:
    """Validate (Ch, 3) sensor positions and project them onto the unit sphere (float64, CPU); errors name ``name``."""
    if isinstance(positions, Tensor):
        if positions.is_meta:  # (reading it was a raw NotImplementedError)
            raise ValueError(f"{name} is a tensor on meta, which holds no value: give the positions")
        p = positions.detach()
    elif isinstance(positions, dict):  # MNE's montage.get_positions()["ch_pos"]: names to positions, in its own order
        raise TypeError(
            f"{name} must be a (Ch, 3) tensor or array in the channel order of the inputs, got a dict of "
            f"{len(positions)} entries: stack its positions in that order, e.g. np.stack([ch_pos[name] for name in "
            "ch_names])"
        )
    else:
        try:
            p = torch.as_tensor(positions)
            if p.is_floating_point():  # numbers given as Python floats keep their double precision
                p = torch.as_tensor(positions, dtype=torch.float64)
        except (TypeError, ValueError, RuntimeError) as e:
            raise TypeError(f"{name} must be a (Ch, 3) tensor or array of numbers, got {positions!r}") from e
    if p.is_complex() or p.dtype == torch.bool:
        raise TypeError(f"{name} must hold real numbers, got dtype {p.dtype}")
    p = p.to("cpu", torch.float64)
    if p.dim() != 2 or p.shape[1] != 3:
        flipped = p.dim() == 2 and p.shape[0] == 3  # braindecode's (3, Ch) matrix
        raise ValueError(
            f"{name} must have shape (Ch, 3), got shape {tuple(p.shape)}"
            + (f": one row per sensor; transpose a (3, Ch) matrix ({name}.T)" if flipped else "")
        )
    ch = p.shape[0]
    if ch < 4:
        raise ValueError(f"{name} must hold at least 4 sensors for spherical splines, got {ch}")
    bad = (~torch.isfinite(p)).any(1).nonzero().flatten()
    if bad.numel():
        i = int(bad[0])
        raise ValueError(f"{name} must be finite, got {p[i].tolist()} for sensor {i}")
    given, big = p, p.abs().max()
    if not bool(_squares_hold(big)):  # positions beyond 1e154 or below 1e-154: their squares overflowed (underflowed),
        p = p / big  # and every sensor was refused as at the origin
    norm = torch.linalg.vector_norm(p, dim=1)
    small = (norm <= 1e-9 * norm.max()).nonzero().flatten()
    if small.numel():
        i = int(small[0])
        raise ValueError(f"{name} must not lie at the origin (zero norm), got {given[i].tolist()} for sensor {i}")
    p = p / norm[:, None]
    dist = torch.cdist(p, p) + 3.0 * torch.eye(ch, dtype=p.dtype)
    if dist.min() < 1e-6:
        i, j = divmod(int(dist.argmin()), ch)
        raise ValueError(
            f"{name} of sensors {i} and {j} coincide on the unit sphere "
            f"({p[i].tolist()} and {p[j].tolist()}): the spline system would be singular"
        )
    return p


# ------------------------------------------------------------- the transforms
class _SensorsRotation(SignalTransform):
    """Base of the sensor rotations; ``axis`` names the rotation axis (see :class:`SensorsRotationZ`)."""

    axis: str = "z"

    def __init__(self, sensor_positions, max_angle: float = math.pi / 6, order: int = 4, n_terms: int = 50) -> None:
        super().__init__()
        self.max_angle = angle(type(self).__name__, "max_angle", max_angle)
        order, n_terms = _check_spline_config(order, n_terms)
        self.order, self.n_terms = order, n_terms
        p = _sensor_positions(sensor_positions)
        ch = p.shape[0]
        # The argument as given (float64, before the projection onto the sphere), for config().
        self.sensor_positions = torch.as_tensor(sensor_positions, dtype=torch.float64).detach().cpu().tolist()
        iu, iv, iw = _AXES[self.axis]
        u, v, w = p[:, iu], p[:, iv], p[:, iw]
        # q_i . p_j = cos(a) * cos_uv + sin(a) * sin_uv + cos_w, with q_i = R(a) p_i.
        geometry = {
            "positions": p,
            "cos_uv": u[:, None] * u + v[:, None] * v,
            "sin_uv": u[:, None] * v - v[:, None] * u,
            "cos_w": w[:, None] * w,
        }
        for name, value in geometry.items():
            self.register_buffer(name, value, persistent=False)
        g_pp = self._kernel_at(torch.zeros(1, dtype=torch.float64))[0]
        z = _augmented_inverse_columns(g_pp)  # the ValueError of a singular system
        self.register_buffer("g_pp", g_pp, persistent=False)
        self.register_buffer("weights", z[:-1].contiguous(), persistent=False)
        # A system singular to rounding solves to finite nonsense (few terms or a high order for the sensors: the
        # kernel's rank falls below Ch + 1): the rows of M must sum to 1, checked at the largest angle drawn.
        largest = min(self.max_angle, math.pi)
        drift = float(self._update({"angle": p.new_tensor([largest])}).sum(-1).abs().max())  # rows of I + update
        if not drift <= _MAX_DRIFT:
            raise ValueError(
                f"sensor_positions ({ch} sensors) with order={order} and n_terms={n_terms} give a numerically "
                f"singular spline system: a rotation would not keep a constant field (the interpolation matrix's "
                f"rows sum to 1 off by up to {drift:.3g}); use more n_terms, a lower order or fewer sensors"
            )

    # The geometry stays float64 whatever dtype the module is cast to (module.float(),
    # .half(), .to(dtype)); only its device follows.
    _float64_buffers = ("positions", "cos_uv", "sin_uv", "cos_w", "g_pp", "weights")

    def _apply(self, fn, recurse=True):
        saved = {name: self._buffers[name] for name in self._float64_buffers if name in self._buffers}
        super()._apply(fn, recurse)
        for name, value in saved.items():
            self._buffers[name] = value.to(self._buffers[name].device)
        return self

    @property
    def n_sensors(self) -> int:
        """Number of sensors, the channel count the inputs must have."""
        return self.positions.shape[0]

    def check_input(self, x: Tensor) -> None:
        super().check_input(x)
        if x.shape[1] != self.n_sensors:
            raise ValueError(
                f"{type(self).__name__}: expected {self.n_sensors} channels (one per sensor position), "
                f"got {x.shape[1]} in an input of shape {tuple(x.shape)}"
            )

    def sample(self, x, magnitude, generator=None, copies=1):
        n = x.shape[0] * copies
        return {"angle": magnitude * self.max_angle * uniform(n, x, generator)}

    def _kernel_at(self, angle: Tensor) -> Tensor:
        """``G_QP`` (N, Ch, Ch) in float64 for rotation angles (N,)."""
        a = angle.to(torch.float64)[:, None, None]
        cos_gamma = torch.cos(a) * self.cos_uv + torch.sin(a) * self.sin_uv + self.cos_w
        return spherical_spline_kernel(cos_gamma, self.order, self.n_terms)

    def interpolation_matrix(self, params: dict[str, Tensor]) -> Tensor:
        """Per-row interpolation matrices ``M = I + (G_QP - G_PP) W`` in float64.

        Shape:
            - params["angle"]: :math:`(N,)`.
            - output: :math:`(N, Ch, Ch)`; ``out[n] = M[n] @ x[n % B]``.
        """
        return torch.eye(self.n_sensors, dtype=torch.float64, device=self.g_pp.device) + self._update(params)

    def _update(self, params: dict[str, Tensor]) -> Tensor:
        """``(G_QP - G_PP) W``, (N, Ch, Ch) float64: exactly 0 where the angle is 0."""
        return (self._kernel_at(params["angle"]) - self.g_pp) @ self.weights

    def apply_transform(self, x, params):
        x = self._rows(x, params)
        if x.is_meta:  # shapes only: the geometry stays on the module's device, with values a meta input lacks
            return torch.empty_like(x)
        # x + (M - I) x: exact at angle 0, and more accurate than M @ x for small angles.
        return torch.baddbmm(x, self._update(params).to(x.dtype), x)

    def natural_range(self, magnitude, size=None):
        d = math.degrees(float(magnitude) * self.max_angle)
        return Range(-d, d, "deg")

    def extra_repr(self):
        parts = [f"n_sensors={self.n_sensors}", f"max_angle={self.max_angle:.4g}"]
        if (self.order, self.n_terms) != (4, 50):
            parts += [f"order={self.order}", f"n_terms={self.n_terms}"]
        return ", ".join(parts)


class SensorsRotationX(_SensorsRotation):
    """Sensor rotation about the x axis (positive: +y towards +z), up to ``max_angle`` (default ±pi / 6).

    See :class:`SensorsRotationZ` for the arguments.
    """

    axis = "x"


class SensorsRotationY(_SensorsRotation):
    """Sensor rotation about the y axis (positive: +z towards +x), up to ``max_angle`` (default ±pi / 6).

    See :class:`SensorsRotationZ` for the arguments.
    """

    axis = "y"


class SensorsRotationZ(_SensorsRotation):
    """Sensor rotation about the z axis (positive: +x towards +y), re-interpolated with spherical splines.

    Args:
        sensor_positions: :math:`(Ch, 3)` tensor or array of 3-D sensor
            positions, in the channel order of the inputs; they are projected
            onto the unit sphere about the origin (so centre the head there).
        max_angle: the largest angle in radians (not degrees), reached at magnitude 1
            (default ``pi / 6``, 30 degrees; for 45 degrees pass ``math.radians(45)``).
        order: spline order ``m`` (default 4).
        n_terms: Legendre terms ``N`` of the kernel (default 50).

    Raises:
        ValueError: ``sensor_positions`` that are not at least 4 distinct finite (Ch, 3) positions, a
            ``max_angle`` that is not a positive number within float32's range, an ``order`` below 2 or
            ``n_terms`` below 1 (or not ints), an ``order`` so high that ``(n_terms + 1) ** order`` overflows a
            float, or a spline system singular for these sensors.
        TypeError: ``sensor_positions`` that are not real numbers, or a dict of names to positions (stack its
            positions in the inputs' channel order).

    Warns:
        UserWarning: a ``max_angle`` above a full turn, ``2 * pi`` (surely meant in degrees).

    Parameters: ``angle`` (N,) in radians (see the module docstring for the sign).

    Shape:
        - input: :math:`(B, Ch, T)` with ``Ch`` the number of sensors.
        - output: :math:`(B \\cdot copies, Ch, T)`; row ``n`` is
          ``M(angle_n) @ x[n % B]`` with ``M`` the :math:`(Ch, Ch)`
          interpolation matrix of ``interpolation_matrix``.
    """

    axis = "z"
