"""Wide memory access for Numba CUDA kernels: 8- and 16-byte loads and stores (and the
few single loads and stores spelled out as the GPU's own instructions).

Numba turns ``x = a[i]`` on a float32 array into a 4-byte ``ld.global.f32``. The
hardware can move 16 bytes per thread in one instruction (``ld.global.v4.f32``),
which means a quarter as many memory instructions in flight for the same bytes.
Numba has no vector type for arrays, so these helpers are small *intrinsics*: a
few lines of LLVM IR that load ``n`` consecutive elements through one vector
pointer and hand them back as a tuple.

- ``load2/load4(a, i)`` -> tuple of ``a[i], ..., a[i+n-1]`` (one access of
  ``n * itemsize`` bytes; 8 or 16 bytes).
- ``store2/store4(a, i, values)`` writes the tuple back in one access
  (values are cast to the array's dtype: float32 -> float16 rounds to nearest).
- ``load_half4/load_half8(a, i)`` -> 4 or 8 float32 from a 2-byte array
  (float16, or bfloat16 stored as uint16 bits) in one 8- or 16-byte access; the
  pairs are loaded as 32-bit words and widened in registers (LLVM would otherwise
  split an 8 x half vector into two 8-byte loads).
- ``store_half4/store_half8(a, i, values)`` round float32 values to the array's
  half type (round to nearest even) and store them in one access.
- ``load_words4(a, i)`` -> the 8 halves ``a[i:i+8]`` as they are, 4 x uint32 (two halves
  per word, the lower index in the low 16 bits) in one 16-byte access: what a tensor-core
  fragment register holds, with no conversion (book.kernels.decode_mlp);
  ``store_words4(a, i, words)`` puts such 4 words back as the 8 halves ``a[i:i+8]`` in one
  16-byte access (book.kernels.staged_gemv: a stage in shared memory);
  ``unpack_half8(a, words)``: those 4 words widened to 8 float32 later, read as ``a``'s half
  type (a GEMV that loads a piece ahead keeps it in 4 registers, not 8).
- ``load8_f32(a, i)`` / ``store8_f32(a, i, values)``: 8 consecutive elements as float32
  whatever the array's type (float32, float16, or bfloat16 bits), in 16-byte accesses (one
  for the halves, two for float32): one kernel body streams all three dtypes at full width
  (book.kernels.norm_quant). ``store_bytes8(a, i, lo, hi)``: two uint32 words as the 8
  bytes ``a[i:i+8]`` of a uint8 array (``lo``'s bytes first), in one 8-byte access: packed
  one-byte codes (e4m3) stored 8 at a time.
- ``load_f32(a, i)`` / ``store_f32(a, i, x)``: one element as float32 whatever the
  array's type (float32, float16, or bfloat16 bits in uint16), so one kernel body
  serves all three dtypes.
- ``bf16_to_f32(bits)`` / ``f32_to_bf16(x)`` convert one bfloat16 (uint16 bits).
  bfloat16 is the top 16 bits of a float32, so widening is a shift; narrowing
  rounds to nearest even on the dropped 16 bits (NaN stays NaN).

Two kinds of single access the kernels spell out, as the GPU's own instructions:

- ``load_f32_cg(a, i)``: ``a[i]`` (float32) read from L2, never from this SM's L1
  (``ld.global.cg``): what one block reads of partials another block wrote
  (book.kernels.splitk; L1 is not coherent between SMs).
- ``st_shared_f32(addr, x)``, ``ld_shared_f32(addr)``, ``ld_shared_f32x2(addr)``: float32 at
  a 32-bit shared address (``tensorcore.shared_address``), the last two of them in one 8-byte
  access (8-byte aligned): the FP8 GEMM's scales staged in shared memory
  (book.kernels.fp8_gemm). In the simulator the address is ``tensorcore``'s stand-in, an
  (array, byte offset) pair, and these read and write its bytes.

The caller guarantees alignment: ``i * itemsize`` must be a multiple of the
access width and the array's base address too (host wrappers check that).
In Numba's CUDA simulator the same names are plain Python functions with the
same results, so kernels that use them still run (slowly) on a CPU.
"""

import numpy as np
from numba import config

SIMULATED = bool(config.ENABLE_CUDASIM)


