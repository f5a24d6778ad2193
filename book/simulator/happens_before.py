"""The happens-before analysis of one simulated launch's accesses (book/simulator/hazard_recorder.py
records them): which accesses race, which barrier diverged, which reads fell outside an array,
and each finding in the student's words.

The model, as the course teaches it (chapter 7's split-K, lab 6's last block):

- within a block, a thread's accesses in program order, and every access before a
  ``cuda.syncthreads()`` before every access after it (an access's *epoch* is how many
  barriers its thread has passed);
- across blocks, only through atomics: an atomic of block A on a word *releases* what A did
  before it (its plain writes only once a ``cuda.threadfence()`` follows them, by the writer or
  after a barrier; its reads and atomics as they are), and every later atomic of another block
  on the same word *acquires* all that, and all A had acquired itself, for whatever that block
  does after it (its plain reads too). Launches are ordered one after the other.

Two accesses of different blocks to one global word race when at least one is a plain write
and neither is known to the other so; an atomic that adds zero (a coherent read) conflicts with
plain writes only. Two accesses of different warps of one block to a shared word race when one
is a plain write and they are in the same epoch. The pass is over the events in the order they
happened: deterministic whatever Python's thread schedule, since what one block may know of
another is decided by atomics, which the simulator runs one at a time and the blocks' order
(book/simulator/scheduler.py), which is seeded.

Knowledge of another block's events is a *cut* (:class:`_Cut`): its events of an epoch below
``E``, and thread t's up to its event ``s[t]``: a down-set of that block's order, which is what
"everything before this atomic" is. A word's accesses are kept compactly (the latest of each
block, thread, epoch and kind: all a later access needs compared), and the analysis is bounded
(``Recorder.max_checks`` steps: comparisons, and merges of what blocks know); past it, it stops,
says so, and reports only what it had found.
"""

from __future__ import annotations

import bisect
import linecache
import os
import re
import sys

import numpy as np

# the events book/simulator/hazard_recorder.py records, each (kind, byte address, block, thread, epoch, site,
# space): a plain read, a plain write, an atomic (read-modify-write), an atomic that adds zero
# (a coherent read), a fence; in global or shared memory
R, W, A, AR, F = 0, 1, 2, 3, 4
GLOBAL, SHARED = 0, 1
KIND_WORD = {R: "read", W: "written", A: "updated by an atomic", AR: "read by an atomic"}


def analyse(rec, L: dict) -> None:
    """Everything one launch's events show (``L``: the launch as the recorder kept it), added
    to ``rec``'s findings."""
    ev = L["events"]
    if ev:
        E = np.array(ev, dtype=np.int64)   # columns: kind, address, block, thread, epoch, site, space
        _shared_races(rec, L, E)
        _global_races(rec, L, ev, E)
    _barriers(rec, L)
    _reads_past(rec, L)


def _shared_words(E, by, unit):
    """Rows of ``E`` whose word (the columns ``by``) is used by two ``unit``s or more (warps,
    blocks), at least once by a plain write: the only words that can race (NumPy, so that a
    launch's many race-free words cost little)."""
    if not len(E):
        return E[:0]
    keys = [E[:, c] for c in reversed(by)]
    order = np.lexsort(keys)
    S = E[order]
    same = np.ones(len(S), dtype=bool)   # a row whose word is the previous row's
    same[0] = False
    for c in by:
        same[1:] &= S[1:, c] == S[:-1, c]
    group = np.cumsum(~same) - 1
    n = group[-1] + 1
    u = unit(S)
    lo = np.full(n, np.iinfo(np.int64).max)
    hi = np.full(n, np.iinfo(np.int64).min)
    np.minimum.at(lo, group, u)
    np.maximum.at(hi, group, u)
    wrote = np.zeros(n, dtype=bool)
    np.logical_or.at(wrote, group, S[:, 0] == W)
    keep = (lo != hi) & wrote
    rows = order[keep[group]]
    return np.sort(rows)   # in the order they happened


