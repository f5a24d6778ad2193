"""A child's recorded launches, seen from the grader: copied out of the child's folder, checked
and summarised.

What the student's function launched during one traced call (the child side,
autograder/sandbox/inside/launches.py, writes it): the compiled images, entry names, grids,
blocks, dynamic shared memory, the order of the launches and what each parameter is. The
recording is read from the child's folder without following links, regular files only, each
size-capped; it is copied into a folder of the grader's own before anything uses it (the
judge's kernel proof, the timer's replay).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

MAX_RECORDING_BYTES = 3 << 30


class RecordingError(Exception):
    """The child's recording is missing, malformed or too large (message for feedback)."""


def _named(rec) -> set[str]:
    """The files a recording's launches.json names (its images and scratch snapshots)."""
    try:
        return ({Path(str(v)).name for v in rec["images"].values()}
                | {Path(str(x["file"])).name for x in rec["scratch"]})
    except (KeyError, TypeError, AttributeError) as e:
        raise RecordingError(f"the recording of your launches is unreadable ({e!r})")


def copy_recording(child_workdir: Path, name: str, dest: Path) -> Path:
    """Copy launches.json and the files it names, nothing else: the submission's code can
    write into its recording folder, and what the grader copies lands in the run's folder
    (a junk file there was copied too, up to the size cap, kept after the run)."""
    src = Path(child_workdir) / Path(str(name)).name
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(src, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as e:
        raise RecordingError(f"the recording of your launches is missing ({e.strerror})")
    total = 0

    def copy(entry: str) -> None:
        nonlocal total
        try:
            f = os.open(entry, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
        except OSError:
            return   # a named file missing: the replay says so
        try:
            st = os.fstat(f)
            if not stat.S_ISREG(st.st_mode):
                return
            total += st.st_size
            if total > MAX_RECORDING_BYTES:
                raise RecordingError("the recording of your launches is larger than 3 GiB")
            with os.fdopen(f, "rb", closefd=False) as fin, open(dest / entry, "wb") as fout:
                shutil.copyfileobj(fin, fout, 1 << 20)
        finally:
            os.close(f)

    try:
        copy("launches.json")
        try:
            rec = json.loads((dest / "launches.json").read_text())
            if not isinstance(rec.get("launches"), list):
                raise ValueError("no list of launches")
        except (OSError, ValueError, AttributeError) as e:
            raise RecordingError(f"the recording of your launches is unreadable ({e})")
        for entry in sorted(_named(rec) - {"launches.json"}):
            if entry and not entry.startswith("."):
                copy(entry)
    finally:
        os.close(fd)
    return dest


def recording_summary(folder: Path) -> dict:
    rec = json.loads((Path(folder) / "launches.json").read_text())
    return {"launches": len(rec["launches"]), "kernels": sorted({L.get("entry") or L.get("code", ["", "", "?"])[2]
                                                                  for L in rec["launches"]})[:8],
            "grids": [[L["grid"], L["block"]] for L in rec["launches"][:8]],
            "scratch_bytes": sum(int(s["size"]) for s in rec["scratch"]), "error": rec.get("error")}
