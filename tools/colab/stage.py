"""`stage` (for the device: at most 64 MiB a call): pick from a `download`ed folder exactly
the wheels a `run --system-site` uses, and pack them into folders s1..sN of at most a given
size: large wheels split into `<wheel>.partNN` (one `cat <wheel>.part*` rebuilds each), and
MANIFEST.sha256 (`sha256sum -c` format) in every folder for the rebuilt wheels."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tempfile
from pathlib import Path

from tools.colab.mirror import (SYSTEM_SITE, clean_env, constraints, course_git_env, make_venv,
                                norm, run, versions)


def stage_set(wheels: Path, python: str, extras: list[str], source: Path) -> list[Path]:
    """The wheels of ``wheels`` that `run --system-site --extra <extras>` installs: the mirror
    (less what --system-site borrows from ``python``), what the setup cell's install adds for
    each extra (pip's own dry run, as in the cell), and the build backend the course's sdist
    build takes from the folder (the newest setuptools there, as pip's isolated build picks)."""
    from autograder.setup_template import config, numba_cuda_pin

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        cons = constraints(tmp / "colab-constraints.txt", SYSTEM_SITE)
        py = make_venv(tmp / "venv", python, wheels, cons, system_site=True)
        need = set(versions(py).items())
        cfg = config()
        for extra in extras:
            report = tmp / f"report-{extra}.json"
            run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--dry-run",
                  "--no-index", "--find-links", wheels, "--report", report,
                  f"numba-cuda[{extra}]=={numba_cuda_pin()}",
                  f"{cfg['dist']} @ git+{cfg['url']}@{cfg['pin']}"],
                 env=clean_env(**course_git_env(source)))
            need |= {(norm(i["metadata"]["name"]), i["metadata"]["version"])
                     for i in json.loads(report.read_text())["install"]}
    def key(f: Path):
        return norm(f.name.split("-")[0]), f.name.split("-")[1]

    files = sorted(f for f in wheels.glob("*.whl") if key(f) in need)
    setuptools_whls = sorted(wheels.glob("setuptools-*.whl"),
                    key=lambda f: tuple(int(x) for x in re.findall(r"\d+", key(f)[1])))
    if setuptools_whls and setuptools_whls[-1] not in files:
        files.append(setuptools_whls[-1])
    found = {key(f) for f in files}
    # borrowed from the machine, or built from git by the cell: not wheels in the folder
    missing = sorted(f"{n}=={v}" for n, v in need - found
                     if n not in map(norm, SYSTEM_SITE) and n != norm(cfg["dist"]))
    if missing:
        raise SystemExit(f"{wheels} lacks wheels for {', '.join(missing)}: run `download` "
                         "with the same --python and --extra first")
    return files


def pack(files: list[Path], stage_dir: Path, max_bytes: int, split_over: int = 4 << 20):
    """Pack ``files`` into stage_dir/s1..sN, each at most ``max_bytes``: wheels over
    ``split_over`` bytes (largest first) fill the folders in order, split at the folder's edge
    into <wheel>.partNN; the small ones go whole into the first folder with room (a new one
    last). Returns [(folder, [(name, bytes)])]."""
    manifest = "".join(f"{hashlib.sha256(f.read_bytes()).hexdigest()}  {f.name}\n"
                       for f in files).encode()
    cap = max_bytes - len(manifest)
    bins: list[list] = []  # [[room, [(name, source, offset, size)]]]
    big = sorted((f for f in files if f.stat().st_size > split_over),
                 key=lambda f: -f.stat().st_size)
    for f in big:
        size, off, part = f.stat().st_size, 0, 0
        while off < size:
            if not bins or bins[-1][0] == 0:
                bins.append([cap, []])
            n = min(bins[-1][0], size - off)
            name = f.name if (off == 0 and n == size) else f"{f.name}.part{part:02d}"
            bins[-1][1].append((name, f, off, n))
            bins[-1][0] -= n
            off, part = off + n, part + 1
    for f in sorted((f for f in files if f.stat().st_size <= split_over),
                    key=lambda f: -f.stat().st_size):
        size = f.stat().st_size
        b = next((b for b in bins if b[0] >= size), None)
        if b is None:
            b = [cap, []]
            bins.append(b)
        b[1].append((f.name, f, 0, size))
        b[0] -= size
    for old in stage_dir.glob("s[0-9]*"):
        shutil.rmtree(old)
    out = []
    for i, (_, items) in enumerate(bins, 1):
        d = stage_dir / f"s{i}"
        d.mkdir(parents=True)
        (d / "MANIFEST.sha256").write_bytes(manifest)
        for name, src, off, n in items:
            with open(src, "rb") as r, open(d / name, "wb") as w:
                r.seek(off)
                w.write(r.read(n))
        out.append((d, [(name, n) for name, _, _, n in items]))
    return out
