"""``Transform.natural_range`` checks its magnitude and size; a transform's magnitude takes a 0-d NumPy array.

``natural_range`` read any ``float()``-able value as the magnitude (``"0.5"`` gave ±90 deg, ``True`` ±180,
NaN a NaN range, -0.5 a reversed one, 2.0 ±360) and indexed ``size`` unchecked (a string, a size of one
dimension for an image: raw errors). Every subclass's own ``natural_range`` is now wrapped to check both
first; valid input gives what it gave, bit for bit. A transform's call took ``np.float32(0.5)`` and
``torch.tensor(0.5)`` but refused ``np.array(0.5)``.
"""

from __future__ import annotations

import inspect
import math
import re

import numpy as np
import pytest
import torch
from transform_cases import CASES

from augnet._checks import NotANumberError
from augnet.transforms import Range, Transform
from augnet.transforms import audio as A
from augnet.transforms import image as T
from augnet.transforms import signal as S

MAGNITUDES = (0.0, 0.1, 0.25, 0.3, 0.5, 0.7, 1.0)


def _bits(r) -> tuple:
    """A range's ends bit for bit (``-0.0`` apart from ``0.0``) and its unit."""
    return (float(r[0]).hex(), float(r[1]).hex(), r[2])


def _size(case) -> tuple[int, ...]:
    return tuple(case.make(2, torch.float32).shape[2:])


def _own(t: Transform):
    """The transform's ``natural_range`` as its class wrote it (the old tree's, which had no wrapper)."""
    return inspect.unwrap(type(t).natural_range)


# ------------------------------------------------------------------------------ valid input: as before


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_every_transform_gives_the_range_its_own_method_computes(case):
    t, size = case.build(), _size(case)
    own = _own(t)
    for m in MAGNITUDES:
        for sz in (None, size, (7, *size)):
            got = t.natural_range(m, sz) if sz is not None else t.natural_range(m)
            assert isinstance(got, Range)
            assert _bits(got) == _bits(own(t, m, sz)), (case.id, m, sz)
        assert _bits(t.natural_range(magnitude=m, size=size)) == _bits(own(t, m, size))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_numbers_of_every_kind_give_the_range_of_the_float(case):
    t, size = case.build(), _size(case)
    for m in MAGNITUDES:
        want = _bits(t.natural_range(m, size))
        f32 = float(np.float32(m))  # a float32 magnitude: the float it holds
        kinds = [np.float64(m), torch.tensor(m, dtype=torch.float64), torch.tensor([m], dtype=torch.float64),
                 torch.tensor(m, dtype=torch.float64, requires_grad=True)]  # fmt: skip
        for given in kinds:
            assert _bits(t.natural_range(given, size)) == want, (case.id, given)
        want32 = _bits(t.natural_range(f32, size))
        for given in (np.float32(m), torch.tensor(m), np.array(m, dtype=np.float32)):
            assert _bits(t.natural_range(given, size)) == want32, (case.id, given)
    for whole in (0, 1):  # ints, Python, NumPy or in a tensor: the float they hold
        want = _bits(t.natural_range(float(whole), size))
        for given in (whole, np.int64(whole), torch.tensor(whole)):
            assert _bits(t.natural_range(given, size)) == want


def test_a_0d_array_magnitude_gives_the_range_of_the_float():
    t = T.Rotate()
    for m in MAGNITUDES:
        assert _bits(t.natural_range(np.array(m))) == _bits(t.natural_range(m))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_sizes_of_every_kind_give_the_range_of_the_tuple(case):
    t, size = case.build(), _size(case)
    for m in (0.3, 1.0):
        want = _bits(t.natural_range(m, size))
        for given in (list(size), torch.Size(size), np.array(size), [np.int64(s) for s in size],
                      [torch.tensor(s) for s in size]):  # fmt: skip
            assert _bits(t.natural_range(m, given)) == want, (case.id, given)


def test_a_size_tensor_gives_float_ends_not_float32_tensors():
    # TranslateX multiplied by size[-1], a 0-d int64 tensor: the ends were float32 tensors (another rounding).
    t = T.TranslateX()
    got = t.natural_range(0.3, torch.tensor([28, 33]))
    assert type(got.low) is float and type(got.high) is float
    assert _bits(got) == _bits(t.natural_range(0.3, (28, 33)))


def test_the_known_values_stay():
    assert T.Rotate().natural_range(0.25) == (-45.0, 45.0, "deg")
    assert T.TranslateX().natural_range(0.5, (28, 32)) == (-4.0, 4.0, "px")
    assert T.TranslateY().natural_range(0.5, (28, 32)) == (-3.5, 3.5, "px")
    assert T.TranslateY().natural_range(0.5, (3, 28, 32)) == (-3.5, 3.5, "px")  # a longer size: its last two
    assert S.TimeMask().natural_range(0.5, (120,)) == (0.0, 100.0, "samples")
    assert A.Gain().natural_range(0.5, (2, 256)) == (-3.0, 3.0, "dB")
    assert A.AddNoise().natural_range(0) == (math.inf, math.inf, "dB SNR")


