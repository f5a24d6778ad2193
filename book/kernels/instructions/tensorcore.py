"""Tensor cores from Numba: ``mma.sync``, ``ldmatrix`` and ``cp.async`` as intrinsics.

Numba has no tensor-core API, but a kernel can carry inline PTX (the mechanism of
:mod:`book.kernels.wide`: an ``@intrinsic`` whose code generator emits ``ir.InlineAsm``).
These are the warp-level instructions a tensor-core GEMM needs:

- ``mma_bf16_16816(a, b, c)`` / ``mma_f16_16816(a, b, c)``: ``mma.sync.aligned.m16n8k16``
  with float32 accumulators (sm_80+). ``a``: 4 x uint32 (8 halves of the 16 x 16 A tile),
  ``b``: 2 x uint32 (4 halves of the 16 x 8 B tile), ``c``: 4 x float32; returns the 4
  float32 of D = A B + C that this lane holds.
- ``mma_f16_1688(a, b, c)``: ``m16n8k8`` fp16 (a: 2 x uint32, b: 1 x uint32), sm_75+:
  the T4's instruction.
- ``ldmatrix_x4(arr, i)`` / ``ldmatrix_x4_trans(arr, i)``: four 8 x 8 matrices of 16-bit
  elements from shared memory; every lane passes the address of one 16-byte row (lanes
  8m..8m+7: rows 0..7 of matrix m) as a shared array and an element index, and gets one
  uint32 (two elements) of each matrix back.
- ``cp_async16(dst, i, src, j)``: 16 bytes global -> shared without passing through
  registers (``cp.async.cg``); ``cp_async_commit()`` closes a group, ``cp_async_wait(n)``
  (n a literal) waits until at most n groups are in flight. ``copy16_at(addr, src, j)``: the
  same 16 bytes through registers (``ld.global.v4`` + ``st.shared.v4``), for sm_75.
  ``cp_async16_zfill_at(addr, src, j, valid)`` / ``copy16_zfill_at``: the same copies,
  predicated: where ``valid`` is 0 nothing is read (the source index is clamped to 0) and the
  16 shared bytes are zeros (``cp.async``'s source size 0; on sm_75 a predicated load). An
  edge tile of a GEMM loads this way: rows past T and k past d contribute zeros, with no
  padded copy of the matrices.
- ``shared_address(arr, i)``: the 32-bit shared-window address of ``arr[i]``
  (``cvta.to.shared``), what ``ldmatrix`` and ``cp.async`` take. ``ldmatrix_x4_at(addr)``,
  ``ldmatrix_x4_trans_at(addr)`` and ``cp_async16_at(addr, src, j)`` take such an address
  (plus a byte offset) directly: a kernel computes its addresses once, outside its main loop,
  and adds constants (what the GEMM does; the array forms recompute them at every call).
- ``store_bf16x2(arr, i, lo, hi)`` / ``store_f16x2``: round two float32 to half and store
  them as one 4-byte word at ``arr[i]`` (uint16 bits for bfloat16, float16 for fp16).
- ``shfl_xor(value, mask)``: the value lane ``lane ^ mask`` holds (``shfl.sync.bfly`` over
  the full warp): a warp's sum in five steps. Numba's simulator has no warp shuffles; here
  it has one, built like the simulated ``mma``.

Half values travel packed two per uint32, the lower index in the low 16 bits.

What each instruction needs (``MIN_CC``) and the refusal of a GPU without it
(:func:`check_capability`, :func:`cannot_run`), with the target (:func:`target_cc`,
:func:`target_description`, :func:`runs_here`), come from :mod:`book.capability`, where the
Hopper kernels' check is too.

**Which lane holds what** (the PTX ISA's "Matrix Fragments for mma.m16n8k16"): with
``g = lane >> 2`` (groupID) and ``t = lane & 3`` (threadID_in_group), :func:`a_coords`,
:func:`b_coords` and :func:`c_coords` give the (row, column) of each element a lane holds.
They are the single definition the simulator versions below use, and what the chapter draws.

In Numba's CUDA simulator the same names are Python functions that give each lane the
same values: the lanes of a warp meet at a barrier, deposit their registers, and each
computes its share of the result from everyone's (slow, but exact, and a reader can see
the fragments). Shared arrays in the simulator cannot be declared with an alignment, so the
simulated ``cp_async16`` and ``ldmatrix`` check that every 16-byte access starts at an
element index that is a multiple of 8 instead.
"""

