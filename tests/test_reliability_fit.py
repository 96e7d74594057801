"""Reliability of fit(), PolicyLogger and devices (issue 25).

Bad input to ``fit`` is refused at entry, before anything changes: the model's
parameters, its device, its training mode and the optimiser's state are as
they were. A loss that is not finite stops training with an error naming the
step, the model left at its last finite state.
"""

from __future__ import annotations

import copy
import csv
import math
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import augnet
from augnet.data import rotated_glyphs
from augnet.training import PolicyLogger, TemperatureAnnealing, WeightWarmup, fit
from augnet.transforms import image as T


def data(n=24):
    return rotated_glyphs(n, size=12, seed=0)


def model_and_opt(plain: bool = False, lr: float = 0.1):
    torch.manual_seed(0)
    trunk = nn.Sequential(nn.Flatten(), nn.Linear(144, 4), nn.LogSoftmax(1))
    model = trunk if plain else augnet.AugNet(trunk, augnet.AugmentationLayer([T.Rotate(), T.ShearX()]))
    return model, torch.optim.SGD(model.parameters(), lr=lr)


def snapshot(model, opt):
    return [p.detach().clone() for p in model.parameters()], str(opt.state_dict()), model.training


def unchanged(model, opt, before) -> bool:
    params, state, training = before
    same = all(torch.equal(a, b) for a, b in zip(params, model.parameters(), strict=True))
    return same and str(opt.state_dict()) == state and model.training == training


def loader(n=24, batch=8, **kwargs):
    x, y = data(n)
    return DataLoader(TensorDataset(x, y), batch_size=batch, **kwargs)


# ----------------------------------------------------------------------- the ways users call fit

CALLS = {
    "loader-keywords": lambda m, o: fit(m, loader(), optimizer=o, epochs=1),
    "loader-positional": lambda m, o: fit(m, loader(), o, 1),
    "loader-positional-epochs-keyword": lambda m, o: fit(m, loader(), o, epochs=1),
    "loader-with-placeholder": lambda m, o: fit(m, loader(), None, o, 1),
    "loader-with-placeholder-keywords": lambda m, o: fit(m, loader(), None, optimizer=o, epochs=1),
    "loader-keyword-x": lambda m, o: fit(m, x=loader(), optimizer=o, epochs=1),
    "tensors-positional": lambda m, o: fit(m, *data(), o, 1, 8),
    "tensors-keywords": lambda m, o: fit(m, *data(), optimizer=o, epochs=1, batch_size=8),
    "list-of-batches": lambda m, o: fit(m, list(loader()), o, 1),
}


@pytest.mark.parametrize("call", CALLS, ids=list(CALLS))
def test_every_way_of_calling_fit_trains(call):
    model, opt = model_and_opt()
    before = snapshot(model, opt)
    history = CALLS[call](model, opt)
    assert history["step"] and not unchanged(model, opt, before)


def test_the_loader_forms_train_the_same():
    runs = []
    for call in ("loader-keywords", "loader-positional", "loader-with-placeholder"):
        model, opt = model_and_opt()
        torch.manual_seed(1)
        CALLS[call](model, opt)
        runs.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
    assert torch.equal(runs[0], runs[1]) and torch.equal(runs[0], runs[2])


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda m, o: fit(m, loader(), o), TypeError, "epochs"),
        (lambda m, o: fit(m, loader(), epochs=1), TypeError, "optimizer"),
        (lambda m, o: fit(m, loader(), o, 1, optimizer=o), TypeError, "optimizer"),
        (lambda m, o: fit(m, loader(), o, 1, epochs=2), TypeError, "epochs"),
        (lambda m, o: fit(m, *data(), o), TypeError, "optimizer|epochs"),
        (lambda m, o: fit(m, data()[0], o, 1), TypeError, "y must be a tensor"),
        (lambda m, o: fit(m, loader(), "adam", 1), TypeError, "optimizer"),
        (lambda m, o: fit(m, loader(), None, None, 1), TypeError, "optimizer"),
    ],
    ids=["no-epochs", "no-optimizer", "optimizer-twice", "epochs-twice", "tensors-no-epochs", "tensors-no-y",
         "optimizer-a-string", "optimizer-none"],
)  # fmt: skip
def test_incomplete_or_ambiguous_calls_are_refused(call, error, match):
    model, opt = model_and_opt()
    before = snapshot(model, opt)
    with pytest.raises(error, match=match):
        call(model, opt)
    assert unchanged(model, opt, before)


# ----------------------------------------------------------------------- bad input, refused before the first step


def _batches(kind):
    x, y = data(16)
    return {
        "triple": [(x[:8], y[:8], y[:8])],
        "single": [(x[:8],)],
        "bare-tensor": [x[:8]],
        "numpy": [(x[:8].numpy(), y[:8].numpy())],
        "numpy-targets": [(x[:8], y[:8].numpy())],
        "dict": [{"x": x[:8], "y": y[:8]}],
        "strings": [("images", "labels")],
        "lengths-differ": [(x[:8], y[:5])],
        "empty-list": [],
        "empty-loader": DataLoader(TensorDataset(x[:0], y[:0]), batch_size=4),
        "drop-last-drops-all": DataLoader(TensorDataset(x[:3], y[:3]), batch_size=4, drop_last=True),
        "empty-generator": (b for b in []),
    }[kind]


