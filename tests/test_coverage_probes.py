"""Branches of the probes that the other probe tests leave unrun: each test checks what the branch should do
(a value against an independent reference or an exact property, an error naming its argument, a warning)."""

import math
import sys

import pytest
import torch
import torch.nn.functional as F
from helpers import Listed, gen
from torch import nn

from augnet._checks import NotANumberError
from augnet.probes import (
    SeenTransformedDataset,
    category_accuracy,
    equivariance_curve,
    equivariance_report,
    fit_equivariance_map,
    layer_importance,
    mapping_error,
    nested_splits,
    pairwise_rank_loss,
    plot_equivariance_curves,
    ranking_probe,
    ranking_probe_model,
    representation_distance,
    select_tau,
)
from augnet.probes.inputs import load_images, load_labels, load_model
from augnet.probes.map_solvers import AffineMap, ResidualReLUMap, map_form
from augnet.transforms import image as T
from augnet.transforms.base import Transform


def add_one(x, magnitude, generator=None):
    return x + 1.0


# --------------------------------------------------------------------------- inputs: load_model

MODULE = "augnet_s59_models"


@pytest.fixture
def models_module(tmp_path, monkeypatch):
    """An importable module holding a module instance, a function returning a non-module, and a number."""
    (tmp_path / f"{MODULE}.py").write_text(
        "from torch import nn\n"
        "net = nn.Linear(2, 3)\n"
        "def not_a_module():\n    return 3\n"
        "value = 3\n"
        "def linear(d_in=2, d_out=3):\n    return nn.Linear(d_in, d_out)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    sys.modules.pop(MODULE, None)


def test_load_model_spec_without_colon():
    with pytest.raises(ValueError, match=r"--model must be 'package.module:name'.*'torch.nn'"):
        load_model("torch.nn")


@pytest.mark.parametrize("kwargs", ["{", "[1, 2]", "3"])
def test_load_model_args_must_be_a_json_object(kwargs):
    with pytest.raises(ValueError, match=r"--model-args must be a JSON object, got"):
        load_model("torch.nn:Identity", kwargs)


def test_load_model_instance(models_module):
    import importlib

    mod = importlib.import_module(MODULE)
    mod.net.train()
    model = load_model(f"{MODULE}:net")
    assert model is mod.net and not model.training  # the instance itself, in evaluation mode
    with pytest.raises(ValueError, match=r"is a module instance: it takes no --model-args"):
        load_model(f"{MODULE}:net", '{"bias": false}')


def test_load_model_kwargs_as_dict_or_json(models_module):
    a, b = load_model(f"{MODULE}:linear", {"d_out": 5}), load_model(f"{MODULE}:linear", '{"d_out": 5}')
    assert a.weight.shape == b.weight.shape == (5, 2)


def test_load_model_refuses_what_builds_no_module(models_module):
    with pytest.raises(ValueError, match=rf"{MODULE}:value is a int, not a module"):
        load_model(f"{MODULE}:value")
    with pytest.raises(ValueError, match=rf"{MODULE}:not_a_module\(\) returned a int, not a torch.nn.Module"):
        load_model(f"{MODULE}:not_a_module")


@pytest.mark.parametrize("key", ["state_dict", "model"])
def test_load_model_weights_nested_in_a_checkpoint(tmp_path, key):
    source = nn.Linear(3, 2)
    path = tmp_path / "w.pt"
    torch.save({"epoch": 7, key: source.state_dict()}, path)  # no tensor at the top: the state_dict is under key
    model = load_model("torch.nn:Linear", {"in_features": 3, "out_features": 2}, weights=path)
    assert torch.equal(model.weight, source.weight) and torch.equal(model.bias, source.bias)


def test_load_model_checkpoint_without_a_state_dict(tmp_path):
    """A dict of no tensor and no "state_dict" or "model" entry is tried as a state_dict, and does not fit."""
    path = tmp_path / "w.pt"
    torch.save({"epoch": 3, "model": "resnet"}, path)
    with pytest.raises(ValueError, match=r"--weights .*w.pt do not fit torch.nn:Linear: .*Missing key"):
        load_model("torch.nn:Linear", {"in_features": 3, "out_features": 2}, weights=path)
    path.write_bytes(b"")
    with pytest.raises(ValueError, match=r"--weights .*w.pt is an empty file"):
        load_model("torch.nn:Linear", {"in_features": 3, "out_features": 2}, weights=path)


def test_load_model_weights_that_are_no_state_dict(tmp_path):
    path = tmp_path / "w.pt"
    torch.save([torch.zeros(2)], path)
    with pytest.raises(ValueError, match=r"--weights .*w.pt holds a list, not a state_dict"):
        load_model("torch.nn:Identity", weights=path)
    with pytest.raises(ValueError, match=r"--weights .*missing.pt is not a file"):
        load_model("torch.nn:Identity", weights=tmp_path / "missing.pt")


# --------------------------------------------------------------------------- inputs: load_images


def _save(tmp_path, obj, name="data.pt"):
    path = tmp_path / name
    torch.save(obj, path)
    return path


def test_load_images_non_tensor_and_bad_shapes(tmp_path):
    with pytest.raises(ValueError, match=r"holds a int, not an image tensor"):
        load_images(_save(tmp_path, 5))
    with pytest.raises(ValueError, match=r"images must be \(N, C, H, W\), got shape \(2, 1, 3, 4, 4\)"):
        load_images(_save(tmp_path, torch.zeros(2, 1, 3, 4, 4)))
    with pytest.raises(ValueError, match=r"images must be floating point or uint8, got torch.int32"):
        load_images(_save(tmp_path, torch.zeros(2, 3, 4, 4, dtype=torch.int32)))
    with pytest.raises(ValueError, match=r"the images hold NaN or infinite values"):
        load_images(_save(tmp_path, torch.full((2, 3, 4, 4), math.nan)))
    with pytest.raises(ValueError, match=r"--data .*nowhere is neither a file nor a folder"):
        load_images(tmp_path / "nowhere")


def test_load_images_grey_tuple_and_resize(tmp_path):
    x = torch.arange(2 * 4 * 4, dtype=torch.uint8).reshape(2, 4, 4)
    got = load_images(_save(tmp_path, (x, torch.tensor([0, 1]))))  # (x, y): the images; (N, H, W): one channel
    assert torch.equal(got, x[:, None].float() / 255.0)
    resized = load_images(_save(tmp_path, x[:, None].float()), size=2)
    ref = F.interpolate(x[:, None].float(), size=(2, 2), mode="bilinear", align_corners=False)
    assert torch.equal(resized, ref)


def _png(path, size, value):
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, value).save(path)


