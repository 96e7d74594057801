"""The documentation site (docs/): every public name has a reference entry, every README section has a guide
page, the catalogue draws every transform, and every python block of the README and the guide runs.

The site's build itself (``python -m sphinx -W ...``, run by .ci/run) checks the rest: references, docstrings,
the examples. These tests need no Sphinx.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import io
import re
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS / "scripts"))

import readme_sections  # noqa: E402  (docs/scripts)

#: The modules whose every exported name (``__all__``) must have an entry in the API reference.
PUBLIC_MODULES = (
    "augnet",
    "augnet.transforms",
    "augnet.transforms.image",
    "augnet.transforms.signal",
    "augnet.transforms.audio",
    "augnet.probes",
    "augnet.experiments.comparison",
    "augnet.instance",
    "augnet.instance_policy",
    "augnet.ops",
    "augnet.training",
    "augnet.policy",
    "augnet.export",
    "augnet.presets",
    "augnet.data",
    "augnet.viz",
)

_DIRECTIVE = re.compile(r"^\.\. (?:auto|py:)(?:class|function|data|exception|attribute)::\s+([\w.]+)", re.M)
_MODULE = re.compile(r"^\.\. (?:automodule|currentmodule|module)::\s+([\w.]+)", re.M)


def documented_names(text: str) -> set[str]:
    """Full names (``module.Name``) that an rST page gives an entry, resolved against its current module."""
    names, module = set(), None
    for match in re.finditer(f"{_DIRECTIVE.pattern}|{_MODULE.pattern}", text, re.M):
        if match.group(2):
            module = match.group(2)
        else:
            name = match.group(1)
            names.add(name if module is None or name.startswith(f"{module}.") else f"{module}.{name}")
    return names


def missing_entries(modules, text: str) -> list[str]:
    """``module.name`` for every name in a module's ``__all__`` (submodules aside) without an entry in ``text``."""
    names = documented_names(text)
    missing = []
    for module_name in modules:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            if inspect.ismodule(getattr(module, name)):
                continue
            if f"{module_name}.{name}" not in names:
                missing.append(f"{module_name}.{name}")
    return missing


def api_text() -> str:
    return "\n".join(p.read_text() for p in sorted((DOCS / "api").glob("*.rst")))


def test_every_exported_name_has_an_entry_in_the_api_reference():
    missing = missing_entries(PUBLIC_MODULES, api_text())
    assert not missing, f"exported but not in docs/api/*.rst: {missing}"


def test_the_coverage_check_finds_a_name_left_out():
    text = api_text()
    assert ".. autofunction:: similarity_search" in text
    assert missing_entries(["augnet.probes"], text.replace(".. autofunction:: similarity_search", "")) == [
        "augnet.probes.similarity_search"
    ]


def test_every_entry_of_the_api_reference_names_a_real_object():
    for full in sorted(documented_names(api_text())):
        module_name, _, name = full.rpartition(".")
        module = importlib.import_module(module_name)
        assert hasattr(module, name), f"docs/api names {full}, which does not exist"


def test_cli_reference_and_index_list_every_page():
    index = (DOCS / "index.md").read_text()
    for page in sorted((DOCS / "api").glob("*")):
        assert f"api/{page.stem}" in index, f"docs/index.md does not list {page.name}"
    for page in sorted((DOCS / "guide").glob("*.md")):
        assert f"guide/{page.stem}" in index, f"docs/index.md does not list guide/{page.name}"


# ------------------------------------------------------------------------------- README -> guide


def test_every_readme_section_is_placed_on_a_guide_page():
    readme_sections.check_mapping(readme_sections.sections(readme_sections.README.read_text()))


def test_a_new_or_renamed_readme_section_stops_the_build():
    text = readme_sections.README.read_text() + "\n## A section nobody placed\n\ntext\n"
    with pytest.raises(ValueError, match="A section nobody placed"):
        readme_sections.check_mapping(readme_sections.sections(text))


def test_the_readme_is_the_landing_page_and_the_guide_holds_the_manual():
    text = readme_sections.README.read_text()
    assert len(text.splitlines()) <= 200
    assert list(readme_sections.PAGES) == ["landing"]  # every README section stays on the landing page
    for page in sorted((DOCS / "guide").glob("*.md")):
        guide = page.read_text()
        assert "_generated/readme/" not in guide, f"{page.name} still includes a README fragment"
        assert re.search(r"^## ", guide, re.M), f"{page.name} has no section"
        # Every guide page is linked from the README's documentation section.
        assert f"docs/guide/{page.name}" in text, f"README.md does not link docs/guide/{page.name}"


