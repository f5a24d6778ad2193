"""The staged labs' masters on a GPU: every step's check and the final check (timed).

Record: `records/labs/labs_staged_h100.json`.

    python benchmarks/labs_staged_probe.py --out DIR     # writes DIR/labs_staged_gpu.json
"""

import argparse
import contextlib
import glob
import io
import json
from pathlib import Path

import book  # noqa: F401  (decides GPU or simulator before numba.cuda)
from book.provenance import provenance


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    args = ap.parse_args()
    from autograder.check import check_file

    res = {}
    for lab in ("lab2", "lab3", "lab4"):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            ok = check_file(lab, glob.glob(f"solutions/{lab}_*.ipynb")[0])
        res[lab] = {"ok": ok, "output": buf.getvalue()}
        print(f"{lab}: {'ok' if ok else 'FAILED'}\n{buf.getvalue()[-600:]}", flush=True)
    doc = {"provenance": provenance("python benchmarks/labs_staged_probe.py"), "labs": res}
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "labs_staged_gpu.json").write_text(json.dumps(doc, indent=1) + "\n")
    return 0 if all(r["ok"] for r in res.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
