"""augnet reproduce versus: the digits, the tasks' splits, the methods' set-up, resuming, the rules."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest
import torch

from augnet.bench.machine import cpu_capability
from augnet.data import digits
from augnet.experiments import SetupError
from augnet.experiments import versus as V
from augnet.experiments import versus_methods as VM
from augnet.experiments import versus_rules as VR
from augnet.experiments import versus_tasks as VT


def test_digits_are_the_bundled_images_in_0_1():
    x, y = digits()
    assert x.shape == (1797, 1, 16, 16) and x.dtype == torch.float32
    assert float(x.min()) >= 0 and float(x.max()) <= 1 and float(x.max()) > 0.9
    assert y.dtype == torch.int64 and sorted(y.unique().tolist()) == list(range(10))
    x8, y8 = digits(8)
    from sklearn.datasets import load_digits

    assert torch.equal(x8[:, 0], torch.as_tensor(load_digits().images, dtype=torch.float32) / 16)
    assert torch.equal(y8, y)


@pytest.mark.parametrize("size", [7, 0, 16.0, True, "16"])
def test_digits_refuse_a_bad_size(size):
    with pytest.raises(ValueError, match="size"):
        digits(size)


def test_digits_say_what_to_install_without_scikit_learn(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    with pytest.raises(ImportError, match=r"augnet\[versus\]"):
        digits()


@pytest.mark.parametrize("regime", VT.REGIMES)
def test_the_digit_splits_are_disjoint_and_sized(regime):
    task = VT.TASKS["digits"]
    s = VT.load(task, regime, seed=3)
    assert len(s.x_train) == task.n_train_of(regime) and len(s.x_val) == 200 and len(s.x_test) == 500
    x_all = digits()[0].flatten(1)
    index = {tuple(r.tolist()): i for i, r in enumerate(x_all)}
    sets = [{index[tuple(r.tolist())] for r in part.flatten(1)} for part in (s.x_train, s.x_val, s.x_test)]
    assert not (sets[0] & sets[1]) and not (sets[0] & sets[2]) and not (sets[1] & sets[2])


def test_the_small_regime_is_a_tenth_trained_ten_times_longer():
    for task in VT.TASKS.values():
        assert task.n_train_of("small") == round(task.n_train / 10)
        assert task.epochs_of("small") == 10 * task.epochs_of("full")


def test_a_seed_gives_the_same_data_and_another_seed_other_data():
    task = VT.TASKS["sprites"]
    a, b, c = (VT.load(task, "small", seed=s, quick=True) for s in (1, 1, 2))
    assert torch.equal(a.x_train, b.x_train) and torch.equal(a.x_shift, b.x_shift)
    assert not torch.equal(a.x_train, c.x_train)


def test_the_shifted_test_set_rotates_the_test_images_within_30_degrees():
    task = VT.TASKS["glyphs"]
    s = VT.load(task, "small", seed=0, quick=True)
    from augnet.transforms import image as T

    again = T.Rotate()(s.x_test, 30 / 180, generator=torch.Generator().manual_seed(30_000))
    assert torch.equal(s.x_shift, again) and not torch.equal(s.x_shift, s.x_test)
    assert VT.load(VT.TASKS["sinusoids"], "small", 0, quick=True).x_shift is None


def test_image_policies_do_not_apply_to_signals():
    signal = VT.TASKS["sinusoids"]
    assert [m for m in VM.METHODS if VM.applies(m, signal)] == ["none", "fixed", "augnet", "instance"]
    assert all(VM.applies(m, VT.TASKS["digits"]) for m in VM.METHODS)
    with pytest.raises(ValueError, match="unknown method"):
        VM.applies("mixup", signal)


@pytest.mark.parametrize("method", ["crop", *VM.HAND_DESIGNED])
def test_hand_designed_policies_read_images_in_0_1_per_sample(method):
    policy = VM._torchvision_policy(method, 16)
    x = torch.rand(6, 1, 16, 16)
    data = VM._PolicyImages(x, torch.arange(6), policy)
    img, label = data[4]
    assert img.shape == (1, 16, 16) and img.dtype == torch.float32 and int(label) == 4
    assert float(img.min()) >= 0 and float(img.max()) <= 1


def test_the_readme_model_is_what_the_augnet_method_builds():
    """The augnet method is the README's first model: default layer, AugNet and param_groups, lambda 0.5."""
    import augnet

    task = VT.TASKS["digits"]
    model, opt, kwargs, tta = VM._build("augnet", task, None)
    default = augnet.AugNet(VT.make_trunk(task), augnet.AugmentationLayer(VT.candidates(task)))
    assert kwargs == {"lam": 0.5} and tta is None
    ref = torch.optim.Adam(augnet.param_groups(default), lr=task.lr)
    for key in ("lr", "weight_decay"):
        assert [g[key] for g in opt.param_groups] == [g[key] for g in ref.param_groups]
    assert model.train_copies == default.train_copies and model.eval_copies == default.eval_copies
    layer = model.augment.layers[0]
    assert layer.temperature == 1.0 and layer.train_mode == "sample"
    assert torch.equal(layer.raw_magnitudes, default.augment.layers[0].raw_magnitudes)


