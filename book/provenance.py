"""Provenance of a measurement: which GPU, driver, versions, date, command and commit produced it.

Every record the course commits (benchmark data, chapter recordings, grader reports, profiler
captures) carries ``provenance(command)``: one definition, so the records can be compared field by
field. It never raises: a field that cannot be read is ``None``.

The commit: a device machine gets a copy of the working tree without ``.git``, so the command
that runs there passes it in ``COURSE_COMMIT`` (``COURSE_COMMIT=$(git rev-parse HEAD) python ...``
written out here before the call); otherwise ``git rev-parse HEAD`` is asked.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent


def _run(cmd: list[str]) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30, cwd=_ROOT)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def _dist_version(dist: str) -> str | None:
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # pragma: no cover
        return None
    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def commit() -> str | None:
    """The course commit that produced a record (``COURSE_COMMIT``, else git)."""
    return os.environ.get("COURSE_COMMIT") or _run(["git", "rev-parse", "HEAD"])


def provenance(command: str | None = None) -> dict:
    """GPU, driver, toolkit and package versions, UTC date, command line and commit.

    ``command`` defaults to this process's own command line.
    """
    from . import gpu   # (its package, book, decided GPU or simulator on import)

    rec: dict = {"simulated": gpu.SIMULATED}
    try:
        info = gpu.device_info()
        rec.update(gpu=info.name, sm_count=info.sm_count,
                   compute_capability=list(info.compute_capability or ()) or None,
                   peak_bandwidth=info.peak_bandwidth, l2_bytes=info.l2_bytes)
    except Exception as exc:  # simulator or a broken driver: say so, keep going
        rec.update(gpu=None, device_error=f"{type(exc).__name__}: {exc}")
    dv = gpu.driver_cuda_version()
    rec["driver"] = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    rec["driver_cuda"] = ".".join(map(str, dv)) if dv else None
    try:
        import torch

        rec["cuda"], rec["torch"] = torch.version.cuda, torch.__version__
    except ImportError:
        rec["cuda"], rec["torch"] = None, None
    for mod in ("numba", "numpy"):
        try:
            rec[mod] = __import__(mod).__version__
        except ImportError:
            rec[mod] = None
    rec["numba_cuda"] = _dist_version("numba-cuda")
    rec["python"] = platform.python_version()
    rec["host_cpus"] = os.cpu_count()
    rec["date"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    rec["command"] = command if command is not None else " ".join(
        ["python", *([f"-m {sys.modules['__main__'].__spec__.name}"]
                     if getattr(sys.modules.get("__main__"), "__spec__", None) else sys.argv[:1]),
         *sys.argv[1:]])
    rec["commit"] = commit()
    from . import target

    if target.forced_cc():  # the T4 switch was on: the run took another GPU's paths
        rec["target_cc"] = ".".join(map(str, target.forced_cc()))
    return rec


_PATH = re.compile(r"(?<![\w.])/(?:[^\s/:]+/)+([^\s/:]+)")


def without_paths(command: str | None) -> str | None:
    """``command`` as a page may print it: every absolute path cut to its file name.

    A record's command names where the device machine wrote its output (``--out
    /root/out/h100.json``); that folder exists only there, so a reader is shown the file's
    name (``--out h100.json``), not a path on a machine they never see."""
    return None if command is None else _PATH.sub(r"\1", command)

