"""GitHub runs what CI runs, and the README says how (issue 43): a workflow runs the tests as
`.ci/run` does, both workflows take torch from its CPU index, and the README names the
workflow, that index and the CHROMIUM override the Makefile reads."""

import re

import yaml

from repo import ROOT

WORKFLOWS = ROOT / ".github" / "workflows"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def steps(name):
    flow = yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))
    return [s for job in flow["jobs"].values() for s in job.get("steps", [])]


def test_a_workflow_runs_the_tests_as_ci_does():
    assert "make test" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    runs = [s for s in steps("tests.yml") if s.get("run", "").strip() == ".ci/run"]
    assert runs, "tests.yml has no step that runs .ci/run"
    assert runs[0].get("env", {}).get("PIP_EXTRA_INDEX_URL") == CPU_INDEX


def test_the_pages_build_takes_the_cpu_torch_too():
    env = {k: v for s in steps("pages.yml") for k, v in s.get("env", {}).items()}
    assert env.get("PIP_EXTRA_INDEX_URL") == CPU_INDEX


def test_the_readme_says_how_to_install_run_and_point_at_a_browser():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"PIP_EXTRA_INDEX_URL={CPU_INDEX} make book" in readme
    assert ".github/workflows/tests.yml" in readme and ".ci/run" in readme
    assert "CHROMIUM=/path/to/chromium" in readme
    assert re.search(r"CHROMIUM \?= /usr/bin/chromium",
                     (ROOT / "Makefile").read_text(encoding="utf-8"))
    # the sizes and times it quotes say where they come from
    assert re.search(r"issue 43.*2026-11-28", readme.replace("\n", " "))
