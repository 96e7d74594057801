"""``python -m augnet``: the same as the ``augnet`` command."""

from augnet.cli import run

if __name__ == "__main__":
    run()
