"""Reliability of the per-instance layers: bad input of every kind, refusals that change nothing, copies after use.

The surfaces: ``RunningStandardize``, ``ConditionedAugmentationLayer`` (its call and ``policy(x)``),
deep copies and pickles of a layer (and of an AugNet holding one) after it has run, state dict round
trips, policy files marked conditioned, and ``policy_summary``. A refusal is a ValueError or a
TypeError that names the bad value, and leaves every parameter, buffer and attribute as it was.
"""

from __future__ import annotations

import copy
import io
import json
import math
import pickle

import pytest
import torch
from helpers import gen
from torch import nn

import augnet
from augnet import AugmentationLayer, AugmentationModule, ConditionedAugmentationLayer
from augnet.instance import RunningStandardize
from augnet.instance_policy import averaged_policy, policy_summary
from augnet.policy import Policy
from augnet.transforms import image as T

NAN, INF = math.nan, math.inf


def layer(**kwargs) -> ConditionedAugmentationLayer:
    torch.manual_seed(0)
    return ConditionedAugmentationLayer([T.Rotate(), T.TranslateX(), T.Brightness()], channels=3,
                                        init_magnitude=0.3, **kwargs)  # fmt: skip


def images(b=4, ch=3, h=8, w=8, dtype=torch.float32, seed=0):
    return torch.rand(b, ch, h, w, generator=gen(seed)).to(dtype)


def snapshot(module: nn.Module) -> dict:
    """Everything a call could change: the state dict, the modes, and the layers' remembered input size."""
    state = {k: v.detach().clone() for k, v in module.state_dict().items()}
    modes = [m.training for m in module.modules()]
    sizes = [getattr(m, "last_size", None) for m in module.modules()]
    return {"state": state, "modes": modes, "sizes": sizes}


def unchanged(module: nn.Module, before: dict) -> bool:
    now = snapshot(module)
    same_state = now["state"].keys() == before["state"].keys() and all(
        torch.equal(now["state"][k], before["state"][k]) for k in now["state"]
    )
    return same_state and now["modes"] == before["modes"] and now["sizes"] == before["sizes"]


def trained(module: nn.Module, x: torch.Tensor | None = None) -> nn.Module:
    """``module`` after one training forward and backward pass (statistics set, a policy kept)."""
    x = images(6) if x is None else x
    module.train()
    out = module(x, generator=gen(1))
    out.float().square().mean().backward()
    return module


# ----------------------------------------------------------------------- RunningStandardize


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(features=0), ValueError, "features"),
        (dict(features=-3), ValueError, "features"),
        (dict(features=2.5), TypeError, "features"),
        (dict(features="4"), TypeError, "features"),
        (dict(features=True), TypeError, "features"),
        (dict(features=None), TypeError, "features"),
        (dict(features=4, momentum=0.0), ValueError, "momentum"),
        (dict(features=4, momentum=1.5), ValueError, "momentum"),
        (dict(features=4, momentum=NAN), ValueError, "momentum"),
        (dict(features=4, momentum=INF), ValueError, "momentum"),
        (dict(features=4, momentum="0.1"), TypeError, "momentum"),
        (dict(features=4, momentum=True), TypeError, "momentum"),
        (dict(features=4, momentum=None), TypeError, "momentum"),
        (dict(features=4, eps=0.0), ValueError, "eps"),
        (dict(features=4, eps=-1e-3), ValueError, "eps"),
        (dict(features=4, eps=NAN), ValueError, "eps"),
        (dict(features=4, eps=INF), ValueError, "eps"),
        (dict(features=4, eps="1e-2"), TypeError, "eps"),
        (dict(features=4, eps=True), TypeError, "eps"),
    ],
)
def test_running_standardize_checks_its_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        RunningStandardize(**kwargs)


@pytest.mark.parametrize("kwargs", [dict(features=1), dict(features=3, momentum=1e-3), dict(features=2, eps=1e-8),
                                    dict(features=2, momentum=1)])  # fmt: skip
