"""Budgets: what a submission's processes hold together, metered by the child's watchdog
(host memory from /proc; GPU memory from NVML, gpuwatch.py), which stops the submission the
moment one is over, saying which, by how much and what to do."""

from __future__ import annotations

import os

GPU_BUDGET_FRACTION = 0.25   # default per submission: 3 workers per GPU and the reference fit


def host_memory(pids) -> int:
    """Resident host memory of these processes, summed. One process: its RSS. Several: their
    proportional set sizes (a page shared by a fork counts once, split between them)."""
    pids = list(pids)
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    for p in pids:
        got = None
        if len(pids) > 1:
            try:
                with open(f"/proc/{p}/smaps_rollup") as f:
                    for line in f:
                        if line.startswith("Pss:"):
                            got = int(line.split()[1]) * 1024
                            break
            except OSError:
                pass
        if got is None:
            try:
                with open(f"/proc/{p}/statm") as f:
                    got = int(f.read().split()[1]) * page
            except (OSError, IndexError, ValueError):
                got = 0
        total += got
    return total


def gpu_memory(pids) -> int:
    """Device memory held by these processes on any GPU, from NVML (gpuwatch)."""
    from autograder import gpuwatch

    return gpuwatch.used_by(pids)


class Budget:
    """A limit on what a submission's processes hold together. ``meter(pids) -> bytes``;
    the watchdog stops the submission the first time the sum is over ``limit``."""

    def __init__(self, name: str, limit: int, meter, advice: str, held: str = ""):
        self.name, self.limit, self.meter, self.advice = name, int(limit), meter, advice
        self.held = held    # how the meter counts, for the message ("resident", "(NVML)")
        self.peak = 0

    def over(self, pids) -> str | None:
        used = self.meter(pids)
        self.peak = max(self.peak, used)
        if used <= self.limit:
            return None
        return (f"{self.name} budget exceeded: the submission's {len(pids)} process(es) held "
                f"{used / 2**20:.0f} MiB{' ' + self.held if self.held else ''}, "
                f"{(used - self.limit) / 2**20:.0f} MiB over its budget of "
                f"{self.limit / 2**20:.0f} MiB. {self.advice}")


HOST_ADVICE = ("Allocate only the arrays your function needs, free large temporaries, and do not "
               "start other processes: every process your code starts counts against this budget.")
GPU_ADVICE = ("Allocate device arrays only for what your kernel needs, inside your function, and "
              "let them go when it returns; do not reserve GPU memory at import time. The other "
              "submissions graded on this GPU at the same time need the rest.")


def default_budgets(limits: dict, gpu: int | None, simulated: bool) -> list[Budget]:
    """Host memory always (limits['mem_bytes']); GPU memory where NVML answers and the child
    has a GPU (limits['gpu_mem_bytes'], default GPU_BUDGET_FRACTION of the device)."""
    budgets = [Budget("host memory", limits["mem_bytes"], host_memory, HOST_ADVICE, "resident")]
    if gpu is not None and not simulated:
        from autograder import gpuwatch

        if gpuwatch.available():
            cap = limits.get("gpu_mem_bytes")
            if cap is None:
                try:
                    cap = int(gpuwatch.memory(gpu)[1] * GPU_BUDGET_FRACTION)
                except Exception:  # NVML does not know this index: no GPU budget (report() shows)
                    return budgets
            budgets.append(Budget("GPU memory", cap, gpu_memory, GPU_ADVICE, "of device memory (NVML)"))
    return budgets
