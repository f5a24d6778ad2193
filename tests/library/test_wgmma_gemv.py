"""The Hopper decode GEMV (book.kernels.gemv.wgmma_gemv): its stream-K table and tile on the CPU,
its PTX through ptxas for sm_90a (tests/library/test_hopper.py), and on an H100 its results
against float64, its seams, its counters left at zero, and the planned call; on a Hopper GPU
the default tile's fixes (a dependent launch, the seams settled in short) against the bare
tile bit for bit, back to back and replayed from a CUDA graph."""

import dataclasses

import numpy as np
import pytest

import book
from book.kernels.instructions import hopper as H
from book.kernels.gemms import stream_k as SK
from book.kernels.gemv import wgmma_gemv as W

from decode_cases import close_torch, torch_case


# ------------------------------------------------------------------ stream-K, on the CPU

SHAPES = [(224, 64, 132), (224, 64, 264), (3, 5, 15), (3, 5, 14), (1, 1, 1), (16, 3, 7),
          (7, 64, 132), (225, 63, 131), (264, 64, 132), (133, 2, 132), (400, 64, 132)]


@pytest.mark.parametrize("mt,nk,blocks", SHAPES)
def test_every_iteration_is_read_by_exactly_one_block(mt, nk, blocks):
    table = SK.stream_k(mt, nk, blocks)
    seen = np.zeros((mt, nk), dtype=int)
    lengths = []
    for b in range(blocks):
        steps = SK.walk(table, b, nk)
        lengths.append(len(steps))
        for m, kb in steps:
            seen[m, kb] += 1
    assert (seen == 1).all()
    assert max(lengths) - min(lengths) <= 1  # every SM reads the same bytes, +- one k-block


@pytest.mark.parametrize("mt,nk,blocks", SHAPES)
def test_whole_tiles_come_last_and_every_range_reads_something(mt, nk, blocks):
    shared, whole = SK.split(mt, nk, blocks)
    assert shared * nk >= blocks  # no block without a piece to share (it would never arrive)
    assert shared + whole * blocks == mt
    table = SK.stream_k(mt, nk, blocks)
    for b in range(blocks):
        steps = SK.walk(table, b, nk)
        n = int(table[SK.ENTRY * b + 2])
        assert n >= 1
        assert all(m < shared for m, _ in steps[:n])  # the range: the shared tiles
        assert steps[n:] == [(m, k) for m in range(shared + b * whole, shared + (b + 1) * whole)
                             for k in range(nk)]  # then the block's own tiles, uncut


@pytest.mark.parametrize("mt,nk,blocks", SHAPES)
def test_a_tile_cut_at_a_seam_knows_its_pieces_and_each_has_its_own_slot(mt, nk, blocks):
    table = SK.stream_k(mt, nk, blocks)
    readers = {m: set() for m in range(mt)}
    for b in range(blocks):
        for m, _ in SK.walk(table, b, nk):
            readers[m].add(b)
    shared, _ = SK.split(mt, nk, blocks)
    slots = {}
    for m in range(mt):
        p0, p1 = table[SK.ENTRY * blocks + 2 * m: SK.ENTRY * blocks + 2 * m + 2]
        assert list(range(p0, p1 + 1)) == sorted(readers[m])
        if m < shared:
            assert sorted(readers[m]) == SK.pieces(m, nk, shared * nk, blocks)
        if p1 > p0:  # a seam: each piece's slot is its own
            for c in range(p0, p1 + 1):
                slot = SK.slot_of(c, m, table)
                assert slot in (2 * c, 2 * c + 1)
                assert slots.setdefault(slot, (c, m)) == (c, m)


@pytest.mark.parametrize("mt,nk,blocks", SHAPES)
def test_resident_x_is_copied_once_a_k_block_before_any_stage_reads_it(mt, nk, blocks):
    # the rule the producer runs (first_visit) against the walk the consumer reads
    table = SK.stream_k(mt, nk, blocks)
    for b in range(blocks):
        m0, kb0, n = (int(v) for v in table[SK.ENTRY * b: SK.ENTRY * b + 3])
        copied = set()
        for q, (m, kb) in enumerate(SK.walk(table, b, nk)):
            if SK.first_visit(q, kb, n, kb0, nk):
                assert kb not in copied
                copied.add(kb)
            assert kb in copied  # landed with this stage or an earlier one


