"""fit()'s schedules and callbacks audited against their docstrings and docs/guide/training.md.

Each schedule's value at every epoch (fractional ones too, and past the end) against its documented formula
computed here independently; the moment it is applied, read at every step by a callback and by the regulariser;
resumption with start_epoch (parameters, schedule values, history and the PolicyLogger's rows bit for bit); the
hooks' order and arguments; the history's keys and records; epochs=0; and what a failed first step puts back.
"""

import bisect
import csv
import math
import random

import pytest
import torch
from helpers import gen
from torch import nn

import augnet
from augnet.training import Callback, PolicyLogger, TemperatureAnnealing, WeightWarmup, fit
from augnet.transforms import image as T

N_STEPS = 2  # batches per epoch of data()


def model(layers=1):
    torch.manual_seed(0)
    made = [augnet.AugmentationLayer([T.Rotate(), T.ShearX()], init_magnitude=0.3) for _ in range(layers)]
    return augnet.AugNet(nn.Sequential(nn.Flatten(), nn.Linear(48, 3)), made)


def data():
    return torch.rand(8, 3, 4, 4, generator=gen(0)), torch.randint(0, 3, (8,), generator=gen(1))


class Tape(Callback):
    """Records every hook's call with what it saw: the epoch, the step, lam, the temperature, the learning rate."""

    def __init__(self, name="tape", log=None):
        self.name, self.log = name, log if log is not None else []

    def _see(self, hook, state, *extra):
        temps = tuple(layer.temperature for layer in state.layers)
        lr = state.optimizer.param_groups[0]["lr"]
        self.log.append((self.name, hook, state.epoch, state.step, state.lam, temps, lr, *extra))

    def on_train_start(self, state):
        self._see("train_start", state)

    def on_epoch_start(self, state):
        self._see("epoch_start", state)

    def on_before_optimizer_step(self, state):
        self._see("before_step", state)

    def on_step_end(self, state):
        self._see("step_end", state, state.task_loss, state.loss)

    def on_epoch_end(self, state):
        self._see("epoch_end", state)

    def on_train_end(self, state):
        self._see("train_end", state)

    def on_train_error(self, state, error):
        self._see("train_error", state, error)


# ---------------------------------------------------------------------------------------------- the schedules


def test_lambda_schedule_is_its_piecewise_constant_formula_at_every_epoch():
    # values[i] from milestones[i - 1] (inclusive) to milestones[i]: the index is how many milestones are <= epoch.
    rng = random.Random(0)
    for _ in range(40):
        milestones = sorted(rng.sample(range(30), rng.randint(0, 4)))
        values = [rng.choice([0.0, 0.05, 0.5, 1.0, rng.random()]) for _ in range(len(milestones) + 1)]
        schedule = augnet.LambdaSchedule(values, milestones)
        epochs = [*range(35), 1e6, *(m + d for m in milestones for d in (-0.5, -1e-9, 0.0, 0.25) if m + d >= 0)]
        for e in epochs:
            assert schedule(e) == values[bisect.bisect_right(milestones, e)], (values, milestones, e)
    assert augnet.LambdaSchedule((0.3,), ())(10**9) == 0.3  # no milestone: one value for ever


@pytest.mark.parametrize(("start", "end"), [(1.0, 0.01), (0.3, 0.7), (2.0, 0.5), (0.7, 0.01), (3.0, 0.1)])
def test_temperature_annealing_is_geometric_and_exactly_start_and_end_at_its_ends(start, end):
    # start * (end / start) ** (e / (E' - 1)): exactly `start` in epoch 0, exactly `end` from epoch E' - 1 on
    # (0.3 -> 0.7 gave 0.7000000000000001 in the last epoch), between them the geometric formula.
    for span_epochs, run in [(None, 5), (None, 2), (3, 6), (8, 4)]:
        anneal = TemperatureAnnealing(start, end, epochs=span_epochs)
        span = (span_epochs or run) - 1
        for e in [*range(run + 3), 0.5, 1.5, span - 0.25]:
            t = anneal.temperature(e, run)
            if e == 0:
                assert t == start
            elif e >= span:
                assert t == end, (e, t)
            else:
                assert t == pytest.approx(math.exp(math.log(start) + (e / span) * (math.log(end) - math.log(start))),
                                          rel=1e-12)  # fmt: skip
    assert TemperatureAnnealing(start, end).temperature(0, 1) == end  # a one-epoch run is at `end` from the start


