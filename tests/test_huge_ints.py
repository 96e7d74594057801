"""A constructor's positive number given as an int past a float's range (``10**400``): a ValueError naming the
argument (``math.isfinite`` raised a bare OverflowError)."""

import pytest

from augnet._checks import positive
from augnet.transforms import image as T


@pytest.mark.parametrize("value", [10**400, -(10**400)])
def test_positive_names_an_int_past_a_floats_range(value):
    with pytest.raises(ValueError, match=r"max_angle must be a positive finite number, got an int of 1329 bits"):
        positive("max_angle", value)


def test_a_transform_names_it_too_and_takes_a_large_int_a_float_holds():
    with pytest.raises(ValueError, match="max_angle must be a positive finite number"):
        T.Rotate(max_angle=10**400)
    assert positive("max_angle", 10**300) == 1e300
