"""What :func:`augnet.training.fit` checks before its first step, so that bad input changes nothing.

Every check here reads its arguments and raises a ValueError or TypeError
naming the argument and the value; none moves, trains or writes anything.
"""

from __future__ import annotations

import csv
import itertools
import math
import numbers
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from torch import Tensor

from augnet._checks import is_int, number
from augnet._stack import caller_stacklevel
from augnet.augerino import LieAugmentation
from augnet.layers import AugmentationLayer
from augnet.regularizers import get_regularizer
from augnet.training._step_checks import explains
from augnet.training.devices import check_not_partly_meta, model_device, resolve_device

__all__ = ["NonFiniteLossError"]


class NonFiniteLossError(ValueError, FloatingPointError):
    """Training stopped: a step's loss (or the parameters after the last step) is not finite.

    A ValueError (the data, the settings or the model gave a value that is not
    finite) and a FloatingPointError. ``history`` holds what :func:`fit` had
    recorded up to the step before.
    """

    def __init__(self, message: str, history: dict | None = None) -> None:
        super().__init__(message)
        self.history = history if history is not None else {}


def call_form(x, y, optimizer, epochs, batch_size):
    """``(y, optimizer, epochs)`` of the call, accepting a loader's call without the ``y`` placeholder.

    ``fit(model, loader, opt, epochs)`` and ``fit(model, loader, optimizer=opt, epochs=...)``
    mean ``fit(model, loader, None, opt, epochs)``: with a loader the third
    positional argument may be the optimiser (an optimiser is never targets).
    """
    check_not_arrays(x, y)
    if isinstance(x, Tensor) and is_optimizer(y):
        raise TypeError(f"with tensor inputs, y must be a tensor of targets, got {type(y).__name__} (an optimizer)")
    if not isinstance(x, Tensor) and is_optimizer(y):
        if is_optimizer(optimizer):
            raise TypeError("fit() got two optimizers (the third argument and optimizer=)")
        if optimizer is not None:  # fit(model, loader, opt, epochs): the epochs sit in optimizer's place
            if epochs is not None:  # fit(model, loader, opt, 1, 8), or fit(model, loader, opt, 1, epochs=8)
                extra = "" if batch_size is None else f" and a batch size of {batch_size!r}"
                raise TypeError(
                    f"fit() got the epochs twice with a data loader ({optimizer!r} after the optimizer, then "
                    f"{epochs!r}){extra}: with a loader the call is fit(model, loader, opt, epochs), once; a batch "
                    "size is the DataLoader's (DataLoader(..., batch_size=...)), not fit's"
                )
            optimizer, epochs = y, optimizer
        else:
            optimizer = y
        y = None
    if optimizer is None:
        raise TypeError("fit() needs an optimizer: fit(model, loader, optimizer=opt, epochs=...)")
    if not is_optimizer(optimizer):
        raise TypeError(f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}: {optimizer!r}")
    if epochs is None:
        raise TypeError("fit() needs the number of epochs: fit(model, loader, optimizer=opt, epochs=...)")
    epochs = number("epochs", epochs)  # a 0-d integer tensor or array: the int it holds, as every count reads one
    if not is_int(epochs) or epochs < 0:
        raise ValueError(f"epochs must be an int >= 0, got {epochs!r}")
    return y, optimizer, int(epochs)  # a numpy integer too


def check_not_arrays(x, y) -> None:
    """The TypeError of inputs or targets given as a NumPy array (or like one), saying how to convert them."""
    for name, value in (("x", x), ("y", y)):
        if hasattr(value, "__array__") and not isinstance(value, Tensor):  # a NumPy array (or like one)
            kind = f"{type(value).__module__.split('.')[0]}.{type(value).__name__}"
            raise TypeError(
                f"{name} must be a tensor (x may be a data loader), got a {kind}; convert it with "
                f"torch.as_tensor({name}), as the model's dtype (usually float32) for the inputs and int64 "
                "class indices for the targets"
            )


