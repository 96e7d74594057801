"""ranking_probe, ranking_probe_model, pairwise_rank_loss, layer_importance, and the per-layer probe,
tasks x layers table and heatmap (Yan & Huang, Table II and Fig. 5)."""

import math
import subprocess
import sys
import warnings

import pytest
import torch
from helpers import gen
from torch import nn

import augnet
from augnet.probes.ranking import (
    layer_importance,
    pairwise_rank_loss,
    plot_ranking_heatmap,
    ranking_probe,
    ranking_probe_model,
    ranking_probe_per_layer,
    ranking_probe_per_layer_model,
    ranking_table,
)
from augnet.transforms import image as T

# ---------------------------------------------------------------- the loss


def test_pair_loss_is_log_two_for_equal_scores():
    s = torch.randn(7, generator=gen(0), dtype=torch.float64)
    loss = pairwise_rank_loss(s, s.clone(), reduction="none")
    torch.testing.assert_close(loss, torch.full_like(s, math.log(2.0)))
    assert float(pairwise_rank_loss(s, s.clone())) == pytest.approx(math.log(2.0))


def test_pair_loss_is_symmetric_under_swapping_the_pair_and_its_label():
    a = torch.randn(50, generator=gen(1), dtype=torch.float64)
    b = torch.randn(50, generator=gen(2), dtype=torch.float64)
    sign = torch.where(torch.rand(50, generator=gen(3)) < 0.5, -1.0, 1.0).double()
    torch.testing.assert_close(
        pairwise_rank_loss(a, b, sign, reduction="none"), pairwise_rank_loss(b, a, -sign, reduction="none")
    )
    # Without a sign, the first argument is the one that should rank higher.
    torch.testing.assert_close(pairwise_rank_loss(a, b, reduction="none"), torch.log1p(torch.exp(-(a - b))))
    torch.testing.assert_close(pairwise_rank_loss(a, b, -torch.ones(50), "none"), torch.log1p(torch.exp(a - b)))
    # Ranking the right way round costs less than the wrong way round, and a tie is log 2.
    assert float(pairwise_rank_loss(torch.tensor([2.0]), torch.tensor([0.0]))) < math.log(2.0)
    assert float(pairwise_rank_loss(torch.tensor([0.0]), torch.tensor([2.0]))) > math.log(2.0)
    assert float(pairwise_rank_loss(a, b, torch.zeros(50))) == pytest.approx(math.log(2.0))


def test_pair_loss_is_stable_for_large_gaps():
    big = torch.tensor([1e4, -1e4], dtype=torch.float64)
    loss = pairwise_rank_loss(big, torch.zeros(2, dtype=torch.float64), reduction="none")
    assert torch.isfinite(loss).all()
    assert float(loss[0]) == 0.0 and float(loss[1]) == pytest.approx(1e4)


# ---------------------------------------------------------------- the probe


def images(b, seed=0):
    return torch.rand(b, 3, 8, 8, generator=gen(seed))


class Centred(nn.Module):
    """Each image minus its own mean: exactly what a brightness shift does not reach."""

    def forward(self, x):
        return x - x.mean((1, 2, 3), keepdim=True)


class TwoBranch(nn.Module):
    def __init__(self):
        super().__init__()
        self.raw = nn.Identity()
        self.centred = Centred()

    def forward(self, x):
        return torch.cat([self.raw(x), self.centred(x)], 1)


def test_brightness_is_ranked_from_globally_pooled_pixels():
    x = images(300)
    out = ranking_probe_model(nn.Identity(), x, T.Brightness(), param="shift", seed=0)
    assert out["accuracy"] >= 0.95
    assert out["n_test"] == 150 and out["n_train"] == 150
    # The copy with the larger shift scores higher: brighter pixels get positive weights.
    assert bool((out["weight"] > 0).all())
    assert out["m_a"].shape == (300,) and float(out["m_a"].abs().max()) <= 0.5
    # The same with shifts set by a sampler, and with a plain callable transform.
    injected = ranking_probe_model(nn.Identity(), x, T.Brightness(), param="shift", sampler=(-0.4, 0.4), seed=1)
    assert injected["accuracy"] >= 0.95 and float(injected["m_b"].abs().max()) <= 0.4

    def gain(images, m):
        return images * m[:, None, None, None]

    scaled = ranking_probe_model(nn.Identity(), x, gain, sampler=(0.5, 1.5), seed=2)
    assert scaled["accuracy"] >= 0.95


