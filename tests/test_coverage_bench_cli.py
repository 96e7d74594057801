"""The branches of augnet._cli_checks and augnet.bench (harness, machine, eager) the rest of the suite leaves alone.

Nothing here is timed: the benchmark runs use 8-pixel images, one provider, one mode and 1 ms of timing.
"""

import dataclasses
import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import augnet.bench
from augnet._cli_checks import MAX_THREADS, PipeGuard, import_from_here, out_of_memory
from augnet._json import dumps as strict_json
from augnet.bench import (
    BenchConfig,
    eager_augment,
    geometric_layer,
    harness,
    kornia_warp,
    machine,
    machine_info,
    run_benchmark,
)
from augnet.bench.harness import _check_providers, _peak_memory, _quiet_stderr, _saved_tensor_bytes, _sync
from augnet.cli import main
from augnet.layers import AugmentationLayer
from augnet.ops import available_backends, dispatch
from augnet.transforms import image as T

ROOT = Path(__file__).resolve().parents[1]
TINY = dict(sizes=(8,), batch=2, copies=1, min_run_time=0.001, min_runs=1, providers=("reference",), modes=("forward",))


# --------------------------------------------------------------------------- augnet probe's checks


def _probe(tmp_path, *extra):
    return ["probe", "--model", "torch.nn:Flatten", "--transforms", "Rotate", "--out", str(tmp_path / "out"), *extra]


def test_probe_data_of_fewer_than_8_images_and_a_model_of_the_working_directory(tmp_path, monkeypatch, capsys):
    # The model is named from a module of the working directory, which the `augnet` script does not put on
    # sys.path (import_from_here adds it, last); the data are then refused, in one line, before any probing.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "h_cov_local_model.py").write_text("import torch\n\ndef make():\n    return torch.nn.Flatten()\n")
    path = [p for p in sys.path if p not in ("", ".", str(tmp_path))]
    monkeypatch.setattr(sys, "path", list(path))
    monkeypatch.delitem(sys.modules, "h_cov_local_model", raising=False)
    torch.save(torch.rand(5, 3, 8, 8), tmp_path / "five.pt")
    argv = ["probe", "--model", "h_cov_local_model:make", "--data", "five.pt", "--transforms", "Rotate"]
    assert main([*argv, "--out", "out"]) == 2
    assert capsys.readouterr().err == "augnet probe: error: --data five.pt holds 5 images; the probes need at least 8\n"
    assert sys.path[-1] == str(tmp_path) and sys.path[:-1] == path  # added last: no installed package is hidden
    assert not (tmp_path / "out").exists()


def test_import_from_here_adds_the_working_directory_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", ["/nowhere"])
    import_from_here()
    import_from_here()
    assert sys.path == ["/nowhere", str(tmp_path)]
    for entry in ("", "."):  # the working directory already there, as `python -m augnet` puts it
        monkeypatch.setattr(sys, "path", ["/nowhere", entry])
        import_from_here()
        assert sys.path == ["/nowhere", entry]


def test_probe_negative_label_of_a_text_file_is_refused_naming_the_file(tmp_path, capsys):
    torch.save(torch.rand(8, 3, 8, 8), tmp_path / "x.pt")
    (tmp_path / "labels.txt").write_text("0\n1\n-1\n1\n0\n1\n0\n1\n")
    argv = _probe(tmp_path, "--data", str(tmp_path / "x.pt"), "--by-class", str(tmp_path / "labels.txt"))
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err == f"augnet probe: error: --by-class {tmp_path / 'labels.txt'} must hold class labels >= 0, got -1\n"
    assert not (tmp_path / "out").exists()


def test_probe_transform_named_twice_is_refused(tmp_path, capsys):
    argv = _probe(tmp_path, "--fake", "--transforms", "Rotate", "Rotate")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err == "augnet probe: error: --transforms names a transform more than once: Rotate Rotate\n"


# --------------------------------------------------------------------------- out of memory, other errors


@pytest.mark.parametrize("err", [RuntimeError("boom"), RuntimeError(""), ValueError("can't"), KeyError("x")])
def test_out_of_memory_is_none_for_other_errors(err):
    assert out_of_memory(err) is None


