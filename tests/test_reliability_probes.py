"""Reliability of the probe report, its measures, the Lie derivative and ``augnet probe``.

Bad input of every kind is a ValueError or a TypeError naming it, before the model runs; the
command line prints one line on stderr, exits with status 2 and leaves no ``--out`` folder behind;
the measures are continuous in the features, do not depend on rounding noise or on the memory
layout of the images, and are not decided by a few nearly silent units.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from helpers import gen
from torch import nn

from augnet.cli import main
from augnet.probes import equivariance_alignment, equivariance_report, lie_derivative, report
from augnet.probes.map_evaluation import mapping_error
from augnet.probes.report import MEASURES, auto_layers
from augnet.transforms import image as T

NAN, INF = math.nan, math.inf


def net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(4, 3)).eval()  # fmt: skip


def images(b=8, ch=3, h=8, w=8, seed=1, dtype=torch.float32):
    return torch.rand(b, ch, h, w, generator=gen(seed)).to(dtype)


class Twice(nn.Module):
    """A model whose ``block`` is called twice per forward pass, and whose ``unused`` block is never called."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.stem = nn.Sequential(nn.Conv2d(3, 3, 3, padding=1), nn.ReLU())
        self.block = nn.Sequential(nn.Conv2d(3, 3, 3, padding=1), nn.ReLU())
        self.unused = nn.Sequential(nn.Conv2d(3, 3, 1), nn.ReLU())
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(3, 2))

    def forward(self, x):
        return self.head(self.block(self.block(self.stem(x))))


KW = dict(layers=["1", "logits"], magnitudes=[1.0], lie=False)


@pytest.fixture(scope="module")
def small_report():
    return report(net(), images(), ["Rotate"], **KW)


# ----------------------------------------------------------------------- report's arguments


REPORT_BAD = {
    "seed-float": (dict(seed=1.5), TypeError, "seed"),
    "seed-str": (dict(seed="0"), TypeError, "seed"),
    "seed-none": (dict(seed=None), TypeError, "seed"),
    "seed-bool": (dict(seed=True), TypeError, "seed"),
    "seed-nan": (dict(seed=NAN), TypeError, "seed"),
    "seed-huge": (dict(seed=2**70), ValueError, "seed"),
    "seed-negative": (dict(seed=-1), ValueError, "seed"),
    "progress-str": (dict(progress="yes"), TypeError, "progress"),
    "lie-str": (dict(lie="no"), TypeError, "lie"),
    "x-nan": (dict(x=images().index_fill(0, torch.tensor([3]), NAN)), ValueError, r"NaN or infinite.*\[3\]"),
    "x-inf": (dict(x=images().index_fill(0, torch.tensor([0]), INF)), ValueError, r"NaN or infinite.*\[0\]"),
    "x-meta": (dict(x=torch.empty(8, 3, 8, 8, device="meta")), ValueError, "meta"),
    "x-float64": (dict(x=images(dtype=torch.float64)), TypeError, "float64"),
    "x-list": (dict(x=images().tolist()), TypeError, "tensor"),
    "x-seven": (dict(x=images(b=7)), ValueError, "N >= 8"),
    "layers-empty": (dict(layers=[]), ValueError, "layers"),
    "layers-repeated": (dict(layers=["1", "1"]), ValueError, "layers"),
    "layers-int": (dict(layers=3), TypeError, "layers"),
    "layers-unknown": (dict(layers=["nope"]), ValueError, "unknown"),
}


@pytest.mark.parametrize("name", list(REPORT_BAD))
def test_report_refuses_bad_arguments_before_the_model_runs(name):
    kwargs, error, match = REPORT_BAD[name]
    model = net()
    calls = []
    model.register_forward_pre_hook(lambda m, i: calls.append(1))
    args = {"x": images(), **KW, **kwargs}
    x = args.pop("x")
    with pytest.raises(error, match=match):
        report(model, x, ["Rotate"], **args)
    assert not calls  # nothing ran


