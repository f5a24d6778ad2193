"""What a learner trips on (issue 19), kept fixed: sources named by what they are, never "seed
NNN"; prose that names a widget's control names one the widget has; labs that point to chapters
through references the build checks; widgets whose dropdowns and labels are not cut at laptop
widths. The built-site checks use the session's built book (tests/conftest.py); the console check
(no warning, no error on any page) is tests/built_book/test_site.py's."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from book.sources import SOURCES
from conftest import SitePage
from repo import ROOT, ci_keeps

# "seed 000", "Seed 003's", "seeds 001 and 002": the file numbers of the source documents
SEED_NUMBER = re.compile(r"(?i)\bseeds?\s*0\d\d\b|\bseeds?['’]s?\s+(claim|figure)")
CONTROL_WORD = re.compile(r"(?i)\b(slider|drop-?down|button)s?\b")
# what each control word means in a widget's DOM
CONTROL_SELECTOR = {"slider": 'input[type="range"]', "dropdown": "select", "button": "button"}


def _md_cells(path: Path) -> list[str]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"]


# ---------------------------------------------------------------- sources

def test_no_built_page_names_a_source_by_its_file_number(built_book):
    found = []
    for html in sorted(built_book.html.rglob("*.html")):
        text = html.read_text(encoding="utf-8")
        found += [f"{html.relative_to(built_book.html)}: ...{text[max(0, m.start() - 60):m.end() + 20]}..."
                  for m in SEED_NUMBER.finditer(text)]
    assert not found, "a page calls a source document by its file number:\n" + "\n".join(found)


def test_the_sources_page_lists_every_source_and_the_landing_page_links_to_it(built_book):
    page = (built_book.html / "chapters" / "appendix_sources.html").read_text(encoding="utf-8")
    for s in SOURCES.values():
        assert f'id="{s.label}"' in page, f"no anchor for {s.key} ({s.label}) on the sources page"
        assert s.short.lower() in page.lower(), s.short
    intro = (built_book.html / "intro.html").read_text(encoding="utf-8")
    assert "appendix_sources.html" in intro
    for s in SOURCES.values():
        assert f"appendix_sources.html#{s.label}" in intro, f"the landing page does not link {s.key}"


def test_chapter_sources_use_the_sources_names():
    """The notebooks themselves (what Colab shows) carry no file numbers either."""
    found = [f"{p.name}: {m.group(0)!r}" for p in sorted((ROOT / "chapters").glob("*.ipynb"))
             for cell in _md_cells(p) for m in SEED_NUMBER.finditer(cell)]
    assert not found, found


def test_the_sources_page_links_where_each_document_is_published():
    """Issue 30: the sources appendix named the four documents and linked none."""
    page = (ROOT / "chapters" / "appendix_sources.md").read_text(encoding="utf-8")
    for s in SOURCES.values():
        assert s.address.startswith("https://"), s.key
        assert f"<{s.address}>" in page, f"the sources page does not link {s.key}: {s.address}"
        if s.where:  # a file in a repository: the page names it
            assert f"`{s.where}`" in page, s.where


# ---------------------------------------------------------------- labs -> chapters

def _labels() -> dict[str, str]:
    """MyST label -> the chapter notebook that defines it."""
    out = {}
    for p in sorted((ROOT / "chapters").glob("*.ipynb")):
        for cell in _md_cells(p):
            for m in re.finditer(r"^\(([\w-]+)\)=\s*$", cell, re.M):
                out[m.group(1)] = p.name
    return out


def test_labs_point_to_chapters_through_checked_references():
    """A lab names a chapter only inside a {ref} to a label of that very chapter, so a moved or
    renamed section fails the build (warnings are errors) instead of misleading a student."""
    labels, problems = _labels(), []
    for p in sorted((ROOT / "solutions").glob("*.ipynb")):
        for cell in _md_cells(p):
            for m in re.finditer(r"\{ref\}`([^`<]*)<([\w-]+)>`", cell):
                text, label = m.groups()
                if label not in labels:
                    problems.append(f"{p.name}: {{ref}} to unknown label {label!r}")
                    continue
                said = re.search(r"(?i)chapter\s+(\d+)", text)
                if said and not labels[label].startswith(f"{int(said.group(1)):02d}_"):
                    problems.append(f"{p.name}: {m.group(0)!r} says chapter {said.group(1)}, "
                                    f"but {label!r} is in {labels[label]}")
            bare = re.sub(r"\{(ref|doc)\}`[^`]*`", "", cell)
            problems += [f"{p.name}: a chapter named in prose, not by a reference: "
                         f"...{bare[max(0, m.start() - 40):m.end() + 20]!r}"
                         for m in re.finditer(r"(?i)\bchapters?\s+\d", bare)]
    assert not problems, "\n".join(problems)


def test_the_labs_are_generated_from_their_masters_with_the_references():
    for p in sorted((ROOT / "solutions").glob("*.ipynb")):
        refs = {m for c in _md_cells(p) for m in re.findall(r"\{ref\}`[^`]*`", c)}
        lab = ROOT / "labs" / p.name
        got = {m for c in _md_cells(lab) for m in re.findall(r"\{ref\}`[^`]*`", c)}
        assert refs <= got, f"{lab}: run `python -m autograder assign` ({refs - got})"


# ---------------------------------------------------------------- widgets, read as a reader does

def _explorer_pages(built_book) -> list[str]:
    return [str(Path(src).with_suffix(".html")) for src in built_book.toc_files
            if built_book.page(src).exists()
            and '"_anywidget_id": "book.widgets.' in built_book.page(src).read_text(encoding="utf-8")]


PROSE_TEXT = """() => {
  const art = document.querySelector("article").cloneNode(true);
  art.querySelectorAll(".cell_output, .cell_input, pre, code, script, .course-outputs")
     .forEach((e) => e.remove());
  return art.innerText;
}"""


# Each page is loaded once at 1280 px for every test that reads it there (a pass over every page
# is most of a test's time): the tour below visits them and keeps what each test measures, and the
# tests assert on what was kept, each its own part.
LAPTOP = {"width": 1280, "height": 900}
WIDGET_WAIT_MS = 90_000   # an explorer drawn within this, or the page fails


def _tour(browser, site_url, paths, viewport, explorers) -> dict[str, dict]:
    """``paths`` at ``viewport``, one page after the other in one context: {page: what was seen}.
    Once the network is idle (and, on a page with an explorer, its widgets are drawn: ``.swg``):
    ``words`` (the control words its prose names, "slider" / "dropdown" / "button") and
    ``controls`` ({word: how many such controls its widgets have}); on a page with an explorer,
    once its dropdowns are drawn (``.swg select``; ``waited``: why not, if they never were),
    ``dropdowns`` (MEASURE) and ``labels`` (LABELS: the cut ones)."""
    seen = {}
    sp = SitePage(browser, site_url)
    try:
        sp.page.set_viewport_size(viewport)
        page = sp.page
        for path in paths:
            sp.goto(path)
            if path in explorers:   # (CI's two cores, busy with the grader's runs: slow to draw)
                page.wait_for_selector(".swg", timeout=WIDGET_WAIT_MS)
            words = {m.group(1).lower().replace("-", "") for m in
                     CONTROL_WORD.finditer(page.evaluate(PROSE_TEXT))}
            got = {"words": words,
                   "controls": {w: page.locator(f".cell_output .swg {CONTROL_SELECTOR[w]}").count()
                                for w in words}}
            if path in explorers:
                try:
                    page.wait_for_selector(".swg select", timeout=WIDGET_WAIT_MS)
                except Exception as e:  # the dropdown test fails on it, with this
                    got["waited"] = f"{type(e).__name__}: {e}"
                else:
                    got.update(dropdowns=page.evaluate(MEASURE), labels=page.evaluate(LABELS))
            seen[path] = got
    finally:
        sp.close()
    return seen


class _ArticleText(HTMLParser):
    """The text of a page's HTML inside <article> (scripts and styles left out)."""

    def __init__(self):
        super().__init__()
        self.depth, self.skip, self.text = 0, 0, []

    def handle_starttag(self, tag, attrs):
        self.depth += tag == "article"
        self.skip += tag in ("script", "style")

    def handle_endtag(self, tag):
        self.depth -= tag == "article" and self.depth > 0
        self.skip -= tag in ("script", "style") and self.skip > 0

    def handle_data(self, data):
        if self.depth and not self.skip:
            self.text.append(data)


