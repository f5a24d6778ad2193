"""One warp, one tensor-core instruction: kernels that show who holds what.

``tile_mma_kernel(kind)`` is a one-warp kernel ``k(a, b, d, regs)``: it stages A (16 x K)
and B (K x 8, both row-major 16-bit bit patterns: bfloat16 or float16 viewed as uint16) in
shared memory, loads the fragments with ``ldmatrix`` (B with ``.trans``: it is stored row-major,
n contiguous, "N-major" in PTX's words, and the instruction wants each lane's two consecutive k
of one column), runs one ``mma.sync`` from zero
accumulators, and writes D (16 x 8 float32, row-major) and every lane's registers
(``regs[lane, 0:4]`` A, ``regs[lane, 4:6]`` B) so a reader can compare them with the PTX ISA's
tables (:func:`book.kernels.tensorcore.a_coords` and friends).

``kind``: ``"bf16_16816"`` and ``"f16_16816"`` (sm_80+: the tiles arrive by ``cp.async``),
``"f16_1688"`` (sm_75, the T4: ``mma.m16n8k8``, tiles copied by plain loads, no ``cp.async``).
"""

from __future__ import annotations

import functools

from numba import cuda, float32, uint16

from ..instructions import tensorcore
from ..instructions.tensorcore import (
    SIMULATED, check_capability, cp_async16, cp_async_commit, cp_async_wait, ldmatrix_x4,
    ldmatrix_x4_trans, mma_bf16_16816, mma_f16_1688, mma_f16_16816, target_cc,
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
    # the store of D follows the accumulator table (read at build time: an experiment that
    # changes tensorcore.c_coords rebuilds this kernel, see book.table_experiment)
    c_row_col = cuda.jit(device=True, inline="always")(tensorcore.c_coords)

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

    # bf16/f16 m16n8k16 and cp.async need sm_80; m16n8k8 runs from sm_75 (the target: the
    # GPU, or what COURSE_TARGET_CC names; the simulator runs them all)
    check_capability(target_cc(), "float16" if kind == "f16_1688" else "bfloat16")
    K = K_OF[kind]
    a_bits = np.ascontiguousarray(a_bits, dtype=np.uint16).reshape(16 * K)
    b_bits = np.ascontiguousarray(b_bits, dtype=np.uint16).reshape(K * 8)
    d = cuda.to_device(np.full(16 * 8, np.nan, dtype=np.float32))
    regs = cuda.to_device(np.zeros((32, 6), dtype=np.uint32))
    tile_mma_kernel(kind)[1, 32](cuda.to_device(a_bits), cuda.to_device(b_bits), d, regs)
    return d.copy_to_host().reshape(16, 8), regs.copy_to_host()


# ---------------------------------------------------------------------------------------
# Probing a student's one-tile mma: which element ended up where, drawn by lane.

def _owners(coords, n_elem, shape):
    """{(row, column): (lane, e)} of a fragment table (a_coords, b_coords)."""
    table = {}
    for lane in range(32):
        for e in range(n_elem):
            table[coords(lane, e)] = (lane, e)
    assert len(table) == shape[0] * shape[1]
    return table


def _run_probe(fn, a, w):
    import numpy as np

    out = cuda.to_device(np.full((16, 8), np.nan, dtype=np.float32))
    fn(cuda.to_device(a.astype(np.float16)), cuda.to_device(w.astype(np.float16)), out)
    cuda.synchronize()
    return out.copy_to_host().astype(np.float64)


def _decode(v, rows, cols, name):
    """The element of a probe matrix whose code (1 + cols * row + column) is v, in words."""
    import math

    if math.isnan(v):
        return "nothing (the output there was never written)"
    if v == round(v) and 1 <= v <= rows * cols:
        r, c = divmod(int(v) - 1, cols)
        return f"{name}[{r}, {c}]"
    return f"{v:g}, not one element of {name} (a sum of several, or of none)"


def _grid(title, owners, rows, cols, bad, row_name, col_name):
    lines = [title, f"{row_name:>6}\\{col_name:<2}" + "".join(f"{c:>3} " for c in range(cols))]
    for r in range(rows):
        cells = "".join(f"{owners[(r, c)][0]:>3}" + ("*" if (r, c) in bad else " ")
                        for c in range(cols))
        lines.append(f"{r:>8} " + cells)
    return lines


def probe_tile(fn, limit: int = 4) -> str:
    """Where a one-warp ``fn(a, w, out)`` (out [16, 8] float32 = a [16, 16] @ w.T, w [8, 16],
    float16: one m16n8k16 tile, nn.Linear's [n, k] weight) takes each element of A and B
    from, drawn as the PTX ISA's fragment tables (the lane that must hold each element), with
    a ``*`` where the kernel's element is not that one; "" when every element is right.

    Three launches on inputs whose elements are distinct small integers (exact in float16):
    A = codes with w selecting k = n (then k = n + 8) gives out[r, n] = the A element the
    kernel used at (r, k); A = identity with B = codes gives out[k, n] = the B element it used
    at (k, n). Both are read through the kernel's own store of D: a wrong accumulator index
    (c_coords) shows in both drawings at once."""
    import numpy as np

    from ..instructions.tensorcore import a_coords, b_coords

    code_a = 1 + 16 * np.arange(16)[:, None] + np.arange(16)[None, :]      # A[r, k]
    code_b = 1 + 8 * np.arange(16)[:, None] + np.arange(8)[None, :]        # B[k, n] = w[n, k]
    used_a = np.zeros((16, 16))
    for half in range(2):
        sel = np.zeros((8, 16))
        sel[np.arange(8), np.arange(8) + 8 * half] = 1.0
        used_a[:, 8 * half:8 * half + 8] = _run_probe(fn, code_a, sel)
    used_b = _run_probe(fn, np.eye(16), code_b.T)
    bad_a = {(r, k) for r in range(16) for k in range(16) if used_a[r, k] != code_a[r, k]}
    bad_b = {(k, n) for k in range(16) for n in range(8) if used_b[k, n] != code_b[k, n]}
    if not bad_a and not bad_b:
        return ""
    own_a, own_b = _owners(a_coords, 8, (16, 16)), _owners(b_coords, 4, (16, 8))
    lines = ["Which lane holds what (the PTX ISA's m16n8k16 tables; * = your kernel used "
             "another element there):"]
    out = []
    for name, used, code, own, bad, rows, cols, rn, cn in (
            ("A", used_a, code_a, own_a, bad_a, 16, 16, "row", "k"),
            ("B", used_b, code_b, own_b, bad_b, 16, 8, "k", "n")):
        if not bad:
            lines.append(f"{name}: every element right")
            continue
        lines += _grid(f"{name} ({rows} x {cols}), {len(bad)} of {rows * cols} elements wrong:",
                       own, rows, cols, bad, rn, cn)
        for (r, c) in sorted(bad)[:limit]:
            lane, e = own[(r, c)]
            got = _decode(used[r, c], rows, cols, name)
            out.append(f"{name}[{r}, {c}] belongs in lane {lane}, register {e >> 1} "
                       f"({'high' if e & 1 else 'low'} half); your kernel used {got} there")
    if bad_a and bad_b and len(bad_a) + len(bad_b) > 100:
        out.append("both A and B are mostly wrong: check the store of D (the accumulator "
                   "table, c_coords) first; both drawings are read through it")
    return "\n".join(lines + out)
