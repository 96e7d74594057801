"""Small mends of this round's open items, each a test that fails on the code before it."""

import math

import pytest
import torch

from augnet.probes.pairwise_ranking import layer_importance

SIZES = {"a": 2, "b": 1}


@pytest.mark.parametrize(
    "weight, std, bad",
    [
        ([math.nan, 1.0, 1.0], [1.0, 1.0, 1.0], "weight"),
        ([1.0, 1.0, 1.0], [1.0, math.inf, 1.0], "std"),
        ([math.inf, 1.0, 1.0], [1.0, 1.0, 1.0], "weight"),
        ([1.0, 2.0, 3.0], [math.nan, 0.0, 1.0], "std"),
    ],
    ids=["nan-weight", "inf-std", "inf-weight", "nan-std"],
)
def test_layer_importance_refuses_values_that_are_not_finite_naming_them(weight, std, bad):
    # Before: NaN shares (summing to NaN) came back without a word, the all-zero case's warning skipped.
    w, s = torch.tensor(weight), torch.tensor(std)
    kept = (w.clone(), s.clone())
    with pytest.raises(ValueError, match=rf"^{bad} must hold finite real numbers"):
        layer_importance(w, s, SIZES)
    assert torch.equal(w.nan_to_num(7.0), kept[0].nan_to_num(7.0))  # nothing modified in place
    assert torch.equal(s.nan_to_num(7.0), kept[1].nan_to_num(7.0))


def test_layer_importance_of_finite_values_is_unchanged():
    out = layer_importance(torch.tensor([2.0, 0.0, -1.0]), torch.tensor([1.0, 5.0, 1.0]), SIZES, "max")
    assert out == {"a": 2 / 3, "b": 1 / 3}
    with pytest.warns(RuntimeWarning, match="every weight is 0"):
        zero = layer_importance(torch.zeros(3), torch.ones(3), SIZES)
    assert all(math.isnan(v) for v in zero.values())


def test_an_experiment_config_refuses_a_thread_count_no_machine_can_start():
    # torch.set_num_threads takes 2**31 - 1, and the process then ends in libgomp's "Out of memory"
    from augnet.experiments.runner import check_threads

    with pytest.raises(ValueError, match=r"^InstanceConfig.threads must be at most 4096, got 2147483647"):
        check_threads("InstanceConfig", 2**31 - 1)
    check_threads("InstanceConfig", 4096)  # the bound itself is taken, as by the command line's --threads
    check_threads("InstanceConfig", None)
