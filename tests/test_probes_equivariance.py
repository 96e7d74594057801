"""Equivariance maps, reports and representation distance (Tensmeyer & Martinez)."""

import math

import pytest
import torch
import torch.nn.functional as F
from helpers import gen
from torch import nn

from augnet.probes.equivariance import (
    equivariance_curve,
    equivariance_report,
    plot_equivariance_curves,
    representation_distance,
)
from augnet.probes.maps import SOLVER_DEFAULTS, EquivarianceMap, fit_equivariance_map, mapping_error
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
    fitted = fit_equivariance_map(x.flatten(1), roll(x).flatten(1), solver="adam_cosine", generator=gen(0))
    P = permutation_matrix(roll, (1, 4, 4))
    assert relative(linear_matrix(fitted), P.T) < 1e-3
    assert fitted.losses[-1] < 1e-3 * fitted.losses[0]


@pytest.mark.parametrize(
    ("kind", "solver"),
    [("linear", "ridge"), ("linear", "adam_cosine"), ("linear", "sgd_paper"), ("residual_relu", "adam_cosine")],
)
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
    rr = fit_equivariance_map(z, z_t, "residual_relu", "adam_cosine", hidden=16, generator=gen(0))
    assert lin.train_error > 0.1
    assert rr.train_error < 0.2 * lin.train_error


def test_held_out_rows_measure_generalisation():
    z_t = torch.randn(40, 32, generator=gen(1))
    z = torch.randn(40, 32, generator=gen(2))  # unrelated: a map only memorises the fitted rows
    with pytest.warns(RuntimeWarning, match="30 training rows for a map with 33 parameters"):
        fitted = fit_equivariance_map(z, z_t, holdout=0.25, generator=gen(0))
    assert len(fitted.test_index) == 10 and len(fitted.train_index) == 30
    assert sorted(torch.cat([fitted.train_index, fitted.test_index]).tolist()) == list(range(40))
    assert fitted.train_error < 1e-2
    assert fitted.test_error > 0.9
    with pytest.warns(RuntimeWarning, match="under-determined"):
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
    sgd = fit_equivariance_map(y, x, solver="adam_cosine", generator=gen(0))
    assert relative(sgd.module.weight, ridge.module.weight) < 1e-3
    assert relative(sgd.module.bias, ridge.module.bias) < 1e-3
    assert sgd.train_error == pytest.approx(ridge.train_error, rel=1e-3)


def test_sgd_is_deterministic_given_the_generator():
    z = torch.randn(64, 4, generator=gen(1))
    kw = dict(kind="residual_relu", solver="adam_cosine", epochs=20, batch_size=16, holdout=0.25)
    a = fit_equivariance_map(z, z.roll(1, 1), generator=gen(5), **kw)
    b = fit_equivariance_map(z, z.roll(1, 1), generator=gen(5), **kw)
    assert a.losses == b.losses
    assert all(torch.equal(p, q) for p, q in zip(a.module.parameters(), b.module.parameters()))


def test_mapping_error_normalisations():
    target = torch.tensor([[3.0, 4.0], [1.0, 0.0]])
    pred = torch.zeros(2, 2)
    assert mapping_error(pred, target, per_dimension=False).tolist() == [1.0, 1.0]
    assert mapping_error(target * 0.5, target, "sq", per_dimension=False).tolist() == [0.25, 0.25]
    # Per dimension: a feature 1000 times louder than the other 63 is brought to their scale, so it does not
    # decide the error (without the normalisation it does); one factor for every feature changes nothing.
    t, p = torch.randn(40, 64, generator=gen(1)), torch.randn(40, 64, generator=gen(2))
    s = torch.ones(64)
    s[0] = 1000.0
    plain = mapping_error(p, t).mean()
    assert abs(mapping_error(p * s, t * s).mean() / plain - 1) < 0.05
    assert abs(mapping_error(p * s, t * s, per_dimension=False).mean() / plain - 1) > 0.2
    torch.testing.assert_close(mapping_error(1e3 * p, 1e3 * t), mapping_error(p, t))


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
    assert d["forms"] == ("sigma(W r + b)", "sigma(W r + b)")  # both are non-negative: section 5.3's E


