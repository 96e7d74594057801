"""The augmentation benchmark: `augnet bench` and its eager baseline (no timing assertions)."""

import itertools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from augnet.bench import (
    EAGER,
    MODES,
    cpu_peak_bytes,
    eager_augment,
    geometric_layer,
    kornia_warp,
)
from augnet.bench.harness import SLOW_BY_DEFAULT
from augnet.bench.machine import cpu_capability
from augnet.cli import main
from augnet.layers import AugmentationLayer
from augnet.ops import available_backends
from augnet.transforms import image as T

ROOT = Path(__file__).resolve().parent.parent


def _expected_providers() -> list[str]:
    probe = torch.zeros(1, 1, 1, 1)
    return [EAGER, *(b for b in available_backends(probe) if b not in SLOW_BY_DEFAULT["cpu"])]


def test_quick_bench_writes_one_record_per_provider_size_and_mode(tmp_path, capsys):
    assert main(["bench", "--quick", "--threads", "2", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    result = json.loads((tmp_path / "tap_mix_cpu_quick.json").read_text())  # never a real run's file name
    assert not (tmp_path / "tap_mix_cpu.json").exists()
    cfg, records = result["config"], result["records"]

    providers = _expected_providers()
    assert "reference" in providers
    assert cfg["providers"] == providers
    keys = [(r["provider"], r["size"], r["mode"]) for r in records]
    assert sorted(keys) == sorted(itertools.product(providers, cfg["sizes"], MODES))  # each exactly once

    for r in records:
        out_bytes = cfg["batch"] * cfg["copies"] * cfg["channels"] * r["size"] ** 2 * 4  # float32
        assert (
            r["median_ms"] > 0
            and r["images_per_s"] > 0
            and r["measurements"] >= cfg["min_runs"]
            and r["runs"] >= r["measurements"]
        )
        # Every provider allocates its output during the call, so the peak cannot be below it.
        assert r["peak_bytes"] >= out_bytes, r
        assert r["peak_mib"] == pytest.approx(r["peak_bytes"] / 2**20)
        assert r["images_per_s"] == pytest.approx(cfg["batch"] * cfg["copies"] / (r["median_ms"] / 1e3))
        if r["provider"] == EAGER:
            assert r["speedup_vs_eager"] == 1.0
        if r["provider"] == "reference":
            assert r["speedup_vs_reference"] == 1.0
        if r["kind"] == "layer" and r["mode"] == "forward":
            # Each backend reproduced the reference backend's images on the same random draw.
            assert r["max_abs_diff_vs_reference"] < 1e-4, r

    machine = result["machine"]
    assert machine["torch_threads"] == 2 and machine["cpu_count"] >= 1
    assert machine["cpu_model"] and machine["torch_version"] == torch.__version__
    assert machine["numpy_version"] == np.__version__ and machine["cpu_capability"] == cpu_capability()
    for p in providers:
        assert p in printed
    assert "images/s" in printed and "vs eager" in printed
    png = tmp_path / "tap_mix_cpu_quick.png"
    if png.exists():  # matplotlib is optional
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_chosen_providers_sizes_and_modes_only(tmp_path):
    argv = ["bench", "--quick", "--sizes", "12", "--providers", "reference", "--out", str(tmp_path)]
    assert main(argv) == 0
    records = json.loads((tmp_path / "tap_mix_cpu_quick.json").read_text())["records"]
    assert {(r["provider"], r["size"]) for r in records} == {("reference", 12)}
    assert [r["mode"] for r in records] == list(MODES)
    assert all(r["speedup_vs_eager"] is None for r in records)  # no eager run to compare with


def test_bench_bad_arguments(tmp_path, capsys):
    assert main(["bench", "--quick", "--sizes", "0", "--out", str(tmp_path)]) == 2
    assert "sizes must be positive" in capsys.readouterr().err
    assert main(["bench", "--quick", "--providers", "no-such-backend", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err  # named unknown, not "cannot run on cpu here"
    assert err.startswith("augnet bench: error: --providers no-such-backend: unknown")
    assert main(["bench", "--quick", "--threads", "0", "--out", str(tmp_path)]) == 2
    if not torch.cuda.is_available():
        assert main(["bench", "--quick", "--device", "cuda", "--out", str(tmp_path)]) == 2
        err = capsys.readouterr().err
        assert "augnet bench: error: --device cuda: " in err and "CUDA is not available" in err
    assert not list(tmp_path.iterdir())  # nothing written by a refused run


def test_eager_path_gives_the_layer_images_for_translations_and_rotations():
    layer = AugmentationLayer(
        [T.TranslateX(), T.TranslateY(), T.Rotate()], init_magnitude=[0.3, 0.6, 0.5], backend="reference",
        train_mode="mix",  # the blend the eager path computes
    )
    layer.weight_logits.data = torch.tensor([0.5, -1.0, 0.2])
    x = torch.rand(3, 3, 10, 14)
    ours = layer(x, copies=2, generator=torch.Generator().manual_seed(1))
    eager = eager_augment(layer, x, copies=2, generator=torch.Generator().manual_seed(1))
    assert eager.shape == ours.shape == (6, 3, 10, 14)
    torch.testing.assert_close(eager, ours, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cls", [T.ShearX, T.ShearY])
def test_eager_shear_is_augnets_shear_about_the_top_left_pixel(cls, monkeypatch):
    monkeypatch.setenv("AUGNET_BACKEND", "reference")  # the ground truth for augnet's images
    # augnet shears about the centre (4, 4) of a 9x9 image; kornia about pixel (0, 0).
    # With coefficient s = ±1/4 the two differ by a shift of exactly s * 4 = ±1 pixel.
    x = torch.rand(2, 3, 9, 9)
    params = {"shear": torch.tensor([0.25, -0.25]), "aspect": torch.ones(2)}
    t = cls()
    ours, eager = t.apply_transform(x, params), kornia_warp(t, x, params)
    dim = 3 if cls is T.ShearX else 2
    inner = ours.narrow(dim, 1, 7)
    torch.testing.assert_close(inner[:1], eager[:1].narrow(dim, 0, 7), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(inner[1:], eager[1:].narrow(dim, 2, 7), rtol=1e-5, atol=1e-5)


def test_eager_path_is_the_identity_at_magnitude_zero_and_differentiable():
    layer = geometric_layer(init_magnitude=0.0)
    x = torch.rand(4, 3, 8, 8, requires_grad=True)
    out = eager_augment(layer, x, copies=3)
    torch.testing.assert_close(out, x.repeat(3, 1, 1, 1), rtol=1e-5, atol=1e-5)
    layer = geometric_layer(init_magnitude=0.5)
    grads = torch.autograd.grad(eager_augment(layer, x, copies=3).square().sum(), [x, *layer.parameters()])
    assert all(torch.isfinite(g).all() and g.abs().sum() > 0 for g in grads)


def test_cpu_peak_bytes_replays_allocations_in_order():
    def fn():
        a = torch.empty(1 << 20, dtype=torch.uint8)
        b = torch.empty(2 << 20, dtype=torch.uint8)
        del a
        c = torch.empty(1 << 20, dtype=torch.uint8)  # reuses the room of a: the peak stays at 3 MiB
        del c
        return b

    peak, final = cpu_peak_bytes(fn)
    assert peak == 3 << 20
    assert final == 2 << 20


def test_script_entry_point():
    script = ROOT / "benchmarks" / "bench_tap_mix.py"
    proc = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "--quick" in proc.stdout and "--device" in proc.stdout


def test_inference_cost_ratios_are_consistent():
    from augnet.bench import format_inference, inference_cost
    from augnet.experiments.trunks import resnet18

    result = inference_cost(copies=(1, 3), batch=2, width=4, min_run_time=0.01, log=None)
    assert [r["copies"] for r in result["records"]] == [1, 3]
    for r in result["records"]:
        assert r["augnet_ms"] > 0 and r["trunk_rows_ms"] > 0 and r["augment_ms"] > 0
        c_trunk = r["copies"] * r["trunk_ms"]
        assert abs(r["ratio"] - r["augnet_ms"] / c_trunk) < 1e-9
        assert abs(r["overhead"] - r["augment_ms"] / c_trunk) < 1e-9
        assert abs(r["trunk_rows_ratio"] - r["trunk_rows_ms"] / c_trunk) < 1e-9
    assert (
        min(r["trunk_ms"] for r in result["records"])
        <= result["trunk_ms"]
        <= max(r["trunk_ms"] for r in result["records"])
    )
    assert "ResNet-18" in format_inference(result)
    # The trunk is a ResNet-18: 8 basic blocks, 11.2 M parameters at width 64.
    assert sum(p.numel() for p in resnet18().parameters()) == 11_173_962
