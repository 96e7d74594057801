"""A user's sweep of measuring and training: probes on their own models, fit, accuracy and compare.

Each test is a defect found by using augnet as an engineer who probes an existing model, trains it with
``fit`` and compares methods on their own data: it failed before the fix it names.
"""

from __future__ import annotations

import collections

import pytest
import torch
from torch import nn

from augnet import probes
from augnet.training import accuracy, fit
from augnet.transforms import image as T


def _net(classes: int = 3) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(4, classes),
    )


def _partly_meta(index: int) -> nn.Sequential:
    torch.manual_seed(0)
    model = _net()
    model[index].to("meta")  # a part built on meta and never loaded
    return model


@pytest.mark.parametrize("index", [0, 5])
def test_fit_names_the_parameters_of_a_model_partly_on_meta_before_anything_changes(index):
    # Was: RuntimeError "Tensor on device meta is not on the expected device cpu!" from the first step (a meta
    # first layer: "the model is on meta ... a dry run"), naming nothing.
    model = _partly_meta(index).eval()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.rand(8, 3, 6, 6), torch.arange(8) % 3
    with pytest.raises(ValueError, match=rf"on meta, which hold no values \({index}\.weight, {index}\.bias\)"):
        fit(model, x, y, opt, 1, 4, regularizer="none", loss_fn=nn.functional.cross_entropy)
    assert not model.training  # refused before model.train()
    assert not opt.state


@pytest.mark.parametrize("index", [0, 5])
def test_accuracy_names_the_parameters_of_a_model_partly_on_meta(index):
    # Was: RuntimeError "Tensor on device meta is not on the expected device cpu!" (or "... cpu is not on the
    # expected device meta!") from inside the model.
    with pytest.raises(ValueError, match=rf"{index}\.weight, {index}\.bias"):
        accuracy(_partly_meta(index), torch.rand(4, 3, 6, 6), torch.arange(4) % 3)


def test_accuracy_refuses_a_model_wholly_on_meta():
    # Was: RuntimeError "Tensor.item() cannot be called on meta tensors".
    with torch.device("meta"):
        model = _net()
    with pytest.raises(ValueError, match="on meta, which holds no values"):
        accuracy(model, torch.rand(4, 3, 6, 6), torch.arange(4) % 3)


def test_accuracy_names_a_model_output_that_is_not_a_tensor():
    # Was: AttributeError "'tuple' object has no attribute 'dim'".
    class Pair(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = _net()

        def forward(self, x):
            return self.net(x), None

    model = Pair().train()
    with pytest.raises(TypeError, match="returns a \\(B, classes\\) tensor of scores, got a tuple"):
        accuracy(model, torch.rand(4, 3, 6, 6), torch.arange(4) % 3)
    assert model.training and model.net[1].training  # its modes as they were


@pytest.mark.parametrize(
    "probe",
    [
        lambda m, x: probes.report(m, x, ["Rotate"], magnitudes=[0.5], lie=False),
        lambda m, x: probes.invariance_curve(m, x, T.Rotate(), [0.5]),
        lambda m, x: probes.features(m, x, ["2"]),
        lambda m, x: probes.lie_derivative(m, x, T.Rotate()),
    ],
    ids=["report", "invariance_curve", "features", "lie_derivative"],
)
def test_probes_name_the_parameters_of_a_model_partly_on_meta(probe):
    # Was: RuntimeError "Tensor on device meta is not on the expected device cpu!" from the model's first pass.
    model = _partly_meta(5).train()
    with pytest.raises(ValueError, match=r"2 parameters or buffers on meta \(5\.weight, 5\.bias\)"):
        probe(model, torch.rand(8, 3, 8, 8))
    assert model.training


def test_a_probe_reads_a_named_tuple_output_at_its_logits_field():
    # Was: a named tuple (probs, logits) read at its first item, the probabilities, while the report said it
    # read the logits ("logits: the output of ..."): every measure at "logits" silently of the softmax.
    Out = collections.namedtuple("Out", "probs logits")

    class Named(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = _net(4)

        def forward(self, x):
            z = self.net(x)
            return Out(z.softmax(1), z)

    torch.manual_seed(0)
    named = Named()
    x = torch.rand(12, 3, 8, 8)
    plain = probes.invariance_curve(named.net, x, T.Rotate(), [0.5])["scores"]
    read = probes.invariance_curve(named, x, T.Rotate(), [0.5])["scores"]
    torch.testing.assert_close(read, plain)
    assert torch.equal(probes.features(named, x, ["logits"])["logits"], named.eval()(x).logits)


def test_compare_names_a_data_set_of_dict_items_without_the_wrong_hint():
    # Was: "item 0 of the data set must be an (input tensor, label) pair, got dict (give the data set a transform
    # to tensors, ...)": a fix that does not apply to items that are already tensors, in a dict.
    from augnet.experiments import compare

    class Dicts(torch.utils.data.Dataset):
        def __len__(self):
            return 8

        def __getitem__(self, i):
            return {"image": torch.rand(3, 8, 8), "label": i % 2}

    test = (torch.rand(8, 3, 8, 8), torch.arange(8) % 2)
    with pytest.raises(TypeError, match=r"item 0 of the data set is a dict with keys \['image', 'label'\]") as info:
        compare(lambda: nn.Sequential(nn.Flatten(), nn.Linear(192, 2)), Dicts(), test, ["none"], progress=False)
    assert "transform to tensors" not in str(info.value)