def test_out_of_memory_lines():
    cpu = RuntimeError(f"DefaultCPUAllocator: can't allocate memory: you tried to allocate {2**35} bytes. Error 12")
    assert out_of_memory(cpu) == (
        "not enough memory for these settings (32 GiB asked for at once); smaller sizes, batches or counts need less"
    )
    cuda = torch.OutOfMemoryError(
        "CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.06 GiB "
        "is free. Of the allocated memory 77.50 GiB is allocated by PyTorch. If reserved but unallocated memory is "
        "large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation."
    )  # one line, its advice included: the size alone is said
    assert out_of_memory(cuda) == (
        "not enough memory for these settings (20.00 GiB asked for at once); smaller sizes, batches or counts need less"
    )
    assert out_of_memory(MemoryError()) == (
        "not enough memory for these settings (MemoryError); smaller sizes, batches or counts need less"
    )


def test_main_says_an_out_of_memory_in_a_line_and_lets_other_runtime_errors_through(tmp_path, monkeypatch, capsys):
    def run_from_args(args, error):
        raise error

    argv = ["bench", "--quick", "--no-inference", "--out", str(tmp_path)]
    monkeypatch.setattr(augnet.bench, "run_from_args", lambda args: run_from_args(args, RuntimeError("boom")))
    with pytest.raises(RuntimeError, match=r"^boom$"):
        main(argv)
    oom = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 3.50 MiB. GPU 0 has 1 MiB free.")
    monkeypatch.setattr(augnet.bench, "run_from_args", lambda args: run_from_args(args, oom))
    assert main(argv) == 1
    assert capsys.readouterr().err == (
        "augnet bench: error: not enough memory for these settings (3.50 MiB asked for at once); smaller sizes, "
        "batches or counts need less\n"
    )


# --------------------------------------------------------------------------- PipeGuard


def _broken_pipe(buffering: int):
    read, write = os.pipe()
    os.close(read)  # the reader has gone: a write gets EPIPE (Python ignores SIGPIPE)
    return os.fdopen(write, "w", buffering=buffering)


def _is_devnull(fd: int) -> bool:
    here, null = os.fstat(fd), os.stat(os.devnull)
    return (here.st_dev, here.st_ino, here.st_rdev) == (null.st_dev, null.st_ino, null.st_rdev)


def test_pipe_guard_write_to_a_gone_reader_is_dropped():
    stream = _broken_pipe(buffering=1)  # line-buffered: the write itself meets the broken pipe
    try:
        guard = PipeGuard(stream)
        with pytest.raises(BrokenPipeError):
            stream.write("unguarded\n")
        assert guard.write("hello\n") == len("hello\n")
        assert _is_devnull(stream.fileno())  # what follows, and the buffer at exit, go nowhere: no error
        assert guard.write("more\n") == len("more\n")
        guard.flush()
        assert guard.fileno() == stream.fileno() and guard.encoding == stream.encoding  # the rest: the stream's
    finally:
        stream.close()


def test_pipe_guard_flush_to_a_gone_reader_is_dropped():
    stream = _broken_pipe(buffering=-1)  # block-buffered: the flush meets the broken pipe
    try:
        guard = PipeGuard(stream)
        assert guard.write("held in the buffer\n") == len("held in the buffer\n")
        assert not _is_devnull(stream.fileno())
        guard.flush()
        assert _is_devnull(stream.fileno())
        guard.flush()
    finally:
        stream.close()


def test_pipe_guard_of_no_stream_drops_what_is_written(capsys):
    guard = PipeGuard(None)  # Python's sys.stderr when descriptor 2 was closed at start
    assert guard.write("lost") == 4
    guard.flush()
    print("also lost", file=guard, flush=True)
    assert capsys.readouterr() == ("", "")


def test_bench_runs_to_its_end_with_stdout_and_stderr_closed(tmp_path):
    # `augnet bench ... >&- 2>&-` (a cron job, a daemon): Python's sys.stdout / sys.stderr are None; the command
    # used to end in an AttributeError (exit status 120, no word said) at the first print or profiled call.
    out = tmp_path / "results"
    args = ["bench", "--quick", "--sizes", "8", "--providers", "reference", "--batch-size", "2", "--copies", "1",
            "--min-time", "0.001", "--no-inference", "--out", str(out)]  # fmt: skip
    script = 'exec "$0" -m augnet "$@" >&- 2>&-'
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(["sh", "-c", script, sys.executable, *args], cwd=tmp_path, env=env, timeout=300)
    assert proc.returncode == 0
    records = json.loads((out / "tap_mix_cpu_quick.json").read_text())["records"]
    assert [(r["provider"], r["size"], r["mode"]) for r in records] == [
        ("reference", 8, mode) for mode in harness.MODES
    ]
    assert all(r["memory_method"] == "profiler allocation events" for r in records)


