"""The quick per-instance run's verdict says what the quick run checks (each range of pair B above every range of
pair A), with no verdict on the targets it is too short to learn: it printed "NOT MET" at every quick run,
though the guide says the quick run does not check the targets."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from augnet.experiments import instance as I

KEPT = json.loads((Path(__file__).parents[1] / "docs" / "results" / "instance" / "instance_numbers.json").read_text())


def test_the_quick_verdict_counts_the_seeds_where_b_is_above_a_and_judges_no_target():
    numbers = copy.deepcopy(KEPT)
    full = I._verdict(numbers)
    quick = I._verdict(numbers, quick=True)
    assert full.splitlines()[:-1] == quick.splitlines()[:-1]  # the seeds' lines: the same
    n = len(numbers["runs"])
    assert quick.splitlines()[-1] == (
        f"quick run: the set-up works (no verdict on the targets in {numbers['config']['epochs']} epochs); "
        f"per-instance ranges of pair B above each of pair A's on {n} of {n} seeds"
    )
    assert "NOT MET" not in quick and "DONE" not in quick


def test_a_seed_whose_b_range_is_not_above_every_a_range_is_not_counted():
    numbers = copy.deepcopy(KEPT)
    run = numbers["runs"][0]
    run["instance"]["range"]["2"]["mean"] = run["instance"]["range"]["5"]["mean"] + 1.0  # one A class above B's
    n = len(numbers["runs"])
    assert I._verdict(numbers, quick=True).endswith(f"on {n - 1} of {n} seeds")
