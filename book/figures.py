"""Figures in a notebook at twice the pixels: sharp on a phone or a high-density screen.

Matplotlib's inline figures are PNGs at 100 dpi. A course page shrinks a 750-pixel figure to
about 340 pixels on a phone, and a reader who zooms in to read its labels gets a blur. With
IPython's "retina" format the same figure is drawn at twice the pixels and shown at the same
size (the output says its display width), so zooming reads it. ``import book`` asks for it
once, in an IPython kernel only: there it imports matplotlib (a notebook draws anyway); a
script or the grader's sandbox never pays for it.

A figure's labels must stay readable where the page shrinks it: :func:`smallest_text_px` says
how large its smallest text is shown in a 1280-pixel window (``MIN_TEXT_PX`` at least, held by
tests/library/test_figures.py).
"""

from __future__ import annotations

import sys


def sharpen_inline_figures() -> bool:
    """Ask the running IPython kernel for retina PNG figures; False where there is none (a
    script, the grader's sandbox) or it refuses. Never raises."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
        if shell is None or not hasattr(shell, "kernel"):
            return False
        from matplotlib_inline.backend_inline import set_matplotlib_formats

        set_matplotlib_formats("retina")
        return True
    except Exception:  # an old or odd IPython: the figures stay at 100 dpi, nothing breaks
        return False


#: The content column's width, in CSS pixels, in a 1280-pixel window (tools/theme/course.css;
#: tests/built_book/test_site.py measures it): a wider figure is shrunk to it there.
COLUMN_PX = 736
#: The smallest text a course figure draws, in CSS pixels as a 1280-pixel window shows it
#: (chapter 8's lane numbers and chapter 9's row labels were 6 to 7 pixels).
MIN_TEXT_PX = 9.0


def display_width_px(fig) -> float:
    """The width a notebook shows ``fig`` at, in CSS pixels: the inline backend crops it to
    its tight box (with 0.1 inch of padding) at the figure's dpi; retina PNGs keep that size."""
    renderer = fig.canvas.get_renderer()
    return (fig.get_tightbbox(renderer).width + 0.2) * fig.dpi


def smallest_text_px(fig, column_px: float = COLUMN_PX) -> tuple[float, str]:
    """The smallest visible text of ``fig`` as a page shows it in a 1280-pixel window (its
    points at the figure's dpi, shrunk where the figure is wider than the column), and that
    text."""
    from matplotlib.text import Text

    fig.canvas.draw()
    scale = min(1.0, column_px / display_width_px(fig))
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    t = min(texts, key=lambda t: t.get_fontsize())
    return t.get_fontsize() * fig.dpi / 72 * scale, t.get_text()
