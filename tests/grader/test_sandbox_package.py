"""The sandbox as a package (issues 21, 29): what the grader tells a child is one typed
definition that the launcher and the driver read; the child's side is a package of its own
(autograder/sandbox/inside), copied whole into every child and started by its entry point,
whose modules import by their real names and depend on nothing the child cannot see; the
simulator's thread limit is defined once; no other module reaches into the package's private
names or submodules."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tempfile

import pytest

from repo import ROOT as REPO

from autograder.sandbox import (CHILD_PACKAGE, SIM_MAX_THREADS, Child, DriverSettings,
                                LaunchSettings, Limits, Storage, child_command, copy_trusted)

INSIDE = REPO / "autograder" / "sandbox" / "inside"
# what the launcher imports (it runs as root before the child's path is set): the standard
# library and these modules of the package, nothing else
LAUNCHER_SIDE = {"launcher", "isolation", "privilege", "permissions", "seccomp", "linux",
                 "process", "settings", "__main__"}


def settings(**launch) -> DriverSettings:
    return DriverSettings(
        mode="student", functions={"swiglu_interleaved": ["x", "out"]}, simulated=True,
        workdir="/tmp/ag-1-x", trusted_dir="/tmp/ag-1-x/trusted", extra_paths=["/venv/lib"],
        cmd_fd=5, reply_fd=6, isolate=True, hide=["/root"], drop_uid=None, nproc=2112,
        storage=Storage(private=True, places=(("/tmp", ".tmp"),), keep=["/venv"],
                        size_bytes=1 << 30, files=100),
        launch=LaunchSettings(**{"contain": "pidns", "cgroup": None, "grader_pid": os.getpid(),
                                 "pids_cgroup": None,
                                 "entry": "/tmp/ag-1-x/trusted/autograder/sandbox/inside/__main__.py",
                                 "limits": Limits.of({"cpu_s": 30}), "fresh_proc": True,
                                 "wrap": [], "net_around_wrap": False, **launch}))


def test_settings_survive_their_json_unchanged():
    s = settings(wrap=["compute-sanitizer", "--tool", "memcheck"], net_around_wrap=True)
    back = DriverSettings.from_json(s.to_json())
    assert back == s
    assert back.launch.limits.cpu_s == 30 and back.launch.limits.tasks == Limits().tasks
    assert back.storage.places == (("/tmp", ".tmp"),) and back.functions["swiglu_interleaved"] == ("x", "out")


def test_a_key_one_side_does_not_know_is_an_error_not_a_default():
    """The bug this replaced: the driver read `sim_max_threads` with a default, a key nothing
    set. A setting the reader does not define now fails when the settings are read."""
    raw = json.loads(settings().to_json())
    raw["sim_max_threads"] = 10
    with pytest.raises(TypeError, match="sim_max_threads"):
        DriverSettings.from_json(json.dumps(raw))


def test_an_unknown_limit_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown sandbox limit\(s\) 'mem_mib'.*mem_bytes"):
        Limits.of({"mem_mib": 512})

    def folders():   # a child's working folder is ag-<grader pid>-... in the temporary directory
        return {n for n in os.listdir(tempfile.gettempdir()) if n.startswith(f"ag-{os.getpid()}-")}
    before = folders()
    with pytest.raises(ValueError, match="'cpu_seconds'"):   # before any folder or process is made
        Child(mode="student", functions={}, cells=None, simulated=True, limits={"cpu_seconds": 5})
    assert folders() == before


def test_the_copied_launcher_reads_its_settings_alone(tmp_path):
    """The launcher, started by the entry point of the child's copy (`python -I`, no repository
    on its path), loads the settings and, not started by the grader named in them, exits at
    once (status 5) as it must."""
    trusted = tmp_path / "trusted"
    copy_trusted(trusted)
    cfg = tmp_path / "config.json"
    cfg.write_text(settings(grader_pid=1).to_json())
    r = subprocess.run(child_command(trusted, "launcher", cfg), cwd=tmp_path,
                       env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=60)
    assert r.returncode == 5, r.stderr


def test_the_launchers_folder_is_off_its_path_once_its_modules_are_loaded(tmp_path):
    """The folder belongs to the child's uid (the submission may write there) while the
    launcher stays alive as root: the entry point takes it off the import path once the
    launcher's modules are imported. Its launch() here replaced by a report of the path."""
    trusted = tmp_path / "trusted"
    copy_trusted(trusted)
    launcher = trusted / "autograder" / "sandbox" / "inside" / "launcher.py"
    launcher.write_text(launcher.read_text() + "\n\ndef launch(cfg_path):\n"
                        "    import sys\n    print(sorted(sys.path))\n")
    r = subprocess.run(child_command(trusted, "launcher", tmp_path / "config.json"), cwd="/",
                       env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("["), r.stdout + r.stderr
    assert str(trusted) not in r.stdout, r.stdout


def test_the_child_gets_the_inside_package_whole_and_the_inputs_and_nothing_of_the_grader(tmp_path):
    """The child's copy: every file of autograder/sandbox/inside, autograder/inputs.py, two
    empty package files around them, and book without its kernels (but the instructions)."""
    copy_trusted(tmp_path / "t")
    got = {str(p.relative_to(tmp_path / "t")) for p in (tmp_path / "t" / "autograder").rglob("*.py")}
    want = {f"autograder/sandbox/inside/{p.name}" for p in INSIDE.glob("*.py")}
    assert CHILD_PACKAGE == ("autograder/sandbox/inside", "autograder/inputs.py")
    assert got == want | {"autograder/inputs.py", "autograder/__init__.py",
                          "autograder/sandbox/__init__.py"}
    for stub in ("autograder/__init__.py", "autograder/sandbox/__init__.py"):
        assert "import" not in (tmp_path / "t" / stub).read_text()
    kernels = tmp_path / "t" / "book" / "kernels"
    assert {str(p.relative_to(kernels)) for p in kernels.rglob("*.py")} == {
        "__init__.py", "aliases.py", "instructions/__init__.py", "instructions/tensorcore.py"}
    assert (kernels / "instructions" / "tensorcore.py").read_bytes() == \
        (REPO / "book" / "kernels" / "instructions" / "tensorcore.py").read_bytes()



def test_the_child_imports_the_graded_instructions_by_their_old_name_and_no_other_kernel(tmp_path):
    """The child's copy of book.kernels: tensorcore at its layer's path, its old name
    book.kernels.tensorcore the same module (the old name graded code imports), the import
    blocker letting through those and nothing else of book.kernels."""
    copy_trusted(tmp_path / "t")
    code = (
        "import importlib, sys\n"
        "sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[1] + '/autograder/sandbox/inside')\n"
        "import book\n"
        "from import_blocker import Blocker\n"
        "blocker = Blocker(sys.argv[1])\n"
        "print(sorted(blocker.allowed))\n"
        "sys.meta_path.insert(0, blocker)\n"
        "from book.kernels.tensorcore import shfl_xor\n"
        "from book.kernels import tensorcore as tc\n"
        "assert tc is importlib.import_module('book.kernels.instructions.tensorcore')\n"
        "assert tc.shfl_xor is shfl_xor and tc.__file__.startswith(sys.argv[1])\n"
        "for name in ('book.kernels.mma_gemm', 'book.kernels.gemms.mma_gemm', 'book.kernels.fragments'):\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ImportError as e:\n"
        "        print('refused', name)\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["NUMBA_ENABLE_CUDASIM"] = "1"
    out = subprocess.run([sys.executable, "-I", "-c", code, str(tmp_path / "t")], env=env,
                         capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[-4] == str(["book.kernels", "book.kernels.aliases", "book.kernels.instructions",
                             "book.kernels.instructions.tensorcore", "book.kernels.tensorcore"])
    assert lines[-3:] == ["refused book.kernels.mma_gemm", "refused book.kernels.gemms.mma_gemm",
                          "refused book.kernels.fragments"]

def _imports(path):
    """(module, level) of every import in ``path`` (inside functions too)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module is None:   # from . import x
            yield from ((a.name, node.level) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            yield node.module, node.level
        elif isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, 0


def test_the_child_side_imports_by_real_names_and_only_what_the_child_has():
    """The child's side imports its own modules relatively (tools follow them), the inputs as
    autograder.inputs, and otherwise the standard library, numpy, numba, cuda-bindings and
    the child's copy of book; the launcher's side the standard library alone."""
    child_side = {"numpy", "numba", "cuda", "book"}
    for path in INSIDE.glob("*.py"):
        for mod, level in _imports(path):
            top = mod.split(".")[0]
            if level == 1:   # a module of the package
                assert (INSIDE / f"{top}.py").exists(), f"{path.name}: from .{mod}"
                if path.stem in LAUNCHER_SIDE:
                    assert top in LAUNCHER_SIDE, f"{path.name} (the launcher's side) imports .{mod}"
            elif level == 3:   # the grader's inputs, which the child's copy holds
                assert mod == "inputs", f"{path.name}: from ...{mod}"
            elif level == 0 and path.name == "__main__.py" and top == "autograder":
                assert mod.startswith("autograder.sandbox.inside."), mod
            else:
                assert level == 0, f"{path.name}: relative import of level {level}"
                assert top in sys.stdlib_module_names or (
                    path.stem not in LAUNCHER_SIDE and top in child_side), f"{path.name} imports {mod}"


def test_nothing_of_the_child_side_runs_on_import():
    """Isolation starts in the entry point, not in an import: importing every module of the
    package in the grader's process leaves its namespaces and uid as they were."""
    code = ("import importlib, os, pkgutil\n"
            "import book\n"
            "import autograder.sandbox.inside as inside\n"
            "ns = lambda: [os.readlink(f'/proc/self/ns/{n}') for n in ('mnt', 'net', 'ipc')] + [os.getuid()]\n"
            "before = ns()\n"
            "for m in pkgutil.iter_modules(inside.__path__):\n"
            "    importlib.import_module('autograder.sandbox.inside.' + m.name)\n"
            "print('same' if ns() == before else f'changed {before} {ns()}')\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                       timeout=300, env={**os.environ, "PYTHONPATH": str(REPO), "BOOK_SIMULATOR": "1"})
    assert r.stdout.strip().splitlines()[-1:] == ["same"], r.stdout + r.stderr


def test_the_judges_message_names_the_limit_the_driver_applies():
    from autograder.judge import too_large_message

    assert f"at most {SIM_MAX_THREADS:,} threads per launch" in too_large_message("a launch")
    launches = (INSIDE / "launches.py").read_text()
    assert "from .settings import SIM_MAX_THREADS" in launches and "65536" not in launches


def test_no_module_reaches_into_the_package():
    """Other modules import the sandbox's public names from `autograder.sandbox`: neither a
    private name nor a submodule (the package may move its parts)."""
    bad = []
    for folder in ("autograder", "benchmarks", "tools", "tests"):
        for path in (REPO / folder).rglob("*.py"):
            if "sandbox" in path.relative_to(REPO).parts[1:-1]:
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[-1] == "sandbox":
                    bad += [f"{path}: {a.name}" for a in node.names if a.name.startswith("_")]
                elif isinstance(node, ast.ImportFrom) and node.module and ".sandbox." in f".{node.module}":
                    bad.append(f"{path}: from {node.module}")
                elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                        and node.value.id == "sandbox" and node.attr.startswith("_"):
                    bad.append(f"{path}: sandbox.{node.attr}")
    assert not bad, bad


def test_a_recording_is_copied_as_its_launches_name_it(tmp_path):
    """Red-team finding: the grader copied every regular file of a child's recording folder
    (where the submission's code may write) into the run's folder, up to 3 GiB a recording, five
    proofs a submission, kept after the run: a class of such files filled the instructor's
    disk. Only launches.json and the files it names are copied."""
    import json

    from autograder.recording import copy_recording

    rec = tmp_path / "child" / "rec_t0"
    rec.mkdir(parents=True)
    (rec / "launches.json").write_text(json.dumps({
        "launches": [], "images": {"k": "img_k.cubin"}, "scratch": [{"name": "s", "size": 4, "file": "s.bin"}]}))
    (rec / "img_k.cubin").write_bytes(b"image")
    (rec / "s.bin").write_bytes(b"1234")
    (rec / "junk.bin").write_bytes(b"x" * 4096)
    (rec / "zz_phantom.py").write_text("x = 1\n")
    dest = copy_recording(tmp_path / "child", "rec_t0", tmp_path / "copy")
    assert sorted(p.name for p in dest.iterdir()) == ["img_k.cubin", "launches.json", "s.bin"]


def test_what_the_child_writes_for_the_grader_keeps_its_mode_whatever_the_umask(tmp_path):
    """A submission that sets os.umask(0o777) (red team, 2026-11-29) made the child's
    launches.json unreadable to the grader, which runs as another uid, and the student read a
    PermissionError of the grader's own file as theirs. The child's trusted writes set their
    modes with fchmod / chmod, which no umask masks."""
    import stat

    import numpy as np

    from autograder import sandbox as P

    rec = tmp_path / "rec_1"
    old = os.umask(0o777)
    try:
        P.folder_for_grader(str(rec))
        with P.open_for_grader(str(rec / "launches.json"), "w") as f:
            f.write("{}")
        with P.open_for_grader(str(rec / "out_1_out.npy")) as f:
            np.save(f, np.arange(3))
    finally:
        os.umask(old)
    assert stat.S_IMODE(rec.stat().st_mode) == 0o755
    for name in ("launches.json", "out_1_out.npy"):
        assert stat.S_IMODE((rec / name).stat().st_mode) == 0o644, name
    assert np.load(rec / "out_1_out.npy").tolist() == [0, 1, 2]


def test_the_childs_files_for_the_grader_are_written_one_way():
    """Every file calls.py and launches.py write for the grader goes through
    permissions.open_for_grader (a bare open() or np.save(path) would take the umask the
    submission left)."""
    import re

    inside = REPO / "autograder" / "sandbox" / "inside"
    for name in ("calls.py", "launches.py"):
        text = (inside / name).read_text()
        assert not re.search(r"np\.save\((?!f,)", text), name
        assert not re.search(r"\bopen\([^)]*[\"']w", text), name
        assert "os.makedirs(" not in text, name
