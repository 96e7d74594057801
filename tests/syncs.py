"""Find the host-device synchronisations of a piece of code, without a GPU.

Code that runs on an accelerator stops the host, waiting for the device's queue
to drain, when it reads a value back (``.item()``, ``float(t)``, ``bool(t)``,
``.tolist()``, a copy to the CPU), when it copies host data to the device with
a blocking copy (``torch.tensor(data, device=...)``, ``.to(device)`` of a CPU
tensor), or when an op's output size depends on the values (``nonzero``,
boolean-mask indexing, ``unique``...). On the ``meta`` device none of these
can run, yet the code takes the same path as on a GPU (every ``device.type ==
"cpu"`` shortcut is skipped). :class:`SyncRecorder` runs code on meta tensors
under a ``TorchDispatchMode`` (aten ops) and a ``TorchFunctionMode``
(``torch.tensor`` / ``torch.as_tensor``, which build their data below the
dispatcher), records every such event with the ``augnet/`` file and line that
caused it, and answers in its place (a read gives 1, a copy to the CPU gives
ones, a data-dependent shape counts every element) so that the code runs on and
every event of one pass is found.

Used by ``tests/test_syncs.py``, and as a script to print the counts::

    PYTHONPATH=. python tests/syncs.py
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten

#: aten ops that read a value back to the host whatever their arguments.
_READS = {aten._local_scalar_dense.default: "read of a value (.item(), float(), int(), bool())"}
#: aten ops whose output size depends on the values: the host waits for the count.
_DATA_DEPENDENT = {
    aten.nonzero.default: "nonzero",
    aten.masked_select.default: "masked_select",
    aten.unique_consecutive.default: "unique_consecutive",
    aten._unique2.default: "unique",
    aten.unique_dim.default: "unique",
    aten.repeat_interleave.Tensor: "repeat_interleave with tensor repeats",
    aten.bincount.default: "bincount",
    aten.equal.default: "torch.equal",
    aten.is_nonzero.default: "bool() of a tensor",
}


#: aten ops whose GPU implementation reads a value back inside the op (invisible on ``meta``, where the op runs
#: its shape function only): each would stall every call on a GPU.
_SYNC_INSIDE = {aten.linalg_matrix_exp.default: "linalg.matrix_exp (ATen reads the norms back to pick a degree)"}


def _package() -> Path:
    """The folder of the imported augnet package: what is library code, wherever the checkout lies."""
    import augnet

    return Path(augnet.__file__).resolve().parent


_PACKAGE = _package()


def _in_package(path: str) -> bool:
    """Whether ``path`` (a code object's file name) is a file of the augnet package.

    Decided by the resolved path, not by a ``/augnet/`` in it: a checkout in a folder named augnet (what
    ``git clone`` makes) has ``/augnet/`` in the path of every file, its tests included.
    """
    if path.startswith("<"):  # <string>, <frozen ...>: not a file
        return False
    try:
        return Path(path).resolve().is_relative_to(_PACKAGE)
    except (OSError, ValueError):
        return False


@dataclass(frozen=True)
class Sync:
    """One synchronisation: what it was and where (``augnet/file.py:line``, the innermost augnet frame)."""

    kind: str
    op: str
    where: str

    def __str__(self) -> str:
        return f"{self.where}: {self.kind} ({self.op})"


def _where() -> str:
    frame = sys._getframe(2)
    fallback = None
    while frame is not None:
        path = frame.f_code.co_filename
        if _in_package(path):
            where = Path(path).resolve().relative_to(_PACKAGE.parent)  # augnet/file.py
            return f"{where}:{frame.f_lineno}"
        if fallback is None and "/torch/" not in path and __file__ not in path:
            fallback = f"{Path(path).name}:{frame.f_lineno}"
        frame = frame.f_back
    return fallback or "?"


def _off_host(t) -> bool:
    return isinstance(t, torch.Tensor) and t.device.type != "cpu"


def _on_host(t) -> bool:
    return isinstance(t, torch.Tensor) and t.device.type == "cpu"


def _is_mask(index) -> bool:
    return isinstance(index, torch.Tensor) and index.dtype == torch.bool


def _stand_in_read(t: torch.Tensor):
    if t.dtype == torch.bool:
        return True
    return 1 if not t.is_floating_point() and not t.is_complex() else 1.0


class _Dispatch(TorchDispatchMode):
    def __init__(self, record):
        super().__init__()
        self.record = record

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _READS and _off_host(args[0]):
            self.record(_READS[func], func)
            return _stand_in_read(args[0])
        if func in _SYNC_INSIDE and any(_off_host(a) for a in args):
            self.record("read back inside the op: " + _SYNC_INSIDE[func], func)  # recorded; the op still runs
        if func in _DATA_DEPENDENT and any(_off_host(a) for a in args):
            self.record("data-dependent output size: " + _DATA_DEPENDENT[func], func)
            return self._stand_in_shape(func, args, kwargs)
        indexing = func in (aten.index.Tensor, aten.index_put_.default, aten.index_put.default)
        if indexing and _off_host(args[0]) and any(_is_mask(i) for i in args[1]):
            self.record("boolean-mask indexing (a nonzero inside)", func)
            return self._stand_in_shape(func, args, kwargs)
        if func is aten._to_copy.default:
            src, dst = args[0].device, kwargs.get("device", args[0].device)
            if src.type != "cpu" and dst.type == "cpu":
                self.record("copy from the device to the host", func)
                return torch.ones(args[0].shape, dtype=kwargs.get("dtype") or args[0].dtype)
            if src.type == "cpu" and dst.type != "cpu" and not kwargs.get("non_blocking", False):
                self.record("blocking copy from the host to the device", func)
        if func is aten.copy_.default:
            dst, src = args[0], args[1]
            if _on_host(dst) and _off_host(src):
                self.record("copy from the device to the host", func)
                return dst.fill_(1)
            if _off_host(dst) and _on_host(src) and not (len(args) > 2 and args[2]):
                self.record("blocking copy from the host to the device", func)
        return func(*args, **kwargs)

    @staticmethod
    def _stand_in_shape(func, args, kwargs):
        x = args[0]
        if func is aten.nonzero.default:
            return torch.empty((x.numel(), x.dim()), dtype=torch.long, device=x.device)
        if func in (aten.index_put_.default, aten.index_put.default):
            return x if func is aten.index_put_.default else x.clone()
        if func is aten.index.Tensor:
            masked = sum(i.dim() if i is not None and i.dtype == torch.bool else 1 for i in args[1])
            count = max((i.numel() for i in args[1] if i is not None), default=0)
            return torch.empty((count, *x.shape[masked:]), dtype=x.dtype, device=x.device)
        if func is aten.is_nonzero.default:
            return True
        if func is aten.equal.default:
            return True
        if func is aten.masked_select.default:
            return torch.empty((x.numel(),), dtype=x.dtype, device=x.device)
        if func is aten.bincount.default:
            return torch.empty((1,), dtype=torch.long, device=x.device)
        return func(*args, **kwargs)


def _one_element_from_host(t: torch.Tensor, index, value) -> bool:
    """Whether ``t[index] = value`` sets one element (a 0-d view) from a Python number.

    torch's ``__setitem__`` on a CUDA tensor turns a number into a 0-d CPU tensor; a destination of the same
    size is then written by a blocking copy from the host, one of another size by ``fill_`` (no wait). On
    ``meta`` the number is made on ``meta``, so no copy shows below the dispatcher; a CPU tensor as the value
    does show there (``copy_`` from the host), and is recorded there.
    """
    parts = index if isinstance(index, tuple) else (index,)
    if not isinstance(value, (bool, int, float, complex)) or any(isinstance(i, torch.Tensor) for i in parts):
        return False  # tensor indices: index_put_, recorded below the dispatcher
    return t[index].dim() == 0


class _Function(TorchFunctionMode):
    def __init__(self, record):
        super().__init__()
        self.record = record

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in (torch.tensor, torch.as_tensor):
            device = kwargs.get("device")
            data = args[0] if args else kwargs.get("data")
            if device is not None and torch.device(device).type != "cpu" and not _off_host(data):
                self.record(f"blocking copy from the host to the device ({func.__name__} of host data)", func)
        if func is torch.Tensor.__setitem__ and _off_host(args[0]) and _one_element_from_host(*args[:3]):
            # CUDA makes the value a CPU tensor and copies it into the one element (a slice is filled instead);
            # on meta the value is made on meta, so the copy never shows below the dispatcher.
            self.record("blocking copy from the host to the device (a host value set into one element)", func)
        return func(*args, **kwargs)


class SyncRecorder:
    """Context manager: the synchronisations of the code run inside it, in :attr:`syncs`.

    Examples:
        >>> with SyncRecorder() as rec:
        ...     t = torch.ones(3, device="meta")
        ...     _ = float(t.sum())
        >>> [s.kind for s in rec.syncs]
        ['read of a value (.item(), float(), int(), bool())']
    """

    def __init__(self) -> None:
        self.syncs: list[Sync] = []

    def _record(self, kind: str, func) -> None:
        self.syncs.append(Sync(kind, getattr(func, "__name__", str(func)), _where()))

    def __enter__(self) -> SyncRecorder:
        self._modes = [_Function(self._record), _Dispatch(self._record)]
        for m in self._modes:
            m.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        for m in reversed(self._modes):
            m.__exit__(*exc)

    def summary(self) -> str:
        """One line per distinct place, with its count."""
        counts = Counter(str(s) for s in self.syncs)
        return "\n".join(f"{n} x {line}" for line, n in sorted(counts.items()))


class PretendCuda(TorchFunctionMode):
    """CPU tensors that say they are on ``cuda:0``: runs, on the CPU, the code path a CUDA tensor takes.

    ``t.device`` answers ``cuda:0`` and ``t.is_cuda`` ``True``, so every
    ``device.type == "cpu"`` shortcut is skipped as on a GPU; a ``device``
    argument naming CUDA (keyword or positional, e.g. ``torch.zeros(2,
    device=x.device)``, ``t.to(x.device)``) is turned back into the CPU, so the
    values are computed and can be compared with a plain CPU run. Use explicit
    ``backend="reference"`` for ``tap_mix`` (``auto`` would pick a GPU kernel).

    Examples:
        >>> with PretendCuda():
        ...     t = torch.zeros(2, device=torch.ones(1).device)
        ...     t.device, t.is_cuda, float(t.sum())
        (device(type='cuda', index=0), True, 0.0)
    """

    _CUDA = torch.device("cuda", 0)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        owner = getattr(func, "__self__", None)
        if owner is torch._C.TensorBase.device:
            return self._CUDA
        if owner is torch._C.TensorBase.is_cuda:
            return True
        if func is torch.device:  # naming a device is not using it
            return func(*args, **(kwargs or {}))
        kwargs = {k: self._host(v) if k == "device" else v for k, v in (kwargs or {}).items()}
        args = tuple(self._host(a) if isinstance(a, torch.device) or str(a).startswith("cuda") else a for a in args)
        return func(*args, **kwargs)

    @staticmethod
    def _host(device):
        if isinstance(device, (str, torch.device)) and torch.device(device).type == "cuda":
            return torch.device("cpu")
        return device


# ------------------------------------------------------------------ training steps of every layer kind


def _layer_kinds() -> dict[str, tuple[list, object]]:
    """Per layer kind: its transforms (built here) and an input maker ``make(b)``."""
    from transform_cases import POS, SFREQ, SR, images, signals, specs, waves

    from augnet.transforms import audio as A
    from augnet.transforms import image as T
    from augnet.transforms import signal as S

    def img(b):
        return images(b=b, h=8, w=8)

    return {
        "tap: geometric": ([T.TranslateX(), T.TranslateY(), T.Rotate(), T.ShearX(), T.ShearY(), T.Scale()], img),
        "tap: colour": (
            [T.Brightness(), T.Contrast(), T.Saturation(), T.Hue(), T.Invert(), T.Gray(), T.AutoContrast()],
            img,
        ),
        "tap: flips": ([T.HorizontalFlip(), T.VerticalFlip(padding="reflection")], img),
        "tap: pairing": ([T.SamplePairing(), T.Rotate(padding="border")], img),
        "generic: image": ([T.Sharpness(), T.Equalize(), T.Solarize(), T.Posterize(), T.Rotate()], img),
        "signal": (
            [
                S.TimeReverse(),
                S.SignFlip(),
                S.TimeMask(max_length=20),
                S.GaussianNoise(),
                S.FTSurrogate(),
                S.FrequencyShift(SFREQ),
                S.BandStop(SFREQ),
                S.ChannelsSymmetry([(0, 1)]),
                S.ChannelsDropout(),
                S.ChannelsShuffle(),
            ],
            lambda b: signals(b=b, ch=4, t=64),
        ),
        "signal: sensors": (
            [S.SensorsRotationX(POS), S.SensorsRotationY(POS), S.SensorsRotationZ(POS)],
            lambda b: signals(b=b, ch=24, t=16),
        ),
        "audio": (
            [A.AddNoise(), A.Gain(), A.LowPass(SR), A.HighPass(SR), A.BandReject(SR), A.SpeedChange()],
            lambda b: waves(b=b, t=128),
        ),
        "audio: spectrogram": ([A.TimeMaskSpec(), A.FrequencyMaskSpec()], lambda b: specs(b=b)),
    }


def _trunk(x: torch.Tensor, classes: int = 3) -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(x[0].numel(), classes))


def training_step(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, regularizer: str = "selective") -> None:
    """One training step, written as a user's loop would be (no fit())."""
    from augnet.regularizers import get_regularizer

    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    out = model(x)
    loss = torch.nn.functional.nll_loss(out, y) + 0.1 * get_regularizer(regularizer)(model)
    opt.zero_grad()
    loss.backward()
    opt.step()


def scenarios(device: str = "meta", zero: bool = True) -> dict[str, object]:
    """Per layer kind, ``prepare()`` that puts an AugNet (or an Augerino) and its batch on ``device`` and returns
    ``step()``, one training step of it.

    With ``zero``, every other magnitude starts at exactly 0 (the warps' kink).
    """
    import augnet

    def prepared(model, x, y, regularizer="selective"):
        def prepare():
            model.to(device).train()
            xd, yd = x.to(device), y.to(device)
            return lambda: training_step(model, xd, yd, regularizer)

        return prepare

    out = {}
    y = torch.tensor([0, 1, 2, 0])
    for name, (transforms, make) in _layer_kinds().items():
        x = make(4)
        init = [0.0 if zero and q % 2 == 0 else 0.4 for q in range(len(transforms))]
        layer = augnet.AugmentationLayer(transforms, init_magnitude=init)
        out[name] = prepared(augnet.AugNet(_trunk(x), layer, train_copies=2), x, y)
    x = _layer_kinds()["tap: geometric"][1](4)
    out["Augerino"] = prepared(augnet.Augerino(_trunk(x), init_width=0.1, train_copies=2), x, y, "augerino")
    return out


def evaluations(device: str = "meta") -> dict[str, object]:
    """Per layer kind, ``prepare()`` returning an evaluation forward of an AugNet (3 copies, one transform drawn
    per copy) on ``device``."""
    import augnet

    out = {}
    for name, (transforms, make) in _layer_kinds().items():
        for stratify in (False, True):  # independent copies, or stratified ones (AugNet(stratify=True))
            x = make(4)
            layer = augnet.AugmentationLayer(transforms, init_magnitude=0.3)
            model = augnet.AugNet(_trunk(x), layer, eval_copies=3, stratify=stratify)

            def prepare(model=model, x=x):
                model.to(device).eval()
                xd = x.to(device)
                return lambda: model(xd)

            out[name + (", stratified" if stratify else "")] = prepare
    return out


def count(device: str = "meta") -> dict[str, SyncRecorder]:
    """The synchronisations of one training step of each kind (the model and data moved before recording)."""
    results = {}
    for name, prepare in scenarios(device).items():
        step = prepare()
        with SyncRecorder() as rec:
            try:
                step()
            except Exception as err:  # a kind that cannot run on meta at all: report it
                rec.syncs.append(Sync(f"stopped: {type(err).__name__}: {err}", "-", "-"))
        results[name] = rec
    return results


def fit_syncs(steps: int, record_every: int, progress: bool, device: str = "meta") -> SyncRecorder:
    """The synchronisations of ``fit()`` over ``steps`` steps (one epoch) of an AugNet of two image layers."""
    import contextlib
    import io

    from transform_cases import images

    import augnet
    from augnet.training import fit
    from augnet.transforms import image as T

    x = images(b=4 * steps, h=8, w=8)
    y = torch.arange(4 * steps) % 3
    layers = [
        augnet.AugmentationLayer([T.Rotate(), T.TranslateX(), T.Brightness()], init_magnitude=[0.0, 0.3, 0.3]),
        augnet.AugmentationLayer([T.Sharpness(), T.Contrast()], init_magnitude=0.2),
    ]
    model = augnet.AugNet(_trunk(x), layers, train_copies=2).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    xd, yd = x.to(device), y.to(device)

    with SyncRecorder() as rec, contextlib.redirect_stderr(io.StringIO()):
        fit(model, xd, yd, opt, epochs=1, batch_size=4, record_every=record_every, progress=progress)
    return rec


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    for name, rec in count().items():
        print(f"== {name}: {len(rec.syncs)} synchronisations")
        if rec.syncs:
            print("   " + rec.summary().replace("\n", "\n   "))
    for name, prepare in evaluations().items():
        step = prepare()
        with torch.no_grad(), SyncRecorder() as rec:
            step()
        print(f"== evaluation, {name}: {len(rec.syncs)} synchronisations")
        if rec.syncs:
            print("   " + rec.summary().replace("\n", "\n   "))
    for steps, every, progress in ((1, 100, False), (4, 100, False), (4, 100, True), (4, 2, True)):
        rec = fit_syncs(steps, every, progress)
        print(f"== fit(): {steps} steps, record_every={every}, progress={progress}: {len(rec.syncs)} synchronisations")
        if rec.syncs:
            print("   " + rec.summary().replace("\n", "\n   "))
