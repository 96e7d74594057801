"""Presets, magnitudes, the equivariance loss, calibration, per-instance summaries and plots used as a user would.

Each test failed before its fix (see docs/bad_input.md, rows naming this file), but for the few that pin a
property that held (marked so).
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import gen
from torch import nn

from augnet._calibration import change_curves
from augnet.instance import ConditionedAugmentationLayer
from augnet.instance_policy import PolicySummary, plot_policy_summary, policy_summary
from augnet.losses import EquivarianceLoss
from augnet.magnitudes import initial_magnitudes, invert_change, inward_clamp
from augnet.presets import cifar10_augmentation
from augnet.transforms import image as T

NAN, INF = float("nan"), float("inf")


@pytest.fixture(scope="module")
def viz():
    pytest.importorskip("matplotlib")
    import augnet.viz

    return augnet.viz


def _open_figures():
    import matplotlib.pyplot as plt

    return len(plt.get_fignums())


# ----------------------------------------------------------------------- presets


def test_cifar10_preset_docstring_gives_the_translation_range_its_policy_shows():
    """The docstring said ±16 pixels at 3x32x32 (the old half-width default); the layer reaches ±8."""
    module = cifar10_augmentation(init_magnitude=1.0)
    module(torch.rand(1, 3, 32, 32, generator=gen(0)), copies=1)
    ranges = {e["transform"]: e["range"] for e in module.policy((32, 32))[0]}
    assert ranges["TranslateX"].high == pytest.approx(8.0) and ranges["TranslateY"].high == pytest.approx(8.0)
    assert "±8 pixels" in cifar10_augmentation.__doc__ and "±16" not in cifar10_augmentation.__doc__


# ----------------------------------------------------------------------- magnitudes


@pytest.mark.parametrize("init, error", [(b"ab", TypeError), (torch.full((2,), 0.5, device="meta"), ValueError)])
def test_initial_magnitudes_refuse_bytes_and_meta_tensors(init, error):
    """Bytes were read as the numbers 97, 98 (a ValueError about 97.0); a meta tensor raised NotImplementedError."""
    with pytest.raises(error, match="init_magnitude"):
        initial_magnitudes(init, 2)


def test_inward_clamp_and_invert_change_hold_their_mathematics():
    """Held: the clamp's gradient is the identity's inside and drops the outward part at the bounds; the inverse of
    a strictly monotone curve gives back the magnitude, with gradcheck-exact derivatives in float64."""
    raw = torch.tensor([-0.5, 0.0, 0.3, 1.0, 1.5], dtype=torch.float64, requires_grad=True)
    (inward_clamp(raw) * torch.tensor([1.0, 1.0, 1.0, -1.0, -1.0], dtype=torch.float64)).sum().backward()
    assert raw.grad.tolist() == [0.0, 0.0, 1.0, 0.0, 0.0]  # outward at both bounds: dropped
    grid = torch.linspace(0, 1, 11, dtype=torch.float64)
    curves = torch.stack([3 * grid**2, grid.sqrt(), 0.5 * grid])
    mu = torch.tensor([0.37, 0.81, 0.55], dtype=torch.float64)
    change = torch.tensor([float(np.interp(float(m), grid.numpy(), c.numpy())) for m, c in zip(mu, curves)],
                          dtype=torch.float64, requires_grad=True)  # fmt: skip
    assert torch.allclose(invert_change(curves, change), mu)
    assert torch.autograd.gradcheck(lambda c: invert_change(curves, c), (change,))


# ----------------------------------------------------------------------- EquivarianceLoss


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"kind": "residual_relu", "hidden": 2.5}, TypeError, "hidden"),  # was truncated to 2
        ({"kind": "residual_relu", "hidden": True}, TypeError, "hidden"),  # was one hidden unit
        ({"kind": "residual_relu", "hidden": "4"}, TypeError, "hidden"),  # was int("4")
        ({"kind": "linear", "hidden": 4}, ValueError, "hidden"),  # was ignored
        ({"output_relu": "no"}, TypeError, "output_relu"),  # was True
        ({"output_relu": None}, TypeError, "output_relu"),
        ({"kind": "residual_relu", "generator": 3}, TypeError, "generator"),  # torch's randn() error
        ({"generator": 3}, TypeError, "generator"),  # was ignored
        ({"equivariance_weight": torch.tensor(1.0, device="meta")}, ValueError, "equivariance_weight"),
    ],
)
def test_equivariance_loss_refuses_bad_construction(kwargs, error, match):
    with pytest.raises(error, match=match):
        EquivarianceLoss(4, **kwargs)


def test_equivariance_loss_keeps_a_weight_given_as_a_tensor_with_a_gradient_quietly():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # float() of a tensor that requires grad warned
        loss = EquivarianceLoss(4, equivariance_weight=torch.tensor(2.0, requires_grad=True))
    assert loss.equivariance_weight == 2.0 and isinstance(loss.equivariance_weight, float)


def _loss_case():
    d, b, j = 5, 4, 2
    head = nn.Linear(d, 3).double()
    loss = EquivarianceLoss(d, num_transforms=j, equivariance_weight=2.0, invariance_weight=3.0,
                            transformed_weight=0.7).double()  # fmt: skip
    with torch.no_grad():
        for p in loss.maps.parameters():
            p.copy_(0.3 * torch.randn(p.shape, generator=gen(1), dtype=p.dtype))
    z = torch.randn(b, d, generator=gen(2), dtype=torch.float64)
    z_t = torch.randn(j, b, d, generator=gen(3), dtype=torch.float64)
    return loss, head, z, z_t, torch.tensor([0, 2, 1, 0])


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda loss, head, z, z_t, y: loss(z, z_t, y, head, maps=[0, 1.7]), TypeError, "maps"),  # was map 1
        (lambda loss, head, z, z_t, y: loss(z, z_t, y, head, maps=[0, True]), TypeError, "maps"),  # was map 1
        (lambda loss, head, z, z_t, y: loss(z, z_t, y, head, maps=1), TypeError, "maps"),  # 'int' not iterable
        (lambda loss, head, z, z_t, y: loss(z, z_t, y, head, maps=[0, None]), TypeError, "maps"),
        (lambda loss, head, z, z_t, y: loss(z, z_t, y.double(), head), TypeError, "y must hold integer"),
        (lambda loss, head, z, z_t, y: loss(z, z_t, y.bool(), head), TypeError, "y must hold integer"),
        (lambda loss, head, z, z_t, y: loss(z, z_t, y, "head"), TypeError, "head"),
    ],
)
def test_equivariance_loss_names_bad_arguments_of_a_call(call, error, match):
    loss, head, z, z_t, y = _loss_case()
    state = {k: v.clone() for k, v in loss.state_dict().items()}
    with pytest.raises(error, match=match):
        call(loss, head, z, z_t, y)
    assert all(torch.equal(state[k], v) for k, v in loss.state_dict().items())


def test_equivariance_loss_is_its_formula_and_gradchecks():
    """Held: eq. 7 computed by hand (sums over D divided by D), any map order, and float64 gradients."""
    loss, head, z, z_t, y = _loss_case()
    terms = []
    for j in range(2):
        m = loss.maps[j](z_t[j])
        terms.append(F.cross_entropy(head(m), y) + 2.0 * (m - z).pow(2).sum(1).mean() / 5
                     + 3.0 * (z_t[j] - z).pow(2).sum(1).mean() / 5)  # fmt: skip
    expected = F.cross_entropy(head(z), y) + 0.7 * (terms[0] + terms[1]) / 2
    assert torch.allclose(loss(z, z_t, y, head), expected, rtol=1e-12, atol=0)
    assert torch.allclose(loss(z, z_t.flip(0), y, head, maps=np.array([1, 0])), expected, rtol=1e-12, atol=0)
    zz, zt = z.clone().requires_grad_(), z_t.clone().requires_grad_()
    assert torch.autograd.gradcheck(lambda a, b: loss(a, b, y, head), (zz, zt))


# ----------------------------------------------------------------------- calibration


def test_calibration_names_an_array_and_a_meta_batch():
    """An array was 'a non-empty batch of inputs' it was not; a meta batch raised RuntimeError from .item()."""
    x = torch.rand(4, 3, 8, 8, generator=gen(0))
    with pytest.raises(TypeError, match="tensor of inputs, got ndarray"):
        change_curves([T.Rotate()], x.numpy(), 5, None, None)
    with pytest.raises(ValueError, match="meta"):
        change_curves([T.Rotate()], x.to("meta"), 5, None, None)


def test_calibration_does_not_depend_on_the_scale_of_the_features():
    """Features of scale 1e-30 underflowed float32 in their squares: 'features that are not all zero' was raised.
    The change is relative: any scale gives the curves of the features themselves."""
    x = torch.rand(4, 3, 8, 8, generator=gen(0))
    transforms = [T.Brightness(), T.Rotate()]
    plain = change_curves(transforms, x, 5, None, None)
    for scale in (1e-30, 1e30):
        scaled = change_curves(transforms, x, 5, None, lambda t, s=scale: t * s)
        torch.testing.assert_close(scaled, plain, rtol=1e-5, atol=1e-6)


def test_calibration_curves_are_the_relative_rms_change():
    """Held: each point is sqrt(mean (T(x; m) - x)^2 / mean x^2) at the same draws, made monotone."""
    x = torch.rand(4, 3, 8, 8, generator=gen(0))
    transforms = [T.Brightness(), T.Rotate()]
    curves = change_curves(transforms, x, 5, None, None)
    ref = torch.tensor([[float(((t(x, m, generator=gen(0)) - x).pow(2).mean() / x.pow(2).mean()).sqrt())
                         for m in torch.linspace(0, 1, 5).tolist()] for t in transforms])  # fmt: skip
    torch.testing.assert_close(curves, ref.cummax(1).values)


# ----------------------------------------------------------------------- per-instance summaries


def _conditioned():
    torch.manual_seed(0)
    return ConditionedAugmentationLayer([T.Rotate(), T.TranslateX()], channels=3, init_magnitude=0.25)


def test_policy_summary_takes_quantiles_as_an_array_or_a_tensor():
    """The project reads arrays and tensors of numbers as their values; quantiles were a TypeError."""
    layer = _conditioned()
    x, y = torch.rand(6, 3, 8, 8, generator=gen(0)), torch.tensor([0, 1, 0, 1, 0, 1])
    plain = policy_summary(layer, (x, y), quantiles=[0.25, 0.75])
    for levels in (np.array([0.25, 0.75]), torch.tensor([0.25, 0.75], dtype=torch.float64)):
        summary = policy_summary(layer, (x, y), quantiles=levels)
        assert summary.quantiles == (0.25, 0.75) and summary.classes == plain.classes


@pytest.mark.parametrize(
    "data, error, match",
    [
        (lambda x, y: (x, y.double() * 1e20), ValueError, "int64"),  # the labels became -2**63
        (lambda x, y: (x.to("meta"), y), ValueError, "meta"),  # NotImplementedError: cannot copy out of meta
        (lambda x, y: None, TypeError, "loader"),  # 'NoneType' object is not iterable
    ],
)
def test_policy_summary_refuses_what_it_cannot_summarise(data, error, match):
    layer = _conditioned()
    layer.train()
    state = {k: v.clone() for k, v in layer.state_dict().items()}
    x, y = torch.rand(6, 3, 8, 8, generator=gen(0)), torch.tensor([0, 1, 0, 1, 0, 1])
    with pytest.raises(error, match=match):
        policy_summary(layer, data(x, y))
    assert layer.training and all(torch.equal(state[k], v) for k, v in layer.state_dict().items())


def test_policy_summary_runs_on_the_layers_device_and_refuses_another_before_any_batch():
    """device="cuda" with a CPU layer failed inside the loop with torch's device mismatch (or, on a machine
    without CUDA, its lazy-init error); the layer's own device, named or not, is taken."""
    layer = _conditioned()
    x, y = torch.rand(6, 3, 8, 8, generator=gen(0)), torch.tensor([0, 1, 0, 1, 0, 1])
    plain = policy_summary(layer, (x, y))
    for same in ("cpu", torch.device("cpu"), "cpu:0"):
        assert policy_summary(layer, (x, y), device=same).classes == plain.classes
    seen = []

    def loader():  # counts the batches read
        for _ in range(2):
            seen.append(1)
            yield x, y

    for other, match in (("cuda", "not the layer's"), ("meta", "not the layer's"), ("toaster", "name a device")):
        with pytest.raises(ValueError, match=match):
            policy_summary(layer, loader(), device=other)
    assert seen == []


