"""Which magnitudes do the rotated sprites (or glyphs) tolerate, transform by transform?
=====================================================================================

The selective regulariser favours, in each layer, the transform that reaches
the highest magnitude (in its own [0, 1] units) without hurting the task loss.
This script measures that "admissible" magnitude directly: for each of the
five geometric transforms and a few fixed magnitudes, it trains the demo's
CNN (the paper's 5-layer CNN, width 8) with that single augmentation applied
to every image, then reports the final training loss and the test accuracy
on augmented test images.

::

    python examples/admissible_magnitudes.py                 # sprites, about 4 minutes on 2 cores
    python examples/admissible_magnitudes.py --data glyphs   # the thin-stroke glyphs
    python examples/admissible_magnitudes.py --epochs 2      # a quick look
"""

import argparse
import json

import torch
import torch.nn.functional as F

from augnet.experiments.demo import SIZES, DemoConfig, demo_data, make_trunk
from augnet.transforms import image as T


def train_with(transform, magnitude, x, y, epochs, config, seed=0):
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    net = make_trunk(config)
    opt = torch.optim.Adam(net.parameters(), lr=2e-3)
    for _ in range(epochs):
        order = torch.randperm(len(x), generator=g)
        for i in range(0, len(x), 128):
            idx = order[i : i + 128]
            loss = F.cross_entropy(net(transform(x[idx], magnitude, generator=g)), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    return net.eval(), g


@torch.no_grad()
def main():
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--magnitudes", type=float, nargs="+", default=[0.25, 0.5, 1.0])
    parser.add_argument("--n-train", type=int, default=4000, help="training images (default: %(default)s)")
    parser.add_argument("--data", choices=("sprites", "glyphs"), default="sprites")
    parser.add_argument("--out", default=None, help="optional JSON file for the table")
    args = parser.parse_args()
    config = DemoConfig(data=args.data, size=SIZES[args.data])  # the demo's data and trunk
    x_train, y_train = demo_data(config)(args.n_train, 0)
    x_test, y_test = demo_data(config)(1000, 10_000)
    rows = []
    print(f"{'transform':<11} {'mu':>5} {'range':>12} {'train loss':>11} {'aug. test acc':>14}")
    for cls in T.GEOMETRIC:
        # shifts of up to half the size, twice TranslateX's default range: harmless on these sprites even there
        t = cls(max_shift=0.5) if issubclass(cls, T.TranslateX) else cls()
        for mu in args.magnitudes:
            with torch.enable_grad():
                net, g = train_with(t, mu, x_train, y_train, args.epochs, config)
            loss = F.cross_entropy(net(t(x_train, mu, generator=g)), y_train).item()
            acc = (net(t(x_test, mu, generator=g)).argmax(1) == y_test).float().mean().item()
            rng = str(t.natural_range(mu, (config.size, config.size)))
            rows.append({"transform": cls.__name__, "magnitude": mu, "range": rng, "train_loss": loss, "test_acc": acc})
            print(f"{cls.__name__:<11} {mu:>5.2f} {rng:>12} {loss:>11.4f} {acc:>14.3f}", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
