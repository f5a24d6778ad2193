"""The benchmark suite: every SwiGLU variant and the references, on this GPU, in one run.

``python -m book.bench`` checks each kernel against a float64 reference at full size
(output poisoned with NaN first), times it with :func:`book.bench.measure`, times the
references (torch eager ``F.silu(g) * u``, ``torch.add(g, u, out=o)``, a device copy,
``torch.matmul`` in strict float32 and TF32) and the GEMMs of :mod:`book.kernels.gemms.gemm`
and :mod:`book.kernels.gemms.dual_gemm`, the bf16 tensor-core rows of :mod:`book.bench.tensorcore`
and the decode MLP-up rows of :mod:`book.bench.decode`, prints a table and the target ratios, and writes
``book/data/<gpu>.json`` (provenance + rows). ``--quick`` runs fewer shapes and reps;
``--out PATH`` writes elsewhere (a file, or a folder for ``<gpu>.json``).

``--only REGEX --rows-out FILE`` measures only the rows whose variant name matches REGEX
(``re.search``: ``--only 'torch_call|launch_layer'``) and writes them, with the run's
provenance, to FILE; ``python -m book.bench.merge FILE`` then puts them into
``book/data/<gpu>.json`` (see :mod:`book.bench.merge`).
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import re
import sys
import time
from pathlib import Path

from book import dtypes
from book.data import write
from book.dtypes import DTYPES
from book.provenance import provenance
from book.specs import slug

from ..capability import FAMILIES
from .elementwise_rows import ElementwiseRows
from .gemm_rows import GemmRows
from .targets import HBM3_PEAK, LARGE, PREFILL, targets

SHAPES = [(1, 12288), (1, 18944), (128, 12288), (128, 18944), PREFILL, LARGE]
QUICK_SHAPES = [(1, 18944), PREFILL, LARGE]
# correctness only, every variant and dtype: awkward sizes (tails, odd widths, M = 1)
CHECK_SHAPES = [(1, 1), (1, 3), (1, 11008), (3, 11008), (127, 129), (129, 127), (128, 128),
                (5, 18944), (7, 12289)]
def torch_sets(shape, dtype, count, seed=0):
    """``count`` (gate, up, out) sets of torch CUDA tensors of ``dtype`` (a book.dtypes name):
    gate and up ``randn * 3``, never zero, out NaN (poisoned), all from one generator seeded
    ``seed``: the elementwise rows' inputs (and benchmarks/coalescing.py's)."""
    import torch

    tdt = getattr(torch, dtype)  # torch names the three dtypes as book.dtypes does
    gen = torch.Generator(device="cuda").manual_seed(seed)
    sets = []
    for _ in range(count):
        g = (torch.randn(shape, device="cuda", generator=gen) * 3).to(tdt)
        u = (torch.randn(shape, device="cuda", generator=gen) * 3).to(tdt)
        g[g == 0] = 0.5  # never zeros
        u[u == 0] = 0.5
        sets.append((g, u, torch.full(shape, float("nan"), device="cuda", dtype=tdt)))
    return sets


def numba_view(x):
    """A fresh Numba view of torch CUDA tensor ``x`` (bfloat16 as its int16 bits), no sync."""
    import torch
    from numba import cuda

    return cuda.as_cuda_array(x.view(torch.int16) if x.dtype == torch.bfloat16 else x, sync=False)


class Suite(ElementwiseRows, GemmRows):
    """One run of the suite: its buffers, its rows, the correctness checks, the tuning sweep
    and the targets; the elementwise and GEMM rows are its parts (elementwise_rows.py,
    gemm_rows.py)."""

    def __init__(self, args):
        import torch
        from numba import cuda

        from book import bench, gpu
        from book.kernels import VARIANTS, reference

        # A torch.compile'd function keeps compiled code for at most recompile_limit (8)
        # shapes; past it TorchDynamo runs each new shape eagerly, with only a log line. The
        # rows compile one function for many shapes (issue 31's fc1b152 record: its float16
        # T = 64 and 256 "compiled" rows ran eagerly), so the suite allows plenty.
        dyn = torch._dynamo.config
        for name in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit"):
            if hasattr(dyn, name):
                setattr(dyn, name, max(getattr(dyn, name), 1024))
        self.args, self.torch, self.cuda = args, torch, cuda
        self.bench, self.gpu, self.reference = bench, gpu, reference
        self.variants = {k: v for k, v in VARIANTS.items()
                         if not args.variants or k in args.variants}
        self.only = re.compile(args.only) if args.only else None
        self.rows, self.checks, self.tuning, self.notes = [], [], [], []
        self.reps = args.reps or (15 if args.quick else 50)
        self.info = gpu.device_info()
        self.peak = self.info.peak_bandwidth or HBM3_PEAK

    # ------------------------------------------------------------------ buffers
    def tdtype(self, dtype):
        t = self.torch
        return getattr(t, dtype)  # torch names the three dtypes as book.dtypes does

    def numba_view(self, x):
        return numba_view(x)

    def make_sets(self, shape, dtype, seed=0):
        nb = math.prod(shape) * dtypes.ITEMSIZE[dtype]
        return torch_sets(shape, dtype, min(self.bench.rotation_count(3 * nb), 64), seed)

    # ------------------------------------------------------------------ rows
    def wants(self, variant):
        """Whether this run measures rows named ``variant`` (``--only``)."""
        return self.only is None or self.only.search(variant) is not None

    def add(self, kind, variant, dtype, shape, timing, **extra):
        """Record a row. ``timing``: a Timing, or a function returning one, called only
        when ``--only`` wants the row (None is returned for a row not wanted)."""
        if not self.wants(variant):
            return None
        if callable(timing):
            timing = timing()
        row = {"kind": kind, "variant": variant, "dtype": dtype, "shape": list(shape)}
        row.update(timing.row() if timing is not None else {})
        row.update(extra)
        self.rows.append(row)
        bw = row.get("bandwidth")
        fl = row.get("flops_per_s")
        s = row.get("seconds")
        print(f"  {variant:<22} {dtype:<9} {'x'.join(map(str, shape)):<16} "
              f"{(s or 0) * 1e6:10.2f} us"
              + (f"  {bw / 1e12:6.3f} TB/s" if bw else "")
              + (f"  {fl / 1e12:7.2f} TFLOP/s" if fl else "")
              + (f"  [{row['method'][:40]}]" if self.args.verbose and row.get("method") else ""),
              flush=True)
        return row

    def later(self, fn, sets, **kw):
        """:meth:`measure` with these arguments, run only if the row is wanted (``--only``).
        The arguments are bound now: ``del`` of a buffer later cannot change them."""
        return functools.partial(self.measure, fn, sets, **kw)

    def measure(self, fn, sets, **kw):
        kw.setdefault("reps", self.reps)
        if self.args.verbose:
            print(f"    measuring {getattr(fn, '__name__', fn)} over {len(sets)} set(s) {kw}", flush=True)
        return self.bench.measure(fn, sets, **kw)

    # ------------------------------------------------------------------ correctness only
    def run_checks(self, dtype):
        t = self.torch
        for shape in CHECK_SHAPES:
            sets = self.make_sets(shape, dtype, seed=sum(shape))[:1]
            g, u, o = sets[0]
            for name, v in self.variants.items():
                if dtype not in v.dtypes or not self.wants(name):
                    continue
                cases = [("", g, u, o)]
                if v.layout == "separate" and shape[-1] > 1:
                    # views that start one element into an allocation: not 16-byte aligned
                    pg = t.empty(g.numel() + 1, dtype=g.dtype, device="cuda")
                    pu, po = t.empty_like(pg), t.empty_like(pg)
                    pg[1:].copy_(g.flatten())
                    pu[1:].copy_(u.flatten())
                    cases.append(("_misaligned", pg[1:].view(shape), pu[1:].view(shape),
                                  po[1:].view(shape)))
                for tag, gg, uu, oo in cases:
                    ok, err = True, None
                    try:
                        oo.fill_(float("nan"))
                        if v.layout == "packed":
                            gu = t.cat([gg, uu], dim=-1)
                            v.fn(self.numba_view(gu), self.numba_view(oo))
                        else:
                            v.fn(self.numba_view(gg), self.numba_view(uu), self.numba_view(oo))
                        self.cuda.synchronize()
                        self.reference.check_device(oo, gg, uu, dtype)
                    except Exception as e:
                        ok, err = False, f"{type(e).__name__}: {e}"
                    self.checks.append({"variant": name + tag, "dtype": dtype, "shape": list(shape),
                                        "ok": ok, "error": err})
                    if not ok:
                        print(f"  CHECK FAILED {name}{tag} {dtype} {shape}: {err[:300]}", flush=True)
        n_ok = sum(c["ok"] for c in self.checks if c["dtype"] == dtype)
        print(f"  {dtype}: {n_ok}/{sum(c['dtype'] == dtype for c in self.checks)} checks passed so far",
              flush=True)

    # ------------------------------------------------------------------ tuning
    def run_tuning(self):
        from book.kernels.elementwise import halfprec, vectorized

        sms = self.info.sm_count or 132
        for shape, dtype, fn, name in [(LARGE, "float32", vectorized.swiglu_vec4, "vec4"),
                                       (PREFILL, "float32", vectorized.swiglu_vec4, "vec4"),
                                       (LARGE, "float16", halfprec.swiglu_half8, "half8")]:
            sets = self.make_sets(shape, dtype, seed=1)
            nsets = [tuple(self.numba_view(x) for x in s) for s in sets]
            nb = math.prod(shape) * dtypes.ITEMSIZE[dtype]
            for block in (128, 256, 512, 1024):
                for waves in (None, 2, 4, 8, 16):
                    mb = None if waves is None else waves * sms * max(1, 1024 // block)
                    timing = self.measure(lambda g, u, o, stream=0: fn(g, u, o, block=block, max_blocks=mb,
                                                                       stream=stream),
                                          nsets, bytes_moved=3 * nb, reps=max(10, self.reps // 3))
                    r = {"variant": name, "dtype": dtype, "shape": list(shape), "block": block,
                         "max_blocks": mb, **timing.row()}
                    self.tuning.append(r)
                    print(f"  tune {name} {dtype} {shape} block={block:<5} max_blocks={str(mb):<6} "
                          f"{timing.median_s * 1e6:9.2f} us {timing.bandwidth / 1e12:6.3f} TB/s",
                          flush=True)
            del sets, nsets
            self.torch.cuda.empty_cache()

    # ------------------------------------------------------------------ summary
    def targets(self):
        return targets(self.rows, self.peak)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="python -m book.bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="fewer shapes and repetitions (writes <gpu>-quick.json)")
    ap.add_argument("--out", help="output JSON file, or a folder for <gpu>.json (default book/data/)")
    ap.add_argument("--dtypes", nargs="+", choices=DTYPES, default=list(DTYPES))
    ap.add_argument("--variants", nargs="+", help="only these kernel variants")
    ap.add_argument("--shapes", nargs="+", metavar="TxH",
                    help="only these elementwise shapes, of " + ", ".join(
                        f"{a}x{b}" for a, b in SHAPES) + " (e.g. 1x18944: the decode rows)")
    ap.add_argument("--no-gemm", action="store_true", help="skip the GEMM rows")
    ap.add_argument("--no-tensorcore", action="store_true",
                    help="skip the bf16 tensor-core rows (book.bench.tensorcore, and on sm_90 "
                         "book.bench.hopper)")
    ap.add_argument("--no-decode", action="store_true",
                    help="skip the decode MLP-up rows, T sweep and host rows (book.bench.decode)")
    ap.add_argument("--no-elementwise", action="store_true",
                    help="skip the elementwise rows and checks (e.g. with --only for the GEMMs)")
    ap.add_argument("--tune", action="store_true", help="also sweep block size and grid size")
    ap.add_argument("--reps", type=int, help="timed samples per row (default 50, 15 with --quick)")
    ap.add_argument("--only", metavar="REGEX",
                    help="measure only rows whose variant name matches REGEX (re.search); "
                         "needs --rows-out")
    ap.add_argument("--rows-out", metavar="FILE",
                    help="write the rows (with provenance) to FILE; merge them into "
                         "book/data/<gpu>.json with `python -m book.bench.merge FILE`")
    ap.add_argument("--verbose", action="store_true", help="say what is being measured")
    ap.add_argument("--watchdog", type=float, default=0,
                    help="print every thread's stack every N seconds (find a hang; debugging only: the dump can crash the process mid-compile, as it did on the H100, so never use it for a record)")
    args = ap.parse_args(argv)
    if args.only:
        try:
            re.compile(args.only)
        except re.error as e:
            ap.error(f"--only {args.only!r} is not a regular expression: {e}")
        if not args.rows_out:
            # a partial run must never replace the full record
            ap.error("--only measures a subset of the rows: give --rows-out FILE, then merge "
                     "with `python -m book.bench.merge FILE`")
    if args.shapes:
        known = {f"{a}x{b}": (a, b) for a, b in SHAPES}
        bad = [x for x in args.shapes if x not in known]
        if bad:
            ap.error(f"--shapes {' '.join(bad)}: not a shape of the suite; use some of "
                     f"{', '.join(known)}")
        if not args.rows_out:
            ap.error("--shapes measures a subset of the rows: give --rows-out FILE, then merge "
                     "with `python -m book.bench.merge FILE`")
        args.shapes = [known[x] for x in args.shapes]
    if args.rows_out and args.out:
        ap.error("give --rows-out FILE or --out PATH, not both")
    if args.watchdog:
        import faulthandler

        faulthandler.dump_traceback_later(args.watchdog, repeat=True)

    # the decode shapes launch small grids on purpose; Numba would warn at every size
    os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")
    import book

    if book.gpu.SIMULATED:
        print("not measured: no CUDA GPU here (Numba's simulator cannot time kernels). "
              "Run `python -m book.bench` on a GPU machine; recorded results are in book/data/.")
        return 2
    t0 = time.time()
    suite = Suite(args)
    prov = provenance("python -m book.bench " + " ".join(argv))
    print(f"{prov['gpu']}: {suite.info.sm_count} SMs, peak {suite.peak / 1e12:.2f} TB/s; "
          f"torch {prov['torch']}, numba-cuda {prov['numba_cuda']}", flush=True)
    if args.rows_out:
        out = Path(args.rows_out)
    else:
        out = Path(args.out) if args.out else Path(__file__).resolve().parents[1] / "data"
        if out.suffix != ".json":
            # a --quick run never overwrites the full recorded results
            out = out / f"{slug(prov['gpu'])}{'-quick' if args.quick else ''}.json"

    def save():
        prov["elapsed_s"] = round(time.time() - t0, 1)
        doc = {"provenance": prov, "rows": suite.rows, "checks": suite.checks,
               "targets": suite.targets(), "tuning": suite.tuning, "notes": suite.notes}
        if args.only:
            doc["only"] = args.only
        return write(out, doc), doc["targets"]

    def phase(label, fn, *a):
        print(f"[{label}]", flush=True)
        try:
            fn(*a)
        except Exception as e:  # keep what was measured; say what broke
            import traceback

            traceback.print_exc()
            suite.notes.append(f"{label} failed: {e!r}")
            suite.checks.append({"variant": label, "dtype": None, "shape": None, "ok": False,
                                 "error": repr(e)})
        save()

    shapes = args.shapes or (QUICK_SHAPES if args.quick else SHAPES)
    for dtype in [] if args.no_elementwise else args.dtypes:
        phase(f"checks {dtype}", suite.run_checks, dtype)
    for dtype in [] if args.no_elementwise else args.dtypes:
        for shape in shapes:
            phase(f"{dtype} {shape}", suite.run_elementwise, tuple(shape), dtype)
    if args.tune:
        phase("tuning", suite.run_tuning)
    if not args.no_gemm:
        phase("GEMMs", suite.run_gemms)
    if not args.no_tensorcore:
        from . import tensorcore

        cc = suite.info.compute_capability
        if cc and FAMILIES["mma_m16n8k16"].has(cc):
            phase("tensor cores", tensorcore.run, suite)
        if cc and FAMILIES["wgmma"].has(cc):
            from . import hopper

            phase("Hopper", hopper.run, suite)
        else:
            suite.notes.append(f"Hopper rows not measured: wgmma and TMA need compute "
                               f"capability 9.0, this GPU has {cc}")
        if not (cc and FAMILIES["mma_m16n8k16"].has(cc)):
            suite.notes.append(f"tensor-core rows not measured: bf16 mma.sync needs compute "
                               f"capability 8.0, this GPU has {cc}")
    if not args.no_decode:
        from . import decode

        cc = suite.info.compute_capability
        if cc and FAMILIES["mma_m16n8k16"].has(cc):
            phase("decode", decode.run, suite)
        else:
            suite.notes.append(f"decode rows not measured: their bf16 paths need compute "
                               f"capability 8.0, this GPU has {cc}")
    path, targets = save()
    print("\nTargets (measured ratios):")
    for tg in targets:
        v = tg["value"]
        print(f"  [{'met' if tg['met'] else 'MISS'}] {tg['target']}: {v:.3f} (goal {tg['goal']}); {tg['detail']}")
    bad = [c for c in suite.checks if not c["ok"]]
    print(f"\ncorrectness: {len(suite.checks) - len(bad)}/{len(suite.checks)} checks passed")
    for c in bad:
        print(f"  FAILED {c['variant']} {c['dtype']} {c['shape']}: {c['error'][:300]}")
    print(f"wrote {path} ({len(suite.rows)} rows) in {prov['elapsed_s']} s")
    return 1 if bad else 0
