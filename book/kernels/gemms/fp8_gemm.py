"""The fused FP8 MLP-up on Hopper: ``silu(x @ wg.T) * (x @ wu.T)`` from eight-bit operands,
stored as bfloat16 or as e4m3 for the next GEMM.

Inputs as serving stacks keep them (:mod:`book.quantize` makes them):

- ``xq`` e4m3 [T, d] with ``sx`` float32 [T], a scale per token (x[t] ~ xq[t] * sx[t]);
- ``wgq``, ``wuq`` e4m3 [h, d] (the nn.Linear layout) with ``sg``, ``su`` float32 [h], a
  scale per output channel, quantized once, offline.

Then ``gate[t, c] = sx[t] * sg[c] * sum_k xq[t, k] wgq[c, k]`` (float32 accumulation in the
tensor cores, the scales applied once per output in the epilogue), the same for up, and
``y = silu(gate) * up``, stored as bfloat16, or as e4m3 ``satfinite(y / out_scale)`` (a
static per-tensor scale: what the down projection reads; beyond +-448 it saturates).

The machinery is :mod:`book.kernels.wgmma_gemm`'s (chapter 9), reused, not rewritten: its
:class:`~book.kernels.wgmma_gemm_tile.HopperTile` with ``elem=1`` (a stage's 128-byte swizzled
rows now hold 128 values: ``bk = 128``, the same bytes per stage, twice the k), its tile
schedule, tensor maps, plan cache and cluster launch. The kernel keeps its ring, its
producer and consumer warpgroups and its TMA-stored epilogue as they are there; what
differs is the instruction (``wgmma ... m64n256k32.f32.e4m3.e4m3``, no transpose arguments:
:mod:`book.kernels.fp8`), the three scale reads of the epilogue, and the e4m3 store (16 bits
per thread pair, a 128-byte staging row per 64 rows: one TMA box of 128 x 64 bytes per
consumer). Any T; d and h multiples of 16 (16-byte rows for TMA).

:func:`model` is the kernel in NumPy, tile by tile, through the models of
:mod:`book.kernels.hopper` and :mod:`book.kernels.fp8` (TMA boxes, FP8 wgmma, the
accumulator layout, the staging tile's addresses, which the kernel shares): what the
simulator runs, and what the GPU lane holds the kernel to.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
from numba import cuda, float32, uint8, uint32, uint64

from ...numba_compat import compiled_for
from ..instructions import fp8
from ..elementwise.fused import silu_mul
from ..instructions.hopper import SIMULATED, SWIZZLE_PERIOD, check_capability, d_coords, descriptor, tma_box
from ..host.launch import MAX_SHARED, KernelLaunch, allow_shared, as_device, sm_count
from ..host.plan import cluster_grid, cufunction, launch_once, need_driver, planned
from ..instructions.tensorcore import target_cc
from .wgmma_gemm import device_schedule, tensor_maps
from .wgmma_gemm_tile import HopperTile, schedule
# the scales' shared-memory accesses, named as the kernel factory (the chapter's source) reads
# them: module globals
from ..instructions.wide import ld_shared_f32, ld_shared_f32x2, st_shared_f32

__all__ = ["TILE", "TILE_E4M3_OUT", "OUTS", "build_kernel", "swiglu_fp8", "model",
           "staging_offset", "SIGNATURE", "tile_for", "ptx_variants", "flops", "prepare",
           "inverse_scale", "operands"]

ALIGN = SWIZZLE_PERIOD
#: output kinds: bfloat16, or e4m3 with a given scale
OUTS = ("bfloat16", "e4m3")
#: x, wg, wu as TMA boxes of one 128 x 128-byte stage; the output in 64-row boxes
TILE = HopperTile(bk=128, elem=1)
TILE_E4M3_OUT = dataclasses.replace(TILE, out_elem=1)
#: the kernel's argument types: tensor maps, schedule, sx, sg, su, T, d, h, 1 / out_scale
SIGNATURE = ("void(uint64[::1], int32[::1], float32[::1], float32[::1], float32[::1], "
             "int64, int64, int64, float32)")


def tile_for(out: str, **kw) -> HopperTile:
    """The default tile for an output kind (its staging tile holds 2- or 1-byte values)."""
    return dataclasses.replace(TILE_E4M3_OUT if out == "e4m3" else TILE, **kw)


def staging_offset(r, j, t, out_elem):
    """Byte offset, in a consumer's staging tile (64 rows, 128B-swizzled as a TMA store
    reads it), of the output pair a thread holds in row ``r`` (0..63), accumulator chunk
    ``j`` (columns 8j..8j+7 of the tile) and column pair ``t`` (columns 8j + 2t, + 1).

    16-bit outputs: 64 columns fill a 128-byte row, so chunk j is 16-byte chunk j % 8 of
    box j // 8 (boxes 8192 bytes apart); 8-bit outputs: 128 columns fill the row, chunk
    j is the half (j % 2) of 16-byte chunk j // 2. The chunk index is XORed with r % 8,
    the swizzle (:func:`book.kernels.hopper.swizzle`). One definition: the kernel and
    :func:`model` both call it."""
    if out_elem == 2:
        return (j >> 3) * 8192 + r * 128 + (((j & 7) ^ (r & 7)) << 4) + t * 4
    return r * 128 + (((j >> 1) ^ (r & 7)) << 4) + (j & 1) * 8 + t * 2


def shared_bytes(tile: HopperTile) -> int:
    """Dynamic shared memory to ask for: the tile's layout, then the scales of one tile,
    and room to align the start (:attr:`HopperTile.shared_bytes`, which counts the scales of
    one-byte operands)."""
    return tile.shared_bytes


def flops(T: int, d: int, h: int) -> int:
    """Matrix flops of x @ [wg | wu]^T."""
    return 4 * T * d * h


def build_kernel(tile: HopperTile = TILE, out: str = "bfloat16", fmt: str = "e4m3"):
    """``k(maps, sched, sx, sg, su, T, d, h, inv_out)``: ``maps`` the tensor maps of x, wg,
    wu and the output (16 uint64 each), ``sched`` the tile schedule
    (:func:`book.kernels.wgmma_gemm_tile.schedule`)."""
    tile = tile.validate()
    if tile.elem != 1 or tile.out_elem != (1 if out == "e4m3" else 2) or tile.multicast:
        raise ValueError(f"an FP8 tile has elem=1, out_elem {1 if out == 'e4m3' else 2} for "
                         f"{out} out, and no multicast: got {tile}")
    if out not in OUTS or fmt not in fp8.FORMATS:
        raise ValueError(f"out must be one of {OUTS} and fmt e4m3 or e5m2, got {out!r}, {fmt!r}")
    return make_fp8_gemm(tile, out, fmt)


@functools.lru_cache(maxsize=None)
def make_fp8_gemm(tile, out, fmt):
    """The kernel factory (the source the chapter shows); call build_kernel."""
    if SIMULATED:
        raise RuntimeError("the FP8 GEMM needs a Hopper GPU: Numba's simulator has no wgmma "
                           "or TMA (book.kernels.fp8_gemm.model computes what it does)")
    from ..instructions.fp8 import st_shared_e4m3x2
    from ..instructions.hopper import (
        bulk_commit, bulk_wait, bulk_wait_read, cluster_ctarank, cluster_sync,
        fence_mbarrier_init, fence_proxy_async, global_address, make_wgmma, mbar_arrive,
        mbar_arrive_expect_tx, mbar_init, mbar_wait, named_barrier, setmaxnreg_dec,
        setmaxnreg_inc, shared_address, st_shared_bf16x2, tma_load_2d, tma_store_2d,
        wgmma_commit, wgmma_fence, wgmma_wait,
    )

    WGMMA = make_wgmma(tile.wgmma_n, fmt)
    E4M3_OUT = out == "e4m3"
    OUT_ELEM = tile.out_elem
    BM, BN, BK, ST = tile.bm, tile.bn, tile.bk, tile.stages
    NACC = tile.wgmma_n // 2
    CHUNKS = BN // 8  # 8-column chunks of one half (4 accumulators each)
    UP = 4 * CHUNKS  # accumulator index of up's partner of a gate accumulator
    LAY = tile.layout
    A_OFF, B_OFF, C_OFF = LAY["a"], LAY["b"], LAY["c"]
    S_OFF = LAY["end"]  # the tile's column scales, gate's then up's (after the barriers)
    FULL, EMPTY = LAY["full"], LAY["empty"]
    A_BYTES, B_BYTES, B_HALF, C_BYTES = tile.a_bytes, tile.b_bytes, tile.b_half_bytes, tile.c_bytes
    STAGE_TX = tile.stage_bytes
    CONSUMER_A = 64 * BK * tile.elem
    NC = tile.consumers
    KSTEPS = BK * tile.elem // 32  # one wgmma reads 32 bytes of each row
    DESC = np.uint64(descriptor(0, 16, 1024, "128B"))  # as wgmma_gemm's: the same bytes
    STEP = np.uint64(32 >> 4)
    BOX_COLS = 128 // OUT_ELEM  # output columns of one 128-byte box row
    BOXES = BN // BOX_COLS
    INFLIGHT = tile.inflight
    PREGS, CREGS = tile.producer_regs, tile.consumer_regs
    MASK = uint32(0xFFFFFC00)
    CL = tile.cluster
    offset = cuda.jit(device=True, inline="always")(staging_offset)
    if shared_bytes(tile) > MAX_SHARED:
        raise ValueError(f"{shared_bytes(tile)} bytes of shared memory: a block gets at most "
                         f"{MAX_SHARED}")

    def fp8_gemm(maps, sched, sx, sg, su, T, K, H, inv_out):
        smem = cuda.shared.array(0, uint8)
        base = (shared_address(smem, 0) + uint32(ALIGN - 1)) & MASK
        tid = cuda.threadIdx.x
        wg = tid >> 7
        rank = cluster_ctarank() if CL == 2 else uint32(0)
        if tid == 0:
            for s in range(ST):
                mbar_init(base + FULL + 8 * s, 1)
                mbar_init(base + EMPTY + 8 * s, NC)
            fence_mbarrier_init()
        if CL == 2:
            cluster_sync()
        else:
            cuda.syncthreads()
        nk = (K + BK - 1) // BK
        ntiles = sched.size
        if wg == 0:  # the producer: chapter 9's, with 128-value rows
            setmaxnreg_dec(PREGS)
            if tid == 0:
                map_x = global_address(maps, 0)
                map_g = global_address(maps, 16)
                map_u = global_address(maps, 32)
                s = 0
                ph = 0
                i = cuda.blockIdx.x // CL
                while i < ntiles:
                    t = sched[i]
                    row = ((t >> 16) * CL + rank) * BM
                    col = (t & 0xFFFF) * BN
                    for kb in range(nk):
                        mbar_wait(base + EMPTY + 8 * s, ph ^ 1)
                        full = base + FULL + 8 * s
                        mbar_arrive_expect_tx(full, STAGE_TX)
                        kc = kb * BK
                        tma_load_2d(base + A_OFF + s * A_BYTES, map_x, kc, row, full)
                        bs = base + B_OFF + s * B_BYTES
                        tma_load_2d(bs, map_g, kc, col, full)
                        tma_load_2d(bs + B_HALF, map_u, kc, col, full)
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
            tp = lt & 3
            ctile = base + C_OFF + c * C_BYTES
            scales = base + S_OFF
            sp = scales + 8 * tp  # this thread's column pair in the scales of chunk 0
            rscale = scales + 8 * BN + 256 * c  # this consumer's 64 row scales
            rp = rscale + 4 * (16 * warp + g)  # this thread's first row's
            map_o = global_address(maps, 48)
            s = 0
            ph = 0
            prev = 0
            i = cuda.blockIdx.x // CL
            while i < ntiles:
                t = sched[i]
                for kb in range(nk):
                    mbar_wait(base + FULL + 8 * s, ph)
                    da = DESC | uint64((base + A_OFF + s * A_BYTES + c * CONSUMER_A) >> 4)
                    db = DESC | uint64((base + B_OFF + s * B_BYTES) >> 4)
                    wgmma_fence()
                    for ks in range(KSTEPS):
                        WGMMA(acc, da + STEP * uint64(ks), db + STEP * uint64(ks),
                              uint32(kb + ks > 0))
                    wgmma_commit()
                    if INFLIGHT:
                        wgmma_wait(1)
                        if kb > 0 and lt == 0:
                            mbar_arrive(base + EMPTY + 8 * prev)
                    else:
                        wgmma_wait(0)
                        if lt == 0:
                            mbar_arrive(base + EMPTY + 8 * s)
                    prev = s
                    s += 1
                    if s == ST:
                        s = 0
                        ph ^= 1
                if INFLIGHT:
                    wgmma_wait(0)
                    if lt == 0:
                        mbar_arrive(base + EMPTY + 8 * prev)
                # The epilogue: the scales, silu(gate) * up, the store. Accumulator
                # 4j + 2hh + e is row 16 warp + g + 8 hh, column 8j + 2 tp + e; its up
                # partner is UP accumulators on (book.kernels.wgmma_gemm.pairs).
                row = ((t >> 16) * CL + rank) * BM + 64 * c
                col = (t & 0xFFFF) * BN
                # The tile's scales into shared memory, once both consumers are past the
                # last tile's reads: the column scales (gate's by consumer 0, up's, with
                # 1 / out_scale, by 1) and each consumer's 64 row scales. Read back in the
                # loop below (a shared load is not hoisted past the stores before it: few
                # registers held beside the accumulators). Rows past T and columns past h
                # are never stored (TMA clips the box): their scales are read at the last
                # row or column, with no branch.
                named_barrier(3, 256)
                cs = uint32(min(col + lt, H - 1))
                st_shared_f32(scales + 4 * (c * BN + lt),
                              sg[cs] if c == 0 else su[cs] * inv_out)
                if lt < 64:
                    st_shared_f32(rscale + 4 * lt, sx[uint32(min(row + lt, T - 1))])
                if lt == 0:
                    bulk_wait_read(0)  # the last TMA store has read the staging tile
                named_barrier(3, 256)
                for j in range(CHUNKS):
                    g0, g1 = ld_shared_f32x2(sp + 32 * j)
                    u0, u1 = ld_shared_f32x2(sp + 4 * BN + 32 * j)
                    for hh in range(2):
                        sr = ld_shared_f32(rp + 32 * hh)
                        q = 4 * j + 2 * hh
                        # (acc * row scale) * column scale: no product of scales alone,
                        # which the compiler would compute early and keep (registers)
                        y0 = silu_mul(acc[q] * sr * g0, acc[q + UP] * sr * u0)
                        y1 = silu_mul(acc[q + 1] * sr * g1, acc[q + UP + 1] * sr * u1)
                        a = ctile + offset(16 * warp + g + 8 * hh, j, tp, OUT_ELEM)
                        if E4M3_OUT:  # 1 / out_scale is in up's scales
                            st_shared_e4m3x2(a, y0, y1)
                        else:
                            st_shared_bf16x2(a, y0, y1)
                fence_proxy_async()  # generic-proxy writes, read next by TMA
                named_barrier(1 + c, 128)
                if lt == 0:
                    for b in range(BOXES):
                        tma_store_2d(map_o, col + BOX_COLS * b, row, ctile + b * 8192)
                    bulk_commit()
                i += cuda.gridDim.x // CL
            if lt == 0:
                bulk_wait(0)
        if CL == 2:
            cluster_sync()

    return cuda.jit(fastmath=True, launch_bounds=(tile.threads, 1))(fp8_gemm)


def ptx_variants() -> dict:
    """The kernels whose PTX the tests read (book.kernels.ptx: ``fp8_<name>``)."""
    return {"gemm_bf16_out": build_kernel(TILE, "bfloat16"),
            "gemm_e4m3_out": build_kernel(TILE_E4M3_OUT, "e4m3"),
            "gemm_e5m2_in": build_kernel(TILE, "bfloat16", "e5m2"),
            "gemm_e4m3_out_single": build_kernel(tile_for("e4m3", cluster=1), "e4m3"),
            "gemm_e4m3_out_inflight": build_kernel(tile_for("e4m3", inflight=1), "e4m3")}


# ---------------------------------------------------------------------------------------
# the model: the kernel in NumPy, tile by tile


def model(xq, sx, wgq, sg, wuq, su, out="bfloat16", out_scale=1.0, fmt="e4m3",
          tile: HopperTile | None = None) -> np.ndarray:
    """What the kernel stores, computed as it computes it: each (row tile, column tile) of
    the schedule, each consumer's 64 rows, the TMA boxes of every k-block
    (:func:`book.kernels.hopper.tma_box`), four FP8 wgmma per stage
    (:func:`book.kernels.fp8.wgmma_model`, float32 accumulators), the epilogue thread by
    thread through the accumulator layout (:func:`book.kernels.hopper.d_coords`) into the
    swizzled staging tile (:func:`staging_offset`), and the TMA store (rows past T and
    columns past h dropped). ``xq``, ``wgq``, ``wuq``: uint8 codes. Returns float32 values
    (bfloat16 out) or uint8 codes (e4m3 out)."""
    tile = (tile or tile_for(out)).validate()
    xq, wgq, wuq = (np.ascontiguousarray(a, dtype=np.uint8) for a in (xq, wgq, wuq))
    sx, sg, su = (np.asarray(a, dtype=np.float32) for a in (sx, sg, su))
    T, d = xq.shape
    h = wgq.shape[0]
    BM, BN, BK = tile.bm, tile.bn, tile.bk
    inv = np.float32(1.0) / np.float32(out_scale)
    res = np.zeros((T, h), dtype=np.uint8 if out == "e4m3" else np.float32)
    desc = descriptor(0, 16, 1024, "128B")
    th = np.arange(128)
    warp, g, tp = th >> 5, (th & 31) >> 2, th & 3
    for entry in schedule(-(-T // BM), -(-h // BN), tile.group):
        m, n = int(entry) >> 16, int(entry) & 0xFFFF
        col = n * BN
        for c in range(tile.consumers):
            row = m * BM + 64 * c
            acc = np.zeros((64, 2 * BN), dtype=np.float32)
            for kb in range(-(-d // BK)):
                a = tma_box(xq, kb * BK, m * BM, (BK, BM))[c * 64 * 128:(c + 1) * 64 * 128]
                b = np.concatenate([tma_box(wgq, kb * BK, col, (BK, BN)),
                                    tma_box(wuq, kb * BK, col, (BK, BN))])
                img = np.concatenate([a, b])
                for ks in range(BK // 32):
                    acc = fp8.wgmma_model(img, desc + 2 * ks, desc + ((a.size + 32 * ks) >> 4),
                                          2 * BN, fmt, d=acc)
            stage = np.zeros(tile.c_bytes, dtype=np.uint8)
            rows = 16 * warp + g
            sxr = [np.where(row + rows + 8 * hh < T, sx[np.minimum(row + rows + 8 * hh, T - 1)],
                            0).astype(np.float32) for hh in range(2)]
            for j in range(BN // 8):
                cj = col + 8 * j + 2 * tp
                ok = cj < h
                sgl = [np.where(ok, sg[np.minimum(cj + e, h - 1)], 0).astype(np.float32)
                       for e in range(2)]
                sul = [np.where(ok, su[np.minimum(cj + e, h - 1)], 0).astype(np.float32)
                       for e in range(2)]
                for hh in range(2):
                    ys = []
                    for e in range(2):
                        q = 4 * j + 2 * hh + e
                        r, cc = np.array([d_coords(int(x), q) for x in th]).T
                        assert (r == rows + 8 * hh).all() and (cc == 8 * j + 2 * tp + e).all()
                        gate = acc[r, cc] * (sxr[hh] * sgl[e])
                        up = acc[r, cc + BN] * (sxr[hh] * sul[e])
                        ys.append((gate / (np.float32(1) + np.exp(-gate)) * up).astype(
                            np.float32))
                    off = staging_offset(rows + 8 * hh, j, tp, tile.out_elem)
                    if out == "e4m3":
                        stage[off] = fp8.encode(ys[0] * inv)
                        stage[off + 1] = fp8.encode(ys[1] * inv)
                    else:
                        bits = [(y.view(np.uint32) + 0x7FFF + ((y.view(np.uint32) >> 16) & 1))
                                >> 16 for y in ys]  # round to nearest even bfloat16
                        for e in range(2):
                            stage[off + 2 * e] = bits[e] & 0xFF
                            stage[off + 2 * e + 1] = bits[e] >> 8
            _store(res, stage, row, col, tile, out)
    return res


def _store(res, stage, row, col, tile, out):
    """The TMA store of one staging tile: each 128-byte box unswizzled, clipped to res."""
    from ..instructions.hopper import swizzle

    T, h = res.shape
    cols = 128 // tile.out_elem
    for b in range(tile.bn // cols):
        box = stage[b * 8192:(b + 1) * 8192]
        logical = box[swizzle(np.arange(8192), "128B")].reshape(64, 128)
        if out == "e4m3":
            vals = logical
        else:
            vals = (logical.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        c0 = col + b * cols
        nr, nc = min(64, T - row), min(cols, h - c0)
        if nr > 0 and nc > 0:
            res[row:row + nr, c0:c0 + nc] = vals[:nr, :nc]


# ---------------------------------------------------------------------------------------
# host side


def _bytes(a, name):
    """A row-major 2-D device array of eight-bit codes (torch float8 or uint8 tensors, or
    Numba uint8 arrays), or a clear error."""
    if type(a).__module__.startswith("torch"):
        import torch

        if a.element_size() != 1:
            raise TypeError(f"{name} must be eight-bit (float8_e4m3fn or its uint8 codes), "
                            f"got {a.dtype}")
        a = a.view(torch.uint8)
    d = as_device(a, name)
    if d.ndim != 2 or np.dtype(d.dtype).itemsize != 1 or d.strides[1] != 1:
        raise ValueError(f"{name} must be a row-major 2-D matrix of bytes, got {d.dtype} "
                         f"{tuple(d.shape)} strides {d.strides}")
    return d


def _scales(a, n, name):
    d = as_device(a, name)
    if d.ndim != 1 or d.shape[0] != n or np.dtype(d.dtype) != np.float32:
        raise ValueError(f"{name} must be float32 [{n}], got {d.dtype} {tuple(d.shape)}")
    return d


def _output(out, like, T, h, kind):
    if out is None:
        import torch

        dt = torch.bfloat16 if kind == "bfloat16" else torch.float8_e4m3fn
        out = torch.empty((T, h), dtype=dt, device=like.device)
    if kind == "e4m3":
        return out, _bytes(out, "out")
    from .mma_gemm import half_matrix

    return out, half_matrix(out, "out")


def _launch(tile, out, fmt, xd, gd, ud, od, sx, sg, su, T, d, h, inv, result):
    box_x, box_w, box_o = (tile.bk, tile.bm), (tile.bk, tile.bn), (128 // tile.out_elem, 64)
    maps = tensor_maps([xd, gd, ud, od], [box_x, box_w, box_w, box_o])
    sched = device_schedule(-(-T // tile.bm), -(-h // tile.bn), tile)
    kern = build_kernel(tile, out, fmt)
    args = (maps, sched, sx, sg, su, T, d, h, np.float32(inv))
    if tile.cluster == 1:
        grid = min(sched.size, tile.max_blocks or sm_count())
    else:
        allow_shared(kern, args, tile.shared_bytes)  # the layout and the scales; compiles
        cu = need_driver()
        grid = cluster_grid(cu, cufunction(cu, compiled_for(kern, args)), tile, sched.size)
    return KernelLaunch(kern, grid, tile.threads, args, result, tile.shared_bytes, tile.cluster)


def inverse_scale(out_dtype: str, out_scale: float) -> float:
    """What the kernel multiplies its output by: 1 for bfloat16, float32 ``1 / out_scale``
    for e4m3 codes."""
    if out_dtype not in OUTS:
        raise ValueError(f"out_dtype must be one of {OUTS}, got {out_dtype!r}")
    return 1.0 if out_dtype == "bfloat16" else float(np.float32(1.0) / np.float32(out_scale))


def prepare(xq, sx, wgq, sg, wuq, su, out=None, *, out_dtype: str = "bfloat16",
            inv: float = 1.0, fmt: str = "e4m3", tile: HopperTile | None = None, stream_key=0):
    """Validate and build the launch of :func:`swiglu_fp8` (``inv``: :func:`inverse_scale`):
    a :class:`book.kernels.launch.KernelLaunch` with its cluster, what
    :func:`book.kernels.plan.planned` plans once per tensors (``stream_key`` is unused: no
    workspace)."""
    tile = tile or tile_for(out_dtype)
    xd, gd, ud, sxd, sgd, sud, res, od, T, d, h = operands(xq, sx, wgq, sg, wuq, su, out,
                                                            out_dtype)
    return _launch(tile, out_dtype, fmt, xd, gd, ud, od, sxd, sgd, sud, T, d, h, inv, res)


def operands(xq, sx, wgq, sg, wuq, su, out, out_dtype, max_t=None, kernel="the FP8 GEMM"):
    """The FP8 kernels' arguments checked (this GEMM's and :mod:`book.kernels.fp8_gemv`'s):
    ``(xd, gd, ud, sxd, sgd, sud, result, od, T, d, h)``, device views of the codes, the
    scales and the output, or a clear error (``max_t``: the most tokens the kernel takes)."""
    check_capability(target_cc())
    xd, gd, ud = _bytes(xq, "xq"), _bytes(wgq, "wgq"), _bytes(wuq, "wuq")
    T, d = xd.shape
    h = gd.shape[0]
    if tuple(gd.shape) != (h, d) or tuple(ud.shape) != (h, d):
        raise ValueError(f"wgq, wuq must be [h, d] = [{h}, {d}] (nn.Linear layout), got "
                         f"{tuple(gd.shape)}, {tuple(ud.shape)}")
    if d % 16 or h % 16 or not d or not h or not T or (max_t and T > max_t):
        tokens = f"1 to {max_t} tokens" if max_t else "T positive"
        raise ValueError(f"{kernel} takes {tokens} and d, h positive multiples of 16 (16-byte "
                         f"rows for TMA): got T = {T}, d = {d}, h = {h}")
    sxd, sgd, sud = _scales(sx, T, "sx"), _scales(sg, h, "sg"), _scales(su, h, "su")
    res, od = _output(out, xq, T, h, out_dtype)
    return xd, gd, ud, sxd, sgd, sud, res, od, T, d, h


def swiglu_fp8(xq, sx, wgq, sg, wuq, su, out=None, *, out_dtype: str = "bfloat16",
               out_scale: float = 1.0, fmt: str = "e4m3", tile: HopperTile | None = None,
               stream=None):
    """``out = silu(sx * sg * (xq @ wgq.T)) * (sx * su * (xq @ wuq.T))``, bfloat16, or e4m3
    codes of ``out / out_scale`` (saturated) when ``out_dtype="e4m3"``. torch CUDA tensors
    (float8 or their uint8 codes; float32 scales) or Numba device arrays. Called plainly (no
    ``stream``): :func:`book.kernels.plan.planned`'s call (the launch planned once per
    tensors and options, made on torch's current stream)."""
    inv = inverse_scale(out_dtype, out_scale)
    options = dict(out_dtype=out_dtype, inv=inv, fmt=fmt, tile=tile)
    if stream is None:
        return planned("swiglu_fp8", *options.items())(xq, sx, wgq, sg, wuq, su, out)
    return launch_once(prepare(xq, sx, wgq, sg, wuq, su, out, **options), stream)
