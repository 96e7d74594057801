"""What a new user meets: the README's code runs as written, the metadata tells the truth."""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import augnet

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
PYPROJECT = (ROOT / "pyproject.toml").read_text()

#: Torch APIs augnet may call, and the torch release that introduced each.
TORCH_API_SINCE = {
    "torch.library.register_fake": (2, 4),
    "torch.library.register_autograd": (2, 4),
    "torch.library.custom_op": (2, 4),
    "torch.library.opcheck": (2, 4),
    "torch.amp.custom_fwd": (2, 4),
    "torch.amp.custom_bwd": (2, 4),
    "torch.get_autocast_dtype": (2, 4),
    "torch.compiler.is_compiling": (2, 3),
    "torch.nn.attention": (2, 2),
    "torch.compiler.assume_constant_result": (2, 1),
    "torch.compiler.disable": (2, 1),
}


def section(title: str) -> str:
    """A section of the README or of a guide page (docs/guide/), up to the next heading of its level or above."""
    for path in [ROOT / "README.md", *sorted((ROOT / "docs" / "guide").glob("*.md"))]:
        text = path.read_text()
        heading = re.search(rf"^(#+) {re.escape(title)}\s*$", text, re.M)
        if heading:
            level, lines, fenced = len(heading.group(1)), [heading.group(0)], False
            for line in text[heading.end() :].splitlines()[1:]:
                fenced ^= line.lstrip().startswith("```")
                if not fenced and re.match(rf"#{{1,{level}}} ", line):
                    break  # the next heading of this level or above, outside a code block
                lines.append(line)
            return "\n".join(lines)
    raise AssertionError(f"no section {title!r} in README.md or docs/guide/")


def python_block(text: str) -> str:
    match = re.search(r"```python\n(.*?)```", text, re.S)
    assert match, "no ```python block"
    return match.group(1)


def test_readme_usage_snippet_runs_as_written():
    code = python_block(section("Use it on your own model"))
    namespace: dict = {}
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        exec(compile(code, "README.md (Use it on your own model)", "exec"), namespace)
    model = namespace["model"]
    assert isinstance(model, augnet.AugNet)
    assert torch.isfinite(namespace["loss"]).all()
    layer = model.augment.layers[0]
    # The snippet trains: the augmentation parameters moved away from their initial values.
    assert not torch.allclose(layer.magnitudes.detach(), torch.full_like(layer.magnitudes, 0.1))
    printed = stdout.getvalue()
    for name in ("TranslateX", "Rotate", "ShearY"):
        assert name in printed


def run_readme_section(title: str, tmp_path) -> tuple[dict, str]:
    """Run the first python block of a README section in ``tmp_path``; its namespace and what it printed."""
    code = python_block(section(title))
    namespace: dict = {}
    stdout = io.StringIO()
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        with contextlib.redirect_stdout(stdout):
            exec(compile(code, f"README.md ({title})", "exec"), namespace)
    finally:
        os.chdir(cwd)
    return namespace, stdout.getvalue()


def test_readme_data_loader_snippet_runs_as_written(tmp_path):
    namespace, printed = run_readme_section("Train on your own data set", tmp_path)
    assert isinstance(namespace["model"], augnet.AugNet) and len(namespace["history"]["step"]) >= 2
    assert (tmp_path / "runs" / "mine" / "policy.csv").exists()
    assert "Rotate" in printed


def test_readme_policy_export_snippet_runs_as_written(tmp_path):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the shear exports approximately, with a warning
        namespace, printed = run_readme_section("Use the learned policy elsewhere", tmp_path)
    assert "torch.Size([3, 32, 32]) torch.Size([8, 3, 32, 32])" in printed
    assert namespace["again"].policy().to_json() == namespace["module"].policy().to_json()


def test_quickstart_is_two_commands_install_then_run():
    block = re.search(r"## Quickstart.*?```bash\n(.*?)```", README, re.S).group(1)
    commands = [line for line in block.splitlines() if line.strip()]
    assert len(commands) == 2
    assert commands[0].startswith("pip install") and commands[0].endswith("augnet demo")
    assert commands[1].startswith("pip install") and commands[1].endswith("python -m pytest")
    ci = (ROOT / ".ci" / "run").read_text()
    for command in commands:
        assert command in ci, f".ci/run does not run the README command {command!r}"