def _tiny(monkeypatch):
    """Budgets small enough for a test: digits with 2 epochs (quick), one seed."""
    calls = []
    real = V._run_job

    def counted(job, fixed, quick):
        calls.append(job)
        return real(job, fixed, quick)

    monkeypatch.setattr(V, "_run_job", counted)
    monkeypatch.setattr(VM, "fixed_grid", lambda task, quick=False: [(0, 0.1), (2, 0.25)])
    monkeypatch.setattr(V, "fixed_grid", VM.fixed_grid)
    return calls


def test_a_run_resumes_where_it_stopped(tmp_path, monkeypatch):
    calls = _tiny(monkeypatch)
    config = V.VersusConfig(tasks=("digits",), regimes=("small",), methods=("none", "fixed"), seeds=(0,), quick=True)
    records = V.run_versus(config, tmp_path, log=None)
    assert len(calls) == 2 + 2  # the grid's two points, then none and fixed
    lines = (tmp_path / "runs.jsonl").read_text().splitlines()
    assert len(lines) == 4 and {json.loads(line)["key"] for line in lines} == set(records)
    best = V.best_fixed(records, "digits", "small")
    grid = [r for r in records.values() if r["kind"] == "grid"]
    assert best == max(grid, key=lambda r: r["val_accuracy"])["fixed"]
    fixed_run = next(r for r in records.values() if r["kind"] == "run" and r["method"] == "fixed")
    assert fixed_run["fixed"] == best
    # Interrupted mid-line: the torn line is ignored and that run alone is trained again.
    torn = [*lines[:3], lines[3][:len(lines[3]) // 2]]
    (tmp_path / "runs.jsonl").write_text("\n".join(torn) + "\n")
    calls.clear()
    again = V.run_versus(config, tmp_path, log=None)
    assert len(calls) == 1 and set(again) == set(records)
    calls.clear()
    V.run_versus(config, str(tmp_path), log=None)  # the folder as a str, as a user may write it
    assert calls == []
    # Torn with no newline after it (a write cut short): the next record used to be appended onto the fragment,
    # making one unreadable line, and was trained again at the next resume.
    (tmp_path / "runs.jsonl").write_text("\n".join(torn))
    calls.clear()
    V.run_versus(config, tmp_path, log=None)
    assert len(calls) == 1 and set(V.read_runs(tmp_path / "runs.jsonl")) == set(records)
    assert all(json.loads(line) for line in (tmp_path / "runs.jsonl").read_text().splitlines())


def test_quick_and_full_runs_are_not_mixed_in_one_folder(tmp_path, monkeypatch):
    # A full run took --quick runs (2 epochs) in its folder for its own, and the reverse.
    _tiny(monkeypatch)
    config = V.VersusConfig(tasks=("digits",), regimes=("small",), methods=("none",), seeds=(0,), quick=True)
    V.run_versus(config, tmp_path, log=None)
    before = (tmp_path / "runs.jsonl").read_text()
    full = dataclasses.replace(config, quick=False)
    with pytest.raises(SetupError, match=r"holds 1 --quick run\(s\); a full run would take them"):
        V.run_versus(full, tmp_path, log=None)
    assert (tmp_path / "runs.jsonl").read_text() == before
    kept = V.read_runs(Path("docs/results/versus/runs.jsonl"))  # the stored full runs, from before the flag
    assert kept and not any(V.is_quick(r) for r in kept.values())


def test_reproduce_refuses_settings_before_writing_anything(tmp_path):
    from augnet.experiments import check_settings, reproduce

    refused = (("versus", "cuda", 0, "runs on the CPU only"), ("instance", "meta", 0, "CPU"),
               ("versus", "cpu", -1, "seed must be an int >= 0"), ("mnist", "cpu", 0, "unknown"),
               ("sinusoids", "cpu", 2**64 - 1, "at most 2"),  # overflowed torch's seeding once the run had started
               ("sinusoids", "meta", 0, "holds no values"))  # fmt: skip
    if not torch.cuda.is_available():  # a device the machine lacks: refused before the folder is made
        refused += (("sinusoids", "cuda", 0, "CUDA is not available"),)
    for name, device, seed, match in refused:
        with pytest.raises(SetupError, match=match):
            reproduce(name, quick=True, out=tmp_path / "out", device=device, seed=seed, progress=False)
    assert not (tmp_path / "out").exists()
    check_settings("versus", "cpu:0")  # the CPU by another name
    # The command line's message names its flags; the API's names the arguments.
    for name, device, seed, flag in (("versus", "cuda", 0, "--device 'cuda'"), ("versus", "cpu", -1, "--seed must"),
                                     ("versus", "cpu", 3, "--seed 3 is for a --quick run")):  # fmt: skip
        with pytest.raises(SetupError) as caught:
            check_settings(name, device, seed)
        assert flag in caught.value.cli and "--" not in str(caught.value), (caught.value, caught.value.cli)
    with pytest.raises(SetupError) as caught:
        check_settings("mnist")
    assert caught.value.cli == str(caught.value)  # names no argument: the same message


def test_a_full_run_refuses_a_seed_it_would_ignore(tmp_path, capsys):
    from augnet.cli import main
    from augnet.experiments import check_settings, reproduce

    # The full run trains seeds 0-9 whatever its seed: a seed of 3 would be dropped without a word.
    with pytest.raises(SetupError, match=r"a full versus run trains seeds 0-9 .* seed=3 is for a quick run only"):
        reproduce("versus", out=tmp_path / "out", seed=3, progress=False)
    assert not (tmp_path / "out").exists()
    check_settings("versus", seed=3, quick=True)  # a quick run trains the seed it is given
    check_settings("versus", seed=0)  # the full run's own
    check_settings("selection", seed=3)  # an experiment whose full run starts at the seed
    assert main(["reproduce", "versus", "--seed", "3", "--out", str(tmp_path / "cli")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("a full versus run trains seeds 0-9 (tuned on 0-4, reported on 5-9) whatever its seed; "
                        "--seed 3 is for a --quick run only") and "\n" not in err  # fmt: skip
    assert not (tmp_path / "cli").exists()


def test_a_run_records_what_the_table_reads(tmp_path, monkeypatch):
    _tiny(monkeypatch)
    config = V.VersusConfig(tasks=("digits",), regimes=("small",), methods=("none", "augnet"), seeds=(0, 1),
                            quick=True)  # fmt: skip
    records = V.run_versus(config, tmp_path, log=None)
    for r in records.values():
        for key in ("accuracy", "accuracy_tta", "accuracy_1", "accuracy_shift", "invariance", "train_seconds"):
            assert 0 <= r[key] <= 1 or key in ("train_seconds", "invariance")
        # what made it: another install or CPU trains to slightly different weights
        assert r["torch"] == torch.__version__ and r["cpu_capability"] == cpu_capability()
        if r["method"] == "none":  # no augmentation: test-time augmentation and one copy read the same image
            assert r["accuracy"] == r["accuracy_tta"] == r["accuracy_1"] and r["policy"] is None
        else:
            assert r["policy"]["layers"][0]["transforms"][2]["transform"] == "Rotate"
    summary = V.summarise(records, (0, 1))
    cell = summary["digits"]["small"]["none"]["accuracy"]
    values = [r["accuracy"] for r in records.values() if r["method"] == "none"]
    assert cell[2] == 2 and cell[0] == pytest.approx(sum(values) / 2)
    assert "| none |" in V.table_markdown(summary, "t")


def _policy(name, weight, bound, unit="deg"):
    others = [{"transform": "X", "weight": (1 - weight) / 2, "range": [-1, 1, ""]}] * 2
    return {"layers": [{"transforms": [{"transform": name, "weight": weight, "range": [-bound, bound, unit]},
                                       *others]}]}  # fmt: skip


@pytest.mark.parametrize(
    ("task", "name", "weight", "bound", "ok"),
    [
        ("sprites", "Rotate", 0.8, 50, True),
        ("sprites", "Rotate", 0.8, 90, False),  # past the label boundary
        ("sprites", "Rotate", 0.45, 50, False),  # not committed
        ("glyphs", "TranslateY", 0.9, 50, False),  # half the image out of the frame
        ("digits", "ShearX", 0.7, 0.3, True),
        ("sinusoids", "FrequencyShift", 0.9, 0.5, True),
        ("sinusoids", "FrequencyShift", 0.9, 1.5, False),
    ],
)
def test_commitment_needs_half_the_weight_on_a_label_preserving_range(task, name, weight, bound, ok):
    assert VR.committed(task, _policy(name, weight, bound))[0] is ok


@pytest.mark.parametrize(("pixels", "ok"), [(3.5, True), (4.0, True), (5.3, False)])
def test_a_shift_in_pixels_is_bounded_in_percent_of_the_task_image(pixels, ok):
    # digits are 16 x 16: the table's 25 % is 4 pixels (policies state shifts in pixels)
    ok_, text = VR.committed("digits", _policy("TranslateX", 0.9, pixels, "px"))
    assert ok_ is ok and text.endswith(f"±{100 * pixels / 16:.3g} %")


def test_the_rules_compare_augnet_with_the_best_hand_designed_policy_within_its_deviation():
    def cell(acc, sd, inv):
        return {"accuracy": [acc, sd, 5], "invariance": [inv, 0.0, 5]}

    summary = {"digits": {"small": {"none": cell(0.90, 0.01, 0.5), "randaugment": cell(0.95, 0.02, 0.6),
                                    "augmix": cell(0.93, 0.01, 0.7), "augnet": cell(0.94, 0.01, 0.8),
                                    "instance": cell(0.9, 0.0, 0.99)}}}  # fmt: skip
    verdict = VR.check_rules(summary)
    assert "1 digits small: AugNet 0.940 vs best hand-designed randaugment 0.950 ± 0.020: MET" in verdict
    assert "2 digits small: AugNet 0.940 vs none 0.900 ± 0.010: MET (+0.0400)" in verdict
    assert "3 digits small: AugNet's invariance 0.800 vs next augmix 0.700: MET" in verdict
    summary["digits"]["small"]["augnet"] = cell(0.92, 0.01, 0.65)
    verdict = VR.check_rules(summary)
    assert verdict.count("NOT MET") == 2 and "2 digits small" in verdict and "MET" in verdict.split("\n")[1]
    assert verdict.split("\n")[0].endswith("NOT MET (-0.0300)")  # stated, not rounded to -0.000
    policy = _policy("Rotate", 0.8, 30)
    records = {str(s): {"kind": "run", "method": "augnet", "task": "digits", "regime": "full", "seed": s,
                        "policy": _policy("TranslateX", 0.8, 6, "px") if s == 1 else policy} for s in range(3)}
    line = VR.check_rules({"digits": {"full": {}}}, records).split("\n")[-1]
    assert line.startswith("4 digits full: NOT MET, 2 of 3 seeds (Rotate w 0.80 ±30; TranslateX w 0.80 ±37.5 %")


def test_the_rules_read_a_table_of_some_methods_only():
    # benchmarks/versus_rerun.py trains some methods again: the rules with nothing to compare are left out
    cell = {"accuracy": [0.94, 0.01, 5], "invariance": [0.8, 0.0, 5]}
    assert VR.check_rules({"digits": {"small": {"augnet": cell}}}) == ""
    verdict = VR.check_rules({"digits": {"small": {"augnet": cell, "none": cell}}})
    assert verdict.splitlines() == ["2 digits small: AugNet 0.940 vs none 0.940 ± 0.010: MET (+0.0000)",
                                    "3 digits small: AugNet's invariance 0.800 vs next none 0.800: MET (+0.0000)"]


def _readme_first_model() -> tuple[dict, str]:
    """The namespace after running the README's "A first model" block, and the block's code."""
    import contextlib
    import io
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = text.split("## A first model", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    namespace: dict = {"__name__": "__readme__"}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(code, "README.md", "exec"), namespace)
    return namespace, code


def _rate_of(opt, param) -> float:
    return next(g["lr"] for g in opt.param_groups if any(p is param for p in g["params"]))


def test_the_readme_first_model_as_written_is_what_the_augnet_method_trains():
    """Every setting the README's snippet writes (copies, layer, rates, lambda) is the comparison's AugNet's."""
    import re

    readme, code = _readme_first_model()
    model, opt = readme["model"], readme["opt"]
    built, built_opt, kwargs, _ = VM._build("augnet", VT.TASKS["digits"], None)
    for name in ("train_copies", "eval_copies", "effect_every", "aggregation", "stratify"):
        assert getattr(model, name) == getattr(built, name), name
    mine, theirs = model.augment.layers[0], built.augment.layers[0]
    for name in ("temperature", "train_mode", "eval_mode"):
        assert getattr(mine, name) == getattr(theirs, name), name
    # The same initial magnitudes, less the one Adam step the snippet takes (at most the magnitudes' rate).
    step = _rate_of(opt, mine.raw_magnitudes)
    assert (mine.raw_magnitudes - theirs.raw_magnitudes[: len(mine.raw_magnitudes)]).abs().max() <= step * 1.001
    # The augmentation groups' own rates and decays (the trunk's group takes the task's learning rate).
    aug = [(g["lr"], g["weight_decay"]) for g in opt.param_groups[1:]]
    assert aug == [(g["lr"], g["weight_decay"]) for g in built_opt.param_groups[1:]]
    lam = re.search(r"([0-9.]+) \* augnet\.selective_regularizer\(model\)", code)
    assert lam is not None and float(lam.group(1)) == kwargs["lam"] == VM.LAM


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"seeds": (-1,)}, "seeds must be distinct ints >= 0"),
        ({"seeds": (0, 0)}, "seeds must be distinct"),
        ({"seeds": (0.5,)}, "seeds must be distinct ints"),
        ({"methods": ()}, "methods must not be empty"),
        ({"tasks": ()}, "tasks must not be empty"),
        ({"workers": 0}, "workers must be an int >= 1"),
        ({"extra": {"epochs": 3}}, "extra is reserved and must be empty"),
    ],
)
def test_a_config_that_would_run_nothing_or_not_what_it_says_is_refused(change, match):
    config = dataclasses.replace(V.VersusConfig(quick=True), **change)
    with pytest.raises(ValueError, match=match):
        config.validate()


