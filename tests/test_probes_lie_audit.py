"""An audit of the Lie derivative, of select_tau and of the report's composition, against computations of its own.

Each test computes what the probe should give from its definition (the velocity field of a warp and the central
gradient of the image; the ablation grid search of Zaidi et al. by hand; each public measure called directly on the
report's features) and compares.
"""

import copy
import warnings

import pytest
import torch
from helpers import gen
from torch import nn

from augnet import probes
from augnet.probes import lie
from augnet.probes._common import derangement, seeded
from augnet.probes.families import family
from augnet.probes.lie import transform_derivative
from augnet.probes.ranking_model import _row_values
from augnet.transforms import image as T

F64 = torch.float64


def central_gradient(x):
    """(d/dcx, d/dcy) of the image by central differences, zero outside: the symmetric derivative of bilinear
    sampling at a pixel centre along each axis."""
    p = torch.nn.functional.pad(x, (1, 1, 1, 1))
    return (p[..., 1:-1, 2:] - p[..., 1:-1, :-2]) / 2, (p[..., 2:, 1:-1] - p[..., :-2, 1:-1]) / 2


# d(source position)/dt at t = 0, in pixels (x right, y down, about the centre): g_t x at p reads x at p + t v(p).
VELOCITY = {
    "Rotate": lambda cx, cy: (-cy, cx),  # input = [[cos, -sin], [sin, cos]] output
    "Scale": lambda cx, cy: (-cx, -cy),  # input = output / e^t
    "ShearX": lambda cx, cy: (cy, 0 * cy),
    "ShearY": lambda cx, cy: (0 * cx, cx),
    "TranslateX": lambda cx, cy: (-1 + 0 * cx, 0 * cy),
    "TranslateY": lambda cx, cy: (0 * cx, -1 + 0 * cy),
}


@pytest.mark.parametrize("name", list(VELOCITY))
def test_warp_derivative_is_the_velocity_dotted_with_the_central_gradient(name):
    # The symmetric derivative of bilinear sampling along v at a pixel centre is v . (central gradient), for any
    # image (the mean of the two one-sided derivatives of the bilinear patches). Computed at t = +-1e-9 alone, a
    # rotation's and a zoom's were off by 2e-8 and 3e-8 (the patches are not linear along a diagonal path).
    x = torch.rand(2, 3, 9, 11, generator=gen(3), dtype=F64)  # not square: the aspect must be handled
    h, w = x.shape[-2:]
    cy, cx = torch.meshgrid(torch.arange(h, dtype=F64) - (h - 1) / 2, torch.arange(w, dtype=F64) - (w - 1) / 2,
                            indexing="ij")  # fmt: skip
    vx, vy = VELOCITY[name](cx, cy)
    dx, dy = central_gradient(x)
    expected = vx * dx + vy * dy
    tol = 1e-12 if lie._warps_differentiate_twice() else 1e-7  # autograd, or the difference route of torch 2.11
    torch.testing.assert_close(transform_derivative(getattr(T, name)(), x), expected, rtol=0, atol=tol)


def _two_models():
    torch.manual_seed(1)
    f = nn.Sequential(nn.Conv2d(3, 4, 3), nn.Tanh(), nn.Flatten(), nn.Linear(4 * 36, 3)).double()
    g = nn.Sequential(nn.Conv2d(3, 2, 5), nn.Sigmoid(), nn.Flatten(), nn.Linear(2 * 16, 3)).double()
    return f, g


class _Combination(nn.Module):
    def __init__(self, f, g, a, b):
        super().__init__()
        self.f, self.g, self.a, self.b = f, g, a, b

    def forward(self, x):
        return self.a * self.f(x) + self.b * self.g(x)


class _Blind(nn.Module):
    """Ignores its input: a constant (B, 5) output."""

    def __init__(self):
        super().__init__()
        self.c = nn.Parameter(torch.linspace(-1, 2, 5, dtype=F64))

    def forward(self, x):
        return self.c.expand(len(x), 5)


def test_lie_derivative_is_linear_in_the_model_and_zero_for_an_input_blind_one():
    f, g = _two_models()
    x = torch.rand(3, 3, 8, 8, generator=gen(1), dtype=F64)
    a, b = 2.5, -0.75
    for transform in (T.Rotate(), T.Scale(), T.Hue()):
        lf, lg, lc = (probes.lie_derivative(m, x, transform, return_derivative=True)["derivative"]["logits"]
                      for m in (f, g, _Combination(f, g, a, b)))  # fmt: skip
        assert float(lc.abs().max()) > 1e-2
        torch.testing.assert_close(lc, a * lf + b * lg, rtol=1e-12, atol=1e-14)
    out = probes.lie_derivative(_Blind(), x, T.Rotate(), return_derivative=True)
    assert bool((out["derivative"]["logits"] == 0).all())
    assert out["mean"]["logits"] == 0.0 and out["mean_relative"]["logits"] == 0.0


