"""``python -m augnet``: the same as the ``augnet`` command."""

import sys

from augnet.cli import main

if __name__ == "__main__":
    sys.exit(main())
