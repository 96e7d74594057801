"""Where AugNet's default prediction misses on the full sinusoids, and how the misses move with the copies.

Trains the comparison's AugNet (``augnet reproduce versus``'s ``augnet`` method, the README's first
model) on one seed of the full sinusoids, lists the test signals its prediction with 4 independent
copies (``AugNet(stratify=False)``, the default before stratified copies) gets wrong with their
frequency, then scores the same trained model averaging 4, 16 and 64 independent copies and 4
stratified ones (``stratify=True``, the default now; five draws each) and its trunk alone. Prints
and saves the figures::

    python benchmarks/versus_sinusoid_misses.py [--seed 5] [--out benchmarks/results/...]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from augnet import data as D
from augnet.experiments import versus_methods as VM
from augnet.experiments.versus_tasks import SFREQ, TASKS, load

COPIES = (4, 16, 64)
DRAWS = 5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "versus_sinusoid_misses.json"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    task, seed = TASKS["sinusoids"], args.seed
    split = load(task, "full", seed)
    _, _, freq = D.sinusoids(task.n_test, seed=seed + 10_000, sfreq=SFREQ, return_freq=True)  # load()'s test set
    built = {}
    build = VM._build

    def keep(method, task_, fixed):  # the comparison's own model, kept to score it again
        out = build(method, task_, fixed)
        built["model"] = out[0]
        return out

    VM._build = keep
    try:
        record = VM.run_method("augnet", task, "full", split, seed)
    finally:
        VM._build = build
    model = built["model"]
    model.stratify = False  # independent copies: what the comparison recorded before stratified copies
    default = VM._log_probs(model, split.x_test, generator=torch.Generator().manual_seed(seed + 2))
    wrong = (default.argmax(1) != split.y_test).nonzero().flatten().tolist()
    misses = [{"index": i, "label": int(split.y_test[i]), "frequency_hz": float(freq[i]),
               "predicted": int(default[i].argmax())} for i in wrong]  # fmt: skip
    by_copies = {
        c: [VM._accuracy(VM._log_probs(model, split.x_test, c, torch.Generator().manual_seed(100 + k)), split.y_test)
            for k in range(DRAWS)]
        for c in COPIES
    }  # fmt: skip
    model.stratify = True
    stratified = [VM._accuracy(VM._log_probs(model, split.x_test, 4, torch.Generator().manual_seed(100 + k)),
                               split.y_test) for k in range(DRAWS)]  # fmt: skip
    model.eval()
    with torch.no_grad():
        trunk = float((model.trunk(split.x_test).argmax(1) == split.y_test).float().mean())
    top = max(record["policy"]["layers"][0]["transforms"], key=lambda e: e["weight"])
    independent = VM._accuracy(default, split.y_test)
    result = {"seed": seed, "accuracy": record["accuracy"], "accuracy_4_independent": independent,
              "policy_top": top, "misses": misses, "accuracy_by_copies": by_copies,
              "accuracy_4_stratified": stratified, "trunk_alone": trunk}  # fmt: skip
    print(f"seed {seed}: accuracy {record['accuracy']:.4f} (4 stratified copies, as recorded), "
          f"{result['accuracy_4_independent']:.4f} (4 independent); {top['transform']} w {top['weight']:.2f} "
          f"±{top['range'][1]:.3g} {top['range'][2]}")  # fmt: skip
    for m in misses:
        print(f"  missed: class {m['label']} at {m['frequency_hz']:.3f} Hz, predicted {m['predicted']}")
    for c, accs in by_copies.items():
        print(f"  {c:>2} copies, {DRAWS} draws: " + " ".join(f"{a:.3f}" for a in accs))
    print(f"   4 stratified copies, {DRAWS} draws: " + " ".join(f"{a:.3f}" for a in stratified))
    print(f"  trunk alone: {trunk:.3f}")
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
