"""Tiled GEMM and epilogue-fused dual GEMM: correctness, input checks, and the PTX.

Correctness runs the real kernels (Numba's CUDA simulator on a CPU machine, the GPU where
there is one) against float64 NumPy on random inputs, outputs poisoned with NaN first,
on shapes that are not multiples of the tiles so that the interior (unchecked) kernel and
both guarded edge strips run. Tolerance: ||out - ref|| / ||ref|| < 1e-5. Float32
accumulation over K terms of random data leaves a relative error near sqrt(K) * 2^-24
(about 1e-6 at K = 4096, far less at the K used here); the epilogue's fast exp and
division (ex2.approx, div.approx) add a few ulp. 1e-5 leaves room for that and still
catches one wrong tile, a wrong k step or a missed element (each an O(1e-2) error here).

The PTX test compiles the configuration we time (128 x 128 tiles, 8 x 8 per thread) for
sm_90 in a child process (the simulator has no compiler) and reads it: no local memory,
float32 only, vector shared loads, fast exp in the epilogue; ptxas (through nvJitLink)
reports the registers and confirms nothing spills.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import book  # noqa: F401  (GPU or simulator, before numba.cuda)
from numba import cuda

from book.kernels.gemms import dual_gemm, gemm
from book.kernels.gemms.gemm import SIM_TILE, TILE, Tile
from repo import ROOT

TOL = 1e-5


def rand(shape, rng, scale=1.0):
    x = rng.standard_normal(shape).astype(np.float32) * np.float32(scale)
    assert np.all(x != 0)  # never test on zeros
    return x


def poisoned(shape):
    return cuda.to_device(np.full(shape, np.nan, dtype=np.float32))


def assert_close(out, ref, what):
    out = np.asarray(out, dtype=np.float64)
    unwritten = int(np.isnan(out).sum())
    assert unwritten == 0, f"{what}: {unwritten} of {out.size} outputs never written (still NaN)"
    err = np.linalg.norm(out - ref) / np.linalg.norm(ref)
    worst = np.unravel_index(np.argmax(np.abs(out - ref)), ref.shape)
    assert err < TOL, (
        f"{what}: relative error {err:.2e} >= {TOL:.0e}; worst at {worst}: "
        f"expected {ref[worst]!r}, got {out[worst]!r}"
    )


def silu_mul64(g, u):
    return g / (1.0 + np.exp(-g)) * u


# (tile, M or T, K or d, N or h): the real tile on one shape that runs the interior
# kernel and both edge strips; the small tile (same source) on the awkward sizes.
GEMM_CASES = [
    (TILE, 129, 24, 130),  # 1 interior tile, bottom strip, right strip
    (TILE, 1, 20, 130),  # M = 1, K not a multiple of BK: all guarded
    (SIM_TILE, 1, 16, 33),
    (SIM_TILE, 127, 12, 34),
    (SIM_TILE, 129, 16, 31),
    (SIM_TILE, 64, 0, 32),  # K = 0: the product of empty matrices is zeros
    # the other loop shapes the benchmark compares (whole tiles: the unchecked kernel)
    (Tile(bm=32, bn=32, tm=4, tn=4, prefetch="branchy"), 64, 24, 64),
    (Tile(bm=32, bn=32, tm=4, tn=4, prefetch="clamped"), 64, 24, 64),
    (Tile(bm=32, bn=32, tm=4, tn=4, unroll2=True), 64, 32, 64),  # 4 stages: 1 pair + 1 + last
    (Tile(bm=32, bn=32, tm=4, tn=4, unroll2=True), 32, 40, 32),  # 5 stages: 2 pairs + last
    (Tile(bm=32, bn=32, tm=4, tn=4, bk=16), 64, 48, 32),  # two sub-slabs per stage
    (Tile(bm=32, bn=32, tm=4, tn=4, bk=16, unroll2=True, flat=True), 32, 64, 32),
    (Tile(bm=32, bn=32, tm=4, tn=4), 64, 24, 64),  # the control: 2-D indices, no unroll
    (Tile(bm=32, bn=32, tm=4, tn=4, bk=16), 33, 40, 31),  # K % 16 != 0: all guarded
]
DUAL_CASES = [
    (TILE, 129, 24, 130),  # 2 x 3 blocks: interior, bottom strip, right strip
    (SIM_TILE, 1, 20, 130),
    (SIM_TILE, 127, 16, 34),
    (SIM_TILE, 129, 12, 17),
]


@pytest.mark.parametrize("tile,M,K,N", GEMM_CASES)
def test_matmul_matches_float64(tile, M, K, N):
    rng = np.random.default_rng(M * 1000 + K + N)
    a, b = rand((M, K), rng), rand((K, N), rng)
    out = poisoned((M, N))
    got = gemm.matmul(cuda.to_device(a), cuda.to_device(b), out, tile=tile)
    assert got is out
    ref = a.astype(np.float64) @ b.astype(np.float64)
    if K == 0:
        assert np.all(out.copy_to_host() == 0)
        return
    assert_close(out.copy_to_host(), ref, f"matmul {M}x{K} @ {K}x{N}, {tile}")


@pytest.mark.parametrize("tile,T,d,h", DUAL_CASES)
def test_dual_gemm_matches_float64(tile, T, d, h):
    rng = np.random.default_rng(T * 1000 + d + h)
    x = rand((T, d), rng)
    wg, wu = rand((d, h), rng, d ** -0.5), rand((d, h), rng, d ** -0.5)
    out = poisoned((T, h))
    dual_gemm.swiglu_dual_gemm(cuda.to_device(x), cuda.to_device(wg), cuda.to_device(wu), out,
                               tile=tile)
    x64 = x.astype(np.float64)
    ref = silu_mul64(x64 @ wg.astype(np.float64), x64 @ wu.astype(np.float64))
    assert_close(out.copy_to_host(), ref, f"dual GEMM T={T} d={d} h={h}, {tile}")


@pytest.mark.parametrize("tile,T,d,h", [DUAL_CASES[0], DUAL_CASES[3]])
def test_identity_epilogue_control_matches_float64(tile, T, d, h):
    # the control of chapter 7: the same dual kernel, epilogue gate + up
    rng = np.random.default_rng(T * 7 + d + h)
    x = rand((T, d), rng)
    wg, wu = rand((d, h), rng, d ** -0.5), rand((d, h), rng, d ** -0.5)
    out = poisoned((T, h))
    got = dual_gemm.dual_gemm_identity(cuda.to_device(x), cuda.to_device(wg),
                                       cuda.to_device(wu), out, tile=tile)
    assert got is out
    x64 = x.astype(np.float64)
    ref = x64 @ wg.astype(np.float64) + x64 @ wu.astype(np.float64)
    assert_close(out.copy_to_host(), ref, f"identity dual GEMM T={T} d={d} h={h}, {tile}")


def test_allocates_output_and_fills_it():
    rng = np.random.default_rng(7)
    a, b = rand((5, 8), rng), rand((8, 9), rng)
    got = gemm.matmul(cuda.to_device(a), cuda.to_device(b), tile=SIM_TILE)
    assert got.shape == (5, 9)
    assert_close(got.copy_to_host(), a.astype(np.float64) @ b, "matmul with out=None")


def test_dual_differs_from_swapped_weights():
    # gate and up are not interchangeable: silu(x@wg)*(x@wu) != silu(x@wu)*(x@wg)
    rng = np.random.default_rng(3)
    x, wg, wu = rand((9, 8), rng), rand((8, 16), rng), rand((8, 16), rng)
    d = [cuda.to_device(v) for v in (x, wg, wu)]
    o1 = dual_gemm.swiglu_dual_gemm(d[0], d[1], d[2], tile=SIM_TILE).copy_to_host()
    o2 = dual_gemm.swiglu_dual_gemm(d[0], d[2], d[1], tile=SIM_TILE).copy_to_host()
    assert np.linalg.norm(o1 - o2) > 0.1 * np.linalg.norm(o1)


# --- bad input gets a clear error --------------------------------------------------------


def dev(shape, dtype=np.float32):
    return cuda.to_device(np.ones(shape, dtype=dtype))


@pytest.mark.parametrize("call,exc,match", [
    (lambda: gemm.matmul(np.ones((4, 4), np.float32), dev((4, 4))), TypeError, "to_device"),
    (lambda: gemm.matmul(dev((4, 4), np.float64), dev((4, 4))), TypeError, "float32"),
    (lambda: gemm.matmul(dev((4, 5)), dev((4, 5))), ValueError, "inner dimensions"),
    (lambda: gemm.matmul(dev((4,)), dev((4, 5))), ValueError, "2-D"),
    (lambda: gemm.matmul(dev((4, 5)), dev((5, 3)), dev((4, 4))), ValueError, r"shape \(4, 3\)"),
    (lambda: gemm.matmul(dev((4, 5)), dev((5, 3)), dev((4, 3), np.float16)), TypeError, "float32"),
    (lambda: dual_gemm.swiglu_dual_gemm(dev((4, 5)), dev((5, 3)), dev((5, 4))), ValueError,
     "same shape"),
    (lambda: dual_gemm.swiglu_dual_gemm(dev((4, 5)), dev((3, 5)), dev((3, 5))), ValueError,
     r"weight\.t\(\)"),
    (lambda: gemm.matmul(dev((4, 4)), dev((4, 4)), tile=gemm.Tile(bk=4)), ValueError, "bk"),
    (lambda: gemm.matmul(dev((4, 4)), dev((4, 4)), tile=gemm.Tile(prefetch="x")), ValueError,
     "prefetch"),
    (lambda: gemm.matmul(dev((4, 4)), dev((4, 4)), tile=gemm.Tile(prefetch="clamped", unroll2=True)),
     ValueError, "unroll2"),
])
def test_bad_input_is_named(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_non_contiguous_input_is_refused():
    a = cuda.to_device(np.ones((6, 4), np.float32))
    view = a[:, :2]  # row stride 16 bytes, 2 columns: not row-major contiguous
    with pytest.raises(ValueError, match="contiguous"):
        gemm.matmul(view, dev((2, 3)))


def test_output_overlapping_an_input_is_refused():
    a = dev((4, 4))
    with pytest.raises(ValueError, match="overlaps a"):
        gemm.matmul(a, dev((4, 4)), a)
    x, wg = dev((4, 4)), dev((4, 4))
    with pytest.raises(ValueError, match="overlaps wg"):
        dual_gemm.swiglu_dual_gemm(x, wg, dev((4, 4)), wg)


def test_constants_describe_the_timed_configuration():
    assert (gemm.BM, gemm.BN, gemm.BK, gemm.TM, gemm.TN, gemm.THREADS) == (128, 128, 8, 8, 8, 256)
    assert gemm.MIN_BLOCKS == 2 and TILE.prefetch == "peeled" and TILE.unroll2 and TILE.flat
    # the simulator runs the timed configuration's code path, on smaller tiles
    assert (SIM_TILE.prefetch, SIM_TILE.unroll2, SIM_TILE.flat) == ("peeled", True, True)
    assert dual_gemm.OUT_COLS_PER_BLOCK == 64 and dual_gemm.DUAL_TILE == TILE
    assert gemm.flops(2, 3, 4) == 48 and dual_gemm.flops(2, 4, 3) == 96
    # the wrappers launch the very objects the chapter shows (one dispatcher per config)
    assert gemm.build_kernel(TILE, None, False) is gemm.gemm_kernel
    assert gemm.build_kernel(TILE, dual_gemm.silu_mul, True) is dual_gemm.dual_gemm_kernel_edge
    from book.kernels.elementwise import fused

    assert dual_gemm.silu_mul is fused.silu_mul  # one activation, two kernels
    # the control differs from the measured kernel in its epilogue only
    assert gemm.build_kernel(TILE, dual_gemm.gate_plus_up) is dual_gemm.dual_gemm_identity_kernel
    assert gemm.CHAPTER == dual_gemm.CHAPTER == "07_epilogue_fusion"
    assert (ROOT / "chapters" / f"{gemm.CHAPTER}.ipynb").exists()


def test_tile_variants_are_the_timed_tile_and_its_controls():
    # benchmarks/gemm_bench.py times these side by side; each must be a valid kernel
    assert gemm.TILE_VARIANTS["flat_u2"] is TILE
    fields = ("bm", "bn", "bk", "tm", "tn", "pad", "min_blocks", "prefetch", "unroll2", "flat")
    for name, tile in gemm.TILE_VARIANTS.items():
        tile.validate()
        diff = [f for f in fields if getattr(tile, f) != getattr(TILE, f)]
        assert name == "flat_u2" or 1 <= len(diff) <= 3, (name, diff)  # a control, not a rewrite


# --- the PTX of the configuration we time ------------------------------------------------

_PTX_CHILD = r"""
import json, sys, types
pkg = types.ModuleType("book"); pkg.__path__ = [sys.argv[1] + "/book"]; sys.modules["book"] = pkg
from numba import cuda, float32, int64
from book.kernels import gemm, dual_gemm
arr = float32[:, ::1]
sig = (arr, arr, arr, arr, int64, int64)
kernels = {"gemm": gemm.gemm_kernel, "gemm_edge": gemm.gemm_kernel_edge,
           "dual": dual_gemm.dual_gemm_kernel, "dual_edge": dual_gemm.dual_gemm_kernel_edge,
           "dual_identity": dual_gemm.dual_gemm_identity_kernel}
