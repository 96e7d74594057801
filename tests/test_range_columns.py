"""The ranges PolicyLogger logs (CSV and TensorBoard) and PolicySummary prints follow every transform's range.

A transform's natural range moves with the magnitude at one end or both: the upper end of ``±x``, ``[0, x]`` and
``[1/x, x]``, the lower end of a low-pass cut-off ``[c, max]``, an SNR ``[s, inf]`` or a threshold ``[t, 1]``. The log
must follow the end that moves (the upper one wherever it moves, as before), and the summary must print both ends.
"""

from __future__ import annotations

import csv
import math
import re

import pytest
import torch
from transform_cases import CASES

import augnet
from augnet.instance_policy import plot_policy_summary, policy_summary
from augnet.training import PolicyLogger, TrainState, fit
from augnet.transforms import audio as A
from augnet.transforms import image as T


def _built(case):
    """The case's transform, a batch of 4 of its inputs, and the size its ranges are at."""
    t = case.build()
    x = case.make(4, torch.float32)
    return t, x, (tuple(x.shape[2:]) or None)


def _logged(t, size, magnitude: float, tmp_path) -> tuple[float, float]:
    """The ``range`` column PolicyLogger writes for ``t`` alone in a layer at ``magnitude``, and that magnitude."""
    layer = augnet.AugmentationLayer([t])
    with torch.no_grad():
        layer.raw_magnitudes.fill_(magnitude)
    logger = PolicyLogger(tmp_path / f"log{magnitude}", size=size)
    state = TrainState(torch.nn.Sequential(layer), torch.optim.SGD(layer.parameters(), lr=0.1), 1, [layer])
    values = logger.values(state)
    return values[f"layer0/{type(t).__name__}/range"], values[f"layer0/{type(t).__name__}/magnitude"]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_the_logged_range_is_the_end_that_moves_with_the_magnitude(case, tmp_path):
    t, _, size = _built(case)
    (low_mu_value, low_mu), (high_mu_value, high_mu) = (_logged(t, size, m, tmp_path) for m in (0.2, 0.8))
    ranges = {m: t.natural_range(m, size) for m in (low_mu, high_mu)}
    if ranges[low_mu][:2] == ranges[high_mu][:2]:  # a transform with no range: nothing to follow
        assert low_mu_value == high_mu_value
        return
    assert low_mu_value != high_mu_value, f"{case.id}: the logged range stays at {low_mu_value}"
    upper_moves = t.natural_range(0.0, size).high != t.natural_range(1.0, size).high
    for m, value in ((low_mu, low_mu_value), (high_mu, high_mu_value)):
        # The upper end wherever it moves: the columns of those transforms (every image transform's but
        # Solarize's) keep their values; else the lower end, the one that moves.
        assert value == (ranges[m].high if upper_moves else ranges[m].low)


def test_the_lower_end_is_logged_for_a_cutoff_an_snr_and_a_threshold(tmp_path):
    # The user's sweep: LowPass logged 3600 Hz at every magnitude, AddNoise inf dB, Solarize a threshold of 1.
    for t, size in ((A.LowPass(8000), None), (A.AddNoise(), None), (T.Solarize(), (8, 8))):
        values = [_logged(t, size, m, tmp_path / type(t).__name__)[0] for m in (0.2, 0.5, 0.8)]
        assert values[0] > values[1] > values[2]  # a wider range: a lower cut-off, SNR or threshold
        assert all(v < t.natural_range(1.0, size).high for v in values)


