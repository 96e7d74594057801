"""Per-instance augmentation: a layer whose weights and magnitudes depend on the input.

A :class:`ConditionedAugmentationLayer` is an :class:`~augnet.AugmentationLayer`
whose policy is a function of the data point. A small network, the
*conditioner*, reads the clean input and predicts, per sample, offsets of the
layer's weight logits and of its raw magnitudes:

.. math::
    o_b = g(x_b) \\in \\mathbb{R}^{2Q}, \\quad
    w_b = \\mathrm{softmax}((\\ell + o_{b,:Q}) / \\tau), \\quad
    \\mu_b = \\mathrm{clamp}_{[0,1]}(r + o_{b,Q:})

with :math:`\\ell` and :math:`r` the layer's own (global) weight logits and raw
magnitudes. Each output row (copy ``c`` of sample ``b``, row ``c * B + b``)
runs at its sample's weights and magnitudes: one ``tap_mix`` call for tap
layers (the fused op takes per-row tap weights and warps), the generic path
otherwise. A conditioner that outputs 0 is the global layer; the default one
starts there (its last layer is zero-initialised).

Axis legend: B samples, C copies, N = B * C rows (copy-major), Q transforms.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from augnet._calibration import evaluating
from augnet._checks import NotANumberError, is_int, is_real, number
from augnet._instance_checks import check_features, check_images, check_module
from augnet._stack import caller_stacklevel
from augnet.layers import AugmentationLayer
from augnet.magnitudes import inward_clamp, widened
from augnet.ops.dispatch import host_readable
from augnet.policy import check_size
from augnet.transforms.base import Transform

__all__ = [
    "ConditionedAugmentationLayer",
    "RunningStandardize",
    "TinyConditioner",
    "conditioned_layers",
    "conditioner_entropy",
]


class RunningStandardize(nn.Module):
    """Standardise features per feature, ``(h - mean) / sqrt(var + eps)``: by the batch in training steps, else running.

    A training step (training mode, gradients enabled, more than one sample)
    standardises by its batch's mean and (biased) variance, with the gradient
    flowing through them, as batch normalisation without its affine part
    does, and updates the running mean and variance: an exponential average
    with weight ``max(momentum, 1 / steps)``, so the first batch sets them.
    Every other call (evaluation, a batch of one, reading a policy under
    ``torch.no_grad``) uses the running values, so there each sample's output
    depends on that sample alone, and the statistics do not move. A batch
    whose statistics are not finite (a NaN or infinite input) leaves the
    running values and the step count as they were (no value is read back:
    the same on an accelerator), so one bad batch cannot spoil evaluation.

    What evaluation uses. With the default ``momentum=1`` the running values
    are the statistics of the latest training batch alone, not an average:
    evaluation standardises exactly as the head was last trained. The
    features move while the conditioner trains, and an average over older
    batches lags behind them (with momentum 0.05 the evaluation policy of the
    per-instance experiment drifted ~55 degrees from the training one). The
    price: the statistics are one batch's estimate (noisier for small
    batches), and they change with every training step, so a model saved
    after step ``k`` evaluates with step ``k``'s batch. Pass ``momentum < 1``
    for an exponential average over batches (``0.1`` as batch normalisation)
    when the features have settled, e.g. to fine-tune.

    Why a conditioner needs it: its head is trained by the sum over the batch
    of per-sample gradients times the features. Raw pooled ReLU features share
    a large common part, so that sum mostly moves every sample's output
    together (one offset for all inputs, which is what a conditioner on raw
    features learns). Centred, unit-scale features leave the common part to the head's
    bias and let its weights learn the differences between inputs; and with
    the gradient through the batch statistics, a push shared by every sample
    (the regulariser's) cannot drive the features themselves (it is projected
    out), where through fixed statistics it shifted them until their ReLUs
    died and every input got the same policy. ``eps`` is 1e-2, not 1e-5:
    a nearly constant feature is not blown up into noise.

    Args:
        features: the number of features (``F``), an int >= 1.
        momentum: weight of a new batch in the running values once warmed up, in (0, 1].
        eps: added to the variance, positive and finite. (Each number may be a 0-d tensor or NumPy array, an
            integer one for ``features``: the value it holds is kept.)

    Raises:
        TypeError, ValueError: an argument of the wrong type or out of range, naming it; in a call, features that
            are not a floating-point :math:`(B, F)` tensor (a :math:`(F,)` vector was read as a batch of scalars).

    Shape:
        - input: :math:`(B, F)`
        - output: :math:`(B, F)`
    """

    def __init__(self, features: int, momentum: float = 1.0, eps: float = 1e-2) -> None:
        super().__init__()
        features, momentum, eps = number("features", features), number("momentum", momentum), number("eps", eps)
        if not is_int(features):
            raise TypeError(f"RunningStandardize: features must be an int, got {features!r}")
        if features < 1:
            raise ValueError(f"RunningStandardize: features must be >= 1, got {features!r}")
        features = int(features)
        for name, value in (("momentum", momentum), ("eps", eps)):
            if not is_real(value):
                raise TypeError(f"RunningStandardize: {name} must be a number, got {value!r}")
        if not 0.0 < momentum <= 1.0:  # NaN fails too
            raise ValueError(f"RunningStandardize: momentum must be in (0, 1], got {momentum!r}")
        if not 0.0 < eps < math.inf:
            raise ValueError(f"RunningStandardize: eps must be positive and finite, got {eps!r}")
        self.momentum, self.eps = float(momentum), float(eps)
        self.register_buffer("running_mean", torch.zeros(features))
        self.register_buffer("running_var", torch.ones(features))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    def forward(self, h: Tensor) -> Tensor:
        check_features(h, self.running_mean.numel())
        if not (self.training and torch.is_grad_enabled() and h.shape[0] > 1):
            return (h - self.running_mean.to(h.dtype)) * torch.rsqrt(self.running_var.to(h.dtype) + self.eps)
        mean, var = h.mean(0), h.var(0, unbiased=False)
        with torch.no_grad():
            # Branch-free: a batch whose statistics are not finite moves nothing (no value read back).
            mean_, var_ = mean.detach().to(self.running_mean.dtype), var.detach().to(self.running_var.dtype)
            ok = torch.isfinite(mean_).all() & torch.isfinite(var_).all()
            self.steps += ok.to(self.steps.dtype)
            rate = torch.clamp(1.0 / self.steps.clamp_min(1).to(mean_.dtype), min=self.momentum) * ok
            self.running_mean += rate * (torch.where(ok, mean_, self.running_mean) - self.running_mean)
            self.running_var += rate * (torch.where(ok, var_, self.running_var) - self.running_var)
        return (h - mean) * torch.rsqrt(var + self.eps)

    def extra_repr(self) -> str:
        return f"{self.running_mean.numel()}, momentum={self.momentum:g}"


class TinyConditioner(nn.Module):
    """The default conditioner: a tiny CNN on the layer's input, pooled, standardised, then a linear head.

    Two convolutions of ``hidden`` channels (2-D for images, 1-D for
    signals) with ReLU, an average over space or time, a
    :class:`RunningStandardize` of the pooled features, and a linear map to
    ``outputs`` values whose weights and bias start at 0 (so the layer starts
    as the global layer; the features are standardised so that the head,
    once it moves, separates inputs rather than shifting them all alike).

    What it can see. With the default ``kernel_size=3`` (strided by 2) the
    features see local shapes, so the policy can depend on an input's pose:
    a rotation layer learns, for a sprite already turned by ``a`` degrees,
    the range that keeps it on its side of a label boundary (``90 - |a|``
    for a boundary 90 degrees away), one range per pose. With
    ``kernel_size=1`` the convolutions act on each pixel (or time step)
    alone, so the pooled features, and the policy, are the same for every
    rearrangement of the pixels: exactly for flips, 90-degree turns and
    circular shifts, up to interpolation and the border for other rotations
    and shifts. Such a conditioner gives every pose of an input one policy,
    which is what a per-class or per-object range means (the per-instance
    experiment: the instance guide); it tells inputs apart by their colours
    and intensities only.

    Scale. The standardisation's ``eps`` is absolute, so inputs on a tiny scale
    (EEG in volts, about 1e-5; very quiet audio) give features whose spread
    over the batch is far below it: standardised, they hardly differ, and the
    head gives every input about the global policy. A training step on the
    CPU warns once (``UserWarning``) when the features of differing inputs of
    RMS below 0.1 vary by less than ``1e-4 * eps``; scale such data to about
    unit size first (EEG in microvolts).

    Args:
        channels: input channels (``Ch``).
        outputs: output size (``2 Q``).
        hidden: channels of the hidden convolutions (its size).
        ndim: input rank, 4 (images) or 3 (signals).
        kernel_size: the convolutions' size: 3 (default; stride 2) or 1 (pointwise, stride 1: a policy
            invariant to where things are in the input).
        momentum: the :class:`RunningStandardize`'s (default 1: the latest training batch's statistics).

    Each count and size may also be a 0-d integer tensor or NumPy array (``momentum`` a 0-d tensor or array).

    Raises:
        TypeError: a count, ``ndim`` or ``kernel_size`` of the wrong type (a str, a bool, a float count), naming it
            (a ValueError too, as before).
        ValueError: one out of range, naming it.
        TypeError, ValueError: in a call, an input that is not a floating-point batch of rank ``ndim`` with
            ``channels`` channels (an unbatched image was read as a batch, one row per hidden channel).

    Shape:
        - input: :math:`(B, Ch, H, W)` or :math:`(B, Ch, T)`
        - output: :math:`(B, outputs)`

    Examples:
        >>> g = TinyConditioner(3, 4)
        >>> g(torch.rand(5, 3, 16, 16))
        tensor([[0., 0., 0., 0.],
                [0., 0., 0., 0.],
                [0., 0., 0., 0.],
                [0., 0., 0., 0.],
                [0., 0., 0., 0.]], grad_fn=<AddmmBackward0>)
    """

    def __init__(
        self, channels: int, outputs: int, hidden: int = 16, ndim: int = 4, kernel_size: int = 3, momentum: float = 1.0
    ) -> None:
        super().__init__()
        channels, outputs, hidden, ndim, kernel_size = (  # 0-d integer tensors or arrays: the ints they hold
            number(name, value) for name, value in (("channels", channels), ("outputs", outputs), ("hidden", hidden),
                                                    ("ndim", ndim), ("kernel_size", kernel_size)))  # fmt: skip
        # A value of the wrong type (a str, a bool, a float count) is a TypeError, and a ValueError as before.
        for name, value in (("channels", channels), ("outputs", outputs), ("hidden", hidden)):
            if not is_int(value) or value < 1:
                error = ValueError if is_int(value) else NotANumberError
                raise error(f"TinyConditioner: {name} must be an int >= 1, got {value!r}")
        if not is_real(ndim) or ndim not in (3, 4):
            error = ValueError if is_real(ndim) else NotANumberError
            raise error(f"TinyConditioner: ndim must be 3 (signals) or 4 (images), got {ndim!r}")
        if not is_int(kernel_size) or kernel_size not in (1, 3):
            error = ValueError if is_int(kernel_size) else NotANumberError
            raise error(f"TinyConditioner: kernel_size must be 3 or 1 (pointwise), got {kernel_size!r}")
        channels, outputs, hidden, ndim, kernel_size = (int(v) for v in (channels, outputs, hidden, ndim, kernel_size))
        conv = nn.Conv2d if ndim == 4 else nn.Conv1d
        stride = 1 if kernel_size == 1 else 2
        self.channels, self.ndim = channels, ndim  # what the layer checks its inputs against
        self.features = nn.Sequential(
            conv(channels, hidden, kernel_size, stride=stride, padding=kernel_size // 2),
            nn.ReLU(),
            conv(hidden, hidden, kernel_size, stride=stride, padding=kernel_size // 2),
            nn.ReLU(),
        )
        self.norm = RunningStandardize(hidden, momentum=momentum)
        self.head = nn.Linear(hidden, outputs)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    # Set once the conditioner has warned that its features cannot tell a batch's inputs apart (it warns once).
    _warned_blind = False

    def forward(self, x: Tensor) -> Tensor:
        check_images(x, self.channels, self.ndim)
        h = self.features(x).flatten(2).mean(2)
        if self.training and torch.is_grad_enabled() and len(h) > 1 and not self._warned_blind and host_readable(h):
            self._check_spread(x, h)
        return self.head(self.norm(h))

    def _check_spread(self, x: Tensor, h: Tensor) -> None:
        """Warn (once) when the pooled features ``h`` (B, hidden) of differing inputs ``x`` vary over the batch, but
        by a variance far below the standardisation's ``eps``: standardised, they stay under 1 % of unit scale, and
        the head cannot give the inputs different policies (inputs on a tiny scale, EEG in volts, do it)."""
        largest = float(h.detach().var(0, unbiased=False).max())
        if not 0 < largest < 1e-4 * self.norm.eps or not bool((x.detach() != x.detach()[:1]).any()):
            return  # features that vary (or NaN), that are constant (dead ReLUs), or one input repeated
        scale = float(x.detach().double().pow(2).mean().sqrt())
        if not scale < 0.1:  # inputs of a usual scale that hardly differ: scaling them would not help
            return
        self._warned_blind = True
        warnings.warn(
            f"TinyConditioner: its features barely vary over the batch (variance at most {largest:.2g}, against "
            f"eps={self.norm.eps:g} in their standardisation), so every input gets about the same policy: the "
            f"per-instance layer is the global one. The inputs' RMS is {scale:.3g}; on so small a scale (EEG in "
            "volts, about 1e-5) scale the data to about unit size (volts to microvolts: x * 1e6) before the model, "
            "or pass a conditioner of your own that normalises its input",
            UserWarning,
            stacklevel=caller_stacklevel(("augnet.", "torch.")),
        )


class ConditionedAugmentationLayer(AugmentationLayer):
    """An augmentation layer whose weights and magnitudes are predicted per sample from the clean input.

    Training and evaluation work as for :class:`~augnet.AugmentationLayer`
    (``train_mode`` and ``eval_mode`` ``"sample"``: one transform per row from
    that row's Categorical(w_b); ``"mix"``: the row's blend), with each row at
    its own sample's weights and magnitudes. The conditioner sees the input
    the layer is given (the clean batch for the first layer of a module), not
    the augmented copies.

    The selective regulariser (:func:`augnet.selective_regularizer`) takes the
    per-sample policy of the latest forward pass, the mean over the batch of
    :math:`-\\| w_b \\odot e \\odot \\mu_b \\|_2`; :func:`~augnet.instance.conditioner_entropy` is
    the mean entropy of the per-sample weights, to keep them from collapsing.
    :attr:`~augnet.AugmentationLayer.weights` and
    :attr:`~augnet.AugmentationLayer.magnitudes` are the global part (the policy of
    an input on which the conditioner outputs 0); :meth:`policy` with a batch
    gives the per-sample policy. Calibration is not supported.

    Args:
        transforms: the Q candidate transforms.
        conditioner: any module mapping the layer's input (B, ...) to (B, 2Q):
            offsets of the weight logits, then of the raw magnitudes. Default:
            :class:`~augnet.instance.TinyConditioner` (needs ``channels``).
        channels: input channels, for the default conditioner (required without ``conditioner``).
        hidden: size of the default conditioner (its hidden channels; default 16).
        kernel_size: the default conditioner's convolutions, 3 (default) or 1 (a policy that is the same for every
            pose of an input: :class:`~augnet.instance.TinyConditioner`); only 3 with a ``conditioner`` given
            (and ``hidden`` only 16).
        init_magnitude, temperature, eval_mode, backend, train_mode: as for
            :class:`~augnet.AugmentationLayer` (and the same defaults). Each number may be a 0-d tensor or
            NumPy array (an integer one for ``channels``, ``hidden`` and ``kernel_size``).

    Shape:
        - input: :math:`(B, ...)`
        - output: :math:`(B \\cdot C, ...)`, copy-major.

    Raises:
        TypeError, ValueError: an argument :class:`~augnet.AugmentationLayer` refuses, no ``channels`` for the
            default conditioner (or inputs that are neither signals nor images), a ``kernel_size`` other
            than 3 or a ``hidden`` other than 16 with a ``conditioner``, or a ``conditioner`` that is not an
            ``nn.Module``.

    Warns:
        UserWarning: once, in a training step on the CPU, when the default conditioner cannot tell the
            batch's inputs apart because they are on a tiny scale (EEG in volts: see
            :class:`~augnet.instance.TinyConditioner`).

    Examples:
        >>> from augnet.transforms import image as T
        >>> layer = ConditionedAugmentationLayer([T.Rotate(), T.TranslateX()], channels=3, init_magnitude=0.2)
        >>> x = torch.rand(6, 3, 16, 16)
        >>> layer(x, copies=2).shape
        torch.Size([12, 3, 16, 16])
        >>> policy = layer.policy(x)
        >>> policy["weights"].shape, policy["magnitudes"].shape
        (torch.Size([6, 2]), torch.Size([6, 2]))
    """

    def __init__(
        self,
        transforms: Sequence[Transform],
        conditioner: nn.Module | None = None,
        channels: int | None = None,
        hidden: int = 16,
        init_magnitude: float | Sequence[float] = 0.5,
        temperature: float = 1.0,
        eval_mode: str = "sample",
        backend: str = "auto",
        train_mode: str = "sample",
        kernel_size: int = 3,
    ) -> None:
        super().__init__(transforms, init_magnitude, temperature, eval_mode, backend, train_mode)
        q = len(self.transforms)
        hidden, kernel_size = number("hidden", hidden), number("kernel_size", kernel_size)  # 0-d tensors: their ints
        channels = None if channels is None else number("channels", channels)
        if conditioner is None:
            if channels is None:
                raise ValueError(
                    "ConditionedAugmentationLayer needs channels= (the input's channels) for its default "
                    "conditioner, or a conditioner module mapping (B, ...) to (B, 2 * Q)"
                )
            ndim = self.transforms[0].input_ndim
            if ndim not in (3, 4):
                raise ValueError(f"no default conditioner for {ndim}-D inputs: pass conditioner= yourself")
            conditioner = TinyConditioner(channels, 2 * q, hidden, ndim, kernel_size)
        elif not (is_real(kernel_size) and kernel_size == 3 and is_real(hidden) and hidden == 16):
            default_size = is_real(kernel_size) and kernel_size == 3
            what = f"hidden={hidden!r}" if default_size else f"kernel_size={kernel_size!r}"
            raise ValueError(f"ConditionedAugmentationLayer: {what} is the default conditioner's; "
                             "it cannot apply to the conditioner passed in")
        elif not isinstance(conditioner, nn.Module):
            raise TypeError(f"conditioner must be an nn.Module mapping (B, ...) to (B, {2 * q}), got "
                            f"{type(conditioner).__name__}")
        self.conditioner = conditioner
        self._latest: tuple[Tensor, Tensor] | None = None

    def __getstate__(self) -> dict:
        # The latest policy is part of the latest pass's graph, not of the layer: a copy (copy.deepcopy, an
        # EMA or best-model copy, pickle, torch.save) has not run yet. Tensors in a graph cannot be deep-copied.
        state = super().__getstate__() if hasattr(super(), "__getstate__") else self.__dict__
        return {**state, "_latest": None}

    # ----------------------------------------------------------------- input
    def check_input(self, x: Tensor) -> None:
        """Raise the ValueError or TypeError of an input the layer cannot take, before anything changes.

        Every transform's check (type, floating-point dtype, rank, sizes), the
        rank and channels a :class:`TinyConditioner` reads, and, on the CPU, that every pixel
        is finite: the conditioner reads each sample, and in a training step
        its batch statistics mix them all, so one NaN image would give every
        sample a NaN policy (no value is read on an accelerator; there the
        conditioner's output is NaN and its statistics stay as they were).
        """
        super().check_input(x)
        channels = getattr(self.conditioner, "channels", None)
        if isinstance(self.conditioner, TinyConditioner) and x.dim() != self.conditioner.ndim:
            kind = "(B, Ch, H, W) images" if self.conditioner.ndim == 4 else "(B, Ch, T) signals"
            raise ValueError(
                f"ConditionedAugmentationLayer: its conditioner reads {self.conditioner.ndim}-D inputs, {kind}, got "
                f"an input of shape {tuple(x.shape)} (build the TinyConditioner with ndim={x.dim()})"
            )
        if isinstance(self.conditioner, TinyConditioner) and x.shape[1] != channels:
            raise ValueError(
                f"ConditionedAugmentationLayer: its conditioner reads {channels} channels, got an input with "
                f"{x.shape[1]} channels, shape {tuple(x.shape)}"
            )
        # One reduction (a sum is not finite if a value is not, or if it overflows); the rows only then.
        if x.numel() and host_readable(x):
            if bool(torch.isfinite(x.detach().sum())):
                return
            finite = torch.isfinite(x.detach()).flatten(1).all(1)
            if not bool(finite.all()):
                bad = (~finite).nonzero().squeeze(1).tolist()
                raise ValueError(
                    f"ConditionedAugmentationLayer: x has NaN or infinite values in samples {bad}: the conditioner "
                    "cannot give them a policy (and a training step's batch statistics would mix them into every "
                    "sample's); nothing was changed"
                )

    def _conditioner_input(self, x: Tensor) -> Tensor:
        """``x`` in the dtype of the conditioner's parameters (float64 images for a float32 conditioner)."""
        dtype = next((p.dtype for p in self.conditioner.parameters() if p.is_floating_point()), x.dtype)
        return x if x.dtype == dtype else x.to(dtype)

    # ---------------------------------------------------------------- policy
    def sample_policy(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Per-sample weights and layer magnitudes for the batch ``x``.

        Args:
            x: the layer's input :math:`(B, ...)`.

        Returns:
            ``(w, mu)``, each :math:`(B, Q)`: rows of ``w`` sum to 1, ``mu`` in [0, 1].

        Raises:
            ValueError: the conditioner's output is not :math:`(B, 2Q)` or is not finite (checked on CPU).
            TypeError: it is not a floating-point tensor.
        """
        q = len(self.transforms)
        out = self.conditioner(self._conditioner_input(x))
        if not isinstance(out, Tensor) or not out.is_floating_point():
            what = type(out).__name__ if not isinstance(out, Tensor) else f"a {out.dtype} tensor"
            raise TypeError(f"the conditioner must return a floating-point tensor of shape (B, {2 * q}), got {what}")
        if tuple(out.shape) != (x.shape[0], 2 * q):
            raise ValueError(
                f"the conditioner returned shape {tuple(out.shape)} for {x.shape[0]} inputs; expected "
                f"({x.shape[0]}, {2 * q}): {q} weight-logit offsets then {q} magnitude offsets per sample"
            )
        if host_readable(out) and not bool(torch.isfinite(out).all()):
            bad = (~torch.isfinite(out.detach())).any(1).nonzero().squeeze(1).tolist()
            raise ValueError(
                f"the conditioner output is not finite (NaN or infinite) for samples {bad}: "
                f"{out.detach()[bad[:3]].tolist()}"
            )
        # In at least float32, as the global layer's weights and magnitudes (a model cast with .half() / .bfloat16()).
        logits, raw = widened(self.weight_logits), widened(self.raw_magnitudes)
        out = out.to(logits.dtype)
        w = torch.softmax((logits + out[:, :q]) / self.temperature, 1)
        mu = inward_clamp(raw + out[:, q:])
        return w, mu

    def latest_policy(self) -> tuple[Tensor, Tensor]:
        """``(w, mu)`` (B, Q) of the latest forward pass, with their graph: what the regulariser sees.

        Raises:
            ValueError: the layer has not run yet.
        """
        if self._latest is None:
            raise ValueError(
                "this ConditionedAugmentationLayer has not run on a batch yet: its regulariser is per sample, "
                "call the model on the batch first"
            )
        return self._latest

    def policy(self, x: Tensor | tuple[int, ...] | None = None, size: tuple[int, ...] | None = None):
        """With a batch ``x``: its per-sample policy; else the global part's entries (see below).

        A read changes nothing: the conditioner runs in evaluation mode (each submodule's mode restored
        after), so a batch norm of a conditioner of your own keeps its running statistics, a dropout draws
        no mask, and each sample's policy depends on that sample alone (the default conditioner reads its
        running statistics here in either mode).

        Args:
            x: a batch :math:`(B, ...)`, or (as for :meth:`augnet.AugmentationLayer.policy`) a spatial size or ``None``
                (a 1-D integer tensor is a size: a batch is floating point).
            size: spatial size for pixel units (positive ints, checked as a layer's; default: that of ``x``).

        Raises:
            ValueError, TypeError: a batch the layer cannot take (see :meth:`check_input`), or one on meta.

        Returns:
            For a batch, a dict of ``weights`` and ``magnitudes`` (B, Q) tensors,
            ``ranges`` (B, Q, 2) tensors (low, high) in the natural ``units``
            (a list of Q strings), and ``transforms`` (Q names). Otherwise the
            global layer's entries (:meth:`augnet.AugmentationLayer.policy`), which
            describe an input on which the conditioner outputs 0.
        """
        given = type(x).__name__
        if isinstance(x, Tensor) and x.dim() == 1 and not (x.is_floating_point() or x.is_complex()):
            x = check_size(x)  # a size as AugmentationModule.policy and AugmentationLayer.policy take it, not a batch
        if not isinstance(x, Tensor):
            if x is not None and size is not None:
                raise TypeError(f"x must be a batch (a floating-point tensor) when size is given, got {given}")
            try:
                return super().policy(x if size is None else size)
            except TypeError as err:
                raise TypeError(f"x must be a batch (a tensor), a spatial size or None: {err}") from None
        self.check_input(x)
        if x.device.type == "meta" or self.weight_logits.device.type == "meta":
            raise ValueError("a per-sample policy needs values: x or the layer is on meta (shapes only)")
        size = check_size(size) if size is not None else (tuple(x.shape[2:]) if x.dim() > 2 else None)
        with torch.no_grad(), evaluating(self.conditioner):
            w, mu = self.sample_policy(x)
        rows = []
        units = []
        for q, t in enumerate(self.transforms):
            ranges = [t.natural_range(m, size) for m in mu[:, q].tolist()]
            rows.append(torch.tensor([[r.low, r.high] for r in ranges], dtype=torch.float64).reshape(-1, 2))
            units.append(t.natural_range(1.0, size).unit)
        return {
            "transforms": [type(t).__name__ for t in self.transforms],
            "weights": w.detach().cpu(),
            "magnitudes": mu.detach().cpu(),
            "ranges": torch.stack(rows, 1),
            "units": units,
        }

    def settings(self, size: tuple[int, ...] | None = None) -> dict:
        """The global part's settings, marked ``conditioned``: policy files and exports refuse it."""
        return {**super().settings(size), "conditioned": True}

    @torch.no_grad()
    def calibrate(self, *args, **kwargs):
        """Not supported for a conditioned layer (raises ValueError)."""
        raise ValueError("a ConditionedAugmentationLayer cannot be calibrated: its magnitudes are per sample")

    def _load_from_state_dict(self, state_dict, prefix, *args):
        # A calibrated global layer's state would half-calibrate this one: its global policy() in calibrated units,
        # its rows at the uncalibrated per-sample magnitudes. Refused before anything of this layer is loaded.
        if isinstance(state_dict.get(prefix + "calibration"), Tensor):
            raise ValueError(
                f"the state holds a calibration (key {prefix + 'calibration'!r}, a calibrated AugmentationLayer's) "
                "and a ConditionedAugmentationLayer cannot be calibrated (its magnitudes are per sample): load it "
                "into an AugmentationLayer, or call clear_calibration() on the calibrated layer before taking its state"
            )
        super()._load_from_state_dict(state_dict, prefix, *args)

    def extra_repr(self) -> str:
        return "conditioned, " + super().extra_repr()

    # --------------------------------------------------------------- forward
    def _augment(self, x: Tensor, c: int, generator: torch.Generator | None) -> Tensor:
        w, mu = self.sample_policy(x)  # (B, Q) each, from the clean input
        # Copy-major rows: row c * B + b is sample b.
        rows_w, rows_mu = (w, mu) if c == 1 else (w.repeat(c, 1), mu.repeat(c, 1))
        out = self._augment_at(x, c, rows_w, rows_mu, generator)
        self._latest = (w, mu)  # once the pass has succeeded
        return out


def conditioned_layers(module: nn.Module) -> list[ConditionedAugmentationLayer]:
    """The conditioned layers inside ``module`` (possibly none).

    Raises:
        TypeError: ``module`` is not an ``nn.Module``.
    """
    check_module(module, "conditioned_layers")
    return [m for m in module.modules() if isinstance(m, ConditionedAugmentationLayer)]


def conditioner_entropy(module: nn.Module) -> Tensor:
    """Mean entropy (nats) of the per-sample weights of the latest forward pass, summed over conditioned layers.

    Adding ``-beta * conditioner_entropy(model)`` to the loss keeps per-sample
    weights from collapsing onto one transform (InstaAug's entropy term, on
    the weights); divided by ``log Q`` it lies in [0, 1] per layer.

    Raises:
        ValueError: no conditioned layer in ``module``, or one that has not run yet.
        TypeError: ``module`` is not an ``nn.Module``.
    """
    check_module(module, "conditioner_entropy")
    layers = conditioned_layers(module)
    if not layers:
        raise ValueError(f"no ConditionedAugmentationLayer found in {type(module).__name__}")
    terms = []
    for layer in layers:
        w, _ = layer.latest_policy()
        entropy = -(w * torch.log(w.clamp_min(torch.finfo(w.dtype).tiny))).sum(1)
        terms.append(entropy.mean() if len(entropy) else entropy.sum())  # an empty batch: 0, not NaN
    return torch.stack(terms).sum()