def test_load_images_folder_errors(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"holds no image file"):
        load_images(tmp_path / "empty")
    _png(tmp_path / "mixed" / "a.png", (4, 4), (255, 0, 0))
    _png(tmp_path / "mixed" / "b.png", (5, 4), (0, 255, 0))
    with pytest.raises(ValueError, match=r"the images have different sizes .*; pass --size"):
        load_images(tmp_path / "mixed")
    got = load_images(tmp_path / "mixed", size=3)  # resized, the sizes agree
    assert got.shape == (2, 3, 3, 3) and torch.equal(got[0, :, 0, 0], torch.tensor([1.0, 0.0, 0.0]))
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "c.png").write_bytes(b"not a png")
    with pytest.raises(ValueError, match=r"--data: cannot read the image .*c.png"):
        load_images(tmp_path / "broken")


# --------------------------------------------------------------------------- inputs: load_labels


def test_load_labels_errors(tmp_path):
    with pytest.raises(ValueError, match=r"--by-class data needs --data"):
        load_labels("data")
    with pytest.raises(ValueError, match=r"--by-class .*nothing.txt is not a file"):
        load_labels(tmp_path / "nothing.txt")
    bad = tmp_path / "bad.txt"
    bad.write_text("0\n1.5\n")
    with pytest.raises(ValueError, match=r"one integer label per line, got invalid literal"):
        load_labels(bad)
    with pytest.raises(ValueError, match=r"holds no \(N,\) integer labels"):
        load_labels(_save(tmp_path, (torch.zeros(3, 1, 2, 2),), "single.pt"))  # a tuple without its labels
    with pytest.raises(ValueError, match=r"--data .*bare.pt holds no \(N,\) integer labels"):
        load_labels("data", _save(tmp_path, torch.zeros(3, 1, 2, 2), "bare.pt"))  # images alone: no labels


def test_load_labels_text_refuses_negative_labels(tmp_path):
    """A text file's labels are read as report reads by_class: a negative label is refused, here."""
    path = tmp_path / "labels.csv"
    path.write_text("0,cat\n-1,dog\n2,cow\n")
    with pytest.raises(ValueError, match=r"--by-class .*labels.csv"):
        load_labels(path)
    path.write_text("0,cat\n3,dog\n\n2,cow\n")
    assert load_labels(path).tolist() == [0, 3, 2]
    assert load_labels(path, limit=2).tolist() == [0, 3]  # spread: rows 0 and 1 of 3


def test_load_labels_of_a_folder(tmp_path):
    for cls, names in (("b", ["x.png", "y.png"]), ("a", ["z.png"])):
        for n in names:
            _png(tmp_path / "imgs" / cls / n, (2, 2), (0, 0, 0))
    assert load_labels("data", tmp_path / "imgs").tolist() == [0, 1, 1]  # sorted: a/z, b/x, b/y


# --------------------------------------------------------------------------- protocol


def test_seen_transformed_dataset_argument_errors():
    x, y = torch.zeros(4, 1, 2, 2), torch.tensor([0, 1, 0, 1])
    with pytest.raises(TypeError, match=r"seen_classes must hold integer class indices, got dtype torch.float32"):
        SeenTransformedDataset((x, y), add_one, torch.tensor([1.0]))
    with pytest.raises(TypeError, match=r"magnitude must be a real number, got str"):
        SeenTransformedDataset((x, y), add_one, [1], magnitude="1")
    with pytest.raises(TypeError, match=r"data must be a pair \(x, y\) of tensors .* got tuple of"):
        SeenTransformedDataset((x, y, y), add_one, [1])
    with pytest.raises(TypeError, match=r"seed must be an int, got str"):
        SeenTransformedDataset((x, y), add_one, [1], seed="0")
    ds = SeenTransformedDataset((x, y), add_one, [1])
    with pytest.raises(TypeError, match=r"index must be an int, got str"):
        ds["0"]
    with pytest.raises(IndexError, match=r"index 4 out of range"):
        ds[4]


def test_seen_transformed_dataset_takes_a_list_of_samples():
    """A list of (x, y) samples is a map-style dataset: its items are those of the tensors it was made of."""
    x, y = torch.randn(6, 1, 2, 2), torch.tensor([0, 1, 2, 0, 1, 2])
    samples = [(x[i], int(y[i])) for i in range(6)]
    from_list = SeenTransformedDataset(samples, add_one, [1, 2], p=0.5, seed=3)
    from_tensors = SeenTransformedDataset((x, y), add_one, [1, 2], p=0.5, seed=3)
    assert torch.equal(from_list.transformed_mask(), from_tensors.transformed_mask())
    for i in range(6):
        assert torch.equal(from_list[i][0], from_tensors[i][0]) and from_list[i][1] == int(y[i])


def test_seen_transformed_dataset_item_errors():
    transform = add_one
    cases = [
        ([(torch.zeros(2), torch.tensor(1.0))], ValueError, r"label must be one integer class index"),
        ([(torch.zeros(2), torch.tensor(1 + 0j))], ValueError, r"label must be one integer class index"),
        ([(torch.zeros(2), "cat")], ValueError, r"label must be an integer class index, got 'cat'"),
        ([torch.zeros(2)], TypeError, r"items must be \(x, y, ...\) tuples, got Tensor"),
        ([([0.0, 1.0], 0)], TypeError, r"a sample must be a tensor, got list"),
    ]
    for items, err, msg in cases:
        ds = SeenTransformedDataset(Listed(items), transform, [0, 1], p=1.0)
        with pytest.raises(err, match=msg):
            ds[0]
    ds = SeenTransformedDataset(Listed([(torch.zeros(2), 1)]), transform, [1], p=1.0)  # a Python int label
    assert torch.equal(ds[0][0], torch.ones(2)) and ds[0][1] == 1
    shrink = SeenTransformedDataset(Listed([(torch.zeros(2), 1)]), lambda b, m, generator=None: b[:, :1], [1], p=1.0)
    with pytest.raises(ValueError, match=r"turned a sample of shape \(2,\) into \(1, 1\)"):
        shrink[0]


