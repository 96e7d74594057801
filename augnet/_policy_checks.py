"""The field checks of a policy file, the naming of a policy's file in errors, and the writing of one (used by
:mod:`augnet.policy`).

Each check raises a ValueError or TypeError naming the layer, the entry and the field. Low level: it imports only
:mod:`augnet._checks`.
"""

from __future__ import annotations

import contextlib
import difflib
import itertools
import math
import os
import secrets
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from augnet._checks import is_real as _is_number

#: How closely an entry must agree with the value its layer's state gives.
RTOL, ATOL = 1e-5, 1e-6
_FLOAT32_MAX = 3.4028234663852886e38
#: The keys of an entry (``transform_magnitude``, ``args`` and ``range`` are optional in memory) and of a layer's
#: settings (a full policy file's layer: these and ``transforms``). Any other key is refused: a misspelt optional one
#: (``"train_mod"``, ``"conditoned"``, ``"transform_magnitde"``) was read as absent, its default taken silently.
ENTRY_KEYS = ("transform", "args", "weight", "magnitude", "transform_magnitude", "range")
SETTING_KEYS = ("temperature", "eval_mode", "train_mode", "backend", "weight_logits", "raw_magnitudes", "calibration",
                "effect", "last_size", "range_size", "conditioned", "dtype")  # fmt: skip
#: The ``dtype`` a layer's settings may name (its parameters' floating-point type; absent: float32).
DTYPES = ("float64", "float32", "float16", "bfloat16")


@contextlib.contextmanager
def naming_source(policy) -> Iterator[None]:
    """Start the message of a ValueError / TypeError raised inside with the file ``policy`` was read from.

    A policy read from a path (:func:`augnet.policy.read_policy`, :meth:`augnet.policy.Policy.load`) keeps it as
    ``policy.source``; errors raised later (rebuilding it, exporting it, writing it) then name that file, as the
    errors of reading it do (``"<path>: <message>"``). The exception keeps its type; a message that already starts
    with the path is left as it is, and a policy of no file (``source`` ``None``) changes nothing.
    """
    with naming_path(getattr(policy, "source", None)):
        yield


@contextlib.contextmanager
def naming_path(path) -> Iterator[None]:
    """Start the message of a ValueError / TypeError raised inside with ``path`` (``None``: change nothing)."""
    try:
        yield
    except (TypeError, ValueError) as err:
        if path is None or str(err).startswith(f"{path}: "):
            raise
        raise renamed(err, f"{path}: {err}") from None


def renamed(err: Exception, message: str) -> Exception:
    """``err``'s exception type with ``message`` (TypeError / ValueError where that type takes no message alone)."""
    try:
        out = type(err)(message)
    except Exception:  # a type whose constructor takes other arguments (UnicodeDecodeError...)
        out = None
    if not isinstance(out, type(err)) or str(out) != message:
        out = (TypeError if isinstance(err, TypeError) else ValueError)(message)
    return out


def check_keys(d: dict, known: tuple[str, ...], where: str) -> None:
    """The ValueError naming the first key of ``d`` that is not one of ``known`` (and the known key it is closest
    to: a misspelt optional key was read as absent)."""
    for key in d:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6) if isinstance(key, str) else []
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(f"{where}: unknown key {key!r}{hint}; the keys are {list(known)}")


