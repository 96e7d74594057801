"""One rule each, wherever the same kind of argument is taken.

- Numbers: every transform argument that takes a number (each constructor argument, an item of ``BandStop``'s
  band or of ``ChannelsSymmetry``'s pairs, a magnitude, a copy count) refuses what is not a number with
  ``NotANumberError`` (a TypeError and a ValueError), naming the argument.
- Labels: ``augnet.experiments.compare``, the probes' label reader and ``fit`` / ``accuracy`` take class labels of
  every integer dtype torch has and read them as int64 (``augnet._labels``): each run equals the int64 run exactly.
- Copy counts at call time (a transform's, a layer's, a model's forward, ``aggregate``, ``stratified_copies``) take
  a 0-d integer tensor or array as the int it holds, as the constructors do; a Python int takes its old path
  (no value read, no synchronisation, ``torch.compile`` traces it).
"""

from __future__ import annotations

import inspect
import math
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import gen
from syncs import SyncRecorder
from torch import nn
from transform_cases import POS

import augnet
from augnet import probes
from augnet._checks import NotANumberError
from augnet._labels import class_labels
from augnet.experiments import compare
from augnet.model import aggregate
from augnet.training import accuracy, fit
from augnet.transforms import audio as A
from augnet.transforms import image as T
from augnet.transforms import signal as S
from augnet.transforms import stratified_copies
from augnet.transforms.base import SignalTransform, Transform

# --------------------------------------------------------------------------- numbers

#: The arguments a transform needs, which have no default.
REQUIRED = {"sfreq": 100.0, "sample_rate": 8000, "pairs": [(0, 1)], "sensor_positions": POS}


def _public_transforms() -> list[type]:
    classes = [getattr(module, name) for module in (T, S, A) for name in module.__all__]
    return [c for c in classes if isinstance(c, type) and issubclass(c, Transform) and c is not SignalTransform]


def _takes_a_number(param: inspect.Parameter) -> bool:
    default, note = param.default, str(param.annotation)
    if isinstance(default, bool) or note == "bool":
        return False
    return isinstance(default, (int, float)) or note in ("float", "int", "float | None", "int | None")


def _numeric_arguments() -> list[tuple[type, str, bool]]:
    """``(class, argument, whether None is its default)`` for every constructor argument taking one number."""
    found = []
    for cls in _public_transforms():
        for name, param in inspect.signature(cls.__init__).parameters.items():
            if name != "self" and _takes_a_number(param):
                found.append((cls, name, param.default is None))
    return found


NUMERIC = _numeric_arguments()

#: What is not a number: each refused, by every argument that takes one.
NOT_NUMBERS = {
    "str": "3", "None": None, "bool": True, "numpy-bool": np.bool_(True), "complex": 1j, "list": [3.0],
    "bool-tensor": torch.tensor(True), "complex-tensor": torch.tensor(1 + 1j),
    "tensor-of-two": torch.tensor([1.0, 2.0]), "array-of-one": np.array([3.0]), "bytes": b"3",
}  # fmt: skip


def _build(cls, **kwargs):
    required = {k: v for k, v in REQUIRED.items() if k in inspect.signature(cls.__init__).parameters}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # an angle above a full turn warns
        return cls(**{**required, **kwargs})


def test_the_numeric_arguments_found_include_every_kind_of_transform():
    # The parametrisation below is found by introspection: it must find what the catalogue holds.
    names = {f"{cls.__name__}.{name}" for cls, name, _ in NUMERIC}
    assert {"AddNoise.min_snr_db", "Rotate.max_angle", "Solarize.min_threshold", "Posterize.max_bits",
            "BandStop.sfreq", "BandStop.edge", "LowPass.sample_rate", "LowPass.min_cutoff", "SensorsRotationX.order",
            "SensorsRotationZ.n_terms", "ChannelsSymmetry.temperature", "TimeMaskSpec.edge"} <= names  # fmt: skip
    assert {cls for cls, _, _ in NUMERIC} == set(_public_transforms())  # each takes one number at least
    assert len(NUMERIC) >= 60


