"""The seen/unseen-transformed category protocol (Zaidi et al.): augnet.probes.protocol."""

import itertools
import math

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from augnet.probes.protocol import SeenTransformedDataset, category_accuracy, nested_splits
from augnet.transforms import image as T


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def add_one(x, magnitude, generator=None):
    return x + 1.0


def flip(x, magnitude, generator=None):
    """An exact transform: left-right flip (any magnitude > 0)."""
    return x.flip(-1) if magnitude > 0 else x.clone()


# --------------------------------------------------------------------------- nested_splits


@pytest.mark.parametrize("seed", range(5))
def test_nested_splits_are_nested_and_sized(seed):
    sizes = [0, 3, 7, 7, 12, 20]
    splits = nested_splits(20, sizes, gen(seed))
    assert [len(s) for s in splits] == sizes
    for s in splits:
        assert len(set(s)) == len(s) and set(s) <= set(range(20))
    for small, big in itertools.pairwise(splits):
        assert set(small) <= set(big)


def test_nested_splits_of_given_ids_are_random_and_reproducible():
    ids = [3, 10, 42, 7, 99, 5]
    splits = nested_splits(ids, [2, 4], gen(0))
    assert set(splits[1]) <= set(ids) and set(splits[0]) <= set(splits[1])
    assert nested_splits(ids, [2, 4], gen(0)) == splits
    assert nested_splits(torch.tensor(ids), [2, 4], gen(0)) == splits
    firsts = {tuple(nested_splits(ids, [2], gen(s))[0]) for s in range(30)}
    assert len(firsts) > 5  # the classes are drawn at random, not taken in order


def test_nested_splits_bad_inputs():
    with pytest.raises(ValueError, match="non-decreasing"):
        nested_splits(10, [5, 3])
    with pytest.raises(ValueError, match="size"):
        nested_splits(10, [11])
    with pytest.raises(ValueError, match="size"):
        nested_splits(10, [-1])
    with pytest.raises(ValueError, match="repeat"):
        nested_splits([1, 1, 2], [1])
    with pytest.raises(ValueError, match="sizes"):
        nested_splits(10, [])
    with pytest.raises(TypeError, match="sizes"):
        nested_splits(10, [2.5])
    with pytest.raises(ValueError, match="classes"):
        nested_splits(0, [0])
    with pytest.raises(TypeError, match="class"):
        nested_splits([0.5, 1.5], [1])


# --------------------------------------------------------------------------- SeenTransformedDataset


def label_data(n=3000, classes=10):
    return torch.zeros(n, 1, 2, 2), torch.arange(n) % classes


@pytest.mark.parametrize("p", [0.3, 0.5])
def test_unseen_never_transformed_seen_at_rate_p(p):
    x, y = label_data()
    seen = [0, 1, 2, 3, 4]
    ds = SeenTransformedDataset((x, y), add_one, seen, p=p, seed=1)
    mask = ds.transformed_mask()
    is_seen = y < 5
    assert not bool(mask[~is_seen].any())
    rate = float(mask[is_seen].double().mean())
    assert abs(rate - p) < 0.04  # 1500 draws: sd about 0.012
    # Every seen class is transformed at about the rate, not just their union.
    for c in seen:
        assert abs(float(mask[y == c].double().mean()) - p) < 0.1
    # The items agree with the mask: transformed items are x + 1, the others x.
    for i in range(0, len(ds), 7):
        xi, yi = ds[i]
        assert int(yi) == int(y[i])
        assert torch.equal(xi, x[i] + 1.0 if mask[i] else x[i])


def test_extreme_probabilities_and_empty_seen_set():
    x, y = label_data(200)
    assert torch.equal(SeenTransformedDataset((x, y), add_one, [1, 2], p=1.0).transformed_mask(), (y == 1) | (y == 2))
    assert not bool(SeenTransformedDataset((x, y), add_one, [1, 2], p=0.0).transformed_mask().any())
    assert not bool(SeenTransformedDataset((x, y), add_one, [], p=1.0).transformed_mask().any())