def test_readme_fragments_get_links_and_images_that_work_from_the_home_page(tmp_path):
    readme_sections.write_fragments(tmp_path)
    text = "".join(p.read_text() for p in tmp_path.glob("*.md"))
    assert "](docs/" not in text  # every docs/ link rewritten for docs/index.md
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    local = [t for t in targets if not t.startswith(("http://", "https://", "#"))]
    assert "results/demo/policy.png" in local and "guide/concepts.md" in local
    for target in local:
        assert (DOCS / target).is_file(), f"{target}: no such file from docs/index.md"
    assert not re.search(r"^# ", re.sub(r"```.*?```", "", text, flags=re.S), re.M)  # sections start at level 2
    # The guide's form (--move) keeps its ../ links.
    found = readme_sections.sections(readme_sections.README.read_text())
    section = next(s for s in found if s.title == "Documentation")
    assert "](../guide/concepts.md)" in readme_sections.fragment(section, "../")


def test_the_home_page_is_the_landing_text_and_a_map_and_the_sidebar_lists_every_page_once():
    index = (DOCS / "index.md").read_text()
    toctrees = re.findall(r"```\{toctree\}\n(.*?)```", index, re.S)
    captions = [re.search(r":caption: (.+)", t).group(1) for t in toctrees]
    assert captions == ["Guide", "Reference", "Design notes"]
    assert all(":hidden:" in t for t in toctrees)  # the sidebar shows the tree; the page shows the map
    entries = [line.strip() for t in toctrees for line in t.splitlines() if line.strip() and ":" not in line]
    assert len(entries) == len(set(entries)), "a page listed twice in the sidebar"
    pages = {p.relative_to(DOCS).with_suffix("").as_posix() for p in DOCS.rglob("*.md")} | {
        p.relative_to(DOCS).with_suffix("").as_posix() for p in (DOCS / "api").glob("*.rst")
    }
    pages = {p for p in pages if not p.startswith(("_", "results", "auto_examples")) and p != "index"}
    assert pages | {"auto_examples/index"} == set(entries), set(entries) ^ (pages | {"auto_examples/index"})
    for name in ("augnet", "quickstart", "what-augnet-gives-you"):
        assert f"_generated/readme/{name}.md" in index


# ------------------------------------------------------------------------------- the catalogue


def test_the_catalogue_draws_every_transform(tmp_path):
    pytest.importorskip("matplotlib")
    import catalogue

    from augnet.transforms import audio, image, signal

    drawn = {type(t).__name__ for t in catalogue.image_transforms() + catalogue.signal_transforms()}
    drawn |= {type(t).__name__ for t in catalogue.audio_transforms()}
    for module in (image, signal, audio):
        classes = {n for n in module.__all__ if inspect.isclass(getattr(module, n)) and n != "SignalTransform"}
        assert classes <= drawn, f"{module.__name__}: not drawn: {classes - drawn}"


def test_an_image_row_keeps_the_draw_and_grows_with_the_magnitude():
    import catalogue
    import torch

    from augnet.transforms import image as T

    x, rotate = catalogue.sample_image(), T.Rotate()
    seeded = lambda: torch.Generator().manual_seed(catalogue.SEED)  # noqa: E731  (each panel of a row draws so)
    mus = catalogue.MAGNITUDES
    angles = torch.stack([rotate.sample(x, torch.tensor(mu), generator=seeded())["angle"] for mu in mus])
    expected = torch.tensor(catalogue.MAGNITUDES).unsqueeze(1) * angles[-1]
    torch.testing.assert_close(angles, expected)  # the same draw in every panel, scaled by the magnitude
    assert torch.allclose(rotate(x, 0.0, generator=seeded()), x, atol=1e-3)  # magnitude 0: the image itself


# ------------------------------------------------------------------------------- code blocks


def python_blocks() -> list:
    """(file, line, code, skip reason) of every ```python block in README.md and the guide's own pages."""
    files = [ROOT / "README.md", *sorted(DOCS.glob("*.md")), *sorted((DOCS / "guide").glob("*.md"))]
    blocks = []
    for path in files:
        text = path.read_text()
        for match in re.finditer(r"(?:<!-- not run: (?P<why>[^>]*?) -->\n)?```python\n(?P<code>.*?)```", text, re.S):
            line = text.count("\n", 0, match.start("code"))
            blocks.append(pytest.param(path, match.group("code"), match.group("why"), id=f"{path.name}:{line}"))
    return blocks


@pytest.mark.parametrize(("path", "code", "not_run"), python_blocks())
def test_every_python_block_of_the_readme_and_the_guide_runs(path, code, not_run, tmp_path, monkeypatch):
    if not_run is not None:
        assert not_run.strip(), f"{path.name}: a block marked 'not run' must say why"
        compile(code, str(path), "exec")  # an excerpt is still valid Python
        pytest.skip(f"not run: {not_run}")
    monkeypatch.chdir(tmp_path)  # what a block writes (runs/, policy files) stays in tmp_path
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore", UserWarning)  # approximate exports, backend fallbacks
        exec(compile(code, str(path), "exec"), {"__name__": "__docs__"})


# ------------------------------------------------------------------------------- what a reader reads

