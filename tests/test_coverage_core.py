"""The branches the rest of the suite leaves unexercised in the library's core: the layers (``augnet.layers``), the
model (``augnet.model``), the equivariance loss, the per-instance layer, policy files (``augnet.policy`` and its
checks), calibration, fit's checks and its callbacks. Each test reaches its branch as a user's call would, and pins
what it should do (an exact value or the error naming the argument).

Two branches run only inside ``torch.compile``'s tracing, where coverage cannot see them (dynamo interprets those
frames, it does not run them): ``check_generator``'s refusal of a generator while compiling and ``AugNet.forward``'s
compiled path. ``tests/test_compile.py`` runs both (``test_a_generator_under_compile_is_a_clear_error`` and every
fullgraph comparison).
"""

from __future__ import annotations

import copy
import json
import math
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import augnet
from augnet import policy as P
from augnet._policy_checks import naming_path
from augnet.instance import ConditionedAugmentationLayer, RunningStandardize, TinyConditioner, conditioner_entropy
from augnet.losses import EquivarianceLoss
from augnet.model import aggregate
from augnet.training import Callback, NonFiniteLossError, PolicyLogger, TemperatureAnnealing, WeightWarmup, fit
from augnet.transforms import image as T
from augnet.transforms import signal as S
from augnet.transforms.base import Range, Transform
from tests.helpers import gen


