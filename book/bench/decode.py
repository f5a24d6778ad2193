"""The decode rows of the benchmark: the MLP-up at few tokens, ours beside cuBLAS.

``out = silu(x @ wg.T) * (x @ wu.T)`` with nn.Linear weights ``[h, d]`` (d = 4096,
h = 14336: Llama-3-8B's MLP), in bfloat16 and float16. Rows (``kind`` "decode", shape
``[T, d, h]``; ``bytes`` are the weight bytes ``2 h d x 2``, so ``bandwidth`` is GB/s of
weights; ``flops`` count the two GEMVs):

- ``decode_mlp_up``: :func:`book.kernels.gemv.decode_mlp.swiglu_decode` through its plan-cached
  call (``fastcall.planned("decode")``): the path the dispatcher picks for T;
- ``decode_gemv_cuda_cores`` (T <= 8), ``decode_gemv_tensor_cores`` and on sm_90
  ``decode_gemv_hopper`` (T <= 64, :mod:`book.kernels.gemv.wgmma_gemv`): each path forced;
- ``cublas_linear``: ``F.linear(x, [wg; wu])`` alone (one cuBLAS GEMM of 2h outputs);
  ``cublas_linear_silu_compiled`` / ``cublas_linear_silu_eager``: then ``F.silu(g) * u`` on
  its halves, ``torch.compile``d (static shapes) or eager: what a PyTorch user gets.

The T sweep (bfloat16, T = 1 .. 8192, for the book's figure; ``kind`` "decode_sweep"):
``sweep_ours`` (the dispatcher: the GEMVs, then on the H100 the wgmma dual GEMM of
:mod:`book.kernels.gemms.wgmma_gemm`), ``sweep_gemv_tc`` (the tensor-core GEMV, T <= 1024),
``sweep_gemv_hopper`` (on sm_90 the wgmma GEMV, T <= 64) and ``sweep_gemv_hopper_bare`` (the
same kernel at its bare tile, ``gemv_tile(..., fixes=False)``: the control of its default's
fixes, :data:`book.kernels.gemv.wgmma_gemv_tile.FIXES`; its bits checked equal to the default's
at every T, ``gemv_hopper_bare_bits_equal``), ``sweep_wgmma_dual`` (on sm_90 the
wgmma dual GEMM from beyond the CUDA-core GEMV to 64 tokens: where the dispatcher switches),
``sweep_mma`` (the mma.sync dual GEMM on ``[d, h]`` copies of the weights, T >= 16),
``sweep_cublas``,
``sweep_cublas_compiled`` (a static-shape compile for each T) and ``sweep_cublas_eager``.

Host rows (``kind`` "launch", T = 1): the host time of one call, the plan-cached calls
beside the ordinary wrappers and beside ``torch.matmul``'s and ``F.linear``'s own
(:func:`book.bench.host_timings`, the rows of one group taking turns); ``host_*_plain``: every
entry point's plain call (``swiglu_decode``, ``swiglu_mma``, ``matmul_mma``, ``swiglu_gemv``,
``fastcall.fast("half8")``, on sm_90 ``swiglu_wgmma``), each held to 15 us and to
``torch.matmul``'s own host time (:func:`targets`, issue 44).

:func:`run` adds them to a :class:`book.bench.suite.Suite` (``python -m book.bench`` runs it as
its "decode" phase); ``python -m benchmarks.decode_bench`` runs it alone. :func:`targets` states
issue 31's goals as measured ratios.
"""

from __future__ import annotations

import math

from ..capability import FAMILIES

D, H = 4096, 14336
ROW_T = (1, 4, 16, 64, 256)
SWEEP_T = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
DTYPES = ("bfloat16", "float16")
CHECK_T = (1, 5, 8, 16, 64, 200, 300)  # 300: beyond the GEMVs (on sm_90 the wgmma path)
#: issue 31's goals: at most cuBLAS + compiled SiLU*up's time, and at T <= 16 at least this
#: share of the HBM peak on the weight bytes
TIME_GOAL, BANDWIDTH_GOAL, HOST_GOAL_S = 1.0, 0.85, 15e-6