@pytest.mark.parametrize(
    ("kind", "error", "match"),
    [
        ("triple", ValueError, r"\(inputs, targets\)"),
        ("single", ValueError, r"\(inputs, targets\)"),
        ("bare-tensor", ValueError, r"\(inputs, targets\)"),
        ("numpy", TypeError, "ndarray"),
        ("numpy-targets", TypeError, "ndarray"),
        ("dict", ValueError, r"\(inputs, targets\) pair: a dict with keys \['x', 'y'\]; have the dataset"),
        ("strings", TypeError, "str"),
        ("lengths-differ", ValueError, "8 inputs and 5 targets"),
        ("empty-list", ValueError, "no batches"),
        ("empty-loader", ValueError, "no batches"),
        ("drop-last-drops-all", ValueError, "no batches"),
        ("empty-generator", ValueError, "no batches"),
    ],
)
def test_bad_batches_are_refused_before_the_first_step(kind, error, match):
    model, opt = model_and_opt()
    before = snapshot(model, opt)
    with pytest.raises(error, match=match):
        fit(model, _batches(kind), optimizer=opt, epochs=1)
    assert unchanged(model, opt, before)


def test_empty_tensors_are_refused():
    model, opt = model_and_opt()
    x, y = data()
    with pytest.raises(ValueError, match="no batches"):
        fit(model, x[:0], y[:0], opt, 1, 8)


def test_a_one_shot_iterator_for_several_epochs_is_refused():
    model, opt = model_and_opt()
    before = snapshot(model, opt)
    with pytest.raises(ValueError, match="iterator"):
        fit(model, iter(list(loader())), optimizer=opt, epochs=2)
    assert unchanged(model, opt, before)
    fit(model, iter(list(loader())), optimizer=opt, epochs=1)  # one pass is fine


class NotAScheduler:
    def step(self):
        pass


def _other_scheduler(model, opt):
    other = torch.optim.SGD([nn.Parameter(torch.zeros(2))], lr=0.1)
    return torch.optim.lr_scheduler.StepLR(other, 1)


BAD_KWARGS = {
    "record_every-0": (dict(record_every=0), ValueError, "record_every"),
    "record_every-negative": (dict(record_every=-3), ValueError, "record_every"),
    "record_every-float": (dict(record_every=2.5), ValueError, "record_every"),
    "record_every-bool": (dict(record_every=True), ValueError, "record_every"),
    "generator-int": (dict(generator=123), TypeError, "generator"),
    "generator-string": (dict(generator="seed"), TypeError, "generator"),
    "scheduler-other-optimizer": (dict(scheduler=_other_scheduler), ValueError, "scheduler"),
    "scheduler-not-a-scheduler": (dict(scheduler=lambda m, o: NotAScheduler()), TypeError, "scheduler"),
    "scheduler-string": (dict(scheduler=lambda m, o: "cosine"), TypeError, "scheduler"),
    "scheduler-plateau": (dict(scheduler=lambda m, o: torch.optim.lr_scheduler.ReduceLROnPlateau(o)), TypeError,
                          "ReduceLROnPlateau"),
    "lam-nan": (dict(lam=math.nan), ValueError, "lam"),
    "lam-inf": (dict(lam=math.inf), ValueError, "lam"),
    "lam-negative": (dict(lam=-0.5), ValueError, "lam"),
    "lam-string": (dict(lam="0.5"), TypeError, "lam"),
    "lam-bool": (dict(lam=True), TypeError, "lam"),
    "lam-callable-nan": (dict(lam=lambda epoch: math.nan if epoch == 1 else 0.5, epochs=2), ValueError, "lam"),
    "lam-callable-string": (dict(lam=lambda epoch: "x"), TypeError, "lam"),
    "loss_fn-not-callable": (dict(loss_fn="nll"), TypeError, "loss_fn"),
    "record-not-callable": (dict(record=5), TypeError, "record"),
    "augment_batch-not-callable": (dict(augment_batch="flip"), TypeError, "augment_batch"),
    "regularizer-unknown": (dict(regularizer="l2"), ValueError, "regularizer"),
    "shuffle-string": (dict(shuffle="yes"), TypeError, "shuffle"),
    "progress-tensor": (dict(progress=torch.tensor([1.0, 2.0])), TypeError, "progress"),
    "lam-tensor-of-two": (dict(lam=torch.tensor([0.5, 0.5])), TypeError, "lam"),
    "epochs-float": (dict(epochs=1.5), ValueError, "epochs"),
}  # fmt: skip


@pytest.mark.parametrize("source", ["tensors", "loader"])
@pytest.mark.parametrize("case", BAD_KWARGS, ids=list(BAD_KWARGS))
def test_bad_arguments_are_refused_before_anything_changes(case, source):
    kwargs, error, match = BAD_KWARGS[case]
    model, opt = model_and_opt()
    kwargs = {k: (v(model, opt) if k == "scheduler" else v) for k, v in kwargs.items()}
    kwargs.setdefault("epochs", 1)
    before = snapshot(model, opt)
    args = (*data(), opt) if source == "tensors" else (loader(), opt)
    if source == "tensors":
        kwargs.setdefault("batch_size", 8)
    with pytest.raises(error, match=match):
        fit(model, *args, **kwargs)
    assert unchanged(model, opt, before)


