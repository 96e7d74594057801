"""A small training loop for AugNet models, recording the learned policy.

Used by ``augnet demo`` and the examples; written out so it can be read as the
reference for training an AugNet: task loss of the aggregated prediction plus
``lam`` times a regulariser of the augmentation layers.
"""

from __future__ import annotations

import contextlib
import itertools
import warnings
from collections.abc import Callable, Iterable, Mapping

import torch
import torch.nn.functional as F
from torch import Tensor

from augnet._calibration import evaluating
from augnet._checks import check_bool, is_int, number
from augnet._labels import INTEGER_DTYPES, host_int64_labels
from augnet.layers import AugmentationLayer
from augnet.ops.bad_input import check_bad_input, raise_bad_input
from augnet.ops.bad_input import flag as bad_input_flag
from augnet.training import _call_forms, _checks, _step_checks
from augnet.training._checks import NonFiniteLossError, checked_pair
from augnet.training.callbacks import Callback, TrainState, check_callbacks
from augnet.training.devices import amp_dtype, training_device

__all__ = ["NonFiniteLossError", "accuracy", "fit"]

#: Integer targets fit (and accuracy) read as int64: every integer dtype but int64 (``augnet._labels.INTEGER_DTYPES``,
#: uint16 / uint32 / uint64 included), by the rule the probes and :func:`augnet.experiments.compare` follow (torch's
#: losses of class indices take int64 and uint8 only, F.one_hot int64 only).
NARROW_INTS = tuple(d for d in INTEGER_DTYPES if d != torch.int64)


