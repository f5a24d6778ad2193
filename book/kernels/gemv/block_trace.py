"""A traced wgmma GEMV's timeline (``WgmmaGemvTile.trace``): what each block stamps, and the
host-side reader of the stamps.

A traced block writes one int32 per event after the seams' counters (``count[mt + len(
TRACE_EVENTS) * block + event]``): times as the low 32 bits of ``%globaltimer`` (ns, one clock
for every SM, so blocks compare), sums of ns, and the SM it ran on. ``benchmarks/weight_stream.py``
prints them (and the retired sm_balance.py did); records/bench/README.md keeps what they found.
"""

from __future__ import annotations

import numpy as np

__all__ = ["TRACE_EVENTS", "RAW_EVENTS", "timeline", "traced_runs"]

#: what a traced block (``WgmmaGemvTile.trace``) writes, one int32 each: the low 32 bits of
#: ``%globaltimer`` (ns) at its start, its first copy, its first landed stage, its last
#: k-block's wgmma done, its consumer's end, the last copy; the ns its consumer spent
#: handing its pieces over at seams, the ns its finisher warp spent counting and summing
#: them; the finisher's end; the SM the block ran on (``%smid``: is a slow block a slow SM?);
#: the ns its consumer waited for stages to land, and its producer for stages to be handed
#: back (which side of the ring waits for the other)
TRACE_EVENTS = ("start", "first_copy", "first_landed", "last_wgmma", "end", "last_copy",
                "meet_ns", "sum_ns", "finisher_end", "smid", "starved_ns", "blocked_ns")
#: the events that are not times: read back as written
RAW_EVENTS = ("meet_ns", "sum_ns", "smid", "starved_ns", "blocked_ns")


def timeline(counts: np.ndarray, mt: int, blocks: int) -> dict:
    """A traced launch's timeline (``WgmmaGemvTile.trace``) from its counters array copied
    to the host: ``{event: int64 [blocks]}``, times in ns from the earliest block's start
    (the 32-bit stamps unwrapped against it: a launch is far shorter than 4 s); the
    :data:`RAW_EVENTS` (sums in ns, the SM) as written."""
    raw = np.asarray(counts[mt: mt + len(TRACE_EVENTS) * blocks], dtype=np.int64)
    raw = (raw & 0xFFFFFFFF).reshape(blocks, len(TRACE_EVENTS))
    # signed distances from block 0's start, then from the earliest start
    rel = (raw - raw[0, 0] + (1 << 31)) % (1 << 32) - (1 << 31)
    first = rel[:, 0].min()
    return {e: raw[:, i] if e in RAW_EVENTS else rel[:, i] - first
            for i, e in enumerate(TRACE_EVENTS)}


def traced_runs(launch, rows_of_tiles: int, times: int) -> list[dict]:
    """Launch a traced wgmma GEMV (``decode_mlp.prepare("hopper_gemv", ..., tile=`` a tile
    with ``trace``) ``times`` times, each alone (the GPU idle before it); the
    :func:`timeline` of each. ``rows_of_tiles``: the row tiles (ceil(h / 64)), where the
    stamps begin in the counters (the kernel's argument 6). The counters are zeroed before
    each launch: traced launches of other shapes share them and leave their stamps."""
    from numba import cuda

    count = launch.args[6]
    zeros = np.zeros(count.shape, dtype=count.dtype)
    out = []
    for _ in range(times):
        count.copy_to_device(zeros)
        launch.launch()
        cuda.synchronize()
        out.append(timeline(count.copy_to_host(), rows_of_tiles, launch.grid))
    return out
