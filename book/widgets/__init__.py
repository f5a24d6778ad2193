"""Interactive explorers for the book: anywidgets whose front-end code does all the drawing.

Each widget receives its data (GPU table, dtype sizes, measured points) from Python as state and
computes and draws in the browser, so it responds to input on the static book page with no kernel,
as well as in Jupyter and Colab. The front-end code lives beside this file (common.js holds the
formulas that mirror book.traffic and book.roofline; tests/built_book/test_widgets_browser.py checks that
they agree).

- :func:`roofline_explorer` (``roofline``): intensity, ridge point, binding roof and predicted
  time (chapter 2).
- :func:`traffic_explorer` (``traffic``): transfers and bytes of naive, fused and
  epilogue-fused SwiGLU (chapters 1 and 3).
- :func:`launch_explorer` (``launch``): time against size, where launch overhead dominates
  (chapter 6).

Their parts: ``_assets`` reads the ``.js``/``.css`` files beside this module; ``_data``
reshapes ``book/data`` rows into what the widgets draw (``variant_family`` maps bench rows onto
the explorers' kernels: a name starting ``naive`` is the two-kernel family, any other
elementwise kernel fused).
"""

from .launch import LaunchExplorer, launch_explorer
from .roofline import RooflineExplorer, roofline_explorer
from .traffic import TrafficExplorer, traffic_explorer

__all__ = ["roofline_explorer", "traffic_explorer", "launch_explorer",
           "RooflineExplorer", "TrafficExplorer", "LaunchExplorer"]
