"""One per-layer invariance report for any model: every measure of the five papers and the Lie derivative.

:func:`report` reads each chosen layer of a model on clean inputs and on inputs transformed by each
transform at a few magnitudes, and measures, per (layer, transform, magnitude):

=======================  =============================================================  ==========================
measure                  what (on the layer's pooled features)                          paper
=======================  =============================================================  ==========================
inv_augnet               Inv_T: ``(b - d(z, z_t)) / b``, cosine, clean baseline;        AugNet eq. 4
                         median over inputs (1: invariant)
inv_bouchacourt          the same with the transformed baseline; median                 Bouchacourt et al. eq. 1
alignment                displacement alignment minus its column-shuffled baseline      Bouchacourt et al. app. D
equivariance_error       held-out L2 error of the best linear map ``M(z_t) ~ z``        Tensmeyer & Martinez eq. 2
                         (0: equivariant)
invariance_error         the same with ``M = I`` (0: invariant)                         Tensmeyer & Martinez eq. 2
neuron_invariance        mean ``I_k`` over the layer's channels at ``tau`` (non-        Zaidi et al. eq. 1
                         negative layers only; 1: invariant)
ranking_accuracy         held-out accuracy of a linear ranker of the transform's        Yan & Huang Table II
                         parameter on the layer alone (0.5: not encoded)
importance               the layer's share of the ranker on every layer                 Yan & Huang Fig. 5
lie_derivative           mean ``|L phi|`` per feature, per unit of ``t`` (0: locally    Gruver et al.
                         invariant); ``lie_derivative_relative``: ``|L phi| / |phi|``
normalized_variance      per unit, variance across transformations over variance       Quiroga et al. (2023)
                         across samples (0: invariant); its two parts
                         ``transformation_variance``, ``sample_variance``
anova_invariant          fraction of units whose one-way ANOVA (transformations as      Quiroga et al. (2023)
                         groups, Bonferroni) finds no effect at ``alpha`` (1)
goodfellow               per unit, local / global firing rate (``1 / G``: invariant);   Goodfellow et al. (2009)
                         ``goodfellow_local`` (L), ``goodfellow_global`` (G)
normalized_distance      per unit, mean distance across transformations / across        Quiroga et al. (2023)
                         samples (0: invariant)
same_equivariance        per channel, ``g^-1 F(g x)`` against ``F(x)`` over the         Lenc & Vedaldi; Quiroga
                         channel's variance (0), for grid views that are exact          et al.
                         actions, with ``aggregation="positions"``
=======================  =============================================================  ==========================

The per-unit measures (``UNIT_MEASURES``, :mod:`augnet.probes.measures`) are recorded as their
mean over the layer's units; ``per_unit=True`` keeps each unit's value, ``by_class`` measures each
class apart, ``transformations="grid"`` reads every input under a fixed grid of parameters, and
``aggregation`` chooses between pooling a feature map first and measuring every position (see
:func:`report`).

Every layer is read as its channels averaged over positions (``(B, C)``; a transformer's (B, tokens,
D) output averaged over its tokens), Yan & Huang's and Bouchacourt et al.'s reading, so a run on
20,000 inputs holds (20,000, C) features per layer (the unit measures can read every position
instead, ``aggregation="positions"``). The ranking probe and the Lie derivative do not
depend on a magnitude sweep: the ranker orders two copies drawn at one magnitude (the largest probed;
0.5 for a transform applied with a probability, so that half the copies are transformed), the Lie
derivative is taken at the identity; their records carry that magnitude (``None`` for the Lie
derivative). A measure that does not apply (a layer with negative activations for Zaidi et al.'s, a
discrete transform for the Lie derivative, copies that all got the same parameter for the ranker) is
NaN with a ``note``.

The model runs in evaluation mode (its modes are restored), batch by batch, on the inputs' device.
"""

from __future__ import annotations

import math
import numbers
import time
import warnings
from collections.abc import Mapping, Sequence

