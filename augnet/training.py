"""A small training loop for AugNet models, recording the learned policy.

Used by ``augnet demo`` and the examples; written out so it can be read as the
reference for training an AugNet: task loss of the aggregated prediction plus
``lam`` times a regulariser of the augmentation layers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor

from augnet.layers import AugmentationLayer
from augnet.model import AugNet
from augnet.regularizers import get_regularizer

__all__ = ["Callback", "PolicyLogger", "TrainState", "accuracy", "fit", "rank_generator", "resolve_device"]


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

    The losses are kept as detached tensors and turned into floats only when a
    callback reads them, so a training step does not wait for the device.
    """

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    epochs: int
    layers: list[AugmentationLayer]
    epoch: int = 0
    step: int = 0
    lam: float = 0.0
    history: dict[str, list] = field(default_factory=dict)
    last_task_loss: Tensor | None = field(default=None, repr=False)
    last_loss: Tensor | None = field(default=None, repr=False)

    @property
    def task_loss(self) -> float | None:
        return None if self.last_task_loss is None else float(self.last_task_loss)

    @property
    def loss(self) -> float | None:
        return None if self.last_loss is None else float(self.last_loss)


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


class PolicyLogger(Callback):
    """Write the learned policy and the losses to CSV and, optionally, TensorBoard, as :func:`fit` trains.

    Every ``every`` steps (and at the first and the last) it writes one row
    per record: the step, the epoch, the task and total losses, the
    regulariser's weight, the optimiser's learning rates, and for every
    augmentation layer ``i`` and transform ``Name``: its weight, its magnitude
    and the upper end of its range in natural units (``layer{i}/{Name}/weight``,
    ``.../magnitude``, ``.../range``; a name that repeats in a layer gets a
    ``#k`` suffix).

    - CSV: ``log_dir/policy.csv`` (``csv=True``), one column per quantity.
    - TensorBoard: scalars of the same names in ``log_dir`` (``tensorboard=True``,
      needs ``pip install "augnet[tensorboard]"``; ``torch.utils.tensorboard``
      is imported only then).

    Args:
        log_dir: the folder (created).
        every: write every this many steps.
        csv: write the CSV file.
        tensorboard: write TensorBoard event files.
        size: the input size for pixel units of the ranges (default: what each layer last saw).

    Examples:
        >>> import tempfile, torch, augnet
        >>> from augnet.transforms import image as T
        >>> model = augnet.AugNet(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(48, 2)),
        ...                       augnet.AugmentationLayer([T.Rotate(), T.ShearX()]))
        >>> x, y = torch.rand(8, 3, 4, 4), torch.randint(0, 2, (8,))
        >>> opt = torch.optim.Adam(model.parameters())
        >>> with tempfile.TemporaryDirectory() as d:
        ...     _ = fit(model, x, y, opt, epochs=1, batch_size=4, callbacks=PolicyLogger(d, every=1))
        ...     header = open(f"{d}/policy.csv").readline().strip().split(",")
        >>> header[:6], header[6]
        (['step', 'epoch', 'task_loss', 'loss', 'lambda', 'lr0'], 'layer0/Rotate/weight')
    """

    def __init__(
        self,
        log_dir,
        every: int = 10,
        csv: bool = True,
        tensorboard: bool = False,
        size: tuple[int, ...] | None = None,
    ) -> None:
        from pathlib import Path

        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"every must be an int >= 1, got {every!r}")
        if not (csv or tensorboard):
            raise ValueError("PolicyLogger writes nothing with csv=False and tensorboard=False")
        self.log_dir = Path(log_dir)
        self.every, self.csv, self.tensorboard, self.size = every, csv, tensorboard, size
        self._writer = None
        self._file = None
        self._columns: list[str] | None = None
        self._last_written = 0
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter  # noqa: F401
            except ImportError as err:
                hint = 'PolicyLogger(tensorboard=True) needs tensorboard: pip install "augnet[tensorboard]"'
                raise ImportError(hint) from err

    def values(self, state: TrainState) -> dict[str, float]:
        """The quantities written for ``state``, by column name."""
        out = {
            "step": float(state.step),
            "epoch": float(state.epoch),
            "task_loss": state.task_loss if state.task_loss is not None else float("nan"),
            "loss": state.loss if state.loss is not None else float("nan"),
            "lambda": state.lam,
        }
        for k, group in enumerate(state.optimizer.param_groups):
            out[f"lr{k}"] = float(group["lr"])
        for i, layer in enumerate(state.layers):
            seen: dict[str, int] = {}
            for entry in layer.policy(self.size):
                name = entry["transform"]
                seen[name] = seen.get(name, 0) + 1
                key = name if seen[name] == 1 else f"{name}#{seen[name]}"
                out[f"layer{i}/{key}/weight"] = entry["weight"]
                out[f"layer{i}/{key}/magnitude"] = entry["magnitude"]
                out[f"layer{i}/{key}/range"] = float(entry["range"][1])
        return out

    def on_train_start(self, state: TrainState) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        if self.tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(str(self.log_dir))
        self._last_written = 0

    def on_step_end(self, state: TrainState) -> None:
        if state.step == 1 or state.step % self.every == 0:
            self._write(state)

    def on_train_end(self, state: TrainState) -> None:
        if state.step and state.step != self._last_written:
            self._write(state)
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def _write(self, state: TrainState) -> None:
        values = self.values(state)
        self._last_written = state.step
        if self.csv:
            import csv

            if self._file is None:
                self._file = (self.log_dir / "policy.csv").open("w", newline="")
                self._columns = list(values)
                csv.writer(self._file).writerow(self._columns)
            csv.writer(self._file).writerow([values.get(c, float("nan")) for c in self._columns])
            self._file.flush()
        if self._writer is not None:
            for name, value in values.items():
                if name not in ("step", "epoch"):
                    self._writer.add_scalar(name, value, state.step)


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
    x: Tensor | Iterable,
    y: Tensor | None,
    optimizer: torch.optim.Optimizer,
    epochs: int,
    batch_size: int | None = None,
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
    device: torch.device | str | None = None,
    amp: bool | torch.dtype = False,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
    scheduler_interval: str = "epoch",
    shuffle: bool = True,
) -> dict[str, list]:
    """Train ``model`` on tensors or on a data loader; return the history of its augmentation policy.

    Args:
        model: the model to train (put in training mode): an AugNet, an
            :class:`~augnet.Augerino` (both draw their augmentations from
            ``generator``), or any module, called on the batch alone (use
            ``regularizer="none"`` for a model without augmentation).
        x, y: training inputs and targets (tensors); or ``x`` a
            :class:`~torch.utils.data.DataLoader` (any iterable of ``(inputs,
            targets)`` batches, re-iterated every epoch) and ``y=None``.
        optimizer: over the model's parameters (see :func:`augnet.param_groups`).
        epochs: the number of passes over the data.
        batch_size: for tensors, the batch size (a loader makes its own batches).
        lam: weight of the regulariser, or a function of the epoch (e.g. a
            :class:`~augnet.LambdaSchedule`).
        regularizer: ``"selective"``, ``"augerino"`` or ``"none"``.
        generator: source of randomness for the augmentations and, for
            tensors, the batches; on ``device`` (a CUDA run needs a CUDA generator).
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
            schedules of :mod:`augnet.selection`, or :class:`PolicyLogger`).
        device: where to train: the batches are moved there (default: where
            the model's parameters are).
        amp: mixed precision: ``True`` (bfloat16 on CPU, float16 on CUDA, with
            a gradient scaler for float16) or a dtype. The augmentation layers
            compute in float32 inside (see the README, "Mixed precision").
        scheduler: a learning-rate scheduler, stepped after every epoch
            (``scheduler_interval="epoch"``) or every step (``"step"``).
        scheduler_interval: ``"epoch"`` or ``"step"``.
        shuffle: for tensors, draw the batches by a permutation per epoch (from
            ``generator``); ``False`` takes them in order (as a loader without
            shuffling does, so the two give the same run).

    Returns:
        ``{"step": [...], "loss": [...], "weights": [...], "magnitudes": [...]}``
        where each record of weights / magnitudes is a list over layers of
        lists over transforms (only for a model with augmentation layers),
        plus the keys of ``record``.
    """
    from tqdm.auto import tqdm

    reg = get_regularizer(regularizer)
    callbacks = _check_callbacks(callbacks)
    batches, steps_per_epoch = _batches(x, y, batch_size, shuffle)
    if not isinstance(epochs, int) or isinstance(epochs, bool) or epochs < 0:
        raise ValueError(f"epochs must be an int >= 0, got {epochs!r}")
    if scheduler_interval not in ("epoch", "step"):
        raise ValueError(f"scheduler_interval must be 'epoch' or 'step', got {scheduler_interval!r}")
    device = _training_device(model, device)
    if generator is not None and torch.device(generator.device).type != device.type:
        raise ValueError(
            f"generator is on {generator.device} but training runs on {device}: the augmentations draw on the "
            f"inputs' device; pass torch.Generator(device={str(device)!r})"
        )
    autocast_dtype = _amp_dtype(amp, device)
    scaler = torch.amp.GradScaler(device.type) if autocast_dtype == torch.float16 else None
    layers = [m for m in model.modules() if isinstance(m, AugmentationLayer)]
    history: dict[str, list] = {"step": [], "loss": []}
    if layers:
        history.update(weights=[], magnitudes=[])
    state = TrainState(model, optimizer, epochs, layers, history=history)
    draws = isinstance(model, AugNet)  # Augerino included: it is an AugNet
    total = epochs * steps_per_epoch if steps_per_epoch is not None else None
    bar = tqdm(total=total, disable=not progress, desc=desc, unit="step")
    model.train()
    for cb in callbacks:
        cb.on_train_start(state)
    for epoch in range(epochs):
        weight = lam(epoch) if callable(lam) else lam
        state.epoch, state.lam = epoch, float(weight)
        for cb in callbacks:
            cb.on_epoch_start(state)
        for xb, yb in batches(generator):
            xb, yb = xb.to(device, non_blocking=True), yb.to(device, non_blocking=True)
            if augment_batch is not None:
                xb = augment_batch(xb, generator)
            with torch.autocast(device.type, dtype=autocast_dtype, enabled=autocast_dtype is not None):
                out = model(xb, generator=generator) if draws else model(xb)
                task = loss_fn(out, yb)
                loss = task + weight * reg(model) if weight else task
            optimizer.zero_grad(set_to_none=True)
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.unscale_(optimizer)
            else:
                loss.backward()
            for cb in callbacks:
                cb.on_before_optimizer_step(state)
            if scaler is not None:
                scaler.step(optimizer)
                scaler.update()
            else:
                optimizer.step()
            if scheduler is not None and scheduler_interval == "step":
                scheduler.step()
            state.step += 1
            state.last_task_loss, state.last_loss = task.detach(), loss.detach()
            if state.step == 1 or state.step % record_every == 0:
                with torch.no_grad():
                    history["step"].append(state.step)
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
        if scheduler is not None and scheduler_interval == "epoch":
            scheduler.step()
        for cb in callbacks:
            cb.on_epoch_end(state)
    for cb in callbacks:
        cb.on_train_end(state)
    bar.close()
    return history


