"""Read the PTX of every kernel for what matters (no GPU needed: NVVM ships as a wheel).

- float32 kernels do float32 arithmetic only (no .f64 instruction), except the
  float64-literal pitfall, which must show div.rn.f64;
- fastmath turns exp into ex2.approx and the division into div.approx, and shortens the code;
- the vectorized kernels use wide accesses (ld/st.global.v2/.v4), and issue their loads
  before their first store;
- half-precision kernels widen to float32 (no f16/bf16 arithmetic);
- nothing spills to local memory.
"""

import re

import pytest

import book  # noqa: F401
from book.kernels.host import ptx

ITEMS = [(name, dtype) for name in ptx.kernels() for dtype in ("float32", "float16", "bfloat16")
         if not (("vec" in name or "f64" in name) and dtype != "float32")
         and not ("half" in name and dtype == "float32")]


@pytest.fixture(scope="module")
def texts():
    # one compilation pass for the whole module (in the simulator: one subprocess)
    return ptx.ptx_many(ITEMS)


def ops(texts, name, dtype="float32"):
    return ptx.opcodes(texts[f"{name}/{dtype}"])


F32_KERNELS = [n for n, d in ITEMS if d == "float32" and n != "fused_f64_literal"]


@pytest.mark.parametrize("name", F32_KERNELS)
def test_float32_kernels_do_no_float64_arithmetic(texts, name):
    f64 = sorted(o for o in ops(texts, name) if ".f64" in o)
    assert not f64, f"{name} has float64 instructions: {f64}"


def test_f64_literal_pitfall_divides_in_float64(texts):
    o = ops(texts, "fused_f64_literal")
    assert "div.rn.f64" in o
    assert any(x.startswith("cvt") and "f64.f32" in x for x in o)  # promotes the f32 input


def test_fastmath_exp_and_division(texts):
    fast, ieee = ops(texts, "fused_fastmath"), ops(texts, "fused")
    assert any(o.startswith("ex2.approx") for o in fast)
    assert any(o.startswith("div.approx") for o in fast) and "div.rn.f32" not in fast
    assert "div.rn.f32" in ieee and not any(o.startswith("div.approx") for o in ieee)
    n_fast = len(ptx.instructions(texts["fused_fastmath/float32"]))
    n_ieee = len(ptx.instructions(texts["fused/float32"]))
    assert n_fast < n_ieee, (n_fast, n_ieee)


@pytest.mark.parametrize("name,width", [("vec2", "v2.f32"), ("vec4", "v4.f32"), ("packed_vec4", "v4.f32"),
                                        ("naive_silu_vec4", "v4.f32"), ("naive_mul_vec4", "v4.f32")])
def test_float32_wide_accesses(texts, name, width):
    o = ops(texts, name)
    assert f"ld.global.{width}" in o and f"st.global.{width}" in o, sorted(o)


@pytest.mark.parametrize("name,dtype,width", [
    ("half8", "float16", "v4.u32"), ("half8", "bfloat16", "v4.u32"),
    ("half4", "float16", "v2.u32"), ("half4", "bfloat16", "v2.u32"),
    ("packed_half8", "float16", "v4.u32"), ("packed_half8", "bfloat16", "v4.u32"),
    ("naive_silu_half8", "float16", "v4.u32"), ("naive_mul_half8", "bfloat16", "v4.u32"),
])
def test_half_wide_accesses(texts, name, dtype, width):
    o = ops(texts, name, dtype)
    assert f"ld.global.{width}" in o and f"st.global.{width}" in o, sorted(o)


@pytest.mark.parametrize("name,dtype", [(n, d) for n, d in ITEMS if d != "float32"])
def test_half_kernels_compute_in_float32(texts, name, dtype):
    o = ops(texts, name, dtype)
    # The naive multiply kernel alone may become mul.f16: LLVM narrows
    # fptrunc(fpext(a) * fpext(b)) because the float32 product of two halves is exact, so
    # rounding it once to half is the same as a half multiply. Nothing else may.
    allowed = ("mul.",) if "mul" in name else ()
    arith = sorted(x for x in o if re.match(r"(add|sub|mul|fma|div|ex2|rcp)\.", x)
                   and (".f16" in x or ".bf16" in x) and not x.startswith(allowed))
    assert not arith, f"{name}/{dtype} does half-precision arithmetic: {arith}"
    if "mul" not in name:  # the silu kernels
        assert any(x.startswith("ex2.approx") and x.endswith(".f32") for x in o)


def basic_blocks(text):
    """PTX split at labels: lists of instruction lines."""
    blocks, cur = [], []
    for line in text.splitlines():
        s = line.strip()
        if re.match(r"^\$?[\w$]+:$", s):
            blocks.append(cur)
            cur = []
        elif s and not s.startswith(("//", ".", "{", "}")):
            cur.append(s)
    return blocks + [cur]