def test_a_traced_launch_reads_back_as_times_from_the_first_start():
    # two blocks whose 32-bit stamps straddle the timer's wrap: block 1 started 500 ns before
    # block 0 (at 2^32 - 400 against 100), and ended 80 us after its start
    mt, ev = 3, len(W.TRACE_EVENTS)
    counts = np.zeros(mt + 2 * ev, dtype=np.int64)
    stamps = {0: {"start": 100, "end": 100 + 60_000, "meet_ns": 7, "smid": 131},
              1: {"start": 2 ** 32 - 400, "end": 80_000 - 400, "meet_ns": 9, "smid": 0}}
    for b, es in stamps.items():
        for e, v in es.items():
            counts[mt + ev * b + W.TRACE_EVENTS.index(e)] = v
    tl = W.timeline(counts.astype(np.uint32).view(np.int32), mt, 2)
    assert list(tl["start"]) == [500, 0] and list(tl["end"]) == [60_500, 80_000]
    assert list(tl["meet_ns"]) == [7, 9] and list(tl["smid"]) == [131, 0]  # as written


def test_a_grid_with_a_block_left_idle_is_refused():
    with pytest.raises(ValueError, match="launch 1 to 15 blocks"):
        SK.stream_k(3, 5, 16)


def test_the_epilogue_reads_the_accumulators_where_wgmma_puts_them():
    # the function the kernel's epilogue runs against the PTX layout
    for lt in range(128):
        for i in range(32):
            assert W.output_of(lt, i) == H.d_coords(lt, i)


def test_the_tile_is_validated_and_describes_itself():
    assert W.gemv_tile(1).n == 8 and W.gemv_tile(16).n == 16 and W.gemv_tile(17).n == 24
    t = W.WgmmaGemvTile(n=16)
    assert t.tx_bytes == 2 * 8192 + 16 * 128 and t.stage_bytes == 2 * 8192 + 2048
    # x resident: each stage holds weights only, x's 64 boxes beside the ring
    r = W.WgmmaGemvTile(16, 3, kblocks=2, x_resident=True)
    assert r.stage_bytes == 2 * 2 * 8192 and r.fits(4096)
    assert r.shared_for(4096) == r.shared_bytes + 64 * 2048
    assert not r.fits(8192)
    # up to 16 tokens: four stages of two boxes, x copied a stage; beyond, six stages of one
    # box, x resident where it fits; every copy with its L2 hint
    for T, d in ((1, 4096), (4, 4096), (16, 4096), (16, 8192)):
        c = W.gemv_tile(T, d)
        assert (c.stages, c.kblocks, c.x_resident, c.hints) == (4, 2, False, True) and c.fits(d)
    for T, d in ((24, 4096), (64, 14336), (17, 1024)):
        c = W.gemv_tile(T, d)
        assert (c.stages, c.kblocks) == (6, 1) and c.fits(d) and c.hints
        assert c.x_resident == W.WgmmaGemvTile(c.n, 6, x_resident=True).fits(d)
    assert W.gemv_tile(17, 1024).x_resident and not W.gemv_tile(24, 4096).x_resident
    # the diagnostics: fold keeps half of x's boxes (and needs them resident)
    f = W.WgmmaGemvTile(16, 4, kblocks=2, x_resident=True, fold=True)
    assert f.shared_for(4096) == f.shared_bytes + 32 * 2048 and f.fits(4096)
    wide = W.WgmmaGemvTile(n=8, stages=3, kblocks=4)
    assert wide.stage_k == 256 and wide.tx_bytes == 4 * (2 * 8192 + 1024)
    assert t.shared_bytes <= 227 * 1024 and "m64n16k16" in t.describe()
    for bad, why in ((W.WgmmaGemvTile(n=12), "multiple of 8"),
                     (W.WgmmaGemvTile(n=72), "multiple of 8"),
                     (W.WgmmaGemvTile(stages=1), "at least 2"),
                     (W.WgmmaGemvTile(stages=12, ctas_per_sm=2), "do not fit"),
                     (W.WgmmaGemvTile(n=24, stages=12), "do not fit"),
                     (W.WgmmaGemvTile(kblocks=3), "kblocks"),
                     (W.WgmmaGemvTile(promotion="512B"), "promotion"),
                     (W.WgmmaGemvTile(hold=2), "hold"),
                     (W.WgmmaGemvTile(prefetch=33), "prefetch"),
                     (W.WgmmaGemvTile(fold=True), "fold needs x_resident"),
                     (W.WgmmaGemvTile(dynamic=2, x_resident=True), "dynamic ranges"),
                     (W.WgmmaGemvTile(dynamic=65), "dynamic must be")):
        with pytest.raises(ValueError, match=why):
            bad.validate()
    with pytest.raises(ValueError, match="1 to 64 tokens"):
        W.gemv_tile(65)


