"""benchmarks/ holds the standing instruments, at most 18 scripts: every one names, in a
`Record:` line at its top, the record it writes (under records/ or book/data/, whose folder
exists; a record not made yet names the folder it goes into), and nothing but the scripts lives
there (what they write goes to records/ or book/data/, never here). The one exception is
device_env.sh, the helper the device sessions source. A device session's runbook (a
*_session.sh: the commands of one GPU session) lies beside the records it made, under records/.
Diagnostics whose question is closed are retired, their findings kept in the records' READMEs;
one question asked of several labs is one script with an argument (lab_master_probe.py --lab N).
The scripts still put the repository on sys.path themselves (`python3 benchmarks/X.py`, as the
runbooks call them), not run as modules; each says in its docstring how to run it.

The map (tests/tooling/test_contributing.py checks it names every file): the suite's phases
alone, decode_bench.py, tensorcore_bench.py, hopper_bench.py; FP8, fp8_bench.py,
fp8_decode_bench.py, norm_quant_bench.py; tuning, gemm_bench.py, tensorcore_tune.py; counters
and traces, ncu_check.py, ncu_diagnose.py, tensorcore_ncu.py, profile_decode.py, sass_dump.py,
coalescing.py, weight_stream.py; the labs' masters, lab_master_probe.py (--lab N),
lesson_controls_probe.py; notes.py (no GPU); device_env.sh."""

from __future__ import annotations

import importlib.util
import re

import pytest
from repo import ROOT

BENCH = ROOT / "benchmarks"
HELPERS = {"device_env.sh": "sourced by the device sessions; it writes nothing"}
SCRIPTS = sorted(p.name for p in BENCH.iterdir() if p.is_file() and p.name not in HELPERS)
MOST = 18
RUNBOOKS = sorted((ROOT / "records").rglob("*.sh"))


def records_named(path) -> list[str]:
    head = "\n".join(path.read_text().splitlines()[:40])
    m = re.search(r"^#? ?Record: (.*(?:\n#? ?\S.*)*)", head, re.M)
    return re.findall(r"`((?:records|book/data)/[^`]*)`", m.group(1)) if m else []


def test_benchmarks_holds_scripts_only():
    assert all(n.endswith((".py", ".sh")) for n in SCRIPTS), SCRIPTS
    assert not [p for p in BENCH.iterdir() if p.is_dir() and p.name != "__pycache__"]


def test_benchmarks_holds_standing_instruments_only():
    """At most MOST scripts, and no runbook: a session's commands go with its records."""
    assert len(SCRIPTS) <= MOST, (f"benchmarks/ holds {len(SCRIPTS)} scripts (at most {MOST}): "
                                  "retire a diagnostic whose question is closed (its findings in "
                                  "the records' README) or make one script of several")
    runbooks = [n for n in SCRIPTS if n.endswith(".sh")]
    assert not runbooks, f"{runbooks}: a device session's runbook lies beside its records"


@pytest.mark.parametrize("name", SCRIPTS)
def test_each_script_names_the_record_it_writes(name):
    named = records_named(BENCH / name)
    assert named, f"benchmarks/{name} names no record: a `Record:` line at its top (records/ " \
                  "or book/data/), or, if its question is closed, retire it (records' READMEs)"
    for rec in named:
        assert (ROOT / rec).parent.is_dir(), f"benchmarks/{name} names {rec}, whose folder does not exist"


@pytest.mark.parametrize("name", sorted(HELPERS))
def test_a_helper_is_sourced_by_a_session(name):
    assert RUNBOOKS, "no device session's runbook under records/"
    assert any(f"benchmarks/{name}" in p.read_text() for p in RUNBOOKS), name


def test_runbooks_call_themselves_where_they_lie():
    """A runbook moved beside its records names its new path in its usage lines."""
    for p in RUNBOOKS:
        text = p.read_text()
        assert f"benchmarks/{p.name}" not in text, p.relative_to(ROOT)


def _module(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_lab_master_probe_reads_each_labs_master():
    """lab_master_probe.py without a GPU: each lab's graded cells define its function, lab 2's
    launch constants are found and replaced (one `min(M, ROWS)`), lab 6's fixtures are
    submissions its lab derives, each defining the lab's function."""
    from autograder.labs import get

    probe = _module("lab_master_probe")
    for number, name in probe.LABS.items():
        lab = get(name)
        assert any(re.search(rf"^def {lab.function}\(", src, re.M)
                   for src in probe.graded_cells(name)), (number, lab.function)
    cells = probe.lab2_cells(probe.LABS[2])
    assert callable(probe.lab2_variant(cells, *probe.LAB2_VARIANTS[1]))
    for fixture in probe.LAB6_FIXTURES.values():
        assert callable(probe.derived(probe.LABS[6], fixture)[get(probe.LABS[6]).function])
