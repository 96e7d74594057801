"""The GPU on-paper model (augnet/bench/gpu_model.py): its arithmetic, and that it runs without a GPU."""

import pytest

from augnet.bench import gpu_model as M
from augnet.ops._triton import unavailable_hint

H100 = M.DEVICES["h100"]


def test_occupancy_follows_the_register_and_shared_memory_limits():
    # 128 registers x 32 threads = 4096 per warp: 16 warps of 65536 registers, 4 programs of 4 warps.
    assert M.occupancy(H100, 128, 0, 4) == (4, 16)
    # 255 registers round up to 8192 per warp (256-register units): 8 warps, 2 programs.
    assert M.occupancy(H100, 255, 0, 4) == (2, 8)
    # Few registers: the 64-warp limit (16 programs of 4 warps), then shared memory (100 KiB: 2 programs).
    assert M.occupancy(H100, 32, 0, 4) == (16, 64)
    assert M.occupancy(H100, 32, 100 * 1024, 4) == (2, 8)


def test_the_bytes_follow_the_definitions():
    image = 3 * 32 * 32 * 4
    b, n, k = 64, 256, 6
    taps = n * k * (7 * 4 + 8)
    fwd = M._traffic(b, 32, "forward", npb=4)
    assert fwd == {"floor": (b + n) * image + taps, "held": (b + n) * image + taps, "lost": 2 * n * image + taps}
    dx = M._traffic(b, 32, "forward+backward+dx", npb=4)
    grads, partial = n * k * 7 * 4, n * 4 * k * 7 * 4
    assert dx["floor"] == (b + n) * image + taps + n * image + b * image + grads + b * image
    assert dx["held"] == fwd["held"] + n * image + b * image + 2 * partial + grads + 2 * b * image
    assert dx["lost"] == fwd["lost"] + 2 * n * image + 2 * partial + grads + b * image + 2 * n * image
    for mode in M.MODES:  # the floor is a floor, and L2 reuse only helps
        t = M._traffic(256, 224, mode, npb=196)
        assert t["floor"] <= t["held"] < t["lost"]


@pytest.mark.skipif(unavailable_hint() is not None, reason="the occupancy needs the kernels compiled by triton")
def test_the_table_runs_for_every_case_and_says_it_is_a_model(capsys):
    rows = M.on_paper("h100")
    assert len(rows) == len(M.CASES) * len(M.MODES)
    for r in rows:
        assert r["bytes_floor"] / H100.bandwidth == pytest.approx(r["time_floor_s"])
        assert all(o is not None and 0 < o["warps_per_sm"] <= 64 for o in r["occupancy"])
    # The former copy-major order lost the L2 figure once 2 B images outgrew a quarter of L2's 50 MiB.
    assert {(r["B"], r["image"]): r["old_order"] for r in rows} == {
        (64, "3x32x32"): "holds",
        (256, "3x32x32"): "holds",
        (64, "3x224x224"): "does not",
        (256, "3x224x224"): "does not",
    }
    assert M.main(["--model", "h100"]) == 0
    assert "a model, not a measurement" in capsys.readouterr().out
    with pytest.raises(ValueError, match="model must be one of"):
        M.on_paper("tpu")


@pytest.mark.parametrize("model", sorted(M.DEVICES))
def test_augnet_bench_model_prints_the_table_of_that_gpu_and_times_nothing(model, capsys, monkeypatch):
    from augnet import bench
    from augnet.cli import main

    monkeypatch.setattr(bench, "run_from_args", lambda args: pytest.fail("timed although --model was given"))
    assert main(["bench", "--model", model]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{M.DEVICES[model].name} on paper") and "a model, not a measurement" in out
    assert out.count("3x224x224") == M.format_on_paper(M.on_paper(model)).count("3x224x224") > 0
