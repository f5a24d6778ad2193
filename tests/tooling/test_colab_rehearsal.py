"""The Colab rehearsal, on every CI run (simulator): tools/colab_rehearsal.py builds a venv that
mirrors Colab's GPU image (records/colab/pip-freeze.gpu.txt), runs the setup cell's own install
step in it against a local wheel folder (no index, the course cloned from this checkout at the
pinned commit), then a lab master's check() calls and a chapter in that venv's Jupyter kernel.

It downloads its wheels first (about 300 MB, mostly Colab's CUDA 12 wheels; torch is left out:
neither notebook it runs imports it). Set COLAB_WHEELS to a folder to keep them between runs.
The H100 record of the same rehearsal (cu12 and cu13 paths) is records/colab/rehearsal_h100.json.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from repo import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.extended]   # downloads Colab's wheels and builds a venv that mirrors Colab

WHEELS = Path(os.environ.get("COLAB_WHEELS", ROOT / ".whl-colab"))


def _tool(*args, timeout):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_", "BOOK_"))}
    return subprocess.run([sys.executable, "-m", "tools.colab_rehearsal", *map(str, args)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def _pinned_commit_present() -> bool:
    """The cell clones this checkout at the pin: a shallow clone may not hold it (fetch it)."""
    sys.path.insert(0, str(ROOT))
    from autograder.setup_template import config

    has = lambda: subprocess.run(["git", "cat-file", "-e", config()["pin"] + "^{commit}"],  # noqa: E731
                                 cwd=ROOT, capture_output=True).returncode == 0
    if not has():
        subprocess.run(["git", "fetch", "--quiet", "--unshallow"], cwd=ROOT, capture_output=True)
    return has()


def test_setup_cell_on_a_colab_mirror(tmp_path):
    assert _pinned_commit_present(), "the pinned commit (_config.yml repository.pin) is not here"
    dl = _tool("download", "--wheels", WHEELS, "--extra", "cu12", timeout=1500)
    assert dl.returncode == 0, dl.stdout[-3000:] + dl.stderr[-3000:]
    out = tmp_path / "rehearsal.json"
    r = _tool("run", "--wheels", WHEELS, "--venv", tmp_path / "venv", "--extra", "auto",
              "--restart-check", "--out", out, timeout=2400)
    assert out.exists(), r.stdout[-3000:] + r.stderr[-3000:]
    rec = json.loads(out.read_text())
    (run,) = rec["runs"]
    report = json.dumps(run, indent=1)[-6000:]
    assert not run["mirror_mismatch"], report
    # On Colab the cell installs, picks cu12 (no driver answers here), changes no package the
    # kernel had imported, and says so in one line when it had to (the restart case).
    first = run["first_run"]
    assert first["rc"] == 0, report
    assert "Installing the course" in first["stdout"] and "numba-cuda[cu12]" in first["stdout"]
    assert "simulator" in first["stdout"] and "Runtime > Change runtime type" in first["stdout"]
    assert "numba-cuda" in run["changed"] and "swiglu-kernels" in run["changed"], report
    assert run["must_not_change_changed"] == [], report
    # run again (a restarted runtime): nothing to install
    assert run["second_run"]["rc"] == 0 and "Installing" not in run["second_run"]["stdout"]
    restart = run["restart_case"]
    assert restart["rc"] != 0 and "Restart needed: pip changed" in restart["stderr"], report
    assert "Runtime > Restart session" in restart["stderr"]
    # a lab's check() calls and a chapter (with its widget) ran in the mirror's kernel
    assert [n["rc"] for n in run["notebooks"]] == [0, 0], report
    assert rec["ok"] is True and r.returncode == 0