def weight_bytes(d=D, h=H, itemsize=2):
    return 2 * h * d * itemsize


def _bits(t, a):
    return a.view(t.int16) if a.dtype == t.bfloat16 else a


def _check(suite, name, dtype, got, ref, shape):
    err = float(((got.double() - ref).norm() / ref.norm()).item())
    worst = float(((got.double() - ref).abs() / (ref.abs() + 1e-2 * ref.abs().max())).max().item())
    tol = 1e-2 if dtype == "bfloat16" else 2e-3
    ok = bool(math.isfinite(err) and err < tol and worst < 0.1)
    suite.checks.append({"variant": name, "dtype": dtype, "shape": list(shape), "ok": ok,
                         "error": None if ok else f"relative error {err:.3g}, worst {worst:.3g}"})
    print(f"  check {name:<28} {dtype:<9} {'x'.join(map(str, shape)):<16} relative error "
          f"{err:.2e}, worst {worst:.2e} ({'ok' if ok else 'FAILED'})", flush=True)
    return ok


def _weights(t, dtype, d, h, seed=5):
    gen = t.Generator(device="cuda").manual_seed(seed)
    tdt = getattr(t, dtype)
    wg = (t.randn(h, d, device="cuda", generator=gen) / math.sqrt(d)).to(tdt)
    wu = (t.randn(h, d, device="cuda", generator=gen) / math.sqrt(d)).to(tdt)
    return wg, wu


def check(suite, dtypes=DTYPES, ts=CHECK_T, d=D, h=H):
    """Every path and the dispatcher at full d and h against float64 (outputs poisoned with
    NaN first); the plan-cached call bit-equal to the ordinary wrapper; a CUDA-graph replay
    of the plan-cached call bit-equal too."""
    t = suite.torch
    F = t.nn.functional
    from book.kernels.gemv import decode_mlp as dm
    from book.kernels.host.fastcall import planned

    for dtype in dtypes:
        tdt = getattr(t, dtype)
        wg, wu = _weights(t, dtype, d, h)
        gen = t.Generator(device="cuda").manual_seed(3)
        bg = (t.randn(h, device="cuda", generator=gen) * 0.5).to(tdt)
        bu = (t.randn(h, device="cuda", generator=gen) * 0.5).to(tdt)
        for T in ts:
            x = t.randn(T, d, device="cuda", generator=gen).to(tdt)
            g, u = x.double() @ wg.double().T, x.double() @ wu.double().T
            ref = F.silu(g) * u
            refb = F.silu(g + bg.double()) * (u + bu.double())
            shape = (T, d, h)
            for name, fn, bias in (("decode_mlp_up", planned("decode"), False),
                                   ("decode_mlp_up_bias", planned("decode"), True),
                                   ("decode_gemv_tensor_cores", planned("gemv_tc"), False),
                                   ("decode_gemv_cuda_cores", planned("gemv"), False),
                                   ("decode_gemv_hopper", planned("gemv_hopper"), False)):
                if name == "decode_gemv_cuda_cores" and T > dm.CUDA_CORE_MAX_T:
                    continue
                if name == "decode_gemv_hopper" and not _hopper_gemv_runs(suite, T):
                    continue
                o = t.full((T, h), float("nan"), device="cuda", dtype=tdt)
                fn(x, wg, wu, bg if bias else None, bu if bias else None, o)
                suite.cuda.synchronize()
                _check(suite, name, dtype, o, refb if bias else ref, shape)
                o2 = t.full((T, h), float("nan"), device="cuda", dtype=tdt)
                path = {"decode_gemv_cuda_cores": "cuda_cores",
                        "decode_gemv_tensor_cores": "tensor_cores",
                        "decode_gemv_hopper": "hopper_gemv"}.get(name)
                args = (x, wg, wu, bg if bias else None, bu if bias else None, o2)
                if path:
                    dm.prepare(path, *args).launch()
                else:   # the wrapper's own launch (a named stream; called plainly, it is planned)
                    dm.swiglu_decode(*args, stream=0)
                suite.cuda.synchronize()
                same = bool(t.equal(o, o2))
                suite.checks.append({"variant": f"{name}_planned_equals_wrapper", "dtype": dtype,
                                     "shape": list(shape), "ok": same,
                                     "error": None if same else "the planned call's output "
                                     "differs from the ordinary wrapper's"})
        # a graph replay of the planned call (T = 1 and 16: the CUDA-core GEMV, and on sm_90
        # the wgmma GEMV with its stream-K counters): the same bits as the call itself
        for T in (1, 16):
            x = t.randn(T, d, device="cuda", generator=gen).to(tdt)
            o, o2 = (t.full((T, h), float("nan"), device="cuda", dtype=tdt) for _ in range(2))
            fn = planned("decode")
            fn(x, wg, wu, None, None, o)  # planned outside the capture (it may compile)
            graph = t.cuda.CUDAGraph()
            capture = t.cuda.Stream()
            capture.wait_stream(t.cuda.current_stream())
            with t.cuda.stream(capture):
                fn(x, wg, wu, None, None, o2)  # this stream's plan, also outside the capture
            with t.cuda.graph(graph, stream=capture):
                fn(x, wg, wu, None, None, o2)
            t.cuda.current_stream().wait_stream(capture)
            o2.fill_(float("nan"))
            graph.replay()
            t.cuda.synchronize()
            same = bool(t.equal(o, o2))
            suite.checks.append({"variant": "decode_mlp_up_graph_replay", "dtype": dtype,
                                 "shape": [T, d, h], "ok": same,
                                 "error": None if same else "a CUDA-graph replay of the planned "
                                 "call differs from the call"})
            print(f"  check decode_mlp_up_graph_replay T={T} {dtype}: {'ok' if same else 'FAILED'}")
        del wg, wu
        t.cuda.empty_cache()


