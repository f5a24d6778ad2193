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
2. the setup cell, rendered from tools/setup_cell.py and unchanged, runs in it as on Colab
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
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
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
#: What Colab's kernel has imported when the first cell runs (its IPython kernel, widgets, the
#: inline plots): the cell runs after these imports, so a change to any of them shows.
COLAB_KERNEL_IMPORTS = "import IPython, ipykernel, traitlets, ipywidgets, numpy, matplotlib\n"
#: --restart-check: a student who ran `from numba import cuda` before the setup cell.
RESTART_PRELUDE = "from numba import cuda\n"
LAB = "solutions/lab2_packed_swiglu.ipynb"
CHAPTER = "chapters/02_roofline.ipynb"  # its roofline explorer widget; no torch


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


def _env(**extra) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, **extra}


def _run(cmd, **kw):
    kw.setdefault("check", True)
    # The venv under test sees its own packages only: a PYTHONPATH that gives this tool what it
    # needs (nbformat on the H100, where the machine's Python has none) must not reach it.
    kw.setdefault("env", _env())
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
    paths = json.loads(_run([python, "-c", _BORROW, *names], capture_output=True, text=True,
                            env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
                            ).stdout)
    site = Path(_run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     capture_output=True, text=True).stdout.strip())
    for p in map(Path, paths):
        if p.exists() and not (site / p.name).exists():
            (site / p.name).symlink_to(p)
    return sorted(Path(p).name for p in paths)


def make_venv(venv: Path, python: str, wheels: Path, cons: Path, system_site=False) -> Path:
    """A fresh venv holding the mirror, installed from the wheel folder alone."""
    if venv.exists():
        shutil.rmtree(venv)
    _run([python, "-m", "venv", "--without-pip", venv])
    py = venv / "bin" / "python"
    if system_site:
        borrow(py, python, SYSTEM_SITE)
    pip_whl = next(wheels.glob("pip-*.whl"))  # bootstrap Colab's pip from its own wheel
    _run([py, f"{pip_whl}/pip", "install", "-q", "--no-index", "--disable-pip-version-check",
          pip_whl])
    _run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-index",
          "--no-compile", "--find-links", wheels, "-c", cons,
          *mirror_requirements(SYSTEM_SITE if system_site else ())])
    return py


def versions(py: Path) -> dict[str, str]:
    out = _run([py, "-m", "pip", "list", "--format", "json", "--disable-pip-version-check"],
               capture_output=True, text=True).stdout
    return {norm(d["name"]): d["version"] for d in json.loads(out)}


def course_git_env(source: Path) -> dict[str, str]:
    """Environment that makes git (and so pip's git+ URL) clone ``source`` instead of GitHub."""
    sys.path.insert(0, str(ROOT))
    from autograder.setup_cell import config

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


# --------------------------------------------------------------------------
# download (network)

def download(wheels: Path, python: str, extras: list[str], source: Path) -> None:
    wheels.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        cons = constraints(Path(tmp) / "colab-constraints.txt")
        pyver = _run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                     capture_output=True, text=True).stdout.strip()
        _run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
              "--only-binary=:all:", "--python-version", pyver, "-d", wheels, "-c", cons,
              *mirror_requirements()])
        py = make_venv(Path(tmp) / "venv", python, wheels, cons)
        from autograder.setup_cell import config, numba_cuda_pin

        cfg = config()
        for extra in extras:
            report = Path(tmp) / f"report-{extra}.json"
            env = _env(**course_git_env(source))
            _run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--dry-run",
                  "--find-links", wheels, "--report", report,
                  f"numba-cuda[{extra}]=={numba_cuda_pin()}",
                  f"{cfg['dist']} @ git+{cfg['url']}@{cfg['pin']}"], env=env)
            # the course itself is built from git at install time; its build backend too
            want = [f"{i['metadata']['name']}=={i['metadata']['version']}"
                    for i in json.loads(report.read_text())["install"]
                    if norm(i["metadata"]["name"]) != norm(cfg["dist"])]
            want.append("setuptools>=64")
            _run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
                  "--only-binary=:all:", "--no-deps", "--python-version", pyver, "-d", wheels,
                  *want])
            print(f"{extra}: the setup cell's install adds {', '.join(want[:-1])}")