def is_optimizer(obj) -> bool:
    """A torch optimiser, or one that looks like it (``param_groups``, ``step``, ``zero_grad``)."""
    if isinstance(obj, torch.optim.Optimizer):
        return True
    return all(hasattr(obj, a) for a in ("param_groups", "step", "zero_grad")) and not isinstance(obj, type)


def check_optimizer(model: torch.nn.Module, optimizer) -> None:
    """The optimiser must hold some of the model's parameters (else nothing would train)."""
    ours = {id(p) for p in model.parameters()}
    held = [p for group in optimizer.param_groups for p in group["params"]]
    if not any(id(p) in ours for p in held):
        raise ValueError(
            f"the optimizer holds none of the model's parameters ({len(held)} others): nothing would be trained; "
            "pass model.parameters() (or augnet.param_groups(model))"
        )


def check_accumulate(accumulate) -> int:
    """``accumulate`` (batches per optimiser step) as an int >= 1 (a 0-d integer tensor or array: the int it holds):
    a TypeError for a non-int (a bool, a float), a ValueError for one below 1."""
    accumulate = number("accumulate", accumulate)
    if not is_int(accumulate):
        raise TypeError(f"accumulate must be an int (batches per optimizer step), got {type(accumulate).__name__}: "
                        f"{accumulate!r}")  # fmt: skip
    if accumulate < 1:
        raise ValueError(f"accumulate must be an int >= 1 (batches per optimizer step), got {accumulate!r}")
    return int(accumulate)  # a numpy integer too


def check_start_epoch(start_epoch, epochs: int) -> int:
    """``start_epoch`` as an int in ``[0, epochs]`` (a 0-d integer tensor or array: the int it holds)."""
    read = number("start_epoch", start_epoch)
    if not is_int(read):
        raise TypeError(f"start_epoch must be an int, got {type(start_epoch).__name__}: {start_epoch!r}")
    if not 0 <= read <= epochs:
        raise ValueError(f"start_epoch must lie in [0, epochs] = [0, {epochs}], got {read}")
    return int(read)  # a numpy integer too


def check_trains_policy(model: torch.nn.Module, optimizer, reg) -> None:
    """Warn when a regulariser is to train the augmentation layers but the optimiser holds none of their
    parameters: the policy would not move (the regulariser computed at every step for nothing)."""
    if reg is None:
        return
    augmentation = {id(p) for m in model.modules() if isinstance(m, (AugmentationLayer, LieAugmentation))
                    for p in m.parameters()}  # fmt: skip
    held = {id(p) for group in optimizer.param_groups for p in group["params"]}
    if augmentation and not augmentation & held:
        warnings.warn(
            "the optimizer holds none of the augmentation layers' parameters: the policy will not train "
            "(pass augnet.param_groups(model), or lam=0 to keep the policy fixed on purpose)",
            UserWarning,
            stacklevel=caller_stacklevel(("augnet.",)),
        )


def draws_through(model: torch.nn.Module, generator) -> bool:
    """Whether ``model`` takes ``generator=`` for its draws: an AugNet (Augerino included), or one in DDP.

    A compiled AugNet (``torch.compile``) draws from torch's global generator (compiled code cannot trace a
    generator argument): given a generator, it is warned that the generator orders the batches only.
    """
    from torch.nn.parallel import DistributedDataParallel

    from augnet.model import AugNet

    inner, compiled = model, False
    while True:  # DDP(AugNet), torch.compile(AugNet), and either inside the other
        if isinstance(inner, DistributedDataParallel):
            inner = inner.module
        elif isinstance(getattr(inner, "_orig_mod", None), torch.nn.Module):
            inner, compiled = inner._orig_mod, True
        else:
            break
    if not isinstance(inner, AugNet):
        return False
    if compiled and generator is not None:
        warnings.warn(
            "a compiled AugNet draws its augmentations from torch's global generator (torch.compile cannot "
            "trace a generator argument): the generator given is not passed to it; seed torch.manual_seed",
            UserWarning,
            stacklevel=caller_stacklevel(("augnet.",)),
        )
    return not compiled