def test_representation_distance_with_sgd():
    rgb = torch.rand(300, 3, 2, 2, generator=gen(1))
    grey = (LUMA[:, None, None] * rgb).sum(1)
    s = representation_distance(rgb, grey, solver="adam_cosine", holdout=0.25, generator=gen(0))["scores"]
    assert s["forward"] < 1e-3 and s["backward"] > 0.2


# --------------------------------------------------------------------------- held-out errors by default


@pytest.mark.parametrize("n", [40, 200])
def test_unrelated_features_are_not_equivariant_on_held_out_data(n):
    # Unrelated z and z_t of D = 100 features: in-sample, an affine map fits them (error 0.000 at N = 40,
    # 0.70 at N = 200); the default reports held-out errors, about 1.5-2 here.
    z_t, z = torch.randn(n, 100, generator=gen(1)), torch.randn(n, 100, generator=gen(2))
    if n < 150:  # 28 training rows for 101 parameters per output: the fit warns and says what to do
        with pytest.warns(RuntimeWarning, match=r"at least 101 training rows \(N >= 145"):
            rep = equivariance_report(z, z_t)
        with pytest.warns(RuntimeWarning, match="under-determined"):
            dist = representation_distance(z, z_t)
    else:
        rep, dist = equivariance_report(z, z_t), representation_distance(z, z_t)
    assert rep["evaluated_on"] == "held_out" and dist["evaluated_on"] == "held_out"
    assert len(rep["index"]) == round(0.3 * n)
    assert rep["scores"]["equivariance"] > 1.0
    assert dist["scores"]["forward"] > 1.0 and dist["scores"]["backward"] > 1.0
    fitted = rep["map"]
    assert fitted.test_error > 1.0 > fitted.train_error  # the training error is biased low


def test_in_sample_errors_are_refused_when_the_map_can_fit_anything():
    z_t, z = torch.randn(40, 100, generator=gen(1)), torch.randn(40, 100, generator=gen(2))
    with pytest.raises(ValueError, match=r"Hold rows out \(holdout=0.3, the default\)"):
        fit_equivariance_map(z, z_t, holdout=0.0)
    with pytest.raises(ValueError, match="in-sample error is about 0"):
        representation_distance(z, z_t, holdout=0.0)
    # Enough rows: in-sample errors are allowed, and labelled as training errors.
    z_t, z = torch.randn(200, 10, generator=gen(1)), torch.randn(200, 10, generator=gen(2))
    rep = equivariance_report(z, z_t, holdout=0.0)
    assert rep["evaluated_on"] == "training" and len(rep["index"]) == 200


@pytest.mark.parametrize("relation", ["permutation", "invertible_linear"])
def test_equivariant_pairs_have_held_out_error_near_zero(relation):
    z = torch.randn(200, 30, generator=gen(1))
    if relation == "permutation":
        z_t = z[:, torch.randperm(30, generator=gen(2))]
    else:
        q, _ = torch.linalg.qr(torch.randn(30, 30, generator=gen(2)))
        z_t = z @ (q * torch.linspace(0.5, 2.0, 30))
    z_t = z_t + 1e-4 * torch.randn(200, 30, generator=gen(3))
    rep = equivariance_report(z, z_t)
    assert rep["evaluated_on"] == "held_out"
    assert rep["scores"]["equivariance"] < 1e-2
    assert rep["scores"]["invariance"] > 0.5
    # Non-negative features of the same kind (eq. 8's form): also near 0.
    zp = z.abs()
    zp_t = zp[:, torch.randperm(30, generator=gen(2))] + 1e-4 * torch.rand(200, 30, generator=gen(3))
    rep = equivariance_report(zp, zp_t)
    assert rep["form"] == "sigma((W + I) r + b)" and rep["scores"]["equivariance"] < 1e-2


