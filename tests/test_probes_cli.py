"""augnet probe: a model by import path, a weights file, data from a tensor file or a folder, errors before work."""

import json
import math

import pytest
import torch
from helpers import gen

from augnet import probes
from augnet.cli import main
from augnet.probes.report import MEASURES
from augnet.transforms import image as T

torchvision = pytest.importorskip("torchvision")

RESNET = ["--model", "torchvision.models:resnet18", "--model-args", '{"num_classes": 4}']


def test_probe_on_fake_images_writes_the_table_the_heatmap_and_a_verdict(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    argv = ["probe", *RESNET, "--fake", "--n", "16", "--size", "16", "--transforms", "Rotate", "HorizontalFlip"]
    assert main([*argv, "--magnitudes", "0.5", "1", "--out", str(tmp_path), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "Rotate at mu = 1" in out and "HorizontalFlip at mu = 1" in out
    data = json.loads((tmp_path / "probe.json").read_text())
    assert data["info"]["layers"] == ["layer1", "layer2", "layer3", "layer4", "logits"]
    assert data["info"]["transforms"] == ["Rotate", "HorizontalFlip"] and data["info"]["n_inputs"] == 16
    assert data["info"]["command"].startswith("augnet probe --model torchvision.models:resnet18")
    assert {r["measure"] for r in data["records"]} == set(MEASURES)
    assert (tmp_path / "probe.csv").read_text().startswith("layer,transform,magnitude")
    assert (tmp_path / "heatmap.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Rotate at mu = 1" in (tmp_path / "verdict.txt").read_text()


def test_probe_reads_a_weights_file_and_a_tensor_file(tmp_path, capsys):
    torch.manual_seed(3)
    model = torchvision.models.resnet18(weights=None, num_classes=4).eval()
    torch.save(model.state_dict(), tmp_path / "w.pt")
    x = torch.rand(12, 3, 16, 16, generator=gen(1))
    torch.save({"x": (x * 255).round().to(torch.uint8), "y": torch.arange(12)}, tmp_path / "data.pt")
    argv = ["probe", *RESNET, "--weights", str(tmp_path / "w.pt"), "--data", str(tmp_path / "data.pt")]
    argv += ["--transforms", "Brightness", "--layers", "layer4", "logits", "--magnitudes", "1", "--no-lie"]
    assert main([*argv, "--out", str(tmp_path / "out"), "--no-progress"]) == 0
    records = json.loads((tmp_path / "out" / "probe.json").read_text())["records"]
    got = {(r["layer"], r["measure"]): math.nan if r["value"] is None else r["value"] for r in records}  # JSON null
    # The same as the report on that model and those images, read as uint8 / 255.
    ref = probes.report(model, (x * 255).round() / 255, [T.Brightness()], ["layer4", "logits"], [1.0], lie=False)
    for r in ref.records:
        assert got[(r["layer"], r["measure"])] == pytest.approx(r["value"], rel=1e-5, abs=1e-7, nan_ok=True)


def test_probe_reads_an_image_folder(tmp_path):
    image_module = pytest.importorskip("PIL.Image")
    for label in ("cats", "dogs"):
        (tmp_path / "data" / label).mkdir(parents=True)
        for i in range(5):
            pixels = (torch.rand(20, 24, 3, generator=gen(i + 10 * len(label))) * 255).to(torch.uint8)
            image_module.fromarray(pixels.numpy()).save(tmp_path / "data" / label / f"{i}.png")
    from augnet.probes.inputs import load_images

    x = load_images(tmp_path / "data")
    assert x.shape == (10, 3, 20, 24) and float(x.min()) >= 0 and float(x.max()) <= 1
    assert load_images(tmp_path / "data", size=16).shape == (10, 3, 16, 16)
    argv = ["probe", *RESNET, "--data", str(tmp_path / "data"), "--size", "16", "--transforms", "Rotate"]
    assert main([*argv, "--magnitudes", "1", "--no-lie", "--out", str(tmp_path / "out"), "--no-progress"]) == 0
    assert json.loads((tmp_path / "out" / "probe.json").read_text())["info"]["input_shape"] == [3, 16, 16]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--model", "torchvision.models", "--fake", "--transforms", "Rotate"], "package.module:name"),
        (["--model", "torchvision.models:nope", "--fake", "--transforms", "Rotate"], "has no 'nope'"),
        (["--model", "no_such_package_xyz:net", "--fake", "--transforms", "Rotate"], "cannot import"),
        ([*RESNET, "--fake", "--transforms", "Rotate", "Spin"], "--transforms Spin"),
        ([*RESNET, "--fake", "--transforms", "GEOMETRIC"], "--transforms GEOMETRIC"),
        ([*RESNET, "--fake", "--transforms", "Rotate", "--magnitudes", "0", "1"], "--magnitudes must lie in"),
        ([*RESNET, "--fake", "--transforms", "Rotate", "--n", "4"], "--n must be >= 8"),
        ([*RESNET, "--fake", "--transforms", "Hue", "--channels", "1"], "RGB"),
        ([*RESNET, "--fake", "--transforms", "Rotate", "--layers", "layer9"], "unknown layer"),
        ([*RESNET, "--fake", "--size", "8", "--transforms", "Rotate", "--channels", "1"], "(1, 8, 8) images"),
        ([*RESNET, "--fake", "--transforms", "Rotate", "--channels", "1", "--layers", "layer1"], "(1, 64, 64) images"),
        ([*RESNET, "--fake", "--transforms", "Rotate", "--seed", "-1"], "--seed must be in [0, 2**63 - 3], got -1"),
        ([*RESNET, "--data", "/no/such/file.pt", "--transforms", "Rotate"], "does not exist"),
        ([*RESNET, "--fake", "--transforms", "Rotate", "--weights", "/no/such.pt"], "is not a file"),
        ([*RESNET, "--fake", "--transforms", "Rotate", "--transformations", "x"],
         "--transformations must be one of random, grid, got 'x'"),
        ([*RESNET, "--fake", "--transforms", "Rotate", "--aggregation", "mean"],
         "--aggregation must be one of pool, positions, got 'mean'"),
        (["--model", "torchvision.models:resnet18", "--model-args", "[1]", "--fake", "--transforms", "Rotate"], "JSON"),
        (["--model", "torchvision.models:resnet18", "--model-args", '{"depth": 3}', "--fake", "--transforms", "Rotate"],
         "cannot build"),
    ],
)  # fmt: skip
def test_bad_arguments_are_one_line_on_stderr_and_exit_2(tmp_path, capsys, extra, message):
    assert main(["probe", *extra, "--out", str(tmp_path / "out"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("augnet probe: error:") and message in err and err.count("\n") == 1
    assert not (tmp_path / "out" / "probe.json").exists()


def test_weights_that_do_not_fit_and_files_that_are_not_tensors(tmp_path, capsys):
    torch.save(torchvision.models.resnet18(weights=None, num_classes=7).state_dict(), tmp_path / "w7.pt")
    argv = ["probe", *RESNET, "--fake", "--transforms", "Rotate", "--out", str(tmp_path / "out")]
    assert main([*argv, "--weights", str(tmp_path / "w7.pt")]) == 2
    assert "do not fit" in capsys.readouterr().err
    (tmp_path / "x.pt").write_text("not a tensor file")
    argv = ["probe", *RESNET, "--data", str(tmp_path / "x.pt"), "--transforms", "Rotate", "--out", str(tmp_path / "o")]
    assert main(argv) == 2
    assert "cannot read --data" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["probe", *RESNET, "--transforms", "Rotate"])  # neither --data nor --fake


def test_a_model_without_weights_is_built_from_the_seed(tmp_path):
    # Without --weights the model starts from torch's random initialisation, drawn from an unseeded global
    # generator: two runs of one command gave Rotate's invariance -0.224 and -0.001. --seed now covers it.
    argv = ["probe", *RESNET, "--fake", "--n", "12", "--size", "16", "--transforms", "Rotate", "--magnitudes", "1"]
    argv += ["--no-lie", "--no-progress"]
    values = []
    for run, seed in enumerate((0, 0, 1)):
        torch.manual_seed(100 + run)  # whatever state the process is in
        assert main([*argv, "--seed", str(seed), "--out", str(tmp_path / str(run))]) == 0
        records = json.loads((tmp_path / str(run) / "probe.json").read_text())["records"]
        values.append([r["value"] for r in records])
    assert values[0] == values[1] and values[0] != values[2]


def test_probe_checks_a_model_that_needs_two_rows_with_two(tmp_path, monkeypatch, capsys):
    # A batch norm without running statistics refuses a batch of one: the CLI's checking pass runs two images.
    (tmp_path / "two_rows_net.py").write_text(
        "from torch import nn\n\n\n"
        "def make():\n"
        "    return nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(3, 4),\n"
        "                         nn.BatchNorm1d(4, track_running_stats=False), nn.Linear(4, 3))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    argv = ["probe", "--model", "two_rows_net:make", "--fake", "--n", "16", "--size", "8", "--transforms", "Rotate"]
    assert main([*argv, "--layers", "logits", "--no-lie", "--out", str(tmp_path / "out"), "--no-progress"]) == 0
    assert "Rotate at mu = 1" in capsys.readouterr().out


TINY = ["probe", "--model", "test_probes_cli_units:TinyNet", "--fake", "--n", "12", "--size", "8", "--transforms",
        "Rotate", "--magnitudes", "1", "--no-lie", "--no-progress", "--layers", "1", "logits"]  # fmt: skip


@pytest.mark.parametrize("name", ["probe.json", "probe.csv", "verdict.txt", "heatmap.png", "probe.units.json",
                                  "units.png"])  # fmt: skip
def test_an_output_file_that_is_a_directory_is_refused_before_any_work(tmp_path, capsys, name):
    (tmp_path / "out" / name).mkdir(parents=True)
    assert main([*TINY, "--per-unit", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err == f"augnet probe: error: --out {tmp_path / 'out'}: {tmp_path / 'out' / name} is an existing " \
                  "directory where the results go\n"  # fmt: skip
    assert [p.name for p in (tmp_path / "out").iterdir()] == [name]


def test_a_run_without_per_unit_removes_an_earlier_runs_unit_files(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "out"
    assert main([*TINY, "--per-unit", "--out", str(out)]) == 0
    assert (out / "probe.units.json").is_file() and (out / "units.png").is_file()
    assert main([*TINY, "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["heatmap.png", "probe.csv", "probe.json", "verdict.txt"]