def test_importance_finds_the_layer_a_model_encodes_brightness_in():
    out = ranking_probe_model(TwoBranch(), images(200), T.Brightness(), ["raw", "centred"], param="shift")
    assert out["accuracy"] >= 0.95
    assert sum(out["importance"].values()) == pytest.approx(1.0)
    assert out["importance"]["raw"] > 0.99


def test_an_augnet_is_probed_through_its_trunk():
    torch.manual_seed(0)
    trunk = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
    model = augnet.AugNet(trunk, augnet.AugmentationLayer([T.HorizontalFlip()], init_magnitude=0.5)).eval()
    out = ranking_probe_model(model, images(100), T.Brightness(), ["trunk.0", "trunk.1"], param="shift", copies=3)
    assert out["accuracy"] >= 0.95 and set(out["importance"]) == {"trunk.0", "trunk.1"}


def test_random_magnitudes_rank_at_chance():
    g = gen(4)
    n = 400
    z_a, z_b = torch.randn(n, 8, generator=g), torch.randn(n, 8, generator=g)
    m_a, m_b = torch.rand(n, generator=g), torch.rand(n, generator=g)
    out = ranking_probe(z_a, z_b, m_a, m_b, generator=gen(5))
    assert 0.4 <= out["accuracy"] <= 0.6
    assert out["correct"].shape == (out["n_test"],)


@pytest.mark.parametrize("factor", [1e-13, 1e13])
def test_ranking_does_not_depend_on_the_features_scale(factor):
    # Before, channels were dropped as constant below an absolute 1e-12: accuracy 0.5 instead of 0.98 at 1e-13.
    g = gen(8)
    m_a, m_b = torch.rand(400, generator=g), torch.rand(400, generator=g)
    noise = torch.randn(400, 4, generator=g)
    z_a = torch.cat([m_a[:, None], noise[:, :2]], 1).double()
    z_b = torch.cat([m_b[:, None], noise[:, 2:]], 1).double()
    ref = ranking_probe(z_a, z_b, m_a, m_b, generator=gen(0))
    scaled = ranking_probe(factor * z_a, factor * z_b, m_a, m_b, generator=gen(0))
    assert ref["accuracy"] > 0.95 and scaled["accuracy"] == ref["accuracy"]
    torch.testing.assert_close(scaled["correct"], ref["correct"])


def test_model_probe_in_batches_equals_one_batch():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Conv2d(4, 4, 3), nn.ReLU())
    x = images(50)
    whole = ranking_probe_model(net, x, T.Rotate(), ["1", "3"], param="angle", batch_size=50)
    parts = ranking_probe_model(net, x, T.Rotate(), ["1", "3"], param="angle", batch_size=7)
    torch.testing.assert_close(parts["m_a"], whole["m_a"])
    torch.testing.assert_close(parts["weight"], whole["weight"], rtol=1e-4, atol=1e-6)
    assert parts["accuracy"] == whole["accuracy"]


def test_features_that_do_not_change_give_exactly_chance():
    z = torch.randn(40, 5, generator=gen(6))
    with pytest.warns(RuntimeWarning, match="every weight is 0"):
        out = ranking_probe(z, z.clone(), torch.rand(40, generator=gen(7)), torch.rand(40, generator=gen(8)))
    assert out["accuracy"] == 0.5 and bool((out["weight"] == 0).all())
    assert all(math.isnan(v) for v in out["importance"].values())


