"""Dump the SASS (the GPU's machine code) of the course's kernels, for chapter 5's reading.

Record: `book/data/sass/`.

PTX is compiled anywhere (``book.kernels.host.ptx``); SASS needs the driver's assembler and
``nvdisasm``, i.e. a GPU machine. Writes ``<name>_<dtype>.sass`` files into a folder and
a tarball of them (``--tar``), plus the registers and local memory per kernel.
Usage on a GPU machine:  python -m benchmarks.sass_dump --dir OUT/sass --tar OUT/sass.tar.gz
"""

import argparse
import json
import sys
import tarfile
from pathlib import Path

ITEMS = [("fused", "float32"), ("fused_fastmath", "float32"), ("fused_f64_literal", "float32"),
         ("naive_silu", "float32"), ("naive_mul", "float32"), ("ilp4", "float32"),
         ("vec2", "float32"), ("vec4", "float32"), ("half8", "float16"), ("half8", "bfloat16"),
         ("packed_vec4", "float32")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--tar")
    args = ap.parse_args()
    import book  # noqa: F401

    from book.kernels.host import ptx

    out = Path(args.dir)
    out.mkdir(parents=True, exist_ok=True)
    table = ptx.kernels()
    summary = {}
    for name, dtype in ITEMS:
        kernel, kind = table[name]
        sig = ptx.signature(kind, dtype)
        compiled = kernel.compile(sig)  # the specialisation for this signature
        sass = compiled.inspect_sass()
        (out / f"{name}_{dtype}.sass").write_text(sass)
        regs, local = compiled.regs_per_thread, compiled.local_mem_per_thread
        summary[f"{name}/{dtype}"] = {
            "registers": regs, "local_bytes": local, "lines": len(sass.splitlines()),
            "has": {k: (k in sass) for k in ("MUFU.EX2", "MUFU.RCP", "LDG.E.128", "LDG.E.64",
                                               "STG.E.128", "DMUL", "DADD", "LDL", "STL")}}
        print(f"{name:<18} {dtype:<9} regs={regs} local={local} "
              f"MUFU.EX2={'MUFU.EX2' in sass} MUFU.RCP={'MUFU.RCP' in sass} "
              f"LDG.E.128={'LDG.E.128' in sass} LDG.E.64={'LDG.E.64' in sass} DADD/DMUL={'DMUL' in sass or 'DADD' in sass}")
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    if args.tar:
        with tarfile.open(args.tar, "w:gz") as tf:
            for p in sorted(out.iterdir()):
                tf.add(p, arcname=p.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
