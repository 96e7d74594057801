"""``augnet bench``: the augmentation layer, each ``tap_mix`` backend against the eager path; AugNet's inference cost.

- :mod:`augnet.bench.harness`: what is measured and how (timing, peak memory), :func:`run_benchmark`;
- :mod:`augnet.bench.eager`: the eager baseline, with kornia;
- :mod:`augnet.bench.machine`: the machine and its load;
- :mod:`augnet.bench.inference`: AugNet's forward time with C copies against C times its trunk's;
- :mod:`augnet.bench.report`: the table, the plot, the saved files and the command (:func:`run_from_args`);
- :mod:`augnet.bench.gpu_compile`: the GPU kernels compiled for sm_80 / sm_90 without a GPU (registers, spills);
- :mod:`augnet.bench.gpu_model`: the layer's GPU cost on paper (:func:`on_paper`), a model, not a measurement.

:func:`on_paper` and :func:`format_on_paper` are read from :mod:`augnet.bench.gpu_model` on first use: imported
here with the rest, ``python -m augnet.bench.gpu_model`` would find its module loaded before it runs (runpy's
RuntimeWarning on every run).
"""

from augnet.bench.eager import EAGER, eager_augment, kornia_warp
from augnet.bench.harness import (
    MODES,
    BenchConfig,
    benchmark_classes,
    cpu_peak_bytes,
    default_providers,
    geometric_layer,
    run_benchmark,
)
from augnet.bench.inference import format_inference, inference_cost
from augnet.bench.machine import machine_info
from augnet.bench.report import format_table, plot_results, run_from_args, save_results

__all__ = [
    "EAGER",
    "MODES",
    "BenchConfig",
    "benchmark_classes",
    "cpu_peak_bytes",
    "default_providers",
    "eager_augment",
    "format_inference",
    "format_on_paper",
    "format_table",
    "geometric_layer",
    "inference_cost",
    "kornia_warp",
    "machine_info",
    "on_paper",
    "plot_results",
    "run_benchmark",
    "run_from_args",
    "save_results",
]


_LAZY = {"format_on_paper": "augnet.bench.gpu_model", "on_paper": "augnet.bench.gpu_model"}


def __getattr__(name: str):
    """:func:`on_paper` and :func:`format_on_paper`, imported on first use (see the module's docstring)."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value  # the next look-up finds it without this function
    return value


def __dir__() -> list[str]:
    """The module's names, those imported on first use among them."""
    return sorted(set(globals()) | set(__all__))
