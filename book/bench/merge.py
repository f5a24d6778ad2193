"""``python -m book.bench.merge FILE...``: put rows measured with ``--only`` into the record.

``python -m book.bench --only REGEX --rows-out FILE`` measures a few rows on a GPU and
writes them with that run's provenance. This merges FILE into ``book/data/<gpu>.json``
(the GPU named in FILE's provenance; ``--into PATH`` for another record):

* a row replaces the row of the same kind, variant, dtype and shape, or is added;
  a correctness check replaces the check of the same variant, dtype and shape, and a
  ``--tune`` row the one of the same variant, dtype, shape, block and grid cap;
* every merged row carries the provenance of the run that measured it (``row["provenance"]``),
  and the record lists each merged run under ``merged`` (provenance, ``--only`` pattern, the
  rows it contributed); the record's own ``provenance`` stays that of its full run;
* the targets are recomputed from the merged rows;
* ``--variants REGEX`` merges only the rows and checks whose variant matches (``re.search``),
  e.g. a sweep's rows without the host rows measured in the same run; the record's ``merged``
  entry names the pattern, and the file itself is kept whole under ``records/``.

``--retarget`` (no FILE) only recomputes the record's targets from its rows, after a change to
how a target is computed or described (``book/bench/targets.py``). Nothing is measured here, so it runs anywhere (no GPU, no torch).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from book.data import HERE as DATA
from book.data import write
from book.specs import slug

from .targets import HBM3_PEAK, targets


def row_key(r):
    return (r.get("kind"), r["variant"], r["dtype"], tuple(r["shape"] or ()))


def check_key(c):
    return (c["variant"], c["dtype"], tuple(c["shape"] or ()))


def tuning_key(r):
    return (r["variant"], r["dtype"], tuple(r["shape"]), r.get("block"), r.get("max_blocks"))


def _load(path, what):
    path = Path(path)
    if not path.exists():
        raise SystemExit(f"{what} {path} does not exist")
    try:
        doc = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise SystemExit(f"{what} {path} is not JSON ({e}): re-run the benchmark that wrote it")
    for key in ("provenance", "rows"):
        if key not in doc:
            raise SystemExit(f"{what} {path} is not a book.bench result: it has no {key!r}")
    return doc


def select(part: dict, pattern: re.Pattern) -> dict:
    """``part`` with only the rows and checks whose variant ``pattern.search`` matches; a
    ValueError when it matches none of its rows."""
    rows = [r for r in part["rows"] if pattern.search(r["variant"])]
    if not rows:
        names = sorted({r["variant"] for r in part["rows"]})
        raise ValueError(f"--variants {pattern.pattern!r} matches none of the file's rows "
                         f"(its variants: {', '.join(names) or 'none'})")
    checks = [c for c in part.get("checks", []) if pattern.search(c["variant"])]
    return dict(part, rows=rows, checks=checks, variants=pattern.pattern)


def merge(record: dict, part: dict) -> dict:
    """``record`` with ``part``'s rows and checks merged in (a new dict; inputs unchanged)."""
    prov = dict(part["provenance"])
    if record["provenance"].get("gpu") != prov.get("gpu"):
        raise ValueError(
            f"rows measured on {prov.get('gpu')!r} cannot be merged into the record of "
            f"{record['provenance'].get('gpu')!r}: merge into that GPU's own file (--into)")
    new_rows = [dict(r, provenance=prov) for r in part["rows"]]
    new_keys = {row_key(r) for r in new_rows}
    rows = [r for r in record["rows"] if row_key(r) not in new_keys]
    kept = {row_key(r) for r in rows}
    # earlier merged runs keep only the rows that are still theirs
    merged = []
    for m in record.get("merged", []):
        m = dict(m, rows=[k for k in m["rows"] if (k[0], k[1], k[2], tuple(k[3])) in kept])
        if m["rows"]:
            merged.append(m)
    entry = {"provenance": prov, "only": part.get("only"),
             "rows": [[r.get("kind"), r["variant"], r["dtype"], list(r["shape"])]
                      for r in new_rows]}
    if part.get("variants"):
        entry["variants"] = part["variants"]
    merged.append(entry)
    new_checks = part.get("checks", [])
    ck = {check_key(c) for c in new_checks if c.get("shape") is not None}
    checks = [c for c in record.get("checks", [])
              if c.get("shape") is None or check_key(c) not in ck] + new_checks
    new_tuning = [dict(r, provenance=prov) for r in part.get("tuning", [])]
    tk = {tuning_key(r) for r in new_tuning}
    tuning = [r for r in record.get("tuning", []) if tuning_key(r) not in tk] + new_tuning
    out = dict(record)
    out["rows"] = rows + new_rows
    out["checks"] = checks
    out["tuning"] = tuning
    out["merged"] = merged
    out["notes"] = list(record.get("notes", [])) + [
        f"merged: {n}" for n in part.get("notes", [])]
    peak = record["provenance"].get("peak_bandwidth") or HBM3_PEAK
    out["targets"] = targets(out["rows"], peak)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m book.bench.merge",
                                 description=__doc__.split("\n\n")[0].strip("`: "))
    ap.add_argument("files", nargs="*", metavar="FILE", help="written by --rows-out")
    ap.add_argument("--into", help="the record to merge into (default book/data/<gpu>.json)")
    ap.add_argument("--retarget", action="store_true",
                    help="recompute the targets of --into (default book/data/h100.json) from its "
                         "rows; nothing merged")
    ap.add_argument("--variants", metavar="REGEX",
                    help="merge only the rows (and checks) whose variant matches REGEX")
    args = ap.parse_args(argv)
    if args.retarget:
        if args.files or args.variants:
            raise SystemExit("--retarget merges nothing: give no FILE and no --variants")
        into = Path(args.into) if args.into else DATA / "h100.json"
        record = _load(into, "record")
        peak = record["provenance"].get("peak_bandwidth") or HBM3_PEAK
        write(into, dict(record, targets=targets(record["rows"], peak)))
        print(f"recomputed the {len(record.get('targets', []))} targets of {into}")
        return 0
    if not args.files:
        raise SystemExit("give a FILE written by --rows-out (or --retarget)")
    # checked once, before any file is read or written
    try:
        variants = re.compile(args.variants) if args.variants else None
    except re.error as e:
        raise SystemExit(f"--variants {args.variants!r} is not a regular expression ({e})")
    for f in args.files:
        part = _load(f, "rows file")
        into = Path(args.into) if args.into else DATA / f"{slug(part['provenance'].get('gpu'))}.json"
        record = _load(into, "record")
        try:
            if variants:
                part = select(part, variants)
            doc = merge(record, part)
        except ValueError as e:
            raise SystemExit(str(e))
        write(into, doc)
        print(f"merged {len(part['rows'])} row(s) and {len(part.get('checks', []))} check(s) "
              f"from {f} into {into} ({len(doc['rows'])} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
