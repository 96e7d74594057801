"""``augnet reproduce versus --quick`` end to end (CI's slow set): every method runs on the quick tasks, the files
say what the records say, and a second call resumes instead of training again."""

import json

import pytest

from augnet.experiments import reproduce
from augnet.experiments.versus_methods import METHODS


@pytest.mark.slow
def test_quick_versus_runs_every_method_and_resumes(tmp_path):
    report = reproduce("versus", quick=True, out=tmp_path, progress=False)
    folder = tmp_path / "versus"
    records = [json.loads(line) for line in (folder / "runs.jsonl").read_text().splitlines()]
    runs = [r for r in records if r["kind"] == "run"]
    assert {r["method"] for r in runs if r["task"] == "digits"} == set(METHODS)
    assert {r["method"] for r in runs if r["task"] == "sinusoids"} == {"none", "fixed", "augnet", "instance"}
    for r in runs:
        assert 0.0 <= r["accuracy"] <= 1.0 and r["train_seconds"] > 0 and r["invariance"] == r["invariance"]
    table = (folder / "table.md").read_text()
    assert all(f"| {m} |" in table for m in METHODS)
    summary = report.numbers["tuned"]["digits"]["small"]
    assert summary["none"]["accuracy"][0] == pytest.approx(
        next(r["accuracy"] for r in runs if (r["task"], r["method"]) == ("digits", "none"))
    )
    assert report.numbers["grid"]["digits/small"] in [r["fixed"] for r in records if r["kind"] == "grid"]
    before = (folder / "runs.jsonl").read_text()
    again = reproduce("versus", quick=True, out=tmp_path, progress=False)
    assert (folder / "runs.jsonl").read_text() == before  # nothing trained again
    assert again.numbers["tuned"] == report.numbers["tuned"]
