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
"""

from __future__ import annotations

import argparse
import json
import math
import re
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
_ROW = re.compile(r"^\s{4}(\S.*?)\s{2,}(\S+)?\s+([\d,.]+)\s*$")
_UNIT = {"": 1.0, "%": 1.0, "inst": 1.0, "cycle": 1.0, "us": 1e-6, "ms": 1e-3, "s": 1.0,
         "Gbyte/s": 1e9, "Tbyte/s": 1e12, "Mbyte/s": 1e6}


def parse(text: str) -> list[dict]:
    """One dict per profiled kernel, in launch order: metric name -> value in base units
    (seconds, bytes/s, percent, counts)."""
    kernels, cur = [], None
    for line in text.splitlines():
        if line.startswith("  mma_gemm["):
            cur = {}
            kernels.append(cur)
            continue
        m = _ROW.match(line) if cur is not None else None
        if m and not line.strip().startswith(("Metric", "-")):
            name, unit, value = m.group(1).strip(), m.group(2) or "", m.group(3)
            if unit and unit not in _UNIT:  # a name that ends in a word, not a unit
                name, unit = f"{name} {unit}", ""
            cur[name] = float(value.replace(",", "")) * _UNIT[unit]
    return kernels


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--T", type=int, default=2048)
    ap.add_argument("--config", default=None)
    ap.add_argument("--parse", action="store_true",
                    help="no launch: write book/data/ncu/tensorcore_h100.json from the reports")
    args = ap.parse_args()
    if args.parse:
        return write_record()
    import torch

    from book.kernels import mma_gemm as mg

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
    main()
