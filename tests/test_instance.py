"""Per-instance augmentation layers (issue 27): ConditionedAugmentationLayer, its regulariser, policy and refusals.

The properties: a conditioner that outputs constants is the global layer at those offsets, bit for bit, on every
backend; the gradient reaches the conditioner's parameters (float64 gradcheck); a generator replays a call;
torch.compile and autocast behave as for global layers; bad conditioner outputs are clear errors.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import TOL, gen
from torch import nn

import augnet
from augnet import AugmentationLayer, AugmentationModule, ConditionedAugmentationLayer
from augnet.instance import RunningStandardize, TinyConditioner, conditioner_entropy
from augnet.instance_policy import averaged_policy, plot_policy_summary, policy_summary
from augnet.ops import _cpp, _triton
from augnet.transforms import image as T
from augnet.transforms import signal as S

BACKENDS = ["reference"] + (["cpp"] if _cpp.load() else [])
ROOT = Path(__file__).resolve().parents[1]


class Constant(nn.Module):
    """A conditioner that outputs the same (2Q,) vector for every sample (a parameter, so it has a gradient)."""

    def __init__(self, values):
        super().__init__()
        self.values = nn.Parameter(torch.as_tensor(values, dtype=torch.float32))

    def forward(self, x):
        return self.values.expand(x.shape[0], -1)


class MeanReader(nn.Module):
    """Offsets linear in each sample's mean value: a conditioner whose policy differs by sample."""

    def __init__(self, q, dtype=torch.float32):
        super().__init__()
        self.scale = nn.Parameter(torch.linspace(-0.5, 0.5, 2 * q, dtype=dtype))
        self.bias = nn.Parameter(torch.zeros(2 * q, dtype=dtype))

    def forward(self, x):
        return x.flatten(1).mean(1, keepdim=True) * self.scale + self.bias


def image_transforms():
    # warps with a kink at 0, a colour map, a two-tap flip, a tap on another sample
    return [T.Rotate(), T.TranslateX(), T.Brightness(), T.HorizontalFlip(), T.SamplePairing()]


OFFSETS = [0.3, -0.2, 0.1, 0.0, -0.1, 0.1, -0.05, 0.2, 0.0, 0.1]
INIT = [0.2, 0.0, 0.4, 0.5, 0.3]  # TranslateX at exactly 0: the kink gate per row


def pair(backend="reference", mode="sample", transforms=image_transforms, init=INIT, offsets=OFFSETS,
         dtype=torch.float32):
    """A conditioned layer with a constant conditioner, and the global layer at its parameters plus the offsets."""
    q = len(init)
    cond = ConditionedAugmentationLayer(transforms(), conditioner=Constant(offsets), init_magnitude=init,
                                        backend=backend, train_mode=mode, eval_mode=mode)  # fmt: skip
    plain = AugmentationLayer(transforms(), init_magnitude=init, backend=backend, train_mode=mode, eval_mode=mode)
    cond.to(dtype), plain.to(dtype)
    c = cond.conditioner.values.detach()
    with torch.no_grad():
        plain.weight_logits.copy_(cond.weight_logits + c[:q])
        plain.raw_magnitudes.copy_(cond.raw_magnitudes + c[q:])
    return cond, plain


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["sample", "mix"])
@pytest.mark.parametrize("training", [True, False])
def test_a_constant_conditioner_is_the_global_layer_bit_for_bit(backend, mode, training):
    cond, plain = pair(backend, mode)
    cond.train(training), plain.train(training)
    x = torch.rand(5, 3, 9, 11, generator=gen(0))
    a = cond(x, copies=3, generator=gen(1))
    b = plain(x, copies=3, generator=gen(1))
    torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.parametrize("mode", ["sample", "mix"])
