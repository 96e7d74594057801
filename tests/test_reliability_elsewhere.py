"""Reliability of the smaller surfaces: the bad-input flag's check, ``augnet bench --model``, data that are
not finite through a layer, parameters replayed by the probes, policy files of every transform, state
dict round trips of the input size, the identity at magnitude 0, and the recorder of synchronisations.
"""

from __future__ import annotations

import io
import json
import math
import os
import sys
from pathlib import Path

import pytest
import torch
from helpers import gen
from torch import nn

import augnet
from augnet import AugmentationLayer, AugmentationModule
from augnet.ops import check_bad_input
from augnet.policy import Policy
from augnet.probes._common import Transformed
from augnet.transforms import audio as A
from augnet.transforms import image as T
from augnet.transforms import signal as S

NAN, INF = math.nan, math.inf
ROOT = Path(__file__).resolve().parents[1]


def images(b=4, ch=3, h=9, w=11, seed=0, dtype=torch.float32):
    return torch.rand(b, ch, h, w, generator=gen(seed)).to(dtype)


# ----------------------------------------------------------------------- check_bad_input


@pytest.mark.parametrize("device", ["cpu", "meta", torch.device("cpu"), None, "cuda", "cuda:0", "cuda:3"])
def test_check_bad_input_is_a_no_op_where_nothing_was_flagged(device):
    if str(device).startswith("cuda") and torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the flag of a real device is read")
    check_bad_input(device)


def test_check_bad_input_of_every_device_skips_those_without_values():
    from augnet.ops.bad_input import flag

    flag(torch.device("meta"))  # a dry run on meta made one
    check_bad_input()
    check_bad_input("meta")


@pytest.mark.parametrize(("device", "error"), [("potato", ValueError), ("cuda:-1", ValueError), (3.0, TypeError),
                                               (torch.zeros(1), TypeError), ("", ValueError)])  # fmt: skip
def test_check_bad_input_names_what_is_not_a_device(device, error):
    with pytest.raises(error, match="device"):
        check_bad_input(device)


# ----------------------------------------------------------------------- augnet bench --model


@pytest.mark.parametrize("model", ["a100", "h100", "h200"])
def test_bench_on_paper_creates_no_folder(model, tmp_path, monkeypatch, capsys):
    from augnet.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["bench", "--model", model]) == 0
    assert list(tmp_path.iterdir()) == []
    assert capsys.readouterr().out.strip()


# ----------------------------------------------------------------------- data that are not finite, through a layer


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("bad", [NAN, INF, -INF])
@pytest.mark.parametrize("name", ["Contrast", "AutoContrast", "Brightness", "Gray", "Rotate", "Sharpness"])
def test_non_finite_pixels_propagate_through_a_layer(name, bad, training):
    t = getattr(T, name)()
    layer = AugmentationLayer([t], init_magnitude=0.6, train_mode="mix", eval_mode="mix").train(training)
    x = images()
    clean = layer(x, copies=2, generator=gen(1))
    x[1, 0, 2, 3] = bad
    out = layer(x, copies=2, generator=gen(1))
    rows = [1, 5]  # sample 1's copies
    assert not torch.isfinite(out[rows]).all()
    keep = [0, 2, 3, 4, 6, 7]
    torch.testing.assert_close(out[keep], clean[keep])


def test_non_finite_parameters_are_still_refused():
    layer = AugmentationLayer([T.Contrast()], init_magnitude=0.5)
    with torch.no_grad():
        layer.raw_magnitudes.fill_(NAN)
    with pytest.raises(ValueError, match="NaN"):
        layer(images())


# ----------------------------------------------------------------------- the probes replay a transform's draw


def _image_transforms():
    return [n for n in T.__all__ if isinstance(getattr(T, n), type)]


@pytest.mark.parametrize("magnitude", [0.123, 0.3, 0.7, 1.0])
@pytest.mark.parametrize("name", _image_transforms())
def test_the_probes_transform_exactly_as_the_transform_does(name, magnitude):
    t = getattr(T, name)()
    x = images(16)
    whole = t(x, magnitude, generator=gen(3))
    moved = Transformed(t, x, magnitude, gen(3))
    assert torch.equal(moved.whole(), whole)
    assert torch.equal(torch.cat([moved.rows(0, 5), moved.rows(5, 16)]), whole) or t.mixes_samples


