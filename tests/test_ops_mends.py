"""Mends of augnet.ops (dispatch, bad_input, _cpp) and augnet.bench.inference found in their untested branches.

- ``tap_mix`` under ``torch.compile`` on the CPU, and on ``torch.func.vmap``'s batched taps, read no values, and
  passed bad taps (NaN / inf warps, colour maps, weights; ``src`` out of range) to the backend unguarded: an infinite
  warp gave a finite, wrong row (border padding), ``src`` out of range an IndexError. Now the accelerators' contract:
  those rows NaN, no gradient from them, the other rows unchanged. Eager CPU calls still refuse them at once.
- ``guard_reference`` wrote its flag in place under ``torch.func`` transforms: a RuntimeError for every call under
  ``vmap`` on an accelerator (good input too).
- ``check_bad_input(0)`` was a TypeError although torch reads 0 as a device (``cuda:0``).
- ``_source_tag`` hashed every file of csrc/, an editor's swap file too: opening a source meant a rebuild.
- ``inference_cost(device=torch.device(...))`` returned the device object: its JSON could not be written.
- Smaller ones: a non-tensor argument of ``tap_mix`` was a ValueError ("got shape ndarray"), an empty ``src`` took any
  ``backend``, ``resolve_backend`` / ``available_backends`` of a non-tensor an AttributeError; ``inference_cost`` with
  a NumPy integer seed failed after building its models, ``log=True`` after timing them.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import gen
from syncs import PretendCuda

import augnet.bench.inference as inference
from augnet.ops import _cpp, bad_input, dispatch
from augnet.ops.dispatch import available_backends, resolve_backend, tap_mix

CPP = _cpp.cpp_hint() is None
BACKENDS = ["reference", pytest.param("cpp", marks=pytest.mark.skipif(not CPP, reason="no C++ extension"))]


def _taps(ch: int = 2, dtype=torch.float64):
    """Four output rows of two taps each over three images, with a colour map: every row good."""
    x = torch.rand(3, ch, 5, 6, generator=gen(0), dtype=dtype)
    src = torch.tensor([[0, 1], [1, 2], [2, 0], [1, 1]])
    affine = torch.eye(2, 3, dtype=dtype).repeat(4, 2, 1, 1)
    affine = affine + 0.1 * torch.randn(4, 2, 2, 3, generator=gen(1), dtype=dtype)
    color = torch.eye(ch, ch + 1, dtype=dtype).repeat(4, 2, 1, 1) + 0.1 * torch.rand(4, 2, ch, ch + 1, generator=gen(2))
    weight = torch.rand(4, 2, generator=gen(3), dtype=dtype)
    return x, src, affine, color.to(dtype), weight


def _spoil(case: str, src, affine, color, weight):
    """Copies of the taps with one bad value in tap 1 of row 2 (what ``case`` names)."""
    src, affine, color, weight = (t.clone() for t in (src, affine, color, weight))
    if case == "weight-nan":
        weight[2, 1] = math.nan
    elif case == "affine-inf":
        affine[2, 1, 0, 2] = math.inf
    elif case == "color-nan":
        color[2, 1, 1, 0] = math.nan
    elif case == "src-past-b":
        src[2, 1] = 3
    elif case == "src-negative":
        src[2, 1] = -1
    return src, affine, color, weight


BAD = ["weight-nan", "affine-inf", "color-nan", "src-past-b", "src-negative"]


# ------------------------------------------------------------------ tap_mix under torch.compile on the CPU


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", BAD)
def test_compiled_tap_mix_on_the_cpu_makes_rows_with_a_bad_tap_nan_as_an_accelerator(case, backend):
    # Before: under torch.compile the CPU read no values and ran the backend on the bad taps: an infinite warp gave a
    # finite row (0.43... with border padding), src out of range an IndexError (reference) or RuntimeError (cpp),
    # a NaN weight or colour a NaN row by chance. Eager mode refuses them (unchanged).
    x, *good = _taps()
    src, affine, color, weight = _spoil(case, *good)
    kept = [t.clone() for t in (x, src, affine, color, weight)]
    with pytest.raises(ValueError, match=r"tap_mix: (src indices|affine|color|weight)"):
        tap_mix(x, src, affine, color, weight, padding="border", backend=backend)

    def call(x, src, affine, color, weight):
        return tap_mix(x, src, affine, color, weight, padding="border", backend=backend)

    out = torch.compile(call, backend="eager", fullgraph=True)(x, src, affine, color, weight)
    assert out.isnan().flatten(1).all(1).tolist() == [False, False, True, False]
    rows = [0, 1, 3]  # the good rows: as eager mode makes them from their own taps
    expected = call(x, *(t[rows] for t in (src, affine, color, weight)))
    torch.testing.assert_close(out[rows], expected, rtol=0, atol=0)
    for before, after in zip(kept, (x, src, affine, color, weight), strict=True):  # nothing changed in place
        torch.testing.assert_close(after, before, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_tap_mix_sends_no_gradient_from_a_row_with_a_bad_tap(backend):
    # aot_eager traces the backward too. A NaN warp with border padding used to crash grid_sample's backward (the
    # reason the CPU refuses it); compiled, the bad row's gradient is dropped and the others' is eager mode's.
    x, *good = _taps()
    src, affine, color, weight = _spoil("affine-inf", *good)
    affine[2, 1, 1, 1] = math.nan

    def loss(fn, x, src, affine, color, weight):
        out = fn(x, src, affine, color, weight, padding="reflection", backend=backend)
        return torch.nan_to_num(out, nan=0.0).square().sum()

    leaves = [t.clone().requires_grad_() for t in (x, affine, color, weight)]
    compiled = torch.compile(lambda *a: loss(tap_mix, *a), backend="aot_eager", fullgraph=True)
    compiled(leaves[0], src, *leaves[1:]).backward()
    rows = [0, 1, 3]
    eager = [t.detach()[rows].clone().requires_grad_() if i else t.clone().requires_grad_() for i, t in
             enumerate((x, affine, color, weight))]  # fmt: skip
    loss(tap_mix, eager[0], src[rows], *eager[1:]).backward()
    grads = [leaf.grad for leaf in leaves]
    assert all(bool(g.isfinite().all()) for g in grads)
    for g in grads[1:]:  # the bad row's taps: no gradient at all, the good tap beside the bad one included
        assert not g[2].any()
    torch.testing.assert_close(grads[0], eager[0].grad, rtol=1e-12, atol=1e-12)
    for g, e in zip(grads[1:], eager[1:], strict=True):
        torch.testing.assert_close(g[rows], e.grad, rtol=1e-12, atol=1e-12)


def test_compiled_half_precision_taps_are_guarded_in_float32():
    # float16 images with float32 taps: the guard runs on the taps converted for the computation; the bad row NaN,
    # the others rounded from float32 as in eager mode.
    x, src, affine, color, weight = _taps(dtype=torch.float32)
    src, affine, color, weight = _spoil("src-past-b", src, affine, color, weight)
    half = x.half()
    out = torch.compile(tap_mix, backend="eager", fullgraph=True)(half, src, affine, color, weight)
    assert out.dtype == torch.float16 and out.isnan().flatten(1).all(1).tolist() == [False, False, True, False]
    rows = [0, 1, 3]
    expected = tap_mix(half, *(t[rows] for t in (src, affine, color, weight)))
    torch.testing.assert_close(out[rows], expected, rtol=0, atol=0)


def test_eager_cpu_calls_are_not_guarded_in_torch_ops(monkeypatch):
    # The hot path is unchanged: an eager CPU call whose taps were read runs the backend on them directly.
    def no_guard(*args):
        raise AssertionError("guard_reference ran on taps already checked")

    monkeypatch.setattr(dispatch, "guard_reference", no_guard)
    x, src, affine, color, weight = _taps()
    out = tap_mix(x, src, affine, color, weight, backend="reference")
    torch.testing.assert_close(out, dispatch.tap_mix_reference(x, src, affine, color, weight), rtol=0, atol=0)
    with pytest.raises(AssertionError, match="guard_reference ran"):  # compiled: guarded (the test above)
        torch.compile(tap_mix, backend="eager")(x, src, affine, color, weight, backend="reference")


# ------------------------------------------------------------------ torch.func transforms


def test_vmap_over_taps_on_the_cpu_makes_the_bad_samples_rows_nan():
    # Before: vmap's batched taps could not be read, and were not guarded: the sample with an infinite warp gave a
    # finite row, silently.
    x, src, affine, color, weight = _taps()
    stacked = torch.stack([affine, _spoil("affine-inf", src, affine, color, weight)[1], affine])
    out = torch.func.vmap(lambda a: tap_mix(x, src, a, color, weight, padding="border"))(stacked)
    assert out.isnan().flatten(2).all(2).tolist() == [[False] * 4, [False, False, True, False], [False] * 4]
    plain = tap_mix(x, src, affine, color, weight, padding="border")
    for i in (0, 2):
        torch.testing.assert_close(out[i], plain, **dict(rtol=1e-12, atol=1e-12))
    torch.testing.assert_close(out[1][[0, 1, 3]], plain[[0, 1, 3]], rtol=1e-12, atol=1e-12)


def test_vmap_runs_on_the_accelerator_path(monkeypatch):
    # Before: guard_reference ORed into the device's flag in place with vmap's batched bits: "output with shape [1]
    # doesn't match the broadcast shape [3, 1]", for good input too. Under a transform the flag is left alone.
    monkeypatch.setattr(bad_input, "_flags", {})
    x, src, affine, color, weight = _taps()
    stacked = torch.stack([affine, _spoil("weight-nan", src, affine, color, weight)[1], affine])
    bad_weight = _spoil("weight-nan", src, affine, color, weight)[3]
    weights = torch.stack([weight, bad_weight, weight])

    def run(a, w):
        return tap_mix(x, src, a, color, w, backend="reference")

    on_cpu = torch.func.vmap(run)(stacked, weights)
    with PretendCuda():
        on_gpu_path = torch.func.vmap(run)(stacked, weights)
    torch.testing.assert_close(on_gpu_path, on_cpu, rtol=0, atol=0, equal_nan=True)
    assert on_cpu.isnan().flatten(2).all(2).tolist() == [[False] * 4, [False, False, True, False], [False] * 4]
    assert all(not bool(f.any()) for f in bad_input._flags.values())  # nothing to report: no flag written


@pytest.mark.parametrize("transform", ["grad", "jvp", "vmap"])
def test_the_reference_guard_runs_under_every_torch_func_transform(transform, monkeypatch):
    # Before: "attempted to call in-place operation (aten::bitwise_or_.Tensor) that would mutate a captured Tensor"
    # under grad and jvp, a shape error under vmap.
    monkeypatch.setattr(bad_input, "_flags", {torch.device("cpu"): torch.zeros(1, dtype=torch.int32)})
    x, src, affine, color, weight = _taps()
    weight = _spoil("weight-nan", src, affine, color, weight)[3]

    def guarded_sum(a):
        return bad_input.guard_reference(x, src, a, color, weight)[1].sum()

    if transform == "grad":
        expected = torch.ones_like(affine)
        expected[2, 1] = 0  # the bad tap is replaced by the identity: no gradient reaches it
        assert torch.equal(torch.func.grad(guarded_sum)(affine), expected)
    elif transform == "jvp":
        _, tangent = torch.func.jvp(guarded_sum, (affine,), (torch.ones_like(affine),))
        assert float(tangent) == 7 * 6  # seven good taps of six entries each; the bad one's none
    else:
        stacked = affine.expand(2, -1, -1, -1, -1)
        rows = torch.func.vmap(lambda a: bad_input.guard_reference(x, src, a, color, weight)[4])(stacked)
        assert rows.tolist() == [[False, False, True, False]] * 2
    assert bad_input._flags[torch.device("cpu")].item() == 0
    bad_input.guard_reference(x, src, affine, color, weight)  # outside a transform: recorded as before
    assert bad_input._flags[torch.device("cpu")].item() == 4


# ------------------------------------------------------------------ tap_mix's arguments


@pytest.mark.parametrize(
    "name, value, kind",
    [("x", np.zeros((3, 2, 5, 6)), "ndarray"), ("src", [[0, 1]] * 4, "list"),
     ("affine", np.zeros((4, 2, 2, 3)), "ndarray"), ("color", False, "bool"), ("weight", [[1.0, 1.0]] * 4, "list")],
)  # fmt: skip
def test_an_argument_that_is_not_a_tensor_is_a_type_error_naming_it(name, value, kind):
    # Before: a ValueError "x must be a (B, Ch, H, W) tensor, got shape ndarray".
    args = dict(zip(("x", "src", "affine", "color", "weight"), _taps(), strict=True))
    args[name] = value
    expected = rf"^tap_mix: {name} must be a tensor{' or None' * (name == 'color')}, got {kind}: "
    with pytest.raises(TypeError, match=expected):
        tap_mix(**args)


def test_shapes_and_empty_batches_are_value_errors_naming_them():
    x, src, affine, color, weight = _taps()
    with pytest.raises(ValueError, match=r"^tap_mix: src must be an \(N, K\) tensor, got shape \(4,\)$"):
        tap_mix(x, src[:, 0], affine, color, weight)
    with pytest.raises(ValueError, match=r"^tap_mix: src must be an \(N, K\) tensor, got shape \(\)$"):
        tap_mix(x, torch.tensor(0), affine, color, weight)
    with pytest.raises(ValueError, match=r"x is an empty batch but src asks for source rows \(src of shape \(4, 2\)\)"):
        tap_mix(x[:0], src, affine, color, weight)
    empty = tap_mix(x[:0], src[:0], affine[:0], color[:0], weight[:0])  # no rows from no images: fine
    assert empty.shape == (0, 2, 5, 6)


def test_an_empty_src_still_refuses_a_backend_that_does_not_exist():
    # Before: with no output rows the backend was never looked at: "nope" and ["cpp"] returned an empty result.
    x, src, affine, color, weight = (t[:0] if i else t for i, t in enumerate(_taps()))
    with pytest.raises(ValueError, match=r"unknown tap_mix backend 'nope'; expected one of \[.*'auto'.*'reference'"):
        tap_mix(x, src, affine, color, weight, backend="nope")
    with pytest.raises(TypeError, match=r"backend must be 'auto' or a backend name, got list: \['cpp'\]"):
        tap_mix(x, src, affine, color, weight, backend=["cpp"])
    for backend in ("auto", "reference"):  # the empty result, no backend loaded
        out = tap_mix(x, src, affine, color, weight, backend=backend)
        assert out.shape == (0, 2, 5, 6) and not out.any()
    # A backend asked for by name: what rows get (it returned an empty result where it cannot run, e.g. triton on
    # the CPU without the interpreter, though the same call with rows is a RuntimeError)
    rows = _taps()
    try:
        tap_mix(*rows, backend="triton")
    except RuntimeError as err:
        with pytest.raises(RuntimeError, match=re.escape(str(err))):
            tap_mix(x, src, affine, color, weight, backend="triton")
    else:
        out = tap_mix(x, src, affine, color, weight, backend="triton")
        assert out.shape == (0, 2, 5, 6) and not out.any()


def test_resolve_backend_and_available_backends_name_an_x_that_is_not_a_tensor():
    # Before: AttributeError: 'NoneType' object has no attribute 'device' / 'str' object has no attribute 'type'.
    with pytest.raises(TypeError, match="resolve_backend: x must be a tensor, got NoneType: None"):
        resolve_backend("auto", None)
    with pytest.raises(TypeError, match=r"available_backends: x must be a tensor or None, got ndarray: array\("):
        available_backends(np.zeros(1))
    assert "reference" in available_backends(torch.zeros(1)) and "reference" in available_backends()


def test_resolve_backend_says_why_a_backend_cannot_run(monkeypatch):
    monkeypatch.delenv("AUGNET_BACKEND", raising=False)
    with pytest.raises(TypeError, match=r"^tap_mix: backend must be 'auto' or a backend name, got list: \['cpp'\]$"):
        resolve_backend(["cpp"], torch.zeros(1))
    assert resolve_backend("auto", torch.zeros(1, device="meta")) == "reference"  # shape inference
    if CPP:
        with pytest.raises(RuntimeError, match=r"backend 'cpp' is not usable here: does not support torch.float16 "):
            resolve_backend("cpp", torch.zeros(1, dtype=torch.float16))
    x, src, affine, color, weight = _taps()
    with pytest.raises(RuntimeError, match=r"^tap_mix backend 'cpp' cannot run under a torch.func transform"):
        torch.func.grad(lambda a: tap_mix(x, src, a, color, weight, backend="cpp").sum())(affine)


def test_a_fast_backend_missing_from_the_registry_is_not_part_of_the_build(monkeypatch):
    # _why_not's first branch: a build of augnet without the C++ backend registered; "auto" takes the reference
    # without a warning (nothing was there to fail), and the reason reads as such.
    monkeypatch.setattr(dispatch, "_BACKENDS", {"reference": dispatch._BACKENDS["reference"]})
    monkeypatch.setattr(dispatch, "_warned_fallback", set())
    x = torch.zeros(1, 1, 2, 2)
    assert dispatch._why_not("cpp", x) == "not part of this build of augnet"
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve_backend("auto", x) == "reference"
    with pytest.raises(ValueError, match=r"unknown tap_mix backend 'cpp'; expected one of \['auto', 'reference'\]"):
        resolve_backend("cpp", x)


# ------------------------------------------------------------------ check_bad_input's device


def test_check_bad_input_reads_a_device_index_as_torch_does(monkeypatch):
    # Before: check_bad_input(0) was a TypeError ("device must be a torch.device, a string or None").
    held = torch.full((1,), 2, dtype=torch.int32)  # a flag on the CPU standing in for cuda:0's
    monkeypatch.setattr(bad_input, "_flags", {torch.device("cuda", 0): held})
    assert torch.device(0) == torch.device("cuda", 0)
    with pytest.raises(ValueError, match=r"^tap_mix: color contains NaN or infinite values \(seen on cuda:0 since"):
        bad_input.check_bad_input(0)
    assert held.item() == 0
    held.fill_(8)
    with pytest.raises(ValueError, match=r"src indices must lie in \[0, B - 1\] \(seen on cuda:0"):
        bad_input.check_bad_input(np.int64(0))
    bad_input.check_bad_input(1)  # cuda:1 has no flag: nothing ran there, nothing to report
    bad_input.check_bad_input(b"cuda:0")  # torch reads bytes as a name too; cleared above


@pytest.mark.parametrize(
    "device, error, message",
    [(True, TypeError, "got bool: True"), (0.0, TypeError, "got float: 0.0"), ([0], TypeError, r"got list: \[0\]"),
     (-1, ValueError, "device -1 is not a device: Device index must not be negative"),
     (2**63, ValueError, "device 9223372036854775808 is not a device"),
     ("gpu", ValueError, "device 'gpu' is not a device")],
)  # fmt: skip
def test_check_bad_input_refuses_what_torch_does_not_read_naming_it(device, error, message, monkeypatch):
    monkeypatch.setattr(bad_input, "_flags", {})
    with pytest.raises(error, match=message) as info:
        bad_input.check_bad_input(device)
    assert len(str(info.value).splitlines()) == 1


# ------------------------------------------------------------------ the C++ build's name


def _sources(folder, **files):
    for name, text in files.items():
        (folder / name).write_text(text)


def test_the_build_name_ignores_files_the_build_does_not_read(tmp_path, monkeypatch):
    # Before: every file of csrc/ was hashed: vim's swap file of an open source gave another name, so a rebuild.
    _sources(tmp_path, **{"tap_mix.cpp": "int f();", "tap_mix_cuda.cu": "// cuda", "tap_mix.h": "#pragma once"})
    monkeypatch.setattr(_cpp, "_CSRC", tmp_path)
    first = _cpp._source_tag(["-O3"])
    others = {".tap_mix.cpp.swp": "swap", ".DS_Store": "finder", "tap_mix.cpp~": "backup", "#tap_mix.cpp#": "emacs",
              ".#tap_mix.cpp": "lock", "notes.txt": "todo", "tap_mix.cpp.orig": "x"}  # fmt: skip
    _sources(tmp_path, **others)
    (tmp_path / "build").mkdir()
    assert _cpp._source_tag(["-O3"]) == first
    assert [p.name for p in _cpp._build_sources()] == ["tap_mix.cpp", "tap_mix.h", "tap_mix_cuda.cu"]
    for name, text in (("tap_mix.cpp", "int g();"), ("tap_mix_cuda.cu", "// changed"), ("extra.cuh", "// new")):
        before = _cpp._source_tag(["-O3"])
        _sources(tmp_path, **{name: text})
        assert _cpp._source_tag(["-O3"]) != before, name  # a source or header the build reads: another build


def test_this_checkouts_build_keeps_its_name():
    # The cached extension is found again (no rebuild): with only the build's sources in csrc/, the tag is the one
    # hashing every file of it gave.
    flags = _cpp._cxx_flags()
    digest = hashlib.sha1(" ".join(flags).encode() + str(_cpp._CSRC.resolve()).encode())
    digest.update(_cpp._torch_install().encode())
    ninja = shutil.which("ninja")  # the ninja torch runs (two versions rebuilt each other's build)
    digest.update(str(Path(ninja).resolve()).encode() if ninja else b"")
    for path in sorted(p for p in _cpp._CSRC.glob("*") if p.is_file() and not p.name.startswith(".")):
        digest.update(path.name.encode() + path.read_bytes())
    assert _cpp._source_tag(flags) == digest.hexdigest()[:8]


def test_the_build_compiles_the_named_sources(tmp_path, monkeypatch):
    from torch.utils import cpp_extension

    seen = []
    monkeypatch.setattr(cpp_extension, "load", lambda **kwargs: seen.append(kwargs["sources"]))
    _cpp.build_and_load("augnet_probe", cuda=False, cxx_flags=["-O0"], build_directory=str(tmp_path))
    assert seen == [[str(_cpp._CSRC / "tap_mix.cpp")]]


# ------------------------------------------------------------------ the inference cost


class _NoTimer:
    """Stands in for torch's Timer: runs nothing, measures 2 ms."""

    def __init__(self, stmt, globals):
        pass

    def blocked_autorange(self, min_run_time):
        return type("Measured", (), {"median": 2e-3})()


