"""``python -m book.tracer RESULT``: the simulator process of :mod:`book.tracer.child`."""

import sys

from .child import main

sys.exit(main())
