"""The rows of :mod:`book.kernels.elementwise.norm_quant`: RMSNorm fused with the per-token e4m3
quantization against the unfused pair and against ``torch.compile``.

At each T (d = 4096 by default), from float16 or float32 activations (``dtype``; bfloat16
is left out because :func:`book.kernels.elementwise.glu_family.rmsnorm`, the unfused row's first
kernel, reads float32 and float16 only), rows measured by
:func:`book.bench.measure_interleaved`, rows in turn, round after round, the GPU's state (SM
clock and power: ``book.gpu.state``) read after each turn:

- ``norm_quant_fused``: :func:`book.kernels.elementwise.norm_quant.rmsnorm_quant`, codes and scales
  (its tile, ``tile_for(d)``: 256 threads x 2 pieces of 8 columns at d = 4096, the row in
  registers, 16-byte loads, 8-byte code stores);
- ``norm_quant_fused_c4``: the same kernel at ``tile_for(d, 4)`` (128 threads x 4 pieces at
  d = 4096: half the threads, twice the values a thread), the geometry's control;
- ``norm_quant_staged``: :func:`norm_quant.rmsnorm_quant_staged`, the kernel the register one
  replaced (2-byte loads, the row staged in shared memory, trees of barriers, 1-byte
  stores): the control of the rewrite;
- ``rmsnorm_then_quantize_torch``: our :func:`glu_family.rmsnorm` writing y, then
  :func:`book.quantize.quantize_torch` of y (torch's eager kernels: amax, division, clamp,
  cast);
- ``compiled_rmsnorm_quant``: RMSNorm and the same per-token quantization written in torch
  and ``torch.compile``d (what a PyTorch user gets);
- ``rmsnorm_only``: our RMSNorm alone, the floor the fused kernel's quantization adds to.

``bytes`` is the fused kernel's DRAM traffic (:func:`glu_family.traffic_bytes`), the same
for every row, so ``gb_per_s`` compares the rows on one scale. Checks: the fused kernel's
codes and scales against :func:`norm_quant.rmsnorm_quant_reference` on the first 64 rows
(exact; the c4 tile's and the staged control's against their own models too), and the codes
of the torch rows against the fused kernel's (the fraction that differ: their float32
roundings differ, so some codes may by one step).
"""

from __future__ import annotations

import time

import numpy as np

D = 4096
TS = (1, 16, 2048, 8192)
MAX_SETS = 16  # argument sets cycled (fewer once they outgrow L2 twice: rotation_count)


def norm_quant_rows(Ts=TS, d=D, dtype="float16", eps=1e-6, rounds=6, reps=8):
    """(rows, checks): one row a candidate and T, each with its median, p10, p90 (us),
    GB/s of the fused kernel's bytes and the GPU's readings after each turn."""
    import torch

    from .. import quantize as Q
    from ..kernels.elementwise import glu_family as gf
    from ..kernels.elementwise import norm_quant as nq
    from . import measure_interleaved, rotation_count

    if dtype not in ("float16", "float32"):
        raise ValueError(f"dtype must be float16 or float32, got {dtype!r}")
    tdt = getattr(torch, dtype)
    top = 448.0

    @torch.compile
    def compiled(x, w):
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()
        scale = y.abs().amax(dim=1) / top
        scale = torch.where(scale > 0, scale, torch.ones_like(scale))
        return (y / scale[:, None]).clamp(-top, top).to(torch.float8_e4m3fn), scale

    rows, checks = [], []
    for T in Ts:
        print(f"  T = {T}: inputs, checks", flush=True)
        unfused, fused = gf.traffic_bytes("rmsnorm_quant", T, d, np.dtype(dtype).itemsize)
        n_sets = min(MAX_SETS, rotation_count(fused))
        gen = torch.Generator(device="cuda").manual_seed(T)
        xs = [torch.randn(T, d, device="cuda", generator=gen).to(tdt) for _ in range(n_sets)]
        w = (1 + 0.1 * torch.randn(d, device="cuda", generator=gen)).to(tdt)
        codes = torch.empty(T, d, device="cuda", dtype=torch.uint8)
        scales = torch.empty(T, device="cuda", dtype=torch.float32)
        y = torch.empty(T, d, device="cuda", dtype=tdt)

        c4 = nq.tile_for(d, 4)

        def fused_call(i, xs=xs, w=w, codes=codes, scales=scales):
            return nq.rmsnorm_quant(xs[i], w, eps, codes, scales)

        def c4_call(i, xs=xs, w=w, codes=codes, scales=scales, c4=c4):
            return nq.rmsnorm_quant(xs[i], w, eps, codes, scales, tile=c4)

        def staged_call(i, xs=xs, w=w, codes=codes, scales=scales):
            return nq.rmsnorm_quant_staged(xs[i], w, eps, codes, scales)

        def unfused_call(i, xs=xs, w=w, y=y):
            gf.rmsnorm(xs[i], w, eps, y)
            return Q.quantize_torch(y)

        def compiled_call(i, xs=xs, w=w):
            return compiled(xs[i], w)

        def norm_call(i, xs=xs, w=w, y=y):
            return gf.rmsnorm(xs[i], w, eps, y)

        cands = {"norm_quant_fused": fused_call, "norm_quant_fused_c4": c4_call,
                 "norm_quant_staged": staged_call,
                 "rmsnorm_then_quantize_torch": unfused_call,
                 "compiled_rmsnorm_quant": compiled_call, "rmsnorm_only": norm_call}
        tiles = {"norm_quant_fused": str(nq.tile_for(d)), "norm_quant_fused_c4": str(c4)}
        # checks: ours against their models exactly; the others' codes against ours
        k = min(T, 64)
        x0, w0 = xs[0][:k].float().cpu().numpy(), w.float().cpu().numpy()
        for name, model in (("norm_quant_staged", {"staged": True}),
                            ("norm_quant_fused_c4", {"tile": c4}), ("norm_quant_fused", {})):
            cands[name](0)
            q = nq.rmsnorm_quant_reference(x0, w0, eps, **model)
            exact = bool(np.array_equal(codes[:k].cpu().numpy(), q.codes)
                         and np.array_equal(scales[:k].cpu().numpy(), q.scale))
            checks.append({"name": f"{name}_vs_model", "T": T, "rows": k, "ok": exact})
        ours = codes.cpu().numpy()  # norm_quant_fused's, the last written
        for name in ("rmsnorm_then_quantize_torch", "compiled_rmsnorm_quant"):
            theirs = cands[name](0)[0].view(torch.uint8).cpu().numpy()
            checks.append({"name": f"{name}_codes_differing", "T": T,
                           "fraction": float((theirs != ours).mean())})

        print(f"  T = {T}: timing {len(cands)} rows", flush=True)
        sets = [(i,) for i in range(n_sets)]
        timed = measure_interleaved({name: (fn, sets, {"bytes_moved": fused})
                                     for name, fn in cands.items()}, rounds=rounds, reps=reps,
                                    warmup=3)
        for name in cands:
            med = timed[name].median_s
            rows.append({"name": name, "shape": [T, d], "dtype": dtype,
                         **timed[name].record_fields(), "bytes": fused,
                         "unfused_bytes": unfused, "gb_per_s": fused / med / 1e9,
                         **({"tile": tiles[name]} if name in tiles else {}),
                         "argument_sets": n_sets,
                         "method": f"book.bench.measure_interleaved per row, {rounds} rounds of "
                                   f"{reps} samples, rows in turn", "time": time.time()})
    return rows, checks
