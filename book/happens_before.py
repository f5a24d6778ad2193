"""The happens-before analysis of one simulated launch's accesses (book/simhazards.py
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
(book/simscheduler.py), which is seeded.

Knowledge of another block's events is a *cut* (:class:`_Cut`): its events of an epoch below
``E``, and thread t's up to its event ``s[t]``: a down-set of that block's order, which is what
"everything before this atomic" is. The analysis is bounded (``Recorder.max_checks`` pairs of
accesses compared); past it, it stops, says so, and reports only what it had found.
"""

from __future__ import annotations

import bisect
import linecache
import os
import re
import sys

# the events book/simhazards.py records, each (kind, byte address, block, thread, epoch, site,
# space): a plain read, a plain write, an atomic (read-modify-write), an atomic that adds zero
# (a coherent read), a fence; in global or shared memory
R, W, A, AR, F = 0, 1, 2, 3, 4
GLOBAL, SHARED = 0, 1
KIND_WORD = {R: "read", W: "written", A: "updated by an atomic", AR: "read by an atomic"}


def analyse(rec, L: dict) -> None:
    """Everything one launch's events show (``L``: the launch as the recorder kept it), added
    to ``rec``'s findings."""
    ev = L["events"]
    _shared_races(rec, L, ev)
    _global_races(rec, L, ev)
    _barriers(rec, L)
    _reads_past(rec, L)


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


def _site_where(L, site) -> str:
    """The student's line of an access (the innermost of their frames)."""
    code, line, kline = L["site_list"][site]
    if code is None:
        return _where(L["code"], kline)
    return _where(code, line)


def _site_words(L, site) -> str:
    """An access's line in words: its source, and the kernel's line that called the function
    it is in ("`count[j] += 1` in last_block, called at cell 13, line 48")."""
    code, line, kline = L["site_list"][site]
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


def _shared_races(rec, L, ev):
    """A shared word written by one warp and accessed by another in one barrier interval."""
    by_word = {}
    for n, e in enumerate(ev):
        if e[6] != SHARED:
            continue
        kind, addr, blk, tid, ep, line, _ = e
        key = (blk, ep, addr)
        acc = by_word.get(key)
        if acc is None:
            by_word[key] = {(tid >> 5, kind): line}
        else:
            acc.setdefault((tid >> 5, kind), line)
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
        w1, k1, l1, w2, k2, l2 = min(pairs)
        name, index = _name_shared(L, addr)
        detail = (f"{KIND_WORD[k1]} by warp {w1} ({_site_words(L, l1)}) and {KIND_WORD[k2]} "
                  f"by warp {w2} ({_site_words(L, l2)}) of block {blk} with no "
                  "cuda.syncthreads() between")
        _add(rec, "race_shared", name, index, (index, blk, w1, w2, k2), detail,
             _site_where(L, l1))


def _name_shared(L, addr):
    for (lo, hi), name, isz in L["shared"].values():
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


def _global_races(rec, L, ev):
    """Two blocks' conflicting accesses to a global word with no happens-before between them
    (the module's docstring), found in one pass over the launch's events in the order they
    happened."""
    # which words matter: accessed by two blocks or more, at least once by a plain write
    first_block, multi, written = {}, set(), set()
    fences = {}
    for n, e in enumerate(ev):
        kind, addr, blk = e[0], e[1], e[2]
        if e[6] != GLOBAL:
            continue
        if kind == F:
            fences.setdefault(blk, _Fences()).add(e[3], e[4], n)
            continue
        b0 = first_block.setdefault(addr, blk)
        if b0 != blk:
            multi.add(addr)
        if kind == W:
            written.add(addr)
    candidates = multi & written
    del first_block, multi, written
    if not candidates:
        return
    knowledge = {}          # block -> _BlockKnowledge
    published = {}          # word -> {block: _Cut}: what an atomic on it acquires
    history = {}            # candidate word -> [(kind, blk, tid, ep, n, line)]
    racy = {}               # word -> [(pair key, detail pieces)]
    checks = 0
    empty = {}
    for n, e in enumerate(ev):
        kind, addr, blk, tid, ep, line, space = e
        if space != GLOBAL or kind == F:
            continue
        bk = None
        if kind == A or kind == AR:
            bk = knowledge.get(blk)
            if bk is None:
                bk = knowledge[blk] = _BlockKnowledge()
            pub = published.get(addr)
            if pub:
                bk.acquire(tid, ep, pub, blk)
        if addr in candidates and addr not in racy:
            if bk is None:
                bk = knowledge.get(blk)
            before, mine = bk.at(tid, ep) if bk is not None else (empty, empty)
            h = history.setdefault(addr, [])
            for (k1, b1, t1, ep1, n1, l1) in h:
                if b1 == blk or (k1 in (A, AR) and kind in (A, AR)):
                    continue
                if k1 != W and kind != W:
                    continue        # no plain write among them
                checks += 1
                if _ordered(k1, b1, t1, ep1, n1, before, mine, fences.get(b1)):
                    continue
                racy.setdefault(addr, []).append((b1, blk, k1, kind, l1, line, t1, tid))
                break
            if checks > rec.max_checks:
                rec._cap(f"more than {rec.max_checks:,} pairs of accesses compared")
                break
            h.append((kind, blk, tid, ep, n, line))
        if kind == A or kind == AR:   # what this atomic publishes: its own events, and all it knows
            pub = published.setdefault(addr, {})
            before, mine = bk.at(tid, ep)
            _merge(pub, before)
            _merge(pub, mine)
            _merge(pub, {blk: _Cut(ep, {tid: n})})
    for addr, found in racy.items():
        b1, b2, k1, k2, l1, l2, t1, t2 = min(found)
        name, index = _name_global(L, rec, addr)
        wline = l1 if k1 == W else l2
        detail = (f"{KIND_WORD[k1]} by block {b1} ({_site_words(L, l1)}) and {KIND_WORD[k2]} "
                  f"by block {b2} ({_site_words(L, l2)}) with no atomic and threadfence "
                  "ordering them")
        _add(rec, "race_global", name, index, (index if index is not None else -1, b1, b2),
             detail, _site_where(L, wline))


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
