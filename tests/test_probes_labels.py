"""Class labels, read by one reader wherever a probe (or ``policy_summary``) takes them.

The same labels in any integer form (any integer dtype, a NumPy array, a list, whole floats, a (N, 1) column)
give the same per-class results in every probe; labels that are not one class per input are refused before
the model runs, by an error naming the argument; classes too small to measure are handled as documented.
"""

import math

import numpy as np
import pytest
import torch
from helpers import gen
from torch import nn

from augnet import probes
from augnet._labels import class_labels
from augnet.instance import ConditionedAugmentationLayer
from augnet.instance_policy import policy_summary
from augnet.probes.inputs import load_labels
from augnet.transforms import image as T

N = 16
Y = torch.arange(N) % 3  # classes 0, 1, 2: six, five and five inputs

#: The same labels, Y, in every form the probes take.
FORMS = {
    "int32": lambda y: y.int(),
    "int16": lambda y: y.short(),
    "int8": lambda y: y.to(torch.int8),
    "uint8": lambda y: y.to(torch.uint8),
    "numpy-int64": lambda y: y.numpy(),
    "numpy-int32": lambda y: y.numpy().astype(np.int32),
    "numpy-uint16": lambda y: y.numpy().astype(np.uint16),
    "list": lambda y: y.tolist(),
    "tuple": lambda y: tuple(y.tolist()),
    "float32": lambda y: y.float(),
    "float16": lambda y: y.half(),
    "numpy-float64": lambda y: y.double().numpy(),
    "column": lambda y: y[:, None],
    "float-column": lambda y: y.float()[:, None],
    "list-of-lists": lambda y: [[v] for v in y.tolist()],
}


def images(n=N, seed=0):
    return torch.rand(n, 3, 8, 8, generator=gen(seed))


def classifier(seed=0):
    """(B, 3, 8, 8) images -> (B, 3) logits, a ReLU at "1"."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3)).eval()


def counted(model):
    """``model`` with a list that grows by one per call of its first layer (whatever wraps it)."""
    calls = []
    model[0].register_forward_pre_hook(lambda m, i: calls.append(len(i[0])))
    return model, calls


def hflip(x, magnitude, generator=None):
    return torch.flip(x, dims=[-1])


def same(a, b):
    """Equal, NaN equal to NaN, through dicts, lists and tensors."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(same(u, v) for u, v in zip(a, b, strict=True))
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and bool(torch.equal(a.isnan(), b.isnan())) and (
            bool((a[~a.isnan()] == b[~b.isnan()]).all()) if a.is_floating_point() else torch.equal(a, b))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return a == b


def conditioned():
    return ConditionedAugmentationLayer([T.Rotate(), T.Brightness()], channels=3, init_magnitude=0.25).eval()


# --------------------------------------------------------------------------- the reader


@pytest.mark.parametrize("form", list(FORMS))
def test_the_reader_gives_the_same_int64_labels_for_every_form(form):
    got = class_labels(FORMS[form](Y), N, "y")
    assert got.dtype == torch.int64 and got.device.type == "cpu" and torch.equal(got, Y)


def test_the_reader_takes_uint64_and_the_extremes_of_int64():
    assert class_labels(torch.tensor([0, 2**63 - 1], dtype=torch.uint64)).tolist() == [0, 2**63 - 1]
    assert class_labels(np.array([3, 1], dtype=np.uint64)).tolist() == [3, 1]
    assert class_labels(np.array([2, 0], dtype=object)).tolist() == [2, 0]  # an object array of ints
    assert class_labels([]).shape == (0,) and class_labels(torch.zeros(0, 1), 0).shape == (0,)


# --------------------------------------------------------------------------- the same per-class results


@pytest.fixture(scope="module")
def report_of():
    x, cache = images(), {}

    def run(labels):
        key = "base" if labels is Y else id(labels)
        if key not in cache:
            cache[key] = probes.report(classifier(), x, ["Rotate"], ["1", "logits"], magnitudes=[1.0], lie=False,
                                       per_unit=True, by_class=labels)  # fmt: skip
        return cache[key]

    return run


@pytest.mark.parametrize("form", list(FORMS))
def test_report_by_class_is_the_same_for_every_label_form(report_of, form):
    base, got = report_of(Y), report_of(FORMS[form](Y))
    assert got.classes() == base.classes() == [0, 1, 2]
    assert same(got.records, base.records) and same(got.units, base.units)
    assert {r["class"] for r in got.records} == {None, 0, 1, 2}


