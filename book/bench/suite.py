"""The benchmark suite: every SwiGLU variant and the references, on this GPU, in one run.

``python -m book.bench`` checks each kernel against a float64 reference at full size
(output poisoned with NaN first), times it with :func:`book.bench.measure`, times the
references (torch eager ``F.silu(g) * u``, ``torch.add(g, u, out=o)``, a device copy,
``torch.matmul`` in strict float32 and TF32) and the GEMMs of :mod:`book.kernels.gemm`
and :mod:`book.kernels.dual_gemm`, the bf16 tensor-core rows of :mod:`book.bench.tensorcore`
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
from book.traffic import FLOPS_PER_ELEMENT

from .targets import DECODE_SHAPES, GEMM_SHAPES, HBM3_PEAK, LARGE, PREFILL, targets

SHAPES = [(1, 12288), (1, 18944), (128, 12288), (128, 18944), PREFILL, LARGE]
QUICK_SHAPES = [(1, 18944), PREFILL, LARGE]
# correctness only, every variant and dtype: awkward sizes (tails, odd widths, M = 1)
CHECK_SHAPES = [(1, 1), (1, 3), (1, 11008), (3, 11008), (127, 129), (129, 127), (128, 128),
                (5, 18944), (7, 12289)]
# torch.compile's rows beside eager: prefill and decode sizes (one compile per shape and dtype)
COMPILE_SHAPES = DECODE_SHAPES + [PREFILL, LARGE]


class Suite:
    def __init__(self, args):
        import torch
        from numba import cuda

        from book import bench, gpu
        from book.kernels import VARIANTS, reference

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
        t = self.torch
        if x.dtype == t.bfloat16:
            x = x.view(t.int16)
        return self.cuda.as_cuda_array(x, sync=False)

    def make_sets(self, shape, dtype, seed=0):
        t = self.torch
        n = math.prod(shape)
        nb = n * dtypes.ITEMSIZE[dtype]
        k = min(self.bench.rotation_count(3 * nb), 64)
        gen = t.Generator(device="cuda").manual_seed(seed)
        sets = []
        for _ in range(k):
            g = (t.randn(shape, device="cuda", generator=gen) * 3).to(self.tdtype(dtype))
            u = (t.randn(shape, device="cuda", generator=gen) * 3).to(self.tdtype(dtype))
            g[g == 0] = 0.5  # never zeros
            u[u == 0] = 0.5
            o = t.full(shape, float("nan"), device="cuda", dtype=self.tdtype(dtype))
            sets.append((g, u, o))
        return sets

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

    # ------------------------------------------------------------------ elementwise
    def run_elementwise(self, shape, dtype):
        t = self.torch
        F = t.nn.functional
        n = math.prod(shape)
        nb = n * dtypes.ITEMSIZE[dtype]
        sets = self.make_sets(shape, dtype)
        nsets = [tuple(self.numba_view(x) for x in s) for s in sets]
        min_bytes = 3 * nb
        flops = FLOPS_PER_ELEMENT * n
        best = None
        for name, v in self.variants.items():
            if dtype not in v.dtypes or not self.wants(name):
                continue
            if v.layout == "packed":
                psets = [(t.cat([g, u], dim=-1), o) for g, u, o in sets]
                args = [(self.numba_view(gu), self.numba_view(o)) for gu, o in psets]
                chk = (psets[0][0][..., : shape[-1]], psets[0][0][..., shape[-1]:], psets[0][1])
            else:
                args, chk = nsets, sets[0]
            # correctness at full size: poison, run, compare with float64 on the GPU
            ok, err = True, None
            try:
                chk[2].fill_(float("nan"))
                v.fn(*args[0])
                self.cuda.synchronize()
                self.reference.check_device(chk[2], chk[0], chk[1], dtype)
            except AssertionError as e:
                ok, err = False, str(e)
            self.checks.append({"variant": name, "dtype": dtype, "shape": list(shape), "ok": ok,
                                "error": err})
            if not ok:
                print(f"  CHECK FAILED {name} {dtype} {shape}: {err}", flush=True)
            timing = self.measure(v.fn, args, bytes_moved=min_bytes, flops=flops)
            row = self.add("kernel", name, dtype, shape, timing, correct=ok,
                           transfers_per_element=v.transfers_per_element,
                           bytes_actual=v.transfers_per_element * nb, description=v.description)
            if v.layout == "separate" and (best is None or row["seconds"] < best[1]["seconds"]):
                best = (name, row)
            del args
        # references, same buffers
        self.add("reference", "torch_eager", dtype, shape,
                 self.later(lambda g, u, o: F.silu(g) * u, sets, bytes_moved=min_bytes,
                                      flops=flops),
                 description="torch eager F.silu(g) * u (two kernels, allocates its outputs)")
        compiled = None
        if shape in COMPILE_SHAPES and (self.wants("torch_compile") or (
                shape in DECODE_SHAPES and self.wants("launch_layer_torch_compile"))):
            compiled = self.compiled_swiglu(sets, shape, dtype)
        if compiled is not None:
            self.add("reference", "torch_compile", dtype, shape,
                     self.later(lambda g, u, o: compiled(g, u), sets, bytes_moved=min_bytes,
                                flops=flops),
                     description="torch.compile(F.silu(g) * u, dynamic=False, fullgraph=True): "
                                 "one generated kernel, static shape, warmed up (allocates its output)")
        self.add("reference", "torch_add", dtype, shape,
                 self.later(lambda g, u, o: t.add(g, u, out=o), sets, bytes_moved=min_bytes),
                 description="torch.add(g, u, out=o): a three-stream elementwise kernel")
        self.add("reference", "copy", dtype, shape,
                 self.later(lambda g, u, o: o.copy_(g), sets, bytes_moved=2 * nb),
                 description="device copy o.copy_(g), bytes read + written")
        if shape == PREFILL and "vec4" in self.variants and dtype == "float32":
            # The same shape with ONE input set: 192 MiB of traffic against a 50 MiB L2, so
            # part of each call hits data the previous call left in L2 (what a benchmark
            # that does not rotate its inputs measures).
            from book.kernels import vectorized

            one = [nsets[0]]
            self.add("kernel", "vec4_l2_warm", dtype, shape,
                     self.later(vectorized.swiglu_vec4, one, bytes_moved=min_bytes,
                                          flops=flops),
                     correct=True, description="vec4 with the same buffers every call (no rotation)")
            self.add("reference", "torch_add_l2_warm", dtype, shape,
                     self.later(lambda g, u, o: t.add(g, u, out=o), [sets[0]],
                                          bytes_moved=min_bytes),
                     description="torch.add with the same buffers every call (no rotation)")
        host = {}  # decode sizes: every host-time row of this shape, measured as one group
        if shape in DECODE_SHAPES:
            # the fastest variant measured here; with --only, the course's widest one
            from book.kernels import best_variant

            name = best[0] if best is not None else best_variant(dtype)
            self.run_decode(shape, dtype, sets, nsets, name, min_bytes, flops, host)
        if shape == LARGE or shape in DECODE_SHAPES:
            self.run_torch_calls(shape, dtype, sets, nsets, min_bytes, flops, host, compiled)
        if host:
            self.host_group(host, dtype, shape, min_bytes, flops)
        del sets, nsets
        t.cuda.empty_cache()

    def host_group(self, host, dtype, shape, min_bytes, flops, calls=500, reps=15):
        """Host-time rows measured together (``host``: row name -> (fn, arg sets,
        description), or (fn, arg sets, description, name of a row that makes the same call)):
        :func:`book.bench.host_timings` takes them in turns, round after round, so every row
        of one shape and dtype comes from the same stretch of the same run, each with its
        median and p10/p90 (chapter 6 compares them with each other). A row that makes the
        same call as another row of the group is not measured twice: it gets that row's
        timing, so the two names can never show two figures for one call."""
        wanted, measured, same = group_jobs(host, self.wants)
        if not wanted:
            return
        if self.args.quick:
            reps = min(reps, 7)
        timings = self.bench.host_timings({k: host[k][:2] for k in measured},
                                          calls=calls, reps=reps)
        for k in wanted:
            description = host[k][2]
            if k in same:
                description += f" (the same call as {same[k]}: one measurement, two names)"
            tm = timings[same.get(k, k)]
            row = self.add("launch", k, dtype, shape, tm, description=description)
            if row is not None:  # host time: the bytes and flops of a call, at the host's pace
                row.update(bytes=min_bytes, bandwidth=min_bytes / tm.median_s, flops=flops,
                           flops_per_s=flops / tm.median_s, samples_s=list(tm.samples_s))

    def compiled_swiglu(self, sets, shape, dtype):
        """``torch.compile(F.silu(g) * u)`` for this shape and dtype (static shapes: no
        recompilation inside a row), compiled and checked before any timing; None (with a
        failed check) where torch.compile does not work here."""
        t = self.torch
        F = t.nn.functional

        def swiglu(g, u):
            return F.silu(g) * u

        try:
            t._dynamo.reset()  # a fresh cache per shape: no recompile limit reached across shapes
            fn = t.compile(swiglu, dynamic=False, fullgraph=True)
            g, u, _o = sets[0]
            for _ in range(3):  # compile, then the cached code
                res = fn(g, u)
            for gs, us, _os in sets:  # every rotation set: same guards, no recompilation
                fn(gs, us)
            self.cuda.synchronize()
            self.reference.check_device(res, g, u, dtype)
            ok, err = True, None
        except Exception as e:
            fn, ok, err = None, False, f"{type(e).__name__}: {e}"[:500]
            print(f"  CHECK FAILED torch_compile {dtype} {shape}: {err[:300]}", flush=True)
        self.checks.append({"variant": "torch_compile", "dtype": dtype, "shape": list(shape),
                            "ok": ok, "error": err})
        return fn

    def compiled_mlp_up(self, x, wg, wu, prec, shape):
        """``torch.compile(silu(x @ Wg) * (x @ Wu))`` under the matmul precision now set
        (``prec``: strict float32 or TF32), compiled afresh (static shapes) and checked against
        eager under the same precision before any timing; None (with a failed check) where
        torch.compile does not work here."""
        t = self.torch
        F = t.nn.functional

        def mlp_up(a, b, c):
            return F.silu(a @ b) * (a @ c)

        try:
            t._dynamo.reset()  # one compile per shape and precision: no recompile limit reached
            fn = t.compile(mlp_up, dynamic=False, fullgraph=True)
            for _ in range(3):  # compile, then the cached code
                res = fn(x, wg, wu)
            ref = mlp_up(x, wg, wu)
            self.cuda.synchronize()
            # the same cuBLAS GEMMs: only the activation's rounding may differ from eager
            rel = float((res.double() - ref.double()).norm() / ref.double().norm())
            ok = math.isfinite(rel) and rel < (1e-5 if prec == "float32" else 1e-3)
            err = None if ok else f"relative difference from eager {rel:.3g}"
        except Exception as e:
            fn, ok, err = None, False, f"{type(e).__name__}: {e}"[:500]
        if not ok:
            print(f"  CHECK FAILED torch_mlp_up_compiled_{prec} {shape}: {err[:300]}", flush=True)
        self.checks.append({"variant": f"torch_mlp_up_compiled_{prec}", "dtype": prec,
                            "shape": list(shape), "ok": ok, "error": err})
        return fn if ok else None

    def run_torch_calls(self, shape, dtype, sets, nsets, min_bytes, flops, host=None,
                        compiled=None):
        """The call from torch tensors (issue 11) for the course's widest variant of ``dtype``:
        host time per call, bandwidth at the host's own pace beside its controls, and at
        decode sizes the cost of each layer of a call (chapter 6)."""
        from book.kernels import best_variant, launch

        t, bench, cuda = self.torch, self.bench, self.cuda
        name = best_variant(dtype)
        if name not in self.variants:
            return
        fn = self.variants[name].fn
        g0, u0, o0 = sets[0]
        if self.wants(f"{name}_torch_tensors") or self.wants(f"{name}_torch_call"):
            ok, err = True, None
            try:  # correctness of the torch path itself (views made once, prepared launch)
                o0.fill_(float("nan"))
                fn(g0, u0, o0)
                cuda.synchronize()
                self.reference.check_device(o0, g0, u0, dtype)
            except Exception as e:
                ok, err = False, f"{type(e).__name__}: {e}"
                print(f"  CHECK FAILED {name} torch tensors {dtype} {shape}: {err[:300]}", flush=True)
            self.checks.append({"variant": f"{name}_torch_tensors", "dtype": dtype,
                                "shape": list(shape), "ok": ok, "error": err})
        from book.kernels import fastcall

        fast = fastcall.FastCall(name)
        if self.wants("launch_layer_fastcall") or self.wants(f"{name}_fastcall_tensors"):
            ok, err = True, None
            try:  # the cheap path: first call plans (ordinary wrapper), later ones use the driver
                for _ in range(3):
                    o0.fill_(float("nan"))
                    fast(g0, u0, o0)
                cuda.synchronize()
                self.reference.check_device(o0, g0, u0, dtype)
                if not fast.stats["fast"]:
                    raise AssertionError(f"the driver path never launched: {fast.stats}")
            except Exception as e:
                ok, err = False, f"{type(e).__name__}: {e}"
                print(f"  CHECK FAILED {name} fastcall {dtype} {shape}: {err[:300]}", flush=True)
            self.checks.append({"variant": f"{name}_fastcall", "dtype": dtype,
                                "shape": list(shape), "ok": ok, "error": err})
        if shape == LARGE:
            self.host_group({f"{name}_torch_call": (
                fn, sets, f"swiglu_{name}(gate, up, out) called with torch CUDA tensors")},
                dtype, shape, min_bytes, flops, calls=20, reps=7)
            b2b = functools.partial(bench.measure_back_to_back, bytes_moved=min_bytes, flops=flops,
                                    reps=max(10, self.reps // 3))
            self.add("launch", f"{name}_torch_tensors", dtype, shape, functools.partial(b2b, fn, sets),
                     description=f"swiglu_{name} called back to back with torch tensors")
            self.add("launch", f"{name}_numba_arrays", dtype, shape, functools.partial(b2b, fn, nsets),
                     description=f"the control: swiglu_{name} back to back with Numba arrays")
            self.add("launch", f"{name}_fastcall_tensors", dtype, shape,
                     functools.partial(b2b, fast, sets),
                     description=f"book.kernels.fastcall.FastCall({name!r}) back to back with torch "
                                 "tensors (the cheap launch path)")
            self.add("launch", "torch_add_back_to_back", dtype, shape,
                     functools.partial(b2b, lambda g, u, o: t.add(g, u, out=o), sets),
                     description="torch.add(g, u, out=o) back to back: the reference")
            return
        # chapter 6: what each layer of one call costs (decode size: the GPU waits on the host)
        from book.kernels import halfprec, vectorized

        kernel, width = {"vec4": (vectorized.vec4_kernel, 4),
                         "half8": (halfprec.half8_kernel, 8)}[name]
        flat = [tuple(a.reshape(a.size) for a in s3) for s3 in nsets]
        nvec = flat[0][0].size // width
        b = vectorized.choose_block(max(nvec, 1), 256)
        grid = max(1, launch.cdiv(nvec, 2 * b))

        def uncached(x):  # what every call paid before book.kernels.launch kept the views
            if x.dtype == t.bfloat16:
                x = x.view(t.int16)
            a = cuda.as_cuda_array(x.detach())
            return a.reshape(a.size)

        F = t.nn.functional
        layers = {
            "launch_layer_raw_numba_launch": (
                lambda g, u, o: kernel[grid, b](g, u, o), flat,
                f"{name}_kernel[grid, block](gate, up, out) on flat Numba arrays: Numba's dispatch "
                "(argument types, overload, marshalling) and the launch"),
            "launch_layer_prepared_launch": (
                lambda g, u, o: launch.launch_kernel(kernel, grid, b, 0, g, u, o), flat,
                "the same kernel through book.kernels.launch.launch_kernel: arguments marshalled "
                "once per array, cuda.core's launch"),
            "launch_layer_checks": (
                lambda g, u, o: launch.prepare(g, u, o, (dtype,), name), nsets,
                "the wrapper's validation and flat views alone (Numba arrays), no launch"),
            "launch_layer_conversion": (
                lambda g, u, o: [launch.as_device(x, "x") for x in (g, u, o)], sets,
                "torch tensors to Numba views, as the wrapper does now (made once, reused)"),
            "launch_layer_conversion_uncached": (
                lambda g, u, o: [uncached(x) for x in (g, u, o)], sets,
                "torch tensors to flat Numba views made afresh (numba.cuda.as_cuda_array): what "
                "each call paid before the views were kept"),
            "launch_layer_wrapper_numba_arrays": (
                fn, nsets, f"swiglu_{name}(gate, up, out) with Numba arrays: checks + launch"),
            f"{name}_torch_call": (
                fn, sets, f"swiglu_{name}(gate, up, out) called with torch CUDA tensors"),
            "launch_layer_fastcall": (
                fast, sets,
                f"book.kernels.fastcall.FastCall({name!r})(gate, up, out) with torch tensors: a key "
                "lookup and cuLaunchKernel on torch's current stream"),
            "launch_layer_torch_add": (
                lambda g, u, o: t.add(g, u, out=o), sets,
                "torch.add(g, u, out=o) from Python: torch's own host cost"),
            "launch_layer_torch_eager": (
                lambda g, u, o: F.silu(g) * u, sets,
                "torch eager F.silu(g) * u from Python (two kernels, allocates)"),
        }
        if compiled is not None:
            layers["launch_layer_torch_compile"] = (
                lambda g, u, o: compiled(g, u), sets,
                "torch.compile'd F.silu(g) * u from Python (static shape, warmed up: guards "
                "and the generated launcher)")
        if host is not None:
            host.update(layers)
        else:
            self.host_group(layers, dtype, shape, min_bytes, flops)
        self.add("launch", "launch_layer_graph_replay", dtype, shape,
                 self.later(fn, nsets, bytes_moved=min_bytes, flops=flops, graph=True),
                 description=f"swiglu_{name} captured in a CUDA graph: GPU time per call in a replay "
                             "(no Python at all)")

    def run_decode(self, shape, dtype, sets, nsets, best, min_bytes, flops, host=None):
        t = self.torch
        F = t.nn.functional
        fn = self.variants[best].fn
        # Where the host time of one launch goes: the raw Numba launch of the one-element
        # kernel on flat arrays, the wrapper's checks alone, and the wrapper + launch. Into
        # ``host``: measured with the layer rows of run_torch_calls as one group.
        from book.kernels import best_variant, fused, launch

        flat = [tuple(a.reshape(a.size) for a in s3) for s3 in nsets]
        n = flat[0][0].size
        rows = {
            "fused_kernel_raw_launch": (
                lambda g, u, o: fused.fused_kernel[launch.cdiv(n, 256), 256](g, u, o), flat,
                "kernel[grid, block](gate, up, out) on flat Numba arrays: Numba's own cost"),
            "wrapper_checks_only": (
                lambda g, u, o: launch.prepare(g, u, o, DTYPES, "x"), nsets,
                "the host wrapper's validation and flattening alone, no launch"),
            # the same calls as run_torch_calls' launch_layer_wrapper_numba_arrays (where
            # best is the course's widest variant) and launch_layer_torch_eager
            f"{best}_python_launch": (
                fn, nsets, f"one call of the swiglu_{best} wrapper from Python (checks + launch)",
                "launch_layer_wrapper_numba_arrays" if best == best_variant(dtype) else None),
            "torch_eager_python_launch": (
                lambda g, u, o: F.silu(g) * u, sets, "torch eager F.silu(g) * u called from Python",
                "launch_layer_torch_eager"),
        }
        if host is not None:
            host.update(rows)
        else:
            self.host_group(rows, dtype, shape, min_bytes, flops)
        # the chapter's GraphedSwiGLU: capture, replay, check the replayed result
        from book.kernels.decode import GraphedSwiGLU

        g0, u0, o0 = sets[0]
        if not self.wants(f"{best}_graph"):
            return self.add("reference", "torch_eager_graph", dtype, shape,
                            self.later(lambda g, u, o: F.silu(g) * u, sets,
                                                 bytes_moved=min_bytes, flops=flops, graph=True),
                            description="torch eager SwiGLU captured in a CUDA graph")
        ok, err = True, None
        try:
            graphed = GraphedSwiGLU(fn, g0, u0, o0, repeat=4)
            o0.fill_(float("nan"))
            graphed.replay()
            t.cuda.synchronize()
            self.reference.check_device(o0, g0, u0, dtype)
        except Exception as e:
            ok, err = False, f"{type(e).__name__}: {e}"
        self.checks.append({"variant": f"{best}_GraphedSwiGLU", "dtype": dtype, "shape": list(shape),
                            "ok": ok, "error": err})
        if not ok:
            print(f"  CHECK FAILED GraphedSwiGLU {dtype} {shape}: {err}", flush=True)
        timing = self.measure(fn, nsets, bytes_moved=min_bytes, flops=flops, graph=True)
        self.add("kernel", f"{best}_graph", dtype, shape, timing, correct=ok,
                 description=f"{best} launches captured in a CUDA graph (torch.cuda.graph + "
                             "numba cuda.external_stream), time per SwiGLU in a replay")
        self.add("reference", "torch_eager_graph", dtype, shape,
                 self.later(lambda g, u, o: F.silu(g) * u, sets, bytes_moved=min_bytes,
                                      flops=flops, graph=True),
                 description="torch eager SwiGLU captured in a CUDA graph")

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
        from book.kernels import halfprec, vectorized

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

    # ------------------------------------------------------------------ GEMMs
    def run_gemms(self):
        t = self.torch
        F = t.nn.functional
        from book.kernels import dual_gemm as dual, gemm, vectorized

        for T, d, h in GEMM_SHAPES:
            gen = t.Generator(device="cuda").manual_seed(7)
            x = t.randn(T, d, device="cuda", generator=gen)
            wg = t.randn(d, h, device="cuda", generator=gen) / math.sqrt(d)
            wu = t.randn(d, h, device="cuda", generator=gen) / math.sqrt(d)
            shape = (T, d, h)
            mm_flops = 2 * T * d * h
            up_flops = 2 * mm_flops + FLOPS_PER_ELEMENT * T * h
            # minimum traffic of the MLP-up: x, Wg, Wu read once, out written once (float32)
            up_bytes = 4 * (T * d + 2 * d * h + T * h)
            o = t.empty(T, h, device="cuda")
            for prec, tf32 in (("float32", False), ("tf32", True)):
                t.backends.cuda.matmul.allow_tf32 = tf32
                t.set_float32_matmul_precision("high" if tf32 else "highest")
                self.add("gemm", f"torch_matmul_{prec}", prec, shape,
                         self.later(lambda a, b: t.matmul(a, b), [(x, wg)], flops=mm_flops,
                                              reps=max(10, self.reps // 3)),
                         description=f"cuBLAS x @ Wg ({'TF32 tensor cores' if tf32 else 'strict float32'})")
                self.add("gemm", f"torch_mlp_up_{prec}", prec, shape,
                         self.later(lambda a, b, c: F.silu(a @ b) * (a @ c), [(x, wg, wu)],
                                              flops=up_flops, bytes_moved=up_bytes,
                                              reps=max(10, self.reps // 3)),
                         description="torch: silu(x @ Wg) * (x @ Wu), eager")
                compiled = (self.compiled_mlp_up(x, wg, wu, prec, shape)
                            if self.wants(f"torch_mlp_up_compiled_{prec}") else None)
                if compiled is not None:
                    self.add("gemm", f"torch_mlp_up_compiled_{prec}", prec, shape,
                             self.later(compiled, [(x, wg, wu)], flops=up_flops,
                                        bytes_moved=up_bytes, reps=max(10, self.reps // 3)),
                             description="torch.compile(silu(x @ Wg) * (x @ Wu), dynamic=False, "
                                         "fullgraph=True): the same cuBLAS GEMMs, the activation "
                                         "fused into one generated kernel; static shape, warmed up")
            t.backends.cuda.matmul.allow_tf32 = False
            t.set_float32_matmul_precision("highest")
            xv, wgv, wuv, ov = (self.numba_view(a) for a in (x, wg, wu, o))
            G = t.empty(T, h, device="cuda")
            U = t.empty(T, h, device="cuda")
            Gv, Uv = self.numba_view(G), self.numba_view(U)
            ref = None
            if self.wants("numba_dual_gemm"):  # the float64 check costs seconds
                try:
                    ref = F.silu(x.double() @ wg.double()) * (x.double() @ wu.double())
                    o.fill_(float("nan"))
                    dual.swiglu_dual_gemm(xv, wgv, wuv, ov)
                    self.cuda.synchronize()
                    rel = float((o.double() - ref).norm() / ref.norm())
                    ok = bool(math.isfinite(rel) and rel < 1e-5)
                    self.checks.append({"variant": "dual_gemm", "dtype": "float32", "shape": list(shape),
                                        "ok": ok, "error": None if ok else f"relative error {rel:.3g}"})
                    print(f"  dual_gemm check: relative error {rel:.2e} ({'ok' if ok else 'FAILED'})")
                except Exception as e:
                    self.checks.append({"variant": "dual_gemm", "dtype": "float32", "shape": list(shape),
                                        "ok": False, "error": repr(e)})
                    print(f"  dual_gemm check raised {e!r}")
            del ref
            reps = max(5, self.reps // 5)
            self.add("gemm", "numba_gemm", "float32", shape,
                     self.later(lambda a, b, c, stream=0: gemm.matmul(a, b, c, stream=stream),
                                  [(xv, wgv, Gv)], flops=mm_flops, reps=reps),
                     description="the course's tiled Numba GEMM, x @ Wg")
            self.add("gemm", "numba_dual_gemm", "float32", shape,
                     self.later(lambda a, b, c, e, stream=0: dual.swiglu_dual_gemm(a, b, c, e, stream=stream),
                                  [(xv, wgv, wuv, ov)], flops=up_flops, bytes_moved=up_bytes, reps=reps),
                     description="one kernel: x @ Wg and x @ Wu from one read of x, silu*mul in the epilogue")
            # the control (measured right after, same buffers): same kernel, identity epilogue
            self.add("gemm", "numba_dual_gemm_identity", "float32", shape,
                     self.later(lambda a, b, c, e, stream=0: dual.dual_gemm_identity(a, b, c, e, stream=stream),
                                  [(xv, wgv, wuv, ov)], flops=2 * mm_flops, bytes_moved=up_bytes, reps=reps),
                     description="control: the same dual GEMM, identity epilogue (gate + up, same stores)")

            def unfused(a, b, c, e, stream=0, Gv=Gv, Uv=Uv):
                gemm.matmul(a, b, Gv, stream=stream)
                gemm.matmul(a, c, Uv, stream=stream)
                vectorized.swiglu_vec4(Gv, Uv, e, stream=stream)

            self.add("gemm", "numba_unfused", "float32", shape,
                     self.later(unfused, [(xv, wgv, wuv, ov)], flops=up_flops, bytes_moved=up_bytes,
                                  reps=reps),
                     description="the same GEMM twice (gate, up to memory) + the vec4 SwiGLU kernel")
            self.add("gemm", "vec4_swiglu_only", "float32", (T, h),
                     self.later(lambda a, b, c, stream=0: vectorized.swiglu_vec4(a, b, c, stream=stream),
                                  [(Gv, Uv, ov)], bytes_moved=3 * 4 * T * h, reps=reps),
                     description="the standalone fused SwiGLU on the GEMM outputs (L2-warm: one set)")
            del xv, wgv, wuv, ov, Gv, Uv, G, U, x, wg, wu, o
            t.cuda.empty_cache()

    # ------------------------------------------------------------------ summary
    def targets(self):
        return targets(self.rows, self.peak)


def group_jobs(host, wants):
    """For :meth:`Suite.host_group`: ``(wanted, measured, same)``: the row names ``wants``
    asks for, in the group's order; the calls to time for them (a row that names another
    row of the group as making the same call is timed through that row, measured once); and
    ``{row: the row whose timing it takes}``."""
    same = {k: v[3] for k, v in host.items() if len(v) > 3 and v[3] in host}
    wanted = [k for k in host if wants(k)]
    measured = list(dict.fromkeys(same.get(k, k) for k in wanted))
    return wanted, measured, same


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
        if cc and tuple(cc) >= (8, 0):
            phase("tensor cores", tensorcore.run, suite)
        if cc and tuple(cc)[:2] == (9, 0):
            from . import hopper

            phase("Hopper", hopper.run, suite)
        else:
            suite.notes.append(f"Hopper rows not measured: wgmma and TMA need compute "
                               f"capability 9.0, this GPU has {cc}")
        if not (cc and tuple(cc) >= (8, 0)):
            suite.notes.append(f"tensor-core rows not measured: bf16 mma.sync needs compute "
                               f"capability 8.0, this GPU has {cc}")
    if not args.no_decode:
        from . import decode

        cc = suite.info.compute_capability
        if cc and tuple(cc) >= (8, 0):
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
