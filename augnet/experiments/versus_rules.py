"""The verdict of ``augnet reproduce versus``, written before the runs.

Read on the reported seeds (5-9) only (:data:`augnet.experiments.versus.REPORTED_SEEDS`); means and
(population) standard deviations over those seeds.

1. **Small data, images**: on the small regime of every image task, AugNet's test accuracy (its
   default prediction, 4 copies averaged) is at least the best hand-designed policy's (crop,
   RandAugment, TrivialAugmentWide, AutoAugment, AugMix, each as it predicts by default), or
   below it by at most that policy's standard deviation (a tie).
2. **Never below no augmentation**: on every task and regime, AugNet's accuracy is at least that of
   the same trunk without augmentation, less the latter's standard deviation.
3. **Invariance**: on every image task and regime, the invariance of AugNet's logits to the task's
   true transformation (Inv_T at the task's range) is the highest of every method's except the
   per-instance layer's (which is AugNet too).
4. **Commitment**: on every task, in the full regime (10 epochs), AugNet's layer puts a weight of
   at least 0.5 on one transform whose learned range the labels survive (:data:`LABEL_PRESERVING`),
   in every reported seed.
"""

from __future__ import annotations

import math

from augnet.experiments.versus_tasks import TASKS

__all__ = ["LABEL_PRESERVING", "check_rules", "committed"]

#: Per task, the transforms whose learned range the labels survive, with the largest such range
#: (the policy's range bound: degrees, % of size, the shear factor, Hz); ``None``: any range.
LABEL_PRESERVING: dict[str, dict[str, float | None]] = {
    "digits": {"Rotate": 45.0, "TranslateX": 25.0, "TranslateY": 25.0, "ShearX": None, "ShearY": None},
    "sprites": {"Rotate": 60.0, "TranslateX": 25.0, "TranslateY": 25.0, "ShearX": None, "ShearY": None},
    "glyphs": {"Rotate": 60.0, "TranslateX": 25.0, "TranslateY": 25.0, "ShearX": None, "ShearY": None},
    "sinusoids": {"FrequencyShift": 0.8, "FTSurrogate": None, "GaussianNoise": None},
}
_HAND = ("crop", "randaugment", "trivialaugment", "autoaugment", "augmix")


def committed(task: str, policy: dict | None) -> tuple[bool, str]:
    """Whether the first layer of an AugNet's policy (JSON) commits to a label-preserving transform; a summary."""
    if not policy:
        return False, "no policy"
    entries = policy["layers"][0]["transforms"]
    top = max(entries, key=lambda e: e["weight"])
    bound = abs(float(top["range"][1]))
    unit = top["range"][2] if len(top["range"]) > 2 else ""
    if unit == "px":  # a policy states shifts in pixels; the table bounds them in % of the image's size
        bound, unit = 100 * bound / TASKS[task].size, "%"
    allowed = LABEL_PRESERVING[task]
    ok = (
        top["weight"] >= 0.5
        and top["transform"] in allowed
        and (allowed[top["transform"]] is None or bound <= allowed[top["transform"]])
    )
    return ok, f"{top['transform']} w {top['weight']:.2f} ±{bound:.3g}{' %' if unit == '%' else ''}"


def check_rules(summary: dict, records: dict | None = None, seeds=None) -> str:
    """The verdict: one line per rule and task, ``MET`` or ``NOT MET`` with the figures."""
    lines = []
    images = [t for t in summary if t != "sinusoids"]
    for task in images:
        cell = summary[task].get("small", {})
        if "augnet" not in cell:
            continue
        hand = {m: cell[m]["accuracy"] for m in _HAND if m in cell}
        if not hand:  # a table of some methods only: nothing hand-designed to compare with
            continue
        best = max(hand, key=lambda m: hand[m][0])
        a, (b, sd) = cell["augnet"]["accuracy"][0], hand[best][:2]
        lines.append(f"1 {task} small: AugNet {a:.3f} vs best hand-designed {best} {b:.3f} ± {sd:.3f}: "
                     f"{'MET' if a >= b - sd else 'NOT MET'} ({a - b:+.4f})")  # fmt: skip
    for task, regimes in summary.items():
        for regime, cell in regimes.items():
            if "augnet" not in cell or "none" not in cell:
                continue
            a, (n, sd) = cell["augnet"]["accuracy"][0], cell["none"]["accuracy"][:2]
            lines.append(f"2 {task} {regime}: AugNet {a:.3f} vs none {n:.3f} ± {sd:.3f}: "
                         f"{'MET' if a >= n - sd else 'NOT MET'} ({a - n:+.4f})")  # fmt: skip
    for task in images:
        for regime, cell in summary[task].items():
            if "augnet" not in cell:
                continue
            others = {m: c["invariance"][0] for m, c in cell.items() if m not in ("augnet", "instance")}
            if not others:
                continue
            undefined = sorted(m for m, v in others.items() if math.isnan(v))  # max() kept a NaN it met first
            others = {m: v for m, v in others.items() if m not in undefined}
            skipped = f" (skipped, invariance NaN: {', '.join(undefined)})" if undefined else ""
            a = cell["augnet"]["invariance"][0]
            if math.isnan(a) or not others:
                what = "AugNet's invariance is NaN" if math.isnan(a) else "no other method's invariance is defined"
                lines.append(f"3 {task} {regime}: NOT MET, {what}{skipped}")
                continue
            best = max(others, key=others.get)
            lines.append(f"3 {task} {regime}: AugNet's invariance {a:.3f} vs next {best} {others[best]:.3f}: "
                         f"{'MET' if a >= others[best] else 'NOT MET'} ({a - others[best]:+.4f}){skipped}")  # fmt: skip
    if records is not None:
        for task in summary:
            runs = [r for r in records.values() if (r["kind"], r["method"], r["task"], r["regime"])
                    == ("run", "augnet", task, "full") and (seeds is None or r["seed"] in seeds)]  # fmt: skip
            if not runs:
                continue
            results = [committed(task, r["policy"]) for r in sorted(runs, key=lambda r: r["seed"])]
            ok = all(c for c, _ in results)
            lines.append(f"4 {task} full: {'MET' if ok else 'NOT MET'}, {sum(c for c, _ in results)} of "
                         f"{len(results)} seeds ({'; '.join(s for _, s in results)})")  # fmt: skip
    return "\n".join(lines)
