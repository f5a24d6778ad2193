"""Run a program under NVIDIA's compute-sanitizer and say what it found, in the student's terms.

Taught in chapter 7 (the shared-memory tile and its ``syncthreads``) and used by the labs'
``check(..., sanitize=True)``.

Some kernel bugs give the right answer by luck: a missing ``cuda.syncthreads()`` between
filling a shared tile and reading it is a *race* that the scheduler usually wins; a read one
element past the end of an array usually lands in memory that happens to exist. The values
come out right, and the bug waits for another GPU or another size. ``compute-sanitizer``
watches every access at run time: ``memcheck`` reports out-of-bounds and misaligned accesses,
``racecheck`` reports shared-memory hazards between threads of a block, ``synccheck`` a barrier
that not every thread of a block reaches. (racecheck watches shared memory only: a race between
blocks on a word of global memory, a split-K counter say, is not among what it reports.)

:func:`run` runs a command under each tool (kernels compiled with line information, so a
report names a source line), :func:`parse` turns the tool's text into :class:`Finding` objects
and :func:`explain` keeps the findings in the files you name (the student's own) and words
each as one sentence. Where the tool is missing or refuses the GPU (no GPU, the simulator, a
machine without the CUDA toolkit) :class:`Unavailable` says "not available on this machine"
and why.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Finding", "Unavailable", "find", "command", "run", "parse", "explain", "unshown",
           "TOOLS", "TIMEOUT_S"]

TOOLS = ("memcheck", "racecheck", "synccheck")
#: Seconds compute-sanitizer may take over a lab's public tests (it slows kernels, and their
#: compile, down a lot): run()'s default per tool; the one figure for the autograder's
#: sanitizer budgets (check()'s feedback, grade --sanitize) to take
TIMEOUT_S = 300.0
PRINT_LIMIT = 20   # reports printed per tool; the tool's summary still counts them all
#: Bytes memcheck pads after every allocation (``--padding``). The CUDA allocator packs small
#: allocations back to back: a read just past the end of one array lands inside the next and
#: is no error to memcheck unless the tool leaves room after each allocation.
PADDING_BYTES = 1 << 16
_PREFIX = "========= "


def command(tool: str) -> list[str]:
    """compute-sanitizer's flags for ``tool``, the one definition that ``run`` and the grader's
    sandbox (``autograder.sanitize.wrapper_argv``) use: at most PRINT_LIMIT reports, no host
    backtraces, racecheck's hazards only, memcheck's padding after every allocation
    (PADDING_BYTES), and no CUDA API errors. Numba probes the driver's entry points as it starts
    (34 "Program hit CUDA_ERROR_INVALID_VALUE ... cuGetProcAddress" reports on the H100): a note
    about the driver, never the student's error; printed, they used up the 20 reports before an
    out-of-bounds store of a hostile lab-2 fixture, and the store went unreported
    (records/sanitizer/hostile_h100.json). ``parse`` never makes a finding of one either."""
    return ["--tool", tool, "--print-limit", str(PRINT_LIMIT), "--show-backtrace", "no",
            "--report-api-errors", "no",
            *(["--racecheck-report", "hazard"] if tool == "racecheck" else []),
            *(["--padding", str(PADDING_BYTES)] if tool == "memcheck" else [])]


class Unavailable(RuntimeError):
    """compute-sanitizer cannot run here; the message says why."""


@dataclass(frozen=True)
class Finding:
    tool: str            # memcheck, racecheck or synccheck
    what: str            # the tool's headline, e.g. "Invalid __global__ write of size 4 bytes"
    kernel: str | None
    file: str | None
    line: int | None
    detail: str          # the rest of the report (thread, block, address, the other access)
    # What the report says, field by field (None where it does not say it):
    kind: str | None = None       # memcheck: "read"/"write"/"misaligned"/...; racecheck: "RAW",
    #                               "WAR", "WAW"; synccheck: "barrier"; None: no pattern for it
    space: str | None = None      # the memory: "global", "shared", "local"
    size: int | None = None       # bytes of the access (memcheck)
    thread: str | None = None     # "(0,0,0)": the thread that made the access (racecheck: the
    block: str | None = None      # first of the two), and its block
    address: int | None = None    # the address accessed (memcheck)
    nearest: tuple | None = None  # (base, bytes) of the allocation nearest to it (memcheck)
    warp_level: bool = False      # racecheck: "(Warp Level Programming)", two threads of a warp
    accesses: tuple = ()          # racecheck: ((read/write, thread, file, line), ...)

    def sentence(self) -> str:
        if self.file is None and self.kernel is None and not self.detail:
            return f"{self.tool} said: {self.what}"  # kept as printed (no pattern for it)
        where = f"{Path(self.file).name}, line {self.line}" if self.file else "a kernel"
        if self.tool == "racecheck":
            return (f"racecheck: {self.what} at {where} ({self.detail}): threads of one block "
                    "touch the same shared-memory word with no cuda.syncthreads() between them")
        if self.tool == "synccheck":
            return (f"synccheck: {self.what} at {where} ({self.detail}): a cuda.syncthreads() "
                    "that not every thread of the block reaches")
        return f"memcheck: {self.what} at {where} ({self.detail})" if self.detail else \
            f"memcheck: {self.what} at {where}"


def find() -> str | None:
    """The compute-sanitizer executable, or None."""
    exe = shutil.which("compute-sanitizer")
    if exe:
        return exe
    for root in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if root and (Path(root) / "bin" / "compute-sanitizer").exists():
            return str(Path(root) / "bin" / "compute-sanitizer")
    return None


def refusal_reason(text: str) -> str | None:
    """The line of compute-sanitizer's output that says it could not run here (no supported
    device, no injection library...), or None when it ran."""
    for pat in ("Device not supported", "No CUDA-capable device", "no CUDA-capable device",
                "Target application terminated before first instrumented API call",
                "Unable to find injection library", "LibraryNotLoaded"):
        if pat in text:
            return pat
    return None


# "at <kernel signature, spaces and all>+0x1a0 in file.py:12"
_AT = re.compile(r"at (?P<kernel>.+?)\+0x[0-9a-f]+(?: in (?P<file>\S+?):(?P<line>\d+))?\s*$")


def _short(kernel: str | None) -> str | None:
    """``__main__::reverse_tile`` from Numba's mangled, templated kernel name."""
    if not kernel:
        return None
    return re.split(r"\[abi:|\(", kernel, maxsplit=1)[0]


