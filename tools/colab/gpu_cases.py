"""`record-errors` and `cell-cases` (on a GPU): the real error strings numba-cuda raises when
each failure is provoked (records/colab/numba_cuda_errors.json, read by book.driver_errors'
tests), and the setup cell as on Colab with the course already installed: with a GPU, with
none selected, with its memory taken."""

from __future__ import annotations

import json
import os
import tempfile

from autograder.setup_template import render
from tools.colab.mirror import run

_ERR_PRELUDE = """
import json, sys, traceback
import numpy as np
from numba import cuda

def chain(e):
    out, seen = [], set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        code = getattr(e, "code", None)
        out.append({"type": type(e).__module__ + "." + type(e).__qualname__,
                    "code": int(code) if isinstance(code, int) or hasattr(code, "__int__") else None,
                    "str": str(e)})
        e = e.__cause__ or e.__context__
    return out

def newer_ptx(bump):
    # PTX NVVM wrote for this GPU, its ISA version raised by `bump` minor versions: it stands
    # for PTX from a newer CUDA toolkit than the driver / nvJitLink here.
    import re
    def k(a):
        i = cuda.grid(1)
        if i < a.size:
            a[i] += 1
    ptx, _ = cuda.compile_ptx_for_current_device(k, "void(float32[:])")
    m = re.search(r"^\\.version (\\d+)\\.(\\d+)", ptx, re.M)
    new = "%s.%d" % (m.group(1), int(m.group(2)) + bump)
    return ptx.replace(m.group(0), ".version " + new, 1), m.group(0), new

try:
    detail = {}
BODY
    print(json.dumps({"raised": None, "detail": detail}))
except Exception as e:
    print(json.dumps({"raised": chain(e), "detail": detail}))
"""

# Each case: (name, environment overrides, body run inside the try above).
ERROR_CASES = {
    "no_gpu": ({"CUDA_VISIBLE_DEVICES": ""}, "    cuda.to_device(np.zeros(4, np.float32))"),
    "out_of_memory": ({}, "    cuda.device_array(2**40 // 4, dtype=np.float32)  # 1 TiB"),
    # EAGER: with lazy loading the driver would JIT the PTX only at the first launch
    "driver_older_than_ptx": ({"CUDA_MODULE_LOADING": "EAGER"}, (
        "    import re\n"
        "    ptx, old, new = newer_ptx(5)\n"
        "    detail.update(ptx_version_written=old, ptx_version_loaded=new)\n"
        "    mod = cuda.current_context().create_module_ptx(ptx)  # the driver loads the PTX\n"
        "    mod.get_function(re.search('[.]entry ([A-Za-z0-9_]+)', ptx).group(1))")),
    "nvjitlink_older_than_ptx_link": ({}, (
        "    import os, tempfile\n"
        "    ptx, old, new = newer_ptx(5)\n"
        "    detail.update(ptx_version_written=old, ptx_version_linked=new)\n"
        "    path = os.path.join(tempfile.mkdtemp(), 'newer.ptx'); open(path, 'w').write(ptx)\n"
        "    @cuda.jit(link=[path])\n"
        "    def k2(a):\n"
        "        a[0] = 1\n"
        "    k2[1, 1](cuda.to_device(np.zeros(1, np.float32)))  # nvJitLink links the PTX")),
    "nvjitlink_older_than_nvvm": ({}, (
        "    @cuda.jit\n"
        "    def k3(a):\n"
        "        i = cuda.grid(1)\n"
        "        if i < a.size:\n"
        "            a[i] += 1\n"
        "    k3[1, 32](cuda.to_device(np.zeros(32, np.float32)))  # a plain kernel launch")),
}


def _stack_versions(py: str, env: dict) -> dict:
    code = ("import json, ctypes, importlib.metadata as md\n"
            "v = ctypes.c_int(0); ctypes.CDLL('libcuda.so.1').cuDriverGetVersion(ctypes.byref(v))\n"
            "out = {'driver_cuda': v.value}\n"
            "try:\n    from cuda.bindings import nvjitlink; out['nvjitlink'] = nvjitlink.version()\n"
            "except Exception as e:\n    out['nvjitlink'] = repr(e)\n"
            "for d in ('numba', 'numba-cuda', 'numpy', 'cuda-bindings', 'cuda-core', 'nvidia-nvvm',\n"
            "          'nvidia-cuda-nvcc-cu12', 'nvidia-nvjitlink', 'nvidia-nvjitlink-cu12'):\n"
            "    try: out[d] = md.version(d)\n"
            "    except md.PackageNotFoundError: pass\n"
            "print(json.dumps(out))\n")
    p = run([py, "-c", code], env=env, capture_output=True, text=True, check=False)
    return json.loads(p.stdout) if p.returncode == 0 else {"error": p.stderr[-500:]}


def record_errors(py: str, cases: list[str]) -> dict:
    out = {}
    for name in cases:
        extra_env, body = ERROR_CASES[name]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_", "BOOK_"))}
        env.update(extra_env)
        p = run([py, "-c", _ERR_PRELUDE.replace("BODY", body)], env=env, capture_output=True, text=True,
                 check=False, timeout=300)
        try:
            res = json.loads(p.stdout.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            res = {"raised": None, "crash": (p.stdout + p.stderr)[-3000:]}
        res["env"] = extra_env
        res["versions"] = _stack_versions(py, env)
        out[name] = res
    return out


#: The setup cell on "Colab" (COLAB_RELEASE_TAG) where the course is already installed at the
#: pin, so it goes straight to `import book` and the GPU check: as it works, with no GPU
#: selected, and with the GPU's memory taken (by this same process, before the cell).
_FILL_GPU = """
from cuda.bindings import driver as _d
_d.cuInit(0); _, _dev = _d.cuDeviceGet(0); _, _ctx = _d.cuDevicePrimaryCtxRetain(_dev)
_d.cuCtxSetCurrent(_ctx); _held = []
for _mb in (4096, 1024, 256, 64, 16, 4, 1):  # take every MiB there is, in ever smaller pieces
    while True:
        _err, _ptr = _d.cuMemAlloc(_mb << 20)
        if _err != _d.CUresult.CUDA_SUCCESS:
            break
        _held.append(_ptr)
"""
CELL_CASES = {
    "gpu": ({}, ""),
    "no_gpu_selected": ({"CUDA_VISIBLE_DEVICES": ""}, ""),
    "gpu_memory_taken": ({}, _FILL_GPU),
}


def cell_cases(py: str, names) -> dict:
    out = {}
    for name in names:
        extra_env, prelude = CELL_CASES[name]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_", "BOOK_"))}
        env.update(extra_env, COLAB_RELEASE_TAG="rehearsal", PIP_NO_INDEX="1")
        p = run([py, "-c", prelude + render()], env=env, capture_output=True, text=True,
                 check=False, timeout=300, cwd=tempfile.gettempdir())  # not this tree's book
        out[name] = {"env": extra_env, "rc": p.returncode, "stdout": p.stdout[-3000:],
                     "stderr": p.stderr[-1500:]}
    return out