def _check_entry(e, where: str, ranges: bool) -> None:
    if not isinstance(e, dict):
        raise ValueError(f"{where}: an entry must be a dict with 'transform', 'weight' and 'magnitude', got {e!r}")
    if not isinstance(e.get("transform"), str):
        raise ValueError(f"{where}: 'transform' must be a transform's name, got {e.get('transform')!r}")
    check_keys(e, ENTRY_KEYS, f"{where} ({e['transform']})")
    for key in ("weight", "magnitude", "transform_magnitude"):
        if key not in e:
            if key == "transform_magnitude":
                continue
            raise ValueError(f"{where}: the entry of {e['transform']} has no {key!r}")
        if not _is_number(e[key]):
            raise TypeError(f"{where}: {key} of {e['transform']} must be a number, got {e[key]!r}")
        if not math.isfinite(e[key]):
            raise ValueError(f"{where}: {key} of {e['transform']} is {e[key]!r}, not a finite number")
    if not ranges:
        return
    if "range" not in e:
        raise ValueError(f"{where}: the entry of {e['transform']} has no 'range'")
    r = e["range"]
    ok = isinstance(r, (list, tuple)) and len(r) == 3 and all(_is_end(v) for v in r[:2]) and isinstance(r[2], str)
    if not ok:
        raise ValueError(
            f"{where}: range of {e['transform']} must be [low, high, unit] (numbers, or \"inf\" / \"-inf\" for an "
            f"unbounded end; not NaN), got {r!r}"
        )


_ENDS = {"inf": math.inf, "-inf": -math.inf}


def _is_end(v) -> bool:
    """A range end: a number that is not NaN (an unbounded one is infinite), or its JSON form ``"inf"`` / ``"-inf"``."""
    return (_is_number(v) and not math.isnan(v)) or (isinstance(v, str) and v in _ENDS)


def _range_json(r) -> list:
    """``[low, high, unit]`` with infinite ends as ``"inf"`` / ``"-inf"`` (strict JSON)."""
    return [("inf" if v > 0 else "-inf") if _is_number(v) and math.isinf(v) else v for v in r[:2]] + [r[2]]


def _range_read(r) -> list:
    """A file's ``[low, high, unit]`` with ``"inf"`` / ``"-inf"`` ends as floats (checked before)."""
    return [_ENDS[v] if isinstance(v, str) else v for v in r[:2]] + [r[2]]


def _vector(value, name: str, q: int, where: str, low: float = -_FLOAT32_MAX) -> list[float]:
    what = f"{where}: {name} must be a list of {q} numbers (one per entry of 'transforms')"
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"{what}, got {value!r}")
    bad = [v for v in value if not _is_number(v)]
    if bad:
        raise TypeError(f"{what}, got {bad[0]!r} in {value!r}")
    if len(value) != q:
        raise ValueError(f"{what}, got {len(value)}: {value!r}")
    if not all(math.isfinite(v) for v in value):
        raise ValueError(f"{where}: {name} contains NaN or infinite values: {value!r}")
    if any(abs(v) > _FLOAT32_MAX for v in value):
        raise ValueError(f"{where}: {name} has values beyond float32's range (±3.4e38): {value!r}")
    if any(v < low for v in value):
        raise ValueError(f"{where}: {name} must be >= {low:g}, got {value!r}")
    return [float(v) for v in value]


