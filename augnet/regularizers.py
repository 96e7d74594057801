"""Regularisers that keep augmentation layers from collapsing to the identity.

``loss = task_loss + lam * R``, with R one of:

- :func:`selective_regularizer`: :math:`R = -\\sum_{layers} \\| w \\odot e \\odot \\mu \\|_2`
  (AugNet's, in augnet's units). Tying each weight to its magnitude makes a
  layer select the transform with the highest admissible magnitude; the
  effects :math:`e` measure magnitudes by what the transforms do to the trunk's
  outputs, and a transform an earlier layer chose costs instead of counting,
  so stacked layers choose different transforms.
- :func:`paper_selective_regularizer`: :math:`R = -\\sum_{layers} \\| w \\odot \\mu \\|_2`,
  the AugNet paper's (magnitudes in each transform's own units).
- :func:`augerino_regularizer`: :math:`R = -\\sum_{layers} \\| \\mu \\|_2` (Augerino's),
  for ablations.
- :func:`no_regularizer`: 0.

At the zero vector, where the norm has no gradient, both use the outward
subgradient (:func:`norm_outward_at_zero`), so magnitudes that start at or
fall to 0 can still grow.

A per-instance layer (:class:`~augnet.instance.ConditionedAugmentationLayer`)
enters the regularisers per sample, with the policy its latest forward pass
gave each input: the selective ones as the mean over that batch of
:math:`-\\| w_b \\odot e \\odot \\mu_b \\|_2`, Augerino's as the mean of
:math:`-\\| \\mu_b \\|_2`; before its first forward pass they raise a ValueError.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from augnet._checks import as_values, is_int, is_real, number
from augnet.augerino import LieAugmentation
from augnet.instance import ConditionedAugmentationLayer
from augnet.layers import AugmentationLayer, AugmentationModule

__all__ = [
    "AUG_LR",
    "REGULARIZERS",
    "SATURATION",
    "UNITS",
    "WEIGHT_LR",
    "LambdaSchedule",
    "augerino_regularizer",
    "get_regularizer",
    "no_regularizer",
    "paper_selective_regularizer",
    "param_groups",
    "selective_regularizer",
]


#: The default saturation of :func:`selective_regularizer`: a magnitude :math:`\mu` enters as
#: :math:`s \log(1 + \mu / s)`, so the pull on a committed transform's magnitude falls to a third of
#: the linear one at magnitude 1 and its range settles where the task loss's push meets it, rather than at
#: one end of [0, 1] (the reproducing guide, "How the defaults were found").
SATURATION = 0.5


def _augmentations(module: nn.Module, lie: bool = True) -> list[AugmentationLayer | LieAugmentation]:
    """The augmentation layers inside ``module`` (at least one); with ``lie``, Augerino's augmentations too."""
    if not isinstance(module, nn.Module):
        raise TypeError(f"expected an nn.Module holding augmentation layers, got {type(module).__name__}")
    kinds = (AugmentationLayer, LieAugmentation) if lie else (AugmentationLayer,)
    found = [m for m in module.modules() if isinstance(m, kinds)]
    if not found:
        what = "AugmentationLayer or Augerino augmentation" if lie else "AugmentationLayer"
        augerino = not lie and any(isinstance(m, LieAugmentation) for m in module.modules())
        hint = (": an Augerino's augmentation has widths and no weights to select by; regularise it with "
                "augerino_regularizer (regularizer='augerino' in fit)") if augerino else ""
        raise ValueError(f"no {what} found in {type(module).__name__}{hint}")
    return found


