"""fit's gradient accumulation, the labels compare takes (those fit widens), and a PolicyLogger resumed in a new
process (a new model and logger from a checkpoint file) going on with the earlier process's policy.csv.

Accumulation is checked against its mathematical meaning: with a mean-reduced loss and a deterministic model,
k batches of b accumulated give the step of one batch of k * b (the last, shorter group included); everything that
acts per optimiser step (the scaler, the scheduler, the callbacks, the records) acts once per group.
"""

import copy
import csv

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import gen
from torch import nn

import augnet
from augnet.experiments import compare
from augnet.training import Callback, NonFiniteLossError, PolicyLogger, TemperatureAnnealing, WeightWarmup, fit
from augnet.transforms import image as T


def mlp(seed=0, norm=False):
    torch.manual_seed(seed)
    layers = [nn.Flatten(), nn.Linear(48, 8), *([nn.BatchNorm1d(8)] if norm else []), nn.Tanh(), nn.Linear(8, 3)]
    return nn.Sequential(*layers)


def images(n=20, seed=0):
    return torch.rand(n, 3, 4, 4, generator=gen(seed)), torch.randint(0, 3, (n,), generator=gen(seed + 1))


def plain(**kw):
    return dict(regularizer="none", loss_fn=F.cross_entropy, **kw)


def params(model):
    return [p.detach().clone() for p in model.parameters()]


class Counter(Callback):
    """Counts the per-step hooks and records the steps they saw."""

    def __init__(self):
        self.before, self.ends = [], []

    def on_before_optimizer_step(self, state):
        self.before.append(state.step)

    def on_step_end(self, state):
        self.ends.append((state.epoch, state.step))


class CountingSGD(torch.optim.SGD):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls = 0

    def step(self, closure=None):
        self.calls += 1
        return super().step(closure)


# --------------------------------------------------------------------------------------------- accumulation


