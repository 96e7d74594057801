"""AugNet under DistributedDataParallel: gloo, 2 processes on this CPU machine.

Each rank trains on its half of a global batch with a generator seeded
``seed + rank`` (:func:`augnet.training.rank_generator`). DDP averages the
gradients, so after every step the augmentation parameters are the same on
both ranks, and the run equals one process that averages the two halves'
losses, each half augmented with its rank's generator.
"""

import os
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch import nn

from augnet import AugmentationLayer, AugNet, selective_regularizer
from augnet.data import rotated_glyphs
from augnet.training import rank_generator
from augnet.transforms import image as T

WORLD, PER_RANK, STEPS, SEED, LAM = 2, 8, 4, 3, 0.5

pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(), reason="needs gloo")


def make_model() -> AugNet:
    torch.manual_seed(0)  # the same initial parameters on every rank (DDP also broadcasts rank 0's)
    trunk = nn.Sequential(  # no batch norm: its statistics would differ between one process and two
        nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(128, 4)
    )
    layer = AugmentationLayer([T.Rotate(), T.TranslateX(), T.ShearX()], init_magnitude=[0.3, 0.2, 0.1])
    # No effect measurements: each rank would measure on its own half (DDP then broadcasts rank 0's buffers
    # at the next forward), the one-process reference on both halves, and the two runs would differ by that.
    return AugNet(trunk, layer, train_copies=2, effect_every=0)


def data():
    x, y = rotated_glyphs(WORLD * PER_RANK * STEPS, size=16, seed=SEED)
    return x.view(STEPS, WORLD, PER_RANK, *x.shape[1:]), y.view(STEPS, WORLD, PER_RANK)


def aug_state(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for n, p in model.named_parameters() if "augment" in n])