def test_a_change_at_the_rounding_of_the_features_dtype_is_not_a_signal():
    # 1 + m * 1e-7 in float32 rounds to 1 or 1 + 2**-23 by the magnitude: a ranker fits that rounding (a
    # "signal" of a brightness-blind model's features). In float64 the same change is far above rounding.
    g = gen(9)
    m_a, m_b = torch.rand(300, generator=g), torch.rand(300, generator=g)
    base = torch.ones(300, 3, dtype=torch.float64)
    z_a, z_b = base + 1e-7 * m_a[:, None].double(), base + 1e-7 * m_b[:, None].double()
    assert ranking_probe(z_a, z_b, m_a, m_b, generator=gen(0))["accuracy"] > 0.95
    with pytest.warns(RuntimeWarning) as caught:
        coarse = ranking_probe(z_a.float(), z_b.float(), m_a, m_b, generator=gen(0))
        layers = ranking_probe_per_layer({"f": z_a.float()}, {"f": z_b.float()}, m_a, m_b, generator=gen(0))
    assert coarse["accuracy"] == 0.5 and bool((coarse["weight"] == 0).all())
    assert layers["accuracy"]["f"] == 0.5  # the per-layer probe reads the features' own precision too
    said = [str(w.message) for w in caught]
    assert any(m.startswith("ranking_probe: the copies' features differ only at the rounding") for m in said)
    assert any(m.startswith("layer 'f': ranking_probe: the copies' features differ only") for m in said)
    strong = ranking_probe((base + 1e-3 * m_a[:, None]).float(), (base + 1e-3 * m_b[:, None]).float(), m_a, m_b,
                           generator=gen(0))  # fmt: skip
    assert strong["accuracy"] > 0.95  # well above float32's rounding: kept


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_features_that_move_are_ranked(dtype):
    # The rounding floor scales with the dtype's precision: a shift of 5 % of the features is far above
    # half precision's rounding and must rank as in float32 (a floor of 64 units dropped every channel).
    g = gen(10)
    m_a, m_b = torch.rand(400, generator=g), torch.rand(400, generator=g)
    base, direction = torch.randn(400, 8, generator=g), torch.randn(8, generator=g)
    z_a, z_b = base + 0.05 * m_a[:, None] * direction, base + 0.05 * m_b[:, None] * direction
    full = ranking_probe(z_a, z_b, m_a, m_b, generator=gen(1))["accuracy"]
    half = ranking_probe(z_a.to(dtype), z_b.to(dtype), m_a, m_b, generator=gen(1))["accuracy"]
    assert full > 0.95 and half > 0.9


def layered_features(signal_in, n=800, seed=0):
    """Three layers; only ``signal_in`` moves with the magnitude. The others are either image
    content that both copies share (an invariant layer) or independent noise."""
    g = gen(seed)
    m_a, m_b = torch.rand(n, generator=g), torch.rand(n, generator=g)
    content = {"early": torch.randn(n, 4, generator=g), "middle": torch.randn(n, 20, generator=g)}

    def copy(m):
        out = {
            "early": content["early"] + 0.01 * torch.randn(n, 4, generator=g),
            "middle": content["middle"] + 0.01 * torch.randn(n, 20, generator=g),
            "late": 0.3 * torch.randn(n, 16, 3, 3, generator=g),  # a feature map, pooled by the probe
        }
        out[signal_in] = out[signal_in] + m.reshape(n, *([1] * (out[signal_in].dim() - 1)))
        return out

    return copy(m_a), copy(m_b), m_a, m_b


@pytest.mark.parametrize("signal_in", ["early", "middle", "late"])
@pytest.mark.parametrize("aggregate", ["mean", "max"])
def test_layer_importance_concentrates_on_the_layer_with_the_signal(signal_in, aggregate):
    z_a, z_b, m_a, m_b = layered_features(signal_in)
    out = ranking_probe(z_a, z_b, m_a, m_b, aggregate=aggregate, generator=gen(1))
    assert out["sizes"] == {"early": 4, "middle": 20, "late": 16}
    assert out["accuracy"] > 0.85
    assert sum(out["importance"].values()) == pytest.approx(1.0)
    assert out["importance"][signal_in] > 0.8
    again = layer_importance(out["weight"], out["std"], out["sizes"], aggregate)
    assert again == pytest.approx(out["importance"])


def test_layer_importance_by_hand():
    weight = torch.tensor([1.0, -3.0, 0.5, 0.0])
    std = torch.tensor([2.0, 1.0, 2.0, 7.0])
    # |w| * std = [2, 3, 1, 0]: layer a = [2, 3], layer b = [1, 0].
    mean = layer_importance(weight, std, {"a": 2, "b": 2}, "mean")
    assert mean == pytest.approx({"a": 2.5 / 3.0, "b": 0.5 / 3.0})
    assert layer_importance(weight, std, {"a": 2, "b": 2}, "max") == pytest.approx({"a": 0.75, "b": 0.25})


def test_probe_is_deterministic_given_the_generator_and_drops_ties():
    z_a, z_b, m_a, m_b = layered_features("early", n=120)
    m_b = m_b.clone()
    m_b[:10] = m_a[:10]
    one = ranking_probe(z_a, z_b, m_a, m_b, generator=gen(3))
    two = ranking_probe(z_a, z_b, m_a, m_b, generator=gen(3))
    assert one["n_ties"] == 10 and one["n_train"] + one["n_test"] == 110
    assert not set(one["test_index"].tolist()) & set(range(10))
    assert torch.equal(one["weight"], two["weight"]) and one["accuracy"] == two["accuracy"]
    assert not set(one["test_index"].tolist()) & set(one["train_index"].tolist())


