"""A calibrated augmentation layer's gradients at the edges of its magnitudes (0, its cap, a flat curve end).

The inverse of a calibration curve had derivative 0 at a change of 0 and at a curve's end (the clamp to [0, 1]),
and about 1e12 times the right one at a flat end (the flat segment's slope, 1 / 1e-12): a calibrated magnitude at
0 or at its cap took no task gradient, or took one that threw it to the other bound in one step.
"""

import pytest
import torch

import augnet
from augnet.magnitudes import invert_change
from augnet.transforms import image as T

F64 = torch.float64


def one_sided(f, x: torch.Tensor, i: int, side: int, h: float = 1e-7) -> float:
    """The finite difference of the scalar ``f`` at ``x`` along entry ``i``, into ``side`` (+1 or -1)."""
    moved = x.detach().clone()
    moved[i] += side * h
    with torch.no_grad():
        return side * (float(f(moved)) - float(f(x.detach()))) / h


def grad_of(f, x: torch.Tensor) -> torch.Tensor:
    x = x.detach().clone().requires_grad_()
    (g,) = torch.autograd.grad(f(x), x)
    return g


CURVES = torch.tensor([[0.0, 0.2, 0.5, 0.6], [0.0, 0.3, 0.3, 0.3], [0.0, 0.0, 0.4, 1.0]], dtype=F64)


@pytest.mark.parametrize("q", [0, 1, 2])
def test_the_inverse_at_a_change_of_0_has_the_one_sided_derivative(q):
    """The derivative at 0 is the first rising segment's (it was 0 on every curve)."""
    change = torch.zeros(3, dtype=F64)
    g = grad_of(lambda c: invert_change(CURVES, c)[q], change)
    if q < 2:  # a curve rising from 0: the slope into (0, 1]
        assert g[q].item() == pytest.approx(one_sided(lambda c: invert_change(CURVES, c)[q], change, q, +1), rel=1e-6)
    else:  # a gate's curve, flat from 0: the segment after the flat stretch
        assert g[q].item() == pytest.approx((1 / 3) / 0.4, rel=1e-12)
    assert g[q].item() > 0


@pytest.mark.parametrize("q", [0, 1, 2])
def test_the_inverse_at_a_curves_end_has_the_left_derivative_and_a_finite_one(q):
    """At the end value: the segment arriving there (it was 0, or 1e12 times it at the flat end of row 1)."""
    change = CURVES[:, -1].clone()
    g = grad_of(lambda c: invert_change(CURVES, c)[q], change)
    left = one_sided(lambda c: invert_change(CURVES, c)[q], change, q, -1)
    assert g[q].item() == pytest.approx(left, rel=1e-6)
    assert 0 < g[q].item() < 10
    # the values are kept: 1 at a rising end, a flat stretch's first magnitude
    assert invert_change(CURVES, change)[q].item() == [1.0, 1 / 3, 1.0][q]


def calibrated(curves: torch.Tensor, raw, dtype=torch.float32) -> augnet.AugmentationLayer:
    layer = augnet.AugmentationLayer([T.Rotate(), T.TranslateX()], train_mode="mix").to(dtype)
    layer.calibration = curves.to(dtype)
    with torch.no_grad():
        layer.raw_magnitudes.copy_(torch.tensor(raw, dtype=dtype))
    return layer


def transform_magnitude_grad(layer: augnet.AugmentationLayer, q: int, sign: int = 1) -> float:
    """d(sign * transform magnitude q) / d(raw magnitude q): a task wanting less (sign 1) or more (-1) of it."""
    layer.zero_grad()
    (sign * layer.transform_magnitudes[q]).backward()
    return sign * layer.raw_magnitudes.grad[q].item()


def test_a_calibrated_magnitude_at_its_cap_takes_the_task_gradient_even_when_the_cap_rounds_up():
    """float32: (0.21 / 1.1) * 1.1 is an ulp above 0.21, past the curve, where the derivative was 0.

    The magnitude at its cap (raw 1) could then never come back: the regulariser's outward pull is dropped by the
    inward clamp and the task's inward pull was 0. Now it is the curve's left derivative times cap * max (1 here).
    """
    curves = torch.tensor([[0.0, 0.105, 0.21], [0.0, 0.55, 1.1]])
    layer = calibrated(curves, [1.0, 1.0])
    assert float(layer.magnitudes[0].detach() * curves[:, -1].max()) > 0.21  # the rounding this test is about
    assert layer.transform_magnitudes.tolist() == pytest.approx([1.0, 1.0])
    assert transform_magnitude_grad(layer, 0) == pytest.approx(1.0, rel=1e-5)
    assert transform_magnitude_grad(layer, 1) == pytest.approx(1.0, rel=1e-5)  # an exact end: the clamp's 0 before


def test_a_calibrated_magnitude_at_0_takes_the_task_gradient():
    """A task that wants more of a transform at 0 (inward there) moves it: the derivative was 0."""
    layer = calibrated(torch.tensor([[0.0, 0.105, 0.21], [0.0, 0.55, 1.1]]), [0.0, 0.0])
    assert transform_magnitude_grad(layer, 0, -1) == pytest.approx(0.21 * 0.5 / 0.105, rel=1e-5)
    assert transform_magnitude_grad(layer, 1, -1) == pytest.approx(1.1 * 0.5 / 0.55, rel=1e-5)


def test_an_sgd_step_at_a_flat_capped_curve_stays_near_the_cap():
    """A transform whose change saturates (a flat curve end) at its cap: one SGD step moved its raw magnitude by
    about 1e11 (to the far bound, 0); now by the learning rate times the true slope."""
    layer = calibrated(torch.tensor([[0.0, 0.3, 0.3], [0.0, 0.5, 1.0]]), [1.0, 0.5])
    opt = torch.optim.SGD(layer.parameters(), lr=0.1)
    layer.transform_magnitudes.sum().backward()  # a task that wants less of both: inward at the cap
    assert torch.isfinite(layer.raw_magnitudes.grad).all()
    opt.step()
    assert 0.8 < layer.raw_magnitudes[0].item() < 1.0
    assert 0.0 < layer.magnitudes[0].item() <= layer.magnitude_caps[0].item()


@pytest.mark.parametrize(("raw", "side"), [(0.0, +1), (1.0, -1)])
def test_a_calibrated_layers_output_gradient_at_the_bounds_matches_a_finite_difference(raw, side):
    """The forward pass of a calibrated blend in float64: d(loss)/d(raw magnitude) at 0 and 1 is the one-sided
    difference into [0, 1] (it was 0 at both, and about 1e11 for the warp whose curve ends flat)."""
    torch.manual_seed(0)
    x, weights = torch.rand(3, 3, 8, 8, dtype=F64), torch.randn(3, 3, 8, 8, dtype=F64)
    layer = calibrated(torch.tensor([[0.0, 0.4, 0.55, 0.55], [0.0, 0.25, 0.45, 0.6]]), [0.3, 0.3], F64)

    def loss(r):
        params = {"raw_magnitudes": r}
        out = torch.func.functional_call(layer, params, (x,), {"generator": torch.Generator().manual_seed(3)})
        return (out * weights).sum()

    for q in (0, 1):
        at = torch.full((2,), 0.3, dtype=F64)
        at[q] = raw
        fd = one_sided(loss, at, q, side)
        for sign in (1, -1):  # the sign whose gradient points inside (the inward clamp drops the other)
            g = grad_of(lambda r, sign=sign: sign * loss(r), at)[q].item()
            if g != 0:
                break
        assert g == pytest.approx(sign * fd, rel=2e-3, abs=1e-6), (q, raw)
