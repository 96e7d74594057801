"""User audit O: ``augnet probe`` reads NumPy ``.npy`` labels (``--by-class``) and images (``--data``); the
probes' layer arguments, flags and distances as a user passes them; and the probes' exact cases (an invariant
model, an exactly equivariant map, a permuted batch)."""

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
import torchvision
from torch import nn

from augnet.cli import main
from augnet.probes import (
    distance,
    equivariance_curve,
    equivariance_report,
    features,
    fit_equivariance_map,
    invariance_curve,
    invariance_score,
    layer_calls,
    lie_derivative,
    mapping_error,
    representation_distance,
)
from augnet.probes.features import check_layers
from augnet.probes.inputs import load_images, load_labels
from augnet.probes.measures import act
from augnet.transforms import image as T


class TinyNet(nn.Sequential):
    """A small model the command line imports as ``test_user_audit_o:TinyNet``."""

    def __init__(self):
        torch.manual_seed(0)
        super().__init__(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(4, 2))  # fmt: skip


def _probe(tmp_path: Path, capsys, source: list[str], by_class=None, out: str = "out") -> tuple[int, str, Path]:
    argv = ["probe", "--model", "test_user_audit_o:TinyNet", *source, "--transforms", "Rotate", "--magnitudes",
            "1", "--no-lie", "--layers", "logits", "--no-progress", "--out", str(tmp_path / out)]  # fmt: skip
    if by_class is not None:
        argv += ["--by-class", str(by_class)]
    code = main(argv)
    return code, capsys.readouterr().err, tmp_path / out


FAKE = ["--fake", "--n", "16", "--size", "8"]
Y = np.arange(16) % 3


def _records(out: Path) -> list:
    return json.loads((out / "probe.json").read_text())["records"]


# --------------------------------------------------------------------------- .npy labels and images


@pytest.mark.parametrize(
    "form",
    [Y, Y.astype(np.int32), Y.astype(np.uint8), Y.astype(">i4"), Y.astype(np.float32), Y[:, None]],
    ids=["int64", "int32", "uint8", "big-endian", "whole floats", "(N, 1)"],
)
def test_by_class_reads_a_npy_file_of_labels_as_the_same_labels_in_a_text_file(tmp_path, capsys, form):
    np.save(tmp_path / "y.npy", form)
    (tmp_path / "y.txt").write_text("\n".join(str(v) for v in Y) + "\n")
    assert torch.equal(load_labels(tmp_path / "y.npy"), load_labels(tmp_path / "y.txt"))
    assert load_labels(tmp_path / "y.npy", limit=8).tolist() == load_labels(tmp_path / "y.txt", limit=8).tolist()
    code, err, out = _probe(tmp_path, capsys, FAKE, tmp_path / "y.npy", "npy")
    assert code == 0, err
    code, err, text = _probe(tmp_path, capsys, FAKE, tmp_path / "y.txt", "txt")
    assert code == 0, err
    assert _records(out) == _records(text)  # the same per-class results


def test_a_npy_file_of_labels_is_read_whatever_it_is_named(tmp_path):
    np.save(tmp_path / "y.npy", Y)
    (tmp_path / "labels.dat").write_bytes((tmp_path / "y.npy").read_bytes())
    assert load_labels(tmp_path / "labels.dat").tolist() == Y.tolist()


def _npy(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / "y.npy"
    if kind == "objects":
        np.save(path, np.array([0, "a"] * 8, dtype=object), allow_pickle=True)
    elif kind == "cut short":
        np.save(path, Y)
        path.write_bytes(path.read_bytes()[:140])
    else:
        np.save(path, {"fractions": Y / 2, "one-hot": np.eye(3)[Y], "bool": Y == 0, "names": Y.astype(str),
                       "negative": Y - 1, "short": Y[:5], "nan": np.full(16, np.nan)}[kind])  # fmt: skip
    return path


@pytest.mark.parametrize(
    "kind, said",
    [
        ("fractions", "must hold whole numbers (class labels), got [0.5"),
        ("one-hot", "got (16, 3) (one-hot rows? pass their argmax(1))"),
        ("bool", "got dtype torch.bool (a mask?"),
        ("names", "map names to integers first"),
        ("negative", "must hold class labels >= 0, got -1"),
        ("short", "holds 5 labels for 16 images"),
        ("nan", "must hold whole numbers (class labels), got [nan"),
        ("objects", "array of Python objects (dtype object), which is not read (allow_pickle=False"),
        ("cut short", "cannot read the NumPy .npy file: Failed to read all data"),
    ],
)
def test_by_class_refuses_a_npy_file_that_holds_no_labels_in_one_line_naming_the_file(tmp_path, capsys, kind, said):
    path = _npy(tmp_path, kind)
    code, err, out = _probe(tmp_path, capsys, FAKE, path)
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"augnet probe: error: --by-class {path}") and said in err, err
    assert "weights_only" not in err and not out.exists()
    if kind not in ("short",):
        with pytest.raises((TypeError, ValueError), match="--by-class"):
            load_labels(path)


