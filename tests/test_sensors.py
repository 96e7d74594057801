"""EEG sensor rotations (spherical-spline re-interpolation): the maths against
independent references, in a layer, and bad inputs. The transform contract
runs on each of them in test_transform_contract.py."""

import math

import numpy as np
import pytest
import torch
from helpers import gen
from transform_cases import POS, SENSORS, cap, sensor_signals

import augnet
from augnet.transforms._sensors import (
    SensorsRotationX,
    SensorsRotationY,
    SensorsRotationZ,
    spherical_spline_kernel,
    spline_interpolation_matrix,
)

F64 = torch.float64
# (u, v) per axis: a positive rotation turns +u towards +v (right-handed).
PLANE = {"x": (1, 2), "y": (2, 0), "z": (0, 1)}


def unit(p):
    return p / p.norm(dim=-1, keepdim=True)


def rotation(axis: str, angle: float) -> torch.Tensor:
    """The documented convention, written out: +u turns towards +v."""
    c, s = math.cos(angle), math.sin(angle)
    iu, iv = PLANE[axis]
    r = torch.eye(3, dtype=F64)
    r[iu, iu], r[iu, iv], r[iv, iu], r[iv, iv] = c, -s, s, c
    return r


def field(p):
    """A smooth field over the sensors (spherical-harmonic degree <= 2)."""
    return p[..., 0] + 0.5 * p[..., 1] * p[..., 2]


def angles(*values, dtype=F64):
    return {"angle": torch.tensor(values, dtype=dtype)}


MAKE = sensor_signals(24)  # (b, 24, 20) signals, a channel per sensor of POS (24 over the upper hemisphere)


@pytest.mark.parametrize("cls", SENSORS)
@pytest.mark.parametrize("training", [True, False])
def test_runs_in_an_augmentation_layer(cls, training):
    layer = augnet.AugmentationLayer([cls(POS), SensorsRotationZ(POS)], init_magnitude=0.7).train(training)
    assert not layer.uses_taps
    x = MAKE(3, torch.float32)
    out = layer(x, copies=2, generator=gen(0))
    assert out.shape == (6, 24, 20) and torch.isfinite(out).all()
    assert not torch.allclose(out[:3], out[3:])
    if training:
        out.square().sum().backward()
        assert torch.isfinite(layer.raw_magnitudes.grad).all() and (layer.raw_magnitudes.grad != 0).all()
    assert layer.policy()[0]["range"] == pytest.approx((-21.0, 21.0, "deg"))


# ----------------------------------------------------------------- the maths


