"""The fused FP8 MLP-up on Hopper against cuBLASLt FP8 + torch.compile, and the bf16 kernel.

Record: `records/fp8/fp8_bench_h200.json` (or `_h100`: the GPU's tag in the name).

    python3 -m benchmarks.fp8_bench --out $OUT/fp8_bench_h200.json [--T 2048 8192]

d = 4096, h = 14336, nn.Linear weights; x per token and the weights per output channel in
e4m3 (book.quantize), the output scale static (the e4m3 rows store y / out_scale, out_scale
taken once from the bf16 output's largest value / 448). Rows of one T, measured by
:func:`book.bench.measure_interleaved` one row at a time, round after round (every row's
turn in each round), the SM clock, power and temperature read (nvidia-smi) right after each
turn and kept with its row:

- ``fp8_fused_e4m3_out``: :func:`book.kernels.gemms.fp8_gemm.swiglu_fp8`, e4m3 out;
- ``fp8_fused_bf16_out``: the same kernel storing bfloat16 (the control);
- ``fp8_fused_e4m3_out_inflight``: the e4m3 kernel with ``inflight=1`` (a consumer releases
  a stage one k-block later, keeping one group of wgmma in flight);
- ``scaled_mm_rowwise_gemm``: ``torch._scaled_mm`` of x and [Wg; Wu] with the same
  per-token and per-channel scales, bfloat16 out: the GEMM alone;
- ``scaled_mm_rowwise_mlp_up_e4m3_compiled``: that GEMM, then a ``torch.compile``d SiLU*up
  and quantization to e4m3 with the same output scale (what a PyTorch user runs);
- ``scaled_mm_rowwise_mlp_up_bf16_compiled``: that GEMM, then a compiled SiLU*up, bfloat16;
- ``scaled_mm_tensorwise_gemm`` and ``..._mlp_up_e4m3_compiled``: the same with one scale per
  tensor (other numerics, checked against their own layer). Which kernels each row launches
  is recorded (torch.profiler) under ``launches``: on the H200 with torch 2.11 both scalings
  ran cuBLASLt's ``nvjet_sm90_qqtst_*`` kernels (rowwise: ``..._ovscale_TNT``);
- ``wgmma_dual_gemm_bf16``: the bf16 kernel of chapter 9 (:func:`swiglu_wgmma`).

Then each row again with torch CUDA events alone (20 calls back to back, median of five
turns, rows in turn): an independent re-timing of the same ratios (``torch_events_us``).

Every path is checked first against float64 of the quantized layer on 128 rows; the FP8
kernels' registers and local memory as built for this GPU are recorded. Prints a table and
writes JSON (provenance, rows, checks, ratios).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time


D, H = 4096, 14336


def kernel_report(kernels):
    out = {}
    for name, k in kernels.items():
        for _, compiled in k.overloads.items():
            try:
                out[name] = {"registers": compiled.regs_per_thread,
                             "local_bytes": compiled.local_mem_per_thread}
            except Exception as e:
                out[name] = {"error": repr(e)}
            break
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--T", type=int, nargs="+", default=[2048, 8192])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--reps", type=int, default=8)
    args = ap.parse_args(argv)
    os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")
    import book
    from book import quantize as Q
    from book.bench import measure_interleaved
    from book.data import write
    from book.kernels.gemms import fp8_gemm as G
    from book.kernels.gemms import wgmma_gemm as W
    from book.provenance import provenance

    if book.gpu.SIMULATED:
        print("not measured: no CUDA GPU here")
        return 2
    import torch
    import torch.nn.functional as F

    prov = provenance("python3 -m benchmarks.fp8_bench " + " ".join(argv or sys.argv[1:]))
    print(f"{prov['gpu']}; torch {prov.get('torch')}, numba-cuda {prov.get('numba_cuda')}",
          flush=True)
    doc = {"provenance": prov, "rows": [], "checks": [], "ratios": [], "notes": []}
    t0 = time.time()

    @torch.compile
    def silu_mul_e4m3(gu, inv):
        g, u = gu[:, :H].float(), gu[:, H:].float()
        return (F.silu(g) * u * inv).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)

    @torch.compile
    def silu_mul_bf16(gu):
        return F.silu(gu[:, :H]) * gu[:, H:]

    def check(name, T, got, ref):
        err = float(((got.double() - ref).norm() / ref.norm()).item())
        ok = math.isfinite(err) and err < (0.05 if "e4m3" in name else 1e-2)
        doc["checks"].append({"name": name, "T": T, "rel_error": err, "ok": ok})
        print(f"  check {name:<36} T={T:<5} rel. error vs float64 {err:.2e} "
              f"{'ok' if ok else 'FAILED'}", flush=True)
        return ok

    try:
        for T in args.T:
            gen = torch.Generator(device="cuda").manual_seed(T)
            xs = [torch.randn(T, D, device="cuda", generator=gen) for _ in range(2)]
            wg = torch.randn(H, D, device="cuda", generator=gen) / math.sqrt(D)
            wu = torch.randn(H, D, device="cuda", generator=gen) / math.sqrt(D)
            qx = [Q.quantize_torch(x) for x in xs]
            (gq, sg), (uq, su) = Q.quantize_torch(wg), Q.quantize_torch(wu)
            wq = torch.cat([gq.view(torch.uint8), uq.view(torch.uint8)]).view(
                torch.float8_e4m3fn)  # [2h, d] e4m3, for one GEMM
            sw = torch.cat([sg, su])[None, :].contiguous()
            xb = [x.bfloat16() for x in xs]
            wgb, wub = wg.bfloat16(), wu.bfloat16()
            o16 = torch.empty(T, H, device="cuda", dtype=torch.bfloat16)
            o8 = torch.empty(T, H, device="cuda", dtype=torch.float8_e4m3fn)
            ob = torch.empty(T, H, device="cuda", dtype=torch.bfloat16)

            # float64 of the quantized layer on 128 rows; the static output scale
            xq0, sx0 = qx[0]
            rows = slice(0, min(T, 128))
            xv = xq0[rows].double() * sx0[rows].double()[:, None]
            ref = (F.silu(xv @ (gq.double() * sg.double()[:, None]).T)
                   * (xv @ (uq.double() * su.double()[:, None]).T))
            G.swiglu_fp8(xq0, sx0, gq, sg, uq, su, o16)
            out_scale = float(o16.float().abs().amax()) / 448
            inv = torch.tensor(1.0 / out_scale, device="cuda")
            check("fp8_fused_bf16_out", T, o16[rows], ref)
            G.swiglu_fp8(xq0, sx0, gq, sg, uq, su, o8, out_dtype="e4m3", out_scale=out_scale)
            check("fp8_fused_e4m3_out", T, o8[rows].float() * out_scale, ref)

            sxc = [sx[:, None].contiguous() for _, sx in qx]

            def scaled_mm(i):  # the same per-token and per-channel scales
                return torch._scaled_mm(qx[i][0], wq.t(), scale_a=sxc[i], scale_b=sw,
                                        out_dtype=torch.bfloat16)

            # per-tensor scales (other numerics): the path cuBLASLt takes
            qt = [Q.quantize_torch(x, "tensor") for x in xs]
            wt, swt = Q.quantize_torch(torch.cat([wg, wu]), "tensor")
            wtt = wt.t()

            def scaled_mm_tensor(i):
                return torch._scaled_mm(qt[i][0], wtt, scale_a=qt[i][1], scale_b=swt,
                                        out_dtype=torch.bfloat16)

            gu = scaled_mm(0)
            g64 = gu[rows].double()
            check("scaled_mm_rowwise_mlp_up", T, F.silu(g64[:, :H]) * g64[:, H:], ref)
            check("scaled_mm_rowwise_mlp_up_e4m3_compiled", T,
                  silu_mul_e4m3(gu, inv)[rows].float() * out_scale, ref)
            gt = scaled_mm_tensor(0)[rows].double()  # its own (per-tensor) quantized layer
            xv = qt[0][0][rows].double() * qt[0][1].double()
            wv = wt.double() * swt.double()
            check("scaled_mm_tensorwise_mlp_up", T, F.silu(gt[:, :H]) * gt[:, H:],
                  F.silu(xv @ wv[:H].T) * (xv @ wv[H:].T))
            W.swiglu_wgmma(xb[0], wgb, wub, ob)
            xv16 = xb[0][rows].double()
            ref16 = F.silu(xv16 @ wgb.double().T) * (xv16 @ wub.double().T)
            check("wgmma_dual_gemm_bf16", T, ob[rows], ref16)

            inflight = G.tile_for("e4m3", inflight=1)  # a stage released one k-block later
            G.swiglu_fp8(xq0, sx0, gq, sg, uq, su, o8, out_dtype="e4m3", out_scale=out_scale,
                         tile=inflight)
            check("fp8_fused_e4m3_out_inflight", T, o8[rows].float() * out_scale, ref)
            fl = G.flops(T, D, H)
            sets = [(0,), (1,)]
            cands = {
                "fp8_fused_e4m3_out": (lambda i: G.swiglu_fp8(*qx[i], gq, sg, uq, su, o8,
                                                              out_dtype="e4m3",
                                                              out_scale=out_scale),
                                       sets, {"flops": fl}),
                "fp8_fused_bf16_out": (lambda i: G.swiglu_fp8(*qx[i], gq, sg, uq, su, o16),
                                       sets, {"flops": fl}),
                "fp8_fused_e4m3_out_inflight": (
                    lambda i: G.swiglu_fp8(*qx[i], gq, sg, uq, su, o8, out_dtype="e4m3",
                                           out_scale=out_scale, tile=inflight),
                    sets, {"flops": fl}),
                "scaled_mm_rowwise_gemm": (scaled_mm, sets, {"flops": fl}),
                "scaled_mm_rowwise_mlp_up_e4m3_compiled": (
                    lambda i: silu_mul_e4m3(scaled_mm(i), inv), sets, {"flops": fl}),
                "scaled_mm_rowwise_mlp_up_bf16_compiled": (
                    lambda i: silu_mul_bf16(scaled_mm(i)), sets, {"flops": fl}),
                "scaled_mm_tensorwise_gemm": (scaled_mm_tensor, sets, {"flops": fl}),
                "scaled_mm_tensorwise_mlp_up_e4m3_compiled": (
                    lambda i: silu_mul_e4m3(scaled_mm_tensor(i), inv), sets, {"flops": fl}),
                "wgmma_dual_gemm_bf16": (lambda i: W.swiglu_wgmma(xb[i], wgb, wub, ob), sets,
                                         {"flops": fl}),
            }
            # which kernels each row launches (torch's rowwise and per-tensor paths differ)
            if T == args.T[0]:
                doc["launches"] = {}
                for name, (fn, _, _) in cands.items():
                    try:
                        with torch.profiler.profile(
                                activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                            fn(0)
                            torch.cuda.synchronize()
                        doc["launches"][name] = sorted({e.name[:120] for e in prof.events()
                                                        if e.device_type.name == "CUDA"})
                    except Exception as e:  # the profiler is a witness, not a row
                        doc["launches"][name] = repr(e)[:200]
                print("  kernels launched:", doc["launches"], flush=True)
            timed = measure_interleaved(cands, rounds=args.rounds, reps=args.reps, warmup=3)
            for name in cands:
                med = timed[name].median_s
                row = {"name": name, "shape": [T, D, H], **timed[name].record_fields(),
                       "tflops": fl / med / 1e12, "method": f"book.bench.measure_interleaved per row, {args.rounds} rounds"
                                 f" of {args.reps} samples, rows in turn"}
                doc["rows"].append(row)
            # an independent re-timing: torch CUDA events around 20 back-to-back calls, five
            # times per row, rows in turn (no book.bench code)
            ind = {n: [] for n in cands}
            for _ in range(5):
                for name, (fn, _, _) in cands.items():
                    fn(0)
                    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(
                        enable_timing=True)
                    a.record()
                    for k in range(20):
                        fn(k % 2)
                    b.record()
                    b.synchronize()
                    ind[name].append(a.elapsed_time(b) * 1e3 / 20)
            for r in doc["rows"]:
                if r["shape"][0] == T:
                    r["torch_events_us"] = sorted(ind[r["name"]])[2]
            by = {r["name"]: r["median_us"] for r in doc["rows"] if r["shape"][0] == T}
            ev = {r["name"]: r["torch_events_us"] for r in doc["rows"] if r["shape"][0] == T}
            for a, b in (("fp8_fused_e4m3_out", "scaled_mm_rowwise_mlp_up_e4m3_compiled"),
                         ("fp8_fused_e4m3_out", "scaled_mm_tensorwise_mlp_up_e4m3_compiled"),
                         ("fp8_fused_e4m3_out", "scaled_mm_rowwise_gemm"),
                         ("fp8_fused_e4m3_out", "scaled_mm_tensorwise_gemm"),
                         ("fp8_fused_bf16_out", "scaled_mm_rowwise_mlp_up_bf16_compiled"),
                         ("fp8_fused_e4m3_out", "wgmma_dual_gemm_bf16")):
                doc["ratios"].append({"T": T, "ours": a, "theirs": b,
                                      "speedup": by[b] / by[a],
                                      "speedup_torch_events": ev[b] / ev[a]})
            doc["out_scale_" + str(T)] = out_scale
            write(args.out, doc)
        doc["kernels"] = kernel_report({
            f"{o}_out": G.build_kernel(G.tile_for(o), o) for o in G.OUTS})
    finally:
        prov["elapsed_s"] = round(time.time() - t0, 1)
        write(args.out, doc)
    print(f"\n{'row':<42} {'T':>5} {'median us':>9} {'p10-p90':>15} {'events':>7} "
          f"{'TFLOP/s':>7} {'SM MHz':>6} {'W':>4}")
    for r in doc["rows"]:
        print(f"{r['name']:<42} {r['shape'][0]:>5} {r['median_us']:>9.1f} "
              f"{r['p10_us']:>7.1f}-{r['p90_us']:<7.1f} {r.get('torch_events_us', 0):>7.1f} "
              f"{r['tflops']:>7.0f} {r['sm_mhz_median'] or 0:>6.0f} "
              f"{r['power_w_median'] or 0:>4.0f}")
    for q in doc["ratios"]:
        print(f"T={q['T']}: {q['ours']} is {q['speedup']:.3f}x {q['theirs']} (torch events "
              f"{q['speedup_torch_events']:.3f}x)")
    print("kernels:", doc.get("kernels"))
    return 0 if all(c["ok"] for c in doc["checks"]) else 1


if __name__ == "__main__":
    sys.exit(main())
