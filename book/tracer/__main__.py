"""``python -m book.tracer RESULT``: the simulator process a GPU session traces in
(:mod:`book.tracer.child` starts it): the job on stdin, its trace into RESULT."""

import sys
from pathlib import Path

from .model import TracerError
from .recorder import trace, trace_call


def main() -> int:
    """Run the pickled job on stdin, write its trace to RESULT."""
    import importlib
    import pickle

    job = pickle.loads(sys.stdin.buffer.read())
    try:
        if job["what"] == "kernel":
            kernel = getattr(importlib.import_module(job["module"]), job["attr"])
            t = trace(kernel, job["grid"], job["block"], *job["args"],
                      names=job["names"], shared_bytes=job["shared_bytes"],
                      max_threads=job["max_threads"], timeout_s=job["timeout_s"],
                      max_accesses=job["max_accesses"])
        else:
            t = trace_call(job["fn"], *job["args"], names=job["names"],
                           max_threads=job["max_threads"], timeout_s=job["timeout_s"],
                           max_accesses=job["max_accesses"], **job["kwargs"])
    except TracerError as exc:
        print(exc, file=sys.stderr)
        return 1
    Path(sys.argv[1]).write_bytes(pickle.dumps({"trace": t, "args": job["args"]}))
    return 0


sys.exit(main())
