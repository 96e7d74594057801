"""Policies: what augmentation layers learned, and the policy file that holds it.

A :class:`Policy` lists, per layer, every transform's weight, magnitude and
range in natural units. One made by :meth:`augnet.AugmentationModule.policy`
also holds each layer's settings and exact state, so that :meth:`~augnet.policy.Policy.to_json`
is a complete *policy file*::

    {"format": "augnet.policy", "version": 1,
     "layers": [{"transforms": [entry, ...], "temperature": ..., "eval_mode": ..., "train_mode": ...,
                 "backend": ..., "weight_logits": [...], "raw_magnitudes": [...],
                 "calibration": null | [[...], ...], "effect": null | [...],
                 "last_size": null | [H, W], "range_size": null | [H, W], "dtype": "float64" (optional)}]}

A file means one thing everywhere. The **state** (``weight_logits``, ``raw_magnitudes``, ``temperature``,
``calibration``) is the truth: it is what :meth:`augnet.AugmentationModule.from_policy` loads, and what the exporters
export. The entries' ``weight``, ``magnitude``, ``transform_magnitude`` and ``range`` are derived from it (``range``
at ``range_size``); they must agree with it (within ``rtol=1e-5, atol=1e-6``) or every reader refuses the file, naming
the entry and the field (:func:`check_policy`). To change a policy, rebuild the module, change its parameters and
write ``module.policy().to_json()`` again (or change the state and the entries together).

:func:`read_policy` reads such a file (a path, the dict or a :class:`Policy`), :func:`layer_specs` turns it into what
each layer is built from, and :meth:`augnet.AugmentationModule.from_policy` rebuilds the module. The exporters of
:mod:`augnet.export` hand a policy on to kornia and torchvision (:meth:`~augnet.policy.Policy.to_kornia`,
:meth:`~augnet.policy.Policy.to_torchvision`).

This module depends on the transforms only: the layers and the exporters import it, it imports neither (the exporters
register themselves with :func:`register_exporter`).
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from augnet._checks import sizes, user_path
from augnet._policy_checks import (
    ATOL,  # noqa: F401 (augnet.policy.ATOL and RTOL, as before)
    RTOL,  # noqa: F401
    _check_agreement,
    _check_entry,
    _check_settings,
    _range_json,
    _range_read,
    json_ready,
    naming_path,
    naming_source,
    weights_hint,
    write_replacing,
)

__all__ = [
    "POLICY_FORMAT",
    "POLICY_VERSION",
    "Policy",
    "check_policy",
    "layer_specs",
    "read_policy",
    "rebuild_layers",
    "register_exporter",
    "register_layer_builder",
    "transform_classes",
]

POLICY_FORMAT = "augnet.policy"
POLICY_VERSION = 1

#: Exporters by library name, ``fn(policy, size) -> pipeline`` (filled by :mod:`augnet.export`).
_EXPORTERS: dict[str, Callable[..., Any]] = {}
#: Builds one layer from ``(transforms, settings)`` (registered by :mod:`augnet.layers`, which imports this module).
_LAYER_BUILDER: list[Callable[[list, dict], Any]] = []


def register_exporter(library: str, fn: Callable[..., Any]) -> None:
    """Make ``Policy.to_<library>(size)`` call ``fn(policy, size)`` (how :mod:`augnet.export` plugs in)."""
    _EXPORTERS[library] = fn


def register_layer_builder(fn: Callable[[list, dict], Any]) -> None:
    """Make ``fn(transforms, settings) -> layer`` the way a policy file's layers are rebuilt (:mod:`augnet.layers`)."""
    _LAYER_BUILDER[:] = [fn]


def _exporter(library: str) -> Callable[..., Any]:
    try:
        return _EXPORTERS[library]
    except KeyError:
        raise RuntimeError(f"no {library} exporter is registered: import augnet.export first") from None