from __future__ import annotations

import numpy as np
from numba import config

from ...capability import (FAMILIES, check, refusal, runs_here, target_cc, target_description,
                          tensor_core)
from ...target import TARGET_CC_ENV

SIMULATED = bool(config.ENABLE_CUDASIM)

__all__ = [
    "SIMULATED", "a_coords", "b_coords", "c_coords", "a_coords_1688", "b_coords_1688",
    "ldmatrix_coords", "mma_bf16_16816", "mma_f16_16816", "mma_f16_1688", "ldmatrix_x4",
    "ldmatrix_x4_trans", "ldmatrix_x4_at", "ldmatrix_x4_trans_at", "cp_async16", "cp_async16_at",
    "copy16_at", "cp_async16_zfill_at", "copy16_zfill_at", "cp_async_commit", "cp_async_wait",
    "shared_address", "store_bf16x2", "store_f16x2", "shfl_xor", "MIN_CC", "check_capability",
    "cannot_run", "runs_here", "target_cc", "target_description", "TARGET_CC_ENV", "pack",
    "unpack",
]

# ---------------------------------------------------------------------------------------
# Fragment layouts: which (row, column) of each matrix lane ``lane`` holds, element ``e``
# (halves: e = 2 * register + (0 low, 1 high); accumulators: e = register).


def a_coords(lane: int, e: int) -> tuple[int, int]:
    """A of m16n8k16 (16 x 16, row-major): element e (0..7) of lane's 4 registers."""
    g, t = lane >> 2, lane & 3
    row = g + 8 * ((e >> 1) & 1)  # registers 1 and 3: rows 8..15
    col = 2 * t + (e & 1) + 8 * (e >> 2)  # registers 2 and 3: columns 8..15
    return row, col


def b_coords(lane: int, e: int) -> tuple[int, int]:
    """B of m16n8k16 (16 x 8, "col": each register holds two consecutive k of one n)."""
    g, t = lane >> 2, lane & 3
    return 2 * t + (e & 1) + 8 * (e >> 1), g


def c_coords(lane: int, e: int) -> tuple[int, int]:
    """C and D (16 x 8 float32): accumulator e (0..3) of a lane."""
    g, t = lane >> 2, lane & 3
    return g + 8 * (e >> 1), 2 * t + (e & 1)


def a_coords_1688(lane: int, e: int) -> tuple[int, int]:
    """A of m16n8k8 (16 x 8): element e (0..3) of lane's 2 registers."""
    g, t = lane >> 2, lane & 3
    return g + 8 * (e >> 1), 2 * t + (e & 1)


def b_coords_1688(lane: int, e: int) -> tuple[int, int]:
    """B of m16n8k8 (8 x 8): element e (0..1) of lane's register."""
    g, t = lane >> 2, lane & 3
    return 2 * t + e, g


def ldmatrix_coords(lane: int, e: int, trans: bool = False) -> tuple[int, int]:
    """(row, column) within its 8 x 8 matrix of the e-th half (0, 1) a lane receives in
    each register of ``ldmatrix`` (register m comes from matrix m; row r of matrix m is
    the 16 bytes whose address lane 8m + r passed). ``.trans`` hands out the transpose."""
    r, c = lane >> 2, 2 * (lane & 3) + e
    return (c, r) if trans else (r, c)


