"""The rules a selection must meet, how a run is read against them, and the selection experiment's report.

:data:`RULES` were written before the runs of ``augnet reproduce selection``
(:mod:`augnet.experiments.selection`) and are checked on its records:

- **images**: on the sprites and the glyphs together, Rotate is selected (the
  layer's largest weight, at least 0.5) with a range within ±35° to ±60° in at
  least 9 of the 10 seeds;
- **sinusoids**: for every stack depth (1, 2 and 4 layers), FrequencyShift is
  learned (weight at least 0.5 in some layer, range within ±0.3 to ±0.8 Hz) in at
  least 4 of 5 seeds, and, with 2 or more layers, the layers hold different
  transforms or collapse to the identity in those seeds;
- **capacity**: AugNet with the three candidates reaches a median invariance to
  ±0.5 Hz shifts (pooled over the seeds) of at least 0.9 on at least 7 of the 9
  trunks, and a test accuracy at least the oracle augmentation's on the three
  trunks of width 4;
- **accuracy**: on no task is the mean test accuracy more than 0.01 below the
  paper's method's.

A layer *holds* a transform when that transform's weight is at least 0.5 and
its magnitude at least 0.05; it *is the identity* when the expected magnitude
of what a row gets, :math:`\\sum_q w_q \\mu_q`, is at most 0.05; otherwise it
chose nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import statistics
from collections import Counter
from pathlib import Path

import torch

from augnet._checks import is_real
from augnet.experiments._registry import Report
from augnet.probes import summary

__all__ = [
    "ORACLE",
    "RULES",
    "check_rules",
    "layer_choice",
    "plot_selection",
    "record_problem",
    "report_of_rows",
    "selection_report",
    "succeeds",
    "summarize",
]

RULES = {
    "images": {"wins": 9, "of": 10, "rotate_range_deg": (35.0, 60.0)},
    "sinusoids": {"wins": 4, "of": 5, "shift_range_hz": (0.3, 0.8)},
    "capacity": {"invariance": 0.9, "trunks": 7, "narrow_width": 4},
    "accuracy": {"below_paper": 0.01},
}

HOLD_WEIGHT, HOLD_MAGNITUDE, IDENTITY = 0.5, 0.05, 0.05
_IMAGE_TASKS = ("sprites", "glyphs")
#: The report also counts the runs whose first layer holds a weight of at least HOLD_WEIGHT after this many epochs.
EARLY_EPOCHS = 10

#: The capacity experiment's reference setting: the plain trunk trained on the true ±0.5 Hz shifts.
ORACLE = "oracle (true shifts)"


#: What :func:`layer_choice` and the report read of a layer's entry (a record's ``"layers"``: policies as JSON).
ENTRY_KEYS = ("transform", "weight", "magnitude", "range")


def _missing(mapping, keys) -> list[str]:
    return [k for k in keys if k not in mapping] if isinstance(mapping, dict) else list(keys)


def _entries_problem(layers) -> str | None:
    """Why ``layers`` (a record's or a trunk's ``"layers"``: a list of layers, each a list of entries) cannot be
    read (``None`` when it can)."""
    if not isinstance(layers, list):
        return f"has layers that are not a list: {layers!r:.80}"
    for i, layer in enumerate(layers):
        if not isinstance(layer, list) or not layer:
            return f"has a layer {i} that is not a non-empty list of entries: {layer!r:.80}"
        for entry in layer:
            missing = _missing(entry, ENTRY_KEYS)
            if missing or not all(is_real(entry[k]) for k in ("weight", "magnitude")):
                lacks = missing or "a numeric weight and magnitude"
                return f"has an entry of layer {i} without {lacks}: {entry!r:.120}"
    return None


def _early_problem(holder: dict) -> str | None:
    early = holder.get("early")
    if early is not None and not (isinstance(early, dict) and isinstance(early.get("weights"), dict)):
        return f"has an early entry without weights: {early!r:.80}"
    return None


def record_problem(record) -> str | None:
    """Why ``record`` (a run's, as :func:`~augnet.experiments.selection.run_one` makes it and ``runs.jsonl``
    keeps it) cannot be read by :func:`summarize` (``None`` when it can): it needs ``task``, ``setting``, a numeric
    ``accuracy`` and non-empty ``layers`` (every entry with :data:`ENTRY_KEYS`) or, on the capacity task,
    ``trunks`` (each with ``depth``, ``width``, ``accuracy``, ``scores`` and ``layers``, which may be empty); an
    ``early`` entry, when there, is ``None`` or holds ``weights``."""
    if not isinstance(record, dict):
        return f"is not a dict: {record!r:.80}"
    capacity = record.get("task") == "capacity"
    missing = _missing(record, ("task", "setting", "accuracy", "trunks" if capacity else "layers"))
    if missing:
        return f"lacks {missing}"
    if not is_real(record["accuracy"]):
        return f"has an accuracy that is not a number: {record['accuracy']!r:.80}"
    if not capacity:
        return ("has no layers" if record["layers"] == [] else _entries_problem(record["layers"])) or \
            _early_problem(record)
    if not isinstance(record["trunks"], list) or not record["trunks"]:
        return f"has trunks that are not a non-empty list: {record['trunks']!r:.80}"
    for trunk in record["trunks"]:
        missing = _missing(trunk, ("depth", "width", "accuracy", "scores", "layers"))
        if missing:
            return f"has a trunk without {missing}: {trunk!r:.120}"
        problem = (_entries_problem(trunk["layers"]) if trunk["layers"] else None) or _early_problem(trunk)
        if problem is not None:
            return problem
    return None


def layer_choice(entries: list[dict]) -> str:
    """The transform a layer holds, ``"identity"``, or ``"none"`` (see the module docstring); ``"none"`` too when
    a weight is NaN (a run that diverged: which entry came first decided it).

    Raises:
        ValueError: no entries, or an entry without a ``transform``, ``weight`` or ``magnitude``.
    """
    if not isinstance(entries, list) or not entries:
        raise ValueError(f"a layer must be a non-empty list of entries, got {entries!r:.80}")
    for entry in entries:
        missing = _missing(entry, ("transform", "weight", "magnitude"))
        if missing:
            raise ValueError(f"a layer's entry lacks {missing}: {entry!r:.120}")
    if any(math.isnan(e["weight"]) for e in entries):
        return "none"
    top = max(entries, key=lambda e: e["weight"])
    magnitude = top.get("transform_magnitude", top["magnitude"])
    if top["weight"] >= HOLD_WEIGHT and magnitude >= HOLD_MAGNITUDE:
        return top["transform"]
    if sum(e["weight"] * e.get("transform_magnitude", e["magnitude"]) for e in entries) <= IDENTITY:
        return "identity"
    return "none"


def _in(value: float, bounds: tuple[float, float]) -> bool:
    return bounds[0] <= value <= bounds[1]


def succeeds(record: dict) -> bool | None:
    """Whether an image or sinusoid run meets its task's rule (None for the capacity task, or a run without layers).

    Raises:
        ValueError: a record without a ``task``, of a task that is none of these (it was judged by the sinusoids'
            rule), or whose layers cannot be read (:func:`record_problem`).
    """
    task = record.get("task") if isinstance(record, dict) else None
    if task != "capacity" and task not in _IMAGE_TASKS and not (isinstance(task, str) and task.startswith("sinus")):
        raise ValueError(f"a record's task must be sprites, glyphs, sinusoids-N or capacity, got {task!r}")
    layers = record.get("layers")
    if task == "capacity" or not layers:
        return None
    problem = _entries_problem(layers)
    if problem is not None:
        raise ValueError(f"the record of {task} {problem}")
    if task in ("sprites", "glyphs"):
        rotate = next((e for e in layers[0] if e["transform"] == "Rotate"), None)
        bounds = RULES["images"]["rotate_range_deg"]
        return layer_choice(layers[0]) == "Rotate" and rotate is not None and _in(rotate["range"][1], bounds)
    bounds = RULES["sinusoids"]["shift_range_hz"]
    learned = any(
        e["transform"] == "FrequencyShift" and e["weight"] >= HOLD_WEIGHT and _in(e["range"][1], bounds)
        for layer in layers
        for e in layer
    )
    if len(layers) == 1:
        return learned
    choices = [layer_choice(layer) for layer in layers]
    held = [c for c in choices if c not in ("identity", "none")]
    return learned and "none" not in choices and len(held) == len(set(held))


def _describe(record: dict) -> str:
    """A run in a few words: the choice of each layer, and the learned range of the task's transform."""
    layers = record["layers"]
    choices = ", ".join(layer_choice(layer) for layer in layers)
    if record["task"] in ("sprites", "glyphs"):
        rotate = next((e for e in layers[0] if e["transform"] == "Rotate"), None)
        return f"{choices} (Rotate ±{rotate['range'][1]:.0f}°)" if rotate else choices
    shifts = [e["range"][1] for layer in layers for e in layer if e["transform"] == "FrequencyShift"]
    weights = [e["weight"] for layer in layers for e in layer if e["transform"] == "FrequencyShift"]
    best = max(range(len(weights)), key=weights.__getitem__) if weights else None
    return f"{choices} (FS ±{shifts[best]:.2f} Hz)" if best is not None else choices


