"""The simulator does what a GPU does where the two would differ (book/simfidelity.py).

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
