"""A leading ``~`` in every path a user gives augnet's Python API is the home folder, as a shell reads it.

``Policy.save`` and the probe reports and figures read it so; ``Comparison.save`` / ``load`` and
``PolicyLogger(log_dir)`` made a folder named ``~`` in the working directory instead.
"""

import math

import pytest
import torch

from augnet import AugmentationLayer, AugNet, param_groups
from augnet.experiments import Comparison
from augnet.training import PolicyLogger, fit
from augnet.transforms import image as T


def test_user_path_reads_a_tilde_as_the_home_folder(home):
    from augnet._checks import user_path

    assert user_path("~/a/b.json") == home[0] / "a" / "b.json"
    assert user_path("a/~b") == user_path("a/~b").relative_to(".")  # only a leading ~
    for bad in (None, 3, b"x.json"):
        with pytest.raises(TypeError, match="run_dir must be a str or a path-like object"):
            user_path(bad, "run_dir")


def test_comparison_save_and_load_under_the_home_folder(home):
    result = Comparison([{"method": "none", "seed": 0, "accuracy": 0.5, "invariance": math.nan}])
    written = result.save("~/results/comparison.json")
    assert written == home[0] / "results" / "comparison.json" and written.is_file()
    assert not (home[1] / "~").exists()
    assert Comparison.load("~/results/comparison.json").records[0]["accuracy"] == 0.5


def test_policy_logger_log_dir_under_the_home_folder(home):
    layer = AugmentationLayer([T.Rotate(), T.TranslateX()])
    model = AugNet(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 8 * 8, 2)), layer)
    x, y = torch.rand(8, 3, 8, 8, generator=torch.Generator().manual_seed(0)), torch.arange(8) % 2
    optimizer = torch.optim.Adam(param_groups(model))
    fit(model, x, y, optimizer, epochs=1, batch_size=4, callbacks=PolicyLogger("~/runs/a", csv=True))
    assert (home[0] / "runs" / "a" / "policy.csv").is_file()
    assert not (home[1] / "~").exists()


def test_the_command_line_reads_a_tilde_the_shell_left_as_the_home_folder(home):
    # `--out=~/p` (or a quoted "~/p"): bash leaves the ~; probe wrote probe.json under the home folder, then
    # failed with a traceback writing verdict.txt under ./~/p; --data=~/d.pt was "not a file"
    from augnet.cli import main

    g = torch.Generator().manual_seed(0)
    torch.save((torch.rand(8, 3, 16, 16, generator=g), torch.arange(8) % 4), home[0] / "d.pt")
    argv = ["probe", "--model", "torchvision.models:resnet18", "--model-args", '{"num_classes": 4}',
            "--data=~/d.pt", "--transforms", "Rotate", "--magnitudes", "0.5", "--no-lie", "--layers", "logits",
            "--out=~/p", "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    assert {p.name for p in (home[0] / "p").iterdir()} >= {"probe.json", "verdict.txt"}
    assert not (home[1] / "~").exists()


def test_reproduce_reads_out_under_the_home_folder_before_any_work(home, monkeypatch):
    from augnet.experiments import _registry, reproduce

    seen = {}

    def fake(out_dir, **kw):  # the experiment itself: only where it is told to write
        seen["out_dir"] = out_dir
        raise KeyboardInterrupt

    monkeypatch.setitem(_registry._REGISTRY, "sinusoids", fake)
    with pytest.raises(KeyboardInterrupt):
        reproduce("sinusoids", quick=True, out="~/results", progress=False)
    assert seen["out_dir"] == home[0] / "results" / "sinusoids"
    assert not (home[1] / "~").exists()
