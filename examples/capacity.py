"""Invariance against model capacity on the sinusoid task (AugNet paper, section 4.3, Fig. 5).
===========================================================================================

Four classes of noisy sinusoids (2, 4, 6, 8 Hz, each jittered by up to ±0.5 Hz):
the labels are invariant to frequency shifts of up to ±0.5 Hz. Small MLPs of
several widths and depths on the raw 1000-sample signal are trained three ways:

- baseline: the MLP on the raw data;
- oracle:   the MLP on batches shifted by the true invariance (±0.5 Hz);
- AugNet:   the MLP as the trunk of an AugNet with one augmentation layer
            (lambda 0.8, magnitudes initialised at 0.05, C = 10 copies at test).
            By default the layer holds the paper's three candidates; with
            ``--augnet-transforms FrequencyShift`` it holds the shift alone (what
            the paper's official script trains for this figure).

Each model is scored by its test accuracy and the median invariance score
(AugNet eq. 4: cosine distance, clean baseline) of its output to a ±0.5 Hz shift.
This script is the experiment written out with the public API; ``augnet reproduce
capacity`` runs the full version (several seeds, both AugNets, figures).

::

    python examples/capacity.py --quick
    python examples/capacity.py --augnet-transforms FrequencyShift
"""

import argparse

import torch
import torch.nn.functional as F

import augnet
from augnet import probes
from augnet.data import sinusoids
from augnet.experiments.trunks import MLP
from augnet.training import fit
from augnet.transforms import signal as S

SFREQ = 100.0


def train_plain(model, x, y, epochs, shift=None, seed=1):
    """Cross-entropy training; with ``shift``, every batch is frequency-shifted (the oracle augmentation)."""
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, weight_decay=1e-4)
    oracle = None if shift is None else (lambda xb, g: shift(xb, 1.0, generator=g))
    fit(model, x, y, opt, epochs, 32, lam=0.0, regularizer="none", generator=torch.Generator().manual_seed(seed),
        loss_fn=F.cross_entropy, augment_batch=oracle)  # fmt: skip
    return model.eval()


def train_augnet(trunk, x, y, epochs, transforms, seed=1):
    candidates = {
        "FrequencyShift": S.FrequencyShift(SFREQ, max_shift=2.0),
        "FTSurrogate": S.FTSurrogate(max_phase=0.2 * torch.pi),
        "GaussianNoise": S.GaussianNoise(max_std=0.1),
    }
    layer = augnet.AugmentationLayer([candidates[t] for t in transforms], init_magnitude=0.05)
    model = augnet.AugNet(trunk, layer, train_copies=1, eval_copies=10)
    opt = torch.optim.Adam(augnet.param_groups(model, weight_decay=1e-4, aug_lr=1e-2), lr=1e-2)
    fit(model, x, y, opt, epochs, 32, lam=0.8, generator=torch.Generator().manual_seed(seed))
    return model.eval()


@torch.no_grad()
def score(model, x, y):
    """Test accuracy and median (25 / 75 %) invariance of the pre-softmax output to ±0.5 Hz shifts."""
    true_shift = S.FrequencyShift(SFREQ, max_shift=0.5)
    if isinstance(model, augnet.AugNet):
        acc = float((model(x, generator=torch.Generator().manual_seed(0)).argmax(1) == y).float().mean())
        model.aggregation = "mean"  # average the trunk's logits over the copies, for the probe
        curve = probes.invariance_curve(model, x, true_shift, [1.0], copies=10, seed=0)
        model.aggregation = "log_softmax"
    else:
        acc = float((model(x).argmax(1) == y).float().mean())
        curve = probes.invariance_curve(model, x, true_shift, [1.0], seed=0)
    return acc, curve["summary"][0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--quick", action="store_true", help="two widths, two depths, 25 epochs")
    parser.add_argument("--widths", type=int, nargs="+", default=[4, 16, 64])
    parser.add_argument("--depths", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--epochs", type=int, default=50)
    parser.add_argument("--augnet-transforms", nargs="+", default=["FrequencyShift", "FTSurrogate", "GaussianNoise"])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.quick:
        args.widths, args.depths, args.epochs = [4, 64], [1, 3], 25
    torch.set_num_threads(1)  # tiny models: a second thread only adds overhead

    x_train, y_train = sinusoids(400, seed=args.seed)
    x_test, y_test = sinusoids(200, seed=args.seed + 10_000)
    oracle = S.FrequencyShift(SFREQ, max_shift=0.5)
    print(f"{'trunk':>6}  {'method':<8}  accuracy  invariance median [25%, 75%]  policy")
    for depth in args.depths:
        for width in args.widths:
            for method in ("baseline", "oracle", "augnet"):
                torch.manual_seed(args.seed)  # the same initial MLP for the three methods
                trunk = MLP(width, depth)
                if method == "augnet":
                    model = train_augnet(trunk, x_train, y_train, args.epochs, args.augnet_transforms)
                    policy = max(model.policy()[0], key=lambda e: e["weight"])
                    note = f"{policy['transform']} (mu {policy['magnitude']:.2f})"
                else:
                    model = train_plain(trunk, x_train, y_train, args.epochs, oracle if method == "oracle" else None)
                    note = ""
                acc, inv = score(model, x_test, y_test)
                print(
                    f"{depth}x{width:<4}  {method:<8}  {acc:8.3f}  "
                    f"{inv['median']:6.3f} [{inv['p25']:6.3f}, {inv['p75']:6.3f}]       {note}"
                )


if __name__ == "__main__":
    main()