def fit(
    model: torch.nn.Module,
    x: Tensor | Iterable,
    y: Tensor | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    epochs: int | None = None,
    batch_size: int | None = None,
    lam: float | Callable[[int], float] = 0.5,
    regularizer: str | Callable[[torch.nn.Module], Tensor] = "selective",
    generator: torch.Generator | None = None,
    loss_fn: Callable[[Tensor, Tensor], Tensor] = F.nll_loss,
    record_every: int = 5,
    progress: bool = False,
    desc: str = "training",
    record: Callable[[], dict] | None = None,
    augment_batch: Callable[[Tensor, torch.Generator | None], Tensor] | None = None,
    callbacks: Callback | Iterable[Callback] | None = None,
    device: torch.device | str | None = None,
    amp: bool | torch.dtype = False,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
    scheduler_interval: str = "epoch",
    shuffle: bool = True,
    start_epoch: int = 0,
    accumulate: int = 1,
) -> dict[str, list]:
    """Train ``model`` on tensors or on a data loader; return the history of its augmentation policy.

    Called as ``fit(model, x, y, optimizer, epochs, batch_size)`` on tensors, and
    as ``fit(model, loader, optimizer=opt, epochs=E)`` or ``fit(model, loader, opt, E)``
    on a data loader (``fit(model, loader, None, opt, E)`` works too).

    Every argument is checked before anything changes (the model, its device,
    its mode, the optimiser, the files of the callbacks); the first batch is
    drawn and checked then too. What only the first step can tell (targets the
    loss refuses: a column, floats, one-hot rows, classes out of range) raises
    there, and the model is put back as it was given: its buffers (the effects
    and the pass count its first forward pass measured, batch-norm
    statistics), modes and gradients; and ``generator`` is put back in the
    state it was given in (a rerun with it draws what a first run would). A
    count (``epochs``, ``batch_size``, ``record_every``, ``start_epoch``,
    ``accumulate``) is an int: a Python or NumPy one, or a 0-d integer tensor
    or array (the int it holds). Called
    inside ``torch.no_grad()`` it trains all the same (the caller's mode comes
    back after); inside ``torch.inference_mode()``, where nothing can train, it
    raises a RuntimeError before anything changes. The first epoch's first batch
    is drawn (to be checked) before any callback's hook runs: a sampler set per
    epoch (``DistributedSampler.set_epoch``) is set for ``start_epoch`` before the call.

    Args:
        model: the model to train (put in training mode): an AugNet, an
            :class:`~augnet.Augerino` (both draw their augmentations from
            ``generator``), or any module, called on the batch alone (use
            ``regularizer="none"`` for a model without augmentation).
        x, y: training inputs and targets (tensors); or ``x`` a
            :class:`~torch.utils.data.DataLoader` (any iterable of ``(inputs,
            targets)`` tensor batches, re-iterated every epoch) and ``y=None``
            (or left out: the optimiser may take its place).
        optimizer: over the model's parameters (see :func:`augnet.param_groups`); required.
        epochs: the number of passes over the data; required. A run of no epoch (``epochs=0``, or
            ``start_epoch=epochs``) runs the callbacks' ``on_train_start`` and ``on_train_end`` only and leaves
            the model as it was given: not moved to ``device``, each module in its mode.
        batch_size: for tensors, the batch size (required); ``None`` with a loader (it makes its own batches).
        lam: weight of the regulariser (finite, >= 0; default 0.5), or a function of the epoch
            (e.g. a :class:`~augnet.LambdaSchedule`), asked for every epoch before training
            (the first 10,000; later ones as they come).
        regularizer: ``"selective"`` (augnet's :func:`~augnet.selective_regularizer`),
            ``"paper"`` (the AugNet paper's), ``"augerino"``, ``"none"``, or a
            callable ``model -> scalar`` (a one-element tensor or a number; anything else is a TypeError
            or ValueError naming ``regularizer`` at the step that returns it).
        generator: source of randomness for the augmentations and, for
            tensors, the batches; on ``device`` (a CUDA run needs a CUDA generator).
        loss_fn: task loss of the aggregated output (default ``nll_loss``, for log-probabilities). Targets of any
            integer dtype (int8, int16, int32, uint8, uint16, uint32, uint64: class indices from NumPy) reach it as
            int64, which torch's losses take, as the probes and ``compare`` read labels; others as they are.
            uint64 labels of 2**63 and above, which int64 cannot hold, are refused (a ValueError) where they are
            on the host (read once for tensors, per batch from a loader); on a GPU they are widened unread.
            It must return a floating-point tensor of one element: a Python number, a tuple, an integer tensor
            (a TypeError) or an unreduced loss (``reduction="none"``: a ValueError) is refused, naming
            ``loss_fn``, at the step that returns it; a loss without gradient is warned of (once), and is a
            ValueError when the step's whole loss has none (every parameter frozen). With the default
            ``nll_loss``, outputs that cannot be log-probabilities (rows whose exponentials sum past 1: a
            plain model's logits) are warned of at the first batch, on a CPU.
        record_every: record the policy every this many steps (default 5; and at the first). Only these steps read
            values back from the device (one copy each); the steps between them never wait for it.
        progress: show a tqdm progress bar; its task loss (``task_loss``) and leading transform are those of
            the last record step (``record_every`` sets how often they change), so the bar makes no read of its own.
        desc: the progress bar's label.
        record: called at every record step; each key of the dict it returns
            gets a list in the history (e.g. an Augerino's widths). A key of fit's own history
            (``step``, ``loss``, ``total_loss``, ``weights``, ``magnitudes``) is refused with a
            ValueError at the first record step, after that step's update (a return that is not a dict,
            with a TypeError).
        augment_batch: a fixed augmentation ``augment_batch(x_batch, generator)``
            applied to each batch before the model (e.g. an oracle's true
            transformation for a plain model); it draws from ``generator``.
        callbacks: a :class:`Callback`, or a list, tuple or generator of them (each once), called at the
            start and end of training, of every epoch and of every step (e.g. the selection schedules of
            :mod:`augnet.training.callbacks`, or :class:`PolicyLogger`).
        device: where to train: the batches are moved there (default: where
            the model's parameters are).
        amp: mixed precision: ``True`` (bfloat16 on CPU, float16 on CUDA, with
            a gradient scaler for float16) or a dtype. The augmentation layers
            compute in float32 inside (see docs/guide/training.md, "Mixed precision").
        scheduler: a learning-rate scheduler, stepped after every epoch
            (``scheduler_interval="epoch"``) or every step (``"step"``). A ``OneCycleLR`` with fewer
            ``total_steps`` left than fit will step it is refused before training (a ValueError); one stepped
            per epoch whose ``total_steps`` left are the run's optimiser steps (sized for ``"step"``) is warned of.
        scheduler_interval: ``"epoch"`` (default) or ``"step"``.
        shuffle: for tensors, draw the batches by a permutation per epoch (from
            ``generator``); ``False`` takes them in order (as a loader without
            shuffling does, so the two give the same run). A data loader orders its own batches: with one that
            shuffles (a ``RandomSampler``), ``shuffle=False`` is refused (a ValueError): make the loader with
            ``shuffle=False``.
        start_epoch: resume a run of ``epochs`` epochs at this one (0 <= start_epoch <= epochs): epochs
            ``start_epoch`` to ``epochs - 1`` are trained, and what depends on the epoch (a callable
            ``lam``, :class:`~augnet.training.TemperatureAnnealing`, :class:`~augnet.training.WeightWarmup`)
            goes on from there. Restore the model, the optimiser, the scheduler and the generator from a
            checkpoint first (and torch's global random state, ``torch.set_rng_state``, for a shuffled
            DataLoader, which draws its order from it); the run then reproduces the uninterrupted one.
            Steps (the history's) count from 1 in each call; a new :class:`~augnet.training.PolicyLogger`
            made with ``resume=True`` numbers its rows as the uninterrupted run did.
        accumulate: gradient accumulation: batches per optimiser step (an int >= 1, default 1). The task
            loss (and regulariser) of each of ``accumulate`` consecutive batches is scaled by ``1 / m``
            and backpropagated, ``m`` being the number of batches in the group (``accumulate``, fewer for
            an epoch's last group, which still steps: groups never span epochs); then the optimiser (and
            its gradient scaler, the scheduler with ``scheduler_interval="step"``, the callbacks'
            ``on_before_optimizer_step`` and ``on_step_end``, the record steps) steps once. With a
            mean-reduced loss, a deterministic model and equal batches, batches of ``b`` with
            ``accumulate=k`` give the step of one batch of ``k * b`` (within rounding); an AugNet draws its
            augmentations per batch, and batch normalisation sees each batch alone. Steps, ``record_every``
            and the history count optimiser steps; a step's ``loss`` and ``total_loss`` are the mean of
            its batches'. The group's batches are drawn before its first forward pass (it holds ``m``
            batches at once). ``1`` is the plain loop.

    Returns:
        ``{"step": [...], "loss": [...], "total_loss": [...], "weights": [...], "magnitudes": [...]}``,
        one value per record step (optimiser steps): ``loss`` is the task loss, ``loss_fn(output, targets)``, and
        ``total_loss`` what the step minimised, the task loss plus ``lam`` times the regulariser (the
        same when ``lam`` is 0 or ``regularizer="none"``); callbacks see them as
        :class:`~augnet.training.TrainState`'s ``task_loss`` and ``loss``, and :class:`PolicyLogger`
        writes them as its ``task_loss`` and ``loss`` columns. Each record of weights / magnitudes is
        a list over layers of lists over transforms (only for a model with augmentation layers).
        Plus the keys of ``record``.

    Raises:
        TypeError, ValueError: a bad argument or batch, naming it, before the first step.
        NonFiniteLossError: a step's loss is NaN or infinite (a ValueError): training stops
            before that step's update, so the model holds the last finite state (on a CPU,
            where the loss is read at once, the buffers the step's forward pass updated, such
            as batch-norm statistics, are put back too); the error names the step and holds
            the history so far.
        ValueError: a batch of one sample that the model's batch norm cannot train on (the last batch
            of an epoch: 17 samples in batches of 8), naming the step and what to do.

    Any other error of a step (a callback's, a KeyboardInterrupt) is raised as it is, once the
    callbacks' ``on_train_error`` have run: the model keeps the steps that completed (none: it is put
    back as it was given), in training mode; on a CPU, the buffers that a step stopped midway had
    changed are put back, as for a loss that is not finite. The history so far is what the callbacks
    see as ``state.history``. A warning says when the optimiser's parameters of the model are all
    frozen (its steps would move nothing).
    """
    from tqdm.auto import tqdm

    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if torch.is_inference_mode_enabled():
        raise RuntimeError("fit was called inside torch.inference_mode(), where no tensor records gradients (and "
                           "none made there can train): call it outside")  # fmt: skip
    y, optimizer, epochs = _checks.call_form(x, y, optimizer, epochs, batch_size)
    start_epoch = _checks.check_start_epoch(start_epoch, epochs)
    accumulate = _checks.check_accumulate(accumulate)
    lams = _checks.LamWeights(lam, epochs)
    reg = _checks.check_regularizer(model, regularizer, lams)
    callbacks = check_callbacks(callbacks)
    record_every = _checks.check_record_every(record_every)
    _checks.check_callables(loss_fn=loss_fn, record=record, augment_batch=augment_batch)
    check_bool("shuffle", shuffle)
    _call_forms.check_loader_shuffle(x, shuffle)
    check_bool("progress", progress)
    _checks.check_scheduler(scheduler, optimizer, scheduler_interval)
    batches, steps_per_epoch = _batches(x, y, batch_size, shuffle)
    if steps_per_epoch is not None:  # optimiser steps: an epoch's last group of batches steps too
        steps_per_epoch = -(-steps_per_epoch // accumulate)
    _step_checks.check_scheduler_steps(scheduler, scheduler_interval, steps_per_epoch, epochs - start_epoch)
    _call_forms.warn_one_cycle_per_epoch(scheduler, scheduler_interval, steps_per_epoch, epochs - start_epoch)
    target = _checks.check_device(model, device)
    _checks.check_generator(generator, target)
    autocast_dtype = amp_dtype(amp, target)
    _checks.check_optimizer(model, optimizer)
    _step_checks.warn_frozen(model, optimizer)
    _checks.check_trains_policy(model, optimizer, reg)
    # The generator's state, put back if no step succeeds: a rerun with it then draws what this run would have.
    drawn = generator.get_state() if generator is not None and generator.device.type != "meta" else None
    first_epoch, first_dtype = _checks.first_pass(x, batches, generator, epochs - start_epoch, target)  # checked
    mismatch = _step_checks.dtype_mismatch(model, first_dtype, autocast_dtype)  # said if the first step fails
    layers = [m for m in model.modules() if isinstance(m, AugmentationLayer)]
    history: dict[str, list] = {"step": [], "loss": [], "total_loss": []}
    if layers:
        history.update(weights=[], magnitudes=[])
    own_keys = {*history}
    state = TrainState(model, optimizer, epochs, layers, history=history)
    # the steps an uninterrupted run took before start_epoch (a resumed PolicyLogger numbers its rows on from there)
    state.steps_before = start_epoch * steps_per_epoch if steps_per_epoch is not None else (None if start_epoch else 0)
    state.epoch = start_epoch  # what on_train_start sees (e.g. WeightWarmup, resumed past its warm-up), with its lam
    if start_epoch < epochs:
        state.lam = lams[start_epoch]
    draws = _checks.draws_through(model, generator)  # an AugNet (Augerino included), also in DDP
    total = (epochs - start_epoch) * steps_per_epoch if steps_per_epoch is not None else None
    bar = tqdm(total=total, disable=not progress, desc=desc, unit="step")
    started: list[Callback] = []  # whose on_train_start was called, and on_train_end: on_train_error goes to the rest
    ended: list[Callback] = []
    grad_was = torch.is_grad_enabled()  # a call inside torch.no_grad() trains too (the caller's mode comes back)
    torch.set_grad_enabled(True)
    xb, warned = None, False  # the last batch (named if batch norm refuses it); a task loss without gradient warned
    outputs_read = loss_fn is not F.nll_loss or target.type != "cpu"  # nll_loss's are read once: log-probabilities?
    try:
        with _checks.undo_a_failed_start(model, state, mismatch) as started_well:  # a first step that fails: as it was
            # and where it was: the model moves to fit's device inside this guard
            trains = start_epoch < epochs  # a run of no epoch (epochs=0, or resumed at its end) leaves the model be
            device = target if target.type == "meta" or not trains else training_device(model, device)
            scaler = torch.amp.GradScaler(device.type) if autocast_dtype == torch.float16 else None
            for cb in callbacks:  # before model.train(): a callback that refuses the run (PolicyLogger) changes nothing
                started.append(cb)
                cb.on_train_start(state)
            if trains:  # a run of no epoch keeps the modes given (an eval() model stays in evaluation)
                model.train()
            undo = _checks.StepUndo(model) if device.type == "cpu" else None  # a step stopped at once is undone
            bad_loss = None  # on an accelerator: whether a loss since the last read was not finite (a device flag)
            for epoch in range(start_epoch, epochs):
                weight = lams[epoch]
                state.epoch, state.lam = epoch, weight
                for cb in callbacks:
                    cb.on_epoch_start(state)
                steps_before = state.step
                epoch_batches = first_epoch if epoch == start_epoch else batches(generator)
                for group in _groups(epoch_batches, accumulate):
                    share = 1.0 / len(group) if len(group) > 1 else None  # each batch's part of the step's loss
                    if undo is not None:
                        undo.keep()  # before the group: a step stopped at once puts back what all its batches changed
                    tasks, losses = [], []
                    try:  # an error in the group (a KeyboardInterrupt too): on a CPU, what it changed is put back
                        for xb, yb in group:
                            yb = host_int64_labels(yb, "a batch's labels")  # NumPy int32, uint16...: losses take int64
                            xb, yb = xb.to(device, non_blocking=True), yb.to(device, non_blocking=True)
                            if augment_batch is not None:
                                xb = augment_batch(xb, generator)
                            with autocast(device, autocast_dtype):
                                out = model(xb, generator=generator) if draws else model(xb)
                                task = loss_fn(out, yb)
                                if not outputs_read:
                                    outputs_read = True
                                    _step_checks.warn_not_log_probabilities(out)
                                if (problem := _step_checks.bad_task_loss(task)) is not None:
                                    raise problem
                                if weight and reg is not None:
                                    penalty = reg(model)
                                    if (problem := _step_checks.bad_regularizer_value(penalty)) is not None:
                                        raise problem
                                    loss = task + weight * penalty
                                else:
                                    loss = task
                            if not loss.requires_grad:  # backward would fail (every parameter frozen, a detached loss)
                                raise _step_checks.no_gradient(state.step + 1, epoch, task, model)
                            if not task.requires_grad and not warned:  # the regulariser alone trains
                                warned = True
                                _step_checks.warn_task_without_gradient(state.step + 1)
                            if not tasks:
                                optimizer.zero_grad(set_to_none=True)
                            part = loss if share is None else loss * share
                            if scaler is not None:
                                scaler.scale(part).backward()
                            else:
                                part.backward()
                            if device.type == "cpu":  # at once, before the update: the model keeps its last finite one
                                if not bool(torch.isfinite(loss.detach())):
                                    optimizer.zero_grad(set_to_none=True)
                                    message = _checks.nonfinite_message(
                                        state.step + 1, epoch, loss.detach(), task.detach(), model
                                    )
                                    raise NonFiniteLossError(message, history)
                            elif device.type != "meta":  # on an accelerator reading it would wait for the device
                                bad = ~torch.isfinite(loss.detach())
                                bad_loss = bad if bad_loss is None else bad_loss | bad
                            tasks.append(task.detach())
                            losses.append(loss.detach())
                        if scaler is not None:
                            scaler.unscale_(optimizer)
                        for cb in callbacks:
                            cb.on_before_optimizer_step(state)
                    except BaseException as error:
                        if undo is not None:  # the forward passes' changes: batch-norm statistics, effects, pass count
                            undo.restore()
                        where = f"step {state.step + 1} (epoch {epoch})"
                        if (named := _step_checks.one_sample_error(error, xb, model, where, x, batch_size)) is not None:
                            raise named from error
                        raise
                    if scaler is not None:
                        scaler.step(optimizer)
                        scaler.update()
                    else:
                        optimizer.step()
                    if scheduler is not None and scheduler_interval == "step":
                        scheduler.step()
                    state.step += 1
                    if state.step == 1:
                        started_well()  # what the guard kept (the tensors from before a move) is let go
                    if share is None:
                        state.last_task_loss, state.last_loss = tasks[0], losses[0]
                    else:  # the step's: the mean of its batches' (what it minimised)
                        state.last_task_loss, state.last_loss = torch.stack(tasks).mean(), torch.stack(losses).mean()
                    task, loss = state.last_task_loss, state.last_loss
                    # Record steps read the device (one copy for everything they record); the steps between them do not,
                    # and neither does the progress bar, which shows what the last record step read.
                    if state.step == 1 or state.step % record_every == 0:
                        with torch.no_grad():
                            read = _read_back(task, loss, layers, device, bad_loss)
                            loss_value, total_value, read_weights, read_magnitudes, nonfinite = read
                            if nonfinite:
                                bar.close()
                                raise NonFiniteLossError(_nonfinite_since(state.step, record_every), history)
                            history["step"].append(state.step)
                            history["loss"].append(loss_value)
                            history["total_loss"].append(total_value)
                            if layers:
                                history["weights"].append(read_weights)
                                history["magnitudes"].append(read_magnitudes)
                            for key, value in _recorded(record).items():
                                if key in own_keys:
                                    raise ValueError(
                                        f"record() returned the key {key!r}, which fit's history holds itself "
                                        f"({sorted(own_keys)}): name it otherwise"
                                    )
                                history.setdefault(key, []).append(value)
                        if progress:
                            bar.set_postfix(_progress_fields(loss_value, layers, read_weights), refresh=False)
                    for cb in callbacks:
                        cb.on_step_end(state)
                    bar.update()
                if state.step == steps_before:
                    raise ValueError(f"epoch {epoch} gave no batches (a loader that yields nothing after epoch 0?)")
                if scheduler is not None and scheduler_interval == "epoch":
                    scheduler.step()
                for cb in callbacks:
                    cb.on_epoch_end(state)
        check_bad_input(device)  # what the steps after the last record step may have flagged (no-op on CPU)
        if bad_loss is not None and bool(bad_loss):
            raise NonFiniteLossError(_nonfinite_since(state.step, record_every), history)
        for cb in callbacks:
            cb.on_train_end(state)
            ended.append(cb)
        bar.close()
    except BaseException as error:
        bar.close()
        if drawn is not None and state.step == 0:  # (the first batch's order and the failed step's draws)
            generator.set_state(drawn)
        for cb in started:
            if any(cb is e for e in ended):  # its on_train_end ran to the end
                continue
            try:
                cb.on_train_error(state, error)
            except Exception as hook_error:  # the training's own error is the one raised
                warnings.warn(
                    f"{type(cb).__name__}.on_train_error raised {hook_error!r} (the training's error follows)",
                    RuntimeWarning,
                    stacklevel=2,
                )
        raise
    finally:
        torch.set_grad_enabled(grad_was)
    if state.step:  # a run of no step changed no parameter: it has nothing to say of them
        _checks.check_finite_parameters(model, state.step, history)
    return history


def _recorded(record: Callable[[], dict] | None) -> Mapping:
    """What ``record()`` returned, if a dict (a mapping); the TypeError naming ``record`` otherwise."""
    got = record() if record is not None else {}
    if not isinstance(got, Mapping):
        raise TypeError(f"record() must return a dict of values to record, got {type(got).__name__}: {got!r}")
    return got


def _groups(batches: Iterable, k: int) -> Iterable[list]:
    """The batches in lists of ``k`` (the last one shorter), each drawn whole before it is given."""
    it = iter(batches)
    while group := list(itertools.islice(it, k)):
        yield group


def _nonfinite_since(step: int, record_every: int) -> str:
    return (
        f"a loss that is not finite (NaN or infinite) in one of the steps up to step {step} (on an accelerator the "
        f"losses are read every record_every={record_every} steps, so the model holds that step's update)"
    )


def _read_back(
    task: Tensor, loss: Tensor, layers: list[AugmentationLayer], device: torch.device, bad_loss: Tensor | None = None
) -> tuple[float, float, list, list, bool]:
    """The task and total losses, every layer's weights and magnitudes, and whether a loss was not finite, in one
    device copy.

    The same copy reads the device's bad-input flag (:mod:`augnet.ops.bad_input`): a ``tap_mix`` call that
    saw NaN warps or out-of-range sources since the last record step raises its ``ValueError`` here.
    """
    if task.device.type == "meta":  # a dry run: no values to read
        blank = [[float("nan")] * len(layer.transforms) for layer in layers]
        return float("nan"), float("nan"), blank, [list(row) for row in blank], False
    parts = [task.detach().reshape(1), loss.detach().reshape(1)]
    for layer in layers:
        parts += [layer.weights.detach(), layer.magnitudes.detach()]
    dtype = torch.float64 if any(p.dtype == torch.float64 for p in parts) else torch.float32  # exact for each part
    checks = device.type not in ("cpu", "meta")  # on CPU bad inputs were refused at once; meta has no values
    if checks:
        loss_flag = bad_loss if bad_loss is not None else task.new_zeros((), dtype=torch.bool)
        parts += [bad_input_flag(device).reshape(1), loss_flag.reshape(1)]
    values = torch.cat([p.to(parts[0].device, dtype) for p in parts]).tolist()
    nonfinite = bool(values.pop()) if checks else False
    if checks and values[-1]:
        bad_input_flag(device).zero_()
        raise_bad_input(int(values[-1]), device)
    at, weights, magnitudes = 2, [], []
    for layer in layers:
        q = len(layer.transforms)
        weights.append(values[at : at + q])
        magnitudes.append(values[at + q : at + 2 * q])
        at += 2 * q
    return values[0], values[1], weights, magnitudes, nonfinite


def _progress_fields(loss: float, layers: list[AugmentationLayer], weights: list[list[float]]) -> dict[str, str]:
    """The progress bar's fields: the task loss, and the first layer's leading transform and its weight."""
    fields = {"task_loss": f"{loss:.3f}"}
    if layers:
        w = weights[0]
        q = max(range(len(w)), key=w.__getitem__)
        fields["top"] = f"{type(layers[0].transforms[q]).__name__}:{w[q]:.2f}"
    return fields


def autocast(device: torch.device, dtype: torch.dtype | None):
    """``torch.autocast`` on ``device`` to ``dtype``, or nothing when ``dtype`` is None (any device, meta included)."""
    return contextlib.nullcontext() if dtype is None else torch.autocast(device.type, dtype=dtype)


def _batches(x, y, batch_size, shuffle, training=True):
    """``(batches(generator) -> iterator of (x, y), steps per epoch or None)`` for tensors or a loader."""
    if isinstance(x, Tensor):
        if not isinstance(y, Tensor):
            raise TypeError(f"with tensor inputs, y must be a tensor of targets, got {type(y).__name__}")
        for name, t in (("x", x), ("y", y)):
            if t.dim() == 0:
                raise ValueError(f"{name} is a 0-d tensor, with no samples to batch: give (N, ...) {name}")
        if len(x) != len(y):
            raise ValueError(f"x and y must have the same length, got {len(x)} and {len(y)}")
        read = number("batch_size", batch_size)  # a 0-d integer tensor or array: the int it holds
        if not is_int(read) or read < 1:
            raise ValueError(f"batch_size must be an int >= 1 for tensor inputs, got {batch_size!r}")
        batch_size = int(read)  # a numpy integer too
        n = len(x)
        y = host_int64_labels(y, "y")  # widened once, as each batch would be: torch 2.4 cannot index uint16-64 tensors

        def tensor_batches(generator):
            if shuffle:
                order = torch.randperm(n, generator=generator, device=generator.device if generator else "cpu")
                order = order.to(x.device, non_blocking=True)  # once per epoch, without waiting for the device
            else:
                order = torch.arange(n, device=x.device)
            for i in range(0, n, batch_size):
                idx = order[i : i + batch_size]
                yield x[idx], y[idx]

        return tensor_batches, -(-n // batch_size)
    if isinstance(x, (str, bytes)) or not isinstance(x, Iterable):
        what = type(x).__name__
        raise TypeError(f"x must be a tensor or a data loader (an iterable of (inputs, targets)), got {what}"
                        f"{_call_forms.dataset_hint(x)}")  # fmt: skip
    if y is not None:
        extra = ("; fit takes no validation data: measure it in a Callback's on_epoch_end, e.g. with "
                 "accuracy(state.model, val_loader)") if training and not isinstance(y, Tensor) else ""  # fmt: skip
        raise ValueError(f"with a data loader, y must be None: the loader yields (inputs, targets), got y a "
                         f"{type(y).__name__}{extra}")  # fmt: skip
    if batch_size is not None:
        raise ValueError("with a data loader, batch_size must be None: the loader makes the batches")

    def loader_batches(generator):
        for i, batch in enumerate(x):
            yield checked_pair(batch, i)

    try:
        steps = len(x)
    except TypeError:
        steps = None
    return loader_batches, steps


@torch.no_grad()
def accuracy(
    model: torch.nn.Module, x: Tensor | Iterable, y: Tensor | None = None, batch_size: int = 500, generator=None
) -> float:
    """Accuracy of ``model`` (in evaluation mode) on ``(x, y)``, or on a data loader ``x`` (``y=None``).

    The batches are moved to the device of the model's parameters; an AugNet
    draws its copies from ``generator`` (on that device). Data that give no
    batch (no sample) raise the ValueError :func:`fit` raises for them.

    Args:
        model: a classifier returning :math:`(B, \\text{classes})` scores (an AugNet: aggregated log-probabilities).
        x, y: inputs :math:`(N, ...)` and class indices :math:`(N,)` (any integer dtype, read as int64 as fit reads
            them); or ``x`` a data loader of ``(inputs, targets)`` batches and ``y=None``.
        batch_size: for tensors, the batch size (default 500; a 0-d integer tensor or array too).
        generator: an AugNet's source of randomness (default ``None``: torch's global generator).

    Returns:
        The fraction of samples whose highest score is their class, a float in [0, 1].

    Raises:
        TypeError: ``model`` is not a module, ``x`` or ``y`` a NumPy array, or the model's output is not a tensor
            (a tuple, a dict).
        ValueError: no samples (or 0-d tensors), or outputs that are not :math:`(B, \\text{classes})` for
            :math:`(B,)` targets; a model (wholly or partly) on meta.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    _checks.check_not_arrays(x, y)
    batches, _ = _batches(x, y, batch_size if isinstance(x, Tensor) else None, shuffle=False, training=False)
    device = _checks.check_device(model, None)  # a model partly on meta: a ValueError naming those parts
    if device.type == "meta":
        raise ValueError("the model's parameters are on meta, which holds no values: there is no accuracy to measure")
    draws = _checks.draws_through(model, generator)
    correct = total = 0
    with evaluating(model):  # every submodule back in its own mode after (a frozen batch norm stays frozen)
        for xb, yb in batches(None):
            xb, yb = xb.to(device), host_int64_labels(yb, "a batch's labels").to(device)  # uint16 vs int64: no ==
            out = model(xb, generator=generator) if draws else model(xb)
            if not isinstance(out, Tensor):
                raise TypeError(
                    f"accuracy needs a model that returns a (B, classes) tensor of scores, got a {type(out).__name__} "
                    "(a model returning a tuple or a dict: wrap it to return its scores)"
                )
            if out.dim() != 2 or yb.shape != out.shape[:1]:
                raise ValueError(
                    f"accuracy needs (B, classes) outputs and (B,) class indices, got outputs {tuple(out.shape)} "
                    f"and targets {tuple(yb.shape)}"
                )
            correct += int((out.argmax(1) == yb).sum())
            total += len(yb)
        if not total:
            raise _checks.no_batches("measure")
    check_bad_input(device)
    return correct / total