def test_running_standardize_takes_good_arguments(kwargs):
    norm = RunningStandardize(**kwargs)
    assert norm(torch.rand(5, kwargs["features"])).shape == (5, kwargs["features"])


@pytest.mark.parametrize("bad", [NAN, INF, -INF])
def test_running_standardize_keeps_its_statistics_through_a_non_finite_batch(bad):
    norm = RunningStandardize(3).train()
    with torch.enable_grad():
        norm(torch.rand(6, 3, generator=gen(0)))
    before = snapshot(norm)
    h = torch.rand(6, 3, generator=gen(1))
    h[2, 1] = bad
    with torch.enable_grad():
        norm(h)  # the output of that batch is not finite, as its input: the statistics are not touched
    assert unchanged(norm, before)
    assert torch.isfinite(norm.eval()(torch.rand(4, 3))).all()


def test_running_standardize_documents_the_statistics_it_evaluates_with():
    # momentum 1 (the default): the running values are those of the latest training batch, as the docstring says
    norm = RunningStandardize(2, eps=1e-12).train()
    a, b = torch.randn(8, 2, generator=gen(0)), 3 + 2 * torch.randn(8, 2, generator=gen(1))
    with torch.enable_grad():
        norm(a), norm(b)
    torch.testing.assert_close(norm.running_mean, b.mean(0))
    torch.testing.assert_close(norm.running_var, b.var(0, unbiased=False))
    doc = RunningStandardize.__doc__
    assert "latest training batch" in doc and "momentum" in doc


# ----------------------------------------------------------------------- the conditioned layer's input


def _uint8(x):
    return (x * 255).to(torch.uint8)


BAD_INPUTS = {
    "list": (lambda: images().tolist(), TypeError, "tensor"),
    "numpy": (lambda: images().numpy(), TypeError, "tensor"),
    "uint8": (lambda: _uint8(images()), TypeError, "floating"),
    "int64": (lambda: images().long(), TypeError, "floating"),
    "bool": (lambda: images() > 0.5, TypeError, "floating"),
    "complex": (lambda: images().to(torch.complex64), TypeError, "floating"),
    "rank-3": (lambda: images()[0], ValueError, "4-D"),
    "rank-2": (lambda: images().flatten(1), ValueError, "4-D"),
    "rank-5": (lambda: images()[None], ValueError, "4-D"),
    "one-channel": (lambda: images(ch=1), ValueError, "channels"),
    "four-channels": (lambda: images(ch=4), ValueError, "channels"),
    "empty-height": (lambda: images(h=0), ValueError, "empty"),
    "empty-channels": (lambda: images(ch=0), ValueError, "empty|channels"),
}


@pytest.mark.parametrize("how", ["train", "eval", "policy"])
@pytest.mark.parametrize("name", list(BAD_INPUTS))
def test_bad_input_is_a_clear_error_and_changes_nothing(name, how):
    make, error, match = BAD_INPUTS[name]
    aug = trained(layer())
    aug.train(how == "train")
    before = snapshot(aug)
    with pytest.raises(error, match=match):
        aug.policy(make()) if how == "policy" else aug(make(), copies=2)
    assert unchanged(aug, before)


@pytest.mark.parametrize("how", ["train", "eval"])
@pytest.mark.parametrize("bad", [NAN, INF, -INF])
def test_a_non_finite_image_is_refused_before_any_state_changes(bad, how):
    aug = trained(layer())
    aug.train(how == "train")
    before = snapshot(aug)
    x = images()
    x[1, 0, 2, 3] = bad
    with pytest.raises(ValueError, match=r"NaN or infinite.*\[1\]"):
        aug(x, copies=2)
    assert unchanged(aug, before)
    aug.eval()  # a clean batch still runs, in evaluation too
    assert torch.isfinite(aug(images(seed=3), copies=2)).all()