@pytest.mark.parametrize("how", ["other-parameters", "no-parameters"])
def test_an_optimizer_holding_none_of_the_models_parameters_is_refused(how):
    model, opt = model_and_opt()
    other = torch.optim.SGD([nn.Parameter(torch.zeros(3))] if how == "other-parameters" else [{"params": []}], lr=0.1)
    before = snapshot(model, opt)
    with pytest.raises(ValueError, match="optimizer"):
        fit(model, loader(), optimizer=other, epochs=1)
    assert unchanged(model, opt, before)


def test_an_optimizer_without_the_layers_parameters_is_warned_of_when_a_regularizer_would_train_them(recwarn):
    model, _ = model_and_opt()
    trunk_only = torch.optim.SGD(model.trunk.parameters(), lr=0.1)
    with pytest.warns(UserWarning, match="holds none of the augmentation layers' parameters") as caught:
        fit(model, loader(), optimizer=trunk_only, epochs=1, lam=0.5)
    assert caught[0].filename == __file__
    fit(model, loader(), optimizer=trunk_only, epochs=1, lam=0.0)  # a policy kept fixed on purpose: no warning
    fit(model, loader(), optimizer=torch.optim.SGD(augnet.param_groups(model), lr=0.1), epochs=1)
    assert not [w for w in recwarn if "augmentation layers' parameters" in str(w.message)]


def test_int32_targets_and_numpy_counts_train_as_int64_and_ints_do(tmp_path):
    # Labels from numpy are often int32; nll_loss takes int64 only ("expected scalar type Long").
    x, y = data()
    runs = []
    for targets, epochs, batch in ((y, 2, 8), (y.int(), np.int64(2), np.int32(8))):
        model, opt = model_and_opt()
        runs.append(fit(model, x, targets, opt, epochs, batch, generator=torch.Generator().manual_seed(0))["loss"])
    assert runs[0] == runs[1]
    model, opt = model_and_opt()  # any loss: a module, a lambda around torch's
    for loss_fn in (nn.NLLLoss(), lambda out, t: F.nll_loss(out, t)):
        fit(model, x, y.to(torch.int16), opt, 1, 8, loss_fn=loss_fn)
    assert WeightWarmup(np.int64(3)).epochs == 3 and PolicyLogger(tmp_path, every=np.int32(2)).every == 2
    assert PolicyLogger(tmp_path / "s", size=(np.int64(32), 32)).size == (32, 32)


def test_accuracy_refuses_targets_that_are_not_class_indices():
    # A (B, 1) column broadcast against the (B,) predictions counted B x B matches: an accuracy of 6.0.
    model, _ = model_and_opt()
    x, y = data(16)
    assert 0.0 <= augnet.training.accuracy(model, x, y) <= 1.0
    for bad in (y.unsqueeze(1), torch.nn.functional.one_hot(y, 4)):
        with pytest.raises(ValueError, match=r"\(B,\) class indices, got outputs \(16, 4\) and targets"):
            augnet.training.accuracy(model, x, bad)


def test_a_compiled_augnet_given_a_generator_is_warned_that_it_draws_from_the_global_one():
    model, _ = model_and_opt()
    compiled = torch.compile(model, backend="eager")
    with pytest.warns(UserWarning, match="draws its augmentations from torch's global generator"):
        fit(compiled, loader(), optimizer=torch.optim.SGD(compiled.parameters(), lr=0.1), epochs=1,
            generator=torch.Generator().manual_seed(0))  # fmt: skip


def test_a_plain_model_with_regularizer_none_trains_at_the_default_lam():
    model, opt = model_and_opt(plain=True)
    before = snapshot(model, opt)
    history = fit(model, loader(), optimizer=opt, epochs=1, regularizer="none")
    assert history["step"] and not unchanged(model, opt, before)


@pytest.mark.parametrize("regularizer", ["selective", "paper", "augerino"])
def test_a_plain_model_with_a_regularizer_of_layers_is_refused_at_entry(regularizer):
    model, opt = model_and_opt(plain=True)
    before = snapshot(model, opt)
    with pytest.raises(ValueError, match="regulari"):
        fit(model, loader(), optimizer=opt, epochs=1, regularizer=regularizer)
    assert unchanged(model, opt, before)


# ----------------------------------------------------------------------- devices


@pytest.mark.parametrize("device", ["meta", "mps", "hip", "xpu", "cuda:7", "cuda", "tpu", "not-a-device", 3.5])
def test_devices_the_machine_lacks_are_refused_before_the_model_moves(device):
    if isinstance(device, str) and device.startswith("cuda"):
        index = int(device.partition(":")[2] or 0)
        if torch.cuda.device_count() > index:  # a machine with that GPU trains there: not this test's case
            pytest.skip(f"this machine has {device}")
    model, opt = model_and_opt()
    before = snapshot(model, opt)
    with pytest.raises((ValueError, TypeError), match="device"):
        fit(model, loader(), optimizer=opt, epochs=1, device=device)
    assert unchanged(model, opt, before)
    assert all(p.device.type == "cpu" for p in model.parameters())


@pytest.mark.parametrize("device", ["meta", "mps", "hip", "xpu", "cuda:9"])
def test_resolve_device_refuses_devices_the_machine_lacks(device):
    if device.startswith("cuda") and torch.cuda.device_count() > 9:
        pytest.skip("this machine has that GPU")
    with pytest.raises(ValueError, match=device.split(":")[0]):
        augnet.training.resolve_device(device)


