"""What :func:`augnet.training.fit` checks of its steps: the losses a step computes, the dtypes of its first batch,
the steps a scheduler has left, the optimiser's frozen parameters, and a batch of one sample that batch norm
refuses.

Each check reads shapes, dtypes and flags (no value, no synchronisation) and raises a ValueError or TypeError
naming the argument (``loss_fn``, ``regularizer``, ``scheduler``) and what it gave, or warns.
"""

from __future__ import annotations

import math
import numbers
import warnings

import torch
from torch import Tensor

from augnet._checks import is_int, number
from augnet._stack import caller_stacklevel

#: How :func:`dtype_mismatch`'s message of integer inputs begins: it explains only a first step's error about types.
INTEGER_INPUTS = "the inputs are integers"


def dtype_mismatch(model: torch.nn.Module, given: torch.dtype | None, autocast_dtype: torch.dtype | None) -> str | None:
    """Why a first step that fails may have failed: inputs (of dtype ``given``) of another dtype than the model's
    parameters, floating ones or integers (uint8 images).

    ``None`` when the dtypes agree, the inputs are bool or complex, or the model's floating parameters are not
    of one dtype (nothing to name). Under autocast (``autocast_dtype``), float32, float16 and bfloat16 inputs are
    cast as the model's weights are, but float64 inputs never are: then only float64 inputs into a model that is
    not float64 are named. Reads dtypes only (no value, no synchronisation). ``fit`` does not cast the batches
    itself: a model may cast its inputs (``x.to(self.weight.dtype)``), and it trains as before; so may one that
    takes integers (an embedding), and integer inputs are named only where the first step's error is about types
    (:func:`explains`).
    """
    dtypes = {p.dtype for p in model.parameters() if p.is_floating_point()}
    if given is None or given.is_complex or given == torch.bool or len(dtypes) != 1:
        return None
    (param,) = dtypes
    want = torch.float32 if autocast_dtype is not None else param
    if not given.is_floating_point:
        short, cast = str(given).removeprefix("torch."), "x.float()" if want == torch.float32 else f"x.to({want})"
        return (f"{INTEGER_INPUTS} ({short}) and the model's parameters {str(param).removeprefix('torch.')}: "
                f"convert them with {cast} (images of 0-255: {cast} / 255; in a loader, a transform such as "
                "torchvision's v2.ToDtype(torch.float32, scale=True)); fit does not cast the batches")  # fmt: skip
    if given == want or (autocast_dtype is not None and (given != torch.float64 or param == torch.float64)):
        return None
    name = {torch.float32: "float", torch.float64: "double", torch.float16: "half", torch.bfloat16: "bfloat16"}
    short = str(given).removeprefix("torch."), str(param).removeprefix("torch."), str(want).removeprefix("torch.")
    cast = f"x.{name[want]}()" if want in name else f"x.to({want})"
    said = f"the inputs are {short[0]} and the model's parameters {short[1]}"
    if autocast_dtype is not None:
        amp = str(autocast_dtype).removeprefix("torch.")
        return (
            f"{said}: autocast (amp) casts float32 inputs to {amp}, never float64 ones; cast the data to float32 "
            f"with {cast} (in a loader: TensorDataset({cast}, y); NumPy and MNE give float64); fit does not cast "
            "the batches"
        )
    model_cast = f"model.{name[given]}()" if given in name else f"model.to({given})"
    return (
        f"{said}: cast the data to the model's dtype with {cast} (in a loader: TensorDataset({cast}, y); NumPy "
        f"and MNE give float64), or the model to the data's with {model_cast}; fit does not cast the batches"
    )


def explains(mismatch: str, error: BaseException) -> bool:
    """Whether ``mismatch`` (from :func:`dtype_mismatch`) explains ``error``, a RuntimeError of the first step: floating
    inputs of another dtype always (as before); integer inputs where the error is about types ("Input type
    (unsigned char) and bias type (float)", "must have the same dtype")."""
    return not mismatch.startswith(INTEGER_INPUTS) or "type" in str(error).lower()


def _kind(value) -> str:
    if isinstance(value, Tensor):
        return f"a {str(value.dtype).removeprefix('torch.')} tensor of shape {tuple(value.shape)}"
    return f"a {type(value).__name__}: {value!r}"[:200]


def bad_task_loss(task) -> Exception | None:
    """The error of ``loss_fn``'s return if it is not a loss to backpropagate: a TypeError for one that is not a
    floating-point tensor (a float, a tuple, an integer count), a ValueError for one of more than one element
    (``reduction="none"``); ``None`` for a scalar floating tensor (a 1-element one too)."""
    if not isinstance(task, Tensor) or not task.is_floating_point():
        return TypeError(f"loss_fn must return the loss as a floating-point tensor of one element, got {_kind(task)} "
                         "(a loss of integers, a Python number or a tuple has no gradient to train by)")  # fmt: skip
    if task.numel() != 1:
        return ValueError(f"loss_fn must return the loss as a tensor of one element, got {_kind(task)}: reduce it "
                          "(reduction='mean', or .mean())")  # fmt: skip
    return None


def bad_regularizer_value(value) -> Exception | None:
    """The error of a callable ``regularizer``'s return that cannot be added to the loss: a TypeError for one that is
    not a tensor or a real number (``None``), a ValueError for a tensor of more than one element."""
    if isinstance(value, Tensor):
        if value.numel() != 1:
            return ValueError(f"regularizer must return a tensor of one element (a scalar), got {_kind(value)}")
        return None
    if isinstance(value, numbers.Real):
        return None
    return TypeError(f"regularizer must return a scalar tensor (or a number), got {_kind(value)}")