def _capacity_summary(runs: list[dict]) -> dict:
    """Per trunk (depth, width): invariance pooled over the seeds, mean accuracy, and what the layer chose."""
    by_trunk: dict[tuple[int, int], list[dict]] = {}
    for run in runs:
        for t in run["trunks"]:
            by_trunk.setdefault((t["depth"], t["width"]), []).append(t)
    out = {}
    for (depth, width), trunks in sorted(by_trunk.items()):
        pooled = summary(torch.tensor([s for t in trunks for s in t["scores"]]))
        choices = Counter(layer_choice(t["layers"][0]) for t in trunks if t["layers"])
        out[f"{depth}x{width}"] = {
            "depth": depth,
            "width": width,
            "invariance_median": pooled["median"],
            "accuracy": statistics.fmean(t["accuracy"] for t in trunks),
            "choices": dict(choices.most_common()),
        }
    return out


def _early(layers: list[dict]) -> tuple[int, int, list[str]]:
    """Of ``layers`` (records' ``"early"`` entries), how many are known, how many committed, and what to each."""
    known = [e for e in layers if e]
    top = [max(e["weights"].items(), key=lambda kv: kv[1]) for e in known]
    return len(known), sum(w >= HOLD_WEIGHT for _, w in top), [f"{name} {w:.2f}" for name, w in top]


