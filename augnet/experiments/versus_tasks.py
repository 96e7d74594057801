"""The tasks of ``augnet reproduce versus``: data, splits, trunks, budgets and each task's true invariance.

Four tasks, each at two data regimes (``"small"``: 10 % of the training set, trained for ten times
the epochs, so both regimes take the same number of steps; ``"full"``):

========== ======================================= ========= ====== ================= ==================
task       data                                    trunk     lr     invariance         shifted test
========== ======================================= ========= ====== ================= ==================
digits     scikit-learn's handwritten digits,      SmallCNN  1e-3   Rotate ±30°        rotated ±30°
           16 x 16 (real data, 1,797 images)
sprites    the rotated sprites, 32 x 32 RGB        PaperCNN  5e-4   Rotate ±45°        rotated ±30°
glyphs     the rotated glyphs, 28 x 28 grey        PaperCNN  5e-4   Rotate ±45°        rotated ±30°
sinusoids  the noisy sinusoids, 1,000 samples      Conv1dNet 1e-2   FrequencyShift     (none)
                                                                    ±0.5 Hz
========== ======================================= ========= ====== ================= ==================

The digits are split per seed (a permutation seeded by the seed): 500 test, 200 validation, the rest
(1,097) for training. The generated tasks draw their training, validation and test sets from the
seed, the seed + 20,000 and the seed + 10,000. The shifted test set is the test set rotated by a
uniform angle within ±30°, which the labels survive (a digit rotated by 30° is still read as itself;
a sprite "up" at 45° + 30° is still nearer up than down).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from augnet import data as D
from augnet._checks import check_bool, is_int
from augnet.experiments.trunks import Conv1dNet, PaperCNN, SmallCNN
from augnet.transforms import image as T
from augnet.transforms import signal as S

__all__ = ["REGIMES", "TASKS", "Split", "Task", "candidates", "load", "make_trunk", "true_invariance"]

#: The data regimes: 10 % of the training set (trained for 10 times the epochs), or all of it.
REGIMES = ("small", "full")
#: The sinusoids' sampling rate (Hz).
SFREQ = 100.0


@dataclass(frozen=True)
class Task:
    """One task of the comparison (see the module docstring)."""

    name: str
    kind: str  # "image" or "signal"
    n_train: int  # training examples of the full regime
    n_val: int
    n_test: int
    batch_size: int
    epochs: int  # at the full regime; the small regime trains SMALL_EPOCHS_FACTOR times as many
    lr: float
    classes: int
    invariance: tuple[str, float]  # the true invariance: a transform's name and its magnitude (probe)
    shift: float | None  # the shifted test set's rotation magnitude (Rotate's 1 = 180 degrees); None: none
    size: int = 0  # image height and width (0 for signals)

    def epochs_of(self, regime: str) -> int:
        """The epochs of ``regime``: the same number of steps in both regimes."""
        return self.epochs * (SMALL_EPOCHS_FACTOR if regime == "small" else 1)

    def n_train_of(self, regime: str) -> int:
        return max(self.classes, round(self.n_train * SMALL_FRACTION)) if regime == "small" else self.n_train


SMALL_FRACTION = 0.1
SMALL_EPOCHS_FACTOR = 10
_SHIFT = 30 / 180  # Rotate's magnitude for ±30 degrees

TASKS: dict[str, Task] = {
    "digits": Task("digits", "image", 1097, 200, 500, 32, 10, 1e-3, 10, ("Rotate", 30 / 180), _SHIFT, 16),
    "sprites": Task("sprites", "image", 2000, 500, 1000, 64, 10, 5e-4, 4, ("Rotate", 0.25), _SHIFT, 32),
    "glyphs": Task("glyphs", "image", 2000, 500, 1000, 64, 10, 5e-4, 4, ("Rotate", 0.25), _SHIFT, 28),
    "sinusoids": Task("sinusoids", "signal", 2000, 500, 1000, 32, 10, 1e-2, 4, ("FrequencyShift", 0.25), None),
}


@dataclass
class Split:
    """One seed's data of a task and regime: training, validation and test sets, and the shifted test inputs."""

    x_train: Tensor
    y_train: Tensor
    x_val: Tensor
    y_val: Tensor
    x_test: Tensor
    y_test: Tensor
    x_shift: Tensor | None


def _check_task(task) -> None:
    """Refuse (TypeError) what is not a :class:`Task`, e.g. a task's name, saying how to get its Task."""
    if not isinstance(task, Task):
        raise TypeError(f"task must be a Task (one of TASKS, e.g. TASKS['digits']), got {type(task).__name__}: "
                        f"{task!r}")  # fmt: skip


