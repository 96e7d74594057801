"""Units and meanings of the transforms' constructor ranges (docs/bad_input.md, rows naming this file).

Angles are radians: a range above a full turn (2 pi) is surely degrees, and warns once where it is written (not
where augnet rebuilds a saved policy, copies or loads a transform). Contrast and saturation factors stay >= 0 and
blend weights <= 1 at magnitude 1, and ranges float32 cannot hold are refused at construction.
"""

import copy
import json
import math
import pickle
import re
import warnings
from pathlib import Path

import pytest
import torch
from helpers import gen

import augnet
from augnet.transforms import audio as A
from augnet.transforms import image as T
from augnet.transforms import signal as S

ROOT = Path(__file__).resolve().parents[1]


def _positions(n=6):
    pos = torch.randn(n, 3, generator=gen(0), dtype=torch.float64)
    pos[:, 2] = pos[:, 2].abs()  # an upper-hemisphere cap
    return pos


#: Every angle-valued constructor argument: (class name, argument, a maker taking the value).
ANGLES = {
    "Rotate": ("max_angle", lambda v: T.Rotate(max_angle=v)),
    "Hue": ("max_angle", lambda v: T.Hue(max_angle=v)),
    "FTSurrogate": ("max_phase", lambda v: S.FTSurrogate(max_phase=v)),
    "SensorsRotationX": ("max_angle", lambda v: S.SensorsRotationX(_positions(), max_angle=v)),
    "SensorsRotationY": ("max_angle", lambda v: S.SensorsRotationY(_positions(), max_angle=v)),
    "SensorsRotationZ": ("max_angle", lambda v: S.SensorsRotationZ(_positions(), max_angle=v)),
}


def _radians_warnings(record) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, UserWarning) and "radians" in str(w.message)]


# ----------------------------------------------------------------------------------------- angles in radians


@pytest.mark.parametrize("name", ANGLES)
@pytest.mark.parametrize("value", [30, 7.0, 360.0, 12.345678901])
def test_an_angle_above_a_full_turn_warns_that_angles_are_radians(name, value):
    arg, make = ANGLES[name]
    with pytest.warns(UserWarning, match="radians") as record:
        t = make(value)
    assert getattr(t, arg) == value  # a warning, not a refusal: the value is kept as given
    (message,) = _radians_warnings(record)
    given = f"{value:g}" if value != 12.345678901 else "12.345678901"  # every digit of the value given
    assert message.startswith(f"{name}({arg}={given})")  # the class, the argument, the value
    degrees = re.search(r"is ([0-9.]+) degrees", message)
    assert degrees is not None and float(degrees.group(1)) == pytest.approx(math.degrees(value), rel=1e-5)
    assert f"{arg}=math.radians({given})" in message  # what to write instead
    suggested = re.search(r"\(= ([0-9.e+-]+) rad\)", message)
    assert float(suggested.group(1)) == pytest.approx(math.radians(value), rel=1e-5)
    (where,) = [w.filename for w in record if "radians" in str(w.message)]
    assert where == __file__  # it points at the line that made the transform, not into augnet


@pytest.mark.parametrize("name", ANGLES)
@pytest.mark.parametrize("value", [math.pi, 2 * math.pi, math.radians(30), 1e-3, 6.283185307179586])
def test_angles_up_to_a_full_turn_and_the_defaults_do_not_warn(name, value):
    arg, make = ANGLES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert getattr(make(value), arg) == value
        T.Rotate(), T.Hue(), S.FTSurrogate(), S.SensorsRotationZ(_positions())  # defaults: pi, pi, 2 pi, pi / 6


def test_the_library_s_own_transforms_and_kept_results_do_not_warn():
    from augnet import presets
    from augnet.experiments import sinusoids, versus_tasks
    from augnet.export import export_support

    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        presets.cifar10_transforms(full=True)
        for task in versus_tasks.TASKS.values():
            versus_tasks.candidates(task), versus_tasks.fixed_candidates(task)
        sinusoids.sinusoid_layer(sinusoids.SinusoidsConfig())
        export_support()
    # Every angle in the kept results' policies (rebuilt by the readers of those files) is within a full turn.
    kept = [p for d in ("docs/results", "benchmarks/results") for p in (ROOT / d).rglob("*.json")]
    values = [float(v) for p in kept for v in re.findall(r'"max_(?:angle|phase)": *([0-9.e+-]+)', p.read_text())]
    assert values and max(values) <= 2 * math.pi


def _module(max_angle: float) -> augnet.AugmentationModule:
    layer = augnet.AugmentationLayer([T.Rotate(max_angle=max_angle), T.Hue(max_angle=max_angle), T.Brightness()])
    return augnet.AugmentationModule([layer])


def test_copies_loads_and_rebuilt_policies_do_not_warn_again():
    with pytest.warns(UserWarning, match="radians"):
        module = _module(30.0)
    module(torch.rand(2, 3, 8, 8, generator=gen(0)))  # the layer sees an input size (the policy's pixels)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for again in (copy.deepcopy(module), pickle.loads(pickle.dumps(module))):
            assert again.layers[0].transforms[0].max_angle == 30.0
        _module(1.0).load_state_dict(module.state_dict())
        text = json.dumps(module.policy().to_json())
        rebuilt = augnet.AugmentationModule.from_policy(json.loads(text))  # the saved value, restored
        assert [t.max_angle for t in rebuilt.layers[0].transforms[:2]] == [30.0, 30.0]
        policy = augnet.Policy.from_json(json.loads(text))
        policy.to_torchvision(), policy.to_kornia()  # (these warn of their approximations, not of radians)
    assert _radians_warnings(record) == []


