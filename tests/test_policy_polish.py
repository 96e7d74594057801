"""Policies as a user meets them: how one shows in a notebook, reading files that are not policy files, exporting
a layer left with nothing to draw, and a file whose transform arguments no constructor takes.

What is checked:
- ``repr(policy)`` (what a REPL or notebook shows) is the readable table of ``str(policy)`` under a line with the
  number of layers and whether the policy is a full policy file; it never raises, whatever the entries hold;
- ``Policy.load`` (and every reader of a path) names the file in its errors: broken JSON (with the line and column
  where it breaks), an empty file, a file that is not UTF-8 text, JSON that is not an object, a dict that is not a
  policy file, an entry a reader refuses; all of them still ``ValueError`` / ``TypeError``;
- a policy with no layers is not written (``from_json`` would refuse the file);
- exported, a layer with nothing to draw (no entries left, or weights all 0) is the identity: the pipeline gives
  back its input exactly; an entry of weight 0 is never drawn, so a transform without a counterpart may have it;
- a ``Contrast`` / ``Saturation`` ``max_delta`` above 1 in a file (hand-written, or from an older augnet) is
  refused by every reader with the constructor's reason, naming the entry; at ``max_delta`` 1 the exported
  factor range starts at 0.
"""

import json
import warnings

import pytest
import torch

import augnet
from augnet.export import to_kornia, to_torchvision
from augnet.policy import Policy
from augnet.transforms import image as T

pytest.importorskip("kornia")
pytest.importorskip("torchvision")

EXPORTERS = {"kornia": to_kornia, "torchvision": to_torchvision}


def module(*layers) -> augnet.AugmentationModule:
    """A module of one AugmentationLayer per list of transforms (default settings)."""
    return augnet.AugmentationModule([augnet.AugmentationLayer(list(ts), init_magnitude=0.5) for ts in layers])


def batch(b: int = 6) -> torch.Tensor:
    return torch.rand(b, 3, 12, 12)


