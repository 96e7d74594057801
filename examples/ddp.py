"""Train an AugNet with DistributedDataParallel, on one machine or several, with torchrun.
=======================================================================================

Without torchrun, ``python examples/ddp.py`` runs the same code as a group of
one process.

One machine, two processes (CPU, gloo)::

    torchrun --standalone --nproc-per-node 2 examples/ddp.py --epochs 5

Several machines (run on each; NODE_RANK is 0 on the first, 1 on the second, ...)::

    torchrun --nnodes 2 --node-rank $NODE_RANK --nproc-per-node 8 \\
        --rdzv-backend c10d --rdzv-endpoint first-machine:29500 examples/ddp.py

On GPUs each process uses the GPU of its local rank and the nccl backend; with
fewer GPUs than processes on a machine, all train on the CPU (gloo), and say so.
Each machine decides for itself: across machines, give each as many processes
as it has GPUs (or none), so that every process takes the same backend.

What matters for AugNet under DDP:

* The augmentation weights and magnitudes are ordinary parameters: DDP
  averages their gradients like the trunk's, so they stay identical on every
  rank (tests/test_ddp.py checks it), and the regulariser is added on every
  rank as in one process.
* Each rank must draw *different* augmentations: seed its generator with
  ``seed + rank`` (:func:`augnet.training.rank_generator`). With one seed
  everywhere, the ranks would apply the same draws to different samples.
* Each rank trains on its own shard of every global batch; the run then equals
  one process that averages the shards' losses.
* Avoid batch norm in the trunk, or convert it with
  ``nn.SyncBatchNorm.convert_sync_batchnorm``, if you need results that do not
  depend on the number of processes.
"""

import argparse
import os
import tempfile

import torch
import torch.distributed as dist
import torch.nn.functional as F

from augnet import AugmentationLayer, AugNet, param_groups, selective_regularizer
from augnet.data import rotated_glyphs
from augnet.experiments.trunks import SmallCNN
from augnet.training import accuracy, rank_generator
from augnet.transforms import image as T


def gpu_for_each_process() -> bool:
    """Whether each process of this machine gets a GPU of its own (nccl refuses two processes on one GPU, and a
    local rank past the GPUs has none); if GPUs are there but too few, the first process says it trains on the CPU.
    """
    per_machine = int(os.environ.get("LOCAL_WORLD_SIZE", 1))
    if not torch.cuda.is_available():
        return False
    if torch.cuda.device_count() >= per_machine:
        return True
    if int(os.environ.get("LOCAL_RANK", 0)) == 0:
        print(f"{per_machine} processes per machine but {torch.cuda.device_count()} GPU(s): training on the CPU (gloo)")
    return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--n-train", type=int, default=4000)
    parser.add_argument("--global-batch", type=int, default=128, help="summed over the ranks")
    parser.add_argument("--lam", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="ddp_checkpoint.pt")
    args = parser.parse_args()

    cuda = gpu_for_each_process()
    if "RANK" in os.environ:  # started by torchrun
        dist.init_process_group("nccl" if cuda else "gloo")
    else:  # plain `python examples/ddp.py`: a group of one process, nothing opened but a temporary file
        store = os.path.join(tempfile.mkdtemp(), "store")
        dist.init_process_group("nccl" if cuda else "gloo", init_method=f"file://{store}", rank=0, world_size=1)
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    if args.global_batch % world:
        raise SystemExit(f"--global-batch {args.global_batch} is not divisible by the {world} processes")

    # The same data and initial parameters on every rank (DDP broadcasts rank 0's parameters anyway).
    torch.manual_seed(args.seed)
    x, y = rotated_glyphs(args.n_train, seed=args.seed)
    transforms = [T.TranslateX(), T.TranslateY(), T.Rotate(), T.ShearX(), T.ShearY()]
    layer = AugmentationLayer(transforms, init_magnitude=1 / 8)
    model = AugNet(SmallCNN(1, 4), layer).to(device)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank] if cuda else None)
    opt = torch.optim.Adam(param_groups(model, aug_lr=5e-3), lr=5e-4)

    order_generator = torch.Generator().manual_seed(args.seed)  # the same batch order on every rank
    aug_generator = rank_generator(args.seed, device)  # different augmentations on every rank
    per_rank = args.global_batch // world
    for epoch in range(args.epochs):
        order = torch.randperm(len(x), generator=order_generator)
        for i in range(0, len(x) - args.global_batch + 1, args.global_batch):
            idx = order[i + rank * per_rank : i + (rank + 1) * per_rank]
            xb, yb = x[idx].to(device), y[idx].to(device)
            loss = F.nll_loss(ddp(xb, generator=aug_generator), yb) + args.lam * selective_regularizer(model)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        if rank == 0:
            print(f"epoch {epoch + 1}: loss {float(loss.detach()):.3f}")

    if rank == 0:
        x_test, y_test = rotated_glyphs(1000, seed=args.seed + 10_000)
        acc = accuracy(model, x_test.to(device), y_test.to(device), generator=torch.Generator(device).manual_seed(1))
        print(model.policy())
        print(f"test accuracy {acc:.3f}; checkpoint: {args.out}")
        torch.save(model.state_dict(), args.out)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