import torch
from torch import Tensor, nn

from augnet._checks import check_bool, is_int, is_real
from augnet.probes._common import (
    Transformed,
    batch_size_of,
    check_model_input,
    check_seed,
    compiled_inner,
    derangement,
    evaluating,
    forward_kwargs,
    magnitude_list,
    seeded,
)
from augnet.probes.families import family, grid_params, grid_values, rank_param
from augnet.probes.features import LOGITS, _Filler, check_rows, describe, stream_features
from augnet.probes.lie import LIE_BATCH_SIZE, CannotDifferentiate, lie_derivative
from augnet.probes.ranking import ranking_probe_per_layer
from augnet.probes.report_measures import (
    AGGREGATIONS,
    CONSTANT,
    INVARIANT_NV,
    MEASURES,
    TRANSFORMATIONS,
    UNIT_MEASURES,
    _constant,
    _exact_action,
    _labels,
    _layer_measures,
    _notes,
    _Options,
    _pool,
    _pooled,
    _read_units,
    _record,
    _unit_records,
)
from augnet.probes.report_result import ProbeReport

__all__ = [
    "AGGREGATIONS",
    "INVARIANT_NV",
    "MEASURES",
    "TRANSFORMATIONS",
    "UNIT_MEASURES",
    "ProbeReport",
    "auto_layers",
    "report",
    "transform_names",
]


def _logits_read(model: nn.Module, copies: int | None) -> str:
    """What the report's ``"logits"`` stands for, as its verdict's first line gives it after the model's class
    name (``ResNet: logits: the model's output``): an AugNet's in :func:`describe`'s words; any other model's
    without naming its class a second time (once ``Sequential: logits: the output of Sequential``)."""
    from augnet.model import AugNet

    return describe(model, LOGITS, copies) if isinstance(model, AugNet) else "logits: the model's output"


def auto_layers(model: nn.Module, x: Tensor | None = None, **forward_kwargs) -> list[str]:
    """The layers :func:`report` reads by default: the outputs of the model's top-level blocks, and its logits.

    The blocks are the model's children that hold submodules, except its last child (whose output
    is the logits). A model whose body is one block (a ViT's ``encoder``, itself holding one
    ``layers`` container) is read inside it, down to the level with several blocks, and a body that is
    one block of more than 8 layers (VGG's and AlexNet's ``features``) at 8 of them, evenly spaced; a
    flat model (a ``Sequential`` of layers) gives its children but the last, at most 8, evenly spaced.
    For an AugNet, the blocks of its trunk; for a ``torch.compile`` wrapper, the blocks of the module it
    runs, named through the wrapper (``_orig_mod.layer1``); for a module whose only child holds submodules
    (``nn.DataParallel``, a wrapper returning a model's logits), the blocks of that child, named through it
    (``module.layer1``).

    With inputs ``x``, the blocks are those of a forward pass (on ``x[:2]``, see
    :func:`~augnet.probes.layer_calls`; ``forward_kwargs`` go to the model): a block called
    ``k > 1`` times is read at each call, ``name#0`` ... ``name#{k-1}`` (its plain name is no layer),
    and a block the pass never calls is left out. :func:`report` passes its inputs.

    Examples:
        >>> block = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU())
        >>> auto_layers(nn.Sequential(block, nn.Sequential(nn.Flatten()), nn.LazyLinear(2)))
        ['0', '1', 'logits']
    """
    from augnet.model import AugNet
    from augnet.probes.features import CALL, layer_calls

    root, prefix = (model.trunk, "trunk.") if isinstance(model, AugNet) else (model, "")
    inner = compiled_inner(model)
    if inner is not None:  # torch.compile's wrapper: the blocks of the module it runs, by their names through it
        root, prefix = (inner.trunk, "_orig_mod.trunk.") if isinstance(inner, AugNet) else (inner, "_orig_mod.")
    children = list(root.named_children())
    # A wrapper of one module (nn.DataParallel's "module", a user's wrapper returning the logits): its blocks
    # are those of the module it runs (the wrapper's last and only child is the whole network, not the head).
    while len(children) == 1 and next(children[0][1].children(), None) is not None:
        prefix, root = f"{prefix}{children[0][0]}.", children[0][1]
        children = list(root.named_children())

    def blocks(items):
        return [(n, m) for n, m in items if next(m.children(), None) is not None]

    def spaced(items):  # at most 8, evenly spaced, the first and the last among them
        return [items[round(i * (len(items) - 1) / 7)] for i in range(8)] if len(items) > 8 else items

    cands = blocks(children[:-1])
    while len(cands) == 1 and blocks(cands[0][1].named_children()):
        name, module = cands[0]
        cands = [(f"{name}.{n}", m) for n, m in blocks(module.named_children())]
    if len(cands) == 1 and len(list(cands[0][1].children())) > 8:  # a body of many layers (VGG's, AlexNet's)
        name, module = cands[0]
        cands = spaced([(f"{name}.{n}", m) for n, m in module.named_children()])
    if not cands:
        cands = spaced(children[:-1])
    names = [prefix + n for n, _ in cands]
    if x is not None and names:
        calls = layer_calls(model, x, names, **forward_kwargs)
        names = [n if calls[n] == 1 else f"{n}{CALL}{i}" for n in names for i in range(calls[n])]
    return [*names, LOGITS]


