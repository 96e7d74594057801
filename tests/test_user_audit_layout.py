"""A user's audit of memory layouts, views and edge sizes through the transforms and the fused op ``tap_mix``.

Each test failed on the code before its mend: inputs that are not dense (a sparse batch, variable-length audio
as a nested tensor, an MKL-DNN tensor) met raw errors deep inside torch, or came out sparse from a few
transforms; a custom transform's ``taps()`` of the wrong shapes met an ``IndexError``, an ``AttributeError`` or
a broadcasting error; ``FrequencyShift.apply_transform`` returned a stride-2 view of a complex tensor.

(Dense layouts were audited too and found right, so they have no test here: channels-last, transposed, strided,
sliced and expanded inputs give the contiguous input's result and input gradient, bit for bit or to float32's
rounding, for every transform and every CPU backend of ``tap_mix``.)
"""

from __future__ import annotations

import pytest
import torch

from augnet.layers import AugmentationLayer
from augnet.ops import available_backends, tap_mix
from augnet.ops.taps import Taps, concat_taps
from augnet.transforms import Transform
from augnet.transforms import audio as A
from augnet.transforms import image as T
from augnet.transforms import signal as S

BACKENDS = [b for b in ("reference", "cpp", "auto") if b in {*available_backends(torch.zeros(1)), "auto"}]


def _tap_args(x):
    n = x.shape[0]
    return torch.arange(n)[:, None], torch.eye(2, 3).expand(n, 1, 2, 3), None, torch.ones(n, 1)


# ------------------------------------------------------------------ inputs that are not dense


@pytest.mark.parametrize("transform", [A.Gain(), S.TimeReverse(), A.SpeedChange()], ids=type)
def test_a_sparse_signal_batch_is_refused_by_its_layout(transform):
    # Gain and TimeReverse returned a sparse tensor (and failed with copies=2); SpeedChange a raw RuntimeError.
    x = torch.randn(3, 2, 50).to_sparse()
    with pytest.raises(TypeError, match=r"x must be a dense \(strided\) tensor, got layout torch.sparse_coo.*to_dense"):
        transform(x, 0.5)


@pytest.mark.parametrize("transform", [T.Rotate(), T.Brightness(), T.Sharpness()], ids=type)
def test_a_sparse_image_batch_is_refused_by_its_layout(transform):
    x = torch.rand(2, 3, 8, 8).to_sparse()
    with pytest.raises(TypeError, match=rf"{type(transform).__name__}: x must be a dense \(strided\) tensor"):
        transform(x, 0.5)


def test_variable_length_audio_as_a_nested_tensor_is_refused_with_the_way_out():
    # Was: RuntimeError "cannot call binary pointwise function mul.Tensor" (jagged), "NestedTensorImpl doesn't
    # support sizes. Please file an issue" (strided nested).
    x = torch.nested.nested_tensor([torch.randn(2, 100), torch.randn(2, 80)], layout=torch.jagged)
    for transform in (A.Gain(), A.LowPass(8000)):
        with pytest.raises(TypeError, match=r"x must be a dense tensor, got a nested tensor.*to_padded_tensor"):
            transform(x, 0.5)


def test_a_layer_refuses_a_sparse_batch_by_its_layout():
    layer = AugmentationLayer([T.Rotate(), T.Brightness()])
    with pytest.raises(TypeError, match=r"x must be a dense \(strided\) tensor"):
        layer(torch.rand(2, 3, 8, 8).to_sparse())


@pytest.mark.parametrize("backend", BACKENDS)
def test_tap_mix_refuses_a_sparse_x_on_every_backend(backend):
    # Was: NotImplementedError from grid_sampler_2d (reference), "unsupported memory format option Contiguous"
    # (cpp, auto).
    x = torch.rand(2, 3, 4, 4)
    with pytest.raises(TypeError, match=r"tap_mix: x must be a dense \(strided\) tensor, got layout torch.sparse_coo"):
        tap_mix(x.to_sparse(), *_tap_args(x), backend=backend)


