import importlib.metadata
import os
import sys

import pytest
import torch


def pytest_report_header(config):
    """The versions that decide what runs: printed at the top of every test session."""
    found = []
    for name in ("torch", "torchaudio", "triton", "kornia", "einops", "numpy", "scipy"):
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{name} not installed")
    return "augnet test environment: " + ", ".join(found)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    """Every test compiles afresh: dynamo's caches (and its recompile limit per code object, such as AugNet.forward's)
    are per process, so without a reset a test's compile would depend on which tests ran before it in its worker."""
    if "torch._dynamo" in sys.modules:
        torch._dynamo.reset()


def pytest_xdist_auto_num_workers(config):
    """The slow set (``-m slow``) runs in this process, the rest in one worker per core (``-n auto`` in pyproject).

    The slow set's trainings use both cores themselves (two threads, or two worker processes each): two pytest workers
    beside them left their OpenMP threads competing, and the set ran many times slower than in one process. Two
    workers at one thread each did not help either: 1,041 s against 943 s in one process (one session), since these
    trainings' second thread nearly halves their time.
    """
    if config.option.markexpr.strip() == "slow":
        return 0
    return None  # pytest-xdist's own count


def pytest_configure(config):
    """In a pytest-xdist worker of the fast suite (one per core), torch computes on one thread, as do the processes
    the tests start (``OMP_NUM_THREADS``).

    Two workers at two OpenMP threads each put four threads on two cores, whose waits on each other cost more than
    the second thread buys on these small tensors: the suite took 529 s so and 386 s with one thread per worker (one
    session, 2 cores). Tests of the C++ kernel's threading set their own thread counts. The slow set runs in one
    process (:func:`pytest_xdist_auto_num_workers`) and keeps torch's own count.
    """
    if os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ["OMP_NUM_THREADS"] = "1"
        torch.set_num_threads(1)


@pytest.fixture
def figures(monkeypatch):
    """The figures augnet.viz saves (``save_figure`` patched), kept open for the test to read, closed afterwards."""
    import matplotlib.pyplot as plt

    import augnet.viz

    saved = []

    def keep(fig, path):
        saved.append(fig)
        return augnet.viz.figure_path(path)

    monkeypatch.setattr(augnet.viz, "save_figure", keep)
    yield saved
    for fig in saved:
        plt.close(fig)


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A home folder (``HOME``) and a working folder (the current one) under ``tmp_path``: ``(home, work)``, for
    paths that start with ``~``."""
    home = tmp_path / "home"
    home.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    import os

    from torch.utils.cpp_extension import get_default_build_root

    # the tap_mix extension's build cache is under the home folder: keep the real one (not a rebuild, a minute)
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", os.environ.get("TORCH_EXTENSIONS_DIR") or get_default_build_root())
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    return home, work
