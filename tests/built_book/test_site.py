"""The built site in a real browser (Debian's chromium via playwright), served from localhost:
nothing is fetched from another host, nothing fails, math is typeset, widgets render, every
notebook page links to Colab, every internal link resolves, search works, phones don't scroll
sideways. Fixtures: tests/conftest.py."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlsplit

import pytest
import yaml

from conftest import SitePage
from repo import ROOT


def _pages(built_book) -> list[str]:
    """Every page a reader can reach: the toc's pages plus search and index."""
    return [str(Path(f).with_suffix(".html")) for f in built_book.toc_files] + [
        "search.html", "genindex.html"]


# Each page is loaded once per width for every test that reads it there (a pass over every page
# is most of a test's time): the tours below visit them and keep what each test measures, and
# the tests assert on what was kept, each its own part.
LAPTOP = {"width": 1280, "height": 900}
PHONE = {"width": 375, "height": 812}


def _tour_pages(built_book) -> tuple[list[str], dict[str, str]]:
    """Every page a reader can reach, and {page: notebook} of the executed ones."""
    executed = {str(Path(src).with_suffix(".html")): src for src in _executed_pages(built_book)}
    return list(dict.fromkeys(_pages(built_book) + list(executed))), executed


@pytest.fixture(scope="module")
def laptop_tour(built_book, browser, site_url) -> dict[str, dict]:
    """Every page at 1280 px, each as a reader's first visit (a fresh context: nothing cached
    or stored yet), requests from other hosts aborted and recorded: {page: what was seen}.
    Right after the network is idle: ``column`` (COLUMN_CHECK's findings) and, on executed
    pages, ``exercises`` (EXERCISES); 300 ms later (MathJax and the widgets have fetched what
    they fetch): ``problems`` (SitePage.problems: other hosts, failed requests, JS errors),
    ``requests`` and ``console`` (what the console logged as an error or a warning, and
    uncaught errors)."""
    pages, executed = _tour_pages(built_book)
    seen = {}
    for path in pages:
        sp = SitePage(browser, site_url)
        console: list[str] = []
        sp.page.on("console", lambda m, console=console: console.append(f"{m.type}: {m.text}")
                   if m.type in ("error", "warning") else None)
        sp.page.on("pageerror", lambda e, console=console: console.append(str(e)))
        try:
            sp.page.set_viewport_size(LAPTOP)
            sp.goto(path)
            got = {"column": sp.page.evaluate(COLUMN_CHECK)}
            if path in executed:
                got["exercises"] = sp.page.evaluate(EXERCISES)
            sp.page.wait_for_timeout(300)
            got.update(problems=sp.problems(), requests=list(sp.requests), console=console)
        finally:
            sp.close()
        seen[path] = got
    return seen


@pytest.fixture(scope="module")
def phone_tour(built_book, browser, site_url) -> dict[str, dict]:
    """Every page at 375 px, one page after the other in one context: {page: what was seen}.
    Right after the network is idle: ``width`` (the document's scroll width; ``culprit`` where
    it is too wide) and, on executed pages, ``printed`` (PRINTED_PROSE_HIDDEN), ``tables``
    (PRINTED_TABLES) and ``figures`` (FIGURE_SCALES); on a page with math, 300 ms later
    (MathJax typesets after load), ``math`` (MATH_OUT_OF_COLUMN)."""
    pages, executed = _tour_pages(built_book)
    seen = {}
    sp = SitePage(browser, site_url)
    try:
        sp.page.set_viewport_size(PHONE)
        for path in pages:
            sp.goto(path)
            got = {"width": sp.page.evaluate("document.documentElement.scrollWidth")}
            if got["width"] > 376:
                got["culprit"] = sp.page.evaluate(WIDE_CULPRIT)
            if path in executed:
                got.update(printed=sp.page.evaluate(PRINTED_PROSE_HIDDEN),
                           tables=sp.page.evaluate(PRINTED_TABLES),
                           figures=sp.page.evaluate(FIGURE_SCALES))
            if sp.page.locator("mjx-container").count():
                sp.page.wait_for_timeout(300)
                got["math"] = sp.page.evaluate(MATH_OUT_OF_COLUMN)
            seen[path] = got
    finally:
        sp.close()
    return seen