def test_a_model_on_meta_trains_only_meta_inputs_and_moves_nowhere():
    model, _ = model_and_opt()
    model.to("meta")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match=r"the model is on meta .* data are on cpu"):
        fit(model, loader(), optimizer=opt, epochs=1)
    with pytest.raises(ValueError, match="meta, which holds no values: nothing to move to cpu"):
        fit(model, loader(), optimizer=opt, epochs=1, device="cpu")
    x, y = (t.to("meta") for t in next(iter(loader())))
    history = fit(model, [(x, y)], optimizer=opt, epochs=1)  # a dry run: shapes only
    assert history["step"] == [1] and all(p.device.type == "meta" for p in model.parameters())


# ----------------------------------------------------------------------- losses that are not finite


class PoisonAt(nn.Module):
    """Log-probabilities of a linear map; NaN (or inf) from the ``step``-th call on."""

    def __init__(self, step, value=math.nan):
        super().__init__()
        self.inner, self.calls, self.step, self.value = nn.Sequential(nn.Flatten(), nn.Linear(144, 4)), 0, step, value

    def forward(self, x):
        self.calls += 1
        out = self.inner(x).log_softmax(1)
        return out + self.value if self.calls >= self.step else out


@pytest.mark.parametrize("value", [math.nan, math.inf])
@pytest.mark.parametrize("step", [1, 2, 3])  # 3 batches: the first, a middle and the last step
def test_a_loss_that_is_not_finite_stops_training_at_its_step(step, value):
    torch.manual_seed(0)
    trunk = PoisonAt(step, value)
    # effect_every=0: the effects' measurement would call the trunk too
    model = augnet.AugNet(trunk, augnet.AugmentationLayer([T.Rotate(), T.ShearX()]), effect_every=0)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    reference = PoisonAt(10**9)
    reference.load_state_dict(trunk.state_dict())
    ref_model = augnet.AugNet(reference, augnet.AugmentationLayer([T.Rotate(), T.ShearX()]), effect_every=0)
    ref_model.load_state_dict(model.state_dict())
    ref_opt = torch.optim.SGD(ref_model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(0)
    with pytest.raises((ValueError, FloatingPointError), match=f"step {step}"):
        fit(model, loader(), optimizer=opt, epochs=1, generator=g)
    assert all(torch.isfinite(p).all() for p in model.parameters())
    if step > 1:  # the state after step - 1 steps, as a run that stops there
        first = list(loader())[: step - 1]
        fit(ref_model, first, optimizer=ref_opt, epochs=1, generator=torch.Generator().manual_seed(0))
    for a, b in zip(model.parameters(), ref_model.parameters(), strict=True):
        assert torch.equal(a, b)


def test_a_nan_in_the_data_stops_training_with_a_clear_error():
    model, opt = model_and_opt()
    x, y = data()
    x = x.clone()
    x[20] = math.nan  # in the last batch
    with pytest.raises((ValueError, FloatingPointError), match="step 3"):
        fit(model, x, y, opt, 1, 8, shuffle=False)
    assert all(torch.isfinite(p).all() for p in model.parameters())


def bn_model(conditioned: bool):
    torch.manual_seed(0)
    trunk = nn.Sequential(
        nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 4)
    )  # fmt: skip
    transforms = [T.Rotate(), T.ShearX()]
    if conditioned:
        layer = augnet.ConditionedAugmentationLayer(transforms, channels=1)
    else:
        layer = augnet.AugmentationLayer(transforms)
    model = augnet.AugNet(trunk, layer, effect_every=1)  # effects measured in every pass: a buffer every step changes
    return model, torch.optim.Adam(augnet.param_groups(model))


def nan_from_second_call():
    calls = []

    def loss(out, target):
        calls.append(1)
        return F.nll_loss(out, target) * (math.nan if len(calls) >= 2 else 1.0)

    return loss


@pytest.mark.parametrize(
    "conditioned, poison", [(False, "data"), (False, "loss"), (True, "loss")],
    ids=["global-nan-image", "global-nan-loss", "per-instance-nan-loss"],
)  # fmt: skip
def test_a_step_that_is_not_finite_leaves_the_buffers_of_the_last_finite_step(conditioned, poison):
    # The forward pass of the bad step updates batch-norm statistics, the measured effects, the pass count and a
    # conditioner's statistics before its loss is known: all of them go back, so the model is the one that a run
    # of the finite step alone leaves, state for state (a NaN running mean would make every prediction NaN). A
    # per-instance layer refuses a NaN image itself, before anything changes: there the loss is made NaN.
    x, y = data()
    if poison == "data":
        x = x.clone()
        x[12] = math.nan  # the second batch of three
    model, opt = bn_model(conditioned)
    loss = nan_from_second_call() if poison == "loss" else F.nll_loss
    with pytest.raises((ValueError, FloatingPointError), match="step 2"):
        fit(model, x, y, opt, 1, 8, shuffle=False, generator=torch.Generator().manual_seed(0), loss_fn=loss)
    reference, ref_opt = bn_model(conditioned)
    fit(reference, x[:8], y[:8], ref_opt, 1, 8, shuffle=False, generator=torch.Generator().manual_seed(0))
    got, want = model.state_dict(), reference.state_dict()
    assert list(got) == list(want)
    for name in want:
        assert torch.equal(got[name], want[name]), name
    assert model.passes == reference.passes == 1
    model.eval()
    assert torch.isfinite(model(x[:8].nan_to_num(), generator=torch.Generator().manual_seed(1))).all()


# ----------------------------------------------------------------------- PolicyLogger