def test_seen_transformed_dataset_repr():
    x, y = torch.zeros(4, 1, 2, 2), torch.tensor([0, 1, 0, 1])
    ds = SeenTransformedDataset((x, y), add_one, {1, 0}, p=0.25, magnitude=0.5, seed=2)
    assert repr(ds).startswith("SeenTransformedDataset(n=4, transform=<function add_one")
    assert repr(ds).endswith("seen_classes=[0, 1], p=0.25, magnitude=0.5, seed=2)")


def test_nested_splits_of_no_class():
    with pytest.raises(ValueError, match=r"classes is empty"):
        nested_splits([], [0])


def test_category_accuracy_argument_errors():
    x, y = torch.randn(6, 4), torch.tensor([0, 1, 2, 0, 1, 2])
    net = nn.Linear(4, 3)
    with pytest.raises(TypeError, match=r"model must be an nn.Module, got function"):
        category_accuracy(lambda a: a, x, y, add_one, [0])
    with pytest.raises(ValueError, match=r"batch_size must be an int >= 1, got 0"):
        category_accuracy(net, x, y, add_one, [0], batch_size=0)

    class Flat(nn.Module):
        def forward(self, a):
            return a.sum(1)

    with pytest.raises(ValueError, match=r"must return \(B, classes\) logits, got shape \(6,\)"):
        category_accuracy(Flat(), x, y, add_one, [0])


# --------------------------------------------------------------------------- map_evaluation


def test_mapping_error_checks_its_arguments():
    z = torch.randn(5, 3)
    with pytest.raises(ValueError, match=r"pred and target must have the same shape, got \(5, 3\) and \(5, 2\)"):
        mapping_error(z, z[:, :2])
    with pytest.raises(ValueError, match=r"reference must have 3 features per row, got shape \(4, 2\)"):
        mapping_error(z, z, reference=torch.ones(4, 2))
    with pytest.raises(TypeError, match=r"reference must be a tensor, got list"):
        mapping_error(z, z, reference=z.tolist())
    with pytest.raises(TypeError, match=r"z must hold real numbers, got dtype torch.complex64"):
        fit_equivariance_map(z.to(torch.complex64), z)


def test_mapping_error_reference_sets_the_scale():
    """``reference`` defaults to ``target``; a subset of rows scaled by the whole set equals the whole set's rows."""
    g = gen(1)
    z, p = torch.randn(12, 4, generator=g) * torch.tensor([1.0, 10.0, 0.1, 3.0]), torch.randn(12, 4, generator=g)
    assert torch.equal(mapping_error(p, z, reference=z), mapping_error(p, z))
    assert torch.allclose(mapping_error(p[:5], z[:5], reference=z), mapping_error(p, z)[:5], rtol=1e-12)


def test_split_arguments():
    z = torch.randn(10, 2)
    with pytest.raises(TypeError, match=r"generator must be a torch.Generator, got int"):
        fit_equivariance_map(z, z, generator=3)
    with pytest.raises(ValueError, match=r"a boolean holdout mask must have shape \(10,\), got \(9,\)"):
        fit_equivariance_map(z, z, holdout=torch.zeros(9, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"holdout indices must be a 1-D integer tensor, got torch.float32"):
        fit_equivariance_map(z, z, holdout=torch.tensor([1.0]))
    with pytest.raises(ValueError, match=r"holdout indices must be a 1-D integer tensor, got torch.complex64"):
        fit_equivariance_map(z, z, holdout=torch.tensor([1 + 0j]))
    with pytest.raises(ValueError, match=r"holdout indices must lie in \[0, 10\), got \[3, 10\]"):
        fit_equivariance_map(z, z, holdout=torch.tensor([3, 10]))
    with pytest.raises(TypeError, match=r"holdout must be a fraction or a tensor of rows, got str"):
        fit_equivariance_map(z, z, holdout="0.3")


def test_split_holds_out_at_least_one_row():
    z = torch.randn(5, 1, generator=gen(2))
    fitted = fit_equivariance_map(z, 2 * z, holdout=0.05)  # round(0.25) = 0 rows: one is held out all the same
    assert len(fitted.test_index) == 1 and len(fitted.train_index) == 4


def test_unseeded_split_draws_from_the_global_generator():
    z = torch.randn(20, 2, generator=gen(3))
    torch.manual_seed(11)
    fitted = fit_equivariance_map(z, z + 1, seed=None)
    torch.manual_seed(11)
    expected = torch.randperm(20)[:6].sort().values  # round(0.3 * 20) rows held out
    assert torch.equal(fitted.test_index, expected)


# --------------------------------------------------------------------------- map_solvers


def test_map_modules_checks_and_repr():
    with pytest.raises(ValueError, match=r"a residual map needs d_in == d_out, got 2 and 3"):
        AffineMap(2, 3, residual=True)
    assert "d_in=2, d_out=3, residual=False, output_relu=True" in repr(AffineMap(2, 3, output_relu=True))
    with pytest.raises(ValueError, match=r"hidden must be >= 1, got 0"):
        ResidualReLUMap(3, hidden=0)
    assert "dim=3, hidden=5, output_relu=False" in repr(ResidualReLUMap(3, hidden=5))
    assert "hidden=4" in repr(ResidualReLUMap(3, hidden=torch.tensor(4)))  # a 0-d integer tensor is a count


@pytest.mark.parametrize("hidden", [2.5, True, "4"])
def test_residual_relu_hidden_must_be_an_integer(hidden):
    with pytest.raises(ValueError, match=r"hidden must be an? (integer|number)"):
        ResidualReLUMap(3, hidden=hidden)
    z = torch.randn(30, 3, generator=gen(0))
    with pytest.raises(ValueError, match=r"hidden must be an? (integer|number)"):
        fit_equivariance_map(z, z, "residual_relu", "adam_cosine", epochs=1, hidden=hidden)


def test_map_form_errors():
    with pytest.raises(ValueError, match=r"kind must be one of .*, got 'cubic'"):
        map_form("cubic", "relu")
    with pytest.raises(ValueError, match=r"output must be 'relu' or 'identity' here, got 'auto'"):
        map_form("linear", "auto")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"epochs": 0}, r"epochs must be >= 1, got 0"),
        ({"lr": 0.0}, r"lr must be a finite number > 0, got 0.0"),
        ({"lr": math.inf}, r"lr must be a finite number > 0, got inf"),
        ({"batch_size": 0}, r"batch_size must be >= 1, got 0"),
        ({"weight_decay": -1e-3}, r"weight_decay must be a finite number >= 0, got -0.001"),
        ({"momentum": 1.0}, r"momentum must be in \[0, 1\), got 1.0"),
        ({"epochs": 2.5}, r"epochs must be an integer, got 2.5"),
        ({"batch_size": 4.0}, r"batch_size must be an integer, got 4.0"),
    ],
)
def test_iterative_solver_settings_are_checked(options, message):
    z = torch.randn(30, 3, generator=gen(0))
    with pytest.raises(ValueError, match=message):
        fit_equivariance_map(z, z, solver="sgd_paper", **options)


