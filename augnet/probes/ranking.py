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

Where the code lives: the per-layer probe and the table are here; the rank
loss, the layer importance and :func:`ranking_probe` in
:mod:`augnet.probes.pairwise_ranking`; :func:`ranking_probe_model` and the
drawing of the augmented copies in :mod:`augnet.probes.ranking_model`;
:func:`plot_ranking_heatmap` in :mod:`augnet.probes.plots`. Every name of
``__all__`` can be imported from here.

Yan and Huang, "Do CNNs Encode Data Augmentations?", IJCNN 2021.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Iterable, Mapping, Sequence

import torch
from torch import Tensor, nn

from augnet.probes._common import check_seed, seeded
from augnet.probes.pairwise_ranking import (
    AGGREGATES,
    _as_layers,
    layer_importance,
    pairwise_rank_loss,
    ranking_probe,
)
from augnet.probes.pairwise_ranking import FEATURES as FEATURES
from augnet.probes.pairwise_ranking import REDUCTIONS as REDUCTIONS
from augnet.probes.plots import plot_ranking_heatmap
from augnet.probes.ranking_model import Sampler, _model_pairs, ranking_probe_model

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

    # The features as given (not la / lb, pooled in float64): the probe reads their precision (ROUNDING_ULPS).
    given_a, given_b = ({FEATURES: z} if isinstance(z, Tensor) else dict(z) for z in (z_a, z_b))
    per_layer, g = {}, None
    for layer in la:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            per_layer[layer], g = probe({layer: given_a[layer]}, {layer: given_b[layer]})
        for w in caught:
            warnings.warn(f"layer {layer!r}: {w.message}", w.category, stacklevel=2)
    whole = probe(given_a, given_b)[0] if combined else None
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
    seed = check_seed(seed)  # before anything runs: an int in [0, 2**63 - 3], a NumPy one too
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


#: The per-layer numbers :func:`ranking_table` reads.
_VALUES = ("accuracy", "train_accuracy", "importance")


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
    if value not in _VALUES:  # a misspelt one read every plain {layer: number} dict as it was, silently
        raise ValueError(f"value must be one of {_VALUES}, got {value!r}")
    rows = {str(task): _layer_values(result, value, task) for task, result in results.items()}
    if layers is None:
        columns = list(dict.fromkeys(layer for row in rows.values() for layer in row))
    else:
        if not isinstance(layers, (str, Iterable)):  # iterating an int raised a TypeError naming nothing
            raise TypeError(f"layers must be a layer name or a list of them, got {type(layers).__name__}")
        columns = [layers] if isinstance(layers, str) else [str(layer) for layer in layers]
        if not columns:
            raise ValueError("layers must name at least one layer")
        unknown = [c for c in columns if not any(c in row for row in rows.values())]
        if unknown:
            raise ValueError(f"no task has layer(s) {unknown}")
    values = torch.tensor([[row.get(c, math.nan) for c in columns] for row in rows.values()], dtype=torch.float64)
    return {"tasks": list(rows), "layers": columns, "values": values, "value": value}