@pytest.mark.parametrize("seed", [0, 7, 2**31])
def test_report_takes_any_integer_seed(seed):
    rep = report(net(), images(), ["Rotate"], seed=seed, **KW)
    assert rep.info["seed"] == seed


@pytest.mark.parametrize(
    ("measures", "error"),
    [(["nope"], ValueError), ("inv_augnet", TypeError), ([3], TypeError), ([], ValueError),
     (["inv_augnet", "nope"], ValueError), (["lie_derivative"], ValueError)],
)  # fmt: skip
def test_heatmap_refuses_unknown_measures(small_report, tmp_path, measures, error):
    with pytest.raises(error, match="measure"):
        small_report.heatmap(tmp_path / "h.png", measures=measures)
    assert not (tmp_path / "h.png").exists()


@pytest.mark.parametrize(("magnitude", "error"), [(0.3, ValueError), ("1", TypeError), (NAN, ValueError)])
def test_heatmap_refuses_a_magnitude_that_was_not_swept(small_report, tmp_path, magnitude, error):
    with pytest.raises(error, match="magnitude"):
        small_report.heatmap(tmp_path / "h.png", magnitude=magnitude)


def test_heatmap_of_known_measures(small_report, tmp_path):
    pytest.importorskip("matplotlib")
    path = small_report.heatmap(tmp_path / "h.png", measures=["inv_augnet", "alignment"])
    assert path.read_bytes()[:4] == b"\x89PNG"


# ----------------------------------------------------------------------- layers called twice


def test_auto_layers_reads_each_call_of_a_block_called_twice():
    model = Twice()
    x = images()
    names = auto_layers(model, x)
    assert names == ["stem", "block#0", "block#1", "logits"]  # the unused block is not a layer of the pass
    rep = report(model, x, ["Rotate"], magnitudes=[1.0], lie=False)
    assert rep.layers == names


def test_auto_layers_without_inputs_is_what_it_was():
    assert auto_layers(Twice()) == ["stem", "block", "unused", "logits"]


@pytest.mark.parametrize("lie", [False, True])
def test_report_on_a_block_called_twice_names_its_calls_before_work(lie):
    model = Twice()
    calls = []
    with pytest.raises(ValueError, match="block#0"):
        model.head.register_forward_pre_hook(lambda m, i: calls.append(1))
        report(model, images(), ["Rotate"], layers=["block", "logits"], magnitudes=[1.0], lie=lie)
    assert len(calls) <= 1  # one checking pass at most


# ----------------------------------------------------------------------- alignment of gated transforms


@pytest.mark.parametrize("magnitude", [0.25, 0.5, 0.75])
@pytest.mark.parametrize("name", ["HorizontalFlip", "VerticalFlip", "Invert", "Gray", "AutoContrast"])
def test_alignment_does_not_depend_on_the_memory_layout(name, magnitude):
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4)).eval()  # fmt: skip
    x = images(16, h=12, w=12)
    values = []
    for layout in (x, x.contiguous(memory_format=torch.channels_last)):
        rep = report(model, layout, [name], layers=["1", "3", "logits"], magnitudes=[magnitude], lie=False)
        values.append([rep.value("alignment", layer, name, magnitude) for layer in ("1", "3", "logits")])
    torch.testing.assert_close(torch.tensor(values[1]), torch.tensor(values[0]), rtol=0, atol=1e-5)


@pytest.mark.parametrize("noise", [0.0, 1e-9, 1e-7, 3e-7])
def test_alignment_counts_rounding_noise_as_no_movement(noise):
    z = torch.randn(40, 16, generator=gen(0))
    moved = z + 0.1 * torch.randn(16, generator=gen(1))  # every row moved along one direction: aligned
    z_t = torch.where(torch.arange(40)[:, None] % 2 == 0, moved, z + noise * torch.randn(40, 16, generator=gen(2)))
    out = equivariance_alignment(z, z_t, generator=gen(3))
    assert out["n_zero"] == 20
    clean = equivariance_alignment(z, torch.where(torch.arange(40)[:, None] % 2 == 0, moved, z), generator=gen(3))
    assert out["difference"] == pytest.approx(clean["difference"], abs=1e-9)


