"""The course library: kernels, the timing harness, traffic counts and the roofline.

``import book`` first, before anything imports ``numba.cuda``: :mod:`book.gpu`
decides there whether kernels run on a CUDA GPU or in Numba's simulator.
Submodules load lazily (``book.bench``, ``book.traffic``, ...), so ``import book``
stays cheap and never imports torch.

The map (each package's docstring is its own; tests/tooling/test_contributing.py checks that
every module is named):

Packages
  ``kernels``: the Numba CUDA kernels, one module per idea, and the registry of variants.
  ``bench``: the one timing harness (``book.bench.measure``) and the benchmark suite.
  ``tracer``: the access tracer (chapters 4, 6 and 7).
  ``exercises``: the chapters' checked exercises.
  ``widgets``: anywidget explorers whose front-end code draws by itself.
  ``data``: measured results (``<gpu>.json``, with provenance), which chapters load figures
  from; ``book.data.write`` writes a record atomically; ``lineage``: rows, targets and records
  note the run they came from when read, so a notebook cell whose numbers come from several
  runs names each under its output, and ``tools.record`` keeps every cell's runs in the
  recording.

Answers
  ``answers``: the one answer checker: a result against its float64 reference (the tolerance
  test ``within``, an output array's words and a number's, how far a number is, stores outside
  an array), said the same way by the chapters' exercises, a lab's ``check()`` and the grader,
  which imports it from here (``book`` never imports ``autograder``).

GPU or simulator
  ``gpu``: find a CUDA GPU or switch Numba to its simulator (runs on ``import book``, before
  ``numba.cuda`` is imported); device facts; the simulator's speed (``SIM_THREADS_PER_S``,
  which the tracer's and the grader's simulator budgets are reckoned from); driver-too-old
  diagnosis. ``driver_errors``: why a GPU runtime cannot run Numba kernels, and the fix.
  ``target``: the T4 switch: ``COURSE_TARGET_CC=7.5`` makes the course take the sm_75 paths on
  any newer GPU or in the simulator (``book.capability.target_cc()`` answers it; on a
  GPU ``book.gpu`` has Numba compile for that target, so ptxas refuses what a T4 lacks; the
  grader passes it to its children; ``book.provenance`` records it as ``target_cc``).
  ``capability``: what the course's instruction families need (fp16 ``mma.sync`` m16n8k8 from
  sm_75, bf16 m16n8k16 and ``cp.async`` from sm_80, ``wgmma`` on sm_90a only) and the one check
  that refuses a GPU without them, naming it as the switch's target, this GPU or one asked
  about (``tensorcore.check_capability`` and ``hopper.check_capability`` are it; issue 44).
  ``simulator``: Numba's CUDA simulator made to behave as a GPU does (shared arrays, the
  blocks' order, a 2-D array's ``.T``, addresses past a dimension), faster (a waiting block
  scheduler, blocks without barriers run thread by thread) and watched for hazards (races,
  divergent barriers, reads outside an array, by the happens-before the course teaches); its
  package docstring is its map.
  ``numba_compat``: every reach past numba-cuda's public API, one function each, checked
  against the installed numba-cuda by tests/library/test_numba_compat.py.
  ``sanitizer``: compute-sanitizer (memcheck with padding, racecheck, synccheck) run and parsed
  into sentences about the student's own lines, its time budget (``TIMEOUT_S``); "not
  available on this machine" where it cannot run.
  ``bounds``: chapter 4's out-of-bounds launch in the simulator (a simulator subprocess on a
  GPU), its message decoded, and what a GPU does instead.

Counts and models
  ``dtypes``: the three dtypes: names, aliases, item sizes, NumPy storage (imported by
  traffic, reference, kernels, bench). ``specs``: common GPUs' peak memory bandwidth and
  FP32/FP16/BF16/TF32 peaks, each with its source; the one matcher of driver-reported names
  (``match``, ``key_of``) and ``slug(name)``, the name of a GPU's records
  (``book/data/<slug>.json``, ``records/chapters/<slug>/``, ``records/tests/gpu_<slug>.json``).
  ``provenance``: ``provenance(command)``: GPU, driver, versions, date, command, commit of
  every record. ``traffic``: bytes, transfers and flops of each SwiGLU variant and of one GEMM
  (``gemm``); arithmetic intensity. ``roofline``: roofline predictions and the plot.
  ``quantize``: eight-bit quantization with scales per tensor, token, output channel or block
  (``per_token``, ``per_channel``, ``per_block`` with ``ACT_BLOCK`` 1 x 128 and
  ``WEIGHT_BLOCK`` 128 x 128; ``quantize_torch`` for CUDA tensors, the same codes; codes by
  ``book.kernels.instructions.fp8.encode_fast``, rows at a time), saturated values counted (a static scale
  too: ``act_scale``, ``out_scale``), the MLP-up's error against float64 of the unquantized
  layer beside bf16's (``reference``, ``mlp_up_error``, ``bf16_error``); ``random_layer``: the
  course's layer with outlier channels or features; tests/library/test_quantize.py,
  tests/library/test_fp8_chapter.py.

The chapters' readers and pictures
  ``show``: ``book.show(obj)`` displays a library object's source in a notebook.
  ``figures``: in a notebook, ``import book`` asks for retina figures (twice the pixels, the
  same size); ``smallest_text_px``: how tall a figure's smallest text is shown in a 1280-px
  window (``COLUMN_PX``), held to ``MIN_TEXT_PX`` for the dense figures.
  ``sources``: the four source documents, each named by what it is (title, author) with its
  label on the sources page (chapters/appendix_sources.md); pages never call them by file
  number (tests/built_book/test_reader.py).
  ``quotes``: a measured figure in a page's prose, ``{measured}`family arg ...``` in its
  Markdown, computed from its record under ``records/`` when the page is built and linked to it
  (``tools/sphinx_course.py``): prose names a figure without typing it or needing a code cell
  (which would need the chapter recorded again); tests/library/test_quotes.py.
  ``claims``: the source documents' figures beside our measurements, from ``book/data``;
  ``published_gemm()``: the PTX-DSL project's published Hopper GEMM figure, labelled as
  published (chapter 9).
  ``diagrams``: the tiled GEMM (block tile, k-slab, register block, double buffer) drawn from
  its ``Tile``; chapter 8's lane grids of the ``mma.sync`` fragments (``fragment_grids``).
  ``saving``: chapter 7's saving breakdown: the gap between the unfused path and the dual GEMM
  taken apart with its identity-epilogue control; a difference within the measured spread is
  drawn and labelled "within noise (± spread)", never as a saving.
  ``accumulator_table``: chapter 8's exercise 4 run rather than told: the one-warp mma in the
  simulator with ``c_coords`` changed (a simulator process on a GPU), and what a GPU would do.
  ``decode_cost``: what a decode-size call costs, from one record: the layers of a call with
  their spread, the section's first table (``call_rows``: host rows of one run only, beside
  the GPU rows), the three launch paths (Numba's dispatcher, ``book.kernels.host.fastcall``, a
  CUDA-graph replay) and a decode step's time per path (chapter 6's decode section).
  ``decode_sweep``: the MLP-up over T = 1..8192 from one record's ``decode_sweep`` rows
  (book/bench/decode.py): curves in GB/s of weights and TFLOP/s, the dispatcher's path shaded
  (``plot``), once an H100 run has recorded them.
  ``hopper_figures``: chapter 9's pictures and tables from the Hopper models: the shared bytes
  one ``wgmma`` reads in three layouts and their bank groups (``descriptor_figure``), the
  mbarrier ring played out by a model (``ring_model``, ``ring_figure``: a model, not a
  measurement), the comparison table's rows as the record names them (``measurement_rows``,
  ``clustered``), the epilogue rule predicted beside measured (``rule_rows``).
  ``fp8_data``: the "Eight bits" chapter's record: ``python -m book.fp8_data
  records/fp8/<record>.json ...`` turns the FP8 benchmarks' records into
  ``book/data/fp8/<gpu>.json`` (rows each with its run's provenance, the torch-events
  re-timing, SM clock and power; a later record's row replaces an earlier one's); ``load`` and
  ``extras`` read it; tests/library/test_fp8_chapter.py builds it again and finds it unchanged.
  ``fp8_figures``: the "Eight bits" chapter's pictures and tables: a code bit by bit
  (``fields``, ``bits_figure``), every value of e4m3 and e5m2 (``ladder``, ``values_figure``),
  bytes per weight and the roofline at every T with the record's points (``call_bytes``,
  ``predicted_seconds``, ``roofline_figure``; ``FP8_PEAK``: the datasheets' dense FP8 rates
  with their sources), where the scales live (``scales_figure``), each scheme's error with
  outliers and with a static output scale (``scheme_errors``, ``outlier_sweep``,
  ``sweep_figure``, ``out_scale_rows``), the comparison's and the decode table's rows
  (``measurement_rows``, ``decode_rows``).
"""

from __future__ import annotations

import importlib
import sys

from . import gpu  # must run first: GPU or simulator
from .figures import sharpen_inline_figures
from .show import show

sharpen_inline_figures()   # in a notebook: figures at twice the pixels (book/figures.py)


def _watch_runs() -> bool:
    """In a notebook (an IPython kernel): name the measurement runs under a cell whose numbers
    come from several (book/data/lineage.py). Nowhere else: a script or the grader's sandbox
    (whose copy of book has no data) never loads it."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None or not hasattr(shell, "kernel"):
        return False
    try:
        from .data.lineage import watch
    except ImportError:
        return False
    return watch(shell)


_watch_runs()

__all__ = ["gpu", "show", "sharpen_inline_figures", "specs", "traffic", "roofline", "bench", "kernels", "data",
           "widgets", "claims"]

_LAZY = {"specs", "traffic", "roofline", "bench", "kernels", "data", "widgets", "claims"}


def __getattr__(name: str):
    if name in _LAZY:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'book' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | _LAZY)