def _where(code, line: int) -> str:
    """The student's words for a line of code: "cell 4, line 12" for the grader's cells,
    "In [4], line 12" in a notebook, "file.py, line 12" for a file."""
    if not line or code is None:
        return ""
    fname = code.co_filename
    m = re.fullmatch(r"<cell (\d+)>", fname)
    if m:
        return f"cell {m.group(1)}, line {line}"
    ipy = sys.modules.get("IPython")
    if ipy is not None:
        try:
            shell = ipy.get_ipython()
            n = shell.compile._filename_map.get(fname) if shell is not None else None
        except Exception:
            n = None
        if n is not None:
            return f"In [{n}], line {line}"
    if fname.startswith("<"):
        return f"line {line}"
    return f"{os.path.basename(fname)}, line {line}"


def _source(code, line: int) -> str:
    if code is None or not line:
        return ""
    text = linecache.getline(code.co_filename, line).strip()
    if "#" in text and "'" not in text and '"' not in text:
        text = text.split("#")[0].rstrip()   # an inline comment is not the code
    return f"`{text[:60]}`" if text else ""


def line_at(code, lasti: int) -> int:
    """The source line of the instruction at byte offset ``lasti`` of ``code`` (a frame's
    ``f_lasti``, which may point into an instruction's inline cache: the same line)."""
    if code is None or lasti is None or lasti < 0:
        return 0
    got = _LINES.get((id(code), lasti))
    if got is None:
        got = 0
        for start, end, line in code.co_lines():
            if start <= lasti < end:
                got = line or 0
                break
        _LINES[(id(code), lasti)] = got
    return got


_LINES: dict = {}


def _site_lines(L, site):
    """(the innermost student code, its line, the launched kernel's line) of a site."""
    code, lasti, klasti = L["site_list"][site]
    return code, line_at(code, lasti), line_at(L["code"], klasti)


def _site_where(L, site) -> str:
    """The student's line of an access (the innermost of their frames)."""
    code, line, kline = _site_lines(L, site)
    if code is None:
        return _where(L["code"], kline)
    return _where(code, line)


def _site_words(L, site) -> str:
    """An access's line in words: its source, and the kernel's line that called the function
    it is in ("`count[j] += 1` in last_block, called at cell 13, line 48")."""
    code, line, kline = _site_lines(L, site)
    if code is None:
        return _source(L["code"], kline) or f"line {kline}"
    said = _source(code, line) or f"line {line}"
    if kline and code is not L["code"]:
        said += f" in {code.co_name}, called at {_where(L['code'], kline)}"
    return said


def _add(rec, kind: str, array: str, index, sort_key, detail: str, where: str,
         word=None):
    """One word found: kept once per (kind, array), the lowest ``sort_key`` giving the words;
    ``word`` (default: ``index``) is what the count counts."""
    f = rec._found.get((kind, array))
    if f is None:
        f = rec._found[(kind, array)] = {"words": set(), "key": None}
    f["words"].add(index if word is None else word)
    if len(f["words"]) > 1_000_000:
        f["words"] = set(list(f["words"])[:1_000_000])
    if f["key"] is None or sort_key < f["key"]:
        f.update(key=sort_key, index=index, detail=detail, where=where)


def _name_global(L, rec, addr: int):
    """(array name, flat index, itemsize) of a global byte address: a registered array the
    function was handed first, else the kernel parameter whose array holds it."""
    for lo, hi, name, isz in rec.bodies:
        if lo <= addr < hi:
            return name, (addr - lo) // isz
    for lo, hi, name, origin, isz in L["named"]:
        if lo <= addr < hi:
            return name, (addr - origin) // isz
    best = None
    for lo, hi, name, origin, isz in L["named"]:   # in the allocation around it (a guard)
        if best is None or abs(addr - lo) < abs(addr - best[0]):
            best = (lo, name, origin, isz)
    if best is None:
        return "an array", None
    return best[1], (addr - best[2]) // best[3]


