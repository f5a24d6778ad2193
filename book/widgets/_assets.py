"""Front-end code of the widgets, read from the .js/.css files beside this module.

Each widget's ES module is ``common.js`` (formulas, formatting, the log-log chart) followed by
the widget's own file, joined into one self-contained module: it imports nothing, so it runs on
the static book page, in Jupyter and in Colab with no network.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

HERE = Path(__file__).parent


@lru_cache(maxsize=None)
def esm(name: str) -> str:
    """The ES module for widget file ``name`` (e.g. "roofline.js"), with common.js in front."""
    common = (HERE / "common.js").read_text(encoding="utf-8")
    own = (HERE / name).read_text(encoding="utf-8")
    return f"{common}\n// ---- {name}\n{own}"


@lru_cache(maxsize=None)
def css() -> str:
    return (HERE / "widgets.css").read_text(encoding="utf-8")
