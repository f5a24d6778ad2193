"""The Hopper rows of the benchmark: the wgmma dual GEMM beside its controls and the
practitioner's path, in the nn.Linear layout, every row of a shape measured interleaved.

Rows (``kind`` "hopper", dtype bfloat16, shape [T, d, h]; flops count x @ [Wg; Wu]^T):

- ``wgmma_dual_gemm``: silu(x Wg^T) * (x Wu^T) from the accumulators
  (:func:`book.kernels.gemms.wgmma_gemm.swiglu_wgmma`);
- ``wgmma_dual_gemm_identity``: the control, the same kernel storing gate + up;
- ``wgmma_unfused``: the same kernel storing gate and up, then the ``half8`` SwiGLU kernel;
- ``wgmma_ceiling``: the consumers' wgmma loop alone on shared memory (no TMA, no
  epilogue): what this structure can issue;
- ``wgmma_dual_gemm_single``: the variant without clusters (the kernel's default runs
  clusters of two CTAs on neighbouring row tiles, each reading its own weights);
  ``wgmma_dual_gemm_multicast``: the clusters of two sharing each read of the weights through
  TMA multicast;
- ``cublas_linear_gemm``: ``F.linear(x, [Wg; Wu])`` (cuBLAS, the same layout);
  ``cublas_linear_mlp_up_eager`` / ``cublas_linear_mlp_up_compiled``: that GEMM, then
  ``F.silu(g) * u`` on its halves, eager or ``torch.compile``d: what a PyTorch user runs;
- the epilogue rule at T = 2048, h = 14336 and several d (``RULE_D``):
  ``rule_cublas_linear_gemm``, ``rule_separate_pass_compiled`` (with ``share`` = pass /
  (GEMM + pass)) and ``rule_wgmma_dual_gemm``, beside ``copy_bandwidth_bf16`` (torch.add at
  8192 x 14336: the bandwidth the prediction 1.5 P / (BW d) uses);
- host time per call (``host_swiglu_wgmma``, ``host_torch_linear``, shape [T, d, h]).

:func:`run` adds them to a :class:`book.bench.suite.Suite` (its "Hopper" phase, on sm_90);
``python -m benchmarks.hopper_bench`` runs it alone.
"""

from __future__ import annotations

import math

SHAPES = [(2048, 4096, 14336), (8192, 4096, 14336)]
RULE_D = (1024, 2048, 4096, 8192)
RULE_T, RULE_H = 2048, 14336
CHECK_SHAPES = [(256, 512, 1024), (200, 520, 1016), (1, 4096, 1024), (64, 512, 1024)]
REL_TOL = 1e-2  # bf16 output: one rounding of values computed in float32
KIND = "hopper"


def _inputs(t, T, d, h, seed, nsets=2):
    gen = t.Generator(device="cuda").manual_seed(seed)
    xs = [t.randn(T, d, device="cuda", generator=gen).bfloat16() for _ in range(nsets)]
    wg = (t.randn(h, d, device="cuda", generator=gen) / math.sqrt(d)).bfloat16()
    wu = (t.randn(h, d, device="cuda", generator=gen) / math.sqrt(d)).bfloat16()
    return xs, wg, wu


def _check(suite, name, got, ref, shape):
    err = float(((got.double() - ref).norm() / ref.norm()).item())
    ok = bool(math.isfinite(err) and err < REL_TOL and not got.isnan().any().item())
    suite.checks.append({"variant": name, "dtype": "bfloat16", "shape": list(shape), "ok": ok,
                         "error": None if ok else f"relative error {err:.3g}"})
    print(f"  check {name:<30} {'x'.join(map(str, shape)):<16} relative error {err:.2e} "
          f"({'ok' if ok else 'FAILED'})", flush=True)
    return ok