#: The project's own work items and rounds of work: meaningless to a reader of the site or of ``--help``.
WORK_ITEM = re.compile(
    r"\bissues? ?#?\d+|\b(?:this|previous|second|third|fourth|first|earlier|last|next) round\b", re.I
)


def reader_texts() -> dict[str, str]:
    """Every text the site renders or the command prints: README, pages, docstrings, examples, ``--help``."""
    from augnet.cli import build_parser

    files = [ROOT / "README.md", *DOCS.glob("*.md"), *DOCS.glob("*/*.md"), *DOCS.glob("api/*.rst")]
    files += [*(ROOT / "augnet").rglob("*.py"), *(ROOT / "examples").glob("*.py"), ROOT / "examples/GALLERY_HEADER.rst"]
    texts = {str(p.relative_to(ROOT)): p.read_text() for p in files if "_generated" not in p.parts}
    parser = build_parser()
    commands = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices
    texts["augnet --help"] = parser.format_help()
    for name, sub in commands.items():
        texts[f"augnet {name} --help"] = sub.format_help()
    return texts


def test_no_page_docstring_or_help_names_a_work_item_of_the_project():
    found = [f"{name}: {m.group(0)!r}" for name, text in reader_texts().items() for m in WORK_ITEM.finditer(text)]
    assert not found, found


def test_the_work_item_check_finds_them():
    for text in ("Before issue 24 a step", "(issue #26)", "the previous round's run", "of this round in the warp"):
        assert WORK_ITEM.search(text), text
    for text in ("a state dict round trip", "rounds each shift", "7 interleaved rounds", "each round times it"):
        assert not WORK_ITEM.search(text), text


# ------------------------------------------------------------------------------- the browser check


def test_raw_tex_is_found_in_a_pages_text_and_plain_text_passes():
    import browser_check

    for text in (r"\[\tilde f(x) = \frac{1}{C} \sum_c f(g_c x)\]", r"shapes as \((B, C)\)", "$$x^2$$", r"a $\alpha$ b"):
        assert browser_check.raw_tex(text), text
    for text in ("costs $5 and $10", "a (B, C) tensor, [0, 1]", "f̃(x) = 1/C ∑ f(g x)", r"C:\Users", "a \\ b"):
        assert not browser_check.raw_tex(text), text
    assert len(browser_check.raw_tex(r"one formula, \(x^2\), is one place")) == 1
    assert len(browser_check.raw_tex(r"\(a\)" + " far apart " * 10 + r"\(b\)")) == 2


def test_the_browser_check_opens_every_page_but_the_static_files(tmp_path):
    import browser_check

    for name in ("index.html", "guide/a.html", "api/b.html", "_static/x.html", "_sources/y.html"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("<html></html>")
    assert browser_check.pages(tmp_path) == ["index.html", "api/b.html", "guide/a.html"]


PAGE = '<!doctype html><html><head><meta charset="utf-8"><link rel="icon" href="data:,"></head><body>{}</body></html>'

#: Pages of a small site, each with one defect the check must report (and one with none).
BROKEN_PAGES = {
    "index.html": ("<p>A clean page: <code>\\frac{1}{2}</code> in code is code.</p><pre>$$x$$</pre>", None),
    "tex.html": ('<p>A formula: <span class="math">\\(x^2\\)</span>, never typeset.</p>', "raw TeX in the text"),
    "image.html": ('<img src="no_such.png" alt="x">', "broken image: no_such.png"),
    "script.html": ("<script>throw new Error('boom')</script>", "script error"),
    "console.html": ("<script>console.error('bad thing')</script>", "console error: bad thing"),
    "cdn.html": ('<script src="https://cdn.example.invalid/tex-chtml.js"></script>', "request leaves the machine"),
}


def test_the_browser_check_reports_each_defect_of_a_small_site(tmp_path):
    # CI installs Playwright ([dev]) and the system's Chromium (.ci/run) first: there, a missing one is a broken
    # install and fails; elsewhere the test is skipped with the reason.
    import importlib.util
    import os

    import browser_check

    try:
        if importlib.util.find_spec("playwright") is None:
            raise FileNotFoundError('playwright is not installed (pip install -e ".[dev]")')
        browser_check.find_chromium()
    except FileNotFoundError as err:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(err))
    for name, (body, _) in BROKEN_PAGES.items():
        (tmp_path / name).write_text(PAGE.format(body))
    result = browser_check.check(tmp_path, screenshots=tmp_path / "shots")
    assert result.pages == len(BROKEN_PAGES)
    for name, (_, expected) in BROKEN_PAGES.items():
        found = [p for p in result.problems if p.startswith(f"{name}: ")]
        if expected is None:
            assert not found, found
        else:
            assert any(expected in p for p in found), (name, result.problems)
    assert any(p == "tex.html: 1 of 1 formulas not typeset (MathJax absent)" for p in result.problems)
    assert (tmp_path / "shots" / "home.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
