"""The pages that list the labs, written from the lab registry (autograder/labs/), so that a
new lab is three files and a command, and no list goes stale:

    python -m tools.lab_pages --write    # rewrite the generated parts
    python -m tools.lab_pages --check    # exit 1 naming the stale ones (tests/tooling/test_lab_pages.py)

What it writes, each between a BEGIN and an END marker line that it keeps (the rest of each
file is prose, edited by hand):

- ``_toc.yml``: the labs' entries in the book's table of contents;
- ``intro.md``: the introduction's paragraph on the labs (how many, each one's page, what it
  asks for and the chapters it follows);
- ``chapters/appendix_instructors.md``: the instructors' table (lab, after, what students do,
  graded on) and the sentence that counts the labs;
- ``autograder/README.md``: the grader's table of labs (the student's function, what the lab
  asks for, the chapters it applies).

Each lab's words are its spec's ``title``, ``chapters`` and ``asks`` (autograder/labs/spec.py).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NUMBERS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
           "eleven", "twelve")
WHY = "written by `python -m tools.lab_pages --write` from autograder/labs/ (edit the labs there)"


def _labs():
    from autograder import labs

    return labs.registry()


def count(n: int, capital: bool = False) -> str:
    word = NUMBERS[n] if n < len(NUMBERS) else str(n)
    return word[:1].upper() + word[1:] if capital else word


def _cell(text: str) -> str:
    """Text for a Markdown table cell: a pipe would end the cell."""
    return text.replace("|", "\\|")


def graded_on(spec) -> str:
    if not spec.kernel:
        return "numeric answers"
    return "correctness, " + ("bandwidth" if spec.perf_metric == "bandwidth" else "throughput")


def toc(registry) -> str:
    return "".join(f"      - file: labs/{name}\n" for name in registry)


def intro(registry) -> str:
    n = len(registry)
    lines = [f"**Labs.** {count(n, capital=True)} labs apply the chapters' ideas to problems the "
             "chapters leave for you, each after the chapters it names:", ""]
    lines += [f"- {{doc}}`labs/{name}` (after {spec.chapters}): {spec.asks}."
              for name, spec in registry.items()]
    return "\n".join(lines) + "\n\n"   # a blank line: the list ends before the marker


def appendix(registry) -> str:
    n = len(registry)
    rows = [f"The {count(n)} labs follow the chapters they depend on:", "",
            "| lab | after | what students do | graded on |", "| --- | --- | --- | --- |"]
    rows += [f"| {{doc}}`{name} </labs/{name}>` | {spec.chapters} | {_cell(spec.asks)} | "
             f"{graded_on(spec)} |" for name, spec in registry.items()]
    return "\n".join(rows) + "\n\n"   # a blank line: the table ends before the marker


def readme(registry) -> str:
    rows = ["| lab | the student writes | applies (not copies) |", "| --- | --- | --- |"]
    for name, spec in registry.items():
        what = spec.asks if not spec.kernel else f"`{spec.signature()}`: {spec.asks}"
        rows.append(f"| `{name}` | {_cell(what)} | {spec.chapters} |")
    return "\n".join(rows) + "\n\n"   # a blank line: the table ends before the marker


# file -> (how a marker line is written, the generated text)
def parts(registry) -> dict[str, tuple[str, str]]:
    md = "<!-- {} labs: " + WHY + " -->"
    return {"_toc.yml": ("      # {} labs: " + WHY, toc(registry)),
            "intro.md": (md, intro(registry)),
            "chapters/appendix_instructors.md": (md, appendix(registry)),
            "autograder/README.md": (md, readme(registry))}


def render(path: Path, marker: str, text: str, rel: str = "") -> str:
    """The file at ``path`` (``rel``: its name in messages) with its generated part replaced by
    ``text``."""
    old = path.read_text()
    begin, end = marker.format("BEGIN"), marker.format("END")
    pat = re.compile(re.escape(begin) + r"\n.*?" + re.escape(end) + r"\n", re.S)
    if not pat.search(old):
        raise SystemExit(f"{rel or path} has no generated part: put the lines\n"
                         f"{begin}\n{end}\nwhere the labs' list belongs, then run "
                         "`python -m tools.lab_pages --write`")
    return pat.sub(lambda _m: begin + "\n" + text + end + "\n", old, count=1)


def stale(root: Path = ROOT) -> list[str]:
    """The files whose generated part differs from the registry's."""
    out = []
    for rel, (marker, text) in parts(_labs()).items():
        path = root / rel
        if render(path, marker, text, rel) != path.read_text():
            out.append(rel)
    return out


def write(root: Path = ROOT) -> list[str]:
    done = []
    for rel, (marker, text) in parts(_labs()).items():
        path = root / rel
        new = render(path, marker, text, rel)
        if new != path.read_text():
            path.write_text(new)
            done.append(rel)
    return done


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.lab_pages", description=__doc__.split("\n\n")[0])
    how = ap.add_mutually_exclusive_group(required=True)
    how.add_argument("--write", action="store_true", help="rewrite the generated parts")
    how.add_argument("--check", action="store_true", help="exit 1 if any is stale; write nothing")
    args = ap.parse_args(argv)
    if args.check:
        old = stale()
        if old:
            print("stale (run `python -m tools.lab_pages --write`): " + ", ".join(old))
            return 1
        print(f"the lab pages list the {len(_labs())} labs of autograder/labs/")
        return 0
    for rel in write():
        print(f"wrote {rel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
