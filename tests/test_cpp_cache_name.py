"""Whether the C++ extension counts as cached names the build that ``load`` makes first: with a GPU, the build
with the CUDA kernels (its own name), so that the "compiling first" line is said exactly when a build is coming."""

from __future__ import annotations

import pytest
import torch

from augnet.ops import _cpp


def _cache_holding(tmp_path, monkeypatch, names):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    monkeypatch.setattr(_cpp, "_PACKAGE", tmp_path / "no-prebuilt")  # no prebuilt _C*.so of an installed wheel
    for name in names:
        path = _cpp.cached_build(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")


@pytest.mark.parametrize("gpu", [False, True])
@pytest.mark.parametrize("cached", [(), ("cpu",), ("cuda",), ("cpu", "cuda")])
def test_the_cache_is_the_build_load_makes_first(tmp_path, monkeypatch, gpu, cached):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpu)
    name = _cpp.extension_name()
    _cache_holding(tmp_path, monkeypatch, [name + ("_cuda" if kind == "cuda" else "") for kind in cached])
    # A GPU machine builds the CUDA kernels first (a minute) whatever CPU build the cache holds; a CPU one, the CPU
    # build only. Before, a GPU machine whose CUDA build was cached said "compiling ... first" at every start.
    assert _cpp.extension_cached() == (("cuda" if gpu else "cpu") in cached)


def test_the_cuda_build_is_looked_for_only_where_load_would_make_it(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(_cpp, "_CSRC", tmp_path / "csrc-without-the-cu-file")
    _cache_holding(tmp_path, monkeypatch, [_cpp.extension_name()])
    assert _cpp.extension_cached()  # no .cu source: load() builds the CPU kernels only, which are cached
