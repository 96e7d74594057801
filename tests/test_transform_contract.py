"""The transform contract: every check below runs on every case of ``transform_cases.CASES``.

Every augnet transform, whatever its input kind (images, EEG, audio, sensor
rotations), must satisfy these. A case's options (see :class:`transform_cases.Case`)
say where a check does not apply and why; a check a transform is known to fail
is an ``xfail(strict=True)`` named in the registry.
"""

import pytest
import torch
from helpers import TOL, gen
from torch._dynamo.testing import CompileCounterWithBackend
from transform_cases import CASES, Case

import augnet.transforms
from augnet.transforms import Transform

#: The names of the checks below (filled as they are parametrised), for the registry's ``xfail``.
CHECKS: set[str] = set()
COPIES = pytest.mark.parametrize("copies", [1, 3], ids=lambda c: f"copies={c}")
DTYPES = pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])


def over(check: str, cases: list[Case] = CASES, magnitudes: bool = False) -> list:
    """The parameters of the check ``check``: one per case (per case and magnitude of its
    ``grad_magnitudes`` with ``magnitudes``), ``xfail(strict=True)`` where the registry says so."""
    CHECKS.add(check)
    out = []
    for c in cases:
        marks = [pytest.mark.xfail(strict=True, reason=c.xfail[check])] if check in c.xfail else []
        if magnitudes:
            out += [pytest.param(c, m, id=f"{c.id}-mu={m}", marks=marks) for m in c.grad_magnitudes]
        else:
            out.append(pytest.param(c, id=c.id, marks=marks))
    return out


def rows(x: torch.Tensor, copies: int) -> torch.Tensor:
    """``x`` repeated ``copies`` times along the batch, copy-major."""
    return x.repeat(copies, *[1] * (x.dim() - 1))


# The cases whose batch is its samples one by one (not sample pairing, which mixes samples).
SAMPLEWISE = [c for c in CASES if not c.build().mixes_samples]


# -------------------------------------------------------------------- checks


@COPIES
@pytest.mark.parametrize("case", over("identity_at_zero"))
def test_identity_at_magnitude_zero(case, copies):
    """Magnitude 0 is the identity (also for every copy)."""
    t = case.build()
    x = case.make(5, torch.float64)
    out = t(x, 0.0, generator=gen(1), copies=copies)
    torch.testing.assert_close(out, rows(x, copies), atol=1e-10, rtol=0)


@pytest.mark.parametrize("grad_magnitude", [False, True], ids=["float-magnitude", "magnitude-with-grad"])
@pytest.mark.parametrize("case", over("input_gradient_at_zero"))
def test_the_input_gradient_at_magnitude_zero_is_the_identitys(case, grad_magnitude):
    """At magnitude 0 the derivative in the input is the identity's: what flows back is the upstream gradient
    (a rows-at-zero replacement that also carried the transform's own derivative in the input gave 2)."""
    t = case.build()
    x = case.make(4, torch.float64).requires_grad_(True)
    magnitude = torch.tensor(0.0, dtype=torch.float64, requires_grad=True) if grad_magnitude else 0.0
    out = t(x, magnitude, generator=gen(1))
    upstream = torch.randn(out.shape, generator=gen(2), dtype=out.dtype)
    (grad,) = torch.autograd.grad(out, x, upstream)
    torch.testing.assert_close(grad, upstream, atol=1e-9, rtol=1e-9)


@pytest.mark.parametrize("case", over("same_draws_in_float64"))
def test_a_seed_draws_the_same_parameters_for_float32_and_float64_inputs(case):
    """float64 inputs get the parameters float32 ones get from the same generator state (to float32 rounding)."""
    t = case.build()
    x = case.make(6, torch.float32)
    low = t.sample(x, 0.7, generator=gen(5), copies=2)
    high = t.sample(x.double(), 0.7, generator=gen(5), copies=2)
    assert low.keys() == high.keys()
    for k in low:
        if low[k].is_floating_point():
            torch.testing.assert_close(high[k], low[k].to(high[k].dtype), rtol=1e-6, atol=1e-6)
        else:
            assert torch.equal(high[k], low[k]), k