#: the compute capability each instruction needs (the families of :mod:`book.capability`)
MIN_CC = {i: FAMILIES[k].since for k in tensor_core() for i in FAMILIES[k].instructions}


def check_capability(cc, dtype: str = "bfloat16") -> None:
    """Refuse a GPU that lacks the instructions, saying what it can run instead.

    ``dtype``: "bfloat16" needs sm_80; "float16" runs from sm_75 (m16n8k8, no cp.async).
    ``cc`` None: the simulator, where every instruction is simulated. A ``cc`` that is not
    the one this process runs for (:func:`runs_here`) is spoken of as one asked about ("on
    sm_75 ... the course would refuse bfloat16 tensor-core kernels"), never as "this GPU".
    The check is :func:`book.capability.check`, the Hopper kernels' too."""
    check(cc, *tensor_core(dtype), dtype=dtype)


def cannot_run(dtype: str = "bfloat16", cc="target"):
    """Why the target cannot run ``dtype``'s tensor-core instructions (the message of
    :func:`check_capability`), or None when it can: for a cell that skips rather than
    raises. ``cc``: default :func:`target_cc`."""
    return refusal(cc, *tensor_core(dtype), dtype=dtype)


def pack(lo, hi) -> int:
    """Two 16-bit patterns -> one uint32 (lo in the low half)."""
    return (int(lo) & 0xFFFF) | ((int(hi) & 0xFFFF) << 16)


def unpack(word) -> tuple[int, int]:
    w = int(word)
    return w & 0xFFFF, (w >> 16) & 0xFFFF


