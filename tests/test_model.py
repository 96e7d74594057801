"""AugNet: copies, one trunk call, aggregation, policy, bad input."""

import contextlib
import math

import pytest
import torch
import torch.nn.functional as F
from helpers import gen
from torch import nn

import augnet
from augnet.transforms import image as T
from augnet.transforms import stratified_copies


class Counting(nn.Module):
    """A trunk that records how often, and on how many rows, it runs."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.calls = []

    def forward(self, x):
        self.calls.append(x.shape[0])
        return self.inner(x)


def cnn(classes=5):
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, classes)
    )


def layer(mag=0.4):
    return augnet.AugmentationLayer([T.Rotate(), T.TranslateX(), T.Brightness()], init_magnitude=mag)


def images(b=3, seed=0):
    return torch.rand(b, 3, 8, 8, generator=gen(seed))


@pytest.mark.parametrize("stratify", [True, False])
@pytest.mark.parametrize("how", ["log_softmax", "softmax", "mean"])
def test_aggregation_equals_a_hand_written_average(how, stratify):
    trunk = cnn()
    model = augnet.AugNet(trunk, layer(), eval_copies=4, aggregate=how, stratify=stratify).eval()
    x = images()
    out = model(x, generator=gen(1))
    # The evaluation's own draws: stratified over each sample's 4 copies (the default), or independent.
    with stratified_copies(4) if stratify else contextlib.nullcontext():
        rows = model.augment(x, copies=4, generator=gen(1))
    per_copy = [trunk(rows[c * 3 : (c + 1) * 3]) for c in range(4)]
    if how == "log_softmax":
        expected = sum(F.log_softmax(o, 1) for o in per_copy) / 4
    elif how == "softmax":
        expected = torch.log(sum(F.softmax(o, 1) for o in per_copy) / 4)
    else:
        expected = sum(per_copy) / 4
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-6)


def test_trunk_runs_once_on_the_super_batch():
    trunk = Counting(cnn())
    model = augnet.AugNet(trunk, layer(), train_copies=2, eval_copies=5, effect_every=0)
    model(images(b=3))
    model.eval()
    model(images(b=3))
    model(images(b=3), copies=7)
    assert trunk.calls == [6, 15, 21]


def test_regression_trunk_with_mean_aggregation():
    trunk = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 1), nn.Flatten(0))  # (N,) outputs
    model = augnet.AugNet(trunk, layer(0.0), eval_copies=3, aggregate="mean").eval()
    x = images(b=4)
    # At magnitude 0 every copy is the input itself, so the average is the trunk's output.
    torch.testing.assert_close(model(x), trunk(x), rtol=1e-5, atol=1e-5)


def test_exactly_invariant_trunk_gives_the_same_output_for_every_draw():
    # A trunk that only sees the mean brightness-free content is invariant to
    # horizontal flips; averaging over flips changes nothing.
    trunk = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(3, 4))
    flips = augnet.AugmentationLayer([T.HorizontalFlip(), T.VerticalFlip()], init_magnitude=0.5)
    model = augnet.AugNet(trunk, flips, eval_copies=6).eval()
    x = images()
    torch.testing.assert_close(model(x, generator=gen(0)), model(x, generator=gen(1)))
    torch.testing.assert_close(model(x, generator=gen(0)), F.log_softmax(trunk(x), 1))


def test_training_end_to_end_moves_the_augmentation_parameters():
    model = augnet.AugNet(cnn(), layer(), train_copies=2)
    opt = torch.optim.Adam(augnet.param_groups(model), lr=1e-2)
    before = [p.detach().clone() for p in model.augment.parameters()]
    for _ in range(3):
        loss = F.nll_loss(model(images(b=6)), torch.arange(6) % 5) + 0.5 * augnet.selective_regularizer(model)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert all(not torch.equal(a, b) for a, b in zip(before, model.augment.parameters(), strict=True))


def test_policy_reports_natural_units():
    model = augnet.AugNet(cnn(), augnet.AugmentationModule([layer(0.25), layer(0.5)]))
    model(torch.rand(2, 3, 16, 20))
    policy = model.policy()
    assert len(policy) == 2
    first = {e["transform"]: e for e in policy[0]}
    assert first["Rotate"]["range"] == (-45.0, 45.0, "deg")
    assert first["TranslateX"]["range"] == (-1.25, 1.25, "px")  # 0.25 x a quarter of the width 20
    assert math.isclose(sum(e["weight"] for e in policy[1]), 1.0, rel_tol=1e-6)
    text = str(policy)
    assert "layer 1:" in text and "±45 deg" in text
    assert " <" not in text  # untrained: every weight equal, no choice to mark
    with torch.no_grad():
        model.augment.layers[1].weight_logits[1] += 1.0
    marked = [line for line in str(model.policy()).splitlines() if line.endswith(" <")]
    assert len(marked) == 1 and marked[0].split()[0] == policy[1][1]["transform"]  # layer 1's second transform
    assert policy.layers_json()[0][0]["range"] == [-45.0, 45.0, "deg"]


def test_a_single_layer_or_a_list_is_wrapped_in_a_module():
    a = augnet.AugNet(cnn(), layer())
    b = augnet.AugNet(cnn(), [layer(), layer()])
    assert isinstance(a.augment, augnet.AugmentationModule) and len(b.augment.layers) == 2


def test_state_dict_round_trip_keeps_the_policy():
    a = augnet.AugNet(cnn(), layer(0.3))
    with torch.no_grad():
        a.augment.layers[0].weight_logits.copy_(torch.tensor([1.0, 0.0, -1.0]))
    b = augnet.AugNet(cnn(), layer())
    b.load_state_dict(a.state_dict())
    assert str(a.policy()) == str(b.policy())
    a.eval(), b.eval()
    torch.testing.assert_close(a(images(), generator=gen(2)), b(images(), generator=gen(2)))


# ------------------------------------------------------------------ bad input


def test_transforms_given_where_layers_belong_are_refused_with_the_fix():
    with pytest.raises(TypeError, match=r"got the transform\(s\) Rotate\(\): put transforms in a layer"):
        augnet.AugNet(cnn(), T.Rotate())
    with pytest.raises(TypeError, match=r"AugmentationLayer\(\[Rotate\(\), TranslateX\(\)\]\)"):
        augnet.AugNet(cnn(), [T.Rotate(), T.TranslateX()])
    with pytest.raises(TypeError, match=r"the transform\(s\) Brightness\(\)"):
        augnet.AugNet(cnn(), [layer(), T.Brightness()])


def test_trunk_output_that_cannot_be_aggregated():
    x = images()
    with pytest.raises(TypeError, match="must return a tensor to aggregate, got tuple; wrap a trunk"):
        augnet.AugNet(nn.Sequential(cnn(), _Tuple()), layer())(x)
    with pytest.raises(ValueError, match=r"needs a class dimension.*use aggregate='mean'"):
        augnet.AugNet(nn.Sequential(cnn(1), nn.Flatten(0)), layer())(x)
    with pytest.raises(ValueError, match="must return one row per input row"):
        augnet.AugNet(_Sum(), layer(), train_copies=2)(x)


class _Tuple(nn.Module):
    def forward(self, x):
        return x, x


class _Sum(nn.Module):
    def forward(self, x):
        return x.sum()


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(trunk=lambda x: x), TypeError, "trunk must be an nn.Module"),
        (dict(train_copies=0), ValueError, "copies must be >= 1, got 0"),
        (dict(eval_copies=-2), ValueError, "copies must be >= 1, got -2"),
        (dict(aggregate="max"), ValueError, "aggregate must be one of"),
        (dict(augment=[]), ValueError, "layers must not be empty"),
    ],
)
def test_bad_construction(kwargs, error, match):
    kwargs = {"trunk": cnn(), "augment": layer(), **kwargs}
    with pytest.raises(error, match=match):
        augnet.AugNet(**kwargs)


def test_bad_forward_input_modifies_nothing():
    model = augnet.AugNet(cnn(), layer())
    state = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(ValueError, match="4-D input"):
        model(torch.rand(3, 8, 8))
    with pytest.raises(TypeError, match="floating-point"):
        model(torch.zeros(2, 3, 8, 8, dtype=torch.uint8))
    with pytest.raises(TypeError, match="expects a tensor input, got list"):
        model([1, 2])
    with pytest.raises(ValueError, match="copies must be >= 1"):
        model(images(), copies=0)
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in state.items())


def test_module_apply_reaches_every_submodule_of_a_model_with_transforms():
    # nn.Module.apply(fn) is not hidden by the transforms (their method is apply_transform).
    from augnet.transforms import audio as A
    from augnet.transforms import signal as S

    trunk = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 8 * 8, 4))
    layer = augnet.AugmentationLayer([T.Rotate(), T.Brightness(), T.SamplePairing()])
    model = augnet.AugNet(trunk, augnet.AugmentationModule([layer]))
    seen = []

    def init(m):
        seen.append(type(m).__name__)
        if isinstance(m, torch.nn.Linear):
            torch.nn.init.zeros_(m.weight)

    assert model.apply(init) is model
    assert {"Rotate", "Brightness", "SamplePairing", "AugmentationLayer", "Linear"} <= set(seen)
    assert torch.equal(trunk[1].weight, torch.zeros_like(trunk[1].weight))
    signal_layer = augnet.AugmentationLayer([S.TimeReverse(), A.Gain(), A.LowPass(8000)])
    assert signal_layer.apply(lambda m: None) is signal_layer


class _FirstRows(nn.Module):
    """A trunk that returns the logits of its first 2 rows only (a bug in a user's trunk)."""

    def __init__(self):
        super().__init__()
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 3))

    def forward(self, x):
        return self.head(x)[:2]