class Jitter(Transform):
    """A transform of one's own on (B, F) rows (tabular features): adds magnitude-scaled noise."""

    input_ndim = 2

    def sample(self, x, magnitude, generator=None, copies=1):
        n = x.shape[0] * copies
        m = self.check_magnitude(magnitude, x, n)
        m = m.reshape(-1, 1) if m.dim() else m
        return {"noise": m * torch.randn(n, x.shape[1], generator=generator, dtype=x.dtype)}

    def apply_transform(self, x, params):
        return x.repeat(params["noise"].shape[0] // x.shape[0], 1) + params["noise"]

    def natural_range(self, magnitude, size=None):
        return Range(-magnitude, magnitude, "")


def _model(seed: int = 0) -> augnet.AugNet:
    torch.manual_seed(seed)
    return augnet.AugNet(nn.Sequential(nn.Flatten(), nn.Linear(48, 2)), augnet.AugmentationLayer([T.Rotate()]))


def _data():
    g = gen(1)
    return torch.rand(8, 3, 4, 4, generator=g), torch.randint(0, 2, (8,), generator=g)


# ----------------------------------------------------------------------------------------------------------- layers


def test_transforms_of_different_ranks_are_refused_naming_which_takes_which():
    # The message gave the ranks alone ([3, 4]): which transform to move to another layer was left to guess.
    with pytest.raises(ValueError, match=r"different ranks \(3-D: GaussianNoise; 4-D: Rotate, Brightness\)"):
        augnet.AugmentationLayer([T.Rotate(), S.GaussianNoise(), T.Brightness()])


def test_an_uncalibrated_layers_caps_are_ones_in_at_least_float32():
    layer = augnet.AugmentationLayer([T.Rotate(), T.Brightness(), T.ShearX()])
    assert torch.equal(layer.magnitude_caps, torch.ones(3))
    assert torch.equal(layer.half().magnitude_caps, torch.ones(3))  # widened, as the magnitudes are


def test_a_calibrated_state_loads_into_a_calibrated_layer_in_place():
    x = torch.rand(4, 3, 8, 8, generator=gen(2))
    a, b = (augnet.AugmentationLayer([T.Rotate(), T.Brightness()]) for _ in range(2))
    a.calibrate(x, points=5)
    b.calibrate(x * 0.5, points=5)
    held = b.calibration
    b.load_state_dict(a.state_dict())
    assert b.calibration is held and torch.equal(held, a.calibration)  # the same shape: copied into the buffer
    assert torch.equal(b.raw_magnitudes, a.raw_magnitudes) and torch.equal(b.magnitudes, a.magnitudes)


@pytest.mark.parametrize("calibrated_before", [False, True])
@pytest.mark.parametrize("layer_dtype", [torch.float32, torch.float64])
def test_a_loaded_calibration_takes_the_layers_dtype_calibrated_before_or_not(calibrated_before, layer_dtype):
    # A float64 state loaded into a never-calibrated float32 layer left it a float64 calibration (and a float32 state
    # a float32 one in a float64 layer), while a calibrated layer kept its own dtype: now always the layer's.
    x = torch.rand(4, 3, 8, 8, generator=gen(3))
    source = augnet.AugmentationLayer([T.Rotate(), T.Brightness()])
    source.calibrate(x, points=4)
    state = source.double().state_dict() if layer_dtype == torch.float32 else source.state_dict()
    layer = augnet.AugmentationLayer([T.Rotate(), T.Brightness()]).to(layer_dtype)
    if calibrated_before:
        layer.calibrate(x, points=3)  # another number of points: a new buffer of the state's shape
        layer.to(layer_dtype)
    layer.load_state_dict(state)
    assert layer.calibration.dtype == layer_dtype and layer.calibration.shape == (2, 4)
    assert torch.equal(layer.calibration, state["calibration"].to(layer_dtype))


def test_rows_of_features_leave_no_spatial_size_and_a_policy_without_pixels():
    layer = augnet.AugmentationLayer([Jitter()], init_magnitude=0.25)
    x = torch.randn(4, 5, generator=gen(4))
    out = layer(x, copies=2, generator=gen(5))
    assert out.shape == (8, 5) and layer.last_size is None  # (B, F) has no size beyond the features
    assert layer.policy()[0]["range"] == Range(-0.25, 0.25, "")


def test_a_module_takes_its_layers_in_an_nn_sequential_as_augnet_does():
    # AugNet took nn.Sequential(layer, ...) and AugmentationModule refused it ("got Sequential").
    first, second = augnet.AugmentationLayer([T.Rotate()]), augnet.AugmentationLayer([T.Brightness()])
    module = augnet.AugmentationModule(nn.Sequential(first, second))
    assert list(module.layers) == [first, second]
    x = torch.rand(2, 3, 8, 8, generator=gen(6))
    listed = augnet.AugmentationModule([first, second])
    assert torch.equal(module(x, copies=2, generator=gen(7)), listed(x, copies=2, generator=gen(7)))


@pytest.mark.parametrize("layers, name", [(set(), "set"), ((n for n in ()), "generator"), ({"a": 1}, "dict")])
def test_layers_that_are_no_sequence_are_a_type_error_naming_their_type(layers, name):
    with pytest.raises(TypeError, match=rf"^layers must be a sequence of AugmentationLayer, got {name}$"):
        augnet.AugmentationModule(layers)


# ------------------------------------------------------------------------------------------------------------ model


def test_aggregate_names_its_how_argument():
    with pytest.raises(ValueError, match=r"^aggregate: how must be one of \('log_softmax', 'softmax', 'mean'\), "
                                         r"got 'max'$"):  # fmt: skip
        aggregate(torch.randn(4, 3), 2, how="max")


@pytest.mark.parametrize("out, copies, shape", [(torch.randn(5, 3), 2, r"\(5, 3\)"), (torch.tensor(1.0), 1, r"\(\)")])
def test_aggregate_refuses_rows_that_are_not_whole_copies_naming_shape_and_copies(out, copies, shape):
    with pytest.raises(ValueError, match=rf"shape {shape}; .*multiple of copies={copies}"):
        aggregate(out, copies)


def test_aggregate_refuses_integer_outputs_naming_the_dtype():
    with pytest.raises(TypeError, match=r"floating-point outputs to aggregate, got torch.int64"):
        aggregate(torch.ones(4, 3, dtype=torch.long), 2, "mean")


# ----------------------------------------------------------------------------------------------------------- losses


def _loss_inputs():
    g = gen(8)
    return torch.randn(3, 4, generator=g), torch.randn(2, 3, 4, generator=g), torch.tensor([0, 1, 0])


def test_equivariance_loss_refuses_bad_shapes_naming_them():
    loss, head = EquivarianceLoss(4, 2), nn.Linear(4, 2)
    z, z_t, y = _loss_inputs()
    with pytest.raises(ValueError, match=r"z must have shape \(B, 4\), got \(3, 5\)"):
        loss(torch.randn(3, 5), z_t, y, head)
    for empty in ([], torch.empty(0, 3, 4)):
        with pytest.raises(ValueError, match="z_t must hold the features of at least one transformation"):
            loss(z, empty, y, head)
    with pytest.raises(ValueError, match=r"maps names 1 map\(s\) for 2 transformed batch\(es\)"):
        loss(z, z_t, y, head, maps=[0])


def test_equivariance_loss_repr_gives_its_settings():
    loss = EquivarianceLoss(4, 2, equivariance_weight=5, invariance_weight=0.5, transformed_weight=1, output_relu=True)
    assert loss.extra_repr() == "dim=4, kind='linear', lambda_1=5.0, lambda_2=0.5, lambda_3=1.0, output_relu=True"


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.uint8, torch.uint16, torch.uint64])
def test_equivariance_loss_reads_labels_of_any_integer_dtype_as_int64(dtype):
    # int32 labels (NumPy's) failed in cross_entropy with a RuntimeError ("expected target dtype to be Long").
    loss, head = EquivarianceLoss(4, 2), nn.Linear(4, 2)
    z, z_t, y = _loss_inputs()
    want = loss(z, z_t, y, head, return_terms=True)
    got = loss(z, z_t, y.to(dtype), head, return_terms=True)
    assert torch.equal(got[0], want[0]) and got[1] == want[1]


