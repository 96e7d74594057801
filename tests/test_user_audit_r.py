"""A user's audit of ``augnet.ops.tap_mix`` and of the exporters (``augnet.export``), round r.

What is checked:
- tap_mix: keyword calls, float64 / float32 / bfloat16 / float16 on the CPU, non-contiguous inputs and taps, a
  batch of one and of none, gradients against ``torch.autograd.gradcheck`` in float64 (reference and cpp), bad
  backend names, and the backends agreeing; a backend named by ``AUGNET_BACKEND`` that is unknown or unusable says
  that it came from there (it read as if the caller had passed it);
- the exporters: an entries-only policy whose written ``range`` is not the one its ``args`` give at its magnitude
  was exported silently with the args' range (now a ValueError naming the entry, both ranges and what to change;
  a policy written by augnet, in pixels or not, calibrated or not, still exports as before, draw for draw);
- a layer exported with a colour op that takes images of 1 or 3 channels (torchvision's colour ops; kornia's hue
  and saturation) given images of other channel counts raised the library's own error, only when a sample drew it
  (at random, mid-epoch): now every call raises a ValueError naming the transform.
"""

import copy
import pickle
import warnings

import pytest
import torch
from helpers import gen
from torchvision import tv_tensors

import augnet
from augnet.export import to_kornia, to_torchvision
from augnet.ops import available_backends, tap_mix
from augnet.policy import Policy
from augnet.transforms import image as T

F64 = torch.float64
EXPORTERS = {"kornia": to_kornia, "torchvision": to_torchvision}
CPP = "cpp" in available_backends()


def quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return fn(*args, **kwargs)


def taps(b=2, ch=3, h=5, w=6, n=4, k=2, dtype=F64, seed=0):
    g = gen(seed)
    x = torch.rand(b, ch, h, w, generator=g, dtype=dtype)
    src = torch.randint(0, b, (n, k), generator=g)
    affine = torch.eye(2, 3, dtype=dtype) + 0.2 * torch.randn(n, k, 2, 3, generator=g, dtype=dtype)
    color = torch.eye(ch, ch + 1, dtype=dtype) + 0.1 * torch.randn(n, k, ch, ch + 1, generator=g, dtype=dtype)
    weight = torch.rand(n, k, generator=g, dtype=dtype)
    return x, src, affine, color, weight


# ------------------------------------------------------------------------------------------------- tap_mix


@pytest.mark.skipif(not CPP, reason="the C++ extension could not be built here")
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_tap_mix_keywords_dtypes_and_backends_agree(padding):
    for dtype, atol in ((F64, 1e-12), (torch.float32, 2e-6), (torch.bfloat16, 8e-3), (torch.float16, 2e-3)):
        x, src, affine, color, weight = taps(dtype=dtype)
        ref = tap_mix(x=x, src=src, affine=affine, color=color, weight=weight, padding=padding, backend="reference")
        got = tap_mix(x, src, affine, color, weight, padding=padding)  # auto: cpp (in float32 for 16-bit inputs)
        assert ref.dtype == got.dtype == dtype and ref.shape == (4, 3, 5, 6)
        torch.testing.assert_close(got.double(), ref.double(), atol=atol, rtol=0)


@pytest.mark.parametrize(
    "backend", ["reference", pytest.param("cpp", marks=pytest.mark.skipif(not CPP, reason="no cpp"))]
)
def test_tap_mix_reads_non_contiguous_inputs_and_taps_as_their_copies(backend):
    x, src, affine, color, weight = taps(k=3)
    want = tap_mix(x, src, affine, color, weight, backend=backend)
    strided = (
        x.to(memory_format=torch.channels_last),
        src.t().contiguous().t(),
        affine.transpose(0, 1).contiguous().transpose(0, 1),
        color.permute(1, 0, 2, 3).contiguous().permute(1, 0, 2, 3),
        weight.t().contiguous().t(),
    )
    assert torch.equal(tap_mix(*strided, backend=backend), want)
    one = tap_mix(x[:1], src[:1, :1] * 0, affine[:1, :1], color[:1, :1], weight[:1, :1], backend=backend)
    assert one.shape == (1, 3, 5, 6)