@pytest.mark.parametrize("case", over("replay"))
def test_replay_with_same_params_is_exact(case):
    """The same params give the same output; the same seed draws the same params."""
    t = case.build()
    x = case.make(16, torch.float32)
    params = t.sample(x, 0.7, generator=gen(3), copies=2)
    a = t(x, 0.7, params=params, copies=2)
    assert torch.equal(a, t.apply_transform(x, params))
    again = t.sample(x, 0.7, generator=gen(3), copies=2)
    assert params.keys() == again.keys() and all(torch.equal(params[k], again[k]) for k in params)
    assert not torch.allclose(a, t(x, 0.7, generator=gen(4), copies=2)), "another seed must draw other params"


@pytest.mark.parametrize("case", over("config_rebuilds"))
def test_config_rebuilds_the_same_transform(case):
    """``type(t)(**t.config())`` is the same transform: JSON-ready arguments, the same output for the same draws."""
    import json

    t = case.build()
    config = json.loads(json.dumps(t.config()))  # survives a JSON file
    again = type(t)(**config)
    assert again.config() == t.config()
    x = case.make(6, torch.float64)
    torch.testing.assert_close(again(x, 0.6, generator=gen(2)), t(x, 0.6, generator=gen(2)))


@pytest.mark.parametrize("case", over("input_not_modified"))
def test_input_is_not_modified(case):
    """Forward and backward leave the input as it was: its values and its version counter.

    The version counter (as torchvision's kernel tests check it) catches an
    in-place write even when it writes back the same values. Both with an input
    that requires grad and one that does not (where autograd would not object).
    """
    t = case.build()
    for requires_grad in (False, True):
        x = case.make(5, torch.float32).requires_grad_(requires_grad)
        before, version = x.detach().clone(), x._version
        mag = torch.tensor(0.6, requires_grad=True)
        out = t(x, mag, generator=gen(0), copies=2)
        assert x._version == version, f"forward wrote into the input (requires_grad={requires_grad})"
        out.square().sum().backward()
        assert x._version == version, f"backward wrote into the input (requires_grad={requires_grad})"
        assert torch.equal(x.detach(), before)


@DTYPES
@pytest.mark.parametrize("case", over("dtype_and_device_kept"))
def test_dtype_and_device_kept(case, dtype):
    t = case.build()
    x = case.make(5, dtype)
    out = t(x, 0.5, generator=gen(0))
    assert out.dtype == dtype and out.device == x.device and out.shape == x.shape


@pytest.mark.parametrize("copies", [1, 2], ids=lambda c: f"copies={c}")
@pytest.mark.parametrize("case", over("batch_equals_samples", SAMPLEWISE))
def test_batch_equals_samples_one_by_one(case, copies):
    """A batch is its samples done one by one with the same params (copy-major rows)."""
    t = case.build()
    x = case.make(4, torch.float32)
    b = x.shape[0]
    params = t.sample(x, 0.8, generator=gen(5), copies=copies)
    out = t.apply_transform(x, params)
    assert out.shape[0] == b * copies
    for n in range(b * copies):
        single = t.apply_transform(x[n % b : n % b + 1], {k: v[n : n + 1] for k, v in params.items()})
        torch.testing.assert_close(out[n : n + 1], single, **TOL[torch.float32])


@pytest.mark.parametrize("case, magnitude", over("gradient_reaches_magnitude_and_input", magnitudes=True))
def test_gradient_reaches_magnitude_and_input(case, magnitude):
    """A finite, non-zero gradient in the magnitude, and a finite one in the input (non-zero unless exempt)."""
    t = case.build()
    x = case.make(8, torch.float32).requires_grad_()
    mag = torch.tensor(magnitude, requires_grad=True)
    out = t(x, mag, generator=gen(11), copies=2)
    (out * torch.randn(out.shape, generator=gen(12))).sum().backward()
    assert mag.grad is not None and torch.isfinite(mag.grad) and mag.grad != 0
    assert x.grad is not None and torch.isfinite(x.grad).all()
    if magnitude not in case.no_input_grad_at:
        assert x.grad.abs().sum() > 0


