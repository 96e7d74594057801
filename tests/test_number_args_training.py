"""The number and sequence arguments of augnet.training (fit, accuracy, rank_generator) and augnet.bench
(inference_cost, BenchConfig, run_benchmark, cpu_peak_bytes, on_paper, compile_all), read as every other
augnet argument reads them: a 0-d integer tensor or array as the int it holds, a 1-D NumPy array or tensor of
copies as its values; bools, floats and negatives still refused. And arguments that ended in a raw Python
error (a truth value of an array, len() of a 0-d tensor, an AttributeError) now refused with an error naming them.

fit with the 0-d forms is checked to train bit for bit as with the Python int.
"""

import numpy as np
import pytest
import torch
from helpers import gen
from torch import nn

import augnet
from augnet.bench import BenchConfig, cpu_peak_bytes, inference_cost, on_paper, run_benchmark
from augnet.bench import inference as inference_module
from augnet.bench.gpu_compile import compile_all
from augnet.training import accuracy, fit, rank_generator
from augnet.training.devices import amp_dtype
from augnet.transforms import image as T


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Flatten(), nn.Linear(48, 8), nn.Tanh(), nn.Linear(8, 3), nn.LogSoftmax(1))


def augnet_model():
    return augnet.AugNet(mlp(), augnet.AugmentationLayer([T.Rotate(), T.ShearX()]))


def data(n=10):
    return torch.rand(n, 3, 4, 4, generator=gen(0)), torch.randint(0, 3, (n,), generator=gen(1))


def run(**overrides):
    """A tiny fit of an AugNet (epochs=3, batch_size=4, record_every=2 unless overridden): history, parameters."""
    model = augnet_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = data()
    settings = dict(epochs=3, batch_size=4, record_every=2, generator=gen(5))
    settings.update(overrides)
    history = fit(model, x, y, opt, **settings)
    return history, [p.detach().clone() for p in model.parameters()]


def same_run(a, b):
    (ha, pa), (hb, pb) = a, b
    assert ha == hb
    assert len(pa) == len(pb) and all(torch.equal(p, q) for p, q in zip(pa, pb))


# ------------------------------------------------------------------- fit: start_epoch, record_every, batch_size


@pytest.mark.parametrize(
    "name, plain", [("batch_size", 4), ("batch_size", 3), ("record_every", 2), ("start_epoch", 1), ("start_epoch", 3)]
)
def test_fit_reads_a_0d_integer_tensor_or_array_as_its_int(name, plain):
    expected = run(**{name: plain})
    for value in (torch.tensor(plain), torch.tensor(plain, dtype=torch.int32), np.array(plain), np.int64(plain)):
        same_run(run(**{name: value}), expected)  # bit for bit


@pytest.mark.parametrize(
    "name, value, error",
    [
        ("batch_size", torch.tensor(True), ValueError),
        ("batch_size", torch.tensor(2.5), ValueError),
        ("batch_size", np.array(4.0), ValueError),
        ("batch_size", torch.tensor(0), ValueError),
        ("batch_size", np.array(-1), ValueError),
        ("batch_size", torch.tensor([4]), ValueError),
        ("record_every", torch.tensor(True), ValueError),
        ("record_every", np.array(2.5), ValueError),
        ("record_every", torch.tensor(0), ValueError),
        ("record_every", np.array([2]), ValueError),
        ("start_epoch", torch.tensor(True), TypeError),
        ("start_epoch", np.array(1.0), TypeError),
        ("start_epoch", torch.tensor(-1), ValueError),
        ("start_epoch", np.array(4), ValueError),
        ("start_epoch", torch.tensor([1]), TypeError),
    ],
)
def test_fit_still_refuses_what_is_no_count_in_a_tensor_or_array(name, value, error):
    model = augnet_model()
    before = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(error, match=name):
        fit(model, *data(), opt, **{"epochs": 3, "batch_size": 4, name: value})
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), before))
    assert run(**{name: torch.tensor(1)})  # the 0-d int of the same kind is taken


def test_fit_reads_several_0d_counts_at_once_bit_for_bit():
    expected = run(epochs=3, batch_size=4, record_every=2, start_epoch=1, accumulate=2)
    given = dict(epochs=np.array(3), batch_size=torch.tensor(4), record_every=np.array(2), start_epoch=torch.tensor(1),
                 accumulate=torch.tensor(2))  # fmt: skip
    same_run(run(**given), expected)


def test_fit_meta_device_of_a_0d_start_epoch_reads_nothing_it_cannot():
    with pytest.raises(ValueError, match="start_epoch is a tensor on meta"):
        run(start_epoch=torch.zeros((), dtype=torch.long, device="meta"))


