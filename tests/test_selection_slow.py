"""augnet's default selection on every task of the paper, 3 seeds each (slow: about 5 minutes on 2 cores).

The claims of the README's "Selection" section, from ``augnet reproduce selection``
(docs/results/selection), checked against the rules written before its runs
(:mod:`augnet.experiments.selection_rules`) on seeds 0 to 2.
"""

import pytest

from augnet.experiments.selection import DEFAULT_SETTING, SelectionConfig, run_selection
from augnet.experiments.selection_rules import ORACLE, RULES, check_rules, summarize

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def rows():
    config = SelectionConfig(seeds=3, settings=(DEFAULT_SETTING,), workers=2)
    return summarize(run_selection(config))


@pytest.mark.parametrize("task", ["sprites", "glyphs", "sinusoids-1", "sinusoids-2", "sinusoids-4"])
def test_the_default_learns_the_datas_invariance_on_every_seed(rows, task):
    row = next(r for r in rows if r["task"] == task and r["setting"] == DEFAULT_SETTING)
    assert row["successes"] == row["runs"] == 3, row["runs_described"]
    assert row["accuracy_min"] >= 0.99


def test_the_default_makes_the_capacity_trunks_invariant_and_beats_the_oracle_on_the_narrow_ones(rows):
    verdict = check_rules(rows, DEFAULT_SETTING, oracle=ORACLE)
    ok, what = verdict["capacity"]
    assert ok, what
    trunks = next(r for r in rows if r["task"] == "capacity" and r["setting"] == DEFAULT_SETTING)["trunks"]
    assert sum(t["invariance_median"] >= RULES["capacity"]["invariance"] for t in trunks.values()) >= 7