# --------------------------------------------------------------------------
# stage (for the device: at most 64 MiB a call)

def stage_set(wheels: Path, python: str, extras: list[str], source: Path) -> list[Path]:
    """The wheels of ``wheels`` that `run --system-site --extra <extras>` installs: the mirror
    (less what --system-site borrows from ``python``), what the setup cell's install adds for
    each extra (pip's own dry run, as in the cell), and the build backend the course's sdist
    build takes from the folder (the newest setuptools there, as pip's isolated build picks)."""
    from autograder.setup_cell import config, numba_cuda_pin

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        cons = constraints(tmp / "colab-constraints.txt", SYSTEM_SITE)
        py = make_venv(tmp / "venv", python, wheels, cons, system_site=True)
        need = set(versions(py).items())
        cfg = config()
        for extra in extras:
            report = tmp / f"report-{extra}.json"
            _run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--dry-run",
                  "--no-index", "--find-links", wheels, "--report", report,
                  f"numba-cuda[{extra}]=={numba_cuda_pin()}",
                  f"{cfg['dist']} @ git+{cfg['url']}@{cfg['pin']}"],
                 env=_env(**course_git_env(source)))
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


# --------------------------------------------------------------------------
# record-errors (on a GPU): the real error strings numba-cuda raises, for the diagnosis tests

_ERR_PRELUDE = """
import json, sys, traceback
import numpy as np
from numba import cuda

def chain(e):
    out, seen = [], set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        code = getattr(e, "code", None)
        out.append({"type": type(e).__module__ + "." + type(e).__qualname__,
                    "code": int(code) if isinstance(code, int) or hasattr(code, "__int__") else None,
                    "str": str(e)})
        e = e.__cause__ or e.__context__
    return out

def newer_ptx(bump):
    # PTX NVVM wrote for this GPU, its ISA version raised by `bump` minor versions: it stands
    # for PTX from a newer CUDA toolkit than the driver / nvJitLink here.
    import re
    def k(a):
        i = cuda.grid(1)
        if i < a.size:
            a[i] += 1
    ptx, _ = cuda.compile_ptx_for_current_device(k, "void(float32[:])")
    m = re.search(r"^\\.version (\\d+)\\.(\\d+)", ptx, re.M)
    new = "%s.%d" % (m.group(1), int(m.group(2)) + bump)
    return ptx.replace(m.group(0), ".version " + new, 1), m.group(0), new

try:
    detail = {}
BODY
    print(json.dumps({"raised": None, "detail": detail}))
except Exception as e:
    print(json.dumps({"raised": chain(e), "detail": detail}))
"""

# Each case: (name, environment overrides, body run inside the try above).
ERROR_CASES = {
    "no_gpu": ({"CUDA_VISIBLE_DEVICES": ""}, "    cuda.to_device(np.zeros(4, np.float32))"),
    "out_of_memory": ({}, "    cuda.device_array(2**40 // 4, dtype=np.float32)  # 1 TiB"),
    # EAGER: with lazy loading the driver would JIT the PTX only at the first launch
    "driver_older_than_ptx": ({"CUDA_MODULE_LOADING": "EAGER"}, (
        "    import re\n"
        "    ptx, old, new = newer_ptx(5)\n"
        "    detail.update(ptx_version_written=old, ptx_version_loaded=new)\n"
        "    mod = cuda.current_context().create_module_ptx(ptx)  # the driver loads the PTX\n"
        "    mod.get_function(re.search('[.]entry ([A-Za-z0-9_]+)', ptx).group(1))")),
    "nvjitlink_older_than_ptx_link": ({}, (
        "    import os, tempfile\n"
        "    ptx, old, new = newer_ptx(5)\n"
        "    detail.update(ptx_version_written=old, ptx_version_linked=new)\n"
        "    path = os.path.join(tempfile.mkdtemp(), 'newer.ptx'); open(path, 'w').write(ptx)\n"
        "    @cuda.jit(link=[path])\n"
        "    def k2(a):\n"
        "        a[0] = 1\n"
        "    k2[1, 1](cuda.to_device(np.zeros(1, np.float32)))  # nvJitLink links the PTX")),
    "nvjitlink_older_than_nvvm": ({}, (
        "    @cuda.jit\n"
        "    def k3(a):\n"
        "        i = cuda.grid(1)\n"
        "        if i < a.size:\n"
        "            a[i] += 1\n"
        "    k3[1, 32](cuda.to_device(np.zeros(32, np.float32)))  # a plain kernel launch")),
}


