"""The branches the rest of the suite leaves unexercised in the transforms: the base class (``base``), the sensor
rotations' spherical splines (``_sensors``), the audio, signal and image transforms, the biquads (``_biquad``), and
the torchvision export's solarize (``export/_torchvision_ops``).

Each test reaches its branch the way a user's call does (a subclass of :class:`Transform` of one's own, a replay of
``draw_params``, keyword arguments, NumPy arrays and integer tensors) and pins what comes out: an exact value, a
mathematical property, or the error that names the bad argument.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
import torch
from helpers import gen

from augnet.ops.taps import Taps
from augnet.transforms import Range, Transform
from augnet.transforms import audio as A
from augnet.transforms import image as T
from augnet.transforms import signal as S
from augnet.transforms._biquad import filter_rows, lowpass_coefficients
from augnet.transforms._sensors import (
    SensorsRotationX,
    SensorsRotationY,
    SensorsRotationZ,
    _augmented_inverse_columns,
    rotation_matrix,
    spherical_spline_kernel,
    spline_interpolation_matrix,
)
from augnet.transforms.base import repeat_rows, uniform
from augnet.transforms.image.color import _GatedColor
from augnet.transforms.signal import _analytic

F64 = torch.float64


def images(b: int = 2, seed: int = 0) -> torch.Tensor:
    return torch.rand(b, 3, 8, 8, generator=gen(seed))


def signals(b: int = 2, ch: int = 2, t: int = 64, seed: int = 0) -> torch.Tensor:
    return torch.randn(b, ch, t, generator=gen(seed))


def positions(ch: int = 12, seed: int = 0) -> torch.Tensor:
    p = torch.randn(ch, 3, generator=gen(seed), dtype=F64)
    p[:, 2] = p[:, 2].abs()  # an upper-hemisphere cap, as a montage
    return p


# ======================================================================== base: a Transform of one's own


class Shift(Transform):
    """A subclass as a user writes one: a number, a tensor, NumPy values and a tuple among its arguments."""

    def __init__(self, width: float, offsets, scale, count, pair: tuple = (1, 2)) -> None:
        super().__init__()
        self.width, self.offsets, self.scale, self.count, self.pair = width, offsets, scale, count, pair

    def sample(self, x, magnitude, generator=None, copies=1):
        return {"shift": magnitude * self.width * uniform(x.shape[0] * copies, x, generator)}

    def apply_transform(self, x, params):
        return repeat_rows(x, params["shift"].shape[0]) + params["shift"][:, None, None, None]


def test_config_of_a_transform_of_ones_own_is_json_data_with_tensors_and_numpy_values():
    # Before: np.float32 and np.int64 (what a config read with NumPy gives) and arrays were kept as they were, and
    # json.dumps of the "JSON-ready" config failed ("Object of type float32 is not JSON serializable").
    t = Shift(0.5, torch.tensor([1.0, 2.0]), np.float32(0.25), np.int64(3), pair=(np.array([1, 2]), 4))
    config = t.config()
    assert config == {"width": 0.5, "offsets": [1.0, 2.0], "scale": 0.25, "count": 3, "pair": [[1, 2], 4]}
    assert type(config["scale"]) is float and type(config["count"]) is int
    assert json.loads(json.dumps(config)) == config
    rebuilt = Shift(**config)
    x = images()
    assert torch.equal(rebuilt(x, 0.5, generator=gen(1)), t(x, 0.5, generator=gen(1)))


def test_config_of_a_transform_that_does_not_keep_an_argument_says_to_override_it():
    class Hidden(Shift):
        def __init__(self, depth: float = 1.0) -> None:
            super().__init__(depth, None, 1.0, 1)

    with pytest.raises(NotImplementedError, match=r"Hidden does not keep its argument 'depth' as an attribute"):
        Hidden().config()


def test_the_default_natural_range_is_the_magnitude_itself():
    r = Shift(0.5, None, 1.0, 1).natural_range(0.25)
    assert r == Range(0.0, 0.25, "") and str(r) == "[0, 0.25]"


def test_a_transform_without_sample_names_itself():
    class NoSample(Transform):
        def apply_transform(self, x, params):
            return x

    # Before: a bare NotImplementedError, naming neither the class nor the method.
    with pytest.raises(NotImplementedError, match=r"^NoSample must implement sample\(\)$"):
        NoSample()(images(), 0.5)


def test_a_transform_with_neither_taps_nor_apply_transform_says_which_it_lacks():
    class NoApply(Transform):
        def sample(self, x, magnitude, generator=None, copies=1):
            return {"a": torch.zeros(x.shape[0] * copies)}

    with pytest.raises(NotImplementedError, match=r"NoApply must implement apply_transform\(\)"):
        NoApply()(images(), 0.5)
    assert not NoApply.has_taps()


def test_taps_of_a_transform_without_a_tap_form_is_refused_naming_it():
    t = T.Solarize()
    with pytest.raises(NotImplementedError, match="Solarize has no tap form"):
        t.taps(t.draw_params(images(), 0.5))


class Weights(Transform):
    """A tap transform whose taps are weights alone: each output row is the sum of its weights times the input."""

    def sample(self, x, magnitude, generator=None, copies=1):
        n = x.shape[0] * copies
        return {"weight": torch.stack([1.0 - magnitude * torch.ones(n), magnitude * 0.5 * torch.ones(n)], 1)}

    def taps(self, params):
        return Taps(params["weight"])


@pytest.mark.parametrize("k", [1, 2])
def test_taps_of_weights_alone_scale_the_input_by_their_sum(k):
    x = images()
    params = {"weight": torch.tensor([[0.25, 0.5], [2.0, -1.0], [0.5, 0.5], [1.0, 3.0]])[:, :k]}
    out = Weights().apply_transform(x, params)  # 4 rows: two copies of the batch of 2
    expected = params["weight"].sum(1)[:, None, None, None] * repeat_rows(x, 4)
    assert torch.equal(out, expected)
    assert torch.equal(Weights()(x, 0.0), x)  # magnitude 0: weights (1, 0), the identity


def test_a_magnitude_given_as_an_integer_tensor_is_the_number_it_holds():
    # Before: TypeError "magnitude must be floating point, got torch.int64", where the int 1 was taken.
    x, sig = images(), signals()
    for t, inp in ((T.Rotate(), x), (T.Brightness(), x), (S.GaussianNoise(), sig), (A.Gain(), sig)):
        for integer, real in ((torch.tensor(1), torch.tensor(1.0)), (torch.tensor(0), torch.tensor(0.0)),
                              (torch.tensor([0, 1, 1, 0]), torch.tensor([0.0, 1.0, 1.0, 0.0]))):  # fmt: skip
            got = t(inp, integer, generator=gen(3), copies=2)
            assert torch.equal(got, t(inp, real, generator=gen(3), copies=2))
        assert torch.equal(t(inp, torch.tensor(1), generator=gen(3)), t(inp, 1, generator=gen(3)))
        assert torch.equal(t(inp, torch.tensor(0)), inp)  # the identity, as at 0.0
    assert T.Rotate().check_magnitude(torch.tensor(1, dtype=torch.int16), x.double()).dtype == F64


@pytest.mark.parametrize(
    "bad, error, message",
    [
        (torch.tensor(True), TypeError, "magnitude must be a tensor of real numbers, got dtype torch.bool"),
        (torch.tensor(0.5j), TypeError, "magnitude must be a tensor of real numbers, got dtype torch.complex64"),
        (torch.tensor(2), ValueError, "magnitude must lie in [0, 1], got 2.0"),
        (torch.tensor([0, -1]), ValueError, "magnitude must lie in [0, 1], got -1.0"),
    ],
    ids=["bool", "complex", "int 2", "int -1"],
)
def test_a_magnitude_tensor_of_another_kind_or_outside_0_1_is_refused_naming_it(bad, error, message):
    with pytest.raises(error, match=re.escape(f"Rotate: {message}")):
        T.Rotate()(images(), bad)


def test_params_for_rows_that_are_not_copies_of_the_batch_are_refused_by_apply_transform():
    # Before: a warp read row n of its output from x[n % B] (3 rows from a batch of 2: the third a copy of the first,
    # the second sample's copy missing), and the other transforms said "cannot make 3 rows from a batch of 2".
    x = images()
    for t in (T.Rotate(), T.SamplePairing(), T.Brightness(), T.Solarize()):
        p = t.draw_params(x, 0.5, generator=gen(0))
        three = {k: torch.cat([v, v[:1]]) for k, v in p.items()}
        with pytest.raises(ValueError, match=r"params are for 3 rows, not a multiple of the batch's 2 rows"):
            t.apply_transform(x, three)
        assert t.apply_transform(x, {k: torch.cat([v, v]) for k, v in p.items()}).shape == (4, 3, 8, 8)
    with pytest.raises(ValueError, match=r"^Rotate: params are for 2 rows, not a multiple of the batch's 0 rows"):
        T.Rotate().apply_transform(x[:0], T.Rotate().draw_params(x, 0.5))
    with pytest.raises(ValueError, match=r"params are for 3 rows, not a multiple of the batch's 0 rows"):
        repeat_rows(x[:0], 3)


def test_signal_params_that_are_no_params_are_a_value_error_naming_the_transform():
    # Before: apply_transform(x, {}) raised StopIteration (which a caller's loop takes for its own end).
    with pytest.raises(ValueError, match=r"TimeMask: params must be a dict of per-row tensors .* got an empty dict"):
        S.TimeMask().apply_transform(signals(), {})


@pytest.mark.parametrize(
    "t", [S.FTSurrogate(), S.FrequencyShift(100.0), S.BandStop(100.0), S.TimeMask(), A.LowPass(8000)], ids=repr
)
def test_replaying_the_params_of_an_empty_batch_gives_an_empty_batch(t):
    # Before: the FFT transforms failed with MKL's "DFTI ERROR: Inconsistent configuration parameters" (the same call
    # without params returned the empty batch).
    x = signals()[:0]
    params = t.draw_params(x, 0.5, generator=gen(0), copies=2)
    out = t(x, 0.5, params=params, copies=2)
    assert out.shape == (0, 2, 64) and out.dtype == x.dtype
    assert torch.equal(out, t(x, 0.5, copies=2))


# ======================================================================== _sensors


def test_rotation_matrix_follows_the_documented_right_handed_convention():
    a = 0.3
    c, s = math.cos(a), math.sin(a)
    # +x towards +y about z, +y towards +z about x, +z towards +x about y.
    for axis, (moved, to) in {"z": (0, (c, s, 0.0)), "x": (1, (0.0, c, s)), "y": (2, (s, 0.0, c))}.items():
        r = rotation_matrix(axis, torch.tensor(a, dtype=F64))
        torch.testing.assert_close(r[:, moved], torch.tensor(to, dtype=F64), rtol=0, atol=1e-15)
        torch.testing.assert_close(r @ r.T, torch.eye(3, dtype=F64), rtol=0, atol=1e-15)
        assert torch.linalg.det(r).item() == pytest.approx(1.0, abs=1e-15)
        assert torch.equal(rotation_matrix(axis, torch.tensor(0.0)), torch.eye(3))  # angle 0: the identity, exactly


def test_rotation_matrix_takes_a_number_or_an_array_and_batches():
    # Before: "cos(): argument 'input' (position 1) must be Tensor, not float".
    r = rotation_matrix("z", 0.5)
    assert r.dtype == F64 and torch.equal(r, rotation_matrix("z", torch.tensor(0.5, dtype=F64)))
    batch = rotation_matrix("y", np.array([[0.1, 0.2, 0.3]]))
    assert batch.shape == (1, 3, 3, 3)
    assert torch.equal(batch[0, 1], rotation_matrix("y", torch.tensor(0.2, dtype=F64)))


@pytest.mark.parametrize(
    "axis, angle, error, message",
    [
        ("Z", 0.5, ValueError, "axis must be one of ['x', 'y', 'z'], got 'Z'"),
        (["z"], 0.5, TypeError, "axis must be one of ['x', 'y', 'z'] (a string), got ['z']"),
        ("z", "0.5", TypeError, "angle must be real numbers (a tensor, an array or a number), got '0.5'"),
        ("z", True, TypeError, "angle must hold real numbers, got dtype torch.bool"),
    ],
)
def test_rotation_matrix_refuses_a_bad_axis_or_angle_naming_it(axis, angle, error, message):
    # Before: a list axis gave Python's "unhashable type: 'list'"; a string angle torch's complaint about cos().
    with pytest.raises(error, match=re.escape(message)):
        rotation_matrix(axis, angle)


@pytest.mark.parametrize("cls", [SensorsRotationX, SensorsRotationY, SensorsRotationZ])
def test_the_rotations_read_the_signals_at_the_positions_rotation_matrix_gives(cls):
    p = positions()
    t = cls(p)
    angle = torch.tensor([0.2, -0.4], dtype=F64)
    moved = p @ rotation_matrix(cls.axis, angle).transpose(-1, -2)  # (2, Ch, 3): R(angle) p_i
    torch.testing.assert_close(t.interpolation_matrix({"angle": angle}), spline_interpolation_matrix(p, moved),
                               rtol=0, atol=1e-10)  # fmt: skip


def test_integer_sensor_positions_give_the_rotation_of_the_same_positions_as_floats():
    whole = [[1, 0, 0], [0, 1, 0], [0, 0, 1], [-1, 0, 0], [0, -1, 0], [1, 1, 1]]
    a, b = SensorsRotationZ(whole), SensorsRotationZ(torch.tensor(whole, dtype=F64))
    params = {"angle": torch.tensor([0.3, -0.1])}
    assert torch.equal(a.interpolation_matrix(params), b.interpolation_matrix(params))
    assert a.config() == b.config() and a.config()["sensor_positions"] == [[float(v) for v in r] for r in whole]


def test_the_sensor_rotations_repr_names_order_and_terms_only_off_their_defaults():
    p = positions()
    assert repr(SensorsRotationX(p)) == "SensorsRotationX(n_sensors=12, max_angle=0.5236)"
    assert repr(SensorsRotationY(p, max_angle=0.25, order=3, n_terms=30)) == (
        "SensorsRotationY(n_sensors=12, max_angle=0.25, order=3, n_terms=30)"
    )


@pytest.mark.parametrize("order, n_terms", [(200, 50), (2000, 50), (1024, 1)])
def test_an_order_whose_coefficients_overflow_a_float_is_a_value_error_naming_it(order, n_terms):
    # Before: Python's OverflowError (34, 'Numerical result out of range') from (n + 1) ** order.
    message = re.escape(f"order={order} is too high for n_terms={n_terms}")
    with pytest.raises(ValueError, match=message):
        SensorsRotationZ(positions(), order=order, n_terms=n_terms)
    with pytest.raises(ValueError, match=message):
        spherical_spline_kernel(torch.zeros(3, dtype=F64), order=order, n_terms=n_terms)
    spherical_spline_kernel(torch.zeros(3, dtype=F64), order=order - 1 if n_terms == 1 else 180, n_terms=n_terms)


def test_spherical_spline_kernel_reads_numbers_arrays_and_integer_tensors_as_float64():
    # Before: a number or a list failed in torch.ones_like, an integer tensor in the recurrence ("result type Float
    # can't be cast to the desired output type Long").
    ref = spherical_spline_kernel(torch.tensor([-1.0, 0.0, 1.0], dtype=F64))
    assert torch.equal(spherical_spline_kernel([-1, 0, 1]), ref)
    assert torch.equal(spherical_spline_kernel(np.array([-1.0, 0.0, 1.0])), ref)
    assert torch.equal(spherical_spline_kernel(torch.tensor([-1, 0, 1])), ref)
    assert torch.equal(spherical_spline_kernel(0.0), ref[1])
    assert spherical_spline_kernel(torch.tensor([0.5])).dtype == torch.float32  # a floating tensor keeps its dtype
    with pytest.raises(TypeError, match=re.escape("cos_gamma must hold real numbers, got dtype torch.bool")):
        spherical_spline_kernel(torch.tensor([True]))
    with pytest.raises(TypeError, match=re.escape("cos_gamma must be real numbers (a tensor, an array or a number)")):
        spherical_spline_kernel("0.5")


def test_spline_interpolation_matrix_takes_arrays_and_reproduces_the_data_at_its_positions():
    # Before: an array failed with "'numpy.ndarray' object has no attribute 'to'".
    p = positions()
    m = spline_interpolation_matrix(p.numpy(), p.numpy())
    assert torch.equal(m, spline_interpolation_matrix(p, p))
    torch.testing.assert_close(m, torch.eye(12, dtype=F64), rtol=0, atol=1e-10)  # interpolation at the data points
    q = positions(5, seed=1)
    torch.testing.assert_close(spline_interpolation_matrix(p, q.float()).sum(-1), torch.ones(5, dtype=F64),
                               rtol=0, atol=1e-10)  # fmt: skip  (a constant field is kept)


@pytest.mark.parametrize(
    "bad_from, bad_to, message",
    [
        ("2d", None, "positions_from must have shape (Ch, 3), got shape (12, 2)"),
        ("three", None, "positions_from must hold at least 4 sensors for spherical splines, got 3"),
        ("twice", None, "positions_from of sensors 0 and 12 coincide on the unit sphere"),
        (None, "origin", "positions_to must be finite and away from the origin, got [0.0, 0.0, 0.0]"),
        (None, "nan", "positions_to must be finite and away from the origin, got [nan, 0.0, 1.0]"),
        (None, "2d", "positions_to must have shape (..., 3), got shape (4, 2)"),
    ],
)
def test_spline_interpolation_matrix_refuses_positions_it_cannot_interpolate_naming_them(bad_from, bad_to, message):
    # Before: (P, 2) positions gave a matrix of 2-D "directions" silently, 3 sensors a matrix the docs rule out,
    # a repeated sensor torch's LinAlgError, a target at the origin rows of NaN.
    p = positions()
    src = {"2d": p[:, :2], "three": p[:3], "twice": torch.cat([p, p[:1]]), None: p}[bad_from]
    dst = {"origin": torch.zeros(2, 3, dtype=F64), "nan": torch.tensor([[math.nan, 0.0, 1.0]]),
           "2d": p[:4, :2], None: p}[bad_to]  # fmt: skip
    with pytest.raises(ValueError, match=re.escape(message)):
        spline_interpolation_matrix(src, dst)


def test_a_numerically_singular_spline_system_is_refused_not_solved_to_nonsense():
    # Before: one Legendre term gave a kernel of rank 3 and a matrix 54 away from the identity at the data points.
    p = positions()
    for kwargs in ({"n_terms": 1}, {"order": 150}):
        with pytest.raises(ValueError, match=r"positions_from \(12 sensors\) .* numerically singular spline system"):
            spline_interpolation_matrix(p, p, **kwargs)
        with pytest.raises(ValueError, match=r"sensor_positions \(12 sensors\) .* numerically singular spline system"):
            SensorsRotationZ(p, **kwargs)


@pytest.mark.parametrize("g_pp", [torch.zeros(4, 4, dtype=F64), torch.ones(4, 4, dtype=F64)], ids=["zeros", "ones"])
def test_an_exactly_singular_augmented_system_is_a_value_error(g_pp):
    # Before: torch's LinAlgError (a RuntimeError) left the solver.
    with pytest.raises(ValueError, match="these 4 sensors give a singular spline system"):
        _augmented_inverse_columns(g_pp)


# ======================================================================== audio, signal, image: reprs and stubs

REPRS = [
    (A.HighPass(16000), "HighPass(sample_rate=16000, min_cutoff=20, max_cutoff=2400, q=0.707)"),
    (A.BandReject(16000, min_q=2.0), "BandReject(sample_rate=16000, min_center=200, max_center=4000, min_q=2)"),
    (A.AddNoise(min_snr_db=-3.5), "AddNoise(min_snr_db=-3.5)"),
    (A.Gain(max_gain_db=12.0), "Gain(max_gain_db=12)"),
    (A.TimeMaskSpec(max_width=7.5, edge=0.5), "TimeMaskSpec(max_width=7.5, edge=0.5)"),
    (A.FrequencyMaskSpec(), "FrequencyMaskSpec(max_width=10, edge=1)"),
    (S.TimeReverse(temperature=0.2), "TimeReverse(temperature=0.2)"),
    (S.SignFlip(), "SignFlip(temperature=0.1)"),
    (S.TimeMask(max_length=50.0), "TimeMask(max_length=50.0, edge=2.0)"),
    (S.GaussianNoise(max_std=0.5), "GaussianNoise(max_std=0.5)"),
    (S.FTSurrogate(max_phase=math.pi, channel_independent=True),
     "FTSurrogate(max_phase=3.142, channel_independent=True)"),
    (S.FrequencyShift(250.0, max_shift=2.0), "FrequencyShift(sfreq=250.0, max_shift=2.0)"),
    (S.BandStop(100.0, band=(5, 20)), "BandStop(sfreq=100.0, max_width=2.0, band=(5.0, 20.0))"),
    (S.ChannelsSymmetry([(0, 2)], temperature=0.5), "ChannelsSymmetry(pairs=[(0, 2)], temperature=0.5)"),
    (S.ChannelsDropout(), "ChannelsDropout(temperature=0.1)"),
    (S.ChannelsShuffle(temperature=1.0), "ChannelsShuffle(temperature=1.0)"),
    (T.Solarize(min_threshold=0.25), "Solarize(min_threshold=0.25, temperature=0.1)"),
    (T.Posterize(max_bits=np.int64(3)), "Posterize(max_bits=3)"),
    (T.Equalize(temperature=0.05), "Equalize(temperature=0.05)"),
    (T.Sharpness(max_delta=0.5), "Sharpness(max_delta=0.5)"),
    (T.Saturation(max_delta=torch.tensor(0.5)), "Saturation(max_delta=0.5)"),
    (T.Hue(max_angle=1.0), "Hue(max_angle=1)"),
    (T.Invert(), "Invert(temperature=0.1)"),
    (T.AutoContrast(temperature=0.3), "AutoContrast(temperature=0.3)"),
    (T.Gray(), "Gray(temperature=0.1)"),
    (T.Scale(max_zoom=3), "Scale(max_zoom=3.0)"),
    (T.Scale(max_zoom=1.5, padding="border"), "Scale(max_zoom=1.5, padding='border')"),
    (T.HorizontalFlip(), "HorizontalFlip(temperature=0.1)"),
    (T.VerticalFlip(temperature=0.2, padding="reflection"), "VerticalFlip(temperature=0.2, padding='reflection')"),
    (T.SamplePairing(max_blend=0.25), "SamplePairing(max_blend=0.25)"),
]


@pytest.mark.parametrize("t, expected", REPRS, ids=[r for _, r in REPRS])
def test_a_transforms_repr_shows_its_arguments(t, expected):
    assert repr(t) == expected
    assert type(t)(**t.config()).config() == t.config()  # what the repr shows rebuilds it


def test_a_filter_without_its_biquad_names_what_it_lacks():
    from augnet.transforms.audio import _Filter

    class Bare(_Filter):
        def sample(self, x, magnitude, generator=None, copies=1):
            return {"cutoff": torch.ones(x.shape[0] * copies)}

    with pytest.raises(NotImplementedError, match=r"^Bare must implement _active\(\)$"):
        Bare(8000)(signals(), 0.5)

    class NoCoefficients(Bare):
        def _active(self, params):
            return params["cutoff"] > 0

    with pytest.raises(NotImplementedError, match=r"^NoCoefficients must implement _coefficients\(\)$"):
        NoCoefficients(8000)(signals(), 0.5)


def test_a_gated_colour_map_without_its_map_names_what_it_lacks():
    class NoMap(_GatedColor):
        pass

    with pytest.raises(NotImplementedError, match=r"^NoMap must implement _color_map\(\)$"):
        NoMap()(images(), 0.5)
    assert repr(NoMap(temperature=0.25)) == "NoMap(temperature=0.25)"


@pytest.mark.parametrize("t", [1, 2, 3, 5, 8, 17, 64])
def test_the_analytic_signal_keeps_the_signal_as_its_real_part_and_turns_a_cosine_into_a_sine(t):
    x = torch.randn(2, 3, t, generator=gen(t), dtype=F64)
    z = _analytic(x)
    assert z.shape == x.shape and z.is_complex()
    torch.testing.assert_close(z.real, x, rtol=0, atol=1e-12)
    if t >= 8 and t & (t - 1) == 0:  # T is the FFT's length: a tone of 3/8 of its bins is periodic in it, and its
        # Hilbert transform is the sine (the Nyquist bin, weighted 1, keeps a tone there real)
        phase = 2 * math.pi * (3 * t // 8) * torch.arange(t, dtype=F64) / t
        torch.testing.assert_close(_analytic(torch.cos(phase)[None, None]).imag[0, 0], torch.sin(phase),
                                   rtol=0, atol=1e-12)  # fmt: skip
        nyquist = torch.cos(math.pi * torch.arange(t, dtype=F64))  # (-1)^n: its analytic signal is itself
        torch.testing.assert_close(_analytic(nyquist[None, None])[0, 0], nyquist.to(torch.complex128),
                                   rtol=0, atol=1e-12)  # fmt: skip


# ======================================================================== Posterize.bits_distribution, Scale


@pytest.mark.parametrize("magnitude", [0.0, 0, torch.tensor(0.0), np.float32(0.0)], ids=repr)
def test_posterize_removes_no_bit_at_magnitude_0(magnitude):
    assert T.Posterize().bits_distribution(magnitude) == {0: 1.0}


@pytest.mark.parametrize("mu", [0.1, 0.25, 0.4, 0.7, 1.0])
@pytest.mark.parametrize("max_bits", [1, 4, 8])
def test_posterize_bits_distribution_is_a_distribution_with_the_mean_of_the_drawn_count(mu, max_bits):
    p = T.Posterize(max_bits=max_bits).bits_distribution(mu)
    assert min(p.values()) >= 0 and sum(p.values()) == pytest.approx(1.0, abs=1e-12)
    assert max(p) <= max_bits  # never more bits than an 8-bit level has, nor than the range
    # Stochastic rounding is unbiased: E[k] = E[r] = mu * max_bits / 2.
    assert sum(k * q for k, q in p.items()) == pytest.approx(mu * max_bits / 2, abs=1e-12)


@pytest.mark.parametrize(
    "bad, error",
    [(-0.5, ValueError), (1.5, ValueError), (math.nan, ValueError), ("0.5", TypeError), (None, TypeError),
     (True, TypeError)],
    ids=repr,
)
def test_posterize_bits_distribution_refuses_a_magnitude_outside_0_1_naming_it(bad, error):
    # Before: -0.5 gave {0: 1.0}, 1.5 removed up to 6 bits of a 4-bit range, "0.5" and True were read as numbers.
    with pytest.raises(error, match="magnitude"):
        T.Posterize().bits_distribution(bad)


@pytest.mark.parametrize("max_zoom", [1e39, 1e300, torch.finfo(torch.float32).max])
def test_a_zoom_range_beyond_float32_is_refused_at_construction(max_zoom):
    # Before: 1e39 drew infinite zooms (rows of the centre pixel alone), 1e300 failed at every call in tap_mix.
    with pytest.raises(ValueError, match=r"max_zoom \(.*\) is beyond float32's range"):
        T.Scale(max_zoom=max_zoom)


def test_a_zoom_range_at_the_top_of_float32_still_gives_finite_images():
    t = T.Scale(max_zoom=3e38)
    out = t(images(8), 1.0, generator=gen(0))
    assert torch.isfinite(out).all()


# ======================================================================== _biquad


def test_filter_rows_of_no_rows_or_no_samples_is_empty_and_keeps_the_graph():
    cutoff = torch.tensor([1000.0, 2000.0], requires_grad=True)
    b, a = lowpass_coefficients(cutoff, 8000)
    x = torch.zeros(2, 3, 0, requires_grad=True)
    out = filter_rows(x, b, a)
    assert out.shape == (2, 3, 0) and out.dtype == x.dtype
    out.sum().backward()
    assert torch.equal(cutoff.grad, torch.zeros(2)) and x.grad.shape == (2, 3, 0)
    none = filter_rows(torch.zeros(0, 1, 16, dtype=F64), b[:0].double(), a[:0].double())
    assert none.shape == (0, 1, 16) and none.dtype == F64
    # a filter's apply_transform on an empty batch, with the params of one
    t = A.LowPass(8000)
    assert t.apply_transform(signals()[:0], t.draw_params(signals()[:0], 0.5)).shape == (0, 2, 64)


# ======================================================================== export/_torchvision_ops


def _torchvision():
    pytest.importorskip("torchvision")
    from torchvision.transforms._functional_tensor import _max_value
    from torchvision.transforms.v2 import functional as F

    from augnet.export import _torchvision_ops

    return _torchvision_ops, _max_value, F


DTYPES = [torch.float32, torch.float16, torch.bool, torch.uint8, torch.int8, torch.int16, torch.uint16, torch.int32,
          torch.int64, torch.uint32, torch.uint64]  # fmt: skip


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_the_value_bound_is_torchvisions_for_every_dtype(dtype):
    # Before: uint32 and uint64 took their own largest values (2**32 - 1), where torchvision's kernels take 1.
    ops, max_value, _ = _torchvision()
    assert ops._value_bound(torch.zeros(1, 2, 2, dtype=dtype)) == float(max_value(dtype))


def test_the_table_of_value_bounds_is_torchvisions():
    # the table _value_bound uses where torchvision's _max_value cannot be imported
    ops, max_value, _ = _torchvision()
    for dtype in DTYPES:
        assert ops._table_max_value(dtype) == max_value(dtype)


def test_solarize_of_a_uint32_image_fails_as_torchvisions_own_for_its_dtype_not_a_threshold():
    # Before: "Threshold should be less or equal the maximum value of the dtype, but got 2147483647.5" (0.5 of
    # 2**32 - 1), a threshold nobody gave; torchvision's own solarize refuses uint32 for its dtype.
    ops, _, F = _torchvision()
    x = torch.tensor([[[0, 1], [2, 3]]], dtype=torch.uint32)
    with pytest.raises(TypeError) as own:
        F.solarize(x, threshold=0.5)
    with pytest.raises(TypeError) as ours:
        ops.RandomSolarizeRange(0.5, 0.5)(x)
    assert str(ours.value) == str(own.value) and "uint32" in str(ours.value)
