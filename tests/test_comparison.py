"""augnet.experiments.compare: the versus methods on a user's own tensors."""

import math

import pytest
import torch
from helpers import Listed
from torch import nn

from augnet.experiments import compare
from augnet.experiments.comparison import COMPARE_METHODS
from augnet.transforms import image as T
from augnet.transforms import signal as S


def _images(n=32, h=8, w=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 1, h, w, generator=g)
    y = (x[:, 0, :, : w // 2].mean((1, 2)) > x[:, 0, :, w // 2 :].mean((1, 2))).long()
    return x, y


def _trunk(h=8, w=8, channels=1, made=None):
    def make():
        model = nn.Sequential(nn.Flatten(), nn.Linear(channels * h * w, 2))
        if made is not None:
            made.append([p.detach().clone() for p in model.parameters()])
        return model

    return make


def test_every_method_and_seed_gives_a_record_and_the_table_reads_them():
    x, y = _images()
    x0 = x.clone()
    res = compare(_trunk(), (x, y), _images(seed=1), ["none", "crop", "trivialaugment", "augnet"], epochs=1,
                  seeds=[0, 1], progress=False)  # fmt: skip
    assert [(r["method"], r["seed"]) for r in res.records] == [
        (m, s) for s in (0, 1) for m in ("none", "crop", "trivialaugment", "augnet")
    ]
    for r in res.records:
        assert all(0 <= r[k] <= 1 for k in ("accuracy", "accuracy_tta", "accuracy_1"))
        assert math.isnan(r["invariance"]) and r["train_seconds"] > 0
        assert (r["policy"] is not None) == (r["method"] == "augnet")
    summary = res.summary()
    accs = [r["accuracy"] for r in res.records if r["method"] == "augnet"]
    assert summary["augnet"]["accuracy"][0] == pytest.approx(sum(accs) / 2) and summary["augnet"]["accuracy"][2] == 2
    table = str(res)
    assert all(f"| {m} |" in table for m in ("none", "crop", "trivialaugment", "augnet"))
    assert torch.equal(x, x0)  # the data are not modified


def test_runs_repeat_and_every_method_of_a_seed_starts_from_the_same_weights():
    made = []
    x, y = _images()
    first = compare(_trunk(made=made), (x, y), (x, y), ["none", "augnet", "augerino"], epochs=1, seeds=[3],
                    progress=False)  # fmt: skip
    again = compare(_trunk(), (x, y), (x, y), ["none", "augnet", "augerino"], epochs=1, seeds=[3], progress=False)
    assert [r["accuracy"] for r in first.records] == [r["accuracy"] for r in again.records]
    assert len(made) == 5  # the check of trunk() before the runs (two calls), then one per run
    assert all(torch.equal(a, b) for w in made[3:] for a, b in zip(made[2], w))


def test_torchs_global_random_state_is_left_as_it_was():
    x, y = _images()
    torch.manual_seed(11)
    expected = torch.rand(3)
    torch.manual_seed(11)
    compare(_trunk(), (x, y), (x, y), ["augnet"], epochs=1, seeds=[0], progress=False)
    assert torch.equal(torch.rand(3), expected)


def test_invariance_at_the_logits_is_measured_when_asked():
    x, y = _images()
    res = compare(_trunk(), (x, y), (x, y), ["none", "augnet"], epochs=1, seeds=[0], invariance=(T.Rotate(), 0.25),
                  progress=False)  # fmt: skip
    assert all(math.isfinite(r["invariance"]) and r["invariance"] <= 1 for r in res.records)  # Inv_T: no lower bound
    assert "| - |" not in res.table()


def test_non_square_images_and_three_channels():
    x = torch.rand(16, 3, 6, 10)
    y = torch.arange(16) % 2
    res = compare(_trunk(6, 10, 3), (x, y), (x, y), ["crop", "randaugment", "instance"], epochs=1, seeds=[0],
                  progress=False)  # fmt: skip
    assert len(res.records) == 3


def test_signals_with_their_own_transforms():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(24, 2, 32, generator=g)
    y = torch.arange(24) % 2
    trunk = lambda: nn.Sequential(nn.Flatten(), nn.Linear(64, 2))  # noqa: E731
    res = compare(trunk, (x, y), (x, y), ["none", "augnet"], transforms=lambda: [S.GaussianNoise(), S.SignFlip()],
                  epochs=1, seeds=[0], progress=False)  # fmt: skip
    names = [e["transform"] for e in res.records[1]["policy"]["layers"][0]["transforms"]]
    assert names == ["GaussianNoise", "SignFlip"]


@pytest.mark.parametrize(
    "change, error, match",
    [
        (dict(trunk=nn.Linear(64, 2)), TypeError, "trunk must be a function"),
        (dict(trunk=lambda: "model"), TypeError, r"trunk\(\) must return an nn.Module, got str"),
        (dict(train_data=torch.rand(4, 1, 8, 8)), TypeError, "train_data must be an"),
        (dict(train_data=(torch.rand(4, 1, 8, 8), torch.zeros(4))), ValueError, "labels must be int64"),
        (dict(train_data=(torch.rand(4, 1, 8, 8), torch.zeros(3, dtype=torch.long))), ValueError, "for 4 inputs"),
        (dict(train_data=(torch.rand(4, 8), torch.zeros(4, dtype=torch.long))), ValueError, "inputs must be float"),
        (dict(test_data=(torch.rand(4, 1, 9, 8), torch.zeros(4, dtype=torch.long))), ValueError, "inputs differ"),
        (dict(methods=["none", "cutout"]), ValueError, "methods must be distinct names"),
        (dict(methods=["fixed"]), ValueError, "fixed needs a grid search"),
        (dict(methods="augnet"), ValueError, "the string 'augnet'"),
        (dict(methods=iter([])), ValueError, "distinct names"),
        (dict(methods=["none", "none"]), ValueError, "distinct"),
        (dict(epochs=0), ValueError, "epochs must be an int >= 1, got 0"),
        (dict(batch_size=2.5), ValueError, "batch_size must be an int"),
        (dict(lr=-1.0), ValueError, "lr must be a positive number, got -1.0"),
        (dict(seeds=[1, 1]), ValueError, "seeds must be distinct ints"),
        (dict(seeds=[-1]), ValueError, r"in \[0, 2\*\*62\)"),
        (dict(seeds=[2**64 - 1]), ValueError, r"in \[0, 2\*\*62\)"),
        (dict(invariance=T.Rotate()), ValueError, "invariance must be a"),
        (dict(invariance=("Rotate", 0.25)), ValueError, "invariance must be a"),
        (dict(invariance=(T.Rotate(), "0.25")), ValueError, "invariance must be a"),
        (dict(invariance=(T.Rotate(), 30)), ValueError, r"magnitude must lie in \(0, 1\].*got 30"),
        (dict(invariance=(T.Rotate(), 0.25), test_data=(torch.rand(4, 1, 8, 8), torch.zeros(4, dtype=torch.long))),
         ValueError, "at least 8 test inputs"),
        (dict(invariance=(S.FrequencyShift(100.0), 0.25)), ValueError, "FrequencyShift cannot transform these"),
        (dict(train_data=(torch.rand(0, 1, 8, 8), torch.zeros(0, dtype=torch.long))), ValueError, "no inputs"),
        (dict(train_data=(torch.rand(4, 1, 8, 8), torch.tensor([0, 1, -1, 0]))), ValueError, "labels must be .* >= 0"),
        (dict(train_data=(torch.rand(4, 1, 8, 8), torch.tensor([0, 1, 5, 0]))), ValueError, r"classes >= 6"),
        (dict(train_data=(torch.rand(4, 1, 8, 8), torch.zeros(4, dtype=torch.long, device="meta"))), ValueError,
         "got labels on meta"),
        (dict(train_data=(torch.rand(4, 1, 8, 8, dtype=torch.float64), torch.zeros(4, dtype=torch.long))),
         ValueError, "train and test inputs differ"),
        (dict(transforms=[T.Rotate()]), TypeError, "transforms must be a function"),
        (dict(seeds=0), TypeError, r"seeds must be a list of ints \(seeds=\[0\] .*got 0"),
    ],
)
def test_bad_arguments_are_refused_before_any_training(change, error, match):
    x, y = _images()
    kwargs = dict(trunk=_trunk(), train_data=(x, y), test_data=(x, y), methods=["none", "augnet"], epochs=1,
                  seeds=[0], progress=False)  # fmt: skip
    with pytest.raises(error, match=match):
        compare(**{**kwargs, **change})


def test_images_the_policies_cannot_read_are_refused():
    y = torch.arange(4) % 2
    with pytest.raises(ValueError, match="1 or 3 channels"):
        compare(_trunk(channels=2), (torch.rand(4, 2, 8, 8), y), (torch.rand(4, 2, 8, 8), y), progress=False)
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        compare(_trunk(), (torch.randn(4, 1, 8, 8), y), (torch.rand(4, 1, 8, 8), y), progress=False)
    with pytest.raises(ValueError, match="NaN"):
        compare(_trunk(), (torch.full((4, 1, 8, 8), math.nan), y), (torch.rand(4, 1, 8, 8), y), progress=False)
    signals = (torch.randn(4, 2, 16), y)
    with pytest.raises(ValueError, match=r"need images .* \['none', 'augnet', 'instance'\] .* x.unsqueeze\(1\)"):
        compare(_trunk(), signals, signals, ["augerino"], progress=False)
    with pytest.raises(ValueError, match="signals need transforms="):
        compare(_trunk(), signals, signals, ["augnet"], progress=False)


def test_the_method_list_is_versus_less_the_grid_search():
    from augnet.experiments.versus_methods import METHODS

    assert set(COMPARE_METHODS) == set(METHODS) - {"fixed"}


def test_without_torchvision_the_policies_are_refused_with_the_extra_to_install(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "torchvision.transforms.v2", None)  # what an install without it raises
    x, y = _images()
    with pytest.raises(ImportError, match=r"augnet\[versus\]"):
        compare(_trunk(), (x, y), (x, y), ["none", "randaugment"], epochs=1, seeds=[0], progress=False)
    assert len(compare(_trunk(), (x, y), (x, y), ["none"], epochs=1, seeds=[0], progress=False).records) == 1


def test_inputs_of_another_dtype_than_the_trunk_are_refused_naming_both():
    x, y = _images()
    x = x.double()
    with pytest.raises(ValueError, match=r"inputs are torch.float64 but trunk\(\)'s parameters torch.float32"):
        compare(_trunk(), (x, y), (x, y), ["none"], epochs=1, seeds=[0], progress=False)


def test_a_trunk_with_batch_norm_and_a_last_batch_of_one_is_refused():
    x, y = _images(33)
    trunk = lambda: nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Flatten(), nn.Linear(72, 2))  # noqa: E731
    with pytest.raises(ValueError, match="last batch of every epoch would hold one input"):
        compare(trunk, (x, y), (x, y), ["none"], epochs=1, batch_size=32, seeds=[0], progress=False)
    assert len(compare(trunk, (x, y), (x, y), ["none"], epochs=1, batch_size=11, seeds=[0], progress=False).records)


def test_four_channel_images_without_torchvisions_policies_and_numpy_numbers():
    import numpy as np

    x, y = torch.rand(16, 4, 8, 8), torch.arange(16) % 2
    res = compare(_trunk(channels=4), (x, y), (x, y), ["none", "augnet", "augerino", "instance"],
                  epochs=np.int64(1), batch_size=np.int32(8), seeds=np.arange(1), progress=False)  # fmt: skip
    assert [r["method"] for r in res.records] == ["none", "augnet", "augerino", "instance"]
    with pytest.raises(ValueError, match="1 or 3 channels, got 4"):
        compare(_trunk(channels=4), (x, y), (x, y), ["randaugment"], progress=False)


def test_the_per_instance_layer_on_signals():
    x, y = torch.randn(16, 1, 32), torch.arange(16) % 2
    trunk = lambda: nn.Sequential(nn.Flatten(), nn.Linear(32, 2))  # noqa: E731
    res = compare(trunk, (x, y), (x, y), ["instance"], transforms=lambda: [S.GaussianNoise(), S.SignFlip()], epochs=1,
                  seeds=[0], progress=False)  # fmt: skip
    assert res.records[0]["method"] == "instance"


def test_data_sets_of_pairs_are_read_whole_as_a_user_would_pass_a_torchvision_one():
    from torchvision import datasets
    from torchvision.transforms import v2

    to_tensor = v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])
    train = datasets.FakeData(24, (3, 8, 8), 2, transform=to_tensor)
    test = torch.utils.data.TensorDataset(torch.rand(8, 3, 8, 8), torch.arange(8) % 2)
    res = compare(_trunk(channels=3), train, test, ["none", "augnet"], epochs=1, seeds=[0], progress=False)
    assert len(res.records) == 2
    with pytest.raises(TypeError, match=r"item 0 of the data set must be an .* transform to tensors"):
        compare(_trunk(channels=3), datasets.FakeData(4, (3, 8, 8), 2), test, ["none"], progress=False)
    with pytest.raises(ValueError, match=r"differ in shape, \(3, 8, 8\) \(item 0\) and \(3, 9, 8\) \(item 1\)"):
        compare(_trunk(channels=3), Listed([(torch.rand(3, 8 + i % 2, 8), i % 2) for i in range(4)]), test,
                progress=False)  # fmt: skip

    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter([(torch.rand(3, 8, 8), 0)] * 4)

    with pytest.raises(TypeError, match=r"indexed and has a length.*got Stream"):
        compare(_trunk(channels=3), Stream(), test, ["none"], progress=False)
    with pytest.raises(ValueError, match="the data set is empty"):
        compare(_trunk(channels=3), torch.utils.data.TensorDataset(torch.rand(0, 3), torch.zeros(0)), test,
                progress=False)  # fmt: skip


