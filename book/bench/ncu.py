"""Nsight Compute from Python, written once: find ``ncu``, run a module under it, read its reports.

The counter instruments of benchmarks/ (``ncu_check``, ``ncu_diagnose``, ``coalescing``,
``tensorcore_ncu``) each profile a child of themselves; what they share is here:

* :func:`binary`: where ``ncu`` is: on ``PATH``, else the first of :data:`INSTALLS` that exists,
  else None (:func:`require`: else SystemExit, saying so).
* :func:`command` and :func:`run`: ncu's command line that profiles ``python -m MODULE ARGS``
  (this interpreter), and its run from the repository's root (the child imports the tree).
* :func:`shown`: that command as a record names it (``python`` for this interpreter, ``ncu``
  for the binary's path if asked).
* :func:`launches`: ``ncu --csv``'s report, the default page (a row a launch and metric:
  "Metric Name", "Metric Unit", "Metric Value") or ``--page raw`` (a row a launch, a column a
  metric, the units in the row under the header), as one :class:`Launch` a profiled launch in
  launch order, each value in base units by :data:`SCALE`.
* :func:`details`: ncu's text report (no ``--csv``: a section's table a launch, as
  records/tensorcore keeps them) as one ``{metric: value}`` a launch, in base units.

Nothing here needs a GPU: tests/library/test_ncu.py feeds the parsers reports made of the
committed records (book/data/ncu/, records/tensorcore/) and checks they give what is recorded.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

#: the repository's root, where a profiled child runs (``python -m benchmarks.X``)
ROOT = Path(__file__).resolve().parents[2]
#: where ncu is installed when it is not on PATH: CUDA's toolkit, then Nsight Compute's own
INSTALLS = ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/ncu")
#: ncu's units -> the factor to base units (bytes, bytes/s, seconds; percent, counts as they are)
SCALE = {
    "": 1, "%": 1, "inst": 1, "cycle": 1, "sector": 1, "request": 1,
    "byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9,
    "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9,
    "byte/second": 1, "Kbyte/second": 1e3, "Mbyte/second": 1e6, "Gbyte/second": 1e9,
    "Tbyte/second": 1e12,
    "byte/s": 1, "Kbyte/s": 1e3, "Mbyte/s": 1e6, "Gbyte/s": 1e9, "Tbyte/s": 1e12,
    "B/s": 1, "KB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9, "TB/s": 1e12,
    "ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1,
    "nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1,
}


def binary() -> str | None:
    """The ncu to run: on PATH, else the first of INSTALLS that exists, else None."""
    return shutil.which("ncu") or next((p for p in INSTALLS if os.path.exists(p)), None)


def require() -> str:
    """:func:`binary`, or SystemExit where this machine has no ncu."""
    found = binary()
    if found is None:
        raise SystemExit("no ncu on this machine (Nsight Compute): not on PATH nor at "
                         + ", ".join(INSTALLS))
    return found


def command(ncu: str, options: list[str], module: str, *args: str) -> list[str]:
    """``ncu OPTIONS python -m MODULE ARGS``, the child this interpreter."""
    return [ncu, *options, sys.executable, "-m", module, *args]


def run(cmd: list[str], timeout: float | None = None) -> subprocess.CompletedProcess:
    """Run ncu's ``cmd`` (from :func:`command`) from the repository's root, output captured."""
    return subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ), cwd=ROOT,
                          timeout=timeout, check=False)


def shown(cmd: list[str], bare: bool = False) -> str:
    """``cmd`` as a record names it: ``python`` for this interpreter; ``bare``: ``ncu`` for
    the binary's path."""
    words = ["python" if a == sys.executable else a for a in cmd]
    return " ".join((["ncu"] + words[1:]) if bare else words)


@dataclass
class Launch:
    """One profiled launch: ncu's ID, the kernel's name, ``metrics`` in base units (SCALE) and
    the ``units`` ncu gave them."""

    id: int
    kernel: str
    metrics: dict[str, float] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)


def value(text: str, unit: str) -> float:
    """ncu's ``text`` (thousands separated by commas) in ``unit``, in base units (a unit not in
    SCALE unscaled); ValueError where it is no number ("n/a")."""
    return float(str(text).replace(",", "")) * SCALE.get(unit, 1)


def unknown_units(launches: list[Launch]) -> set[str]:
    """The units of ``launches`` SCALE does not know (their values were kept unscaled)."""
    return {u for launch in launches for u in launch.units.values()} - set(SCALE)


def launches(text: str) -> list[Launch]:
    """Every profiled launch of ``ncu --csv``'s report ``text``, in launch order: the default
    page (a row a metric) or ``--page raw`` (a column a metric, whose name holds ``__``).
    Whatever ncu printed before the header (``==PROF==`` lines, the child's output) is skipped;
    a value that is no number is left out."""
    start = text.find('"ID"')
    if start < 0:
        return []
    rows = list(csv.DictReader(io.StringIO(text[start:])))
    found: dict[int, Launch] = {}
    if rows and "Metric Name" in rows[0]:
        for r in rows:
            unit = r.get("Metric Unit") or ""
            try:
                v = value(r["Metric Value"], unit)
            except ValueError:
                continue
            launch = found.setdefault(int(r["ID"]), Launch(int(r["ID"]), r.get("Kernel Name", "")))
            launch.metrics[r["Metric Name"]] = v
            launch.units[r["Metric Name"]] = unit
        return [found[k] for k in sorted(found)]
    units = rows[0] if rows and not str(rows[0].get("ID", "")).strip().isdigit() else {}
    for r in rows[1:] if units else rows:
        launch = found.setdefault(int(r["ID"]), Launch(int(r["ID"]), r.get("Kernel Name", "")))
        for col, v in r.items():
            if not col or "__" not in col:
                continue
            unit = units.get(col) or ""
            try:
                launch.metrics[col] = value(v, unit)
            except ValueError:
                continue
            launch.units[col] = unit
    return [found[k] for k in sorted(found)]


# a metric's row of a text report's section: four spaces, name, unit (or none), value
_ROW = re.compile(r"^\s{4}(\S.*?)\s{2,}(\S+)?\s+([\d,.]+)\s*$")


def details(text: str, kernel: str) -> list[dict[str, float]]:
    """ncu's text report ``text`` (its default, no ``--csv``) as one ``{metric: value}`` a
    launch of ``kernel`` (its name as Numba gives it, before ``[``), in launch order, every
    section's rows (the profiler metrics' names, a section's own as ncu words them) in base
    units."""
    out, cur = [], None
    for line in text.splitlines():
        if line.startswith(f"  {kernel}["):
            cur = {}
            out.append(cur)
            continue
        m = _ROW.match(line) if cur is not None else None
        if m and not line.strip().startswith(("Metric", "-")):
            name, unit, number = m.group(1).strip(), m.group(2) or "", m.group(3)
            if unit not in SCALE:  # a name that ends in a word ("block", "warp"), not a unit
                name, unit = f"{name} {unit}", ""
            cur[name] = value(number, unit)
    return out
