"""Audit of AugNet's aggregation and of the regularisers against the paper's formulas and augnet's docs.

Each quantity is computed here again from its definition (the paper's section 3, docs/guide/concepts.md, the
docstrings), not through the code under test: the aggregated prediction from explicit transform calls on the same
generator, the regularisers from softmax / clamp / norm written out, their gradients analytically or by finite
differences, the sampled layer's expectation by Monte Carlo with a written bound. What tests/test_model.py,
test_regularizers.py, test_selection_units.py and test_layer.py check already is not repeated.
"""

import math

import pytest
import torch
import torch.nn.functional as F
from helpers import gen
from torch import nn

import augnet
from augnet.regularizers import paper_selective_regularizer, selective_regularizer
from augnet.transforms import image as T
from augnet.transforms.base import Transform, per_row, repeat_rows

F64 = torch.float64


def _layer(transforms, logits, mags, temperature=1.0, **kwargs):
    layer = augnet.AugmentationLayer(transforms, init_magnitude=mags, temperature=temperature, **kwargs).double()
    with torch.no_grad():  # exact float64 values (the layer is built in float32)
        layer.weight_logits.copy_(torch.tensor(logits, dtype=F64))
        layer.raw_magnitudes.copy_(torch.tensor(mags, dtype=F64))
    return layer


def _softmax(logits, temperature):
    e = [math.exp(v / temperature) for v in logits]
    return [v / sum(e) for v in e]


def _phi(mu, s=augnet.SATURATION):
    return s * math.log1p(mu / s)


class AddNoise(Transform):
    """A transform without taps (the layer's generic path): x + magnitude * N(0, 1), per row."""

    input_ndim = 4

    def sample(self, x, magnitude, generator=None, copies=1):
        n = x.shape[0] * copies
        z = torch.randn(n, *x.shape[1:], generator=generator, dtype=x.dtype, device=x.device)
        return {"noise": per_row(magnitude, x.dim()) * z}

    def apply_transform(self, x, params):
        return repeat_rows(x, params["noise"].shape[0]) + params["noise"]


# ------------------------------------------------------------------ AugNet: the aggregated prediction


def _trunk(classes=4):
    torch.manual_seed(0)
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 16), nn.Tanh(), nn.Linear(16, classes)).double()


def _by_hand(trunk, transforms, w, mu, x, copies, seed, mode):
    """The documented prediction from explicit transform calls on the generator the model is given.

    The layer's draws, in order: the transform of each row from Categorical(w) (sample mode), then each transform's
    parameters for all ``B * copies`` copy-major rows; row ``c * B + b`` is copy ``c`` of sample ``b``.
    """
    g, n = gen(seed), x.shape[0] * copies
    drawn = torch.multinomial(w.expand(n, -1), 1, generator=g).squeeze(1) if mode == "sample" else None
    outs = torch.stack([t(x, mu[q], generator=g, copies=copies) for q, t in enumerate(transforms)])  # (Q, N, ...)
    rows = outs[drawn, torch.arange(n)] if mode == "sample" else (w[:, None, None, None, None] * outs).sum(0)
    per_copy = [trunk(rows[c * len(x) : (c + 1) * len(x)]) for c in range(copies)]  # each copy: (B, classes)
    return {
        "log_softmax": sum(F.log_softmax(o, 1) for o in per_copy) / copies,
        "softmax": torch.log(sum(F.softmax(o, 1) for o in per_copy) / copies),
        "mean": sum(per_copy) / copies,
    }


