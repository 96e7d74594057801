"""Callbacks of :func:`augnet.training.fit`: the hooks, the policy log and the selection schedules.

:class:`Callback` is the base class (override the hooks you need);
:class:`TrainState` is what every hook sees. :class:`PolicyLogger` writes the
learned policy and the losses to CSV and TensorBoard.

The selection schedules change how an augmentation layer selects its
transform during training. The selective regulariser makes each layer promote
the transform with the highest admissible magnitude. How fast the weights move
decides how early the selection is made: at a low softmax temperature (the
AugNet paper's official code uses 0.01) the winner is settled in the first
epochs, a race; at temperature 1 the weights follow the magnitudes slowly.

- :class:`TemperatureAnnealing`: the layers' softmax temperature goes from
  ``start`` to ``end`` geometrically over the epochs (1 towards 0.01: the
  weights move slowly while the magnitudes find their ranges, then sharpen);
- :class:`WeightWarmup`: the weights are held still for the first epochs,
  so that every magnitude reaches its admissible range before the weights
  may move.

Both act on every :class:`~augnet.AugmentationLayer` of the model and leave
everything else as it is. (Weight decay on the augmentation parameters only is
:func:`augnet.param_groups`' ``aug_weight_decay``.)

Examples:
    >>> import torch
    >>> import augnet
    >>> from augnet.training import fit
    >>> from augnet.transforms import image as T
    >>> layer = augnet.AugmentationLayer([T.Rotate(), T.ShearX()])
    >>> model = augnet.AugNet(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.LazyLinear(4)), layer)
    >>> x, y = torch.rand(8, 3, 8, 8), torch.randint(0, 4, (8,))
    >>> model(x).shape  # initialise the lazy layer
    torch.Size([8, 4])
    >>> opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    >>> anneal = TemperatureAnnealing(start=1.0, end=0.01)
    >>> _ = fit(model, x, y, opt, epochs=3, batch_size=4, callbacks=[anneal, WeightWarmup(1)])
    >>> layer.temperature
    0.01
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor

from augnet._checks import NotANumberError, is_int, number
from augnet.layers import AugmentationLayer
from augnet.policy import check_size
from augnet.training._callback_checks import as_at_step, callback_list, step_point, warn_no_layers
from augnet.training._callback_checks import lie_augmentations as _lie_augmentations
from augnet.training._callback_checks import positive as _positive
from augnet.training._callback_checks import usable_log_dir as _usable_log_dir
from augnet.training._checks import finite_at_least_0, resume_point
from augnet.transforms._ranges import moving_end

__all__ = ["Callback", "PolicyLogger", "TemperatureAnnealing", "TrainState", "WeightWarmup"]


@dataclass
class TrainState:
    """What :func:`fit` shows its callbacks.

    Attributes:
        model, optimizer: what is being trained.
        epochs: the number of epochs of the run.
        epoch: the current epoch (0-based).
        step: optimiser steps taken so far in this :func:`fit` call (1 after the first step; with
            ``accumulate=k``, one per ``k`` batches).
        lam: the regulariser's weight in this epoch.
        task_loss: the last step's task loss (a float), ``None`` before the first step: what
            :func:`fit`'s history records as ``loss``.
        loss: the last step's total loss (a float): the task loss plus ``lam`` times the regulariser,
            what the step minimised (the history's ``total_loss``); ``None`` before the first step.
        layers: the model's augmentation layers.
        history: the history :func:`fit` returns, as recorded so far.
        steps_before: the optimiser steps an uninterrupted run took before this call's first epoch
            (``start_epoch`` times the steps per epoch; 0 for a run from epoch 0), ``None`` for a run resumed on a
            data loader without a length.

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
    steps_before: int | None = 0

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
    :class:`WeightWarmup` holds the weights still). Every hook takes the run's :class:`TrainState` as
    ``state`` (and :meth:`on_train_error` the exception as ``error``) and returns nothing.
    """

    def on_train_start(self, state: TrainState) -> None:
        """Before the first epoch."""

    def on_epoch_start(self, state: TrainState) -> None:
        """At the start of every epoch (``state.epoch`` is set)."""

    def on_before_optimizer_step(self, state: TrainState) -> None:
        """After the backward pass of a step, before the optimiser's step."""

    def on_step_end(self, state: TrainState) -> None:
        """After every optimiser step (``state.step``, ``state.loss`` and the history are updated; a scheduler with
        ``scheduler_interval="step"`` has stepped)."""

    def on_epoch_end(self, state: TrainState) -> None:
        """At the end of every epoch, after the epoch's scheduler step (``scheduler_interval="epoch"``): a
        checkpoint saved here holds the scheduler as the next epoch starts with it."""

    def on_train_end(self, state: TrainState) -> None:
        """After the last epoch."""

    def on_train_error(self, state: TrainState, error: BaseException) -> None:
        """When training stops with ``error``, for every callback whose :meth:`on_train_start` was called
        (the one that raised included) and whose :meth:`on_train_end` was not: e.g. to close files.
        ``state.step`` counts the steps that completed; ``error`` is raised on after every such hook has
        run (an error in a hook is warned of, not raised)."""


