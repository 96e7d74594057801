"""Items a previous closing note left open: a float64 layer's policy file, a figure path ending in a dot, and the
worker processes of ``run_versus`` outliving a killed parent."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch

import augnet
from augnet import AugmentationLayer, AugmentationModule
from augnet.policy import Policy, check_policy
from augnet.transforms import image as T


def _float64_module() -> AugmentationModule:
    torch.manual_seed(0)
    module = AugmentationModule([AugmentationLayer([T.Rotate(), T.ShearX(), T.Brightness()])]).double()
    with torch.no_grad():  # values float32 cannot hold, as training in float64 gives
        for p in module.parameters():
            p.add_(torch.randn_like(p) * 0.37)
    return module


def _with_dtype(data: dict, dtype: str) -> dict:
    data = json.loads(json.dumps(data))
    for layer in data["layers"]:
        layer["dtype"] = dtype
    return data


# ----------------------------------------------------------------------------- (a) a float64 layer's policy


def test_policy_with_float64_dtype_rebuilds_the_exact_float64_state(tmp_path):
    module = _float64_module()
    data = _with_dtype(module.policy().to_json(), "float64")
    again = AugmentationModule.from_policy(data)
    for (name, want), (_, got) in zip(module.named_parameters(), again.named_parameters(), strict=True):
        assert got.dtype == torch.float64, name
        assert torch.equal(got, want), name  # it was float32, ~4e-8 off after .double()
    Policy.from_json(data).save(tmp_path / "p.json")  # written and read back with the key
    loaded = AugmentationModule.from_policy(tmp_path / "p.json")
    assert torch.equal(loaded.layers[0].weight_logits, module.layers[0].weight_logits)
    x = torch.rand(2, 3, 8, 8, dtype=torch.float64)
    ys = [m(x, generator=torch.Generator().manual_seed(1)) for m in (module, again)]
    assert torch.equal(ys[0], ys[1])


def _without_dtype(data: dict) -> dict:  # a file written before the key
    data = json.loads(json.dumps(data))
    for layer in data["layers"]:
        layer.pop("dtype", None)
    return data


def test_policy_without_dtype_is_float32_as_before():
    module = _float64_module()
    plain = AugmentationModule.from_policy(_without_dtype(module.policy().to_json()))
    named = AugmentationModule.from_policy(_with_dtype(module.policy().to_json(), "float32"))
    for a, b in zip(plain.parameters(), named.parameters(), strict=True):
        assert a.dtype == b.dtype == torch.float32 and torch.equal(a, b)


@pytest.mark.parametrize(("dtype", "error"), [("float65", ValueError), ("double", ValueError), (64, TypeError)])
def test_policy_dtype_bad_value_is_named(dtype, error):
    data = _with_dtype(_float64_module().policy().to_json(), "float64")
    data["layers"][0]["dtype"] = dtype
    with pytest.raises(error, match=r"policy layer 0: dtype must be one of .*got " + repr(dtype)):
        Policy.from_json(data)


def test_policy_dtype_half_rebuilds_half():
    module = AugmentationModule([AugmentationLayer([T.Rotate(), T.Brightness()])]).half()
    policy = Policy.from_json(_with_dtype(module.policy().to_json(), "float16"))
    (layer,) = check_policy(policy)
    assert layer.weight_logits.dtype == torch.float16
    assert torch.equal(layer.raw_magnitudes, module.layers[0].raw_magnitudes)


# ----------------------------------------------------------------------------- (c) a figure path ending in a dot


@pytest.mark.parametrize("name", ["fig.", "fig.v2."])
def test_figure_path_ending_in_a_dot_is_refused_naming_it(tmp_path, name):
    pytest.importorskip("matplotlib")
    from augnet.viz import figure_path, plot_layer_importance

    with pytest.raises(ValueError, match=r"ends in a dot"):
        figure_path(tmp_path / name)
    with pytest.raises(ValueError, match=rf"{name.replace('.', '[.]')} ends in a dot"):
        plot_layer_importance({"a": 1.0}, tmp_path / name)
    assert not list(tmp_path.iterdir())  # nothing written ("fig..png" was)
    assert figure_path(tmp_path / "fig") == tmp_path / "fig.png"  # no suffix: .png, as before


def test_probe_figure_path_ending_in_a_dot_is_refused(tmp_path):
    pytest.importorskip("matplotlib")
    from augnet.probes.plots import plot_report_units

    with pytest.raises(ValueError, match=r"ends in a dot"):
        plot_report_units({"Rotate": {"layer0": [0.5, 0.6]}}, tmp_path / "units.", ylabel="y")
    assert not list(tmp_path.iterdir())


# ----------------------------------------------------------------------------- (e) workers of a killed parent


@pytest.mark.skipif(not hasattr(os, "getppid") or sys.platform == "win32", reason="POSIX parents and SIGKILL")
def test_idle_worker_of_an_experiment_pool_ends_itself_when_its_parent_is_killed(tmp_path):
    # An experiment's pool (WorkerPool, as run_versus and the selection table use it) whose parent is SIGKILLed:
    # its worker, idle after its job, waited for jobs forever.
    (tmp_path / "watched.py").write_text(
        textwrap.dedent(f"""
        import os
        def job():
            from augnet.experiments import _registry
            _registry._watching[0].join(0)  # the watcher the pool's initializer started
            with open({str(tmp_path / "ready")!r}, 'w') as f:
                f.write(str(os.getpid()))
    """)
    )
    (tmp_path / "middle.py").write_text(
        textwrap.dedent("""
        import time
        import watched
        from augnet.experiments._registry import WorkerPool
        if __name__ == "__main__":
            pool = WorkerPool(1)
            pool.submit(watched.job).result()
            print("done", flush=True)
            time.sleep(120)
    """)
    )
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join([str(tmp_path), os.path.dirname(os.path.dirname(augnet.__file__))]),
    }
    middle = subprocess.Popen(
        [sys.executable, str(tmp_path / "middle.py")], stdout=subprocess.PIPE, env=env, cwd=tmp_path, text=True
    )
    child = None
    try:
        assert middle.stdout.readline().strip() == "done", "the pool's job did not run"
        child = int((tmp_path / "ready").read_text())
        assert _alive(child)
        middle.send_signal(signal.SIGKILL)
        middle.wait()
        deadline = time.monotonic() + 20
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(child), "the idle worker outlived its killed parent"
    finally:
        for pid in (middle.pid, child):
            with contextlib.suppress(ProcessLookupError, PermissionError, TypeError):
                os.kill(pid, signal.SIGKILL)
        middle.stdout.close()
        if middle.poll() is None:
            middle.wait()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return "\nState:\tZ" not in f.read()
    except FileNotFoundError:
        return False


def test_watch_parent_does_nothing_in_the_main_process():
    from augnet.experiments import _registry

    _registry._watch_parent()
    assert _registry._watching == []


def test_a_float64_module_policy_round_trips_exactly_through_a_file(tmp_path):
    # The writing side: a float64 layer's policy names its dtype, so save -> load -> from_policy gives the same
    # float64 state and the same output (it came back float32, ~4e-8 off after .double()).
    from augnet import AugmentationLayer, AugmentationModule
    from augnet.policy import Policy
    from augnet.transforms import image as T

    module = AugmentationModule([AugmentationLayer([T.Rotate(), T.TranslateX()])]).double()
    layer = next(m for m in module.modules() if isinstance(m, AugmentationLayer))
    with torch.no_grad():
        layer.raw_magnitudes.copy_(torch.tensor([0.123456789012345, 0.7], dtype=torch.float64))
        layer.weight_logits.copy_(torch.tensor([0.31415926535897, -0.1], dtype=torch.float64))
    module.policy().save(tmp_path / "p.json")
    again = AugmentationModule.from_policy(Policy.load(tmp_path / "p.json"))
    rebuilt = next(m for m in again.modules() if isinstance(m, AugmentationLayer))
    assert rebuilt.raw_magnitudes.dtype == torch.float64
    assert torch.equal(rebuilt.raw_magnitudes, layer.raw_magnitudes)
    assert torch.equal(rebuilt.weight_logits, layer.weight_logits)
    x = torch.rand(3, 3, 8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    out = module(x, generator=torch.Generator().manual_seed(1))
    assert torch.equal(again(x, generator=torch.Generator().manual_seed(1)), out)
    # A float32 module's file is as before: no dtype key.
    assert "dtype" not in AugmentationModule([AugmentationLayer([T.Rotate()])]).policy().settings[0]
