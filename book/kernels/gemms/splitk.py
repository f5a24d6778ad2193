"""Split-K with the reduction inside the kernel: the last block to arrive finishes the tile.

A GEMV at decode has few outputs (one token: h of them) and a long k-loop (d). When the
output tiles alone are too few blocks to fill the GPU, each tile's k-range is split over
``S`` blocks. Their partial sums must meet before the epilogue (bias, SiLU, the product):
a nonlinear epilogue cannot be applied to partial sums, and a second kernel for it would
cost a launch and a round trip of the partials. So the blocks of a tile meet in the kernel
(the pattern of the CUDA samples' ``threadFenceReduction``):

1. each block writes its partial sums to a workspace ``part`` (float32, its own slot);
2. ``cuda.threadfence()`` makes them visible to every block, then one thread counts the
   arrival on the tile's counter (``cuda.atomic.add``, which returns the count before);
3. the block that sees ``S - 1`` arrivals before its own is the last: it reads the ``S``
   partials back in a fixed order (the same sum on every run: deterministic), resets the
   counter to 0 for the next launch, and runs the epilogue; the others return.

The reads in step 3 go around the L1 cache (:mod:`book.kernels.wide`'s ``load_f32_cg``:
``ld.global.cg``, L2 only): L1 is not coherent between SMs, and a line another block wrote
may sit stale in this SM's L1.
The counters start at zero (:func:`workspace` allocates them zeroed) and every launch leaves
them at zero, so the launch needs no memset: it can be replayed from a CUDA graph as is.
One workspace per launch stream: two launches sharing one at the same time would mix their
partials.

With ``S = 1`` none of this runs (the kernels take a branch on ``S``): the tile's block
finishes alone.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, float32

from ..instructions.wide import load_f32_cg

__all__ = ["last_to_arrive", "fragment_meeting", "workspace", "splits", "Workspace", "device_key"]


@cuda.jit(device=True, inline="always")
def last_to_arrive(count, tile, splits, flag):
    """Steps 2 and 3's decision, for every thread of the block: True in the block that
    arrives last on ``count[tile]`` (which it then resets to 0). Call it after this block's
    partials are written, from every thread (it holds two barriers); ``flag``: a 1-element
    int32 shared array of the block."""
    cuda.threadfence()  # this block's partials are visible before its arrival is counted
    cuda.syncthreads()  # ... every thread's
    if cuda.threadIdx.x == 0:
        before = cuda.atomic.add(count, tile, 1)
        last = before == splits - 1
        flag[0] = 1 if last else 0
        if last:
            count[tile] = 0  # every block of this tile has arrived: ready for the next launch
    cuda.syncthreads()
    return flag[0] != 0


def fragment_meeting(warps: int, values: int, threads: int):
    """``meet(red, part, count, flag, tile, s, S)``, an inline device function for the
    tensor-core GEMVs, whose warps each hold ``values`` accumulators per lane (fragment
    order) for one share of the k-range: called by every thread after each warp has stored
    its accumulators at ``red[warp, v, lane]`` (a shared ``(warps, values, 32)`` float32
    array), it adds the warps' shares into ``red[0]``, and with ``S`` > 1 blocks per tile
    (this one ``s``) meets the tile's other blocks through ``part`` as the module says.
    Returns False in a block that must stop there (not the last of its tile); after True,
    ``red[0]`` holds the tile's sums (a barrier must come before they are read)."""
    WK, V, THREADS = warps, values, threads

    @cuda.jit(device=True, inline="always")
    def meet(red, part, count, flag, tile, s, S):
        tid = cuda.threadIdx.x
        cuda.syncthreads()
        fin = red[0]  # the sums land in warp 0's slots
        for e in range(tid, V * 32, THREADS):
            v, ln = e >> 5, e & 31
            sv = red[0, v, ln]
            for q in range(1, WK):
                sv += red[q, v, ln]
            fin[v, ln] = sv
        if S > 1:  # the last block of the tile to arrive adds the S partials in order
            base = (tile * S + s) * V * 32
            for e in range(tid, V * 32, THREADS):
                part[base + e] = fin[e >> 5, e & 31]
            if not last_to_arrive(count, tile, S, flag):
                return False
            for e in range(tid, V * 32, THREADS):
                sv = float32(0.0)
                for q in range(S):
                    sv += load_f32_cg(part, (tile * S + q) * V * 32 + e)
                fin[e >> 5, e & 31] = sv
        return True

    return meet


def splits(tiles: int, k_pieces: int, want_blocks: int) -> int:
    """How many blocks share one tile's k-range: enough that ``tiles * S`` reaches
    ``want_blocks`` (a few per SM), never more than the ``k_pieces`` there are to share."""
    if tiles <= 0 or k_pieces <= 1 or tiles >= want_blocks:
        return 1
    return max(1, min(k_pieces, -(-want_blocks // tiles)))


class Workspace:
    """A launch's partial-sum slots and arrival counters (zeroed once, left zero by every
    launch). ``part`` holds float32, ``count`` int32."""

    __slots__ = ("part", "count")

    def __init__(self, part_floats: int, counters: int):
        self.part = cuda.device_array(max(1, part_floats), dtype=np.float32)
        self.count = cuda.to_device(np.zeros(max(1, counters), dtype=np.int32))

    def fits(self, part_floats: int, counters: int) -> bool:
        return self.part.size >= part_floats and self.count.size >= counters


_WORKSPACES: dict = {}  # (what, GPU, stream key) -> Workspace, grown when a launch needs more


def device_key():
    """The current GPU's id (None in the simulator): a workspace lives on one GPU, and stream
    0 is every GPU's legacy stream, so the stream alone does not say which."""
    return getattr(cuda.get_current_device(), "id", None)


def workspace(what: str, stream_key, part_floats: int, counters: int) -> Workspace:
    """The workspace of launches of ``what`` on one stream (``stream_key``) of the current
    GPU, at least this large: made once, grown (a new, zeroed one) when a launch needs
    more."""
    key = (what, device_key(), stream_key)
    ws = _WORKSPACES.get(key)
    if ws is None or not ws.fits(part_floats, counters):
        ws = _WORKSPACES[key] = Workspace(part_floats, counters)
    return ws

