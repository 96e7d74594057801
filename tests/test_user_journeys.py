"""A researcher's journeys through augnet, combining features that other tests take one at a time.

Each test is a short notebook session on generated data: a per-instance layer with a conditioner of one's own,
a global layer's state loaded into a per-instance one, a probe run between a training step's forward pass and
its regulariser, probes of a model at another image size, probes of a ``torch.compile``'d model, the
regulariser asked of an Augerino, layers given in an ``nn.Sequential``, class names as probe labels, and a plot
of an Augerino's training history. Each asserts what the documentation promises: a read changes nothing, a
refusal names what to do, and the same model gives the same numbers however it is wrapped.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import gen
from torch import nn

import augnet
from augnet import probes
from augnet.augerino import Augerino
from augnet.instance import ConditionedAugmentationLayer
from augnet.training import fit
from augnet.transforms import image as T


def small_trunk(classes: int = 3) -> nn.Module:
    return nn.Sequential(
        nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU()),
        nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten()),
        nn.Linear(4, classes),
    )


# ------------------------------------------------------------------------ per-instance layers


class BatchNormConditioner(nn.Module):
    """A conditioner of one's own, as a user writes it: pooled features, a batch norm, a dropout, a head."""

    def __init__(self, outputs: int) -> None:
        super().__init__()
        self.pool = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.norm = nn.BatchNorm1d(3)
        self.drop = nn.Dropout(0.5)
        self.head = nn.Linear(3, outputs)

    def forward(self, x):
        return self.head(self.drop(self.norm(self.pool(x))))


def test_reading_a_per_instance_policy_changes_no_statistic_of_a_conditioner_of_ones_own():
    layer = ConditionedAugmentationLayer([T.Rotate(), T.TranslateX()], conditioner=BatchNormConditioner(4))
    x = torch.rand(8, 3, 16, 16)
    layer.train()
    layer(x)  # a training step: the batch norm's statistics move, as they should
    state = {k: v.clone() for k, v in layer.state_dict().items()}

    first, second = layer.policy(x), layer.policy(x)

    for k, v in layer.state_dict().items():  # a read: no running mean, variance or batch count moved
        assert torch.equal(v, state[k]), k
    assert all(m.training for m in layer.modules())  # the modes as they were
    torch.testing.assert_close(first["weights"], second["weights"], rtol=0, atol=0)  # no dropout mask drawn
    # Each sample's policy is its own: the policy of one sample alone is its row of the batch's.
    alone = layer.policy(x[3:4])
    torch.testing.assert_close(alone["weights"][0], first["weights"][3])
    torch.testing.assert_close(alone["magnitudes"][0], first["magnitudes"][3])
    layer.eval()
    torch.testing.assert_close(layer.policy(x)["weights"], first["weights"], rtol=0, atol=0)  # the same in eval


def test_a_calibrated_layers_state_is_refused_by_a_per_instance_layer_which_stays_as_it_was():
    plain = augnet.AugmentationLayer([T.Rotate(), T.Brightness()])
    plain.calibrate(torch.rand(8, 3, 8, 8), generator=gen(0))
    layer = ConditionedAugmentationLayer([T.Rotate(), T.Brightness()], channels=3, init_magnitude=0.3)
    before = {k: v.clone() for k, v in layer.state_dict().items()}

    with pytest.raises(ValueError, match=r"cannot be calibrated.*clear_calibration"):
        layer.load_state_dict(plain.state_dict(), strict=False)

    assert layer.calibration is None
    for k, v in layer.state_dict().items():
        assert torch.equal(v, before[k]), k
    # Without its calibration the global layer's state loads (the conditioner keys are the ones missing).
    plain.clear_calibration()
    missing = layer.load_state_dict(plain.state_dict(), strict=False).missing_keys
    assert missing and all(k.startswith("conditioner.") for k in missing)
    torch.testing.assert_close(layer.magnitudes, plain.magnitudes)


# ----------------------------------------------------------------------------------- probes


def test_a_probe_between_a_forward_pass_and_its_regulariser_leaves_the_per_instance_policy_of_the_step():
    layer = ConditionedAugmentationLayer([T.Rotate(), T.TranslateX()], channels=3)
    model = augnet.AugNet(small_trunk(), layer)
    x = torch.rand(16, 3, 8, 8)
    model(x)  # the training step's forward pass
    latest = layer.latest_policy()

    probes.invariance_curve(model, x, T.Rotate(), [0.5])  # e.g. a logging callback

    assert layer.latest_policy() is latest  # the regulariser reads the step's policy, with its graph
    assert latest[0].requires_grad
    augnet.selective_regularizer(model).backward()
    assert any(p.grad is not None for p in layer.conditioner.parameters())


