"""The Hopper dual GEMM on the H100, in one go: the instruction models against the GPU,
the kernels' correctness, their SASS, and their time beside cuBLAS (+ compile, + eager).

    COURSE_COMMIT=<sha> python3 benchmarks/hopper_probe.py --out $OUT [--quick] [--variants]

Prints a short table; writes ``hopper_probe_<gpu>.json`` (with provenance) under --out.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path

import book  # noqa: F401  (GPU or simulator first)

import numpy as np
import torch
import torch.nn.functional as F

from book.kernels import hopper as H
from book.kernels import hopper_probes as P
from book.kernels import wgmma_gemm as W

RESULT = {"checks": [], "rows": [], "variants": [], "sass": {}, "errors": []}


def check(name, ok, detail=""):
    RESULT["checks"].append({"name": name, "ok": bool(ok), "detail": detail})
    print(f"  {'ok  ' if ok else 'FAIL'} {name} {detail}", flush=True)


def guarded(fn):
    def run(*a, **k):
        try:
            return fn(*a, **k)
        except Exception as e:  # keep going: one failure must not hide the rest
            tb = traceback.format_exc()
            RESULT["errors"].append({"step": fn.__name__, "error": repr(e), "trace": tb[-3000:]})
            print(f"  ERROR in {fn.__name__}: {e!r}\n{tb[-1500:]}", flush=True)
    return run


def bf16_ints(shape, lo=-3, hi=4, seed=0):
    g = np.random.default_rng(seed)
    return g.integers(lo, hi, size=shape).astype(np.float32)


def to_bf16_bits(a):
    return (np.asarray(a, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)


@guarded
def probe_mbarrier():
    got, want = P.mbarrier_phases(), P.mbarrier_model_phases()
    check("mbarrier phases = model", got == want, f"gpu {got} model {want}")


@guarded
def probe_tma():
    a = bf16_ints((300, 200), seed=1)
    t = torch.from_numpy(to_bf16_bits(a).view(np.int16)).cuda().view(torch.bfloat16)
    for mode, box, c0, c1 in (("128B", (64, 128), 64, 100), ("128B", (64, 128), 160, 0),
                              ("none", (8, 64), 8, 250), ("64B", (32, 64), 32, 10)):
        got = P.tma_tile(t, c0, c1, box, mode)
        want = H.tma_box(to_bf16_bits(a), c0, c1, box, mode)
        bad = int(np.count_nonzero(got != want))
        check(f"tma box {box} at ({c0},{c1}) {mode} = model", bad == 0, f"{bad} bytes differ")


@guarded
def probe_wgmma():
    for n in (64, 256):
        for mode in ("none", "128B"):
            for kstep in ((0, 1) if mode == "128B" else (0,)):
                A = bf16_ints((64, 64), seed=2)
                B = bf16_ints((n, 64), seed=3)
                img = np.zeros(64 * 1024, dtype=np.uint8)
                if mode == "none":
                    lbo, sbo = 128, 256
                    a0, b0 = 0, 8192
                    da = H.descriptor(a0, lbo, sbo, "none")
                    db = H.descriptor(b0, lbo, sbo, "none")
                    ks = slice(0, 16)
                else:
                    a0, b0 = 0, 8192  # whole 128-byte rows, 1024-aligned tiles
                    da = H.descriptor(a0 + 32 * kstep, 16, 1024, "128B")
                    db = H.descriptor(b0 + 32 * kstep, 16, 1024, "128B")
                    ks = slice(16 * kstep, 16 * kstep + 16)
                    # the tiles as TMA would write them: whole rows, swizzled
                    img[a0:a0 + 8192] = H.tma_box(to_bf16_bits(A), 0, 0, (64, 64), "128B")
                    img[b0:b0 + n * 128] = H.tma_box(to_bf16_bits(B), 0, 0, (64, n), "128B")
                if mode == "none":
                    for (mat, d) in ((A[:, :16], da), (B[:, :16], db)):
                        addr = H.operand_addresses(d, mat.shape[0])
                        bits = to_bf16_bits(mat)
                        img[addr] = (bits & 0xFF).astype(np.uint8)
                        img[addr + 1] = (bits >> 8).astype(np.uint8)
                got = P.wgmma_once(img, da, db, n)
                model = H.wgmma_model(img, da, db, n, dtype="bfloat16")
                exact = A[:, ks].astype(np.float64) @ B[:, ks].astype(np.float64).T
                placed = np.zeros((64, n), dtype=np.float32)
                for th in range(128):
                    for i in range(n // 2):
                        placed[H.d_coords(th, i)] = got[th, i]
                check(f"wgmma m64n{n}k16 {mode} k-step {kstep}: gpu = model = A B^T",
                      np.array_equal(placed, model) and np.array_equal(model, exact),
                      f"gpu-model max {np.abs(placed - model).max():g}, model-exact "
                      f"{np.abs(model - exact).max():g}")


def rel_err(got, ref):
    return float((got.double() - ref).norm() / ref.norm())


@guarded
def correctness():
    shapes = [(256, 512, 1024), (200, 520, 1016), (1, 4096, 1024), (64, 512, 1024),
              (130, 4096, 14336)]
    for T, d, h in shapes:
        gen = torch.Generator(device="cuda").manual_seed(T + d + h)
        x = torch.randn(T, d, device="cuda", generator=gen).bfloat16()
        wg = (torch.randn(h, d, device="cuda", generator=gen) / math.sqrt(d)).bfloat16()
        wu = (torch.randn(h, d, device="cuda", generator=gen) / math.sqrt(d)).bfloat16()
        g, u = x.double() @ wg.double().T, x.double() @ wu.double().T
        o = torch.full((T, h), float("nan"), device="cuda", dtype=torch.bfloat16)
        W.swiglu_wgmma(x, wg, wu, o)
        torch.cuda.synchronize()
        e = rel_err(o, F.silu(g) * u)
        check(f"swiglu {T}x{d}x{h}", e < 1e-2 and not torch.isnan(o).any(), f"rel err {e:.2e}")
        for kw in ({"cluster": 2}, {"cluster": 2, "multicast": False}, {"inflight": 1}):
            o.fill_(float("nan"))
            W.swiglu_wgmma(x, wg, wu, o, tile=W.HopperTile(**kw))
            e = rel_err(o, F.silu(g) * u)
            check(f"swiglu {T}x{d}x{h} {kw}", e < 1e-2 and not torch.isnan(o).any(),
                  f"rel err {e:.2e}")
        if (T, d, h) == shapes[0] or (T, d, h) == shapes[1]:
            o.fill_(float("nan"))
            W.swiglu_wgmma_identity(x, wg, wu, o)
            e = rel_err(o, g + u)
            check(f"identity {T}x{d}x{h}", e < 1e-2, f"rel err {e:.2e}")
            G = torch.full_like(o, float("nan"))
            U = torch.full_like(o, float("nan"))
            W.gate_up_wgmma(x, wg, wu, G, U)
            check(f"store2 {T}x{d}x{h}", rel_err(G, g) < 1e-2 and rel_err(U, u) < 1e-2,
                  f"{rel_err(G, g):.2e} {rel_err(U, u):.2e}")
            wc = torch.cat([wg, wu], 0)
            O = torch.full((T, 2 * h), float("nan"), device="cuda", dtype=torch.bfloat16)
            W.matmul_wgmma(x, wc, O)
            e = rel_err(O, x.double() @ wc.double().T)
            check(f"gemm {T}x{d}x{2 * h}", e < 1e-2, f"rel err {e:.2e}")


def add_row(name, shape, t, fl):
    med, lo, hi = t
    RESULT["rows"].append({"variant": name, "shape": list(shape), "us": med, "us_min": lo,
                           "us_max": hi, "tflops": fl / med / 1e6})
    print(f"  {name:<28} {'x'.join(map(str, shape)):<16} {med:9.1f} us  "
          f"{fl / med / 1e6:6.1f} TFLOP/s  (range {lo:.1f}-{hi:.1f})", flush=True)


def interleaved(fns, rounds=3, samples=5, per=10):
    """{name: (median, min, max) us per call}: every candidate timed in turn, round after
    round, so a drift of the card's clocks falls on all of them alike."""
    got = {n: [] for n in fns}
    for n, (fn, sets) in fns.items():  # warm-up: compile, plan, caches
        for i in range(3):
            fn(*sets[i % len(sets)])
    torch.cuda.synchronize()
    t0 = time.time()
    while time.time() - t0 < 3:  # and the card at its working temperature and clocks
        for n, (fn, sets) in fns.items():
            fn(*sets[0])
        torch.cuda.synchronize()
    for _ in range(rounds * samples):
        for n, (fn, sets) in fns.items():
            for _ in range(1):
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                for i in range(per):
                    fn(*sets[i % len(sets)])
                e1.record()
                e1.synchronize()
                got[n].append(e0.elapsed_time(e1) * 1000 / per)
    return {n: (statistics.median(v), min(v), max(v)) for n, v in got.items()}