def test_equivariance_loss_refuses_uint64_labels_past_int64():
    z, z_t, _ = _loss_inputs()
    y = torch.tensor([0, 2**63, 1], dtype=torch.uint64)
    with pytest.raises(ValueError, match="y holds labels past int64's range"):
        EquivarianceLoss(4, 2)(z, z_t, y, nn.Linear(4, 2))


def test_equivariance_loss_return_terms_must_be_a_bool():
    # return_terms="no" is truthy: it returned the terms.
    z, z_t, y = _loss_inputs()
    with pytest.raises(TypeError, match="return_terms must be True or False, got 'no'"):
        EquivarianceLoss(4, 2)(z, z_t, y, nn.Linear(4, 2), return_terms="no")


def test_equivariance_loss_names_logits_of_another_batch():
    # cross_entropy said "Expected input batch_size (2) to match target batch_size (3)", naming no argument.
    z, z_t, y = _loss_inputs()
    loss, head = EquivarianceLoss(4, 2), nn.Linear(4, 2)
    with pytest.raises(ValueError, match=r"logits must be head\(z\), 3 rows \(one per sample\), got shape \(2, 2\)"):
        loss(z, z_t, y, head, logits=torch.randn(2, 2))
    with pytest.raises(TypeError, match=r"logits must be head\(z\), a tensor, got list"):
        loss(z, z_t, y, head, logits=[[0.0, 1.0]] * 3)
    assert torch.equal(loss(z, z_t, y, head, logits=head(z)), loss(z, z_t, y, head))


# ---------------------------------------------------------------------------------------------------- per instance


def test_running_standardize_repr():
    assert repr(RunningStandardize(np.int64(4), momentum=np.float32(0.25))) == "RunningStandardize(4, momentum=0.25)"


def test_inputs_of_a_usual_scale_that_hardly_differ_give_no_scale_warning_and_are_checked_again():
    conditioner = TinyConditioner(3, 2).train()
    x = 1 + 1e-7 * torch.rand(4, 3, 8, 8, generator=gen(9))  # RMS 1: scaling would not help
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        conditioner(x)
    assert conditioner._warned_blind is False  # not spent: a later batch of tiny scale is still warned of
    with pytest.warns(UserWarning, match="barely vary over the batch"):
        conditioner(1e-7 * torch.rand(4, 3, 8, 8, generator=gen(10)))


def test_rows_of_features_have_no_default_conditioner_but_take_ones_own():
    with pytest.raises(ValueError, match="no default conditioner for 2-D inputs: pass conditioner= yourself"):
        ConditionedAugmentationLayer([Jitter()], channels=5)
    torch.manual_seed(0)
    layer = ConditionedAugmentationLayer([Jitter()], conditioner=nn.Linear(5, 2))
    x = torch.randn(4, 5, generator=gen(11))
    assert layer(x, copies=2, generator=gen(12)).shape == (8, 5)
    w, mu = layer.latest_policy()
    assert torch.equal(w, torch.ones(4, 1)) and torch.equal(mu, layer.sample_policy(x)[1])


def test_finite_inputs_whose_sum_overflows_pass_the_finiteness_check():
    # The one-reduction check's sum is inf; the rows are finite, so nothing is refused.
    layer = ConditionedAugmentationLayer([T.Rotate()], channels=3)
    x = torch.full((2, 3, 4, 4), 3e38)
    assert layer.check_input(x) is None


