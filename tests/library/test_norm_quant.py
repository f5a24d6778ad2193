"""RMSNorm fused with the per-token e4m3 quantization (book/kernels/elementwise/norm_quant.py): its codes
and scales are its NumPy model's bit for bit (book.quantize.per_token of the kernel's
float32 y) in the simulator, at every tile (one piece or several a thread, one warp or
several, a last piece past d), on its 16-byte path and one element at a time; the staged
control equals its own model; the PTX has no approximate operation for that to hold on a
GPU as well, wide accesses and no spills; on a GPU torch's quantization of the same y gives
the same codes."""

from fractions import Fraction

import numpy as np
import pytest

import book  # noqa: F401  (decides GPU or simulator before numba.cuda is imported)
from numba import cuda

from book.dtypes import bf16_bits, bf16_value
from book.kernels.elementwise import glu_family as gf
from book.kernels.instructions.fma import fma32_model
from book.kernels.elementwise import norm_quant as nq
from book.kernels.host import ptx

NAN = 0x7F  # e4m3's NaN code, |code| past 448


def _exact_fma32(a, b, c):
    """float32 nearest (ties to even) to a * b + c, from the exact rational."""
    ex = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
    f = np.float32(float(ex))
    cands = (np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf)))
    return min(cands, key=lambda v: (abs(Fraction(float(v)) - ex),
                                     int(np.array(v).view(np.uint32)) & 1))


def test_fma32_model_rounds_once():
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(300).astype(np.float32) for _ in range(2))
    c = (rng.standard_normal(300) * np.exp2(rng.integers(-30, 30, 300))).astype(np.float32)
    got = fma32_model(a, b, c)
    assert [_exact_fma32(*v) for v in zip(a, b, c)] == list(got)
    # the float64 sum lands on a float32 midpoint that the exact sum is just below:
    # (1 + 2**-23) + 2**-24 (1 - 2**-36); rounding float64's sum again goes up to even
    a = np.float32(2.0 ** -12 * (1 + 2.0 ** -18))
    b = np.float32(2.0 ** -12 * (1 - 2.0 ** -18))
    c = np.float32(1 + 2.0 ** -23)
    twice = np.float32(np.float64(a) * np.float64(b) + np.float64(c))
    assert twice == np.float32(1 + 2.0 ** -22)
    assert fma32_model(a, b, c) == c == _exact_fma32(a, b, c)


def test_max_nan32_is_numpys_maximum():
    """The amax's step (max.NaN.f32 on a GPU): the larger, a NaN from either side winning."""
    from book.kernels.instructions.fma import max_nan32

    nan = np.float32(np.nan)
    assert max_nan32(np.float32(1), np.float32(2)) == 2 == max_nan32(np.float32(2), np.float32(1))
    assert np.isnan(max_nan32(nan, np.float32(1))) and np.isnan(max_nan32(np.float32(1), nan))


def _launch(x, w, **kw):
    codes, scales = nq.rmsnorm_quant(cuda.to_device(x), cuda.to_device(w), **kw)
    return codes.copy_to_host(), scales.copy_to_host()


def test_codes_and_scales_are_the_models_bit_for_bit():
    """d odd and not a multiple of the 256 threads; a plain row, a zero row, a row with one
    outlier and a row with a NaN; float16 in."""
    T, d = 4, 301
    rng = np.random.default_rng(42)
    x = rng.standard_normal((T, d)).astype(np.float16)
    x[1] = 0
    x[2, 17] = 300  # one outlier: the rest of the row lands in e4m3's small codes
    x[3, 5] = np.nan
    w = (1 + 0.1 * rng.standard_normal(d)).astype(np.float16)
    codes, scales = _launch(x, w, eps=1e-5)
    q = nq.rmsnorm_quant_reference(x, w, eps=1e-5)
    assert np.array_equal(codes, q.codes), np.argwhere(codes != q.codes)[:5]
    assert np.array_equal(scales, q.scale)
    # the model's y is float64's RMSNorm to float32's rounding
    y = nq.rmsnorm_f32(x[:3], w, eps=1e-5)
    np.testing.assert_allclose(y, gf.rmsnorm_reference(x[:3], w, eps=1e-5), rtol=1e-6,
                               atol=1e-7)
    # a zero row: scale 1, codes +0
    assert scales[1] == 1 and not codes[1].any()
    # per-token amax scaling never saturates: the largest |y| is 448 exactly (0x7E), no NaN
    for r in (0, 2):
        assert (codes[r] & 0x7F).max() == 0x7E and ((codes[r] & 0x7F) != NAN).all()
    assert codes[2, 17] == 0x7E and scales[2] == np.float32(np.abs(y[2]).max()) / np.float32(448)
    # a NaN anywhere makes the row NaN: scale 1 (NumPy's and torch's amax propagate it)
    assert scales[3] == 1 and ((codes[3] & 0x7F) == NAN).all()