# Every argument with every non-number, but None where None is the argument's default (it is then taken).
REFUSALS = [(cls, name, bad) for cls, name, optional in NUMERIC for kind, bad in NOT_NUMBERS.items()
            if not (kind == "None" and optional)]  # fmt: skip
REFUSAL_IDS = [f"{cls.__name__}.{name}-{kind}" for cls, name, optional in NUMERIC for kind in NOT_NUMBERS
               if not (kind == "None" and optional)]  # fmt: skip


@pytest.mark.parametrize("cls, name, bad", REFUSALS, ids=REFUSAL_IDS)
def test_every_numeric_constructor_argument_refuses_a_non_number_alike(cls, name, bad):
    with pytest.raises(NotANumberError, match=rf"^{name} .*(must be|is required)") as info:
        _build(cls, **{name: bad})
    assert isinstance(info.value, TypeError) and isinstance(info.value, ValueError)


@pytest.mark.parametrize("bad", ["3", None, True, 1j, torch.tensor(True), np.array([1.0])], ids=str)
def test_the_numbers_inside_a_band_or_a_channel_pair_are_refused_alike(bad):
    with pytest.raises(NotANumberError, match=r"^band must be a \(low, high\) pair of frequencies in Hz"):
        S.BandStop(100.0, band=(10.0, bad))
    with pytest.raises(NotANumberError, match=r"^pairs must hold integer channel indices"):
        S.ChannelsSymmetry([(0, bad)])


def test_a_number_of_the_wrong_kind_stays_a_plain_type_error_and_a_0d_tensor_is_a_number():
    # A number that is not whole is not "not a number": the TypeError (or ValueError) it was.
    for refuse, error in ((lambda: S.ChannelsSymmetry([(0, 1.5)]), TypeError), (lambda: T.Posterize(4.5), TypeError),
                          (lambda: A.AddNoise(min_snr_db=math.nan), ValueError)):  # fmt: skip
        with pytest.raises(error) as info:
            refuse()
        assert not isinstance(info.value, NotANumberError)
    assert S.ChannelsSymmetry([(torch.tensor(0), np.int64(1))]).pairs == [(0, 1)]
    assert S.BandStop(100.0, band=(torch.tensor(10.0), 20)).band == (10.0, 20.0)
    assert A.AddNoise(min_snr_db=torch.tensor(3.0)).min_snr_db == 3.0


@pytest.mark.parametrize("bad", ["0.5", None, True, 1j, [0.5], np.array([0.5])], ids=str)
def test_a_magnitude_that_is_not_a_number_is_refused_alike(bad):
    x = torch.rand(2, 3, 8, 8)
    for call in (lambda: T.Rotate()(x, bad), lambda: T.Rotate().draw_params(x, bad)):
        with pytest.raises(NotANumberError, match="Rotate: magnitude must be a float or a tensor"):
            call()


# --------------------------------------------------------------------------- labels

#: Every integer dtype of the installed torch (uint16, uint32, uint64 since 2.3).
DTYPES = [getattr(torch, n) for n in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
          if hasattr(torch, n)]  # fmt: skip
IDS = [str(d).removeprefix("torch.") for d in DTYPES]


def test_the_shared_rule_holds_every_integer_dtype_of_this_torch():
    from augnet._labels import INTEGER_DTYPES

    assert set(INTEGER_DTYPES) == set(DTYPES) and len(DTYPES) == 8  # torch 2.14 has all eight


