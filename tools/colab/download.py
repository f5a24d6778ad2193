"""`download` (needs the network, once): fill a folder with wheels, the packages that matter
from Colab's image at Colab's versions and exactly the files the setup cell's install step
would add on top of them (learned with `pip install --dry-run --report` in a mirror venv)."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from tools.colab.mirror import (clean_env, constraints, course_git_env, make_venv,
                                mirror_requirements, norm, run)


def download(wheels: Path, python: str, extras: list[str], source: Path) -> None:
    wheels.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        cons = constraints(Path(tmp) / "colab-constraints.txt")
        pyver = run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                     capture_output=True, text=True).stdout.strip()
        run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
              "--only-binary=:all:", "--python-version", pyver, "-d", wheels, "-c", cons,
              *mirror_requirements()])
        py = make_venv(Path(tmp) / "venv", python, wheels, cons)
        from autograder.setup_template import config, numba_cuda_pin

        cfg = config()
        for extra in extras:
            report = Path(tmp) / f"report-{extra}.json"
            env = clean_env(**course_git_env(source))
            run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--dry-run",
                  "--find-links", wheels, "--report", report,
                  f"numba-cuda[{extra}]=={numba_cuda_pin()}",
                  f"{cfg['dist']} @ git+{cfg['url']}@{cfg['pin']}"], env=env)
            # the course itself is built from git at install time; its build backend too
            want = [f"{i['metadata']['name']}=={i['metadata']['version']}"
                    for i in json.loads(report.read_text())["install"]
                    if norm(i["metadata"]["name"]) != norm(cfg["dist"])]
            want.append("setuptools>=64")
            run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
                  "--only-binary=:all:", "--no-deps", "--python-version", pyver, "-d", wheels,
                  *want])
            print(f"{extra}: the setup cell's install adds {', '.join(want[:-1])}")