def norm_outward_at_zero(v: Tensor) -> Tensor:
    """``||v||_2``, whose gradient at ``v = 0`` is the outward subgradient ``1 / sqrt(n)`` per entry.

    The norm has no gradient at the zero vector (autograd gives 0 there), so a
    regulariser ``-||v||`` could never move magnitudes that are all 0. Any
    unit vector is a subgradient there; the one with equal entries pushes
    every entry outward alike. Elsewhere value and gradient are exactly
    those of :func:`torch.linalg.vector_norm` (the added term is an exact 0).

    Examples:
        >>> v = torch.zeros(4, requires_grad=True)
        >>> (-norm_outward_at_zero(v)).backward()
        >>> v.grad
        tensor([-0.5000, -0.5000, -0.5000, -0.5000])
    """
    norm = torch.linalg.vector_norm(v)
    at_zero = (norm.detach() == 0).to(norm.dtype)
    toward = v.sum() / max(v.numel(), 1) ** 0.5  # the directional derivative along equal entries
    return norm + at_zero * (toward - toward.detach())


def _row_norms_outward_at_zero(v: Tensor) -> Tensor:
    """:func:`norm_outward_at_zero` of each row of ``v`` (B, Q): the (B,) norms."""
    norm = torch.linalg.vector_norm(v, dim=1)
    at_zero = (norm.detach() == 0).to(norm.dtype)
    toward = v.sum(1) / max(v.shape[1], 1) ** 0.5
    return norm + at_zero * (toward - toward.detach())


def _layer_policy(layer: AugmentationLayer) -> tuple[Tensor, Tensor]:
    """``(w, mu)``: (Q,) each for a global layer, (B, Q) each (the latest batch) for a conditioned one."""
    if isinstance(layer, ConditionedAugmentationLayer):
        return layer.latest_policy()
    return layer.weights, layer.magnitudes


#: The units :func:`selective_regularizer` compares magnitudes in.
UNITS = ("effect", "magnitude")


def _transform_key(t) -> str:
    """One transform's identity across layers: its class and constructor arguments."""
    return type(t).__name__ + json.dumps(t.config(), sort_keys=True, default=str)