@pytest.mark.parametrize("name", ["Sharpness", "Contrast", "Rotate", "Posterize", "Equalize", "Solarize"])
def test_replaying_params_drawn_at_a_tensor_magnitude(name):
    t = getattr(T, name)()
    x = images(6)
    for magnitude in (torch.tensor(0.3), torch.tensor(0.3, dtype=torch.float64), torch.full((12,), 0.3)):
        params = t.sample(x, magnitude, generator=gen(3), copies=2)
        assert torch.equal(t(x, magnitude, params=params, copies=2), t(x, magnitude, generator=gen(3), copies=2))


# ----------------------------------------------------------------------- policy files of every transform


def _signal_module(magnitudes):
    layer = AugmentationLayer([A.AddNoise(), A.Gain(), S.GaussianNoise()], init_magnitude=magnitudes)
    layer(torch.randn(2, 1, 64, generator=gen(0)))
    return AugmentationModule([layer])


@pytest.mark.parametrize("magnitudes", [[0.0, 0.0, 0.0], [0.5, 0.2, 0.1], [1.0, 1.0, 1.0]])
def test_a_policy_with_add_noise_writes_a_strict_json_file_and_reads_back(magnitudes, tmp_path):
    module = _signal_module(magnitudes)
    text = json.dumps(module.policy().to_json(), allow_nan=False)  # strict JSON: no Infinity
    again = AugmentationModule.from_policy(json.loads(text))
    assert str(again.policy()) == str(module.policy())
    rng = again.policy()[0][0]["range"]
    assert rng.high == INF and rng.unit == "dB SNR"
    path = tmp_path / "p.json"
    path.write_text(text)
    assert str(AugmentationModule.from_policy(path).policy()) == str(module.policy())


@pytest.mark.parametrize("end", [NAN, "nan", "infinity", None, [1.0]])
def test_a_policy_file_range_end_that_is_no_number_is_refused(end):
    data = _signal_module([0.5, 0.2, 0.1]).policy().to_json()
    data["layers"][0]["transforms"][1]["range"][1] = end
    with pytest.raises((TypeError, ValueError), match="range"):
        Policy.from_json(data)


# ----------------------------------------------------------------------- state dict round trips of the input size


def _warps():
    return AugmentationLayer([T.TranslateX(), T.TranslateY(), T.Rotate()], init_magnitude=0.3)


@pytest.mark.parametrize("kind", ["layer", "module", "augnet"])
def test_a_state_dict_round_trip_keeps_the_ranges_in_pixels(kind):
    def build():
        if kind == "layer":
            return _warps()
        if kind == "module":
            return AugmentationModule([_warps(), _warps()])
        return augnet.AugNet(nn.Sequential(nn.Flatten(), nn.LazyLinear(2)), _warps())

    model = build()
    model.eval()(images(h=12, w=20))
    fresh = build()
    if kind == "augnet":
        fresh.eval()(images(h=12, w=20))  # materialise the lazy layer, then forget the size below
        for m in fresh.modules():
            if isinstance(m, AugmentationLayer):
                m.last_size = None
    fresh.load_state_dict(model.state_dict())
    assert str(fresh.policy()) == str(model.policy())
    assert "px" in str(fresh.policy())


def test_a_state_dict_from_before_the_size_was_saved_still_loads():
    layer = _warps()
    layer(images(h=12, w=20))
    state = {k: v for k, v in layer.state_dict().items() if not k.endswith("_extra_state")}
    fresh = _warps()
    fresh.load_state_dict(state)  # strict
    assert fresh.last_size is None


def test_the_temperature_is_saved_in_the_state():
    # TemperatureAnnealing changes it in training: a checkpoint must load as the model it was, even through
    # torch.load(weights_only=True).
    layer = _warps()
    with torch.no_grad():
        layer.weight_logits.copy_(torch.linspace(-1.0, 1.0, len(layer.transforms)))
    layer(images())
    layer.temperature = 0.05
    buffer = io.BytesIO()
    torch.save(layer.state_dict(), buffer)
    buffer.seek(0)
    fresh = _warps()
    fresh.load_state_dict(torch.load(buffer, weights_only=True))
    assert fresh.temperature == 0.05 and torch.equal(fresh.weights, layer.weights)
    assert str(fresh.policy()) == str(layer.policy())
    old = {k: (v[3:] if k.endswith("_extra_state") else v) for k, v in layer.state_dict().items()}
    fresh = _warps()
    fresh.load_state_dict(old)  # a state from before the temperature was saved: the size alone
    assert fresh.temperature == 1.0 and fresh.last_size == layer.last_size
    interim = {k: (torch.tensor([0.05, 12.0, 20.0], dtype=torch.float64) if k.endswith("_extra_state") else v)
               for k, v in layer.state_dict().items()}  # fmt: skip
    fresh = _warps()
    fresh.load_state_dict(interim)  # the float form [temperature, *size] some checkpoints were saved with
    assert fresh.temperature == 0.05 and fresh.last_size == (12, 20)
    cast = {k: (v.to(torch.bfloat16) if v.is_floating_point() else v) for k, v in layer.state_dict().items()}
    fresh = _warps().to(torch.bfloat16)
    fresh.load_state_dict(cast)  # a checkpoint cast to bfloat16: the temperature and size stay exact
    assert fresh.temperature == 0.05 and fresh.last_size == layer.last_size
    for bad in (0.0, -1.0, math.nan, math.inf):
        state = layer.state_dict()
        key = next(k for k in state if k.endswith("_extra_state"))
        bits = torch.tensor([bad], dtype=torch.float64).view(torch.int64)
        state[key] = torch.cat([torch.tensor([-1]), bits, torch.tensor([12, 12])])
        with pytest.raises(ValueError, match="saved temperature must be > 0"):
            _warps().load_state_dict(state)