def check_regularizer(model: torch.nn.Module, regularizer, weights: LamWeights):
    """The regulariser to add (``None`` for ``"none"``, or when every epoch's weight is 0)."""
    reg = get_regularizer(regularizer)
    if isinstance(regularizer, str) and regularizer == "none":
        return None
    if isinstance(regularizer, str) and weights.any():
        kinds = (AugmentationLayer,) if regularizer in ("selective", "paper") else (AugmentationLayer, LieAugmentation)
        if not any(isinstance(m, kinds) for m in model.modules()):
            raise ValueError(
                f"regularizer {regularizer!r} needs augmentation layers, and {type(model).__name__} has none: "
                + (
                    "an Augerino's augmentation has widths, not weights to select by: pass regularizer='augerino'"
                    if any(isinstance(m, LieAugmentation) for m in model.modules())
                    else "pass regularizer='none' (or lam=0) for a model without augmentation"
                )
            )
    if isinstance(regularizer, str) and regularizer == "selective" and weights.any():
        warn_unmeasured_layers(model)
    return reg if weights.any() else None


def warn_unmeasured_layers(model: torch.nn.Module) -> None:
    """Warn that the selective regulariser (effect units) counts an AugNet's trunk layers in other units.

    An AugNet measures the effects of its ``augment`` module's layers (``effect_every``); a layer inside its trunk
    keeps its effect (1 until loaded or measured): its magnitudes count in the transforms' own units, beside
    magnitudes scaled by measured effects, without a word otherwise.
    """
    from augnet._model_checks import trunk_layer_paths
    from augnet.model import AugNet

    for name, net in model.named_modules():
        if not isinstance(net, AugNet) or not net.effect_every:
            continue
        prefix = f"{name}." if name else ""
        paths = [prefix + p for p in trunk_layer_paths(net, AugmentationLayer)]
        measured = [model.get_submodule(p).effect_measured for p in paths]  # a meta tensor holds no value
        unmeasured = [p for p, t in zip(paths, measured, strict=True) if t.is_meta or not bool(t)]
        if unmeasured:
            warnings.warn(
                f"regularizer='selective' weighs magnitudes by their measured effects, but the AugNet measures "
                f"those of its augment module's layers only: the AugmentationLayer(s) at {', '.join(unmeasured)} "
                "inside its trunk count in the transforms' own units. Put the layer(s) in augment, or count every "
                "layer alike with regularizer=functools.partial(augnet.selective_regularizer, units='magnitude')",
                UserWarning,
                stacklevel=caller_stacklevel(("augnet.",)),
            )


#: How many epochs of a callable ``lam`` are asked for before training (the rest are asked for as they come).
LAM_AHEAD = 10_000


class LamWeights:
    """The regulariser's weight per epoch: ``lam`` checked (finite, >= 0) before training, for every epoch.

    A callable is asked for each epoch once: before training for the first
    :data:`LAM_AHEAD` epochs, then at the start of each later epoch.
    """

    def __init__(self, lam, epochs: int) -> None:
        self.lam, self.later = lam, {}  # later: the last epoch past LAM_AHEAD asked for, and its weight
        if callable(lam):
            self.known = [self._checked(lam(e), f"lam({e})") for e in range(min(epochs, LAM_AHEAD))]
        else:
            self.known = [self._checked(lam, "lam")]

    @staticmethod
    def _checked(v, where: str) -> float:
        v = number(where, v)  # a 0-d tensor or NumPy array: the number it holds (a bool or complex one is refused)
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise TypeError(f"{where} must be a number (the regulariser's weight), got {v!r}")
        if not math.isfinite(v) or v < 0:
            raise ValueError(f"{where} must be finite and >= 0, got {v!r}")
        return float(v)

    def __getitem__(self, epoch: int) -> float:
        if not callable(self.lam):
            return self.known[0]
        if epoch < len(self.known):
            return self.known[epoch]
        if epoch not in self.later:
            self.later = {epoch: self._checked(self.lam(epoch), f"lam({epoch})")}
        return self.later[epoch]

    def any(self) -> bool:
        """Whether some epoch (of those known) weighs the regulariser."""
        return any(self.known) or (callable(self.lam) and len(self.known) == LAM_AHEAD)


