"""Changes of the selective regulariser tried for the small digits, on the tuning seeds.

On the comparison's small digits (``augnet reproduce versus``) AugNet's layer commits to Rotate
(weight about 0.8) and the shifts that the clean test set rewards keep a weight of about 0.05 each
at a range of a third of a pixel: the selective regulariser's pull on a magnitude grows with the
square of the transform's weight, while the training loss's push on it grows with the weight, so
the magnitudes of the transforms a layer does not choose fall to the identity. Two changes that
give every magnitude a pull in proportion to its weight, added to the default
``selective_regularizer`` (phi: its saturating magnitude, e: the measured effects):

- ``use``: :math:`-\\beta \\sum_q \\mathrm{sg}(w_q)\\, e_q \\phi(\\mu_q)` (the weights untouched);
- ``linear``: :math:`-\\beta \\sum_q w_q e_q \\phi(\\mu_q)` (the expected effect; it also moves the weights).

And one that replaces the default's pull on the magnitudes instead of adding to it:

- ``each``: the weights get the default's gradient, :math:`-\\| w \\odot e \\odot \\mathrm{sg}(\\phi(\\mu)) \\|`,
  and each magnitude is pulled by :math:`-\\beta \\sum_q \\mathrm{sg}(w_q) e_q \\phi(\\mu_q)`, in proportion to
  its own weight, as the training loss pushes on it (the rows that draw it): where the pull and the push meet
  then no longer depends on the weight, and for a committed transform the pull is about the default's.

The default and ``each`` also with the weights held uniform (``frozen``: every transform on a fifth of the
rows), to see what the magnitudes learn, and what it buys, when the layer keeps every transform.

Each trains the comparison's AugNet (``versus_methods.run_method``) on the small digits, seeds 0-4
(the tuning seeds). Chooses nothing (none was found to help; the reproducing guide); prints
and saves the figures::

    python benchmarks/versus_digits_pulls.py [--seeds 0 1 2 3 4] [--out benchmarks/results/...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from augnet.experiments import versus_methods as VM
from augnet.experiments.versus_tasks import TASKS, load
from augnet.regularizers import _augmentations, _layer_policy, saturate, selective_regularizer

VARIANTS = (
    ("default", 0.0, False), ("use", 0.25, False), ("use", 0.5, False), ("use", 1.0, False), ("linear", 0.5, False),
    ("linear", 1.0, False), ("each", 1.0, False), ("default", 0.0, True), ("each", 1.0, True),
)  # fmt: skip


def regularizer(kind: str, beta: float):
    """The default selective regulariser plus ``kind``'s term times ``beta`` (see the module docstring)."""

    def reg(model):
        if kind == "each":
            terms = []
            for layer in _augmentations(model, lie=False):
                w, mu = _layer_policy(layer)
                phi = saturate(mu)
                e = layer.effect.to(mu)
                terms.append(-(w * e * phi.detach()).norm() - beta * (w.detach() * e * phi).sum())
            return torch.stack(terms).sum()
        base = selective_regularizer(model)
        if kind == "default":
            return base
        terms = []
        for layer in _augmentations(model, lie=False):
            w, mu = _layer_policy(layer)
            v = layer.effect.to(mu) * saturate(mu)
            terms.append(((w.detach() if kind == "use" else w) * v).sum())
        return base - beta * torch.stack(terms).sum()

    return reg


def run(kind: str, beta: float, frozen: bool, seed: int) -> dict:
    build = VM._build

    def patched(method, task, fixed):
        model, opt, kwargs, augment = build(method, task, fixed)
        if frozen:  # the weights stay uniform: the optimiser skips a parameter without a gradient
            for layer in _augmentations(model, lie=False):
                layer.weight_logits.requires_grad_(False)
        return model, opt, {**kwargs, "regularizer": regularizer(kind, beta)}, augment

    VM._build = patched
    try:
        task = TASKS["digits"]
        record = VM.run_method("augnet", task, "small", load(task, "small", seed), seed)
    finally:
        VM._build = build
    entries = {e["transform"]: e for e in record["policy"]["layers"][0]["transforms"]}
    size = task.size
    return {
        "kind": kind, "beta": beta, "frozen": frozen, "seed": seed, "accuracy": record["accuracy"],
        "accuracy_shift": record["accuracy_shift"], "invariance": record["invariance"],
        "rotate_weight": entries["Rotate"]["weight"], "rotate_degrees": entries["Rotate"]["range"][1],
        "shift_weight": entries["TranslateX"]["weight"] + entries["TranslateY"]["weight"],
        "shift_percent": 100 * max(entries[k]["range"][1] for k in ("TranslateX", "TranslateY")) / size,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "versus_digits_pulls.json"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    start, runs, summary = time.perf_counter(), [], []
    for kind, beta, frozen in VARIANTS:
        mine = [run(kind, beta, frozen, seed) for seed in args.seeds]
        runs += mine
        row = {"kind": kind, "beta": beta, "frozen": frozen}
        for key in ("accuracy", "accuracy_shift", "invariance", "rotate_weight", "rotate_degrees", "shift_weight",
                    "shift_percent"):  # fmt: skip
            row[key] = statistics.fmean(r[key] for r in mine)
        row["rotate_degrees_range"] = [min(r["rotate_degrees"] for r in mine), max(r["rotate_degrees"] for r in mine)]
        summary.append(row)
        uniform = ", weights uniform" if frozen else ""
        print(f"{kind} beta {beta}{uniform}: accuracy {row['accuracy']:.3f}, rotated {row['accuracy_shift']:.3f}, "
              f"invariance {row['invariance']:.3f}; Rotate w {row['rotate_weight']:.2f} at "
              f"±{row['rotate_degrees_range'][0]:.0f}-{row['rotate_degrees_range'][1]:.0f}°, shifts w "
              f"{row['shift_weight']:.2f} at ±{row['shift_percent']:.1f} % ({time.perf_counter() - start:.0f} s)",
              flush=True)  # fmt: skip
    payload = {"seeds": args.seeds, "summary": summary, "runs": runs}
    Path(args.out).write_text(json.dumps(payload, indent=1) + "\n")
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