def test_draws_are_deterministic_per_index_and_seed():
    x = torch.rand(300, 1, 8, 8, generator=gen(0))
    y = torch.arange(300) % 3
    rot = T.Rotate()
    ds = SeenTransformedDataset((x, y), rot, [0, 1], p=0.5, magnitude=1.0, seed=5, return_flag=True)
    mask = ds.transformed_mask()
    again = SeenTransformedDataset((x, y), rot, [0, 1], p=0.5, magnitude=1.0, seed=5)
    assert torch.equal(again.transformed_mask(), mask)
    for i in [0, 1, 4, 10, 299]:
        a, b = ds[i], again[i]
        assert torch.equal(a[0], b[0]) and torch.equal(ds[i][0], a[0])
        assert a[2] == bool(mask[i])
        assert torch.equal(a[0], x[i]) != bool(mask[i])  # a rotation by a random angle changes the image
    other = SeenTransformedDataset((x, y), rot, [0, 1], p=0.5, seed=6).transformed_mask()
    assert not torch.equal(other, mask)
    ds.set_epoch(1)
    assert not torch.equal(ds.transformed_mask(), mask)
    ds.set_epoch(0)
    assert torch.equal(ds.transformed_mask(), mask)
    assert torch.equal(x, torch.rand(300, 1, 8, 8, generator=gen(0)))  # the data are not modified


def test_wraps_a_dataset_and_passes_extras_through():
    x, y = label_data(50, classes=5)
    idx = torch.arange(50)
    ds = SeenTransformedDataset(TensorDataset(x, y, idx), add_one, [2], p=1.0, return_flag=True)
    assert len(ds) == 50
    xi, yi, ii, flag = ds[7]  # label 2
    assert int(yi) == 2 and int(ii) == 7 and flag is True and torch.equal(xi, x[7] + 1)
    xi, yi, ii, flag = ds[-1]  # label 4
    assert int(yi) == 4 and int(ii) == 49 and flag is False and torch.equal(xi, x[49])
    # The tensor form draws the same thing.
    assert torch.equal(SeenTransformedDataset((x, y), add_one, [2], p=1.0).transformed_mask(), ds.transformed_mask())


def test_dataset_bad_inputs():
    x, y = label_data(20)
    with pytest.raises(ValueError, match="p must"):
        SeenTransformedDataset((x, y), add_one, [0], p=1.5)
    with pytest.raises(TypeError, match="seen_classes"):
        SeenTransformedDataset((x, y), add_one, [0.5])
    with pytest.raises(ValueError, match="same length"):
        SeenTransformedDataset((x, y[:5]), add_one, [0])
    with pytest.raises(ValueError, match="integer"):
        SeenTransformedDataset((x, y.float()), add_one, [0])
    with pytest.raises(TypeError, match="callable"):
        SeenTransformedDataset((x, y), "rotate", [0])
    with pytest.raises(ValueError, match="magnitude"):
        SeenTransformedDataset((x, y), add_one, [0], magnitude=2.0)
    with pytest.raises(ValueError, match="mixes samples"):
        SeenTransformedDataset((x, y), T.SamplePairing(), [0])
    with pytest.raises(TypeError, match="data"):
        SeenTransformedDataset(42, add_one, [0])
    ds = SeenTransformedDataset((x, y), add_one, [0])
    with pytest.raises(IndexError):
        ds[20]
    with pytest.raises(ValueError, match="epoch"):
        ds.set_epoch(-1)


# --------------------------------------------------------------------------- category_accuracy


class FlipInvariant(nn.Module):
    """Logits of x + flip(x): exactly invariant to a left-right flip."""

    def __init__(self, classes=4, size=4):
        super().__init__()
        self.head = nn.Linear(size * size, classes)

    def forward(self, x):
        return self.head((x + x.flip(-1)).flatten(1))


class SeenOnlyRobust(nn.Module):
    """Reads the class from the middle columns and a flip from a marker in the left column; on a flipped
    image of a class outside ``seen`` it answers the next class (robust within, not across categories)."""

    def __init__(self, seen, classes=4):
        super().__init__()
        self.seen, self.classes = seen, classes

    def forward(self, x):
        c = torch.round((x[..., 1:3].mean((1, 2, 3)) - 0.1) / 0.2).long()
        flipped = x[..., 0].mean((1, 2)) < x[..., -1].mean((1, 2))
        unseen = torch.tensor([int(k) not in self.seen for k in c])
        pred = torch.where(flipped & unseen, (c + 1) % self.classes, c)
        return nn.functional.one_hot(pred, self.classes).float()


def marker_images(n=80, classes=4):
    y = torch.arange(n) % classes
    x = (0.1 + 0.2 * y.float())[:, None, None, None].expand(n, 1, 4, 4).clone()
    x[..., 0] += 1.0  # the marker, left
    return x, y


