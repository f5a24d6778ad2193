"""Every kernel a lab master launches compiles for a real GPU, not only in the simulator; and
what ptxas makes of it (registers, stack frame, spills), recorded.

    python -m tools.lab_ptx [--cc=7.5 --cc=9.0 ...] [LAB[=NOTEBOOK] ...]   # default: sm_90, the staged labs
    python -m tools.lab_ptx --ptxas [--T 1 4 8 16] [--out FILE] LAB      # ptxas -v of each kernel

e.g. ``python -m tools.lab_ptx lab4=old_lab4.ipynb`` checks another copy of lab 4's master.

Numba's CUDA simulator runs a kernel as Python, so it accepts code the GPU compiler
refuses: ``cuda.shared.array((S, S + 1), float32)`` ran in the simulator but is a
TypingError on a GPU (``S + 1`` is not folded to a constant). This tool closes that gap
without a GPU, in two phases:

1. In the simulator (this process), run the master's cells in notebook order and, right
   after the cell that defines a step's function, that step's cases (the spec's ``all_steps``: every
   step, then the graded function's public cases), recording every kernel launch: the
   kernel's global name, the cell that defined it and the Numba types of its arguments
   (``numba.typeof`` of the host arrays behind the simulator's device arrays: dtype, ndim,
   layout; scalars as the GPU dispatcher types them).
2. In a child process with the simulator off (Numba's real CUDA target; NVVM ships as a
   wheel, so no GPU or driver is needed), run the same cells in the same order and
   ``cuda.compile_ptx`` each recorded (kernel, signature) for ``cc=(9, 0)`` with the
   kernel's own options (fastmath, ...) at the same point of the notebook.

``check(lab)`` returns one ``Compiled`` per (step, kernel, signature); ``failures`` the
ones that did not compile, each naming the lab, the step, the kernel, its cell, the
signature and Numba's error.

3. ``--ptxas`` (``ptxas_record``): each compiled PTX assembled by ptxas for the same target
   with ``-v``, through nvJitLink (``book.kernels.host.ptx.ptxas_log``: a pip wheel, as Numba links
   a kernel on a GPU; no GPU or CUDA toolkit needed), and what it reports per kernel kept
   (``usage``): registers, stack frame, spill stores and loads, barriers.
   ``--T 1 4 8 16`` runs the graded function only, once per token count, on the lab's
   simulated timing case with ``T`` set and one row (``token_cases``): the kernel it launches
   and its argument types, all a compile depends on, are those a grader's call at that ``T``
   gives (lab 6's master launches ``KERNELS[T]``, a kernel compiled for each ``T``).
   ``--out`` writes the rows with ``book.provenance`` and the versions of NVVM and of the
   ptxas inside nvJitLink (``records/labs/lab6_master_ptxas.json``).
"""

from __future__ import annotations

import json
import os
import pickle
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from autograder.labs import get, staged
from autograder.labs.spec import COURSE_CC
from autograder.master import edited, graded_cells

REPO = Path(__file__).resolve().parent.parent
CC = COURSE_CC  # Hopper: the course's GPU (a lab's own: its spec's compile_cc)
STAGED = staged()  # the labs built in steps (autograder/labs/: specs with steps)


@dataclass(frozen=True)
class Compiled:
    lab: str
    step: str
    kernel: str        # the kernel's global name in the notebook
    cell: str          # id of the cell that defined it
    signature: str     # Numba's argument types, e.g. (array(float32, 2d, C), int64)
    error: str = ""    # Numba's error; "" when it compiled
    cc: tuple = CC     # the compute capability it was compiled for
    case: str = ""     # the name of the (first) case whose call launched it
    ptx: str = field(default="", repr=False, compare=False)  # the PTX (check(keep_ptx=True))

    @property
    def ok(self) -> bool:
        return not self.error

    def describe(self) -> str:
        head = (f"{self.lab}, step {self.step!r}: kernel {self.kernel} (cell {self.cell}) "
                f"launched with {self.signature}")
        sm = f"sm_{self.cc[0]}{self.cc[1]}"
        if self.ok:
            return head + f" compiles for {sm}"
        return (head + f" runs in the simulator but does not compile for a GPU "
                f"({sm}):\n{self.error}")


