"""fit and its callbacks as a user of Lightning or of a plain PyTorch loop calls them: a run of no epoch, ``shuffle``
with a data loader, a OneCycleLR sized per step but stepped per epoch, a data set given without a loader, a
torchvision trunk on a DataLoader, batches that are not pairs, an empty loader, one-hot labels, schedulers per epoch
and per step, stopping early from a callback and a resume that matches the uninterrupted run bit for bit."""

from __future__ import annotations

import io
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

import augnet
from augnet.training import Callback, PolicyLogger, TemperatureAnnealing, WeightWarmup, accuracy, fit
from augnet.transforms import image as T


def _data(n=16, classes=3, size=8):
    g = torch.Generator().manual_seed(0)
    return torch.rand(n, 3, size, size, generator=g), torch.randint(0, classes, (n,), generator=g)


def _augnet(classes=3):
    torch.manual_seed(0)
    trunk = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(4, classes))  # fmt: skip
    model = augnet.AugNet(trunk, augnet.AugmentationLayer([T.Rotate(), T.TranslateX(), T.Brightness()]))
    return model, torch.optim.Adam(augnet.param_groups(model), lr=1e-2)


def _state(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


def _same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _modes(model):
    return [m.training for m in model.modules()]


# ------------------------------------------------------------------------------------------ a run of no epoch


@pytest.mark.parametrize("how", [dict(epochs=0), dict(epochs=2, start_epoch=2)])
@pytest.mark.parametrize("mode", ["eval", "frozen_bn"])
def test_a_run_of_no_epoch_leaves_every_module_in_the_mode_it_was_given(how, mode):
    # It put the whole model in training mode (model.train()) though nothing trained: an eval() model came back
    # training, and a batch norm frozen on purpose (bn.eval() in a training model) was unfrozen.
    x, y = _data()
    model, opt = _augnet()
    if mode == "eval":
        model.eval()
    else:
        model.trunk[1].eval()
    modes, before = _modes(model), _state(model)
    history = fit(model, x, y, opt, batch_size=4, **how)
    assert _modes(model) == modes
    assert _same(_state(model), before) and not opt.state
    assert history == {"step": [], "loss": [], "total_loss": [], "weights": [], "magnitudes": []}


def test_a_run_of_no_epoch_on_a_loader_keeps_the_mode_and_still_runs_the_run_hooks(tmp_path):
    x, y = _data()
    model, opt = _augnet()
    model.eval()
    seen = []

    class Tape(Callback):
        def on_train_start(self, state):
            seen.append(("start", state.model.training))

        def on_train_end(self, state):
            seen.append(("end", state.model.training))

    logger = PolicyLogger(tmp_path / "log")
    fit(model, DataLoader(TensorDataset(x, y), batch_size=4), opt, 0, callbacks=[Tape(), logger])
    assert seen == [("start", False), ("end", False)] and not model.training
    assert (tmp_path / "log" / "policy.csv").read_text().count("\n") == 1  # the header only, as before


def test_a_run_of_no_epoch_says_nothing_of_parameters_it_did_not_train():
    # It raised NonFiniteLossError "after step 0 the parameters are not finite (the gradients of a step with a
    # finite loss were not)" for a model given with a NaN parameter, though no step ran.
    x, y = _data()
    model, opt = _augnet()
    with torch.no_grad():
        model.trunk[-1].bias[0] = float("nan")
    before = _state(model)
    assert fit(model, x, y, opt, 0, 4)["step"] == []
    assert all(torch.equal(v, before[k]) or (v.isnan() == before[k].isnan()).all() for k, v in _state(model).items())
    with pytest.raises(augnet.training.NonFiniteLossError):  # a run that trains still says it
        fit(model, x, y, opt, 1, 4)


# ------------------------------------------------------------------------------------ shuffle with a loader


def test_shuffle_false_with_a_shuffling_loader_is_refused_before_anything_changes():
    # shuffle is for tensors: with a loader it was ignored, and a shuffling loader went on shuffling silently.
    x, y = _data()
    model, opt = _augnet()
    model.eval()
    before, modes = _state(model), _modes(model)
    loader = DataLoader(TensorDataset(x, y), batch_size=4, shuffle=True)
    with pytest.raises(ValueError, match=r"shuffle=False applies to tensor inputs only.*shuffles its own batches.*"
                                         r"DataLoader\(\.\.\., shuffle=False\)"):  # fmt: skip
        fit(model, loader, opt, 1, shuffle=False)
    assert _same(_state(model), before) and _modes(model) == modes and not opt.state


def test_shuffle_false_with_batches_in_order_says_what_happens_and_is_taken():
    x, y = _data()
    runs = []
    for batches in (DataLoader(TensorDataset(x, y), batch_size=4, shuffle=False), None):
        model, opt = _augnet()
        batches = list(DataLoader(TensorDataset(x, y), batch_size=4)) if batches is None else batches
        fit(model, batches, optimizer=opt, epochs=1, shuffle=False, generator=torch.Generator().manual_seed(0))
        runs.append(_state(model))
    assert _same(runs[0], runs[1])


def test_a_loader_without_fits_shuffle_trains_as_it_did_and_tensors_take_shuffle_false():
    x, y = _data()
    runs = []
    for kwargs in (dict(), dict(shuffle=True)):  # the default, said or not: the loader orders the batches
        model, opt = _augnet()
        loader = DataLoader(TensorDataset(x, y), batch_size=4)
        fit(model, loader, opt, 2, generator=torch.Generator().manual_seed(0), **kwargs)
        runs.append(_state(model))
    model, opt = _augnet()
    fit(model, x, y, opt, 2, 4, generator=torch.Generator().manual_seed(0), shuffle=False)  # as the loader in order
    assert _same(runs[0], runs[1]) and _same(runs[0], _state(model))


# ----------------------------------------------------------------------------------- schedulers: epoch or step


def test_a_one_cycle_schedule_sized_per_step_but_stepped_per_epoch_is_warned_of():
    # total_steps = epochs x steps per epoch, stepped once per epoch (the default interval): the schedule covered 2
    # of its 8 steps, the learning rate stayed near its warm-up start, silently.
    x, y = _data()
    model, opt = _augnet()
    cycle = torch.optim.lr_scheduler.OneCycleLR(opt, 0.1, epochs=2, steps_per_epoch=4)
    with pytest.warns(UserWarning, match=r"OneCycleLR has total_steps=8 \(8 left: 2 epochs x 4 optimizer steps\).*"
                                         r"scheduler_interval='step'"):  # fmt: skip
        fit(model, x, y, opt, 2, 4, scheduler=cycle)
    assert cycle.last_epoch == 2  # stepped as asked: a warning, the same run


@pytest.mark.parametrize("interval, total", [("step", 8), ("epoch", 2), ("epoch", 5)])
def test_a_one_cycle_schedule_that_fits_its_interval_is_not_warned_of(interval, total):
    x, y = _data()
    model, opt = _augnet()
    cycle = torch.optim.lr_scheduler.OneCycleLR(opt, 0.1, total_steps=total)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit(model, x, y, opt, 2, 4, scheduler=cycle, scheduler_interval=interval)
    assert cycle.last_epoch == (8 if interval == "step" else 2)


@pytest.mark.parametrize("interval, accumulate, steps", [("epoch", 1, 3), ("step", 1, 12), ("step", 2, 6)])
def test_a_scheduler_steps_once_per_epoch_or_once_per_optimizer_step(interval, accumulate, steps):
    x, y = _data()
    model, opt = _augnet()
    sched = torch.optim.lr_scheduler.StepLR(opt, 1, 0.5)
    lrs = []

    class Lr(Callback):
        def on_before_optimizer_step(self, state):
            lrs.append(state.optimizer.param_groups[0]["lr"])

    fit(model, x, y, opt, 3, 4, scheduler=sched, scheduler_interval=interval, accumulate=accumulate, callbacks=Lr())
    assert sched.last_epoch == steps and opt.param_groups[0]["lr"] == pytest.approx(1e-2 * 0.5**steps)
    per_epoch = 4 // accumulate
    if interval == "epoch":
        assert lrs == [pytest.approx(1e-2 * 0.5**e) for e in range(3) for _ in range(per_epoch)]
    else:
        assert lrs == [pytest.approx(1e-2 * 0.5**s) for s in range(steps)]


# --------------------------------------------------------------------------------------- data as users give it


def test_a_data_set_given_without_a_loader_is_refused_saying_how_to_batch_it():
    x, y = _data()
    model, opt = _augnet()
    data = TensorDataset(x, y)
    with pytest.raises(TypeError, match=r"got TensorDataset; a TensorDataset gives single samples: wrap it in "
                                        r"torch\.utils\.data\.DataLoader\(dataset, batch_size=\.\.\.\)"):  # fmt: skip
        fit(model, data, opt, 1)
    with pytest.raises(TypeError, match="got Subset; a Subset gives single samples"):
        accuracy(model, torch.utils.data.Subset(data, [0, 1]))

    class Samples(torch.utils.data.IterableDataset):  # iterable, but of single samples
        def __iter__(self):
            return iter(zip(x, y, strict=True))

    with pytest.raises(ValueError, match=r"batch 0: the targets are a 0-d tensor.*DataLoader\(dataset, batch_size"):
        fit(model, Samples(), opt, 1)


def test_a_torchvision_trunk_trains_on_a_dataloader_of_a_tensor_dataset():
    torchvision = pytest.importorskip("torchvision")
    x, y = _data(8, classes=10, size=32)
    torch.manual_seed(0)
    trunk = torchvision.models.resnet18(weights=None, num_classes=10)
    model = augnet.AugNet(trunk, augnet.AugmentationLayer([T.Rotate(), T.HorizontalFlip()]), eval_copies=2)
    opt = torch.optim.SGD(augnet.param_groups(model), lr=1e-2, momentum=0.9)
    loader = DataLoader(TensorDataset(x, y), batch_size=4, shuffle=True, num_workers=0)
    history = fit(model, loader, opt, 1, generator=torch.Generator().manual_seed(0), record_every=1)
    assert history["step"] == [1, 2] and all(torch.isfinite(torch.tensor(history["loss"])))
    assert model.training and 0.0 <= accuracy(model, loader, generator=torch.Generator().manual_seed(1)) <= 1.0


class _Dicts(Dataset):
    def __init__(self, x, y, kind):
        self.x, self.y, self.kind = x, y, kind

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"image": self.x[i], "label": self.y[i]} if self.kind == "dict" else (self.x[i], self.y[i], i)


