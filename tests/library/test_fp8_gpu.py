"""The eight-bit models of book/kernels/instructions/fp8.py held to a Hopper GPU (GPU lane: `make
test-gpu`): the conversions bit for bit, FP8 wgmma exactly, torch's quantization codes the
models' on the GPU, and the fused FP8 dual GEMM (book/kernels/gemms/fp8_gemm.py) against its NumPy
model and against float64, whole tiles and edges, both outputs."""

import numpy as np
import pytest

import book  # noqa: F401
from book import quantize as Q
from book.kernels.instructions import fp8 as F
from book.kernels.host import plan
from book.kernels.instructions import hopper as H

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def hopper():
    from numba import cuda

    cc = tuple(cuda.get_current_device().compute_capability)
    if cc != (9, 0):
        pytest.skip(f"needs a Hopper GPU (sm_90), this one is sm_{cc[0]}{cc[1]}")
    import torch

    return torch


def conversion_inputs(fmt):
    """Every tie and a hair either side, every value, the specials, random magnitudes."""
    v = F.values(fmt)
    pos = v[:128][np.isfinite(v[:128])]
    mids = (pos[:-1] + pos[1:]) / 2
    rng = np.random.default_rng(11)
    x = np.concatenate([
        pos, mids, np.nextafter(mids.astype(np.float32), np.float32(np.inf)),
        np.nextafter(mids.astype(np.float32), np.float32(0)),
        [0.0, np.inf, np.nan, 1e-40, 1e30, F.FORMATS[fmt].max * 1.1, 2.0 ** -30],
        np.exp2(rng.uniform(-24, 20, 20_000)), rng.standard_normal(20_000) * 100]).astype(
        np.float32)
    x = np.concatenate([x, -x])
    return x, rng.permutation(x)


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_pack_matches_the_model_bit_for_bit(hopper, fmt):
    from book.kernels.probes import fp8_probes as P

    hi, lo = conversion_inputs(fmt)
    got = P.pack(hi, lo, fmt)
    want = F.pack_model(hi, lo, fmt)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, [(float(hi[i]), float(lo[i]), hex(got[i]), hex(want[i]))
                           for i in bad[:8]]


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_widen_matches_the_model_for_every_pair_of_bytes(hopper, fmt):
    from book.kernels.probes import fp8_probes as P

    b = np.arange(65536, dtype=np.uint16)
    got, want = P.widen(b, fmt), F.widen_model(b, fmt)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, [(hex(b[i]), hex(got[i]), hex(want[i])) for i in bad[:8]]