@pytest.mark.parametrize("conditioned", [False, True], ids=["global", "per-instance"])
@pytest.mark.parametrize("failure", ["shape", "rows"])
def test_a_call_the_trunk_refuses_changes_nothing(failure, conditioned):
    # The layers' seen size (policy()'s pixel ranges), the pass count, the effects of a measuring pass, and a
    # per-instance layer's conditioner statistics and last policy (what the regulariser reads) were kept from the
    # failed call.
    trunk = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 3)) if failure == "shape" else _FirstRows()
    layer_type = augnet.ConditionedAugmentationLayer if conditioned else augnet.AugmentationLayer
    kwargs = {"channels": 3} if conditioned else {}
    model = augnet.AugNet(trunk, layer_type([T.Rotate(), T.TranslateX()], **kwargs), effect_every=1)
    model.train()
    if failure == "shape":
        model(torch.rand(4, 3, 8, 8), generator=gen(0))  # a good call first: 8 x 8 seen, effects measured
    before = {k: v.clone() for k, v in model.state_dict().items()}
    size, text = model.augment.layers[0].last_size, str(model.policy())
    bad = torch.rand(4, 3, 10, 10) if failure == "shape" else torch.rand(4, 3, 8, 8)
    latest = getattr(model.augment.layers[0], "_latest", None)
    with pytest.raises((RuntimeError, ValueError)):
        model(bad, generator=gen(1))
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    assert model.augment.layers[0].last_size == size and str(model.policy()) == text
    assert getattr(model.augment.layers[0], "_latest", None) is latest
