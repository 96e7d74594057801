"""The probes' checks of their inputs, labels, transforms and options, and the readings they now agree on.

Each test fails on the code before its fix: labels that broadcast or are floats, NaN or integer images reaching
the model, a plain callable transform, a one-row checking pass, an empty mapping of transforms, outputs without
one row per input, a transformer's tokens read as report reads them (``reduce="tokens"``), a checking pass that
drew from torch's global random state, fit options the ridge solver ignored, a model constructor's own error in the CLI.
"""

import numpy as np
import pytest
import torch
from helpers import gen
from torch import nn

from augnet import AugNet, probes
from augnet.layers import AugmentationLayer
from augnet.probes.features import layer_calls, reduce_features
from augnet.transforms import image as T


def images(n=16, size=8, seed=0):
    return torch.rand(n, 3, size, size, generator=gen(seed))


def conv_net():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3)
    )


def bn_net():
    """Global average pooling, then a batch norm without running statistics: it needs two rows, and it removes a
    shift common to the whole batch (a brightness change), so its output is exactly brightness-invariant."""
    torch.manual_seed(0)
    return nn.Sequential(
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(3, 4), nn.BatchNorm1d(4, track_running_stats=False),
        nn.Linear(4, 3),
    )  # fmt: skip


def counted(model):
    """``model`` with a list that grows by one per forward call."""
    calls = []
    model.register_forward_pre_hook(lambda m, i: calls.append(len(i[0])))
    return model, calls


# --------------------------------------------------------------------------- 2: accuracy_curve's labels


def test_accuracy_curve_refuses_labels_that_are_not_one_integer_per_input():
    model, calls = counted(conv_net())
    x = images(40)
    with torch.no_grad():
        y = model(x).argmax(1)
    calls.clear()
    for bad, match in ((nn.functional.one_hot(y, 3), "one label per input"), (y.float() + 0.5, "whole numbers")):
        with pytest.raises(ValueError, match=f"y must .*{match}"):
            probes.accuracy_curve(model, x, bad, T.HorizontalFlip(), [1.0])
    with pytest.raises(ValueError, match="class labels >= 0, got -1"):
        probes.accuracy_curve(model, x, y.index_fill(0, torch.tensor([5]), -1), T.HorizontalFlip(), [1.0])
    assert not calls  # refused before the model ran
    # Its own predictions, as a tensor, a list, an array, a column or whole floats: accuracy 1 at magnitude 0.
    for labels in (y, y.tolist(), y.numpy(), y[:, None], y.float()):
        assert probes.accuracy_curve(model, x, labels, T.HorizontalFlip(), [0.0])["accuracy"] == [1.0]


@pytest.mark.parametrize("probe", ["accuracy_curve", "category_accuracy"])
def test_labels_past_the_models_classes_are_refused_after_its_first_pass(probe):
    model, calls = counted(conv_net())  # 3 classes
    x = images(40)
    with torch.no_grad():
        y = model(x).argmax(1)
    calls.clear()
    run = {
        "accuracy_curve": lambda labels: probes.accuracy_curve(model, x, labels, T.HorizontalFlip(), [0.0, 1.0]),
        "category_accuracy": lambda labels: probes.category_accuracy(model, x, labels, T.HorizontalFlip(), [0]),
    }[probe]
    with pytest.raises(ValueError, match=r"y holds class 5, but the model returns 3 classes"):
        run(y + 3)
    assert calls == [40]  # the first pass only
    # Labels as a list or an array are read as a tensor of them.
    read = (lambda r: r["accuracy"]) if probe == "accuracy_curve" else (lambda r: (r["clean"], r["transformed"]))
    assert read(run(y.tolist())) == read(run(y.numpy())) == read(run(y))


# --------------------------------------------------------------------------- 3, 4: every model-level probe checks x


