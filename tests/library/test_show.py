import pytest

import book
from book import bench
from book.show import source
from numba import cuda


@cuda.jit
def _twice(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] *= 2


def test_show_numba_kernel_returns_its_python_source():
    text = book.show(_twice)
    assert text.startswith("@cuda.jit\ndef _twice(a):")
    assert "a[i] *= 2" in text


def test_show_plain_function_and_class():
    assert book.show(bench.effective_bandwidth).startswith("def effective_bandwidth(")
    assert "class Timing" in book.show(bench.Timing)


def test_show_displays_code_in_ipython(monkeypatch):
    shown = []
    pytest.importorskip("IPython")
    import IPython
    import IPython.display

    monkeypatch.setattr(IPython, "get_ipython", lambda: object())
    monkeypatch.setattr(IPython.display, "display", shown.append)
    text = book.show(_twice)
    assert len(shown) == 1 and isinstance(shown[0], IPython.display.Code)
    assert text in shown[0].data


def test_show_without_source_says_so():
    with pytest.raises(TypeError, match="cannot find source"):
        source(len)
