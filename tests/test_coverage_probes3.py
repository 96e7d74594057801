"""Branches that the other tests leave unrun in the probes' features, measures, similarity pairs, statistics, Lie
derivative and equivariance maps (augnet/probes/features.py, measures.py, similarity_pairs.py, stats.py, lie.py,
maps.py), the plots of augnet/viz.py and the command line (augnet/cli.py): each test reaches its branch as a user's
call does and checks what it should do (an exact value or property, an error naming its argument)."""

import math
import os
import sys
import warnings
from collections import OrderedDict

import numpy as np
import pytest
import torch
from helpers import gen, probe_model_file
from torch import nn

import augnet
from augnet._checks import NotANumberError
from augnet.cli import _quiet_interrupt, main, run
from augnet.probes import fit_equivariance_map, lie_derivative
from augnet.probes import lie as lie_module
from augnet.probes.features import (
    check_layers,
    describe,
    features,
    layer_calls,
    reduce_features,
    stream_features,
)
from augnet.probes.lie import transform_derivative
from augnet.probes.measures import act, channel_mean, goodfellow_invariance, same_equivariance
from augnet.probes.similarity_pairs import similarity_change, similarity_search
from augnet.probes.stats import _betainc, f_sf, p_adjust
from augnet.transforms import image as T


def _named_net():
    torch.manual_seed(0)
    return nn.Sequential(OrderedDict(fc=nn.Linear(2, 3), act=nn.ReLU(), out=nn.Linear(3, 2))).eval()


class _WithSpare(nn.Module):
    """A model with a submodule its forward pass never calls."""

    def __init__(self):
        super().__init__()
        self.fc, self.spare = nn.Linear(2, 2), nn.Linear(2, 2)

    def forward(self, x):
        return self.fc(x)


# --------------------------------------------------------------------------- stats


def test_f_sf_and_p_adjust_refuse_what_is_not_a_tensor_and_an_unknown_correction():
    with pytest.raises(TypeError, match=r"^f must be a tensor, got float$"):
        f_sf(0.5, 2, 2)
    with pytest.raises(TypeError, match=r"^p must be a tensor of p-values, got list$"):
        p_adjust([0.01, 0.5])
    with pytest.raises(ValueError, match=r"^correction must be one of \('bonferroni', 'bh', 'none'\), got 'holm'$"):
        p_adjust(torch.tensor([0.01, 0.5]), "holm")


def test_f_sf_refuses_an_infinite_degree_of_freedom():
    """Mended: dfn=inf gave P(F > 1) = 0 and dfd=inf gave NaN, where F's limits (chi-squared over its degrees) give
    0.608 and 0.392 for the other degree 3."""
    f = torch.tensor([1.0])
    with pytest.raises(ValueError, match=r"^dfn must be a positive finite number, got inf$"):
        f_sf(f, math.inf, 3)
    with pytest.raises(ValueError, match=r"^dfd must be a positive finite number, got inf$"):
        f_sf(f, 3, float("inf"))
    # NumPy numbers are degrees of freedom too: P(F(2, d) > f) = (d / (d + 2 f)) ** (d / 2) exactly.
    got = f_sf(torch.tensor([0.5, 3.0]), np.float64(2), np.int64(6))
    torch.testing.assert_close(got, torch.tensor([(6 / 7) ** 3, (6 / 12) ** 3], dtype=torch.float64))


def test_p_adjust_names_the_p_values_outside_zero_one():
    """Mended: the error said 'got shape (3,)', a shape that is right, and not the values that are wrong."""
    outside = r"^p must hold p-values in \[0, 1\] \(or NaN\), got 2 outside: \[1\.5, -0\.25\]$"
    with pytest.raises(ValueError, match=outside):
        p_adjust(torch.tensor([0.5, 1.5, float("nan"), -0.25]))
    with pytest.raises(ValueError, match=r"^p must be a 1-D tensor of p-values in \[0, 1\], got shape \(1, 2\)$"):
        p_adjust(torch.tensor([[0.5, 0.2]]))


def test_betainc_stops_at_its_cap_and_a_terminating_fraction_is_exact_there():
    """The fraction's cap: with b = 1 the continued fraction ends after its second term (I_x(a, 1) = x^a), so two
    steps, before any convergence check, already give the exact value."""
    a = torch.tensor([3.0, 0.5, 7.5], dtype=torch.float64)
    x = torch.tensor([0.2, 0.1, 0.35], dtype=torch.float64)
    got = _betainc(a, torch.tensor(1.0, dtype=torch.float64), x, iterations=2)
    torch.testing.assert_close(got, x**a, rtol=1e-13, atol=0)


