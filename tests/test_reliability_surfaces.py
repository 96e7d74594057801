"""Reliability of calibration, parameter groups, schedules, the image operations, data, the CLI (issue 25),
and the first round's contracts that slipped (meta tensors, NaN data, replay)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from helpers import gen
from torch import nn

import augnet
from augnet.cli import main
from augnet.data import rotated_sprites, sinusoids
from augnet.training import TemperatureAnnealing
from augnet.transforms import image as T
from augnet.transforms import signal as S
from augnet.transforms._sensors import SensorsRotationX, SensorsRotationY, SensorsRotationZ

NAN, INF = math.nan, math.inf


def images(b=4, ch=3, h=9, w=11, dtype=torch.float32, seed=0):
    return torch.rand(b, ch, h, w, generator=gen(seed), dtype=dtype)


def layer():
    return augnet.AugmentationLayer([T.Rotate(), T.Brightness(), T.Contrast()], init_magnitude=[0.2, 0.4, 0.6])


def state(module):
    return {k: v.clone() for k, v in module.state_dict().items()}


def same_state(module, before):
    now = module.state_dict()
    return now.keys() == before.keys() and all(torch.equal(now[k], before[k]) for k in now)


# ----------------------------------------------------------------------- calibration


class ShapeShifter:
    """Features of another shape on every call."""

    def __init__(self):
        self.calls = 0

    def __call__(self, z):
        self.calls += 1
        return z.flatten(1)[:, : self.calls]


def _poisoned(value):
    x = images()
    x[1, 0, 2, 3] = value
    return x


@pytest.mark.parametrize(
    ("make_x", "features", "error", "match"),
    [
        (lambda: _poisoned(NAN), None, ValueError, "x contains NaN or infinite"),
        (lambda: _poisoned(INF), None, ValueError, "x contains NaN or infinite"),
        (lambda: _poisoned(-INF), None, ValueError, "x contains NaN or infinite"),
        (lambda: images(dtype=torch.float64) * 1e39, None, ValueError, "float32"),
        (lambda: images(), lambda z: z.flatten(1) * NAN, ValueError, "features"),
        (lambda: images(), lambda z: torch.where(z > 0.5, INF, 0.0), ValueError, "features"),
        (lambda: images(), lambda z: z.tolist(), TypeError, "features"),
        (lambda: images(), lambda z: 3.0, TypeError, "features"),
        (lambda: images(), ShapeShifter(), ValueError, "features"),
        (lambda: images(), "trunk", TypeError, "features"),
    ],
    ids=["nan", "inf", "-inf", "overflow", "nan-features", "inf-features", "list-features", "float-features",
         "features-of-another-shape", "features-not-callable"],
)  # fmt: skip
def test_calibrate_refuses_what_it_cannot_measure_and_changes_nothing(make_x, features, error, match):
    aug = layer()
    before = state(aug)
    with pytest.raises(error, match=match):
        aug.calibrate(make_x(), points=5, features=features)
    assert aug.calibration is None and same_state(aug, before)


def test_calibrate_measures_features_beyond_float32_in_their_own_scale():
    aug, scaled = layer(), layer()
    x = images()
    curves = aug.calibrate(x, points=5, features=lambda z: z.double())
    big = scaled.calibrate(x, points=5, features=lambda z: z.double() * 1e30)  # squares overflow float32
    assert torch.isfinite(big).all()
    torch.testing.assert_close(big, curves, rtol=1e-5, atol=1e-6)
    huge = layer().calibrate(x, points=5, features=lambda z: z.double() * 1e39)  # beyond float32 itself
    torch.testing.assert_close(huge, curves, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("how", ["module", "bound-forward"])
def test_calibrate_with_a_trunk_in_training_mode_does_not_change_it(how):
    trunk = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Dropout(0.5), nn.Flatten())
    trunk.train()
    before = state(trunk)
    aug = layer()
    aug.calibrate(images(), points=4, features=trunk if how == "module" else trunk.forward)
    assert same_state(trunk, before) and trunk.training
    assert aug.calibration is not None


def test_calibrate_with_a_trunk_is_deterministic():
    trunk = nn.Sequential(nn.Conv2d(3, 4, 3), nn.Dropout(0.5), nn.Flatten()).train()
    a = layer().calibrate(images(), points=4, features=trunk)
    b = layer().calibrate(images(), points=4, features=trunk)
    assert torch.equal(a, b)  # dropout off while measuring


# ----------------------------------------------------------------------- parameter groups, schedules


def _model():
    return augnet.AugNet(nn.Sequential(nn.Flatten(), nn.Linear(3 * 9 * 11, 2)), layer())


@pytest.mark.parametrize("name", ["weight_decay", "aug_weight_decay", "magnitude_weight_decay"])
@pytest.mark.parametrize(
    ("value", "error"),
    [(-1e-4, ValueError), (NAN, ValueError), (INF, ValueError), ("0.1", TypeError), (True, TypeError)],
)
def test_param_groups_refuse_bad_decays(name, value, error):
    with pytest.raises(error, match=name):
        augnet.param_groups(_model(), **{name: value})


@pytest.mark.parametrize(
    ("value", "error"),
    [(0.0, ValueError), (-1e-3, ValueError), (NAN, ValueError), (INF, ValueError), ("1e-3", TypeError),
     (True, TypeError)],
)  # fmt: skip
def test_param_groups_refuse_bad_learning_rates(value, error):
    with pytest.raises(error, match="aug_lr"):
        augnet.param_groups(_model(), aug_lr=value)


def test_param_groups_keep_good_values():
    groups = augnet.param_groups(_model(), weight_decay=1e-4, aug_weight_decay=0, aug_lr=1e-2,
                                 magnitude_weight_decay=0.5)  # fmt: skip
    assert [g["weight_decay"] for g in groups] == [1e-4, 0.0, 0.5]
    assert [g.get("lr") for g in groups] == [None, augnet.WEIGHT_LR, 1e-2]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(start=1e-39), ValueError, "start"),
        (dict(start=1e-300), ValueError, "start"),
        (dict(start=NAN), ValueError, "start"),
        (dict(start="1"), TypeError, "start"),
        (dict(end=1e-39), ValueError, "end"),
        (dict(epochs=0), ValueError, "epochs"),
        (dict(epochs=2.5), ValueError, "epochs"),
    ],
)
def test_temperature_annealing_checks_its_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        TemperatureAnnealing(**kwargs)


@pytest.mark.parametrize(
    ("values", "milestones", "error", "match"),
    [
        (("0.5", 0.05), (40,), TypeError, "values"),
        ((True, 0.05), (40,), TypeError, "values"),
        ((0.5, INF), (40,), ValueError, "finite"),
        ((0.5, 0.05), (40.5,), TypeError, "milestones"),
        ((0.5, 0.05), ("40",), TypeError, "milestones"),
        ((0.5, 0.05, 0.1), (10, 10), ValueError, "increasing"),
        (0.5, (), TypeError, "values"),
    ],
)
def test_lambda_schedule_checks_its_arguments(values, milestones, error, match):
    with pytest.raises(error, match=match):
        augnet.LambdaSchedule(values, milestones)


# ----------------------------------------------------------------------- image operations at magnitude 0

COLOUR_AND_NEW = ["Invert", "Gray", "AutoContrast", "Brightness", "Contrast", "Saturation", "Hue", "Solarize",
                  "Posterize", "Equalize", "Sharpness"]  # fmt: skip


@pytest.mark.parametrize("copies", [1, 3])
@pytest.mark.parametrize("shape", [(4, 3, 9, 11), (2, 3, 7, 5), (3, 3, 16, 16)])
@pytest.mark.parametrize("name", COLOUR_AND_NEW)
def test_magnitude_zero_is_exactly_the_identity(name, shape, copies):
    t = getattr(T, name)()
    x = torch.rand(shape, generator=gen(3))
    out = t(x, 0.0, generator=gen(1), copies=copies)
    assert torch.equal(out, x.repeat(copies, 1, 1, 1))
    out = t(x, torch.tensor(0.0, requires_grad=True), generator=gen(1), copies=copies)
    assert torch.equal(out, x.repeat(copies, 1, 1, 1))


# ----------------------------------------------------------------------- NaN data flows, replay


@pytest.mark.parametrize("bad", [NAN, INF, -INF])
@pytest.mark.parametrize("name", ["Contrast", "AutoContrast", "Brightness", "Invert", "Gray", "Hue", "Saturation"])
def test_non_finite_data_flows_through_colour_maps(name, bad):
    t = getattr(T, name)()
    x = images(h=8, w=8)
    clean = t(x, 0.6, generator=gen(2))
    x[1, 0, 2, 3] = bad
    out = t(x, 0.6, generator=gen(2))
    assert not torch.isfinite(out[1]).all()
    keep = [0, 2, 3]
    torch.testing.assert_close(out[keep], clean[keep])


@pytest.mark.parametrize("mu", [0.7, 0.3, 0.6, 0.123, 1.0])
@pytest.mark.parametrize("name", ["ShearX", "ShearY", "Rotate", "Scale", "TranslateX", "Hue", "Contrast", "Brightness",
                                  "Saturation"])  # fmt: skip
def test_replaying_params_gives_the_call_that_drew_them(name, mu):
    t = getattr(T, name)()
    x = images(b=16, h=9, w=11)
    params = t.sample(x, mu, generator=gen(3), copies=2)
    assert torch.equal(t(x, mu, params=params, copies=2), t(x, mu, generator=gen(3), copies=2))


@pytest.mark.parametrize("mu", [0.7, 0.3])
@pytest.mark.parametrize("name", ["GaussianNoise", "FTSurrogate", "FrequencyShift", "TimeMask"])
def test_replaying_signal_params_gives_the_call_that_drew_them(name, mu):
    t = getattr(S, name)(**({"sfreq": 100.0} if name == "FrequencyShift" else {}))
    x = torch.randn(4, 3, 120, generator=gen(0))
    params = t.sample(x, mu, generator=gen(3), copies=2)
    assert torch.equal(t(x, mu, params=params, copies=2), t(x, mu, generator=gen(3), copies=2))


# ----------------------------------------------------------------------- meta tensors


def _positions(n=8):
    k = torch.arange(n, dtype=torch.float64)
    z = 1 - (k + 0.5) / n
    r = (1 - z**2).sqrt()
    phi = k * math.pi * (3 - math.sqrt(5))
    return torch.stack([r * phi.cos(), r * phi.sin(), z], 1)


@pytest.mark.parametrize("cls", [SensorsRotationX, SensorsRotationY, SensorsRotationZ])
@pytest.mark.parametrize("moved", [False, True])
def test_sensor_rotations_give_shapes_on_meta(cls, moved):
    aug = augnet.AugmentationLayer([cls(_positions()), S.GaussianNoise()])
    if moved:
        aug.to("meta")
    x = torch.empty(2, 8, 30, device="meta")
    assert aug(x, copies=3).shape == (6, 8, 30)
    assert cls(_positions())(x, 0.5).shape == (2, 8, 30)


@pytest.mark.parametrize(
    "make",
    [
        lambda: layer(),
        lambda: augnet.AugmentationModule([layer(), layer()]),
        lambda: augnet.AugNet(nn.Linear(4, 2), layer()),
        lambda: augnet.Augerino(nn.Linear(4, 2)),
        lambda: augnet.AugmentationLayer([SensorsRotationZ(_positions())]),
    ],
    ids=["layer", "module", "augnet", "augerino", "sensors"],
)
def test_repr_of_a_module_on_meta(make):
    module = make().to("meta")
    text = repr(module)
    assert type(module).__name__ in text


# ----------------------------------------------------------------------- data


@pytest.mark.parametrize("pair", [2**64, 2**70, 10**30, 7919 * 2**64])
def test_rotated_sprites_takes_any_non_negative_pair(pair):
    x, _ = rotated_sprites(4, pair=pair)
    assert x.shape == (4, 3, 32, 32) and torch.isfinite(x).all()
    assert not torch.equal(x, rotated_sprites(4, pair=0)[0])


@pytest.mark.parametrize("kwargs", [dict(size=10**30), dict(n=10**20)])
def test_rotated_images_too_large_to_render_are_refused(kwargs):
    with pytest.raises(ValueError, match="too large"):
        rotated_sprites(**{"n": 4, **kwargs})


def test_rotated_sprites_keeps_the_pairs_it_had():
    from augnet.data import make_sprite_pair

    cells, palettes = make_sprite_pair(3)  # the checksums of the pair before huge pairs were taken
    assert int(cells.sum()) == 310 and float(palettes.sum()) == pytest.approx(15.576687812805176, abs=1e-6)
    assert float(rotated_sprites(4, pair=5)[0].sum()) == pytest.approx(1212.396728515625, rel=1e-6)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(freqs=()), ValueError, "freqs"),
        (dict(freqs=(2.0, NAN)), ValueError, "freqs"),
        (dict(freqs=(INF,)), ValueError, "freqs"),
        (dict(freqs=("2",)), TypeError, "freqs"),
        (dict(freqs=2.0), TypeError, "freqs"),
        (dict(jitter=NAN), ValueError, "jitter"),
        (dict(jitter=INF), ValueError, "jitter"),
        (dict(noise=NAN), ValueError, "noise"),
        (dict(noise=INF), ValueError, "noise"),
        (dict(noise="0.5"), TypeError, "noise"),
        (dict(sfreq=INF), ValueError, "sfreq"),
        (dict(sfreq=NAN), ValueError, "sfreq"),
        (dict(duration=INF), ValueError, "duration"),
        (dict(duration=0.001), ValueError, "duration"),
        (dict(sfreq=10.0, duration=0.04), ValueError, "duration"),
        (dict(sfreq=True), TypeError, "sfreq"),
        (dict(seed=1.5), TypeError, "seed"),
        (dict(sfreq=1e30), ValueError, "too large"),
        (dict(freqs=[[2.0]]), TypeError, "freqs"),
    ],
)
def test_sinusoids_refuse_what_makes_no_signal(kwargs, error, match):
    with pytest.raises(error, match=match):
        sinusoids(4, **kwargs)


def test_sinusoids_with_good_unusual_arguments():
    x, _ = sinusoids(3, sfreq=10.0, duration=0.1, jitter=0.0, noise=0.0, freqs=(1.0,))
    assert x.shape == (3, 1, 1) and torch.isfinite(x).all()


# ----------------------------------------------------------------------- the command line


@pytest.mark.parametrize(
    "argv",
    [
        ["demo", "--device", "mps"],
        ["demo", "--device", "meta"],
        ["demo", "--device", "xpu"],
        ["demo", "--device", "hip"],
        ["demo", "--device", "cuda:5"],
        ["demo", "--device", "potato"],
        ["reproduce", "copies", "--device", "xpu"],
        ["reproduce", "copies", "--device", "meta"],
        ["reproduce", "copies", "--device", "mps"],
    ],
)
def test_cli_devices_the_machine_lacks_are_one_line_errors_before_any_work(argv, capsys, tmp_path):
    if "cuda:5" in argv and torch.cuda.device_count() > 5:
        pytest.skip("this machine has that GPU")
    assert main([*argv, "--out", str(tmp_path / "out")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and "--device" in err, err


@pytest.mark.parametrize("cached", [False, True])
def test_demo_builds_the_extension_before_the_progress_bar(monkeypatch, capsys, tmp_path, cached):
    import augnet.experiments.demo as demo
    from augnet import cli
    from augnet.ops import _cpp

    order = []
    monkeypatch.setitem(_cpp._state, "tried", False)
    monkeypatch.setattr(_cpp, "load", lambda: order.append("build") or True)
    monkeypatch.setattr(_cpp, "extension_cached", lambda: cached)
    monkeypatch.delenv("AUGNET_BACKEND", raising=False)

    def fake_run_demo(config, progress=True):
        order.append("train")
        raise SystemExit(0)

    monkeypatch.setattr(demo, "run_demo", fake_run_demo)
    with pytest.raises(SystemExit):
        cli.main(["demo", "--out", str(tmp_path), "--epochs", "1"])
    assert order == ["build", "train"]
    said = [line for line in capsys.readouterr().out.splitlines() if "extension" in line]
    assert len(said) == (0 if cached else 1)


def test_plot_policy_history_returns_the_file_it_writes_and_refuses_a_history_it_cannot_draw(tmp_path):
    pytest.importorskip("matplotlib")
    from augnet.viz import plot_policy_history

    history = {"step": [1, 2], "weights": [[[0.5, 0.5]], [[0.6, 0.4]]], "magnitudes": [[[0.5, 0.5]], [[0.5, 0.6]]]}
    path = plot_policy_history(history, ["Rotate", "Scale"], tmp_path / "no_suffix")
    assert path == tmp_path / "no_suffix.png" and path.is_file()  # matplotlib adds .png; the path said so too
    names = (n for n in ["Rotate", "Scale"])  # any iterable of names, a numpy layer index
    assert plot_policy_history(history, names, tmp_path / "g.png", layer=np.int64(0)).is_file()
    for kwargs, match in (
        ({"names": ["Rotate"]}, "names has 1 names for the 2 transforms of layer 0"),
        ({"layer": 1}, r"layer must be an int in 0\.\.0"),
        ({"history": {"step": [1], "loss": [0.3]}}, r"history has no \['weights', 'magnitudes'\]"),
        ({"history": {"step": [], "weights": [], "magnitudes": []}}, "no record"),
    ):
        args = {"history": history, "names": ["Rotate", "Scale"], "path": tmp_path / "x.png", **kwargs}
        with pytest.raises(ValueError, match=match):
            plot_policy_history(**args)