@pytest.mark.parametrize("cls", SENSORS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_angle_zero_is_exactly_the_identity(cls, dtype):
    # Zero rows among non-zero ones, in batches of several sizes: G at angle 0
    # must equal the precomputed G_PP bit for bit whatever the batch shape.
    t = cls(POS)
    x = MAKE(4, dtype)
    out = t.apply_transform(x, angles(0.0, 0.3, -0.0, -0.5, 0.0, 0.1, 0.2, 0.0, dtype=dtype))
    for n in (0, 2, 4, 7):
        assert torch.equal(out[n], x[n % 4])
    assert not torch.allclose(out[1], x[1])
    assert torch.equal(t.interpolation_matrix(angles(0.0)), torch.eye(24, dtype=F64)[None])


@pytest.mark.parametrize("cls", SENSORS)
def test_matrix_is_the_spline_interpolant_at_the_rotated_positions(cls):
    # The transform's M = I + (G_QP - G_PP) W, with cos(gamma) from the angle,
    # against the general form [G_QP, 1] Z computed from rotated positions,
    # themselves rotated by the matrices written out in this test.
    t = cls(POS)
    theta = [0.4, -0.25, 0.0]
    m = t.interpolation_matrix(angles(*theta))
    p = unit(POS)
    for n, a in enumerate(theta):
        expected = spline_interpolation_matrix(p, p @ rotation(cls.axis, a).T)
        torch.testing.assert_close(m[n], expected, rtol=0, atol=1e-9)


def test_general_interpolation_reproduces_the_data_at_the_sensors():
    p = unit(POS)
    torch.testing.assert_close(spline_interpolation_matrix(p, p), torch.eye(24, dtype=F64), rtol=0, atol=1e-10)


@pytest.mark.parametrize("cls", SENSORS)
def test_rows_sum_to_one_so_a_constant_field_is_kept(cls):
    t = cls(POS)
    params = t.sample(MAKE(16, F64), 1.0, generator=gen(2))
    m = t.interpolation_matrix(params)
    torch.testing.assert_close(m.sum(-1), torch.ones(16, 24, dtype=F64), rtol=0, atol=1e-10)
    x = torch.full((16, 24, 3), 2.5)
    torch.testing.assert_close(t.apply_transform(x, params), x, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cls", SENSORS)
@pytest.mark.parametrize("deg", [10.0, -20.0, 30.0, -30.0])
def test_a_smooth_field_is_read_at_the_rotated_positions(cls, deg):
    # Relative errors measured with these 24 sensors on the upper hemisphere
    # and this field: at most 1.2% (about x at -30 degrees, where edge sensors
    # rotate off the cap and the spline extrapolates; 0.6% about y, 0.25% about
    # z), 0.2% at 10 degrees. The bound 2.5% leaves a factor 2. Doing nothing
    # errs by 8% to 54%: the error must also stay under a tenth of that
    # (measured at most 0.053).
    t = cls(POS)
    a = math.radians(deg)
    p = unit(POS)
    target = field(p @ rotation(cls.axis, a).T)
    out = t.apply_transform(field(p)[None, :, None], angles(a))[0, :, 0]
    err = (out - target).norm() / target.norm()
    assert err < 0.025
    assert err < 0.1 * (field(p) - target).norm() / target.norm()


@pytest.mark.parametrize("cls", SENSORS)
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_sign_convention_on_a_field(cls, sign):
    # A positive angle about z moves the sensor at +x towards +y, so reading
    # the field p_y there gives sin(angle) (about x: +y towards +z, field p_z;
    # about y: +z towards +x, field p_x).
    iu, iv = PLANE[cls.axis]
    extra = torch.eye(3, dtype=F64)[iu][None]
    p = unit(torch.cat([cap(20), extra]))
    t = cls(p)
    a = sign * math.radians(30)
    out = t.apply_transform(p[None, :, iv, None], angles(a))[0, -1, 0]
    assert out == pytest.approx(math.sin(a), abs=0.02)  # measured error at most 0.007


@pytest.mark.parametrize("order, n_terms", [(4, 50), (3, 7)])
def test_kernel_matches_numpy_legendre_series(order, n_terms):
    t = torch.linspace(-1, 1, 101, dtype=F64).requires_grad_()
    n = np.arange(n_terms + 1)
    c = np.zeros(n_terms + 1)
    c[1:] = (2 * n[1:] + 1) / (n[1:] * (n[1:] + 1.0)) ** order / (4 * math.pi)
    g = spherical_spline_kernel(t, order, n_terms)
    expected = np.polynomial.legendre.legval(t.detach().numpy(), c)
    np.testing.assert_allclose(g.detach().numpy(), expected, rtol=1e-12, atol=1e-15)
    (grad,) = torch.autograd.grad(g.sum(), t)
    slope = np.polynomial.legendre.legval(t.detach().numpy(), np.polynomial.legendre.legder(c))
    np.testing.assert_allclose(grad.numpy(), slope, rtol=1e-10, atol=1e-14)


def test_kernel_gradcheck():
    t = (torch.rand(3, 4, dtype=F64, generator=gen(0)) * 2 - 1).requires_grad_()
    assert torch.autograd.gradcheck(spherical_spline_kernel, (t,))


# ------------------------------------------------------------ configuration


def test_positions_are_projected_and_taken_as_arrays():
    x = MAKE(3, F64)
    params = angles(0.3, -0.1, 0.25)
    ref = SensorsRotationY(unit(POS)).apply_transform(x, params)
    for given in (POS * 1000, POS.numpy(), POS.tolist(), POS.float()):
        torch.testing.assert_close(SensorsRotationY(given).apply_transform(x, params), ref, rtol=1e-6, atol=1e-6)


def test_casting_the_module_keeps_the_float64_geometry():
    t = SensorsRotationX(POS)
    x = MAKE(2, torch.float32)
    params = angles(0.3, -0.2, dtype=torch.float32)
    before = t.apply_transform(x, params)
    t.half().float()
    assert t.weights.dtype == F64 and t.g_pp.dtype == F64 and t.positions.dtype == F64
    assert torch.equal(t.apply_transform(x, params), before)
    assert torch.equal(t(x, 0.0), x)


def test_natural_range_and_repr():
    t = SensorsRotationZ(POS)
    assert t.natural_range(0.5) == pytest.approx((-15.0, 15.0, "deg"))
    assert SensorsRotationX(POS, max_angle=math.pi / 2).natural_range(1.0) == pytest.approx((-90.0, 90.0, "deg"))
    assert "n_sensors=24" in repr(t) and "max_angle=0.5236" in repr(t)
    params = t.sample(MAKE(64, torch.float32), 0.5, generator=gen(0))
    limit = 0.5 * math.pi / 6
    assert params["angle"].abs().max() <= limit + 1e-7 and params["angle"].abs().max() > 0.8 * limit


# ------------------------------------------------------------- bad inputs


@pytest.mark.parametrize(
    "positions, match",
    [
        (torch.zeros(8, 2), r"shape \(Ch, 3\), got shape \(8, 2\)"),
        (torch.zeros(24), r"shape \(Ch, 3\), got shape \(24,\)"),
        (torch.zeros(2, 8, 3), r"shape \(Ch, 3\), got shape \(2, 8, 3\)"),
        (cap(3), r"at least 4 sensors.*got 3"),
        (torch.cat([cap(6), torch.tensor([[0.0, float("nan"), 1.0]], dtype=F64)]), r"finite.*nan.*sensor 6"),
        (torch.cat([cap(6), torch.tensor([[0.0, 0.0, float("inf")]], dtype=F64)]), r"finite.*inf.*sensor 6"),
        (torch.cat([cap(6), torch.zeros(1, 3, dtype=F64)]), r"origin \(zero norm\).*sensor 6"),
        (torch.cat([cap(6), 2 * cap(6)[2:3]]), r"sensors 2 and 6 coincide"),
    ],
)
def test_bad_positions_are_rejected(positions, match):
    with pytest.raises(ValueError, match=match):
        SensorsRotationZ(positions)


def test_positions_that_are_not_numbers_are_rejected():
    with pytest.raises(TypeError, match="sensor_positions must be"):
        SensorsRotationZ([["a", "b", "c"]] * 5)
    with pytest.raises(TypeError, match=r"real numbers, got dtype torch\.complex128"):
        SensorsRotationZ(POS.to(torch.complex128))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(max_angle=0.0), "max_angle must be a positive finite number, got 0.0"),
        (dict(max_angle=float("nan")), "max_angle must be a positive finite number, got nan"),
        (dict(order=1), "order must be an int >= 2, got 1"),
        (dict(n_terms=0), "n_terms must be a positive int, got 0"),
    ],
)
def test_bad_configuration_is_rejected(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SensorsRotationX(POS, **kwargs)


@pytest.mark.parametrize("cls", SENSORS)
def test_channel_count_must_match_the_positions(cls):
    t = cls(POS)
    with pytest.raises(ValueError, match=r"expected 24 channels \(one per sensor position\), got 23"):
        t(torch.randn(2, 23, 10), 0.5)
    with pytest.raises(ValueError, match=r"expected 24 channels"):
        augnet.AugmentationLayer([t])(torch.randn(2, 25, 10))
    with pytest.raises(ValueError, match=r"3-D input \(B, Ch, T\)"):
        t(torch.randn(24, 10), 0.5)
