"""tools/lab_fixtures.py: every fixture a lab derives from its master is on disk as the lab
declares it today (a master's change, or a lab's edit, without the files rewritten fails here,
naming the command), nothing in the derived folders is left over from a declaration gone, and
the fixture READMEs' tables are the registry's (bounds/, controls/) or, written by hand beside
their own columns (lab5/, lab6/, sanitizer/, multikernel/), list their folder's files."""

from __future__ import annotations

import re
from collections import Counter

from tools import lab_fixtures


def test_the_derived_fixtures_are_what_the_labs_derive():
    stale = lab_fixtures.stale()
    assert not stale, (f"differ from what autograder/labs/ derives: run `{lab_fixtures.COMMAND}` "
                       "(the lab modules' `derived`, the masters in solutions/): " + ", ".join(stale))


def test_every_kernel_lab_derives_a_store_past_the_end_a_forgotten_blockidx_and_a_control():
    """What the grading tests ask of every kernel lab (test_bounds_grading, test_lesson_controls)."""
    from autograder import labs

    for name, spec in labs.registry().items():
        if not spec.kernel:
            continue
        short = name.split("_")[0]
        have = {d.name for d in spec.derived}
        assert f"{short}_writes_past_end" in have, f"{name}: no bounds fixture writing past `out`"
        assert any(n.startswith(f"{short}_forgets_blockidx_") for n in have), (
            f"{name}: no bounds fixture forgetting blockIdx")
        assert any(d.kind == "controls" for d in spec.derived), f"{name}: no lesson control"


def test_a_table_row_is_the_first_sentence_of_what_a_fixture_is():
    assert lab_fixtures.sentence("forgets blockIdx.y: every block computes the first tile of\n"
                                  "T. Passes the public cases.") == (
        "forgets blockIdx.y: every block computes the first tile of T")
    assert lab_fixtures.sentence("a | b") == "a \\| b"


def test_a_fixture_readme_that_tables_its_files_lists_each_once_and_none_gone():
    """A README of a tests/fixtures/ folder with rows that start with a file's name lists every
    file of its folder once and no file that is not there: a fixture a lab derives (or one
    added by hand, or renamed) is not missing from what the reader is told it is for."""
    tabled = 0
    for readme in sorted(lab_fixtures.FIXTURES.glob("*/README.md")):
        rows = Counter(re.findall(r"^\| `([^`/]+)` \|", readme.read_text(), re.M))
        if not rows:
            continue   # a README that says what its files are in prose, not row by row
        tabled += 1
        files = {p.name for p in readme.parent.iterdir() if p.is_file() and p != readme}
        where = readme.relative_to(lab_fixtures.ROOT)
        assert not files - set(rows), f"{where} has no row for {sorted(files - set(rows))}"
        assert not set(rows) - files, f"{where} has rows for files gone: {sorted(set(rows) - files)}"
        twice = sorted(f for f, n in rows.items() if n > 1)
        assert not twice, f"{where} has two rows for {twice}"
    assert tabled >= 2, "bounds/ and controls/ keep tables (tools.lab_fixtures writes them)"
