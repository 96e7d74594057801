"""The Augerino baseline: Lie-algebra warps with learnable widths."""

import math

import pytest
import torch
import torch.nn.functional as F
from helpers import gen
from torch import nn

import augnet
from augnet.augerino import LIE_GENERATORS, LieAugmentation
from augnet.transforms import stratified_copies


def images(b=4, seed=0):
    return torch.rand(b, 3, 10, 10, generator=gen(seed))


def test_zero_widths_are_the_identity():
    aug = widths()  # softplus(-inf) = 0 for every generator
    assert torch.equal(aug.widths, torch.zeros(6))
    x = images()
    torch.testing.assert_close(aug(x, copies=3, generator=gen(1)), x.repeat(3, 1, 1, 1), atol=1e-6, rtol=0)


def test_matrix_exponential_of_the_rotation_generator_is_a_rotation():
    aug = LieAugmentation()
    angle = 0.7
    g = aug.generators[list(LIE_GENERATORS).index("rotate")].double()
    expected = torch.tensor(
        [[math.cos(angle), -math.sin(angle), 0], [math.sin(angle), math.cos(angle), 0], [0, 0, 1]], dtype=torch.float64
    )
    torch.testing.assert_close(torch.linalg.matrix_exp(angle * g), expected)
    # And the scale generator gives a uniform zoom, the translation a shift.
    s = aug.generators[list(LIE_GENERATORS).index("scale")].double()
    torch.testing.assert_close(
        torch.linalg.matrix_exp(0.3 * s), torch.diag(torch.tensor([math.exp(0.3)] * 2 + [1.0])).double()
    )
    t = aug.generators[list(LIE_GENERATORS).index("translate_x")].double()
    torch.testing.assert_close(torch.linalg.matrix_exp(0.4 * t)[0, 2], torch.tensor(0.4, dtype=torch.float64))


def widths(**values):
    aug = LieAugmentation()
    with torch.no_grad():
        aug.raw_width.fill_(-math.inf)
        for name, w in values.items():
            aug.raw_width[list(LIE_GENERATORS).index(name)] = math.log(math.expm1(w))
    return aug


def test_drawn_translations_and_rotations_fill_their_widths():
    m = widths(translate_x=0.1, translate_y=0.2).matrices(2000, images(), gen(0)).double()
    # Pure translations: exp(tx Gx + ty Gy) = [[1, 0, tx], [0, 1, ty], [0, 0, 1]].
    torch.testing.assert_close(m[:, :2, :2], torch.eye(2, dtype=torch.float64).expand(2000, 2, 2))
    shifts = m[:, :2, 2].abs().amax(0)
    assert (shifts <= torch.tensor([0.1, 0.2], dtype=torch.float64) + 1e-6).all()
    assert (shifts > torch.tensor([0.099, 0.198], dtype=torch.float64)).all()
    m = widths(rotate=0.5).matrices(2000, images(), gen(1)).double()
    angles = torch.atan2(m[:, 1, 0], m[:, 0, 0])
    assert angles.abs().max() <= 0.5 + 1e-6 and angles.abs().max() > 0.49


def test_regularizer_by_hand():
    model = augnet.Augerino(nn.Flatten(), init_width=[0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    expected = -math.sqrt(sum(w * w for w in [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]))
    assert math.isclose(augnet.augerino_regularizer(model).item(), expected, rel_tol=1e-5)
    with pytest.raises(ValueError, match="no AugmentationLayer found"):
        augnet.selective_regularizer(model)


def test_copies_one_trunk_call_and_aggregation_like_augnet():
    calls = []
    torch.manual_seed(0)
    linear = nn.Sequential(nn.Flatten(), nn.Linear(300, 5))

    class Trunk(nn.Module):
        def forward(self, x):
            calls.append(x.shape[0])
            return linear(x)

    model = augnet.Augerino(Trunk(), init_width=0.3, eval_copies=4).eval()
    x = images()
    out = model(x, generator=gen(2))
    with stratified_copies(4):  # the evaluation's draws (stratify=True, the default)
        rows = model.augment(x, copies=4, generator=gen(2))
    expected = F.log_softmax(linear(rows), 1).reshape(4, 4, 5).mean(0)
    torch.testing.assert_close(out, expected)
    assert calls == [16]


def test_gradient_reaches_the_widths_and_training_widens_them():
    model = augnet.Augerino(nn.Sequential(nn.Flatten(), nn.Linear(300, 3)), init_width=0.1)
    groups = augnet.param_groups(model)
    assert [p is model.augment.raw_width for p in groups[1]["params"]] == [True]
    opt = torch.optim.SGD(groups, lr=0.5)
    before = model.augment.widths.detach().clone()
    for _ in range(3):
        loss = augnet.augerino_regularizer(model)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert (model.augment.widths > before).all()  # the regulariser alone widens every width


def test_policy_in_natural_units():
    model = augnet.Augerino(nn.Flatten(), init_width=[0.5, 0.5, math.pi / 4, 0.1, 0.1, 0.1])
    model.augment(torch.rand(2, 3, 20, 40))
    policy = {e["transform"]: e for e in model.policy()[0]}  # one layer, one entry per generator
    assert policy["rotate"]["range"][1] == pytest.approx(45.0)
    assert policy["translate_x"]["range"][1] == pytest.approx(10.0)  # half the width 40, times 0.5
    assert policy["scale"]["range"][1] == pytest.approx(math.exp(0.1))


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(init_width=0.0), ValueError, "init_width must be"),
        (dict(init_width=[0.1, 0.2]), ValueError, "init_width must be"),
        (dict(eval_copies=0), ValueError, "copies must be >= 1"),
        (dict(aggregate="max"), ValueError, "aggregate must be one of"),
    ],
)
def test_bad_construction(kwargs, error, match):
    with pytest.raises(error, match=match):
        augnet.Augerino(nn.Flatten(), **kwargs)


