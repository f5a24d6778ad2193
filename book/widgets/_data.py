"""Measured rows from book/data/*.json, reshaped into the plain dicts the widgets draw.

The files are written by ``python -m book.bench`` and read through :mod:`book.data`. When no file
(or no loader) exists yet, every function here returns nothing and the widgets say
"no measurements recorded" instead of drawing points.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..dtypes import ITEMSIZE
from .. import specs, traffic

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
NO_DATA = "No measurements recorded yet (book/data has no results file)."


def _load_all(data=None):
    """[(slug, dataset)] for the given dataset(s), or for every book/data/*.json."""
    if data is not None:
        items = data if isinstance(data, (list, tuple)) else [data]
        return [(getattr(d, "slug", None) or f"data{i}", d) for i, d in enumerate(items)]
    files = sorted(DATA_DIR.glob("*.json"))
    if not files:
        return []
    try:
        from .. import data as book_data
    except ImportError:  # the loader has not landed: behave as if nothing were recorded
        return []
    return [(f.stem, book_data.load(str(f))) for f in files]


def _get(obj, key, default=None):
    if isinstance(obj, dict):
        return obj.get(key, default)
    return getattr(obj, key, default)


def parse_shape(shape) -> dict:
    """{"T", "h"[, "d"]} from a row's shape: [T, h], [T, d, h], {"T":..}, or "T x h"."""
    if isinstance(shape, dict):
        out = {k: int(shape[k]) for k in ("T", "h", "d") if k in shape}
        if "M" in shape and "T" not in out:
            out["T"] = int(shape["M"])
        if "F" in shape and "h" not in out:
            out["h"] = int(shape["F"])
        return out
    if isinstance(shape, str):
        shape = [int(x) for x in re.findall(r"\d+", shape)]
    if isinstance(shape, (list, tuple)):
        dims = [int(x) for x in shape]
        if len(dims) == 1:
            return {"T": 1, "h": dims[0]}
        if len(dims) == 2:
            return {"T": dims[0], "h": dims[1]}
        if len(dims) == 3:
            return {"T": dims[0], "d": dims[1], "h": dims[2]}
    return {}


def variant_family(name: str, kind: str | None = None) -> str | None:
    """Map a benchmark row (book/bench/suite.py: kind "kernel", "reference", "launch", "gemm")
    onto the widgets' kernels: "naive", "fused", "unfused", "epilogue"; None for the rest
    (torch and copy references, host launch times, single GEMMs)."""
    n = (name or "").lower()
    if kind in ("reference", "launch") or "torch" in n or n.startswith(("copy", "cublas")):
        return None
    if "l2_warm" in n:
        return None  # deliberately timed from L2 (no input rotation): not a DRAM measurement
    if n in ("strided2", "uncoalesced"):
        return None  # deliberately uncoalesced (book.kernels.elementwise.coalescing): how not to write one
    if kind == "gemm" or "gemm" in n:
        if "dual" in n or "epilogue" in n:
            return "epilogue"
        if "unfused" in n:
            return "unfused"
        return None  # one GEMM alone, or an activation timed between GEMMs (L2-warm)
    if n.startswith("naive"):
        return "naive"
    return "fused"  # every other elementwise kernel of the course computes the fused SwiGLU


_LABELS = {"naive": "naive SwiGLU", "fused": "fused SwiGLU", "unfused": "2 GEMMs + fused SwiGLU",
           "epilogue": "dual GEMM + epilogue"}


def _run(prov) -> str:
    """A run as a caption names it: "2026-11-24, commit f8dbf62"."""
    date = str(_get(prov, "date") or "")[:10]
    commit = str(_get(prov, "commit") or "")[:7]
    return ", ".join(x for x in (date, f"commit {commit}" if commit else "") if x)


def _source(slug, prov) -> str:
    """Where a point or preset comes from: the GPU, the run that measured it (a merged row's
    own run, not the record's), the file."""
    gpu = _get(prov, "gpu") or slug
    run = _run(prov)
    return f"{gpu}, {run}, book/data/{slug}.json" if run else f"{gpu}, book/data/{slug}.json"


def _row_prov(row, prov):
    return _get(row, "provenance") or prov


def summary(data=None) -> str:
    """A line naming where the measured points come from (each run of each record), or
    NO_DATA."""
    sets = _load_all(data)
    if not sets:
        return NO_DATA
    parts = []
    for slug, ds in sets:
        prov = _get(ds, "provenance", {}) or {}
        runs = dict.fromkeys([_run(prov)] + sorted(
            {_run(_row_prov(r, prov)) for r in _get(ds, "rows", []) or []}))
        gpu = _get(prov, "gpu") or slug
        parts.append(f"{gpu}, " + "; ".join(r for r in runs if r) + f" (book/data/{slug}.json)")
    return "Measured points: " + "; ".join(parts) + "."


def roofline_points(data=None) -> list[dict]:
    """Measured SwiGLU rows as roofline points: intensity = flops/bytes, performance = flops/s."""
    points = []
    for slug, ds in _load_all(data):
        prov = _get(ds, "provenance", {}) or {}
        key = specs.key_of(_get(prov, "gpu"))
        for row in _get(ds, "rows", []) or []:
            fam = variant_family(_get(row, "variant", ""), _get(row, "kind"))
            dtype = _get(row, "dtype")
            shape = parse_shape(_get(row, "shape"))
            if fam is None or dtype not in ITEMSIZE or "h" not in shape:
                continue
            seconds = _get(row, "seconds")  # (read only for a point: book/data/lineage.py)
            if not seconds:
                continue
            T, H = shape.get("T", 1), shape["h"]
            if fam in ("naive", "fused"):
                t = traffic.activation(T, H, dtype, fam)
            elif "d" in shape:
                t = traffic.mlp_up(T, shape["d"], H, dtype, fam)
            else:
                continue
            # bytes the kernel really moves (5 transfers per element for naive), so that measured
            # points and the model share one x axis; the row's "bytes" is the SwiGLU minimum
            byts = _get(row, "bytes_actual") or t.bytes
            flops = _get(row, "flops") or t.flops
            points.append({
                "gpu": key, "dtype": dtype, "variant": fam, "variant_label": _LABELS[fam],
                "T": T, "h": H, "d": shape.get("d"), "seconds": float(seconds),
                "bytes": float(byts), "flops": float(flops),
                "label": f"{_get(row, 'variant')} {dtype} {T}x{H}" + (f" d={shape['d']}" if "d" in shape else "")
                + (" (inputs fit in L2)" if any("L2" in str(x) for x in _get(row, "notes", []) or []) else ""),
                "source": _source(slug, _row_prov(row, prov)),
            })
    return points


def _is_python_launch(name: str, kind) -> bool:
    """Host time of one call of a course kernel from Python (not torch, not a part of a call)."""
    return name.endswith("_python_launch") and "torch" not in name


def launch_points(data=None) -> list[dict]:
    """Measured elementwise SwiGLU times against size, for the launch explorer:
    GPU time with the queue kept full ("gpu"), one call from Python timed on the host
    ("python"), and a CUDA graph replay ("graph")."""
    points = []
    for slug, ds in _load_all(data):
        prov = _get(ds, "provenance", {}) or {}
        for row in _get(ds, "rows", []) or []:
            name = str(_get(row, "variant", ""))
            kind = _get(row, "kind")
            dtype = _get(row, "dtype")
            shape = parse_shape(_get(row, "shape"))
            if dtype not in ITEMSIZE or "h" not in shape or "d" in shape:
                continue
            if _is_python_launch(name, kind):
                how = "python"
            elif name.endswith("_graph") and "torch" not in name:
                how = "graph"
            elif kind != "launch" and variant_family(name, kind) == "fused":
                how = "gpu"
            else:
                continue
            seconds = _get(row, "seconds")
            if not seconds:
                continue
            points.append({"elements": shape.get("T", 1) * shape["h"], "seconds": float(seconds),
                           "dtype": dtype, "how": how,
                           "source": _source(slug, _row_prov(row, prov)),
                           "gpu": specs.key_of(_get(prov, "gpu")),
                           "label": f"{name} {dtype} {shape.get('T', 1)}x{shape['h']}"})
    return points


def launch_presets(data=None) -> list[dict]:
    """Overheads and bandwidths measured in the data, as explorer presets (each with its dtype):
    per-call host times at the largest decode size recorded (a course kernel called from Python,
    a bare Numba launch, torch eager), a graph replay's time per SwiGLU, the best fused-kernel
    bandwidth and torch.add's (a three-stream elementwise kernel: the practical ceiling).

    One overhead per kind and dtype: where rows of several runs measured the same kind (a
    record's own row and a newer merged one), the newest run's, so the explorer starts from
    the figures chapter 6's decode tables print (one run, ``book.decode_cost``)."""
    presets = []
    for slug, ds in _load_all(data):
        prov = _get(ds, "provenance", {}) or {}
        where = f"book/data/{slug}.json"
        key = specs.key_of(_get(prov, "gpu"))
        overheads = {}  # (how, dtype) -> (elements, run date, seconds, name, shape)
        best_bw, ref_bw = {}, {}
        for row in _get(ds, "rows", []) or []:
            name = str(_get(row, "variant", ""))
            kind = _get(row, "kind")
            dtype = _get(row, "dtype")
            shape = parse_shape(_get(row, "shape"))
            if "d" in shape or "h" not in shape:
                continue
            n = shape.get("T", 1) * shape["h"]
            how = None
            if _is_python_launch(name, kind):
                how = "one call from Python"
            elif name.endswith("_raw_launch") or name == "launch_layer_raw_numba_launch":
                how = "bare Numba launch from Python"
            elif name == "torch_eager_python_launch":
                how = "torch eager call from Python"
            elif name == "launch_layer_fastcall":
                how = "the cheap path from torch (book.kernels.host.fastcall)"
            elif (name.endswith("_graph") and "torch" not in name) or name == "launch_layer_graph_replay":
                how = "CUDA graph replay, per SwiGLU"
            run = _row_prov(row, prov)
            date = str(_get(run, "date") or "")
            # newest run first; within one run the row chapter 6's decode table prints
            # (launch_layer_*, book.decode_cost) before another of the same kind
            rank = (n, date, name.startswith("launch_layer_"))
            seconds = _get(row, "seconds") if how else None  # read only where used (lineage)
            if how and seconds and rank > overheads.get((how, dtype), (0, "", False))[:3]:
                overheads[(how, dtype)] = (*rank, float(seconds), name, shape, run)
            if kind == "launch" or name.endswith("_graph") or not (
                    variant_family(name, kind) == "fused" or name == "torch_add"):
                continue
            bw = _get(row, "bandwidth")
            if not bw:
                continue
            if variant_family(name, kind) == "fused" and bw > best_bw.get(dtype, (0,))[0]:
                best_bw[dtype] = (float(bw), name, shape, run)
            if name == "torch_add" and bw > ref_bw.get(dtype, (0,))[0]:
                ref_bw[dtype] = (float(bw), name, shape, run)
        order = ["one call from Python", "bare Numba launch from Python",
                 "the cheap path from torch (book.kernels.host.fastcall)",
                 "CUDA graph replay, per SwiGLU", "torch eager call from Python"]
        for (how, dtype), (n, _date, _table, seconds, name, shape, run) in sorted(
                overheads.items(), key=lambda kv: order.index(kv[0][0])):
            # label: the whole provenance, the run included (notes, the option's tooltip); short:
            # the option's text, short enough that a dropdown at laptop width shows it whole
            presets.append({"kind": "overhead", "value": seconds, "dtype": dtype, "how": how, "gpu": key,
                            "label": f"overhead {fmt_time(seconds)}: {how} ({name}, "
                                     f"{shape.get('T', 1)}x{shape['h']}, run of {_run(run)}, {where})",
                            "short": f"overhead {fmt_time(seconds)}: {how}"})
        for table, what in ((best_bw, "best measured"), (ref_bw, "torch.add reference")):
            for dtype, (bw, name, shape, run) in table.items():
                presets.append({"kind": "bandwidth", "value": bw, "dtype": dtype, "how": what, "gpu": key,
                                "label": f"bandwidth {bw / 1e12:.3g} TB/s: {what} ({name}, "
                                         f"{shape.get('T', 1)}x{shape['h']}, run of {_run(run)}, "
                                         f"{where})",
                                "short": f"bandwidth {bw / 1e12:.3g} TB/s: {what}"})
    return presets


def fmt_time(seconds: float) -> str:
    for scale, unit in ((1, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns")):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds:.3g} s"


def positive_int(proposal):
    """traitlets validator body shared by the explorers' size fields (T, h, d)."""
    import traitlets as t

    v = proposal["value"]
    if v < 1:
        raise t.TraitError(f"{proposal['trait'].name} must be a positive whole number, got {v}")
    return v
