"""The transform contract, as reusable checks.

Every augnet transform must satisfy these, whatever its input kind. Each
check takes the transform and ``make(b, dtype)``, a function returning a batch
of ``b`` valid inputs, and raises ``AssertionError`` on a violation.
"""

import torch
from helpers import TOL, gen


def identity_at_zero(t, make, copies=1):
    """Magnitude 0 is the identity (also for every copy)."""
    x = make(5, torch.float64)
    out = t(x, 0.0, generator=gen(1), copies=copies)
    torch.testing.assert_close(out, x.repeat(copies, *[1] * (x.dim() - 1)), atol=1e-10, rtol=0)


def replay(t, make):
    """The same params give the same output; the same seed draws the same params."""
    x = make(16, torch.float32)
    params = t.sample(x, 0.7, generator=gen(3), copies=2)
    a = t(x, 0.7, params=params, copies=2)
    assert torch.equal(a, t.apply_transform(x, params))
    again = t.sample(x, 0.7, generator=gen(3), copies=2)
    assert params.keys() == again.keys() and all(torch.equal(params[k], again[k]) for k in params)
    assert not torch.allclose(a, t(x, 0.7, generator=gen(4), copies=2)), "another seed must draw other params"


def input_not_modified(t, make):
    """Forward and backward leave the input as it was."""
    x = make(5, torch.float32).requires_grad_()
    before = x.detach().clone()
    mag = torch.tensor(0.6, requires_grad=True)
    t(x, mag, generator=gen(0), copies=2).square().sum().backward()
    assert torch.equal(x.detach(), before)


def dtype_and_device_kept(t, make, dtype):
    x = make(5, dtype)
    out = t(x, 0.5, generator=gen(0))
    assert out.dtype == dtype and out.device == x.device and out.shape == x.shape


def batch_equals_samples(t, make, copies=1):
    """A batch is its samples done one by one with the same params (copy-major rows)."""
    x = make(4, torch.float32)
    b = x.shape[0]
    params = t.sample(x, 0.8, generator=gen(5), copies=copies)
    out = t.apply_transform(x, params)
    assert out.shape[0] == b * copies
    for n in range(b * copies):
        single = t.apply_transform(x[n % b : n % b + 1], {k: v[n : n + 1] for k, v in params.items()})
        torch.testing.assert_close(out[n : n + 1], single, **TOL[torch.float32])


def gradient_reaches_magnitude_and_input(t, make, magnitude=0.5, input_grad=True):
    x = make(8, torch.float32).requires_grad_()
    mag = torch.tensor(magnitude, requires_grad=True)
    out = t(x, mag, generator=gen(11), copies=2)
    (out * torch.randn(out.shape, generator=gen(12))).sum().backward()
    assert mag.grad is not None and torch.isfinite(mag.grad) and mag.grad != 0
    assert x.grad is not None and torch.isfinite(x.grad).all()
    if input_grad:
        assert x.grad.abs().sum() > 0


def gradcheck_magnitude(t, make):
    """The gradient in the magnitude (and the input) is the true derivative (float64)."""
    x = make(2, torch.float64).requires_grad_()
    m = torch.tensor(0.4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda m, x: t(x, m, generator=gen(21)), (m, x))


def copies_differ(t, make):
    """Each copy of a sample draws its own parameters."""
    x = make(8, torch.float32)
    out = t(x, 0.5, generator=gen(0), copies=4)
    rows = out.reshape(4, 8, -1)
    assert not torch.allclose(rows[0], rows[1])


def copies_equal_a_repeated_batch(t, make, copies=3):
    """Sampling C copies from x equals sampling once for x repeated C times (copy-major)."""
    x = make(4, torch.float64)
    params = t.sample(x, 0.6, generator=gen(8), copies=copies)
    flat = t.sample(x.repeat(copies, *[1] * (x.dim() - 1)), 0.6, generator=gen(8))
    assert params.keys() == flat.keys()
    for k in params:
        torch.testing.assert_close(params[k], flat[k], msg=lambda m, k=k: f"param {k!r}: {m}")
    repeated = x.repeat(copies, *[1] * (x.dim() - 1))
    torch.testing.assert_close(t.apply_transform(x, params), t.apply_transform(repeated, flat))