def test_no_page_asks_another_host_or_fails(laptop_tour):
    problems = [f"{path}: {p}" for path, got in laptop_tour.items() for p in got["problems"]]
    assert not problems, "\n".join(problems)
    assert any("/vendor/mathjax/" in u for got in laptop_tour.values() for u in got["requests"]), \
        "no page loaded MathJax from the site itself"


def test_math_is_typeset(site_page):
    site_page.goto("intro.html")
    site_page.page.wait_for_selector("mjx-container", timeout=20_000)
    assert site_page.page.locator("mjx-container").count() >= 2
    text = site_page.page.locator("article").inner_text()
    assert "\\frac" not in text and "$$" not in text, "raw TeX left on the page"
    site_page.assert_clean()


def _widget_models(page) -> list[dict]:
    states = page.locator('script[type="application/vnd.jupyter.widget-state+json"]')
    models = []
    for i in range(states.count()):
        models += json.loads(states.nth(i).text_content())["state"].values()
    return models


def test_roofline_explorer_renders_on_the_static_page(site_page):
    """Chapter 2's roofline explorer is an anywidget that draws in its own front-end code."""
    site_page.goto("chapters/02_roofline.html")
    page = site_page.page
    models = _widget_models(page)
    assert any(m.get("model_module") == "anywidget" for m in models), (
        "chapters/02_roofline has no anywidget output saved on the page "
        "(the roofline explorer has not landed, or its cell does not display it)")
    view = page.locator(".widget-subarea > .lm-Widget")
    view.first.wait_for(timeout=30_000)
    page.wait_for_function(
        "() => [...document.querySelectorAll('.widget-subarea > .lm-Widget')]"
        ".some(v => v.getBoundingClientRect().height > 20 && v.querySelector('svg, canvas'))",
        timeout=30_000)
    assert "Error rendering" not in page.locator("article").inner_text()
    site_page.assert_clean()


def test_every_notebook_page_links_to_colab(built_book):
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    repo = urlsplit(cfg["repository"]["url"]).path.strip("/")
    branch = cfg["repository"]["branch"]
    colab = cfg["launch_buttons"]["colab_url"].rstrip("/")
    missing = []
    for src in built_book.toc_files:
        if not src.endswith(".ipynb"):
            continue
        href = f"{colab}/github/{repo}/blob/{branch}/{src}"
        if f'href="{href}"' not in built_book.page(src).read_text(encoding="utf-8"):
            missing.append(f"{src}: no link to {href}")
    assert not missing, "\n".join(missing)


def test_colab_link_is_in_the_launch_menu(site_page):
    site_page.goto("chapters/01_bytes_and_flops.html")
    link = site_page.page.locator('a[href^="https://colab.research.google.com/github/"]')
    assert link.count() == 1
    assert link.get_attribute("href").endswith("/chapters/01_bytes_and_flops.ipynb")


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "a" and "name" in a:
            self.ids.add(a["name"])
        for key in ("href", "src"):
            if a.get(key) and not (tag == "link" and a.get("rel") in ("canonical",)):
                self.links.append(a[key])


def test_every_internal_link_resolves(site_url):
    """Crawl the site over HTTP from its front page: every local href/src answers 200 and every
    #fragment names an element of its page."""
    pages: dict[str, _Links] = {}
    todo = [site_url + "index.html", site_url + "intro.html"]  # index.html only redirects
    broken, fragments = [], []
    while todo:
        url = todo.pop()
        if url in pages:
            continue
        try:
            with urllib.request.urlopen(url) as resp:
                body = resp.read()
                ctype = resp.headers.get_content_type()
        except urllib.error.HTTPError as e:
            broken.append(f"{url}: HTTP {e.code}")
            pages[url] = _Links()
            continue
        parser = _Links()
        if ctype == "text/html":
            parser.feed(body.decode("utf-8", "replace"))
        pages[url] = parser
        for link in parser.links:
            target = urljoin(url, link)
            if not target.startswith(site_url):
                continue
            base, frag = urldefrag(target)
            base = base.split("?")[0]
            if frag:
                fragments.append((url, base, frag))
            if base not in pages:
                todo.append(base)
    for src, base, frag in fragments:
        target = pages.get(base)
        if target is not None and base.endswith(".html") and frag not in target.ids:
            broken.append(f"{src}: #{frag} not found in {base}")
    html_pages = [u for u in pages if u.endswith(".html")]
    assert len(html_pages) >= 14, html_pages
    assert not broken, "\n".join(sorted(set(broken)))