def test_the_default_split_is_seeded():
    z = torch.randn(50, 4, generator=gen(1))
    a, b = fit_equivariance_map(z, z.flip(1)), fit_equivariance_map(z, z.flip(1))
    c = fit_equivariance_map(z, z.flip(1), seed=1)
    assert torch.equal(a.test_index, b.test_index) and len(a.test_index) == 15
    assert not torch.equal(a.test_index, c.test_index)
    assert torch.equal(a.test_index, fit_equivariance_map(z, z.flip(1), generator=gen(0)).test_index)


# --------------------------------------------------------------------------- the paper's map form and solvers


def relu_pair(n=300, d=12):
    x = torch.randn(n, d, generator=gen(1), dtype=torch.float64)
    q, _ = torch.linalg.qr(torch.randn(d, d, generator=gen(2), dtype=torch.float64))
    return F.relu(x), F.relu(x @ q)  # post-ReLU features, related by a rotation before the ReLU: not exactly mappable


@pytest.mark.parametrize("solver", ["ridge", "adam_cosine", "sgd_paper"])
def test_the_paper_form_never_maps_to_negative_values(solver):
    z, z_t = relu_pair()
    kw = {"epochs": 50} if solver == "adam_cosine" else {}
    fitted = fit_equivariance_map(z, z_t, solver=solver, **kw)
    assert fitted.output == "relu" and fitted.form == "sigma((W + I) r + b)"
    assert fitted.module.output_relu
    probe = torch.cat([z_t, torch.randn(100, 12, generator=gen(5), dtype=torch.float64)])  # any input
    assert (fitted(probe) >= 0).all()
    rep = equivariance_report(z, z_t, solver=solver, **kw)
    assert rep["form"] == "sigma((W + I) r + b)" and rep["output"] == "relu"


def test_the_linear_form_stays_available_and_goes_negative():
    z, z_t = relu_pair()
    linear = fit_equivariance_map(z, z_t, output="identity")
    paper = fit_equivariance_map(z, z_t)
    assert linear.form == "(W + I) r + b" and not linear.module.output_relu
    assert float((linear(z_t) < 0).double().mean()) > 0.05  # what the map without sigma does on these features
    # Same ridge solution before sigma: on non-negative targets, sigma can only lower each error.
    assert torch.equal(linear.module.weight, paper.module.weight)
    assert (paper.errors <= linear.errors + 1e-12).all()
    assert paper.test_error < linear.test_error
    # Signed features keep the linear form by default; "relu" can be asked for.
    signed = torch.randn(100, 4, generator=gen(1))
    assert fit_equivariance_map(signed, signed.flip(1)).form == "(W + I) r + b"
    assert fit_equivariance_map(signed, signed.flip(1), output="relu").form == "sigma((W + I) r + b)"


class _Spy:
    """Records the optimisers built and the steps they take (wraps torch.optim.SGD / Adam)."""

    def __init__(self, monkeypatch):
        self.built, self.lrs = [], []
        spy = self
        for name in ("SGD", "Adam"):
            base = getattr(torch.optim, name)

            class Recording(base):
                kind = name

                def __init__(self, params, **kw):
                    super().__init__(params, **kw)
                    spy.built.append((self.kind, dict(self.defaults)))

                def step(self, closure=None):
                    spy.lrs.append(self.param_groups[0]["lr"])
                    return super().step(closure)

            monkeypatch.setattr(torch.optim, name, Recording)


