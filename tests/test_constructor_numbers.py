"""Every number a constructor (or a public function) takes may be a 0-d tensor or a 0-d NumPy array.

The transforms read them so (``augnet._checks.number``); so do the layers, the models, Augerino, the per-instance
layer and its conditioner, the regularisers, ``param_groups``, ``LambdaSchedule`` and the training callbacks. A
0-d tensor keeps what its number keeps (the same value, as a Python number: no tensor is stored); a count takes a
0-d integer tensor as the int it holds and refuses a float or a bool one as it refuses ``2.0`` or ``True``; a value
out of range stays refused with the error of that number; a tensor on ``meta`` holds no value and is refused,
naming the argument. Also: ``number`` and ``as_values`` read 0-d tensors alike (bool and complex ones, meta).
"""

from __future__ import annotations

import math
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import augnet
from augnet._checks import as_values, number
from augnet.augerino import LieAugmentation
from augnet.instance import ConditionedAugmentationLayer, RunningStandardize, TinyConditioner
from augnet.regularizers import LambdaSchedule, param_groups, selective_regularizer
from augnet.training.callbacks import PolicyLogger, TemperatureAnnealing, WeightWarmup
from augnet.transforms import image as T

#: A folder that is never made: PolicyLogger checks it at construction and creates nothing there.
NEVER_MADE = Path(tempfile.gettempdir()) / "augnet-test-constructor-numbers-never-made"


def _images(b=4):
    return torch.rand(b, 3, 8, 8, generator=torch.Generator().manual_seed(0))


def _model(**kwargs):
    torch.manual_seed(0)
    layer = augnet.AugmentationLayer([T.Rotate(), T.TranslateX()], init_magnitude=[0.25, 0.5])
    return augnet.AugNet(nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 4)), layer, **kwargs)


def _conditioned_model():
    torch.manual_seed(0)
    layer = ConditionedAugmentationLayer([T.Rotate(), T.TranslateX()], channels=3)
    return augnet.AugNet(nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 4)), layer)


def _effects(rows):
    model = _model()
    model.measure_effects(_images(), rows=rows)
    return model.augment.layers[0].effect


def _groups(**kwargs):
    groups = param_groups(_conditioned_model(), **kwargs)
    return [{k: v for k, v in g.items() if k != "params"} for g in groups]


@dataclass
class Arg:
    """One numeric argument: ``build(value)`` uses it, ``read(built)`` is what was kept of it."""

    name: str  # what the messages name
    build: object
    read: object
    good: float | int
    bad: float | int  # a number of the right kind, out of range: refused
    count: bool = False  # an int argument
    checked: bool = True  # whether the argument is checked at all (a value out of range is refused)


def _same(x):
    return x


