"""Record what compute-sanitizer says about planted bugs, for book.sanitizer's parser and tests.

Three small Numba programs, each run under memcheck and racecheck through book.sanitizer.run:
an off-by-one store past the end of an array, a shared-memory tile read with no
cuda.syncthreads() after it is filled (the values usually come out right), and the same tile
with the barrier (no finding expected). The raw output, the parsed findings and provenance go
to one JSON record.

Usage on a GPU machine:  python benchmarks/sanitizer_probe.py --out records/sanitizer/h100.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import textwrap
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROGRAMS = {
    "out_of_bounds": """
        import numpy as np
        from numba import cuda

        @cuda.jit
        def off_by_one(a, out):
            i = cuda.grid(1)
            if i <= out.size:          # the bug: <= lets one thread write past the end
                out[i] = a[i % a.size] * 2

        a = cuda.to_device(np.arange(256, dtype=np.float32))
        out = cuda.device_array(256, np.float32)
        off_by_one[2, 256](a, out)
        cuda.synchronize()
        print("values ok:", bool((out.copy_to_host() == np.arange(256) * 2).all()))
    """,
    "missing_syncthreads": """
        import numpy as np
        from numba import cuda, float32

        @cuda.jit
        def reverse_tile(a, out):
            tile = cuda.shared.array(256, float32)
            t = cuda.threadIdx.x
            tile[t] = a[t]
            # the bug: no cuda.syncthreads() here, so a thread may read a word
            # another warp has not written yet
            out[t] = tile[255 - t]

        a = cuda.to_device(np.arange(256, dtype=np.float32))
        out = cuda.device_array(256, np.float32)
        reverse_tile[1, 256](a, out)
        cuda.synchronize()
        print("values ok:", bool((out.copy_to_host() == np.arange(256)[::-1]).all()))
    """,
    "with_syncthreads": """
        import numpy as np
        from numba import cuda, float32

        @cuda.jit
        def reverse_tile(a, out):
            tile = cuda.shared.array(256, float32)
            t = cuda.threadIdx.x
            tile[t] = a[t]
            cuda.syncthreads()
            out[t] = tile[255 - t]

        a = cuda.to_device(np.arange(256, dtype=np.float32))
        out = cuda.device_array(256, np.float32)
        reverse_tile[1, 256](a, out)
        cuda.synchronize()
        print("values ok:", bool((out.copy_to_host() == np.arange(256)[::-1]).all()))
    """,
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    from book import sanitizer
    from book.provenance import provenance

    rec = {"provenance": provenance("python benchmarks/sanitizer_probe.py --out " +
                                    str(args.out)), "programs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name, src in PROGRAMS.items():
            path = Path(tmp) / f"{name}.py"
            path.write_text(textwrap.dedent(src))
            res = sanitizer.run([sys.executable, str(path)], timeout=240)
            rec["programs"][name] = {
                "source": textwrap.dedent(src),
                "tools": {t: {"output": r["output"].replace(tmp, "<tmp>"),
                              "returncode": r["returncode"],
                              "findings": [asdict(f) for f in r["findings"]]}
                          for t, r in res.items()},
                "sentences": sanitizer.explain(res, own_files=[path]),
            }
            print(f"{name:22s}", {t: len(r["findings"]) for t, r in res.items()},
                  rec["programs"][name]["sentences"][:2])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rec, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