def _halves(F, h):
    def swiglu(gu):
        return F.silu(gu[:, :h]) * gu[:, h:]

    return swiglu


def run(suite, ts=ROW_T, dtypes=DTYPES, sweep=SWEEP_T, reps=None, d=D, h=H):
    """Add the decode rows, the sweep and the host rows (module doc)."""
    t = suite.torch
    F = t.nn.functional
    from book.kernels.gemv import decode_mlp as dm
    from book.kernels.host.fastcall import planned

    reps = reps or max(10, suite.reps // 2)
    if any(suite.wants(v) for v in ("decode_mlp_up", "decode_gemv")):
        check(suite, dtypes)
    wb = weight_bytes(d, h)
    for dtype in dtypes:
        if not any(suite.wants(v) for v in ("decode_", "cublas_linear")):
            break
        tdt = getattr(t, dtype)
        wg, wu = _weights(t, dtype, d, h)
        wcat = t.cat([wg, wu]).contiguous()
        eager = _halves(F, h)
        gen = t.Generator(device="cuda").manual_seed(7)
        for T in ts:
            shape = (T, d, h)
            xs = [t.randn(T, d, device="cuda", generator=gen).to(tdt) for _ in range(2)]
            outs = [t.empty(T, h, device="cuda", dtype=tdt) for _ in range(2)]
            fl = dm.flops(T, d, h)

            def row(name, fn, sets, desc):
                suite.add("decode", name, dtype, shape,
                          suite.later(fn, sets, bytes_moved=wb, flops=fl, reps=reps),
                          description=desc + "; bandwidth: GB/s of the weight bytes")

            ours = [(xs[i], wg, wu, None, None, outs[i]) for i in range(2)]
            row("decode_mlp_up", planned("decode"), ours,
                f"ours: the dispatcher's path for T ({dm.path_for(T, suite.info.compute_capability)}), "
                "plan-cached call from torch tensors")
            if T <= dm.CUDA_CORE_MAX_T:
                row("decode_gemv_cuda_cores", planned("gemv"), ours,
                    "ours, CUDA cores: 16-byte weight loads, float32 FMAs, split-K met in the kernel")
            row("decode_gemv_tensor_cores", planned("gemv_tc"), ours,
                "ours, tensor cores with the weights on the M side (mma.sync, straight from global)")
            if _hopper_gemv_runs(suite, T):
                row("decode_gemv_hopper", planned("gemv_hopper"), ours,
                    "ours, wgmma with the weights on the M side: TMA into an mbarrier ring, "
                    "stream-K over every SM (book.kernels.gemv.wgmma_gemv)")
            lin = [(xs[i], wcat) for i in range(2)]
            row("cublas_linear", lambda a, w: F.linear(a, w), lin,
                "cuBLAS: F.linear(x, [wg; wu]) alone (one GEMM of 2h outputs)")
            row("cublas_linear_silu_eager", lambda a, w: eager(F.linear(a, w)), lin,
                "cuBLAS F.linear(x, [wg; wu]), then F.silu(g) * u on its halves (eager)")
            if suite.wants("cublas_linear_silu_compiled"):
                compiled = t.compile(_halves(F, h), dynamic=False)
                row("cublas_linear_silu_compiled", lambda a, w: compiled(F.linear(a, w)), lin,
                    "cuBLAS F.linear(x, [wg; wu]), then a torch.compile'd F.silu(g) * u (static "
                    "shapes)")
            del xs, outs
        del wg, wu, wcat
        t.cuda.empty_cache()
    if suite.wants("sweep_"):
        run_sweep(suite, sweep, d=d, h=h, reps=max(5, reps // 2))
    if suite.wants("host_"):
        run_host(suite, d=d, h=h)


def _hopper_gemv_runs(suite, T):
    """The wgmma GEMV's rows are measured on sm_90, at the T it takes."""
    from book.kernels.gemv.wgmma_gemv import MAX_T

    cc = suite.info.compute_capability
    return cc is not None and FAMILIES["wgmma"].has(cc) and T <= MAX_T


def _bare_hopper_gemv(suite, T, d, h, sets, dtype):
    """The wgmma GEMV's plain call at the bare tile for T (the fixes' control), after a check
    that its bits are the default's on the first of ``sets`` (a check of the suite's:
    ``gemv_hopper_bare_bits_equal``; the fixes change when things happen, not the sums)."""
    t = suite.torch
    from book.kernels.host.fastcall import planned
    from book.kernels.host.launch import device_name
    from book.kernels.gemv.wgmma_gemv import gemv_tile

    call = planned("gemv_hopper", ("tile", gemv_tile(T, d, device_name(), fixes=False)))
    x, wg, wu, bg, bu, out = sets[0]
    got = [t.full_like(out, float("nan")) for _ in range(2)]
    planned("gemv_hopper")(x, wg, wu, bg, bu, got[0])
    call(x, wg, wu, bg, bu, got[1])
    t.cuda.synchronize()
    same = bool(t.equal(*(g.view(t.int16) for g in got))) and not bool(got[0].isnan().any())
    suite.checks.append({"variant": "gemv_hopper_bare_bits_equal", "dtype": dtype,
                         "shape": [T, d, h], "ok": same,
                         "error": None if same else "the bare tile's output differs from the "
                         "default tile's (its fixes must not change a bit)"})
    print(f"  check gemv_hopper_bare_bits_equal T={T}: {'ok' if same else 'FAILED'}", flush=True)
    return call


def run_sweep(suite, ts=SWEEP_T, dtype="bfloat16", d=D, h=H, reps=10):
    """The T sweep for the book's figure (module doc)."""
    t = suite.torch
    F = t.nn.functional
    from book.kernels.gemv import decode_mlp as dm
    from book.kernels.host.fastcall import planned

    tdt = getattr(t, dtype)
    # two weight sets, taken in turn with the two token sets: the calls of a sample read the
    # sets alternately, so none starts on the end of the previous call's weights still in L2
    # (a 50 MB L2 holds a fifth of one set; issue 43 L13: the sweep recorded before this read
    # one set three times a sample)
    layers = [_weights(t, dtype, d, h, seed=5 + k) for k in range(2)]
    wcats = [t.cat(ws).contiguous() for ws in layers]
    wts = [tuple(w.t().contiguous() for w in ws) for ws in layers]  # [d, h]: swiglu_mma's layout
    mma = planned("swiglu_mma")
    eager = _halves(F, h)
    wb = weight_bytes(d, h)
    gen = t.Generator(device="cuda").manual_seed(9)
    for T in ts:
        shape = (T, d, h)
        xs = [t.randn(T, d, device="cuda", generator=gen).to(tdt) for _ in range(2)]
        outs = [t.empty(T, h, device="cuda", dtype=tdt) for _ in range(2)]
        fl = dm.flops(T, d, h)

        def row(name, fn, sets, desc):
            suite.add("decode_sweep", name, dtype, shape,
                      suite.later(fn, sets, bytes_moved=wb, flops=fl, reps=reps),
                      description=desc, path=dm.path_for(T, suite.info.compute_capability))

        ours = [(xs[i], *layers[i], None, None, outs[i]) for i in range(2)]
        row("sweep_ours", planned("decode"), ours,
            "ours: the dispatcher (the GEMVs; on sm_90 the wgmma GEMV, then the wgmma dual GEMM)")
        if T <= 1024:
            row("sweep_gemv_tc", planned("gemv_tc"), ours, "ours: the tensor-core GEMV")
        if _hopper_gemv_runs(suite, T):
            row("sweep_gemv_hopper", planned("gemv_hopper"), ours,
                "ours: the wgmma GEMV (book.kernels.gemv.wgmma_gemv)")
            if suite.wants("sweep_gemv_hopper_bare"):
                row("sweep_gemv_hopper_bare", _bare_hopper_gemv(suite, T, d, h, ours, dtype), ours,
                    "ours: the wgmma GEMV at its bare tile (gemv_tile's fixes off: no dependent "
                    "launch, the seams settled in full), the control of the default's fixes")
        if _hopper_gemv_runs(suite, T) and T > dm.CUDA_CORE_MAX_T:  # where the switch falls
            row("sweep_wgmma_dual", dm.hopper_dual_gemm, ours,
                "ours: the wgmma dual GEMM (book.kernels.gemms.wgmma_gemm) at the dispatcher's tile")
        if T >= 16:
            row("sweep_mma", mma, [(xs[i], *wts[i], outs[i]) for i in range(2)],
                "ours: the mma.sync dual GEMM (swiglu_mma, [d, h] copies of the weights)")
        lin = [(xs[i], wcats[i]) for i in range(2)]
        row("sweep_cublas", lambda a, w: F.linear(a, w), lin, "cuBLAS F.linear(x, [wg; wu])")
        # a static-shape compile for each T, the practitioner's best case (compiled for the
        # shape it runs), as the decode rows; before this the sweep used one dynamic-shape compile
        compiled = t.compile(_halves(F, h), dynamic=False)
        row("sweep_cublas_compiled", lambda a, w, c=compiled: c(F.linear(a, w)), lin,
            "cuBLAS F.linear, then torch.compile'd F.silu(g) * u (compiled for this T)")
        row("sweep_cublas_eager", lambda a, w: eager(F.linear(a, w)), lin,
            "cuBLAS F.linear, then F.silu(g) * u (eager)")
        del xs, outs
    del layers, wcats, wts
    t.cuda.empty_cache()


def run_host(suite, T=1, dtype="bfloat16", d=D, h=H, calls=300, reps=15):
    """Host seconds per call (T = 1): the plan-cached calls beside the ordinary wrappers and
    beside torch's own calls, measured as one group (module doc)."""
    t = suite.torch
    F = t.nn.functional
    from book.kernels.gemv import decode_mlp as dm
    from book.kernels.gemms import mma_gemm as mg
    from book.kernels.host.fastcall import fast, planned

    tdt = getattr(t, dtype)
    wg, wu = _weights(t, dtype, d, h)
    wcat = t.cat([wg, wu]).contiguous()
    wcat_t = wcat.t().contiguous()  # [d, 2h]
    wgt, wut = wg.t().contiguous(), wu.t().contiguous()
    x = t.randn(T, d, device="cuda", dtype=tdt)
    o, gu = t.empty(T, h, device="cuda", dtype=tdt), t.empty(T, 2 * h, device="cuda", dtype=tdt)
    ge, ue = (t.randn(T, h, device="cuda", dtype=tdt) for _ in range(2))  # the activation's
    group = {
        "host_decode_planned": (planned("decode"), [(x, wg, wu, None, None, o)],
                                "planned('decode')(x, wg, wu, None, None, out): key, plan, "
                                "cuLaunchKernel"),
        "host_decode_plain": (lambda *a: dm.swiglu_decode(*a), [(x, wg, wu, None, None, o)],
                              "swiglu_decode(x, wg, wu, out=...): the plain call (planned)"),
        "host_decode_wrapper": (lambda *a: dm.swiglu_decode(*a, stream=0),
                                [(x, wg, wu, None, None, o)],
                                "swiglu_decode(x, wg, wu, out=..., stream=0): a named stream, "
                                "the wrapper's own launch: checks, views, Numba launch"),
        "host_swiglu_mma_planned": (planned("swiglu_mma"), [(x, wgt, wut, o)],
                                    "planned('swiglu_mma')(x, wg, wu, out) ([d, h] weights)"),
        "host_swiglu_mma_plain": (lambda *a: mg.swiglu_mma(*a), [(x, wgt, wut, o)],
                                  "swiglu_mma(x, wg, wu, out): the plain call (planned)"),
        "host_swiglu_mma_wrapper": (lambda *a: mg.swiglu_mma(*a, stream=0), [(x, wgt, wut, o)],
                                    "swiglu_mma(x, wg, wu, out, stream=0): a named stream, "
                                    "the wrapper's own launch"),
        "host_matmul_mma_plain": (lambda *a: mg.matmul_mma(*a), [(x, wcat_t, gu)],
                                  "matmul_mma(x, [wg|wu], out): the plain call (planned)"),
        "host_swiglu_gemv_plain": (lambda *a: dm.swiglu_gemv(*a), [(x, wg, wu, None, None, o)],
                                   "swiglu_gemv(x, wg, wu, out=...): the plain call (planned)"),
        "host_fast_half8_plain": (fast("half8"), [(ge, ue, o)],
                                  "fastcall.fast('half8')(gate, up, out) at [T, h]: the cheap "
                                  "elementwise call (planned)"),
        "host_torch_matmul": (lambda a, w, out: t.matmul(a, w, out=out), [(x, wcat_t, gu)],
                              "torch.matmul(x, [wg|wu], out=...): cuBLAS's call from Python"),
        "host_f_linear": (lambda a, w: F.linear(a, w), [(x, wcat)],
                          "F.linear(x, [wg; wu]): cuBLAS's call, allocating its output"),
    }
    if tuple(t.cuda.get_device_capability()) == (9, 0):  # the Hopper dual GEMM, sm_90a
        from book.kernels.gemms import wgmma_gemm as W

        group["host_swiglu_wgmma_plain"] = (
            lambda *a: W.swiglu_wgmma(*a), [(x, wg, wu, o)],
            "swiglu_wgmma(x, wg, wu, out): the plain call (planned, a cluster launch)")
    if not any(suite.wants(k) for k in group):
        return
    timings = suite.bench.host_timings({k: v[:2] for k, v in group.items() if suite.wants(k)},
                                       calls=calls, reps=reps)
    for k, tm in timings.items():
        suite.add("launch", k, dtype, (T, d, h), tm, description=group[k][2])
    del wg, wu, wcat, wcat_t, wgt, wut
    t.cuda.empty_cache()


def targets(rows, peak: float | None = None):
    """Issue 31's goals as measured ratios: time against cuBLAS + compiled SiLU*up (<= 1.0x)
    at every T of :data:`ROW_T`, the weight bandwidth at T <= 16 (>= 85% of ``peak``, the run's
    or the record's HBM peak as the suite's other targets take it, book/bench/targets.py; the
    H100's where none is given: an H200's rows were held to the H100's 3.35 TB/s before), the
    planned call's host time (<= 15 us), and the plain call's (<= 15 us and no more than
    torch.matmul's own on the same host: issue 44). Each lists the rows it was computed from (``rows``:
    which runs a page's figure draws on, book/data/lineage.py)."""
    from book.specs import GPU_SPECS

    from .rows import find, keys

    peak = peak or GPU_SPECS["H100-SXM"].memory_bandwidth
    out = []
    for dtype in DTYPES:
        for T in ROW_T:
            s = (T, D, H)
            ours, ref = find(rows, "decode_mlp_up", dtype, s), find(rows, "cublas_linear_silu_compiled", dtype, s)
            if ours and ref:
                r = ours["seconds"] / ref["seconds"]
                out.append({"target": f"decode MLP-up {dtype} T={T}: time / (cuBLAS + compiled SiLU*up)",
                            "value": r, "goal": f"<= {TIME_GOAL}", "met": r <= TIME_GOAL,
                            "detail": f"ours {ours['seconds'] * 1e6:.1f} us, cuBLAS + compile "
                                      f"{ref['seconds'] * 1e6:.1f} us", "rows": keys(ours, ref)})
            if ours and T <= 16:
                f = ours["bandwidth"] / peak
                out.append({"target": f"decode MLP-up {dtype} T={T}: weight bandwidth / HBM peak",
                            "value": f, "goal": f">= {BANDWIDTH_GOAL}", "met": f >= BANDWIDTH_GOAL,
                            "detail": f"{ours['bandwidth'] / 1e12:.2f} TB/s of {peak / 1e12:.2f}",
                            "rows": keys(ours)})
    mm = next((x for x in rows if x["variant"] == "host_torch_matmul"), None)
    for name in ("host_decode_planned", "host_swiglu_mma_planned", "host_decode_plain",
                 "host_swiglu_mma_plain", "host_matmul_mma_plain", "host_swiglu_gemv_plain",
                 "host_fast_half8_plain", "host_swiglu_wgmma_plain"):
        r = next((x for x in rows if x["variant"] == name), None)
        if r:
            out.append({"target": f"{name}: host time per call (us)", "value": r["seconds"] * 1e6,
                        "goal": f"<= {HOST_GOAL_S * 1e6:.0f}", "met": r["seconds"] <= HOST_GOAL_S,
                        "detail": (f"torch.matmul {mm['seconds'] * 1e6:.1f} us" if mm else ""),
                        "rows": keys(r, mm)})
            if mm and name.endswith("_plain"):   # issue 44: the plain call, against torch's own
                out.append({"target": f"{name}: host time / torch.matmul's",
                            "value": r["seconds"] / mm["seconds"], "goal": "<= 1.0",
                            "met": r["seconds"] <= mm["seconds"], "detail": "",
                            "rows": keys(r, mm)})
    return out