def _check_settings(settings: dict, q: int, where: str) -> None:
    if not isinstance(settings, dict):
        raise TypeError(f"{where}: the settings must be a dict, got {settings!r}")
    check_keys(settings, SETTING_KEYS, where)
    for key in ("temperature", "eval_mode", "weight_logits", "raw_magnitudes"):
        if key not in settings:
            raise ValueError(f"{where} has no {key!r} (a full policy file keeps every layer's settings and state)")
    t = settings["temperature"]
    if not _is_number(t):
        raise TypeError(f"{where}: temperature must be a number, got {t!r}")
    if not math.isfinite(t) or t <= 0 or 1.0 / t > _FLOAT32_MAX:
        raise ValueError(f"{where}: temperature must be positive, finite and not so small that logits / it overflow, "
                         f"got {t!r}")  # fmt: skip
    for key in ("eval_mode", "train_mode", "backend"):
        if key in settings and not isinstance(settings[key], str):
            raise TypeError(f"{where}: {key} must be a string, got {settings[key]!r}")
    if "dtype" in settings and settings["dtype"] not in DTYPES:
        raise (ValueError if isinstance(settings["dtype"], str) else TypeError)(
            f"{where}: dtype must be one of {list(DTYPES)} (the layer's parameters' type), got {settings['dtype']!r}")
    if "conditioned" in settings and not isinstance(settings["conditioned"], bool):
        raise TypeError(f"{where}: conditioned must be true or false, got {settings['conditioned']!r}")
    logits = _vector(settings["weight_logits"], "weight_logits", q, where)
    if max(abs(v) for v in logits) / t > _FLOAT32_MAX:
        raise ValueError(f"{where}: weight_logits / temperature overflows float32 (temperature {t!r}, logits {logits})")
    _vector(settings["raw_magnitudes"], "raw_magnitudes", q, where)
    if settings.get("effect") is not None:
        _vector(settings["effect"], "effect", q, where, low=0.0)
    if settings.get("calibration") is not None:
        _check_calibration(settings["calibration"], q, where)
    for key in ("last_size", "range_size"):
        size = settings.get(key)
        if size is None:
            continue
        if not isinstance(size, (list, tuple)) or not size or not all(_is_number(s) and float(s).is_integer()
                                                                     for s in size):  # fmt: skip
            raise TypeError(f"{where}: {key} must be null or a list of whole numbers (an input size), got {size!r}")
        if min(size) < 1:
            raise ValueError(f"{where}: {key} must be positive, got {size!r}")


def _check_calibration(curves, q: int, where: str) -> None:
    what = f"{where}: calibration must be null or {q} curves (lists of numbers, one per transform)"
    if not isinstance(curves, (list, tuple)) or not all(isinstance(c, (list, tuple)) for c in curves):
        raise TypeError(f"{what}, got {curves!r}")
    if not all(_is_number(v) for c in curves for v in c):
        raise TypeError(f"{what}, got {curves!r}")
    if len(curves) != q:
        raise ValueError(f"{what}, got {len(curves)}")
    if len({len(c) for c in curves}) != 1 or len(curves[0]) < 2:
        raise ValueError(f"{where}: calibration curves must all have the same number (>= 2) of points, got {curves!r}")
    for c in curves:
        if not all(math.isfinite(v) and 0 <= v <= _FLOAT32_MAX for v in c):
            raise ValueError(f"{where}: calibration values must be finite and >= 0, got {list(c)!r}")
        if any(b < a for a, b in itertools.pairwise(c)):
            raise ValueError(f"{where}: a calibration curve must not decrease, got {list(c)!r}")
        if c[-1] <= 0:
            raise ValueError(f"{where}: a calibration curve must rise above 0 (to be inverted), got {list(c)!r}")


def json_ready(value, where: str):
    """``value`` (a policy file's entry or settings, copied) as strict JSON takes it: NumPy scalars (numbers to
    every check) as the Python numbers they hold (a dict, list or tuple holding one rebuilt around its items;
    otherwise ``value`` itself). The TypeError naming ``where`` for a value JSON cannot hold (a tensor, a set); the
    ValueError for a NaN or infinite float (strict JSON has neither; a range's ends are ``"inf"`` by then)."""
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where} is {value!r}: strict JSON (a policy file) holds no NaN or infinity")
        return value
    if isinstance(value, dict):
        bad = next((k for k in value if not isinstance(k, (str, int, float, bool)) and k is not None), None)
        if bad is not None:
            raise TypeError(f"{where}: a key must be a string, got {bad!r}")
        items = {k: json_ready(v, f"{where}[{k!r}]") for k, v in value.items()}
        return value if all(items[k] is v for k, v in value.items()) else items  # unchanged: as it was
    if isinstance(value, (list, tuple)):
        items = [json_ready(v, f"{where}[{i}]") for i, v in enumerate(value)]
        if all(a is b for a, b in zip(items, value, strict=True)):
            return value  # unchanged: as it was (a tuple stays one)
        return items if isinstance(value, list) else tuple(items)
    raise TypeError(f"{where} must be JSON data (numbers, strings, lists, dicts), got {type(value).__name__}: "
                    f"{value!r:.80}")  # fmt: skip


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=RTOL, abs_tol=ATOL)


