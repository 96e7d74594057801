"""The built site as a reader sees it: every page opened in headless Chromium, with no network.

    python docs/scripts/browser_check.py docs/_build/html

serves the built site on 127.0.0.1 (a port of the system's choosing), opens
every page in Chromium through Playwright, lets no request leave the machine,
and fails (exit status 1, one line per problem) on:

- a formula shown as raw TeX: ``\\(``, ``\\[``, ``$$``, ``\\frac`` and the like
  in the text a reader sees (code blocks aside), a formula element that
  MathJax did not typeset, or one it typeset as an error;
- a broken image (loaded with no pixels, or not loaded at all);
- an error in the console or an uncaught error in a page's scripts;
- a request for a file of the site that fails (a 404 included), and any
  request that would leave the machine (the site must read offline).

It prints the pages checked, the formulas found and the time taken, and
keeps a screenshot of the home page, a guide page and a reference page in
``--screenshots`` (default: ``docs/_build/screenshots``).

Chromium is the system's (``apt-get install chromium`` gives
``/usr/bin/chromium``; ``--chromium`` or ``AUGNET_CHROMIUM`` name another):
Playwright drives it, and no browser is downloaded.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import os
import re
import shutil
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

#: Chromium's flags for a machine with no network: nothing is fetched in the background, and nothing is kept.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

#: Folders of a Sphinx build that hold no pages.
NOT_PAGES = ("_static", "_sources", "_images", "_downloads")

#: The pages to keep a screenshot of, by name: the first of each list that the site has.
SCREENSHOTS = {
    "home": ["index.html"],
    "guide": ["guide/concepts.html", "guide/training.html"],
    "reference": ["api/augnet.html", "api/probes.html"],
}

#: TeX that a reader should never see: delimiters and common commands left in the rendered text.
RAW_TEX = re.compile(
    r"\\[()\[\]]"  # \( \) \[ \]
    r"|\$\$"
    r"|\$[^$\n]{0,80}?\\[A-Za-z]+"  # $...\cmd (a dollar formula left as text)
    r"|\\(?:frac|dfrac|sum|prod|int|sqrt|tilde|hat|bar|mathbb|mathcal|mathrm|mathbf|operatorname|text|left|right"
    r"|begin|end|cdot|times|approx|partial|nabla|alpha|beta|gamma|lambda|sigma|theta|mu|pi|phi|log|exp|leq|geq"
    r"|le|ge|pm|in|infty|top)(?![A-Za-z])"
)

# Run in each page once it has loaded: the images loaded (lazy ones too), MathJax done, then what a reader sees.
_INSPECT = """
async () => {
  const images = [...document.images];
  images.forEach(img => { if (img.loading === "lazy") img.loading = "eager"; });
  await Promise.all(images.map(img => img.complete ? null : new Promise(done => {
    img.addEventListener("load", done); img.addEventListener("error", done); setTimeout(done, 5000);
  })));
  const formulas = document.querySelectorAll(".math").length;
  let mathjax = "absent";
  if (window.MathJax && window.MathJax.startup && window.MathJax.startup.promise) {
    await window.MathJax.startup.promise;
    mathjax = "done";
  }
  const hidden = [...document.querySelectorAll("pre, code, script, style, textarea")];
  const display = hidden.map(el => el.style.display);
  hidden.forEach(el => { el.style.display = "none"; });
  const text = document.body.innerText;
  hidden.forEach((el, i) => { el.style.display = display[i]; });
  return {
    formulas,
    mathjax,
    typeset: document.querySelectorAll("mjx-container").length,
    texErrors: [...document.querySelectorAll("mjx-merror")].map(el => el.getAttribute("data-mjx-error") || "?"),
    broken: images.filter(img => !img.complete || img.naturalWidth === 0).map(img => img.getAttribute("src")),
    images: images.length,
    text,
  };
}
"""


@dataclass
class Result:
    pages: int = 0
    formulas: int = 0
    pages_with_formulas: int = 0
    images: int = 0
    problems: list[str] = field(default_factory=list)
    screenshots: list[Path] = field(default_factory=list)
    seconds: float = 0.0


def raw_tex(text: str) -> list[str]:
    r"""Each place where ``text`` (a page's visible text, code aside) shows TeX, with a little context; matches
    less than 40 characters apart (``\(`` and ``\)`` of one formula) are one place."""
    spans: list[list[int]] = []
    for match in RAW_TEX.finditer(text):
        if spans and match.start() - spans[-1][1] < 40:
            spans[-1][1] = match.end()
        else:
            spans.append([match.start(), match.end()])
    found = []
    for start, end in spans:
        shown = " ".join(text[max(0, start - 25) : min(len(text), end + 25)].split())
        found.append(shown if len(shown) <= 120 else f"{shown[:117]}...")
    return found


def pages(root: Path) -> list[str]:
    """Every HTML page of a built site, as paths relative to ``root`` (``index.html`` first)."""
    found = sorted(
        p.relative_to(root).as_posix() for p in root.rglob("*.html") if p.relative_to(root).parts[0] not in NOT_PAGES
    )
    return sorted(found, key=lambda p: p != "index.html")


def find_chromium(given: str | None = None) -> str:
    for candidate in (given, os.environ.get("AUGNET_CHROMIUM"), shutil.which("chromium"), "/usr/bin/chromium"):
        if candidate and Path(candidate).is_file():
            return candidate
    raise FileNotFoundError(
        "no Chromium found: install the system's (apt-get install chromium) or name one with --chromium"
    )


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


def check(root: Path, screenshots: Path | None = None, chromium: str | None = None, only=None) -> Result:
    """Open every page of the built site ``root`` (or the pages ``only``) and collect the problems."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    root = Path(root).resolve()
    if not (root / "index.html").is_file():
        raise FileNotFoundError(f"{root} holds no index.html: build the site first")
    names = list(only) if only is not None else pages(root)
    result = Result()
    start = time.perf_counter()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=root))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=find_chromium(chromium), args=CHROMIUM_ARGS)
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            current: list[str] = []  # the page being checked, for the handlers' messages

            def problem(text: str) -> None:
                result.problems.append(f"{current[0] if current else '?'}: {text}")

            def route(r):
                url = r.request.url
                if url.startswith((base, "data:", "blob:", "about:")):
                    r.continue_()
                else:
                    problem(f"request leaves the machine (blocked): {url}")
                    r.abort()

            def console(message):
                if message.type == "error":
                    problem(f"console error: {message.text}")

            def response(r):
                # The browser asks for a favicon.ico of its own accord; Sphinx makes none.
                if r.url.startswith(base) and r.status >= 400 and not r.url.endswith("/favicon.ico"):
                    problem(f"HTTP {r.status} for {r.url[len(base) :]}")

            def failed(r):
                if r.url.startswith(base):
                    problem(f"request failed: {r.url[len(base) :]} ({r.failure})")

            context.route("**/*", route)
            page = context.new_page()
            page.on("console", console)
            page.on("pageerror", lambda err: problem(f"script error: {err}"))
            page.on("response", response)
            page.on("requestfailed", failed)
            wanted = {kind: next((n for n in choices if n in names), None) for kind, choices in SCREENSHOTS.items()}
            for name in names:
                current[:] = [name]
                page.goto(base + name, wait_until="load")
                if page.evaluate("() => document.querySelector('.math') !== null"):
                    # MathJax is deferred: it may not have started yet at "load". If it never does, the
                    # formulas are reported below as not typeset.
                    with contextlib.suppress(PlaywrightTimeout):
                        page.wait_for_function("() => window.MathJax && window.MathJax.startup", timeout=5000)
                seen = page.evaluate(_INSPECT)
                result.pages += 1
                result.images += seen["images"]
                result.formulas += seen["typeset"]
                result.pages_with_formulas += seen["typeset"] > 0
                if seen["formulas"] and seen["typeset"] < seen["formulas"]:
                    problem(
                        f"{seen['formulas'] - seen['typeset']} of {seen['formulas']} formulas not typeset "
                        f"(MathJax {seen['mathjax']})"
                    )
                for error in seen["texErrors"]:
                    problem(f"TeX error in a formula: {error}")
                for src in seen["broken"]:
                    problem(f"broken image: {src}")
                tex = raw_tex(seen["text"])
                for where in tex[:5]:
                    problem(f"raw TeX in the text: ...{where}...")
                if len(tex) > 5:
                    problem(f"raw TeX in the text: {len(tex) - 5} more")
                if screenshots is not None and name in wanted.values():
                    kind = next(k for k, v in wanted.items() if v == name)
                    first_formula = page.query_selector("mjx-container")
                    if kind != "home" and first_formula is not None:
                        first_formula.scroll_into_view_if_needed()
                        page.evaluate("() => window.scrollBy(0, -window.innerHeight / 3)")
                    screenshots.mkdir(parents=True, exist_ok=True)
                    path = screenshots / f"{kind}.png"
                    page.screenshot(path=str(path))
                    result.screenshots.append(path)
            browser.close()
    finally:
        server.shutdown()
        server.server_close()
    result.seconds = time.perf_counter() - start
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site", nargs="?", default="docs/_build/html", help="the built site (default: %(default)s)")
    parser.add_argument(
        "--screenshots", default="docs/_build/screenshots", help="folder for the screenshots (default: %(default)s)"
    )
    parser.add_argument("--chromium", default=None, help="the Chromium executable (default: the system's)")
    args = parser.parse_args(argv)
    try:
        result = check(Path(args.site), Path(args.screenshots), args.chromium)
    except (FileNotFoundError, ImportError) as err:
        print(f"browser check: error: {err}", file=sys.stderr)
        return 2
    for line in result.problems:
        print(f"browser check: {line}", file=sys.stderr)
    print(
        f"browser check: {result.pages} pages, {result.formulas} formulas typeset on {result.pages_with_formulas} "
        f"pages, {result.images} images, {len(result.problems)} problems, {result.seconds:.0f} s"
    )
    for path in result.screenshots:
        print(f"browser check: screenshot {path}")
    return 1 if result.problems else 0


if __name__ == "__main__":
    sys.exit(main())
