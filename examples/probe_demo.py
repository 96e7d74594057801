"""Probe the demo's trained AugNet: how invariant is it, and to what?

Trains the model of ``augnet demo`` (about 20 s), then measures the invariance
score (AugNet paper eq. 4: cosine distance, clean baseline, median over 500
test images) of the AugNet (4 copies) and of its trunk alone, to the transform
AugNet selected and to rotations, at several magnitudes. Both are read in the
same space, the activations before the softmax (the paper's footnote): the
trunk's logits, and the AugNet's trunk logits averaged over its copies. The
AugNet is probed twice: with its clean and transformed passes sharing its own
augmentation draws (they then differ only by the probed transformation), and
with independent draws (two calls of the model in use: its own augmentation
noise counts too).

    python examples/probe_demo.py
"""

import torch

from augnet import probes
from augnet.data import rotated_glyphs
from augnet.experiments.demo import DemoConfig, run_demo
from augnet.transforms import image as T


def main():
    result = run_demo(DemoConfig(), progress=False)
    print(result.policy, "\n")
    model = result.model.eval()
    x, _ = rotated_glyphs(500, seed=20_000)
    selected = getattr(T, result.winner())()
    magnitudes = [0.0, 0.25, 0.5, 1.0]
    rows = []
    for name, transform in ((result.winner(), selected), ("Rotate", T.Rotate())):
        shared = probes.invariance_curve(model, x, transform, magnitudes, copies=4)
        independent = probes.invariance_curve(model, x, transform, magnitudes, copies=4, draws="independent")
        trunk_curve = probes.invariance_curve(model.trunk, x, transform, magnitudes)
        for i, m in enumerate(magnitudes):
            rng = transform.natural_range(m, tuple(x.shape[2:]))
            medians = [c["summary"][i]["median"] for c in (shared, independent, trunk_curve)]
            rows.append((name, m, str(rng), *medians))
    print(f"AugNet: {shared['features']}; trunk: {trunk_curve['features']}\n")
    header = ("transform", "mu", "range", "AugNet, shared", "AugNet, independent", "trunk")
    print("{:<10} {:>5} {:>10}  {:>14}  {:>19}  {:>6}".format(*header))
    for name, m, rng, a, b, t in rows:
        print(f"{name:<10} {m:>5.2f} {rng:>10}  {a:>14.3f}  {b:>19.3f}  {t:>6.3f}")


if __name__ == "__main__":
    torch.set_num_threads(2)
    main()