def test_a_transform_of_ones_own_is_checked_and_keeps_its_signature():
    class Plain(Transform):  # no size argument at all
        def natural_range(self, magnitude):
            return Range(0.0, 2 * magnitude, "")

    class Flat(Transform):  # (B, F) rows: no size dimension to read
        input_ndim = 2

        def natural_range(self, magnitude, size=None):
            return Range(-magnitude, magnitude, repr(size))

    class Deeper(Flat):  # inherits the checked method; calls its base's
        def natural_range(self, magnitude, size=None):
            return super().natural_range(magnitude, size)

    assert Plain().natural_range(np.array(0.25)) == (0.0, 0.5, "")
    assert list(inspect.signature(Plain.natural_range).parameters) == ["self", "magnitude"]
    assert Flat().natural_range(torch.tensor(0.5), ()) == (-0.5, 0.5, "()")
    assert Deeper().natural_range(1, [4]) == (-1.0, 1.0, "(4,)")
    assert Transform.natural_range(Plain(), 0.5) == (0.0, 0.5, "")  # the base's own: the magnitude itself
    for cls in (Plain, Flat, Deeper):
        with pytest.raises(ValueError, match=rf"^{cls.__name__}\.natural_range: magnitude must lie in \[0, 1\], got 2"):
            cls().natural_range(2)


# ------------------------------------------------------------------------------- refusals: magnitude

NOT_NUMBERS = [
    ("0.5", "'0.5'"),
    (True, "True"),
    (None, "None"),
    ([0.5], r"\[0.5\]"),
    (1j, "1j"),
    (torch.tensor(True), r"tensor\(True\)"),
    (np.array(True), r"array\(True\)"),
    (np.array([0.5]), r"array\(\[0.5\]\)"),
]


@pytest.mark.parametrize(("given", "shown"), NOT_NUMBERS, ids=[repr(g)[:20] for g, _ in NOT_NUMBERS])
def test_natural_range_refuses_a_magnitude_that_is_not_a_number(given, shown):
    for t in (T.Rotate(), S.TimeMask(), A.LowPass(8000)):
        name = type(t).__name__
        with pytest.raises(NotANumberError, match=rf"^{name}\.natural_range: magnitude must be a number in \[0, 1\] "
                                                  rf"\(a float, a 0-d tensor or array\), got {shown}$"):  # fmt: skip
            t.natural_range(given)


@pytest.mark.parametrize("given", [torch.tensor([0.5, 0.2]), torch.zeros(2, 3), torch.zeros(0)])
def test_natural_range_refuses_a_tensor_of_several_magnitudes(given):
    shown = re.escape(str(tuple(given.shape)))
    want = r"^Rotate\.natural_range: magnitude must be one number in \[0, 1\] \(a 0-d tensor\), got a tensor of shape "
    with pytest.raises(NotANumberError, match=want + shown + "$"):
        T.Rotate().natural_range(given)


@pytest.mark.parametrize(
    ("given", "shown"),
    [(float("nan"), "nan"), (math.inf, "inf"), (-math.inf, "-inf"), (-0.5, "-0.5"), (2.0, "2.0"), (2, "2"),
     (1.0000001, "1.0000001"), (np.float32("nan"), "nan"), (torch.tensor(-0.5), "-0.5"), (np.array(1.5), "1.5"),
     (10**400, "an int of 1329 bits")],
)  # fmt: skip
def test_natural_range_refuses_a_magnitude_outside_the_unit_interval(given, shown):
    for t in (T.Rotate(), T.TranslateX(), S.FTSurrogate(), A.AddNoise()):
        name = type(t).__name__
        with pytest.raises(ValueError, match=rf"^{name}\.natural_range: magnitude must lie in \[0, 1\], got {shown}$"):
            t.natural_range(given, None)


def test_natural_range_refuses_a_magnitude_on_meta():
    with pytest.raises(ValueError, match=r"^Rotate\.natural_range: magnitude is a tensor on meta, which holds no"):
        T.Rotate().natural_range(torch.tensor(0.5, device="meta"))


# ------------------------------------------------------------------------------------ refusals: size

BAD_SIZE_TYPES = [
    "ab",
    b"ab",
    32,
    32.0,
    {28: 32},
    (28.0, 32),
    (True, 32),
    (28, "32"),
    (28, None),
    torch.tensor([28.0, 32.0]),
    torch.tensor([[28, 32]]),
    torch.tensor([True, True]),
    np.array([28.0, 32.0]),
    torch.tensor(32),
]


@pytest.mark.parametrize("size", BAD_SIZE_TYPES, ids=[repr(s)[:24] for s in BAD_SIZE_TYPES])
def test_natural_range_refuses_a_size_that_is_not_a_sequence_of_ints(size):
    for t in (T.TranslateX(), T.TranslateY(), T.Rotate(), S.TimeMask(), A.Gain()):
        with pytest.raises(TypeError, match=rf"^{type(t).__name__}\.natural_range: size must be a sequence of ints"):
            t.natural_range(0.5, size)


