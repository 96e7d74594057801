"""Registry of the experiments behind ``augnet reproduce NAME``."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Report", "names", "register", "reproduce"]


@dataclass
class Report:
    """What ``augnet reproduce NAME`` produced.

    Attributes:
        name: the experiment.
        verdict: a few lines saying what happened, with the key numbers.
        numbers: JSON-serialisable results (also written to ``out/NAME/NAME.json``).
        figures: the PNG files written.
        seconds: wall time.
    """

    name: str
    verdict: str
    numbers: dict
    figures: list[Path] = field(default_factory=list)
    seconds: float = 0.0


_REGISTRY: dict[str, Callable[..., Report]] = {}


def register(name: str):
    """Register ``fn(out_dir: Path, quick: bool, seed: int, progress: bool, device: str) -> Report`` as ``name``."""

    def wrap(fn):
        _REGISTRY[name] = fn
        return fn

    return wrap


def names() -> list[str]:
    """The registered experiments."""
    return sorted(_REGISTRY)


def reproduce(
    name: str,
    quick: bool = False,
    out: str | Path = "results",
    seed: int = 0,
    progress: bool = True,
    device: str = "cpu",
) -> Report:
    """Run experiment ``name`` on ``device``; write its figures and numbers under ``out/name/``."""
    if name not in _REGISTRY:
        raise ValueError(f"unknown experiment {name!r}; choose from {names()}")
    out_dir = Path(out) / name
    out_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    report = _REGISTRY[name](out_dir=out_dir, quick=quick, seed=seed, progress=progress, device=device)
    report.seconds = time.perf_counter() - start
    payload = {"name": name, "quick": quick, "seed": seed, "device": device, "seconds": report.seconds}
    payload["verdict"] = report.verdict
    payload["numbers"] = report.numbers
    (out_dir / f"{name}.json").write_text(json.dumps(payload, indent=1, default=_jsonable))
    return report


def _jsonable(value):
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
