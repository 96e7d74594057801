"""Sphinx configuration of augnet's documentation site.

Build (from the repository root; offline, warnings are errors):

    pip install -e ".[docs]" && python -m sphinx -W --keep-going -b html docs docs/_build/html

The build regenerates, before reading any page (``builder-inited``):

- ``_generated/readme/``: the README's sections that the guide pages include
  (``scripts/readme_sections.py``; the README is the text's one source until
  it becomes a landing page);
- ``_generated/catalogue/``: a picture of every transform at magnitudes 0 to 1
  (``scripts/catalogue.py``), drawn from the transforms themselves;
- ``_generated/cli.md``: ``augnet --help`` and the help of each subcommand;

and sphinx-gallery runs every script of ``examples/`` (with the reduced
settings of :data:`GALLERY_ARGS`, on the reference tap_mix) into ``auto_examples/``.

Nothing a page needs is fetched when it is read: MathJax 3 comes with the site
(``_static/mathjax/``, from the package sphinx-mathjax-offline), so formulas
render offline, and no page loads a script or a style from elsewhere.

What fails the build: any warning (``-W``), including a reference to an augnet
name that does not exist (``nitpicky``; names of other libraries are not
checked, since no inventory is fetched), a documented public name without a
docstring (:func:`require_docstring`), a README section placed on no page, and
an example that raises.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import tempfile
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(DOCS / "scripts"))
os.environ.setdefault("OMP_NUM_THREADS", "1")
# The gallery's examples run on the reference tap_mix. "auto" would pick the C++ backend, and torch's extension
# cache rebuilds it for every virtual environment (its build file names that environment's torch headers): about
# 45 s in a fresh docs venv, for examples whose reduced sizes take the same time on either backend.
os.environ.setdefault("AUGNET_BACKEND", "reference")

import catalogue  # noqa: E402  (docs/scripts)
import readme_sections  # noqa: E402  (docs/scripts)

import augnet  # noqa: E402

project = "augnet"
author = "augnet developers"
copyright = "augnet developers"
release = version = augnet.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
# _generated/ holds fragments that pages include, not pages; results/ the experiments' figures and numbers.
# sg_execution_times.rst: sphinx-gallery's run-times page, which this configuration does not write; a copy left in
# docs/ by another configuration is not built either (not for readers, and it loads scripts from a CDN).
exclude_patterns = [
    "_build", "_generated", "results", "scripts", "auto_examples/*.ipynb", "auto_examples/*.py",
    "sg_execution_times.rst", "auto_examples/sg_execution_times.rst",
]
html_theme = "furo"
html_title = f"augnet {release}"
myst_heading_anchors = 3
myst_enable_extensions = ["dollarmath"]


# ------------------------------------------------------------------ math, rendered without a network
def mathjax_files() -> Path:
    """The folder that holds ``mathjax/`` (MathJax 3, its fonts and extensions), from the package
    sphinx-mathjax-offline that the docs extra installs: the site ships the renderer, so a page read offline, behind
    a proxy or on an intranet still shows its formulas. Only its files are used, not its Sphinx hooks."""
    import importlib.util

    spec = importlib.util.find_spec("sphinx-mathjax-offline")
    folder = Path(spec.origin).parent / "static" if spec is not None and spec.origin else None
    if folder is None or not (folder / "mathjax" / "tex-chtml.js").is_file():
        raise RuntimeError('docs/conf.py: MathJax is missing; pip install -e ".[docs]" installs it')
    return folder


html_static_path = [str(mathjax_files())]  # copied into _build/html/_static/mathjax/
mathjax_path = "mathjax/tex-chtml.js"  # relative: the page loads _static/mathjax/tex-chtml.js, never a CDN

# ------------------------------------------------------------------ references: checked, offline
nitpicky = True  # every :class:/:func: reference to an augnet name must resolve
# Nothing is fetched at build time (no intersphinx), so names of other libraries cannot resolve: not checked.
nitpick_ignore_regex = [
    (r"py:.*", r"(torch|numpy|np|matplotlib|kornia|torchvision|einops|tqdm|typing|collections|pathlib|abc)(\..*)?"),
    (r"py:.*", r"(Tensor|Module|Generator|nn\..*|optional|callable|Callable|Sequence|Iterable|Mapping|Any|Path)"),
    (r"py:.*", r"(int|float|str|bool|dict|list|tuple|None|object|type|bytes|Exception|ValueError|TypeError)"),
    # Docstrings name the internal module where code lives (augnet.training.callbacks, ...); the site has a
    # page per public module only. References to functions, classes and data are all checked.
    (r"py:mod", r"augnet\..*"),
]
# The gallery's configuration holds functions (its argv and its PNG scraper): Sphinx cannot pickle it, so a
# change of conf.py rebuilds everything, which is what it should do anyway.
suppress_warnings = ["config.cache"]

# ------------------------------------------------------------------ API reference
autodoc_default_options = {"member-order": "bysource"}
autodoc_typehints = "none"  # the signatures show the hints; descriptions come from the docstrings' Args
autodoc_inherit_docstrings = False  # a method documented here must carry its own docstring
napoleon_google_docstring = True
napoleon_numpy_docstring = False
# augnet's "Returns:" are prose (often a dict literal spanning lines), not "type: description": shown as written.
napoleon_custom_sections = ["Returns", ("Class attributes", "params_style")]


def require_docstring(app, what, name, obj, options, lines):
    """A public name documented on a page without a docstring of its own fails the build (a warning, with -W)."""
    if what in ("module",) or any(line.strip() for line in lines):
        return
    from sphinx.util import logging

    logging.getLogger("augnet.docs").warning(f"{name} ({what}) has no docstring", type="augnet", subtype="docstring")


# ------------------------------------------------------------------ the examples gallery
#: The reduced settings each example runs with during the build (the full runs are described in the guide).
GALLERY_ARGS = {
    "admissible_magnitudes.py": ["--epochs", "1", "--magnitudes", "0.5", "--n-train", "1000"],
    "capacity.py": ["--widths", "16", "--depths", "1", "--epochs", "10"],
    "cifar10.py": ["--fake", "--fake-size", "32", "--epochs", "1", "--batch", "16", "--width", "4",
                   "--eval-copies", "2", "--device", "cpu", "--overwrite", "--log", "{out}"],
    "copies.py": ["--quick"],
    "ddp.py": ["--epochs", "1", "--n-train", "512", "--out", "{out}/ddp_checkpoint.pt"],
    "probe_demo.py": ["--quick"],
    "rotation.py": ["--epochs", "1", "--n-train", "512"],
    "rotation_ablation.py": ["--tiny", "--out", "{out}"],
    "sinusoids.py": ["--epochs", "10"],
}
_gallery_out = Path(tempfile.mkdtemp(prefix="augnet-gallery-"))


def gallery_argv(gallery_conf, script_vars):
    """sys.argv[1:] for one example: its reduced settings; ``{out}`` is a scratch folder for what it writes."""
    name = Path(script_vars["src_file"]).name
    if name not in GALLERY_ARGS:
        raise ValueError(f"docs/conf.py: examples/{name} has no entry in GALLERY_ARGS (its reduced settings)")
    out = _gallery_out / name.removesuffix(".py")
    out.mkdir(parents=True, exist_ok=True)
    return [arg.replace("{out}", str(out)) for arg in GALLERY_ARGS[name]]


def png_scraper(block, block_vars, gallery_conf):
    """Show the PNG files an example wrote into its ``{out}`` folder (augnet's plots save and close their figures)."""
    import shutil

    from sphinx_gallery.scrapers import figure_rst

    out = _gallery_out / Path(block_vars["src_file"]).stem
    seen = block_vars.setdefault("augnet_seen_png", set())
    new = sorted(p for p in out.rglob("*.png") if p not in seen) if out.exists() else []
    paths = []
    for png, target in zip(new, block_vars["image_path_iterator"]):
        shutil.copyfile(png, target)
        seen.add(png)
        paths.append(target)
    return figure_rst(paths, gallery_conf["src_dir"])


sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": str(DOCS / "auto_examples"),
    "filename_pattern": r".*\.py$",  # run every example
    "reset_argv": gallery_argv,
    "image_scrapers": ("matplotlib", png_scraper),
    "download_all_examples": False,
    "remove_config_comments": True,
    "show_memory": False,
    "show_signature": False,
    "abort_on_example_error": True,  # an example that raises fails the build at once
    "capture_repr": (),
    # No page of the examples' run times: it is about the build machine, not for readers, and it loads its
    # table scripts from a CDN (the site must read offline; docs/scripts/browser_check.py checks it).
    "write_computation_times": False,
}


