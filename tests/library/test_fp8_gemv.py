"""The FP8 decode GEMV (book/kernels/gemv/fp8_gemv.py): without a GPU, its NumPy model (the
kernel block by block: the stream-K walk, TMA boxes, FP8 wgmma, the seams' pieces added in
block order, the epilogue thread by thread) against float64 and against the fused FP8
GEMM's model, its tile, and its PTX through ptxas for sm_90a; on a Hopper GPU (the GPU
lane), the kernel against the model, against float64 and against itself launch after
launch."""

import dataclasses
import re

import numpy as np
import pytest

import book
from book import quantize as Q
from book.kernels.instructions import fp8 as F
from book.kernels.gemms import fp8_gemm as G
from book.kernels.gemv import fp8_gemv as V
from book.kernels.instructions import hopper as H
from book.kernels.gemv.wgmma_gemv_tile import WgmmaGemvTile


def quantized(T, d, h, seed=0):
    x, wg, wu = Q.random_layer(T, d, h, seed=seed)
    return Q.per_token(x), Q.per_channel(wg), Q.per_channel(wu)


def codes(qx, qg, qu):
    return qx.codes, qx.scale, qg.codes, qg.scale, qu.codes, qu.scale


def reference(qx, qg, qu):
    xv = qx.values()
    g, u = xv @ qg.values().T, xv @ qu.values().T
    return 0.5 * g * (1 + np.tanh(g / 2)) * u


# ------------------------------------------------------------------ the model

@pytest.mark.parametrize("T,d,h,blocks", [(4, 512, 256, 3), (1, 256, 128, 1),
                                          (16, 1024, 192, 5), (5, 768, 160, 7),
                                          (9, 512, 64, 4)])
def test_the_model_computes_the_layer_and_matches_the_fused_gemms_model(T, d, h, blocks):
    """Seams and whole tiles (a few blocks over a few tiles): float64 of the quantized layer
    to bf16's rounding, and the fused GEMM's model (another walk of the same instructions)
    output for output."""
    q = quantized(T, d, h, seed=T + d)
    y = V.model(*codes(*q), blocks=blocks)
    ref = reference(*q)
    assert np.linalg.norm(y - ref) / np.linalg.norm(ref) < 4e-3
    assert np.array_equal(y, G.model(*codes(*q)))
    s = 2 * float(np.abs(ref).max()) / F.E4M3.max
    c = V.model(*codes(*q), out="e4m3", out_scale=s, blocks=blocks)
    assert c.dtype == np.uint8
    assert np.array_equal(c, G.model(*codes(*q), out="e4m3", out_scale=s))
    assert np.linalg.norm(F.decode(c) * s - ref) / np.linalg.norm(ref) < 0.05


def test_a_static_output_scale_saturates_in_the_model_as_satfinite_does():
    q = quantized(4, 256, 128, seed=1)
    ref = reference(*q)
    s = float(np.abs(ref).max()) / F.E4M3.max / 4  # four times too small
    c = V.model(*codes(*q), out="e4m3", out_scale=s, blocks=2)
    big = np.abs(ref) / s > 464
    assert big.any() and (c[big] & 0x7F == 0x7E).all()  # +-448, never NaN
    assert not (c & 0x7F == 0x7F).any()


# ------------------------------------------------------------------ the tile

def test_the_tile_is_the_bf16_gemvs_bytes_with_twice_the_k():
    t = V.gemv_tile(16, gpu="NVIDIA H200")
    b = WgmmaGemvTile(n=16, stages=4, kblocks=2)
    assert (t.w_bytes, t.x_bytes, t.stage_bytes, t.tx_bytes, t.layout) == (
        b.w_bytes, b.x_bytes, b.stage_bytes, b.tx_bytes, b.layout)
    assert t.stage_k == 2 * b.stage_k == 256
    assert (t.n, t.stages, t.kblocks, t.promotion, t.lead) == (16, 4, 2, "128B", 4)
    assert V.gemv_tile(1).n == 8 and V.gemv_tile(4).n == 8 and V.gemv_tile(32).kblocks == 1
    assert "m64n16k32 e4m3" in t.describe()
    # the default takes the measured fixes (the same bits: the GPU lane), the bare tile none
    bare = V.gemv_tile(16, gpu="NVIDIA H200", fixes=False)
    assert {k: getattr(t, k) for k in V.FIXES} == V.FIXES == {
        "preload": True, "short_settle": True, "pdl": True, "wide_settle": True}
    assert not any(getattr(bare, k) for k in V.FIXES)
    assert dataclasses.replace(bare, **V.FIXES) == t
    assert "dependent" in t.describe() and "dependent" not in bare.describe()
    with pytest.raises(ValueError):
        V.gemv_tile(33)
    for bad in ({"x_resident": True}, {"trace": True}, {"dynamic": 4}, {"cpasync": True},
                {"prefetch": 2}, {"n": 40}, {"tma_elem": 4}):
        with pytest.raises(ValueError):
            V.Fp8GemvTile(**{"n": 16, **bad}).validate()
    assert V.weight_bytes(4096, 14336) == 2 * 4096 * 14336
    assert dataclasses.replace(t, tma_elem=2).validate().stage_bytes == t.stage_bytes


