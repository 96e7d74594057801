"""``python -m augnet``: the same as the ``augnet`` command, through its launcher (``_augnet_launch.run``).

A Ctrl-C while the command line loads is one line, and the program ends as :func:`augnet.cli.run` ends an
interrupted command. (Python imports the ``augnet`` package, and torch with it, before this module runs:
:mod:`augnet._interrupt` quiets a Ctrl-C in those seconds.)
"""

from _augnet_launch import run

if __name__ == "__main__":
    run()