@pytest.mark.parametrize(("name", "value"), [("lr", "1e-3"), ("epochs", True), ("weight_decay", [0.1])])
def test_iterative_solver_settings_must_be_numbers(name, value):
    z = torch.randn(30, 3, generator=gen(0))
    with pytest.raises(NotANumberError, match=rf"{name} must be a number, got"):
        fit_equivariance_map(z, z, solver="adam_cosine", **{name: value})


def test_iterative_solver_takes_zero_dim_tensors():
    z = torch.randn(30, 3, generator=gen(0))
    fitted = fit_equivariance_map(z, z + 1, solver="adam_cosine", epochs=torch.tensor(3), lr=torch.tensor(0.01))
    assert len(fitted.losses) == 3


def test_sgd_paper_residual_relu_map_starts_at_the_identity():
    """``r + W_2 relu(W_1 r + b_1) + b_2`` starts at W_2 = 0, b_2 = 0: with a vanishing lr its errors are those of
    M = I (the invariance errors)."""
    g = gen(8)
    z = torch.randn(40, 3, generator=g)
    z_t = z + 0.5 * torch.randn(40, 3, generator=g)
    fitted = fit_equivariance_map(z, z_t, "residual_relu", "sgd_paper", lr=1e-12, epochs=1, weight_decay=0.0, hidden=2)
    assert fitted.form == "r + W_2 relu(W_1 r + b_1) + b_2" and fitted.module.w1.shape == (2, 3)
    assert torch.allclose(fitted.errors, mapping_error(z_t, z), rtol=0, atol=1e-9)


def test_sgd_paper_divergence_is_an_error():
    z = 100 * torch.randn(30, 3, generator=gen(0))
    with pytest.raises(ValueError, match=r"solver='sgd_paper' diverged in epoch \d+ \(lr=1.0 is too large"):
        fit_equivariance_map(z, z.flip(1), solver="sgd_paper", lr=1.0)


def test_sgd_paper_non_residual_map_starts_at_the_mean_target():
    """``W r + b`` (representation distance) starts at W = 0, b = the training targets' mean: with a vanishing lr
    the fitted map is that start."""
    g = gen(4)
    z1, z2 = torch.randn(40, 3, generator=g), torch.randn(40, 2, generator=g)
    d = representation_distance(z1, z2, solver="sgd_paper", lr=1e-12, epochs=1, weight_decay=0.0)
    e1 = d["maps"][0]
    assert d["forms"] == ("W r + b", "W r + b")
    assert torch.allclose(e1.module.bias, z2.double()[e1.train_index].mean(0), rtol=0, atol=1e-9)
    assert float(e1.module.weight.abs().max()) < 1e-9


# --------------------------------------------------------------------------- equivariance


def test_equivariance_report_argument_errors():
    z = torch.randn(20, 3, generator=gen(0))
    with pytest.raises(ValueError, match=r"z and z_t must have the same shape, got \(20, 3\) and \(20, 2\)"):
        equivariance_report(z, z[:, :2])
    with pytest.raises(TypeError, match=r"fitted must be an EquivarianceMap, got dict"):
        equivariance_report(z, z, fitted={})
    other = fit_equivariance_map(z[:, :2], z[:, :2])
    with pytest.raises(ValueError, match=r"fitted maps \(2,\) -> \(2,\), but the features have shape \(3,\)"):
        equivariance_report(z, z, fitted=other)
    with pytest.raises(ValueError, match=r"head must return \(B, classes\) logits for B = \d+, got \(\d+,\)"):
        equivariance_report(z, z, head=lambda f: f.sum(1), y=torch.zeros(20, dtype=torch.long))
    with pytest.raises(ValueError, match=r"head must return \(B, classes\) logits for B = \d+, got list"):
        equivariance_report(z, z, head=lambda f: [f], y=torch.zeros(20, dtype=torch.long))


