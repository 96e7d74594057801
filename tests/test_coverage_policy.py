"""Branches the suite left unrun: policy summaries (augnet.instance_policy), the exporters' checks
(augnet.export), the experiments' registry and the training devices. Each test says what the branch should do."""

from __future__ import annotations

import json
import math
import os
import signal
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import augnet
from augnet.instance import ConditionedAugmentationLayer
from augnet.instance_policy import PolicySummary, averaged_policy, plot_policy_summary, policy_summary
from augnet.policy import Policy
from augnet.transforms import image as T

# --------------------------------------------------------------------------------------------- summaries


def _conditioned(seed: int = 0) -> ConditionedAugmentationLayer:
    torch.manual_seed(seed)
    return ConditionedAugmentationLayer([T.Rotate(), T.Invert()], channels=3, init_magnitude=0.25)


def _data():
    return torch.rand(4, 3, 8, 8, generator=torch.Generator().manual_seed(1)), torch.tensor([0, 1, 0, 1])


def test_a_model_that_is_not_a_module_is_a_type_error_naming_model():
    with pytest.raises(TypeError, match=r"^model must be a model or a ConditionedAugmentationLayer, got str$"):
        policy_summary("model.pt", _data())
    with pytest.raises(TypeError, match=r"^model must be"):
        averaged_policy(None, _data())


def test_which_conditioned_layer_reads_clean_input_is_found_or_the_model_refused():
    x, y = _data()
    two = nn.Sequential(augnet.AugmentationModule([_conditioned()]), augnet.AugmentationModule([_conditioned(1)]))
    with pytest.raises(ValueError, match=r"Sequential holds 2 augmentation modules whose first layer is conditioned"):
        policy_summary(two, (x, y))
    second = augnet.AugmentationModule([augnet.AugmentationLayer([T.Rotate()]), _conditioned()])
    with pytest.raises(ValueError, match=r"the conditioned layer is not the first layer of its module"):
        policy_summary(second, (x, y))
    loose = nn.Sequential(_conditioned(), nn.Flatten())
    with pytest.raises(ValueError, match=r"the conditioned layer in Sequential is not in an AugNet or Augmentation"):
        policy_summary(loose, (x, y))
    with pytest.raises(ValueError, match=r"no ConditionedAugmentationLayer found in Linear"):
        policy_summary(nn.Linear(2, 2), (x, y))
    # the one conditioned first layer of a module inside the model: the summary of that layer itself
    layer = _conditioned()
    wrapped = nn.Sequential(augnet.AugmentationModule([layer, augnet.AugmentationLayer([T.Rotate()])]), nn.Flatten())
    assert policy_summary(wrapped, (x, y)).to_json() == policy_summary(layer, (x, y)).to_json()


@pytest.mark.parametrize(
    "quantiles, error, match",
    [
        ("0.5", TypeError, "quantiles must be a sequence of levels in"),
        (torch.tensor(0.5), TypeError, "quantiles must be a sequence of levels in .*got 0.5"),
        ({0.5}, TypeError, "quantiles must be a sequence"),
        ([0.5, "a"], TypeError, r"quantiles must be numbers \(levels in \[0, 1\]\), got \[0.5, 'a'\]"),
        ([0.5, True], TypeError, "quantiles must be numbers"),
        ([], ValueError, r"quantiles must be levels in \[0, 1\], got \[\]"),
        ([0.5, 1.5], ValueError, r"quantiles must be levels in \[0, 1\], got \[0.5, 1.5\]"),
        ([float("nan")], ValueError, "quantiles must be levels in"),
    ],
)
def test_bad_quantiles_are_refused_naming_them(quantiles, error, match):
    with pytest.raises(error, match=match):
        policy_summary(_conditioned(), _data(), quantiles=quantiles)


def test_quantiles_given_as_an_array_are_the_levels_they_hold():
    layer, data = _conditioned(), _data()
    listed = policy_summary(layer, data, quantiles=[0.25, 0.75])
    assert policy_summary(layer, data, quantiles=np.array([0.25, 0.75])).to_json() == listed.to_json()
    assert listed.quantiles == (0.25, 0.75)


