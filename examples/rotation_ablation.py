"""Learned rotation range of AugNet, Augerino and two ablations (AugNet paper, Figures 3a and 4).
==============================================================================================

On the demo's rotated sprites (labels invariant to rotations of up to ±45
degrees), with the demo's data, trunk (the paper's 5-layer CNN) and schedule
(4000 images, 20 epochs, batches of 128, magnitudes initialised at 1/8), train:

1. AugNet with the selective regulariser (lambda 0.5): the demo itself, with
   its weight decay on the magnitudes alone;
2. Augerino around the same CNN (Adam, learning rate 1e-2, no weight decay,
   lambda 0.05, widths initialised at pi/8: the paper's settings);
3. AugNet without a regulariser (the paper's method, no magnitude decay);
4. AugNet with Augerino's regulariser -||mu||_2 (lambda 0.5; the same);
5. Augerino with AugNet's lambda, 0.5 (its sensitivity to lambda);

and the plain CNN without augmentation as a reference. Prints each model's
final policy, rotation range and test accuracy, and the median invariance
score (cosine, clean baseline) of its logits to rotations of ±45 degrees;
writes the figures under --out.

::

    python examples/rotation_ablation.py            # about 5 minutes on 2 cores
    python examples/rotation_ablation.py --quick    # about 2 minutes
"""

import argparse
from pathlib import Path

import torch

from augnet.experiments.rotation import LABELS, RotationConfig, plot_rotation_ranges, quick_config, run_rotation
from augnet.viz import plot_policy_history


def show(result, out: Path) -> None:
    """Print every run's policy, rotation range, accuracy and invariance; write the figures under ``out``."""
    for name, run in result.runs.items():
        print(
            f"\n{LABELS[name]}: test accuracy {run.test_accuracy:.3f}, "
            f"invariance to ±45 deg {result.invariance_median(name):.3f}"
        )
        for e in run.policy[0] if run.policy else []:
            _, high, unit = e["range"]
            if run.is_augerino:  # one entry per Lie generator, its width as the magnitude
                print(f"  {e['transform']:<12} width {e['magnitude']:.3f}")
            else:
                print(
                    f"  {e['transform']:<11} weight {e['weight']:.3f}  magnitude {e['magnitude']:.3f}  "
                    f"range ±{high:.3g} {unit}".rstrip()
                )
        if run.rotation_deg is not None:
            print(f"  rotation range ±{run.rotation_deg:.1f} deg")

    out.mkdir(parents=True, exist_ok=True)
    plot_rotation_ranges(result, out / "rotation_range.png")
    for name, run in result.runs.items():
        if run.policy and not run.is_augerino:
            names = [e["transform"] for e in run.policy[0]]
            plot_policy_history(run.history, names, out / f"rotation_policy_{name}.png", title=LABELS[name])
    print(f"\nfigures in {out}/")


def main():
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--quick", action="store_true", help="2000 images, 10 epochs")
    parser.add_argument("--tiny", action="store_true", help="128 images, 2 epochs: a smoke run (the docs build's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--augerino-lr", type=float, default=1e-2)
    parser.add_argument("--augerino-lam", type=float, default=0.05)
    parser.add_argument("--out", default="rotation-ablation")
    args = parser.parse_args()
    config = quick_config(args.seed) if args.quick else RotationConfig(seed=args.seed)
    if args.tiny:
        config = RotationConfig(n_train=128, n_test=64, epochs=2, batch_size=32, n_probe=32, width=2, seed=args.seed)
    config.augerino_lr, config.augerino_lam = args.augerino_lr, args.augerino_lam
    show(run_rotation(config, progress=True), Path(args.out))


if __name__ == "__main__":
    torch.set_num_threads(2)
    main()