def test_a_per_instance_policy_takes_a_size_once_and_checks_it():
    layer = ConditionedAugmentationLayer([T.Rotate(), T.TranslateX()], channels=3)
    with pytest.raises(TypeError, match=r"x must be a batch \(a floating-point tensor\) when size is given, got tuple"):
        layer.policy((8, 8), size=(8, 8))
    x = torch.rand(2, 3, 8, 8, generator=gen(13))
    # size was used unchecked with a batch: (0, 16) gave ranges, "ab" failed in Python's arithmetic
    with pytest.raises(ValueError, match=r"size must be a non-empty spatial size of ints >= 1, got \(0, 16\)"):
        layer.policy(x, size=(0, 16))
    with pytest.raises(TypeError, match="size must be a spatial size"):
        layer.policy(x, size="ab")
    assert torch.equal(layer.policy(x, size=torch.tensor([16, 16]))["ranges"], layer.policy(x, size=(16, 16))["ranges"])


def test_a_per_instance_layer_takes_a_size_as_a_1d_integer_tensor_as_every_layer_does():
    # AugmentationLayer.policy and AugmentationModule.policy take torch.tensor([8, 8]); the per-instance layer read
    # it as a batch: "Rotate: expected a floating-point tensor, got dtype torch.int64".
    torch.manual_seed(0)
    layer = ConditionedAugmentationLayer([T.Rotate(), T.TranslateX()], channels=3)
    model = augnet.AugNet(nn.Flatten(), layer)
    assert layer.policy(torch.tensor([8, 8])) == layer.policy((8, 8))
    assert model.policy(torch.tensor([8, 8])) == model.policy((8, 8))
    assert layer.policy(torch.tensor([8, 8]))[1]["range"] == Range(-1.0, 1.0, "px")
    with pytest.raises(TypeError, match=r"got Tensor"):
        layer.policy(torch.tensor([8, 8]), size=(8, 8))


def test_a_per_instance_layers_repr_says_it_is_conditioned():
    layer = ConditionedAugmentationLayer([T.Rotate()], channels=3)
    assert layer.extra_repr() == ("conditioned, temperature=1, train_mode='sample', eval_mode='sample', "
                                  "policy=[Rotate(w=1.000, mu=0.500)]")  # fmt: skip


def test_conditioner_entropy_of_a_model_without_conditioned_layers_names_it():
    with pytest.raises(ValueError, match=r"^no ConditionedAugmentationLayer found in AugNet$"):
        conditioner_entropy(_model())


# ----------------------------------------------------------------------------------------------------------- policy


def _policy() -> P.Policy:
    return augnet.AugmentationModule([augnet.AugmentationLayer([T.Rotate(), T.Brightness()])]).policy((8, 8))


def test_exporting_without_the_exporters_registered_says_what_to_import(monkeypatch):
    # Unreachable in use (importing augnet registers them): what a broken import would leave.
    monkeypatch.setattr(P, "_EXPORTERS", {})
    with pytest.raises(RuntimeError, match=r"^no kornia exporter is registered: import augnet.export first$"):
        _policy().to_kornia()


def test_settings_of_another_length_than_the_layers_are_refused():
    with pytest.raises(ValueError, match=r"^settings has 2 entries for 1 layers$"):
        P.Policy([[]], [{}, {}])


def test_layer_specs_gives_the_transforms_and_copies_of_the_settings():
    policy = _policy()
    kept = copy.deepcopy(policy.settings)
    ((transforms, settings),) = P.layer_specs(policy)
    assert [type(t).__name__ for t in transforms] == ["Rotate", "Brightness"]
    assert [t.config() for t in transforms] == [e["args"] for e in policy[0]]
    assert settings == policy.settings[0]
    settings["temperature"], settings["weight_logits"][0] = 99.0, 5.0  # shared the policy's dicts: it changed too
    assert policy.settings == kept
    assert augnet.AugmentationModule.from_policy(policy).policy((8, 8)) == policy