def test_inputs_are_not_modified():
    z_a, z_b, m_a, m_b = layered_features("early", n=60)
    copies = [{k: v.clone() for k, v in z.items()} for z in (z_a, z_b)]
    ranking_probe(z_a, z_b, m_a, m_b)
    for z, c in zip((z_a, z_b), copies, strict=True):
        assert all(torch.equal(z[k], c[k]) for k in z)


def test_bad_input():
    z = torch.randn(20, 3)
    m = torch.rand(20)
    with pytest.raises(ValueError, match="same shape"):
        pairwise_rank_loss(torch.zeros(3), torch.zeros(4))
    with pytest.raises(ValueError, match="sign must hold"):
        pairwise_rank_loss(torch.zeros(3), torch.zeros(3), torch.tensor([0.5, 1.0, 1.0]))
    with pytest.raises(ValueError, match="reduction must be one of"):
        pairwise_rank_loss(torch.zeros(3), torch.zeros(3), reduction="max")
    with pytest.raises(TypeError, match="must be tensors"):
        pairwise_rank_loss([0.0], torch.zeros(1))
    with pytest.raises(ValueError, match="same layers"):
        ranking_probe({"a": z}, {"b": z}, m, m)
    with pytest.raises(ValueError, match="layer 'features'"):
        ranking_probe(z, torch.randn(20, 4), m, m)
    with pytest.raises(ValueError, match=r"m_b must have shape \(20,\)"):
        ranking_probe(z, z, m, torch.rand(19))
    with pytest.raises(ValueError, match="aggregate must be one of"):
        ranking_probe(z, z, m, torch.rand(20), aggregate="median")
    with pytest.raises(ValueError, match="test_fraction"):
        ranking_probe(z, z, m, torch.rand(20), test_fraction=1.0)
    with pytest.raises(ValueError, match="at least one training and one held-out pair"):
        ranking_probe(z, z, m, m.clone())  # every pair is a tie
    with pytest.raises(ValueError, match="NaN or infinite"):
        ranking_probe(z, torch.full((20, 3), math.nan), m, torch.rand(20))
    with pytest.raises(TypeError, match="z_a must be a tensor or a dict"):
        ranking_probe([[0.0]], z, m, m)
    with pytest.raises(ValueError, match="sizes add up to 3"):
        layer_importance(torch.ones(4), torch.ones(4), {"a": 1, "b": 2})
    with pytest.raises(ValueError, match="aggregate must be one of"):
        layer_importance(torch.ones(2), torch.ones(2), {"a": 2}, "sum")
    x = images(10)
    with pytest.raises(ValueError, match="has no param 'angle'"):
        ranking_probe_model(nn.Identity(), x, T.Brightness(), param="angle")
    with pytest.raises(ValueError, match="give param"):
        ranking_probe_model(nn.Identity(), x, T.Brightness())
    with pytest.raises(ValueError, match="sampler must return"):
        ranking_probe_model(nn.Identity(), x, T.Brightness(), param="shift", sampler=lambda n, g: torch.rand(n + 1))
    with pytest.raises(TypeError, match="sampler must be a callable"):
        ranking_probe_model(nn.Identity(), x, T.Brightness(), param="shift", sampler=0.5)
    with pytest.raises(ValueError, match="low < high"):
        ranking_probe_model(nn.Identity(), x, T.Brightness(), param="shift", sampler=(1.0, 0.0))
    with pytest.raises(TypeError, match="needs an augnet transform"):
        ranking_probe_model(nn.Identity(), x, lambda x, m: x, param="shift")
    with pytest.raises(ValueError, match="at least 2 images"):
        ranking_probe_model(nn.Identity(), x[:1], T.Brightness(), param="shift")


# ---------------------------------------------------------------- every layer alone (Table II), tasks x layers (Fig. 5)