def test_lam_and_the_temperature_are_set_before_each_epochs_first_step_and_used_by_every_step_of_it():
    # What the step computes with, seen from inside it: the regulariser is called in the step's forward pass and
    # reads the layers' temperature; the step's total loss is its task loss plus the epoch's lam times it.
    seen = []
    mod = model()

    def reg(m):
        seen.append(tuple(layer.temperature for layer in m.augment.layers))
        return augnet.selective_regularizer(m) * 0 + 0.25  # a constant: total_loss - loss is lam / 4

    lam = augnet.LambdaSchedule((0.5, 0.1, 0.0, 0.3), (1, 3, 4))
    tape, anneal = Tape(), TemperatureAnnealing(2.0, 0.5, epochs=3)
    x, y = data()
    opt = torch.optim.Adam(mod.parameters(), lr=1e-2)
    for start in (0, 2):  # and resumed at epoch 2: the same values from there
        seen.clear(), tape.log.clear()
        h = fit(mod, x, y, opt, 5, 4, lam=lam, regularizer=reg, callbacks=[anneal, tape], record_every=1,
                start_epoch=start)  # fmt: skip
        steps = [entry for entry in tape.log if entry[1] == "before_step"]
        assert [s[2] for s in steps] == [e for e in range(start, 5) for _ in range(N_STEPS)]
        for (_, _, epoch, _, weight, temps, _), total, task in zip(steps, h["total_loss"], h["loss"], strict=True):
            assert weight == lam(epoch) and temps == (anneal.temperature(epoch, 5),)
            assert total - task == pytest.approx(weight * 0.25, abs=1e-6)
        # The regulariser runs only in epochs whose lam is not 0, and sees that epoch's temperature.
        assert seen == [(anneal.temperature(e, 5),) for e in range(start, 5) if lam(e) for _ in range(N_STEPS)]
        starts = [entry for entry in tape.log if entry[1] == "epoch_start"]
        expected = [(e, lam(e), (anneal.temperature(e, 5),)) for e in range(start, 5)]
        assert [(s[2], s[4], s[5]) for s in starts] == expected


def test_on_train_start_sees_the_first_epoch_and_its_lam():
    # TrainState.lam is "the regulariser's weight in this epoch"; on_train_start sees epoch start_epoch (for
    # WeightWarmup), and saw lam 0.0 with it whatever that epoch's lam.
    tape = Tape()
    x, y = data()
    mod = model()
    fit(mod, x, y, torch.optim.Adam(mod.parameters()), 4, 4, lam=lambda e: 0.1 * (e + 1), callbacks=tape,
        start_epoch=2)  # fmt: skip
    assert tape.log[0][1:5] == ("train_start", 2, 0, pytest.approx(0.3))


def test_weight_warmup_holds_the_weights_at_every_step_of_its_epochs_resumed_or_not():
    x, y = data()
    for start in (0, 1):
        mod, logits = model(), []

        class Logits(Callback):
            def __init__(self, out):
                self.out = out

            def on_step_end(self, state):
                self.out.append((state.epoch, state.layers[0].weight_logits.detach().clone()))

        fit(mod, x, y, torch.optim.Adam(mod.parameters(), lr=0.05), 4, 4, callbacks=[WeightWarmup(2), Logits(logits)],
            generator=gen(2), start_epoch=start)  # fmt: skip
        held = [torch.equal(w, torch.zeros(2)) for e, w in logits]
        assert held == [e < 2 for e, _ in logits]  # every step of epochs 0 and 1, and none after


# ----------------------------------------------------------------------------------------------- resuming


