"""What a reader of the pages meets, checked on their text: links, cited files, tables, code fences and the lists of
commands a page names.

``tests/test_docs.py`` runs the pages' python blocks and ``tests/test_docs_claims.py`` checks their names, keywords,
defaults, flags and figures; this module checks what neither does: every relative link (and ``#anchor``) of a page
leads to a file (and heading) that exists, every repository path or kept file a page cites exists, every Markdown
table's rows have as many cells as its header (a browser drops the extra cells and pads the missing ones without a
word), every code fence is closed, and the experiments, commands and presets a page lists are the parser's. Each
check is a function of the text that returns what it finds wrong, and each is also run on a text with one defect, to
show that it can fail.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

#: The pages a reader opens: the README (GitHub's landing page) and every Markdown page of the site.
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
PAGES += [*sorted((DOCS / "guide").glob("*.md")), *sorted((DOCS / "design").glob("*.md"))]
PAGES += sorted((DOCS / "api").glob("*.md"))
IDS = [str(p.relative_to(ROOT)) for p in PAGES]

#: What the docs build writes (docs/conf.py) or a command writes when run: a page may cite them before they exist.
GENERATED = ("docs/_build", "docs/_generated", "docs/auto_examples")

#: Top-level folders of the repository whose paths a page cites.
TOP = ("augnet", "benchmarks", "csrc", "docs", "examples", "tests")

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")


def _fences(text: str) -> tuple[list[bool], bool]:
    """Per line of ``text``, whether it belongs to a fenced code block (its fences included), and whether a block is
    still open at the end of the text."""
    inside, opener, flags = False, "", []
    for line in text.split("\n"):
        match = _FENCE.match(line)
        closes = inside and match and match.group(1)[0] == opener[0] and len(match.group(1)) >= len(opener)
        if not inside and match:
            inside, opener = True, match.group(1)
        elif closes and not match.group(2).strip():
            inside = False
            flags.append(True)
            continue
        flags.append(inside)
    return flags, inside


def fenced(text: str) -> list[bool]:
    """Per line of ``text``, whether it belongs to a fenced code block (the fences included)."""
    return _fences(text)[0]


def prose(text: str) -> str:
    """``text`` without its fenced blocks and inline code: what a browser shows as text and links."""
    kept = [line for line, code in zip(text.split("\n"), fenced(text), strict=True) if not code]
    return re.sub(r"`[^`\n]*`", "", "\n".join(kept))


def slug(heading: str) -> str:
    """The anchor of a heading, as MyST (``myst_heading_anchors``, GitHub's rule) makes it from the heading's text."""
    text = re.sub(r"\{[\w:]+\}|[`*]", "", heading.strip())  # roles and code or emphasis marks: not in the text
    return re.sub(r"[^\w\- ]", "", text.lower().replace(" ", "-"))


def anchors(text: str) -> set[str]:
    """The anchors of a page's headings: levels 1 to 3 (``myst_heading_anchors = 3`` in docs/conf.py)."""
    kept = [line for line, code in zip(text.split("\n"), fenced(text), strict=True) if not code]
    return {slug(h) for h in re.findall(r"^#{1,3} (.+)$", "\n".join(kept), re.M)}


def generated(path: Path) -> bool:
    rel = path.resolve().relative_to(ROOT.resolve()).as_posix() if path.resolve().is_relative_to(ROOT) else ""
    return rel.startswith(GENERATED)


# ------------------------------------------------------------------------------- links


def broken_links(page: Path, text: str) -> list[str]:
    """``[...](target)`` links of the page whose file, or ``#anchor`` in it, does not exist."""
    wrong = []
    for target in re.findall(r"\]\(([^)\s]+)\)", prose(text)):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path) if path else page
        if generated(file):
            continue
        if not file.exists():
            wrong.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text() if path else text):
            wrong.append(f"{target}: no heading with that anchor")
    return wrong


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_link_of_a_page_leads_to_a_file_and_heading_that_exist(page):
    assert not broken_links(page, page.read_text())


def test_the_link_check_finds_a_missing_page_or_anchor():
    page = DOCS / "guide" / "concepts.md"
    good = (
        "[training](training.md), [the selection](#selection-how-augnet-picks-the-datas-invariance), [x](https://x.y), "
        "[the op](performance.md#the-fused-op-augnetopstap_mix)"
    )
    assert broken_links(page, page.read_text() + good) == []
    bad = "see [training](trainig.md), [below](#no-such-section) and [bad input](../bad_input.md#nowhere)"
    assert broken_links(page, bad) == [
        "trainig.md: no such file",
        "#no-such-section: no heading with that anchor",
        "../bad_input.md#nowhere: no heading with that anchor",
    ]
    assert broken_links(page, "`[not a link](nowhere.md)` and\n```\n[code](nowhere.md)\n```\n") == []


