"""Defects the last round left open: a saturation the magnitudes' dtype cannot hold, EquivarianceLoss on features
of another dtype than its maps, summarise on run records missing fields, a Ctrl-C while ``python -m augnet``
loads its command line, and PolicyLogger's size read as the layers read one."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import torch
from torch import nn

import augnet
from augnet.experiments import versus as V
from augnet.layers import AugmentationLayer
from augnet.losses import EquivarianceLoss
from augnet.policy import check_size
from augnet.regularizers import saturate, selective_regularizer
from augnet.training import PolicyLogger
from augnet.transforms import image as T

#: The folder holding the ``augnet`` under test (the tree a subprocess must import).
SOURCE = Path(augnet.__file__).resolve().parents[1]


def _layer(dtype: torch.dtype) -> AugmentationLayer:
    return AugmentationLayer([T.Rotate(), T.TranslateX()], init_magnitude=[0.3, 0.4]).to(dtype)


# ------------------------------------------------------------------------------ selective_regularizer's saturation


@pytest.mark.parametrize(
    ("dtype", "saturation"),
    [
        (torch.float32, 1e-40),  # subnormal in float32: mu / saturation overflowed, the value was NaN
        (torch.float32, 1e-320),
        (torch.float64, 1e-320),  # subnormal in float64 too
        (torch.float64, 1e-310),
        (torch.float32, 1e39),  # past float32's largest: held as infinity, the value was NaN
    ],
)
def test_a_saturation_the_magnitudes_dtype_cannot_hold_is_refused_not_nan(dtype, saturation):
    layer = _layer(dtype)
    before = {k: v.clone() for k, v in layer.state_dict().items()}
    with pytest.raises(ValueError, match=rf"saturation must be [<>]= .*{dtype}, got {re.escape(repr(saturation))}"):
        selective_regularizer(layer, saturation=saturation)
    with pytest.raises(ValueError, match="saturation must be"):
        saturate(layer.magnitudes, saturation)
    assert all(torch.equal(before[k], v) for k, v in layer.state_dict().items())


@pytest.mark.parametrize("saturation", [0.0, -0.5, float("nan")])
def test_saturate_refuses_a_saturation_that_is_not_positive(saturation):
    with pytest.raises(ValueError, match="saturation must be >="):  # 0 * log1p(inf) was NaN, and so on
        saturate(torch.tensor([0.3, 0.4]), saturation)


@pytest.mark.parametrize(
    ("dtype", "saturation"),
    [(torch.float32, 0.5), (torch.float32, 1e-3), (torch.float32, 1e-30), (torch.float32, 1e38),
     (torch.float64, 0.5), (torch.float64, 1e-30), (torch.float64, 1e-300), (torch.float64, 1e300),
     (torch.float32, torch.finfo(torch.float32).tiny), (torch.float64, torch.finfo(torch.float64).tiny)],
)  # fmt: skip
def test_a_saturation_the_dtype_holds_gives_the_formula_bit_for_bit(dtype, saturation):
    layer = _layer(dtype)
    w, mu = layer.weights, layer.magnitudes
    v = w * (saturation * torch.log1p(mu / saturation)) * layer.effect.to(w)
    expected = -torch.stack([torch.linalg.vector_norm(v)]).sum(0)
    got = selective_regularizer(layer, saturation=saturation)
    assert torch.isfinite(got) and torch.equal(got, expected)


# ------------------------------------------------------------------------------ EquivarianceLoss's dtypes


@pytest.mark.parametrize(("features", "maps"), [(torch.float64, torch.float32), (torch.float32, torch.float64)])
def test_equivariance_loss_names_both_dtypes_for_features_of_another_dtype_than_its_maps(features, maps):
    gen = torch.Generator().manual_seed(0)
    z, z_t = torch.randn(4, 8, generator=gen, dtype=features), torch.randn(2, 4, 8, generator=gen, dtype=features)
    y, head = torch.tensor([0, 2, 1, 0]), nn.Linear(8, 3).to(features)
    loss = EquivarianceLoss(8, num_transforms=2).to(maps)
    with pytest.raises(TypeError, match=rf"z_t\[0\] has dtype {features} .* parameters of dtype {maps}"):
        loss(z, z_t, y, head)
    assert torch.isfinite(loss.to(features)(z, z_t, y, head))  # the cast the message suggests


def test_equivariance_loss_without_its_maps_still_takes_features_of_another_dtype():
    z, z_t, y = torch.randn(4, 8, dtype=torch.float64), torch.randn(1, 4, 8, dtype=torch.float64), torch.tensor([0] * 4)
    head = nn.Linear(8, 3).double()
    clean = EquivarianceLoss(8, transformed_weight=0.0)(z, z_t, y, head)  # the maps do not run: as before
    assert torch.equal(clean, nn.functional.cross_entropy(head(z), y))


def test_equivariance_loss_of_matching_dtypes_is_unchanged():
    gen = torch.Generator().manual_seed(1)
    z, z_t, y = torch.randn(4, 8, generator=gen), torch.randn(2, 4, 8, generator=gen), torch.tensor([0, 2, 1, 0])
    head, loss = nn.Linear(8, 3), EquivarianceLoss(8, num_transforms=2)
    m = [loss.map(j, z_t[j]) for j in range(2)]
    ce = torch.stack([nn.functional.cross_entropy(head(mj), y) for mj in m]).mean()
    eq = torch.stack([(mj - z).square().mean(1).mean() for mj in m]).mean()
    inv = torch.stack([(z_t[j] - z).square().mean(1).mean() for j in range(2)]).mean()
    expected = nn.functional.cross_entropy(head(z), y) + 0.3 * (ce + 50.0 * eq + 25.0 * inv)
    assert torch.equal(loss(z, z_t, y, head), expected)


# ------------------------------------------------------------------------------ versus.summarise


def _run(seed: int = 5, *drop: str) -> dict:
    record = {"key": V.job_key(("run", "digits", "small", "none", seed)), "kind": "run", "task": "digits",
              "regime": "small", "method": "none", "seed": seed, "accuracy": 0.5, "train_cpu_seconds": 2.0}  # fmt: skip
    return {k: v for k, v in record.items() if k not in drop}


@pytest.mark.parametrize("missing", ["task", "regime", "method", "seed", "kind"])
def test_summarise_leaves_out_a_run_record_missing_a_field_with_a_warning_naming_it(missing):
    whole, torn = _run(5), _run(6, missing)
    torn["key"] = "hand-edited"
    with pytest.warns(UserWarning, match=rf"'hand-edited' \(no {missing}\)"):
        summary = V.summarise({r["key"]: r for r in (whole, torn)}, range(5, 10))
    assert summary == V.summarise({whole["key"]: whole}, range(5, 10))  # as if the line were not there


def test_summarise_warns_of_nothing_for_the_grid_and_other_seeds():
    grid = {"key": "g", "kind": "grid", "fixed": [0, 0.1]}  # the grid's records are not summarise's
    other = _run(0, "task")  # another seed's: not read
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        summary = V.summarise({"g": grid, "o": other, "w": _run(5)}, range(5, 10))
    assert summary == {"digits": {"small": {"none": {"accuracy": [0.5, 0.0, 1], "train_cpu_seconds": [2.0, 0.0, 1]}}}}


def test_summarise_of_records_read_back_from_a_hand_edited_runs_file(tmp_path):
    path = tmp_path / "runs.jsonl"
    lines = [json.dumps(_run(5)), json.dumps({**_run(6, "method"), "key": "older"}), "{torn"]
    path.write_text("\n".join(lines))
    with pytest.warns(UserWarning, match=r"'older' \(no method\)"):
        summary = V.summarise(V.read_runs(path), range(5, 10))
    assert summary["digits"]["small"]["none"]["accuracy"] == [0.5, 0.0, 1]


# ------------------------------------------------------------------------------ python -m augnet and Ctrl-C

#: A ``sitecustomize`` that makes importing the module named in AUGNET_TEST_CTRL_C raise KeyboardInterrupt: a
#: Ctrl-C pressed while it imports, at a known point rather than after a guessed delay.
CTRL_C_ON_IMPORT = textwrap.dedent(
    """
    import os
    import sys

    class CtrlC:
        def find_spec(self, name, path=None, target=None):
            if name == os.environ["AUGNET_TEST_CTRL_C"]:
                raise KeyboardInterrupt
            return None

    sys.meta_path.insert(0, CtrlC())
    """
)


def _python_m_augnet(tmp_path: Path, ctrl_c_on: str) -> subprocess.CompletedProcess:
    (tmp_path / "sitecustomize.py").write_text(CTRL_C_ON_IMPORT)
    env = {**os.environ, "AUGNET_TEST_CTRL_C": ctrl_c_on, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(SOURCE)])}  # fmt: skip
    return subprocess.run([sys.executable, "-m", "augnet", "--version"], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=300)  # fmt: skip


SIGINT_END = -signal.SIGINT if os.name == "posix" else 0xC000013A  # as augnet.cli.run ends an interrupted command


def test_python_m_augnet_ctrl_c_while_the_command_line_loads_is_one_line(tmp_path):
    done = _python_m_augnet(tmp_path, "augnet.cli")
    assert done.stderr == "\naugnet: interrupted\n"  # was the import's traceback
    assert done.returncode == SIGINT_END


def test_python_m_augnet_ctrl_c_while_torch_imports_is_one_line(tmp_path):
    done = _python_m_augnet(tmp_path, "torch")
    assert done.stderr == "\naugnet: interrupted\n" and done.returncode == SIGINT_END


def test_python_m_augnet_runs_the_command_line(tmp_path):
    done = _python_m_augnet(tmp_path, "no-such-module")
    assert done.returncode == 0 and done.stdout.startswith("augnet ") and done.stderr == ""


# ------------------------------------------------------------------------------ PolicyLogger's size


@pytest.mark.parametrize(
    "size",
    [(8.5, 8), (True, 8), ("8", 8), 8, torch.tensor([8.0, 8.0]), torch.ones(2, 2, dtype=torch.int64), (0, 8), (),
     (-1,)],
)  # fmt: skip
def test_policy_logger_refuses_a_size_as_the_layers_policy_refuses_it(tmp_path, size):
    with pytest.raises((TypeError, ValueError)) as by_policy:
        check_size(size)  # what layer.policy(size) raises, at every row the logger writes
    with pytest.raises(type(by_policy.value)) as by_logger:
        PolicyLogger(tmp_path / "never", size=size)
    assert str(by_logger.value) == str(by_policy.value)
    assert isinstance(by_logger.value, ValueError)  # what the logger raised before, for code that catches it
    assert not (tmp_path / "never").exists()


@pytest.mark.parametrize(
    ("size", "kept"),
    [((32, 32), (32, 32)), ([8, 6], (8, 6)), ((torch.tensor(8), 4), (8, 4)), (torch.tensor([8, 8]), (8, 8)),
     (torch.Size([5, 7]), (5, 7)), ((16,), (16,)), (None, None)],
)  # fmt: skip
def test_policy_logger_keeps_the_sizes_it_took(tmp_path, size, kept):
    logger = PolicyLogger(tmp_path / "never", size=size)
    assert logger.size == kept and (kept is None or all(type(s) is int for s in logger.size))