def check(suite):
    """Every epilogue and the cluster variant against float64, outputs poisoned first, at
    whole tiles and at edges (T = 1, 64, 200; h and d not multiples of the tile)."""
    t = suite.torch
    F = t.nn.functional
    from book.kernels.gemms import wgmma_gemm as W

    for T, d, h in CHECK_SHAPES:
        (x,), wg, wu = _inputs(t, T, d, h, 11, 1)
        g, u = x.double() @ wg.double().T, x.double() @ wu.double().T
        nan = lambda: t.full((T, h), float("nan"), device="cuda", dtype=t.bfloat16)  # noqa: E731
        o = nan()
        W.swiglu_wgmma(x, wg, wu, o)
        _check(suite, "wgmma_dual_gemm", o, F.silu(g) * u, (T, d, h))
        for name, tile in (("single", W.HopperTile(cluster=1)),
                           ("multicast", W.HopperTile(cluster=2, multicast=True))):
            o = nan()
            W.swiglu_wgmma(x, wg, wu, o, tile=tile)
            _check(suite, f"wgmma_dual_gemm_{name}", o, F.silu(g) * u, (T, d, h))
        o = nan()
        W.swiglu_wgmma_identity(x, wg, wu, o)
        _check(suite, "wgmma_dual_gemm_identity", o, g + u, (T, d, h))
        G, U = nan(), nan()
        W.gate_up_wgmma(x, wg, wu, G, U)
        _check(suite, "wgmma_gate_up(gate)", G, g, (T, d, h))
        _check(suite, "wgmma_gate_up(up)", U, u, (T, d, h))


def _swiglu_halves(F, h):
    def swiglu(gu):
        return F.silu(gu[:, :h]) * gu[:, h:]

    return swiglu


