"""Policies and their exports as a user writes them (second pass).

What is checked:
- ``Policy == Policy`` compares the entries and the settings (a mix is not a draw, another temperature or other
  weight logits are another policy, an entries-only policy is not a full one); ``!=`` is its negation; against a
  plain list the entries alone are compared; a policy is not hashable;
- errors raised after a policy was read from a file (``layer_specs``, ``from_policy``, the exporters, ``to_json``)
  start with the file's path and keep their exception type; a hand-edited weight's error says what to write;
- ``PolicySummary.to_json`` is strict JSON (an unbounded end as ``"inf"``, as policy files write it) and
  ``PolicySummary.from_json`` reads it back; a quantile of infinite ends is infinite, not NaN;
- the exported kornia module and torchvision pipeline augment in evaluation mode, as kornia's and torchvision's own
  augmentations do: ``.eval()`` changes nothing they draw;
- exported modules in a DataLoader, pickled, deep-copied and cast to other dtypes; two-layer policies; older
  policy files; a per-instance model's policy.
"""

import copy
import json
import math
import pickle
import warnings
from operator import eq, ne

import pytest
import torch
from torch import nn

import augnet
import augnet.instance_policy as instance_policy
from augnet.export import to_kornia, to_torchvision
from augnet.instance import ConditionedAugmentationLayer
from augnet.instance_policy import PolicySummary, averaged_policy, plot_policy_summary, policy_summary
from augnet.policy import Policy, layer_specs
from augnet.transforms import audio as A
from augnet.transforms import image as T

K = pytest.importorskip("kornia.augmentation")
v2 = pytest.importorskip("torchvision.transforms.v2")

EXPORTERS = {"kornia": to_kornia, "torchvision": to_torchvision}


def module(*layers, magnitude=0.5) -> augnet.AugmentationModule:
    """A module of one AugmentationLayer per list of transforms."""
    return augnet.AugmentationModule([augnet.AugmentationLayer(list(ts), init_magnitude=magnitude) for ts in layers])