def host_us(fn, args, n=200):
    """Host time per call (enqueue only: the GPU runs behind)."""
    fn(*args)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn(*args)
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / n * 1e6


@guarded
def timing(shapes, variants):
    from book.kernels import halfprec

    for T, d, h in shapes:
        shape = (T, d, h)
        fl = W.flops(T, d, h)
        gen = torch.Generator(device="cuda").manual_seed(7)
        xs = [torch.randn(T, d, device="cuda", generator=gen).bfloat16() for _ in range(2)]
        wg = (torch.randn(h, d, device="cuda", generator=gen) / math.sqrt(d)).bfloat16()
        wu = (torch.randn(h, d, device="cuda", generator=gen) / math.sqrt(d)).bfloat16()
        wc = torch.cat([wg, wu], 0).contiguous()
        outs = [torch.empty(T, h, device="cuda", dtype=torch.bfloat16) for _ in range(2)]
        gus = [torch.empty(T, 2 * h, device="cuda", dtype=torch.bfloat16) for _ in range(2)]
        Gs = [torch.empty(T, h, device="cuda", dtype=torch.bfloat16) for _ in range(2)]
        Us = [torch.empty(T, h, device="cuda", dtype=torch.bfloat16) for _ in range(2)]
        sets = lambda *L: [tuple(l[i] if isinstance(l, list) else l for l in L) for i in range(2)]  # noqa: E731

        ref = F.silu((xs[0] @ wg.T).float()) * (xs[0] @ wu.T).float()
        W.swiglu_wgmma(xs[0], wg, wu, outs[0])
        torch.cuda.synchronize()
        e = rel_err(outs[0], ref.double())
        check(f"swiglu vs cuBLAS {T}x{d}x{h}", e < 1e-2, f"rel err {e:.2e}")
        del ref

        def unfused(x, G, U, o):
            W.gate_up_wgmma(x, wg, wu, G, U)
            halfprec.swiglu_half8(G, U, o)

        def eager(gu):
            return F.silu(gu[:, :h]) * gu[:, h:]

        compiled = torch.compile(eager, dynamic=False)
        fns = {
            "wgmma_dual_gemm": (lambda x, o: W.swiglu_wgmma(x, wg, wu, o), sets(xs, outs)),
            "wgmma_dual_gemm_identity": (lambda x, o: W.swiglu_wgmma_identity(x, wg, wu, o),
                                         sets(xs, outs)),
            "wgmma_unfused": (unfused, sets(xs, Gs, Us, outs)),
            "wgmma_gemm": (lambda x, o: W.matmul_wgmma(x, wc, o), sets(xs, gus)),
            "wgmma_ceiling": (lambda x, o: W.ceiling_wgmma(x, wc, o), sets(xs, gus)),
            "cublas_bf16_gemm": (lambda x, o: torch.matmul(x, wc.T, out=o), sets(xs, gus)),
            "cublas_mlp_up_eager": (lambda x, o: eager(torch.matmul(x, wc.T, out=o)), sets(xs, gus)),
            "cublas_mlp_up_compiled": (lambda x, o: compiled(torch.matmul(x, wc.T, out=o)),
                                       sets(xs, gus)),
        }
        if variants:
            for kw in ({"cluster": 2}, {"cluster": 2, "multicast": False},
                       {"inflight": 1}, {"group": 4}, {"group": 16}):
                tile = W.HopperTile(**kw)
                name = "variant " + ",".join(f"{k}={v}" for k, v in kw.items())
                fns[name] = ((lambda x, o, tile=tile: W.swiglu_wgmma(x, wg, wu, o, tile=tile)),
                             sets(xs, outs))
        for name, t in interleaved(fns).items():
            add_row(name, shape, t, fl)
        grids = sorted({(p.grid, p.config is not None) for p in W._PLANS.values()})
        print(f"  grids launched (blocks, clustered): {grids}; cluster occupancy "
              f"{ {str(k.__dict__): v for k, v in W.OCCUPANCY.items()} }", flush=True)
        hu = host_us(lambda: W.swiglu_wgmma(xs[0], wg, wu, outs[0]), ())
        hm = host_us(lambda: torch.matmul(xs[0], wc.T, out=gus[0]), ())
        RESULT.setdefault("host", []).append({"shape": list(shape), "swiglu_wgmma_us": hu,
                                              "torch_matmul_us": hm})
        print(f"  host per call: swiglu_wgmma {hu:.1f} us, torch.matmul {hm:.1f} us", flush=True)
        fns.clear()
        torch.cuda.empty_cache()


