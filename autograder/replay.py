"""The trusted timing process: replays recorded kernel launches on the grader's own inputs.

    python -m autograder.replay        (started by grade.py, one per GPU; JSON lines on stdin/stdout)

It never imports or runs a submission's Python. What it gets from a submission is a
recording (autograder/sandbox/inside/launches.py writes it during one traced call): compiled kernel images
(cubins), entry names, grid, block, dynamic shared memory, the order of the launches and what
each parameter is (an input, the output, a scratch buffer with its contents at first use, a
scalar). It loads the images through the CUDA driver API (cuda-bindings), allocates its own
inputs (generated from seeds the submission never saw), outputs and scratch buffers, each
between guard zones as the grader's tests gave them (autograder/inputs.py), launches
the sequence itself, times it with CUDA events it owns and checks every output against the
lab's float64 reference. Nothing the student's process can change reaches the work timed,
its count or the clock.

Timing windows (``time``): each window loads the images afresh (module globals start over),
restores fresh scratch buffers from the recording, poisons every output with NaN (and its
guard zones with theirs), then runs
the whole recorded sequence once on each of the K input/output sets (every launch of the
window on a distinct set, starting at a set the grader picks), between two events, queued
behind a short spin kernel so that the host's launch time is not inside the window. Every
output of every window is verified; per-call time is the median over windows of
window time / K; a window whose outputs are wrong, or whose output guard zones were written,
is not verified. The reference and the device copy are timed the same way.

A CUDA error leaves the context unusable: the process reports it and exits; the grader
starts a fresh one. A hang is the grader's to stop (it kills this process group).
"""

from __future__ import annotations

import ctypes
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

_OUT = None


def reply(**kw):
    _OUT.write(json.dumps(kw, default=str) + "\n")
    _OUT.flush()


class ReplayError(Exception):
    """The recording cannot be replayed as given (the message says why, for feedback)."""


def _cu():
    from cuda.bindings import driver as cu

    return cu


def _check(ret, what):
    err = ret[0] if isinstance(ret, tuple) else ret
    if int(err) != 0:
        cu = _cu()
        _e, name = cu.cuGetErrorName(err)
        name = name.decode() if isinstance(name, bytes) else str(name)
        raise RuntimeError(f"{what}: {name}")
    if isinstance(ret, tuple):
        return ret[1] if len(ret) == 2 else ret[1:]
    return None


# ctypes for the scalar parameters numba passes (the child's launches._scalar names them)
_CTYPES = {"c_int64": ctypes.c_int64, "c_double": ctypes.c_double, "bool": ctypes.c_bool}


def ctype_scalar(p):
    """A recorded scalar parameter ({"t": type, "v": value}) as the ctypes value Numba passes."""
    t = p["t"]
    if t in _CTYPES:
        return _CTYPES[t](p["v"])
    if t.startswith("np:"):
        dt = np.dtype(t[3:])
        return {1: ctypes.c_uint8, 2: ctypes.c_uint16, 4: ctypes.c_uint32, 8: ctypes.c_uint64}[dt.itemsize](
            int(np.array(p["v"], dtype=dt).view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[dt.itemsize])))
    if hasattr(ctypes, t) and t.startswith("c_"):
        return getattr(ctypes, t)(p["v"])
    raise ReplayError(f"a kernel parameter of type {t} cannot be replayed")