def master_cells(lab: str, notebook: str | Path | None = None, edits=()) -> list[tuple[str, str]]:
    """(cell id, source) of the code cells a lab's steps need, in order: the master's graded
    cells (autograder.master: the setup cells, which would import ``book`` and pick the
    simulator, check calls and instructor hidden tests left out), ``edits`` made (``Edit``s
    of autograder/labs/edits.py: a bug planted to see it caught)."""
    return [(c.id, c.source) for c in edited(graded_cells(lab, notebook), edits)]


def _step_after_cell(steps, src: str) -> list:
    """The steps whose function the cell defines (their checks come right after it)."""
    return [s for s in steps if re.search(rf"^def {re.escape(s.function)}\(", src, re.M)]


def _exec(ns: dict, lab: str, cid: str, src: str) -> None:
    # the file name is the cell, so a kernel's code object names the cell defining it
    exec(compile(src, f"<{lab} {cid}>", "exec"), ns)


def _cell_of(fn, lab: str) -> str:
    name = getattr(getattr(fn, "__code__", None), "co_filename", "")
    m = re.fullmatch(rf"<{re.escape(lab)} (.+)>", name)
    return m.group(1) if m else name or "?"


def _arg_type(value, kernel: str, pos: int):
    """The Numba type a GPU launch gives this argument (what the simulator got)."""
    import numba

    from book.numba_compat import host_array

    host = host_array(value)
    try:
        return numba.typeof(host)
    except (ValueError, TypeError) as e:
        raise TypeError(f"{kernel}: argument {pos} ({type(value).__name__}) has no Numba "
                        f"type, so it cannot be compiled for a GPU either: {e}") from e


def record(lab: str, cells, only=None, cases=None) -> dict[str, list[dict]]:
    """Phase 1, in the simulator: {cell id: [launch]} where a launch is a dict with the
    step, the kernel's global name, its cell, the case and the pickled argument types. Runs
    every step (or the steps named in ``only``) on its cases (``cases``: {step name: cases}
    instead of its own) right after the cell defining its function, as the notebook's check
    cells do."""
    from numba import config

    from book.numba_compat import is_launch, patch_sim_call

    if not config.ENABLE_CUDASIM:
        raise RuntimeError("tools.lab_ptx.record needs Numba's CUDA simulator (import book "
                           "on a machine without a GPU, or set BOOK_SIMULATOR=1)")
    one = get(lab)
    steps = [s for s in one.all_steps if only is None or s.name in only]
    ns = {"__name__": "__main__", "check": lambda *a, **k: None}
    launches: dict[str, list[dict]] = {}
    current = {}
    def recording(original):
        def call(self, *args):
            return recording_call(original, self, *args)
        return call

    def recording_call(original, self, *args):
        if is_launch(self):
            names = sorted(k for k, v in ns.items() if v is self)
            kname = names[0] if names else self.fn.__name__
            if not names:
                raise RuntimeError(
                    f"{lab}, step {current['step']!r}: kernel {self.fn.__name__} is not a "
                    "global of the notebook, so its GPU compilation cannot be checked: "
                    "define kernels at the top level of a cell")
            tys = tuple(_arg_type(a, kname, i) for i, a in enumerate(args))
            key = (current["step"], kname, tys)
            if key not in current["seen"]:
                current["seen"].add(key)
                launches.setdefault(current["cell"], []).append(
                    {"step": current["step"], "kernel": kname, "case": current["case"],
                     "cell": _cell_of(self.fn, lab), "types": pickle.dumps(tys)})
        return original(self, *args)

    undo = patch_sim_call(recording)
    try:
        for cid, src in cells:
            _exec(ns, lab, cid, src)
            for st in _step_after_cell(steps, src):
                current.update(step=st.name, cell=cid, seen=set())
                for case in (cases or {}).get(st.name, st.cases):
                    current["case"] = case.get("name", "")
                    one.run_step(ns[st.function], st, case)
                if not any(ln["step"] == st.name for ln in launches.get(cid, ())):
                    raise RuntimeError(f"{lab}, step {st.name!r}: {st.function} launched "
                                       "no kernel, so there is nothing to compile")
    finally:
        undo()
    missing = [s.name for s in steps
               if not any(ln["step"] == s.name for v in launches.values() for ln in v)]
    if missing:
        raise RuntimeError(f"{lab}: no cell defines the function of step(s) {missing}")
    return launches