@guarded
def sass(out_dir):
    """SASS of the dual GEMM: HGMMA count, setmaxnreg kept, registers; ptxas's log."""
    kern = W.build_kernel(W.TILE, "swiglu", "bf16")
    for sig, compiled in kern.overloads.items():
        lib = compiled._codelibrary
        cubin = lib.get_cubin()
        path = Path(out_dir) / "wgmma_swiglu.cubin"
        path.write_bytes(bytes(cubin.code) if hasattr(cubin, "code") else bytes(cubin))
        text = subprocess.run(["cuobjdump", "-sass", str(path)], capture_output=True,
                              text=True).stdout
        res = subprocess.run(["cuobjdump", "-res-usage", str(path)], capture_output=True,
                             text=True).stdout
        info = str(getattr(lib, "_linkerinfo_cache", {}))
        RESULT["sass"] = {"hgmma": text.count("HGMMA"), "usetmaxreg": text.count("USETMAXREG"),
                          "res_usage": res[-600:], "linker_info": info[-2000:],
                          "lto": bool(getattr(lib, "_lto", None))}
        print(f"  SASS: {text.count('HGMMA')} HGMMA, {text.count('USETMAXREG')} USETMAXREG; "
              f"{res.strip()[-300:]}", flush=True)
        path.unlink()
        break


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true", help="T = 2048 only")
    ap.add_argument("--variants", action="store_true")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    from book.provenance import provenance

    t0 = time.time()
    print("== instruction models against the GPU", flush=True)
    probe_mbarrier()
    probe_tma()
    probe_wgmma()
    print("== kernels against float64", flush=True)
    correctness()
    print("== SASS", flush=True)
    sass(out)
    print("== timing (back-to-back calls, CUDA events, interleaved: 3 rounds x 5 x 10)", flush=True)
    shapes = [(2048, 4096, 14336)] + ([] if a.quick else [(8192, 4096, 14336)])
    timing(shapes, a.variants)
    RESULT["provenance"] = provenance(" ".join(sys.argv))
    RESULT["seconds"] = time.time() - t0
    from book.specs import slug

    name = slug(torch.cuda.get_device_name())
    (out / f"hopper_probe_{name}.json").write_text(json.dumps(RESULT, indent=1))
    rows = {(r["variant"], r["shape"][0]): r["us"] for r in RESULT["rows"]}
    print("\n== summary")
    for T in sorted({s for _, s in rows}):
        c = rows.get(("cublas_mlp_up_compiled", T))
        g = rows.get(("cublas_bf16_gemm", T))
        o = rows.get(("wgmma_dual_gemm", T))
        if c and o and g:
            print(f"T={T}: fused {o:.0f} us; cuBLAS+compile {c:.0f} us -> {c / o:.3f}x; "
                  f"cuBLAS GEMM {g:.0f} us -> {g / o:.3f}x")
    bad = [c["name"] for c in RESULT["checks"] if not c["ok"]]
    print(f"checks: {len(RESULT['checks']) - len(bad)} ok, {len(bad)} failed {bad}; "
          f"errors: {[e['step'] for e in RESULT['errors']]}")


if __name__ == "__main__":
    main()