def quiet(fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, approximate-export warnings silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return fn(*args, **kwargs)


def apply(library: str, pipeline, x: torch.Tensor) -> torch.Tensor:
    """The pipeline on a batch: kornia's at once, torchvision's one image per call."""
    return pipeline(x) if library == "kornia" else torch.stack([pipeline(img) for img in x])


# ---------------------------------------------------------------------------------------------------- equality


def with_settings(policy: Policy, **changes) -> Policy:
    return Policy(copy.deepcopy(list(policy)), [{**s, **changes} for s in copy.deepcopy(policy.settings)])


def test_policies_with_equal_entries_and_other_settings_are_not_equal():
    policy = module([T.Rotate(), T.HorizontalFlip()]).policy()
    same = with_settings(policy)
    others = {
        "mix": with_settings(policy, eval_mode="mix"),
        "temperature": with_settings(policy, temperature=2.0),
        "logits": with_settings(policy, weight_logits=[1.0, 1.0]),  # the same weights, other logits
        "entries only": Policy(copy.deepcopy(list(policy))),
    }
    assert eq(same, policy) is True and ne(same, policy) is False  # != is the negation of ==
    for name, other in others.items():
        assert list(other) == list(policy), name  # the entries are the same
        assert eq(other, policy) is False and ne(other, policy) is True, name
        assert eq(policy, other) is False and ne(policy, other) is True, name  # both ways
    assert Policy(list(policy)) == Policy(list(policy))  # two entries-only policies: their entries


def test_a_policy_against_a_plain_list_compares_its_entries_and_is_not_hashable():
    policy = module([T.Rotate()]).policy()
    entries = copy.deepcopy(list(policy))
    assert eq(policy, entries) and eq(entries, policy) and not ne(policy, entries) and not ne(entries, policy)
    entries[0][0]["weight"] = 0.5
    assert policy != entries and entries != policy
    assert policy != tuple(policy)  # as a list is not equal to a tuple
    with pytest.raises(TypeError, match="unhashable"):
        hash(policy)


def test_equal_policies_stay_equal_through_a_file_a_rebuild_a_pickle_and_a_copy(tmp_path):
    original = module([T.Rotate(), T.TranslateX()], [T.Contrast()])
    original(torch.rand(2, 3, 10, 8))
    policy = original.policy()
    path = policy.save(tmp_path / "p.json")
    loaded = Policy.load(path)
    copies = [loaded, augnet.AugmentationModule.from_policy(path).policy(), pickle.loads(pickle.dumps(policy)),
              copy.deepcopy(policy)]  # fmt: skip
    for again in copies:
        assert again == policy and again.settings == policy.settings
    assert loaded.source == path and policy.source is None  # where it was read from is not compared


# --------------------------------------------------------------------------------------- errors name the file


def entries_only_file(tmp_path, name="entries.json", **entry) -> tuple[Policy, object]:
    policy = Policy([[{"transform": "Rotate", "args": {"max_angle": 1.0}, "weight": 1.0, "magnitude": 0.5,
                       "range": [-28.6, 28.6, "deg"], **entry}]])  # fmt: skip
    path = tmp_path / name
    path.write_text(json.dumps(policy.to_json()))
    return policy, path


@pytest.mark.parametrize("read", [layer_specs, augnet.AugmentationModule.from_policy, augnet.policy.rebuild_layers])
def test_rebuilding_an_entries_only_file_names_the_file(tmp_path, read):
    policy, path = entries_only_file(tmp_path)
    with pytest.raises(ValueError, match="no layer settings") as in_memory:
        read(policy)
    assert not str(in_memory.value).startswith(str(path))
    for given in (path, str(path), Policy.load(path)):
        with pytest.raises(ValueError, match="no layer settings") as err:
            read(given)
        assert str(err.value) == f"{path}: {in_memory.value}"


@pytest.mark.parametrize("library", list(EXPORTERS))
def test_exporting_a_policy_read_from_a_file_names_the_file_and_keeps_the_error_type(tmp_path, library):
    m = module([T.Rotate(), T.SamplePairing()])
    path = m.policy().save(tmp_path / "pairing.json")
    loaded = Policy.load(path)
    with pytest.raises(ValueError, match="SamplePairing cannot be exported") as in_memory:
        quiet(EXPORTERS[library], m.policy())
    assert str(in_memory.value).startswith("augnet.export")
    for export in (lambda: getattr(loaded, f"to_{library}")(), lambda: EXPORTERS[library](loaded)):
        with pytest.raises(ValueError) as err:
            quiet(export)
        assert str(err.value) == f"{path}: {in_memory.value}"
    # An entries-only file reads without building its transforms: its constructor's TypeError comes at the export
    _, bad = entries_only_file(tmp_path, "bad.json", args={"max_angle": "big"})
    with pytest.raises(TypeError) as memory_error:
        quiet(EXPORTERS[library], Policy.from_json(json.loads(bad.read_text())))
    with pytest.raises(TypeError) as err:
        quiet(EXPORTERS[library], Policy.load(bad))
    assert type(err.value) is type(memory_error.value)
    assert str(err.value) == f"{bad}: {memory_error.value}"
    with pytest.raises(TypeError, match="size must be None or a pair"):  # an argument's error is not the file's
        getattr(loaded, f"to_{library}")(size=32)


def test_a_policy_read_from_a_file_and_edited_names_the_file_when_written_or_rebuilt(tmp_path):
    path = module([T.Rotate(), T.Contrast()]).policy().save(tmp_path / "p.json")
    policy = Policy.load(path)
    policy[0][1]["weight"] = 0.9  # edited in memory
    for use in (policy.to_json, lambda: policy.save(tmp_path / "q.json"), lambda: augnet.policy.check_policy(policy),
                lambda: augnet.AugmentationModule.from_policy(policy)):  # fmt: skip
        with pytest.raises(ValueError, match=r"entry 1 \(Contrast\): weight 0.9 disagrees") as err:
            use()
        assert str(err.value).startswith(f"{path}: ") and str(err.value).count(str(path)) == 1
    assert not (tmp_path / "q.json").exists()


def test_a_hand_edited_weight_says_which_weights_and_logits_to_write_and_writing_them_loads(tmp_path):
    m = module([T.Rotate(), T.TranslateX(), T.Contrast()])
    with torch.no_grad():
        m.layers[0].weight_logits.copy_(torch.tensor([0.3, -0.2, 1.0]))
        m.layers[0].temperature = 0.5
    path = m.policy().save(tmp_path / "p.json")
    data = json.loads(path.read_text())
    entries = data["layers"][0]["transforms"]
    entries[0]["weight"] = 0.9  # the user's edit
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"entry 0 \(Rotate\): weight 0.9 disagrees") as err:
        Policy.load(path)
    message = str(err.value)
    weights = [e["weight"] for e in entries]
    normal = [w / sum(weights) for w in weights]
    listed = message.split("write them summing to 1, ")[1]
    shown_weights = json.loads(listed.split(", and ")[0])
    shown_logits = json.loads(listed.split("'weight_logits': ")[1].split(", the temperature")[0])
    assert shown_weights == pytest.approx(normal, rel=1e-8)
    assert shown_logits == pytest.approx([0.5 * math.log(w) for w in normal], rel=1e-8)
    for e, w in zip(entries, shown_weights, strict=True):
        e["weight"] = w
    data["layers"][0]["weight_logits"] = shown_logits
    path.write_text(json.dumps(data))
    rebuilt = augnet.AugmentationModule.from_policy(path)  # reads now
    torch.testing.assert_close(rebuilt.layers[0].weights.double(), torch.tensor(normal, dtype=torch.float64),
                               rtol=1e-6, atol=1e-7)  # fmt: skip


