"""Chapter recordings (records/chapters/, made on a GPU by `python -m tools.record`): every
recording matches its chapter's code, and a changed cell is caught and named.

No GPU or build needed: these read the notebooks.
"""

from __future__ import annotations

import json
from pathlib import Path
import shutil
import tarfile
import time

import nbformat
import psutil
import pytest

from repo import ROOT
from tools import record, recordings


def _recorded_chapters() -> list[str]:
    return [f"chapters/{p.name}" for p in recordings.all_recordings()]


def test_every_recording_matches_its_chapter():
    """Fails when a code cell changed since its chapter was recorded on the GPU: the message names
    the chapter, the cell and the command that records it again."""
    recorded = _recorded_chapters()
    if not recorded:
        pytest.skip(f"no recordings in records/chapters/{recordings.PUBLISHED_GPU}/ yet")
    problems = []
    for src in recorded:
        if not (ROOT / src).is_file():
            problems.append(f"{src}: recorded, but the chapter no longer exists (remove "
                            f"{recordings.record_path(src).relative_to(ROOT)})")
            continue
        rec = recordings.find(src)
        if rec.problems:
            problems.append(rec.stale_message())
        assert not rec.provenance.get("simulated"), f"{src} was recorded in the simulator"
        for key in ("gpu", "date", "commit", "driver_cuda", "numba_cuda"):
            assert rec.provenance.get(key), f"{src}: the recording's provenance lacks {key!r}"
    assert not problems, "\n\n".join(problems)


def test_every_chapter_has_a_gpu_recording():
    """The published site shows GPU outputs on every chapter: each chapter the book executes has
    a recording (a fresh chapter falls back to the simulator, labelled, until it is recorded)."""
    from tools.execute import executed_notebooks

    missing = [src for src in executed_notebooks() if not recordings.find(src).exists]
    shown = {src: recordings.find(src) for src in executed_notebooks()}
    for src, rec in shown.items():   # the recording a page shows, another GPU's included
        if rec.exists:
            assert not rec.problems, rec.stale_message()
            assert not rec.provenance.get("simulated") and rec.provenance.get("gpu"), src
    assert not missing, (
        "no GPU recording in records/chapters/ for: "
        + ", ".join(missing) + f"\nRecord them on a GPU: {recordings.RECORD_COMMAND} "
        + " ".join(missing) + f", then {recordings.INSTALL_COMMAND} here.")


def test_a_chapter_the_published_gpu_never_recorded_shows_another_gpus_recording(tmp_path):
    """A chapter newer than the published GPU's last session (only an H200 was lent since) is
    shown with another GPU's recording, named by its provenance; the published GPU's comes
    first wherever it has one, and a GPU asked for by name is that GPU's only."""
    _fake_recording(tmp_path)
    pub = recordings.record_path("chapters/x.ipynb", root=tmp_path)
    other = recordings.record_path("chapters/x.ipynb", "h200", root=tmp_path)
    other.parent.mkdir(parents=True)
    pub.rename(other)
    rec = recordings.find("chapters/x.ipynb", root=tmp_path)
    assert rec.usable and rec.path == other
    assert recordings.find("chapters/x.ipynb", root=tmp_path, gpu=recordings.PUBLISHED_GPU).path is None
    pub.write_bytes(other.read_bytes())
    assert recordings.find("chapters/x.ipynb", root=tmp_path).path == pub


def test_of_two_current_recordings_the_later_is_shown_and_a_stale_one_never(tmp_path):
    """A chapter recorded again on another GPU (only an H200 lent) without a code change shows
    the later run (what the library prints now: a refusal reworded); a later recording whose
    code is stale is passed over for the current one."""
    _fake_recording(tmp_path)
    pub = recordings.record_path("chapters/x.ipynb", root=tmp_path)
    other = recordings.record_path("chapters/x.ipynb", "h200", root=tmp_path)
    other.parent.mkdir(parents=True)
    later = nbformat.read(pub, as_version=4)
    later.cells[2].outputs = [nbformat.v4.new_output("stream", name="stdout", text="2 (H200)\n")]
    recordings.stamp(later, {"gpu": "NVIDIA H200", "date": "2026-11-29T00:00:00+00:00",
                             "commit": "fedcba9876543210", "simulated": False},
                     "chapters/x.ipynb", 1.0)
    nbformat.write(later, other)
    rec = recordings.find("chapters/x.ipynb", root=tmp_path)
    assert rec.usable and rec.path == other and rec.provenance["gpu"] == "NVIDIA H200"
    # the same date: the published GPU's
    later.metadata[recordings.META_KEY]["provenance"]["date"] = "2026-11-22T00:00:00+00:00"
    nbformat.write(later, other)
    assert recordings.find("chapters/x.ipynb", root=tmp_path).path == pub
    # the later one recorded before a code change: stale, so the published one is shown
    later.metadata[recordings.META_KEY]["provenance"]["date"] = "2026-11-29T00:00:00+00:00"
    later.cells[1].source = "a = 5"
    recordings.stamp(later, later.metadata[recordings.META_KEY]["provenance"],
                     "chapters/x.ipynb", 1.0)
    nbformat.write(later, other)
    assert not recordings.find("chapters/x.ipynb", root=tmp_path, gpu="h200").usable
    assert recordings.find("chapters/x.ipynb", root=tmp_path).path == pub


