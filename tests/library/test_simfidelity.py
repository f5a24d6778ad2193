"""The simulator does what a GPU does where the two would differ (book/simulator/fidelity.py).

Each case runs in a fresh process with the simulator forced, as `import book` starts it for a
notebook, `check()` or the grader's children."""

import subprocess
import sys
import textwrap
from repo import ROOT as REPO



def run_sim(code: str) -> str:
    env = {"BOOK_SIMULATOR": "1", "BOOK_QUIET": "1", "PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                       env=env, cwd=REPO, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout


def test_a_kernel_writing_through_a_transpose_fills_a_copy_as_on_a_gpu():
    # On a GPU, DeviceNDArray.T is a new array made by a transpose kernel: a kernel that writes
    # through it leaves the original untouched. The simulator used to hand back a view.
    out = run_sim("""
        import book
        import numpy as np
        from numba import cuda

        @cuda.jit
        def fill(a):
            i, j = cuda.grid(2)
            if i < a.shape[0] and j < a.shape[1]:
                a[i, j] = 7.0

        tmp = cuda.to_device(np.zeros((3, 5), np.float32))
        t = tmp.T
        fill[(1, 1), (8, 8)](t)
        print(t.shape, float(tmp.copy_to_host().sum()), float(t.copy_to_host().sum()))
        src = np.arange(15, dtype=np.float32).reshape(3, 5)
        print(np.array_equal(cuda.to_device(src).T.copy_to_host(), src.T))
        try:
            cuda.to_device(np.zeros(4, np.float32)).T
        except NotImplementedError as e:
            print("1-D:", e)
    """)
    lines = out.splitlines()
    assert lines[0] == "(5, 3) 0.0 105.0", out       # the original stays zero, the copy is filled
    assert lines[1] == "True", out                    # the values are the transpose's
    assert lines[2].startswith("1-D: transposing a non-2D DeviceNDArray"), out


def test_the_patch_holds_when_numba_cuda_was_imported_before_book_in_simulator_mode():
    out = run_sim("""
        import os
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
        import numpy as np
        from numba import cuda
        import book
        a = cuda.to_device(np.zeros((2, 3), np.float32))
        print(a.T.copy_to_host().flags["C_CONTIGUOUS"], a.T is not a)
    """)
    assert out.split() == ["True", "True"], out


def test_every_thread_of_a_block_gets_the_one_shared_array_when_two_ask_at_once():
    # Chapter 7's dual GEMM at 40x44x40 returned inf in about one loaded CI build in five:
    # numba-cuda's FakeCUDAShared.array looks a line's array up, then stores a new np.empty one
    # on a miss; a thread preempted between the two let another thread miss too, and each kept
    # an array of its own (reading garbage where the others wrote). Here every lookup that
    # misses waits for a second thread to miss the same line, the preemption made certain.
    out = run_sim("""
        import threading

        import book
        import numpy as np
        from numba import cuda
        from book import numba_compat as nc
        from book.simulator import fidelity
        from book.kernels import dual_gemm

        class Preempted(dict):
            # a thread that misses waits until a second thread has missed the same line
            def get(self, key, default=None):
                got = dict.get(self, key, default)
                if got is None:
                    with LOCK:
                        ev = MISSED.setdefault(key, [0, threading.Event()])
                        ev[0] += 1
                        if ev[0] >= 2:
                            ev[1].set()
                    ev[1].wait(timeout=0.5)
                return got

        LOCK, MISSED = threading.Lock(), {}
        cls = nc.sim_shared_class()
        init = cls.__init__

        def preempted_init(self, *args):
            init(self, *args)
            self._allocations = Preempted()
            MISSED.clear()

        cls.__init__ = preempted_init
        print(cls.array is getattr(fidelity, "shared_array_of_the_block", None))

        # the course's own lookup (the hazard recorder's), asked by two threads at once
        shared = cls(0)
        got = []
        ts = [threading.Thread(target=lambda: got.append(
            nc.sim_shared_array(shared, 4, np.float32, ("k.py", 1)))) for _ in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        print(got[0] is got[1])

        @cuda.jit
        def mirror(a, out):
            s = cuda.shared.array(64, np.float32)
            i = cuda.threadIdx.x
            s[i] = a[i]
            cuda.syncthreads()
            out[i] = s[63 - i]

        a = np.arange(64, dtype=np.float32) + 0.5
        o = np.zeros(64, np.float32)
        mirror[1, 64](a, o)
        print(np.array_equal(o, a[::-1]))

        # chapter 7's cell: the SwiGLU dual GEMM at the simulator's shape, 40x44x40
        rng = np.random.default_rng(21)
        x = rng.standard_normal((40, 44)).astype(np.float32)
        wg, wu = ((rng.standard_normal((44, 40)) / np.sqrt(44)).astype(np.float32)
                  for _ in range(2))
        G, U = x.astype(np.float64) @ wg, x.astype(np.float64) @ wu
        ref = G / (1 + np.exp(-G)) * U
        try:  # a thread with an array of its own overflows exp() on garbage, or gives inf
            res = dual_gemm.swiglu_dual_gemm(*(cuda.to_device(m) for m in (x, wg, wu)))
            err = np.abs(res.copy_to_host() - ref).max() / np.abs(ref).max()
            print(bool(err < 1e-5), err)
        except OverflowError as e:
            print(False, e)
    """)
    # the simulator runs the course's shared.array; two threads asking at once get one array; a
    # block's threads see each other's writes; chapter 7's dual GEMM is right (no inf)
    assert [ln.split()[0] for ln in out.splitlines()] == ["True"] * 4, out
