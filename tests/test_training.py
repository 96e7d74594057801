"""augnet.training.fit: the loop shared by the demo, the examples and the experiments."""

import pytest
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
    assert set(history) == {"step", "loss", "total_loss", "norm"}  # no augmentation layers, no weights / magnitudes
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


# ------------------------------------------------------------------ data loaders, device, AMP, schedulers, logging


def fit_run(source, **kwargs):
    """Train a fresh AugNet on ``source`` ((x, y) tensors or a loader); its parameters and history."""
    model = augnet_model()
    opt = torch.optim.Adam(augnet.param_groups(model, aug_lr=1e-2), lr=1e-2)
    x, y = source if isinstance(source, tuple) else (source, None)
    history = fit(model, x, y, opt, epochs=2, generator=torch.Generator().manual_seed(1), **kwargs)
    return torch.cat([p.detach().flatten() for p in model.parameters()]), history


def test_fit_on_a_data_loader_equals_fit_on_the_same_tensors():
    from torch.utils.data import DataLoader, TensorDataset

    x, y = data()
    loader = DataLoader(TensorDataset(x, y), batch_size=8, shuffle=False)
    on_tensors, h_tensors = fit_run((x, y), batch_size=8, shuffle=False)
    on_loader, h_loader = fit_run(loader)
    assert torch.equal(on_tensors, on_loader) and h_tensors == h_loader
    shuffled, _ = fit_run((x, y), batch_size=8)  # the default draws a permutation per epoch: another run
    assert not torch.equal(shuffled, on_tensors)
    # any iterable of (inputs, targets) batches, without a length
    batches = [(x[i : i + 8], y[i : i + 8]) for i in range(0, len(x), 8)]
    on_list, _ = fit_run(batches)
    assert torch.equal(on_list, on_tensors)


def test_fit_steps_a_scheduler_per_epoch_or_per_step():
    x, y = data()
    for interval, expected in (("epoch", 2), ("step", 10)):
        model = augnet_model()
        opt = torch.optim.SGD(model.parameters(), lr=1.0)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
        fit(model, x, y, opt, epochs=2, batch_size=8, scheduler=sched, scheduler_interval=interval)
        assert opt.param_groups[0]["lr"] == 0.5**expected


def test_fit_with_mixed_precision_trains_close_to_float32():
    full, _ = fit_run(data(), batch_size=8)
    half, history = fit_run(data(), batch_size=8, amp=True)  # bfloat16 autocast on CPU
    assert torch.isfinite(half).all() and len(history["loss"]) == 3
    assert not torch.equal(half, full) and torch.allclose(half, full, atol=0.05)


def test_fit_moves_batches_to_the_device_and_checks_it():
    x, y = data()
    params, _ = fit_run((x, y), batch_size=8, device="cpu")
    assert torch.equal(params, fit_run((x, y), batch_size=8)[0])
    model = augnet_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            fit(model, x, y, opt, 1, 8, device="cuda")


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(batch_size=None), ValueError, "batch_size must be an int"),
        (dict(batch_size=0), ValueError, "batch_size must be an int"),
        (dict(batch_size=8, y=torch.zeros(3, dtype=torch.long)), ValueError, "same length"),
        (dict(batch_size=8, y="labels"), TypeError, "y must be a tensor"),
        (dict(batch_size=8, epochs=-1), ValueError, "epochs must be"),
        (dict(batch_size=8, amp=torch.float64), ValueError, "amp must be"),
        (dict(batch_size=8, scheduler_interval="batch"), ValueError, "scheduler_interval"),
        (dict(x=5), TypeError, "x must be a tensor or a data loader"),
        (dict(x=[(torch.rand(2, 1, 12, 12), torch.zeros(2, dtype=torch.long))], y=torch.zeros(2)), ValueError,
         "y must be None"),
        (dict(x=[torch.rand(2, 1, 12, 12)], y=None), ValueError, "not an \\(inputs, targets\\) pair"),
    ],
)
def test_fit_bad_arguments(kwargs, error, match):
    x, y = data()
    args = dict(x=x, y=y, epochs=1)
    args.update(kwargs)
    model = augnet_model()
    before = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(error, match=match):
        fit(model, args.pop("x"), args.pop("y"), opt, **args)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))  # nothing trained


def test_a_generator_on_another_device_is_refused():
    class FakeCuda:  # a generator whose device says cuda, without a GPU
        device = torch.device("cuda")

    with pytest.raises(ValueError, match="generator is on cuda"):
        fit(augnet_model(), *data(), torch.optim.SGD(augnet_model().parameters(), lr=0.1), 1, 8, generator=FakeCuda())


def test_policy_logger_writes_the_policy_and_losses_to_csv_and_tensorboard(tmp_path):
    import csv

    from augnet.training import PolicyLogger

    logger = PolicyLogger(tmp_path / "log", every=3, tensorboard=True)
    model = augnet_model()
    x, y = data()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    fit(model, x, y, opt, epochs=2, batch_size=8, callbacks=logger, lam=0.5)
    rows = list(csv.DictReader((tmp_path / "log" / "policy.csv").open()))
    assert [int(float(r["step"])) for r in rows] == [1, 3, 6, 9, 10]  # the first, every 3rd and the last step
    last = rows[-1]
    layer = model.augment.layers[0]
    w, mu = layer.weights.detach(), layer.magnitudes.detach()
    assert float(last["layer0/Rotate/weight"]) == pytest.approx(float(w[0]), abs=1e-6)
    assert float(last["layer0/ShearX/magnitude"]) == pytest.approx(float(mu[1]), abs=1e-6)
    assert float(last["layer0/Rotate/range"]) == pytest.approx(float(mu[0]) * 180, rel=1e-5)
    assert float(last["lambda"]) == 0.5 and float(last["lr0"]) == 1e-2 and float(last["task_loss"]) > 0
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # the dev extra has it

    events = EventAccumulator(str(tmp_path / "log"))
    events.Reload()
    tags = events.Tags()["scalars"]
    assert {"task_loss", "loss", "layer0/Rotate/weight", "layer0/ShearX/range"} <= set(tags)
    steps = [e.step for e in events.Scalars("layer0/Rotate/magnitude")]
    assert steps == [1, 3, 6, 9, 10]
    with pytest.raises(ValueError, match="writes nothing"):
        PolicyLogger(tmp_path, csv=False, tensorboard=False)
    with pytest.raises(ValueError, match="every must be"):
        PolicyLogger(tmp_path, every=0)
