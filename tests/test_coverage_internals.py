"""The branches the rest of the suite leaves unexercised in a few internal modules: a layer's saved state
(``_layer_state``), warnings' stack levels (``_stack``), the torchvision export's own transforms, the bad-input
flags of accelerators, ``resolve_device`` and the loader of the compiled ``tap_mix`` op (``ops/_cpp``).

No GPU is needed: CUDA's answers (``torch.cuda.is_available``, ``current_device``...) are monkeypatched, and the
flags of "devices" that this machine lacks are CPU tensors standing in for them, so what is checked is what the
code decides from those answers. The C++ extension is never rebuilt: builds are recorded, not run.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.machinery
import math
import os
import platform
import re
import sys
import types

import numpy as np
import PIL.Image
import pytest
import torch

import augnet
from augnet import _layer_state, _stack
from augnet.ops import _cpp, bad_input
from augnet.training.devices import resolve_device
from augnet.transforms import image as T

TRANSFORMS = [T.Rotate(), T.Brightness()]


# ---------------------------------------------------------------- _layer_state


@pytest.mark.parametrize("saved", [[1.0, -1.0, 5.0], [2.0, -2.0, 5.0, 7.0], [0.5, 3.0, -1.0]])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_float_state_with_a_negative_size_is_refused_not_read_as_an_int_form(saved, dtype):
    # The float form [temperature, *size]: a size of -1 or -2 was read as the int forms' mark, so [1, -1, 5] loaded
    # silently as temperature 2.5e-323 (the bits of 5) and no size, and [2, -2, 5, 7] blamed other transforms.
    layer = augnet.AugmentationLayer(list(TRANSFORMS), temperature=0.7)
    state = dict(layer.state_dict(), _extra_state=torch.tensor(saved, dtype=dtype))
    with pytest.raises(ValueError, match=r"saved temperature and size are not valid: \[" + str(saved[0])):
        layer.load_state_dict(state)
    assert layer.temperature == 0.7 and layer.last_size is None  # nothing changed


@pytest.mark.parametrize("size", [math.inf, -math.inf, math.nan, 1e30, 0.0, 2.5])
def test_a_float_state_with_a_size_no_int_holds_is_refused_naming_it(size):
    # inf became int64's smallest value, and the error showed that number instead of the saved inf.
    state = torch.tensor([0.5, size, 4.0], dtype=torch.float64)
    with pytest.raises(ValueError, match="not valid") as error:
        _layer_state.decode(state, 1.0, TRANSFORMS)
    assert str(state.tolist()) in str(error.value) and "-9223372036854775808" not in str(error.value)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_a_valid_float_state_loads_its_temperature_and_size(dtype):
    assert _layer_state.decode(torch.tensor([0.5, 32.0, 24.0], dtype=dtype), 1.0, TRANSFORMS) == (0.5, (32, 24))
    assert _layer_state.decode(torch.tensor([0.25], dtype=dtype), 1.0, TRANSFORMS) == (0.25, None)


@pytest.mark.parametrize("size", [(0, 5), (5, -3)])
def test_an_int_state_with_a_size_below_1_is_refused_naming_it(size):
    current = _layer_state.encode(0.5, size, TRANSFORMS)
    older = _layer_state.without_digest(current)
    for state in (current, older, torch.tensor(size)):
        with pytest.raises(ValueError, match=re.escape(f"saved input size must be positive, got {list(size)}")):
            _layer_state.decode(state, 1.0, TRANSFORMS)


@pytest.mark.parametrize("saved", [[0.0, 8.0], [-1.0, 8.0], [math.inf], [math.nan, 4.0], []])
def test_a_float_state_without_a_positive_finite_temperature_is_refused(saved):
    with pytest.raises(ValueError, match=r"saved temperature and size are not valid: \[" + str(saved)[1:6]):
        _layer_state.decode(torch.tensor(saved), 1.0, TRANSFORMS)


@pytest.mark.parametrize(
    "state",
    [[-2, 1, 2], np.array([-2, 1, 2]), torch.tensor(5), torch.zeros(2, 3, dtype=torch.long), torch.ones(3) * 1j],
    ids=["list", "array", "0-d", "2-D", "complex"],
)
def test_a_state_that_is_not_a_1d_real_tensor_is_a_type_error(state):
    layer = augnet.AugmentationLayer(list(TRANSFORMS))
    with pytest.raises(TypeError, match="saved temperature and size must be 1-D ints, got"):
        layer.set_extra_state(state)
    assert layer.temperature == 1.0 and layer.last_size is None


def test_only_the_current_form_loses_its_checksum_for_a_load_of_another_count():
    current = _layer_state.encode(0.5, (9, 11), TRANSFORMS)
    stripped = _layer_state.without_digest(current)
    assert stripped.tolist() == [-1, current[1].item(), 9, 11]
    for other in (stripped, torch.tensor([0.5, 9.0, 11.0]), torch.tensor([9, 11]), [1, 2], torch.tensor([-2, 1])):
        assert _layer_state.without_digest(other) is other
    # A layer of three transforms given an older state (no checksum) of a layer of two: torch's size error says it.
    two = augnet.AugmentationLayer(list(TRANSFORMS))
    old = dict(two.state_dict(), _extra_state=stripped)
    three = augnet.AugmentationLayer([T.Rotate(), T.Brightness(), T.ShearX()], temperature=0.3)
    with pytest.raises(RuntimeError, match="size mismatch for weight_logits"):
        three.load_state_dict(old)
    assert three.temperature == 0.3


# ---------------------------------------------------------------- _stack


def test_the_stack_level_is_one_when_every_frame_is_inside():
    assert _stack.caller_stacklevel(("",)) == 1  # every module name starts with ""
    assert _stack.caller_stacklevel((__name__,)) == 2  # this test's frame is inside; pytest's, which called it, not
    assert _stack.caller_stacklevel(("no.such.module",)) == 1  # this test's own frame


# ---------------------------------------------------------------- export/_torchvision_ops


def _ops():
    pytest.importorskip("torchvision")
    from augnet.export import _torchvision_ops

    return _torchvision_ops


@pytest.mark.parametrize(
    "image, bound",
    [
        (torch.zeros(3, 4, 4), 1.0),
        (torch.zeros(3, 4, 4, dtype=torch.float16), 1.0),
        (torch.zeros(3, 4, 4, dtype=torch.bool), 1.0),
        (torch.zeros(3, 4, 4, dtype=torch.uint8), 255.0),
        (torch.zeros(3, 4, 4, dtype=torch.int8), 127.0),
        (torch.zeros(3, 4, 4, dtype=torch.uint16), 65535.0),
        (PIL.Image.new("RGB", (4, 4)), 255.0),
    ],
    ids=["float32", "float16", "bool", "uint8", "int8", "uint16", "PIL"],
)
def test_the_value_bound_is_torchvisions(image, bound):
    # torchvision's kernels take 1 as a bool tensor's largest value (its _max_value); this said 255.
    assert _ops()._value_bound(image) == bound


def test_a_bool_image_is_refused_by_torchvision_for_its_dtype_not_for_a_threshold_it_never_gave():
    # Before: "Threshold should be less or equal the maximum value of the dtype, but got 101.6" (0.4 * 255).
    with pytest.raises(TypeError, match="bool"):
        _ops().RandomSolarizeRange(0.2, 0.6)(torch.tensor([[[True, False], [False, True]]]))


def test_solarize_thresholds_scale_with_the_dtype():
    ops = _ops()
    from torchvision.transforms.v2 import functional as F

    x = torch.arange(0, 65536, 257, dtype=torch.int32).to(torch.uint16).reshape(1, 16, 16)
    assert torch.equal(ops.RandomSolarizeRange(0.5, 0.5)(x), F.solarize(x, threshold=0.5 * 65535))
    u8 = torch.arange(256, dtype=torch.int32).to(torch.uint8).reshape(1, 16, 16)
    assert torch.equal(ops.RandomSolarizeRange(0.25, 0.25)(u8), F.solarize(u8, threshold=0.25 * 255))


@pytest.mark.parametrize("cls", ["RandomSolarizeRange", "RandomSharpnessRange"])
@pytest.mark.parametrize(
    "low, high, name", [("0.1", 0.5, "low"), (0.1, None, "high"), (True, 1.0, "low"), (0.1, [0.5], "high")]
)
def test_a_range_that_is_not_numbers_is_a_type_error_naming_it(cls, low, high, name):
    # Before: Python's "'<=' not supported between instances of 'float' and 'str'", naming neither.
    with pytest.raises(TypeError, match=f"{name} must be a number, got"):
        getattr(_ops(), cls)(low, high)


@pytest.mark.parametrize("cls", ["RandomSolarizeRange", "RandomSharpnessRange"])
def test_a_range_given_as_0d_tensors_or_arrays_is_stored_as_floats(cls):
    made = getattr(_ops(), cls)(torch.tensor(0.25, dtype=torch.float64), np.array(0.75))
    assert (made.low, made.high) == (0.25, 0.75) and type(made.low) is float and type(made.high) is float


@pytest.mark.parametrize("low, high", [(0.5, 0.2), (-0.1, 0.5), (0.2, 1.5), (0.1, math.nan), (math.nan, 0.5)])
def test_solarize_refuses_a_range_outside_0_1(low, high):
    with pytest.raises(ValueError, match=re.escape(f"need 0 <= low <= high <= 1, got low={low!r}, high={high!r}")):
        _ops().RandomSolarizeRange(low, high)


@pytest.mark.parametrize("low, high", [(0.5, 0.2), (-0.1, 0.5), (0.5, math.inf), (0.0, 1e39), (math.nan, 1.0)])
def test_sharpness_refuses_a_range_it_cannot_draw_from(low, high):
    # An infinite (or float32-overflowing) high was taken, and every call then failed in torch's uniform_
    # ("to is out of bounds for float"), a RuntimeError far from the constructor.
    with pytest.raises(ValueError, match=re.escape(f"need 0 <= low <= high < inf, got low={low!r}, high={high!r}")):
        _ops().RandomSharpnessRange(low, high)


def test_sharpness_draws_its_factor_in_the_range():
    ops = _ops()
    from torchvision.transforms.v2 import functional as F

    image = torch.rand(3, 8, 8, generator=torch.Generator().manual_seed(1))
    made = ops.RandomSharpnessRange(1.5, 1.5)
    assert repr(made) == "RandomSharpnessRange(low=1.5, high=1.5)"
    assert torch.equal(made(image), F.adjust_sharpness(image, sharpness_factor=1.5))
    torch.manual_seed(3)
    factor = ops.RandomSharpnessRange(0.5, 2.0).make_params([image])["factor"]
    torch.manual_seed(3)
    assert factor == float(torch.empty(()).uniform_(0.5, 2.0)) and 0.5 <= factor <= 2.0


def test_check_size_passes_what_is_not_an_image_and_checks_what_is():
    ops = _ops()
    check = ops.CheckSize([4, 5])
    assert repr(check) == "CheckSize(size=(4, 5))"
    label = {"label": 3}
    assert check.transform(label, {}) is label and check.transform(7, {}) == 7
    image = torch.rand(3, 4, 5)
    out, target = check(image, 7)
    assert out is image and target == 7
    assert check(PIL.Image.new("RGB", (5, 4))).size == (5, 4)
    with pytest.raises(ValueError, match=r"exported for images of size \(4, 5\), got \(5, 4\)"):
        check(PIL.Image.new("RGB", (4, 5)))


# ---------------------------------------------------------------- training/devices


def test_a_cuda_index_is_checked_against_the_gpus_there_are(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert resolve_device("cuda") == torch.device("cuda")
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    assert resolve_device(torch.device("cuda", 0)) == torch.device("cuda", 0)
    with pytest.raises(ValueError, match=r"device cuda:2 was asked for, but this machine has 2 GPU\(s\)"):
        resolve_device("cuda:2")


def test_another_accelerator_is_taken_where_it_is_available_and_its_index_checked(monkeypatch):
    monkeypatch.setattr(torch.xpu, "is_available", lambda: True)
    monkeypatch.setattr(torch.xpu, "device_count", lambda: 1)
    assert resolve_device("xpu") == torch.device("xpu")
    assert resolve_device("xpu:0") == torch.device("xpu", 0)
    # Before: xpu:1 on a machine with one XPU was taken, to fail later deep in torch.
    with pytest.raises(ValueError, match=r"device xpu:1 was asked for, but this machine has 1 xpu device\(s\)"):
        resolve_device("xpu:1")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    monkeypatch.setattr(torch.mps, "device_count", lambda: 1)
    assert resolve_device("mps") == torch.device("mps")
    with pytest.raises(ValueError, match=r"device mps:1 was asked for, but this machine has 1 mps device\(s\)"):
        resolve_device("mps:1")


# ---------------------------------------------------------------- ops/bad_input


def _stand_in(value: int = 0) -> torch.Tensor:
    """A flag on the CPU standing in for one on a device this machine lacks."""
    return torch.full((1,), value, dtype=torch.int32)


def test_the_flag_of_cuda_without_an_index_is_the_current_devices(monkeypatch):
    held = _stand_in()
    monkeypatch.setattr(bad_input, "_flags", {torch.device("cuda", 1): held})
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    assert bad_input.flag("cuda") is held and bad_input.flag(torch.device("cuda")) is held
    assert bad_input.flag("cuda:1") is held


def _taps():
    x = torch.rand(2, 1, 4, 4)
    src = torch.tensor([[0, 1], [1, 0]])
    affine = torch.eye(2, 3).expand(2, 2, 2, 3).clone()
    weight = torch.full((2, 2), 0.5)
    weight[0, 1] = math.nan
    return x, src, affine, None, weight


def test_the_reference_guard_records_its_flag_except_under_torch_compile(monkeypatch):
    monkeypatch.setattr(bad_input, "_flags", {})
    x, src, affine, color, weight = _taps()
    kept = [t.clone() for t in (src, affine, weight)]
    plain = bad_input.guard_reference(x, src, affine, color, weight)
    assert bad_input._flags[torch.device("cpu")].tolist() == [4]  # the weight's bit
    monkeypatch.setattr(bad_input, "_flags", {})
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    compiled = bad_input.guard_reference(x, src, affine, color, weight)
    assert bad_input._flags == {}  # the flag is a tensor outside the graph: nothing recorded, nothing made
    for a, b in zip(kept, (src, affine, weight), strict=True):  # the inputs are untouched
        torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)
    for a, b in zip(plain, compiled, strict=True):
        assert (a is None and b is None) or torch.equal(a, b)
    assert compiled[4].tolist() == [True, False] and compiled[3].tolist() == [[0.5, 0.0], [0.5, 0.5]]


def test_checking_cuda_reads_the_current_gpus_flag_only(monkeypatch):
    flags = {torch.device("cuda", 0): _stand_in(1), torch.device("cuda", 1): _stand_in(0)}
    monkeypatch.setattr(bad_input, "_flags", flags)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    bad_input.check_bad_input("cuda")  # cuda:1 saw nothing; cuda:0's flag is not cuda's (the current device's)
    flags[torch.device("cuda", 1)].fill_(8)
    with pytest.raises(ValueError, match=r"tap_mix: src indices must lie in \[0, B - 1\] \(seen on cuda:1 since"):
        bad_input.check_bad_input(torch.device("cuda"))
    assert flags[torch.device("cuda", 1)].item() == 0 and flags[torch.device("cuda", 0)].item() == 1
    with pytest.raises(ValueError, match=r"affine contains NaN or infinite values \(seen on cuda:0"):
        bad_input.check_bad_input("cuda:0")


def test_checking_another_kind_of_device_without_an_index_reads_each_of_its_flags(monkeypatch):
    flags = {
        torch.device("xpu", 0): _stand_in(0),
        torch.device("xpu", 1): _stand_in(2 | 4),
        torch.device("cpu"): _stand_in(8),
    }
    monkeypatch.setattr(bad_input, "_flags", flags)
    with pytest.raises(ValueError) as error:
        bad_input.check_bad_input("xpu")
    assert str(error.value) == (
        "tap_mix: color contains NaN or infinite values; weight contains NaN or infinite values "
        "(seen on xpu:1 since the last check; those output rows were NaN)"
    )
    assert [flags[torch.device("xpu", i)].item() for i in (0, 1)] == [0, 0]
    bad_input.check_bad_input("xpu")  # cleared: nothing more to say
    bad_input.check_bad_input("mps")  # a kind with no flags: no device is asked


# ---------------------------------------------------------------- ops/_cpp: cache names and the CUDA toolkit


def test_the_cpu_tag_without_proc_cpuinfo_hashes_the_processor_name(monkeypatch):
    def no_cpuinfo(*args, **kwargs):
        raise PermissionError("no /proc here")

    monkeypatch.setattr(_cpp, "open", no_cpuinfo, raising=False)
    expected = hashlib.sha1((platform.machine() + platform.processor()).encode()).hexdigest()[:8]
    assert _cpp._cpu_tag() == expected


def test_the_source_tag_reads_the_files_of_csrc_not_its_folders(tmp_path, monkeypatch):
    (tmp_path / "tap_mix.cpp").write_text("int f() { return 1; }")
    monkeypatch.setattr(_cpp, "_CSRC", tmp_path)
    first = _cpp._source_tag(["-O3"])
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "object.o").write_bytes(b"\x00\x01")
    assert _cpp._source_tag(["-O3"]) == first
    (tmp_path / "tap_mix.cpp").write_text("int f() { return 2; }")
    assert _cpp._source_tag(["-O3"]) != first


def _toolkit(root, header=True):
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "nvcc").write_text("#!/bin/sh\n")
    if header:
        (root / "include").mkdir()
        (root / "include" / "cuda_runtime.h").write_text("")
    return root


@pytest.fixture
def no_toolkit(tmp_path, monkeypatch):
    """No CUDA toolkit anywhere find_cuda_toolkit looks (the environment, PATH, the default root)."""
    for name in ("CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(_cpp.shutil, "which", lambda name: None)
    monkeypatch.setattr(_cpp, "DEFAULT_CUDA_ROOT", str(tmp_path / "no-cuda-here"))
    return monkeypatch


def test_find_cuda_toolkit_takes_the_first_complete_one(tmp_path, no_toolkit):
    assert _cpp.find_cuda_toolkit() is None
    no_toolkit.setenv("CUDA_HOME", str(_toolkit(tmp_path / "headless", header=False)))
    assert _cpp.find_cuda_toolkit() is None  # nvcc without include/cuda_runtime.h is not a toolkit
    no_toolkit.setenv("CUDA_PATH", str(_toolkit(tmp_path / "cuda-12")))
    assert _cpp.find_cuda_toolkit() == str(tmp_path / "cuda-12")
    no_toolkit.setattr(_cpp, "DEFAULT_CUDA_ROOT", str(_toolkit(tmp_path / "default")))
    no_toolkit.delenv("CUDA_PATH")
    assert _cpp.find_cuda_toolkit() == str(tmp_path / "default")


def test_find_cuda_toolkit_follows_an_nvcc_wrapper_on_path_to_its_toolkit(tmp_path, no_toolkit):
    real = _toolkit(tmp_path / "cuda-13")
    (tmp_path / "wrapper" / "bin").mkdir(parents=True)
    (tmp_path / "wrapper" / "bin" / "nvcc").symlink_to(real / "bin" / "nvcc")
    no_toolkit.setattr(_cpp.shutil, "which", lambda name: str(tmp_path / "wrapper" / "bin" / "nvcc"))
    assert _cpp.find_cuda_toolkit() == str(real)  # the wrapper's parent has no headers: the resolved one


@pytest.mark.parametrize("env", [None, "/opt/elsewhere"])
def test_cuda_toolkit_sets_both_homes_for_the_block_and_restores_them(tmp_path, monkeypatch, env):
    from torch.utils import cpp_extension

    if env is None:
        monkeypatch.delenv("CUDA_HOME", raising=False)
    else:
        monkeypatch.setenv("CUDA_HOME", env)
    monkeypatch.setattr(cpp_extension, "CUDA_HOME", "/torch/found/this")
    monkeypatch.setattr(_cpp, "find_cuda_toolkit", lambda: str(tmp_path))
    with pytest.raises(KeyError), _cpp.cuda_toolkit() as root:
        assert root == str(tmp_path) == cpp_extension.CUDA_HOME == os.environ["CUDA_HOME"]
        raise KeyError("a failed build")
    assert cpp_extension.CUDA_HOME == "/torch/found/this" and os.environ.get("CUDA_HOME") == env
    monkeypatch.setattr(_cpp, "find_cuda_toolkit", lambda: None)
    with _cpp.cuda_toolkit() as root:
        assert root is None and cpp_extension.CUDA_HOME == "/torch/found/this" and os.environ.get("CUDA_HOME") == env
    assert cpp_extension.CUDA_HOME == "/torch/found/this" and os.environ.get("CUDA_HOME") == env


# ---------------------------------------------------------------- ops/_cpp: the prebuilt extension


OURS = "_C" + importlib.machinery.EXTENSION_SUFFIXES[0]  # e.g. _C.cpython-311-x86_64-linux-gnu.so


@pytest.fixture
def package(tmp_path, monkeypatch):
    """An empty package folder for prebuilt extensions, a recorder of the libraries loaded, and no cached build."""
    folder = tmp_path / "augnet"
    folder.mkdir()
    monkeypatch.setattr(_cpp, "_PACKAGE", folder)
    loaded = []
    monkeypatch.setattr(torch.ops, "load_library", lambda path: loaded.append(os.path.basename(path)))
    monkeypatch.setattr(_cpp, "cached_build", lambda name=None: tmp_path / "cache" / f"{name}.so")
    return folder, loaded


def _other_python(ours: str) -> str:
    """The prebuilt name of another CPython version, sorted before this one's."""
    return ours.replace(f"cpython-{sys.version_info[0]}{sys.version_info[1]}", "cpython-30")