def no_gradient(step: int, epoch: int, task: Tensor, model: torch.nn.Module) -> ValueError:
    """The ValueError of a step whose loss has no gradient (``requires_grad=False``): backward would fail."""
    frozen = not any(p.requires_grad for p in model.parameters())
    why = ("every parameter of the model is frozen (requires_grad=False)" if frozen else
           "loss_fn's loss does not depend on the model's parameters (detached, or computed without gradient)"
           if not task.requires_grad else "the model's output does not depend on its trainable parameters")  # fmt: skip
    return ValueError(f"fit: the loss of step {step} (epoch {epoch}) has no gradient: {why}; nothing would train")


def warn_task_without_gradient(step: int) -> None:
    """Warn (once per ``fit``) that a step's task loss has no gradient while the regulariser's has."""
    warnings.warn(
        f"fit: loss_fn's loss of step {step} has no gradient (requires_grad=False: detached, or computed without "
        "gradient, from integers or argmax): that step trains by the regulariser alone (warned once per fit)",
        UserWarning,
        stacklevel=caller_stacklevel(("augnet.",)),
    )


def warn_frozen(model: torch.nn.Module, optimizer) -> None:
    """Warn when every parameter of the model that the optimiser holds is frozen (``requires_grad=False``): none
    gets a gradient, and the optimiser's steps move nothing (unless a callback unfreezes them)."""
    ours = {id(p) for p in model.parameters()}
    held = [p for group in optimizer.param_groups for p in group["params"] if id(p) in ours]
    if held and not any(p.requires_grad for p in held):
        warnings.warn(
            f"the optimizer's {len(held)} parameters of the model are all frozen (requires_grad=False): its steps "
            "will move nothing (unfreeze them, or pass the trainable ones: augnet.param_groups(model) or "
            "[p for p in model.parameters() if p.requires_grad])",
            UserWarning,
            stacklevel=caller_stacklevel(("augnet.",)),
        )


def check_scheduler_steps(scheduler, interval: str, steps_per_epoch: int | None, epochs: int) -> None:
    """A ValueError naming ``scheduler`` when it cannot be stepped as often as ``fit`` will step it: a
    :class:`~torch.optim.lr_scheduler.OneCycleLR` (alone or in a ``ChainedScheduler``) whose ``total_steps`` are
    fewer than the steps left (torch raises "Tried to step ... times" at the step past them, mid-run). Not
    checked for a loader without a length stepped per step (its steps are unknown)."""
    if scheduler is None or not epochs:
        return
    calls = epochs if interval == "epoch" else None if steps_per_epoch is None else epochs * steps_per_epoch
    if calls is None:
        return
    for s in [scheduler, *getattr(scheduler, "_schedulers", [])]:
        total = getattr(s, "total_steps", None)
        if not isinstance(s, torch.optim.lr_scheduler.OneCycleLR) or not is_int(total):
            continue
        done = int(s.last_epoch)  # the steps it has taken (0 when made; a resumed one's from its state)
        if done + calls > total:
            per = f"{epochs} epochs" if interval == "epoch" else f"{epochs} epochs x {steps_per_epoch} optimizer steps"
            raise ValueError(
                f"scheduler: OneCycleLR has total_steps={total} ({total - done} left) and fit would step it {calls} "
                f"times ({per}, scheduler_interval={interval!r}): torch refuses the step past them mid-run; make it "
                f"with total_steps={done + calls} (or epochs=..., steps_per_epoch=...)"
            )


def one_sample_error(error: BaseException, xb: Tensor | None, model: torch.nn.Module, where: str, x, batch_size):
    """The ValueError, naming the batch and what to do, of batch norm refusing a batch of one sample in training
    ("Expected more than 1 value per channel when training"); ``None`` for any other error."""
    if not isinstance(error, ValueError) or xb is None or len(xb) != 1 or "value per channel" not in str(error):
        return None
    if not any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in model.modules()):
        return None
    size = int(number("batch_size", batch_size)) if isinstance(x, Tensor) else None
    if size == 1:
        fix = "batch_size=1 makes every batch one sample: choose a batch_size of at least 2"
    elif size is not None:
        fix = (f"{len(x)} samples in batches of {size} leave one in the last batch: choose a batch_size that leaves "
               "at least two (or drop that sample)")  # fmt: skip
    else:
        fix = "drop it (DataLoader(..., drop_last=True)) or choose a batch size that leaves at least two samples"
    return ValueError(f"fit: {where} got a batch of one sample, on which the model's batch norm cannot train "
                      f"({error}); {fix}")  # fmt: skip


def warn_not_log_probabilities(out) -> None:
    """Warn when the outputs that the default ``loss_fn``, ``nll_loss``, is given cannot be log-probabilities: the
    exponentials of a row sum past 1 (logits: ``nll_loss`` of logits is minus the target's logit, unbounded). The
    outputs of log-softmax, and an AugNet's aggregates of them (means of log-probabilities sum to 1 at most), never
    do. Reads one batch's outputs (``fit`` calls it once, on a CPU)."""
    if not isinstance(out, Tensor) or out.dim() < 2 or not out.is_floating_point() or out.device.type != "cpu":
        return
    with torch.no_grad(), torch.autocast("cpu", enabled=False):  # read in float32, whatever autocast is on
        total = out.detach().float().logsumexp(1).max()
    if bool(torch.isfinite(total)) and float(total) > 1e-2:
        warnings.warn(
            f"fit: the model's outputs are not log-probabilities (the exponentials of a row sum to "
            f"{math.exp(min(float(total), 700.0)):.3g}, past 1), and the default loss_fn, nll_loss, expects them: "
            "for a model that outputs logits pass loss_fn=torch.nn.functional.cross_entropy (or end it with a "
            "LogSoftmax)",
            UserWarning,
            stacklevel=caller_stacklevel(("augnet.",)),
        )
