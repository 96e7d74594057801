"""Equivariance maps, reports and representation distance (Tensmeyer & Martinez)."""

import pytest
import torch
import torch.nn.functional as F
from helpers import gen
from torch import nn

from augnet.probes.equivariance import equivariance_report, representation_distance
from augnet.probes.maps import EquivarianceMap, fit_equivariance_map, mapping_error
from augnet.transforms import image as T

LUMA = torch.tensor([0.299, 0.587, 0.114])


def permutation_matrix(transform, shape) -> torch.Tensor:
    """The (D, D) matrix P with flatten(g x) = flatten(x) @ P^T, read off by moving a one-hot basis."""
    d = int(torch.tensor(shape).prod())
    basis = torch.eye(d, dtype=torch.float64).reshape(d, *shape)
    return transform(basis).reshape(d, d).T


def roll(x):
    return torch.roll(x, shifts=(1, 2), dims=(-2, -1))


def relative(a, b):
    return float((a - b).norm() / b.norm())


def linear_matrix(fitted: EquivarianceMap) -> torch.Tensor:
    """The matrix of a fitted linear map, read off by mapping the basis (works for any parametrisation)."""
    d = fitted.module.weight.shape[1]
    eye = torch.eye(d, dtype=torch.float64)
    return (fitted.module(eye) - fitted.module(torch.zeros(1, d, dtype=torch.float64))).T


# --------------------------------------------------------------------------- equivariance of flatten


@pytest.mark.parametrize("transform", ["roll", "hflip"])
def test_linear_map_recovers_the_inverse_permutation(transform):
    x = torch.randn(256, 2, 4, 4, generator=gen(1))
    g = roll if transform == "roll" else (lambda a: T.HorizontalFlip()(a, 1.0, generator=gen(2)))
    z, z_t = x.flatten(1), g(x).flatten(1)
    P = permutation_matrix(g if transform == "roll" else (lambda a: a.flip(-1)), (2, 4, 4))
    assert not torch.equal(P, torch.eye(len(P), dtype=P.dtype))
    fitted = fit_equivariance_map(z, z_t)
    # M(z_t) = z = z_t @ P (P is orthogonal): the map's matrix is P^-1 = P^T.
    assert relative(linear_matrix(fitted), P.T) < 1e-3
    assert fitted.module.bias.abs().max() < 1e-3
    rep = equivariance_report(z, z_t, fitted=fitted)
    assert rep["scores"]["equivariance"] < 1e-3
    assert rep["scores"]["invariance"] > 1.0  # ||P z - z|| / ||z|| is about sqrt(2) for random z


def test_sgd_map_recovers_the_inverse_permutation():
    x = torch.randn(256, 1, 4, 4, generator=gen(1))
    fitted = fit_equivariance_map(x.flatten(1), roll(x).flatten(1), solver="sgd", generator=gen(0))
    P = permutation_matrix(roll, (1, 4, 4))
    assert relative(linear_matrix(fitted), P.T) < 1e-3
    assert fitted.losses[-1] < 1e-3 * fitted.losses[0]


@pytest.mark.parametrize(("kind", "solver"), [("linear", "ridge"), ("linear", "sgd"), ("residual_relu", "sgd")])
def test_invariant_features_have_zero_errors(kind, solver):
    x = torch.randn(128, 3, 4, 4, generator=gen(1), dtype=torch.float64)
    z, z_t = x.sum((2, 3)), roll(x).sum((2, 3))  # global sum pooling is invariant to a roll
    rep = equivariance_report(z, z_t, kind, solver, holdout=0.25, generator=gen(0))
    assert rep["scores"]["invariance"] < 1e-6
    assert rep["scores"]["equivariance"] < 1e-6


def test_residual_relu_fits_what_a_linear_map_cannot():
    z_t = torch.randn(512, 4, generator=gen(1))
    z = z_t + 2.0 * F.relu(z_t)  # a residual ReLU correction, not affine
    lin = fit_equivariance_map(z, z_t)
    rr = fit_equivariance_map(z, z_t, "residual_relu", "sgd", hidden=16, generator=gen(0))
    assert lin.train_error > 0.1
    assert rr.train_error < 0.2 * lin.train_error