def _at(line: str):
    m = _AT.search(line)
    if not m:
        return None, None, None
    return _short(m.group("kernel")), m.group("file"), \
        int(m.group("line")) if m.group("line") else None


_INT = r"(0x[0-9a-fA-F]+|[\d,]+)"


def _int(s: str) -> int:
    return int(s, 16) if s.lower().startswith("0x") else int(s.replace(",", ""))


def _thread_block(body) -> tuple[str | None, str | None]:
    for b in body:
        m = re.search(r"by thread (\([^)]*\)) in block (\([^)]*\))", b)
        if m:
            return m.group(1), m.group(2)
    return None, None


def _memory_facts(head, body) -> dict:
    """memcheck's fields: the access's kind, space and size, the address, the nearest
    allocation ("and is 1 bytes after the nearest allocation at 0x.. of size 1,024 bytes")."""
    out = {}
    m = re.match(r"Invalid __(\w+)__ (read|write|atomic)\w* of size (\d+) bytes?", head)
    if m:
        out.update(space=m.group(1), kind="write" if m.group(2) == "atomic" else m.group(2),
                   size=int(m.group(3)))
    elif head.startswith("Misaligned "):
        m = re.match(r"Misaligned (?:Shared or Local )?(?:__(\w+)__ )?\w*", head)
        out.update(kind="misaligned", space=m.group(1) if m and m.group(1) else None)
    elif head.startswith(("Out-of-range ", "Uninitialized ")):
        out.update(kind=head.split()[0].lower())
    out["thread"], out["block"] = _thread_block(body)
    for b in body:
        a = re.search(r"(?:Access to|Address) " + _INT + r" is", b)
        if a:
            out["address"] = _int(a.group(1))
        n = re.search(r"nearest allocation at " + _INT + r" of size " + _INT + r" bytes?", b)
        if n:
            out["nearest"] = (_int(n.group(1)), _int(n.group(2)))
    return out