def test_a_state_dict_size_of_the_wrong_form_is_refused():
    layer = _warps()
    layer(images())
    state = layer.state_dict()
    key = next(k for k in state if k.endswith("_extra_state"))
    state[key] = torch.tensor([1.5, -2.0])
    with pytest.raises((TypeError, ValueError), match="size"):
        _warps().load_state_dict(state)


# ----------------------------------------------------------------------- the identity at magnitude 0

WARPS = ["Rotate", "TranslateX", "TranslateY", "ShearX", "ShearY", "Scale", "HorizontalFlip", "VerticalFlip",
         "SamplePairing"]  # fmt: skip
ZEROS = {
    "int": lambda n: 0,
    "float": lambda n: 0.0,
    "tensor": lambda n: torch.tensor(0.0),
    "tensor-grad": lambda n: torch.tensor(0.0, requires_grad=True),
    "per-row": lambda n: torch.zeros(n),
}


@pytest.mark.parametrize("copies", [1, 3])
@pytest.mark.parametrize("zero", list(ZEROS))
@pytest.mark.parametrize("name", WARPS)
def test_warps_at_magnitude_zero_are_exactly_the_identity(name, zero, copies):
    t = getattr(T, name)()
    x = images()
    out = t(x, ZEROS[zero](len(x) * copies), generator=gen(1), copies=copies)
    assert torch.equal(out, x.repeat(copies, 1, 1, 1))


@pytest.mark.parametrize("name", ["Rotate", "TranslateX", "HorizontalFlip", "Invert"])
def test_the_gradient_at_magnitude_zero_is_kept(name):
    t = getattr(T, name)()
    mu = torch.tensor(0.0, requires_grad=True)
    x = images()
    t(x, mu, generator=gen(1)).square().sum().backward()
    assert mu.grad is not None and torch.isfinite(mu.grad) and mu.grad != 0


@pytest.mark.parametrize("name", ["Rotate", "HorizontalFlip"])
def test_a_zero_row_among_others_is_the_identity_and_the_others_move(name):
    t = getattr(T, name)()
    x = images(4)
    mu = torch.tensor([0.0, 1.0, 0.0, 1.0])
    out = t(x, mu, generator=gen(1))
    assert torch.equal(out[[0, 2]], x[[0, 2]])
    assert not torch.equal(out[[1, 3]], x[[1, 3]])


# ----------------------------------------------------------------------- the recorder of synchronisations


def test_the_recorder_places_code_outside_the_package_by_its_own_file(tmp_path):
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        import syncs
    finally:
        sys.path.pop(0)
    clone = tmp_path / "augnet" / "tests"  # a clone in a folder named augnet, as git clone makes
    clone.mkdir(parents=True)
    code = compile("import torch\nt = torch.rand(3, device='meta')\nfloat(t.sum())\n", str(clone / "case.py"), "exec")
    with syncs.SyncRecorder() as rec:
        exec(code, {})
    assert [s.where for s in rec.syncs] == ["case.py:3"], rec.summary()


def test_ci_runs_the_recorder_test_from_a_clone_in_a_folder_named_augnet():
    ci = (ROOT / ".ci" / "run").read_text()
    assert 'git clone -q . "$' in ci and '/augnet"' in ci and "tests/test_gpu_path.py" in ci


@pytest.mark.skipif(sys.platform == "win32", reason="bash")
def test_ci_script_parses():
    import subprocess

    proc = subprocess.run(["bash", "-n", str(ROOT / ".ci" / "run")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert os.access(ROOT / ".ci" / "run", os.X_OK)
