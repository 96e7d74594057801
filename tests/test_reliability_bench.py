"""Reliability of ``augnet bench``'s Python API: repeated settings, the caller's state, settings refused early."""

from __future__ import annotations

import json

import pytest
import torch

from augnet.bench import BenchConfig, gpu_model, inference_cost, run_benchmark

TINY = dict(copies=(1,), batch=2, size=8, width=8, min_run_time=0.005, log=None)


def _tiny_bench(**overrides) -> BenchConfig:
    settings = dict(sizes=(8,), batch=2, copies=2, providers=("reference",), modes=("forward",))
    settings.update(min_run_time=0.005, min_runs=1)
    settings.update(overrides)
    return BenchConfig.quick(**settings)


def test_bench_runs_a_repeated_size_or_mode_once():
    # A size given twice was timed twice, and the reference's speed-up over itself read from the other run (0.96x).
    result = run_benchmark(_tiny_bench(sizes=(8, 8), modes=("forward", "forward")), log=None)
    assert [(r["size"], r["mode"]) for r in result["records"]] == [(8, "forward")]
    assert result["records"][0]["speedup_vs_reference"] == 1.0
    assert result["config"]["sizes"] == [8] and result["config"]["modes"] == ["forward"]
    json.dumps(result)


def test_bench_restores_the_callers_thread_count():
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        result = run_benchmark(_tiny_bench(threads=1), log=None)
        assert result["machine"]["torch_threads"] == 1  # the run used the asked-for count
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_inference_cost_leaves_the_callers_generator_alone():
    torch.manual_seed(123)
    state = torch.get_rng_state()
    first = inference_cost(seed=0, **TINY)
    assert torch.equal(torch.get_rng_state(), state)
    assert first["records"][0]["copies"] == 1


@pytest.mark.parametrize(
    "bad, error",
    [
        (dict(copies=()), ValueError),
        (dict(copies=(0,)), ValueError),
        (dict(copies=4), TypeError),
        (dict(batch=0), ValueError),
        (dict(size=True), TypeError),
        (dict(width=0), ValueError),
        (dict(min_run_time=0), ValueError),
        (dict(min_run_time=float("inf")), ValueError),
        (dict(seed=-1), ValueError),
        (dict(device="meta"), ValueError),
        (dict(device="bogus"), ValueError),
    ],
)
def test_inference_cost_refuses_a_setting_before_any_work(bad, error, monkeypatch):
    import augnet.bench.inference as inference

    def no_work(*args, **kwargs):
        raise AssertionError("a model was built before the settings were checked")

    monkeypatch.setattr(inference, "resnet18", no_work)
    with pytest.raises(error):
        inference_cost(**{**TINY, **bad})


@pytest.mark.skipif(torch.cuda.is_available(), reason="a machine without CUDA")
def test_inference_cost_refuses_cuda_without_it_in_one_line():
    with pytest.raises(ValueError, match="CUDA is not available"):
        inference_cost(**{**TINY, "device": "cuda"})


def test_on_paper_json_to_a_path_that_cannot_be_written_is_refused_before_printing(tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    for target in (blocker / "rows.json", tmp_path):
        assert gpu_model.main(["--model", "h100", "--json", str(target)]) == 2
        out, err = capsys.readouterr()
        assert out == "" and len(err.strip().splitlines()) == 1 and "error" in err
    assert gpu_model.main(["--model", "h100", "--json", str(tmp_path / "rows.json")]) == 0
    assert json.loads((tmp_path / "rows.json").read_text())["model"] == "h100"


def test_bench_batch_and_copies_reach_the_inference_cost(monkeypatch, tmp_path, capsys):
    # `augnet bench --batch B --copies C` timed the layer at B and C but the inference cost at its own 16 and 1-20.
    import augnet.bench.report as report
    from augnet.cli import main

    seen = []

    def record(**kwargs):
        seen.append(kwargs)
        return {"trunk_ms": 1.0, "records": []}

    monkeypatch.setattr(report, "inference_cost", record)
    monkeypatch.setattr(report, "format_inference", lambda cost: "")
    monkeypatch.setattr(report, "run_benchmark", lambda cfg: {"seconds": 0.0, "load_average": {"after": None}})
    monkeypatch.setattr(report, "format_table", lambda result: "")
    monkeypatch.setattr(report, "save_results", lambda result, out, quick: (tmp_path / "r.json", None, "no plot"))
    assert main(["bench", "--quick", "--batch", "3", "--copies", "5", "--out", str(tmp_path)]) == 0
    assert seen[-1]["batch"] == 3 and seen[-1]["copies"] == (5,)
    assert "its trunk (B=3, C=5)" in capsys.readouterr().out
    assert main(["bench", "--quick", "--out", str(tmp_path)]) == 0  # not given: the inference cost's own settings
    assert seen[-1]["batch"] == 2 and seen[-1]["copies"] == (1, 2)
