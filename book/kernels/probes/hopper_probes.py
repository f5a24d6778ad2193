"""Small kernels that run one Hopper instruction each, so the models of
:mod:`book.kernels.hopper` can be held to the GPU (the GPU lane's tests, chapter 9's cells).

- :func:`tma_tile`: one TMA box into shared memory, its raw bytes copied out: compare
  with :func:`book.kernels.hopper.tma_box`;
- :func:`wgmma_once`: a shared-memory image of your making, one ``wgmma`` with your two
  descriptors, every thread's accumulators copied out: compare with
  :func:`book.kernels.hopper.wgmma_model` through :func:`book.kernels.hopper.d_coords`;
- :func:`mbarrier_phases`: an mbarrier taken through phases by arrivals and a TMA copy,
  with what ``try_wait`` answered at each step: compare with
  :class:`book.kernels.hopper.MbarrierModel`.

They need a Hopper GPU (sm_90a).
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda, float32, uint8, uint32, uint64

from ..instructions.hopper import SWIZZLE_PERIOD, check_capability, tensor_map
from ..host.launch import allow_shared
from ..instructions.tensorcore import target_cc

ALIGN = SWIZZLE_PERIOD
MASK = uint32(0xFFFFFC00)


def _gpu():
    check_capability(target_cc())  # the GPU, or what the T4 switch names (book/target.py)


@functools.lru_cache(maxsize=None)
def tma_kernel():
    from ..instructions.hopper import (
        fence_mbarrier_init, global_address, mbar_arrive_expect_tx, mbar_init, mbar_wait,
        shared_address, tma_load_2d,
    )

    def k(tmap, c0, c1, nbytes, out):
        smem = cuda.shared.array(0, uint8)
        base = (shared_address(smem, 0) + uint32(ALIGN - 1)) & MASK
        off = base - shared_address(smem, 0)  # where the aligned tile starts in smem
        bar = cuda.shared.array(1, dtype=np.uint64)
        b = shared_address(bar, 0)
        tid = cuda.threadIdx.x
        if tid == 0:
            mbar_init(b, 1)
            fence_mbarrier_init()
        cuda.syncthreads()
        if tid == 0:
            mbar_arrive_expect_tx(b, nbytes)
            tma_load_2d(base, global_address(tmap, 0), c0, c1, b)
        mbar_wait(b, 0)
        i = tid
        while i < nbytes:
            out[i] = smem[off + i]
            i += 128

    return cuda.jit(k)


def tma_tile(tensor, c0: int, c1: int, box: tuple[int, int], mode: str = "128B") -> np.ndarray:
    """The bytes one TMA load of ``tensor`` (a 2-D device array or torch CUDA tensor of
    16-bit elements) at column ``c0``, row ``c1`` with ``box = (columns, rows)`` leaves in
    shared memory, starting from a 1024-aligned address."""
    _gpu()
    from ..host.launch import address
    from ..gemms.mma_gemm import half_matrix

    t = half_matrix(tensor, "tensor")
    raw = tensor_map(address(t), t.shape[0], t.shape[1], t.strides[0], box, mode=mode)
    dmap = cuda.to_device(np.frombuffer(raw, dtype=np.uint64).copy())
    nbytes = box[0] * box[1] * 2
    out = cuda.device_array(nbytes, dtype=np.uint8)
    kern = tma_kernel()
    args = [dmap, c0, c1, nbytes, out]
    allow_shared(kern, args, nbytes + ALIGN)
    kern[1, 128, 0, nbytes + ALIGN](*args)
    return out.copy_to_host()


@functools.lru_cache(maxsize=None)
def wgmma_kernel(n, kind):
    from ..instructions.hopper import (
        fence_proxy_async, make_wgmma, shared_address, wgmma_commit, wgmma_fence, wgmma_wait,
    )

    WGMMA = make_wgmma(n, kind)
    NACC = n // 2

    def k(image, da, db, out):
        smem = cuda.shared.array(0, uint8)
        base = (shared_address(smem, 0) + uint32(ALIGN - 1)) & MASK
        off = base - shared_address(smem, 0)
        tid = cuda.threadIdx.x
        i = tid
        while i < image.size:  # (a range() with a run-time step would divide in 64 bits)
            smem[off + i] = image[i]
            i += 128
        fence_proxy_async()  # ordinary stores, read next by the tensor cores
        cuda.syncthreads()
        acc = cuda.local.array(NACC, float32)
        shift = uint64(base >> 4)  # descriptors were made relative to the image's start
        wgmma_fence()
        WGMMA(acc, da[0] + shift, db[0] + shift, uint32(0))
        wgmma_commit()
        wgmma_wait(0)
        for i in range(NACC):
            out[tid * NACC + i] = acc[i]

    return cuda.jit(k)


def wgmma_once(image: np.ndarray, desc_a: int, desc_b: int, n: int,
               kind: str = "bf16") -> np.ndarray:
    """[128 threads, n/2] accumulators of one m64nNk16 (D = A B^T, no C) whose operands
    are read from the shared-memory bytes ``image`` (placed on a 1024-byte boundary)
    through descriptors whose addresses are relative to the image's start."""
    _gpu()
    img = cuda.to_device(np.ascontiguousarray(image, dtype=np.uint8))
    da = cuda.to_device(np.array([desc_a], dtype=np.uint64))
    db = cuda.to_device(np.array([desc_b], dtype=np.uint64))
    out = cuda.device_array(128 * (n // 2), dtype=np.float32)
    kern = wgmma_kernel(n, kind)
    args = [img, da, db, out]
    nbytes = image.size + ALIGN
    allow_shared(kern, args, nbytes)
    kern[1, 128, 0, nbytes](*args)
    return out.copy_to_host().reshape(128, n // 2)


@functools.lru_cache(maxsize=None)
def mbarrier_kernel():
    from ..instructions.hopper import (
        fence_mbarrier_init, mbar_arrive, mbar_arrive_expect_tx, mbar_init, mbar_try_wait,
        shared_address,
    )

    def k(out):
        bar = cuda.shared.array(1, dtype=np.uint64)
        b = shared_address(bar, 0)
        tid = cuda.threadIdx.x
        if tid == 0:
            mbar_init(b, 2)
            fence_mbarrier_init()
            # fresh (phase 0): parity 1 "completed", parity 0 not
            out[0] = mbar_try_wait(b, 1)
            out[1] = mbar_try_wait(b, 0)
            mbar_arrive(b)  # 1 of 2 arrivals
            out[2] = mbar_try_wait(b, 0)
            mbar_arrive(b)  # phase 0 completes
            out[3] = mbar_try_wait(b, 0)
            out[4] = mbar_try_wait(b, 1)
            mbar_arrive_expect_tx(b, 0)  # arrivals of phase 1; no bytes expected
            mbar_arrive(b)
            out[5] = mbar_try_wait(b, 1)
            out[6] = mbar_try_wait(b, 0)

    return cuda.jit(k)


#: the steps :func:`mbarrier_phases` takes, in order (what try_wait was asked after each)
MBARRIER_STEPS = [("init(2)", 1), ("init(2)", 0), ("arrive", 0), ("arrive", 0),
                  ("arrive", 1), ("arrive_expect_tx(0)+arrive", 1),
                  ("arrive_expect_tx(0)+arrive", 0)]


def mbarrier_phases() -> list[bool]:
    """What ``try_wait.parity`` answered at each step of :data:`MBARRIER_STEPS` on the GPU."""
    _gpu()
    out = cuda.to_device(np.full(len(MBARRIER_STEPS), 7, dtype=np.int32))
    mbarrier_kernel()[1, 32](out)
    return [bool(v) for v in out.copy_to_host()]


def mbarrier_model_phases() -> list[bool]:
    """The same steps on :class:`book.kernels.hopper.MbarrierModel`."""
    from ..instructions.hopper import MbarrierModel

    m = MbarrierModel(2)
    res = [m.try_wait(1), m.try_wait(0)]
    m.arrive()
    res.append(m.try_wait(0))
    m.arrive()
    res += [m.try_wait(0), m.try_wait(1)]
    m.arrive(expect_tx=0)
    m.arrive()
    res += [m.try_wait(1), m.try_wait(0)]
    return res
