"""Compile the course's kernels to PTX for reading, with or without a GPU.

``ptx("fused_fastmath", "float32")`` returns the PTX text for Hopper (``cc=(9, 0)``).
Numba compiles PTX with NVVM, which ships as a pip wheel, so no GPU or driver is needed.
In the CUDA simulator (no GPU), ``numba.cuda.compile_ptx`` does not exist in-process, so
the compilation runs in a fresh Python process that keeps Numba's real CUDA target.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

from numba import config

# argument type of each dtype's arrays (bfloat16 travels as uint16 bits)
ARRAY_TYPE = {"float32": "float32[::1]", "float16": "float16[::1]", "bfloat16": "uint16[::1]"}


def kernels():
    """name -> (dispatcher, number of array arguments) for every kernel that has PTX to read."""
    from ..elementwise import fused, halfprec, naive, packed, vectorized

    table = {
        "naive_silu": (naive.silu_kernel, 2),
        "naive_mul": (naive.mul_kernel, 3),
        "naive_silu_vec4": (naive.silu_vec4_kernel, 2),
        "naive_mul_vec4": (naive.mul_vec4_kernel, 3),
        "naive_silu_half8": (naive.silu_half8_kernel, 2),
        "naive_mul_half8": (naive.mul_half8_kernel, 3),
        "fused": (fused.fused_kernel, 3),
        "fused_fastmath": (fused.fused_fastmath_kernel, 3),
        "fused_f64_literal": (fused.fused_f64_literal_kernel, 3),
        "ilp4": (vectorized.ilp4_kernel, 3),
        "vec2": (vectorized.vec2_kernel, 3),
        "vec4": (vectorized.vec4_kernel, 3),
        "half4": (halfprec.half4_kernel, 3),
        "half8": (halfprec.half8_kernel, 3),
        "packed_vec4": (packed.packed_vec4_kernel, "packed"),
        "packed_half8": (packed.packed_half8_kernel, "packed"),
        "packed_scalar": (packed.packed_scalar_kernel, "packed"),
    }
    return table


#: argument types of the tensor-core GEMM kernels (bfloat16 bits, flat) and the fragment demos
MMA_SIGNATURE = "void(" + ", ".join(["uint16[::1]"] * 5) + ", int64, int64, int64)"
FRAGMENT_SIGNATURE = "void(uint16[::1], uint16[::1], float32[::1], uint32[:, ::1])"


def tensorcore_kernels():
    """name -> (dispatcher, signature) of the tensor-core kernels (book.kernels.mma_gemm,
    book.kernels.fragments); compile them with ``ptx_many([(name, "bfloat16")], cc)``."""
    from ..probes import fragments
    from ..gemms import mma_gemm

    table = {f"mma_{e}": (mma_gemm.build_kernel(mma_gemm.TILE, e), MMA_SIGNATURE)
             for e in mma_gemm.EPILOGUES}
    f16 = MMA_SIGNATURE.replace("uint16", "float16")
    table["mma_swiglu_f16"] = (mma_gemm.build_kernel(mma_gemm.TILE, "swiglu", "f16"), f16)
    # the T4's path (sm_75): m16n8k8, tiles through registers, 2 static stages
    t4 = mma_gemm.MmaTile(stages=2)
    table["mma_swiglu_f16_sm75"] = (mma_gemm.build_kernel(t4, "swiglu", "f16_sm75"), f16)
    table.update({f"fragments_{k}": (fragments.tile_mma_kernel(k), FRAGMENT_SIGNATURE)
                  for k in fragments.KINDS})
    return table


#: argument types of the decode GEMVs (book.kernels.decode_mlp): six half arrays (x, wg, wu,
#: bg, bu, out), the split-K workspace and counters, T, d, h, S
DECODE_SIGNATURE = ("void(" + ", ".join(["uint16[::1]"] * 6)
                    + ", float32[::1], int32[::1], int64, int64, int64, int64)")


def decode_kernels():
    """name -> (dispatcher, signature) of the decode GEMVs at the token counts they are
    built for (compile with ``ptx_many([(name, "bfloat16")], cc)``; the ``_f16`` ones take
    float16, the ``_sm75`` one is the T4's m16n8k8 path, the ``_ring`` one takes the weights
    through a cp.async ring, ``MmaGemvTile.stages``)."""
    from ..gemv import cuda_core_gemv as ccg, mma_gemv as mmv

    f16 = DECODE_SIGNATURE.replace("uint16", "float16")
    table = {}
    for T in (1, 2, 4, 8):
        tile = ccg.gemv_tile(T, 4096)
        table[f"decode_gemv_t{T}"] = (ccg.make_gemv(tile, True), DECODE_SIGNATURE)
        table[f"decode_gemv_t{T}_f16"] = (ccg.make_gemv(tile, True), f16)
    for T in (16, 64, 256):
        tile = mmv.gemv_tile(T)
        table[f"decode_mma_t{T}"] = (mmv.make_mma_gemv(tile, True, "bf16"), DECODE_SIGNATURE)
        table[f"decode_mma_t{T}_f16"] = (mmv.make_mma_gemv(tile, True, "f16"), f16)
    table["decode_mma_t64_sm75"] = (mmv.make_mma_gemv(mmv.gemv_tile(64), True, "f16_sm75"), f16)
    # the weights through a cp.async ring of 3 shared-memory stages per warp (T = 16)
    ring = mmv.MmaGemvTile(nt=2, mt=1, warps=4, stages=3)
    table["decode_mma_t16_ring"] = (mmv.make_mma_gemv(ring, True, "bf16"), DECODE_SIGNATURE)
    table["decode_gemv_t4_nobias"] = (ccg.make_gemv(ccg.gemv_tile(4, 4096), False), DECODE_SIGNATURE)
    # the measured controls: the next piece loaded ahead, a register cap (launch_bounds)
    table["decode_gemv_t4_prefetch"] = (ccg.make_gemv(ccg.GemvTile(4, 2, 64, prefetch=True), True),
                                        DECODE_SIGNATURE)
    table["decode_mma_t16_capped"] = (mmv.make_mma_gemv(mmv.MmaGemvTile(2, 1, 4, min_blocks=8),
                                                       True, "bf16"), DECODE_SIGNATURE)
    # the weights staged through shared memory by whole-row chunks (book.kernels.staged_gemv)
    from ..gemv.staged_gemv import StagedTile, make_staged_gemv, gemv_tile

    for T in (4, 16):
        tile = gemv_tile(T)
        table[f"decode_mma_t{T}_staged"] = (make_staged_gemv(tile, True, "bf16"), DECODE_SIGNATURE)
    table["decode_mma_t16_staged_f16"] = (make_staged_gemv(gemv_tile(16), True, "f16"), f16)
    for st in (2, 4):  # a ring in static shared memory, and one beyond 48 KiB (dynamic)
        ring = StagedTile(nt=2, stages=st)
        table[f"decode_mma_t16_staged{st}_ring"] = (make_staged_gemv(ring, True, "bf16"),
                                                    DECODE_SIGNATURE)
    return table


#: argument types of the wgmma kernels and of the Hopper probes
WGMMA_SIGNATURE = "void(uint64[::1], int32[::1], int64)"
#: argument types of the Hopper decode GEMV (bfloat16 as its bits)
WGMMA_GEMV_SIGNATURE = ("void(uint64[::1], int32[::1], uint16[::1], uint16[::1], uint16[::1], "
                        "float32[::1], int32[::1], int64, int64, int64)")


def hopper_kernels():
    """name -> (dispatcher, signature) of the Hopper kernels (book.kernels.wgmma_gemm,
    wgmma_gemv, stream_probes and hopper_probes); they need ``cc=(9, 0, "a")``."""
    from ..probes import hopper_probes as hp
    from ..gemms import wgmma_gemm as wg

    table = {f"wgmma_{e}": (wg.build_kernel(wg.TILE, e), WGMMA_SIGNATURE) for e in wg.EPILOGUES}
    table["wgmma_swiglu_f16"] = (wg.build_kernel(wg.TILE, "swiglu", "f16"), WGMMA_SIGNATURE)
    table["wgmma_swiglu_single"] = (wg.build_kernel(wg.HopperTile(cluster=1), "swiglu"),
                                    WGMMA_SIGNATURE)
    table["wgmma_swiglu_multicast"] = (wg.build_kernel(wg.HopperTile(multicast=True), "swiglu"),
                                       WGMMA_SIGNATURE)
    # the decode GEMV on Hopper (book.kernels.wgmma_gemv): its own argument types. Named by
    # what they change of the bare tile (gemv_tile's fixes off); "_short_settle_pdl": the
    # default's fixes (wgmma_gemv_tile.FIXES), at the tiles the dispatcher takes on an H200
    import dataclasses

    from ..gemv.wgmma_gemv import gemv_tile, make_wgmma_gemv

    def bare(T, d=4096, gpu=""):
        return gemv_tile(T, d, gpu, fixes=False)

    table["wgmma_gemv_t16"] = (make_wgmma_gemv(bare(16), True, "bf16"), WGMMA_GEMV_SIGNATURE)
    table["wgmma_gemv_t4_f16"] = (make_wgmma_gemv(bare(4), False, "f16"),
                                  WGMMA_GEMV_SIGNATURE.replace("uint16", "float16"))
    table["wgmma_gemv_t16_trace"] = (make_wgmma_gemv(dataclasses.replace(bare(16), trace=True),
                                                     True, "bf16"), WGMMA_GEMV_SIGNATURE)
    table["wgmma_gemv_t8_dynamic"] = (make_wgmma_gemv(dataclasses.replace(
        bare(8), promotion="128B", dynamic=2), True, "bf16"), WGMMA_GEMV_SIGNATURE)
    table["wgmma_gemv_t16_lead"] = (make_wgmma_gemv(dataclasses.replace(
        bare(16), promotion="128B", lead=4), True, "bf16"), WGMMA_GEMV_SIGNATURE)
    for name, tile, bias in (
            ("t16_pdl", dataclasses.replace(bare(16), pdl=True), True),
            ("t16_short_settle", dataclasses.replace(bare(16), short_settle=True), True),
            ("t1_lead_short_settle_pdl", gemv_tile(1, gpu="H200"), False),  # (lead 4 there)
            ("t32_short_settle_pdl", gemv_tile(32, gpu="H200"), True),
            # x resident (where it fits: d = 1024): the stages copied before the wait bring
            # a box of x only on its first use
            ("t24_resident_short_settle_pdl", gemv_tile(24, 1024, "H200"), True),
            ("t64_short_settle_pdl", gemv_tile(64, gpu="H200"), True)):  # the most registers
        table[f"wgmma_gemv_{name}"] = (make_wgmma_gemv(tile, bias, "bf16"), WGMMA_GEMV_SIGNATURE)
    # the weight-stream probes (book.kernels.stream_probes)
    from ..probes import stream_probes as sp

    table["stream_ldg"] = (sp.ldg_kernel(2, 256),
                           "void(uint16[::1], uint16[::1], uint32[::1], int64, int64)")
    table["stream_tma"] = (sp.tma_kernel(6, 1, (64, 64)), "void(uint64[::1], int32[::1], int64)")
    table["stream_bulk"] = (sp.bulk_kernel(6, 8192), "void(uint16[::1], uint16[::1], int64[::1])")
    table["probe_tma"] = (hp.tma_kernel(), "void(uint64[::1], int64, int64, int64, uint8[::1])")
    for n in (64, 256):
        table[f"probe_wgmma_n{n}"] = (hp.wgmma_kernel(n, "bf16"),
                                      "void(uint8[::1], uint64[::1], uint64[::1], float32[::1])")
    table["probe_mbarrier"] = (hp.mbarrier_kernel(), "void(int32[::1])")
    return table


def fp8_kernels():
    """name -> (dispatcher, signature) of the eight-bit kernels (book.kernels.fp8_probes,
    fp8_gemm, fp8_gemv); they need ``cc=(9, 0, "a")``."""
    from ..probes import fp8_probes as fp
    from ..probes import hopper_probes as hp

    table = {f"fp8_probe_wgmma_{k}_n{n}": (hp.wgmma_kernel(n, k), "void(uint8[::1], uint64[::1], "
                                           "uint64[::1], float32[::1])")
             for k, n in (("e4m3", 64), ("e4m3", 256), ("e5m2", 128))}
    for f in ("e4m3", "e5m2"):
        table[f"fp8_probe_pack_{f}"] = (fp.pack_kernel(f),
                                        "void(float32[::1], float32[::1], uint16[::1])")
        table[f"fp8_probe_widen_{f}"] = (fp.widen_kernel(f), "void(uint16[::1], uint32[::1])")
    from ..gemms import fp8_gemm as g

    for name, kern in g.ptx_variants().items():
        table[f"fp8_{name}"] = (kern, g.SIGNATURE)
    from ..gemv import fp8_gemv as gv

    for name, (kern, sig) in gv.ptx_variants().items():
        table[f"fp8_gemv_{name}"] = (kern, sig)
    from ..elementwise import norm_quant as nq  # RMSNorm + per-token e4m3 (bfloat16 in, as its bits)

    # the tile at a model's width, which it fills (what rmsnorm_quant launches at d = 4096)
    plain, add = nq.kernels(nq.tile_for(NORM_QUANT_D), True, True)
    table["fp8_norm_quant"] = (plain, NORM_QUANT_SIGNATURE)
    table["fp8_add_norm_quant"] = (add, ADD_NORM_QUANT_SIGNATURE)
    # one element at a time (d not a multiple of 8, or a row not aligned), and the control
    table["fp8_norm_quant_narrow"] = (nq.kernels(nq.tile_for(NORM_QUANT_D), False)[0],
                                      NORM_QUANT_SIGNATURE)
    table["fp8_norm_quant_staged"] = (nq.staged_rmsnorm_quant_kernel, NORM_QUANT_SIGNATURE)
    return table


#: the row width book.kernels.norm_quant's kernels are compiled for here (its tile: tile_for)
NORM_QUANT_D = 4096
#: argument types of book.kernels.norm_quant's kernels: x (residual), weight, eps, d, (h),
#: codes, scales
NORM_QUANT_SIGNATURE = "void(uint16[::1], uint16[::1], float32, int64, uint8[::1], float32[::1])"
ADD_NORM_QUANT_SIGNATURE = ("void(uint16[::1], uint16[::1], uint16[::1], float32, int64, "
                            "uint16[::1], uint8[::1], float32[::1])")


def ptxas_log(text: str, arch: str = "sm_90a") -> tuple[bool, str]:
    """(assembled?, ptxas's log) for a PTX text, through nvJitLink (a pip wheel: no GPU or
    CUDA toolkit needed), as Numba links a kernel on the GPU. The log names registers,
    spills and the warnings that matter for wgmma: C7509/C7510 (wgmma serialized), C7515
    and C7517 (waits inserted), C7508 (setmaxnreg ignored)."""
    from cuda.bindings import nvjitlink

    opts = [f"-arch={arch}", "-verbose"]
    h = nvjitlink.create(len(opts), opts)
    data = text.encode() + b"\0"
    ok = True
    try:
        nvjitlink.add_data(h, nvjitlink.InputType.PTX, data, len(data), "kernel.ptx")
        nvjitlink.complete(h)
    except nvjitlink.nvJitLinkError:
        ok = False
    logs = []
    for size, get in ((nvjitlink.get_info_log_size, nvjitlink.get_info_log),
                      (nvjitlink.get_error_log_size, nvjitlink.get_error_log)):
        buf = bytearray(size(h))
        get(h, buf)
        logs.append(buf.decode(errors="replace").rstrip("\0"))
    nvjitlink.destroy(h)
    return ok, "\n".join(logs)


def signature(kind, dtype):
    if isinstance(kind, str) and kind.startswith("void("):
        return kind  # a kernel with its own argument types
    t = ARRAY_TYPE[dtype]
    if kind == "packed":
        return f"void({t}, {t}, int64)"
    return "void(" + ", ".join([t] * kind) + ")"


#: argument types of chapter 7's tiled GEMM (a, b0, b1, out, row and column block offsets)
GEMM_SIGNATURE = ("void(float32[:, ::1], float32[:, ::1], float32[:, ::1], float32[:, ::1], "
                  "int64, int64)")


def gemm_kernels():
    """name -> (dispatcher, signature) of chapter 7's CUDA-core GEMM (book.kernels.gemm), at
    the simulator's tile and at 16-deep stages: tests/library/test_tiles.py holds their tiles'
    ``shared_bytes`` to what ptxas reports."""
    from ..gemms import gemm

    return {"gemm_sim_tile": (gemm.build_kernel(gemm.SIM_TILE), GEMM_SIGNATURE),
            "gemm_bk16": (gemm.build_kernel(gemm.TILE_VARIANTS["bk16_flat_u2"]), GEMM_SIGNATURE)}


def _compile_here(name, dtype, cc):
    from numba import cuda

    table = kernels()
    if name not in table:
        if name.startswith("decode_"):
            table = decode_kernels()
        elif name.startswith("gemm_"):
            table = gemm_kernels()
        elif name.startswith("fp8_"):
            table = fp8_kernels()
        elif name.startswith(("wgmma_", "probe_", "stream_")):
            table = hopper_kernels()
        else:
            table = tensorcore_kernels()
    kernel, kind = table[name]
    opts = {"fastmath": bool(kernel.targetoptions.get("fastmath", False))}
    if kernel.targetoptions.get("launch_bounds"):  # the register cap setmaxnreg needs
        opts["launch_bounds"] = kernel.targetoptions["launch_bounds"]
    text, _ = cuda.compile_ptx(kernel.py_func, signature(kind, dtype), cc=cc, **opts)
    return text


_CHILD = r"""
import json, sys, types
spec = json.loads(sys.argv[1])
# A bare `book` package: skip book/__init__.py, which would pick the simulator here.
pkg = types.ModuleType("book"); pkg.__path__ = [spec["root"] + "/book"]; sys.modules["book"] = pkg
from book.kernels.host import ptx
out = {}
for name, dtype in spec["items"]:
    out[name + "/" + dtype] = ptx._compile_here(name, dtype, tuple(spec["cc"]))
