"""Reliability of policy files and their export (issue 25).

A policy file either means one thing everywhere (``AugmentationModule.from_policy``,
``Policy.to_kornia``, ``Policy.to_torchvision``) or is refused by all of them with a
ValueError / TypeError naming the field and the value. The stored state
(weight logits, raw magnitudes, temperature, calibration) is the truth; the
entries (weight, magnitude, range) must agree with it.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import warnings

import pytest
import torch
from helpers import gen
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import augnet
from augnet.export import _common
from augnet.layers import Policy
from augnet.transforms import image as T

DELETE = object()
READERS = ("from_policy", "kornia", "torchvision")
PROPERTY = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


def smooth_images(b=6, size=12, seed=0):
    x = torch.rand(b, 3, size // 4, size // 4, generator=gen(seed))
    return torch.nn.functional.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)


def good_module(calibrated: bool = True) -> augnet.AugmentationModule:
    first = augnet.AugmentationLayer(
        [T.Rotate(max_angle=1.0), T.TranslateX(), T.Brightness(max_shift=0.2)], temperature=0.5
    )
    second = augnet.AugmentationLayer([T.HorizontalFlip(), T.Contrast()], eval_mode="mix", train_mode="mix")
    with torch.no_grad():
        first.weight_logits.copy_(torch.tensor([0.3, -0.1, 0.2]))
        first.raw_magnitudes.copy_(torch.tensor([0.7, 0.2, 0.4]))
        second.weight_logits.copy_(torch.tensor([1.0, -1.0]))
        second.raw_magnitudes.copy_(torch.tensor([0.6, 0.05]))
    module = augnet.AugmentationModule([first, second])
    x = smooth_images()
    if calibrated:
        first.calibrate(x, points=5)
    module(x, copies=2, generator=gen(1))  # the layers have seen 12 x 12 images: TranslateX's range is in px
    return module


_GOOD: dict[bool, str] = {}


def good_file(calibrated: bool = True) -> dict:
    """The policy file of :func:`good_module` (a fresh copy)."""
    if calibrated not in _GOOD:
        _GOOD[calibrated] = json.dumps(good_module(calibrated).policy().to_json())
    return json.loads(_GOOD[calibrated])


def mutated(data: dict, path: tuple, value) -> dict:
    data = copy.deepcopy(data)
    target = data
    for key in path[:-1]:
        target = target[key]
    if value is DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return data


def read(reader: str, data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # approximate exports
        if reader == "from_policy":
            return augnet.AugmentationModule.from_policy(data)
        if reader == "kornia":
            return Policy.from_json(data).to_kornia() if isinstance(data, dict) else data.to_kornia()
        return Policy.from_json(data).to_torchvision() if isinstance(data, dict) else data.to_torchvision()


L0 = ("layers", 0)
E00 = ("layers", 0, "transforms", 0)
NAN, INF = math.nan, math.inf

# (id, path, value, error, what the message names)
BAD_FILES = [
    # missing keys
    ("missing-temperature", (*L0, "temperature"), DELETE, ValueError, "temperature"),
    ("missing-eval_mode", (*L0, "eval_mode"), DELETE, ValueError, "eval_mode"),
    ("missing-weight_logits", (*L0, "weight_logits"), DELETE, ValueError, "weight_logits"),
    ("missing-raw_magnitudes", (*L0, "raw_magnitudes"), DELETE, ValueError, "raw_magnitudes"),
    ("missing-range", (*E00, "range"), DELETE, ValueError, "range"),
    ("missing-weight", (*E00, "weight"), DELETE, ValueError, "weight"),
    ("missing-magnitude", (*E00, "magnitude"), DELETE, ValueError, "magnitude"),
    ("missing-transform", (*E00, "transform"), DELETE, ValueError, "transform"),
    ("empty-entry", E00, {}, ValueError, "transform"),
    ("entry-not-a-dict", E00, "Rotate", ValueError, "entry"),
    ("missing-transforms", (*L0, "transforms"), DELETE, ValueError, "transforms"),
    ("missing-layers", ("layers",), DELETE, ValueError, "layers"),
    ("layers-not-a-list", ("layers",), {"0": 1}, ValueError, "layers"),
    ("no-layers", ("layers",), [], ValueError, "layers"),
    ("layer-not-a-dict", L0, 7, ValueError, "layer 0"),
    ("version-bool", ("version",), True, ValueError, "version"),
    # state of the wrong type or length
    ("logits-scalar", (*L0, "weight_logits"), 0.5, TypeError, "weight_logits"),
    ("logits-one", (*L0, "weight_logits"), [0.5], ValueError, "weight_logits"),
    ("logits-too-many", (*L0, "weight_logits"), [0.0, 0.0, 0.0, 0.0], ValueError, "weight_logits"),
    ("logits-too-few", (*L0, "weight_logits"), [0.0, 0.0], ValueError, "weight_logits"),
    ("logits-string", (*L0, "weight_logits"), "0.5", TypeError, "weight_logits"),
    ("logits-strings", (*L0, "weight_logits"), ["a", "b", "c"], TypeError, "weight_logits"),
    ("logits-bool", (*L0, "weight_logits"), [True, 0.0, 0.0], TypeError, "weight_logits"),
    ("logits-nested", (*L0, "weight_logits"), [[0.1], [0.2], [0.3]], TypeError, "weight_logits"),
    ("logits-none", (*L0, "weight_logits"), None, TypeError, "weight_logits"),
    ("logits-nan", (*L0, "weight_logits"), [NAN, 0.0, 0.0], ValueError, "weight_logits"),
    ("logits-inf", (*L0, "weight_logits"), [INF, 0.0, 0.0], ValueError, "weight_logits"),
    ("logits-minus-inf", (*L0, "weight_logits"), [-INF, 0.0, 0.0], ValueError, "weight_logits"),
    ("logits-overflow", (*L0, "weight_logits"), [1e39, 0.0, 0.0], ValueError, "weight_logits"),
    ("mags-scalar", (*L0, "raw_magnitudes"), 0.5, TypeError, "raw_magnitudes"),
    ("mags-one", (*L0, "raw_magnitudes"), [0.5], ValueError, "raw_magnitudes"),
    ("mags-too-many", (*L0, "raw_magnitudes"), [0.5] * 4, ValueError, "raw_magnitudes"),
    ("mags-strings", (*L0, "raw_magnitudes"), ["0.5"] * 3, TypeError, "raw_magnitudes"),
    ("mags-nan", (*L0, "raw_magnitudes"), [NAN, 0.5, 0.5], ValueError, "raw_magnitudes"),
    ("mags-inf", (*L0, "raw_magnitudes"), [0.5, INF, 0.5], ValueError, "raw_magnitudes"),
    ("mags-overflow", (*L0, "raw_magnitudes"), [0.5, 0.5, -1e39], ValueError, "raw_magnitudes"),
    # settings
    ("temperature-nan", (*L0, "temperature"), NAN, ValueError, "temperature"),
    ("temperature-inf", (*L0, "temperature"), INF, ValueError, "temperature"),
    ("temperature-zero", (*L0, "temperature"), 0.0, ValueError, "temperature"),
    ("temperature-negative", (*L0, "temperature"), -1.0, ValueError, "temperature"),
    ("temperature-tiny", (*L0, "temperature"), 1e-300, ValueError, "temperature"),
    ("temperature-string", (*L0, "temperature"), "0.5", TypeError, "temperature"),
    ("temperature-bool", (*L0, "temperature"), True, TypeError, "temperature"),
    ("eval_mode-unknown", (*L0, "eval_mode"), "blend", ValueError, "eval_mode"),
    ("train_mode-unknown", (*L0, "train_mode"), "draw", ValueError, "train_mode"),
    ("backend-unknown", (*L0, "backend"), "gpu", ValueError, "backend"),
    ("backend-number", (*L0, "backend"), 3, TypeError, "backend"),
    # calibration
    ("calibration-ragged", (*L0, "calibration"), [[0.0, 0.5, 1.0], [0.0, 1.0], [0.0, 0.2, 0.3]], ValueError,
     "calibration"),
    ("calibration-flat", (*L0, "calibration"), [0.0, 0.5, 1.0], TypeError, "calibration"),
    ("calibration-one-point", (*L0, "calibration"), [[1.0], [1.0], [1.0]], ValueError, "calibration"),
    ("calibration-rows", (*L0, "calibration"), [[0.0, 1.0], [0.0, 1.0]], ValueError, "calibration"),
    ("calibration-nan", (*L0, "calibration"), [[0.0, NAN], [0.0, 1.0], [0.0, 1.0]], ValueError, "calibration"),
    ("calibration-inf", (*L0, "calibration"), [[0.0, INF], [0.0, 1.0], [0.0, 1.0]], ValueError, "calibration"),
    ("calibration-strings", (*L0, "calibration"), [["0", "1"]] * 3, TypeError, "calibration"),
    ("calibration-decreasing", (*L0, "calibration"), [[0.0, 1.0, 0.5]] * 3, ValueError, "calibration"),
    ("calibration-never-rises", (*L0, "calibration"), [[0.0, 0.0]] * 3, ValueError, "calibration"),
    ("calibration-negative", (*L0, "calibration"), [[-1.0, 1.0]] * 3, ValueError, "calibration"),
    ("calibration-string", (*L0, "calibration"), "yes", TypeError, "calibration"),
    # effects, size
    ("effect-nan", (*L0, "effect"), [NAN, 1.0, 1.0], ValueError, "effect"),
    ("effect-length", (*L0, "effect"), [1.0], ValueError, "effect"),
    ("effect-string", (*L0, "effect"), "1", TypeError, "effect"),
    ("effect-negative", (*L0, "effect"), [-1.0, 1.0, 1.0], ValueError, "effect"),
    ("last_size-string", (*L0, "last_size"), "12x12", TypeError, "last_size"),
    ("last_size-zero", (*L0, "last_size"), [0, 12], ValueError, "last_size"),
    ("last_size-float", (*L0, "last_size"), [12.5, 12], TypeError, "last_size"),
    ("range_size-string", (*L0, "range_size"), "12x12", TypeError, "range_size"),
    ("range_size-negative", (*L0, "range_size"), [-3, 12], ValueError, "range_size"),
    ("range_size-other", (*L0, "range_size"), [40, 40], ValueError, "range"),
    # transforms
    ("abstract-SignalTransform", (*E00, "transform"), "SignalTransform", ValueError, "SignalTransform"),
    ("base-Transform", (*E00, "transform"), "Transform", ValueError, "Transform"),
    ("private-class", (*E00, "transform"), "_ImageTransform", ValueError, "_ImageTransform"),
    ("transform-number", (*E00, "transform"), 3, ValueError, "transform"),
    ("args-unknown", (*E00, "args"), {"max_angle": 1.0, "bogus": 2}, TypeError, "bogus"),
    ("args-bad-value", (*E00, "args"), {"max_angle": -1.0}, ValueError, "max_angle"),
    ("args-not-a-dict", (*E00, "args"), [1.0], TypeError, "args"),
    ("extra-entry", (*L0, "transforms", 3), None, ValueError, "transforms"),  # filled below
    ("one-entry-less", (*L0, "transforms"), None, ValueError, "transforms"),  # filled below
    # entries that disagree with the state: one file, two meanings
    ("entry-weight-edited", (*E00, "weight"), 0.9, ValueError, "weight"),
    ("entry-magnitude-edited", (*E00, "magnitude"), 0.05, ValueError, "magnitude"),
    ("entry-transform-magnitude-edited", (*E00, "transform_magnitude"), 0.99, ValueError, "transform_magnitude"),
    ("entry-range-edited", (*E00, "range"), [-90.0, 90.0, "deg"], ValueError, "range"),
    ("entry-range-unit", (*E00, "range"), [-1.0, 1.0, "rad"], ValueError, "range"),
    ("entry-range-short", (*E00, "range"), [1.0, 2.0], ValueError, "range"),
    ("entry-weight-nan", (*E00, "weight"), NAN, ValueError, "weight"),
    ("entry-weight-string", (*E00, "weight"), "0.3", TypeError, "weight"),
    ("entry-magnitude-inf", (*E00, "magnitude"), INF, ValueError, "magnitude"),
    ("entry-renamed", (*E00, "transform"), "ShearX", TypeError, "ShearX"),
]  # fmt: skip


def _bad_file(case_id, path, value):
    data = good_file()
    if case_id == "extra-entry":
        entries = data["layers"][0]["transforms"]
        return mutated(data, (*L0, "transforms"), [*entries, copy.deepcopy(entries[0])])
    if case_id == "one-entry-less":
        return mutated(data, (*L0, "transforms"), data["layers"][0]["transforms"][:2])
    return mutated(data, path, value)


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize(("case_id", "path", "value", "error", "names"), BAD_FILES, ids=[c[0] for c in BAD_FILES])
def test_a_bad_policy_file_is_refused_by_every_reader(case_id, path, value, error, names, reader):
    data = _bad_file(case_id, path, value)
    with pytest.raises(error, match=names) as info:
        read(reader, data)
    assert not isinstance(info.value, KeyError)


@pytest.mark.parametrize("reader", READERS)
def test_a_good_file_is_read_by_every_reader(reader):
    assert read(reader, good_file()) is not None


@pytest.mark.parametrize("calibrated", [False, True])
def test_a_rebuilt_module_reports_the_policy_it_was_built_from(calibrated):
    module = good_module(calibrated)
    policy = module.policy()
    assert policy[0][1]["range"].unit == "px"  # TranslateX, in pixels of the images the layer saw
    again = augnet.AugmentationModule.from_policy(json.loads(json.dumps(policy.to_json())))
    assert again.policy().to_json() == policy.to_json()
    assert again.policy() == policy
    for a, b in zip(module.state_dict().values(), again.state_dict().values(), strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("calibrated", [False, True])
def test_a_low_precision_module_writes_and_exports_its_policy(dtype, calibrated):
    # A model cast with .bfloat16() / .half(): its entries are computed from its parameters in float32, as a
    # rebuilt (float32) module computes them from the saved state, so its own file is not refused as edited.
    module = good_module(calibrated)
    low = copy.deepcopy(module).to(dtype)
    policy = low.policy()
    again = augnet.AugmentationModule.from_policy(policy.to_json())
    assert again.policy().to_json() == policy.to_json()
    assert all(p.dtype == torch.float32 for p in again.parameters())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporters' approximate-export notices
        policy.to_kornia(), policy.to_torchvision()
    assert math.isclose(policy[0][0]["weight"], module.policy()[0][0]["weight"], rel_tol=1e-2)  # the cast's rounding


def test_json_text_given_where_a_path_belongs_is_refused_naming_the_fix(tmp_path):
    text = json.dumps(good_module().policy().to_json())
    for reader in (augnet.AugmentationModule.from_policy, Policy.load):  # they read a str as a path
        with pytest.raises(ValueError, match=r"str of JSON text where a file path belongs.*json\.loads\(text\)"):
            reader(text)
    with pytest.raises(ValueError, match="str of JSON text"):
        Policy.load(" [" + text + "]")  # a list of policies, as text
    (tmp_path / "p.json").write_text(text)
    assert augnet.AugmentationModule.from_policy(str(tmp_path / "p.json")).policy() is not None  # a path still reads


def test_a_policy_with_an_explicit_size_round_trips():
    module = good_module()
    policy = module.policy((32, 20))
    again = augnet.AugmentationModule.from_policy(policy.to_json())
    assert again.policy((32, 20)).to_json() == policy.to_json()
    assert again.policy().to_json() == module.policy().to_json()  # the size the layers saw (12 x 12) is kept


@pytest.mark.parametrize("what", ["weight", "magnitude"])
def test_consistent_edits_are_honoured_identically_and_inconsistent_ones_refused(what):
    data = good_file(calibrated=False)
    layer = data["layers"][1]  # HorizontalFlip, Contrast; temperature 1
    if what == "weight":
        new = [0.8, 0.2]
        edited_state = mutated(data, ("layers", 1, "weight_logits"), [math.log(w) for w in new])
        edited_entries = copy.deepcopy(data)
        for e, w in zip(edited_entries["layers"][1]["transforms"], new, strict=True):
            e["weight"] = w
    else:
        new = [0.3, 0.9]
        edited_state = mutated(data, ("layers", 1, "raw_magnitudes"), new)
        edited_entries = copy.deepcopy(data)
        for e, m in zip(edited_entries["layers"][1]["transforms"], new, strict=True):
            e["magnitude"] = e["transform_magnitude"] = m
    both = copy.deepcopy(edited_state)
    both["layers"][1]["transforms"] = copy.deepcopy(edited_entries["layers"][1]["transforms"])
    if what == "magnitude":  # the ranges follow the magnitudes
        both = _fix_ranges(both)
    for half in (edited_state, edited_entries):
        for reader in READERS:
            with pytest.raises(ValueError, match=what):
                read(reader, half)
    module = read("from_policy", both)
    state = module.layers[1].weights if what == "weight" else module.layers[1].transform_magnitudes
    assert state.tolist() == pytest.approx(new, abs=1e-6)
    probs, magnitudes = exported_meaning(both)["kornia"]
    assert probs[1] == pytest.approx(module.layers[1].weights.tolist(), abs=1e-6)
    expect = [m for layer in module.layers for m in layer.transform_magnitudes.tolist() if m > 0]
    assert magnitudes == pytest.approx(expect, abs=1e-6)
    assert layer["transforms"][0]["transform"] == "HorizontalFlip"


def _fix_ranges(data):
    data = copy.deepcopy(data)
    for layer in data["layers"]:
        entries = layer["transforms"]
        classes = augnet.policy.transform_classes()
        size = layer.get("range_size")
        for e in entries:
            t = classes[e["transform"]](**e["args"])
            e["range"] = list(t.natural_range(e["transform_magnitude"], None if size is None else tuple(size)))
    return data


def exported_meaning(data) -> dict:
    """Per library: (per layer, the probability of each entry), (the magnitudes the ops were built at, in order).

    An entry at magnitude 0 is exported as the identity without building an op.
    """
    out = {}
    for library in ("kornia", "torchvision"):
        seen = []

        def record(name, t, m, _seen=seen):
            _seen.append(m)
            return _common._Export([(1.0, torch.nn.Identity())])

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            layers = _common.build(data, library, record)
        per_layer = []
        for probs, _, sources in layers:
            p = [0.0] * (max(sources) + 1)
            for pr, s in zip(probs, sources, strict=True):
                p[s] += pr
            per_layer.append([v / sum(p) for v in p])
        out[library] = (per_layer, seen)
    return out


# ----------------------------------------------------------------------- export


@pytest.mark.parametrize("library", ["kornia", "torchvision"])
@pytest.mark.parametrize("weights", [[1e308, 1e308], [INF, 1.0], [1.7e308, 1e308, 1e308]])
def test_export_refuses_weights_whose_sum_overflows(library, weights):
    entries = [{"transform": "Rotate", "weight": w, "magnitude": 0.5} for w in weights]
    with pytest.raises(ValueError, match="weight"):
        read(library, Policy([entries]))


def test_a_rotation_over_a_full_turn_is_capped_for_kornia_with_a_warning():
    # kornia refuses degrees past ±360 (its own ValueError at export); torchvision takes them.
    rotate = {"transform": "Rotate", "args": {"max_angle": 10.0, "padding": "zeros"}}
    entries = [{**rotate, "weight": 1.0, "magnitude": 1.0}]
    with pytest.warns(UserWarning, match="a rotation \\(degrees\\) of 573 is capped at 360"):
        pipeline = Policy([entries]).to_kornia()
    assert pipeline(torch.rand(2, 3, 8, 8)).shape == (2, 3, 8, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Policy([entries]).to_torchvision()


@pytest.mark.parametrize("library", ["kornia", "torchvision"])
def test_export_takes_huge_but_finite_weights(library):
    entries = [{"transform": "Rotate", "weight": 1e300, "magnitude": 0.5},
               {"transform": "Invert", "weight": 1e300, "magnitude": 0.5}]  # fmt: skip
    pipeline = read(library, Policy([entries]))
    x = torch.rand(4, 3, 8, 8) if library == "kornia" else torch.rand(3, 8, 8)
    assert pipeline(x).shape == x.shape


@pytest.mark.parametrize("library", ["kornia", "torchvision"])
@pytest.mark.parametrize("weight", [True, "1", None])
def test_export_refuses_weights_that_are_not_numbers(library, weight):
    entries = [{"transform": "Rotate", "weight": weight, "magnitude": 0.5}]
    with pytest.raises((ValueError, TypeError), match="weight"):
        read(library, Policy([entries]))


# ----------------------------------------------------------------------- to_json


@pytest.mark.parametrize(
    ("entry", "names"),
    [
        ({"transform": "Rotate", "weight": 1.0, "magnitude": 0.5}, "range"),
        ({"transform": "Rotate", "weight": NAN, "magnitude": 0.5, "range": (0.0, 1.0, "")}, "weight"),
        ({"transform": "Rotate", "weight": 1.0, "magnitude": INF, "range": (0.0, 1.0, "")}, "magnitude"),
        ({"weight": 1.0, "magnitude": 0.5, "range": (0.0, 1.0, "")}, "transform"),
        ("Rotate", "entry"),
    ],
)
def test_to_json_refuses_what_it_cannot_write(entry, names):
    with pytest.raises(ValueError, match=names):
        Policy([[entry]]).to_json()


def test_to_json_refuses_a_module_whose_state_is_not_finite():
    module = good_module()
    with torch.no_grad():
        module.layers[0].raw_magnitudes[1] = NAN
    with pytest.raises(ValueError, match=r"(?i)nan"):
        module.policy().to_json()


def test_to_json_refuses_an_edited_policy_that_disagrees_with_its_state():
    policy = good_module().policy()
    policy[0][0]["weight"] = 0.99
    for write in (policy.to_json, policy.to_kornia, lambda: augnet.AugmentationModule.from_policy(policy)):
        with pytest.raises(ValueError, match="weight"):
            write()


def test_a_layer_without_settings_among_full_layers_is_refused():
    data = good_file()
    data["layers"][1] = {"transforms": data["layers"][1]["transforms"]}
    for reader in READERS:
        with pytest.raises(ValueError, match="layer 1"):
            read(reader, data)


def test_transform_classes_are_concrete():
    classes = augnet.policy.transform_classes()
    assert "SignalTransform" not in classes and "Transform" not in classes
    assert {"Rotate", "Invert", "GaussianNoise", "SensorsRotationZ"} <= set(classes)


# ----------------------------------------------------------------------- properties

IMAGE = [
    lambda draw: T.Rotate(max_angle=draw(st.floats(0.1, 3.0))),
    lambda draw: T.TranslateX(max_shift=draw(st.floats(0.1, 1.0))),
    lambda draw: T.TranslateY(),
    lambda draw: T.ShearX(padding=draw(st.sampled_from(["zeros", "border", "reflection"]))),
    lambda draw: T.Scale(),
    lambda draw: T.HorizontalFlip(),
    lambda draw: T.Brightness(max_shift=draw(st.floats(0.05, 0.5))),
    lambda draw: T.Contrast(),
    lambda draw: T.Hue(),
    lambda draw: T.Invert(),
    lambda draw: T.Solarize(),
]

FLOAT32 = st.floats(-20, 20, width=32)


@st.composite
def modules(draw):
    layers = []
    seen = draw(st.booleans())
    size = draw(st.integers(8, 14))
    x = smooth_images(b=4, size=size, seed=draw(st.integers(0, 100)))
    for _ in range(draw(st.integers(1, 2))):
        q = draw(st.integers(1, 4))
        transforms = [IMAGE[draw(st.integers(0, len(IMAGE) - 1))](draw) for _ in range(q)]
        layer = augnet.AugmentationLayer(
            transforms,
            temperature=draw(st.sampled_from([0.01, 0.5, 1.0, 3.0])),
            eval_mode=draw(st.sampled_from(["sample", "mix"])),
            train_mode=draw(st.sampled_from(["sample", "mix"])),
            backend=draw(st.sampled_from(["auto", "reference"])),
        )
        with torch.no_grad():
            layer.weight_logits.copy_(torch.tensor(draw(st.lists(FLOAT32, min_size=q, max_size=q))))
            layer.raw_magnitudes.copy_(torch.tensor(draw(st.lists(st.floats(-0.25, 1.25, width=32), min_size=q,
                                                                          max_size=q))))  # fmt: skip
            if draw(st.booleans()):
                layer.effect.copy_(torch.tensor(draw(st.lists(st.floats(0.125, 3, width=32), min_size=q, max_size=q))))
                layer.effect_measured.fill_(True)
        if draw(st.booleans()):
            with contextlib.suppress(ValueError):  # a transform that changes nothing cannot be calibrated
                layer.calibrate(x, points=draw(st.integers(2, 6)))
        layers.append(layer)
    module = augnet.AugmentationModule(layers)
    if seen:
        module(x, generator=gen(0))
    return module


@PROPERTY
@given(modules())
def test_any_module_round_trips_through_a_file_exactly(module):
    text = json.dumps(module.policy().to_json())
    again = augnet.AugmentationModule.from_policy(json.loads(text))
    assert json.dumps(again.policy().to_json()) == text
    for (ka, a), (kb, b) in zip(module.state_dict().items(), again.state_dict().items(), strict=True):
        assert ka == kb and torch.equal(a, b), ka
    for la, lb in zip(module.layers, again.layers, strict=True):
        assert (la.temperature, la.eval_mode, la.train_mode, la.backend) == (
            lb.temperature, lb.eval_mode, lb.train_mode, lb.backend)  # fmt: skip


def _leaves(data, path=()):
    if isinstance(data, dict):
        for k, v in data.items():
            yield from _leaves(v, (*path, k))
    elif isinstance(data, list) and data and not isinstance(data[0], (int, float)):
        for i, v in enumerate(data):
            yield from _leaves(v, (*path, i))
    yield path


REPLACEMENTS = st.one_of(
    st.sampled_from([DELETE, None, True, "x", [], {}, NAN, INF, -INF, 1e39, -1.0, 0.0, 1.0, 0.5, 2.0, [0.0], [[0.0]]]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.lists(st.floats(-3, 3), min_size=1, max_size=5),
)


def _outcome(reader, data):
    try:
        return read(reader, data), None
    except (ValueError, TypeError) as err:
        return None, err


@PROPERTY
@given(st.data())
def test_any_mutation_of_a_file_is_honoured_identically_or_refused_everywhere(data):
    good = good_file(calibrated=data.draw(st.booleans()))
    paths = [p for p in _leaves(good) if p]
    path = data.draw(st.sampled_from(paths))
    value = data.draw(REPLACEMENTS)
    try:
        bad = mutated(good, path, value)
    except (TypeError, IndexError, KeyError):
        return
    outcomes = {reader: _outcome(reader, bad) for reader in READERS}
    refused = {reader for reader, (_, err) in outcomes.items() if err is not None}
    assert refused in (set(), set(READERS)), (path, value, {r: outcomes[r][1] for r in refused})
    if refused:
        return
    module = outcomes["from_policy"][0]
    expect = [m for layer in module.layers for m in layer.transform_magnitudes.tolist() if m > 0]
    for library, (probs, magnitudes) in exported_meaning(bad).items():
        for layer, p in zip(module.layers, probs, strict=True):
            assert p == pytest.approx(layer.weights.tolist(), abs=1e-6), library
        assert magnitudes == pytest.approx(expect, abs=1e-6), library


# ----------------------------------------------------------------------------- files on disk


def test_save_and_load_round_trip_a_policy_file(tmp_path):
    module = good_module()
    policy = module.policy()
    path = policy.save(tmp_path / "run" / "policy.json")  # the folder is made
    assert path == tmp_path / "run" / "policy.json"
    assert json.loads(path.read_text()) == policy.to_json()
    assert Policy.load(path).to_json() == policy.to_json()
    assert Policy.load(str(path)).to_json() == policy.to_json()

    class Where:  # any os.PathLike
        def __fspath__(self):
            return str(tmp_path / "other" / "p.json")

    assert Policy.load(policy.save(Where())).to_json() == policy.to_json()
    again = augnet.AugmentationModule.from_policy(path)
    x = smooth_images()
    again.eval(), module.eval()
    assert torch.equal(again(x, copies=2, generator=gen(5)), module(x, copies=2, generator=gen(5)))


def test_save_refuses_what_no_reader_takes_and_writes_nothing(tmp_path):
    layer = augnet.ConditionedAugmentationLayer([T.Rotate(), T.TranslateX()], channels=3)
    layer(smooth_images())
    policy = augnet.AugmentationModule([layer]).policy()
    with pytest.raises(ValueError, match="conditioned"):
        policy.save(tmp_path / "p.json")
    assert not (tmp_path / "p.json").exists()
    with pytest.raises(TypeError, match="path must be a str or a path-like object, got int"):
        good_module().policy().save(3)
    with pytest.raises(TypeError, match="path must be a str or a path-like object, got dict"):
        Policy.load({"format": "augnet.policy"})
    (tmp_path / "other.json").write_text(json.dumps({"format": "something else"}))
    with pytest.raises(ValueError, match="not an augnet policy file"):
        Policy.load(tmp_path / "other.json")


def test_to_json_and_from_json_share_no_list_or_dict_with_the_caller():
    module = good_module()
    policy = module.policy((12, 12))
    written = policy.to_json()
    expected = copy.deepcopy(written)
    written["layers"][0]["weight_logits"][0] = 3.0  # edits of the dict to_json returned...
    written["layers"][0]["transforms"][0]["args"]["max_angle"] = 0.5
    written["layers"][1]["calibration"] = None
    assert policy.to_json() == expected  # ...leave the policy as it was, and writable
    assert policy[0][0]["args"] == {"max_angle": 1.0, "padding": "zeros"}
    assert policy.settings[0]["weight_logits"] == expected["layers"][0]["weight_logits"]
    entries = policy.layers_json()
    entries[0][0]["args"]["max_angle"] = 0.25
    assert policy.to_json() == expected
    data = copy.deepcopy(expected)
    read = augnet.Policy.from_json(data)
    data["layers"][0]["weight_logits"][0] = 4.0  # edits of the dict given to from_json...
    data["layers"][0]["transforms"][0]["args"]["max_angle"] = 0.1
    assert read.to_json() == expected  # ...leave the policy read from it as it was
    assert read.settings[0]["weight_logits"] == expected["layers"][0]["weight_logits"]
    assert read[0][0]["args"] == {"max_angle": 1.0, "padding": "zeros"}
    assert data != expected  # and from_json changed nothing of data
    untouched = copy.deepcopy(expected)
    augnet.Policy.from_json(untouched)
    assert untouched == expected


def test_from_policy_reads_any_path_like_object(tmp_path):
    import os

    module = good_module()
    path = module.policy().save(tmp_path / "policy.json")
    entry = next(e for e in os.scandir(tmp_path) if e.name == "policy.json")  # an os.DirEntry: os.PathLike

    class Custom:
        def __fspath__(self):
            return str(path)

    for where in (entry, Custom(), path, str(path)):
        rebuilt = augnet.AugmentationModule.from_policy(where)
        assert rebuilt.policy().to_json() == module.policy().to_json()
        assert augnet.Policy.load(where).to_json() == module.policy().to_json()
    with pytest.raises(TypeError, match="policy must be a Policy, its to_json"):
        augnet.AugmentationModule.from_policy(3)