def _stack_versions(py: str, env: dict) -> dict:
    code = ("import json, ctypes, importlib.metadata as md\n"
            "v = ctypes.c_int(0); ctypes.CDLL('libcuda.so.1').cuDriverGetVersion(ctypes.byref(v))\n"
            "out = {'driver_cuda': v.value}\n"
            "try:\n    from cuda.bindings import nvjitlink; out['nvjitlink'] = nvjitlink.version()\n"
            "except Exception as e:\n    out['nvjitlink'] = repr(e)\n"
            "for d in ('numba', 'numba-cuda', 'numpy', 'cuda-bindings', 'cuda-core', 'nvidia-nvvm',\n"
            "          'nvidia-cuda-nvcc-cu12', 'nvidia-nvjitlink', 'nvidia-nvjitlink-cu12'):\n"
            "    try: out[d] = md.version(d)\n"
            "    except md.PackageNotFoundError: pass\n"
            "print(json.dumps(out))\n")
    p = _run([py, "-c", code], env=env, capture_output=True, text=True, check=False)
    return json.loads(p.stdout) if p.returncode == 0 else {"error": p.stderr[-500:]}


def record_errors(py: str, cases: list[str]) -> dict:
    out = {}
    for name in cases:
        extra_env, body = ERROR_CASES[name]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_", "BOOK_"))}
        env.update(extra_env)
        p = _run([py, "-c", _ERR_PRELUDE.replace("BODY", body)], env=env, capture_output=True, text=True,
                 check=False, timeout=300)
        try:
            res = json.loads(p.stdout.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            res = {"raised": None, "crash": (p.stdout + p.stderr)[-3000:]}
        res["env"] = extra_env
        res["versions"] = _stack_versions(py, env)
        out[name] = res
    return out


#: The setup cell on "Colab" (COLAB_RELEASE_TAG) where the course is already installed at the
#: pin, so it goes straight to `import book` and the GPU check: as it works, with no GPU
#: selected, and with the GPU's memory taken (by this same process, before the cell).
_FILL_GPU = """
from cuda.bindings import driver as _d
_d.cuInit(0); _, _dev = _d.cuDeviceGet(0); _, _ctx = _d.cuDevicePrimaryCtxRetain(_dev)
_d.cuCtxSetCurrent(_ctx); _held = []
for _mb in (4096, 1024, 256, 64, 16, 4, 1):  # take every MiB there is, in ever smaller pieces
    while True:
        _err, _ptr = _d.cuMemAlloc(_mb << 20)
        if _err != _d.CUresult.CUDA_SUCCESS:
            break
        _held.append(_ptr)
"""
CELL_CASES = {
    "gpu": ({}, ""),
    "no_gpu_selected": ({"CUDA_VISIBLE_DEVICES": ""}, ""),
    "gpu_memory_taken": ({}, _FILL_GPU),
}


def cell_cases(py: str, names) -> dict:
    out = {}
    for name in names:
        extra_env, prelude = CELL_CASES[name]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_", "BOOK_"))}
        env.update(extra_env, COLAB_RELEASE_TAG="rehearsal", PIP_NO_INDEX="1")
        p = _run([py, "-c", prelude + rendered_cell()], env=env, capture_output=True, text=True,
                 check=False, timeout=300, cwd=tempfile.gettempdir())  # not this tree's book
        out[name] = {"env": extra_env, "rc": p.returncode, "stdout": p.stdout[-3000:],
                     "stderr": p.stderr[-1500:]}
    return out


# --------------------------------------------------------------------------
# run (no network)

def rendered_cell() -> str:
    from autograder.setup_cell import render

    return render()


def run_cell(py: Path, env: dict, cwd: Path, timeout: int = 900,
             prelude: str = COLAB_KERNEL_IMPORTS) -> dict:
    t0 = time.perf_counter()
    p = _run([py, "-c", prelude + rendered_cell()], env=env, cwd=cwd, capture_output=True, text=True,
             check=False, timeout=timeout)
    return {"rc": p.returncode, "seconds": round(time.perf_counter() - t0, 1),
            "stdout": p.stdout[-4000:], "stderr": p.stderr[-4000:]}


def execute_notebook(py: Path, nb_path: Path, env: dict, workdir: Path, timeout: int) -> dict:
    """Execute a copy of ``nb_path`` (today's setup cell applied) in the venv's own kernel."""
    import nbformat

    from autograder.setup_cell import fix

    nb = nbformat.read(nb_path, as_version=4)
    fix(nb)
    copy = workdir / nb_path.name
    nbformat.write(nb, copy)
    runner = ("import sys, nbformat, nbclient\n"
              "nb = nbformat.read(sys.argv[1], as_version=4)\n"
              "nbclient.NotebookClient(nb, timeout=int(sys.argv[2]), kernel_name='python3',\n"
              "    resources={'metadata': {'path': sys.argv[3]}}).execute()\n"
              "nbformat.write(nb, sys.argv[1])\n")
    t0 = time.perf_counter()
    p = _run([py, "-c", runner, copy, timeout, workdir], env=env, cwd=workdir,
             capture_output=True, text=True, check=False, timeout=timeout * 4)
    out = nbformat.read(copy, as_version=4)
    texts = ["".join(o.get("text", "") for o in c.get("outputs", []) if o.get("output_type") == "stream")
             for c in out.cells if c.cell_type == "code"]
    return {"notebook": str(nb_path.relative_to(ROOT)), "rc": p.returncode,
            "seconds": round(time.perf_counter() - t0, 1), "setup_cell_output": texts[0][-2000:]
            if texts else "", "error": p.stderr[-3000:] if p.returncode else ""}


def rehearse(wheels: Path, venv: Path, python: str, extra: str, source: Path,
             notebooks: list[str], timeout: int, system_site: bool = False,
             restart_check: bool = False) -> dict:
    skip = SYSTEM_SITE if system_site else ()
    rec: dict = {"extra": extra, "python": python,
                 "from_the_machine_not_colab": list(skip)}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        cons = constraints(tmp / "colab-constraints.txt", skip)
        py = make_venv(venv, python, wheels, cons, system_site)
        if restart_check:  # a copy of the mirror before the install (hard links: instant;
            # pip replaces files rather than writing into them, so the copy stays as it was)
            copy = venv.with_name(venv.name + "-restart")
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(venv, copy, symlinks=True, copy_function=os.link)
            pristine = copy / "bin" / "python"
        rec["python_version"] = _run([py, "-c", "import sys; print(sys.version.split()[0])"],
                                     capture_output=True, text=True).stdout.strip()
        before = versions(py)
        pins = colab_pins()
        rec["mirror_mismatch"] = {n: [pins.get(norm(n)), before.get(norm(n))] for n in MIRROR
                                  if n not in skip and before.get(norm(n)) != pins.get(norm(n))}
        env = cell_env(wheels, source, extra)
        rec["first_run"] = run_cell(py, env, tmp)
        after = versions(py)
        rec["changed"] = {n: [before.get(n), after.get(n)] for n in sorted(set(before) | set(after))
                          if before.get(n) != after.get(n)}
        rec["must_not_change_changed"] = [n for n in MUST_NOT_CHANGE if norm(n) in rec["changed"]]
        rec["second_run"] = run_cell(py, env, tmp)
        rec["notebooks"] = [execute_notebook(py, ROOT / nb, env, tmp, timeout) for nb in notebooks]
        if restart_check:  # the untouched mirror; numba.cuda imported before the cell
            rec["restart_case"] = run_cell(pristine, env, tmp, prelude=RESTART_PRELUDE)
    rec["ok"] = (rec["first_run"]["rc"] == 0 and rec["second_run"]["rc"] == 0
                 and "Installing" not in rec["second_run"]["stdout"]
                 and not rec["must_not_change_changed"]
                 and not rec["mirror_mismatch"] and all(n["rc"] == 0 for n in rec["notebooks"])
                 and (not restart_check or "Restart needed" in rec["restart_case"]["stderr"]))
    return rec


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
    sys.path.insert(0, str(ROOT))
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