def test_held_out_rows_measure_generalisation():
    z_t = torch.randn(40, 32, generator=gen(1))
    z = torch.randn(40, 32, generator=gen(2))  # unrelated: a map only memorises the fitted rows
    fitted = fit_equivariance_map(z, z_t, holdout=0.25, generator=gen(0))
    assert len(fitted.test_index) == 10 and len(fitted.train_index) == 30
    assert sorted(torch.cat([fitted.train_index, fitted.test_index]).tolist()) == list(range(40))
    assert fitted.train_error < 1e-2
    assert fitted.test_error > 0.9
    rep = equivariance_report(z, z_t, holdout=0.25, generator=gen(0))
    assert torch.equal(rep["index"], fitted.test_index)
    assert torch.allclose(rep["equivariance"], fitted.errors[fitted.test_index])


def test_holdout_as_a_mask_or_indices():
    z = torch.randn(30, 4, generator=gen(1))
    mask = torch.zeros(30, dtype=torch.bool)
    mask[:5] = True
    a = fit_equivariance_map(z, z.flip(1), holdout=mask)
    b = fit_equivariance_map(z, z.flip(1), holdout=torch.arange(5))
    assert a.test_index.tolist() == b.test_index.tolist() == list(range(5))
    assert a.test_error < 1e-4


def test_fitted_map_keeps_feature_shapes_and_inputs():
    x = torch.randn(64, 2, 3, 3, generator=gen(1))
    x_t = x.flip(-1)
    before, before_t = x.clone(), x_t.clone()
    fitted = fit_equivariance_map(x, x_t)
    out = fitted(x_t)
    assert out.shape == x.shape and out.dtype == x.dtype
    assert torch.allclose(out, x, atol=1e-4)
    assert torch.equal(x, before) and torch.equal(x_t, before_t)


def test_classification_errors_with_the_head():
    z = torch.randn(200, 12, generator=gen(1))
    head = nn.Linear(12, 5)
    with torch.no_grad():
        y = head(z).argmax(1)  # head is right on every clean sample
    rep = equivariance_report(z, z.roll(3, dims=1), head=head, y=y, holdout=0.25, generator=gen(0))
    s = rep["scores"]
    assert s["class_error_clean"] == 0.0
    assert s["class_error_equivariance"] == 0.0
    assert s["class_error_invariance"] > 0.3
    assert rep["class_error"]["invariance"].shape == (50,)


def test_sgd_and_ridge_agree_on_a_linear_problem():
    x = torch.randn(256, 6, generator=gen(1)) * torch.tensor([1.0, 2.0, 3.0, 0.5, 1.0, 4.0])
    y = x @ torch.randn(6, 6, generator=gen(2)) + 1.0 + 0.1 * torch.randn(256, 6, generator=gen(3))
    ridge = fit_equivariance_map(y, x, solver="ridge")
    sgd = fit_equivariance_map(y, x, solver="sgd", generator=gen(0))
    assert relative(sgd.module.weight, ridge.module.weight) < 1e-3
    assert relative(sgd.module.bias, ridge.module.bias) < 1e-3
    assert sgd.train_error == pytest.approx(ridge.train_error, rel=1e-3)


def test_sgd_is_deterministic_given_the_generator():
    z = torch.randn(64, 4, generator=gen(1))
    kw = dict(kind="residual_relu", solver="sgd", epochs=20, batch_size=16, holdout=0.25)
    a = fit_equivariance_map(z, z.roll(1, 1), generator=gen(5), **kw)
    b = fit_equivariance_map(z, z.roll(1, 1), generator=gen(5), **kw)
    assert a.losses == b.losses
    assert all(torch.equal(p, q) for p, q in zip(a.module.parameters(), b.module.parameters()))


def test_mapping_error_normalisations():
    target = torch.tensor([[3.0, 4.0], [1.0, 0.0]])
    pred = torch.zeros(2, 2)
    assert mapping_error(pred, target, per_dimension=False).tolist() == [1.0, 1.0]
    assert mapping_error(target * 0.5, target, "sq", per_dimension=False).tolist() == [0.25, 0.25]
    # Per dimension: scaling one feature by 1000 does not change the error.
    t, p = torch.randn(20, 3, generator=gen(1)), torch.randn(20, 3, generator=gen(2))
    s = torch.tensor([1.0, 1000.0, 1.0])
    assert torch.allclose(mapping_error(p * s, t * s), mapping_error(p, t))
    assert not torch.allclose(mapping_error(p * s, t * s, per_dimension=False), mapping_error(p, t))