def test_alignment_of_real_small_movements_is_kept():
    z = torch.randn(40, 16, generator=gen(0), dtype=torch.float64)
    z_t = z + 1e-3 * torch.randn(16, generator=gen(1), dtype=torch.float64)
    out = equivariance_alignment(z, z_t, generator=gen(3))
    assert out["n_zero"] == 0 and out["score"] == pytest.approx(1.0)


# ----------------------------------------------------------------------- the held-out errors' normalisation


def _layer(d=64, silent=5, seed=0):
    """Clean and transformed features: ``silent`` channels nearly silent on clean inputs but moved alike."""
    z = torch.rand(60, d, generator=gen(seed), dtype=torch.float64) + 0.5
    z[:, :silent] *= 1e-6
    z_t = z + 0.2 * torch.randn(60, d, generator=gen(seed + 1), dtype=torch.float64) * z.mean()
    return z, z_t


@pytest.mark.parametrize("silent", [1, 5, 10])
def test_nearly_silent_channels_do_not_decide_the_error(silent):
    z, z_t = _layer(silent=silent)
    p, t = z_t.clone(), z.clone()
    whole = mapping_error(p, t).mean()
    rest = mapping_error(p[:, silent:], t[:, silent:]).mean()
    assert whole < 1.5 * rest  # without the silent channels about the same error (before: 100 x)


@pytest.mark.parametrize("bump", [1e-12, 1e-9, 1e-6])
def test_the_error_is_continuous_at_a_channel_silent_on_clean_inputs(bump):
    z, z_t = _layer(silent=0)
    z[:, 3] = 0.0  # exactly 0 on every clean input
    z_t[:, 3] = 0.0
    base = mapping_error(z_t, z).mean()
    z[7, 3] = bump
    moved = mapping_error(z_t, z).mean()
    assert abs(moved - base) < 1e-3 * base
    with pytest.warns(RuntimeWarning, match="under-determined") as record:  # 42 training rows for 64 features
        report_base = equivariance_report(z_t, z_t)["scores"]["invariance"]  # the report's error, on the same rows
    assert report_base == 0.0
    assert {w.filename for w in record if "under-determined" in str(w.message)} == {__file__}  # the caller's line


@pytest.mark.parametrize("scale", [1e-6, 1e3])
def test_the_error_does_not_depend_on_the_layers_scale(scale):
    z, z_t = _layer()
    a = mapping_error(z_t, z).mean()
    torch.testing.assert_close(mapping_error(scale * z_t, scale * z).mean(), a)


def test_one_loud_channel_does_not_decide_the_error():
    z, z_t = _layer(silent=0)
    z_loud, z_t_loud = z.clone(), z_t.clone()
    z_loud[:, 0] *= 1e4
    z_t_loud[:, 0] = z_loud[:, 0] * 1.5  # far off, relative to its own size
    a = mapping_error(z_t, z).mean()
    b = mapping_error(z_t_loud, z_loud).mean()
    assert b < 3 * a


def test_the_report_says_which_normalisation():
    doc = mapping_error.__doc__
    assert "per_dimension" in doc and "silent" in doc and "continuous" in doc


# ----------------------------------------------------------------------- lie_derivative