def _fake_recording(tmp_path, src_rel="chapters/x.ipynb"):
    """A tiny chapter and its recording, stamped the way tools.record stamps one."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# X"), nbformat.v4.new_code_cell("a = 1"),
                nbformat.v4.new_code_cell("print(a + 1)")]
    (tmp_path / "chapters").mkdir()
    nbformat.write(nb, tmp_path / src_rel)
    rec = nbformat.from_dict(json.loads(nbformat.writes(nb)))
    rec.cells[2].outputs = [nbformat.v4.new_output("stream", name="stdout", text="2\n")]
    recordings.stamp(rec, {"gpu": "NVIDIA H100 80GB HBM3", "date": "2026-11-22T00:00:00+00:00",
                           "commit": "0123456789abcdef", "simulated": False}, src_rel, 1.0)
    path = recordings.record_path(src_rel, root=tmp_path)
    path.parent.mkdir(parents=True)
    nbformat.write(rec, path)
    return nb


def test_a_changed_cell_makes_the_recording_stale_and_is_named(tmp_path):
    nb = _fake_recording(tmp_path)
    rec = recordings.find("chapters/x.ipynb", root=tmp_path)
    assert rec.usable, rec.problems
    merged = recordings.with_recorded_outputs(nb, rec)
    assert merged.cells[2].outputs[0]["text"] == "2\n" and not nb.cells[2].outputs
    # prose edits need no new recording
    nb.cells[0].source = "# X, retitled"
    nbformat.write(nb, tmp_path / "chapters/x.ipynb")
    assert recordings.find("chapters/x.ipynb", root=tmp_path).usable
    # a code edit does
    nb.cells[2].source = "print(a + 2)"
    nbformat.write(nb, tmp_path / "chapters/x.ipynb")
    rec = recordings.find("chapters/x.ipynb", root=tmp_path)
    assert not rec.usable
    msg = rec.stale_message()
    assert "chapters/x.ipynb" in msg and "code cell 2 ('print(a + 2)') changed" in msg
    assert "python -m tools.record --out DIR chapters/x.ipynb" in msg
    # a removed cell too
    nb.cells = nb.cells[:2]
    nbformat.write(nb, tmp_path / "chapters/x.ipynb")
    assert "cells removed" in " ".join(recordings.find("chapters/x.ipynb", root=tmp_path).problems)


def test_a_recording_edited_by_hand_is_refused(tmp_path):
    _fake_recording(tmp_path)
    path = recordings.record_path("chapters/x.ipynb", root=tmp_path)
    rec = nbformat.read(path, as_version=4)
    rec.cells[1].source = "a = 41"  # outputs no longer from the code beside them
    nbformat.write(rec, path)
    assert "edited by hand" in " ".join(recordings.find("chapters/x.ipynb", root=tmp_path).problems)


def test_install_puts_a_bundle_in_place_and_skips_failed_chapters(tmp_path):
    _fake_recording(tmp_path)
    src_rec = recordings.record_path("chapters/x.ipynb", root=tmp_path)
    bundle = tmp_path / "chapters-h100.tar.gz"
    index = {"provenance": {"gpu": "NVIDIA H100 80GB HBM3", "simulated": False},
             "gpu_slug": "h100",
             "chapters": [{"notebook": "chapters/x.ipynb", "ok": True, "seconds": 1.0},
                          {"notebook": "chapters/y.ipynb", "ok": False, "seconds": 2.0,
                           "cell": 3, "error": "ZeroDivisionError"}]}
    with tarfile.open(bundle, "w:gz") as tar:
        tar.add(src_rec, "x.ipynb")
        (tmp_path / "index.json").write_text(json.dumps(index))
        tar.add(tmp_path / "index.json", "index.json")
    shutil.rmtree(src_rec.parent)
    assert record.install(bundle, root=tmp_path) == 0
    assert recordings.find("chapters/x.ipynb", root=tmp_path).usable
    assert not recordings.record_path("chapters/y.ipynb", root=tmp_path).exists()


def _notebook(path, *sources):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.cells = [nbformat.v4.new_markdown_cell("# T")] + [nbformat.v4.new_code_cell(s)
                                                        for s in sources]
    nbformat.write(nb, path)
    return str(path)


@pytest.mark.slow
def test_record_names_a_failing_and_a_hanging_chapter_and_still_writes_the_bundle(tmp_path):
    """Real kernels: one chapter runs, one raises in its 2nd code cell, one hangs and is killed
    (kernel included) at its time limit; the bundle and the summary hold all three."""
    good = _notebook(tmp_path / "good.ipynb", "x = 6 * 7", "print(x)",
                     "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()")
    bad = _notebook(tmp_path / "bad.ipynb", "y = 1", "1 / 0", "print('never')")
    pidfile = tmp_path / "kernel.pid"
    hang = _notebook(tmp_path / "hang.ipynb",
                     f"import os, time\nopen({str(pidfile)!r}, 'w').write(str(os.getpid()))\n"
                     "time.sleep(600)")
    out = tmp_path / "out"
    rc = record.record(out, [good, bad, hang], timeout=20, cell_timeout=600)
    assert rc == 1
    summary = json.loads((out / "record-summary.json").read_text())
    rows = {Path(r["notebook"]).name: r for r in summary["chapters"]}
    assert rows["good.ipynb"]["ok"]
    assert not rows["bad.ipynb"]["ok"] and rows["bad.ipynb"]["cell"] == 2
    assert "ZeroDivisionError" in rows["bad.ipynb"]["error"]
    assert not rows["hang.ipynb"]["ok"] and "killed after 20 s" in rows["hang.ipynb"]["error"]
    kernel = int(pidfile.read_text())
    time.sleep(1)
    assert not psutil.pid_exists(kernel) or psutil.Process(kernel).status() == "zombie", \
        "the hanging chapter's kernel outlived its time limit"
    assert summary["provenance"]["date"] and "command" in summary["provenance"]
    (bundle,) = out.glob("chapters-*.tar.gz")
    with tarfile.open(bundle) as tar:
        names = set(tar.getnames())
        assert {"good.ipynb", "failed/bad.ipynb", "index.json"} <= names
        nb = nbformat.reads(tar.extractfile("good.ipynb").read().decode(), as_version=4)
    assert nb.cells[2].outputs[0]["text"] == "42\n"
    # figures are recorded (IPython's inline backend, not a headless one inherited from here)
    assert any("image/png" in o.get("data", {}) for o in nb.cells[3].outputs), nb.cells[3].outputs
    meta = nb.metadata[recordings.META_KEY]
    assert [c["sha256"] for c in meta["cells"]] == recordings.cell_hashes(nb)
    assert meta["provenance"] == summary["provenance"]


def test_recorded_widgets_draw_with_the_librarys_current_code():
    """A chapter's saved widget state keeps its recorded data, but its front-end code (_esm,
    _css) is the library's as it is now: a widget fix reaches the page with no new recording.
    Chapter 2's recording, its roofline explorer's code replaced by an old stand-in."""
    import book.widgets.roofline as rw

    rec = recordings.find("chapters/02_roofline.ipynb")
    assert rec.usable, rec.problems
    state = rec.notebook.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    [model] = [m["state"] for m in state.values()
               if m["state"].get("_anywidget_id") == "book.widgets.roofline.RooflineExplorer"]
    model["_esm"], model["_css"] = "// the code of an older commit", "/* old */"
    data = {k: v for k, v in model.items() if not k.startswith("_")}
    src = nbformat.read(ROOT / "chapters/02_roofline.ipynb", as_version=4)
    merged = recordings.with_recorded_outputs(src, rec)
    [now] = [m["state"] for m in merged.metadata["widgets"][
        "application/vnd.jupyter.widget-state+json"]["state"].values()
        if m["state"].get("_anywidget_id") == "book.widgets.roofline.RooflineExplorer"]
    assert now["_esm"] == rw.RooflineExplorer._esm and now["_css"] == rw.RooflineExplorer._css
    assert {k: v for k, v in now.items() if not k.startswith("_")} == data   # measurements kept