def test_the_prebuilt_extension_is_this_pythons_not_another_versions_beside_it(package):
    folder, loaded = package
    other = _other_python(OURS)
    assert other != OURS and sorted([other, OURS])[0] == other
    (folder / other).write_bytes(b"")  # one checkout installed in another environment, another Python
    assert not _cpp._load_prebuilt() and loaded == []  # before: loaded the other Python's build (sorted first)
    assert not _cpp.extension_cached()  # before: True, so no "compiling first" line though a build was coming
    (folder / OURS).write_bytes(b"")
    assert _cpp._load_prebuilt() and loaded == [OURS]
    assert _cpp.extension_cached()


def test_a_prebuilt_extension_without_a_version_tag_loads(package):
    folder, loaded = package
    (folder / "_C.so").write_bytes(b"")
    assert _cpp._load_prebuilt() and loaded == ["_C.so"] and _cpp.extension_cached()


def test_extension_cached_is_false_where_torch_cannot_say(monkeypatch, tmp_path):
    monkeypatch.setattr(_cpp, "_PACKAGE", tmp_path)

    def cannot(name=None):
        raise AttributeError("module 'torch.utils.cpp_extension' has no attribute '_get_build_directory'")

    monkeypatch.setattr(_cpp, "cached_build", cannot)
    assert _cpp.extension_cached() is False


