"""Drop the `noqa` codes ruff reports as unused (RUF100), keeping the reason beside them.

`ruff check --fix` removes an unused directive together with everything after it on the line,
so `except Exception:  # noqa: BLE001  (NVML hiccup: recorded, not fatal)` would lose the
reason. This rewrites such comments first: the unused codes go, the codes still in use stay,
and a reason in parentheses stays as a plain comment (`# NVML hiccup: recorded, not fatal`).

    python -m tools.drop_unused_noqa [PATH ...]    (default: the whole tree, ruff's settings)

Then `ruff check --fix .` removes what is left (unused imports) and `ruff check .` passes.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Za-z]+[0-9]*(?:\s*,\s*[A-Za-z]+[0-9]*)*))?(?P<rest>.*)$")
UNUSED = re.compile(r"`([A-Za-z]+[0-9]*)`")


def rewrite(line: str, unused: set[str]) -> str:
    """``line`` with the ``unused`` codes taken out of its noqa comment."""
    m = NOQA.search(line)
    if m is None:
        return line
    codes = [c.strip() for c in (m.group("codes") or "").split(",") if c.strip()]
    keep = [c for c in codes if c not in unused]
    rest = m.group("rest").strip()
    if rest.startswith("(") and rest.endswith(")"):
        rest = rest[1:-1].strip()
    head = line[:m.start()].rstrip()
    if keep:
        why = f"  ({rest})" if rest else ""
        return f"{head}  # noqa: {', '.join(keep)}{why}"
    return f"{head}  # {rest}" if rest else head


def unused_noqa(paths) -> dict[Path, dict[int, set[str]]]:
    """{file: {line number: unused codes}} from ``ruff check --select RUF100``."""
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    # the project's own rule set ([tool.ruff], which selects RUF100): with `--select RUF100`
    # alone every other code would count as unused
    out = subprocess.run([ruff, "check", "--extend-select", "RUF100", "--output-format", "json",
                          "--exit-zero", *paths], capture_output=True, text=True, cwd=ROOT)
    if out.returncode != 0:
        raise SystemExit(f"ruff failed: {out.stderr.strip()}")
    found: dict[Path, dict[int, set[str]]] = {}
    for d in json.loads(out.stdout or "[]"):
        if d["code"] != "RUF100" or d.get("cell") is not None:
            continue  # notebook cells: left to `ruff check --fix`
        codes = set(UNUSED.findall(d["message"]))
        found.setdefault(Path(d["filename"]), {}).setdefault(d["location"]["row"], set()).update(codes)
    return found


def main(argv=None) -> int:
    paths = list(sys.argv[1:] if argv is None else argv) or ["."]
    changed = 0
    for path, rows in unused_noqa(paths).items():
        lines = path.read_text().splitlines(keepends=True)
        for row, codes in rows.items():
            old = lines[row - 1]
            end = "\n" if old.endswith("\n") else ""
            new = rewrite(old.rstrip("\n"), codes) + end
            if new != old:
                lines[row - 1] = new
                changed += 1
        path.write_text("".join(lines))
    print(f"rewrote {changed} noqa comment(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
