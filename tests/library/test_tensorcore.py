"""Tensor cores from Numba: fragment layouts, the simulated instructions, the mma.sync GEMM.

- the lane -> element tables of book.kernels.instructions.tensorcore against the PTX ISA's own formulas
  ("Matrix Fragments for mma.m16n8k16 / m16n8k8 with floating point type"), and each table
  covers its matrix exactly once;
- one warp (book.kernels.probes.fragments) stages A and B by cp.async, loads them by ldmatrix and
  multiplies by mma.sync: every lane's registers hold what the tables say, D is exactly A @ B
  (small integers), for bf16 and fp16 m16n8k16 and fp16 m16n8k8;
- the tensor-core GEMM's epilogues (SwiGLU, identity, gate|up, plain GEMM) against a float64
  reference within bfloat16 tolerance (tiny shapes: the simulator runs ~7,000 threads/s);
- bad input: a GPU without the instruction, shapes off the tile, misaligned arrays, wrong
  dtypes and shapes are refused with messages naming the problem;
- PTX (no GPU needed): every tensor-core kernel compiles to sm_80 and sm_90 (the m16n8k8 demo
  to sm_75) with mma/ldmatrix/cp.async in it and no local memory.
"""

import json as _json
import os as _os
import re
import shutil as _shutil
import subprocess as _subprocess
import sys as _sys

import numpy as np
import pytest
from repo import ci_keeps, ROOT as _ROOT

import book
from numba import cuda  # after book: it picks GPU or simulator

from book.kernels.probes import fragments
from book.kernels.host import ptx
from book.kernels.gemms import mma_gemm as mg
from book.kernels.instructions import tensorcore as tc


# ---------------------------------------------------------------------------------------
# the PTX ISA's tables, restated from its text (groupID = lane >> 2, threadID_in_group = lane % 4)


def isa_a_16816(lane, i):  # a_i, i = 0..7 (two per register)
    g, t = lane >> 2, lane % 4
    row = g if (i < 2 or 4 <= i < 6) else g + 8
    col = t * 2 + (i & 1) + (8 if i >= 4 else 0)
    return row, col


def isa_b_16816(lane, i):  # b_i, i = 0..3
    g, t = lane >> 2, lane % 4
    row = t * 2 + (i & 1) + (8 if i >= 2 else 0)
    return row, g


def isa_c(lane, i):  # c_i, i = 0..3 (m16n8k16 and m16n8k8 alike)
    g, t = lane >> 2, lane % 4
    return (g if i < 2 else g + 8), t * 2 + (i & 1)


def isa_a_1688(lane, i):  # a_i, i = 0..3
    g, t = lane >> 2, lane % 4
    return (g if i < 2 else g + 8), t * 2 + (i & 1)


def isa_b_1688(lane, i):  # b_i, i = 0..1
    g, t = lane >> 2, lane % 4
    return t * 2 + i, g


TABLES = [  # (ours, the ISA's, elements per lane, matrix shape)
    (tc.a_coords, isa_a_16816, 8, (16, 16)),
    (tc.b_coords, isa_b_16816, 4, (16, 8)),
    (tc.c_coords, isa_c, 4, (16, 8)),
    (tc.a_coords_1688, isa_a_1688, 4, (16, 8)),
    (tc.b_coords_1688, isa_b_1688, 2, (8, 8)),
]


@pytest.mark.parametrize("ours,isa,n,shape", TABLES, ids=lambda v: getattr(v, "__name__", ""))
def test_fragment_tables_match_the_isa(ours, isa, n, shape):
    for lane in range(32):
        for e in range(n):
            assert ours(lane, e) == isa(lane, e), (lane, e)


@pytest.mark.parametrize("ours,isa,n,shape", TABLES, ids=lambda v: getattr(v, "__name__", ""))
def test_each_element_has_exactly_one_owner(ours, isa, n, shape):
    owners = [ours(lane, e) for lane in range(32) for e in range(n)]
    assert sorted(owners) == [(r, c) for r in range(shape[0]) for c in range(shape[1])]