def _batches(x, y, batch_size, shuffle):
    """``(batches(generator) -> iterator of (x, y), steps per epoch or None)`` for tensors or a loader."""
    if isinstance(x, Tensor):
        if not isinstance(y, Tensor):
            raise TypeError(f"with tensor inputs, y must be a tensor of targets, got {type(y).__name__}")
        if len(x) != len(y):
            raise ValueError(f"x and y must have the same length, got {len(x)} and {len(y)}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an int >= 1 for tensor inputs, got {batch_size!r}")
        n = len(x)

        def tensor_batches(generator):
            if shuffle:
                order = torch.randperm(n, generator=generator, device=generator.device if generator else "cpu")
                order = order.to(x.device)
            else:
                order = torch.arange(n, device=x.device)
            for i in range(0, n, batch_size):
                idx = order[i : i + batch_size]
                yield x[idx], y[idx]

        return tensor_batches, -(-n // batch_size)
    if isinstance(x, (str, bytes)) or not isinstance(x, Iterable):
        what = type(x).__name__
        raise TypeError(f"x must be a tensor or a data loader (an iterable of (inputs, targets)), got {what}")
    if y is not None:
        raise ValueError("with a data loader, y must be None: the loader yields (inputs, targets)")
    if batch_size is not None:
        raise ValueError("with a data loader, batch_size must be None: the loader makes the batches")

    def loader_batches(generator):
        for i, batch in enumerate(x):
            if not isinstance(batch, (tuple, list)) or len(batch) < 2:
                what = type(batch).__name__
                raise ValueError(f"the data loader's batch {i} is not an (inputs, targets) pair: {what}")
            yield batch[0], batch[1]

    try:
        steps = len(x)
    except TypeError:
        steps = None
    return loader_batches, steps


def resolve_device(device: torch.device | str | None) -> torch.device:
    """``device`` as a :class:`torch.device` (default the CPU); a ValueError if it is a GPU this machine lacks.

    Examples:
        >>> resolve_device("cpu")
        device(type='cpu')
    """
    try:
        device = torch.device("cpu" if device is None else device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"not a device: {device!r} ({err})") from err
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device} was asked for, but CUDA is not available on this machine")
    return device


