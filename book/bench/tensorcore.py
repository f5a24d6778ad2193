"""The tensor-core rows of the benchmark: the bf16 ``mma.sync`` dual GEMM beside its
controls and the production yardstick, and the separate SwiGLU pass's share of MLP-up.

Rows (``kind`` "tensorcore", dtype bfloat16, shape [T, d, h]; flops count x @ [Wg|Wu]):

- ``tc_ceiling``: the main loop alone (:func:`book.kernels.gemms.mma_gemm.ceiling_mma`), fed from
  shared memory only, same tiles and number of blocks: what ``mma.sync`` gives this kernel;
- ``tc_gemm``: the same kernel as a plain GEMM, x @ [Wg|Wu] -> [T, 2h];
- ``tc_dual_gemm``: silu(x Wg) * (x Wu) from the accumulators, one bf16 store;
- ``tc_dual_gemm_identity``: the control, same kernel storing gate + up;
- ``tc_unfused``: the same kernel storing gate and up, then the ``half8`` SwiGLU kernel;
  ``tc_half8_only``: that separate pass alone (shape [T, h]);
- ``cublas_bf16_gemm``: torch ``x @ [Wg|Wu]`` (cuBLAS) (every row of a shape measured
  interleaved with the others: :func:`book.bench.measure_interleaved`); ``cublas_mlp_up_eager`` and
  ``cublas_mlp_up_compiled``: that GEMM then ``F.silu(g) * u`` on its halves, eager or
  ``torch.compile``d (what a PyTorch user gets);
- ``separate_pass_eager`` / ``separate_pass_compiled`` at T = 1, 64, 2048, 8192 with
  ``share`` = pass / (cuBLAS GEMM + pass), each timed alone: what fusing the activation can
  save at each T (:func:`pass_shares` reads the share a page shows: from the one-call rows
  above where the record has them and their difference is measurable, from these elsewhere).

:func:`run` adds them to a :class:`book.bench.suite.Suite`; ``python -m book.bench`` runs it
as its "tensor cores" phase and ``python -m benchmarks.tensorcore_bench`` runs it alone.
"""

from __future__ import annotations

import math

SHAPES = [(2048, 4096, 14336), (8192, 4096, 14336)]
SHARE_T = (1, 64, 2048, 8192)
CHECK_SHAPE = (256, 512, 1024)
# bf16 output: one rounding (relative 2^-8) on values computed in float32 from bf16 inputs
REL_TOL = 1e-2


def _bits(t, a):
    return a.view(t.int16) if a.dtype == t.bfloat16 else a


def _check(suite, name, got, ref, shape):
    t = suite.torch
    err = float(((got.double() - ref).norm() / ref.norm()).item())
    worst = float(((got.double() - ref).abs() / (ref.abs() + 1e-2 * ref.abs().max())).max().item())
    ok = bool(math.isfinite(err) and err < REL_TOL and worst < 0.1)
    suite.checks.append({"variant": name, "dtype": "bfloat16", "shape": list(shape), "ok": ok,
                         "error": None if ok else f"relative error {err:.3g}, worst {worst:.3g}"})
    print(f"  check {name:<24} {'x'.join(map(str, shape)):<16} relative error {err:.2e}, "
          f"worst element {worst:.2e} ({'ok' if ok else 'FAILED'})", flush=True)
    del t
    return ok


def check(suite, shape=CHECK_SHAPE, tile=None):
    """Every epilogue against a float64 reference (outputs poisoned with NaN first)."""
    t = suite.torch
    F = t.nn.functional
    from book.kernels.gemms import mma_gemm as mg

    T, d, h = shape
    gen = t.Generator(device="cuda").manual_seed(11)
    x = t.randn(T, d, device="cuda", generator=gen).bfloat16()
    wg = (t.randn(d, h, device="cuda", generator=gen) / math.sqrt(d)).bfloat16()
    wu = (t.randn(d, h, device="cuda", generator=gen) / math.sqrt(d)).bfloat16()
    g, u = x.double() @ wg.double(), x.double() @ wu.double()
    nan = lambda: t.full((T, h), float("nan"), device="cuda", dtype=t.bfloat16)  # noqa: E731
    o = nan()
    mg.swiglu_mma(x, wg, wu, o, tile=tile)
    _check(suite, "tc_dual_gemm", o, F.silu(g) * u, shape)
    o = nan()
    mg.swiglu_mma_identity(x, wg, wu, o, tile=tile)
    _check(suite, "tc_dual_gemm_identity", o, g + u, shape)
    G, U = nan(), nan()
    mg.gate_up_mma(x, wg, wu, G, U, tile=tile)
    _check(suite, "tc_gate_up(gate)", G, g, shape)
    _check(suite, "tc_gate_up(up)", U, u, shape)
    o = t.full((T, h), float("nan"), device="cuda", dtype=t.bfloat16)
    mg.matmul_mma(x, wg, o, tile=tile)
    _check(suite, "tc_gemm", o, g, shape)