def test_a_constant_conditioner_has_the_global_layers_gradients(mode):
    # float64: the kink gate's one-sided difference (step 1e-4) would amplify float32 rounding of sums taken in
    # another order (per row, then over the batch).
    cond, plain = pair("reference", mode, dtype=torch.float64)
    x = torch.rand(5, 3, 9, 11, generator=gen(0), dtype=torch.float64)
    cond(x, copies=3, generator=gen(1)).square().sum().backward()
    plain(x, copies=3, generator=gen(1)).square().sum().backward()
    torch.testing.assert_close(cond.raw_magnitudes.grad, plain.raw_magnitudes.grad, **TOL[torch.float64])
    torch.testing.assert_close(cond.weight_logits.grad, plain.weight_logits.grad, **TOL[torch.float64])
    # the offsets' gradient is the sum over the batch of the per-sample gradients: the global parameters' one
    q = len(INIT)
    torch.testing.assert_close(cond.conditioner.values.grad[:q], plain.weight_logits.grad, **TOL[torch.float64])
    torch.testing.assert_close(cond.conditioner.values.grad[q:], plain.raw_magnitudes.grad, **TOL[torch.float64])


@pytest.mark.parametrize("mode", ["sample", "mix"])
def test_a_constant_conditioner_is_the_global_layer_for_signals(mode):
    def transforms():
        return [S.FrequencyShift(100.0), S.GaussianNoise(), S.TimeMask(max_length=20), S.SignFlip()]

    cond, plain = pair(mode=mode, transforms=transforms, init=[0.3, 0.6, 0.2, 0.5], offsets=[0.1, 0, -0.2, 0.3] * 2)
    x = torch.randn(4, 2, 64, generator=gen(0))
    for training in (True, False):
        cond.train(training), plain.train(training)
        torch.testing.assert_close(cond(x, copies=2, generator=gen(3)), plain(x, copies=2, generator=gen(3)),
                                   rtol=0, atol=0)  # fmt: skip


@pytest.mark.skipif(_triton.interpreter_hint() is not None, reason=f"no interpreter: {_triton.interpreter_hint()}")
def test_a_constant_conditioner_is_the_global_layer_under_the_triton_interpreter():
    # TRITON_INTERPRET must be set before triton is imported: in a subprocess, as tests/test_triton.py does.
    code = (
        "import torch, test_instance as t\n"
        "from helpers import gen\n"
        "for mode in ('sample', 'mix'):\n"
        "    cond, plain = t.pair('triton', mode)\n"
        "    x = torch.rand(4, 3, 6, 7, generator=gen(0))\n"
        "    a, b = cond(x, copies=2, generator=gen(1)), plain(x, copies=2, generator=gen(1))\n"
        "    assert torch.equal(a, b), (mode, (a - b).abs().max())\n"
        "    ref = t.pair('reference', mode)[1](x, copies=2, generator=gen(1))\n"
        "    torch.testing.assert_close(a, ref, rtol=1e-5, atol=1e-5)\n"
        "print('triton ok')\n"
    )
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), str(ROOT / "tests"), env.get("PYTHONPATH")) if p)
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT / "tests", capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert proc.returncode == 0 and "triton ok" in proc.stdout, proc.stdout + proc.stderr


def test_rows_run_at_their_own_samples_policy():
    """Each row of a conditioned layer is the global layer at that sample's weights and magnitudes."""
    layer = ConditionedAugmentationLayer([T.Rotate(), T.Brightness()], conditioner=MeanReader(2), init_magnitude=0.3,
                                         train_mode="mix")  # fmt: skip
    x = torch.rand(4, 3, 8, 8, generator=gen(0)) * torch.tensor([0.2, 0.5, 0.8, 1.0])[:, None, None, None]
    out = layer(x, copies=2, generator=gen(2))
    w, mu = layer.sample_policy(x)
    assert not torch.allclose(mu[0], mu[3])  # the samples differ
    for b in range(4):
        plain = AugmentationLayer([T.Rotate(), T.Brightness()], train_mode="mix")
        with torch.no_grad():
            plain.weight_logits.copy_(w[b].log())
            plain.raw_magnitudes.copy_(mu[b])
        full = plain(x, copies=2, generator=gen(2))  # the same draws for every row
        rows = [b, 4 + b]
        torch.testing.assert_close(out[rows], full[rows], rtol=1e-5, atol=1e-5)


