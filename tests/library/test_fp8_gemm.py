"""The fused FP8 dual GEMM (book/kernels/gemms/fp8_gemm.py) without a GPU: its NumPy model (the
kernel tile by tile through the TMA, FP8 wgmma and accumulator models) against float64 at
whole and ragged shapes, both outputs; the staging tile's addresses; the tile's geometry;
the kernels compiled for sm_90a and assembled by ptxas with its warnings read. The kernel
against the model on a GPU: tests/library/test_fp8_gpu.py."""

import re

import numpy as np
import pytest

import book
from book import quantize as Q
from book.kernels.instructions import fp8 as F
from book.kernels.gemms import fp8_gemm as G
from book.kernels.instructions import hopper as H
from book.kernels.host import ptx


def quantized_layer(T, d, h, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((T, d)).astype(np.float32)
    wg = (rng.standard_normal((h, d)) / np.sqrt(d)).astype(np.float32)
    wu = (rng.standard_normal((h, d)) / np.sqrt(d)).astype(np.float32)
    return Q.per_token(x), Q.per_channel(wg), Q.per_channel(wu)


def reference(qx, qg, qu):
    """float64 of the layer the quantized operands describe (what the kernel computes, up
    to float32 accumulation and its fast exp)."""
    xv = qx.values()
    g, u = xv @ qg.values().T, xv @ qu.values().T
    return 0.5 * g * (1 + np.tanh(g / 2)) * u


def run_model(qx, qg, qu, **kw):
    return G.model(qx.codes, qx.scale, qg.codes, qg.scale, qu.codes, qu.scale, **kw)


@pytest.mark.parametrize("shape", [(128, 256, 128), (130, 256, 160), (5, 128, 16)])
def test_the_model_computes_the_layer_with_bf16_out(shape):
    qx, qg, qu = quantized_layer(*shape)
    got = run_model(qx, qg, qu).astype(np.float64)
    ref = reference(qx, qg, qu)
    assert got.shape == ref.shape and np.isfinite(got).all()
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 4e-3  # bfloat16's rounding


@pytest.mark.parametrize("shape", [(130, 256, 160)])
def test_the_model_stores_e4m3_codes_of_y_over_the_output_scale(shape):
    qx, qg, qu = quantized_layer(*shape, seed=1)
    ref = reference(qx, qg, qu)
    scale = float(np.abs(ref).max() / 448)
    codes = run_model(qx, qg, qu, out="e4m3", out_scale=scale)
    assert codes.dtype == np.uint8
    got = F.decode(codes) * scale
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 0.05  # e4m3's rounding
    small = run_model(qx, qg, qu, out="e4m3", out_scale=scale / 4)  # too small: saturates
    top = np.abs(F.decode(small)) == 448
    assert top.any() and (np.abs(ref[top]) > 0.9 * 448 * scale / 4).all()


def test_staging_offsets_land_every_pair_where_the_tma_store_reads_it():
    for out_elem, cols in ((2, 64), (1, 128)):
        tile = G.tile_for("e4m3" if out_elem == 1 else "bfloat16")
        seen = set()
        for r in range(64):
            for j in range(tile.bn // 8):
                for t in range(4):
                    off = G.staging_offset(r, j, t, out_elem)
                    box, inbox = divmod(off, 8192)
                    logical = H.swizzle(inbox, "128B")  # the swizzle is its own inverse
                    row, byte = divmod(logical, 128)
                    assert (row, box * cols + byte // out_elem) == (r, 8 * j + 2 * t)
                    seen.add(off)
        assert len(seen) == 64 * tile.bn // 2  # every pair of the tile, once


def test_the_fp8_tile_holds_the_bf16_tiles_bytes_with_twice_the_k():
    t, b = G.TILE.validate(), book.kernels.gemms.wgmma_gemm.TILE
    assert t.bk == 128 and t.wgmma_k == 32 and "m64n256k32" in t.describe()
    assert (t.a_bytes, t.b_bytes, t.stage_bytes) == (b.a_bytes, b.b_bytes, b.stage_bytes)
    assert G.TILE_E4M3_OUT.c_bytes == t.c_bytes // 2 == 8192
    assert G.shared_bytes(t) <= book.kernels.host.launch.MAX_SHARED
    with pytest.raises(ValueError, match="bk must be 128"):
        G.HopperTile(bk=64, elem=1).validate()


def test_the_simulator_is_told_what_runs_instead():
    if not book.gpu.SIMULATED:
        pytest.skip("the simulator's message")
    with pytest.raises(RuntimeError, match="simulator"):
        G.make_fp8_gemm(G.TILE, "bfloat16", "e4m3")


# ------------------------------------------------------------------ PTX and ptxas

KERNELS = ["fp8_gemm_bf16_out", "fp8_gemm_e4m3_out", "fp8_gemm_e5m2_in",
           "fp8_gemm_e4m3_out_single", "fp8_gemm_e4m3_out_inflight"]


@pytest.fixture(scope="module")
def texts():
    return ptx.ptx_many([(n, "bfloat16") for n in KERNELS], cc=H.ARCH)


@pytest.fixture(scope="module")
def logs(texts):
    return {k: ptx.ptxas_log(v) for k, v in texts.items()}


@pytest.mark.parametrize("name", KERNELS)
@pytest.mark.extended
def test_ptxas_assembles_the_fp8_gemm_without_serializing_or_waiting(logs, texts, name):
    ok, log = logs[f"{name}/bfloat16"]
    assert ok, log[-2000:]
    bad = re.findall(r"\((C75(?:09|10|15|17|08))\)[^\n]*", log)
    assert not bad, f"{name}: ptxas warned {bad}"
    # Here (nvJitLink with no GPU) ptxas ignores setmaxnreg (C7504) and keeps 168 registers
    # for every thread; the epilogue's scales then spill a few words. A bound, so that a
    # change which spills the accumulators fails; the GPU's own build is recorded by the
    # benchmark (benchmarks/fp8_bench.py)
    spills = [int(s) for s in re.findall(r"(\d+) bytes spill stores", log)]
    assert spills and max(spills) <= 64, log[-1500:]
    text = texts[f"{name}/bfloat16"]
    fmt = "e5m2" if "e5m2" in name else "e4m3"
    assert f"wgmma.mma_async.sync.aligned.m64n256k32.f32.{fmt}.{fmt}" in text
    assert "setmaxnreg.inc.sync.aligned.u32 232" in text and ".maxntid 384" in text
    assert "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group" in text


@pytest.mark.extended
def test_the_e4m3_output_is_stored_through_satfinite_conversions(texts):
    e4 = texts["fp8_gemm_e4m3_out/bfloat16"]
    assert e4.count("cvt.rn.satfinite.e4m3x2.f32") == 32  # 64 outputs per thread per tile
    assert "cvt.rn.bf16x2.f32" not in e4
    bf = texts["fp8_gemm_bf16_out/bfloat16"]
    assert bf.count("cvt.rn.bf16x2.f32") == 32 and "e4m3x2" not in bf
    assert "barrier.cluster" in e4 and "barrier.cluster" not in texts[
        "fp8_gemm_e4m3_out_single/bfloat16"]
