"""An exporter's ``size`` is read by :func:`augnet.policy.check_size`, as every spatial size is, and must be a pair."""

import numpy as np
import pytest
import torch

from augnet.export._common import check_size
from augnet.policy import check_size as check_spatial_size


@pytest.mark.parametrize(
    "size",
    [(5, 6), [5, 6], torch.Size([5, 6]), torch.tensor([5, 6]), np.array([5, 6]), (torch.tensor(5), 6), range(5, 7)],
)
def test_a_pair_reads_as_the_policy_reads_it(size):
    assert check_size(size) == check_spatial_size(size) == (5, 6)


def test_none_is_no_size():
    assert check_size(None) is None


@pytest.mark.parametrize("size", [(), (5,), (5, 6, 7), (0, 5, 3), (5.0, 6), (True, 6), "45", 45, torch.tensor([[5, 6]]),
                                  (float("nan"), 5), (torch.tensor([5]), 6)])  # fmt: skip
def test_anything_but_a_pair_of_ints_is_refused_as_not_a_pair(size):
    with pytest.raises(TypeError, match=r"^size must be None or a pair of ints \(H, W\), got"):
        check_size(size)


@pytest.mark.parametrize("size", [(0, 5), (-1, 2), np.array([0, 5])])
def test_a_pair_with_an_item_below_one_is_not_positive(size):
    with pytest.raises(ValueError, match=r"^size must be positive, got"):
        check_size(size)