def test_loaders_and_batches_that_are_not_x_y_pairs_are_refused_naming_them():
    layer, (x, y) = _conditioned(), _data()
    with pytest.raises(TypeError, match=r"loader must be an iterable of .* got 5"):
        policy_summary(layer, 5)
    with pytest.raises(ValueError, match=r"loader must give \(x, y\) batches, got Tensor in batch 0"):
        policy_summary(layer, [x])  # a loader of inputs only
    with pytest.raises(ValueError, match=r"got list in batch 1"):
        policy_summary(layer, [(x, y), [x]])
    with pytest.raises(TypeError, match=r"^batch 0: x must be a tensor of inputs, got ndarray$"):
        policy_summary(layer, [(x.numpy(), y)])
    with pytest.raises(ValueError, match=r"^batch 0: x is on meta, which holds no values"):
        policy_summary(layer, [(torch.empty(4, 3, 8, 8, device="meta"), y)])


def test_no_batch_or_no_sample_is_refused_and_an_empty_batch_is_skipped():
    layer, (x, y) = _conditioned(), _data()
    with pytest.raises(ValueError, match=r"^the loader gave no batch$"):
        policy_summary(layer, [])
    with pytest.raises(ValueError, match=r"^the data hold no sample \(2 empty batch\(es\)\)"):
        policy_summary(layer, [(x[:0], y[:0]), (x[:0], y[:0])])
    skipped = policy_summary(layer, [(x[:0], y[:0]), (x, y)])
    assert skipped.to_json() == policy_summary(layer, (x, y)).to_json()
    assert layer.training  # the layer's mode restored after an error and after a summary alike


def test_device_is_the_layers_or_refused_before_any_batch_runs():
    layer, data = _conditioned(), _data()
    plain = policy_summary(layer, data).to_json()
    assert policy_summary(layer, data, device="cpu").to_json() == plain
    assert policy_summary(layer, data, device=torch.device("cpu")).to_json() == plain

    def no_batch():  # a loader that must not be read
        raise AssertionError("a batch was read")
        yield

    with pytest.raises(ValueError, match=r"^device must name a device, got 'toaster' \("):
        policy_summary(layer, no_batch(), device="toaster")
    with pytest.raises(ValueError, match=r"^device must name a device, got 3.5 \(.*\)$"):  # one line
        policy_summary(layer, no_batch(), device=3.5)
    for other in ("meta", "cuda:7"):
        with pytest.raises(ValueError, match=rf"^device {other} is not the layer's \(cpu\): move the model there"):
            policy_summary(layer, no_batch(), device=other)


# ------------------------------------------------------------------------------ summaries read and printed


def _summary_json(classes) -> dict:
    return {"transforms": ["Rotate", "Invert"], "units": ["deg", ""], "quantiles": [0.5], "classes": classes}


@pytest.mark.parametrize("classes", [[1, 2], {"one": {}}, {"1": 5}, {"1": [0.5]}, None])
def test_summary_json_whose_classes_are_not_labels_to_entries_is_refused(classes):
    with pytest.raises(ValueError, match=r"^a summary's 'classes' must map integer labels to entries"):
        PolicySummary.from_json(_summary_json(classes))


def test_summary_json_reads_nan_and_unbounded_ends_back_as_floats():
    entry = {"count": 2, "range_mean": [None, "inf"], "range_quantiles": [["-inf", 1.5]]}
    read = PolicySummary.from_json(_summary_json({"3": entry}))
    got = read.classes[3]
    assert math.isnan(got["range_mean"][0]) and got["range_mean"][1] == math.inf
    assert got["range_quantiles"] == [[-math.inf, 1.5]]
    assert read.to_json()["classes"]["3"] == entry  # written back as it was read


def _hand_made(weights: dict[int, list[float]]) -> PolicySummary:
    classes = {k: {"count": 1, "weight_mean": w, "magnitude_mean": [0.25 * (k + 1), 0.5]} for k, w in weights.items()}
    return PolicySummary(["Rotate", "Invert"], ["deg", ""], (0.5,), classes)


def test_class_averaged_is_each_class_once_normalised():
    w, m = _hand_made({0: [0.25, 0.5], 1: [0.5, 0.75]}).class_averaged()
    assert w == [0.375 / 1.0, 0.625 / 1.0]  # means (0.375, 0.625) sum to 1 exactly
    assert m == [0.375, 0.5]
    w, _ = _hand_made({0: [0.25, 0.25]}).class_averaged()
    assert w == [0.5, 0.5]