def test_gradients_reach_the_conditioner_float64_gradcheck():
    cond = MeanReader(2, torch.float64)
    layer = ConditionedAugmentationLayer([T.Rotate(), T.Brightness()], conditioner=cond, init_magnitude=0.4,
                                         train_mode="mix", backend="reference").double()  # fmt: skip
    x = torch.rand(3, 3, 5, 6, generator=gen(0), dtype=torch.float64)
    names = ["conditioner.scale", "conditioner.bias"]

    def f(scale, bias):
        params = dict(zip(names, (scale, bias), strict=True))
        return torch.func.functional_call(layer, params, (x,), {"copies": 2, "generator": gen(4)})

    inputs = tuple(dict(layer.named_parameters())[n].detach().clone().requires_grad_() for n in names)
    assert torch.autograd.gradcheck(f, inputs, eps=1e-6, atol=1e-6)


def test_the_default_conditioner_gets_a_gradient_in_training():
    layer = ConditionedAugmentationLayer(image_transforms(), channels=3, init_magnitude=0.3)
    with torch.no_grad():  # off its zero start, so the gradient reaches every conditioner parameter
        layer.conditioner.head.weight.normal_(0, 0.1, generator=gen(0))
    layer(torch.rand(6, 3, 12, 12, generator=gen(1)), copies=2, generator=gen(2)).square().mean().backward()
    grads = [p.grad for p in layer.conditioner.parameters()]
    assert all(g is not None and torch.isfinite(g).all() and g.abs().sum() > 0 for g in grads)


def test_a_generator_replays_a_call():
    layer = ConditionedAugmentationLayer(image_transforms(), channels=3, init_magnitude=0.3)
    x = torch.rand(4, 3, 10, 10, generator=gen(0))
    for training in (True, False):
        layer.train(training)
        first = layer(x, copies=3, generator=gen(7))
        torch.testing.assert_close(layer(x, copies=3, generator=gen(7)), first, rtol=0, atol=0)
        assert not torch.equal(layer(x, copies=3, generator=gen(8)), first)


@pytest.mark.parametrize("bad, error, match", [
    (lambda x: torch.zeros(x.shape[0], 3), ValueError, r"shape \(4, 3\) for 4 inputs; expected \(4, 4\)"),
    (lambda x: torch.zeros(x.shape[0] + 1, 4), ValueError, r"shape \(5, 4\)"),
    (lambda x: torch.zeros(x.shape[0], 4).index_fill(0, torch.tensor([2]), float("nan")), ValueError,
     r"not finite \(NaN or infinite\) for samples \[2\]"),
    (lambda x: torch.zeros(x.shape[0], 4, dtype=torch.long), TypeError, "floating-point"),
    (lambda x: [0.0] * 4, TypeError, "got list"),
])  # fmt: skip
def test_bad_conditioner_outputs_are_clear_errors(bad, error, match):
    class Bad(nn.Module):
        def forward(self, x):
            return bad(x)

    layer = ConditionedAugmentationLayer([T.Rotate(), T.Brightness()], conditioner=Bad())
    x = torch.rand(4, 3, 8, 8)
    before = x.clone()
    with pytest.raises(error, match=match):
        layer(x)
    assert torch.equal(x, before)


def test_bad_construction_is_a_clear_error():
    with pytest.raises(ValueError, match="channels="):
        ConditionedAugmentationLayer([T.Rotate()])
    with pytest.raises(TypeError, match=r"conditioner must be an nn\.Module"):
        ConditionedAugmentationLayer([T.Rotate()], conditioner=lambda x: x)
    with pytest.raises(ValueError, match="cannot be calibrated"):
        ConditionedAugmentationLayer([T.Rotate()], channels=3).calibrate(torch.rand(4, 3, 8, 8))
    with pytest.raises(ValueError, match="kernel_size=1 is the default conditioner's"):
        ConditionedAugmentationLayer([T.Rotate()], conditioner=Constant([0.0, 0.0]), kernel_size=1)
    for bad in (2, 0, True, 1.0, "1"):
        with pytest.raises(ValueError, match=f"kernel_size must be 3 or 1 .*got {bad!r}"):
            ConditionedAugmentationLayer([T.Rotate()], channels=3, kernel_size=bad)


