"""Eight-bit floats on Hopper: the two formats, their conversions and FP8 ``wgmma``, each with
a NumPy model that says bit for bit what the instruction gives.

The formats (``FORMATS``, "FP8 Formats for Deep Learning", as the PTX ISA names them):

- **e4m3** (``float8_e4m3fn``): sign, 4 exponent bits (bias 7), 3 mantissa bits. No
  infinities: only S.1111.111 is NaN, so the largest value is S.1111.110 = 448.
  Subnormals down to 2**-9.
- **e5m2**: sign, 5 exponent bits (bias 15), 2 mantissa bits, IEEE-like: S.11111.00 is
  infinity, S.11111.{01,10,11} NaN, the largest finite value 57344, subnormals to 2**-16.
  An e5m2 byte is the upper byte of a float16.

The instructions (sm_89+ for the conversions, sm_90a for wgmma), as intrinsics:

- ``cvt_e4m3x2(hi, lo)`` / ``cvt_e5m2x2``: ``cvt.rn.satfinite.e4m3x2.f32 d, hi, lo``: two
  float32 rounded to nearest, ties to even, packed in 16 bits (``hi`` in the upper byte).
  *satfinite*: a value beyond the largest finite one (infinity too) becomes the largest
  finite one of its sign: +-448 for e4m3, where torch's ``.to(torch.float8_e4m3fn)`` gives
  NaN. NaN stays NaN. Model: :func:`encode`, :func:`pack_model`.
- ``cvt_f16x2_e4m3x2(b)`` / ``cvt_f16x2_e5m2x2``: ``cvt.rn.f16x2.e4m3x2 d, b``: two
  eight-bit values widened to two float16 (exact: every e4m3 and e5m2 value is a float16).
  Model: :func:`widen_model`.
- ``st_shared_e4m3x2(addr, lo, hi)``: the pack above stored as 16 bits at a 32-bit shared
  address (``lo`` at the lower address): an epilogue's store into its staging tile.
- ``wgmma`` with 8-bit operands: :func:`book.kernels.hopper.make_wgmma` with kind ``"e4m3"``
  or ``"e5m2"`` builds ``wgmma.mma_async.sync.aligned.m64nNk32.f32.e4m3.e4m3``: k = 32 per
  instruction, both operands K-major from shared-memory descriptors and *no* transpose
  arguments (8-bit operands have none; with the 16-bit form's ``, 0, 0`` ptxas refuses the
  instruction). The bytes sit where bf16's k16 operands sit: 32 bytes of one row per
  instruction, a 128-byte swizzled row holds 128 values, so the descriptors are the same
  (:func:`book.kernels.hopper.descriptor`; :func:`operand_addresses` with
  ``itemsize=1``). Model: :func:`wgmma_model` (exact for products whose float32 sums are
  exact, such as small integers; the tensor cores' FP8 accumulation keeps fewer bits than
  float32 in general, so on real data the GPU and the model differ by rounding).

In Numba's CUDA simulator the conversions are the models themselves (a simulated kernel
can quantize); wgmma has no simulator version (chapter 9's rule).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from numba import config

from .hopper import operand_addresses

SIMULATED = bool(config.ENABLE_CUDASIM)

__all__ = ["Format", "FORMATS", "E4M3", "E5M2", "values", "decode", "encode", "encode_table",
           "encode_fast", "pack_model", "widen_model", "f16_bits", "wgmma_model", "NAN_BITS",
           "F16_NAN"]


@dataclass(frozen=True)
class Format:
    """An eight-bit float format: its bit fields and the facts that follow from them."""

    name: str
    exp_bits: int
    man_bits: int
    bias: int
    ieee: bool  # all-ones exponent is infinity/NaN (e5m2); else only S.1111.111 is NaN (e4m3)

    @property
    def emin(self) -> int:  # exponent of the smallest normal value
        return 1 - self.bias

    @property
    def max(self) -> float:
        """The largest finite value (what satfinite clamps to)."""
        top = (1 << self.exp_bits) - (2 if self.ieee else 1)
        man = (1 << self.man_bits) - (1 if self.ieee else 2)
        return float((1 + man / (1 << self.man_bits)) * 2.0 ** (top - self.bias))

    def saturates(self, x) -> np.ndarray:
        """Where satfinite changes the result: magnitudes that round past the largest
        value (above it by half a step or more; a tie rounds to the even code: away
        from e4m3's largest, 0x7E, onto e5m2's past it, 0x7B being odd)."""
        a = np.abs(np.asarray(x, dtype=np.float64))
        top = (1 << self.exp_bits) - (2 if self.ieee else 1)
        half = 2.0 ** (top - self.bias - self.man_bits) / 2
        return (a >= self.max + half) if self.ieee else (a > self.max + half)

    @property
    def min_subnormal(self) -> float:
        return 2.0 ** (self.emin - self.man_bits)

    @property
    def ptx(self) -> str:
        return self.name


E4M3 = Format("e4m3", 4, 3, 7, False)
E5M2 = Format("e5m2", 5, 2, 15, True)
FORMATS = {"e4m3": E4M3, "e5m2": E5M2}

#: the byte a NaN input converts to (the canonical NaN of the format, positive)
NAN_BITS = {"e4m3": 0x7F, "e5m2": 0x7F}
#: the float16 bits an eight-bit NaN widens to (float16's canonical NaN)
F16_NAN = 0x7FFF


def _fmt(fmt) -> Format:
    return fmt if isinstance(fmt, Format) else FORMATS[fmt]


def values(fmt="e4m3") -> np.ndarray:
    """float64[256]: the value of every byte (NaN for the NaN codes, +-inf for e5m2's)."""
    f = _fmt(fmt)
    b = np.arange(256)
    sign = np.where(b >> 7, -1.0, 1.0)
    e = (b >> f.man_bits) & ((1 << f.exp_bits) - 1)
    m = b & ((1 << f.man_bits) - 1)
    scale = float(1 << f.man_bits)
    mag = np.where(e == 0, m / scale * 2.0 ** f.emin,
                   (1 + m / scale) * np.exp2(e.astype(np.float64) - f.bias))
    top = (1 << f.exp_bits) - 1
    if f.ieee:
        mag = np.where(e == top, np.where(m == 0, np.inf, np.nan), mag)
    else:
        mag = np.where((e == top) & (m == (1 << f.man_bits) - 1), np.nan, mag)
    return sign * mag


def decode(bits, fmt="e4m3") -> np.ndarray:
    """The float64 values of eight-bit codes (any integer array)."""
    return values(fmt)[np.asarray(bits).astype(np.int64) & 0xFF]


def encode(x, fmt="e4m3") -> np.ndarray:
    """uint8 codes of float32 ``x`` as ``cvt.rn.satfinite`` makes them: round to nearest,
    ties to even (in the subnormals too), a magnitude past the largest finite value (or
    infinite) clamped to it with its sign, NaN to :data:`NAN_BITS`. -0.0 and negative
    values that round to zero keep their sign (0x80)."""
    f = _fmt(fmt)
    x = np.asarray(x, dtype=np.float32).astype(np.float64)
    neg = np.signbit(x)
    nan = np.isnan(x)
    a = np.where(nan, 0.0, np.abs(x))
    with np.errstate(invalid="ignore", over="ignore"):
        _, e = np.frexp(np.where(np.isinf(a), 1.0, a))  # a = m * 2**e, m in [0.5, 1)
        q = np.maximum(e - 1, f.emin) - f.man_bits  # the spacing of values near a: 2**q
        y = np.ldexp(np.rint(np.ldexp(a, -q)), q)  # rint: ties to even
    y = np.where(np.isinf(a) | (y > f.max), f.max, y)  # satfinite
    m, e = np.frexp(y)
    normal = y >= 2.0 ** f.emin
    code = np.where(normal, ((e - 1 + f.bias) << f.man_bits)
                    + np.rint((2 * m - 1) * (1 << f.man_bits)).astype(np.int64),
                    np.rint(y / f.min_subnormal).astype(np.int64))
    code = code | (neg.astype(np.int64) << 7)
    return np.where(nan, NAN_BITS[f.name], code).astype(np.uint8)


@functools.lru_cache(maxsize=None)
def encode_table(fmt="e4m3") -> np.ndarray:
    """uint8[2**17]: :func:`encode` of every float32 class that decides a code: the upper
    16 bits of the float32 and whether any of its lower 16 bits is set (index
    ``(bits >> 16) << 1 | sticky``).

    Why that is enough: both formats keep at most 3 mantissa bits, so rounding to nearest
    even reads the kept bits, the round bit just below them (bit 19 or higher of the
    float32, in the upper half) and whether anything below the round bit is set (bits 16
    and up in the upper half, the rest in ``sticky``); subnormal results keep fewer bits, so
    their round bit sits higher still. Inf and NaN are decided by the same class (a NaN
    whose payload sits in the lower half has sticky set). Each entry is :func:`encode` of
    one member of its class (``tests/library/test_fp8.py`` draws others from every class)."""
    top = np.arange(1 << 16, dtype=np.uint32) << 16
    members = np.stack([top, top | 1], axis=1).reshape(-1)  # sticky 0, then 1
    with np.errstate(invalid="ignore"):  # the NaN classes: signalling payloads
        return encode(members.view(np.float32), fmt)


def encode_fast(x, fmt="e4m3") -> np.ndarray:
    """:func:`encode` by table (:func:`encode_table`): the same codes, for the millions of
    weights :mod:`book.quantize` rounds at a time (a few float32 bit operations and one
    gather per value, no float64 temporaries)."""
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    idx = ((b >> 16) << 1) | ((b & 0xFFFF) != 0)
    return encode_table(fmt)[idx]


def pack_model(hi, lo, fmt="e4m3") -> np.ndarray:
    """uint16: what ``cvt.rn.satfinite.<fmt>x2.f32 d, hi, lo`` puts in d (``hi`` in the
    upper byte)."""
    return ((encode(hi, fmt).astype(np.uint16) << 8) | encode(lo, fmt)).astype(np.uint16)


def f16_bits(v) -> np.ndarray:
    """uint16 float16 bits of float64 values that float16 holds exactly (NaN ->
    :data:`F16_NAN`)."""
    v = np.asarray(v, dtype=np.float64)
    bits = v.astype(np.float16).view(np.uint16)
    return np.where(np.isnan(v), F16_NAN, bits).astype(np.uint16)


def widen_model(b16, fmt="e4m3") -> np.ndarray:
    """uint32: what ``cvt.rn.f16x2.<fmt>x2 d, b`` puts in d for the 16 bits ``b``: the
    upper byte's float16 in the upper half, the lower byte's in the lower half."""
    b = np.asarray(b16).astype(np.int64)
    hi, lo = f16_bits(decode(b >> 8, fmt)), f16_bits(decode(b & 0xFF, fmt))
    return ((hi.astype(np.uint32) << 16) | lo).astype(np.uint32)


def wgmma_model(smem: np.ndarray, desc_a: int, desc_b: int, n: int, kind="e4m3", d=None,
                kind_b=None) -> np.ndarray:
    """D (64 x n float32) = A B^T (+ D) of one ``m64nNk32`` with eight-bit operands read
    from the shared-memory bytes ``smem`` through two K-major descriptors (kind_b: B's
    format if it differs from A's)."""
    raw = np.asarray(smem).view(np.uint8)
    a = decode(raw[operand_addresses(desc_a, 64, k=32, itemsize=1)], kind)
    b = decode(raw[operand_addresses(desc_b, n, k=32, itemsize=1)], kind_b or kind)
    out = a @ b.T
    if d is not None:
        out = out + d
    return out.astype(np.float32)


# ---------------------------------------------------------------------------------------
# The instructions

if not SIMULATED:
    from llvmlite import ir
    from numba import types
    from numba.cuda.extending import intrinsic

    _i16, _i32, _f32 = ir.IntType(16), ir.IntType(32), ir.FloatType()

    def _asm(builder, text, constraints, args, ret):
        fn = ir.FunctionType(ret, [a.type for a in args])
        return builder.asm(fn, text, constraints, list(args), False)

    def _f32_arg(context, builder, signature, args, i):
        return context.cast(builder, args[i], signature.args[i], types.float32)

    def _pack(fmt):
        @intrinsic
        def pack(typingctx, hi, lo):
            def codegen(context, builder, signature, args):
                h = _f32_arg(context, builder, signature, args, 0)
                lo_ = _f32_arg(context, builder, signature, args, 1)
                return _asm(builder, f"cvt.rn.satfinite.{fmt}x2.f32 $0, $1, $2;", "=h,f,f",
                            (h, lo_), _i16)

            return types.uint16(hi, lo), codegen

        return pack

    def _widen(fmt):
        @intrinsic
        def widen(typingctx, b):
            def codegen(context, builder, signature, args):
                v = builder.trunc(context.cast(builder, args[0], signature.args[0],
                                               types.uint32), _i16)
                return _asm(builder, f"cvt.rn.f16x2.{fmt}x2 $0, $1;", "=r,h", (v,), _i32)

            return types.uint32(b), codegen

        return widen

    cvt_e4m3x2, cvt_e5m2x2 = _pack("e4m3"), _pack("e5m2")
    cvt_f16x2_e4m3x2, cvt_f16x2_e5m2x2 = _widen("e4m3"), _widen("e5m2")

    @intrinsic
    def st_shared_e4m3x2(typingctx, addr, lo, hi):
        """Round two float32 to e4m3 (satfinite) and store them as 16 bits at a 32-bit
        shared address (``lo`` at the lower address)."""
        def codegen(context, builder, signature, args):
            a = context.cast(builder, args[0], signature.args[0], types.uint32)
            flo = _f32_arg(context, builder, signature, args, 1)
            fhi = _f32_arg(context, builder, signature, args, 2)
            fn = ir.FunctionType(ir.VoidType(), [_i32, _f32, _f32])
            builder.asm(fn, "{ .reg .b16 w; cvt.rn.satfinite.e4m3x2.f32 w, $2, $1; "
                            "st.shared.b16 [$0], w; }", "r,f,f,~{memory}", [a, flo, fhi], True)
            return context.get_dummy_value()

        return types.void(addr, lo, hi), codegen
else:  # the simulator: the models, one lane at a time

    def cvt_e4m3x2(hi, lo):
        return int(pack_model(hi, lo, "e4m3"))

    def cvt_e5m2x2(hi, lo):
        return int(pack_model(hi, lo, "e5m2"))

    def cvt_f16x2_e4m3x2(b):
        return int(widen_model(b, "e4m3"))

    def cvt_f16x2_e5m2x2(b):
        return int(widen_model(b, "e5m2"))
