"""The :class:`Transform` base class: parameter sampling split from application.

A transform holds static configuration only (ranges, padding, sample rate...).
The magnitude ``mu`` in [0, 1] belongs to the augmentation layer and is passed
in, so the same transform class can sit in several layers.

``sample(x, mu)`` draws a dict of per-row parameter tensors, on ``x``'s device,
from an optional :class:`torch.Generator`, with ``mu`` entering by
reparametrisation (e.g. ``angle = mu * max_angle * u``) so that the result is
differentiable in ``mu``. ``apply_transform(x, params)`` is deterministic given the
params, so passing ``params`` back replays a call exactly.

Copies: ``sample(x, mu, copies=C)`` draws parameters for ``N = B * C`` output
rows, copy-major (row ``c * B + b`` is copy ``c`` of sample ``b``), and
``apply_transform(x, params)`` produces those ``N`` rows from the ``B`` rows of ``x``.

Per-row magnitudes: ``mu`` may be a number, a 0-d tensor (one magnitude for
every row) or an :math:`(N,)` tensor (one per output row, as a per-instance
layer gives). The random draws do not depend on ``mu``, so row ``n`` drawn at
per-row magnitudes equals row ``n`` drawn at the scalar ``mu[n]`` with the same
generator state (:func:`per_row` shapes an (N,) magnitude for broadcasting).

Image transforms that are warps and/or colour affine maps also implement
``taps(params)`` (a :class:`~augnet.ops.taps.Taps`, see :func:`augnet.ops.tap_mix`), which lets a layer run all
of them, for all copies, in one fused call.
"""

from __future__ import annotations

import inspect
import threading
from typing import NamedTuple

import einops
import torch
from torch import Tensor, nn

from augnet._checks import NotANumberError, array_number, is_real, positive
from augnet.ops.dispatch import check_dense, tap_mix
from augnet.ops.precision import full_precision
from augnet.ops.taps import Taps, check_taps, concat_taps
from augnet.transforms._base_checks import check_temperature as check_temperature
from augnet.transforms._base_checks import (
    check_unit_interval,
    checked_natural_range,
    digits_apart,
    jsonable,
    param_dtype,
    shape_checked,
    shown_number,
    tensor_magnitude,
)
from augnet.transforms._base_checks import foreign_rows as _foreign_rows
from augnet.transforms._base_checks import in_float32 as in_float32
from augnet.transforms._base_checks import param_rows as _rows
from augnet.transforms._checks_copies import check_copies
from augnet.transforms._replay_checks import check_color_channels
from augnet.transforms._shapes import rank_hint

__all__ = ["Range", "SignalTransform", "Taps", "Transform", "draw", "per_row", "positive", "stratified_copies"]