def test_plot_policy_summary_refuses_nothing_to_plot(viz, tmp_path):
    """A summary of no class wrote an empty figure; a non-summary and a list of names raised AttributeError."""
    layer = _conditioned()
    summary = policy_summary(layer, (torch.rand(4, 3, 8, 8, generator=gen(0)), torch.tensor([0, 1, 0, 1])))
    with pytest.raises(ValueError, match="no class"):
        plot_policy_summary(PolicySummary(["Rotate"], ["deg"], (0.5,)), tmp_path / "a.png")
    with pytest.raises(TypeError, match="PolicySummary"):
        plot_policy_summary(summary.to_json(), tmp_path / "b.png")
    with pytest.raises(TypeError, match="names"):
        plot_policy_summary(summary, tmp_path / "c.png", names=["zero", "one"])
    assert not list(tmp_path.iterdir())
    assert plot_policy_summary(summary, tmp_path / "d.png", names={0: "zero"}).exists()


# ----------------------------------------------------------------------- plots


@pytest.mark.parametrize(
    "plot, error, match",
    [
        (lambda v, p: v.plot_distributions({"a": [1.0, 2.0]}, p, "y", ylim=(NAN, 1)), ValueError, "ylim"),
        (lambda v, p: v.plot_distributions({"a": [1.0, 2.0]}, p, "y", ylim=1), TypeError, "ylim"),
        (lambda v, p: v.plot_distributions({"a": "abc"}, p, "y"), TypeError, "'a'"),
        (lambda v, p: v.plot_distributions({"a": None}, p, "y"), TypeError, "'a'"),
        (lambda v, p: v.plot_distributions({"a": torch.ones(2, device="meta")}, p, "y"), ValueError, "'a'"),
        (lambda v, p: v.plot_distributions({"a": torch.tensor([1 + 1j])}, p, "y"), TypeError, "'a'"),
        (lambda v, p: v.plot_layer_importance({"a": "x"}, p), TypeError, "'a'"),
        (lambda v, p: v.plot_layer_importance({"a": torch.ones(2)}, p), TypeError, "'a'"),
        (lambda v, p: v.plot_layer_importance({"a": INF}, p), ValueError, "'a'"),
        (lambda v, p: v.plot_layer_importance({"a": NAN, "b": NAN}, p), ValueError, "NaN"),  # an empty figure
        (lambda v, p: v.plot_policy_history(None, ["a", "b"], p), TypeError, "history"),
        (lambda v, p: v.plot_policy_history(_history(steps=3), ["a", "b"], p), ValueError, "differ in length"),
        (lambda v, p: v.plot_policy_history(_history(ragged=True), ["a", "b"], p), ValueError, "record 1"),
        (lambda v, p: v.plot_policy_history(_history(), "ab", p), TypeError, "names"),
        (lambda v, p: v.plot_policy_history({"step": [0], "weights": [], "magnitudes": []}, ["a"], p),
         ValueError, "history"),  # an IndexError
        (lambda v, p: v.plot_invariance_curves({"a": _curve(magnitudes=3)}, p), ValueError, "3 magnitudes"),
        (lambda v, p: v.plot_invariance_curves({"a": _curve(partial=True)}, p), ValueError, "p25"),  # KeyError
        (lambda v, p: v.plot_invariance_curves({"a": _curve()}, p, band="p25"), TypeError, "band"),
        (lambda v, p: v.plot_invariance_curves({"a": _curve()}, p, band=None), TypeError, "band"),
    ],
)
def test_plots_refuse_bad_data_before_drawing(viz, tmp_path, plot, error, match):
    """Each was matplotlib's or torch's error (not naming the entry), most after a figure was opened and left
    open; now a TypeError / ValueError naming it, no figure opened, no file written."""
    before = _open_figures()
    with pytest.raises(error, match=match):
        plot(viz, tmp_path / "x.png")
    assert _open_figures() == before and not list(tmp_path.iterdir())


