"""The C++ build's cache name includes the ninja that torch runs: a virtual environment's ninja and the system's
hash build commands differently, so sharing one build folder made each rebuild the other's (40-100 s a process)."""

from __future__ import annotations

from augnet.ops import _cpp


def test_another_ninja_on_path_is_another_build(monkeypatch, tmp_path):
    venv, system = tmp_path / "venv" / "ninja", tmp_path / "usr" / "ninja"
    for path in (venv, system):
        path.parent.mkdir()
        path.write_text("")
    monkeypatch.setattr(_cpp.shutil, "which", lambda name, *a, **k: str(venv) if name == "ninja" else None)
    first = _cpp._source_tag(["-O3"])
    assert _cpp._source_tag(["-O3"]) == first  # the same ninja: the same build
    monkeypatch.setattr(_cpp.shutil, "which", lambda name, *a, **k: str(system) if name == "ninja" else None)
    assert _cpp._source_tag(["-O3"]) != first
    monkeypatch.setattr(_cpp.shutil, "which", lambda name, *a, **k: None)  # none: a name of its own (no build runs)
    assert _cpp._source_tag(["-O3"]) not in (first,)


def test_a_link_to_the_same_ninja_is_the_same_build(monkeypatch, tmp_path):
    real = tmp_path / "ninja"
    real.write_text("")
    link = tmp_path / "bin-ninja"
    link.symlink_to(real)
    monkeypatch.setattr(_cpp.shutil, "which", lambda name, *a, **k: str(real))
    first = _cpp._source_tag(["-O3"])
    monkeypatch.setattr(_cpp.shutil, "which", lambda name, *a, **k: str(link))
    assert _cpp._source_tag(["-O3"]) == first
