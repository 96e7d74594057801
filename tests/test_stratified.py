"""Stratified evaluation copies: each sample's C copies cover the transforms' ranges evenly (AugNet(stratify=True))."""

import pytest
import torch
from torch import nn

import augnet
from augnet.transforms import image as T
from augnet.transforms import signal as S
from augnet.transforms.base import stratified_copies, stratify, stratifying


def test_outside_a_block_draws_are_untouched():
    u = torch.rand(12)
    assert stratify(u, None) is u and not stratifying(12)


@pytest.mark.parametrize("shape", [(8 * 4,), (8 * 4, 6)])
def test_each_sample_takes_every_stratum_once(shape):
    g = torch.Generator().manual_seed(0)
    u = torch.rand(shape, generator=g)
    with stratified_copies(4):
        s = stratify(u, g)
    assert s.shape == u.shape and float(s.min()) >= 0 and float(s.max()) < 1
    strata = (s * 4).floor().reshape(4, 8, *shape[1:])  # (copies, samples, ...)
    assert torch.equal(strata.sort(0).values, torch.arange(4.0).view(4, *[1] * (strata.dim() - 1)).expand_as(strata))
    # Within its stratum a value keeps its draw: (stratum + u) / C.
    torch.testing.assert_close(s * 4 - (s * 4).floor(), u)


def test_every_copy_is_still_uniform():
    g = torch.Generator().manual_seed(1)
    with stratified_copies(4):
        s = stratify(torch.rand(4 * 20_000, generator=g), g).reshape(4, -1)
    for copy in s:  # each copy on its own: uniform on [0, 1) (a copy is not tied to one stratum)
        counts = torch.histc(copy, bins=4, min=0, max=1) / copy.numel()
        torch.testing.assert_close(counts, torch.full((4,), 0.25), atol=0.01, rtol=0)


def test_rows_not_a_multiple_of_the_copies_and_one_copy_are_untouched():
    u = torch.rand(10)
    with stratified_copies(4):
        assert stratify(u, None) is u
    with stratified_copies(1):
        assert stratify(torch.rand(8), None).shape == (8,) and not stratifying(8)


def test_blocks_nest_and_restore_and_refuse_bad_copies():
    with stratified_copies(4):
        with stratified_copies(2):
            assert stratifying(6) and not stratifying(5)
        assert stratifying(8) and not stratifying(6)
    assert not stratifying(8)
    with pytest.raises(ValueError):
        stratified_copies(0)


def _linear_model(stratify: bool, eval_copies: int = 4) -> augnet.AugNet:
    # The trunk reads the image's first moment along x, which a small shift moves linearly.
    torch.manual_seed(0)
    grid = torch.linspace(-1, 1, 16).view(1, 1, 1, 16)
    trunk = nn.Sequential()
    trunk.forward = lambda x: (x * grid).mean((1, 2, 3))[:, None]
    layer = augnet.AugmentationLayer([T.TranslateX()], init_magnitude=0.5)
    return augnet.AugNet(trunk, layer, eval_copies=eval_copies, aggregate="mean", stratify=stratify).eval()


def _spread(model, x, draws=200) -> float:
    outs = torch.stack([model(x, generator=torch.Generator().manual_seed(k)) for k in range(draws)])
    return float(outs.detach().var(0).mean())


def test_stratified_copies_reduce_the_averages_sampling_noise():
    x = torch.zeros(6, 1, 16, 16)
    x[:, :, 4:12, 6:10] = 1  # a bar away from the borders
    iid, strat = _spread(_linear_model(False), x), _spread(_linear_model(True), x)
    # For a linear effect the variance of a C-copy mean falls from var / C to about var / C^3.
    assert strat < iid / 4, (strat, iid)
    mean_iid = torch.stack([_linear_model(False)(x, generator=torch.Generator().manual_seed(k)) for k in range(200)])
    mean_strat = torch.stack([_linear_model(True)(x, generator=torch.Generator().manual_seed(k)) for k in range(200)])
    torch.testing.assert_close(mean_strat.mean(0), mean_iid.mean(0), atol=2e-3, rtol=0)  # the same expectation


def test_training_is_unchanged_and_the_evaluation_stratifies_by_default():
    x = torch.rand(5, 3, 12, 12)

    def model(stratify):
        torch.manual_seed(0)
        trunk = nn.Sequential(nn.Flatten(), nn.Linear(3 * 12 * 12, 4))
        layer = augnet.AugmentationLayer([T.Rotate(), T.TranslateX(), T.Contrast()], init_magnitude=0.4)
        return augnet.AugNet(trunk, layer, train_copies=3, eval_copies=4, effect_every=0, stratify=stratify)

    plain, strat = model(False), model(True)
    g = lambda: torch.Generator().manual_seed(3)  # noqa: E731
    torch.testing.assert_close(strat.train()(x, generator=g()), plain.train()(x, generator=g()), rtol=0, atol=0)
    torch.manual_seed(0)
    trunk = nn.Sequential(nn.Flatten(), nn.Linear(3 * 12 * 12, 4))
    layer = augnet.AugmentationLayer([T.Rotate(), T.TranslateX(), T.Contrast()], init_magnitude=0.4)
    default = augnet.AugNet(trunk, layer, train_copies=3, eval_copies=4, effect_every=0).eval()
    assert default.stratify and "stratify" not in repr(default) and "stratify=False" in repr(plain)
    torch.testing.assert_close(strat.eval()(x, generator=g()), default(x, generator=g()), rtol=0, atol=0)
    assert not torch.equal(plain.eval()(x, generator=g()), default(x, generator=g()))  # independent: other draws