# --------------------------------------------------------------------------- BenchConfig.validate


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(sizes=()), "sizes must be positive integers, got []"),
        (dict(sizes=np.array([8, 0])), "sizes must be positive integers, got [8, 0]"),
        (dict(batch=0), "batch must be >= 1, got 0"),
        (dict(copies=np.int64(0)), "copies must be >= 1, got 0"),
        (dict(channels=-1), "channels must be >= 1, got -1"),
        (dict(min_runs=0), "min_runs must be >= 1, got 0"),
        (dict(threads=0), f"threads must be >= 1 and at most {MAX_THREADS}, got 0"),
        (dict(threads=2**31 - 1), f"threads must be >= 1 and at most {MAX_THREADS}, got 2147483647"),
        (dict(modes=("fwd",)), f"modes must be among {harness.MODES}, got ['fwd']"),
        (dict(modes=[]), f"modes must be among {harness.MODES}, got []"),
        (
            dict(providers=()),
            "providers must name at least one provider (None: eager and every usable backend), got []",
        ),
        (dict(device="mps"), "device must be 'cpu' or 'cuda', got 'mps'"),
        (dict(device="cuda:0"), "device must be 'cpu' or 'cuda', got 'cuda:0'"),
        (dict(init_magnitude=torch.tensor(1.5)), "init_magnitude must lie in [0, 1], got 1.5"),
    ],
)
def test_validate_refuses_settings_that_cannot_run(overrides, message):
    cfg = BenchConfig.quick(**overrides)
    before = repr(cfg)
    with pytest.raises(ValueError) as info:
        cfg.validate()
    assert str(info.value) == message
    assert repr(cfg) == before  # nothing changed in place


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(sizes=torch.tensor([8.0])), "sizes must be integers, got [8.0]"),
        (dict(device=None), "device must be 'cpu' or 'cuda', got NoneType: None"),
        (dict(device=0), "device must be 'cpu' or 'cuda', got int: 0"),
        (dict(batch=torch.tensor(2.0)), "batch must be an int, got float: 2.0"),
        (dict(min_run_time="1"), "min_run_time must be a number, got '1'"),
    ],
)
def test_validate_refuses_settings_of_the_wrong_type(overrides, message):
    with pytest.raises(TypeError) as info:
        BenchConfig.quick(**overrides).validate()
    assert str(info.value) == message


def test_validate_refuses_cuda_without_a_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for device in ("cuda", torch.device("cuda")):
        with pytest.raises(ValueError, match=r"^device 'cuda' asked for, but torch sees no CUDA device here$"):
            BenchConfig.quick(device=device).validate()


def test_run_takes_numpy_scalars_and_tensors_and_records_python_numbers():
    cfg = BenchConfig(
        sizes=torch.tensor([8, 8]),
        providers=["reference"],
        modes=["forward"],
        batch=np.int64(2),
        copies=torch.tensor(1),
        channels=np.int8(1),
        min_run_time=np.float32(0.001),
        min_runs=np.int16(1),
        seed=np.uint64(5),
        threads=np.int64(1),
        init_magnitude=torch.tensor(0.25),
        device=torch.device("cpu"),
    )
    before = repr(cfg)
    threads = torch.get_num_threads()
    result = run_benchmark(cfg, log=None)
    assert repr(cfg) == before and torch.get_num_threads() == threads
    assert result["config"] == {
        "sizes": [8], "batch": 2, "copies": 1, "channels": 1, "modes": ["forward"], "device": "cpu", "threads": 1,
        "providers": ["reference"], "min_run_time": float(np.float32(0.001)), "min_runs": 1, "init_magnitude": 0.25,
        "seed": 5,
    }  # fmt: skip
    assert all(type(v) in (int, float, str, list) for v in result["config"].values())
    assert json.loads(strict_json(result))["config"] == result["config"]  # JSON-ready, as save_results writes it
    [record] = result["records"]
    assert (record["provider"], record["size"], record["max_abs_diff_vs_reference"]) == ("reference", 8, 0.0)
    assert record["images_per_s"] == 2 * 1 / (record["median_ms"] / 1e3)