def test_a_policy_logger_whose_folder_is_a_file_is_refused_at_construction(tmp_path):
    taken = tmp_path / "taken"
    taken.write_text("not a folder")
    with pytest.raises(ValueError, match="taken"):
        PolicyLogger(taken)
    with pytest.raises(ValueError, match="taken"):
        PolicyLogger(taken / "below")


def test_a_policy_logger_whose_csv_name_is_a_folder_is_refused_at_construction(tmp_path):
    (tmp_path / "policy.csv").mkdir()
    with pytest.raises(ValueError, match=r"policy\.csv"):
        PolicyLogger(tmp_path)


def test_a_policy_logger_does_not_overwrite_an_earlier_runs_file(tmp_path):
    (tmp_path / "policy.csv").write_text("step,epoch\n1,0\n")
    with pytest.raises(ValueError, match=r"policy\.csv"):
        PolicyLogger(tmp_path)
    assert (tmp_path / "policy.csv").read_text() == "step,epoch\n1,0\n"
    PolicyLogger(tmp_path, overwrite=True)  # asked for


def test_a_policy_logger_of_a_run_that_fails_before_a_step_leaves_no_file(tmp_path):
    # The first step fails (float targets): the model is restored, and the log must not refuse the run again.
    model, opt = model_and_opt()
    x, y = data()
    with pytest.raises(RuntimeError):
        fit(model, x, y.float(), opt, 1, 8, callbacks=PolicyLogger(tmp_path, every=1))
    assert not (tmp_path / "policy.csv").exists()
    fit(model, x, y, opt, 1, 8, callbacks=PolicyLogger(tmp_path, every=1))  # the same run, mended
    assert len(list(csv.DictReader((tmp_path / "policy.csv").open()))) == 3


class _FailsAtStep(augnet.training.Callback):
    def __init__(self, step):
        self.step = step

    def on_step_end(self, state):
        if state.step == self.step:
            raise KeyboardInterrupt


def test_a_policy_logger_keeps_and_closes_the_steps_of_a_run_that_fails(tmp_path):
    logger = PolicyLogger(tmp_path, every=10)
    model, opt = model_and_opt()
    with pytest.raises(KeyboardInterrupt):
        fit(model, loader(), optimizer=opt, epochs=2, callbacks=[logger, _FailsAtStep(5)])
    rows = list(csv.DictReader((tmp_path / "policy.csv").open()))
    assert [int(r["step"]) for r in rows] == [1, 5]  # the first step and the last one that completed
    assert logger._file is None


class _Hooks(augnet.training.Callback):
    """Records its hooks; raises in the one named by ``fail``."""

    def __init__(self, name, calls, fail=None):
        self.name, self.calls, self.fail = name, calls, fail

    def _hook(self, hook):
        self.calls.append(f"{self.name}.{hook}")
        if hook == self.fail:
            raise RuntimeError(f"{self.name} fails in {hook}")

    def on_train_start(self, state):
        self._hook("start")

    def on_train_end(self, state):
        self._hook("end")

    def on_train_error(self, state, error):
        self._hook("error")


@pytest.mark.parametrize("fail", ["start", "end", "error"])
def test_on_train_error_goes_to_the_callbacks_started_and_not_ended(fail, recwarn):
    model, opt = model_and_opt()
    calls = []
    hooks = [_Hooks("a", calls), _Hooks("b", calls, fail=fail), _Hooks("c", calls)]
    if fail == "error":  # no training error: on_train_error is never called, so nothing fails
        fit(model, loader(), optimizer=opt, epochs=1, callbacks=hooks)
        assert calls == ["a.start", "b.start", "c.start", "a.end", "b.end", "c.end"]
        hooks.append(_Hooks("d", calls, fail="start"))  # now a failing start, and b's on_train_error fails too
        calls.clear()
        with pytest.raises(RuntimeError, match="d fails in start"):
            fit(model, loader(), optimizer=opt, epochs=1, callbacks=hooks)
        assert calls[-4:] == ["a.error", "b.error", "c.error", "d.error"]
        assert any("_Hooks.on_train_error raised RuntimeError('b fails in error')" in str(w.message) for w in recwarn)
        return
    with pytest.raises(RuntimeError, match=f"b fails in {fail}"):
        fit(model, loader(), optimizer=opt, epochs=1, callbacks=hooks)
    if fail == "start":  # c never started: no error hook for it
        assert calls == ["a.start", "b.start", "a.error", "b.error"]
    else:  # a ended; b raised in its end; c never ended
        assert calls == ["a.start", "b.start", "c.start", "a.end", "b.end", "b.error", "c.error"]


def test_a_refused_run_does_not_remove_the_log_of_an_earlier_run(tmp_path):
    logger = PolicyLogger(tmp_path, every=1)
    model, opt = model_and_opt()
    fit(model, loader(), optimizer=opt, epochs=0, callbacks=logger)  # a run of no step: its header only
    other = augnet.AugNet(nn.Sequential(nn.Flatten(), nn.Linear(144, 4), nn.LogSoftmax(1)),
                          augnet.AugmentationLayer([T.Rotate()]))  # fmt: skip
    with pytest.raises(ValueError, match="another model"):
        fit(other, loader(), optimizer=torch.optim.SGD(other.parameters(), lr=0.1), epochs=1, callbacks=logger)
    assert (tmp_path / "policy.csv").exists()


