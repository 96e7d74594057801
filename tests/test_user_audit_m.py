"""User audit M: ``augnet probe --by-class`` given a file that is no labels file; augnet.bench's table formatters
given malformed or read-back results; ``python -m augnet.bench.gpu_model`` without runpy's RuntimeWarning."""

import copy
import json
import os
import pickle
import subprocess
import sys
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import augnet
from augnet.bench import format_inference, format_on_paper, format_table, on_paper
from augnet.cli import main


class TinyNet(nn.Sequential):
    """A small model the command line imports as ``test_user_audit_m:TinyNet``."""

    def __init__(self):
        torch.manual_seed(0)
        super().__init__(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(4, 2))  # fmt: skip


def _probe(tmp_path, labels, capsys) -> tuple[int, str]:
    argv = ["probe", "--model", "test_user_audit_m:TinyNet", "--fake", "--n", "16", "--size", "8", "--transforms",
            "Rotate", "--magnitudes", "1", "--no-lie", "--layers", "logits", "--no-progress", "--by-class",
            str(labels), "--out", str(tmp_path / "out")]  # fmt: skip
    code = main(argv)
    return code, capsys.readouterr().err


def _write(tmp_path: Path, kind: str) -> Path:
    """A file of ``kind`` that is no labels file augnet probe reads."""
    if kind == "text not named .txt":
        path = tmp_path / "labels.dat"
        path.write_text("\n".join(str(i % 2) for i in range(16)) + "\n")
    elif kind == "notes":
        path = tmp_path / "notes.md"
        path.write_text("# my labels\nsee the spreadsheet\n")
    elif kind == "numpy in torch.save":
        path = tmp_path / "labels.pt"
        torch.save(np.arange(16) % 2, path)
    elif kind == "torch.save, pickle protocol 4":
        path = tmp_path / "labels.pt"
        torch.save(torch.arange(16) % 2, path, pickle_protocol=4)
    elif kind == "pickle":
        path = tmp_path / "labels.pkl"
        path.write_bytes(pickle.dumps(list(range(16))))
    elif kind == "zip":
        path = tmp_path / "labels.zip"
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("labels.txt", "0\n1\n")
    else:
        path = tmp_path / "labels.bin"
        path.write_bytes(bytes(range(256)) * 4)
    return path


@pytest.mark.parametrize(
    "kind",
    [
        "text not named .txt",
        "notes",
        "numpy in torch.save",
        "torch.save, pickle protocol 4",
        "pickle",
        "zip",
        "binary",
    ],
)
def test_by_class_of_a_file_that_is_no_labels_file_is_one_usage_line_naming_the_formats(tmp_path, capsys, kind):
    path = _write(tmp_path, kind)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code, err = _probe(tmp_path, path, capsys)
    assert not [w for w in caught if "pickle" in str(w.message)]  # torch's, while failing to read it: not shown
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"augnet probe: error: --by-class {path} ")
    assert ".txt or .csv" in err and "torch.save" in err  # the formats read
    assert "weights_only" not in err  # not torch's advice to load a file of unknown origin with weights_only=False
    if kind in ("text not named .txt", "notes"):
        assert "read as text only when named .txt or .csv" in err
    if "torch.save" in kind:
        assert "is a torch.save file holding more than tensors" in err and "torch.as_tensor(y)" in err
    assert not (tmp_path / "out").exists()


def test_by_class_refusals_that_were_already_one_line_stay_so(tmp_path, capsys):
    """(Passes on the old code too: the refusals beside the mended ones, unchanged.)"""
    (tmp_path / "folder").mkdir()
    (tmp_path / "empty.pt").write_bytes(b"")
    (tmp_path / "empty.txt").write_text("")
    torch.save(torch.arange(5), tmp_path / "short.pt")
    torch.save(torch.zeros(16, 3), tmp_path / "onehot.pt")
    for name, said in [("missing.txt", "is neither 'data' nor a file"), ("folder", "is neither 'data' nor a file"),
                       ("empty.pt", "is an empty file"), ("empty.txt", "holds 0 labels for 16 images"),
                       ("short.pt", "holds 5 labels for 16 images"), ("onehot.pt", "argmax(1)")]:  # fmt: skip
        code, err = _probe(tmp_path, tmp_path / name, capsys)
        assert code == 2 and err.count("\n") == 1 and err.startswith(f"augnet probe: error: --by-class {tmp_path}")
        assert said in err, err
    torch.save(torch.arange(16) % 2, tmp_path / "labels.pt")
    assert _probe(tmp_path, tmp_path / "labels.pt", capsys)[0] == 0


# ------------------------------------------------------------------------------------------- the bench tables


def _bench_result() -> dict:
    record = dict(provider="eager", size=32, mode="forward", median_ms=10.25, images_per_s=24849.3, peak_mib=37.1,
                  speedup_vs_eager=1.0, speedup_vs_reference=1.46)  # fmt: skip
    other = record | dict(provider="reference", mode="forward+backward", median_ms=float("nan"),
                          speedup_vs_eager=None, speedup_vs_reference=float("inf"))  # fmt: skip
    return {"records": [record, other]}