@pytest.mark.parametrize("form", list(FORMS))
def test_the_similarity_probes_are_the_same_for_every_label_form(form):
    labels, z = FORMS[form](Y), torch.randn(N, 5, generator=gen(1))
    zt = z + 0.3 * torch.randn(N, 5, generator=gen(2))
    assert torch.equal(probes.same_class_pairs(labels), probes.same_class_pairs(Y))
    got = probes.similarity_change(z, zt, labels, generator=gen(3))
    base = probes.similarity_change(z, zt, Y, generator=gen(3))
    assert sorted(got["per_class"]) == [0, 1, 2] and same(got, base)
    kw = {"transforms": {"flip": hflip}, "magnitudes": [1.0], "layer": "1"}
    assert same(probes.similarity_search(classifier(), images(), labels, **kw),
                probes.similarity_search(classifier(), images(), Y, **kw))  # fmt: skip


@pytest.mark.parametrize("form", list(FORMS))
def test_the_scored_probes_are_the_same_for_every_label_form(form):
    x, labels = images(), FORMS[form](Y)
    net = classifier()
    for run in (
        lambda y: probes.accuracy_curve(net, x, y, T.Rotate(), [0.0, 1.0]),
        lambda y: probes.category_accuracy(net, x, y, hflip, seen_classes=[0, 2]),
        lambda y: probes.select_tau(net, "1", x, y, taus=[0.0, 0.3], transform=hflip, score="within",
                                    seen_classes=[1]),
        lambda y: probes.layerwise_invariance(net, x, "1", tau=0.1, transform=hflip, y=y, seen_classes=[1]),
        lambda y: {k: v for k, v in probes.equivariance_report(net[:4](x), net[:4](hflip(x, 1.0)), head=net[4],
                                                                y=y).items() if k != "map"},  # a fitted module
    ):
        with torch.no_grad():
            assert same(run(labels), run(Y))


@pytest.mark.parametrize("form", list(FORMS))
def test_policy_summary_is_the_same_for_every_label_form(form):
    layer, x = conditioned(), images()
    got, base = policy_summary(layer, (x, FORMS[form](Y))), policy_summary(layer, (x, Y))
    assert sorted(got.classes) == [0, 1, 2] and same(got.classes, base.classes)


def test_load_labels_reads_a_tensor_file_of_labels_in_any_form(tmp_path):
    for i, form in enumerate(("float32", "column", "int32", "uint8")):
        torch.save(FORMS[form](Y), tmp_path / f"{i}.pt")
        assert torch.equal(load_labels(tmp_path / f"{i}.pt"), Y), form
    torch.save(Y.bool(), tmp_path / "mask.pt")
    with pytest.raises(TypeError, match=r"--by-class .*mask\.pt must hold integer class labels, got dtype torch\.bool"):
        load_labels(tmp_path / "mask.pt")


# --------------------------------------------------------------------------- refusals, naming the argument

