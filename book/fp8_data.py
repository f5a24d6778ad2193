"""The "Eight bits" chapter's measurements: the runs of ``records/fp8/`` as ``book/data`` rows.

The FP8 benchmarks (``benchmarks/fp8_bench.py``: the fused MLP-up at prefill;
``benchmarks/fp8_decode_bench.py``: the decode GEMV) write their own records under
``records/fp8/``, each with its run's provenance. This module turns one or more of them into
``book/data/fp8/<gpu>.json``, the record the chapter reads with :func:`load`:

    python -m book.fp8_data records/fp8/fp8_bench_h200.json [records/fp8/...json ...]

Each row becomes a ``book.data`` row (``variant``, ``dtype``: the inputs' format,
``shape`` [T, d, h], ``seconds``, ``p10_s``, ``p90_s``, ``flops_per_s``, ``method``; and what
the FP8 runs add: ``torch_events_s``, the independent re-timing with torch CUDA events;
``sm_mhz`` and ``power_w``, the medians of the GPU's state read after each turn; for decode rows
``bytes`` and ``bandwidth``, the weight bytes read and their rate, and ``graph_s``, the same
calls as pure GPU time, replayed from a CUDA graph) carrying the provenance of
the run that measured it; a later record's row replaces an earlier one's of the same variant,
dtype and shape. The record's own ``provenance`` is its first run's; ``records`` lists the files
it was built from, in order, so that ``tests/library/test_fp8_chapter.py`` can build it again
and find it unchanged (nothing in it is typed by hand).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .data import HERE as DATA
from .data import load as _load
from .data import write
from .specs import slug

__all__ = ["rows_of", "build", "targets", "path_for", "load", "extras", "available", "ROOT",
           "BF16_ROWS", "PREFERRED", "TARGETS"]

ROOT = DATA.parent.parent
#: rows whose inputs are bfloat16 (chapter 9's kernels and cuBLAS's bf16 GEMMs, measured
#: beside the FP8 ones); every other row of an FP8 record reads e4m3 (a row may say its
#: own ``dtype``)
BF16_ROWS = ("wgmma_dual_gemm_bf16", "bf16_")
#: the GPU whose record the chapter reads when several are there (the course's published
#: one first)
PREFERRED = ("h100", "h200")


#: issue 42's lines, as (what, ours, theirs or "hbm_peak", the T it holds at, the least ratio):
#: ours / theirs in speed (their time over ours), or ours' weight bytes a second over the
#: HBM peak
TARGETS = (
    ("fused FP8, e4m3 out, against cuBLASLt FP8 + compiled SiLU*up + quantization",
     "fp8_fused_e4m3_out", "scaled_mm_rowwise_mlp_up_e4m3_compiled", (2048, 8192), 1.0),
    ("stretch: fused FP8, e4m3 out, against cuBLASLt's FP8 GEMM alone",
     "fp8_fused_e4m3_out", "scaled_mm_rowwise_gemm", (2048, 8192), 0.95),
    ("decode GEMV, e4m3 out, against cuBLASLt FP8 + compiled SiLU*up + quantization",
     "fp8_gemv_e4m3_out", "scaled_mm_rowwise_decode_e4m3_compiled", (1, 4, 16), 1.0),
    ("decode GEMV, e4m3 out: its weight bytes a second over the HBM peak",
     "fp8_gemv_e4m3_out", "hbm_peak", (1, 4, 16), 0.85),
)


def targets(rows, peak: float | None) -> list[dict]:
    """Each line of :data:`TARGETS` at each of its T, as measured by ``rows`` (book.data
    rows of one GPU; ``peak``: its HBM peak in bytes a second): the ratio, the line and
    whether the ratio meets it; a line whose rows are missing is left out."""
    by = {(r["variant"], r["shape"][0]): r for r in rows}
    out = []
    for what, ours, theirs, ts, goal in TARGETS:
        for T in ts:
            a = by.get((ours, T))
            if a is None:
                continue
            if theirs == "hbm_peak":
                if not peak or not a.get("bandwidth"):
                    continue
                value = a["bandwidth"] / peak
            else:
                b = by.get((theirs, T))
                if b is None:
                    continue
                value = b["seconds"] / a["seconds"]
            out.append({"target": what, "T": T, "ours": ours, "theirs": theirs,
                        "value": value, "goal": goal, "met": value >= goal})
    return out


def _dtype(row) -> str:
    if row.get("dtype"):
        return row["dtype"]
    name = row["name"]
    return "bfloat16" if any(name == b or name.startswith(b) for b in BF16_ROWS) else "e4m3"


def rows_of(doc: dict) -> list[dict]:
    """The rows of one FP8 record in ``book.data``'s shape, each with the record's
    provenance."""
    prov = doc["provenance"]
    out = []
    for r in doc["rows"]:
        T, d, h = r["shape"]
        sec = r["median_us"] * 1e-6
        row = {"variant": r["name"], "dtype": _dtype(r), "shape": [T, d, h],
               "seconds": sec, "p10_s": r["p10_us"] * 1e-6, "p90_s": r["p90_us"] * 1e-6,
               "reps": r.get("samples"), "flops": 4 * T * d * h,
               "flops_per_s": 4 * T * d * h / sec, "method": r.get("method"),
               "sm_mhz": r.get("sm_mhz_median"), "power_w": r.get("power_w_median")}
        if r.get("torch_events_us") is not None:
            row["torch_events_s"] = r["torch_events_us"] * 1e-6
        if r.get("weight_bytes"):
            row["bytes"] = r["weight_bytes"]
            row["bandwidth"] = r["weight_bytes"] / sec
        if r.get("graph_us") is not None:
            row["graph_s"] = r["graph_us"] * 1e-6
            row["graph_method"] = r.get("graph_method")
        for k in ("path", "tile", "note"):
            if r.get(k) is not None:
                row[k] = r[k]
        row["provenance"] = prov
        out.append(row)
    return out


def _key(r):
    return (r["variant"], r["dtype"], tuple(r["shape"]))


def build(paths) -> dict:
    """``book/data/fp8/<gpu>.json`` from the records ``paths`` (later rows replace earlier
    ones of the same variant, dtype and shape)."""
    docs = [(Path(p), json.loads(Path(p).read_text())) for p in paths]
    if not docs:
        raise ValueError("no records given")
    gpus = {d["provenance"].get("gpu") for _, d in docs}
    if len(gpus) != 1:
        raise ValueError(f"records of several GPUs: {sorted(map(str, gpus))}")
    rows, checks, ratios, extra = {}, [], [], {}
    for path, d in docs:
        prov = d["provenance"]
        for r in rows_of(d):
            rows[_key(r)] = r
        checks += [{**c, "provenance": prov} for c in d.get("checks", [])]
        ratios += [{**q, "provenance": prov} for q in d.get("ratios", [])]
        for k, v in d.items():
            if k.startswith("out_scale_"):
                extra.setdefault("out_scale", {})[k.removeprefix("out_scale_")] = v
            elif k in ("launches", "kernels"):
                extra.setdefault(k, {}).update(v)
    rows = list(rows.values())
    peak = next((d["provenance"].get("peak_bandwidth") for _, d in docs
                 if d["provenance"].get("peak_bandwidth")), None)
    return {"about": "the FP8 chapter's rows, built by python -m book.fp8_data from the "
                     "records listed (each row keeps its run's provenance)",
            "records": [_relative(p) for p, _ in docs],
            "provenance": docs[0][1]["provenance"],
            "rows": rows, "checks": checks, "ratios": ratios,
            "targets": targets(rows, peak), **extra}


def _relative(p: Path) -> str:
    p = p.resolve()
    try:
        return p.relative_to(ROOT).as_posix()
    except ValueError:
        return p.as_posix()


def path_for(gpu: str) -> Path:
    return DATA / "fp8" / f"{gpu}.json"


def available() -> list[str]:
    """GPU slugs with an FP8 record, the preferred first."""
    have = sorted(p.stem for p in (DATA / "fp8").glob("*.json"))
    return sorted(have, key=lambda g: (PREFERRED.index(g) if g in PREFERRED else 99, g))


def load(gpu: str | None = None):
    """The FP8 record of ``gpu`` (default: the preferred one there is) as a
    :class:`book.data.Results`: rows that note their run when a number is read."""
    gpu = gpu or (available() or [None])[0]
    if gpu is None:
        raise FileNotFoundError("no FP8 record under book/data/fp8: build one with "
                                "python -m book.fp8_data records/fp8/<record>.json")
    return _load(str(path_for(gpu)))


def extras(gpu: str | None = None) -> dict:
    """The record's other fields (checks, ratios, output scales, the kernels each row
    launched, registers), each run noted when read (:func:`book.data.record`)."""
    from .data import record

    gpu = gpu or available()[0]
    return record(f"fp8/{gpu}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m book.fp8_data", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("records", nargs="+", help="records/fp8/*.json, earliest first")
    ap.add_argument("--out", help="default: book/data/fp8/<gpu>.json")
    args = ap.parse_args(argv)
    doc = build(args.records)
    out = Path(args.out) if args.out else path_for(slug(doc["provenance"].get("gpu")))
    write(out, doc)
    print(f"{out}: {len(doc['rows'])} rows from {len(doc['records'])} record(s)")
    for t in doc["targets"]:
        print(f"  T = {t['T']:>4}: {t['value']:.3f} (line {t['goal']:.2f}) "
              f"{'met' if t['met'] else 'NOT MET'}: {t['target']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