class PolicyLogger(Callback):
    """Write the learned policy and the losses to CSV and, optionally, TensorBoard, as :func:`fit` trains.

    At every ``every``-th step of the log (and at its first step and each run's last) it writes one row
    per record: the step, the epoch, the task loss (``task_loss``) and the total
    loss (``loss``: the task loss plus ``lambda`` times the regulariser, what the
    step minimised), the regulariser's weight, the learning rates that step used (read before a
    scheduler steps them), and
    for every augmentation layer ``i`` and transform ``Name``: its weight, its
    magnitude and the end of its range (in natural units) that moves with the magnitude
    (``layer{i}/{Name}/weight``, ``.../magnitude``, ``.../range``; a name that
    repeats in a layer gets a ``#k`` suffix). ``range`` is the upper end (the ``x`` of ``±x``, of
    ``[0, x]``, of ``[1/x, x]``) unless the upper end is the same at magnitudes 0 and 1; then it is the lower
    end: ``LowPass``'s lowest cut-off, ``AddNoise``'s lowest SNR (``inf`` at magnitude 0), ``Solarize``'s
    lowest threshold. An :class:`~augnet.Augerino`'s
    augmentation is logged as a layer after them: per generator, its width
    (``layer{i}/{generator}/magnitude``, the magnitude of its policy) and the upper end of its range.
    A model with no augmentation at all logs the rest, and is warned of once.

    - CSV: ``log_dir/policy.csv`` (``csv=True``), one column per quantity.
    - TensorBoard: scalars of the same names in ``log_dir`` (``tensorboard=True``,
      needs ``pip install "augnet[tensorboard]"``; ``torch.utils.tensorboard``
      is imported only then).

    Nothing already written is lost (but the rows after a checkpoint that ``resume=True`` drops): a
    ``policy.csv`` that exists (an earlier run's) is refused at construction unless ``overwrite=True``
    or ``resume=True``, and even then it is replaced (cut) only when the new run writes its first row;
    a logger used for several :func:`fit` calls (training continued) appends, its steps counting on, and
    refuses a run with other columns (another model) before it trains; a run resumed in a new process
    (``fit(..., start_epoch=k)`` from a checkpoint) goes on with the earlier process's ``policy.csv``
    given ``resume=True`` (below); a file written after construction (another logger's) is refused when
    the run starts. A run that stops with an error keeps the rows of the steps
    that completed, its last one included (as that step left it: its epoch, ``lambda`` and the layers'
    temperatures, also when the run stopped as the next epoch began); if it wrote none, it leaves no trace:
    what it made (the CSV file, the folders) is removed, an earlier run's
    ``policy.csv`` is kept, and TensorBoard's event file is made at the first
    row only. A ``log_dir`` that cannot hold the files (a file, a folder that
    cannot be written, a read-only or special file system) is refused at construction.

    Args:
        log_dir: the folder (created), a str or path-like object.
        every: write every this many steps (an int >= 1, or a 0-d integer tensor or array; default 10).
        csv: write the CSV file (default ``True``).
        tensorboard: write TensorBoard event files (default ``False``).
        size: the input size for pixel units of the ranges (ints, or a 1-D integer tensor or array; default: what
            each layer last saw).
        overwrite: replace an existing ``log_dir/policy.csv`` (default ``False``).
        resume: go on with an existing ``log_dir/policy.csv`` (default ``False``; not with ``overwrite``): at
            the start of this logger's first run, a file whose header is this run's columns is kept up to the
            rows of the epochs before the run's first (``fit``'s ``start_epoch``); the rows from that epoch on
            (written after the checkpoint the run resumes from, a row cut short included) are dropped when
            the run writes its first row, and the steps go on from the uninterrupted run's count (TensorBoard's
            events past it are purged). A file with other columns, or with rows past that count (another batch
            size or data), is refused before training, and so is a run resumed on a data loader without a
            length (its step count is unknown). Without a file it starts one.

    Raises:
        TypeError, ValueError: a bad argument (``csv`` and ``tensorboard`` both ``False`` included), an existing
            ``policy.csv`` without ``overwrite=True`` or ``resume=True``, or a ``log_dir`` that cannot hold the
            files.

    Examples:
        >>> import tempfile, torch, augnet
        >>> from augnet.training import fit
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
        overwrite: bool = False,
        resume: bool = False,
    ) -> None:
        every = number("every", every)  # a 0-d integer tensor or array: the int it holds
        if not is_int(every) or every < 1:
            raise ValueError(f"every must be an int >= 1, got {every!r}")
        every = int(every)  # a numpy integer too
        for name, flag in (("csv", csv), ("tensorboard", tensorboard), ("overwrite", overwrite), ("resume", resume)):
            if not isinstance(flag, bool):
                raise TypeError(f"PolicyLogger: {name} must be True or False, got {flag!r}")
        if not (csv or tensorboard):
            raise ValueError("PolicyLogger writes nothing with csv=False and tensorboard=False")
        if overwrite and resume:
            raise ValueError("PolicyLogger: overwrite=True replaces an earlier log and resume=True goes on with it: "
                             "pass one of them")  # fmt: skip
        if size is not None:  # a spatial size as the layers' policy() reads it, refused with its words
            try:
                size = check_size(size)
            except TypeError as err:  # a float or a string: a ValueError too, as the logger raised before
                raise NotANumberError(str(err)) from None
        self.log_dir = _usable_log_dir(log_dir)
        if csv:
            path = self.log_dir / "policy.csv"
            if path.is_dir():
                raise ValueError(f"PolicyLogger: {path} is a folder; the CSV log needs that name")
            if path.exists() and not overwrite and not resume:
                raise ValueError(
                    f"PolicyLogger: {path} exists (an earlier run's log): pass overwrite=True to replace it, "
                    "resume=True to go on with it (a run resumed from a checkpoint), or another log_dir"
                )
        self.every, self.csv, self.tensorboard, self.size = every, csv, tensorboard, size
        self._writer = None
        self._file = None
        self._pending = False  # overwrite=True: the earlier run's CSV is rewritten at the first row
        self.overwrite, self.resume = overwrite, resume
        self._cut: int | None = None  # resume=True: where the kept rows of the earlier log end (cut at the first row)
        self._purge: int | None = None  # resume=True: TensorBoard's events from this step on are purged
        self._created, self._rows = False, 0  # whether this logger's current run made the CSV; rows it wrote
        self._made: list[Path] = []  # the folders the current run made
        self._warned = False
        self._columns: list[str] | None = None
        self._last_written = 0
        self._offset = 0  # steps of the earlier fit() runs of this logger (training continued)
        self._steps = 0  # steps seen so far, all runs
        self._lrs: dict[int, list] = {}  # step -> the learning rates it used (read before the optimiser's step)
        self._point: tuple | None = None  # the last step this logger saw end: its epoch, lam, temperatures
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter  # noqa: F401
            except ImportError as err:
                hint = 'PolicyLogger(tensorboard=True) needs tensorboard: pip install "augnet[tensorboard]"'
                raise ImportError(hint) from err

    def values(self, state: TrainState) -> dict[str, float]:
        """The quantities written for ``state``, by column name (``step`` and ``epoch`` as ints; the learning
        rates of its last step, as that step used them)."""
        out: dict[str, float] = {
            "step": int(state.step),
            "epoch": int(state.epoch),
            "task_loss": state.task_loss if state.task_loss is not None else float("nan"),
            "loss": state.loss if state.loss is not None else float("nan"),
            "lambda": state.lam,
        }
        lrs = self._lrs.get(state.step) or [group["lr"] for group in state.optimizer.param_groups]
        for k, lr in enumerate(lrs):
            out[f"lr{k}"] = float(lr)
        for i, layer in enumerate(state.layers):
            seen: dict[str, int] = {}
            size = self.size if self.size is not None else layer.last_size  # the size the policy's ranges are at
            for t, entry in zip(layer.transforms, layer.policy(self.size), strict=True):
                name = entry["transform"]
                seen[name] = seen.get(name, 0) + 1
                key = name if seen[name] == 1 else f"{name}#{seen[name]}"
                out[f"layer{i}/{key}/weight"] = entry["weight"]
                out[f"layer{i}/{key}/magnitude"] = entry["magnitude"]
                out[f"layer{i}/{key}/range"] = float(entry["range"][moving_end(t, size)])
        for i, lie in enumerate(_lie_augmentations(state.model), start=len(state.layers)):  # Augerino's: widths
            for entry in lie.policy(self.size)[0]:  # ranges symmetric about 0 or 1: the upper end moves
                out[f"layer{i}/{entry['transform']}/magnitude"] = entry["magnitude"]
                out[f"layer{i}/{entry['transform']}/range"] = float(entry["range"][1])
        return out

    def on_train_start(self, state: TrainState) -> None:
        # This run's: a refused run must not remove an earlier run's file or folders.
        self._created, self._rows, self._made, self._lrs, self._point = False, 0, [], {}, None
        columns = list(self.values(state))
        if self._columns is not None and columns != self._columns:
            raise ValueError(
                f"PolicyLogger: this logger wrote the columns {self._columns} and this run has {columns} "
                "(another model): use a new PolicyLogger (or another log_dir) for it"
            )
        if not state.layers and not _lie_augmentations(state.model) and not self._warned:
            import warnings

            from augnet._stack import caller_stacklevel

            self._warned = True
            warnings.warn(
                f"PolicyLogger: {type(state.model).__name__} has no augmentation layers to log: the log holds the "
                "losses, the regulariser's weight and the learning rates only",
                UserWarning,
                stacklevel=caller_stacklevel(("augnet.",)),
            )
        path = self.log_dir / "policy.csv"
        first = self._columns is None
        if first and self.resume:  # its first run goes on from the uninterrupted run's count
            if state.steps_before is None:
                raise ValueError(
                    f"PolicyLogger(resume=True): the run resumes at epoch {state.epoch} on a data loader without a "
                    "length, so the steps before it are unknown: give the loader a __len__, or log to another "
                    "log_dir"
                )
            if self.csv and path.exists():  # read and checked here; what it drops is dropped at the first row
                self._cut = resume_point(path, columns, state.epoch, state.steps_before)
            self._steps, self._purge = state.steps_before, state.steps_before + 1
        self._made = [p for p in (self.log_dir, *self.log_dir.parents) if not p.exists()]  # deepest first
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._offset, self._last_written = self._steps, 0
        if self.csv and self._file is None and self._cut is None:
            import csv

            if first and self.overwrite:  # the earlier run's file is rewritten at the first row, not before
                self._pending = True  # (in place: its permissions, links and owner stay)
            else:
                try:  # "x": a file written since the check at construction (another logger's) is not overwritten
                    self._file = path.open("x" if first else "a", newline="")
                except FileExistsError:
                    self._remove_made()
                    raise ValueError(
                        f"PolicyLogger: {path} was written after this logger was made (another logger on the same "
                        "log_dir?): pass overwrite=True to replace it, or another log_dir"
                    ) from None
            self._created = first
            if first and not self._pending:
                csv.writer(self._file).writerow(columns)
                self._file.flush()
        self._columns = columns

    def on_before_optimizer_step(self, state: TrainState) -> None:
        # The rates this step uses: a scheduler steps after the optimiser (after every step, or at the epoch's end,
        # before the row of a run's last step is written), so a row reads them here. The step before's are kept
        # for a run that stops in this hook (its last row is that step's).
        now = [lr.detach().clone() if isinstance(lr, Tensor) else lr for lr in
               (group["lr"] for group in state.optimizer.param_groups)]  # fmt: skip
        self._lrs = {step: lrs for step, lrs in self._lrs.items() if step == state.step}
        self._lrs[state.step + 1] = now

    def on_step_end(self, state: TrainState) -> None:
        self._point = step_point(state)  # what the run's last row reads if the run moves on to an epoch and stops
        self._steps = self._offset + state.step  # the log's step: rows at the same steps as one uninterrupted run's
        if self._steps == 1 or self._steps % self.every == 0:
            self._write(state)

    def on_train_end(self, state: TrainState) -> None:
        if state.step and state.step != self._last_written:
            self._write(state)
        if self._pending and (self.log_dir / "policy.csv").exists():
            self._pending = False  # a run of no step: an earlier run's file is replaced only by a row
        self._cut = None  # a resumed run of no step: the earlier log stays whole
        self._commit()  # a run of no step, the file new: its header
        self._close()

    def on_train_error(self, state: TrainState, error: BaseException) -> None:
        # The steps that completed are logged; a run that wrote no row leaves no trace: the file and the folders it
        # made are removed (an earlier run's file, kept until the first row, stays), so that it can be run again.
        self._steps = self._offset + state.step  # a step whose on_step_end did not reach this logger counts too
        try:
            if state.step and state.step != self._last_written and self._columns is not None:
                self._write(state)
        finally:
            self._close()
        if self._rows:
            return
        if self._pending:  # nothing written: an earlier run's file is as it was
            self._pending = False
        elif self._cut is not None:  # resumed, nothing written: the earlier log is as it was (a retry reads it again)
            self._cut, self._columns = None, None
        elif self._created:
            (self.log_dir / "policy.csv").unlink(missing_ok=True)
        if self._created:
            self._columns, self._created = None, False
        self._remove_made()

    def _remove_made(self) -> None:
        for folder in self._made:  # deepest first; one that holds something (another's files) stays, as its parents
            try:
                folder.rmdir()
            except OSError:
                break
        self._made = []

    def _commit(self) -> None:
        """Start the CSV that replaces an earlier run's (``overwrite=True``): truncated and headed at the first row;
        or cut the earlier log that a resumed run goes on with (``resume=True``) after its kept rows."""
        if self._cut is not None:
            with (self.log_dir / "policy.csv").open("r+b") as file:  # in place: its permissions and links stay
                file.truncate(self._cut)
            self._file, self._cut = (self.log_dir / "policy.csv").open("a", newline=""), None
        if self._pending:
            import csv

            self._file, self._pending = (self.log_dir / "policy.csv").open("w", newline=""), False
            csv.writer(self._file).writerow(self._columns)
            self._file.flush()

    def _close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def _write(self, state: TrainState) -> None:
        with as_at_step(state, self._point) as at_step:  # a run stopped between epochs: its last step's epoch
            values = self.values(at_step)
        step = self._offset + state.step
        values["step"] = int(step)
        self._last_written = state.step
        self._commit()
        if self._file is not None:
            import csv

            csv.writer(self._file).writerow([values.get(c, float("nan")) for c in self._columns])
            self._file.flush()
        if self.tensorboard:
            if self._writer is None:  # made at the first row: a run that writes none leaves no event file
                from torch.utils.tensorboard import SummaryWriter

                self._writer = SummaryWriter(str(self.log_dir), purge_step=self._purge)
                self._purge = None
            for name, value in values.items():
                if name not in ("step", "epoch"):
                    self._writer.add_scalar(name, value, step)
        self._rows += 1


def check_callbacks(callbacks) -> list[Callback]:
    """fit's ``callbacks``: one Callback or an ordered iterable of them (each once), as a list."""
    return callback_list(callbacks, Callback)