@pytest.mark.parametrize("n, b, k", [(20, 4, 2), (32, 4, 3), (12, 4, 4)])
def test_k_batches_of_b_accumulated_step_as_one_batch_of_k_times_b(n, b, k):
    # (20, 4, 2): groups of 2, 2, 1 batches against batches of 8, 8, 4; (32, 4, 3): 3, 3, 2 against 12, 12, 8;
    # (12, 4, 4): one shorter group (3 batches) against one batch of 12. The shorter last group is the mean of its
    # batches (scaled by 1 / its length): scaled by 1 / k it would step by 1/2, 2/3 or 3/4 of the large batch's.
    x, y = images(n)
    runs = {}
    for batch, acc in ((b, k), (k * b, 1)):
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
        h = fit(model, x, y, opt, 3, batch, generator=gen(5), accumulate=acc, record_every=1, **plain())
        runs[acc] = (params(model), h)
    (small, h_small), (large, h_large) = runs[k], runs[1]
    for p, q in zip(small, large, strict=True):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
    assert h_small["step"] == h_large["step"] == list(range(1, 3 * -(-n // (k * b)) + 1))
    np.testing.assert_allclose(h_small["loss"], h_large["loss"], rtol=1e-5)  # a step's loss: its batches' mean
    assert h_small["loss"] == h_small["total_loss"]
    moved = sum(float((p - q).abs().sum()) for p, q in zip(small, params(mlp()), strict=True))
    assert moved > 1e-2  # the runs trained


def test_a_loader_accumulates_as_tensors_do():
    x, y = images(20)
    loader = [(x[i : i + 4], y[i : i + 4]) for i in range(0, 20, 4)]  # 5 batches: groups of 2, 2, 1
    a, b = mlp(), mlp()
    fit(a, loader, torch.optim.SGD(a.parameters(), lr=0.5), 2, accumulate=2, **plain())
    fit(b, x, y, torch.optim.SGD(b.parameters(), lr=0.5), 2, 8, shuffle=False, **plain())
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


def test_accumulate_one_is_the_plain_loop_bit_for_bit():
    # zero_grad, backward, step per batch, written out: accumulate=1 (the default) must not scale or regroup.
    x, y = images(20)
    a, b = mlp(), mlp()
    opt_a = torch.optim.SGD(a.parameters(), lr=0.5, momentum=0.9)
    fit(a, x, y, opt_a, 2, 6, shuffle=False, accumulate=1, **plain())
    opt_b = torch.optim.SGD(b.parameters(), lr=0.5, momentum=0.9)
    for _ in range(2):
        for i in range(0, 20, 6):
            opt_b.zero_grad(set_to_none=True)
            F.cross_entropy(b(x[i : i + 6]), y[i : i + 6]).backward()
            opt_b.step()
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))


def test_the_optimiser_scheduler_callbacks_and_records_act_once_per_group(tmp_path):
    x, y = images(20)  # 5 batches of 4 per epoch: groups of 2, 2, 1, so 3 optimiser steps per epoch
    model = augnet.AugNet(mlp(), augnet.AugmentationLayer([T.Rotate(), T.ShearX()]))
    opt = CountingSGD(augnet.param_groups(model), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(opt, 1, 0.9)
    counter = Counter()
    h = fit(model, x, y, opt, 2, 4, generator=gen(3), accumulate=2, scheduler=scheduler, scheduler_interval="step",
            record_every=2, callbacks=[counter, PolicyLogger(tmp_path, every=1), TemperatureAnnealing(1.0, 0.5),
                                       WeightWarmup(1)])  # fmt: skip
    assert opt.calls == 6 and scheduler.last_epoch == 6
    assert counter.before == [0, 1, 2, 3, 4, 5]
    assert counter.ends == [(0, 1), (0, 2), (0, 3), (1, 4), (1, 5), (1, 6)]
    assert h["step"] == [1, 2, 4, 6]
    with open(tmp_path / "policy.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["step"]) for r in rows] == [1, 2, 3, 4, 5, 6]
    assert [float(r["lr0"]) for r in rows] == pytest.approx([0.1 * 0.9**s for s in range(6)])


def test_weight_warmup_holds_the_weights_through_every_group_of_its_epochs():
    x, y = images(20)
    layer = augnet.AugmentationLayer([T.Rotate(), T.ShearX()])
    model = augnet.AugNet(mlp(), layer)
    before = layer.weight_logits.detach().clone()
    fit(model, x, y, torch.optim.Adam(model.parameters(), lr=0.05), 2, 4, generator=gen(3), accumulate=3,
        callbacks=WeightWarmup(1))  # fmt: skip
    assert not torch.equal(layer.weight_logits.detach(), before)  # they move after the warm-up
    layer.weight_logits.data.copy_(before)
    fit(model, x, y, torch.optim.Adam(model.parameters(), lr=0.05), 1, 4, generator=gen(3), accumulate=3,
        callbacks=WeightWarmup(1))  # fmt: skip
    assert torch.equal(layer.weight_logits.detach(), before)


def test_float16_amp_with_its_scaler_unscales_and_steps_once_per_group():
    # GradScaler refuses a second unscale_ before its update: one per group runs; and the result is the float32
    # accumulated run's within float16 rounding.
    x, y = images(20)
    runs = []
    for amp in (torch.float16, False):
        model = mlp()
        opt = CountingSGD(model.parameters(), lr=0.5)
        fit(model, x, y, opt, 2, 4, generator=gen(5), accumulate=2, amp=amp, **plain())
        runs.append((params(model), opt.calls))
    (half, calls_half), (full, calls_full) = runs
    assert calls_half == calls_full == 6
    for p, q in zip(half, full, strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=2e-2)


def test_a_loss_that_is_not_finite_in_a_groups_later_batch_puts_back_what_the_whole_group_changed():
    # The first group's two batches (one step) train; the second group's second batch holds a NaN: the model keeps
    # the state after step 1, its batch-norm statistics included (those of the group's finite first batch too).
    x, y = images(16)
    x[12:] = float("nan")
    reference = mlp(norm=True)
    fit(reference, x[:8], y[:8], torch.optim.SGD(reference.parameters(), lr=0.5), 1, 4, shuffle=False, accumulate=2,
        **plain())  # fmt: skip
    model = mlp(norm=True)
    with pytest.raises(NonFiniteLossError, match="step 2"):
        fit(model, x, y, torch.optim.SGD(model.parameters(), lr=0.5), 1, 4, shuffle=False, accumulate=2, **plain())
    for (name, a), b in zip(reference.state_dict().items(), model.state_dict().values(), strict=True):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("bad, error", [(0, ValueError), (-2, ValueError), (True, TypeError), (1.5, TypeError),
                                        ("2", TypeError), (None, TypeError)])  # fmt: skip
def test_accumulate_is_checked_before_anything_changes(bad, error):
    x, y = images(8)
    model = mlp()
    before = params(model)
    with pytest.raises(error, match=rf"accumulate must be an int.*{bad!r}"):
        fit(model, x, y, torch.optim.SGD(model.parameters(), lr=0.5), 1, 4, accumulate=bad, **plain())
    assert all(torch.equal(p, q) for p, q in zip(before, model.parameters(), strict=True))
    assert all(p.grad is None for p in model.parameters())
    fit(model, x, y, torch.optim.SGD(model.parameters(), lr=0.5), 1, 4, accumulate=np.int64(2), **plain())


# -------------------------------------------------------------------------------------------------- labels


@pytest.mark.parametrize("dtype", [torch.int32, torch.int16, torch.int8, torch.uint8, torch.uint16])
def test_compare_takes_the_integer_labels_fit_widens_and_gives_the_int64_runs(dtype):
    x, y = images(16)
    x_test, y_test = images(8, seed=7)
    runs = []
    for labels, test_labels in ((y, y_test), (y.to(dtype), y_test.to(dtype))):
        result = compare(mlp, (x, labels), (x_test, test_labels), ["none"], epochs=1, batch_size=8, seeds=[0],
                         progress=False)  # fmt: skip
        runs.append({k: v for k, v in result.records[0].items() if "seconds" not in k and k != "invariance"})
    assert runs[0] == runs[1]


@pytest.mark.parametrize("dtype", [torch.bool, torch.float32, torch.complex64])
def test_compare_refuses_labels_fit_cannot_train_on_naming_the_dtype(dtype):
    x, y = images(8)
    for which in ("train_data", "test_data"):
        data = {"train_data": (x, y), "test_data": (x, y), which: (x, (y > 0).to(dtype))}
        with pytest.raises(ValueError, match=rf"{which}: labels must be int64 class indices .*got {dtype}"):
            compare(mlp, methods=["none"], epochs=1, seeds=[0], progress=False, **data)


def test_fit_widens_uint8_targets_for_a_loss_that_takes_int64_only():
    # F.one_hot takes int64 only; torch's nll_loss took uint8 as it is. Both runs are the int64 run.
    x, y = images(16)

    def one_hot_loss(out, t):
        return -(F.one_hot(t, 3) * out.log_softmax(1)).sum(1).mean()

    for loss_fn in (one_hot_loss, F.cross_entropy):
        losses = []
        for targets in (y, y.to(torch.uint8)):
            model = mlp()
            h = fit(model, x, targets, torch.optim.SGD(model.parameters(), lr=0.5), 2, 4, generator=gen(2),
                    regularizer="none", loss_fn=loss_fn, record_every=1)  # fmt: skip
            losses.append(h["loss"])
        assert losses[0] == losses[1]


# ------------------------------------------------------------------------------- a resumed PolicyLogger


class Checkpoint(Callback):
    """Saves to a file after epoch ``at``: what a new process needs to go on."""

    def __init__(self, path, at, generator):
        self.path, self.at, self.generator = path, at, generator

    def on_epoch_end(self, state):
        if state.epoch == self.at:
            torch.save({"model": state.model.state_dict(), "optimizer": state.optimizer.state_dict(),
                        "generator": self.generator.get_state(), "epoch": state.epoch}, self.path)  # fmt: skip


class Kill(Callback):
    """Stops the process at the end of step ``at`` (of this call)."""

    def __init__(self, at):
        self.at = at

    def on_step_end(self, state):
        if state.step == self.at:
            raise KeyboardInterrupt


def augnet_model():
    return augnet.AugNet(mlp(), augnet.AugmentationLayer([T.Rotate(), T.ShearX(), T.Brightness()]))


def run(folder, *, accumulate=1, start_epoch=0, checkpoint=None, extra=(), **logger):
    """A process: a new model, optimiser, generator and logger; from the checkpoint file if given."""
    x, y = images(20)
    model = augnet_model()
    opt = torch.optim.Adam(augnet.param_groups(model), lr=1e-2)
    g = gen(4)
    if checkpoint is not None:
        saved = torch.load(checkpoint, weights_only=True)
        model.load_state_dict(saved["model"]), opt.load_state_dict(saved["optimizer"]), g.set_state(saved["generator"])
    callbacks = [PolicyLogger(folder, every=2, **logger), *(c(g) if callable(c) else c for c in extra)]
    fit(model, x, y, opt, 3, 4, generator=g, accumulate=accumulate, start_epoch=start_epoch, callbacks=callbacks)
    return model


def lines(path):
    return path.read_text().splitlines()


@pytest.mark.parametrize("accumulate", [1, 2])
def test_a_run_resumed_in_a_new_process_goes_on_with_the_policy_csv(tmp_path, accumulate):
    # 5 batches per epoch: 5 steps (or 3 with accumulate=2). The first process checkpoints after epoch 0 and is
    # killed two steps into epoch 1, after writing rows of epoch 1 (the last one cut short, as a kill mid-write
    # leaves it); the second, new objects from the file, drops those rows and numbers its own on from epoch 1's
    # first step: one header, and the uninterrupted run's log, byte for byte.
    per_epoch = 5 if accumulate == 1 else 3
    whole = run(tmp_path / "whole", accumulate=accumulate)
    saved = tmp_path / "checkpoint.pt"
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "log", accumulate=accumulate, extra=[lambda g: Checkpoint(saved, 0, g), Kill(per_epoch + 2)])
    log = tmp_path / "log" / "policy.csv"
    steps = [int(line.split(",")[0]) for line in lines(log)[1:]]
    assert steps[-1] == per_epoch + 2  # rows past the checkpoint, to be dropped
    with log.open("a") as f:
        f.write(f"{per_epoch + 3},1,0.5")  # a row cut short
    resumed = run(tmp_path / "log", accumulate=accumulate, start_epoch=1, checkpoint=saved, resume=True)
    for (name, a), b in zip(whole.state_dict().items(), resumed.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    assert log.read_bytes() == (tmp_path / "whole" / "policy.csv").read_bytes()
    assert [line.startswith("step,") for line in lines(log)].count(True) == 1
    steps = [int(line.split(",")[0]) for line in lines(log)[1:]]
    assert steps == sorted(set(steps)) and steps[-1] == 3 * per_epoch


def test_a_resumed_logger_without_an_earlier_file_starts_one_numbered_on(tmp_path):
    saved = tmp_path / "checkpoint.pt"
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "first", extra=[lambda g: Checkpoint(saved, 0, g), Kill(6)])
    run(tmp_path / "second", start_epoch=1, checkpoint=saved, resume=True)
    rows = lines(tmp_path / "second" / "policy.csv")
    assert rows[0] == lines(tmp_path / "first" / "policy.csv")[0]
    assert [int(r.split(",")[0]) for r in rows[1:]] == [6, 8, 10, 12, 14, 15]


def test_a_resumed_logger_refuses_another_models_log_or_another_step_count_and_changes_nothing(tmp_path):
    saved = tmp_path / "checkpoint.pt"
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "log", extra=[lambda g: Checkpoint(saved, 0, g), Kill(6)])
    log = tmp_path / "log" / "policy.csv"
    header, *rows = lines(log)
    for text, match in ((header.replace("layer0/Rotate", "layer0/Spin") + "\n", "has the columns"),
                        ("\n".join([header, "99" + rows[0][1:]]) + "\n", "row of step 99 in epoch 0"),
                        ("\n".join([header, "one,two"]) + "\n", "line 2 of .* is not a row"),
                        ("", "has the columns None")):  # fmt: skip
        log.write_text(text)
        model = augnet_model()
        before = copy.deepcopy(model.state_dict())
        opt = torch.optim.Adam(augnet.param_groups(model))
        x, y = images(20)
        with pytest.raises(ValueError, match=match):
            fit(model, x, y, opt, 3, 4, start_epoch=1, callbacks=PolicyLogger(tmp_path / "log", resume=True))
        assert log.read_text() == text and not opt.state
        assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_a_resumed_run_that_writes_no_row_leaves_the_earlier_log_whole(tmp_path):
    saved = tmp_path / "checkpoint.pt"
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "log", extra=[lambda g: Checkpoint(saved, 0, g), Kill(7)])
    log = tmp_path / "log" / "policy.csv"
    before = log.read_bytes()

    class Fail(Callback):
        def on_before_optimizer_step(self, state):
            raise RuntimeError("stop")

    with pytest.raises(RuntimeError, match="stop"):
        run(tmp_path / "log", start_epoch=1, checkpoint=saved, resume=True, extra=[Fail()])
    assert log.read_bytes() == before
    x, y = images(20)
    model = augnet_model()
    fit(model, x, y, torch.optim.Adam(augnet.param_groups(model)), 1, 4, start_epoch=1, callbacks=PolicyLogger(
        tmp_path / "log", resume=True))  # a run of no epoch: nothing written, nothing cut  # fmt: skip
    assert log.read_bytes() == before


