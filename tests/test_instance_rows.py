"""Per-row magnitudes (N,) in every transform (issue 27): row n drawn at mu[n] is row n drawn at the scalar mu[n].

The random draws of a transform do not depend on its magnitude, so with the same generator state, the
rows of a per-row draw are the rows of scalar draws at each row's magnitude; equal rows give exactly
the per-layer result. Checked on the parameters, on the outputs, and through a layer on every backend.
"""

import pytest
import torch
from helpers import gen, tol
from transform_cases import CASES

from augnet.transforms.base import per_row

# Magnitudes of the rows: the bounds, inside, repeated values (copy-major rows of 2 copies).
ROW_MAGNITUDES = (0.0, 0.3, 1.0, 0.7, 0.3, 0.05)


def _rows_of(params: dict, rows: torch.Tensor) -> dict:
    return {k: v[rows] for k, v in params.items()}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_per_row_params_are_scalar_params_row_by_row(case):
    t = case.build()
    x = case.make(3, torch.float64)
    copies = 2
    n = x.shape[0] * copies
    mu = torch.tensor(ROW_MAGNITUDES[:n], dtype=torch.float64)
    rowwise = t.sample(x, mu, gen(5), copies)
    for value in set(mu.tolist()):
        scalar = t.sample(x, torch.tensor(value, dtype=torch.float64), gen(5), copies)
        rows = (mu == value).nonzero().squeeze(1)
        for key in scalar:
            assert rowwise[key].shape == scalar[key].shape, (case.id, key)
            torch.testing.assert_close(rowwise[key][rows], scalar[key][rows], rtol=0, atol=0, msg=f"{case.id} {key}")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_per_row_forward_is_scalar_forward_row_by_row(case):
    t = case.build()
    x = case.make(3, torch.float64)
    copies = 2
    mu = torch.tensor(ROW_MAGNITUDES, dtype=torch.float64)
    out = t(x, mu, generator=gen(7), copies=copies)
    for value in set(mu.tolist()):
        ref = t(x, torch.tensor(value, dtype=torch.float64), generator=gen(7), copies=copies)
        rows = (mu == value).nonzero().squeeze(1)
        torch.testing.assert_close(out[rows], ref[rows], **tol("same", torch.float64), msg=case.id)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_equal_rows_are_the_scalar_result_exactly(case):
    t = case.build()
    x = case.make(3, torch.float32)
    mu = torch.full((6,), 0.4)
    out = t(x, mu, generator=gen(3), copies=2)
    ref = t(x, torch.tensor(0.4), generator=gen(3), copies=2)
    torch.testing.assert_close(out, ref, rtol=0, atol=0)


@pytest.mark.parametrize("case", [c for c in CASES if c.small is not None], ids=lambda c: c.id)
def test_per_row_gradient_is_each_rows_own(case):
    """d out[n] / d mu[m] is 0 for m != n, and the row's own derivative for m = n (float64 gradcheck)."""
    t = case.transform_for_gradcheck()
    x = case.small(2, torch.float64)
    mu = torch.tensor([0.3, 0.6], dtype=torch.float64, requires_grad=True)
    torch.autograd.gradcheck(lambda m: t(x, m, generator=gen(1)), (mu,), eps=1e-6, atol=1e-5)


def test_a_magnitude_per_row_of_the_wrong_length_is_refused():
    from augnet.transforms import image as T

    with pytest.raises(ValueError, match=r"one per output row, shape \(6,\)"):
        T.Rotate()(torch.rand(3, 3, 8, 8), torch.full((3,), 0.5), copies=2)
    with pytest.raises(ValueError, match=r"1\.5"):
        T.Rotate()(torch.rand(3, 3, 8, 8), torch.tensor([0.5, 1.5, 0.1]))


def test_per_row_shapes_a_vector_only():
    assert per_row(torch.tensor(0.5), 4).dim() == 0
    assert per_row(torch.ones(3), 4).shape == (3, 1, 1, 1)
