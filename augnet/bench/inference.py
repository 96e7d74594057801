"""The inference cost of AugNet: its forward time with C copies against C times its trunk's."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from augnet._checks import as_values, is_int, is_real, number
from augnet.bench.harness import _sync, benchmark_classes, geometric_layer
from augnet.bench.machine import _loadavg, machine_info
from augnet.experiments.trunks import resnet18
from augnet.model import AugNet, aggregate
from augnet.training.devices import resolve_device

__all__ = ["format_inference", "inference_cost"]


def inference_cost(
    copies: Sequence[int] = (1, 4, 10, 20),
    batch: int = 16,
    size: int = 32,
    width: int = 64,
    device: str = "cpu",
    min_run_time: float = 1.0,
    seed: int = 0,
    log: Callable[[str], None] | None = print,
) -> dict:
    """AugNet's forward time with C copies, divided by C times the trunk's own forward time.

    The trunk is a ResNet-18 (:func:`resnet18`) at ``size`` x ``size``; the
    AugNet puts an evaluation-mode layer of the five geometric transforms in
    front of it and aggregates the C predictions. A ratio of 1 means the
    augmentation and the aggregation cost nothing beyond the copies
    themselves. The trunk's time on ``B`` rows is measured again next to every
    C (CPU timings drift), and two further figures separate the parts:
    ``trunk_rows_ratio``, the trunk alone on the ``C * B`` rows divided by
    ``C`` times its time on ``B`` rows (how the trunk's own cost scales with
    the batch), and ``overhead``, the time of the augmentation module and the
    aggregation alone divided by ``C`` times the trunk's time (what augnet
    adds: ``1 + overhead`` is the ratio for a trunk that scales linearly).

    Args:
        copies: the copies C to time (default 1, 4, 10 and 20; a 1-D NumPy array or tensor of them too); one given
            twice is timed once.
        batch: the batch size B (default 16).
        size: the images' height and width (default 32).
        width: the ResNet-18's base width (default 64).
        device: where to time (default ``"cpu"``), a string or a :class:`torch.device`; the result names it
            as a string (``"cuda:0"``).
        min_run_time: seconds each timing runs at least (default 1.0).
        seed: seeds the models and the inputs (default 0).
        log: called with each progress line (default ``print``; ``None``: silent).

    The numbers may be NumPy scalars or 0-d tensors or arrays: the Python numbers they hold are run on and
    recorded.

    Returns:
        ``{"trunk_ms": ..., "records": [{"copies", "augnet_ms", "trunk_ms", "ratio", "trunk_rows_ms",
        "trunk_rows_ratio", "augment_ms", "overhead", "augnet_vs_trunk_rows"}], ...}``.

    Raises:
        TypeError, ValueError: a setting that cannot run (no copies, a count below 1, a non-positive or infinite
            ``min_run_time``, a device this machine lacks, a ``log`` that is not callable), before anything is
            built. The caller's random generator is left as it was (the models are made from ``seed`` in a forked
            one).
    """
    checked = _check_args(copies, batch, size, width, device, min_run_time, seed)
    copies, batch, size, width, device, min_run_time, seed = checked
    if log is not None and not callable(log):
        raise TypeError(f"log must be a callable or None, got {type(log).__name__}: {log!r}")
    # The models and the draws from ``seed``, in a forked generator: the caller's is left as it was.
    with torch.random.fork_rng(devices=[] if torch.device(device).type != "cuda" else None):
        torch.manual_seed(seed)
        return _measure(copies, batch, size, width, device, min_run_time, seed, log)


def _measure(copies, batch, size, width, device, min_run_time, seed, log) -> dict:
    trunk = resnet18(width=width).to(device).eval()
    model = AugNet(trunk, geometric_layer(0.5), eval_copies=1).to(device).eval()
    x = torch.rand(batch, 3, size, size, generator=torch.Generator().manual_seed(seed)).to(device)

    def timed(fn) -> float:
        with torch.inference_mode():
            fn()
            _sync(device)
            timer = benchmark_classes()[1](stmt="fn(); sync()", globals={"fn": fn, "sync": lambda: _sync(device)})
            return timer.blocked_autorange(min_run_time=min_run_time).median * 1e3

    def augment_and_aggregate(c: int, logits: Tensor) -> Tensor:
        model.augment(x, copies=c)
        return aggregate(logits, c, model.aggregation)

    records = []
    for c in copies:
        trunk_ms = timed(lambda: trunk(x))
        augnet_ms = timed(lambda c=c: model(x, copies=c))
        rows = x.repeat(c, 1, 1, 1)
        rows_ms = timed(lambda rows=rows: trunk(rows))
        with torch.inference_mode():
            logits = trunk(rows)
        augment_ms = timed(lambda c=c, logits=logits: augment_and_aggregate(c, logits))
        record = {
            "copies": c,
            "augnet_ms": augnet_ms,
            "trunk_ms": trunk_ms,
            "ratio": augnet_ms / (c * trunk_ms),
            "trunk_rows_ms": rows_ms,
            "trunk_rows_ratio": rows_ms / (c * trunk_ms),
            "augment_ms": augment_ms,
            "overhead": augment_ms / (c * trunk_ms),
            "augnet_vs_trunk_rows": augnet_ms / rows_ms,
        }
        records.append(record)
        if log is not None:
            log(
                f"  C={c:>2}: AugNet {augnet_ms:9.2f} ms = {record['ratio']:.3f} x C x trunk; "
                f"trunk on C*B rows {record['trunk_rows_ratio']:.3f} x C x trunk; "
                f"augmentation + aggregation {augment_ms:.2f} ms = {record['overhead']:.4f} x C x trunk"
            )
    return {
        "benchmark": "inference_cost",
        "trunk": f"ResNet-18 (width {width}), {size}x{size}, batch {batch}",
        "device": device,
        "trunk_ms": statistics.median(r["trunk_ms"] for r in records),
        "records": records,
        "machine": machine_info(device),
        "load_average": _loadavg(),
    }


def _check_args(
    copies, batch, size, width, device, min_run_time, seed
) -> tuple[list[int], int, int, int, str, float, int]:
    """Refuse settings that cannot run before anything is built or timed (``TypeError`` / ``ValueError``); returns
    ``(copies, batch, size, width, device, min_run_time, seed)`` as Python ints, the device as a string and
    ``min_run_time`` as a float (a NumPy integer seed is no seed to torch's generators, a ``torch.device`` no JSON).

    The numbers may be NumPy scalars or 0-d tensors or arrays, ``copies`` a 1-D NumPy array or tensor (or a
    sequence of 0-d ones): the Python numbers they hold are run on."""
    given = copies
    if hasattr(copies, "shape") and len(copies.shape) == 1:  # a 1-D NumPy array or tensor: its values (meta refused)
        copies = as_values(copies, "copies")
    if isinstance(copies, (str, bytes)) or not isinstance(copies, Sequence):
        raise TypeError(f"copies must be a sequence of ints, got {type(given).__name__}: {given!r}")
    copies = [number("copies", c) for c in copies]  # 0-d tensors or arrays among them: the ints they hold
    if not copies or not all(is_int(c) for c in copies) or min(copies) < 1:
        raise ValueError(f"copies must be a non-empty sequence of ints >= 1, got {list(copies)}")
    batch, size, width = number("batch", batch), number("size", size), number("width", width)
    seed, min_run_time = number("seed", seed), number("min_run_time", min_run_time)
    for name, value in (("batch", batch), ("size", size), ("width", width), ("seed", seed)):
        if not is_int(value):
            raise TypeError(f"{name} must be an int, got {type(value).__name__}: {value!r}")
        if value < (0 if name == "seed" else 1) or (name == "seed" and value >= 2**63):
            raise ValueError(f"{name} must be {'in [0, 2**63 - 1]' if name == 'seed' else '>= 1'}, got {value}")
    if not is_real(min_run_time):
        raise TypeError(f"min_run_time must be a number, got {type(min_run_time).__name__}: {min_run_time!r}")
    if not 0 < min_run_time < math.inf:
        raise ValueError(f"min_run_time must be positive and finite, got {min_run_time!r}")
    if not isinstance(device, (str, torch.device)):
        raise TypeError(f"device must be a string such as 'cpu' or 'cuda', got {type(device).__name__}: {device!r}")
    resolve_device(str(device))  # a ValueError for a device this machine lacks
    copies = list(dict.fromkeys(int(c) for c in copies))  # a C given twice: timed once
    return copies, int(batch), int(size), int(width), str(torch.device(device)), float(min_run_time), int(seed)


def format_inference(result: dict) -> str:
    """The table of an :func:`inference_cost` result: one line per C (times in ms, ratios to C x trunk).

    Its saved ``inference_<device>.json``, read back, gives the same table (an infinity saved as ``"inf"``,
    a NaN as ``null``).

    Raises:
        TypeError: ``result`` or a record of it is not a dict, or a cell holds no number.
        ValueError: a key the table shows is missing (the result of another function, or of another version).
    """
    fn, source = "format_inference", "the result of inference_cost (or its saved inference_<device>.json, read back)"
    _need(result, ("trunk", "trunk_ms", "records"), "result", fn, source)
    keys = ("copies", "augnet_ms", "ratio", "trunk_rows_ratio", "overhead")
    records = _rows(result["records"], keys, "result['records']", fn, source)
    trunk = _cell(result, "trunk", "", "result", fn, number=False)
    lines = [
        f"AugNet inference cost, {trunk} (trunk alone {_cell(result, 'trunk_ms', '.2f', 'result', fn)} ms)",
        f"{'C':>3} {'AugNet ms':>10} {'/ (C x trunk)':>14} {'trunk on C*B rows / (C x trunk)':>32}"
        f" {'augment + aggregate / (C x trunk)':>34}",
    ]
    for i, r in enumerate(records):
        where = f"result['records'][{i}]"
        cells = [_cell(r, key, spec, where, fn, number=key != "copies") for key, spec in
                 (("copies", ">3"), ("augnet_ms", ">10.2f"), ("ratio", ">14.3f"), ("trunk_rows_ratio", ">32.3f"),
                  ("overhead", ">34.4f"))]  # fmt: skip
        lines.append(" ".join(cells))
    return "\n".join(lines)


def _need(value, keys: tuple[str, ...], where: str, fn: str, source: str) -> dict:
    """``value``, a dict holding every one of ``keys``; else the TypeError or ValueError of ``fn`` naming ``where``,
    the key missing and what ``fn`` formats (``source``)."""
    if not isinstance(value, dict):
        raise TypeError(f"{fn}: {where} must be a dict ({source}), got {type(value).__name__}")
    missing = [k for k in keys if k not in value]
    if missing:
        raise ValueError(
            f"{fn}: {where} has no {', '.join(map(repr, missing))} key{'s' if len(missing) > 1 else ''}; "
            f"{fn} formats {source}"
        )
    return value


def _rows(rows, keys: tuple[str, ...], where: str, fn: str, source: str) -> list[dict]:
    """``rows``, a list (or tuple) of dicts each holding every one of ``keys`` (:func:`_need`)."""
    if not isinstance(rows, (list, tuple)):
        raise TypeError(f"{fn}: {where} must be a list of dicts ({source}), got {type(rows).__name__}")
    for i, row in enumerate(rows):
        _need(row, keys, f"{where}[{i}]", fn, source)
    return list(rows)


def _value(row: dict, key: str, where: str, fn: str):
    """``row[key]`` as a number: as given if it is one; a NaN for ``None`` and an infinity for ``"inf"`` /
    ``"-inf"`` (what :func:`augnet._json.strict` saves them as); else a TypeError of ``fn`` naming it."""
    value = row[key]
    if is_real(value):
        return value
    if value is None:
        return math.nan
    if isinstance(value, str) and value in ("inf", "-inf"):
        return float(value)
    try:
        if isinstance(value, (str, bytes)):
            raise TypeError
        return float(value)  # a 0-d tensor or NumPy array
    except (TypeError, ValueError):
        raise TypeError(f"{fn}: {where}[{key!r}] must be a number, got {type(value).__name__}: {value!r}") from None


def _cell(row: dict, key: str, spec: str, where: str, fn: str, number: bool = True) -> str:
    """``row[key]`` formatted with ``spec`` (a number first read by :func:`_value`), or a TypeError of ``fn``."""
    value = _value(row, key, where, fn) if number else row[key]
    try:
        return format(value, spec)
    except (TypeError, ValueError):
        raise TypeError(f"{fn}: {where}[{key!r}] cannot be shown as {spec!r}: {value!r}") from None
