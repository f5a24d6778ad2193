"""The FP8 MLP-up at decode (T = 1, 4, 16) on Hopper: the FP8 GEMV against cuBLASLt FP8 +
torch.compile, its controls and chapter 9's bf16 decode path.

Record: `records/fp8/fp8_decode_h200.json` (or `_h100`: the GPU's tag in the name); then
`python -m book.fp8_data records/fp8/fp8_bench_h200.json records/fp8/fp8_decode_h200.json`
puts its rows beside the prefill run's in `book/data/fp8/h200.json`, where the chapter reads
them.

    python3 -m benchmarks.fp8_decode_bench --out $OUT/fp8_decode_h200.json [--T 1 4 16]
    python3 -m benchmarks.fp8_decode_bench --out $OUT/fp8_decode_sweep_h200.json --T 4 16 --sweep
    python3 -m benchmarks.fp8_decode_bench --out $OUT/fp8_decode_line_h200.json --bytes-line
    python3 -m benchmarks.fp8_decode_bench --out $OUT/fp8_decode_geometry_h200.json --geometry

d = 4096, h = 14336, nn.Linear weights; x per token and the weights per output channel in e4m3
(book.quantize), two copies of the weights taken in turn (234 MB of e4m3, beyond any L2), the
e4m3 output's scale static (taken once from the bf16 output's largest value / 448, times 2).
Rows of one T, measured by :func:`book.bench.measure_interleaved` one row at a time, round
after round, the SM clock, power and temperature read (nvidia-smi) after each turn:

- ``fp8_gemv_e4m3_out``: :func:`book.kernels.gemv.fp8_gemv.swiglu_fp8_gemv`, e4m3 out;
- ``fp8_gemv_bf16_out``: the same kernel storing bfloat16 (the control);
- ``fp8_gemv_e4m3_out_bare``: the same kernel with e4m3 out, the tile's fixes off
  (``gemv_tile(..., fixes=False)``: the scales read output by output, the seams settled in
  full, a plain launch; the same bits): the control of ``Fp8GemvTile``'s fixes;
- ``fp8_fused_gemm_decode``: the fused FP8 GEMM of the prefill rows
  (:func:`book.kernels.gemms.fp8_gemm.swiglu_fp8`) at these T: the tile design at decode;
- ``scaled_mm_rowwise_decode_gemm``: ``torch._scaled_mm`` of x (padded to 16 rows with zeros,
  as cuBLASLt's FP8 GEMM asks) and [Wg; Wu] with the same per-token and per-channel scales,
  bfloat16 out: the GEMM alone;
- ``scaled_mm_rowwise_decode_e4m3_compiled``: that GEMM, then a ``torch.compile``d SiLU*up and
  quantization to e4m3 with the same scale, on its first T rows (what a PyTorch user runs);
- ``scaled_mm_rowwise_decode_bf16_compiled``: the same with a bf16 output;
- ``bf16_decode_planned``: chapter 9's bf16 decode path (``fastcall.planned("decode")``, the
  dispatcher's kernel for T) on bf16 weights: the same layer at two bytes per weight.

Each row's GB/s are of its weight bytes (2dh for e4m3, 4dh for bf16). Then each row again as
pure GPU time, the calls captured in a CUDA graph and replayed (``book.bench.measure`` with
``graph=True``; ``graph_us``): no host time in it at all. Every path is checked first against
float64 of its quantized layer; the GEMV's registers and local memory as built on this GPU are
recorded. ``--sweep`` (its own record, `records/fp8/fp8_decode_sweep_h200.json`, not the
chapter's): instead of the rows, the GEMV's tiles of :data:`SWEEP` (or ``--changes``), rows
``fp8_gemv_sweep_<i>`` (e4m3 out, the tile's fields under ``tile``); each tile's codes checked
equal to the first's (the control's), but a probe's (``Fp8GemvTile.probe``: a part of the
kernel left out, its output not the layer's: timed, never compared). Prints a table and writes JSON (provenance, rows,
checks, ratios).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time


D, H = 4096, 14336


#: the GEMV's tiles ``--sweep`` measures beside the default (each must fit an SM): deeper or
#: shallower rings, longer rows a stage, two blocks an SM, no lead or a longer one, the L2
#: promotion, no L2 hints
SWEEP = ({}, {"stages": 6}, {"stages": 3, "kblocks": 4}, {"stages": 8, "kblocks": 1},
         {"ctas_per_sm": 2, "stages": 3, "kblocks": 1}, {"lead": 0}, {"lead": 8},
         {"promotion": "256B"}, {"promotion": "none"}, {"hints": False},
         {"stages": 5}, {"stages": 6, "kblocks": 2, "lead": 6}, {"hold": 0}, {"waves": 2},
         {"stages": 12, "kblocks": 1, "lead": 8}, {"tma_elem": 2})

#: rows of each weight the bytes line times the default GEMV at (half, the layer's, twice):
#: time against bytes, its slope the kernel's streaming rate, its intercept what a launch
#: costs whatever it reads; chapter 9's bf16 GEMV at the first two beside it
LINE_H = (7168, 14336, 28672)


def sweep(args, doc, ws, gen, V, Q, measure_interleaved, write, prov, torch):
    """Rows ``fp8_gemv_sweep_<i>`` (e4m3 out, the tile of SWEEP[i] over the default, its fields
    under ``tile``), every tile of a T measured in turn, round after round."""
    import dataclasses

    for T in args.T:
        qx = [Q.quantize_torch(torch.randn(T, D, device="cuda", generator=gen)) for _ in range(2)]
        o8 = [torch.empty(T, H, device="cuda", dtype=torch.float8_e4m3fn) for _ in range(2)]
        base = V.gemv_tile(T, D, prov["gpu"])
        tiles = {}
        for i, change in enumerate(args.changes or SWEEP):
            try:
                tiles[i] = dataclasses.replace(base, **change).validate()
            except ValueError as e:
                doc["notes"].append(f"sweep tile {change} at T = {T} refused: {e}")

        def call(tile):
            def run(i):
                w = ws[i]
                return V.swiglu_fp8_gemv(*qx[i], w["gq"], w["sg"], w["uq"], w["su"], o8[i],
                                         out_dtype="e4m3", out_scale=1.0, tile=tile,
                                         probe=bool(tile.probe))
            return run

        # every tile's codes equal the default's (the same sums in the same order), but a
        # probe's (Fp8GemvTile.probe: a part of the kernel left out), which is not compared
        ref = None
        for i, t in tiles.items():
            call(t)(0)
            if t.probe:
                doc["notes"].append(f"sweep tile {i} at T = {T} is the probe {t.probe!r}: its "
                                    "output is not the layer's and was not compared")
                continue
            got = o8[0].view(torch.uint8).clone()
            ref = got if ref is None else ref
            doc["checks"].append({"name": f"fp8_gemv_sweep_{i}_equals_default", "T": T,
                                  "ok": bool(torch.equal(got, ref))})
        cands = {i: (call(t), [(0,), (1,)], {"bytes_moved": V.weight_bytes(D, H)})
                 for i, t in tiles.items()}
        timed = measure_interleaved(cands, rounds=args.rounds, reps=args.reps, warmup=3)
        for i, tile in tiles.items():
            t = timed[i]
            med = t.median_s
            doc["rows"].append({
                "name": f"fp8_gemv_sweep_{i}", "dtype": "e4m3", "shape": [T, D, H],
                **t.record_fields(), "weight_bytes": V.weight_bytes(D, H),
                "tb_per_s": V.weight_bytes(D, H) / med / 1e12,
                "tile": {**dataclasses.asdict(tile), "change": (args.changes or SWEEP)[i]},
                "method": f"book.bench.measure_interleaved per tile, {args.rounds} rounds of "
                          f"{args.reps} samples, tiles in turn"})
            print(f"  sweep T={T} {(args.changes or SWEEP)[i] or 'default'}: {med * 1e6:.1f} us "
                  f"({V.weight_bytes(D, H) / med / 1e12:.2f} TB/s)", flush=True)
        write(args.out, doc)


#: one weight byte count (117 MB of e4m3, the layer's) in other shapes: the FP8 GEMV with
#: twice and four times the k per row tile (half and a quarter of the row tiles), chapter 9's
#: bf16 GEMV with the FP8 layer's row tiles (d = 2048) and its own (d = 4096, h = 7168): does
#: a launch's fixed cost follow the bytes, the row tiles or the eight-bit kernel?
GEOMETRY = (("fp8", 4096, 14336), ("fp8", 8192, 7168), ("fp8", 16384, 3584),
            ("bf16", 2048, 14336), ("bf16", 4096, 7168))


def time_shapes(args, doc, specs, prefix, gen, V, Q, measure_interleaved, write,
                torch, planned):
    """Rows ``<prefix>_<kind>_d<d>_h<h>`` of ``specs`` ((kind, d, h): "fp8", the default GEMV
    with e4m3 out; "bf16", chapter 9's planned decode path), two copies of each layer's
    weights taken in turn, every row of a T in turn, round after round. Returns
    {T: [(kind, weight bytes, median s)]}."""
    layers = {}
    for kind, d, h in specs:
        copies = []
        for _ in range(2):
            wg = torch.randn(h, d, device="cuda", generator=gen) / math.sqrt(d)
            wu = torch.randn(h, d, device="cuda", generator=gen) / math.sqrt(d)
            if kind == "fp8":
                (gq, sg), (uq, su) = Q.quantize_torch(wg), Q.quantize_torch(wu)
                copies.append({"gq": gq, "sg": sg, "uq": uq, "su": su})
            else:
                copies.append({"wgb": wg.bfloat16(), "wub": wu.bfloat16()})
            del wg, wu
        layers[kind, d, h] = copies
    decode = planned("decode")
    out = {}
    for T in args.T:
        cands = {}
        for (kind, d, h), ws in layers.items():
            x = [torch.randn(T, d, device="cuda", generator=gen) for _ in range(2)]
            if kind == "fp8":
                qx = [Q.quantize_torch(v) for v in x]
                o8 = [torch.empty(T, h, device="cuda", dtype=torch.float8_e4m3fn)
                      for _ in range(2)]

                def call(i, ws=ws, o8=o8, qx=qx):
                    w = ws[i]
                    return V.swiglu_fp8_gemv(*qx[i], w["gq"], w["sg"], w["uq"], w["su"], o8[i],
                                             out_dtype="e4m3", out_scale=1.0)
                wb = V.weight_bytes(d, h)
            else:
                xb = [v.bfloat16() for v in x]
                ob = [torch.empty(T, h, device="cuda", dtype=torch.bfloat16) for _ in range(2)]

                def call(i, ws=ws, ob=ob, xb=xb):
                    return decode(xb[i], ws[i]["wgb"], ws[i]["wub"], None, None, ob[i])
                wb = 2 * V.weight_bytes(d, h)
            cands[f"{prefix}_{kind}_d{d}_h{h}"] = (call, wb, kind, d, h)
        timed = measure_interleaved(
            {name: (fn, [(0,), (1,)], {"bytes_moved": wb})
             for name, (fn, wb, *_) in cands.items()}, rounds=args.rounds, reps=args.reps,
            warmup=3)
        out[T] = []
        for name, (fn, wb, kind, d, h) in cands.items():
            med = timed[name].median_s
            doc["rows"].append({
                "name": name, "dtype": "e4m3" if kind == "fp8" else "bfloat16",
                "shape": [T, d, h], **timed[name].record_fields(), "weight_bytes": wb,
                "tb_per_s": wb / med / 1e12,
                "method": f"book.bench.measure_interleaved per row, {args.rounds} rounds of "
                          f"{args.reps} samples, rows in turn"})
            print(f"  T={T} {name}: {med * 1e6:.1f} us ({wb / med / 1e12:.2f} TB/s)", flush=True)
            out[T].append((kind, wb, med))
        write(args.out, doc)
    return out


def bytes_line(args, doc, *tools):
    """Rows ``bytes_line_<kind>_d<d>_h<h>``: the default FP8 GEMV (e4m3 out) at the weights
    [h, D] of :data:`LINE_H`, chapter 9's bf16 GEMV at the first two; then the line through
    the FP8 rows (least squares): its slope in TB/s and its intercept in us."""
    import numpy as np

    specs = [("fp8", D, h) for h in LINE_H] + [("bf16", D, h) for h in LINE_H if h <= H]
    for T, pts in time_shapes(args, doc, specs, "bytes_line", *tools).items():
        b, t = np.array([(wb, s) for kind, wb, s in pts if kind == "fp8"], dtype=float).T
        slope, icept = np.polyfit(b, t, 1)
        doc["ratios"].append({"T": T, "bytes_line": "fp8_gemv", "slope_tb_per_s":
                              1 / slope / 1e12, "intercept_us": icept * 1e6})
        print(f"  bytes line T={T}: the FP8 GEMV streams at {1 / slope / 1e12:.2f} TB/s, "
              f"{icept * 1e6:.1f} us whatever it reads", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--T", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--reps", type=int, default=8)
    ap.add_argument("--sweep", action="store_true",
                    help="instead of the rows, the GEMV's tiles of SWEEP (e4m3 out), "
                         "interleaved, per T (its own record: fp8_decode_sweep_<gpu>.json)")
    ap.add_argument("--changes", type=json.loads, default=None, metavar="JSON",
                    help="with --sweep: these changes of the default tile instead of SWEEP, "
                         "e.g. '[{}, {\"tma_elem\": 2}]' (the first the control)")
    ap.add_argument("--geometry", action="store_true",
                    help="instead of the rows, the GEOMETRY shapes of one byte count (its own "
                         "record: fp8_decode_geometry_<gpu>.json)")
    ap.add_argument("--bytes-line", action="store_true",
                    help="instead of the rows, the default GEMV (and the bf16 one) at the "
                         "weights' rows of LINE_H: time against bytes (its own record)")
    args = ap.parse_args(argv)
    os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")
    import book
    from book import quantize as Q
    from book.bench import measure, measure_interleaved
    from book.data import write
    from book.kernels.gemms import fp8_gemm as G
    from book.kernels.gemv import fp8_gemv as V
    from book.kernels.host.fastcall import planned
    from book.provenance import provenance
    from benchmarks.fp8_bench import kernel_report

    if book.gpu.SIMULATED:
        print("not measured: no CUDA GPU here")
        return 2
    import torch
    import torch.nn.functional as F

    prov = provenance("python3 -m benchmarks.fp8_decode_bench " + " ".join(argv or sys.argv[1:]))
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
        print(f"  check {name:<40} T={T:<3} rel. error vs float64 {err:.2e} "
              f"{'ok' if ok else 'FAILED'}", flush=True)
        return ok

    def silu64(g, u):
        return F.silu(g) * u

    try:
        gen = torch.Generator(device="cuda").manual_seed(42)
        ws = []  # two copies of the layer's weights, e4m3 and bf16
        for _ in range(2):
            wg = torch.randn(H, D, device="cuda", generator=gen) / math.sqrt(D)
            wu = torch.randn(H, D, device="cuda", generator=gen) / math.sqrt(D)
            (gq, sg), (uq, su) = Q.quantize_torch(wg), Q.quantize_torch(wu)
            wq = torch.cat([gq.view(torch.uint8), uq.view(torch.uint8)]).view(
                torch.float8_e4m3fn)
            ws.append({"gq": gq, "sg": sg, "uq": uq, "su": su, "wqt": wq.t(),
                       "sw": torch.cat([sg, su])[None, :].contiguous(),
                       "wgb": wg.bfloat16(), "wub": wu.bfloat16()})
            del wg, wu
        wb8, wb16 = V.weight_bytes(D, H), 2 * V.weight_bytes(D, H)
        decode = planned("decode")
        for T in ([] if args.sweep or args.bytes_line or args.geometry else args.T):
            xs = [torch.randn(T, D, device="cuda", generator=gen) for _ in range(2)]
            qx = [Q.quantize_torch(x) for x in xs]
            pad = [(torch.cat([xq.view(torch.uint8), torch.zeros(16 - T, D, dtype=torch.uint8,
                                                                  device="cuda")])
                    .view(torch.float8_e4m3fn),
                    torch.cat([sx, torch.ones(16 - T, device="cuda")])[:, None].contiguous())
                   for xq, sx in qx]  # cuBLASLt's FP8 GEMM takes rows in sixteens
            xb = [x.bfloat16() for x in xs]
            o16 = [torch.empty(T, H, device="cuda", dtype=torch.bfloat16) for _ in range(2)]
            o8 = [torch.empty(T, H, device="cuda", dtype=torch.float8_e4m3fn) for _ in range(2)]
            ob = [torch.empty(T, H, device="cuda", dtype=torch.bfloat16) for _ in range(2)]

            # float64 of the quantized layer; the static output scale
            w0 = ws[0]
            xq0, sx0 = qx[0]
            xv = xq0.double() * sx0.double()[:, None]
            ref = silu64(xv @ (w0["gq"].double() * w0["sg"].double()[:, None]).T,
                         xv @ (w0["uq"].double() * w0["su"].double()[:, None]).T)
            V.swiglu_fp8_gemv(xq0, sx0, w0["gq"], w0["sg"], w0["uq"], w0["su"], o16[0])
            out_scale = 2 * float(o16[0].float().abs().amax()) / 448
            inv = torch.tensor(1.0 / out_scale, device="cuda")
            check("fp8_gemv_bf16_out", T, o16[0], ref)
            V.swiglu_fp8_gemv(xq0, sx0, w0["gq"], w0["sg"], w0["uq"], w0["su"], o8[0],
                              out_dtype="e4m3", out_scale=out_scale)
            check("fp8_gemv_e4m3_out", T, o8[0].float() * out_scale, ref)
            bare = V.gemv_tile(T, D, prov["gpu"], fixes=False)
            V.swiglu_fp8_gemv(xq0, sx0, w0["gq"], w0["sg"], w0["uq"], w0["su"], o8[1],
                              out_dtype="e4m3", out_scale=out_scale, tile=bare)
            check("fp8_gemv_e4m3_out_bare", T, o8[1].float() * out_scale, ref)
            doc["checks"].append({"name": "fp8_gemv_e4m3_out_bare: the default's codes", "T": T,
                                  "ok": bool(torch.equal(o8[0].view(torch.uint8),
                                                         o8[1].view(torch.uint8)))})
            check("fp8_fused_gemm_decode", T,
                  G.swiglu_fp8(xq0, sx0, w0["gq"], w0["sg"], w0["uq"], w0["su"]), ref)

            def scaled_mm(i, w):
                return torch._scaled_mm(pad[i][0], w["wqt"], scale_a=pad[i][1],
                                        scale_b=w["sw"], out_dtype=torch.bfloat16)

            gu = scaled_mm(0, w0)[:T].double()
            check("scaled_mm_rowwise_decode", T, silu64(gu[:, :H], gu[:, H:]), ref)
            check("scaled_mm_rowwise_decode_e4m3_compiled", T,
                  silu_mul_e4m3(scaled_mm(0, w0)[:T], inv).float() * out_scale, ref)
            decode(xb[0], w0["wgb"], w0["wub"], None, None, ob[0])
            xb64 = xb[0].double()
            check("bf16_decode_planned", T, ob[0], silu64(xb64 @ w0["wgb"].double().T,
                                                          xb64 @ w0["wub"].double().T))

            sets = [(0,), (1,)]  # call i: x_i with the weights' copy i

            def gemv(out, **kw):
                def call(i):
                    w = ws[i]
                    return V.swiglu_fp8_gemv(*qx[i], w["gq"], w["sg"], w["uq"], w["su"],
                                             out[i], **kw)
                return call

            cands = {
                "fp8_gemv_e4m3_out": (gemv(o8, out_dtype="e4m3", out_scale=out_scale), wb8),
                "fp8_gemv_bf16_out": (gemv(o16), wb8),
                "fp8_gemv_e4m3_out_bare": (
                    gemv(o8, out_dtype="e4m3", out_scale=out_scale, tile=bare), wb8),
                "fp8_fused_gemm_decode": (
                    lambda i: G.swiglu_fp8(*qx[i], ws[i]["gq"], ws[i]["sg"], ws[i]["uq"],
                                           ws[i]["su"], o16[i]), wb8),
                "scaled_mm_rowwise_decode_gemm": (lambda i: scaled_mm(i, ws[i]), wb8),
                "scaled_mm_rowwise_decode_e4m3_compiled": (
                    lambda i: silu_mul_e4m3(scaled_mm(i, ws[i])[:T], inv), wb8),
                "scaled_mm_rowwise_decode_bf16_compiled": (
                    lambda i: silu_mul_bf16(scaled_mm(i, ws[i])[:T]), wb8),
                "bf16_decode_planned": (
                    lambda i: decode(xb[i], ws[i]["wgb"], ws[i]["wub"], None, None, ob[i]),
                    wb16),
            }
            fl = 4 * T * D * H
            # plan every path on the stream torch.cuda.graph captures on, outside the capture
            # (a plan made there would allocate its workspace while the stream captures)
            cap = torch.cuda.graph.default_capture_stream
            if cap is None:
                cap = torch.cuda.graph.default_capture_stream = torch.cuda.Stream()
            cap.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(cap):
                for fn, _ in cands.values():
                    fn(0)
                    fn(1)
            torch.cuda.current_stream().wait_stream(cap)
            torch.cuda.synchronize()
            timed = measure_interleaved(
                {name: (fn, sets, {"flops": fl, "bytes_moved": wb})
                 for name, (fn, wb) in cands.items()}, rounds=args.rounds, reps=args.reps,
                warmup=3)
            for name, (fn, wb) in cands.items():
                med = timed[name].median_s
                try:  # pure GPU time: the calls captured in a CUDA graph
                    g = measure(fn, sets, bytes_moved=wb, flops=fl, reps=args.reps * 2,
                                graph=True)
                    graph_us, graph_note = g.median_s * 1e6, g.method
                except Exception as e:  # a path that cannot be captured is said so
                    graph_us, graph_note = None, f"not captured: {e!r}"[:300]
                doc["rows"].append({
                    "name": name, "dtype": "bfloat16" if name.startswith("bf16_") else "e4m3",
                    "shape": [T, D, H], **timed[name].record_fields(), "weight_bytes": wb,
                    "tb_per_s": wb / med / 1e12, "graph_us": graph_us, "graph_method": graph_note,
                    "method": f"book.bench.measure_interleaved per row, {args.rounds} rounds of "
                              f"{args.reps} samples, rows in turn"})
            by = {r["name"]: r for r in doc["rows"] if r["shape"][0] == T}
            peak = prov.get("peak_bandwidth")
            for a, b in (("fp8_gemv_e4m3_out", "scaled_mm_rowwise_decode_e4m3_compiled"),
                         ("fp8_gemv_e4m3_out", "scaled_mm_rowwise_decode_gemm"),
                         ("fp8_gemv_e4m3_out", "fp8_gemv_bf16_out"),
                         ("fp8_gemv_e4m3_out", "fp8_gemv_e4m3_out_bare"),
                         ("fp8_gemv_e4m3_out", "fp8_fused_gemm_decode"),
                         ("fp8_gemv_e4m3_out", "bf16_decode_planned")):
                ra, rb = by[a], by[b]
                ga, gb = ra["graph_us"], rb["graph_us"]
                doc["ratios"].append({"T": T, "ours": a, "theirs": b,
                                      "speedup": rb["median_us"] / ra["median_us"],
                                      "speedup_graph": gb / ga if ga and gb else None})
            doc["ratios"].append({"T": T, "ours": "fp8_gemv_e4m3_out", "theirs": "hbm_peak",
                                  "fraction_of_peak": by["fp8_gemv_e4m3_out"]["tb_per_s"] * 1e12
                                  / peak if peak else None, "peak_bandwidth": peak})
            doc["out_scale_" + str(T)] = out_scale
            write(args.out, doc)
        tools = (gen, V, Q, measure_interleaved, write, torch, planned)
        if args.bytes_line:
            bytes_line(args, doc, *tools)
        if args.geometry:
            time_shapes(args, doc, GEOMETRY, "geometry", *tools)
        if args.sweep:
            sweep(args, doc, ws, gen, V, Q, measure_interleaved, write, prov, torch)
        doc["kernels"] = kernel_report({
            f"gemv_t{T}_{o}": V.make_fp8_gemv(V.gemv_tile(T, D, prov["gpu"]), o)
            for T in args.T for o in V.OUTS})
    finally:
        prov["elapsed_s"] = round(time.time() - t0, 1)
        write(args.out, doc)
    print(f"\n{'row':<40} {'T':>3} {'median us':>9} {'p10-p90':>13} {'graph':>6} {'TB/s':>5} "
          f"{'SM MHz':>6} {'W':>4}")
    for r in doc["rows"]:
        print(f"{r['name']:<40} {r['shape'][0]:>3} {r['median_us']:>9.1f} "
              f"{r['p10_us']:>6.1f}-{r['p90_us']:<6.1f} {r.get('graph_us') or 0:>6.1f} "
              f"{r['tb_per_s']:>5.2f} {r.get('sm_mhz_median') or 0:>6.0f} "
              f"{r.get('power_w_median') or 0:>4.0f}")
    for q in doc["ratios"]:
        if "speedup" in q:
            g = q["speedup_graph"]
            print(f"T={q['T']}: {q['ours']} is {q['speedup']:.3f}x {q['theirs']}"
                  + (f" (graph {g:.3f}x)" if g else ""))
        elif q.get("fraction_of_peak"):
            print(f"T={q['T']}: {q['ours']} reads the weights at {q['fraction_of_peak']:.1%} of "
                  "the HBM peak")
    print("kernels:", doc.get("kernels"))
    return 0 if all(c["ok"] for c in doc["checks"]) else 1


if __name__ == "__main__":
    sys.exit(main())
