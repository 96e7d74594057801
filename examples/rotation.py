"""AugNet on the rotated-sprite task, written out with the public API only.

This is what ``augnet demo`` runs, as a plain training loop you can adapt to
your own trunk and data:

    python examples/rotation.py
    python examples/rotation.py --transforms Rotate   # learn the rotation range alone
    python examples/rotation.py --magnitude-decay 0    # the paper's method without the magnitude decay
"""

import argparse

import torch
import torch.nn.functional as F

import augnet
from augnet.data import rotated_sprites
from augnet.experiments.trunks import PaperCNN
from augnet.transforms import image as T


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transforms", nargs="+", default=["TranslateX", "TranslateY", "Rotate", "ShearX", "ShearY"])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--lam", type=float, default=0.5, help="weight of the selective regulariser")
    parser.add_argument("--magnitude-decay", type=float, default=1.0, help="weight decay of the magnitudes alone")
    args = parser.parse_args()

    torch.manual_seed(0)
    x_train, y_train = rotated_sprites(4000, seed=0)
    x_test, y_test = rotated_sprites(1000, seed=10_000)

    layer = augnet.AugmentationLayer([getattr(T, name)() for name in args.transforms], init_magnitude=0.125)
    model = augnet.AugNet(PaperCNN(in_channels=3, classes=4, width=8), layer, train_copies=1, eval_copies=4)
    # The augmentation parameters get their own groups: a higher learning rate, and a weight decay on the
    # magnitudes alone, so that a transform keeps its magnitude only while it holds weight (README).
    groups = augnet.param_groups(model, aug_lr=5e-3, magnitude_weight_decay=args.magnitude_decay)
    opt = torch.optim.Adam(groups, lr=5e-4)
    gen = torch.Generator().manual_seed(1)

    for epoch in range(args.epochs):
        model.train()
        order = torch.randperm(len(x_train), generator=gen)
        for i in range(0, len(x_train), 128):
            idx = order[i : i + 128]
            log_probs = model(x_train[idx], generator=gen)  # (B, classes), averaged over copies
            loss = F.nll_loss(log_probs, y_train[idx]) + args.lam * augnet.selective_regularizer(model)
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
