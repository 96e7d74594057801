"""The methods of ``augnet reproduce versus`` and one run of a method: train, test, probe, time.

Every method trains the task's trunk with Adam at the task's learning rate, batch size and epochs
(:mod:`augnet.experiments.versus_tasks`); they differ only in the augmentation:

- ``none``: no augmentation;
- ``crop``: a random crop of the image padded by 1/8 of its size (at least one pixel) on every side (the flip of
  "crop + flip" applies to none of the tasks: a flipped digit, sprite or glyph is another class);
- ``randaugment``, ``trivialaugment``, ``autoaugment`` (CIFAR-10 policy), ``augmix``: torchvision
  v2's policies at their defaults, applied per sample to uint8 images in the DataLoader;
- ``fixed``: the best fixed augmentation of augnet's transforms (the image candidates, or for
  signals the EEG set) at one magnitude, found by a grid search on the validation split;
- ``augerino``: :class:`augnet.Augerino` (its regulariser, lambda 0.05 and initial widths pi / 8, as
  ``augnet reproduce rotation``);
- ``augnet``: the README's first model: one :class:`augnet.AugmentationLayer` of the candidates at
  its constructor's defaults in :class:`augnet.AugNet` at its defaults, Adam over
  :func:`augnet.param_groups` (its defaults), lambda 0.5 with :func:`augnet.selective_regularizer`;
- ``instance``: the same with a :class:`augnet.ConditionedAugmentationLayer`.

A run records the test accuracy as each method predicts by default (AugNet and Augerino average
their evaluation copies, the others read one image), with 4 copies of test-time augmentation
(the hand-designed and fixed policies applied to 4 copies, log-probabilities averaged; AugNet's
default), with one copy (AugNet read once; the others as by default), on the shifted test set, the
invariance of the logits to the task's true transformation (:func:`augnet.probes.report`'s Inv_T,
``inv_augnet``; for signals :func:`augnet.probes.invariance_curve`, the same measure) and the
training's wall-clock and CPU seconds.
"""

from __future__ import annotations

import math
import time

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from augnet import probes
from augnet.augerino import Augerino
from augnet.experiments.versus_tasks import Split, Task, candidates, fixed_candidates, make_trunk, true_invariance
from augnet.instance import ConditionedAugmentationLayer
from augnet.layers import AugmentationLayer
from augnet.model import AugNet
from augnet.regularizers import param_groups
from augnet.training import fit

__all__ = ["HAND_DESIGNED", "LEARNED", "METHODS", "TTA_COPIES", "applies", "fixed_grid", "run_method"]

#: The epochs of a ``quick`` run (the check of the set-up).
QUICK_EPOCHS = 2

#: torchvision v2's hand-designed policies, by method name.
HAND_DESIGNED = ("randaugment", "trivialaugment", "autoaugment", "augmix")
#: The learned augmentations.
LEARNED = ("augerino", "augnet", "instance")
#: Every method, in the table's order.
METHODS = ("none", "crop", *HAND_DESIGNED, "fixed", *LEARNED)
#: Copies averaged by test-time augmentation (AugNet's default eval_copies).
TTA_COPIES = 4
#: The magnitudes of the fixed-augmentation grid.
FIXED_MAGNITUDES = (0.1, 0.25, 0.5)
#: AugNet's regularisation strength (the README's first model).
LAM = 0.5
#: Augerino's (``augnet reproduce rotation``'s setting).
AUGERINO_LAM = 0.05


def check_method(method) -> str:
    """``method``, or the ValueError naming it and the known methods (a KeyError deep in the run before)."""
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {METHODS}")
    return method


def applies(method: str, task: Task) -> bool:
    """Whether ``method`` runs on ``task`` (image policies and Augerino's affine warps need images)."""
    check_method(method)
    return task.kind == "image" or method in ("none", "fixed", "augnet", "instance")


