"""User audit W: equivariance_curve's seed and shared signal noise, neuron_invariance's active fraction, and
tap_mix's refusal of a backend that cannot run, for no row as for rows."""

from __future__ import annotations

import pytest
import torch

from augnet.ops import tap_mix
from augnet.ops.dispatch import _BACKENDS
from augnet.probes import equivariance_curve
from augnet.probes.neurons import neuron_invariance
from augnet.transforms.image import Contrast, Rotate
from augnet.transforms.signal import GaussianNoise


class _Recorder:
    """Features = the inputs themselves, flattened; keeps every batch it sees."""

    def __init__(self):
        self.seen = []

    def __call__(self, x):
        self.seen.append(x.clone())
        return x.flatten(1)[:, :4]  # few features: the maps are determined


# --------------------------------------------------------------------------- 1. the seed's range


@pytest.mark.parametrize("seed", [2**63 - 2, 2**64 - 1, -1])
def test_equivariance_curve_refuses_a_seed_out_of_range_before_any_pass(seed):
    phi = _Recorder()
    x = torch.randn(40, 2, 16)
    with pytest.raises(ValueError, match=r"seed must be an int in \[0, 2\*\*63 - 3\].*" + str(seed)):
        equivariance_curve(phi, x, GaussianNoise(), [0.5], seed=seed)
    assert phi.seen == []  # refused up front, not after the clean pass


def test_equivariance_curve_takes_the_largest_seed():
    x = torch.randn(40, 2, 16, generator=torch.Generator().manual_seed(0))
    out = equivariance_curve(lambda a: a.flatten(1)[:, :4], x, GaussianNoise(), [0.5], seed=2**63 - 3)
    assert len(out["equivariance"]) == 1


# --------------------------------------------------------------------------- 2. shared GaussianNoise per signal


def test_shared_gaussian_noise_is_scaled_by_each_signals_own_std():
    g = torch.Generator().manual_seed(0)
    scales = torch.tensor([1.0, 10.0, 0.1, 3.0] * 10)
    x = torch.randn(40, 2, 32, generator=g) * scales[:, None, None]
    phi = _Recorder()
    equivariance_curve(phi, x, GaussianNoise(), [0.5], seed=3, holdout=0.25)
    noise = phi.seen[1] - x
    std = x.flatten(1).std(1, correction=0)
    direction = noise / std[:, None, None]  # the one draw shared by every signal
    assert torch.allclose(direction, direction[:1].expand_as(direction), rtol=1e-4, atol=1e-5)
    # the same noise as the transform gives each signal alone, from the same generator state
    t = GaussianNoise()
    for i in (0, 1, 2):
        alone = t(x[i : i + 1], 0.5, generator=torch.Generator().manual_seed(4))
        assert torch.allclose(phi.seen[1][i : i + 1], alone, rtol=0, atol=1e-6)


def test_shared_gaussian_noise_keeps_the_first_rows_draw():
    x = torch.randn(30, 1, 16, generator=torch.Generator().manual_seed(1)) * 5
    phi = _Recorder()
    equivariance_curve(phi, x, GaussianNoise(), [1.0], seed=0)
    alone = GaussianNoise()(x[:1], 1.0, generator=torch.Generator().manual_seed(1))
    assert torch.equal(phi.seen[1][:1], alone)


@pytest.mark.parametrize("transform", [Contrast(), Rotate()])
def test_other_shared_draws_unchanged(transform):
    """Random-only and data-only parameters are shared as before (one draw; a contrast's mean per image)."""
    x = torch.rand(12, 3, 8, 8, generator=torch.Generator().manual_seed(2))
    phi = _Recorder()
    equivariance_curve(phi, x, transform, [0.7], seed=5, holdout=0.25)
    mag = transform.check_magnitude(0.7, x)
    params = transform.sample(x[:1], mag, generator=torch.Generator().manual_seed(6))
    params = {k: v.expand(len(x), *v.shape[1:]).contiguous() for k, v in params.items()}
    if isinstance(transform, Contrast):
        params["mean"] = transform.sample(x, mag, generator=torch.Generator().manual_seed(0))["mean"]
    assert torch.equal(phi.seen[1], transform.apply_transform(x, params))


# --------------------------------------------------------------------------- 3. active_fraction counts every input


def test_neuron_invariance_active_fraction_counts_every_input_not_only_rows():
    a = torch.tensor([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
    rows = torch.tensor([False, True, True, True])
    full = neuron_invariance(a, a.clone(), tau=0.5)
    some = neuron_invariance(a, a.clone(), tau=0.5, rows=rows)
    assert full["active_fraction"] == some["active_fraction"] == 2 / 16  # the tau statistic, as select_tau's
    assert int(some["n_active"].sum()) == 0  # the means, by contrast, use the rows only
    doc = " ".join(neuron_invariance.__doc__.split())
    assert "``rows`` or not" in doc


# --------------------------------------------------------------------------- 4. tap_mix: a backend that cannot run


def _args(n):
    return (torch.rand(2, 3, 4, 4), torch.zeros(n, 1, dtype=torch.long), torch.eye(2, 3).expand(n, 1, 2, 3).clone(),
            None, torch.ones(n, 1))  # fmt: skip


def _outcome(n, backend):
    try:
        tap_mix(*_args(n), backend=backend)
    except RuntimeError as err:
        return "refused", str(err)
    return "ran", ""


@pytest.mark.parametrize("backend", sorted(_BACKENDS))
def test_tap_mix_no_row_refuses_the_backends_rows_refuse(backend):
    with_rows, message = _outcome(2, backend)
    empty, empty_message = _outcome(0, backend)
    assert empty == with_rows
    assert empty_message == message


@pytest.mark.skipif(torch.cuda.is_available(), reason="a machine without CUDA")
def test_tap_mix_no_row_cuda_on_cpu_only_machine_is_refused():
    with pytest.raises(RuntimeError, match="tap_mix backend 'cuda' is not usable here"):
        tap_mix(*_args(0), backend="cuda")


@pytest.mark.skipif(torch.cuda.is_available(), reason="a machine without CUDA")
def test_tap_mix_no_row_cuda_from_the_environment_is_refused(monkeypatch):
    monkeypatch.setenv("AUGNET_BACKEND", "cuda")
    with pytest.raises(RuntimeError, match="AUGNET_BACKEND"):
        tap_mix(*_args(0), backend="auto")
    monkeypatch.setenv("AUGNET_BACKEND", "auto")
    assert tap_mix(*_args(0), backend="auto").shape == (0, 3, 4, 4)
