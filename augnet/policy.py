"""Policies: what augmentation layers learned, and the policy file that holds it.

A :class:`Policy` lists, per layer, every transform's weight, magnitude and
range in natural units. One made by :meth:`augnet.AugmentationModule.policy`
also holds each layer's settings and exact state, so that :meth:`Policy.to_json`
is a complete *policy file*::

    {"format": "augnet.policy", "version": 1,
     "layers": [{"transforms": [entry, ...], "temperature": ..., "eval_mode": ..., "backend": ...,
                 "weight_logits": [...], "raw_magnitudes": [...], "calibration": null | [[...], ...]}]}

:func:`read_policy` reads such a file (a path, the dict or a :class:`Policy`),
:func:`layer_specs` turns it into what each layer is built from, and
:meth:`augnet.AugmentationModule.from_policy` rebuilds the module. The
exporters of :mod:`augnet.export` hand a policy on to kornia and torchvision
(:meth:`Policy.to_kornia`, :meth:`Policy.to_torchvision`).

This module depends on the transforms only: the layers and the exporters
import it, it imports neither (the exporters register themselves with
:func:`register_exporter`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = [
    "POLICY_FORMAT",
    "POLICY_VERSION",
    "Policy",
    "layer_specs",
    "read_policy",
    "register_exporter",
    "transform_classes",
]

POLICY_FORMAT = "augnet.policy"
POLICY_VERSION = 1

#: Exporters by library name, ``fn(policy, size) -> pipeline`` (filled by :mod:`augnet.export`).
_EXPORTERS: dict[str, Callable[..., Any]] = {}


def register_exporter(library: str, fn: Callable[..., Any]) -> None:
    """Make ``Policy.to_<library>(size)`` call ``fn(policy, size)`` (how :mod:`augnet.export` plugs in)."""
    _EXPORTERS[library] = fn


def _exporter(library: str) -> Callable[..., Any]:
    try:
        return _EXPORTERS[library]
    except KeyError:
        raise RuntimeError(f"no {library} exporter is registered: import augnet.export first") from None


def transform_classes() -> dict[str, type]:
    """Every public augnet transform class by name (image, signal, audio and sensor transforms)."""
    from augnet.transforms import audio, image, signal
    from augnet.transforms.base import Transform

    out = {}
    for module in (image, signal, audio):
        for name in module.__all__:
            obj = getattr(module, name)
            if isinstance(obj, type) and issubclass(obj, Transform):
                out[name] = obj
    return out


class Policy(list):
    """A learned augmentation policy: one list of transform entries per layer.

    Each entry is a dict with ``transform``, ``weight``, ``magnitude`` and
    ``range`` (a :class:`~augnet.transforms.base.Range` in natural units), and
    for an :class:`~augnet.AugmentationLayer` also ``args`` (the transform's
    constructor arguments) and ``transform_magnitude`` (see
    :meth:`augnet.AugmentationLayer.policy`). ``str(policy)`` is a readable table.

    A policy made by :meth:`augnet.AugmentationModule.policy` also holds each layer's
    settings and exact state (:attr:`settings`), so that :meth:`to_json` is a
    complete policy file: :meth:`augnet.AugmentationModule.from_policy` rebuilds an
    identical module from it, and :meth:`to_kornia` / :meth:`to_torchvision`
    hand it on to everyday training.

    Args:
        layers: per layer, a list of entries.
        settings: per layer, :meth:`augnet.AugmentationLayer.settings` (or ``None``).
    """

    def __init__(self, layers=(), settings: list[dict] | None = None) -> None:
        super().__init__(layers)
        self.settings: list[dict] | None = None if settings is None else list(settings)
        if self.settings is not None and len(self.settings) != len(self):
            raise ValueError(f"settings has {len(self.settings)} entries for {len(self)} layers")

    def __str__(self) -> str:
        lines = []
        for i, layer in enumerate(self):
            lines.append(f"layer {i}:")
            best = max(range(len(layer)), key=lambda q: layer[q]["weight"]) if layer else -1
            for q, e in enumerate(layer):
                mark = " <" if q == best else ""
                lines.append(
                    f"  {e['transform']:<16} weight {e['weight']:.3f}  magnitude {e['magnitude']:.3f}"
                    f"  range {e['range']}{mark}"
                )
        return "\n".join(lines)

    def layers_json(self) -> list[list[dict]]:
        """The entries alone, JSON-serialisable: per layer, a list of entries (ranges as ``[low, high, unit]``)."""
        return [[{**e, "range": list(e["range"])} for e in layer] for layer in self]

    def to_json(self) -> dict:
        """A JSON-serialisable policy file.

        Returns:
            ``{"format": "augnet.policy", "version": 1, "layers": [{"transforms": [entries],
            ...settings}]}``: per layer its entries (ranges as ``[low, high, unit]``)
            and, when known, its settings and exact state (temperature,
            evaluation mode, backend, weight logits, raw magnitudes, calibration).
        """
        layers = []
        for i, entries in enumerate(self.layers_json()):
            settings = self.settings[i] if self.settings is not None else {}
            layers.append({"transforms": entries, **settings})
        return {"format": POLICY_FORMAT, "version": POLICY_VERSION, "layers": layers}

    @classmethod
    def from_json(cls, data: dict) -> Policy:
        """The policy of a :meth:`to_json` dict (ranges back as :class:`~augnet.transforms.base.Range`)."""
        from augnet.transforms.base import Range

        if not isinstance(data, dict) or data.get("format") != POLICY_FORMAT:
            got = f"a dict with format {data.get('format')!r}" if isinstance(data, dict) else type(data).__name__
            raise ValueError(f"not an augnet policy file: expected a dict with format {POLICY_FORMAT!r}, got {got}")
        if data.get("version") != POLICY_VERSION:
            version = data.get("version")
            raise ValueError(f"unsupported policy file version {version!r}; this augnet reads {POLICY_VERSION}")
        layers, settings = [], []
        for i, layer in enumerate(data.get("layers", [])):
            if not isinstance(layer, dict) or not isinstance(layer.get("transforms"), list):
                raise ValueError(f"policy layer {i} must be a dict with a 'transforms' list, got {layer!r}")
            layers.append([{**e, "range": Range(*e["range"])} for e in layer["transforms"]])
            settings.append({k: v for k, v in layer.items() if k != "transforms"})
        return cls(layers, settings if all(settings) else None)

    def to_kornia(self, size: tuple[int, int] | None = None):
        """This policy as a ``kornia.augmentation`` pipeline (see :func:`augnet.export.to_kornia`)."""
        return _exporter("kornia")(self, size)

    def to_torchvision(self, size: tuple[int, int] | None = None):
        """This policy as a ``torchvision.transforms.v2`` pipeline (see :func:`augnet.export.to_torchvision`)."""
        return _exporter("torchvision")(self, size)


def read_policy(policy: Policy | dict | str | Path) -> Policy:
    """A :class:`Policy` from a policy, its :meth:`Policy.to_json` dict, or a JSON file holding that dict.

    A file (or dict) may also hold the policy under the key ``"policy"``, as
    ``augnet demo``'s ``demo.json`` does.
    """
    if isinstance(policy, (str, Path)):
        policy = json.loads(Path(policy).read_text())
    if isinstance(policy, dict) and "format" not in policy and isinstance(policy.get("policy"), dict):
        policy = policy["policy"]  # a run's record holding its policy file
    if isinstance(policy, dict):
        policy = Policy.from_json(policy)
    if not isinstance(policy, Policy):
        raise TypeError(f"policy must be a Policy, its to_json() dict or a file path, got {type(policy).__name__}")
    return policy


def layer_specs(policy: Policy | dict | str | Path) -> list[tuple[list, dict]]:
    """Per layer of a full policy: its transforms (built from the entries) and its settings.

    Raises:
        ValueError: the policy has no layer settings (it was not made by
            :meth:`augnet.AugmentationModule.policy`), or an entry names an
            unknown transform or has no constructor arguments.
    """
    policy = read_policy(policy)
    if policy.settings is None:
        raise ValueError(
            "this policy has no layer settings (it was not made by AugmentationModule.policy()); "
            "only a full policy rebuilds a module"
        )
    classes = transform_classes()
    return [
        ([_transform_from_entry(e, i, classes) for e in entries], settings)
        for i, (entries, settings) in enumerate(zip(policy, policy.settings, strict=True))
    ]


def _transform_from_entry(entry: dict, layer: int, classes: dict[str, type]):
    name = entry.get("transform")
    if name not in classes:
        raise ValueError(f"policy layer {layer}: unknown transform {name!r}; augnet has {sorted(classes)}")
    if "args" not in entry:
        raise ValueError(f"policy layer {layer}: the entry of {name} has no 'args' (constructor arguments)")
    return classes[name](**entry["args"])
