"""Empty batches (``x.shape[0] == 0``) through every transform: ``apply_transform``, ``forward`` and backward.

Before: ``apply_transform`` on an empty batch (params drawn for its 0 rows) raised MKL's "Inconsistent
configuration parameters" in ``FTSurrogate``, ``FrequencyShift`` and ``BandStop`` (an FFT of no rows), and
``GaussianNoise`` warned of the degrees of freedom of a standard deviation over no rows. Now every transform
gives an empty output of the input's shape and dtype, silently, and a gradient that is zero (or none), never NaN.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from transform_cases import CASES

from augnet.transforms import signal as S
from augnet.transforms import stratified_copies

DTYPES = [torch.float32, torch.float64]
IDS = [c.id for c in CASES]  # every public transform: test_transform_contract checks that CASES covers them


def _empty(case, dtype, grad=False):
    x = case.make(2, dtype)[:0]
    return x.requires_grad_() if grad else x


def _check_empty(out, x):
    assert out.shape == (0, *x.shape[1:]), out.shape
    assert out.dtype == x.dtype


def _check_zero_grads(out, *inputs):
    if not out.requires_grad:  # not in the graph at all: no gradient, and no NaN
        return
    for g in torch.autograd.grad(out.sum(), inputs, allow_unused=True):
        assert g is None or (torch.isfinite(g).all() and not g.any()), g


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("copies", [1, 3])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_apply_transform_on_an_empty_batch_gives_an_empty_output(case, copies, dtype):
    t, x = case.build(), _empty(case, dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for params in (t.sample(x, 0.5, copies=copies), t.draw_params(x, 0.5, copies=copies)):
            _check_empty(t.apply_transform(x, params), x)
        with stratified_copies(copies):
            _check_empty(t.apply_transform(x, t.sample(x, 0.5, copies=copies)), x)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_an_empty_batch_is_silent_with_zero_gradients(case, dtype):
    t = case.build()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for mu in (torch.tensor(0.5, requires_grad=True), torch.zeros(0, requires_grad=True)):
            x = _empty(case, dtype, grad=True)
            out = t.apply_transform(x, t.sample(x, mu))
            _check_empty(out, x)
            _check_zero_grads(out, mu, x)
            x = _empty(case, dtype, grad=True)
            out = t(x, mu)
            _check_empty(out, x)
            _check_zero_grads(out, mu, x)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_an_empty_low_precision_batch_is_silent(case, dtype):
    t, x = case.build(), _empty(case, dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _check_empty(t(x, 0.5, copies=2), x)
        _check_empty(t(x, 0.5, params=t.draw_params(x, 0.5)), x)


def test_gaussian_noise_draws_no_rows_silently():
    x = torch.randn(0, 3, 40)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        noise = S.GaussianNoise().sample(x, 0.5, copies=2)["noise"]
    assert noise.shape == (0, 3, 40) and noise.dtype == x.dtype


@pytest.mark.parametrize("make", [S.FTSurrogate, lambda: S.FrequencyShift(100.0), lambda: S.BandStop(100.0)])
def test_the_fft_transforms_replay_an_empty_batch_in_the_graph(make):
    # The empty output stays in the graph of the params, as the other transforms' does: a zero gradient.
    t, mu = make(), torch.tensor(0.5, requires_grad=True)
    x = torch.randn(0, 2, 32, requires_grad=True)
    out = t.apply_transform(x, t.sample(x, mu))
    assert out.requires_grad
    g_mu, g_x = torch.autograd.grad(out.sum(), (mu, x))
    assert g_mu == 0 and g_x.shape == x.shape


@pytest.mark.parametrize("replay", [False, True], ids=["drawn", "replayed"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_forward_of_no_rows_keeps_the_magnitude_in_the_graph(case, replay):
    # t(x[:0], mu).sum().backward() raised "element 0 of tensors does not require grad": the empty output was cut
    # off from the magnitude (a layer's was not). Now its gradient is 0, as for rows that do not read it.
    t, x = case.build(), _empty(case, torch.float64)
    mu = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
    params = t.draw_params(x, 0.5, copies=2) if replay else None
    out = t(x, mu, params=params, copies=2)
    _check_empty(out, x)
    out.sum().backward()
    assert mu.grad is not None and mu.grad.item() == 0.0
