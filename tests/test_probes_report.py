"""augnet.probes.report: every measure per layer, transform and magnitude, as one table."""

import csv
import json
import math
from collections import OrderedDict

import pytest
import torch
from helpers import gen
from torch import nn

import augnet
from augnet import probes
from augnet.probes.report import MEASURES, auto_layers
from augnet.transforms import image as T


class Units(nn.Module):
    """``relu(w_k * (sum of the channels) + b_k)`` per pixel: elementwise, so a flipped image gives the same
    numbers at flipped positions, and a hue rotation keeps the sum of the channels."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.tensor([1.0, -0.5, 0.8, 0.3])[:, None, None])
        self.b = nn.Parameter(torch.tensor([-0.5, 1.0, -1.2, 0.1])[:, None, None])

    def forward(self, x):
        return torch.relu(self.w * x.sum(1, keepdim=True) + self.b)


def invariant_net():
    """Units, then a global maximum (exact in any order) and a linear head: invariant to flips and to hue."""
    torch.manual_seed(0)
    return nn.Sequential(
        OrderedDict(
            mix=nn.Sequential(Units(), nn.Identity()),
            pool=nn.Sequential(nn.AdaptiveMaxPool2d(1), nn.Flatten()),
            head=nn.Linear(4, 3),
        )
    ).eval()


def test_an_invariant_model_gets_the_perfect_score_of_every_measure():
    # Perfect up to float32 rounding: augnet's flip samples pixel centres through bilinear weights.
    x = torch.rand(40, 3, 10, 10, generator=gen(0))
    rep = probes.report(invariant_net(), x, [T.HorizontalFlip(), T.Hue(), T.Rotate()], magnitudes=[0.5, 1.0])
    assert rep.layers == ["mix", "pool", "logits"]
    for layer in rep.layers:
        for t in ("HorizontalFlip", "Hue"):
            for m in (0.5, 1.0):
                assert rep.value("inv_augnet", layer, t, m) == pytest.approx(1.0, abs=1e-6), (layer, t)
                assert rep.value("inv_bouchacourt", layer, t, m) == pytest.approx(1.0, abs=1e-6), (layer, t)
                assert rep.value("invariance_error", layer, t, m) == pytest.approx(0.0, abs=1e-6), (layer, t)
                assert rep.value("equivariance_error", layer, t, m) == pytest.approx(0.0, abs=1e-5), (layer, t)
        assert rep.value("lie_derivative", layer, "Hue") < 1e-5
        assert math.isnan(rep.value("lie_derivative", layer, "HorizontalFlip"))  # a flip is no continuous family
        # The same model is not invariant to rotations, and every measure sees it.
        assert rep.value("inv_augnet", layer, "Rotate") < 0.99
        assert rep.value("invariance_error", layer, "Rotate") > 0.01
        assert rep.value("lie_derivative_relative", layer, "Rotate") > 0.01
    for layer in ("mix", "pool"):
        assert rep.value("neuron_invariance", layer, "HorizontalFlip") == pytest.approx(1.0, abs=1e-6)
        assert rep.value("neuron_invariance", layer, "Rotate") < 0.99
    assert math.isnan(rep.value("neuron_invariance", "logits", "Hue"))  # signed logits: not applicable
    notes = {r["note"] for r in rep.records if r["measure"] == "neuron_invariance" and r["layer"] == "logits"}
    assert notes == {"negative activations: Zaidi et al.'s measure needs a layer after its ReLU"}
    assert {r["measure"] for r in rep.records} == set(MEASURES)


def test_each_value_is_the_probe_it_names():
    torch.manual_seed(1)
    net = nn.Sequential(nn.Conv2d(3, 6, 3), nn.ReLU(), nn.Conv2d(6, 5, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten())
    x = torch.rand(30, 3, 12, 12, generator=gen(1))
    rep = probes.report(net, x, ["Rotate"], layers=["1", "logits"], magnitudes=[0.5], seed=3)
    z = probes.features(net, x, ["1", "logits"], reduce="mean")
    moved = T.Rotate()(x, 0.5, generator=gen(4))  # seed + 1
    z_t = probes.features(net, moved, ["1", "logits"], reduce="mean")
    perm = probes.derangement(30, gen(3))
    for layer in ("1", "logits"):
        score = probes.invariance_score(z[layer], z_t[layer], permutation=perm)
        assert rep.value("inv_augnet", layer, "Rotate") == pytest.approx(float(score.nanmedian()), rel=1e-6)
        scores = probes.equivariance_report(z[layer], z_t[layer], seed=3)["scores"]
        assert rep.value("equivariance_error", layer, "Rotate") == pytest.approx(scores["equivariance"], rel=1e-5)
    lie = probes.lie_derivative(net, x, T.Rotate(), ["1", "logits"], reduce="mean", equivariant=False)
    assert rep.value("lie_derivative_relative", "1", "Rotate") == pytest.approx(lie["mean_relative"]["1"], rel=1e-6)
    assert rep.value("lie_derivative", "logits", "Rotate") == pytest.approx(lie["mean"]["logits"], rel=1e-6)
    # 21 training rows determine maps of 6 or 5 features: no note; 8 inputs do not, and the record says so.
    assert all(not r["note"] for r in rep.records if r["measure"] == "equivariance_error")
    few = probes.report(net, x[:8], ["Rotate"], layers=["1"], magnitudes=[0.5])
    assert "6 training rows for a map with 7 parameters" in few.records[3]["note"]


def test_batches_give_the_records_of_one_batch():
    torch.manual_seed(2)
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3))
    x = torch.rand(24, 3, 10, 10, generator=gen(2))
    whole = probes.report(net, x, ["Rotate", "Brightness"], ["1", "logits"], [1.0], batch_size=24)
    parts = probes.report(net, x, ["Rotate", "Brightness"], ["1", "logits"], [1.0], batch_size=5)
    assert len(whole.records) == len(parts.records)
    for a, b in zip(whole.records, parts.records, strict=True):
        assert {k: v for k, v in a.items() if k != "value"} == {k: v for k, v in b.items() if k != "value"}
        assert a["value"] == pytest.approx(b["value"], rel=1e-4, abs=1e-6, nan_ok=True), (a["measure"], a["layer"])


def test_save_heatmap_and_verdict(tmp_path):
    pytest.importorskip("matplotlib")
    x = torch.rand(16, 3, 8, 8, generator=gen(3))
    rep = probes.report(invariant_net(), x, ["Rotate", "VerticalFlip"], magnitudes=[1.0])
    data = json.loads(rep.save(tmp_path / "r.json").read_text())
    assert data["info"]["n_inputs"] == 16 and len(data["records"]) == len(rep.records)
    with (rep.save(tmp_path / "r.csv")).open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(rep.records) and set(rows[0]) == set(rep.table())
    png = rep.heatmap(tmp_path / "fig" / "h.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = rep.verdict()
    assert "Rotate at mu = 1" in text and "VerticalFlip at mu = 1" in text
    with pytest.raises(ValueError, match=r"\.json or \.csv"):
        rep.save(tmp_path / "r.txt")


def test_repr_is_one_line_and_print_shows_the_verdict():
    x = torch.rand(16, 3, 8, 8, generator=gen(3))
    labels = torch.arange(16) % 2
    rep = probes.report(invariant_net(), x, ["Rotate"], magnitudes=[1.0], per_unit=True, by_class=labels, lie=False)
    text = repr(rep)
    assert "\n" not in text and len(text) < 300, text  # not every record and per-unit tensor
    assert text.startswith(f"ProbeReport({len(rep.records)} records; layers {rep.layers}") and "classes [0, 1]" in text
    assert f"per-unit values of {len(rep.units)} records" in text
    assert str(rep) == rep.verdict()


def test_value_refuses_a_name_the_report_does_not_hold():
    # A misspelt name read as NaN, as if the probe had found nothing; heatmap and units_plot refuse it alike.
    x = torch.rand(16, 3, 8, 8, generator=gen(3))
    rep = probes.report(invariant_net(), x, ["Rotate"], magnitudes=[0.5, 1.0], by_class=torch.arange(16) % 2, lie=False)
    assert math.isfinite(rep.value("inv_augnet", "logits", "Rotate", magnitude=0.5, cls=1))
    assert math.isnan(rep.value("lie_derivative", "logits", "Rotate"))  # a measure not run (lie=False): NaN
    for kwargs, match in (
        ({"measure": "inv_augnt"}, "unknown measure 'inv_augnt'"),
        ({"layer": "logit"}, r"layer 'logit' was not probed; the report's layers are \["),
        ({"transform": "Rotation"}, r"transform 'Rotation' was not probed; the report's transforms are \['Rotate'\]"),
        ({"magnitude": 0.3}, r"magnitude 0.3 was not swept"),
        ({"cls": 7}, r"cls 7 is not a class of this report; its classes are \[0, 1\]"),
        ({"cls": True}, r"cls True is not a class"),  # True == 1, but it is not a class label
    ):
        args = {"measure": "inv_augnet", "layer": "logits", "transform": "Rotate", **kwargs}
        with pytest.raises(ValueError, match=match):
            rep.value(**args)


def test_auto_layers_of_common_models():
    torchvision = pytest.importorskip("torchvision")
    assert auto_layers(torchvision.models.resnet18(weights=None)) == ["layer1", "layer2", "layer3", "layer4", "logits"]
    vit = torchvision.models.VisionTransformer(16, 8, 3, 2, 16, 32)
    assert auto_layers(vit) == [f"encoder.layers.encoder_layer_{i}" for i in range(3)] + ["logits"]
    flat = nn.Sequential(*[nn.Linear(4, 4) for _ in range(12)])
    assert auto_layers(flat) == ["0", "1", "3", "4", "6", "7", "9", "10", "logits"]
    trunk = nn.Sequential(nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU()), nn.Sequential(nn.Flatten(), nn.LazyLinear(2)))
    model = augnet.AugNet(trunk, augnet.AugmentationLayer([T.Rotate()]))
    assert auto_layers(model) == ["trunk.0", "logits"]
    # A body that is one block of many layers (VGG's and AlexNet's features) is read at 8 of them, evenly spaced,
    # the block's output among them, not as one layer.
    vgg = torchvision.models.vgg11(num_classes=10)
    assert auto_layers(vgg) == [f"features.{i}" for i in (0, 3, 6, 9, 11, 14, 17, 20)] + ["logits"]
    body = nn.Sequential(nn.Sequential(*[nn.Linear(4, 4) for _ in range(9)]), nn.Linear(4, 2))
    assert auto_layers(body) == [f"0.{i}" for i in (0, 1, 2, 3, 5, 6, 7, 8)] + ["logits"]


def test_any_model_a_user_brings():
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    x = torch.rand(12, 3, 32, 32, generator=gen(5))
    vit = torchvision.models.VisionTransformer(32, 8, 2, 2, 16, 32, num_classes=5)
    nn.init.normal_(vit.heads.head.weight)  # torchvision starts the head at 0
    rep = probes.report(vit, x, ["Rotate"], magnitudes=[0.5])
    assert all(math.isfinite(rep.value(m, "logits", "Rotate")) for m in ("inv_augnet", "lie_derivative"))
    trunk = nn.Sequential(nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU()), nn.AdaptiveAvgPool2d(1), nn.Flatten())
    model = augnet.AugNet(trunk, augnet.AugmentationLayer([T.Rotate()], init_magnitude=0.2)).train()
    rep = probes.report(model, x, ["Rotate"], magnitudes=[0.5], copies=2)
    assert model.training and rep.layers == ["trunk.0", "logits"]
    from augnet.probes import lie

    if lie._warps_differentiate_twice():
        assert math.isfinite(rep.value("lie_derivative", "logits", "Rotate"))
    else:  # torch 2.11: an AugNet's warps cannot be differentiated twice; the rest of the report stands
        assert math.isnan(rep.value("lie_derivative", "logits", "Rotate"))
        assert math.isfinite(rep.value("inv_augnet", "logits", "Rotate"))


class _Opaque(torch.autograd.Function):
    """Doubling, with a backward that cannot itself be differentiated and no forward-mode rule."""

    @staticmethod
    def forward(ctx, a):
        return a * 2

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        return grad * 2


class _OpaqueNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.head = nn.Linear(4, 3)

    def forward(self, x):
        return self.head(_Opaque.apply(self.conv(x)).mean((2, 3)))


def test_a_model_torch_cannot_differentiate_twice_gets_every_other_measure():
    # The Lie derivative needs J u (forward mode, or a double backward); a model with neither used to stop the
    # whole report. Its Lie derivative is NaN with the reason, and every other measure is there.
    torch.manual_seed(0)
    x = torch.rand(12, 3, 16, 16, generator=gen(5))
    rep = probes.report(_OpaqueNet(), x, ["Rotate"], magnitudes=[0.5])
    lie = [r for r in rep.records if r["measure"] == "lie_derivative"]
    assert lie and all(math.isnan(r["value"]) and r["note"].startswith("cannot differentiate _OpaqueNet") for r in lie)
    assert math.isfinite(rep.value("inv_augnet", "logits", "Rotate"))


def test_bad_input_is_refused_before_any_work():
    net = invariant_net()
    x = torch.rand(16, 3, 8, 8)
    calls = []
    net.register_forward_hook(lambda *a: calls.append(1))
    with pytest.raises(ValueError, match="unknown transform 'Spin'"):
        probes.report(net, x, ["Spin"])
    with pytest.raises(ValueError, match="N >= 8"):
        probes.report(net, x[:4], ["Rotate"])
    with pytest.raises(ValueError, match="magnitudes"):
        probes.report(net, x, ["Rotate"], magnitudes=[0.0, 0.5])
    with pytest.raises(ValueError, match="holdout"):
        probes.report(net, x, ["Rotate"], holdout=1.0)
    with pytest.raises(ValueError, match="unknown layer"):
        probes.report(net, x, ["Rotate"], layers=["nope"])
    with pytest.raises(ValueError, match="RGB"):
        probes.report(net, x[:, :1], ["Hue"])
    with pytest.raises(TypeError, match="image transform"):
        probes.report(net, x, [lambda b, m: b])
    assert calls == []


def test_the_verdict_gives_the_ranking_its_chance_band_on_the_held_out_pairs():
    # The ranker of an exactly flip-invariant model fits the logits' rounding (copies differ by ~50 float32 ulps
    # after the pooling's sums): whatever its held-out accuracy, it is within chance's band on that few pairs, and
    # the verdict says so; a model whose logits read the brightness ranks it far above the band.
    torch.manual_seed(0)
    x = torch.rand(64, 3, 16, 16, generator=gen(4))
    pooled = nn.Sequential(nn.Conv2d(3, 8, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))
    for seed in range(3):
        rep = probes.report(pooled.eval(), x, ["HorizontalFlip"], ["4"], magnitudes=[1.0], lie=False, seed=seed)
        pairs = rep.info["ranking_held_out"]["HorizontalFlip"]
        band = 1.96 * (0.25 / pairs) ** 0.5
        assert f"{pairs} held-out pairs: chance 0.5 ± {band:.2f}, no better than chance" in rep.verdict()
    bright = nn.Sequential(nn.Flatten(), nn.Linear(3 * 256, 2))
    with torch.no_grad():
        bright[1].weight.fill_(1.0 / 768)
    rep = probes.report(bright.eval(), x, ["Brightness"], ["1"], magnitudes=[1.0], lie=False)
    assert rep.value("ranking_accuracy", "1", "Brightness") > 0.9
    assert "held-out pairs: chance 0.5 ±" in rep.verdict() and "no better than chance" not in rep.verdict()
