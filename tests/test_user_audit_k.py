"""fit as a user trains with it: a call inside ``torch.no_grad()`` or ``inference_mode()``, losses and regularisers
that are not a scalar to backpropagate, frozen parameters, a OneCycleLR too short for the run, a last batch of one
sample that batch norm refuses, a Ctrl-C in the middle of a step, integer images, a validation loader given as ``y``
and the selection schedules on a model without augmentation layers."""

from __future__ import annotations

import contextlib
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import augnet
from augnet.training import Callback, TemperatureAnnealing, WeightWarmup, fit
from augnet.transforms import image as T


def _data(n=16, classes=3):
    g = torch.Generator().manual_seed(0)
    return torch.rand(n, 3, 8, 8, generator=g), torch.randint(0, classes, (n,), generator=g)


def _augnet(bn=True, classes=3):
    torch.manual_seed(0)
    layers = [nn.Conv2d(3, 4, 3, padding=1), *([nn.BatchNorm2d(4)] if bn else []), nn.ReLU()]
    trunk = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, classes))
    model = augnet.AugNet(trunk, augnet.AugmentationLayer([T.Rotate(), T.Brightness()]))
    return model, torch.optim.Adam(model.parameters(), lr=1e-2)


def _plain(classes=3):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, classes))
    return model, torch.optim.Adam(model.parameters(), lr=1e-2)


