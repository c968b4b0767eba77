"""``python -m fastsim``: the ``fastsim`` command, for an environment whose scripts are not
on ``PATH``."""
import sys

from .cli import main

if __name__ == "__main__":  # imported (pydoc, a doctest walk), it runs nothing
    sys.exit(main())