def _history(steps=2, ragged=False):
    weights = [[[0.5, 0.5]], [[0.6]] if ragged else [[0.6, 0.4]]]
    return {"step": list(range(steps)), "weights": weights, "magnitudes": [[[0.1, 0.2]], [[0.2, 0.3]]]}


def _curve(magnitudes=2, partial=False):
    entry = {"median": 1.0, "p25": 0.9, "p75": 1.0}
    summary = [entry, {"median": 1.0}] if partial else [entry, entry]
    return {"magnitude": list(np.linspace(0, 1, magnitudes)), "summary": summary}


def test_plots_take_unusual_good_data(viz, tmp_path):
    """Held and kept: one point, a NaN among numbers, arrays and tensors (with a gradient, in bfloat16)."""
    data = {"a": torch.tensor([1.0, NAN, 2.0], requires_grad=True), "b": np.array([3, 4])}
    assert viz.plot_distributions(data, tmp_path / "d.png", "y", ylim=np.array([0, 5])).exists()
    assert viz.plot_layer_importance({"a": torch.tensor(0.5, requires_grad=True), "b": NAN,
                                      "c": np.float32(0.2)}, tmp_path / "l.png").exists()  # fmt: skip
    one = {"step": [0], "weights": [[[0.5, 0.5]]], "magnitudes": [[[0.1, 0.2]]]}
    assert viz.plot_policy_history(one, ("a", "b"), tmp_path / "h.png").exists()
    assert viz.plot_invariance_curves({"a": _curve(magnitudes=2)}, tmp_path / "c.png").exists()