def test_probing_at_another_image_size_leaves_the_ranges_the_policy_reports():
    model = augnet.AugNet(small_trunk(), augnet.AugmentationLayer([T.TranslateX(), T.Rotate()]))
    augerino = Augerino(small_trunk())
    for m in (model, augerino):
        m(torch.rand(8, 3, 32, 32))  # trained at 32 x 32: TranslateX's range in pixels of 32
        text = str(m.policy())
        probes.invariance_curve(m, torch.rand(16, 3, 64, 64), T.Rotate(), [0.5])
        probes.report(m, torch.rand(8, 3, 48, 48), ["Rotate"], magnitudes=[1.0], lie=False)
        assert str(m.policy()) == text


def test_auto_layers_of_a_compiled_model_are_the_blocks_of_the_module_it_runs():
    trunk = small_trunk()
    compiled = torch.compile(trunk, backend="eager")
    x = torch.rand(16, 3, 8, 8)
    plain_names = probes.auto_layers(trunk)
    assert plain_names == ["0", "1", "logits"]
    assert probes.auto_layers(compiled) == ["_orig_mod.0", "_orig_mod.1", "logits"]
    # The names are layers of the compiled model: its report reads what the module's own does.
    ours = probes.report(trunk, x, ["Rotate"], magnitudes=[1.0], lie=False)
    theirs = probes.report(compiled, x, ["Rotate"], magnitudes=[1.0], lie=False)
    for name in plain_names[:-1]:
        assert theirs.value("inv_augnet", f"_orig_mod.{name}", "Rotate") == pytest.approx(
            ours.value("inv_augnet", name, "Rotate"), rel=1e-6
        )


def test_probes_refuse_a_compiled_augnet_and_name_the_module_to_probe():
    model = augnet.AugNet(small_trunk(), augnet.AugmentationLayer([T.Rotate()]))
    compiled = torch.compile(model, backend="eager")
    x = torch.rand(16, 3, 8, 8)
    with pytest.raises(TypeError, match=r"_orig_mod"):
        probes.report(compiled, x, ["Rotate"], magnitudes=[1.0], lie=False)
    with pytest.raises(TypeError, match=r"_orig_mod"):
        probes.invariance_curve(compiled, x, T.Rotate(), [0.5], copies=2)
    # The module it wraps is an AugNet to the probes: its logits are the trunk's, averaged over the copies.
    curve = probes.invariance_curve(compiled._orig_mod, x, T.Rotate(), [0.5], copies=2)
    assert "averaged over its 2 copies" in curve["features"]


def test_class_names_as_probe_labels_are_refused_with_what_to_do():
    x = torch.rand(8, 3, 8, 8)
    with pytest.raises(TypeError, match=r"by_class.*integers"):
        probes.report(small_trunk(), x, ["Rotate"], ["0"], magnitudes=[1.0], lie=False,
                      by_class=np.array(["cat", "dog"] * 4))  # fmt: skip


# ------------------------------------------------------------------- models and regularisers


def test_the_selective_regulariser_of_an_augerino_points_to_augerinos_own():
    model = Augerino(small_trunk())
    for reg in (augnet.selective_regularizer, augnet.regularizers.paper_selective_regularizer):
        with pytest.raises(ValueError, match="augerino_regularizer"):
            reg(model)
    assert float(augnet.augerino_regularizer(model).detach()) < 0


def test_fit_on_an_augerino_with_the_default_regularizer_points_to_augerinos_own():
    model = Augerino(small_trunk())
    before = [p.detach().clone() for p in model.parameters()]
    x, y = torch.rand(8, 3, 16, 16, generator=gen(0)), torch.arange(8) % 2
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="regularizer='augerino'"):
        fit(model, x, y, optimizer=opt, epochs=1, batch_size=4, lam=0.1)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    with pytest.raises(ValueError, match="regularizer='none'"):  # a model without any augmentation: as before
        fit(small_trunk(), x, y, optimizer=opt, epochs=1, batch_size=4, lam=0.1)


