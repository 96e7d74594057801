"""The equivariance loss (Tensmeyer & Martinez eq. 7)."""

import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import gen
from torch import nn

from augnet import probes
from augnet.losses import EquivarianceLoss


def test_probes_re_exports_the_loss():
    assert probes.EquivarianceLoss is EquivarianceLoss
    assert "EquivarianceLoss" in probes.__all__ and "EquivarianceLoss" in dir(probes)


def test_losses_imports_before_probes():
    # augnet.losses imports augnet.probes.maps, and augnet.probes re-exports the loss: either order must work.
    code = "import augnet.losses as L, augnet.probes as P; assert P.EquivarianceLoss is L.EquivarianceLoss"
    subprocess.run([sys.executable, "-c", code], check=True)


# --------------------------------------------------------------------------- loss (eq. 7)


def _batch(j=2, b=6, d=8):
    z = torch.randn(b, d, generator=gen(1), requires_grad=True)
    z_t = torch.randn(j, b, d, generator=gen(2), requires_grad=True)
    y = torch.randint(0, 3, (b,), generator=gen(3))
    return z, z_t, y


def test_loss_with_zero_weights_is_cross_entropy():
    z, z_t, y = _batch()
    head = nn.Linear(8, 3)
    ce = F.cross_entropy(head(z), y)
    for kw in (dict(transformed_weight=0.0), dict(equivariance_weight=0, invariance_weight=0, transformed_weight=0)):
        loss = EquivarianceLoss(8, num_transforms=2, **kw)
        assert torch.equal(loss(z, z_t, y, head), ce)
        total, terms = loss(z, z_t, y, head, return_terms=True)
        assert torch.equal(total, ce)
        assert terms["clean"] == pytest.approx(float(ce.detach()))


def test_loss_terms_match_eq_7():
    z, z_t, y = _batch()
    head = nn.Linear(8, 3)
    loss = EquivarianceLoss(8, num_transforms=2, equivariance_weight=2.0, invariance_weight=3.0, transformed_weight=0.5)
    with torch.no_grad():
        for m in loss.maps:
            m.weight.normal_(generator=gen(4)).mul_(0.1)
            m.bias.normal_(generator=gen(5))
    expected = F.cross_entropy(head(z), y)
    inner = 0.0
    for j in range(2):
        m = z_t[j] + z_t[j] @ loss.maps[j].weight.T + loss.maps[j].bias
        inner = inner + F.cross_entropy(head(m), y)
        inner = inner + 2.0 * ((m - z) ** 2).sum(1).mean() / 8 + 3.0 * ((z_t[j] - z) ** 2).sum(1).mean() / 8
    expected = expected + 0.5 * inner / 2
    assert torch.allclose(loss(z, z_t, y, head), expected, rtol=1e-5, atol=1e-6)
    # Identity maps, no penalties: the mean of the clean and transformed cross-entropies.
    plain = EquivarianceLoss(8, 2, equivariance_weight=0.0, invariance_weight=0.0, transformed_weight=1.0)
    ref = F.cross_entropy(head(z), y) + (F.cross_entropy(head(z_t[0]), y) + F.cross_entropy(head(z_t[1]), y)) / 2
    assert torch.allclose(plain(z, list(z_t), y, head), ref)


@pytest.mark.parametrize("kind", ["linear", "residual_relu"])
def test_loss_maps_and_features_receive_gradients(kind):
    z, z_t, y = _batch()
    head = nn.Linear(8, 3)
    loss = EquivarianceLoss(8, num_transforms=2, kind=kind, generator=gen(0))
    loss(z, z_t, y, head).backward()
    for m in loss.maps:
        grads = {name: p.grad for name, p in m.named_parameters()}
        assert all(g is not None for g in grads.values())
        # The linear maps' weights and biases all move; a residual ReLU map starts with W_2 = 0,
        # so its output layer moves first.
        moving = ["weight", "bias"] if kind == "linear" else ["w2", "b2"]
        assert all(float(grads[name].abs().sum()) > 0 for name in moving)
    assert z.grad is not None and float(z.grad.abs().sum()) > 0
    assert z_t.grad is not None and float(z_t.grad.abs().sum()) > 0


def test_loss_maps_learn_to_undo_the_transform():
    z = torch.randn(128, 6, generator=gen(1))
    z_t = z.roll(2, dims=1)[None]
    y = torch.zeros(128, dtype=torch.long)
    head = nn.Linear(6, 2).requires_grad_(False)
    loss = EquivarianceLoss(6, num_transforms=1, equivariance_weight=50.0, invariance_weight=0.0)
    opt = torch.optim.Adam(loss.parameters(), lr=0.05)
    first = loss(z, z_t, y, head, return_terms=True)[1]["equivariance"]
    for _ in range(300):
        opt.zero_grad()
        loss(z, z_t, y, head).backward()
        opt.step()
    last = loss(z, z_t, y, head, return_terms=True)[1]["equivariance"]
    assert last < 1e-3 * first


def test_loss_maps_argument_picks_the_maps():
    z, z_t, y = _batch(j=1)
    head = nn.Linear(8, 3)
    loss = EquivarianceLoss(8, num_transforms=3)
    with torch.no_grad():
        loss.maps[2].bias.fill_(1.0)
    a = loss(z, z_t, y, head, maps=[2])
    b = loss(z, z_t, y, head, maps=[0])
    assert not torch.allclose(a, b)


# --------------------------------------------------------------------------- bad input


def test_loss_bad_inputs_raise():
    z = torch.randn(10, 4)
    with pytest.raises(ValueError, match="kind"):
        EquivarianceLoss(4, kind="conv")
    with pytest.raises(ValueError, match="transformed_weight"):
        EquivarianceLoss(4, transformed_weight=-0.1)
    for kwargs, error, match in (
        ({"dim": 8.7}, TypeError, "dim must be an int, got float"),  # was truncated to 8
        ({"num_transforms": 2.9}, TypeError, "num_transforms must be an int"),
        ({"num_transforms": 0}, ValueError, "num_transforms must be >= 1"),
        ({"equivariance_weight": float("inf")}, ValueError, "equivariance_weight must be finite"),
        ({"invariance_weight": "25"}, TypeError, "invariance_weight must be a number"),
    ):
        with pytest.raises(error, match=match):
            EquivarianceLoss(**{"dim": 4, **kwargs})
    same = EquivarianceLoss(torch.tensor(4), num_transforms=np.int64(2), equivariance_weight=torch.tensor(0.5),
                            invariance_weight=torch.tensor(2))  # fmt: skip
    assert (same.dim, len(same.maps), same.equivariance_weight, same.invariance_weight) == (4, 2, 0.5, 2.0)
    for kwargs in ({"dim": torch.tensor(True)}, {"equivariance_weight": torch.tensor([0.5])}):
        with pytest.raises(TypeError):
            EquivarianceLoss(**{"dim": 4, **kwargs})
    loss = EquivarianceLoss(4, num_transforms=2)
    y = torch.zeros(10, dtype=torch.long)
    with pytest.raises(ValueError, match=r"z_t\[0\]"):
        loss(z, torch.randn(2, 10, 5), y, nn.Linear(4, 2))
    with pytest.raises(ValueError, match="index the 2 maps"):
        loss(z, torch.randn(1, 10, 4), y, nn.Linear(4, 2), maps=[2])
    with pytest.raises(ValueError, match="y must be"):
        loss(z, torch.randn(2, 10, 4), y[:3], nn.Linear(4, 2))