LIE_BAD = {
    "x-list": (dict(x=images(4).tolist()), TypeError, "tensor"),
    "x-uint8": (dict(x=(images(4) * 255).to(torch.uint8)), TypeError, "floating"),
    "x-rank-3": (dict(x=images(4)[0]), ValueError, "4-D"),
    "x-empty": (dict(x=images(0)), ValueError, "empty"),
    "x-nan": (dict(x=images(4).index_fill(0, torch.tensor([2]), NAN)), ValueError, r"NaN or infinite.*\[2\]"),
    "x-inf": (dict(x=images(4).index_fill(0, torch.tensor([1]), INF)), ValueError, r"NaN or infinite.*\[1\]"),
    "x-meta": (dict(x=torch.empty(4, 3, 8, 8, device="meta")), ValueError, "meta"),
    "x-float64": (dict(x=images(4, dtype=torch.float64)), TypeError, "float64"),
    "flip": (dict(transform=T.HorizontalFlip()), ValueError, "continuous"),
    "callable": (dict(transform=lambda a, m: a), TypeError, "transform"),
    "model": (dict(model=lambda a: a), TypeError, "model"),
    "layers-empty": (dict(layers=[]), ValueError, "layers"),
    "layers-int": (dict(layers=3), TypeError, "layers"),
    "layers-int-list": (dict(layers=[3]), TypeError, "layers"),
    "layers-unknown": (dict(layers=["nope"]), ValueError, "unknown"),
    "layers-repeated": (dict(layers=["1", "1"]), ValueError, "layers"),
    "reduce-name": (dict(reduce="max"), ValueError, "reduce"),
    "reduce-not-tensor": (dict(reduce=lambda a: 3.0), TypeError, "reduce"),
    "equivariant": (dict(equivariant="yes"), ValueError, "equivariant"),
    "equivariant-logits": (dict(equivariant=True), ValueError, "feature map"),
    "batch-size-0": (dict(batch_size=0), ValueError, "batch_size"),
    "batch-size-float": (dict(batch_size=1.5), ValueError, "batch_size"),
    "seed-float": (dict(seed=1.5), TypeError, "seed"),
    "seed-str": (dict(seed="0"), TypeError, "seed"),
    "copies": (dict(copies=2), ValueError, "copies"),
    "return-derivative": (dict(return_derivative="yes"), TypeError, "return_derivative"),
}


@pytest.mark.parametrize("name", list(LIE_BAD))
def test_lie_derivative_refuses_bad_arguments(name):
    kwargs, error, match = LIE_BAD[name]
    args = {"model": net(), "x": images(4), "transform": T.Rotate(), **kwargs}
    with pytest.raises(error, match=match):
        lie_derivative(**args)


LIE_GOOD = {
    "batch-1": lambda: images(1),
    "channels-last": lambda: images(4).contiguous(memory_format=torch.channels_last),
    "non-contiguous": lambda: images(4).transpose(2, 3).contiguous().transpose(2, 3),
    "batches-of-3": lambda: images(7),
}


@pytest.mark.parametrize("name", list(LIE_GOOD))
def test_lie_derivative_of_unusual_good_inputs_matches_the_plain_batch(name):
    x = LIE_GOOD[name]()
    model = net()
    out = lie_derivative(model, x, T.Rotate(), layers=["1", "logits"], batch_size=3)
    plain = torch.cat([lie_derivative(model, x[i : i + 1].contiguous(), T.Rotate(), layers=["1", "logits"])["lee"]["1"]
                       for i in range(len(x))])  # fmt: skip
    torch.testing.assert_close(out["lee"]["1"], plain, rtol=1e-4, atol=1e-7)
    assert all(math.isfinite(v) for v in out["mean"].values())


def test_lie_derivative_leaves_the_model_as_it_was():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Dropout(0.5), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten()).train()  # fmt: skip
    before = {k: v.clone() for k, v in model.state_dict().items()}
    lie_derivative(model, images(4), T.Brightness())
    assert model.training and all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    assert all(p.grad is None for p in model.parameters())


# ----------------------------------------------------------------------- augnet probe

RESNET = ["--model", "torchvision.models:resnet18", "--model-args", '{"num_classes": 4}']
FAKE = ["--fake", "--n", "8", "--size", "16"]


def _png(path, h=16, w=16, seed=0):
    from PIL import Image

    pixels = (torch.rand(h, w, 3, generator=gen(seed)) * 255).to(torch.uint8)
    Image.fromarray(pixels.numpy()).save(path)


def _folder(tmp_path, bad: bytes | None = None, suffix=".png"):
    folder = tmp_path / "images"
    folder.mkdir()
    for i in range(9):
        _png(folder / f"{i}.png", seed=i)
    if bad is not None:
        (folder / f"zz{suffix}").write_bytes(bad)
    return folder