def _shared_races(rec, L, E):
    """A shared word written by one warp and accessed by another in one barrier interval."""
    shared = E[E[:, 6] == SHARED]
    by_word = {}
    for kind, addr, blk, tid, ep, site, _ in shared[_shared_words(shared, (2, 4, 1),
                                                                  lambda S: S[:, 3] >> 5)].tolist():
        acc = by_word.setdefault((blk, ep, addr), {})
        got = acc.get((tid >> 5, kind))
        if got is None or _line_key(L, site) < _line_key(L, got):
            acc[(tid >> 5, kind)] = site   # (the first line, whatever the threads' order)
    for (blk, ep, addr), acc in by_word.items():
        if len({w for w, _ in acc}) < 2:
            continue
        pairs = []   # a plain write by one warp, any access by another
        for (w1, k1), l1 in acc.items():
            if k1 != W:
                continue
            for (w2, k2), l2 in acc.items():
                if w2 != w1:
                    pairs.append((w1, k1, l1, w2, k2, l2))
        if not pairs:
            continue
        w1, k1, l1, w2, k2, l2 = min(pairs, key=lambda p: (p[0], p[1], _line_key(L, p[2]), p[3],
                                                           p[4], _line_key(L, p[5])))
        name, index = _name_shared(L, addr)
        detail = (f"{KIND_WORD[k1]} by warp {w1} ({_site_words(L, l1)}) and {KIND_WORD[k2]} "
                  f"by warp {w2} ({_site_words(L, l2)}) of block {blk} with no "
                  "cuda.syncthreads() between")
        _add(rec, "race_shared", name, index, (index, blk, w1, w2, k2), detail,
             _site_where(L, l1))


def _line_key(L, site):
    code, line, kline = _site_lines(L, site)
    return (getattr(code, "co_filename", ""), line, kline)


def _name_shared(L, addr):
    for (lo, hi), name, isz, _ in L["shared"].values():
        if lo <= addr < hi:
            return name, (addr - lo) // isz
    return "shared memory", None


class _Cut:
    """Knowledge of another block's events: those of an epoch below ``E``, and those of thread
    t up to event ``s[t]`` (a down-set of the block's order: program order, then barriers)."""

    __slots__ = ("E", "s")

    def __init__(self, E=-1, s=None):
        self.E, self.s = E, dict(s or {})

    def merge(self, other: "_Cut") -> bool:
        changed = False
        if other.E > self.E:
            self.E, changed = other.E, True
        for t, n in other.s.items():
            if n > self.s.get(t, -1):
                self.s[t] = n
                changed = True
        return changed

    def reaches(self, tid, ep, n) -> bool:
        return ep < self.E or n <= self.s.get(tid, -1)


def _merge(into: dict, k: dict, skip=None) -> None:
    for b, cut in k.items():
        if b == skip:
            continue
        mine = into.get(b)
        if mine is None:
            into[b] = _Cut(cut.E, cut.s)
        else:
            mine.merge(cut)


class _Fences:
    """A block's fences: per thread, their event numbers and epochs; all their epochs."""

    def __init__(self):
        self.by_thread = {}   # tid -> ([n], [epoch])
        self.epochs = []      # sorted epochs of every fence

    def add(self, tid, ep, n):
        ns, eps = self.by_thread.setdefault(tid, ([], []))
        ns.append(n)
        eps.append(ep)
        bisect.insort(self.epochs, ep)

    def covers(self, cut: _Cut, tid, ep, n) -> bool:
        """Is a write (thread tid, epoch ep, event n) followed in block order by a fence that
        ``cut`` reaches?"""
        mine = self.by_thread.get(tid)
        if mine is not None:   # the writer's own next fence
            k = bisect.bisect_left(mine[0], n)
            if k < len(mine[0]) and cut.reaches(tid, mine[1][k], mine[0][k]):
                return True
        # a fence of any thread after a barrier that follows the write, below the cut's epoch
        k = bisect.bisect_right(self.epochs, ep)
        if k < len(self.epochs) and self.epochs[k] < cut.E:
            return True
        for u, s in cut.s.items():   # ... or reached through a thread's own events
            fu = self.by_thread.get(u)
            if fu is None:
                continue
            j = bisect.bisect_right(fu[0], s) - 1
            if j >= 0 and fu[1][j] > ep:
                return True
        return False