# ------------------------------------------------------------------------------- cited files


def missing_paths(text: str) -> list[str]:
    """Repository paths (``benchmarks/...``, ``docs/results/...``, ``examples/...``) a page cites that do not exist.

    A path that goes on with a placeholder (``tap_mix_<device>.json``, ``*.png``) and what the docs build writes
    are not checked.
    """
    wrong = []
    for match in re.finditer(rf"(?<![\w/.-])((?:{'|'.join(TOP)})/[\w./-]*)", text):
        cited = match.group(1).rstrip(".-")
        if cited.startswith(GENERATED) or text[match.end() : match.end() + 1] in ("<", "{", "*"):
            continue
        if not (ROOT / cited).exists():
            wrong.append(cited)
    return sorted(set(wrong))


def _repository_names() -> set[str]:
    """The names of the repository's files (its top-level folders' and its own), what the docs build writes aside."""
    skip = {"_build", "_generated", "auto_examples", "__pycache__"}
    found = {p.name for p in ROOT.iterdir() if p.is_file()}
    for top in TOP:
        found |= {p.name for p in (ROOT / top).rglob("*") if not skip & set(p.parts)}
    return found


def _written_names() -> str:
    """The source of the code and of the pages' own blocks: a file name in it is one that running them writes."""
    sources = [*(ROOT / "augnet").rglob("*.py"), *(ROOT / "examples").glob("*.py"), *(ROOT / "benchmarks").glob("*.py")]
    return "\n".join(p.read_text() for p in sources)


_FILE_NAME = re.compile(r"(?<![\w/.<>-])([\w.-]+\.(?:json|jsonl|png|py|txt|csv|cpp|cu|sh|pt|rst|toml))\b(?![/\w])")


def unknown_file_names(text: str, names: set[str], written: str) -> list[str]:
    """Bare file names (``selection_rerun.json``) that no file of the repository has and no code writes.

    A name in capitals (``NAME.json``) is a placeholder; one that the page's own code blocks or augnet's, the
    examples' or the benchmarks' source spell out is what running them writes (``policy.csv``, ``checkpoint.pt``).
    """
    own = "\n".join(line for line, code in zip(text.split("\n"), fenced(text), strict=True) if code)
    wrong = []
    for name in _FILE_NAME.findall(text):
        stem = name.split(".")[0]
        if name in names or stem.isupper() or name.startswith((".", "-")) or name in own or name in written:
            continue
        wrong.append(name)
    return sorted(set(wrong))


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_repository_path_a_page_cites_exists(page):
    assert not missing_paths(page.read_text())


def test_every_file_name_a_page_cites_is_a_kept_file_or_one_the_code_writes():
    names, written = _repository_names(), _written_names()
    wrong = {str(p.relative_to(ROOT)): unknown_file_names(p.read_text(), names, written) for p in PAGES}
    assert not {k: v for k, v in wrong.items() if v}


def test_the_path_checks_find_a_renamed_or_missing_file():
    text = (
        "saved in `benchmarks/results/selection_rerun.json` (`benchmarks/selection_rerun.py`), see "
        "docs/results/demo/demo.json, docs/_build/html, `benchmarks/results/tap_mix_<device>.json` and examples/ddp.py."
    )
    assert missing_paths(text) == []
    assert missing_paths(text.replace("selection_rerun.json", "selection_rerun2.json")) == [
        "benchmarks/results/selection_rerun2.json"
    ]
    assert missing_paths("run `python examples/rotations.py`.") == ["examples/rotations.py"]
    names, written = _repository_names(), _written_names()
    fine = "`selection_rerun_other_tasks.json`, `policy.csv`, `NAME.json`, `test_probes_ranking.py`"
    assert unknown_file_names(fine, names, written) == []
    assert unknown_file_names("`selection_rerun_other_task.json`", names, written) == [
        "selection_rerun_other_task.json"
    ]


# ------------------------------------------------------------------------------- what the browser draws

_DELIMITER = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")


def cells(line: str) -> int:
    """The cells of a table row as GitHub and MyST split it: at every pipe not escaped, in code spans too."""
    row = line.strip()
    row = row[1:] if row.startswith("|") else row
    row = row[:-1] if row.endswith("|") and not row.endswith("\\|") else row
    return len(re.split(r"(?<!\\)\|", row))


