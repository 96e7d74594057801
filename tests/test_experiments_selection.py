"""`augnet reproduce selection`: every task under every setting, against rules; the demo's presets."""

import json

import pytest
import torch

import augnet.experiments.selection as S
import augnet.experiments.selection_rules as R
from augnet.experiments import reproduce
from augnet.experiments.demo import PRESETS, DemoConfig, build_model, run_demo
from augnet.experiments.sinusoids import SinusoidsConfig


def tiny_config(**kwargs):
    fields = dict(seeds=2, quick=True, tasks=("sprites", "sinusoids-2", "capacity"))
    fields.update(kwargs)
    return S.SelectionConfig(**fields)


def test_runs_cover_every_task_setting_and_seed_and_the_oracle_once():
    config = tiny_config(settings=("paper", S.DEFAULT_SETTING), seed=3)
    runs = config.runs()
    assert len(runs) == 3 * 2 * 2 + 2  # the oracle on the capacity task only
    assert runs[0] == ("sprites", "paper", 3) and runs[-1] == ("capacity", S.ORACLE, 4)
    with pytest.raises(ValueError, match="unknown tasks or settings"):
        S.run_selection(tiny_config(settings=("T 2",)))


def test_each_setting_configures_each_task():
    config = S.SelectionConfig()
    paper = config.task_config("glyphs", "paper", 4)
    assert (paper.data, paper.size, paper.seed, paper.epochs, paper.threads) == ("glyphs", 28, 4, 10, 1)
    assert (paper.regularizer, paper.train_mode, paper.effect_every, paper.magnitude_weight_decay) == (
        "paper", "mix", 0, None)  # fmt: skip
    official = config.task_config("sinusoids-4", "official", 0)
    assert (official.layers, official.temperature, official.init_magnitude, official.train_copies) == (4, 0.01, 0.0, 1)
    assert (official.aug_weight_decay, official.eval_copies, official.regularizer) == (1e-4, 4, "paper")
    image = config.task_config("sprites", "official", 0)
    assert (image.temperature, image.weight_decay, image.aug_weight_decay, image.aug_lr) == (0.01, 1.0, 1.0, None)
    decay = config.task_config("capacity", "magnitude decay (previous default)", 0)
    assert decay.magnitude_weight_decay == 1.0 and decay.methods == ("augnet",) and decay.train_mode == "mix"
    assert config.task_config("capacity", S.ORACLE, 0).methods == ("oracle",)
    calibrated = config.task_config("sinusoids-1", "calibrated to the trunk, once", 0)
    assert calibrated.calibrate == "trunk" and calibrated.regularizer == "paper"
    effect = config.task_config("sinusoids-2", "effect units", 0)
    assert (effect.train_mode, effect.effect_every, effect.units, effect.diverse) == ("mix", 10, "effect", False)
    sampled = config.task_config("sprites", "sampled training", 0)
    assert (sampled.train_mode, sampled.regularizer, sampled.effect_every) == ("sample", "paper", 0)
    # augnet's default row is the library's defaults, nothing else.
    default = config.task_config("sinusoids-2", S.DEFAULT_SETTING, 0)
    fresh = SinusoidsConfig()
    for name in ("regularizer", "units", "diverse", "train_mode", "effect_every", "magnitude_weight_decay"):
        assert getattr(default, name) == getattr(fresh, name), name


@pytest.mark.parametrize("task", ["sprites", "glyphs", "sinusoids-1", "sinusoids-4", "capacity"])
def test_the_readme_row_is_the_readme_model_on_every_task(task):
    """What `AugmentationLayer(ts)`, `AugNet(trunk, layer)`, `param_groups(model)` and lambda 0.5 give a user."""
    import augnet

    config = S.SelectionConfig().task_config(task, S.README_SETTING, 0)
    layer = augnet.AugmentationLayer([augnet.transforms.image.Rotate()])
    net = augnet.AugNet(torch.nn.Linear(2, 2), layer)
    groups = augnet.param_groups(net)
    aug = next(g for g in groups if any(p is layer.raw_magnitudes for p in g["params"]))
    trunk = next(g for g in groups if g is not aug and g["params"])
    assert config.lam == 0.5 and config.aug_lr == aug["lr"] and config.aug_weight_decay == aug["weight_decay"]
    assert config.weight_decay == trunk["weight_decay"] and config.magnitude_weight_decay is None
    assert (config.train_copies, config.eval_copies, config.effect_every, config.stratify) == (
        net.train_copies, net.eval_copies, net.effect_every, net.stratify)  # fmt: skip
    assert config.stratify is True  # the evaluation's copies stratified, as AugNet's default
    assert config.init_magnitude == float(layer.magnitudes.detach()[0]) and config.temperature == layer.temperature
    assert (config.regularizer, config.units, config.diverse, config.train_mode) == ("selective", "effect", True,
                                                                                      layer.train_mode)  # fmt: skip
    logits = next(g for g in groups if any(p is layer.weight_logits for p in g["params"]))
    assert config.weight_lr == logits["lr"] == augnet.WEIGHT_LR
    assert config.saturation == augnet.SATURATION  # selective_regularizer's default
    if S.task_kind(task) == "image":  # TranslateX() / TranslateY() as a user writes them
        assert build_model(config).stratify is True
        assert config.max_translate == augnet.transforms.image.TranslateX().max_shift == 0.25
    # Everything else is the task's: its data, trunk, learning rate and epochs.
    assert config.lr == type(config)().lr


