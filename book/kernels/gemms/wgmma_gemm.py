"""The Hopper dual GEMM: TMA into an mbarrier ring, warp specialization, ``wgmma`` (sm_90a).

``out = silu(x @ wg.T) * (x @ wu.T)`` for x [T, d] and the nn.Linear weights wg, wu [h, d]
(bfloat16, or float16), float32 accumulation, one 16-bit store per output. The weights are
read in their own layout: a row of an nn.Linear weight is one output column's k values, so
both operands are *K-major*, the layout wgmma reads without a transpose.

How it is built (the way Hopper GEMMs are; :class:`~book.kernels.wgmma_gemm_tile.HopperTile`
holds every size, :mod:`book.kernels.wgmma_gemm_tile` the geometry):

- **A persistent grid**: one block per SM; the blocks work through a host-made schedule
  (:func:`~book.kernels.wgmma_gemm_tile.schedule`) that walks ``group`` column tiles at a
  time down the rows, so what one
  wave of blocks reads (a slice of x and ``group`` tiles of the weights) stays in L2.
  Blocks come in *clusters* of two (``cluster``): the pair takes one schedule entry, row
  tiles 2p and 2p+1 of the same columns, side by side on two SMs launched together, so the
  same weight tiles are asked for twice at the same moment. That measured faster than
  independent blocks at T = 8192 (``wgmma_dual_gemm_single`` in book/data). Sharing the
  read itself through TMA multicast (``multicast=True``: each CTA copies half the weights
  into both) measured much slower here (``wgmma_dual_gemm_multicast``), for reasons not
  found yet.
- **Warp specialization**: warpgroup 0 is the *producer*: one of its threads issues the TMA
  copies; it gives most of its registers away (``setmaxnreg``). Warpgroups 1 and 2 are the
  *consumers*: 64 rows of the tile each, issuing ``wgmma`` and running the epilogue.
- **An mbarrier ring** of ``stages`` shared-memory stages. Stage s has a *full* barrier
  (the producer arrives with the byte count it expects; the copy engine completes the
  bytes) and an *empty* barrier (each consumer warpgroup arrives once its wgmma no longer
  read the stage). Phases alternate in parity, so each side keeps a stage index and a
  parity bit and never resets a barrier.
- **One stage** holds a 128 x 64 tile of x and a 256 x 64 tile of weights: 128 rows of wg
  and the *same* 128 rows of wu, one after the other, three TMA boxes whose 128-byte rows
  are written with the 128B swizzle. One ``wgmma.m64n256k16`` then multiplies a
  consumer's 64 rows of x by gate *and* up at once: accumulator column c < 128 is gate
  column c, and column 128 + c its up partner, in the same thread (:func:`pairs`).
- **The epilogue** runs straight from the accumulators: silu(gate) * up, rounded to 16 bits
  and stored two at a time; rows past T and columns past h are not stored, and TMA reads
  zeros outside the tensors, so any T works and h and d need only be multiples of 8.

Epilogues (the controls of the chapter's table):

- ``"swiglu"``: the dual GEMM;
- ``"identity"``: the same kernel storing gate + up (same loads and stores, no exp);
- ``"store2"``: the unfused path's GEMM: gate and up stored to two arrays;
- ``"gemm"``: a plain GEMM x @ w.T (the 256 B rows are 256 rows of one weight);
- ``"ceiling"``: the consumers' main loop alone, on whatever shared memory holds, no TMA:
  what this wgmma structure can issue.

Taught in chapter 9 (``chapters/09_hopper.ipynb``); the instructions are
:mod:`book.kernels.hopper`.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda, float32, uint8, uint32, uint64

from ...numba_compat import compiled_for
from ..elementwise.fused import silu_mul
from ..instructions.hopper import SIMULATED, check_capability, descriptor, tensor_map
from ..host.launch import KernelLaunch, allow_shared, sm_count
from .mma_gemm import half_dtype, half_matrix, half_out
from ..host.plan import Launches, cluster_grid, cufunction, launch_once, need_driver, planned
from ..instructions.tensorcore import target_cc
from .wgmma_gemm_tile import ALIGN, TILE, ColumnSplit, HopperTile, schedule

# (its geometry, HopperTile, TILE, ColumnSplit and schedule: book.kernels.wgmma_gemm_tile)
__all__ = ["EPILOGUES", "build_kernel", "pairs", "swiglu_wgmma", "swiglu_wgmma_identity",
           "gate_up_wgmma", "matmul_wgmma", "ceiling_wgmma", "flops", "check_shapes",
           "tensor_maps", "device_schedule", "prepare", "prepare_matmul"]

EPILOGUES = ("swiglu", "identity", "store2", "gemm", "ceiling")


def pairs(tile: HopperTile = TILE):
    """For each accumulator index i of a gate column: the index of its up partner (the
    same output, ``bn`` accumulator columns on: ``4 bn / 8`` registers on)."""
    return [(i, i + tile.bn // 2) for i in range(tile.bn // 2)]


def build_kernel(tile: HopperTile = TILE, epilogue: str = "swiglu", kind: str = "bf16"):
    """``k(maps, sched, K)``: ``maps`` the tensor maps of x, the two weights and the two
    outputs (16 uint64 each), ``sched`` the tile schedule; see the module doc for
    ``epilogue``."""
    return make_wgmma_gemm(tile.validate(), epilogue, kind)


@functools.lru_cache(maxsize=None)
def make_wgmma_gemm(tile, epilogue, kind="bf16"):
    """The kernel factory (the source the chapter shows); call build_kernel."""
    if epilogue not in EPILOGUES:
        raise ValueError(
            f"epilogue must be one of {EPILOGUES}, got {epilogue!r}")
    if kind not in ("bf16", "f16") or tile.elem != 2 or tile.out_elem != 2:
        raise ValueError(f"kind must be bf16 or f16 on a 16-bit tile, got {kind!r} (eight "
                         "bits: book.kernels.fp8_gemm)")
    if SIMULATED:
        raise RuntimeError(
            "the wgmma kernels need a Hopper GPU: Numba's simulator has no "
            "wgmma or TMA (run the models of book.kernels.hopper instead)")
    from ..instructions.hopper import (
        bulk_commit, bulk_wait, bulk_wait_read, cluster_ctarank, cluster_sync,
        fence_mbarrier_init, fence_proxy_async, global_address, make_wgmma,
        mbar_arrive, mbar_arrive_cluster, mbar_arrive_expect_tx, mbar_init,
        mbar_wait, named_barrier, setmaxnreg_dec, setmaxnreg_inc,
        shared_address, st_shared_bf16x2, st_shared_f16x2, tma_load_2d,
        tma_load_2d_multicast, tma_store_2d, wgmma_commit, wgmma_fence,
        wgmma_wait,
    )

    WGMMA = make_wgmma(tile.wgmma_n, kind)
    ST_PAIR = st_shared_bf16x2 if kind == "bf16" else st_shared_f16x2
    BM, BN, BK, ST = tile.bm, tile.bn, tile.bk, tile.stages
    NACC = tile.wgmma_n // 2  # accumulators per consumer thread
    CHUNKS = BN // 8  # 8-column chunks of one half (4 accumulators each)
    LAY = tile.layout
    A_OFF, B_OFF, C_OFF = LAY["a"], LAY["b"], LAY["c"]
    FULL, EMPTY = LAY["full"], LAY["empty"]
    A_BYTES, B_BYTES, B_HALF, C_BYTES = (
        tile.a_bytes, tile.b_bytes, tile.b_half_bytes, tile.c_bytes)
    STAGE_TX = tile.stage_bytes
    CONSUMER_A = 64 * BK * 2  # bytes of one consumer's 64 rows of the x tile
    NC = tile.consumers
    KSTEPS = BK // 16
    # descriptor bits above the address: K-major, 128B swizzle, 8-row groups
    # 1024 bytes apart (SBO); LBO is unused by the swizzled K-major layout (16
    # by convention)
    DESC = np.uint64(descriptor(0, 16, 1024, "128B"))
    # the next k16: 32 bytes further along the swizzled row
    STEP = np.uint64(32 >> 4)
    DUAL = epilogue in ("swiglu", "identity", "store2")
    LOADS = epilogue != "ceiling"
    EPI = epilogue
    # the output leaves in rounds of BN columns through the consumer's staging
    # tile: one round for swiglu and identity, two for store2 (gate, then up)
    # and gemm
    ROUNDS = (0 if epilogue == "ceiling"
              else 1 if epilogue in ("swiglu", "identity") else 2)
    COLS = BN if DUAL else 2 * BN  # output columns per tile
    # second B box: wu's same rows, or w's next BN rows
    B2_ROW = 0 if DUAL else BN
    BOXES = BN // 64  # 64-column boxes (128 swizzled bytes a row) per round
    INFLIGHT = tile.inflight
    PREGS, CREGS = tile.producer_regs, tile.consumer_regs
    MASK = uint32(0xFFFFFC00)  # ~(ALIGN - 1)
    CL = tile.cluster
    MC = CL if tile.multicast else 1  # CTAs each weight tile is copied to

    @cuda.jit(device=True, inline="always")
    def release(bar, lt):
        # a consumer warpgroup is done reading a stage: one arrive on the
        # stage's empty barrier in every CTA whose producer copies into it
        # (thread lt arrives at CTA lt)
        if MC == 1:
            if lt == 0:
                mbar_arrive(bar)
        elif lt < MC:
            mbar_arrive_cluster(bar, lt)

    def wgmma_gemm(maps, sched, K):
        smem = cuda.shared.array(0, uint8)
        base = (shared_address(smem, 0) + uint32(ALIGN - 1)) & MASK
        tid = cuda.threadIdx.x
        wg = tid >> 7
        rank = cluster_ctarank() if CL == 2 else uint32(0)
        if tid == 0:
            for s in range(ST):
                # the producer's arrive (+ the bytes)
                mbar_init(base + FULL + 8 * s, 1)
                # one arrive per consumer warpgroup of every CTA its stage is
                # copied to
                mbar_init(base + EMPTY + 8 * s, NC * MC)
            fence_mbarrier_init()
        if CL == 2:
            # the partner's barriers exist before anything arrives on them
            cluster_sync()
        else:
            cuda.syncthreads()
        nk = (K + BK - 1) // BK  # TMA reads zeros past K
        ntiles = sched.size
        if wg == 0:  # the producer
            setmaxnreg_dec(PREGS)
            if tid == 0 and LOADS:
                map_x = global_address(maps, 0)
                map_b0 = global_address(maps, 16)
                map_b1 = global_address(maps, 32)
                s = 0
                ph = 0
                # both CTAs of a cluster take the same entry
                i = cuda.blockIdx.x // CL
                while i < ntiles:
                    t = sched[i]
                    row = ((t >> 16) * CL + rank) * BM
                    col = (t & 0xFFFF) * COLS
                    for kb in range(nk):
                        # the consumers are done
                        mbar_wait(base + EMPTY + 8 * s, ph ^ 1)
                        full = base + FULL + 8 * s
                        mbar_arrive_expect_tx(full, STAGE_TX)
                        kc = kb * BK
                        tma_load_2d(base + A_OFF + s * A_BYTES, map_x, kc,
                                    row, full)
                        bs = base + B_OFF + s * B_BYTES
                        if MC == 1:
                            tma_load_2d(bs, map_b0, kc, col, full)
                            tma_load_2d(bs + B_HALF, map_b1, kc, col + B2_ROW,
                                        full)
                        elif rank == 0:
                            # gate's half of the weights, for both CTAs
                            tma_load_2d_multicast(bs, map_b0, kc, col, full, 3)
                        else:  # up's half, for both
                            tma_load_2d_multicast(bs + B_HALF, map_b1, kc,
                                                  col + B2_ROW, full, 3)
                        s += 1
                        if s == ST:
                            s = 0
                            ph ^= 1
                    i += cuda.gridDim.x // CL
        else:  # a consumer: 64 rows of each tile
            setmaxnreg_inc(CREGS)
            c = wg - 1
            lt = tid & 127
            acc = cuda.local.array(NACC, float32)
            warp = lt >> 5
            g = (lt & 31) >> 2
            # byte of this thread's column pair within 8 columns
            t4 = (lt & 3) * 4
            # this thread's rows of the staging tile (r and r + 8), and its
            # swizzle: the 16-byte chunk j of row r lives at chunk j ^ (r % 8),
            # and r % 8 = g
            ctile = base + C_OFF + c * C_BYTES
            cbase = ctile + (16 * warp + g) * 128 + t4
            map_o0 = global_address(maps, 48)
            map_o1 = global_address(maps, 64)
            s = 0
            ph = 0
            prev = 0
            i = cuda.blockIdx.x // CL
            while i < ntiles:
                t = sched[i]
                for kb in range(nk):
                    if LOADS:
                        # the stage's bytes have landed
                        mbar_wait(base + FULL + 8 * s, ph)
                    da = DESC | uint64(
                        (base + A_OFF + s * A_BYTES + c * CONSUMER_A) >> 4)
                    db = DESC | uint64((base + B_OFF + s * B_BYTES) >> 4)
                    wgmma_fence()
                    for ks in range(KSTEPS):
                        WGMMA(acc, da + STEP * uint64(ks),
                              db + STEP * uint64(ks), uint32(kb + ks > 0))
                    wgmma_commit()
                    if INFLIGHT:
                        # the previous k-block's wgmma are done, so its stage
                        # is free
                        wgmma_wait(1)
                        if LOADS and kb > 0:
                            release(base + EMPTY + 8 * prev, lt)
                    else:
                        wgmma_wait(0)
                        if LOADS:
                            release(base + EMPTY + 8 * s, lt)
                    prev = s
                    s += 1
                    if s == ST:
                        s = 0
                        ph ^= 1
                if INFLIGHT:
                    wgmma_wait(0)
                    if LOADS:
                        release(base + EMPTY + 8 * prev, lt)
                # The epilogue. Accumulator 4j + 2h + e is row g + 8h
                # (+ 16 warp), column 8j + 2(lane & 3) + e (byte t4 of the
                # chunk): gate chunk j and its up partner j + CHUNKS meet here. Each round: wait until the last
                # TMA store has read the staging tile, write 16-bit pairs into
                # it (swizzled: conflict-free), hand it to TMA.
                row = ((t >> 16) * CL + rank) * BM + 64 * c
                col = (t & 0xFFFF) * COLS
                if ROUNDS == 0:
                    # the ceiling: one word per tile, so ptxas keeps the wgmma
                    ST_PAIR(cbase, acc[0], acc[NACC - 1])
                for rnd in range(ROUNDS):
                    if lt == 0:
                        bulk_wait_read(0)
                    named_barrier(1 + c, 128)
                    for h in range(2):
                        for j in range(CHUNKS):
                            a = (cbase + (j >> 3) * 8192 + h * 1024
                                 + (((j & 7) ^ g) << 4))
                            # this round's accumulators
                            q = 4 * (j + rnd * CHUNKS) + 2 * h
                            lo = acc[q]
                            hi = acc[q + 1]
                            if EPI == "swiglu" or EPI == "identity":
                                ulo = acc[q + 4 * CHUNKS]
                                uhi = acc[q + 4 * CHUNKS + 1]
                                if EPI == "swiglu":
                                    ST_PAIR(a, silu_mul(lo, ulo),
                                            silu_mul(hi, uhi))
                                else:
                                    ST_PAIR(a, lo + ulo, hi + uhi)
                            else:
                                ST_PAIR(a, lo, hi)
                    # the generic-proxy writes, read next by TMA
                    fence_proxy_async()
                    named_barrier(1 + c, 128)
                    if lt == 0:
                        m_out = (map_o1 if (EPI == "store2" and rnd == 1)
                                 else map_o0)
                        c0 = col + (BN * rnd if EPI == "gemm" else 0)
                        for b in range(BOXES):
                            tma_store_2d(m_out, c0 + 64 * b, row,
                                         ctile + b * 8192)
                        bulk_commit()
                i += cuda.gridDim.x // CL
            if lt == 0:
                # the last stores are complete before the block's memory goes
                bulk_wait(0)
        if CL == 2:
            # nothing arrives on, or is copied into, a CTA that has left
            cluster_sync()

    return cuda.jit(fastmath=True, launch_bounds=(tile.threads, 1))(wgmma_gemm)


def flops(T: int, d: int, h: int) -> int:
    """Matrix flops of x @ [wg | wu]^T (2*T*d*h each); the activation is not counted."""
    return 4 * T * d * h


# ---------------------------------------------------------------------------------------
# host side

_MAPS = {}  # (address, shape, box, ...) of each tensor map set -> device array of maps
_SCHED = {}  # (row tiles, column tiles, group, cluster) -> device schedule


def tensor_maps(arrays, boxes, promotion="256B", mode="128B"):
    """A device array of the tensor maps of ``arrays`` (2-D, row-major), 16 uint64 each.
    Cached by everything a map encodes (address, sizes, stride, box, L2 promotion,
    swizzle): the same key gives the same 128 bytes, so the cache can never hand out a
    stale map."""
    from ..host.launch import address

    key = tuple((address(a), *a.shape, a.strides[0], a.dtype.itemsize, box, promotion, mode)
                for a, box in zip(arrays, boxes))
    dev = _MAPS.get(key)
    if dev is None:
        raw = b"".join(tensor_map(address(a), a.shape[0], a.shape[1], a.strides[0], box,
                                  itemsize=a.dtype.itemsize, mode=mode, promotion=promotion)
                       for a, box in zip(arrays, boxes))
        dev = cuda.to_device(np.frombuffer(raw, dtype=np.uint64).copy())
        if len(_MAPS) > 256:
            _MAPS.clear()
        _MAPS[key] = dev
    return dev


def device_schedule(m_tiles, n_tiles, tile, first=0):
    """The device schedule: with clusters of 2, its row entries are pairs of row tiles."""
    m_units = -(-m_tiles // tile.cluster)
    key = (m_units, n_tiles, tile.group, first)
    dev = _SCHED.get(key)
    if dev is None:
        dev = _SCHED[key] = cuda.to_device(schedule(m_units, n_tiles, tile.group, first))
    return dev


def check_shapes(x, ws, names):
    """(T, d, h) of x [T, d] and weights [h, d], or a clear error."""
    T, d = x.shape
    h = ws[0].shape[0]
    for name, w in zip(names, ws):
        if tuple(w.shape) != (h, d):
            raise ValueError(f"{name} is {tuple(w.shape)}; expected the nn.Linear layout "
                             f"[h, d] = [{h}, {d}] (x is {tuple(x.shape)})")
    kinds = {half_dtype(a) for a in [x] + list(ws)}
    if len(kinds) > 1:
        raise TypeError(f"x and the weights must share one dtype, got {sorted(kinds)}")
    bad = [f"{what} = {v}" for what, v in (("d (columns of x)", d), ("h (rows of the weights)", h))
           if v % 8 or v == 0]
    if bad or T == 0:
        raise ValueError("TMA needs rows that are a multiple of 16 bytes: d and h must be "
                         "positive multiples of 8, T positive; got " + ", ".join(bad or [f"T = {T}"]))
    return T, d, h


def _launch(epilogue, tile, kind, xd, ws, o, o2, T, d, h, span=None):
    """The launch of ``tile`` over the output's columns ``span`` = (start, end) (all of them
    if None; the start a multiple of the tile's columns): a persistent grid, in clusters of
    ``tile.cluster`` (as many as can be resident, which asks the compiled kernel)."""
    box_x, box_w, box_o = (tile.bk, tile.bm), (tile.bk, tile.bn), (64, 64)
    maps = tensor_maps([xd, ws[0], ws[-1], o, o2], [box_x, box_w, box_w, box_o, box_o])
    cols = tile.bn if epilogue in ("swiglu", "identity", "store2") else 2 * tile.bn
    c0, c1 = span or (0, h)
    sched = device_schedule(-(-T // tile.bm), -(-c1 // cols), tile, c0 // cols)
    kern = build_kernel(tile, epilogue, kind)
    args = (maps, sched, d)
    if tile.cluster == 1:
        grid = min(sched.size, tile.max_blocks or sm_count())
    else:
        allow_shared(kern, args, tile.shared_bytes)  # compiles for these types
        cu = need_driver()
        grid = cluster_grid(cu, cufunction(cu, compiled_for(kern, args)), tile, sched.size)
    return KernelLaunch(kern, grid, tile.threads, args, None, tile.shared_bytes, tile.cluster)


def prepare(epilogue, x, wg, wu=None, out=None, out2=None, *, tile=None, stream_key=0):
    """Validate and build the launch of the GEMM with ``epilogue`` (module doc): a
    :class:`book.kernels.launch.KernelLaunch` (with its cluster), or for a
    :class:`~book.kernels.wgmma_gemm_tile.ColumnSplit` the :class:`book.kernels.plan.Launches`
    of its two tiles; what every wrapper below launches, and what
    :func:`book.kernels.plan.planned` plans once per tensors (``stream_key`` is unused: the
    GEMM has no workspace)."""
    tile = (tile or TILE).validate()
    if isinstance(tile, ColumnSplit) and epilogue not in ("swiglu", "identity", "store2"):
        raise ValueError("a ColumnSplit is for the dual GEMM's epilogues")
    check_capability(target_cc())  # the GPU, or what the T4 switch names (book/target.py)
    dual = epilogue in ("swiglu", "identity", "store2")
    names = ("wg", "wu") if dual else ("w",)
    xd = half_matrix(x, "x")
    ws = [half_matrix(wg, names[0])] + ([half_matrix(wu, "wu")] if dual else [])
    T, d, h = check_shapes(xd, ws, names)
    dtype = half_dtype(xd)
    kind = "bf16" if dtype == "bfloat16" else "f16"
    res, o = half_out(out, x, (T, h), dtype)
    o2, result = o, res
    if epilogue == "store2":
        res2, o2 = half_out(out2, x, (T, h), dtype, "out2")
        result = (res, res2)
    if isinstance(tile, ColumnSplit):  # two launches, the narrow tiles' after the wide's
        cut = min(tile.cols, h)
        launches = [_launch(epilogue, tile.wide, kind, xd, ws, o, o2, T, d, h, (0, cut))]
        if cut < h:
            launches.append(_launch(epilogue, tile.narrow, kind, xd, ws, o, o2, T, d, h, (cut, h)))
        return Launches(launches, result)
    kl = _launch(epilogue, tile, kind, xd, ws, o, o2, T, d, h)
    kl.result = result
    return kl


def prepare_matmul(epilogue, x, w, out=None, *, tile=None, stream_key=0):
    """:func:`prepare` of a one-weight epilogue ("gemm", "ceiling")."""
    return prepare(epilogue, x, w, None, out, tile=tile, stream_key=stream_key)


def _run(name, epilogue, x, wg, wu, out, out2, tile, stream):
    """A wrapper's call: called plainly (no ``stream``), the planned call (the plan kept per
    tensors and tile, launched on torch's current stream); with a stream, the launch made now
    on it through the driver."""
    if stream is None:
        pc = planned(name, ("tile", tile)) if tile is not None else planned(name)
        return pc(x, wg, wu, out, out2) if epilogue == "store2" else (
            pc(x, wg, out) if wu is None else pc(x, wg, wu, out))
    return launch_once(prepare(epilogue, x, wg, wu, out, out2, tile=tile), stream)


def swiglu_wgmma(x, wg, wu, out=None, *, tile=None, stream=None):
    """``out = silu(x @ wg.T) * (x @ wu.T)``: the Hopper dual GEMM (nn.Linear weights).
    Called plainly (no ``stream``): :func:`book.kernels.plan.planned`'s call."""
    return _run("swiglu_wgmma", "swiglu", x, wg, wu, out, None, tile, stream)


def swiglu_wgmma_identity(x, wg, wu, out=None, *, tile=None, stream=None):
    """The control: the same kernel storing ``x @ wg.T + x @ wu.T``."""
    return _run("swiglu_wgmma_identity", "identity", x, wg, wu, out, None, tile, stream)


def gate_up_wgmma(x, wg, wu, gate=None, up=None, *, tile=None, stream=None):
    """The unfused path's GEMM: the same kernel storing gate and up."""
    return _run("gate_up_wgmma", "store2", x, wg, wu, gate, up, tile, stream)


def matmul_wgmma(x, w, out=None, *, tile=None, stream=None):
    """``out = x @ w.T`` (w [n, d], an nn.Linear weight)."""
    return _run("matmul_wgmma", "gemm", x, w, None, out, None, tile, stream)


def ceiling_wgmma(x, w, out=None, *, tile=None, stream=None):
    """The main-loop ceiling: the consumers' wgmma loop on shared memory only, no TMA (its
    result is not a product: it times what the loop can issue at this tile)."""
    return _run("ceiling_wgmma", "ceiling", x, w, None, out, None, tile, stream)
