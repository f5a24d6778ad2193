"""The access tracer (book.tracer) on kernels whose memory traffic is known by hand.

Everything runs for real in Numba's CUDA simulator (the tests' session is simulated)."""

import book  # first: it decides GPU or simulator before numba.cuda loads
import numpy as np
import pytest
from numba import cuda, float32

from book import tracer
from book.tracer import child
from book.kernels.elementwise import fused, vectorized

pytestmark = pytest.mark.skipif(not book.gpu.SIMULATED,
                                reason="in-process tracing runs in the simulator")


@cuda.jit
def copy_kernel(a, b):
    i = cuda.grid(1)
    if i < b.size:
        b[i] = a[i]


@cuda.jit
def stride2_kernel(a, b):
    i = cuda.grid(1)
    if i < b.size:
        b[i] = a[2 * i]


@cuda.jit
def column_kernel(a, b):
    """Fill a 32x32 shared tile row by row, then read a column: every lane hits bank 0."""
    s = cuda.shared.array((32, 32), float32)
    t = cuda.threadIdx.x
    for j in range(32):
        s[j, t] = a[j * 32 + t]
    cuda.syncthreads()
    b[t] = s[t, 0]


@cuda.jit
def padded_column_kernel(a, b):
    """The same with one padding column: row r starts in bank r, the column read is clean."""
    s = cuda.shared.array((32, 33), float32)
    t = cuda.threadIdx.x
    for j in range(32):
        s[j, t] = a[j * 32 + t]
    cuda.syncthreads()
    b[t] = s[t, 0]


def f32(n, seed=0):
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)


def test_coalesced_f32_load_is_four_sectors_per_warp_request():
    a, b = f32(256), np.zeros(256, np.float32)
    t = tracer.trace(copy_kernel, 2, 128, a, b)
    np.testing.assert_array_equal(b, a)                 # the launch really ran
    assert t.sectors_per_request("a") == 4.0
    assert t.sectors_per_request("b", kind="st") == 4.0
    assert len(t.requests_for("a", "ld")) == 8          # 256 threads = 8 warps, one load each
    assert all(r.lanes == 32 for r in t.requests)
    assert tracer.advice(t) == []


def test_stride_two_load_touches_eight_sectors_and_the_advice_says_so():
    a, b = f32(256), np.zeros(128, np.float32)
    t = tracer.trace(stride2_kernel, 1, 128, a, b)
    np.testing.assert_array_equal(b, a[::2])
    assert t.sectors_per_request("a") == 8.0
    req = t.requests_for("a", "ld")[0]
    assert (req.min_sectors, req.bytes_requested, req.bytes_moved) == (4, 128, 256)
    (msg,) = tracer.advice(t)
    assert msg.startswith("warp 0's loads of a touch 8 sectors where 4 would do (line 29: "
                          "`b[i] = a[2 * i]`; the rest of each sector is moved and never used)")
    # the thresholds are parameters: twice the sectors needed is waste by default, not at 2.5x
    assert tracer.advice(t, waste_ratio=2.5) == []
    assert tracer.advice(t, arrays=["b"]) == []


def test_a_column_of_a_32_wide_shared_tile_is_a_32_way_bank_conflict():
    a, b = f32(1024), np.zeros(32, np.float32)
    t = tracer.trace(column_kernel, 1, 32, a, b)
    np.testing.assert_array_equal(b, a.reshape(32, 32)[:, 0])
    loads = t.requests_for(kind="ld", space="shared")
    stores = t.requests_for(kind="st", space="shared")
    assert [r.ways for r in loads] == [32]
    assert {r.ways for r in stores} == {1}              # rows are conflict-free
    (msg,) = tracer.advice(t)
    assert "shared-memory loads (line 40: `b[t] = s[t, 0]`) hit one bank 32 times" in msg
    assert tracer.advice(t, min_ways=33) == []


def test_padding_the_tile_by_one_column_removes_the_conflict():
    a, b = f32(1024), np.zeros(32, np.float32)
    t = tracer.trace(padded_column_kernel, 1, 32, a, b)
    np.testing.assert_array_equal(b, a.reshape(32, 32)[:, 0])
    assert [r.ways for r in t.requests_for(kind="ld", space="shared")] == [1]
    assert tracer.advice(t, min_ways=2) == []