def test_equivariance_report_fitted_on_given_rows():
    """With a map fitted before, ``holdout`` as rows selects the rows evaluated, every row among them possible."""
    g = gen(5)
    z = torch.randn(30, 4, generator=g)
    z_t = z.flip(1) + 0.1 * torch.randn(30, 4, generator=g)
    fitted = fit_equivariance_map(z, z_t)
    rows = torch.tensor([2, 5, 7])
    rep = equivariance_report(z, z_t, fitted=fitted, holdout=rows)
    assert rep["evaluated_on"] == "given" and torch.equal(rep["index"], rows)
    expected = mapping_error(fitted(z_t[rows].double()), z[rows], reference=z)
    assert torch.equal(rep["equivariance"], expected)
    everyone = equivariance_report(z, z_t, fitted=fitted, holdout=torch.ones(30, dtype=torch.bool))
    default = equivariance_report(z, z_t, fitted=fitted)  # a fraction with a fitted map: every row
    assert torch.equal(everyone["equivariance"], default["equivariance"])
    assert torch.equal(everyone["index"], torch.arange(30))
    with pytest.raises(ValueError, match=r"holdout selects no row to evaluate the fitted map on"):
        equivariance_report(z, z_t, fitted=fitted, holdout=torch.zeros(30, dtype=torch.bool))


def test_equivariance_curve_argument_errors():
    x = torch.rand(6, 3, 4, 4)
    ident = lambda a: a.flatten(1)  # noqa: E731
    with pytest.raises(TypeError, match=r"x must be a tensor, got list"):
        equivariance_curve(ident, x.tolist(), T.Brightness(), [0.5])
    with pytest.raises(ValueError, match=r"x must be a batch of at least 2 inputs, got shape \(1, 3, 4, 4\)"):
        equivariance_curve(ident, x[:1], T.Brightness(), [0.5])
    with pytest.raises(TypeError, match=r"model_or_features must be a module or a callable, got int"):
        equivariance_curve(3, x, T.Brightness(), [0.5])
    with pytest.raises(TypeError, match=r"seed must be an int, got float"):
        equivariance_curve(ident, x, T.Brightness(), [0.5], seed=1.0)
    with pytest.raises(ValueError, match=r"SamplePairing mixes samples and cannot be shared by every input"):
        equivariance_curve(ident, x, T.SamplePairing(), [0.5])
    with pytest.raises(ValueError, match=r"the features must be a \(B, ...\) tensor with B = 6, got list"):
        equivariance_curve(lambda a: [a], x, T.Brightness(), [0.5])
    crop = lambda a, m: a[:, :, :2]  # noqa: E731
    with pytest.raises(ValueError, match=r"features of the transformed inputs have shape \(6, 24\), not \(6, 48\)"):
        equivariance_curve(ident, x, crop, [1])


def test_equivariance_curve_callable_features_of_an_augnet_transform():
    """A shared brightness shift adds one constant to every feature of the identity: a map undoes it exactly."""
    x = torch.rand(40, 3, 2, 2, generator=gen(6))
    c = equivariance_curve(lambda a: a.flatten(1), x, T.Brightness(), [0.5, 1.0])
    assert max(c["equivariance"]) < 1e-5 and min(c["invariance"]) > 1e-3
    assert c["range"][1] == tuple(T.Brightness().natural_range(1.0, (2, 2)))


def test_equivariance_curve_per_input_draws():
    """``shared=False``: each input draws its own shift, so M = I is wrong by a different amount per row; the
    invariance errors equal those of the shifts drawn as a call of the transform with the seed's generator."""
    x = torch.rand(30, 3, 2, 2, generator=gen(7))
    t = T.Brightness()
    c = equivariance_curve(lambda a: a.flatten(1), x, t, [1.0], shared=False, seed=0)
    moved = t(x, 1.0, generator=gen(1))  # seed + 1
    z, z_t = x.flatten(1), moved.flatten(1)
    expected = mapping_error(z_t[c["index"]], z[c["index"]], reference=z)
    assert torch.allclose(c["errors"]["invariance"][0], expected, rtol=1e-6)


def test_plot_equivariance_curves_errors_and_title(tmp_path, monkeypatch):
    import augnet.viz

    shift = lambda a, m: a.roll(int(m), 1)  # noqa: E731
    curve = equivariance_curve(lambda a: a, torch.randn(40, 4, generator=gen(0)), shift, [0, 1])
    with pytest.raises(TypeError, match=r"curves must be a curve or a non-empty dict of curves, got list"):
        plot_equivariance_curves([curve], tmp_path / "a.png")
    with pytest.raises(ValueError, match=r"curve 'base' is not an equivariance_curve result"):
        plot_equivariance_curves({"base": {"x": 1}}, tmp_path / "a.png")
    seen = {}

    def save(fig, path):
        seen["title"] = fig.axes[0].get_title()
        seen["labels"] = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
        return path

    monkeypatch.setattr(augnet.viz, "save_figure", save)
    plot_equivariance_curves({"trained": curve}, tmp_path / "a.png", title="Fig. 1")
    assert seen == {"title": "Fig. 1", "labels": ["trained: equivariance", "trained: invariance"]}


# --------------------------------------------------------------------------- pairwise ranking


def test_pairwise_rank_loss_sum():
    a, b = torch.tensor([0.5, -1.0, 3.0]), torch.tensor([0.0, 1.0, 3.0])
    expected = sum(math.log1p(math.exp(-(p - q))) for p, q in zip(a.tolist(), b.tolist(), strict=True))
    assert float(pairwise_rank_loss(a, b, reduction="sum")) == pytest.approx(expected, rel=1e-6)


def test_layer_importance_argument_errors():
    w, s = torch.ones(3), torch.ones(3)
    with pytest.raises(TypeError, match=r"weight and std must be tensors"):
        layer_importance([1.0, 1.0, 1.0], s, {"a": 3})
    with pytest.raises(ValueError, match=r"weight and std must be 1-D of the same length, got \(3,\) and \(2,\)"):
        layer_importance(w, s[:2], {"a": 3})
    with pytest.raises(ValueError, match=r"sizes must name at least one layer"):
        layer_importance(w, s, {})
    with pytest.raises(ValueError, match=r"sizes must be positive channel counts, got \{'b': 0\}"):
        layer_importance(w, s, {"a": 3, "b": 0})
    with pytest.raises(ValueError, match=r"std must be non-negative"):
        layer_importance(w, -s, {"a": 3})


def _pairs(n=60, seed=0):
    g = gen(seed)
    m_a, m_b = torch.rand(n, generator=g), torch.rand(n, generator=g)
    return m_a, m_b