def _warped(transform, x, t):
    fam = family(transform)
    params = dict(transform.sample(x, torch.tensor(1.0, dtype=F64), generator=gen(0)))
    params[fam.param] = fam.value(torch.full((len(x),), t, dtype=F64), params[fam.param], tuple(x.shape[-2:]))
    return transform(x, 1.0, params=params)


def test_batch_norm_is_read_with_its_running_statistics_in_float32_and_float64():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.Tanh(), nn.AdaptiveAvgPool2d(1),
                        nn.Flatten(), nn.Linear(4, 3)).double()  # fmt: skip
    with torch.no_grad():
        net[1].running_mean.normal_(generator=gen(2))
        net[1].running_var.uniform_(0.5, 2.0, generator=gen(3))
    net.train()  # batch statistics would couple the rows; the probe reads the running ones
    x = torch.rand(4, 3, 8, 8, generator=gen(4), dtype=F64)
    out = probes.lie_derivative(net, x, T.Rotate(), return_derivative=True)["derivative"]["logits"]
    frozen = copy.deepcopy(net).eval()

    def d(h):
        with torch.no_grad():
            return (frozen(_warped(T.Rotate(), x, h)) - frozen(_warped(T.Rotate(), x, -h))) / (2 * h)

    fd = 2 * d(5e-5) - d(1e-4)  # Richardson: the warp has a kink at 0
    torch.testing.assert_close(out, fd, rtol=1e-6, atol=1e-9 * float(fd.abs().max()))
    one = probes.lie_derivative(net, x[2:3], T.Rotate(), return_derivative=True)["derivative"]["logits"]
    torch.testing.assert_close(one, out[2:3], rtol=1e-12, atol=0)  # a row's value does not depend on the others
    single = probes.lie_derivative(copy.deepcopy(net).float(), x.float(), T.Rotate(), return_derivative=True)
    torch.testing.assert_close(single["derivative"]["logits"].double(), out, rtol=0, atol=1e-5 * float(out.abs().max()))
    assert net.training and all(m.training for m in net.modules())


# --------------------------------------------------------------------------- select_tau


def _tau_net():
    torch.manual_seed(5)
    net = nn.Sequential(nn.Conv2d(2, 5, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(5, 3))
    with torch.no_grad():
        net[4].weight.mul_(10)
        net[4].bias.zero_()
        net[0].bias.zero_()
    return net.double().eval()


@pytest.mark.parametrize("units", ["element", "channel"])
@pytest.mark.parametrize("score", ["all", "within"])
def test_select_tau_is_the_papers_grid_search_by_hand(units, score):
    net = _tau_net()
    x = torch.randn(30, 2, 6, 6, generator=gen(0), dtype=F64)
    x_t = x.flip(-1)
    with torch.no_grad():
        y = net(x).argmax(1)
        y[::4] = (y[::4] + 1) % 3
        a = torch.cat([net[:2](x), net[:2](x_t)])  # the layer on clean, then transformed inputs
    taus, seen = [0.0, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 1.0], [0, 2]
    kwargs = {"seen_classes": seen} if score == "within" else {}
    out = probes.select_tau(net, "1", x, y, taus=taus, x_t=x_t, units=units, score=score, max_drop=0.02, **kwargs)
    # By hand: f_k = activity / its maximum over clean and transformed inputs; units at or below tau zeroed.
    u = a if units == "element" else a.mean((2, 3))
    top = u.amax(0)
    f = u / torch.where(top > 0, top, torch.ones_like(top))
    labels = torch.cat([y, y])
    scored = torch.ones(60, dtype=torch.bool)
    if score == "within":  # the transformed inputs of the seen classes
        scored[:30] = False
        scored[30:] = torch.isin(y, torch.tensor(seen))

    def accuracy(act):
        with torch.no_grad():
            return float((net[2:](act).argmax(1) == labels)[scored].double().mean())

    base = accuracy(a)
    kept, fractions = [], []
    for tau in taus:
        active = f > tau
        fractions.append(float(active.double().mean()))
        kept.append(accuracy(a * (active if units == "element" else active[:, :, None, None])))
    drops = [base - k for k in kept]
    assert out["accuracy"] == pytest.approx(base)
    assert out["accuracy_inactive_ablated"] == pytest.approx(kept)
    assert out["active_fraction"] == pytest.approx(fractions)
    assert out["tau"] == max(t for t, d in zip(taus, drops, strict=True) if d <= 0.02 + 1e-12)
    assert out["n_scored"] == int(scored.sum())
    assert min(drops[:-1]) > 0 or max(drops) > 0.02  # the rule had something to decide
    # A larger tau never leaves more units active, and tau = 1 none.
    assert all(p >= q for p, q in zip(out["active_fraction"], out["active_fraction"][1:]))
    assert out["active_fraction"][-1] == 0.0


def test_select_tau_ignores_the_layers_scale_and_passes_dead_and_constant_layers():
    net = _tau_net()
    x = torch.randn(30, 2, 6, 6, generator=gen(0), dtype=F64)
    with torch.no_grad():
        y = net(x).argmax(1)
    y[::3] = (y[::3] + 1) % 3
    taus = [0.0, 0.1, 0.3, 0.5, 0.7, 0.9]
    ref = probes.select_tau(net, "1", x, y, taus=taus, x_t=x.flip(-1))
    for c in (1e-6, 1e5):  # the layer times c, the next weights over c: the same network
        scaled = copy.deepcopy(net)
        with torch.no_grad():
            scaled[0].weight.mul_(c)
            scaled[4].weight.div_(c)
        got = probes.select_tau(scaled, "1", x, y, taus=taus, x_t=x.flip(-1))
        for key in ("tau", "accuracy", "drop", "active_fraction", "accuracy_active_ablated"):
            assert got[key] == pytest.approx(ref[key], abs=1e-12), (c, key)
    for fill, active in ((-1.0, 0.0), (2.0, 1.0)):  # every unit dead; every unit the same constant
        flat = copy.deepcopy(net)
        with torch.no_grad():
            flat[0].weight.zero_()
            flat[0].bias.fill_(fill)
        out = probes.select_tau(flat, "1", x, y, taus=taus, x_t=x.flip(-1))
        assert out["drop"] == [0.0] * len(taus) and out["tau"] == max(taus)
        assert out["active_fraction"] == [active] * len(taus)


# --------------------------------------------------------------------------- report


@pytest.fixture(scope="module")
def class_report():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 5, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(5, 3)).eval()
    x = torch.rand(24, 3, 10, 10, generator=gen(1))
    labels = torch.arange(24) % 3
    rep = probes.report(net, x, ["Rotate", "HorizontalFlip"], ["1", "logits"], [0.5, 1.0], seed=7, by_class=labels,
                        per_unit=True)  # fmt: skip
    return rep, net, x, labels