def finite_at_least_0(name: str, value):
    """``value`` (a 0-d tensor or array: the number it holds) if it is a finite number >= 0; else the TypeError or
    ValueError naming ``name``."""
    value = number(name, value)
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise TypeError(f"{name} must be a number, got {value!r}")
    if not 0 <= value < math.inf:  # NaN fails too
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return value


def check_callables(loss_fn, **named) -> None:
    """``loss_fn`` must be callable; each of ``named`` callable or None."""
    if not callable(loss_fn):
        raise TypeError(f"loss_fn must be callable, got {type(loss_fn).__name__}: {loss_fn!r}")
    for name, value in named.items():
        if value is not None and not callable(value):
            raise TypeError(f"{name} must be callable (or None), got {type(value).__name__}: {value!r}")


def check_record_every(record_every) -> int:
    """``record_every`` as an int >= 1 (a 0-d integer tensor or array: the int it holds)."""
    read = number("record_every", record_every)
    if not is_int(read) or read < 1:
        raise ValueError(f"record_every must be an int >= 1, got {record_every!r}")
    return int(read)  # a numpy integer too


def check_scheduler(scheduler, optimizer, interval: str) -> None:
    if not isinstance(interval, str) or interval not in ("epoch", "step"):  # an array: no truth value to test
        raise ValueError(f"scheduler_interval must be 'epoch' or 'step', got {interval!r}")
    if scheduler is None:
        return
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau
    if isinstance(scheduler, plateau):
        raise TypeError(
            "scheduler: ReduceLROnPlateau needs a metric at each step, which fit does not have; "
            "step it in a Callback's on_epoch_end"
        )
    if not isinstance(scheduler, torch.optim.lr_scheduler.LRScheduler):
        raise TypeError(f"scheduler must be a torch.optim.lr_scheduler.LRScheduler, got {type(scheduler).__name__}")
    if scheduler.optimizer is not optimizer:
        raise ValueError("the scheduler was made for another optimizer than fit's: it would change nothing that trains")


def check_device(model: torch.nn.Module, device) -> torch.device:
    """Where training runs (checked; the model is not moved here).

    A model already on ``meta`` (no values, shapes only) runs there, as a dry run of the steps (e.g. to look
    for host synchronisations); moving a model to ``meta`` would destroy its weights and is refused (by
    :func:`resolve_device`), as is moving a meta model anywhere else (it has no values to move), and a model
    with only some of its parameters or buffers on meta (:func:`check_not_partly_meta`).
    """
    check_not_partly_meta(model)
    if model_device(model).type == "meta":
        try:
            meta = device is None or torch.device(device).type == "meta"
        except (RuntimeError, TypeError) as err:  # as resolve_device says it
            raise ValueError(f"not a device: {device!r} ({str(err).strip().splitlines()[0]})") from None
        if meta:
            return torch.device("meta")
        raise ValueError("the model's parameters are on meta, which holds no values: nothing to move to " + str(device))
    return resolve_device(device) if device is not None else model_device(model)


def check_generator(generator, device: torch.device) -> None:
    if generator is None:
        return
    where = getattr(generator, "device", None)
    if where is None:
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}: {generator!r}")
    if torch.device(where).type != device.type:
        raise ValueError(
            f"generator is on {where} but training runs on {device}: the augmentations draw on the "
            f"inputs' device; pass torch.Generator(device={str(device)!r})"
        )
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")