if not SIMULATED:
    from llvmlite import ir
    from numba import types
    from numba.core.errors import TypingError
    from numba.cuda import cgutils
    from numba.cuda.extending import intrinsic

    _i32, _i64, _f32 = ir.IntType(32), ir.IntType(64), ir.FloatType()

    def _item_pointer(context, builder, arrty, ary, idx):
        array = context.make_array(arrty)(context, builder, value=ary)
        return cgutils.get_item_pointer(context, builder, arrty, array, [idx], wraparound=False)

    item_pointer = _item_pointer  # public: book.kernels.hopper and book.kernels.wide build on it

    def check_1d(arrty, what):
        """Refuse, at typing, an argument an intrinsic addresses that is not a 1-D array."""
        if not isinstance(arrty, types.Array) or arrty.ndim != 1:
            raise TypingError(f"{what}: expected a 1-D array, got {arrty}")

    def _check_array(arrty, what, itemsize=2):
        check_1d(arrty, what)
        if arrty.dtype.bitwidth != 8 * itemsize:
            raise TypingError(f"{what}: expected {itemsize}-byte elements, got {arrty.dtype}")

    def _u32_tuple(ty, n, what):
        if not (isinstance(ty, types.BaseTuple) and len(ty) == n
                and all(isinstance(t, types.Integer) and t.bitwidth == 32 for t in ty)):
            raise TypingError(f"{what}: expected a tuple of {n} uint32, got {ty}")

    def _f32_tuple(ty, n, what):
        if not (isinstance(ty, types.BaseTuple) and len(ty) == n
                and all(isinstance(t, types.Float) for t in ty)):
            raise TypingError(f"{what}: expected a tuple of {n} float32, got {ty}")

    def _shared_u32(builder, ptr):
        """Generic pointer into shared memory -> 32-bit shared-window address."""
        generic = builder.ptrtoint(ptr, _i64)
        fn = ir.FunctionType(_i32, [_i64])
        return builder.asm(fn, "{ .reg .u64 t; cvta.to.shared.u64 t, $1; cvt.u32.u64 $0, t; }",
                           "=r,l", [generic], False)

    def _make_mma(name, ptx, na, nb):
        @intrinsic
        def mma(typingctx, a, b, c):
            _u32_tuple(a, na, name)
            _u32_tuple(b, nb, name)
            _f32_tuple(c, 4, name)
            sig = types.UniTuple(types.float32, 4)(a, b, c)

            def codegen(context, builder, signature, args):
                ops = [builder.extract_value(args[0], k) for k in range(na)]
                ops += [builder.extract_value(args[1], k) for k in range(nb)]
                cty = signature.args[2]
                ops += [context.cast(builder, builder.extract_value(args[2], k), cty[k],
                                     types.float32) for k in range(4)]
                n = 4 + na + nb
                regs = lambda lo, hi: ",".join(f"${k}" for k in range(lo, hi))  # noqa: E731
                text = (f"{ptx} {{{regs(0, 4)}}}, {{{regs(4, 4 + na)}}}, "
                        f"{{{regs(4 + na, 4 + na + nb)}}}, {{{regs(4 + na + nb, n + 4)}}};")
                cons = ",".join(["=f"] * 4 + ["r"] * (na + nb) + ["f"] * 4)
                fn = ir.FunctionType(ir.LiteralStructType([_f32] * 4), [_i32] * (na + nb) + [_f32] * 4)
                res = builder.asm(fn, text, cons, ops, False)
                vals = [builder.extract_value(res, k) for k in range(4)]
                return context.make_tuple(builder, signature.return_type, vals)

            return sig, codegen

        return mma

    mma_bf16_16816 = _make_mma("mma_bf16_16816",
                               "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", 4, 2)
    mma_f16_16816 = _make_mma("mma_f16_16816",
                              "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", 4, 2)
    mma_f16_1688 = _make_mma("mma_f16_1688",
                             "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32", 2, 1)

    @intrinsic
    def shared_address(typingctx, arr, idx):
        if not isinstance(arr, types.Array) or arr.ndim != 1:
            raise TypingError(f"shared_address: expected a 1-D shared array, got {arr}")
        sig = types.uint32(arr, idx)

        def codegen(context, builder, signature, args):
            return _shared_u32(builder, _item_pointer(context, builder, signature.args[0], *args))

        return sig, codegen

    def _need_shared_address(addr, what):
        """The intrinsics that take a precomputed shared address take it as a 32-bit integer."""
        if not isinstance(addr, types.Integer):
            raise TypingError(f"{what}: expected a 32-bit shared address, got {addr}")

    # 16 bytes from global memory ($1, a generic 64-bit pointer) to shared memory ($0, a 32-bit
    # shared address): asynchronously (sm_80+), or through four registers (sm_75, synchronous)
    _CP_ASYNC16 = "{ .reg .u64 g; cvta.to.global.u64 g, $1; cp.async.cg.shared.global [$0], [g], 16; }"
    _COPY16_THROUGH_REGISTERS = ("{ .reg .u64 g; .reg .b32 v<4>; cvta.to.global.u64 g, $1; "
                                 "ld.global.v4.b32 {v0,v1,v2,v3}, [g]; "
                                 "st.shared.v4.b32 [$0], {v0,v1,v2,v3}; }")

    def _copy16(builder, text, saddr, gptr):
        """Emit a 16-byte copy (``text``, above). Side effect + memory clobber: it writes shared
        memory, so it stays between the barriers around it."""
        fn = ir.FunctionType(ir.VoidType(), [_i32, _i64])
        builder.asm(fn, text, "r,l,~{memory}", [saddr, gptr], True)

    # the predicated forms: $2 is 16 (copy) or 0 (nothing read, 16 zero bytes written)
    _CP_ASYNC16_ZFILL = ("{ .reg .u64 g; cvta.to.global.u64 g, $1; "
                         "cp.async.cg.shared.global [$0], [g], 16, $2; }")
    _COPY16_ZFILL_THROUGH_REGISTERS = (
        "{ .reg .u64 g; .reg .b32 v<4>; .reg .pred p; setp.ne.u32 p, $2, 0; "
        "mov.b32 v0, 0; mov.b32 v1, 0; mov.b32 v2, 0; mov.b32 v3, 0; "
        "cvta.to.global.u64 g, $1; @p ld.global.v4.b32 {v0,v1,v2,v3}, [g]; "
        "st.shared.v4.b32 [$0], {v0,v1,v2,v3}; }")

    def _make_copy16_zfill(text, what):
        @intrinsic
        def copy(typingctx, addr, src, si, valid):
            _need_shared_address(addr, what)
            _check_array(src, f"{what} (global source)")
            if not isinstance(valid, (types.Integer, types.Boolean)):
                raise TypingError(f"{what}: valid must be an integer or a boolean, got {valid}")
            sig = types.void(addr, src, si, valid)

            def codegen(context, builder, signature, args):
                aty, sty, ity, vty = signature.args
                saddr = context.cast(builder, args[0], aty, types.uint32)
                ok = context.cast(builder, args[3], vty, types.boolean)
                ok = builder.icmp_unsigned("!=", ok, ir.Constant(ok.type, 0))
                # an invalid piece reads nothing, but its address stays inside the array
                idx = builder.select(ok, args[2], ir.Constant(args[2].type, 0))
                gptr = builder.ptrtoint(_item_pointer(context, builder, sty, args[1], idx), _i64)
                size = builder.select(ok, _i32(16), _i32(0))
                fn = ir.FunctionType(ir.VoidType(), [_i32, _i64, _i32])
                builder.asm(fn, text, "r,l,r,~{memory}", [saddr, gptr, size], True)
                return context.get_dummy_value()

            return sig, codegen

        return copy

    def _ldmatrix_regs(context, builder, signature, text, addr):
        """The four 32-bit registers an ``ldmatrix .x4`` loads from the 32-bit shared address
        ``addr``. Side effect + memory clobber: it reads shared memory, so it must stay between
        the barriers (and after the cp.async wait) it was written between."""
        fn = ir.FunctionType(ir.LiteralStructType([_i32] * 4), [_i32])
        res = builder.asm(fn, text, "=r,=r,=r,=r,r,~{memory}", [addr], True)
        vals = [builder.extract_value(res, k) for k in range(4)]
        return context.make_tuple(builder, signature.return_type, vals)

    def _make_ldmatrix(trans):
        what = "ldmatrix_x4_trans" if trans else "ldmatrix_x4"
        text = ("ldmatrix.sync.aligned.m8n8.x4" + (".trans" if trans else "")
                + ".shared.b16 {$0,$1,$2,$3}, [$4];")

        @intrinsic
        def ldmatrix(typingctx, arr, idx):
            _check_array(arr, what)
            sig = types.UniTuple(types.uint32, 4)(arr, idx)

            def codegen(context, builder, signature, args):
                addr = _shared_u32(builder, _item_pointer(context, builder, signature.args[0], *args))
                return _ldmatrix_regs(context, builder, signature, text, addr)

            return sig, codegen

        return ldmatrix

    ldmatrix_x4 = _make_ldmatrix(False)
    ldmatrix_x4_trans = _make_ldmatrix(True)

    def _make_ldmatrix_at(trans):
        what = "ldmatrix_x4_trans_at" if trans else "ldmatrix_x4_at"
        text = ("ldmatrix.sync.aligned.m8n8.x4" + (".trans" if trans else "")
                + ".shared.b16 {$0,$1,$2,$3}, [$4];")

        @intrinsic
        def ldmatrix(typingctx, addr):
            _need_shared_address(addr, what)
            sig = types.UniTuple(types.uint32, 4)(addr)

            def codegen(context, builder, signature, args):
                a = context.cast(builder, args[0], signature.args[0], types.uint32)
                return _ldmatrix_regs(context, builder, signature, text, a)

            return sig, codegen

        return ldmatrix

    ldmatrix_x4_at = _make_ldmatrix_at(False)
    ldmatrix_x4_trans_at = _make_ldmatrix_at(True)

    @intrinsic
    def cp_async16_at(typingctx, addr, src, si):
        _need_shared_address(addr, "cp_async16_at")
        _check_array(src, "cp_async16_at (global source)")
        sig = types.void(addr, src, si)

        def codegen(context, builder, signature, args):
            aty, sty, _ = signature.args
            saddr = context.cast(builder, args[0], aty, types.uint32)
            gptr = builder.ptrtoint(_item_pointer(context, builder, sty, args[1], args[2]), _i64)
            _copy16(builder, _CP_ASYNC16, saddr, gptr)
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def cp_async16(typingctx, dst, di, src, si):
        _check_array(dst, "cp_async16 (shared destination)")
        _check_array(src, "cp_async16 (global source)")
        sig = types.void(dst, di, src, si)

        def codegen(context, builder, signature, args):
            dty, _, sty, _ = signature.args
            saddr = _shared_u32(builder, _item_pointer(context, builder, dty, args[0], args[1]))
            gptr = builder.ptrtoint(_item_pointer(context, builder, sty, args[2], args[3]), _i64)
            _copy16(builder, _CP_ASYNC16, saddr, gptr)
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def copy16_at(typingctx, addr, src, si):
        """16 bytes global -> registers -> shared at a 32-bit shared address: what sm_75
        (no cp.async) does instead; synchronous."""
        _need_shared_address(addr, "copy16_at")
        _check_array(src, "copy16_at (global source)")
        sig = types.void(addr, src, si)

        def codegen(context, builder, signature, args):
            aty, sty, _ = signature.args
            saddr = context.cast(builder, args[0], aty, types.uint32)
            gptr = builder.ptrtoint(_item_pointer(context, builder, sty, args[1], args[2]), _i64)
            _copy16(builder, _COPY16_THROUGH_REGISTERS, saddr, gptr)
            return context.get_dummy_value()

        return sig, codegen

    cp_async16_zfill_at = _make_copy16_zfill(_CP_ASYNC16_ZFILL, "cp_async16_zfill_at")
    copy16_zfill_at = _make_copy16_zfill(_COPY16_ZFILL_THROUGH_REGISTERS, "copy16_zfill_at")

    @intrinsic
    def cp_async_commit(typingctx):
        sig = types.void()

        def codegen(context, builder, signature, args):
            builder.asm(ir.FunctionType(ir.VoidType(), []), "cp.async.commit_group;",
                        "~{memory}", [], True)
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def cp_async_wait(typingctx, n):
        if not isinstance(n, types.IntegerLiteral):
            raise TypingError("cp_async_wait(n): n must be a literal integer (it is encoded "
                              "in the instruction)")
        groups = int(n.literal_value)
        sig = types.void(n)

        def codegen(context, builder, signature, args):
            builder.asm(ir.FunctionType(ir.VoidType(), []), f"cp.async.wait_group {groups};",
                        "~{memory}", [], True)
            return context.get_dummy_value()

        return sig, codegen

    def _make_store_pair(bf16):
        what = "store_bf16x2" if bf16 else "store_f16x2"

        @intrinsic
        def store(typingctx, arr, idx, lo, hi):
            _check_array(arr, what)
            if bf16 and arr.dtype not in (types.uint16, types.int16):
                raise TypingError(f"{what}: expected bfloat16 bits (uint16), got {arr.dtype}")
            if not bf16 and arr.dtype != types.float16:
                raise TypingError(f"{what}: expected float16, got {arr.dtype}")
            sig = types.void(arr, idx, lo, hi)

            def codegen(context, builder, signature, args):
                aty, _, lty, hty = signature.args
                ptr = _item_pointer(context, builder, aty, args[0], args[1])
                flo = context.cast(builder, args[2], lty, types.float32)
                fhi = context.cast(builder, args[3], hty, types.float32)
                if bf16:  # one instruction: round both to nearest even, pack (hi, lo)
                    word = builder.asm(ir.FunctionType(_i32, [_f32, _f32]),
                                       "cvt.rn.bf16x2.f32 $0, $1, $2;", "=r,f,f", [fhi, flo], False)
                else:
                    h = ir.HalfType()
                    vec = ir.Constant(ir.VectorType(h, 2), ir.Undefined)
                    vec = builder.insert_element(vec, builder.fptrunc(flo, h), _i32(0))
                    vec = builder.insert_element(vec, builder.fptrunc(fhi, h), _i32(1))
                    word = builder.bitcast(vec, _i32)
                builder.store(word, builder.bitcast(ptr, _i32.as_pointer()), align=4)
                return context.get_dummy_value()

            return sig, codegen

        return store

    store_bf16x2 = _make_store_pair(True)
    store_f16x2 = _make_store_pair(False)

    from numba import cuda as _cuda

    @_cuda.jit(device=True, inline="always")
    def shfl_xor(value, mask):
        return _cuda.shfl_xor_sync(0xFFFFFFFF, value, mask)