def _state(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


def _same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _gen():
    return torch.Generator().manual_seed(0)


def test_fit_inside_no_grad_trains_as_outside_it_and_gives_the_mode_back():
    x, y = _data()
    model, opt = _augnet()
    fit(model, x, y, opt, 2, 8, generator=_gen())
    outside = _state(model)
    model, opt = _augnet()
    with torch.no_grad():
        history = fit(model, x, y, opt, 2, 8, generator=_gen())  # it was "element 0 of tensors does not require grad"
        assert not torch.is_grad_enabled()
    assert _same(_state(model), outside) and history["step"] == [1]


def test_fit_inside_inference_mode_is_refused_before_anything_changes():
    x, y = _data()
    model, opt = _augnet()
    model.eval()
    before = _state(model)
    with torch.inference_mode(), pytest.raises(RuntimeError, match=r"inference_mode\(\).*call it outside"):
        fit(model, x, y, opt, 1, 8)
    assert _same(_state(model), before) and not model.training and not opt.state


@pytest.mark.parametrize(
    ("loss_fn", "kind", "match"),
    [
        (
            lambda o, t: F.nll_loss(o, t, reduction="none"),
            ValueError,
            r"loss_fn .*one element, got a float32 tensor "
            r"of shape \(8,\).*reduction='mean'",
        ),
        (lambda o, t: F.nll_loss(o, t).item(), TypeError, r"loss_fn .*floating-point tensor.*got a float"),
        (lambda o, t: (F.nll_loss(o, t), o), TypeError, r"loss_fn .*got a tuple"),
        (lambda o, t: (o.argmax(1) != t).sum(), TypeError, r"loss_fn .*got a int64 tensor"),  # it trained silently
    ],
    ids=["unreduced", "float", "tuple", "integer"],
)
def test_a_loss_fn_that_gives_no_scalar_loss_is_named_at_the_first_step(loss_fn, kind, match):
    x, y = _data()
    model, opt = _augnet()
    before = _state(model)
    with pytest.raises(kind, match=match):
        fit(model, x, y, opt, 1, 8, loss_fn=loss_fn)
    assert _same(_state(model), before) and not opt.state  # the first step's guard put the model back


def test_a_one_element_loss_still_trains_as_the_scalar_one():
    x, y = _data()
    model, opt = _augnet()
    fit(model, x, y, opt, 1, 8, generator=_gen())
    scalar = _state(model)
    model, opt = _augnet()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit(model, x, y, opt, 1, 8, generator=_gen(), loss_fn=lambda o, t: F.nll_loss(o, t).reshape(1))
    assert _same(_state(model), scalar)


@pytest.mark.parametrize(
    ("regularizer", "kind", "match"),
    [
        (lambda m: None, TypeError, r"regularizer must return .*NoneType"),
        (
            lambda m: m.trunk[0].weight.sum() * torch.ones(2),
            ValueError,
            r"regularizer must return a tensor of one "
            r"element .*shape \(2,\)",
        ),
    ],
    ids=["None", "two elements"],
)
def test_a_regularizer_that_gives_no_scalar_is_named(regularizer, kind, match):
    x, y = _data()
    model, opt = _augnet()
    with pytest.raises(kind, match=match):
        fit(model, x, y, opt, 1, 8, regularizer=regularizer)


def test_a_detached_task_loss_is_warned_of_and_refused_when_nothing_else_has_a_gradient():
    x, y = _data()
    model, opt = _augnet()
    detached = lambda o, t: F.nll_loss(o, t).detach()  # noqa: E731
    with pytest.warns(UserWarning, match=r"loss_fn's loss of step 1 has no gradient.*regulariser alone") as caught:
        fit(model, x, y, opt, 2, 8, loss_fn=detached)  # it trained the policy alone, silently
    assert sum("no gradient" in str(w.message) for w in caught) == 1  # once per fit
    model, opt = _augnet()
    with pytest.raises(ValueError, match=r"loss of step 1 \(epoch 0\) has no gradient: loss_fn's loss does not depend"):
        fit(model, x, y, opt, 1, 8, loss_fn=detached, regularizer="none")


def test_frozen_parameters_are_warned_of_and_a_loss_without_gradient_named():
    x, y = _data()
    model, opt = _augnet()
    for p in model.parameters():
        p.requires_grad_(False)
    with (
        pytest.warns(UserWarning, match="all frozen"),
        pytest.raises(ValueError, match="every parameter of the model is frozen"),
    ):
        fit(model, x, y, opt, 1, 8)
    model = _augnet()[0]
    for p in model.trunk.parameters():
        p.requires_grad_(False)
    opt = torch.optim.Adam(model.trunk.parameters())  # it trained nothing, silently
    with pytest.warns(UserWarning, match=r"optimizer's 6 parameters of the model are all frozen"):
        fit(model, x, y, opt, 1, 8, lam=0)


def test_a_one_cycle_schedule_shorter_than_the_run_is_refused_before_training():
    x, y = _data()
    model, opt = _augnet()
    before = _state(model)
    short = torch.optim.lr_scheduler.OneCycleLR(opt, 0.1, total_steps=3)
    with pytest.raises(
        ValueError,
        match=r"OneCycleLR has total_steps=3 .*step it 4 times \(2 epochs x 2 optimizer "
        r"steps.*total_steps=4",
    ):
        fit(model, x, y, opt, 2, 8, scheduler=short, scheduler_interval="step")  # it failed at step 4
    assert _same(_state(model), before) and not opt.state
    with pytest.raises(ValueError, match=r"total_steps=1 .*step it 2 times \(2 epochs, scheduler_interval='epoch'"):
        fit(model, x, y, opt, 2, 8, scheduler=torch.optim.lr_scheduler.OneCycleLR(opt, 0.1, total_steps=1))
    exact = torch.optim.lr_scheduler.OneCycleLR(opt, 0.1, total_steps=4)
    fit(model, x, y, opt, 2, 8, scheduler=exact, scheduler_interval="step")  # as long as the run: trains
    assert exact.last_epoch == 4


def test_a_resumed_one_cycle_schedule_counts_the_steps_it_took():
    x, y = _data()
    model, opt = _augnet()
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, 0.1, total_steps=4)
    for _ in range(2):
        opt.step()
        sched.step()  # a checkpoint after epoch 0 of 2 epochs of 2 steps
    with pytest.raises(ValueError, match=r"total_steps=4 \(2 left\) and fit would step it 4 times"):
        fit(model, x, y, opt, 2, 8, scheduler=sched, scheduler_interval="step")  # from epoch 0 again: too many
    fit(model, x, y, opt, 2, 8, scheduler=sched, scheduler_interval="step", start_epoch=1)


def _bn1d():
    torch.manual_seed(0)
    trunk = nn.Sequential(nn.Flatten(), nn.Linear(192, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))
    model = augnet.AugNet(trunk, augnet.AugmentationLayer([T.Rotate()]))
    return model, torch.optim.Adam(model.parameters(), lr=1e-2)


class _After(Callback):
    def __init__(self, step):
        self.step = step

    def on_step_end(self, state):
        if state.step == self.step:
            raise KeyboardInterrupt