def test_inference_cost_records_a_torch_device_as_a_string(monkeypatch):
    # Before: result["device"] was the torch.device itself, and json.dumps(result) a TypeError; a NumPy integer seed
    # passed the checks and failed in torch.Generator.manual_seed ("an integer is required") after the models were
    # built; copies=(1, 2, 1) timed C = 1 twice.
    monkeypatch.setattr(inference, "benchmark_classes", lambda: (None, _NoTimer))
    lines = []
    result = inference.inference_cost(
        copies=(1, 2, 1), batch=1, size=8, width=4, device=torch.device("cpu"), seed=np.int64(3), log=lines.append
    )
    assert result["device"] == "cpu" and json.loads(json.dumps(result))["device"] == "cpu"
    assert [r["copies"] for r in result["records"]] == [1, 2]  # a C given twice: timed once (was two records)
    assert [r["ratio"] for r in result["records"]] == [1.0, 0.5]  # 2 ms / (C x 2 ms)
    assert [r["overhead"] for r in result["records"]] == [1.0, 0.5]
    assert lines[1] == (
        "  C= 2: AugNet      2.00 ms = 0.500 x C x trunk; trunk on C*B rows 0.500 x C x trunk; "
        "augmentation + aggregation 2.00 ms = 0.5000 x C x trunk"
    )
    table = inference.format_inference(result).splitlines()
    assert table[0] == "AugNet inference cost, ResNet-18 (width 4), 8x8, batch 1 (trunk alone 2.00 ms)"
    assert table[3].split() == ["2", "2.00", "0.500", "0.500", "0.5000"] and len(table) == 4


@pytest.mark.parametrize(
    "bad, message",
    [(dict(device=None), "device must be a string such as 'cpu' or 'cuda', got NoneType: None"),
     (dict(device=0), "device must be a string such as 'cpu' or 'cuda', got int: 0"),
     (dict(min_run_time="1"), "min_run_time must be a number, got str: '1'"),
     (dict(log=True), "log must be a callable or None, got bool: True")],
)  # fmt: skip
def test_inference_cost_names_a_setting_of_the_wrong_type_before_any_work(bad, message, monkeypatch):
    def no_work(*args, **kwargs):
        raise AssertionError("a model was built before the settings were checked")

    monkeypatch.setattr(inference, "resnet18", no_work)
    with pytest.raises(TypeError, match=f"^{message}$"):
        inference.inference_cost(**{"copies": (1,), "batch": 1, "size": 8, "width": 4, "log": None, **bad})