@pytest.mark.parametrize("bad", [NAN, INF])
def test_a_non_finite_batch_in_training_leaves_evaluation_usable(bad):
    model = augnet.AugNet(nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 2)), layer(), effect_every=0)
    trained(model)
    x = images()
    x[0, 1, 1, 1] = bad
    with pytest.raises(ValueError):
        model.train()(x)
    model.eval()
    assert torch.isfinite(model(images(seed=5), generator=gen(0))).all()


GOOD_INPUTS = {
    "float64": lambda: images(dtype=torch.float64),
    "float16": lambda: images(dtype=torch.float16),
    "bfloat16": lambda: images(dtype=torch.bfloat16),
    "channels-last": lambda: images().contiguous(memory_format=torch.channels_last),
    "non-contiguous": lambda: images(h=9, w=8).transpose(2, 3)[..., :8],
    "batch-1": lambda: images(b=1),
    "odd-size": lambda: images(b=3, h=5, w=13),
    "tiny": lambda: images(b=2, h=1, w=1),
}


@pytest.mark.parametrize("how", ["train", "eval", "policy"])
@pytest.mark.parametrize("name", list(GOOD_INPUTS))
def test_good_unusual_input_runs(name, how):
    aug = trained(layer())
    aug.train(how == "train")
    x = GOOD_INPUTS[name]()
    if how == "policy":
        pol = aug.policy(x)
        assert pol["weights"].shape == (len(x), 3) and torch.isfinite(pol["ranges"]).all()
        return
    out = aug(x, copies=2, generator=gen(0))
    assert out.shape == (2 * len(x), *x.shape[1:]) and out.dtype == x.dtype and torch.isfinite(out).all()


@pytest.mark.parametrize("how", ["train", "eval"])
def test_an_empty_batch_gives_an_empty_batch(how):
    aug = trained(layer()).train(how == "train")
    assert aug(images(b=0), copies=3).shape == (0, 3, 8, 8)
    assert aug.policy(images(b=0))["weights"].shape == (0, 3)


def test_float64_images_get_the_policy_of_their_float32_values_as_the_global_layer_takes_them():
    aug = trained(layer()).eval()
    x = images()
    a, b = aug.policy(x), aug.policy(x.double())
    torch.testing.assert_close(b["weights"], a["weights"], rtol=0, atol=0)  # the conditioner runs in float32
    out = aug(x.double(), copies=2, generator=gen(3))
    assert out.dtype == torch.float64 and torch.isfinite(out).all()
    plain = AugmentationLayer([T.Rotate()], init_magnitude=0.3).eval()
    assert plain(x.double()).dtype == torch.float64


def test_on_meta_a_call_gives_shapes_and_a_policy_is_refused():
    aug = layer().to("meta")
    x = torch.empty(4, 3, 8, 8, device="meta")
    assert aug(x, copies=2).shape == (8, 3, 8, 8)
    with pytest.raises(ValueError, match="meta"):
        aug.policy(x)


# ----------------------------------------------------------------------- copies and pickles after use


def _holders():
    return {
        "layer": lambda: layer(),
        "module": lambda: AugmentationModule([layer(), AugmentationLayer([T.Brightness()], init_magnitude=0.2)]),
        "augnet": lambda: augnet.AugNet(nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 2)), layer()),
    }


def _used(kind, how):
    module = _holders()[kind]()
    x = images(6)
    if how == "train-backward":
        trained(module, x)
    elif how == "train-forward":
        module.train()(x, generator=gen(1))
    else:
        with torch.no_grad():
            module.eval()(x, generator=gen(1))
    return module


def _deepcopy(m):
    return copy.deepcopy(m)


def _pickle(m):
    return pickle.loads(pickle.dumps(m))


def _torch_save(m):
    buf = io.BytesIO()
    torch.save(m, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=False)


@pytest.mark.parametrize("copier", [_deepcopy, _pickle, _torch_save], ids=["deepcopy", "pickle", "torch.save"])
@pytest.mark.parametrize("how", ["train-backward", "train-forward", "no-grad"])
@pytest.mark.parametrize("kind", ["layer", "module", "augnet"])
def test_a_used_layer_can_be_copied_and_the_copy_behaves_alike(kind, how, copier):
    module = _used(kind, how)
    again = copier(module)
    module.eval(), again.eval()
    x = images(seed=4)
    torch.testing.assert_close(again(x, generator=gen(2)), module(x, generator=gen(2)), rtol=0, atol=0)
    assert unchanged(again, snapshot(module))


