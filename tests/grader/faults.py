"""Fault injection for the grader's tests: the failures a grading machine can have that no
submission causes, injected where every child is started and its submission loaded
(``autograder.loading.load``, the one way), never read by the grader's own code.

    python tests/grader/faults.py SPEC grade LAB SUBMISSION... --out DIR [...]

runs ``python -m autograder grade ...`` in this process with SPEC's faults injected. SPEC:
``kind:ID[,ID...]`` parts joined by ``;``. Kinds:

- ``cuda_init``: the submission's first child fails in CUDA initialisation, before any of its
  code runs, as the lab's master did on the H100 beside a disk filler (issue 18); the regrade
  alone runs clean;
- ``cuda_init_always``: every child of the submission fails so (a broken machine).

The injected failure is the child's own ``fatal`` event (``autograder.sandbox``'s
``cuda_init_failure``, what the driver says when ``cuInit`` fails) in place of starting a
child; each is logged in measurements.jsonl as ``fault_injected``. Also used in-process:
``inject(spec)`` patches ``autograder.loading.load`` until ``undo()`` (a pytest fixture can
hold it). tools/grader_report.py's hostile step runs the grader through this file on a GPU.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from autograder import loading  # noqa: E402
from autograder.sandbox import cuda_init_failure  # noqa: E402

KINDS = ("cuda_init", "cuda_init_always")
# what failed on the H100 (issue 18), as numba-cuda raised it
H100_ERROR = ("[CUDA_ERROR_OPERATING_SYSTEM] Call to cuDevicePrimaryCtxRetain results in "
              "CUDA_ERROR_OPERATING_SYSTEM (get_primary_context; injected by tests/grader/faults.py)")


def parse(spec: str) -> dict[str, str]:
    """{submission id: kind} from SPEC; an unknown kind is an error naming the known ones."""
    out = {}
    for part in filter(None, (p.strip() for p in spec.split(";"))):
        kind, _, ids = part.partition(":")
        if kind not in KINDS:
            raise SystemExit(f"faults.py: unknown fault {kind!r} (known: {', '.join(KINDS)})")
        out.update({i: kind for i in ids.split(",") if i})
    return out


class Injection:
    """``loading.load`` patched: a listed submission's start fails as its kind says."""

    def __init__(self, spec: str):
        self.faults = parse(spec)
        self.lock = threading.Lock()
        self.real = loading.load
        loading.load = self.load

    def load(self, ctx, cells, gpu, *, who=None, **kw):
        with self.lock:
            kind = self.faults.get(who)
            if kind == "cuda_init":   # once: the regrade alone runs clean
                del self.faults[who]
        if kind is None:
            return self.real(ctx, cells, gpu, who=who, **kw)
        ctx.log(kind="fault_injected", id=who, fault=kind)
        ev = cuda_init_failure(RuntimeError(H100_ERROR))
        return loading.FailedBeforeCode(None, stage=ev["stage"], message=ev["error"])

    def undo(self) -> None:
        loading.load = self.real


def inject(spec: str) -> Injection:
    return Injection(spec)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        raise SystemExit(__doc__)
    inject(argv[0])
    from autograder.__main__ import main as autograder_main

    return autograder_main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
