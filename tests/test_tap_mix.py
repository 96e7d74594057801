"""The reference tap_mix: exact results on known taps, gradients, dispatch and errors."""

import math
import warnings

import pytest
import torch
import torch.nn.functional as F
from helpers import tap_mix_inputs

from augnet.ops import available_backends, resolve_backend, tap_mix, tap_mix_reference
from augnet.ops import dispatch as tap_mix_module

F64 = torch.float64


def eye(n, k, dtype=F64):
    return torch.eye(2, 3, dtype=dtype).expand(n, k, 2, 3).clone()


def random_args(**changes):
    """tap_mix inputs of this file: N = 7 rows of K = 3 taps from B = 3 two-channel 5x6 images (float64)."""
    return tap_mix_inputs(**(dict(b=3, ch=2, h=5, w=6, n=7, k=3, spread=0.3) | changes))


def test_identity_taps_copy_the_sources():
    x = torch.rand(2, 3, 7, 5, dtype=F64)
    src = torch.tensor([[0], [1], [1], [0]])
    out = tap_mix(x, src, eye(4, 1), None, torch.ones(4, 1, dtype=F64))
    torch.testing.assert_close(out, x[[0, 1, 1, 0]])


def test_flip_tap_is_torch_flip_and_weights_are_linear():
    x = torch.rand(2, 3, 6, 9, dtype=F64)
    aff = eye(2, 2)
    aff[:, 0, 0, 0] = -1.0  # horizontal flip in tap 0, identity in tap 1
    w = torch.tensor([[0.25, 0.75], [1.0, -2.0]], dtype=F64)
    out = tap_mix(x, torch.tensor([[0, 0], [1, 1]]), aff, None, w)
    torch.testing.assert_close(out, w[:, 0, None, None, None] * x.flip(-1) + w[:, 1, None, None, None] * x)


def test_colour_map_is_applied_per_pixel():
    x = torch.rand(1, 3, 4, 4, dtype=F64)
    m = torch.randn(3, 3, dtype=F64)
    bias = torch.randn(3, dtype=F64)
    col = torch.cat([m, bias[:, None]], 1).expand(1, 1, 3, 4)
    out = tap_mix(x, torch.zeros(1, 1, dtype=torch.long), eye(1, 1), col, torch.ones(1, 1, dtype=F64))
    expected = torch.einsum("ij,bjhw->bihw", m, x) + bias[None, :, None, None]
    torch.testing.assert_close(out, expected)


def test_matches_grid_sample_per_tap():
    x, src, affine, _, weight = random_args(color=False, dtype=torch.float32)
    out = tap_mix(x, src, affine, None, weight, padding="border")
    expected = 0
    for j in range(src.shape[1]):
        grid = F.affine_grid(affine[:, j], [src.shape[0], *x.shape[1:]], align_corners=False)
        img = F.grid_sample(x[src[:, j]], grid, padding_mode="border", align_corners=False)
        expected = expected + weight[:, j, None, None, None] * img
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("color", [True, False])
def test_gradcheck_float64(padding, color):
    args = random_args(color=color)
    args = tuple(a.requires_grad_() if a is not None and a.is_floating_point() else a for a in args)

    def f(x, affine, col, weight):
        return tap_mix(x, args[1], affine, col, weight, padding=padding)

    assert torch.autograd.gradcheck(f, (args[0], args[2], args[3], args[4]))


@pytest.mark.parametrize("layout", ["channels_last", "strided"])
def test_non_contiguous_and_channels_last_inputs_give_the_same_result(layout):
    x, src, affine, col, weight = random_args(b=4, h=8, w=8)
    out = tap_mix(x, src, affine, col, weight)
    other = random_args(b=4, h=8, w=8, layout=layout)[0]
    assert torch.equal(other, x) and not other.is_contiguous()
    torch.testing.assert_close(tap_mix(other, src, affine, col, weight), out)


def test_does_not_modify_its_inputs():
    args = random_args()
    before = [a.clone() for a in args]
    tap_mix(*args)
    assert all(torch.equal(a, b) for a, b in zip(args, before, strict=True))


def test_rotation_tap_rotates_pixels_by_a_quarter_turn():
    # A quarter turn of a square image maps pixels exactly onto pixels.
    x = torch.rand(1, 1, 6, 6, dtype=F64)
    a = math.pi / 2
    aff = torch.tensor([[[[math.cos(a), -math.sin(a), 0.0], [math.sin(a), math.cos(a), 0.0]]]], dtype=F64)
    out = tap_mix(x, torch.zeros(1, 1, dtype=torch.long), aff, None, torch.ones(1, 1, dtype=F64))
    torch.testing.assert_close(out, torch.rot90(x, 1, (2, 3)))


# ---------------------------------------------------------------- dispatch


def test_reference_backend_is_always_available():
    x = torch.rand(1, 1, 2, 2)
    assert "reference" in available_backends(x)
    assert resolve_backend("reference", x) == "reference"


def test_unknown_backend_is_a_value_error():
    with pytest.raises(ValueError, match="unknown tap_mix backend 'fastest'"):
        tap_mix(*random_args(), backend="fastest")