def test_an_averaged_model_of_a_trained_augnet():
    model = _used("augnet", "train-backward")
    ema = torch.optim.swa_utils.AveragedModel(model)  # deep-copies the model
    ema.update_parameters(model)
    assert torch.isfinite(ema.eval()(images(), generator=gen(0))).all()


def test_the_regulariser_reads_the_latest_pass_and_a_copy_has_not_run():
    model = _used("augnet", "train-forward")
    assert torch.isfinite(augnet.selective_regularizer(model))
    with pytest.raises(ValueError, match="has not run"):
        augnet.selective_regularizer(copy.deepcopy(model))


# ----------------------------------------------------------------------- state dict round trips


@pytest.mark.parametrize("kind", ["layer", "module", "augnet"])
def test_a_state_dict_round_trip_keeps_the_policy_and_the_outputs(kind):
    module = _used(kind, "train-backward")
    fresh = _holders()[kind]()
    fresh.load_state_dict(module.state_dict())
    target = module.augment if kind == "augnet" else module
    again = fresh.augment if kind == "augnet" else fresh
    assert str(again.policy()) == str(target.policy())  # TranslateX's range in pixels of the last input, both
    module.eval(), fresh.eval()
    x = images(seed=6)
    torch.testing.assert_close(fresh(x, generator=gen(2)), module(x, generator=gen(2)), rtol=0, atol=0)
    inner, inner_again = (target.layers[0], again.layers[0]) if kind != "layer" else (target, again)
    torch.testing.assert_close(inner_again.policy(x)["ranges"], inner.policy(x)["ranges"], rtol=0, atol=0)


# ----------------------------------------------------------------------- policy files marked conditioned


def _conditioned_file() -> dict:
    """A full policy file of a global layer, with its layer marked conditioned (what no exporter writes)."""
    plain = AugmentationModule([AugmentationLayer([T.Rotate(), T.TranslateX()], init_magnitude=0.3)])
    plain(images())
    data = plain.policy().to_json()
    data["layers"][0]["conditioned"] = True
    return data


@pytest.mark.parametrize(
    "read",
    [
        lambda d, p: Policy.from_json(d),
        lambda d, p: AugmentationModule.from_policy(d),
        lambda d, p: AugmentationModule.from_policy(p),
        lambda d, p: AugmentationModule.from_policy({"policy": d}),
        lambda d, p: Policy.from_json(json.loads(json.dumps(d))).to_kornia(),
    ],
    ids=["from_json", "from_policy-dict", "from_policy-file", "from_policy-record", "export"],
)
def test_a_policy_file_marked_conditioned_is_refused_by_every_reader(read, tmp_path):
    data = _conditioned_file()
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="per-instance"):
        read(data, path)


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_a_policy_file_with_a_bad_conditioned_mark_is_refused(value):
    data = _conditioned_file()
    data["layers"][0]["conditioned"] = value
    with pytest.raises((TypeError, ValueError), match="conditioned"):
        Policy.from_json(data)


def test_a_policy_file_marked_not_conditioned_reads_as_before():
    data = _conditioned_file()
    data["layers"][0]["conditioned"] = False
    assert isinstance(AugmentationModule.from_policy(data), AugmentationModule)


# ----------------------------------------------------------------------- policy_summary


