"""The tensor-core kernels under ncu: launch each once at T x 4096 x 14336 for ncu to profile;
``--parse`` turns ncu's text reports kept in records/tensorcore/ into book/data (no GPU).

Record: `records/tensorcore/tensorcore_ncu_h100.txt` (ncu's text report of its launches);
`book/data/ncu/tensorcore_h100.json` (`--parse`).

    ncu --clock-control none --kernel-name regex:mma_gemm --section SpeedOfLight \
        --section WarpStateStats --metrics <see tensorcore_ncu.METRICS> \
        python3 -m benchmarks.tensorcore_ncu [--T 2048] [--config NAME]
    python -m benchmarks.tensorcore_ncu --parse   # writes book/data/ncu/tensorcore_h100.json

Order of launches: ceiling, dual GEMM (SwiGLU), identity epilogue, gate|up store.
``--config`` names a tile of benchmarks/tensorcore_tune.py (default: the library's TILE).

Chapter 8 shows what limits the kernel from those counters, so ``--parse`` reads them (each
kernel's "Command line profiler metrics" and "Warp State Statistics" values, in launch order,
from the reports of PROFILES) and stores them with the provenance of the run that made them,
rather than typed into the chapter. (It was benchmarks/tensorcore_ncu_record.py until issue 44.)

**Which tensor-core instructions cuBLAS's bf16 GEMM issues** (``--instructions OUT``; record
`records/bench/cublas_instructions_h200.json`, or `_h100`: the GPU's tag in the name):

    python3 -m benchmarks.tensorcore_ncu --instructions $OUT/cublas_instructions_h200.json

Chapter 8 says cuBLAS closes `mma.sync`'s gap on a Hopper GPU with Hopper's own `wgmma`, fed by
TMA. A kernel's name does not show which instructions it runs; ncu's instruction counters do.
Each workload runs once in a child process under ``ncu`` (one ncu run a workload), inside an
NVTX range that ncu's ``--nvtx-include`` keeps, so setup kernels (random numbers, copies) are
not profiled. For each kernel in the range the record keeps its name and, of ncu's metrics
for this chip, the instructions executed on the tensor pipe by ``wgmma`` (``gmma``) and by
``mma.sync`` (``hmma``) and, where the chip has them, the TMA instructions (``utma``), with the
kernel's duration under ncu. The workloads (d = 4096, h = 14336, nn.Linear weights, bf16):

- ``cublas_prefill`` / ``cublas_decode``: ``torch.matmul(x, W.T, out=o)`` with ``W = [Wg; Wu]``
  (what chapter 9's cuBLAS rows time) at T = 2048 and T = 16;
- ``ours_wgmma`` (control: a kernel known to be built on ``wgmma`` and TMA):
  :func:`book.kernels.gemms.wgmma_gemm.swiglu_wgmma` at T = 2048;
- ``ours_mma`` (control: one built on ``mma.sync``): :func:`book.kernels.gemms.mma_gemm.swiglu_mma`
  at T = 2048.

A counter that reads zero for a control built on that instruction would say the metric does
not count it: the record checks each control's own instruction is counted (``checks``). On an
H200 (ncu of CUDA 13) the ``hmma`` counter counts ``wgmma`` too: the ``wgmma`` control's two
counts are equal, the ``mma.sync`` control's ``gmma`` zero; so a kernel whose ``gmma`` equals
its ``hmma`` issues no ``mma.sync`` at all.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

METRICS = ",".join([
    "gpu__time_duration.sum",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "lts__t_bytes.sum.per_second",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "smsp__inst_executed.sum",
])
RECORDS = ROOT / "records" / "tensorcore"
OUT = ROOT / "book" / "data" / "ncu" / "tensorcore_h100.json"
LAUNCHES = ("ceiling", "swiglu", "identity", "store2")  # main's order
# (ncu text, the record whose provenance is the same run's, what that version was)
PROFILES = {
    "final": ("tensorcore_ncu_h100.txt", "tensorcore_h100.json",
              "the library's kernel: addresses computed once before the main loop"),
    "first": ("ncu_before_address_fix_h100.txt", "tensorcore_tune2_h100.json",
              "the first version: every cp.async and ldmatrix recomputed its addresses"),
}


def parse(text: str) -> list[dict]:
    """One dict per profiled kernel, in launch order: metric name -> value in base units
    (seconds, bytes/s, percent, counts)."""
    from book.bench import ncu

    return ncu.details(text, "mma_gemm")


def write_record():
    """book/data/ncu/tensorcore_h100.json from the reports of PROFILES."""
    doc = {"profiles": {}}
    for key, (txt, run, what) in PROFILES.items():
        kernels = parse((RECORDS / txt).read_text())
        prov = json.loads((RECORDS / run).read_text())["provenance"]
        doc["profiles"][key] = {
            "what": what, "source": f"records/tensorcore/{txt}",
            "provenance": {**prov, "command": "ncu --clock-control none --metrics <"
                           "benchmarks/tensorcore_ncu.py METRICS> python3 "
                           "benchmarks/tensorcore_ncu.py --T 2048", "run": prov["command"]},
            "kernels": dict(zip(LAUNCHES, kernels)),
        }
    doc["provenance"] = {**doc["profiles"]["final"]["provenance"],
                         "written_by": "python -m benchmarks.tensorcore_ncu --parse"}
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}: " + ", ".join(
        f"{k} {list(p['kernels'])}" for k, p in doc["profiles"].items()))


# ---------------------------------------------------------------- the instruction counts

#: the instruction counts' workloads (d = 4096, h = 14336): name -> T
WORKLOADS = {"cublas_prefill": 2048, "cublas_decode": 16, "ours_wgmma": 2048, "ours_mma": 2048}
#: what each control must show: its own instruction counted
CONTROLS = {"ours_wgmma": "gmma", "ours_mma": "hmma"}
RANGE = "course_work"
#: of ncu's metrics for the chip, those kept (the first of each kind's names this ncu lists):
#: instructions on the tensor pipe by wgmma (gmma) and by mma.sync (hmma), TMA instructions
WANTED = (("gmma", ("sm__inst_executed_pipe_tensor_op_gmma",
                    re.compile(r"^sm__inst_executed_pipe_tensor_op_gmma\w*$"))),
          ("hmma", ("sm__inst_executed_pipe_tensor_op_hmma",
                    re.compile(r"^sm__inst_executed_pipe_tensor_op_hmma\w*$"))),
          ("utma", ("smsp__inst_executed_op_utma",
                    re.compile(r"^smsp__inst_executed_op_u?tma\w*$"))))


def chip_metrics(ncu: str) -> dict[str, list[str]]:
    """{kind: [a metric's base name]} of WANTED, as this machine's ncu lists them (the exact
    name where listed, else the first that matches; none where nothing does)."""
    from book.bench.ncu import run

    out = run([ncu, "--query-metrics"], timeout=120).stdout
    names = sorted({line.split()[0] for line in out.splitlines()
                    if line.strip() and "__" in line.split()[0]})
    found = {}
    for kind, (exact, pattern) in WANTED:
        match = [n for n in names if pattern.match(n)]
        found[kind] = [exact] if exact in names else match[:1]
    return found


def child(name: str) -> None:
    """Run workload ``name`` once inside the NVTX range ncu keeps."""
    import torch

    import book  # noqa: F401  (GPU or simulator)

    T = WORKLOADS[name]
    g = torch.Generator(device="cuda").manual_seed(0)
    x = (torch.randn(T, 4096, device="cuda", generator=g) / 8).bfloat16()
    wg = (torch.randn(14336, 4096, device="cuda", generator=g) / 64).bfloat16()
    wu = (torch.randn(14336, 4096, device="cuda", generator=g) / 64).bfloat16()
    if name.startswith("cublas"):
        w = torch.cat([wg, wu])
        o = torch.empty(T, 2 * 14336, device="cuda", dtype=torch.bfloat16)

        def run():
            torch.matmul(x, w.T, out=o)
    elif name == "ours_wgmma":
        from book.kernels.gemms.wgmma_gemm import swiglu_wgmma

        o = torch.empty(T, 14336, device="cuda", dtype=torch.bfloat16)

        def run():
            swiglu_wgmma(x, wg, wu, o)
    else:
        from book.kernels.gemms.mma_gemm import swiglu_mma

        wgt, wut = wg.T.contiguous(), wu.T.contiguous()   # [d, h]: x @ wg
        o = torch.empty(T, 14336, device="cuda", dtype=torch.bfloat16)

        def run():
            swiglu_mma(x, wgt, wut, o)
    run()   # compiled and planned outside the range
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push(RANGE)
    run()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()


def profile(binary: str, name: str, metrics: list[str]) -> list[dict]:
    """Each kernel ncu profiled in workload ``name``'s range: its name and metrics."""
    from book.bench import ncu

    cmd = ncu.command(binary, ["--nvtx", "--nvtx-include", f"{RANGE}/", "--csv", "--page", "raw",
                               "--print-units", "base",
                               "--metrics", ",".join(["gpu__time_duration.sum", *metrics])],
                      "benchmarks.tensorcore_ncu", "--child", name)
    p = ncu.run(cmd, timeout=240)
    kernels = []
    for launch in ncu.launches(p.stdout):
        k = {"kernel": launch.kernel, "ncu_duration_us": None}
        for col, val in launch.metrics.items():
            base = col.rsplit(".", 1)[0]
            if base == "gpu__time_duration":
                k["ncu_duration_us"] = val * 1e6   # seconds
            elif base in metrics:
                k[base] = val
        kernels.append(k)
    if not kernels:
        raise RuntimeError(f"ncu profiled no kernel of {name}: rc {p.returncode}, "
                           f"{(p.stderr or p.stdout)[-1500:]}")
    return kernels


def instructions(out: str) -> int:
    """The instruction counts (the docstring's second part): one ncu run a workload."""
    import book
    from book.data import write
    from book.provenance import provenance

    if book.gpu.SIMULATED:
        print("not measured: no CUDA GPU here")
        return 2
    from book.bench.ncu import binary

    ncu = binary()
    if ncu is None:
        print("not measured: no ncu on this machine (Nsight Compute)")
        return 2
    prov = provenance(f"python3 -m benchmarks.tensorcore_ncu --instructions {out}")
    t0 = time.time()
    kinds = chip_metrics(ncu)
    metrics = [m + ".sum" for ms in kinds.values() for m in ms]
    doc = {"provenance": prov, "ncu": ncu, "metrics": kinds, "workloads": {}, "checks": []}
    print(f"{prov['gpu']}: ncu {ncu}; metrics {kinds}", flush=True)
    for name, T in WORKLOADS.items():
        ks = profile(ncu, name, [m.removesuffix(".sum") for m in metrics])
        doc["workloads"][name] = {"T": T, "shape": [T, 4096, 14336], "kernels": ks}
        for k in ks:
            counts = ", ".join(f"{kind} {sum(k.get(m, 0) for m in ms):,.0f}"
                               for kind, ms in kinds.items() if ms)
            print(f"  {name:<15} T={T:<5} {str(k['kernel'])[:70]:<70} {counts}", flush=True)
    for name, kind in CONTROLS.items():
        got = sum(k.get(m, 0) for k in doc["workloads"][name]["kernels"] for m in kinds[kind])
        doc["checks"].append({"name": f"{name} counts its {kind}", "ok": got > 0,
                              "count": got})
    prov["elapsed_s"] = round(time.time() - t0, 1)
    write(out, doc)
    ok = all(c["ok"] for c in doc["checks"])
    print("checks:", "ok" if ok else doc["checks"])
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--T", type=int, default=2048)
    ap.add_argument("--config", default=None)
    ap.add_argument("--parse", action="store_true",
                    help="no launch: write book/data/ncu/tensorcore_h100.json from the reports")
    ap.add_argument("--instructions", metavar="OUT",
                    help="count cuBLAS's and the course's tensor-core instructions under ncu")
    ap.add_argument("--child", choices=sorted(WORKLOADS), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.parse:
        return write_record()
    if args.child:
        return child(args.child)
    if args.instructions:
        return instructions(args.instructions)
    import torch

    from book.kernels.gemms import mma_gemm as mg

    tile = mg.TILE
    if args.config:
        from benchmarks.tensorcore_tune import CONFIGS

        tile = mg.MmaTile(**CONFIGS[args.config]).validate()
    T, d, h = args.T, 4096, 14336
    gen = torch.Generator(device="cuda").manual_seed(5)
    x = torch.randn(T, d, device="cuda", generator=gen).bfloat16()
    wg = (torch.randn(d, h, device="cuda", generator=gen) / math.sqrt(d)).bfloat16()
    wu = (torch.randn(d, h, device="cuda", generator=gen) / math.sqrt(d)).bfloat16()
    wcat = torch.cat([wg, wu], 1).contiguous()
    out = torch.empty(T, h, device="cuda", dtype=torch.bfloat16)
    out2 = torch.empty(T, h, device="cuda", dtype=torch.bfloat16)
    gu = torch.empty(T, 2 * h, device="cuda", dtype=torch.bfloat16)
    mg.ceiling_mma(x, wcat, gu, tile=tile)
    mg.swiglu_mma(x, wg, wu, out, tile=tile)
    mg.swiglu_mma_identity(x, wg, wu, out, tile=tile)
    mg.gate_up_mma(x, wg, wu, out, out2, tile=tile)
    torch.cuda.synchronize()
    print("launched ceiling, swiglu, identity, store2 with", tile)


if __name__ == "__main__":
    sys.exit(main())