# --------------------------------------------------------------------------- features


def test_reduce_features_and_describe_on_a_plain_model():
    with pytest.raises(ValueError, match=r"^reduce must be one of \('none', 'mean', 'tokens', 'flatten'\), got 'max'$"):
        reduce_features(torch.rand(2, 3), "max")
    assert describe(nn.Linear(2, 3), "output") == "output: the output of Linear"


def test_layer_calls_names_a_bad_model_an_array_and_an_empty_batch():
    """Mended: an array was refused as 'a non-empty batch of inputs, got (3, 2)', the shape of one."""
    net, x = _named_net(), torch.rand(3, 2, generator=gen(0))
    with pytest.raises(TypeError, match=r"^model must be an nn\.Module, got function$"):
        layer_calls(lambda a: a, x)
    with pytest.raises(TypeError, match=r"^x must be a tensor of inputs, got ndarray$"):
        layer_calls(net, x.numpy())
    with pytest.raises(ValueError, match=r"^x must be a non-empty batch of inputs, got shape \(0, 2\)$"):
        layer_calls(net, x[:0])
    with pytest.raises(ValueError, match=r"^unknown module\(s\) \['fc2'\]; the model's modules are \['fc', 'act', "):
        layer_calls(net, x, ["fc2"])


def test_layer_calls_and_check_layers_take_one_name_as_a_string():
    """Mended: layers="fc" was read as the modules 'f' and 'c' (unknown), where features() takes one name."""
    net, x = _named_net(), torch.rand(3, 2, generator=gen(1))
    assert layer_calls(net, x, "fc") == {"fc": 1}
    assert check_layers(net, x, "out") is None
    relu = nn.ReLU()
    twice = nn.Sequential(OrderedDict(a=nn.Linear(2, 2), r=relu, b=nn.Linear(2, 2), s=relu))
    assert layer_calls(twice, x, "r") == {"r": 2}
    with pytest.raises(ValueError, match=r"module 'r' is called 2 times"):
        check_layers(twice, x, "r")


def test_a_module_the_forward_pass_never_calls_is_no_layer():
    model, x = _WithSpare(), torch.rand(3, 2, generator=gen(2))
    with pytest.raises(ValueError, match=r"^layer 'spare' is not called by the model's forward pass$"):
        features(model, x, "spare")
    with pytest.raises(ValueError, match=r"^layer 'spare' is not called by the model's forward pass$"):
        check_layers(model, x, ["spare"])


def test_features_refuse_no_layer_a_model_that_is_no_module_and_an_array():
    net, x = _named_net(), torch.rand(3, 2, generator=gen(3))
    with pytest.raises(ValueError, match=r"^layers must name at least one module$"):
        features(net, x, [])
    with pytest.raises(TypeError, match=r"^model must be an nn\.Module, got function$"):
        features(lambda a: a, x, "output")
    with pytest.raises(TypeError, match=r"^x must be a tensor, got ndarray$"):
        stream_features(net, x.numpy(), "fc", lambda *a: None)


class _Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lstm, self.head = nn.LSTM(3, 4, batch_first=True), nn.Linear(4, 2)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


def test_a_layer_returning_a_tuple_is_read_at_its_first_tensor():
    """nn.LSTM returns (output, (h, c)): its output sequence is what is read."""
    model, x = _Recurrent().eval(), torch.rand(5, 6, 3, generator=gen(4))
    got = features(model, x, ["lstm", "output"], batch_size=2)
    with torch.no_grad():
        torch.testing.assert_close(got["lstm"], model.lstm(x)[0], rtol=0, atol=0)
        torch.testing.assert_close(got["output"], model(x), rtol=0, atol=0)


