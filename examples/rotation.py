"""AugNet on the rotated-sprite task, written out with the public API only.
========================================================================

This is what ``augnet demo`` runs, as a plain training loop you can adapt to
your own trunk and data::

    python examples/rotation.py
    python examples/rotation.py --transforms Rotate   # learn the rotation range alone
    python examples/rotation.py --paper                # the AugNet paper's selection (concepts guide, "Selection")
"""

import argparse

import torch
import torch.nn.functional as F

import augnet
from augnet.data import rotated_sprites
from augnet.experiments.trunks import PaperCNN
from augnet.transforms import image as T


def main():
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--transforms", nargs="+", default=["TranslateX", "TranslateY", "Rotate", "ShearX", "ShearY"])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--lam", type=float, default=0.5, help="weight of the selective regulariser")
    parser.add_argument("--n-train", type=int, default=4000, help="training images (default: %(default)s)")
    parser.add_argument("--paper", action="store_true", help="the paper's selection: the blend, own units")
    args = parser.parse_args()

    torch.manual_seed(0)
    x_train, y_train = rotated_sprites(args.n_train, seed=0)
    x_test, y_test = rotated_sprites(1000, seed=10_000)

    transforms = [getattr(T, name)() for name in args.transforms]
    # augnet's selection by default: sampled training rows, transforms compared by their effect on the trunk
    # (measured by AugNet every 10 steps); --paper: the paper's blend and magnitudes in the transforms' own units.
    layer = augnet.AugmentationLayer(transforms, init_magnitude=0.125, train_mode="mix" if args.paper else "sample")
    trunk = PaperCNN(in_channels=3, classes=4, width=8)
    model = augnet.AugNet(trunk, layer, train_copies=1, eval_copies=4, effect_every=0 if args.paper else 10)
    regularizer = augnet.paper_selective_regularizer if args.paper else augnet.selective_regularizer
    # The augmentation parameters get their own group, with a higher learning rate.
    groups = augnet.param_groups(model, aug_lr=5e-3)
    opt = torch.optim.Adam(groups, lr=5e-4)
    gen = torch.Generator().manual_seed(1)

    for epoch in range(args.epochs):
        model.train()
        order = torch.randperm(len(x_train), generator=gen)
        for i in range(0, len(x_train), 128):
            idx = order[i : i + 128]
            log_probs = model(x_train[idx], generator=gen)  # (B, classes), averaged over copies
            loss = F.nll_loss(log_probs, y_train[idx]) + args.lam * regularizer(model)
            opt.zero_grad()
            loss.backward()
            opt.step()
        top = max(model.policy()[0], key=lambda e: e["weight"])
        print(f"epoch {epoch + 1:>2}: loss {loss.item():.3f}, top transform {top['transform']} ({top['range']})")

    model.eval()
    with torch.no_grad():
        acc = (model(x_test, generator=gen).argmax(1) == y_test).float().mean().item()
    print(f"\ntest accuracy (4 copies): {acc:.3f}\n{model.policy()}")


if __name__ == "__main__":
    main()