class TemperatureAnnealing(Callback):
    """Anneal every layer's softmax temperature from ``start`` to ``end`` over the run.

    In epoch ``e`` of ``E`` the temperature is ``start * (end / start) ** (e / (E' - 1))``
    with ``E' = epochs`` if given (then it stays at ``end`` after epoch ``E' - 1``),
    else the run's number of epochs; it is exactly ``start`` in epoch 0 and exactly
    ``end`` from epoch ``E' - 1`` on (with ``E' = 1``, from the first epoch). It is set
    at the start of each epoch (``on_epoch_start``), before its first step, and
    holds through the epoch. The layers keep the last temperature after training
    (so evaluation uses it). A model without augmentation layers (a plain model, an
    :class:`~augnet.Augerino`) has no temperature to anneal: its run is warned of at its start.

    Args:
        start: the temperature of the first epoch (> 0, default 1.0; ``end`` is used when ``E' = 1``).
        end: the temperature of the last epoch (> 0, default 0.01).
        epochs: the number of epochs the annealing takes (default: the whole run).

    Each number may be a 0-d tensor or NumPy array (an integer one for ``epochs``), read as the value it holds.
    """

    def __init__(self, start: float = 1.0, end: float = 0.01, epochs: int | None = None) -> None:
        self.start = _positive("start", start)
        self.end = _positive("end", end)
        for name, value in (("start", self.start), ("end", self.end)):
            if 1.0 / value > 3.4e38:
                raise ValueError(f"{name} temperature {value} is too small: logits / temperature overflows float32")
        epochs = None if epochs is None else number("epochs", epochs)  # a 0-d integer tensor: the int it holds
        if epochs is not None and (not is_int(epochs) or epochs < 1):
            raise ValueError(f"epochs must be an int >= 1 or None, got {epochs!r}")
        self.epochs = None if epochs is None else int(epochs)

    def temperature(self, epoch: int, epochs: int) -> float:
        """The temperature of ``epoch`` (0-based; a number >= 0) in a run of ``epochs`` epochs (0-d tensors: their
        numbers); a TypeError or ValueError naming either that is not one (a negative epoch went past ``start``)."""
        check = finite_at_least_0  # a number >= 0 (a 0-d tensor or array: the number it holds)
        epoch, epochs = check("TemperatureAnnealing: epoch", epoch), check("TemperatureAnnealing: epochs", epochs)
        span = (self.epochs if self.epochs is not None else epochs) - 1
        if span <= 0:
            return self.end
        frac = epoch / span
        if frac >= 1:  # exactly `end`: start * (end / start) can round off it (0.3 -> 0.7 gave 0.7000000000000001)
            return self.end
        return self.start * (self.end / self.start) ** frac

    def on_train_start(self, state: TrainState) -> None:
        warn_no_layers(self, state, "no softmax temperature to anneal")

    def on_epoch_start(self, state: TrainState) -> None:
        t = self.temperature(state.epoch, state.epochs)
        for layer in state.layers:
            layer.temperature = t

    def __repr__(self) -> str:
        return f"TemperatureAnnealing(start={self.start!r}, end={self.end!r}, epochs={self.epochs})"  # exact