class Recording:
    """A recording read from its folder: images, launches, scratch snapshots (all checked)."""

    MAX_LAUNCHES = 4096

    def __init__(self, folder):
        folder = Path(folder)
        rec = json.loads((folder / "launches.json").read_text())
        if rec.get("error"):
            raise ReplayError(f"the launches could not be recorded: {rec['error']}")
        self.launches = rec["launches"]
        if not self.launches:
            raise ReplayError("your function launched no CUDA kernel")
        if len(self.launches) > self.MAX_LAUNCHES:
            raise ReplayError(f"{len(self.launches)} launches per call (the grader replays at most "
                              f"{self.MAX_LAUNCHES})")
        self.images = {k: (folder / Path(v).name).read_bytes() for k, v in rec["images"].items()}
        self.scratch = [(s["name"], int(s["size"]), (folder / Path(s["file"]).name).read_bytes())
                        for s in rec["scratch"]]

    def load(self):
        """Fresh modules for every image: (modules, {(image, entry): function})."""
        cu = _cu()
        mods, funcs = [], {}
        for key, image in self.images.items():
            buf = np.frombuffer(image, dtype=np.uint8).copy()
            mod = _check(cu.cuModuleLoadData(buf.ctypes.data), "loading your kernel's image")
            mods.append(mod)
            for L in self.launches:
                if L["image"] == key and (key, L["entry"]) not in funcs:
                    funcs[(key, L["entry"])] = _check(cu.cuModuleGetFunction(mod, L["entry"].encode()),
                                                      f"finding kernel {L['entry'][:60]}")
        return mods, funcs

    @staticmethod
    def unload(mods):
        cu = _cu()
        for m in mods:
            cu.cuModuleUnload(m)

    def fresh_scratch(self, torch, guard_bytes: int = 0):
        """Each scratch buffer as at its first use, between two guard zones of
        ``guard_bytes`` (a kernel that overran its own buffer in the child overruns into
        them here, not into the grader's other buffers)."""
        out = {}
        for name, size, data in self.scratch:
            t = torch.full((size + 2 * guard_bytes,), 0xA5, dtype=torch.uint8, device="cuda")
            if data:
                t[guard_bytes:guard_bytes + size].copy_(
                    torch.from_numpy(np.frombuffer(data, dtype=np.uint8).copy()))
            out[name] = t[guard_bytes:guard_bytes + size]
        return out

    def run(self, funcs, buffers, stream, extents=None):
        """Launch the recorded sequence once. ``buffers``: name -> torch tensor;
        ``extents``: name -> the bytes (from, to) a pointer may lie at relative to that
        tensor's first byte (an input's or the output's guard zones: the recording says
        where a kernel's pointer lay relative to the array it was given)."""
        cu = _cu()
        for L in self.launches:
            vals = []
            for p in L["params"]:
                if p["t"] == "ptr":
                    b = buffers.get(p["buf"])
                    if b is None:
                        raise ReplayError(f"a parameter refers to an unknown buffer {p['buf']!r}")
                    size = b.numel() * b.element_size()
                    lo, hi = (extents or {}).get(p["buf"], (0, size))
                    if not lo <= int(p["off"]) < max(hi, 1):
                        raise ReplayError(f"a pointer parameter lies outside `{p['buf']}`")
                    vals.append(ctypes.c_uint64(b.data_ptr() + int(p["off"])))
                else:
                    vals.append(ctype_scalar(p))
            arr = (ctypes.c_void_p * max(1, len(vals)))(*[ctypes.addressof(v) for v in vals])
            g, b = L["grid"], L["block"]
            _check(cu.cuLaunchKernel(funcs[(L["image"], L["entry"])], g[0], g[1], g[2], b[0], b[1], b[2],
                                     int(L["shmem"]), stream, ctypes.addressof(arr), 0),
                   f"launching {L['entry'][:60]}")