# ------------------------------------------------------------------ generated pages


def write_cli_help(path: Path) -> None:
    """``augnet --help`` and ``augnet COMMAND --help`` for every subcommand, as the command prints them."""
    from augnet.cli import build_parser

    os.environ["COLUMNS"] = "100"
    parser = build_parser()
    # argparse has no public accessor for subcommands: the one subparsers action holds them.
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    parts = [
        "# Command line\n\nThe `augnet` command (also `python -m augnet`); generated from its parser. An option that "
        "takes several values takes them one after another, separated by spaces (`--transforms Rotate "
        "HorizontalFlip`); the comma-separated form of `augnet probe`'s and `augnet demo`'s lists "
        "(`--transforms Rotate,HorizontalFlip`) is deprecated: it still works, with a warning that gives the "
        "spaced form.\n"
    ]
    for argv in ([], *([name] for name in commands)):
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer), contextlib.suppress(SystemExit):
            build_parser().parse_args([*argv, "--help"])
        title = " ".join(["augnet", *argv])
        parts.append(f"## `{title}`\n\n```text\n{buffer.getvalue().rstrip()}\n```\n")
    text = "\n".join(parts)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def generate(app) -> None:
    out = DOCS / "_generated"
    out.mkdir(exist_ok=True)
    readme_sections.write_fragments(out / "readme")
    write_cli_help(out / "cli.md")
    catalogue.write_catalogue(out / "catalogue")


def setup(app):
    app.connect("builder-inited", generate)
    app.connect("autodoc-process-docstring", require_docstring)
