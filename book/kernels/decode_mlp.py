"""The MLP-up at decode: ``out = silu(x @ wg.T + bg) * (x @ wu.T + bu)`` for a few tokens.

Weights in nn.Linear's layout: ``wg``, ``wu`` are ``[h, d]`` (out_features by in_features),
``x`` is ``[T, d]``, the biases ``[h]`` (optional, both or neither), ``out`` is ``[T, h]``;
bfloat16 (torch bfloat16, or its bits as uint16/int16) or float16, float32 accumulation.

At decode T is small (one token per sequence in the batch) and the weights are the work:
``2 h d`` halves, 235 MB at d = 4096, h = 14336, read once for about ``4 T h d`` flops. The
kernels are GEMVs whose job is to keep HBM busy; which one is best depends on T
(:func:`path_for`, :func:`swiglu_decode`):

- ``T <= CUDA_CORE_MAX_T``: :func:`swiglu_gemv`, CUDA cores. A block owns ``rows`` output
  rows of both weights; its threads split d between them, each reading 16 bytes of a
  weight row at a time (``load_half8``: 8 halves, widened to float32) and the matching 16
  bytes of every token of x, so a warp reads 512 contiguous bytes per load. The partial
  sums meet in the block (warp shuffles, then shared memory) and the block stores
  ``silu(gate + bg) * (up + bu)``: gate, up and the activation in one kernel, one pass over
  the weights. Its cost is ``8 T`` float32 FMAs per 16-byte chunk: at T = 16 on an H100
  they alone take about 80% of the time HBM needs for the weights at its peak
  (``cuda_core_fma_time``), and a chunk's ``16 rows T`` FMAs unroll into registers only up
  to ``rows T = 8`` (beyond, NVVM keeps the accumulators in local memory). Measured on the
  H100 (records/bench/decode_tune_h100.json) the tensor cores are faster from 8 tokens, so it
  takes at most 4.
- ``T <= TENSOR_CORE_MAX_T``: :func:`swiglu_gemv_tc`, tensor cores (``mma.sync``, sm_80 in
  bf16 and fp16, and fp16 on sm_75 as ``m16n8k8``) with the roles swapped: the weights are
  the A operand (16 rows of the M side) and the tokens the B operand (8 columns of N), so a
  token count of 1 wastes N, never the weights. No shared memory and no ``ldmatrix``:
  since a dot product does not care in which order it visits k, each lane loads 16 bytes
  (8 consecutive k) of weight row ``g`` and of row ``g + 8`` (``load_words4``, the halves as
  they are) and 16 bytes of token ``g``, and feeds them to two ``mma`` as if they were the
  k-columns the fragment table names (``2t, 2t+1, 2t+8, 2t+9`` of a 16-deep step): the same
  permutation of k on both operands leaves the product unchanged. With ``stages`` >= 2
  (:class:`MmaGemvTile`) the weights go through shared memory instead: each warp keeps a
  ring of that many stages (one 32-deep step of its rows each, ``2048 mt`` bytes) that
  ``cp.async`` fills without registers (sm_80+); a lane copies exactly the 16-byte pieces it
  later reads back (``ld.shared.v4``) for its own fragment, so it waits for its own copies
  (``cp.async.wait_group``) and no barrier is needed. More weight bytes in flight per warp
  without the registers an ``unroll`` holds.
- on sm_90, from ``HOPPER_GEMV_MIN_T`` tokens up to ``HOPPER_GEMV_MAX_T`` (with biases up to
  64): :mod:`book.kernels.wgmma_gemv`, the weights as ``wgmma``'s A operand, copied by TMA
  into an mbarrier ring, the k-loop shared evenly by every SM (stream-K): a ring holds many
  more weight bytes in flight than registers do (``prepare("hopper_gemv", ...)``).
- on sm_90 with no biases, from ``HOPPER_MIN_T`` tokens: the Hopper dual GEMM
  (:func:`book.kernels.wgmma_gemm.swiglu_wgmma`: the same nn.Linear weights, any T; its
  128-row tile reads each weight once whatever T, where the GEMV reads them again per group
  of tokens); beyond ``TENSOR_CORE_MAX_T`` elsewhere the tensor-core GEMV (correct for any T, in token groups of 64 that each read
  the weights again, from L2 where it can). :func:`register_large_t` puts any other kernel
  there (e.g. :func:`book.kernels.mma_gemm.swiglu_mma` where the weights are also kept
  ``[d, h]``).

Measured and not picked (each slower than the defaults on the H100, records/bench/README.md):
:mod:`book.kernels.staged_gemv` (``prepare("staged", ...)``), the tensor-core GEMV with its
weights copied through shared memory in whole-row chunks, the way the T = 1 CUDA-core GEMV
reads them; register caps on both GEMVs (a tile's ``min_blocks``); other warps a block for
the tensor-core GEMV; and the CUDA-core GEMV loading its next piece ahead
(``GemvTile.prefetch``).

Both kernels split k over the warps of a block, and, when the output tiles alone are too
few blocks to fill the GPU, over several blocks: those meet in the kernel, the last to
arrive finishing the tile (:mod:`book.kernels.splitk`), so the epilogue stays fused.

Shapes: any T and h, d a multiple of 8 (16-byte rows: a piece of 8 halves is all inside a
row), x and the weights 16-byte aligned; the wrappers refuse others, saying why.

The host side: :func:`prepare` validates once and returns the launch (kernel, grid, block,
arguments); the wrappers launch it through Numba, and :class:`book.kernels.fastcall.PlannedCall`
(``fastcall.planned("decode")``) caches it per tensors and launches it with
``cuLaunchKernel``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from numba import cuda, float32, int64, uint16, uint32

from .fused import silu_mul
from .launch import (KernelLaunch, address, as_device, flat, is_c_contiguous, jit_bounds,
                     sm_count)
from .mma_gemm import half_dtype, kind_for
from .splitk import (device_key, fragment_meeting, last_to_arrive, load_f32_cg, splits,
                     workspace)
from .tensorcore import (SIMULATED, cp_async16_zfill_at, cp_async_commit, cp_async_wait,
                         mma_bf16_16816, mma_f16_1688, mma_f16_16816, shared_address, shfl_xor,
                         target_cc)
from .wide import load_f32, load_half8, load_words4, store_f32, unpack_half8

__all__ = ["GemvTile", "MmaGemvTile", "CUDA_CORE_MAX_T", "TENSOR_CORE_MAX_T", "PIECE",
           "gemv_tile", "mma_gemv_tile", "make_gemv", "make_mma_gemv", "prepare",
           "swiglu_gemv", "swiglu_gemv_tc", "swiglu_decode", "path_for", "register_large_t",
           "HOPPER_MIN_T", "HOPPER_GEMV_MIN_T", "HOPPER_GEMV_MAX_T", "weight_bytes", "flops", "cuda_core_fma_time",
           "DecodeLaunch", "CallLaunch", "prepare_decode", "check_inputs", "hopper_dual_gemm"]

#: d must be a multiple of this: one 16-byte load is 8 halves of one row
PIECE = 8
#: the most tokens the CUDA-core GEMV takes (:func:`path_for`): its 8 T FMAs per 16-byte
#: chunk stay well under the chunk's HBM time up to here (cuda_core_fma_time), and its
#: accumulators in registers (module doc); ``benchmarks/decode_bench.py --tune-out`` times
#: both paths at T = 1, 2, 4, 8 to say which is faster there
CUDA_CORE_MAX_T = 4
#: the most tokens the tensor-core GEMV takes before the large-T hook
TENSOR_CORE_MAX_T = 256
#: on sm_90 the Hopper GEMV (:mod:`book.kernels.wgmma_gemv`) takes T from
#: ``HOPPER_GEMV_MIN_T`` to here (biases or not; with biases up to its most, 64): measured on
#: the H100 in one run against the wgmma dual GEMM at its default tile (the L2 hints),
#: faster at 8, 16, 24 and 32 tokens (84.8 against 89.2 us at 32), slower at 48 and 64 (90.7 /
#: 94.4 against 87.6 / 87.1; records/bench/decode_tune_hopper_switch_h100.json; before the
#: hints it won only to 24, decode_tune_hopper_switch_5814862_h100.json); faster than the
#: mma.sync GEMV at every T it takes (decode_tune_hopper_gemv_h100.json)
HOPPER_GEMV_MAX_T = 32
#: on sm_90 the Hopper GEMV takes over from the CUDA-core GEMV at this many tokens: the
#: CUDA-core GEMV is compiled for 4 tokens from 3 and reads as slowly at 3 as at 4; with its
#: L2 hints the wgmma GEMV was faster at 3 and 4 tokens (81.2-81.4 us at 4 against 82.4-82.6),
#: slower at 1 and 2 (81.0 against 77.6-78.1; records/bench/weight_stream_hints_h100.json,
#: weight_stream_small_h100.json)
HOPPER_GEMV_MIN_T = 3
#: on sm_90 (no biases) the wgmma dual GEMM takes T from here: its 128-row tile reads each
#: weight once whatever T, where the tensor-core GEMV re-reads them per group of 64 tokens
HOPPER_MIN_T = HOPPER_GEMV_MAX_T + 1
#: blocks per SM a launch aims for (split-K adds blocks until the grid reaches it)
BLOCKS_PER_SM = 4
#: the deepest cp.async ring of the tensor-core GEMV (``MmaGemvTile.stages``)
MAX_STAGES = 8


# ---------------------------------------------------------------------------------------
# configurations


@dataclass(frozen=True)
class GemvTile:
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

    def validate(self) -> "GemvTile":
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
        if p:
            raise ValueError(f"invalid {self}: " + "; ".join(p))
        return self

    @property
    def values(self):  # partial sums a thread holds: rows x (gate, up) x tokens
        return self.rows * 2 * self.tokens


@dataclass(frozen=True)
class MmaGemvTile:
    """The tensor-core GEMV's compile-time shape: ``nt`` n-tiles of 8 tokens, ``mt``
    m-tiles of 16 weight rows (of both weights), ``warps`` sharing the k-range, ``unroll``
    32-deep steps a warp loads before it multiplies (its weight bytes in flight: a warp
    waits on one memory latency per step group, so more steps a group, fewer waits).

    ``stages``: 0, the weights go straight to registers (``unroll`` steps at a time); 2 or
    more, they go through a ring of that many shared-memory stages per warp with
    ``cp.async`` (sm_80+), so ``stages`` steps are in flight without holding registers
    (a stage: ``mt`` x 16 rows x 2 weights x 64 bytes, ``stage_bytes``). ``min_blocks``, if
    not 0: the blocks an SM must hold at once (``launch_bounds``, a register cap)."""

    nt: int = 1
    mt: int = 2
    warps: int = 4
    unroll: int = 1
    stages: int = 0
    min_blocks: int = 0

    def validate(self) -> "MmaGemvTile":
        p = []
        if self.nt < 1 or self.mt < 1 or self.warps < 1 or self.unroll < 1:
            p.append("nt, mt, warps and unroll must be at least 1")
        if self.stages not in (0,) + tuple(range(2, MAX_STAGES + 1)):
            p.append(f"stages = {self.stages}: 0 (weights straight to registers) or 2 to "
                     f"{MAX_STAGES} (a cp.async ring; one stage would wait for each copy as it "
                     "is issued)")
        if self.stages and self.unroll != 1:
            p.append(f"unroll = {self.unroll} with stages = {self.stages}: the ring keeps the "
                     "steps in flight in shared memory, so a staged tile takes unroll 1")
        if self.weight_words > 64:
            p.append(f"unroll x mt x 16 = {self.weight_words} weight registers per lane: at "
                     "most 64")
        if self.values > 64:
            p.append(f"mt x 2 x nt x 4 = {self.values} accumulators per lane: at most 64 "
                     "(registers, and the warps' shared-memory reduction)")
        if self.shared_bytes > 48 * 1024:
            ring = (f" + the cp.async ring's {self.ring_bytes} (warps x stages x "
                    f"{self.stage_bytes})" if self.stages else "")
            p.append(f"{self.shared_bytes} bytes of shared memory: the warps' reduction's "
                     f"{self.reduction_bytes} (warps x accumulators x 32 lanes x 4){ring} + 8 "
                     "(the split-K flag): at most 48 KiB of static shared memory (ptxas "
                     "refuses more); fewer warps, stages or accumulators")
        if p:
            raise ValueError(f"invalid {self}: " + "; ".join(p))
        return self

    @property
    def values(self):  # accumulators a lane holds
        return self.mt * 2 * self.nt * 4

    @property
    def weight_words(self):  # 32-bit registers of weights a lane holds between its loads and mmas
        return self.unroll * self.mt * 16

    @property
    def reduction_bytes(self):  # the reduction's array: every warp's accumulators, lane by lane
        return self.warps * self.values * 32 * 4

    @property
    def stage_bytes(self):  # one 32-deep step of a warp's rows: 16 mt rows x (gate, up) x 64 B
        return self.mt * 16 * 2 * 64

    @property
    def ring_bytes(self):  # every warp's ring of stages (0 on the register path)
        return self.warps * self.stages * self.stage_bytes

    @property
    def shared_bytes(self):  # static shared memory a block declares (8: the split-K flag)
        return self.reduction_bytes + self.ring_bytes + 8

    @property
    def rows(self):
        return 16 * self.mt

    @property
    def tokens(self):
        return 8 * self.nt


def _pow2_at_least(n):
    p = 1
    while p < n:
        p *= 2
    return p


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


def mma_gemv_tile(T: int) -> MmaGemvTile:
    """The tensor-core GEMV for T tokens: up to 64 tokens in one block (beyond, token
    groups), two m-tiles while the accumulators allow."""
    nt = min(8, max(1, -(-T // 8)))
    nt = _pow2_at_least(nt)
    # the H100 tune: one m-tile and 4 warps, but two m-tiles of 2 warps at 4 n-tiles (T = 32)
    return MmaGemvTile(nt=nt, mt=2 if nt == 4 else 1, warps=2 if nt == 4 else 4).validate()


def weight_bytes(d: int, h: int, itemsize: int = 2) -> int:
    """The bytes of wg and wu: what a decode-size call must read at least."""
    return 2 * h * d * itemsize


def flops(T: int, d: int, h: int) -> int:
    """Two GEMVs of T x d x h (a multiply and an add each); the activation not counted."""
    return 4 * T * d * h


def cuda_core_fma_time(T: int, d: int, h: int, fma_per_s: float) -> float:
    """Seconds of float32 FMAs the CUDA-core GEMV needs at least (``2 T h d`` of them), at
    ``fma_per_s`` (an H100 SXM: 132 SMs x 128 lanes x 1.98 GHz = 3.3e13)."""
    return 2 * T * d * h / fma_per_s


# ---------------------------------------------------------------------------------------
# the CUDA-core GEMV


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


# ---------------------------------------------------------------------------------------
# the tensor-core GEMV (roles swapped: weights on M, tokens on N)


@functools.lru_cache(maxsize=None)
def make_mma_gemv(tile: MmaGemvTile, bias: bool, kind: str = "bf16"):
    """``k(x, wg, wu, bg, bu, out, part, count, T, d, h, S)``, flat arrays; one block per
    (16 ``mt`` rows, token group of 8 ``nt``, split) (module doc). ``kind`` as
    :func:`book.kernels.mma_gemm.kind_for` names it."""
    tile.validate()
    NT, MT, WK, U = tile.nt, tile.mt, tile.warps, tile.unroll
    ROWS, TOK = tile.rows, tile.tokens
    V = tile.values
    K8 = kind == "f16_sm75"  # m16n8k8: four per 32-deep step
    MMA = mma_bf16_16816 if kind == "bf16" else mma_f16_16816
    BIAS = bias
    THREADS = 32 * WK
    ZERO = uint32(0)
    # the cp.async ring (tile.stages >= 2): per warp ST stages of one 32-deep step each; in a
    # stage, chunk c = (m-tile i, weight w, row half hh) is 512 bytes, lane l's 16 at 16 l
    ST = tile.stages
    if ST and K8:
        raise ValueError(f"{tile}: stages = {ST} needs cp.async (sm_80+); the T4's path "
                         "(f16_sm75, sm_75) has none: use stages = 0 there")
    WAIT = max(ST - 1, 0)  # groups left in flight when the oldest step must have landed
    STAGE_B = tile.stage_bytes
    RING_HALVES = max(8, tile.ring_bytes // 2)  # (a placeholder on the register path)
    ALIGN = None if SIMULATED else 16
    meet = fragment_meeting(WK, V, THREADS)  # the warps' shares, then split-K's blocks

    @cuda.jit(device=True, inline="always")
    def ring_load(wg, wu, wrow, dst, kg, t4, d):
        # step kg of this lane's rows into the stage at shared address dst (this lane's slot
        # of chunk 0): 4 mt copies of 16 bytes, no registers; k past d lands as zeros
        k = (kg << 5) + (t4 << 3)
        ok = k < d
        for i in range(MT):
            for hh in range(2):
                cp_async16_zfill_at(dst + ((i * 2) * 2 + hh) * 512, wg, wrow[i, hh] + k, ok)
                cp_async16_zfill_at(dst + ((i * 2 + 1) * 2 + hh) * 512, wu, wrow[i, hh] + k, ok)

    @cuda.jit(device=True, inline="always")
    def mma_step(acc, wa, u, xb, n):
        # the mmas of one 32-deep step for n-tile n: every m-tile's gate and up rows (their
        # words in wa[u], the step's slot) times token g's words xb, into the accumulators
        for i in range(MT):
            for w in range(2):
                c = (acc[i, w, n, 0], acc[i, w, n, 1], acc[i, w, n, 2], acc[i, w, n, 3])
                if K8:  # word q of rows g and g+8, word q of token g
                    for q in range(4):
                        c = mma_f16_1688((wa[u, i, w, 0, q], wa[u, i, w, 1, q]), (xb[q],), c)
                else:  # words 0, 1 as k-columns (2t, 2t+1), (2t+8, 2t+9); then 2, 3
                    c = MMA((wa[u, i, w, 0, 0], wa[u, i, w, 1, 0], wa[u, i, w, 0, 1],
                             wa[u, i, w, 1, 1]), (xb[0], xb[1]), c)
                    c = MMA((wa[u, i, w, 0, 2], wa[u, i, w, 1, 2], wa[u, i, w, 0, 3],
                             wa[u, i, w, 1, 3]), (xb[2], xb[3]), c)
                for v in range(4):
                    acc[i, w, n, v] = c[v]

    def mma_gemv(x, wg, wu, bg, bu, out, part, count, T, d, h, S):
        tid = cuda.threadIdx.x
        lane = tid & 31
        warp = tid >> 5
        g = lane >> 2
        t4 = lane & 3
        tile_ = cuda.blockIdx.x // S
        s = cuda.blockIdx.x - tile_ * S
        ntg = (T + TOK - 1) // TOK  # token groups; the tiles of one row group are neighbours
        rg = tile_ // ntg
        j0 = rg * ROWS
        n0 = (tile_ - rg * ntg) * TOK
        nks = (d + 31) >> 5  # 32-deep steps (the last may be partial)
        per = (nks + S - 1) // S
        ks0 = s * per
        ks1 = min(nks, ks0 + per)

        acc = cuda.local.array((MT, 2, NT, 4), float32)
        for i in range(MT):
            for w in range(2):
                for n in range(NT):
                    for v in range(4):
                        acc[i, w, n, v] = float32(0.0)
        # the rows and tokens this lane reads, once (clamped into the arrays: a row past h
        # or a token past T computes an accumulator that is never stored)
        wrow = cuda.local.array((MT, 2), int64)
        for i in range(MT):
            for hh in range(2):
                wrow[i, hh] = min(j0 + 16 * i + g + 8 * hh, h - 1) * d
        xrow = cuda.local.array(NT, int64)
        for n in range(NT):
            xrow[n] = min(n0 + 8 * n + g, T - 1) * d
        # [step of the group][m-tile][gate, up][row g, g+8][word]
        wa = cuda.local.array((U, MT, 2, 2, 4), uint32)
        xb = cuda.local.array(4, uint32)

        if ST:
            # The ring: this warp's steps are ks0 + warp + WK j (interleaved as below). Each
            # lane copies the 16-byte pieces it will itself feed to the mma (rows g, g+8 of
            # every m-tile, its 8 k), so it waits only for its own copies: no barrier. The
            # copies of step j + ST - 1 are issued before the mmas of step j, ST steps in
            # flight; the slot they fill held step j - 1, already in this lane's registers.
            ring = cuda.shared.array(RING_HALVES, uint16, alignment=ALIGN)
            mine = warp * (ST * STAGE_B) + (lane << 4)  # byte offset of my slot of chunk 0
            sbase = shared_address(ring, 0) + mine
            nmy = max(0, (ks1 - ks0 - warp + WK - 1) // WK)  # steps of this warp
            for q in range(WAIT):  # prologue: the first ST - 1 steps in flight
                if q < nmy:
                    ring_load(wg, wu, wrow, sbase + q * STAGE_B, ks0 + warp + q * WK, t4, d)
                cp_async_commit()
            rd = 0  # the slot read in this step
            wt = WAIT  # the slot refilled in this step
            # [one slot][m-tile][gate, up][row g, g+8][word]: the register path's layout
            fa = cuda.local.array((1, MT, 2, 2, 4), uint32)
            xr = cuda.local.array((NT, 4), uint32)  # [n-tile][word] of token g
            for j in range(nmy):
                if j + WAIT < nmy:
                    ring_load(wg, wu, wrow, sbase + wt * STAGE_B, ks0 + warp + (j + WAIT) * WK,
                              t4, d)
                cp_async_commit()  # (an empty group near the end keeps the count uniform)
                k = ((ks0 + warp + j * WK) << 5) + (t4 << 3)
                ok = k < d  # a partial last step: zeros in the stage, zeros for x
                kk = k if ok else 0
                for n in range(NT):  # the tokens before the wait, which no load may cross
                    xv = load_words4(x, xrow[n] + kk)
                    for q in range(4):
                        xr[n, q] = xv[q] if ok else ZERO
                cp_async_wait(WAIT)  # my copies of step j have landed
                e0 = ((warp * ST + rd) * STAGE_B + (lane << 4)) >> 1  # my slot, in halves
                for i in range(MT):
                    for w in range(2):
                        for hh in range(2):
                            a = load_words4(ring, e0 + ((i * 2 + w) * 2 + hh) * 256)
                            for q in range(4):
                                fa[0, i, w, hh, q] = a[q]
                for n in range(NT):
                    for q in range(4):
                        xb[q] = xr[n, q]
                    mma_step(acc, fa, 0, xb, n)
                rd = rd + 1 if rd + 1 < ST else 0
                wt = wt + 1 if wt + 1 < ST else 0
        else:
            # a warp takes U neighbouring 32-deep steps at a time (its group), the warps' groups
            # interleaved; every weight load of the group is issued before the first mma
            for kg in range(ks0 + warp * U, ks1, WK * U):
                for u in range(U):  # the weights first: 4 U mt 16-byte loads in flight
                    k = ((kg + u) << 5) + (t4 << 3)  # this lane's 8 consecutive k
                    # past the group's share (ks1) or past d (a d that is no multiple of 32): zeros
                    ok = kg + u < ks1 and k < d
                    kk = k if ok else 0
                    for i in range(MT):
                        for hh in range(2):
                            a = load_words4(wg, wrow[i, hh] + kk)
                            b = load_words4(wu, wrow[i, hh] + kk)
                            for q in range(4):
                                wa[u, i, 0, hh, q] = a[q] if ok else ZERO
                                wa[u, i, 1, hh, q] = b[q] if ok else ZERO
                for u in range(U):
                    k = ((kg + u) << 5) + (t4 << 3)
                    ok = kg + u < ks1 and k < d
                    kk = k if ok else 0
                    for n in range(NT):
                        xv = load_words4(x, xrow[n] + kk)
                        for q in range(4):
                            xb[q] = xv[q] if ok else ZERO
                        mma_step(acc, wa, u, xb, n)

        # The warps' k-shares meet in shared memory: each warp stores its accumulators
        # (fragment order: value v of lane l at [v, l]), then every thread adds up a share
        # of the elements over the warps. Only fully unrolled loops touch acc (a loop that
        # indexes it at run time would put it in local memory): everything after this
        # reads shared memory.
        red = cuda.shared.array((WK, V, 32), float32)
        flag = cuda.shared.array(1, int64)
        for i in range(MT):
            for w in range(2):
                for n in range(NT):
                    for v in range(4):
                        red[warp, ((i * 2 + w) * NT + n) * 4 + v, lane] = acc[i, w, n, v]
        if not meet(red, part, count, flag, tile_, s, S):
            return
        cuda.syncthreads()
        fin = red[0]  # the tile's sums (fragment order)
        # The epilogue, by every thread: element (token tk, row rr) of the tile, rows
        # fastest, so neighbouring threads store neighbouring outputs. Lane g*4 + t holds
        # rows g, g+8 and tokens 2t, 2t+1 of each 16 x 8 accumulator tile.
        for e in range(tid, TOK * ROWS, THREADS):
            tk = e // ROWS
            rr = e - tk * ROWS
            j = j0 + rr
            tok = n0 + tk
            if j < h and tok < T:
                i = rr >> 4
                n = tk >> 3
                ln = (rr & 7) * 4 + ((tk & 7) >> 1)
                c = ((rr >> 3) & 1) * 2 + (tk & 1)
                gate = fin[((i * 2) * NT + n) * 4 + c, ln]
                up = fin[((i * 2 + 1) * NT + n) * 4 + c, ln]
                if BIAS:
                    gate += load_f32(bg, j)
                    up += load_f32(bu, j)
                store_f32(out, tok * h + j, silu_mul(gate, up))

    return cuda.jit(fastmath=True, **jit_bounds(THREADS, tile.min_blocks))(mma_gemv)


# ---------------------------------------------------------------------------------------
# host side


class DecodeLaunch(KernelLaunch):
    """One validated launch of a decode GEMV (:class:`book.kernels.launch.KernelLaunch`),
    with what it is: ``path`` ("cuda_cores" or "tensor_cores"), ``splits`` (blocks per
    tile: the split-K) and ``tile``."""

    __slots__ = ("path", "splits", "tile")

    def __init__(self, kernel, grid, block, args, result, path, splits, tile, shared=0):
        super().__init__(kernel, grid, block, args, result, shared)
        self.path, self.splits, self.tile = path, splits, tile


class CallLaunch:
    """A decode call that is not one kernel launch (the large-T hook, token groups on a GPU
    without tensor cores): ``launch(stream)`` calls ``fn``; ``grid`` 0 tells
    :class:`book.kernels.fastcall.PlannedCall` there is nothing to plan."""

    __slots__ = ("fn", "args", "result", "path")
    grid = 0

    def __init__(self, fn, args, result, path):
        self.fn, self.args, self.result, self.path = fn, args, result, path

    def launch(self, stream=0):
        return self.fn(*self.args, stream)


def _matrix(a, name, ndim):
    d = as_device(a, name)
    if d.ndim != ndim:
        want = "a 2-D matrix" if ndim == 2 else "a 1-D vector"
        raise ValueError(f"{name} must be {want}, got shape {tuple(d.shape)}")
    if half_dtype(d) is None:
        raise TypeError(f"{name} must be bfloat16 (a torch bfloat16 tensor, or its bits as "
                        f"uint16) or float16, got {d.dtype}")
    if d.size and not is_c_contiguous(d):
        raise ValueError(f"{name} is not contiguous (strides {d.strides}): pass .contiguous()")
    return d


def _stream_key(stream):
    if not stream:
        return 0
    h = getattr(stream, "handle", None)
    try:
        return int(getattr(h, "value", h) or 0)
    except TypeError:
        return id(stream)


def _gpu_name() -> str:
    """The current GPU's name ("" in the simulator): some tiles are chosen per GPU."""
    if SIMULATED:
        return ""
    name = cuda.get_current_device().name
    return name.decode() if isinstance(name, bytes) else str(name)


