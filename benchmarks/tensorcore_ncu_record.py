"""The tensor-core ncu profiles as data: parse records/tensorcore's ncu text into book/data.

Record: `book/data/ncu/tensorcore_h100.json` (parsed from `records/tensorcore/`; no GPU).

    python benchmarks/tensorcore_ncu_record.py   # writes book/data/ncu/tensorcore_h100.json

`benchmarks/tensorcore_ncu.py` launches the ceiling, the dual GEMM (SwiGLU), the identity
epilogue and the gate|up store, in that order, under ncu; ncu's text report of each run is kept
in records/tensorcore/ (see its README). Chapter 8 shows what limits the kernel from those
counters, so they are parsed here (each kernel's "Command line profiler metrics" and "Warp State
Statistics" values, in launch order) and stored with the provenance of the run that made them,
rather than typed into the chapter.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "records" / "tensorcore"
OUT = ROOT / "book" / "data" / "ncu" / "tensorcore_h100.json"
LAUNCHES = ("ceiling", "swiglu", "identity", "store2")  # benchmarks/tensorcore_ncu.py's order
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


def main():
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
                         "written_by": "python benchmarks/tensorcore_ncu_record.py"}
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}: " + ", ".join(
        f"{k} {list(p['kernels'])}" for k, p in doc["profiles"].items()))


if __name__ == "__main__":
    main()