def _generated(task: Task, n: int, seed: int) -> tuple[Tensor, Tensor]:
    if task.name == "sprites":
        return D.rotated_sprites(n, task.size, seed=seed)
    if task.name == "glyphs":
        return D.rotated_glyphs(n, task.size, seed=seed)
    return D.sinusoids(n, seed=seed, sfreq=SFREQ)


def load(task: Task, regime: str, seed: int, quick: bool = False) -> Split:
    """The data of ``task`` at ``regime`` for ``seed`` (see the module docstring); ``quick`` shrinks the sets.

    Raises:
        TypeError: ``task`` that is not a :class:`Task`, ``seed`` that is not an int (a NumPy integer is one),
            ``quick`` that is not a bool.
        ValueError: a task that is not one of :data:`TASKS` by name (there are no data for it), an unknown
            ``regime``, a ``seed`` outside ``[-2**62, 2**62]`` (the generators are seeded with it plus offsets).
    """
    _check_task(task)
    if task.name not in TASKS:  # a Task of one's own: its data were those of another task (the sinusoids)
        raise ValueError(f"load makes the data of the tasks in TASKS only {tuple(TASKS)}, got task {task.name!r}")
    if regime not in REGIMES:
        raise ValueError(f"regime must be one of {REGIMES}, got {regime!r}")
    if not is_int(seed):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}: {seed!r}")
    if not -(2**62) <= seed <= 2**62:
        raise ValueError(f"seed must be an int in [-2**62, 2**62], got {seed!r}")
    check_bool("quick", quick)
    seed = int(seed)  # a NumPy integer too: torch.Generator().manual_seed refuses one
    n_train, n_val, n_test = task.n_train_of(regime), task.n_val, task.n_test
    if quick:
        n_val, n_test = min(n_val, 100), min(n_test, 200)
    if task.name == "digits":
        x, y = D.digits(task.size)
        order = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed))
        test, val, train = order[:500][:n_test], order[500:700][:n_val], order[700:][:n_train]
        parts = [(x[i], y[i]) for i in (train, val, test)]
    else:
        parts = [_generated(task, n, s) for n, s in ((n_train, seed), (n_val, seed + 20_000), (n_test, seed + 10_000))]
    (x_train, y_train), (x_val, y_val), (x_test, y_test) = parts
    x_shift = None
    if task.shift is not None:
        x_shift = T.Rotate()(x_test, task.shift, generator=torch.Generator().manual_seed(seed + 30_000))
    return Split(x_train, y_train, x_val, y_val, x_test, y_test, x_shift)


def make_trunk(task: Task) -> nn.Module:
    """The task's trunk, the same for every method."""
    _check_task(task)
    if task.name == "digits":
        return SmallCNN(1, task.classes, 16)
    if task.kind == "signal":
        return Conv1dNet(1, task.classes, 16)
    return PaperCNN(3 if task.name == "sprites" else 1, task.classes, 8)


def candidates(task: Task) -> list:
    """AugNet's candidate transforms for ``task``: the five geometric ones, or the sinusoids' three."""
    _check_task(task)
    if task.kind == "image":
        return [cls() for cls in T.GEOMETRIC]
    return [S.FrequencyShift(SFREQ, max_shift=2.0), S.FTSurrogate(max_phase=0.2 * math.pi), S.GaussianNoise(0.1)]


def fixed_candidates(task: Task) -> list:
    """The transforms the best fixed augmentation is searched over: the image candidates, or the EEG set.

    The image shifts reach half the size (``max_shift=0.5``, TranslateX's default when the grid was run; at
    the grid's magnitudes 0.1-0.5 they cover the shifts of up to a quarter that AugNet's candidates have).
    """
    if task.kind == "image":
        from augnet.experiments.demo import image_transform

        return [image_transform(cls.__name__, 0.5) for cls in T.GEOMETRIC]
    return [
        S.FrequencyShift(SFREQ, max_shift=2.0), S.FTSurrogate(max_phase=0.2 * math.pi), S.GaussianNoise(0.1),
        S.TimeReverse(), S.SignFlip(), S.TimeMask(), S.BandStop(SFREQ),
    ]  # fmt: skip


def true_invariance(task: Task):
    """``(transform, magnitude)``: the invariance the task's labels have, for the probe at the logits.

    Raises:
        TypeError: ``task`` that is not a :class:`Task`.
        ValueError: an invariance other than ``"Rotate"`` or ``"FrequencyShift"`` (a Task of one's own).
    """
    _check_task(task)
    name, magnitude = task.invariance
    if name == "Rotate":
        return T.Rotate(), magnitude
    if name == "FrequencyShift":
        return S.FrequencyShift(SFREQ, max_shift=2.0), magnitude
    # any other name was probed as the sinusoids' frequency shift, whatever it said
    raise ValueError(f"task.invariance must name 'Rotate' or 'FrequencyShift', got {name!r}")