@pytest.mark.parametrize(
    "backend", ["reference", pytest.param("cpp", marks=pytest.mark.skipif(not CPP, reason="no cpp"))]
)
def test_tap_mix_gradients_pass_gradcheck_in_float64(backend):
    x, src, affine, color, weight = (
        t.requires_grad_() if t.is_floating_point() else t for t in taps(b=2, ch=2, h=4, w=5, n=3)
    )
    for padding in ("zeros", "reflection"):
        assert torch.autograd.gradcheck(
            lambda x, a, c, w, padding=padding: tap_mix(x, src, a, c, w, padding=padding, backend=backend),
            (x, affine, color, weight),
        )


def test_tap_mix_of_no_rows_stays_in_the_graph():
    x = torch.rand(2, 3, 4, 4, dtype=F64, requires_grad=True)
    out = tap_mix(x, torch.zeros(0, 1, dtype=torch.long), torch.zeros(0, 1, 2, 3, dtype=F64), None,
                  torch.zeros(0, 1, dtype=F64))  # fmt: skip
    out.sum().backward()
    assert out.shape == (0, 3, 4, 4) and torch.equal(x.grad, torch.zeros_like(x))


@pytest.mark.parametrize("backend, error", [("CPP", ValueError), (" cpp", ValueError), (None, TypeError),
                                            (["cpp"], TypeError), ("cuda" if not torch.cuda.is_available() else
                                                                   "bogus", (RuntimeError, ValueError))])  # fmt: skip
def test_tap_mix_refuses_bad_backends_naming_them(backend, error):
    with pytest.raises(error, match="backend"):
        tap_mix(*taps(), backend=backend)


@pytest.mark.parametrize("name, error", [("CPP", ValueError), ("nonsense", ValueError)]
                         + ([("cuda", RuntimeError)] if not torch.cuda.is_available() else []))  # fmt: skip
def test_a_backend_from_the_environment_says_it_came_from_there(monkeypatch, name, error):
    monkeypatch.setenv("AUGNET_BACKEND", name)
    with pytest.raises(error, match=rf"{name}.*from the environment variable AUGNET_BACKEND"):
        tap_mix(*taps())
    with pytest.raises(error) as caught:  # named by the caller: no word of the environment
        tap_mix(*taps(), backend=name)
    assert "environment" not in str(caught.value)


# ------------------------------------------------------------------------------ exporters: written ranges


def entry(name, magnitude=1.0, **more):
    return {"transform": name, "weight": 1.0, "magnitude": magnitude, "args": {}, **more}


@pytest.mark.parametrize("library", sorted(EXPORTERS))
@pytest.mark.parametrize(
    "written",
    [
        entry("Rotate", range=[-10.0, 10.0, "deg"]),  # exported ±180 deg (the default max_angle at magnitude 1)
        entry("Brightness", 0.5, range=[-0.4, 0.4, "shift"]),
        {**entry("Scale", 0.5, range=[0.5, 2.0, "x zoom"]), "transform_magnitude": 0.25},
        {"transform": "Contrast", "weight": 1.0, "magnitude": 0.3, "range": [0.1, 1.9, "factor"]},  # no args
    ],
    ids=lambda e: e["transform"],
)
def test_an_entries_only_range_the_args_do_not_give_is_refused(library, written):
    with pytest.raises(ValueError, match=rf"policy layer 0, entry 0: range .* of {written['transform']} disagrees"):
        quiet(EXPORTERS[library], Policy([[written]]))


@pytest.mark.parametrize("library", sorted(EXPORTERS))
def test_a_malformed_written_range_is_refused(library):
    with pytest.raises(ValueError, match=r"range of Rotate must be \[low, high, unit\]"):
        EXPORTERS[library](Policy([[entry("Rotate", range="±10 deg")]]))


