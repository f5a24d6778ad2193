"""The compile check's child: with Numba's real CUDA target and no GPU (``book.gpu.COMPILE_ONLY``),
the submission's cells run (its kernels made, none launched), then each kernel a simulated test
launched is compiled for the lab's compute capability with the argument types its launch had,
as a GPU would compile it at that launch. In the simulator a kernel is plain Python, so a body
of host NumPy, Python objects or anything else passes every test there; here it meets Numba's
GPU compiler (``book.numba_compat.compile_for_cc``, the one the lab masters' check uses).

A kernel is named by its code (cell, first line, name) and which of the kernels made from that
code it is, as the recording names it (launches.py ``_record_sim``); its argument types are
rebuilt from the recording's parameters (an array's dtype, dimensions and strides: its layout;
a scalar's type), never from values. Imported after the child's path is set (numba.cuda, book).
"""

from __future__ import annotations

import ctypes

import numpy as np

from book.numba_compat import NotAKernel, compile_error_line, compile_for_cc, on_gpu_kernel_made

# code identity -> the dispatchers made from that code, in the order they were made (as
# launches.SIM_KERNELS in the simulator: the same cells make the same ones in the same order)
GPU_KERNELS: dict = {}
# (code, which one, Numba's argument types) -> the answer: each compiled once
DONE: dict = {}

# a recorded scalar's type name (launches._scalar) -> the ctypes type a GPU launch types it by
_CTYPES = {name: getattr(ctypes, name) for name in (
    "c_bool", "c_int8", "c_uint8", "c_int16", "c_uint16", "c_int32", "c_uint32", "c_int64",
    "c_uint64", "c_float", "c_double", "c_byte", "c_ubyte", "c_short", "c_ushort", "c_int",
    "c_uint", "c_long", "c_ulong", "c_longlong", "c_ulonglong")}


def install() -> None:
    """Register every dispatcher the cells make (before they run)."""
    def made(dispatcher, fn):
        c = getattr(fn, "__code__", None)
        if c is not None:
            GPU_KERNELS.setdefault((c.co_filename, c.co_firstlineno, c.co_name), []).append(dispatcher)

    on_gpu_kernel_made(made)


def arg_type(p: dict):
    """The Numba type a GPU launch gives a recorded parameter."""
    import numba

    if p.get("t") == "arr":
        dt = np.dtype(p["dtype"])
        shape = tuple(int(n) for n in p["shape"])
        # a view of one element with the recorded strides: NumPy's flags give the layout
        # (C, F or A) as they did for the launch's array; no memory is read
        view = np.lib.stride_tricks.as_strided(np.zeros(1, dt), shape=shape,
                                               strides=tuple(int(s) for s in p["strides"]))
        return numba.typeof(view).copy(readonly=False)
    t = p.get("t")
    if t == "bool":
        return numba.types.boolean
    if t in ("c_int64",):   # a Python int: typed by its value, as a launch types it
        return numba.typeof(int(p["v"]))
    if t == "c_double":     # a Python float
        return numba.types.float64
    if isinstance(t, str) and t.startswith("np:"):
        return numba.from_dtype(np.dtype(t[3:]))
    if t in _CTYPES:
        return numba.typeof(_CTYPES[t](p["v"]))
    raise TypeError(f"a parameter of recorded type {t!r}")


def compile_launch(msg: dict, sources: dict) -> dict:
    """One recorded launch's kernel compiled for ``msg["cc"]`` with its argument types:
    ``found`` (a kernel the cells made), ``compiled``, Numba's ``error`` and, where it can be
    said, the ``line`` of the cell it is at and that line (``sources``: cell name -> source)."""
    code, nth = tuple(msg["code"]), int(msg.get("nth", 0))
    made = GPU_KERNELS.get(code, [])
    if nth >= len(made):
        return {"ok": True, "found": False}
    try:
        types = tuple(arg_type(p) for p in msg["params"])
    except (TypeError, ValueError, KeyError) as e:
        return {"ok": True, "found": True, "compiled": None, "signature": "",
                "error": f"{type(e).__name__}: {e}"}
    signature = "(" + ", ".join(str(t) for t in types) + ")"
    if (code, nth, types) not in DONE:
        DONE[code, nth, types] = _compile(made[nth], types, msg["cc"], code, signature, sources)
    return DONE[code, nth, types]


def _compile(kernel, types, cc, code, signature, sources) -> dict:
    try:
        compile_for_cc(kernel, types, cc, ptx=False)   # typing and lowering: no NVVM needed
    except NotAKernel as e:
        return {"ok": True, "found": False, "signature": signature, "error": str(e)}
    except Exception as e:   # Numba's error, in its own words
        r = {"ok": True, "found": True, "compiled": False, "signature": signature,
             "error": f"{type(e).__name__}: {e}"}
        line = compile_error_line(e, code[0])
        lines = (sources.get(code[0]) or "").splitlines()
        if line is not None and 0 < line <= len(lines):
            r["line"], r["source"] = line, lines[line - 1].strip()
        return r
    return {"ok": True, "found": True, "compiled": True, "signature": signature}
