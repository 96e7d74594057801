"""augnet used from several threads and processes at once (a data pipeline, a service): the registry of tap_mix
backends, the process-wide settings the C++ backend's build changes for a while, and a fork while another thread
loads the extension."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from augnet.ops import _cpp, dispatch

ROOT = Path(_cpp.__file__).resolve().parents[2]  # the checkout whose augnet this test imported


def _overlap(block) -> None:
    """Run two ``block()`` context managers in two threads, overlapping: A enters, B enters, A leaves, B leaves."""
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    errors = []

    def first():
        try:
            with block():
                a_in.set()
                assert b_in.wait(10)
        except BaseException as err:  # reported below
            errors.append(err)
        finally:
            a_in.set()
            a_out.set()

    def second():
        try:
            assert a_in.wait(10)
            with block():
                b_in.set()
                assert a_out.wait(10)
        except BaseException as err:
            errors.append(err)
        finally:
            b_in.set()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors


def test_available_backends_while_another_thread_registers_one(monkeypatch):
    # A backend's hint can take a minute (the first build of the C++ backend); a backend registered meanwhile by
    # another thread broke the listing with "dictionary changed size during iteration".
    monkeypatch.setattr(dispatch, "_BACKENDS", dict(dispatch._BACKENDS))
    entered, go = threading.Event(), threading.Event()

    def slow_hint():
        entered.set()
        assert go.wait(10)
        return None

    dispatch.register_backend("slow_probe", dispatch.tap_mix_reference, lambda x: True, slow_hint)
    got, errors = [], []

    def listing():
        try:
            got.append(dispatch.available_backends())
        except BaseException as err:
            errors.append(err)

    thread = threading.Thread(target=listing)
    thread.start()
    assert entered.wait(10)
    dispatch.register_backend("late_probe", dispatch.tap_mix_reference, lambda x: True)
    go.set()
    thread.join(30)
    assert not errors, errors
    assert "reference" in got[0] and "slow_probe" in got[0]
    assert "late_probe" in dispatch.available_backends()


def test_quiet_log_in_two_threads_restores_the_level():
    logger = logging.getLogger("torch.utils.cpp_extension")
    before = logger.level
    logger.setLevel(logging.INFO)
    try:
        _overlap(_cpp.quiet_cpp_extension_log)
        # the thread that came in second saved ERROR and, leaving last, restored it for good
        assert logger.level == logging.INFO
        with _cpp.quiet_cpp_extension_log(), _cpp.quiet_cpp_extension_log():  # nested in one thread, as before
            assert logger.level == logging.ERROR
        assert logger.level == logging.INFO
    finally:
        logger.setLevel(before)


def test_cuda_toolkit_in_two_threads_restores_cuda_home(monkeypatch, tmp_path):
    from torch.utils import cpp_extension

    monkeypatch.setattr(_cpp, "find_cuda_toolkit", lambda: str(tmp_path))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    module_value = cpp_extension.CUDA_HOME
    seen = []

    def block():
        ctx = _cpp.cuda_toolkit()

        class Wrapped:
            def __enter__(self):
                seen.append(ctx.__enter__())
                return seen[-1]

            def __exit__(self, *exc):
                return ctx.__exit__(*exc)

        return Wrapped()

    _overlap(block)
    assert seen == [str(tmp_path)] * 2
    assert "CUDA_HOME" not in os.environ
    assert module_value == cpp_extension.CUDA_HOME


FORK_WHILE_LOADING = """
import os, sys, threading, time
from augnet.ops import _cpp

entered, go = threading.Event(), threading.Event()

def slow_prebuilt():  # another thread loading (or building) the extension, holding augnet's lock
    entered.set()
    go.wait(60)
    return False

_cpp._load_prebuilt = slow_prebuilt
os.environ["AUGNET_NO_BUILD"] = "1"
loader = threading.Thread(target=_cpp.load)
loader.start()
assert entered.wait(30)
pid = os.fork()
if pid == 0:  # a DataLoader worker, a multiprocessing pool's process
    _cpp._load_prebuilt = lambda: False
    ok = _cpp.load()
    os._exit(0 if not ok and "AUGNET_NO_BUILD" in _cpp._state["error"] else 3)
deadline = time.monotonic() + 20
status = None
while time.monotonic() < deadline:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        break
    time.sleep(0.05)
else:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    status = None
    print("the forked child hung on augnet's lock")
go.set()
loader.join()
sys.exit(0 if status == 0 else 1)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_fork_while_another_thread_loads_the_extension():
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", textwrap.dedent(FORK_WHILE_LOADING)],
        capture_output=True, text=True, timeout=120, env=env, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