def run(suite, shapes=SHAPES, rule_d=RULE_D, rounds=6, reps=8):
    """Add the rows (see the module doc)."""
    t = suite.torch
    F = t.nn.functional
    from book.kernels.elementwise import halfprec
    from book.kernels.gemms import wgmma_gemm as W

    if any(suite.wants(v) for v in ("wgmma_dual_gemm", "wgmma_ceiling")):
        check(suite)
    compile_cache = {}

    def compiled(h):
        if h not in compile_cache:
            compile_cache[h] = t.compile(_swiglu_halves(F, h), dynamic=False)
        return compile_cache[h]

    def add_group(cands, shape, descriptions):
        wanted = {k: v for k, v in cands.items() if suite.wants(k)}
        if not wanted:
            return {}
        timings = suite.bench.measure_interleaved(wanted, rounds=rounds, reps=reps)
        rows = {}
        for k, tm in timings.items():
            rows[k] = suite.add(KIND, k, "bfloat16", shape, tm, description=descriptions[k])
        return rows

    for T, d, h in shapes:
        shape = (T, d, h)
        fl = W.flops(T, d, h)
        xs, wg, wu = _inputs(t, T, d, h, 7)
        wc = t.cat([wg, wu], 0).contiguous()
        outs = [t.empty(T, h, device="cuda", dtype=t.bfloat16) for _ in xs]
        gus = [t.empty(T, 2 * h, device="cuda", dtype=t.bfloat16) for _ in xs]
        Gs = [t.empty(T, h, device="cuda", dtype=t.bfloat16) for _ in xs]
        Us = [t.empty(T, h, device="cuda", dtype=t.bfloat16) for _ in xs]
        ref = F.silu((xs[0] @ wg.T).float()) * (xs[0] @ wu.T).float()
        W.swiglu_wgmma(xs[0], wg, wu, outs[0])
        _check(suite, "wgmma_dual_gemm_vs_cublas", outs[0], ref.double(), shape)
        del ref
        eager, comp = _swiglu_halves(F, h), compiled(h)
        single = W.HopperTile(cluster=1)
        multicast = W.HopperTile(cluster=2, multicast=True)

        def unfused(x, G, U, o):
            W.gate_up_wgmma(x, wg, wu, G, U)
            halfprec.swiglu_half8(G, U, o)

        n = range(len(xs))
        f = {"flops": fl}
        cands = {
            "wgmma_dual_gemm": (lambda x, o: W.swiglu_wgmma(x, wg, wu, o),
                                [(xs[i], outs[i]) for i in n], f),
            "wgmma_dual_gemm_identity": (lambda x, o: W.swiglu_wgmma_identity(x, wg, wu, o),
                                         [(xs[i], outs[i]) for i in n], f),
            "wgmma_unfused": (unfused, [(xs[i], Gs[i], Us[i], outs[i]) for i in n], f),
            "wgmma_ceiling": (lambda x, o: W.ceiling_wgmma(x, wc, o), [(xs[i], gus[i]) for i in n],
                              f),
            "wgmma_dual_gemm_single": (lambda x, o: W.swiglu_wgmma(x, wg, wu, o, tile=single),
                                       [(xs[i], outs[i]) for i in n], f),
            "wgmma_dual_gemm_multicast": (lambda x, o: W.swiglu_wgmma(x, wg, wu, o, tile=multicast),
                                          [(xs[i], outs[i]) for i in n], f),
            "cublas_linear_gemm": (lambda x, o: t.matmul(x, wc.T, out=o),
                                   [(xs[i], gus[i]) for i in n], f),
            "cublas_linear_mlp_up_eager": (lambda x, o: eager(t.matmul(x, wc.T, out=o)),
                                           [(xs[i], gus[i]) for i in n], f),
            "cublas_linear_mlp_up_compiled": (lambda x, o: comp(t.matmul(x, wc.T, out=o)),
                                              [(xs[i], gus[i]) for i in n], f),
        }
        desc = {
            "wgmma_dual_gemm": "wgmma dual GEMM: silu(x Wg^T) * (x Wu^T) from the accumulators, "
                               "one bf16 store (TMA)",
            "wgmma_dual_gemm_identity": "control: the same kernel storing gate + up (no exp, "
                                        "no division)",
            "wgmma_unfused": "control: the same kernel storing gate and up, then the half8 "
                             "SwiGLU kernel",
            "wgmma_ceiling": "wgmma main loop alone: the consumers' loop on shared memory, no "
                             "TMA, no epilogue, as many blocks",
            "wgmma_dual_gemm_single": "variant: no clusters (one CTA per schedule entry)",
            "wgmma_dual_gemm_multicast": "variant: the clusters of two share each read of the "
                                         "weights (TMA multicast)",
            "cublas_linear_gemm": "cuBLAS bf16 x @ [Wg; Wu]^T (the nn.Linear layout)",
            "cublas_linear_mlp_up_eager": "cuBLAS x @ [Wg; Wu]^T, then F.silu(g) * u on its "
                                          "halves (eager)",
            "cublas_linear_mlp_up_compiled": "cuBLAS x @ [Wg; Wu]^T, then a torch.compile'd "
                                             "F.silu(g) * u on its halves",
        }
        add_group(cands, shape, desc)
        if suite.wants("host_"):
            host = suite.bench.host_timings({
                "host_swiglu_wgmma": (lambda x, o: W.swiglu_wgmma(x, wg, wu, o), [(xs[0], outs[0])]),
                "host_torch_linear": (lambda x, o: t.matmul(x, wc.T, out=o), [(xs[0], gus[0])]),
            }, calls=50, reps=9)
            for k, tm in host.items():
                suite.add(KIND, k, "bfloat16", shape, tm,
                          description="host time per call (the GPU runs behind): "
                          + ("swiglu_wgmma from torch tensors" if "wgmma" in k
                             else "torch.matmul(x, W.T, out=...)"))
    if any(suite.wants(v) for v in ("rule_", "copy_bandwidth")):
        rule(suite, rule_d, compiled, add_group)