def _probe_calls(model, y):
    flip = T.HorizontalFlip()
    return {
        "invariance_curve": lambda x: probes.invariance_curve(model, x, flip, [1.0]),
        "accuracy_curve": lambda x: probes.accuracy_curve(model, x, y, flip, [1.0]),
        "category_accuracy": lambda x: probes.category_accuracy(model, x, y, flip, [0]),
        "layerwise_invariance": lambda x: probes.layerwise_invariance(model, x, ["1"], 0.05, flip),
        "select_tau": lambda x: probes.select_tau(model, "1", x, y, transform=flip),
        "similarity_search": lambda x: probes.similarity_search(model, x, y, {"flip": flip}),
        "ranking_probe_model": lambda x: probes.ranking_probe_model(model, x, T.Rotate(), param="angle"),
        "ranking_probe_per_layer_model": lambda x: probes.ranking_probe_per_layer_model(
            model, x, T.Rotate(), ["1"], param="angle"
        ),
        "equivariance_curve": lambda x: probes.equivariance_curve(model, x, flip, [1.0]),
        "features": lambda x: probes.features(model, x, ["1", "output"]),
        "layer_calls": lambda x: probes.layer_calls(model, x),
    }


BAD_IMAGES = {
    "nan": (lambda x: x.index_fill(0, torch.tensor([3]), float("nan")), ValueError, r"NaN or infinite .*\[3\]"),
    "float64": (lambda x: x.double(), TypeError, "x is torch.float64 but the model's parameters are torch.float32"),
    "meta": (lambda x: x.to("meta"), ValueError, "x is on meta"),
}


@pytest.mark.parametrize(
    ("probe", "bad"),
    # features reads any values and leaves the dtype to the model (test_features_reads_what_the_model_takes...)
    [(p, b) for p in _probe_calls(None, None) for b in BAD_IMAGES if not (p == "features" and b != "meta")],
)
def test_every_model_level_probe_refuses_images_it_cannot_run_before_the_model_runs(probe, bad):
    model, calls = counted(conv_net())
    x = images(16)
    y = torch.arange(16) % 3
    change, error, match = BAD_IMAGES[bad]
    if probe == "layer_calls" and bad == "nan":
        x = x.index_fill(0, torch.tensor([1]), float("nan"))  # it runs (and checks) the first two rows only
        match = r"NaN or infinite .*\[1\]"
    else:
        x = change(x)
    with pytest.raises(error, match=match):
        _probe_calls(model, y)[probe](x)
    assert not calls


def test_features_reads_what_the_model_takes_any_dtype_or_value():
    class Cast(nn.Module):  # casts its inputs itself
        def __init__(self):
            super().__init__()
            self.net = conv_net()

        def forward(self, x):
            return self.net(x.float())

    x = images(4).double()
    x[1, 0, 0, 0] = float("nan")
    got = probes.features(Cast(), x, "output")["output"]
    assert got[1].isnan().all() and got[[0, 2, 3]].isfinite().all()
    with pytest.raises(ValueError, match="x is on meta"):
        probes.features(Cast(), x.to("meta"), "output")


def test_integer_inputs_are_the_models_to_take_and_the_transforms_refuse_them():
    ids = torch.randint(0, 10, (6, 5), generator=gen(0))  # token ids, the input of an embedding
    embed = nn.Sequential(nn.Embedding(10, 4), nn.Flatten())
    got = probes.features(embed, ids, "output")["output"]
    assert torch.equal(got, embed[0].weight[ids].flatten(1).detach())

    class Bytes(nn.Module):  # converts its 8-bit images itself
        def __init__(self):
            super().__init__()
            self.net = conv_net()

        def forward(self, x):
            return self.net(x.float() / 255)

    model = Bytes()
    x8 = (images(16) * 255).to(torch.uint8)
    assert torch.equal(probes.features(model, x8, "output")["output"], model(x8).detach())
    assert probes.layer_calls(model, x8, ["net.1"]) == {"net.1": 1}
    counted_model, calls = counted(conv_net())
    for probe in (
        lambda: probes.invariance_curve(counted_model, x8, T.Rotate(), [1.0]),
        lambda: probes.report(counted_model, x8, ["Rotate"], ["logits"], [1.0], lie=False),
    ):
        with pytest.raises((TypeError, ValueError), match=r"floating-point .*torch\.uint8"):
            probe()
    assert not calls


# --------------------------------------------------------------------------- 5: the equivariance probes' labels