# ---------------------------------------------------------------- ops/_cpp: building (recorded, never run)


@pytest.fixture
def builds(monkeypatch):
    """Records build_and_load's calls (the ones named in ``fail`` raise) and gives _build_now a fresh state."""
    calls, fail = [], set()

    def build_and_load(name, cuda, cxx_flags, build_directory=None):
        calls.append((name, cuda))
        if cuda in fail:
            raise RuntimeError("nvcc broke")

    monkeypatch.setattr(_cpp, "build_and_load", build_and_load)
    monkeypatch.setattr(_cpp, "_state", {"tried": False, "error": None})
    return calls, fail


def test_a_gpu_machine_builds_the_cuda_kernels_alone_when_they_build(monkeypatch, builds):
    calls, _ = builds
    monkeypatch.setattr(_cpp, "_builds_cuda", lambda: True)
    _cpp._build_now()
    assert calls == [(_cpp.extension_name() + "_cuda", True)] and "cuda_error" not in _cpp._state


def test_a_failed_cuda_build_keeps_the_cpu_kernel_and_says_why(monkeypatch, builds):
    calls, fail = builds
    fail.add(True)
    monkeypatch.setattr(_cpp, "_builds_cuda", lambda: True)
    _cpp._build_now()
    name = _cpp.extension_name()
    assert calls == [(name + "_cuda", True), (name, False)]
    assert _cpp._state["cuda_error"] == "RuntimeError: nvcc broke"
    # cuda_hint says it, on a GPU machine where the loaded (CPU) extension has no CUDA kernel.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(_cpp, "load", lambda: True)
    monkeypatch.setattr(_cpp, "_has_kernel", lambda key, op="augnet::tap_mix": key == "CPU")
    assert _cpp.cuda_hint() == "building the CUDA kernel failed (RuntimeError: nvcc broke)"