def _device_cc():
    """The capability the paths are picked for: the GPU's (None in the simulator), or what the
    T4 switch names (``COURSE_TARGET_CC``, book/target.py)."""
    return target_cc()


def check_inputs(x, wg, wu, bg, bu):
    """Shapes, dtypes, layout and alignment, or a clear error; ``(xd, wgd, wud, bgd, bud,
    T, d, h, dtype)`` as device arrays (the biases None when absent)."""
    xd = _matrix(x, "x", 2)
    wgd, wud = _matrix(wg, "wg", 2), _matrix(wu, "wu", 2)
    T, d = xd.shape
    h = wgd.shape[0]
    for name, w in (("wg", wgd), ("wu", wud)):
        if tuple(w.shape) != (h, d):
            raise ValueError(f"{name} is {tuple(w.shape)}; expected [h, d] = [{h}, {d}] "
                             f"(nn.Linear's weight layout, out_features x in_features; x is "
                             f"{tuple(xd.shape)})")
    if (bg is None) != (bu is None):
        raise ValueError("pass both biases (bg and bu) or neither")
    bgd = bud = None
    if bg is not None:
        bgd, bud = _matrix(bg, "bg", 1), _matrix(bu, "bu", 1)
        for name, b in (("bg", bgd), ("bu", bud)):
            if tuple(b.shape) != (h,):
                raise ValueError(f"{name} has shape {tuple(b.shape)}; expected [h] = [{h}]")
    arrays = [xd, wgd, wud] + ([bgd, bud] if bgd is not None else [])
    kinds = {half_dtype(a) for a in arrays}
    if len(kinds) > 1:
        raise TypeError(f"x, the weights and the biases must share one dtype, got {sorted(kinds)}")
    if d % PIECE or d == 0:
        raise ValueError(f"d (columns of x) = {d}: the GEMVs read rows 16 bytes (8 halves) at "
                         "a time, so d must be a positive multiple of 8; pad x and the weights "
                         "with zero columns (they add nothing)")
    for name, a in (("x", xd), ("wg", wgd), ("wu", wud)):
        p = address(a)
        if p % 16:
            raise ValueError(f"{name} starts at address {p:#x}, not a multiple of 16 bytes: "
                             "the GEMVs read 16 bytes at a time (a fresh allocation is aligned; "
                             "a slice that starts mid-row is not)")
    return xd, wgd, wud, bgd, bud, T, d, h, kinds.pop()


