"""The dynamic wgmma GEMV's hand-offs (WgmmaGemvTile.dynamic), played out on the CPU.

The kernel cannot run here (Numba's simulator has no wgmma or TMA), and a mistake in its
barriers' phases does not fail on a GPU: it hangs. So this plays the protocol the kernel
follows, role by role, with :class:`book.kernels.instructions.hopper.MbarrierModel` barriers and the
real table (:func:`book.kernels.gemms.stream_k.guided`), under many random interleavings of every
block's four roles and of the copies landing:

- the scheduler (warp 2) queues the block's ranges in a ring of two: its own first, then
  each taken with an atomic on a counter; when none is left it queues -1, and the last
  block to get there sets the counters back to zero;
- the producer takes each range from the queue and fills the ring of stages;
- the consumer takes the same ranges, reads the stages, emits whole tiles and hands each
  seam's piece to the finisher through a ring of four, then a last record of tile -1;
- the finisher counts each piece on its tile's counter and the last piece sums them all,
  in range order.

It checks what a hang or a wrong sum would break: every run ends, every tile is summed once
from its k-blocks in order, every counter is back at zero, and no wait ever looks for a phase
its barrier has already passed twice (which the hardware's parity test cannot tell from one
not yet reached).
"""

import random

import pytest

from book.kernels.instructions.hopper import MbarrierModel
from book.kernels.gemms.stream_k import ENTRY, guided


class Overrun(AssertionError):
    pass


def wait(bar, phase):
    """Yield until phase ``phase`` of ``bar`` has completed (the kernel's mbar_wait with the
    parity of that phase); refuse a wait the hardware's parity test would misread."""
    while True:
        if bar.phase > phase + 1:
            raise Overrun(f"waiting for phase {phase} of a barrier already at {bar.phase}")
        if bar.try_wait(phase & 1) and bar.phase == phase + 1:
            return
        yield