@pytest.mark.parametrize("seconds, said", [(5.0, True), (0.5, False)])
def test_a_build_that_compiled_says_how_long_it_took(monkeypatch, builds, capsys, seconds, said):
    calls, _ = builds
    monkeypatch.setattr(_cpp, "_builds_cuda", lambda: False)
    monkeypatch.setattr(_cpp, "time", types.SimpleNamespace(perf_counter=iter([100.0, 100.0 + seconds]).__next__))
    _cpp._build_now()
    assert calls == [(_cpp.extension_name(), False)]
    err = capsys.readouterr().err
    assert err == ("augnet: built the tap_mix extension in 5 s (cached for later runs)\n" if said else "")


@pytest.fixture
def cpp_load(monkeypatch, tmp_path):
    """torch's cpp_extension.load, recorded (with the CUDA_HOME it saw), and a csrc/ holding the sources."""
    from torch.utils import cpp_extension

    seen = []
    monkeypatch.setattr(cpp_extension, "load", lambda **kw: seen.append(dict(kw, home=cpp_extension.CUDA_HOME)))
    csrc = tmp_path / "csrc"
    csrc.mkdir()
    (csrc / "tap_mix.cpp").write_text("")
    monkeypatch.setattr(_cpp, "_CSRC", csrc)
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "extensions"))
    return seen, csrc