def committed_augnet(stacked: int = 1) -> augnet.AugNet:
    """An AugNet whose ``stacked`` layers all put their weight on Rotate (magnitude 0.6)."""
    layers = []
    for _ in range(stacked):
        layer = augnet.AugmentationLayer([T.Rotate(), T.TranslateX()], init_magnitude=0.6)
        with torch.no_grad():
            layer.weight_logits.copy_(torch.tensor([6.0, 0.0]))
        layers.append(layer)
    return augnet.AugNet(small_trunk(), layers)


def test_the_selective_regulariser_of_an_ensemble_is_the_sum_of_its_models_own():
    # Two AugNets trained together (an ensemble in one container): each model's layers choose on their own, so the
    # second model is not pushed off the transform the first one chose, as it is within one model's stack.
    ensemble = nn.ModuleList([committed_augnet(), committed_augnet(stacked=2)])
    for kwargs in ({}, {"saturation": None}, {"units": "magnitude"}):
        together = augnet.selective_regularizer(ensemble, **kwargs)
        apart = sum(augnet.selective_regularizer(m, **kwargs) for m in ensemble)
        torch.testing.assert_close(together, apart)
        together.backward()
        grads = [p.grad.clone() for p in ensemble.parameters() if p.grad is not None]
        ensemble.zero_grad()
        apart = sum(augnet.selective_regularizer(m, **kwargs) for m in ensemble)
        apart.backward()
        for g, p in zip(grads, [p for p in ensemble.parameters() if p.grad is not None], strict=True):
            torch.testing.assert_close(g, p.grad)
        ensemble.zero_grad()
    # Within one model the stack still discounts a repeat: its second layer's rotation is a cost.
    stacked = ensemble[1]
    assert float(augnet.selective_regularizer(stacked).detach()) > float(
        augnet.selective_regularizer(stacked.augment.layers[0]).detach()
    )


def test_an_augnet_takes_its_layers_in_an_nn_sequential_as_in_a_list():
    first, second = augnet.AugmentationLayer([T.Rotate()]), augnet.AugmentationLayer([T.Brightness()])
    trunk = small_trunk()
    model = augnet.AugNet(trunk, nn.Sequential(first, second), eval_copies=3).eval()
    listed = augnet.AugNet(trunk, [first, second], eval_copies=3).eval()
    assert isinstance(model.augment, augnet.AugmentationModule)
    assert list(model.augment.layers) == [first, second]
    x = torch.rand(4, 3, 8, 8)
    torch.testing.assert_close(model(x, generator=gen(1)), listed(x, generator=gen(1)), rtol=0, atol=0)
    assert model.state_dict().keys() == listed.state_dict().keys()
    with pytest.raises(TypeError, match="transform"):  # transforms in a Sequential: put them in a layer
        augnet.AugNet(trunk, nn.Sequential(T.Rotate()))


def test_plotting_an_augerino_history_says_what_fit_records(tmp_path):
    pytest.importorskip("matplotlib")
    from augnet.viz import plot_policy_history

    history = {"step": [1, 2], "loss": [1.0, 0.9], "total_loss": [0.9, 0.8]}  # fit's history of an Augerino
    with pytest.raises(ValueError, match="Augerino's widths"):
        plot_policy_history(history, ["translate_x"], tmp_path / "history.png")
    assert not (tmp_path / "history.png").exists()


# ------------------------------------------------------------------------------------ export


@pytest.mark.parametrize("library", ["kornia", "torchvision"])
def test_an_export_takes_the_image_size_as_the_policy_does(library):
    pytest.importorskip(library)
    images = torch.rand(4, 3, 8, 12)
    policy = augnet.AugmentationModule([augnet.AugmentationLayer([T.Rotate(), T.Invert()])]).policy(images.shape[-2:])
    export = getattr(policy, f"to_{library}")
    for size in (images.shape[-2:], (8, 12), np.array([8, 12]), torch.tensor([8, 12])):
        pipeline = export(size=size)
        assert pipeline(images[0]).shape == (3, 8, 12)  # one unbatched image, as a Dataset's transform
        with pytest.raises(ValueError, match=r"\(8, 12\)"):
            pipeline(torch.rand(3, 12, 8))
    for size in (np.array([[8, 12]]), torch.tensor([8.0, 12.0]), np.array([8, 12, 3])):
        with pytest.raises(TypeError, match=r"\(H, W\)"):
            export(size=size)