def test_a_vec4_request_is_one_16_byte_access_per_lane():
    n = 1024
    g, u, o = f32(n, 1), f32(n, 2), np.zeros(n, np.float32)
    vec = tracer.trace(vectorized.vec4_kernel, 1, 128, g, u, o)
    np.testing.assert_allclose(o, g / (1 + np.exp(-g)) * u, rtol=1e-5)
    loads = vec.requests_for("gate", "ld")
    assert {a.nbytes for r in loads for a in r.accesses} == {16}
    assert vec.sectors_per_request("gate") == 16.0       # 32 lanes x 16 B = 512 B
    scalar = tracer.trace(vectorized.ilp4_kernel, 1, 256, g, u, o)
    assert scalar.sectors_per_request("gate") == 4.0
    # the same bytes in a quarter of the requests
    assert len(scalar.requests_for("gate", "ld")) == 4 * len(loads)
    assert sum(r.bytes_requested for r in loads) == n * 4


def test_table_names_each_instruction_and_fits_a_page():
    a, b = f32(256), np.zeros(128, np.float32)
    text = tracer.trace(stride2_kernel, 1, 128, a, b).table()
    assert "b[i] = a[2 * i]" in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_drawings_render():
    import matplotlib

    matplotlib.use("Agg")
    a, b = f32(256), np.zeros(128, np.float32)
    t = tracer.trace(stride2_kernel, 1, 128, a, b)
    ax = t.show("a")
    assert len(ax.patches) == 256
    filled = [p for p in ax.patches if p.get_facecolor()[:3] != (1.0, 1.0, 1.0)]
    assert len(filled) == 128                            # every other element was read
    t.heatmap()


def test_too_many_threads_names_the_limit():
    a, b = f32(16), np.zeros(16, np.float32)
    with pytest.raises(tracer.TracerError, match=r"runs at most 8,192 .*shrink"):
        tracer.trace(copy_kernel, 264, 1024, a, b)


def test_a_kernel_the_simulator_cannot_run_gets_the_reason():
    @cuda.jit
    def bad(a):
        a[0] = cuda.no_such_intrinsic(1)

    with pytest.raises(tracer.TracerError, match="simulator could not run this kernel"):
        tracer.trace(bad, 1, 1, np.zeros(1, np.float32))


def test_a_runaway_kernel_stops_at_the_time_limit():
    @cuda.jit
    def spin(a):
        while a[0] >= 0:
            pass

    with pytest.raises(tracer.TracerError, match="time limit"):
        tracer.trace(spin, 1, 1, np.zeros(1, np.float32), timeout_s=0.5)


def test_the_gpu_path_traces_an_importable_kernel_in_a_simulator_process():
    """On a GPU machine trace() re-runs the kernel in a BOOK_SIMULATOR=1 child: the same
    child runs here."""
    n = 256
    g, u, o = f32(n, 3), f32(n, 4), np.zeros(n, np.float32)
    t = child.trace_in_subprocess(fused.fused_kernel, (1,), (256,), (g, u, o), None, 0,
                                  tracer.MAX_THREADS, 60.0, 100_000)
    np.testing.assert_allclose(o, g / (1 + np.exp(-g)) * u, rtol=1e-5)
    assert t.sectors_per_request("gate") == 4.0

    def make():                      # a kernel made inside a function has no importable name
        @cuda.jit
        def local(a):
            a[0] = 1

        return local

    with pytest.raises(tracer.TracerError, match="importable by name"):
        child.trace_in_subprocess(make(), (1,), (1,), (np.zeros(1),), None, 0, 1, 1.0, 1)


def test_tracer_agrees_with_ncu_on_the_h100_within_ten_percent():
    """The committed ncu record (benchmarks/coalescing.py on the H100, with provenance)
    against the tracer on the same kernels launched the same way at a small size."""
    from book import data

    rec = data.record("ncu/coalescing_h100")
    assert rec["provenance"]["gpu"].startswith("NVIDIA H100")
    rows = {r["variant"]: r for r in tracer.agreement(rec)}
    assert {"coalesced", "strided2", "vec4"} <= set(rows)
    for v, r in rows.items():
        assert r["within_10pct"], f"{v}: tracer {r['tracer']} vs ncu {r['ncu']}"
    assert rows["strided2"]["tracer"] == 2 * rows["coalesced"]["tracer"]


