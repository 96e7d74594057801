"""The Lie derivative: local equivariance error per layer (Gruver et al., ICLR 2023).

For a one-parameter family of transformations ``g_t`` (:mod:`augnet.probes.families`: rotation,
translations, shears, zoom, and the colour maps) with ``g_0`` the identity, the Lie derivative of a
layer ``phi`` at an input ``x`` is

    L phi(x) = d/dt [ rho(g_t)^-1 phi(g_t x) ] at t = 0
             = J_phi(x) u - d rho(g_t)/dt phi(x),      u = d(g_t x)/dt at t = 0,

where ``rho`` is how ``g_t`` acts on the layer's output: the identity for an invariant reading
(logits, pooled features; then ``L phi = J_phi u``), and, for an equivariant one, the same warp
applied to a (B, C, H', W') feature map (augnet's warps act in normalised coordinates, so a
rotation or a shift by a fraction of the size means the same on any map). ``L phi(x) = 0`` for a
layer exactly invariant (or equivariant) to the family, to first order around ``x``.

Both derivatives are exact, by automatic differentiation:

- ``u``, through the transform's warp (its taps, through the plain-PyTorch ``tap_mix``, in float64).
  A bilinear warp at ``t = 0`` samples every pixel at its centre, where interpolation has a kink:
  the derivative there is one-sided, and which side autograd takes depends on how the coordinates
  round. The probe takes the mean of the two one-sided derivatives: the symmetric derivative, which a
  central finite difference ``(f(g_h x) - f(g_-h x)) / 2h`` approaches as ``h -> 0``. Each is taken by
  autograd at ``t = +-KINK_STEP`` (1e-9, inside the pieces); a piece is not linear in ``t`` (a sample moving
  along a diagonal meets bilinear's cross term, a rotation's path is curved), so that mean is off by a
  multiple of ``KINK_STEP`` (2e-8 for a rotation of a random image), which one Richardson step with
  ``2 KINK_STEP`` removes. (The authors' own warp takes the forward difference.) Colour maps are
  smooth: their derivative is taken at 0. A torch that cannot differentiate ``grid_sample``'s backward
  (such as 2.11) gets the central difference instead, extrapolated from three steps (error of order
  ``DIFFERENCE_STEP ** 3``).
- ``J_phi u``, the model's Jacobian-vector product, by forward-mode autograd (one forward pass with
  dual numbers; every layer's tangent is read by the same hooks as :func:`~augnet.probes.features`),
  or, for models with an operation forward mode does not support (e.g. PyTorch's fused attention),
  by the double-backward trick of the authors' code (two backward passes per layer).

Normalisation. The authors' released code (``lee/e2e_lee.py`` of github.com/ngruver/lie-deriv)
reports, per input, the mean over the output's ``d`` dimensions of ``|L phi(x)|`` (of the softmax
probabilities there; pass ``nn.Sequential(model, nn.Softmax(1))`` to measure those), then averages
over inputs: that is ``"lee"`` here. As layers differ in scale, ``"relative"`` divides the norm by
the layer's own: ``|L phi(x)| / |phi(x)|`` (per unit of ``t``), comparable across layers and models.

Gruver, Finzi, Goldblum and Wilson, "The Lie Derivative for Measuring Learned Equivariance", ICLR 2023.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Sequence
from contextlib import contextmanager

import torch
from torch import Tensor, nn

from augnet._checks import check_bool, is_int
from augnet.probes._common import (
    batch_size_of,
    check_model_input,
    check_seed,
    evaluating,
    forward_kwargs,
    summary,
)
from augnet.probes.families import continuous_names, family
from augnet.probes.features import (
    LOGITS,
    REDUCTIONS,
    _Filler,
    _named,
    check_layers,
    check_rows,
    layer_names,
    reduce_features,
    stream_features,
)

__all__ = ["KINK_STEP", "LIE_BATCH_SIZE", "lie_derivative", "transform_derivative"]

#: Where the one-sided derivatives of a warp are taken, at ``t = +-KINK_STEP`` (in the family's units).
KINK_STEP = 1e-9
#: The step of the central differences that take the place of autograd where torch cannot differentiate a warp's
#: backward (see :func:`transform_derivative`).
DIFFERENCE_STEP = 1e-3
#: Rows per forward pass when ``batch_size`` is ``None``: forward mode holds each activation and its
#: tangent (a resnet18 at 64 x 64 pixels peaks at 0.3 GB with 64 rows, 0.9 GB with 256, as fast).
LIE_BATCH_SIZE = 64


def named_transform(transform):
    """``transform`` itself, or for a name (``"Rotate"``, as :func:`~augnet.probes.report` takes them) the image
    transform of that class at its defaults; the ValueError naming the continuous ones for another name."""
    if not isinstance(transform, str):
        return transform
    from augnet.transforms import image as T

    if transform not in continuous_names() or transform not in T.__all__:
        raise ValueError(f"transform {transform!r} names no transform with a continuous family: one of "
                         f"{continuous_names()}")  # fmt: skip
    return getattr(T, transform)()


def _family_of(transform):
    from augnet.transforms.base import Transform

    if not isinstance(transform, Transform):
        raise TypeError(f"transform must be an augnet image transform or its name, got {type(transform).__name__}")
    fam = family(transform)
    if fam is None:
        raise ValueError(
            f"{type(transform).__name__} is not a continuous family of transformations (a flip, or a map applied "
            f"with a probability), so it has no Lie derivative; the continuous ones are {continuous_names()}"
        )
    return fam


def transform_derivative(transform, x: Tensor, size: tuple[int, int] | None = None) -> Tensor:
    """``u = d(g_t x)/dt`` at ``t = 0`` for the family of ``transform`` (see :mod:`augnet.probes.families`).

    Computed by autograd through the transform's warp in float64; for a warp, the symmetric
    derivative (the mean of the one-sided ones, see the module docstring).

    Args:
        transform: an augnet image transform with a family (Rotate, TranslateX, Brightness, ...), or its
            class name (the transform at its defaults).
        x: (B, C, H, W) images (or feature maps).
        size: the (H, W) that ``t`` is measured in (a translation's pixels); default ``x``'s.

    Returns:
        (B, C, H, W) float64.

    Raises:
        TypeError: ``transform`` is no augnet image transform, ``x`` is not a tensor it takes, ``size`` is not two
            integers.
        ValueError: ``transform`` has no continuous family, ``size`` is not positive.

    Examples:
        >>> from augnet.transforms import image as T
        >>> ramp = torch.arange(5.0).expand(1, 1, 5, 5)  # the value is the column, 0 outside (zero padding)
        >>> [round(v, 9) for v in transform_derivative(T.TranslateX(), ramp)[0, 0, 2].tolist()]  # -1 per px right
        [-0.5, -1.0, -1.0, -1.0, 1.5]
    """
    transform = named_transform(transform)
    fam = _family_of(transform)
    transform.check_input(x)
    size = tuple(x.shape[-2:]) if size is None else _check_size(size)
    x64 = x.detach().double()
    n = len(x64)
    base = transform.sample(x64, torch.tensor(1.0, dtype=torch.float64), generator=torch.Generator().manual_seed(0))
    from augnet.ops.dispatch import tap_mix_reference
    from augnet.ops.taps import concat_taps

    def warped(t: Tensor) -> Tensor:
        params = dict(base)
        params[fam.param] = fam.value(t, base[fam.param], size)
        src, affine, color, weight = concat_taps([transform.taps(params)], x64, n)
        return tap_mix_reference(x64, src, affine, color, weight, padding=transform.padding)

    def at(t0: float) -> Tensor:
        with torch.enable_grad():
            t = torch.full((n,), t0, dtype=torch.float64, device=x64.device, requires_grad=True)
            y = warped(t)
            v = torch.ones_like(y, requires_grad=True)
            (vjp,) = torch.autograd.grad(y, t, v, create_graph=True)  # (n,): v . dy/dt, linear in v
            (u,) = torch.autograd.grad(vjp, v, torch.ones_like(vjp))  # its gradient in v: dy/dt
        return u

    if not _warps_differentiate_twice():
        # The central difference over +-h, extrapolated from h, h/2 and h/4 (Richardson): the symmetric derivative
        # at a kink and the derivative elsewhere, with an error of order h^3. h = 1e-3 in the family's units moves
        # no sample of an image under a thousand pixels by a whole pixel: no other kink of the interpolation.
        def central(h: float) -> Tensor:
            with torch.no_grad():
                ts = [torch.full((n,), s, dtype=torch.float64, device=x64.device) for s in (h, -h)]
                return (warped(ts[0]) - warped(ts[1])) / (2 * h)

        d1, d2, d4 = (central(DIFFERENCE_STEP / k) for k in (1, 2, 4))
        e1, e2 = 2 * d2 - d1, 2 * d4 - d2  # the error's h term gone; then its h^2 term
        return (4 * e2 - e1) / 3
    if transform.kink_at_zero:
        # The mean of the derivatives at +-e is the symmetric one plus c e (the pieces curve): 2 S(e) - S(2e) is not.
        s1, s2 = ((at(e) + at(-e)) / 2 for e in (KINK_STEP, 2 * KINK_STEP))
        return 2 * s1 - s2
    return at(0.0)


def _check_size(size) -> tuple[int, int]:
    """``size`` as ``(H, W)``: two positive integers, or the error naming it (an int failed in ``tuple()``, a 0
    divided a translation's derivative into NaN)."""
    if (
        isinstance(size, (str, bytes))
        or not isinstance(size, Sequence)
        or len(size) != 2
        or not all(is_int(v) for v in size)
    ):
        raise TypeError(f"size must be two integers (H, W), got {size!r}")
    if min(size) < 1:
        raise ValueError(f"size must be two positive integers (H, W), got {tuple(size)}")
    return int(size[0]), int(size[1])


class CannotDifferentiate(RuntimeError):
    """:func:`lie_derivative`'s error for a model that no way of computing ``J u`` can differentiate here."""


@functools.cache
def _warps_differentiate_twice() -> bool:
    """Whether this torch differentiates ``grid_sample``'s backward (newer releases do; torch 2.11 raises
    "derivative for aten::grid_sampler_2d_backward is not implemented"), which :func:`transform_derivative`'s
    exact route needs."""
    x = torch.ones(1, 1, 2, 2, dtype=torch.float64)
    with torch.enable_grad():
        grid = torch.zeros(1, 1, 1, 2, dtype=torch.float64, requires_grad=True)
        y = torch.nn.functional.grid_sample(x, grid, align_corners=False)
        v = torch.ones_like(y, requires_grad=True)
        (g,) = torch.autograd.grad(y, grid, v, create_graph=True)
        try:
            torch.autograd.grad(g.sum(), v)
        except RuntimeError:
            return False
    return True


def _checked_pool(reduce: Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
    """A callable ``reduce`` whose result is checked: a tensor with one row per input."""

    def pool(a: Tensor) -> Tensor:
        out = reduce(a)
        if not isinstance(out, Tensor) or out.dim() == 0 or out.shape[0] != a.shape[0]:
            got = tuple(out.shape) if isinstance(out, Tensor) else type(out).__name__
            raise TypeError(f"reduce must map a (B, ...) tensor to a (B, D) tensor, got {got}")
        return out

    return pool


@contextmanager
def _reference_tap_mix(model: nn.Module):
    """Route ``tap_mix`` through its plain-PyTorch backend while differentiating a model with augnet layers.

    The compiled backends' backward is not differentiable and has no forward-mode rule; the reference
    one is both (an AugNet's augmentation layer with ``backend="auto"`` reads ``AUGNET_BACKEND``).
    """
    from augnet.layers import AugmentationLayer

    if not any(isinstance(m, AugmentationLayer) for m in model.modules()):
        yield
        return
    import os

    from augnet.ops.dispatch import BACKEND_ENV

    before = os.environ.get(BACKEND_ENV)
    os.environ[BACKEND_ENV] = "reference"
    try:
        yield
    finally:
        if before is None:
            del os.environ[BACKEND_ENV]
        else:
            os.environ[BACKEND_ENV] = before


def _is_map(a: Tensor) -> bool:
    return a.dim() == 4 and a.shape[-1] > 1 and a.shape[-2] > 1


def _forward_mode(model, xb, u, names, kwargs, plain: bool = True) -> dict[str, tuple[Tensor, Tensor]]:
    """Each layer's output and its tangent ``J u``, by forward-mode autograd (``torch.func.jvp``).

    ``torch.func.jvp`` refuses (rather than ignores) an operation without a forward-mode rule, such as
    a custom ``autograd.Function``. ``plain=False`` runs with autograd enabled and PyTorch's math
    attention: with autograd off, ``nn.MultiheadAttention`` takes a fused path forward mode lacks.
    """

    def layers_of(inputs: Tensor) -> tuple[Tensor, ...]:
        got: dict[str, Tensor] = {}
        stream_features(model, inputs, names, lambda s, e, batch: got.update(batch), "none", len(xb), **kwargs)
        return tuple(got[n] for n in names)

    with _math_attention(not plain), torch.set_grad_enabled(not plain), _quiet_forward_ad_setup():
        primals, tangents = torch.func.jvp(layers_of, (xb,), (u,))
    return {n: (p.detach(), t.detach()) for n, p, t in zip(names, primals, tangents, strict=True)}


@contextmanager
def _quiet_forward_ad_setup():
    """Silence torch's own ``torch.jit.script`` deprecation notice, raised once per process when forward mode
    loads its decompositions (torch 2.14 and newer): it concerns torch's internals, and a user can do nothing
    about it. Every other warning passes through.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"`torch\.jit\.script` is deprecated", category=FutureWarning)
        yield


@contextmanager
def _math_attention(on: bool):
    """PyTorch's plain-math scaled dot-product attention (differentiable in every mode), when ``on``."""
    if not on:
        yield
        return
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        yield


def _double_backward(model, xb, u, names, kwargs) -> dict[str, tuple[Tensor, Tensor]]:
    """Each layer's output and ``J u`` by the double-backward trick: ``d/dv [(v^T J) u]`` (two backward passes)."""
    got = {}
    with torch.enable_grad(), _math_attention(True):
        leaf = xb.detach().requires_grad_(True)
        stream_features(model, leaf, names, lambda s, e, batch: got.update(batch), "none", len(xb), **kwargs)
        out = {}
        for n in names:
            y = got[n]
            if not y.requires_grad:
                out[n] = (y.detach(), torch.zeros_like(y))
                continue
            v = torch.ones_like(y, requires_grad=True)
            (vjp,) = torch.autograd.grad(y, leaf, v, create_graph=True, retain_graph=True, allow_unused=True)
            if vjp is None:
                out[n] = (y.detach(), torch.zeros_like(y))
                continue
            (jvp,) = torch.autograd.grad(vjp, v, u, retain_graph=True, allow_unused=True)
            if jvp is None:  # v^T J is linear in v: a graph without v in it was cut (read as 0, it looked invariant)
                raise RuntimeError(
                    f"the gradient of layer {n!r} cannot itself be differentiated (a custom autograd.Function "
                    "with a once_differentiable backward, or a detached tensor), which the double-backward "
                    "trick needs"
                )
            out[n] = (y.detach(), jvp.detach())
    return out


def lie_derivative(
    model: nn.Module,
    x: Tensor,
    transform,
    layers: str | list[str] = LOGITS,
    reduce: str | Callable[[Tensor], Tensor] = "none",
    equivariant: bool | str = "auto",
    batch_size: int | None = None,
    copies: int | None = None,
    seed: int = 0,
    return_derivative: bool = False,
) -> dict:
    """Local equivariance error of each layer of ``model`` to the family of ``transform`` (Gruver et al.).

    See the module docstring for the definition, how it is computed and how it is normalised. The
    model runs in evaluation mode (its modes are restored), batch by batch; its parameters get no
    gradient.

    Args:
        model: any module taking (B, C, H, W) images.
        x: (B, C, H, W) images.
        transform: an augnet image transform with a continuous family, or its class name (``"Rotate"``,
            the transform at its defaults) (``augnet.probes.families.family``: Rotate, TranslateX / Y,
            ShearX / Y, Scale, Brightness, Contrast, Saturation, Hue); its magnitude plays no part (the derivative
            is taken at the identity).
        layers: layer names as for :func:`~augnet.probes.features` (default ``"logits"``).
        reduce: ``"none"``, ``"mean"`` (channels averaged over positions), ``"tokens"`` (a
            transformer's (B, tokens, D) output averaged over its tokens, as
            :func:`~augnet.probes.report` reads it), ``"flatten"``, or a linear callable
            (B, ...) -> (B, D), applied to the layer's Lie derivative and to its output, after ``rho``.
        equivariant: ``True`` acts on a (B, C, H', W') layer output with the same warp
            (``rho = g_t``, equivariance), ``False`` leaves outputs alone (``rho = 1``,
            invariance), ``"auto"`` the former for feature maps (H', W' > 1) under a warp.
        batch_size: rows per forward pass (default ``LIE_BATCH_SIZE``, 64).
        copies: for an AugNet, the copies it averages (its draws are seeded with ``seed``, so the
            model is a deterministic function of its input, which is differentiated).
        seed: an AugNet's draws (an int in ``[0, 2**63 - 3]``).
        return_derivative: also return each layer's (B, ...) Lie derivative (after ``reduce``).

    Raises:
        TypeError, ValueError: before the model is differentiated: a bad argument, naming it; images
            that are not finite (naming them), on meta, or in another dtype or on another device than
            the model's parameters; a layer that is not one call of a module (one checking pass of two
            images). After the first batch: a layer or output without one row per input.

    Returns:
        ``{"transform", "parameter", "unit" (of t), "layers", "mode" (how ``J u`` was computed:
        ``"forward"``, ``"forward_math"`` (forward mode with math attention) or
        ``"double_backward"``), "equivariant": {layer: bool}, "lee": {layer: (B,) mean ``|L phi|``
        over the output's dimensions}, "relative": {layer: (B,) ``|L phi| / |phi|``}, "summary": {layer:
        summary of "lee"}, "mean": {layer: mean lee}, "mean_relative": {layer: mean relative}}``,
        and ``"derivative": {layer: (B, ...)}`` when asked.

    Examples:
        >>> from augnet.transforms import image as T
        >>> total = nn.Sequential(nn.Conv2d(3, 1, 1, bias=False), nn.Flatten())  # the sum of the channels
        >>> _ = total[0].weight.data.fill_(1.0)
        >>> x = torch.rand(4, 3, 8, 8)
        >>> lie_derivative(total, x, T.Hue())["mean"]["logits"] < 1e-6  # a hue rotation keeps it
        True
        >>> lie_derivative(total, x, T.Brightness())["mean"]["logits"]  # a brightness shift adds 3 per unit
        3.0
    """
    transform = named_transform(transform)
    fam = _family_of(transform)
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    if not isinstance(x, Tensor):
        raise TypeError(f"x must be a tensor, got {type(x).__name__}")
    transform.check_input(x)
    if not x.is_floating_point() or len(x) == 0:
        raise ValueError(f"x must be a non-empty batch of floating-point images, got {x.dtype} {tuple(x.shape)}")
    if not callable(reduce) and reduce not in REDUCTIONS:
        raise ValueError(f"reduce must be one of {REDUCTIONS} or a callable, got {reduce!r}")
    pool = _checked_pool(reduce) if callable(reduce) else lambda a: reduce_features(a, reduce)
    if not isinstance(equivariant, bool) and not (isinstance(equivariant, str) and equivariant == "auto"):
        raise ValueError(f"equivariant must be True, False or 'auto', got {equivariant!r}")
    if equivariant is True and not fam.geometric:
        raise ValueError(
            f"equivariant=True acts on feature maps with the transform's warp, and {type(transform).__name__} "
            "is a colour map, not a warp: pass equivariant=False (invariance) or 'auto'"
        )
    names = layer_names(layers, model)  # bytes (read as numbers), a module or a number: the TypeError naming it
    odd = [n for n in names if not isinstance(n, str)]
    if odd:
        raise TypeError(f"layers must be module names (str), got {odd[0]!r:.60} in {names!r:.80}"
                        f"{_named(model, odd[0])}")  # fmt: skip
    if not names:
        raise ValueError("layers must name at least one layer")
    if len(set(map(str, names))) != len(names):
        raise ValueError(f"layers must be distinct layer names, got {names!r}")
    step = LIE_BATCH_SIZE if batch_size is None else batch_size_of(batch_size)
    seed = check_seed(seed)
    check_bool("return_derivative", return_derivative)
    check_model_input(model, x)
    check_layers(model, x, names, **forward_kwargs(model, copies, seed, x.device))  # one pass of two images
    size = tuple(x.shape[-2:])
    # Per-sample values written into tensors allocated once (see features._Filler on why).
    lee = {n: torch.empty(len(x), dtype=torch.float64) for n in names}
    relative = {n: torch.empty(len(x), dtype=torch.float64) for n in names}
    keep_derivative = _Filler(len(x))
    acting: dict[str, bool] = {}
    modes = ["forward", "forward_math", "double_backward"]
    with evaluating(model), _reference_tap_mix(model):
        kwargs = forward_kwargs(model, copies, seed, x.device)
        for start in range(0, len(x), step):
            # A copy, not a view: forward mode gives a view's whole base a tangent (all of x, 0.9 GB
            # for 20,000 images), where a copy's tangent is the batch's.
            xb = x[start : start + step].clone()
            u = transform_derivative(transform, xb).to(xb.dtype)
            while True:
                try:
                    if modes[0] == "double_backward":
                        got = _double_backward(model, xb, u, names, kwargs)
                    else:
                        got = _forward_mode(model, xb, u, names, kwargs, plain=modes[0] == "forward")
                    break
                except (NotImplementedError, RuntimeError) as err:
                    if start or len(modes) == 1:
                        why = "" if _warps_differentiate_twice() else (
                            f" (torch {torch.__version__} cannot differentiate grid_sample's backward, which an "
                            "augmentation layer's warps need here; newer torch can)"
                        )
                        raise CannotDifferentiate(
                            f"lie_derivative: cannot differentiate {type(model).__name__}: {err}{why}"
                        ) from err
                    modes.pop(0)  # the next way of computing J u, with the first batch's draws again
                    kwargs = forward_kwargs(model, copies, seed, x.device)
            check_rows({n: got[n][0] for n in names}, len(xb))
            for n in names:
                primal, tangent = got[n]
                act = equivariant is True or (equivariant == "auto" and fam.geometric and _is_map(primal))
                if act and not _is_map(primal):
                    raise ValueError(f"layer {n!r} outputs {tuple(primal.shape)}, not a feature map a warp acts on")
                acting[n] = bool(act)
                if act:
                    tangent = tangent.double() - transform_derivative(transform, primal, size)
                lie = pool(tangent.double()).flatten(1)
                value = pool(primal.double()).flatten(1)
                norm = value.norm(dim=1)
                stop = start + len(xb)
                lee[n][start:stop] = lie.abs().mean(1).cpu()
                rel = torch.where(norm > 0, lie.norm(dim=1) / torch.where(norm > 0, norm, 1.0), torch.nan)
                relative[n][start:stop] = rel.cpu()
                if return_derivative:
                    keep_derivative(start, stop, {n: pool(tangent.detach()).cpu()})
    out = {
        "transform": type(transform).__name__,
        "parameter": fam.param,
        "unit": fam.unit,
        "layers": names,
        "mode": modes[0],
        "equivariant": acting,
        "lee": lee,
        "relative": relative,
        "summary": {n: summary(v) for n, v in lee.items()},
        "mean": {n: float(v.mean()) for n, v in lee.items()},
        "mean_relative": {n: float(v.nanmean()) for n, v in relative.items()},
    }
    if return_derivative:
        derivative = keep_derivative.result()
        out["derivative"] = {n: derivative[n] for n in names}
    return out