def test_build_and_load_without_the_sources_says_where_it_looked(monkeypatch, tmp_path, cpp_load):
    seen, _ = cpp_load
    monkeypatch.setattr(_cpp, "_CSRC", tmp_path / "nowhere")
    with pytest.raises(RuntimeError, match=r"the csrc/ sources are not next to this installation \(.*nowhere\)"):
        _cpp.build_and_load("x", cuda=False, cxx_flags=["-O0"], build_directory=str(tmp_path))
    assert seen == []


def test_build_and_load_of_the_cpu_kernels_into_a_folder_given(tmp_path, cpp_load):
    seen, csrc = cpp_load
    _cpp.build_and_load("augnet_x", cuda=False, cxx_flags=["-O1"], build_directory=str(tmp_path))
    (call,) = seen
    assert call["name"] == "augnet_x" and call["sources"] == [str(csrc / "tap_mix.cpp")]
    assert call["build_directory"] == str(tmp_path) and call["extra_cflags"] == ["-O1"]
    assert call["extra_ldflags"] == _cpp.LD_FLAGS and call["is_python_module"] is False
    _cpp.build_and_load("augnet_y", cuda=False, cxx_flags=["-O1"])  # torch's own folder for the name
    assert "build_directory" not in seen[1] and (tmp_path / "extensions" / "augnet_y").is_dir()


