"""Record every chapter on a real GPU: the outputs the published site shows.

CI has no GPU, so `make book` executes the chapters in Numba's CUDA simulator (which proves they
run) but cannot time anything. On a GPU machine this executes every chapter the book executes,
one after another (timings want the GPU to themselves), with the Jupyter machinery the build uses
(nbclient and an IPython kernel, widget state saved), and keeps each executed notebook with
`book.provenance.provenance()` and a hash of each code cell's source (tools/recordings.py).

    # on the GPU machine (no .git there: pass the commit)
    COURSE_COMMIT=<sha> python -m tools.record --out DIR [CHAPTER.ipynb ...]
    # back here: check the bundle against the chapters and put it in records/chapters/<gpu>/
    python -m tools.record --install DIR/chapters-<gpu>.tar.gz

`--out DIR` writes two files (whatever happens): DIR/chapters-<gpu>.tar.gz (the recorded
notebooks, plus failed/<chapter>.ipynb executed up to the failing cell, plus index.json) and
DIR/record-summary.json (provenance and, per chapter, seconds and the failing cell and error).
Each chapter runs in a child process with a wall-clock limit (`--timeout`), so a chapter that
hangs is killed, named, and the others still run; `--budget` bounds the whole run (the bundle is
written even when it runs out). Exit status 1 when any chapter failed.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import nbformat

from tools import recordings
from tools.recordings import ROOT


# What executing a chapter needs beyond numba, torch, numpy and matplotlib: the Jupyter stack,
# which the device machine's image lacks. `--wheel-list` prints them pinned to this venv's
# versions for `pip download` (CONTRIBUTING.md); ipywidgets' front-end bundles are left out.
JUPYTER_STACK = (
    "nbclient", "nbformat", "jupyter_client", "jupyter_core", "ipykernel", "ipython",
    "ipython_pygments_lexers", "traitlets", "pyzmq", "tornado", "comm", "debugpy",
    "matplotlib-inline", "nest_asyncio", "platformdirs", "fastjsonschema", "jsonschema",
    "jsonschema-specifications", "referencing", "rpds-py", "decorator", "jedi", "parso",
    "pexpect", "ptyprocess", "prompt_toolkit", "wcwidth", "stack_data", "executing",
    "asttokens", "pure_eval", "ipywidgets", "anywidget", "psygnal",
)


def wheel_list() -> list[str]:
    from importlib.metadata import PackageNotFoundError, version

    pins = []
    for dist in JUPYTER_STACK:
        try:
            pins.append(f"{dist}=={version(dist)}")
        except PackageNotFoundError:
            pins.append(dist)
    return pins


# ---------------------------------------------------------------- one chapter (child process)

def _execute_one(src: str, to: Path, cell_timeout: int) -> int:
    """Execute chapter ``src`` here; write the executed notebook to ``to`` and a status next to
    it (``to`` + ".json"): ok, seconds, and on failure the cell number and the error."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError

    from book.data.lineage import LOG_ENV

    path = ROOT / src
    nb = nbformat.read(path, as_version=4)
    # the kernel logs the measurement runs each cell reads (book/data/lineage.py)
    runs_log = Path(str(to) + ".runs.jsonl")
    runs_log.parent.mkdir(parents=True, exist_ok=True)
    runs_log.unlink(missing_ok=True)
    os.environ[LOG_ENV] = str(runs_log)
    client = NotebookClient(nb, timeout=cell_timeout, kernel_name="python3",
                            store_widget_state=True,
                            # the kernel's "running over TCP without encryption" warning, once
                            # per chapter, would bury the table this prints
                            extra_arguments=["--IPKernelApp.log_level=ERROR"],
                            resources={"metadata": {"path": str(path.parent)}})
    status: dict = {"notebook": src}
    t0 = time.perf_counter()
    try:
        client.execute()
        status["ok"] = True
    except (CellExecutionError, CellTimeoutError, RuntimeError) as exc:
        status["ok"] = False
        status["error"] = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))[-3000:]
        executed = [i for i, c in enumerate(recordings.code_cells(nb), 1)
                    if c.get("execution_count") is not None or c.get("outputs")]
        status["cell"] = executed[-1] if executed else 1
    status["seconds"] = round(time.perf_counter() - t0, 1)
    _attach_runs(nb, runs_log)
    to.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, to)
    Path(str(to) + ".json").write_text(json.dumps(status))
    return 0 if status["ok"] else 1