# ------------------------------------------------------------------- accuracy and rank_generator


def test_accuracy_reads_a_0d_batch_size():
    model, (x, y) = mlp(), data()
    expected = accuracy(model, x, y, batch_size=3)
    for value in (torch.tensor(3), np.array(3)):
        assert accuracy(model, x, y, batch_size=value) == expected
    for bad in (torch.tensor(True), np.array(2.5), torch.tensor(0)):
        with pytest.raises(ValueError, match="batch_size"):
            accuracy(model, x, y, batch_size=bad)


def test_rank_generator_reads_a_0d_seed():
    expected = torch.rand(4, generator=rank_generator(7))
    for value in (torch.tensor(7), np.array(7), np.uint64(7)):
        g = rank_generator(value)
        assert g.initial_seed() == 7 and torch.equal(torch.rand(4, generator=g), expected)
    for bad in (torch.tensor(True), np.array(7.0), torch.tensor(-1)):
        with pytest.raises(ValueError, match="seed must be a non-negative int"):
            rank_generator(bad)


# ------------------------------------------------------------------- raw errors become named ones


def test_fit_scheduler_interval_and_amp_arrays_are_refused_naming_them():
    with pytest.raises(ValueError, match="scheduler_interval must be 'epoch' or 'step'"):
        run(scheduler_interval=np.array(["epoch", "step"]))
    with pytest.raises(ValueError, match="amp must be True, False"):
        amp_dtype(np.array([1, 2]), torch.device("cpu"))
    with pytest.raises(ValueError, match="amp must be True, False"):
        run(amp=np.array([True, False]))


@pytest.mark.parametrize("device", ["bogus", 3.5, [1]])
def test_fit_a_meta_model_with_a_device_that_is_none_is_refused_naming_it(device):
    model = nn.Linear(4, 3).to("meta")
    x, y = torch.empty(6, 4, device="meta"), torch.zeros(6, dtype=torch.long, device="meta")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="not a device"):
        fit(model, x, y, opt, 1, 2, regularizer="none", device=device)


def test_fit_loss_fn_none_is_refused_before_the_first_step():
    model = augnet_model()
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(TypeError, match="loss_fn must be callable, got NoneType: None"):
        run(loss_fn=None)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(TypeError, match="loss_fn must be callable"):
        fit(model, *data(), opt, 1, 4, loss_fn=None)
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), before))


@pytest.mark.parametrize("returned", [5, None, [("a", 1)]])
def test_fit_record_that_returns_no_dict_is_refused_naming_it(returned):
    from types import MappingProxyType

    with pytest.raises(TypeError, match="record\\(\\) must return a dict"):
        run(record=lambda: returned)
    history, _ = run(record=lambda: MappingProxyType({"extra": 1}))  # any mapping is a dict to record
    assert history["extra"] == [1] * len(history["step"])


@pytest.mark.parametrize("which", ["x", "y"])
def test_fit_and_accuracy_refuse_0d_tensors_naming_them(which):
    x, y = data()
    given = {"x": x, "y": y, which: (x if which == "x" else y).flatten()[0]}
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match=f"{which} is a 0-d tensor"):
        fit(model, given["x"], given["y"], opt, 1, 4, regularizer="none")
    with pytest.raises(ValueError, match=f"{which} is a 0-d tensor"):
        accuracy(model, given["x"], given["y"])


def test_accuracy_refuses_a_model_that_is_none_and_numpy_data_naming_them():
    x, y = data()
    with pytest.raises(TypeError, match=r"model must be a torch\.nn\.Module, got NoneType"):
        accuracy(None, x, y)
    with pytest.raises(TypeError, match=r"x must be a tensor .* torch\.as_tensor"):
        accuracy(mlp(), x.numpy(), y)
    with pytest.raises(TypeError, match=r"y must be a tensor .* torch\.as_tensor"):
        accuracy(mlp(), x, y.numpy())


# ------------------------------------------------------------------- bench: inference_cost


TINY = dict(batch=1, size=8, width=4, min_run_time=0.001, seed=0, log=None)


def captured_settings(monkeypatch, **kw):
    """The settings inference_cost hands to its measurement (nothing is built or timed)."""
    seen = []
    monkeypatch.setattr(inference_module, "_measure", lambda *args: seen.append(args) or {})
    inference_cost(**{**TINY, **kw})
    return seen[0]


@pytest.mark.parametrize(
    "copies",
    [np.array([1, 4]), torch.tensor([1, 4]), np.array([1, 4], dtype=np.uint8), [torch.tensor(1), np.array(4)],
     (np.int32(1), torch.tensor(4, dtype=torch.int16))],
)  # fmt: skip
def test_inference_cost_copies_takes_arrays_and_tensors(copies, monkeypatch):
    expected = captured_settings(monkeypatch, copies=(1, 4))
    got = captured_settings(monkeypatch, copies=copies)
    assert got == expected and type(got[0][0]) is int