def test_equivariance_report_refuses_labels_that_are_not_classes_of_the_head():
    z = torch.randn(60, 6, generator=gen(0))
    z_t = z + 0.1 * torch.randn(60, 6, generator=gen(1))
    head, y = nn.Linear(6, 3), torch.arange(60) % 3
    with pytest.raises(ValueError, match="y must hold whole numbers"):
        probes.equivariance_report(z, z_t, head=head, y=y.float() + 0.5)
    with pytest.raises(ValueError, match=r"y must hold class labels >= 0, got -1"):
        probes.equivariance_report(z, z_t, head=head, y=y - 1)
    with pytest.raises(ValueError, match=r"y holds class 7, but head returns 3 classes: labels must be in \[0, 3\)"):
        probes.equivariance_report(z, z_t, head=head, y=y + 5)
    # Labels from the head itself: the clean class error is exactly 0.
    with torch.no_grad():
        own = head(z).argmax(1)
    assert probes.equivariance_report(z, z_t, head=head, y=own)["scores"]["class_error_clean"] == 0.0


def test_equivariance_curve_checks_the_labels_before_the_transformed_passes():
    model, calls = counted(conv_net())
    x, head = images(32), nn.Linear(3, 2)
    with pytest.raises(ValueError, match="y must hold whole numbers"):
        probes.equivariance_curve(
            model, x, T.HorizontalFlip(), [1.0], head=head, y=(torch.arange(32) % 2).float() + 0.5
        )
    assert not calls
    head_calls = counted(head)[1]
    with pytest.raises(ValueError, match=r"y holds class 2, but head returns 2 classes"):
        probes.equivariance_curve(model, x, T.HorizontalFlip(), [1.0], head=head, y=torch.arange(32) % 3)
    assert calls == [32]  # the clean pass only
    assert head_calls == [2]  # the head's classes read off two rows, not all of them


# --------------------------------------------------------------------------- 6: a plain callable transform


def test_invariance_curve_takes_a_plain_callable_as_the_transform_it_stands_for():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 36, 5))
    x = images(16)
    flip = probes.invariance_curve(model, x, lambda a, m, generator=None: a.flip(-1), [1.0, 2.0])
    ref = probes.invariance_curve(model, x, T.HorizontalFlip(), [1.0])
    assert torch.equal(flip["scores"][0], ref["scores"][0])  # HorizontalFlip at 1 flips every image
    assert flip["range"] == [None, None] and ref["range"] == [(0.0, 1.0, "probability")]
    assert flip["summary"][0]["median"] < 0.5


# --------------------------------------------------------------------------- 7: the checking pass runs two rows


def test_a_batch_norm_without_running_statistics_is_probed_by_report_and_lie_derivative():
    model, x = bn_net(), images(16)
    model.train()
    rep = probes.report(model, x, ["HorizontalFlip"], ["2", "3", "logits"], [1.0], lie=False)
    for layer in ("2", "3", "logits"):  # average pooling is flip-invariant, and so is all that follows
        assert rep.value("inv_augnet", layer, "HorizontalFlip") == pytest.approx(1.0, abs=1e-9)
    lie = probes.lie_derivative(model, x, T.Brightness(), ["2", "3", "logits"])
    assert lie["mean"]["2"] > 0.1  # a brightness shift moves the pooled features
    assert lie["mean"]["3"] < 1e-5 and lie["mean"]["logits"] < 1e-5  # the batch norm removes it
    assert model.training and all(m.training for m in model.modules())


def test_layer_calls_runs_two_rows_or_all_of_fewer():
    model, calls = counted(conv_net())
    assert layer_calls(model, images(16), ["0"]) == {"0": 1} and calls == [2]
    assert layer_calls(model, images(1), ["0"]) == {"0": 1} and calls == [2, 1]


# --------------------------------------------------------------------------- 8: report's transforms and magnitudes