def test_the_preloaded_scales_are_the_ones_each_output_reads():
    """``preload`` keeps a consumer thread's tokens' scales in slot ``2 (i >> 2) + (i & 1)``
    and its rows' in slot ``(i >> 1) & 1`` (the finisher: ``2 w + (i >> 1) & 1`` for consumer
    thread ``32 w + lane``); those slots name the (row, token) the epilogue's map gives
    accumulator i, for every thread, accumulator and N."""
    from book.kernels.gemv.wgmma_gemv_tile import output_of

    for n in (8, 16, 24, 32):
        for lt in range(128):
            for i in range(n // 2):
                r, t = output_of(lt, i)
                assert t == V.token_of(lt, 2 * (i >> 2) + (i & 1)) < n
                assert r == V.row_of(lt, (i >> 1) & 1) < V.BM
                w, lane = lt >> 5, lt & 31  # the finisher's lane and slots
                v = 2 * w + ((i >> 1) & 1)
                assert r == V.row_of(32 * (v >> 1) + lane, v & 1)
                assert t == V.token_of(lane, 2 * (i >> 2) + (i & 1))


def test_probes_are_named_refused_by_the_model_and_by_the_call_unless_asked_for():
    """A probe's output is not the layer's: the tile names it, the model has none, and the
    call runs one only with probe=True (refused before anything is planned or replayed)."""
    t = V.gemv_tile(16, gpu="NVIDIA H200", fixes=False)
    for p in V.PROBES:
        probe = dataclasses.replace(t, probe=p).validate()
        assert f"PROBE {p}" in probe.describe()
    with pytest.raises(ValueError, match="probe"):
        dataclasses.replace(t, probe="nothing").validate()
    fix = dataclasses.replace(t, preload=True, unguarded=True).validate()
    assert "scales preloaded" in fix.describe() and "unguarded" in fix.describe()
    q = quantized(4, 256, 128)
    with pytest.raises(ValueError, match="probe"):
        V.model(*codes(*q), tile=dataclasses.replace(V.gemv_tile(4, 256), probe="noscale"))
    with pytest.raises(ValueError, match="probe=True"):
        V.swiglu_fp8_gemv(*codes(*q), tile=dataclasses.replace(V.gemv_tile(4, fixes=False),
                                                               probe="stream"))
    # the fixes' model is the bare tile's: they change where the scales are read, not the sums
    base = V.model(*codes(*q), blocks=3, tile=V.gemv_tile(4, 256, fixes=False))
    assert np.array_equal(V.model(*codes(*q), blocks=3, tile=dataclasses.replace(
        V.gemv_tile(4, 256, fixes=False), preload=True, unguarded=True)), base)
    # short_settle: the seams' sums in the same order (model equal with seams: 3 blocks over
    # 2 row tiles), refused with the probes that settle no seam
    short = dataclasses.replace(V.gemv_tile(4, 1024, fixes=False), short_settle=True,
                                preload=True, pdl=True)
    assert "settled in short" in short.validate().describe()
    q = quantized(4, 1024, 128)
    assert np.array_equal(V.model(*codes(*q), blocks=3, tile=short),
                          V.model(*codes(*q), blocks=3, tile=V.gemv_tile(4, 1024, fixes=False)))
    for p in ("stream", "noseam"):
        with pytest.raises(ValueError, match="short_settle"):
            dataclasses.replace(t, short_settle=True, probe=p).validate()
    dataclasses.replace(t, short_settle=True, probe="noscale").validate()


def test_short_settles_slots_by_arithmetic_are_the_tables():
    """short_settle takes block c's slot of tile m as 2c for every block after the tile's
    first (its range starts inside the tile), where settle reads the table."""
    from book.kernels.gemms.stream_k import ENTRY, slot_of, stream_k

    for mt, nk, nb in ((224, 16, 132), (7, 4, 20), (5, 3, 15), (3, 8, 7), (64, 32, 132)):
        t = stream_k(mt, nk, nb)
        for m in range(mt):
            p0, p1 = t[ENTRY * nb + 2 * m], t[ENTRY * nb + 2 * m + 1]
            assert all(slot_of(c, m, t) == 2 * c for c in range(p0 + 1, p1 + 1))


def test_wide_settle_is_an_option_over_short_settle_refused_where_warps_2_and_3_are_taken():
    """``wide_settle`` (on in the default tile since it was timed) spreads short_settle's sums over
    warps 1-3: it needs short_settle, settles seams (not the probes that have none), and is
    refused with dynamic ranges (whose scheduler is warp 2), each with its reason; the model
    is the default tile's (the same sums in the same order)."""
    t = V.gemv_tile(16, gpu="NVIDIA H200")
    assert t.wide_settle and V.FIXES["wide_settle"]
    narrow = dataclasses.replace(t, wide_settle=False).validate()
    assert f"summed by {V.WIDE_WARPS} warps" in t.describe() and V.WIDE_WARPS == 3
    assert "summed by" not in narrow.describe()
    with pytest.raises(ValueError, match="needs short_settle"):
        dataclasses.replace(t, short_settle=False, wide_settle=True).validate()
    with pytest.raises(ValueError, match="scheduler is warp 2"):
        dataclasses.replace(t, dynamic=4, wide_settle=True).validate()
    for p in ("stream", "noseam"):
        with pytest.raises(ValueError, match=f"wide_settle settles seams: probe '{p}'"):
            dataclasses.replace(t, short_settle=False, wide_settle=True, probe=p).validate()
    dataclasses.replace(t, wide_settle=True, probe="noscale").validate()
    # without preload and pdl it stands (short_settle is all it needs)
    dataclasses.replace(V.gemv_tile(4, fixes=False), short_settle=True,
                        wide_settle=True).validate()
    q = quantized(4, 1024, 128)
    base = V.gemv_tile(4, 1024)
    assert np.array_equal(V.model(*codes(*q), blocks=3,
                                  tile=dataclasses.replace(base, wide_settle=True)),
                          V.model(*codes(*q), blocks=3, tile=base))


def test_in_the_simulator_the_kernel_is_refused_with_what_runs_instead():
    if not book.gpu.SIMULATED:
        pytest.skip("the simulator's message")
    with pytest.raises(RuntimeError, match="model"):
        V.make_fp8_gemv(V.gemv_tile(4), "bfloat16")


# ------------------------------------------------------------------ PTX, through ptxas for sm_90a

GEMVS = {"fp8_gemv_t1_bfloat16": (8, "bfloat16"), "fp8_gemv_t4_e4m3": (8, "e4m3"),
         "fp8_gemv_t16_e4m3": (16, "e4m3"), "fp8_gemv_t16_bfloat16": (16, "bfloat16"),
         "fp8_gemv_t16_e4m3_pdl": (16, "e4m3"),
         # the candidate fixes (Fp8GemvTile.preload, unguarded): the same assertions hold
         "fp8_gemv_t1_e4m3_preload": (8, "e4m3"), "fp8_gemv_t16_bfloat16_preload": (16, "bfloat16"),
         "fp8_gemv_t16_e4m3_unguarded": (16, "e4m3"),
         "fp8_gemv_t16_e4m3_preload_unguarded": (16, "e4m3"),
         "fp8_gemv_t1_bfloat16_preload_unguarded_pdl": (8, "bfloat16"),
         "fp8_gemv_t32_e4m3_preload_unguarded": (32, "e4m3"),
         # the third (Fp8GemvTile.short_settle), alone and with preload and pdl
         "fp8_gemv_t16_e4m3_short_settle": (16, "e4m3"),
         "fp8_gemv_t1_bfloat16_short_settle_preload_pdl": (8, "bfloat16"),
         "fp8_gemv_t32_e4m3_short_settle_preload_pdl": (32, "e4m3")}
#: the probes (Fp8GemvTile.probe), at T = 16 with e4m3 out: their own assertions
PROBE_PTX = {f"fp8_gemv_t16_e4m3_probe_{p}": p for p in V.PROBES}


@pytest.fixture(scope="module")
def texts():
    from book.kernels.host import ptx

    names = [*GEMVS, *PROBE_PTX]
    got = ptx.ptx_many([(n, "bfloat16") for n in names], cc=H.ARCH)
    return {n: got[f"{n}/bfloat16"] for n in names}


@pytest.mark.parametrize("name", sorted(GEMVS))
@pytest.mark.extended
def test_the_kernel_assembles_with_tma_and_unserialized_fp8_wgmma(texts, name):
    from book.kernels.host import ptx

    n, out = GEMVS[name]
    text = texts[name]
    ok, log = ptx.ptxas_log(text)
    assert ok, log[-2000:]
    # a division on the device would be a subroutine call, and a call serializes wgmma
    assert not re.findall(r"\((C75(?:09|10|15|17))\)", log), log[-1500:]
    assert re.findall(r"(\d+) bytes spill stores", log) == ["0"] and ".local" not in text
    assert f"wgmma.mma_async.sync.aligned.m64n{n}k32.f32.e4m3.e4m3" in text
    assert "div.s64" not in text and "div.u64" not in text
    # the copies with their L2 hints, the tiles' pieces counted with one atomic
    assert "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes" \
           ".L2::cache_hint" in text
    assert len(re.findall(r"atom\.global\.add", text)) == 1
    # the first stages' weights asked of L2 before the barriers are set up (lead, up to 16
    # tokens; none beyond)
    prefetch = "cp.async.bulk.prefetch.tensor.2d.L2.global.tile"
    if n <= 16:
        assert 0 <= text.find(prefetch) < text.find("mbarrier.init.shared::cta.b64")
    else:
        assert prefetch not in text
    # e4m3 out: satfinite conversions and byte stores, no bf16 rounding; bf16 out: the reverse
    sat = "cvt.rn.satfinite.e4m3x2.f32" in text
    assert sat == (out == "e4m3") and ("st.global.u8" in text) == (out == "e4m3")
    # a dependent launch: the kernel lets the next one in and waits for the one before (its
    # producer, the finisher warp and the consumers: three waits); none without the option
    pdl = name.endswith("_pdl")
    assert ("griddepcontrol.launch_dependents;" in text) == pdl
    assert text.count("griddepcontrol.wait;") == (3 if pdl else 0)
    # preload: no scale read per output, only a thread's tokens' (n / 4) and rows' (2) in the
    # consumer and in the finisher its tokens' and a seam's rows' (8 at once up to N = 16, 4
    # a round beyond); the default reads three an output
    if "_preload" in name:
        assert text.count("ld.global.f32") == 2 * (n // 4) + 2 * 2 + 2 * (8 if n <= 16 else 4)
    else:
        assert text.count("ld.global.f32") > 3 * n // 2
    # short_settle: one fence in the finisher (none after the counter's reset), the first two
    # pieces' loads (2 WR NA floats each) issued together beside the loop's for a third piece
    short = "_short_settle" in name
    assert text.count("membar.gl") == (1 if short else 2)
    wrna = (4 if n <= 16 else 2) * (n // 2)
    assert text.count("ld.global.cg.f32") == 2 * wrna * (3 if short else 1)


#: the seams' sums over warps 1-3 (Fp8GemvTile.wide_settle), with their N, output and whether
#: preload and pdl are on (their own fixture: compiled apart from the ones above)
WIDE_PTX = {f"fp8_gemv_t{T}_{o}_short_settle_preload_pdl_wide_settle": (n, o, True)
            for T, n, o in ((1, 8, "bfloat16"), (4, 8, "e4m3"), (16, 16, "e4m3"),
                            (16, 16, "bfloat16"), (32, 32, "e4m3"))}
WIDE_PTX["fp8_gemv_t16_e4m3_short_settle_wide_settle"] = (16, "e4m3", False)


@pytest.fixture(scope="module")
def wide_texts():
    from book.kernels.host import ptx

    got = ptx.ptx_many([(n, "bfloat16") for n in WIDE_PTX], cc=H.ARCH)
    return {n: got[f"{n}/bfloat16"] for n in WIDE_PTX}


@pytest.mark.parametrize("name", sorted(WIDE_PTX))
@pytest.mark.extended
def test_wide_settle_assembles_with_one_count_a_named_barrier_and_every_sum_in_registers(
        wide_texts, name):
    """The wide settle compiles for sm_90a with unserialized wgmma, no spill and no local
    array (each warp's pairs are constants: its sums stay in registers); the piece is still
    counted by one atomic after one fence, the decision crosses a named barrier (bar.sync on
    registers: its id and 96 threads), warps 2 and 3 wait for the kernel before with warp 1
    (one griddepcontrol.wait in the finisher's code, three in all), and the pieces' loads
    are settle_short's: 4 NA pairs, four loads each for the first two pieces and two for a
    third and on (a loop), shared among the three warps. With preload the finisher reads its lanes' tokens'
    scales and a seam's eight rows' (at every N)."""
    from book.kernels.host import ptx

    n, out, fixes = WIDE_PTX[name]
    text = wide_texts[name]
    ok, log = ptx.ptxas_log(text)
    assert ok, log[-2000:]
    assert not re.findall(r"\((C75(?:09|10|15|17))\)", log), log[-1500:]
    assert re.findall(r"(\d+) bytes spill stores", log) == ["0"] and ".local" not in text
    assert f"wgmma.mma_async.sync.aligned.m64n{n}k32.f32.e4m3.e4m3" in text
    assert "div.s64" not in text and "div.u64" not in text
    assert len(re.findall(r"atom\.global\.add", text)) == 1
    assert text.count("membar.gl") == 1
    assert re.search(r"bar\.sync %r\d+, %r\d+;", text) is not None
    assert text.count("griddepcontrol.wait;") == (3 if fixes else 0)
    # (the loop over a third piece and on may be unrolled: at N = 8 NVVM copies it thrice)
    na, cg = n // 2, text.count("ld.global.cg.f32")
    assert cg >= 24 * na and (cg - 16 * na) % (8 * na) == 0
    if fixes:
        assert text.count("ld.global.f32") == 2 * (n // 4) + 2 * 2 + 2 * 8
    sat = "cvt.rn.satfinite.e4m3x2.f32" in text
    assert sat == (out == "e4m3") and ("st.global.u8" in text) == (out == "e4m3")


@pytest.mark.parametrize("name", sorted(PROBE_PTX))
@pytest.mark.extended
def test_the_probes_assemble_and_leave_out_what_they_name(texts, name):
    """Each probe compiles for sm_90a with no spill and unserialized wgmma, and its PTX lacks
    exactly the part it is named for: the wgmma (stream, nowgmma: a named barrier of the
    consumer warpgroup hands each stage back instead), the seams' atomic, the scales' loads,
    the tokens' copies (a third of the default's TMA copies) or the epilogue's stores
    (stream)."""
    from book.kernels.host import ptx

    p = PROBE_PTX[name]
    text = texts[name]
    ok, log = ptx.ptxas_log(text)
    assert ok, log[-2000:]
    assert not re.findall(r"\((C75(?:09|10|15|17))\)", log), log[-1500:]
    assert re.findall(r"(\d+) bytes spill stores", log) == ["0"] and ".local" not in text
    wgmma = "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3" in text
    assert wgmma == (p not in ("stream", "nowgmma"))
    assert (re.search(r"bar\.sync %r\d+, %r\d+;", text) is not None) == (not wgmma)
    assert len(re.findall(r"atom\.global\.add", text)) == (0 if p in ("stream", "noseam") else 1)
    assert ("ld.global.f32" in text) == (p not in ("stream", "noscale"))
    copies = "cp.async.bulk.tensor.2d"
    ratio = text.count(copies) / texts["fp8_gemv_t16_e4m3"].count(copies)
    assert ratio == (2 / 3 if p == "nox" else 1)
    assert ("st.global.u8" in text) == (p != "stream")


# ------------------------------------------------------------------ on a Hopper GPU

def _torch_hopper():
    info = book.gpu.device_info()
    if info is None or tuple(info.compute_capability)[:2] != (9, 0):
        pytest.skip("needs a Hopper GPU (sm_90)")
    import torch

    return torch


def _on_gpu(torch, q):
    return [torch.from_numpy(np.ascontiguousarray(a)).cuda() for a in codes(*q)]


def _grid(T, d, h):
    from book.kernels.host.launch import sm_count

    tile = V.gemv_tile(T, d)
    return min(sm_count(), -(-h // V.BM) * -(-d // tile.stage_k))


@pytest.mark.gpu
@pytest.mark.parametrize("T,d,h", [(1, 512, 256), (4, 1024, 384), (16, 768, 160), (5, 256, 64),
                                   (16, 4096, 1024)])
@pytest.mark.parametrize("out", ["bfloat16", "e4m3"])
def test_on_a_hopper_gpu_the_kernel_matches_its_model(T, d, h, out):
    """The same walk, seams and epilogue: bf16 out within bf16's rounding of the model; e4m3
    codes mostly equal to the model's and near it as a whole (the tensor cores' FP8 sums keep
    fewer bits than the model's float32, so near zero, where e4m3's steps are finest, a code
    may be several steps off: seen on the H200 at 87e719f, 0.125 against 0.1015625), and one
    code apart at most from the same kernel's bf16 output requantized (the same sums)."""
    torch = _torch_hopper()
    q = quantized(T, d, h, seed=T * d + h)
    ref = reference(*q)
    s = 2 * float(np.abs(ref).max()) / F.E4M3.max if out == "e4m3" else 1.0
    got = V.swiglu_fp8_gemv(*_on_gpu(torch, q), out_dtype=out, out_scale=s)
    want = V.model(*codes(*q), out=out, out_scale=s, blocks=_grid(T, d, h))
    if out == "e4m3":
        g = got.view(torch.uint8).cpu().numpy()
        gv, wv = F.decode(g), F.decode(want)
        worst = [(tuple(int(k) for k in i), float(gv[tuple(i)]), float(wv[tuple(i)]))
                 for i in np.argwhere(np.abs(gv - wv) > np.abs(wv) * 2.0 ** -3 + 2.0 ** -9)[:6]]
        assert np.linalg.norm(gv - wv) / np.linalg.norm(wv) < 0.02, worst
        assert (g != want).mean() < 0.05, worst
        o16 = V.swiglu_fp8_gemv(*_on_gpu(torch, q), out_dtype="bfloat16")
        again = F.decode(F.encode(o16.float().cpu().numpy() * np.float32(1 / s)))
        step = np.abs(again) * 2.0 ** -3 + 2.0 ** -9  # one code: normal or subnormal
        off = np.abs(gv - again) > step
        assert not off.any(), [(float(gv[i]), float(again[i])) for i in zip(*np.nonzero(off))][:6]
    else:
        g = got.float().cpu().numpy()
        assert np.linalg.norm(g - want) / np.linalg.norm(want) < 4e-3


@pytest.mark.gpu
@pytest.mark.parametrize("T", [1, 4, 16])
def test_on_a_hopper_gpu_the_course_shape_against_float64_and_the_fused_gemm(T):
    torch = _torch_hopper()
    d, h = 4096, 14336
    gen = torch.Generator(device="cuda").manual_seed(T)
    x = torch.randn(T, d, device="cuda", generator=gen)
    wg = torch.randn(h, d, device="cuda", generator=gen) / d ** 0.5
    wu = torch.randn(h, d, device="cuda", generator=gen) / d ** 0.5
    (xq, sx), (gq, sg), (uq, su) = (Q.quantize_torch(a) for a in (x, wg, wu))
    xv = xq.double() * sx.double()[:, None]
    ref = (torch.nn.functional.silu(xv @ (gq.double() * sg.double()[:, None]).T)
           * (xv @ (uq.double() * su.double()[:, None]).T))
    o = torch.full((T, h), float("nan"), device="cuda", dtype=torch.bfloat16)
    V.swiglu_fp8_gemv(xq, sx, gq, sg, uq, su, o)
    assert not o.isnan().any()
    assert float((o.double() - ref).norm() / ref.norm()) < 1e-2
    fused = G.swiglu_fp8(xq, sx, gq, sg, uq, su)  # the prefill kernel on the same inputs
    assert float((o.double() - fused.double()).norm() / fused.double().norm()) < 1e-2
    scale = float(ref.abs().max() / 448) * 2
    o8 = torch.empty((T, h), device="cuda", dtype=torch.float8_e4m3fn)
    V.swiglu_fp8_gemv(xq, sx, gq, sg, uq, su, o8, out_dtype="e4m3", out_scale=scale)
    v = torch.from_numpy(F.decode(o8.view(torch.uint8).cpu().numpy())).cuda() * scale
    assert float((v - ref).norm() / ref.norm()) < 0.05
    # the same kernel's bf16 output, requantized here: one code apart at most
    again = F.decode(F.encode(o.float().cpu().numpy() * np.float32(1 / scale)))
    got = F.decode(o8.view(torch.uint8).cpu().numpy())
    assert (np.abs(got - again) <= np.abs(again) * 2.0 ** -3 + 2.0 ** -9).all()


@pytest.mark.gpu
def test_on_a_hopper_gpu_launches_repeat_bit_for_bit_and_plans_hold_addresses():
    """The seams' counters are left at zero, so every launch (a planned replay too) adds the
    same pieces in the same order; a plan keeps addresses, never values."""
    torch = _torch_hopper()
    from book.kernels.host.plan import planned

    pc = planned("swiglu_fp8_gemv", ("out_dtype", "bfloat16"), ("inv", 1.0), ("fmt", "e4m3"),
                 ("tile", None))  # the plain call's plans

    q = quantized(16, 4096, 2048, seed=3)
    args = _on_gpu(torch, q)
    o = torch.empty(16, 2048, device="cuda", dtype=torch.bfloat16)
    V.swiglu_fp8_gemv(*args, o)
    first = o.clone()
    n, fast = len(pc._plans), pc.stats["fast"]
    for _ in range(3):
        o.fill_(float("nan"))
        V.swiglu_fp8_gemv(*args, o)
        assert torch.equal(o, first)
    assert len(pc._plans) == n and pc.stats["fast"] == fast + 3
    args[1].mul_(2)  # sx doubled: gate and up doubled
    V.swiglu_fp8_gemv(*args, o)
    assert not torch.equal(o, first)


@pytest.mark.gpu
def test_on_a_hopper_gpu_bad_inputs_are_refused():
    torch = _torch_hopper()
    q = quantized(4, 256, 128)
    a = _on_gpu(torch, q)
    with pytest.raises(ValueError, match="tokens"):
        big = quantized(40, 256, 128)
        V.swiglu_fp8_gemv(*_on_gpu(torch, big))
    with pytest.raises(ValueError, match="float32"):
        V.swiglu_fp8_gemv(a[0], a[1].double(), *a[2:])
    with pytest.raises(ValueError, match="out_dtype"):
        V.swiglu_fp8_gemv(*a, out_dtype="float16")


@pytest.mark.gpu
def test_on_a_hopper_gpu_a_dependent_launch_gives_the_same_bits_back_to_back():
    """A programmatic dependent launch (``Fp8GemvTile.pdl``) starts while the call before it
    ends and shares its out, its seams' workspace and its counters: calls back to back on
    one stream, each one's tokens written by a torch kernel just before it and every other
    one into the same out, give the bits of the same tile launched plainly, call by call."""
    torch = _torch_hopper()
    T, d, h = 16, 4096, 4096
    q = quantized(T, d, h, seed=11)
    xq, sx, gq, sg, uq, su = _on_gpu(torch, q)
    plain = V.gemv_tile(T, d, fixes=False)
    dep = dataclasses.replace(plain, pdl=True)
    xs = [xq.clone() for _ in range(2)]
    flips = [torch.roll(xq, k, dims=1) for k in (1, 2)]

    def chain(tile):
        outs = [torch.empty(T, h, device="cuda", dtype=torch.bfloat16) for _ in range(2)]
        got = []
        for i in range(24):
            xs[i % 2].copy_(flips[i % 2] if i % 3 else xq)   # the kernel before writes x
            V.swiglu_fp8_gemv(xs[i % 2], sx, gq, sg, uq, su, outs[i % 2], tile=tile)
            if i % 4 == 3:
                got.append([o.clone() for o in outs])
        torch.cuda.synchronize()
        return got

    want, got = chain(plain), chain(dep)
    for a, b in zip(want, got):
        assert all(torch.equal(x, y) for x, y in zip(a, b))


#: the fixes (Fp8GemvTile.preload, unguarded, short_settle; the default tile's: V.FIXES) over the
#: bare tile, with a T and an output each: tokens
#: past T (1, 5) and rows past h (the shapes below) are where their clamped reads differ
#: (four kernels to compile: the GPU lane's runbook has little time for more)
FIXES = [({"preload": True}, 1, "e4m3"), ({"unguarded": True}, 5, "e4m3"),
         ({"preload": True, "unguarded": True}, 16, "e4m3"),
         ({"preload": True, "unguarded": True, "pdl": True}, 16, "bfloat16"),
         ({"short_settle": True}, 5, "e4m3"),
         ({"short_settle": True, "preload": True, "pdl": True}, 16, "bfloat16"),
         (V.FIXES, 4, "e4m3")]


def _bits(torch, o):
    return o.view(torch.uint8 if o.element_size() == 1 else torch.int16)


@pytest.mark.gpu
@pytest.mark.parametrize("change,T,out", FIXES)
def test_on_a_hopper_gpu_the_candidate_fixes_give_the_defaults_bits(change, T, out):
    """A fix reads the same scales earlier (or for every accumulator) and multiplies them in
    the same order: its output is the bare tile's bit for bit, at seams (more blocks than
    row tiles), whole tiles and a ragged last row tile; so is the default tile's (its
    FIXES)."""
    torch = _torch_hopper()
    from book.kernels.host.launch import device_name

    for d, h in ((768, 160), (4096, 1024), (512, 12784)):
        q = quantized(T, d, h, seed=T + d + h)
        args = _on_gpu(torch, q)
        s = 2 * float(np.abs(reference(*q)).max()) / F.E4M3.max if out == "e4m3" else 1.0
        bare = V.gemv_tile(T, d, device_name(), fixes=False)
        want = V.swiglu_fp8_gemv(*args, out_dtype=out, out_scale=s, tile=bare)
        if change == V.FIXES:  # the default call
            assert V.gemv_tile(T, d, device_name()) == dataclasses.replace(bare, **change)
            got = V.swiglu_fp8_gemv(*args, out_dtype=out, out_scale=s)
            assert torch.equal(_bits(torch, got), _bits(torch, want)), (change, T, d, h)
        tile = dataclasses.replace(bare, **change)
        got = V.swiglu_fp8_gemv(*args, out_dtype=out, out_scale=s, tile=tile)
        assert torch.equal(_bits(torch, got), _bits(torch, want)), (change, T, d, h)


@pytest.mark.gpu
@pytest.mark.parametrize("probe", ["stream", "nowgmma"])
def test_on_a_hopper_gpu_the_probes_without_wgmma_finish_and_leave_the_counters_at_zero(probe):
    """The two probes whose consumers hand stages back without wgmma (a named barrier
    instead) run to their end, launch after launch, and leave the seams' counters at zero:
    the default tile on the same workspace after them gives its bits again (as the sweep
    times them in turn)."""
    torch = _torch_hopper()
    from book.kernels.host.launch import device_name

    T, d, h = 16, 4096, 1024
    args = _on_gpu(torch, quantized(T, d, h, seed=5))
    o = torch.empty(T, h, device="cuda", dtype=torch.bfloat16)
    V.swiglu_fp8_gemv(*args, o)
    first = o.clone()
    tile = dataclasses.replace(V.gemv_tile(T, d, device_name(), fixes=False), probe=probe)
    p = torch.empty_like(o)
    for _ in range(3):
        V.swiglu_fp8_gemv(*args, p, tile=tile, probe=True)
    torch.cuda.synchronize()
    o.fill_(float("nan"))
    V.swiglu_fp8_gemv(*args, o)
    assert torch.equal(o, first)


def _layer_torch(torch, T, d, h, seed):
    """x, wg, wu drawn on the GPU and quantized there (per token, per channel): the call's
    six arguments, and the e4m3 output scale that keeps every output within range."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(T, d, device="cuda", generator=gen)
    wg = torch.randn(h, d, device="cuda", generator=gen) / d ** 0.5
    wu = torch.randn(h, d, device="cuda", generator=gen) / d ** 0.5
    (xq, sx), (gq, sg), (uq, su) = (Q.quantize_torch(a) for a in (x, wg, wu))
    xv = xq.float() * sx[:, None]
    y = (torch.nn.functional.silu(xv @ (gq.float() * sg[:, None]).T)
         * (xv @ (uq.float() * su[:, None]).T))
    return [xq, sx, gq, sg, uq, su], 2 * float(y.abs().max()) / F.E4M3.max


@pytest.mark.gpu
@pytest.mark.parametrize("pdl", [True, False])
@pytest.mark.parametrize("out", ["bfloat16", "e4m3"])
@pytest.mark.parametrize("T", [1, 4, 5, 16])
def test_on_a_hopper_gpu_wide_settle_gives_the_default_tiles_bits(T, out, pdl):
    """The seams summed by warps 1-3 (``Fp8GemvTile.wide_settle``) store the default tile's
    bits (the same sums in the same order), with and without a dependent launch: on the
    layer's shape (every block's range cut in one or two tiles), on one whose tiles have three
    pieces (9 blocks over 3 row tiles of 3 stages) and on a ragged last row tile; twice in a
    row, every output written each time (out filled with NaN before), so the counters are
    left at zero."""
    torch = _torch_hopper()
    from book.kernels.host.launch import device_name

    for d, h in ((4096, 14336), (768, 160), (512, 12784)):
        args, s = _layer_torch(torch, T, d, h, seed=T + d + h)
        s = s if out == "e4m3" else 1.0
        one = dataclasses.replace(V.gemv_tile(T, d, device_name()), pdl=pdl, wide_settle=False)
        wide = dataclasses.replace(one, wide_settle=True)
        dt = torch.float8_e4m3fn if out == "e4m3" else torch.bfloat16
        want = torch.empty(T, h, device="cuda", dtype=dt)
        V.swiglu_fp8_gemv(*args, want, out_dtype=out, out_scale=s, tile=one)
        for _ in range(2):
            got = torch.empty(T, h, device="cuda", dtype=dt)
            _bits(torch, got).fill_(255 if out == "e4m3" else -1)  # NaN in both formats
            V.swiglu_fp8_gemv(*args, got, out_dtype=out, out_scale=s, tile=wide)
            assert torch.equal(_bits(torch, got), _bits(torch, want)), (T, out, pdl, d, h)
