"""The MLP-up at decode (book.kernels.gemv.decode_mlp), in Numba's CUDA simulator against float64.

- the CUDA-core GEMV and the tensor-core GEMV (weights on the M side), float16 and bfloat16,
  with and without biases, at token counts on and off their tiles (T = 1, 3, 8; 1, 9, 20,
  70: beyond 64 the tokens come in groups), h off every tile, d off the 32-deep step;
- split-K over blocks (forced): the same answer as one block per tile, the arrival
  counters back at zero after every launch (so the next launch and a graph replay need no
  memset), the same bits on a second run (the last block adds the partials in order);
- the T4's path (m16n8k8) of the tensor-core GEMV;
- the tensor-core GEMV's cp.async ring (``stages``): shares that end mid-ring, d off the step,
  fp16 and bf16, nt = 2; with a model of cp.async whose copies land only at their wait (the
  simulated one lands at once); refused on sm_75;
- the dispatcher: which path each T takes, the large-T hook, token groups where there are no
  tensor cores;
- every output written (poisoned with NaN first), inputs untouched, bad input refused with
  the fix. PTX (no local memory, 16-byte loads, the mma) is in tests/library/test_ptx.py.
"""

import numpy as np
import pytest
from repo import ci_keeps

import book  # GPU or simulator, decided before numba.cuda is imported
from numba import cuda

from book.kernels.gemv import decode_mlp as dm
from book.kernels.gemv import cuda_core_gemv as ccg, mma_gemv as mmv
from book.kernels.gemms import splitk
from decode_cases import case, close, close_torch, run, torch_case, values


@pytest.mark.parametrize("T,d,h,dtype,bias", [
    (1, 64, 7, "bfloat16", True), (3, 72, 10, "float16", True), (8, 40, 5, "float16", False),
])
def test_cuda_core_gemv_matches_float64(T, d, h, dtype, bias):
    arrs, ref = case(T, d, h, dtype, bias, seed=T)
    close(run(dm.swiglu_gemv, arrs, dtype), ref, dtype)


@pytest.mark.parametrize("T,d,h,dtype,bias", ci_keeps([
    (9, 72, 20, "float16", True), (1, 40, 18, "bfloat16", True), (20, 32, 40, "bfloat16", False),
    (70, 8, 18, "float16", True),
]))
def test_tensor_core_gemv_matches_float64(T, d, h, dtype, bias):
    arrs, ref = case(T, d, h, dtype, bias, seed=T)
    close(run(dm.swiglu_gemv_tc, arrs, dtype), ref, dtype)


@pytest.mark.parametrize("T,d,h,dtype,tile,split", [
    (1, 136, 7, "bfloat16", ccg.GemvTile(1, 2, 32, prefetch=True), None),  # 17 pieces, 32 threads
    (4, 520, 5, "float16", ccg.GemvTile(4, 2, 32, prefetch=True), 3),      # a split's last piece
    (3, 72, 9, "bfloat16", ccg.GemvTile(4, 1, 64, prefetch=True), None),   # fewer pieces than threads
])
def test_the_cuda_core_gemv_that_loads_ahead_adds_every_piece_once(T, d, h, dtype, tile, split):
    # GemvTile.prefetch, a measured control: the next piece's words loaded before this one's FMAs
    arrs, ref = case(T, d, h, dtype, True, seed=T)
    close(run(dm.swiglu_gemv, arrs, dtype, tile=tile, split=split), ref, dtype)


@pytest.mark.parametrize("fn,d,split", [(dm.swiglu_gemv, 88, 3), (dm.swiglu_gemv_tc, 136, 2)])
def test_split_k_meets_in_the_kernel(fn, d, split):
    T, h, dtype = 2, 12, "float16"
    arrs, ref = case(T, d, h, dtype, seed=4)
    one = run(fn, arrs, dtype, split=1)
    close(one, ref, dtype)
    path = "cuda_cores" if fn is dm.swiglu_gemv else "tensor_cores"
    launch = dm.prepare(path, *(cuda.to_device(a) for a in arrs), split=split)
    assert launch.splits == split and launch.grid % split == 0
    got = [run(fn, arrs, dtype, split=split) for _ in range(2)]
    close(got[0], ref, dtype)
    np.testing.assert_array_equal(got[0], got[1])  # the partials added in the same order
    ws = splitk.workspace(path, 0, 1, 1)
    assert not ws.count.copy_to_host().any(), "a launch left an arrival counter non-zero"