def _control_words_in_html(built_book, src) -> set[str]:
    """The control words anywhere in the page's article as built: every word its prose names
    (what the browser reads, PROSE_TEXT) and more (code and outputs too)."""
    reader = _ArticleText()
    reader.feed(built_book.page(src).read_text(encoding="utf-8"))
    return {m.group(1).lower().replace("-", "") for m in CONTROL_WORD.finditer(" ".join(reader.text))}


@pytest.fixture(scope="module")
def laptop_tour(built_book, browser, site_url) -> dict[str, dict]:
    """At 1280 px (``_tour``) every page of the table of contents that shows an explorer or
    whose article names a control anywhere (``_control_words_in_html``); a page that does
    neither has no prose naming a control, and is not loaded."""
    explorers = set(_explorer_pages(built_book))
    paths = [str(Path(src).with_suffix(".html")) for src in built_book.toc_files
             if str(Path(src).with_suffix(".html")) in explorers
             or (built_book.page(src).exists() and _control_words_in_html(built_book, src))]
    return _tour(browser, site_url, paths, LAPTOP, explorers)


def test_prose_names_only_controls_the_page_widget_has(built_book, laptop_tour):
    """ "one drag of a slider" above an explorer made of number boxes and dropdowns misleads:
    every slider, dropdown or button the prose of a page names is a control of its widgets."""
    problems = []
    for src in built_book.toc_files:
        path = str(Path(src).with_suffix(".html"))
        got = laptop_tour.get(path)
        if got is None:   # its article names no slider, dropdown or button at all
            assert built_book.page(src).exists(), f"{path} was not built"
            continue
        for word in sorted(got["words"]):
            if got["controls"][word] == 0:
                problems.append(f"{path}: the prose names a {word}, but no widget on the page has one")
    assert not problems, "\n".join(problems)