def test_search_finds_pages(site_page):
    site_page.goto("search.html?q=SwiGLU")
    # Sphinx adds one result every 5 ms and writes the summary after the last: read the list
    # only then (reading it at the first result raced the rest on a loaded machine).
    summary = site_page.page.locator("p.search-summary")
    summary.filter(has_text="Search finished").wait_for(timeout=30_000)
    found = int(re.search(r"found (\d+) page", summary.inner_text()).group(1))
    results = site_page.page.locator("ul.search li")
    assert found >= 1 and results.count() == found
    assert "intro.html" in " ".join(
        results.locator("a").evaluate_all("as => as.map(a => a.getAttribute('href'))"))
    site_page.assert_clean()


WIDE_CULPRIT = """() => {
    // The outermost element sticking out that no scrolling ancestor contains.
    const w = document.documentElement.clientWidth;
    const clipped = e => {
        for (let a = e.parentElement; a; a = a.parentElement) {
            if (getComputedStyle(a).overflowX !== 'visible') return true;
        }
        return false;
    };
    const el = [...document.body.querySelectorAll('*')].find(
        e => e.getBoundingClientRect().right > w + 1 && !clipped(e));
    return el ? `${el.tagName}.${el.className} ${el.textContent.slice(0, 60)}` : '?';
}"""


def test_no_horizontal_scroll_at_phone_width(built_book, phone_tour):
    assert set(_pages(built_book)) <= set(phone_tour)
    too_wide = [f"{path}: {got['width']}px wide (e.g. {got['culprit']})"
                for path, got in phone_tour.items() if got["width"] > 376]
    assert not too_wide, "\n".join(too_wide)


# ---------------------------------------------------------------- recorded GPU outputs

# What the course prints where a GPU would show something (grep the library and the chapters
# for these): none may appear in a chapter whose page shows its GPU recording.
SIMULATOR_PLACEHOLDERS = (
    "kernels run in Numba's CUDA simulator",          # book.gpu: the import-time status line
    "Device: Numba CUDA simulator",                   # book.gpu.describe()
    "not measured: kernels are running in Numba's CUDA simulator",  # book.bench
    "not measured: no CUDA GPU here",                 # book.bench.suite
    "nothing to time", "nothing is timed", "not timed", "No GPU here", "simulator: no GPU",
)
# the chapters' placeholder label begins its line ("Simulator: not timed. ..."); mid-sentence,
# "in the simulator: ..." is an exercise's answer about the simulator, not a placeholder
SIMULATOR_LABEL = re.compile(r"^\s*Simulator:")


def _executed_pages(built_book) -> list[str]:
    from tools.execute import executed_notebooks

    return executed_notebooks()


class _OutputText(HTMLParser):
    """The text inside the page's cell outputs (div.cell_output), nested elements included."""

    VOID = {"br", "img", "hr", "meta", "link", "input", "wbr", "col", "source", "area"}

    def __init__(self):
        super().__init__()
        self.depth = 0  # open elements since entering a cell_output (0: outside)
        self.parts: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in self.VOID:
            return
        if self.depth:
            self.depth += 1
        elif tag == "div" and "cell_output" in (dict(attrs).get("class") or "").split():
            self.depth = 1

    def handle_endtag(self, tag):
        if self.depth and tag not in self.VOID:
            self.depth -= 1
            if not self.depth:
                self.parts.append("\n")

    def handle_data(self, data):
        if self.depth:
            self.parts.append(data)


def _outputs_text(html: str) -> str:
    """The text of the page's cell outputs (not its prose, which may name the simulator)."""
    parser = _OutputText()
    parser.feed(html)
    return "".join(parser.parts)


def test_each_chapter_page_says_whose_outputs_it_shows(built_book):
    from tools import recordings

    problems = []
    for src in _executed_pages(built_book):
        html = built_book.page(src).read_text(encoding="utf-8")
        rec = recordings.find(src, root=built_book.root)
        recorded = html.count("course-outputs-recorded")
        simulated = html.count("course-outputs-simulator")
        if recorded + simulated != 1:
            problems.append(f"{src}: {recorded + simulated} notes about its outputs (want one)")
        elif rec.usable:
            prov = rec.provenance
            if not recorded:
                problems.append(f"{src}: has a current recording but is labelled 'simulator'")
            text = re.sub(r"<[^>]+>", "", html)
            for fact in (prov["gpu"], prov["date"][:10], prov["commit"][:7],
                         "python -m tools.record", "your own outputs"):
                if fact not in text:
                    problems.append(f"{src}: the recording note does not say {fact!r}")
        elif recorded:
            problems.append(f"{src}: labelled 'recorded' with no current recording")
    assert not problems, "\n".join(problems)


