"""Probes: measure what a model, AugNet or not, has learned to be invariant or equivariant to.

Every probe returns per-sample or per-neuron tensors plus, through
:func:`summary`, their median and percentiles; every random choice takes a
generator (or seed), and paired clean / transformed passes share the
transformation's parameters (and, for an AugNet, its own augmentation draws).

===============================  =================================================  ===============================
probe                            what it measures                                   paper
===============================  =================================================  ===============================
report, augnet probe             every measure below, per layer and transform       all
lie_derivative                   local equivariance error, exact by autograd        Gruver et al. (ICLR 2023)
normalized_variance              per unit: variance across transformations /        Quiroga et al. (2023)
                                 across samples, both parts kept
anova_invariance, p_adjust       per-unit ANOVA, transformations as groups,         Quiroga et al. (2023)
                                 Bonferroni / Benjamini-Hochberg
goodfellow_invariance            local / global firing rate per unit                Goodfellow et al. (2009)
distance_invariance              mean distance across transformations / samples     Quiroga et al. (2023)
same_equivariance, act           ``g^-1 F(g x)`` against ``F(x)``, exact actions    Lenc & Vedaldi; Quiroga et al.
                                 (quarter turns, flips, shifts)
features, layer_calls            activations of named layers (forward hooks)        all
invariance_score / _curve        (b - d(z, z_t)) / b against a derangement          AugNet eq. 4; Bouchacourt eq. 1
accuracy_curve                   accuracy against the transformation magnitude      Tensmeyer & Martinez
neuron_invariance, select_tau    per-unit invariance on active inputs               Zaidi et al.
layerwise_invariance             per-unit invariance of several layers at once      Zaidi et al. Fig. 10
fit_equivariance_map, ...        learned maps M(phi(gx)) ~ phi(x), held-out errors  Tensmeyer & Martinez
equivariance_curve               equivariance / invariance error vs magnitude       Tensmeyer & Martinez Fig. 1
representation_distance          two-way mapping error between representations      Tensmeyer & Martinez
equivariance_alignment           alignment of displacement vectors                  Bouchacourt et al., appendix
ranking_probe, layer_importance  pairwise ranking of augmentation magnitudes        Yan & Huang
ranking_probe_per_layer, ...     per-layer ranking accuracy; tasks x layers table   Yan & Huang Table II, Fig. 5
similarity_change / _search      transforms that bring same-class pairs closer      Bouchacourt et al. eq. 2
similarity_change_distributions  per-class distributions of the change              Bouchacourt et al. Fig. 3A
SeenTransformedDataset, ...      seen / unseen category protocol                    Zaidi et al.
===============================  =================================================  ===============================

A layer is one call of a module (a module called twice is ``name#0`` and ``name#1``); every probe
runs the model in evaluation mode, restores its modes, and streams its inputs in batches (see
:mod:`augnet.probes._common` and :mod:`augnet.probes.features`).

``EquivarianceLoss`` (classification + equivariance + invariance, Tensmeyer &
Martinez eq. 7) is a training loss, not a probe: it lives in :mod:`augnet.losses`
and is re-exported here.
"""

from augnet.probes._common import derangement, summary
from augnet.probes.equivariance import (
    equivariance_curve,
    equivariance_report,
    plot_equivariance_curves,
    representation_distance,
)
from augnet.probes.features import features, layer_calls
from augnet.probes.invariance import accuracy_curve, distance, invariance_curve, invariance_score
from augnet.probes.lie import lie_derivative
from augnet.probes.maps import EquivarianceMap, fit_equivariance_map, mapping_error
from augnet.probes.measures import (
    act,
    anova_invariance,
    channel_mean,
    distance_invariance,
    f_sf,
    goodfellow_invariance,
    normalized_variance,
    p_adjust,
    same_equivariance,
)
from augnet.probes.neurons import (
    layer_units,
    layerwise_invariance,
    neuron_invariance,
    plot_neuron_invariance,
    select_tau,
)
from augnet.probes.protocol import SeenTransformedDataset, category_accuracy, nested_splits
from augnet.probes.ranking import (
    layer_importance,
    pairwise_rank_loss,
    plot_ranking_heatmap,
    ranking_probe,
    ranking_probe_model,
    ranking_probe_per_layer,
    ranking_probe_per_layer_model,
    ranking_table,
)
from augnet.probes.report import ProbeReport, auto_layers, report
from augnet.probes.similarity import (
    equivariance_alignment,
    plot_similarity_change_distributions,
    same_class_pairs,
    similarity_change,
    similarity_change_distributions,
    similarity_search,
    top_transforms_per_class,
)

__all__ = [
    "EquivarianceLoss",
    "EquivarianceMap",
    "ProbeReport",
    "SeenTransformedDataset",
    "accuracy_curve",
    "act",
    "anova_invariance",
    "auto_layers",
    "category_accuracy",
    "channel_mean",
    "derangement",
    "distance",
    "distance_invariance",
    "equivariance_alignment",
    "equivariance_curve",
    "equivariance_report",
    "f_sf",
    "features",
    "fit_equivariance_map",
    "goodfellow_invariance",
    "invariance_curve",
    "invariance_score",
    "layer_calls",
    "layer_importance",
    "layer_units",
    "layerwise_invariance",
    "lie_derivative",
    "mapping_error",
    "nested_splits",
    "neuron_invariance",
    "normalized_variance",
    "p_adjust",
    "pairwise_rank_loss",
    "plot_equivariance_curves",
    "plot_neuron_invariance",
    "plot_ranking_heatmap",
    "plot_similarity_change_distributions",
    "ranking_probe",
    "ranking_probe_model",
    "ranking_probe_per_layer",
    "ranking_probe_per_layer_model",
    "ranking_table",
    "report",
    "representation_distance",
    "same_class_pairs",
    "same_equivariance",
    "select_tau",
    "similarity_change",
    "similarity_change_distributions",
    "similarity_search",
    "summary",
    "top_transforms_per_class",
]


def __getattr__(name: str):
    # Lazy: augnet.losses imports augnet.probes.maps, so importing it eagerly here is circular
    # whenever augnet.losses is imported before augnet.probes.
    if name == "EquivarianceLoss":
        from augnet.losses import EquivarianceLoss

        return EquivarianceLoss
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