def fixed_grid(task: Task, quick: bool = False) -> list[tuple[int, float]]:
    """``(transform index, magnitude)`` of every fixed augmentation the grid search tries."""
    names = range(len(fixed_candidates(task)))
    grid = [(q, m) for q in names for m in FIXED_MAGNITUDES]
    return grid[:: max(1, len(grid) // 3)][:3] if quick else grid


def _torchvision_policy(method: str, size: int):
    from torchvision.transforms import v2

    if method == "crop":  # size: a side, or (H, W)
        side = size if isinstance(size, int) else min(size)  # under 8 pixels, 1/8 is 0: no crop at all
        return v2.RandomCrop(size, padding=max(1, side // 8))
    return {
        "randaugment": v2.RandAugment,
        "trivialaugment": v2.TrivialAugmentWide,
        "autoaugment": lambda: v2.AutoAugment(v2.AutoAugmentPolicy.CIFAR10),
        "augmix": v2.AugMix,
    }[method]()


class _PolicyImages(torch.utils.data.Dataset):
    """Images in [0, 1] as uint8, each read through ``policy`` and back to [0, 1]."""

    def __init__(self, x: Tensor, y: Tensor, policy) -> None:
        self.x, self.y, self.policy = (x * 255).round().to(torch.uint8), y, policy

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i):
        return self.policy(self.x[i]).float() / 255, self.y[i]


def _apply_policy(policy, x: Tensor) -> Tensor:
    """``policy`` applied to each image of ``x`` (in [0, 1]) as uint8, back to [0, 1]."""
    u = (x * 255).round().to(torch.uint8)
    return torch.stack([policy(img) for img in u]).float() / 255


def _build(method: str, task: Task, fixed: tuple[int, float] | None):
    """``(model, optimiser, fit keyword arguments, augment(x, generator) for TTA or None)`` for a task."""
    trunk = make_trunk(task)  # first: the seeded initial weights are drawn before anything else
    transform = None if fixed is None else (fixed_candidates(task)[fixed[0]], fixed[1])
    channels = 3 if task.name == "sprites" else 1
    return build(method, trunk, lambda: candidates(task), task.lr, task.size, channels, transform)


def build(method: str, trunk: nn.Module, transforms, lr: float, size, channels: int, fixed=None):
    """``(model, optimiser, fit keyword arguments, augment(x, generator) for TTA or None)``.

    ``transforms()`` makes AugNet's candidates; ``size`` is the images' (H, W) or side (for ``crop``);
    ``fixed`` is the ``fixed`` method's ``(transform, magnitude)``.
    """
    check_method(method)
    if method in ("augnet", "instance"):
        if method == "augnet":
            layer = AugmentationLayer(transforms())
        else:
            layer = ConditionedAugmentationLayer(transforms(), channels=channels)
        model = AugNet(trunk, layer)
        opt = torch.optim.Adam(param_groups(model), lr=lr)
        return model, opt, {"lam": LAM}, None
    if method == "augerino":
        model = Augerino(trunk, init_width=math.pi / 8)
        opt = torch.optim.Adam(param_groups(model), lr=lr)
        return model, opt, {"lam": AUGERINO_LAM, "regularizer": "augerino"}, None
    opt = torch.optim.Adam(trunk.parameters(), lr=lr)
    kwargs = {"lam": 0.0, "regularizer": "none", "loss_fn": F.cross_entropy}  # a plain trunk returns logits
    if method == "fixed":
        transform, magnitude = fixed

        def augment(xb, generator=None):
            return transform(xb, magnitude, generator=generator)

        return trunk, opt, {**kwargs, "augment_batch": augment}, augment
    if method == "none":
        return trunk, opt, kwargs, None
    policy = _torchvision_policy(method, size)
    return trunk, opt, {**kwargs, "policy": policy}, (lambda xb, generator=None: _apply_policy(policy, xb))


def train(model, opt, kwargs: dict, x: Tensor, y: Tensor, epochs: int, batch_size: int, generator) -> tuple:
    """Train with ``fit`` (a hand-designed ``policy`` in ``kwargs`` goes into a DataLoader); wall and CPU seconds."""
    kwargs = dict(kwargs)
    policy = kwargs.pop("policy", None)
    wall, cpu = time.perf_counter(), time.process_time()
    if policy is not None:
        loader = torch.utils.data.DataLoader(
            _PolicyImages(x, y, policy), batch_size=batch_size, shuffle=True, generator=generator
        )
        fit(model, loader, optimizer=opt, epochs=epochs, generator=generator, **kwargs)
    else:
        fit(model, x, y, opt, epochs, batch_size, generator=generator, **kwargs)
    return time.perf_counter() - wall, time.process_time() - cpu


@torch.no_grad()
def _log_probs(model: nn.Module, x: Tensor, copies: int | None = None, generator=None, augment=None) -> Tensor:
    """(N, classes) mean log-probabilities over ``copies`` (AugNet's own, or ``augment``'s test-time copies)."""
    model.eval()
    out = []
    for xb in x.split(256):
        if isinstance(model, AugNet):
            out.append(model(xb, copies=copies, generator=generator))
        elif augment is None or not copies:
            out.append(model(xb).log_softmax(1))
        else:
            out.append(torch.stack([model(augment(xb, generator)).log_softmax(1) for _ in range(copies)]).mean(0))
    return torch.cat(out)


def _accuracy(logp: Tensor, y: Tensor) -> float:
    return float((logp.argmax(1) == y).float().mean())


def _invariance(model: nn.Module, task: Task, x: Tensor, seed: int) -> float:
    """Inv_T of the logits to the task's true transformation (1: invariant)."""
    transform, magnitude = true_invariance(task)
    return invariance_at_logits(model, x, transform, magnitude, seed)


def invariance_at_logits(model: nn.Module, x: Tensor, transform, magnitude: float, seed: int) -> float:
    """Inv_T (``inv_augnet``) of the logits to ``transform`` at ``magnitude``, on the first 256 inputs of ``x``."""
    x = x[:256]
    if x.dim() == 4:
        rep = probes.report(model, x, {"true": transform}, layers=["logits"], magnitudes=[magnitude], lie=False,
                            seed=seed)  # fmt: skip
        return float(rep.value("inv_augnet", "logits", "true", magnitude))
    curve = probes.invariance_curve(model, x, transform, [magnitude], seed=seed)
    return float(curve["summary"][0]["median"])


def accuracies_on(model: nn.Module, augment, x: Tensor, y: Tensor, seed: int) -> dict:
    """Accuracy as the method predicts by default, with 4 test-time copies, and with one copy (see the module)."""
    g = lambda k: torch.Generator().manual_seed(seed + k)  # noqa: E731
    default = _log_probs(model, x, generator=g(2))
    out = dict.fromkeys(("accuracy", "accuracy_tta", "accuracy_1"), _accuracy(default, y))
    if augment is not None or isinstance(model, AugNet):
        out["accuracy_tta"] = _accuracy(_log_probs(model, x, TTA_COPIES, g(3), augment), y)
    if isinstance(model, AugNet):
        out["accuracy_1"] = _accuracy(_log_probs(model, x, 1, g(4)), y)
    return out


def _policy(model: nn.Module) -> dict | None:
    """A global AugNet layer's policy (JSON); None for the other methods (a per-instance layer has no one policy)."""
    layers = list(model.augment.layers) if isinstance(model, AugNet) and not isinstance(model, Augerino) else []
    if not layers or any(isinstance(layer, ConditionedAugmentationLayer) for layer in layers):
        return None
    return model.policy().to_json()


def run_method(method: str, task: Task, regime: str, split: Split, seed: int, fixed=None, quick=False) -> dict:
    """Train ``method`` on ``split`` and measure it (see the module docstring); one record.

    Args:
        method, task, regime: what to run.
        split: the seed's data (:func:`~augnet.experiments.versus_tasks.load`).
        seed: seeds the initial weights, the batches and every draw.
        fixed: ``(transform index, magnitude)`` of the ``fixed`` method.
        quick: 2 epochs (the check of the set-up).

    The run seeds torch's global generator with ``seed``; the caller's global random state comes back after it
    (it was left seeded and advanced by the run).

    Raises:
        ValueError: a ``method`` not in :data:`METHODS`, before anything is built.
    """
    check_method(method)
    with torch.random.fork_rng(devices=[]):  # the runs are on the CPU, as run_versus's
        return _run_method(method, task, regime, split, seed, fixed, quick)


def _run_method(method: str, task: Task, regime: str, split: Split, seed: int, fixed, quick: bool) -> dict:
    torch.manual_seed(seed)
    model, opt, kwargs, augment = _build(method, task, fixed)
    epochs = QUICK_EPOCHS if quick else task.epochs_of(regime)
    generator = torch.Generator().manual_seed(seed + 1)
    wall, cpu = train(model, opt, kwargs, split.x_train, split.y_train, epochs, task.batch_size, generator)
    g = lambda k: torch.Generator().manual_seed(seed + k)  # noqa: E731
    record = {
        **accuracies_on(model, augment, split.x_test, split.y_test, seed),
        "val_accuracy": _accuracy(_log_probs(model, split.x_val, generator=g(5)), split.y_val),
        "invariance": _invariance(model, task, split.x_test, seed),
        "train_seconds": wall,
        "train_cpu_seconds": cpu,
        "epochs": epochs,
        "policy": _policy(model),
    }
    if split.x_shift is not None:
        record["accuracy_shift"] = _accuracy(_log_probs(model, split.x_shift, generator=g(6)), split.y_test)
    if isinstance(model, Augerino):
        record["widths"] = model.augment.magnitudes.detach().tolist()
    return record
