"""The compiled CPU backend (csrc/tap_mix.cpp) against the reference."""

import os
import time
import warnings

import pytest
import torch
from helpers import gen, tap_mix_inputs, tol

import augnet
from augnet.ops import _cpp, resolve_backend, tap_mix, tap_mix_reference
from augnet.ops import dispatch as tap_mix_module
from augnet.transforms import image as T


@pytest.fixture(scope="module", autouse=True)
def compiled():
    # The extension must build here (CI builds it); a failure is a test failure.
    assert _cpp.load(), _cpp.cpp_hint()


def run(backend, args, padding, grad_out):
    x, src, affine, col, weight = args
    # Fresh leaves that alias the inputs (a clone would make a strided x dense).
    leaves = [t.detach().requires_grad_() if t is not None else None for t in (x, affine, col, weight)]
    assert leaves[0].stride() == x.stride(), "the layout under test must reach tap_mix"
    out = tap_mix(leaves[0], src, leaves[1], leaves[2], leaves[3], padding=padding, backend=backend)
    out.backward(grad_out)
    return [out] + [t.grad for t in leaves if t is not None]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("color", [True, False])
@pytest.mark.parametrize(
    "shape",
    [
        dict(b=3, ch=3, h=7, w=9, n=8, k=5),  # N not a multiple of B, src reads other samples
        dict(b=2, ch=1, h=5, w=4, n=6, k=1),  # K = 1, one channel
        dict(b=4, ch=2, h=6, w=11, n=4, k=3),  # generic channel count
    ],
)
def test_matches_the_reference_in_output_and_every_gradient(dtype, padding, color, shape):
    args = tap_mix_inputs(color=color, dtype=dtype, **shape)
    grad_out = torch.randn(shape["n"], shape["ch"], shape["h"], shape["w"], generator=gen(1), dtype=dtype)
    expected = run("reference", args, padding, grad_out)
    got = run("cpp", args, padding, grad_out)
    for name, a, e in zip(["out", "x", "affine", "color", "weight"][: len(got)], got, expected, strict=True):
        torch.testing.assert_close(a, e, **tol("cpp", dtype), msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.parametrize("needs", [(False, True, True, True), (True, False, False, True), (False, False, True, False)])
def test_only_the_gradients_asked_for_are_computed_and_they_match(needs):
    x, src, affine, col, weight = tap_mix_inputs()
    leaves = [t.detach().clone().requires_grad_(r) for t, r in zip((x, affine, col, weight), needs, strict=True)]
    ref_leaves = [t.detach().clone().requires_grad_(r) for t, r in zip((x, affine, col, weight), needs, strict=True)]
    grad_out = torch.randn(8, 3, 7, 9, generator=gen(1), dtype=torch.float64)
    tap_mix(leaves[0], src, leaves[1], leaves[2], leaves[3], backend="cpp").backward(grad_out)
    tap_mix_reference(ref_leaves[0], src, ref_leaves[1], ref_leaves[2], ref_leaves[3]).backward(grad_out)
    for a, e, r in zip(leaves, ref_leaves, needs, strict=True):
        assert (a.grad is not None) == r
        if r:
            torch.testing.assert_close(a.grad, e.grad, **tol("cpp", torch.float64))


@pytest.mark.parametrize("layout", ["channels_last", "strided"])
def test_non_contiguous_inputs(layout):
    args = tap_mix_inputs(layout=layout)
    grad_out = torch.randn(8, 3, 7, 9, generator=gen(1), dtype=torch.float64)
    for a, e in zip(run("cpp", args, "zeros", grad_out), run("reference", args, "zeros", grad_out), strict=True):
        torch.testing.assert_close(a, e, **tol("cpp", torch.float64))


@pytest.mark.parametrize("grad_layout", ["expanded", "channels_last", "strided"])
def test_the_backward_reads_any_gradient_layout(grad_layout):
    """The kernel reads grad_out through its strides (no copy): the same gradients as a contiguous one."""
    args = tap_mix_inputs()
    dense = torch.randn(8, 3, 7, 9, generator=gen(1), dtype=torch.float64)
    if grad_layout == "expanded":  # what out.sum().backward() passes
        dense = torch.full((8, 3, 7, 9), 0.7, dtype=torch.float64)
        grad_out = torch.tensor(0.7, dtype=torch.float64).expand(8, 3, 7, 9)
    elif grad_layout == "channels_last":
        grad_out = dense.contiguous(memory_format=torch.channels_last)
    else:
        grad_out = torch.zeros(8, 3, 7, 18, dtype=torch.float64)[..., ::2]
        grad_out.copy_(dense)
    assert not grad_out.is_contiguous()
    for a, e in zip(run("cpp", args, "border", grad_out), run("reference", args, "border", dense), strict=True):
        torch.testing.assert_close(a, e, **tol("cpp", torch.float64))


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("color", [True, False])
def test_gradcheck(padding, color):
    x, src, affine, col, weight = tap_mix_inputs(b=2, ch=2, h=4, w=5, n=3, k=2, color=color)
    inputs = tuple(t.requires_grad_() for t in (x, affine, weight) + ((col,) if color else ()))

    def f(x, affine, weight, col=None):
        return tap_mix(x, src, affine, col, weight, padding=padding, backend="cpp")

    assert torch.autograd.gradcheck(f, inputs)


@pytest.mark.parametrize("color", [True, False])
def test_opcheck(color):
    x, src, affine, col, weight = tap_mix_inputs(b=2, ch=3, h=5, w=6, n=4, k=2, color=color)
    for t in (x, affine, weight) + ((col,) if color else ()):
        t.requires_grad_()
    torch.library.opcheck(torch.ops.augnet.tap_mix.default, (x, src, affine, col, weight, "border"))


def test_backward_is_bitwise_deterministic_across_runs_and_thread_counts():
    # Many taps read the same source image (as the C copies do).
    args = tap_mix_inputs(b=2, n=16, k=5, dtype=torch.float32, h=16, w=16)
    grad_out = torch.randn(16, 3, 16, 16, generator=gen(1))
    threads = torch.get_num_threads()
    try:
        first = run("cpp", args, "zeros", grad_out)
        second = run("cpp", args, "zeros", grad_out)
        torch.set_num_threads(1)
        single = run("cpp", args, "zeros", grad_out)
    finally:
        torch.set_num_threads(threads)
    for a, b, c in zip(first, second, single, strict=True):
        assert torch.equal(a, b) and torch.equal(a, c)


# ------------------------------------------- the kernel's paths (csrc/tap_mix.cpp)
#
# The kernel specialises at compile time on the padding mode, the colour map and
# the channel count: Ch <= Vec::size() / 2 (float: 4, double: 2 with AVX2) takes
# the pair-vector path, more channels the scalar-load path. Pixels go in blocks of
# Vec::size() with a scalar tail (W not a multiple of 8), rows in bands of about
# 256 pixels (several bands below), and the backward has two work layouts: per
# (output row, band) without the gradient of x, per source image with it.


def assert_close_at_scale(actual, expected, dtype, msg):
    """assert_close relative to the largest value: a float32 sum of large terms that cancel to near 0
    (an affine gradient entry among others of 100) is only as exact as the terms (either backend)."""
    scale = expected.abs().max().clamp_min(1)
    torch.testing.assert_close(actual / scale, expected / scale, **tol("cpp", dtype), msg=msg)


def backward_op(args, grad_out, padding, mask):
    x, src, affine, col, weight = args
    return torch.ops.augnet.tap_mix_backward(grad_out, x, src, affine, col, weight, padding, mask)


@pytest.mark.parametrize(
    "dtype, ch",
    [(torch.float32, 1), (torch.float32, 3), (torch.float32, 4), (torch.float32, 5), (torch.float64, 2),
     (torch.float64, 3)],
    ids=["f32-ch1-pair", "f32-ch3-pair", "f32-ch4-pair", "f32-ch5-scalar", "f64-ch2-pair", "f64-ch3-scalar"],
)  # fmt: skip
@pytest.mark.parametrize("k", [1, 5, 12])
@pytest.mark.parametrize("color", [True, False])
def test_every_path_matches_the_reference(dtype, ch, k, color):
    # W = 13: one block of 8 pixels and a tail of 5; H = 22: two bands of 19 rows (256 // 13).
    shape = dict(b=3, ch=ch, h=22, w=13, n=5, k=k)
    args = tap_mix_inputs(color=color, dtype=dtype, spread=0.6, **shape)
    grad_out = torch.randn(5, ch, 22, 13, generator=gen(1), dtype=dtype)
    for padding in ("zeros", "border", "reflection"):
        expected = run("reference", args, padding, grad_out)
        got = run("cpp", args, padding, grad_out)
        for name, a, e in zip(["out", "x", "affine", "color", "weight"][: len(got)], got, expected, strict=True):
            assert_close_at_scale(a, e, dtype, msg=lambda m, name=name, p=padding: f"{p} {name}: {m}")


@pytest.mark.parametrize("w", [1, 7, 8, 9, 300])
def test_widths_around_the_vector_size_and_one_row_bands(w):
    # 300 columns: bands of one row (256 // 300 < 1); 1 column: only the scalar tail.
    args = tap_mix_inputs(b=2, ch=3, h=4, w=w, n=3, k=2, dtype=torch.float32, spread=0.5)
    grad_out = torch.randn(3, 3, 4, w, generator=gen(1))
    for padding in ("zeros", "reflection"):
        for a, e in zip(run("cpp", args, padding, grad_out), run("reference", args, padding, grad_out), strict=True):
            assert_close_at_scale(a, e, torch.float32, msg=lambda m, p=padding: f"{p}: {m}")


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("color", [True, False])
@pytest.mark.parametrize("ch", [1, 3])  # double: the pair path, then the scalar-load path
def test_gradcheck_of_every_path(padding, color, ch):
    # W = 5: one block of 4 (double) pixels and a tail of 1.
    x, src, affine, col, weight = tap_mix_inputs(b=2, ch=ch, h=3, w=5, n=3, k=2, color=color, spread=0.6)
    inputs = tuple(t.requires_grad_() for t in (x, affine, weight) + ((col,) if color else ()))

    def f(x, affine, weight, col=None):
        return tap_mix(x, src, affine, col, weight, padding=padding, backend="cpp")

    assert torch.autograd.gradcheck(f, inputs)


MASKS = {
    "all": [True, True, True, True],
    "no-dx": [False, True, True, True],  # a first layer: its input is data
    "only-dx": [True, False, False, False],
    "affine": [False, True, False, False],
}


@pytest.mark.parametrize("padding", ["zeros", "reflection"])
@pytest.mark.parametrize("color", [True, False])
@pytest.mark.parametrize("dtype, ch", [(torch.float32, 3), (torch.float32, 6), (torch.float64, 2)])
def test_each_gradient_is_the_same_bits_whatever_else_is_asked_for(padding, color, dtype, ch):
    """The work layout differs with and without dx (per image vs per output row): the gradients do not."""
    args = tap_mix_inputs(b=3, ch=ch, h=21, w=19, n=7, k=4, dtype=dtype, color=color)
    grad_out = torch.randn(7, ch, 21, 19, generator=gen(2), dtype=dtype)
    full = backward_op(args, grad_out, padding, MASKS["all"])
    for name, mask in MASKS.items():
        got = backward_op(args, grad_out, padding, mask)
        for i, asked in enumerate(mask):
            if not color and i == 2:
                assert got[2].numel() == 0
            elif asked or (i == 3 and mask[1]):  # the weight gradient comes with the affine one
                assert torch.equal(got[i], full[i]), f"{name}: gradient {i}"
            elif i in (0, 2):  # not asked for: zeros of the right shape, not computed
                assert got[i].shape == full[i].shape and not got[i].any(), f"{name}: gradient {i}"


@pytest.mark.parametrize("mask", list(MASKS.values()), ids=list(MASKS))
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("dtype, ch", [(torch.float32, 3), (torch.float32, 5), (torch.float64, 1)])
def test_backward_is_the_same_bits_for_any_thread_count(mask, padding, dtype, ch):
    # Several bands (h 40, w 16: 16 rows a band), taps of one output row reading several images.
    args = tap_mix_inputs(b=3, ch=ch, h=40, w=16, n=9, k=5, dtype=dtype, color=True)
    grad_out = torch.randn(9, ch, 40, 16, generator=gen(3), dtype=dtype)
    threads = torch.get_num_threads()
    try:
        results = []
        for count in (1, 2, 3, 1):
            torch.set_num_threads(count)
            results.append(backward_op(args, grad_out, padding, mask))
    finally:
        torch.set_num_threads(threads)
    for other in results[1:]:
        for a, b in zip(results[0], other, strict=True):
            assert torch.equal(a, b)


@pytest.mark.parametrize("layout", ["channels_last", "strided"])
def test_the_op_packs_any_layout_of_x_to_the_same_bits(layout):
    # Contiguous x is packed by the kernel's own transposes, any other layout by ATen's copy.
    dense = tap_mix_inputs(b=3, ch=3, h=9, w=11, dtype=torch.float32)
    other = tap_mix_inputs(b=3, ch=3, h=9, w=11, dtype=torch.float32, layout=layout)
    assert not other[0].is_contiguous()
    grad_out = torch.randn(8, 3, 9, 11, generator=gen(1))
    assert torch.equal(torch.ops.augnet.tap_mix(*dense, "zeros"), torch.ops.augnet.tap_mix(*other, "zeros"))
    for a, b in zip(
        backward_op(dense, grad_out, "zeros", MASKS["all"]), backward_op(other, grad_out, "zeros", MASKS["all"])
    ):
        assert torch.equal(a, b)


@pytest.mark.parametrize("padding", ["zeros", "border"])
@pytest.mark.parametrize("value", [1e38, -1e38, 1e30])
def test_extreme_finite_warps_stay_finite(padding, value):
    x = torch.rand(2, 3, 6, 7, generator=gen(6))
    aff = torch.eye(2, 3).expand(2, 1, 2, 3).clone()
    aff[0, 0, 0, 0] = value
    aff[1, 0, 1, 2] = value
    leaves = [x.clone().requires_grad_(), aff.requires_grad_(), torch.ones(2, 1, requires_grad=True)]
    out = tap_mix(leaves[0], torch.arange(2)[:, None], leaves[1], None, leaves[2], padding, "cpp")
    out.sum().backward()
    assert torch.isfinite(out).all()
    assert all(torch.isfinite(t.grad).all() for t in leaves)


def test_traces_under_torch_compile():
    args = tap_mix_inputs(dtype=torch.float32)
    x, src, affine, col, weight = args

    def f(x, affine, col, weight):
        return tap_mix(x, src, affine, col, weight, backend="cpp").square().sum()

    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    leaves = [t.clone().requires_grad_() for t in (x, affine, col, weight)]
    eager_leaves = [t.clone().requires_grad_() for t in (x, affine, col, weight)]
    compiled(*leaves).backward()
    f(*eager_leaves).backward()
    for a, b in zip(leaves, eager_leaves, strict=True):
        torch.testing.assert_close(a.grad, b.grad)


# ------------------------------------------------------------------ errors


@pytest.mark.parametrize(
    "change, match",
    [
        (lambda a: {**a, "src": a["src"].int()}, "src must be int64"),
        (lambda a: {**a, "src": a["src"] + 3}, r"src indices must lie in \[0, 2\]"),
        (lambda a: {**a, "affine": a["affine"][:, :, :1]}, r"affine must have shape \(N, K, 2, 3\)"),
        (lambda a: {**a, "weight": a["weight"][:1]}, r"weight must have shape \(N, K\)"),
        (lambda a: {**a, "color": a["color"][..., :2]}, r"color must have shape \(N, K, Ch, Ch \+ 1\)"),
        (lambda a: {**a, "affine": a["affine"].float()}, "affine must have the dtype of x"),
        (lambda a: {**a, "x": a["x"].long()}, "x must be float32 or float64"),
        (lambda a: {**a, "padding": "wrap"}, "padding must be 'zeros', 'border' or 'reflection'"),
    ],
)
def test_the_kernel_checks_its_arguments(change, match):
    x, src, affine, col, weight = tap_mix_inputs()
    args = change({"x": x, "src": src, "affine": affine, "color": col, "weight": weight, "padding": "zeros"})
    with pytest.raises(RuntimeError, match=match):
        torch.ops.augnet.tap_mix(**args)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device to mix CPU and CUDA tensors")
def test_cpu_cuda_mix_is_refused():
    x, src, affine, col, weight = tap_mix_inputs()
    with pytest.raises(ValueError, match="src is on cuda"):
        tap_mix(x, src.cuda(), affine, col, weight)


# ------------------------------------------------------- dispatch and layer


def test_auto_picks_cpp_on_cpu():
    assert resolve_backend("auto", torch.rand(1)) == "cpp"
    assert "cpp" in augnet.ops.available_backends(torch.rand(1))


def test_unavailable_extension_falls_back_once_and_explicit_request_says_how_to_fix(monkeypatch):
    monkeypatch.setattr(_cpp, "_state", {"tried": True, "error": "OSError: no compiler"})
    monkeypatch.setattr(tap_mix_module, "_warned_fallback", set())
    monkeypatch.delenv("AUGNET_BACKEND", raising=False)
    args = tap_mix_inputs()
    with pytest.warns(RuntimeWarning, match="using the reference one.*no compiler"):
        out = tap_mix(*args)
    torch.testing.assert_close(out, tap_mix_reference(*args, "zeros"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tap_mix(*args)
    with pytest.raises(RuntimeError, match=r"backend 'cpp' is not usable here.*AUGNET_BUILD_EXT=1 pip install"):
        tap_mix(*args, backend="cpp")


def test_environment_variable_selects_the_reference(monkeypatch):
    calls = []
    original = tap_mix_module._BACKENDS["reference"]
    spy = tap_mix_module._Backend(lambda *a: calls.append(1) or original.fn(*a), original.supports)
    monkeypatch.setitem(tap_mix_module._BACKENDS, "reference", spy)
    monkeypatch.setenv("AUGNET_BACKEND", "reference")
    tap_mix(*tap_mix_inputs())
    assert calls == [1]


class Spy:
    """Records the arguments every tap_mix call receives in a backend."""

    def __init__(self, monkeypatch, name="cpp"):
        self.calls = []
        backend = tap_mix_module._BACKENDS[name]

        def fn(x, src, affine, color, weight, padding):
            self.calls.append((tuple(x.shape), tuple(src.shape), x.data_ptr()))
            return backend.fn(x, src, affine, color, weight, padding)

        monkeypatch.setitem(
            tap_mix_module._BACKENDS, name, tap_mix_module._Backend(fn, backend.supports, backend.unavailable_hint)
        )


def test_layer_uses_the_compiled_backend_straight_from_x(monkeypatch):
    spy = Spy(monkeypatch)
    layer = augnet.AugmentationLayer([cls() for cls in T.GEOMETRIC], init_magnitude=0.5)
    x = torch.rand(6, 3, 8, 8)
    layer(x, copies=4)
    # Training: one call reading x itself (6 rows, not 24), Q = 5 taps per copy and the warps' identity tap
    # (the kink gate's, weighted by an exact 0 while no magnitude is 0; transforms.base.kink_gate).
    assert spy.calls == [((6, 3, 8, 8), (24, 6), x.data_ptr())]
    layer.eval()
    layer(x, copies=4)
    # Evaluation: one tap per copy.
    assert spy.calls[1][:2] == ((6, 3, 8, 8), (24, 1))


@pytest.mark.parametrize("training", [True, False])
def test_layer_output_is_the_same_with_either_backend(training):
    transforms = [T.TranslateX(), T.Rotate(), T.ShearY(), T.HorizontalFlip(), T.Contrast(), T.SamplePairing()]
    fast = augnet.AugmentationLayer(transforms, init_magnitude=0.6).train(training)
    slow = augnet.AugmentationLayer(transforms, init_magnitude=0.6, backend="reference").train(training)
    x = torch.rand(5, 3, 9, 7, generator=gen(3))
    torch.testing.assert_close(
        fast(x, copies=3, generator=gen(4)), slow(x, copies=3, generator=gen(4)), **tol("cpp", torch.float32)
    )


def test_the_build_name_follows_the_sources_and_flags(tmp_path, monkeypatch):
    """Checkouts get builds of their own (torch's build file names the sources by path); one checkout keeps one."""
    from augnet.ops import _cpp

    for name, text in (("tap_mix.cpp", "int f() { return 1; }"), ("tap_mix.h", "#pragma once")):
        (tmp_path / name).write_text(text)
    monkeypatch.setattr(_cpp, "_CSRC", tmp_path)
    first = _cpp._source_tag(["-O3"])
    assert _cpp._source_tag(["-O3"]) == first and len(first) == 8
    assert _cpp._source_tag(["-O0"]) != first
    (tmp_path / "tap_mix.h").write_text("#pragma once\n// changed")
    assert _cpp._source_tag(["-O3"]) != first
    changed = _cpp._source_tag(["-O3"])
    twin = tmp_path / "other-checkout"
    twin.mkdir()
    for path in tmp_path.glob("tap_mix.*"):
        (twin / path.name).write_bytes(path.read_bytes())
    monkeypatch.setattr(_cpp, "_CSRC", twin)
    assert _cpp._source_tag(["-O3"]) != changed  # identical sources elsewhere: another build
    twin_tag = _cpp._source_tag(["-O3"])
    # The same checkout from another virtual environment: another build (each builds against its own torch headers,
    # and sharing one name rebuilt it at every switch: 45 s in the docs environment of CI).
    monkeypatch.setattr(_cpp, "_torch_install", lambda: "/elsewhere/site-packages/torch 2.14.1")
    assert _cpp._source_tag(["-O3"]) != twin_tag
    monkeypatch.undo()
    assert "torch" in _cpp._torch_install() and torch.__version__ in _cpp._torch_install()


def test_a_stale_build_lock_is_removed_where_torch_would_wait_for_ever(tmp_path, capsys):
    # torch 2.11 guards a build with a lock file: a build stopped by Ctrl-C left it, and every later import
    # waited for ever with no message (checked there: the old code hung past 60 s, this one rebuilt and loaded).
    import types

    file_lock_torch, advisory_lock_torch = types.SimpleNamespace(FileBaton=object), types.SimpleNamespace()
    lock = tmp_path / "lock"
    lock.touch()
    assert not _cpp.clear_stale_lock(tmp_path, file_lock_torch) and lock.exists()  # fresh: a build may hold it
    old = time.time() - _cpp.STALE_LOCK_S - 60
    os.utime(lock, (old, old))
    assert not _cpp.clear_stale_lock(tmp_path, advisory_lock_torch) and lock.exists()  # the file means nothing there
    assert _cpp.clear_stale_lock(tmp_path, file_lock_torch) and not lock.exists()
    assert "did not finish" in capsys.readouterr().err
    assert not _cpp.clear_stale_lock(tmp_path, file_lock_torch)  # nothing left to remove
