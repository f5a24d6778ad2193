"""What a changed accumulator table does: chapter 8's exercise 4, run rather than told.

The exercise moves accumulators 2 and 3 of ``c_coords`` from rows ``g + 8`` to rows
``g + shift`` and runs the chapter's one-warp cell in the simulator. :func:`in_simulator` does
exactly that: :func:`book.kernels.instructions.tensorcore.c_coords` replaced (the simulated ``mma.sync``
gathers C and hands out D by it, and :func:`book.kernels.probes.fragments.tile_mma_kernel` is rebuilt
so that its store of D follows it too), one warp's bf16 ``m16n8k16`` on the chapter's A and B,
the table put back. It runs in this process when the course uses the simulator, otherwise (on a
GPU, or under the T4 switch, which refuses bf16) in a child process with ``BOOK_SIMULATOR=1``, as
:mod:`book.bounds` does.

On a GPU the instruction's layout is the hardware's, whatever the table says: only the store
follows it. :func:`on_a_gpu` works out from the two tables which rows of D each lane would write
there. Both answers are :class:`Rows`: which rows come out right, wrong, written by lanes that
disagree (a race), or never written.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["moved_table", "in_simulator", "on_a_gpu", "Rows", "spans"]


def moved_table(shift: int):
    """``c_coords`` with accumulators 2 and 3 at rows ``g + shift`` (the ISA's: ``g + 8``)."""

    def c_coords(lane, e):
        g, t = lane >> 2, lane & 3
        return g + shift * (e >> 1), 2 * t + (e & 1)

    return c_coords


def spans(rows) -> str:
    """[0, 1, 2, 3, 8] -> "0-3 and 8"; [] -> "none"."""
    rows = sorted(set(rows))
    if not rows:
        return "none"
    parts, start = [], rows[0]
    for a, b in zip(rows, rows[1:] + [None]):
        if b != a + 1:
            parts.append(f"{start}" if start == a else f"{start}-{a}")
            start = b
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


@dataclass(frozen=True)
class Rows:
    """Rows of D (16 x 8) by outcome."""

    right: tuple
    wrong: tuple  # written, with another row's results
    raced: tuple  # written by lanes holding different results
    unwritten: tuple

    def text(self) -> str:
        parts = [f"rows {spans(self.right)} right"]
        if self.raced:
            parts.append(f"rows {spans(self.raced)} written by two lanes with different "
                         "results (a race)")
        if self.wrong:
            parts.append(f"rows {spans(self.wrong)} holding other rows' results")
        if self.unwritten:
            parts.append(f"rows {spans(self.unwritten)} never written")
        return ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]


def _classify(D, truth) -> Rows:
    right, wrong, unwritten = [], [], []
    for r in range(D.shape[0]):
        if np.isnan(D[r]).all():
            unwritten.append(r)
        elif np.array_equal(D[r], truth[r]):
            right.append(r)
        else:
            wrong.append(r)
    return Rows(tuple(right), tuple(wrong), (), tuple(unwritten))


def _run_here(shift, a_bits, b_bits):
    from .kernels.probes import fragments
    from .kernels.instructions import tensorcore

    original = tensorcore.c_coords
    tensorcore.c_coords = moved_table(shift)
    fragments.tile_mma_kernel.cache_clear()  # its store of D is built from the table
    try:
        D, _ = fragments.run_tile_mma("bf16_16816", a_bits, b_bits)
    finally:
        tensorcore.c_coords = original
        fragments.tile_mma_kernel.cache_clear()
    return D


def in_simulator(A, B, shift: int = 4, timeout_s: float = 120.0) -> Rows:
    """Rows of D after the one-warp bf16 mma of ``A`` (16 x 16) and ``B`` (16 x 8), small
    integers exact in bf16, with ``c_coords`` moved to ``g + shift``, in Numba's simulator."""
    from . import gpu
    from .target import TARGET_CC_ENV, forced_cc

    A, B = np.asarray(A, np.float32), np.asarray(B, np.float32)
    bits = [(m.view(np.uint32) >> 16).astype(np.uint16) for m in (A, B)]
    if gpu.SIMULATED and forced_cc() is None:
        D = _run_here(shift, *bits)
    else:
        env = {k: v for k, v in os.environ.items() if k != TARGET_CC_ENV}
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "d.pickle"  # not stdout: `import book` prints its status line
            p = subprocess.run([sys.executable, "-m", "book.accumulator_table", str(out)],
                               input=pickle.dumps((shift, bits)), capture_output=True,
                               timeout=timeout_s, env=dict(env, BOOK_SIMULATOR="1"))
            if p.returncode != 0 or not out.exists():
                err = p.stderr.decode(errors="replace").strip().splitlines() or ["no message"]
                raise RuntimeError(f"the simulator process failed: {err[-1]}")
            D = pickle.loads(out.read_bytes())
    return _classify(D, A @ B)


def on_a_gpu(shift: int = 4) -> Rows:
    """Rows of D on a GPU with the same change: each lane holds the rows the ISA's table gives
    it (:func:`book.kernels.instructions.tensorcore.c_coords`), and stores them where the moved table says."""
    from .kernels.instructions.tensorcore import c_coords

    moved = moved_table(shift)
    got = {r: set() for r in range(16)}  # row -> the rows whose results land there
    for lane in range(32):
        for e in range(4):
            src, dst = c_coords(lane, e), moved(lane, e)
            got[dst[0]].add(src[0])
    right = tuple(r for r, s in got.items() if s == {r})
    raced = tuple(r for r, s in got.items() if len(s) > 1)
    wrong = tuple(r for r, s in got.items() if len(s) == 1 and s != {r})
    unwritten = tuple(r for r, s in got.items() if not s)
    return Rows(right, wrong, raced, unwritten)


def _child_main() -> int:  # python -m book.accumulator_table OUT (the subprocess above)
    import book  # noqa: F401  (BOOK_SIMULATOR=1: the simulator)

    shift, bits = pickle.loads(sys.stdin.buffer.read())
    Path(sys.argv[1]).write_bytes(pickle.dumps(_run_here(shift, *bits)))
    return 0


if __name__ == "__main__":
    sys.exit(_child_main())