def transform_names() -> list[str]:
    """The names of augnet's image transforms (what :func:`report` and ``augnet probe`` take by name)."""
    from augnet.transforms import image as T
    from augnet.transforms.base import Transform

    return sorted(n for n in T.__all__ if isinstance(getattr(T, n), type) and issubclass(getattr(T, n), Transform))


def _transforms(transforms) -> dict[str, object]:
    from augnet.transforms import image as T
    from augnet.transforms.base import Transform

    if isinstance(transforms, (str, Transform)):
        transforms = [transforms]
    if isinstance(transforms, Mapping) and transforms:
        items = list(transforms.items())
    elif isinstance(transforms, Sequence) and not isinstance(transforms, Mapping) and transforms:
        items = []
        for t in transforms:
            if isinstance(t, str):
                if t not in transform_names():
                    raise ValueError(f"unknown transform {t!r}; the image transforms are {transform_names()}")
                items.append((t, getattr(T, t)()))
            else:
                items.append((type(t).__name__, t))
    else:
        raise ValueError(f"transforms must name one or more transforms, got {transforms!r}")
    for name, t in items:
        if not isinstance(t, Transform) or t.input_ndim != 4:
            raise TypeError(f"transform {name!r} must be an augnet image transform, got {type(t).__name__}")
    if len({n for n, _ in items}) != len(items):
        raise ValueError(f"transforms must not repeat a name, got {[n for n, _ in items]}")
    return dict(items)


def _magnitudes(magnitudes) -> list[float]:
    """``magnitudes`` (a number, a sequence, a 1-D tensor or array, as every probe takes them), sorted, without
    repeats, each in (0, 1]."""
    ms = magnitude_list([magnitudes] if is_real(magnitudes) else magnitudes)
    if not all(0 < m <= 1 for m in ms):
        raise ValueError(f"magnitudes must be numbers in (0, 1], got {ms!r}")
    return sorted(set(ms))