def _check_agreement(e: dict, d: dict, where: str, sized: bool, weights: Callable[[], str] | None = None) -> None:
    """Entry ``e`` of a file against ``d``, the entry its layer's state gives; ``weights()``: what to write for the
    entries' weights to be the state (see :func:`weights_hint`), added to a weight's disagreement."""
    hint = (
        "a file means what its state (weight_logits, raw_magnitudes, temperature, calibration) says: change the "
        "state and the entries together, or rebuild the module, change it and write module.policy() again"
    )
    checks = [("weight", e["weight"], d["weight"]), ("magnitude", e["magnitude"], d["magnitude"])]
    key = "transform_magnitude" if "transform_magnitude" in e else "magnitude"
    checks.append((key, e[key], d["transform_magnitude"]))  # what the exporters run the transform at
    for name, got, want in checks:
        if not _close(got, want):
            more = weights() if name == "weight" and weights is not None else ""
            raise ValueError(f"{where}: {name} {got!r} disagrees with the layer's state, which gives {want!r}; "
                             f"{hint}{more}")  # fmt: skip
    r, want = e.get("range"), d["range"]
    if r is None or (not sized and r[2] != want[2]):
        return  # no range (an in-memory policy), or a file from before 'size' whose range is in size-dependent units
    if r[2] != want[2] or not (_close(r[0], want[0]) and _close(r[1], want[1])):
        raise ValueError(f"{where}: range {list(r)!r} disagrees with the layer's state, which gives {list(want)!r}; "
                         f"{hint}")  # fmt: skip


def weights_hint(entries: list[dict], temperature: float) -> str:
    """How to make a layer's edited entry weights its state: the weights normalised to sum to 1 and the
    ``weight_logits`` (``temperature * log(weight)``) that give them; ``""`` where a weight is not above 0."""
    weights = [e["weight"] for e in entries]
    total = math.fsum(weights)
    if not all(w > 0 for w in weights) or not math.isfinite(total):
        return ""
    normal = [w / total for w in weights]
    logits = [temperature * math.log(w) for w in normal]
    return (f" (to make the entries' weights the state instead, write them summing to 1, {_listed(normal)}, and "
            f"'weight_logits': {_listed(logits)}, the temperature times their logarithms)")  # fmt: skip


def _listed(values: list[float]) -> str:
    return "[" + ", ".join(f"{v:.9g}" for v in values) + "]"


def write_replacing(path: Path, text: str) -> None:
    """Write ``text`` to the file ``path`` (its folder made if needed), replacing an existing file only once the new
    one is whole: a temporary file beside it, then ``os.replace`` (a link's target is replaced, its mode kept). A
    folder where no file can be made (the file itself writable) and a path that is no regular file (a device) are
    written in place, as before. ``path`` an existing folder, or under a file, is the ValueError naming it (it was an
    ``IsADirectoryError`` / ``FileExistsError``)."""
    if path.is_dir():
        raise ValueError(f"cannot save to {path}: it is an existing folder (name a file in it, e.g. "
                         f"{path / 'policy.json'})")  # fmt: skip
    existing = path.parent
    while not existing.exists() and existing != existing.parent:  # the nearest folder above that exists
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        raise ValueError(f"cannot save to {path}: {existing} is a file, not a folder")
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and not path.is_file():  # a device or a pipe (os.devnull, /dev/stdout): written to, as before
        path.write_text(text)
        return
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    temporary = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    try:
        handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except PermissionError:  # a folder that takes no new file: the file in place
        target.write_text(text)
        return
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
        if target.exists():
            shutil.copymode(target, temporary)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