def _grid_record(fixed, val_accuracy, task="sinusoids", regime="small"):
    job = ("grid", task, regime, tuple(fixed), 0)
    return {"key": V.job_key(job), "kind": "grid", "task": task, "regime": regime, "fixed": list(fixed),
            "val_accuracy": val_accuracy}  # fmt: skip


@pytest.mark.parametrize("finished", [[(1, 0.5), (0, 0.25), (0, 0.1)], [(0, 0.1), (1, 0.5), (0, 0.25)]])
def test_ties_of_the_grid_go_to_its_first_point_whatever_order_the_workers_finished(finished):
    # The full run's sinusoids grid tied at 1.0 on all 21 points; the winner was whichever worker process wrote
    # first ([0, 0.25] there, [0, 0.1] in the grid's order), so two runs could report different fixed rows.
    records = {r["key"]: r for r in (_grid_record(f, 1.0) for f in finished)}
    records.update({r["key"]: r for r in [_grid_record((2, 0.1), 0.5)]})
    assert V.best_fixed(records, "sinusoids", "small") == [0, 0.1]
    records.update({r["key"]: r for r in [_grid_record((3, 0.5), 1.0 + 1e-9)]})
    assert V.best_fixed(records, "sinusoids", "small") == [3, 0.5]  # a better point still wins


def test_a_fixed_run_trained_with_another_point_than_the_grids_best_is_run_again(tmp_path, monkeypatch):
    calls = _tiny(monkeypatch)
    config = V.VersusConfig(tasks=("digits",), regimes=("small",), methods=("fixed",), seeds=(0,), quick=True)
    records = V.run_versus(config, tmp_path, log=None)
    fixed_key = next(k for k, r in records.items() if r["kind"] == "run")
    path = tmp_path / "runs.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    other = next(list(r["fixed"]) for r in lines if r["kind"] == "grid" and r["fixed"] != records[fixed_key]["fixed"])
    for r in lines:  # as if the run had been trained with the other point (an older tie-break chose it)
        if r["key"] == fixed_key:
            r["fixed"] = other
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    calls.clear()
    again = V.run_versus(config, tmp_path, log=None)
    assert [c[0] for c in calls] == ["run"] and again[fixed_key]["fixed"] == V.best_fixed(again, "digits", "small")
    calls.clear()
    V.run_versus(config, tmp_path, log=None)
    assert calls == []  # the record written last is the one read
