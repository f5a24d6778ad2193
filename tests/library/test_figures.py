"""book/figures.py: in a notebook, `import book` makes matplotlib's inline figures retina PNGs
(twice the pixels, shown at the same size); in a script it imports no matplotlib at all. A
real kernel (nbclient) runs the notebook."""

from __future__ import annotations

import base64
import os
import subprocess
import sys

import nbformat
import pytest
from nbclient import NotebookClient
from repo import ROOT



@pytest.mark.slow
def test_a_notebook_that_imports_book_draws_retina_figures(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import book"),
                nbformat.v4.new_code_cell("import matplotlib.pyplot as plt\n"
                                          "fig, ax = plt.subplots(figsize=(6, 2), dpi=100)\n"
                                          "ax.plot([1, 2])\nplt.show()")]
    env = {**os.environ, "BOOK_SIMULATOR": "1", "PYTHONPATH": str(ROOT)}
    NotebookClient(nb, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute(env=env)
    [out] = [o for o in nb.cells[1].outputs if "image/png" in o.get("data", {})]
    png = base64.b64decode(out["data"]["image/png"])
    pixels = int.from_bytes(png[16:20], "big")
    shown = out["metadata"]["image/png"]["width"]
    assert pixels == 2 * shown and 500 <= shown <= 600   # 6 in at 100 dpi, less the margins


def test_a_script_that_imports_book_imports_no_matplotlib():
    code = "import sys, book; assert 'matplotlib' not in sys.modules, 'matplotlib imported'"
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       env={**os.environ, "BOOK_SIMULATOR": "1"})
    assert p.returncode == 0, p.stderr[-2000:]