def test_two_policy_loggers_on_one_folder_do_not_overwrite_each_other(tmp_path):
    first, second = PolicyLogger(tmp_path, every=1), PolicyLogger(tmp_path, every=1)  # both made before a run
    model, opt = model_and_opt()
    fit(model, loader(), optimizer=opt, epochs=1, callbacks=first)
    written = (tmp_path / "policy.csv").read_text()
    before = snapshot(model, opt)
    with pytest.raises(ValueError, match="written after this logger was made"):
        fit(model, loader(), optimizer=opt, epochs=1, callbacks=second)
    assert (tmp_path / "policy.csv").read_text() == written and unchanged(model, opt, before)


def test_a_reused_policy_logger_keeps_the_first_runs_rows(tmp_path):
    logger = PolicyLogger(tmp_path, every=1)
    model, opt = model_and_opt()
    fit(model, loader(), optimizer=opt, epochs=1, callbacks=logger)
    first = (tmp_path / "policy.csv").read_text().splitlines()
    fit(model, loader(), optimizer=opt, epochs=1, callbacks=logger)
    rows = list(csv.DictReader((tmp_path / "policy.csv").open()))
    assert (tmp_path / "policy.csv").read_text().splitlines()[: len(first)] == first
    assert [int(r["step"]) for r in rows] == [1, 2, 3, 4, 5, 6]  # the second run continues the count (ints)
    assert [int(r["epoch"]) for r in rows] == [0, 0, 0, 0, 0, 0]  # each run's own epoch


def test_a_reused_policy_logger_refuses_another_model_before_training(tmp_path):
    logger = PolicyLogger(tmp_path, every=1)
    model, opt = model_and_opt()
    fit(model, loader(), optimizer=opt, epochs=1, callbacks=logger)
    other = augnet.AugNet(nn.Sequential(nn.Flatten(), nn.Linear(144, 4)), augnet.AugmentationLayer([T.Brightness()]))
    other_opt = torch.optim.SGD(other.parameters(), lr=0.1)
    before = snapshot(other, other_opt)
    with pytest.raises(ValueError, match="columns"):
        fit(other, loader(), optimizer=other_opt, epochs=1, callbacks=logger)
    assert unchanged(other, other_opt, before)


@pytest.mark.parametrize("every", [0, -1, 1.5, True, "2"])
def test_policy_logger_every_is_checked(tmp_path, every):
    with pytest.raises((ValueError, TypeError), match="every"):
        PolicyLogger(tmp_path, every=every)


def test_numpy_batches_name_the_fix():
    model, opt = model_and_opt()
    x, y = data(8)
    with pytest.raises(TypeError, match=r"tensor"):
        fit(model, [(np.asarray(x), np.asarray(y))], optimizer=opt, epochs=1)


@pytest.mark.parametrize("which", ["x", "y", "both"])
def test_numpy_arrays_instead_of_tensors_name_the_fix_and_change_nothing(which):
    # an array is iterable: it used to be taken for a data loader ("with a data loader, y must be None")
    model, opt = model_and_opt()
    x, y = data(8)
    before = copy.deepcopy(model.state_dict())
    xs = x.numpy() if which in ("x", "both") else x
    ys = y.numpy() if which in ("y", "both") else y
    name = "y" if which == "y" else "x"
    with pytest.raises(TypeError, match=rf"^{name} must be a tensor .*numpy\.ndarray.*torch\.as_tensor\({name}\)"):
        fit(model, xs, ys, opt, epochs=1, batch_size=4)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_temperature_annealing_refuses_a_start_whose_reciprocal_overflows():
    for start in (1e-39, 1e-300):
        with pytest.raises(ValueError, match="start"):
            TemperatureAnnealing(start=start, end=0.01)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(size="32"), ValueError, "size"),
        (dict(size=(0, 32)), ValueError, "size"),
        (dict(size=(32.0, 32)), ValueError, "size"),
        (dict(csv="yes"), TypeError, "csv"),
        (dict(tensorboard=1), TypeError, "tensorboard"),
        (dict(overwrite="no"), TypeError, "overwrite"),
        (dict(log_dir=3.5), TypeError, "log_dir"),
    ],
)
def test_policy_logger_checks_its_arguments_at_construction(tmp_path, kwargs, error, match):
    kwargs.setdefault("log_dir", tmp_path / "log")
    with pytest.raises(error, match=match):
        PolicyLogger(**kwargs)
    assert not (tmp_path / "log").exists()


@pytest.mark.parametrize("lam", [torch.tensor(0.5), np.float32(0.5), lambda epoch: torch.tensor(0.1)])
def test_lam_as_a_tensor_or_numpy_number_trains(lam):
    model, opt = model_and_opt()
    history = fit(model, loader(), optimizer=opt, epochs=1, lam=lam)
    assert history["step"]


def test_a_model_that_is_not_a_module_is_refused():
    _, opt = model_and_opt()
    with pytest.raises(TypeError, match="model"):
        fit("model", loader(), optimizer=opt, epochs=1)


# ----------------------------------------------------------------------- what a failed or odd run leaves