def selective_regularizer(
    module: nn.Module, units: str = "effect", diverse: bool = True, saturation: float | None = SATURATION
) -> Tensor:
    """AugNet's selective regulariser in augnet's units, :math:`-\\sum_{layers} \\| w \\odot e \\odot \\mu \\|_2`.

    With ``units="magnitude"``, ``diverse=False`` and ``saturation=None`` it is the AugNet paper's
    :math:`-\\sum_{layers} \\| w \\odot \\mu \\|_2`, which makes each layer
    promote the transform with the largest admissible magnitude in that
    transform's own [0, 1] units. Those units are arbitrary (a harmless
    transform is admissible up to 1, whatever it does), so augnet's default
    compares the transforms by what they do:

    - ``units="effect"``: each magnitude counts times the transform's effect
      :math:`e_q` on the trunk's outputs per unit of magnitude, relative to
      the layer's other transforms (:mod:`augnet.effects`; measured by
      :class:`~augnet.AugNet` during training; all 1 until measured, so the
      paper's units);
    - ``diverse=True``: stacked layers choose without replacement. In layer
      :math:`l`, with :math:`h_q = \\max_{k < l} w^{(k)}_q` the largest weight
      transform :math:`q` already holds in an earlier layer (a constant here),
      the part :math:`f_q = 1 - h_q` of its term is rewarded as above and the
      part :math:`h_q` is a cost: the layer's term is
      :math:`-\\| v \\odot (1 - h) \\|_2 + \\| v \\odot h \\|_2` with
      :math:`v = w \\odot e \\odot \\mu`. A later layer thus takes another
      transform, or, when every candidate is taken, lets its magnitudes fall
      to 0 (the identity). A transform is the same one when its class and
      arguments are; the first layer has :math:`h = 0`. Layers are stacked
      when they are in one :class:`~augnet.AugmentationModule`: the modules of
      several models in one container (an ensemble of AugNets) choose each on
      their own, as each model's own regulariser would; layers outside any
      AugmentationModule (bare layers in a model's own ``ModuleList``) count
      as one stack, in the order they are registered.

    Args:
        module: an AugNet, AugmentationModule, AugmentationLayer, or any module
            containing augmentation layers (in the order they are applied).
        units: ``"effect"`` (default) or ``"magnitude"`` (the paper's).
        diverse: discount transforms chosen by earlier layers (default) or not (the paper's).
        saturation: a positive :math:`s` (:data:`SATURATION`, 0.5, by default): each
            magnitude enters as :math:`\\phi(\\mu) = s \\log(1 + \\mu / s)`, equal to :math:`\\mu`
            to first order at 0 (the same pull out of the identity) and pulling a magnitude
            with :math:`s / (s + \\mu)` of the linear pull above it; a large :math:`s` is the
            linear regulariser. ``None``: the magnitudes enter linearly, as above (the
            paper's; augnet's default until the comparison with hand-designed policies).
            With a linear pull, a task loss that grows about linearly with a magnitude
            either stays below the pull (the range grows until the labels break) or above
            it (the range collapses to the identity); with a falling pull the two meet
            inside. A single layer with one transform, weight 1, effect 1 and a task loss
            :math:`c \\mu` settles at :math:`\\mu^* = s (\\lambda / c - 1)` for
            :math:`\\lambda > c` (see the reproducing guide for what it does on the
            comparison's tasks). A 0-d tensor or NumPy array is read as the number it holds (a tensor on an
            accelerator is read back at every call, a wait for the device at every step: give a Python number).

    Returns:
        A differentiable scalar. It is non-positive with ``diverse=False``, and
        whenever no layer repeats a transform an earlier layer holds. With
        ``diverse=True`` a later layer's repeat is a cost, so the value lies
        between :math:`-\\sum_l \\| v^{(l)} \\|_2` and the sum of the later
        layers' :math:`\\| v^{(l)} \\|_2`, and it is positive when several later
        layers repeat the first one's choice: three stacked layers that all put
        their weight on one transform at magnitude 1 give about +1 with a linear
        pull (the first layer's reward -1, each later layer's cost +1), about
        +0.55 at the default saturation (each term :math:`\\phi(1) = 0.5 \\log 3`).
        Log it as a cost, not as the negative of a reward.

    Raises:
        TypeError, ValueError: an unknown ``units``, a ``diverse`` that is not a bool, a ``saturation`` that is
            not ``None`` or a positive finite number, or one the magnitudes' dtype cannot hold as a normal number
            (below 1.2e-38 in float32, 2.2e-308 in float64, or above float32's 3.4e38: see
            ``augnet.regularizers.saturate``), or a ``module`` holding no augmentation layer.

    Examples:
        >>> from augnet.transforms import image as T
        >>> layer = AugmentationLayer([T.Rotate(), T.TranslateX()], init_magnitude=[0.3, 0.4])
        >>> selective_regularizer(layer, saturation=None)  # -|| (0.5 * 0.3, 0.5 * 0.4) ||, effects not yet measured
        tensor(-0.2500, grad_fn=<NegBackward0>)
        >>> selective_regularizer(layer)  # the default: -|| (0.5 * phi(0.3), 0.5 * phi(0.4)) ||, phi(mu) < mu
        tensor(-0.1881, grad_fn=<NegBackward0>)
        >>> with torch.no_grad():
        ...     _ = layer.effect.copy_(torch.tensor([1.5, 0.5]))
        >>> selective_regularizer(layer, saturation=None)  # -|| (0.5 * 1.5 * 0.3, 0.5 * 0.5 * 0.4) ||
        tensor(-0.2462, grad_fn=<NegBackward0>)
        >>> selective_regularizer(layer, units="magnitude", saturation=None)
        tensor(-0.2500, grad_fn=<NegBackward0>)
    """
    if units not in UNITS:
        raise ValueError(f"units must be one of {UNITS}, got {units!r}")
    if not isinstance(diverse, bool):
        raise TypeError(f"diverse must be a bool, got {type(diverse).__name__}: {diverse!r}")  # np.True_: not "bool"
    if saturation is not None:
        saturation = number("saturation", saturation)  # a 0-d tensor or array: the number it holds
        if not _is_number(saturation):
            raise TypeError(f"saturation must be None or a positive number, got {type(saturation).__name__}")
        if not (math.isfinite(saturation) and saturation > 0):
            raise ValueError(f"saturation must be None or a positive finite number, got {saturation}")
    # Per stack (the AugmentationModule holding the layer; None: layers outside one), transform key -> the largest
    # weight an earlier layer of that stack gives it.
    layers = _augmentations(module, lie=False)  # checks the module
    stack_of = (  # one layer, or no discount: nothing to tell apart (spares a second walk over the modules)
        {id(layer): id(m) for m in module.modules() if isinstance(m, AugmentationModule) for layer in m.layers}
        if diverse and len(layers) > 1
        else {}
    )
    held_by_stack: dict[int | None, dict[str, Tensor]] = {}
    terms = []
    for layer in layers:
        taken = held_by_stack.setdefault(stack_of.get(id(layer)), {})
        w, mu = _layer_policy(layer)
        if saturation is not None:
            mu = saturate(mu, saturation)
        v = w * mu
        if units == "effect":
            v = v * layer.effect.to(v)
        repeat = None
        if diverse:
            keys = [_transform_key(t) for t in layer.transforms]
            held = [taken.get(k) for k in keys]
            if any(h is not None for h in held):
                zero = w.new_zeros(())
                h = torch.stack([zero if h is None else h for h in held])
                v, repeat = v * (1 - h), v * h
            # A conditioned layer: its batch mean (an empty batch holds nothing: its mean would be NaN).
            held_now = w.detach() if w.dim() == 1 else w.detach().mean(0) if len(w) else w.new_zeros(w.shape[1:])
            for k, wq in zip(keys, held_now.unbind(), strict=True):
                taken[k] = wq if k not in taken else torch.maximum(taken[k], wq)
        if v.dim() == 1:
            terms.append(norm_outward_at_zero(v))
        else:  # per sample, then the mean over the batch (an empty batch adds 0, in the graph)
            terms.append(_batch_mean(_row_norms_outward_at_zero(v)))
        if repeat is not None:  # what an earlier layer already chose is a cost, not a reward
            terms.append(-_batch_mean(torch.linalg.vector_norm(repeat, dim=-1)))
    return -torch.stack(terms).sum(0)