def test_run_with_a_plain_config_gives_the_same_draws_as_with_numpy_numbers(monkeypatch):
    # The seed read from a NumPy integer seeds the same images and check draw: the layers' outputs agree.
    seen = []
    original = harness.geometric_layer

    def recording(*args, **kwargs):
        layer = original(*args, **kwargs)
        layer.register_forward_hook(lambda module, inputs, output: seen.append(output.detach().clone()))
        return layer

    monkeypatch.setattr(harness, "geometric_layer", recording)
    run_benchmark(BenchConfig.quick(**TINY, seed=7), log=None)
    plain = seen[0]
    seen.clear()
    run_benchmark(BenchConfig.quick(**TINY, seed=np.int64(7)), log=None)
    assert torch.equal(seen[0], plain)


# --------------------------------------------------------------------------- providers


def _unusable_backend():
    usable = available_backends(torch.zeros(1, 1, 1, 1))
    names = [b for b in sorted(dispatch._BACKENDS) if b not in usable]
    if not names:
        pytest.skip("every tap_mix backend runs here")
    return names[0], usable


def test_unknown_provider_of_the_api_is_named():
    with pytest.raises(ValueError) as info:
        run_benchmark(BenchConfig.quick(**{**TINY, "providers": ("reference", "nope")}), log=None)
    assert str(info.value) == (f"unknown providers ['nope']: 'eager' or a tap_mix backend {sorted(dispatch._BACKENDS)}")


def test_provider_that_cannot_run_here_lists_the_usable_ones(monkeypatch, tmp_path, capsys):
    name, usable = _unusable_backend()
    x = torch.zeros(1, 1, 1, 1)
    with pytest.raises(ValueError) as info:
        _check_providers(["reference", name], x)
    assert str(info.value) == f"providers ['{name}'] cannot run on cpu here; usable: {sorted([*usable, 'eager'])}"
    monkeypatch.setattr(harness, "_has_kornia", lambda: False)  # no kornia: eager is not said to be usable
    with pytest.raises(ValueError) as info:
        _check_providers([name], x)
    assert str(info.value) == f"providers ['{name}'] cannot run on cpu here; usable: {sorted(usable)}"
    assert main(["bench", "--quick", "--providers", name, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    said = ", ".join(sorted(usable))
    assert err == f"augnet bench: error: --providers {name} cannot run on cpu here; usable: {said}\n"
    assert not list(tmp_path.iterdir())


# --------------------------------------------------------------------------- syncing and peak memory


def test_sync_waits_for_any_cuda_device_and_for_no_other(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append(device))
    for device in ("cpu", torch.device("cpu"), "meta"):
        _sync(device)
    assert calls == []
    for device in ("cuda", "cuda:1", torch.device("cuda", 0)):
        _sync(device)
    assert calls == ["cuda", "cuda:1", torch.device("cuda", 0)]  # the device named, not the current one


def test_cuda_peak_memory_is_the_peak_above_what_was_allocated_before(monkeypatch):
    events, state = [], {"allocated": 1000, "peak": 1000}

    def fn():
        events.append("fn")
        state["peak"] = 5096  # 4096 bytes more at the peak of the call
        return "out"

    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: events.append("sync"))
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda: events.append("reset"))
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda: events.append("before") or state["allocated"])
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda: events.append("peak") or state["peak"])
    assert _peak_memory(fn, "cuda") == (4096, "cuda.max_memory_allocated")
    assert events == ["sync", "reset", "before", "fn", "sync", "peak"]  # the call's queued work waited for


class _ProfilerWithoutEvents:
    """A ``torch.profiler.profile`` whose memory events cannot be read (an older or other torch)."""

    def __init__(self, *args, **kwargs):
        self.profiler = object()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_cpu_peak_bytes_raises_when_the_events_cannot_be_read(monkeypatch):
    with pytest.raises(RuntimeError, match=r"^the profiler recorded no CPU memory events$"):
        augnet.bench.cpu_peak_bytes(lambda: None)  # nothing allocated: no event to replay
    monkeypatch.setattr(torch.profiler, "profile", _ProfilerWithoutEvents)
    with pytest.raises(RuntimeError, match=r"^the profiler's memory events are not readable in this torch version"):
        augnet.bench.cpu_peak_bytes(lambda: torch.ones(3))


def test_saved_tensor_bytes_counts_saved_storages_and_the_outputs():
    w = torch.ones(100, requires_grad=True)
    assert _saved_tensor_bytes(lambda: torch.ones(3)) == 12  # the output alone
    assert _saved_tensor_bytes(lambda: (torch.ones(3), None)) == 12  # e.g. an unused input's gradient: None
    assert _saved_tensor_bytes(lambda: torch.exp(w).sum()) == 400 + 4  # exp saves its result; the 0-d sum
    assert _saved_tensor_bytes(lambda: torch.autograd.grad(torch.exp(w).sum(), [w])) == 400 + 400  # a tuple out


