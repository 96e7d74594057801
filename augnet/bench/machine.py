"""The machine a benchmark runs on: CPU model, cores, torch threads, versions, device name and load.

The JSON of a run keeps the machine (:func:`machine_info`) and the load average
before and after the run, since timings on a shared machine depend on it.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

import torch

__all__ = ["machine_info"]


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


def machine_info(device: str = "cpu") -> dict:
    """CPU model, core counts, torch threads, versions and the device's name."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        usable = os.cpu_count()
    info = {
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": usable,
        "torch_threads": torch.get_num_threads(),
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "device": device,
        "device_name": torch.cuda.get_device_name() if device == "cuda" else _cpu_model(),
    }
    try:
        import kornia

        info["kornia_version"] = kornia.__version__
    except ImportError:  # kornia is optional (augnet[bench])
        info["kornia_version"] = None
    return info
