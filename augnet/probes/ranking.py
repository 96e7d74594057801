"""Does a representation encode how strongly an input was augmented? (Yan & Huang, sections III and V).

Two augmented copies ``a`` and ``b`` of the same image, with augmentation
magnitudes ``v_a`` and ``v_b`` (e.g. brightness shifts, rotation angles), are
mapped to globally average-pooled features ``z_a`` and ``z_b`` of the chosen
layers. A linear scorer ``s(z) = w . z`` is fitted so that the copy with the
larger magnitude scores higher, with the pairwise logistic rank loss (section
III)::

    loss = log(1 + exp(-sgn(v_a - v_b) * (s(z_a) - s(z_b))))

and the probe reports the pairwise ranking accuracy on held-out pairs (chance
is 50%). A bias would cancel in ``s(z_a) - s(z_b)``, so the scorer has none.

Layer importance (section V-D): the contribution of a pooled channel is
``|w_k| * std_k``, the weight times the standard deviation of that channel's
activations; per layer these are aggregated by their mean or their max over
the layer's channels and normalised to sum to 1 over the layers.

The features are standardised (divided by each channel's standard deviation
over the training copies) before the fit, so the L2 penalty does not depend
on the units of each layer; the weight on a standardised channel is then
exactly ``|w_k| * std_k`` in raw units. The fit is full-batch L-BFGS in float64
from zero weights, deterministic given the train / test split.

Per layer (section V-D, Table II): :func:`ranking_probe_per_layer` (and
``_model``) fits one scorer per layer, each on that layer alone, on one shared
split, in one call. :func:`ranking_table` lays several tasks' per-layer
accuracies (or the all-layers scorer's importances, Fig. 5) out as a tasks x
layers table, and :func:`plot_ranking_heatmap` draws it as Fig. 5 does.

Yan and Huang, "Do CNNs Encode Data Augmentations?", IJCNN 2021.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Callable, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from augnet.probes._common import apply_paired, check_draws, forward_kwargs, seeded
from augnet.probes.features import features, reduce_features

__all__ = [
    "AGGREGATES",
    "layer_importance",
    "pairwise_rank_loss",
    "plot_ranking_heatmap",
    "ranking_probe",
    "ranking_probe_model",
    "ranking_probe_per_layer",
    "ranking_probe_per_layer_model",
    "ranking_table",
]

AGGREGATES = ("mean", "max")
REDUCTIONS = ("mean", "sum", "none")
#: The name given to features passed as a single tensor rather than a dict of layers.
FEATURES = "features"


def pairwise_rank_loss(s_hi: Tensor, s_lo: Tensor, sign: Tensor | None = None, reduction: str = "mean") -> Tensor:
    """Pairwise logistic rank loss ``log(1 + exp(-sign * (s_hi - s_lo)))`` (Yan & Huang, section III).

    With ``sign`` left out, ``s_hi`` is the score of the copy that should rank
    higher. ``sign = sgn(v_1 - v_2)`` says which of the two should rank higher
    (+1: the first, -1: the second, 0: a tie, which costs ``log 2`` and has no
    gradient), so ``pairwise_rank_loss(a, b, sign) == pairwise_rank_loss(b, a, -sign)``.
    Computed as ``softplus``, stable for large score gaps.

    Args:
        s_hi, s_lo: scores of the two copies of each pair.
        sign: optional per-pair order in {-1, 0, +1}, broadcastable to the scores.
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.

    Shape:
        - s_hi, s_lo: :math:`(P,)` (any shape, the same for both)
        - output: scalar, or :math:`(P,)` for ``reduction="none"``

    Examples:
        >>> round(float(pairwise_rank_loss(torch.tensor([1.0]), torch.tensor([1.0]))), 4)  # log 2
        0.6931
        >>> float(pairwise_rank_loss(torch.tensor([30.0]), torch.tensor([0.0]))) < 1e-12
        True
    """
    if not isinstance(s_hi, Tensor) or not isinstance(s_lo, Tensor):
        raise TypeError(f"s_hi and s_lo must be tensors, got {type(s_hi).__name__} and {type(s_lo).__name__}")
    if s_hi.shape != s_lo.shape:
        raise ValueError(f"s_hi and s_lo must have the same shape, got {tuple(s_hi.shape)} and {tuple(s_lo.shape)}")
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    gap = s_hi - s_lo
    if sign is not None:
        sign = torch.as_tensor(sign, dtype=gap.dtype, device=gap.device)
        if not bool(((sign == -1) | (sign == 0) | (sign == 1)).all()):
            raise ValueError("sign must hold -1, 0 or +1 only")
        gap = sign * gap
    loss = F.softplus(-gap)
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def layer_importance(
    weight: Tensor, std: Tensor, sizes: Mapping[str, int], aggregate: str = "mean"
) -> dict[str, float]:
    """Per-layer importance ``|w| * std`` aggregated over each layer's channels, summing to 1.

    Args:
        weight: the scorer's weights on the concatenated pooled channels, in raw units.
        std: each channel's standard deviation over the probed copies.
        sizes: ``{layer: channels}`` in the order the layers were concatenated.
        aggregate: ``"mean"`` or ``"max"`` over a layer's channels (Yan & Huang, Fig. 5).

    Returns:
        ``{layer: importance}``, non-negative and summing to 1; every value is
        NaN (with a warning) when every weight is 0.

    Shape:
        - weight, std: :math:`(D,)` with ``D = sum(sizes.values())``

    Examples:
        >>> imp = layer_importance(torch.tensor([2.0, 0.0, 1.0]), torch.tensor([1.0, 5.0, 1.0]), {"a": 2, "b": 1})
        >>> imp == {"a": 0.5, "b": 0.5}
        True
    """
    if aggregate not in AGGREGATES:
        raise ValueError(f"aggregate must be one of {AGGREGATES}, got {aggregate!r}")
    if not isinstance(weight, Tensor) or not isinstance(std, Tensor):
        raise TypeError("weight and std must be tensors")
    if weight.dim() != 1 or weight.shape != std.shape:
        raise ValueError(
            f"weight and std must be 1-D of the same length, got {tuple(weight.shape)} and {tuple(std.shape)}"
        )
    if not sizes:
        raise ValueError("sizes must name at least one layer")
    bad = {k: v for k, v in sizes.items() if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1}
    if bad:
        raise ValueError(f"sizes must be positive channel counts, got {bad}")
    if sum(sizes.values()) != weight.numel():
        raise ValueError(f"sizes add up to {sum(sizes.values())} channels, but weight has {weight.numel()}")
    if bool((std < 0).any()):
        raise ValueError("std must be non-negative")
    contribution = weight.detach().double().abs() * std.detach().double()
    parts = torch.split(contribution, list(sizes.values()))
    agg = torch.stack([p.mean() if aggregate == "mean" else p.max() for p in parts])
    total = float(agg.sum())
    if total <= 0.0:
        warnings.warn(
            "layer_importance: every weight is 0 (the features did not separate the pairs); importances are NaN",
            RuntimeWarning,
            stacklevel=2,
        )
        return {name: math.nan for name in sizes}
    return {name: float(a / total) for name, a in zip(sizes, agg, strict=True)}


def _as_layers(z, name: str) -> dict[str, Tensor]:
    """A tensor or a mapping of tensors -> {layer: (P, Ch)} float64, globally average pooled."""
    if isinstance(z, Tensor):
        z = {FEATURES: z}
    if not isinstance(z, Mapping):
        raise TypeError(f"{name} must be a tensor or a dict of tensors, got {type(z).__name__}")
    if not z:
        raise ValueError(f"{name} must hold at least one layer")
    out = {}
    for layer, a in z.items():
        if not isinstance(a, Tensor):
            raise TypeError(f"{name}[{layer!r}] must be a tensor, got {type(a).__name__}")
        if a.dim() < 2:
            raise ValueError(f"{name}[{layer!r}] must be (P, channels, ...), got shape {tuple(a.shape)}")
        if not (a.is_floating_point() or a.dtype in (torch.int32, torch.int64)):
            raise TypeError(f"{name}[{layer!r}] must hold numbers, got dtype {a.dtype}")
        out[layer] = reduce_features(a.detach(), "mean").double().cpu()  # pooled: small, fitted on CPU
        if not bool(torch.isfinite(out[layer]).all()):
            raise ValueError(f"{name}[{layer!r}] holds NaN or infinite values")
    return out


def _as_magnitudes(m, n: int, name: str) -> Tensor:
    if not isinstance(m, Tensor):
        raise TypeError(f"{name} must be a tensor, got {type(m).__name__}")
    if m.dim() != 1 or m.shape[0] != n:
        raise ValueError(f"{name} must have shape ({n},), one magnitude per pair, got {tuple(m.shape)}")
    m = m.detach().double().cpu()
    if bool(torch.isnan(m).any()):
        raise ValueError(f"{name} holds NaN")
    return m


def _fit(d: Tensor, l2: float, max_iter: int) -> tuple[Tensor, float]:
    """Minimise ``mean softplus(-d @ w) + l2 / 2 |w|^2`` from ``w = 0`` (d: oriented differences)."""
    w = torch.zeros(d.shape[1], dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS(
        [w], lr=1.0, max_iter=max_iter, tolerance_grad=1e-9, tolerance_change=1e-12, line_search_fn="strong_wolfe"
    )

    def closure():
        opt.zero_grad()
        loss = F.softplus(-(d @ w)).mean() + 0.5 * l2 * (w * w).sum()
        loss.backward()
        return loss

    with torch.enable_grad():
        opt.step(closure)
    w = w.detach()
    return w, float(F.softplus(-(d @ w)).mean())


def _correct(gap: Tensor) -> Tensor:
    """1 where the higher-magnitude copy scores higher, 0 where lower, 0.5 on a score tie."""
    return torch.where(gap > 0, 1.0, torch.where(gap < 0, 0.0, 0.5)).double()


def ranking_probe(
    z_a: Tensor | Mapping[str, Tensor],
    z_b: Tensor | Mapping[str, Tensor],
    m_a: Tensor,
    m_b: Tensor,
    test_fraction: float = 0.5,
    l2: float = 1e-3,
    aggregate: str = "mean",
    generator: torch.Generator | None = None,
    max_iter: int = 500,
) -> dict:
    """Fit a linear pairwise ranker of augmentation magnitude on pooled features; held-out accuracy.

    Pair ``p`` is two augmented copies of one image: features ``z_a[p]``,
    ``z_b[p]`` and magnitudes ``m_a[p]``, ``m_b[p]``. Pairs with equal
    magnitudes carry no order and are dropped. The others are split at random
    (``generator``) into training and held-out pairs; the scorer is fitted on
    the training pairs (see the module docstring) and scored on both.

    Args:
        z_a, z_b: pooled features of the two copies, a (P, D) tensor or
            ``{layer: (P, Ch) or (P, Ch, ...)}`` (feature maps are globally
            average pooled; layers are concatenated in the order of ``z_a``).
        m_a, m_b: the augmentation magnitudes of the two copies.
        test_fraction: the share of pairs held out, in (0, 1).
        l2: L2 penalty on the weights of the standardised features.
        aggregate: ``"mean"`` or ``"max"``, for :func:`layer_importance`.
        generator: draws the train / test split.
        max_iter: L-BFGS iterations.

    Returns:
        ``{"accuracy", "train_accuracy"}`` (floats in [0, 1]; chance is 0.5),
        ``"correct"`` (per held-out pair: 1, 0, or 0.5 on a score tie),
        ``"test_index"``, ``"train_index"`` (pair indices), ``"weight"`` (D,)
        in raw units (score a copy with ``concatenated features @ weight``),
        ``"std"`` (D,) (0 for channels constant up to rounding, which get no
        weight), ``"sizes"`` (``{layer: channels}``), ``"importance"``
        (``{layer: share}``), ``"loss"`` (final training rank loss),
        ``"n_train"``, ``"n_test"``, ``"n_ties"`` (pairs dropped).

    Shape:
        - z_a, z_b: :math:`(P, D)` or a dict of :math:`(P, Ch_l, ...)`
        - m_a, m_b: :math:`(P,)`

    Examples:
        >>> g = torch.Generator().manual_seed(0)
        >>> m_a, m_b = torch.rand(200, generator=g), torch.rand(200, generator=g)
        >>> noise = torch.randn(200, 3, generator=g)
        >>> z_a, z_b = torch.stack([m_a, noise[:, 0], noise[:, 1]], 1), torch.stack([m_b, noise[:, 2], noise[:, 1]], 1)
        >>> ranking_probe(z_a, z_b, m_a, m_b, generator=g)["accuracy"]
        1.0
    """
    la, lb = _as_layers(z_a, "z_a"), _as_layers(z_b, "z_b")
    if list(la) != list(lb):
        raise ValueError(f"z_a and z_b must name the same layers, got {list(la)} and {list(lb)}")
    n = next(iter(la.values())).shape[0]
    for layer in la:
        if la[layer].shape != lb[layer].shape or la[layer].shape[0] != n:
            raise ValueError(
                f"layer {layer!r}: z_a and z_b must be (P, Ch) with the same P for every layer, "
                f"got {tuple(la[layer].shape)} and {tuple(lb[layer].shape)}"
            )
    ma, mb = _as_magnitudes(m_a, n, "m_a"), _as_magnitudes(m_b, n, "m_b")
    if aggregate not in AGGREGATES:
        raise ValueError(f"aggregate must be one of {AGGREGATES}, got {aggregate!r}")
    if isinstance(test_fraction, bool) or not isinstance(test_fraction, numbers.Real) or not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must lie in (0, 1), got {test_fraction!r}")
    if isinstance(l2, bool) or not isinstance(l2, numbers.Real) or l2 < 0:
        raise ValueError(f"l2 must be a non-negative number, got {l2!r}")
    if isinstance(max_iter, bool) or not isinstance(max_iter, numbers.Integral) or max_iter < 1:
        raise ValueError(f"max_iter must be a positive integer, got {max_iter!r}")

    sizes = {layer: a.shape[1] for layer, a in la.items()}
    za, zb = torch.cat(list(la.values()), 1), torch.cat(list(lb.values()), 1)
    sign = torch.sign(ma - mb)
    kept = torch.nonzero(sign != 0).flatten()
    order = kept[torch.randperm(len(kept), generator=generator)]
    n_test = round(len(order) * float(test_fraction))
    if n_test < 1 or len(order) - n_test < 1:
        raise ValueError(
            f"need at least one training and one held-out pair with different magnitudes; got {len(kept)} of {n} "
            f"pairs with different magnitudes and test_fraction={test_fraction}"
        )
    test, train = order[:n_test], order[n_test:]

    seen = torch.cat([za[train], zb[train]])
    std = seen.std(0, unbiased=False)
    # Channels constant up to rounding carry no signal; standardising them would amplify the rounding.
    live = std > 1e-12 * (1.0 + seen.pow(2).mean(0).sqrt())
    std = torch.where(live, std, torch.zeros_like(std))
    scale = torch.where(live, std, torch.ones_like(std))
    # Differences oriented so that the copy with the larger magnitude comes first.
    d = sign[:, None] * (za - zb) / scale * live
    w_std, loss = _fit(d[train], float(l2), int(max_iter))
    weight = torch.where(live, w_std / scale, torch.zeros_like(w_std))

    gap = d @ w_std
    correct = _correct(gap[test])
    return {
        "accuracy": float(correct.mean()),
        "train_accuracy": float(_correct(gap[train]).mean()),
        "correct": correct,
        "test_index": test,
        "train_index": train,
        "weight": weight,
        "std": std,
        "sizes": sizes,
        "importance": layer_importance(weight, std, sizes, aggregate),
        "loss": loss,
        "n_train": len(train),
        "n_test": len(test),
        "n_ties": n - len(kept),
    }


Sampler = Callable[[int, "torch.Generator | None"], Tensor]


def _uniform_sampler(bounds) -> Sampler:
    low, high = (float(b) for b in bounds)
    if not low < high:
        raise ValueError(f"a (low, high) sampler needs low < high, got {bounds}")

    def sample(n: int, generator: torch.Generator | None) -> Tensor:
        return torch.rand(n, generator=generator, dtype=torch.float64) * (high - low) + low

    return sample


def _row_values(value: Tensor, name: str, n: int) -> Tensor:
    """A per-row parameter (N, ...) that is constant within each row -> (N,)."""
    if value.dim() == 0 or value.shape[0] != n:
        raise ValueError(f"param {name!r} is not a per-row parameter: shape {tuple(value.shape)} for {n} rows")
    flat = value.detach().reshape(n, -1)
    if not bool((flat == flat[:, :1]).all()):
        raise ValueError(
            f"param {name!r} varies within a row (shape {tuple(value.shape)}), so it is not one magnitude per copy; "
            "pass a sampler to set it instead"
        )
    return flat[:, 0].double()


def _augment(x: Tensor, transform, param: str | None, sampler: Sampler | None, magnitude, g) -> tuple[Tensor, Tensor]:
    """One augmented copy of ``x`` and the per-row magnitudes it was given."""
    n = x.shape[0]
    if sampler is not None:
        m = sampler(n, g)
        if not isinstance(m, Tensor) or m.shape != (n,):
            got = tuple(m.shape) if isinstance(m, Tensor) else type(m).__name__
            raise ValueError(f"the sampler must return a ({n},) tensor of magnitudes, got {got}")
        if param is None:  # a plain callable transform(x, m)
            return transform(x, m.to(x.device, x.dtype if x.is_floating_point() else m.dtype)), m.double().cpu()
        transform.check_input(x)
        params = dict(transform.sample(x, transform.check_magnitude(magnitude, x), generator=g))
        if param not in params:
            raise ValueError(f"{type(transform).__name__} has no param {param!r}; its params are {sorted(params)}")
        old = params[param]
        if old.dim() == 0 or old.shape[0] != n:
            raise ValueError(f"param {param!r} is not a per-row parameter: shape {tuple(old.shape)} for {n} rows")
        shaped = m.to(device=old.device, dtype=old.dtype).reshape(n, *([1] * (old.dim() - 1)))
        params[param] = shaped.expand_as(old)
        return transform.apply_transform(x, params), m.double().cpu()
    transform.check_input(x)
    xt, params = apply_paired(transform, x, magnitude, g)
    if param not in params:
        raise ValueError(f"{type(transform).__name__} has no param {param!r}; its params are {sorted(params)}")
    return xt, _row_values(params[param], param, n).cpu()


def _model_pairs(model, x, transform, layers, param, sampler, magnitude, copies, seed, batch_size, draws="shared"):
    """Two augmented copies of every image of ``x``, their pooled features of ``layers`` and their magnitudes."""
    if not isinstance(x, Tensor):
        raise TypeError(f"x must be a tensor, got {type(x).__name__}")
    if x.dim() < 1 or x.shape[0] < 2:
        raise ValueError(f"x must hold at least 2 images, got shape {tuple(x.shape)}")
    if sampler is not None and not callable(sampler):
        if isinstance(sampler, (tuple, list)) and len(sampler) == 2:
            sampler = _uniform_sampler(sampler)
        else:
            raise TypeError(f"sampler must be a callable (n, generator) -> (n,) or a (low, high) pair, got {sampler!r}")
    if param is None and sampler is None:
        raise ValueError("give param (the transform's parameter to rank by), a sampler, or both")
    if param is None and not callable(transform):
        raise TypeError(f"transform must be callable, got {type(transform).__name__}")
    if param is not None and not (hasattr(transform, "sample") and hasattr(transform, "apply_transform")):
        raise TypeError(
            f"param={param!r} needs an augnet transform with sample() and apply_transform(), "
            f"got {type(transform).__name__}"
        )
    check_draws(draws)
    g = seeded(seed + 1, x.device)
    xa, m_a = _augment(x, transform, param, sampler, magnitude, g)
    xb, m_b = _augment(x, transform, param, sampler, magnitude, g)
    za = features(
        model, xa, layers, reduce="mean", batch_size=batch_size, **forward_kwargs(model, copies, seed, x.device, draws)
    )
    zb = features(
        model,
        xb,
        layers,
        reduce="mean",
        batch_size=batch_size,
        **forward_kwargs(model, copies, seed, x.device, draws, 1),
    )
    return za, zb, m_a, m_b


@torch.no_grad()
def ranking_probe_model(
    model: nn.Module,
    x: Tensor,
    transform,
    layers: str | Sequence[str] = "output",
    param: str | None = None,
    sampler: Sampler | tuple[float, float] | None = None,
    magnitude: float = 1.0,
    test_fraction: float = 0.5,
    l2: float = 1e-3,
    aggregate: str = "mean",
    copies: int | None = None,
    seed: int = 0,
    batch_size: int | None = None,
    draws: str = "shared",
) -> dict:
    """:func:`ranking_probe` on two augmented copies of every image of ``x``, through ``model``.

    Each image gives one pair. The copies' magnitudes come from one of:

    - an augnet transform and ``param`` with no ``sampler``: each copy draws
      its parameters at ``magnitude`` and is labelled by its parameter
      ``param`` (e.g. ``"shift"`` of :class:`~augnet.transforms.image.Brightness`,
      ``"angle"`` of :class:`~augnet.transforms.image.Rotate`);
    - an augnet transform, ``param`` and a ``sampler``: the sampler draws the
      values of ``param`` (the other parameters are drawn at ``magnitude``);
    - a callable ``transform(x, m)`` applying per-row magnitudes ``m`` (B,),
      with a ``sampler`` and no ``param``.

    A sampler is ``sampler(n, generator) -> (n,) tensor`` or a ``(low, high)``
    pair for a uniform draw.

    Args:
        model: probed in its current mode (call ``.eval()``).
        x: the images, (B, ...).
        transform: see above.
        layers: the layers whose globally pooled activations the scorer reads
            (:func:`~augnet.probes.features` with ``reduce="mean"``).
        param, sampler, magnitude: see above.
        test_fraction, l2, aggregate: as in :func:`ranking_probe`.
        copies: for an AugNet, the number of copies it averages.
        draws: ``"shared"`` or ``"independent"`` AugNet draws in the two copies' passes
            (see :func:`~augnet.probes.invariance_curve`).
        seed: seeds the augmentations (``seed + 1``), the split (``seed``) and AugNet's own draws.
        batch_size: run the model in chunks.

    Returns:
        :func:`ranking_probe`'s dict, plus ``"m_a"``, ``"m_b"`` (the magnitudes, (B,)).
    """
    za, zb, m_a, m_b = _model_pairs(
        model, x, transform, layers, param, sampler, magnitude, copies, seed, batch_size, draws
    )
    out = ranking_probe(
        za, zb, m_a, m_b, test_fraction=test_fraction, l2=l2, aggregate=aggregate, generator=seeded(seed)
    )
    out.update({"m_a": m_a, "m_b": m_b})
    return out


# ---------------------------------------------------------------- every layer alone (Table II), tasks x layers (Fig. 5)


def _clone_generator(state: Tensor, device) -> torch.Generator:
    g = torch.Generator(device=device)
    g.set_state(state)
    return g


def ranking_probe_per_layer(
    z_a: Tensor | Mapping[str, Tensor],
    z_b: Tensor | Mapping[str, Tensor],
    m_a: Tensor,
    m_b: Tensor,
    test_fraction: float = 0.5,
    l2: float = 1e-3,
    aggregate: str = "mean",
    generator: torch.Generator | None = None,
    max_iter: int = 500,
    combined: bool = True,
) -> dict:
    """:func:`ranking_probe` on each layer alone, on one shared split: Yan & Huang's Table II.

    Every layer of ``z_a`` / ``z_b`` gets its own linear scorer, fitted and
    scored on the same training / held-out pairs (the split is drawn once from
    ``generator``), so the layers' accuracies are comparable. With
    ``combined=True`` the scorer on all layers concatenated is fitted too (the
    paper's Table I accuracy), and its per-layer importances are what Fig. 5
    draws.

    A layer whose features do not move between the copies ranks at exactly
    0.5 (with a warning naming the layer).

    Args:
        z_a, z_b, m_a, m_b, test_fraction, l2, aggregate, max_iter: as in :func:`ranking_probe`.
        generator: draws the split shared by every layer; it is advanced as by
            one :func:`ranking_probe` call (``None``: a seed is drawn from
            torch's global generator).
        combined: also fit the scorer on all layers together.

    Returns:
        ``"accuracy"`` and ``"train_accuracy"`` (``{layer: float}``, held-out
        and training pairwise accuracy, chance 0.5; the rows of Table II),
        ``"layers"`` (``{layer: ranking_probe dict}`` of each layer's own
        scorer), ``"combined"`` (the all-layers :func:`ranking_probe` dict, or
        ``None``), ``"importance"`` (the combined scorer's ``{layer: share}``,
        or ``None``), and the shared ``"test_index"``, ``"train_index"``,
        ``"n_train"``, ``"n_test"``, ``"n_ties"``.

    Examples:
        >>> g = torch.Generator().manual_seed(0)
        >>> m_a, m_b = torch.rand(200, generator=g), torch.rand(200, generator=g)
        >>> z_a = {"signal": m_a[:, None] ** 3, "noise": torch.randn(200, 4, generator=g)}
        >>> z_b = {"signal": m_b[:, None] ** 3, "noise": torch.randn(200, 4, generator=g)}
        >>> out = ranking_probe_per_layer(z_a, z_b, m_a, m_b, generator=g)
        >>> out["accuracy"]["signal"], 0.35 < out["accuracy"]["noise"] < 0.65
        (1.0, True)
    """
    la, lb = _as_layers(z_a, "z_a"), _as_layers(z_b, "z_b")
    if list(la) != list(lb):
        raise ValueError(f"z_a and z_b must name the same layers, got {list(la)} and {list(lb)}")
    if not isinstance(combined, bool):
        raise TypeError(f"combined must be True or False, got {combined!r}")
    if generator is None:
        generator = torch.Generator().manual_seed(int(torch.randint(0, 2**62, (1,))))
    elif not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    state, device = generator.get_state(), generator.device

    def probe(za, zb) -> tuple[dict, torch.Generator]:
        g = _clone_generator(state, device)  # every fit sees the same split
        out = ranking_probe(
            za, zb, m_a, m_b, test_fraction=test_fraction, l2=l2, aggregate=aggregate, generator=g, max_iter=max_iter
        )
        return out, g

    per_layer, g = {}, None
    for layer in la:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            per_layer[layer], g = probe({layer: la[layer]}, {layer: lb[layer]})
        for w in caught:
            warnings.warn(f"layer {layer!r}: {w.message}", w.category, stacklevel=2)
    whole = probe(la, lb)[0] if combined else None
    generator.set_state(g.get_state())  # advanced as by one ranking_probe call
    first = next(iter(per_layer.values()))
    return {
        "accuracy": {layer: r["accuracy"] for layer, r in per_layer.items()},
        "train_accuracy": {layer: r["train_accuracy"] for layer, r in per_layer.items()},
        "layers": per_layer,
        "combined": whole,
        "importance": None if whole is None else whole["importance"],
        "test_index": first["test_index"],
        "train_index": first["train_index"],
        "n_train": first["n_train"],
        "n_test": first["n_test"],
        "n_ties": first["n_ties"],
    }


@torch.no_grad()
def ranking_probe_per_layer_model(
    model: nn.Module,
    x: Tensor,
    transform,
    layers: str | Sequence[str],
    param: str | None = None,
    sampler: Sampler | tuple[float, float] | None = None,
    magnitude: float = 1.0,
    test_fraction: float = 0.5,
    l2: float = 1e-3,
    aggregate: str = "mean",
    copies: int | None = None,
    seed: int = 0,
    batch_size: int | None = None,
    combined: bool = True,
    draws: str = "shared",
) -> dict:
    """:func:`ranking_probe_per_layer` through ``model``: per-layer ranking accuracy in one call (Table II).

    The two augmented copies of every image are drawn and passed through the
    model once; every layer of ``layers`` is then probed alone on the same
    split. With the same ``seed``, a layer's accuracy equals
    ``ranking_probe_model(..., layers=[layer])["accuracy"]``.

    Args:
        model, x, transform, param, sampler, magnitude, copies, seed, batch_size, draws: as in
            :func:`ranking_probe_model`.
        layers: the layers to probe, one by one (names from ``model.named_modules()``, or ``"output"``).
        test_fraction, l2, aggregate, combined: as in :func:`ranking_probe_per_layer`.

    Returns:
        :func:`ranking_probe_per_layer`'s dict, plus ``"m_a"``, ``"m_b"`` (the magnitudes, (B,)).
    """
    za, zb, m_a, m_b = _model_pairs(
        model, x, transform, layers, param, sampler, magnitude, copies, seed, batch_size, draws
    )
    out = ranking_probe_per_layer(
        za,
        zb,
        m_a,
        m_b,
        test_fraction=test_fraction,
        l2=l2,
        aggregate=aggregate,
        generator=seeded(seed),
        combined=combined,
    )
    out.update({"m_a": m_a, "m_b": m_b})
    return out


def _layer_values(result, value: str, task) -> dict[str, float]:
    """``{layer: number}`` from a per-layer result, a ranking_probe result or a plain mapping."""
    if not isinstance(result, Mapping):
        raise TypeError(f"results[{task!r}] must be a dict, got {type(result).__name__}")
    picked = result.get(value) if value in result else result
    if picked is None and value == "importance":
        raise ValueError(f"results[{task!r}] has no importance: run ranking_probe_per_layer with combined=True")
    if (
        isinstance(picked, Mapping)
        and picked
        and all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in picked.values())
    ):
        return {str(k): float(v) for k, v in picked.items()}
    raise ValueError(
        f"results[{task!r}] must be a {{layer: number}} dict or a result whose {value!r} is one, "
        f"got keys {list(result)[:8]}"
    )


def ranking_table(results: Mapping[str, Mapping], value: str = "accuracy", layers: Sequence[str] | None = None) -> dict:
    """A tasks x layers table of per-layer ranking results (Yan & Huang, Table II and Fig. 5).

    Args:
        results: ``{task: result}`` in the order to show the tasks (the paper
            orders them from low-level to high-level), where a result is a
            :func:`ranking_probe_per_layer` dict, a :func:`ranking_probe` dict
            (for ``value="importance"``) or a plain ``{layer: number}`` dict.
        value: which per-layer number to read: ``"accuracy"`` (held-out, each
            layer alone: Table II), ``"train_accuracy"``, or ``"importance"``
            (the all-layers scorer's shares: Fig. 5).
        layers: the columns, in order; by default every layer met, in the
            order first met. A layer a task lacks is NaN.

    Returns:
        ``{"tasks": [task, ...], "layers": [layer, ...], "values": (T, L)
        float64 tensor, "value": value}``.

    Examples:
        >>> t = ranking_table({"brightness": {"b1": 1.0, "b2": 0.75}, "hue": {"b1": 0.75, "b2": 0.5}})
        >>> t["tasks"], t["layers"], t["values"].tolist()
        (['brightness', 'hue'], ['b1', 'b2'], [[1.0, 0.75], [0.75, 0.5]])
    """
    if not isinstance(results, Mapping) or not results:
        raise ValueError("results must be a non-empty {task: result} dict")
    if not isinstance(value, str):
        raise TypeError(f"value must be a string, got {type(value).__name__}")
    rows = {str(task): _layer_values(result, value, task) for task, result in results.items()}
    if layers is None:
        columns = list(dict.fromkeys(layer for row in rows.values() for layer in row))
    else:
        columns = [layers] if isinstance(layers, str) else [str(layer) for layer in layers]
        if not columns:
            raise ValueError("layers must name at least one layer")
        unknown = [c for c in columns if not any(c in row for row in rows.values())]
        if unknown:
            raise ValueError(f"no task has layer(s) {unknown}")
    values = torch.tensor([[row.get(c, math.nan) for c in columns] for row in rows.values()], dtype=torch.float64)
    return {"tasks": list(rows), "layers": columns, "values": values, "value": value}


def plot_ranking_heatmap(
    table: Mapping,
    path,
    title: str | None = None,
    annotate: bool = True,
    cmap: str = "viridis",
    vmin: float | None = None,
    vmax: float | None = None,
):
    """Heatmap of a :func:`ranking_table`: layers down, tasks across, as in Yan & Huang's Fig. 5.

    Needs matplotlib (``pip install "augnet[viz]"``), imported only here.

    Args:
        table: from :func:`ranking_table`.
        path: where to write the PNG.
        title: optional figure title.
        annotate: write each cell's value in it (NaN cells are left blank).
        cmap: a matplotlib colour map.
        vmin, vmax: the colour scale; for accuracies it defaults to
            [min(0.5, lowest), 1] (chance at the bottom), otherwise to the data's range.

    Returns:
        The path written.
    """
    from augnet.viz import require_matplotlib, save_figure

    if not isinstance(table, Mapping) or not {"tasks", "layers", "values"} <= set(table):
        raise ValueError("table must be a dict from ranking_table, with 'tasks', 'layers' and 'values'")
    tasks, layers = list(table["tasks"]), list(table["layers"])
    values = torch.as_tensor(table["values"], dtype=torch.float64)
    if values.shape != (len(tasks), len(layers)):
        raise ValueError(f"values must be (tasks, layers) = ({len(tasks)}, {len(layers)}), got {tuple(values.shape)}")
    what = str(table.get("value", "value"))
    finite = values[torch.isfinite(values)]
    if what.endswith("accuracy") and len(finite):
        vmin = min(0.5, float(finite.min())) if vmin is None else vmin
        vmax = 1.0 if vmax is None else vmax

    plt = require_matplotlib()
    grid = values.T.numpy()  # layers down, tasks across
    fig, ax = plt.subplots(figsize=(max(4.0, 0.9 * len(tasks) + 2.5), max(3.0, 0.45 * len(layers) + 1.5)))
    image = ax.imshow(grid, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    ax.set_xticks(range(len(tasks)), tasks, rotation=30, ha="right")
    ax.set_yticks(range(len(layers)), layers)
    ax.set_xlabel("task")
    ax.set_ylabel("layer")
    fig.colorbar(image, ax=ax, label=what.replace("_", " "))
    if annotate:
        lo, hi = image.get_clim()
        for i in range(len(layers)):
            for j in range(len(tasks)):
                v = float(grid[i, j])
                if math.isfinite(v):
                    dark = (v - lo) / (hi - lo) < 0.5 if hi > lo else True
                    ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=8, color="w" if dark else "k")
    if title:
        ax.set_title(title)
    return save_figure(fig, path)