def run(suite, shapes=SHAPES, share_t=SHARE_T, reps=None, tile=None):
    """Add the rows; ``tile``: a :class:`book.kernels.gemms.mma_gemm.MmaTile` (default its TILE)."""
    t = suite.torch
    F = t.nn.functional
    from book.kernels.elementwise import halfprec
    from book.kernels.gemms import mma_gemm as mg

    reps = reps or max(10, suite.reps // 3)
    if any(suite.wants(v) for v in ("tc_dual_gemm", "tc_gemm")):
        check(suite, tile=tile)
    view = suite.numba_view
    for T, d, h in shapes:
        shape = (T, d, h)
        fl = mg.flops(T, d, h)
        gen = t.Generator(device="cuda").manual_seed(7)
        nsets = 2  # two x (and outputs) in turn: consecutive calls do not find x in L2
        xs = [t.randn(T, d, device="cuda", generator=gen).bfloat16() for _ in range(nsets)]
        wg = (t.randn(d, h, device="cuda", generator=gen) / math.sqrt(d)).bfloat16()
        wu = (t.randn(d, h, device="cuda", generator=gen) / math.sqrt(d)).bfloat16()
        wcat = t.cat([wg, wu], 1).contiguous()
        outs = [t.empty(T, h, device="cuda", dtype=t.bfloat16) for _ in range(nsets)]
        gus = [t.empty(T, 2 * h, device="cuda", dtype=t.bfloat16) for _ in range(nsets)]
        Gs = [t.empty(T, h, device="cuda", dtype=t.bfloat16) for _ in range(nsets)]
        Us = [t.empty(T, h, device="cuda", dtype=t.bfloat16) for _ in range(nsets)]
        xv, ov, guv, Gv, Uv = ([view(a) for a in L] for L in (xs, outs, gus, Gs, Us))
        wgv, wuv, wcv = view(wg), view(wu), view(wcat)

        if suite.wants("tc_dual_gemm"):  # full size against cuBLAS (bf16 tolerance)
            ref = F.silu((xs[0] @ wg).float()) * (xs[0] @ wu).float()
            outs[0].fill_(float("nan"))
            mg.swiglu_mma(xv[0], wgv, wuv, ov[0], tile=tile)
            suite.cuda.synchronize()
            _check(suite, "tc_dual_gemm_vs_cublas", outs[0], ref.double(), shape)
            del ref

        group, meta = {}, {}

        def rows(name, fn, sets, desc, flops=fl, shp=shape):
            # measured below, every row of the shape interleaved with the others
            # (book.bench.measure_interleaved): a drift of the clocks falls on all alike
            if suite.wants(name):
                group[name] = (fn, sets, {"flops": flops})
                meta[name] = (shp, desc)

        rows("tc_ceiling", lambda a, b, c: mg.ceiling_mma(a, b, c, tile=tile),
             [(xv[i], wcv, guv[i]) for i in range(nsets)],
             "mma.sync main loop alone: the same warp tiles fed from shared memory only "
             "(no global loads), as many blocks as the dual GEMM")
        rows("tc_gemm", lambda a, b, c: mg.matmul_mma(a, b, c, tile=tile),
             [(xv[i], wcv, guv[i]) for i in range(nsets)],
             "the Numba mma.sync GEMM, x @ [Wg|Wu] -> [T, 2h] bf16")
        rows("tc_dual_gemm", lambda a, b, c, e: mg.swiglu_mma(a, b, c, e, tile=tile),
             [(xv[i], wgv, wuv, ov[i]) for i in range(nsets)],
             "dual GEMM: silu(x Wg) * (x Wu) from the accumulators, one bf16 store")
        rows("tc_dual_gemm_identity", lambda a, b, c, e: mg.swiglu_mma_identity(a, b, c, e, tile=tile),
             [(xv[i], wgv, wuv, ov[i]) for i in range(nsets)],
             "control: the same kernel storing gate + up (no exp, no division)")

        def unfused(a, b, c, g, u, o):
            mg.gate_up_mma(a, b, c, g, u, tile=tile)
            halfprec.swiglu_half8(g, u, o)

        rows("tc_unfused", unfused, [(xv[i], wgv, wuv, Gv[i], Uv[i], ov[i]) for i in range(nsets)],
             "control: the same kernel storing gate and up (bf16), then the half8 SwiGLU kernel")
        rows("tc_gate_up", lambda a, b, c, g, u: mg.gate_up_mma(a, b, c, g, u, tile=tile),
             [(xv[i], wgv, wuv, Gv[i], Uv[i]) for i in range(nsets)],
             "the unfused path's GEMM alone (gate and up stored)")
        rows("tc_half8_only", lambda g, u, o: halfprec.swiglu_half8(g, u, o),
             [(Gv[i], Uv[i], ov[i]) for i in range(nsets)],
             "the unfused path's separate pass alone: half8 on gate, up", flops=None, shp=(T, h))
        rows("cublas_bf16_gemm", lambda a, w, o: t.matmul(a, w, out=o),
             [(xs[i], wcat, gus[i]) for i in range(nsets)], "cuBLAS bf16 x @ [Wg|Wu] (torch.matmul)")
        eager = _swiglu_halves(F, h)
        rows("cublas_mlp_up_eager", lambda a, w, o: eager(t.matmul(a, w, out=o)),
             [(xs[i], wcat, gus[i]) for i in range(nsets)],
             "cuBLAS x @ [Wg|Wu], then F.silu(g) * u on its halves (eager)")
        compiled = t.compile(_swiglu_halves(F, h), dynamic=False)
        rows("cublas_mlp_up_compiled", lambda a, w, o: compiled(t.matmul(a, w, out=o)),
             [(xs[i], wcat, gus[i]) for i in range(nsets)],
             "cuBLAS x @ [Wg|Wu], then a torch.compile'd F.silu(g) * u on its halves")
        if group:
            timings = suite.bench.measure_interleaved(group, rounds=6, reps=max(3, reps // 6))
            for name, tm in timings.items():
                shp, desc = meta[name]
                suite.add("tensorcore", name, "bfloat16", shp, tm, description=desc)
        del xs, wg, wu, wcat, outs, gus, Gs, Us, xv, ov, guv, Gv, Uv, wgv, wuv, wcv
        t.cuda.empty_cache()
    if suite.wants("separate_pass"):
        share(suite, share_t, shapes[0][1], shapes[0][2], reps)


def _swiglu_halves(F, h):
    def swiglu(gu):
        return F.silu(gu[:, :h]) * gu[:, h:]

    return swiglu


def share(suite, ts, d, h, reps):
    """The separate activation pass's share of MLP-up (cuBLAS GEMM + pass) at each T."""
    t = suite.torch
    F = t.nn.functional
    eager = _swiglu_halves(F, h)
    compiled = t.compile(_swiglu_halves(F, h), dynamic=False)
    gen = t.Generator(device="cuda").manual_seed(3)
    wcat = (t.randn(d, 2 * h, device="cuda", generator=gen) / math.sqrt(d)).bfloat16()
    for T in ts:
        x = t.randn(T, d, device="cuda", generator=gen).bfloat16()
        gu = t.empty(T, 2 * h, device="cuda", dtype=t.bfloat16)
        g = suite.measure(lambda a, o: t.matmul(a, wcat, out=o), [(x, gu)], flops=4 * T * d * h,
                          reps=reps)
        suite.add("tensorcore", "cublas_bf16_gemm_share", "bfloat16", (T, d, h), g,
                  description="cuBLAS x @ [Wg|Wu] (the share's denominator)")
        for name, fn in (("eager", eager), ("compiled", compiled)):
            s = suite.measure(fn, [(gu,)], bytes_moved=3 * 2 * T * h, reps=reps)
            suite.add("tensorcore", f"separate_pass_{name}", "bfloat16", (T, d, h), s,
                      share=s.median_s / (s.median_s + g.median_s),
                      description=f"F.silu(g) * u on the GEMM's halves ({name}); share = pass / "
                                  "(GEMM + pass)")


def _spread(*rows) -> float:
    """The widest p10-p90 range (s) among rows (0 where a row has none)."""
    return max((r.get("p90_s") or 0) - (r.get("p10_s") or 0) for r in rows)


def pass_shares(results, T, d, h):
    """The separate pass's share of the MLP-up at ``(T, d, h)`` from a record, eager and
    compiled, read the same way for both: ``{"timed", "gemm", "eager", "compiled"}``, each pass
    ``{"total", "pass_s", "share", "rows"}`` (``share`` = pass / (GEMM + pass), ``total`` =
    GEMM + pass, seconds).

    ``timed`` "one call": the record has the measurement table's rows at this shape (T = 2048,
    8192): the GEMM alone (``cublas_bf16_gemm``) and the GEMM followed by the pass as one timed
    call (``cublas_mlp_up_<how>``), and what each call adds to the GEMM is larger than the rows'
    p10-p90 spread. Then ``total`` is that call, so the share agrees with the table. "apart":
    no such rows (T = 1, 64), or a difference the spread swallows (a noisy GEMM row can even
    come out slower than the call that contains it): the share phase's GEMM and pass, timed
    apart and added (``cublas_bf16_gemm_share``, ``separate_pass_<how>``). The pass timed alone
    runs faster than it adds inside the call; the two are never mixed in one row."""
    s = (T, d, h)
    gemm = results.select(variant="cublas_bf16_gemm", dtype="bfloat16", shape=s)
    calls = {how: results.select(variant=f"cublas_mlp_up_{how}", dtype="bfloat16", shape=s)
             for how in ("eager", "compiled")}
    if gemm and all(calls.values()) and all(
            c[0]["seconds"] - gemm[0]["seconds"] > _spread(gemm[0], c[0])
            for c in calls.values()):
        g = gemm[0]
        out = {"timed": "one call", "gemm": g}
        for how, (c,) in calls.items():
            total = c["seconds"]
            out[how] = {"total": total, "pass_s": total - g["seconds"],
                        "share": (total - g["seconds"]) / total, "rows": [g, c]}
        return out
    g = results.find("cublas_bf16_gemm_share", "bfloat16", s)
    out = {"timed": "apart", "gemm": g}
    for how in ("eager", "compiled"):
        sep = results.find(f"separate_pass_{how}", "bfloat16", s)
        total = g["seconds"] + sep["seconds"]
        out[how] = {"total": total, "pass_s": sep["seconds"], "share": sep["seconds"] / total,
                    "rows": [g, sep]}
    return out


def pass_share(results, T, d, h, how):
    """:func:`pass_shares` for one pass (``how`` "eager" or "compiled"), with its ``gemm``
    row and how it was ``timed``."""
    both = pass_shares(results, T, d, h)
    return dict(both[how], gemm=both["gemm"], timed=both["timed"])


def targets(rows):
    """The issue's goals as measured ratios (see the module doc), each with the keys of the
    rows it was computed from (``rows``: which runs a page's figure draws on)."""
    from .rows import find, keys as _keys

    out = []
    for T, d, h in SHAPES:
        s = (T, d, h)
        dual, ceil = find(rows, "tc_dual_gemm", "bfloat16", s), find(rows, "tc_ceiling", "bfloat16", s)
        cub, unf = find(rows, "cublas_bf16_gemm", "bfloat16", s), find(rows, "tc_unfused", "bfloat16", s)
        sep = find(rows, "tc_half8_only", "bfloat16", (T, h))
        if dual and ceil:
            r = ceil["seconds"] / dual["seconds"]
            out.append({"target": f"tc dual GEMM {T}x{d}x{h}: throughput / mma.sync main-loop ceiling",
                        "value": r, "goal": ">= 0.80", "met": r >= 0.8,
                        "detail": f"dual {dual['seconds'] * 1e6:.0f} us, ceiling {ceil['seconds'] * 1e6:.0f} us",
                        "rows": _keys(dual, ceil)})
        if dual and cub:
            r = cub["seconds"] / dual["seconds"]
            out.append({"target": f"tc dual GEMM {T}x{d}x{h}: throughput / cuBLAS bf16 x @ [Wg|Wu]",
                        "value": r, "goal": ">= 0.45", "met": r >= 0.45,
                        "detail": f"dual {dual['flops_per_s'] / 1e12:.0f} TFLOP/s, cuBLAS "
                                  f"{cub['flops_per_s'] / 1e12:.0f} TFLOP/s",
                        "rows": _keys(dual, cub)})
        if dual and unf and sep:
            lim = unf["seconds"] - 0.8 * sep["seconds"]
            out.append({"target": f"tc dual GEMM {T}x{d}x{h}: fused <= unfused - 0.8 x its half8 pass (us)",
                        "value": dual["seconds"] * 1e6, "goal": f"<= {lim * 1e6:.0f}",
                        "met": dual["seconds"] <= lim,
                        "detail": f"unfused {unf['seconds'] * 1e6:.0f} us, its half8 pass "
                                  f"timed alone {sep['seconds'] * 1e6:.0f} us",
                        "rows": _keys(dual, unf, sep)})
    return out
