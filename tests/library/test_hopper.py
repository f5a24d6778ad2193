"""Hopper's instructions (book/kernels/instructions/hopper.py) and the wgmma dual GEMM
(book/kernels/gemms/wgmma_gemm.py) without a GPU: the models against each other and against what
the PTX ISA says, the tile geometry, and the kernels compiled for sm_90a and assembled by
ptxas (nvJitLink, a pip wheel) with its warnings read. The models against the H100 are in
tests/library/test_hopper_gpu.py (GPU lane)."""

import re

import numpy as np
import pytest

import book
from book.kernels.instructions import hopper as H
from book.kernels.host import ptx
from book.kernels.gemms import wgmma_gemm as W


def bf16_bits(a):
    return (np.asarray(a, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)


# ------------------------------------------------------------------ swizzle and descriptors


@pytest.mark.parametrize("mode,bits", [("128B", 3), ("64B", 2), ("32B", 1)])
def test_swizzle_permutes_16_byte_chunks_within_each_1024_bytes(mode, bits):
    addr = np.arange(4096)
    sw = H.swizzle(addr, mode)
    assert sorted(sw.tolist()) == addr.tolist()  # a permutation
    assert np.array_equal(sw % 16, addr % 16)  # bytes stay inside their 16-byte chunk
    assert np.array_equal(sw // 1024, addr // 1024)  # and inside their 1024 bytes
    row, chunk = addr // 128 % 8, addr // 16 % 8
    want = chunk ^ (row & ((1 << bits) - 1))
    assert np.array_equal(sw // 16 % 8, want)
    assert np.array_equal(H.swizzle(addr, "none"), addr)


def test_128B_swizzle_puts_the_8_rows_of_a_core_matrix_in_8_bank_groups():
    # the rows a wgmma (or ldmatrix) phase reads: the same 16 bytes of 8 consecutive rows
    for col_chunk in range(8):
        addr = np.array([r * 128 + col_chunk * 16 for r in range(8)])
        groups = (H.swizzle(addr, "128B") % 128) // 16
        assert len(set(groups.tolist())) == 8
        assert len(set(((addr % 128) // 16).tolist())) == 1  # unswizzled: all in one


def test_descriptor_round_trip_and_fields():
    d = H.descriptor(0x1230, 128, 256, "none")
    assert d & 0x3FFF == 0x123 and (d >> 16) & 0x3FFF == 8 and (d >> 32) & 0x3FFF == 16
    assert d >> 62 == 0
    for mode in H.SWIZZLE_CODE:
        f = H.decode_descriptor(H.descriptor(2048 + 32, 16, 1024, mode))
        assert f == {"addr": 2080, "lbo": 16, "sbo": 1024, "base_offset": 0, "mode": mode}
    assert H.descriptor(0, 16, 1024, "128B") >> 62 == 1
    with pytest.raises(ValueError, match="multiple of 16"):
        H.descriptor(8, 16, 1024)


def test_unswizzled_operand_is_built_of_contiguous_8x16_byte_core_matrices():
    d = H.descriptor(0, 128, 256, "none")
    a = H.operand_addresses(d, 64)
    core = a[:8, :8]  # rows 0-7, k 0-7: one core matrix, 128 contiguous bytes
    assert sorted(core.ravel().tolist()) == list(range(0, 128, 2))
    assert a[0, 8] == 128  # the next core matrix along K: LBO on
    assert a[8, 0] == 256  # the next 8 rows: SBO on


@pytest.mark.parametrize("mode", ["128B", "64B", "32B"])
def test_wgmma_reads_back_what_tma_wrote_at_every_k_step(mode):
    """The two models agree: a tile placed by a TMA load (swizzled) and read through the
    descriptor with its start advanced 32 bytes per k16 gives A B^T exactly."""
    width = H.SWIZZLE_WIDTH[mode]
    k = width // 2
    rng = np.random.default_rng(0)
    A = rng.integers(-3, 4, size=(64, k)).astype(np.float32)
    B = rng.integers(-3, 4, size=(128, k)).astype(np.float32)
    img = np.zeros(64 * width + 128 * width, dtype=np.uint8)
    img[:64 * width] = H.tma_box(bf16_bits(A), 0, 0, (k, 64), mode)
    img[64 * width:] = H.tma_box(bf16_bits(B), 0, 0, (k, 128), mode)
    for ks in range(k // 16):
        da = H.descriptor(32 * ks, 16, 8 * width, mode)
        db = H.descriptor(64 * width + 32 * ks, 16, 8 * width, mode)
        got = H.wgmma_model(img, da, db, 128, dtype="bfloat16")
        want = A[:, 16 * ks:16 * ks + 16] @ B[:, 16 * ks:16 * ks + 16].T
        assert np.array_equal(got, want), (mode, ks)


def test_a_k16_slice_wider_than_a_swizzled_row_is_refused():
    with pytest.raises(ValueError, match="wider than one 32-byte"):
        H.operand_addresses(H.descriptor(0, 16, 256, "32B"), 8, k=32)


def test_accumulator_layout_covers_the_64_by_n_tile_once():
    for n in H.WGMMA_N:
        seen = {H.d_coords(th, i) for th in range(128) for i in range(n // 2)}
        assert len(seen) == 64 * n and seen == {(r, c) for r in range(64) for c in range(n)}
    assert {H.d_coords(th, 0)[0] for th in range(32, 64)} <= set(range(16, 32))  # warp 1


def test_gate_and_up_of_one_output_meet_in_one_thread():
    t = W.TILE
    for th in range(0, 128, 7):
        for i, j in W.pairs(t):
            (rg, cg), (ru, cu) = H.d_coords(th, i), H.d_coords(th, j)
            assert rg == ru and cu == cg + t.bn


# ------------------------------------------------------------------ TMA and mbarrier models


def test_tma_box_fills_outside_the_tensor_with_zeros():
    t = np.arange(10 * 20, dtype=np.uint16).reshape(10, 20)
    box = H.tma_box(t, 16, 5, (8, 8), "none").view(np.uint16).reshape(8, 8)
    assert np.array_equal(box[:5, :4], t[5:10, 16:20])
    assert not box[5:].any() and not box[:, 4:].any()
    with pytest.raises(ValueError, match="wider than the 64B swizzle"):
        H.tma_box(t, 0, 0, (64, 8), "64B")


def test_mbarrier_model_phases_and_the_producers_first_wait():
    m = H.MbarrierModel(2)
    assert m.try_wait(1) and not m.try_wait(0)  # fresh: "parity 1" counts as done
    m.arrive(expect_tx=100)
    m.arrive()
    assert not m.try_wait(0)  # arrivals in, bytes not yet
    m.complete_tx(100)
    assert m.try_wait(0) and not m.try_wait(1)
    m.arrive()
    with pytest.raises(RuntimeError, match="more bytes"):
        m.complete_tx(1)
    with pytest.raises(ValueError):
        H.MbarrierModel(0)


def test_mbarrier_probe_steps_match_the_model_steps():
    from book.kernels.probes import hopper_probes as P

    assert len(P.mbarrier_model_phases()) == len(P.MBARRIER_STEPS)
    assert P.mbarrier_model_phases() == [True, False, False, True, False, True, False]


# ------------------------------------------------------------------ the kernel's geometry


def test_tile_geometry_is_named_and_fits_the_sm():
    t = W.TILE.validate()
    lay = t.layout
    assert t.consumers == 2 and t.threads == 384 and t.wgmma_n == 256
    assert lay["a"] % 1024 == 0 and lay["b"] % 1024 == 0 and lay["c"] % 1024 == 0
    assert lay["full"] % 8 == 0 and lay["end"] == lay["empty"] + 8 * t.stages
    assert t.shared_bytes <= book.kernels.host.launch.MAX_SHARED
    assert t.stage_bytes == 128 * 64 * 2 + 256 * 64 * 2
    assert "m64n256k16" in t.describe() and "4 stages" in t.describe()
    with pytest.raises(ValueError, match="bk must be 64"):
        W.HopperTile(bk=32).validate()
    with pytest.raises(ValueError, match="shared memory"):
        W.HopperTile(stages=6).validate()


def test_tile_description_names_the_barriers_as_the_layout_places_them():
    """Reader QA: chapter 9 printed "barriers at 229376, 230464 bytes of shared memory" above a
    table of the layout whose empty barriers start at 229,408: the second number was the
    dynamic shared memory asked for. Each byte the description names is the layout's, said
    as what it is, in the table's format."""
    t = W.TILE
    lay, text = t.layout, t.describe()
    assert f"full barriers from byte {lay['full']:,}" in text
    assert f"empty barriers from byte {lay['empty']:,}" in text
    assert f"{t.shared_bytes:,} bytes of dynamic shared memory asked for" in text
    assert f"the layout's {lay['end']:,} and {W.ALIGN:,} to align its start" in text
    assert "barriers at" not in text


def test_schedule_covers_every_tile_once_in_column_groups():
    s = W.schedule(5, 11, 4)
    tiles = [(int(v) >> 16, int(v) & 0xFFFF) for v in s]
    assert sorted(tiles) == [(m, n) for m in range(5) for n in range(11)]
    assert tiles[:5] == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0)]
    assert {n for _, n in tiles[:20]} == {0, 1, 2, 3}  # the first group: 4 columns


def test_shapes_are_checked_with_what_to_do():
    x = np.zeros((3, 12), dtype=np.uint16)
    with pytest.raises(ValueError, match="nn.Linear layout"):
        W.check_shapes(x, [np.zeros((16, 8), dtype=np.uint16)], ("wg",))
    with pytest.raises(ValueError, match="multiples of 8"):
        W.check_shapes(x, [np.zeros((16, 12), dtype=np.uint16)], ("wg",))


def test_the_simulator_is_told_what_runs_instead():
    if not book.gpu.SIMULATED:
        pytest.skip("the simulator's message")
    with pytest.raises(RuntimeError, match="simulator has neither"):
        H.check_capability(None)
    with pytest.raises(RuntimeError, match="sm_90a"):
        H.check_capability((8, 0))


# ------------------------------------------------------------------ PTX and ptxas

HOPPER = ["wgmma_swiglu", "wgmma_identity", "wgmma_store2", "wgmma_gemm", "wgmma_ceiling",
          "wgmma_swiglu_f16", "wgmma_swiglu_single", "wgmma_swiglu_multicast", "probe_tma", "probe_wgmma_n64",
          "probe_wgmma_n256", "probe_mbarrier"]


@pytest.fixture(scope="module")
def texts():
    return ptx.ptx_many([(n, "bfloat16") for n in HOPPER], cc=H.ARCH)


@pytest.fixture(scope="module")
def logs(texts):
    return {k: ptx.ptxas_log(v) for k, v in texts.items()}


@pytest.mark.parametrize("name", HOPPER)
@pytest.mark.extended
def test_ptxas_assembles_for_sm90a_without_serializing_or_waiting(logs, name):
    ok, log = logs[f"{name}/bfloat16"]
    assert ok, log[-2000:]
    bad = re.findall(r"\((C75(?:09|10|15|17|08))\)[^\n]*", log)
    assert not bad, f"{name}: ptxas warned {bad}"


@pytest.mark.parametrize("name", ["wgmma_swiglu", "wgmma_identity", "wgmma_ceiling",
                                  "wgmma_swiglu_f16", "wgmma_swiglu_single",
                                  "wgmma_swiglu_multicast"])
@pytest.mark.extended
def test_the_main_kernels_keep_everything_in_registers(logs, texts, name):
    ok, log = logs[f"{name}/bfloat16"]
    spills = re.findall(r"(\d+) bytes spill stores", log)
    assert spills and all(s == "0" for s in spills), log[-1500:]
    text = texts[f"{name}/bfloat16"]
    assert ".local" not in text
    assert "wgmma.mma_async.sync.aligned.m64n256k16.f32" in text
    assert "setmaxnreg.inc.sync.aligned.u32 232" in text
    assert "setmaxnreg.dec.sync.aligned.u32 40" in text
    assert ".maxntid 384" in text  # the register cap setmaxnreg needs at entry


@pytest.mark.extended
def test_the_kernel_uses_tma_mbarriers_and_tma_stores(texts):
    text = texts["wgmma_swiglu/bfloat16"]
    for op in ("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
               "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group",
               "mbarrier.arrive.expect_tx.shared::cta.b64", "mbarrier.try_wait.parity",
               "fence.proxy.async.shared::cta", "cvt.rn.bf16x2.f32", "ex2.approx"):
        assert op in text, op
    assert "barrier.cluster.arrive" in text and ".multicast::cluster" not in text
    cl = texts["wgmma_swiglu_multicast/bfloat16"]
    assert ".multicast::cluster" in cl and "mapa.shared::cluster" in cl
    assert "barrier.cluster" not in texts["wgmma_swiglu_single/bfloat16"]


@pytest.mark.extended
def test_plain_sm90_is_refused_by_ptxas(texts):
    """The trap: compiled for sm_90 (no "a"), the same PTX does not assemble."""
    text = texts["probe_wgmma_n64/bfloat16"].replace(".target sm_90a", ".target sm_90")
    ok, log = ptx.ptxas_log(text, arch="sm_90")
    assert not ok and "wgmma" in log and "not supported on .target 'sm_90'" in log