def transform_classes() -> dict[str, type]:
    """Every public augnet transform class by name (image, signal, audio and sensor transforms).

    Only transforms that can be built and used: base classes (``Transform``,
    ``SignalTransform``), which draw nothing, are not among them.
    """
    from augnet.transforms import audio, image, signal
    from augnet.transforms.base import Transform

    out = {}
    for module in (image, signal, audio):
        for name in module.__all__:
            obj = getattr(module, name)
            if isinstance(obj, type) and issubclass(obj, Transform) and obj.sample is not Transform.sample:
                out[name] = obj
    return out


class Policy(list):
    """A learned augmentation policy: one list of transform entries per layer.

    Each entry is a dict with ``transform``, ``weight``, ``magnitude`` and ``range`` (a
    :class:`~augnet.transforms.base.Range` in natural units), and for an :class:`~augnet.AugmentationLayer` also
    ``args`` (the transform's constructor arguments) and ``transform_magnitude`` (see
    :meth:`augnet.AugmentationLayer.policy`). ``str(policy)`` is a readable table; ``<`` marks each layer's choice,
    its single largest weight (nothing at a tie: uniform weights, or Augerino's); ``repr(policy)`` (what a notebook
    shows) is the table under a line giving the number of layers and whether the policy is a full policy file.

    A policy made by :meth:`augnet.AugmentationModule.policy` also holds each layer's settings and exact state
    (``settings``), so that :meth:`to_json` is a complete policy file: :meth:`augnet.AugmentationModule.from_policy`
    rebuilds an identical module from it, and :meth:`to_kornia` / :meth:`to_torchvision` hand it on to everyday
    training.

    Two policies are equal when their entries are equal and their settings too (``None``, an entries-only
    policy, is not equal to any list of settings): a policy that evaluates as a mix is not the one that draws,
    whatever its entries. A policy compared with a plain list (of layers of entries) compares its entries alone, as
    a list does. Where the policy was read from (``source``) is not compared. A policy is mutable, so it is not
    hashable (``__hash__`` is ``None``, as a list's).

    Args:
        layers: per layer, a list of entries.
        settings: per layer, :meth:`augnet.AugmentationLayer.settings` (or ``None``).

    Attributes:
        settings: as given (a new list), or ``None``.
        source: the file the policy was read from (a :class:`~pathlib.Path`; set by :func:`read_policy` and
            :meth:`load`), or ``None``. Errors raised later about the policy (rebuilding, exporting or writing it)
            start with it, as the errors of reading the file do.
    """

    source: Path | None = None  # the file the policy was read from (documented under Attributes above)

    def __init__(self, layers=(), settings: list[dict] | None = None) -> None:
        super().__init__(layers)
        self.settings: list[dict] | None = None if settings is None else list(settings)
        if self.settings is not None and len(self.settings) != len(self):
            raise ValueError(f"settings has {len(self.settings)} entries for {len(self)} layers")

    def __eq__(self, other: object) -> bool:
        """Entries and settings equal (against a plain list: the entries alone)."""
        if not isinstance(other, list):
            return NotImplemented
        if not list.__eq__(self, other):
            return False
        return not isinstance(other, Policy) or getattr(self, "settings", None) == getattr(other, "settings", None)

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = None  # type: ignore[assignment]  # mutable, as a list

    def __repr__(self) -> str:
        """``Policy of N layers (...)`` and the :meth:`__str__` table (a malformed policy: its list of dicts)."""
        full = getattr(self, "settings", None) is not None
        kind = "with each layer's settings and state: a full policy file" if full else "entries only: no settings"
        head = f"Policy of {len(self)} layer{'' if len(self) == 1 else 's'} ({kind})"
        try:
            return head + ("\n" + str(self) if self else "")
        except (KeyError, TypeError, ValueError, AttributeError, IndexError):  # entries str() cannot show
            return f"{head}: {list.__repr__(self)}"

    def __str__(self) -> str:
        lines = []
        settings = getattr(self, "settings", None) or []
        for i, layer in enumerate(self):
            conditioned = i < len(settings) and isinstance(settings[i], dict) and settings[i].get("conditioned")
            # A conditioned layer's entries are its global part: each input's own policy adds the conditioner's.
            lines.append(f"layer {i}:" + (" (per-instance: the global part; each input adds its own, see "
                                          "augnet.instance_policy.averaged_policy)" if conditioned else ""))
            # " <" marks the layer's choice: the one largest weight (none at a tie, e.g. uniform weights, or
            # Augerino's, every one 1)
            weights = [e["weight"] for e in layer]
            best = weights.index(max(weights)) if len(layer) > 1 and weights.count(max(weights)) == 1 else -1
            for q, e in enumerate(layer):
                mark, shown = " <" if q == best else "", f"  range {e['range']}" if "range" in e else ""
                lines.append(f"  {e['transform']:<16} weight {e['weight']:.3f}  magnitude {e['magnitude']:.3f}"
                             f"{shown}{mark}")  # fmt: skip
        return "\n".join(lines)

    def layers_json(self) -> list[list[dict]]:
        """The entries alone, JSON-serialisable: per layer, a list of entries (ranges as ``[low, high, unit]``).

        An unbounded end of a range (``AddNoise``'s SNR, infinite at magnitude 0) is written as the
        string ``"inf"`` or ``"-inf"``: strict JSON has no infinity, and :meth:`from_json` reads it back.
        The lists and dicts are new (deep copies): editing them leaves the policy as it is.
        """
        return [[{**copy.deepcopy(e), "range": _range_json(e["range"])} for e in layer] for layer in self]

    def to_json(self) -> dict:
        """A JSON-serialisable policy file.

        Returns:
            ``{"format": "augnet.policy", "version": 1, "layers": [{"transforms": [entries], ...settings}]}``: per
            layer its entries (ranges as ``[low, high, unit]``) and, when known, its settings and exact state
            (temperature, evaluation mode, backend, weight logits, raw magnitudes, calibration). A new dict: editing
            it (its nested lists and dicts too) leaves the policy as it is.

        Raises:
            ValueError, TypeError: the policy is not one a reader would take (no layers, a missing field, a value
                that is not finite, entries that disagree with the state; see :func:`check_policy`), or holds a
                value strict JSON cannot (a tensor, a NaN argument), naming it: nothing is written that cannot be
                read back. NumPy numbers (``np.float32(0.5)``, numbers to every check) are written as the Python
                numbers they hold.
        """
        with naming_source(self):  # a policy read from a file: the errors name it
            refuse_conditioned(self, "written as a policy file")
            if not self:  # what from_json refuses: nothing is written that cannot be read back
                raise ValueError("a policy file's 'layers' must be a non-empty list: this policy has no layers")
            check_policy(self, ranges=True)
            layers = []
            for i, entries in enumerate(self.layers_json()):
                settings = self.settings[i] if self.settings is not None else {}
                where = f"policy layer {i}"  # NumPy numbers as Python's; a value JSON cannot hold named
                entries = [json_ready(e, f"{where}, entry {q} ({e['transform']})") for q, e in enumerate(entries)]
                layers.append({"transforms": entries, **json_ready(copy.deepcopy(settings), where)})
        return {"format": POLICY_FORMAT, "version": POLICY_VERSION, "layers": layers}

    @classmethod
    def from_json(cls, data: dict) -> Policy:
        """The policy of a :meth:`to_json` dict (ranges back as :class:`~augnet.transforms.base.Range`).

        The policy holds copies: editing ``data`` afterwards leaves it as it is (and ``data`` is not changed).

        Args:
            data: a policy file's dict, as :meth:`to_json` returns it (or ``json.load`` reads it).

        Raises:
            ValueError, TypeError: not a policy file, or one that no reader would take (see :func:`check_policy`),
                naming the layer, entry and field; a layer marked ``"conditioned": true`` (a per-instance layer is
                no fixed pipeline: see ``refuse_conditioned``).
        """
        from augnet.transforms.base import Range

        if not isinstance(data, dict) or data.get("format") != POLICY_FORMAT:
            got = f"a dict with format {data.get('format')!r}" if isinstance(data, dict) else type(data).__name__
            got += " (JSON text: pass json.loads(text); a file: Policy.load(path))" if isinstance(data, str) else ""
            raise ValueError(f"not an augnet policy file: expected a dict with format {POLICY_FORMAT!r}, got {got}")
        data = copy.deepcopy(data)  # the policy shares no list or dict with the caller's data
        version = data.get("version")
        if isinstance(version, bool) or version != POLICY_VERSION:
            raise ValueError(f"unsupported policy file version {version!r}; this augnet reads {POLICY_VERSION}")
        if not isinstance(data.get("layers"), list) or not data["layers"]:
            raise ValueError(f"a policy file's 'layers' must be a non-empty list, got {data.get('layers')!r}")
        layers, settings = [], []
        for i, layer in enumerate(data["layers"]):
            if not isinstance(layer, dict) or not isinstance(layer.get("transforms"), list):
                raise ValueError(f"policy layer {i} must be a dict with a 'transforms' list, got {layer!r}")
            for q, e in enumerate(layer["transforms"]):
                _check_entry(e, f"policy layer {i}, entry {q}", ranges=True)
            layers.append([{**e, "range": Range(*_range_read(e["range"]))} for e in layer["transforms"]])
            settings.append({k: v for k, v in layer.items() if k != "transforms"})
        if any(settings) and not all(settings):
            bare = next(i for i, s in enumerate(settings) if not s)
            raise ValueError(f"policy layer {bare} has no settings (temperature, weight_logits, ...) while others do")
        policy = cls(layers, settings if all(settings) else None)
        check_policy(policy, ranges=True)
        refuse_conditioned(policy, "read from a policy file")  # a file means one thing everywhere
        return policy

    def save(self, path: str | os.PathLike) -> Path:
        """Write this policy file (:meth:`to_json`, strict JSON) to ``path``; returns the path.

        Checked first (:meth:`to_json` raises what a reader would refuse), so a policy that cannot be
        read back writes nothing. Read it with :meth:`load` or
        :meth:`augnet.AugmentationModule.from_policy`.

        An existing file is replaced only once the new one is written whole (a write that fails, a full disk,
        leaves it as it was).

        Args:
            path: the file to write (a str or path-like object; a leading ``~`` is the home folder); its folder is
                created if needed.

        Raises:
            TypeError, ValueError: as :meth:`to_json`; ``path`` not a str or path-like object, empty, an existing
                folder or under a file, naming it (nothing is written).
        """
        path = _file_path(path)
        text = json.dumps(self.to_json(), indent=1, allow_nan=False)
        write_replacing(path, text + "\n")
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> Policy:
        """The policy of a file written by :meth:`save` (or any policy file; see :func:`read_policy`).

        The policy keeps the path as :attr:`source`: the errors raised later about it (rebuilding, exporting or
        writing it) start with the path, as the errors of reading it do.

        Args:
            path: the policy file (a str or path-like object; a leading ``~`` is the home folder).

        Raises:
            OSError: no such file, or a folder. ValueError, TypeError (naming the file): it is empty, not JSON
                (naming the line and column) or not a policy file (see :meth:`from_json`).
        """
        return read_policy(_file_path(path))

    def to_kornia(self, size: tuple[int, int] | None = None):
        """This policy as a ``kornia.augmentation`` pipeline (see :func:`augnet.export.to_kornia`).

        ``size``: the (H, W) of the images it is for, checked on each call (default ``None``: not checked).
        """
        return _exporter("kornia")(self, size)

    def to_torchvision(self, size: tuple[int, int] | None = None):
        """This policy as a ``torchvision.transforms.v2`` pipeline (see :func:`augnet.export.to_torchvision`).

        ``size``: the (H, W) of the images it is for, checked on each call (default ``None``: not checked).
        """
        return _exporter("torchvision")(self, size)