#: Labels that are not one class per input: (labels, error, what the message says).
BAD = {
    "bool": (lambda: Y > 0, TypeError, r"integer class labels, got dtype torch\.bool \(a mask\?"),
    "complex": (lambda: Y.to(torch.complex64), TypeError, "integer class labels"),
    "names": (lambda: ["cat", "dog"] * (N // 2), TypeError, r"map names to integers first"),
    "numpy-names": (lambda: np.array(["cat", "dog"] * (N // 2)), TypeError, r"map names to integers first"),
    "fractions": (lambda: Y + 0.5, ValueError, r"whole numbers \(class labels\), got \[0\.5"),
    "nan": (lambda: Y.float().index_fill(0, torch.tensor([3]), math.nan), ValueError, r"whole numbers.*nan"),
    "inf": (lambda: Y.float().index_fill(0, torch.tensor([3]), math.inf), ValueError, r"whole numbers.*inf"),
    "negative": (lambda: Y.index_fill(0, torch.tensor([3]), -1), ValueError, r"class labels >= 0, got -1"),
    "negative-float": (lambda: Y.double().index_fill(0, torch.tensor([3]), -2.0), ValueError, ">= 0, got -2"),
    "past-int64-float": (lambda: Y.double().index_fill(0, torch.tensor([3]), 1e20), ValueError, "int64's range"),
    "past-int64-uint64": (lambda: torch.full((N,), 2**63 + 5, dtype=torch.uint64), ValueError, "int64's range"),
    "one-hot": (lambda: nn.functional.one_hot(Y, 3), ValueError, r"one-hot rows\? pass their argmax\(1\)"),
    "a-row": (lambda: Y[None], ValueError, r"shape"),
    "short": (lambda: Y[:5], ValueError, r"length|shape"),
    "a-number": (lambda: 3, ValueError, r"shape"),
    "a-dict": (lambda: {0: 1}, TypeError, "integer class labels"),
}


def _probes():
    """Each probe that takes labels: (run(labels, model), the argument's name in its errors)."""
    x = images()
    return {
        "report": (lambda y, m: probes.report(m, x, ["Rotate"], ["1"], magnitudes=[1.0], lie=False, by_class=y),
                   "by_class"),
        "accuracy_curve": (lambda y, m: probes.accuracy_curve(m, x, y, T.Rotate(), [1.0]), "y"),
        "category_accuracy": (lambda y, m: probes.category_accuracy(m, x, y, hflip, seen_classes=[0]), "y"),
        "select_tau": (lambda y, m: probes.select_tau(m, "1", x, y, taus=[0.0], transform=hflip), "y"),
        "layerwise_invariance": (
            lambda y, m: probes.layerwise_invariance(m, x, "1", tau=0.1, transform=hflip, y=y, seen_classes=[0]),
            "y"),
        "similarity_search": (lambda y, m: probes.similarity_search(m, x, y, {"flip": hflip}), "y"),
        "equivariance_curve": (lambda y, m: probes.equivariance_curve(m[:2], x, T.HorizontalFlip(), [1.0],
                                                                      head=nn.Sequential(*m[2:]), y=y), "y"),
        "similarity_change": (lambda y, m: probes.similarity_change(torch.ones(N, 2), torch.ones(N, 2), y), "y"),
        "same_class_pairs": (lambda y, m: probes.same_class_pairs(y), "y"),
        "policy_summary": (lambda y, m: policy_summary(conditioned(), (x, y)), "labels of batch 0"),
    }


# same_class_pairs takes labels alone: any length is theirs, so "short" is no bad input for it.
@pytest.mark.parametrize(
    ("probe", "bad"), [(p, b) for p in _probes() for b in BAD if (p, b) != ("same_class_pairs", "short")]
)
def test_labels_that_are_not_one_class_per_input_are_refused_naming_the_argument_before_the_model_runs(probe, bad):
    make, error, match = BAD[bad]
    run, name = _probes()[probe]
    model, calls = counted(classifier())
    with pytest.raises(error, match=match) as caught:
        run(make(), model)
    assert name in str(caught.value) and not calls


def test_select_tau_refuses_labels_past_the_models_classes_after_its_first_batch():
    model, calls = counted(classifier())
    with pytest.raises(ValueError, match=r"y holds class 5, but the model returns 3 classes: labels must be in \[0, 3"):
        probes.select_tau(model, "1", images(), Y + 3, taus=[0.0], transform=hflip, batch_size=4)
    assert calls == [4]  # one batch ran: the logits' width is known only then
    probes.select_tau(model, "1", images(), Y, taus=[0.0], transform=hflip)  # classes 0..2 of 3: taken


# --------------------------------------------------------------------------- classes too small, classes absent


def test_a_class_of_one_sample_has_no_pair_and_no_per_class_entry():
    y = torch.tensor([0, 0, 0, 1, 2, 2, 0, 2])  # class 1: one sample
    z = torch.randn(8, 4, generator=gen(4))
    out = probes.similarity_change(z, z + 0.1, y)
    assert sorted(out["per_class"]) == [0, 2] and 1 not in out["label"].tolist()
    rows = probes.similarity_search(classifier(), images(8), y, {"flip": hflip}, magnitudes=[1.0])
    assert sorted({r["label"] for r in rows}) == [0, 2]
    model, calls = counted(classifier())
    with pytest.raises(ValueError, match="no class has two samples"):
        probes.similarity_search(model, images(3), torch.tensor([0, 1, 2]), {"flip": hflip})
    assert not calls


def test_a_seen_class_no_label_holds_gives_an_empty_group():
    x, net = images(), classifier()
    out = probes.layerwise_invariance(net, x, "1", tau=0.1, transform=hflip, y=Y, seen_classes=[7])
    assert math.isnan(out["mean"]["seen"]["1"]) and math.isnan(out["median"]["seen"]["1"])
    assert out["mean"]["unseen"] == out["mean"]["all"]  # every input unseen
    cat = probes.category_accuracy(net, x, Y, hflip, seen_classes=[7])
    assert math.isnan(cat["within"]) and cat["n_seen"] == 0 and cat["n_unseen"] == N
    with pytest.raises(ValueError, match=r"no input of the seen classes \[7\]"):
        probes.select_tau(net, "1", x, Y, taus=[0.0], transform=hflip, score="within", seen_classes=[7])
