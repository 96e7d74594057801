"""A Ctrl-C while ``python -m augnet`` imports this package (torch: seconds) is one line, as the ``augnet``
command says it.

``runpy`` imports the package before :mod:`augnet.__main__` runs, so only the package's first import can catch
that Ctrl-C. Importing this module swaps in a quiet exception hook for a ``python -m`` launch (``sys.argv[0]`` is
``"-m"`` until the module to run is found); :func:`restore` puts the previous hook back once the package is
imported, so a later error or Ctrl-C is its program's own.
"""

import sys

_previous = sys.excepthook


def _interrupted(kind, value, traceback) -> None:
    if issubclass(kind, KeyboardInterrupt):
        print("\naugnet: interrupted", file=sys.stderr)
    else:
        _previous(kind, value, traceback)


def restore() -> None:
    """Put back the hook this module replaced (nothing if it replaced none, or another took its place)."""
    if sys.excepthook is _interrupted:
        sys.excepthook = _previous


if sys.argv[:1] == ["-m"]:
    sys.excepthook = _interrupted