def _batch_mean(values: Tensor) -> Tensor:
    """The mean of ``values`` over its first axis; 0 (not NaN) for an empty batch, still in the graph."""
    return values.mean() if values.dim() == 0 or len(values) else values.sum(0)


def saturate(mu: Tensor, saturation: float = SATURATION) -> Tensor:
    """The saturating magnitude of :func:`selective_regularizer`, :math:`\\phi(\\mu) = s \\log(1 + \\mu / s)`.

    Equal to :math:`\\mu` to first order at 0, below it after (elementwise; any shape).

    Raises:
        ValueError: a ``saturation`` (a number) that ``mu``'s floating dtype does not hold as a normal number:
            below its smallest normal number (``torch.finfo(dtype).tiny``: 1.2e-38 in float32, 2.2e-308 in
            float64; 0, a negative or NaN too), where it loses precision and, from about 1 / the largest finite
            number on, ``mu / saturation`` overflows to infinity, or above its largest finite number (float32's
            3.4e38), which the dtype holds as infinity; either way the value would be NaN. (:math:`\\phi(\\mu)
            \\to 0` as :math:`s \\to 0`, and :math:`\\phi(\\mu) \\to \\mu` as :math:`s \\to \\infty`:
            ``saturation=None`` in :func:`selective_regularizer`.)
    """
    _check_saturation_fits(saturation, mu)
    return saturation * torch.log1p(mu / saturation)