sys.stdout.write(json.dumps(out))
"""


def ptx_many(items, cc=(9, 0), jobs=None):
    """{"name/dtype": ptx} for a list of (name, dtype).

    In the simulator the compilation runs in ``jobs`` fresh processes (default: one per
    CPU, at most 4), each compiling a share of the list."""
    items = [(n, d) for n, d in items]
    if not config.ENABLE_CUDASIM:
        return {f"{n}/{d}": _compile_here(n, d, cc) for n, d in items}
    root = str(Path(__file__).resolve().parents[3])
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "BOOK_SIMULATOR")}
    jobs = max(1, min(jobs or min(os.cpu_count() or 1, 4), len(items)))
    procs = []
    for j in range(jobs):
        spec = json.dumps({"root": root, "items": items[j::jobs], "cc": list(cc)})
        procs.append(subprocess.Popen([sys.executable, "-c", _CHILD, spec], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, env=env, cwd=root))
    out = {}
    for p in procs:
        stdout, stderr = p.communicate()
        if p.returncode != 0:
            raise RuntimeError(f"PTX compilation failed:\n{stderr[-4000:]}")
        out.update(json.loads(stdout))
    return out


def ptx(name, dtype="float32", cc=(9, 0)):
    """PTX text of kernel ``name`` (see :func:`kernels`) for arrays of ``dtype``."""
    return ptx_many([(name, dtype)], cc)[f"{name}/{dtype}"]


def instructions(text):
    """The instruction lines of a PTX text (no directives, labels or comments)."""
    lines = []
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith(("//", ".", "{", "}", "$")) or s.endswith(":"):
            continue
        lines.append(s.rstrip(";"))
    return lines


def opcodes(text):
    """Set of opcodes used, e.g. {"ld.global.v4.f32", "ex2.approx.ftz.f32", ...}."""
    return {line.split()[0] for line in instructions(text) if not line.startswith("@")} | {
        line.split()[1] for line in instructions(text) if line.startswith("@") and len(line.split()) > 1
    }