@pytest.mark.skipif(not book.gpu.SIMULATED, reason="the simulator's refusal")
@pytest.mark.parametrize("mt,nk,blocks,chunk,pool", [(224, 32, 132, 4, 0.15), (224, 64, 132, 2, 0.1),
                                                    (3, 5, 4, 2, 0.5), (16, 7, 100, 3, 0.2),
                                                    (10, 4, 3, 1, 0.0)])
def test_guided_ranges_cover_every_iteration_once_and_know_their_tiles(mt, nk, blocks, chunk, pool):
    t = SK.guided(mt, nk, blocks, chunk, pool)
    R = int(t[0])
    bounds = SK.guided_bounds(mt, nk, blocks, chunk, pool)
    assert R == len(bounds) - 1 >= blocks and bounds[0] == 0 and bounds[-1] == mt * nk
    heads = np.diff(bounds[:blocks + 1])  # every block's first range: equal within one
    assert heads.max() - heads.min() <= 1 and heads.min() >= 1
    assert all(0 < v <= chunk for v in np.diff(bounds[blocks:]))
    seen = np.zeros(mt * nk, dtype=int)
    for c in range(R):
        m0, kb0, n, w0, nw = (int(v) for v in t[1 + SK.ENTRY * c: 1 + SK.ENTRY * (c + 1)])
        assert n >= 1 and (w0, nw) == (0, 0)
        seen[m0 * nk + kb0: m0 * nk + kb0 + n] += 1
    assert (seen == 1).all()
    for m in range(mt):  # the first and the last range that read part of tile m
        p0, p1 = (int(v) for v in t[1 + SK.ENTRY * R + 2 * m: 3 + SK.ENTRY * R + 2 * m])
        holders = [c for c in range(R) if bounds[c] < (m + 1) * nk and bounds[c + 1] > m * nk]
        assert (p0, p1) == (holders[0], holders[-1])
        # each holder's piece of m has its own slot: 2c for its first tile, 2c + 1 its last
        slots = {2 * c + (0 if m == t[1 + SK.ENTRY * c] else 1) for c in holders}
        assert len(slots) == len(holders)
    with pytest.raises(ValueError, match="chunk"):
        SK.guided(mt, nk, blocks, 0, pool)


@pytest.mark.parametrize("nk,rotate", [(32, 1), (32, 5), (64, 7), (48, 3), (5, 2), (1, 9)])
def test_a_rotated_tile_still_reads_each_of_its_k_blocks_once(nk, rotate):
    pw = 1 << (nk.bit_length() - 1)  # what the kernels work out with clz
    for m in range(40):
        assert sorted(SK.rotated(kb, m, rotate, pw, nk) for kb in range(nk)) == list(range(nk))


