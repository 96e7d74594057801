"""Augmentation layers: learnable softmax mixtures of differentiable transforms.

Axis legend: B samples, C copies, N = B * C output rows (copy-major: row
``c * B + b`` is copy ``c`` of sample ``b``), Q transforms, K taps.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn

from augnet import _layer_state
from augnet._calibration import change_curves
from augnet._checks import loading_or_kept, number
from augnet._layer_checks import check_finite_cpu as _check_finite_cpu
from augnet._layer_checks import check_generator as check_generator
from augnet._layer_checks import check_temperature
from augnet._model_checks import normal_tensor
from augnet.magnitudes import calibrated_change, initial_magnitudes, invert_change, inward_clamp, widened
from augnet.ops import dispatch
from augnet.ops.dispatch import tap_mix
from augnet.ops.precision import full_precision
from augnet.ops.taps import Taps, concat_taps, select_taps
from augnet.policy import Policy, check_size, rebuild_layers, register_layer_builder, transform_classes
from augnet.transforms.base import Transform, check_copies, draw, kink_gate, stratify, stratifying, wants_kink_gradient

# Policy and transform_classes live in augnet.policy; imported here for the names users already import from here.
__all__ = ["AugmentationLayer", "AugmentationModule", "Policy", "transform_classes"]

EVAL_MODES = TRAIN_MODES = ("sample", "mix")


class AugmentationLayer(nn.Module):
    r"""A softmax-weighted mixture of transforms with learnable magnitudes.

    .. math::
        \mathrm{AugLayer}(x) = \sum_q w_q \, T_q(x; \mu_q), \qquad
        w = \mathrm{softmax}(\mathrm{logits} / \mathrm{temperature})

    With ``train_mode="mix"`` (the AugNet paper's training) each training row is that blend. With
    ``train_mode="sample"`` (augnet's default) each training row draws one transform from Categorical(w), per sample
    and per copy, and is that transform's output; the weights get the blend's gradient (straight-through), the
    magnitude of a transform the gradient of the rows that drew it. A blend lets a transform run far past the range
    the data admit while its weight stays low (the other transforms' near-identity outputs carry the input through);
    a sampled row shows the transform at full strength, so a magnitude settles where the data stop admitting it,
    whatever its weight. In evaluation with ``eval_mode="sample"`` (the default) each row draws one transform in the
    same way, so averaged predictions average over real transformations; ``eval_mode="mix"`` blends.

    When every transform has a tap form (all image transforms of :mod:`augnet.transforms.image`) the layer runs as
    one ``tap_mix`` call per padding mode, producing all copies straight from ``x``. Otherwise each transform is
    applied to the copies and the results are summed.

    Args:
        transforms: the Q candidate transforms.
        init_magnitude: initial magnitude(s) in [0, 1], one float or Q floats (default 0.5).
        temperature: softmax temperature of the weights (> 0, default 1.0). Every number here may also be given
            as a 0-d tensor or NumPy array (and ``init_magnitude`` as a (Q,) one): the value it holds is kept.
        eval_mode: ``"sample"`` or ``"mix"``, see above.
        backend: ``tap_mix`` backend for tap layers (``"auto"`` by default).
        train_mode: ``"sample"`` or ``"mix"``, see above.

    Shape:
        - input: :math:`(B, ...)`, e.g. :math:`(B, Ch, H, W)` for images.
        - output: :math:`(B \cdot C, ...)` with ``C = copies`` (1 if not given).

    Raises:
        TypeError, ValueError: no transforms, items that are not transforms, mixed input ranks, or another bad argument.

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
        train_mode: str = "sample",
    ) -> None:
        super().__init__()
        if isinstance(transforms, Transform) or not isinstance(transforms, Sequence | nn.ModuleList):
            raise TypeError(f"transforms must be a sequence of Transform, got {type(transforms).__name__}")
        transforms = list(transforms)
        if not transforms:
            raise ValueError("transforms must not be empty: an augmentation layer needs at least one transform")
        for t in transforms:
            if not isinstance(t, Transform):
                got = f"the class {t.__name__}; pass {t.__name__}()" if isinstance(t, type) else type(t).__name__
                raise TypeError(f"every transform must be an augnet Transform, got {got}")
        ranks: dict[int, list[str]] = {}
        for t in transforms:
            ranks.setdefault(t.input_ndim, []).append(type(t).__name__)
        if len(ranks) > 1:  # which transform takes which rank: the ones to move to another layer
            said = "; ".join(f"{r}-D: {', '.join(names)}" for r, names in sorted(ranks.items()))
            raise ValueError(f"transforms expect inputs of different ranks ({said}); put them in separate layers")
        q = len(transforms)
        init = initial_magnitudes(init_magnitude, q)
        temperature = check_temperature(temperature)  # a 0-d tensor or array: the number it holds
        if eval_mode not in EVAL_MODES:
            raise ValueError(f"eval_mode must be one of {EVAL_MODES}, got {eval_mode!r}")
        if train_mode not in TRAIN_MODES:
            raise ValueError(f"train_mode must be one of {TRAIN_MODES}, got {train_mode!r}")
        dispatch.check_backend(backend)

        self.transforms = nn.ModuleList(transforms)
        self.weight_logits = nn.Parameter(torch.zeros(q))
        self.raw_magnitudes = nn.Parameter(torch.tensor(init, dtype=torch.float32))
        self.temperature = temperature
        self.eval_mode = eval_mode
        self.train_mode = train_mode
        self.backend = backend
        self.last_size: tuple[int, ...] | None = None  # spatial size last seen, for policy()
        # Magnitude calibration (see calibrate()): (Q, K) expected input change at K evenly spaced
        # magnitudes of each transform, or None (the magnitude is each transform's own).
        self.register_buffer("calibration", None)
        # Each transform's change of the trunk's outputs per unit of magnitude, relative to the others
        # (augnet.effects; measured by AugNet during training): the units the selective regulariser uses.
        self.register_buffer("effect", torch.ones(q))
        self.register_buffer("effect_measured", torch.zeros((), dtype=torch.bool))

    # ---------------------------------------------------------------- state
    @property
    def temperature(self) -> float:
        """The softmax temperature of the weights (> 0); an assignment is checked as the constructor's argument."""
        return self._temperature

    @temperature.setter
    def temperature(self, value) -> None:
        self._temperature = check_temperature(value)

    def __setstate__(self, state: dict) -> None:
        if "temperature" in state:  # a layer pickled before the temperature was checked on assignment
            state["_temperature"] = state.pop("temperature")
        super().__setstate__(state)

    @property
    def weights(self) -> Tensor:
        """(Q,) mixture weights, ``softmax(weight_logits / temperature)``; sums to 1 (differentiable, read-only)."""
        return torch.softmax(widened(self.weight_logits) / self.temperature, 0)

    @property
    def magnitudes(self) -> Tensor:
        """(Q,) magnitudes in [0, 1], clamped so the gradient stays alive at the bounds.

        Without calibration (the default) ``magnitudes[q]`` is transform ``q``'s own magnitude (1 is its full
        range). After :meth:`calibrate`, equal magnitudes mean equal expected input change: ``magnitudes[q]`` lies
        in ``[0, cap_q]`` (``cap_q``: the largest change transform ``q`` can make, relative to the largest of any
        candidate) and the transform runs at :attr:`transform_magnitudes`. This is what the regulariser sees
        (differentiable, read-only).
        """
        mu = inward_clamp(widened(self.raw_magnitudes))
        return mu if self.calibration is None else self.magnitude_caps.to(mu) * mu

    @property
    def magnitude_caps(self) -> Tensor:
        """(Q,) the largest magnitude of each transform; 1 without calibration, ``cap_q`` with it."""
        if self.calibration is None:
            return torch.ones_like(widened(self.raw_magnitudes.detach()))
        end = widened(self.calibration[:, -1])
        return end / end.max()

    @property
    def transform_magnitudes(self) -> Tensor:
        """(Q,) the magnitude each transform runs at (its own units, [0, 1]); :attr:`magnitudes` without calibration.

        With calibration, transform ``q`` runs at the magnitude ``m`` whose
        measured expected input change is ``magnitudes[q]`` times the largest
        change of any candidate (piecewise-linear inverse of the measured curve,
        differentiable).
        """
        return self.transform_magnitude_of(self.magnitudes)

    def transform_magnitude_of(self, mu: Tensor) -> Tensor:
        """(Q,) the transforms' own magnitudes for layer magnitudes ``mu`` (Q,) (the same without calibration)."""
        if self.calibration is None:
            return mu
        calibration = widened(self.calibration).to(mu)
        return invert_change(calibration, calibrated_change(mu, calibration))  # at a cap: the curve's end

    @torch.no_grad()
    def calibrate(
        self,
        x: Tensor,
        points: int = 17,
        generator: torch.Generator | None = None,
        features: Callable[[Tensor], Tensor] | None = None,
    ) -> Tensor:
        """Measure each transform's expected input change and calibrate the magnitudes to it.

        For each transform ``q`` and magnitude ``m`` on an even grid of ``points`` values in [0, 1], the expected
        input change is the RMS change relative to the inputs' RMS, ``sqrt(E ||T_q(x; m) - x||^2 / E ||x||^2)`` over
        the rows of ``x`` and one draw of the transform's parameters each (made monotone in ``m``). With
        ``features``, the change is measured after that map instead,
        ``sqrt(E ||f(T_q(x; m)) - f(x)||^2 / E ||f(x)||^2)`` (e.g. an untrained trunk: a change the architecture is
        already invariant to then counts for little). After calibration the layer's magnitudes are on one scale for
        every transform: magnitude ``mu`` makes ``mu`` times the largest change any candidate can make, and a
        transform that cannot make that much saturates at its cap (its magnitude cannot exceed it). The selective
        regulariser then compares the transforms by how much they may change the input without hurting the task, not
        by the ranges their constructors were given. The current magnitude values are kept (raised to at most each
        cap), and the curves are saved in the state dict.

        Args:
            x: a batch of training inputs, :math:`(B, ...)` with ``B >= 1``.
            points: grid size (an int >= 2, or a 0-d integer tensor; default 17).
            generator: draws the transforms' parameters (default: seeded with 0).
            features: a map of the inputs, e.g. a trunk (a module, or its bound method, runs in
                evaluation mode, then is restored: measuring does not change it; it reads a copy of ``x``).

        Returns:
            The (Q, points) curves in the layer's dtype, also in ``calibration``. Bad input (see
            ``change_curves``) raises before anything changes.
        """
        points = number("points", points)  # a 0-d integer tensor or array: the int it holds
        dtype = self.effect.dtype  # the layer's (a float buffer's): as .to(dtype) and a load into the layer give
        curves = change_curves(self.transforms, x, points, generator, features, dtype)  # checked; nothing changed
        before = self.magnitudes.detach().clone()
        self.calibration = normal_tensor(curves.to(self.raw_magnitudes.device))  # inference mode: a copy
        caps = self.magnitude_caps
        self.raw_magnitudes.copy_((before / caps).clamp(0.0, 1.0))
        return self.calibration

    def get_extra_state(self) -> Tensor:
        """An int64 tensor: the softmax temperature, the last input size and a checksum of the transforms' names.

        Saved in the state (a callback may have annealed the temperature; the size gives :meth:`policy` its
        ranges in pixels): a round trip gives the same model, a cast of the state dict to another float dtype
        leaves it exact, and a state of other transforms is refused (see ``augnet._layer_state``).
        """
        return _layer_state.encode(self.temperature, self.last_size, self.transforms)

    def set_extra_state(self, state) -> None:
        self.temperature, self.last_size = _layer_state.decode(state, self.temperature, self.transforms)

    def _load_from_state_dict(
        self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
    ):
        # Keys a partial state (strict=False) lacks leave the layer as it is; the layer's own older state loads with
        # its old meaning (this size and temperature, effects unmeasured, no calibration); a failed load changes none.
        key, ours = prefix + "calibration", any(prefix + n in state_dict for n in ("weight_logits", "raw_magnitudes"))
        if ours:
            state_dict.setdefault(prefix + "_extra_state", self.get_extra_state())
            logits = state_dict.get(prefix + "weight_logits")  # another count of transforms: torch's size error says it
            if getattr(logits, "shape", self.weight_logits.shape) != self.weight_logits.shape:
                state_dict[prefix + "_extra_state"] = _layer_state.without_digest(state_dict[prefix + "_extra_state"])
            state_dict.setdefault(prefix + "effect", torch.ones_like(self.effect))
            state_dict.setdefault(prefix + "effect_measured", torch.zeros_like(self.effect_measured))
        with loading_or_kept(self, strict, missing_keys, unexpected_keys, error_msgs):
            given = state_dict.get(key)  # a calibration of any number of points: its shape is the state's
            if isinstance(given, Tensor) and given.dim() == 2 and len(given) == len(self.transforms):
                if self.calibration is None or self.calibration.shape != given.shape:
                    # In the layer's dtype, as torch loads every other tensor (its floating buffers': a float64
                    # state into a float32 layer gives float32), whether or not the layer was calibrated before.
                    dtype = (self.effect if self.calibration is None else self.calibration).dtype
                    empty = torch.empty(given.shape, dtype=dtype, device=self.raw_magnitudes.device)
                    self.calibration = normal_tensor(empty)  # made in inference mode: a normal one
            elif key not in state_dict and ours:
                self.calibration = None
            args = (local_metadata, strict, missing_keys, unexpected_keys, error_msgs)
            super()._load_from_state_dict(state_dict, prefix, *args)

    def clear_calibration(self) -> None:
        """Return to each transform's own magnitude (keeping the transforms' current magnitudes)."""
        with torch.no_grad():
            current = self.transform_magnitudes.detach().clone()
            self.calibration = None
            self.raw_magnitudes.copy_(current)

    @property
    def uses_taps(self) -> bool:
        """Whether the layer runs through ``tap_mix`` (every transform has taps)."""
        return all(t.has_taps() for t in self.transforms)

    def policy(self, size: tuple[int, ...] | None = None) -> list[dict]:
        """Per transform: name, constructor arguments, weight, magnitude and range in natural units.

        Each entry has ``transform`` (the class name), ``args`` (its
        constructor arguments, :meth:`~augnet.transforms.Transform.config`),
        ``weight``, ``magnitude`` (the layer's magnitude, which the regulariser
        sees), ``transform_magnitude`` (the transform's own magnitude: the same
        unless the layer is calibrated) and ``range`` (a
        :class:`~augnet.transforms.base.Range` at that magnitude).

        Args:
            size: input spatial size for pixel units (positive ints); defaults to the last
                input the layer saw.
        """
        size = check_size(size) if size is not None else self.last_size
        with torch.no_grad():
            w, mu, m = self.weights.tolist(), self.magnitudes.tolist(), self.transform_magnitudes.tolist()
        return [
            {
                "transform": type(t).__name__,
                "args": t.config(),
                "weight": wq,
                "magnitude": mq,
                "transform_magnitude": mt,
                "range": t.natural_range(mt, size),
            }
            for t, wq, mq, mt in zip(self.transforms, w, mu, m, strict=True)
        ]

    def settings(self, size: tuple[int, ...] | None = None) -> dict:
        """The layer's settings and exact state, for a policy file (see :meth:`~augnet.policy.Policy.to_json`).

        ``last_size`` is the input size the layer last saw (restored by ``from_policy``);
        ``range_size`` the size the ranges of :meth:`policy` are at (``size``, default ``last_size``).
        """
        last = None if self.last_size is None else [int(s) for s in self.last_size]
        dtype = str(self.raw_magnitudes.dtype).removeprefix("torch.")  # float64's alone: float32 holds the others
        return {
            "temperature": self.temperature,
            "eval_mode": self.eval_mode,
            "train_mode": self.train_mode,
            "backend": self.backend,
            "weight_logits": self.weight_logits.detach().cpu().tolist(),
            "raw_magnitudes": self.raw_magnitudes.detach().cpu().tolist(),
            "calibration": None if self.calibration is None else self.calibration.cpu().tolist(),
            "effect": self.effect.cpu().tolist() if bool(self.effect_measured) else None,
            "last_size": last,
            "range_size": last if size is None else [int(s) for s in size],
            **({"dtype": dtype} if dtype == "float64" else {}),
        }

    def extra_repr(self) -> str:
        if self.weight_logits.is_meta:  # a meta tensor has no values: the transforms alone
            mix = ", ".join(f"{type(t).__name__}(w=?, mu=?)" for t in self.transforms)
        else:
            with torch.no_grad():
                w, mu = self.weights.tolist(), self.magnitudes.tolist()
            mix = ", ".join(
                f"{type(t).__name__}(w={wq:.3f}, mu={mq:.3f})" for t, wq, mq in zip(self.transforms, w, mu, strict=True)
            )
        calibrated = ", calibrated" if self.calibration is not None else ""
        modes = f"train_mode={self.train_mode!r}, eval_mode={self.eval_mode!r}"
        return f"temperature={self.temperature:g}, {modes}{calibrated}, policy=[{mix}]"

    # -------------------------------------------------------------- forward
    def forward(self, x: Tensor, copies: int | None = None, generator: torch.Generator | None = None) -> Tensor:
        """Augment ``x``; with ``copies=C``, return C augmented copies of each sample.

        Args:
            x: input batch :math:`(B, ...)`.
            copies: number of copies to make (copy-major). ``None`` keeps the
                batch size, each row augmented once.
            generator: source of randomness (on ``x``'s device).

        Returns:
            The augmented rows :math:`(B \\cdot C, ...)`, copy-major, in ``x``'s dtype.

        Raises:
            TypeError, ValueError: an input a transform cannot take, bad ``copies`` or ``generator``, or
                (on CPU) magnitudes, weight logits or weights that are not finite.
        """
        self.check_input(x)
        check_generator(generator)
        c = 1 if copies is None else copies
        c = check_copies(c)
        _check_finite_cpu("AugmentationLayer magnitudes", self.raw_magnitudes)
        _check_finite_cpu("AugmentationLayer weight logits", self.weight_logits)
        if dispatch.host_readable(self.weight_logits) and not bool(torch.isfinite(self.weights).all()):
            raise ValueError(
                f"AugmentationLayer weights softmax(logits / temperature) are not finite (temperature "
                f"{self.temperature:g}, logits {self.weight_logits.detach().tolist()}): raise the temperature"
            )
        # float16 / bfloat16 are augmented in float32 (coordinates, spectra, blends); the result is rounded.
        with full_precision(x) as dtype:
            out = self._augment(x.to(dtype), c, generator).to(x.dtype)
        if x.dim() > 2:  # remembered once the call has succeeded: a refused call changes nothing
            self.last_size = tuple(x.shape[2:])
        return out

    def check_input(self, x: Tensor) -> None:
        """Raise the ValueError or TypeError of an input the layer cannot take (every transform's check).

        Checks the type, the dtype (floating point), the rank and the sizes; a call and :meth:`measure_effects
        <augnet.AugNet.measure_effects>` run it before anything changes.
        """
        for t in self.transforms:
            t.check_input(x)

    def _augment(self, x: Tensor, c: int, generator: torch.Generator | None) -> Tensor:
        return self._augment_at(x, c, self.weights, self.transform_magnitudes, generator)

    def _augment_at(self, x: Tensor, c: int, w: Tensor, mu: Tensor, generator: torch.Generator | None) -> Tensor:
        """The copies at weights ``w`` and transform magnitudes ``mu``: (Q,) for every row, or (N, Q) per row."""
        n = x.shape[0] * c
        if n == 0:  # an empty batch gives an empty batch, in the graph of x and of the layer's parameters
            return x[:0].clone() + 0 * (w.sum() + mu.sum()).to(x.dtype)
        mode = self.train_mode if self.training else self.eval_mode
        # scales[..., q] multiplies transform q's output: the weights (Q,) for a blend, or per row (N, Q).
        scales, choice = w, None
        if mode == "sample":
            # One transform per output row from Categorical(w).
            probs = w.detach().to(x.device).expand(n, -1)
            if self.training or not stratifying(n):
                drawn = draw(torch.multinomial, probs, 1, generator=generator).squeeze(1)
            else:  # stratified over the copies (stratified_copies): by the inverse of the weights' cumulative sum
                u = stratify(draw(torch.rand, n, generator=generator, device=x.device, dtype=probs.dtype), generator)
                cdf = probs.cumsum(-1)
                drawn = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None], right=True).squeeze(1)
                drawn = drawn.clamp(max=probs.shape[-1] - 1)
            if self.training:  # the drawn transform's output, with the blend's gradient for the weights
                one_hot = drawn[:, None] == torch.arange(len(self.transforms), device=drawn.device)  # no value read
                scales = one_hot.to(w.dtype) + (w - w.detach()).to(drawn.device)
            else:
                choice = drawn
        if self.uses_taps:
            return self._forward_taps(x, c, n, scales, mu, choice, generator)
        return self._forward_generic(x, c, n, scales, mu, choice, generator)

    def _forward_taps(self, x, c, n, scales, mu, choice, generator) -> Tensor:
        # Warps at a magnitude of exactly 0 sit on the bilinear kink: there they are drawn at KINK_STEP and mixed
        # with one identity tap by a gate (transforms.base.kink_gate), which gives the identity's value and the
        # one-sided derivative into (0, 1]. No branch on the magnitudes' values: the same on every device.
        gates = self._kink_gates(mu) if choice is None else {}
        taps = []
        for q, t in enumerate(self.transforms):
            params = t.sample(x, gates[q][0] if q in gates else mu[..., q], generator, c)
            taps.append(t.taps(params))
        out = None
        for padding, members in _groups_by_padding(self.transforms).items():
            group = [taps[q] for q in members]
            if choice is None:
                per = [scales[..., q] for q in members]  # each transform's mixture scale (a scalar, or (N,) per row)
                group, per = _with_kink_identity(group, per, [gates.get(q) for q in members], x, n)
                src, affine, color, weight = concat_taps(group, x, n, scales=per)
            else:
                src, affine, color, weight = select_taps(group, members, len(taps), choice, x, n)
            y = tap_mix(x, src, affine, color, weight, padding=padding, backend=self.backend)
            out = y if out is None else out + y
        return out

    def _kink_gates(self, mu: Tensor) -> dict[int, tuple[Tensor, Tensor]]:
        """``{q: kink_gate(mu[q])}`` for the warps with a kink at 0, when a derivative in ``mu`` is taken."""
        if not any(t.kink_at_zero for t in self.transforms) or not wants_kink_gradient(mu):
            return {}
        return {q: kink_gate(mu[..., q]) for q, t in enumerate(self.transforms) if t.kink_at_zero}

    def _forward_generic(self, x, c, n, scales, mu, choice, generator) -> Tensor:
        outs = [t(x, mu[..., q], generator=generator, copies=c) for q, t in enumerate(self.transforms)]
        if choice is None:
            out = None
            for q, y in enumerate(outs):
                s = scales[..., q].to(y.dtype)  # a scalar, or (N,): one scale per row
                term = (s if s.dim() == 0 else s.reshape(-1, *[1] * (y.dim() - 1))) * y
                out = term if out is None else out + term
            return out
        stacked = torch.stack(outs)  # (Q, N, ...)
        return stacked[choice, torch.arange(n, device=x.device)]


