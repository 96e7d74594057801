"""A trunk that ends in nn.Softmax, with a softmax aggregate: AugNet warns (it read the probabilities as logits
without a word, and every prediction came out flattened towards uniform)."""

import warnings

import pytest
import torch
from helpers import gen
from torch import nn

import augnet
from augnet.transforms import image as T


def _layer():
    return augnet.AugmentationLayer([T.Rotate(), T.TranslateX()], init_magnitude=0.0)


def _body():
    torch.manual_seed(0)
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 5))


@pytest.mark.parametrize("aggregate", ["log_softmax", "softmax"])
def test_a_trunk_ending_in_softmax_warns_naming_it_at_the_users_line(aggregate):
    trunk = nn.Sequential(_body(), nn.Sequential(nn.Identity(), nn.Softmax(dim=1)))
    with pytest.warns(UserWarning, match=r"ends in nn\.Softmax \(1\.1\): aggregate='[a-z_]+' reads its") as seen:
        model = augnet.AugNet(trunk, _layer(), aggregate=aggregate)
    assert seen[0].filename == __file__  # the user's line, not augnet's
    assert model.trunk is trunk and model.aggregation == aggregate  # a warning only: the model is built as asked
    with pytest.warns(UserWarning, match=r"ends in nn\.Softmax \(the trunk itself\)"):
        augnet.AugNet(nn.Softmax(dim=1), _layer())


def test_augerino_warns_at_the_users_line_too():
    with pytest.warns(UserWarning, match=r"ends in nn\.Softmax \(2\)") as seen:
        augnet.Augerino(nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 5), nn.Softmax(1)))
    assert seen[0].filename == __file__


@pytest.mark.parametrize(
    "trunk, aggregate",
    [
        (nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 5), nn.Softmax(1)), "mean"),  # a mean of probabilities
        (nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 5), nn.LogSoftmax(1)), "log_softmax"),
        (nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 5)), "softmax"),
        (nn.Sequential(nn.Softmax(1), nn.Flatten(), nn.Linear(3 * 8 * 8, 5)), "log_softmax"),  # not at the end
        (nn.Sequential(), "log_softmax"),
    ],
)
def test_no_warning_where_the_outputs_are_what_the_aggregate_takes(trunk, aggregate):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        augnet.AugNet(trunk, _layer(), aggregate=aggregate)


def test_why_log_softmax_is_harmless_and_softmax_is_not():
    # At magnitude 0 every copy is the input itself, so the aggregate is the log-softmax of one trunk output.
    body, x = _body(), torch.rand(4, 3, 8, 8, generator=gen(0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain, logsm, sm = (
            augnet.AugNet(trunk, _layer()).eval()
            for trunk in (body, nn.Sequential(body, nn.LogSoftmax(1)), nn.Sequential(body, nn.Softmax(1)))
        )
    with torch.no_grad():
        ref = plain(x, generator=gen(1))
        torch.testing.assert_close(logsm(x, generator=gen(1)), ref)
        flat = sm(x, generator=gen(1))

    def entropy(logp):
        return -(logp.exp() * logp).sum(1)

    assert bool((entropy(flat) > entropy(ref)).all())  # what the warning says: flattened towards uniform
