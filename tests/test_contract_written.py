"""Claims of the written contract (DESIGN.md, the guides, the docstrings) pinned against an independent computation."""

import torch
import torch.nn.functional as F
from torch import nn

from augnet.losses import EquivarianceLoss


def _setup():
    torch.manual_seed(0)
    loss, head = EquivarianceLoss(8, num_transforms=2), nn.Linear(8, 3)
    with torch.no_grad():  # maps away from the identity, so every term counts
        for p in loss.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return loss, head


def _eq7(loss, head, z, z_t, y):
    """Tensmeyer & Martinez eq. 7 as the class docstring writes it, with -100 labels left out of the CE terms."""
    kept = y != -100
    ce = lambda logits: F.cross_entropy(logits[kept], y[kept]) if kept.any() else logits.new_zeros(())  # noqa: E731
    maps = [loss.map(j, z_t[j]) for j in range(len(z_t))]
    transformed = torch.stack([ce(head(m)) for m in maps]).mean()
    equivariance = torch.stack([((m - z) ** 2).sum(1) / z.shape[1] for m in maps]).mean()
    invariance = torch.stack([((zk - z) ** 2).sum(1) / z.shape[1] for zk in z_t]).mean()
    return ce(head(z)) + 0.3 * (transformed + 50 * equivariance + 25 * invariance)


def test_equivariance_loss_with_every_label_ignored_keeps_the_equivariance_and_invariance_terms():
    # "-100 is cross-entropy's ignore_index (the sample counts in the equivariance and invariance terms only)":
    # a batch of such samples (unlabelled data) gave NaN, and NaN gradients to the features, maps and head.
    loss, head = _setup()
    z = torch.randn(4, 8, requires_grad=True)
    z_t, y = torch.randn(2, 4, 8), torch.full((4,), -100)
    total, terms = loss(z, z_t, y, head, return_terms=True)
    torch.testing.assert_close(total, _eq7(loss, head, z.detach(), z_t, y))
    assert terms["clean"] == 0.0 and terms["transformed"] == 0.0
    total.backward()
    assert bool(z.grad.isfinite().all()) and bool(z.grad.abs().sum() > 0)
    assert all(bool(p.grad.isfinite().all()) for p in loss.parameters())
    assert torch.equal(head.weight.grad, torch.zeros_like(head.weight))  # no label: nothing for the head
    plain = EquivarianceLoss(8, 2, transformed_weight=0.0)(z.detach(), z_t, y, head)  # plain cross-entropy of nothing
    assert plain.item() == 0.0

    # A batch with some labels: eq. 7 as before, bit for bit for plain cross-entropy.
    y = torch.tensor([0, -100, 2, 1])
    torch.testing.assert_close(loss(z.detach(), z_t, y, head), _eq7(loss, head, z.detach(), z_t, y))
    plain = EquivarianceLoss(8, 2, transformed_weight=0.0)(z.detach(), z_t, y, head)
    assert torch.equal(plain, F.cross_entropy(head(z.detach()), y))


def test_bare_layers_outside_any_augmentation_module_count_as_one_stack():
    # selective_regularizer's docstring: layers outside any AugmentationModule (a model's own ModuleList) count as
    # one stack in registration order, so with diverse=True the second layer's term is discounted by the first's.
    from augnet import AugmentationLayer, selective_regularizer
    from augnet.transforms import image as T

    def layer():
        return AugmentationLayer([T.Rotate(), T.TranslateX()])

    first, second = layer(), layer()
    with torch.no_grad():
        first.weight_logits.copy_(torch.tensor([4.0, -4.0]))  # the first layer holds Rotate
        for lay in (first, second):
            lay.raw_magnitudes.fill_(0.5)
    bare = nn.ModuleList([first, second])
    kw = dict(units="magnitude", saturation=None)
    alone = selective_regularizer(first, **kw) + selective_regularizer(second, **kw)
    stacked = selective_regularizer(bare, **kw)
    # Recomputed from the docstring's formula: layer 2's term is -||v (1 - h)|| + ||v h||, h = layer 1's weights.
    w1, w2 = first.weights, second.weights
    m1, m2 = first.magnitudes, second.magnitudes
    v2 = w2 * m2
    expected = -(w1 * m1).norm() - (v2 * (1 - w1)).norm() + (v2 * w1).norm()
    torch.testing.assert_close(stacked, expected)
    assert not torch.allclose(stacked, alone)
