"""AugNet: augment C copies, run the trunk once on the B*C rows, aggregate.

Axis legend: B samples, C copies, N = B * C rows (copy-major).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import torch
from einops import rearrange
from torch import Tensor, nn

from augnet._checks import is_int, number
from augnet._model_checks import (
    augmentation_kept,
    check_class_dimension,
    final_softmax,
    outside_policy_message,
    trunk_layer_paths,
)
from augnet._stack import caller_stacklevel
from augnet.effects import measure_effects
from augnet.layers import AugmentationLayer, AugmentationModule, Policy
from augnet.transforms.base import Transform, check_copies, stratified_copies

__all__ = ["AGGREGATES", "AugNet", "aggregate", "as_augmentation", "check_trunk_rows"]

AGGREGATES = ("log_softmax", "softmax", "mean")


def aggregate(out: Tensor, copies: int, how: str = "log_softmax") -> Tensor:
    """Average trunk outputs over the copy axis.

    Args:
        out: trunk outputs for ``N = B * copies`` rows, copy-major.
        copies: the number of copies C.
        how: ``"log_softmax"`` (mean of log-probabilities, the default for
            classification), ``"softmax"`` (log of the mean probability) or
            ``"mean"`` (plain mean, for regression and embeddings).

    Shape:
        - out: :math:`(B \\cdot C, ...)`; for the softmax kinds
          :math:`(B \\cdot C, \\text{classes}, ...)`
        - output: :math:`(B, ...)`; log-probabilities for the softmax kinds.

    Returns:
        The aggregated outputs, shape :math:`(B, ...)`.

    Raises:
        ValueError: an unknown ``how``, a first dimension that is not a multiple of ``copies``, or
            (softmax kinds) an ``out`` without a class dimension or with one of size 1 (one logit per row,
            whose log-softmax is 0 whatever its value: use ``"mean"``).
        TypeError: ``out`` not a floating-point tensor, or ``copies`` not an int.
    """
    if how not in AGGREGATES:  # named as this function's argument (an AugNet's is its aggregate=, checked there)
        raise ValueError(f"aggregate: how must be one of {AGGREGATES}, got {how!r}")
    copies = check_copies(copies)
    if not isinstance(out, Tensor):
        raise TypeError(
            f"the trunk must return a tensor to aggregate, got {type(out).__name__}; wrap a trunk that returns a "
            "dict or a tuple (auxiliary heads, a Hugging Face output) in a module that returns its logits"
        )
    if out.dim() == 0 or out.shape[0] % copies != 0:
        raise ValueError(
            f"the trunk returned shape {tuple(out.shape)}; expected one row per augmented copy "
            f"(a first dimension that is a multiple of copies={copies})"
        )
    if not out.is_floating_point():
        raise TypeError(f"the trunk must return floating-point outputs to aggregate, got {out.dtype}")
    check_class_dimension(out, how)  # the softmax kinds: a class dimension of at least 2 classes
    per_copy = rearrange(out, "(c b) ... -> c b ...", c=copies)
    if how == "mean":
        return per_copy.mean(0)
    logp = per_copy.log_softmax(2)
    if how == "log_softmax":
        return logp.mean(0)
    return torch.logsumexp(logp, 0) - math.log(copies)


def check_trunk_rows(out, batch: int, copies: int) -> None:
    """Raise a ValueError unless the trunk returned one row per augmented row (``batch * copies``).

    A trunk that drops, pools, repeats or transposes rows would otherwise be
    aggregated into a wrong batch without a sound.
    """
    rows = batch * copies
    if isinstance(out, Tensor) and (out.dim() == 0 or out.shape[0] != rows):
        raise ValueError(
            f"the trunk returned shape {tuple(out.shape)} for an input of {rows} rows "
            f"({batch} samples x {copies} copies); it must return one row per input row, shape ({rows}, ...)"
        )


def as_augmentation(augment) -> nn.Module:
    """The augmentation module of an :class:`AugNet`, from what the user passed.

    An :class:`~augnet.AugmentationLayer` or a sequence of them (a list, a tuple, an ``nn.ModuleList`` or
    an ``nn.Sequential``) becomes an :class:`~augnet.AugmentationModule`; any other module with
    ``forward(x, copies, generator)`` and ``policy(size)`` (an
    :class:`~augnet.AugmentationModule`, Augerino's
    :class:`~augnet.augerino.LieAugmentation`, one of your own) is used as is.
    """
    if isinstance(augment, AugmentationModule):
        return augment
    if isinstance(augment, nn.Sequential) and not callable(getattr(augment, "policy", None)):
        augment = list(augment)  # layers in a Sequential: in order, as in a ModuleList or a list
    given = [augment] if not isinstance(augment, (Sequence, nn.ModuleList)) or isinstance(augment, str) else augment
    if any(isinstance(t, Transform) for t in given):
        names = ", ".join(f"{type(t).__name__}()" for t in given if isinstance(t, Transform))
        raise TypeError(
            f"augment must be augmentation layers, got the transform(s) {names}: put transforms in a layer, "
            f"e.g. AugNet(trunk, AugmentationLayer([{names}]))"
        )
    if isinstance(augment, (AugmentationLayer, nn.ModuleList)) or (
        isinstance(augment, Sequence) and not isinstance(augment, str)
    ):
        return AugmentationModule(augment)  # which names a bad or missing layer
    if isinstance(augment, nn.Module) and callable(getattr(augment, "policy", None)):
        return augment
    raise TypeError(
        "augment must be an AugmentationLayer, a sequence of them, or a module with forward(x, copies, generator) "
        f"and policy(), got {type(augment).__name__}"
    )


class AugNet(nn.Module):
    r"""A model made invariant by averaging its trunk over learned augmentations.

    .. math:: \tilde f(x) = \frac{1}{C} \sum_{c=1}^{C} f(g_c x)

    The input is copied C times by the augmentation module, the trunk runs
    once on the ``B * C`` rows, and the C predictions are aggregated.

    Args:
        trunk: any model mapping a batch of (augmented) inputs to outputs.
        augment: an :class:`AugmentationModule`, one :class:`AugmentationLayer`,
            a sequence of layers, or any augmentation module with
            ``forward(x, copies, generator)`` and ``policy(size)`` (e.g.
            :class:`~augnet.augerino.LieAugmentation`; see ``as_augmentation``).
        train_copies: copies C in training (default 1).
        eval_copies: copies C in evaluation (default 4). The counts (these and ``effect_every``) are ints, or 0-d
            integer tensors or NumPy arrays, read as the ints they hold.
        aggregate: ``"log_softmax"``, ``"softmax"`` or ``"mean"`` (see
            :func:`aggregate`).
        effect_every: in training, measure every augmentation layer's effects
            on the trunk (:meth:`measure_effects`) at the first forward pass
            and then every ``effect_every`` passes (default 10); 0 never measures (the
            selective regulariser then compares magnitudes in the transforms'
            own units, as the AugNet paper does).
        stratify: in evaluation, draw each sample's copies stratified over
            the transforms' ranges (:class:`~augnet.transforms.stratified_copies`):
            every copy is still one draw of the augmentation, but a
            sample's C copies cover each range evenly, so the average's
            sampling noise falls at the same cost (on the comparison's full
            sinusoids, 4 stratified copies classify what 16 independent ones
            do). Training draws are independent either way. Default
            ``True``; ``False`` draws the C copies independently (what the
            tables of ``augnet reproduce`` other than the comparison, the
            demo and the selection's README row were measured with).

    An :class:`AugmentationLayer` may also sit inside the trunk (or in any plain model): it then augments the
    rows the trunk passes it, one draw per row, in training and, with its ``eval_mode="sample"`` default, in
    evaluation too (``eval()`` does not turn it off; ``stratify`` and the copies apply to ``augment`` only).
    :func:`~augnet.training.fit`, :func:`~augnet.param_groups`, the regularisers and the callbacks count it with
    the others; :meth:`policy` and :meth:`measure_effects` read the layers of ``augment`` only (:meth:`policy`
    warns, naming the trunk's layers; read one with ``model.trunk.get_submodule(path).policy()``, and a plain
    model's layers with ``AugmentationModule([...]).policy()``).

    Shape:
        - input: :math:`(B, ...)`
        - output: :math:`(B, ...)`, the aggregated trunk output.

    Raises:
        TypeError, ValueError: a ``trunk`` that is not a module, an ``augment`` that is not one of the
            above (transforms not put in a layer), copies that are not ints >= 1, an unknown
            ``aggregate``, an ``effect_every`` that is not an int >= 0, or a ``stratify`` that is not a bool.

    Warns:
        UserWarning: a trunk that ends in ``nn.Softmax`` (the last module of a possibly nested ``nn.Sequential``)
            with a softmax ``aggregate``: its probabilities would be read as logits.

    Examples:
        >>> from augnet.transforms import image as T
        >>> trunk = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 10))
        >>> layer = AugmentationLayer([T.Rotate(), T.TranslateX()], init_magnitude=0.1)
        >>> model = AugNet(trunk, layer, eval_copies=4).eval()
        >>> model(torch.rand(5, 3, 8, 8)).shape
        torch.Size([5, 10])
    """

    #: A whole model pickled before ``stratify`` existed evaluates with today's default.
    stratify: bool = True

    def __init__(
        self,
        trunk: nn.Module,
        augment: AugmentationModule | AugmentationLayer | Sequence[AugmentationLayer],
        train_copies: int = 1,
        eval_copies: int = 4,
        aggregate: str = "log_softmax",
        effect_every: int = 10,
        stratify: bool = True,
    ) -> None:
        super().__init__()
        if not isinstance(trunk, nn.Module):
            raise TypeError(f"trunk must be an nn.Module, got {type(trunk).__name__}")
        augment = as_augmentation(augment)
        # The counts: 0-d integer tensors and arrays give the ints they hold (a float or a bool is refused).
        train_copies = check_copies(number("train_copies", train_copies), "train_copies")
        eval_copies = check_copies(number("eval_copies", eval_copies), "eval_copies")
        if aggregate not in AGGREGATES:
            raise ValueError(f"aggregate must be one of {AGGREGATES}, got {aggregate!r}")
        effect_every = number("effect_every", effect_every)
        if not is_int(effect_every):
            raise TypeError(f"effect_every must be an int >= 0, got {effect_every!r}")
        if effect_every < 0:
            raise ValueError(f"effect_every must be an int >= 0, got {effect_every!r}")
        effect_every = int(effect_every)
        if not isinstance(stratify, bool):
            raise TypeError(f"stratify must be a bool, got {type(stratify).__name__}: {stratify!r}")  # np.True_
        softmax = final_softmax(trunk) if aggregate != "mean" else None
        if softmax is not None:
            warnings.warn(
                f"the trunk ends in nn.Softmax ({softmax}): aggregate={aggregate!r} reads its probabilities as "
                "logits and takes their log-softmax again, which flattens every prediction towards uniform; drop "
                "the final Softmax (the aggregate returns log-probabilities) or use aggregate='mean'",
                UserWarning,
                stacklevel=caller_stacklevel(("augnet.",)),
            )
        self.trunk = trunk
        self.augment = augment
        self.train_copies = train_copies
        self.eval_copies = eval_copies
        self.aggregation = aggregate
        self.effect_every = effect_every
        self.stratify = stratify
        self.passes = 0  # training forward passes so far (saved in the state dict: a resumed run measures alike)

    def forward(self, x: Tensor, copies: int | None = None, generator: torch.Generator | None = None) -> Tensor:
        """Aggregated prediction over ``copies`` augmented copies of each sample.

        Args:
            x: input batch :math:`(B, ...)`, as the augmentation layers take it (e.g. :math:`(B, Ch, H, W)`).
            copies: overrides ``train_copies`` / ``eval_copies`` (default ``None``: the mode's own).
            generator: source of randomness for the augmentations (default ``None``: torch's global one).

        Returns:
            The trunk's outputs aggregated over the copies, :math:`(B, ...)` (see :func:`aggregate`).

        Raises:
            TypeError, ValueError: an ``x`` the augmentation cannot take, bad ``copies``, a trunk
                that does not return one row per augmented row, or outputs the aggregate cannot take (see
                :func:`aggregate`: one logit per row for the softmax kinds). Then augnet's own state is left as
                it was (the pass count, the sizes the layers saw, measured effects, a per-instance layer's latest
                policy and its conditioner's statistics); the trunk has run, so its own buffers (batch norm's
                running statistics) have moved, as in any call of it.
        """
        if not isinstance(x, Tensor):
            raise TypeError(f"AugNet expects a tensor input, got {type(x).__name__}")
        c = copies if copies is not None else (self.train_copies if self.training else self.eval_copies)
        c = check_copies(c)
        if torch.compiler.is_compiling():
            return self._forward(x, c, generator)
        # A call the trunk refuses (wrong rows, a shape error) changes none of augnet's state: the pass count, the
        # sizes the layers saw (policy()'s pixel ranges) and the effects a measuring pass wrote are put back (the
        # trunk's own buffers have moved by its run). A layer inside the trunk is put back as those of augment are.
        passes = self.passes
        inside = [m for m in self.trunk.modules() if isinstance(m, AugmentationLayer)]
        layers = [m for m in (*self.augment.modules(), *inside) if hasattr(m, "last_size")]
        sizes = [m.last_size for m in layers]
        measures = self.training and self.effect_every and passes % self.effect_every == 0
        effects = [(m.effect.clone(), m.effect_measured.clone()) if measures and hasattr(m, "effect") else None
                   for m in layers]  # fmt: skip
        # A per-instance layer's last policy, and in training its conditioner's running statistics (small).
        conditioned = [(m, m._latest, [(b, b.clone()) for b in m.conditioner.buffers()] if self.training else [])
                       for m in layers if "_latest" in vars(m)]  # fmt: skip
        try:
            return self._forward(x, c, generator)
        except BaseException:
            self.passes = passes
            with torch.no_grad():
                for m, size, effect in zip(layers, sizes, effects, strict=True):
                    m.last_size = size
                    if effect is not None:
                        m.effect.copy_(effect[0])
                        m.effect_measured.copy_(effect[1])
                for m, latest, kept in conditioned:
                    m._latest = latest
                    for b, value in kept:
                        b.copy_(value)
            raise

    def _forward(self, x: Tensor, c: int, generator: torch.Generator | None) -> Tensor:
        if self.training or not self.stratify:
            rows = self.augment(x, copies=c, generator=generator)  # checks x
        else:  # the average over copies estimates an expectation: the copies cover the ranges evenly
            with stratified_copies(c):
                rows = self.augment(x, copies=c, generator=generator)
        if self.training and torch.is_grad_enabled() and not torch.compiler.is_compiling():
            if self.effect_every and self.passes % self.effect_every == 0:
                self.measure_effects(x)
            self.passes += 1
        out = self.trunk(rows)
        check_trunk_rows(out, x.shape[0], c)
        return aggregate(out, c, self.aggregation)

    def policy(self, size: tuple[int, ...] | None = None) -> Policy:
        """Per layer, each transform's weight, magnitude and range in natural units.

        The layers are those of ``augment``, in order: what :meth:`AugmentationModule.from_policy` rebuilds and
        the exporters apply to the input. A layer inside the trunk is not among them (it augments the trunk's
        rows where it sits); a ``UserWarning`` names such layers' paths (``trunk.0``): read one with
        ``model.trunk.get_submodule("0").policy()``.

        Args:
            size: the input's spatial (or temporal) size, for ranges in pixels (default ``None``: the
                size of the last batch a layer saw, else relative units).
        """
        inside = trunk_layer_paths(self, AugmentationLayer)
        if inside:
            warnings.warn(outside_policy_message(inside), UserWarning, stacklevel=caller_stacklevel(("augnet.",)))
        return self.augment.policy(size)

    @torch.no_grad()
    def measure_effects(self, x: Tensor, rows: int = 64) -> None:
        """Measure how much each layer of ``augment`` changes the trunk's outputs (see :mod:`augnet.effects`).

        :meth:`forward` calls this in training every ``effect_every`` passes;
        call it yourself where the forward pass does not (a model compiled
        with ``torch.compile`` does not measure inside the compiled graph).
        The trunk is evaluated in evaluation mode and restored; the draws come
        from a generator of their own, so the training's random stream is not
        touched. A layer inside the trunk is not measured (its effect stays as it is, 1 until loaded or
        measured otherwise: the selective regulariser counts its magnitudes in the transforms' own units).

        Args:
            x: a batch of clean inputs :math:`(B, ...)`, as the model takes them.
            rows: how many of its rows to use (an int >= 1, or a 0-d integer tensor or array).

        Raises:
            TypeError, ValueError: an ``x`` that a layer's transforms cannot take (checked
                as a layer checks its input: type, floating-point dtype, rank, sizes), or bad
                ``rows``; before anything changes. A batch that gives nothing to compare (fewer
                than 2 rows, outputs that are not finite) leaves the effects as they were.
        """
        rows = number("rows", rows)  # a 0-d integer tensor or array: the int it holds
        if not is_int(rows):
            raise TypeError(f"measure_effects: rows must be an int >= 1, got {rows!r}")
        if rows < 1:
            raise ValueError(f"measure_effects: rows must be an int >= 1, got {rows!r}")
        rows = int(rows)
        layers = [m for m in self.augment.modules() if isinstance(m, AugmentationLayer)]
        for layer in layers:  # the transforms' checks: the conditioner is not run here
            AugmentationLayer.check_input(layer, x)
        if layers:
            # Draws of their own (a meta tensor draws nothing and takes no generator).
            generator = None if x.device.type == "meta" else torch.Generator(x.device).manual_seed(self.passes)
            measure_effects(self.trunk, layers, x, rows=rows, generator=generator)  # on a copy of x's rows

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """As :meth:`torch.nn.Module.load_state_dict`; a load that fails (a size mismatch, ``strict`` keys missing
        or unexpected) leaves augnet's own state as it was: the pass count and the augmentation's parameters,
        buffers, temperature and sizes (the trunk's tensors that loaded before the error stay loaded, as PyTorch
        leaves any module's). Called on a module holding this model, PyTorch's own method runs instead."""
        with augmentation_kept(self):
            return super().load_state_dict(state_dict, strict=strict, assign=assign)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # A model's state saved before the pass counter existed loads with the counter at 0; a partial state
        # without the augmentation's keys (strict=False: a pretrained trunk's) leaves the counter as it is.
        # (An augmentation with no state of its own, a user's parameter-free module, gives no key to tell them by:
        # its old checkpoints load.)
        if any(k.startswith(prefix + "augment.") for k in state_dict) or not self.augment.state_dict():
            state_dict.setdefault(prefix + "_extra_state", torch.tensor(0))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def get_extra_state(self) -> Tensor:
        return torch.tensor(self.passes)

    def set_extra_state(self, state) -> None:
        self.passes = int(state)

    def extra_repr(self) -> str:
        return (
            f"train_copies={self.train_copies}, eval_copies={self.eval_copies}, aggregate={self.aggregation!r}, "
            f"effect_every={self.effect_every}" + ("" if self.stratify else ", stratify=False")
        )