def test_readme_names_no_file_missing_from_the_repository():
    for name in re.findall(r"\b([A-Z]+\.md)\b", README):
        assert (ROOT / name).exists() or list(ROOT.glob(f"*/{name}")), f"README mentions {name}, not in the repository"


def declared_torch_floor() -> tuple[int, int]:
    match = re.search(r'"torch>=(\d+)\.(\d+)', PYPROJECT)
    assert match, "pyproject.toml declares no torch floor"
    return int(match.group(1)), int(match.group(2))


def test_torch_floor_is_not_below_the_apis_the_code_calls():
    floor = declared_torch_floor()
    sources = {p: p.read_text() for p in (ROOT / "augnet").rglob("*.py")}
    used = {api: since for api, since in TORCH_API_SINCE.items() if any(api in text for text in sources.values())}
    assert used, "the scan found no versioned torch API: the table or the scan is broken"
    too_new = {api: since for api, since in used.items() if since > floor}
    assert not too_new, f"pyproject's torch>={floor} is below what the code calls: {too_new}"


def test_installed_torch_meets_the_floor():
    installed = tuple(int(v) for v in re.match(r"(\d+)\.(\d+)", torch.__version__).groups())
    assert installed >= declared_torch_floor()


def test_runtime_dependencies_are_only_what_the_core_imports():
    deps = re.search(r"^dependencies = \[(.*?)\]", PYPROJECT, re.S | re.M).group(1)
    names = {re.match(r"[A-Za-z0-9_.-]+", d.strip().strip('"')).group(0) for d in deps.split(",") if d.strip()}
    assert names == {"torch", "einops", "tqdm"}
    # Importing augnet and running a layer loads none of the optional packages.
    code = (
        "import sys, torch, augnet\n"
        "from augnet.transforms import image as T, audio as A, signal as S\n"
        "augnet.AugNet(torch.nn.Flatten(), augnet.AugmentationLayer([T.Rotate()]))(torch.rand(2, 1, 8, 8))\n"
        "A.LowPass(8000)(torch.randn(2, 1, 64), 0.5)\n"
        "optional = ('kornia', 'matplotlib', 'torchaudio', 'scipy', 'ninja', 'torchvision', 'tensorboard')\n"
        "bad = [m for m in optional if m in sys.modules]\n"
        "print('optional modules loaded:', bad)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    env = {**os.environ, "AUGNET_BACKEND": "reference"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_license_and_typing_marker_ship():
    assert (ROOT / "LICENSE").read_text().startswith("BSD 3-Clause License")
    assert 'license-files = ["LICENSE"]' in PYPROJECT
    assert (ROOT / "augnet" / "py.typed").exists() and '"py.typed"' in PYPROJECT


def test_version_flag(capsys):
    from augnet.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"augnet {augnet.__version__}"


def test_the_slow_set_runs_in_one_process_and_the_rest_in_xdists_workers():
    from types import SimpleNamespace

    from conftest import pytest_xdist_auto_num_workers as workers

    def config(markexpr):
        return SimpleNamespace(option=SimpleNamespace(markexpr=markexpr))

    assert workers(config("slow")) == 0 and workers(config(" slow ")) == 0  # 0: pytest-xdist starts no worker
    assert workers(config("not slow")) is None and workers(config("")) is None  # None: pytest-xdist's own count
    addopts = re.search(r'^addopts = "(.*)"$', (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    assert "-n auto" in addopts and "--dist loadfile" in addopts  # the hook decides only under -n auto


def test_an_xdist_worker_computes_on_one_thread_and_its_child_processes_too(monkeypatch):
    from types import SimpleNamespace

    from conftest import pytest_configure

    threads = torch.get_num_threads()
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    try:
        monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
        torch.set_num_threads(2)
        pytest_configure(SimpleNamespace())  # not a worker (-n 0, or the slow set): nothing changes
        assert torch.get_num_threads() == 2 and os.environ["OMP_NUM_THREADS"] == "2"
        monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
        pytest_configure(SimpleNamespace())
        assert torch.get_num_threads() == 1 and os.environ["OMP_NUM_THREADS"] == "1"
    finally:
        torch.set_num_threads(threads)