def test_solver_names_map_to_the_optimisers_they_say(monkeypatch):
    z, z_t = relu_pair(n=50)
    spy = _Spy(monkeypatch)
    fitted = fit_equivariance_map(z, z_t, solver="sgd_paper")
    ((name, defaults),) = spy.built
    assert name == "SGD"
    assert defaults["lr"] == 1e-3 and defaults["momentum"] == 0.9 and defaults["weight_decay"] == 1e-5
    n_train = len(fitted.train_index)
    assert len(spy.lrs) == 10 * n_train  # fully online: one step per row, 10 epochs
    assert set(spy.lrs) == {1e-3}  # static learning rate
    assert len(fitted.losses) == 10

    spy = _Spy(monkeypatch)
    fitted = fit_equivariance_map(z, z_t, solver="adam_cosine", epochs=20)
    ((name, defaults),) = spy.built
    assert name == "Adam" and defaults["lr"] == SOLVER_DEFAULTS["adam_cosine"]["lr"]
    assert len(spy.lrs) == 20  # full batch
    assert spy.lrs[0] == pytest.approx(3e-2) and spy.lrs[10] == pytest.approx(1.5e-2)  # cosine: half-way, half
    assert all(a > b for a, b in zip(spy.lrs, spy.lrs[1:]))

    spy = _Spy(monkeypatch)
    fit_equivariance_map(z, z_t, solver="ridge")
    assert spy.built == [] and spy.lrs == []  # closed form
    with pytest.raises(ValueError, match=r"now named 'adam_cosine'.*'sgd_paper'"):
        fit_equivariance_map(z, z_t, solver="sgd")
    with pytest.raises(ValueError, match="momentum applies to solver='sgd_paper' only"):
        fit_equivariance_map(z, z_t, solver="adam_cosine", momentum=0.5)


def test_sgd_paper_refuses_to_diverge_silently():
    z = 100.0 * torch.randn(60, 8, generator=gen(1))
    with pytest.raises(ValueError, match=r"diverged.*lower lr"):
        fit_equivariance_map(z, z.flip(1), solver="sgd_paper")


# --------------------------------------------------------------------------- curves against the magnitude (Fig. 1)


def rotate_pairs(x, theta):
    """Rotate each coordinate pair (x_0, x_1), (x_2, x_3), ... by ``theta`` radians."""
    a = x.reshape(len(x), -1, 2)
    c, s = math.cos(theta), math.sin(theta)
    return torch.stack([c * a[..., 0] - s * a[..., 1], s * a[..., 0] + c * a[..., 1]], -1).reshape(x.shape)


def test_curve_of_exactly_equivariant_features():
    # phi = identity is equivariant to a rotation of coordinate pairs: M = R(-theta) undoes it exactly, while
    # ||R(theta) z - z|| / ||z|| = 2 sin(theta / 2) for every sample: the invariance error grows with theta.
    x = torch.randn(300, 8, generator=gen(1), dtype=torch.float64)
    thetas = [0.0, 0.5, 1.0, 2.0, 3.0]
    c = equivariance_curve(lambda a: a, x, rotate_pairs, thetas, per_dimension=False)
    assert c["magnitude"] == thetas and c["form"] == "(W + I) r + b"
    assert len(c["index"]) == 90 and c["errors"]["invariance"].shape == (5, 90)
    assert max(c["equivariance"]) < 1e-4
    expected = [2 * math.sin(t / 2) for t in thetas]
    assert c["invariance"] == pytest.approx(expected, abs=1e-9)
    assert all(a < b for a, b in zip(c["invariance"], c["invariance"][1:]))


def test_curve_with_a_model_an_augnet_transform_and_a_head():
    # Brightness adds one shift s to every pixel (one draw shared by every image, scaled by the magnitude):
    # M(r) = sigma(r - s) undoes it exactly on non-negative pixels; the invariance error is proportional to |s|.
    x = torch.rand(120, 1, 4, 4, generator=gen(1))
    head = nn.Linear(16, 3)
    with torch.no_grad():
        y = head(x.flatten(1)).argmax(1)
    mags = [0.0, 0.25, 0.5, 1.0]
    c = equivariance_curve(nn.Flatten(), x, T.Brightness(), mags, head=head, y=y)
    assert c["form"] == "sigma((W + I) r + b)"  # pixels are non-negative: eq. 8
    assert max(c["equivariance"]) < 1e-6
    inv = c["invariance"]
    assert inv[0] == 0.0 and inv[3] > 0.1
    assert inv[1:] == pytest.approx([m * inv[3] for m in mags[1:]], rel=1e-6)
    assert c["range"][3][2] == "shift"
    assert c["class_error"]["clean"] == [0.0] * 4 and c["class_error"]["equivariance"] == [0.0] * 4
    assert c["class_error"]["invariance"][0] == 0.0
    assert all(torch.equal(m.test_index, c["index"]) for m in c["maps"])  # one held-out set for the curve


