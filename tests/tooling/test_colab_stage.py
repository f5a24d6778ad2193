"""Staging the Colab rehearsal's wheels for the H100 (`python -m tools.colab_rehearsal stage`, tools/colab/stage.py): a device
call carries at most 64 MiB, so the wheels travel in folders s1..sN of at most --max-mib each,
large wheels split into <wheel>.partNN that one `cat` per wheel rebuilds, checked against
MANIFEST.sha256. And the venv under test never sees the PYTHONPATH that gives the tool nbformat
on the H100."""

from __future__ import annotations

import hashlib
import os
import random
import subprocess
import sys

from tools.colab.mirror import run
from tools.colab.stage import pack


def _wheels(folder, sizes):
    rng = random.Random(7)
    folder.mkdir()
    out = []
    for i, size in enumerate(sizes):
        f = folder / f"pkg{i}-1.{i}-py3-none-any.whl"
        f.write_bytes(rng.randbytes(size))
        out.append(f)
    return out


def test_pack_fills_folders_to_the_limit_and_cat_rebuilds_each_wheel(tmp_path):
    kib = 1024
    files = _wheels(tmp_path / "all", [300 * kib, 170 * kib, 90 * kib, 3 * kib, 2 * kib, 1 * kib])
    stage = tmp_path / "stage"
    (stage / "s9").mkdir(parents=True)  # a stale folder from an earlier stage: removed
    limit = 128 * kib
    folders = pack(files, stage, limit, split_over=16 * kib)
    dirs = sorted(stage.glob("s*"), key=lambda d: int(d.name[1:]))
    assert [d for d, _ in folders] == dirs and dirs[-1].name == f"s{len(dirs)}"
    total = sum(f.stat().st_size for f in files)
    # tight: every folder but the last is full, so no fewer folders could hold them
    assert len(dirs) == -(-total // (limit - len((dirs[0] / "MANIFEST.sha256").read_bytes())))
    for d in dirs:
        assert sum(f.stat().st_size for f in d.iterdir()) <= limit, d
    # the device's steps: copy every folder into one, `cat <wheel>.part??`, `sha256sum -c`
    w = tmp_path / "w"
    w.mkdir()
    for d in dirs:
        for f in d.iterdir():
            (w / f.name).write_bytes(f.read_bytes())
    parts = sorted(p.name for p in w.glob("*.part*"))
    assert parts and all(p.split(".part")[0] in {f.name for f in files} for p in parts)
    for first in w.glob("*.part00"):
        whole = first.name[: -len(".part00")]
        subprocess.run(f'cat "{whole}".part?? > "{whole}"', shell=True, cwd=w, check=True)
    check = subprocess.run(["sha256sum", "-c", "MANIFEST.sha256"], cwd=w, capture_output=True,
                           text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.count(": OK") == len(files)
    # small wheels travel whole
    assert all((w / f.name).exists() and not list(w.glob(f.name + ".part*"))
               for f in files if f.stat().st_size <= 16 * kib)
    for f in files:
        assert hashlib.sha256((w / f.name).read_bytes()).digest() == \
            hashlib.sha256(f.read_bytes()).digest()


def test_the_venv_under_test_does_not_see_the_tools_pythonpath(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    out = run([sys.executable, "-c", "import os; print(os.environ.get('PYTHONPATH'))"],
                  capture_output=True, text=True).stdout.strip()
    assert out == "None"
    assert os.environ["PYTHONPATH"] == str(tmp_path)  # the tool's own process keeps it