def test_ranking_probe_argument_errors():
    m_a, m_b = _pairs()
    z = torch.randn(60, 3)
    with pytest.raises(ValueError, match=r"z_a must hold at least one layer"):
        ranking_probe({}, {}, m_a, m_b)
    with pytest.raises(TypeError, match=r"z_a\['l'\] must be a tensor, got list"):
        ranking_probe({"l": [1.0]}, {"l": [1.0]}, m_a, m_b)
    with pytest.raises(ValueError, match=r"z_a\['features'\] must be \(P, channels, ...\), got shape \(60,\)"):
        ranking_probe(z[:, 0], z[:, 0], m_a, m_b)
    with pytest.raises(TypeError, match=r"z_a\['features'\] must hold real numbers, got dtype torch.bool"):
        ranking_probe(z > 0, z > 0, m_a, m_b)
    with pytest.raises(TypeError, match=r"m_a must be a tensor, got list"):
        ranking_probe(z, z, m_a.tolist(), m_b)
    with pytest.raises(ValueError, match=r"m_b holds NaN"):
        ranking_probe(z, z, m_a, torch.full((60,), math.nan))
    with pytest.raises(ValueError, match=r"l2 must be a non-negative number, got -1"):
        ranking_probe(z, z, m_a, m_b, l2=-1)
    with pytest.raises(ValueError, match=r"max_iter must be a positive integer, got 0"):
        ranking_probe(z, z, m_a, m_b, max_iter=0)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int64])
def test_ranking_probe_integer_features_rank_as_their_values(dtype):
    """Integer features of any width are numbers: the probe on them is the probe on the same values in float64
    (feature maps pooled as such)."""
    m_a, m_b = _pairs(80, 1)
    g = gen(2)
    noise_a, noise_b = torch.randint(0, 3, (80, 2, 2, 2), generator=g), torch.randint(0, 3, (80, 2, 2, 2), generator=g)
    z_a = torch.cat([(m_a * 40).round()[:, None, None, None].expand(80, 1, 2, 2), noise_a[:, :1]], 1)
    z_b = torch.cat([(m_b * 40).round()[:, None, None, None].expand(80, 1, 2, 2), noise_b[:, :1]], 1)
    ints = ranking_probe(z_a.to(dtype), z_b.to(dtype), m_a, m_b, generator=gen(3))
    floats = ranking_probe(z_a.double(), z_b.double(), m_a, m_b, generator=gen(3))
    assert ints["accuracy"] == floats["accuracy"] and ints["accuracy"] > 0.9
    assert torch.equal(ints["weight"], floats["weight"]) and torch.equal(ints["std"], floats["std"])


# --------------------------------------------------------------------------- ranking_model


class Levels(Transform):
    """A test transform: a per-row ``shift`` added to the images, a 0-d ``level`` and a per-pixel ``noise``."""

    def sample(self, x, magnitude, generator=None, copies=1):
        n = x.shape[0] * copies
        return {
            "shift": torch.rand(n, generator=generator, device=x.device),
            "level": torch.tensor(0.5),
            "noise": torch.rand(n, 2, generator=generator, device=x.device),
        }

    def apply_transform(self, x, params):
        return x + params["shift"].reshape(-1, *([1] * (x.dim() - 1))).to(x.dtype)


def _pooling_net():
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())


def test_ranking_probe_model_parameter_errors():
    x, net = torch.rand(8, 3, 4, 4, generator=gen(0)), _pooling_net()
    with pytest.raises(ValueError, match=r"param 'level' is not a per-row parameter: shape \(\) for 8 rows"):
        ranking_probe_model(net, x, Levels(), param="level")
    with pytest.raises(ValueError, match=r"param 'noise' varies within a row \(shape \(8, 2\)\)"):
        ranking_probe_model(net, x, Levels(), param="noise")
    with pytest.raises(ValueError, match=r"Levels has no param 'tilt'; its params are \['level', 'noise', 'shift'\]"):
        ranking_probe_model(net, x, Levels(), param="tilt", sampler=(0.0, 1.0))
    with pytest.raises(ValueError, match=r"param 'level' is not a per-row parameter: shape \(\) for 8 rows"):
        ranking_probe_model(net, x, Levels(), param="level", sampler=(0.0, 1.0))
    with pytest.raises(TypeError, match=r"x must be a tensor, got list"):
        ranking_probe_model(net, x.tolist(), Levels(), param="shift")
    with pytest.raises(TypeError, match=r"model must be an nn.Module, got function"):
        ranking_probe_model(lambda a: a, x, Levels(), param="shift")
    with pytest.raises(TypeError, match=r"transform must be callable, got str"):
        ranking_probe_model(net, x, "Rotate", sampler=(0.0, 1.0))


def test_ranking_probe_model_of_a_transform_that_mixes_samples():
    """SamplePairing reads other rows: each copy is drawn whole, its magnitudes the ``blend`` of that draw."""
    from augnet.probes._common import apply_paired, seeded

    x, net, t = torch.rand(16, 3, 4, 4, generator=gen(1)), _pooling_net(), T.SamplePairing()
    out = ranking_probe_model(net, x, t, param="blend", seed=4)
    g = seeded(5, x.device)  # seed + 1, the two copies drawn one after the other
    _, first = apply_paired(t, x, 1.0, g)
    _, second = apply_paired(t, x, 1.0, g)
    assert torch.equal(out["m_a"], first["blend"].double()) and torch.equal(out["m_b"], second["blend"].double())


def test_ranking_probe_model_levels_shift_is_ranked():
    """A shift added to every pixel moves the pooled features of a linear model with it: perfectly ranked."""
    x = torch.rand(40, 3, 4, 4, generator=gen(2))
    net = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten())
    out = ranking_probe_model(net, x, Levels(), param="shift")
    assert out["accuracy"] == 1.0


# --------------------------------------------------------------------------- tau selection


class _TupleOut(nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, a):
        return self.net(a), "extra"


def _relu_net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).eval()