def test_resume_is_refused_with_overwrite_and_on_a_loader_without_a_length(tmp_path):
    with pytest.raises(ValueError, match="pass one of them"):
        PolicyLogger(tmp_path, overwrite=True, resume=True)
    with pytest.raises(TypeError, match="resume must be True or False, got 1"):
        PolicyLogger(tmp_path, resume=1)
    x, y = images(8)

    class Batches:  # iterable, re-iterable, no __len__
        def __iter__(self):
            return iter([(x[:4], y[:4]), (x[4:], y[4:])])

    model = augnet_model()
    with pytest.raises(ValueError, match="data loader without a length"):
        fit(model, Batches(), torch.optim.Adam(model.parameters()), 2, start_epoch=1,
            callbacks=PolicyLogger(tmp_path / "log", resume=True))  # fmt: skip
    assert not (tmp_path / "log").exists()
    fit(model, Batches(), torch.optim.Adam(model.parameters()), 2, callbacks=PolicyLogger(tmp_path / "log",
                                                                                          resume=True))  # fmt: skip
    assert [r.split(",")[0] for r in lines(tmp_path / "log" / "policy.csv")] == ["step", "1", "4"]  # from epoch 0


def test_a_reused_logger_writes_its_rows_at_the_steps_of_one_uninterrupted_log(tmp_path):
    # Rows at the log's multiples of every (and its first step, each run's last): the second run of 5 steps wrote
    # its first step (6), then its own 2nd and 4th (7, 9), where one run of 10 steps writes 6, 8, 10.
    x, y = images(20)
    model, logger = augnet_model(), PolicyLogger(tmp_path, every=2)
    opt = torch.optim.Adam(model.parameters())
    for _ in range(2):
        fit(model, x, y, opt, 1, 4, callbacks=logger)
    assert [int(r.split(",")[0]) for r in lines(tmp_path / "policy.csv")[1:]] == [1, 2, 4, 5, 6, 8, 10]