def test_inference_cost_numbers_take_0d_tensors_and_arrays(monkeypatch):
    expected = captured_settings(monkeypatch, copies=(2,))
    given = dict(batch=torch.tensor(1), size=np.array(8), width=torch.tensor(4), min_run_time=np.array(0.001),
                 seed=torch.tensor(0))  # fmt: skip
    got = captured_settings(monkeypatch, copies=(2,), **given)
    assert got == expected
    assert [type(v) for v in got[1:4]] == [int, int, int] and type(got[5]) is float and type(got[6]) is int


@pytest.mark.parametrize(
    "bad, error, message",
    [
        (dict(copies=np.array([1.0, 4.0])), ValueError, "copies must be a non-empty sequence of ints >= 1"),
        (dict(copies=torch.tensor([True])), ValueError, "copies"),
        (dict(copies=np.array([], dtype=int)), ValueError, "copies"),
        (dict(copies=np.array([0, 2])), ValueError, "copies"),
        (dict(copies=np.array([[1, 2]])), TypeError, "copies must be a sequence"),
        (dict(copies=np.array(4)), TypeError, "copies must be a sequence"),
        (dict(copies=torch.zeros(2, device="meta")), ValueError, "copies is a tensor on meta"),
        (dict(batch=torch.tensor(True)), TypeError, "batch must be an int"),
        (dict(size=np.array(8.0)), TypeError, "size must be an int"),
        (dict(width=torch.tensor(0)), ValueError, "width must be >= 1"),
        (dict(seed=np.array(-1)), ValueError, "seed must be in"),
        (dict(min_run_time=torch.tensor(0.0)), ValueError, "min_run_time must be positive"),
        (dict(min_run_time=np.array([0.5])), TypeError, "min_run_time must be a number"),
    ],
)
def test_inference_cost_still_refuses_bad_arrays_and_tensors(bad, error, message, monkeypatch):
    seen = []
    monkeypatch.setattr(inference_module, "_measure", lambda *args: seen.append(args))
    with pytest.raises(error, match=message):
        inference_cost(**{**TINY, "copies": (1,), **bad})
    assert not seen
    inference_cost(**{**TINY, "copies": np.array([1])})  # the array form of the same kind is taken
    assert seen


class _Instant:
    """A stand-in for torch.utils.benchmark.Timer that runs the statement once and reports a fixed time."""

    def __init__(self, stmt, globals):
        self.fn = globals["fn"]

    def blocked_autorange(self, min_run_time):
        self.fn()
        return type("M", (), {"median": 1e-3})()


def test_inference_cost_runs_with_an_array_of_copies(monkeypatch):
    monkeypatch.setattr(inference_module, "benchmark_classes", lambda: (None, _Instant))
    result = inference_cost(copies=np.array([1, 2]), batch=torch.tensor(1), size=8, width=4, min_run_time=1e-3,
                            log=None)  # fmt: skip
    assert [r["copies"] for r in result["records"]] == [1, 2]
    assert all(type(r["copies"]) is int for r in result["records"])


# ------------------------------------------------------------------- bench: the rest


@pytest.mark.parametrize("item", [np.array([8, 16]), torch.tensor([8, 16]), torch.tensor([8])])
def test_bench_config_refuses_a_size_that_is_an_array_naming_sizes(item):
    with pytest.raises(TypeError, match="sizes must be integers"):
        BenchConfig.quick(sizes=[item]).validate()


def test_bench_config_takes_an_array_of_modes_and_refuses_an_empty_one():
    BenchConfig.quick(modes=np.array(["forward", "forward+backward"])).validate()
    with pytest.raises(ValueError, match="modes must be among"):
        BenchConfig.quick(modes=np.array([], dtype=str)).validate()


def test_bench_entry_points_name_a_bad_argument():
    with pytest.raises(TypeError, match="cfg must be a BenchConfig, got NoneType"):
        run_benchmark(None, log=None)
    with pytest.raises(TypeError, match="fn must be callable, got int: 5"):
        cpu_peak_bytes(5)
    with pytest.raises(ValueError, match="model must be one of"):
        on_paper(["h100"])


def test_compile_all_workers_reads_a_0d_int_and_refuses_others():
    assert compile_all([], workers=np.array(2)) == [] and compile_all([], workers=torch.tensor(1)) == []
    for bad, error in (("2", TypeError), (True, TypeError), (2.5, TypeError), (torch.tensor(0), ValueError)):
        with pytest.raises(error, match="workers must be"):
            compile_all([], workers=bad)