def test_a_failed_first_step_keeps_an_earlier_runs_log_even_with_overwrite(tmp_path):
    model, opt = model_and_opt()
    x, y = data()
    fit(model, x, y, opt, 1, 8, callbacks=PolicyLogger(tmp_path, every=1))
    earlier = (tmp_path / "policy.csv").read_text()
    model, opt = model_and_opt()
    with pytest.raises(RuntimeError):  # float targets: the first step fails
        fit(model, x, y.float(), opt, 1, 8, callbacks=PolicyLogger(tmp_path, every=1, overwrite=True))
    assert (tmp_path / "policy.csv").read_text() == earlier
    assert sorted(p.name for p in tmp_path.iterdir()) == ["policy.csv"]  # no temporary file left
    with pytest.raises(KeyboardInterrupt):  # a run that writes its first row, then stops: it replaced the log
        fit(model, x, y, opt, 1, 8, callbacks=[PolicyLogger(tmp_path, every=1, overwrite=True), _FailsAtStep(2)])
    rows = list(csv.DictReader((tmp_path / "policy.csv").open()))
    assert [int(r["step"]) for r in rows] == [1, 2] and sorted(p.name for p in tmp_path.iterdir()) == ["policy.csv"]


def test_a_failed_first_step_leaves_no_folder_and_no_tensorboard_file(tmp_path):
    model, opt = model_and_opt()
    x, y = data()
    for kwargs in (dict(csv=False, tensorboard=True), dict(tensorboard=True), {}):
        with pytest.raises(RuntimeError):
            fit(model, x, y.float(), opt, 1, 8, callbacks=PolicyLogger(tmp_path / "new" / "log", **kwargs))
        assert not (tmp_path / "new").exists()  # the folders it made are removed with what it wrote
    (tmp_path / "old").mkdir()
    fit(model, x, y, opt, 1, 8, callbacks=PolicyLogger(tmp_path / "old", csv=False, tensorboard=True))
    events = sorted(p.name for p in (tmp_path / "old").iterdir())
    assert len(events) == 1 and events[0].startswith("events.out.tfevents")
    with pytest.raises(RuntimeError):
        fit(model, x, y.float(), opt, 1, 8, callbacks=PolicyLogger(tmp_path / "old", csv=False, tensorboard=True))
    assert sorted(p.name for p in (tmp_path / "old").iterdir()) == events  # no empty event file of the failed run


def test_a_log_dir_the_temporary_file_probe_refuses_is_refused_at_construction(tmp_path, monkeypatch):
    import os
    import tempfile

    if os.path.isdir("/proc/self"):  # os.access says root may write there; nothing can be made in /proc
        with pytest.raises(ValueError, match=r"log_dir /proc/augnet_logs: /proc is not writable"):
            PolicyLogger("/proc/augnet_logs")

    def read_only(*args, **kwargs):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(tempfile, "TemporaryFile", read_only)  # a read-only file system that os.access allows
    with pytest.raises(ValueError, match=rf"PolicyLogger: the log folder log_dir {re.escape(str(tmp_path))} is not"):
        PolicyLogger(tmp_path)
    with pytest.raises(ValueError, match=r"cannot create the log folder log_dir .*below: .* is not writable"):
        PolicyLogger(tmp_path / "below")
    assert not (tmp_path / "below").exists()


def test_a_failed_first_step_puts_the_model_back_where_it_was(monkeypatch):
    # fit moves the model to its device; a first step that fails must move it back. No second device here:
    # the move is a dtype change standing in for it, made where fit moves the model.
    import augnet.training.loop as loop

    def moved(model, device):
        model.to(torch.float64)
        return torch.device("cpu")

    monkeypatch.setattr(loop, "training_device", moved)
    model, opt = model_and_opt()
    before = copy.deepcopy(model.state_dict())
    x, y = data()
    with pytest.raises(RuntimeError):
        fit(model, x, y, opt, 1, 8, device="cpu")
    state = model.state_dict()
    assert all(v.dtype == before[k].dtype and torch.equal(v, before[k]) for k, v in state.items())
    assert all(p.dtype == torch.float32 for p in model.parameters())


@pytest.mark.parametrize("empty", ["tensors", "loader"])
def test_accuracy_on_data_that_give_no_batch_is_the_error_fit_gives(empty):
    model, opt = model_and_opt()
    x, y = data()
    args = (x[:0], y[:0]) if empty == "tensors" else (DataLoader(TensorDataset(x[:0], y[:0]), batch_size=4),)
    model.eval()
    with pytest.raises(ValueError, match="the data gave no batches") as accuracy_error:
        augnet.training.accuracy(model, *args)
    assert not model.training
    with pytest.raises(ValueError, match="the data gave no batches") as fit_error:
        fit(model, *args, optimizer=opt, epochs=1, **({"batch_size": 4} if empty == "tensors" else {}))
    assert str(accuracy_error.value).split(":")[0] == str(fit_error.value).split(":")[0]


def test_accuracy_keeps_each_submodules_own_mode():
    # Fine-tuning with a frozen batch norm: accuracy() between epochs must not unfreeze it.
    trunk = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.LazyLinear(3))
    trunk(torch.rand(2, 3, 8, 8))
    trunk.train()
    trunk[1].eval()
    augnet.training.accuracy(trunk, torch.rand(8, 3, 8, 8), torch.zeros(8, dtype=torch.long))
    assert trunk.training and trunk[0].training and not trunk[1].training