def test_the_default_tile_takes_its_l2_promotion_and_lead_from_the_gpu_it_runs_on():
    # the H200 reads the boxes faster with 128-byte L2 fills, the H100 with 256 (PROMOTION);
    # both with their first four stages asked of L2 at the start, up to 16 tokens (LEAD); a
    # GPU the tables do not name gets neither
    assert W.promotion_for("NVIDIA H200") == "128B"
    assert W.promotion_for("NVIDIA H100 80GB HBM3") == W.promotion_for("") == "256B"
    assert W.lead_for("NVIDIA H200") == W.lead_for("NVIDIA H100 80GB HBM3") == 4
    assert W.lead_for("") == W.lead_for("NVIDIA A100-SXM4-40GB") == 0
    for T in (1, 4, 16, 24, 64):
        h100, h200 = W.gemv_tile(T, 4096, "NVIDIA H100 80GB HBM3"), W.gemv_tile(T, 4096, "NVIDIA H200")
        lead = 4 if T <= 16 else 0
        assert h100 == dataclasses.replace(W.gemv_tile(T, 4096), lead=lead)
        assert h100.promotion == "256B" and h100.lead == lead
        assert h200 == dataclasses.replace(h100, promotion="128B")


def test_the_default_tile_takes_the_fixes_and_fixes_false_is_the_bare_tile():
    # the fixes (W.FIXES: pdl, short_settle) are on in the default tile at every T and on
    # every GPU, off in the bare tile (their control), which is otherwise the same tile
    assert W.FIXES == {"short_settle": True, "pdl": True}
    for T, d, gpu in ((1, 4096, "NVIDIA H200"), (4, 4096, ""), (16, 8192, "NVIDIA H100 80GB HBM3"),
                      (24, 1024, "NVIDIA H200"), (32, 4096, "NVIDIA H200"), (64, 14336, "")):
        t, bare = W.gemv_tile(T, d, gpu), W.gemv_tile(T, d, gpu, fixes=False)
        assert {k: getattr(t, k) for k in W.FIXES} == W.FIXES
        assert not any(getattr(bare, k) for k in W.FIXES)
        assert dataclasses.replace(bare, **W.FIXES) == t.validate()
        assert t.fits(d) and t.shared_for(d) == bare.shared_for(d)
        assert "dependent" in t.describe() and "settled in short" in t.describe()
        assert "dependent" not in bare.describe() and "short" not in bare.describe()
    assert W.gemv_tile(24, 1024).x_resident  # (a resident x's first stages copied ahead too)


def test_the_fixes_are_defined_once_and_the_fp8_tile_inherits_them():
    import inspect

    from book.kernels.gemv import fp8_gemv_tile as F8

    fields = {f.name: f.default for f in dataclasses.fields(W.WgmmaGemvTile)}
    assert fields["pdl"] is False and fields["short_settle"] is False
    assert {f.name for f in dataclasses.fields(F8.Fp8GemvTile)} >= set(W.FIXES)
    own = inspect.get_annotations(F8.Fp8GemvTile)
    # (the FP8 tile's own fixes: preload, and wide_settle, the seams over three warps)
    assert not set(W.FIXES) & set(own) and {"preload", "wide_settle"} <= set(own)
    assert F8.FIXES == {"preload": True, **W.FIXES, "wide_settle": True}


def test_the_fixes_refuse_what_the_kernel_cannot_do_with_them():
    base = W.gemv_tile(16, 4096, fixes=False)
    for bad in (dict(dynamic=2), dict(cpasync=True), dict(prefetch=2), dict(rotate=1),
                dict(x_resident=True, stages=3, fold=True), dict(trace=True)):
        with pytest.raises(ValueError, match="pdl copies the first stages"):
            dataclasses.replace(base, pdl=True, **bad).validate()
        dataclasses.replace(base, **bad).validate()  # (the bare tile takes each)
    with pytest.raises(ValueError, match="short_settle settles the static walk"):
        dataclasses.replace(base, short_settle=True, dynamic=2).validate()
    # what they do take: a traced tile settled in short, x resident, several waves, two
    # blocks an SM, no hints, hold 0, the walk read after the set-up, a lead
    for good in (dict(short_settle=True, trace=True), dict(**W.FIXES, x_resident=True, stages=3),
                 dict(**W.FIXES, waves=3), dict(**W.FIXES, ctas_per_sm=2, stages=3, kblocks=1),
                 dict(**W.FIXES, hints=False, hold=0, early=False), dict(**W.FIXES, lead=4)):
        assert dataclasses.replace(base, **good).validate()


