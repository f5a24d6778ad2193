"""The first code cell of every chapter, lab and lab master: generated from ONE template.

On Colab the cell installs the course at the commit pinned in _config.yml (`repository.pin`: a
later push cannot break a lab between two sessions of a class) with the numba-cuda build that
suits the GPU driver, then `import book` says whether kernels run on a GPU or in Numba's CUDA
simulator, and `book.gpu.check_setup()` runs a tiny kernel: one line with the GPU and the CUDA
versions, or the diagnosed cause (driver older than the PTX, nvJitLink older than NVVM, no GPU
selected, out of memory) and the exact fix. Locally nothing is installed and nothing is run
beyond `import book`: `make book` (or `pip install -e .`) already installed the course.

What the cell does on Colab, and why:
- The CUDA extra comes from cuDriverGetVersion (as book.gpu.driver_cuda_version reads it): cu13
  for a CUDA 13+ driver, cu12 otherwise and when the driver cannot be asked (a CUDA 13 driver runs
  CUDA 12 code, not the reverse). COURSE_CUDA_EXTRA=cu12|cu13 overrides it.
- pip installs on top of Colab's stack (only what is missing or too old; pyproject.toml's
  dependencies are loose so that Colab's own numpy, ipywidgets 7 and anywidget satisfy them).
  If pip nevertheless changed a package whose module the running kernel has already imported,
  the cell stops with one line: restart the runtime, run the cell again (it then skips the
  install: the pinned commit is already installed).

    python -m tools.setup_cell --check   # exit 1 and name each notebook whose setup cell is stale
    python -m tools.setup_cell --write   # rewrite (or insert) the setup cell where it is stale
    python -m tools.setup_cell --pin     # set repository.pin to the library's newest commit

The pin stays in step with the library: `--pin` (make pin) writes the newest commit that changed
what the course wheel installs (LIBRARY_PATHS), and tests/tooling/test_setup_cell.py fails while the
pinned commit's LIBRARY_PATHS differ from HEAD's. Committing the pin itself (and the notebooks
regenerated with it) does not move it, since those files are not LIBRARY_PATHS.

The cell's template and where it goes in a notebook: autograder/setup_template.py (shipped, since
`python -m autograder assign` writes it into the labs); this module is the build tool around it.
tests/tooling/test_setup_cell.py runs --check.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

# The cell itself (template, rendering, its place in a notebook) is shipped with the grader,
# whose `assign` writes it into the labs.
from autograder.setup_template import ROOT, fix, render, status

NOTEBOOK_GLOBS = ("chapters/*.ipynb", "labs/*.ipynb", "solutions/*.ipynb")
#: What `pip install git+<repository>@<pin>` installs: the pin must equal HEAD on these paths.
LIBRARY_PATHS = ("book", "autograder", "pyproject.toml")


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()


def library_commit() -> str:
    """The newest commit that changed what the course wheel installs (LIBRARY_PATHS)."""
    if _git("status", "--porcelain", "--", *LIBRARY_PATHS):
        raise SystemExit(f"uncommitted changes under {', '.join(LIBRARY_PATHS)}: commit them "
                         "first (the pin must name a commit that holds them)")
    return _git("log", "-1", "--format=%H", "HEAD", "--", *LIBRARY_PATHS)


_PIN_LINE = re.compile(r"^(  pin:[ \t]*)(\S*)(.*)$", re.M)


def write_pin(commit: str) -> bool:
    """Set repository.pin in _config.yml (one line, comments kept); True when it changed."""
    path = ROOT / "_config.yml"
    text = path.read_text(encoding="utf-8")
    if not _PIN_LINE.search(text):
        raise SystemExit("_config.yml has no `  pin:` line under `repository:`")
    new = _PIN_LINE.sub(lambda m: f"{m.group(1)}{commit}{m.group(3)}", text, count=1)
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


def notebooks() -> list[Path]:
    return sorted(p for g in NOTEBOOK_GLOBS for p in ROOT.glob(g))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.setup_cell", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="fail if any setup cell is stale")
    mode.add_argument("--write", action="store_true", help="rewrite stale setup cells")
    mode.add_argument("--print", action="store_true", help="print the setup cell")
    mode.add_argument("--pin", action="store_true",
                      help="set repository.pin in _config.yml to the library's newest commit")
    ap.add_argument("paths", nargs="*", type=Path, help="notebooks (default: chapters, labs, solutions)")
    args = ap.parse_args(argv)
    if args.print:
        print(render())
        return 0
    if args.pin:
        commit = library_commit()
        changed = write_pin(commit)
        print(f"_config.yml repository.pin: {commit}" + ("" if changed else " (unchanged)"))
        if changed:
            print("Now regenerate the cells that embed it: `make setup-cells` and "
                  "`python -m autograder assign` (make pin runs both), then commit.")
        return 0
    import nbformat

    bad = []
    for path in args.paths or notebooks():
        nb = nbformat.read(path, as_version=4)
        state = status(nb)
        if state in ("ok", "none"):
            continue
        name = path.resolve().relative_to(ROOT) if path.resolve().is_relative_to(ROOT) else path
        if args.write:
            fix(nb)
            nbformat.write(nb, path)
            print(f"{name}: setup cell {'inserted' if state == 'missing' else state + ', fixed'}")
        else:
            bad.append(f"{name}: setup cell {state}")
    if bad:
        print("\n".join(bad), file=sys.stderr)
        print(f"{len(bad)} notebook(s) need the setup cell from tools/setup_cell.py: run "
              "`.venv/bin/python -m tools.setup_cell --write` (or `make setup-cells`).",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