ARGS = {
    "AugmentationLayer.temperature": Arg(
        "temperature", lambda v: augnet.AugmentationLayer([T.Rotate()], temperature=v), lambda m: m.temperature,
        0.5, 0.0),
    "AugmentationLayer.init_magnitude[item]": Arg(
        "init_magnitude", lambda v: augnet.AugmentationLayer([T.Rotate(), T.ShearX()], init_magnitude=[v, 0.5]),
        lambda m: m.raw_magnitudes.tolist(), 0.25, 1.5),
    "AugmentationLayer.calibrate.points": Arg(
        "points", lambda v: augnet.AugmentationLayer([T.Rotate()]).calibrate(_images(), points=v),
        lambda c: c, 3, 1, count=True),
    "ConditionedAugmentationLayer.temperature": Arg(
        "temperature", lambda v: ConditionedAugmentationLayer([T.Rotate()], channels=3, temperature=v),
        lambda m: m.temperature, 0.5, 0.0),
    "ConditionedAugmentationLayer.channels": Arg(
        "channels", lambda v: ConditionedAugmentationLayer([T.Rotate()], channels=v),
        lambda m: (m.conditioner.channels, m.conditioner.features[0].in_channels), 3, 0, count=True),
    "ConditionedAugmentationLayer.hidden": Arg(
        "hidden", lambda v: ConditionedAugmentationLayer([T.Rotate()], channels=3, hidden=v),
        lambda m: m.conditioner.head.in_features, 8, 0, count=True),
    "ConditionedAugmentationLayer.kernel_size": Arg(
        "kernel_size", lambda v: ConditionedAugmentationLayer([T.Rotate()], channels=3, kernel_size=v),
        lambda m: m.conditioner.features[0].kernel_size, 1, 2, count=True),
    "ConditionedAugmentationLayer.hidden(conditioner given)": Arg(
        "hidden", lambda v: ConditionedAugmentationLayer([T.Rotate()], conditioner=nn.Flatten(), hidden=v),
        lambda m: type(m.conditioner), 16, 8, count=True),
    "TinyConditioner.channels": Arg(
        "channels", lambda v: TinyConditioner(v, 4), lambda g: g.channels, 3, 0, count=True),
    "TinyConditioner.outputs": Arg(
        "outputs", lambda v: TinyConditioner(3, v), lambda g: g.head.out_features, 4, 0, count=True),
    "TinyConditioner.hidden": Arg(
        "hidden", lambda v: TinyConditioner(3, 4, hidden=v), lambda g: g.head.in_features, 8, 0, count=True),
    "TinyConditioner.ndim": Arg(
        "ndim", lambda v: TinyConditioner(3, 4, ndim=v), lambda g: (g.ndim, type(g.features[0])), 3, 5, count=True),
    "TinyConditioner.kernel_size": Arg(
        "kernel_size", lambda v: TinyConditioner(3, 4, kernel_size=v), lambda g: g.features[0].kernel_size, 1, 2,
        count=True),
    "TinyConditioner.momentum": Arg(
        "momentum", lambda v: TinyConditioner(3, 4, momentum=v), lambda g: g.norm.momentum, 0.5, 1.5),
    "RunningStandardize.features": Arg(
        "features", lambda v: RunningStandardize(v), lambda n: n.running_mean.shape, 4, 0, count=True),
    "RunningStandardize.momentum": Arg(
        "momentum", lambda v: RunningStandardize(4, momentum=v), lambda n: n.momentum, 0.5, 0.0),
    "RunningStandardize.eps": Arg("eps", lambda v: RunningStandardize(4, eps=v), lambda n: n.eps, 0.25, 0.0),
    "AugNet.train_copies": Arg(
        "train_copies", lambda v: _model(train_copies=v), lambda m: m.train_copies, 2, 0, count=True),
    "AugNet.eval_copies": Arg(
        "eval_copies", lambda v: _model(eval_copies=v), lambda m: m.eval_copies, 2, 0, count=True),
    "AugNet.effect_every": Arg(
        "effect_every", lambda v: _model(effect_every=v), lambda m: m.effect_every, 5, -1, count=True),
    "AugNet.measure_effects.rows": Arg("rows", _effects, lambda e: e.tolist(), 3, 0, count=True),
    "Augerino.init_width": Arg(
        "init_width", lambda v: augnet.Augerino(nn.Flatten(), init_width=v), lambda m: m.augment.widths.tolist(),
        0.25, 0.0),
    "Augerino.init_width[item]": Arg(
        "init_width", lambda v: LieAugmentation([v, 0.5, 0.5, 0.5, 0.5, 0.5]), lambda m: m.widths.tolist(),
        0.25, -0.5),
    "Augerino.train_copies": Arg(
        "train_copies", lambda v: augnet.Augerino(nn.Flatten(), train_copies=v), lambda m: m.train_copies, 2, 0,
        count=True),
    "Augerino.eval_copies": Arg(
        "eval_copies", lambda v: augnet.Augerino(nn.Flatten(), eval_copies=v), lambda m: m.eval_copies, 2, 0,
        count=True),
    "selective_regularizer.saturation": Arg(
        "saturation", lambda v: selective_regularizer(augnet.AugmentationLayer([T.Rotate()]), saturation=v),
        lambda r: r.item(), 0.25, 0.0),
    "LambdaSchedule.values[item]": Arg(
        "values", lambda v: LambdaSchedule((v, 0.25), (3,)), lambda s: s.values, 0.5, -0.5),
    "LambdaSchedule.milestones[item]": Arg(
        "milestones", lambda v: LambdaSchedule((0.5, 0.25), (v,)), lambda s: s.milestones, 3, -1, count=True),
    "LambdaSchedule.__call__.epoch": Arg(
        "epoch", lambda v: LambdaSchedule((0.5, 0.25), (3,))(v), _same, 3, -1),
    "TemperatureAnnealing.start": Arg(
        "start", lambda v: TemperatureAnnealing(start=v), lambda a: (a.start, a.temperature(1, 3)), 0.5, 0.0),
    "TemperatureAnnealing.end": Arg(
        "end", lambda v: TemperatureAnnealing(end=v), lambda a: (a.end, a.temperature(1, 3)), 0.25, 0.0),
    "TemperatureAnnealing.epochs": Arg(
        "epochs", lambda v: TemperatureAnnealing(epochs=v), lambda a: (a.epochs, a.temperature(1, 9)), 4, 0,
        count=True),
    "TemperatureAnnealing.temperature.epoch": Arg(
        "epoch", lambda v: TemperatureAnnealing().temperature(v, 4), _same, 2, -1, count=True, checked=False),
    "WeightWarmup.epochs": Arg("epochs", lambda v: WeightWarmup(v), lambda w: w.epochs, 2, -1, count=True),
    "PolicyLogger.every": Arg(
        "every", lambda v: PolicyLogger(NEVER_MADE, every=v), lambda p: p.every, 2, 0, count=True),
    "PolicyLogger.size[item]": Arg(
        "size", lambda v: PolicyLogger(NEVER_MADE, size=(v, 8)), lambda p: p.size, 8, 0, count=True),
    **{f"param_groups.{name}": Arg(name, lambda v, name=name: _groups(**{name: v}), _same, 0.25, -1.0)
       for name in ("weight_decay", "aug_weight_decay", "magnitude_weight_decay", "aug_lr", "conditioner_lr",
                    "conditioner_weight_decay", "weight_lr")},
}  # fmt: skip


