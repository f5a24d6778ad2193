"""python -m autograder {list,new-lab,assign,check,grade,merge,export}"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m autograder", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)

    sub.add_parser("list", help="name the labs, their functions and points")

    n = sub.add_parser("new-lab", help="write a new lab's three files from a working template "
                       "(CONTRIBUTING.md, \"Add a lab\")")
    n.add_argument("name", help="lab<number>_<topic>, e.g. lab9_relu2_gate")

    a = sub.add_parser("assign", help="generate labs/ from the masters in solutions/")
    a.add_argument("--check", action="store_true", help="exit 1 if labs/ is stale; write nothing")

    c = sub.add_parser("check", help="run a lab's public tests on a notebook or .py (unsandboxed: your own code)")
    c.add_argument("lab")
    c.add_argument("submission")

    g = sub.add_parser("grade", help="grade submissions (.ipynb or .py, or folders of them)")
    g.add_argument("lab")
    g.add_argument("submissions", nargs="+")
    g.add_argument("--out", required=True, help="output folder (re-running skips graded submissions)")
    g.add_argument("--gpus", type=int, default=1, help="one worker group per GPU (CUDA_VISIBLE_DEVICES)")
    g.add_argument("--workers", type=int, default=None, help="parallel submissions (default 2 on CPU, 3 per GPU)")
    g.add_argument("--shard", default=None, help="I/N: grade every N-th submission starting at I (job arrays)")
    g.add_argument("--rubric", default=None, help="rubric TOML (default autograder/rubrics/LAB.toml)")
    g.add_argument("--simulator", action="store_true", help="force Numba's CUDA simulator")
    g.add_argument("--sim-timing", action="store_true",
                   help="testing aid: run the timing protocol in the simulator (no points)")
    g.add_argument("--no-isolation", action="store_true",
                   help="skip namespaces, hidden paths and the privilege drop (debugging only)")
    g.add_argument("--regrade", action="store_true", help="grade again even where results exist")
    g.add_argument("--no-sanitize", action="store_true",
                   help="on a GPU, do not run compute-sanitizer (racecheck, synccheck, memcheck) "
                   "on one public case of each submission, whose findings cost that case its "
                   "points (the default runs it; each feedback then says it was not checked)")
    g.add_argument("--sanitize", action="store_true",
                   help="the default (kept for older command lines): see --no-sanitize")
    g.add_argument("--quiet", action="store_true")

    m = sub.add_parser("merge", help="combine shard output folders into one grades.csv")
    m.add_argument("--out", required=True)
    m.add_argument("shards", nargs="+")

    e = sub.add_parser("export", help="export: a Gradescope autograder bundle, or grades.csv of a folder")
    e.add_argument("what", choices=["gradescope", "csv"])
    e.add_argument("lab")
    e.add_argument("--out", required=True, help="zip file (gradescope) or graded folder (csv)")
    e.add_argument("--seed", type=int, default=None,
                   help="gradescope: the class's hidden-case seed (default AUTOGRADER_SEED, else drawn now)")
    e.add_argument("--rubric", default=None,
                   help="gradescope: your rubric TOML, carried in the bundle and graded with "
                        "(default autograder/rubrics/LAB.toml)")

    args = ap.parse_args(argv)
    if args.cmd == "list":
        from . import labs
        from .rubric import course_points

        for name, lab in labs.registry().items():
            pts = course_points(name)
            fns = lab.signature()
            print(f"{name}\n    {lab.title}\n    write: {fns}\n    points: {pts['total']:g} "
                  f"({pts['correctness']:g} correctness, {pts['performance']:g} performance)\n"
                  f"    performance points: {pts['performance']:g}")
        return 0
    if args.cmd == "new-lab":
        from .labs import LabSpecError
        from .scaffold import REPO, new_lab

        try:
            written = new_lab(args.name)
        except LabSpecError as e:
            print(f"new-lab: {e}", file=sys.stderr)
            return 2
        for p in written:
            print(f"wrote {p.relative_to(REPO)}")
        print("next: CONTRIBUTING.md, \"Add a lab\" (assign, the lab pages, the derived fixtures)")
        return 0
    if args.cmd == "assign":
        from .assign import assign_all

        stale = assign_all(check_only=args.check)
        if args.check and stale:
            print("stale (run `python -m autograder assign`): " + ", ".join(stale))
            return 1
        return 0
    if args.cmd == "check":
        from .check import check_file

        return 0 if check_file(args.lab, args.submission) else 1
    if args.cmd == "grade":
        from .grade import main as grade_main

        return grade_main(args)
    if args.cmd == "merge":
        from .export import merge

        print(f"wrote {merge(Path(args.out), args.shards)}")
        return 0
    if args.cmd == "export":
        from . import labs
        from .export import write_grades_csv
        from .gradescope import assignment_total, bundle

        lab = labs.resolve(args.lab)
        if args.what == "gradescope":
            print(f"wrote {bundle(lab, Path(args.out), Path(__file__).resolve().parent.parent, args.seed, args.rubric)}")
            print(assignment_total(lab, args.rubric))
        else:
            print(f"wrote {write_grades_csv(Path(args.out), lab)}")
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