def test_selective_regularizer_is_the_mean_of_per_sample_norms():
    layer = ConditionedAugmentationLayer([T.Rotate(), T.Brightness()], conditioner=MeanReader(2), init_magnitude=0.3)
    x = torch.rand(5, 3, 8, 8, generator=gen(0)) * torch.linspace(0.2, 1, 5)[:, None, None, None]
    layer(x)
    w, mu = layer.sample_policy(x)
    expected = -(w * mu).norm(dim=1).mean()
    torch.testing.assert_close(augnet.selective_regularizer(layer, units="magnitude", saturation=None), expected)
    # a constant conditioner: the global layer's value
    cond, plain = pair()
    cond(x[:, :, :8, :8])
    torch.testing.assert_close(augnet.selective_regularizer(cond), augnet.selective_regularizer(plain))


def test_the_regulariser_needs_a_forward_pass_first():
    with pytest.raises(ValueError, match="call the model on the batch first"):
        augnet.selective_regularizer(ConditionedAugmentationLayer([T.Rotate()], channels=3))


def test_conditioner_entropy_is_the_mean_entropy_of_the_sample_weights():
    layer = ConditionedAugmentationLayer([T.Rotate(), T.Brightness()], conditioner=MeanReader(2))
    x = torch.rand(5, 3, 8, 8, generator=gen(0))
    layer(x)
    w, _ = layer.sample_policy(x)
    torch.testing.assert_close(conditioner_entropy(layer), -(w * w.log()).sum(1).mean())


def test_param_groups_give_the_conditioner_its_own_group():
    layer = ConditionedAugmentationLayer([T.Rotate()], channels=3)
    model = augnet.AugNet(nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 2)), layer)
    groups = augnet.param_groups(model, aug_lr=1e-2, conditioner_lr=1e-3, conditioner_weight_decay=1e-4,
                                 weight_lr=None)  # fmt: skip
    assert [len(g["params"]) for g in groups] == [2, 2, len(list(layer.conditioner.parameters()))]
    assert groups[2]["lr"] == 1e-3 and groups[2]["weight_decay"] == 1e-4 and groups[1]["lr"] == 1e-2
    assert {id(p) for p in groups[2]["params"]} == {id(p) for p in layer.conditioner.parameters()}
    # by default the layer's own weight logits have their own group at WEIGHT_LR; the conditioner stays last
    groups = augnet.param_groups(model, aug_lr=1e-2, conditioner_lr=1e-3)
    own = [[id(layer.weight_logits)], [id(layer.raw_magnitudes)]]
    assert [[id(p) for p in g["params"]] for g in groups[1:3]] == own
    assert [g["lr"] for g in groups[1:]] == [augnet.WEIGHT_LR, 1e-2, 1e-3]
    assert {id(p) for p in groups[3]["params"]} == {id(p) for p in layer.conditioner.parameters()}
    global_model = augnet.AugNet(nn.Linear(4, 2), AugmentationLayer([T.Rotate()]))
    assert len(augnet.param_groups(global_model)) == 3  # no conditioner group for global layers
    with pytest.raises(ValueError, match="conditioner_lr"):
        augnet.param_groups(model, conditioner_lr=0.0)