def summarize(records: list[dict]) -> list[dict]:
    """One row per (task, setting): successes, choices and accuracies (capacity: per-trunk figures).

    Raises:
        ValueError: a record that cannot be read (:func:`record_problem`: a hand-edited one, of another augnet),
            naming it and what it lacks (it was a KeyError).
    """
    for i, r in enumerate(records):
        problem = record_problem(r)
        if problem is not None:
            raise ValueError(f"record {i} ({r.get('task')!r}, {r.get('setting')!r}, seed {r.get('seed')!r}) {problem}"
                             if isinstance(r, dict) else f"record {i} {problem}")  # fmt: skip
    keys = list(dict.fromkeys((r["task"], r["setting"]) for r in records))
    rows = []
    for task, setting in keys:
        runs = [r for r in records if (r["task"], r["setting"]) == (task, setting)]
        accuracy = [r["accuracy"] for r in runs]
        lowest = math.nan if any(math.isnan(a) for a in accuracy) else min(accuracy)  # (min's NaN: the order's)
        row = {"task": task, "setting": setting, "runs": len(runs), "accuracy": accuracy,
               "accuracy_mean": statistics.fmean(accuracy), "accuracy_min": lowest}  # fmt: skip
        if task == "capacity":
            row["trunks"] = _capacity_summary(runs)
            early = [t.get("early") for r in runs for t in r["trunks"] if t["layers"]]
        else:
            early = [r.get("early") for r in runs]
            row["successes"] = sum(bool(succeeds(r)) for r in runs)
            row["runs_described"] = [_describe(r) for r in runs]
            row["choices"] = dict(Counter(layer_choice(r["layers"][0]) for r in runs).most_common())
        known, committed, described = _early(early)
        if known:
            row["early"] = {"known": known, "committed": committed, "described": described}
        rows.append(row)
    return rows


def _row_problem(row) -> str | None:
    """Why a summary row cannot be read by :func:`check_rules` (``None`` when it can)."""
    capacity = isinstance(row, dict) and row.get("task") == "capacity"
    missing = _missing(row, ("task", "setting", "runs", "accuracy_mean", "trunks" if capacity else "successes"))
    if missing:
        return f"lacks {missing}"
    if capacity and not isinstance(row["trunks"], dict):
        return "has trunks that are not a dict"
    for name, trunk in row["trunks"].items() if capacity else ():
        missing = _missing(trunk, ("width", "invariance_median", "accuracy"))
        if missing:
            return f"has a trunk {name} without {missing}"
    return None


