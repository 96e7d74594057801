"""fit's callbacks as a user gives them: PolicyLogger's last row of a run stopped between epochs, and the forms of
``callbacks`` (a generator, a set, a class, one instance twice)."""

from __future__ import annotations

import csv

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import augnet
from augnet.training import Callback, PolicyLogger, TemperatureAnnealing, WeightWarmup, fit
from augnet.transforms import image as T

LAM = augnet.LambdaSchedule((0.5, 0.05), milestones=(1,))


def _setup():
    torch.manual_seed(0)
    x, y = torch.rand(24, 3, 6, 6), torch.randint(0, 3, (24,))
    trunk = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(108, 3), torch.nn.LogSoftmax(1))
    model = augnet.AugNet(trunk, augnet.AugmentationLayer([T.Rotate(), T.ShearX()]))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    return x, y, model, opt, torch.Generator().manual_seed(0)


def _layer(model):
    return next(m for m in model.modules() if isinstance(m, augnet.AugmentationLayer))


def _rows(folder) -> dict[str, dict]:
    with open(folder / "policy.csv", newline="") as file:
        return {row["step"]: row for row in csv.DictReader(file)}


class _StopAtEpochStart(Callback):
    def __init__(self, epoch):
        self.epoch = epoch

    def on_epoch_start(self, state):
        if state.epoch == self.epoch:
            raise KeyboardInterrupt


class _InterruptedLoader:
    """A loader of 6 batches that a Ctrl-C stops as epoch ``stop`` loads its first batch."""

    def __init__(self, x, y, stop):
        self.loader, self.stop, self.epoch = DataLoader(TensorDataset(x, y), batch_size=4), stop, -1

    def __len__(self):
        return len(self.loader)

    def __iter__(self):
        self.epoch += 1
        if self.epoch == self.stop:
            raise KeyboardInterrupt
        return iter(self.loader)


@pytest.mark.parametrize("where", ["on_epoch_start", "loading"])
def test_the_last_row_of_a_run_stopped_as_an_epoch_begins_is_its_last_steps(tmp_path, where):
    # The run stops after step 6, the last of epoch 0, as epoch 1 begins: its last row (step 6) was written with
    # epoch 1, epoch 1's lambda (0.05 for the 0.5 that step 6 used) and the weights at the temperature
    # TemperatureAnnealing had set for epoch 1, not those of step 6.
    x, y, model, opt, g = _setup()
    fit(model, DataLoader(TensorDataset(x, y), batch_size=4), opt, 3, lam=LAM, generator=g,
        callbacks=[TemperatureAnnealing(1.0, 0.1), PolicyLogger(tmp_path / "whole", every=2)])  # fmt: skip
    x, y, model, opt, g = _setup()
    data = _InterruptedLoader(x, y, stop=1 if where == "loading" else None)
    callbacks = [TemperatureAnnealing(1.0, 0.1), PolicyLogger(tmp_path / "cut", every=4)]
    if where == "on_epoch_start":
        callbacks.append(_StopAtEpochStart(1))
    with pytest.raises(KeyboardInterrupt):
        fit(model, data, opt, 3, lam=LAM, generator=g, callbacks=callbacks)
    cut, whole = _rows(tmp_path / "cut"), _rows(tmp_path / "whole")
    assert list(cut) == ["1", "4", "6"]
    assert cut["6"]["epoch"] == "0" and float(cut["6"]["lambda"]) == 0.5
    assert cut["6"] == whole["6"]  # the uninterrupted run's row of step 6, value for value
    assert _layer(model).temperature == pytest.approx(0.1**0.5)  # the layer is left as the run left it