def test_policy_of_a_batch_and_its_per_class_summary():
    layer = ConditionedAugmentationLayer([T.Rotate(), T.Brightness()], conditioner=MeanReader(2), init_magnitude=0.5)
    x = torch.cat([torch.zeros(3, 3, 8, 8), torch.ones(3, 3, 8, 8)])  # class 0 all dark, class 1 all bright
    y = torch.tensor([0, 0, 0, 1, 1, 1])
    pol = layer.policy(x)
    # bright samples: rotation magnitude 0.5 + 0.1667, brightness 0.5 + 0.5 (the linspace's last offsets)
    torch.testing.assert_close(pol["magnitudes"][3], torch.tensor([0.5 + 1 / 6, 1.0]))
    torch.testing.assert_close(pol["ranges"][3, 0], torch.tensor([-120.0, 120.0], dtype=torch.float64))
    assert pol["units"] == ["deg", "shift"] and pol["transforms"] == ["Rotate", "Brightness"]
    summary = policy_summary(layer, [(x[:4], y[:4]), (x[4:], y[4:])])
    assert summary.classes[0]["count"] == 3 and summary.classes[1]["count"] == 3
    assert summary.classes[0]["range_mean"][0] == pytest.approx(90.0)
    assert summary.classes[1]["range_mean"][0] == pytest.approx(120.0)
    assert summary.classes[1]["magnitude_quantiles"][1][1] == pytest.approx(1.0)
    w, m = summary.class_averaged()
    assert m[0] == pytest.approx((0.5 + 2 / 3) / 2)
    assert sum(w) == pytest.approx(1.0)


def test_policy_files_and_exports_refuse_a_conditioned_layer_and_take_the_averaged_policy(tmp_path):
    layer = ConditionedAugmentationLayer([T.Rotate(), T.Brightness()], conditioner=MeanReader(2), init_magnitude=0.5)
    module = AugmentationModule([layer])
    policy = module.policy((8, 8))
    for action in (policy.to_json, lambda: AugmentationModule.from_policy(policy), policy.to_torchvision):
        with pytest.raises(ValueError, match=r"per-instance.*not a fixed pipeline.*averaged_policy"):
            action()
    x = torch.cat([torch.zeros(3, 3, 8, 8), torch.ones(3, 3, 8, 8)])
    y = torch.tensor([0, 0, 0, 1, 1, 1])
    averaged = averaged_policy(module, (x, y))
    rebuilt = AugmentationModule.from_policy(averaged.to_json())
    torch.testing.assert_close(rebuilt.layers[0].magnitudes, torch.tensor([(0.5 + 2 / 3) / 2, (0.5 + 1.0) / 2]))
    assert plot_policy_summary(policy_summary(module, (x, y)), tmp_path / "summary.png").stat().st_size > 0


def test_state_dict_round_trip():
    torch.manual_seed(0)
    layer = ConditionedAugmentationLayer(image_transforms(), channels=3, hidden=8, init_magnitude=0.3)
    with torch.no_grad():
        layer.conditioner.head.weight.normal_(0, 0.3)
    again = ConditionedAugmentationLayer(image_transforms(), channels=3, hidden=8)
    again.load_state_dict(layer.state_dict())
    x = torch.rand(4, 3, 10, 10, generator=gen(0))
    for training in (True, False):
        layer.train(training), again.train(training)
        torch.testing.assert_close(again(x, copies=2, generator=gen(1)), layer(x, copies=2, generator=gen(1)),
                                   rtol=0, atol=0)  # fmt: skip


