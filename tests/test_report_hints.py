"""``probes.report`` says what to do with the inputs a user has at hand: a DataLoader (or data set) of images,
and signals (N, C, T), which it does not measure (its messages named neither)."""

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from augnet.probes import report


def _model():
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 8 * 8, 2))


def test_a_loader_or_a_data_set_is_told_how_to_make_the_tensor():
    data = TensorDataset(torch.rand(8, 3, 8, 8), torch.arange(8) % 2)
    for given in (data, DataLoader(data, batch_size=4)):
        with pytest.raises(TypeError, match=r"got (TensorDataset|DataLoader): gather its inputs into one, torch\.cat"):
            report(_model(), given, transforms=["Rotate"])


def test_signals_are_pointed_to_invariance_curve():
    with pytest.raises(ValueError, match=r"signals \(N, C, T\): measure them with augnet\.probes\.invariance_curve"):
        report(_model(), torch.rand(8, 3, 64), transforms=["Rotate"])
    with pytest.raises(ValueError) as images:  # images of fewer than 8 inputs: no signal hint
        report(_model(), torch.rand(4, 3, 8, 8), transforms=["Rotate"])
    assert "invariance_curve" not in str(images.value)


def test_an_augnets_weights_for_its_trunk_alone_are_told_what_to_save(tmp_path):
    import augnet
    from augnet.probes.inputs import load_model
    from augnet.transforms import image as T

    trunk = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 8 * 8, 2))
    model = augnet.AugNet(trunk, augnet.AugmentationLayer([T.Rotate()]))
    torch.save(model.state_dict(), tmp_path / "w.pt")
    with pytest.raises(ValueError, match=r"an AugNet's state_dict: save model\.trunk\.state_dict\(\)"):
        load_model("torch.nn:Sequential", None, tmp_path / "w.pt")
    torch.save(model.trunk.state_dict(), tmp_path / "trunk.pt")  # what it says to save: other keys, no hint
    with pytest.raises(ValueError) as other:
        load_model("torchvision.models:resnet18", {"num_classes": 2}, tmp_path / "trunk.pt")
    assert "trunk." not in str(other.value).split("do not fit")[1][:60]