def test_report_refuses_an_empty_mapping_and_takes_magnitudes_as_every_probe_does():
    model, calls = counted(conv_net())
    x = images(16)
    with pytest.raises(ValueError, match=r"transforms must name one or more transforms, got \{\}"):
        probes.report(model, x, {}, ["logits"], [1.0])
    assert not calls
    kw = dict(layers=["1", "logits"], lie=False)
    ref = probes.report(model, x, ["Rotate"], magnitudes=[0.5, 1.0], **kw).records
    for mags in (torch.tensor([1.0, 0.5]), np.array([0.5, 1.0]), (1.0, 0.5, 1.0)):
        got = probes.report(model, x, ["Rotate"], magnitudes=mags, **kw).records
        assert [(r["layer"], r["measure"], r["magnitude"]) for r in got] == [
            (r["layer"], r["measure"], r["magnitude"]) for r in ref
        ]
        np.testing.assert_array_equal([r["value"] for r in got], [r["value"] for r in ref])  # NaN equals NaN
    with pytest.raises(ValueError, match=r"magnitudes must be numbers in \(0, 1\], got \[0.0, 0.5\]"):
        probes.report(model, x, ["Rotate"], magnitudes=torch.tensor([0.0, 0.5]), **kw)


# --------------------------------------------------------------------------- 9: shapes said plainly


class _Total(nn.Module):
    """One number for the whole batch."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 5)

    def forward(self, x):
        return self.fc(x.mean((2, 3))).sum()


class _Twice(nn.Module):
    """Two rows per input."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 5)

    def forward(self, x):
        return self.fc(torch.cat([x, x]).mean((2, 3)))


def test_a_batch_of_the_wrong_rank_is_refused_before_the_clean_pass():
    model, calls = counted(conv_net())
    expected = r"HorizontalFlip: expected a 4-D input \(B, Ch, H, W\), got shape \(3, 8, 8\)"
    with pytest.raises(ValueError, match=expected):
        probes.invariance_curve(model, images(16)[0], T.HorizontalFlip(), [1.0])
    assert not calls


@pytest.mark.parametrize(
    ("model", "match"),
    [(_Total, r"the model's output is a 0-d tensor \(one number for 16 inputs\)"),
     (_Twice, r"the model's output has shape \(32, 5\) for 16 inputs: .* one row per input")],
)  # fmt: skip
def test_outputs_without_one_row_per_input_are_refused_plainly(model, match):
    x = images(16)
    with pytest.raises(ValueError, match=match):
        probes.invariance_curve(model(), x, T.HorizontalFlip(), [1.0])
    with pytest.raises(ValueError, match=match):
        probes.lie_derivative(model(), x, T.Rotate())
    with pytest.raises(ValueError, match=match):
        probes.report(model(), x, ["Rotate"], ["logits"], [1.0])


def test_one_number_per_input_is_refused_by_the_cosine_and_read_by_l2():
    scalar = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(3, 1), nn.Flatten(0))  # (B,)
    x = images(16)
    with pytest.raises(ValueError, match=r"one number per input \(shape \(16, 1\)\).*pass distance='l2'"):
        probes.invariance_curve(scalar, x, T.Rotate(), [1.0])
    got = probes.invariance_curve(scalar, x, T.Rotate(), [0.0], distance="l2")
    assert got["summary"][0]["median"] == 1.0  # the identity: every distance 0


# --------------------------------------------------------------------------- 10: "tokens" reads them as report does


def test_tokens_averages_a_transformers_tokens_as_report_does():
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    vit = torchvision.models.VisionTransformer(16, 4, 2, 2, 16, 32, num_classes=10)
    x, layer = images(16, size=16), "encoder.layers.encoder_layer_0"
    out = probes.features(vit, x, [layer, "logits"], reduce="tokens")
    tokens = probes.features(vit, x, [layer, "logits"])
    assert tokens[layer].shape[1:] == (17, 16) and torch.equal(out[layer], tokens[layer].mean(1))
    assert torch.equal(out["logits"], tokens["logits"])  # (B, D) kept
    curve = probes.invariance_curve(vit, x, T.Rotate(), [1.0], layer=layer, reduce="tokens")
    rep = probes.report(vit, x, ["Rotate"], [layer], [1.0], lie=False)
    # The same scores: report's inv_augnet is their torch median (the lower middle value).
    assert float(curve["scores"][0].nanmedian()) == pytest.approx(rep.value("inv_augnet", layer, "Rotate"), abs=1e-9)
    with pytest.raises(ValueError, match=r'reduce="tokens" reads \(B, tokens, D\).*got \(16, 16, 4, 4\)'):
        probes.features(vit, x, ["conv_proj"], reduce="tokens")