def test_select_tau_reads_the_first_of_a_tuple_output():
    net, x, y = _relu_net(), torch.randn(24, 4, generator=gen(0)), torch.randint(0, 3, (24,), generator=gen(1))
    plain = select_tau(net, "1", x, y, taus=[0.0, 0.3], x_t=-x)
    wrapped = select_tau(_TupleOut(net), "net.1", x, y, taus=[0.0, 0.3], x_t=-x)
    assert wrapped == plain


def test_select_tau_argument_errors():
    net, x, y = _relu_net(), torch.randn(12, 4, generator=gen(0)), torch.randint(0, 3, (12,), generator=gen(1))
    with pytest.raises(TypeError, match=r"model must be an nn.Module, got function"):
        select_tau(lambda a: a, "1", x, y, x_t=x)
    with pytest.raises(TypeError, match=r"transform must be callable, got int"):
        select_tau(net, "1", x, y, transform=3)
    with pytest.raises(ValueError, match=r"transformed inputs must have the inputs' shape \(12, 4\), got \(12, 2\)"):
        select_tau(net, "1", x, y, transform=lambda b, m, generator=None: b[:, :2])
    with pytest.raises(TypeError, match=r"seen_classes must be an iterable of class indices, got int"):
        select_tau(net, "1", x, y, x_t=x, score="within", seen_classes=1)
    with pytest.raises(TypeError, match=r"seen_classes must hold integer class indices, got 0.5"):
        select_tau(net, "1", x, y, x_t=x, score="within", seen_classes=[0.5])

    class Flat(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = _relu_net()

        def forward(self, a):
            return self.body(a).sum(1)

    with pytest.raises(ValueError, match=r"the model must return \(B, classes\) logits, got torch.Size\(\[12\]\)"):
        select_tau(Flat(), "body.1", x, y, x_t=x)


def test_select_tau_layer_output_errors():
    x, y = torch.randn(12, 4, generator=gen(0)), torch.randint(0, 3, (12,), generator=gen(1))

    class Pair(nn.Module):
        def forward(self, a):
            return a, a

    class Sum(nn.Module):
        def forward(self, a):
            return a.relu().sum(1)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.pair, self.sum, self.head = Pair(), Sum(), nn.Linear(1, 3)

        def forward(self, a):
            return self.head(self.sum(self.pair(a)[0])[:, None])

    with pytest.raises(TypeError, match=r"layer 'pair' must output a tensor to be ablated, got tuple"):
        select_tau(Net(), "pair", x, y, x_t=x)
    with pytest.raises(ValueError, match=r"layer 'sum' must output \(B, ...\) activations, got shape \(12,\)"):
        select_tau(Net(), "sum", x, y, x_t=x)


# --------------------------------------------------------------------------- report: arguments and transforms

from augnet.probes import auto_layers, report  # noqa: E402


def _conv_net(stride=1):
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Identity(),
        nn.Conv2d(3, 4, 3, padding=1, stride=stride),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(4, 3),
    )


def _images(n=8, h=8, w=8, seed=0):
    return torch.rand(n, 3, h, w, generator=gen(seed))


def _table(rep):
    return [(r["layer"], r["transform"], r["magnitude"], r["measure"], r["value"], r["note"]) for r in rep.records]


def _same(a, b):
    """Record tables equal, NaN equal to NaN."""
    assert len(a) == len(b)
    for ra, rb in zip(a, b, strict=True):
        assert ra[:4] == rb[:4] and ra[5] == rb[5], (ra, rb)
        assert ra[4] == rb[4] or (math.isnan(ra[4]) and math.isnan(rb[4])), (ra, rb)


def test_report_argument_errors():
    net, x = _conv_net(), _images()
    with pytest.raises(TypeError, match=r"model must be an nn.Module, got function"):
        report(lambda a: a, x, ["Rotate"])
    with pytest.raises(TypeError, match=r"x must be a tensor of images, got list"):
        report(net, x.tolist(), ["Rotate"])
    with pytest.raises(TypeError, match=r"layers must be 'auto', a layer name or a list of them, got int"):
        report(net, x, ["Rotate"], layers=3)
    with pytest.raises(ValueError, match=r"layers must be 'auto' or distinct layer names, got \[\]"):
        report(net, x, ["Rotate"], layers=[])
    with pytest.raises(ValueError, match=r"layers must be 'auto' or distinct layer names, got \['2', '2'\]"):
        report(net, x, ["Rotate"], layers=["2", "2"])
    with pytest.raises(ValueError, match=r"transforms must not repeat a name, got \['Rotate', 'Rotate'\]"):
        report(net, x, [T.Rotate(), T.Rotate(max_angle=1.0)])


def test_report_takes_one_transform_or_a_mapping():
    """One transform (a name or an instance) is a list of one; ``{name: transform}`` names it."""
    net, x = _conv_net(), _images()
    kw = {"layers": ["2", "logits"], "magnitudes": [1.0], "lie": False}
    listed = report(net, x, ["Brightness"], **kw)
    by_name = report(net, x, "Brightness", **kw)
    by_instance = report(net, x, T.Brightness(), **kw)
    named = report(net, x, {"light": T.Brightness()}, **kw)
    assert by_name.transforms == by_instance.transforms == ["Brightness"] and named.transforms == ["light"]
    _same(_table(by_name), _table(listed))
    _same(_table(by_instance), _table(listed))
    renamed = [(r[0], "Brightness", *r[2:]) for r in _table(named)]
    _same(renamed, _table(listed))


def test_auto_layers_of_a_compiled_model():
    """A torch.compile wrapper is read as the module it runs, its layers named through the wrapper."""
    net = _conv_net()
    compiled = torch.compile(net)  # nothing is compiled before a forward pass
    plain = auto_layers(net)
    assert auto_layers(compiled) == [f"_orig_mod.{n}" for n in plain[:-1]] + ["logits"]


def test_report_transform_without_ranking_parameter():
    """Equalize has no per-row parameter to rank copies by and no Lie family: no ranking record, a NaN Lie
    derivative with its note."""
    net, x = _conv_net(), _images()
    rep = report(net, x, [T.Equalize()], layers=["2"], magnitudes=[1.0])
    measures = {r["measure"] for r in rep.records}
    assert "ranking_accuracy" not in measures and "importance" not in measures
    lie = [r for r in rep.records if r["measure"] == "lie_derivative"]
    assert len(lie) == 1 and math.isnan(lie[0]["value"]) and "not a continuous family" in lie[0]["note"]