def test_run_without_profiler_events_or_load_average_falls_back(monkeypatch):
    monkeypatch.setattr(torch.profiler, "profile", _ProfilerWithoutEvents)

    def no_loadavg():
        raise OSError("not on this platform")

    monkeypatch.setattr(os, "getloadavg", no_loadavg)
    result = run_benchmark(BenchConfig.quick(**{**TINY, "modes": ("forward", "forward+backward")}), log=None)
    assert result["load_average"] == {"before": None, "after": None}
    forward, backward = result["records"]
    assert {r["memory_method"] for r in result["records"]} == {"saved tensors + output (lower bound)"}
    out_bytes = 2 * 1 * 3 * 8 * 8 * 4  # B * C rows of 3 x 8 x 8 float32: the output is counted at least
    assert forward["peak_bytes"] >= out_bytes and forward["peak_mib"] == forward["peak_bytes"] / 2**20
    params = sum(p.numel() * p.element_size() for p in geometric_layer().parameters())
    assert backward["peak_bytes"] >= params  # the gradients of the layer's parameters, its output


def test_quiet_stderr_without_a_descriptor_2_or_a_sys_stderr(monkeypatch):
    dup2 = []
    monkeypatch.setattr(harness.os, "dup2", lambda *args: dup2.append(args))

    def no_fd(fd):
        raise OSError(9, "Bad file descriptor")

    monkeypatch.setattr(harness.os, "dup", no_fd)
    monkeypatch.setattr(sys, "stderr", None)  # Python's, when descriptor 2 was closed at start
    ran = []
    with _quiet_stderr():
        ran.append(True)
    assert ran == [True] and dup2 == []  # the block ran; nothing to silence, nothing redirected


# --------------------------------------------------------------------------- machine


def test_machine_info_where_the_platform_tells_less(monkeypatch):
    class NoFile:
        def __init__(self, path):
            self.path = path

        def read_text(self):
            raise PermissionError(13, "Permission denied", self.path)

    def no_capability():
        raise RuntimeError("not in this build")

    real_version = importlib.metadata.version

    def version(package):
        if package == "kornia":
            raise importlib.metadata.PackageNotFoundError(package)
        return real_version(package)

    monkeypatch.setattr(machine, "Path", NoFile)
    monkeypatch.setattr(machine.platform, "processor", lambda: "")
    monkeypatch.setattr(machine.platform, "machine", lambda: "h_cov_arch")
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", no_capability)
    monkeypatch.delattr(os, "sched_getaffinity")
    monkeypatch.setattr(importlib.metadata, "version", version)
    info = machine_info()
    assert info["cpu_model"] == info["device_name"] == "h_cov_arch"
    assert info["cpu_capability"] is None
    assert info["cpus_usable"] == os.cpu_count()
    assert info["kornia_version"] is None and info["numpy_version"] == np.__version__
    monkeypatch.setattr(machine.platform, "processor", lambda: "h_cov_cpu")
    assert machine_info()["cpu_model"] == "h_cov_cpu"
    monkeypatch.setattr(NoFile, "read_text", lambda self: "processor\t: 0\nBogoMIPS\t: 50.00\n")  # an Arm's: no model
    assert machine._cpu_model() == "h_cov_cpu"
    monkeypatch.setattr(NoFile, "read_text", lambda self: "processor\t: 0\nmodel name\t: H Cov CPU @ 1GHz\n")
    assert machine._cpu_model() == "H Cov CPU @ 1GHz"

    def older_torch():
        raise AttributeError("module 'torch.backends.cpu' has no attribute 'get_cpu_capability'")

    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", older_torch)
    assert machine.cpu_capability() is None


def test_machine_info_names_the_gpu_of_any_cuda_device(monkeypatch):
    asked = []
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: asked.append(device) or f"GPU {device}")
    assert machine_info("cuda")["device_name"] == "GPU cuda"
    assert machine_info("cuda:1")["device_name"] == "GPU cuda:1"  # not the CPU model
    info = machine_info(torch.device("cuda", 0))
    assert info["device_name"] == "GPU cuda:0" and info["device"] == "cuda:0"  # JSON-ready
    assert machine_info(torch.device("cpu"))["device"] == "cpu"
    assert asked == ["cuda", "cuda:1", torch.device("cuda", 0)]