# Phase 2: a fresh interpreter with Numba's real CUDA target. It must not run book/__init__.py
# (that would pick the simulator on a machine without a GPU): `book` is a bare package there,
# so a master may still import the instruction modules graded code may use
# (book.kernels.instructions.tensorcore), and target_cc() answers the compute capability compiled for.
_CHILD = r"""
import json, pickle, sys, types
with open(sys.argv[1], "rb") as f:
    spec = pickle.load(f)
pkg = types.ModuleType("book"); pkg.__path__ = [spec["root"] + "/book"]; sys.modules["book"] = pkg
from numba import cuda
from book.numba_compat import NotAKernel, compile_error_line, compile_for_cc


def where(e, cid, src):
    line = compile_error_line(e, "<%s %s>" % (spec["lab"], cid))
    lines = src.splitlines()
    if line is None or not 0 < line <= len(lines):
        return ""
    return "\nat line %d of cell %s: %s" % (line, cid, lines[line - 1].strip())


ns = {"__name__": "__main__", "check": lambda *a, **k: None}
out = []
for cid, src in spec["cells"]:
    exec(compile(src, "<%s %s>" % (spec["lab"], cid), "exec"), ns)
    for ln in spec["launches"].get(cid, ()):
        tys = pickle.loads(ln["types"])
        row = {k: ln[k] for k in ("step", "kernel", "cell", "case")}
        row["cc"] = tuple(spec["cc"])
        row["signature"] = "(" + ", ".join(str(t) for t in tys) + ")"
        disp = ns.get(ln["kernel"])
        try:
            text = compile_for_cc(disp, tys, spec["cc"])
            row["error"] = ""
            if spec["keep_ptx"]:
                row["ptx"] = text
        except NotAKernel as e:
            row["error"] = "%s is %s" % (ln["kernel"], e)
        except Exception as e:
            row["error"] = "%s: %s" % (type(e).__name__, e) + where(e, cid, src)
        out.append(row)
with open(sys.argv[1] + ".json", "w") as f:  # a file: the cells may print
    json.dump(out, f)
"""


def _start_child(lab: str, cells, launches, tmp: Path, cc=CC,
                 keep_ptx: bool = False) -> subprocess.Popen:
    from book.kernels.instructions.tensorcore import TARGET_CC_ENV

    env = {k: v for k, v in os.environ.items()
           if k not in ("NUMBA_ENABLE_CUDASIM", "BOOK_SIMULATOR")}
    env["NUMBA_DISABLE_ERROR_MESSAGE_HIGHLIGHTING"] = "1"  # plain text in the messages
    env[TARGET_CC_ENV] = f"{cc[0]}.{cc[1]}"  # a master that picks instructions by GPU
    spec = tmp / f"{lab}-sm{cc[0]}{cc[1]}.pickle"
    spec.write_bytes(pickle.dumps({"lab": lab, "cells": list(cells), "launches": launches,
                                   "cc": list(cc), "root": str(REPO), "keep_ptx": keep_ptx}))
    p = subprocess.Popen([sys.executable, "-c", _CHILD, str(spec)], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, env=env, cwd=REPO)
    p.result = Path(f"{spec}.json")
    return p


def _finish_child(lab: str, p: subprocess.Popen, timeout: float) -> list[Compiled]:
    try:
        output, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        raise RuntimeError(f"{lab}: compiling its kernels took over {timeout:.0f} s") from None
    if p.returncode != 0:
        # a cell that fails outside any kernel (an import, a module-level statement)
        raise RuntimeError(f"{lab}: its cells do not run with the simulator off "
                           f"(Numba's real CUDA target):\n{output.decode()[-4000:]}")
    return [Compiled(lab=lab, **{**row, "cc": tuple(row["cc"])})
            for row in json.loads(p.result.read_text())]


