"""AugNet on the sinusoid task (AugNet paper, section 4.2).
========================================================

Four classes of noisy sinusoids at 2, 4, 6 and 8 Hz, each frequency jittered by
up to ±0.5 Hz: the labels are invariant to frequency shifts of up to ±0.5 Hz.
One augmentation layer of FrequencyShift (up to ±2 Hz), FTSurrogate (phase
noise up to 0.2 pi) and GaussianNoise (up to 0.1 of the signal's std), the
ranges of the paper's code, around a small 1-D CNN; 50 epochs of Adam
(learning rate 1e-2, weight decay 1e-4), batches of 32, lambda = 0.2, C = 4
copies in training and 10 at test, magnitudes initialised at 0.5.

::

    python examples/sinusoids.py                              # about a minute on 2 cores
    python examples/sinusoids.py --transforms FrequencyShift  # the shift alone
"""

import argparse

from augnet.experiments import SinusoidsConfig, run_sinusoids


def main():
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--transforms", nargs="+", default=list(SinusoidsConfig.transforms))
    parser.add_argument("--layers", type=int, default=1)
    parser.add_argument("--epochs", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    config = SinusoidsConfig(transforms=tuple(args.transforms), layers=args.layers, epochs=args.epochs, seed=args.seed)
    result = run_sinusoids(config, progress=True)
    print(f"\ntest accuracy ({config.eval_copies} copies): {result.test_accuracy:.3f}")
    print(result.policy)


if __name__ == "__main__":
    main()