def first_pass(
    x, batches: Callable, generator, epochs: int, device: torch.device | None = None
) -> tuple[Iterator | None, torch.dtype | None]:
    """The first epoch's batches, its first batch already drawn and checked, and the dtype of that batch's inputs
    (``None, None`` for 0 epochs).

    Raises:
        ValueError: the data give no batch (an empty data set, a DataLoader whose
            drop_last drops everything), or ``x`` is a one-shot iterator asked for
            several epochs.
    """
    if epochs == 0:
        return None, None
    if epochs > 1 and isinstance(x, Iterator):
        raise ValueError(
            f"x is an iterator ({type(x).__name__}), exhausted after one pass, but {epochs} epochs were asked for: "
            "pass a DataLoader or a list of batches"
        )
    it = iter(batches(generator))
    first = next(it, None)
    if first is None:
        raise no_batches("train on")
    if device is not None and device.type == "meta" and first[0].device.type != "meta":
        raise ValueError(
            f"the model is on meta (no values: a dry run of the steps) but the data are on {first[0].device}: "
            "a meta model trains nothing; keep the model on a real device, or give it meta inputs for a dry run"
        )
    return itertools.chain([first], it), first[0].dtype


def no_batches(what: str) -> ValueError:
    """The ValueError of data that gave no batch: nothing to ``what`` (``"train on"``, ``"measure"``)."""
    return ValueError(
        "the data gave no batches (an empty data set, or a DataLoader with drop_last=True and fewer samples "
        f"than its batch size): there is nothing to {what}"
    )


def checked_pair(batch, i: int) -> tuple[Tensor, Tensor]:
    """A loader's batch as ``(inputs, targets)`` tensors of one length."""
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:
        what = f"a {type(batch).__name__} of {len(batch)}" if isinstance(batch, (tuple, list)) else type(batch).__name__
        if isinstance(batch, dict):
            what = f"a dict with keys {list(batch)[:8]}"
        raise ValueError(
            f"the data loader's batch {i} is not an (inputs, targets) pair: {what}; have the dataset (or the "
            "loader's collate_fn) return (inputs, targets)"
        )
    for name, t in zip(("inputs", "targets"), batch, strict=True):
        if not isinstance(t, Tensor):
            kind = f"{type(t).__module__}.{type(t).__name__}" if type(t).__module__ != "builtins" else type(t).__name__
            raise TypeError(
                f"the data loader's batch {i}: the {name} must be a tensor, got a {kind} "
                "(a DataLoader turns arrays into tensors; else convert them with torch.as_tensor)"
            )
        if t.dim() == 0:
            raise ValueError(f"the data loader's batch {i}: the {name} are a 0-d tensor, with no batch dimension "
                             "(a data set's single samples? give a DataLoader(dataset, batch_size=...))")  # fmt: skip
    xb, yb = batch
    if len(xb) != len(yb):
        raise ValueError(f"the data loader's batch {i} has {len(xb)} inputs and {len(yb)} targets")
    return xb, yb


def nonfinite_message(step: int, epoch: int, loss: Tensor, task: Tensor, model: torch.nn.Module) -> str:
    finite = all(bool(torch.isfinite(p).all()) for p in model.parameters())
    state = (
        f"the model holds its parameters and buffers after step {step - 1}, the last finite state"
        if finite
        else "the model's parameters are already not finite (an earlier step's gradients were not)"
    )
    return (
        f"fit: the loss of step {step} (epoch {epoch}) is {float(loss)} (task loss {float(task)}): training "
        f"stopped before that step's update; {state}. Look for NaN or inf in the data, a learning rate too high, "
        f"or lam; the history so far is the error's .history"
    )


def check_finite_parameters(model: torch.nn.Module, step: int, history: dict) -> None:
    """After training: every parameter is finite (a finite loss whose gradients were not could break that)."""
    params = [(name, p) for name, p in model.named_parameters() if p.device.type != "meta"]  # meta: no values
    bad = [name for name, p in params if not bool(torch.isfinite(p).all())]
    if bad:
        raise NonFiniteLossError(
            f"fit: after step {step} the parameters {bad} are not finite (the gradients of a step with a finite "
            "loss were not): the model is not usable; the history is the error's .history",
            history,
        )