def test_every_record_of_every_class_is_the_public_measure_on_its_rows(class_report):
    rep, net, x, labels = class_report
    seed, layers = 7, ["1", "logits"]
    z = probes.features(net, x, layers, reduce="mean")
    for name, transform in (("Rotate", T.Rotate()), ("HorizontalFlip", T.HorizontalFlip())):
        for m in (0.5, 1.0):
            z_t = probes.features(net, transform(x, m, generator=gen(seed + 1)), layers, reduce="mean")
            for cls in (None, 0, 1, 2):
                rows = torch.arange(len(x)) if cls is None else (labels == cls).nonzero().flatten()
                perm = derangement(len(rows), seeded(seed))
                for layer in layers:
                    a, b = z[layer][rows], z_t[layer][rows]
                    stack = torch.stack([a, b])
                    p_value = probes.anova_invariance(stack)["p_value"]
                    good = probes.goodfellow_invariance(a, b[None])
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")  # a class's 8 rows: too few for the map (noted)
                        errors = probes.equivariance_report(a, b, holdout=0.3, seed=seed)["scores"]
                    expected = {
                        "inv_augnet": probes.invariance_score(a, b, "cosine", "clean", permutation=perm).nanmedian(),
                        "inv_bouchacourt": probes.invariance_score(
                            a, b, "cosine", "transformed", permutation=perm
                        ).nanmedian(),
                        "alignment": probes.equivariance_alignment(a, b, generator=seeded(seed))["difference"],
                        "equivariance_error": errors["equivariance"],
                        "invariance_error": errors["invariance"],
                        "normalized_variance": probes.normalized_variance(stack)["normalized_variance"].nanmean(),
                        # Bonferroni over the layer's units, by hand
                        "anova_invariant": ((p_value * a.shape[1]).clamp(max=1) > 0.05).double().mean(),
                        "goodfellow": good["invariance"].nanmean(),
                        "goodfellow_local": good["local_rate"].nanmean(),
                        "normalized_distance": probes.distance_invariance(stack)["normalized_distance"].nanmean(),
                    }
                    if layer == "1":
                        found = probes.neuron_invariance(a, b, 0.05, units="channel", per_input=False)
                        expected["neuron_invariance"] = found["summary"]["mean"]
                    for measure, value in expected.items():
                        got = rep.value(measure, layer, name, m, cls)
                        assert got == pytest.approx(float(value), rel=1e-5, abs=1e-7), (measure, layer, name, m, cls)
    # The ranker: two copies drawn from seed + 1 and seed + 2 at the largest magnitude (a flip's at 0.5).
    for name, transform, param, m in (("Rotate", T.Rotate(), "angle", 1.0), ("HorizontalFlip", T.HorizontalFlip(),
                                                                                "gate", 0.5)):  # fmt: skip
        pa, pb = transform.draw_params(x, m, gen(seed + 1)), transform.draw_params(x, m, gen(seed + 2))
        za, zb = (probes.features(net, transform(x, m, params=p), layers, reduce="mean") for p in (pa, pb))
        m_a, m_b = _row_values(pa[param], param, len(x)), _row_values(pb[param], param, len(x))
        ranked = probes.ranking_probe_per_layer(za, zb, m_a, m_b, generator=seeded(seed))
        assert rep.info["ranking_held_out"][name] == ranked["n_test"]
        for layer in layers:
            assert rep.value("ranking_accuracy", layer, name) == pytest.approx(ranked["accuracy"][layer])
            assert rep.value("importance", layer, name) == pytest.approx(ranked["importance"][layer])
    # What the verdict prints is what the table holds.
    text = rep.verdict()
    assert f"Inv_T {rep.value('inv_augnet', 'logits', 'Rotate'):.3f} at logits" in text
    assert f"|L phi| / |phi| {rep.value('lie_derivative_relative', 'logits', 'Rotate'):.3g} per rad" in text
    assert f"normalised variance {rep.value('normalized_variance', 'logits', 'HorizontalFlip'):.3g} at logits" in text


