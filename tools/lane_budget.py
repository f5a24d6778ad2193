"""A pytest plugin for the GPU lane's time budget (``python -m tools.gpu_tests --budget S``).

A device call has a hard limit; a test killed by it writes no report, and everything the call
had passed is lost with it (seen: two grader files killed at their limit, eight and four tests
passed, nothing recorded). With this plugin pytest stops *before* a test it does not expect to
finish by the deadline, exits as interrupted, and writes its JUnit report with what ran; the
tests it did not start are written, one node id a line, to the file ``GPU_LANE_LEFT`` names, so
the next call can run just those (``--continue RECORD``).

Its estimate of a test's time is the longest test so far in this process (setup, call and
teardown): a module's first test, which pays for its fixtures, makes it cautious, never late.
Loaded by ``-p tools.lane_budget``; without ``GPU_LANE_DEADLINE`` (seconds since the epoch) it
does nothing.
"""

from __future__ import annotations

import os
import time

import pytest

_last_start: list[float] = []   # when this process's previous test began (none yet: empty)
_longest = [0.0]


def deadline() -> float | None:
    v = os.environ.get("GPU_LANE_DEADLINE")
    return float(v) if v else None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    end, now = deadline(), time.time()
    if _last_start:
        _longest[0] = max(_longest[0], now - _last_start[0])
    _last_start[:] = [now]
    if end is None or now + _longest[0] <= end:
        return None                         # run it as usual
    items = item.session.items
    left = items[items.index(item):]
    path = os.environ.get("GPU_LANE_LEFT")
    if path:
        with open(path, "w") as f:
            f.write("".join(f"{i.nodeid}\n" for i in left))
    item.session.shouldstop = (f"the lane's time budget: {len(left)} test(s) not started "
                               f"(the longest so far took {_longest[0]:.0f} s)")
    return True                             # handled: not run, and the session stops here
