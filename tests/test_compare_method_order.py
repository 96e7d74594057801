"""compare(methods=a set): the methods run and are tabled in COMPARE_METHODS' order, not in the set's iteration
order (which changes with Python's string hashing from one process to the next)."""

from __future__ import annotations

import pytest
import torch

from augnet.experiments.comparison import COMPARE_METHODS, _methods

X = torch.rand(4, 3, 8, 8)


@pytest.mark.parametrize("kind", [set, frozenset])
def test_a_set_of_methods_is_taken_in_the_methods_order(kind):
    chosen = ["augnet", "none", "trivialaugment", "crop"]
    assert _methods(kind(chosen), True, X) == [m for m in COMPARE_METHODS if m in chosen]


def test_a_list_keeps_its_own_order():
    assert _methods(["augnet", "none"], True, X) == ["augnet", "none"]


def test_a_set_with_an_unknown_name_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"methods must be distinct names .*got \[.*'spin'"):
        _methods({"none", "spin"}, True, X)
