"""The ranking probe through a model (Yan & Huang, section III): two augmented copies of every image.

Here live the magnitude samplers (:data:`Sampler`), the drawing of two
augmented copies of every image with their magnitudes and the copies' pooled
features (shared with :func:`augnet.probes.ranking.ranking_probe_per_layer_model`),
and :func:`ranking_probe_model`, which runs :func:`ranking_probe` on them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

import torch
from torch import Tensor, nn

from augnet._checks import is_real, number
from augnet.probes._common import (
    Transformed,
    apply_paired,
    check_draws,
    check_model_input,
    check_seed,
    forward_kwargs,
    seeded,
)
from augnet.probes.features import _features, check_rows
from augnet.probes.pairwise_ranking import ranking_probe
from augnet.probes.tau_selection import _check_moved

__all__ = ["Sampler", "ranking_probe_model"]


Sampler = Callable[[int, "torch.Generator | None"], Tensor]


def _uniform_sampler(bounds) -> Sampler:
    read = [number("sampler", b) for b in bounds]
    if not all(is_real(b) and math.isfinite(b) for b in read):  # float("a") named nothing; inf drew NaN features
        raise ValueError(f"a (low, high) sampler needs two finite numbers, got {tuple(bounds)!r}")
    low, high = (float(b) for b in read)
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


def _augment(x: Tensor, transform, param: str | None, sampler: Sampler | None, magnitude, g):
    """One augmented copy of ``x`` (a :class:`~augnet.probes._common.Transformed`, applied batch by batch,
    or a tensor for a plain callable) and the per-row magnitudes it was given."""
    n = x.shape[0]
    if sampler is not None:
        m = sampler(n, g)
        if not isinstance(m, Tensor) or m.shape != (n,):
            got = tuple(m.shape) if isinstance(m, Tensor) else type(m).__name__
            raise ValueError(f"the sampler must return a ({n},) tensor of magnitudes, got {got}")
        if m.is_complex() or not bool(torch.isfinite(m).all()):
            # NaN or inf magnitudes were refused later as NaN features, naming the layer and not the sampler
            raise ValueError(f"the sampler must return finite real magnitudes, got {m.dtype} {m[:8].tolist()}")
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
        return Transformed(transform, x, magnitude, params=params), m.double().cpu()
    transform.check_input(x)
    if transform.mixes_samples:  # rows read other rows: transformed whole
        moved, params = apply_paired(transform, x, magnitude, g)
    else:
        moved = Transformed(transform, x, magnitude, g)
        params = moved.params
    if param not in params:
        raise ValueError(f"{type(transform).__name__} has no param {param!r}; its params are {sorted(params)}")
    return moved, _row_values(params[param], param, n).cpu()


def _model_pairs(model, x, transform, layers, param, sampler, magnitude, copies, seed, batch_size, draws="shared"):
    """Two augmented copies of every image of ``x``, their pooled features of ``layers`` and their magnitudes."""
    if not isinstance(x, Tensor):
        raise TypeError(f"x must be a tensor, got {type(x).__name__}")
    if x.dim() < 1 or x.shape[0] < 2:
        raise ValueError(f"x must hold at least 2 images, got shape {tuple(x.shape)}")
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    check_model_input(model, x)
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
    if not isinstance(layers, (str, Iterable)):  # iterating an int raised a TypeError naming nothing
        raise TypeError(f"layers must be a module name or a list of them, got {type(layers).__name__}: {layers!r}")
    g = seeded(seed + 1, x.device)
    xa, m_a = _augment(x, transform, param, sampler, magnitude, g)
    xb, m_b = _augment(x, transform, param, sampler, magnitude, g)
    for copy in (xa, xb):  # a callable's float64 output was torch's RuntimeError in the first pass
        _check_moved(model, copy, "transform(x, m)" if param is None else "the augmented copies")
    za = _features(
        model, xa, layers, reduce="mean", batch_size=batch_size, **forward_kwargs(model, copies, seed, x.device, draws)
    )
    zb = _features(
        model,
        xb,
        layers,
        reduce="mean",
        batch_size=batch_size,
        **forward_kwargs(model, copies, seed, x.device, draws, 1),
    )
    check_rows(za, len(x))  # each copy's features are paired with its magnitude
    check_rows(zb, len(x))
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
        model: probed in evaluation mode (its modes are restored afterwards).
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
        batch_size: run the model in chunks of this many rows (default 256); the copies are
            transformed chunk by chunk too.

    Returns:
        :func:`ranking_probe`'s dict, plus ``"m_a"``, ``"m_b"`` (the magnitudes, (B,)).
    """
    seed = check_seed(seed)  # before anything runs: an int in [0, 2**63 - 3], a NumPy one too
    za, zb, m_a, m_b = _model_pairs(
        model, x, transform, layers, param, sampler, magnitude, copies, seed, batch_size, draws
    )
    out = ranking_probe(
        za, zb, m_a, m_b, test_fraction=test_fraction, l2=l2, aggregate=aggregate, generator=seeded(seed)
    )
    out.update({"m_a": m_a, "m_b": m_b})
    return out