@pytest.mark.parametrize("name,need", [("vec4", 4), ("half8", 4), ("packed_vec4", 4),
                                       ("packed_half8", 4), ("ilp4", 8)])
def test_loads_are_issued_before_the_first_store(texts, name, need):
    # The whole-tile path is one basic block: all its loads come before its first store
    # (a store in between would pin the later loads behind it: out may alias gate).
    dtype = "float16" if "half" in name else "float32"
    best = 0
    for block in basic_blocks(texts[f"{name}/{dtype}"]):
        loads = 0
        for line in block:
            if line.startswith("st.global"):
                break
            loads += line.startswith("ld.global")
        best = max(best, loads)
    assert best >= need, f"{name}: at most {best} loads before a store in any block"


@pytest.mark.parametrize("name,dtype", ITEMS)
def test_no_local_memory(texts, name, dtype):
    local = sorted(o for o in ops(texts, name, dtype) if ".local" in o)
    assert not local, f"{name}/{dtype} uses local memory: {local}"


def test_ptx_targets_hopper(texts):
    assert ".target sm_90" in texts["vec4/float32"]


# ---------------------------------------------------------------------------------------
# the decode GEMVs (book.kernels.gemv.decode_mlp), compiled for sm_90 (and the T4's path for sm_75)

DECODE_ITEMS = [n for n in ptx.decode_kernels() if not n.endswith("_sm75")]


@pytest.fixture(scope="module")
def decode_texts():
    out = {k.split("/")[0]: v for k, v in ptx.ptx_many([(n, "bfloat16") for n in DECODE_ITEMS]).items()}
    out.update({k.split("/")[0]: v for k, v in ptx.ptx_many(
        [("decode_mma_t64_sm75", "bfloat16")], cc=(7, 5)).items()})
    return out


@pytest.mark.parametrize("name", DECODE_ITEMS + ["decode_mma_t64_sm75"])
@pytest.mark.extended
def test_decode_gemvs_read_weights_16_bytes_at_a_time_and_keep_registers(decode_texts, name):
    text = decode_texts[name]
    o = ptx.opcodes(text)
    local = sorted(x for x in o if ".local" in x)
    assert not local, f"{name} keeps something in local memory: {local}"
    assert "ld.global.v4.u32" in o, f"{name}: no 16-byte loads: {sorted(o)}"
    assert not [x for x in o if ".f64" in x], f"{name} does float64 arithmetic"
    assert any(x.startswith("ex2.approx") for x in o)  # the SiLU, fast math, in the epilogue
    if "_mma_" in name:
        want = ("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32" if name.endswith("sm75") else
                "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" if name.endswith("_f16") else
                "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32")
        assert want in text, f"{name}: no {want}"
        assert "ldmatrix" not in text
        if name.endswith("_ring"):  # the weights through a cp.async ring (stages >= 2)
            assert "cp.async.cg.shared.global" in text and "cp.async.commit_group" in o
            assert "cp.async.wait_group" in o
            assert "ld.shared.v4.u32" in o, f"{name}: fragments not read 16 bytes at a time"
        else:
            assert "cp.async" not in text  # straight to registers
    else:
        assert "shfl.sync.bfly.b32" in o  # the warp's sums by shuffles


@pytest.mark.extended
def test_the_ring_assembles_with_the_shared_memory_its_tile_counts(decode_texts):
    # ptxas (nvJitLink, no GPU) takes the staged kernel for sm_90: no spills, and the static
    # shared memory it reports is what MmaGemvTile.shared_bytes validates (+ 1 KiB that sm_90
    # reserves per block), so the 48 KiB check refuses what ptxas would
    import re

    from book.kernels.gemv import mma_gemv as mmv

    ok, log = ptx.ptxas_log(decode_texts["decode_mma_t16_ring"], arch="sm_90")
    assert ok, log
    m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
    assert m and m.groups() == ("0", "0"), log
    smem = int(re.search(r"(\d+) bytes smem", log).group(1))
    assert smem == mmv.MmaGemvTile(nt=2, mt=1, warps=4, stages=3).shared_bytes + 1024, log


@pytest.mark.parametrize("T", [1, 2, 4, 8])
@pytest.mark.extended
def test_the_cuda_core_gemv_unrolls_a_whole_piece(decode_texts, T):
    # every FMA of one 16-byte piece (rows x (gate, up) x tokens x 8) is in the straight-line
    # body: nothing of the accumulators is indexed at run time
    from book.kernels.gemv import cuda_core_gemv as ccg

    tile = ccg.gemv_tile(T, 4096)
    fma = sum(line.startswith("fma.rn") for line in ptx.instructions(decode_texts[f"decode_gemv_t{T}"]))
    assert fma >= 2 * 8 * tile.rows * tile.tokens, (fma, tile)