def test_bfloat16_in_and_the_residual_variant():
    rng = np.random.default_rng(7)
    T, d = 2, 130
    x = bf16_bits(rng.standard_normal((T, d)).astype(np.float32))
    w = bf16_bits((1 + 0.1 * rng.standard_normal(d)).astype(np.float32))
    codes, scales = _launch(x, w)
    q = nq.rmsnorm_quant_reference(bf16_value(x), bf16_value(w))
    assert np.array_equal(codes, q.codes) and np.array_equal(scales, q.scale)

    xf, res = (rng.standard_normal((T, d)).astype(np.float32) for _ in range(2))
    wf = (1 + 0.1 * rng.standard_normal(d)).astype(np.float32)
    h, c, s = nq.add_rmsnorm_quant(*(cuda.to_device(a) for a in (xf, res, wf)))
    q = nq.rmsnorm_quant_reference(xf, wf, residual=res)
    assert np.array_equal(h.copy_to_host(), xf + res)
    assert np.array_equal(c.copy_to_host(), q.codes) and np.array_equal(s.copy_to_host(), q.scale)


def test_bad_inputs_get_clear_errors():
    x = cuda.to_device(np.ones((2, 8), np.float32))
    w = cuda.to_device(np.ones(8, np.float32))
    with pytest.raises(TypeError, match=r"host \(NumPy\) array"):
        nq.rmsnorm_quant(np.ones((2, 8), np.float32), w)
    with pytest.raises(ValueError, match="weight must have shape"):
        nq.rmsnorm_quant(x, cuda.to_device(np.ones(7, np.float32)))
    with pytest.raises(ValueError, match="out must be uint8"):
        nq.rmsnorm_quant(x, w, out=cuda.device_array((2, 8), np.int8))
    with pytest.raises(ValueError, match="scales must be float32"):
        nq.rmsnorm_quant(x, w, scales=cuda.device_array(3, np.float32))
    with pytest.raises(TypeError, match="float32, float16 or bfloat16"):
        nq.rmsnorm_quant(cuda.to_device(np.ones((2, 8), np.int32)), w)
    with pytest.raises(ValueError, match="registers"):
        nq.rmsnorm_quant(cuda.device_array((1, nq.MAX_D + 1), np.float16),
                         cuda.device_array(nq.MAX_D + 1, np.float16))
    with pytest.raises(ValueError, match="shared memory"):
        nq.rmsnorm_quant_staged(cuda.device_array((1, nq.STAGED_MAX_D + 1), np.float16),
                                cuda.device_array(nq.STAGED_MAX_D + 1, np.float16))
    with pytest.raises(ValueError, match="chunks"):
        nq.tile_for(4096, nq.MAX_CHUNKS + 1)


def test_tiles_are_named_and_cover_the_row():
    """tile_for: 256 threads of two 8-column pieces at d = 4096 (16 values a thread in
    registers); a power of two of threads, 32 to 1024; the pieces cover d."""
    t = nq.tile_for(4096)
    assert (t.threads, t.chunks, t.vec, t.warps, t.cols, t.values) == (256, 2, 8, 8, 4096, 16)
    assert str(t) == ("NormQuantTile(256 threads x 2 pieces of 8 columns = 4096 columns, "
                      "16 values a thread)")
    assert (nq.tile_for(7168).threads, nq.tile_for(7168).chunks) == (512, 2)
    assert (nq.tile_for(301).threads, nq.tile_for(301).chunks) == (32, 2)
    assert nq.tile_for(4096, 4) == nq.NormQuantTile(128, 4)
    assert nq.tile_for(nq.MAX_D) == nq.NormQuantTile(nq.MAX_THREADS, nq.MAX_CHUNKS)
    for d in (1, 8, 130, 301, 1032, 4096, 5000, 16384, nq.MAX_D):
        for chunks in range(1, nq.MAX_CHUNKS + 1):
            t = nq.tile_for(d, chunks)
            assert 32 <= t.threads <= nq.MAX_THREADS and t.threads & (t.threads - 1) == 0
            assert t.cols >= d > t.cols - t.threads * t.vec and t.chunks <= nq.MAX_CHUNKS