def _with_kink_identity(group: list[Taps], scales: list, gates: list, x: Tensor, n: int) -> tuple[list[Taps], list]:
    """A padding group's taps and scales, the kinked warps' gates applied and their identity tap added.

    ``scales[i]`` is transform ``i``'s mixture scale (a 0-d tensor or an (N,) one), ``gates[i]`` its
    ``kink_gate`` or ``None``. A warp's taps are scaled by ``scale * gate``; one identity tap carries
    ``sum of scale * (1 - gate)`` over the group's warps (an exact 0 unless a magnitude is exactly 0).
    """
    if all(g is None for g in gates):
        return group, scales
    scaled = [s if g is None else s * g[1] for s, g in zip(scales, gates, strict=True)]
    identity = sum(s * (1.0 - g[1]) for s, g in zip(scales, gates, strict=True) if g is not None)
    return [*group, Taps(weight=torch.ones(n, 1, dtype=x.dtype, device=x.device))], [*scaled, identity]


def _groups_by_padding(transforms) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = {}
    for q, t in enumerate(transforms):
        groups.setdefault(t.padding, []).append(q)
    return groups


class AugmentationModule(nn.Module):
    """Augmentation layers applied in sequence.

    Only the first layer reads the input and makes the C copies (through tap
    source indices, without repeating the input); later layers transform the
    ``B * C`` rows one by one.

    Args:
        layers: the augmentation layers, applied in order: one layer, or a sequence of them (a list, a tuple,
            an ``nn.ModuleList`` or an ``nn.Sequential``).

    Shape:
        - input: :math:`(B, ...)`
        - output: :math:`(B \\cdot C, ...)`, copy-major.
    """

    def __init__(self, layers: Sequence[AugmentationLayer] | AugmentationLayer) -> None:
        super().__init__()
        if isinstance(layers, AugmentationLayer):
            layers = [layers]
        if not isinstance(layers, Sequence | nn.ModuleList | nn.Sequential):  # Sequential: in order, as AugNet takes
            raise TypeError(f"layers must be a sequence of AugmentationLayer, got {type(layers).__name__}")
        layers = list(layers)
        if not layers:
            raise ValueError("layers must not be empty")
        for layer in layers:
            if not isinstance(layer, AugmentationLayer):
                raise TypeError(f"every layer must be an AugmentationLayer, got {type(layer).__name__}")
        self.layers = nn.ModuleList(layers)

    def forward(self, x: Tensor, copies: int | None = 1, generator: torch.Generator | None = None) -> Tensor:
        """Return ``copies`` augmented copies of each sample, copy-major: :math:`(B \\cdot C, ...)`.

        Args:
            x: input batch :math:`(B, ...)`, checked by the first layer.
            copies: the copies C (an int >= 1, or a 0-d integer tensor or array; default 1). ``None`` is one
                copy, as :class:`AugmentationLayer` takes it.
            generator: source of randomness (on ``x``'s device; default ``None``).
        """
        copies = check_copies(1 if copies is None else copies)
        x = self.layers[0](x, copies=copies, generator=generator)
        for layer in self.layers[1:]:
            x = layer(x, generator=generator)
        return x

    def policy(self, size: tuple[int, ...] | None = None) -> Policy:
        """The learned policy of every layer, with their settings (see :class:`Policy`).

        ``size`` is a spatial size (a per-instance layer's per-sample policy of a batch is that layer's
        ``policy(x)``; a data set's, :func:`augnet.instance_policy.policy_summary`).
        """
        if isinstance(size, Tensor) and (size.dim() != 1 or size.is_floating_point() or size.dtype == torch.bool):
            raise TypeError(
                "policy takes a spatial size, got a tensor of images; a per-instance layer's policy of a batch is "
                "layer.policy(x) (model.augment.layers[i]), a data set's augnet.instance_policy.policy_summary"
            )
        return Policy([layer.policy(size) for layer in self.layers], [layer.settings(size) for layer in self.layers])

    @classmethod
    def from_policy(cls, policy: Policy | dict | str | os.PathLike) -> AugmentationModule:
        """Rebuild the module a policy was taken from: the same transforms, weights, magnitudes and settings.

        Args:
            policy: a :class:`Policy` from :meth:`policy`, its :meth:`~augnet.policy.Policy.to_json`
                dict, or the path (a str or any path-like object) of a JSON file holding that dict (or
                holding it under the key ``"policy"``, as ``augnet demo``'s ``demo.json`` does).

        Returns:
            A new module whose ``policy()`` equals the given one and whose
            forward pass equals the original's for the same generator state.

        Examples:
            >>> from augnet.transforms import image as T
            >>> module = AugmentationModule([AugmentationLayer([T.Rotate(max_angle=1.0), T.ShearX()])])
            >>> again = AugmentationModule.from_policy(module.policy().to_json())
            >>> again.policy().to_json() == module.policy().to_json()
            True
        """
        return cls(rebuild_layers(policy))


