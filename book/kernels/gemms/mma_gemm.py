"""A bf16 tensor-core GEMM and dual GEMM in Numba, on ``mma.sync`` (sm_80+).

``out = silu(x @ wg) * (x @ wu)`` for bfloat16 x[T, d], wg[d, h], wu[d, h] (row-major,
bfloat16 as uint16 bits or torch bfloat16 tensors), float32 accumulation, one bfloat16
store per output. float16 inputs work too, and choose their instructions by the target
(:func:`kind_for` of :func:`book.kernels.tensorcore.target_cc`: the GPU, or what the switch
``COURSE_TARGET_CC`` names): ``mma.m16n8k16`` with ``cp.async`` on sm_80+, and on sm_75 (the
T4, no bf16 ``mma``, no ``cp.async``) each 16-deep step as two ``mma.m16n8k8`` with the tiles
copied through registers. The kernel is built by :func:`build_kernel` from a :class:`MmaTile`
(compile-time constants, so every loop over the warp tile unrolls and the 128
accumulators a lane holds stay in registers) and an ``epilogue``:

- ``"swiglu"``: the dual GEMM: silu(gate) * up, straight from the accumulators;
- ``"identity"``: the control: the same kernel storing ``gate + up`` (same loads, same
  store, no exp or division);
- ``"store2"``: the unfused path's GEMM: the same kernel storing gate and up to two
  bfloat16 arrays (then :func:`book.kernels.halfprec.swiglu_half8` does the activation);
- ``"gemm"``: a plain GEMM ``out = x @ w`` (both halves of the B tile from one matrix);
- ``"ceiling"``: the main loop alone: the same warp tiles fed by ``ldmatrix`` from shared
  memory, no global load at all: the most this ``mma.sync`` structure can issue.

The design (``TILE``): a block of 4 warps (2 x 2) owns 128 rows x 128 accumulator
columns; each warp 64 x 64 = 4 x 8 ``m16n8k16`` tiles. The B tile is two halves of 64
columns: for the dual GEMM, 64 columns of wg and the *same* 64 columns of wu, so each warp's
left four n-tiles are gate and its right four the matching up: gate and up for one output
land in the same lane. k advances 32 at a time through a ring of 4 shared-memory stages (64 KiB, dynamic)
filled by 16-byte ``cp.async`` copies (global -> shared without registers) while the warps
multiply out of the stage that arrived: per 16-deep step a warp issues 4 ``ldmatrix.x4``
for its A fragments, 4 ``ldmatrix.x4.trans`` for B (the weights [d, h] are row-major: n is
the contiguous dimension, "N-major" in PTX's and CUTLASS's words, and ``.trans`` hands each
lane the two consecutive k of one column that the "col" B operand wants) and 32 ``mma``.
Shared rows are stored with their 16-byte chunks permuted (``swizzle``) so that the 8 rows
one ``ldmatrix`` phase reads fall in 8 different bank groups. Blocks walk the output in
groups of ``group_m`` block-rows, so the tiles of x and of the weights a wave of blocks
reads stay in L2.

Any T (rows of x, 1 at decode), and any d and h that are multiples of 8: the last block-row,
block-column and k-slab may be partial. Their 16-byte copies are predicated
(``cp_async16_zfill_at``: a piece past the matrix reads nothing and lands as zeros, so it adds
nothing to the products) and the epilogue stores only inside ``out``; no padded copy is made.
d and h must be multiples of 8 because a 16-byte piece (8 halves) is then all inside or all
outside a row, and every row of x and of the weights starts 16-byte aligned, as ``cp.async``
needs; the wrappers refuse other shapes, saying so. Taught in chapter 8
(``chapters/08_tensor_cores.ipynb``).
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda, float32, int32, uint16, uint32

from ...capability import FAMILIES
from ..elementwise.fused import silu_mul
from ..host.launch import KernelLaunch, address, as_device, flat, is_c_contiguous
from ..host.plan import planned
from .mma_tile import SIM_TILE, TILE, MmaGeometry, MmaTile, default_tile
from ..instructions.tensorcore import (
    SIMULATED, check_capability, copy16_zfill_at, cp_async16_zfill_at, cp_async_commit,
    cp_async_wait,
    ldmatrix_x4_at, ldmatrix_x4_trans_at, mma_bf16_16816, mma_f16_1688, mma_f16_16816,
    shared_address, store_bf16x2, store_f16x2, target_cc,
)

__all__ = ["MmaTile", "MmaGeometry", "TILE", "SIM_TILE", "EPILOGUES", "build_kernel", "default_tile",
           "swiglu_mma", "swiglu_mma_identity", "gate_up_mma", "matmul_mma", "ceiling_mma",
           "grid_size", "flops", "check_inputs", "PIECE", "prepare", "prepare_matmul"]

EPILOGUES = ("swiglu", "identity", "store2", "gemm", "ceiling")


#: the instruction paths: bf16 (sm_80+), fp16 (sm_80+), fp16 on sm_75 (the T4: every
#: m16n8k16 step is two m16n8k8, and the tiles travel through registers: no cp.async)
KINDS = ("bf16", "f16", "f16_sm75")


def build_kernel(tile: MmaTile = TILE, epilogue: str = "swiglu", kind: str = "bf16"):
    """``k(x, b0, b1, out, out2, M, N, K)``; see the module doc for ``epilogue``."""
    return make_mma_gemm(tile.validate(), epilogue, kind)


@functools.lru_cache(maxsize=None)
def make_mma_gemm(tile, epilogue, kind="bf16"):
    """The kernel factory (the source the chapter shows); call build_kernel."""
    if epilogue not in EPILOGUES:
        raise ValueError(f"epilogue must be one of {EPILOGUES}, got {epilogue!r}")
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    K8 = kind == "f16_sm75"  # two m16n8k8 per 16-deep step
    MMA = mma_bf16_16816 if kind == "bf16" else mma_f16_16816
    COPY = copy16_zfill_at if K8 else cp_async16_zfill_at  # predicated: edge tiles read zeros
    STORE = store_bf16x2 if kind == "bf16" else store_f16x2
    # compile-time constants from the tile and its geometry (print(tile.geometry)
    # says what each is); closure variables, so every loop over them unrolls
    geo = tile.geometry
    WN, MT, NT = tile.warps_n, tile.mt, tile.nt
    BM, BN, BK, ST = tile.bm, tile.bn, tile.bk, tile.stages
    THREADS, GM, DYN = tile.threads, tile.group_m, tile.dynamic
    HALF, N_HALF, N_PAIRS = geo.half, geo.n_half_tiles, geo.n_pairs
    KSTEPS = geo.ksteps
    A_CHUNKS, B_HALF_CHUNKS = geo.a_chunks, geo.b_half_chunks
    A_SH, A_MK = geo.a_swizzle
    B_SH, B_MK = geo.b_swizzle
    A_SIZE, B_SIZE, B_BASE = geo.a_ring, geo.b_ring, geo.b_base
    A_COPIES, B_COPIES, WAIT = geo.a_copies, geo.b_copies, geo.wait
    A_ROWB, B_ROWB = geo.a_row_bytes, geo.b_row_bytes
    A_STAGEB, B_STAGEB = geo.a_stage_bytes, geo.b_stage_bytes
    A_RSTEP, B_RSTEP = geo.a_row_step, geo.b_row_step
    DUAL = epilogue in ("swiglu", "identity", "store2")
    LOADS = epilogue != "ceiling"
    EPI = epilogue
    ALIGN = None if SIMULATED else 16

    @cuda.jit(device=True, inline="always")
    def a_offset(r, k):
        # byte offset of element (r, k) in an A stage: row-major, 16-byte chunks swizzled
        return (r * BK + (((k >> 3) ^ ((r >> A_SH) & A_MK)) << 3) + (k & 7)) * 2

    @cuda.jit(device=True, inline="always")
    def b_offset(k, n):
        # byte offset of element (k, n) in a B stage (k rows of BN columns: two halves)
        return (k * BN + (((n >> 3) ^ ((k >> B_SH) & B_MK)) << 3) + (n & 7)) * 2

    @cuda.jit(device=True, inline="always")
    def load_stage(x, b0, b1, sa, sb, a_dst, a_src, a_rows, a_k, b_dst0, b_dst1, b_src, b_k,
                   b_ok0, b_ok1, b1_off, kt, K, N):
        # this thread's 16-byte pieces of stage ``kt``: global -> shared, no registers.
        # The offsets were computed once; the swizzle repeats every 8 rows, so the i-th
        # copy is the first moved by whole rows. A piece past the matrix (row >= T, k >= d,
        # column >= h: a multiple of 8 each, so a piece is all in or all out) reads nothing
        # and lands as zeros: an edge tile multiplies zeros, no padded copy needed.
        ka = kt * BK + a_k < K
        for i in range(A_COPIES):
            COPY(sa + a_dst + i * A_RSTEP * A_ROWB, x, a_src + i * A_RSTEP * K + kt * BK,
                 (i * A_RSTEP < a_rows) & ka)
        for i in range(B_COPIES):
            kb = kt * BK + b_k + i * B_RSTEP
            src = b_src + (kt * BK + i * B_RSTEP) * N
            COPY(sb + b_dst0 + i * B_RSTEP * B_ROWB, b0, src, b_ok0 & (kb < K))
            COPY(sb + b_dst1 + i * B_RSTEP * B_ROWB, b1, src + b1_off, b_ok1 & (kb < K))

    @cuda.jit(device=True, inline="always")
    def mma_step(acc, af, bf, sa, sb, a_ld, b_ld, ks):
        # one 16-deep step of the warp tile: fragments from shared, then MT x NT mma
        for i in range(MT):  # m-tile i: 16 rows further down
            a = ldmatrix_x4_at(sa + a_ld[ks] + i * 16 * A_ROWB)
            for v in range(4):
                af[i, v] = a[v]
        for jp in range(NT // 2):  # n-tiles 2jp, 2jp+1: matrices (k 0-7, 8-15) x (2jp, 2jp+1)
            b = ldmatrix_x4_trans_at(sb + b_ld[jp] + ks * 16 * B_ROWB)
            bf[2 * jp, 0], bf[2 * jp, 1] = b[0], b[1]
            bf[2 * jp + 1, 0], bf[2 * jp + 1, 1] = b[2], b[3]
        for i in range(MT):
            for j in range(NT):
                c = (acc[i, j, 0], acc[i, j, 1], acc[i, j, 2], acc[i, j, 3])
                if K8:  # registers 0, 1 of A and 0 of B are k 0-7; the others k 8-15
                    d = mma_f16_1688((af[i, 0], af[i, 1]), (bf[j, 0],), c)
                    d = mma_f16_1688((af[i, 2], af[i, 3]), (bf[j, 1],), d)
                else:
                    d = MMA((af[i, 0], af[i, 1], af[i, 2], af[i, 3]), (bf[j, 0], bf[j, 1]), c)
                for v in range(4):
                    acc[i, j, v] = d[v]

    def mma_gemm(x, b0, b1, out, out2, M, N, K):
        tid = cuda.threadIdx.x
        lane = tid & 31
        warp = tid >> 5
        # block order: groups of GM block-rows, down each column of the group first
        nb_n = (N + (HALF if DUAL else BN) - 1) // (HALF if DUAL else BN)
        nb_m = (M + BM - 1) // BM  # the last block-row and -column may be partial
        pid = cuda.blockIdx.x
        per_group = GM * nb_n
        first_m = (pid // per_group) * GM
        gm = min(nb_m - first_m, GM)
        bm_ = first_m + (pid % per_group) % gm
        bn_ = (pid % per_group) // gm
        m0 = bm_ * BM
        if DUAL:
            n0, b1_off = bn_ * HALF, 0  # the same columns of wg and wu
        else:
            n0, b1_off = bn_ * BN, HALF  # one matrix: its next HALF columns
        wr = (warp // WN) * (16 * MT)  # this warp's rows in the block
        wc = (warp % WN) * (4 * NT)  # its columns within each half

        if DYN:  # the launch says how much (tile.shared_bytes)
            sA = cuda.shared.array(0, uint16, alignment=ALIGN)
            sB = sA
        else:
            sA = cuda.shared.array(A_SIZE, uint16, alignment=ALIGN)
            sB = cuda.shared.array(B_SIZE, uint16, alignment=ALIGN)
        sa0 = shared_address(sA, 0)  # 32-bit shared addresses of the two rings
        sb0 = shared_address(sB, B_BASE)
        acc = cuda.local.array((MT, NT, 4), float32)
        af = cuda.local.array((MT, 4), uint32)
        bf = cuda.local.array((NT, 2), uint32)
        a_ld = cuda.local.array(KSTEPS, int32)
        b_ld = cuda.local.array(N_PAIRS, int32)
        for i in range(MT):
            for j in range(NT):
                for v in range(4):
                    acc[i, j, v] = float32(0.0)

        # Addresses, once. ldmatrix: lanes 0-15 give rows 0-15 of a 16 x 16 A piece at k 0,
        # lanes 16-31 the same rows at k 8; for B (N-major, read with .trans) lanes 0-15
        # give k rows 0-15 of n-tile 2jp, lanes 16-31 those of n-tile 2jp+1.
        l15, lhi = lane & 15, lane >> 4
        for ks in range(KSTEPS):
            a_ld[ks] = a_offset(wr + l15, ks * 16 + lhi * 8)
        for jp in range(NT // 2):
            j = 2 * jp
            col = wc + 8 * j if j < N_HALF else HALF + wc + 8 * (j - N_HALF)
            b_ld[jp] = b_offset(l15, col + lhi * 8)
        # cp.async: this thread's first A piece (row ra, chunk ca) and B pieces (k row rb,
        # chunk cb of each half); 8 neighbouring threads copy 128 contiguous bytes of B
        ra, ca = tid // A_CHUNKS, tid % A_CHUNKS
        rb, cb = tid // B_HALF_CHUNKS, tid % B_HALF_CHUNKS
        a_dst = a_offset(ra, ca * 8)
        a_src = (m0 + ra) * K + ca * 8
        b_dst0 = b_offset(rb, cb * 8)
        b_dst1 = b_offset(rb, HALF + cb * 8)
        b_src = rb * N + n0 + cb * 8
        a_rows = M - (m0 + ra)  # rows of x left from this thread's first A row
        b_ok0 = n0 + cb * 8 < N  # this thread's B columns lie inside the weights
        b_ok1 = n0 + b1_off + cb * 8 < N

        nk = (K + BK - 1) // BK  # the last k-slab may be partial
        if LOADS:
            for s in range(ST - 1):  # prologue: the first stages in flight
                if s < nk:
                    load_stage(x, b0, b1, sa0 + s * A_STAGEB, sb0 + s * B_STAGEB, a_dst, a_src,
                               a_rows, ca * 8, b_dst0, b_dst1, b_src, rb, b_ok0, b_ok1, b1_off,
                               s, K, N)
                if not K8:
                    cp_async_commit()
        rd = 0  # the stage read in this step, and the one refilled
        wt = ST - 1
        for kt in range(nk):
            if LOADS and not K8:
                cp_async_wait(WAIT)  # my copies of stage kt have landed ...
            cuda.syncthreads()  # ... everyone's, and nobody still reads the stage refilled next
            if LOADS:
                if kt + ST - 1 < nk:
                    load_stage(x, b0, b1, sa0 + wt * A_STAGEB, sb0 + wt * B_STAGEB, a_dst, a_src,
                               a_rows, ca * 8, b_dst0, b_dst1, b_src, rb, b_ok0, b_ok1, b1_off,
                               kt + ST - 1, K, N)
                if not K8:
                    cp_async_commit()  # (an empty group near the end keeps the count uniform)
                wt = wt + 1 if wt + 1 < ST else 0
            sa = sa0 + rd * A_STAGEB
            sb = sb0 + rd * B_STAGEB
            # two 16-deep steps per iteration, in straight-line code: ptxas can then issue
            # the next step's ldmatrix while this step's mma run (NVVM does not unroll it)
            for ks in range(0, KSTEPS - 1, 2):
                mma_step(acc, af, bf, sa, sb, a_ld, b_ld, ks)
                mma_step(acc, af, bf, sa, sb, a_ld, b_ld, ks + 1)
            if KSTEPS % 2:
                mma_step(acc, af, bf, sa, sb, a_ld, b_ld, KSTEPS - 1)
            if LOADS:
                rd = rd + 1 if rd + 1 < ST else 0

        # epilogue: lane holds rows g, g+8 and columns 2t, 2t+1 of every tile; an edge
        # tile stores only what lies inside out (a column pair is all in or all out: h is
        # a multiple of 8)
        g, t2 = lane >> 2, (lane & 3) * 2
        for i in range(MT):
            for h in range(2):
                r = m0 + wr + 16 * i + g + 8 * h
                if r >= M:
                    continue
                for j in range(N_HALF):
                    col = n0 + wc + 8 * j + t2
                    gl, gh = acc[i, j, 2 * h], acc[i, j, 2 * h + 1]
                    ul, uh = acc[i, j + N_HALF, 2 * h], acc[i, j + N_HALF, 2 * h + 1]
                    if EPI == "swiglu":
                        if col < N:
                            STORE(out, r * N + col, silu_mul(gl, ul), silu_mul(gh, uh))
                    elif EPI == "identity":
                        if col < N:
                            STORE(out, r * N + col, gl + ul, gh + uh)
                    elif EPI == "store2":
                        if col < N:
                            STORE(out, r * N + col, gl, gh)
                            STORE(out2, r * N + col, ul, uh)
                    else:  # gemm, ceiling: both halves, HALF columns apart
                        if col < N:
                            STORE(out, r * N + col, gl, gh)
                        if col + HALF < N:
                            STORE(out, r * N + col + HALF, ul, uh)

    options = {"fastmath": True}
    if tile.min_blocks and not SIMULATED:
        options["launch_bounds"] = (THREADS, tile.min_blocks)
    return cuda.jit(**options)(mma_gemm)


def flops(T: int, d: int, h: int) -> int:
    """Matrix flops of x @ [wg | wu] (2*T*d*h each); the activation is not counted."""
    return 4 * T * d * h


# ---------------------------------------------------------------------------------------
# host side


_HALF = {np.dtype(np.uint16): "bfloat16", np.dtype(np.int16): "bfloat16",
         np.dtype(np.float16): "float16"}


def half_dtype(d):
    """"bfloat16" (uint16/int16 bits, or torch bfloat16 viewed so) or "float16", else None."""
    return _HALF.get(np.dtype(d.dtype))


def kind_for(dtype, cc):
    """The instruction path for ``dtype`` on a GPU of compute capability ``cc`` (None: the
    simulator): bf16 needs sm_80; fp16 takes m16n8k16 on sm_80+ and m16n8k8 on sm_75. The
    wrappers ask it for :func:`book.kernels.tensorcore.target_cc` (the T4 switch included)."""
    check_capability(cc, dtype)
    if dtype == "bfloat16":
        return "bf16"
    return "f16_sm75" if cc is not None and not FAMILIES["mma_m16n8k16"].has(cc) else "f16"


def half_matrix(a, name):
    """``a`` as a row-major 2-D device array of 16-bit halves, or a clear error."""
    d = as_device(a, name)
    if d.ndim != 2:
        raise ValueError(f"{name} must be a 2-D matrix, got shape {tuple(d.shape)}")
    if half_dtype(d) is None:
        raise TypeError(f"{name} must be bfloat16 (a torch bfloat16 tensor, or its bits as "
                        f"uint16) or float16, got {d.dtype}")
    if d.size and not is_c_contiguous(d):
        raise ValueError(f"{name} is not row-major contiguous (strides {d.strides}): pass "
                         ".contiguous()")
    return d


#: d and h must be multiples of this: 8 halves are one 16-byte copy (module doc)
PIECE = 8


def check_inputs(tile, x, ws, dual):
    """d and h multiples of 8, arrays 16-byte aligned, one dtype: or a clear error."""
    T, d = x.shape
    h = ws[0].shape[1]
    for name, w in zip(("wg", "wu") if dual else ("w",), ws):
        if tuple(w.shape) != (d, h):
            raise ValueError(f"{name} is {tuple(w.shape)}; expected [d, h] = [{d}, {h}] "
                             f"(x is {tuple(x.shape)}; a torch nn.Linear weight is [h, d]: "
                             "pass weight.t().contiguous())")
    bad = [f"{what} = {v} is not a multiple of {PIECE}" for what, v in
           (("d (columns of x)", d), ("h (columns of the weights)", h)) if v % PIECE]
    if d == 0:
        bad.append("d (columns of x) = 0: there is nothing to multiply")
    kinds = {half_dtype(a) for a in [x] + list(ws)}
    if len(kinds) > 1:
        raise TypeError(f"x and the weights must share one dtype, got {sorted(kinds)}")
    if bad:
        raise ValueError("the tensor-core GEMM copies 16 bytes (8 halves) at a time, so d and "
                         "h must be multiples of 8 (T may be anything): " + "; ".join(bad)
                         + ". Pad d or h to a multiple of 8 (zero columns of x and zero "
                         "weight rows add nothing)")
    for name, a in [("x", x)] + list(zip(("wg", "wu") if dual else ("w",), ws)):
        p = address(a)
        if p % 16:
            raise ValueError(f"{name} starts at address {p:#x}, not a multiple of 16 bytes: "
                             "cp.async copies 16 bytes at a time and needs 16-byte aligned "
                             "rows (a fresh allocation is; a slice that starts mid-row is not)")
    return T, d, h


def half_out(out, like, shape, dtype, name="out"):
    """(what to return, its device array): a new ``shape`` output like ``like`` (torch in,
    torch out) when ``out`` is None, else ``out`` checked."""
    if out is None:
        if type(like).__module__.startswith("torch"):
            import torch

            res = torch.empty(shape, dtype=getattr(torch, dtype), device=like.device)
        else:
            res = cuda.device_array(shape, dtype=np.uint16 if dtype == "bfloat16" else np.float16)
        return res, as_device(res, name)
    o = half_matrix(out, name)
    if half_dtype(o) != dtype:
        raise TypeError(f"{name} must be {dtype} like x, got {o.dtype}")
    if tuple(o.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {tuple(o.shape)}")
    if address(o) % 4:
        raise ValueError(f"{name} must be 4-byte aligned (pairs of bfloat16 are stored as one "
                         "word)")
    return out, o


def grid_size(tile, T, h, dual):
    """Blocks of a launch over out [T, h]: the last row and column of blocks may be partial."""
    cols = tile.bn // 2 if dual else tile.bn
    return -(-T // tile.bm) * -(-h // cols)  # partial edge tiles included


def prepare(epilogue, x, wg, wu=None, out=None, out2=None, *, tile=None, stream_key=0):
    """Validate and build one launch of the GEMM with ``epilogue`` (module doc): what every
    wrapper below launches, and what :class:`book.kernels.plan.PlannedCall` plans once
    per tensors (``stream_key`` is unused: the GEMM has no workspace)."""
    tile = (tile or default_tile()).validate()
    dual = epilogue in ("swiglu", "identity", "store2")
    xd = half_matrix(x, "x")
    ws = [half_matrix(wg, "wg" if dual else "w")] + ([half_matrix(wu, "wu")] if dual else [])
    T, d, h = check_inputs(tile, xd, ws, dual)
    dtype = half_dtype(xd)
    kind = kind_for(dtype, target_cc())
    if kind == "f16_sm75" and tile.dynamic:
        tile = MmaTile(**{**tile.__dict__, "stages": 2}).validate()  # no cp.async to overlap
    res, o = half_out(out, x, (T, h), dtype)
    o2 = o
    result = res
    if epilogue == "store2":
        res2, o2 = half_out(out2, x, (T, h), dtype, "out2")
        result = (res, res2)
    kern = build_kernel(tile, epilogue, kind)
    args = [flat(a, n) for a, n in zip((xd, ws[0], ws[-1], o, o2), ("x", "wg", "wu", "out", "out2"))]
    grid = grid_size(tile, T, h, dual) if T and h else 0  # nothing to compute: no launch
    return KernelLaunch(kern, grid, tile.threads, (*args, T, h, d), result,
                        tile.shared_bytes if tile.dynamic else 0)


def prepare_matmul(epilogue, x, w, out=None, *, tile=None, stream_key=0):
    """:func:`prepare` of a one-weight epilogue ("gemm", "ceiling")."""
    return prepare(epilogue, x, w, None, out, tile=tile, stream_key=stream_key)


def _run(epilogue, x, wg, wu, out, out2, tile, stream):
    launch = prepare(epilogue, x, wg, wu, out, out2, tile=tile)
    return launch.launch(0 if stream is None else stream)


def swiglu_mma(x, wg, wu, out=None, *, tile=None, stream=None):
    """``out = silu(x @ wg) * (x @ wu)`` in bfloat16, one launch (the dual GEMM). Called
    plainly (no ``tile``, no ``stream``): :func:`book.kernels.plan.planned`'s call, which
    launches torch CUDA tensors with ``out`` given from a plan on torch's current stream
    (anything else the same launch as with ``stream=0``)."""
    if tile is None and stream is None:
        return planned("swiglu_mma")(x, wg, wu, out)
    return _run("swiglu", x, wg, wu, out, None, tile, stream)


def swiglu_mma_identity(x, wg, wu, out=None, *, tile=None, stream=None):
    """The control: the same kernel storing ``(x @ wg) + (x @ wu)`` (called plainly, planned
    as :func:`swiglu_mma`)."""
    if tile is None and stream is None:
        return planned("swiglu_mma_identity")(x, wg, wu, out)
    return _run("identity", x, wg, wu, out, None, tile, stream)


def gate_up_mma(x, wg, wu, gate=None, up=None, *, tile=None, stream=None):
    """The unfused path's GEMM: the same kernel storing gate and up (two bf16 arrays)."""
    return _run("store2", x, wg, wu, gate, up, tile, stream)


def matmul_mma(x, w, out=None, *, tile=None, stream=None):
    """``out = x @ w`` in bfloat16 (float32 accumulation; called plainly, planned as
    :func:`swiglu_mma`)."""
    if tile is None and stream is None:
        return planned("matmul_mma")(x, w, out)
    return _run("gemm", x, w, None, out, None, tile, stream)


def ceiling_mma(x, w, out=None, *, tile=None, stream=None):
    """The main-loop ceiling: the GEMM's loop on shared memory only (its result is not
    a product: it times the ldmatrix + mma issue rate at this tile, nothing else)."""
    return _run("ceiling", x, w, None, out, None, tile, stream)