def play(mt, nk, blocks, chunk, pool, stages, seed):
    rng = random.Random(seed)
    t = guided(mt, nk, blocks, chunk, pool)
    R = int(t[0])
    count = [0] * (mt + 2)
    gc = mt
    part = {}
    out = {}
    landing = []  # copies on their way: (block, stage barrier, bytes)

    def entry(r):
        return [int(v) for v in t[1 + ENTRY * r: 4 + ENTRY * r]]

    def block(b):
        full = [MbarrierModel(1) for _ in range(stages)]
        empty = [MbarrierModel(1) for _ in range(stages)]
        rqf = [MbarrierModel(1) for _ in range(2)]
        rqe = [MbarrierModel(129) for _ in range(2)]
        sff = [MbarrierModel(128) for _ in range(4)]
        sfe = [MbarrierModel(1) for _ in range(4)]
        rq = [None, None]
        srec = [None] * 4
        ring = [None] * stages

        def scheduler():
            r, ri = b, 0
            while True:
                qs = ri & 1
                if ri >= 2:
                    yield from wait(rqe[qs], (ri >> 1) - 1)
                if ri >= 1:
                    r = count[gc] + blocks
                    count[gc] += 1
                rq[qs] = (r, *entry(r)) if r < R else (-1, 0, 0, 0)
                rqf[qs].arrive()
                if r >= R:
                    count[gc + 1] += 1
                    if count[gc + 1] == blocks:
                        count[gc] = count[gc + 1] = 0
                    return
                ri += 1
                yield

        def producer():
            s = ri = 0
            uses = [0] * stages
            while True:
                qs = ri & 1
                yield from wait(rqf[qs], ri >> 1)
                r, m, kb, n = rq[qs]
                rqe[qs].arrive()
                if r < 0:
                    return
                ri += 1
                for _ in range(n):
                    if uses[s]:
                        yield from wait(empty[s], uses[s] - 1)
                    ring[s] = (r, m, kb)
                    full[s].arrive(expect_tx=1)
                    landing.append(full[s])
                    uses[s] += 1
                    kb += 1
                    if kb == nk:
                        m, kb = m + 1, 0
                    s = (s + 1) % stages
                    yield

        def consumer():
            s = ri = sc = 0
            uses = [0] * stages
            while True:
                qs = ri & 1
                yield from wait(rqf[qs], ri >> 1)
                r, m0, kb, left = rq[qs]
                for _ in range(128):
                    rqe[qs].arrive()
                if r < 0:
                    break
                ri += 1
                m = m0
                while left > 0:
                    nb = min(nk - kb, left)
                    ks = []
                    for _ in range(nb):
                        yield from wait(full[s], uses[s])
                        assert ring[s] == (r, m, kb + len(ks)), "a stage out of order"
                        ks.append(kb + len(ks))
                        uses[s] += 1
                        empty[s].arrive()
                        s = (s + 1) % stages
                        yield
                    left -= nb
                    kb, mt, m = 0, m, m + 1
                    if nb == nk:
                        assert mt not in out, f"tile {mt} emitted twice"
                        out[mt] = ks
                        continue
                    ss = sc & 3
                    if sc >= 4:
                        yield from wait(sfe[ss], (sc >> 2) - 1)
                    part[2 * r + (0 if mt == m0 else 1)] = ks
                    srec[ss] = mt
                    for _ in range(128):
                        sff[ss].arrive()
                    sc += 1
            ss = sc & 3
            if sc >= 4:
                yield from wait(sfe[ss], (sc >> 2) - 1)
            srec[ss] = -1
            for _ in range(128):
                sff[ss].arrive()

        def finisher():
            sc = 0
            while True:
                ss = sc & 3
                yield from wait(sff[ss], sc >> 2)
                mt = srec[ss]
                sfe[ss].arrive()
                if mt < 0:
                    return
                sc += 1
                p0, p1 = (int(v) for v in t[1 + ENTRY * R + 2 * mt: 3 + ENTRY * R + 2 * mt])
                before = count[mt]
                count[mt] += 1
                if before == p1 - p0:  # the last piece: every piece, in range order
                    count[mt] = 0
                    assert mt not in out, f"tile {mt} summed twice"
                    out[mt] = [k for c in range(p0, p1 + 1)
                               for k in part[2 * c + (0 if mt == t[1 + ENTRY * c] else 1)]]
                yield

        return [scheduler(), producer(), consumer(), finisher()]

    actors = [a for b in range(blocks) for a in block(b)]
    # some roles far slower than the rest (a finisher busy summing, a starved SM): the
    # rings must hold when one side runs far ahead
    weight = {id(a): rng.choice([1.0, 1.0, 1.0, 0.02]) for a in actors}
    steps = 0
    while actors or landing:
        steps += 1
        assert steps < 2_000_000, "no end in sight"
        if landing and (not actors or rng.random() < 0.3):
            landing.pop(rng.randrange(len(landing))).complete_tx(1)
            continue
        a = rng.choices(actors, [weight[id(a)] for a in actors])[0]
        try:
            next(a)
        except StopIteration:
            actors.remove(a)
    return out, count, R


@pytest.mark.parametrize("mt,nk,blocks,chunk,pool,stages", [
    (12, 8, 4, 2, 0.3, 4), (7, 5, 3, 1, 0.5, 2), (20, 4, 6, 3, 0.2, 3), (5, 8, 5, 1, 0.0, 4),
    (9, 6, 2, 2, 0.6, 6)])
@pytest.mark.parametrize("seed", range(8))
def test_every_run_ends_with_each_tile_summed_once_in_k_order(mt, nk, blocks, chunk, pool,
                                                                stages, seed):
    out, count, R = play(mt, nk, blocks, chunk, pool, stages, seed)
    assert R > blocks or pool == 0
    assert sorted(out) == list(range(mt))
    for m, ks in out.items():
        assert ks == list(range(nk)), f"tile {m} summed from k-blocks {ks}"
    assert count == [0] * (mt + 2)


def test_a_wait_for_a_phase_passed_twice_is_caught():
    bar = MbarrierModel(1)
    bar.arrive()
    bar.arrive()
    with pytest.raises(Overrun):
        next(wait(bar, 0))