def test_recorded_chapters_show_their_gpu_outputs_and_no_placeholder(built_book):
    """A recorded chapter's page shows the recording's outputs (its GPU's name, as printed by
    the chapter's first cells) and no simulator placeholder in any output."""
    from tools import recordings

    recorded = [s for s in _executed_pages(built_book)
                if recordings.find(s, root=built_book.root).usable]
    if not recorded:
        pytest.skip("no chapter has a current GPU recording (records/chapters/)")
    problems = []
    for src in recorded:
        text = _outputs_text(built_book.page(src).read_text(encoding="utf-8"))
        for line in text.splitlines():
            if SIMULATOR_LABEL.match(line) or any(
                    needle.lower() in line.lower() for needle in SIMULATOR_PLACEHOLDERS):
                problems.append(f"{src}: an output says {line.strip()[:120]!r}")
    assert not problems, (
        "simulator placeholders on pages that show a GPU recording (the recording was made "
        "in the simulator, or the outputs were not merged):\n" + "\n".join(problems))


def test_downloads_give_the_notebook_without_outputs(built_book):
    """The download button and Colab give the chapter's source, not the recorded outputs."""
    import nbformat

    for src in _executed_pages(built_book):
        html = built_book.page(src).read_text(encoding="utf-8")
        links = set(re.findall(r'href="([^"]*_sources/[^"]*\.ipynb)"', html))
        assert links, f"{src}: no download link to the .ipynb"
        for link in links:
            nb = nbformat.read(built_book.page(src).parent / link, as_version=4)
            with_outputs = [i for i, c in enumerate(nb.cells) if c.get("outputs")]
            assert not with_outputs, f"{src}: the downloaded notebook has outputs ({link})"


# ---------------------------------------------------------------- layout and console

def test_no_console_error_or_warning_on_any_page(built_book, laptop_tour):
    """No page logs an error or a warning on a reader's first visit: no script runs twice
    (THEBE_JS_URL was declared twice on every page), the theme finds its colour mode, nothing
    fails to load, and the widget manager's schema check says nothing (ajv's "strict mode: use
    allowUnionTypes" twice on every page with a widget: tools/site_assets.py builds ajv with
    that option)."""
    assert set(_pages(built_book)) <= set(laptop_tour)
    found = [f"{path}: {e}" for path, got in laptop_tour.items() for e in got["console"]]
    assert not found, "\n".join(found)


def test_one_thebe_declaration_per_page(built_book):
    for path in _pages(built_book):
        html = (built_book.html / path).read_text(encoding="utf-8")
        assert html.count("const THEBE_JS_URL") <= 1, f"{path}: THEBE_JS_URL declared twice"


