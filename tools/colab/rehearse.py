"""`run` (no network): the rehearsal itself, one small step at a time (the steps are
``python -m tools.colab_rehearsal --help``): the mirror venv, the setup cell run in it twice,
what pip changed, a lab master and a chapter executed in the venv's own Jupyter kernel."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from autograder.setup_template import fix, render
from tools.colab.mirror import (MIRROR, MUST_NOT_CHANGE, ROOT, SYSTEM_SITE, cell_env,
                                colab_pins, constraints, make_venv, norm, run, versions)

#: What Colab's kernel has imported when the first cell runs (its IPython kernel, widgets, the
#: inline plots): the cell runs after these imports, so a change to any of them shows.
COLAB_KERNEL_IMPORTS = "import IPython, ipykernel, traitlets, ipywidgets, numpy, matplotlib\n"
#: --restart-check: a student who ran `from numba import cuda` before the setup cell.
RESTART_PRELUDE = "from numba import cuda\n"
LAB = "solutions/lab2_packed_swiglu.ipynb"
CHAPTER = "chapters/02_roofline.ipynb"  # its roofline explorer widget; no torch


def run_cell(py: Path, env: dict, cwd: Path, timeout: int = 900,
             prelude: str = COLAB_KERNEL_IMPORTS) -> dict:
    t0 = time.perf_counter()
    p = run([py, "-c", prelude + render()], env=env, cwd=cwd, capture_output=True, text=True,
             check=False, timeout=timeout)
    return {"rc": p.returncode, "seconds": round(time.perf_counter() - t0, 1),
            "stdout": p.stdout[-4000:], "stderr": p.stderr[-4000:]}


def execute_notebook(py: Path, nb_path: Path, env: dict, workdir: Path, timeout: int) -> dict:
    """Execute a copy of ``nb_path`` (today's setup cell applied) in the venv's own kernel."""
    import nbformat

    nb = nbformat.read(nb_path, as_version=4)
    fix(nb)
    copy = workdir / nb_path.name
    nbformat.write(nb, copy)
    runner = ("import sys, nbformat, nbclient\n"
              "nb = nbformat.read(sys.argv[1], as_version=4)\n"
              "nbclient.NotebookClient(nb, timeout=int(sys.argv[2]), kernel_name='python3',\n"
              "    resources={'metadata': {'path': sys.argv[3]}}).execute()\n"
              "nbformat.write(nb, sys.argv[1])\n")
    t0 = time.perf_counter()
    p = run([py, "-c", runner, copy, timeout, workdir], env=env, cwd=workdir,
             capture_output=True, text=True, check=False, timeout=timeout * 4)
    out = nbformat.read(copy, as_version=4)
    texts = ["".join(o.get("text", "") for o in c.get("outputs", []) if o.get("output_type") == "stream")
             for c in out.cells if c.cell_type == "code"]
    return {"notebook": str(nb_path.relative_to(ROOT)), "rc": p.returncode,
            "seconds": round(time.perf_counter() - t0, 1), "setup_cell_output": texts[0][-2000:]
            if texts else "", "error": p.stderr[-3000:] if p.returncode else ""}


def rehearse(wheels: Path, venv: Path, python: str, extra: str, source: Path,
             notebooks: list[str], timeout: int, system_site: bool = False,
             restart_check: bool = False) -> dict:
    skip = SYSTEM_SITE if system_site else ()
    rec: dict = {"extra": extra, "python": python,
                 "from_the_machine_not_colab": list(skip)}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        cons = constraints(tmp / "colab-constraints.txt", skip)
        py = make_venv(venv, python, wheels, cons, system_site)
        if restart_check:  # a copy of the mirror before the install (hard links: instant;
            # pip replaces files rather than writing into them, so the copy stays as it was)
            copy = venv.with_name(venv.name + "-restart")
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(venv, copy, symlinks=True, copy_function=os.link)
            pristine = copy / "bin" / "python"
        rec["python_version"] = run([py, "-c", "import sys; print(sys.version.split()[0])"],
                                     capture_output=True, text=True).stdout.strip()
        before = versions(py)
        pins = colab_pins()
        rec["mirror_mismatch"] = {n: [pins.get(norm(n)), before.get(norm(n))] for n in MIRROR
                                  if n not in skip and before.get(norm(n)) != pins.get(norm(n))}
        env = cell_env(wheels, source, extra)
        rec["first_run"] = run_cell(py, env, tmp)
        after = versions(py)
        rec["changed"] = {n: [before.get(n), after.get(n)] for n in sorted(set(before) | set(after))
                          if before.get(n) != after.get(n)}
        rec["must_not_change_changed"] = [n for n in MUST_NOT_CHANGE if norm(n) in rec["changed"]]
        rec["second_run"] = run_cell(py, env, tmp)
        rec["notebooks"] = [execute_notebook(py, ROOT / nb, env, tmp, timeout) for nb in notebooks]
        if restart_check:  # the untouched mirror; numba.cuda imported before the cell
            rec["restart_case"] = run_cell(pristine, env, tmp, prelude=RESTART_PRELUDE)
    rec["ok"] = (rec["first_run"]["rc"] == 0 and rec["second_run"]["rc"] == 0
                 and "Installing" not in rec["second_run"]["stdout"]
                 and not rec["must_not_change_changed"]
                 and not rec["mirror_mismatch"] and all(n["rc"] == 0 for n in rec["notebooks"])
                 and (not restart_check or "Restart needed" in rec["restart_case"]["stderr"]))
    return rec
