"""The tensor-core GEMM's geometry (book.kernels.gemms.mma_tile.MmaGeometry): every size its kernel is
built from, derived once from an MmaTile, named and printable; the kernel factory reads it."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

import book  # (GPU or simulator, decided before numba.cuda is imported)
from book.kernels.gemms import mma_gemm as mg


def valid_tiles():
    for wm, wn, mt, nt, bk, st in itertools.product((1, 2), (1, 2), (1, 2, 4), (4, 8),
                                                    (16, 32, 64), (2, 3, 4)):
        t = mg.MmaTile(warps_m=wm, warps_n=wn, mt=mt, nt=nt, bk=bk, stages=st)
        try:
            yield t.validate()
        except ValueError:
            continue


TILES = list(valid_tiles())


def test_the_measured_tile_is_the_design_the_module_describes():
    t, g = mg.TILE, mg.TILE.geometry
    assert (t.bm, t.bn, t.threads) == (128, 128, 128)        # 4 warps own 128 x 128
    assert g.half == 64 and g.n_half_tiles == 4              # gate's 64 columns, then up's
    assert g.ksteps == 2 and g.a_chunks == 4 and g.b_chunks == 16
    assert 2 * (g.a_ring + g.b_ring) == t.shared_bytes == 64 * 1024   # 4 stages, dynamic
    assert t.dynamic and g.b_base == g.a_ring                 # one array: A's stages, then B's
    assert not mg.SIM_TILE.dynamic and mg.SIM_TILE.geometry.b_base == 0   # two static arrays


@pytest.mark.parametrize("t", TILES, ids=str)
def test_the_threads_copy_every_chunk_of_a_stage_once(t):
    g = t.geometry
    assert t.threads * g.a_copies * 8 == g.a_stage                    # A: bm x bk elements
    assert t.threads * g.b_copies * 8 * 2 == g.b_stage                # B: two halves
    assert g.a_row_step * g.a_copies == t.bm and g.b_row_step * g.b_copies == t.bk
    assert g.a_row_step % 8 == 0 and g.b_row_step % 8 == 0            # whole swizzle repeats
    assert g.a_stage_bytes == 2 * g.a_stage == g.a_row_bytes * t.bm
    assert g.b_stage_bytes == 2 * g.b_stage == g.b_row_bytes * t.bk
    assert g.wait == t.stages - 2 and g.n_pairs * 2 == t.nt


@pytest.mark.parametrize("t", TILES[:6], ids=str)
def test_the_swizzle_puts_an_ldmatrix_phases_eight_rows_in_eight_bank_groups(t):
    g = t.geometry
    for chunks, (shift, mask) in ((g.a_chunks, g.a_swizzle), (g.b_chunks, g.b_swizzle)):
        for c in range(chunks):   # one chunk column, the 8 rows one phase reads
            groups = {((r * chunks + (c ^ ((r >> shift) & mask))) % 8) for r in range(8)}
            assert len(groups) == 8 or chunks * 16 < 128, (t, chunks, c, groups)


def test_print_names_every_size_with_what_it_is():
    lines = str(mg.TILE.geometry).splitlines()
    names = [f.name for f in dataclasses.fields(mg.MmaGeometry)]
    assert [ln.split()[0] for ln in lines] == names
    assert all(len(ln.split("=", 1)[1].split()) > 1 for ln in lines)   # a value and its meaning
    assert "a_copies      = 4        A chunks each thread copies per stage" in lines


@pytest.mark.skipif(not book.gpu.SIMULATED, reason="the simulator's kernel keeps its Python body")
def test_the_kernel_factory_reads_the_geometry():
    t = mg.MmaTile(warps_m=1, warps_n=2, mt=1, nt=4, bk=32, stages=3, group_m=2).validate()
    kern = mg.build_kernel(t, "swiglu")
    consts, todo = {}, [kern.fn]
    while todo:   # the kernel's constants and its device functions' (a_offset, load_stage, ...)
        fn = todo.pop()
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
            value = cell.cell_contents
            if hasattr(value, "fn") and hasattr(value.fn, "__code__"):
                todo.append(value.fn)
            else:
                consts[name] = value
    g = t.geometry
    want = {"HALF": g.half, "N_HALF": g.n_half_tiles, "N_PAIRS": g.n_pairs, "KSTEPS": g.ksteps,
            "A_CHUNKS": g.a_chunks, "B_HALF_CHUNKS": g.b_half_chunks, "A_SH": g.a_swizzle[0],
            "A_MK": g.a_swizzle[1], "B_SH": g.b_swizzle[0], "B_MK": g.b_swizzle[1],
            "A_COPIES": g.a_copies, "B_COPIES": g.b_copies, "A_ROWB": g.a_row_bytes,
            "B_ROWB": g.b_row_bytes, "A_STAGEB": g.a_stage_bytes, "B_STAGEB": g.b_stage_bytes,
            "A_RSTEP": g.a_row_step, "B_RSTEP": g.b_row_step, "B_BASE": g.b_base, "WAIT": g.wait}
    assert {k: consts.get(k) for k in want} == want
