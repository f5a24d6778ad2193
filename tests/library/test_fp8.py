"""The eight-bit formats and their models (book/kernels/instructions/fp8.py) without a GPU: every byte of
both formats, rounding ties, saturation, the pack and widen models, FP8 wgmma's model read
through the bf16 descriptors; the instructions compiled for sm_90a and assembled by ptxas
with its warnings read. The models against the GPU: tests/library/test_fp8_gpu.py."""

import re

import numpy as np
import pytest
import torch

import book  # noqa: F401
from book.kernels.instructions import fp8 as F
from book.kernels.instructions import hopper as H
from book.kernels.host import ptx

TORCH = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}


def torch_cast(x, fmt):
    return torch.from_numpy(np.asarray(x, dtype=np.float32)).to(TORCH[fmt]).view(
        torch.uint8).numpy()


# ------------------------------------------------------------------ the formats


def test_the_formats_facts():
    assert F.E4M3.max == 448.0 and F.E5M2.max == 57344.0
    assert F.E4M3.min_subnormal == 2.0 ** -9 and F.E5M2.min_subnormal == 2.0 ** -16
    v = F.values("e4m3")
    assert np.isnan(v).sum() == 2 and np.isnan(v[[0x7F, 0xFF]]).all()  # S.1111.111 only
    assert not np.isinf(v).any() and v[0x7E] == 448 and v[0xFE] == -448
    w = F.values("e5m2")
    assert w[0x7C] == np.inf and w[0xFC] == -np.inf and np.isnan(w).sum() == 6
    assert w[0x7B] == 57344


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_every_byte_decodes_as_torch_reads_it(fmt):
    b = np.arange(256, dtype=np.uint8)
    t = torch.from_numpy(b).view(TORCH[fmt]).float().numpy().astype(np.float64)
    v = F.values(fmt)
    assert np.array_equal(np.isnan(t), np.isnan(v))
    assert np.array_equal(t[~np.isnan(t)], v[~np.isnan(v)])


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_every_value_encodes_back_to_its_byte(fmt):
    v = F.values(fmt)
    b = np.arange(256)
    finite = np.isfinite(v)
    assert np.array_equal(F.encode(v[finite], fmt), b[finite])
    assert (F.encode(v[np.isnan(v)], fmt) == F.NAN_BITS[fmt]).all()


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_ties_round_to_even_in_normals_and_subnormals(fmt):
    v = F.values(fmt)
    pos = v[:128][np.isfinite(v[:128])]  # codes 0.. in order: 0, subnormals, normals
    mids = (pos[:-1] + pos[1:]) / 2  # exactly representable in float32
    assert np.array_equal(mids.astype(np.float32).astype(np.float64), mids)
    got = F.encode(mids, fmt)
    lo, hi = F.encode(pos[:-1], fmt), F.encode(pos[1:], fmt)
    want = np.where(lo % 2 == 0, lo, hi)  # the even code of the two neighbours
    assert np.array_equal(got, want)
    assert np.array_equal(got, torch_cast(mids, fmt))  # torch rounds the same way
    # a hair either side of a tie goes to the nearer neighbour
    up = np.nextafter(mids.astype(np.float32), np.float32(np.inf))
    assert np.array_equal(F.encode(up, fmt), hi)
    neg = F.encode(-mids, fmt)
    assert np.array_equal(neg, want | 0x80)


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_random_values_in_range_match_torchs_cast(fmt):
    rng = np.random.default_rng(7)
    top = F.FORMATS[fmt].max
    x = np.concatenate([rng.standard_normal(50_000) * top / 8,
                        np.exp2(rng.uniform(-30, np.log2(top), 50_000))
                        * rng.choice([-1, 1], 50_000)]).astype(np.float32)
    assert np.array_equal(F.encode(x, fmt), torch_cast(x, fmt))


def test_satfinite_clamps_to_the_largest_value():
    """(torch's cast is no reference past the largest value: on the H200 its CUDA cast gave
    NaN for 500, this CPU build's gives 448: the field notes' fifth look)"""
    x = np.array([448, 449, 464, 470, 500, 1e30, np.inf, -500, -np.inf], dtype=np.float32)
    assert F.encode(x, "e4m3").tolist() == [0x7E] * 7 + [0xFE] * 2
    y = np.array([57344, 61439, 61440, 1e10, np.inf, -np.inf], dtype=np.float32)
    assert F.encode(y, "e5m2").tolist() == [0x7B] * 5 + [0xFB]
    assert F.encode(np.array([np.nan, -np.nan], np.float32), "e4m3").tolist() == [0x7F] * 2