def test_an_augnet_inside_a_model_is_one_layer_with_a_row_per_input():
    """The AugNet's own output has one row per input: not averaged as its trunk's B * C rows are."""
    torch.manual_seed(0)
    trunk = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(3, 4))
    inner = augnet.AugNet(trunk, augnet.AugmentationLayer([T.Rotate()], init_magnitude=0.0), eval_copies=3)
    model = nn.Sequential(inner, nn.Identity()).eval()
    x = torch.rand(5, 3, 8, 8, generator=gen(5))
    got = features(model, x, ["0", "output", "0.trunk.2"])
    assert got["0"].shape == (5, 4)
    torch.testing.assert_close(got["0"], got["output"], rtol=0, atol=0)
    # The trunk's layer: its 3 copies of 5 rows averaged; at magnitude 0 every copy is the image itself.
    torch.testing.assert_close(got["0.trunk.2"], trunk(x).detach(), rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------- measures


def test_measures_name_maps_that_are_not_tensors_or_not_maps():
    clean = torch.rand(4, 2, generator=gen(6))
    with pytest.raises(ValueError, match=r"^clean must be activations of shape \(N, U\), got \(1, 4, 2\)$"):
        goodfellow_invariance(clean[None], clean[None])
    with pytest.raises(TypeError, match=r"^z must be a tensor of feature maps \(N, C, H, W\), got ndarray$"):
        act(np.zeros((1, 1, 2, 2)), "hflip")
    maps = r"^z must be floating feature maps \(N, C, H, W\), got "
    with pytest.raises(ValueError, match=maps + r"torch\.int64 \(1, 1, 2, 2\)$"):
        act(torch.zeros(1, 1, 2, 2, dtype=torch.long), "hflip")
    with pytest.raises(ValueError, match=maps + r"torch\.float32 \(2, 2\)$"):
        act(torch.zeros(2, 2), "hflip")


@pytest.mark.parametrize("margin", [-1, 1.5, True, "1"])
def test_same_equivariance_refuses_a_margin_that_is_no_count(margin):
    z = torch.rand(2, 1, 4, 4, generator=gen(7))
    with pytest.raises(ValueError, match=rf"^margin must be a non-negative integer, got {margin!r}$"):
        same_equivariance(z, [z], [("translate", 0, 1)], margin=margin)


def test_same_equivariance_names_the_maps_that_are_not_finite():
    """Mended: 'the feature maps must be finite' said neither which (z or which moved map) nor how many."""
    z = torch.rand(2, 1, 4, 4, generator=gen(8))
    bad = z.clone()
    bad[0, 0, 1, :2] = torch.tensor([float("nan"), float("inf")])
    with pytest.raises(ValueError, match=r"^z holds 2 non-finite values \(NaN or inf\)"):
        same_equivariance(bad, [z], ["hflip"])
    with pytest.raises(ValueError, match=r"^moved\[1\] holds 2 non-finite values \(NaN or inf\)"):
        same_equivariance(z, [z.flip(-1), bad], ["hflip", "identity"])
    # np.int64 is a margin: the same as 1.
    ok = same_equivariance(z, [z], [("translate", 0, 0)], margin=np.int64(1))
    assert ok["error"].tolist() == [0.0]


def test_channel_mean_refuses_values_that_are_no_tensor_and_a_bad_channel_count():
    with pytest.raises(TypeError, match=r"^values must be a tensor, got list$"):
        channel_mean([1.0, 2.0], 1)
    for channels in (0, True, 2.0):
        with pytest.raises(ValueError, match=rf"^channels must be a positive integer, got {channels!r}$"):
            channel_mean(torch.rand(4), channels)
    assert channel_mean(torch.tensor([1.0, 3.0, 5.0, 9.0]), np.int64(2)).tolist() == [2.0, 7.0]


# --------------------------------------------------------------------------- similarity pairs


def _features_and_labels():
    return torch.randn(6, 4, generator=gen(9)), torch.tensor([0, 0, 0, 1, 1, 1])


def test_similarity_change_names_the_features_that_are_not_real_tensors():
    """Mended: 'z and z_t must be tensors' named neither which one nor what it was."""
    z, y = _features_and_labels()
    with pytest.raises(TypeError, match=r"^z must be a tensor of features, got ndarray$"):
        similarity_change(z.numpy(), z, y)
    with pytest.raises(TypeError, match=r"^z_t must be a tensor of features, got list$"):
        similarity_change(z, z.tolist(), y)
    with pytest.raises(TypeError, match=r"^z_t must hold real numbers, got dtype torch\.complex64$"):
        similarity_change(z, z.to(torch.complex64), y)


def test_similarity_change_takes_pairs_from_an_array_or_a_list():
    """Mended: pairs from NumPy (or a list) were refused, where the labels beside them are taken from either."""
    z, y = _features_and_labels()
    z_t = torch.randn(6, 4, generator=gen(10))
    pairs = torch.tensor([[0, 2], [4, 3], [1, 0]])
    ref = similarity_change(z, z_t, y, pairs=pairs)
    for given in (pairs.numpy(), pairs.tolist(), pairs.to(torch.uint8), pairs.numpy().astype(np.int32)):
        got = similarity_change(z, z_t, y, pairs=given)
        assert torch.equal(got["pairs"], pairs) and torch.equal(got["change"], ref["change"])
        assert got["per_class"] == ref["per_class"]
    # cos(z_i, z_t_j) - cos(z_i, z_j), pair by pair.
    cos = torch.nn.functional.cosine_similarity
    expected = cos(z[[0, 4, 1]].double(), z_t[[2, 3, 0]].double()) - cos(z[[0, 4, 1]].double(), z[[2, 3, 0]].double())
    torch.testing.assert_close(ref["change"], expected)


def test_similarity_change_refuses_bool_pairs_and_pairs_of_another_shape():
    """Mended: a bool (P, 2) tensor was read as the indices 0 and 1."""
    z, y = _features_and_labels()
    shape = r"^pairs must be a non-empty \(P, 2\) integer tensor, got "
    with pytest.raises(ValueError, match=shape + r"\(2, 2\) torch\.bool$"):
        similarity_change(z, z, y, pairs=torch.tensor([[True, False], [False, True]]))
    with pytest.raises(ValueError, match=r"got \(1, 3\) torch\.int64$"):
        similarity_change(z, z, y, pairs=torch.tensor([[0, 1, 2]]))
    with pytest.raises(ValueError, match=r"got \(1, 2\) torch\.float32$"):
        similarity_change(z, z, y, pairs=torch.tensor([[0.0, 1.0]]))
    with pytest.raises(ValueError, match=r"got \(0, 2\) torch\.int64$"):
        similarity_change(z, z, y, pairs=torch.zeros(0, 2, dtype=torch.long))
    with pytest.raises(TypeError, match=r"^pairs must be a \(P, 2\) tensor, NumPy array or list of .* got dict$"):
        similarity_change(z, z, y, pairs={0: 1})
    with pytest.raises(TypeError, match=r"^pairs must be \(P, 2\) integer index pairs, got \[\[0, 'a'\]\]$"):
        similarity_change(z, z, y, pairs=[[0, "a"]])


def _search_setup():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 2, 3), nn.Flatten(), nn.Linear(72, 3)).eval()
    return net, torch.rand(6, 3, 8, 8, generator=gen(11)), [0, 0, 0, 1, 1, 1]


