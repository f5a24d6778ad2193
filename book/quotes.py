"""The measured figures a chapter's prose quotes, each computed from its record where it is shown.

A page's Markdown writes ``{measured}`family arg ...``` where it names a measured figure; the
build (``tools/sphinx_course.py``) puts in its place the figure this module computes from the
record, with the record's GPU, date and commit on hover and a link to the file. So prose can say
"3.0 µs against torch.compile's 2.9" without typing a number, and without a code cell, which
would need the chapter recorded on a GPU again (``tools/recordings.py``): the figures follow the
records they come from. A key that names no family, record, row or change fails the build
(``make book`` turns the role's error into a failed build) and ``tests/library/test_quotes.py``
computes every key the pages use.

The families (``FAMILIES``; arguments separated by spaces, ``T`` a number of tokens):

- ``decode_us STEM CHANGE T``: a row of a decode sweep (``benchmarks/fp8_decode_bench.py
  --sweep --changes [...]``, ``records/fp8/STEM.json``), its median in µs. ``CHANGE`` names the
  sweep's entry as :func:`change_label` writes it: ``default`` for ``{}``, else its options
  joined by ``+`` in the order given, a probe as ``probe=NAME`` (``preload+pdl``,
  ``probe=noseam+preload+pdl``);
- ``decode_peak STEM CHANGE T``: that row's read of both e4m3 weights as a share of the GPU's
  HBM peak (the record's provenance), in %;
- ``decode_saved_us STEM CHANGE T``: the default's median less that row's, in µs;
- ``row_us FILE VARIANT T``: the row ``VARIANT`` at ``T`` tokens of a record with rows of
  ``variant`` (or ``name``), ``shape`` and ``seconds`` (or ``median_us``), ``FILE`` its path
  from the repository's root (``book/data/h100.json``, ``records/bench/...json``), in µs; a
  name with more than one row at that T is refused;
- ``row_ratio FILE VARIANT OTHER T``: row ``OTHER``'s time over row ``VARIANT``'s at ``T``
  tokens of the same record (above 1: ``VARIANT`` is faster), ×;
- ``graph_us FILE VARIANT T``: the same row's calls replayed from a CUDA graph (its
  ``graph_s`` or ``graph_us``), in µs; a row without one is refused;
- ``norm_quant_us ROW T``: a row of ``records/fp8/norm_quant_h200.json``, its median in µs;
- ``norm_quant_vs_compile T``: torch.compile's RMSNorm + quantization over the fused kernel's
  time (above 1: ours is faster), ×.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable

from .kernels.gemv.fp8_gemv_tile import weight_bytes

ROOT = Path(__file__).resolve().parent.parent
NORM_QUANT = "records/fp8/norm_quant_h200.json"


@lru_cache(maxsize=None)
def record(path: str) -> dict:
    """A record under the repository's root (``records/...json``), read once."""
    full = (ROOT / path).resolve()
    if ROOT not in full.parents or not full.is_file():
        raise KeyError(f"no record {path!r} under {ROOT}")
    return json.loads(full.read_text())


def change_label(change: dict) -> str:
    """A sweep entry's name in a key: ``default`` for ``{}``, else ``probe=NAME`` and the
    options set true, joined by ``+`` in the order the command gave them."""
    parts = [f"{k}={v}" if not isinstance(v, bool) else k for k, v in change.items()
             if v is not False]
    return "+".join(parts) or "default"


def sweep_changes(rec: dict) -> list[dict]:
    """The ``--changes`` list a sweep's command gave: row ``fp8_gemv_sweep_<i>`` is entry i."""
    cmd = rec["provenance"].get("command", "")
    at = cmd.find("--changes ")
    if at < 0:
        return [{}]     # a sweep without --changes times the default alone
    changes, _ = json.JSONDecoder().raw_decode(cmd[at + len("--changes "):])
    return changes


def _row(path: str, name: str, T) -> dict:
    """The one row ``name`` (its ``variant``, or its ``name``) at ``T`` tokens of a record."""
    rows = record(path)["rows"]
    found = [r for r in rows if (r.get("variant") or r.get("name")) == name
             and r["shape"][0] == int(T)]
    if not found:
        have = sorted({(r.get("variant") or r.get("name"), r["shape"][0]) for r in rows})
        raise KeyError(f"{path} has no row {name!r} at T = {T}; it has {have}")
    if len(found) > 1:
        raise KeyError(f"{path} has {len(found)} rows {name!r} at T = {T}, not one")
    return found[0]