def parse(tool: str, text: str) -> list[Finding]:
    """Findings in compute-sanitizer's output (lines that begin with ``=========``).

    memcheck: ``Invalid __global__ write of size 4 bytes`` followed by indented ``at KERNEL+0x..
    in FILE:LINE``, ``by thread (x,y,z) in block (x,y,z)`` and the address; racecheck:
    ``Error: Potential WAR hazard detected at __shared__ 0x.. in block (..) :`` followed by the
    two accesses (``Read Thread (..) at .. in FILE:LINE``, ``Write Thread ..``); synccheck:
    ``Barrier error detected. Divergent thread(s) in block`` followed by where and by which
    thread. A CUDA API error (``Program hit CUDA_ERROR_... on CUDA API call to
    cuGetProcAddress``: Numba probing the driver as it starts) is never a finding.
    """
    lines = [ln[len(_PREFIX):] if ln.startswith(_PREFIX) else None for ln in text.splitlines()]
    findings, i = [], 0
    while i < len(lines):
        ln = lines[i]
        i += 1
        if ln is None:
            continue
        head = ln.strip()
        body = []
        while i < len(lines) and lines[i] is not None and lines[i].startswith("    "):
            body.append(lines[i].strip())
            i += 1
        if tool == "racecheck":
            # CUDA 13's racecheck may qualify a hazard: "Warning: (Warp Level Programming)
            # Potential WAR hazard ..." (two threads of one warp); it is still the student's race
            m = re.match(r"(?:Error|Warning): (?:\([^)]*\) )?Potential (\w+) hazard detected "
                         r"at __shared__ (0x[0-9a-f]+) in block \(([^)]*)\)", head)
            if not m:
                _unknown(tool, head, findings)
                continue
            accesses = []
            for b in body:
                a = re.match(r"(Read|Write) Thread \(([^)]*)\) (at .*)", b)
                if a:
                    kernel, file, line = _at(a.group(3))
                    accesses.append((a.group(1).lower(), a.group(2), kernel, file, line))
            first = accesses[0] if accesses else (None, None, None, None, None)
            detail = ", ".join(f"{kind} by thread ({t}) at line {ln_}"
                               for kind, t, _k, _f, ln_ in accesses)
            findings.append(Finding(
                tool, f"{m.group(1)} hazard on shared memory", first[2], first[3], first[4],
                detail, kind=m.group(1), space="shared",
                thread=f"({first[1]})" if first[1] is not None else None,
                block=f"({m.group(3)})", warp_level="Warp Level" in head,
                accesses=tuple((k, f"({t})", f, ln_) for k, t, _kern, f, ln_ in accesses)))
            continue
        if head.startswith("Program hit "):   # a CUDA API error: the driver's, not a finding
            continue
        if tool == "synccheck" and re.match(r"(?:Error: )?\w*\s*[Bb]arrier error", head):
            kernel, file, line = _where(body)
            thread, block = _thread_block(body)
            detail = "; ".join(b for b in body if b.startswith("by thread"))
            findings.append(Finding(tool, head, kernel, file, line, detail, kind="barrier",
                                    thread=thread, block=block))
            continue
        if head.startswith(("Invalid ", "Misaligned ", "Out-of-range ", "Uninitialized ")):
            kernel, file, line = _where(body)
            detail = "; ".join(b for b in body if b.startswith(("by thread", "Access to",
                                                                "Address", "and is")))
            findings.append(Finding(tool, head, kernel, file, line, detail,
                                    **_memory_facts(head, body)))
            continue
        _unknown(tool, head, findings)
    return findings


