"""``python -m augnet``: the same as the ``augnet`` command.

A Ctrl-C while the command line loads is one line, as the command's launcher (``_augnet_launch``) makes it, and
the program ends as :func:`augnet.cli.run` ends an interrupted command. (Python imports the ``augnet`` package,
and torch with it, before this module runs: :mod:`augnet._interrupt` quiets a Ctrl-C in those seconds.)
"""

import sys


def _quiet_interrupt(kind, value, traceback) -> None:
    if not issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, value, traceback)


def _main() -> None:
    try:
        from augnet.cli import run
    except KeyboardInterrupt:
        print("\naugnet: interrupted", file=sys.stderr)
        sys.excepthook = _quiet_interrupt
        raise
    run()


if __name__ == "__main__":
    _main()
