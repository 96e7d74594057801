"""What :func:`augnet.training.fit` checks of arguments that only some call forms use: ``shuffle`` (tensors only)
and a ``OneCycleLR`` sized for one step per batch but stepped per epoch.

Nothing here moves, trains or writes anything; a refusal is a ValueError naming the argument and its value.
"""

from __future__ import annotations

import warnings

import torch

from augnet._checks import is_int
from augnet._stack import caller_stacklevel


def check_loader_shuffle(x, shuffle: bool) -> None:
    """A ValueError for ``shuffle=False`` with a data loader that shuffles (a ``RandomSampler``): ``shuffle`` orders
    tensors only, a loader orders its own batches, so the argument was ignored and the loader went on shuffling.
    With a loader in order, a list of batches or any other iterable (whose order fit cannot tell), ``False`` says
    what happens and is taken; ``True``, the default, says nothing either way and is taken."""
    if shuffle is False and isinstance(getattr(x, "sampler", None), torch.utils.data.RandomSampler):
        raise ValueError(
            "shuffle=False applies to tensor inputs only: this data loader shuffles its own batches (a "
            "RandomSampler), and fit would ignore it; make the loader with DataLoader(..., shuffle=False)"
        )


def warn_one_cycle_per_epoch(scheduler, interval: str, steps_per_epoch: int | None, epochs: int) -> None:
    """Warn of a :class:`~torch.optim.lr_scheduler.OneCycleLR` (alone or in a ``ChainedScheduler``) stepped per
    epoch (``scheduler_interval="epoch"``) whose ``total_steps`` left are exactly the run's optimiser steps (more
    than one per epoch): it was sized for ``scheduler_interval="step"``, and stepped per epoch it would cover only
    ``epochs`` of them (the learning rate would stay near its warm-up start)."""
    if scheduler is None or interval != "epoch" or not epochs or steps_per_epoch is None or steps_per_epoch < 2:
        return
    for s in [scheduler, *getattr(scheduler, "_schedulers", [])]:
        total = getattr(s, "total_steps", None)
        if not isinstance(s, torch.optim.lr_scheduler.OneCycleLR) or not is_int(total):
            continue
        left = int(total) - int(s.last_epoch)
        if left == epochs * steps_per_epoch:
            warnings.warn(
                f"scheduler: OneCycleLR has total_steps={int(total)} ({left} left: {epochs} epochs x "
                f"{steps_per_epoch} optimizer steps), but scheduler_interval='epoch' steps it {epochs} times, "
                "once per epoch, so its schedule would not get past the start; pass scheduler_interval='step'",
                UserWarning,
                stacklevel=caller_stacklevel(("augnet.",)),
            )
            return


def dataset_hint(x) -> str:
    """What to add to the TypeError of ``x`` that is no data loader: for a map-style data set (single samples,
    no ``__iter__``), how to batch it."""
    if isinstance(x, torch.utils.data.Dataset):
        name = type(x).__name__
        return f"; a {name} gives single samples: wrap it in torch.utils.data.DataLoader(dataset, batch_size=...)"
    return ""
