"""Audio and signal transforms, sensor rotations, effects and plots used as a user would: the defects a sweep found.

Each test failed before its fix (see docs/bad_input.md, rows naming this file).
"""

import math

import pytest
import torch
from helpers import gen

from augnet import AugmentationLayer
from augnet.effects import measure_effects, update_effect
from augnet.transforms import audio as A
from augnet.transforms import signal as S

NAN, INF = float("nan"), float("inf")


def _positions(n=6):
    pos = torch.randn(n, 3, generator=gen(0), dtype=torch.float64)
    pos[:, 2] = pos[:, 2].abs()  # an upper-hemisphere cap
    return pos


# ----------------------------------------------------------------------- magnitude 0

SIGNAL_TRANSFORMS = {
    "AddNoise": A.AddNoise,
    "LowPass": lambda: A.LowPass(16000),
    "HighPass": lambda: A.HighPass(16000),
    "BandReject": lambda: A.BandReject(16000),
    "SpeedChange": A.SpeedChange,
    "TimeReverse": S.TimeReverse,
    "SignFlip": S.SignFlip,
    "GaussianNoise": S.GaussianNoise,
    "FTSurrogate": S.FTSurrogate,
    "FrequencyShift": lambda: S.FrequencyShift(100.0),
    "BandStop": lambda: S.BandStop(100.0),
    "ChannelsSymmetry": lambda: S.ChannelsSymmetry([(0, 1), (2, 3)]),
    "ChannelsShuffle": S.ChannelsShuffle,
    "SensorsRotationZ": lambda: S.SensorsRotationZ(_positions()),
}


@pytest.mark.parametrize("name", sorted(SIGNAL_TRANSFORMS))
def test_magnitude_zero_keeps_its_derivatives(name):
    """At 0 the output is the input (the FFT transforms within their round trip's rounding), with a finite derivative
    in the magnitude and the identity's in the input."""
    t = SIGNAL_TRANSFORMS[name]()
    x = torch.randn(2, 6, 16, generator=gen(1), dtype=torch.float64, requires_grad=True)
    mu = torch.tensor(0.0, dtype=torch.float64, requires_grad=True)
    out = t(x, mu, generator=gen(2))
    torch.testing.assert_close(out.detach(), x.detach(), atol=1e-12, rtol=0)
    upstream = torch.randn(out.shape, generator=gen(3), dtype=out.dtype)
    gx, gmu = torch.autograd.grad(out, (x, mu), upstream)
    assert torch.isfinite(gmu)
    if not getattr(t, "kink_at_zero", False):
        torch.testing.assert_close(gx, upstream, atol=1e-9, rtol=1e-9)


# ----------------------------------------------------------------------- AddNoise's SNR range


@pytest.mark.parametrize("snr", [-1e10, -1000.0, -771.0, 759.0, 1e10])
def test_add_noise_refuses_an_snr_beyond_float32(snr):
    """-1e10 dB raised Python's OverflowError at the first call, -1000 dB gave infinite noise, 1e10 dB never added
    any (the ratio 10 ** (-snr / 20) is 0 in float32)."""
    with pytest.raises(ValueError, match="min_snr_db"):
        A.AddNoise(snr)


@pytest.mark.parametrize("snr", [-60.0, 0.0, 120.0, -770.0, 758.0])
def test_add_noise_takes_the_snrs_float32_holds(snr):
    t = A.AddNoise(min_snr_db=snr)
    x = torch.randn(3, 2, 50, generator=gen(0), dtype=torch.float64)
    out = t(x, 1.0, generator=gen(1))
    if abs(snr) < 200:
        assert torch.isfinite(out).all() and not torch.equal(out, x)


# ----------------------------------------------------------------------- sensor rotations: singular splines