@pytest.mark.parametrize("policy, error, match", [
    ("abc", TypeError, "^policy must be an augnet Policy, got str$"),
    ({"layers": []}, TypeError, "^policy must be an augnet Policy, got dict$"),
    (P.Policy([{"transform": "Rotate"}]), ValueError, r"^policy layer 0 must be a list of entries, got \{"),
    (P.Policy([], []), ValueError, "^the policy has no layers$"),
])  # fmt: skip
def test_what_is_not_a_policy_is_refused_by_check_policy(policy, error, match):
    with pytest.raises(error, match=match):
        P.check_policy(policy)


@pytest.mark.parametrize("err", [
    UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),
    json.JSONDecodeError("Expecting value", "doc", 0),
])  # fmt: skip
def test_an_error_whose_type_takes_no_message_alone_is_named_as_a_value_error(err):
    with pytest.raises(ValueError) as raised, naming_path(Path("policy.json")):
        raise err
    assert type(raised.value) is ValueError and str(raised.value) == f"policy.json: {err}"


def test_a_policy_file_is_refused_where_its_settings_or_entries_do_not_hold():
    policy = _policy()
    with pytest.raises(TypeError, match=r"^policy layer 0: the settings must be a dict, got 'x'$"):
        P.check_policy(P.Policy(list(policy), ["x"]))
    data = policy.to_json()
    tiny = copy.deepcopy(data)
    tiny["layers"][0].update(temperature=1e-30, weight_logits=[1e10, 0.0])
    with pytest.raises(ValueError, match=r"weight_logits / temperature overflows float32 \(temperature 1e-30"):
        P.Policy.from_json(tiny)
    edited = copy.deepcopy(data)
    edited["layers"][0]["transforms"][0]["range"][1] = 10.0
    with pytest.raises(ValueError, match=r"entry 0 \(Rotate\): range \[-90.0, 10.0, 'deg'\] disagrees with the "
                                         r"layer's state, which gives \[-90.0, 90.0, 'deg'\]"):  # fmt: skip
        P.Policy.from_json(edited)


# ------------------------------------------------------------------------------------------------------ calibration


def test_calibrate_refuses_a_generator_that_is_not_torchs_before_changing_anything():
    layer = augnet.AugmentationLayer([T.Rotate()])
    with pytest.raises(TypeError, match=r"calibrate: generator must be a torch.Generator or None, got Generator"):
        layer.calibrate(torch.rand(2, 3, 8, 8), generator=np.random.default_rng(0))
    assert layer.calibration is None


def test_a_change_past_float32_is_refused():
    x = torch.rand(4, 3, 8, 8, generator=gen(14))

    def features(v):  # 1 on x itself (Rotate at magnitude 0 returns it), about 1e100 on anything else
        return (1 + (v.double() - x.double()).abs().sum() * 1e100) * torch.ones(4, 2, dtype=torch.float64)

    layer = augnet.AugmentationLayer([T.Rotate()])
    with pytest.raises(ValueError, match="the measured change overflows float32"):
        layer.calibrate(x, points=3, features=features)
    assert layer.calibration is None


def test_transforms_that_do_not_change_the_inputs_are_named_and_nothing_changes():
    layer = augnet.AugmentationLayer([T.Rotate(), T.Contrast(), T.HorizontalFlip()], init_magnitude=0.3)
    with pytest.raises(ValueError, match=r"^cannot calibrate \['Contrast', 'HorizontalFlip'\]: they do not change"):
        layer.calibrate(torch.full((2, 3, 8, 8), 0.5))  # a grey image: no contrast to change, nothing to mirror
    assert layer.calibration is None and torch.equal(layer.raw_magnitudes, torch.full((3,), 0.3))


# ---------------------------------------------------------------------------------------------------- fit's checks


def test_fit_refuses_two_optimizers_with_a_loader():
    model = _model()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(*_data()), batch_size=4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(TypeError, match=r"^fit\(\) got two optimizers \(the third argument and optimizer=\)$"):
        fit(model, loader, opt, optimizer=torch.optim.SGD(model.parameters(), lr=0.1), epochs=1)


def test_fit_refuses_a_generator_that_only_has_a_device():
    model = _model()
    with pytest.raises(TypeError, match=r"^generator must be a torch.Generator or None, got Tensor$"):
        fit(model, *_data(), torch.optim.SGD(model.parameters(), lr=0.1), 1, 4, generator=torch.tensor(0))