def test_environment_variable_overrides_auto(monkeypatch):
    monkeypatch.setenv("AUGNET_BACKEND", "nonsense")
    with pytest.raises(ValueError, match="unknown tap_mix backend 'nonsense'"):
        tap_mix(*random_args())
    monkeypatch.setenv("AUGNET_BACKEND", "reference")
    assert resolve_backend("auto", torch.rand(1)) == "reference"


def test_registered_backend_is_used_and_fallback_warns_once(monkeypatch):
    calls = []

    def fake(*args):
        calls.append(1)
        return tap_mix_reference(*args)

    monkeypatch.setattr(tap_mix_module, "_BACKENDS", dict(tap_mix_module._BACKENDS))
    monkeypatch.setattr(tap_mix_module, "_warned_fallback", set())
    monkeypatch.delenv("AUGNET_BACKEND", raising=False)
    # A fast CPU backend that cannot run here: auto falls back to the reference, warning once.
    tap_mix_module.register_backend("cpp", fake, lambda x: True, lambda: "the extension is not built; run X")
    with pytest.warns(RuntimeWarning, match="using the reference one.*the extension is not built; run X"):
        tap_mix(*random_args())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tap_mix(*random_args())
    assert calls == []
    # ... while asking for it by name says why it cannot run.
    with pytest.raises(RuntimeError, match="not usable here: the extension is not built; run X"):
        tap_mix(*random_args(), backend="cpp")
    # A usable fast backend is picked by auto.
    tap_mix_module.register_backend("cpp", fake, lambda x: x.device.type == "cpu")
    tap_mix(*random_args())
    assert calls == [1]


@pytest.mark.parametrize(
    "name, args, error",
    [("auto", {}, ValueError), ("reference", {}, ValueError), ("", {}, ValueError), (3, {}, TypeError),
     ("mine", {"fn": "tap_mix"}, TypeError), ("mine", {"supports": True}, TypeError),
     ("mine", {"unavailable_hint": "no"}, TypeError)],
)  # fmt: skip
def test_register_backend_refuses_reserved_names_and_non_callables(monkeypatch, name, args, error):
    # Registered as "auto", a backend could never be asked for by name (the dispatcher's own choice), and one
    # named "reference" replaced the ground truth every backend is checked against; nothing registers then.
    monkeypatch.setattr(tap_mix_module, "_BACKENDS", dict(tap_mix_module._BACKENDS))
    before = dict(tap_mix_module._BACKENDS)
    full = {"fn": tap_mix_reference, "supports": lambda x: True, **args}
    with pytest.raises(error, match=repr(name) if error is ValueError else "must be"):
        tap_mix_module.register_backend(name, **full)
    assert before == tap_mix_module._BACKENDS


# -------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "change, error, match",
    [
        (lambda a: {**a, "x": a["x"][0]}, ValueError, r"x must be a \(B, Ch, H, W\) tensor"),
        (lambda a: {**a, "x": (a["x"] * 255).to(torch.uint8)}, TypeError, "x must be a floating-point tensor"),
        (lambda a: {**a, "src": a["src"].int()}, TypeError, "src must be int64"),
        (lambda a: {**a, "src": a["src"] + 5}, ValueError, r"src indices must lie in \[0, 2\]"),
        (lambda a: {**a, "src": a["src"] - 5}, ValueError, r"src indices must lie in \[0, 2\]"),
        (lambda a: {**a, "affine": a["affine"][:, :, :1]}, ValueError, r"affine must have shape \(7, 3, 2, 3\)"),
        (lambda a: {**a, "weight": a["weight"][:1]}, ValueError, r"weight must have shape \(7, 3\)"),
        (lambda a: {**a, "color": a["color"][..., :2]}, ValueError, r"color must be None or of shape \(7, 3, 2, 3\)"),
        (lambda a: {**a, "affine": a["affine"].float()}, TypeError, "affine must have the dtype of x"),
        (lambda a: {**a, "padding": "wrap"}, ValueError, "padding must be one of"),
        (lambda a: {**a, "src": a["src"][:, :0]}, ValueError, "at least one tap"),
        (lambda a: {**a, "affine": a["affine"].to("meta")}, ValueError, "affine is on meta but x is on cpu"),
    ],
)
def test_bad_input(change, error, match):
    x, src, affine, col, weight = random_args()
    args = change({"x": x, "src": src, "affine": affine, "color": col, "weight": weight, "padding": "zeros"})
    with pytest.raises(error, match=match):
        tap_mix(**args)


def test_the_fallback_warning_points_at_the_users_line(monkeypatch):
    # A compiled backend registered but unusable: the one warning per device type names the line that ran the layer,
    # not a frame inside augnet or torch.nn.
    import augnet
    from augnet.transforms import image as T

    monkeypatch.setattr(tap_mix_module, "_warned_fallback", set())
    monkeypatch.setattr(tap_mix_module, "_why_not", lambda name, x: "not built here (a test)")
    assert "cpp" in tap_mix_module._BACKENDS  # registered whether or not it is built
    layer = augnet.AugmentationLayer([T.Rotate(), T.TranslateX()])
    with pytest.warns(RuntimeWarning, match="no compiled tap_mix backend") as record:
        layer(torch.rand(2, 1, 8, 8), copies=2)
    assert {w.filename for w in record if "no compiled tap_mix backend" in str(w.message)} == {__file__}