class WeightWarmup(Callback):
    """Hold every layer's weights still for the first ``epochs`` epochs; the magnitudes train from the start.

    During the warm-up the weight logits get no gradient (``grad`` is set to
    ``None`` before the optimiser's step, so optimisers that skip such
    parameters, e.g. Adam and SGD, neither move them nor update their
    moments). The magnitudes meanwhile rise to what the task loss admits
    under the uniform blend, so that when the weights may move they compare
    settled magnitudes rather than the first steps' race.

    A per-instance layer (:class:`~augnet.instance.ConditionedAugmentationLayer`) adds its conditioner's
    outputs to the weight logits; the conditioner keeps training (it gives the magnitudes too), so
    its per-input weights are not held: the run is warned of that at its start, as is a run of a model
    without augmentation layers (no weights to hold) that starts within the warm-up.

    Args:
        epochs: the warm-up's length in epochs (an int >= 0, or a 0-d integer tensor or array; default 3).
    """

    def __init__(self, epochs: int = 3) -> None:
        epochs = number("epochs", epochs)  # a 0-d integer tensor or array: the int it holds
        if not is_int(epochs) or epochs < 0:
            raise ValueError(f"epochs must be an int >= 0, got {epochs!r}")
        self.epochs = int(epochs)

    def on_train_start(self, state: TrainState) -> None:
        if state.epoch < self.epochs:
            warn_no_layers(self, state, "no weights to hold still")
        conditioned = [type(layer).__name__ for layer in state.layers if hasattr(layer, "conditioner")]
        if state.epoch < self.epochs and conditioned:  # a run resumed past the warm-up holds nothing
            import warnings

            from augnet._stack import caller_stacklevel

            warnings.warn(
                f"WeightWarmup holds the weight logits still, not the conditioner of a {conditioned[0]}: its "
                "per-input weights keep training (the conditioner's outputs give the weights and the magnitudes "
                "together)",
                UserWarning,
                stacklevel=caller_stacklevel(("augnet.",)),
            )

    def on_before_optimizer_step(self, state: TrainState) -> None:
        if state.epoch < self.epochs:
            for layer in state.layers:
                layer.weight_logits.grad = None

    def __repr__(self) -> str:
        return f"WeightWarmup(epochs={self.epochs})"