def _check_saturation_fits(saturation, mu: Tensor) -> None:
    """The ValueError of :func:`saturate` for a number ``saturation`` outside ``mu``'s dtype's normal numbers."""
    if not is_real(saturation) or not isinstance(mu, Tensor) or not mu.is_floating_point():
        return  # a tensor saturation, or integer magnitudes: as torch computes them
    info = torch.finfo(mu.dtype)
    if not saturation >= info.tiny:  # NaN too
        raise ValueError(
            f"saturation must be >= {info.tiny!r}, the smallest normal number of the magnitudes' dtype "
            f"{mu.dtype}, got {saturation!r}: below it the saturation loses precision, and mu / saturation "
            "overflows (the regulariser NaN) from about 1 / its largest finite number"
        )
    if saturation > info.max:
        raise ValueError(
            f"saturation must be <= {info.max!r}, the largest finite number of the magnitudes' dtype {mu.dtype}, "
            f"got {saturation!r}: the dtype holds it as infinity and the regulariser would be NaN (saturation=None "
            "is the linear pull)"
        )


def augerino_regularizer(module: nn.Module) -> Tensor:
    """Augerino's regulariser, :math:`-\\| \\theta \\|_2` per augmentation, summed.

    For an :class:`~augnet.Augerino` (its :class:`~augnet.augerino.LieAugmentation`)
    :math:`\\theta` are the widths; for AugNet layers, the magnitudes. On AugNet
    layers it ignores the weights, so a layer can escape it by putting all its
    weight on one transform with magnitude 0 (the ablation of the AugNet paper).

    A per-instance layer (:class:`~augnet.instance.ConditionedAugmentationLayer`) augments each input at that
    input's own magnitudes :math:`\\mu_b`, its global ones plus its conditioner's offsets: it enters as
    :func:`selective_regularizer` takes it, per sample with the latest forward pass's policy, as the mean over
    that batch of :math:`-\\| \\mu_b \\|_2` (0 for an empty batch), with the gradient into the conditioner
    and the global magnitudes. Its global :attr:`~augnet.AugmentationLayer.magnitudes` alone are the policy of
    an input on which the conditioner outputs 0: regularising them would leave the conditioner free to shrink
    every input's range unopposed.

    Args:
        module: a model or module holding augmentation layers or Augerino augmentations.

    Returns:
        A differentiable scalar, at most 0.

    Raises:
        TypeError, ValueError: ``module`` is not an ``nn.Module``, or holds no augmentation, or a per-instance
            layer that has not run on a batch yet (as :func:`selective_regularizer`).
    """
    terms = []
    for aug in _augmentations(module):
        if isinstance(aug, ConditionedAugmentationLayer):  # per sample: the latest pass's magnitudes (B, Q)
            terms.append(_batch_mean(_row_norms_outward_at_zero(aug.latest_policy()[1])))
        else:
            terms.append(norm_outward_at_zero(aug.magnitudes))
    return -torch.stack(terms).sum(0)


def no_regularizer(module: nn.Module) -> Tensor:
    """Zero, for the no-regulariser ablation (still checks ``module`` has layers, or an Augerino augmentation).

    Args:
        module: a model or module holding augmentation layers or Augerino augmentations.

    Returns:
        A 0-d zero tensor on the augmentation parameters' device and dtype.

    Raises:
        TypeError, ValueError: ``module`` is not an ``nn.Module``, or holds no augmentation.
    """
    layer = _augmentations(module)[0]
    return (layer.raw_magnitudes if isinstance(layer, AugmentationLayer) else layer.raw_width).new_zeros(())


def paper_selective_regularizer(module: nn.Module) -> Tensor:
    """The AugNet paper's selective regulariser, :math:`-\\sum_{layers} \\| w \\odot \\mu \\|_2`.

    :func:`selective_regularizer` with ``units="magnitude", diverse=False, saturation=None``:
    magnitudes in the transforms' own units (a calibrated layer's: its calibrated ones,
    :attr:`~augnet.AugmentationLayer.magnitudes`), linearly, no discount across layers.

    Args:
        module: a model or module holding augmentation layers.

    Returns:
        A differentiable scalar, at most 0.

    Raises:
        TypeError, ValueError: ``module`` is not an ``nn.Module``, or holds no augmentation layer.
    """
    return selective_regularizer(module, units="magnitude", diverse=False, saturation=None)


REGULARIZERS = {
    "selective": selective_regularizer,
    "paper": paper_selective_regularizer,
    "augerino": augerino_regularizer,
    "none": no_regularizer,
}