@pytest.mark.parametrize("task", ["sprites", "sinusoids-2", "capacity"])
@pytest.mark.parametrize("setting", ["paper", "official", S.DEFAULT_SETTING, "effect units"])
def test_the_other_rows_keep_the_settings_they_were_run_with(task, setting):
    # The kept table of every row but the README's was trained with a linear pull, one rate for the augmentation
    # and shifts of up to half the size: the library's later defaults must not change what those rows train.
    config = S.SelectionConfig().task_config(task, setting, 0)
    assert config.saturation is None and config.weight_lr is None and config.stratify is False
    if S.task_kind(task) == "image":
        assert config.max_translate == 0.5
        from augnet.experiments.demo import build_model

        model = build_model(config)
        shifts = [t for t in model.augment.layers[0].transforms if type(t).__name__.startswith("Trans")]
        assert [t.max_shift for t in shifts] == [0.5, 0.5]
        assert model.stratify is False  # the model built evaluates with independent copies, as the row was measured


def entry(name, weight, magnitude, high):
    return {"transform": name, "weight": weight, "magnitude": magnitude, "transform_magnitude": magnitude,
            "range": [-high, high, "unit"]}  # fmt: skip


def sine_layer(fs, fts=(0.0, 0.0), noise=(0.0, 0.0), hz=None):
    fs_w, fs_m = fs
    return [entry("FrequencyShift", fs_w, fs_m, 2.0 * fs_m if hz is None else hz),
            entry("FTSurrogate", *fts, fts[1] * 36), entry("GaussianNoise", *noise, noise[1] * 0.1)]  # fmt: skip


def test_a_layer_holds_a_transform_is_the_identity_or_chose_nothing():
    assert R.layer_choice(sine_layer((0.9, 0.25), (0.05, 1.0), (0.05, 1.0))) == "FrequencyShift"
    assert R.layer_choice(sine_layer((0.9, 0.01), (0.05, 0.0), (0.05, 0.3))) == "identity"  # sum w mu <= 0.05
    assert R.layer_choice(sine_layer((0.4, 0.25), (0.3, 1.0), (0.3, 1.0))) == "none"


@pytest.mark.parametrize(
    "layers, ok",
    [
        ([sine_layer((0.97, 0.2))], True),
        ([sine_layer((0.97, 0.5))], False),  # ±1 Hz: twice the data's range
        ([sine_layer((0.4, 0.2), (0.6, 1.0))], False),  # FrequencyShift not selected
        ([sine_layer((0.97, 0.2)), sine_layer((0.0, 0.0), (0.99, 1.0))], True),
        ([sine_layer((0.97, 0.2)), sine_layer((0.97, 0.2))], False),  # the same transform twice
        ([sine_layer((0.97, 0.2)), sine_layer((0.0, 0.0), (0.9, 1.0)), sine_layer((0.3, 0.0), (0.3, 0.0))], True),
        ([sine_layer((0.97, 0.2)), sine_layer((0.0, 0.0), (0.45, 1.0), (0.55, 0.0))], False),  # chose nothing
    ],
)
def test_a_sinusoid_run_succeeds_when_frequency_shift_is_learned_and_layers_differ(layers, ok):
    assert R.succeeds({"task": f"sinusoids-{len(layers)}", "layers": layers}) is ok


@pytest.mark.parametrize("rotate, weight, ok", [(45.0, 0.9, True), (70.0, 0.9, False), (45.0, 0.3, False)])
def test_an_image_run_succeeds_when_rotate_is_selected_within_the_range(rotate, weight, ok):
    rest = (1 - weight) / 4
    layer = [entry("Rotate", weight, rotate / 180, rotate)] + [entry(n, rest, 0.1, 1.0) for n in "ABCD"]
    assert R.succeeds({"task": "sprites", "layers": [layer]}) is ok