def test_machine_info_refuses_what_is_not_a_device():
    with pytest.raises(ValueError, match=r"^device must be a device, e.g. 'cpu' or 'cuda:0', got 'gpu' \("):
        machine_info("gpu")
    with pytest.raises(TypeError, match=r"^device must be a device, e.g. 'cpu' or 'cuda:0', got None \("):
        machine_info(None)


def test_loadavg_is_none_where_the_platform_has_none(monkeypatch):
    monkeypatch.setattr(os, "getloadavg", lambda: (0.123, 1.0, 2.555))
    assert machine._loadavg() == [0.12, 1.0, 2.56]

    def missing():
        raise OSError("no load average")

    monkeypatch.setattr(os, "getloadavg", missing)
    assert machine._loadavg() is None


# --------------------------------------------------------------------------- the eager path


def _images(dtype=torch.float32):
    return torch.rand(2, 3, 8, 8, generator=torch.Generator().manual_seed(0)).to(dtype)


def test_eager_path_without_kornia_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "kornia.geometry.transform", None)  # an import of it fails
    params = T.Rotate().sample(_images(), torch.tensor(0.5), generator=torch.Generator().manual_seed(0))
    with pytest.raises(ImportError, match=r'needs kornia: pip install "augnet\[bench\]"'):
        kornia_warp(T.Rotate(), _images(), params)


def test_eager_path_refuses_other_transforms_before_any_warp(monkeypatch):
    warps = []
    monkeypatch.setattr(augnet.bench.eager, "kornia_warp", lambda *args: warps.append(args))
    layer = AugmentationLayer([T.Rotate(), T.Brightness(), T.Scale()])
    with pytest.raises(TypeError) as info:
        eager_augment(layer, _images())
    assert str(info.value) == (
        "layer: the eager path covers TranslateX, TranslateY, Rotate, ShearX and ShearY only, got Brightness, Scale"
    )
    assert warps == []  # refused before the Rotate warp, not after it
    monkeypatch.undo()
    with pytest.raises(TypeError) as info:
        kornia_warp(T.Brightness(), _images(), {"factor": torch.ones(2)})
    assert str(info.value) == (
        "transform: the eager path covers TranslateX, TranslateY, Rotate, ShearX and ShearY only, got Brightness"
    )


@pytest.mark.parametrize(
    "copies, kind, message",
    [
        (0, ValueError, "copies must be >= 1, got 0"),
        (-1, ValueError, "copies must be >= 1, got -1"),
        (2.0, TypeError, "copies"),
        (True, TypeError, "copies"),
    ],
)
def test_eager_path_refuses_bad_copies(copies, kind, message):
    with pytest.raises(kind, match=message):
        eager_augment(geometric_layer(), _images(), copies)


def test_eager_path_refuses_images_the_layer_refuses():
    layer = geometric_layer()
    with pytest.raises(ValueError, match=r"expected a 4-D input"):
        eager_augment(layer, _images()[0], 2)
    with pytest.raises(TypeError, match=r"floating-point"):
        eager_augment(layer, (_images() * 255).to(torch.uint8), 2)
    with pytest.raises(TypeError, match=r"generator must be a torch.Generator or None, got int"):
        eager_augment(layer, _images(), 2, generator=0)


def _draw():
    return torch.Generator().manual_seed(3)


def test_eager_path_takes_numpy_and_tensor_counts_and_half_images():
    layer, x = geometric_layer(), _images()
    expected = eager_augment(layer, x, 2, _draw())
    assert expected.shape == (4, 3, 8, 8)
    for copies in (np.int64(2), torch.tensor(2)):
        assert torch.equal(eager_augment(layer, x, copies, _draw()), expected)
    for dtype in (torch.float16, torch.bfloat16):  # warped in float32, as the layer does, then rounded
        low = x.to(dtype)
        out = eager_augment(layer, low, 2, _draw())
        assert out.dtype == dtype
        assert torch.equal(out, eager_augment(layer, low.float(), 2, _draw()).to(dtype))
    double = eager_augment(layer, x.double(), 2, _draw())
    assert double.dtype == torch.float64 and torch.allclose(double.float(), expected, atol=1e-5)


def test_bench_config_defaults_are_the_full_run():
    # Left as they were: the plain copy of the defaults is the defaults.
    cfg = BenchConfig()
    assert cfg._plain() == cfg
    assert dataclasses.asdict(BenchConfig.quick()._plain()) == dataclasses.asdict(BenchConfig.quick())