COLUMN_CHECK = """() => {
  const article = document.querySelector('article.bd-article');
  if (!article) return [];
  const col = article.getBoundingClientRect();
  const name = e => (e.closest('.cell_input') ? 'code cell' : e.closest('.cell_output')
      ? 'output' : e.tagName.toLowerCase()) + ': ' + e.textContent.trim().slice(0, 60);
  const longest = e => Math.max(0, ...e.textContent.split('\\n').map(l => l.length));
  const out = [];
  const blocks = '.cell_input, .cell_output, .cell_output > *, .cell_output pre, ' +
      '.cell_input pre, table, .admonition, .bd-article img, .widget-subarea';
  for (const e of document.querySelectorAll('article.bd-article ' + blocks.split(', ')
      .join(', article.bd-article '))) {
    const r = e.getBoundingClientRect();
    if (r.width && (r.right > col.right + 1 || r.left < col.left - 1))
      out.push(`${name(e)} sticks out of the column (${Math.round(r.left)}..${Math.round(r.right)}` +
               ` px, column ${Math.round(col.left)}..${Math.round(col.right)} px)`);
  }
  // printed output wraps: no part of it hidden behind a scrollbar; a printed table keeps its
  // rows whole instead and may scroll in its own block (as at 375 px: the test below)
  for (const e of document.querySelectorAll('.cell_output .printed-table pre')) {
    const range = document.createRange();
    range.selectNodeContents(e);
    const drawn = new Set([...range.getClientRects()].filter(r => r.width > 0)
                          .map(r => Math.round(r.top))).size;
    const lines = e.textContent.replace(/\\n+$/, '').split('\\n').length;
    if (drawn !== lines || (e.scrollWidth > e.clientWidth + 1 &&
                            getComputedStyle(e).overflowX !== 'auto'))
      out.push(`${name(e)}: a printed table's ${lines} rows drawn on ${drawn} lines`);
  }
  for (const e of document.querySelectorAll(
      '.cell_output .output.stream pre, .cell_output .output.stderr pre, ' +
      '.cell_output .output.text_plain pre'))
    if (!e.closest('.printed-table') && e.scrollWidth > e.clientWidth + 1)
      out.push(`${name(e)} is wider than its block (${e.scrollWidth} > ${e.clientWidth} px)`);
  // a code cell holds 80-character lines; a longer line is the chapter's to shorten
  for (const e of document.querySelectorAll('.cell_input pre'))
    if (e.scrollWidth > e.clientWidth + 1)
      out.push(longest(e) > 80
        ? `${name(e)} has a line of ${longest(e)} characters (chapters keep code to 80)`
        : `${name(e)}: an 80-character line does not fit (${e.scrollWidth} > ${e.clientWidth} px)`);
  // a command block in the prose (the instructors' appendix) is read whole, not scrolled
  for (const e of document.querySelectorAll('div.highlight pre'))
    if (!e.closest('.cell_input, .cell_output') && e.scrollWidth > e.clientWidth + 1)
      out.push(`${name(e)}: a code block in the text scrolls sideways (longest line ` +
               `${longest(e)} characters; put a long comment on its own line)`);
  // library source shown by book.show keeps the library's lines (ruff: 100 characters)
  for (const e of document.querySelectorAll('.cell_output .output.text_html div.highlight pre'))
    if (longest(e) <= 100 && e.scrollWidth > e.clientWidth + 2)
      out.push(`${name(e)}: library source of ${longest(e)}-character lines scrolls sideways ` +
               `(${e.scrollWidth} > ${e.clientWidth} px)`);
  return out;
}"""


def test_blocks_fit_the_column_at_laptop_width(built_book, laptop_tour):
    """At 1280 px no code cell, output block, table or figure is wider than the content column:
    printed output wraps, code keeps its (80-character) lines whole and visible, a table too
    wide for the column scrolls inside its own box."""
    assert set(_pages(built_book)) <= set(laptop_tour)
    problems = [f"{path}: {p}" for path, got in laptop_tour.items() for p in got["column"]]
    assert not problems, f"{len(problems)} blocks do not fit:\n" + "\n".join(problems)


def _executed_seen(built_book, tour) -> list[tuple[str, dict]]:
    """(notebook, what the tour saw on its page) for every executed page."""
    return [(src, tour[str(Path(src).with_suffix(".html"))]) for src in _executed_pages(built_book)]


PRINTED_PROSE_HIDDEN = """() =>
    [...document.querySelectorAll(
        '.cell_output .output.stream pre, .cell_output .output.stderr pre, '
        + '.cell_output .output.text_plain pre')]
    .filter(e => !e.closest('.printed-table'))
    .filter(e => e.scrollWidth > e.clientWidth + 1)
    .map(e => e.textContent.trim().slice(0, 80))"""


def test_printed_output_wraps_at_phone_width(built_book, phone_tour):
    """At 375 px printed prose (the simulator or GPU status line, a sentence a cell prints)
    wraps inside its block rather than scrolling sideways; code may scroll inside its block,
    and so may a printed table (the next test)."""
    hidden = [f"{src}: {t}" for src, got in _executed_seen(built_book, phone_tour)
              for t in got["printed"]]
    assert not hidden, "printed output scrolls sideways at 375 px:\n" + "\n".join(hidden)


# each printed table's rows as the phone lays them out: how many lines its text has, how many
# it is drawn on, and whether what does not fit scrolls inside its own block
PRINTED_TABLES = """() => [...document.querySelectorAll('.cell_output .printed-table pre')]
    .map(e => {
      const range = document.createRange();
      range.selectNodeContents(e);
      const tops = new Set([...range.getClientRects()].filter(r => r.width > 0)
                           .map(r => Math.round(r.top)));
      return {text: e.textContent.trim().slice(0, 60),
              lines: e.textContent.replace(/\\n+$/, '').split('\\n').length,
              drawn: tops.size, wide: e.scrollWidth > e.clientWidth + 1,
              overflow: getComputedStyle(e).overflowX};
    })"""