def _file_path(path) -> Path:
    """``path`` (a str or path-like object) as a Path, a leading ``~`` expanded (it wrote a folder named ``~`` in
    the working directory); a TypeError for anything else, a ValueError for an empty one (it was the working
    directory, ``.``)."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or a path-like object, got {type(path).__name__}")
    if isinstance(path, str) and path.lstrip().startswith(("{", "[")):
        raise ValueError(
            "got a str of JSON text where a file path belongs (a str is read as a path): pass json.loads(text), "
            "the dict, or Policy.from_json(json.loads(text)) instead"
        )
    if not os.fspath(path):
        raise ValueError(f"path must name a file, got {path!r}")
    return user_path(path)


def read_policy(policy: Policy | dict | str | os.PathLike) -> Policy:
    """A :class:`Policy` from a policy, its :meth:`~Policy.to_json` dict, or a JSON file holding that dict
    (its path: a str or any path-like object, e.g. a :class:`~pathlib.Path` or an ``os.DirEntry``).

    A file (or dict) may also hold the policy under the key ``"policy"``, as
    ``augnet demo``'s ``demo.json`` does. The policy is checked (:func:`check_policy`).

    A policy read from a file keeps its path as :attr:`Policy.source`: the errors of reading it, and those raised
    later about it (:func:`layer_specs`, :meth:`augnet.AugmentationModule.from_policy`, the exporters,
    :meth:`Policy.to_json`), start with the path, each keeping its exception type.
    """
    if isinstance(policy, (str, os.PathLike)):
        path = _file_path(policy)
        with naming_path(path):  # which file, when a script reads several
            policy = read_policy(_read_json(path))
        policy.source = path
        return policy
    if isinstance(policy, dict) and "format" not in policy and isinstance(policy.get("policy"), dict):
        policy = policy["policy"]  # a run's record holding its policy file
    if isinstance(policy, dict):
        return Policy.from_json(policy)
    if not isinstance(policy, Policy):
        raise TypeError(f"policy must be a Policy, its to_json() dict or a file path, got {type(policy).__name__}")
    with naming_source(policy):
        refuse_conditioned(policy, "rebuilt as a fixed module")
        check_policy(policy)
    return policy


def _read_json(path: Path) -> dict:
    """The JSON object in the file ``path``, or a ValueError naming the file (and where its JSON breaks off)."""
    what = "a policy file is the JSON object Policy.to_json() gives (Policy.save writes one)"
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if text.strip() else None
    except UnicodeDecodeError as err:
        raise ValueError(f"not UTF-8 text ({err.reason} at byte {err.start}): {what}") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"not valid JSON: {err.msg} at line {err.lineno}, column {err.colno}; {what}") from None
    if not isinstance(data, dict):
        got = f"holds a JSON {type(data).__name__}" if text.strip() else "is empty"
        raise ValueError(f"the file {got}, not a policy file: {what}")
    return data


def refuse_conditioned(policy, what: str) -> None:
    """Raise a ValueError if a layer of ``policy`` is conditioned (per-instance): it cannot be ``what``.

    A conditioned layer's policy is a function of the input, not a fixed pipeline; its settings say ``"conditioned":
    True``. The message offers the class-averaged global policy (:func:`augnet.instance_policy.averaged_policy`).
    """
    for i, settings in enumerate(getattr(policy, "settings", None) or []):
        if isinstance(settings, dict) and settings.get("conditioned"):
            raise ValueError(f"policy layer {i} is a per-instance (conditioned) layer: its weights and magnitudes "
                             f"depend on the input, so it is not a fixed pipeline and cannot be {what}. Use augnet."
                             "instance_policy.averaged_policy(model, loader) for the class-averaged global policy "
                             "instead (each class's mean weights and magnitudes, averaged over the classes: what the "
                             "layer does on average, not what it does to any one input)")  # fmt: skip


def layer_specs(policy: Policy | dict | str | os.PathLike) -> list[tuple[list, dict]]:
    """Per layer of a full policy: its transforms (built from the entries) and its settings.

    The settings are copies (as :meth:`Policy.to_json` gives them): editing them leaves the policy as it is.

    Raises:
        ValueError: the policy has no layer settings (it was not made by :meth:`augnet.AugmentationModule.policy`),
            or an entry names an unknown transform or has no constructor arguments, or the policy is not one a
            reader would take (see :func:`check_policy`); for a policy read from a file (a path, or a policy
            :meth:`Policy.load` read), the message starts with the file's path.
    """
    policy = read_policy(policy)
    with naming_source(policy):  # read from a file: the errors name it
        _require_settings(policy)
        classes = transform_classes()
        return [
            ([_transform_from_entry(e, f"policy layer {i}, entry {q}", classes) for q, e in enumerate(entries)],
             copy.deepcopy(settings))
            for i, (entries, settings) in enumerate(zip(policy, policy.settings, strict=True))
        ]  # fmt: skip


def rebuild_layers(policy: Policy | dict | str | os.PathLike) -> list:
    """The layers a full policy describes (what :meth:`augnet.AugmentationModule.from_policy` holds), checked.

    Raises:
        ValueError, TypeError: as :func:`layer_specs`; starting with the file's path for a policy read from one.
    """
    policy = read_policy(policy)
    with naming_source(policy):
        _require_settings(policy)
        return check_policy(policy)


def _require_settings(policy: Policy) -> None:
    if policy.settings is None:
        raise ValueError("this policy has no layer settings (it was not made by AugmentationModule.policy()); "
                         "only a full policy rebuilds a module")  # fmt: skip


def _transform_from_entry(entry: dict, where: str, classes: dict[str, type]):
    name = entry.get("transform")
    if name not in classes:
        raise ValueError(f"{where}: unknown transform {name!r}; augnet has {sorted(classes)}")
    if "args" not in entry:
        raise ValueError(f"{where}: the entry of {name} has no 'args' (constructor arguments)")
    args = entry["args"]
    if not isinstance(args, dict) or not all(isinstance(k, str) for k in args):
        raise TypeError(f"{where}: the 'args' of {name} must be a dict of constructor arguments, got {args!r}")
    try:
        return classes[name](**args)
    except (TypeError, ValueError) as err:
        raise type(err)(f"{where}: {name}(**{args!r}) cannot be built: {err}") from None


# ----------------------------------------------------------------------------------------------- checks


def check_policy(policy: Policy, ranges: bool = False) -> list | None:
    """Check that ``policy`` means one thing to every reader; return its rebuilt layers (``None`` without settings).

    Every entry needs ``transform`` (a name), ``weight`` and ``magnitude`` (finite numbers; ``transform_magnitude``
    too when present) and, with ``ranges`` (a file), ``range`` (``[low, high, unit]``). A policy with layer settings
    (a full policy, made by :meth:`augnet.AugmentationModule.policy`) also needs, per layer, ``temperature``,
    ``eval_mode``, ``weight_logits`` and ``raw_magnitudes`` (one finite float32 per entry), optionally ``train_mode``,
    ``backend``, ``calibration`` (one non-decreasing curve of at least 2 non-negative points per entry, rising above
    0), ``effect`` (one number >= 0 per entry), ``last_size``, ``range_size`` (input sizes), ``conditioned`` and
    ``dtype`` (``"float64"``, ``"float32"``, ``"float16"`` or ``"bfloat16"``: the layer is rebuilt in it, its state
    read from the file's numbers in that type; absent, float32). Any
    other key of an entry or of a layer's settings is refused, naming the known key it is closest to (a misspelt
    optional key was read as absent, its default taken). Every entry's transform must be a concrete augnet transform
    built from its ``args``; and the entries must agree with the state: the layer rebuilt from the state reports each
    entry's weight, magnitude, transform magnitude and range (at ``range_size``) within ``rtol=1e-5, atol=1e-6`` (a
    file written without ``range_size`` has its ranges checked only where their unit does not depend on the size).

    Raises:
        ValueError: a missing field or a bad value, naming the layer, the entry and the field.
        TypeError: a field of the wrong type.

    Both start with the file's path for a policy read from a file (:attr:`Policy.source`).
    """
    with naming_source(policy):
        return _check_policy(policy, ranges)


def _check_policy(policy: Policy, ranges: bool) -> list | None:
    if not isinstance(policy, list) or isinstance(policy, str):
        raise TypeError(f"policy must be an augnet Policy, got {type(policy).__name__}")
    for i, layer in enumerate(policy):
        if not isinstance(layer, list):
            raise ValueError(f"policy layer {i} must be a list of entries, got {layer!r}")
        for q, e in enumerate(layer):
            _check_entry(e, f"policy layer {i}, entry {q}", ranges)
    settings = getattr(policy, "settings", None)
    if settings is None:
        return None
    if not policy:
        raise ValueError("the policy has no layers")
    classes = transform_classes()
    layers = []
    for i, (entries, layer_settings) in enumerate(zip(policy, settings, strict=True)):
        where = f"policy layer {i}"
        if not entries:
            raise ValueError(f"{where} has no transforms (a full policy's layer rebuilds one; to export without some "
                             "transforms, drop them from an entries-only policy: Policy(layers) without settings)")
        _check_settings(layer_settings, len(entries), where)
        transforms = [_transform_from_entry(e, f"{where}, entry {q}", classes) for q, e in enumerate(entries)]
        try:
            layer = _LAYER_BUILDER[0](transforms, layer_settings)
        except (TypeError, ValueError) as err:
            raise type(err)(f"{where}: {err}") from None
        _in_dtype(layer, layer_settings)
        size = layer_settings.get("range_size")
        derived = layer.policy(None if size is None else tuple(size))
        sized, t = "range_size" in layer_settings, layer_settings["temperature"]
        for q, (e, d) in enumerate(zip(entries, derived, strict=True)):
            _check_agreement(e, d, f"{where}, entry {q} ({d['transform']})", sized,
                             weights=lambda entries=entries, t=t: weights_hint(entries, t))  # fmt: skip
        layers.append(layer)
    return layers


def _in_dtype(layer, settings: dict) -> None:
    """Make ``layer`` (built in float32) of the ``dtype`` its settings name, its state read from the file's numbers
    in that type: a float64 layer's state is not rounded to float32 on the way (its ``.double()`` was ~1e-8 off).
    Settings without ``dtype`` (or ``"float32"``) leave it as built, bit for bit."""
    import torch

    name = settings.get("dtype", "float32")
    if name == "float32":
        return
    dtype = getattr(torch, name)
    layer.to(dtype)
    with torch.no_grad():
        for key in ("weight_logits", "raw_magnitudes", "effect", "calibration"):
            if settings.get(key) is not None:
                getattr(layer, key).copy_(torch.tensor(settings[key], dtype=torch.float64))


def check_size(size) -> tuple[int, ...]:
    """``size`` (a spatial size: a sequence of ints >= 1, or a 1-D integer tensor or NumPy array) as a tuple, or the
    TypeError / ValueError naming it. An item may be a 0-d integer tensor or array, read as the int it holds
    (:func:`~augnet._checks.number`, as every number argument reads one); a bool, a float or a negative is refused
    as the Python value is. Read by :func:`~augnet._checks.sizes`, as a transform's ``natural_range`` reads its
    size."""
    read = sizes("size", size, "a spatial size")
    if not read:
        raise ValueError(f"size must be a non-empty spatial size of ints >= 1, got {size!r}")
    return read
