"""``augnet.experiments.compare`` used as a user would, on tiny data: what it refused late, silently or unclearly.

torchvision's policies on 2- or 4-channel images were refused without naming the method or the inputs' shape;
``crop`` on images of a side under 8 padded by 0 and cropped back to the image itself (a "crop" record that was
"none": it is now padded by one pixel); float16 inputs trained to NaN weights in the first steps (Adam's eps is
0 in float16); a trunk class needing arguments (``nn.Linear``) was torch's bare TypeError; ``batch_size=1`` with
a batch norm over (N, C) failed inside the first run; a NumPy method name was kept as ``np.str_`` in the
records; ``progress="no"`` printed; a ``TensorDataset`` of three tensors was told to add a transform to tensors;
NumPy arrays and uint8 images were refused without the conversion to make. ``Comparison.save`` to a directory
or a missing folder raised an OSError (a missing folder is now made, as ``Policy.save`` and
``ProbeReport.save`` do), ``save(None)`` pathlib's TypeError; ``Comparison.load`` of records that are not
objects an AttributeError, and the table of records lacking a measure a KeyError.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from augnet.experiments import Comparison, compare
from augnet.experiments import comparison as C

KW = {"epochs": 1, "seeds": [0], "progress": False}


def _data(n=16, c=1, side=8):
    g = torch.Generator().manual_seed(0)
    return torch.rand(n, c, side, side, generator=g), torch.arange(n) % 2


def _trunk(c=1, side=8):
    return lambda: nn.Sequential(nn.Flatten(), nn.Linear(c * side * side, 2))


@pytest.fixture
def no_training(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a model was trained before the input was refused")

    monkeypatch.setattr(C, "train", refuse)


@pytest.mark.parametrize("channels", [2, 4])
def test_torchvisions_policies_on_other_channel_counts_name_the_method_and_the_count(no_training, channels):
    x, y = _data(c=channels)
    with pytest.raises(ValueError, match=rf"\['randaugment', 'augmix'\].*1 or 3 channels, got {channels} "):
        compare(_trunk(channels), (x, y), (x, y), ["none", "randaugment", "augmix"], **KW)


@pytest.mark.parametrize("size", [7, (6, 10), (7, 16)])
def test_crop_on_images_of_a_side_under_8_crops_instead_of_returning_the_image(size):
    from augnet.experiments.versus_methods import _torchvision_policy

    torch.manual_seed(0)
    h, w = (size, size) if isinstance(size, int) else size
    image = torch.randint(1, 256, (1, h, w), dtype=torch.uint8)
    crop = _torchvision_policy("crop", size)
    outs = [crop(image) for _ in range(8)]
    assert all(o.shape == image.shape for o in outs)
    assert any(not torch.equal(o, image) for o in outs)  # padded by 0 it was the image itself: 'crop' was 'none'


def test_crop_keeps_its_eighth_from_side_8_on():
    from augnet.experiments.versus_methods import _torchvision_policy

    assert [_torchvision_policy("crop", s).padding for s in (8, 16, (28, 40))] == [[1] * 4, [2] * 4, [3] * 4]
    x, y = _data(side=8)
    assert [r["method"] for r in compare(_trunk(), (x, y), (x, y), ["crop"], **KW).records] == ["crop"]


def test_float16_inputs_are_refused_before_training(no_training):
    x, y = _data()
    with pytest.raises(ValueError, match=r"float16.*Adam"):
        compare(lambda: _trunk()().half(), (x.half(), y), (x.half(), y), ["none"], **KW)


def test_bfloat16_inputs_still_train():
    x, y = _data()
    res = compare(lambda: _trunk()().bfloat16(), (x.bfloat16(), y), (x.bfloat16(), y), ["none"], **KW)
    assert len(res.records) == 1


def test_a_trunk_class_needing_arguments_is_a_typeerror_naming_trunk(no_training):
    x, y = _data()
    with pytest.raises(TypeError, match=r"trunk\(\) raised TypeError.*no arguments"):
        compare(nn.Linear, (x, y), (x, y), ["none"], **KW)


def test_numpy_method_names_come_back_as_str():
    x, y = _data()
    res = compare(_trunk(), (x, y), (x, y), [np.str_("none")], **KW)
    assert type(res.records[0]["method"]) is str


@pytest.mark.parametrize("progress", ["no", 0, None])
def test_progress_must_be_a_bool(no_training, progress):
    x, y = _data()
    with pytest.raises(TypeError, match="progress must be True or False"):
        compare(_trunk(), (x, y), (x, y), ["none"], epochs=1, seeds=[0], progress=progress)


def test_batch_size_one_with_a_batch_norm_that_cannot_take_it_is_refused_before_training(no_training):
    x, y = _data()
    trunk = lambda: nn.Sequential(nn.Flatten(), nn.Linear(64, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))  # noqa: E731
    with pytest.raises(ValueError, match="batch_size 1: every batch holds one input"):
        compare(trunk, (x, y), (x, y), ["none"], batch_size=1, **KW)


def test_batch_size_one_with_a_spatial_batch_norm_still_runs():
    x, y = _data()
    trunk = lambda: nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Flatten(), nn.Linear(72, 2))  # noqa: E731
    assert len(compare(trunk, (x, y), (x, y), ["none"], batch_size=1, **KW).records) == 1


def test_a_data_set_of_three_tensors_is_told_so(no_training):
    x, y = _data()
    data = torch.utils.data.TensorDataset(x, y, y)
    with pytest.raises(TypeError, match="got a tuple of 3 items"):
        compare(_trunk(), data, (x, y), ["none"], **KW)


def test_numpy_arrays_and_uint8_images_are_told_the_conversion(no_training):
    x, y = _data()
    with pytest.raises(TypeError, match=r"train_data .*torch\.from_numpy"):
        compare(_trunk(), (x.numpy(), y.numpy()), (x, y), ["none"], **KW)
    u = (x * 255).to(torch.uint8)
    with pytest.raises(ValueError, match=r"test_data: .*uint8.*x\.float\(\) / 255"):
        compare(_trunk(), (x, y), (u, y), ["none"], **KW)


def _result():
    return Comparison([{"method": "none", "seed": 0, "accuracy": 0.5, "accuracy_tta": 0.5, "accuracy_1": 0.5,
                        "invariance": float("nan"), "train_seconds": 1.0, "train_cpu_seconds": 1.0,
                        "policy": None}])  # fmt: skip


def test_save_to_a_directory_or_under_a_file_is_a_valueerror_naming_it(tmp_path):
    with pytest.raises(ValueError, match="existing directory"):
        _result().save(tmp_path)
    (tmp_path / "f").write_text("")
    with pytest.raises(ValueError, match="cannot save to"):
        _result().save(tmp_path / "f" / "c.json")
    with pytest.raises(TypeError, match="path must be a str or a path-like object, got NoneType"):
        _result().save(None)


def test_save_makes_the_folder_and_reads_back(tmp_path):
    path = _result().save(tmp_path / "a" / "b" / "c.json")
    assert Comparison.load(path).table() == _result().table()


def test_load_of_records_that_are_not_objects_and_tables_of_records_lacking_measures(tmp_path):
    path = tmp_path / "c.json"
    path.write_text('{"comparison": [1]}')
    with pytest.raises(ValueError, match="record 0 is not an object"):
        Comparison.load(path)
    path.write_text('{"comparison": [{"method": "none", "seed": 0, "accuracy": 0.5}]}')
    with pytest.raises(ValueError, match=r"record 0 \('none'\) lacks \['accuracy_tta'"):
        Comparison.load(path).table()