def test_a_trunk_that_is_one_model_has_nothing_to_train_or_odd_first_parameters():
    x, y = _images()
    net = _trunk()()
    with pytest.raises(ValueError, match="returned the same model twice"):
        compare(lambda: net, (x, y), (x, y), ["none"], progress=False)
    backbone = nn.Sequential(nn.Flatten(), nn.Linear(64, 8))  # built once, outside the factory
    before = [p.clone() for p in backbone.parameters()]
    with pytest.raises(ValueError, match=r"sharing 2 parameters or buffers \(0\.1\.weight, 0\.1\.bias\)"):
        compare(lambda: nn.Sequential(backbone, nn.ReLU(), nn.Linear(8, 2)), (x, y), (x, y), ["none"], progress=False)
    assert all(torch.equal(p, q) for p, q in zip(backbone.parameters(), before))
    mean = torch.full((1, 1, 1, 1), 0.5)  # a constant buffer shared by every model: harmless, taken

    class Centred(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("mean", mean)
            self.net = _trunk()()

        def forward(self, x):
            return self.net(x - self.mean)

    assert len(compare(Centred, (x, y), (x, y), ["none"], epochs=1, seeds=[0], progress=False).records) == 1
    with pytest.raises(ValueError, match="no parameters to train"):
        compare(lambda: nn.Sequential(nn.Flatten(), nn.Linear(64, 2).requires_grad_(False)), (x, y), (x, y),
                ["none"], progress=False)  # fmt: skip

    class Counted(nn.Module):  # an integer parameter first: the dtype is the first floating-point one's
        def __init__(self):
            super().__init__()
            self.calls = nn.Parameter(torch.zeros(1, dtype=torch.long), requires_grad=False)
            self.net = _trunk()()

        def forward(self, xb):
            return self.net(xb)

    assert len(compare(Counted, (x, y), (x, y), ["none"], epochs=1, seeds=[0], progress=False).records) == 1


def test_the_dry_run_leaves_the_random_state_and_the_data_as_they_were():
    class Noisy(nn.Module):  # draws from the global generator and writes into its input
        def __init__(self):
            super().__init__()
            self.net = _trunk()()

        def forward(self, xb):
            xb.mul_(1.0)
            return self.net(xb + 0 * torch.randn_like(xb))

    x, y = _images()
    torch.manual_seed(5)
    expected = torch.rand(2)
    torch.manual_seed(5)
    with pytest.raises(ValueError, match="epochs"):  # refused after the dry run, before any training
        compare(Noisy, (x, y), (x, y), ["none"], epochs=0, progress=False)
    compare(Noisy, (x, y), (x, y), ["none"], epochs=1, seeds=[0], progress=False)
    assert torch.equal(torch.rand(2), expected)


def test_candidates_that_cannot_run_on_the_inputs_and_policies_on_float64_are_refused_first():
    x, y = torch.randn(8, 2, 16), torch.arange(8) % 2
    trunk = lambda: nn.Sequential(nn.Flatten(), nn.Linear(32, 2))  # noqa: E731
    for bad in (lambda: [T.Rotate()], list, lambda: "x"):
        with pytest.raises(ValueError, match=r"transforms\(\) must make AugNet's candidates"):
            compare(trunk, (x, y), (x, y), ["none", "augnet"], transforms=bad, progress=False)
    images = (torch.rand(8, 1, 8, 8, dtype=torch.float64), y)
    with pytest.raises(ValueError, match=r"policies give float32 images, and the inputs are torch\.float64"):
        compare(lambda: _trunk()().double(), images, images, ["none", "crop"], progress=False)


def test_data_set_labels_must_be_integers_and_its_draws_leave_the_callers_state():
    class Drawing(torch.utils.data.Dataset):
        def __init__(self, labels):
            self.labels = labels

        def __len__(self):
            return len(self.labels)

        def __getitem__(self, i):
            return torch.rand(1, 8, 8), self.labels[i]

    x, y = _images(8)
    for labels in ([0.7, 1.9] * 4, [torch.tensor([1, 0])] * 8):
        with pytest.raises(TypeError, match="item 0's label must be an integer class index"):
            compare(_trunk(), Drawing(labels), (x, y), ["none"], progress=False)
    torch.manual_seed(2)
    expected = torch.rand(2)
    torch.manual_seed(2)
    compare(_trunk(), Drawing([torch.tensor(1), 0, np_int(1), 0] * 2), (x, y), ["none"], epochs=1, seeds=[0],
            progress=False)  # fmt: skip
    assert torch.equal(torch.rand(2), expected)


def np_int(v):
    import numpy as np

    return np.int64(v)
