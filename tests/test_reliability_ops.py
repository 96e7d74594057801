"""Reliability of the image transforms, ``tap_mix`` and ``augnet bench`` used as a user would: bad arguments refused
with a message naming them, nothing silently wrong (a review of the transforms, the fused op and the bench)."""

from __future__ import annotations

import math

import pytest
import torch
from helpers import gen

from augnet.bench import BenchConfig, run_benchmark
from augnet.cli import main
from augnet.ops import available_backends, tap_mix
from augnet.transforms import image as T
from augnet.transforms import signal as S

NAN, INF = math.nan, math.inf
GATED = ["HorizontalFlip", "VerticalFlip", "Invert", "Gray", "AutoContrast", "Equalize", "Solarize"]


def images(b=2, ch=3, h=5, w=6, seed=0):
    return torch.rand(b, ch, h, w, generator=gen(seed))


# ----------------------------------------------------------------------- temperatures


@pytest.mark.parametrize("name", GATED)
def test_a_temperature_whose_inverse_overflows_float32_is_refused(name):
    # Was accepted: the relaxed gate divides by it in float32, and the magnitude's gradient came out NaN.
    cls = getattr(T, name)
    with pytest.raises(ValueError, match="temperature 1e-300 is too small"):
        cls(temperature=1e-300)
    t = cls(temperature=1e-30)  # steep, but finite
    mu = torch.tensor(0.5, requires_grad=True)
    (grad,) = torch.autograd.grad(t(images(b=4), mu, generator=gen(0)).sum(), mu)
    assert torch.isfinite(grad)


# ----------------------------------------------------------------------- params, generators


def test_replaying_params_that_are_not_params_names_them():
    t, x = T.Rotate(), images()
    with pytest.raises(ValueError, match=r"Rotate: params must be a dict of per-row tensors.*an empty dict"):
        t(x, 0.5, params={})  # was a bare StopIteration
    with pytest.raises(TypeError, match=r"Rotate: params must be a dict of tensors.*got list"):
        t(x, 0.5, params=[1, 2])
    with pytest.raises(ValueError, match="got NoneType as its first entry"):
        t(x, 0.5, params={"angle": None, "aspect": None})
    other = T.Brightness().draw_params(x, 0.5, generator=gen(0))
    with pytest.raises(ValueError, match=r"Rotate: params lack the entry 'angle'.*\['shift'\]"):
        t(x, 0.5, params=other)  # was KeyError: 'angle'
    with pytest.raises(ValueError, match="an empty dict"):
        t.apply_transform(x, {})


def test_empty_params_do_not_silently_end_a_loop():
    # The StopIteration of empty params ended map() early: the replay of the second batch vanished without an error.
    t, x = T.Rotate(), images()
    good = t.draw_params(x, 0.5, generator=gen(0))
    with pytest.raises(ValueError, match="an empty dict"):
        list(map(lambda p: t(x, 0.5, params=p), [good, {}]))


@pytest.mark.parametrize("generator", [42, "seed", True])
@pytest.mark.parametrize("name", ["Rotate", "Brightness", "HorizontalFlip", "Posterize", "SamplePairing"])
def test_a_generator_that_is_not_a_torch_generator_is_named(name, generator):
    t = getattr(T, name)()
    with pytest.raises(TypeError, match=f"{name}: generator must be a torch.Generator or None, got "):
        t(images(), 0.5, generator=generator)  # was: rand() received an invalid combination of arguments
    with pytest.raises(TypeError, match=r"generator must be a torch\.Generator"):
        t.draw_params(images(), 0.5, generator=generator)


# ----------------------------------------------------------------------- tap_mix


@pytest.mark.parametrize("backend", [None, ["cpp"], 1])
def test_tap_mix_names_a_backend_that_is_not_a_string(backend):
    x = images()
    src = torch.zeros(2, 1, dtype=torch.long)
    eye = torch.eye(2, 3).expand(2, 1, 2, 3)
    with pytest.raises(TypeError, match="tap_mix: backend must be 'auto' or a backend name, got"):
        tap_mix(x, src, eye, None, torch.ones(2, 1), backend=backend)  # a list was: unhashable type: 'list'


# ----------------------------------------------------------------------- augnet bench


