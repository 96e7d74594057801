"""Probe inputs a user keeps as NumPy ``.npz`` archives, layer names and transform names for the Lie
derivative as ``report`` takes them, and a probe report's suffix in either case."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import probe_model_file
from torch import nn

from augnet.cli import main
from augnet.probes import ProbeReport, lie_derivative, report
from augnet.probes.inputs import load_images, load_labels
from augnet.probes.lie import transform_derivative
from augnet.transforms import image as T

NET = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 8 * 8, 2))
X = torch.rand(16, 3, 8, 8, generator=torch.Generator().manual_seed(0))


def _arrays():
    g = np.random.default_rng(1)
    return g.random((12, 3, 8, 8), dtype=np.float32), g.integers(0, 3, 12)


@pytest.mark.parametrize("key", ["x", "images", None])
def test_data_reads_a_npz_archive_as_the_same_array_in_a_npy_file(tmp_path, key):
    x, y = _arrays()
    np.save(tmp_path / "x.npy", x)
    arrays = {key: x, "y": y} if key else {"arr": x}
    np.savez(tmp_path / "d.npz", **arrays)
    for kw in ({}, {"size": 5, "limit": 7}):
        assert torch.equal(load_images(tmp_path / "d.npz", **kw), load_images(tmp_path / "x.npy", **kw))


def test_a_npz_archive_is_read_whatever_its_name_and_compressed(tmp_path):
    x, y = _arrays()
    np.savez_compressed(tmp_path / "d.bin", x=x, y=y)
    (tmp_path / "d.bin.npz").rename(tmp_path / "d.bin")
    assert torch.equal(load_images(tmp_path / "d.bin"), torch.from_numpy(x))
    assert torch.equal(load_labels("data", tmp_path / "d.bin"), torch.from_numpy(y).long())


def test_labels_of_a_npz_archive_alone_named_or_beside_the_images(tmp_path):
    x, y = _arrays()
    np.savez(tmp_path / "only.npz", y)
    np.savez(tmp_path / "named.npz", labels=y, other=np.zeros(3))
    np.savez(tmp_path / "data.npz", images=x, y=y)
    want = torch.from_numpy(y).long()
    assert torch.equal(load_labels(tmp_path / "only.npz"), want)
    assert torch.equal(load_labels(tmp_path / "named.npz"), want)
    assert torch.equal(load_labels("data", tmp_path / "data.npz"), want)
    assert torch.equal(load_labels(tmp_path / "named.npz", limit=4), want[[0, 3, 6, 9]])


def test_npz_archives_without_the_arrays_or_with_objects_are_one_line_naming_them(tmp_path):
    x, y = _arrays()
    np.savez(tmp_path / "two.npz", a=x, b=y)
    with pytest.raises(ValueError, match=r"--data .*two.npz is a NumPy .npz file without a 'x' or 'images' array "
                                         r"\(its arrays: 'a', 'b'\)"):  # fmt: skip
        load_images(tmp_path / "two.npz")
    with pytest.raises(ValueError, match=r"without a 'y' or 'labels' array"):
        load_labels(tmp_path / "two.npz")
    np.savez(tmp_path / "imgs.npz", x=x)
    with pytest.raises(ValueError, match=r"--by-class data: --data .*imgs.npz is a NumPy .npz file without a 'y'"):
        load_labels("data", tmp_path / "imgs.npz")
    np.savez(tmp_path / "obj.npz", x=np.array([{"a": 1}] * 3, dtype=object))
    with pytest.raises(ValueError, match=r"--data .*obj.npz: cannot read the NumPy .npz file"):
        load_images(tmp_path / "obj.npz")
    np.savez(tmp_path / "int.npz", x=np.zeros((4, 3, 8, 8), dtype=np.int64))
    with pytest.raises(ValueError, match="floating point or uint8"):
        load_images(tmp_path / "int.npz")


def test_a_torch_file_is_still_read_by_torch(tmp_path):
    torch.save({"x": X, "y": torch.arange(16) % 2}, tmp_path / "d.pt")
    assert torch.equal(load_images(tmp_path / "d.pt"), X)
    assert torch.equal(load_labels("data", tmp_path / "d.pt"), torch.arange(16) % 2)


def test_probe_command_reads_npz_data_and_labels(tmp_path, monkeypatch, capsys):
    argv = probe_model_file(tmp_path, monkeypatch, "npz_probe_net")
    x, y = _arrays()
    np.savez(tmp_path / "d.npz", x=x, y=y)
    at = argv.index("--fake")
    argv[at : at + 5] = ["--data", str(tmp_path / "d.npz"), "--by-class", "data", "--size", "8"]
    code = main([*argv, "--out", str(tmp_path / "out")])
    assert code == 0, capsys.readouterr().err
    saved = ProbeReport.load(tmp_path / "out" / "probe.json")
    assert saved.classes() == sorted(set(y.tolist()))


@pytest.mark.parametrize("name", ["Rotate", "TranslateX", "Brightness"])
def test_lie_derivative_takes_a_transform_by_name_as_report_does(name):
    by_class = lie_derivative(NET, X, getattr(T, name)(), layers=["0", "logits"])
    by_name = lie_derivative(NET, X, name, layers=["0", "logits"])
    assert by_name["transform"] == by_class["transform"]
    for layer in ("0", "logits"):
        assert torch.equal(by_name["lee"][layer], by_class["lee"][layer])
    assert torch.equal(transform_derivative(name, X), transform_derivative(getattr(T, name)(), X))


@pytest.mark.parametrize("name", ["HorizontalFlip", "Rot", "Posterize"])
def test_a_name_of_no_continuous_family_names_the_ones_there_are(name):
    with pytest.raises(ValueError, match=rf"transform {name!r} names no transform with a continuous family: "
                                         r"one of \[.*'Rotate'"):  # fmt: skip
        lie_derivative(NET, X, name)


@pytest.mark.parametrize("bad", [b"0", NET[0], 3, None])
def test_lie_derivative_layers_that_are_no_names_are_the_typeerror_features_gives(bad):
    with pytest.raises(TypeError, match=r"^layers must be a layer name or a list of them, got "):
        lie_derivative(NET, X, T.Rotate(), layers=bad)
    with pytest.raises(TypeError, match=r"^layers must be module names \(str\), got 0 in \['0', 0\]"):
        lie_derivative(NET, X, T.Rotate(), layers=["0", 0])


def test_lie_derivative_layers_as_a_tuple_or_a_generator_as_a_list():
    want = lie_derivative(NET, X, T.Rotate(), layers=["0", "logits"])["lee"]
    for layers in (("0", "logits"), (n for n in ["0", "logits"])):
        got = lie_derivative(NET, X, T.Rotate(), layers=layers)["lee"]
        assert all(torch.equal(got[k], want[k]) for k in want)


@pytest.mark.parametrize("suffix", [".JSON", ".Json", ".CSV"])
def test_a_report_saves_and_loads_with_its_suffix_in_capitals(tmp_path, suffix):
    rep = report(NET, X, transforms=["Rotate"], magnitudes=[0.5], layers=["logits"], lie=False)
    path = rep.save(tmp_path / f"r{suffix}")
    assert path.is_file()
    if suffix.lower() == ".json":
        loaded = ProbeReport.load(path)
        assert [{**r, "value": repr(r["value"])} for r in loaded.records] == [
            {**r, "value": repr(r["value"])} for r in rep.records
        ]  # (NaN compares by its repr)
        assert (tmp_path / "r.units.json").exists() == bool(rep.units)
    else:
        assert path.read_text().splitlines()[0].startswith("layer,")
        with pytest.raises(ValueError, match=r"a \.csv holds only the records"):
            ProbeReport.load(path)