@pytest.mark.parametrize("fmt,n", [("e4m3", 64), ("e4m3", 256), ("e5m2", 128)])
@pytest.mark.parametrize("mode,kstep", [("none", 0), ("128B", 0), ("128B", 3)])
def test_one_fp8_wgmma_matches_the_model_and_the_product(hopper, fmt, n, mode, kstep):
    from book.kernels.probes import hopper_probes as P

    rng = np.random.default_rng(n + kstep)
    A = rng.integers(-8, 9, size=(64, 128)).astype(np.float32)
    B = rng.integers(-8, 9, size=(n, 128)).astype(np.float32)
    img = np.zeros(64 * 128 + n * 128, dtype=np.uint8)
    b0 = 64 * 128
    if mode == "none":
        da, db = H.descriptor(0, 128, 256, "none"), H.descriptor(b0, 128, 256, "none")
        for M, d in ((A[:, :32], da), (B[:, :32], db)):
            img[H.operand_addresses(d, M.shape[0], k=32, itemsize=1)] = F.encode(M, fmt)
    else:
        img[:b0] = H.tma_box(F.encode(A, fmt), 0, 0, (128, 64))
        img[b0:] = H.tma_box(F.encode(B, fmt), 0, 0, (128, n))
        da = H.descriptor(32 * kstep, 16, 1024, mode)
        db = H.descriptor(b0 + 32 * kstep, 16, 1024, mode)
    got = P.wgmma_once(img, da, db, n, fmt)
    placed = np.zeros((64, n), dtype=np.float32)
    for th in range(128):
        for i in range(n // 2):
            placed[H.d_coords(th, i)] = got[th, i]
    ks = slice(32 * kstep, 32 * kstep + 32)
    assert np.array_equal(placed, F.wgmma_model(img, da, db, n, fmt))
    assert np.array_equal(placed, A[:, ks] @ B[:, ks].T)


@pytest.mark.parametrize("scheme", ["tensor", "row"])  # quantize_torch's (not "block")
def test_torchs_quantization_on_the_gpu_gives_the_models_codes(hopper, scheme):
    torch = hopper
    x = np.random.default_rng(2).standard_normal((300, 512)).astype(np.float32) * 3
    codes, scale = Q.quantize_torch(torch.from_numpy(x).cuda(), scheme)
    q = Q.quantize(x, Q.scales_for(x, scheme))
    assert np.array_equal(codes.view(torch.uint8).cpu().numpy(), q.codes)
    assert np.array_equal(scale.cpu().numpy(), q.scale)


def layer(torch, T, d, h, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(T, d, device="cuda", generator=gen)
    wg = torch.randn(h, d, device="cuda", generator=gen) / d ** 0.5
    wu = torch.randn(h, d, device="cuda", generator=gen) / d ** 0.5
    (xq, sx), (gq, sg), (uq, su) = (Q.quantize_torch(a) for a in (x, wg, wu))
    return xq, sx, gq, sg, uq, su


def reference(torch, xq, sx, gq, sg, uq, su):
    xv = xq.double() * sx.double()[:, None]
    g = xv @ (gq.double() * sg.double()[:, None]).T
    u = xv @ (uq.double() * su.double()[:, None]).T
    return torch.nn.functional.silu(g) * u


def codes(t):
    import torch

    return t.view(torch.uint8).cpu().numpy()


@pytest.mark.parametrize("shape", [(130, 256, 160), (64, 128, 128)])
@pytest.mark.parametrize("out", ["bfloat16", "e4m3"])
def test_the_fp8_gemm_matches_its_model(hopper, shape, out):
    from book.kernels.gemms import fp8_gemm as G

    torch = hopper
    xq, sx, gq, sg, uq, su = layer(torch, *shape, seed=sum(shape))
    ref = reference(torch, xq, sx, gq, sg, uq, su)
    scale = float(ref.abs().max() / 448) if out == "e4m3" else 1.0
    got = G.swiglu_fp8(xq, sx, gq, sg, uq, su, out_dtype=out, out_scale=scale)
    want = G.model(codes(xq), sx.cpu().numpy(), codes(gq), sg.cpu().numpy(), codes(uq),
                   su.cpu().numpy(), out=out, out_scale=scale)
    if out == "e4m3":
        # Against the model: the tensor cores' FP8 sums are not float32's (they keep fewer
        # bits), so near zero, where e4m3's steps are finest, codes may differ by more
        # than one; the values as a whole agree to e4m3's rounding.
        g, w = F.decode(codes(got)), F.decode(want)
        worst = np.argsort(-np.abs(g - w).ravel())[:6]
        detail = [(int(i // shape[2]), int(i % shape[2]), float(g.flat[i]), float(w.flat[i]),
                   float(ref.flatten()[int(i)] / scale)) for i in worst]
        assert np.linalg.norm(g - w) / np.linalg.norm(w) < 0.02, detail
        assert (g != w).mean() < 0.05, ((g != w).mean(), detail)
        # Against the same kernel's bf16 output, requantized here: the same accumulators,
        # so at most one code apart (bf16's rounding before the requantization)
        o16 = G.swiglu_fp8(xq, sx, gq, sg, uq, su, out_dtype="bfloat16")
        again = F.decode(F.encode(o16.float().cpu().numpy() * np.float32(1 / scale)))
        step = np.abs(again) * 2.0 ** -3 + 2.0 ** -9  # one code: normal or subnormal
        off = np.abs(g - again) > step
        assert not off.any(), [(float(g[i]), float(again[i])) for i in zip(*np.nonzero(off))][:6]
    else:
        g = got.float().cpu().numpy()
        assert np.linalg.norm(g - want) / np.linalg.norm(want) < 2e-3


@pytest.mark.parametrize("shape", [(256, 512, 1024), (200, 528, 1040), (1, 4096, 1024),
                                   (130, 4096, 14336)])
@pytest.mark.parametrize("tile", [{}, {"cluster": 1}, {"inflight": 1}])
def test_the_fp8_gemm_against_float64(hopper, shape, tile):
    from book.kernels.gemms import fp8_gemm as G

    torch = hopper
    T, d, h = shape
    xq, sx, gq, sg, uq, su = layer(torch, T, d, h, seed=T + d + h)
    ref = reference(torch, xq, sx, gq, sg, uq, su)
    o = torch.full((T, h), float("nan"), device="cuda", dtype=torch.bfloat16)
    G.swiglu_fp8(xq, sx, gq, sg, uq, su, o, tile=G.tile_for("bfloat16", **tile))
    assert not o.isnan().any()
    assert float((o.double() - ref).norm() / ref.norm()) < 1e-2
    scale = float(ref.abs().max() / 448)
    o8 = torch.full((T, h), float("nan"), device="cuda").to(torch.float8_e4m3fn)
    G.swiglu_fp8(xq, sx, gq, sg, uq, su, o8, out_dtype="e4m3", out_scale=scale,
                 tile=G.tile_for("e4m3", **tile))
    v = torch.from_numpy(F.decode(codes(o8))).cuda() * scale
    assert not v.isnan().any()
    assert float((v - ref).norm() / ref.norm()) < 0.05


def test_e5m2_operands_and_a_reused_plan(hopper):
    from book.kernels.gemms import fp8_gemm as G

    torch = hopper
    T, d, h = 200, 512, 1024
    gen = torch.Generator(device="cuda").manual_seed(5)
    x = torch.randn(T, d, device="cuda", generator=gen)
    w = [torch.randn(h, d, device="cuda", generator=gen) / d ** 0.5 for _ in range(2)]
    (xq, sx), (gq, sg), (uq, su) = (Q.quantize_torch(a, fmt="e5m2") for a in (x, *w))
    ref = reference(torch, xq, sx, gq, sg, uq, su)
    o = torch.empty(T, h, device="cuda", dtype=torch.bfloat16)
    G.swiglu_fp8(xq, sx, gq, sg, uq, su, o, fmt="e5m2")
    assert float((o.double() - ref).norm() / ref.norm()) < 1e-2
    pc = plan.planned("swiglu_fp8", ("out_dtype", "bfloat16"), ("inv", 1.0), ("fmt", "e5m2"),
                      ("tile", None))  # the plain call's plans (book.kernels.host.plan)
    n, fast = len(pc._plans), pc.stats["fast"]
    first = o.clone()
    o.fill_(float("nan"))
    G.swiglu_fp8(xq, sx, gq, sg, uq, su, o, fmt="e5m2")
    assert len(pc._plans) == n and pc.stats["fast"] == fast + 1 and torch.equal(o, first)
    sx.mul_(2)  # the plan holds addresses, never values
    G.swiglu_fp8(xq, sx, gq, sg, uq, su, o, fmt="e5m2")
    assert not torch.equal(o, first)