def _training_device(model: torch.nn.Module, device) -> torch.device:
    """``device`` (the model is moved there), else the device of the model's parameters, else the CPU."""
    if device is not None:
        device = resolve_device(device)
        model.to(device)
        return device
    first = next(iter(model.parameters()), None)
    return first.device if first is not None else torch.device("cpu")


def _amp_dtype(amp, device: torch.device) -> torch.dtype | None:
    if amp is False or amp is None:
        return None
    if amp is True:
        return torch.float16 if device.type == "cuda" else torch.bfloat16
    if amp not in (torch.float16, torch.bfloat16):
        raise ValueError(f"amp must be True, False, torch.float16 or torch.bfloat16, got {amp!r}")
    return amp


@torch.no_grad()
def accuracy(
    model: torch.nn.Module, x: Tensor | Iterable, y: Tensor | None = None, batch_size: int = 500, generator=None
) -> float:
    """Accuracy of ``model`` (in evaluation mode) on ``(x, y)``, or on a data loader ``x`` (``y=None``).

    The batches are moved to the device of the model's parameters; an AugNet
    draws its copies from ``generator`` (on that device).
    """
    batches, _ = _batches(x, y, batch_size if isinstance(x, Tensor) else None, shuffle=False)
    device = _training_device(model, None)
    was_training = model.training
    model.eval()
    correct = total = 0
    try:
        for xb, yb in batches(None):
            xb, yb = xb.to(device), yb.to(device)
            out = model(xb, generator=generator) if isinstance(model, AugNet) else model(xb)
            correct += int((out.argmax(1) == yb).sum())
            total += len(yb)
    finally:
        model.train(was_training)
    return correct / max(total, 1)


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
