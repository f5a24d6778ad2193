"""Measured results recorded by ``python -m book.bench`` on real GPUs.

``load("h100")`` returns a :class:`Results` with the run's ``provenance`` (GPU, driver,
CUDA, library versions, date, command), its ``rows`` (one per variant x dtype x shape:
seconds, bytes, bandwidth, flops, flops_per_s, method, ...), the correctness ``checks``,
the ``targets`` (measured ratios against the course's goals) and the block/grid
``tuning`` sweep. Chapters plot these; nothing measured is typed by hand.

Rows, tuning entries and targets note the run that measured them when a number is read, and
:func:`record` notes each run a record holds (:mod:`book.data.lineage`): in a notebook, a cell
whose numbers come from several runs names each of them under its output, and ``tools.record``
keeps every cell's runs in the recording. :func:`write` writes a record atomically. The
records here, and the command that writes each: book/data/README.md.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent


def write(path, doc) -> Path:
    """Write the record ``doc`` to ``path`` as JSON, atomically: a reader (or a run killed
    mid-write) never leaves half a file where a record was (``python -m book.bench`` saves
    after every phase; ``python -m book.bench.merge`` rewrites the record)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=float) + "\n")
    os.replace(tmp, path)
    return path


def available():
    """GPU slugs with recorded results, e.g. ["h100"]."""
    return sorted(p.stem for p in HERE.glob("*.json"))


@dataclass
class Results:
    provenance: dict
    rows: list
    checks: list = field(default_factory=list)
    targets: list = field(default_factory=list)
    tuning: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    path: Path | None = None

    def find(self, variant, dtype="float32", shape=None):
        """The row for ``variant`` at ``dtype`` and ``shape`` (a tuple such as (8192, 14336)).

        Raises KeyError naming what exists when there is no such row."""
        for r in self.rows:
            if r["variant"] == variant and r["dtype"] == dtype and (
                shape is None or tuple(r["shape"]) == tuple(shape)
            ):
                return r
        have = sorted({(r["variant"], r["dtype"], tuple(r["shape"])) for r in self.rows
                       if r["variant"] == variant})
        raise KeyError(
            f"no row for variant={variant!r} dtype={dtype!r} shape={shape!r} in {self.path}; "
            + (f"this variant has {have}" if have else
               f"variants recorded: {sorted({r['variant'] for r in self.rows})}")
        )

    def select(self, **where):
        """Rows whose fields equal the given values (``shape`` compared as a tuple)."""
        out = []
        for r in self.rows:
            ok = True
            for k, v in where.items():
                rv = r.get(k)
                if k == "shape":
                    ok = ok and tuple(rv or ()) == tuple(v)
                else:
                    ok = ok and rv == v
            if ok:
                out.append(r)
        return out

    def variants(self):
        return sorted({r["variant"] for r in self.rows})

    def caption(self):
        """One line naming where the record's own run's numbers come from, for under a plot or
        table (printed: plain text, no Markdown backticks; the command without the paths of
        the machine that ran it)."""
        from book.provenance import without_paths

        from .lineage import note

        p = self.provenance
        note(p)
        return (f"Measured on {p.get('gpu')} (driver {p.get('driver')}, CUDA {p.get('cuda')}, "
                f"numba-cuda {p.get('numba_cuda')}, torch {p.get('torch')}) on {p.get('date')}, "
                f"commit {str(p.get('commit') or '?')[:7]}, with: {without_paths(p.get('command'))}")


def ncu(gpu: str = "h100") -> dict:
    """The Nsight Compute cross-check recorded by ``benchmarks/ncu_check.py`` on ``gpu``."""
    path = HERE / "ncu" / f"{gpu.lower()}.json"
    if not path.exists():
        raise FileNotFoundError(f"no ncu cross-check recorded for {gpu!r} ({path})")
    return _noted(json.loads(path.read_text()))


def _noted(doc: dict) -> dict:
    """A loaded record, each run it holds noted for the cell that loads it."""
    from .lineage import note, runs_of

    for p in runs_of(doc):
        note(p)
    return doc


def record(name: str) -> dict:
    """A profiler record by its path under book/data, without ".json".

    ``record("ncu/diagnosis_h100")`` (``benchmarks/ncu_diagnose.py``: stall reasons, DRAM
    bytes, sectors per request) or ``record("profile/decode_timeline_h100")``
    (``benchmarks/profile_decode.py``: a torch.profiler timeline). Each holds its
    ``provenance``."""
    path = (HERE / f"{name}.json").resolve()
    if HERE not in path.parents or not path.exists():
        have = sorted(str(p.relative_to(HERE).with_suffix("")) for p in HERE.glob("*/*.json"))
        raise FileNotFoundError(f"no record {name!r} under {HERE}; recorded: {have}")
    return _noted(json.loads(path.read_text()))


def sass(kernel: str, dtype: str = "float32") -> str:
    """SASS (machine code) of a kernel, dumped on the H100 by ``benchmarks/sass_dump.py``.

    ``kernel`` is a name from :func:`book.kernels.host.ptx.kernels` (e.g. "vec4")."""
    path = HERE / "sass" / f"{kernel}_{dtype}.sass"
    if not path.exists():
        have = sorted(p.stem for p in (HERE / "sass").glob("*.sass"))
        raise FileNotFoundError(f"no SASS recorded for {kernel}/{dtype}; recorded: {have}")
    return path.read_text()


def load(gpu: str = "h100") -> Results:
    """Results recorded for ``gpu`` (a slug such as "h100", or a path to a JSON file)."""
    path = Path(gpu)
    if path.suffix != ".json":
        path = HERE / f"{gpu.lower()}.json"
    if not path.exists():
        raise FileNotFoundError(
            f"no recorded results for {gpu!r} ({path}); available: {available() or 'none'}. "
            "Record them on that GPU with `python -m book.bench`."
        )
    doc = json.loads(path.read_text())
    for key in ("provenance", "rows"):
        if key not in doc:
            raise ValueError(f"{path} is not a benchmark result: it has no {key!r}")
    from .lineage import Row, Target

    top = doc["provenance"]
    rows = [Row(r, r.get("provenance") or top) for r in doc["rows"]]
    run = {(r.get("kind"), r["variant"], r["dtype"], tuple(r["shape"] or ())): r.run for r in rows}
    # a target notes the runs of the rows it was computed from (book.bench.rows.keys); one
    # recorded before targets listed their rows stands for the record's own run
    targets = [Target(t, [run[k] for k in ((a, b, c, tuple(d or ())) for a, b, c, d in t["rows"])
                          if k in run] if "rows" in t else [top])
               for t in doc.get("targets", [])]
    tuning = [Row(t, t.get("provenance") or top) for t in doc.get("tuning", [])]
    return Results(top, rows, doc.get("checks", []), targets, tuning, doc.get("notes", []), path)