def _strip(rows):
    return [(r["transform"], r["magnitude"], r["label"], r["mean_change"]) for r in rows]


def test_similarity_search_takes_magnitudes_as_a_tensor_or_an_array():
    """Mended: a tensor of magnitudes was refused (invariance_curve and report take one), a 0-d tensor or None
    failed inside list() with a TypeError naming nothing, a string was split into characters."""
    net, x, y = _search_setup()
    ref = _strip(similarity_search(net, x, y, {"r": T.Rotate()}, magnitudes=[0.25, 0.5]))
    assert [r[:3] for r in ref] == [("r", 0.25, 0), ("r", 0.25, 1), ("r", 0.5, 0), ("r", 0.5, 1)]
    for given in (torch.tensor([0.25, 0.5]), np.array([0.25, 0.5]), {"r": torch.tensor([0.25, 0.5])}):
        assert _strip(similarity_search(net, x, y, {"r": T.Rotate()}, magnitudes=given)) == ref
    one = _strip(similarity_search(net, x, y, {"r": T.Rotate()}, magnitudes=0.5))
    assert _strip(similarity_search(net, x, y, {"r": T.Rotate()}, magnitudes=torch.tensor(0.5))) == one == ref[2:]
    for bad in (None, "0.5"):
        with pytest.raises(TypeError, match=rf"^magnitudes must be a number or a sequence of numbers .*got {bad!r}$"):
            similarity_search(net, x, y, {"r": T.Rotate()}, magnitudes=bad)
        with pytest.raises(TypeError, match=rf"^magnitudes for 'r' must be a number or a sequence .*got {bad!r}$"):
            similarity_search(net, x, y, {"r": T.Rotate()}, magnitudes={"r": bad})
    # An iterator of magnitudes, shared by two transforms, is read once: the second had none left.
    both = similarity_search(net, x, y, {"r": T.Rotate(), "s": T.Rotate()}, magnitudes=iter([0.25, 0.5]))
    assert _strip(both) == ref + [("s", *row[1:]) for row in ref]