# ---------------------------------------------------------------------------------------- per-instance summary


def noise_summary(magnitude: float) -> PolicySummary:
    layer = ConditionedAugmentationLayer([A.AddNoise(), A.Gain()], channels=1, init_magnitude=magnitude)
    return policy_summary(layer, (torch.randn(5, 1, 64), torch.tensor([0, 1, 0, 1, 1])))


def test_a_summary_with_an_unbounded_range_is_strict_json_and_reads_back():
    summary = noise_summary(0.0)  # AddNoise at magnitude 0: an infinite SNR
    assert summary.classes[0]["range_mean"][0] == math.inf
    data = summary.to_json()
    text = json.dumps(data)  # Python's default writer: no Infinity / NaN token may be left for it to write
    assert "Infinity" not in text and "NaN" not in text and '"inf"' in text
    json.dumps(data, allow_nan=False)
    back = PolicySummary.from_json(json.loads(text))
    assert back.classes == summary.classes and str(back) == str(summary)
    assert (back.transforms, back.units, back.quantiles, back.size, back.one_sided, back.range_end) == (
        summary.transforms, summary.units, summary.quantiles, summary.size, summary.one_sided, summary.range_end)
    with pytest.raises(ValueError, match="summarise the model again"):
        back.policy()
    with pytest.raises(ValueError, match="not a policy summary's JSON"):
        PolicySummary.from_json({"transforms": []})


def test_a_summary_json_is_a_copy():
    summary = noise_summary(0.2)
    data = summary.to_json()
    data["classes"]["0"]["weight_mean"][0] = 99.0
    data["transforms"].append("x")
    assert summary.classes[0]["weight_mean"][0] != 99.0 and summary.transforms == ["AddNoise", "Gain"]


def test_quantiles_of_infinite_ends_are_infinite_not_nan():
    summary = noise_summary(0.0)
    for c in summary.classes.values():
        assert [q[0] for q in c["range_quantiles"]] == [math.inf] * 3
    level = torch.tensor([0.0, 1 / 3, 0.5, 0.9, 1.0], dtype=torch.float64)
    values = torch.tensor([[1.0], [2.0], [math.inf], [math.inf]], dtype=torch.float64)
    # positions 0, 1, 1.5, 2.7, 3: at 1 exactly the value 2; between 2 and inf: inf
    assert instance_policy._quantiles(values, level)[:, 0].tolist() == [1.0, 2.0, math.inf, math.inf, math.inf]
    finite = torch.randn(7, 3, dtype=torch.float64)
    # unchanged without an infinity
    assert torch.equal(instance_policy._quantiles(finite, level), torch.quantile(finite, level, dim=0))