LABELS = torch.tensor([0, 1, 0, 1, 2, 2])
BAD_SUMMARIES = {
    "shorter-labels": (lambda: (images(6), LABELS[:4]), ValueError, "labels"),
    "longer-labels": (lambda: (images(6), torch.arange(8)), ValueError, "labels"),
    "one-hot-labels": (lambda: (images(6), torch.eye(3)[LABELS]), ValueError, "labels"),
    "fractional-labels": (lambda: (images(6), LABELS + 0.5), ValueError, "labels"),
    "nan-labels": (lambda: (images(6), LABELS.float().index_fill(0, torch.tensor([2]), NAN)), ValueError, "labels"),
    "inf-labels": (lambda: (images(6), LABELS.float().index_fill(0, torch.tensor([2]), INF)), ValueError, "labels"),
    "complex-labels": (lambda: (images(6), LABELS.to(torch.complex64)), TypeError, "labels"),
    "string-labels": (lambda: (images(6), ["a"] * 6), TypeError, "labels"),
    "empty-data": (lambda: (images(0), LABELS[:0]), ValueError, "no sample"),
    "no-batches": (list, ValueError, "no batch"),
    "empty-batches": (lambda: [(images(0), LABELS[:0]), (images(0), LABELS[:0])], ValueError, "no sample"),
    "not-a-pair": (lambda: [images(6)], ValueError, "batches"),
    "x-not-a-tensor": (lambda: [(images(6).tolist(), LABELS)], TypeError, "tensor"),
    "x-wrong-channels": (lambda: (images(6, ch=1), LABELS), ValueError, "channels"),
    "x-non-finite": (lambda: (images(6).index_fill(0, torch.tensor([1]), NAN), LABELS), ValueError, "NaN"),
}


@pytest.mark.parametrize("name", list(BAD_SUMMARIES))
def test_policy_summary_refuses_what_it_cannot_summarise(name):
    make, error, match = BAD_SUMMARIES[name]
    aug = trained(layer())
    before = snapshot(aug)
    with pytest.raises(error, match=match):
        policy_summary(aug, make())
    assert unchanged(aug, before)


@pytest.mark.parametrize(
    "labels",
    [LABELS, LABELS.float(), LABELS[:, None], LABELS.int(), LABELS.tolist()],
    ids=["long", "whole-floats", "column", "int32", "list"],
)
def test_policy_summary_takes_labels_in_any_integer_form(labels):
    summary = policy_summary(trained(layer()), (images(6), labels))
    assert sorted(summary.classes) == [0, 1, 2] and all(c["count"] == 2 for c in summary.classes.values())
    assert all(isinstance(k, int) for k in summary.classes)


@pytest.mark.parametrize("quantiles", [(), (0.5, 1.5), (NAN,), ("0.5",), 0.5])
def test_policy_summary_refuses_bad_quantiles(quantiles):
    with pytest.raises((TypeError, ValueError), match="quantiles"):
        policy_summary(trained(layer()), (images(6), LABELS), quantiles=quantiles)


def test_the_averaged_policy_of_a_batch_writes_a_file():
    policy = averaged_policy(trained(layer()), (images(6), LABELS))
    again = AugmentationModule.from_policy(json.loads(json.dumps(policy.to_json())))
    assert str(again.policy()) == str(policy)


@pytest.mark.parametrize("conditioned", [True, False], ids=["per-instance", "global"])
def test_a_models_policy_of_a_batch_names_the_layers_policy_and_changes_nothing(conditioned):
    # A per-instance layer's policy(x) takes a batch; a module's or a model's takes a spatial size only: given a
    # batch it says where the per-sample policy is, instead of failing inside the layer's settings.
    first = layer() if conditioned else AugmentationLayer([T.Rotate(), T.TranslateX()], init_magnitude=0.3)
    model = augnet.AugNet(nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 4)), first)
    x = images()
    before = snapshot(model)
    for call in (model.policy, model.augment.policy):
        with pytest.raises(TypeError, match=r"spatial size, got a tensor.*layer\.policy\(x\)"):
            call(x)
    assert unchanged(model, before)
    if conditioned:
        assert first.policy(x)["weights"].shape == (4, 3)


def test_policy_summary_keeps_each_submodules_own_mode():
    first = trained(layer())
    first.train()
    first.conditioner.eval()  # a frozen conditioner inside a training layer stays frozen
    policy_summary(first, (images(6), LABELS))
    assert first.training
    assert not first.conditioner.training
