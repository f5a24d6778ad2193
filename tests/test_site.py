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

from conftest import ROOT


def _pages(built_book) -> list[str]:
    """Every page a reader can reach: the toc's pages plus search and index."""
    return [str(Path(f).with_suffix(".html")) for f in built_book.toc_files] + [
        "search.html", "genindex.html"]


def test_no_page_asks_another_host_or_fails(built_book, site_page):
    for path in _pages(built_book):
        site_page.goto(path)
        site_page.page.wait_for_timeout(300)  # let MathJax and widgets fetch what they fetch
        site_page.assert_clean(path)
    assert any("/vendor/mathjax/" in u for u in site_page.requests), \
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
    results = site_page.page.locator("ul.search li")
    results.first.wait_for(timeout=20_000)
    assert results.count() >= 1
    assert "intro.html" in " ".join(
        results.locator("a").evaluate_all("as => as.map(a => a.getAttribute('href'))"))
    site_page.assert_clean()


def test_no_horizontal_scroll_at_phone_width(built_book, site_page):
    site_page.page.set_viewport_size({"width": 375, "height": 812})
    too_wide = []
    for path in _pages(built_book):
        site_page.goto(path)
        width = site_page.page.evaluate("document.documentElement.scrollWidth")
        if width > 376:
            culprit = site_page.page.evaluate("""() => {
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
            }""")
            too_wide.append(f"{path}: {width}px wide (e.g. {culprit})")
    assert not too_wide, "\n".join(too_wide)
