"""Reproducibility as a user who seeds their runs expects it (round "seeds").

- SeenTransformedDataset.set_epoch reaches a DataLoader's persistent workers (they kept the epoch they
  started with and drew every epoch's items as the first's, where ``num_workers=0`` drew afresh).
- fit puts its ``generator`` back when no step succeeds, so a rerun with it trains as a first run would.
- run_method (the versus experiment's one run) leaves torch's global random state as it found it.
- Seeds that torch takes are taken, and the others refused naming ``seed``, by fake_images and the maps' seeds.
"""

import copy
import pickle

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader

from augnet import AugmentationLayer, AugNet
from augnet.probes import SeenTransformedDataset, equivariance_report, fit_equivariance_map
from augnet.probes.inputs import fake_images
from augnet.training import fit
from augnet.transforms import image as T


def _dataset():
    x = torch.rand(8, 3, 6, 6, generator=torch.Generator().manual_seed(0))
    return SeenTransformedDataset(
        (x, torch.zeros(8, dtype=torch.long)), T.Rotate(), [0], p=0.5, seed=1, return_flag=True
    )


def _epochs(loader, ds, epochs=3):
    out = []
    for e in range(epochs):
        ds.set_epoch(e)
        out.append([(xb, flags) for xb, _, flags in loader])
    return out


def test_set_epoch_reaches_persistent_workers():
    ds = _dataset()
    expected = _epochs(DataLoader(ds, batch_size=4), ds)
    assert expected[0][0][1].tolist() != expected[1][0][1].tolist()  # the epochs draw differently
    ds = _dataset()
    got = _epochs(DataLoader(ds, batch_size=4, num_workers=1, persistent_workers=True), ds)
    for want_epoch, got_epoch in zip(expected, got, strict=True):
        for (xw, fw), (xg, fg) in zip(want_epoch, got_epoch, strict=True):
            assert torch.equal(fw, fg)
            assert torch.equal(xw, xg)


def test_dataset_copies_keep_their_epoch_apart():
    ds = _dataset()
    ds.set_epoch(3)
    copied, pickled = copy.deepcopy(ds), pickle.loads(pickle.dumps(ds))
    assert (copied.epoch, pickled.epoch) == (3, 3)
    copied.set_epoch(5)
    pickled.epoch = 6  # assigning sets it, as set_epoch does
    assert (ds.epoch, copied.epoch, pickled.epoch) == (3, 5, 6)
    with pytest.raises(ValueError, match="epoch"):
        ds.set_epoch(2**63)
    assert ds.epoch == 3


def _model():
    torch.manual_seed(0)
    trunk = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(4, 3), nn.LogSoftmax(-1))  # fmt: skip
    return AugNet(trunk, AugmentationLayer([T.Rotate(), T.TranslateX()], init_magnitude=0.1), eval_copies=2)


def _train(model, y, generator):
    x = torch.rand(16, 3, 8, 8, generator=torch.Generator().manual_seed(2))
    fit(model, x, y, torch.optim.SGD(model.parameters(), lr=0.1), 1, 8, generator=generator, record_every=100)


def test_fit_puts_the_generator_back_when_the_first_step_fails():
    y = torch.arange(16) % 3
    fresh = _model()
    _train(fresh, y, torch.Generator().manual_seed(3))
    generator = torch.Generator().manual_seed(3)
    before = generator.get_state()
    again = _model()
    with pytest.raises(RuntimeError):
        _train(again, y.float(), generator)  # float targets: nll_loss refuses them at the first step
    assert torch.equal(generator.get_state(), before)
    _train(again, y, generator)  # the rerun trains as the fresh run did, to the last bit
    for (name, a), b in zip(fresh.state_dict().items(), again.state_dict().values(), strict=True):
        assert torch.equal(a, b), name


def test_run_method_leaves_the_global_random_state():
    from augnet.experiments import versus_methods, versus_tasks

    task = versus_tasks.TASKS["digits"]
    split = versus_tasks.load(task, "small", 0, quick=True)
    torch.manual_seed(123)
    before = torch.get_rng_state()
    first = versus_methods.run_method("none", task, "small", split, 0, quick=True)
    assert torch.equal(torch.get_rng_state(), before)
    second = versus_methods.run_method("none", task, "small", split, 0, quick=True)
    assert first["accuracy"] == second["accuracy"]


def test_fake_images_takes_what_torch_manual_seed_takes():
    for seed in (np.int64(3), -1, 2**64 - 1):  # a NumPy int failed ("an integer is required"); the others as before
        expected = torch.rand(2, 3, 4, 4, generator=torch.Generator().manual_seed(int(seed)))
        assert torch.equal(fake_images(2, 4, seed=seed), expected)


@pytest.mark.parametrize(
    ("seed", "error"),
    [(torch.tensor(3), TypeError), (np.array(3), TypeError), (True, TypeError), (3.0, TypeError), (2**64, ValueError)],
)
def test_fake_images_names_a_bad_seed(seed, error):
    with pytest.raises(error, match="seed"):
        fake_images(2, 4, seed=seed)


@pytest.mark.parametrize("probe", [fit_equivariance_map, equivariance_report])
def test_map_seeds_past_torch_range_are_named(probe):
    z = torch.rand(20, 4, generator=torch.Generator().manual_seed(0))
    z_t = torch.rand(20, 4, generator=torch.Generator().manual_seed(1))
    with pytest.raises(ValueError, match="seed"):
        probe(z, z_t, seed=2**64)
    probe(z, z_t, seed=-1)  # what torch.manual_seed takes still runs
