"""Execute every chapter notebook on a real GPU and record the outcome.

CI has no GPU, so the book is built with kernels running in Numba's simulator; the cells that
only run on a GPU (live timings, live SASS, graph capture) are exercised here instead, on a GPU
machine, by the same Jupyter machinery the build uses (nbclient and an IPython kernel).

    python -m tools.gpu_validate --out DIR      # writes DIR/gpu_validate.json (+ failing notebooks)

Exit status 1 when any notebook raised. The JSON records the GPU, versions, date, and per
notebook its wall time and, on failure, the cell and error.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parent.parent


def chapters() -> list[Path]:
    return sorted((ROOT / "chapters").glob("*.ipynb"))


def run_one(path: Path, timeout: int) -> dict:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    t0 = time.perf_counter()
    row = {"notebook": path.relative_to(ROOT).as_posix()}
    try:
        client.execute()
        row["ok"] = True
    except CellExecutionError as exc:
        row["ok"] = False
        row["error"] = str(exc)[-3000:]
    row["seconds"] = round(time.perf_counter() - t0, 1)
    return row


def provenance() -> dict:
    import book
    from book import gpu

    info = gpu.device_info()
    versions = {}
    for mod in ("numba", "numba_cuda", "numpy", "torch"):
        try:
            versions[mod] = __import__(mod).__version__
        except Exception:  # not installed (torch is optional for the library)
            versions[mod] = None
    return {"gpu": info.name, "simulated": book.gpu.SIMULATED,
            "driver_cuda": ".".join(map(str, info.driver_version or ())) or None,
            "python": platform.python_version(), **versions,
            "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join(["python -m tools.gpu_validate", *sys.argv[1:]])}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("."))
    ap.add_argument("--timeout", type=int, default=300, help="seconds per cell")
    ap.add_argument("notebooks", nargs="*", type=Path, help="default: every chapter")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("MPLBACKEND", "Agg")
    rows = []
    for path in args.notebooks or chapters():
        row = run_one(path.resolve(), args.timeout)
        rows.append(row)
        print(f"{'ok  ' if row['ok'] else 'FAIL'} {row['seconds']:7.1f} s  {row['notebook']}",
              flush=True)
    record = {"provenance": provenance(), "notebooks": rows}
    (args.out / "gpu_validate.json").write_text(json.dumps(record, indent=1))
    failed = [r for r in rows if not r["ok"]]
    for r in failed:
        print(f"\n=== {r['notebook']}\n{r['error']}")
    print(f"{len(rows) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
