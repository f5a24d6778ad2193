"""Words a reader meets before they are defined have a glossary entry (issue 30: swizzle, ptxas,
NVVM, TMA, wgmma, fragment, ldmatrix, cp.async, mma.sync, cheap path, ILP, ...).

chapters/glossary_terms.toml lists the terms the pages use before, or without, defining them
where they appear, each with its glossary entry. These tests read the pages' Markdown in reading
order (the table of contents: the landing page, the chapters, the labs, the appendices), with no
build: every listed term has its entry in chapters/appendix_glossary.md and appears on a page,
and a phrase a page writes in bold (a term being introduced) that an earlier page already uses is
listed (or declared emphasis), so a new one cannot slip in undefined."""

from __future__ import annotations

import json
import re

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

import pytest

from repo import ROOT
from tools.execute import toc_sources

GLOSSARY = ROOT / "chapters" / "appendix_glossary.md"
TERMS = tomllib.loads((ROOT / "chapters" / "glossary_terms.toml").read_text(encoding="utf-8"))
BOLD = re.compile(r"\*\*([^*\n]{2,60}?)\*\*")
# a bold phrase that reads as a term: words, not a sentence or "Exercise 1."
TERMLIKE = re.compile(r"[A-Za-z][A-Za-z0-9 .\-/'’]*[A-Za-z0-9]")


def _markdown(rel: str) -> str:
    path = ROOT / rel
    if rel.endswith(".md"):
        return path.read_text(encoding="utf-8")
    nb = json.loads(path.read_text(encoding="utf-8"))
    return "\n\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")


def _pages() -> list[tuple[str, str]]:
    """(page, Markdown) in reading order, the glossary itself left out."""
    return [(rel, _markdown(rel)) for rel in toc_sources() if rel != "chapters/appendix_glossary.md"]


def glossary_entries(text: str) -> set[str]:
    """The terms a MyST ``{glossary}`` block defines: its unindented lines."""
    block = re.search(r"```\{glossary\}\n(.*?)\n```", text, re.S)
    assert block, f"{GLOSSARY.name} has no {{glossary}} block"
    return {line.strip() for line in block.group(1).splitlines()
            if line and not line[0].isspace() and not line.startswith(":")}


def _word(term: str) -> re.Pattern:
    return re.compile(r"(?<![\w-])" + re.escape(term) + r"(?![\w-])", re.I)


def test_the_glossary_block_is_read():
    entries = glossary_entries(GLOSSARY.read_text(encoding="utf-8"))
    assert {"Arithmetic intensity", "Warp", "Tensor core"} <= entries
    assert not any(e.startswith(" ") for e in entries)


def test_every_listed_term_has_its_entry_and_appears_on_a_page():
    entries = glossary_entries(GLOSSARY.read_text(encoding="utf-8"))
    missing = {t: e for t, e in TERMS["terms"].items() if e not in entries}
    assert not missing, ("chapters/glossary_terms.toml names glossary entries that "
                         f"appendix_glossary.md does not define: {missing}")
    text = "\n".join(t for _, t in _pages())
    unused = [t for t in TERMS["terms"] if not _word(t).search(text)]
    assert not unused, f"listed terms that no page uses (remove them): {unused}"


def test_the_terms_issue_30_names_are_listed():
    for term in ("swizzle", "ptxas", "NVVM", "TMA", "wgmma", "fragment", "ldmatrix", "cp.async",
                 "mma.sync", "cheap path", "CUDA-graph replay", "ILP", "bank group", "K-major"):
        assert term in TERMS["terms"], term


