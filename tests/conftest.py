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
