"""One warp, one tensor-core instruction: kernels that show who holds what.

``tile_mma_kernel(kind)`` is a one-warp kernel ``k(a, b, d, regs)``: it stages A (16 x K)
and B (K x 8, both row-major 16-bit bit patterns: bfloat16 or float16 viewed as uint16) in
shared memory, loads the fragments with ``ldmatrix`` (B with ``.trans``: it is stored k-major,
the instruction wants each lane's two k of one column), runs one ``mma.sync`` from zero
accumulators, and writes D (16 x 8 float32, row-major) and every lane's registers
(``regs[lane, 0:4]`` A, ``regs[lane, 4:6]`` B) so a reader can compare them with the PTX ISA's
tables (:func:`book.kernels.tensorcore.a_coords` and friends).

``kind``: ``"bf16_16816"`` and ``"f16_16816"`` (sm_80+: the tiles arrive by ``cp.async``),
``"f16_1688"`` (sm_75, the T4: ``mma.m16n8k8``, tiles copied by plain loads, no ``cp.async``).
"""

from __future__ import annotations

import functools

from numba import cuda, float32, uint16

from .tensorcore import (
    SIMULATED, c_coords, check_capability, cp_async16, cp_async_commit, cp_async_wait, ldmatrix_x4,
    ldmatrix_x4_trans, mma_bf16_16816, mma_f16_1688, mma_f16_16816,
)

KINDS = ("bf16_16816", "f16_16816", "f16_1688")
K_OF = {"bf16_16816": 16, "f16_16816": 16, "f16_1688": 8}


@functools.lru_cache(maxsize=None)
def tile_mma_kernel(kind: str):
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    K = K_OF[kind]
    A_N, B_N = 16 * K, K * 8
    ASYNC = kind != "f16_1688"  # cp.async needs sm_80
    BF16 = kind == "bf16_16816"
    ALIGN = None if SIMULATED else 16
    c_row_col = cuda.jit(device=True, inline="always")(c_coords)

    def tile_mma(a, b, d, regs):
        lane = cuda.threadIdx.x
        sA = cuda.shared.array(A_N, uint16, alignment=ALIGN)
        sB = cuda.shared.array(B_N, uint16, alignment=ALIGN)
        if ASYNC:  # 16-byte pieces, global -> shared, then wait for them
            if lane < A_N // 8:
                cp_async16(sA, lane * 8, a, lane * 8)
            if lane < B_N // 8:
                cp_async16(sB, lane * 8, b, lane * 8)
            cp_async_commit()
            cp_async_wait(0)
        else:
            for i in range(lane, A_N, 32):
                sA[i] = a[i]
            for i in range(lane, B_N, 32):
                sB[i] = b[i]
        cuda.syncthreads()
        zero = (float32(0.0), float32(0.0), float32(0.0), float32(0.0))
        if K == 16:
            # lanes 0-15 address rows 0-15 at k 0, lanes 16-31 the same rows at k 8
            fa = ldmatrix_x4(sA, (lane & 15) * K + (lane >> 4) * 8)
            fb = ldmatrix_x4_trans(sB, (lane & 15) * 8)  # k rows 0-15 (lanes 16-31 repeat)
            bb = (fb[0], fb[1])
            if BF16:
                out = mma_bf16_16816(fa, bb, zero)
            else:
                out = mma_f16_16816(fa, bb, zero)
            for v in range(4):
                regs[lane, v] = fa[v]
            regs[lane, 4], regs[lane, 5] = fb[0], fb[1]
        else:
            fa = ldmatrix_x4(sA, (lane & 15) * K)  # rows 0-15 (lanes 16-31 repeat)
            fb = ldmatrix_x4_trans(sB, (lane & 7) * 8)  # k rows 0-7
            out = mma_f16_1688((fa[0], fa[1]), (fb[0],), zero)
            regs[lane, 0], regs[lane, 1], regs[lane, 4] = fa[0], fa[1], fb[0]
        for e in range(4):
            r, c = c_row_col(lane, e)
            d[r * 8 + c] = out[e]

    return cuda.jit(tile_mma)


def run_tile_mma(kind, a_bits, b_bits):
    """Host helper: (D float32 [16, 8], regs uint32 [32, 6]) for 16-bit A, B bit patterns."""
    import numpy as np

    if not SIMULATED:  # bf16/f16 m16n8k16 and cp.async need sm_80; m16n8k8 runs from sm_75
        check_capability(cuda.get_current_device().compute_capability,
                         "float16" if kind == "f16_1688" else "bfloat16")
    K = K_OF[kind]
    a_bits = np.ascontiguousarray(a_bits, dtype=np.uint16).reshape(16 * K)
    b_bits = np.ascontiguousarray(b_bits, dtype=np.uint16).reshape(K * 8)
    d = cuda.to_device(np.full(16 * 8, np.nan, dtype=np.float32))
    regs = cuda.to_device(np.zeros((32, 6), dtype=np.uint32))
    tile_mma_kernel(kind)[1, 32](cuda.to_device(a_bits), cuda.to_device(b_bits), d, regs)
    return d.copy_to_host().reshape(16, 8), regs.copy_to_host()
