"""The AugNet paper's controlled experiments, at CPU scale: ``augnet reproduce NAME``.

Each experiment is a function registered under a name; it trains what it
needs, writes its figures (PNG) and numbers (JSON) under ``out/NAME/``, and
returns a :class:`Report` with a short verdict. ``quick=True`` runs a reduced
version (the slow tests use it).

Experiments: ``rotation``, ``sinusoids``, ``capacity``, ``copies`` (see
:func:`names`), and the building blocks :func:`run_sinusoids` /
:class:`SinusoidsConfig`.
"""

from augnet.experiments import capacity, copies, rotation, sinusoids  # noqa: F401  (register the experiments)
from augnet.experiments._registry import Report, names, register, reproduce
from augnet.experiments.sinusoids import (
    Conv1dNet,
    ExperimentResult,
    SinusoidsConfig,
    run_sinusoids,
    sinusoid_layer,
)

__all__ = [
    "Conv1dNet",
    "ExperimentResult",
    "Report",
    "SinusoidsConfig",
    "names",
    "register",
    "reproduce",
    "run_sinusoids",
    "sinusoid_layer",
]
