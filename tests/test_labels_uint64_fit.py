"""uint64 labels of 2**63 and above in ``fit`` and ``accuracy``: refused, naming them, before any step.

``.long()`` wraps them below 0, and 2**64 - 100 becomes -100, the cross-entropy's ``ignore_index``: such a
sample was skipped without a word (its loss term 0), and the model trained as if it were not there.
"""

import pytest
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from augnet._labels import host_int64_labels
from augnet.training import accuracy, fit

IGNORED = 2**64 - 100  # -100 once wrapped: cross_entropy's ignore_index


def _setup():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(4, 3))
    x = torch.randn(6, 4)
    y = torch.tensor([0, 1, 2, 0, 1, IGNORED], dtype=torch.uint64)
    return model, x, y


def _params(model):
    return [p.detach().clone() for p in model.parameters()]


def test_fit_on_tensors_refuses_a_uint64_label_that_wraps_to_the_ignore_index_before_any_step():
    model, x, y = _setup()
    before = _params(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match=r"^y holds labels past int64's range"):
        fit(model, x, y, opt, epochs=1, batch_size=3, progress=False, regularizer="none")
    assert all(torch.equal(p, q) for p, q in zip(before, _params(model), strict=True))
    assert y[-1].item() == IGNORED  # the caller's labels untouched


def test_fit_on_a_loader_refuses_the_batch_that_holds_it():
    model, x, y = _setup()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(x, y), batch_size=6)
    with pytest.raises(ValueError, match=r"^a batch's labels holds labels past int64's range"):
        fit(model, loader, optimizer=opt, epochs=1, progress=False, regularizer="none")


def test_accuracy_refuses_it_too():
    model, x, y = _setup()
    with pytest.raises(ValueError, match=r"^a batch's labels holds labels past int64's range"):
        accuracy(model, DataLoader(TensorDataset(x, y), batch_size=4))


def test_uint64_labels_below_two_to_the_63_train_exactly_as_int64_ones():
    model, x, y = _setup()
    y = y.clone()
    y[-1] = 2
    histories = []
    for labels in (y, y.long()):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Flatten(), nn.Linear(4, 3), nn.LogSoftmax(-1))  # nll_loss's log-probabilities
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        fit(model, x, labels, opt, epochs=2, batch_size=3, progress=False, regularizer="none")
        histories.append(_params(model))
    assert all(torch.equal(p, q) for p, q in zip(*histories, strict=True))


def test_the_reader_reads_values_of_uint64_alone_and_widens_every_other_dtype_unchecked():
    assert host_int64_labels(torch.tensor([2**63 - 1], dtype=torch.uint64), "y").tolist() == [2**63 - 1]
    assert host_int64_labels(torch.tensor([-3], dtype=torch.int8), "y").tolist() == [-3]  # the loss's to refuse
    floats = torch.tensor([0.5])
    assert host_int64_labels(floats, "y") is floats  # a loss's float targets, passed through
    meta = torch.empty(3, dtype=torch.uint64, device="meta")
    assert host_int64_labels(meta, "y").dtype == torch.int64  # no values to read: widened only
