"""A kernel to fix or complete (:class:`KernelExercise`), run on the GPU or in Numba's CUDA
simulator and compared with the float64 truth."""

from __future__ import annotations

import contextlib
import html
import importlib
import warnings

from .core import Exercise, Feedback

__all__ = ["KernelExercise"]

class KernelExercise(Exercise):
    """A kernel to fix or complete, run on the GPU (or in Numba's CUDA simulator where there
    is none) and checked against the float64 truth.

    The candidate is a ``@cuda.jit`` kernel taking ``(gate, up, out)`` float32 arrays,
    launched with one thread per element on ``n`` elements (not a multiple of ``block``,
    so a missing bounds check shows) and compared with ``book.kernels.reference.swiglu``
    within its float32 tolerance. ``out`` starts as NaN so that unwritten elements show."""

    kind = "kernel"

    def __init__(self, question: str, *, n: int = 300, block: int = 128, seed: int = 0,
                 solution_source: str = "", hints=(), explanation: str = "",
                 name: str = "ex"):
        if n % block == 0:
            raise ValueError("choose n not a multiple of block, so that a kernel without "
                             "a bounds check is caught")
        self.n, self.block, self.seed = n, block, seed
        self.solution_source = solution_source
        # true on both kinds of session: the published pages are recorded on a GPU, a
        # reader without one runs the same cell in the simulator
        how = (f"Write the kernel, then pass it to `{name}.check(kernel)`: it runs on the GPU, "
               f"or in Numba's CUDA simulator where there is none, on {n} elements, "
               f"{block} threads per block, and is compared with the float64 reference.")
        super().__init__(question, hints=hints, explanation=explanation, how=how, name=name)

    def _placeholder(self) -> str:
        return (f"Complete the kernel, pass it to `{self.name}.check(...)` and run the cell "
                "again.")

    def _judge(self, kernel) -> Feedback:
        import numpy as np

        from .. import gpu  # noqa: F401  (GPU or simulator is decided before numba.cuda)
        from ..kernels import reference

        if not callable(getattr(kernel, "__getitem__", None)):
            return Feedback(False, f"`{self.name}.check` needs the kernel itself (a "
                                   f"`@cuda.jit` function), got {type(kernel).__name__}.")
        from numba import cuda

        grid = -(-self.n // self.block)
        spare = grid * self.block - self.n  # threads past the end of the arrays
        # Each array is the first n elements of a longer device allocation, so a
        # kernel without a bounds check touches memory that exists: on a GPU that is
        # caught below (NaN padding overwritten) instead of faulting the context,
        # and the simulator raises IndexError at the view's end.
        total = self.n + spare
        gate_all, up_all = reference.random_inputs(total, "float32", seed=self.seed)
        gate, up = gate_all[:self.n], up_all[:self.n]
        d_gate, d_up = cuda.to_device(gate_all), cuda.to_device(up_all)
        d_out = cuda.to_device(np.full(total, np.nan, dtype=np.float32))
        try:
            with _quiet_performance_warnings():
                kernel[grid, self.block](d_gate[:self.n], d_up[:self.n], d_out[:self.n])
                cuda.synchronize()
        except IndexError as err:
            return self._past_the_end(grid, spare, f"indexed past the end of the arrays "
                                                   f"({err})")
        except Exception as err:  # the reader's code: say what it raised, never hang
            return Feedback(False, f"the kernel raised {type(err).__name__}: {err}")
        out_all = d_out.copy_to_host()
        if not np.isnan(out_all[self.n:]).all():
            return self._past_the_end(grid, spare, "wrote past the end of `out`")
        return self.verdict(out_all[:self.n], gate, up)

    def verdict(self, out, gate, up) -> Feedback:
        """Right or not yet, and why, for what a kernel wrote into ``out`` (float32, filled
        with NaN before the launch) from ``gate`` and ``up``: compared with the float64
        reference within the float32 tolerance by :func:`book.answers.compare_array`, in the
        words a lab's ``check()`` and the grader use; after them, for the first bad element,
        its worked value (what a reader checks a formula against) or, never written, where to
        look (the thread index)."""
        import numpy as np

        from ..answers import compare_array, within
        from ..kernels import reference

        expected = reference.swiglu(gate, up, "float32")
        tol = reference.TOLERANCE["float32"]
        ok, said = compare_array(out, expected, rtol=tol["rtol"], atol=tol["atol"],
                                 dtype_name="float32", what="out")
        if ok:
            return Feedback(True, f"all {out.size} elements match `silu(gate) * up`: {said}.")
        i = int(np.argmax(~within(out.astype(np.float64), expected, **tol)))
        if np.isnan(out[i]):  # never written: the grid, not the formula, is what to look at
            return Feedback(False, f"{said}. Does every element get a thread "
                                   "(`cuda.grid(1)`)?")
        return Feedback(False, f"{said}. There `silu(gate) * up` = silu({gate[i]:.4g}) * "
                               f"{up[i]:.4g} = {expected[i]:.6g}.")

    def _past_the_end(self, grid, spare, what) -> Feedback:
        return Feedback(False, f"the kernel {what}. "
                               f"{self.n} elements need {grid} blocks of {self.block} "
                               f"threads = {grid * self.block} threads: the last {spare} "
                               "must do nothing (`if i < out.size:`).")

    def _answer_text(self) -> str:
        return self.solution_source or "see the chapter's kernel"

    def _answer_html(self) -> str:
        # a block of its own, beside the explanation's <p> (never inside one); indented as
        # the theme indents a fold's paragraphs (tools/theme/course.css: details > p)
        return (f'<pre class="exercise-solution" style="margin:0.3rem 0 0.5rem 1.2rem">'
                f"{html.escape(self._answer_text())}</pre>")



def _performance_warnings() -> list[type]:
    """Numba's NumbaPerformanceWarning classes. numba-cuda raises its own
    (``numba.cuda.core.errors``), not a subclass of ``numba.core.errors``' one: filtering
    only the latter let the warning through on the H100 (chapter 5's recorded page)."""
    found = []
    for module in ("numba.cuda.core.errors", "numba.core.errors"):
        try:
            cls = getattr(importlib.import_module(module), "NumbaPerformanceWarning")
        except (ImportError, AttributeError):
            continue
        if cls not in found:
            found.append(cls)
    return found


@contextlib.contextmanager
def _quiet_performance_warnings():
    """Silence Numba's performance warnings for the exercise's own launch, and only there.

    A 3-block grid is the point of the exercise, not a performance problem; on a GPU Numba
    warns "Grid size 3 will likely result in GPU under-utilization", with the path of its
    own source file, into the reader's page."""
    with warnings.catch_warnings():
        for cls in _performance_warnings():
            warnings.simplefilter("ignore", cls)
        yield