def report(
    model: nn.Module,
    x: Tensor,
    transforms,
    layers: str | Sequence[str] = "auto",
    magnitudes: float | Sequence[float] = (0.25, 0.5, 1.0),
    *,
    tau: float = 0.05,
    holdout: float = 0.3,
    lie: bool = True,
    batch_size: int | None = None,
    copies: int | None = None,
    seed: int = 0,
    progress: bool = False,
    per_unit: bool = False,
    by_class=None,
    transformations: str = "random",
    aggregation: str = "pool",
    grid_points: int = 9,
    alpha: float = 0.05,
    firing_rate: float = 0.01,
) -> ProbeReport:
    """Every measure of the probes, per layer, transform and magnitude, as one table (see the module docstring).

    Args:
        model: any module taking (B, C, H, W) images (a torchvision or timm model, a ViT, an AugNet).
        x: (N, C, H, W) images, N >= 8, on the model's device.
        transforms: augnet image transforms, their names (``"Rotate"``), or ``{name: transform}``.
        layers: ``"auto"`` (:func:`auto_layers`: the top-level blocks and the logits) or layer
            names as for :func:`~augnet.probes.features` (``"name#k"`` for a reused module's call).
        magnitudes: the magnitudes in (0, 1] swept (default 0.25, 0.5, 1).
        tau: Zaidi et al.'s activity threshold on the normalised channel activity (0.05, their
            ImageNet value; :func:`~augnet.probes.select_tau` chooses one by ablation).
        holdout: the fraction of inputs the equivariance maps are evaluated on (Tensmeyer & Martinez).
        lie: compute the Lie derivative (one forward-mode pass per continuous transform).
        batch_size: rows per forward pass (default 256; at most 64 for the Lie derivative, whose
            forward-mode pass holds every activation's tangent too).
        copies: for an AugNet, the copies it averages.
        seed: seeds every draw: the transforms' parameters (``seed + 1``; the ranker's second copies
            ``seed + 2``), the baseline pairing, the held-out rows, an AugNet's own draws. An int in
            ``[0, 2**63 - 3]``.
        progress: show a progress bar (one step per pass over the inputs).
        per_unit: keep the per-unit values of the measures of ``UNIT_MEASURES`` (one per channel)
            in :attr:`ProbeReport.units`; :meth:`ProbeReport.save` writes them beside the table.
        by_class: class labels >= 0 ((N,) or (N, 1), any integer dtype, a NumPy array or a list; whole
            floats too): every swept measure is also measured on each class's inputs alone (records
            with ``class`` set), and the verdict says which classes the last layer treats invariantly
            (normalised variance at most 0.1, ``INVARIANT_NV``). A class with too few inputs for a
            measure gets NaN with a note (a class of one input: every measure), and no per-unit values.
        transformations: ``"random"`` (default: each input under one random draw of the transform
            per magnitude, the unit measures comparing that draw with the clean input, ``T = 2``) or
            ``"grid"`` (each input under every value of a fixed grid per magnitude,
            ``augnet.probes.families.grid_values``: ``grid_points`` values of a continuous
            transform's parameter, evenly spaced over its range at the magnitude, or a gate's 0 and 1;
            the unit measures read the ``T = grid_points`` views, the pairwise measures are averaged
            over the grid's views but its identity, ``t = 0`` or a gate's 0, which is the clean input
            again, and ``info["grid"]`` lists the values).
        aggregation: how a feature map becomes units for the unit measures. ``"pool"`` (default): its
            channels averaged over positions first, then measured (``U = C``); ``"positions"``: each
            (channel, position) measured as a unit, then the statistics averaged over the positions
            of each channel (:func:`~augnet.probes.channel_mean`), which also allows the
            same-equivariance of ``"grid"`` views that are exact actions (quarter turns, flips,
            whole-pixel shifts, compared where the shifted-back map has content: the border
            effects of a padded convolution count against it). The default pools because it
            holds (N, C) per layer and view as the rest of the report does (``"positions"`` holds
            (N, C, H, W), every position of every layer, for a few hundred inputs rather than
            20,000) and reads the layer as the pairwise measures and a classifier head do; the two
            can rank layers differently. The pairwise measures always read pooled features.
        grid_points: the values of a continuous transform's grid (default 9, an integer >= 2; checked whatever
            ``transformations``).
        alpha: the level of the per-unit ANOVA (Bonferroni over the layer's units; default 0.05).
        firing_rate: Goodfellow et al.'s global firing rate (default 0.01).

    Raises:
        TypeError, ValueError: before the model runs on the inputs (one checking pass of two images
            finds layers that are not one call of a module): a bad argument, naming it; images that
            are not finite (naming them), on meta, or in another dtype or on another device than the
            model's parameters. In the first pass: a layer or output without one row per input.

    Returns:
        A :class:`ProbeReport`: ``.records`` (the tidy table), ``.table()``, ``.save(path)`` (JSON or
        CSV), ``.heatmap(path)`` and ``.verdict()``; ``.units`` with ``per_unit``.

    Examples:
        >>> from augnet.transforms import image as T
        >>> net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3))
        >>> rep = report(net, torch.rand(16, 3, 8, 8), [T.Rotate()], layers=["1", "logits"], magnitudes=[1.0])
        >>> sorted({r["measure"] for r in rep.records})[:3], rep.value("inv_augnet", "1", "Rotate") <= 1
        (['alignment', 'anova_invariant', 'equivariance_error'], True)
    """
    from augnet.probes.features import check_layers
    from augnet.probes.ranking_model import _row_values
    from augnet.probes.stats import _check_alpha
    from augnet.probes.unit_invariance import _check_tau

    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    if not isinstance(x, Tensor):
        hint = (": gather its inputs into one, torch.cat([xb for xb, _ in loader])"
                if isinstance(x, (torch.utils.data.DataLoader, torch.utils.data.Dataset)) else "")  # fmt: skip
        raise TypeError(f"x must be a tensor of images, got {type(x).__name__}{hint}")
    if x.dim() != 4 or not x.is_floating_point() or len(x) < 8:
        hint = ("; signals (N, C, T): measure them with augnet.probes.invariance_curve"
                if x.dim() == 3 and x.is_floating_point() else "")  # fmt: skip
        raise ValueError(f"x must be (N, C, H, W) floating-point images with N >= 8, got {x.dtype} "
                         f"{tuple(x.shape)}{hint}")  # fmt: skip
    named = _transforms(transforms)
    for t in named.values():
        t.check_input(x)
    mags = _magnitudes(magnitudes)
    if layers != "auto" and not isinstance(layers, str) and not isinstance(layers, Sequence):
        raise TypeError(f"layers must be 'auto', a layer name or a list of them, got {type(layers).__name__}")
    names = None if layers == "auto" else [layers] if isinstance(layers, str) else list(layers)
    if names is not None and (not names or not all(isinstance(n, str) for n in names) or len(set(names)) != len(names)):
        raise ValueError(f"layers must be 'auto' or distinct layer names, got {layers!r}")
    tau = _check_tau(tau)
    if isinstance(holdout, bool) or not isinstance(holdout, numbers.Real) or not 0 < holdout < 1:
        raise ValueError(f"holdout must be a fraction in (0, 1), got {holdout!r}")
    step = batch_size_of(batch_size)
    seed = check_seed(seed)
    check_bool("lie", lie)
    check_bool("progress", progress)
    check_bool("per_unit", per_unit)
    if transformations not in TRANSFORMATIONS:
        raise ValueError(f"transformations must be one of {TRANSFORMATIONS}, got {transformations!r}")
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {aggregation!r}")
    alpha = _check_alpha(alpha)
    if isinstance(firing_rate, bool) or not isinstance(firing_rate, numbers.Real) or not 0 < firing_rate < 1:
        raise ValueError(f"firing_rate must be a rate in (0, 1), got {firing_rate!r}")
    labels = _labels(by_class, len(x))
    if not is_int(grid_points) or grid_points < 2:  # checked with any transformations: a bad value is a mistake
        raise ValueError(f"grid_points must be an integer >= 2, got {grid_points!r}")
    n, size = len(x), tuple(x.shape[-2:])
    grid = transformations == "grid"
    grids = {name: {m: grid_values(t, m, grid_points, size) for m in mags} for name, t in named.items()} if grid else {}
    check_model_input(model, x)
    kwargs0 = forward_kwargs(model, copies, seed, x.device)
    if names is None:
        names = auto_layers(model, x, **kwargs0)
    check_layers(model, x, names, **kwargs0)  # unknown layers, calls of a reused module: one pass of two images
    start_time = time.perf_counter()
    positions = aggregation == "positions"
    opts = _Options(tau, holdout, seed, alpha, float(firing_rate), positions, grid, per_unit, size)
    plan = {name: (rank_param(t), 0.5 if rank_param(t) == "gate" else max(mags)) for name, t in named.items()}
    views = {name: sum(len(grids[name][m]) for m in mags) if grid else len(mags) for name in named}
    passes = 1 + sum(views[k] + 1 + (p is not None and (grid or m not in mags)) for k, (p, m) in plan.items())
    passes += sum(3 for t in named.values() if lie and family(t) is not None)
    from tqdm.auto import tqdm

    bar = tqdm(total=passes, disable=not progress, desc="probe", unit="pass")
    shapes: dict[str, tuple] = {}

    def read(source, index: int, what: str) -> dict[str, Tensor]:
        bar.set_postfix_str(what)
        keep = _Filler(n)

        def on_batch(start: int, stop: int, batch: dict[str, Tensor]) -> None:
            check_rows(batch, stop - start)
            for nm, a in batch.items():
                shapes.setdefault(nm, tuple(a.shape[2:]) if a.dim() == 4 else ())
            keep(start, stop, {nm: _read_units(a.detach(), positions).cpu() for nm, a in batch.items()})

        kwargs = forward_kwargs(model, copies, seed, x.device, "shared", index)
        with torch.no_grad():
            stream_features(model, source, names, on_batch, "none", step, **kwargs)
        bar.update(1)
        got = keep.result()
        return {nm: got[nm] for nm in names}

    records: list[dict] = []
    held_out: dict[str, int] = {}  # per transform, the ranking probe's held-out pairs (the verdict's chance band)
    units: dict = {}
    perm = derangement(n, seeded(seed))
    with evaluating(model):
        clean = read(x, 0, "clean")
        index = 0
        for t_name, t in named.items():
            param, rank_mag = plan[t_name]
            kept = None
            for m in mags:
                rng = str(t.natural_range(m, size))
                if grid:
                    base = t.draw_params(x, m, seeded(seed + 1, x.device))
                    read_views, actions = [], []
                    for v in grids[t_name][m]:
                        index += 1
                        inputs = Transformed(t, x, m, params=grid_params(t, base, v, size))
                        read_views.append(read(inputs, index, f"{t_name} {m:g} at {v:.3g}"))
                        actions.append(_exact_action(t, v, inputs, x))
                else:
                    index += 1
                    moved_inputs = Transformed(t, x, m, seeded(seed + 1, x.device))
                    read_views, actions = [read(moved_inputs, index, f"{t_name} {m:g}")], [None]
                    if param is not None and m == rank_mag:
                        kept = (read_views[0], moved_inputs)
                # The pairwise measures compare the clean input with a moved one: a grid's identity view
                # (t = 0, a gate's off) is the clean input again and would score a perfect match.
                moved = [i for i, v in enumerate(grids[t_name][m]) if v != 0] if grid else [0]
                for layer in names:
                    layer_views = [v[layer] for v in read_views]
                    key = (layer, t_name, m, rng)
                    pair_views = [layer_views[i] for i in moved]
                    _layer_measures(records, units, key, clean[layer], pair_views, perm, opts)
                    _unit_records(records, units, key, clean[layer], layer_views, actions, shapes[layer], opts)
                    for k in labels.unique().tolist() if labels is not None else []:
                        rows = (labels == k).nonzero().flatten()
                        sub = [v[rows] for v in layer_views]
                        kperm = derangement(len(rows), seeded(seed)) if len(rows) >= 2 else None
                        pair_sub = [sub[i] for i in moved]
                        _layer_measures(records, units, key, clean[layer][rows], pair_sub, kperm, opts, k)
                        _unit_records(records, units, key, clean[layer][rows], sub, actions, shapes[layer], opts, k)
            if param is not None:
                if kept is None:
                    index += 1
                    moved_inputs = Transformed(t, x, rank_mag, seeded(seed + 1, x.device))
                    kept = (read(moved_inputs, index, f"{t_name} {rank_mag:g}"), moved_inputs)
                index += 1
                second = Transformed(t, x, rank_mag, seeded(seed + 2, x.device))
                other = read(second, index, f"{t_name} ranking")
                za, inputs_a = kept
                rng = str(t.natural_range(rank_mag, size))
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    try:
                        m_a = _row_values(inputs_a.params[param], param, n)
                        m_b = _row_values(second.params[param], param, n)
                        ranked = ranking_probe_per_layer(_pooled(za), _pooled(other), m_a, m_b, generator=seeded(seed))
                        held_out[t_name] = ranked["n_test"]
                        note = ""
                    except ValueError as err:
                        ranked, note = None, str(err).split(";")[0]
                for layer in names:
                    acc = math.nan if ranked is None else ranked["accuracy"][layer]
                    share = math.nan if ranked is None else ranked["importance"][layer]
                    extra = note or _notes([w for w in caught if repr(layer) in str(w.message)])
                    if _constant(_pooled(za[layer]), [_pooled(other[layer])]):  # chance: nothing to rank by
                        extra = "; ".join(dict.fromkeys(filter(None, [CONSTANT, extra])))
                    _record(records, layer, t_name, rank_mag, rng, "ranking_accuracy", acc, extra)
                    whole = _notes([w for w in caught if not str(w.message).startswith("layer ")])  # the combined fit's
                    _record(records, layer, t_name, rank_mag, rng, "importance", share, note or whole)
            if lie and family(t) is not None:
                bar.set_postfix_str(f"{t_name} Lie derivative")
                try:
                    out = lie_derivative(
                        model, x, t, names, lambda a: _pool(a, True), False, min(step, LIE_BATCH_SIZE), copies, seed
                    )
                    note = ""
                except CannotDifferentiate as err:  # a model torch cannot differentiate here: the rest stands
                    nan = {layer: math.nan for layer in names}
                    out, note = {"mean": nan, "mean_relative": nan}, str(err).removeprefix("lie_derivative: ")
                bar.update(3)
                for layer in names:
                    _record(records, layer, t_name, None, "", "lie_derivative", out["mean"][layer], note)
                    _record(
                        records, layer, t_name, None, "", "lie_derivative_relative", out["mean_relative"][layer], note
                    )
            elif lie:
                for layer in names:
                    note = f"{t_name} is not a continuous family: no Lie derivative"
                    _record(records, layer, t_name, None, "", "lie_derivative", math.nan, note)
                    _record(records, layer, t_name, None, "", "lie_derivative_relative", math.nan, note)
    bar.close()
    info = {
        "model": type(model).__name__,
        "features": _logits_read(model, copies),
        "n_inputs": n,
        "input_shape": list(x.shape[1:]),
        "device": str(x.device),
        "layers": names,
        "transforms": list(named),
        "magnitudes": mags,
        "tau": tau,
        "holdout": holdout,
        "seed": seed,
        "batch_size": step,
        "units": {k: family(t).unit for k, t in named.items() if family(t) is not None},
        "transformations": transformations,
        "aggregation": aggregation,
        "alpha": alpha,
        "firing_rate": float(firing_rate),
        "per_unit": per_unit,
        "ranking_held_out": held_out,
        "seconds": round(time.perf_counter() - start_time, 2),
    }
    if grid:
        info["grid"] = {k: {str(m): v for m, v in g.items()} for k, g in grids.items()}
    if labels is not None:
        info["classes"] = labels.unique().tolist()
    return ProbeReport(records, names, list(named), mags, info, units)