def test_a_workspace_belongs_to_one_gpu_and_one_stream(monkeypatch):
    # stream 0 is every GPU's legacy stream: two GPUs' launches on it must not share the
    # counters and partials one GPU allocated (a machine with two GPUs is not here: the
    # current GPU's id is what changes)
    ws = {}
    for g in (0, 1):
        monkeypatch.setattr(splitk, "device_key", lambda g=g: g)
        ws[g] = splitk.workspace("probe", 0, 4, 4)
    assert ws[0] is not ws[1]
    assert splitk.workspace("probe", 0, 4, 4) is ws[1]  # the same GPU and stream: reused
    assert splitk.workspace("probe", 7, 4, 4) is not ws[1]


@pytest.mark.parametrize("tile,d,split", ci_keeps([
    (mmv.MmaGemvTile(nt=1, mt=1, warps=2, unroll=4), 136, 2),     # groups past a split's end
    (mmv.MmaGemvTile(nt=1, mt=1, warps=2, unroll=2), 200, None),  # a partial last step
    (mmv.MmaGemvTile(nt=2, mt=2, warps=1, unroll=2), 264, 3),
]))
def test_an_unrolled_tensor_core_gemv_adds_every_step_once(tile, d, split):
    # U steps loaded before their mmas: a group that runs past its split's share or past d
    # must add zeros there, not the next split's steps (counted twice) or rows past d
    # h = 20 for mt = 2: one m-tile (rows past h) in each of the splits, half the simulator's
    # blocks of two m-tiles along h (the mt = 1 tiles keep several)
    T, h, dtype = 9 if tile.nt == 2 else 5, 20 if tile.mt == 2 else 40, "float16"
    arrs, ref = case(T, d, h, dtype, seed=d)
    launch = dm.prepare("tensor_cores", *(cuda.to_device(a) for a in arrs), tile=tile, split=split)
    assert launch.tile.unroll == tile.unroll
    close(run(dm.swiglu_gemv_tc, arrs, dtype, tile=tile, split=split), ref, dtype)
    with pytest.raises(ValueError, match="weight registers"):
        mmv.MmaGemvTile(nt=1, mt=2, warps=1, unroll=4).validate()


# the cp.async ring (MmaGemvTile.stages): a share that ends mid-ring, d off the 32-deep step,
# warps with no steps at all, rows past h and tokens past T, nt = 2 and two m-tiles
RING_CASES = [
    # tile, T, d, h, dtype, bias, split
    (mmv.MmaGemvTile(nt=1, mt=1, warps=2, stages=2), 5, 200, 20, "float16", True, None),
    (mmv.MmaGemvTile(nt=1, mt=1, warps=2, stages=3), 7, 264, 18, "bfloat16", True, 3),
    (mmv.MmaGemvTile(nt=2, mt=1, warps=1, stages=4), 12, 136, 20, "float16", False, 2),
    (mmv.MmaGemvTile(nt=2, mt=2, warps=2, stages=2), 9, 96, 20, "bfloat16", True, None),
    (mmv.MmaGemvTile(nt=1, mt=1, warps=4, stages=4), 3, 40, 17, "bfloat16", False, 2),
]


@pytest.mark.parametrize("tile,T,d,h,dtype,bias,split", ci_keeps(RING_CASES[::-1]))
def test_the_cp_async_ring_adds_every_step_once(tile, T, d, h, dtype, bias, split):
    # each warp's steps go through its ring of shared-memory stages; where a warp's share
    # (or a split's) ends before the ring is full, the copies stop and the empty groups keep
    # the wait count; k past d lands as zeros
    arrs, ref = case(T, d, h, dtype, bias, seed=d + T)
    launch = dm.prepare("tensor_cores", *(cuda.to_device(a) for a in arrs if a is not None),
                        tile=tile, split=split) if bias else None
    if launch is not None:
        assert launch.tile.stages == tile.stages
    close(run(dm.swiglu_gemv_tc, arrs, dtype, tile=tile, split=split), ref, dtype)