@pytest.mark.parametrize("cls", [S.SensorsRotationX, S.SensorsRotationY, S.SensorsRotationZ])
@pytest.mark.parametrize("kwargs", [{"n_terms": 1}, {"order": 100}, {"order": 30}], ids=str)
def test_sensor_rotations_refuse_a_numerically_singular_spline_system(cls, kwargs):
    """The system solved to finite nonsense: with one Legendre term 6 sensors came out amplified a hundredfold and a
    constant field was not kept (rows of the interpolation matrix summing to 123 instead of 1)."""
    with pytest.raises(ValueError, match="numerically singular"):
        cls(_positions(), **kwargs)


@pytest.mark.parametrize("cls", [S.SensorsRotationX, S.SensorsRotationY, S.SensorsRotationZ])
@pytest.mark.parametrize("n, kwargs", [(4, {}), (6, {}), (6, {"n_terms": 2}), (6, {"order": 10}), (64, {}),
                                       (128, {}),
                                       (256, {})])  # fmt: skip
def test_sensor_rotations_keep_a_constant_field(cls, n, kwargs):
    t = cls(_positions(n), **kwargs)
    m = t.interpolation_matrix({"angle": torch.tensor([0.5, -0.3, math.pi / 6])})
    torch.testing.assert_close(m.sum(-1), torch.ones(3, n, dtype=torch.float64), atol=1e-3, rtol=0)


# ----------------------------------------------------------------------- augnet.effects


def _effect_setup():
    trunk = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(2 * 64, 5))
    layer = AugmentationLayer([A.Gain(), A.AddNoise(), A.LowPass(16000)])
    x = torch.randn(8, 2, 64, generator=gen(0))
    return trunk, layer, x


@pytest.mark.parametrize("momentum, error", [(NAN, ValueError), (2.0, ValueError), (-0.5, ValueError),
                                             (INF, ValueError), (True, TypeError), ("0.3", TypeError)])  # fmt: skip
def test_measure_effects_refuses_a_bad_momentum(momentum, error):
    """A NaN momentum made every effect NaN at the second measurement (and the regulariser with it)."""
    trunk, layer, x = _effect_setup()
    measure_effects(trunk, [layer], x)
    before = layer.effect.clone(), layer.effect_measured.clone()
    with pytest.raises(error, match="momentum"):
        measure_effects(trunk, [layer], x, momentum=momentum)
    with pytest.raises(error, match="momentum"):
        update_effect(layer, torch.ones(3), momentum)
    assert torch.equal(layer.effect, before[0]) and torch.equal(layer.effect_measured, before[1])


@pytest.mark.parametrize("rows, error", [(-1, ValueError), (True, TypeError), (2.5, TypeError),
                                         ("4", TypeError)])  # fmt: skip
def test_measure_effects_refuses_bad_rows(rows, error):
    """``rows=-1`` measured on all rows but the last, ``True`` on one row (nothing), 2.5 failed in a slice."""
    trunk, layer, x = _effect_setup()
    with pytest.raises(error, match="rows"):
        measure_effects(trunk, [layer], x, rows=rows)
    assert not bool(layer.effect_measured) and torch.equal(layer.effect, torch.ones(3))


def test_measure_effects_refuses_an_x_that_is_not_a_tensor():
    trunk, layer, _ = _effect_setup()
    with pytest.raises(TypeError, match="x must be a tensor"):
        measure_effects(trunk, [layer], [[1.0, 2.0]])


def test_measure_effects_takes_good_arguments():
    trunk, layer, x = _effect_setup()
    measure_effects(trunk, [layer], x, rows=4, momentum=0.0)
    assert bool(layer.effect_measured)
    import numpy as np

    measure_effects(trunk, [layer], x, rows=np.int64(8), momentum=np.float32(1.0))
    # rows=None measures every row, rows=0 none (as before the checks); 0-d tensors are read as their values.
    measured = layer.effect.clone()
    measure_effects(trunk, [layer], x, rows=0)
    assert torch.equal(layer.effect, measured)
    measure_effects(trunk, [layer], x, rows=None, momentum=torch.tensor(0.5))
    measure_effects(trunk, [layer], x, rows=torch.tensor(4))