def check_rules(rows: list[dict], setting: str, paper: str = "paper", oracle: str | None = None) -> dict:
    """Each rule's verdict for ``setting``: ``{rule: (passed or None when not run, what was measured)}``.

    Raises:
        ValueError: a row (of :func:`summarize`, or a stored table's ``"summary"``) without what the rules read
            (``task``, ``setting``, ``runs``, ``accuracy_mean``, and ``successes`` or, on the capacity task, ``trunks``
            each with ``width``, ``invariance_median`` and ``accuracy``), naming it (it was a KeyError).
    """
    for i, row in enumerate(rows):
        problem = _row_problem(row)
        if problem is not None:
            raise ValueError(f"row {i} of the summary {problem}: {row!r:.120}")
    mine = {r["task"]: r for r in rows if r["setting"] == setting}
    out: dict[str, tuple[bool | None, str]] = {}
    images = [mine[t] for t in ("sprites", "glyphs") if t in mine]
    if images:
        wins, runs = sum(r["successes"] for r in images), sum(r["runs"] for r in images)
        need = RULES["images"]["wins"] / RULES["images"]["of"]
        what = f"Rotate at ±35-60° in {wins} of {runs} runs, sprites and glyphs (need {need:.0%})"
        out["images"] = (wins >= need * runs, what)
    sines = [mine[t] for t in ("sinusoids-1", "sinusoids-2", "sinusoids-4") if t in mine]
    if sines:
        need = RULES["sinusoids"]["wins"] / RULES["sinusoids"]["of"]
        ok = all(r["successes"] >= need * r["runs"] for r in sines)
        what = ", ".join(f"{r['task'].split('-')[1]} layer(s) {r['successes']} of {r['runs']}" for r in sines)
        out["sinusoids"] = (ok, f"FrequencyShift learned (and layers distinct): {what} (need {need:.0%} each)")
    if "capacity" in mine:
        trunks = mine["capacity"]["trunks"]
        rule = RULES["capacity"]
        invariant = sum(t["invariance_median"] >= rule["invariance"] for t in trunks.values())
        ok = invariant >= rule["trunks"] * len(trunks) / 9
        what = f"median invariance >= {rule['invariance']} on {invariant} of {len(trunks)} trunks"
        reference = next((r for r in rows if r["task"] == "capacity" and r["setting"] == oracle), None)
        if reference is not None:
            narrow = [k for k, t in trunks.items() if t["width"] == rule["narrow_width"]]
            beaten = [k for k in narrow if trunks[k]["accuracy"] >= reference["trunks"][k]["accuracy"]]
            ok = ok and len(beaten) == len(narrow)
            what += f"; accuracy >= the oracle's on {len(beaten)} of {len(narrow)} width-4 trunks"
        out["capacity"] = (ok, what)
    paper_rows = {r["task"]: r for r in rows if r["setting"] == paper}
    worst = [(mine[t]["accuracy_mean"] - paper_rows[t]["accuracy_mean"], t) for t in mine if t in paper_rows]
    if worst:
        gap, task = min(worst)
        limit = RULES["accuracy"]["below_paper"]
        out["accuracy"] = (gap >= -limit, f"mean accuracy at worst {gap:+.3f} against the paper's ({task})")
    return out


def _cell(row: dict | None) -> str:
    if row is None:
        return "-"
    if row["task"] == "capacity":
        rule = RULES["capacity"]["invariance"]
        good = sum(t["invariance_median"] >= rule for t in row["trunks"].values())
        return f"inv>={rule} on {good}/{len(row['trunks'])} (acc {row['accuracy_mean']:.3f})"
    return f"{row['successes']}/{row['runs']} (acc {row['accuracy_mean']:.3f})"


def _table(rows: list[dict]) -> list[str]:
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    settings = list(dict.fromkeys(r["setting"] for r in rows))
    index = {(r["task"], r["setting"]): r for r in rows}
    width = max(len(s) for s in settings) + 2
    lines = [f"{'setting':<{width}}" + "".join(f"{t:<32}" for t in tasks)]
    for s in settings:
        lines.append(f"{s:<{width}}" + "".join(f"{_cell(index.get((t, s))):<32}" for t in tasks))
    return lines