def get_regularizer(name):
    """The regulariser called ``name`` (:data:`REGULARIZERS`: ``"selective"``, ``"paper"``, ``"augerino"``,
    ``"none"``), or ``name`` itself if it is a callable ``module -> scalar``."""
    if callable(name):
        return name
    if not isinstance(name, str):
        raise TypeError(
            f"regularizer must be the name of one ({sorted(REGULARIZERS)}) or a callable module -> scalar, "
            f"got {type(name).__name__}: {name!r}"
        )
    if name not in REGULARIZERS:
        raise ValueError(f"unknown regularizer {name!r}; expected one of {sorted(REGULARIZERS)} or a callable")
    return REGULARIZERS[name]


class LambdaSchedule:
    """Piecewise-constant regularisation strength over epochs.

    ``values[i]`` applies from ``milestones[i - 1]`` (inclusive) to
    ``milestones[i]``; the default is 0.5 for the first 40 epochs, then 0.05
    (the AugNet paper's CIFAR-10 schedule). Calling it with an epoch (an int >= 0) gives that epoch's value.

    Args:
        values: the strengths, finite and >= 0; one more than ``milestones``.
        milestones: the epochs (ints >= 0, increasing) where the next value starts.
            Either may be a 1-D tensor or NumPy array, and its items 0-d ones (an integer one for an epoch).

    Raises:
        TypeError, ValueError: values or milestones of the wrong type, count or range.

    Examples:
        >>> schedule = LambdaSchedule((0.5, 0.05), milestones=(40,))
        >>> schedule(0), schedule(39), schedule(40)
        (0.5, 0.5, 0.05)
    """

    def __init__(self, values: Sequence[float] = (0.5, 0.05), milestones: Sequence[int] = (40,)) -> None:
        # A 1-D tensor or array gives its values, and each item is read as a number (a 0-d tensor: its value).
        values, milestones = as_values(values, "values"), as_values(milestones, "milestones")
        for name, seq, kind in (("values", values, "numbers"), ("milestones", milestones, "ints (epochs)")):
            if not isinstance(seq, Sequence) or isinstance(seq, str):
                raise TypeError(f"{name} must be a sequence of {kind}, got {seq!r}")
        values, milestones = [number("values", v) for v in values], [number("milestones", m) for m in milestones]
        if not all(_is_number(v) for v in values):
            raise TypeError(f"values must be numbers, got {list(values)!r}")
        if not all(is_int(m) for m in milestones):
            raise TypeError(f"milestones must be ints (epochs), got {list(milestones)!r}")
        values, milestones = [float(v) for v in values], [int(m) for m in milestones]
        if len(values) != len(milestones) + 1:
            raise ValueError(
                f"need one more value than milestones, got {len(values)} values and {len(milestones)} milestones"
            )
        if any(not math.isfinite(v) or v < 0 for v in values):
            raise ValueError(f"lambda values must be finite and non-negative, got {values}")
        if any(b <= a for a, b in itertools.pairwise(milestones)) or any(m < 0 for m in milestones):
            raise ValueError(f"milestones must be non-negative and increasing, got {milestones}")
        self.values, self.milestones = values, milestones

    def __call__(self, epoch: int) -> float:
        epoch = number("epoch", epoch)  # a 0-d tensor or array: the number it holds
        if not is_real(epoch):  # a fractional epoch reads the milestones as numbers; a bool or a string is no epoch
            raise TypeError(f"epoch must be a number (an epoch's index), got {epoch!r}")
        if not epoch >= 0:  # NaN too
            raise ValueError(f"epoch must be >= 0, got {epoch}")
        return self.values[sum(epoch >= m for m in self.milestones)]

    def __repr__(self) -> str:
        return f"LambdaSchedule(values={self.values}, milestones={self.milestones})"


def _is_number(value) -> bool:
    return is_real(value)


