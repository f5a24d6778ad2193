"""The CUDA-core decode GEMV (chapter 9's decode section, :mod:`book.kernels.decode_mlp`'s
path for the fewest tokens): ``out = silu(x @ wg.T + bg) * (x @ wu.T + bu)`` for ``T`` up to
its tile's ``tokens``, nn.Linear's weights ``[h, d]``, float32 accumulation.

A block owns ``rows`` output rows of both weights; its threads split d between them, each
reading 16 bytes of a weight row at a time (``load_half8``: 8 halves, widened to float32) and
the matching 16 bytes of every token of x, so a warp reads 512 contiguous bytes per load. The
partial sums meet in the block (warp shuffles, then shared memory) and the block stores
``silu(gate + bg) * (up + bu)``: gate, up and the activation in one kernel, one pass over the
weights. When the output tiles alone are too few blocks to fill the GPU, k is also split over
several blocks, the last to arrive finishing the tile (:mod:`book.kernels.splitk`).

Its cost is ``8 T`` float32 FMAs per 16-byte chunk: at T = 16 on an H100 they alone take about
80% of the time HBM needs for the weights at its peak (:func:`cuda_core_fma_time`), and a
chunk's ``16 rows T`` FMAs unroll into registers only up to ``rows T = 8`` (beyond, NVVM keeps
the accumulators in local memory). Measured on the H100 (records/bench/decode_tune_h100.json)
the tensor cores are faster from 8 tokens, so the dispatcher gives it at most
``decode_mlp.CUDA_CORE_MAX_T``. Its tile: :class:`GemvTile` (the protocol,
:mod:`book.kernels.tile`); the default for T tokens: :func:`gemv_tile`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from numba import cuda, float32, int64, uint32

from ..elementwise.fused import silu_mul
from ..host.launch import jit_bounds
from ..gemms.splitk import last_to_arrive
from ..instructions.tensorcore import shfl_xor
from ..gemms.tile import TileShape
from ..instructions.wide import load_f32, load_f32_cg, load_half8, load_words4, store_f32, unpack_half8

__all__ = ["GemvTile", "PIECE", "gemv_tile", "make_gemv", "cuda_core_fma_time"]

#: d must be a multiple of this: one 16-byte load is 8 halves of one row
PIECE = 8


def _pow2_at_least(n):
    return 1 << max(0, n - 1).bit_length()


@dataclass(frozen=True)
class GemvTile(TileShape):
    """The CUDA-core GEMV's compile-time shape: ``tokens`` (at most this many, accumulators
    per row), ``rows`` output rows of both weights per block, ``threads`` per block;
    ``min_blocks``, if not 0, the blocks an SM must hold at once (``launch_bounds``: a
    register cap for ptxas); ``prefetch``: each thread loads its next piece (as raw words,
    ``2 rows`` x 16 bytes) before the FMAs of this one, so its loads are in flight while it
    computes."""

    tokens: int = 1
    rows: int = 2
    threads: int = 256
    min_blocks: int = 0
    prefetch: bool = False

    def problems(self) -> list[str]:
        p = []
        if self.tokens < 1 or self.rows < 1:
            p.append("tokens and rows must be at least 1")
        if self.threads % 32 or not 32 <= self.threads <= 1024:
            p.append("threads must be whole warps, 32 to 1024")
        if self.values > self.threads:
            p.append(f"rows x 2 x tokens = {self.values} partial sums must not exceed the "
                     "threads that finish them")
        if self.rows * self.tokens > 8:
            p.append(f"rows x tokens = {self.rows * self.tokens}: at most 8 (a piece's "
                     "16 x rows x tokens FMAs unroll fully up to there; beyond, NVVM leaves the "
                     "accumulators in local memory: tests/library/test_ptx.py)")
        return p

    @property
    def values(self):  # partial sums a thread holds: rows x (gate, up) x tokens
        return self.rows * 2 * self.tokens

    @property
    def shared_bytes(self):  # the warps' sums, the block's, and the split-K flag (8-aligned)
        return -(-4 * (self.threads // 32 + 1) * self.values // 8) * 8 + 8


def gemv_tile(T: int, d: int) -> GemvTile:
    """The CUDA-core GEMV for T tokens (compiled for the next power of two: T = 1..8 is four
    kernels), 8 / tokens rows a block (at most 4), and rows of d halves (threads: about two
    16-byte pieces each)."""
    tokens = _pow2_at_least(max(T, 1))
    # the H100 tune (records/bench/decode_tune_h100.json): two rows a block where they fit, 256
    # threads up to 2 tokens; at 4 tokens one warp (records/bench/weight_stream_h100.json:
    # 82.5-82.7 us in four runs against 83.3-83.6 at 64 threads; decode_tune4_h100.json had
    # 64 at 83.1 against 83.7 at 128, and on the H200 65.3 against 68.5, decode_tune4_h200.json;
    # 32 not measured there); from 8 tokens 64
    cap = 256 if tokens <= 2 else 32 if tokens == 4 else 64
    threads = min(cap, max(32, _pow2_at_least(-(-d // PIECE) // 2)))
    return GemvTile(tokens=tokens, rows=max(1, min(2, 8 // tokens)), threads=threads).validate()


def cuda_core_fma_time(T: int, d: int, h: int, fma_per_s: float) -> float:
    """Seconds of float32 FMAs the CUDA-core GEMV needs at least (``2 T h d`` of them), at
    ``fma_per_s`` (an H100 SXM: 132 SMs x 128 lanes x 1.98 GHz = 3.3e13)."""
    return 2 * T * d * h / fma_per_s


@functools.lru_cache(maxsize=None)
def make_gemv(tile: GemvTile, bias: bool):
    """``k(x, wg, wu, bg, bu, out, part, count, T, d, h, S)``, flat arrays; one block per
    (``tile.rows`` rows, split) (module doc)."""
    tile.validate()
    TB, R, NTH = tile.tokens, tile.rows, tile.threads
    NW = NTH // 32
    V = tile.values
    WV = R * 16  # a thread's weight values of one piece: rows x (gate, up) x 8
    BIAS = bias
    PF = tile.prefetch

    @cuda.jit(device=True, inline="always")
    def fetch(wg, wu, pw, j0, k, d, h):
        # the piece at k of this block's rows, both weights, as raw words (4 registers each)
        for r in range(R):
            row = min(j0 + r, h - 1) * d + k
            a = load_words4(wg, row)
            b = load_words4(wu, row)
            for q in range(4):
                pw[r, 0, q] = a[q]
                pw[r, 1, q] = b[q]

    def gemv(x, wg, wu, bg, bu, out, part, count, T, d, h, S):
        tid = cuda.threadIdx.x
        lane = tid & 31
        warp = tid >> 5
        tile_ = cuda.blockIdx.x // S  # the blocks of one tile are neighbours
        s = cuda.blockIdx.x - tile_ * S
        j0 = tile_ * R
        nch = d >> 3  # 16-byte pieces per row
        per = (nch + S - 1) // S
        c0 = s * per
        c1 = min(nch, c0 + per)
        acc = cuda.local.array(V, float32)  # [row][gate, up][token]
        for v in range(V):
            acc[v] = float32(0.0)
        wv = cuda.local.array(WV, float32)
        pw = cuda.local.array((R, 2, 4), uint32)  # the next piece's raw words (prefetch)
        # rows past h (the last tile) read row h - 1 and are never stored; tokens past T
        # read token T - 1 (in range, finite) and are never stored either
        if PF and c0 + tid < c1:
            fetch(wg, wu, pw, j0, (c0 + tid) << 3, d, h)
        for c in range(c0 + tid, c1, NTH):
            k = c << 3
            for r in range(R):  # every weight load first: 2 R x 16 bytes in flight
                if PF:  # (prefetch: this piece from the words loaded ahead)
                    a = unpack_half8(wg, (pw[r, 0, 0], pw[r, 0, 1], pw[r, 0, 2], pw[r, 0, 3]))
                    b = unpack_half8(wu, (pw[r, 1, 0], pw[r, 1, 1], pw[r, 1, 2], pw[r, 1, 3]))
                else:
                    row = min(j0 + r, h - 1) * d + k
                    a = load_half8(wg, row)
                    b = load_half8(wu, row)
                for e in range(8):
                    wv[r * 16 + e] = a[e]
                    wv[r * 16 + 8 + e] = b[e]
            if PF and c + NTH < c1:  # the next piece's loads, in flight during the FMAs
                fetch(wg, wu, pw, j0, k + (NTH << 3), d, h)
            for t in range(TB):
                xt = load_half8(x, min(t, T - 1) * d + k)
                for r in range(R):
                    for w in range(2):
                        sacc = acc[(r * 2 + w) * TB + t]
                        for e in range(8):
                            sacc += wv[r * 16 + w * 8 + e] * xt[e]
                        acc[(r * 2 + w) * TB + t] = sacc
        # the block's sums: each warp's by shuffles, then the warps' through shared memory
        for v in range(V):
            a = acc[v]
            a += shfl_xor(a, 16)
            a += shfl_xor(a, 8)
            a += shfl_xor(a, 4)
            a += shfl_xor(a, 2)
            a += shfl_xor(a, 1)
            acc[v] = a
        red = cuda.shared.array((NW, V), float32)
        fin = cuda.shared.array(V, float32)
        flag = cuda.shared.array(1, int64)
        if lane == 0:
            for v in range(V):
                red[warp, v] = acc[v]
        cuda.syncthreads()
        tot = float32(0.0)
        if tid < V:
            for w in range(NW):
                tot += red[w, tid]
        if S > 1:  # split-K over blocks: the last to arrive adds the S partials in order
            if tid < V:
                part[(tile_ * S + s) * V + tid] = tot
            if not last_to_arrive(count, tile_, S, flag):
                return
            if tid < V:
                tot = float32(0.0)
                for q in range(S):
                    tot += load_f32_cg(part, (tile_ * S + q) * V + tid)
        if tid < V:
            fin[tid] = tot
        cuda.syncthreads()
        if tid < R * TB:  # the epilogue: thread (r, t) stores out[t, j0 + r]
            r = tid // TB
            t = tid - r * TB
            j = j0 + r
            if j < h and t < T:
                gate = fin[(r * 2) * TB + t]
                up = fin[(r * 2 + 1) * TB + t]
                if BIAS:
                    gate += load_f32(bg, j)
                    up += load_f32(bu, j)
                store_f32(out, t * h + j, silu_mul(gate, up))

    return cuda.jit(fastmath=True, **jit_bounds(NTH, tile.min_blocks))(gemv)