def test_the_layers_choice_of_transform_is_stratified_too(monkeypatch):
    # Weights 1/4 and 3/4 over 4 copies: every sample's copies take the first transform once, the second three times.
    layer = augnet.AugmentationLayer([S.SignFlip(), S.GaussianNoise()], init_magnitude=0.5)
    with torch.no_grad():
        layer.weight_logits.copy_(torch.tensor([0.0, torch.log(torch.tensor(3.0))]))
    choices = []
    real = layer._forward_generic

    def spy(x, c, n, scales, mu, choice, generator):
        choices.append(choice)
        return real(x, c, n, scales, mu, choice, generator)

    monkeypatch.setattr(layer, "_forward_generic", spy)
    model = augnet.AugNet(nn.Flatten(), layer, eval_copies=4, aggregate="mean", stratify=True).eval()
    model(torch.randn(50, 1, 32), generator=torch.Generator().manual_seed(0))
    counts = (choices[-1].reshape(4, 50) == 0).sum(0)
    assert torch.equal(counts, torch.ones(50, dtype=counts.dtype))
    model.stratify = False  # independent copies: some samples get the first transform 0 or 2+ times
    model(torch.randn(50, 1, 32), generator=torch.Generator().manual_seed(0))
    assert not torch.equal((choices[-1].reshape(4, 50) == 0).sum(0), counts)


def test_augerino_stratifies_its_coefficients():
    torch.manual_seed(0)
    trunk = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 1))
    x = torch.rand(6, 3, 8, 8)
    model = {s: augnet.Augerino(trunk, init_width=0.05, aggregate="mean", stratify=s).eval() for s in (False, True)}
    spread = {s: _spread(m, x) for s, m in model.items()}
    assert spread[True] < 0.75 * spread[False], spread  # each of the 6 coefficients stratified on its own


@pytest.mark.parametrize("bad", ["yes", 1, None])
def test_stratify_must_be_a_bool(bad):
    trunk = nn.Flatten()
    with pytest.raises(TypeError, match="stratify must be a bool"):
        augnet.AugNet(trunk, augnet.AugmentationLayer([T.Rotate()]), stratify=bad)
    with pytest.raises(TypeError, match="stratify must be a bool"):
        augnet.Augerino(trunk, stratify=bad)


def test_a_block_holds_in_its_own_thread_only():
    import threading

    seen = {}

    def other():
        seen["other"] = stratifying(8)

    with stratified_copies(4):
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
        seen["here"] = stratifying(8)
    assert seen == {"other": False, "here": True}


def test_a_per_instance_layer_evaluates_stratified():
    # Each sample's copies share that sample's own weights and ranges: its copies are stratified under them.
    torch.manual_seed(0)
    layer = augnet.ConditionedAugmentationLayer([T.Rotate(), T.TranslateX()], channels=3)
    trunk = nn.Sequential(nn.Flatten(), nn.Linear(3 * 16 * 16, 4))
    x, g = torch.rand(5, 3, 16, 16), lambda: torch.Generator().manual_seed(0)
    strat = augnet.AugNet(trunk, layer, eval_copies=4, stratify=True).eval()(x, generator=g())
    plain = augnet.AugNet(trunk, layer, eval_copies=4, stratify=False).eval()(x, generator=g())
    assert strat.shape == plain.shape == (5, 4) and bool(torch.isfinite(strat).all())
    assert not torch.equal(strat, plain)


def test_experiments_evaluate_as_their_kept_tables_were_measured():
    # The demo, the comparison and the selection's README row follow AugNet's default (stratified copies);
    # the experiments whose tables were measured with independent copies pin them, so they reproduce.
    from augnet.experiments.capacity import CapacityConfig, train_capacity_model
    from augnet.experiments.demo import DemoConfig, build_model
    from augnet.experiments.instance import InstanceConfig
    from augnet.experiments.rotation import RotationConfig
    from augnet.experiments.sinusoids import SinusoidsConfig

    assert build_model(DemoConfig(size=16, width=2)).stratify is True
    assert build_model(RotationConfig().demo_config(), None).stratify is False
    assert not any(c().stratify for c in (CapacityConfig, InstanceConfig, RotationConfig, SinusoidsConfig))
    x, y = torch.randn(8, 1, 64), torch.randint(0, 4, (8,))
    for choice in (False, True):
        config = CapacityConfig(epochs=1, batch_size=8, stratify=choice)
        assert train_capacity_model("augnet", 4, 1, x, y, config).stratify is choice


def test_a_model_pickled_before_stratify_existed_loads_and_evaluates_stratified():
    import pickle

    torch.manual_seed(0)
    layer = augnet.AugmentationLayer([T.Rotate()], init_magnitude=0.4)
    model = augnet.AugNet(nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 2)), layer).eval()
    x, g = torch.rand(3, 3, 8, 8), lambda: torch.Generator().manual_seed(1)
    expected = model(x, generator=g())
    del model.__dict__["stratify"]  # as a model saved by an earlier version
    loaded = pickle.loads(pickle.dumps(model))
    assert "stratify" not in loaded.__dict__ and loaded.stratify is True
    torch.testing.assert_close(loaded(x, generator=g()), expected, rtol=0, atol=0)