def test_a_summary_prints_zero_not_minus_zero_and_plotting_json_says_to_read_it():
    summary = noise_summary(0.0)
    assert "-0 " not in str(summary) and "Gain w 0.50 range 0 to 0 dB" in str(summary)
    with pytest.raises(TypeError, match=r"PolicySummary\.from_json"):
        plot_policy_summary(summary.to_json(), "unused.png")


# ------------------------------------------------------------------------------------------------ eval mode


@pytest.mark.parametrize("library", list(EXPORTERS))
def test_an_export_augments_in_eval_mode_as_the_librarys_own_augmentations_do(library):
    x = torch.rand(6, 3, 12, 12)
    own = K.RandomAffine(degrees=30.0, p=1.0) if library == "kornia" else v2.RandomRotation(30.0)
    own.eval()
    assert not torch.equal(apply(library, own, x), x)  # the library's convention: eval() does not turn it off
    pipeline = quiet(EXPORTERS[library], module([T.Rotate(), T.Invert()], magnitude=0.8).policy())
    outputs = []
    for mode in (True, False):
        pipeline.train(mode)
        torch.manual_seed(3)
        outputs.append(apply(library, pipeline, x))
    assert not torch.equal(outputs[1], x)
    assert torch.equal(outputs[0], outputs[1])  # the mode changes nothing the export draws


# --------------------------------------------------------------------------------------- exported modules in use


def exported_pair(magnitude=0.5):
    policy = module([T.Rotate(), T.HorizontalFlip(), T.Solarize()], [T.Invert(), T.Posterize()],
                    magnitude=magnitude).policy()  # fmt: skip
    return policy, {name: quiet(fn, policy=policy, size=(12, 12)) for name, fn in EXPORTERS.items()}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
def test_casting_the_kornia_module_keeps_its_probabilities_and_draws(dtype):
    _, pipelines = exported_pair()
    k = pipelines["kornia"]
    cast = copy.deepcopy(k).to(dtype)
    for a, b in zip(k.layers, cast.layers, strict=True):
        assert b.probs.dtype == torch.float32 and torch.equal(a.probs, b.probs)
    assert copy.deepcopy(k).half().layers[0].probs.dtype == torch.float32
    x = torch.rand(64, 3, 12, 12)
    torch.manual_seed(5)
    k(x)
    torch.manual_seed(5)
    out = cast(x.to(dtype) if dtype == torch.float64 else x)  # .double() of a model holding it: float64 images
    assert out.dtype == (torch.float64 if dtype == torch.float64 else torch.float32)
    # The first layer's choice is drawn before any op runs (the ops cast their own tensors, as kornia's do)
    assert torch.equal(cast.layers[0].last_choice, k.layers[0].last_choice)


@pytest.mark.parametrize("library", list(EXPORTERS))
def test_pickled_and_deep_copied_exports_draw_what_the_original_draws(library):
    _, pipelines = exported_pair()
    pipeline = pipelines[library]
    x = torch.rand(5, 3, 12, 12)
    torch.manual_seed(9)
    want = apply(library, pipeline, x)
    for again in (pickle.loads(pickle.dumps(pipeline)), copy.deepcopy(pipeline)):
        torch.manual_seed(9)
        assert torch.equal(apply(library, again, x), want)


class Images(torch.utils.data.Dataset):
    def __init__(self, data, transform):
        self.data, self.transform = data, transform

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        return self.transform(self.data[i]), i


