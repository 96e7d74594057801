"""Shared test helpers (imported by the test modules)."""

import torch

# Per-dtype tolerances for comparisons of two computations of the same value.
TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float64: dict(rtol=1e-10, atol=1e-10)}


def gen(seed: int = 0, device: str = "cpu") -> torch.Generator:
    """A seeded generator."""
    return torch.Generator(device=device).manual_seed(seed)