def capacity_run(setting, seed, invariance, accuracy):
    trunks = [{"depth": d, "width": w, "accuracy": accuracy[(d, w)], "invariance": {}, "layers": [],
               "scores": [invariance[(d, w)]] * 3} for (d, w) in invariance]  # fmt: skip
    return {"task": "capacity", "setting": setting, "seed": seed, "trunks": trunks,
            "accuracy": sum(accuracy.values()) / len(accuracy)}  # fmt: skip


def test_rules_are_checked_with_what_they_measured():
    grid = [(d, w) for d in (1, 2, 3) for w in (4, 16, 64)]
    good = {k: (0.95 if k != (1, 4) else 0.5) for k in grid}
    records = [
        capacity_run("mine", 0, good, {k: 0.9 for k in grid}),
        capacity_run(S.ORACLE, 0, {k: 0.5 for k in grid}, {k: (0.95 if k == (2, 4) else 0.8) for k in grid}),
        capacity_run("paper", 0, {k: 0.5 for k in grid}, {k: 0.905 for k in grid}),
    ]
    rows = R.summarize(records)
    verdict = R.check_rules(rows, "mine", oracle=S.ORACLE)
    ok, what = verdict["capacity"]
    assert not ok and "on 8 of 9 trunks" in what and "on 2 of 3 width-4 trunks" in what  # (2, 4) below the oracle
    assert verdict["accuracy"][0] and "-0.005" in verdict["accuracy"][1]
    assert R.check_rules(rows, "paper", oracle=S.ORACLE)["capacity"][0] is False


def test_registered_experiment_writes_the_table_the_verdicts_and_the_figure(tmp_path, monkeypatch):
    real = S.run_selection

    def small(config, progress=False, log=None, path=None):
        config = tiny_config(seeds=1, tasks=("glyphs", "sinusoids-1", "capacity"), settings=("paper",))
        config.base = {"epochs": 1}
        return real(config, progress, log, path)

    monkeypatch.setattr(S, "run_selection", small)
    report = reproduce("selection", quick=True, out=tmp_path, progress=False)
    payload = json.loads((tmp_path / "selection" / "selection.json").read_text())
    runs = payload["numbers"]["runs"]
    assert [(r["task"], r["setting"]) for r in runs] == [
        ("glyphs", "paper"), ("sinusoids-1", "paper"), ("capacity", "paper"), ("capacity", S.ORACLE)]  # fmt: skip
    assert len(runs[0]["layers"][0]) == 5 and len(runs[2]["trunks"]) == 2
    assert "paper: misses a rule" in report.verdict or "paper: meets every rule" in report.verdict
    assert payload["numbers"]["rules"] == json.loads(json.dumps(R.RULES))
    # Resumable: every run is in runs.jsonl as it finished, and a second call trains nothing.
    lines = (tmp_path / "selection" / "runs.jsonl").read_text().splitlines()
    assert len(lines) == 4
    trained = []
    monkeypatch.setattr(S, "run_one", lambda *args: trained.append(args))
    again = reproduce("selection", quick=True, out=tmp_path, progress=False)
    assert trained == [] and again.verdict.splitlines()[1:] == report.verdict.splitlines()[1:]
    # the same report from the stored rows and runs (how a table with one setting trained again is rebuilt)
    again = R.report_of_rows(S.SelectionConfig(seeds=1), payload["numbers"]["summary"], runs, tmp_path, 1.0)
    assert again.verdict.splitlines()[1:] == report.verdict.splitlines()[1:]
    assert json.loads(json.dumps(again.numbers["verdicts"])) == payload["numbers"]["verdicts"]
    pytest.importorskip("matplotlib")
    assert (tmp_path / "selection" / "selection.png").exists()


def test_presets_say_what_the_paper_and_its_code_use():
    official = DemoConfig.preset("official")
    assert (official.temperature, official.lr, official.aug_lr) == (0.01, 5e-4, None)
    assert (official.weight_decay, official.aug_weight_decay, official.width) == (1.0, 1.0, 32)
    paper = DemoConfig.preset("paper")
    assert (paper.n_train, paper.n_test, paper.epochs, paper.init_magnitude) == (10_000, 5_000, 20, 0.125)
    assert DemoConfig.preset("augnet", epochs=3).epochs == 3
    # The demo's default is augnet's selection; the paper's text and its code select as the paper does.
    augnet_preset = DemoConfig.preset("augnet")
    for name in ("regularizer", "units", "diverse", "train_mode", "effect_every", "magnitude_weight_decay",
                 "saturation", "weight_lr", "max_translate"):  # fmt: skip
        assert getattr(DemoConfig(), name) == getattr(augnet_preset, name), name
    for preset in (paper, official):
        assert (preset.regularizer, preset.train_mode, preset.effect_every) == ("paper", "mix", 0)
        assert preset.magnitude_weight_decay is None
        assert (preset.weight_lr, preset.max_translate) == (None, 0.5)  # the paper's one rate and shift range
    assert set(PRESETS) == {"augnet", "official", "paper"}
    with pytest.raises(ValueError, match="unknown preset"):
        DemoConfig.preset("fast")