@pytest.mark.parametrize("kind, what", [("dict", r"a dict with keys \['image', 'label'\]"), ("triple", "a list of 3")])
def test_batches_that_are_not_pairs_are_refused_naming_the_batch(kind, what):
    x, y = _data()
    model, opt = _augnet()
    model.eval()
    before = _state(model)
    with pytest.raises(ValueError, match=rf"batch 0 is not an \(inputs, targets\) pair: {what}"):
        fit(model, DataLoader(_Dicts(x, y, kind), batch_size=4), opt, 1)
    assert _same(_state(model), before) and not model.training


def test_an_empty_loader_is_refused_before_anything_changes():
    x, y = _data()
    model, opt = _augnet()
    model.eval()
    for loader in (DataLoader(TensorDataset(x[:0], y[:0]), batch_size=4), DataLoader(TensorDataset(x[:3], y[:3]),
                   batch_size=4, drop_last=True), []):  # fmt: skip
        with pytest.raises(ValueError, match="the data gave no batches"):
            fit(model, loader, opt, 1)
    assert not model.training and not opt.state


def test_one_hot_float_labels_train_with_cross_entropy_and_are_the_losss_error_with_nll():
    x, y = _data()
    soft = F.one_hot(y, 3).float()
    torch.manual_seed(0)
    plain = nn.Sequential(nn.Flatten(), nn.Linear(192, 3))
    opt = torch.optim.SGD(plain.parameters(), lr=0.1)
    history = fit(plain, x, soft, opt, 1, 4, regularizer="none", loss_fn=F.cross_entropy, shuffle=False, record_every=1)
    torch.manual_seed(0)
    again = nn.Sequential(nn.Flatten(), nn.Linear(192, 3))
    same = fit(again, x, y, torch.optim.SGD(again.parameters(), lr=0.1), 1, 4, regularizer="none",
               loss_fn=F.cross_entropy, shuffle=False, record_every=1)  # fmt: skip
    assert history["loss"] == pytest.approx(same["loss"], abs=1e-6)  # one-hot probabilities: the same loss
    model, opt = _augnet()
    before = _state(model)
    with pytest.raises(RuntimeError):  # nll_loss's own error (docs/bad_input.md); the model is put back
        fit(model, x, soft, opt, 1, 4)
    assert _same(_state(model), before)