class Range(NamedTuple):
    """A transform's range in natural units, e.g. ``Range(-45.0, 45.0, "deg")``.

    ``low`` and ``high`` are its bounds, ``unit`` names the unit (``""`` for a plain number).
    """

    low: float
    high: float
    unit: str

    def __str__(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        if self.low == -self.high:
            return f"±{self.high:.3g}{unit}"
        digits = digits_apart(self.low, self.high)  # 3, or more until unequal bounds print differently
        return f"[{self.low:.{digits}g}, {self.high:.{digits}g}]{unit}"


def _no_rows(x: Tensor, magnitude: Tensor) -> Tensor:
    """The output for a batch of no rows: empty, in the graph of ``x`` and of ``magnitude`` (a zero gradient in
    both, where a bare ``x[:0]`` left the magnitude out of the graph and its ``backward()`` failed)."""
    return x[:0].clone() + 0 * magnitude.sum().to(x.dtype)


class Transform(nn.Module):
    """Base class of augnet transforms. Subclasses implement :meth:`sample` and either :meth:`taps` (image
    warps and colour maps, then :meth:`apply_transform` is provided) or :meth:`apply_transform`.

    Class attributes:
        input_ndim: rank of the inputs the transform accepts (4 for images).
        mixes_samples: ``True`` when an output row reads other samples of the batch (sample pairing).
        padding: for tap transforms, the ``tap_mix`` padding mode.
        kink_at_zero: a warp with a bilinear kink at magnitude 0 (see ``kink_gate``).
    """

    input_ndim: int = 4
    mixes_samples: bool = False
    padding: str = "zeros"
    #: True for warps whose samples sit exactly on pixel centres at magnitude 0, where bilinear
    #: interpolation has a kink: there the derivative in the magnitude is taken one-sided, into
    #: (0, 1], by a finite difference of step ``KINK_STEP`` (see ``kink_gate``).
    kink_at_zero: bool = False
    #: True for tap transforms that read pixels through a warp or from another sample (``tap_mix`` with an
    #: affine map or sources): an identity warp is exact only to the rounding of its float32 sampling
    #: coordinates (exact at power-of-two sizes, up to about 3e-5 on a 224 x 224 image); and for the FFT
    #: transforms of :mod:`augnet.transforms.signal`, whose round trip is the identity only to rounding. A call
    #: at magnitude 0 returns the input itself for those rows (see ``forward``).
    resamples: bool = False

    # ----------------------------------------------------------------- API
    def sample(
        self, x: Tensor, magnitude: Tensor | float, generator: torch.Generator | None = None, copies: int = 1
    ) -> dict[str, Tensor]:
        """Draw per-row parameters for ``N = x.shape[0] * copies`` output rows (unchecked: see :meth:`draw_params`).

        Args:
            x: input batch :math:`(B, ...)`: its shape, device and dtype (some transforms read its values).
            magnitude: in [0, 1]: a number, a 0-d tensor, or an (N,) tensor of per-row magnitudes.
            generator: source of randomness (default ``None``: torch's global generator).
            copies: copies C per sample (default 1).

        Returns:
            ``{name: tensor}``, each tensor with a first dimension of N (copy-major rows).
        """
        raise NotImplementedError(f"{type(self).__name__} must implement sample()")

    def taps(self, params: dict[str, Tensor]) -> Taps:
        """The transform as taps of ``tap_mix``; only for tap-capable transforms."""
        raise NotImplementedError(f"{type(self).__name__} has no tap form")

    @shape_checked  # params of another shape than sample() gives: a ValueError naming the entry (every subclass's)
    def apply_transform(self, x: Tensor, params: dict[str, Tensor]) -> Tensor:
        """Apply the transform with fixed ``params`` (deterministic).

        Shape:
            - x: :math:`(B, ...)`
            - output: :math:`(N, ...)` with ``N`` the rows of ``params``, a
              multiple of ``B``.
        """
        if not self.has_taps():
            raise NotImplementedError(f"{type(self).__name__} must implement apply_transform()")
        n = _rows(params, type(self).__name__)
        if n != x.shape[0] and (x.shape[0] == 0 or n % x.shape[0]):  # a tap reads x[n % B]: the rows' sources
            raise ValueError(_foreign_rows(n, x.shape[0], type(self).__name__))
        taps = self.taps(params)
        check_taps(taps, n, type(self).__name__)  # a custom taps() of other shapes: refused here, not deep in torch
        check_color_channels(type(self).__name__, x, taps.color)  # params of another channel count: broadcast
        if taps.affine is None and taps.src is None:  # colour maps alone: per pixel, nothing resampled
            return _apply_colors(x, taps, n)
        src, affine, color, weight = concat_taps([taps], x, n)
        return tap_mix(x, src, affine, color, weight, padding=self.padding)

    def forward(
        self,
        x: Tensor,
        magnitude: Tensor | float,
        params: dict[str, Tensor] | None = None,
        generator: torch.Generator | None = None,
        copies: int = 1,
    ) -> Tensor:
        """Sample (unless ``params`` is given) and apply.

        Args:
            x: input batch, e.g. images :math:`(B, Ch, H, W)` in [0, 1].
            magnitude: in [0, 1], 0 is the identity: a number, a 0-d tensor, or an
                :math:`(B \\cdot copies,)` tensor of per-row magnitudes.
            params: parameters of an earlier call, to replay it exactly.
            generator: source of randomness (on ``x``'s device).
            copies: number of augmented copies per sample (copy-major output): an int, or a 0-d integer tensor or
                array, read once (``check_copies``: an int is checked by its type alone, as ``torch.compile`` needs).

        Returns:
            Tensor of shape :math:`(B \\cdot copies, ...)`. Rows at magnitude exactly 0 are the
            input's (with the derivative in the magnitude kept): bit for bit for finite inputs; a NaN or
            infinite value may reach the values that read it (a colour map's other channels), as at any magnitude.

        Raises:
            TypeError, ValueError: an input, magnitude, ``copies`` or ``generator`` the transform cannot take
                (see :meth:`check_input`, :meth:`check_magnitude`), or ``params`` drawn for other rows or keys,
                or for images of another channel count (colour maps) or, read on the CPU, aspect (rigid warps).
        """
        self.check_input(x)
        copies = check_copies(copies)
        number, magnitude = magnitude, self.check_magnitude(magnitude, x, rows=x.shape[0] * copies)
        self._check_generator(generator)
        replay = params is not None
        if params is None:
            if x.shape[0] == 0:  # an empty batch: nothing to draw, nothing to transform (in the graph of the
                return _no_rows(x, magnitude)  # magnitude too: a zero gradient, as a layer gives)
            if self.kink_at_zero and wants_kink_gradient(magnitude):
                # At exactly 0: the identity, with the one-sided derivative (see kink_gate). No branch on the
                # value, so the same code runs on every device without reading the magnitude back.
                sampled, gate = kink_gate(magnitude)
                params = self.sample(x, sampled, generator=generator, copies=copies)
                with full_precision(x) as dtype:
                    moved = self.apply_transform(x.to(dtype), params).to(x.dtype)
                identity = repeat_rows(x, moved.shape[0])
                kinked = identity + per_row(gate, moved.dim()).to(moved.dtype) * (moved - identity)
                return torch.where(per_row(magnitude, moved.dim()) == 0, kinked, moved)
            params = self._draw_at(x, number, magnitude, generator, copies)
        elif _rows(params, type(self).__name__) != x.shape[0] * copies:
            raise ValueError(
                f"{type(self).__name__}: params are for {_rows(params)} rows, "
                f"but x has {x.shape[0]} rows and copies={copies}"
            )
        elif x.shape[0] == 0:  # an empty batch replayed: nothing to transform (an FFT of no rows is an error)
            return _no_rows(x, magnitude)
        # float16 / bfloat16 are transformed in float32 (FFTs, coordinates), as a layer does.
        with full_precision(x) as dtype:
            try:
                out = self.apply_transform(x.to(dtype), params).to(x.dtype)
            except KeyError as err:
                if not replay or err.args[0] in params:  # not a replay with another transform's dict: a bug
                    raise
                raise ValueError(
                    f"{type(self).__name__}: params lack the entry {err}: pass the params this transform drew "
                    f"(draw_params() or sample()), got the keys {sorted(params)}"
                ) from None
        return self._identity_at_zero(x, magnitude, out)

    def _identity_at_zero(self, x: Tensor, magnitude: Tensor, out: Tensor) -> Tensor:
        """``out`` with its rows at magnitude exactly 0 replaced by the input's, for transforms that resample.

        Branch-free (no value read back): the value is the input bit for bit, the derivative in the
        magnitude that of ``out`` (a flip's relaxation, a warp's one-sided difference). The derivative in
        the input is exactly 1 when the magnitude takes no gradient; when it does, it is ``out``'s, the
        transform's at magnitude 0: the identity up to the rounding of its resampling (within 1e-6 in
        float32). Adding ``out``'s derivative to the input's counted the input twice (a gradient of 2).
        """
        if not self.resamples or out.shape[0] == 0:
            return out
        identity = repeat_rows(x, out.shape[0])
        if out.requires_grad and magnitude.requires_grad:  # the input's value + an exact 0 that carries out's
            # derivative (0 where out is not finite), in the magnitude and in the input alike
            identity = identity.detach() + torch.nan_to_num(out - out.detach(), nan=0.0, posinf=0.0, neginf=0.0)
        return torch.where(per_row(magnitude, out.dim()) == 0, identity, out)

    def draw_params(
        self, x: Tensor, magnitude: Tensor | float, generator: torch.Generator | None = None, copies: int = 1
    ) -> dict[str, Tensor]:
        """The parameters ``self(x, magnitude, generator=generator, copies=copies)`` draws, checked as it checks them.

        Passing them back (``params=``) replays that call bit for bit; code that draws once and applies in
        parts (the probes, batch by batch) uses this rather than :meth:`sample` with a checked magnitude,
        which would draw at a tensor where the call draws at a number (another rounding).
        """
        self.check_input(x)
        copies = check_copies(copies)
        checked = self.check_magnitude(magnitude, x, rows=x.shape[0] * copies)
        self._check_generator(generator)
        return self._draw_at(x, magnitude, checked, generator, copies)

    def _draw_at(self, x, number, magnitude: Tensor, generator, copies: int) -> dict[str, Tensor]:
        # A number is drawn with as a number, as sample(x, magnitude) draws: replaying those params is exact.
        number = array_number(number)  # a 0-d array: the number it holds, as a NumPy scalar
        drawn_at = float(number) if is_real(number) else magnitude
        return self.sample(x, drawn_at, generator=generator, copies=copies)

    @checked_natural_range
    def natural_range(self, magnitude: float, size: tuple[int, ...] | None = None) -> Range:
        """Range of the transform at ``magnitude`` in natural units.

        ``magnitude`` is a number in [0, 1] (a Python or NumPy number, a 0-d or one-element tensor, a 0-d array).
        ``size`` is the spatial (or temporal) size of the input, for transforms whose natural unit depends on it
        (pixels): ``None``, or the input's sizes after (B, Ch) (``(H, W)`` for images, ``(T,)`` for signals; a
        sequence of ints >= 1, a 1-D integer tensor or array; a longer size's last ones are read).

        Every subclass's own ``natural_range`` is wrapped to check these first (see ``__init_subclass__``):
        it receives ``magnitude`` as a float and ``size`` as a tuple of ints.

        Raises:
            TypeError, ValueError: a magnitude that is not a number in [0, 1] (a string, a bool, NaN, a tensor
                of several values), a size that is not ints >= 1 or has fewer than the transform reads.
        """
        return Range(0.0, float(magnitude), "")

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("natural_range")
        if callable(own):  # its arguments checked before it runs (checked_natural_range), once
            cls.natural_range = checked_natural_range(own)
        if callable(apply := cls.__dict__.get("apply_transform")):  # misshapen params named (shape_checked)
            cls.apply_transform = shape_checked(apply)

    def config(self) -> dict:
        """The constructor arguments of this transform, JSON-ready: ``type(t)(**t.config())`` rebuilds it.

        Read from the attributes named after the ``__init__`` parameters (every
        augnet transform keeps its arguments under their own names); tensors
        become nested lists, tuples lists.

        Examples:
            >>> from augnet.transforms import image as T
            >>> T.Rotate(max_angle=1.5).config()
            {'max_angle': 1.5, 'padding': 'zeros'}
        """
        out = {}
        for name, param in inspect.signature(type(self).__init__).parameters.items():
            if name == "self" or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                continue
            if not hasattr(self, name):
                raise NotImplementedError(
                    f"{type(self).__name__} does not keep its argument {name!r} as an attribute: override config()"
                )
            out[name] = jsonable(getattr(self, name))
        return out

    def __prepare_scriptable__(self):  # torch.jit.script calls it on every submodule of what it is given
        raise TypeError(f"torch.jit.script does not support augnet's transforms and augmentation layers (here "
                        f"{type(self).__name__}): they draw their parameters in Python code TorchScript cannot "
                        "compile; use torch.compile, or script the trunk alone")  # fmt: skip

    # ------------------------------------------------------------- helpers
    @classmethod
    def has_taps(cls) -> bool:
        """Whether the transform can run through ``tap_mix``."""
        return cls.taps is not Transform.taps

    def check_input(self, x: Tensor) -> None:
        """Raise the TypeError or ValueError of an input the transform cannot take (type, layout (sparse, nested),
        dtype, rank, empty sizes).

        An input a dimension or two short of a common layout (mono signals :math:`(B, T)`, one image
        :math:`(Ch, H, W)`) is refused with the reshape that makes a batch (``x.unsqueeze(1)``, ``x.unsqueeze(0)``).
        """
        name = type(self).__name__
        if not isinstance(x, Tensor):
            raise TypeError(f"{name}: expected a tensor, got {type(x).__name__}")
        check_dense(name, "x", x)  # sparse, MKL-DNN or nested: a TypeError here, not a raw one inside torch
        if not x.is_floating_point():
            hint = ": convert 8-bit images with x.float() / 255" if x.dtype == torch.uint8 else ""
            raise TypeError(f"{name}: expected a floating-point tensor, got dtype {x.dtype}{hint}")
        if x.dim() != self.input_ndim:
            doc, shape = self._shape_doc(), tuple(x.shape)
            hint = rank_hint(doc, shape)  # the call that gives a batch, for a layout a dimension or two short
            raise ValueError(f"{name}: expected a {self.input_ndim}-D input {doc}, got shape {shape}{hint}")
        if any(size == 0 for size in x.shape[1:]):
            raise ValueError(f"{name}: x has an empty non-batch dimension, shape {tuple(x.shape)}")

    def _check_generator(self, generator) -> None:
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(f"{type(self).__name__}: generator must be a torch.Generator or None, got {generator!r}")

    def _shape_doc(self) -> str:
        return "(B, Ch, H, W)" if self.input_ndim == 4 else "(B, Ch, T)"

    def check_magnitude(self, magnitude: Tensor | float, x: Tensor, rows: int | None = None) -> Tensor:
        """Validate ``magnitude``; return it as a tensor on ``x``'s device (a number, a 0-d array or a 0-d tensor: 0-d,
        a 0-d array read as the number it holds, as a NumPy scalar is; with ``rows``,
        an (rows,) tensor of per-row magnitudes too, kept 1-D; float16 / bfloat16 widened to float32, the draws' dtype;
        an integer tensor, ``torch.tensor(1)`` as the int ``1``, in the parameters' dtype). Any other type, dtype (bool,
        complex) or shape, a value outside [0, 1] (checked on CPU only) or a tensor on an accelerator other than ``x``'s
        raises a TypeError or ValueError; what is neither a number nor a tensor (``"0.5"``, ``None``, ``True``) the
        ``NotANumberError`` of every argument that takes a number (both)."""
        name, given = type(self).__name__, magnitude
        magnitude = array_number(magnitude)  # a 0-d array: the number it holds, as float(np.float32(v)) reads one
        if not (is_real(magnitude) or isinstance(magnitude, Tensor)):
            raise NotANumberError(f"{name}: magnitude must be a float or a tensor, got {type(given).__name__}")
        if isinstance(magnitude, Tensor):
            return tensor_magnitude(name, magnitude, x, rows)
        try:
            value = float(magnitude)
        except OverflowError:  # an int float() cannot hold: outside [0, 1]
            raise ValueError(f"{name}: magnitude must lie in [0, 1], got {shown_number(magnitude)}") from None
        check_unit_interval(name, value)
        return torch.tensor(value, dtype=param_dtype(x), device=x.device)


class SignalTransform(Transform):
    """Base of the signal and audio transforms: inputs :math:`(B, Ch, T)`, floating point.

    Its transforms have no tap form: ``apply_transform`` starts from ``x`` repeated to
    the rows the params were drawn for (``_rows``).
    """

    input_ndim = 3

    def _rows(self, x: Tensor, params: dict[str, Tensor]) -> Tensor:
        """``x`` repeated to the rows the params were drawn for (the ValueError of params that are none)."""
        return repeat_rows(x, _rows(params, type(self).__name__))


#: The step of the one-sided finite difference taken at a kink (a magnitude of exactly 0).
KINK_STEP = 1e-4


def wants_kink_gradient(magnitude) -> bool:
    """Whether a derivative in ``magnitude`` is being taken (a tensor that requires grad, grad mode on).

    Reads only metadata: no value, so no synchronisation on an accelerator.
    """
    return isinstance(magnitude, Tensor) and magnitude.requires_grad and torch.is_grad_enabled()


def kink_gate(magnitude: Tensor) -> tuple[Tensor, Tensor]:
    """``(sampled, gate)``: how a warp with a kink at magnitude 0 is run, the same on every device.

    At magnitude 0 a warp samples every pixel at its centre, where bilinear
    interpolation has a kink: a backend's gradient there depends on how the
    coordinates round, and may even have the wrong sign. The derivative the
    layer needs is the one-sided one, into (0, 1]. Without reading the
    magnitude back (which would stop the host on an accelerator), the
    transform draws its parameters at ``sampled`` (``KINK_STEP`` where the
    magnitude is exactly 0, else the magnitude itself: the same draws either
    way) and its output is mixed with the identity ``I`` as

        ``gate * T(sampled) + (1 - gate) * I``

    where ``gate`` is exactly 1 off the kink (value and gradient of ``T``
    unchanged, ``I`` weighted by an exact 0) and, at the kink, exactly 0 with
    derivative ``1 / KINK_STEP``: the value is the identity and the derivative
    ``(T(KINK_STEP) - I) / KINK_STEP``, the one-sided finite difference with the
    same draws. A layer runs ``I`` as one more tap of ``tap_mix``.

    Args:
        magnitude: a 0-d (or per-row) magnitude tensor.

    Returns:
        ``sampled`` (no gradient at the kink, the magnitude's elsewhere) and
        ``gate``, both shaped like ``magnitude``.

    Examples:
        >>> mu = torch.tensor(0.0, dtype=torch.float64, requires_grad=True)
        >>> sampled, gate = kink_gate(mu)
        >>> sampled.item(), gate.item()
        (0.0001, 0.0)
        >>> gate.backward()
        >>> mu.grad.item()
        10000.0
    """
    at = magnitude.detach() == 0
    sampled = torch.where(at, torch.full_like(magnitude, KINK_STEP), magnitude)
    gate = torch.where(at, (magnitude - magnitude.detach()) / KINK_STEP, torch.ones_like(magnitude))
    return sampled, gate


def per_row(magnitude: Tensor | float, ndim: int) -> Tensor | float:
    """A per-row magnitude (N,) shaped (N, 1, ..., 1) to broadcast over ``ndim``-D per-row tensors.

    A number or a 0-d tensor is returned as it is (it broadcasts already).

    Examples:
        >>> per_row(torch.tensor([0.1, 0.2]), 3).shape
        torch.Size([2, 1, 1])
        >>> per_row(0.5, 3)
        0.5
    """
    if not isinstance(magnitude, Tensor) or magnitude.dim() == 0:
        return magnitude
    return magnitude.reshape(-1, *[1] * (ndim - 1))


def _apply_colors(x: Tensor, taps: Taps, n: int) -> Tensor:
    """``sum_k weight[:, k] * (color[:, k] @ [x ; 1])`` per pixel, for taps without a warp or another source.

    What ``tap_mix`` computes for such taps, without reading the pixels through
    an identity warp (whose bilinear weights are off by a rounding): the identity
    map is then exactly the identity, and values a map takes from the data (a
    mean, a range) flow through as data do, NaN included.
    """
    rows = repeat_rows(x, n)  # (N, Ch, H, W)
    weight = taps.weight.to(x.dtype)  # (N, K)
    if taps.color is None:
        return (weight.sum(1) if weight.shape[1] > 1 else weight[:, 0]).reshape(-1, *[1] * (x.dim() - 1)) * rows
    color = taps.color.to(x.dtype)  # (N, K, Ch, Ch + 1)
    mapped = torch.einsum("nkij,nj...->nki...", color[..., :-1], rows) + color[..., -1][..., None, None]
    return torch.einsum("nk,nk...->n...", weight, mapped)


def draw(fn, *args, generator: torch.Generator | None = None, **kwargs) -> Tensor:
    """Call a torch random function (``torch.rand``, ``randn``, ``randint``, ...),
    passing ``generator`` only when one is given.

    (torch.compile cannot trace an explicit ``generator=None`` once shapes are dynamic.)

    Uniform and normal draws asked for in float64 are made in float32 and widened: the same
    generator state then gives the same augmentation of float32 and float64 inputs (a float64
    draw would take other bits from the generator, and so other values).
    """
    if generator is not None:
        kwargs["generator"] = generator
    if kwargs.get("dtype") == torch.float64 and fn in (torch.rand, torch.randn):
        return fn(*args, **{**kwargs, "dtype": torch.float32}).double()
    return fn(*args, **kwargs)


class _Blocks(threading.local):
    """Per thread (a DataParallel replica or a server thread evaluates in its own): the copies of the open
    stratified_copies blocks, innermost last."""

    def __init__(self) -> None:
        self.stack: list[int] = []


_STRATA = _Blocks()


class stratified_copies:
    """Within this block, the transforms' ranged parameters are stratified over ``copies`` copy-major copies.

    Each sample's C copies take the C strata ``[k/C, (k+1)/C)`` of the unit interval in a random order (one
    permutation per sample and per drawn quantity), each drawn uniformly within its stratum; a layer's choice of
    transform per copy is stratified the same way. Every row is still uniform on its own, so each copy is the
    augmentation it would be, but a sample's copies cover the ranges evenly, and their average is nearer its
    expectation than C independent draws: the sampling noise of an average over copies falls at the same cost.
    :class:`~augnet.AugNet` evaluates inside such a block unless built with ``stratify=False``. Stratified are the
    parameters drawn in a range (angles, shifts, factors, cut-offs: ``uniform``); on/off gates (flips, a
    colour map's or a channel operation's probability), noise and phases are drawn as outside a block.
    Draws whose row count is not a multiple of ``copies`` (and ``copies=1``) are independent, as outside a
    block. Blocks nest; the innermost one counts. A block holds in its own thread only.

    Args:
        copies: the copies C of each sample (rows ``c * B + b``).

    Examples:
        >>> from augnet.transforms import image as T
        >>> x = torch.zeros(2, 1, 8, 8)
        >>> with stratified_copies(4):
        ...     params = T.Rotate().draw_params(x, 1.0, generator=torch.Generator().manual_seed(0), copies=4)
        >>> strata = ((params["angle"] / torch.pi + 1) * 2).floor().reshape(4, 2)  # (copies, samples)
        >>> strata.sort(0).values.T.tolist()  # each sample: one copy in each quarter of ±180 degrees
        [[0.0, 1.0, 2.0, 3.0], [0.0, 1.0, 2.0, 3.0]]
    """

    def __init__(self, copies: int) -> None:
        self.copies = check_copies(copies)

    def __enter__(self) -> stratified_copies:
        _STRATA.stack.append(self.copies)
        return self

    def __exit__(self, *exc) -> None:
        _STRATA.stack.pop()


def stratifying(n: int) -> bool:
    """Whether draws for ``n`` rows are stratified (in a :class:`stratified_copies` block, ``n`` a multiple of C)."""
    stack = _STRATA.stack
    return bool(stack) and stack[-1] > 1 and n % stack[-1] == 0


def stratify(u: Tensor, generator: torch.Generator | None) -> Tensor:
    """Draws ``u`` of U(0, 1), shape (N, ...) with N copy-major rows, stratified over the copies of the
    innermost :class:`stratified_copies` block (each element on its own); ``u`` unchanged outside one."""
    n = u.shape[0]
    if not stratifying(n):
        return u
    c = _STRATA.stack[-1]
    # Row c * B + b is copy c of sample b: its stratum comes from a random permutation of the C strata, per sample.
    keys = draw(torch.rand, (n // c, c, *u.shape[1:]), generator=generator, device=u.device)
    strata = keys.argsort(dim=1).transpose(0, 1).reshape(u.shape)
    return (strata.to(u.dtype) + u) / c


def uniform(n: int, x: Tensor, generator: torch.Generator | None, low: float = -1.0, high: float = 1.0) -> Tensor:
    """``n`` draws of U(low, high) on ``x``'s device, in the parameter dtype (see :class:`stratified_copies`)."""
    u = stratify(draw(torch.rand, n, generator=generator, device=x.device, dtype=param_dtype(x)), generator)
    return u * (high - low) + low


def relaxed_bernoulli(
    shape: tuple[int, ...], x: Tensor, probability: Tensor, temperature: float, generator: torch.Generator | None
) -> Tensor:
    """Gates in {0, 1}, each 1 with ``probability``, with a gradient to the probability.

    ``probability`` is a number, a 0-d tensor, or one per row (``shape[0]``,).

    Straight-through relaxed Bernoulli: draws ``u ~ U(0, 1)``; the value is the
    hard decision ``u < p`` (so ``p = 0`` gives exactly 0 and ``p = 1`` exactly
    1), the gradient that of ``sigmoid((p - u) / temperature)``, which stays
    alive at ``p = 0`` and ``p = 1``.
    """
    u = draw(torch.rand, shape, generator=generator, device=x.device, dtype=param_dtype(x))
    probability = per_row(probability, len(shape))  # one per row (N,) or one for all
    hard = (u < probability).to(u.dtype)
    soft = torch.sigmoid((probability - u) / temperature)
    return hard + (soft - soft.detach())


def repeat_rows(x: Tensor, n: int) -> Tensor:
    """``x``'s ``B`` rows repeated to ``n`` rows, copy-major (row ``r`` is ``x[r % B]``)."""
    b = x.shape[0]
    if n == b:
        return x
    if b == 0 or n % b:
        raise ValueError(_foreign_rows(n, b))
    return einops.repeat(x, "b ... -> (c b) ...", c=n // b)  # c copies, b samples: row c * B + b