def _where(body):
    """(kernel, file, line) of the first ``at ...`` line of a report's body."""
    for b in body:
        if b.startswith("at "):
            return _at(b)
    return None, None, None


def _unknown(tool, head, findings):
    """An error or warning this parser has no pattern for is kept as it was printed: output
    the tool flagged must never read as "no findings" (a new racecheck wording once did)."""
    if head.startswith(("Error:", "Warning:")):
        findings.append(Finding(tool, head, None, None, None, ""))


def run(argv: list[str], tools=TOOLS, timeout: float = TIMEOUT_S, env: dict | None = None,
        cwd=None) -> dict:
    """Run ``argv`` once under each tool; ``{tool: {"findings": [...], "output": text}}``.

    Kernels are compiled with debug line information (``NUMBA_CUDA_DEBUGINFO=1``) so that a
    finding names its source line. Raises :class:`Unavailable` when the tool is missing or
    refuses this machine.
    """
    exe = find()
    if exe is None:
        raise Unavailable("compute-sanitizer is not available on this machine (it comes with "
                          "the CUDA toolkit, on a machine with an NVIDIA GPU); the kernels' "
                          "values were still checked")
    full_env = dict(os.environ if env is None else env, NUMBA_CUDA_DEBUGINFO="1")
    out = {}
    for tool in tools:
        cmd = [exe, *command(tool), *argv]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                               env=full_env, cwd=cwd)
        except subprocess.TimeoutExpired as exc:
            raise Unavailable(f"compute-sanitizer --tool {tool} did not finish within "
                              f"{timeout:.0f} s (the tool slows kernels down a lot: check a "
                              "smaller input)") from exc
        text = p.stdout + p.stderr
        why = refusal_reason(text)
        if why:
            raise Unavailable(f"compute-sanitizer is not available on this machine: it refused "
                              f"to run ({why})")
        out[tool] = {"findings": parse(tool, text), "output": text, "returncode": p.returncode}
    return out


def unshown(tool: str, text: str, findings) -> str | None:
    """A sentence when the tool counted more than it printed as ``findings``, else None: a
    report cut by the print limit (or printed in a form the parser does not know) must never
    read as "no findings"."""
    if tool in ("memcheck", "synccheck"):
        m = re.search(r"ERROR SUMMARY: (\d+) errors?", text)
        if not m:
            return None
        # "Program hit ..." lines are CUDA API errors (reported only by an older command line)
        n, api = int(m.group(1)), text.count("Program hit ")
        if n <= len(findings) + api:
            return None
        if findings:
            return f"{tool}: {n - api} errors in all ({len(findings)} shown)"
        what = ("memory accesses" if tool == "memcheck" else "barriers")
        return (f"{tool}: {n - api} errors counted but not printed (the tool prints at most "
                f"{PRINT_LIMIT} reports): {what} it flagged that are not shown here; "
                "check(fn, sanitize=True) on a GPU lists them")
    if tool == "racecheck":
        m = re.search(r"RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?", text)
        if m and int(m.group(2)) > int(m.group(1)):
            return f"racecheck: {m.group(2)} hazards in all ({m.group(1)} shown)"
    return None


def explain(results: dict, own_files=None, limit: int = 5) -> list[str]:
    """One sentence per distinct finding, those in ``own_files`` (paths or names) first and
    only, when given; at most ``limit``; then, for a tool whose ``output`` counts more than
    it printed, one sentence that says so (never cut by ``limit``)."""
    own = {Path(f).name for f in own_files} if own_files else None
    seen, out = set(), []
    for tool in results:
        for f in results[tool]["findings"]:
            # another file's finding is not the student's; one with no place is kept (unknown)
            if own is not None and f.file is not None and Path(f.file).name not in own:
                continue
            key = (f.tool, f.what, f.file, f.line)
            if key in seen:
                continue
            seen.add(key)
            out.append(f.sentence())
    notes = [unshown(tool, r.get("output", ""), r["findings"]) for tool, r in results.items()]
    return out[:limit] + [n for n in notes if n]
