"""Rehearse the Colab setup cell here: a venv that mirrors Colab's GPU image, no network.

    python -m tools.colab_rehearsal download --wheels .whl-colab [--extra cu12 cu13]
    python -m tools.colab_rehearsal run --wheels .whl-colab [--extra auto|cu12|cu13] [--out F]
        [--system-site] [--parallel]
    python -m tools.colab_rehearsal stage --wheels .whl-colab/py312 --python P --extra cu12 cu13

`download` (needs the network, once) fills a folder with wheels: the packages that matter from
Colab's image at Colab's versions (records/colab/pip-freeze.gpu.txt, copied from
googlecolab/backend-info with its date) and exactly the files the setup cell's install step
would add on top of them (learned with `pip install --dry-run --report` in a mirror venv).

`run` (no network) is the rehearsal, one small step at a time:
1. a fresh venv gets the mirror (MIRROR at Colab's versions, the whole freeze as constraints);
2. the setup cell, rendered from autograder/setup_template.py and unchanged, runs in it as on Colab
   (COLAB_RELEASE_TAG set): its pip reads the wheel folder as its package index
   (PIP_NO_INDEX, PIP_FIND_LINKS) and its `git+<repository>@<pin>` clones this checkout's git
   history instead of GitHub (git's url.<this checkout>.insteadOf), so the pinned commit is
   what gets installed;
3. the versions pip changed are listed, and none of the packages Colab's kernel imports at
   start (or torch's CUDA wheels) may change;
4. the cell runs again: it must install nothing (the pinned commit is there);
5. a lab master (its check() calls) and a chapter execute in the venv's own Jupyter kernel,
   with the setup cell of today's template (applied to copies).
The record (JSON, with book.provenance) goes to --out.

`stage` (for the H100, where a device call carries at most 64 MiB) picks from a `download`ed
folder exactly the wheels a `run --system-site` uses (--python: an interpreter with the device's
numba, llvmlite and matplotlib), and packs them into folders s1..sN under --stage of at most
--max-mib each: large wheels split into `<wheel>.partNN` (one `cat <wheel>.part*` rebuilds
each), and MANIFEST.sha256 (`sha256sum -c` format) in every folder for the rebuilt wheels.

torch is left out of the mirror: Colab's torch 2.11.0+cu128 is several GB, and neither the lab nor
the chapter the rehearsal runs imports it (labs do not; chapters 1 and 6 do, so the rehearsal runs
chapter 2, whose roofline explorer also exercises Colab's ipywidgets 7 with anywidget 0.9). Colab's Python is 3.13 in the newest snapshot; the rehearsal uses the
interpreter it is given (--python; CI's is 3.11, the H100's 3.12), with Colab's package versions.

The verbs live in tools/colab/: `mirror` (Colab's versions, the mirror venv, the cell's
environment), `download`, `stage` (wheel selection and splitting), `rehearse` (`run`),
`gpu_cases` (`record-errors`, `cell-cases`); this module is their command line.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from tools.colab.download import download
from tools.colab.gpu_cases import CELL_CASES, ERROR_CASES, cell_cases, record_errors
from tools.colab.mirror import FREEZE, ROOT, SYSTEM_SITE
from tools.colab.rehearse import CHAPTER, LAB, rehearse
from tools.colab.stage import pack, stage_set


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.colab_rehearsal", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("verb", choices=["download", "run", "record-errors", "cell-cases", "stage"])
    ap.add_argument("--cases", nargs="+", default=list(ERROR_CASES),
                    help="record-errors: which failures to provoke")
    ap.add_argument("--wheels", type=Path, default=ROOT / ".whl-colab")
    ap.add_argument("--venv", type=Path, default=Path(tempfile.gettempdir()) / "colab-venv")
    ap.add_argument("--python", default=sys.executable, help="interpreter the venv is made from")
    ap.add_argument("--extra", nargs="+", default=["auto"],
                    help="auto (the cell decides from the driver), cu12, cu13")
    ap.add_argument("--source", type=Path, default=ROOT,
                    help="git repository (or bundle) the cell's git+ URL clones instead of GitHub")
    ap.add_argument("--notebooks", nargs="*", default=[LAB, CHAPTER])
    ap.add_argument("--timeout", type=int, default=600, help="seconds per notebook cell")
    ap.add_argument("--out", type=Path, help="write the record (JSON) here")
    ap.add_argument("--restart-check", action="store_true",
                    help="also: numba.cuda imported before the cell must give the restart line")
    ap.add_argument("--system-site", action="store_true",
                    help=f"link {', '.join(SYSTEM_SITE)} from --python's own site-packages")
    ap.add_argument("--stage", type=Path, default=ROOT / ".whl-colab",
                    help="stage: where the folders s1..sN go (their old contents are removed)")
    ap.add_argument("--max-mib", type=float, default=55,
                    help="stage: the most MiB one folder holds (a device call carries 64 MiB, "
                         "the working tree and the bundle included)")
    ap.add_argument("--parallel", action="store_true",
                    help="run: rehearse the extras side by side (the H100's 10-minute call)")
    args = ap.parse_args(argv)
    wheels = args.wheels.resolve()
    if args.verb == "download":
        extras = [e for e in args.extra if e != "auto"] or ["cu12"]
        download(wheels, args.python, extras, args.source.resolve())
        return 0
    if args.verb == "stage":
        extras = [e for e in args.extra if e != "auto"] or ["cu12"]
        files = stage_set(wheels, args.python, extras, args.source.resolve())
        folders = pack(files, args.stage.resolve(), int(args.max_mib * 2**20))
        for d, items in folders:
            print(f"{d}: {sum(n for _, n in items) / 2**20:.1f} MiB, {len(items)} files"
                  + "".join(f"; {name}" for name, _ in items if ".part" in name))
        print(f"{len(files)} wheels, {sum(f.stat().st_size for f in files) / 2**20:.1f} MiB, "
              f"in {len(folders)} folders")
        return 0
    from book.provenance import provenance

    if args.verb in ("record-errors", "cell-cases"):
        cases = args.cases if args.verb == "record-errors" else list(CELL_CASES)
        run = record_errors if args.verb == "record-errors" else cell_cases
        record = {"provenance": provenance(f"python -m tools.colab_rehearsal {args.verb} "
                                           + " ".join(cases)),
                  "python": args.python, "cases": run(args.python, cases)}
        text = json.dumps(record, indent=1)
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(text + "\n", encoding="utf-8")
        print(text[-6000:])
        return 0

    def one(extra):  # one venv per extra when there are several: they may run side by side
        venv = args.venv if len(args.extra) == 1 else args.venv.with_name(
            f"{args.venv.name}-{extra}")
        return rehearse(wheels, venv, args.python, extra, args.source.resolve(),
                        args.notebooks, args.timeout, args.system_site, args.restart_check)

    if args.parallel and len(args.extra) > 1:  # each run waits on subprocesses: threads do
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(len(args.extra)) as pool:
            runs = list(pool.map(one, args.extra))
    else:
        runs = [one(extra) for extra in args.extra]
    record = {"provenance": provenance("python -m tools.colab_rehearsal " + " ".join(
        sys.argv[1:] if argv is None else argv)), "freeze": str(FREEZE.relative_to(ROOT)),
        "runs": runs, "ok": all(r["ok"] for r in runs)}
    text = json.dumps(record, indent=1)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    for r in runs:
        print(f"[{r['extra']}] ok={r['ok']} python {r['python_version']} changed: "
              + ", ".join(f"{n} {a}->{b}" for n, (a, b) in r["changed"].items()))
        print("  first run:", (r["first_run"]["stdout"] + r["first_run"]["stderr"]).strip()[-1500:])
        print("  second run:", r["second_run"]["stdout"].strip()[-500:])
        for n in r["notebooks"]:
            print(f"  {n['notebook']}: rc={n['rc']} {n['seconds']} s; setup cell said: "
                  f"{n['setup_cell_output'].strip()[-400:]}" + (f"\n{n['error']}" if n["rc"] else ""))
    return 0 if record["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