def plot_selection(rows: list[dict], path: Path) -> Path:
    """A settings x tasks heatmap of the fraction of seeds (capacity: of trunks) meeting the task's rule."""
    from augnet.viz import require_matplotlib, save_figure

    plt = require_matplotlib()
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    settings = list(dict.fromkeys(r["setting"] for r in rows))
    index = {(r["task"], r["setting"]): r for r in rows}
    grid = torch.full((len(settings), len(tasks)), float("nan"))
    for i, s in enumerate(settings):
        for j, t in enumerate(tasks):
            row = index.get((t, s))
            if row is None:
                continue
            if t == "capacity":
                inv = [v["invariance_median"] >= RULES["capacity"]["invariance"] for v in row["trunks"].values()]
                grid[i, j] = sum(inv) / len(inv)
            else:
                grid[i, j] = row["successes"] / row["runs"]
    fig, ax = plt.subplots(figsize=(1.6 * len(tasks) + 3.5, 0.5 * len(settings) + 1.6))
    im = ax.imshow(grid.numpy(), vmin=0, vmax=1, cmap="viridis", aspect="auto")
    for i in range(len(settings)):
        for j in range(len(tasks)):
            row = index.get((tasks[j], settings[i]))
            if row is not None:
                ax.text(j, i, _cell(row).split(" (")[0].replace("inv>=0.9 on ", ""), ha="center", va="center",
                        color="white" if grid[i, j] < 0.6 else "black", fontsize=8)  # fmt: skip
    ax.set_xticks(range(len(tasks)), tasks, rotation=20)
    ax.set_yticks(range(len(settings)), settings)
    fig.colorbar(im, ax=ax, label="seeds (capacity: trunks) meeting the rule")
    ax.set_title("Selection per task and setting (rules in augnet.experiments.selection_rules)")
    return save_figure(fig, path)


def selection_report(config, records: list[dict], out_dir: Path, seconds: float) -> Report:
    """The report of ``records`` (from :func:`~augnet.experiments.selection.run_selection`): table, verdicts, figure."""
    # The runs without the capacity trunks' per-sample scores (their pooled summaries are in "summary").
    runs = [{**r, "trunks": [{k: v for k, v in t.items() if k != "scores"} for t in r["trunks"]]}
            if "trunks" in r else r for r in records]  # fmt: skip
    return report_of_rows(config, summarize(records), runs, out_dir, seconds)


def report_of_rows(config, rows: list[dict], runs: list[dict], out_dir: Path, seconds: float) -> Report:
    """:func:`selection_report` from the summary ``rows`` (:func:`summarize`) and the kept ``runs``.

    A stored table whose rows were trained at different times (one setting trained again) is reported from
    its rows, since the kept runs no longer hold the capacity trunks' per-sample scores.
    """
    settings = list(dict.fromkeys(r["setting"] for r in rows if r["setting"] != ORACLE))
    lines = [f"{len(runs)} runs, {config.seeds} seed(s) per task and setting ({seconds:.0f} s)", *_table(rows), ""]
    verdicts = {}
    for s in settings:
        verdicts[s] = check_rules(rows, s, oracle=ORACLE)
        passed = [ok for ok, _ in verdicts[s].values() if ok is not None]
        lines.append(f"{s}: {'meets every rule' if passed and all(passed) else 'misses a rule'}")
        lines += [f"  {'pass' if ok else 'MISS'} {rule}: {what}" for rule, (ok, what) in verdicts[s].items()]
        early = [f"{r['task']} {r['early']['committed']}/{r['early']['known']}" for r in rows
                 if r["setting"] == s and "early" in r]  # fmt: skip
        if early:
            lines.append(f"  first layer's top weight >= {HOLD_WEIGHT} after {EARLY_EPOCHS} epochs, or a shorter run's "
                         f"last (runs; capacity: trunks): {', '.join(early)}")  # fmt: skip
    figures = []
    with contextlib.suppress(ImportError):  # no matplotlib: numbers only
        figures.append(plot_selection(rows, Path(out_dir) / "selection.png"))
    numbers = {"config": dataclasses.asdict(config), "rules": RULES, "summary": rows, "verdicts": verdicts,
               "runs": runs}  # fmt: skip
    return Report("selection", "\n".join(lines), numbers, figures)