def test_the_formats_named_for_a_file_that_is_no_labels_file_include_npy(tmp_path, capsys):
    path = tmp_path / "labels.dat"
    path.write_text("0\n1\n")
    code, err, _ = _probe(tmp_path, capsys, FAKE, path)
    assert code == 2 and "NumPy .npy file (numpy.save)" in err and ".txt or .csv" in err


def test_data_reads_a_npy_file_of_images_as_the_same_tensor_saved_by_torch(tmp_path, capsys):
    g = np.random.default_rng(0)
    for name, x in [("f32", g.random((16, 3, 8, 8), dtype=np.float32)), ("f64", g.random((16, 3, 8, 8))),
                    ("u8", (g.random((16, 3, 8, 8)) * 255).astype(np.uint8)), ("gray", g.random((16, 8, 8))),
                    ("big-endian", g.random((16, 3, 8, 8)).astype(">f4"))]:  # fmt: skip
        np.save(tmp_path / f"{name}.npy", x)
        torch.save(torch.from_numpy(x.astype(x.dtype.newbyteorder("="))), tmp_path / f"{name}.pt")
        for kw in ({}, {"size": 5, "limit": 7}):
            got, want = load_images(tmp_path / f"{name}.npy", **kw), load_images(tmp_path / f"{name}.pt", **kw)
            assert got.dtype == torch.float32 and torch.equal(got, want), name
    code, err, out = _probe(tmp_path, capsys, ["--data", str(tmp_path / "u8.npy")], None, "npy")
    assert code == 0, err
    code, err, pt = _probe(tmp_path, capsys, ["--data", str(tmp_path / "u8.pt")], None, "pt")
    assert _records(out) == _records(pt)


@pytest.mark.parametrize(
    "x, said",
    [
        (np.zeros((16, 8, 8, 3), np.float32), "got shape (16, 8, 8, 3), channels last: np.save(path, "),
        (np.zeros((16, 3, 8, 8), np.int64), "images must be floating point or uint8, got a NumPy array of int64"),
        (np.zeros((16, 3, 8, 8), bool), "images must be floating point or uint8, got a NumPy array of bool"),
        (np.full((16, 3, 8, 8), np.nan, np.float32), "the images hold NaN or infinite values"),
        (np.zeros((2, 16, 3, 8, 8), np.float32), "images must be (N, C, H, W), got shape (2, 16, 3, 8, 8)"),
    ],
    ids=["channels last", "int64", "bool", "nan", "5-D"],
)
def test_data_refuses_a_npy_file_that_holds_no_images_in_one_line(tmp_path, capsys, x, said):
    np.save(tmp_path / "x.npy", x)
    code, err, out = _probe(tmp_path, capsys, ["--data", str(tmp_path / "x.npy")])
    assert code == 2 and err.count("\n") == 1 and f"--data {tmp_path / 'x.npy'}" in err and said in err, err
    assert "weights_only" not in err and not out.exists()


def test_by_class_data_of_a_npy_data_file_says_it_holds_no_labels(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.random.default_rng(0).random((16, 3, 8, 8), dtype=np.float32))
    code, err, _ = _probe(tmp_path, capsys, ["--data", str(tmp_path / "x.npy")], "data")
    assert code == 2 and err.count("\n") == 1
    assert "is a NumPy .npy file, one array (the images) without labels" in err and "--by-class labels.npy" in err


# --------------------------------------------------------------------------- layers, flags, distances


