"""benchmarks/ holds what produces a record: every script names, in a `Record:` line at its
top, the record it writes (under records/ or book/data/, whose folder exists; a record not
made yet names the folder it goes into), and nothing but the scripts lives there (what they
write goes to records/ or book/data/, never here). The one exception is device_env.sh, the
helper the device sessions source. Diagnostics whose question is closed are retired, their
findings kept in the records' READMEs."""

from __future__ import annotations

import re

import pytest
from repo import ROOT

BENCH = ROOT / "benchmarks"
HELPERS = {"device_env.sh": "sourced by the device sessions; it writes nothing"}
SCRIPTS = sorted(p.name for p in BENCH.iterdir() if p.is_file() and p.name not in HELPERS)


def records_named(path) -> list[str]:
    head = "\n".join(path.read_text().splitlines()[:40])
    m = re.search(r"^#? ?Record: (.*(?:\n#? ?\S.*)*)", head, re.M)
    return re.findall(r"`((?:records|book/data)/[^`]*)`", m.group(1)) if m else []


def test_benchmarks_holds_scripts_only():
    assert all(n.endswith((".py", ".sh")) for n in SCRIPTS), SCRIPTS
    assert not [p for p in BENCH.iterdir() if p.is_dir() and p.name != "__pycache__"]


@pytest.mark.parametrize("name", SCRIPTS)
def test_each_script_names_the_record_it_writes(name):
    named = records_named(BENCH / name)
    assert named, f"benchmarks/{name} names no record: a `Record:` line at its top (records/ " \
                  "or book/data/), or, if its question is closed, retire it (records' READMEs)"
    for rec in named:
        assert (ROOT / rec).parent.is_dir(), f"benchmarks/{name} names {rec}, whose folder does not exist"


@pytest.mark.parametrize("name", sorted(HELPERS))
def test_a_helper_is_sourced_by_a_session(name):
    assert any(f"benchmarks/{name}" in (BENCH / s).read_text() for s in SCRIPTS if s.endswith(".sh"))