def known_layers(n=800, seed=0):
    """Layers with a known answer: exact monotone functions of the magnitude (increasing, decreasing, a feature
    map), pure noise, and content both copies share (invariant)."""
    g = gen(seed)
    m_a, m_b = 2 * torch.rand(n, generator=g) - 1, 2 * torch.rand(n, generator=g) - 1
    content = torch.randn(n, 6, generator=g)

    def copy(m):
        return {
            "increasing": torch.stack([torch.exp(m), m**3, torch.tanh(3 * m)], 1),
            "decreasing": torch.stack([-(m**3), torch.exp(-2 * m)], 1),
            "map": m[:, None, None, None] * torch.ones(1, 4, 3, 3) + 5.0,  # pooled by the probe
            "noise": torch.randn(n, 16, generator=g),
            "invariant": content.clone(),
        }

    return copy(m_a), copy(m_b), m_a, m_b


def test_per_layer_monotone_layers_rank_perfectly_noise_at_chance():
    z_a, z_b, m_a, m_b = known_layers()
    with pytest.warns(RuntimeWarning, match="layer 'invariant': .*every weight is 0"):
        out = ranking_probe_per_layer(z_a, z_b, m_a, m_b, generator=gen(1))
    acc = out["accuracy"]
    assert list(acc) == ["increasing", "decreasing", "map", "noise", "invariant"]
    assert acc["increasing"] == acc["decreasing"] == acc["map"] == 1.0
    assert 0.42 <= acc["noise"] <= 0.58 and out["n_test"] == 400
    assert acc["invariant"] == 0.5  # nothing moves between the copies: every score ties
    # The noise layer overfits its training pairs a little, never the held-out ones.
    assert out["train_accuracy"]["noise"] > acc["noise"] - 0.05
    # Every layer was fitted and scored on the same pairs.
    for r in out["layers"].values():
        assert torch.equal(r["test_index"], out["test_index"]) and torch.equal(r["train_index"], out["train_index"])
        assert list(r["sizes"]) == [next(iter(r["sizes"]))]  # each scorer saw one layer
    # The all-layers scorer (Fig. 5's importances) puts almost nothing on noise or the invariant layer.
    assert out["combined"]["accuracy"] > 0.95  # the noise channels cost the all-layers scorer a little
    assert sum(out["importance"].values()) == pytest.approx(1.0)
    assert out["importance"]["noise"] < 0.1 and out["importance"]["invariant"] < 1e-6


def test_per_layer_is_ranking_probe_on_each_layer_alone():
    z_a, z_b, m_a, m_b = known_layers(n=200, seed=2)
    del z_a["invariant"], z_b["invariant"]
    g = gen(3)
    out = ranking_probe_per_layer(z_a, z_b, m_a, m_b, l2=1e-2, aggregate="max", generator=g)
    for layer in z_a:
        alone = ranking_probe({layer: z_a[layer]}, {layer: z_b[layer]}, m_a, m_b, l2=1e-2, generator=gen(3))
        assert out["accuracy"][layer] == alone["accuracy"]
        assert torch.equal(out["layers"][layer]["weight"], alone["weight"])
    whole = ranking_probe(z_a, z_b, m_a, m_b, l2=1e-2, aggregate="max", generator=gen(3))
    assert torch.equal(out["combined"]["weight"], whole["weight"]) and out["importance"] == whole["importance"]
    # The caller's generator moved on as by one ranking_probe call.
    one = gen(3)
    ranking_probe(z_a, z_b, m_a, m_b, generator=one)
    assert torch.equal(torch.rand(4, generator=g), torch.rand(4, generator=one))
    # Without combined, no all-layers fit; a single tensor is one layer named "features".
    lean = ranking_probe_per_layer(z_a["increasing"], z_b["increasing"], m_a, m_b, combined=False)
    assert lean["combined"] is None and lean["importance"] is None and lean["accuracy"] == {"features": 1.0}


def test_per_layer_model_probes_every_layer_in_one_call():
    x = images(300)
    layers = ["raw", "centred", "output"]
    with pytest.warns(RuntimeWarning, match="layer 'centred'"):
        out = ranking_probe_per_layer_model(TwoBranch(), x, T.Brightness(), layers, param="shift", seed=4)
    # Brightness moves the raw pixels; the per-image-centred branch pools to 0 whatever the shift.
    assert out["accuracy"] == {"raw": 1.0, "centred": 0.5, "output": 1.0}
    assert out["importance"]["centred"] < 1e-4 and out["m_a"].shape == (300,)
    for layer in ["raw", "output"]:
        alone = ranking_probe_model(TwoBranch(), x, T.Brightness(), [layer], param="shift", seed=4)
        assert out["accuracy"][layer] == alone["accuracy"]
        assert torch.equal(out["layers"][layer]["test_index"], alone["test_index"])


