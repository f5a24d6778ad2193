"""The "Eight bits" chapter's exercises (chapters/09b_eight_bits.ipynb). Each right answer is
computed here: from the datasheet table (:mod:`book.specs`), the eight-bit models
(:mod:`book.kernels.instructions.fp8`), the quantization code (:mod:`book.quantize`, run on a small layer)
or the FP8 record (:mod:`book.fp8_data`), never typed."""

from __future__ import annotations

import numpy as np

from .choice import Choice
from .number import Number

__all__ = ["fp8_weight_read", "e4m3_value", "epilogue_scales", "factors_out",
           "unfused_pass_bytes"]


def fp8_weight_read(d: int = 5120, h: int = 13824, gpu: str = "H200",
                    name: str = "ex") -> Number:
    """The time to read an MLP-up's two e4m3 weights once at the HBM peak (µs)."""
    from ..specs import get

    spec = get(gpu)
    w = 2 * d * h  # values; one byte each
    truth = w / spec.memory_bandwidth * 1e6
    return Number(
        f"A model of width d = {d:,} with h = {h:,} keeps its gate and up weights in e4m3, "
        f"a scale per output channel beside them (float32, too few to count). At decode one "
        f"call of its MLP-up reads both weights once. On the {spec.name}, whose memory "
        f"streams at {spec.memory_bandwidth / 1e12:.2f} TB/s at most, how long does that "
        "read take at least, in µs?",
        truth, unit="µs", rel=0.03,
        mistakes=[(2 * truth, "that is bf16's: two bytes per weight. e4m3 is one."),
                  (truth / 2, "count both weights, gate's and up's."),
                  (8 * truth, "bytes, not bits: the bandwidth is in bytes per second."),
                  (w / 1e12 * 1e6, "divide by the bandwidth in bytes/s (TB/s x 10^12).")],
        hints=["Chapter 1's count: values x bytes per value. Two matrices of d x h.",
               "Time = bytes / bandwidth; 1 µs = 10^-6 s."],
        explanation=f"2 x {d:,} x {h:,} = {w / 1e6:,.1f} million bytes, at "
                    f"{spec.memory_bandwidth / 1e12:.2f} TB/s: {truth:.1f} µs, half of bf16's "
                    f"{2 * truth:.1f} µs. At decode that read is the call, so halving the "
                    "bytes per weight halves the time the roofline allows.", name=name)


def e4m3_value(code: int = 0xD5, name: str = "ex") -> Number:
    """The value of one e4m3 byte (:func:`book.kernels.instructions.fp8.decode`)."""
    from ..kernels.instructions import fp8 as F

    code = int(code) & 0xFF
    truth = float(F.decode(code, "e4m3"))
    if not np.isfinite(truth) or (code & 0x78) == 0:
        raise ValueError("pick a normal, finite code: the hints describe normal values")
    s, e, m = code >> 7, (code >> 3) & 15, code & 7
    sign = -1.0 if s else 1.0
    return Number(
        f"An e4m3 byte reads 0x{code:02X} = {code:08b} in binary: 1 sign bit, 4 exponent bits "
        "(bias 7), 3 mantissa bits. What value does it hold?",
        truth, unit="", rel=0.0, abs_tol=1e-9,
        mistakes=[(sign * 2.0 ** (e - 8) * (1 + m / 8), "e4m3's bias is 7, not 8."),
                  (sign * 2.0 ** (e - 7) * (m / 8), "a normal value has an implicit 1 "
                                                    "before its mantissa: 1 + m/8."),
                  (-sign * 2.0 ** (e - 7) * (1 + m / 8), "the first bit is the sign: 1 "
                                                         "is negative."),
                  (float(F.decode(code, "e5m2")), "that is the same byte read as e5m2 "
                                                  "(5 exponent bits, 2 mantissa bits).")],
        hints=[f"Split it: sign {s}, exponent {e:04b} = {e}, mantissa {m:03b} = {m}.",
               "Value = (-1)^sign x 2^(exponent - 7) x (1 + mantissa/8)."],
        explanation=f"(-1)^{s} x 2^({e} - 7) x (1 + {m}/8) = {truth:g}. "
                    "book.kernels.instructions.fp8.decode computes the same for every byte, and the "
                    "conversion instructions were held to it bit for bit on the GPU.",
        name=name)


def factors_out(act: str, weight: str, T: int = 4, d: int = 512, h: int = 256,
                seed: int = 0) -> bool:
    """Whether the scales of a scheme can be applied once per output, after the k loop:
    whether ``s_x[t, k] * s_w[c, k]`` is the same for every k of each (t, c), for scales made
    by :func:`book.quantize.scales_for` on a small random layer."""
    from .. import quantize as Q

    rng = np.random.default_rng(seed)
    x = rng.standard_normal((T, d)).astype(np.float32) * rng.uniform(0.1, 10, (1, d))
    w = rng.standard_normal((h, d)).astype(np.float32) * rng.uniform(0.1, 10, (1, d))

    def each(a, scheme, block):
        q = Q.quantize(a, Q.scales_for(a, scheme, block=block), block=(
            block if scheme == "block" else None))
        return np.broadcast_to(q.scale_of_each(), a.shape)

    sx = each(x, act, Q.ACT_BLOCK)
    sw = each(w, weight, Q.WEIGHT_BLOCK)
    prod = sx[:, None, :].astype(np.float64) * sw[None, :, :]  # [t, c, k]
    return bool(np.all(prod == prod[:, :, :1]))