def test_printed_tables_keep_their_rows_at_phone_width(built_book, phone_tour):
    """Reader QA: at 375 px the column tables cells print (chapter 10's counters and cases,
    chapter 8's roofline points) wrapped mid-row, a row's last columns under its first (at
    1280 px so did chapter 9's tables of more than 95 characters: the laptop test checks that
    width). A printed table keeps each row on one line and scrolls sideways inside its own
    block (tools/sphinx_course.py marks its lines printed-table; tools/theme/course.css),
    never the page; the prose printed around it still wraps (the test above)."""
    broken, seen = [], {}
    for src, got in _executed_seen(built_book, phone_tour):
        tables = got["tables"]
        seen[src] = [t["text"] for t in tables]
        broken += [f"{src}: {t}" for t in tables
                   if t["drawn"] != t["lines"] or (t["wide"] and t["overflow"] != "auto")]
    assert any(t.startswith("case") and "read GB" in t
               for t in seen.get("chapters/10_profiling.ipynb", [])), seen
    assert not broken, "printed tables wrapped at 375 px:\n" + "\n".join(broken)


def test_wide_tables_scroll_instead_of_squeezing_on_a_phone(built_book, site_page):
    """Reader QA: at 375 px the instructors' lab table and chapter 10's counters table squeezed
    their prose columns to a few characters a line. A table cell of prose keeps a readable
    width (prose-cell, tools/sphinx_course.py) and the table scrolls in its own box; the page
    does not scroll."""
    site_page.page.set_viewport_size({"width": 375, "height": 812})
    for path in ("chapters/appendix_instructors.html", "chapters/10_profiling.html"):
        site_page.goto(path)
        tables = site_page.page.evaluate("""() =>
            [...document.querySelectorAll('article.bd-article table')].map(t => ({
              narrowest: Math.min(...[...t.querySelectorAll('td.prose-cell')]
                                  .map(c => c.getBoundingClientRect().width)),
              prose: t.querySelectorAll('td.prose-cell').length,
              scrolls: t.scrollWidth > t.clientWidth + 1,
              overflow: getComputedStyle(t).overflowX}))""")
        prose = [t for t in tables if t["prose"]]
        assert prose, f"{path}: no table with cells of prose"
        for t in prose:
            assert t["narrowest"] >= 150, f"{path}: a prose column {t['narrowest']} px wide"
            assert not t["scrolls"] or t["overflow"] == "auto", f"{path}: {t}"
        assert site_page.page.evaluate("document.documentElement.scrollWidth") <= 376, path


def test_a_table_wider_than_its_column_says_it_scrolls(built_book, site_page):
    """Reader passes 5 and 6: at 375 px chapters 9's and 9b's tables hid their last columns
    (the ratios to cuBLAS) with no sign that they scroll, since a phone shows no scrollbar until
    touched. A line above every table wider than its column says so (tools/theme/course.js);
    none above a table that fits, and a resize to a laptop's width takes the lines away."""
    tables = """() => [...document.querySelectorAll('article.bd-article table')].map(t => ({
        wide: t.scrollWidth > t.clientWidth + 1,
        hinted: !!(t.previousElementSibling
                   && t.previousElementSibling.classList.contains('course-scroll-hint'))}))"""
    settled = ("() => document.readyState !== 'loading' && [...document.querySelectorAll("
               "'article.bd-article table')].every(t => (t.scrollWidth > t.clientWidth + 1) === "
               "!!(t.previousElementSibling && t.previousElementSibling.classList.contains("
               "'course-scroll-hint')))")

    def look():
        # (playwright's "networkidle" can come before the page is parsed: wait for the page,
        # and for the hints to follow the tables, a few seconds at most)
        try:
            site_page.page.wait_for_function(settled, timeout=5000)
        except Exception:
            pass  # the assertions below say what differs
        return site_page.page.evaluate(tables)

    for path in ("chapters/09_hopper.html", "chapters/09b_eight_bits.html"):
        site_page.page.set_viewport_size({"width": 375, "height": 812})
        site_page.goto(path)
        seen = look()
        assert any(t["wide"] for t in seen), f"{path}: no table wider than a phone's column"
        assert all(t["wide"] == t["hinted"] for t in seen), f"{path} at 375 px: {seen}"
        site_page.page.set_viewport_size({"width": 1280, "height": 900})
        seen = look()
        assert all(t["wide"] == t["hinted"] for t in seen), f"{path} at 1280 px: {seen}"
        assert not all(t["hinted"] for t in seen), f"{path}: every table hinted at 1280 px"