@pytest.mark.parametrize(
    ("settings", "error", "match"),
    [
        (dict(min_run_time=INF), ValueError, "min_run_time must be positive and finite"),  # ran for ever
        (dict(seed=-1), ValueError, "seed must be in"),
        (dict(seed=1.5), TypeError, "seed must be an int"),
        (dict(batch=True), TypeError, "batch must be an int"),
        (dict(copies=2.5), TypeError, "copies must be an int"),
        (dict(threads=1.5), TypeError, "threads must be an int"),
        (dict(sizes=(8.5,)), TypeError, "sizes must be integers"),
        (dict(sizes=8), TypeError, "sizes must be a sequence"),
        (dict(providers="reference"), TypeError, "providers must be a sequence"),  # was read letter by letter
        (dict(modes="forward"), TypeError, "modes must be a sequence"),
        (dict(init_magnitude=2.0), ValueError, "init_magnitude must lie in"),
        (dict(min_run_time="1"), TypeError, "min_run_time must be a number"),
    ],
)
def test_bench_config_refuses_settings_it_cannot_run(settings, error, match):
    with pytest.raises(error, match=match):
        BenchConfig.quick(**settings).validate()


def test_bench_refuses_a_negative_seed_in_one_line(capsys, tmp_path):
    out = tmp_path / "out"
    assert main(["bench", "--device", "cpu", "--quick", "--seed", "-1", "--out", str(out)]) == 2
    assert "augnet bench: error: --seed must be in [0, 2**63 - 1], got -1" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.skipif("cpp" not in available_backends(torch.zeros(1)), reason="the cpp backend is not built here")
@pytest.mark.parametrize("providers", [("cpp", "reference"), ("cpp",)])
def test_bench_checks_a_backend_against_the_reference_whatever_the_order(providers):
    # The check draw was compared only once the reference had run: a backend listed first had no check.
    cfg = BenchConfig.quick(sizes=(8,), providers=providers, modes=("forward",), min_run_time=0.01, min_runs=1)
    records = run_benchmark(cfg, log=None)["records"]
    cpp = [r for r in records if r["provider"] == "cpp"]
    assert len(cpp) == 1 and cpp[0]["max_abs_diff_vs_reference"] < 1e-4


@pytest.mark.parametrize(
    "make",
    [lambda t: S.TimeReverse(temperature=t), lambda t: S.SignFlip(temperature=t),
     lambda t: S.ChannelsSymmetry([(0, 1)], temperature=t), lambda t: S.ChannelsDropout(temperature=t),
     lambda t: S.ChannelsShuffle(temperature=t)],
    ids=["TimeReverse", "SignFlip", "ChannelsSymmetry", "ChannelsDropout", "ChannelsShuffle"],
)
def test_a_signal_gate_temperature_whose_inverse_overflows_float32_is_refused(make):
    # Was accepted: the relaxed gate divides by it in float32, and the magnitude's gradient came out NaN.
    with pytest.raises(ValueError, match="temperature 1e-300 is too small"):
        make(1e-300)
    t = make(1e-30)
    mu = torch.tensor(0.5, requires_grad=True)
    (grad,) = torch.autograd.grad(t(torch.rand(4, 2, 32, generator=gen(0)), mu, generator=gen(1)).sum(), mu)
    assert torch.isfinite(grad)


def test_a_key_error_inside_a_transform_is_not_relabelled_as_bad_params():
    # Only a replay whose dict lacks the key is the caller's mistake; a KeyError of the transform's own code
    # (or of params it drew itself) is a bug to see as it is.
    from augnet.transforms.base import Transform

    class Buggy(Transform):
        input_ndim = 4

        def sample(self, x, magnitude, generator=None, copies=1):
            return {"shift": torch.zeros(x.shape[0] * copies)}

        def apply_transform(self, x, params):
            return x + {}["missing"]

    t, x = Buggy(), images()
    with pytest.raises(KeyError, match="missing"):
        t(x, 0.5)
    with pytest.raises(ValueError, match="params lack the entry 'angle'"):
        T.Rotate()(x, 0.5, params={"shift": torch.zeros(len(x))})


def test_bench_config_takes_sizes_as_a_one_dimensional_array():
    import numpy as np

    BenchConfig.quick(sizes=np.array([16, 32])).validate()  # a list of sizes as NumPy gives it
    with pytest.raises(TypeError, match="sizes must be a sequence"):
        BenchConfig.quick(sizes=np.array([[16]])).validate()