def test_build_and_load_of_the_cuda_kernels_needs_a_toolkit_and_builds_with_it(monkeypatch, tmp_path, cpp_load):
    seen, csrc = cpp_load
    monkeypatch.setattr(_cpp, "find_cuda_toolkit", lambda: None)
    with pytest.raises(RuntimeError, match=r"no CUDA toolkit \(nvcc and include/cuda_runtime.h\) found"):
        _cpp.build_and_load("augnet_x_cuda", cuda=True, cxx_flags=["-O1"], build_directory=str(tmp_path))
    assert seen == []
    monkeypatch.setattr(_cpp, "find_cuda_toolkit", lambda: "/opt/cuda-13")
    _cpp.build_and_load("augnet_x_cuda", cuda=True, cxx_flags=["-O1"], build_directory=str(tmp_path))
    (call,) = seen
    assert call["sources"] == [str(csrc / "tap_mix.cpp"), str(csrc / "tap_mix_cuda.cu")]
    assert call["extra_cuda_cflags"] == ["-O3"] and call["home"] == "/opt/cuda-13"


# ---------------------------------------------------------------- ops/_cpp: load() and the hints


@pytest.fixture
def fresh(monkeypatch):
    """load() as on a first use: a fresh state, no registration, and a recorder of the builds it starts."""
    monkeypatch.setattr(_cpp, "_state", {"tried": False, "error": None})
    monkeypatch.setattr(_cpp, "_register_python_side", lambda: None)
    monkeypatch.delenv("AUGNET_NO_BUILD", raising=False)
    built = []
    monkeypatch.setattr(_cpp, "_build_now", lambda: built.append(1))
    return monkeypatch, built


