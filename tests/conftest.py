import importlib.metadata
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
    beside them left their OpenMP threads competing, and the set ran many times slower than in one process.
    """
    if config.option.markexpr.strip() == "slow":
        return 0
    return None  # pytest-xdist's own count