SHORT_CELLS_ON_TWO_LINES = """() =>
    [...document.querySelectorAll('article.bd-article table td:not(.prose-cell), '
                                  + 'article.bd-article table th:not(.prose-cell)')]
      .filter(c => c.textContent.trim())
      .map(c => {
        const r = document.createRange();
        r.selectNodeContents(c);
        const tops = [...r.getClientRects()].filter(x => x.width > 0).map(x => x.top)
                                            .sort((a, b) => a - b);
        let lines = tops.length ? 1 : 0;
        for (let i = 1; i < tops.length; i++) if (tops[i] - tops[i - 1] > 6) lines++;
        return {text: c.textContent.trim(), lines: lines};
      })
      .filter(c => c.lines > 1)"""


def test_short_table_cells_stay_on_one_line(built_book, site_page):
    """Reader QA: at 1280 px chapter 9's table broke "2,758 µs" after its comma, which read as
    two numbers. A cell that is not prose (a number with its unit, a name: tools/sphinx_course.py)
    keeps one line at 1280 and at 375 px; its table scrolls instead (the tests above)."""
    for width in (1280, 375):
        site_page.page.set_viewport_size({"width": width, "height": 900})
        for path in ("chapters/09_hopper.html", "chapters/08_tensor_cores.html",
                     "chapters/appendix_gpus.html"):
            site_page.goto(path)
            broken = site_page.page.evaluate(SHORT_CELLS_ON_TWO_LINES)
            assert not broken, f"{path} at {width} px: {broken[:5]}"


def test_the_figures_column_is_the_one_book_figures_assumes(built_book, site_page):
    """book.figures.COLUMN_PX, the width a figure is shrunk to in a 1280-px window, from which
    the figures' smallest text is held readable (tests/library/test_figures.py)."""
    from book import figures

    site_page.page.set_viewport_size({"width": 1280, "height": 900})
    site_page.goto("chapters/08_tensor_cores.html")
    width = site_page.page.evaluate(
        "document.querySelector('article.bd-article div.cell_output img')"
        ".getBoundingClientRect().width")
    assert abs(width - figures.COLUMN_PX) <= 4, width


MATH_OUT_OF_COLUMN = """() => {
    const col = document.querySelector('article.bd-article').getBoundingClientRect();
    // a formula inside a table that scrolls in its own box is reached by scrolling
    // it, not cut off
    const scrolled = e => { const t = e.closest('table');
        return t && getComputedStyle(t).overflowX === 'auto'
            && t.getBoundingClientRect().right <= col.right + 1; };
    return [...document.querySelectorAll('article.bd-article mjx-container')]
      .filter(e => e.getBoundingClientRect().right > col.right + 1 && !scrolled(e))
      .map(e => e.textContent.slice(0, 60));
}"""


def test_math_stays_in_the_column_at_phone_width(built_book, phone_tour):
    """At 375 px no formula runs past the column's edge, cut off: a display equation wider than
    the phone scrolls inside its own line (tools/theme/course.css), and inline math, which
    MathJax never breaks, is kept short enough by the text (chapter 4's tolerance test was
    363 px wide inside a list item)."""
    assert set(_pages(built_book)) <= set(phone_tour)
    assert any("math" in got for got in phone_tour.values()), "no page has math"
    out = [f"{path}: {t}" for path, got in phone_tour.items() for t in got.get("math", [])]
    assert not out, "math sticks out of the column at 375 px:\n" + "\n".join(out)


EXERCISES = """() =>
    [...document.querySelectorAll('article.bd-article .course-exercise')].map(e => ({
      question: (e.querySelector('p') || {innerText: ''}).innerText,
      folds: [...e.querySelectorAll('details')].map(d => [
        d.querySelector('summary').innerText, d.open,
        d.querySelector('summary + *').checkVisibility()]),
      frame: parseFloat(getComputedStyle(e).borderLeftWidth),
    }))"""