def test_a_loader_of_single_samples_is_refused_naming_the_0d_targets():
    model = _model()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(*_data()), batch_size=None)
    before = copy.deepcopy(model.state_dict())
    with pytest.raises(ValueError, match="batch 0: the targets are a 0-d tensor, with no batch dimension"):
        fit(model, loader, torch.optim.SGD(model.parameters(), lr=0.1), 1)
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_parameters_made_infinite_by_the_last_steps_gradients_are_an_error_with_the_history():
    class Sqrt(nn.Module):  # the loss's sqrt(p) at p = 0: a finite loss, an infinite gradient
        def __init__(self):
            super().__init__()
            self.p = nn.Parameter(torch.zeros(()))

        def forward(self, x):
            return torch.log_softmax(x.flatten(1)[:, :2], 1)

    model = Sqrt()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(NonFiniteLossError, match=r"after step 1 the parameters \['p'\] are not finite") as raised:
        fit(model, *_data(), opt, 1, 8, regularizer="none", loss_fn=lambda out, y: F.nll_loss(out, y) + model.p.sqrt())
    assert isinstance(raised.value, ValueError) and raised.value.history["step"] == [1]


def _fit_history(**kwargs):
    model = _model()
    history = fit(model, *_data(), torch.optim.SGD(model.parameters(), lr=0.1), batch_size=4, generator=gen(15),
                  **kwargs)  # fmt: skip
    return history, [p.detach().clone() for p in model.parameters()]


@pytest.mark.parametrize("name, holder", [("lam", np.array), ("epochs", np.array), ("epochs", torch.tensor),
                                          ("accumulate", np.array), ("accumulate", torch.tensor)])  # fmt: skip
def test_fit_reads_0d_tensors_and_arrays_as_the_numbers_they_hold(name, holder):
    # lam took a 0-d tensor but not a 0-d array; epochs and accumulate neither (every other count takes both).
    value = {"lam": 0.25, "epochs": 2, "accumulate": 2}[name]
    kwargs = {"epochs": 2, "lam": 0.25, name: value}
    want_history, want_params = _fit_history(**kwargs)
    got_history, got_params = _fit_history(**{**kwargs, name: holder(value)})
    assert got_history == want_history
    assert all(torch.equal(a, b) for a, b in zip(got_params, want_params, strict=True))


def test_a_callable_lam_may_return_0d_arrays():
    got_history, got_params = _fit_history(epochs=2, lam=lambda e: np.array(0.25 * e))
    want_history, want_params = _fit_history(epochs=2, lam=lambda e: 0.25 * e)
    assert got_history == want_history
    assert all(torch.equal(a, b) for a, b in zip(got_params, want_params, strict=True))


# ------------------------------------------------------------------------------------------------------- callbacks


def test_a_resumed_log_whose_header_is_not_text_says_so(tmp_path):
    log = tmp_path / "policy.csv"
    log.write_bytes(b"\xff\xfe\x00step,epoch\n")
    model = _model()
    with pytest.raises(ValueError, match=r"has the columns None \(no header line: the file is empty, not text"):
        fit(model, *_data(), torch.optim.SGD(model.parameters(), lr=0.1), 2, 4, start_epoch=1,
            callbacks=PolicyLogger(tmp_path, resume=True))  # fmt: skip
    assert log.read_bytes() == b"\xff\xfe\x00step,epoch\n"


@pytest.mark.parametrize("tail", [b"", b"5,2,0.1"])
def test_a_run_resumed_after_every_logged_epoch_keeps_every_whole_row(tmp_path, tail):
    # The log holds epochs 0 and 1 only (and, cut short, the first row of epoch 2): a run resumed at epoch 2 keeps
    # every whole row and drops the cut one.
    model = _model()
    x, y = _data()
    fit(model, x, y, torch.optim.SGD(model.parameters(), lr=0.1), 2, 4, callbacks=PolicyLogger(tmp_path, every=1))
    log = tmp_path / "policy.csv"
    earlier = log.read_bytes()
    log.write_bytes(earlier + tail)
    fit(model, x, y, torch.optim.SGD(model.parameters(), lr=0.1), 3, 4, start_epoch=2,
        callbacks=PolicyLogger(tmp_path, every=1, resume=True))  # fmt: skip
    text = log.read_bytes()
    assert text.startswith(earlier)
    added = text[len(earlier) :].decode().splitlines()
    assert [row.split(",")[:2] for row in added] == [["5", "2"], ["6", "2"]]


