"""tools.grader_report's end-of-run check: which processes of submissions are still alive."""

import json
import subprocess
import sys
from pathlib import Path
from repo import ROOT as REPO

from autograder.sandbox import CHILD_MARK



def test_leftovers_names_a_stray_driver_but_not_the_shell_that_started_the_report():
    # A stray process whose command line names the child's entry point is a leftover; the
    # shell that runs the report is not, even when its own command line names it (a `grep`
    # in the same command line), as on the H100 once.
    stray = subprocess.Popen(["bash", "-c", f"exec -a {CHILD_MARK}-stray sleep 60"])
    try:
        code = ("import json; from tools.grader_report import leftovers; "
                "print(json.dumps(leftovers()['alive']))")
        out = subprocess.run(["bash", "-c", f"{sys.executable} -c \"{code}\"; : {CHILD_MARK}"],
                             cwd=REPO, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        alive = json.loads(out.stdout.strip().splitlines()[-1])
        assert any(a.startswith(f"{stray.pid}:") for a in alive), alive
        assert not any("bash -c" in a for a in alive), alive  # the calling shell
    finally:
        stray.kill()
        stray.wait()


def _copy(out: Path, sid: str, fraction: float, of_ref: float, remeasured=None) -> None:
    # the fields tools.grader_report.result reads from a GPU run's results.json (export.gradescope_json)
    (out / sid).mkdir(parents=True)
    perf = {"fraction": fraction, "fraction_of_reference": of_ref, "basis": "master",
            "verified": True, "remeasured": remeasured}
    (out / sid / "results.json").write_text(json.dumps(
        {"score": 12.0, "tests": [], "extra_data": {"max_score": 12, "status": "graded",
                                                     "performance": perf}}))


def test_batch_step_states_the_spread_the_masters_fraction_and_the_remeasured(tmp_path):
    from tools.grader_report import batch_stats, render_batch_stats

    out = tmp_path / "batch"
    for i, (f, r) in enumerate([(0.99, 0.95), (1.01, 0.97), (1.00, 0.93), (0.98, 0.96)]):
        _copy(out, f"student_{i:03d}", f, r)
    log = [{"kind": "master", "gpu": 0, "fraction_of_reference": 0.956, "bandwidth": 2.9e12},
           {"kind": "master", "gpu": 1, "fraction_of_reference": 0.843, "bandwidth": 4.0e12},
           {"kind": "remeasure_due", "id": "student_001"},
           {"kind": "remeasure", "id": "student_001", "first_fraction": 0.81, "fraction": 0.83},
           {"kind": "timing", "id": "student_000"}]
    (out / "measurements.jsonl").write_text("".join(json.dumps(r) + "\n" for r in log))
    b = batch_stats(out, [f"student_{i:03d}" for i in range(5)])   # the fifth was never graded
    f = b["fractions"]
    assert (f["n"], f["min"], f["median"], f["max"]) == (4, 0.98, 0.995, 1.01)
    assert abs(f["spread"] - 0.03) < 1e-12
    r = b["fractions_of_reference"]
    assert (r["min"], r["max"]) == (0.93, 0.97) and abs(r["spread"] - 0.04) < 1e-12
    assert [(m["gpu"], m["fraction_of_reference"]) for m in b["masters"]] == [(0, 0.956), (1, 0.843)]
    assert (b["remeasured"], b["remeasure_due"], b["basis"]) == (1, 1, ["master"])
    text = "\n".join(render_batch_stats(b))
    assert "spread (max - min) 3.00 percentage points over 4 copies" in text
    assert "The lab's master on GPU 1: 84.3% of torch's reference" in text
    assert "re-measured alone because they lay near a scoring line: 1" in text


def test_batch_step_with_nothing_measured_says_so(tmp_path):
    from tools.grader_report import batch_stats, render_batch_stats

    (tmp_path / "empty").mkdir()
    b = batch_stats(tmp_path / "empty", ["student_000"])
    assert b["fractions"]["n"] == 0 and b["remeasured"] == 0 and b["masters"] == []
    assert "none measured" in "\n".join(render_batch_stats(b))


def test_every_committed_report_renders_from_its_summary():
    # report.md is rendered from summary.json by the script; every committed record must still
    # render (a record written by one version and rendered by the next once failed to)
    from tools import grader_report

    summaries = sorted((REPO / "records" / "grader").rglob("summary.json"))
    assert summaries
    for p in summaries:
        text = grader_report.render(json.loads(p.read_text()))
        assert text.startswith("# The autograder on a GPU"), p


def test_the_labs_step_grades_a_labs_own_fixtures_and_reports_them():
    # tests/fixtures/labN/ holds a lab's hostile and unusual files (lab 5's); the GPU report's
    # labs step grades them beside the master and lists each with its flags and first failure
    from tools import grader_report

    lab = "lab5_tensor_core_dual_gemm"
    assert {p.stem for p in grader_report.lab_fixtures(lab)} >= {
        "cublas_ctypes", "float32_cuda_cores", "missing_cp_async_wait", "transposed_fragments"}
    # and every lab's bounds fixtures and lesson control (issue 28)
    assert {p.stem for p in grader_report.lab_fixtures("lab3_half_precision")} == {
        "lab3_writes_past_end", "lab3_forgets_blockidx_x", "lab3_two_byte_loads"}
    assert {p.stem for p in grader_report.lab_fixtures(lab)} >= {
        "lab5_writes_past_end", "lab5_forgets_blockidx_x", "lab5_forgets_blockidx_y", "lab5_two_pass"}
    summaries = sorted((REPO / "records" / "grader").rglob("summary.json"))
    s = next(json.loads(p.read_text()) for p in summaries if "labs" in json.loads(p.read_text()))
    said = [("public", 0, 1, "`out` wrong for x [5, 64]: first bad index (0, 0)")]
    s["labs"] = {lab: {"solution": {"score": 8, "max": 12}, "untouched": {"score": 0, "max": 12},
                       "fixtures": {"transposed_fragments": {"score": 0, "max": 12, "said": said,
                                                             "flags": []},
                                    "cublas_ctypes": {"score": 0, "max": 12, "said": [],
                                                      "flags": ["reaches into the grader's process"]}}}}
    text = grader_report.render(s)
    # the rows of the labs' table (the steps' table names the lab too, with its wall time)
    section = text.split("## The other labs", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in section.splitlines() if ln.startswith(f"| {lab} |")]
    assert [r.split(" | ")[1] for r in rows] == ["solution", "untouched", "cublas_ctypes",
                                                  "transposed_fragments"]
    assert "first bad index" in rows[3] and "reaches into the grader's process" in rows[2]


def test_every_committed_grader_record_states_the_grader_commit_it_ran():
    """records/grader/: each summary.json's provenance names the commit of the grader that ran
    (COURSE_COMMIT on the device machine, which has no .git: the report refuses to run without
    one), and its report.md says the same; a record made before a rule it no longer meets is
    marked stale in the folder's README."""
    records = REPO / "records" / "grader"
    summaries = sorted(records.rglob("summary.json"))
    assert summaries
    for path in summaries:
        commit = json.loads(path.read_text())["provenance"].get("commit")
        assert commit and len(commit) >= 7 and all(c in "0123456789abcdef" for c in commit), path
        assert f"(commit {commit})." in (path.parent / "report.md").read_text(), path
    for path in sorted(records.glob("*.json")):   # the probes' records beside them
        assert json.loads(path.read_text())["provenance"].get("commit"), path
    readme = (records / "README.md").read_text()
    for path in summaries:   # every record is described there, by its folder
        assert f"`{path.parent.relative_to(records).as_posix()}/`" in readme, path
    r = subprocess.run([sys.executable, "-c", "import sys; from tools.grader_report import main; "
                        "sys.exit(main([sys.argv[1], '--only', 'none']))", str(REPO / "no-such-out")],
                       cwd="/", env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO),
                                     "BOOK_SIMULATOR": "1", "GIT_DIR": "/nonexistent"},
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "COURSE_COMMIT=<the commit of this tree>" in r.stderr, r.stderr
    assert not (REPO / "no-such-out").exists()