# ----------------------------------------------------------------------- plots


@pytest.fixture
def viz():
    pytest.importorskip("matplotlib")
    import augnet.viz

    return augnet.viz


def test_plots_refuse_empty_data(viz, tmp_path):
    """An empty dict wrote an empty figure (with a legend warning) for two plots, and was an error for the third."""
    for plot, name in ((viz.plot_invariance_curves, "curves"), (viz.plot_layer_importance, "importance")):
        with pytest.raises(ValueError, match=f"{name} is empty"):
            plot({}, tmp_path / "x.png")
        with pytest.raises(TypeError, match=name):
            plot([1.0, 2.0], tmp_path / "x.png")  # an IndexError / AttributeError before
    with pytest.raises(TypeError, match="distributions"):
        viz.plot_distributions([[1.0, 2.0]], tmp_path / "x.png", "y")
    assert not list(tmp_path.iterdir())


def test_plots_of_one_point_and_nan_values(viz, tmp_path):
    curve = {"magnitude": [0.5], "summary": [{"median": NAN, "p25": 0.0, "p75": 0.2}]}
    assert viz.plot_invariance_curves({"a": curve}, tmp_path / "i.png").exists()
    assert viz.plot_layer_importance({"a": 0.5}, tmp_path / "l").exists()  # .png added
    assert viz.plot_distributions({"a": [1.0], "b": [NAN]}, tmp_path / "d.png", "y").exists()


# ----------------------------------------------------------------------- constructor values float32 cannot hold


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: A.LowPass(1e300), "min_cutoff"),  # the cut-offs were inf in float32: NaN output
        (lambda: A.HighPass(1e-300), "min_cutoff"),  # 0 in float32: NaN output
        (lambda: A.BandReject(1e-300), "min_center"),
        (lambda: A.LowPass(1e39, min_cutoff=1.0, max_cutoff=2.0), "Nyquist"),
        (lambda: A.Gain(1e300), "max_gain_db"),  # an infinite gain
        (lambda: A.SpeedChange(1e300), "max_factor"),  # NaN output
        (lambda: A.TimeMaskSpec(1e300), "max_width"),  # NaN output
        (lambda: A.FrequencyMaskSpec(1e-300), "max_width"),  # a width of 0 in float32: never a mask
        (lambda: S.SensorsRotationZ(_positions(), max_angle=1e39), "max_angle"),  # NaN output
    ],
)
def test_constructor_values_beyond_float32_are_refused(make, match):
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize(
    "make",
    [lambda: A.LowPass(0.5), lambda: A.HighPass(1e-3), lambda: A.BandReject(3.0), lambda: A.LowPass(1e9),
     lambda: A.Gain(400.0), lambda: A.SpeedChange(100.0), lambda: A.TimeMaskSpec(1e6),
     lambda: S.SensorsRotationZ(_positions(), max_angle=100.0)],
)  # fmt: skip
@pytest.mark.filterwarnings("ignore:.*max_angle is in radians")  # 100 rad: odd, and warned about, but taken
def test_odd_but_representable_values_are_taken(make):
    t = make()
    x = torch.randn(2, 6, 40, generator=gen(0))
    out = t(x, 0.5, generator=gen(1))
    assert torch.isfinite(out).all()


def test_channel_pairs_as_a_tensor_are_read_as_their_values():
    # A NumPy array was taken, a tensor refused ("integer channel indices, got tensor(0)").
    import numpy as np

    listed = S.ChannelsSymmetry([(0, 1), (2, 3)])
    for given in (torch.tensor([[0, 1], [2, 3]]), np.array([[0, 1], [2, 3]])):
        assert S.ChannelsSymmetry(given).pairs == listed.pairs
    with pytest.raises(TypeError, match="integer channel indices"):
        S.ChannelsSymmetry(torch.tensor([[0.0, 1.0]]))
