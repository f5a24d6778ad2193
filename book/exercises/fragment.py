"""A tensor-core fragment index function to fix (:class:`FragmentExercise`), checked against
the registers of one warp's real ``ldmatrix`` + ``mma.sync``."""

from __future__ import annotations

import html

from .core import Exercise, Feedback

__all__ = ["FragmentExercise"]

class FragmentExercise(Exercise):
    """A fragment index function to fix: ``fn(lane, e) -> (row, column)`` of the element ``e``
    that ``lane`` holds of the A operand of ``mma.sync.m16n8k16`` (e = 2 * register + half).

    The check runs one warp of :func:`book.kernels.probes.fragments.run_tile_mma` (``ldmatrix``, then
    ``mma.sync``; on the GPU, or in Numba's CUDA simulator where there is none) on an A whose
    every element is distinct (A[r, c] = 16 r + c, exact in 16 bits), reads each lane's A
    registers back, and compares where each value came from with what ``fn`` says. On an sm_75
    target (a T4, or ``COURSE_TARGET_CC=7.5``: no bf16 ``mma``) it runs the fp16 m16n8k8
    instruction instead, whose A fragment is the first four elements of the same table."""

    kind = "fragment"

    def __init__(self, question: str, *, solution_source: str = "", hints=(),
                 explanation: str = "", name: str = "ex"):
        self.solution_source = solution_source
        how = (f"Write the function, then pass it to `{name}.check(fn)`: it runs one warp's "
               "`ldmatrix` and `mma.sync` on the GPU, or in Numba's CUDA simulator where "
               "there is none, and compares every lane's registers with your function.")
        super().__init__(question, hints=hints, explanation=explanation, how=how, name=name)
        self._run = None

    def _placeholder(self) -> str:
        return f"Fix the function, pass it to `{self.name}.check(...)` and run the cell again."

    def registers(self):
        """(kind, elements per lane, A [16, K] float, values [32, n]: what each lane holds)."""
        if self._run is None:
            import numpy as np

            from .. import gpu  # noqa: F401  (GPU or simulator is decided before numba.cuda)
            from ..capability import FAMILIES
            from ..kernels.probes import fragments
            from ..kernels.instructions import tensorcore

            cc = tensorcore.target_cc()  # the GPU (or the simulator: None), or the switch's
            tensorcore.check_capability(cc, "float16")  # below sm_75: says what runs
            kind = "bf16_16816" if cc is None or FAMILIES["mma_m16n8k16"].has(cc) else "f16_1688"
            K = fragments.K_OF[kind]
            a = (16 * np.arange(16)[:, None] + np.arange(K)[None, :]).astype(np.float32)
            b = ((np.arange(K * 8).reshape(K, 8) * 5) % 11 - 5).astype(np.float32)
            if kind.startswith("bf16"):
                bits = lambda m: (m.view(np.uint32) >> 16).astype(np.uint16)  # noqa: E731
            else:
                bits = lambda m: m.astype(np.float16).view(np.uint16)  # noqa: E731
            d, regs = fragments.run_tile_mma(kind, bits(a), bits(b))
            if not np.array_equal(d, a @ b):  # the instruction itself: never the reader's fault
                raise RuntimeError(f"the {kind} mma did not compute A @ B exactly")
            n = 8 if K == 16 else 4
            half = np.zeros((32, n), dtype=np.uint16)
            for e in range(n):
                half[:, e] = (regs[:, e >> 1] >> (16 * (e & 1))) & 0xFFFF
            if kind.startswith("bf16"):
                vals = (half.astype(np.uint32) << 16).view(np.float32)
            else:
                vals = half.view(np.float16).astype(np.float32)
            self._run = (kind, n, a, vals)
        return self._run

    def _judge(self, fn) -> Feedback:
        if not callable(fn):
            return Feedback(False, f"`{self.name}.check` needs the function itself, "
                                   f"`fn(lane, e)`, got {type(fn).__name__}.")
        try:
            kind, n, a, vals = self.registers()
        except RuntimeError as err:  # a GPU without the instruction: say what it can run
            return Feedback(False, str(err))
        # the question's tile, m16n8k16's A (16 x 16); m16n8k8's A is its first 8 columns, so a
        # column past 7 there is a wrong answer, not an out-of-range one
        rows, cols = 16, 16
        wrong, owners = [], {}
        for lane in range(32):
            for e in range(n):
                try:
                    rc = fn(lane, e)
                    r, c = (int(v) for v in rc)
                except Exception as err:  # the reader's code: say what it raised
                    return Feedback(False, f"`fn({lane}, {e})` raised {type(err).__name__}: "
                                           f"{err}; it must return (row, column).")
                if not (0 <= r < rows and 0 <= c < cols):
                    return Feedback(False, f"`fn({lane}, {e})` = ({r}, {c}) is outside A "
                                           f"({rows} × {cols}).")
                owners.setdefault((r, c), []).append((lane, e))
                held = int(vals[lane, e])
                truth = divmod(held, 16)
                if (r, c) != truth:
                    wrong.append((lane, e, (r, c), truth))
        what = "m16n8k16 (bf16)" if n == 8 else "m16n8k8 (fp16, the sm_75 instruction)"
        if wrong:
            shown = "; ".join(f"lane {ln} element {e} (register {e >> 1}, "
                              f"{'high' if e & 1 else 'low'} half) holds A[{t[0]}, {t[1]}] but "
                              f"your function says A[{rc[0]}, {rc[1]}]"
                              for ln, e, rc, t in wrong[:3])
            twice = sum(1 for v in owners.values() if len(v) > 1)
            extra = (f" Your function also gives {twice} elements of A more than one owner "
                     "and leaves others with none." if twice else "")
            return Feedback(False, f"{len(wrong)} of {32 * n} elements are not where your "
                                   f"function puts them: {shown}.{extra}")
        return Feedback(True, f"all {32 * n} elements of A, in every lane's registers after "
                              f"`ldmatrix` and `mma.sync` {what}, are where your function "
                              "says: that is the PTX ISA's fragment table.")

    def _answer_text(self) -> str:
        return self.solution_source or "see book.kernels.instructions.tensorcore.a_coords"

    def _answer_html(self) -> str:
        return (f'<pre class="exercise-solution" style="margin:0.3rem 0 0.5rem 1.2rem">'
                f"{html.escape(self._answer_text())}</pre>")