def test_course_launch_refuses_an_unknown_variant_by_name():
    with pytest.raises(tracer.TracerError, match="unknown variant 'half9'.*coalesced"):
        tracer.course_launch("half9")


@cuda.jit
def interleaved_kernel(x, out):
    r, c = cuda.grid(2)
    if r < out.shape[0] and c < out.shape[1]:
        out[r, c] = x[r, 2 * c] * x[r, 2 * c + 1]


def interleaved_host(x, out):
    interleaved_kernel[(1, 2), (1, 32)](x, out)


def test_trace_call_follows_a_host_function_into_its_kernels_and_advises():
    x, out = f32(128).reshape(1, 128), np.zeros((1, 64), np.float32)
    t = tracer.trace_call(interleaved_host, cuda.to_device(x), out)
    np.testing.assert_allclose(out, x[:, ::2] * x[:, 1::2])
    assert set(t.arrays) == {"x", "out"}                 # named by the host function
    assert t.sectors_per_request("x") == 8.0
    # each load touches 8 sectors for 4 sectors' worth, but the pair uses every byte moved:
    # not waste, even when any waste at all is named
    assert tracer.advice(t, waste_ratio=1, min_extra_sectors=1, min_ways=2) == []


def test_trace_call_says_so_when_no_kernel_ran():
    def on_host(x, out):
        out[:] = x[:, ::2] * x[:, 1::2]

    with pytest.raises(tracer.TracerError, match="launched no kernel"):
        tracer.trace_call(on_host, f32(8).reshape(1, 8), np.zeros((1, 4), np.float32))


def test_a_named_host_function_traces_in_a_simulator_process_as_on_a_gpu():
    """What a GPU session does: trace_call by name in a BOOK_SIMULATOR=1 child."""
    n = 512
    g, u = f32(n, 5), f32(n, 6)
    out = np.zeros(n, np.float32)
    job = {"what": "call", "fn": "book.kernels.elementwise.fused:swiglu_fused", "names": None,
           "max_threads": tracer.MAX_THREADS, "timeout_s": 60.0, "max_accesses": 100_000,
           "kwargs": {}}
    t = child.in_simulator_process(job, (g, u, out), 60.0)
    np.testing.assert_allclose(out, g / (1 + np.exp(-g)) * u, rtol=1e-5)
    assert t.sectors_per_request("gate") == 4.0
    with pytest.raises(tracer.TracerError, match="cannot import 'book.nowhere:f'"):
        tracer.trace_call("book.nowhere:f")


@cuda.jit
def flat_copy_kernel(a, b):
    """Copy a 2-D array through ``.flat`` (the GEMM's flat-offset loads index it so)."""
    i = cuda.grid(1)
    if i < b.size:
        b.flat[i] = a.flat[i]


def test_flat_indexing_is_recorded_as_the_element_it_names():
    a = f32(8 * 32).reshape(8, 32)
    b = np.zeros_like(a)
    t = tracer.trace(flat_copy_kernel, 2, 128, a, b)
    np.testing.assert_array_equal(b, a)
    assert t.sectors_per_request("a") == 4.0
    assert t.sectors_per_request("b", kind="st") == 4.0
    first = min((x for x in t.accesses if x.array == "a"), key=lambda x: x.offset)
    assert first.index == (0, 0)
    last = max((x for x in t.accesses if x.array == "a"), key=lambda x: x.offset)
    assert last.index == (7, 31) and last.offset == (8 * 32 - 1) * 4