def _built(arg: Arg, value):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return arg.build(value)


def _kept(arg: Arg, value):
    return arg.read(_built(arg, value))


def _refusal(arg: Arg, value) -> Exception:
    with pytest.raises((TypeError, ValueError)) as info:
        _built(arg, value)
    return info.value


def _outcome(arg: Arg, value) -> tuple:
    """``("raised", type, message)`` or ``("kept", what was kept, "")``."""
    try:
        kept = _kept(arg, value)
    except (TypeError, ValueError) as err:
        return "raised", type(err), str(err)
    return "kept", kept, ""


def _as_tensors(value, count: bool) -> list:
    """The 0-d tensors and arrays holding ``value``: integer ones for a count, floating ones otherwise."""
    if count:
        return [torch.tensor(value), torch.tensor(value, dtype=torch.int32), np.array(value), np.array(value, np.int16)]
    return [torch.tensor(value, dtype=torch.float64), torch.tensor(value, dtype=torch.float32), np.array(value),
            torch.tensor(value, dtype=torch.float64, requires_grad=True)]  # fmt: skip


def _types(x):
    """The types of what was kept, through tuples and lists: a tensor kept where a number was would show here."""
    return [_types(v) for v in x] if isinstance(x, (tuple, list)) else type(x)


@pytest.mark.parametrize("key", list(ARGS))
def test_a_0d_tensor_or_array_keeps_what_its_number_keeps(key):
    arg = ARGS[key]
    expected = _kept(arg, arg.good)
    for given in _as_tensors(arg.good, arg.count):
        kept = _kept(arg, given)
        if isinstance(expected, torch.Tensor):
            assert torch.equal(kept, expected), (given, kept, expected)
        else:
            assert kept == expected and _types(kept) == _types(expected), (given, kept, expected)


