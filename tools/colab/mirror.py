"""The Colab mirror: Colab's package versions (records/colab/pip-freeze.gpu.txt), a venv that
holds them installed from a wheel folder alone, and the environment the setup cell runs in
(pip reads the wheel folder; git clones this checkout instead of GitHub). Shared by the
verbs of ``python -m tools.colab_rehearsal``."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FREEZE = ROOT / "records" / "colab" / "pip-freeze.gpu.txt"

#: The packages that matter: what the course imports or the setup cell's install could touch,
#: and what a notebook needs to execute (Colab's Jupyter kernel).
MIRROR = (
    "numba", "numba-cuda", "llvmlite", "numpy",
    "cuda-bindings", "cuda-core", "cuda-pathfinder", "cuda-python", "cuda-toolkit",
    "nvidia-cuda-nvcc-cu12", "nvidia-cuda-nvrtc-cu12", "nvidia-cuda-runtime-cu12",
    "nvidia-cuda-cccl-cu12", "nvidia-nvjitlink-cu12",
    "ipywidgets", "anywidget", "matplotlib", "ipykernel", "nbclient", "pip", "setuptools", "wheel",
)
#: What Colab's kernel has imported before the first cell runs, and torch's pinned CUDA wheels:
#: the install must leave these alone (a changed one needs a restart, or breaks torch).
MUST_NOT_CHANGE = ("numpy", "ipywidgets", "anywidget", "traitlets", "ipykernel", "ipython",
                   "matplotlib", "nvidia-cuda-nvrtc-cu12", "nvidia-cuda-runtime-cu12",
                   "nvidia-nvjitlink-cu12", "nvidia-cuda-nvcc-cu12")
#: --system-site (the H100, where wheels travel at 64 MiB a call): these, and only these, are
#: linked in from the machine's own Python instead of Colab's versions (numba 0.68 and its
#: llvmlite; matplotlib and its imaging stack); everything the setup cell installs or the GPU
#: path loads stays Colab's, and the machine's own CUDA 13 wheels stay out of sight.
SYSTEM_SITE = ("numba", "llvmlite", "matplotlib", "pillow", "fonttools", "kiwisolver",
               "contourpy", "cycler", "pyparsing")


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def colab_pins() -> dict[str, str]:
    """{normalised name: version} from Colab's pip freeze (direct references left out)."""
    pins = {}
    for line in FREEZE.read_text(encoding="utf-8").splitlines():
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+)", line.strip())
        if m:
            pins[norm(m.group(1))] = m.group(2)
    return pins


def constraints(path: Path, skip=()) -> Path:
    """The freeze as pip constraints (local versions such as +cu128 are not on PyPI: left out)."""
    lines = [f"{n}=={v}" for n, v in colab_pins().items() if "+" not in v and n not in skip]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def mirror_requirements(skip=()) -> list[str]:
    pins = colab_pins()
    return [f"{n}=={pins[norm(n)]}" for n in MIRROR if n not in skip]


def clean_env(**extra) -> dict[str, str]:
    """This process's environment less PYTHONPATH, plus ``extra``."""
    return {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, **extra}


def run(cmd, **kw):
    """subprocess.run with str arguments, check=True and clean_env() unless given."""
    kw.setdefault("check", True)
    # The venv under test sees its own packages only: a PYTHONPATH that gives this tool what it
    # needs (nbformat on the H100, where the machine's Python has none) must not reach it.
    kw.setdefault("env", clean_env())
    return subprocess.run([str(c) for c in cmd], **kw)


_BORROW = """
import importlib.metadata as md, json, sys
out = []
for name in sys.argv[1:]:
    d = md.distribution(name)
    tops = {f.parts[0] for f in (d.files or []) if f.parts and not f.parts[0].startswith('..')}
    out += [str(d.locate_file(t)) for t in tops if not t.endswith('.pth')]
print(json.dumps(out))
"""


def borrow(py: Path, python: str, names) -> list[str]:
    """Link ``names`` (their packages and dist-info) from ``python``'s site-packages into the
    venv of ``py``: only these come from the machine; its other packages (its own CUDA 13 wheels
    on the H100) stay invisible to the venv and to pip."""
    paths = json.loads(run([python, "-c", _BORROW, *names], capture_output=True, text=True,
                            env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
                            ).stdout)
    site = Path(run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     capture_output=True, text=True).stdout.strip())
    for p in map(Path, paths):
        if p.exists() and not (site / p.name).exists():
            (site / p.name).symlink_to(p)
    return sorted(Path(p).name for p in paths)


def make_venv(venv: Path, python: str, wheels: Path, cons: Path, system_site=False) -> Path:
    """A fresh venv holding the mirror, installed from the wheel folder alone."""
    if venv.exists():
        shutil.rmtree(venv)
    run([python, "-m", "venv", "--without-pip", venv])
    py = venv / "bin" / "python"
    if system_site:
        borrow(py, python, SYSTEM_SITE)
    pip_whl = next(wheels.glob("pip-*.whl"))  # bootstrap Colab's pip from its own wheel
    run([py, f"{pip_whl}/pip", "install", "-q", "--no-index", "--disable-pip-version-check",
          pip_whl])
    run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-index",
          "--no-compile", "--find-links", wheels, "-c", cons,
          *mirror_requirements(SYSTEM_SITE if system_site else ())])
    return py


def versions(py: Path) -> dict[str, str]:
    out = run([py, "-m", "pip", "list", "--format", "json", "--disable-pip-version-check"],
               capture_output=True, text=True).stdout
    return {norm(d["name"]): d["version"] for d in json.loads(out)}


def course_git_env(source: Path) -> dict[str, str]:
    """Environment that makes git (and so pip's git+ URL) clone ``source`` instead of GitHub."""
    from autograder.setup_template import config

    return {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": f"url.{source}.insteadOf",
            "GIT_CONFIG_VALUE_0": config()["url"]}


def cell_env(wheels: Path, source: Path, extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PIP_", "PYTHON", "NUMBA_", "BOOK_", "VIRTUAL_ENV"))}
    env.update(course_git_env(source), COLAB_RELEASE_TAG="rehearsal", PIP_NO_INDEX="1",
               PIP_FIND_LINKS=str(wheels), PIP_NO_CACHE_DIR="1", PYTHONUNBUFFERED="1")
    if extra != "auto":
        env["COURSE_CUDA_EXTRA"] = extra
    return env