def test_load_takes_a_prebuilt_extension_without_building(fresh):
    monkeypatch, built = fresh
    monkeypatch.setattr(_cpp, "_load_prebuilt", lambda: True)
    assert _cpp.load() and built == [] and _cpp._state == {"tried": True, "error": None}


def test_no_build_forbids_the_build_and_the_hint_says_so(fresh):
    monkeypatch, built = fresh
    monkeypatch.setattr(_cpp, "_load_prebuilt", lambda: False)
    monkeypatch.setenv("AUGNET_NO_BUILD", "1")
    assert not _cpp.load() and built == []
    reason = "RuntimeError: no prebuilt extension and AUGNET_NO_BUILD=1 forbids building it"
    assert _cpp._state["error"] == reason
    assert _cpp.cpp_hint() == f"the compiled extension is not available ({reason}); {_cpp.FIX}"
    with pytest.raises(RuntimeError) as error:
        _cpp.tap_mix_compiled(*_taps(), "zeros")
    assert str(error.value) == f"tap_mix: the compiled extension is not available ({reason}); {_cpp.FIX}"


def test_a_failed_build_is_kept_and_not_retried(fresh):
    monkeypatch, _ = fresh
    monkeypatch.setattr(_cpp, "_load_prebuilt", lambda: False)
    tries = []

    def fails():
        tries.append(1)
        raise OSError("no compiler ")

    monkeypatch.setattr(_cpp, "_build_now", fails)
    assert not _cpp.load() and not _cpp.load()
    assert tries == [1] and _cpp._state["error"] == "OSError: no compiler"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert _cpp.cuda_hint() == f"the compiled extension is not available (OSError: no compiler); {_cpp.FIX}"