def test_what_a_constructor_keeps_from_a_0d_tensor_holds_no_tensor():
    checks = [
        augnet.AugmentationLayer([T.Rotate()], temperature=torch.tensor(0.5)).temperature,
        _model(train_copies=torch.tensor(2)).train_copies,
        TemperatureAnnealing(start=torch.tensor(0.5), epochs=np.array(3)).start,
        TemperatureAnnealing(start=torch.tensor(0.5), epochs=np.array(3)).epochs,
        RunningStandardize(4, eps=torch.tensor(0.25)).eps,
        TinyConditioner(3, 4, ndim=torch.tensor(3)).ndim,
        PolicyLogger(NEVER_MADE, every=torch.tensor(3), size=torch.tensor([8, 8])).size,
        LambdaSchedule(torch.tensor([0.5, 0.25]), np.array([3])).values,
    ]
    assert [_types(c) for c in checks] == [float, int, float, int, float, int, [int, int], [float, float]]
    assert PolicyLogger(NEVER_MADE, size=np.array([8, 6])).size == (8, 6)
    assert LambdaSchedule(torch.tensor([0.5, 0.25]), torch.tensor([3])).milestones == [3]


@pytest.mark.parametrize("key", [k for k, a in ARGS.items() if a.checked])
def test_a_0d_tensor_out_of_range_is_refused_as_its_number_is(key):
    arg = ARGS[key]
    by_number = _refusal(arg, arg.bad)
    for given in _as_tensors(arg.bad, arg.count):
        by_tensor = _refusal(arg, given)
        assert type(by_tensor) is type(by_number), (given, by_tensor, by_number)
        assert arg.name in str(by_tensor), str(by_tensor)


@pytest.mark.parametrize("key", [k for k, a in ARGS.items() if a.checked])
def test_a_bool_tensor_is_refused_as_a_bool_is(key):
    arg = ARGS[key]
    by_bool = _refusal(arg, True)
    for given in (torch.tensor(True), np.array(True)):
        by_tensor = _refusal(arg, given)
        assert type(by_tensor) is type(by_bool) and arg.name in str(by_tensor), str(by_tensor)


@pytest.mark.parametrize("key", [k for k, a in ARGS.items() if a.count and a.checked])
def test_a_count_takes_a_floating_tensor_of_an_integral_value_as_it_takes_the_float(key):
    # Refused as 2.0 is (a count is an int); where the float is taken (hidden with a conditioner of one's own,
    # which only has to equal the default), the tensor is taken alike.
    arg = ARGS[key]
    by_float = _outcome(arg, float(arg.good))
    for given in (torch.tensor(float(arg.good)), np.array(float(arg.good))):
        by_tensor = _outcome(arg, given)
        assert by_tensor[:2] == by_float[:2], (given, by_tensor, by_float)
        assert by_tensor[0] == "kept" or arg.name in by_tensor[2], by_tensor


def test_nearly_every_count_refuses_a_float():
    counts = [key for key, a in ARGS.items() if a.count and a.checked]
    taken = [key for key in counts if _outcome(ARGS[key], float(ARGS[key].good))[0] == "kept"]
    # As before: hidden need only equal the default 16 when a conditioner is given, and ndim 3 or 4.
    assert taken == ["ConditionedAugmentationLayer.hidden(conditioner given)", "TinyConditioner.ndim"]


@pytest.mark.parametrize("key", [k for k, a in ARGS.items() if a.checked])
def test_what_is_not_one_number_stays_refused_naming_the_argument(key):
    arg = ARGS[key]
    for given in (torch.tensor([arg.good, arg.good]), torch.tensor(complex(arg.good)), "1"):
        assert arg.name in str(_refusal(arg, given)), given


