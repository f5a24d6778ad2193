"""Execute the book's notebooks in parallel into jupyter-book's execution cache.

`make book` runs this before `jupyter-book build`. jupyter-book 1 (myst-nb, `execute_notebooks:
cache`) executes notebooks one at a time and stops at the first that fails. Here every notebook
the book executes (those in _toc.yml, minus `execute.exclude_patterns` in _config.yml) whose code
is not already in the cache runs at the same time as others, one kernel per CPU core; the results
go into the same cache (_build/.jupyter_cache), where the build then finds them. The cache knows
only the notebooks' code: when anything under book/ (or requirements.txt) changes, every notebook
runs again, so no page shows outputs of an older library. When some fail,
all of them are reported (file, cell, error) and the exit status is 1: the build would fail on
them anyway, as `raise_on_error` in _config.yml makes any cell error fatal.

Recorded GPU outputs: a chapter with a current recording (tools/recordings.py, made on a GPU by
`python -m tools.record`) still executes here in the simulator, so it must run without error, but
what goes into the cache, and so onto the page, is the chapter's source with the recorded
outputs. A chapter with no recording, or whose code changed since it was recorded, keeps the
simulator's outputs (tools/sphinx_course.py labels each page with which it shows).

    python -m tools.execute            # execute what is not cached yet
    python -m tools.execute --list     # list the notebooks the book executes
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import os
import re
import shutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import nbformat
import yaml

from tools import recordings

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "_build" / ".jupyter_cache"
DOCTREES = ROOT / "_build" / ".doctrees"
# The cache is keyed on each notebook's code only. Outputs also depend on the library the
# notebooks import, so a change under book/ (or in the pins) re-executes every notebook.
FINGERPRINT = ROOT / "_build" / ".notebooks-library-fingerprint"
# tools/recordings.py and this file decide what a recorded chapter's cached outputs are.
FINGERPRINTED = ("book", "requirements.txt", "records/chapters", "tools/recordings.py",
                 "tools/execute.py")


def library_fingerprint() -> str:
    h = hashlib.sha256()
    for top in FINGERPRINTED:
        path = ROOT / top
        if not path.exists():
            continue
        files = [path] if path.is_file() else sorted(
            p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        for f in files:
            h.update(f.relative_to(ROOT).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def _forget_stale_outputs() -> None:
    now = library_fingerprint()
    before = FINGERPRINT.read_text().strip() if FINGERPRINT.exists() else None
    if before is not None and before != now and CACHE.exists():
        print("notebooks: book/, requirements.txt or records/chapters/ changed since the "
              "notebooks last ran: executing them again")
        shutil.rmtree(CACHE)
        # Sphinx would otherwise keep the pages it rendered from the old outputs.
        shutil.rmtree(DOCTREES, ignore_errors=True)
    FINGERPRINT.parent.mkdir(parents=True, exist_ok=True)
    FINGERPRINT.write_text(now + "\n")


def _config() -> dict:
    return yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))


def toc_sources(root: Path = ROOT) -> list[str]:
    """Source files listed in root/_toc.yml, with their suffixes ("chapters/x.ipynb")."""
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    names = [toc["root"]]

    def walk(node):
        if isinstance(node, dict):
            if "file" in node:
                names.append(node["file"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk({k: v for k, v in toc.items() if k != "root"})
    out = []
    for name in names:
        found = [name + s for s in (".ipynb", ".md") if (root / (name + s)).exists()]
        out.append(found[0] if found else name)
    return out


def executed_notebooks() -> list[str]:
    skip = _config().get("execute", {}).get("exclude_patterns", [])
    return [s for s in toc_sources() if s.endswith(".ipynb")
            and not any(fnmatch.fnmatch(s, p) for p in skip)]


#: how many times a notebook's kernel is started before its build fails: a kernel that dies
#: before it answers ``kernel_info`` has run none of the notebook. jupyter_client picks a
#: kernel's ports before the kernel binds them, so kernels started side by side (one per core,
#: here) can lose that race now and then; a clean CI build lost one that way.
KERNEL_STARTS = 3


def kernel_never_started(err: BaseException) -> bool:
    """Whether an execution failed before the kernel ran anything (it died on start)."""
    return isinstance(err, RuntimeError) and "died before replying to kernel_info" in str(err)


#: the kernel's own log, kept to errors: at its default level every kernel starts with
#: "Kernel is running over TCP without encryption" (ipykernel's warning for the local TCP
#: sockets nbclient asks for), one line per notebook, alarming and harmless
KERNEL_ARGS = ["--IPKernelApp.log_level=ERROR"]


def forget_dead_client(err: BaseException) -> None:
    """Drop the exit hook nbclient left for a kernel that died on start.

    nbclient registers its client's cleanup with ``atexit`` before it starts the kernel and
    unregisters it only once the kernel ran; when the kernel dies before answering, the client
    cleans up at once and the hook stays, to fail at exit ("AssertionError" under "Exception
    ignored in atexit callback", once per dead kernel). The client is the ``self`` of the
    frames the error came through."""
    import atexit

    from nbclient import NotebookClient

    tb = err.__traceback__
    while tb is not None:
        client = tb.tb_frame.f_locals.get("self")
        if isinstance(client, NotebookClient):
            atexit.unregister(client._cleanup_kernel)
        tb = tb.tb_next


def _run(rel: str, timeout: int, allow_errors: bool):
    """In a worker process: execute one notebook where it lives (as myst-nb does), starting
    its kernel again when it dies on start (:data:`KERNEL_STARTS`)."""
    from jupyter_cache.executors.utils import single_nb_execution

    path = ROOT / rel
    for start in range(1, KERNEL_STARTS + 1):
        nb = nbformat.read(path, as_version=4)
        try:
            result = single_nb_execution(nb, cwd=str(path.parent), timeout=timeout,
                                         allow_errors=allow_errors, meta_override=True,
                                         extra_arguments=KERNEL_ARGS)
            break
        except RuntimeError as e:
            if not kernel_never_started(e):
                raise
            forget_dead_client(e)
            if start == KERNEL_STARTS:
                return rel, None, 0.0, (
                    f"RuntimeError: the Jupyter kernel for {rel} died before it started, "
                    f"{KERNEL_STARTS} times ({e}); no cell ran, so this is not an error in the "
                    "notebook: run `make book` again, and if it repeats, check that "
                    "`python -m ipykernel_launcher` starts in this environment")
            print(f"  kernel for {rel} died on start ({start} of {KERNEL_STARTS}); starting "
                  "it again", flush=True)
            time.sleep(start)
    if result.err is not None:
        return rel, None, result.time, result.exc_string or repr(result.err)
    return rel, nbformat.writes(nb), result.time, None


def _published(rel: str, simulated_nb):
    """What the page of ``rel`` shows: its current GPU recording, else the simulator's run."""
    rec = recordings.find(rel)
    if rec.usable:
        src = nbformat.read(ROOT / rel, as_version=4)
        nb = recordings.with_recorded_outputs(src, rec)
        drawn = recordings.with_build_figures(nb, simulated_nb) if simulated_nb else 0
        extra = f"; {drawn} figure(s) drawn at build time from recorded data" if drawn else ""
        return nb, f"the recording ({rec.describe()}{extra})"
    if rec.exists:
        return simulated_nb, "simulator outputs: its recording is STALE (tests/chapters/test_record.py)"
    return simulated_nb, "simulator outputs (no recording)"


def _last_error_line(exc_string: str) -> str:
    plain = re.sub(r"\x1b\[[0-9;]*m", "", exc_string)
    lines = [ln for ln in plain.splitlines() if re.match(r"^\w*(Error|Exception|Interrupt)\b", ln)]
    return lines[-1][:300] if lines else plain.strip().splitlines()[-1][:300]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.execute", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true", help="list the executed notebooks and exit")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args(argv)
    notebooks = executed_notebooks()
    if args.list:
        print("\n".join(notebooks))
        return 0

    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    exec_cfg = _config().get("execute", {})
    timeout = int(exec_cfg.get("timeout", 30))
    allow_errors = bool(exec_cfg.get("allow_errors", False))
    _forget_stale_outputs()
    cache = get_cache(str(CACHE))
    todo = []
    for rel in notebooks:
        try:
            cache.match_cache_notebook(nbformat.read(ROOT / rel, as_version=4))
        except KeyError:
            todo.append(rel)
    if not todo:
        print(f"notebooks: all {len(notebooks)} executed notebooks are cached")
        return 0
    print(f"notebooks: executing {len(todo)} of {len(notebooks)} "
          f"({min(args.jobs, len(todo))} at a time)", flush=True)
    failed = []
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(_run, rel, timeout, allow_errors) for rel in todo]
        for fut in as_completed(futures):
            rel, text, seconds, err = fut.result()
            if err is not None:
                failed.append((rel, err))
                print(f"  FAILED {rel} ({seconds:.0f} s)", flush=True)
                continue
            nb, shown = _published(rel, nbformat.reads(text, as_version=4))
            cache.cache_notebook_bundle(
                CacheBundleIn(nb, str(ROOT / rel), data={"execution_seconds": seconds}),
                check_validity=False, overwrite=True)
            print(f"  ok     {rel} ({seconds:.0f} s; the page shows {shown})", flush=True)
    print(f"notebooks: done in {time.perf_counter() - t0:.0f} s")
    if failed:
        for rel, err in failed:
            print(f"\n===== {rel} raised an error while executing =====\n{err}", file=sys.stderr)
        print(f"\n{len(failed)} notebook(s) failed:", file=sys.stderr)
        for rel, err in failed:
            print(f"  {rel}: {_last_error_line(err)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