def test_tap_mix_refuses_sparse_weights():
    x = torch.rand(2, 3, 4, 4)
    src, affine, color, weight = _tap_args(x)
    with pytest.raises(TypeError, match=r"tap_mix: weight must be a dense \(strided\) tensor"):
        tap_mix(x, src, affine, color, weight.to_sparse(), backend="reference")


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="torch built without MKL-DNN")
def test_an_mkldnn_tensor_is_refused_by_its_layout():
    # Was: NotImplementedError "Could not run 'augnet::tap_mix' with arguments from the 'MkldnnCPU' backend".
    x = torch.rand(2, 3, 4, 4)
    with pytest.raises(TypeError, match=r"x must be a dense \(strided\) tensor, got layout torch._mkldnn"):
        tap_mix(x.to_mkldnn(), *_tap_args(x))
    with pytest.raises(TypeError, match=r"Rotate: x must be a dense \(strided\) tensor"):
        T.Rotate()(x.to_mkldnn(), 0.5)


# ------------------------------------------------------------------ a custom transform's taps


class _Shift(Transform):
    """A user's horizontal shift through taps; ``mistake`` names what its ``taps()`` gets wrong."""

    def __init__(self, mistake: str = "") -> None:
        super().__init__()
        self.mistake = mistake

    def sample(self, x, magnitude, generator=None, copies=1):
        return {"dx": magnitude * torch.rand(x.shape[0] * copies, generator=generator)}

    def taps(self, params):
        dx = params["dx"]
        n = dx.shape[0]
        affine = torch.eye(2, 3).repeat(n, 1, 1, 1)
        affine[:, 0, 0, 2] = dx
        weight = torch.ones(n, 1)
        if self.mistake == "weight (N,)":
            return Taps(torch.ones(n), affine)
        if self.mistake == "weight list":
            return Taps([[1.0]] * n, affine)
        if self.mistake == "weight rows":
            return Taps(torch.ones(n + 1, 1), affine)
        if self.mistake == "src taps":
            return Taps(weight, affine, src=torch.zeros(n, 2, dtype=torch.long))
        if self.mistake == "color (N, Ch, Ch + 1)":
            return Taps(weight, None, torch.eye(3, 4).expand(n, 3, 4))
        return Taps(weight, affine)


MISTAKES = {
    # mistake: (error, what the message says); the error before the mend in the comment
    "weight (N,)": (ValueError, r"Taps.weight must have shape \(N, K\) with N = 2 rows, got \(2,\)"),  # IndexError
    "weight list": (TypeError, r"Taps.weight must be a tensor, got list"),  # AttributeError
    "weight rows": (ValueError, r"Taps.weight must have shape \(N, K\) with N = 2 rows, got \(3, 1\)"),  # RuntimeError
    "src taps": (ValueError, r"Taps.src must have shape \(2, 1\)"),  # ValueError naming affine, which was right
}


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
@pytest.mark.parametrize("how", ["transform", "layer"])
def test_a_custom_transform_with_misshapen_taps_is_told_which_field(mistake, how):
    error, message = MISTAKES[mistake]
    x = torch.rand(2, 3, 8, 8)
    run = (lambda: _Shift(mistake)(x, 0.5)) if how == "transform" else (lambda: AugmentationLayer([_Shift(mistake)])(x))
    with pytest.raises(error, match=message):
        run()


def test_a_custom_colour_map_without_its_tap_axis_is_refused_by_the_transform():
    # Was: RuntimeError from einsum ("the number of subscripts in the equation (4) does not match ...").
    with pytest.raises(ValueError, match=r"_Shift: Taps.color must have shape \(N, K, Ch, Ch \+ 1\).*got \(2, 3, 4\)"):
        _Shift("color (N, Ch, Ch + 1)")(torch.rand(2, 3, 8, 8), 0.5)


def test_concat_taps_refuses_a_one_dimensional_weight():
    with pytest.raises(ValueError, match=r"taps 1: Taps.weight must have shape \(N, K\)"):
        concat_taps([Taps(torch.ones(4, 1)), Taps(torch.ones(4))], torch.rand(2, 3, 4, 4), 4)


# ------------------------------------------------------------------ views in the output


def test_frequency_shift_apply_transform_returns_a_contiguous_tensor():
    # Was: the real part of a complex tensor, stride 2 in time: .view() raised, twice the memory held.
    t = S.FrequencyShift(100.0)
    x = torch.randn(3, 2, 40)
    params = t.draw_params(x, 0.7, generator=torch.Generator().manual_seed(0), copies=2)
    out = t.apply_transform(x, params)
    assert out.is_contiguous()
    assert out.untyped_storage().nbytes() == out.numel() * out.element_size()
    assert torch.equal(out.view(6, -1).view_as(out), t(x, 0.7, params=params, copies=2))
