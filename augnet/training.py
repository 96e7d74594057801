"""A small training loop for AugNet models, recording the learned policy.

Used by ``augnet demo`` and the examples; written out so it can be read as the
reference for training an AugNet: task loss of the aggregated prediction plus
``lam`` times a regulariser of the augmentation layers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor

from augnet.layers import AugmentationLayer
from augnet.model import AugNet
from augnet.regularizers import get_regularizer

__all__ = ["Callback", "TrainState", "accuracy", "fit", "rank_generator"]


@dataclass
class TrainState:
    """What :func:`fit` shows its callbacks.

    Attributes:
        model, optimizer: what is being trained.
        epochs: the number of epochs of the run.
        epoch: the current epoch (0-based).
        step: optimiser steps taken so far (1 after the first step).
        lam: the regulariser's weight in this epoch.
        task_loss: the last step's task loss (a float), ``None`` before the first step.
        loss: the last step's total loss (a float), ``None`` before the first step.
        layers: the model's augmentation layers.
        history: the history :func:`fit` returns, as recorded so far.
    """

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    epochs: int
    layers: list[AugmentationLayer]
    epoch: int = 0
    step: int = 0
    lam: float = 0.0
    task_loss: float | None = None
    loss: float | None = None
    history: dict[str, list] = field(default_factory=dict)


class Callback:
    """Hooks that :func:`fit` calls; subclass and override the ones you need.

    ``on_before_optimizer_step`` runs after ``loss.backward()`` and before
    ``optimizer.step()``, where gradients can be read or changed (e.g.
    :class:`augnet.selection.WeightWarmup` holds the weights still).
    """

    def on_train_start(self, state: TrainState) -> None:
        """Before the first epoch."""

    def on_epoch_start(self, state: TrainState) -> None:
        """At the start of every epoch (``state.epoch`` is set)."""

    def on_before_optimizer_step(self, state: TrainState) -> None:
        """After the backward pass of a step, before the optimiser's step."""

    def on_step_end(self, state: TrainState) -> None:
        """After every optimiser step (``state.step``, ``state.loss`` are updated)."""

    def on_epoch_end(self, state: TrainState) -> None:
        """At the end of every epoch."""

    def on_train_end(self, state: TrainState) -> None:
        """After the last epoch."""


def _check_callbacks(callbacks) -> list[Callback]:
    if callbacks is None:
        return []
    if isinstance(callbacks, Callback) or not isinstance(callbacks, Sequence):
        callbacks = [callbacks]
    bad = [type(c).__name__ for c in callbacks if not isinstance(c, Callback)]
    if bad:
        raise TypeError(f"callbacks must be augnet.training.Callback instances, got {bad}")
    return list(callbacks)