def check(labs=STAGED, notebooks=None, only=None, timeout: float = 300,
          ccs=None, edits=None, cases=None, keep_ptx: bool = False) -> list[Compiled]:
    """Record each lab's launches in the simulator, then compile them all for each compute
    capability of ``ccs`` (default: the lab's ``compile_cc``, sm_90; one child process per lab and capability, started
    as soon as the lab's recording is done). ``notebooks``: {lab: another notebook of it};
    ``edits``: {lab: [Edit]} made to its graded cells; ``cases``: {step name: cases} run
    instead of the steps' own (``token_cases``); ``keep_ptx``: each result keeps its PTX."""
    import tempfile

    notebooks, edits = notebooks or {}, edits or {}
    started = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for lab in labs:
                cells = master_cells(lab, notebooks.get(lab), edits.get(lab, ()))
                launches = record(lab, cells, only, cases)
                for cc in ccs or (get(lab).compile_cc,):
                    started.append((lab, _start_child(lab, cells, launches, Path(tmp), tuple(cc),
                                                      keep_ptx)))
            out = []
            for lab, p in started:
                out.extend(_finish_child(lab, p, timeout))
        finally:
            for _, p in started:  # none outlives an error in a later lab
                if p.poll() is None:
                    p.kill()
                    p.communicate()
    return out


def failures(results) -> list[Compiled]:
    return [r for r in results if not r.ok]


# Phase 3 (--ptxas): what ptxas -v says of each compiled kernel
_STACK = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(?:, used (\d+) barriers)?")


def usage(log: str) -> dict:
    """What ptxas -v reports of the one entry function of a PTX text: registers, barriers,
    stack frame, spill stores and loads (bytes), and its two lines as it printed them (the
    function's mangled name left out)."""
    entries = re.findall(r"Compiling entry function", log)
    stack, used = _STACK.findall(log), _USED.findall(log)
    if len(entries) != 1 or len(stack) != 1 or len(used) != 1:
        raise ValueError("expected ptxas's report of exactly one entry function, got "
                         f"{len(entries)} entries, {len(stack)} stack lines, {len(used)} "
                         f"register lines:\n{log[-2000:]}")
    lines = [ln.strip() for ln in log.splitlines() if _STACK.search(ln) or _USED.search(ln)]
    frame, st, ld = (int(v) for v in stack[0])
    regs, bars = used[0]
    return {"registers": int(regs), "stack_frame_bytes": frame, "spill_store_bytes": st,
            "spill_load_bytes": ld, "barriers": int(bars or 0),
            "ptxas_said": [re.sub(r"\s+", " ", ln) for ln in lines]}


def token_cases(lab: str, tokens) -> dict[str, list[dict]]:
    """{"final": cases}: the lab's simulated timing case once per token count ``T`` of
    ``tokens``, with one row (h = 1: the simulator runs one block, and the kernel launched
    and its argument types do not depend on d or h)."""
    spec = get(lab)
    base = spec.timing_case(True, 0)
    if "T" not in base or "h" not in base:
        raise ValueError(f"{lab}: its cases have no token count T and rows h")
    return {"final": [dict(base, name=f"T = {T}", T=int(T), h=1) for T in tokens]}


def toolchain() -> dict:
    """The versions that decide what ptxas reports: NVVM (the PTX), nvJitLink (its ptxas)."""
    from importlib.metadata import PackageNotFoundError, version

    from cuda.bindings import nvjitlink

    def dist(name):
        try:
            return version(name)
        except PackageNotFoundError:
            return None
    return {"ptxas": "nvJitLink " + ".".join(map(str, nvjitlink.version())),
            "nvidia_nvjitlink": dist("nvidia-nvjitlink"), "nvidia_nvvm": dist("nvidia-nvvm"),
            "numba_cuda": dist("numba-cuda")}


