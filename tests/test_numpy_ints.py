"""Counts, sizes and seeds given as NumPy integers work as the same Python ints do; bools stay refused.

Values read from an array or a config (``np.arange``, ``np.int64(4)``) are NumPy integers: every
integer argument takes them (``augnet._checks.is_int``) and keeps a Python int, so that what the
model holds stays serialisable and a generator can be seeded from it.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch import nn

import augnet
from augnet import data
from augnet._checks import is_int
from augnet.instance import RunningStandardize, TinyConditioner
from augnet.probes import equivariance_curve
from augnet.probes.families import grid_values
from augnet.training import rank_generator
from augnet.transforms import image as T
from augnet.transforms import signal as S

I64, I32 = np.int64, np.int32


def test_is_int_takes_python_and_numpy_integers_and_refuses_bools_floats_and_tensors():
    assert all(is_int(v) for v in (0, -3, 2**70, I64(4), I32(4), np.uint8(1)))
    assert not any(is_int(v) for v in (True, False, np.bool_(True), 4.0, I64(4).astype(float), "4", None,
                                       torch.tensor(4)))  # fmt: skip


def model(**kwargs):
    torch.manual_seed(0)
    layer = augnet.AugmentationLayer([T.Rotate(), T.TranslateX()])
    return augnet.AugNet(nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 4)), layer, **kwargs)


def test_augnet_copies_and_counts_from_numpy_give_the_python_ints_results():
    x = torch.rand(4, 3, 8, 8)
    ints, arrays = model(train_copies=2, eval_copies=3, effect_every=5), model(
        train_copies=I64(2), eval_copies=I32(3), effect_every=I64(5)
    )
    for attr in ("train_copies", "eval_copies", "effect_every"):
        assert type(getattr(arrays, attr)) is int and getattr(arrays, attr) == getattr(ints, attr)
    for m in (ints, arrays):
        m.eval()
    for copies in (None, 2, 5):
        a = ints(x, copies=copies, generator=torch.Generator().manual_seed(1))
        b = arrays(x, copies=None if copies is None else I64(copies), generator=torch.Generator().manual_seed(1))
        assert torch.equal(a, b)
    layer = arrays.augment.layers[0]
    assert layer(x, copies=I64(3)).shape == (12, 3, 8, 8)
    assert augnet.AugmentationModule([layer])(x, copies=I32(2)).shape == (8, 3, 8, 8)
    arrays.train()
    arrays.measure_effects(x, rows=I64(3))
    assert torch.isfinite(layer.effect).all()
    json.dumps(arrays.policy().to_json())  # what the model holds stays serialisable
    for bad in (True, 2.0):
        with pytest.raises(TypeError, match="copies must be an int"):
            arrays(x, copies=bad)


def test_calibrate_and_probe_grids_take_numpy_point_counts():
    x = torch.rand(6, 3, 8, 8)
    a, b = (augnet.AugmentationLayer([T.Rotate(), T.Brightness()]) for _ in range(2))
    ca = a.calibrate(x, points=5, generator=torch.Generator().manual_seed(0))
    cb = b.calibrate(x, points=I64(5), generator=torch.Generator().manual_seed(0))
    assert torch.equal(ca, cb)
    assert grid_values(T.Rotate(), 0.5, I64(5), (8, 8)) == grid_values(T.Rotate(), 0.5, 5, (8, 8))
    with pytest.raises(ValueError, match="grid_points"):
        grid_values(T.Rotate(), 0.5, True, (8, 8))


def test_data_sizes_counts_and_seeds_from_numpy_make_the_same_data():
    for f in (data.rotated_sprites, data.rotated_glyphs):
        xa, ya = f(I64(6), size=I32(16), seed=I64(3))
        xb, yb = f(6, size=16, seed=3)
        assert torch.equal(xa, xb) and torch.equal(ya, yb)
    xa, ya = data.sinusoids(I64(5), seed=I64(2))
    xb, yb = data.sinusoids(5, seed=2)
    assert torch.equal(xa, xb) and torch.equal(ya, yb)
    assert all(torch.equal(u, v) for u, v in zip(data.make_sprite_pair(I64(2)), data.make_sprite_pair(2)))
    with pytest.raises(ValueError, match="pair must be"):
        data.make_sprite_pair(True)


def test_generators_seeded_from_numpy_draw_what_the_python_seed_draws():
    assert torch.equal(torch.rand(4, generator=rank_generator(I64(7))), torch.rand(4, generator=rank_generator(7)))
    feats = lambda v: v.mean((2, 3))  # noqa: E731
    x = torch.rand(60, 1, 6, 6)
    a = equivariance_curve(feats, x, T.Rotate(), [0.5], seed=3)
    b = equivariance_curve(feats, x, T.Rotate(), [0.5], seed=I64(3))
    assert torch.equal(a["errors"]["equivariance"], b["errors"]["equivariance"])
    assert a["equivariance"] == b["equivariance"] and a["invariance"] == b["invariance"]


def test_transforms_and_conditioners_keep_python_ints():
    t = S.ChannelsSymmetry([(I64(0), I32(1))])
    assert t.pairs == [(0, 1)] and all(type(i) is int for p in t.pairs for i in p)
    assert type(T.Posterize(max_bits=I64(6)).max_bits) is int
    positions = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.6, 0.8, 0.0]])
    r = S.SensorsRotationZ(positions, order=I64(4), n_terms=I32(20))
    assert (type(r.order), type(r.n_terms)) == (int, int)
    assert json.loads(json.dumps(r.config()))["n_terms"] == 20
    c = TinyConditioner(I64(3), I32(4), hidden=I64(8), kernel_size=I64(1))
    assert c.features[0].in_channels == 3 and type(c.features[0].kernel_size[0]) is int
    assert RunningStandardize(I64(5))(torch.rand(3, 5)).shape == (3, 5)
    with pytest.raises(ValueError, match="kernel_size"):
        TinyConditioner(3, 4, kernel_size=True)


def test_reproduce_takes_a_numpy_seed_and_passes_the_experiment_a_python_int(tmp_path, monkeypatch):
    from augnet.experiments import SetupError, _registry, check_settings, reproduce

    seen = []

    def experiment(out_dir, quick, seed, progress, device):
        seen.append(seed)
        return _registry.Report(name="fake", verdict="done", numbers={"seed": seed})

    monkeypatch.setitem(_registry._REGISTRY, "fake", experiment)
    reproduce("fake", quick=True, out=tmp_path, seed=I64(3), progress=False)
    assert seen == [3] and type(seen[0]) is int
    assert json.loads((tmp_path / "fake" / "fake.json").read_text())["seed"] == 3
    check_settings("versus", seed=I32(2), quick=True)
    for bad in (True, 1.0, I64(-1)):
        with pytest.raises(SetupError, match="seed must be an int >= 0"):
            check_settings("versus", seed=bad, quick=True)


# ----------------------------------------------------------------------- NumPy floats (numbers too)

F32 = np.float32


def test_is_real_takes_python_and_numpy_numbers_and_refuses_bools_strings_and_tensors():
    from augnet._checks import is_real

    assert all(is_real(v) for v in (0, 0.5, -3, F32(0.5), np.float64(2.0), I64(3), np.float16(1)))
    assert not any(is_real(v) for v in (True, np.bool_(False), "0.5", None, torch.tensor(0.5), 1j))


def test_numpy_floats_build_what_the_python_floats_build_and_keep_python_floats():
    # Every float argument takes a NumPy scalar (an array's element, a config read with NumPy) and stores a Python
    # float: the policy file stays JSON, and the layer computes exactly what the Python float's does.
    x = torch.rand(3, 3, 9, 7, generator=torch.Generator().manual_seed(0))

    def build(f):
        torch.manual_seed(0)
        return augnet.AugmentationLayer(
            [T.Rotate(max_angle=f(0.5)), T.TranslateX(max_shift=f(0.25)), T.Brightness()],
            init_magnitude=f(0.5), temperature=f(0.5),
        )  # fmt: skip

    floats, arrays = build(float), build(F32)
    assert type(arrays.temperature) is float and arrays.temperature == 0.5
    assert [type(t.max_angle) for t in arrays.transforms[:1]] == [float]
    g = lambda: torch.Generator().manual_seed(1)  # noqa: E731
    assert torch.equal(floats(x, copies=2, generator=g()), arrays(x, copies=2, generator=g()))
    assert torch.equal(T.Rotate()(x, 0.5, generator=g()), T.Rotate()(x, F32(0.5), generator=g()))
    module = augnet.AugmentationModule([arrays])
    assert json.loads(json.dumps(module.policy((9, 7)).to_json())) == augnet.AugmentationModule(
        [floats]).policy((9, 7)).to_json()  # fmt: skip
    a = augnet.Augerino(nn.Flatten(), init_width=F32(0.1))
    b = augnet.Augerino(nn.Flatten(), init_width=[F32(0.1)] * 6)
    assert torch.equal(a.augment.widths, augnet.Augerino(nn.Flatten(), init_width=0.1).augment.widths)
    assert torch.equal(a.augment.widths, b.augment.widths)
    assert augnet.LambdaSchedule((F32(0.5), 0.05), (40,))(0) == 0.5
    stats = RunningStandardize(3, momentum=F32(0.25), eps=np.float64(1e-5))
    assert type(stats.momentum) is float and stats.momentum == 0.25


@pytest.mark.parametrize("bad", [np.bool_(True), "30", torch.tensor([30.0])], ids=["numpy-bool", "str", "tensor"])
def test_a_range_that_is_not_a_number_is_still_refused_naming_the_value(bad):
    with pytest.raises(ValueError, match="max_angle must be a positive finite number"):
        T.Rotate(max_angle=bad)


# ----------------------------------------------------------------------- probe seeds

def _probe_calls():
    from augnet import probes

    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3)).eval()
    x, y = torch.rand(24, 3, 8, 8, generator=torch.Generator().manual_seed(0)), torch.arange(24) % 2
    return net, {
        "invariance_curve": lambda s: probes.invariance_curve(net, x, T.Rotate(), [0.5], seed=s)["summary"],
        "accuracy_curve": lambda s: probes.accuracy_curve(net, x, y, T.Rotate(), [0.5], seed=s),
        "category_accuracy": lambda s: probes.category_accuracy(net, x, y, T.Rotate(), [0], seed=s)["transformed"],
        "layerwise_invariance": lambda s: probes.layerwise_invariance(net, x, ["1"], 0.05, T.Rotate(), seed=s)["mean"],
        "ranking_probe_model": lambda s: probes.ranking_probe_model(net, x, T.Rotate(), param="angle", seed=s)["m_a"],
        "ranking_probe_per_layer_model": lambda s: probes.ranking_probe_per_layer_model(
            net, x, T.Rotate(), ["1"], param="angle", seed=s
        )["m_a"],
        "select_tau": lambda s: probes.select_tau(net, "1", x, y, transform=T.Rotate(), seed=s)["tau"],
        "similarity_search": lambda s: probes.similarity_search(net, x, y, {"r": T.Rotate()}, seed=s),
    }


@pytest.mark.parametrize("probe", list(_probe_calls()[1]))
def test_every_probe_takes_a_numpy_seed_and_refuses_a_bool_a_float_or_a_negative_one_before_running(probe):
    net, calls = _probe_calls()
    call = calls[probe]
    want = call(3)
    got = call(I64(3))
    if isinstance(want, torch.Tensor):
        assert torch.equal(want, got)
    else:
        assert want == got
    runs = []
    net.register_forward_pre_hook(lambda *_: runs.append(1))
    for bad, error in ((True, TypeError), (1.5, TypeError), (-1, ValueError)):
        with pytest.raises(error, match="seed must be an int"):
            call(bad)
    assert not runs