def _files(tmp_path):
    (tmp_path / "empty.pt").write_bytes(b"")
    (tmp_path / "garbage.pt").write_bytes(b"\x00\x01 not a torch file")
    torch.save(torch.rand(3, 3), tmp_path / "small.pt")
    torch.save({"x": torch.rand(10, 3, 16, 16), "y": torch.zeros(10)}, tmp_path / "data.pt")
    return tmp_path


PROBE_BAD = {
    "empty-weights": lambda d: ["--weights", str(d / "empty.pt"), *FAKE],
    "garbage-weights": lambda d: ["--weights", str(d / "garbage.pt"), *FAKE],
    "tensor-weights": lambda d: ["--weights", str(d / "small.pt"), *FAKE],
    "folder-weights": lambda d: ["--weights", str(d), *FAKE],
    "empty-data": lambda d: ["--data", str(d / "empty.pt")],
    "garbage-data": lambda d: ["--data", str(d / "garbage.pt")],
    "matrix-data": lambda d: ["--data", str(d / "small.pt")],
    "corrupt-png": lambda d: ["--data", str(_folder(d, b"not a png"))],
    "empty-png": lambda d: ["--data", str(_folder(d, b""))],
    "corrupt-jpeg": lambda d: ["--data", str(_folder(d, b"\xff\xd8\xff\xe0 broken", ".jpg"))],
    "empty-folder": lambda d: ["--data", str((d / "nothing").mkdir() or d / "nothing")],
    "layer-called-twice": lambda d: [*FAKE, "--layers", "layer1.0.relu"],
    "layer-call-past-the-calls": lambda d: [*FAKE, "--layers", "layer1.0.relu#5"],
    "layer-unknown": lambda d: [*FAKE, "--layers", "layer9"],
    "layers-only-commas": lambda d: [*FAKE, "--layers", ",,"],
    "layers-repeated": lambda d: [*FAKE, "--layers", "layer1,layer1"],
    "grey-data-hue": lambda d: ["--fake", "--n", "8", "--size", "16", "--channels", "1"],
}


@pytest.mark.parametrize("name", list(PROBE_BAD))
def test_probe_refuses_in_one_line_and_leaves_no_output_folder(name, tmp_path, capsys):
    pytest.importorskip("torchvision")
    pytest.importorskip("PIL")
    argv = PROBE_BAD[name](_files(tmp_path))
    transforms = "Hue" if name == "grey-data-hue" else "Rotate"
    out = tmp_path / "out" / "deeper"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rc = main(["probe", *RESNET, *argv, "--transforms", transforms, "--magnitudes", "1", "--no-lie",
                   "--no-progress", "--out", str(out)])  # fmt: skip
    captured = capsys.readouterr()
    assert rc == 2, captured.err
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("augnet probe: error:"), captured.err
    assert "Traceback" not in captured.err and captured.out == ""
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "argv",
    [["demo", "--epochs", "0"], ["bench", "--min-time", "0"], ["bench", "--quick", "--providers", "nope"],
     ["reproduce", "copies", "--device", "meta"], ["probe", "--model", "nope", "--fake", "--transforms", "Rotate"],
     ["probe", "--model", "torch.nn:Identity", "--fake", "--transforms", "Rotate", "--layers", "nope"]],
    ids=["demo", "bench", "bench-providers", "reproduce", "probe", "probe-layers"],
)  # fmt: skip
def test_a_refused_command_leaves_no_output_folder(argv, tmp_path, capsys):
    out = tmp_path / "a" / "b"
    assert main([*argv, "--out", str(out)]) == 2
    assert not (tmp_path / "a").exists()
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_probe_on_a_folder_with_a_good_image_of_every_kind(tmp_path):
    pytest.importorskip("torchvision")
    pytest.importorskip("PIL")
    folder = _folder(tmp_path)
    argv = ["probe", *RESNET, "--data", str(folder), "--transforms", "Rotate", "--magnitudes", "1", "--no-lie"]
    assert main([*argv, "--no-progress", "--layers", "layer1.0.relu#1", "logits", "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "probe.json").exists()


def test_every_measure_has_a_paper():
    assert all(len(v) == 3 for v in MEASURES.values())