def fit(
    model: torch.nn.Module,
    x: Tensor,
    y: Tensor,
    optimizer: torch.optim.Optimizer,
    epochs: int,
    batch_size: int,
    lam: float | Callable[[int], float] = 0.5,
    regularizer: str = "selective",
    generator: torch.Generator | None = None,
    loss_fn: Callable[[Tensor, Tensor], Tensor] = F.nll_loss,
    record_every: int = 5,
    progress: bool = False,
    desc: str = "training",
    record: Callable[[], dict] | None = None,
    augment_batch: Callable[[Tensor, torch.Generator | None], Tensor] | None = None,
    callbacks: Callback | Sequence[Callback] | None = None,
) -> dict[str, list]:
    """Train ``model`` on ``(x, y)``; return the history of its augmentation policy.

    Args:
        model: the model to train (put in training mode): an AugNet, an
            :class:`~augnet.Augerino` (both draw their augmentations from
            ``generator``), or any module, called on the batch alone (use
            ``regularizer="none"`` for a model without augmentation).
        x, y: training inputs and targets.
        optimizer: over the model's parameters (see :func:`augnet.param_groups`).
        epochs, batch_size: the schedule; batches are drawn by a permutation per epoch.
        lam: weight of the regulariser, or a function of the epoch (e.g. a
            :class:`~augnet.LambdaSchedule`).
        regularizer: ``"selective"``, ``"augerino"`` or ``"none"``.
        generator: source of randomness for the batches and the augmentations.
        loss_fn: task loss of the aggregated output (log-probabilities by default).
        record_every: record the policy every this many steps (and at the first).
        progress: show a tqdm progress bar.
        desc: the progress bar's label.
        record: called at every record step; each key of the dict it returns
            gets a list in the history (e.g. an Augerino's widths).
        augment_batch: a fixed augmentation ``augment_batch(x_batch, generator)``
            applied to each batch before the model (e.g. an oracle's true
            transformation for a plain model); it draws from ``generator``.
        callbacks: :class:`Callback` instances called at the start and end of
            training, of every epoch and of every step (e.g. the selection
            schedules of :mod:`augnet.selection`).

    Returns:
        ``{"step": [...], "loss": [...], "weights": [...], "magnitudes": [...]}``
        where each record of weights / magnitudes is a list over layers of
        lists over transforms (only for a model with augmentation layers),
        plus the keys of ``record``.
    """
    from tqdm.auto import tqdm

    reg = get_regularizer(regularizer)
    callbacks = _check_callbacks(callbacks)
    layers = [m for m in model.modules() if isinstance(m, AugmentationLayer)]
    history: dict[str, list] = {"step": [], "loss": []}
    if layers:
        history.update(weights=[], magnitudes=[])
    state = TrainState(model, optimizer, epochs, layers, history=history)
    draws = isinstance(model, AugNet)  # Augerino included: it is an AugNet
    n = len(x)
    steps_per_epoch = -(-n // batch_size)
    bar = tqdm(total=epochs * steps_per_epoch, disable=not progress, desc=desc, unit="step")
    step = 0
    model.train()
    for cb in callbacks:
        cb.on_train_start(state)
    for epoch in range(epochs):
        weight = lam(epoch) if callable(lam) else lam
        state.epoch, state.lam = epoch, float(weight)
        for cb in callbacks:
            cb.on_epoch_start(state)
        order = torch.randperm(n, generator=generator)
        for i in range(0, n, batch_size):
            idx = order[i : i + batch_size]
            xb = x[idx] if augment_batch is None else augment_batch(x[idx], generator)
            out = model(xb, generator=generator) if draws else model(xb)
            task = loss_fn(out, y[idx])
            loss = task + weight * reg(model) if weight else task
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            for cb in callbacks:
                cb.on_before_optimizer_step(state)
            optimizer.step()
            step += 1
            state.step, state.task_loss, state.loss = step, float(task.detach()), float(loss.detach())
            if step == 1 or step % record_every == 0:
                with torch.no_grad():
                    history["step"].append(step)
                    history["loss"].append(float(task.detach()))
                    if layers:
                        history["weights"].append([layer.weights.tolist() for layer in layers])
                        history["magnitudes"].append([layer.magnitudes.tolist() for layer in layers])
                    for key, value in (record() if record is not None else {}).items():
                        history.setdefault(key, []).append(value)
            for cb in callbacks:
                cb.on_step_end(state)
            if progress and layers:
                top = layers[0]
                w = top.weights.detach()
                q = int(w.argmax())
                name = type(top.transforms[q]).__name__
                bar.set_postfix(loss=f"{float(task.detach()):.3f}", top=f"{name}:{float(w[q]):.2f}")
            bar.update()
        for cb in callbacks:
            cb.on_epoch_end(state)
    for cb in callbacks:
        cb.on_train_end(state)
    bar.close()
    return history


@torch.no_grad()
def accuracy(model: torch.nn.Module, x: Tensor, y: Tensor, batch_size: int = 500, generator=None) -> float:
    """Accuracy of ``model`` (in evaluation mode) on ``(x, y)``."""
    was_training = model.training
    model.eval()
    correct = 0
    for i in range(0, len(x), batch_size):
        xb = x[i : i + batch_size]
        out = model(xb, generator=generator) if isinstance(model, AugNet) else model(xb)
        correct += int((out.argmax(1) == y[i : i + batch_size]).sum())
    model.train(was_training)
    return correct / max(len(x), 1)


def rank_generator(seed: int, device: torch.device | str | None = None) -> torch.Generator:
    """A generator for one process of a distributed run, seeded with ``seed + rank``.

    Under :class:`~torch.nn.parallel.DistributedDataParallel` every rank holds
    the same augmentation parameters (DDP averages their gradients) but should
    draw *different* augmentations, as one process would for different
    samples: seed each rank's generator with ``seed + rank``. Outside a
    distributed run (or before ``init_process_group``) the rank is 0.

    Args:
        seed: the run's seed, the same on every rank.
        device: where the augmentations are drawn (the inputs' device).

    Examples:
        >>> rank_generator(7).initial_seed()
        7
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    dist = torch.distributed
    rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
    return torch.Generator(device=device if device is not None else "cpu").manual_seed(seed + rank)
