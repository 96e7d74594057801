import importlib.metadata

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