def test_similarity_search_refuses_no_magnitude_a_magnitude_that_is_no_number_and_bad_inputs():
    net, x, y = _search_setup()
    with pytest.raises(ValueError, match=r"^magnitudes must hold at least one magnitude, got none$"):
        similarity_search(net, x, y, {"r": T.Rotate()}, magnitudes=[])
    with pytest.raises(ValueError, match=r"^transform 'r' has no magnitude to probe$"):
        similarity_search(net, x, y, {"r": T.Rotate()}, magnitudes={"r": ()})
    with pytest.raises(TypeError, match=r"^magnitudes for 'r' must be numbers, got \['a', True\]$"):
        similarity_search(net, x, y, {"r": T.Rotate()}, magnitudes={"r": [0.5, "a", True]})
    with pytest.raises(TypeError, match=r"^x must be a tensor, got ndarray$"):
        similarity_search(net, x.numpy(), y, {"r": T.Rotate()})
    with pytest.raises(ValueError, match=r"^x must be a batch of inputs, one row per label, got a 0-d tensor$"):
        similarity_search(net, torch.tensor(1.0), y, {"r": T.Rotate()})
    with pytest.raises(TypeError, match=r"^model must be an nn\.Module, got function$"):
        similarity_search(lambda a: a, x, y, {"r": T.Rotate()})


# --------------------------------------------------------------------------- Lie derivative