def test_an_angle_warning_is_shown_once_per_line_by_python_s_default_filter():
    with warnings.catch_warnings(record=True) as record:
        warnings.resetwarnings()
        warnings.simplefilter("default")
        for _ in range(3):
            T.Rotate(max_angle=45.0)
    assert len(_radians_warnings(record)) == 1


# ------------------------------------------------------------------------- factors and blends in their meaning


@pytest.mark.parametrize("cls", [T.Contrast, T.Saturation])
@pytest.mark.parametrize("value", [1.0000001, 1.5, 2.0, 1e39])
def test_a_colour_factor_range_that_would_go_negative_is_refused(cls, value):
    with pytest.raises(ValueError, match=rf"max_delta must lie in \(0, 1\], got {re.escape(repr(float(value)))}"):
        cls(max_delta=value)


@pytest.mark.parametrize("cls", [T.Contrast, T.Saturation])
def test_at_the_largest_colour_range_every_factor_is_non_negative_and_no_pixel_crosses_its_grey(cls):
    t = cls(max_delta=1.0)
    x = torch.rand(64, 3, 6, 6, generator=gen(1))
    params = t.draw_params(x, 1.0, generator=gen(2))
    assert (params["factor"] >= 0).all() and (params["factor"] <= 2).all()
    out = t(x, 1.0, params=params)
    # out = f x + (1 - f) g, g the image's mean grey (Contrast) or the pixel's luma (Saturation): with f >= 0 a
    # pixel moves towards or away from g, never across it (a negative factor inverted the image about g).
    luma = torch.einsum("c,bchw->bhw", torch.tensor(T.LUMA), x)[:, None]
    grey = luma.mean((2, 3), keepdim=True) if cls is T.Contrast else luma
    assert ((out - grey) * (x - grey) >= -1e-6).all()


@pytest.mark.parametrize("value", [1.01, 2.0, 1e39])
def test_a_sample_pairing_blend_above_one_is_refused(value):
    with pytest.raises(ValueError, match=rf"max_blend must lie in \(0, 1\], got {re.escape(repr(float(value)))}"):
        T.SamplePairing(max_blend=value)


def test_a_sample_pairing_blend_of_one_is_a_blend():
    t = T.SamplePairing(max_blend=1.0)
    x = torch.rand(8, 3, 5, 5, generator=gen(3))
    params = t.draw_params(x, 1.0, generator=gen(4))
    assert ((params["blend"] >= 0) & (params["blend"] <= 1)).all()
    out = t(x, 1.0, params=params)
    low = torch.minimum(x, x[params["partner"]])
    high = torch.maximum(x, x[params["partner"]])
    assert ((out >= low - 1e-6) & (out <= high + 1e-6)).all()  # between the sample and its partner


# ----------------------------------------------------------------------------- ranges float32 cannot hold

BEYOND_FLOAT32 = {
    "TranslateX.max_shift": lambda v: T.TranslateX(max_shift=v),
    "TranslateY.max_shift": lambda v: T.TranslateY(max_shift=v),
    "ShearX.max_shear": lambda v: T.ShearX(max_shear=v),
    "Rotate.max_angle": lambda v: T.Rotate(max_angle=v),
    "Brightness.max_shift": lambda v: T.Brightness(max_shift=v),
    "Hue.max_angle": lambda v: T.Hue(max_angle=v),
    "TimeMask.max_length": lambda v: S.TimeMask(max_length=v),
    "TimeMask.edge": lambda v: S.TimeMask(edge=v),
    "GaussianNoise.max_std": lambda v: S.GaussianNoise(max_std=v),
    "FTSurrogate.max_phase": lambda v: S.FTSurrogate(max_phase=v),
    "FrequencyShift.sfreq": lambda v: S.FrequencyShift(sfreq=v),
    "BandStop.max_width": lambda v: S.BandStop(100.0, max_width=v),
    "BandStop.edge": lambda v: S.BandStop(100.0, edge=v),
    "LowPass.q": lambda v: A.LowPass(16000, q=v),
    "HighPass.q": lambda v: A.HighPass(16000, q=v),
    "BandReject.min_q": lambda v: A.BandReject(16000, min_q=v),
    "TimeMaskSpec.edge": lambda v: A.TimeMaskSpec(edge=v),
}


@pytest.mark.parametrize("case", BEYOND_FLOAT32)
@pytest.mark.parametrize("value", [1e39, 1e-39, 1e-300])
def test_a_range_float32_cannot_hold_is_refused_at_construction(case, value):
    # Drawn in float32, such ranges gave NaN or infinite outputs or gradients (1e39), or draws of 0 (1e-39).
    name = case.split(".")[1]
    with pytest.raises(ValueError, match=rf"^{name} \({re.escape(f'{value:g}')}\) is beyond float32's range"):
        BEYOND_FLOAT32[case](value)  # refused before any warning of an angle above a full turn


def test_ranges_float32_can_hold_are_taken_and_give_finite_outputs():
    x, s = torch.rand(2, 3, 8, 8, generator=gen(0)), torch.randn(2, 4, 64, generator=gen(0))
    made = [T.TranslateX(max_shift=1e-30), T.Brightness(max_shift=1e30), S.TimeMask(max_length=1e30),
            S.GaussianNoise(max_std=1e-30), S.BandStop(100.0, max_width=1e-30)]  # fmt: skip
    for t in made:
        out = t(x if t.input_ndim == 4 else s, 0.5, generator=gen(1))
        assert torch.isfinite(out).all(), t