class _DeferredCopies:
    """cp.async as a GPU may do it, for the simulator: a thread's copies land only when a
    ``cp_async_wait(n)`` leaves at most n of its committed groups in flight (the course's
    simulated cp.async lands at once, which would hide a missing or short wait)."""

    def __init__(self, real_copy, wait=True):
        import threading

        self.real, self.local, self.honour_wait = real_copy, threading.local(), wait

    def _state(self):
        if not hasattr(self.local, "open"):
            self.local.open, self.local.groups = [], []
        return self.local

    def copy(self, addr, src, si, valid):
        self._state().open.append((addr, src, si, valid))

    def commit(self):
        st = self._state()
        st.groups.append(st.open)
        st.open = []

    def wait(self, n):
        st = self._state()
        while self.honour_wait and len(st.groups) > n:
            for args in st.groups.pop(0):
                self.real(*args)


@pytest.mark.skipif(not book.gpu.SIMULATED, reason="a model of cp.async for the simulator")
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the control's garbage
@pytest.mark.parametrize("honour_wait", [True, False])
def test_the_ring_waits_for_each_stage_before_reading_it(monkeypatch, honour_wait):
    # with copies that land only at the wait that covers them the ring still adds up; with
    # waits that land nothing (the control) it does not, so the model can catch a short wait
    model = _DeferredCopies(mmv.cp_async16_zfill_at, wait=honour_wait)
    monkeypatch.setattr(mmv, "cp_async16_zfill_at", model.copy)
    monkeypatch.setattr(mmv, "cp_async_commit", model.commit)
    monkeypatch.setattr(mmv, "cp_async_wait", model.wait)
    tile = mmv.MmaGemvTile(nt=1, mt=1, warps=2, stages=3)
    arrs, ref = case(4, 232, 16, "float16", seed=11)
    if honour_wait:
        close(run(dm.swiglu_gemv_tc, arrs, "float16", tile=tile, split=1), ref, "float16")
        return
    try:  # the stages read before they land hold whatever shared memory held
        got = run(dm.swiglu_gemv_tc, arrs, "float16", tile=tile, split=1)
    except (OverflowError, FloatingPointError, ValueError):
        return  # garbage the epilogue could not even round to fp16
    assert not np.allclose(got, ref, rtol=2 ** -9, atol=2 ** -9 * np.abs(ref).max())


def test_a_ring_tile_is_validated_and_refused_on_sm75():
    t = mmv.MmaGemvTile(nt=2, mt=1, warps=4, stages=4).validate()
    assert t.stage_bytes == 2048 and t.ring_bytes == 4 * 4 * 2048
    assert t.shared_bytes == t.ring_bytes + 4 * 16 * 32 * 4 + 8 == 40 * 1024 + 8
    assert mmv.MmaGemvTile(nt=1, mt=1, warps=8, stages=2).validate().shared_bytes == 40 * 1024 + 8
    # ring and reduction 48 KiB, + the split-K flag's 8 bytes: ptxas refuses 0xc008 > 0xc000
    with pytest.raises(ValueError, match="at most 48 KiB"):
        mmv.MmaGemvTile(nt=2, mt=1, warps=8, stages=2).validate()
    with pytest.raises(ValueError, match="stages = 1"):
        mmv.MmaGemvTile(stages=1).validate()
    with pytest.raises(ValueError, match="takes unroll 1"):
        mmv.MmaGemvTile(mt=1, unroll=2, stages=2).validate()
    with pytest.raises(ValueError, match=r"needs cp.async \(sm_80\+\).*f16_sm75"):
        mmv.make_mma_gemv(mmv.MmaGemvTile(nt=1, mt=1, stages=2), True, "f16_sm75")
    assert mmv.MmaGemvTile().stages == 0  # the default: straight to registers


def test_the_t4_path_of_the_tensor_core_gemv():
    # m16n8k8, four per 32-deep step, on the same loaded words (what kind_for picks on sm_75)
    T, d, h = 3, 48, 20
    arrs, ref = case(T, d, h, "float16", seed=9)
    dev = [cuda.to_device(a) for a in arrs]
    out = cuda.to_device(np.full((T, h), np.nan, np.float16))
    launch = dm.prepare("tensor_cores", *dev, out)
    kern = mmv.make_mma_gemv(launch.tile, True, "f16_sm75")
    kern[launch.grid, launch.block](*launch.args)
    close(values(out.copy_to_host(), "float16"), ref, "float16")