def test_bad_input():
    model = augnet.Augerino(nn.Flatten())
    with pytest.raises(ValueError, match=r"\(B, Ch, H, W\) images"):
        model(torch.rand(3, 10))
    with pytest.raises(TypeError, match="floating-point"):
        model(torch.zeros(2, 3, 4, 4, dtype=torch.uint8))
    with pytest.raises(TypeError, match=r"generator must be a torch\.Generator or None, got int"):
        model(torch.rand(2, 3, 4, 4), generator=0)  # as AugNet says it (was: rand() received an invalid ...)


def test_augerino_is_an_augnet_with_a_lie_augmentation():
    # The same numbers whether built as Augerino(...) or as AugNet(trunk, LieAugmentation(...)).
    torch.manual_seed(0)
    a = augnet.Augerino(nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 3)), init_width=0.3, eval_copies=3)
    torch.manual_seed(0)
    b = augnet.AugNet(nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 3)), LieAugmentation(0.3), eval_copies=3)
    assert isinstance(a, augnet.AugNet)
    x = torch.rand(4, 3, 8, 8)
    out_a = a.eval()(x, generator=torch.Generator().manual_seed(1))
    out_b = b.eval()(x, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(out_a, out_b, rtol=0, atol=0)
    assert a.policy().to_json() == b.policy().to_json()
    assert [e["transform"] for e in a.policy()[0]] == list(LIE_GENERATORS)
    torch.testing.assert_close(augnet.augerino_regularizer(a), -a.augment.widths.norm())


def test_augnet_refuses_an_augmentation_without_a_policy():
    with pytest.raises(TypeError, match="augment must be"):
        augnet.AugNet(nn.Flatten(), nn.Identity())
    with pytest.raises(ValueError, match="must not be empty"):
        augnet.AugNet(nn.Flatten(), [])


def test_a_wide_initial_width_is_kept_not_overflowed():
    # softplus^-1 through log(expm1(w)) overflowed past w = 709; small widths keep their exact inverse.
    from augnet.augerino import LieAugmentation

    for w in (0.1, 19.9, 20.0, 1000.0):
        torch.testing.assert_close(LieAugmentation(init_width=w).widths, torch.full((6,), w), rtol=1e-6, atol=0)
    assert LieAugmentation(init_width=0.1).raw_width[0].item() == torch.tensor(math.log(math.expm1(0.1))).item()
    with pytest.raises(ValueError, match="init_width must be one positive width"):
        LieAugmentation(init_width=1e39)  # finite in Python, infinite in float32
    with pytest.raises(ValueError, match="rounds to a width of 0 in float32"):
        LieAugmentation(init_width=1e-50)  # softplus underflows: it would never augment


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_exponential_off_the_cpu_is_torchs_without_its_read_back(dtype):
    # On a GPU, torch.linalg.matrix_exp reads the norms back to the host every call (ATen's mexp_impl): Augerino
    # takes a fixed Taylor series there. Its values and gradients, run here on CPU tensors, against torch's.
    from augnet.augerino import _taylor_exp, matrix_exp

    g = torch.Generator().manual_seed(0)
    a = torch.randn(300, 3, 3, generator=g, dtype=torch.float64)
    a[:, 2] = 0  # aff(2): the last row of every generator is 0
    a = a * torch.logspace(-4, math.log10(50), 300, dtype=torch.float64)[:, None, None] / a.flatten(1).norm(dim=1)[
        :, None, None]
    a = a.to(dtype).double()  # the input as the dtype holds it: what is left to compare is the output's rounding
    want = torch.linalg.matrix_exp(a)
    got = _taylor_exp(a.to(dtype))
    assert got.dtype == dtype
    rel = float(((got.double() - want).flatten(1).norm(dim=1) / want.flatten(1).norm(dim=1)).max())
    assert rel < (1e-12 if dtype == torch.float64 else 3e-7), rel
    assert torch.equal(matrix_exp(a), want)  # on the CPU, torch's own
    leaf = a[:20].clone().requires_grad_()
    r = torch.randn(20, 3, 3, generator=g, dtype=torch.float64)
    (mine,) = torch.autograd.grad((_taylor_exp(leaf) * r).sum(), leaf)
    (theirs,) = torch.autograd.grad((torch.linalg.matrix_exp(leaf) * r).sum(), leaf)
    torch.testing.assert_close(mine, theirs, rtol=1e-10, atol=1e-10)