@pytest.mark.parametrize("size", [(0, 32), (28, -1), [32, 0], torch.tensor([0, 3]), np.array([3, -3])])
def test_natural_range_refuses_a_size_below_one(size):
    for t in (T.TranslateX(), T.TranslateY(), S.TimeMask()):
        with pytest.raises(ValueError, match=rf"^{type(t).__name__}\.natural_range: size must hold sizes >= 1, got"):
            t.natural_range(0.5, size)


@pytest.mark.parametrize("size", [(32,), [], (), torch.tensor([32]), np.array([32])])
def test_an_image_transforms_size_needs_the_height_and_the_width(size):
    for t in (T.TranslateX(), T.TranslateY(), T.Rotate(), T.Brightness()):
        with pytest.raises(ValueError, match=rf"^{type(t).__name__}\.natural_range: size must hold the input's last "
                                             r"2 sizes \(H, W\), got"):  # fmt: skip
            t.natural_range(0.5, size)


@pytest.mark.parametrize(
    "t", [S.TimeMask(), S.BandStop(100.0), A.Gain(), A.TimeMaskSpec()], ids=lambda t: type(t).__name__
)
def test_a_signal_transforms_size_needs_the_length(t):
    with pytest.raises(ValueError, match=rf"^{type(t).__name__}\.natural_range: size must hold the input's last size "
                                         r"\(T,\), got \(\)$"):  # fmt: skip
        t.natural_range(0.5, ())
    assert _bits(t.natural_range(0.5, (40,))) == _bits(t.natural_range(0.5, (24, 40)))


def test_natural_range_refuses_a_size_on_meta():
    with pytest.raises(ValueError, match=r"^TranslateX\.natural_range: size is a tensor on meta"):
        T.TranslateX().natural_range(0.5, torch.tensor([8, 8], device="meta"))


def test_the_sizes_helper_reads_ints_and_refuses_the_rest():
    from augnet._checks import sizes

    assert sizes("size", (torch.tensor(3), np.int32(4), 5)) == (3, 4, 5)
    assert sizes("size", torch.tensor([1, 2], dtype=torch.uint8)) == (1, 2) and sizes("size", []) == ()
    assert all(type(s) is int for s in sizes("size", np.array([7, 8])))
    with pytest.raises(TypeError, match=r"^hw must be a sequence of ints, got str: 'ab'$"):
        sizes("hw", "ab")


# ---------------------------------------------------------------- a 0-d array as a transform's magnitude


def _gen():
    return torch.Generator().manual_seed(3)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_0d_array_magnitude_is_the_number_it_holds(case):
    t, x = case.build(), case.make(3, torch.float32)
    for m in (0.0, 0.3, 1.0):
        want = t(x, m, generator=_gen(), copies=2)
        for given in (np.array(m), np.array(m, dtype=np.float64)):
            assert torch.equal(t(x, given, generator=_gen(), copies=2), want), (case.id, m)
            got = t.draw_params(x, given, generator=_gen(), copies=2)
            ref = t.draw_params(x, m, generator=_gen(), copies=2)
            assert got.keys() == ref.keys() and all(torch.equal(got[k], ref[k]) for k in ref)
        # float32 like a NumPy float32 scalar: the same draws and the same output
        want32 = t(x, np.float32(m), generator=_gen())
        assert torch.equal(t(x, np.array(m, dtype=np.float32), generator=_gen()), want32)
    whole = t(x, 1, generator=_gen())
    assert torch.equal(t(x, np.array(1), generator=_gen()), whole)


def test_a_0d_array_magnitude_replays_and_keeps_float64_inputs_in_float64():
    t, x = T.Rotate(), torch.rand(2, 3, 8, 8, dtype=torch.float64)
    params = t.draw_params(x, np.array(0.4), generator=_gen())
    assert params["angle"].dtype == torch.float64
    assert torch.equal(t(x, np.array(0.4), params=params), t(x, 0.4, generator=_gen()))
    assert torch.equal(t.check_magnitude(np.array(0.4), x), t.check_magnitude(0.4, x))


@pytest.mark.parametrize("given", [np.array(True), np.array(0.5 + 0j), np.array("0.5"), np.array([0.5]),
                                   np.zeros((2, 2))])  # fmt: skip
def test_arrays_that_are_not_one_real_number_are_still_refused(given):
    with pytest.raises(NotANumberError, match=r"^Rotate: magnitude must be a float or a tensor, got ndarray$"):
        T.Rotate()(torch.rand(2, 3, 8, 8), given)


@pytest.mark.parametrize("given", [np.array(1.5), np.array(float("nan")), np.array(-1)])
def test_a_0d_array_outside_the_unit_interval_is_refused_as_the_number(given):
    with pytest.raises(ValueError, match=r"^Rotate: magnitude must lie in \[0, 1\], got"):
        T.Rotate()(torch.rand(2, 3, 8, 8), given)


def test_an_int_magnitude_float_cannot_hold_is_a_value_error_not_an_overflow():
    for given in (10**400, -(10**400)):
        with pytest.raises(ValueError, match=r"^Rotate: magnitude must lie in \[0, 1\], got an int of 1329 bits$"):
            T.Rotate()(torch.rand(2, 3, 8, 8), given)