def _output(out, x, T, h, dtype):
    if out is None:
        if type(x).__module__.startswith("torch"):
            import torch

            res = torch.empty((T, h), dtype=getattr(torch, dtype), device=x.device)
        else:
            res = cuda.device_array((T, h), dtype=np.uint16 if dtype == "bfloat16" else np.float16)
        return res, as_device(res, "out")
    o = _matrix(out, "out", 2)
    if half_dtype(o) != dtype:
        raise TypeError(f"out must be {dtype} like x, got {o.dtype}")
    if tuple(o.shape) != (T, h):
        raise ValueError(f"out must have shape [T, h] = [{T}, {h}], got {tuple(o.shape)}")
    return out, o


def _want_blocks():
    return BLOCKS_PER_SM * sm_count()


def prepare(path, x, wg, wu, bg=None, bu=None, out=None, *, tile=None, split=None,
            stream_key=0) -> DecodeLaunch:
    """Validate and build one launch of ``path`` ("cuda_cores", "tensor_cores", or "staged":
    :mod:`book.kernels.staged_gemv`, a control); ``tile`` and ``split`` override the defaults
    (:func:`gemv_tile`, :func:`mma_gemv_tile`, :func:`book.kernels.splitk.splits`);
    ``stream_key`` picks the split-K workspace."""
    xd, wgd, wud, bgd, bud, T, d, h, dtype = check_inputs(x, wg, wu, bg, bu)
    res, o = _output(out, x, T, h, dtype)
    bias = bgd is not None
    names = ("x", "wg", "wu", "out")
    fx, fwg, fwu, fo = (flat(a, n) for a, n in zip((xd, wgd, wud, o), names))
    fbg, fbu = (flat(bgd, "bg"), flat(bud, "bu")) if bias else (fx, fx)  # unread when no bias
    dyn = 0  # dynamic shared memory (the staged GEMV's cp.async ring)
    if path == "cuda_cores":
        tile = (tile or gemv_tile(T, d)).validate()
        if T > tile.tokens:
            raise ValueError(f"the CUDA-core GEMV of {tile} takes at most {tile.tokens} tokens, "
                             f"got T = {T}")
        kern = make_gemv(tile, bias)
        tiles = -(-h // tile.rows)
        pieces = max(1, (d // PIECE) // tile.threads)
        S = split or splits(tiles, pieces, _want_blocks())
        part_floats, block = tiles * S * tile.values, tile.threads
    elif path == "tensor_cores":
        kind = kind_for(dtype, _device_cc())
        tile = (tile or mma_gemv_tile(T)).validate()
        kern = make_mma_gemv(tile, bias, kind)
        tiles = -(-h // tile.rows) * -(-T // tile.tokens)
        pieces = max(1, -(-d // 32) // (tile.warps * tile.unroll))
        S = split or splits(tiles, pieces, _want_blocks())
        part_floats, block = tiles * S * tile.values * 32, 32 * tile.warps
    elif path == "staged":
        from .staged_gemv import make_staged_gemv, staged_tile

        kind = kind_for(dtype, _device_cc())
        tile = (tile or staged_tile(T)).validate()
        kern = make_staged_gemv(tile, bias, kind)
        tiles = -(-h // tile.rows) * -(-T // tile.tokens)
        S = split or splits(tiles, -(-d // tile.chunk), _want_blocks())
        part_floats, block = tiles * S * tile.values * 32, tile.threads
        dyn = tile.dynamic_bytes
    elif path == "hopper_gemv":
        return _prepare_hopper_gemv(xd, wgd, wud, fbg, fbu, fo, res, T, d, h, dtype, bias,
                                    tile, stream_key)
    else:
        raise ValueError("path must be 'cuda_cores', 'tensor_cores', 'hopper_gemv' or 'staged', "
                         f"got {path!r}")
    if S < 1:
        raise ValueError(f"split must be at least 1, got {S}")
    if S > 1:
        ws = workspace(path, stream_key, part_floats, tiles)
        part, count = ws.part, ws.count
    else:  # no partials to meet: placeholders of the right types, never touched
        part, count = _placeholders()
    grid = tiles * S if T and h else 0
    args = (fx, fwg, fwu, fbg, fbu, fo, part, count, T, d, h, S)
    return DecodeLaunch(kern, grid, block, args, res, path, S, tile, dyn)


_STREAM_K = {}  # (GPU, row tiles, k-blocks, blocks, dynamic) -> (the Hopper GEMV's device
# table, its ranges: one a block, or dynamic more)


def _prepare_hopper_gemv(xd, wgd, wud, fbg, fbu, fo, res, T, d, h, dtype, bias, tile,
                         stream_key):
    """The launch of :mod:`book.kernels.wgmma_gemv` (sm_90a): its tensor maps, its stream-K
    table (one per shape and grid, cached) and the seams' workspace."""
    from .hopper import check_capability
    from .wgmma_gemm import tensor_maps
    from .stream_k import guided, stream_k
    from .wgmma_gemv import (BK, BM, TRACE_EVENTS, gemv_tile as hopper_gemv_tile,
                             make_wgmma_gemv)

    check_capability(_device_cc())
    # (the default tile refuses T beyond the kernel's most, a tile given refuses T beyond its N)
    # (the default tile's L2 promotion is the GPU's own: wgmma_gemv_tile.PROMOTION)
    tile = (tile or hopper_gemv_tile(max(T, 1), d, _gpu_name())).validate()
    if T > tile.n:
        raise ValueError(f"{tile} takes at most {tile.n} tokens (its wgmma's N), got T = {T}")
    if not tile.fits(d):
        raise ValueError(f"{tile} keeps x in shared memory: {tile.shared_for(d):,} bytes at d = "
                         f"{d} do not fit; use x_resident=False")
    kern = make_wgmma_gemv(tile, bias, "bf16" if dtype == "bfloat16" else "f16")
    mt, nk = -(-h // BM), -(-d // tile.stage_k)
    # a persistent grid, no block without iterations (stream_k)
    grid = min(sm_count() * tile.ctas_per_sm * tile.waves, mt * nk) if T and h else 0
    if not grid:  # nothing to compute: a launch that launches nothing
        return DecodeLaunch(kern, 0, 256, (), res, "hopper_gemv", 1, tile)
    dyn = (tile.dynamic, tile.pool) if tile.dynamic else None
    key = (device_key(), mt, nk, grid, dyn)  # a table lives on one GPU
    if key not in _STREAM_K:
        table = (guided(mt, nk, grid, tile.dynamic, tile.pool / 100) if dyn
                 else stream_k(mt, nk, grid))
        # (dynamic: the ranges' count heads the table, kept here too: no device read)
        _STREAM_K[key] = cuda.to_device(table), int(table[0]) if dyn else grid
    sk, ranges = _STREAM_K[key]
    # Every launch leaves every counter it touched at zero (the tiles' pieces, dynamic: the
    # two of ranges taken, after the tiles'), so launches of any shape share a stream's
    # workspace; a traced tile's timeline follows the counters (wgmma_gemv.timeline) and
    # stays there, so traced launches have a workspace of their own
    ws = workspace("hopper_gemv_trace" if tile.trace else "hopper_gemv", stream_key,
                   2 * ranges * 128 * tile.n,
                   mt + (len(TRACE_EVENTS) * grid if tile.trace else 0) + (2 if dyn else 0))
    maps = tensor_maps([wgd, wud, xd], [(BK, BM), (BK, BM), (BK, tile.n)], tile.promotion)
    if tile.cpasync:  # its cp.async read the weights by address: after the three maps
        from .launch import address
        maps = cuda.to_device(np.concatenate([maps.copy_to_host(), np.array(
            [address(wgd), address(wud)], dtype=np.uint64)]))
    args = (maps, sk, fbg, fbu, fo, ws.part, ws.count, T, d, h)
    return DecodeLaunch(kern, grid, 256, args, res, "hopper_gemv", 1, tile, tile.shared_for(d))


@functools.lru_cache(maxsize=None)
def _placeholders():
    return (cuda.device_array(1, dtype=np.float32),
            cuda.to_device(np.zeros(1, dtype=np.int32)))


def swiglu_gemv(x, wg, wu, bg=None, bu=None, out=None, *, tile=None, split=None, stream=0):
    """The CUDA-core GEMV (T up to its tile's tokens, at most 8): out [T, h]."""
    return prepare("cuda_cores", x, wg, wu, bg, bu, out, tile=tile, split=split,
                   stream_key=_stream_key(stream)).launch(stream)


def swiglu_gemv_tc(x, wg, wu, bg=None, bu=None, out=None, *, tile=None, split=None, stream=0):
    """The tensor-core GEMV, weights on the M side (any T; tuned for 16 < T <= 256)."""
    return prepare("tensor_cores", x, wg, wu, bg, bu, out, tile=tile, split=split,
                   stream_key=_stream_key(stream)).launch(stream)


_LARGE_T = {"fn": None, "min_T": TENSOR_CORE_MAX_T + 1}


def register_large_t(fn, min_T: int = TENSOR_CORE_MAX_T + 1):
    """The hook for T beyond the GEMVs: ``fn(x, wg, wu, bg, bu, out, stream)`` (the same
    arguments, nn.Linear weights; returns out) takes every call with ``T >= min_T``.
    ``register_large_t(None)`` removes it. Returns the previous ``fn``."""
    prev = _LARGE_T["fn"]
    _LARGE_T.update(fn=fn, min_T=int(min_T))
    return prev


def path_for(T: int, cc=None, bias: bool = False) -> str:
    """Which path :func:`swiglu_decode` takes for T tokens on a GPU of compute capability
    ``cc`` (None: the simulator), with or without biases: "cuda_cores", "tensor_cores",
    "hopper_gemv" (sm_90: the wgmma GEMV, :mod:`book.kernels.wgmma_gemv`, from
    ``HOPPER_GEMV_MIN_T`` to ``HOPPER_GEMV_MAX_T`` tokens), "hopper" (T beyond it on sm_90,
    no biases) or "large_t" (the registered hook).
    Below sm_75 there are no tensor cores: the CUDA-core GEMV takes every T (in groups)."""
    if _LARGE_T["fn"] is not None and T >= _LARGE_T["min_T"]:
        return "large_t"
    hopper = cc is not None and tuple(cc)[:2] == (9, 0)
    if cc is not None and tuple(cc) < (7, 5):
        return "cuda_cores"
    if T <= CUDA_CORE_MAX_T and not (hopper and T >= HOPPER_GEMV_MIN_T):
        return "cuda_cores"
    if hopper:
        from .wgmma_gemv import MAX_T as HOPPER_GEMV_MOST

        if T <= HOPPER_GEMV_MAX_T or (bias and T <= HOPPER_GEMV_MOST):
            return "hopper_gemv"
        if not bias:
            return "hopper"
    return "tensor_cores"


def hopper_dual_gemm(x, wg, wu, bg, bu, out, stream=0):
    """The "hopper" path: :func:`book.kernels.wgmma_gemm.swiglu_wgmma` (no biases) with the
    tile the dispatcher gives it."""
    from .waves import dispatch_tile
    from .wgmma_gemm import swiglu_wgmma

    # the wave model's tile for T: without the cluster where row tiles are odd (one row
    # tile: a cluster of two would leave one CTA of each pair idle), a ColumnSplit where the
    # last round of the wide tile would run mostly empty (T = 512, 768 on 132 SMs)
    tile = dispatch_tile(x.shape[0], wg.shape[0])
    return swiglu_wgmma(x, wg, wu, out, tile=tile, stream=stream or None)


def prepare_decode(x, wg, wu, bg=None, bu=None, out=None, *, stream_key=0):
    """The launch :func:`swiglu_decode` makes for these arguments: the path chosen by T
    (:func:`path_for`), a :class:`DecodeLaunch`, or a :class:`CallLaunch` for the large-T
    hook and for token groups on a GPU without tensor cores."""
    T = x.shape[0]
    path = path_for(T, _device_cc(), bg is not None or bu is not None)
    if path == "large_t":
        return CallLaunch(_LARGE_T["fn"], (x, wg, wu, bg, bu, out), out, path)
    if path == "hopper":
        return CallLaunch(hopper_dual_gemm, (x, wg, wu, bg, bu, out), out, path)
    if path == "cuda_cores" and T > CUDA_CORE_MAX_T:  # no tensor cores: token groups
        return CallLaunch(_gemv_groups, (x, wg, wu, bg, bu, out), out, "cuda_cores")
    return prepare(path, x, wg, wu, bg, bu, out, stream_key=stream_key)


def swiglu_decode(x, wg, wu, bg=None, bu=None, out=None, *, stream=0):
    """``out = silu(x @ wg.T + bg) * (x @ wu.T + bu)``, the path chosen by T (:func:`path_for`)."""
    return prepare_decode(x, wg, wu, bg, bu, out, stream_key=_stream_key(stream)).launch(stream)


def _gemv_groups(x, wg, wu, bg, bu, out, stream):
    xd, _, _, _, _, T, d, h, dtype = check_inputs(x, wg, wu, bg, bu)
    res, o = _output(out, x, T, h, dtype)
    for t0 in range(0, T, CUDA_CORE_MAX_T):
        t1 = min(T, t0 + CUDA_CORE_MAX_T)
        swiglu_gemv(xd[t0:t1], wg, wu, bg, bu, o[t0:t1], stream=stream)
    return res