def _draws(pipeline, library, seed=0):
    torch.manual_seed(seed)
    x = torch.rand(6, 3, 16, 16, generator=gen(1))
    if library == "kornia":
        return pipeline(x)
    return torch.stack([pipeline(image) for image in x])


@pytest.mark.parametrize("library", sorted(EXPORTERS))
def test_policies_augnet_writes_still_export_draw_for_draw(library):
    layer = augnet.AugmentationLayer([T.Rotate(max_angle=0.7), T.TranslateX(), T.Brightness(), T.Hue(), T.Scale()],
                                     init_magnitude=[0.3, 0.5, 0.2, 0.4, 0.6])  # fmt: skip
    module = augnet.AugmentationModule([layer]).eval()
    module(torch.rand(2, 3, 16, 16))  # last_size: TranslateX's range in pixels
    for policy in (module.policy(), module.policy((32, 32))):
        entries_only = Policy(list(policy))
        for p in (policy, entries_only, Policy.from_json(entries_only.to_json())):
            a, b = quiet(EXPORTERS[library], p), quiet(EXPORTERS[library], policy)
            assert torch.equal(_draws(a, library), _draws(b, library))
    written = Policy([[entry("Rotate", 0.5, range=[-90.0, 90.0, "deg"])]])  # the default's range at 0.5: agrees
    assert torch.equal(_draws(EXPORTERS[library](written), library),
                       _draws(EXPORTERS[library](Policy([[entry("Rotate", 0.5)]])), library))  # fmt: skip


# ------------------------------------------------------------------------------ exporters: channel counts


def _layer_policy(*names):
    return Policy([[{**entry(name, 1.0), "weight": w} for name, w in zip(names, (1e-6, 1.0), strict=False)]])


@pytest.mark.parametrize("colour", ["Brightness", "Contrast", "Saturation", "Hue", "Gray", "AutoContrast",
                                    "Sharpness"])  # fmt: skip
@pytest.mark.parametrize("channels", [2, 4])
def test_torchvision_colour_ops_refuse_other_channel_counts_on_every_call(colour, channels):
    # the colour op is all but never drawn: the error must not wait for it (it came at random, mid-epoch)
    pipeline = quiet(to_torchvision, _layer_policy(colour, "Rotate"))
    for image in (torch.rand(channels, 8, 8), tv_tensors.Image(torch.rand(channels, 8, 8)),
                  (torch.rand(channels, 8, 8), 3)):  # fmt: skip
        with pytest.raises(ValueError, match=rf"layer 0 .*holds {colour}.* 1 or 3 channels; got an image of "
                                             rf"{channels} channels"):  # fmt: skip
            pipeline(image)


@pytest.mark.parametrize("colour, channels", [("Hue", 1), ("Hue", 4), ("Saturation", 2), ("Saturation", 4)])
def test_kornia_hue_and_saturation_refuse_other_channel_counts_on_every_batch(colour, channels):
    pipeline = quiet(to_kornia, _layer_policy(colour, "Rotate"))
    with pytest.raises(ValueError, match=rf"holds {colour}, whose kornia op takes images of .*got {channels} ch"):
        pipeline(torch.rand(2, channels, 8, 8))
    with pytest.raises(ValueError, match=colour):  # pickled, deep-copied: the same
        copy.deepcopy(pickle.loads(pickle.dumps(pipeline)))(torch.rand(2, channels, 8, 8))


@pytest.mark.parametrize("library", sorted(EXPORTERS))
def test_channel_counts_the_ops_take_pass_unchanged(library):
    for names, channels in ((("Brightness", "Rotate"), 1), (("Hue", "Rotate"), 3), (("Rotate", "Invert"), 4),
                            (("Brightness", "Rotate"), 4 if library == "kornia" else 3)):  # fmt: skip
        pipeline = quiet(EXPORTERS[library], _layer_policy(*names))
        x = torch.rand(channels, 8, 8)
        torch.manual_seed(0)
        out = pipeline(x)
        assert out.shape == x.shape