class _ModelState:
    """What a model holds besides its parameters, kept to be put back: see :func:`undo_a_failed_start`.

    Every buffer (a copy: batch-norm statistics, the effects an AugNet measures, a conditioner's statistics),
    every module's extra state (an AugNet's pass count, a layer's input size) and mode, the last policy of the
    per-instance layers, and the parameters' gradients (references: ``zero_grad`` replaces them, it does not
    write into them). The parameters' values change only in the optimiser's step, the end of a step; their
    tensors are kept (references) for where they were: ``fit`` moves the model to its device inside.
    """

    def __init__(self, model: torch.nn.Module) -> None:
        modules = list(model.modules())
        self.buffers = [(m, name, None if b is None else b.detach().clone())
                        for m in modules for name, b in m._buffers.items()]  # fmt: skip
        base = torch.nn.Module.get_extra_state
        self.extra = [(m, m.get_extra_state()) for m in modules if type(m).get_extra_state is not base]
        self.modes = [(m, m.training) for m in modules]
        self.latest = [(m, m._latest) for m in modules if "_latest" in vars(m)]
        self.grads = [(p, p.grad) for p in model.parameters()]
        self.data = [(p, p.data) for p in model.parameters()]

    def release(self) -> None:
        """Drop what was kept (a model's worth of tensors after a move): the first step has succeeded."""
        self.buffers, self.extra, self.modes, self.latest, self.grads, self.data = [], [], [], [], [], []

    @torch.no_grad()
    def restore(self) -> None:
        for p, data in self.data:  # moved (to fit's device or dtype): the tensors it had come back
            if (p.device, p.dtype) != (data.device, data.dtype):
                p.data = data
        for m, name, saved in self.buffers:
            now = m._buffers.get(name)
            same = saved is not None and now is not None and (now.shape, now.dtype, now.device) == (
                saved.shape, saved.dtype, saved.device)  # fmt: skip
            if same:
                now.copy_(saved)
            else:
                m._buffers[name] = saved
        for m, state in self.extra:
            m.set_extra_state(state)
        for m, mode in self.modes:
            m.training = mode
        for m, latest in self.latest:
            m._latest = latest
        for p, grad in self.grads:
            p.grad = grad


class StepUndo:
    """What one step's forward pass changes besides the parameters, kept before the step to be put back.

    Batch-norm statistics, an AugNet's measured effects and a conditioner's statistics are buffers that the
    forward pass updates before the loss is known; an AugNet's pass count and a per-instance layer's last
    policy change with them. A step whose loss is not finite (read at once on a CPU) stops before its update,
    and :meth:`restore` then puts these back too, so the model is the one the last finite step left. Costs
    one copy into kept tensors of every buffer per step (no allocation once the buffers keep their shapes).
    """

    def __init__(self, model: torch.nn.Module) -> None:
        modules = list(model.modules())
        self.slots = [(m, name) for m in modules for name in m._buffers]
        self.live: list[Tensor | None] = [None] * len(self.slots)
        self.kept: list[Tensor | None] = [None] * len(self.slots)
        self.counters = [m for m in modules if isinstance(getattr(m, "passes", None), int)]
        self.latest_of = [m for m in modules if "_latest" in vars(m)]

    @torch.no_grad()
    def keep(self) -> None:
        for i, (m, name) in enumerate(self.slots):
            b = self.live[i] = m._buffers.get(name)
            k = self.kept[i]
            if b is None:
                continue
            if k is not None and k.shape == b.shape and k.dtype == b.dtype and k.device == b.device:
                k.copy_(b)
            else:
                self.kept[i] = b.detach().clone()
        self.passes = [m.passes for m in self.counters]
        self.latest = [m._latest for m in self.latest_of]

    @torch.no_grad()
    def restore(self) -> None:
        for i, (m, name) in enumerate(self.slots):
            was, now = self.live[i], m._buffers.get(name)
            if was is not None and now is was:
                now.copy_(self.kept[i])
            else:  # replaced in the pass (or set where there was none): the kept tensor goes back itself
                m._buffers[name] = None if was is None else self.kept[i]
                self.kept[i] = None
        for m, passes in zip(self.counters, self.passes, strict=True):
            m.passes = passes
        for m, latest in zip(self.latest_of, self.latest, strict=True):
            m._latest = latest