def test_the_dispatcher_picks_by_t_and_calls_the_hook():
    assert dm.path_for(1) == dm.path_for(dm.CUDA_CORE_MAX_T) == "cuda_cores"
    assert dm.path_for(dm.CUDA_CORE_MAX_T + 1) == dm.path_for(256) == "tensor_cores"
    assert dm.path_for(64, cc=(7, 0)) == "cuda_cores"  # no tensor cores below sm_75
    assert dm.path_for(512, cc=(9, 0)) == "hopper"  # the wgmma dual GEMM beyond the GEMVs
    assert dm.path_for(dm.HOPPER_MIN_T, cc=(9, 0)) == "hopper"
    # between the CUDA-core GEMV and the dual GEMM on sm_90: the wgmma GEMV (wgmma_gemv),
    # which takes over from the CUDA-core GEMV below its own most (HOPPER_GEMV_MIN_T)
    assert dm.HOPPER_GEMV_MIN_T <= dm.CUDA_CORE_MAX_T
    assert dm.path_for(dm.HOPPER_GEMV_MIN_T - 1, cc=(9, 0)) == "cuda_cores"
    assert dm.path_for(dm.HOPPER_GEMV_MIN_T, cc=(9, 0)) == "hopper_gemv"
    assert dm.path_for(dm.CUDA_CORE_MAX_T, cc=(9, 0)) == "hopper_gemv"
    assert dm.path_for(dm.CUDA_CORE_MAX_T, cc=(8, 0)) == "cuda_cores"
    assert dm.path_for(dm.CUDA_CORE_MAX_T + 1, cc=(9, 0)) == "hopper_gemv"
    assert dm.path_for(dm.HOPPER_GEMV_MAX_T, cc=(9, 0)) == "hopper_gemv"
    assert dm.HOPPER_MIN_T == dm.HOPPER_GEMV_MAX_T + 1
    assert dm.path_for(dm.CUDA_CORE_MAX_T + 1, cc=(8, 0)) == "tensor_cores"  # sm_90 only
    # with biases the dual GEMM cannot: the GEMV takes them to its most, then the mma GEMV
    assert dm.path_for(64, cc=(9, 0), bias=True) == "hopper_gemv"
    assert dm.path_for(512, cc=(9, 0), bias=True) == "tensor_cores"
    assert dm.path_for(256, cc=(8, 0)) == dm.path_for(512, cc=(8, 0)) == "tensor_cores"
    arrs, ref = case(9, 16, 6, "float16", seed=2)
    calls = []

    def hook(x, wg, wu, bg, bu, out, stream):
        calls.append(x.shape)
        return dm.swiglu_gemv_tc(x, wg, wu, bg, bu, out, stream=stream)

    prev = dm.register_large_t(hook, min_T=9)
    try:
        assert dm.path_for(9) == "large_t" and dm.path_for(4) == "cuda_cores"
        close(run(dm.swiglu_decode, arrs, "float16"), ref, "float16")
        assert calls == [(9, 16)]
    finally:
        dm.register_large_t(prev)
    assert dm.path_for(9) == "tensor_cores"


def test_without_tensor_cores_the_gemv_takes_tokens_in_groups(monkeypatch):
    monkeypatch.setattr(dm, "_device_cc", lambda: (7, 0))  # a GPU below sm_75
    arrs, ref = case(11, 16, 6, "float16", seed=3)
    close(run(dm.swiglu_decode, arrs, "float16"), ref, "float16")