class _BlockKnowledge:
    """What one block knows of the others' events at each point of its own: per epoch the
    knowledge its atomics acquired in it, per thread what that thread's atomics acquired."""

    def __init__(self):
        self.per_epoch = {}    # epoch -> {block: _Cut}
        self.per_thread = {}   # tid -> {block: _Cut}
        self._prefix = {}      # epoch -> {block: _Cut} (the epochs below it, merged)

    def acquire(self, tid, ep, k: dict, me):
        _merge(self.per_epoch.setdefault(ep, {}), k, me)
        _merge(self.per_thread.setdefault(tid, {}), k, me)
        for e in [e for e in self._prefix if e > ep]:
            del self._prefix[e]

    def prefix(self, ep) -> dict:
        got = self._prefix.get(ep)
        if got is None:
            got = {}
            for e, k in self.per_epoch.items():
                if e < ep:
                    _merge(got, k)
            self._prefix[ep] = got
        return got

    def at(self, tid, ep) -> tuple[dict, dict]:
        return self.prefix(ep), self.per_thread.get(tid, {})


def _global_races(rec, L, ev, E):
    """Two blocks' conflicting accesses to a global word with no happens-before between them
    (the module's docstring), found in one pass over the launch's events in the order they
    happened: the accesses of the words that can race (used by two blocks or more, at least
    once by a plain write), the atomics (what blocks learn of each other) and the fences."""
    glob = (E[:, 6] == GLOBAL) & (E[:, 0] != F)
    idx = np.flatnonzero(glob)
    rows = idx[_shared_words(E[idx], (1,), lambda S: S[:, 2])]
    if not len(rows):
        return
    candidates = set(E[rows, 1].tolist())
    fences = {}
    for n in np.flatnonzero((E[:, 6] == GLOBAL) & (E[:, 0] == F)).tolist():
        e = ev[n]
        fences.setdefault(e[2], _Fences()).add(e[3], e[4], n)
    atomics = np.flatnonzero(glob & ((E[:, 0] == A) | (E[:, 0] == AR)))
    wanted = np.union1d(rows, atomics).tolist()
    knowledge = {}          # block -> _BlockKnowledge
    published = {}          # word -> {block: _Cut}: what an atomic on it acquires
    # candidate word -> ({(blk, tid, ep): (n, site)} of plain writes,
    #                    {(blk, tid, ep, kind): (n, site)} of reads and atomics): the latest
    # of each is all a later access needs compared (if it is known, released, to the later
    # access, so are the same thread's earlier ones of that epoch: program order, and the fence
    # that follows the latest write follows them too)
    history = {}
    racy = {}               # word -> [(pair key, detail pieces)]
    work = [0]
    empty = {}
    for n in wanted:
        kind, addr, blk, tid, ep, line, space = ev[n]
        bk = None
        if kind == A or kind == AR:
            bk = knowledge.get(blk)
            if bk is None:
                bk = knowledge[blk] = _BlockKnowledge()
            pub = published.get(addr)
            if pub:
                work[0] += _size(pub)
                bk.acquire(tid, ep, pub, blk)
        if addr in candidates and addr not in racy:
            if bk is None:
                bk = knowledge.get(blk)
            before, mine = bk.at(tid, ep) if bk is not None else (empty, empty)
            writes, others = history.get(addr) or history.setdefault(addr, ({}, {}))
            earlier = list(writes.items()) if kind != W else \
                list(writes.items()) + list(others.items())
            for key1, (n1, l1) in earlier:
                b1, t1, ep1 = key1[0], key1[1], key1[2]
                k1 = key1[3] if len(key1) == 4 else W
                if b1 == blk:
                    continue
                work[0] += 1
                if _ordered(k1, b1, t1, ep1, n1, before, mine, fences.get(b1)):
                    continue
                racy.setdefault(addr, []).append((b1, blk, k1, kind, l1, line, t1, tid))
                break
            if kind == W:
                writes[(blk, tid, ep)] = (n, line)
            else:
                others[(blk, tid, ep, kind)] = (n, line)
        if kind == A or kind == AR:   # what this atomic publishes: its own events, and all it knows
            pub = published.setdefault(addr, {})
            before, mine = bk.at(tid, ep)
            work[0] += _size(before) + _size(mine)
            _merge(pub, before)
            _merge(pub, mine)
            _merge(pub, {blk: _Cut(ep, {tid: n})})
        if work[0] > rec.max_checks:
            _stop(rec, f"its race analysis passed {rec.max_checks:,} steps (comparisons and "
                       "merges of what blocks know of each other)")
            break
    for addr, found in racy.items():
        b1, b2, k1, k2, l1, l2, t1, t2 = min(found)
        name, index = _name_global(L, rec, addr)
        wline = l1 if k1 == W else l2
        detail = (f"{KIND_WORD[k1]} by block {b1} ({_site_words(L, l1)}) and {KIND_WORD[k2]} "
                  f"by block {b2} ({_site_words(L, l2)}) with no atomic and threadfence "
                  "ordering them")
        _add(rec, "race_global", name, index, (index if index is not None else -1, b1, b2),
             detail, _site_where(L, wline))