def test_load_after_waiting_on_another_threads_load_takes_its_result(fresh):
    monkeypatch, built = fresh
    prebuilt = []
    monkeypatch.setattr(_cpp, "_load_prebuilt", lambda: prebuilt.append(1) or True)

    @contextlib.contextmanager
    def other_thread_finished_first():
        _cpp._state.update(tried=True, error="OSError: the other thread's")
        yield

    monkeypatch.setattr(_cpp, "_lock", other_thread_finished_first())
    assert _cpp.load() is False and prebuilt == [] and built == []
    assert _cpp._state["error"] == "OSError: the other thread's"


@pytest.fixture(scope="module")
def compiled():
    if not _cpp.load():
        pytest.skip(f"the compiled extension is not available here: {_cpp.cpp_hint()}")


def test_registration_happens_once(compiled):
    assert _cpp._state["registered"]
    assert _cpp._register_python_side() is None  # a second register_fake of the op would raise


def test_an_op_the_extension_does_not_define_has_no_kernel(compiled):
    assert _cpp._has_kernel("CPU")
    assert _cpp._has_kernel("CPU", "augnet::no_such_op") is False


@pytest.mark.parametrize(
    "kernels, hint",
    [
        ({"CPU", "CUDA"}, None),
        ({"CPU"}, "the extension was built without its CUDA kernel (build it where a CUDA toolkit is installed)"),
    ],
)
def test_the_cuda_hint_on_a_gpu_machine(monkeypatch, kernels, hint):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(_cpp, "_state", {"tried": True, "error": None})
    monkeypatch.setattr(_cpp, "_has_kernel", lambda key, op="augnet::tap_mix": key in kernels)
    assert _cpp.cuda_hint() == hint
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert _cpp.cuda_hint() == "no CUDA device"


class _SaysCuda(torch.Tensor):
    """A CPU tensor that answers ``is_cuda`` as one on a GPU would (what tap_mix_compiled decides from)."""

    @property
    def is_cuda(self):
        return True


@pytest.mark.parametrize("compiling", [False, True])
def test_a_cuda_input_gives_its_kernels_the_flag_outside_torch_compile(compiled, monkeypatch, compiling):
    seen = []
    monkeypatch.setattr(_cpp, "_register_bad_input_flag", seen.append)
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: compiling)
    x, src, affine, color, weight = _taps()
    weight = weight.nan_to_num(0.25)
    out = _cpp.tap_mix_compiled(x.as_subclass(_SaysCuda), src, affine, color, weight, "zeros")
    assert seen == ([] if compiling else [torch.device("cpu")])
    assert torch.equal(out.as_subclass(torch.Tensor), _cpp.tap_mix_compiled(x, src, affine, color, weight, "zeros"))


FLAG_OP = "augnet::_set_bad_input_flag"


def test_the_flag_is_handed_to_the_kernels_once_per_device_where_they_take_it(monkeypatch):
    monkeypatch.setattr(bad_input, "_flags", {})
    monkeypatch.setattr(_cpp, "_flag_devices", set())
    handed = []
    monkeypatch.setattr(torch.ops.augnet, "_set_bad_input_flag", handed.append, raising=False)
    cpu = torch.device("cpu")  # standing in for a GPU: the flag is made where the device is
    monkeypatch.setattr(_cpp, "_has_kernel", lambda key, op="augnet::tap_mix": False)
    _cpp._register_bad_input_flag(cpu)  # kernels without the flag (a CPU-only build): nothing to hand
    assert handed == [] and _cpp._flag_devices == set()
    monkeypatch.setattr(_cpp, "_has_kernel", lambda key, op="augnet::tap_mix": (key, op) == ("CUDA", FLAG_OP))
    _cpp._register_bad_input_flag(cpu)
    _cpp._register_bad_input_flag(cpu)
    assert len(handed) == 1 and handed[0] is bad_input.flag(cpu) and _cpp._flag_devices == {cpu}
