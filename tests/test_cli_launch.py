"""The ``augnet`` command's entry point: a Ctrl-C while torch imports is one line, not the import's traceback."""

import importlib.metadata
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Runs the entry point with an import of torch that a Ctrl-C stops (what pressing it in those seconds does).
INTERRUPTED_IMPORT = textwrap.dedent(
    """
    import sys
    for name in [m for m in sys.modules if m == "augnet" or m.startswith(("augnet.", "torch"))]:
        del sys.modules[name]

    class CtrlC:
        def find_spec(self, name, path=None, target=None):
            if name == "torch":
                raise KeyboardInterrupt
            return None

    sys.meta_path.insert(0, CtrlC())
    import _augnet_launch
    _augnet_launch.run()
    """
)


def test_the_installed_command_runs_the_launcher():
    scripts = [e for e in importlib.metadata.entry_points(group="console_scripts") if e.name == "augnet"]
    assert [e.value for e in scripts] == ["_augnet_launch:run"]


def test_a_ctrl_c_during_the_import_is_one_line_and_ends_as_sigint():
    done = subprocess.run([sys.executable, "-c", INTERRUPTED_IMPORT], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)  # fmt: skip
    assert done.stderr == "\naugnet: interrupted\n"
    assert done.returncode == (-signal.SIGINT if os.name == "posix" else 0xC000013A)  # as augnet.cli.run ends one


def test_other_errors_of_the_import_keep_their_traceback():
    code = INTERRUPTED_IMPORT.replace("raise KeyboardInterrupt", "raise ImportError('no torch here')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 1 and "Traceback" in done.stderr and "ImportError: no torch here" in done.stderr


def test_the_launcher_runs_the_command_line():
    done = subprocess.run([sys.executable, "-c", "import sys, _augnet_launch; sys.argv = ['augnet', '--version'];"
                           " _augnet_launch.run()"], capture_output=True, text=True, cwd=ROOT, timeout=120)  # fmt: skip
    assert done.returncode == 0 and done.stdout.startswith("augnet ")


@pytest.mark.skipif(os.name != "posix" or shutil.which("augnet") is None, reason="needs the installed command")
def test_a_real_sigint_early_in_the_command_prints_no_traceback():
    def default_sigint():  # a child of a background job inherits SIGINT ignored, and nothing would be tested
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    proc = subprocess.Popen([shutil.which("augnet"), "--version"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=default_sigint)  # fmt: skip
    time.sleep(0.5)  # torch is still importing (seconds); if not, the command's own handler answers alike
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert "Traceback" not in err
