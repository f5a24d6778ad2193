"""tools.grader_report's end-of-run check: which processes of submissions are still alive."""

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_leftovers_names_a_stray_driver_but_not_the_shell_that_started_the_report():
    # A stray process whose command line names the driver is a leftover; the shell that runs
    # the report is not, even when its own command line names the driver (a `grep agdriver`
    # in the same command line), as on the H100 once.
    stray = subprocess.Popen(["bash", "-c", "exec -a agdriver-stray sleep 60"])
    try:
        code = ("import json; from tools.grader_report import leftovers; "
                "print(json.dumps(leftovers()['alive']))")
        out = subprocess.run(["bash", "-c", f"{sys.executable} -c \"{code}\"; : agdriver"],
                             cwd=REPO, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        alive = json.loads(out.stdout.strip().splitlines()[-1])
        assert any(a.startswith(f"{stray.pid}:") for a in alive), alive
        assert not any("bash -c" in a for a in alive), alive  # the calling shell
    finally:
        stray.kill()
        stray.wait()