@pytest.mark.parametrize("T,d,chunks,dtype", [
    (3, 1024, 2, np.float16),   # 64 threads x 2 pieces: two warps, d the tile's width
    (2, 1032, 2, np.float32),   # 128 threads x 2: the second piece only thread 0's, float32
    (1, 1024, 4, "bfloat16"),   # 32 threads x 4 pieces: one warp, its own sums' order
])
def test_wide_and_narrow_paths_are_the_models(T, d, chunks, dtype):
    """d a multiple of 8: 16-byte loads and 8-byte code stores (with no guard where d is the
    tile's width); the same tile one element at a time (what a misaligned row gets) gives
    the same codes; the residual variant too."""
    rng = np.random.default_rng(d)
    xv = rng.standard_normal((T, d)).astype(np.float32)
    rv = rng.standard_normal((T, d)).astype(np.float32)
    wv = (1 + 0.1 * rng.standard_normal(d)).astype(np.float32)
    xv[0, 3] = 40  # an outlier
    if dtype == "bfloat16":
        x, r, w = bf16_bits(xv), bf16_bits(rv), bf16_bits(wv)
        xv, rv, wv = bf16_value(x), bf16_value(r), bf16_value(w)
    else:
        x, r, w = xv.astype(dtype), rv.astype(dtype), wv.astype(dtype)
        xv, rv, wv = x.astype(np.float32), r.astype(np.float32), w.astype(np.float32)
    tile = nq.tile_for(d, chunks)
    q = nq.rmsnorm_quant_reference(xv, wv, tile=tile)
    # full: every piece inside the row (d == tile.cols), the guards compiled out
    paths = [(True, True)] * (d == tile.cols) + [(True, False), (False, False)]
    for wide, full in paths:
        plain, add = nq.kernels(tile, wide, full)
        codes = cuda.device_array((T, d), np.uint8)
        scales = cuda.device_array(T, np.float32)
        plain[T, tile.threads](cuda.to_device(x.ravel()), cuda.to_device(w), np.float32(1e-6),
                               d, codes.reshape(T * d), scales)
        assert np.array_equal(codes.copy_to_host(), q.codes), (wide, full, tile)
        assert np.array_equal(scales.copy_to_host(), q.scale), (wide, full, tile)
    if chunks == 4:  # another tile than tile_for(d)'s: another order of the sums
        assert tile != nq.tile_for(d)
        c, s = nq.rmsnorm_quant(cuda.to_device(x), cuda.to_device(w), tile=tile)
        assert np.array_equal(c.copy_to_host(), q.codes)
        with pytest.raises(ValueError, match="tile must be"):
            nq.rmsnorm_quant(cuda.to_device(x), cuda.to_device(w), tile=nq.tile_for(d // 4))
    else:
        h, c, s = nq.add_rmsnorm_quant(*(cuda.to_device(a) for a in (x, r, w)))
        q2 = nq.rmsnorm_quant_reference(xv, wv, residual=rv)
        hv = h.copy_to_host()
        hv = bf16_value(hv) if dtype == "bfloat16" else hv.astype(np.float32)
        want = xv + rv
        want = bf16_value(bf16_bits(want)) if dtype == "bfloat16" else want.astype(dtype)
        assert np.array_equal(hv, np.asarray(want, np.float32))
        assert np.array_equal(c.copy_to_host(), q2.codes)
        assert np.array_equal(s.copy_to_host(), q2.scale)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_columns_past_d_stay_out_of_the_amax():
    """eps = 0 and a row whose squares underflow: r is inf, y inf; the zero padding past d
    (0 * inf = NaN) must not make the amax NaN: the scale is the model's, inf."""
    T, d = 2, 1032
    x = np.full((T, d), 1e-30, np.float32)
    x[1] = np.linspace(-2, 2, d)
    w = np.ones(d, np.float32)
    codes, scales = _launch(x, w, eps=0.0)
    q = nq.rmsnorm_quant_reference(x, w, eps=0.0)
    assert np.isinf(q.scale[0]) and np.array_equal(scales, q.scale)
    assert np.array_equal(codes, q.codes)


def test_the_staged_control_is_its_own_model():
    """The kernel the register-resident one replaced, kept as the benchmark's control: its
    codes are its model's (its sums in its order, rmsnorm_quant_reference(staged=True))."""
    T, d = 3, 301
    rng = np.random.default_rng(5)
    x = rng.standard_normal((T, d)).astype(np.float16)
    x[1, 4] = 200
    w = (1 + 0.1 * rng.standard_normal(d)).astype(np.float16)
    codes, scales = nq.rmsnorm_quant_staged(cuda.to_device(x), cuda.to_device(w))
    q = nq.rmsnorm_quant_reference(x, w, staged=True)
    assert np.array_equal(codes.copy_to_host(), q.codes)
    assert np.array_equal(scales.copy_to_host(), q.scale)


def test_bytes_fused_and_unfused():
    T, d, b = 3, 4096, 2
    n = T * d
    assert gf.traffic_bytes("rmsnorm_quant", T, d, b) == (3 * n * b + n + 4 * T, n * b + n + 4 * T)
    assert gf.traffic_bytes("add_rmsnorm_quant", T, d, b) == (5 * n * b + n + 4 * T,
                                                              3 * n * b + n + 4 * T)


def test_ptx_has_no_approximate_operation():
    """What makes the GPU's codes the model's: every float32 step rounded to nearest
    (sqrt.rn, div.rn or rcp.rn, fma.rn), no .approx, no float64, the e4m3 pack."""
    names = ("fp8_norm_quant", "fp8_add_norm_quant", "fp8_norm_quant_narrow",
             "fp8_norm_quant_staged")
    texts = ptx.ptx_many([(n, "bfloat16") for n in names], jobs=1)
    for name, text in texts.items():
        ops = ptx.opcodes(text)
        for op in ("sqrt.rn.f32", "fma.rn.f32", "div.rn.f32", "cvt.rn.satfinite.e4m3x2.f32"):
            assert op in ops, (name, op)
        bad = sorted(o for o in ops if "approx" in o or "ftz" in o or o.endswith(".f64"))
        assert not bad, (name, bad)
        ok, log = ptx.ptxas_log(text, "sm_90")
        assert ok, log[-2000:]
        assert " 0 bytes spill stores" in log and "0 bytes lmem" in log, (name, log)
    # the register-resident kernels: 16-byte loads, 8-byte code stores, warp shuffles
    for name in ("fp8_norm_quant/bfloat16", "fp8_add_norm_quant/bfloat16"):
        ops = ptx.opcodes(texts[name])
        assert {"ld.global.v4.u32", "st.global.v2.u32", "shfl.sync.bfly.b32",
                "max.NaN.f32"} <= ops, (name, sorted(ops))
        assert "st.global.u8" not in ops and "ld.global.u16" not in ops


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_gpu_codes_are_quantize_torchs_of_the_same_y(dtype):
    """On a GPU: the kernel's codes and scales are the model's, and torch's quantization
    (book.quantize.quantize_torch) of the model's y gives them too; with torch tensors in
    and out, at a model's width."""
    import torch

    from book.quantize import quantize_torch

    T, d = 64, 4096
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(T, d, device="cuda", generator=gen).to(getattr(torch, dtype))
    x[1] = 0
    x[2, 100] = 300
    w = (1 + 0.1 * torch.randn(d, device="cuda", generator=gen)).to(x.dtype)
    codes, scales = nq.rmsnorm_quant(x, w)
    torch.cuda.synchronize()
    q = nq.rmsnorm_quant_reference(x.float().cpu().numpy(), w.float().cpu().numpy())
    assert np.array_equal(codes.cpu().numpy(), q.codes)
    assert np.array_equal(scales.cpu().numpy(), q.scale)
    tq, ts = quantize_torch(torch.from_numpy(nq.rmsnorm_f32(x.float().cpu().numpy(),
                                                            w.float().cpu().numpy())).cuda())
    assert torch.equal(codes, tq.view(torch.uint8)) and torch.equal(scales, ts)
    # into a float8 tensor, as torch._scaled_mm takes it
    f8 = torch.empty(T, d, device="cuda", dtype=torch.float8_e4m3fn)
    nq.rmsnorm_quant(x, w, out=f8)
    assert torch.equal(f8.view(torch.uint8), codes)
    # the residual variant
    r = torch.randn(T, d, device="cuda", generator=gen).to(x.dtype)
    h, c2, s2 = nq.add_rmsnorm_quant(x, r, w)
    torch.cuda.synchronize()
    assert torch.equal(h, (x.float() + r.float()).to(x.dtype))
    q2 = nq.rmsnorm_quant_reference(x.float().cpu().numpy(), w.float().cpu().numpy(),
                                    residual=r.float().cpu().numpy())
    assert np.array_equal(c2.cpu().numpy(), q2.codes) and np.array_equal(s2.cpu().numpy(), q2.scale)