def test_mapping_error_is_nan_for_all_zero_targets():
    target = torch.tensor([[1.0, 2.0], [0.0, 0.0]])
    with pytest.warns(RuntimeWarning, match="all zeros"):
        err = mapping_error(torch.ones(2, 2), target)
    assert not torch.isnan(err[0]) and torch.isnan(err[1])


# --------------------------------------------------------------------------- representation distance


def test_representation_distance_to_itself_and_an_invertible_map_is_zero():
    z = torch.randn(200, 16, generator=gen(1))
    q, _ = torch.linalg.qr(torch.randn(16, 16, generator=gen(2)))
    a = q * torch.linspace(0.5, 2.0, 16)  # invertible, condition number 4
    for other in (z, z @ a + 0.5):
        d = representation_distance(z, other, holdout=0.25, generator=gen(0))
        assert d["scores"]["forward"] < 1e-4
        assert d["scores"]["backward"] < 1e-4
        assert abs(d["scores"]["asymmetry"]) < 1e-4


def test_rgb_to_grey_is_easy_and_grey_to_rgb_hard():
    rgb = torch.rand(400, 3, 4, 4, generator=gen(1))
    grey = (LUMA[:, None, None] * rgb).sum(1)
    d = representation_distance(rgb, grey, holdout=0.25, generator=gen(0))
    s = d["scores"]
    assert s["forward"] < 1e-4  # grey is a sub-representation of RGB
    assert s["backward"] > 0.2
    assert s["asymmetry"] < -0.2
    assert s["distance"] == pytest.approx(s["forward"] + s["backward"])
    e1, e2 = d["maps"]
    assert e1.in_shape == (3, 4, 4) and e1.out_shape == (4, 4)
    assert e1(rgb).shape == grey.shape and e2(grey).shape == rgb.shape
    assert torch.equal(e1.test_index, e2.test_index)


def test_representation_distance_with_sgd():
    rgb = torch.rand(300, 3, 2, 2, generator=gen(1))
    grey = (LUMA[:, None, None] * rgb).sum(1)
    s = representation_distance(rgb, grey, solver="sgd", holdout=0.25, generator=gen(0))["scores"]
    assert s["forward"] < 1e-3 and s["backward"] > 0.2


# --------------------------------------------------------------------------- bad input


def test_bad_inputs_raise():
    z = torch.randn(10, 4)
    with pytest.raises(ValueError, match="same shape"):
        fit_equivariance_map(z, torch.randn(10, 5))
    with pytest.raises(ValueError, match="kind"):
        fit_equivariance_map(z, z, kind="quadratic")
    with pytest.raises(ValueError, match="solver"):
        fit_equivariance_map(z, z, solver="lbfgs")
    with pytest.raises(ValueError, match="residual_relu"):
        fit_equivariance_map(z, z, kind="residual_relu", solver="ridge")
    with pytest.raises(ValueError, match="ridge"):
        fit_equivariance_map(z, z, ridge=-1.0)
    with pytest.raises(ValueError, match="holdout"):
        fit_equivariance_map(z, z, holdout=1.0)
    with pytest.raises(ValueError, match="at least 2 rows"):
        fit_equivariance_map(z, z, holdout=0.95)
    with pytest.raises(ValueError, match="empty"):
        fit_equivariance_map(torch.zeros(0, 4), torch.zeros(0, 4))
    with pytest.raises(ValueError, match="batch axis"):
        fit_equivariance_map(torch.zeros(4), torch.zeros(4))
    with pytest.raises(TypeError, match="tensor"):
        fit_equivariance_map(z.tolist(), z)
    with pytest.raises(ValueError, match="error"):
        mapping_error(z, z, error="l1")
    with pytest.raises(ValueError, match="same inputs"):
        representation_distance(z, torch.randn(9, 4))
    with pytest.raises(ValueError, match="same size"):
        representation_distance(z, torch.randn(10, 3), kind="residual_relu", solver="sgd")
    with pytest.raises(ValueError, match="head and y"):
        equivariance_report(z, z, head=nn.Linear(4, 2))
    with pytest.raises(ValueError, match="y must have shape"):
        equivariance_report(z, z, head=nn.Linear(4, 2), y=torch.zeros(3, dtype=torch.long))