def _layer_from_settings(transforms: list[Transform], settings: dict) -> AugmentationLayer:
    """The layer of a policy file's checked settings (see :func:`augnet.policy.check_policy`)."""
    layer = AugmentationLayer(
        transforms,
        temperature=settings["temperature"],
        eval_mode=settings["eval_mode"],
        backend=settings.get("backend", "auto"),
        # A file written before train_mode existed comes from a layer trained with the blend.
        train_mode=settings.get("train_mode", "mix"),
    )
    with torch.no_grad():
        if settings.get("calibration") is not None:
            layer.calibration = torch.tensor(settings["calibration"], dtype=torch.float32)
        layer.weight_logits.copy_(torch.tensor(settings["weight_logits"], dtype=layer.weight_logits.dtype))
        layer.raw_magnitudes.copy_(torch.tensor(settings["raw_magnitudes"], dtype=layer.raw_magnitudes.dtype))
        if settings.get("effect") is not None:
            layer.effect.copy_(torch.tensor(settings["effect"], dtype=layer.effect.dtype))
            layer.effect_measured.fill_(True)
    if settings.get("last_size") is not None:  # policy() then gives its ranges at the same size as before
        layer.last_size = tuple(int(s) for s in settings["last_size"])
    return layer


register_layer_builder(_layer_from_settings)