def test_a_lead_tile_is_validated():
    base = W.gemv_tile(16, 4096)
    assert dataclasses.replace(base, lead=32).validate().lead == 32
    for bad in (dict(lead=33), dict(lead=-1), dict(lead=4, early=False),
                dict(lead=4, dynamic=2), dict(lead=4, rotate=1)):
        with pytest.raises(ValueError, match="lead must be"):
            dataclasses.replace(base, **bad).validate()


def test_in_the_simulator_the_hopper_gemv_is_refused_with_what_runs_instead():
    from numba import cuda

    from book.kernels.gemv import decode_mlp as dm

    from decode_cases import case

    arrs, _ = case(2, 64, 64, "bfloat16")
    with pytest.raises(RuntimeError, match="Hopper GPUs"):
        dm.prepare("hopper_gemv", *[cuda.to_device(a) for a in arrs])


# ------------------------------------------------------------------ PTX, through ptxas for sm_90a

#: name -> (wgmma's N, its type): the bare tile and its options, then the fixes (pdl,
#: short_settle) alone and at the dispatcher's tiles on an H200 (book.kernels.host.ptx)
PTX_GEMVS = {"wgmma_gemv_t16": (16, "bf16"), "wgmma_gemv_t4_f16": (8, "f16"),
             "wgmma_gemv_t16_trace": (16, "bf16"), "wgmma_gemv_t8_dynamic": (8, "bf16"),
             "wgmma_gemv_t16_lead": (16, "bf16"),
             "wgmma_gemv_t16_pdl": (16, "bf16"), "wgmma_gemv_t16_short_settle": (16, "bf16"),
             "wgmma_gemv_t1_lead_short_settle_pdl": (8, "bf16"),
             "wgmma_gemv_t32_short_settle_pdl": (32, "bf16"),
             "wgmma_gemv_t24_resident_short_settle_pdl": (24, "bf16"),
             "wgmma_gemv_t64_short_settle_pdl": (64, "bf16")}
GEMVS = list(PTX_GEMVS)


@pytest.fixture(scope="module")
def texts():
    from book.kernels.host import ptx

    names = ptx.ptx_many([(n, "bfloat16") for n in GEMVS], cc=H.ARCH)
    return {n: names[f"{n}/bfloat16"] for n in GEMVS}