def test_exactly_invariant_model_equal_within_and_across():
    model = FlipInvariant().eval()
    x = torch.rand(60, 1, 4, 4, generator=gen(1))
    y = model(x).argmax(1)  # labels the model gets right on clean inputs
    out = category_accuracy(model, x, y, flip, seen_classes=[0, 1])
    assert out["clean"] == out["within"] == out["across"] == out["transformed"] == 1.0
    # With arbitrary labels an exactly invariant model is exactly as right on T(x) as on x, per sample.
    y = torch.randint(0, 4, (60,), generator=gen(2))
    out = category_accuracy(model, x, y, flip, seen_classes=[0, 1])
    assert torch.equal(out["correct_transformed"], out["correct_clean"])
    assert out["within"] == out["clean_seen"] and out["across"] == out["clean_unseen"]
    assert out["seen"].tolist() == [int(c) in (0, 1) for c in y]
    assert out["n_seen"] == int((y < 2).sum()) and out["n_seen"] + out["n_unseen"] == 60


def test_within_versus_across_separates_the_groups():
    seen = [0, 2]
    x, y = marker_images()
    out = category_accuracy(SeenOnlyRobust(seen), x, y, flip, seen_classes=seen)
    assert out["clean"] == 1.0
    assert out["within"] == 1.0 and out["across"] == 0.0
    assert out["transformed"] == pytest.approx(0.5)
    # A model robust on the other classes only: the groups swap.
    unseen = [1, 3]
    out = category_accuracy(SeenOnlyRobust(unseen), x, y, flip, seen_classes=seen)
    assert out["clean"] == 1.0 and out["within"] == 0.0 and out["across"] == 1.0
    # magnitude 0 is the identity: no gap.
    out0 = category_accuracy(SeenOnlyRobust(seen), x, y, flip, seen_classes=seen, magnitude=0.0)
    assert out0["within"] == out0["across"] == 1.0


def test_category_accuracy_empty_group_is_nan_and_augnet_transform_runs():
    model = FlipInvariant().eval()
    x = torch.rand(16, 1, 4, 4, generator=gen(0))
    y = torch.randint(0, 4, (16,), generator=gen(1))
    out = category_accuracy(model, x, y, T.Rotate(), seen_classes=[0, 1, 2, 3], magnitude=0.5, batch_size=5)
    assert math.isnan(out["across"]) and out["n_unseen"] == 0 and not math.isnan(out["within"])
    again = category_accuracy(model, x, y, T.Rotate(), seen_classes=[0, 1, 2, 3], magnitude=0.5)
    assert torch.equal(again["correct_transformed"], out["correct_transformed"])  # seeded, batch-size free


def test_category_accuracy_bad_inputs():
    model = FlipInvariant().eval()
    x = torch.rand(8, 1, 4, 4)
    y = torch.randint(0, 4, (8,))
    with pytest.raises(ValueError, match="same length"):
        category_accuracy(model, x, y[:3], flip, [0])
    with pytest.raises(TypeError, match="integer"):
        category_accuracy(model, x, y.bool(), flip, [0])
    with pytest.raises(ValueError, match="empty"):
        category_accuracy(model, x[:0], y[:0], flip, [0])
    with pytest.raises(TypeError, match="callable"):
        category_accuracy(model, x, y, None, [0])
    with pytest.raises(ValueError, match="magnitude"):
        category_accuracy(model, x, y, flip, [0], magnitude=-0.5)
    with pytest.raises(TypeError, match="seen_classes"):
        category_accuracy(model, x, y, flip, "abc")
    with pytest.raises(ValueError, match="shape"):
        category_accuracy(model, x, y, lambda b, m, generator=None: b[:, :, :2], [0])


def test_category_accuracy_draws_the_transform_from_seed_plus_one_as_documented():
    # The docstring said ``seed`` while the code used ``seed + 1``; they now say the same thing.
    doc = " ".join(category_accuracy.__doc__.split())
    assert "seeded with ``seed + 1``" in doc and "transform's parameters from ``seed + 1``" in doc
    draws = []

    def spy(b, m, generator=None):
        draws.append(torch.randint(0, 2**62, (1,), generator=generator).item())
        return b

    model = FlipInvariant().eval()
    x, y = torch.rand(8, 1, 4, 4, generator=gen(0)), torch.arange(8) % 4
    category_accuracy(model, x, y, spy, seen_classes=[0], seed=7)
    assert draws == [torch.randint(0, 2**62, (1,), generator=gen(8)).item()]