def test_dispatch_and_default_tiles():
    assert ccg.gemv_tile(1, 4096) == ccg.GemvTile(tokens=1, rows=2, threads=256)  # the H100 tune
    assert ccg.gemv_tile(4, 4096).threads == 32 and mmv.gemv_tile(32).mt == 2
    assert ccg.gemv_tile(5, 64).tokens == 8 and ccg.gemv_tile(5, 64).threads == 32
    assert mmv.gemv_tile(1).tokens == 8 and mmv.gemv_tile(64).tokens == 64
    assert mmv.gemv_tile(256).tokens == 64  # beyond: token groups
    assert splitk.splits(tiles=1000, k_pieces=8, want_blocks=528) == 1
    assert splitk.splits(tiles=64, k_pieces=8, want_blocks=528) == 8
    assert splitk.splits(tiles=200, k_pieces=8, want_blocks=528) == 3
    with pytest.raises(ValueError, match="at most 8"):
        ccg.GemvTile(tokens=16, rows=1).validate()
    with pytest.raises(ValueError, match="at most 64"):
        mmv.MmaGemvTile(nt=8, mt=2).validate()
    with pytest.raises(ValueError, match="at most 48 KiB"):
        mmv.MmaGemvTile(nt=8, mt=1, warps=8).validate()
    assert mmv.MmaGemvTile(nt=8, mt=1, warps=4).reduction_bytes == 32 * 1024
    assert mmv.MmaGemvTile(nt=8, mt=1, warps=4).shared_bytes == 32 * 1024 + 8  # + the flag


def test_bad_input_is_refused_with_the_fix():
    z = lambda *s: cuda.to_device(np.zeros(s, np.float16))  # noqa: E731
    with pytest.raises(ValueError, match=r"d \(columns of x\) = 36.*multiple of 8"):
        dm.swiglu_decode(z(1, 36), z(8, 36), z(8, 36))
    with pytest.raises(ValueError, match=r"wu is \(8, 4\); expected \[h, d\] = \[4, 8\]"):
        dm.swiglu_decode(z(1, 8), z(4, 8), z(8, 4))  # wu stored [d, h]
    with pytest.raises(ValueError, match="both biases"):
        dm.swiglu_decode(z(1, 8), z(4, 8), z(4, 8), z(4), None)
    with pytest.raises(ValueError, match=r"bg has shape \(5,\); expected \[h\] = \[4\]"):
        dm.swiglu_decode(z(1, 8), z(4, 8), z(4, 8), z(5), z(4))
    with pytest.raises(TypeError, match="share one dtype"):
        dm.swiglu_decode(z(1, 8), cuda.to_device(np.zeros((4, 8), np.uint16)), z(4, 8))
    with pytest.raises(TypeError, match="bfloat16.*or float16"):
        dm.swiglu_decode(cuda.to_device(np.zeros((1, 8), np.float32)), z(4, 8), z(4, 8))
    buf = cuda.to_device(np.zeros(2 * 8 + 1, np.float16))
    with pytest.raises(ValueError, match="not a multiple of 16 bytes"):
        dm.swiglu_decode(buf[1:].reshape(2, 8), z(4, 8), z(4, 8))
    with pytest.raises(ValueError, match=r"out must have shape \[T, h\] = \[1, 4\]"):
        dm.swiglu_decode(z(1, 8), z(4, 8), z(4, 8), out=z(4, 1))
    with pytest.raises(ValueError, match="takes at most 1 tokens"):
        dm.swiglu_gemv(z(2, 8), z(4, 8), z(4, 8), tile=ccg.GemvTile(tokens=1, rows=1, threads=32))


def test_nothing_to_compute_launches_nothing():
    z = lambda *s: cuda.to_device(np.zeros(s, np.float16))  # noqa: E731
    assert dm.swiglu_decode(z(0, 8), z(4, 8), z(4, 8)).shape == (0, 4)
    assert dm.prepare("cuda_cores", z(0, 8), z(4, 8), z(4, 8)).grid == 0


# ---------------------------------------------------------------------------------------
# on a GPU (`make test-gpu`; skipped in the simulator): full-size correctness, the plan-cached
# calls bit-equal to the wrappers and replayed from a CUDA graph, and no small-grid warning


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("T", [1, 5, 16, 64, 200, 300])
def test_on_a_gpu_every_path_and_the_planned_call(T, dtype):
    from book.kernels.host.fastcall import planned

    torch, (x, wg, wu), ref = torch_case(T, 4096, 2048, dtype, seed=T)
    nan = lambda: torch.full((T, 2048), float("nan"), device="cuda", dtype=x.dtype)  # noqa: E731
    # T = 300 on an H100: the dispatcher's Hopper path (book.kernels.gemms.wgmma_gemm)
    for name, wrapper in (("decode", dm.swiglu_decode), ("gemv_tc", dm.swiglu_gemv_tc),
                          ("gemv", dm.swiglu_gemv)):
        if name == "gemv" and T > dm.CUDA_CORE_MAX_T:
            continue
        o1, o2, o3 = nan(), nan(), nan()
        for _ in range(3):  # plan, then the plan replayed
            planned(name)(x, wg, wu, None, None, o1)
        wrapper(x, wg, wu, None, None, o2, stream=0)   # the wrapper's own launch
        fast = planned(name).stats["fast"]
        wrapper(x, wg, wu, None, None, o3)   # the plain call: the planned call's replay
        torch.cuda.synchronize()
        close_torch(o1, ref, dtype)
        assert torch.equal(o1, o2), f"planned({name!r}) differs from its wrapper"
        assert torch.equal(o1, o3)
        if planned(name).stats["planned"]:   # (a key it cannot plan: ordinary every time)
            assert planned(name).stats["fast"] in (fast, fast + 1)
    assert planned("decode").stats["fast"] > 0  # (the Hopper dual GEMM's launch is planned too)


