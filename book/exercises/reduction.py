"""A split row sum to complete (:class:`ReductionExercise`): several blocks share each row of a
matrix and meet in the kernel, the last block to arrive adding their partial sums; run on the
GPU or in Numba's CUDA simulator and compared with the float64 sums."""

from __future__ import annotations

import html

from ..answers import within
from .core import Exercise, Feedback
from .kernel import _quiet_performance_warnings

__all__ = ["ReductionExercise"]


class ReductionExercise(Exercise):
    """A kernel ``kernel(a, out, part, count, splits)`` that sums each row of ``a`` (float32,
    ``[rows, n]``) into ``out[row]`` with ``splits`` blocks per row (block ``b`` is row
    ``b // splits``, share ``b % splits``), their partial sums met in the kernel: each block
    leaves its partial in ``part[row * splits + share]`` and counts its arrival on
    ``count[row]`` (int32, zero when a launch starts); the last to arrive adds the partials
    and leaves ``count[row]`` at zero again.

    The check launches it twice on the same ``part`` and ``count``, with other data and another
    split the second time (a counter left standing shows there), ``block`` threads per block, on
    ``n`` not a multiple of ``block * splits``; ``out`` starts as NaN each time (a fresh
    allocation holds anything). The answer is compared with the float64 row sums within
    float32's accumulation error, and the wrong answers a missing part makes are named."""

    kind = "reduction"

    def __init__(self, question: str, *, rows: int = 3, n: int = 200, block: int = 64,
                 splits=(3, 2), seed: int = 0, solution_source: str = "", hints=(),
                 explanation: str = "", name: str = "ex"):
        if block % 32:
            raise ValueError("block must be whole warps (a multiple of 32): the block sum "
                             "shuffles within warps")
        if any(n % (block * s) == 0 for s in splits):
            raise ValueError("choose n not a multiple of block * splits, so that a share "
                             "that is not whole blocks of elements shows")
        self.rows, self.n, self.block, self.splits = rows, n, block, tuple(splits)
        self.seed = seed
        self.solution_source = solution_source
        how = (f"Complete the kernel, then pass it to `{name}.check(kernel)`: it runs on the "
               "GPU, or in Numba's CUDA simulator where there is none, twice on the same "
               f"workspace ({' then '.join(map(str, self.splits))} blocks per row, {block} "
               f"threads each, {rows} rows of {n}), and compares `out` with the float64 row "
               "sums.")
        super().__init__(question, hints=hints, explanation=explanation, how=how, name=name)

    def _placeholder(self) -> str:
        return (f"Complete the kernel, pass it to `{self.name}.check(...)` and run the cell "
                "again.")

    def inputs(self, launch: int):
        """The matrix of launch ``launch`` (0, 1, ...): float32, seeded, a different one each
        launch."""
        import numpy as np

        rng = np.random.default_rng(self.seed + 101 * launch)
        return rng.standard_normal((self.rows, self.n)).astype(np.float32)

    def _judge(self, kernel) -> Feedback:
        import numpy as np

        from .. import gpu  # noqa: F401  (GPU or simulator is decided before numba.cuda)

        if not callable(getattr(kernel, "__getitem__", None)):
            return Feedback(False, f"`{self.name}.check` needs the kernel itself (a "
                                   f"`@cuda.jit` function), got {type(kernel).__name__}.")
        from numba import cuda

        rows = self.rows
        part = cuda.to_device(np.zeros(rows * max(self.splits), np.float32))
        count = cuda.to_device(np.zeros(rows, np.int32))
        for launch, splits in enumerate(self.splits):
            a = self.inputs(launch)
            out = cuda.to_device(np.full(rows, np.nan, np.float32))
            try:
                with _quiet_performance_warnings():
                    kernel[rows * splits, self.block](cuda.to_device(a), out, part, count,
                                                      splits)
                    cuda.synchronize()
            except Exception as err:  # the reader's code: say what it raised, never hang
                return Feedback(False, f"the kernel raised {type(err).__name__}: {err}")
            got = out.copy_to_host()
            left = count.copy_to_host()
            verdict = self._verdict(a, got, left, splits, launch)
            if verdict is not None:
                return verdict
        return Feedback(True, f"every row's sum matches the float64 sum, with "
                              f"{' and then '.join(map(str, self.splits))} blocks per row on "
                              "the same workspace, and `count` is back at zero after each "
                              "launch.")

    def _verdict(self, a, got, left, splits, launch):
        """None when launch ``launch`` is right, else what is wrong with it."""
        import numpy as np

        truth = a.astype(np.float64).sum(axis=1)
        # float32 accumulation: a few roundings of the running sums, each up to 2**-24 of
        # the magnitudes added
        tol = 1e-5 * np.abs(a).astype(np.float64).sum(axis=1) + 1e-6
        ok = within(got, truth, rtol=0.0, atol=tol)   # the one tolerance test (book.answers)
        which = "the first launch" if launch == 0 else (
            f"the second launch ({splits} blocks per row, on the workspace the first left)")
        if ok.all():
            if left.any():
                r = int(np.argmax(left != 0))
                return Feedback(False, f"the sums are right, but after {which} "
                                       f"`count[{r}]` is {int(left[r])}, not 0: the next "
                                       "launch would count from there, and its last block "
                                       "would never see `splits - 1` arrivals before its "
                                       "own. The last block resets its row's counter.")
            return None
        r = int(np.argmax(~ok))
        if np.isnan(got[r]):
            return Feedback(False, f"in {which}, `out[{r}]` is NaN. `out` starts as NaN here "
                                   "(a fresh allocation holds anything, never zeros for "
                                   "sure): nobody stored the row's sum, or it was added to "
                                   "what `out` already held. The last block to arrive stores "
                                   "`out[row]` once.")
        shares = self._shares(a, splits)
        if np.any(within(got[r], shares[r], rtol=0.0, atol=tol[r])):
            return Feedback(False, f"in {which}, `out[{r}]` is {got[r]:.6g}: one block's share "
                                   f"of row {r}, not the row's sum ({truth[r]:.6g}). The blocks "
                                   "of a row did not meet: each stored its own partial and "
                                   "the last writer won. Leave each partial in `part`, count "
                                   "the arrivals, and let the last block add them.")
        if launch > 0:
            return Feedback(False, f"the first launch was right, {which} is not: `out[{r}]` "
                                   f"is {got[r]:.6g}, the sum is {truth[r]:.6g}. Was `count` "
                                   "left at zero by the first launch, and does the last block "
                                   "add exactly `splits` partials, those of this launch?")
        return Feedback(False, f"`out[{r}]` is {got[r]:.6g}, the row's sum is {truth[r]:.6g}. "
                               "Does the last block add all `splits` partials of its row "
                               "(its own too), reading them with `cuda.atomic.add(part, i, "
                               "float32(0.0))` so that it sees what the other blocks wrote?")

    def _shares(self, a, splits):
        """[rows, splits]: each block's share of its row, float64 (as the kernel splits it)."""
        import numpy as np

        per = -(-self.n // splits)
        return np.array([[a[r, s * per: min(self.n, (s + 1) * per)].astype(np.float64).sum()
                          for s in range(splits)] for r in range(self.rows)])

    def _answer_text(self) -> str:
        return self.solution_source or "see the chapter's kernel"

    def _answer_html(self) -> str:
        return (f'<pre class="exercise-solution" style="margin:0.3rem 0 0.5rem 1.2rem">'
                f"{html.escape(self._answer_text())}</pre>")