def test_exercises_show_the_question_with_hints_and_answer_folded(built_book, laptop_tour):
    """Every chapter's checked exercise (book.exercises) is on its page as a framed block: the
    question readable, each hint and the answer in a <details> fold that is closed."""
    problems, seen = [], 0
    for src, got in _executed_seen(built_book, laptop_tour):
        for ex in got["exercises"]:
            seen += 1
            summaries = [f[0] for f in ex["folds"]]
            if not ex["question"].startswith("Exercise.") or len(ex["question"]) < 30:
                problems.append(f"{src}: no readable question ({ex['question'][:60]!r})")
            if not summaries or summaries[-1] != "Answer":
                problems.append(f"{src}: no folded answer after the question ({summaries})")
            if any(opened or visible for _, opened, visible in ex["folds"]):
                problems.append(f"{src}: a hint or the answer shows before it is asked for")
            if ex["frame"] < 3:
                problems.append(f"{src}: the exercise is not framed (tools/theme/course.css)")
    assert seen >= 8, f"only {seen} checked exercises on the chapter pages"
    assert not problems, "\n".join(problems)


def test_dense_figures_keep_a_legible_width_on_phones(built_book, site_page):
    """Chapter 7's store drawn bank by bank (32 columns of lane numbers) was about 3 px a label
    shrunk to a phone's column. A figure marked scroll-wide (560 px or wider, or its cell's
    mystnb.image.classes) keeps at least 600 px at 375 px and scrolls inside its own output box,
    not the page; at 1280 px it fits the column with no scrolling."""
    page = "chapters/07_epilogue_fusion.html"
    measure = """() => [...document.querySelectorAll('article.bd-article img.scroll-wide')]
        .map(i => { const box = i.closest('div.cell_output');
                    return {width: i.getBoundingClientRect().width, alt: i.alt.slice(0, 40),
                            scrolls: box.scrollWidth > box.clientWidth + 1,
                            overflow: getComputedStyle(box).overflowX}; })"""
    site_page.page.set_viewport_size({"width": 375, "height": 812})
    site_page.goto(page)
    phone = site_page.page.evaluate(measure)
    assert phone and any(f["alt"].startswith("Two strips of 32 bank columns") for f in phone), phone
    assert all(f["width"] >= 600 and f["scrolls"] and f["overflow"] == "auto" for f in phone), phone
    assert site_page.page.evaluate("document.documentElement.scrollWidth") <= 376
    site_page.page.set_viewport_size({"width": 1280, "height": 900})
    site_page.goto(page)
    laptop = site_page.page.evaluate(measure)
    assert laptop and not any(f["scrolls"] for f in laptop), laptop


FIGURE_SCALES = """() =>
    [...document.querySelectorAll('article.bd-article div.cell_output img')].map(i => {
      const r = i.getBoundingClientRect();
      // the display size the output asked for (Sphinx's inline style), else the PNG's
      const w = parseFloat(i.style.width) || parseFloat(i.getAttribute('width')) || i.naturalWidth;
      const h = parseFloat(i.style.height) || parseFloat(i.getAttribute('height')) || i.naturalHeight;
      return {alt: (i.alt || i.src).slice(0, 50), scale: r.width / w,
              aspect: (r.height / r.width) / (h / w)}; })"""


def test_no_figure_is_shrunk_past_reading_on_a_phone(built_book, phone_tour):
    """At 375 px every figure in a cell's output is shown at 65% of its display width or more
    (a wide one scrolls in its box instead of shrinking), with its aspect ratio kept."""
    small = []
    for src, got in _executed_seen(built_book, phone_tour):
        for f in got["figures"]:
            if f["scale"] < 0.65 or abs(f["aspect"] - 1) > 0.03:
                small.append(f"{src}: {f}")
    assert not small, "figures shrunk or distorted at 375 px:\n" + "\n".join(small)



def test_the_landing_redirect_names_the_icon(built_book):
    """The index.html jupyter-book writes is one meta-refresh line; a browser opening it asked
    for /favicon.ico, a 404 logged now and then as a console error (issue 43, L27).
    tools/site_assets.py names the site's icon in it."""
    index = (built_book.html / "index.html").read_text(encoding="utf-8")
    assert 'http-equiv="Refresh"' in index and 'rel="icon"' in index, index
    href = re.search(r'rel="icon" href="([^"]+)"', index).group(1)
    assert (built_book.html / href).is_file(), href