def ptxas_rows(lab: str, tokens=None, ccs=None, notebook=None, timeout: float = 600) -> list[dict]:
    """One row per (kernel, signature, capability) the master launches (``tokens``: only the
    graded function, once per T; its cases otherwise every step's), with ptxas's ``usage``;
    a kernel that does not compile raises."""
    from book.kernels.host.ptx import ptxas_log

    cases = token_cases(lab, tokens) if tokens else None
    got = check([lab], {lab: notebook} if notebook else None, only={"final"} if tokens else None,
                timeout=timeout, ccs=ccs, cases=cases, keep_ptx=True)
    bad = failures(got)
    if bad:
        raise RuntimeError("\n\n".join(r.describe() for r in bad))
    by_case = {c["name"]: c for c in (cases or {}).get("final", ())}
    rows = []
    for r in got:
        arch = f"sm_{r.cc[0]}{r.cc[1]}"
        ok, log = ptxas_log(r.ptx, arch=arch)
        if not ok:
            raise RuntimeError(f"{r.describe()}, but ptxas refuses it for {arch}:\n{log[-3000:]}")
        row = {"step": r.step, "kernel": r.kernel, "cell": r.cell, "case": r.case}
        if r.case in by_case:
            row["T"] = by_case[r.case]["T"]
        rows.append(dict(row, arch=arch, signature=r.signature, **usage(log)))
    return rows


def ptxas_record(lab: str, tokens=None, ccs=None, notebook=None, command=None) -> dict:
    """The rows of ``ptxas_rows`` with provenance: a compile-only fact (no GPU ran anything)."""
    from book.provenance import provenance

    rows = ptxas_rows(lab, tokens, ccs, notebook)
    return {"provenance": provenance(command), "toolchain": toolchain(), "lab": lab,
            "notebook": str(Path(notebook) if notebook else f"solutions/{lab}.ipynb"),
            "function": get(lab).function, "tokens": list(tokens or ()),
            "method": ("the master's graded cells (autograder.master) run in the simulator, "
                       "each launch's kernel and argument types recorded, compiled to PTX by "
                       "numba-cuda with the simulator off (the kernel's own options), then "
                       "assembled by ptxas -v through nvJitLink (book.kernels.host.ptx.ptxas_log); "
                       "compile only: no GPU"),
            "rows": rows}


def main(argv=None) -> int:
    import argparse

    import book  # noqa: F401  (the simulator, decided before numba.cuda is imported)
    from autograder.labs import resolve

    args = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="python -m tools.lab_ptx",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("labs", nargs="*", metavar="LAB[=NOTEBOOK]")
    ap.add_argument("--cc", action="append", default=[], metavar="MAJOR.MINOR",
                    help="compute capability (repeatable; default 9.0)")
    ap.add_argument("--ptxas", action="store_true",
                    help="assemble each kernel with ptxas -v and report its resources")
    ap.add_argument("--T", type=int, nargs="+", dest="tokens", metavar="T",
                    help="with --ptxas: the graded function only, once per token count")
    ap.add_argument("--out", help="with --ptxas: write the record (JSON, with provenance)")
    a = ap.parse_args(args)
    ccs = [tuple(int(v) for v in c.split(".")) for c in a.cc] or None
    labs, notebooks = [], {}
    for arg in a.labs or STAGED:
        name, _, notebook = arg.partition("=")
        lab = resolve(name)
        labs.append(lab)
        if notebook:
            notebooks[lab] = notebook
    if (a.tokens or a.out) and not a.ptxas:
        ap.error("--T and --out go with --ptxas")
    if a.ptxas:
        if len(labs) != 1:
            ap.error("--ptxas takes one lab")
        command = "python -m tools.lab_ptx " + " ".join(args)
        rec = ptxas_record(labs[0], a.tokens, ccs, notebooks.get(labs[0]), command)
        for r in rec["rows"]:
            print(f"{r['arch']} {r['kernel']:<24} {r['case']:<28} {r['registers']:4d} registers "
                  f"{r['stack_frame_bytes']:5d} B stack frame  spills {r['spill_store_bytes']} B "
                  f"stored, {r['spill_load_bytes']} B loaded")
        print(f"(ptxas: {rec['toolchain']['ptxas']})")
        if a.out:
            Path(a.out).write_text(json.dumps(rec, indent=1) + "\n")
            print(f"wrote {a.out}")
        return 0
    results = check(labs, notebooks, ccs=ccs)
    for r in results:
        print(("ok   " if r.ok else "FAIL ") + r.describe())
    return 1 if failures(results) else 0


if __name__ == "__main__":
    sys.exit(main())
