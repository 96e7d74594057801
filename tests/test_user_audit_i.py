"""A learned policy taken elsewhere, as a user does: trained for a few steps, saved, edited by hand, read back in a
fresh process and run as a torchvision pipeline in a DataLoader (0 and 2 workers) or as a kornia module.

Mended here (each test of a mend fails on the code before it):
- ``Policy.save("~/p.json")`` wrote a folder named ``~`` in the working directory (``load`` read it back from there);
  a leading ``~`` is the home folder now, for ``save``, ``load`` and ``from_policy``;
- ``save`` to an existing folder, under a file, or to ``""`` raised ``IsADirectoryError`` / ``FileExistsError``
  (``""`` was the working directory): a ``ValueError`` naming the path now, nothing written (``load("")`` too);
- a write that failed part way (a full disk, a file size limit) left an existing policy file cut short: ``save``
  writes a temporary file beside it and replaces the file only once it is whole;
- NumPy numbers in a policy (numbers to every check: ``np.float32`` weights, temperature, ``args``) made ``to_json``
  return a dict ``json.dumps`` refuses (``save`` raised "Object of type float32 is not JSON serializable"): they are
  written as the Python numbers they hold; a value JSON cannot hold (a tensor in ``args``) is a ``TypeError`` naming
  the field;
- a key of an entry or of a layer's settings that augnet does not know was taken and ignored: a misspelt optional one
  (``"train_mod": "sample"``, ``"conditoned": true``, ``"transform_magnitde"``) silently gave its default. Every
  reader refuses it now, naming it and the key it is closest to.

Checked as they were (pass before and after): identity at magnitude 0, choice frequencies, ranges against the
layer's, exact Rotate against augnet's own at the same drawn angle, per-class summaries of a per-instance layer.
"""

import copy
import json
import math
import os
import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats
from torch import nn
from torch.utils.data import DataLoader, Dataset
from torchvision.transforms import v2

import augnet
from augnet.export import to_kornia, to_torchvision
from augnet.instance import ConditionedAugmentationLayer
from augnet.instance_policy import averaged_policy, policy_summary
from augnet.policy import Policy
from augnet.training import fit
from augnet.transforms import image as T

ROOT = Path(__file__).resolve().parents[1]
ALPHA = 1e-3


def trained_policy() -> Policy:
    """The policy of a tiny AugNet trained for a few steps on random 3x16x16 images."""
    torch.manual_seed(0)
    layer = augnet.AugmentationLayer([T.Rotate(), T.HorizontalFlip(), T.Brightness(), T.Solarize()],
                                     init_magnitude=0.3)  # fmt: skip
    trunk = nn.Sequential(nn.Flatten(), nn.Linear(3 * 16 * 16, 3), nn.LogSoftmax(-1))
    model = augnet.AugNet(trunk, layer, train_copies=2, eval_copies=2)
    x, y = torch.rand(16, 3, 16, 16), torch.randint(0, 3, (16,))
    fit(model, x, y, torch.optim.Adam(model.parameters(), lr=0.05), 2, 8, generator=torch.Generator().manual_seed(0))
    return model.policy()


@pytest.fixture(scope="module")
def policy() -> Policy:
    return trained_policy()


