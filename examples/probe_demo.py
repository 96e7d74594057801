"""Probe the demo's trained AugNet: how invariant is it, and to what?

Trains the model of ``augnet demo`` (about 20 s), then measures the invariance
score (AugNet paper eq. 4: cosine distance, clean baseline) of the AugNet's
output (4 copies) and of its trunk alone, to the transform AugNet selected and
to rotations, at several magnitudes, on 500 test images.

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
        augnet_curve = probes.invariance_curve(model, x, transform, magnitudes, copies=4)
        trunk_curve = probes.invariance_curve(model.trunk, x, transform, magnitudes)
        for i, m in enumerate(magnitudes):
            rng = transform.natural_range(m, (28, 28))
            rows.append((name, m, str(rng), augnet_curve["summary"][i]["median"], trunk_curve["summary"][i]["median"]))
    print(f"{'transform':<10} {'mu':>5} {'range':>10}  {'AugNet (C=4)':>12}  {'trunk alone':>11}")
    for name, m, rng, a, t in rows:
        print(f"{name:<10} {m:>5.2f} {rng:>10}  {a:>12.3f}  {t:>11.3f}")


if __name__ == "__main__":
    torch.set_num_threads(2)
    main()
