"""The GEMM kernels' SASS on a CPU machine: registers, spills and the hot loop's instruction mix.

    python benchmarks/gemm_sass.py [flat_u2 peeled ...] [--dual|--gemm] [--out DIR]

For each named tile of ``book.kernels.gemm.TILE_VARIANTS`` (default: all): PTX for sm_90
from Numba (``cuda.compile_ptx``, no GPU needed), ptxas through nvJitLink (registers and
spills, as on the GPU), SASS from ``nvdisasm`` (pip: ``nvidia-cuda-nvdisasm``; pass
``--nvdisasm PATH`` if it is not found). Prints, per kernel, the registers, the spill
bytes and the instruction mix of each loop (a backward branch and the code it closes):
the share of FFMAs in the k loop is the ceiling on the FMA pipe's use when every issue
slot is filled. The kernels are those the benchmark times (``--dual``: the SwiGLU dual
GEMM, the default; ``--gemm``: the plain GEMM), with the launch bounds they carry.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _import_kernels():
    # Import book.kernels without ``import book``: that would pick the CUDA simulator on a
    # machine with no GPU, and the simulator cannot compile to PTX.
    pkg = types.ModuleType("book")
    pkg.__path__ = [str(ROOT / "book")]
    sys.modules.setdefault("book", pkg)
    from book.kernels import dual_gemm, gemm

    return gemm, dual_gemm


def find_nvdisasm(given=None):
    if given:
        return given
    found = shutil.which("nvdisasm")
    if found:
        return found
    for p in sys.path:  # the pip wheel puts it under nvidia/cu*/bin
        for hit in glob.glob(os.path.join(p, "nvidia", "cu*", "bin", "nvdisasm")):
            return hit
    return None


def compile_kernel(kernel, name, workdir, nvdisasm):
    """PTX -> cubin (nvJitLink, verbose ptxas log) -> SASS text."""
    from cuda.bindings import nvjitlink as nj
    from numba import cuda, float32, int64

    arr = float32[:, ::1]
    sig = (arr, arr, arr, arr, int64, int64)
    lb = kernel.targetoptions.get("launch_bounds")
    ptx, _ = cuda.compile_ptx(kernel.py_func, sig, cc=(9, 0), fastmath=True, launch_bounds=lb)
    data = ptx.encode()
    buf = ctypes.create_string_buffer(data, len(data) + 1)
    h = nj.create(2, ["-arch=sm_90", "-verbose"])
    nj.add_data(h, nj.InputType.PTX, ctypes.addressof(buf), len(data) + 1, name)
    nj.complete(h)
    log = bytearray(nj.get_info_log_size(h))
    nj.get_info_log(h, log)
    cubin = bytearray(nj.get_linked_cubin_size(h))
    nj.get_linked_cubin(h, cubin)
    nj.destroy(h)
    path = Path(workdir, f"{name}.cubin")
    path.write_bytes(cubin)
    sass = ""
    if nvdisasm:
        sass = subprocess.run([nvdisasm, "-c", str(path)], capture_output=True, text=True,
                              check=True).stdout
    return log.decode(), sass


_INSTR = re.compile(r"^\s+/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_]+)(\.[A-Z0-9_.]+)?")


def loops(sass):
    """Instruction mix of each loop body: (label, {opcode: count})."""
    lines = sass.splitlines()
    labels = {m.group(1): i for i, l in enumerate(lines) if (m := re.match(r"^(\.L_x_\d+):", l))}
    out = []
    for i, l in enumerate(lines):
        m = re.search(r"BRA\s+`?\((\.L_x_\d+)\)", l)
        if m and m.group(1) in labels and labels[m.group(1)] < i:
            ops = {}
            for b in lines[labels[m.group(1)]:i + 1]:
                mm = _INSTR.match(b)
                if mm:
                    op = mm.group(1) + (".128" if mm.group(2) and ".128" in mm.group(2) else "")
                    ops[op] = ops.get(op, 0) + 1
            if sum(ops.values()) > 8:  # not the trailing self-branch
                out.append((m.group(1), ops))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tiles", nargs="*")
    ap.add_argument("--gemm", action="store_true", help="the plain GEMM instead of the dual")
    ap.add_argument("--nvdisasm", default=None)
    ap.add_argument("--out", default=None, help="keep the .cubin and .sass files here")
    a = ap.parse_args()
    gemm, dual_gemm = _import_kernels()
    names = a.tiles or list(gemm.TILE_VARIANTS)
    nvdisasm = find_nvdisasm(a.nvdisasm)
    if not nvdisasm:
        print("nvdisasm not found (pip install nvidia-cuda-nvdisasm): registers only")
    workdir = a.out or tempfile.mkdtemp(prefix="gemm_sass_")
    Path(workdir).mkdir(parents=True, exist_ok=True)
    epi = None if a.gemm else dual_gemm.silu_mul
    for name in names:
        k = gemm.build_kernel(gemm.TILE_VARIANTS[name], epi, False)
        log, sass = compile_kernel(k, name, workdir, nvdisasm)
        if sass:
            Path(workdir, f"{name}.sass").write_text(sass)
        regs = re.findall(r"Used (\d+) registers", log)
        spill = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
        print(f"{name}: {gemm.TILE_VARIANTS[name]}")
        print(f"  registers {regs}, spill stores/loads (bytes) {spill}")
        for label, ops in loops(sass):
            n, f = sum(ops.values()), ops.get("FFMA", 0)
            top = ", ".join(f"{k} {v}" for k, v in sorted(ops.items(), key=lambda kv: -kv[1])[:12])
            print(f"  loop {label}: {n} instructions, {f} FFMA = {f / n:.1%}; {top}")
    print(f"files in {workdir}")


if __name__ == "__main__":
    main()