out = {}
for name in sys.argv[3].split(","):
    k = kernels[name]
    lb = k.targetoptions.get("launch_bounds")  # (256, 2): at most 128 registers
    out[name], _ = cuda.compile_ptx(k.py_func, sig, cc=(9, 0), fastmath=True, launch_bounds=lb)
json.dump(out, open(sys.argv[2], "w"))
"""
# two processes (CI has two cores): each kernel takes NVVM about 20 s
PTX_GROUPS = (("gemm", "dual", "dual_identity"), ("gemm_edge", "dual_edge"))


@pytest.fixture(scope="module")
def ptx(tmp_path_factory):
    base = tmp_path_factory.mktemp("ptx")
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "BOOK_SIMULATOR")}
    procs = [(base / f"gemm_ptx{i}.json",
              subprocess.Popen([sys.executable, "-c", _PTX_CHILD, str(ROOT),
                                str(base / f"gemm_ptx{i}.json"), ",".join(names)],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, cwd=ROOT))
             for i, names in enumerate(PTX_GROUPS)]
    out = {}
    for path, p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
        out.update(json.loads(path.read_text()))
    return out


def body(text):
    return [l.strip() for l in text.splitlines() if l.strip() and not l.strip().startswith("//")]


@pytest.mark.parametrize("name", ["gemm", "gemm_edge", "dual", "dual_edge", "dual_identity"])
@pytest.mark.extended
def test_ptx_registers_only_float32_vector_shared_loads(ptx, name):
    lines = body(ptx[name])
    local = [l for l in lines if ".local" in l]
    assert not local, f"{name}: local memory in PTX (an array left registers): {local[:3]}"
    f64 = [l for l in lines if ".f64" in l]
    assert not f64, f"{name}: float64 arithmetic in PTX: {f64[:3]}"
    fma = sum(l.startswith("fma.rn") and l.split()[0].endswith(".f32") for l in lines)
    assert fma >= 8 * 64, f"{name}: {fma} f32 FMAs; the unrolled 8-step slab needs 512"
    v4 = sum(l.startswith("ld.shared.v4.f32") for l in lines)
    assert v4 >= 24, f"{name}: only {v4} ld.shared.v4.f32 (32 per slab expected): fragments " \
                     "are loaded a float at a time"
    if name in ("dual", "dual_edge"):
        assert any(l.startswith("ex2.approx") for l in lines), f"{name}: epilogue exp is not fast"
    if name == "dual_identity":  # the control: no activation left in it
        assert not any(l.startswith(("ex2", "div", "rcp")) for l in lines), f"{name}: has math"


_REGS_CHILD = r"""
import ctypes, json, sys
from cuda.bindings import nvjitlink as nj
res = {}
for name, text in json.load(open(sys.argv[1])).items():
    data = text.encode()
    buf = ctypes.create_string_buffer(data, len(data) + 1)
    h = nj.create(2, ["-arch=sm_90", "-verbose"])
    nj.add_data(h, nj.InputType.PTX, ctypes.addressof(buf), len(data) + 1, name)
    nj.complete(h)
    log = bytearray(nj.get_info_log_size(h)); nj.get_info_log(h, log)
    nj.destroy(h)
    res[name] = log.decode()
print(json.dumps(res))
"""


@pytest.mark.extended
def test_ptxas_fits_two_blocks_per_sm_and_never_spills(ptx, tmp_path):
    pytest.importorskip("cuda.bindings.nvjitlink", reason="nvJitLink (numba-cuda[cu13]) not installed")
    src = tmp_path / "ptx.json"
    src.write_text(json.dumps(ptx))
    # a child process: nvJitLink and Numba's NVVM in one process have crashed here
    res = subprocess.run([sys.executable, "-c", _REGS_CHILD, str(src)], capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    for name, log in json.loads(res.stdout).items():
        regs = [int(l.split("Used")[1].split()[0]) for l in log.splitlines() if "Used" in l]
        assert regs, f"{name}: no register report in ptxas log:\n{log[-1000:]}"
        assert "0 bytes spill stores, 0 bytes spill loads" in log, f"{name} spills:\n{log}"
        if not name.endswith("_edge"):  # the timed kernels carry launch bounds (256, 2)
            # 256 threads x 128 registers = half the register file: two blocks per SM
            assert regs[0] <= 128, f"{name}: {regs[0]} registers > 128: one block per SM"