def two_task_results():
    x = images(200)
    layers = ["raw", "centred", "output"]

    def gain(images, m):
        return images * m[:, None, None, None]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the centred branch does not move under a shift
        return {
            "brightness": ranking_probe_per_layer_model(TwoBranch(), x, T.Brightness(), layers, param="shift"),
            "gain": ranking_probe_per_layer_model(TwoBranch(), x, gain, layers, sampler=(0.5, 1.5), seed=1),
        }


def test_table_of_tasks_by_layers():
    results = two_task_results()
    table = ranking_table(results)
    assert table["tasks"] == ["brightness", "gain"] and table["layers"] == ["raw", "centred", "output"]
    assert table["values"].shape == (2, 3) and table["values"].dtype == torch.float64 and table["value"] == "accuracy"
    for i, task in enumerate(table["tasks"]):
        for j, layer in enumerate(table["layers"]):
            assert float(table["values"][i, j]) == results[task]["accuracy"][layer]
    assert table["values"][:, 0].tolist() == [1.0, 1.0] and float(table["values"][0, 1]) == 0.5
    # Fig. 5: the all-layers scorer's importances, each task's row summing to 1.
    imp = ranking_table(results, "importance")
    torch.testing.assert_close(imp["values"].sum(1), torch.ones(2, dtype=torch.float64))
    # A ranking_probe dict works for importances; chosen columns, in order; a layer a task lacks is NaN.
    mixed = ranking_table(
        {"one": results["gain"]["combined"], "two": {"output": 0.75}}, "importance", layers=["output", "raw"]
    )
    assert mixed["layers"] == ["output", "raw"] and mixed["tasks"] == ["one", "two"]
    assert float(mixed["values"][1, 0]) == 0.75 and math.isnan(float(mixed["values"][1, 1]))
    with pytest.raises(ValueError, match="non-empty"):
        ranking_table({})
    with pytest.raises(ValueError, match="no task has layer"):
        ranking_table(results, layers=["raw", "fc"])
    with pytest.raises(ValueError, match="layer: number"):
        ranking_table({"task": results["gain"]["combined"]})  # its accuracy is one number, not per layer
    with pytest.raises(ValueError, match="combined=True"):
        ranking_table({"task": {"importance": None, "accuracy": {"a": 1.0}}}, "importance")
    with pytest.raises(TypeError, match="must be a dict"):
        ranking_table({"task": [0.5]})


def test_heatmap_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    from matplotlib.image import imread

    table = ranking_table({"brightness": {"b1": 1.0, "b2": 0.75, "b3": 0.5}, "hue": {"b1": 0.8, "b2": 0.6}})
    assert math.isnan(float(table["values"][1, 2]))
    path = plot_ranking_heatmap(table, tmp_path / "fig" / "table2.png", title="Table II")
    assert path == tmp_path / "fig" / "table2.png" and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert imread(path).shape[0] > 100
    imp = ranking_table({"a": {"x": 0.25, "y": 0.75}}, "importance")
    assert plot_ranking_heatmap(imp, tmp_path / "fig5.png", annotate=False).stat().st_size > 1000
    with pytest.raises(ValueError, match=r"values must be \(tasks, layers\)"):
        plot_ranking_heatmap({**table, "layers": ["b1"]}, tmp_path / "bad.png")
    with pytest.raises(ValueError, match="from ranking_table"):
        plot_ranking_heatmap({"values": table["values"]}, tmp_path / "bad.png")


def test_matplotlib_is_imported_only_to_plot():
    code = "import sys, augnet.probes.ranking; assert 'matplotlib' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_per_layer_bad_input():
    z_a, z_b, m_a, m_b = known_layers(n=40)
    with pytest.raises(ValueError, match="same layers"):
        ranking_probe_per_layer({"a": z_a["noise"]}, {"b": z_b["noise"]}, m_a, m_b)
    with pytest.raises(TypeError, match="generator must be"):
        ranking_probe_per_layer(z_a, z_b, m_a, m_b, generator=0)
    with pytest.raises(TypeError, match="combined must be"):
        ranking_probe_per_layer(z_a, z_b, m_a, m_b, combined=1)
    with pytest.raises(ValueError, match="unknown layer"):
        ranking_probe_per_layer_model(TwoBranch(), images(10), T.Brightness(), ["raw", "fc"], param="shift")