class _FixedShift(T.TranslateX):
    """A TranslateX whose every copy is shifted by the same amount: the ranker has no pair to order."""

    def sample(self, x, magnitude, generator=None, copies=1):
        params = super().sample(x, magnitude, generator=generator, copies=copies)
        return {**params, "shift": torch.full_like(params["shift"], 0.1)}


def test_report_ranking_without_ordered_pairs_is_nan_with_a_note():
    net, x = _conv_net(), _images()
    rep = report(net, x, [_FixedShift()], layers=["2", "logits"], magnitudes=[1.0], lie=False)
    ranked = [r for r in rep.records if r["measure"] in ("ranking_accuracy", "importance")]
    assert len(ranked) == 4
    for r in ranked:
        assert math.isnan(r["value"]) and r["note"].startswith("need at least one training and one held-out pair")
    assert "_FixedShift" not in rep.info["ranking_held_out"]


# --------------------------------------------------------------------------- report: positions and grids


class _Tokens(nn.Module):
    """(B, C, H, W) -> (B, H * W, C): a transformer's (B, tokens, D) layout."""

    def forward(self, a):
        return a.flatten(2).transpose(1, 2)


class _Columns(nn.Module):
    """(B, C, H, W) -> (B, C, H * W, 1): the same values as a feature map."""

    def forward(self, a):
        return a.flatten(2).unsqueeze(-1)


def _token_net(layout):
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 4, 3, padding=1)
    return nn.Sequential(conv, nn.ReLU(), layout, nn.Flatten(), nn.LazyLinear(3))


def test_report_positions_of_a_token_layer_are_its_tokens():
    """``aggregation="positions"`` reads a (B, tokens, D) layer as D channels at the token positions: every measure
    but same-equivariance equals that of the same values laid out as (B, D, tokens, 1) maps."""
    x = _images()
    kw = {"layers": ["2"], "magnitudes": [1.0], "lie": False, "aggregation": "positions"}
    tokens, columns = _token_net(_Tokens()), _token_net(_Columns())
    tokens(x), columns(x)  # the lazy heads take their shapes
    a = [r for r in _table(report(tokens, x, ["Brightness"], **kw)) if r[3] != "same_equivariance"]
    b = [r for r in _table(report(columns, x, ["Brightness"], **kw)) if r[3] != "same_equivariance"]
    _same(a, b)


def _grid_report(net, x, transforms, magnitude=1.0):
    return report(net, x, transforms, layers=["0", "2"], magnitudes=[magnitude], lie=False, transformations="grid",
                  aggregation="positions", grid_points=3)  # fmt: skip


def _same_eq(rep, layer, transform):
    (r,) = [r for r in rep.records if r["measure"] == "same_equivariance" and r["layer"] == layer
            and r["transform"] == transform]  # fmt: skip
    return r


def test_report_same_equivariance_of_whole_pixel_shifts():
    """Shifts by whole pixels are exact actions: the identity layer is exactly same-equivariant to them (0); a
    stride-2 layer is compared under a shift of half as many of its positions, or not at all for an odd shift."""
    x = _images()
    two = _grid_report(_conv_net(stride=2), x, [T.TranslateX(max_shift=0.25), T.TranslateY(max_shift=0.25)])
    for name in ("TranslateX", "TranslateY"):
        ident = _same_eq(two, "0", name)
        assert abs(ident["value"]) < 1e-6 and ident["note"].startswith("2 of 3 views compared (shift")
        strided = _same_eq(two, "2", name)
        assert math.isfinite(strided["value"]) and strided["note"].startswith("2 of 3 views compared (shift")
    shifted = "shift (0, 1), shift (0, -1)"
    assert shifted in _same_eq(two, "2", "TranslateX")["note"] or "shift (0, -1), shift (0, 1)" in _same_eq(
        two, "2", "TranslateX")["note"]  # fmt: skip
    one = _grid_report(_conv_net(stride=2), x, [T.TranslateX(max_shift=0.125)])  # 1 pixel: half a position of "2"
    assert _same_eq(one, "0", "TranslateX")["note"].startswith("2 of 3 views compared")
    odd = _same_eq(one, "2", "TranslateX")
    assert math.isnan(odd["value"]) and odd["note"].startswith("no view of the grid is an exact action")


def test_report_same_equivariance_of_a_shift_out_of_view():
    """A shift by the whole width leaves no position to compare: NaN, with same_equivariance's reason."""
    rep = _grid_report(_conv_net(), _images(), [T.TranslateX(max_shift=1.0)])
    r = _same_eq(rep, "0", "TranslateX")
    assert math.isnan(r["value"]) and "leaves no position to compare" in r["note"]


def test_report_quarter_turns_of_non_square_images_are_no_exact_action():
    square = _same_eq(_grid_report(_conv_net(), _images(), [T.Rotate()], magnitude=0.5), "0", "Rotate")
    assert abs(square["value"]) < 1e-6 and square["note"] == "2 of 3 views compared (rot270, rot90)"
    rep = _grid_report(_conv_net(), _images(h=8, w=6), [T.Rotate()], magnitude=0.5)
    r = _same_eq(rep, "0", "Rotate")
    assert rep.info["grid"]["Rotate"]["0.5"] == pytest.approx([-math.pi / 2, 0.0, math.pi / 2])
    assert math.isnan(r["value"]) and r["note"].startswith("no view of the grid is an exact action")


def test_report_non_finite_layer_names_the_layer():
    class Inf(nn.Module):
        def forward(self, a):
            return a * math.inf

    net = nn.Sequential(nn.Conv2d(3, 2, 3), Inf(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
    with pytest.raises(ValueError, match=r"layer '1', Rotate at magnitude 1: z has NaN or infinite features"):
        report(net, _images(), ["Rotate"], layers=["1"], magnitudes=[1.0], lie=False)
