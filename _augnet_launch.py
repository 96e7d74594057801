"""The ``augnet`` command's entry point, kept outside the ``augnet`` package.

Importing ``augnet`` imports torch, which takes seconds; a Ctrl-C in them would stop the import inside the
console script's own ``from augnet.cli import run``, where no handler of the package can catch it, and print the
import's traceback. Here the import is inside a handler: the interruption is one line, and the program ends as
``augnet.cli.run`` ends an interrupted command (as stopped by SIGINT, after its clean-up). ``python -m augnet``
runs it too; Python imports the package first there, and ``augnet._interrupt`` quiets a Ctrl-C in those seconds.
"""

import sys


def _quiet_interrupt(kind, value, traceback) -> None:
    if not issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, value, traceback)


def run() -> None:
    """Import the command line, then run it (:func:`augnet.cli.run`)."""
    try:
        from augnet.cli import run as run_command
    except KeyboardInterrupt:
        print("\naugnet: interrupted", file=sys.stderr)
        sys.excepthook = _quiet_interrupt
        raise
    run_command()


if __name__ == "__main__":  # pragma: no cover
    run()
