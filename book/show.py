"""``book.show(obj)``: display the real source of a library object in a notebook.

Chapters show kernels with this instead of pasting code, so the page and the
tested library cannot drift apart.
"""

from __future__ import annotations

import inspect
import textwrap


def _unwrap(obj):
    """The Python function behind a Numba dispatcher (or other wrappers)."""
    for attr in ("py_func", "__wrapped__"):
        inner = getattr(obj, attr, None)
        if inner is not None and inner is not obj:
            return _unwrap(inner)
    return obj


def source(obj) -> str:
    """Source text of a function, class, module, or Numba kernel/device function."""
    target = _unwrap(obj)
    try:
        return textwrap.dedent(inspect.getsource(target))
    except (TypeError, OSError) as exc:
        raise TypeError(
            f"book.show cannot find source for {obj!r} ({type(obj).__name__}): pass a function, "
            "class, module or Numba kernel defined in a .py file"
        ) from exc


def show(obj, *, display: bool = True) -> str:
    """Display ``obj``'s source highlighted (IPython.display.Code) and return the text.

    Outside IPython (or with ``display=False``) only the text is returned.
    """
    text = source(obj)
    if display:
        try:
            from IPython import get_ipython
            from IPython.display import Code, display as _display
        except ImportError:
            return text
        if get_ipython() is not None:
            _display(Code(text, language="python"))
    return text