def test_ldmatrix_table():
    # ISA: "each thread receives one 32-bit register per matrix; lane l holds row l/4,
    # elements 2*(l%4) and 2*(l%4)+1"; .trans hands out the transpose
    for lane in range(32):
        for e in range(2):
            assert tc.ldmatrix_coords(lane, e) == (lane // 4, 2 * (lane % 4) + e)
            assert tc.ldmatrix_coords(lane, e, trans=True) == (2 * (lane % 4) + e, lane // 4)


def test_capability_messages():
    tc.check_capability((9, 0))
    tc.check_capability((8, 0))
    with pytest.raises(RuntimeError, match=r"sm_75 .*compute capability 7\.5.*8\.0.*m16n8k8"):
        tc.check_capability((7, 5))
    with pytest.raises(RuntimeError, match=r"sm_70 .*7\.5.*CUDA-core"):
        tc.check_capability((7, 0))


def test_a_capability_asked_about_is_not_called_this_gpu(monkeypatch):
    """Reader QA: chapter 8, recorded on an H100, printed "this GPU is sm_75" from a loop that
    shows what the course does on a T4. A capability other than the one this process runs
    for is spoken of as one asked about; the GPU's own keeps "this GPU is"."""
    from book import capability
    from book.kernels.instructions import hopper as H

    monkeypatch.setattr(capability, "target_cc", lambda: (9, 0))  # as on the H100 that recorded it
    for cc, dtype in (((7, 5), "bfloat16"), ((7, 0), "float16")):
        with pytest.raises(RuntimeError) as e:
            tc.check_capability(cc, dtype)
        said = str(e.value)
        assert "this GPU" not in said and said.startswith(
            f"on sm_{cc[0]}{cc[1]} (compute capability {cc[0]}.{cc[1]}) the course would "
            "refuse"), said
    with pytest.raises(RuntimeError) as e:
        H.check_capability((8, 0))
    assert str(e.value).startswith("on sm_80 the course would refuse this kernel")
    monkeypatch.setattr(capability, "target_cc", lambda: (7, 5))  # a T4 itself
    with pytest.raises(RuntimeError, match=r"^this GPU is sm_75 .*It can run the fp16"):
        tc.check_capability((7, 5), "bfloat16")
    monkeypatch.setattr(capability, "target_cc", lambda: (8, 0))
    with pytest.raises(RuntimeError, match=r"^this GPU is sm_80: .* Use the mma\.sync"):
        H.check_capability((8, 0))


# ---------------------------------------------------------------------------------------
# one warp, one instruction (simulated here; the same kernel on a GPU)


def _bits(a, kind):
    if kind.startswith("bf16"):
        b = np.asarray(a, np.float32).view(np.uint32)
        assert not (b & 0xFFFF).any()  # exactly representable: these are small integers
        return (b >> 16).astype(np.uint16)
    return np.asarray(a, np.float16).view(np.uint16)


@pytest.mark.parametrize("kind", fragments.KINDS)
def test_one_warp_mma_registers_and_product(kind):
    if not book.gpu.SIMULATED:
        tc.check_capability(book.gpu.device_info().compute_capability,
                            "bfloat16" if kind.startswith("bf16") else "float16")
    K = fragments.K_OF[kind]
    # distinct small integers: exact in bf16/fp16, their products summed exactly in float32
    A = ((np.arange(16 * K).reshape(16, K) * 7) % 61 - 30).astype(np.float32)
    B = ((np.arange(K * 8).reshape(K, 8) * 5) % 53 - 26).astype(np.float32)
    a, b = _bits(A, kind), _bits(B, kind)
    D, regs = fragments.run_tile_mma(kind, a, b)
    np.testing.assert_array_equal(D, A @ B)
    acoords = tc.a_coords if K == 16 else tc.a_coords_1688
    bcoords = tc.b_coords if K == 16 else tc.b_coords_1688
    na, nb = (4, 2) if K == 16 else (2, 1)
    for lane in range(32):
        for v in range(na):
            lo, hi = tc.unpack(regs[lane, v])
            assert (lo, hi) == (a[acoords(lane, 2 * v)], a[acoords(lane, 2 * v + 1)]), (lane, v)
        for v in range(nb):
            lo, hi = tc.unpack(regs[lane, 4 + v])
            assert (lo, hi) == (b[bcoords(lane, 2 * v)], b[bcoords(lane, 2 * v + 1)]), (lane, v)


@pytest.mark.skipif(not book.gpu.SIMULATED, reason="the simulator's own alignment check")
def test_simulated_cp_async_refuses_a_misaligned_piece():
    @cuda.jit
    def copy(dst, src):
        s = cuda.shared.array(16, np.uint16)
        tc.cp_async16(s, 4, src, 0)  # element 4 of a 16-bit array: 8 bytes in
        dst[0] = s[4]

    with pytest.raises(ValueError, match="16-byte aligned"):
        copy[1, 1](cuda.to_device(np.zeros(1, np.uint16)), cuda.to_device(np.zeros(16, np.uint16)))


# ---------------------------------------------------------------------------------------
# the GEMM


def bf16(a):
    b = np.asarray(a, np.float32).view(np.uint32)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def f32(bits):
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32)


def inputs(T, d, h, seed=0):
    rng = np.random.default_rng(seed)
    x = bf16(rng.standard_normal((T, d)))
    wg = bf16(rng.standard_normal((d, h)) / np.sqrt(d))
    wu = bf16(rng.standard_normal((d, h)) / np.sqrt(d))
    X, G, U = (f32(v).astype(np.float64) for v in (x, wg, wu))
    return (x, wg, wu), X @ G, X @ U


def close(got_bits, ref):
    # one bfloat16 rounding of a float32 accumulation: relative 2^-8 of the value
    got = f32(got_bits).astype(np.float64)
    np.testing.assert_allclose(got, ref, rtol=2 ** -7, atol=2 ** -7 * np.abs(ref).max())


def tile_shape(blocks_m=1, blocks_n=1, kt=2):
    t = mg.default_tile()
    return blocks_m * t.bm, kt * t.bk, blocks_n * (t.bn // 2)


def test_dual_gemm_swiglu_and_identity():
    T, d, h = tile_shape(kt=3)  # three k steps: the ring of stages wraps around
    (x, wg, wu), g, u = inputs(T, d, h)
    dev = [cuda.to_device(a) for a in (x, wg, wu)]
    close(mg.swiglu_mma(*dev).copy_to_host(), g / (1 + np.exp(-g)) * u)
    close(mg.swiglu_mma_identity(*dev).copy_to_host(), g + u)


def test_gate_up_and_plain_gemm_over_several_blocks():
    T, d, h = tile_shape(blocks_m=2, blocks_n=1, kt=1)
    (x, wg, wu), g, u = inputs(T, d, h, seed=1)
    dev = [cuda.to_device(a) for a in (x, wg, wu)]
    G, U = mg.gate_up_mma(*dev)
    close(G.copy_to_host(), g)
    close(U.copy_to_host(), u)
    w = np.concatenate([wg, wu], axis=1)  # [d, 2h]: a plain GEMM of two blocks across
    close(mg.matmul_mma(dev[0], cuda.to_device(w)).copy_to_host(), np.concatenate([g, u], 1))


@pytest.mark.parametrize("kind", ["f16", "f16_sm75"])
def test_float16_paths(kind):
    # f16: m16n8k16 + cp.async (sm_80+); f16_sm75: the T4's two m16n8k8 per step, tiles
    # through registers (what kind_for picks below sm_80)
    t = mg.default_tile()
    T, d, h = t.bm, 2 * t.bk, t.bn // 2
    rng = np.random.default_rng(3)
    x = rng.standard_normal((T, d)).astype(np.float16)
    wg = (rng.standard_normal((d, h)) / 8).astype(np.float16)
    wu = (rng.standard_normal((d, h)) / 8).astype(np.float16)
    g = x.astype(np.float64) @ wg.astype(np.float64)
    u = x.astype(np.float64) @ wu.astype(np.float64)
    if kind == "f16":
        out = mg.swiglu_mma(*(cuda.to_device(a) for a in (x, wg, wu))).copy_to_host()
    else:  # launched directly: its instructions exist on every GPU from sm_75 on
        t = mg.MmaTile(**{**t.__dict__, "stages": 2}).validate()
        out = cuda.to_device(np.zeros((T, h), np.float16))
        kern = mg.build_kernel(t, "swiglu", "f16_sm75")
        flat = [cuda.to_device(a.reshape(-1)) for a in (x, wg, wu)] + [out.reshape(T * h)] * 2
        kern[(T // t.bm) * (h // (t.bn // 2)), t.threads](*flat, T, h, d)
        out = out.copy_to_host()
    assert out.dtype == np.float16
    ref = g / (1 + np.exp(-g)) * u
    np.testing.assert_allclose(out.astype(np.float64), ref, rtol=2 ** -9, atol=2 ** -9 * np.abs(ref).max())
    assert mg.kind_for("float16", (7, 5)) == "f16_sm75" and mg.kind_for("float16", (9, 0)) == "f16"
    assert mg.kind_for("bfloat16", (8, 0)) == "bf16"
    with pytest.raises(RuntimeError, match="compute capability 8.0"):
        mg.kind_for("bfloat16", (7, 5))


# Any T, d and h multiples of 8 (issue 31): edge tiles in every direction, against float64.
# T = 1 (decode), 64 and 200 (ragged prefill batches, not a multiple of any block tile); d
# and h off the block tile and the k-slab, so the last block-row, block-column and k-slab
# are all partial and their predicated copies must read zeros.
@pytest.mark.parametrize("T,d,h", ci_keeps([(1, 40, 24), (64, 8, 8), (200, 16, 8)]))
def test_any_t_and_multiples_of_8_match_float64(T, d, h):
    (x, wg, wu), g, u = inputs(T, d, h, seed=T)
    dev = [cuda.to_device(a) for a in (x, wg, wu)]
    out = cuda.to_device(np.full((T, h), 0x7FC0, np.uint16))  # NaN: every element must be written
    mg.swiglu_mma(*dev, out)
    close(out.copy_to_host(), g / (1 + np.exp(-g)) * u)


def test_edge_tiles_of_every_epilogue_and_the_t4_path():
    # the plain GEMM's second half of a block (HALF columns on) is partial on its own; the
    # gate|up store; the sm_75 path's predicated register copies (copy16_zfill_at)
    T, d, h = 3, 24, 40
    (x, wg, wu), g, u = inputs(T, d, h, seed=5)
    dev = [cuda.to_device(a) for a in (x, wg, wu)]
    G, U = mg.gate_up_mma(*dev)
    close(G.copy_to_host(), g)
    close(U.copy_to_host(), u)
    close(mg.swiglu_mma_identity(*dev).copy_to_host(), g + u)
    w = np.concatenate([wg, wu], axis=1)  # [d, 80]: the second block-column's up half is empty
    close(mg.matmul_mma(dev[0], cuda.to_device(w)).copy_to_host(), np.concatenate([g, u], 1))
    t = mg.MmaTile(**{**mg.default_tile().__dict__, "stages": 2}).validate()
    xf = f32(x).astype(np.float16)
    wgf, wuf = f32(wg).astype(np.float16), f32(wu).astype(np.float16)
    out = cuda.to_device(np.full((T, h), np.nan, np.float16))
    kern = mg.build_kernel(t, "swiglu", "f16_sm75")
    flat = [cuda.to_device(a.reshape(-1)) for a in (xf, wgf, wuf)] + [out.reshape(T * h)] * 2
    kern[mg.grid_size(t, T, h, True), t.threads](*flat, T, h, d)
    ref = g / (1 + np.exp(-g)) * u
    np.testing.assert_allclose(out.copy_to_host().astype(np.float64), ref, rtol=2 ** -9,
                               atol=2 ** -9 * np.abs(ref).max())


def test_nothing_to_compute_is_an_empty_result():
    z = lambda *s: cuda.to_device(np.zeros(s, np.uint16))  # noqa: E731
    assert mg.swiglu_mma(z(0, 16), z(16, 8), z(16, 8)).shape == (0, 8)


def test_bad_input_is_refused_with_the_fix():
    t = mg.TILE  # the checks run before any launch: the H100 tile's numbers
    z = lambda *s: cuda.to_device(np.zeros(s, np.uint16))  # noqa: E731
    with pytest.raises(ValueError, match=r"d \(columns of x\) = 36 is not a multiple of 8"):
        mg.swiglu_mma(z(100, 36), z(36, 64), z(36, 64), tile=t)
    with pytest.raises(ValueError, match=r"h \(columns of the weights\) = 100 is not a multiple of 8"):
        mg.swiglu_mma(z(128, 64), z(64, 100), z(64, 100), tile=t)
    with pytest.raises(ValueError, match=r"d \(columns of x\) = 0: there is nothing"):
        mg.swiglu_mma(z(4, 0), z(0, 64), z(0, 64), tile=t)
    with pytest.raises(ValueError, match=r"wu is \(64, 32\); expected \[d, h\] = \[64, 64\]"):
        mg.swiglu_mma(z(128, 64), z(64, 64), z(64, 32), tile=t)
    with pytest.raises(TypeError, match="bfloat16"):
        mg.swiglu_mma(cuda.to_device(np.zeros((128, 64), np.float32)), z(64, 64), z(64, 64), tile=t)
    with pytest.raises(TypeError, match="one dtype"):
        mg.swiglu_mma(cuda.to_device(np.zeros((128, 64), np.float16)), z(64, 64), z(64, 64), tile=t)
    buf = cuda.to_device(np.zeros(128 * 64 + 1, np.uint16))
    with pytest.raises(ValueError, match="not a multiple of 16 bytes"):
        mg.swiglu_mma(buf[1:].reshape(128, 64), z(64, 64), z(64, 64), tile=t)


def test_tiles_are_validated():
    with pytest.raises(ValueError, match="at most"):
        mg.MmaTile(bk=128, stages=8).validate()
    with pytest.raises(ValueError, match="nt must be a multiple of 4"):
        mg.MmaTile(nt=6).validate()
    assert mg.TILE.bm % 16 == 0 and mg.TILE.threads % 32 == 0


# ---------------------------------------------------------------------------------------
# PTX: compiled by NVVM with no GPU


PTX_ITEMS = [(name, cc) for name in [f"mma_{e}" for e in mg.EPILOGUES]
             + ["mma_swiglu_f16", "fragments_bf16_16816", "fragments_f16_16816"]
             for cc in ((8, 0), (9, 0))]
SM75_ITEMS = [("fragments_f16_1688", (7, 5)), ("mma_swiglu_f16_sm75", (7, 5))]


@pytest.fixture(scope="module")
def texts():
    out = {}
    for cc in ((8, 0), (9, 0)):
        names = [n for n, c in PTX_ITEMS if c == cc]
        for key, text in ptx.ptx_many([(n, "bfloat16") for n in names], cc).items():
            out[(key.split("/")[0], cc)] = text
    for key, text in ptx.ptx_many([(n, "bfloat16") for n, _ in SM75_ITEMS], (7, 5)).items():
        out[(key.split("/")[0], (7, 5))] = text
    return out


MMA = {"bf16": "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
       "f16": "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
       "1688": "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32"}


@pytest.mark.extended
@pytest.mark.parametrize("name,cc", PTX_ITEMS + SM75_ITEMS)
def test_tensor_core_ptx(texts, name, cc):
    text = texts[(name, cc)]
    assert f".target sm_{cc[0]}{cc[1]}" in text
    want = (MMA["1688"] if "1688" in name or "sm75" in name else
            MMA["f16"] if "_f16" in name else MMA["bf16"])
    assert want in text
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in text
    assert "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in text
    if name == "mma_ceiling" or cc < (8, 0):
        assert "cp.async" not in text  # the ceiling loads nothing; sm_75 has no cp.async
    else:
        assert "cp.async.cg.shared.global" in text and "cp.async.wait_group" in text
    assert not re.search(r"\b(ld|st)\.local", text), f"{name} spills to local memory"


@pytest.mark.extended
def test_gemm_main_loop_is_all_tensor_work(texts):
    # per 32-deep stage a warp issues 64 mma (4 x 8 tiles, two steps) and 16 ldmatrix
    text = texts[("mma_swiglu", (9, 0))]
    assert text.count(MMA["bf16"]) >= 2 * mg.TILE.mt * mg.TILE.nt
    assert "cvt.rn.bf16x2.f32" in text and "st.global.u32" in text  # one packed store


# ---------------------------------------------------------------------------------------
# The T4 switch (book/target.py): COURSE_TARGET_CC=7.5 makes the simulator or any newer GPU
# take the sm_75 paths. Each case runs in a fresh process: the switch is read before kernels
# compile (and, on a GPU, before numba.cuda loads).


def test_the_switch_is_read_and_a_malformed_one_refused(monkeypatch):
    from book import target

    monkeypatch.delenv(target.TARGET_CC_ENV, raising=False)
    assert target.forced_cc() is None
    monkeypatch.setenv(target.TARGET_CC_ENV, "7.5")
    assert target.forced_cc() == (7, 5)
    assert target.describe((7, 5), (9, 0)) == "sm_75 (COURSE_TARGET_CC=7.5, on an sm_90 GPU)"
    assert target.describe((7, 5), simulated=True).endswith("in Numba's CUDA simulator)")
    assert target.describe((7, 5)).endswith("compiled with no GPU here)")  # tools/lab_ptx.py
    assert target.describe((9, 0)) == "sm_90"  # not the switch's: no reason given
    with pytest.raises(RuntimeError, match=r"target is sm_75 .*chosen by COURSE_TARGET_CC"):
        tc.check_capability((7, 5), "bfloat16")
    monkeypatch.setenv(target.TARGET_CC_ENV, "sm_75")
    with pytest.raises(ValueError, match=r"COURSE_TARGET_CC='sm_75'.*major\.minor, e\.g\. 7\.5"):
        target.forced_cc()


def _run_with_switch(script: str, cc: str = "7.5", simulator: bool = True, timeout=600) -> dict:
    """Run ``script`` (it prints one JSON object last) in a fresh process with the switch."""
    env = {k: v for k, v in _os.environ.items() if k not in ("BOOK_SIMULATOR",
                                                            "NUMBA_ENABLE_CUDASIM")}
    env.update(COURSE_TARGET_CC=cc, BOOK_QUIET="1", PYTHONPATH=_os.pathsep.join(
        p for p in (str(_ROOT), _os.environ.get("PYTHONPATH")) if p))
    if simulator:
        env["BOOK_SIMULATOR"] = "1"
    p = _subprocess.run([_sys.executable, "-c", script], cwd=_ROOT, env=env, capture_output=True,
                        text=True, timeout=timeout)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return _json.loads(p.stdout.strip().splitlines()[-1])


# The T4 branches, on whatever the process runs on (simulator or GPU): the target, the kernel
# path chosen for float16, its four epilogues against float64, bfloat16 refused with the reason,
# the one-warp m16n8k8, and on a GPU the PTX the switch had Numba emit.
T4_SCRIPT = r'''
import json, re, sys
import numpy as np
import book
from numba import cuda
from book import exercises
from book.kernels import fragments, mma_gemm as mg, tensorcore as tc

out = {"target": list(tc.target_cc()), "described": tc.target_description(),
       "kind": mg.kind_for("float16", tc.target_cc())}
t = mg.default_tile()
T, d, h = (t.bm * 2, t.bk * 4, t.bn) if not tc.SIMULATED else (t.bm, t.bk * 2, t.bn // 2)
rng = np.random.default_rng(5)
x = rng.standard_normal((T, d)).astype(np.float16)
wg, wu = ((rng.standard_normal((d, h)) / 8).astype(np.float16) for _ in range(2))
G, U = (x.astype(np.float64) @ w.astype(np.float64) for w in (wg, wu))
dev = [cuda.to_device(a) for a in (x, wg, wu)]
got = {"swiglu": (mg.swiglu_mma(*dev), G / (1 + np.exp(-G)) * U),
       "identity": (mg.swiglu_mma_identity(*dev), G + U)}
gate, up = mg.gate_up_mma(*dev)
got["gate"], got["up"] = (gate, G), (up, U)
if not tc.SIMULATED:  # (the plain GEMM's two blocks across are slow in the simulator)
    w = np.concatenate([wg, wu], axis=1)
    got["gemm"] = (mg.matmul_mma(dev[0], cuda.to_device(w)), np.concatenate([G, U], 1))
out["error_over_bound"] = {
    k: float(np.abs(o.copy_to_host().astype(np.float64) - r).max() / (2.0 ** -10 * np.abs(r).max()))
    for k, (o, r) in got.items()}
try:
    mg.swiglu_mma(*(cuda.to_device(a.view(np.uint16)) for a in (x, wg, wu)))
    out["bf16"] = "ran"
except RuntimeError as e:
    out["bf16"] = str(e)
out["bf16_cannot_run"] = tc.cannot_run("bfloat16")
A = ((np.arange(128).reshape(16, 8) * 7) % 61 - 30).astype(np.float32)
B = ((np.arange(64).reshape(8, 8) * 5) % 53 - 26).astype(np.float32)
D, _ = fragments.run_tile_mma("f16_1688", A.astype(np.float16).view(np.uint16),
                              B.astype(np.float16).view(np.uint16))
out["m16n8k8_exact"] = bool(np.array_equal(D, A @ B))
out["fragment_kind"] = exercises.fix_fragment_index().registers()[0]
if not tc.SIMULATED:
    from numba.cuda.core import config
    out["numba_force_cc"] = list(config.FORCE_CUDA_CC or ())
    tile = mg.MmaTile(**{**t.__dict__, "stages": 2})  # the T4 path's tile (mma_gemm._run)
    ptx = "\n".join(mg.build_kernel(tile, "swiglu", "f16_sm75").inspect_asm().values())
    out["ptx_target"] = re.search(r"\.target\s+(\w+)", ptx).group(1)
    out["ptx_cp_async"] = "cp.async" in ptx
    out["ptx_m16n8k8"] = "mma.sync.aligned.m16n8k8" in ptx
print(json.dumps(out))
'''


def _check_t4_paths(out, on_gpu):
    assert out["target"] == [7, 5] and out["kind"] == "f16_sm75"
    assert out["described"].startswith("sm_75 (COURSE_TARGET_CC=7.5, ")
    assert ("on an sm_" in out["described"]) == on_gpu
    # a float16 output rounds to 11 bits: within 2^-10 of the largest value, every epilogue
    assert all(v <= 1.0 for v in out["error_over_bound"].values()), out["error_over_bound"]
    assert "chosen by COURSE_TARGET_CC" in out["bf16"] and "8.0" in out["bf16"]
    assert out["bf16_cannot_run"] == out["bf16"]
    assert out["m16n8k8_exact"] and out["fragment_kind"] == "f16_1688"


def test_under_the_switch_the_simulator_takes_the_t4_paths():
    if not book.gpu.SIMULATED:
        pytest.skip("the GPU's own run: test_the_t4_branches_of_mma_gemm_run_on_the_gpu")
    _check_t4_paths(_run_with_switch(T4_SCRIPT), on_gpu=False)


@pytest.mark.gpu
def test_the_t4_branches_of_mma_gemm_run_on_the_gpu():
    """The forced sm_75 path on a real, newer GPU: Numba emitted PTX for sm_75 (so ptxas would
    have refused any sm_80 instruction), m16n8k8 and no cp.async in it, every epilogue right."""
    out = _run_with_switch(T4_SCRIPT, simulator=False)
    _check_t4_paths(out, on_gpu=True)
    assert out["numba_force_cc"] == [7, 5] and out["ptx_target"] == "sm_75"
    assert out["ptx_m16n8k8"] and not out["ptx_cp_async"]
    assert set(out["error_over_bound"]) == {"swiglu", "identity", "gate", "up", "gemm"}


@pytest.mark.gpu
def test_the_switch_refuses_a_target_newer_than_the_gpu():
    script = ("import json, book\nfrom book.kernels import tensorcore as tc\n"
              "try:\n    tc.target_cc(); print(json.dumps('accepted'))\n"
              "except RuntimeError as e:\n    print(json.dumps(str(e)))")
    said = _run_with_switch(script, cc="99.0", simulator=False)
    assert said.startswith("COURSE_TARGET_CC=99.0 names a newer GPU than this one"), said


def _ptxas_for(text: str, arch: str):
    """Assemble PTX for ``arch`` with the ptxas on PATH: (return code, messages). A ptxas older
    than the NVVM that wrote the PTX refuses its .version; the text is then given the newest
    version this ptxas knows (the instructions used here are all older than it)."""
    import tempfile

    def run(t):
        with tempfile.TemporaryDirectory() as tmp:
            src = _os.path.join(tmp, "k.ptx")
            with open(src, "w") as f:
                f.write(t)
            p = _subprocess.run(["ptxas", f"-arch={arch}", src, "-o", _os.path.join(tmp, "k.o")],
                                capture_output=True, text=True, timeout=300)
            return p.returncode, p.stdout + p.stderr

    rc, msg = run(text)
    old = re.search(r"Unsupported \.version \S+; current version is '([\d.]+)'", msg)
    if old:
        rc, msg = run(re.sub(r"^\.version \S+", f".version {old.group(1)}", text, flags=re.M))
    return rc, msg


@pytest.mark.extended
@pytest.mark.skipif(_shutil.which("ptxas") is None, reason="no ptxas on PATH (the CUDA toolkit)")
def test_the_t4_ptx_assembles_for_sm75_and_a_newer_gpu_and_the_bf16_kernel_is_refused():
    """What the switch relies on, with no GPU: PTX compiled for sm_75 assembles for sm_75 and
    for sm_90a (the driver's JIT on an H100 does the same), and ptxas refuses the bf16 kernel's
    cp.async in sm_75 PTX even when it assembles for sm_90a."""
    texts = ptx.ptx_many([("mma_swiglu_f16_sm75", "bfloat16"), ("fragments_f16_1688", "bfloat16"),
                          ("mma_swiglu", "bfloat16")], (7, 5))
    for name in ("mma_swiglu_f16_sm75", "fragments_f16_1688"):
        for arch in ("sm_75", "sm_90a"):
            rc, msg = _ptxas_for(texts[f"{name}/bfloat16"], arch)
            assert rc == 0, (name, arch, msg[-2000:])
    for arch in ("sm_75", "sm_90a"):
        rc, msg = _ptxas_for(texts["mma_swiglu/bfloat16"], arch)
        assert rc != 0 and "Feature 'cp.async' requires .target sm_80" in msg, (arch, msg[-2000:])
