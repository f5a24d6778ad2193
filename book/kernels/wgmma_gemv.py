"""The MLP-up at decode on Hopper: ``wgmma`` with the weights on the M side, TMA into an
mbarrier ring, the k-loop shared evenly by every SM (sm_90a).

``out = silu(x @ wg.T + bg) * (x @ wu.T + bu)`` for a few tokens (x [T, d], T at most
:data:`MAX_T`), the nn.Linear weights wg, wu [h, d], biases [h] optional; bfloat16 or
float16, float32 accumulation. At decode the weights are the work (235 MB at d = 4096,
h = 14336) and the kernel's one job is to keep HBM busy while it reads them once.

Why another kernel when :mod:`book.kernels.decode_mlp` has two GEMVs and
:mod:`book.kernels.wgmma_gemm` a Hopper GEMM (the measurements behind each point are in
records/bench/README.md):

- the ``mma.sync`` GEMV is latency-bound: each byte it has in flight is a register a warp
  loaded, and its grid gives an SM about 27 warps (Nsight Compute: 41% of the warps active,
  most cycles waiting on memory). Here a TMA copy puts 16 KiB in flight from one thread and
  the ring holds ``stages`` of them per SM, whatever the registers;
- the Hopper dual GEMM's tile is 128 rows of x by 128 columns of h, so at decode its grid is
  h / 128 = 112 tiles for 132 SMs: a fifth of the GPU reads nothing. Here the work is the
  flat list of (row tile, k-block) iterations, cut into one equal, contiguous range per
  block (*stream-K*): every SM reads the same number of bytes, ±one k-block.

How it is built (:class:`WgmmaGemvTile` holds every size):

- **Roles swapped**: a weight tile is wgmma's A operand (64 rows of wg and the *same* 64
  rows of wu, two ``m64nNk16`` sharing one B), the tokens its B operand (N = T rounded up
  to 8; TMA reads zeros for tokens past T). A thread's gate accumulator i and up
  accumulator i are the same output (row, token) (:func:`book.kernels.hopper.d_coords`), so
  the epilogue is elementwise in registers.
- **One stage** of the ring is ``kblocks`` (by default one) 64 x 64 box of each weight
  (8 KiB each) and, unless the tokens stay in shared memory (``x_resident``, the default
  where they fit: each box of x copied once a block, with the first stage that needs it),
  the tokens' N x 64 box: 128B-swizzled rows of 64 halves, as :mod:`book.kernels.wgmma_gemm`
  lays its tiles out; the same descriptors read them.
- **Warp specialization**: one thread of warpgroup 0 issues the TMA copies, up to
  ``stages`` k-blocks ahead of the consumer (warpgroup 1), which issues the wgmma and
  releases each stage once they no longer read it (one k-block kept in flight).
- **Stream-K's seams**: a row tile cut between two blocks is finished by the one that
  arrives last: each piece writes its accumulators to a workspace slot, counts its arrival,
  and the last adds the pieces in block order (the same sum every run), then runs the
  epilogue (:mod:`book.kernels.splitk`'s meeting, among the consumer's 128 threads only:
  the producer is already copying the next tile). The counters are left at zero, so a
  launch needs no memset and replays from a CUDA graph.

Any T up to :data:`MAX_T`, d and h multiples of 8 (TMA's 16-byte rows); the caller is
:func:`book.kernels.decode_mlp.prepare` (path ``"hopper_gemv"``). Numba's simulator has no
wgmma or TMA: in the simulator the decode path never picks this kernel, and the stream-K
arithmetic is checked in pure Python (:func:`ranges`, :func:`pieces`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from numba import cuda, float32, int32, uint8, uint32, uint64

from .fused import silu_mul
from .hopper import SIMULATED, SWIZZLE_PERIOD, descriptor
from .launch import MAX_SHARED, RESERVED_SHARED, SM_SHARED

__all__ = ["WgmmaGemvTile", "MAX_T", "gemv_tile", "make_wgmma_gemv", "stream_k", "ranges",
           "pieces", "cta_of", "slot_of", "BK", "BM"]

BM = 64  # rows of each weight per row tile: wgmma's M
BK = 64  # k per box: 64 halves = one 128-byte swizzled row
ALIGN = SWIZZLE_PERIOD  # a 128B-swizzled box starts on 1024 bytes
#: the most tokens: N = 64 keeps a thread's 64 accumulators (gate and up) in registers
MAX_T = 64


@dataclass(frozen=True)
class WgmmaGemvTile:
    """The kernel's geometry: ``n`` (wgmma's N: the tokens, rounded up to 8), ``stages`` (the
    ring), ``ctas_per_sm`` (blocks per SM of the persistent grid), ``kblocks`` (64-column
    boxes of each operand a stage holds: a weight row is read ``128 kblocks`` contiguous
    bytes at a time), ``promotion`` (the L2 fill size the TMA copies ask for), ``waves``
    (the grid is ``waves`` times what the SMs hold at once, each block a shorter range:
    beyond 1 the hardware hands the ranges to whichever SM is free, more seams),
    ``x_resident`` (the tokens stay in shared memory: each block copies each box of x once,
    with the weights of the first stage that needs it, instead of once a stage)."""

    n: int = 16
    stages: int = 8
    ctas_per_sm: int = 1
    kblocks: int = 1
    promotion: str = "256B"
    waves: int = 1
    x_resident: bool = False

    @property
    def w_bytes(self):  # one weight's box: 64 rows x 64 halves
        return BM * BK * 2

    @property
    def x_bytes(self):  # the tokens' box: n rows x 64 halves
        return self.n * BK * 2

    @property
    def x_slot(self):  # a tokens' box in shared memory, 1024-aligned
        return -(-self.x_bytes // ALIGN) * ALIGN

    @property
    def tx_bytes(self):  # what one stage's copies deliver (x's only on a first use if resident)
        return self.kblocks * (2 * self.w_bytes + self.x_bytes)

    @property
    def stage_bytes(self):  # a stage in shared memory: wg's boxes, wu's, the tokens' (if not resident)
        return self.kblocks * (2 * self.w_bytes + (0 if self.x_resident else self.x_slot))

    @property
    def stage_k(self):  # k a stage covers
        return self.kblocks * BK

    @property
    def layout(self) -> dict:
        """Byte offsets from a 1024-aligned base: the full and the empty barriers, the ring,
        then (``x_resident``) the tokens' boxes, ``x_slot`` each."""
        ring = -(-16 * self.stages // ALIGN) * ALIGN
        x = ring + self.stages * self.stage_bytes
        return {"full": 0, "empty": 8 * self.stages, "ring": ring, "x": x, "end": x}

    @property
    def shared_bytes(self):
        """Dynamic shared memory without the resident tokens (:meth:`shared_for`)."""
        return self.layout["end"] + ALIGN

    def shared_for(self, d: int) -> int:
        """Dynamic shared memory for rows of ``d`` halves: with ``x_resident``, room for
        every box of x a row tile's stages read."""
        if not self.x_resident:
            return self.shared_bytes
        return self.shared_bytes + -(-d // self.stage_k) * self.kblocks * self.x_slot

    def fits(self, d: int = 0) -> bool:
        """Whether ``ctas_per_sm`` blocks fit an SM's shared memory (at rows of ``d`` halves
        if x is resident; 0: the ring and barriers alone)."""
        need = self.shared_for(d)
        return need <= MAX_SHARED and self.ctas_per_sm * (need + RESERVED_SHARED) <= SM_SHARED

    @property
    def accumulators(self):  # float32 a consumer thread holds per weight
        return self.n // 2

    def validate(self) -> "WgmmaGemvTile":
        p = []
        if self.n % 8 or not 8 <= self.n <= MAX_T:
            p.append(f"n must be a multiple of 8 from 8 to {MAX_T}")
        if self.stages < 2:
            p.append("stages must be at least 2")
        if self.ctas_per_sm not in (1, 2):
            p.append("ctas_per_sm must be 1 or 2")
        if self.waves < 1:
            p.append("waves must be at least 1")
        if self.kblocks not in (1, 2, 4):
            p.append("kblocks must be 1, 2 or 4")
        if self.promotion not in ("none", "64B", "128B", "256B"):
            p.append("promotion must be none, 64B, 128B or 256B")
        if not self.fits():
            p.append(f"{self.ctas_per_sm} block(s) of {self.shared_bytes} bytes of shared memory"
                     f" do not fit (a block gets at most {MAX_SHARED}, an SM {SM_SHARED} with "
                     f"{RESERVED_SHARED} of each block's reserved)")
        if p:
            raise ValueError(f"invalid {self}: " + "; ".join(p))
        return self

    def describe(self) -> str:
        return (f"wgmma m64n{self.n}k16 twice a k16 (gate and up rows, the tokens shared), "
                f"{self.stages} stages of {self.tx_bytes:,} bytes (k {self.stage_k}: "
                f"{self.kblocks * self.w_bytes // 1024} KiB of each weight + "
                f"{self.kblocks * self.x_bytes:,} of tokens), {self.ctas_per_sm} block(s) "
                f"an SM, {self.shared_bytes:,} bytes of dynamic shared memory")


def gemv_tile(T: int, d: int = 4096) -> WgmmaGemvTile:
    """The default tile for T tokens and rows of d halves: x resident where it fits."""
    if not 1 <= T <= MAX_T:
        raise ValueError(f"the Hopper GEMV takes 1 to {MAX_T} tokens, got T = {T}")
    n = -(-T // 8) * 8
    tile = WgmmaGemvTile(n=n, stages=6, x_resident=True)
    return tile if tile.fits(d) else WgmmaGemvTile(n=n, stages=6)


# ---------------------------------------------------------------------------------------
# stream-K: which block reads what, worked out on the host (the kernel divides nothing:
# ptxas makes a 64-bit division a subroutine call, and a call serializes every wgmma)


def ranges(iters: int, blocks: int):
    """[(start, end)] of each block: ``iters`` (row tile, k-block) iterations cut into
    ``blocks`` contiguous ranges whose lengths differ by at most one."""
    return [(b * iters // blocks, (b + 1) * iters // blocks) for b in range(blocks)]


def cta_of(j: int, iters: int, blocks: int) -> int:
    """The block whose range holds iteration ``j`` (the inverse of :func:`ranges`)."""
    return ((j + 1) * blocks - 1) // iters


def pieces(m: int, nk: int, iters: int, blocks: int):
    """The blocks that read part of row tile ``m`` (``nk`` k-blocks), in order."""
    return list(range(cta_of(m * nk, iters, blocks), cta_of(m * nk + nk - 1, iters, blocks) + 1))


def slot_of(c: int, m: int, table) -> int:
    """Block ``c``'s workspace slot for its piece of row tile ``m``: a block's range can cut
    only its first and its last tile, so two slots a block (2c, 2c + 1) hold every seam."""
    return 2 * c + (0 if m == table[3 * c] else 1)


def stream_k(mt: int, nk: int, blocks: int) -> np.ndarray:
    """The kernel's table (int32) for ``blocks`` (at most ``mt nk``, so none is idle): for
    each block b, ``[3b : 3b + 3]`` = its first row tile, its first k-block in that tile and
    how many iterations it reads; then for each row tile m, ``[3 blocks + 2m : + 2]`` = the
    first and the last block that read part of it."""
    iters = mt * nk
    if not 1 <= blocks <= iters:
        # an empty range would sit between the pieces of a tile and never arrive
        raise ValueError(f"{blocks} blocks for {iters} iterations: launch 1 to {iters} blocks")
    out = np.zeros(3 * blocks + 2 * mt, dtype=np.int32)
    for b, (s, e) in enumerate(ranges(iters, blocks)):
        out[3 * b: 3 * b + 3] = (s // nk, s % nk, e - s)
    for m in range(mt):
        ps = pieces(m, nk, iters, blocks)
        out[3 * blocks + 2 * m: 3 * blocks + 2 * m + 2] = (ps[0], ps[-1])
    return out


# ---------------------------------------------------------------------------------------
# the kernel


@functools.lru_cache(maxsize=None)
def make_wgmma_gemv(tile: WgmmaGemvTile, bias: bool, kind: str = "bf16"):
    """``k(maps, sk, bg, bu, out, part, count, T, d, h)``: ``maps`` the tensor maps of wg,
    wu and x (16 uint64 each), ``sk`` the block ranges (:func:`stream_k`), ``out`` [T * h]
    flat, ``part``/``count`` the seams' workspace (module doc). Launch ``ctas_per_sm`` blocks
    an SM of 256 threads with ``tile.shared_for(d)`` bytes of dynamic shared memory."""
    tile.validate()
    if kind not in ("bf16", "f16"):
        raise ValueError(f"kind must be bf16 or f16, got {kind!r}")
    if SIMULATED:
        raise RuntimeError("the Hopper GEMV needs a Hopper GPU: Numba's simulator has no "
                           "wgmma or TMA")
    from .hopper import (fence_mbarrier_init, global_address, make_wgmma, mbar_arrive,
                         mbar_arrive_expect_tx, mbar_init, mbar_wait, named_barrier,
                         shared_address, tma_load_2d, wgmma_commit, wgmma_fence, wgmma_wait)
    from .splitk import load_f32_cg
    from .wide import load_f32, store_f32

    WGMMA = make_wgmma(tile.n, kind)
    NA = tile.accumulators
    ST, SB, WB, TX = tile.stages, tile.stage_bytes, tile.w_bytes, tile.tx_bytes
    KB, XS = tile.kblocks, tile.x_slot
    XRES = tile.x_resident
    TXW = KB * 2 * WB  # a stage's weight bytes (all it delivers once x is resident)
    U_OFF, X_OFF = KB * WB, 2 * KB * WB  # wu's boxes, then the tokens', in a stage
    SHIFT = 6 + KB.bit_length() - 1  # log2 of the k a stage covers
    LAY = tile.layout
    FULL, EMPTY, RING, XREG = LAY["full"], LAY["empty"], LAY["ring"], LAY["x"]
    # K-major operands, 128B swizzle, 8-row groups 1024 bytes apart (as wgmma_gemm's)
    DESC = np.uint64(descriptor(0, 16, 1024, "128B"))
    STEP = np.uint64(32 >> 4)  # the next k16: 32 bytes along the swizzled row
    KSTEPS = BK // 16
    MASK = uint32(0xFFFFFC00)
    BIAS = bias
    SLOT = 128 * 2 * NA  # floats of one workspace slot: every consumer thread's gate and up

    def wgmma_gemv(maps, sk, bg, bu, out, part, count, T, d, h):
        smem = cuda.shared.array(0, uint8)
        flag = cuda.shared.array(1, int32)  # the meeting's answer: is this piece the last?
        base = (shared_address(smem, 0) + uint32(ALIGN - 1)) & MASK
        tid = cuda.threadIdx.x
        if tid == 0:
            for s in range(ST):
                mbar_init(base + FULL + 8 * s, 1)  # the producer's arrive (+ the bytes)
                mbar_init(base + EMPTY + 8 * s, 1)  # the consumer's release
            fence_mbarrier_init()
        cuda.syncthreads()
        nk = (d + (BK * KB - 1)) >> SHIFT  # stages of a row tile (TMA reads zeros past d)
        G = cuda.gridDim.x
        b = cuda.blockIdx.x
        m0 = sk[3 * b]  # this block's range (stream_k): first tile, its k-block, length
        kb0 = sk[3 * b + 1]
        n = sk[3 * b + 2]
        if tid < 128:  # the producer
            if tid == 0:
                map_g = global_address(maps, 0)
                map_u = global_address(maps, 16)
                map_x = global_address(maps, 32)
                s = 0
                ph = 0
                m = m0
                kb = kb0
                for q in range(n):
                    mbar_wait(base + EMPTY + 8 * s, ph ^ 1)  # the consumer is done with it
                    full = base + FULL + 8 * s
                    # resident x: its boxes come with the first nk stages (each k once)
                    xnew = not XRES or q < nk
                    mbar_arrive_expect_tx(full, TX if xnew else TXW)
                    st = base + RING + s * SB
                    for kk in range(KB):  # a row's 128 KB bytes asked for back to back
                        kc = (kb * KB + kk) * BK
                        tma_load_2d(st + kk * WB, map_g, kc, m * BM, full)
                        tma_load_2d(st + U_OFF + kk * WB, map_u, kc, m * BM, full)
                        if not XRES:
                            tma_load_2d(st + X_OFF + kk * XS, map_x, kc, 0, full)
                        elif xnew:
                            tma_load_2d(base + XREG + (kb * KB + kk) * XS, map_x, kc, 0, full)
                    kb += 1
                    if kb == nk:
                        kb = 0
                        m += 1
                    s += 1
                    if s == ST:
                        s = 0
                        ph ^= 1
        else:  # the consumer warpgroup
            lt = tid - 128
            accg = cuda.local.array(NA, float32)
            accu = cuda.local.array(NA, float32)
            g = (lt & 31) >> 2
            r0 = 16 * (lt >> 5) + g  # rows r0 and r0 + 8 of the tile (d_coords)
            c0 = 2 * (lt & 3)  # tokens c0, c0 + 1 of every 8
            s = 0
            ph = 0
            prev = 0
            m = m0
            kb = kb0
            left = n
            while left > 0:
                nb = min(nk - kb, left)
                for q in range(nb):
                    mbar_wait(base + FULL + 8 * s, ph)  # the stage's bytes have landed
                    st = base + RING + s * SB
                    # x's boxes: in the stage, or where the first stage of this k left them
                    xs = base + XREG + (kb + q) * KB * XS if XRES else st + X_OFF
                    wgmma_fence()
                    for kk in range(KB):
                        da = DESC | uint64((st + kk * WB) >> 4)
                        du = DESC | uint64((st + U_OFF + kk * WB) >> 4)
                        dx = DESC | uint64((xs + kk * XS) >> 4)
                        for ks in range(KSTEPS):
                            acc_on = uint32(q + kk + ks > 0)
                            WGMMA(accg, da + STEP * uint64(ks), dx + STEP * uint64(ks), acc_on)
                            WGMMA(accu, du + STEP * uint64(ks), dx + STEP * uint64(ks), acc_on)
                    wgmma_commit()
                    wgmma_wait(1)  # the previous k-block's wgmma are done: its stage is free
                    if q > 0 and lt == 0:
                        mbar_arrive(base + EMPTY + 8 * prev)
                    prev = s
                    s += 1
                    if s == ST:
                        s = 0
                        ph ^= 1
                wgmma_wait(0)
                if lt == 0:
                    mbar_arrive(base + EMPTY + 8 * prev)
                left -= nb
                kb = 0
                m += 1
                mt = m - 1  # the tile just read
                # a seam: this block read only part of tile mt; its last piece finishes it
                if nb < nk:
                    pb = (2 * b + (0 if mt == m0 else 1)) * SLOT
                    for i in range(NA):
                        part[pb + i * 128 + lt] = accg[i]
                        part[pb + (NA + i) * 128 + lt] = accu[i]
                    cuda.threadfence()  # the piece is visible before its arrival counts
                    named_barrier(1, 128)
                    p0 = sk[3 * G + 2 * mt]
                    p1 = sk[3 * G + 2 * mt + 1]
                    if lt == 0:
                        before = cuda.atomic.add(count, mt, 1)
                        last = before == p1 - p0
                        flag[0] = int32(1) if last else int32(0)
                        if last:
                            count[mt] = 0  # every piece is in: ready for the next launch
                    named_barrier(1, 128)
                    if flag[0] == 0:
                        continue
                    for i in range(NA):
                        accg[i] = float32(0.0)
                        accu[i] = float32(0.0)
                    for c in range(p0, p1 + 1):  # the pieces in block order: one sum every run
                        pc = (2 * c + (0 if mt == sk[3 * c] else 1)) * SLOT
                        for i in range(NA):
                            accg[i] += load_f32_cg(part, pc + i * 128 + lt)
                            accu[i] += load_f32_cg(part, pc + (NA + i) * 128 + lt)
                # the epilogue: accumulator i is row r0 + 8 ((i >> 1) & 1), token
                # 8 (i >> 2) + c0 + (i & 1), in both weights
                for i in range(NA):
                    j = mt * BM + r0 + 8 * ((i >> 1) & 1)
                    t = 8 * (i >> 2) + c0 + (i & 1)
                    if j < h and t < T:
                        gate = accg[i]
                        up = accu[i]
                        if BIAS:
                            gate += load_f32(bg, j)
                            up += load_f32(bu, j)
                        store_f32(out, t * h + j, silu_mul(gate, up))

    return cuda.jit(fastmath=True, launch_bounds=(256, tile.ctas_per_sm))(wgmma_gemv)
