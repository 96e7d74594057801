"""The selection schedules (temperature annealing, weight warm-up; augnet.training) and fit()'s callbacks."""

import math

import pytest
import torch
from torch import nn

import augnet
from augnet.data import rotated_glyphs
from augnet.training import Callback, TemperatureAnnealing, WeightWarmup, fit
from augnet.transforms import image as T


def model_and_data(n=24):
    torch.manual_seed(0)
    x, y = rotated_glyphs(n, size=12, seed=0)
    trunk = nn.Sequential(nn.Flatten(), nn.Linear(144, 4))
    layer = augnet.AugmentationLayer([T.Rotate(), T.ShearX(), T.TranslateX()], init_magnitude=0.3)
    return augnet.AugNet(trunk, layer), x, y


class Recorder(Callback):
    def __init__(self):
        self.calls, self.temperatures, self.weights, self.magnitudes = [], [], [], []

    def on_train_start(self, state):
        self.calls.append("train_start")

    def on_epoch_start(self, state):
        self.calls.append(f"epoch_start {state.epoch}")
        self.temperatures.append(state.layers[0].temperature)

    def on_before_optimizer_step(self, state):
        self.calls.append("before_step")
        assert state.model.augment.layers[0].raw_magnitudes.grad is not None  # after backward

    def on_step_end(self, state):
        self.calls.append(f"step_end {state.step}")
        assert state.loss is not None and math.isfinite(state.task_loss)

    def on_epoch_end(self, state):
        self.calls.append(f"epoch_end {state.epoch}")
        self.weights.append(state.layers[0].weight_logits.detach().clone())
        self.magnitudes.append(state.layers[0].raw_magnitudes.detach().clone())

    def on_train_end(self, state):
        self.calls.append("train_end")


def train(callbacks, epochs=3, lr=0.05):
    model, x, y = model_and_data()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    fit(model, x, y, opt, epochs=epochs, batch_size=12, generator=torch.Generator().manual_seed(1), callbacks=callbacks)
    return model


def test_fit_calls_the_hooks_in_order():
    rec = Recorder()
    train([rec], epochs=2)
    step = ["before_step", "step_end 1", "before_step", "step_end 2"]
    assert rec.calls[:6] == ["train_start", "epoch_start 0", *step]
    assert rec.calls[6:8] == ["epoch_end 0", "epoch_start 1"] and rec.calls[-2:] == ["epoch_end 1", "train_end"]
    assert rec.calls.count("before_step") == 4
    with pytest.raises(TypeError, match="Callback instances"):
        train([lambda state: None])


def test_temperature_annealing_is_geometric_from_start_to_end():
    anneal, rec = TemperatureAnnealing(1.0, 0.01), Recorder()
    model = train([anneal, rec], epochs=3)
    assert rec.temperatures == pytest.approx([1.0, 0.1, 0.01])
    assert model.augment.layers[0].temperature == pytest.approx(0.01)  # kept for evaluation
    short = TemperatureAnnealing(2.0, 0.5, epochs=2)
    assert [short.temperature(e, 5) for e in range(4)] == pytest.approx([2.0, 0.5, 0.5, 0.5])
    assert TemperatureAnnealing(1.0, 0.1).temperature(0, 1) == pytest.approx(0.1)  # a one-epoch run ends at `end`


def test_annealed_weights_sharpen():
    # the same logits under a lower temperature: the largest weight grows
    model = train([TemperatureAnnealing(1.0, 0.01)], epochs=3)
    layer = model.augment.layers[0]
    sharp = float(layer.weights.detach().max())
    layer.temperature = 1.0
    assert sharp > float(layer.weights.detach().max())


def test_weight_warmup_holds_the_weights_while_the_magnitudes_move():
    rec = Recorder()
    train([WeightWarmup(2), rec], epochs=3)
    zero = torch.zeros(3)
    assert torch.equal(rec.weights[0], zero) and torch.equal(rec.weights[1], zero)  # held through epochs 0 and 1
    assert not torch.equal(rec.magnitudes[0], torch.full((3,), 0.3))  # the magnitudes trained meanwhile
    assert not torch.equal(rec.weights[2], zero)  # then the weights move
    none = Recorder()
    train([WeightWarmup(0), none], epochs=1)
    assert not torch.equal(none.weights[0], zero)


def test_weight_warmup_warns_that_a_conditioner_keeps_training_its_weights(recwarn):
    from augnet.instance import ConditionedAugmentationLayer

    x, y = torch.rand(8, 3, 8, 8), torch.randint(0, 2, (8,))
    trunk = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(192, 2))
    layer = ConditionedAugmentationLayer([T.Rotate(), T.TranslateX()], channels=3)
    model = augnet.AugNet(trunk, layer)
    opt = torch.optim.SGD(augnet.param_groups(model), lr=0.1)
    with pytest.warns(UserWarning, match="not the conditioner of a ConditionedAugmentationLayer") as caught:
        fit(model, x, y, opt, 1, 8, callbacks=[WeightWarmup(1)])
    assert caught[0].filename == __file__
    fit(model, x, y, opt, 1, 8, callbacks=[WeightWarmup(0)])  # no warm-up: nothing to warn of
    train([WeightWarmup(2)], epochs=1)  # a global layer: held, no warning
    assert not [w for w in recwarn if "conditioner" in str(w.message)]


@pytest.mark.parametrize(
    "make, error",
    [
        (lambda: TemperatureAnnealing(0.0, 0.01), ValueError),
        (lambda: TemperatureAnnealing(1.0, math.nan), ValueError),
        (lambda: TemperatureAnnealing(1.0, 1e-40), ValueError),
        (lambda: TemperatureAnnealing("1", 0.1), TypeError),
        (lambda: TemperatureAnnealing(1.0, 0.1, epochs=0), ValueError),
        (lambda: WeightWarmup(-1), ValueError),
        (lambda: WeightWarmup(1.5), ValueError),
    ],
)
def test_bad_arguments(make, error):
    with pytest.raises(error):
        make()
