"""The sandbox as a package (issue 21): what the grader tells a child is one typed definition
that the launcher and the driver read; the files copied into every child depend on nothing
the child cannot see; the simulator's thread limit is defined once; no other module reaches
into the package's private names or submodules."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tempfile

import pytest

from repo import ROOT as REPO

from autograder.sandbox import (SIM_MAX_THREADS, TRUSTED_FILES, Child, DriverSettings,
                                LaunchSettings, Limits, Storage)


# the sandbox's own copies: the launcher and the modules it (and the driver) import by name
SANDBOX_COPIES = [name for name, src in TRUSTED_FILES.items() if src.parent.name == "sandbox"]


def settings(**launch) -> DriverSettings:
    return DriverSettings(
        mode="student", functions={"swiglu_interleaved": ["x", "out"]}, simulated=True,
        workdir="/tmp/ag-1-x", trusted_dir="/tmp/ag-1-x/trusted", extra_paths=["/venv/lib"],
        cmd_fd=5, reply_fd=6, isolate=True, hide=["/root"], drop_uid=None, nproc=2112,
        storage=Storage(private=True, places=(("/tmp", ".tmp"),), keep=["/venv"],
                        size_bytes=1 << 30, files=100),
        launch=LaunchSettings(**{"contain": "pidns", "cgroup": None, "grader_pid": os.getpid(),
                                 "pids_cgroup": None, "driver": "/tmp/ag-1-x/trusted/agdriver.py",
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
    """The launcher, as copied into a child (beside the sandbox's other copies, nothing else;
    `python -I`, no repository on its path), loads the settings and, not started by the
    grader named in them, exits at once (status 5) as it must."""
    assert "aglauncher.py" in SANDBOX_COPIES
    for name in SANDBOX_COPIES:
        (tmp_path / name).write_bytes(TRUSTED_FILES[name].read_bytes())
    cfg = tmp_path / "config.json"
    cfg.write_text(settings(grader_pid=1).to_json())
    r = subprocess.run([sys.executable, "-I", "-B", str(tmp_path / "aglauncher.py"), str(cfg)],
                       cwd=tmp_path, env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 5, r.stderr
    # and its folder (the child's uid's) is off its import path once its modules are loaded:
    # the launcher stays alive as root while the submission runs
    code = ("import importlib.util, sys\n"
            "spec = importlib.util.spec_from_file_location('aglauncher', sys.argv[1])\n"
            "spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
            "print(any(p.rstrip('/') == sys.argv[2] for p in sys.path))\n")
    r = subprocess.run([sys.executable, "-I", "-B", "-c", code, str(tmp_path / "aglauncher.py"), str(tmp_path)],
                       cwd="/", capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "False", r.stdout + r.stderr


def test_the_trusted_copies_import_only_the_standard_library_and_each_other():
    """What the sandbox's copies import must exist in the child: the standard library and the
    other copies, never the autograder package (hidden from the child)."""
    copies = {name[:-3] for name in TRUSTED_FILES}
    for name in SANDBOX_COPIES:
        tree = ast.parse(TRUSTED_FILES[name].read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                assert node.level == 0, f"{name}: relative import"
                mods = [node.module]
            elif isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            else:
                continue
            for mod in mods:
                top = mod.split(".")[0]
                assert top in copies or top in sys.stdlib_module_names, f"{name} imports {mod}"


def test_the_judges_message_names_the_limit_the_driver_applies():
    from autograder.judge import too_large_message

    assert f"at most {SIM_MAX_THREADS:,} threads per launch" in too_large_message("a launch")
    driver = (REPO / "autograder" / "driver.py").read_text()
    assert "from agsettings import SIM_MAX_THREADS" in driver and "65536" not in driver


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
