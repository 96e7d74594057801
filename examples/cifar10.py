"""The AugNet paper's CIFAR-10 recipe (section 5.1, appendix A.3), with a DataLoader, on a GPU.
============================================================================================

- Trunk: a pre-activated ResNet-18; the normalisation of the RGB channels is
  its first module, so that the augmentation layers (whose colour
  transforms expect images in [0, 1]) come before it.
- Augmentation: three layers (the five geometric transforms twice, then
  horizontal flip, sample pairing, contrast and brightness), magnitudes
  initialised at 0.5, uniform weights (:func:`augnet.presets.cifar10_augmentation`);
  1 copy in training, 20 at test.
- Training: 300 epochs of batches of 128, Adam with decoupled weight decay
  (AdamW) 2e-2 on the trunk and none on the augmentation, learning rate
  1e-3 for the trunk and :data:`augnet.AUG_LR` (5e-3, ``param_groups``' default)
  for the augmentation, both with cosine annealing over the run, lambda 0.5 for the first 40 epochs
  then 0.05 (:func:`augnet.presets.cifar10_lambda`).
- The learned policy and the losses go to ``--log`` (CSV, and TensorBoard with
  ``--tensorboard``); the final policy to ``--log/policy.json``, a policy file
  that :meth:`augnet.AugmentationModule.from_policy` rebuilds and
  ``Policy.to_torchvision()`` / ``to_kornia()`` hand on.

Nothing is downloaded unless you ask: put torchvision's CIFAR-10 under
``--data`` (or pass ``--download``). ``--fake`` runs the same pipeline on
torchvision's ``FakeData`` (random images, no download), which is what CI
runs for a few steps::

    python examples/cifar10.py --data ~/data/cifar10 --device cuda          # the paper's run (hours on a GPU)
    python examples/cifar10.py --fake --fake-size 64 --epochs 1 --batch 16   # a check of the pipeline (seconds)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

import augnet
from augnet.experiments.trunks import preact_resnet18
from augnet.presets import cifar10_augmentation, cifar10_lambda
from augnet.training import PolicyLogger, accuracy, fit


def datasets(args):
    """Training and test sets of 3x32x32 images in [0, 1] (tensors), CIFAR-10 or FakeData."""
    from torchvision import datasets as tv_datasets
    from torchvision.transforms import v2

    to_tensor = v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])
    if args.fake:
        size = (3, 32, 32)
        train = tv_datasets.FakeData(args.fake_size, size, 10, transform=to_tensor, random_offset=0)
        test = tv_datasets.FakeData(max(args.fake_size // 4, 1), size, 10, transform=to_tensor, random_offset=1)
        return train, test
    root = Path(args.data).expanduser()
    try:
        train = tv_datasets.CIFAR10(root, train=True, transform=to_tensor, download=args.download)
        test = tv_datasets.CIFAR10(root, train=False, transform=to_tensor, download=args.download)
    except RuntimeError as err:
        raise SystemExit(f"cifar10: no CIFAR-10 under {root} ({err}); pass --download or --fake") from err
    return train, test


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--data", default="data/cifar10", help="torchvision's CIFAR-10 folder")
    parser.add_argument("--download", action="store_true", help="let torchvision download CIFAR-10 into --data")
    parser.add_argument("--fake", action="store_true", help="torchvision's FakeData instead (no download)")
    parser.add_argument("--fake-size", type=int, default=256, help="images of FakeData (default: %(default)s)")
    parser.add_argument("--epochs", type=int, default=300)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--width", type=int, default=64, help="ResNet width (the paper's: 64)")
    parser.add_argument("--eval-copies", type=int, default=20)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--amp", action="store_true", help="mixed precision for the trunk")
    parser.add_argument("--workers", type=int, default=0, help="DataLoader worker processes")
    parser.add_argument("--log", default="runs/cifar10", help="folder of the policy log and policy.json")
    parser.add_argument("--overwrite", action="store_true", help="replace the log of an earlier run in --log")
    parser.add_argument("--tensorboard", action="store_true", help="also write TensorBoard event files")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    device = augnet.training.resolve_device(args.device)
    torch.manual_seed(args.seed)
    train, test = datasets(args)
    loader_gen = torch.Generator().manual_seed(args.seed)
    train_loader = DataLoader(train, args.batch, shuffle=True, num_workers=args.workers, generator=loader_gen,
                              pin_memory=device.type == "cuda", drop_last=False)  # fmt: skip
    test_loader = DataLoader(test, 500, num_workers=args.workers)

    model = augnet.AugNet(
        preact_resnet18(classes=10, width=args.width),
        cifar10_augmentation(init_magnitude=0.5),
        train_copies=1,
        eval_copies=args.eval_copies,
    )
    # Decoupled weight decay on the trunk only (AdamW), none on the augmentation parameters.
    groups = augnet.param_groups(model, weight_decay=2e-2, aug_weight_decay=0.0)
    opt = torch.optim.AdamW(groups, lr=args.lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(args.epochs, 1))
    logger = PolicyLogger(args.log, every=50, tensorboard=args.tensorboard, size=(32, 32), overwrite=args.overwrite)
    fit(
        model,
        train_loader,
        None,
        opt,
        args.epochs,
        lam=cifar10_lambda(),
        generator=torch.Generator(device).manual_seed(args.seed + 1),
        loss_fn=F.nll_loss,
        device=device,
        amp=args.amp,
        scheduler=sched,
        callbacks=[logger],
        progress=True,
        desc="cifar10",
    )
    acc = accuracy(model, test_loader, generator=torch.Generator(device).manual_seed(args.seed + 2))
    policy = model.policy((32, 32))
    Path(args.log, "policy.json").write_text(json.dumps(policy.to_json(), indent=1))
    print(f"\ntest accuracy with {args.eval_copies} copies: {acc:.4f}\n{policy}\nsaved {args.log}/policy.json")
    return acc


if __name__ == "__main__":
    main()