else:  # Numba's CUDA simulator: each lane is a Python thread; warps meet at a barrier.
    import threading

    from ...dtypes import bf16_bits, bf16_value
    from ...numba_compat import sim_thread

    _LOCK = threading.Lock()
    _TIMEOUT = 120.0  # seconds a lane waits for its warp (a diverged warp would hang)

    def _warp():
        """(barrier, two sets of slots, each lane's next set, lane) of the calling simulated
        thread's warp."""
        tid, mgr, block = sim_thread()
        with _LOCK:
            warps = mgr.__dict__.setdefault("_course_warps", {})
            nthreads = int(np.prod(block))
            if nthreads % 32:
                raise RuntimeError(
                    f"warp-level instructions (mma.sync, ldmatrix) need whole warps: this "
                    f"block has {nthreads} threads; launch a multiple of 32")
            w = tid // 32
            if w not in warps:
                warps[w] = (threading.Barrier(32), ([None] * 32, [None] * 32), [0] * 32)
        bar, slots, turn = warps[w]
        return bar, slots, turn, tid % 32

    def _exchange(value):
        """Every lane's ``value``, as a list indexed by lane (all 32 lanes must call).

        One barrier per exchange: successive exchanges alternate between two sets of slots,
        so a lane refills a set only two exchanges later, after a barrier that every lane
        reached once it had read that set."""
        bar, slots, turn, lane = _warp()
        mine = slots[turn[lane]]
        turn[lane] ^= 1
        mine[lane] = value
        bar.wait(_TIMEOUT)
        return lane, list(mine)

    def shfl_xor(value, mask):
        lane, every = _exchange(value)
        return every[lane ^ int(mask)]

    def _bf16(bits):
        return float(bf16_value(int(bits)))

    def _f16(bits):
        return float(np.uint16(bits).view(np.float16))

    def _gather(regs_by_lane, coords, shape, conv):
        m = np.zeros(shape)
        for lane, regs in enumerate(regs_by_lane):
            for e in range(2 * len(regs)):
                lo, hi = unpack(regs[e >> 1])
                m[coords(lane, e)] = conv(hi if e & 1 else lo)
        return m

    def _mma(a, b, c, conv, acoords, bcoords, k):
        lane, every = _exchange((tuple(a), tuple(b), tuple(c)))
        A = _gather([x[0] for x in every], acoords, (16, k), conv)
        B = _gather([x[1] for x in every], bcoords, (k, 8), conv)
        C = np.zeros((16, 8))
        for ln, x in enumerate(every):
            for e in range(4):
                C[c_coords(ln, e)] = x[2][e]
        D = (A @ B + C).astype(np.float32)  # exact products, one rounding at the end
        return tuple(D[c_coords(lane, e)] for e in range(4))

    def mma_bf16_16816(a, b, c):
        return _mma(a, b, c, _bf16, a_coords, b_coords, 16)

    def mma_f16_16816(a, b, c):
        return _mma(a, b, c, _f16, a_coords, b_coords, 16)

    def mma_f16_1688(a, b, c):
        return _mma(a, b, c, _f16, a_coords_1688, b_coords_1688, 8)

    def _check16(i, what):
        if int(i) % 8:
            raise ValueError(f"{what}: element {int(i)} of a 16-bit array is not 16-byte "
                             "aligned (the index must be a multiple of 8)")

    def _ldmatrix(arr, idx, trans):
        _check16(idx, "ldmatrix")
        lane, every = _exchange((arr, int(idx)))
        regs = []
        for m in range(4):
            halves = []
            for e in range(2):
                r, c = ldmatrix_coords(lane, e, trans)
                src, base = every[8 * m + r]
                halves.append(int(src[base + c]) & 0xFFFF)
            regs.append(np.uint32(pack(*halves)))
        return tuple(regs)

    def ldmatrix_x4(arr, idx):
        return _ldmatrix(arr, idx, False)

    def ldmatrix_x4_trans(arr, idx):
        return _ldmatrix(arr, idx, True)

    class SharedAddress:
        """The simulator's stand-in for a 32-bit shared address: (array, byte offset);
        adding an integer moves it by that many bytes, as on the GPU."""

        __slots__ = ("arr", "offset")

        def __init__(self, arr, offset):
            self.arr, self.offset = arr, int(offset)

        def __add__(self, other):
            return SharedAddress(self.arr, self.offset + int(other))

        __radd__ = __add__

        def element(self, what):
            size = self.arr.dtype.itemsize
            if self.offset % 16:
                raise ValueError(f"{what}: shared byte offset {self.offset} is not 16-byte "
                                 "aligned")
            return self.offset // size

    def shared_address(arr, idx):
        return SharedAddress(arr, int(idx) * arr.dtype.itemsize)

    def ldmatrix_x4_at(addr):
        return _ldmatrix(addr.arr, addr.element("ldmatrix"), False)

    def ldmatrix_x4_trans_at(addr):
        return _ldmatrix(addr.arr, addr.element("ldmatrix"), True)

    def cp_async16_at(addr, src, si):
        cp_async16(addr.arr, addr.element("cp_async16_at"), src, si)

    def copy16_at(addr, src, si):
        cp_async16(addr.arr, addr.element("copy16_at"), src, si)

    def cp_async16_zfill_at(addr, src, si, valid):
        if valid:
            cp_async16(addr.arr, addr.element("cp_async16_zfill_at"), src, si)
        else:
            e = addr.element("cp_async16_zfill_at")
            addr.arr[e:e + 8] = 0  # nothing read: the index may lie past the array

    def copy16_zfill_at(addr, src, si, valid):
        cp_async16_zfill_at(addr, src, si, valid)

    def cp_async16(dst, di, src, si):
        _check16(di, "cp_async16 (shared destination)")
        _check16(si, "cp_async16 (global source)")
        di, si = int(di), int(si)
        piece = np.asarray(src[si:si + 8])
        if piece.dtype != dst.dtype:  # bytes, not values (float16 data into uint16 shared)
            piece = piece.view(dst.dtype)
        dst[di:di + 8] = piece  # done at once: commit and wait have nothing to do

    def cp_async_commit():
        pass

    def cp_async_wait(n):
        pass

    def store_bf16x2(arr, idx, lo, hi):
        _check_pair(idx)
        arr[int(idx)] = bf16_bits(lo)
        arr[int(idx) + 1] = bf16_bits(hi)

    def store_f16x2(arr, idx, lo, hi):
        _check_pair(idx)
        arr[int(idx)] = np.float16(lo)
        arr[int(idx) + 1] = np.float16(hi)

    def _check_pair(idx):
        if int(idx) % 2:
            raise ValueError(f"a 4-byte store of two halves needs an even element index, "
                             f"got {int(idx)}")