def table_problems(text: str) -> list[str]:
    """Rows of the page's Markdown tables whose cells are not the header's count (line numbers from 1)."""
    lines, code = text.split("\n"), fenced(text)
    wrong, i = [], 0
    while i < len(lines) - 1:
        if not code[i] and lines[i].lstrip().startswith("|") and _DELIMITER.match(lines[i + 1]):
            header, j = cells(lines[i]), i + 1
            while j < len(lines) and not code[j] and lines[j].lstrip().startswith("|"):
                if cells(lines[j]) != header:
                    wrong.append(f"line {j + 1}: {cells(lines[j])} cells, the header {header}")
                j += 1
            i = j
        else:
            i += 1
    return wrong


def unclosed_fence(text: str) -> bool:
    """Whether a fenced code block runs to the end of the page (every later line shown as code)."""
    return _fences(text)[1]


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_table_row_has_its_header_s_cells(page):
    assert not table_problems(page.read_text())


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_code_fence_is_closed(page):
    assert not unclosed_fence(page.read_text())


def test_the_table_and_fence_checks_find_a_broken_table_or_an_open_fence():
    table = "| a | b |\n|---|---|\n| 1 | 2 |\n| `x \\| y` | 3 |\n"
    assert table_problems(table) == []
    assert table_problems(table + "| 4 | 5 | 6 |\n") == ["line 5: 3 cells, the header 2"]
    assert table_problems("| a | b |\n|---|---|\n| `x | y` | 3 |\n") == ["line 3: 3 cells, the header 2"]
    assert table_problems("```\n| a | b |\n|---|---|\n| 1 |\n```\n") == []  # a table in code is code
    page = (DOCS / "guide" / "training.md").read_text()
    assert table_problems(page.replace("| 4 | 1.066 |", "| 4 | 1.066 | 0.1 |", 1))
    assert not unclosed_fence("text\n```python\nx = 1\n```")
    assert unclosed_fence("text\n```python\nx = 1\n\nmore text")
    assert not unclosed_fence(page)
    assert unclosed_fence(page.replace("```\n\nA `PolicyLogger`", "\n\nA `PolicyLogger`", 1))


# ------------------------------------------------------------------------------- the lists a page names


def _commands():
    from augnet.cli import build_parser

    parser = build_parser()
    return next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices


def _experiments() -> set[str]:
    reproduce = _commands()["reproduce"]
    return set(next(a for a in reproduce._actions if a.dest == "name").choices)


def list_problems(readme: str, reproducing: str, concepts: str) -> list[str]:
    """The experiments, commands and demo presets the pages list, against the parser and ``PRESETS``."""
    from augnet.experiments.demo import PRESETS

    wrong = []
    listed = re.search(r"`augnet reproduce NAME` \(([^)]*)\)", reproducing)
    named = set(re.findall(r"`(\w+)`", listed.group(1))) if listed else set()
    if named != _experiments():
        wrong.append(f"reproducing.md lists {sorted(named)}, augnet reproduce takes {sorted(_experiments())}")
    line = re.search(r"\*\*Command line\*\*:(.*?)(?:\n\n|\n- )", readme, re.S)
    commands = set(re.findall(r"`augnet (\w+)", line.group(1))) if line else set()
    if commands != set(_commands()):
        wrong.append(f"README.md lists the commands {sorted(commands)}, augnet has {sorted(_commands())}")
    for preset in re.findall(r"`augnet demo\s+--preset\s+([\w|]+)`", concepts):
        if not set(preset.split("|")) <= set(PRESETS):
            wrong.append(f"concepts.md: --preset {preset}, PRESETS has {sorted(PRESETS)}")
    return wrong


def test_the_experiments_commands_and_presets_the_pages_list_are_the_code_s():
    readme, reproducing, concepts = (
        p.read_text() for p in (ROOT / "README.md", DOCS / "guide" / "reproducing.md", DOCS / "guide" / "concepts.md")
    )
    assert not list_problems(readme, reproducing, concepts)
    no_copies = reproducing.replace("`copies`, `instance`", "`instance`", 1)
    no_probe = readme.replace("`augnet reproduce NAME`,\n  `augnet probe`", "`augnet reproduce NAME`", 1)
    misspelt = concepts.replace("--preset paper|official`", "--preset paper|oficial`", 1)
    assert len(list_problems(readme, no_copies, concepts)) == 1
    assert len(list_problems(no_probe, reproducing, concepts)) == 1
    assert len(list_problems(readme, reproducing, misspelt)) == 1