def rule(suite, rule_d, compiled, add_group):
    """The separate pass's share of the MLP-up at several widths d, and the bandwidth the
    rule 1.5 P / (BW d) predicts it with."""
    t = suite.torch
    from book.kernels.gemms import wgmma_gemm as W

    shape = (8192, 14336)
    gen = t.Generator(device="cuda").manual_seed(5)
    sets = [tuple(t.randn(shape, device="cuda", generator=gen).bfloat16() for _ in range(3))
            for _ in range(2)]
    add_group({"copy_bandwidth_bf16": (lambda g, u, o: t.add(g, u, out=o), sets,
                                       {"bytes_moved": 3 * 2 * shape[0] * shape[1]})},
              shape, {"copy_bandwidth_bf16": "torch.add(g, u, out=o): two reads and a write, "
                                             "the bandwidth of the rule's prediction"})
    T, h = RULE_T, RULE_H
    for d in rule_d:
        xs, wg, wu = _inputs(t, T, d, h, 9)
        wc = t.cat([wg, wu], 0).contiguous()
        gus = [t.empty(T, 2 * h, device="cuda", dtype=t.bfloat16) for _ in xs]
        outs = [t.empty(T, h, device="cuda", dtype=t.bfloat16) for _ in xs]
        comp = compiled(h)
        n = range(len(xs))
        fl = {"flops": W.flops(T, d, h)}
        cands = {
            "rule_cublas_linear_gemm": (lambda x, o: t.matmul(x, wc.T, out=o),
                                        [(xs[i], gus[i]) for i in n], fl),
            "rule_separate_pass_compiled": (comp, [(gus[i],) for i in n],
                                            {"bytes_moved": 3 * 2 * T * h}),
            "rule_wgmma_dual_gemm": (lambda x, o: W.swiglu_wgmma(x, wg, wu, o),
                                     [(xs[i], outs[i]) for i in n], fl),
            "rule_cublas_linear_mlp_up_compiled": (lambda x, o: comp(t.matmul(x, wc.T, out=o)),
                                                   [(xs[i], gus[i]) for i in n], fl),
        }
        desc = {"rule_cublas_linear_gemm": "cuBLAS x @ [Wg; Wu]^T at this d",
                "rule_separate_pass_compiled": "the compiled F.silu(g) * u pass alone on the "
                                               "GEMM's output",
                "rule_wgmma_dual_gemm": "the wgmma dual GEMM at this d",
                "rule_cublas_linear_mlp_up_compiled": "cuBLAS + the compiled pass at this d"}
        rows = add_group(cands, (T, d, h), desc)
        g, p = rows.get("rule_cublas_linear_gemm"), rows.get("rule_separate_pass_compiled")
        if g and p:
            p["share"] = p["seconds"] / (p["seconds"] + g["seconds"])


def predicted_share(gemm_flops_per_s, bandwidth, d):
    """The separate pass's share of the MLP-up predicted from the GEMM's rate P and the
    bandwidth BW: the pass moves 3 T h 2 bytes (two reads, a write of bf16) in 6 T h / BW
    seconds, the GEMM does 4 T d h flops in 4 T d h / P, so pass / GEMM = 1.5 P / (BW d)
    (T and h cancel); the share is that over one plus it."""
    r = 1.5 * gemm_flops_per_s / (bandwidth * d)
    return r / (1 + r)


def targets(rows):
    """The issue's goals as measured ratios, each with the keys of the rows it was computed
    from (``rows``: which runs a page's figure draws on, book/data/lineage.py)."""
    from .rows import find, keys

    out = []
    for T, d, h in SHAPES:
        s = (T, d, h)
        dual = find(rows, "wgmma_dual_gemm", "bfloat16", s)
        comp = find(rows, "cublas_linear_mlp_up_compiled", "bfloat16", s)
        gemm = find(rows, "cublas_linear_gemm", "bfloat16", s)
        ceil = find(rows, "wgmma_ceiling", "bfloat16", s)
        if dual and comp:
            r = comp["seconds"] / dual["seconds"]
            out.append({"target": f"wgmma dual GEMM {T}x{d}x{h}: speed / cuBLAS + compiled SwiGLU",
                        "value": r, "goal": ">= 1.0 (stretch 1.05)", "met": r >= 1.0,
                        "detail": f"fused {dual['seconds'] * 1e6:.0f} us, cuBLAS + compile "
                                  f"{comp['seconds'] * 1e6:.0f} us", "rows": keys(dual, comp)})
        if dual and gemm:
            r = gemm["seconds"] / dual["seconds"]
            out.append({"target": f"wgmma dual GEMM {T}x{d}x{h}: speed / cuBLAS GEMM alone",
                        "value": r, "goal": ">= 0.89", "met": r >= 0.89,
                        "detail": f"fused {dual['flops_per_s'] / 1e12:.0f} TFLOP/s, cuBLAS "
                                  f"{gemm['flops_per_s'] / 1e12:.0f} TFLOP/s",
                        "rows": keys(dual, gemm)})
        if dual and ceil:
            r = ceil["seconds"] / dual["seconds"]
            out.append({"target": f"wgmma dual GEMM {T}x{d}x{h}: fraction of the wgmma ceiling",
                        "value": r, "goal": "(reported)", "met": True,
                        "detail": f"ceiling {ceil['flops_per_s'] / 1e12:.0f} TFLOP/s",
                        "rows": keys(dual, ceil)})
    return out
