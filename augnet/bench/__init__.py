"""``augnet bench``: the augmentation layer, each ``tap_mix`` backend against the eager path; AugNet's inference cost.

- :mod:`augnet.bench.harness`: what is measured and how (timing, peak memory), :func:`run_benchmark`;
- :mod:`augnet.bench.eager`: the eager baseline, with kornia;
- :mod:`augnet.bench.machine`: the machine and its load;
- :mod:`augnet.bench.inference`: AugNet's forward time with C copies against C times its trunk's;
- :mod:`augnet.bench.report`: the table, the plot, the saved files and the command (:func:`run_from_args`);
- :mod:`augnet.bench.gpu_compile`: the GPU kernels compiled for sm_80 / sm_90 without a GPU (registers, spills);
- :mod:`augnet.bench.gpu_model`: the layer's GPU cost on paper (:func:`on_paper`), a model, not a measurement.
"""

from augnet.bench.eager import EAGER, eager_augment, kornia_warp
from augnet.bench.gpu_model import format_on_paper, on_paper
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