@pytest.mark.parametrize("how", ["log_softmax", "softmax", "mean"])
def test_the_prediction_is_the_documented_average_of_the_trunk_on_explicitly_augmented_copies(how):
    # train_copies in training, eval_copies in evaluation, copies= overriding either: the average is over that many
    # copies, each the trunk on explicit T_q(x; mu_q) calls (independent draws: stratify=False).
    transforms = [T.Rotate(), T.Brightness(), T.TranslateX()]
    layer = _layer(transforms, [0.3, -0.2, 0.1], [0.6, 0.5, 0.7])
    trunk = _trunk()
    model = augnet.AugNet(trunk, layer, train_copies=2, eval_copies=3, aggregate=how, effect_every=0, stratify=False)
    x = torch.rand(5, 3, 8, 8, generator=gen(0), dtype=F64)
    w, mu = layer.weights.detach(), layer.magnitudes.detach()
    for training, copies, expected_copies in [(True, None, 2), (True, 4, 4), (False, None, 3), (False, 1, 1)]:
        model.train(training)
        for mode in ("sample", "mix"):
            layer.train_mode = layer.eval_mode = mode
            with torch.no_grad():
                got = model(x, copies=copies, generator=gen(7))
                expected = _by_hand(trunk, transforms, w, mu, x, expected_copies, 7, mode)[how]
            torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-10)


# ------------------------------------------------------------------ train_mode "sample" against "mix"


def test_the_sampled_layers_expectation_over_its_draws_is_the_blend():
    # E over the draws (transform q with probability w_q, then its own parameters) of the sampled row equals
    # E over the parameters of the blend sum_q w_q T_q(x; mu_q). Both means are over n = 6000 independent rows of one
    # image; per pixel their difference d has standard error se = sqrt((var_sample + var_mix) / n), and we ask
    # |d| <= 5 se for all 192 pixels (a false alarm has probability <= 192 * 2 * Phi(-5) ~ 1.1e-4; the seeds are
    # fixed). The same bound rejects the uniform blend (w ignored), and the stratified evaluation (4 copies per
    # sample, 1500 samples) meets it too.
    transforms = [T.Rotate(), T.Brightness(), T.TranslateX()]
    x = torch.rand(1, 3, 8, 8, generator=gen(0), dtype=F64)
    n = 6000
    stats = {}
    for mode, seed in (("sample", 1), ("mix", 2)):
        layer = _layer(transforms, [1.0, -0.8, 0.2], [0.6, 0.5, 0.7], train_mode=mode)
        with torch.no_grad():
            out = layer(x, copies=n, generator=gen(seed)).flatten(1)
        stats[mode] = (out.mean(0), out.var(0), n)
    uniform = _layer(transforms, [0.0, 0.0, 0.0], [0.6, 0.5, 0.7], train_mode="mix")
    with torch.no_grad():
        out = uniform(x, copies=n, generator=gen(3)).flatten(1)
    stats["uniform blend"] = (out.mean(0), out.var(0), n)
    layer = _layer(transforms, [1.0, -0.8, 0.2], [0.6, 0.5, 0.7])
    model = augnet.AugNet(nn.Flatten(), layer, eval_copies=4, aggregate="mean").eval()  # stratified copies
    with torch.no_grad():
        out = model(x.expand(1500, -1, -1, -1).contiguous(), generator=gen(4))  # (1500, 192): 4-copy averages
    stats["stratified evaluation"] = (out.mean(0), out.var(0), 1500)

    def z(a, b):
        (ma, va, na), (mb, vb, nb) = stats[a], stats[b]
        return float(((ma - mb).abs() / (va / na + vb / nb).sqrt()).max())

    assert z("sample", "mix") <= 5.0
    assert z("stratified evaluation", "mix") <= 5.0
    assert z("uniform blend", "mix") > 10.0  # the bound has the power to see weights that are not applied


