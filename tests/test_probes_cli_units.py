"""augnet probe's per-unit, per-class, grid and aggregation options."""

import json
import math

import pytest
import torch
from helpers import gen
from torch import nn

from augnet import probes
from augnet.cli import main
from augnet.probes.inputs import fake_images, load_labels


class TinyNet(nn.Sequential):
    """A small convolutional model the command line can import as ``test_probes_cli_units:TinyNet``."""

    def __init__(self):
        torch.manual_seed(0)
        super().__init__(
            nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 2)
        )


MODEL = ["--model", "test_probes_cli_units:TinyNet"]
FAST = ["--magnitudes", "1", "--no-lie", "--no-progress", "--layers", "1", "logits"]


def test_every_new_option_reaches_the_report(tmp_path, capsys):
    labels = [0, 1] * 6
    (tmp_path / "labels.txt").write_text("\n".join(map(str, labels)) + "\n")
    argv = ["probe", *MODEL, "--fake", "--n", "12", "--size", "8", "--transforms", "Rotate", "HorizontalFlip", *FAST]
    argv += ["--per-unit", "--by-class", str(tmp_path / "labels.txt"), "--transformations", "grid"]
    argv += ["--grid-points", "3", "--aggregation", "positions", "--out", str(tmp_path / "out")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "Rotate by class at logits" in out and "HorizontalFlip by class at logits" in out
    data = json.loads((tmp_path / "out" / "probe.json").read_text())
    info = data["info"]
    assert (info["transformations"], info["aggregation"], info["classes"]) == ("grid", "positions", [0, 1])
    assert info["grid"]["Rotate"]["1.0"] == pytest.approx([-math.pi, 0.0, math.pi])
    units = json.loads((tmp_path / "out" / "probe.units.json").read_text())["units"]
    if (tmp_path / "out" / "heatmap.png").exists():  # with matplotlib
        assert (tmp_path / "out" / "units.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert {(u["class"], len(u["values"])) for u in units if u["layer"] == "1"} == {(None, 4), (0, 4), (1, 4)}
    # The same numbers as the report's, on the same images and options.
    x = fake_images(12, 8, 3, 0)
    rep = probes.report(
        TinyNet().eval(), x, ["Rotate", "HorizontalFlip"], ["1", "logits"], [1.0], lie=False, per_unit=True,
        by_class=torch.tensor(labels), transformations="grid", grid_points=3, aggregation="positions",
    )  # fmt: skip
    got = {(r["layer"], r["transform"], r["measure"], r["class"]): r["value"] for r in data["records"]}
    for r in rep.records:
        value = got[(r["layer"], r["transform"], r["measure"], r["class"])]
        assert (math.nan if value is None else value) == pytest.approx(r["value"], rel=1e-6, abs=1e-9, nan_ok=True)


def test_by_class_data_reads_the_labels_of_the_data(tmp_path):
    x = torch.rand(10, 3, 8, 8, generator=gen(1))
    y = torch.tensor([0, 0, 1, 1, 2, 2, 0, 1, 2, 0])
    torch.save({"x": x, "y": y}, tmp_path / "data.pt")
    assert torch.equal(load_labels("data", tmp_path / "data.pt"), y)
    argv = ["probe", *MODEL, "--data", str(tmp_path / "data.pt"), "--transforms", "Brightness", *FAST]
    assert main([*argv, "--by-class", "data", "--out", str(tmp_path / "out")]) == 0
    assert json.loads((tmp_path / "out" / "probe.json").read_text())["info"]["classes"] == [0, 1, 2]
    assert not (tmp_path / "out" / "probe.units.json").exists()


def test_labels_of_an_image_folder_follow_its_subfolders(tmp_path):
    image_module = pytest.importorskip("PIL.Image")
    for label in ("b", "a"):
        (tmp_path / label).mkdir()
        for i in range(2):
            pixels = (torch.rand(8, 8, 3, generator=gen(i)) * 255).to(torch.uint8)
            image_module.fromarray(pixels.numpy()).save(tmp_path / label / f"{i}.png")
    assert load_labels("data", tmp_path).tolist() == [0, 0, 1, 1]
    (tmp_path / "l.csv").write_text("3\n1\n2\n")
    assert load_labels(tmp_path / "l.csv", limit=2).tolist() == [3, 1]


def test_n_spreads_the_images_it_keeps_over_the_data_so_every_class_stays(tmp_path):
    # --n 8 of 15 images stored class by class (5 per class): the first 8 would hold 2 classes; spread evenly
    # (the i-th kept is image floor(i * 15 / 8)), the images and their labels keep all 3, in a folder and a file.
    from augnet.probes.inputs import load_images, spread

    assert spread(15, 8) == [0, 1, 3, 5, 7, 9, 11, 13] and spread(15, 15) is None and spread(15, None) is None
    image_module = pytest.importorskip("PIL.Image")
    pixels = (torch.rand(15, 8, 8, 3, generator=gen(2)) * 255).to(torch.uint8)
    for i in range(15):
        folder = tmp_path / "data" / "abc"[i // 5]
        folder.mkdir(parents=True, exist_ok=True)
        image_module.fromarray(pixels[i].numpy()).save(folder / f"{i % 5}.png")
    keep = spread(15, 8)
    every = load_images(tmp_path / "data")
    assert torch.equal(load_images(tmp_path / "data", limit=8), every[keep])
    assert load_labels("data", tmp_path / "data", limit=8).tolist() == [0, 0, 0, 1, 1, 1, 2, 2]
    x, y = torch.rand(15, 3, 8, 8, generator=gen(3)), torch.arange(15) // 5
    torch.save({"x": x, "y": y}, tmp_path / "data.pt")
    assert torch.equal(load_images(tmp_path / "data.pt", limit=8), x[keep])
    assert torch.equal(load_labels("data", tmp_path / "data.pt", limit=8), y[keep])
    (tmp_path / "y.txt").write_text("\n".join(map(str, y.tolist())))
    assert torch.equal(load_labels(tmp_path / "y.txt", limit=8), y[keep])
    argv = ["probe", *MODEL, "--data", str(tmp_path / "data"), "--n", "8", "--transforms", "Brightness", *FAST]
    assert main([*argv, "--by-class", "data", "--out", str(tmp_path / "out")]) == 0
    assert json.loads((tmp_path / "out" / "probe.json").read_text())["info"]["classes"] == [0, 1, 2]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--fake", "--by-class", "/no/such/labels.txt"], "neither 'data' nor a file"),
        (["--fake", "--by-class", "data"], "labels file"),
        (["--fake", "--grid-points", "1"], "--grid-points must be >= 2"),
        (["--fake", "--n", "8", "--by-class", "LABELS"], "holds 3 labels for 8 images"),
        (["--fake", "--transformations", "grid", "--transforms", "Solarize"], "no grid"),
    ],
)
def test_bad_options_are_one_line_on_stderr_and_exit_2(tmp_path, capsys, extra, message):
    (tmp_path / "labels.txt").write_text("0\n1\n0\n")
    extra = [str(tmp_path / "labels.txt") if e == "LABELS" else e for e in extra]
    transforms = [] if "--transforms" in extra else ["--transforms", "Rotate"]
    argv = ["probe", *MODEL, *transforms, *extra, "--size", "8", "--out", str(tmp_path / "out"), "--no-progress"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("augnet probe: error:") and message in err and err.count("\n") == 1


def test_unknown_choices_are_refused_in_one_line(capsys):
    for name, value in (("--aggregation", "mean"), ("--transformations", "all")):
        assert main(["probe", *MODEL, "--fake", "--transforms", "Rotate", name, value]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"augnet probe: error: {name}") and err.count("\n") == 1


def test_a_data_dict_without_images_names_its_keys(tmp_path):
    from augnet.probes.inputs import load_images

    torch.save({"imgs": torch.rand(8, 3, 8, 8), "y": torch.zeros(8)}, tmp_path / "d.pt")
    with pytest.raises(ValueError, match=r"holds a dict without an 'x' or 'images' entry \(its keys: 'imgs', 'y'\)"):
        load_images(tmp_path / "d.pt")