def test_plot_equivariance_curves(tmp_path):
    pytest.importorskip("matplotlib")
    x = torch.randn(60, 4, generator=gen(1), dtype=torch.float64)
    y = torch.zeros(60, dtype=torch.long)
    c = equivariance_curve(lambda a: a, x, rotate_pairs, [0.0, 1.0], head=lambda z: z[:, :2], y=y)
    path = plot_equivariance_curves({"identity": c}, tmp_path / "fig1.png", metric="class_error")
    assert path.exists() and path.stat().st_size > 0
    assert plot_equivariance_curves(c, tmp_path / "one.png").exists()
    with pytest.raises(ValueError, match="metric"):
        plot_equivariance_curves(c, tmp_path / "x.png", metric="accuracy")
    with pytest.raises(ValueError, match="no classification errors"):
        plot_equivariance_curves(
            equivariance_curve(lambda a: a, x, rotate_pairs, [0.0]), tmp_path / "y.png", "class_error"
        )


def test_curve_bad_inputs():
    x = torch.randn(20, 4)
    with pytest.raises(ValueError, match="at least one magnitude"):
        equivariance_curve(lambda a: a, x, rotate_pairs, [])
    with pytest.raises(ValueError, match=r"layer and copies apply to an nn\.Module"):
        equivariance_curve(lambda a: a, x, rotate_pairs, [0.0], layer="0")
    with pytest.raises(TypeError, match="transform"):
        equivariance_curve(lambda a: a, x, "rotate", [0.0])
    with pytest.raises(ValueError, match="head and y"):
        equivariance_curve(lambda a: a, x, rotate_pairs, [0.0], head=lambda z: z)
    with pytest.raises(ValueError, match="transform must return 20"):
        equivariance_curve(lambda a: a, x, lambda a, m: a[:5], [0.0])


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
        representation_distance(z, torch.randn(10, 3), kind="residual_relu", solver="adam_cosine")
    with pytest.raises(ValueError, match="head and y"):
        equivariance_report(z, z, head=nn.Linear(4, 2))
    with pytest.raises(ValueError, match="output"):
        fit_equivariance_map(z, z, output="sigmoid")
    with pytest.raises(TypeError, match="seed"):
        fit_equivariance_map(z, z, seed=1.5)
    with pytest.raises(TypeError, match="unexpected keyword"):
        representation_distance(z, z, ridges=1.0)
    with pytest.raises(ValueError, match="z and y must have the same length, got 10 and 3"):
        equivariance_report(z, z, head=nn.Linear(4, 2), y=torch.zeros(3, dtype=torch.long))


# --------------------------------------------------------------------------- non-finite rows (issue 26)


@pytest.mark.parametrize("where", ["held_out", "training"])
def test_a_non_finite_row_is_refused_by_name_wherever_it_falls(where):
    # Before, a NaN in a held-out row was dropped from the mean (scores looked fine), and in a training
    # row it gave NaN scores or an SVD error.
    z = torch.randn(100, 5, generator=gen(1)).double()
    z_t = z.roll(1, dims=1)
    fitted = fit_equivariance_map(z, z_t)
    row = int((fitted.test_index if where == "held_out" else fitted.train_index)[3])
    for bad_value in (math.nan, math.inf):
        bad = z.clone()
        bad[row, 2] = bad_value
        with pytest.raises(ValueError, match=rf"z holds NaN or infinite values in row\(s\) \[{row}\]"):
            equivariance_report(bad, z_t)
        with pytest.raises(ValueError, match=rf"z_t holds NaN or infinite values in row\(s\) \[{row}\]"):
            fit_equivariance_map(z, bad)
        with pytest.raises(ValueError, match=rf"\[{row}\]"):
            representation_distance(z, bad)
