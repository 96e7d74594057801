"""The result of :func:`augnet.probes.report.report`: :class:`ProbeReport`, its table, figures and verdict."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor

from augnet._checks import folder_problem, is_int, is_real
from augnet._json import dumps as strict_json
from augnet.probes.report_measures import _COLUMNS, _SWEPT, INVARIANT_NV, MEASURES, UNIT_MEASURES
from augnet.viz import file_path

__all__ = ["ProbeReport"]


@dataclass(repr=False)
class ProbeReport:
    """The result of :func:`report`: one tidy table of records, with its figure and verdict.

    Attributes:
        records: one dict per (layer, transform, magnitude, measure, class) with the keys ``layer``,
            ``transform``, ``magnitude``, ``range`` (natural units), ``measure``, ``value``,
            ``paper``, ``note``, ``class`` (``None``: every input; a label: that class's inputs, with
            ``by_class``).
        layers, transforms: in the order probed.
        magnitudes: the magnitudes swept.
        info: the model, the inputs, the settings and the time taken.
        units: with ``per_unit=True``, ``{(layer, transform, magnitude, measure, class): (U,) float64
            tensor}`` for the measures of ``UNIT_MEASURES`` (``U``: the layer's channels); the
            record's value is the mean of the finite-or-infinite (non-NaN) entries. Read with
            :meth:`unit_values`.
    """

    records: list[dict]
    layers: list[str]
    transforms: list[str]
    magnitudes: list[float]
    info: dict = field(default_factory=dict)
    units: dict = field(default_factory=dict)

    def __repr__(self) -> str:
        # What it holds, in one line (the records and per-unit tensors are read with table() and unit_values()).
        parts = [
            f"{len(self.records)} records",
            f"layers {self.layers}",
            f"transforms {self.transforms}",
            f"magnitudes {self.magnitudes}",
        ]
        if self.classes():
            parts.append(f"classes {self.classes()}")
        if self.units:
            parts.append(f"per-unit values of {len(self.units)} records")
        return f"ProbeReport({'; '.join(parts)})"

    def __str__(self) -> str:
        """The :meth:`verdict` (what ``print(report)`` shows)."""
        return self.verdict()

    def table(self) -> dict[str, list]:
        """The records as columns, ``{column: [values]}`` (what ``pandas.DataFrame`` takes)."""
        return {c: [r[c] for r in self.records] for c in _COLUMNS}

    def value(
        self, measure: str, layer: str, transform: str, magnitude: float | None = None, cls: int | None = None
    ) -> float:
        """One value of the report; NaN where it did not measure it (e.g. the Lie derivative with ``lie=False``).

        Args:
            measure: a measure of ``MEASURES`` (e.g. ``"normalized_variance"``).
            layer, transform: a layer and a transform of the report, by name.
            magnitude: for a swept measure, the magnitude (default the largest swept).
            cls: a class of ``by_class`` (default every input).

        A magnitude matches the swept one closest to it within a relative 1e-6, so ``0.3`` finds a sweep given
        as ``np.float32(0.3)`` (stored as ``0.30000001192092896``, as given) and the other way round.

        Raises:
            TypeError: a magnitude that is not a number.
            ValueError: a measure, layer, transform, swept magnitude or class that the report does not hold
                (a misspelt name, a class that is no integer label: ``True``, ``0.0``), naming the ones it holds.
        """
        magnitude, cls = self._keys(measure, layer, transform, magnitude, cls, MEASURES)
        for r in self.records:
            if (r["measure"], r["layer"], r["transform"], r.get("class")) == (measure, layer, transform, cls) and (
                measure not in _SWEPT or r["magnitude"] == magnitude
            ):
                return r["value"]
        return math.nan

    def classes(self) -> list[int]:
        """The classes of ``by_class`` (empty without it)."""
        return list(self.info.get("classes", []))

    def unit_values(
        self, measure: str, layer: str, transform: str, magnitude: float | None = None, cls: int | None = None
    ) -> Tensor:
        """The per-unit values of one measure of ``UNIT_MEASURES`` (``report(..., per_unit=True)``), (U,): a copy.

        The arguments are checked as :meth:`value` checks them.

        Raises:
            TypeError: a magnitude that is not a number.
            ValueError: the report holds no per-unit values (``per_unit=False``); a measure not of
                ``UNIT_MEASURES``, a layer, transform, magnitude or class that the report does not hold
                (naming the ones it holds), or no per-unit values for these keys.
        """
        if not self.units:
            raise ValueError("this report holds no per-unit values: run report(..., per_unit=True)")
        magnitude, cls = self._keys(measure, layer, transform, magnitude, cls, UNIT_MEASURES)
        key = (layer, transform, magnitude, measure, cls)
        if key not in self.units:
            raise ValueError(
                f"no per-unit values of {measure!r} at layer {layer!r}, transform {transform!r}, magnitude "
                f"{magnitude:g}{'' if cls is None else f', class {cls}'} (the measure was not applicable there)"
            )
        return self.units[key].clone()

    def _keys(self, measure, layer, transform, magnitude, cls, measures) -> tuple[float | None, int | None]:
        """The checks of :meth:`value` and :meth:`unit_values`: ``(magnitude, cls)`` as the report holds them."""
        if measure not in measures:
            raise ValueError(f"unknown measure {measure!r}; the measures are {list(measures)}")
        for name, got, known in (("layer", layer, self.layers), ("transform", transform, self.transforms)):
            if got not in known:
                raise ValueError(f"{name} {got!r} was not probed; the report's {name}s are {known}")
        cls = self._cls(cls)
        return (self._swept(magnitude) if measure in _SWEPT else magnitude), cls

    def _cls(self, cls) -> int | None:
        """``cls`` (``None``, an integer or a 0-d integer tensor) as a class of the report, else the ValueError."""
        if isinstance(cls, Tensor) and cls.dim() == 0 and not cls.is_floating_point() and not cls.is_complex():
            cls = cls.item() if cls.dtype != torch.bool else cls
        if cls is not None and (not is_int(cls) or int(cls) not in self.classes()):  # True == 1 == 1.0: refused
            raise ValueError(f"cls {cls!r} is not a class of this report; its classes are {self.classes()}")
        return None if cls is None else int(cls)

    def save(self, path) -> Path:
        """Write the records to ``path``: ``.json`` (with ``info``) or ``.csv`` (in any case; a leading ``~`` is the
        home folder; missing folders are made).

        With per-unit values, they go beside it, to ``<stem>.units.json``: ``{"info", "units": [{"layer",
        "transform", "magnitude", "measure", "class", "values": [U numbers]}]}``. Both files are strict JSON:
        NaN is written as ``null`` and an infinite value (a unit's normalised variance whose clean variance
        is 0) as the string ``"inf"`` or ``"-inf"``, as policy files write unbounded ranges.

        Raises:
            TypeError: ``path`` not a str or a path-like object (``None``), naming it.
            ValueError: another suffix, a path (or its ``.units.json``) that is an existing directory, or a folder
                that cannot be written; checked before any file is written. The table is written first.
        """
        path = file_path(path)
        if path.suffix.lower() not in (".json", ".csv"):  # in any case, as the figures' and the images' suffixes
            raise ValueError(f"save writes .json or .csv, got {path.suffix!r} ({path})")
        beside = path.with_name(f"{path.stem}.units.json")
        for target in (path, beside) if self.units else (path,):  # every check before the first file is written
            if target.is_dir():
                raise ValueError(f"cannot save to {target}: it is an existing directory")
        problem = folder_problem(path.parent, "folder", "output")
        if problem:
            raise ValueError(f"cannot save to {path}: {problem}")
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix.lower() == ".json":
            text = strict_json({"info": self.info, "records": self.records})
            path.write_text(text)
        else:
            with path.open("w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=_COLUMNS)
                writer.writeheader()
                writer.writerows(self.records)
        if self.units:  # after the table: a failure leaves no per-unit file without its table
            rows = [
                {
                    "layer": k[0],
                    "transform": k[1],
                    "magnitude": k[2],
                    "measure": k[3],
                    "class": k[4],
                    "values": values.tolist(),
                }
                for k, values in self.units.items()
            ]
            beside.write_text(strict_json({"info": self.info, "units": rows}, indent=None))
        return path

    @classmethod
    def load(cls, path) -> ProbeReport:
        """The report that :meth:`save` wrote to a ``.json`` file (a leading ``~`` is the home folder).

        Its per-unit values are read where ``<stem>.units.json`` lies beside it: ``ProbeReport.load(p)`` answers
        :meth:`value`, :meth:`table`, :meth:`verdict` and the figures as the saved report did (``null`` read back as
        NaN, ``"inf"`` as an infinity).

        Raises:
            TypeError: ``path`` not a str or a path-like object (``None``), naming it.
            ValueError: a ``.csv`` (it holds the records without the report's layers, transforms and
                magnitudes: save to ``.json`` to load), another suffix, a missing file, or a JSON file (or its
                ``.units.json``) that :meth:`save` did not write (naming what it lacks: a record or a row that
                is not a dict of its fields, a value that is not a number, layers that are not names, no
                magnitude).
        """
        path = file_path(path)
        if path.suffix.lower() != ".json":
            raise ValueError(
                f"load reads the .json file that save writes, got {path.suffix!r} ({path})"
                + ("; a .csv holds only the records: save the report to .json to load it"
                   if path.suffix.lower() == ".csv"
                   else "")
            )  # fmt: skip
        if not path.is_file():
            raise ValueError(f"cannot load {path}: no such file")
        saved = _read(path)
        info = saved.get("info") if isinstance(saved, dict) else None
        missing = [k for k in ("layers", "transforms", "magnitudes") if not isinstance(info, dict) or k not in info]
        if not isinstance(saved, dict) or not isinstance(saved.get("records"), list) or missing:
            raise ValueError(
                f"cannot load {path}: not a report that ProbeReport.save wrote (it needs 'records' and 'info' "
                f"with the layers, transforms and magnitudes{'; missing ' + ', '.join(missing) if missing else ''})"
            )
        _check_saved(path, info, saved["records"])  # (raw KeyErrors, TypeErrors, later ones from value() too)
        records = [{**r, "value": _number(r["value"]), "class": r.get("class")} for r in saved["records"]]
        units = {}
        beside = path.with_name(f"{path.stem}.units.json")
        if beside.is_file():
            for row in _unit_rows(beside):
                key = (row["layer"], row["transform"], row["magnitude"], row["measure"], row["class"])
                units[key] = torch.tensor([_number(v) for v in row["values"]], dtype=torch.float64)
        mags = [float(m) for m in info["magnitudes"]]
        return cls(records, list(info["layers"]), list(info["transforms"]), mags, info, units)

    def heatmap(
        self, path, magnitude: float | None = None, measures: Sequence[str] | None = None, cls: int | None = None
    ) -> Path:
        """Draw a layers x transforms heatmap, one panel per measure, to ``path``; returns the file written.

        Swept measures are drawn at ``magnitude`` (default the largest), of class ``cls`` of ``by_class``
        (default every input), for ``measures`` (default every measure the report holds).

        ``path`` gets ``.png`` where it has no suffix; an existing directory or a suffix matplotlib cannot write is
        refused (ValueError) before anything is drawn or any folder made. NaN cells are grey ("n/a"), infinite ones
        take the colour map's end ("inf"); ``alignment`` is coloured by its absolute value (bright: near 0).
        """
        from augnet.probes.plots import plot_report_heatmap
        from augnet.viz import figure_path

        magnitude, cls = self._swept(magnitude), self._cls(cls)
        present = [m for m in MEASURES if any(r["measure"] == m for r in self.records)]
        names = present if measures is None else self._measures(measures, present)
        path = figure_path(path)  # before drawing
        panels = {}
        for m in names:
            grid = [[self.value(m, layer, t, magnitude, cls) for t in self.transforms] for layer in self.layers]
            if m in _SWEPT:
                what = f"{m} (mu = {magnitude:g})"
            elif m.startswith("lie"):
                what = f"{m} (at the identity)"
            else:
                at = {r["transform"]: r["magnitude"] for r in self.records if r["measure"] == m}
                what = f"{m} (mu = {', '.join(f'{v:g}' for v in dict.fromkeys(at.values()))})"
            panels[what] = (torch.tensor(grid, dtype=torch.float64), MEASURES[m][0], MEASURES[m][2])
        title = (
            f"{self.info.get('model', 'model')} on {self.info.get('n_inputs', '?')} inputs"
            f"{'' if cls is None else f' of class {cls}'} (bright: closer to invariant; grey: n/a)"
        )
        return plot_report_heatmap(panels, self.layers, self.transforms, path, title=title)

    def units_plot(
        self, path, measure: str = "normalized_variance", magnitude: float | None = None, cls: int | None = None
    ) -> Path:
        """Per transform, each layer's per-unit values of ``measure`` (``per_unit=True``), their median marked.

        Args:
            path: where to write the PNG (checked as :meth:`heatmap` checks it).
            measure: one of ``UNIT_MEASURES`` (default the normalised variance).
            magnitude: a swept magnitude (default the largest).
            cls: a class of ``by_class`` (default every input).

        Raises:
            ValueError: no per-unit values in this report, an unknown measure, magnitude or class.
        """
        from augnet.probes.plots import plot_report_units
        from augnet.viz import figure_path

        if not self.units:
            raise ValueError("this report holds no per-unit values: run report(..., per_unit=True)")
        if measure not in UNIT_MEASURES:
            raise ValueError(f"measure must be one of {list(UNIT_MEASURES)}, got {measure!r}")
        magnitude, cls = self._swept(magnitude), self._cls(cls)
        path = figure_path(path)  # before drawing
        panels = {}
        for t in self.transforms:
            layers = {
                layer: self.units[(layer, t, magnitude, measure, cls)]
                for layer in self.layers
                if (layer, t, magnitude, measure, cls) in self.units
            }
            if layers:
                panels[f"{t} (mu = {magnitude:g})"] = layers
        if not panels:
            raise ValueError(f"no per-unit values of {measure!r} at magnitude {magnitude:g}")
        who = "" if cls is None else f", class {cls}"
        title = f"{self.info.get('model', 'model')}: {measure} per unit{who} ({MEASURES[measure][0]})"
        return plot_report_units(panels, path, f"{measure} (invariant: {MEASURES[measure][2]})", title)

    def _swept(self, magnitude) -> float:
        """The swept magnitude ``magnitude`` stands for (default the largest; the closest swept one within a relative
        1e-6, so that a float32 ``0.3`` and ``0.3`` are one magnitude), else the TypeError / ValueError."""
        if magnitude is None:
            return max(self.magnitudes)
        if not is_real(magnitude):
            raise TypeError(f"magnitude must be a number, got {type(magnitude).__name__}: {magnitude!r}")
        m = float(magnitude)
        close = min(self.magnitudes, key=lambda s: abs(s - m)) if math.isfinite(m) else math.nan
        if not abs(close - m) <= 1e-6 * max(abs(close), abs(m)):
            raise ValueError(f"magnitude {magnitude!r} was not swept; the report's magnitudes are {self.magnitudes}")
        return close

    @staticmethod
    def _measures(measures, present: list[str]) -> list[str]:
        """``measures`` checked: names of :data:`MEASURES` that the report holds records of."""
        if isinstance(measures, str) or not isinstance(measures, Sequence):
            raise TypeError(f"measures must be a list of measure names, got {measures!r}")
        if not all(isinstance(m, str) for m in measures):
            raise TypeError(f"measures must be measure names (str), got {list(measures)!r}")
        unknown = [m for m in measures if m not in MEASURES]
        if unknown:
            raise ValueError(f"unknown measure(s) {unknown}; the measures are {list(MEASURES)}")
        absent = [m for m in measures if m not in present]
        if absent or not measures:
            raise ValueError(f"no record of measure(s) {absent or list(measures)} in this report; it has {present}")
        return list(measures)

    def verdict(self) -> str:
        """A few lines: per transform, how Inv_T changes from the first layer given to the last (with two or more
        finite values), and what the last layer given holds (its errors, Lie derivative, ranking, variance)."""
        top = max(self.magnitudes)
        lines = [f"{self.info.get('model', 'model')}: {self.info.get('features', '')}"]
        for t in self.transforms:
            inv = {layer: self.value("inv_augnet", layer, t, top) for layer in self.layers}
            finite = {k: v for k, v in inv.items() if math.isfinite(v)}
            if not finite:
                lines.append(f"{t}: no invariance score (see the notes)")
                continue
            last = self.layers[-1]
            at_last = f"{inv[last]:.3f}" if math.isfinite(inv[last]) else "not measured (see the notes)"
            line = f"{t} at mu = {top:g}: Inv_T {at_last} at {last}"
            if len(finite) >= 2:  # a trend needs two values; NaN layers are left out of it
                order = list(finite)
                best, first, end = max(finite, key=finite.get), order[0], order[-1]
                up, down = finite[end] > finite[first] + 0.01, finite[end] < finite[first] - 0.01
                if up or down:
                    line += (
                        f" ({'grows' if up else 'falls'} from {finite[first]:.3f} at {first} to {finite[end]:.3f} at "
                        f"{end}, from the first layer given to the last; highest {finite[best]:.3f} at {best})"
                    )
                else:  # ("stays from 0.031 to 0.022" read as a contradiction: within 0.01 is about the same)
                    line += (
                        f" (about the same from the first layer given to the last, within 0.01: {finite[first]:.3f} "
                        f"at {first}, {finite[end]:.3f} at {end}; highest {finite[best]:.3f} at {best})"
                    )
            eq, ie = self.value("equivariance_error", last, t, top), self.value("invariance_error", last, t, top)
            if math.isfinite(ie) or math.isfinite(eq):
                line += f"; held-out error {ie:.3f} as invariant, {eq:.3f} through the best linear map"
            lie = self.value("lie_derivative_relative", last, t)
            if math.isfinite(lie):
                line += f"; Lie derivative |L phi| / |phi| {lie:.3g} per {self.info.get('units', {}).get(t, 'unit')}"
            rank = self.value("ranking_accuracy", last, t)
            if math.isfinite(rank):
                at = next(
                    r["magnitude"] for r in self.records if r["measure"] == "ranking_accuracy" and r["transform"] == t
                )
                pairs = self.info.get("ranking_held_out", {}).get(t)
                if pairs:  # chance's 95 % band on that many held-out pairs (binomial, normal approximation)
                    band = 1.96 * math.sqrt(0.25 / pairs)
                    odds = f"{pairs} held-out pairs: chance 0.5 ± {band:.2f}" + (
                        ", no better than chance" if rank <= 0.5 + band else "")
                else:
                    odds = "chance 0.5"
                line += f"; its parameter ranked at {rank:.2f} from {last} ({odds}; "
                line += f"pairs of views drawn at mu = {at:g})"
            nv = self.value("normalized_variance", last, t, top)
            if math.isfinite(nv):
                line += f"; normalised variance {nv:.3g} at {last} (0: invariant)"
            lines.append(line + ".")
            if self.classes():
                lines.append(self._class_line(t, last, top))
        return "\n".join(lines)

    def _class_line(self, t: str, layer: str, top: float) -> str:
        """Which classes ``layer`` treats invariantly to ``t`` (normalised variance at most 0.1, ``INVARIANT_NV``)."""
        nv = {k: self.value("normalized_variance", layer, t, top, k) for k in self.classes()}
        yes = [f"{k} ({v:.3g})" for k, v in nv.items() if v <= INVARIANT_NV]
        no = [f"{k} ({v:.3g})" for k, v in nv.items() if v > INVARIANT_NV]
        none = [str(k) for k, v in nv.items() if not v <= INVARIANT_NV and not v > INVARIANT_NV]
        text = f"{t} by class at {layer} (normalised variance; invariant at <= {INVARIANT_NV:g}): "
        text += f"invariant: {', '.join(yes) or 'none'}; not invariant: {', '.join(no) or 'none'}"
        return text + (f"; not measured: {', '.join(none)}." if none else ".")


def _read(path: Path):
    """The JSON in ``path``, else a ValueError naming it."""
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"cannot load {path}: not JSON ({err})") from None


def _readable(value) -> bool:
    """Whether ``value`` is a number as :func:`augnet._json.strict` writes one: a number, ``None``, ``"inf"``."""
    return value is None or is_real(value) or value in ("inf", "-inf")


def _check_saved(path: Path, info: dict, records: list) -> None:
    """The ValueError naming ``path`` and what is wrong, where its report is not one :meth:`ProbeReport.save` wrote."""
    problem = None
    for key in ("layers", "transforms"):
        names = info[key]
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            problem = problem or f"info's {key} must be a non-empty list of names, got {names!r:.80}"
    mags = info["magnitudes"]
    if not isinstance(mags, list) or not mags or not all(is_real(m) for m in mags):
        problem = problem or f"info's magnitudes must be a non-empty list of numbers, got {mags!r:.80}"
    fields = [c for c in _COLUMNS if c != "class"]  # (a report saved before by_class has none: every input's)
    for i, r in enumerate(records):
        if problem:
            break
        if not isinstance(r, dict) or not set(fields) <= set(r):
            have = sorted(r) if isinstance(r, dict) else type(r).__name__
            problem = f"record {i} must be a dict of the fields {list(_COLUMNS)}, got {have}"
        elif not _readable(r["value"]):
            problem = f"record {i}'s value must be a number, null, 'inf' or '-inf', got {r['value']!r:.80}"
        elif r["magnitude"] is not None and not is_real(r["magnitude"]):
            problem = f"record {i}'s magnitude must be a number or null, got {r['magnitude']!r:.80}"
    if problem:
        raise ValueError(f"cannot load {path}: not a report that ProbeReport.save wrote ({problem})")


def _unit_rows(path: Path) -> list[dict]:
    """The rows of the per-unit file ``path`` (``<stem>.units.json``), checked, else the ValueError naming it."""
    saved = _read(path)
    rows = saved.get("units") if isinstance(saved, dict) else None
    fields = ("layer", "transform", "magnitude", "measure", "class", "values")
    problem = None if isinstance(rows, list) else "it needs a list 'units'"
    for i, row in enumerate(rows if isinstance(rows, list) else []):
        if not isinstance(row, dict) or not set(fields) <= set(row):
            have = sorted(row) if isinstance(row, dict) else type(row).__name__
            problem = f"row {i} must be a dict of the fields {list(fields)}, got {have}"
        elif not isinstance(row["values"], list) or not all(_readable(v) for v in row["values"]):
            problem = f"row {i}'s values must be a list of numbers, null, 'inf' or '-inf', got {row['values']!r:.80}"
        if problem:
            break
    if problem:
        raise ValueError(f"cannot load {path}: not the per-unit values that ProbeReport.save wrote ({problem})")
    return rows


def _number(value) -> float:
    """A value as :func:`augnet._json.strict` wrote it, read back: ``None`` as NaN, ``"inf"`` / ``"-inf"``."""
    if value is None:
        return math.nan
    if isinstance(value, str):
        return float(value)
    return value

