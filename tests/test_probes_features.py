"""What a layer is (reused modules), the model's mode, and batches: rules every probe shares (issue 26)."""

import pytest
import torch
from helpers import gen
from torch import nn

from augnet import probes
from augnet.probes._common import Transformed, evaluating
from augnet.transforms import image as T


class Reuse(nn.Module):
    """One ReLU called twice, as torchvision's ResNet blocks do; the two calls see different tensors."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.relu = nn.Linear(4, 6), nn.Linear(6, 3), nn.ReLU()

    def forward(self, x):
        return self.relu(self.fc2(self.relu(self.fc1(x))))


def test_a_reused_module_is_one_layer_per_call():
    torch.manual_seed(0)
    net = Reuse().eval()
    x = torch.randn(9, 4, generator=gen(0))
    assert probes.layer_calls(net, x) == {"fc1": 1, "fc2": 1, "relu": 2}
    out = probes.features(net, x, ["relu#0", "relu#1"])
    with torch.no_grad():
        first = net.relu(net.fc1(x))
    torch.testing.assert_close(out["relu#0"], first)
    torch.testing.assert_close(out["relu#1"], net(x))
    # Before, "relu" silently meant the last call (features) or every call (select_tau); now it is refused.
    with pytest.raises(ValueError, match=r"called 2 times.*'relu#0', 'relu#1'"):
        probes.features(net, x, "relu")
    with pytest.raises(ValueError, match="called 2 time"):
        probes.features(net, x, "relu#2")
    with pytest.raises(ValueError, match="integer"):
        probes.features(net, x, "relu#last")
    torch.testing.assert_close(probes.features(net, x, "fc1#0")["fc1#0"], probes.features(net, x, "fc1")["fc1"])


def test_select_tau_normalises_and_ablates_the_named_call_only():
    torch.manual_seed(1)
    net = Reuse().eval()
    x = torch.randn(64, 4, generator=gen(1))
    y = net(x).argmax(1)
    with pytest.raises(ValueError, match="called 2 times"):
        probes.select_tau(net, "relu", x, y, x_t=x)
    seen = []
    net.fc2.register_forward_hook(lambda m, i, o: seen.append(i[0].clone()))
    with pytest.warns(RuntimeWarning, match="no tau"):
        out = probes.select_tau(net, "relu#0", x, y, taus=[1.0], x_t=x, batch_size=len(x))
    # tau = 1 leaves no unit above it: the first call's output is all zeros in the ablated pass ...
    assert out["active_fraction"] == [0.0]
    assert bool((seen[2] == 0).all())  # passes: clean, transformed (unablated), then the ablated ones
    # ... and the second call, after fc2, is untouched: the output is relu(fc2(0)) = relu(bias).
    expected = torch.relu(net.fc2.bias).expand(64, 3)
    assert out["accuracy_inactive_ablated"][0] == float((expected.argmax(1) == y).double().mean())
    second = probes.select_tau(net, "relu#1", x, y, taus=[0.0, 0.5], x_t=x)
    assert second["accuracy"] == 1.0 and second["tau"] is not None


def test_resnet50_reused_relu_calls_are_layers_of_their_own():
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    net = torchvision.models.resnet50(weights=None, num_classes=4).eval()
    x = torch.rand(4, 3, 32, 32, generator=gen(2))
    calls = probes.layer_calls(net, x, ["layer1.0.relu", "relu"])
    assert calls == {"layer1.0.relu": 3, "relu": 1}
    out = probes.features(net, x, ["layer1.0.relu#0", "layer1.0.relu#2", "layer1.0"], reduce="mean")
    assert out["layer1.0.relu#0"].shape == (4, 64) and out["layer1.0.relu#2"].shape == (4, 256)
    torch.testing.assert_close(out["layer1.0.relu#2"], out["layer1.0"])  # the block's output is its last ReLU
    y = torch.arange(4)
    # Before: a RuntimeError (size mismatch, 64 against 256) from normalising over every call.
    with pytest.raises(ValueError, match=r"layer1\.0\.relu#2"):
        probes.select_tau(net, "layer1.0.relu", x, y, taus=[0.0], transform=T.HorizontalFlip())
    res = probes.select_tau(net, "layer1.0.relu#2", x, y, taus=[0.0], transform=T.HorizontalFlip())
    assert res["drop"] == [0.0]


def test_probes_leave_a_model_in_training_mode_unchanged():
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    net = torchvision.models.resnet18(weights=None, num_classes=5).train()
    net.layer1[0].bn1.eval()  # a model half in training mode keeps each module's own mode
    state = {k: v.clone() for k, v in net.state_dict().items()}
    x = torch.rand(8, 3, 32, 32, generator=gen(3))
    y = torch.arange(8) % 5
    curve = probes.invariance_curve(net, x, T.Rotate(), [0.0, 0.5], batch_size=3)
    probes.select_tau(net, "layer1.0.relu#1", x, y, taus=[0.0], transform=T.Rotate())
    probes.layerwise_invariance(net, x, ["layer2"], tau=0.1, transform=T.Rotate())
    probes.similarity_search(net, x, y, {"rot": T.Rotate()})
    probes.ranking_probe_model(net, x, T.Rotate(), "layer3", param="angle")
    probes.category_accuracy(net, x, y, T.Rotate(), seen_classes=[0])
    # Before: running means moved by up to 1.3 and num_batches_tracked grew by 3 per probe call.
    for k, v in net.state_dict().items():
        assert torch.equal(v, state[k]), k
    assert net.training and not net.layer1[0].bn1.training and net.layer1[0].bn2.training
    # The probe saw the model in evaluation mode: the same numbers as with .eval().
    evaluated = probes.invariance_curve(net.eval(), x, T.Rotate(), [0.0, 0.5])
    torch.testing.assert_close(curve["scores"], evaluated["scores"])


def test_evaluating_restores_modes_on_error():
    net = nn.Sequential(nn.Linear(2, 2), nn.Dropout()).train()
    with pytest.raises(RuntimeError), evaluating(net):
        assert not net[1].training
        raise RuntimeError("boom")
    assert net.training and net[1].training


def test_batches_give_the_rows_of_the_whole_call():
    x = torch.rand(11, 3, 10, 10, generator=gen(4))
    for transform in (T.Rotate(), T.Contrast(), T.HorizontalFlip(), T.Brightness()):
        whole = transform(x, 0.7, generator=gen(5))
        t = Transformed(transform, x, 0.7, gen(5))
        torch.testing.assert_close(torch.cat([t.rows(0, 4), t.rows(4, 9), t.rows(9, 11)]), whole, rtol=0, atol=1e-6)
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3))
    whole = probes.invariance_curve(net, x, T.Rotate(), [0.3, 1.0], batch_size=len(x))
    streamed = probes.invariance_curve(net, x, T.Rotate(), [0.3, 1.0], batch_size=4)
    # The transformed rows are the whole call's exactly (above); the model's convolution rounds differently for
    # another batch size (7e-9 on the features with oneDNN), which the score's division by the baseline
    # distance amplifies to ~5e-6.
    torch.testing.assert_close(streamed["scores"], whole["scores"], rtol=1e-4, atol=1e-5)


class DictOutput(nn.Module):
    """Returns ``{key: logits, "features": pooled}`` as a transformers model returns its ModelOutput."""

    def __init__(self, key="logits"):
        super().__init__()
        torch.manual_seed(0)
        self.key, self.body, self.head = key, nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU()), nn.Linear(4, 3)

    def forward(self, x):
        h = self.body(x).mean((2, 3))
        return {self.key: self.head(h), "features": h}


def test_a_model_returning_a_dict_is_probed_at_its_layers_and_at_its_logits_entry():
    x = torch.rand(12, 3, 8, 8, generator=gen(0))
    model = DictOutput().eval()
    got = probes.features(model, x, ["body", "logits"])
    assert torch.equal(got["body"], model.body(x)) and torch.equal(got["logits"], model(x)["logits"])
    curve = probes.invariance_curve(model, x, T.Rotate(), [0.0])
    assert torch.allclose(curve["scores"][0], torch.ones(12, dtype=torch.float64))
    assert probes.report(model, x, ["Rotate"], magnitudes=[1.0], lie=False).layers == ["body", "logits"]
    # Without a "logits" entry the model's output is not read unless asked for, and then the error names its keys.
    other = DictOutput("scores").eval()
    assert torch.equal(probes.features(other, x, "body")["body"], other.body(x))
    with pytest.raises(TypeError, match=r"the model's output of type dict with keys \['scores', 'features'\]"):
        probes.features(other, x, "logits")
