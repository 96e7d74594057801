"""Augmentation layers: learnable softmax mixtures of differentiable transforms.

Axis legend: B samples, C copies, N = B * C output rows (copy-major: row
``c * B + b`` is copy ``c`` of sample ``b``), Q transforms, K taps.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from augnet.ops.dispatch import tap_mix
from augnet.ops.precision import full_precision
from augnet.ops.taps import Taps, concat_taps, select_taps
from augnet.transforms.base import KINK_STEP, Transform, at_kink, check_copies, draw, kink_derivative, repeat_rows

__all__ = ["AugmentationLayer", "AugmentationModule", "Policy"]

EVAL_MODES = ("sample", "mix")


class _InwardClamp(torch.autograd.Function):
    """Clamp to [0, 1] whose gradient survives at the bounds when it points inside.

    A plain clamp has zero gradient outside [0, 1], so a magnitude that reaches
    a bound can never come back. Here the gradient passes unchanged, except
    the part that would push a value already at or beyond a bound further out
    (which would let it drift away while the clamped value stays put).
    """

    @staticmethod
    def forward(ctx, raw: Tensor) -> Tensor:
        ctx.save_for_backward(raw)
        return raw.clamp(0.0, 1.0)

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:
        (raw,) = ctx.saved_tensors
        # Gradient descent moves raw by -grad: outward at 0 is grad > 0, at 1 grad < 0.
        outward = ((raw <= 0.0) & (grad > 0)) | ((raw >= 1.0) & (grad < 0))
        return torch.where(outward, torch.zeros_like(grad), grad)


def inward_clamp(raw: Tensor) -> Tensor:
    """Clamp ``raw`` to [0, 1], keeping the gradient that points back inside."""
    return _InwardClamp.apply(raw)


def check_generator(generator) -> None:
    """Raise a clear error for a generator that cannot be used here.

    torch.compile cannot trace ``torch.Generator`` arguments; compiled models
    draw from torch's global generator (seed it with ``torch.manual_seed``).
    """
    if generator is None:
        return
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    if torch.compiler.is_compiling():
        raise TypeError(
            "torch.compile cannot trace a torch.Generator argument: call the compiled model with "
            "generator=None and seed torch's global generator (torch.manual_seed) instead"
        )


def _check_finite_cpu(name: str, t: Tensor) -> None:
    # A value check on an accelerator would synchronise with the host; skip it there.
    if t.device.type == "cpu" and not torch.compiler.is_compiling() and not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} contains NaN or infinite values: {t.detach().tolist()}")


class AugmentationLayer(nn.Module):
    r"""A softmax-weighted mixture of transforms with learnable magnitudes.

    .. math::
        \mathrm{AugLayer}(x) = \sum_q w_q \, T_q(x; \mu_q), \qquad
        w = \mathrm{softmax}(\mathrm{logits} / \mathrm{temperature})

    In training (and with ``eval_mode="mix"``) each output row is that blend.
    In evaluation with ``eval_mode="sample"`` (the default) each row draws one
    transform from Categorical(w), per sample and per copy, so averaged
    predictions average over real transformations.

    When every transform has a tap form (all image transforms of
    :mod:`augnet.transforms.image`) the layer runs as one ``tap_mix`` call per
    padding mode, producing all copies straight from ``x``. Otherwise each
    transform is applied to the copies and the results are summed.

    Args:
        transforms: the Q candidate transforms.
        init_magnitude: initial magnitude(s) in [0, 1], one float or Q floats.
        temperature: softmax temperature of the weights (> 0).
        eval_mode: ``"sample"`` or ``"mix"``, see above.
        backend: ``tap_mix`` backend for tap layers (``"auto"`` by default).

    Shape:
        - input: :math:`(B, ...)`, e.g. :math:`(B, Ch, H, W)` for images.
        - output: :math:`(B \cdot C, ...)` with ``C = copies`` (1 if not given).

    Examples:
        >>> from augnet.transforms import image as T
        >>> layer = AugmentationLayer([T.Rotate(), T.TranslateX()], init_magnitude=0.1)
        >>> layer.weights
        tensor([0.5000, 0.5000], grad_fn=<SoftmaxBackward0>)
        >>> layer(torch.rand(8, 3, 16, 16), copies=4).shape
        torch.Size([32, 3, 16, 16])
    """

    def __init__(
        self,
        transforms: Sequence[Transform],
        init_magnitude: float | Sequence[float] = 0.5,
        temperature: float = 1.0,
        eval_mode: str = "sample",
        backend: str = "auto",
    ) -> None:
        super().__init__()
        if isinstance(transforms, Transform) or not isinstance(transforms, Sequence | nn.ModuleList):
            raise TypeError(f"transforms must be a sequence of Transform, got {type(transforms).__name__}")
        transforms = list(transforms)
        if not transforms:
            raise ValueError("transforms must not be empty: an augmentation layer needs at least one transform")
        for t in transforms:
            if not isinstance(t, Transform):
                raise TypeError(f"every transform must be an augnet Transform, got {type(t).__name__}")
        ranks = {t.input_ndim for t in transforms}
        if len(ranks) > 1:
            raise ValueError(
                f"transforms expect inputs of different ranks {sorted(ranks)}; put them in separate layers"
            )
        q = len(transforms)
        init = _magnitude_list(init_magnitude, q)
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
            raise TypeError(f"temperature must be a number, got {type(temperature).__name__}")
        if not math.isfinite(temperature) or temperature <= 0:
            raise ValueError(f"temperature must be positive and finite, got {temperature}")
        if 1.0 / temperature > torch.finfo(torch.float32).max:
            raise ValueError(f"temperature {temperature} is too small: logits / temperature overflows float32")
        if eval_mode not in EVAL_MODES:
            raise ValueError(f"eval_mode must be one of {EVAL_MODES}, got {eval_mode!r}")

        self.transforms = nn.ModuleList(transforms)
        self.weight_logits = nn.Parameter(torch.zeros(q))
        self.raw_magnitudes = nn.Parameter(torch.tensor(init, dtype=torch.float32))
        self.temperature = float(temperature)
        self.eval_mode = eval_mode
        self.backend = backend
        self.last_size: tuple[int, ...] | None = None  # spatial size last seen, for policy()

    # ---------------------------------------------------------------- state
    @property
    def weights(self) -> Tensor:
        """(Q,) mixture weights, ``softmax(weight_logits / temperature)``; sums to 1.

        Computed from the parameters on each access (differentiable, read-only).
        """
        return torch.softmax(self.weight_logits / self.temperature, 0)

    @property
    def magnitudes(self) -> Tensor:
        """(Q,) magnitudes in [0, 1], clamped so the gradient stays alive at the bounds.

        Computed from the parameters on each access (differentiable, read-only).
        """
        return inward_clamp(self.raw_magnitudes)

    @property
    def uses_taps(self) -> bool:
        """Whether the layer runs through ``tap_mix`` (every transform has taps)."""
        return all(t.has_taps() for t in self.transforms)

    def policy(self, size: tuple[int, ...] | None = None) -> list[dict]:
        """Per transform: name, weight, magnitude and range in natural units.

        Args:
            size: input spatial size for pixel units; defaults to the last
                input the layer saw.
        """
        size = size if size is not None else self.last_size
        with torch.no_grad():
            w, mu = self.weights.tolist(), self.magnitudes.tolist()
        return [
            {"transform": type(t).__name__, "weight": wq, "magnitude": mq, "range": t.natural_range(mq, size)}
            for t, wq, mq in zip(self.transforms, w, mu, strict=True)
        ]

    def extra_repr(self) -> str:
        with torch.no_grad():
            w, mu = self.weights.tolist(), self.magnitudes.tolist()
        mix = ", ".join(
            f"{type(t).__name__}(w={wq:.3f}, mu={mq:.3f})" for t, wq, mq in zip(self.transforms, w, mu, strict=True)
        )
        return f"temperature={self.temperature:g}, eval_mode={self.eval_mode!r}, policy=[{mix}]"

    # -------------------------------------------------------------- forward
    def forward(self, x: Tensor, copies: int | None = None, generator: torch.Generator | None = None) -> Tensor:
        """Augment ``x``; with ``copies=C``, return C augmented copies of each sample.

        Args:
            x: input batch :math:`(B, ...)`.
            copies: number of copies to make (copy-major). ``None`` keeps the
                batch size, each row augmented once.
            generator: source of randomness (on ``x``'s device).
        """
        for t in self.transforms:
            t.check_input(x)
        check_generator(generator)
        c = 1 if copies is None else copies
        check_copies(c)
        _check_finite_cpu("AugmentationLayer magnitudes", self.raw_magnitudes)
        _check_finite_cpu("AugmentationLayer weight logits", self.weight_logits)
        on_cpu = self.weight_logits.device.type == "cpu" and not torch.compiler.is_compiling()
        if on_cpu and not bool(torch.isfinite(self.weights).all()):
            raise ValueError(
                f"AugmentationLayer weights softmax(logits / temperature) are not finite (temperature "
                f"{self.temperature:g}, logits {self.weight_logits.detach().tolist()}): raise the temperature"
            )
        if x.dim() > 2:
            self.last_size = tuple(x.shape[2:])
        # float16 / bfloat16 are augmented in float32 (coordinates, spectra, blends); the result is rounded.
        with full_precision(x) as dtype:
            return self._augment(x.to(dtype), c, generator).to(x.dtype)

    def _augment(self, x: Tensor, c: int, generator: torch.Generator | None) -> Tensor:
        n = x.shape[0] * c
        w, mu = self.weights, self.magnitudes
        if n == 0:  # an empty batch gives an empty batch, in the graph of x and of the layer's parameters
            return x[:0].clone() + 0 * (w.sum() + mu.sum()).to(x.dtype)
        mix = self.training or self.eval_mode == "mix"
        choice = None
        if not mix:
            # One transform per output row from Categorical(w).
            probs = w.detach().to(x.device).expand(n, -1)
            choice = draw(torch.multinomial, probs, 1, generator=generator).squeeze(1)
        if self.uses_taps:
            return self._forward_taps(x, c, n, w, mu, choice, generator)
        return self._forward_generic(x, c, n, w, mu, choice, generator)

    def _forward_taps(self, x, c, n, w, mu, choice, generator) -> Tensor:
        # Warps at a magnitude of exactly 0 sit on the bilinear kink: their value there is the identity, and
        # their derivative the one-sided finite difference into (0, 1] (transforms.base.kink_derivative).
        kinked = self._kinked(mu) if choice is None else set()
        taps = []
        for q, t in enumerate(self.transforms):
            params = t.sample(x, torch.full_like(mu[q], KINK_STEP) if q in kinked else mu[q], generator, c)
            taps.append(t.taps(params))
        moved = {}
        for q in kinked:
            with torch.no_grad():
                moved[q] = tap_mix(x, *concat_taps([taps[q]], x, n), padding=self.transforms[q].padding,
                                   backend=self.backend)  # fmt: skip
            taps[q] = Taps(weight=torch.ones(n, 1, dtype=x.dtype, device=x.device))  # the identity, the value at 0
        out = None
        for padding, members in _groups_by_padding(self.transforms).items():
            group = [taps[q] for q in members]
            if choice is None:
                src, affine, color, weight = concat_taps(group, x, n, scales=[w[q] for q in members])
            else:
                src, affine, color, weight = select_taps(group, members, len(taps), choice, x, n)
            y = tap_mix(x, src, affine, color, weight, padding=padding, backend=self.backend)
            out = y if out is None else out + y
        if kinked:
            identity = repeat_rows(x.detach(), n)
            for q in kinked:  # an exact 0 whose derivative in mu_q is w_q times the one-sided slope
                out = out + w[q].detach().to(x.dtype) * kink_derivative(identity, moved[q], mu[q])
        return out

    def _kinked(self, mu: Tensor) -> set[int]:
        """The warps with a kink at 0 whose magnitude is exactly 0 (checked on CPU only; elsewhere it would sync)."""
        if not any(t.kink_at_zero for t in self.transforms) or not at_kink(mu):
            return set()
        zero = (mu.detach() == 0).tolist()
        return {q for q, t in enumerate(self.transforms) if t.kink_at_zero and zero[q]}

    def _forward_generic(self, x, c, n, w, mu, choice, generator) -> Tensor:
        outs = [t(x, mu[q], generator=generator, copies=c) for q, t in enumerate(self.transforms)]
        if choice is None:
            out = None
            for q, y in enumerate(outs):
                term = w[q].to(y.dtype) * y
                out = term if out is None else out + term
            return out
        stacked = torch.stack(outs)  # (Q, N, ...)
        return stacked[choice, torch.arange(n, device=x.device)]


def _magnitude_list(init, q: int) -> list[float]:
    if isinstance(init, Tensor):
        init = init.tolist()
    if isinstance(init, (int, float)) and not isinstance(init, bool):
        values = [float(init)] * q
    elif isinstance(init, Sequence) and not isinstance(init, str):
        bad = [v for v in init if isinstance(v, bool) or not isinstance(v, (int, float))]
        if bad:
            raise TypeError(f"init_magnitude values must be numbers, got {bad[0]!r} in {list(init)!r}")
        values = [float(v) for v in init]
        if len(values) != q:
            raise ValueError(f"init_magnitude has {len(values)} values for {q} transforms")
    else:
        raise TypeError(f"init_magnitude must be a float or a sequence of floats, got {type(init).__name__}")
    for v in values:
        if not math.isfinite(v) or not 0.0 <= v <= 1.0:
            raise ValueError(f"init_magnitude values must lie in [0, 1], got {v}")
    return values


def _groups_by_padding(transforms) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = {}
    for q, t in enumerate(transforms):
        groups.setdefault(t.padding, []).append(q)
    return groups


class Policy(list):
    """A learned augmentation policy: one list of transform entries per layer.

    Each entry is a dict with ``transform``, ``weight``, ``magnitude`` and
    ``range`` (a :class:`~augnet.transforms.base.Range` in natural units).
    ``str(policy)`` is a readable table.
    """

    def __str__(self) -> str:
        lines = []
        for i, layer in enumerate(self):
            lines.append(f"layer {i}:")
            best = max(range(len(layer)), key=lambda q: layer[q]["weight"]) if layer else -1
            for q, e in enumerate(layer):
                mark = " <" if q == best else ""
                lines.append(
                    f"  {e['transform']:<16} weight {e['weight']:.3f}  magnitude {e['magnitude']:.3f}"
                    f"  range {e['range']}{mark}"
                )
        return "\n".join(lines)

    def to_json(self) -> list[list[dict]]:
        """A JSON-serialisable copy (ranges as ``[low, high, unit]``)."""
        return [[{**e, "range": list(e["range"])} for e in layer] for layer in self]


class AugmentationModule(nn.Module):
    """Augmentation layers applied in sequence.

    Only the first layer reads the input and makes the C copies (through tap
    source indices, without repeating the input); later layers transform the
    ``B * C`` rows one by one.

    Args:
        layers: the augmentation layers, applied in order.

    Shape:
        - input: :math:`(B, ...)`
        - output: :math:`(B \\cdot C, ...)`, copy-major.
    """

    def __init__(self, layers: Sequence[AugmentationLayer] | AugmentationLayer) -> None:
        super().__init__()
        if isinstance(layers, AugmentationLayer):
            layers = [layers]
        if not isinstance(layers, Sequence | nn.ModuleList):
            raise TypeError(f"layers must be a sequence of AugmentationLayer, got {type(layers).__name__}")
        layers = list(layers)
        if not layers:
            raise ValueError("layers must not be empty")
        for layer in layers:
            if not isinstance(layer, AugmentationLayer):
                raise TypeError(f"every layer must be an AugmentationLayer, got {type(layer).__name__}")
        self.layers = nn.ModuleList(layers)

    def forward(self, x: Tensor, copies: int = 1, generator: torch.Generator | None = None) -> Tensor:
        """Return ``copies`` augmented copies of each sample, copy-major."""
        check_copies(copies)
        x = self.layers[0](x, copies=copies, generator=generator)
        for layer in self.layers[1:]:
            x = layer(x, generator=generator)
        return x

    def policy(self, size: tuple[int, ...] | None = None) -> Policy:
        """The learned policy of every layer (see :class:`Policy`)."""
        return Policy(layer.policy(size) for layer in self.layers)