def epilogue_scales(name: str = "ex") -> Choice:
    """Which scale schemes the epilogue can apply once per output (the kernel's way), and
    which need the main loop: computed by :func:`factors_out`."""
    from ..quantize import ACT_BLOCK, WEIGHT_BLOCK

    schemes = {"tensor": ("tensor", "tensor"), "row": ("row", "row"),
               "block": ("block", "block")}
    ok = {k: factors_out(*v) for k, v in schemes.items()}
    options = {"a": "per tensor only",
               "b": "per tensor, and per token with per output channel",
               "c": "all three, the blocks too"}
    answer = ("c" if all(ok.values()) else "b" if ok["tensor"] and ok["row"]
              else "a" if ok["tensor"] else None)
    if answer is None:
        raise ValueError(f"no option says what factors out: {ok}")
    blk = (f"{ACT_BLOCK[0]} x {ACT_BLOCK[1]} blocks of x and {WEIGHT_BLOCK[0]} x "
           f"{WEIGHT_BLOCK[1]} blocks of W")
    return Choice(
        "The fused kernel multiplies the codes over all of k in the tensor cores and applies "
        "the scales once per output, in the epilogue: gate[t, c] = s(t, c) x sum over k of "
        "xq[t, k] wq[c, k]. For which schemes can it? Per tensor; per token with per output "
        f"channel; per block ({blk}).",
        options, answer,
        why={"a": "a scale per token is the same for every k of its row, and a scale per "
                  "output channel for every k of its column: their product comes out of the "
                  "sum too.",
             "c": f"a block's scale changes along k (every {ACT_BLOCK[1]} values): each "
                  "k-block's partial sum needs its own scales, applied inside the main loop "
                  "before it is added to the rest.",
             "b": "the product of the scales is the same for every k here, so it comes out "
                  "of the sum."},
        hints=["Write the sum with each value's scale: sum over k of s_x(t, k) xq[t, k] "
               "s_w(c, k) wq[c, k]. When can s_x(t, k) s_w(c, k) leave the sum?",
               "It can when it does not depend on k."],
        explanation="Per tensor and per token/channel scales do not depend on k, so the "
                    "kernel scales each output once after the k loop (book.kernels.gemms.fp8_gemm's "
                    "epilogue). Block scales change every 128 values of k: a kernel must "
                    "scale each k-block's partial sums as it goes (DeepSeek-V3 adds them into "
                    "float32 registers every 128 k: work in the main loop, not the epilogue).",
        name=name)


def unfused_pass_bytes(T: int = 2048, h: int = 14336, gpu: str = "H200",
                       name: str = "ex") -> Number:
    """The time at the HBM peak of the bytes the unfused FP8 path moves that the fused
    epilogue does not: gate|up written in bf16 by the GEMM and read back by the pass."""
    from ..specs import get

    spec = get(gpu)
    extra = 2 * (2 * T * h * 2)  # [T, 2h] bf16 written, then read
    truth = extra / spec.memory_bandwidth * 1e6
    return Number(
        f"cuBLASLt's FP8 GEMM writes gate and up, [{T:,}, 2 x {h:,}], in bf16; a compiled "
        "pass reads them back and writes silu(gate) * up as e4m3. The fused kernel writes "
        "only that e4m3 output. How long do the bytes that the fused kernel never moves take "
        f"at the HBM peak of the {spec.name} ({spec.memory_bandwidth / 1e12:.2f} TB/s), in "
        "µs?",
        truth, unit="µs", rel=0.03,
        mistakes=[(truth / 2, "count both: the GEMM writes gate|up, and the pass reads "
                              "them back."),
                  (truth * 9 / 8, "both paths write the e4m3 output: it is not a saving."),
                  (truth / 4, "gate|up is 2h wide, in bf16 (2 bytes)."),
                  (truth * 2, "bf16 is 2 bytes per value, not 4.")],
        hints=["gate|up: T x 2h values x 2 bytes, once written and once read.",
               "Time = bytes / bandwidth."],
        explanation=f"2 x {T:,} x {2 * h:,} x 2 bytes = {extra / 1e6:,.0f} MB at "
                    f"{spec.memory_bandwidth / 1e12:.2f} TB/s: {truth:.0f} µs, the least the "
                    "unfused path can add to its GEMM. Compare the measured gap between "
                    "cuBLASLt + compile and cuBLASLt's GEMM alone in the chapter's table.",
        name=name)
