"""The AugNet paper's controlled experiments, at CPU scale: ``augnet reproduce NAME``.

Each experiment is a function registered under a name; it trains what it
needs, writes its figures (PNG) and numbers (JSON) under ``out/NAME/``, and
returns a :class:`Report` with a short verdict. ``quick=True`` runs a reduced
version (the slow tests use it). Called as a function, an experiment takes its
``out_dir`` as a str or a path (a leading ``~`` the home folder) and refuses
one it cannot write into before it trains. Their ``run_*`` functions check
their config before the first model trains and put back torch's thread count
and global random state after the run.

Experiments: ``rotation``, ``selection``, ``sinusoids``, ``capacity``, ``instance``,
``copies``, ``versus`` (see :func:`names`); :func:`compare`, the ``versus`` methods on your own data; and the
building blocks :func:`run_sinusoids` /
:class:`SinusoidsConfig`, :func:`~augnet.experiments.demo.run_demo` /
:class:`~augnet.experiments.demo.DemoConfig` (with its :data:`PRESETS`); the
trunks (:mod:`augnet.experiments.trunks`).
"""

from augnet.experiments import (  # noqa: F401  (register them)
    capacity,
    copies,
    instance,
    rotation,
    selection,
    sinusoids,
    versus,
)
from augnet.experiments._registry import Report, SetupError, check_settings, names, register, reproduce
from augnet.experiments.comparison import Comparison, compare
from augnet.experiments.demo import PRESETS, DemoConfig, run_demo
from augnet.experiments.runner import ExperimentResult, run_experiment
from augnet.experiments.sinusoids import (
    SinusoidsConfig,
    run_sinusoids,
    sinusoid_layer,
)
from augnet.experiments.trunks import MLP, Conv1dNet, PaperCNN, SmallCNN, resnet18

__all__ = [
    "MLP",
    "PRESETS",
    "Comparison",
    "Conv1dNet",
    "DemoConfig",
    "ExperimentResult",
    "PaperCNN",
    "Report",
    "SetupError",
    "SinusoidsConfig",
    "SmallCNN",
    "check_settings",
    "compare",
    "names",
    "register",
    "reproduce",
    "resnet18",
    "run_demo",
    "run_experiment",
    "run_sinusoids",
    "sinusoid_layer",
]