def test_a_run_stopped_in_an_epoch_writes_its_last_row_as_before(tmp_path):
    x, y, model, opt, g = _setup()
    fit(model, x, y, opt, 2, 4, lam=LAM, generator=g, shuffle=False,
        callbacks=[TemperatureAnnealing(1.0, 0.1), PolicyLogger(tmp_path / "whole", every=1)])  # fmt: skip

    class Stop(Callback):
        def on_step_end(self, state):
            if state.step == 9:
                raise KeyboardInterrupt

    x, y, model, opt, g = _setup()
    with pytest.raises(KeyboardInterrupt):
        fit(model, x, y, opt, 2, 4, lam=LAM, generator=g, shuffle=False,
            callbacks=[TemperatureAnnealing(1.0, 0.1), PolicyLogger(tmp_path / "cut", every=4), Stop()])  # fmt: skip
    cut, whole = _rows(tmp_path / "cut"), _rows(tmp_path / "whole")
    assert list(cut) == ["1", "4", "8", "9"] and all(cut[s] == whole[s] for s in cut)


def _recorder():
    class Seen(Callback):
        def __init__(self):
            self.ends = []

        def on_epoch_end(self, state):
            self.ends.append(state.epoch)

    return Seen()


@pytest.mark.parametrize("form", [lambda c: (d for d in [c]), lambda c: iter([c]), lambda c: map(lambda d: d, [c])])
def test_fit_takes_callbacks_from_a_generator_or_iterator(form):
    # a generator was refused with "got ['generator']", as if it were the callback
    x, y, model, opt, g = _setup()
    seen, warm = _recorder(), WeightWarmup(1)
    fit(model, x, y, opt, 2, 8, generator=g, callbacks=form(seen))
    assert seen.ends == [0, 1]
    x, y, model, opt, g = _setup()
    plain = fit(model, x, y, opt, 2, 8, generator=g, callbacks=[warm])
    x, y, model, opt, g = _setup()
    assert fit(model, x, y, opt, 2, 8, generator=g, callbacks=(c for c in [warm])) == plain


def test_fit_takes_one_callback_a_tuple_or_a_list_as_before():
    for form in (lambda c: c, lambda c: (c,), lambda c: [c]):
        x, y, model, opt, g = _setup()
        seen = _recorder()
        fit(model, x, y, opt, 2, 8, generator=g, callbacks=form(seen))
        assert seen.ends == [0, 1]


@pytest.mark.parametrize(
    "form, match",
    [
        (lambda c: {c}, r"callbacks .*got a set"),
        (lambda c: {"log": c}, r"callbacks .*got a dict"),
        (lambda c: [WeightWarmup], r"the class WeightWarmup.*pass instances, e\.g\. WeightWarmup\(\)"),
        (lambda c: WeightWarmup, r"the class WeightWarmup"),
    ],
)
def test_callbacks_in_an_unordered_form_or_classes_are_refused_naming_them(form, match):
    x, y, model, opt, g = _setup()
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(TypeError, match=match):
        fit(model, x, y, opt, 1, 8, generator=g, callbacks=form(_recorder()))
    assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before, strict=True))


def test_one_logger_listed_twice_is_refused_before_training(tmp_path):
    # each hook ran twice: every row of the log was written twice
    x, y, model, opt, g = _setup()
    logger = PolicyLogger(tmp_path / "log", every=1)
    with pytest.raises(ValueError, match=r"callbacks holds the same PolicyLogger instance twice \(items 0 and 2\)"):
        fit(model, x, y, opt, 1, 8, generator=g, callbacks=[logger, WeightWarmup(1), logger])
    assert not (tmp_path / "log").exists()
    fit(model, x, y, opt, 1, 8, generator=g, callbacks=[logger])  # the same logger, once: one row per step
    assert list(_rows(tmp_path / "log")) == ["1", "2", "3"]


def test_the_same_callbacks_reused_for_a_second_fit_go_on():
    x, y, model, opt, g = _setup()
    anneal, seen = TemperatureAnnealing(1.0, 0.1), _recorder()
    fit(model, x, y, opt, 2, 8, generator=g, callbacks=[anneal, seen])
    fit(model, x, y, opt, 3, 8, generator=g, callbacks=[anneal, seen])
    assert seen.ends == [0, 1, 0, 1, 2] and _layer(model).temperature == 0.1