def _sweep_row(stem: str, change: str, T: str) -> tuple[dict, dict, str]:
    path = f"records/fp8/{stem}.json"
    rec = record(path)
    labels = [change_label(c) for c in sweep_changes(rec)]
    if change not in labels:
        raise KeyError(f"{path}'s sweep has no change {change!r}; it has {labels}")
    return _row(path, f"fp8_gemv_sweep_{labels.index(change)}", T), rec, path


def _decode_us(stem, change, T):
    row, rec, path = _sweep_row(stem, change, T)
    return row["median_us"], rec["provenance"], path


def _decode_peak(stem, change, T):
    row, rec, path = _sweep_row(stem, change, T)
    _, d, h = row["shape"]
    rate = weight_bytes(d, h) / (row["median_us"] * 1e-6)
    return 100 * rate / rec["provenance"]["peak_bandwidth"], rec["provenance"], path


def _decode_saved_us(stem, change, T):
    base, _, _ = _sweep_row(stem, "default", T)
    row, rec, path = _sweep_row(stem, change, T)
    return base["median_us"] - row["median_us"], rec["provenance"], path


def _row_us(path, variant, T):
    r, rec = _row(path, variant, T), record(path)
    value = r["seconds"] * 1e6 if "seconds" in r else r["median_us"]
    return value, r.get("provenance") or rec["provenance"], path   # a merged row keeps its run's


def _row_ratio(path, variant, other, T):
    ours, run, _ = _row_us(path, variant, T)
    theirs, _, _ = _row_us(path, other, T)
    return theirs / ours, run, path


def _graph_us(path, variant, T):
    r, rec = _row(path, variant, T), record(path)
    value = r["graph_s"] * 1e6 if r.get("graph_s") is not None else r.get("graph_us")
    if value is None:
        raise KeyError(f"{path}'s row {variant!r} at T = {T} has no graph time")
    return value, r.get("provenance") or rec["provenance"], path


def _norm_quant_us(name, T):
    return _row_us(NORM_QUANT, name, T)


def _norm_quant_vs_compile(T):
    return _row_ratio(NORM_QUANT, "norm_quant_fused", "compiled_rmsnorm_quant", T)


@dataclass(frozen=True)
class Family:
    compute: Callable[..., tuple[float, dict, str]]   # args -> (value, its run, the record)
    args: tuple[str, ...]
    unit: str          # printed after the value: " µs", "%", "×"
    digits: int


FAMILIES = {
    "decode_us": Family(_decode_us, ("STEM", "CHANGE", "T"), " µs", 1),
    "decode_peak": Family(_decode_peak, ("STEM", "CHANGE", "T"), "%", 0),
    "decode_saved_us": Family(_decode_saved_us, ("STEM", "CHANGE", "T"), " µs", 1),
    "row_us": Family(_row_us, ("FILE", "VARIANT", "T"), " µs", 1),
    "row_ratio": Family(_row_ratio, ("FILE", "VARIANT", "OTHER", "T"), "×", 2),
    "graph_us": Family(_graph_us, ("FILE", "VARIANT", "T"), " µs", 1),
    "norm_quant_us": Family(_norm_quant_us, ("ROW", "T"), " µs", 2),
    "norm_quant_vs_compile": Family(_norm_quant_vs_compile, ("T",), "×", 2),
}


@dataclass(frozen=True)
class Quote:
    """One figure as a page shows it: its text and where it was measured."""
    key: str
    value: float
    text: str
    path: str          # the record, relative to the repository's root
    gpu: str
    date: str
    commit: str

    def where(self) -> str:
        """The line a reader sees on hover."""
        return (f"measured on an {self.gpu} on {self.date[:10]} at commit {self.commit[:7]}: "
                f"{self.path}")


def quote(key: str) -> Quote:
    """The figure ``key`` names (``"family arg ..."``, the module's docstring lists them); a
    KeyError that says what is wrong and what exists where it names nothing."""
    family, *args = key.split()
    if family not in FAMILIES:
        raise KeyError(f"no measured family {family!r}; the families: {sorted(FAMILIES)}")
    fam = FAMILIES[family]
    if len(args) != len(fam.args):
        raise KeyError(f"{family} takes {' '.join(fam.args)}; {key!r} gives {len(args)} "
                       "arguments")
    value, prov, path = fam.compute(*args)
    return Quote(key, value, f"{value:.{fam.digits}f}{fam.unit}", path,
                 prov.get("gpu") or "unknown GPU", prov.get("date") or "", prov.get("commit")
                 or "")