@pytest.mark.parametrize("name,n,ptype", [(k, *v) for k, v in PTX_GEMVS.items()])
@pytest.mark.extended
def test_the_kernel_assembles_with_tma_and_unserialized_wgmma(texts, name, n, ptype):
    import re

    from book.kernels.host import ptx

    text = texts[name]
    ok, log = ptx.ptxas_log(text)
    assert ok, log[-2000:]
    # a division on the device would be a subroutine call, and a call serializes wgmma
    assert not re.findall(r"\((C75(?:09|10|15|17))\)", log), log[-1500:]
    assert re.findall(r"(\d+) bytes spill stores", log) == ["0"] and ".local" not in text
    assert f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ptype}.{ptype}" in text
    assert "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes" in text
    assert "div.s64" not in text and "div.u64" not in text
    # the seams handed to the finisher warp through a shared-memory barrier, and a traced
    # tile's timeline read from %globaltimer (an untraced one never reads it)
    assert text.count("mbarrier.init.shared::cta.b64") >= 2 * 2 + 2
    assert ("%globaltimer" in text) == name.endswith("_trace")
    # dynamic ranges: taken with an atomic on the counters, queued and handed over through
    # barriers of their own (a ring of two and a ring of four beside the stages' and seams')
    # (the static kernel's one atomic counts a tile's pieces; the dynamic one also takes
    # ranges and counts the blocks that ran out, and its finisher counts pieces of its own)
    atomics = len(re.findall(r"atom\.global\.add", text))
    if name.endswith("_dynamic"):
        assert atomics == 4
        assert text.count("mbarrier.init.shared::cta.b64") >= 2 * 2 + 2 + 2 * 2 + 2 * 4
    else:
        assert atomics == 1
    # a lead tile asks L2 for its first stages' weights before it sets up its barriers; no
    # other tile asks L2 for anything
    prefetch = "cp.async.bulk.prefetch.tensor.2d.L2.global.tile"
    if "_lead" in name:
        assert 0 <= text.find(prefetch) < text.find("mbarrier.init.shared::cta.b64")
    else:
        assert prefetch not in text
    # a dependent launch: the kernel lets the next one in and waits for the one before (its
    # producer, the finisher warp and the consumers: three waits); none without the option
    pdl = name.endswith("_pdl")
    assert ("griddepcontrol.launch_dependents;" in text) == pdl
    assert text.count("griddepcontrol.wait;") == (3 if pdl else 0)
    # short_settle: one fence in the finisher (none after the counter's reset), the first two
    # pieces' loads (2 WR NA floats each) issued together beside the loop's for a third piece
    # (the dynamic kernel's scheduler fences and settles its own way)
    if not name.endswith("_dynamic"):
        short = "_short_settle" in name
        assert text.count("membar.gl") == (1 if short else 2)
        wrna = (4 if n <= 16 else 2 if n <= 32 else 1) * (n // 2)
        assert text.count("ld.global.cg.f32") == 2 * wrna * (3 if short else 1)


# ------------------------------------------------------------------ on an H100

def _hopper():
    info = book.gpu.device_info()
    if info is None or tuple(info.compute_capability)[:2] != (9, 0):
        pytest.skip("needs a Hopper GPU (sm_90)")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("T", [1, 3, 8, 16, 33, 64])
def test_on_an_h100_it_matches_float64(T, dtype):
    from book.kernels.gemv import decode_mlp as dm

    _hopper()
    torch, (x, wg, wu), ref = torch_case(T, 4096, 2048, dtype, seed=T)
    out = torch.full((T, 2048), float("nan"), device="cuda", dtype=x.dtype)
    launch = dm.prepare("hopper_gemv", x, wg, wu, None, None, out)
    launch.launch()
    torch.cuda.synchronize()
    close_torch(out, ref, dtype)
    first = out.clone()
    for _ in range(3):  # the counters were left at zero: the same sums every launch
        out.fill_(float("nan"))
        launch.launch()
    torch.cuda.synchronize()
    assert torch.equal(out, first)


@pytest.mark.gpu
@pytest.mark.parametrize("tile", [W.WgmmaGemvTile(8, 4, kblocks=2, dynamic=2, pool=25),
                                  W.WgmmaGemvTile(16, 4, kblocks=2, dynamic=1, pool=50)])
def test_on_an_h100_dynamic_ranges_give_the_same_sums_every_launch(tile):
    # 32 row tiles of 32 stages: short ranges beyond the blocks' first, taken as each runs
    # out; whichever block takes which, the cuts and the order of the sums stay
    from book.kernels.gemv import decode_mlp as dm

    _hopper()
    T, d, h = min(tile.n, 5), 4096, 2048
    torch, (x, wg, wu), ref = torch_case(T, d, h, "bfloat16", seed=7)
    out = torch.full((T, h), float("nan"), device="cuda", dtype=x.dtype)
    launch = dm.prepare("hopper_gemv", x, wg, wu, None, None, out, tile=tile)
    assert int(launch.args[1][0]) > launch.grid  # more ranges than blocks: some taken late
    launch.launch()
    torch.cuda.synchronize()
    close_torch(out, ref, "bfloat16")
    first = out.clone()
    for _ in range(5):
        out.fill_(float("nan"))
        launch.launch()
        torch.cuda.synchronize()
        assert torch.equal(out, first)
    assert not launch.args[6].copy_to_host().any()  # every counter back at zero


@pytest.mark.gpu
@pytest.mark.parametrize("tile", [W.WgmmaGemvTile(8, 2, 1), W.WgmmaGemvTile(16, 4, 2),
                                  W.WgmmaGemvTile(24, 4, 1, 2, "none", 3),
                                  W.WgmmaGemvTile(8, 3, 1, 4, "128B"),
                                  W.WgmmaGemvTile(16, 3, 1, 2, x_resident=True),
                                  W.WgmmaGemvTile(8, 2, 1, 1, waves=4, x_resident=True),
                                  W.WgmmaGemvTile(16, 4, 1, 2, prefetch=2, early=False,
                                                  hints=False),
                                  W.WgmmaGemvTile(8, 8, cpasync=True),
                                  W.WgmmaGemvTile(16, 3, 1, 2, x_resident=True, cpasync=True),
                                  W.WgmmaGemvTile(24, 4, 1, 2, cpasync=True),
                                  W.WgmmaGemvTile(8, 4, 1, 2, dynamic=2, pool=30),
                                  W.WgmmaGemvTile(16, 4, 1, 2, dynamic=1, pool=50),
                                  # the fixes (W.FIXES) beside x resident, waves, two blocks an
                                  # SM, and a walk shorter than the stages copied ahead
                                  W.WgmmaGemvTile(16, 3, 1, 2, x_resident=True, **W.FIXES),
                                  W.WgmmaGemvTile(24, 4, 1, 2, "none", 3, **W.FIXES),
                                  W.WgmmaGemvTile(8, 3, 2, 1, **W.FIXES)])
@pytest.mark.parametrize("d,h,bias", [(200, 1000, True), (4096, 520, False), (64, 8, True)])
def test_on_an_h100_edges_seams_and_biases(tile, d, h, bias):
    from book.kernels.gemv import decode_mlp as dm

    from decode_cases import case, run

    _hopper()
    T = min(tile.n, 5)
    arrs, ref = case(T, d, h, "bfloat16", bias=bias, seed=d + h)
    got = run(lambda *a, **kw: dm.prepare("hopper_gemv", *a, tile=tile, **kw).launch(),
              arrs, "bfloat16")
    np.testing.assert_allclose(got, ref, rtol=2 ** -7, atol=2 ** -7 * np.abs(ref).max())


# ------------------------------------------------------------------ the fixes, on a Hopper GPU


def _biases(torch, h, bias, seed):
    if not bias:
        return None, None
    gen = torch.Generator(device="cuda").manual_seed(seed)
    return ((torch.randn(h, device="cuda", generator=gen) * 0.5).bfloat16() for _ in range(2))


def _bits(torch, o):
    return o.view(torch.int16)  # (NaN's bits too: torch.equal on values never equals a NaN)


@pytest.mark.gpu
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("T", [1, 4, 16, 32])
def test_on_a_hopper_gpu_the_default_tile_gives_the_bare_tiles_bits(T, bias):
    """The fixes (W.FIXES: a dependent launch, the seams settled in short) copy the same
    boxes and add the same pieces in the same order: the default call's output is the bare
    tile's bit for bit, prepared and planned, at the course's shape (seams and whole tiles),
    at a ragged last row tile with x resident beyond 16 tokens (d = 768), and where the
    blocks share every tile (h = 520)."""
    from book.kernels.gemv import decode_mlp as dm
    from book.kernels.host.fastcall import planned
    from book.kernels.host.launch import device_name

    _hopper()
    for d, h in ((4096, 14336), (768, 1000), (4096, 520)):
        torch, (x, wg, wu), ref = torch_case(T, d, h, "bfloat16", seed=T + d + h)
        bg, bu = _biases(torch, h, bias, seed=h)
        nan = lambda: torch.full((T, h), float("nan"), device="cuda", dtype=x.dtype)  # noqa: E731
        bare = W.gemv_tile(T, d, device_name(), fixes=False)
        want, got, again = nan(), nan(), nan()
        control = dm.prepare("hopper_gemv", x, wg, wu, bg, bu, want, tile=bare)
        assert not control.dependent
        control.launch()
        launch = dm.prepare("hopper_gemv", x, wg, wu, bg, bu, got)
        assert launch.tile == dataclasses.replace(bare, **W.FIXES) and launch.dependent
        launch.launch()
        for _ in range(3):  # the plain call: planned, then its plan replayed
            again.fill_(float("nan"))
            planned("gemv_hopper")(x, wg, wu, bg, bu, again)
        torch.cuda.synchronize()
        assert not want.isnan().any()
        if not bias:
            close_torch(want, ref, "bfloat16")
        assert torch.equal(_bits(torch, got), _bits(torch, want)), (T, d, h, bias)
        assert torch.equal(_bits(torch, again), _bits(torch, want)), (T, d, h, bias)


@pytest.mark.gpu
@pytest.mark.parametrize("T", [4, 32])
def test_on_a_hopper_gpu_a_dependent_launch_gives_the_same_bits_back_to_back(T):
    """A dependent launch (``WgmmaGemvTile.pdl``) starts while the call before it ends and
    shares its out, its seams' workspace and its counters: plain calls back to back on one
    stream (their plans: dependent launches), most of them with their tokens written by a
    torch kernel just before, the others right after the call before, every other one into
    the same out, give the bits of the bare tile's calls, call by call."""
    from book.kernels.host.fastcall import planned
    from book.kernels.host.launch import device_name

    _hopper()
    d, h = 4096, 4096
    torch, (x, wg, wu), _ = torch_case(T, d, h, "bfloat16", seed=11)
    bg, bu = _biases(torch, h, True, seed=12)
    bare = W.gemv_tile(T, d, device_name(), fixes=False)
    xs = [x.clone() for _ in range(2)]
    flips = [torch.roll(x, k, dims=1) for k in (1, 2)]

    def chain(call):
        for a in xs:
            a.copy_(x)
        outs = [torch.empty(T, h, device="cuda", dtype=x.dtype) for _ in range(2)]
        got = []
        for i in range(24):
            if i % 3 != 2:  # the kernel before writes x (else: the GEMV before is the one)
                xs[i % 2].copy_(flips[i % 2] if i % 3 else x)
            call(xs[i % 2], wg, wu, bg, bu, outs[i % 2])
            if i % 4 == 3:
                got.append([o.clone() for o in outs])
        torch.cuda.synchronize()
        return got

    want = chain(planned("gemv_hopper", ("tile", bare)))
    fast = planned("gemv_hopper").stats["fast"]
    got = chain(planned("gemv_hopper"))
    assert planned("gemv_hopper").stats["fast"] > fast  # replayed: the plan's dependent launch
    assert not any(o.isnan().any() for outs in want for o in outs)
    for i, (a, b) in enumerate(zip(want, got)):
        assert all(torch.equal(_bits(torch, p), _bits(torch, q)) for p, q in zip(a, b)), i


@pytest.mark.gpu
def test_on_a_hopper_gpu_the_dependent_launches_replay_from_a_cuda_graph():
    """The plain calls whose plans are dependent launches, captured in a CUDA graph (the
    dispatcher's at T = 32, the wgmma GEMV's, and the GEMV's again right behind it, on the
    stream it was planned on), replay the bits of the bare tile's launches, twice over (the
    counters left at zero in a replay too)."""
    from book.kernels.gemv import decode_mlp as dm
    from book.kernels.host.fastcall import planned
    from book.kernels.host.launch import device_name

    _hopper()
    T, d, h = 32, 4096, 2048
    torch, (x, wg, wu), ref = torch_case(T, d, h, "bfloat16", seed=32)
    assert dm.path_for(T, (9, 0)) == "hopper_gemv"
    x2 = torch.roll(x, 1, dims=1)
    bare = W.gemv_tile(T, d, device_name(), fixes=False)
    want = [torch.full((T, h), float("nan"), device="cuda", dtype=x.dtype) for _ in range(2)]
    for a, o in zip((x, x2), want):
        dm.prepare("hopper_gemv", a, wg, wu, None, None, o, tile=bare).launch()
    o = [torch.empty(T, h, device="cuda", dtype=x.dtype) for _ in range(2)]

    def calls():
        planned("decode")(x, wg, wu, None, None, o[0])
        planned("gemv_hopper")(x2, wg, wu, None, None, o[1])

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # planned on the capture stream, before the capture
        calls()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        calls()
    for _ in range(2):
        for a in o:
            a.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        close_torch(o[0], ref, "bfloat16")
        for a, b in zip(o, want):
            assert torch.equal(_bits(torch, a), _bits(torch, b))