def test_signed_zeros_and_underflow():
    x = np.array([0.0, -0.0, 2.0 ** -11, -(2.0 ** -11), 2.0 ** -10, 1e-40, -1e-40],
                 dtype=np.float32)
    # 2**-10 is half the smallest subnormal: a tie, to the even 0
    assert F.encode(x, "e4m3").tolist() == [0, 0x80, 0, 0x80, 0, 0, 0x80]
    assert F.encode(np.float32(3 * 2.0 ** -10), "e4m3") == 2  # 1.5 quanta: tie, to 2


def test_pack_puts_the_first_operand_in_the_upper_byte():
    assert F.pack_model(np.float32(1.0), np.float32(-2.0)) == (0x38 << 8) | 0xC0
    assert F.pack_model(np.float32(1.0), np.float32(-2.0), "e5m2") == (0x3C << 8) | 0xC0


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_widening_is_exact_for_every_byte(fmt):
    b = np.arange(256)
    pairs = (b[:, None] << 8 | b[None, :]).ravel()  # every pair of bytes
    w = F.widen_model(pairs, fmt)
    hi = (w >> 16).astype(np.uint16).view(np.float16).astype(np.float64)
    lo = (w & 0xFFFF).astype(np.uint16).view(np.float16).astype(np.float64)
    v = F.values(fmt)
    for got, src in ((hi, pairs >> 8), (lo, pairs & 0xFF)):
        want = v[src]
        assert np.array_equal(np.isnan(got), np.isnan(want))
        assert np.array_equal(got[~np.isnan(got)], want[~np.isnan(want)])
    if fmt == "e5m2":  # an e5m2 byte is the upper byte of its float16
        finite = np.isfinite(v)
        assert np.array_equal(F.f16_bits(v[finite]), (b[finite] << 8).astype(np.uint16))


# ------------------------------------------------------------------ FP8 wgmma's model


def fp8_image(A, B, fmt, width=128):
    """A [64, k] and B [n, k] values of ``fmt`` placed as TMA writes them (128B swizzle)."""
    k = A.shape[1]
    img = np.zeros(64 * width + B.shape[0] * width, dtype=np.uint8)
    img[:64 * width] = H.tma_box(F.encode(A, fmt), 0, 0, (k, 64))
    img[64 * width:] = H.tma_box(F.encode(B, fmt), 0, 0, (k, B.shape[0]))
    return img


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_fp8_wgmma_reads_back_what_tma_wrote_with_the_bf16_descriptors(fmt):
    """A 128-byte swizzled row holds 128 eight-bit values; the k32 of one instruction is 32
    bytes of it, as bf16's k16: the descriptors and the 32-byte step are the same."""
    rng = np.random.default_rng(1)
    A = rng.integers(-8, 9, size=(64, 128)).astype(np.float32)
    B = rng.integers(-8, 9, size=(256, 128)).astype(np.float32)
    img = fp8_image(A, B, fmt)
    for ks in range(4):
        da = H.descriptor(32 * ks, 16, 1024, "128B")
        db = H.descriptor(64 * 128 + 32 * ks, 16, 1024, "128B")
        got = F.wgmma_model(img, da, db, 256, fmt)
        k = slice(32 * ks, 32 * ks + 32)
        assert np.array_equal(got, A[:, k] @ B[:, k].T), ks


def test_fp8_wgmma_model_without_swizzle_core_matrices():
    """No swizzle: a core matrix is 8 rows of 16 bytes (16 values); LBO 128, SBO 256."""
    rng = np.random.default_rng(2)
    A = rng.integers(-4, 5, size=(64, 32)).astype(np.float32)
    B = rng.integers(-4, 5, size=(64, 32)).astype(np.float32)
    img = np.zeros(4096 + 4096, dtype=np.uint8)
    da, db = H.descriptor(0, 128, 256, "none"), H.descriptor(4096, 128, 256, "none")
    for M, d in ((A, da), (B, db)):
        img[H.operand_addresses(d, 64, k=32, itemsize=1)] = F.encode(M, "e4m3")
    assert np.array_equal(F.wgmma_model(img, da, db, 64), A @ B.T)
    swapped = H.descriptor(0, 256, 128, "none")  # LBO and SBO swapped: other bytes
    assert not np.array_equal(F.wgmma_model(img, swapped, db, 64), A @ B.T)