class _GreyUnits(nn.Module):
    """relu(w_k * (sum of the channels) + b_k) per pixel: unmoved by a hue rotation, moved with a flip."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.tensor([1.0, -0.5, 0.8, 0.3], dtype=F64)[:, None, None])
        self.b = nn.Parameter(torch.tensor([-0.5, 1.0, -1.2, 0.1], dtype=F64)[:, None, None])

    def forward(self, x):
        return torch.relu(self.w * x.sum(1, keepdim=True) + self.b)


def test_a_report_on_an_exactly_invariant_model_is_perfect_in_every_measure_class_and_mode():
    # A global maximum of pointwise units of the grey level: exactly invariant to hue and to flips.
    torch.manual_seed(0)
    net = nn.Sequential(_GreyUnits(), nn.AdaptiveMaxPool2d(1), nn.Flatten(), nn.Linear(4, 3).double()).eval()
    x = torch.rand(24, 3, 8, 8, generator=gen(0), dtype=F64)
    perfect = {"inv_augnet": 1.0, "inv_bouchacourt": 1.0, "alignment": 0.0, "equivariance_error": 0.0,
               "invariance_error": 0.0, "normalized_variance": 0.0, "transformation_variance": 0.0,
               "anova_invariant": 1.0, "goodfellow_local": 1.0, "normalized_distance": 0.0}  # fmt: skip
    for mode in ("random", "grid"):
        rep = probes.report(net, x, ["Hue", "HorizontalFlip"], ["0", "logits"], [1.0], by_class=torch.arange(24) % 2,
                            transformations=mode, grid_points=3)  # fmt: skip
        for r in rep.records:
            if r["measure"] in perfect:
                assert r["value"] == pytest.approx(perfect[r["measure"]], abs=1e-9), r
            elif r["measure"] == "neuron_invariance" and r["layer"] == "0":
                assert r["value"] == pytest.approx(1.0, abs=1e-12), r
            elif r["measure"] == "ranking_accuracy":
                assert r["value"] == 0.5, r  # nothing to rank by
            elif r["measure"].startswith("lie") and r["transform"] == "Hue":
                assert r["value"] < 1e-12, r


def test_a_report_leaves_the_model_and_the_global_random_state_as_they_were():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Dropout(0.5), nn.AdaptiveAvgPool2d(1),
                        nn.Flatten(), nn.Linear(4, 3)).train()  # fmt: skip
    net[1].eval()  # a model half in training mode stays so
    net[0].weight.requires_grad_(False)
    x = torch.rand(16, 3, 8, 8, generator=gen(0))
    state = {k: v.clone() for k, v in net.state_dict().items()}
    modes = [m.training for m in net.modules()]
    flags = [p.requires_grad for p in net.parameters()]
    torch.manual_seed(123)
    rng = torch.get_rng_state()
    probes.report(net, x, ["Rotate", "HorizontalFlip"], ["2", "logits"], [1.0], transformations="grid",
                  aggregation="positions", grid_points=3, per_unit=True, by_class=torch.arange(16) % 2)  # fmt: skip
    assert torch.equal(torch.get_rng_state(), rng) and torch.is_grad_enabled()
    assert all(torch.equal(v, state[k]) for k, v in net.state_dict().items())
    assert [m.training for m in net.modules()] == modes
    assert [p.requires_grad for p in net.parameters()] == flags and all(p.grad is None for p in net.parameters())
