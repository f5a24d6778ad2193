"""The suite's elementwise rows (``python -m book.bench``, suite.py): every SwiGLU variant against
the references at each shape (``run_elementwise``), torch.compile's SwiGLU beside eager, the
host time of a call from torch tensors and of each launch path (``run_torch_calls``,
``host_group``), and the decode shape's rows (``run_decode``). A part of ``Suite``, whose
buffers, rows and measurement it uses."""

from __future__ import annotations

import functools
import math

from book import dtypes
from book.dtypes import DTYPES
from book.traffic import FLOPS_PER_ELEMENT

from .targets import DECODE_SHAPES, LARGE, PREFILL

# torch.compile's rows beside eager: prefill and decode sizes (one compile per shape and dtype)
COMPILE_SHAPES = DECODE_SHAPES + [PREFILL, LARGE]


class ElementwiseRows:
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
            from book.kernels.elementwise import vectorized

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

    def run_torch_calls(self, shape, dtype, sets, nsets, min_bytes, flops, host=None,
                        compiled=None):
        """The call from torch tensors (issue 11) for the course's widest variant of ``dtype``:
        host time per call, bandwidth at the host's own pace beside its controls, and at
        decode sizes the cost of each layer of a call (chapter 6)."""
        from book.kernels import best_variant
        from book.kernels.host import launch

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
        from book.kernels.host import fastcall

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
                     description=f"book.kernels.host.fastcall.FastCall({name!r}) back to back with torch "
                                 "tensors (the cheap launch path)")
            self.add("launch", "torch_add_back_to_back", dtype, shape,
                     functools.partial(b2b, lambda g, u, o: t.add(g, u, out=o), sets),
                     description="torch.add(g, u, out=o) back to back: the reference")
            return
        # chapter 6: what each layer of one call costs (decode size: the GPU waits on the host)
        from book.kernels.elementwise import halfprec, vectorized

        kernel, width = {"vec4": (vectorized.vec4_kernel, 4),
                         "half8": (halfprec.half8_kernel, 8)}[name]
        flat = [tuple(a.reshape(a.size) for a in s3) for s3 in nsets]
        nvec = flat[0][0].size // width
        b = vectorized.choose_block(max(nvec, 1), 256)
        grid = max(1, launch.cdiv(nvec, 2 * b))

        def uncached(x):  # what every call paid before book.kernels.host.launch kept the views
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
                "the same kernel through book.kernels.host.launch.launch_kernel: arguments marshalled "
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
                f"book.kernels.host.fastcall.FastCall({name!r})(gate, up, out) with torch tensors: a key "
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
        from book.kernels import best_variant
        from book.kernels.elementwise import fused
        from book.kernels.host import launch

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
        from book.kernels.elementwise.decode import GraphedSwiGLU

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


def group_jobs(host, wants):
    """For :meth:`Suite.host_group`: ``(wanted, measured, same)``: the row names ``wants``
    asks for, in the group's order; the calls to time for them (a row that names another
    row of the group as making the same call is timed through that row, measured once); and
    ``{row: the row whose timing it takes}``."""
    same = {k: v[3] for k, v in host.items() if len(v) > 3 and v[3] in host}
    wanted = [k for k in host if wants(k)]
    measured = list(dict.fromkeys(same.get(k, k) for k in wanted))
    return wanted, measured, same