if not SIMULATED:
    from llvmlite import ir
    from numba import types
    from numba.cuda import cgutils
    from numba.cuda.extending import intrinsic
    from numba.core.errors import TypingError

    # an element's address with no wraparound and no bounds check (the kernel owns its index
    # arithmetic), and the 1-D test: the tensor-core intrinsics' own
    from .tensorcore import check_1d, item_pointer as _element_pointer

    def _check(arrty, n, what):
        check_1d(arrty, what)
        width = n * arrty.dtype.bitwidth // 8
        if width not in (8, 16):
            raise TypingError(
                f"{what}: {n} x {arrty.dtype} is {width} bytes; "
                "a vector access must be 8 or 16 bytes"
            )
        return width

    def _make_load(n):  # n elements of the array's own dtype
        @intrinsic
        def load(typingctx, arr, idx):
            width = _check(arr, n, f"load{n}")
            sig = types.UniTuple(arr.dtype, n)(arr, idx)

            def codegen(context, builder, signature, args):
                arrty = signature.args[0]
                ptr = _element_pointer(context, builder, arrty, args[0], args[1])
                elem = context.get_value_type(arrty.dtype)
                vptr = builder.bitcast(ptr, ir.VectorType(elem, n).as_pointer())
                vec = builder.load(vptr, align=width)
                vals = [builder.extract_element(vec, ir.IntType(32)(k)) for k in range(n)]
                return context.make_tuple(builder, signature.return_type, vals)

            return sig, codegen

        return load

    def _make_store(n):
        @intrinsic
        def store(typingctx, arr, idx, values):
            width = _check(arr, n, f"store{n}")
            _check_values(values, n, f"store{n}")
            sig = types.void(arr, idx, values)

            def codegen(context, builder, signature, args):
                arrty, _, valty = signature.args
                ptr = _element_pointer(context, builder, arrty, args[0], args[1])
                elem = context.get_value_type(arrty.dtype)
                vec = ir.Constant(ir.VectorType(elem, n), ir.Undefined)
                for k in range(n):
                    v = builder.extract_value(args[2], k)
                    v = context.cast(builder, v, valty[k], arrty.dtype)
                    vec = builder.insert_element(vec, v, ir.IntType(32)(k))
                vptr = builder.bitcast(ptr, ir.VectorType(elem, n).as_pointer())
                builder.store(vec, vptr, align=width)
                return context.get_dummy_value()

            return sig, codegen

        return store

    i16, i32 = ir.IntType(16), ir.IntType(32)

    def _half_to_f32(builder, h16, is_bf16):
        """16 bits of a float16 or bfloat16 -> LLVM float."""
        if is_bf16:
            return builder.bitcast(builder.shl(builder.zext(h16, i32), i32(16)), ir.FloatType())
        return builder.fpext(builder.bitcast(h16, ir.HalfType()), ir.FloatType())

    def _f32_to_half(builder, f, is_bf16):
        """LLVM float -> 16 bits of float16 or bfloat16, round to nearest even."""
        if not is_bf16:
            return builder.bitcast(builder.fptrunc(f, ir.HalfType()), i16)
        bits = builder.bitcast(f, i32)
        lsb = builder.and_(builder.lshr(bits, i32(16)), i32(1))
        rounded = builder.lshr(builder.add(bits, builder.add(lsb, i32(0x7FFF))), i32(16))
        isnan = builder.fcmp_unordered("uno", f, f)
        return builder.trunc(builder.select(isnan, i32(0x7FC0), rounded), i16)

    def _word_to_f32s(builder, word, is_bf16):
        """A 32-bit word of two halves -> [LLVM float of the lower, of the upper] (little-endian:
        the lower index in the low 16 bits)."""
        lo = builder.trunc(word, i16)
        hi = builder.trunc(builder.lshr(word, i32(16)), i16)
        return [_half_to_f32(builder, lo, is_bf16), _half_to_f32(builder, hi, is_bf16)]

    def _half_kind(arrty, what):
        dt = arrty.dtype if isinstance(arrty, types.Array) else arrty
        if dt == types.float16:
            return False
        if dt in (types.uint16, types.int16):
            return True  # bfloat16 travels as its raw 16 bits
        raise TypingError(f"{what}: expected float16 or bfloat16 bits (uint16), got {dt}")

    def _load_half_codegen(n, width, is_bf16):
        """The codegen of n halves read as float32 in one ``width``-byte access (load_half4,
        load_half8, and load8_f32 on a half array)."""
        words = n // 2

        def codegen(context, builder, signature, args):
            ptr = _element_pointer(context, builder, signature.args[0], args[0], args[1])
            vptr = builder.bitcast(ptr, ir.VectorType(i32, words).as_pointer())
            vec = builder.load(vptr, align=width)
            vals = []
            for w in range(words):
                vals += _word_to_f32s(builder, builder.extract_element(vec, i32(w)), is_bf16)
            return context.make_tuple(builder, signature.return_type, vals)

        return codegen

    def _make_load_half(n):
        @intrinsic
        def load(typingctx, arr, idx):
            width = _check(arr, n, f"load_half{n}")
            is_bf16 = _half_kind(arr, f"load_half{n}")
            sig = types.UniTuple(types.float32, n)(arr, idx)
            return sig, _load_half_codegen(n, width, is_bf16)

        return load

    def _store_half_codegen(n, width, is_bf16):
        """The codegen of n values rounded to halves and stored in one ``width``-byte access
        (store_half4, store_half8, and store8_f32 on a half array)."""
        words = n // 2

        def codegen(context, builder, signature, args):
            valty = signature.args[2]
            ptr = _element_pointer(context, builder, signature.args[0], args[0], args[1])
            halves = []
            for k in range(n):
                v = context.cast(builder, builder.extract_value(args[2], k), valty[k], types.float32)
                halves.append(builder.zext(_f32_to_half(builder, v, is_bf16), i32))
            vec = ir.Constant(ir.VectorType(i32, words), ir.Undefined)
            for w in range(words):
                word = builder.or_(halves[2 * w], builder.shl(halves[2 * w + 1], i32(16)))
                vec = builder.insert_element(vec, word, i32(w))
            vptr = builder.bitcast(ptr, ir.VectorType(i32, words).as_pointer())
            builder.store(vec, vptr, align=width)
            return context.get_dummy_value()

        return codegen

    def _check_values(values, n, what):
        if not isinstance(values, types.BaseTuple) or len(values) != n:
            raise TypingError(f"{what}: expected a tuple of {n} values, got {values}")

    def _make_store_half(n):
        @intrinsic
        def store(typingctx, arr, idx, values):
            width = _check(arr, n, f"store_half{n}")
            is_bf16 = _half_kind(arr, f"store_half{n}")
            _check_values(values, n, f"store_half{n}")
            return types.void(arr, idx, values), _store_half_codegen(n, width, is_bf16)

        return store

    @intrinsic
    def bf16_to_f32(typingctx, bits):
        if not isinstance(bits, types.Integer) or bits.bitwidth != 16:
            raise TypingError(f"bf16_to_f32 expects 16-bit integer bits, got {bits}")
        sig = types.float32(bits)

        def codegen(context, builder, signature, args):
            return _half_to_f32(builder, args[0], True)

        return sig, codegen

    @intrinsic
    def f32_to_bf16(typingctx, x):
        if not isinstance(x, types.Float):
            raise TypingError(f"f32_to_bf16 expects a float, got {x}")
        sig = types.uint16(x)

        def codegen(context, builder, signature, args):
            f = context.cast(builder, args[0], signature.args[0], types.float32)
            return _f32_to_half(builder, f, True)

        return sig, codegen

    @intrinsic
    def load_f32(typingctx, arr, idx):
        if not isinstance(arr, types.Array) or arr.ndim != 1:
            raise TypingError(f"load_f32: expected a 1-D array, got {arr}")
        if arr.dtype != types.float32:
            _half_kind(arr, "load_f32")
        sig = types.float32(arr, idx)

        def codegen(context, builder, signature, args):
            arrty = signature.args[0]
            ptr = _element_pointer(context, builder, arrty, args[0], args[1])
            v = builder.load(ptr)
            if arrty.dtype == types.float32:
                return v
            return _half_to_f32(builder, builder.bitcast(v, i16), arrty.dtype != types.float16)

        return sig, codegen

    @intrinsic
    def store_f32(typingctx, arr, idx, x):
        if not isinstance(arr, types.Array) or arr.ndim != 1:
            raise TypingError(f"store_f32: expected a 1-D array, got {arr}")
        if arr.dtype != types.float32:
            _half_kind(arr, "store_f32")
        sig = types.void(arr, idx, x)

        def codegen(context, builder, signature, args):
            arrty, _, xty = signature.args
            ptr = _element_pointer(context, builder, arrty, args[0], args[1])
            f = context.cast(builder, args[2], xty, types.float32)
            if arrty.dtype == types.float32:
                builder.store(f, ptr)
            else:
                h = _f32_to_half(builder, f, arrty.dtype != types.float16)
                builder.store(builder.bitcast(h, ptr.type.pointee), ptr)
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def load_words4(typingctx, arr, idx):
        _check(arr, 8, "load_words4")
        _half_kind(arr, "load_words4")
        sig = types.UniTuple(types.uint32, 4)(arr, idx)

        def codegen(context, builder, signature, args):
            ptr = _element_pointer(context, builder, signature.args[0], args[0], args[1])
            vec = builder.load(builder.bitcast(ptr, ir.VectorType(i32, 4).as_pointer()), align=16)
            vals = [builder.extract_element(vec, i32(w)) for w in range(4)]
            return context.make_tuple(builder, signature.return_type, vals)

        return sig, codegen

    @intrinsic
    def store_words4(typingctx, arr, idx, words):
        _check(arr, 8, "store_words4")
        _half_kind(arr, "store_words4")
        if not isinstance(words, types.BaseTuple) or len(words) != 4:
            raise TypingError(f"store_words4: expected a tuple of 4 uint32 words, got {words}")
        sig = types.void(arr, idx, words)

        def codegen(context, builder, signature, args):
            arrty, _, wty = signature.args
            ptr = _element_pointer(context, builder, arrty, args[0], args[1])
            vec = ir.Constant(ir.VectorType(i32, 4), ir.Undefined)
            for w in range(4):
                v = context.cast(builder, builder.extract_value(args[2], w), wty[w], types.uint32)
                vec = builder.insert_element(vec, v, i32(w))
            builder.store(vec, builder.bitcast(ptr, ir.VectorType(i32, 4).as_pointer()), align=16)
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def unpack_half8(typingctx, like, words):
        is_bf16 = _half_kind(like, "unpack_half8")
        if not isinstance(words, types.BaseTuple) or len(words) != 4:
            raise TypingError(f"unpack_half8: expected a tuple of 4 uint32 words, got {words}")
        sig = types.UniTuple(types.float32, 8)(like, words)

        def codegen(context, builder, signature, args):
            wty = signature.args[1]
            vals = []
            for w in range(4):
                word = context.cast(builder, builder.extract_value(args[1], w), wty[w], types.uint32)
                vals += _word_to_f32s(builder, word, is_bf16)
            return context.make_tuple(builder, signature.return_type, vals)

        return sig, codegen

    def _check_any8(arr, what):
        """float32 or a half type (False, or is_bf16) of a 1-D array, for the 8-wide helpers."""
        check_1d(arr, what)
        return False if arr.dtype == types.float32 else (_half_kind(arr, what),)

    @intrinsic
    def load8_f32(typingctx, arr, idx):
        half = _check_any8(arr, "load8_f32")
        sig = types.UniTuple(types.float32, 8)(arr, idx)
        if half:  # halves: load_half8's one 16-byte load of 4 words, widened in registers
            return sig, _load_half_codegen(8, 16, half[0])

        def codegen(context, builder, signature, args):  # float32: two 16-byte loads
            ptr = _element_pointer(context, builder, signature.args[0], args[0], args[1])
            vals = []
            vptr = builder.bitcast(ptr, ir.VectorType(ir.FloatType(), 4).as_pointer())
            for h in range(2):
                vec = builder.load(builder.gep(vptr, [i32(h)]), align=16)
                vals += [builder.extract_element(vec, i32(k)) for k in range(4)]
            return context.make_tuple(builder, signature.return_type, vals)

        return sig, codegen

    @intrinsic
    def store8_f32(typingctx, arr, idx, values):
        half = _check_any8(arr, "store8_f32")
        _check_values(values, 8, "store8_f32")
        sig = types.void(arr, idx, values)
        if half:  # halves: store_half8's one 16-byte store
            return sig, _store_half_codegen(8, 16, half[0])

        def codegen(context, builder, signature, args):  # float32: two 16-byte stores
            valty = signature.args[2]
            ptr = _element_pointer(context, builder, signature.args[0], args[0], args[1])
            fs = [context.cast(builder, builder.extract_value(args[2], k), valty[k], types.float32)
                  for k in range(8)]
            vptr = builder.bitcast(ptr, ir.VectorType(ir.FloatType(), 4).as_pointer())
            for h in range(2):
                vec = ir.Constant(ir.VectorType(ir.FloatType(), 4), ir.Undefined)
                for k in range(4):
                    vec = builder.insert_element(vec, fs[4 * h + k], i32(k))
                builder.store(vec, builder.gep(vptr, [i32(h)]), align=16)
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def store_bytes8(typingctx, arr, idx, lo, hi):
        check_1d(arr, "store_bytes8")
        if arr.dtype != types.uint8:
            raise TypingError(f"store_bytes8: expected a uint8 array, got {arr.dtype}")
        sig = types.void(arr, idx, lo, hi)

        def codegen(context, builder, signature, args):
            ptr = _element_pointer(context, builder, signature.args[0], args[0], args[1])
            vec = ir.Constant(ir.VectorType(i32, 2), ir.Undefined)
            for k in range(2):
                v = context.cast(builder, args[2 + k], signature.args[2 + k], types.uint32)
                vec = builder.insert_element(vec, v, i32(k))
            builder.store(vec, builder.bitcast(ptr, ir.VectorType(i32, 2).as_pointer()), align=8)
            return context.get_dummy_value()

        return sig, codegen

    load2, load4 = _make_load(2), _make_load(4)
    store2, store4 = _make_store(2), _make_store(4)
    load_half4, load_half8 = _make_load_half(4), _make_load_half(8)
    store_half4, store_half8 = _make_store_half(4), _make_store_half(8)

    @intrinsic
    def load_f32_cg(typingctx, arr, idx):
        """``arr[idx]`` (float32) read from L2, never from this SM's L1 (``ld.global.cg``)."""
        if not isinstance(arr, types.Array) or arr.dtype != types.float32:
            raise TypingError(f"load_f32_cg: expected a float32 array, got {arr}")
        sig = types.float32(arr, idx)

        def codegen(context, builder, signature, args):
            arrty = signature.args[0]
            array = context.make_array(arrty)(context, builder, value=args[0])
            ptr = cgutils.get_item_pointer(context, builder, arrty, array, [args[1]],
                                           wraparound=False)
            gen = builder.ptrtoint(ptr, ir.IntType(64))
            fn = ir.FunctionType(ir.FloatType(), [ir.IntType(64)])
            return builder.asm(fn, "{ .reg .u64 g; cvta.to.global.u64 g, $1; "
                                   "ld.global.cg.f32 $0, [g]; }", "=f,l,~{memory}", [gen], True)

        return sig, codegen

    @intrinsic
    def st_shared_f32(typingctx, addr, v):
        """Store a float32 at a 32-bit shared address."""
        def codegen(context, builder, signature, args):
            a = context.cast(builder, args[0], signature.args[0], types.uint32)
            f = context.cast(builder, args[1], signature.args[1], types.float32)
            fn = ir.FunctionType(ir.VoidType(), [ir.IntType(32), ir.FloatType()])
            builder.asm(fn, "st.shared.f32 [$0], $1;", "r,f,~{memory}", [a, f], True)
            return context.get_dummy_value()

        return types.void(addr, v), codegen

    @intrinsic
    def ld_shared_f32(typingctx, addr):
        """A float32 from a 32-bit shared address."""
        def codegen(context, builder, signature, args):
            a = context.cast(builder, args[0], signature.args[0], types.uint32)
            fn = ir.FunctionType(ir.FloatType(), [ir.IntType(32)])
            return builder.asm(fn, "ld.shared.f32 $0, [$1];", "=f,r,~{memory}", [a], True)

        return types.float32(addr), codegen

    @intrinsic
    def ld_shared_f32x2(typingctx, addr):
        """Two float32 from a 32-bit shared address (8-byte aligned), one load."""
        ret = types.UniTuple(types.float32, 2)

        def codegen(context, builder, signature, args):
            a = context.cast(builder, args[0], signature.args[0], types.uint32)
            f = ir.FloatType()
            st = ir.LiteralStructType([f, f])
            fn = ir.FunctionType(st, [ir.IntType(32)])
            res = builder.asm(fn, "ld.shared.v2.f32 {$0, $1}, [$2];", "=f,=f,r,~{memory}", [a],
                              True)
            return context.make_tuple(builder, signature.return_type,
                                      [builder.extract_value(res, 0),
                                       builder.extract_value(res, 1)])

        return ret(addr), codegen