@pytest.mark.parametrize("path", ["taps", "generic"])
def test_the_sampled_layers_gradients_are_the_blends_for_the_weights_and_the_drawn_rows_for_the_magnitudes(path):
    # Docs: each row is the drawn transform's output; the weights get the blend's gradient (straight-through),
    # dL/dw_q = sum_r <dL/dy_r, T_q(x_r; mu_q)> at the sampled y; a magnitude gets only its rows' gradient.
    # A non-linear loss, so the gradient at the sampled rows differs from the blend's at the blended rows.
    transforms = [T.Rotate(), T.Brightness(), T.TranslateX()] if path == "taps" else [AddNoise(), AddNoise()]
    logits, mags = [0.4, -0.1, 0.2][: len(transforms)], [0.6, 0.5, 0.7][: len(transforms)]
    layer = _layer(transforms, logits, mags, temperature=0.7)
    assert layer.uses_taps == (path == "taps")
    x = torch.rand(3, 3, 8, 8, generator=gen(0), dtype=F64)
    target = torch.rand(12, 3, 8, 8, generator=gen(9), dtype=F64)

    def loss(y):
        return ((y - target) ** 2 * y.sin()).sum()

    loss(layer(x, copies=4, generator=gen(1))).backward()
    # by hand
    q, n = len(transforms), 12
    logit = torch.tensor(logits, dtype=F64, requires_grad=True)
    mu = torch.tensor(mags, dtype=F64, requires_grad=True)
    w = torch.softmax(logit / 0.7, 0)
    g = gen(1)
    drawn = torch.multinomial(w.detach().expand(n, -1), 1, generator=g).squeeze(1)
    outs = [t(x, mu[k], generator=g, copies=4) for k, t in enumerate(transforms)]
    one_hot = F.one_hot(drawn, q).to(F64)
    y = sum(one_hot[:, k, None, None, None] * outs[k] for k in range(q))  # the value: the drawn transform's row
    grad_y = torch.autograd.grad(loss(y), y, retain_graph=True)[0]
    grad_w = torch.stack([(grad_y * outs[k]).sum() for k in range(q)])  # the blend's gradient, at the sampled rows
    expected_logits = torch.autograd.grad(w, logit, grad_w)[0]
    expected_mu = torch.autograd.grad(y, mu, grad_y)[0]  # only the rows that drew each transform
    torch.testing.assert_close(layer.weight_logits.grad, expected_logits, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(layer.raw_magnitudes.grad, expected_mu, rtol=1e-9, atol=1e-12)
    assert len(set(drawn.tolist())) > 1  # several transforms drawn: the test tells the rows apart


# ------------------------------------------------------------------ the paper's regulariser


def test_the_paper_regularizer_is_minus_the_sum_of_the_layers_norms_in_float64_with_the_analytic_gradient():
    # R = -sum_l || w^(l) * mu^(l) ||_2, w = softmax(logits / temperature), mu = clamp(raw, 0, 1) (section 3.4).
    # dR/dmu_q = -w_q^2 mu_q / ||w * mu||, dR/dw_q = -w_q mu_q^2 / ||w * mu||, through the softmax Jacobian
    # (diag(w) - w w^T) / temperature to the logits; at a bound the outward part of the magnitude's gradient is 0.
    specs = [
        ([T.Rotate(), T.ShearX(), T.TranslateY(), T.Brightness()], [0.7, -0.4, 0.1, 1.3], [0.31, 1.0, 0.0, 0.62], 0.6),
        ([T.ShearY(), T.Contrast()], [-0.2, 0.5], [0.83, 0.27], 2.5),
        ([T.Rotate(), T.ShearX(), T.TranslateX()], [0.0, 0.9, -1.1], [0.45, 0.12, 0.99], 1.0),
    ]
    layers = [_layer(t, lg, m, temperature=tau) for t, lg, m, tau in specs]
    for layer in layers:  # the paper's regulariser ignores measured effects
        with torch.no_grad():
            layer.effect.copy_(torch.linspace(0.3, 2.0, len(layer.transforms), dtype=F64))
    module = augnet.AugmentationModule(layers)
    got = paper_selective_regularizer(module)
    assert got.dtype == F64
    expected = 0.0
    for _, lg, m, tau in specs:
        w = _softmax(lg, tau)
        expected -= math.sqrt(sum((wq * mq) ** 2 for wq, mq in zip(w, m, strict=True)))
    assert abs(got.item() - expected) <= 1e-12
    got.backward()
    for layer, (_, lg, m, tau) in zip(layers, specs, strict=True):
        w = torch.tensor(_softmax(lg, tau), dtype=F64)
        mu = torch.tensor(m, dtype=F64)
        norm = torch.linalg.vector_norm(w * mu)
        d_mu = -(w**2) * mu / norm
        d_mu = torch.where(((mu >= 1) & (d_mu < 0)) | ((mu <= 0) & (d_mu > 0)), 0.0, d_mu)  # inward part only
        d_w = -w * mu**2 / norm
        d_logits = ((torch.diag(w) - torch.outer(w, w)) / tau) @ d_w
        torch.testing.assert_close(layer.raw_magnitudes.grad, d_mu, rtol=0, atol=1e-12)
        torch.testing.assert_close(layer.weight_logits.grad, d_logits, rtol=0, atol=1e-12)
    assert layers[0].raw_magnitudes.grad[1] == 0  # at magnitude 1 the pull outward is dropped


# ------------------------------------------------------------------ augnet's default regulariser


def _calibrated_layer():
    layer = augnet.AugmentationLayer([T.Rotate(), T.ShearX(), T.Brightness()], init_magnitude=[0.4, 0.3, 0.2])
    layer.calibrate(torch.rand(8, 3, 8, 8, generator=gen(3)), points=9)
    layer = layer.double()
    with torch.no_grad():
        layer.weight_logits.copy_(torch.tensor([0.2, 0.9, -0.3], dtype=F64))
        layer.raw_magnitudes.copy_(torch.tensor([0.5, 0.7, 0.35], dtype=F64))
        layer.effect.copy_(torch.tensor([1.4, 0.5, 0.8], dtype=F64))
    return layer


def test_the_default_regularizer_by_hand_on_a_three_layer_stack_with_calibration_effects_and_saturation():
    # concepts.md, "Selection": v = w * phi(mu) * e with phi(mu) = s log(1 + mu / s), s = 0.5; mu the layer's
    # (calibrated: cap_q * raw_q, cap_q = curve_q(1) / max_k curve_k(1)); layer l's term -||v(1-h)|| + ||v h||,
    # h_q the largest weight an earlier layer gives the same transform (class and arguments), 0 for a new one.
    a = _calibrated_layer()
    b = _layer([T.ShearX(), T.TranslateX(), T.Rotate()], [1.1, -0.4, 0.3], [0.5, 0.45, 0.7])
    c = _layer([T.Rotate(), T.ShearX(), T.Rotate(max_angle=1.0)], [0.2, -0.3, 0.6], [0.35, 0.25, 0.55])
    with torch.no_grad():
        b.effect.copy_(torch.tensor([0.7, 1.6, 1.1], dtype=F64))
        c.effect.copy_(torch.tensor([1.2, 0.9, 0.6], dtype=F64))
    end = a.calibration[:, -1].tolist()
    caps = [e / max(end) for e in end]
    wa, wb, wc = _softmax([0.2, 0.9, -0.3], 1), _softmax([1.1, -0.4, 0.3], 1), _softmax([0.2, -0.3, 0.6], 1)
    mua = [cq * rq for cq, rq in zip(caps, [0.5, 0.7, 0.35], strict=True)]
    va = [wq * _phi(mq) * eq for wq, mq, eq in zip(wa, mua, [1.4, 0.5, 0.8], strict=True)]
    vb = [wq * _phi(mq) * eq for wq, mq, eq in zip(wb, [0.5, 0.45, 0.7], [0.7, 1.6, 1.1], strict=True)]
    vc = [wq * _phi(mq) * eq for wq, mq, eq in zip(wc, [0.35, 0.25, 0.55], [1.2, 0.9, 0.6], strict=True)]
    hb = [wa[1], 0.0, wa[0]]  # b: ShearX and Rotate held by a, TranslateX new
    hc = [max(wa[0], wb[2]), max(wa[1], wb[0]), 0.0]  # c: the larger of a's and b's; Rotate(max_angle=1) is new

    def term(v, h):
        return -math.hypot(*[vq * (1 - hq) for vq, hq in zip(v, h, strict=True)]) + math.hypot(
            *[vq * hq for vq, hq in zip(v, h, strict=True)]
        )

    expected = -math.hypot(*va) + term(vb, hb) + term(vc, hc)
    module = augnet.AugmentationModule([a, b, c])
    assert abs(selective_regularizer(module).item() - expected) <= 1e-12
    # the paper's on the same stack: magnitudes linearly (a calibrated layer's: its calibrated ones), no effects, no
    # discount
    paper = -math.hypot(*[w * m for w, m in zip(wa, mua, strict=True)])
    paper -= math.hypot(*[w * m for w, m in zip(wb, [0.5, 0.45, 0.7], strict=True)])
    paper -= math.hypot(*[w * m for w, m in zip(wc, [0.35, 0.25, 0.55], strict=True)])
    assert abs(paper_selective_regularizer(module).item() - paper) <= 1e-12


def test_the_default_regularizers_gradient_matches_finite_differences():
    # Central differences (step 1e-6, float64) in every parameter the value depends on through its own terms: all
    # magnitudes (h reads only weights) and the last layer's logits. The earlier layers' logits also move h, which
    # the docs make a constant ("h ... a constant here"): test_selection_units checks that part.
    a = _calibrated_layer()
    b = _layer([T.ShearX(), T.TranslateX(), T.Rotate()], [1.1, -0.4, 0.3], [0.5, 0.45, 0.7])
    c = _layer([T.Rotate(), T.ShearX(), T.Contrast()], [0.2, -0.3, 0.6], [0.35, 0.25, 0.55])
    with torch.no_grad():
        b.effect.copy_(torch.tensor([0.7, 1.6, 1.1], dtype=F64))
    module = augnet.AugmentationModule([a, b, c])
    params = [a.raw_magnitudes, b.raw_magnitudes, c.raw_magnitudes, c.weight_logits]
    grads = torch.autograd.grad(selective_regularizer(module), params)
    for p, grad in zip(params, grads, strict=True):
        fd = torch.zeros_like(p)
        for i in range(p.numel()):
            with torch.no_grad():
                old = p[i].item()
                p[i] = old + 1e-6
                up = selective_regularizer(module).item()
                p[i] = old - 1e-6
                down = selective_regularizer(module).item()
                p[i] = old
            fd[i] = (up - down) / 2e-6
        torch.testing.assert_close(grad, fd, rtol=1e-6, atol=1e-8)


def test_the_regularizers_at_the_documented_extremes():
    # All weight on one transform at magnitude 1: the paper's R = -1, the default -phi(1) = -0.5 log 3 (its effect,
    # normalised to mean 1 under the weights, is 1 there); three such layers on the same transform: +1 linearly,
    # +0.5 log 3 saturated (the first layer's reward, each later layer's cost). The identity (every magnitude 0):
    # R = 0 and the outward subgradient, dR/dmu_q = -w_q e_q / sqrt(Q), so the magnitudes can leave 0.
    def committed():
        layer = _layer([T.Rotate(), T.ShearX(), T.Brightness()], [40.0, -40.0, -40.0], [1.0, 0.4, 0.7])
        with torch.no_grad():
            layer.effect.copy_(torch.tensor([1.0, 3.0, 0.2], dtype=F64))  # mean 1 under w = (1, 0, 0)
        return layer

    one = committed()
    assert paper_selective_regularizer(one).item() == pytest.approx(-1.0, abs=1e-12)
    assert selective_regularizer(one).item() == pytest.approx(-0.5 * math.log(3), abs=1e-12)
    stack = augnet.AugmentationModule([committed(), committed(), committed()])
    assert selective_regularizer(stack, saturation=None).item() == pytest.approx(1.0, abs=1e-12)
    assert selective_regularizer(stack).item() == pytest.approx(0.5 * math.log(3), abs=1e-12)
    assert paper_selective_regularizer(stack).item() == pytest.approx(-3.0, abs=1e-12)

    identity = _layer([T.Rotate(), T.ShearX(), T.Brightness()], [0.3, -0.2, 0.5], [0.0, 0.0, 0.0])
    with torch.no_grad():
        identity.effect.copy_(torch.tensor([1.5, 0.5, 1.0], dtype=F64))
    for regularizer, e in ((selective_regularizer, [1.5, 0.5, 1.0]), (paper_selective_regularizer, [1.0] * 3)):
        identity.zero_grad()
        value = regularizer(identity)
        assert value.item() == 0.0
        value.backward()
        w = identity.weights.detach()
        torch.testing.assert_close(identity.raw_magnitudes.grad, -w * torch.tensor(e, dtype=F64) / math.sqrt(3))


# ------------------------------------------------------------------ param_groups


def _roles(model):
    """Each parameter's role: what param_groups' docs give it."""
    roles = {}
    for m in model.modules():
        if isinstance(m, augnet.ConditionedAugmentationLayer):
            roles.update({id(p): "conditioner" for p in m.conditioner.parameters()})
        if isinstance(m, augnet.AugmentationLayer):
            roles[id(m.weight_logits)], roles[id(m.raw_magnitudes)] = "logits", "magnitudes"
        if isinstance(m, augnet.augerino.LieAugmentation):
            roles[id(m.raw_width)] = "magnitudes"
    return {id(p): roles.get(id(p), "trunk") for p in model.parameters()}


@pytest.mark.parametrize("kind", ["stack", "augerino", "conditioned"])
def test_param_groups_put_every_parameter_in_one_group_at_its_documented_rate_and_decay(kind):
    trunk = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 3))
    if kind == "augerino":
        model = augnet.Augerino(trunk)
    elif kind == "stack":
        model = augnet.AugNet(trunk, [augnet.AugmentationLayer([T.Rotate(), T.ShearX()]),
                                      augnet.AugmentationLayer([T.Brightness()])])  # fmt: skip
    else:
        model = augnet.AugNet(trunk, [augnet.ConditionedAugmentationLayer([T.Rotate(), T.ShearX()], channels=3),
                                      augnet.AugmentationLayer([T.Brightness()])])  # fmt: skip
    roles = _roles(model)
    options = [
        {},
        {"weight_lr": None},
        {"aug_lr": None, "weight_lr": None},
        {"aug_lr": 2e-3, "weight_lr": 7e-3, "magnitude_weight_decay": 0.3, "conditioner_lr": 1e-3,
         "conditioner_weight_decay": 0.05},
        {"weight_lr": None, "magnitude_weight_decay": 0.3},
    ]  # fmt: skip
    for kw in options:
        groups = augnet.param_groups(model, weight_decay=1e-4, aug_weight_decay=0.01, **kw)
        placed = [id(p) for g in groups for p in g["params"]]
        assert sorted(placed) == sorted(roles), kw  # every parameter, each exactly once
        aug_lr = kw.get("aug_lr", augnet.AUG_LR)
        weight_lr = kw.get("weight_lr", augnet.WEIGHT_LR)
        expected = {
            "trunk": (None, 1e-4),
            "logits": (aug_lr if weight_lr is None else weight_lr, 0.01),
            "magnitudes": (aug_lr, kw.get("magnitude_weight_decay", 0.01)),
            "conditioner": (kw.get("conditioner_lr", aug_lr), kw.get("conditioner_weight_decay", 0.0)),
        }
        for group in groups:
            for p in group["params"]:
                assert (group.get("lr"), group["weight_decay"]) == expected[roles[id(p)]], (kw, roles[id(p)])
        if kind == "augerino":  # no weight logits: no group for them, whatever weight_lr
            assert len(groups) == 2
