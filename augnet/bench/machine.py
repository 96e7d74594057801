"""The machine a benchmark runs on: CPU model, cores, torch threads, versions, device name and load.

The JSON of a run keeps the machine (:func:`machine_info`) and the load average
before and after the run, since timings on a shared machine depend on it.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
from pathlib import Path

import torch

__all__ = ["cpu_capability", "machine_info"]


def _loadavg() -> list[float] | None:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:  # not available on this platform
        return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_capability() -> str | None:
    """The instruction set torch's CPU kernels dispatch to here (``"AVX512"``, ``"AVX2"``, ...), None if unknown.

    Two machines with the same torch but another capability compute in another order, and a training
    lands on slightly different weights.
    """
    try:
        return torch.backends.cpu.get_cpu_capability()
    except (AttributeError, RuntimeError):  # an older torch, or a build without the query
        return None


def machine_info(device: str | torch.device = "cpu") -> dict:
    """CPU model and capability, core counts, torch threads, versions and the device's name.

    Args:
        device: where the run ran, e.g. ``"cpu"``, ``"cuda"`` or ``"cuda:1"`` (a :class:`torch.device` too): a
            CUDA device's name is the GPU's (that one's, for an index), any other's the CPU model.

    Raises:
        ValueError: a ``device`` string torch cannot read (``"gpu"``); TypeError: one of another type (``None``).
    """
    try:
        kind = torch.device(device).type
    except (RuntimeError, TypeError) as err:  # e.g. "gpu" (a ValueError), or None (a TypeError)
        kind_of_error = TypeError if isinstance(err, TypeError) else ValueError
        first = str(err).strip().splitlines()[0]
        raise kind_of_error(f"device must be a device, e.g. 'cpu' or 'cuda:0', got {device!r} ({first})") from None
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        usable = os.cpu_count()
    info = {
        "cpu_model": _cpu_model(),
        "cpu_capability": cpu_capability(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": usable,
        "torch_threads": torch.get_num_threads(),
        "torch_version": torch.__version__,
        "numpy_version": _version("numpy"),
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if kind == "cuda" else _cpu_model(),
    }
    info["kornia_version"] = _version("kornia")  # optional (augnet[bench])
    return info


def _version(package: str) -> str | None:
    """An installed package's version, None when it is not installed."""
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None