@pytest.mark.parametrize("weights", [[0.0, 0.0], [-0.5, 1.0], [float("nan"), 1.0], [float("inf"), 1.0]])
def test_class_averaged_refuses_weights_that_are_no_distribution(weights):
    # a hand-made or edited summary: before, zero weights raised ZeroDivisionError and negative ones gave a
    # "distribution" with a negative entry
    with pytest.raises(ValueError, match=r"^the classes' mean weights average to .* no distribution to normalise"):
        _hand_made({0: weights}).class_averaged()


def test_class_averaged_and_policy_of_a_summary_without_classes_are_refused():
    empty = PolicySummary.from_json(_summary_json({}))
    with pytest.raises(ValueError, match=r"^this summary holds no class"):
        empty.class_averaged()
    with pytest.raises(ValueError, match=r"holds no layer"):
        empty.policy()


def test_a_hand_made_summary_prints_its_range_mean():
    s = PolicySummary(["Rotate"], ["deg"], (0.5,), {0: {"count": 3, "weight_mean": [1.0], "range_mean": [12.345]}})
    assert str(s) == "class 0 (3): Rotate w 1.00 range 12.3 deg"


def test_plotting_nothing_or_with_names_not_a_dict_is_refused_before_drawing(tmp_path):
    path = tmp_path / "summary.png"
    with pytest.raises(ValueError, match=r"^the summary holds no class: nothing to plot$"):
        plot_policy_summary(PolicySummary(["Rotate"], ["deg"], (0.5,)), path)
    s = _hand_made({0: [0.5, 0.5]})
    with pytest.raises(TypeError, match=r"^names must be a dict \{class label: name\} or None, got list$"):
        plot_policy_summary(s, path, names=["zero"])
    assert not path.exists()


# --------------------------------------------------------------------------------------------- exports


def _entry(name: str, weight: float = 1.0, magnitude: float = 1.0, **args) -> dict:
    return {"transform": name, "weight": weight, "magnitude": magnitude, "args": args}


def _exporter(library: str):
    pytest.importorskip(library)
    from augnet.export import to_kornia, to_torchvision

    return {"kornia": to_kornia, "torchvision": to_torchvision}[library]


@pytest.mark.parametrize("library", ["kornia", "torchvision"])
def test_what_is_not_a_policy_is_refused_naming_policy(library):
    export = _exporter(library)
    with pytest.raises(TypeError, match=r"^policy must be an augnet Policy .* got the module AugmentationLayer: pass"):
        export(augnet.AugmentationLayer([T.Rotate()]))
    with pytest.raises(TypeError, match=r"^policy must be an augnet Policy \(or its to_json\(\) dict\), got int$"):
        export(3)
    with pytest.raises(ValueError, match=r"^policy layer 1 must be a list of entries, got 'Rotate'$"):
        export(Policy([[_entry("Rotate")], "Rotate"]))


@pytest.mark.parametrize("library", ["kornia", "torchvision"])
def test_weights_that_sum_past_a_floats_range_are_refused(library):
    with pytest.raises(ValueError, match=r"^policy layer 0: the weights \[1e\+308, 1e\+308\] sum beyond a float's"):
        _exporter(library)(Policy([[_entry("Rotate", 1e308), _entry("Invert", 1e308)]]))


@pytest.mark.parametrize(
    "size", [torch.tensor([[8, 8]]), torch.tensor([8.0, 8.0]), torch.tensor([True, True]), np.array([8.0, 8.0])]
)
@pytest.mark.parametrize("library", ["kornia", "torchvision"])
def test_a_size_tensor_or_array_that_is_not_1d_integers_is_a_type_error(library, size):
    with pytest.raises(TypeError, match=r"^size must be None or a pair of ints \(H, W\), got"):
        _exporter(library)(Policy([[_entry("Rotate")]]), size=size)