NET = nn.Sequential(nn.Conv2d(3, 5, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
X = torch.rand(8, 3, 6, 6, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("bad", [NET[0], NET, 3, None, b"0", torch.tensor(0)], ids=lambda v: type(v).__name__)
def test_layers_that_are_no_layer_names_are_a_typeerror_naming_layers(bad):
    """A module, a number, None, bytes or a tensor: Python's "'Conv2d' object is not iterable" (no argument
    named), or bytes read as the numbers 48, ...; a module of the model is named."""
    calls = [lambda: features(NET, X, bad), lambda: check_layers(NET, X, bad)]
    if bad is not None:  # layer_calls(layers=None) counts every module
        calls.append(lambda: layer_calls(NET, X, bad))
    for call in calls:
        with pytest.raises(TypeError, match=r"^layers must be a layer name or a list of them, got "):
            call()
    if bad is NET[0]:
        with pytest.raises(TypeError, match="the module named '0': pass its name"):
            features(NET, X, bad)
        with pytest.raises(TypeError, match="the module named '0': pass its name"):
            features(NET, X, [bad])
        with pytest.raises(TypeError, match="the module named '0': pass its name"):
            lie_derivative(NET, X, T.Rotate(), layers=[bad])


@pytest.mark.parametrize("bad", [NET[0], ["0", "3"], 3], ids=["module", "list", "int"])
def test_the_layer_of_a_curve_must_be_one_name(bad):
    with pytest.raises(TypeError, match=r"^layer must be one layer name"):
        invariance_curve(NET, X, T.Rotate(), [0.5], layer=bad)
    with pytest.raises(TypeError, match=r"^layer must be one layer name"):
        equivariance_curve(NET, X, lambda a, m: a, [0], layer=bad)


class Counting(nn.Module):
    def __init__(self):
        super().__init__()
        self.net, self.calls = NET, 0

    def forward(self, x):
        self.calls += 1
        return self.net(x)


@pytest.mark.parametrize("kw", [{"distance": "l1"}, {"baseline": "noisy"}])
def test_invariance_curve_refuses_a_distance_or_baseline_before_the_model_runs(kw):
    model = Counting()
    with pytest.raises(ValueError, match=f"{next(iter(kw))} must be one of"):
        invariance_curve(model, X, T.Rotate(), [0.5], **kw)
    assert model.calls == 0


@pytest.mark.parametrize(
    "kw, error, said",
    [
        ({"error": "l1"}, ValueError, "error must be one of"),
        ({"output": "sigmoid"}, ValueError, "output must be one of"),
        ({"holdout": 1.5}, ValueError, "holdout must be a fraction in [0, 1)"),
        ({"per_dimension": "no"}, TypeError, "per_dimension must be True or False, got 'no'"),
        ({"shared": "no"}, TypeError, "shared must be True or False, got 'no'"),
    ],
)
def test_equivariance_curve_refuses_its_settings_before_the_model_runs(kw, error, said):
    model = Counting()
    state = torch.random.get_rng_state()
    with pytest.raises(error, match=said.replace("[", r"\[").replace(")", r"\)")):
        equivariance_curve(model, X, T.Rotate(), [0.5], **kw)
    assert model.calls == 0 and torch.equal(torch.random.get_rng_state(), state)


def test_per_dimension_is_a_flag_everywhere():
    """``per_dimension="no"`` was truthy: the per-dimension scaling it names was applied."""
    z = torch.randn(40, 3, generator=torch.Generator().manual_seed(0))
    for call in [lambda: fit_equivariance_map(z, z.flip(1), per_dimension="no"),
                 lambda: equivariance_report(z, z.flip(1), per_dimension=0),
                 lambda: representation_distance(z, z.flip(1), per_dimension="False"),
                 lambda: mapping_error(z, z, per_dimension=None)]:  # fmt: skip
        with pytest.raises(TypeError, match=r"^per_dimension must be True or False"):
            call()


def test_equivariance_report_with_a_fitted_map_refuses_a_misspelt_fit_keyword():
    z = torch.randn(40, 3, generator=torch.Generator().manual_seed(0))
    fitted = fit_equivariance_map(z, z.flip(1))
    with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) \['epoch'\]"):
        equivariance_report(z, z.flip(1), fitted=fitted, epoch=5)
    ok = equivariance_report(z, z.flip(1), fitted=fitted, ridge=1e-3)  # a fit keyword: ignored, as documented
    assert ok["evaluated_on"] == "given"


def test_act_refuses_an_inverse_that_is_not_a_flag():
    z = torch.arange(9.0).reshape(1, 1, 3, 3)
    with pytest.raises(TypeError, match=r"^inverse must be True or False, got 'no'"):
        act(z, ("translate", 1, 0), inverse="no")  # was truthy: the inverse translation
    assert torch.equal(act(act(z, "rot90"), "rot90", inverse=True), z)


def test_distance_refuses_rows_of_other_shapes_instead_of_broadcasting_them():
    z = torch.randn(6, 4, generator=torch.Generator().manual_seed(0))
    for other in (z[:1], z[:, :1], z[:, None]):  # each broadcast silently against z
        with pytest.raises(ValueError, match=r"^a and b must be"):
            distance(z, other)
    with pytest.raises(TypeError, match=r"^a must be a tensor"):
        distance(z.tolist(), z)
    with pytest.raises(ValueError, match=r"^a and b must be"):
        distance(torch.tensor(1.0), torch.tensor(2.0))


def test_one_number_per_row_is_measured_as_a_column():
    """(B,) features with the L2 distance: an IndexError of flatten(1) before; now (B, 1)'s scores."""
    z = torch.randn(6, generator=torch.Generator().manual_seed(0))
    zt = z + 0.1
    assert torch.equal(distance(z, zt, "l2"), distance(z[:, None], zt[:, None], "l2"))
    pairs = torch.tensor([1, 2, 3, 4, 5, 0])
    column = invariance_score(z[:, None], zt[:, None], "l2", permutation=pairs)
    assert torch.equal(invariance_score(z, zt, "l2", permutation=pairs), column)


def test_the_warning_of_all_zero_targets_points_at_the_callers_line():
    z = torch.randn(30, 3, generator=torch.Generator().manual_seed(0)).relu()
    z[0] = 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit_equivariance_map(z, z)
    zero = [w for w in caught if "target row(s) are all zeros" in str(w.message)]
    assert zero and all(w.filename == __file__ for w in zero), [w.filename for w in zero]


# --------------------------------------------------------------------------- exact cases (pass on the old code too)


def test_exact_cases_of_the_lie_derivative_invariance_and_the_maps():
    """(Passes on the old code too.) An invariant model gives a Lie derivative of 0 and invariance 1; a
    permutation of the input under fixed linear features is undone by the ridge map with error ~0; each result
    follows a permutation of the batch."""
    g = torch.Generator().manual_seed(0)
    total = nn.Sequential(nn.Conv2d(3, 1, 1, bias=False), nn.Flatten())
    total[0].weight.data.fill_(1.0)  # the sum of the channels: a hue rotation keeps it
    x = torch.rand(5, 3, 6, 6, generator=g)
    for dtype in (torch.float32, torch.float64):
        lie = lie_derivative(total.to(dtype), x.to(dtype), T.Hue())
        assert lie["mean"]["logits"] < 1e-6
    total.float()
    pooled = nn.Sequential(nn.Conv2d(3, 4, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten())
    curve = invariance_curve(pooled, x, lambda a, m, generator=None: a.flip(-1) if m else a, [0, 1])
    assert torch.allclose(curve["scores"], torch.ones_like(curve["scores"]), atol=1e-12)
    # features = a fixed linear function of the input, the transformation = a permutation of its coordinates
    inputs = torch.randn(200, 6, dtype=torch.float64, generator=g)
    a = torch.randn(6, 6, dtype=torch.float64, generator=g)
    perm = torch.tensor([3, 1, 0, 5, 2, 4])
    fitted = fit_equivariance_map(inputs @ a, inputs[:, perm] @ a, ridge=0.0)
    assert fitted.test_error < 1e-10 and fitted.train_error < 1e-10
    rows = torch.randperm(5, generator=g)
    net = TinyNet().train()
    one = lie_derivative(net, x, T.Rotate(), layers=["0", "logits"])
    assert net.training and all(m.training for m in net.modules())  # its modes restored
    moved = lie_derivative(net, x[rows], T.Rotate(), layers=["0", "logits"])
    single = lie_derivative(net, x[:1], T.Rotate(), layers=["0", "logits"])
    for name in ("0", "logits"):
        assert torch.allclose(moved["lee"][name], one["lee"][name][rows], rtol=1e-5, atol=1e-9)
        assert torch.allclose(single["lee"][name], one["lee"][name][:1], rtol=1e-5, atol=1e-9)


def test_the_lie_derivative_of_a_train_mode_resnet18_restores_its_modes():
    """(Passes on the old code too.)"""
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None, num_classes=4).train()
    model.layer2.eval()  # a mixture of modes, each restored
    before = {n: m.training for n, m in model.named_modules()}
    stats = model.bn1.running_mean.clone()
    out = lie_derivative(model, torch.rand(2, 3, 32, 32), T.Rotate(), layers=["layer1", "logits"])
    assert {n: m.training for n, m in model.named_modules()} == before
    assert torch.equal(model.bn1.running_mean, stats)
    assert out["equivariant"] == {"layer1": True, "logits": False} and all(v > 0 for v in out["mean"].values())