def all_state(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def worker(rank: int, port: int, out_dir: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    try:
        model = nn.parallel.DistributedDataParallel(make_model())
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        generator = rank_generator(SEED)
        assert generator.initial_seed() == SEED + rank
        # Each rank draws different augmentations of the same input.
        probe = rotated_glyphs(4, size=16, seed=99)[0]
        drawn = model.module.augment(probe, copies=1, generator=rank_generator(SEED))
        gathered = [torch.empty_like(drawn) for _ in range(WORLD)]
        dist.all_gather(gathered, drawn)
        xs, ys = data()
        aug_after_step = []
        for step in range(STEPS):
            out = model(xs[step, rank], generator=generator)
            loss = F.nll_loss(out, ys[step, rank]) + LAM * selective_regularizer(model)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            state = aug_state(model)
            states = [torch.empty_like(state) for _ in range(WORLD)]
            dist.all_gather(states, state)
            aug_after_step.append(torch.stack(states))
        torch.save(
            {
                "drawn": torch.stack(gathered),
                "aug_after_step": torch.stack(aug_after_step),
                "final": all_state(model.module),
                "policy": model.module.policy().layers_json(),
            },
            os.path.join(out_dir, f"rank{rank}.pt"),
        )
    finally:
        dist.destroy_process_group()


def single_process() -> nn.Module:
    """One process, the same global batches: the mean of the ranks' losses, each half with its rank's draws."""
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    generators = [torch.Generator().manual_seed(SEED + r) for r in range(WORLD)]
    xs, ys = data()
    for step in range(STEPS):
        task = sum(F.nll_loss(model(xs[step, r], generator=generators[r]), ys[step, r]) for r in range(WORLD))
        loss = task / WORLD + LAM * selective_regularizer(model)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return model


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("ddp")
    mp.spawn(worker, args=(free_port(), str(out_dir)), nprocs=WORLD, join=True)
    return [torch.load(out_dir / f"rank{r}.pt", weights_only=True) for r in range(WORLD)]


def test_augmentation_parameters_identical_across_ranks(ranks):
    for r in range(WORLD):
        after = ranks[r]["aug_after_step"]  # (steps, world, parameters), as gathered on rank r
        assert torch.equal(after[:, 0], after[:, 1]), "the ranks' augmentation parameters diverged"
    start = aug_state(make_model())
    assert not torch.allclose(ranks[0]["aug_after_step"][-1, 0], start), "training did not move them"
    torch.testing.assert_close(ranks[0]["final"], ranks[1]["final"], rtol=0, atol=0)
    assert ranks[0]["policy"] == ranks[1]["policy"]


def test_each_rank_draws_different_augmentations(ranks):
    drawn = ranks[0]["drawn"]  # the same input, augmented with rank 0's and rank 1's generators
    assert drawn.shape[0] == WORLD
    assert (drawn[0] - drawn[1]).abs().max() > 1e-3
    torch.testing.assert_close(ranks[0]["drawn"], ranks[1]["drawn"], rtol=0, atol=0)  # all_gather agrees


def test_matches_single_process_on_the_global_batch(ranks):
    reference = all_state(single_process())
    torch.testing.assert_close(ranks[0]["final"], reference, rtol=1e-5, atol=1e-6)
    # and it is not trivially so: training on rank 0's halves alone ends elsewhere.
    assert (ranks[0]["final"] - all_state(make_model())).abs().max() > 1e-3


def test_rank_generator_outside_a_distributed_run():
    assert rank_generator(5).initial_seed() == 5
    with pytest.raises(ValueError, match="seed"):
        rank_generator(-1)
    assert rank_generator(2**64 - 1).initial_seed() == 2**64 - 1  # torch's largest seed
    with pytest.raises(ValueError, match=r"seed 18446744073709551616 \+ rank 0 is past torch's largest seed"):
        rank_generator(2**64)  # torch's own message was 'Overflow when unpacking long long'


def test_torchrun_example(tmp_path):
    """examples/ddp.py runs under torchrun with two processes and writes a loadable checkpoint."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "examples" / "ddp.py"
    out = tmp_path / "ck.pt"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(script)]
    cmd += ["--epochs", "1", "--n-train", "256", "--global-batch", "64", "--out", str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "test accuracy" in done.stdout
    state = torch.load(out, weights_only=True)
    model = make_model()
    assert {k for k in state if k.startswith("augment.")} == {k for k in model.state_dict() if k.startswith("augment.")}


def test_fit_draws_a_ddp_models_augmentations_from_its_generator():
    # fit passes generator= to an AugNet in DDP as to a bare one (it took DDP for a plain model and drew from
    # torch's global generator: ranks seeded alike drew the same augmentations whatever rank_generator gave).
    from augnet.training import fit

    x, y = rotated_glyphs(16, size=16, seed=SEED)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        losses = []
        for seed in (0, 0, 1):
            model = nn.parallel.DistributedDataParallel(make_model())
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            torch.manual_seed(5)  # the global generator alike in every run: only fit's generator differs
            history = fit(model, x, y, opt, 1, 8, generator=torch.Generator().manual_seed(seed), shuffle=False)
            losses.append(history["loss"])
        compiled = torch.compile(nn.parallel.DistributedDataParallel(make_model()), backend="eager")
        with pytest.warns(UserWarning, match="a compiled AugNet draws its augmentations from torch's global"):
            fit(compiled, x, y, torch.optim.SGD(compiled.parameters(), lr=0.1), 1, 8,
                generator=torch.Generator().manual_seed(0))  # fmt: skip
    finally:
        dist.destroy_process_group()
    assert losses[0] == losses[1] and losses[0] != losses[2]


def test_the_example_trains_on_the_cpu_when_a_machine_has_fewer_gpus_than_processes(monkeypatch, capsys):
    # Found on a one-GPU machine: torchrun with two processes gave local rank 1 the GPU cuda:1, which it lacks.
    import runpy
    from pathlib import Path

    example = runpy.run_path(str(Path(__file__).resolve().parents[1] / "examples" / "ddp.py"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setenv("LOCAL_RANK", "0")
    for per_machine, expected in (("1", True), ("2", False)):  # what torchrun --nproc-per-node N sets
        monkeypatch.setenv("LOCAL_WORLD_SIZE", per_machine)
        assert example["gpu_for_each_process"]() is expected
    assert capsys.readouterr().out == "2 processes per machine but 1 GPU(s): training on the CPU (gloo)\n"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert example["gpu_for_each_process"]() is False
