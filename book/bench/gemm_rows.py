"""The suite's GEMM rows (``python -m book.bench``, suite.py): the tiled GEMM and dual GEMM of
book.kernels against cuBLAS (strict float32 and TF32) and torch.compile's MLP-up, at the GEMM
shapes. A part of ``Suite``, whose buffers, rows and measurement it uses."""

from __future__ import annotations

import math

from book.traffic import FLOPS_PER_ELEMENT

from .targets import GEMM_SHAPES


class GemmRows:
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

    # ------------------------------------------------------------------ GEMMs
    def run_gemms(self):
        t = self.torch
        F = t.nn.functional
        from book.kernels.gemms import dual_gemm as dual, gemm
        from book.kernels.elementwise import vectorized

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
