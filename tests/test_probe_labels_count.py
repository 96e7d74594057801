"""augnet probe --n N --by-class FILE: the file's labels are counted against all of --data's images (or --fake's),
before --n keeps some; they were thinned first, so a file of another count passed and its labels were paired
with other images (a silently wrong per-class report)."""

from __future__ import annotations

import pytest
import torch
from helpers import probe_model_file

from augnet.cli import main
from augnet.probes import ProbeReport


def _run(tmp_path, monkeypatch, capsys, source, labels, n):
    argv = probe_model_file(tmp_path, monkeypatch, "labels_count_net")
    at = argv.index("--fake")
    argv[at : at + 5] = [*source, "--n", str(n), "--size", "8"]
    code = main([*argv, "--by-class", str(labels), "--out", str(tmp_path / "out")])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("n", [16, 10])
def test_a_labels_file_of_another_count_than_the_data_is_refused_under_n(tmp_path, monkeypatch, capsys, n):
    torch.save(torch.rand(64, 3, 8, 8), tmp_path / "x.pt")
    torch.save(torch.arange(32) % 4, tmp_path / "y32.pt")
    code, err = _run(tmp_path, monkeypatch, capsys, ["--data", str(tmp_path / "x.pt")], tmp_path / "y32.pt", n)
    assert code == 2
    assert f"holds 32 labels for 64 images (--n {n} keeps {n} of them)" in err


def test_fake_images_take_exactly_n_labels(tmp_path, monkeypatch, capsys):
    torch.save(torch.arange(64) % 4, tmp_path / "y64.pt")
    code, err = _run(tmp_path, monkeypatch, capsys, ["--fake"], tmp_path / "y64.pt", 16)
    assert code == 2 and "holds 64 labels for 16 images" in err


def test_a_labels_file_of_the_data_s_count_is_thinned_with_the_images(tmp_path, monkeypatch, capsys):
    """The kept labels are the kept images' own: the same report as the kept rows saved with their labels."""
    g = torch.Generator().manual_seed(0)
    x, y = torch.rand(64, 3, 8, 8, generator=g), torch.arange(64) // 16  # class by class: --n keeps each
    torch.save(x, tmp_path / "x.pt")
    torch.save(y, tmp_path / "y.pt")
    code, err = _run(tmp_path, monkeypatch, capsys, ["--data", str(tmp_path / "x.pt")], tmp_path / "y.pt", 16)
    assert code == 0, err
    thinned = ProbeReport.load(tmp_path / "out" / "probe.json")
    keep = [i * 64 // 16 for i in range(16)]
    torch.save(x[keep], tmp_path / "xk.pt")
    torch.save(y[keep], tmp_path / "yk.pt")
    argv = probe_model_file(tmp_path, monkeypatch, "labels_count_net")
    at = argv.index("--fake")
    argv[at : at + 5] = ["--data", str(tmp_path / "xk.pt"), "--size", "8"]
    assert main([*argv, "--by-class", str(tmp_path / "yk.pt"), "--out", str(tmp_path / "out2")]) == 0
    direct = ProbeReport.load(tmp_path / "out2" / "probe.json")
    assert thinned.classes() == direct.classes() == [0, 1, 2, 3]
    assert [repr(r["value"]) for r in thinned.records] == [repr(r["value"]) for r in direct.records]


def test_a_folder_s_labels_file_is_counted_against_every_image_file(tmp_path, monkeypatch, capsys):
    from PIL import Image

    folder = tmp_path / "imgs"
    folder.mkdir()
    for i in range(12):
        Image.new("RGB", (8, 8), (i * 20, 0, 0)).save(folder / f"{i:02d}.png")
    (tmp_path / "y8.txt").write_text("\n".join(str(i % 2) for i in range(8)))
    code, err = _run(tmp_path, monkeypatch, capsys, ["--data", str(folder)], tmp_path / "y8.txt", 8)
    assert code == 2 and "holds 8 labels for 12 images (--n 8 keeps 8 of them)" in err
    (tmp_path / "y12.txt").write_text("\n".join(str(i % 2) for i in range(12)))
    code, err = _run(tmp_path, monkeypatch, capsys, ["--data", str(folder)], tmp_path / "y12.txt", 8)
    assert code == 0, err