@pytest.mark.parametrize("key", list(ARGS))
def test_a_0d_tensor_on_meta_is_refused_naming_the_argument(key):
    arg = ARGS[key]
    meta = torch.tensor(arg.good, device="meta")
    with pytest.raises(ValueError, match=rf"\b{arg.name} is a tensor on meta, which holds no value"):
        _built(arg, meta)


def test_a_whole_meta_tensor_of_values_is_refused_naming_the_argument():
    with pytest.raises(ValueError, match="init_width is a tensor on meta, which holds no values"):
        LieAugmentation(torch.full((6,), 0.1, device="meta"))
    with pytest.raises(ValueError, match="values is a tensor on meta, which holds no values"):
        LambdaSchedule(torch.tensor([0.5, 0.25], device="meta"), (3,))
    with pytest.raises(ValueError, match="init_magnitude is a tensor on meta, which holds no values"):
        augnet.AugmentationLayer([T.Rotate()], init_magnitude=torch.tensor([0.5], device="meta"))


def test_a_layer_at_a_tensor_temperature_gives_the_weights_of_the_number():
    a = augnet.AugmentationLayer([T.Rotate(), T.ShearX()], temperature=0.25)
    b = augnet.AugmentationLayer([T.Rotate(), T.ShearX()], temperature=torch.tensor(0.25))
    with torch.no_grad():
        a.weight_logits.copy_(torch.tensor([0.3, -0.2]))
        b.weight_logits.copy_(torch.tensor([0.3, -0.2]))
    assert torch.equal(a.weights, b.weights) and a.extra_repr() == b.extra_repr()
    assert b.get_extra_state().dtype == torch.int64  # the state of a float, as before


def test_a_layer_refuses_a_temperature_whose_inverse_overflows_float32_given_as_a_tensor():
    with pytest.raises(ValueError, match=r"temperature .* is too small"):
        augnet.AugmentationLayer([T.Rotate()], temperature=torch.tensor(1e-39, dtype=torch.float64))


# ------------------------------------------------------------------ number and as_values read alike


@pytest.mark.parametrize(
    "t", [torch.tensor(0.5), torch.tensor(3), torch.tensor(True), torch.tensor(1 + 2j), np.array(0.5), np.array(True)],
    ids=["float", "int", "bool", "complex", "float-array", "bool-array"],
)  # fmt: skip
def test_number_and_as_values_give_a_0d_tensors_value_in_pythons_type(t):
    assert number("x", t) == as_values(t) == t.item()
    assert type(number("x", t)) is type(as_values(t)) is type(t.item())


def test_a_bool_tensor_is_read_as_the_bool_a_bool_array_gives():
    assert number("x", torch.tensor(True)) is True is number("x", np.array(True))
    assert number("x", torch.tensor(False)) is False


def test_number_and_as_values_refuse_meta_alike_naming_the_argument():
    with pytest.raises(ValueError, match=r"^x is a tensor on meta, which holds no value: give a number$"):
        number("x", torch.tensor(0.5, device="meta"))
    with pytest.raises(ValueError, match=r"^x is a tensor on meta, which holds no values: give numbers$"):
        as_values(torch.tensor([0.5, 1.0], device="meta"), "x")
    with pytest.raises(ValueError, match=r"^value is a tensor on meta"):  # a caller that names nothing
        as_values(torch.tensor(0.5, device="meta"))


def test_number_reads_one_value_and_as_values_any_shape():
    several = torch.tensor([0.5, 1.0])
    assert number("x", several) is several  # not one number: given back, for the caller to refuse
    assert as_values(several) == [0.5, 1.0]
    assert number("x", np.float32(0.5)) is not None and type(number("x", np.float32(0.5))) is np.float32
    assert type(as_values(np.float32(0.5))) is float
    assert number("x", "0.5") == as_values("0.5") == "0.5"
    assert math.isnan(number("x", torch.tensor(math.nan)))