@contextmanager
def undo_a_failed_start(model: torch.nn.Module, state, mismatch: str | None = None) -> Iterator[None]:
    """Put the model back as it was if training stops before its first step has succeeded.

    The first forward pass changes the model before the loss is known: an AugNet measures its effects and
    counts the pass, batch normalisation and a conditioner update their statistics; before it, ``fit`` moves
    the model to its device. A first step that then fails (labels the loss refuses, a loss that is not finite,
    an error in a callback) must leave the model as it was given, where it was given. Costs one copy of the
    model's buffers and keeps its parameters' tensors from before the move, until the first step has succeeded
    (``fit`` calls the yielded ``release`` then).

    ``mismatch`` (:func:`~augnet.training._step_checks.dtype_mismatch`): the first batch's inputs are of another
    dtype than the model's parameters; a RuntimeError of the first step (torch's "Input type (double) and bias type
    (float) should be the same"; for integer inputs, one about types) is then raised as a TypeError that says so
    and how to cast, from torch's error.
    """
    kept = _ModelState(model)
    try:
        yield kept.release
    except BaseException as error:
        if state.step == 0:
            kept.restore()
            failed = isinstance(error, RuntimeError) and not isinstance(error, torch.cuda.OutOfMemoryError)
            if mismatch is not None and failed and explains(mismatch, error):
                raise TypeError(f"fit: {mismatch}. The first step failed with: {error}") from error
        raise


def resume_point(path: Path, columns: list[str], epoch: int, steps_before: int) -> int:
    """Where the rows of the epochs before ``epoch`` of the log at ``path`` end (bytes), checked: its header is
    ``columns`` and those rows' steps are at most ``steps_before``; a ValueError naming the file otherwise."""
    lines = path.read_bytes().splitlines(keepends=True)
    try:
        header = next(csv.reader([lines[0].decode()])) if lines and lines[0].endswith(b"\n") else None
    except (UnicodeDecodeError, csv.Error):
        header = None
    if header != columns:
        # None: no whole first line of UTF-8 text to read columns from (an empty file, a binary one, a line cut short)
        why = " (no header line: the file is empty, not text, or its first line is cut short)" if header is None else ""
        raise ValueError(
            f"PolicyLogger(resume=True): {path} has the columns {header}{why} and this run {columns} (another model, "
            "or not a policy log): use another log_dir, or overwrite=True to replace it"
        )
    at, where = len(lines[0]), (header.index("step"), header.index("epoch"))
    for i, line in enumerate(lines[1:], start=1):
        if not line.endswith(b"\n"):  # cut short (the process stopped while writing it): dropped
            break
        try:
            row = next(csv.reader([line.decode()]))
            step, row_epoch = int(row[where[0]]), int(row[where[1]])
        except (UnicodeDecodeError, csv.Error, IndexError, ValueError):
            raise ValueError(f"PolicyLogger(resume=True): line {i + 1} of {path} is not a row of a policy log: "
                             f"{line[:80]!r}") from None  # fmt: skip
        if row_epoch >= epoch:  # written after the checkpoint the run resumes from
            break
        if step > steps_before:
            raise ValueError(
                f"PolicyLogger(resume=True): {path} has a row of step {step} in epoch {row_epoch}, but the run "
                f"resumed at epoch {epoch} counts {steps_before} steps before it (another batch size, accumulate "
                "or data?): use another log_dir, or overwrite=True to replace it"
            )
        at += len(line)
    return at
