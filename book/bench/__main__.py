"""``python -m book.bench``: run the benchmark suite (see :mod:`book.bench.suite`)."""

import sys

from .suite import main

if __name__ == "__main__":
    sys.exit(main())