MEASURE = """() => [...document.querySelectorAll(".swg select")].map((s) => {
  // the select's own width for its longest option: a copy sized by its content
  const c = s.cloneNode(true);
  Object.assign(c.style, { width: "auto", maxWidth: "none", minWidth: "0", position: "absolute",
                           visibility: "hidden" });
  s.parentElement.appendChild(c);
  const need = c.getBoundingClientRect().width;
  c.remove();
  const longest = [...s.options].map((o) => o.text).sort((a, b) => b.length - a.length)[0];
  return { id: s.dataset.testid, have: s.getBoundingClientRect().width, need, longest };
})"""
LABELS = """() => [...document.querySelectorAll(".swg-field label")]
  .filter((l) => l.scrollWidth > l.clientWidth + 1).map((l) => l.textContent)"""


@pytest.mark.parametrize("width", ci_keeps([1280, 1400]))
def test_widget_dropdowns_and_labels_are_not_cut_at_laptop_widths(built_book, browser, site_url,
                                                                  laptop_tour, width):
    """At 1280 px what the laptop tour kept; at 1400 px the explorer pages loaded at that width."""
    pages = _explorer_pages(built_book)
    assert pages, "no page shows a book.widgets explorer"
    seen = (laptop_tour if width == LAPTOP["width"] else
            _tour(browser, site_url, pages, {"width": width, "height": 900}, set(pages)))
    problems = []
    for path in pages:
        got = seen[path]
        assert "waited" not in got, f"{path} at {width} px: no dropdown drawn ({got['waited']})"
        for s in got["dropdowns"]:
            if s["need"] > s["have"] + 0.5:
                problems.append(f"{path} at {width} px: dropdown {s['id']!r} is {s['have']:.0f} px "
                                f"wide, its longest option ({s['longest']!r}) needs {s['need']:.0f}")
        problems += [f"{path} at {width} px: label {t!r} is cut" for t in got["labels"]]
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------- the widget manager's console

def test_the_widget_manager_is_built_without_ajv_strict_mode_warnings():
    from tools import site_assets

    bundle = ROOT / "node_modules/@jupyter-widgets/html-manager/dist/embed-amd.js"
    if not bundle.exists():
        pytest.skip("node_modules is missing: run `make book` (npm ci)")
    text = bundle.read_text(encoding="utf-8")
    patched = site_assets.allow_union_types(text)
    # every validator of the widget state (one per copy of the bundle) gets the option
    assert patched.count("({allowUnionTypes:!0})") == 2 and len(patched) == len(text) + 2 * 22
    with pytest.raises(ValueError, match="widget manager changed"):
        site_assets.allow_union_types("no ajv here")
    served = ROOT / "site_assets/vendor/html-manager/embed-amd.js"
    if served.exists():
        assert served.read_text(encoding="utf-8") == patched, "run python -m tools.site_assets"