class Checkpoint(Callback):
    def __init__(self, at, generator, scheduler):
        self.at, self.generator, self.scheduler, self.saved = at, generator, scheduler, None

    def on_epoch_end(self, state):
        if state.epoch == self.at:  # the epoch's scheduler step has been taken (Callback.on_epoch_end)
            self.saved = {"model": {k: v.clone() for k, v in state.model.state_dict().items()},
                          "optimizer": state.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
                          "generator": self.generator.get_state()}  # fmt: skip


class Crash(Callback):
    def __init__(self, at):
        self.at = at

    def on_epoch_end(self, state):
        if state.epoch == self.at:
            raise KeyboardInterrupt


def read_csv(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    assert rows and all(len(r) == len(rows[0]) for r in rows), "a malformed CSV"
    return rows


def test_a_resumed_run_gives_the_uninterrupted_runs_parameters_schedules_history_and_log_rows(tmp_path):
    x, y = data()
    epochs, k = 4, 2
    lam = augnet.LambdaSchedule((0.5, 0.2), (3,))

    def setup():
        mod = model(layers=2)
        opt = torch.optim.AdamW(augnet.param_groups(mod, weight_decay=1e-2, aug_lr=1e-2), lr=1e-2)
        return mod, opt, torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs), gen(3)

    def run(mod, opt, scheduler, g, logger, extra=(), start=0):
        tape = Tape()
        callbacks = [TemperatureAnnealing(1.0, 0.3), WeightWarmup(1), logger, *extra, tape]
        h = fit(mod, x, y, opt, epochs, 4, lam=lam, generator=g, scheduler=scheduler, callbacks=callbacks,
                record_every=1, start_epoch=start)  # fmt: skip
        return h, [e for e in tape.log if e[1] == "before_step"]

    whole, opt, scheduler, g = setup()
    h_whole, steps_whole = run(whole, opt, scheduler, g, PolicyLogger(tmp_path / "whole", every=1))

    mod, opt, scheduler, g = setup()
    logger, keep = PolicyLogger(tmp_path / "resumed", every=1), Checkpoint(k - 1, g, scheduler)
    with pytest.raises(KeyboardInterrupt):
        run(mod, opt, scheduler, g, logger, extra=[keep, Crash(k - 1)])
    mod, opt, scheduler, g = setup()  # as a new start would, from the checkpoint; the logger goes on
    mod.load_state_dict(keep.saved["model"]), opt.load_state_dict(keep.saved["optimizer"])
    scheduler.load_state_dict(keep.saved["scheduler"]), g.set_state(keep.saved["generator"])
    h_resumed, steps_resumed = run(mod, opt, scheduler, g, logger, start=k)

    for (name, a), b in zip(whole.state_dict().items(), mod.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    done = k * N_STEPS
    assert [s[2:] for s in steps_resumed] == [(e, st - done, *rest) for _, _, e, st, *rest in steps_whole[done:]]
    for key in ("loss", "total_loss", "weights", "magnitudes"):
        assert h_resumed[key] == h_whole[key][done:], key
    assert h_resumed["step"] == list(range(1, (epochs - k) * N_STEPS + 1))  # steps count from 1 in each call
    assert read_csv(tmp_path / "resumed" / "policy.csv") == read_csv(tmp_path / "whole" / "policy.csv")


def test_a_reused_logger_counts_the_step_it_logs_at_an_error_and_does_not_log_it_twice(tmp_path):
    # A callback before the logger stops the run in on_step_end of step 3: the logger never saw step 3 end, logs it
    # at on_train_error, and counted on from step 2 (the next run's first row was step 3 again).
    class Stop(Callback):
        def on_step_end(self, state):
            if state.step == 3:
                raise KeyboardInterrupt

    x, y = data()
    mod, logger = model(), PolicyLogger(tmp_path, every=1)
    opt = torch.optim.Adam(mod.parameters())
    with pytest.raises(KeyboardInterrupt):
        fit(mod, x, y, opt, 2, 4, callbacks=[Stop(), logger])
    fit(mod, x, y, opt, 1, 4, callbacks=[logger])
    assert [row[0] for row in read_csv(tmp_path / "policy.csv")[1:]] == ["1", "2", "3", "4", "5"]


@pytest.mark.parametrize("interval", ["epoch", "step"])
def test_the_logged_learning_rate_is_the_one_its_step_used_whenever_the_row_is_written(tmp_path, interval):
    # The last row was written after the epoch's scheduler step (on_train_end), and with a scheduler stepped every
    # step every row held the next step's rate: a step's lr0 depended on `every` and on the interval.
    x, y = data()
    logs = {}
    for every in (1, 3, 100):
        mod, tape = model(), Tape()
        opt = torch.optim.SGD(mod.parameters(), lr=1.0)
        scheduler = torch.optim.lr_scheduler.StepLR(opt, 1, 0.5)
        fit(mod, x, y, opt, 2, 4, scheduler=scheduler, scheduler_interval=interval,
            callbacks=[PolicyLogger(tmp_path / f"{interval}{every}", every=every), tape])  # fmt: skip
        used = {entry[3] + 1: entry[6] for entry in tape.log if entry[1] == "before_step"}
        rows = read_csv(tmp_path / f"{interval}{every}" / "policy.csv")
        column = rows[0].index("lr0")
        logs[every] = {int(r[0]): float(r[column]) for r in rows[1:]}
        assert logs[every] == {step: used[step] for step in logs[every]}, every
    assert sorted(logs[100]) == [1, 4] and sorted(logs[3]) == [1, 3, 4] and sorted(logs[1]) == [1, 2, 3, 4]


# ------------------------------------------------------------------------------- hooks, history, epochs=0


def test_the_hooks_run_in_the_callbacks_order_with_the_documented_state_and_scheduler_steps():
    log = []
    first, second = Tape("a", log), Tape("b", log)
    x, y = data()
    mod = model()
    opt = torch.optim.SGD(mod.parameters(), lr=1.0)
    fit(mod, x, y, opt, 2, 4, scheduler=torch.optim.lr_scheduler.StepLR(opt, 1, 0.5), callbacks=[first, second])
    hooks = [(name, hook) for name, hook, *_ in log]
    assert hooks[0::2] == [("a", h) for _, h in hooks[1::2]] and hooks[1::2] == [("b", h) for _, h in hooks[0::2]]
    one = [(hook, epoch, step, lr) for name, hook, epoch, step, _, _, lr, *_ in log if name == "a"]
    step = [("before_step", 0, 0, 1.0), ("step_end", 0, 1, 1.0), ("before_step", 0, 1, 1.0), ("step_end", 0, 2, 1.0)]
    assert one[:6] == [("train_start", 0, 0, 1.0), ("epoch_start", 0, 0, 1.0), *step]
    assert one[6] == ("epoch_end", 0, 2, 0.5)  # after the epoch's scheduler step
    assert one[-2:] == [("epoch_end", 1, 4, 0.25), ("train_end", 1, 4, 0.25)]
    ends = [entry for entry in log if entry[:2] == ("a", "step_end")]
    assert all(task is not None and total is not None for *_, task, total in ends)

    class Fail(Callback):
        def on_epoch_end(self, state):
            raise RuntimeError("stop")

    log.clear()
    mod = model()
    with pytest.raises(RuntimeError, match="stop") as raised:
        fit(mod, x, y, torch.optim.SGD(mod.parameters(), lr=1.0), 2, 4, callbacks=[first, Fail(), second])
    errors = [entry for entry in log if entry[1] == "train_error"]
    assert [(e[0], e[2], e[3]) for e in errors] == [("a", 0, 2), ("b", 0, 2)] and errors[0][-1] is raised.value


@pytest.mark.parametrize("record_every", [1, 3, 4, 100])
def test_the_history_records_the_first_step_and_every_record_every_th_across_epochs(record_every):
    x, y = data()
    mod, tape = model(layers=2), Tape()
    h = fit(mod, x, y, torch.optim.Adam(mod.parameters()), 3, 4, record_every=record_every, callbacks=tape)
    steps = [s for s in range(1, 3 * N_STEPS + 1) if s == 1 or s % record_every == 0]
    assert list(h) == ["step", "loss", "total_loss", "weights", "magnitudes"] and h["step"] == steps
    assert all(len(h[key]) == len(steps) for key in h)
    seen = {entry[3]: entry[-2:] for entry in tape.log if entry[1] == "step_end"}
    assert [(a, b) for a, b in zip(h["loss"], h["total_loss"], strict=True)] == [seen[s] for s in steps]
    assert all(len(w) == 2 and all(len(row) == 2 for row in w) for w in h["weights"] + h["magnitudes"])
    if steps[-1] == 3 * N_STEPS:  # the last step recorded: its weights and magnitudes are the model's at the end
        assert h["weights"][-1] == [layer.weights.detach().tolist() for layer in mod.augment.layers]
        assert h["magnitudes"][-1] == [layer.magnitudes.detach().tolist() for layer in mod.augment.layers]


@pytest.mark.parametrize("how", [dict(epochs=0), dict(epochs=2, start_epoch=2)])
def test_a_run_of_no_epoch_trains_nothing_and_calls_only_the_run_hooks(tmp_path, how):
    x, y = data()
    mod, tape = model(), Tape()
    before = {k: v.clone() for k, v in mod.state_dict().items()}
    opt = torch.optim.Adam(mod.parameters())
    logger = PolicyLogger(tmp_path / "log")
    h = fit(mod, x, y, opt, batch_size=4, callbacks=[TemperatureAnnealing(2.0, 0.5), tape, logger], **how)
    assert h == {"step": [], "loss": [], "total_loss": [], "weights": [], "magnitudes": []}
    assert [entry[1] for entry in tape.log] == ["train_start", "train_end"]
    assert all(torch.equal(v, before[k]) for k, v in mod.state_dict().items()) and not opt.state
    assert mod.augment.layers[0].temperature == 1.0
    assert read_csv(tmp_path / "log" / "policy.csv")[1:] == []  # the header only


def test_a_failed_first_step_puts_back_the_temperature_modes_gradients_optimizer_and_scheduler():
    x, y = data()
    mod = model()
    mod.eval()
    mod.trunk[1].train()
    grads = [torch.full_like(p, 0.5) for p in mod.parameters()]
    for p, grad in zip(mod.parameters(), grads, strict=True):
        p.grad = grad
    before = {k: v.clone() for k, v in mod.state_dict().items()}
    opt = torch.optim.Adam(mod.parameters())
    scheduler = torch.optim.lr_scheduler.StepLR(opt, 1, 0.5)
    with pytest.raises(RuntimeError):  # float targets: nll_loss refuses them at the first step
        fit(mod, x, y.float(), opt, 2, 4, scheduler=scheduler, callbacks=[TemperatureAnnealing(2.0, 0.5)])
    assert mod.augment.layers[0].temperature == 1.0
    assert [m.training for m in mod.modules()] == [m is mod.trunk[1] for m in mod.modules()]
    assert all(p.grad is g for p, g in zip(mod.parameters(), grads, strict=True))
    assert all(torch.equal(v, before[k]) for k, v in mod.state_dict().items())
    assert not opt.state and scheduler.last_epoch == 0 and opt.param_groups[0]["lr"] == 1e-3


def test_a_callable_lam_is_asked_for_each_epoch_once_past_the_epochs_asked_for_ahead(monkeypatch):
    # The first LAM_AHEAD epochs are asked for before training, the later ones as they come: each once, a resumed
    # run's first epoch (which on_train_start now sees) included; a NaN there stops the run at that epoch.
    from augnet.training import _checks

    monkeypatch.setattr(_checks, "LAM_AHEAD", 2)
    asked = []

    def lam(epoch):
        asked.append(epoch)
        return math.nan if epoch == 5 else 0.1

    x, y = data()
    mod, tape = model(), Tape()
    with pytest.raises(ValueError, match=r"lam\(5\) must be finite"):
        fit(mod, x, y, torch.optim.Adam(mod.parameters()), 6, 4, lam=lam, callbacks=tape, start_epoch=3)
    assert asked == [0, 1, 3, 4, 5]
    assert [e[2] for e in tape.log if e[1] == "epoch_start"] == [3, 4] and tape.log[-1][1] == "train_error"