@pytest.mark.parametrize(
    "field, value, match",
    [
        ("data", "mnist", "data must be one of"),
        ("trunk", "resnet", "trunk must be one of"),
        ("transforms", ("Rotate", "Twist"), "unknown transforms"),
        ("calibrate", "output", "calibrate must be one of"),
        ("warmup_epochs", -1, "warmup_epochs"),
        ("anneal_to", 0.0, "anneal_to"),
        ("max_translate", 0.0, "max_translate"),
        ("max_translate", float("nan"), "max_translate"),
        ("max_translate", "0.25", "max_translate"),
    ],
)
def test_demo_config_is_checked_before_any_work(field, value, match):
    with pytest.raises(ValueError, match=match):
        run_demo(DemoConfig(**{field: value}), progress=False)


def test_the_paper_trunk_and_calibration_in_the_demo_model():
    import torch

    from augnet.data import rotated_sprites
    from augnet.experiments.trunks import PaperCNN

    x, _ = rotated_sprites(32)
    model = build_model(DemoConfig(width=4, calibrate="trunk"), x)
    assert isinstance(model.trunk, PaperCNN) and model.trunk.training  # back in training mode
    layer = model.augment.layers[0]
    assert layer.calibration is not None and float(layer.magnitude_caps.max()) == 1.0
    convs = [m for m in model.trunk.modules() if isinstance(m, torch.nn.Conv2d)]
    assert [c.out_channels for c in convs] == [4, 8, 16, 32]  # c, 2c, 4c, 8c
    with pytest.raises(ValueError, match="needs the training images"):
        build_model(DemoConfig(calibrate="input"))


def test_worker_processes_start_after_autograd_has_run_in_this_process():
    """Workers are spawned: a forked pool fails once autograd has run here (a test session, a notebook)."""
    import torch

    torch.ones(2, requires_grad=True).sum().backward()
    config = S.SelectionConfig(tasks=("sinusoids-1",), settings=(S.DEFAULT_SETTING,), seeds=2, quick=True, workers=2)
    config.base = {"epochs": 1, "n_train": 40, "n_test": 20}
    records = S.run_selection(config)
    assert [(r["task"], r["seed"]) for r in records] == [("sinusoids-1", 0), ("sinusoids-1", 1)]
    assert all(0.0 <= r["accuracy"] <= 1.0 and len(r["layers"]) == 1 for r in records)


def test_weights_at_epoch_reads_the_last_record_within_the_epochs():
    from types import SimpleNamespace

    config = SimpleNamespace(n_train=100, batch_size=32)  # 4 steps an epoch (the last batch is partial)
    history = {"step": [1, 5, 8, 10], "weights": [[[0.5, 0.5]], [[0.6, 0.4]], [[0.7, 0.3]], [[0.9, 0.1]]]}
    early = S.weights_at_epoch(history, config, ["Rotate", "TranslateX"], 2)
    assert early == {"epoch": 2, "step": 8, "weights": {"Rotate": 0.7, "TranslateX": 0.3}}
    assert S.weights_at_epoch(history, config, ["Rotate", "TranslateX"], 100)["step"] == 10
    assert S.weights_at_epoch({"step": [5], "weights": [[[1.0]]]}, config, ["Rotate"], 1) is None  # no record yet
    assert S.weights_at_epoch({"step": [1], "loss": [0.1]}, config, ["Rotate"], 1) is None  # no layers
    with pytest.raises(ValueError):  # a name per weight
        S.weights_at_epoch(history, config, ["Rotate"], 2)