@pytest.mark.parametrize("case", over("gradcheck_magnitude", [c for c in CASES if c.small is not None]))
def test_gradcheck_in_the_magnitude(case):
    """The gradient in the magnitude (and the input) is the true derivative (float64)."""
    t = case.transform_for_gradcheck()
    x = case.small(2, torch.float64).requires_grad_()
    m = torch.tensor(0.4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda m, x: t(x, m, generator=gen(21)), (m, x))


@pytest.mark.parametrize("case", over("copies_equal_a_repeated_batch", SAMPLEWISE))
def test_copies_equal_a_repeated_batch(case):
    """Sampling C copies from x equals sampling once for x repeated C times (copy-major)."""
    copies = 3
    t = case.build()
    x = case.make(4, torch.float64)
    params = t.sample(x, 0.6, generator=gen(8), copies=copies)
    flat = t.sample(rows(x, copies), 0.6, generator=gen(8))
    assert params.keys() == flat.keys()
    for k in params:
        torch.testing.assert_close(params[k], flat[k], msg=lambda m, k=k: f"param {k!r}: {m}")
    torch.testing.assert_close(t.apply_transform(x, params), t.apply_transform(rows(x, copies), flat))


@pytest.mark.parametrize("case", over("copies_differ"))
def test_copies_are_independent_draws(case):
    """Each copy of a sample draws its own parameters."""
    t = case.build()
    x = case.make(8, torch.float32)
    out = t(x, 0.5, generator=gen(0), copies=4)
    out_rows = out.reshape(4, 8, -1)
    assert not torch.allclose(out_rows[0], out_rows[1])


@pytest.mark.parametrize("case", over("compile_matches_eager"))
def test_compile_matches_eager(case):
    """torch.compile of apply_transform with fixed params gives the eager output and gradients.

    aot_eager (no code generation: fast on CPU) still traces through dynamo and
    AOT autograd, so it needs the ops' fake kernels and a functional graph. Graph
    breaks are allowed; a silent fallback to eager (nothing compiled) is not.
    """
    t = case.build()
    x = case.make(2, torch.float32)
    mag = torch.tensor(0.7, requires_grad=True)
    params = t.sample(x, mag, generator=gen(6), copies=2)
    torch._dynamo.reset()  # each case compiles afresh, within the recompile limit
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(lambda x, params: t.apply_transform(x, params), backend=counter)
    results = []
    for fn in (lambda x, p: t.apply_transform(x, p), compiled):
        leaf = x.clone().requires_grad_()
        out = fn(leaf, params)
        # (retain_graph: the graph from the magnitude to the params serves both runs)
        grad_mag, grad_x = torch.autograd.grad(out.square().sum(), (mag, leaf), retain_graph=True)
        results.append((out, grad_mag, grad_x))
    assert counter.frame_count >= 1, "torch.compile captured no graph"
    for name, got, want in zip(("output", "grad magnitude", "grad input"), results[1], results[0], strict=True):
        torch.testing.assert_close(got, want, **TOL[torch.float32], msg=lambda m, name=name: f"{name}: {m}")


# ------------------------------------------------------------------ registry


def test_every_public_transform_has_a_case():
    modules = [augnet.transforms.image, augnet.transforms.signal, augnet.transforms.audio]
    public = {
        obj
        for m in modules
        for name in m.__all__
        if isinstance(obj := getattr(m, name), type) and issubclass(obj, Transform) and not name.endswith("Transform")
    }
    covered = {type(c.build()) for c in CASES}
    assert public <= covered, f"transforms without a contract case: {sorted(c.__name__ for c in public - covered)}"


def test_case_ids_are_unique_and_xfails_name_checks():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))
    for c in CASES:
        assert set(c.xfail) <= CHECKS, f"{c.id}: unknown checks in xfail: {set(c.xfail) - CHECKS}"
