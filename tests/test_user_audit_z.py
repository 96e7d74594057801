"""A user's audit of learned policies after training: printing, saving, rebuilding, plotting, presets.

Each test failed on the code before its mend (the plots: a history or curve recorded as tensors with a gradient, a
figure that failed to draw left open, a tensor ``ylim`` warned about by NumPy, values that are no numbers drawn as
categories; the preset: a sequence ``init_magnitude`` refused naming one layer's count alone).
"""

from __future__ import annotations

import warnings

import pytest
import torch

import augnet
from augnet import viz
from augnet.presets import cifar10_augmentation
from augnet.transforms import image as T

plt = pytest.importorskip("matplotlib.pyplot")


def _history(weights, steps=(0, 1)):
    return {"step": list(steps), "weights": [[weights]] * 2, "magnitudes": [[[0.5, 0.5]]] * 2}


def _curve(magnitude, median=1.0):
    summary = [{"median": median, "p25": 0.5, "p75": 1.0}] * 3
    return {"magnitude": magnitude, "summary": summary}


def test_policy_history_of_tensors_with_a_gradient_is_drawn(tmp_path):
    # A user's callback recording layer.weights as they are (with their graph): matplotlib's numpy() failed.
    layer = augnet.AugmentationLayer([T.Rotate(), T.ShearX()])
    history = _history(layer.weights)
    before = plt.get_fignums()
    out = viz.plot_policy_history(history, ["Rotate", "ShearX"], tmp_path / "h")
    assert out == tmp_path / "h.png" and out.is_file()
    assert plt.get_fignums() == before


@pytest.mark.parametrize(
    ("history", "match"),
    [
        (_history([0.5, "x"]), r"history\['weights'\] record 0, layer 0 must hold real numbers"),
        (_history([0.5, None]), r"history\['weights'\] record 0, layer 0 must hold real numbers"),
        (_history([0.5, 0.5], steps=("a", "b")), r"history\['step'\] must hold real numbers"),
    ],
)
def test_policy_history_of_values_that_are_no_numbers_is_refused(tmp_path, history, match):
    # They were drawn (strings as categories, None as a gap) without a word.
    with pytest.raises(TypeError, match=match):
        viz.plot_policy_history(history, ["Rotate", "ShearX"], tmp_path / "h.png")
    assert not (tmp_path / "h.png").exists()


@pytest.mark.parametrize("where", ["magnitude", "median"])
def test_invariance_curves_of_tensors_with_a_gradient_are_drawn(tmp_path, where):
    grad = torch.tensor([0.0, 0.5, 1.0], requires_grad=True)
    if where == "magnitude":
        curve = _curve(grad * 1)
    else:
        curve = _curve([0.0, 0.5, 1.0], median=torch.tensor(0.7, requires_grad=True) * 1)
    before = plt.get_fignums()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch's own about reading a tensor with a gradient
        out = viz.plot_invariance_curves({"a": curve}, tmp_path / "c.png")
    assert out.is_file() and plt.get_fignums() == before


def test_a_tensor_ylim_gives_no_numpy_warning(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        out = viz.plot_distributions({"a": [0.1, 0.9]}, tmp_path / "d", "weight", ylim=torch.tensor([0.0, 1.0]))
    assert out.is_file()


@pytest.mark.parametrize(
    ("method", "call"),
    [
        ("violinplot", lambda p: viz.plot_distributions({"a": [0.1, 0.9]}, p, "w")),
        ("plot", lambda p: viz.plot_policy_history(_history([0.5, 0.5]), ["Rotate", "ShearX"], p)),
        ("plot", lambda p: viz.plot_invariance_curves({"a": _curve([0.0, 0.5, 1.0])}, p)),
        ("bar", lambda p: viz.plot_layer_importance({"a": 1.0}, p)),
    ],
)
def test_a_figure_that_fails_to_draw_is_closed(tmp_path, monkeypatch, method, call):
    from matplotlib.axes import Axes

    def broken(*args, **kwargs):
        raise RuntimeError("drawing failed")

    monkeypatch.setattr(Axes, method, broken)
    before = plt.get_fignums()
    with pytest.raises(RuntimeError, match="drawing failed"):
        call(tmp_path / "x.png")
    assert plt.get_fignums() == before  # it was left open in pyplot
    assert not (tmp_path / "x.png").exists()


def test_plots_of_a_policy_close_their_figures(tmp_path):
    layer = augnet.AugmentationLayer([T.Rotate(), T.ShearX(), T.Gray()])
    policy = augnet.AugmentationModule([layer]).policy((32, 32))
    before = plt.get_fignums()
    weights = {e["transform"]: e["weight"] for e in policy[0]}
    ranges = {e["transform"]: list(e["range"][:2]) for e in policy[0]}
    assert viz.plot_layer_importance(weights, tmp_path / "missing" / "w") == tmp_path / "missing" / "w.png"
    assert viz.plot_distributions(ranges, tmp_path / "r.pdf", "range").is_file()
    assert plt.get_fignums() == before


@pytest.mark.parametrize("value", [[0.2] * 4, [0.2] * 5, torch.full((5,), 0.2)])
def test_preset_refuses_a_sequence_init_magnitude_naming_the_layers(value):
    # It was "init_magnitude has 5 values for 4 transforms": one layer's count, whatever the sequence.
    with pytest.raises(ValueError, match=r"init_magnitude must be one number.*5, 5, 4 transforms"):
        cifar10_augmentation(init_magnitude=value)


def test_preset_numbers_are_as_before():
    a = cifar10_augmentation(init_magnitude=torch.tensor(0.3), temperature=2.0)
    b = cifar10_augmentation(init_magnitude=0.3, temperature=2.0)
    assert a.policy() == b.policy()
    again = augnet.AugmentationModule.from_policy(a.policy((32, 32)).to_json())
    x = torch.rand(2, 3, 32, 32)
    out = [m(x, copies=2, generator=torch.Generator().manual_seed(0)) for m in (a, again)]
    assert torch.equal(*out)