def test_the_history_holds_the_task_loss_and_the_total_loss_that_callbacks_and_the_log_see(tmp_path):
    from augnet.training.loop import _progress_fields

    seen = []

    class Losses(augnet.training.Callback):
        def on_step_end(self, state):
            seen.append((state.task_loss, state.loss))

    for lam in (2.0, 0.0):
        seen.clear()
        model, opt = model_and_opt()
        log = PolicyLogger(tmp_path / str(lam), every=1)
        history = fit(model, *data(), opt, 1, 8, lam=lam, record_every=1, callbacks=[Losses(), log])
        assert history["loss"] == [task for task, _ in seen]
        assert history["total_loss"] == [total for _, total in seen]
        rows = list(csv.DictReader((tmp_path / str(lam) / "policy.csv").open()))
        assert [float(r["task_loss"]) for r in rows] == history["loss"]
        assert [float(r["loss"]) for r in rows] == history["total_loss"]
        regularised = all(total != task for task, total in zip(history["loss"], history["total_loss"], strict=True))
        assert regularised if lam else history["total_loss"] == history["loss"]  # lam = 0: the task loss alone
    assert _progress_fields(1.25, [], []) == {"task_loss": "1.250"}  # the bar says which loss it shows


def test_a_batch_size_given_with_a_loader_says_what_happened():
    model, opt = model_and_opt()
    before = snapshot(model, opt)
    # fit(model, loader, opt, 1, 8) and fit(model, loader, opt, 1, epochs=8) reach fit alike: one message for both.
    for call in (lambda: fit(model, loader(), opt, 1, 8), lambda: fit(model, loader(), opt, 1, epochs=8)):
        with pytest.raises(TypeError, match=r"epochs twice with a data loader \(1 after the optimizer, then 8\): "):
            call()
    with pytest.raises(TypeError, match=r"then 8\) and a batch size of 16: .*a batch size is the DataLoader's"):
        fit(model, loader(), opt, 1, 8, 16)
    assert unchanged(model, opt, before)


def test_a_policy_logger_logs_an_augerinos_widths_and_warns_of_a_model_without_augmentation(tmp_path, recwarn):
    torch.manual_seed(0)
    model = augnet.Augerino(nn.Sequential(nn.Flatten(), nn.Linear(144, 4)), init_width=0.2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    fit(model, *data(), opt, 1, 8, regularizer="augerino", callbacks=PolicyLogger(tmp_path / "augerino", every=1))
    rows = list(csv.DictReader((tmp_path / "augerino" / "policy.csv").open()))
    widths = model.augment.widths.tolist()
    names = list(augnet.augerino.LIE_GENERATORS)
    assert [float(rows[-1][f"layer0/{n}/magnitude"]) for n in names] == widths
    assert float(rows[-1]["layer0/rotate/range"]) == math.degrees(widths[names.index("rotate")])
    assert not [w for w in recwarn if "no augmentation layers" in str(w.message)]
    plain, plain_opt = model_and_opt(plain=True)
    logger = PolicyLogger(tmp_path / "plain", every=1)
    with pytest.warns(UserWarning, match="Sequential has no augmentation layers to log"):
        fit(plain, *data(), plain_opt, 1, 8, regularizer="none", callbacks=logger)
    recwarn.clear()
    fit(plain, *data(), plain_opt, 1, 8, regularizer="none", callbacks=logger)  # warned once
    assert not [w for w in recwarn if "no augmentation layers" in str(w.message)]


def test_a_record_key_of_fits_own_history_is_refused():
    model, opt = model_and_opt()
    for key in ("loss", "total_loss", "weights"):
        with pytest.raises(ValueError, match=f"record\\(\\) returned the key '{key}', which fit's history holds"):
            fit(model, *data(), opt, 1, 8, record=lambda key=key: {key: 1.0})


def test_overwrite_rewrites_the_earlier_log_in_place(tmp_path):
    log = tmp_path / "log"
    log.mkdir()
    (log / "policy.csv").write_text("an earlier run's log\n")
    (log / "policy.csv").chmod(0o640)
    inode = (log / "policy.csv").stat().st_ino
    model, opt = model_and_opt()
    fit(model, *data(), opt, 1, 8, callbacks=PolicyLogger(log, every=1, overwrite=True))
    assert (log / "policy.csv").stat().st_ino == inode  # the same file: its mode, owner and links kept
    assert (log / "policy.csv").stat().st_mode & 0o777 == 0o640
    assert (log / "policy.csv").read_text().startswith("step,epoch,")
    assert sorted(p.name for p in log.iterdir()) == ["policy.csv"]  # no temporary file


def test_the_failed_start_guard_lets_go_after_the_first_step(monkeypatch):
    from augnet.training import _checks

    released = []
    original = _checks._ModelState.release
    monkeypatch.setattr(_checks._ModelState, "release", lambda self: released.append(len(self.data)) or original(self))
    model, opt = model_and_opt()
    fit(model, *data(), opt, 2, 8)
    assert released == [len(list(model.parameters()))]  # once, at the first step, with what it kept


def test_overwrite_with_a_run_of_no_step_keeps_the_earlier_log(tmp_path):
    log = tmp_path / "log"
    log.mkdir()
    (log / "policy.csv").write_text("an earlier run's log\n")
    model, opt = model_and_opt()
    fit(model, *data(), opt, 1, 8, start_epoch=1, callbacks=PolicyLogger(log, every=1, overwrite=True))  # no step
    assert (log / "policy.csv").read_text() == "an earlier run's log\n"
    fresh = tmp_path / "fresh"
    fit(model, *data(), opt, 1, 8, start_epoch=1, callbacks=PolicyLogger(fresh, every=1, overwrite=True))
    assert (fresh / "policy.csv").read_text().startswith("step,epoch,")  # a new log: its header