def test_mean_is_the_channels_mean_whatever_the_inputs():
    maps = torch.randn(4, 5, 3, 2, generator=gen(0))
    vectors = torch.randn(4, 5, generator=gen(1))
    assert torch.equal(reduce_features(maps, "mean"), maps.mean((2, 3)))
    assert torch.equal(reduce_features(vectors, "mean"), vectors)
    # A signal model's (B, C, T) map is averaged over time, its channels kept, whether its inputs are signals or
    # (B, 1, electrodes, T) images of them.
    torch.manual_seed(0)
    signal_net = nn.Sequential(nn.Conv1d(4, 6, 3, padding=1), nn.ReLU())
    s = torch.randn(5, 4, 20, generator=gen(2))
    got = probes.features(signal_net, s, ["0"], reduce="mean")["0"]
    assert torch.equal(got, probes.features(signal_net, s, ["0"])["0"].mean(2))
    eeg = nn.Sequential(nn.Flatten(1, 2), nn.Conv1d(4, 6, 3, padding=1))
    got = probes.features(eeg, s[:, None], ["1"], reduce="mean")["1"]
    assert got.shape == (5, 6)


# --------------------------------------------------------------------------- 11: a checking pass draws nothing


def test_the_checking_pass_leaves_the_global_random_state_as_found():
    torch.manual_seed(0)
    trunk = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(4, 3))  # fmt: skip
    net = AugNet(trunk, AugmentationLayer([T.Rotate(), T.TranslateX()], init_magnitude=0.1), eval_copies=4)
    x = images(8)
    state = torch.get_rng_state()
    first = probes.auto_layers(net, x)
    calls = probes.layer_calls(net, x)
    assert torch.equal(torch.get_rng_state(), state)
    assert probes.auto_layers(net, x) == first and probes.layer_calls(net, x) == calls


# --------------------------------------------------------------------------- 12: options the solver would ignore


def test_options_of_the_iterative_solvers_are_refused_with_ridge():
    z = torch.randn(60, 6, generator=gen(0))
    z_t = z.roll(1, dims=1)
    for option in (dict(epochs=3), dict(lr=0.1), dict(momentum=0.5), dict(batch_size=4), dict(weight_decay=0.1)):
        with pytest.raises(ValueError, match="apply only to the iterative solvers 'adam_cosine' and 'sgd_paper'"):
            probes.fit_equivariance_map(z, z_t, **option)
    with pytest.raises(ValueError, match="hidden=8 applies only to kind='residual_relu'"):
        probes.fit_equivariance_map(z, z_t, hidden=8)
    with pytest.raises(ValueError, match=r"ridge=0\.001 applies only to solver='ridge'"):
        probes.fit_equivariance_map(z, z_t, solver="adam_cosine", ridge=1e-3)
    # The defaults pass, and fit the same map as leaving them out.
    plain = probes.fit_equivariance_map(z, z_t)
    given = probes.fit_equivariance_map(z, z_t, epochs=None, lr=None, momentum=None, hidden=None, ridge=1e-6)
    assert torch.equal(plain.errors, given.errors) and plain.test_error < 1e-4


def test_equivariance_curve_refuses_an_ignored_option_before_the_model_runs():
    model, calls = counted(conv_net())
    with pytest.raises(ValueError, match=r"epochs=3: these settings apply only to the iterative solvers"):
        probes.equivariance_curve(model, images(32), T.HorizontalFlip(), [1.0], epochs=3)
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        probes.equivariance_curve(model, images(32), T.HorizontalFlip(), [1.0], epoch=3)
    assert not calls


# --------------------------------------------------------------------------- the CLI: a constructor's own error


def test_probe_reports_a_model_constructor_error_in_one_line(capsys):
    pytest.importorskip("torchvision")
    from augnet.cli import main
    from augnet.probes.inputs import load_model

    with pytest.raises(ValueError, match=r"cannot build torchvision.models:resnet18 with \{'num_classes': -3\}: "):
        load_model("torchvision.models:resnet18", '{"num_classes": -3}')
    argv = ["probe", "--model", "torchvision.models:resnet18", "--model-args", '{"num_classes": -3}', "--fake"]
    assert main([*argv, "--transforms", "Rotate"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("augnet probe: error: cannot build torchvision.models:resnet18") and err.count("\n") == 1
