"""Probe the demo's trained AugNet: how invariant is it, and to what?
==================================================================

Trains the model of ``augnet demo`` (about a minute), then measures the
invariance score (AugNet paper eq. 4: cosine distance, clean baseline, median
over 500 test images) of the AugNet (4 copies) and of its trunk alone, to the
transform AugNet selected and to one it did not (ShearX, or Rotate when a
shear won), at several magnitudes. Both are read in the
same space, the activations before the softmax (the paper's footnote): the
trunk's logits, and the AugNet's trunk logits averaged over its copies. The
AugNet is probed twice: with its clean and transformed passes sharing its own
augmentation draws (they then differ only by the probed transformation), and
with independent draws (two calls of the model in use: its own augmentation
noise counts too).

::

    python examples/probe_demo.py
    python examples/probe_demo.py --quick   # a short training, to check the setup
"""

import argparse

import torch

from augnet import probes
from augnet.experiments.demo import DemoConfig, demo_data, run_demo
from augnet.transforms import image as T


def main(config: DemoConfig | None = None, n_probe: int = 500) -> list[tuple]:
    """Train ``config`` (default: the demo's), print the table and return its rows."""
    config = config or DemoConfig()
    result = run_demo(config, progress=False)
    print(result.policy, "\n")
    model = result.model.eval()
    x, _ = demo_data(config)(n_probe, 20_000)  # test images of the demo's task, unseen in training
    other = "ShearX" if result.winner() == "Rotate" else "Rotate"
    magnitudes = [0.0, 0.25, 0.5, 1.0]
    rows = []
    for name in (result.winner(), other):
        transform = getattr(T, name)()
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
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short training (1 epoch, 256 images), 50 probe images")
    args = parser.parse_args()
    torch.set_num_threads(2)
    if args.quick:
        main(DemoConfig(epochs=1, n_train=256, n_test=64), n_probe=50)
    else:
        main()