def exported(library: str, policy):
    """The pipeline of ``policy``, approximate-export warnings silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return EXPORTERS[library](policy)


# ------------------------------------------------------------------------------------------------------ repr


def test_repr_is_the_table_under_a_line_saying_what_the_policy_is():
    full = module([T.Rotate(), T.HorizontalFlip()], [T.Contrast()]).policy()
    entries = Policy(list(full))  # the same entries, no settings
    for policy, kind in ((full, "full policy file"), (entries, "entries only")):
        text = repr(policy)
        head, _, table = text.partition("\n")
        assert head.startswith(f"Policy of {len(policy)} layers") and kind in head
        assert table == str(policy)  # the table str() gives, whole
        for layer in policy:
            for e in layer:
                assert e["transform"] in table
    one = Policy([full[1]])
    assert repr(one).startswith("Policy of 1 layer (")
    assert repr(Policy()) == "Policy of 0 layers (entries only: no settings)"


def test_str_is_still_the_bare_table():
    policy = module([T.Rotate(), T.HorizontalFlip()]).policy()
    lines = str(policy).split("\n")
    assert lines[0] == "layer 0:" and len(lines) == 1 + len(policy[0])
    assert not str(policy).startswith("Policy")


def test_a_hand_written_policy_without_ranges_shows_its_weights_and_magnitudes():
    # What the exporters take (docs/bad_input.md): no ranges. str() raised KeyError('range').
    policy = Policy([[{"transform": "Rotate", "weight": 3.0, "magnitude": 0.25},
                      {"transform": "Invert", "weight": 1.0, "magnitude": 0.5}]])  # fmt: skip
    text = str(policy)
    assert "Rotate" in text and "weight 3.000" in text and "magnitude 0.250" in text and "range" not in text
    assert text.split("\n")[1].endswith("<")  # the layer's choice is still marked
    assert repr(policy).endswith(text)


def test_repr_of_entries_the_table_cannot_show_gives_the_entries_and_does_not_raise():
    for layers in ([[{"transform": "Rotate", "weight": "heavy", "magnitude": 0.5}]], [["not an entry"]], [[{}]]):
        text = repr(Policy(layers))
        assert text.startswith("Policy of 1 layer") and repr(layers[0][0]) in text


# ------------------------------------------------------------------------------------------------ reading files


def saved(tmp_path) -> tuple[Policy, object]:
    policy = module([T.Rotate(), T.Contrast(max_delta=0.9)]).policy()
    return policy, policy.save(tmp_path / "policy.json")


def test_broken_json_is_a_value_error_naming_the_file_and_where_it_breaks(tmp_path):
    _, path = saved(tmp_path)
    text = path.read_text()
    broken = text[: len(text) // 2]  # cut off halfway, as by a full disk or an interrupted copy
    path.write_text(broken)
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(broken)
    where = f"line {expected.value.lineno}, column {expected.value.colno}"
    for read in (Policy.load, augnet.AugmentationModule.from_policy):
        with pytest.raises(ValueError, match="not valid JSON") as err:
            read(path)
        assert str(path) in str(err.value) and where in str(err.value)
        assert not isinstance(err.value, json.JSONDecodeError)  # ours, naming the file


@pytest.mark.parametrize(
    "content, match",
    [
        (b"", "is empty"),
        (b"  \n\n", "is empty"),
        (b"[1, 2]", "holds a JSON list"),
        (b'"augnet.policy"', "holds a JSON str"),
        (b"\xff\xfe{}", "not UTF-8 text"),
        (b'{"format": "other"}', "not an augnet policy file"),
        (b'{"format": "augnet.policy", "version": 9, "layers": []}', "unsupported policy file version 9"),
    ],
)
def test_a_file_that_is_not_a_policy_file_is_a_value_error_naming_it(tmp_path, content, match):
    path = tmp_path / "weird.json"
    path.write_bytes(content)
    for read in (Policy.load, augnet.AugmentationModule.from_policy, augnet.policy.read_policy):
        with pytest.raises(ValueError, match=match) as err:
            read(path)
        assert str(path) in str(err.value)


def test_an_entry_a_reader_refuses_is_named_with_the_file(tmp_path):
    _, path = saved(tmp_path)
    data = json.loads(path.read_text())
    data["layers"][0]["transforms"][1]["weight"] = 0.9  # a hand-edited weight the state does not give
    path.write_text(json.dumps(data))
    for read in (Policy.load, augnet.AugmentationModule.from_policy):
        with pytest.raises(ValueError, match=r"policy layer 0, entry 1 \(Contrast\): weight 0.9 disagrees") as err:
            read(path)
        assert str(err.value).startswith(f"{path}: ")
    data["layers"][0]["temperature"] = "warm"
    path.write_text(json.dumps(data))
    with pytest.raises(TypeError, match="temperature must be a number") as err:  # a TypeError stays one
        Policy.load(path)
    assert str(path) in str(err.value)


def test_a_missing_file_or_a_folder_is_an_os_error_naming_it(tmp_path):
    for path in (tmp_path / "nowhere.json", tmp_path):
        with pytest.raises(OSError) as err:
            Policy.load(path)
        assert str(path) in str(err.value)


def test_json_text_given_to_from_json_says_to_parse_it():
    text = json.dumps(module([T.Rotate()]).policy().to_json())
    with pytest.raises(ValueError, match=r"got str \(JSON text: pass json.loads\(text\)"):
        Policy.from_json(text)
    assert Policy.from_json(json.loads(text)) == Policy.from_json(json.loads(text))


def test_a_policy_of_no_layers_is_not_written(tmp_path):
    # from_json refuses a file of no layers: to_json wrote one all the same, and save() a file load() refused.
    with pytest.raises(ValueError, match="non-empty list: this policy has no layers"):
        Policy().to_json()
    with pytest.raises(ValueError, match="no layers"):
        Policy().save(tmp_path / "empty.json")
    assert not (tmp_path / "empty.json").exists()


def test_a_saved_policy_still_reads_back_equal(tmp_path):
    policy, path = saved(tmp_path)
    again = Policy.load(path)
    assert again == policy and again.settings == policy.settings
    assert repr(again) == repr(policy)


# ------------------------------------------------------------------------------------------------ export: nothing left


def without_sample_pairing(policy) -> Policy:
    """docs/export.md's recipe: drop SamplePairing (an entries-only policy)."""
    return Policy([[e for e in layer if e["transform"] != "SamplePairing"] for layer in policy])


def zero_weights(policy) -> Policy:
    return Policy([[{**e, "weight": 0.0} for e in layer] for layer in policy])


@pytest.mark.parametrize("library", list(EXPORTERS))
def test_a_layer_with_nothing_to_draw_is_exported_as_the_identity(library):
    nothing = [
        without_sample_pairing(module([T.SamplePairing()]).policy()),  # the doc's recipe on a SamplePairing layer
        zero_weights(module([T.Rotate(), T.Invert()]).policy()),  # every weight 0: none is ever drawn
        Policy([[], []]),
    ]
    x = batch()
    for policy in nothing:
        assert Policy.from_json(policy.to_json()) == policy  # a file (it was one before) ...
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # ... that exports, exactly and silently
            pipeline = EXPORTERS[library](policy)
            for _ in range(3):
                if library == "kornia":
                    assert torch.equal(pipeline(x), x)
                    assert all((layer.last_choice == -1).all() for layer in pipeline.layers)  # from no entry
                else:
                    for image in x:  # one image per call, as torchvision pipelines take them
                        assert torch.equal(pipeline(image), image)
                    assert torch.equal(pipeline(x), x)