def same(a, b) -> bool:
    """Equal exactly, through dicts, lists and tensors (NaN equal to NaN)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a.nan_to_num(), b.nan_to_num())
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == b


def _images(n=24, seed=0):
    x = torch.rand(n, 1, 8, 8, generator=gen(seed))
    y = (x[:, 0, :, :4].mean((1, 2)) > x[:, 0, :, 4:].mean((1, 2))).long() + (x[:, 0, 0, 0] > 0.8).long()
    return x, y  # three classes


def _trunk():
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 3))


@pytest.fixture(scope="module")
def compared():
    def run(dtype):
        (x, y), (xt, yt) = _images(), _images(seed=1)
        res = compare(_trunk, (x, y.to(dtype)), (xt, yt.to(dtype)), ["none"], epochs=1, batch_size=8, seeds=[0],
                      progress=False)  # fmt: skip
        return [{k: v for k, v in r.items() if "seconds" not in k} for r in res.records]

    return run, run(torch.int64)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_compare_takes_every_integer_dtype_and_runs_as_with_int64(compared, dtype):
    run, base = compared
    assert same(run(dtype), base)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_the_probes_label_reader_takes_every_integer_dtype_as_int64(dtype):
    x, y = _images()
    got = class_labels(y.to(dtype), len(y), "y")
    assert got.dtype == torch.int64 and torch.equal(got, y)
    z = torch.randn(len(y), 5, generator=gen(1))
    zt = z + 0.3 * torch.randn(len(y), 5, generator=gen(2))
    base = probes.similarity_change(z, zt, y, generator=gen(3))
    assert same(probes.similarity_change(z, zt, y.to(dtype), generator=gen(3)), base)
    torch.manual_seed(0)
    net = _trunk().eval()
    with torch.no_grad():
        curve = probes.accuracy_curve(net, x, y.to(dtype), T.Rotate(), [0.0, 1.0], seed=6)
        assert same(curve, probes.accuracy_curve(net, x, y, T.Rotate(), [0.0, 1.0], seed=6))


def _fit(dtype, loss_fn=F.nll_loss):
    x, y = _images()
    torch.manual_seed(0)
    model = augnet.AugNet(_trunk(), augnet.AugmentationLayer([T.Rotate(), T.TranslateX()], init_magnitude=0.3))
    opt = torch.optim.Adam(augnet.param_groups(model), lr=0.01)
    history = fit(model, x, y.to(dtype), opt, epochs=2, batch_size=8, generator=gen(4), loss_fn=loss_fn,
                  record_every=1)  # fmt: skip
    acc = accuracy(model, x, y.to(dtype), batch_size=10, generator=gen(5))
    return history, [p.detach().clone() for p in model.parameters()], acc


@pytest.fixture(scope="module")
def fitted():
    return _fit(torch.int64)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_fit_and_accuracy_take_every_integer_dtype_and_train_as_with_int64(fitted, dtype):
    history, params, acc = _fit(dtype)
    assert same(history, fitted[0]) and acc == fitted[2]
    assert all(torch.equal(p, q) for p, q in zip(params, fitted[1], strict=True))


@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint64], ids=["uint16", "uint64"])
def test_fit_gives_a_loss_of_one_hot_rows_int64_targets(dtype):
    def one_hot_loss(out, y):  # F.one_hot takes int64 alone
        return -(F.one_hot(y, 3) * out).sum(1).mean()

    history, params, _ = _fit(dtype, one_hot_loss)
    base_history, base_params, _ = _fit(torch.int64, one_hot_loss)
    assert same(history, base_history) and all(torch.equal(p, q) for p, q in zip(params, base_params, strict=True))


def test_labels_past_int64_are_refused_alike_by_compare_and_the_reader():
    x, _ = _images(4)
    y = torch.tensor([0, 1, 2**63, 0], dtype=torch.uint64)
    with pytest.raises(ValueError, match=r"^train_data: labels holds labels past int64's range"):
        compare(_trunk, (x, y), (x, y), ["none"], epochs=1, seeds=[0], progress=False)
    with pytest.raises(ValueError, match=r"^y holds labels past int64's range"):
        class_labels(y)
    with pytest.raises(ValueError, match=r"^train_data: labels must be class indices >= 0, got -1"):
        compare(_trunk, (x, torch.tensor([0, 1, -1, 0], dtype=torch.int8)), (x, y), ["none"], progress=False)


# --------------------------------------------------------------------------- copy counts at call time

#: The count 2 in every form a count takes.
TWOS = {
    "int": 2, "numpy-int64": np.int64(2), "tensor": torch.tensor(2),
    "int32-tensor": torch.tensor(2, dtype=torch.int32), "uint8-tensor": torch.tensor(2, dtype=torch.uint8),
    "0d-array": np.array(2), "0d-int16-array": np.array(2, np.int16),
}  # fmt: skip


def _model():
    torch.manual_seed(0)
    layer = augnet.AugmentationLayer([T.Rotate(), T.Brightness()], init_magnitude=0.3)
    return augnet.AugNet(nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 4)), layer)


def _every_use(copies):
    """What each call that takes a count gives for ``copies`` (the same seed each)."""
    x, model = torch.rand(3, 3, 8, 8, generator=gen(0)), _model()
    layer = model.augment.layers[0]
    out = {
        "AugNet": model(x, copies=copies, generator=gen(1)),
        "layer": layer(x, copies=copies, generator=gen(1)),
        "module": model.augment(x, copies=copies, generator=gen(1)),
        "transform": T.Rotate()(x, 0.5, generator=gen(1), copies=copies),
        "draw_params": T.Rotate().draw_params(x, 0.5, generator=gen(1), copies=copies)["angle"],
        "aggregate": aggregate(torch.randn(6, 4, generator=gen(2)), copies),
        "augerino": augnet.Augerino(nn.Flatten(), init_width=0.2)(x, copies=copies, generator=gen(1)),
    }
    with stratified_copies(copies):
        out["stratified"] = T.Rotate().draw_params(x, 1.0, generator=gen(1), copies=2)["angle"]
    return out


@pytest.mark.parametrize("copies", list(TWOS.values()), ids=list(TWOS))
def test_every_call_takes_a_0d_integer_count_as_the_int_it_holds(copies):
    got, base = _every_use(copies), _every_use(2)
    assert got.keys() == base.keys()
    for key in base:
        assert torch.equal(got[key], base[key]), key


@pytest.mark.parametrize(
    "bad, error, match",
    [
        (torch.tensor(2.0), TypeError, r"copies must be an int, got a Tensor of dtype torch\.float32 and shape \(\)"),
        (np.array(2.0), TypeError, r"copies must be an int, got a ndarray of dtype float64"),
        (2.0, TypeError, "copies must be an int, got float"),
        (torch.tensor(True), NotANumberError, "copies must be an int, got a Tensor of dtype torch.bool"),
        (torch.tensor([2, 2]), NotANumberError, r"copies must be an int, got a Tensor .* shape \(2,\)"),
        ("2", NotANumberError, "copies must be an int, got str"),
        (True, NotANumberError, "copies must be an int, got bool"),
        (torch.tensor(0), ValueError, "copies must be >= 1, got 0"),
        (np.array(-1), ValueError, "copies must be >= 1, got -1"),
        (torch.tensor(2, device="meta"), ValueError, "copies is a tensor on meta, which holds no value"),
    ],
    ids=["float-tensor", "float-array", "float", "bool-tensor", "tensor-of-two", "str", "bool", "zero-tensor",
         "negative-array", "meta"],
)  # fmt: skip
def test_a_count_that_is_not_an_int_is_refused_before_the_model_changes(bad, error, match):
    model, x = _model().train(), torch.rand(3, 3, 8, 8)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    for call in (lambda: model(x, copies=bad), lambda: aggregate(torch.randn(6, 4), bad),
                 lambda: T.Rotate()(x, 0.5, copies=bad)):  # fmt: skip
        with pytest.raises(error, match=match) as info:
            call()
        assert (error is NotANumberError) == isinstance(info.value, NotANumberError)
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())


def test_an_int_count_takes_its_old_path_reading_nothing(monkeypatch):
    # The ordinary path: a type check; the reader of tensors and arrays is not called at all.
    def unexpected(*args):
        raise AssertionError("an int count was read as a tensor")

    monkeypatch.setattr("augnet.transforms._checks_copies.number", unexpected)
    for copies in (2, np.int64(2)):
        _every_use(copies)
    model = _model().to("meta").eval()
    with torch.no_grad(), SyncRecorder() as rec:
        model(torch.rand(3, 3, 8, 8, device="meta"), copies=2)
        model(torch.rand(3, 3, 8, 8, device="meta"), copies=np.int64(3))
    assert not rec.syncs, rec.summary()


def test_an_int_count_compiles_in_one_graph():
    model = _model().eval()
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    x = torch.rand(3, 3, 8, 8, generator=gen(0))
    torch.manual_seed(1)
    eager = model(x, copies=3)
    torch.manual_seed(1)
    torch.testing.assert_close(compiled(x, copies=3), eager)