def test_tensorboard_gets_the_same_range_as_the_csv(tmp_path, monkeypatch):
    import torch.utils.tensorboard as tensorboard

    scalars: dict[int, dict[str, float]] = {}

    class Recorder:  # stands in for SummaryWriter: what add_scalar gets, per step
        def __init__(self, *args, **kwargs):
            pass

        def add_scalar(self, name, value, step):
            scalars.setdefault(step, {})[name] = value

        def close(self):
            pass

    monkeypatch.setattr(tensorboard, "SummaryWriter", Recorder)
    layer = augnet.AugmentationLayer([A.LowPass(8000), A.AddNoise(), A.SpeedChange()], init_magnitude=0.4)
    model = augnet.AugNet(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 2), torch.nn.LogSoftmax(-1)),
                          layer)  # fmt: skip
    x, y = torch.randn(8, 1, 64), torch.randint(0, 2, (8,))
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    fit(model, x, y, opt, epochs=2, batch_size=4, callbacks=PolicyLogger(tmp_path, every=1, tensorboard=True))
    with open(tmp_path / "policy.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["step"]) for r in rows] == sorted(scalars) == [1, 2, 3, 4]
    for row in rows:
        step = scalars[int(row["step"])]
        for q, t in enumerate(layer.transforms):
            name = f"layer0/{type(t).__name__}"
            assert step[f"{name}/range"] == float(row[f"{name}/range"])
            r = t.natural_range(float(row[f"{name}/magnitude"]))
            assert float(row[f"{name}/range"]) == pytest.approx(r.high if q == 2 else r.low, rel=1e-6)
    moved = [float(r["layer0/LowPass/range"]) for r in rows]
    assert len(set(moved)) > 1  # the cut-off follows the trained magnitude


def _conditioned(case, init_magnitude=0.5):
    t, x, size = _built(case)
    channels = x.shape[1]
    layer = augnet.ConditionedAugmentationLayer([t], channels=channels, init_magnitude=init_magnitude)
    return layer, t, x, size


_RANGE = re.compile(r" range (?:±(?P<half>\S+)|(?P<low>\S+) to (?P<high>\S+))")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_the_printed_summary_range_is_the_range_at_the_class_mean_magnitude(case):
    layer, t, x, size = _conditioned(case)
    y = torch.tensor([0, 1, 0, 1])
    summary = policy_summary(layer, (x, y))
    lines = str(summary).splitlines()
    assert len(lines) == len(summary.classes) == 2
    for line, c in zip(lines, summary.classes.values(), strict=True):
        found = _RANGE.search(line)
        assert found, line
        if found["half"] is not None:
            low, high = -float(found["half"]), float(found["half"])
        else:
            low, high = float(found["low"]), float(found["high"])
        want = t.natural_range(c["magnitude_mean"][0], size)
        # printed to 3 significant digits
        assert (low, high) == (pytest.approx(want.low, rel=5e-3, abs=1e-9), pytest.approx(want.high, rel=5e-3)), line
        assert line.rstrip().endswith(want.unit)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_the_summary_range_statistics_follow_the_end_that_moves(case):
    means = []
    for m in (0.2, 0.8):
        layer, t, x, size = _conditioned(case, init_magnitude=m)
        summary = policy_summary(layer, (x, torch.zeros(len(x), dtype=torch.long)))
        per_sample = layer.policy(x)["ranges"][:, 0]  # (B, 2): low, high
        end = int(t.natural_range(0.0, size).high != t.natural_range(1.0, size).high)  # the upper end, if it moves
        assert summary.classes[0]["range_mean"][0] == pytest.approx(per_sample[:, end].mean().item(), rel=1e-9)
        means.append(summary.classes[0]["range_mean"][0])
    assert means[0] != means[1], f"{case.id}: the summary's range stays at {means[0]}"


def test_the_summary_names_the_end_its_range_statistics_follow():
    layer = augnet.ConditionedAugmentationLayer([A.LowPass(8000), A.AddNoise(), A.SpeedChange(), A.Gain()], channels=1)
    summary = policy_summary(layer, (torch.randn(4, 1, 64), torch.tensor([0, 1, 0, 1])))
    assert summary.range_end == ["low", "low", "high", "high"] == summary.to_json()["range_end"]
    image = augnet.ConditionedAugmentationLayer([T.Solarize(), T.Scale(), T.Rotate()], channels=3)
    summary = policy_summary(image, (torch.rand(4, 3, 8, 8), torch.tensor([0, 1, 0, 1])))
    assert summary.range_end == ["low", "high", "high"]


def test_the_summary_plot_says_which_end_it_plots(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    import augnet.viz

    labels = []
    saved = augnet.viz.save_figure

    def keep_labels(fig, path):
        labels.extend(t.get_text() for ax in fig.axes for t in ax.get_legend().get_texts())
        labels.extend(ax.get_title() for ax in fig.axes)
        return saved(fig, path)

    monkeypatch.setattr(augnet.viz, "save_figure", keep_labels)
    layer = augnet.ConditionedAugmentationLayer([A.LowPass(8000), A.SpeedChange()], channels=1)
    summary = policy_summary(layer, (torch.randn(4, 1, 64), torch.tensor([0, 1, 0, 1])))
    plot_policy_summary(summary, tmp_path / "summary.png")
    assert "LowPass, lower end (Hz cut-off)" in labels and "SpeedChange (x speed)" in labels
    assert any(title.startswith("range (the end that moves)") for title in labels)
    assert not math.isnan(summary.classes[0]["range_mean"][0])
