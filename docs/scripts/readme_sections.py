"""README.md's sections, checked and cut for the site's home page.

The README is the landing page (what augnet is, the quickstart, the feature
list, a first model, links into the site); the user guide's text lives in
docs/guide/. The docs build (``docs/conf.py``) calls :func:`write_fragments`,
which cuts README.md at its ``##`` / ``###`` headings and writes every section
to ``docs/_generated/readme/<slug>.md``, from which docs/index.md includes the
landing sections (all but "Documentation", whose place the site's own map
takes), with their links and images made right for the home page.

A heading of the README that :data:`PAGES` does not place, or a placed heading
that the README no longer has, stops the build with an error that names it: a
new README section must be placed (on the landing page, or moved to a guide
page with :func:`move`).

    python docs/scripts/readme_sections.py          # print which README section goes where
    python docs/scripts/readme_sections.py --move   # move sections placed on guide pages into those pages
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
GUIDE = ROOT / "docs" / "guide"
OUT = ROOT / "docs" / "_generated" / "readme"

#: Guide page (file stem under docs/guide/) -> the README headings it includes, in reading order.
#: ``"landing"`` holds what stays in the README (not part of the guide).
PAGES: dict[str, list[str]] = {
    "landing": ["augnet", "Quickstart", "What augnet gives you", "A first model", "Documentation"],
}


@dataclass
class Section:
    title: str
    level: int  # 1 for '#', 2 for '##', ...
    text: str  # the heading line and the body, up to the next heading of any level


def _lines(text: str):
    """Each line of a Markdown text, with whether it can be a heading (outside a fenced code block)."""
    fence = None
    for line in text.splitlines(keepends=True):
        stripped = line.lstrip()
        if fence is None and stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
            yield line, False
        elif fence is not None:
            if stripped.startswith(fence):
                fence = None
            yield line, False
        else:
            yield line, True


def sections(text: str) -> list[Section]:
    """README.md cut at every heading outside a fenced code block."""
    found: list[Section] = []
    lines: list[str] = []
    for line, outside in _lines(text):
        heading = re.match(r"(#{1,6}) (.+?)\s*$", line) if outside else None
        if heading:
            if found:
                found[-1].text = "".join(lines)
            found.append(Section(heading.group(2), len(heading.group(1)), ""))
            lines = []
        lines.append(line)
    if found:
        found[-1].text = "".join(lines)
    return found


def slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def rewrite_links(text: str, prefix: str = "") -> str:
    """README links and images, made right for a page of docs/: ``docs/x.md`` -> ``prefix + x.md`` (``prefix``
    ``""`` for the home page, docs/index.md; ``"../"`` for a page in docs/guide/); a link to a folder -> its
    plain text."""

    def fix(match: re.Match) -> str:
        label, target = match.group(1), match.group(2)
        if not target.startswith("docs/"):
            return match.group(0)
        inside = target[len("docs/") :]
        if (ROOT / target).is_file():
            return f"[{label}]({prefix}{inside})"
        return label  # a folder of the repository: no page to link to

    return re.sub(r"\[([^\]]*)\]\(([^)\s]+)\)", fix, text)


def shift_headings(text: str, by: int) -> str:
    """Move every heading outside code fences ``by`` levels up (negative) or down."""
    out = []
    for line, outside in _lines(text):
        if outside and (m := re.match(r"(#{1,6}) ", line)):
            line = "#" * max(1, len(m.group(1)) + by) + line[len(m.group(1)) :]
        out.append(line)
    return "".join(out)


def check_mapping(found: list[Section]) -> None:
    titles = [s.title for s in found]
    placed = [t for ts in PAGES.values() for t in ts]
    unplaced = [t for t in titles if t not in placed]
    missing = [t for t in placed if t not in titles]
    problems = []
    if unplaced:
        problems.append(f"README sections placed on no guide page (add them to PAGES): {unplaced}")
    if missing:
        problems.append(f"PAGES names README sections that README.md no longer has: {missing}")
    if problems:
        raise ValueError(f"{Path(__file__).name}: " + "; ".join(problems))


def fragment(section: Section, prefix: str = "") -> str:
    """A section as a page of docs/ includes it (the home page by default, see :func:`rewrite_links`): its
    heading at level 2 (a page's own title is level 1)."""
    return shift_headings(rewrite_links(section.text, prefix), 2 - section.level)


def write_fragments(out: Path = OUT) -> dict[str, list[str]]:
    """Write each placed README section to ``out/<slug>.md``; the guide page -> fragment files it includes."""
    found = sections(README.read_text())
    check_mapping(found)
    out.mkdir(parents=True, exist_ok=True)
    by_title = {s.title: s for s in found}
    written: dict[str, list[str]] = {}
    for page, titles in PAGES.items():
        written[page] = []
        for title in titles:
            path = out / f"{slug(title)}.md"
            text = fragment(by_title[title])
            if not path.exists() or path.read_text() != text:  # unchanged files keep Sphinx's cache valid
                path.write_text(text)
            written[page].append(path.name)
    return written


INCLUDE = re.compile(r"```\{include\} \.\./_generated/readme/(?P<name>[\w-]+)\.md\n```\n")


def move() -> None:
    """The final move: the guide pages get the sections' text, README.md keeps the landing sections."""
    found = sections(README.read_text())
    check_mapping(found)
    by_slug = {slug(s.title): s for s in found}
    for page in GUIDE.glob("*.md"):
        text = page.read_text()
        new = INCLUDE.sub(lambda m: fragment(by_slug[m.group("name")], "../"), text)
        if new != text:
            page.write_text(new)
            print(f"moved into {page.relative_to(ROOT)}")
    keep = set(PAGES["landing"])
    README.write_text("".join(s.text for s in found if s.title in keep))
    print(f"README.md keeps: {', '.join(PAGES['landing'])}; now add its links into the site")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--move", action="store_true", help="move the sections' text into the guide pages")
    args = parser.parse_args(argv)
    if args.move:
        move()
        return 0
    found = {s.title: s for s in sections(README.read_text())}
    check_mapping(list(found.values()))
    for page, titles in PAGES.items():
        for title in titles:
            print(f"{page:<13} <- {'#' * found[title].level} {title} ({found[title].text.count(chr(10))} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