def _inference_result() -> dict:
    record = dict(copies=4, augnet_ms=611.07, ratio=1.156, trunk_rows_ratio=float("inf"), overhead=0.0069)
    return {"trunk": "ResNet-18 (width 8), 32x32, batch 2", "trunk_ms": 132.13, "records": [record]}


def _read_back(value):
    """``value`` saved as augnet saves results (strict JSON: NaN as null, infinities as "inf") and read back."""
    from augnet._json import dumps

    return json.loads(dumps(value))


@pytest.mark.parametrize(
    ("fn", "make", "drop", "source"),
    [
        (format_table, _bench_result, ("records", 1, "peak_mib"), "run_benchmark"),
        (format_table, _bench_result, ("records",), "run_benchmark"),
        (format_inference, _inference_result, ("records", 0, "overhead"), "inference_cost"),
        (format_inference, _inference_result, ("trunk_ms",), "inference_cost"),
        (format_on_paper, lambda: on_paper("h100"), (3, "time_l2_holds_s"), "on_paper"),
        (format_on_paper, lambda: on_paper("h100"), (5, "occupancy", 0, "waves"), "on_paper"),
    ],
)
def test_a_missing_key_is_a_value_error_naming_it_and_what_the_function_formats(fn, make, drop, source):
    value = make()
    given = copy.deepcopy(value)
    holder = value
    for step in drop[:-1]:
        holder = holder[step]
    del holder[drop[-1]]
    kept = copy.deepcopy(value)
    with pytest.raises(ValueError, match=rf"^{fn.__name__}: .*has no '{drop[-1]}' key; {fn.__name__} formats the "
                                         rf"(result|rows) of {source}"):  # fmt: skip
        fn(value)
    assert value == kept and given != kept  # nothing changed in place


def test_what_is_no_result_is_a_type_error_naming_it():
    with pytest.raises(TypeError, match=r"^format_table: result must be a dict \(the result of run_benchmark"):
        format_table(_bench_result()["records"])
    with pytest.raises(TypeError, match=r"^format_inference: result\['records'\] must be a list of dicts"):
        format_inference(_inference_result() | {"records": "none"})
    with pytest.raises(TypeError, match=r"^format_on_paper: rows must be a list .* --json file: pass its 'rows'"):
        format_on_paper({"model": "h100", "rows": on_paper("h100")})
    bad = _bench_result()
    bad["records"][0]["median_ms"] = "fast"
    with pytest.raises(TypeError, match=r"^format_table: result\['records'\]\[0\]\['median_ms'\] must be a number"):
        format_table(bad)


def test_results_read_back_from_their_saved_json_give_the_same_tables():
    result, cost, rows = _bench_result(), _inference_result(), on_paper("h100")
    rows[0]["occupancy"][0]["waves"] = float("inf")  # a kernel that fits no SM: saved as "inf" by --json
    assert format_table(_read_back(result)) == format_table(result)
    assert "nan" in format_table(result) and "infx" in format_table(result)
    assert format_inference(_read_back(cost)) == format_inference(cost)
    assert format_on_paper(_read_back({"rows": rows})["rows"]) == format_on_paper(rows)
    assert " / inf |" in format_on_paper(rows)


# ------------------------------------------------------------------------------------------ gpu_model as a script


def _python(*args: str) -> subprocess.CompletedProcess:
    root = str(Path(augnet.__file__).resolve().parents[1])  # the augnet under test
    env = dict(os.environ, PYTHONPATH=root, OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300, cwd=root, env=env)


def test_python_m_gpu_model_runs_without_runpys_warning():
    done = _python("-W", "error::RuntimeWarning", "-m", "augnet.bench.gpu_model", "--help")
    assert done.returncode == 0 and "RuntimeWarning" not in done.stderr, done.stderr
    assert "--model" in done.stdout and done.stderr == ""


def test_on_paper_is_read_from_gpu_model_on_first_use_and_stays_a_name_of_augnet_bench():
    code = (
        "import sys, augnet.bench as b\n"
        "assert 'augnet.bench.gpu_model' not in sys.modules\n"
        "assert {'on_paper', 'format_on_paper'} <= set(dir(b)) and {'on_paper', 'format_on_paper'} <= set(b.__all__)\n"
        "from augnet.bench import format_on_paper, on_paper\n"
        "from augnet.bench import gpu_model\n"
        "assert on_paper is gpu_model.on_paper is b.on_paper and format_on_paper is gpu_model.format_on_paper\n"
        "try:\n    b.no_such_name\nexcept AttributeError as err:\n    assert 'no_such_name' in str(err)\n"
        "else:\n    raise SystemExit('no AttributeError')\n"
    )
    done = _python("-c", code)
    assert done.returncode == 0, done.stderr