def test_exports_in_a_data_loader_on_uint8_and_float_images():
    _, pipelines = exported_pair()
    floats = torch.rand(8, 3, 12, 12)
    for data in (floats, (floats * 255).round().to(torch.uint8)):
        images, _ = next(iter(torch.utils.data.DataLoader(Images(data, pipelines["torchvision"]), batch_size=4,
                                                          num_workers=0)))  # fmt: skip
        assert images.shape == (4, 3, 12, 12) and images.dtype == data.dtype
    images, _ = next(iter(torch.utils.data.DataLoader(Images(floats, pipelines["kornia"]), batch_size=4)))
    assert images.shape == (4, 3, 12, 12) and images.dtype == torch.float32
    with pytest.raises(TypeError, match=r"floating-point images.*uint8"):
        next(iter(torch.utils.data.DataLoader(Images((floats * 255).to(torch.uint8), pipelines["kornia"]),
                                              batch_size=4)))  # fmt: skip


@pytest.mark.parametrize("library", list(EXPORTERS))
def test_a_two_layer_policy_applies_both_layers_in_order(library, tmp_path):
    # At magnitude 1 a flip always happens: the first layer flips left-right, the second top-bottom.
    m = module([T.HorizontalFlip()], [T.VerticalFlip()], magnitude=1.0)
    path = m.policy().save(tmp_path / "two.json")
    pipeline = getattr(Policy.load(path), f"to_{library}")(size=(6, 5))
    x = torch.rand(3, 3, 6, 5)
    assert torch.equal(apply(library, pipeline, x), x.flip(-1).flip(-2))
    if library == "kornia":
        assert len(pipeline.layers) == 2


def test_older_policy_files_read_as_the_current_ones(tmp_path):
    m = augnet.AugmentationModule([augnet.AugmentationLayer([A.AddNoise(), A.Gain()], init_magnitude=0.0)])
    m(torch.randn(2, 1, 32))
    policy = m.policy()
    data = policy.to_json()
    # Python's default writer, as augnet wrote unbounded ends before "inf": Infinity tokens
    old = copy.deepcopy(data)
    for e in old["layers"][0]["transforms"]:
        e["range"] = [float(v) if v in ("inf", "-inf") else v for v in e["range"][:2]] + [e["range"][2]]
    (tmp_path / "infinity.json").write_text(json.dumps(old))
    assert "Infinity" in (tmp_path / "infinity.json").read_text()
    assert Policy.load(tmp_path / "infinity.json") == policy
    # Before train_mode, last_size, range_size and transform_magnitude were written
    older = copy.deepcopy(data)
    for key in ("train_mode", "last_size", "range_size"):
        del older["layers"][0][key]
    for e in older["layers"][0]["transforms"]:
        del e["transform_magnitude"]
    (tmp_path / "older.json").write_text(json.dumps(older))
    rebuilt = augnet.AugmentationModule.from_policy(tmp_path / "older.json")
    assert rebuilt.layers[0].train_mode == "mix"  # what layers trained with before train_mode existed
    assert rebuilt.policy().layers_json() == policy.layers_json()
    assert Policy.load(tmp_path / "older.json").source == tmp_path / "older.json"


def test_a_per_instance_models_policy_is_refused_where_fixed_and_its_average_exports(tmp_path):
    layer = ConditionedAugmentationLayer([T.Rotate(), T.HorizontalFlip()], channels=3, init_magnitude=0.25)
    model = augnet.AugNet(nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 3)),
                          [layer, augnet.AugmentationLayer([T.Invert()], init_magnitude=0.3)])  # fmt: skip
    policy = model.policy()
    for use in (lambda: policy.save(tmp_path / "p.json"), policy.to_kornia, policy.to_torchvision,
                lambda: augnet.AugmentationModule.from_policy(policy)):  # fmt: skip
        with pytest.raises(ValueError, match=r"per-instance.*averaged_policy"):
            use()
    x, y = torch.rand(6, 3, 8, 8), torch.tensor([0, 1, 2, 0, 1, 2])
    average = averaged_policy(model, (x, y))
    assert len(average) == 2 and not any(s.get("conditioned") for s in average.settings)
    path = average.save(tmp_path / "average.json")
    assert Policy.load(path) == average
    for name, fn in EXPORTERS.items():
        assert apply(name, fn(Policy.load(path)), x).shape == x.shape