def _size(k: dict) -> int:
    return sum(1 + len(c.s) for c in k.values())


def _stop(rec, what: str) -> None:
    """The analysis of this launch stops here: said in the recorder's notes (what was found
    before it is kept: a race seen is a race, whatever comes after)."""
    rec.notes.append(f"launch {rec.launches}: {what}; the rest of it was not checked for "
                     "races (nothing is reported that was not seen)")


def _ordered(k1, b1, t1, ep1, n1, before: dict, mine: dict, fences) -> bool:
    """Is block b1's access (kind k1, thread t1, epoch ep1, event n1) known, released, to the
    access whose block knows ``before`` (its earlier epochs') and ``mine`` (its thread's)?"""
    for k in (before, mine):
        cut = k.get(b1)
        if cut is None or not cut.reaches(t1, ep1, n1):
            continue
        if k1 != W:
            return True     # a read or an atomic comes before the atomic that released it
        if fences is not None and fences.covers(cut, t1, ep1, n1):
            return True
    return False


def _barriers(rec, L):
    code = L["code"]
    for blk, ep, first_thread, counts in L["barriers"]:
        lines = sorted(first_thread)
        said = ", ".join(f"{counts[ln]} at {_source(code, ln) or 'line ' + str(ln)}"
                         for ln in lines[:3])
        detail = (f"the threads of block {blk} met barrier {ep + 1} at different "
                  f"cuda.syncthreads() calls ({said})")
        _add(rec, "barrier", "", None, (ep, blk), detail, _where(code, lines[-1]), word=ep)


def _reads_past(rec, L):
    for name, past in L["past"].items():
        for index, (blk, tid, line, n) in past.items():
            if index >= n:
                where_words = f"{index - n + 1} element(s) past the end"
            else:
                where_words = f"{-index} element(s) before the start"
            detail = (f"read by block {blk}, thread {tid} ({_site_words(L, line)}): "
                      f"{where_words} (`{name}` has {n} elements, flat indices 0 to {n - 1})")
            _add(rec, "read_past", name, index, (index, blk, tid), detail, _site_where(L, line))