def quiet(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # approximate exports
        return fn(*args)


# ------------------------------------------------------------------------------------------------ paths


def test_a_path_with_a_tilde_is_the_home_folder(policy, tmp_path, monkeypatch):
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    written = policy.save("~/policies/p.json")
    assert written == home / "policies" / "p.json" and written.is_file()
    assert not (work / "~").exists()  # it wrote a folder named ~ here
    for given in ("~/policies/p.json", Path("~/policies/p.json")):
        loaded = Policy.load(given)
        assert loaded == policy and loaded.source == written
    assert augnet.AugmentationModule.from_policy("~/policies/p.json").policy() == policy


def test_save_names_a_folder_a_path_under_a_file_and_an_empty_path(policy, tmp_path):
    (tmp_path / "a_file").write_text("x")
    cases = [(tmp_path, "existing folder"), (str(tmp_path), "existing folder"),
             (tmp_path / "a_file" / "p.json", "a_file is a file, not a folder"), ("", "must name a file")]  # fmt: skip
    for path, match in cases:
        with pytest.raises(ValueError, match=match):
            policy.save(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"] and (tmp_path / "a_file").read_text() == "x"
    with pytest.raises(ValueError, match="must name a file"):
        Policy.load("")
    with pytest.raises(OSError, match=str(tmp_path)):  # as documented: a folder to read is the OSError naming it
        Policy.load(tmp_path)


def test_overwriting_replaces_the_file_keeping_its_mode_and_writes_through_a_link(policy, tmp_path):
    path = tmp_path / "p.json"
    path.write_text("old")
    path.chmod(0o640)
    assert policy.save(path) == path and Policy.load(path) == policy
    assert (path.stat().st_mode & 0o777) == 0o640
    link = tmp_path / "link.json"
    link.symlink_to(path)
    Policy([[dict(e) for e in policy[0]]]).save(link)  # entries only: another file
    assert link.is_symlink() and Policy.load(path).settings is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "p.json"]  # no temporary file left
    if os.path.exists(os.devnull):  # a device is written to, as before (not replaced by a file)
        policy.save(os.devnull)
        assert not Path(os.devnull).is_file()


@pytest.mark.skipif(sys.platform == "win32", reason="resource limits are POSIX")
def test_a_write_that_fails_part_way_leaves_the_existing_file_intact(policy, tmp_path):
    path = tmp_path / "p.json"
    small = Policy([[dict(policy[0][0])]])  # one entry, no settings
    small.save(path)
    before = path.read_text()
    policy.save(tmp_path / "big.json")
    assert len((tmp_path / "big.json").read_text()) > len(before) + 200
    # A file size limit (a full disk alike): the write fails part way.
    code = f"""
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
from augnet.policy import Policy
policy = Policy.load({str(tmp_path / "big.json")!r})
resource.setrlimit(resource.RLIMIT_FSIZE, ({len(before) + 100}, resource.RLIM_INFINITY))
try:
    policy.save({str(path)!r})
except OSError as err:
    print("failed:", err.errno)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"})  # fmt: skip
    assert "failed:" in out.stdout, out.stderr
    assert path.read_text() == before and Policy.load(path) == small
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.json", "p.json"]


# ---------------------------------------------------------------------------------------- NumPy values


def test_numpy_numbers_in_a_policy_are_written_as_numbers(policy, tmp_path):
    entries = Policy([[{**e, "weight": np.float32(e["weight"]), "magnitude": np.float64(e["magnitude"])}
                       for e in policy[0]]])  # fmt: skip
    entries[0][0]["args"] = {**entries[0][0]["args"], "max_angle": np.float32(1.0)}
    data = entries.to_json()
    assert json.loads(json.dumps(data, allow_nan=False)) == data
    assert all(type(e["weight"]) is float for e in data["layers"][0]["transforms"])
    back = Policy.load(entries.save(tmp_path / "entries.json"))
    assert [e["weight"] for e in back[0]] == [float(np.float32(e["weight"])) for e in policy[0]]
    assert back[0][0]["args"]["max_angle"] == 1.0
    full = Policy([[dict(e) for e in policy[0]]], copy.deepcopy(policy.settings))
    full.settings[0]["temperature"] = np.float64(full.settings[0]["temperature"])
    assert Policy.load(full.save(tmp_path / "full.json")) == policy


def test_a_value_json_cannot_hold_is_named(policy):
    entries = Policy([[{**policy[0][0], "args": {"max_angle": torch.tensor(1.0)}}]])
    with pytest.raises(TypeError, match=r"policy layer 0, entry 0 \(Rotate\)\['args'\]\['max_angle'\] must be JSON"):
        entries.to_json()


# ------------------------------------------------------------------------------------------- unknown keys


@pytest.mark.parametrize(
    "where, key, value, close",
    [
        ("layer", "train_mod", "sample", "train_mode"),
        ("layer", "conditoned", True, "conditioned"),
        ("layer", "range_sise", [16, 16], "range_size"),
        ("layer", "note", "mine", None),
        ("entry", "transform_magnitde", 0.9, "transform_magnitude"),
        ("entry", "wieght", 0.9, "weight"),
    ],
)
def test_an_unknown_key_is_refused_by_every_reader(policy, tmp_path, where, key, value, close):
    data = policy.to_json()
    (data["layers"][0] if where == "layer" else data["layers"][0]["transforms"][1])[key] = value
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data))
    readers = [Policy.from_json, augnet.AugmentationModule.from_policy, Policy.load, to_kornia, to_torchvision]
    for read in readers:
        given = path if read == Policy.load else copy.deepcopy(data)
        with pytest.raises(ValueError, match=f"unknown key '{key}'") as err:
            read(given)
        assert (f"did you mean '{close}'" in str(err.value)) == (close is not None)
        assert ("entry 1 (HorizontalFlip)" in str(err.value)) == (where == "entry")
    if where == "entry":  # an entries-only policy in memory too: the exporters ran its magnitude
        entries = Policy([[{**e, key: value} for e in policy[0]]])
        for export in (to_kornia, to_torchvision):
            with pytest.raises(ValueError, match=f"unknown key '{key}'"):
                export(entries)


# ------------------------------------------------------------------------- the journey (as it was)


class Images(Dataset):
    def __init__(self, transform, kind: str) -> None:
        self.transform, self.kind = transform, kind
        self.x = torch.rand(8, 3, 16, 16, generator=torch.Generator().manual_seed(1))

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i):
        x = self.x[i]
        if self.kind == "uint8":
            x = (x * 255).to(torch.uint8)
        elif self.kind == "pil":
            return v2.functional.pil_to_tensor(self.transform(v2.functional.to_pil_image((x * 255).to(torch.uint8))))
        return self.transform(x)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_file_read_in_a_fresh_process_draws_the_same_in_a_data_loader(policy, tmp_path, workers):
    path = policy.save(tmp_path / "p.json")
    pipeline = quiet(Policy.load(path).to_torchvision)
    pickle.loads(pickle.dumps(pipeline))
    outs = {}
    for kind in ("float", "uint8", "pil"):
        runs = []
        for _ in range(2):
            torch.manual_seed(3)
            runs.append(torch.cat(list(DataLoader(Images(pipeline, kind), batch_size=4, num_workers=workers))))
        assert torch.equal(runs[0], runs[1]), kind
        assert runs[0].dtype == (torch.float32 if kind == "float" else torch.uint8)
        outs[kind] = runs[0]
    code = f"""
import warnings, torch
warnings.simplefilter("ignore")
import augnet.export
from augnet.policy import Policy
pipeline = Policy.load({str(path)!r}).to_torchvision()
torch.manual_seed(5)
x = torch.rand(3, 16, 16, generator=torch.Generator().manual_seed(2))
print(repr(pipeline(x).sum().item()))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"})  # fmt: skip
    torch.manual_seed(5)
    here = pipeline(torch.rand(3, 16, 16, generator=torch.Generator().manual_seed(2))).sum().item()
    assert out.stdout.strip() == repr(here), out.stderr


def test_kornia_takes_batches_and_single_images_and_names_uint8(policy):
    pipeline = quiet(to_kornia, policy)
    x = torch.rand(5, 3, 16, 16)
    assert pipeline(x).shape == x.shape and pipeline(x[0]).shape == x[0].shape
    with pytest.raises(TypeError, match="floating-point images"):
        pipeline((x * 255).to(torch.uint8))


@pytest.mark.parametrize("library", ["kornia", "torchvision"])
def test_magnitude_zero_exports_the_identity(library):
    transforms = [T.Rotate(), T.TranslateX(), T.ShearY(), T.Scale(), T.HorizontalFlip(), T.Brightness(), T.Contrast(),
                  T.Hue(), T.Invert(), T.Gray(), T.AutoContrast(), T.Solarize(), T.Posterize(), T.Equalize(),
                  T.Sharpness(), T.SamplePairing()]  # fmt: skip
    layer = augnet.AugmentationLayer(transforms, init_magnitude=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # the identity is exact
        pipeline = (to_kornia if library == "kornia" else to_torchvision)(augnet.AugmentationModule([layer]).policy())
    x = torch.rand(6, 3, 16, 16)
    for seed in range(10):
        torch.manual_seed(seed)
        if library == "kornia":
            assert torch.equal(pipeline(x), x)
        else:
            u8 = (x[0] * 255).to(torch.uint8)
            pil = v2.functional.to_pil_image(u8)
            assert torch.equal(pipeline(x[0]), x[0]) and torch.equal(pipeline(u8), u8)
            assert np.array_equal(np.asarray(pipeline(pil)), np.asarray(pil))


@pytest.mark.parametrize("library", ["kornia", "torchvision"])
def test_choice_frequencies_match_the_weights(library):
    weights = np.array([0.55, 0.3, 0.15])
    layer = augnet.AugmentationLayer([T.VerticalFlip(), T.HorizontalFlip(), T.Invert()], init_magnitude=1.0)
    with torch.no_grad():
        layer.weight_logits.copy_(torch.tensor(weights).log())
    pipeline = (to_kornia if library == "kornia" else to_torchvision)(augnet.AugmentationModule([layer]).policy())
    x = torch.rand(3, 5, 7, generator=torch.Generator().manual_seed(0))
    n = 3000
    torch.manual_seed(0)
    outs = pipeline(x.expand(n, -1, -1, -1)) if library == "kornia" else [pipeline(x) for _ in range(n)]
    kinds = [x.flip(-2), x.flip(-1), 1 - x]
    which = [next(k for k, want in enumerate(kinds) if torch.allclose(o, want)) for o in outs]
    counts = np.bincount(which, minlength=3)
    assert stats.chisquare(counts, n * weights).pvalue > ALPHA, counts


def test_the_exported_ranges_are_the_layers(policy):
    entry = next(e for e in policy[0] if e["transform"] == "Rotate")
    low, high, unit = entry["range"]
    assert unit == "deg"
    tv_ops = quiet(to_torchvision, policy).transforms[0].transforms
    k_ops = quiet(to_kornia, policy).layers[0].ops
    q = [e["transform"] for e in policy[0]].index("Rotate")
    assert tv_ops[q].degrees == pytest.approx([low, high])
    assert k_ops[q]._param_generator.degrees == pytest.approx((low, high))
    # The drawn angle, applied by augnet's own Rotate: the same image (Rotate is exact in torchvision).
    x = torch.rand(3, 10, 17, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    for _ in range(5):
        params = tv_ops[q].make_params([x])
        assert low <= params["angle"] <= high
        angle = torch.tensor([math.radians(params["angle"])], dtype=torch.float64)
        want = T.Rotate().apply_transform(x[None], {"angle": angle, "aspect": torch.tensor([10 / 17]).double()})[0]
        torch.testing.assert_close(tv_ops[q].transform(x, params), want, rtol=1e-5, atol=1e-6)


def test_per_class_summaries_are_the_layers_per_sample_policy():
    torch.manual_seed(0)
    layer = ConditionedAugmentationLayer([T.Rotate(), T.Solarize()], channels=3, init_magnitude=0.3)
    with torch.no_grad():
        for p in layer.conditioner.parameters():
            p.add_(torch.randn_like(p))
    x = torch.rand(10, 3, 16, 16)
    x[5:] *= 0.2
    y = torch.tensor([0] * 5 + [1] * 5)
    summary = policy_summary(layer, (x, y))
    own = layer.policy(x)
    for k in (0, 1):
        rows = y == k
        assert summary.classes[k]["count"] == 5
        assert summary.classes[k]["weight_mean"] == pytest.approx(own["weights"][rows].double().mean(0).tolist())
        assert summary.classes[k]["magnitude_mean"] == pytest.approx(own["magnitudes"][rows].double().mean(0).tolist())
        rotate_high = own["ranges"][rows][:, 0, 1].mean().item()  # Rotate's upper end; Solarize's lower one moves
        solarize_low = own["ranges"][rows][:, 1, 0].mean().item()
        assert summary.classes[k]["range_mean"] == pytest.approx([rotate_high, solarize_low])
    averaged = averaged_policy(layer, (x, y))
    w, m = summary.class_averaged()
    assert [e["weight"] for e in averaged[0]] == pytest.approx(w, rel=1e-5)
    assert [e["magnitude"] for e in averaged[0]] == pytest.approx(m, rel=1e-5)
    assert Policy.from_json(json.loads(json.dumps(averaged.to_json()))) == averaged
    assert quiet(to_torchvision, averaged)(x[0]).shape == x[0].shape