# (transform, args, library, the op's capped range as its repr or attribute shows it, the warning's end)
CAPS = [
    ("TranslateX", {"max_shift": 3.0}, "kornia", "translate=(1.0, 0.0)", "a shift (fraction of the size) of 1.5"),
    ("TranslateY", {"max_shift": 3.0}, "kornia", "translate=(0.0, 1.0)", "a shift (fraction of the size) of 1.5"),
    ("Rotate", {"max_angle": 20.0}, "kornia", "degrees=(-360.0, 360.0)", "a rotation (degrees) of 573"),
    ("Brightness", {"max_shift": 3.0}, "kornia", "brightness_factor=tensor([0., 2.])", "a brightness shift of 1.5"),
    ("Hue", {"max_angle": 10.0}, "kornia", "hue_factor=tensor([-0.5000,  0.5000])", "a hue rotation (turns) of 0.7958"),
    ("TranslateX", {"max_shift": 3.0}, "torchvision", "translate=(1.0, 0.0)", "a shift (fraction of the size) of 1.5"),
    ("Hue", {"max_angle": 10.0}, "torchvision", "hue=(-0.5, 0.5)", "a hue rotation (turns) of 0.7958"),
]


def _first_op(exported, library):
    if library == "kornia":
        return exported.layers[0].ops[0]
    return exported.transforms[0].transforms[0]


@pytest.mark.parametrize("name, args, library, capped, said", CAPS)
def test_a_range_past_what_the_library_takes_is_capped_with_a_warning(name, args, library, capped, said):
    export = _exporter(library)
    with pytest.warns(UserWarning) as caught:
        op = _first_op(export(Policy([[_entry(name, magnitude=0.5, **args)]])), library)
    notes = [str(w.message) for w in caught if "is capped at" in str(w.message)]
    assert len(notes) == 1 and notes[0].startswith(f"augnet.export: {name} is exported to {library} approximately")
    limit = {"a rotation (degrees)": "360", "a hue rotation (turns)": "0.5"}.get(said.rsplit(" of", 1)[0], "1")
    assert notes[0].endswith(f"{said} is capped at {limit}")
    shown = repr(op) if library == "kornia" else f"{capped.split('=')[0]}={getattr(op, capped.split('=')[0])}"
    assert capped in shown


@pytest.mark.parametrize("library", ["kornia", "torchvision"])
def test_a_shift_of_the_whole_image_is_at_the_cap_not_past_it(library):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _exporter(library)(Policy([[_entry("TranslateX", max_shift=1.0)]]))
    assert not [w for w in caught if "capped" in str(w.message)]


def test_every_image_transform_but_sample_pairing_has_a_counterpart_in_both_libraries():
    # What lets _why_none drop its "no counterpart" case: a builder that falls through for an image transform would
    # call it "not an image transform"; this fails first.
    pytest.importorskip("kornia")
    pytest.importorskip("torchvision")
    from augnet.export import export_support
    from augnet.export._common import IMAGE_NAMES

    table = export_support()
    assert table["SamplePairing"] == {"kornia": "none", "torchvision": "none"}
    for name in IMAGE_NAMES - {"SamplePairing"}:
        assert "none" not in table[name].values(), name
    assert all(table[n] == {"kornia": "none", "torchvision": "none"} for n in table if n not in IMAGE_NAMES)


@pytest.mark.parametrize("library", ["kornia", "torchvision"])
def test_the_error_of_a_transform_without_counterpart_says_why(library):
    from augnet.transforms import signal as S

    export = _exporter(library)
    with pytest.raises(ValueError, match=rf"^augnet.export: SamplePairing cannot be exported to {library}: it blends"):
        export(Policy([[_entry("SamplePairing")]]))
    signal_name = next(n for n in S.__all__ if isinstance(getattr(S, n), type) and n != "SignalTransform")
    with pytest.raises((ValueError, TypeError)) as err:
        export(Policy([[_entry(signal_name)]]))
    if "cannot be exported" in str(err.value):  # (a signal transform whose arguments build by default)
        assert str(err.value).endswith("it is not an image transform")


