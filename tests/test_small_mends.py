"""Small mends: demo's transform lists read as probe's, bench's progress columns, the probe verdict's model line,
0-d tensors as a policy size's items, as_values' names, float32 kornia choice probabilities, unbounded ranges
in the policy-summary plot."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from torch import nn

import augnet
import augnet.cli
from augnet.transforms import image as T

# ------------------------------------------------------------------- 1. demo and probe read lists alike


def _parse(argv):
    from augnet.cli import build_parser

    return build_parser().parse_args(argv)


def test_demo_takes_the_comma_form_as_probe_does_with_the_same_deprecation():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the space-separated form: no warning
        spaced = _parse(["demo", "--transforms", "Rotate", "Scale"]).transforms
    with pytest.warns(DeprecationWarning, match="augnet demo --transforms Rotate,Scale: comma-separated .* "
                      "separate them with spaces: --transforms Rotate Scale"):  # fmt: skip
        commas = _parse(["demo", "--transforms", "Rotate,Scale"]).transforms
    with pytest.warns(DeprecationWarning, match="augnet probe --transforms Rotate,Scale: comma-separated"):
        probe = _parse(["probe", "--model", "m:n", "--fake", "--transforms", "Rotate,Scale"]).transforms
    with pytest.warns(DeprecationWarning):
        mixed = _parse(["demo", "--transforms", "Rotate,", "Scale"]).transforms
    assert spaced == commas == probe == mixed == ["Rotate", "Scale"]
    assert augnet.cli.demo_config(_parse(["demo", "--transforms", "Rotate", "Scale"])).transforms == ("Rotate", "Scale")


def test_demo_refuses_a_name_outside_its_choices_in_either_form_before_any_deprecation(capsys):
    for argv in (["Rotate", "Solarise"], ["Rotate,Solarise"]):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # refused by argparse, with no deprecation note first
            with pytest.raises(SystemExit) as exit_:
                _parse(["demo", "--transforms", *argv])
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert "usage: augnet demo" in err
        assert "argument --transforms: invalid choice: 'Solarise' (choose from 'TranslateX'," in err
    with pytest.warns(DeprecationWarning):  # commas and no name: the command's own one-line refusal, not a run
        assert augnet.cli.main(["demo", "--transforms", ","]) == 2
    assert capsys.readouterr().err.strip().splitlines() == ["augnet demo: error: --transforms names no transform"]
    with pytest.warns(DeprecationWarning):
        assert augnet.cli.main(["demo", "--transforms", "Rotate,Rotate"]) == 2  # the list's own check, as before
    assert "--transforms names a transform more than once: Rotate Rotate" in capsys.readouterr().err


def test_demo_help_still_names_every_choice():
    from augnet.cli import DEMO_TRANSFORMS, build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command").choices["demo"]
    text = " ".join(sub.format_help().split())
    assert f"from: {', '.join(DEMO_TRANSFORMS)}" in text


# ------------------------------------------------------------------- 2. bench's progress columns


def test_bench_progress_lines_keep_their_columns_for_every_mode():
    from augnet.bench import BenchConfig, run_benchmark
    from augnet.bench.harness import MODES

    lines: list[str] = []
    cfg = BenchConfig.quick(sizes=(8, 16), batch=2, copies=1, providers=("reference",), min_run_time=1e-3,
                            min_runs=1, modes=MODES)  # fmt: skip
    run_benchmark(cfg, log=lines.append)
    assert len(lines) == 2 * len(MODES) and any("forward+backward+dx" in line for line in lines)
    assert len({line.index(" ms (") for line in lines}) == 1  # the times end in one column
    assert len({line.index("px") for line in lines}) == 1
    assert len({line.index("peak") - line.index(" runs)") for line in lines}) == 1


def test_a_progress_line_widens_its_columns_to_the_longest_name():
    from augnet.bench.harness import _progress_line, _progress_widths

    widths = _progress_widths(["reference", "a_long_provider"], [8, 12345], ["forward", "forward+backward+dx"])
    assert widths == (15, 5, 19)
    record = {"provider": "cpp", "size": 8, "mode": "forward", "median_ms": 65.02, "runs": 5, "peak_mib": 1.5}
    line = _progress_line(record, widths)
    assert line == f"  {'cpp':<15} {8:>5}px  {'forward':<19} {65.02:10.2f} ms (5 runs)  peak {1.5:8.1f} MiB"


# ------------------------------------------------------------------- 3. the probe verdict's model line


class ResNet(nn.Module):  # a torchvision-style class name
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 4))

    def forward(self, x):
        return self.body(x)


@pytest.mark.parametrize("make", [lambda: nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 4)), ResNet])
def test_the_verdict_names_the_model_once_and_says_what_logits_are(make):
    from augnet.probes import report

    torch.manual_seed(0)
    model = make()
    rep = report(model, torch.rand(16, 3, 8, 8), [T.Rotate()], layers=["logits"], magnitudes=[1.0], lie=False)
    name = type(model).__name__
    assert rep.verdict().splitlines()[0] == f"{name}: logits: the model's output"
    assert rep.info["model"] == name and rep.info["features"] == "logits: the model's output"


def test_an_augnet_is_still_described_as_its_averaged_trunk_outputs():
    from augnet.probes.features import LOGITS, describe
    from augnet.probes.report import _logits_read

    layer = augnet.AugmentationLayer([T.Rotate()])
    net = augnet.AugNet(nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 4)), layer, eval_copies=3)
    assert _logits_read(net, None) == describe(net, LOGITS) and "averaged over its 3 copies" in _logits_read(net, None)


# ------------------------------------------------------------------- 4. a size's items as 0-d tensors


def _module():
    return augnet.AugmentationModule([augnet.AugmentationLayer([T.TranslateX(), T.Rotate()], init_magnitude=0.5)])


def test_a_size_takes_0d_integer_tensors_and_arrays_as_the_ints_they_hold():
    from augnet.export._common import check_size as export_size
    from augnet.policy import check_size

    for size in ((torch.tensor(32), 32), (np.array(32), np.int64(32)), [torch.tensor(32, dtype=torch.uint8), 32]):
        assert check_size(size) == (32, 32) and export_size(size) == (32, 32)
        assert all(type(s) is int for s in check_size(size) + export_size(size))
    module = _module()
    assert module.policy(size=(torch.tensor(32), 32)).to_json() == module.policy(size=(32, 32)).to_json()
    pytest.importorskip("kornia")
    from augnet.export import to_kornia

    pipe = to_kornia(module.policy(), size=(torch.tensor(12), np.array(12)))
    assert pipe.size == (12, 12)


@pytest.mark.parametrize(
    "item, error",
    [(torch.tensor(True), TypeError), (torch.tensor(32.0), TypeError), (np.array(3.5), TypeError),
     (torch.tensor(-1), ValueError), (np.array(0), ValueError), (torch.tensor([32]), TypeError)],
)  # fmt: skip
def test_a_size_still_refuses_a_bool_a_float_a_negative_or_a_list_item(item, error):
    from augnet.export._common import check_size as export_size
    from augnet.policy import check_size

    for check in (check_size, export_size):
        with pytest.raises(error, match="size"):
            check((item, 32))


def test_a_size_item_on_meta_is_refused_naming_size():
    from augnet.export._common import check_size as export_size
    from augnet.policy import check_size

    for check in (check_size, export_size):
        with pytest.raises(ValueError, match="size is a tensor on meta"):
            check((torch.tensor(32, device="meta"), 32))


# ------------------------------------------------------------------- 5. as_values names the argument


def test_a_meta_tensor_is_refused_naming_the_argument_it_was_given_as():
    from augnet.export._common import check_size as export_size
    from augnet.instance import ConditionedAugmentationLayer
    from augnet.instance_policy import policy_summary
    from augnet.policy import check_size
    from augnet.transforms.signal import ChannelsSymmetry
    from augnet.viz import plot_distributions

    meta_long = torch.empty(2, dtype=torch.long, device="meta")
    with pytest.raises(ValueError, match=r"^pairs is a tensor on meta"):
        ChannelsSymmetry(torch.empty(1, 2, dtype=torch.long, device="meta"))
    for check in (check_size, export_size):
        with pytest.raises(ValueError, match=r"^size is a tensor on meta"):
            check(meta_long)
    layer = ConditionedAugmentationLayer([T.Rotate()], channels=3, init_magnitude=0.25)
    batch = (torch.rand(4, 3, 8, 8), torch.tensor([0, 1, 0, 1]))
    with pytest.raises(ValueError, match=r"^quantiles is a tensor on meta"):
        policy_summary(layer, batch, quantiles=torch.empty(3, device="meta"))
    with pytest.raises(ValueError, match=r"^ylim is a tensor on meta"):
        plot_distributions({"a": [1.0, 2.0]}, "never.png", "y", ylim=torch.empty(2, device="meta"))


# ------------------------------------------------------------------- 6. kornia's choice probabilities in float32


def _choice(probs):
    from augnet.export._kornia import KorniaChoice

    return KorniaChoice([nn.Identity() for _ in probs], probs)


def test_kornia_choice_probabilities_are_float32_of_the_float64_normalised_ones():
    probs = [1.0, 2.0, 3.0, 7.0]
    exact = torch.tensor(probs, dtype=torch.float64)
    choice = _choice(probs)
    assert choice.probs.dtype == torch.float32
    assert torch.equal(choice.probs, (exact / exact.sum()).float())


@pytest.mark.parametrize("cast", [lambda m: m.half(), lambda m: m.to(torch.bfloat16), lambda m: m.double()])
def test_kornia_choice_probabilities_survive_casts_to_float32_precision(cast):
    probs = [1.0, 2.0, 3.0, 7.0]
    choice = _choice(probs)
    kept = choice.probs.clone()
    cast(choice)
    assert choice.probs.dtype == torch.float32 and torch.equal(choice.probs, kept)
    assert not torch.equal(kept.half().float(), kept)  # the cast would have changed them: the check can fail


def test_kornia_choice_moves_through_a_function_that_refuses_float64_as_mps_does():
    seen = []

    def mps_like(t):  # what .to("mps") does: MPS has no float64
        if t.dtype == torch.float64:
            raise TypeError("Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't support float64")
        seen.append(t.dtype)
        return t.clone()

    choice = _choice([1.0, 3.0])
    kept = choice.probs.clone()
    assert choice._apply(mps_like) is choice
    assert seen == [torch.float32] and torch.equal(choice.probs, kept)
    moved = _choice([1.0, 3.0]).to("meta")  # devices move them, as any buffer
    assert moved.probs.device.type == "meta" and moved.probs.dtype == torch.float32
    pytest.importorskip("kornia")
    from augnet.export import to_kornia

    policy = _module().policy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporter's notes on approximate transforms
        pipeline = to_kornia(policy)
    pipeline._apply(mps_like)  # the whole exported policy, as .to("mps") would run it


def test_a_kornia_choice_pickled_with_float64_probabilities_casts_them_to_float32_when_moved():
    choice = _choice([1.0, 3.0])
    choice.probs = choice.probs.double()  # as one made before the change holds them
    assert choice.half().probs.dtype == torch.float32
    assert torch.equal(choice.probs, torch.tensor([0.25, 0.75]))


# ------------------------------------------------------------------- 7. unbounded ranges in the summary plot


def _summary(noise_range, noise_quantiles):
    from augnet.instance_policy import PolicySummary

    def entry(rotate, noise, noise_q):
        return {"count": 3, "weight_mean": [0.5, 0.5], "weight_quantiles": [[0.4, 0.4], [0.5, 0.5], [0.6, 0.6]],
                "magnitude_mean": [0.5, 0.0], "magnitude_quantiles": [[0.5, 0.0]] * 3,
                "range_mean": [rotate, noise], "range_quantiles": [[rotate - 5, noise_q[0]], [rotate, noise],
                                                                    [rotate + 5, noise_q[1]]],
                "range_at_mean": [[-rotate, rotate], [noise, math.inf]]}  # fmt: skip

    return PolicySummary(["Rotate", "AddNoise"], ["deg", "dB SNR"], (0.1, 0.5, 0.9),
                         {0: entry(30.0, noise_range, noise_quantiles), 1: entry(10.0, 12.0, (6.0, 18.0))},
                         range_end=["high", "low"])  # fmt: skip


def _drawn(monkeypatch, summary, tmp_path):
    """The range panel ``plot_policy_summary`` draws (its figure kept open), with warnings as errors."""
    matplotlib = pytest.importorskip("matplotlib")

    matplotlib.use("Agg")
    import augnet.viz
    from augnet.instance_policy import plot_policy_summary

    figures = []
    real = augnet.viz.save_figure
    monkeypatch.setattr(augnet.viz, "save_figure", lambda fig, path: (figures.append(fig), real(fig, path))[1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        path = plot_policy_summary(summary, tmp_path / "summary.png")
    assert path.is_file() and path.stat().st_size > 0
    return figures[0].axes[1]


def test_an_unbounded_range_is_drawn_clipped_and_marked_with_no_warning(monkeypatch, tmp_path):
    ax = _drawn(monkeypatch, _summary(math.inf, (math.inf, math.inf)), tmp_path)
    heights = [p.get_height() for p in ax.patches]
    assert all(math.isfinite(h) for h in heights)
    # Rotate's bars (30, 10), AddNoise's (clipped, 12): the finite span is 0..35, the clip a quarter past it
    assert heights == [30.0, 10.0, 35.0 + 0.25 * 35.0, 12.0]
    assert [p.get_hatch() for p in ax.patches] == [None, None, "//", None]
    texts = [t.get_text() for t in ax.texts]
    assert texts.count("inf") == 1 and any("unbounded" in t for t in texts)
    low, high = ax.get_ylim()
    assert math.isfinite(low) and 35.0 + 0.25 * 35.0 < high < math.inf


def test_an_unbounded_quantile_is_marked_at_its_clipped_end(monkeypatch, tmp_path):
    ax = _drawn(monkeypatch, _summary(20.0, (15.0, math.inf)), tmp_path)
    assert [p.get_hatch() for p in ax.patches] == [None] * 4  # every bar's mean is finite
    assert [t.get_text() for t in ax.texts].count("inf") == 1


def test_a_bounded_summary_is_drawn_as_before(monkeypatch, tmp_path):
    ax = _drawn(monkeypatch, _summary(20.0, (15.0, 25.0)), tmp_path)
    assert [p.get_height() for p in ax.patches] == [30.0, 10.0, 20.0, 12.0]
    assert not ax.texts and all(p.get_hatch() is None for p in ax.patches)


def test_a_summary_of_addnoise_at_magnitude_0_plots_with_no_warning(tmp_path):
    matplotlib = pytest.importorskip("matplotlib")

    matplotlib.use("Agg")
    from augnet.instance import ConditionedAugmentationLayer
    from augnet.instance_policy import plot_policy_summary, policy_summary
    from augnet.transforms.audio import AddNoise

    layer = ConditionedAugmentationLayer([AddNoise()], channels=2, init_magnitude=0.0)
    summary = policy_summary(layer, (torch.rand(6, 2, 64), torch.tensor([0, 1, 0, 1, 0, 1])))
    assert summary.classes[0]["range_mean"] == [math.inf]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert plot_policy_summary(summary, tmp_path / "noise.png").is_file()