# ---------------------------------------------------------------------------------- stopping early, resuming


def test_a_callback_stops_training_early_by_raising_and_the_model_keeps_the_steps_that_completed():
    # No hook's return value stops fit (the hooks return nothing, as documented); raising does.
    x, y = _data()

    class Enough(Exception):
        pass

    class StopAt(Callback):
        def on_step_end(self, state):
            if state.step == 3:
                self.history = state.history
                raise Enough

    model, opt = _augnet()
    stop = StopAt()
    with pytest.raises(Enough):
        fit(model, x, y, opt, 5, 4, shuffle=False, generator=torch.Generator().manual_seed(0), callbacks=stop,
            record_every=1)  # fmt: skip
    reference, ref_opt = _augnet()  # the same three steps, run to the end
    fit(reference, x[:12], y[:12], ref_opt, 1, 4, shuffle=False, generator=torch.Generator().manual_seed(0))
    assert stop.history["step"] == [1, 2, 3] and model.training and _same(_state(model), _state(reference))

    class Returns(Callback):
        def on_epoch_end(self, state):
            return True  # not a stop signal

    model, opt = _augnet()
    assert fit(model, x, y, opt, 2, 4, record_every=1, callbacks=Returns())["step"] == list(range(1, 9))


def test_a_resume_from_a_checkpoint_matches_the_uninterrupted_run_bit_for_bit():
    x, y = _data()

    def start():
        model, opt = _augnet()
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=6)
        return model, opt, sched, torch.Generator().manual_seed(0)

    def cbs():
        return [TemperatureAnnealing(1.0, 0.1), WeightWarmup(1)]

    kw = dict(lam=augnet.LambdaSchedule((0.5, 0.05), (2,)), scheduler_interval="step", accumulate=2)
    model, opt, sched, g = start()
    fit(model, x, y, opt, 3, 4, scheduler=sched, generator=g, callbacks=cbs(), **kw)
    uninterrupted = _state(model)

    class Checkpoint(Callback):
        def on_epoch_end(self, state):
            buf = io.BytesIO()
            torch.save({"model": state.model.state_dict(), "opt": state.optimizer.state_dict(),
                        "sched": sched.state_dict(), "g": g.get_state(), "epoch": state.epoch}, buf)  # fmt: skip
            self.saved = buf.getvalue()
            raise KeyboardInterrupt  # killed after epoch 0

    model, opt, sched, g = start()
    ck = Checkpoint()
    with pytest.raises(KeyboardInterrupt):
        fit(model, x, y, opt, 3, 4, scheduler=sched, generator=g, callbacks=[*cbs(), ck], **kw)
    model, opt, sched, g = start()
    saved = torch.load(io.BytesIO(ck.saved), weights_only=True)
    model.load_state_dict(saved["model"])
    opt.load_state_dict(saved["opt"])
    sched.load_state_dict(saved["sched"])
    g.set_state(saved["g"])
    fit(model, x, y, opt, 3, 4, scheduler=sched, generator=g, callbacks=cbs(), start_epoch=saved["epoch"] + 1, **kw)
    assert _same(_state(model), uninterrupted)