def augmentation_parameters(module: nn.Module) -> list[nn.Parameter]:
    """Parameters of every augmentation layer (and Augerino augmentation) inside ``module``."""
    seen, params = set(), []
    for layer in _augmentations(module):
        for p in layer.parameters():
            if id(p) not in seen:
                seen.add(id(p))
                params.append(p)
    return params


#: The default learning rate of the augmentation parameters (:func:`param_groups`). The weight logits
#: and magnitudes live on one fixed scale whatever the trunk, so their rate need not follow the trunk's:
#: at this rate a layer commits to one transform within about 300 Adam steps (10 epochs of a few
#: thousand examples) on the rotation tasks and the digits, with trunk rates from 5e-4 to 1e-2. At the
#: trunk's own 1e-3 or 5e-4 the weights stay within 0.3 of uniform after as many steps; at 1e-2 the
#: digits' layers commit as often but hold smaller rotation ranges and lose accuracy on rotated digits.
AUG_LR = 5e-3
#: The default learning rate of the weight logits (:func:`param_groups`), 3 times :data:`AUG_LR`. The
#: regulariser rewards a weight in proportion to its transform's magnitude, and with the falling pull
#: of :data:`SATURATION` the magnitudes stay moderate, so at :data:`AUG_LR` the weights of the
#: comparison's digits stayed below 0.5 after 10 epochs; at this rate they commit (weights 0.66-0.84).
WEIGHT_LR = 3 * AUG_LR


