"""The staged tensor-core GEMV (book.kernels.gemv.staged_gemv), a measured control of issue 31's
decode path: in Numba's CUDA simulator against float64 (the register path and the cp.async
ring, partial chunks, split-K, the T4's m16n8k8), its tile's checks, ``store_words4``; on a
GPU (``-m gpu``) at full size with a static and a dynamic ring.
"""

import numpy as np
import pytest
from repo import ci_keeps

import book  # noqa: F401  (GPU or simulator, decided before numba.cuda is imported)
from numba import cuda

from book.kernels.gemv import decode_mlp as dm
from book.kernels.gemms import splitk
from book.kernels.gemv.staged_gemv import StagedTile, row_stride, gemv_tile
from decode_cases import case, close, close_torch, run, torch_case


def staged(tile=None, split=None):
    def fn(x, wg, wu, bg=None, bu=None, out=None):
        return dm.prepare("staged", x, wg, wu, bg, bu, out, tile=tile, split=split).launch()
    return fn


@pytest.mark.parametrize("T,d,h,dtype,bias,tile,split", ci_keeps([
    # the register path: a partial last chunk (200 = 3 x 64 + 8), rows past h, tokens past T
    (1, 200, 9, "bfloat16", True, StagedTile(nt=1, warps=2, chunk=64), None),
    (9, 136, 20, "float16", False, StagedTile(nt=2, mp=2, warps=2, chunk=64), 2),
    # the cp.async ring, 2 and 3 deep, split-K over blocks, more chunks than stages
    (5, 328, 13, "float16", True, StagedTile(nt=1, warps=2, chunk=64, stages=2), None),
    (17, 200, 9, "bfloat16", False, StagedTile(nt=4, warps=2, chunk=64, stages=3), 2),
    (3, 72, 17, "bfloat16", True, StagedTile(nt=1, warps=1, chunk=32, stages=2), 3),
], keep=2))
def test_the_staged_gemv_matches_float64(T, d, h, dtype, bias, tile, split):
    arrs, ref = case(T, d, h, dtype, bias, seed=T + d)
    close(run(staged(tile, split), arrs, dtype), ref, dtype)


def test_a_staged_split_k_adds_in_a_fixed_order_and_leaves_its_counters_at_zero():
    T, d, h, dtype = 2, 264, 12, "float16"
    arrs, ref = case(T, d, h, dtype, seed=5)
    tile = StagedTile(nt=1, warps=2, chunk=64, stages=2)
    launch = dm.prepare("staged", *(cuda.to_device(a) for a in arrs), tile=tile, split=3)
    assert launch.splits == 3 and launch.grid == 3 * -(-h // tile.rows)
    got = [run(staged(tile, 3), arrs, dtype) for _ in range(2)]
    close(got[0], ref, dtype)
    np.testing.assert_array_equal(got[0], got[1])
    assert not splitk.workspace("staged", 0, 1, 1).count.copy_to_host().any()


def test_the_t4_path_of_the_staged_gemv():
    # sm_75's m16n8k8 (the T4 switch): the register path runs, a ring is refused
    from book.kernels.gemv.staged_gemv import make_staged_gemv

    arrs, ref = case(6, 96, 11, "float16", True, seed=2)
    tile = StagedTile(nt=1, warps=2, chunk=32)
    kern = make_staged_gemv(tile, True, "f16_sm75")
    dev = [cuda.to_device(np.ravel(a)) for a in arrs]  # the kernel takes flat arrays
    out = cuda.to_device(np.full(6 * 11, np.nan, np.float16))
    part, count = cuda.device_array(1, np.float32), cuda.to_device(np.zeros(1, np.int32))
    kern[-(-11 // tile.rows), tile.threads](dev[0], dev[1], dev[2], dev[3], dev[4], out, part,
                                            count, 6, 96, 11, 1)
    close(out.copy_to_host().reshape(6, 11).astype(np.float64), ref, "float16")
    with pytest.raises(ValueError, match="cp.async"):
        make_staged_gemv(StagedTile(nt=1, warps=2, chunk=32, stages=2), True, "f16_sm75")


def test_staged_tiles_are_checked_and_name_their_shared_memory():
    t = gemv_tile(16)
    assert (t.nt, t.rows, t.tokens) == (2, 8, 16)
    assert row_stride(512) * 2 % 128 == 64  # a row 64 bytes past a multiple of 128
    ring = StagedTile(nt=2, warps=8, chunk=512, stages=2)  # two 17 KiB chunks: static
    assert ring.dynamic_bytes == 0 and ring.static_bytes == 2 * 16 * 544 * 2 + 8 * 8 * 32 * 4 + 8
    deep = StagedTile(nt=2, warps=8, chunk=512, stages=4)  # beyond 48 KiB: dynamic
    assert deep.dynamic_bytes == 4 * 16 * 544 * 2 and deep.shared_bytes < 227 * 1024
    launch = dm.prepare("staged", *(cuda.to_device(a) for a in case(2, 512, 16, "float16")[0]),
                        tile=deep)
    assert launch.shared == deep.dynamic_bytes
    for bad, why in ((StagedTile(chunk=48), "multiple of 32"),
                     (StagedTile(warps=8, chunk=64), "whole number per thread"),
                     (StagedTile(stages=1), "stages = 1"),
                     (StagedTile(nt=8, mp=4), "accumulators"),
                     (StagedTile(warps=8, chunk=1024, stages=8), "at most")):
        with pytest.raises(ValueError, match=why):
            bad.validate()


def test_store_words4_puts_back_what_load_words4_read():
    from book.kernels.instructions.wide import load_words4, store_words4

    @cuda.jit
    def copy(src, dst):
        i = cuda.threadIdx.x * 8
        store_words4(dst, i, load_words4(src, i))

    for dt in (np.float16, np.uint16):
        src = (np.arange(64) * 37 % 65521).astype(np.uint16).view(dt)
        dst = cuda.to_device(np.zeros(64, dt))
        copy[1, 8](cuda.to_device(src), dst)
        np.testing.assert_array_equal(dst.copy_to_host().view(np.uint16), src.view(np.uint16))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("T", [1, 5, 16])
@pytest.mark.parametrize("tile", [None, StagedTile(warps=8, chunk=512, stages=2),
                                  StagedTile(warps=8, chunk=512, stages=4),
                                  StagedTile(warps=4, chunk=256, stages=2)],
                         ids=["registers", "ring2", "ring4_dynamic", "ring2_4warps"])
def test_on_a_gpu_the_staged_gemv_is_right_at_full_size(T, dtype, tile):
    if tile is not None:  # the tile's n-tiles for T
        tile = StagedTile(gemv_tile(T).nt, tile.mp, tile.warps, tile.chunk, 0, tile.stages)
    torch, (x, wg, wu), ref = torch_case(T, 4104, 2048, dtype, seed=T)  # a partial last chunk
    for split in (None, 2):
        out = torch.full((T, 2048), float("nan"), device="cuda", dtype=x.dtype)
        dm.prepare("staged", x, wg, wu, None, None, out, tile=tile, split=split).launch()
        torch.cuda.synchronize()
        close_torch(out, ref, dtype)