def _attach_runs(nb, log: Path) -> None:
    """Each executed code cell's measurement runs (the kernel's log, matched by execution
    count) in its metadata, for recordings.stamp to keep with the recording."""
    by_count = {}
    if log.is_file():
        for line in log.read_text(encoding="utf-8").splitlines():
            entry = json.loads(line)
            by_count[entry.get("execution_count")] = entry["runs"]
    for c in recordings.code_cells(nb):
        n = c.get("execution_count")
        if n is not None:
            c.metadata[recordings.RUNS_KEY] = by_count.get(n, [])


def _kill_tree(pid: int) -> None:
    """Kill a process and everything it started: the IPython kernel runs in a session of its
    own (jupyter_client starts it so), where killing the chapter's process group misses it."""
    try:
        import psutil

        procs = psutil.Process(pid).children(recursive=True)
    except Exception:  # gone already, or no psutil: the group kill still runs
        procs = []
    for sig_target in [pid, *(p.pid for p in procs)]:
        for kill in (os.killpg, os.kill):
            try:
                kill(sig_target, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def _run_child(src: str, to: Path, cell_timeout: int, timeout: int) -> dict:
    """One chapter in its own process group, killed whole (kernel included) after ``timeout``."""
    cmd = [sys.executable, "-m", "tools.record", "--one", src, "--to", str(to),
           "--cell-timeout", str(cell_timeout)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, start_new_session=True)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_tree(proc.pid)
        proc.wait()
        return {"notebook": src, "ok": False, "seconds": round(time.perf_counter() - t0, 1),
                "error": f"killed after {timeout} s (--timeout): the chapter did not finish"}
    status_file = Path(str(to) + ".json")
    if not status_file.is_file():
        return {"notebook": src, "ok": False, "seconds": round(time.perf_counter() - t0, 1),
                "error": f"the chapter's process exited with status {proc.returncode} "
                         "and wrote no result (see the output above)"}
    return json.loads(status_file.read_text())


# ---------------------------------------------------------------- every chapter (--out)

def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime = len(data), int(time.time())
    tar.addfile(info, io.BytesIO(data))


def record(out: Path, chapters: list[str], timeout: int, cell_timeout: int,
           budget: float | None = None) -> int:
    # No MPLBACKEND here: the chapters' kernels must use IPython's inline backend, or
    # plt.show() draws nothing and the recording has no figures.
    os.environ.pop("MPLBACKEND", None)
    out.mkdir(parents=True, exist_ok=True)
    from book import specs
    from book.provenance import provenance

    command = " ".join(["python -m tools.record", *sys.argv[1:]])
    prov = provenance(command)
    slug = specs.slug(prov.get("gpu"))
    if prov.get("simulated"):
        print("WARNING: no GPU here: this records the simulator's outputs "
              "(recordings are meant to be made on a GPU).", flush=True)
    print(f"recording {len(chapters)} chapters on {prov.get('gpu')} "
          f"(commit {prov.get('commit')}) into {out}", flush=True)
    rows = []
    bundle = out / f"chapters-{slug}.tar.gz"
    deadline = time.monotonic() + budget if budget else None
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(bundle, "w:gz") as tar:
        for src in chapters:
            to = Path(tmp) / Path(src).name
            left = deadline - time.monotonic() if deadline else timeout
            if left < 10:
                row = {"notebook": src, "ok": False, "seconds": 0.0,
                       "error": f"not run: the --budget of {budget:.0f} s was spent"}
                rows.append(row)
                print(f"  SKIP   {0:6.1f} s  {src}  (--budget spent)", flush=True)
                continue
            row = _run_child(src, to, cell_timeout, int(min(timeout, left)))
            rows.append(row)
            print(f"  {'ok  ' if row['ok'] else 'FAIL'} {row['seconds']:6.1f} s  {src}"
                  + ("" if row["ok"] else f"  (code cell {row.get('cell', '?')})"), flush=True)
            if not to.is_file():
                continue
            nb = nbformat.read(to, as_version=4)
            recordings.stamp(nb, prov, src, row["seconds"])
            name = Path(src).name if row["ok"] else f"failed/{Path(src).name}"
            _add_bytes(tar, name, nbformat.writes(nb).encode())
        summary = {"provenance": prov, "gpu_slug": slug, "chapters": rows}
        _add_bytes(tar, "index.json", json.dumps(summary, indent=1).encode())
    (out / "record-summary.json").write_text(json.dumps(summary, indent=1))
    failed = [r for r in rows if not r["ok"]]
    for r in failed:
        print(f"\n===== {r['notebook']} failed (code cell {r.get('cell', '?')}) =====\n"
              f"{r['error'][-1500:]}")
    print(f"\n{len(rows) - len(failed)} of {len(rows)} chapters recorded on {prov.get('gpu')}"
          f" in {sum(r['seconds'] for r in rows):.0f} s; bundle: {bundle} "
          f"({bundle.stat().st_size / 1e6:.1f} MB)")
    if failed:
        print("FAILED: " + ", ".join(r["notebook"] for r in failed))
    print(f"install it here with: python -m tools.record --install {bundle.name}")
    return 1 if failed else 0


# ---------------------------------------------------------------- --install

def install(bundle: Path, root: Path = ROOT) -> int:
    """Put a bundle's recorded chapters into records/chapters/<gpu>/ and say which are current."""
    with tarfile.open(bundle, "r:gz") as tar:
        index = json.loads(tar.extractfile("index.json").read())
        slug = index["gpu_slug"]
        if index["provenance"].get("simulated"):
            print(f"{bundle}: recorded in the simulator, not on a GPU: not installed.",
                  file=sys.stderr)
            return 1
        dest = root / "records" / "chapters" / slug
        dest.mkdir(parents=True, exist_ok=True)
        print(f"installing into {dest.relative_to(root)} "
              f"({index['provenance'].get('gpu')}, {index['provenance'].get('date')}, "
              f"commit {index['provenance'].get('commit')})")
        stale = 0
        for row in index["chapters"]:
            src = row["notebook"]
            if not row["ok"]:
                print(f"  FAILED   {src}: not installed (code cell {row.get('cell', '?')})")
                continue
            data = tar.extractfile(Path(src).name).read()
            (dest / Path(src).name).write_bytes(data)
            rec = recordings.find(src, root, slug)
            stale += bool(rec.problems)
            print(f"  {'ok      ' if rec.usable else 'STALE   '} {src}"
                  + ("" if rec.usable else "  " + "; ".join(rec.problems)))
    if stale:
        print(f"{stale} chapter(s) changed since this recording was made: record them again.")
    print("commit records/chapters/ (git add records/chapters && git commit)")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.record", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, help="record here (a GPU machine)")
    ap.add_argument("--install", type=Path, metavar="BUNDLE",
                    help="install a bundle written by --out into records/chapters/")
    ap.add_argument("--timeout", type=int, default=240,
                    help="seconds per chapter before it is killed (default 240)")
    ap.add_argument("--budget", type=float, default=None,
                    help="seconds for the whole recording: a chapter still running then is "
                         "killed, later ones are not started, and the bundle is still written "
                         "(e.g. 500 inside the device tool's 600 s)")
    ap.add_argument("--cell-timeout", type=int, default=300, help="seconds per cell")
    ap.add_argument("--wheel-list", action="store_true",
                    help="print the Jupyter packages a GPU machine without them needs, pinned "
                         "to this environment's versions")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--to", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("chapters", nargs="*", help="default: every chapter the book executes")
    args = ap.parse_args(argv)
    if args.wheel_list:
        print(" ".join(wheel_list()))
        return 0
    if args.one:
        return _execute_one(args.one, args.to, args.cell_timeout)
    if args.install:
        return install(args.install)
    if not args.out:
        ap.error("give --out DIR (record) or --install BUNDLE")
    from tools.execute import executed_notebooks

    known = executed_notebooks()
    chapters = []
    for c in args.chapters or known:
        rel = Path(c).resolve().relative_to(ROOT).as_posix() if Path(c).exists() else c
        if rel not in known:
            ap.error(f"{c}: not a notebook the book executes ({', '.join(known)})")
        chapters.append(rel)
    return record(args.out.resolve(), chapters, args.timeout, args.cell_timeout, args.budget)


if __name__ == "__main__":
    sys.exit(main())