def test_the_report_counts_the_runs_committed_after_the_early_epochs():
    def run(seed, early):
        layers = [[entry("Rotate", 0.8, 0.25, 45.0), entry("ShearX", 0.2, 0.1, 0.1)]]
        return {"task": "sprites", "setting": "s", "seed": seed, "accuracy": 1.0, "layers": layers, "early": early}

    weights = [{"Rotate": 0.55, "ShearX": 0.45}, {"Rotate": 0.3, "ShearX": 0.7}, {"Rotate": 0.4, "ShearX": 0.35}]
    records = [run(k, {"weights": w}) for k, w in enumerate(weights)] + [run(3, None)]
    row = R.summarize(records)[0]
    assert row["early"] == {"known": 3, "committed": 2, "described": ["Rotate 0.55", "ShearX 0.70", "Rotate 0.40"]}
    assert "early" not in R.summarize([run(0, None)])[0]


def test_the_kept_experiments_pin_the_settings_they_were_run_with():
    # Their stored results were trained with a linear pull, one augmentation rate and shifts of half the size.
    import functools

    import augnet
    from augnet.experiments.capacity import CapacityConfig
    from augnet.experiments.instance import InstanceConfig
    from augnet.experiments.rotation import RotationConfig
    from augnet.experiments.runner import regularizer_of
    from augnet.experiments.versus_tasks import TASKS as VERSUS_TASKS
    from augnet.experiments.versus_tasks import candidates, fixed_candidates

    for config in (RotationConfig().demo_config(), SinusoidsConfig(), CapacityConfig(), InstanceConfig()):
        assert (config.saturation, config.weight_lr) == (None, None), type(config).__name__
    for config in (RotationConfig().demo_config(), SinusoidsConfig(), CapacityConfig()):
        reg = regularizer_of(config)
        assert isinstance(reg, functools.partial) and reg.keywords["saturation"] is None
    assert RotationConfig().demo_config().max_translate == 0.5
    # the demo is the README's model: the library's defaults, the regulariser by name
    assert regularizer_of(DemoConfig()) == "selective"
    assert (DemoConfig().saturation, DemoConfig().weight_lr, DemoConfig().max_translate) == (
        augnet.SATURATION, augnet.WEIGHT_LR, 0.25)  # fmt: skip
    # the comparison's fixed grid searched shifts of up to half the size; AugNet's candidates are the defaults
    digits = VERSUS_TASKS["digits"]
    assert [t.max_shift for t in fixed_candidates(digits)[:2]] == [0.5, 0.5]
    assert [t.max_shift for t in candidates(digits)[:2]] == [0.25, 0.25]


def test_run_selection_resumes_only_the_very_same_runs(tmp_path):
    config = S.SelectionConfig(tasks=("sinusoids-1",), settings=(S.DEFAULT_SETTING,), seeds=2, quick=True)
    config.base = {"epochs": 1, "n_train": 40, "n_test": 20}
    path = tmp_path / "runs.jsonl"
    first = S.run_selection(config, path=path)
    lines = path.read_text().splitlines()
    path.write_text("\n".join([*lines[:1], lines[1][:40]]))  # interrupted while writing the second run
    again = S.run_selection(config, path=path)  # the second run trained again, the first read back
    assert [r["accuracy"] for r in again] == [r["accuracy"] for r in first]
    assert len(path.read_text().splitlines()) == 2 and all(json.loads(x) for x in path.read_text().splitlines())
    config.base = {**config.base, "epochs": 2}  # other settings: other runs, none reused
    assert {json.loads(r["key"])[3] for r in S.run_selection(config, path=path)}.isdisjoint(
        {json.loads(r["key"])[3] for r in first})
    assert len(path.read_text().splitlines()) == 4


def test_a_capacity_run_with_nan_scores_writes_a_strict_json_line(tmp_path, monkeypatch):
    # A tiny trunk can map two inputs to one output: their invariance score is NaN. The runs file wrote it as a
    # bare NaN token, which strict JSON readers refuse; the score is left out, as capacity.json leaves it out (the
    # pooled summary leaves NaN out anyway).
    import math

    import torch

    import augnet.experiments.capacity as cap

    def fake(config, progress=False):
        yield {"depth": 1, "width": 4, "accuracy": 0.5, "invariance": {"median": 0.9, "n": 2},
               "scores": torch.tensor([0.9, math.nan, 0.8], dtype=torch.float64), "history": {}}  # fmt: skip

    monkeypatch.setattr(cap, "run_capacity", fake)
    config = S.SelectionConfig(tasks=("capacity",), settings=("paper",), seeds=1, quick=True)
    path = tmp_path / "runs.jsonl"
    records = S.run_selection(config, path=path)
    assert next(t["scores"] for r in records for t in r["trunks"]) == [0.9, 0.8]

    def refuse(token):
        raise ValueError(f"not strict JSON: {token}")

    lines = [json.loads(line, parse_constant=refuse) for line in path.read_text().splitlines()]
    assert len(lines) == 2  # the setting and the oracle
