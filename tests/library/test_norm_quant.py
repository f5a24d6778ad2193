"""RMSNorm fused with the per-token e4m3 quantization (book/kernels/norm_quant.py): its codes
and scales are its NumPy model's bit for bit (book.quantize.per_token of the kernel's
float32 y) in the simulator, its PTX has no approximate operation for that to hold on a GPU
as well, and on a GPU torch's quantization of the same y gives the same codes."""

from fractions import Fraction

import numpy as np
import pytest

import book  # noqa: F401  (decides GPU or simulator before numba.cuda is imported)
from numba import cuda

from book.dtypes import bf16_bits, bf16_value
from book.kernels import glu_family as gf
from book.kernels.fma import fma32_model
from book.kernels import norm_quant as nq
from book.kernels import ptx

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
    with pytest.raises(ValueError, match="shared memory"):
        nq.rmsnorm_quant(cuda.device_array((1, nq.MAX_D + 1), np.float16),
                         cuda.device_array(nq.MAX_D + 1, np.float16))


def test_bytes_fused_and_unfused():
    T, d, b = 3, 4096, 2
    n = T * d
    assert gf.traffic_bytes("rmsnorm_quant", T, d, b) == (3 * n * b + n + 4 * T, n * b + n + 4 * T)
    assert gf.traffic_bytes("add_rmsnorm_quant", T, d, b) == (5 * n * b + n + 4 * T,
                                                              3 * n * b + n + 4 * T)


def test_ptx_has_no_approximate_operation():
    """What makes the GPU's codes the model's: every float32 step rounded to nearest
    (sqrt.rn, div.rn or rcp.rn, fma.rn), no .approx, no float64, the e4m3 pack."""
    texts = ptx.ptx_many([("fp8_norm_quant", "bfloat16"), ("fp8_add_norm_quant", "bfloat16")],
                         jobs=1)
    for name, text in texts.items():
        ops = ptx.opcodes(text)
        for op in ("sqrt.rn.f32", "fma.rn.f32", "div.rn.f32", "cvt.rn.satfinite.e4m3x2.f32"):
            assert op in ops, (name, op)
        bad = sorted(o for o in ops if "approx" in o or "ftz" in o or o.endswith(".f64"))
        assert not bad, (name, bad)
        ok, log = ptx.ptxas_log(text, "sm_90")
        assert ok, log[-2000:]


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