def test_tensorboard_missing_is_an_import_error_saying_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)
    with pytest.raises(ImportError, match=r'needs tensorboard: pip install "augnet\[tensorboard\]"'):
        PolicyLogger(tmp_path / "logs", tensorboard=True)
    assert not (tmp_path / "logs").exists()


def test_a_failed_run_keeps_a_folder_it_made_once_something_else_is_in_it(tmp_path):
    log_dir = tmp_path / "a" / "b"

    class Other(Callback):  # writes beside the log, then stops the run before its first row
        def on_train_start(self, state):
            (log_dir / "other.txt").write_text("kept")
            raise RuntimeError("stopped")

    model = _model()
    with pytest.raises(RuntimeError, match="stopped"):
        fit(model, *_data(), torch.optim.SGD(model.parameters(), lr=0.1), 1, 4,
            callbacks=[PolicyLogger(log_dir, every=1), Other()])  # fmt: skip
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == ["a", "a/b", "a/b/other.txt"]


def test_the_callbacks_reprs_are_exact():
    # start=0.123456789 was shown as 0.123457: eval(repr(annealing)) annealed otherwise.
    annealing = TemperatureAnnealing(0.123456789, np.float64(1e-3), epochs=np.int64(5))
    assert repr(annealing) == "TemperatureAnnealing(start=0.123456789, end=0.001, epochs=5)"
    again = eval(repr(annealing), {"TemperatureAnnealing": TemperatureAnnealing})
    assert [again.temperature(e, 5) for e in range(5)] == [annealing.temperature(e, 5) for e in range(5)]
    assert repr(TemperatureAnnealing()) == "TemperatureAnnealing(start=1.0, end=0.01, epochs=None)"
    assert repr(WeightWarmup(torch.tensor(2))) == "WeightWarmup(epochs=2)"


@pytest.mark.parametrize("epoch, epochs, error, match", [
    (-1, 3, ValueError, r"epoch must be a finite number >= 0, got -1$"),  # was 10.0, past start
    (math.nan, 3, ValueError, r"epoch must be a finite number >= 0, got nan$"),  # was nan, set on every layer
    ("1", 3, TypeError, r"epoch must be a number, got '1'$"),  # was Python's "unsupported operand type(s)"
    (1, math.inf, ValueError, r"epochs must be a finite number >= 0, got inf$"),
    (1, None, TypeError, r"epochs must be a number, got None$"),
])  # fmt: skip
def test_an_annealings_temperature_refuses_epochs_that_are_not_numbers_at_least_0(epoch, epochs, error, match):
    with pytest.raises(error, match="^TemperatureAnnealing: " + match):
        TemperatureAnnealing(1.0, 0.01).temperature(epoch, epochs)


def test_an_annealings_temperature_reads_0d_tensors_and_goes_from_start_to_end():
    annealing = TemperatureAnnealing(1.0, 0.01)
    assert [annealing.temperature(torch.tensor(e), np.array(3)) for e in range(3)] == [1.0, 0.1, 0.01]
    assert annealing.temperature(0, 0) == 0.01 and annealing.temperature(7, 3) == 0.01


def test_ranges_that_cannot_be_compared_with_the_state_are_left_unchecked():
    # An in-memory full policy without ranges, and a file written before range_size whose range is in pixels (the
    # layer gives it without a size in other units): nothing to compare. A range in degrees is compared still.
    policy = augnet.AugmentationModule([augnet.AugmentationLayer([T.Rotate(), T.TranslateX()])]).policy((8, 8))
    bare = P.Policy([[{k: v for k, v in e.items() if k != "range"} for e in policy[0]]], policy.settings)
    (layer,) = P.check_policy(bare)
    assert layer.policy((8, 8)) == policy[0]
    data = policy.to_json()
    del data["layers"][0]["range_size"]
    data["layers"][0]["transforms"][1]["range"] = [-5.0, 5.0, "px"]
    assert P.Policy.from_json(data)[0][1]["range"] == Range(-5.0, 5.0, "px")
    data["layers"][0]["transforms"][0]["range"] = [-45.0, 45.0, "deg"]
    with pytest.raises(ValueError, match=r"entry 0 \(Rotate\): range \[-45.0, 45.0, 'deg'\] disagrees"):
        P.Policy.from_json(data)