else:  # Numba's CUDA simulator runs kernels as Python: same results, no vectors.

    def _load(a, i, n):
        return tuple(a[i + k] for k in range(n))

    def _store(a, i, values, n):
        for k in range(n):
            a[i + k] = values[k]

    def load2(a, i):
        return _load(a, i, 2)

    def load4(a, i):
        return _load(a, i, 4)

    def store2(a, i, v):
        _store(a, i, v, 2)

    def store4(a, i, v):
        _store(a, i, v, 4)

    from ...dtypes import bf16_bits as f32_to_bf16, bf16_value as bf16_to_f32

    def _to_f32(a, v):
        if a.dtype == np.float16:
            return np.float32(v)
        return bf16_to_f32(v)

    def _from_f32(a, x):
        if a.dtype == np.float16:
            return np.float16(x)
        return f32_to_bf16(x)

    def load_f32(a, i):
        if a.dtype == np.float32:
            return np.float32(a[i])
        return _to_f32(a, a[i])

    def store_f32(a, i, x):
        a[i] = np.float32(x) if a.dtype == np.float32 else _from_f32(a, x)

    def load8_f32(a, i):
        return tuple(load_f32(a, i + k) for k in range(8))

    def store8_f32(a, i, values):
        for k in range(8):
            store_f32(a, i + k, values[k])

    def store_bytes8(a, i, lo, hi):
        a[i:i + 8] = np.array([int(lo), int(hi)], dtype="<u4").view(np.uint8)

    def _bits16(a, v):
        return int(np.asarray(v, dtype=a.dtype).view(np.uint16))

    def load_words4(a, i):
        return tuple(np.uint32(_bits16(a, a[i + 2 * w]) | (_bits16(a, a[i + 2 * w + 1]) << 16))
                     for w in range(4))

    def store_words4(a, i, words):
        for w in range(4):
            v = int(words[w])
            a[i + 2 * w: i + 2 * w + 2] = np.array([v & 0xFFFF, v >> 16],
                                                   dtype=np.uint16).view(a.dtype)

    def unpack_half8(a, words):
        halves = np.array([[int(w) & 0xFFFF, int(w) >> 16] for w in words], dtype=np.uint16)
        return tuple(_to_f32(a, v) for v in halves.ravel().view(a.dtype))

    def load_half4(a, i):
        return tuple(_to_f32(a, a[i + k]) for k in range(4))

    def load_half8(a, i):
        return tuple(_to_f32(a, a[i + k]) for k in range(8))

    def store_half4(a, i, v):
        for k in range(4):
            a[i + k] = _from_f32(a, v[k])

    def store_half8(a, i, v):
        for k in range(8):
            a[i + k] = _from_f32(a, v[k])

    def load_f32_cg(arr, idx):
        return arr[idx]  # one memory: no L1 to go around

    def _shared_f32(addr, n, what):
        """The ``n`` float32 at a shared address (tensorcore's stand-in: array, byte offset),
        a view of its bytes; the GPU's alignment checked."""
        off = addr.offset
        if off % (4 * n):
            raise ValueError(f"{what}: shared byte offset {off} is not {4 * n}-byte aligned")
        return addr.arr.reshape(-1).view(np.uint8)[off:off + 4 * n].view(np.float32)

    def st_shared_f32(addr, v):
        _shared_f32(addr, 1, "st_shared_f32")[0] = np.float32(v)

    def ld_shared_f32(addr):
        return np.float32(_shared_f32(addr, 1, "ld_shared_f32")[0])

    def ld_shared_f32x2(addr):
        pair = _shared_f32(addr, 2, "ld_shared_f32x2")
        return np.float32(pair[0]), np.float32(pair[1])
