"""run_experiment, the public runner under the demo and the sinusoids: torch's thread count and global random
state come back after a run as they were (it left config.threads and torch.manual_seed(config.seed) behind)."""

from __future__ import annotations

import dataclasses

import torch

from augnet import AugNet
from augnet.data import sinusoids
from augnet.experiments import run_experiment
from augnet.experiments.sinusoids import SinusoidsConfig, sinusoid_layer
from augnet.experiments.trunks import MLP


def _tiny():
    config = dataclasses.replace(SinusoidsConfig(), epochs=1, n_train=16, n_test=8, batch_size=8, threads=1)

    def build(x):
        return AugNet(MLP(1, 4, in_features=x.shape[-1]), sinusoid_layer(config, 100.0), 2, 2)

    return config, (lambda n, seed: sinusoids(n, seed=seed)), build


def test_run_experiment_puts_back_threads_and_the_global_generator():
    config, data, build = _tiny()
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        torch.manual_seed(1234)
        want = torch.rand(3)
        torch.manual_seed(1234)
        first = run_experiment(config, data, build, desc="tiny")
        assert torch.get_num_threads() == 2
        assert torch.equal(torch.rand(3), want)  # the caller's stream goes on where it was
        second = run_experiment(config, data, build, desc="tiny")
        assert first.test_accuracy == second.test_accuracy  # (its own seeds: the same run)
        a, b = first.model.state_dict(), second.model.state_dict()
        assert all(torch.equal(a[k], b[k]) for k in a)
    finally:
        torch.set_num_threads(threads)