def used_before_bold(pages) -> list[tuple[str, str, str]]:
    """(term, page of its first bold, page of an earlier use) for each bold phrase that the
    pages use earlier in reading order."""
    full, starts = "", []
    for rel, text in pages:
        starts.append((len(full), rel))
        full += text + "\n\n"

    def page_at(i):
        return [rel for at, rel in starts if at <= i][-1]

    out, seen = [], set()
    for m in BOLD.finditer(full):
        term = m.group(1).strip()
        if not TERMLIKE.fullmatch(term) or term.lower() in seen:
            continue
        seen.add(term.lower())
        first = _word(term).search(full)
        if first and first.start() < m.start():
            out.append((term, page_at(m.start()), page_at(first.start())))
    return out


def test_a_bold_term_used_earlier_is_in_the_list():
    known = {t.lower() for t in TERMS["terms"]} | {w.lower() for w in TERMS["emphasis"]["words"]}
    found = [f"{t!r}: in bold on {bold}, used before on {first}"
             for t, bold, first in used_before_bold(_pages()) if t.lower() not in known]
    assert not found, ("terms a reader meets before the page that introduces them: give each a "
                       "glossary entry and list it in chapters/glossary_terms.toml [terms] (or, "
                       "for bold that is emphasis, under [emphasis]):\n" + "\n".join(found))


@pytest.mark.parametrize("pages,expected", [
    ([("a", "the swizzle matters"), ("b", "a **swizzle** permutes")], [("swizzle", "b", "a")]),
    ([("a", "a **swizzle** permutes"), ("b", "the swizzle again")], []),
    ([("a", "**Exercise 1.** see"), ("b", "Exercise 1. again")], []),  # not a term
])
def test_used_before_bold_finds_what_it_should(pages, expected):
    assert used_before_bold(pages) == expected


def test_the_terms_the_fifth_reader_pass_names_are_listed():
    # lab 6 and the instructors' page write "GEMV" and never define it
    assert TERMS["terms"].get("GEMV") == "GEMV"


def _entries_with_text(text: str) -> dict[str, str]:
    block = re.search(r"```\{glossary\}\n(.*?)\n```", text, re.S).group(1)
    entries, name = {}, None
    for line in block.splitlines():
        if line and not line[0].isspace() and not line.startswith(":"):
            name = line.strip()
            entries[name] = ""
        elif name:
            entries[name] += " " + line.strip()
    return entries


def test_an_entry_that_names_its_chapter_names_the_one_it_is_tagged_with():
    """'Chapter 9 shows how to read it' under a ({doc}`10_profiling`) tag sends a reader to the
    wrong page: where an entry says which chapter shows or explains it, that is its tag's."""
    wrong = []
    for name, body in _entries_with_text(GLOSSARY.read_text(encoding="utf-8")).items():
        tags = {int(n) for n in re.findall(r"\{doc\}`(\d\d)_", body)}
        for n in re.findall(r"Chapter (\d+) (?:shows|explains|defines)", body):
            if tags and int(n) not in tags:
                wrong.append(f"{name}: says chapter {n}, tagged {sorted(tags)}")
    assert not wrong, wrong


def test_the_terms_the_fifth_reader_pass_names_are_defined():
    """Issue 43 (M9, L22): the words chapters 7b-11 and lab 6 lean on, "ceiling" first, are
    listed and have entries (the test above checks each entry exists and is used)."""
    for term in ("ceiling", "main-loop ceiling", "stream-K", "split-K", "finisher",
                 "core matrix", "async proxy", "named barrier", "issue slots", "occupancy",
                 "warp shuffle", "cache policy", "tensor pipe", "block reduction",
                 "last-block reduction", "memory fence", "atomic"):
        assert term in TERMS["terms"], term
    entries = _entries_with_text(GLOSSARY.read_text(encoding="utf-8"))
    assert "not a bound" in entries["Main-loop ceiling"]
    for name in ("TMA", "setmaxnreg"):  # M4: they outlive Hopper
        assert "Blackwell" in entries[name], name
    assert "from Hopper (sm_90) on" in entries["Cluster"]
    assert "sm_90a" in entries["wgmma"] and "registers" in entries["wgmma"]  # L2: A may be