@pytest.mark.parametrize("library", list(EXPORTERS))
def test_an_empty_layer_after_a_drawing_one_is_the_identity_there(library):
    policy = without_sample_pairing(module([T.Invert()], [T.SamplePairing()]).policy())
    assert [len(layer) for layer in policy] == [1, 0]
    pipeline = exported(library, policy)
    x = batch()
    if library == "kornia":
        first, second = pipeline.layers
        y = first(x)
        assert torch.equal(second(y), y) and (second.last_choice == -1).all()
        out = pipeline(x)
        inverted = (out - (1 - x)).abs().amax(dim=(1, 2, 3)) == 0  # Invert at probability 0.5, the rest as it was
        kept = (out - x).abs().amax(dim=(1, 2, 3)) == 0
        assert bool((inverted | kept).all())
    else:
        assert len(pipeline.transforms) == 2
        stage = pipeline.transforms[1]
        assert torch.equal(stage(x[0]), x[0])


@pytest.mark.parametrize("library", list(EXPORTERS))
def test_an_entry_of_weight_zero_is_never_drawn_so_it_needs_no_counterpart(library):
    # SamplePairing has no counterpart: at weight 0 it is never drawn, so the layer exports (it was refused).
    base = module([T.Invert(), T.SamplePairing()]).policy()
    policy = Policy([[base[0][0], {**base[0][1], "weight": 0.0}]])
    pipeline = exported(library, policy)
    if library == "kornia":
        pipeline(batch(64))
        assert set(pipeline.layers[0].last_choice.tolist()) == {0}
    else:
        assert len(pipeline.transforms[0].transforms) == 1
    with pytest.raises(ValueError, match="SamplePairing cannot be exported"):
        EXPORTERS[library](Policy([[base[0][0], {**base[0][1], "weight": 1e-6}]]))  # drawn, however rarely


def test_an_empty_layer_of_a_full_policy_says_to_drop_transforms_from_an_entries_only_policy():
    policy = module([T.Rotate()], [T.SamplePairing()]).policy()
    kept = Policy([[e for e in layer if e["transform"] != "SamplePairing"] for layer in policy], policy.settings)
    for fn in (kept.to_json, lambda: to_kornia(kept), lambda: augnet.AugmentationModule.from_policy(kept)):
        with pytest.raises(ValueError, match=r"policy layer 1 has no transforms .*entries-only policy"):
            fn()


# ------------------------------------------------------------------------------------------------ max_delta above 1


@pytest.mark.parametrize("name", ["Contrast", "Saturation"])
def test_a_file_with_max_delta_above_one_is_refused_naming_the_entry(tmp_path, name):
    cls = getattr(T, name)
    data = module([T.Rotate(), cls(max_delta=0.9)]).policy().to_json()
    data["layers"][0]["transforms"][1]["args"]["max_delta"] = 1.5  # by hand, or an older augnet's file
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    where = rf"policy layer 0, entry 1: {name}\(\*\*\{{'max_delta': 1.5.*cannot be built: max_delta must lie in"
    readers = [lambda: Policy.from_json(data), lambda: Policy.load(path), lambda: to_kornia(data),
               lambda: to_torchvision(data), lambda: augnet.AugmentationModule.from_policy(path)]  # fmt: skip
    for read in readers:
        with pytest.raises(ValueError, match=where):
            read()


@pytest.mark.parametrize("library", list(EXPORTERS))
@pytest.mark.parametrize("name", ["Contrast", "Saturation"])
def test_an_entries_only_policy_with_max_delta_above_one_is_refused_naming_the_entry(library, name):
    # No settings: the exporters build the transform themselves; the constructor's error named no entry.
    entry = {"transform": name, "args": {"max_delta": 1.5}, "weight": 1.0, "magnitude": 1.0}
    policy = Policy([[{"transform": "Rotate", "weight": 1.0, "magnitude": 0.5}], [dict(entry)]])
    with pytest.raises(ValueError, match=rf"policy layer 1, entry 0: {name}.*max_delta must lie in \(0, 1\]"):
        EXPORTERS[library](policy)
    entry["args"] = {"max_dleta": 0.5}  # a misspelt argument: a TypeError, named too
    with pytest.raises(TypeError, match=rf"policy layer 0, entry 0: {name}.*unexpected keyword argument"):
        EXPORTERS[library](Policy([[entry]]))


@pytest.mark.parametrize("library", list(EXPORTERS))
@pytest.mark.parametrize("name", ["Contrast", "Saturation"])
def test_at_max_delta_one_the_exported_factor_range_starts_at_zero(library, name):
    policy = Policy([[{"transform": name, "args": {"max_delta": 1.0}, "weight": 1.0, "magnitude": 1.0}]])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pipeline = EXPORTERS[library](policy)
    (op,) = pipeline.layers[0].ops if library == "kornia" else pipeline.transforms[0].transforms
    low, high = (float(v) for v in getattr(op, name.lower()))
    assert (low, high) == (0.0, 2.0)  # 1 -/+ max_delta * magnitude, nothing raised or capped
    (note,) = [str(w.message) for w in caught]
    assert "clips" in note and "raised" not in note and "capped" not in note


def test_an_exporter_given_a_path_says_to_read_the_file_first(tmp_path):
    _, path = saved(tmp_path)
    for export in EXPORTERS.values():
        for given in (path, str(path)):
            with pytest.raises(TypeError, match=r"got the path .*Policy.load\(path\)"):
                export(given)
