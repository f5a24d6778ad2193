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


@pytest.mark.parametrize("draw", ["fragment_grids", "descriptor_figure"])
def test_dense_figures_keep_their_labels_readable_on_a_laptop(draw):
    """Reader QA: chapter 8's lane grids (lane numbers at 6 points in a 956-pixel figure that a
    1280-pixel window shrinks to its 736-pixel column) and chapter 9's swizzle figure (row
    labels at 6.5 points) showed their labels 6 to 7 pixels tall. Drawn as the chapters draw
    them, their smallest text is shown at MIN_TEXT_PX or more."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from book import diagrams, figures
    from book import hopper_figures as hf

    axes = {"fragment_grids": diagrams.fragment_grids,
            "descriptor_figure": hf.descriptor_figure}[draw]()
    fig = axes[0].figure
    fig.tight_layout()
    px, text = figures.smallest_text_px(fig)
    plt.close(fig)
    assert px >= figures.MIN_TEXT_PX, f"{draw}: {text!r} shown {px:.1f} px tall"


def test_the_ring_timeline_keeps_its_labels_readable_on_a_laptop():
    """Reader QA: chapter 9's ring timeline (Fig. 21; k-block labels at 6.5 points, legend at
    7, in a 9-inch figure that a 1280-pixel window shrinks to its column) showed its labels 4
    to 7 pixels tall. Drawn as chapter 9 draws it, two timelines one above the other, its
    smallest text is shown at MIN_TEXT_PX or more."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from book import figures
    from book import hopper_figures as hf
    from book.kernels.gemms import wgmma_gemm

    fig, axes = plt.subplots(2, 1, figsize=(9, 6.2))
    for ax, copy in zip(axes, (2.0, 4.0)):
        events = hf.ring_model(wgmma_gemm.TILE, k_blocks=6, tiles=2, copy=copy, mma=3.0,
                               epilogue=5.0)
        hf.ring_figure(events, ax, title="A model, not a measurement: copies faster than "
                                         "wgmma (copy 2, wgmma 3, epilogue 5)")
    fig.tight_layout()
    px, text = figures.smallest_text_px(fig)
    plt.close(fig)
    assert px >= figures.MIN_TEXT_PX, f"ring_figure: {text!r} shown {px:.1f} px tall"


def test_the_readable_size_counts_the_shrinking():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from book import figures

    for width_in, expect in ((6, 8 * 100 / 72), (20, 8 * 100 / 72 * figures.COLUMN_PX / 2020)):
        fig, ax = plt.subplots(figsize=(width_in, 2), dpi=100)
        ax.set_axis_off()
        ax.text(0, 0, "x", fontsize=8)
        ax.text(1, 1, "wide", fontsize=12)
        ax.set_xlim(0, 1), ax.set_ylim(0, 1)
        ax.set_position([0, 0, 1, 1])
        px, text = figures.smallest_text_px(fig)
        plt.close(fig)
        assert text == "x" and px == pytest.approx(expect, rel=0.03), (width_in, px)