def param_groups(
    module: nn.Module,
    weight_decay: float = 0.0,
    aug_weight_decay: float = 0.0,
    aug_lr: float | None = AUG_LR,
    magnitude_weight_decay: float | None = None,
    conditioner_lr: float | None = None,
    conditioner_weight_decay: float = 0.0,
    weight_lr: float | None = WEIGHT_LR,
) -> list[dict]:
    """Optimiser parameter groups: trunk parameters, then augmentation parameters (then conditioners).

    Args:
        module: the model (e.g. an :class:`~augnet.AugNet`).
        weight_decay: weight decay of the non-augmentation parameters.
        aug_weight_decay: weight decay of the augmentation parameters
            (weights and magnitudes); 0 by default, so weight decay does not
            fight the regulariser.
        aug_lr: learning rate of the augmentation group(s): :data:`AUG_LR` (5e-3) by default, whatever
            the optimiser's rate; ``None`` leaves them at the optimiser's rate. Meant for Adam-type
            optimisers, whose steps do not scale with the gradient.
        magnitude_weight_decay: if given, the magnitudes (an Augerino's widths)
            get their own group with this weight decay, and ``aug_weight_decay``
            applies to the weight logits only. A decay on the magnitudes alone
            makes a transform keep its magnitude only while it holds weight
            (the regulariser's push on a magnitude is proportional to its
            weight), without pulling the weights towards uniform.
        conditioner_lr: learning rate of the conditioners of per-instance layers
            (:class:`~augnet.instance.ConditionedAugmentationLayer`); default ``aug_lr``.
        conditioner_weight_decay: their weight decay (default 0). Every rate and decay may also be a 0-d tensor
            or NumPy array: the group holds the Python float it holds.
        weight_lr: the learning rate of the weight logits, in a group of their own
            (:data:`WEIGHT_LR`, 1.5e-2, by default, whatever ``aug_lr``); the
            magnitudes keep ``aug_lr``. The regulariser's reward for a weight is
            proportional to its transform's magnitude, so where the magnitudes stay
            moderate (the default falling pull of :func:`selective_regularizer`) the
            weights need the faster rate to commit within 10 epochs (the reproducing
            guide). ``None``: the weight logits share the magnitudes' group and rate
            (augnet's default until the comparison with hand-designed policies).

    Returns:
        ``[trunk, weight logits, magnitudes]``, or ``[trunk group, augmentation group]``
        with ``weight_lr=None`` and no ``magnitude_weight_decay``; a model without weight logits (an
        :class:`~augnet.Augerino`) has no weight-logit group; a model with per-instance layers
        gets one more group at the end, the parameters of their conditioners.

    Raises:
        ValueError: a decay that is negative or not finite, a learning rate that is not positive
            and finite (optimisers do not check per-group values), or a model without augmentation.
        TypeError: a value that is not a number, or a ``module`` that is not an ``nn.Module``.

    Examples:
        >>> import augnet
        >>> from augnet.transforms import image as T
        >>> model = augnet.AugNet(nn.Linear(4, 2), AugmentationLayer([T.Rotate()]))
        >>> groups = param_groups(model, weight_decay=1e-4)
        >>> [len(g["params"]) for g in groups], [g["weight_decay"] for g in groups]
        ([2, 1, 1], [0.0001, 0.0, 0.0])
        >>> [g.get("lr") for g in groups]  # trunk (the optimiser's), weight logits, magnitudes
        [None, 0.015, 0.005]
        >>> [g.get("lr") for g in param_groups(model, aug_lr=None, weight_lr=None)]
        [None, None]
        >>> [g["weight_decay"] for g in param_groups(model, magnitude_weight_decay=1.0)]
        [0.0, 0.0, 1.0]
    """
    given = {"weight_decay": weight_decay, "aug_weight_decay": aug_weight_decay,
             "magnitude_weight_decay": magnitude_weight_decay, "aug_lr": aug_lr, "conditioner_lr": conditioner_lr,
             "weight_lr": weight_lr, "conditioner_weight_decay": conditioner_weight_decay}  # fmt: skip
    for name, value in given.items():
        if value is None and name in ("magnitude_weight_decay", "aug_lr", "conditioner_lr", "weight_lr"):
            continue
        value = given[name] = number(name, value)  # a 0-d tensor or array: the number it holds
        if not _is_number(value):
            raise TypeError(f"param_groups: {name} must be a number, got {value!r}")
        if not math.isfinite(value) or value < 0 or (name.endswith("_lr") and value == 0):
            what = "positive and finite" if name.endswith("_lr") else "finite and >= 0"
            raise ValueError(f"param_groups: {name} must be {what}, got {value!r}")
    (weight_decay, aug_weight_decay, magnitude_weight_decay, aug_lr, conditioner_lr, weight_lr,
     conditioner_weight_decay) = given.values()  # fmt: skip
    aug = augmentation_parameters(module)
    aug_ids = {id(p) for p in aug}
    rest = [p for p in module.parameters() if id(p) not in aug_ids]
    extra = {} if aug_lr is None else {"lr": float(aug_lr)}
    cond_ids = {id(p) for layer in _augmentations(module) if isinstance(layer, ConditionedAugmentationLayer)
                for p in layer.conditioner.parameters()}  # fmt: skip
    cond = [p for p in aug if id(p) in cond_ids]
    aug = [p for p in aug if id(p) not in cond_ids]
    cond_lr = extra if conditioner_lr is None else {"lr": float(conditioner_lr)}
    tail = [{"params": cond, "weight_decay": float(conditioner_weight_decay), **cond_lr}] if cond else []
    if magnitude_weight_decay is None and weight_lr is None:
        return [
            {"params": rest, "weight_decay": float(weight_decay)},
            {"params": aug, "weight_decay": float(aug_weight_decay), **extra},
            *tail,
        ]
    magnitude_ids = set()
    for layer in _augmentations(module):
        magnitude = layer.raw_magnitudes if isinstance(layer, AugmentationLayer) else layer.raw_width
        magnitude_ids.add(id(magnitude))
    logits = [p for p in aug if id(p) not in magnitude_ids]
    magnitudes = [p for p in aug if id(p) in magnitude_ids]
    logits_lr = extra if weight_lr is None else {"lr": float(weight_lr)}
    magnitude_decay = aug_weight_decay if magnitude_weight_decay is None else magnitude_weight_decay
    logits_group = [{"params": logits, "weight_decay": float(aug_weight_decay), **logits_lr}] if logits else []
    return [
        {"params": rest, "weight_decay": float(weight_decay)},
        *logits_group,
        {"params": magnitudes, "weight_decay": float(magnitude_decay), **extra},
        *tail,
    ]