def test_a_last_batch_of_one_sample_that_batch_norm_refuses_is_named_and_the_model_kept_at_the_last_step():
    x, y = _data(17)
    model, opt = _bn1d()
    with contextlib.suppress(KeyboardInterrupt):
        fit(model, x, y, opt, 1, 8, generator=_gen(), callbacks=_After(2))
    two_steps = _state(model)
    model, opt = _bn1d()
    with pytest.raises(
        ValueError,
        match=r"step 3 \(epoch 0\) got a batch of one sample, on which the model's batch "
        r"norm cannot train .*17 samples in batches of 8 leave one",
    ):
        fit(model, x, y, opt, 1, 8, generator=_gen())
    assert _same(_state(model), two_steps)  # the batch-norm statistics of the failed pass are put back
    model, opt = _bn1d()
    with pytest.raises(ValueError, match=r"batch of one sample.*drop_last=True"):
        fit(model, DataLoader(TensorDataset(x, y), batch_size=8), opt, 1)
    model, opt = _bn1d()
    with pytest.raises(ValueError, match=r"batch_size=1 makes every batch one sample"):
        fit(model, x, y, opt, 1, 1)


def test_a_ctrl_c_in_the_middle_of_a_step_leaves_the_model_as_the_last_step_did():
    x, y = _data(24)
    model, opt = _augnet()
    with contextlib.suppress(KeyboardInterrupt):
        fit(model, x, y, opt, 2, 8, generator=_gen(), callbacks=_After(2))
    two_steps = _state(model)
    calls = []

    def interrupted(out, target):
        calls.append(1)
        if len(calls) == 3:  # in step 3, after its forward pass (batch norm's statistics, the effects, the count)
            raise KeyboardInterrupt
        return F.nll_loss(out, target)

    model, opt = _augnet()
    with pytest.raises(KeyboardInterrupt):
        fit(model, x, y, opt, 2, 8, generator=_gen(), loss_fn=interrupted)
    assert _same(_state(model), two_steps) and model.training


def test_integer_images_into_a_float_model_are_named_at_the_first_step():
    x, y = _data()
    model, opt = _plain()
    before = _state(model)
    with pytest.raises(
        TypeError,
        match=r"inputs are integers \(uint8\) and the model's parameters float32: convert "
        r"them with x.float\(\) .*/ 255.*Input type \(unsigned char\)",
    ):
        fit(model, (x * 255).to(torch.uint8), y, opt, 1, 8, regularizer="none", loss_fn=F.cross_entropy)
    assert _same(_state(model), before)
    torch.manual_seed(0)  # integer inputs a model takes (an embedding) train as before
    words = nn.Sequential(nn.Embedding(10, 4), nn.Flatten(), nn.Linear(12, 3))
    fit(
        words,
        torch.randint(0, 10, (16, 3)),
        y,
        torch.optim.SGD(words.parameters(), lr=0.1),
        1,
        8,
        regularizer="none",
        loss_fn=F.cross_entropy,
    )


def test_a_validation_loader_given_as_y_is_named():
    x, y = _data()
    model, opt = _augnet()
    train, val = DataLoader(TensorDataset(x, y), batch_size=8), DataLoader(TensorDataset(x, y), batch_size=8)
    with pytest.raises(
        ValueError,
        match=r"y must be None.*got y a DataLoader; fit takes no validation data.*"
        r"on_epoch_end.*accuracy\(state.model, val_loader\)",
    ):
        fit(model, train, val, opt, 1)


@pytest.mark.parametrize("schedule", [TemperatureAnnealing(1.0, 0.1), WeightWarmup(1)], ids=repr)
def test_a_selection_schedule_on_a_model_without_augmentation_layers_is_warned_of(schedule):
    x, y = _data()
    model, opt = _plain()
    with pytest.warns(UserWarning, match=f"{type(schedule).__name__}: Sequential has no augmentation layers") as w:
        fit(model, x, y, opt, 1, 8, regularizer="none", loss_fn=F.cross_entropy, callbacks=schedule)
    assert w[0].filename == __file__  # the user's line


def test_logits_given_to_the_default_nll_loss_are_warned_of_once():
    x, y = _data()
    model, opt = _plain()  # logits: nll_loss of them is minus the target's logit, unbounded (it trained silently)
    with pytest.warns(
        UserWarning, match=r"outputs are not log-probabilities .*loss_fn=torch.nn.functional.cross_"
    ) as w:
        fit(model, x, y, opt, 2, 8, regularizer="none")
    assert len([m for m in w if "log-probabilities" in str(m.message)]) == 1 and w[0].filename == __file__
    torch.manual_seed(0)
    for model in (
        nn.Sequential(_plain()[0], nn.LogSoftmax(1)),
        augnet.AugNet(_plain()[0], augnet.AugmentationLayer([T.Rotate()]), train_copies=3),
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # log-probabilities, and an AugNet's mean of them: no warning
            fit(
                model,
                x,
                y,
                torch.optim.Adam(model.parameters()),
                1,
                8,
                amp=True,
                regularizer="none" if isinstance(model, nn.Sequential) else "selective",
            )