@pytest.mark.parametrize(
    "ops, probs, sources, error, match",
    [
        ([], [], None, ValueError, "need as many probabilities .* got 0 ops, 0 probs$"),
        ([nn.Identity()], [1.0, 2.0], None, ValueError, "got 1 ops, 2 probs$"),
        ([nn.Identity()] * 2, [1.0, 2.0], [0], ValueError, "got 2 ops, 2 probs and 1 sources$"),
        ([nn.Identity()], [0.0], None, ValueError, r"^probs must be finite numbers >= 0 with a sum above 0, got \[0.0"),
        ([nn.Identity()] * 2, [-1.0, 2.0], None, ValueError, "^probs must be finite numbers >= 0"),
        ([nn.Identity()] * 2, [float("nan"), 2.0], None, ValueError, "^probs must be finite numbers >= 0"),
        ([nn.Identity()] * 2, [1e308, 1e308], None, ValueError, "^probs must be finite numbers >= 0"),
        ([nn.Identity()], ["a"], None, TypeError, r"^probs must be numbers, got \['a'\]"),
        ([nn.Identity()], [True], None, TypeError, r"^probs must be numbers"),
        ([nn.Identity()], 1.0, None, TypeError, "^probs must be a sequence, got float"),
        ([3], [1.0], None, TypeError, r"^ops must be modules \(kornia ops\), got \['int'\]"),
        (nn.Identity(), [1.0], None, TypeError, "^ops must be a sequence, got Identity"),
        ([nn.Identity()], [1.0], [0.5], TypeError, r"^sources must be ints \(entry indices\), got \[0.5\]"),
    ],
)
def test_a_kornia_choice_refuses_what_it_could_not_draw_from_when_built(ops, probs, sources, error, match):
    pytest.importorskip("kornia")
    from augnet.export import KorniaChoice

    with pytest.raises(error, match=match):  # before: a RuntimeError (or IndexError) at the first call, or none
        KorniaChoice(ops, probs, sources)


def test_a_kornia_choice_takes_tensors_and_arrays_of_probabilities_and_sources():
    pytest.importorskip("kornia")
    from augnet.export import KorniaChoice

    choice = KorniaChoice(nn.ModuleList([nn.Identity(), nn.Identity()]), torch.tensor([1.0, 3.0]), np.array([4, -1]))
    assert choice.probs.tolist() == [0.25, 0.75] and choice.sources == [4, -1]
    assert all(type(j) is int for j in choice.sources)
    choice(torch.rand(16, 3, 4, 4))
    assert set(choice.last_choice.tolist()) <= {4, -1}


def test_a_kornia_policy_takes_its_size_as_to_kornia_does():
    pytest.importorskip("kornia")
    from augnet.export import KorniaChoice, KorniaPolicy

    layers = [KorniaChoice([nn.Identity()], [1.0])]
    x = torch.rand(3, 4, 5)
    for size in ([4, 5], torch.tensor([4, 5]), (4, 5)):  # a list was compared unequal to every (H, W): refused all
        policy = KorniaPolicy(layers, size=size)
        assert policy.size == (4, 5)
        assert torch.equal(policy(x), x)
    with pytest.raises(ValueError, match=r"exported for images of size \(4, 5\), got \(5, 4\)"):
        KorniaPolicy(layers, size=[4, 5])(torch.rand(3, 5, 4))
    with pytest.raises(ValueError, match=r"^size must be positive, got \(0, 5\)"):
        KorniaPolicy(layers, size=(0, 5))
    with pytest.raises(TypeError, match=r"^size must be None or a pair of ints \(H, W\), got '45'"):
        KorniaPolicy(layers, size="45")
    with pytest.raises(TypeError, match=r"^expected a tensor image or batch, got ndarray$"):
        KorniaPolicy(layers)(x.numpy())


# --------------------------------------------------------------------------------------- experiments registry


def test_a_device_string_torch_cannot_read_is_a_one_line_setup_error_with_its_flag():
    from augnet.experiments import SetupError, check_settings

    with pytest.raises(SetupError, match=r"^device 'toaster' is not a device: Expected one of cpu") as err:
        check_settings("sinusoids", device="toaster")
    assert err.value.cli.startswith("--device 'toaster' is not a device: Expected one of cpu")
    with pytest.raises(SetupError, match=r"^device 3.5 is not a device: ") as err:  # torch's message: many lines
        check_settings("sinusoids", device=3.5)
    assert "\n" not in str(err.value) and "\n" not in err.value.cli and err.value.cli.startswith("--device 3.5 ")


def test_an_out_that_is_not_a_path_is_a_type_error_before_any_work(tmp_path, monkeypatch):
    from augnet.experiments import reproduce

    monkeypatch.chdir(tmp_path)
    with pytest.raises(TypeError, match=r"^out must be a str or a path-like object, got int: 3$"):
        reproduce("sinusoids", quick=True, out=3, progress=False)
    assert list(tmp_path.iterdir()) == []


