"""tools/execute.py starts a notebook's kernel again when it dies on start (a clean CI build
lost one kernel that way: "Kernel died before replying to kernel_info", a race for ports
between kernels started side by side), and says so when it never starts. Real kernels: a
kernelspec named python3 (found first through JUPYTER_PATH) whose launcher exits before the
kernel starts as many times as asked, then runs ipykernel."""

import json
import sys
import time
from pathlib import Path

import nbformat
import pytest

from tools import execute

LAUNCHER = """
import os, sys
count = os.environ["DIE_COUNT_FILE"]
n = int(open(count).read()) if os.path.exists(count) else 0
open(count, "w").write(str(n + 1))
if n < int(os.environ["DIE_TIMES"]):
    sys.exit(3)  # the kernel process ends before it ever answers
os.execv(sys.executable, [sys.executable, "-m", "ipykernel_launcher", *sys.argv[1:]])
"""


@pytest.fixture
def dying_kernel(tmp_path, monkeypatch):
    spec = tmp_path / "jupyter" / "kernels" / "python3"
    spec.mkdir(parents=True)
    launcher = tmp_path / "launcher.py"
    launcher.write_text(LAUNCHER)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, str(launcher), "-f", "{connection_file}"],
        "display_name": "Python 3 (dies on start)", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("DIE_COUNT_FILE", str(tmp_path / "starts"))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print('ran', 6 * 7)")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    path = tmp_path / "one.ipynb"
    nbformat.write(nb, path)

    def run(times):
        monkeypatch.setenv("DIE_TIMES", str(times))
        (tmp_path / "starts").unlink(missing_ok=True)
        waits.clear()
        out = execute._run(str(path), 60, False)  # an absolute path: ROOT / path is path
        return out, int((tmp_path / "starts").read_text())

    # the pause before each new start (1 s, then 2 s) is asked for, not slept (tools.execute's
    # own `time` only: the Jupyter client's clocks are untouched)
    waits = []

    class Clock:
        sleep = staticmethod(waits.append)

        def __getattr__(self, name):
            return getattr(time, name)

    monkeypatch.setattr(execute, "time", Clock())
    run.waits = waits

    return run


def test_a_kernel_that_dies_on_start_is_started_again(dying_kernel, capsys):
    (rel, text, seconds, err), starts = dying_kernel(1)
    assert err is None and starts == 2 and dying_kernel.waits == [1]
    outputs = nbformat.reads(text, as_version=4).cells[0].outputs
    assert "ran 42" in outputs[0]["text"]
    assert "died on start (1 of 3); starting it again" in capsys.readouterr().out


def test_a_kernel_that_never_starts_is_reported_as_that(dying_kernel):
    (rel, text, seconds, err), starts = dying_kernel(execute.KERNEL_STARTS)
    assert text is None and starts == execute.KERNEL_STARTS
    assert dying_kernel.waits == list(range(1, execute.KERNEL_STARTS))
    assert f"died before it started, {execute.KERNEL_STARTS} times" in err
    assert "not an error in the notebook" in err and Path(rel).name == "one.ipynb"
    assert execute._last_error_line(err).startswith("RuntimeError: the Jupyter kernel")


def test_a_kernel_that_died_leaves_no_exit_hook_behind(tmp_path):
    """nbclient leaves its cleanup registered with atexit for a kernel that died on start; at
    the end of the test run each printed "Exception ignored in atexit callback" and an
    AssertionError (issue 43: four of them ended `make test`). A process whose kernel dies
    once, then starts, exits quietly."""
    import os
    import subprocess

    spec = tmp_path / "jupyter" / "kernels" / "python3"
    spec.mkdir(parents=True)
    launcher = tmp_path / "launcher.py"
    launcher.write_text(LAUNCHER)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, str(launcher), "-f", "{connection_file}"],
        "display_name": "Python 3 (dies on start)", "language": "python"}))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print('ran', 6 * 7)")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    path = tmp_path / "one.ipynb"
    nbformat.write(nb, path)
    root = Path(execute.__file__).resolve().parents[1]
    code = (f"import sys; sys.path.insert(0, {str(root)!r}); from tools import execute; "
            f"r = execute._run({str(path)!r}, 60, False); print('error:', r[3])")
    env = dict(os.environ, JUPYTER_PATH=str(tmp_path / "jupyter"),
               DIE_COUNT_FILE=str(tmp_path / "starts"), DIE_TIMES="1")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=root, env=env, timeout=180)
    assert "error: None" in run.stdout, run.stdout + run.stderr
    assert (tmp_path / "starts").read_text() == "2"  # it did die once
    assert "Exception ignored in atexit" not in run.stderr, run.stderr[-2000:]


def test_the_kernels_start_without_the_tcp_warning(tmp_path):
    """Every kernel logged "Kernel is running over TCP without encryption" at start: twelve
    lines of `make book` (issue 43). The kernels are started with their log kept to errors."""
    import subprocess

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    path = tmp_path / "one.ipynb"
    nbformat.write(nb, path)
    root = Path(execute.__file__).resolve().parents[1]
    code = (f"import sys; sys.path.insert(0, {str(root)!r}); from tools import execute; "
            f"r = execute._run({str(path)!r}, 60, False); print('error:', r[3])")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=root, timeout=120)
    assert "error: None" in run.stdout, run.stdout + run.stderr
    assert "without encryption" not in run.stderr, run.stderr