def conditioned_model(backend):
    torch.manual_seed(0)
    trunk = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(4, 5))  # fmt: skip
    layer = ConditionedAugmentationLayer([T.Rotate(), T.TranslateX(), T.HorizontalFlip(), T.Contrast()], channels=3,
                                         hidden=4, init_magnitude=0.3, backend=backend)  # fmt: skip
    with torch.no_grad():
        layer.conditioner.head.weight.normal_(0, 0.3)
    return augnet.AugNet(trunk, layer, train_copies=2, eval_copies=3, effect_every=0), torch.rand(4, 3, 12, 12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_fullgraph_compile_matches_eager(backend):
    model, x = conditioned_model(backend)
    # Static shapes: training (8 rows) then evaluation (12) would otherwise recompile with a symbolic row count,
    # which the reference backend's affine_grid backward does not take (a torch limitation, not the layer's).
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager", dynamic=False)
    for training in (True, False):
        model.train(training)
        state = {k: v.clone() for k, v in model.state_dict().items()}  # a training step moves running statistics
        torch.manual_seed(1)
        eager = model(x)
        after = {k: v.clone() for k, v in model.state_dict().items()}
        reg = augnet.selective_regularizer(model) if training else None
        if training:
            (eager.sum() + reg).backward()
        grads = [p.grad.clone() for p in model.parameters()] if training else []
        model.zero_grad()
        model.load_state_dict(state)
        torch.manual_seed(1)
        got = compiled(x)
        torch.testing.assert_close(got, eager)
        for k, v in model.state_dict().items():  # and the compiled step moves them alike
            if ".norm." in k:  # the conditioner's statistics (AugNet's own extra state counts eager calls only)
                torch.testing.assert_close(v, after[k])
        if training:
            (got.sum() + augnet.selective_regularizer(model)).backward()
            for p, g in zip(model.parameters(), grads, strict=True):
                torch.testing.assert_close(p.grad, g)
            model.zero_grad()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("training", [True, False])
def test_float32_input_under_autocast_is_exactly_float32(backend, training):
    model, x = conditioned_model(backend)
    layer = model.augment.layers[0].train(training)
    expected = layer(x, copies=3, generator=gen(2))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = layer(x, copies=3, generator=gen(2))
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    with torch.autocast("cpu", dtype=torch.bfloat16):  # a bfloat16 input: one rounding of the float32 result
        low = layer(x.bfloat16(), copies=3, generator=gen(2))
    torch.testing.assert_close(low, layer(x.bfloat16().float(), copies=3, generator=gen(2)).bfloat16(), rtol=0, atol=0)


def test_guide_snippet_runs_as_written():
    import re

    page = (ROOT / "docs" / "guide" / "instance.md").read_text()
    start = page.index("\n## Per-instance augmentation: a policy that depends on the input\n")
    code = re.search(r"```python\n(.*?)```", page[start:], re.S).group(1)
    scope: dict = {}
    exec(compile(code, "docs/guide/instance.md", "exec"), scope)
    assert scope["per_sample"]["weights"].shape == (8, 2)
    assert set(scope["summary"].classes) == set(scope["y"].tolist())
    assert all(p.grad is not None for p in scope["layer"].conditioner.parameters())


def test_running_standardize_uses_the_batch_in_training_steps_and_running_statistics_otherwise():
    h = torch.randn(8, 3, generator=gen(0)) * torch.tensor([1.0, 5.0, 0.1]) + torch.tensor([2.0, -1.0, 7.0])
    std = RunningStandardize(3, momentum=0.5, eps=1e-6)
    h1 = h.clone().requires_grad_()
    out = std(h1)  # a training step: standardised by its own batch, and the first batch sets the statistics
    torch.testing.assert_close(out.mean(0), torch.zeros(3), atol=1e-5, rtol=0)
    torch.testing.assert_close(out.var(0, unbiased=False), torch.ones(3), atol=1e-4, rtol=0)
    torch.testing.assert_close(std.running_mean, h.mean(0))
    torch.testing.assert_close(std.running_var, h.var(0, unbiased=False))
    # a push shared by every sample does not reach the features: the batch statistics project it out
    out.sum().backward()
    torch.testing.assert_close(h1.grad, torch.zeros_like(h), atol=1e-4, rtol=0)
    state = {k: v.clone() for k, v in std.state_dict().items()}
    with torch.no_grad():  # reading a policy: running statistics, per sample, and they stay
        read = std(h)
        torch.testing.assert_close(std(h[:2]), read[:2], rtol=0, atol=0)
    torch.testing.assert_close(read, (h - h.mean(0)) / (h.var(0, unbiased=False) + 1e-6).sqrt())
    alone = std(h[:1])  # a batch of one in training: running statistics, no update
    torch.testing.assert_close(alone, read[:1])
    assert all(torch.equal(v, state[k]) for k, v in std.state_dict().items())
    std.eval()
    torch.testing.assert_close(std(h), read)
    std.train()
    std(h * 3)  # the second step: weight max(0.5, 1 / 2)
    torch.testing.assert_close(std.running_mean, h.mean(0) + 0.5 * (3 * h.mean(0) - h.mean(0)))
    assert int(std.steps) == 2


@pytest.mark.parametrize(("kwargs", "match"), [({"momentum": 0.0}, "momentum"), ({"momentum": 1.5}, "momentum"),
                                               ({"eps": 0.0}, "eps")])  # fmt: skip
def test_running_standardize_rejects_bad_settings(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RunningStandardize(3, **kwargs)


def test_the_default_conditioner_standardises_its_features_and_starts_at_zero():
    layer = ConditionedAugmentationLayer([T.Rotate()], channels=3, hidden=4)
    g = layer.conditioner
    assert isinstance(g.norm, RunningStandardize)
    x = torch.rand(5, 3, 12, 12, generator=gen(0)) + torch.arange(5.0).view(5, 1, 1, 1)
    with torch.no_grad():
        assert torch.equal(g(x), torch.zeros(5, 2))
    with torch.no_grad():
        g(x)  # reading the policy does not move the statistics
    layer.eval()
    layer(x)
    assert int(g.norm.steps) == 0
    layer.train()
    layer(x, copies=2)  # a training step: its batch sets them
    with torch.no_grad():
        pooled = g.features(x).flatten(2).mean(2)
    torch.testing.assert_close(g.norm.running_mean, pooled.mean(0))
    assert int(g.norm.steps) == 1


def test_the_experiments_sprites_give_their_angles_within_each_classs_band():
    import math

    from augnet.experiments.instance import instance_sprites

    x, y = instance_sprites(60, 16, seed=4)
    x2, y2, angle = instance_sprites(60, 16, seed=4, return_angle=True)
    assert torch.equal(x, x2) and torch.equal(y, y2) and angle.shape == (60,)
    up, down, anywhere = y < 2, (y >= 2) & (y < 4), y >= 4
    assert bool((angle[up].abs() <= math.pi / 4).all()) and bool(((angle[down] - math.pi).abs() <= math.pi / 4).all())
    assert bool((angle[anywhere].abs() <= math.pi).all()) and float(angle[anywhere].abs().max()) > math.pi / 4


def _moved(g, generator):
    """``g`` with every parameter drawn from N(0, 1) (a head that has moved, features that are not dead)."""
    with torch.no_grad():
        for p in g.parameters():
            p.normal_(generator=generator)
    return g


@pytest.mark.parametrize("ndim", [4, 3])
def test_a_pointwise_conditioner_gives_every_rearrangement_of_an_input_the_same_policy(ndim):
    shape = (6, 3, 10, 10) if ndim == 4 else (6, 2, 40)
    g = _moved(TinyConditioner(shape[1], 4, hidden=5, ndim=ndim, kernel_size=1), gen(1))
    x = torch.rand(*shape, generator=gen(0), dtype=torch.float64)
    g.double().train()
    g(x)  # a training step sets the statistics
    g.eval()
    out = g(x).detach()
    assert float(out.abs().min()) > 0  # not trivially constant
    if ndim == 4:
        views = [torch.rot90(x, 1, (2, 3)), torch.flip(x, (3,)), x.transpose(2, 3), torch.roll(x, (3, -2), (2, 3))]
    else:
        views = [torch.flip(x, (2,)), torch.roll(x, 7, 2)]
    for view in views:
        torch.testing.assert_close(g(view), out, rtol=1e-12, atol=1e-12)
    # the default conditioner sees where things are: the same rearrangements move its policy
    g3 = _moved(TinyConditioner(shape[1], 4, hidden=5, ndim=ndim), gen(1)).double().train()
    g3(x)
    g3.eval()
    assert not torch.allclose(g3(views[0]), g3(x), atol=1e-3)


def test_a_pointwise_layer_is_built_by_the_layer_and_round_trips_its_state_dict():
    layer = ConditionedAugmentationLayer([T.Rotate(), T.Brightness()], channels=3, hidden=4, kernel_size=1)
    convs = [m for m in layer.conditioner.features if isinstance(m, nn.Conv2d)]
    assert [(c.kernel_size, c.stride) for c in convs] == [((1, 1), (1, 1))] * 2
    x = torch.rand(4, 3, 12, 12, generator=gen(2)) * torch.linspace(0.2, 1, 4).view(4, 1, 1, 1)
    assert layer(x, copies=3).shape == (12, 3, 12, 12)
    default = ConditionedAugmentationLayer([T.Rotate(), T.Brightness()], channels=3, hidden=4)
    assert [m.kernel_size for m in default.conditioner.features if isinstance(m, nn.Conv2d)] == [(3, 3)] * 2
    _moved(layer.conditioner, gen(3))
    again = ConditionedAugmentationLayer([T.Rotate(), T.Brightness()], channels=3, hidden=4, kernel_size=1)
    again.load_state_dict(layer.state_dict())
    layer.eval(), again.eval()
    for key in ("weights", "magnitudes"):
        torch.testing.assert_close(again.policy(x)[key], layer.policy(x)[key], rtol=0, atol=0)
    assert float(layer.policy(x)["weights"].std(0).max()) > 0  # per-sample, not the global policy


def test_the_experiments_per_class_invariance_drops_a_nan_score(monkeypatch):
    from augnet.experiments import instance as experiment

    nan = float("nan")
    scores = torch.tensor([[0.9, nan, 0.5, 0.7, 0.2, 0.4], [0.1, 0.3, nan, nan, 0.6, 0.8]])

    def curve(model, x, transform, magnitudes, copies=None, seed=0):
        return {"scores": scores}

    monkeypatch.setattr(experiment.probes, "invariance_curve", curve)
    y = torch.tensor([0, 0, 0, 1, 1, 1])
    out = experiment._invariance_per_class(None, torch.zeros(6, 3, 4, 4), y, None)
    # class 0: medians of [0.9, 0.5] and [0.1, 0.3] (the lower middle, as torch's); class 1: every score counts
    approx = pytest.approx
    assert out == {"0": {"45": 0.5, "180": approx(0.1)}, "1": {"45": approx(0.4), "180": approx(0.6)}}


def test_the_default_conditioner_takes_the_standardisers_momentum():
    # The guide's recipe for an average of the batch statistics: a TinyConditioner built with momentum < 1.
    from augnet.instance import TinyConditioner

    means = {}
    for momentum in (1.0, 0.1):
        torch.manual_seed(0)
        conditioner = TinyConditioner(3, 4, momentum=momentum)
        assert conditioner.norm.momentum == momentum
        layer = ConditionedAugmentationLayer([T.Rotate(), T.Scale()], conditioner=conditioner).train()
        for seed in range(3):
            layer(torch.rand(4, 3, 8, 8, generator=gen(seed)), generator=gen(seed))
        means[momentum] = conditioner.norm.running_mean.clone()
    assert not torch.allclose(means[1.0], means[0.1])  # the latest batch's against an average of the three
    assert TinyConditioner(3, 4).norm.momentum == 1.0
    with pytest.raises(ValueError, match="momentum must be in"):
        TinyConditioner(3, 4, momentum=0.0)


def test_printing_a_conditioned_layers_policy_says_it_is_the_global_part():
    layer = ConditionedAugmentationLayer([T.Rotate(), T.Scale()], channels=3)
    text = str(augnet.AugNet(nn.Sequential(nn.Flatten(), nn.Linear(192, 3)), layer).policy())
    assert text.splitlines()[0].startswith("layer 0: (per-instance: the global part") and "averaged_policy" in text
    assert str(AugmentationModule([AugmentationLayer([T.Rotate()])]).policy()).splitlines()[0] == "layer 0:"