class Server:
    def __init__(self):
        import torch

        self.torch = torch
        torch.cuda.init()
        torch.zeros(1, device="cuda")  # the primary context, current on this thread
        self.sets = []
        self.lab = None
        self.nvml_gpu = None
        self.discarded = []

    def stream(self):
        cu = _cu()
        return cu.CUstream(self.torch.cuda.current_stream().cuda_stream)

    def device(self):
        from book import gpu

        info = gpu.device_info()
        return {"name": info.name, "peak_bandwidth": info.peak_bandwidth, "sm_count": info.sm_count,
                "l2_bytes": info.l2_bytes, "compute_capability": info.compute_capability,
                "driver_version": info.driver_version}

    # -- inputs, outputs and float64 references, made here from seeds
    def build_set(self, case):
        """Inputs and the output of one case, each the middle of an allocation with guard
        zones (autograder/inputs.py), as the grader's test gave them to the submission."""
        from autograder.inputs import generate, guarded

        torch, lab = self.torch, self.lab
        host = {n: generate(s) for n, s in lab.input_specs(case).items()}
        ref = torch.from_numpy(np.ascontiguousarray(lab.reference(host), dtype=np.float64)).cuda()
        bufs, whole, extents = {}, {}, {}
        for a in lab.args(case):
            h = host[a["name"]] if a["role"] == "in" else \
                np.full(tuple(a["shape"]), np.nan, dtype=a["dtype"])
            g = int(a["guard"])
            flat = torch.from_numpy(guarded(h, g, a["role"])).cuda()
            bufs[a["name"]] = flat[g:g + h.size].view(h.shape)
            whole[a["name"]] = (flat, g)
            extents[a["name"]] = (-g * h.dtype.itemsize, (h.size + g) * h.dtype.itemsize)
        return {"bufs": bufs, "ref": ref, "case": case, "whole": whole, "extents": extents,
                "guard_bytes": max(-lo for lo, _hi in extents.values())}

    def setup(self, msg):
        from autograder import labs

        self.lab = labs.get(msg["lab"])
        self.nvml_gpu = msg.get("nvml_gpu")
        self.sets = [self.build_set(c) for c in msg["cases"]]
        self.torch.cuda.synchronize()
        return {"ok": True, "device": self.device(), "sets": len(self.sets)}

    def verify(self, s):
        """(every output element right and the output's guard zones untouched, wrong count)."""
        from book.answers import within   # the one tolerance test, here on the GPU's tensors

        lab = self.lab
        got = s["bufs"][lab.output].double()
        ref = s["ref"]
        ok = within(got, ref, rtol=lab.rtol, atol=lab.atol)
        wrong = int((~ok).sum().item())
        return bool(ok.all().item()) and not self.guard_hits(s), wrong

    def _guard_view(self, s):
        """(the output's guard zones as integers, the pattern they hold)."""
        from autograder.inputs import guard_bits

        flat, g = s["whole"][self.lab.output]
        size = flat.element_size()
        bits = flat.view({2: self.torch.int16, 4: self.torch.int32, 8: self.torch.int64}[size])
        return bits, g, guard_bits(np.dtype(f"f{size}"), "out")

    def guard_hits(self, s) -> int:
        """Elements of the output's guard zones a kernel wrote."""
        bits, g, want = self._guard_view(s)
        if g == 0:
            return 0
        n = bits.numel() - 2 * g
        return int((bits[:g] != want).sum().item() + (bits[g + n:] != want).sum().item())

    def poison(self, s):
        s["bufs"][self.lab.output].fill_(float("nan"))
        bits, g, want = self._guard_view(s)
        if g:
            n = bits.numel() - 2 * g
            bits[:g].fill_(want)
            bits[g + n:].fill_(want)

    # -- one replay on a fresh case: does the recording compute the answer?
    def check(self, msg):
        rec = Recording(msg["dir"])
        s = self.build_set(msg["case"])
        self.poison(s)
        mods, funcs = rec.load()
        try:
            bufs = dict(s["bufs"], **rec.fresh_scratch(self.torch, s["guard_bytes"]))
            rec.run(funcs, bufs, self.stream(), s["extents"])
            self.torch.cuda.synchronize()
        finally:
            Recording.unload(mods)
        from autograder.inputs import guard_damage
        from book.answers import compare_array, guard_notes

        lab = self.lab
        got = s["bufs"][lab.output].cpu().numpy()
        ok, text = compare_array(got, s["ref"].cpu().numpy(), rtol=lab.rtol, atol=lab.atol,
                                 dtype_name=lab.dtype, what=lab.output, shape_hint=lab.describe(msg["case"]))
        flat, g = s["whole"][lab.output]
        said = guard_notes([(lab.output, guard_damage(flat.cpu().numpy(), g, "out"), got.size)])
        return {"ok": True, "reproduced": bool(ok) and not said, "message": text + said,
                "launches": len(rec.launches)}

    # -- timing windows
    def foreign(self):
        """Processes other than this one holding the GPU (gpuwatch.others_on)."""
        if self.nvml_gpu is None:
            return []
        from autograder import gpuwatch

        return gpuwatch.others_on(self.nvml_gpu, {os.getpid()})

    PRIME_CYCLES = 1 << 21          # about 1 ms of spinning at 2 GHz
    PRIME_MAX_CYCLES = 1 << 26
    prime_cycles = PRIME_CYCLES

    def prime(self):
        """A one-thread spin kernel (torch.cuda._sleep) queued ahead of the start event, as
        book.bench.measure does: while it runs, Python enqueues the window's launches, so the
        window times the GPU's work back to back, not the ~30 us Python takes to marshal and
        launch the first call (without it that gap sat inside every window, a few percent of
        a lab-2 window and more of a faster GPU's). Returns None where torch has no spin kernel."""
        sleep = getattr(self.torch.cuda, "_sleep", None)
        if sleep is None:
            return None
        sleep(int(self.prime_cycles))
        return self.prime_cycles

    def _window(self, run_set, w, start, before_window=None, after_window=None, verify=True):
        """One timing window: every set once, between two events; its outputs verified."""
        torch = self.torch
        K = len(self.sets)
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        ctx = before_window() if before_window else None
        if verify:
            for s in self.sets:
                self.poison(s)
        order = [(start + w + k) % K for k in range(K)]
        torch.cuda.synchronize()
        spin = self.prime()
        e0.record()
        for k in order:
            run_set(ctx, self.sets[k])
        e1.record()
        primed = None if spin is None else not e0.query()
        if primed is False and self.prime_cycles < self.PRIME_MAX_CYCLES:
            self.prime_cycles *= 2      # the host was slower than the spin: a longer one next time
        e1.synchronize()
        ms = e0.elapsed_time(e1)
        if after_window:
            after_window(ctx)
        rec = {"calls": K, "order": order, "gpu_s": ms / 1e3, "per_call_s": ms / 1e3 / K,
               "t": time.monotonic(), "primed": primed}
        if verify:  # every window's outputs, kept or discarded
            checks = [self.verify(s) for s in self.sets]
            rec["verified"] = all(c[0] for c in checks)
            if not rec["verified"]:
                rec["wrong_elements"] = [c[1] for c in checks]
                rec["guard_hits"] = [self.guard_hits(s) for s in self.sets]
        return rec

    def _windows(self, run_set, n_windows, start, before_window=None, after_window=None, verify=True):
        """``n_windows`` windows, each checked before and after through NVML: a window during
        which another process held the GPU is discarded (and kept in the answer) and repeated,
        at most 2 x n_windows times."""
        windows, bad, self.discarded = [], [], []
        w = -1
        while len(windows) < n_windows:
            w += 1
            before = self.foreign()
            rec = self._window(run_set, w, start, before_window, after_window, verify)
            if verify and not rec["verified"]:
                bad.append({"window": w, "wrong_elements": rec.pop("wrong_elements"),
                            "guard_hits": rec.pop("guard_hits")})
            after = self.foreign()
            if (before or after) and len(self.discarded) < 2 * n_windows:
                self.discarded.append(dict(rec, foreign_before=before, foreign_after=after))
                continue
            windows.append(rec)
        return windows, bad

    def _replayer(self, rec, torch, stream):
        """(before, run_set, after) for timing windows of one recording."""
        guard_bytes = max(s["guard_bytes"] for s in self.sets)
        def before():
            mods, funcs = rec.load()            # fresh modules: no state from earlier windows
            return mods, funcs, rec.fresh_scratch(torch, guard_bytes), stream()

        def run_set(ctx, s):
            _mods, funcs, scratch, strm = ctx
            rec.run(funcs, dict(s["bufs"], **scratch), strm, s["extents"])

        def after(ctx):
            Recording.unload(ctx[0])

        return before, run_set, after

    def time(self, msg):
        if msg.get("pair"):
            return self.time_paired(msg)
        rec = Recording(msg["dir"])
        before, run_set, after = self._replayer(rec, self.torch, self.stream)
        windows, bad = self._windows(run_set, int(msg.get("windows", 15)), int(msg.get("start", 0)),
                                     before, after)
        return {"ok": True, "windows": windows, "verified": not bad, "bad_windows": bad[:5],
                "discarded_windows": self.discarded,
                "per_call_s": statistics.median(w["per_call_s"] for w in windows),
                "launches_per_call": len(rec.launches), "method": "replay, CUDA events"}

    def time_paired(self, msg):
        """The submission (``dir``) and the lab's master (``pair``) timed in alternating windows:
        pair i runs master then submission for even i, submission then master for odd i (ABBA),
        so a clock or temperature that drifts during the request moves both medians alike and
        cancels in their ratio; a drift within one pair cancels between consecutive pairs. A pair
        during which another process held the GPU (NVML before and after) is discarded whole
        and repeated, at most 2 x n times. Both are verified in every window."""
        sub, master = Recording(msg["dir"]), Recording(msg["pair"])
        run = {"sub": self._replayer(sub, self.torch, self.stream),
               "master": self._replayer(master, self.torch, self.stream)}
        n, start = int(msg.get("windows", 15)), int(msg.get("start", 0))
        kept = {"sub": [], "master": []}
        bad = {"sub": [], "master": []}
        self.discarded = []
        i = -1
        while len(kept["sub"]) < n:
            i += 1
            before = self.foreign()
            pair = {}
            for who in (("master", "sub") if i % 2 == 0 else ("sub", "master")):
                b, r, a = run[who]
                rec = self._window(r, i, start, b, a)
                rec["pair"], rec["who"] = i, who
                if not rec["verified"]:
                    bad[who].append({"window": i, "wrong_elements": rec.pop("wrong_elements"),
                                     "guard_hits": rec.pop("guard_hits")})
                pair[who] = rec
            after = self.foreign()
            if (before or after) and len(self.discarded) < 2 * n:
                self.discarded += [dict(pair[w], foreign_before=before, foreign_after=after)
                                   for w in pair]
                continue
            for w in pair:
                kept[w].append(pair[w])
        per = statistics.median(w["per_call_s"] for w in kept["sub"])
        per_master = statistics.median(w["per_call_s"] for w in kept["master"])
        return {"ok": True, "windows": kept["sub"], "master_windows": kept["master"],
                "verified": not bad["sub"], "bad_windows": bad["sub"][:5],
                "master_verified": not bad["master"], "discarded_windows": self.discarded,
                "per_call_s": per, "master_per_call_s": per_master,
                "launches_per_call": len(sub.launches),
                "method": "replay, CUDA events, windows paired with the lab's master (ABBA)"}

    def reference(self, msg):
        torch, lab = self.torch, self.lab
        case = self.sets[0]["case"]
        fn, ref_sets = lab.make_reference_runner(case)
        while len(ref_sets) < len(self.sets):
            ref_sets = list(ref_sets) + list(lab.make_reference_runner(case)[1])
        ref_sets = ref_sets[:len(self.sets)]
        it = iter(range(10 ** 9))

        def run_ref(_ctx, s):
            fn(*ref_sets[next(it) % len(ref_sets)])

        for s in ref_sets:
            fn(*s)
        n = int(msg.get("windows", 15))
        wref, _ = self._windows(run_ref, n, 0, verify=False)
        discarded = list(self.discarded)
        nbytes = 1 << 30
        pairs = [(torch.empty(nbytes, dtype=torch.uint8, device="cuda"),
                  torch.ones(nbytes, dtype=torch.uint8, device="cuda")) for _ in range(2)]
        jt = iter(range(10 ** 9))

        def run_copy(_ctx, s):
            d, src = pairs[next(jt) % 2]
            d.copy_(src)

        wcopy, _ = self._windows(run_copy, n, 0, verify=False)
        discarded += self.discarded
        t_ref = statistics.median(w["per_call_s"] for w in wref)
        t_copy = statistics.median(w["per_call_s"] for w in wcopy)
        return {"ok": True, "reference_s": t_ref, "reference_windows": wref, "copy_s": t_copy,
                "copy_bandwidth": 2 * nbytes / t_copy, "copy_windows": wcopy, "device": self.device(),
                "discarded_windows": discarded,
                "method": "CUDA events, windows of one call per set"}


def main():
    global _OUT
    _OUT = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything printed by a library goes to stderr, never onto the protocol
    server = None
    for line in sys.stdin:
        msg = json.loads(line)
        cmd = msg.get("cmd")
        if cmd == "exit":
            break
        t0 = time.perf_counter()
        try:
            if server is None:
                server = Server()
            r = {"setup": server.setup, "check": server.check, "time": server.time,
                 "reference": server.reference, "ping": lambda m: {"ok": True}}[cmd](msg)
        except ReplayError as e:
            r = {"ok": False, "error": "ReplayError", "message": str(e)}
        except Exception as e:  # a CUDA error: this context is done
            reply(ok=False, error=type(e).__name__, message=str(e)[:2000], fatal=True,
                  seconds=time.perf_counter() - t0)
            _OUT.flush()
            os._exit(3)
        r["seconds"] = time.perf_counter() - t0
        reply(**r)
    os._exit(0)


if __name__ == "__main__":
    main()