def test_the_warp_check_says_no_where_torch_cannot_differentiate_a_grid_samples_backward(monkeypatch):
    """torch 2.11 raised 'derivative for aten::grid_sampler_2d_backward is not implemented' in the second grad."""
    grad = torch.autograd.grad
    calls = []

    def second_fails(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("derivative for aten::grid_sampler_2d_backward is not implemented")
        return grad(*args, **kwargs)

    check = lie_module._warps_differentiate_twice.__wrapped__
    assert check() is True
    monkeypatch.setattr(torch.autograd, "grad", second_fails)
    assert check() is False and len(calls) == 2


def test_the_lie_derivative_puts_back_the_backend_the_user_chose(monkeypatch):
    """An AugNet is differentiated through tap_mix's reference backend, and AUGNET_BACKEND is put back after."""
    monkeypatch.setenv("AUGNET_BACKEND", "auto")
    torch.manual_seed(0)
    trunk = nn.Sequential(nn.Conv2d(3, 2, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten())
    model = augnet.AugNet(trunk, augnet.AugmentationLayer([T.Rotate()], init_magnitude=0.0)).eval()
    seen = []
    trunk.register_forward_pre_hook(lambda mod, inputs: seen.append(os.environ.get("AUGNET_BACKEND")))
    x = torch.rand(2, 3, 8, 8, generator=gen(12))
    out = lie_derivative(model, x, T.Brightness(), copies=2)
    assert os.environ["AUGNET_BACKEND"] == "auto"
    assert seen[0] == "auto" and seen[-1] == "reference"  # the checking pass, then the differentiated one
    # The trunk's mean of a 1 x 1 convolution: brightness (+t on every pixel) moves it by the kernel's sum.
    kernel = trunk[0].weight.detach().sum((1, 2, 3)).double()
    torch.testing.assert_close(out["lee"]["logits"], kernel.abs().mean().expand(2), rtol=1e-5, atol=1e-7)


class _NoForwardMode(torch.autograd.Function):
    """Doubles its input; an old-style Function, which forward-mode autograd (torch.func.jvp) refuses."""

    @staticmethod
    def forward(ctx, a):
        return 2 * a

    @staticmethod
    def backward(ctx, g):
        return 2 * g


class _Constant(nn.Module):
    def forward(self, x):
        return torch.ones(len(x), 2)  # no gradient at all


class _ParameterOnly(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.tensor([1.0, -2.0]))

    def forward(self, x):
        return self.w.expand(len(x), 2) * 1.0  # a gradient, but none through the input


class _Mixed(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv, self.const, self.param = nn.Conv2d(3, 2, 1), _Constant(), _ParameterOnly()

    def forward(self, x):
        h = _NoForwardMode.apply(self.conv(x)).mean((2, 3))
        return h + self.const(x) + self.param(x)


def test_layers_that_do_not_depend_on_the_input_have_a_zero_lie_derivative_by_double_backward():
    model, x = _Mixed().eval(), torch.rand(3, 3, 6, 6, generator=gen(13))
    out = lie_derivative(model, x, T.Brightness(), ["const", "param", "logits"], return_derivative=True)
    assert out["mode"] == "double_backward"
    for layer in ("const", "param"):
        assert out["lee"][layer].tolist() == [0.0] * 3 and out["relative"][layer].tolist() == [0.0] * 3
        assert torch.equal(out["derivative"][layer], torch.zeros(3, 2))
    # The logits: brightness adds t to every pixel, so each channel moves by 2 * (its kernel's sum).
    moved = 2 * model.conv.weight.detach().sum((1, 2, 3)).double()
    torch.testing.assert_close(out["derivative"]["logits"].double(), moved.expand(3, 2), rtol=1e-5, atol=1e-6)


def test_transform_derivative_checks_its_size():
    """Mended: size=8 failed in tuple() ('int' object is not iterable), (8, 0) divided a translation into NaN."""
    x = torch.rand(2, 3, 8, 8, generator=gen(14))
    with pytest.raises(TypeError, match=r"^size must be two integers \(H, W\), got 8$"):
        transform_derivative(T.TranslateX(), x, size=8)
    with pytest.raises(TypeError, match=r"^size must be two integers \(H, W\), got \(8\.0, 8\)$"):
        transform_derivative(T.TranslateX(), x, size=(8.0, 8))
    with pytest.raises(ValueError, match=r"^size must be two positive integers \(H, W\), got \(8, 0\)$"):
        transform_derivative(T.TranslateX(), x, size=(8, 0))
    plain = transform_derivative(T.TranslateX(), x)
    assert torch.equal(transform_derivative(T.TranslateX(), x, size=torch.Size([8, 8])), plain)
    # t counts pixels of the given width: of a width of 16, a pixel is half of one of these 8.
    torch.testing.assert_close(transform_derivative(T.TranslateX(), x, size=(np.int64(8), 16)), plain / 2)


# --------------------------------------------------------------------------- equivariance maps


def test_a_fitted_map_names_what_it_cannot_map_and_maps_an_empty_batch():
    z = torch.randn(40, 3, generator=gen(15))
    fitted = fit_equivariance_map(z, z.flip(1))
    with pytest.raises(TypeError, match=r"^z must be a tensor, got ndarray$"):
        fitted(z.numpy())
    with pytest.raises(ValueError, match=r"^expected features of shape \(B, \*\(3,\)\), got \(4, 2\)$"):
        fitted(z[:4, :2])
    # Mended: an empty batch failed in reshape(0, -1) with torch's RuntimeError.
    empty = fitted(torch.zeros(0, 3, dtype=torch.float64))
    assert empty.shape == (0, 3) and empty.dtype == torch.float64
    torch.testing.assert_close(fitted(z.flip(1)[:5]), z[:5], rtol=1e-4, atol=1e-4)


def test_fit_refuses_an_unknown_error_and_a_ridge_that_is_no_finite_number():
    """Mended: ridge='1' failed in a comparison (a TypeError naming nothing), ridge=inf fitted a map of NaN
    (test_error NaN), ridge=True was 1."""
    z = torch.randn(40, 3, generator=gen(16))
    with pytest.raises(ValueError, match=r"^error must be one of \('l2', 'sq'\), got 'l1'$"):
        fit_equivariance_map(z, z, error="l1")
    with pytest.raises(NotANumberError, match=r"^ridge must be a finite number >= 0, got '1'$"):
        fit_equivariance_map(z, z, ridge="1")
    with pytest.raises(NotANumberError, match=r"^ridge must be a finite number >= 0, got True$"):
        fit_equivariance_map(z, z, ridge=True)
    for bad in (math.inf, -1.0, math.nan):
        with pytest.raises(ValueError, match=rf"^ridge must be a finite number >= 0, got {bad}$"):
            fit_equivariance_map(z, z, ridge=bad)
    # A NumPy number is a ridge penalty: the same map as the float.
    a = fit_equivariance_map(z, z.flip(1), ridge=np.float64(0.5))
    b = fit_equivariance_map(z, z.flip(1), ridge=0.5)
    assert torch.equal(a.errors, b.errors)


# --------------------------------------------------------------------------- viz


def test_figure_path_refuses_the_folder_a_png_would_go_to_and_save_figure_closes_its_figure(tmp_path):
    import matplotlib.pyplot as plt

    from augnet.viz import figure_path, save_figure

    (tmp_path / "fig.png").mkdir()
    with pytest.raises(ValueError, match=rf"^the figure path {tmp_path / 'fig.png'} is an existing directory$"):
        figure_path(tmp_path / "fig")
    fig = plt.figure()
    with pytest.raises(ValueError, match=r"is an existing directory$"):
        save_figure(fig, tmp_path / "fig")
    assert not plt.fignum_exists(fig.number)


def test_plot_policy_history_refuses_records_of_no_layer(tmp_path):
    from augnet.viz import plot_policy_history

    history = {"step": [0, 1], "weights": [[], []], "magnitudes": [[], []]}
    with pytest.raises(ValueError, match=r"^history's records hold no layer"):
        plot_policy_history(history, [], tmp_path / "p.png")
    assert not (tmp_path / "p.png").exists()


def test_plot_layer_importance_titles_its_figure(figures, tmp_path):
    from augnet.viz import plot_layer_importance

    plot_layer_importance({"a": 0.5, "b": torch.tensor(0.25), "c": math.nan}, tmp_path / "i.png", title="ablation")
    (ax,) = figures[0].axes
    assert ax.get_title() == "ablation"
    assert [round(p.get_height(), 6) for p in ax.patches[:2]] == [0.5, 0.25] and math.isnan(ax.patches[2].get_height())
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "c"]


@pytest.mark.parametrize("kind", ["violin", "box"])
def test_plot_distributions_marks_a_layer_with_no_finite_value_na(figures, tmp_path, kind):
    """Mended: a layer whose values were all NaN vanished from the figure, its label with it, without a word."""
    from augnet.viz import plot_distributions

    values = {"conv1": [0.1, 0.4, 0.2], "conv2": [math.nan] * 3, "fc": torch.tensor([0.3, 0.9]), "empty": [],
              "loud": [math.inf, math.nan]}  # fmt: skip
    plot_distributions(values, tmp_path / "d.png", ylabel="score", kind=kind)
    (ax,) = figures[0].axes
    assert [t.get_text() for t in ax.get_xticklabels()] == ["conv1", "conv2", "fc", "empty", "loud"]
    assert list(ax.get_xticks()) == [1, 2, 3, 4, 5] and ax.get_xlim() == (0.5, 5.5)
    marks = {round(t.get_position()[0]): t.get_text() for t in ax.texts}
    assert marks == {2: "n/a", 4: "n/a", 5: "inf"}
    if kind == "violin":  # the violins at 1 and 3, their medians drawn: 0.2 and 0.6
        medians = ax.collections[-1].get_segments()
        got = [(float(s[0][0] + s[1][0]) / 2, float(s[0][1])) for s in medians]
        assert got == [(1.0, pytest.approx(0.2)), (3.0, pytest.approx(0.6))]


# --------------------------------------------------------------------------- the command line


@pytest.fixture
def threads():
    """torch's thread count, put back after the test."""
    before = torch.get_num_threads()
    yield before
    torch.set_num_threads(before)


def test_probe_threads_sets_torchs_threads(tmp_path, monkeypatch, threads):
    argv = probe_model_file(tmp_path, monkeypatch, "cov3_threads_net")
    want = 2 if threads != 2 else 1
    assert main([*argv, "--threads", str(want), "--out", str(tmp_path / "out")]) == 0
    assert torch.get_num_threads() == want


def test_probe_without_matplotlib_writes_no_heatmap_and_leaves_no_earlier_one(tmp_path, monkeypatch, capsys):
    """Mended: an earlier run's heatmap.png stayed beside this run's tables, which the run had said it replaced."""
    argv = probe_model_file(tmp_path, monkeypatch, "cov3_noplot_net")
    out = tmp_path / "out"
    out.mkdir()
    (out / "heatmap.png").write_bytes(b"an earlier run's")
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    assert main([*argv, "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "no heatmap: plotting needs matplotlib" in captured.err
    assert "replacing the results of an earlier run" in captured.err and "heatmap.png" in captured.err
    assert sorted(p.name for p in out.iterdir()) == ["probe.csv", "probe.json", "verdict.txt"]


def test_reproduce_threads_and_a_setup_error_of_the_run_are_one_line(tmp_path, monkeypatch, capsys, threads):
    """A SetupError raised by the run itself (its folder changed after the command's checks) is one line, exit 2."""
    import augnet.experiments
    from augnet.experiments import SetupError

    monkeypatch.setenv("AUGNET_BACKEND", "reference")  # nothing to build first
    want = 2 if threads != 2 else 1
    seen = {}

    def refused(name, **kwargs):
        seen.update(name=name, threads=torch.get_num_threads(), **kwargs)
        raise SetupError("out results is not writable", "--out results is not writable")

    monkeypatch.setattr(augnet.experiments, "reproduce", refused)
    name = augnet.experiments.names()[0]
    code = main(["reproduce", name, "--quick", "--threads", str(want), "--out", str(tmp_path), "--no-progress"])
    assert code == 2 and seen["threads"] == want and seen["name"] == name and seen["quick"] is True
    assert capsys.readouterr().err == "augnet reproduce: error: --out results is not writable\n"


def test_a_models_own_runtime_error_is_not_swallowed(tmp_path, monkeypatch):
    """A RuntimeError that is no allocation failure: the model's own, after the checking pass (of two images)."""
    forward = 'if len(x) > 2:\n            raise RuntimeError("boom in forward")\n        return self.net(x)'
    argv = probe_model_file(tmp_path, monkeypatch, "cov3_broken_net", forward=forward)
    with pytest.raises(RuntimeError, match=r"^boom in forward$"):
        main([*argv, "--out", str(tmp_path / "out")])


def test_main_shows_its_own_deprecations_when_run_as_the_command(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["augnet", "bench", "--model", "h200"])
    for options, added in (([], True), (["ignore"], False)):
        monkeypatch.setattr(sys, "warnoptions", options)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            before = list(warnings.filters)
            assert main() == 0
            new = [f for f in warnings.filters if f not in before]
        if added:
            assert len(new) == 1 and new[0][0] == "default" and new[0][2] is DeprecationWarning
            assert new[0][3].pattern == r"augnet\.(cli|_cli_args)$"
        else:
            assert new == []
    assert "h200" in capsys.readouterr().out.lower()


def test_run_exits_with_mains_code(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdout", sys.stdout)  # run() wraps both streams: put back after the test
    monkeypatch.setattr(sys, "stderr", sys.stderr)
    monkeypatch.setattr(sys, "argv", ["augnet", "bench", "--model", "h200"])
    with pytest.raises(SystemExit) as exit_:
        run()
    assert exit_.value.code == 0 and type(sys.stdout).__name__ == "PipeGuard"
    monkeypatch.setattr(sys, "argv", ["augnet", "probe", "--model", "x:y", "--fake", "--transforms", "Rotate",
                                      "--seed", "-1"])  # fmt: skip
    with pytest.raises(SystemExit) as exit_:
        run()
    assert exit_.value.code == 2 and "--seed must be in [0, 2**63 - 3], got -1" in capsys.readouterr().err


def test_run_ends_an_interrupted_command_as_interrupted(tmp_path, monkeypatch, capsys):
    """Ctrl-C (here, in the model's forward pass): one line, then a KeyboardInterrupt whose traceback is silenced."""
    argv = probe_model_file(tmp_path, monkeypatch, "cov3_interrupted_net", forward="raise KeyboardInterrupt")
    monkeypatch.setattr(sys, "stdout", sys.stdout)
    monkeypatch.setattr(sys, "stderr", sys.stderr)
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    monkeypatch.setattr(sys, "argv", ["augnet", *argv, "--out", str(tmp_path / "out")])
    with pytest.raises(KeyboardInterrupt):
        run()
    assert sys.excepthook is _quiet_interrupt
    assert capsys.readouterr().err == "\naugnet probe: interrupted\n"


def test_the_quiet_hook_silences_an_interruption_only(capsys):
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt as err:
        _quiet_interrupt(KeyboardInterrupt, err, err.__traceback__)
    assert capsys.readouterr().err == ""
    try:
        raise ValueError("shown")
    except ValueError as err:
        _quiet_interrupt(ValueError, err, err.__traceback__)
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):") and err.endswith("ValueError: shown\n")