def test_mixed_formats_read_each_operand_in_its_own():
    img = np.zeros(64 * 128 + 64 * 128, dtype=np.uint8)
    img[:] = 0x38  # e4m3: 1.0; e5m2: 0.5 (0x38 = 0.01110.00)
    da, db = H.descriptor(0, 16, 1024), H.descriptor(64 * 128, 16, 1024)
    assert (F.wgmma_model(img, da, db, 64, "e4m3") == 32).all()
    assert (F.wgmma_model(img, da, db, 64, "e4m3", kind_b="e5m2") == 16).all()


# ------------------------------------------------------------------ PTX and ptxas

FP8 = ["fp8_probe_wgmma_e4m3_n64", "fp8_probe_wgmma_e4m3_n256", "fp8_probe_wgmma_e5m2_n128",
       "fp8_probe_pack_e4m3", "fp8_probe_pack_e5m2", "fp8_probe_widen_e4m3",
       "fp8_probe_widen_e5m2"]


@pytest.fixture(scope="module")
def texts():
    return ptx.ptx_many([(n, "bfloat16") for n in FP8], cc=H.ARCH)


@pytest.mark.parametrize("name", FP8)
def test_ptxas_assembles_the_fp8_instructions_without_serializing(texts, name):
    ok, log = ptx.ptxas_log(texts[f"{name}/bfloat16"])
    assert ok, log[-2000:]
    bad = re.findall(r"\((C75(?:09|10|15|17|08))\)[^\n]*", log)
    assert not bad, f"{name}: ptxas warned {bad}"


def test_the_instructions_are_the_ones_named(texts):
    w = texts["fp8_probe_wgmma_e4m3_n256/bfloat16"]
    assert re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n256k32\.f32\.e4m3\.e4m3 "
                     r"\{[^}]*\}, %rd\d+, %rd\d+, p, 1, 1;", w)
    assert "m64n128k32.f32.e5m2.e5m2" in texts["fp8_probe_wgmma_e5m2_n128/bfloat16"]
    assert "cvt.rn.satfinite.e4m3x2.f32" in texts["fp8_probe_pack_e4m3/bfloat16"]
    assert "cvt.rn.satfinite.e5m2x2.f32" in texts["fp8_probe_pack_e5m2/bfloat16"]
    assert "cvt.rn.f16x2.e4m3x2" in texts["fp8_probe_widen_e4m3/bfloat16"]
    assert "cvt.rn.f16x2.e5m2x2" in texts["fp8_probe_widen_e5m2/bfloat16"]


def test_the_transpose_arguments_are_refused_for_eight_bits(texts):
    """The trap of the field notes: the bf16 form's trailing ``, 0, 0`` on an FP8 wgmma."""
    text = texts["fp8_probe_wgmma_e4m3_n64/bfloat16"]
    bad = re.sub(r"(m64n64k32\.f32\.e4m3\.e4m3 \{[^}]*\}, %rd\d+, %rd\d+, p, 1, 1);",
                 r"\1, 0, 0;", text)
    assert bad != text
    ok, log = ptx.ptxas_log(bad)
    assert not ok and "wgmma" in log.lower()


def test_saturates_says_where_the_clamp_changed_the_result():
    x = np.array([448, 464, np.nextafter(np.float32(464), np.float32(1e9)), 500, np.inf],
                 np.float32)
    assert F.E4M3.saturates(x).tolist() == [False, False, True, True, True]
    y = np.array([57344, np.nextafter(np.float32(61440), np.float32(0)), 61440], np.float32)
    assert F.E5M2.saturates(y).tolist() == [False, False, True]
    # where it does not, the clamped code is the rounded one
    for f, v in (("e4m3", x), ("e5m2", y)):
        keep = ~F.FORMATS[f].saturates(v)
        assert (F.decode(F.encode(v[keep], f), f) == F.FORMATS[f].max).all()
