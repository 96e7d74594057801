"""A user's audit of the per-unit and per-class probes: neurons, similarity, ranking, families and stats.

Each test pins a mend: a bad argument named in a ValueError / TypeError (not torch's raw error, nor a silent
NaN or a wrong grouping), and outputs that hold no autograd graph of the inputs.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from augnet.probes.families import grid_params, grid_values
from augnet.probes.neurons import layer_units, layerwise_invariance, select_tau
from augnet.probes.ranking import (
    layer_importance,
    pairwise_rank_loss,
    ranking_probe,
    ranking_probe_model,
    ranking_table,
)
from augnet.probes.similarity import (
    equivariance_alignment,
    same_class_pairs,
    similarity_change,
    similarity_change_distributions,
    similarity_search,
    top_transforms_per_class,
)
from augnet.probes.stats import f_sf, p_adjust
from augnet.probes.unit_invariance import UnitInvariance
from augnet.transforms import image as T


def _net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1),
        nn.BatchNorm2d(4),
        nn.ReLU(),
        nn.Dropout(0.5),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(4, 3),
    ).train()


def _flip(b, m, generator=None):
    return b.flip(-1)


def _to64(b, m, generator=None):
    return b.double()


X = torch.randn(8, 3, 6, 6, generator=torch.Generator().manual_seed(1))
Y = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1])


def _ranking_data():
    g = torch.Generator().manual_seed(0)
    m_a, m_b = torch.rand(40, generator=g), torch.rand(40, generator=g)
    z_a = torch.stack([m_a, torch.randn(40, generator=g)], 1)
    z_b = torch.stack([m_b, torch.randn(40, generator=g)], 1)
    return z_a, z_b, m_a, m_b


# --------------------------------------------------------------------------- neurons, tau selection


def test_layerwise_layers_that_are_not_names_are_named():
    with pytest.raises(TypeError, match="layers must be a module name"):
        layerwise_invariance(_net(), X, 3, 0.1, transform=_flip)


@pytest.mark.parametrize("seen", [[-1], [2**70]])
def test_seen_classes_out_of_range_are_refused(seen):
    with pytest.raises(ValueError, match="seen_classes must hold class indices >= 0"):
        layerwise_invariance(_net(), X, "2", 0.1, transform=_flip, y=Y, seen_classes=seen)
    with pytest.raises(ValueError, match="seen_classes must hold class indices >= 0"):
        select_tau(_net(), "2", X, Y, transform=_flip, score="within", seen_classes=seen)


def test_a_transform_of_another_dtype_is_named_before_the_model_runs():
    net = _net()
    with pytest.raises(TypeError, match=r"transform\(x, magnitude\) is torch.float64"):
        layerwise_invariance(net, X, "2", 0.1, transform=_to64)
    with pytest.raises(TypeError, match=r"transform\(x, magnitude\) is torch.float64"):
        select_tau(net, "2", X, Y, transform=_to64)
    with pytest.raises(TypeError, match=r"transforms\['d'\]\(x, 0.5\) is torch.float64"):
        similarity_search(net, X, Y, {"d": _to64})
    with pytest.raises(TypeError, match=r"transform\(x, m\) is torch.float64"):
        ranking_probe_model(net, X, lambda b, m: b.double(), layers="2", sampler=(0.0, 1.0))
    assert net.training  # the model's mode is left as it was


def test_non_finite_x_t_is_named_x_t():
    with pytest.raises(ValueError, match="x_t has NaN or infinite values"):
        layerwise_invariance(_net(), X, "2", 0.1, x_t=X * math.nan)
    with pytest.raises(ValueError, match="x_t has NaN or infinite values"):
        select_tau(_net(), "2", X, Y, x_t=X * math.nan)


def test_unit_invariance_rows_are_checked():
    a, a_t = torch.rand(10, 4), torch.rand(10, 4)
    for bad in (-1, 0, "a", 2.0):
        with pytest.raises(ValueError, match="n_rows must be an int >= 1"):
            UnitInvariance(0.2, n_rows=bad)
    acc = UnitInvariance(0.2, n_rows=3)
    acc.observe(a, a_t)
    with pytest.raises(ValueError, match="start must be an int >= 0 with start"):
        acc.score(0, a, a_t)  # 10 inputs past n_rows=3: torch's RuntimeError
    acc = UnitInvariance(0.2, n_rows=10)
    acc.observe(a, a_t)
    with pytest.raises(ValueError, match="start must be an int >= 0"):
        acc.score(-1, a, a_t)


def test_layer_units_refuses_channels_of_no_position():
    with pytest.raises(ValueError, match="channels of no position"):
        layer_units(torch.ones(2, 3, 0, 2), "channel")  # was a (2, 3) tensor of NaN


# --------------------------------------------------------------------------- similarity


def test_similarity_change_holds_no_graph():
    z = torch.randn(12, 5, requires_grad=True)
    z_t = z.detach() + 0.1
    y = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 3])
    out = similarity_change(z, z_t, y, pairs_per_class=None)
    assert not any(v.requires_grad for v in out.values() if isinstance(v, torch.Tensor))
    plain = similarity_change(z.detach(), z_t, y, pairs_per_class=None)
    assert torch.equal(out["change"], plain["change"])


def test_generators_are_checked():
    z, y = torch.randn(6, 4), torch.tensor([0, 0, 0, 1, 1, 1])
    with pytest.raises(TypeError, match=r"generator must be a torch\.Generator"):
        similarity_change(z, z + 1, y, generator=3)  # no draw was needed: it passed unseen
    with pytest.raises(TypeError, match=r"generator must be a torch\.Generator"):
        same_class_pairs(y, 1, generator="x")
    with pytest.raises(TypeError, match=r"generator must be a torch\.Generator"):
        equivariance_alignment(z, z + torch.rand(6, 4), generator=1)
    z_a, z_b, m_a, m_b = _ranking_data()
    with pytest.raises(TypeError, match=r"generator must be a torch\.Generator"):
        ranking_probe(z_a, z_b, m_a, m_b, generator=3)


def test_top_transforms_rows_are_read_as_numbers_and_labels():
    with pytest.raises(TypeError, match="'weighted_boost' must be a number"):
        top_transforms_per_class([{"label": 0, "weighted_boost": "x"}])
    with pytest.raises(TypeError, match="labels must be comparable"):
        top_transforms_per_class([{"label": 0, "weighted_boost": 1.0}, {"label": "a", "weighted_boost": 2.0}])
    rows = [{"label": torch.tensor(0), "weighted_boost": 1.0}, {"label": torch.tensor(0), "weighted_boost": 2.0}]
    top = top_transforms_per_class(rows, k=1)  # 0-d tensor labels of one class: one group, not one per row
    assert list(top) == [0] and top[0][0]["weighted_boost"] == 2.0


def test_distribution_rows_and_flag_are_checked():
    row = {"transform": "a", "magnitude": 0.5, "label": 0, "percent_change": 1.0}
    with pytest.raises(TypeError, match="'magnitude' must be a number"):
        similarity_change_distributions([{**row, "magnitude": "x"}])
    with pytest.raises(TypeError, match="'percent_change' must be a number"):
        similarity_change_distributions([{**row, "percent_change": "x"}])
    with pytest.raises(TypeError, match="by_magnitude must be True or False"):
        similarity_change_distributions([row], by_magnitude="no")


def test_similarity_search_layer_must_be_a_name():
    for bad in (3, ["2"]):
        with pytest.raises(TypeError, match="layer must be a module name"):
            similarity_search(_net(), X, Y, {"flip": _flip}, layer=bad)


# --------------------------------------------------------------------------- ranking


def test_ranking_probe_magnitudes_and_l2():
    z_a, z_b, m_a, m_b = _ranking_data()
    with pytest.raises(TypeError, match="m_a must hold real magnitudes"):
        ranking_probe(z_a, z_b, m_a.to(torch.complex64), m_b)
    both_inf = torch.where(torch.arange(40) == 0, math.inf, m_a)
    with pytest.raises(ValueError, match="m_a holds infinite magnitudes"):
        ranking_probe(z_a, z_b, both_inf, torch.where(torch.arange(40) == 0, math.inf, m_b))
    for l2 in (math.nan, math.inf):
        with pytest.raises(ValueError, match="l2 must be a finite number"):
            ranking_probe(z_a, z_b, m_a, m_b, l2=l2)


def test_pairwise_rank_loss_arguments():
    s = torch.ones(3)
    with pytest.raises(TypeError, match="s_hi must hold floating-point scores"):
        pairwise_rank_loss(torch.ones(3, dtype=torch.long), torch.zeros(3, dtype=torch.long))
    for sign in (torch.ones(2), torch.ones(2, 3)):  # a mismatch (RuntimeError); a larger one broadcast the loss
        with pytest.raises(ValueError, match="sign must be broadcastable"):
            pairwise_rank_loss(s, s, sign, "none")
    with pytest.raises(TypeError, match="sign must be a tensor or sequence"):
        pairwise_rank_loss(s, s, "a")


def test_layer_importance_sizes_must_be_a_dict():
    with pytest.raises(TypeError, match="sizes must be a"):
        layer_importance(torch.ones(2), torch.ones(2), [2])


def test_ranking_table_value_and_layers():
    with pytest.raises(ValueError, match="value must be one of"):
        ranking_table({"t": {"a": 1.0}}, value="acuracy")
    with pytest.raises(TypeError, match="layers must be a layer name"):
        ranking_table({"t": {"a": 1.0}}, layers=3)


def test_ranking_probe_model_layers_and_samplers():
    net, x = _net(), torch.rand(10, 3, 6, 6)
    with pytest.raises(TypeError, match="layers must be a module name"):
        ranking_probe_model(net, x, T.Brightness(), layers=3, param="shift")
    for bounds in (("a", "b"), (0.0, math.inf)):
        with pytest.raises(ValueError, match="sampler needs two finite numbers"):
            ranking_probe_model(net, x, T.Brightness(), layers="2", param="shift", sampler=bounds)

    def nan_sampler(n, generator):
        return torch.full((n,), math.nan, dtype=torch.float64)

    with pytest.raises(ValueError, match="the sampler must return finite real magnitudes"):
        ranking_probe_model(net, x, T.Brightness(), layers="2", param="shift", sampler=nan_sampler)


# --------------------------------------------------------------------------- stats, families


def test_stats_refuse_complex_and_hold_no_graph():
    with pytest.raises(TypeError, match="f must hold real F statistics"):
        f_sf(torch.tensor([1 + 1j]), 2, 3)
    f = torch.tensor([0.5, 2.0], requires_grad=True)
    out = f_sf(f, 2, 3)
    assert not out.requires_grad and torch.equal(out, f_sf(f.detach(), 2, 3))
    for p in (torch.tensor([0.01 + 0.5j]), torch.tensor([True, False])):
        with pytest.raises(TypeError, match="p must hold real p-values"):
            p_adjust(p)


def test_grid_values_and_params_arguments():
    with pytest.raises(TypeError, match="magnitude must be a real number"):
        grid_values(T.Rotate(), "a", 3, (8, 8))
    with pytest.raises(ValueError, match="magnitude must be a finite number"):
        grid_values(T.Rotate(), math.nan, 3, (8, 8))
    with pytest.raises(TypeError, match="size must be the inputs' spatial size"):
        grid_values(T.TranslateX(), 0.5, 3, 8)
    base = T.Rotate().draw_params(torch.rand(2, 3, 8, 8), 0.5, torch.Generator().manual_seed(0))
    with pytest.raises(TypeError, match="value must be a real number"):
        grid_params(T.Rotate(), base, "a", (8, 8))
    with pytest.raises(ValueError, match="base must hold Rotate's parameter 'angle'"):
        grid_params(T.Rotate(), {}, 0.1, (8, 8))
    with pytest.raises(ValueError, match="Solarize has no grid of parameters"):
        grid_params(T.Solarize(), T.Solarize().draw_params(torch.rand(2, 3, 8, 8), 0.5), 0.1, (8, 8))