@pytest.mark.gpu
def test_on_a_gpu_the_planned_calls_replay_from_a_cuda_graph():
    from book.kernels.gemms import mma_gemm as mg
    from book.kernels.host.fastcall import planned

    torch, (x, wg, wu), ref = torch_case(3, 4096, 1024, "bfloat16", seed=1)
    wgt, wut = wg.t().contiguous(), wu.t().contiguous()
    o_dec, o_mma = (torch.empty(3, 1024, device="cuda", dtype=x.dtype) for _ in range(2))
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # planned on the capture stream, outside the capture
        planned("decode")(x, wg, wu, None, None, o_dec)
        planned("swiglu_mma")(x, wgt, wut, o_mma)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        planned("decode")(x, wg, wu, None, None, o_dec)
        planned("swiglu_mma")(x, wgt, wut, o_mma)
    torch.cuda.current_stream().wait_stream(stream)
    o_dec.fill_(float("nan"))
    o_mma.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    close_torch(o_dec, ref, "bfloat16")
    close_torch(o_mma, ref, "bfloat16")
    assert torch.equal(o_mma, mg.swiglu_mma(x, wgt, wut))


@pytest.mark.gpu
def test_on_a_gpu_the_courses_small_launches_do_not_warn(monkeypatch):
    import warnings

    from numba.cuda.core import config

    from book.kernels.host.fastcall import fast, planned

    monkeypatch.setattr(config, "CUDA_LOW_OCCUPANCY_WARNINGS", 1)  # numba-cuda's default
    monkeypatch.setattr(config, "DISABLE_PERFORMANCE_WARNINGS", 0)
    torch, (x, wg, wu), _ = torch_case(1, 256, 64, "bfloat16", seed=2)
    g, u = (torch.randn(1, 18944, device="cuda") for _ in range(2))

    @cuda.jit
    def student(a):  # the control: a small grid launched by hand still warns
        a[cuda.grid(1)] = 1

    with warnings.catch_warnings(record=True) as control:
        warnings.simplefilter("always")
        student[1, 32](cuda.device_array(32, np.float32))
    assert any("Grid size 1" in str(w.message) for w in control), "the control did not warn"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fast("vec4")(g, u, torch.empty_like(g))  # its first call: Numba's launch, 74 blocks
        fast("vec4")(g, u, torch.empty_like(g))
        planned("decode")(x, wg, wu, None, None, torch.empty(1, 64, device="cuda", dtype=x.dtype))
        dm.swiglu_gemv_tc(x, wg, wu)
        from book.kernels.gemms import mma_gemm as mg
        mg.swiglu_mma(x, wg.t().contiguous(), wu.t().contiguous())
        torch.cuda.synchronize()
    small = [str(w.message) for w in caught if "Grid size" in str(w.message)]
    assert not small, small


@pytest.mark.gpu
@pytest.mark.parametrize("T", [1, 64, 200])
def test_on_a_gpu_swiglu_mma_runs_any_t(T):
    from book.kernels.gemms import mma_gemm as mg

    torch, (x, wg, wu), ref = torch_case(T, 4096, 1032, "bfloat16", seed=T)  # h = 1032: 8 x 129
    out = torch.full((T, 1032), float("nan"), device="cuda", dtype=x.dtype)
    mg.swiglu_mma(x, wg.t().contiguous(), wu.t().contiguous(), out)
    torch.cuda.synchronize()
    close_torch(out, ref, "bfloat16")