def test_gemm_tile_padding_keeps_the_transposing_store_conflict_free():
    """Chapter 7's facts on the simulator's tile: padded A store 1 way, unpadded 2 ways;
    A's global loads touch 16 sectors a request (two lanes a row, 16 rows a warp)."""
    from dataclasses import replace

    from book.kernels.gemms import gemm

    tile = gemm.SIM_TILE
    a = f32(tile.bm * tile.bk).reshape(tile.bm, tile.bk)
    b = f32(tile.bk * tile.bn, seed=1).reshape(tile.bk, tile.bn)
    ways = {}
    for pad in (tile.pad, 0):
        t_ = replace(tile, pad=pad)
        out = np.zeros((tile.bm, tile.bn), np.float32)
        t = tracer.trace(gemm.build_kernel(t_), (1, 1), (t_.threads,), a, b, b, out, 0, 0)
        np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
        store_a = [r for r in t.instructions()
                   if r["space"] == "shared" and r["kind"] == "st" and "As[" in r["source"]]
        ways[pad] = store_a[0]["ways"]
        assert t.sectors_per_request("a") == 16.0
        assert t.sectors_per_request("b0") == 4.0
    assert ways == {tile.pad: 1, 0: 2}


def test_show_labels_threads_at_the_size_asked():
    import matplotlib

    matplotlib.use("Agg")
    a, b = f32(64), np.zeros(64, np.float32)
    t = tracer.trace(copy_kernel, 1, 64, a, b)
    ax = t.show("a", max_cols=16, limit=64, label_size=9)
    sizes = {txt.get_fontsize() for txt in ax.texts}
    assert sizes == {9} and len(ax.texts) == 64
    assert {txt.get_fontsize() for txt in t.show("a").texts} == {5}   # the default


def test_gemm_block_traces_by_name_here_and_in_a_simulator_process():
    """Chapter 7 on a GPU traces the GEMM through a child simulator process: the factory's
    kernels have no importable name, book.tracer.gemm_block has. Both paths agree."""
    from book.kernels.gemms import gemm

    tile = gemm.SIM_TILE
    a = f32(tile.bm * tile.bk).reshape(tile.bm, tile.bk)
    b = f32(tile.bk * tile.bn, seed=2).reshape(tile.bk, tile.bn)
    out = np.zeros((tile.bm, tile.bn), np.float32)
    here = tracer.trace_call("book.tracer:gemm_block", a, b, b.copy(), out, tile=tile)
    np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    job = {"what": "call", "fn": "book.tracer:gemm_block", "names": None,
           "max_threads": tracer.MAX_THREADS, "timeout_s": 60.0, "max_accesses": 400_000,
           "kwargs": {"tile": tile}}
    out2 = np.zeros_like(out)
    there = child.in_simulator_process(job, (a, b, b.copy(), out2), 60.0)   # as on a GPU
    np.testing.assert_array_equal(out2, out)
    for t in (here, there):
        assert t.sectors_per_request("a") == 16.0 and t.sectors_per_request("b0") == 4.0
        ways = {r["source"][:3]: r["ways"] for r in t.instructions()
                if r["space"] == "shared" and r["kind"] == "st"}
        assert ways["As["] == 1


def test_gemm_block_names_the_shapes_it_needs():
    with pytest.raises(tracer.TracerError, match=r"a: \(32, K\)"):
        tracer.gemm_block(np.zeros((8, 8), np.float32), np.zeros((8, 32), np.float32),
                          np.zeros((8, 32), np.float32), np.zeros((32, 32), np.float32))


def test_banks_draws_a_column_per_bank_as_tall_as_the_conflict():
    import matplotlib

    matplotlib.use("Agg")
    a, b = f32(1024), np.zeros(32, np.float32)
    t = tracer.trace(column_kernel, 1, 32, a, b)
    load = t.requests_for(kind="ld", space="shared")[0]          # a column: all in bank 0
    ax = t.banks(load)
    assert ax.get_ylim() == (0, 32) and len(ax.patches) == 32
    assert "32-way" in ax.get_title()
    t2 = tracer.trace(padded_column_kernel, 1, 32, a, b)
    ax2 = t2.banks(t2.requests_for(kind="ld", space="shared")[0])
    assert ax2.get_ylim() == (0, 1) and "1-way" in ax2.get_title()
    with pytest.raises(tracer.TracerError, match="shared-memory"):
        t.banks(t.requests_for("a", "ld")[0])