def test_a_resumed_tensorboard_log_purges_the_events_past_the_checkpoint(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    saved = tmp_path / "checkpoint.pt"
    run(tmp_path / "whole", csv=False, tensorboard=True)
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "log", csv=False, tensorboard=True, extra=[lambda g: Checkpoint(saved, 0, g), Kill(7)])
    run(tmp_path / "log", csv=False, tensorboard=True, start_epoch=1, checkpoint=saved, resume=True)
    events = {}
    for name in ("whole", "log"):
        acc = EventAccumulator(str(tmp_path / name))
        acc.Reload()
        events[name] = [(e.step, e.value) for e in acc.Scalars("loss")]
    assert events["log"] == events["whole"]


def test_accumulation_reads_nothing_back_from_the_device_between_record_steps():
    # On meta, where the code takes the GPU path: 4 groups (the last one shorter) cost what one group does.
    from syncs import SyncRecorder

    counts = []
    for n in (8, 28):
        x, y = images(n)
        model = augnet_model().to("meta")
        opt = torch.optim.SGD(augnet.param_groups(model), lr=0.1)
        with SyncRecorder() as rec:
            fit(model, x.to("meta"), y.to("meta"), opt, 1, 4, accumulate=2, record_every=100)
        counts.append(rec)
    assert len(counts[1].syncs) == len(counts[0].syncs) <= 2, counts[1].summary()
