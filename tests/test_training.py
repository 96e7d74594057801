"""augnet.training.fit: the loop shared by the demo, the examples and the experiments."""

import torch
import torch.nn.functional as F
from torch import nn

import augnet
from augnet.data import rotated_glyphs
from augnet.training import fit
from augnet.transforms import image as T


def data(n=40):
    return rotated_glyphs(n, size=12, seed=0)


def trunk():
    return nn.Sequential(nn.Flatten(), nn.Linear(144, 4), nn.LogSoftmax(1))


def train(model, **kwargs):
    x, y = data()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    history = fit(model, x, y, opt, epochs=2, batch_size=8, generator=torch.Generator().manual_seed(1), **kwargs)
    return history, torch.cat([p.detach().flatten() for p in model.parameters()])


def augnet_model():
    torch.manual_seed(0)
    return augnet.AugNet(trunk(), augnet.AugmentationLayer([T.Rotate(), T.ShearX()], init_magnitude=0.3))


def test_augnet_history_and_replay():
    history, params = train(augnet_model())
    assert history["step"] == [1, 5, 10]  # 5 batches per epoch, 2 epochs
    assert len(history["loss"]) == 3 and len(history["weights"]) == 3
    assert len(history["magnitudes"][0]) == 1 and len(history["magnitudes"][0][0]) == 2
    _, again = train(augnet_model())
    assert torch.equal(params, again)  # the generator fixes batches and augmentations


def test_a_plain_module_is_called_without_a_generator_and_records_extras():
    torch.manual_seed(0)
    model = trunk()  # its forward takes no generator
    calls = []

    def record():
        calls.append(1)
        return {"norm": float(model[1].weight.norm())}

    before = model[1].weight.detach().clone()
    history, _ = train(model, lam=0.0, regularizer="none", record=record)
    assert set(history) == {"step", "loss", "norm"}  # no augmentation layers, no weights / magnitudes
    assert len(history["norm"]) == len(history["step"]) == len(calls) == 3
    assert not torch.equal(model[1].weight, before)


def test_augerino_draws_from_the_generator():
    def model():
        torch.manual_seed(0)
        return augnet.Augerino(trunk(), init_width=0.2)

    m1 = model()
    h1, p1 = train(m1, regularizer="augerino", lam=0.05, record=lambda: {"widths": m1.augment.widths.tolist()})
    _, p2 = train(model(), regularizer="augerino", lam=0.05)
    assert torch.equal(p1, p2)
    assert len(h1["widths"]) == 3 and len(h1["widths"][0]) == 6
    # The regulariser acts: without it the widths end elsewhere.
    m3 = model()
    train(m3, regularizer="none", lam=0.0)
    assert not torch.allclose(m3.augment.widths, m1.augment.widths)


def test_loss_fn_is_used():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(144, 4))  # logits: cross-entropy
    seen = []

    def loss_fn(out, target):
        loss = F.cross_entropy(out, target)
        seen.append(float(loss.detach()))
        return loss

    history, _ = train(model, lam=0.0, regularizer="none", loss_fn=loss_fn)
    assert len(seen) == 10
    assert history["loss"] == [seen[0], seen[4], seen[9]]