class _Opaque:
    pass


def test_an_experiments_numbers_are_written_as_json_paths_as_strings_arrays_as_lists(tmp_path):
    from augnet.experiments import Report, _registry, register, reproduce

    numbers = {"path": Path("a") / "b.png", "array": np.array([1, 2]), "tensor": torch.tensor([0.5, float("inf")])}
    name = "_coverage_fake"

    @register(name)
    def fake(out_dir, quick, seed, progress, device):
        return Report(name, "fine", dict(numbers))

    try:
        report = reproduce(name, out=tmp_path, progress=False)
        written = json.loads((tmp_path / name / f"{name}.json").read_text())
        assert written["numbers"] == {"path": str(Path("a") / "b.png"), "array": [1, 2], "tensor": [0.5, "inf"]}
        assert report.verdict == "fine" and (tmp_path / name / "verdict.txt").read_text() == "fine\n"
        numbers["opaque"] = _Opaque()
        with pytest.raises(TypeError, match=r"^not JSON serialisable: _Opaque$"):
            reproduce(name, out=tmp_path / "again", progress=False)
    finally:
        _registry._REGISTRY.pop(name, None)
    assert name not in _registry.names()


def test_a_job_queued_before_ctrl_c_ends_unrun():
    from augnet.experiments import _registry

    ran = []
    assert _registry._unless_interrupted(ran.append, 1) is None and ran == [1]
    was = _registry._interrupted
    _registry._interrupted = True
    try:
        with pytest.raises(KeyboardInterrupt):
            _registry._unless_interrupted(ran.append, 2)
    finally:
        _registry._interrupted = was
    assert ran == [1]


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="POSIX signal masks")
def test_a_workers_initializer_notes_ctrl_c_and_stops_the_running_job():
    # What a WorkerPool's worker runs first (in the worker: tests/test_experiments.py checks it there, where
    # coverage does not see it); here in this process, its handler restored after.
    from augnet.experiments import _registry

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers are set in the main thread only")
    handler, was = signal.getsignal(signal.SIGINT), _registry._interrupted
    try:
        _registry._in_worker()
        assert signal.getsignal(signal.SIGINT) is _registry._on_interrupt
        assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, set())
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)  # interrupted at once
        assert _registry._interrupted  # the jobs queued after it end unrun
    finally:
        signal.signal(signal.SIGINT, handler)
        _registry._interrupted = was


# --------------------------------------------------------------------------------------------------- devices


def test_a_model_without_parameters_is_on_its_first_buffers_device_else_the_cpu():
    from augnet.training.devices import model_device

    buffers = nn.BatchNorm1d(3, affine=False).to("meta")
    assert next(buffers.parameters(), None) is None
    assert model_device(buffers) == torch.device("meta")
    assert model_device(nn.Identity()) == torch.device("cpu")
    both = nn.Linear(2, 2)
    both.register_buffer("b", torch.zeros(1, device="meta"))
    assert model_device(both) == torch.device("cpu")  # a parameter's device first


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_a_gpu_past_the_last_is_refused_and_one_there_is_taken():
    from augnet.training import resolve_device

    count = torch.cuda.device_count()
    assert resolve_device("cuda:0") == torch.device("cuda:0")
    assert resolve_device("cuda") == torch.device("cuda")
    with pytest.raises(ValueError, match=rf"^device cuda:{count} was asked for, but this machine has {count} GPU"):
        resolve_device(f"cuda:{count}")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_a_summary_on_the_gpu_takes_the_layers_device_and_refuses_another():
    layer, data = _conditioned().cuda(), _data()
    on_cpu = policy_summary(_conditioned(), data)
    for device in (None, "cuda", "cuda:0", torch.device("cuda", 0)):
        got = policy_summary(layer, data, device=device)
        for k, entry in got.classes.items():
            assert entry["count"] == on_cpu.classes[k]["count"]
            np.testing.assert_allclose(entry["weight_mean"], on_cpu.classes[k]["weight_mean"], rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match=r"^device cpu is not the layer's \(cuda:0\)"):
        policy_summary(layer, data, device="cpu")
    with pytest.raises(ValueError, match=r"^device cuda:1 is not the layer's \(cuda:0\)"):
        policy_summary(layer, data, device="cuda:1")
