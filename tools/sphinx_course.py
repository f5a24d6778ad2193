"""The course's Sphinx extension (loaded through `sphinx.local_extensions` in _config.yml).

1. Each executed chapter's page says, at the top, whose outputs it shows: the GPU recording
   (which GPU, when, from which commit, by which command; tools/recordings.py), or, when the
   chapter has no current recording, the CUDA simulator's run on the build machine. The outputs
   themselves are put in place by tools/execute.py; both ask tools.recordings, so the label and
   the outputs cannot disagree.
2. One copy of each inline script. Sphinx 7.4 registers a script that has a body and no file
   twice when an extension adds it after the builder started (once with filename None, once
   with ""), so sphinx-thebe's `const THEBE_JS_URL = ...` ran twice on every page and threw
   "SyntaxError: Identifier 'THEBE_JS_URL' has already been declared".
3. A colour mode on every page (``default_mode``): the theme's script otherwise reads an empty
   mode on a reader's first visit and logs "Got invalid theme mode: . Resetting to auto." as a
   console error.
4. Wide figures in cell outputs keep a legible width on phones and scroll in their own box
   (``scroll-wide``; tools/theme/course.css).
5. Printed tables keep their rows whole on phones: the column-aligned lines of a cell's printed
   output become a block of their own (``printed-table``) that scrolls sideways in its box,
   while the output's prose lines still wrap; and a table cell of prose (``prose-cell``) keeps
   a readable width on a phone, its table scrolling in its box, instead of a column squeezed
   to a few characters.
6. ``{measured}`family arg ...```: a measured figure in prose, computed from its record by
   ``book.quotes`` when the page is built, linked to the record with its GPU, date and commit on
   hover; a key that names nothing fails the build.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from pathlib import Path

from docutils import nodes

from tools import recordings


def _executed() -> set[str]:
    from tools.execute import executed_notebooks

    return set(executed_notebooks())


def _para(*parts) -> nodes.paragraph:
    p = nodes.paragraph()
    for part in parts:
        p += nodes.Text(part) if isinstance(part, str) else part
    return p


def _recorded_note(rec: recordings.Recording, repo_url: str,
                   branch: str = "main") -> nodes.admonition:
    prov = rec.provenance
    sha = prov.get("commit") or ""
    versions = ", ".join(f"{k.replace('_', '-')} {prov[k]}" for k in ("numba_cuda", "torch")
                         if prov.get(k))
    driver = f"driver {prov['driver']}" if prov.get("driver") else ""
    if prov.get("driver_cuda"):
        driver += f"{', ' if driver else ''}CUDA {prov['driver_cuda']}"
    commit = (nodes.reference("", "", nodes.literal("", sha[:7]),
                              refuri=f"{repo_url.rstrip('/')}/commit/{sha}")
              if sha and repo_url else nodes.literal("", sha[:7] or "unknown"))
    note = nodes.admonition(classes=["note", "course-outputs", "course-outputs-recorded"])
    note += nodes.title("", f"Outputs recorded on an {prov.get('gpu') or 'unknown GPU'}")
    note += _para(
        "The outputs on this page were recorded on an ", nodes.strong("", prov.get("gpu") or "?"),
        f" ({'; '.join(x for x in (driver, versions) if x)}) on ",
        nodes.strong("", (prov.get("date") or "?")[:10]), ", from commit ", commit, ", by ",
        nodes.literal("", "python -m tools.record"),
        ". The machine that built this site has no GPU: it ran the notebook again in Numba's "
        "CUDA simulator, as a check that the code shown here still runs, and published these "
        "recorded outputs because the code is the code that was recorded. Running the notebook "
        "shows your own outputs: your GPU's timings, or, with no GPU, the CUDA simulator's "
        "(correct results, nothing timed). Figures loaded from the course's measurement records "
        "(book/data) were measured earlier, by benchmark runs whose own GPU, date and commit are "
        "printed beside them (\"Measured ... commit ...\"), so they differ from this recording's; "
        "a cell whose numbers come from several runs names each one under its output.")
    if repo_url and rec.path is not None:
        rel = f"records/chapters/{rec.path.parent.name}/{rec.path.name}"
        note += _para("The recording, with its full provenance: ", nodes.reference(
            "", "", nodes.literal("", rel),
            refuri=f"{repo_url.rstrip('/')}/blob/{branch}/{rel}"), ".")
    return note


def _simulator_note(rec: recordings.Recording) -> nodes.admonition:
    why = ("its GPU recording is older than its code" if rec.exists
           else "this chapter has no GPU recording yet")
    note = nodes.admonition(classes=["warning", "course-outputs", "course-outputs-simulator"])
    note += nodes.title("", "Outputs from the CUDA simulator, not a GPU")
    note += _para(
        f"The outputs on this page come from Numba's CUDA simulator on the machine that built "
        f"the site, which has no GPU ({why}): results are checked, but cells that time kernels "
        "have nothing to time. Run the notebook on a GPU (the rocket icon opens it in Colab) to "
        "see real timings.")
    return note


def add_outputs_note(app, doctree) -> None:
    docname = app.env.docname
    src = Path(app.env.doc2path(docname, base=False)).as_posix()
    if src not in _executed():
        return
    rec = recordings.find(src, root=Path(app.srcdir))
    theme = app.config.html_theme_options or {}
    repo_url = theme.get("repository_url", "")
    note = (_recorded_note(rec, repo_url, theme.get("repository_branch") or "main")
            if rec.usable else _simulator_note(rec))
    section = doctree.next_node(nodes.section)
    if section is None:
        doctree.insert(0, note)
        return
    at = 1 if section.children and isinstance(section[0], nodes.title) else 0
    section.insert(at, note)


def one_copy_of_each_script(app, pagename, templatename, context, doctree) -> None:
    context.setdefault("default_mode", "auto")
    scripts = context.get("script_files")
    if not isinstance(scripts, list):
        return
    seen, kept = set(), []
    for js in scripts:
        body = getattr(js, "attributes", {}).get("body")
        key = ("body", body) if body and not getattr(js, "filename", None) else ("file", id(js))
        if key in seen:
            continue
        seen.add(key)
        kept.append(js)
    scripts[:] = kept


def printed_links_stay_text(app, doctree, docname) -> None:
    """A cell's printed Markdown that MyST reads as a link to nowhere is shown as printed.

    Program output is not prose: a table row a cell prints, ``Numba kernel[grid, block](...)``,
    is Markdown link syntax, and MyST would turn it into a link to ``#...``. Inside cell outputs,
    a reference to no element of the page becomes the text the program printed.
    """
    ids = {i for node in doctree.findall(nodes.Element) for i in node.get("ids", [])}
    for ref in list(doctree.findall(nodes.reference)):
        target = ref.get("refid") or (ref.get("refuri", "")[1:]
                                      if ref.get("refuri", "").startswith("#") else None)
        if target is None or target in ids:
            continue
        inside_output = any("cell_output" in (a.get("classes") or [])
                            for a in _ancestors(ref))
        if inside_output:
            ref.replace_self(nodes.Text(f"[{ref.astext()}]({target})"))


# A figure at least this wide (its display width, in CSS pixels) keeps MIN_PHONE_WIDTH on a
# phone and scrolls sideways in its output box (tools/theme/course.css, .scroll-wide): shrunk
# to a 375-pixel screen, a 750-pixel figure's 9-point labels were about 5 pixels tall.
WIDE_FIGURE_PX = 560


def _png_width(path: Path) -> int | None:
    try:
        with open(path, "rb") as f:
            head = f.read(24)
    except OSError:
        return None
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    return int.from_bytes(head[16:20], "big")


def wide_figures_scroll_on_phones(app, doctree, docname) -> None:
    """Mark every figure in a cell's output that is WIDE_FIGURE_PX or wider ``scroll-wide``.

    Its display width is the output's own (a retina PNG says it: book/figures.py), else the
    PNG's pixel width. A cell can also ask for it in its metadata (mystnb.image.classes)."""
    for img in doctree.findall(nodes.image):
        if "scroll-wide" in img.get("classes", []):
            continue
        if not any("cell_output" in (a.get("classes") or []) for a in _ancestors(img)):
            continue
        width = None
        try:
            width = int(float(str(img.get("width", "")).removesuffix("px")))
        except ValueError:
            uri = img.get("uri", "")
            for base in (Path(app.srcdir), Path(app.srcdir) / Path(docname).parent):
                width = _png_width(base / uri) if uri else None
                if width:
                    break
        if width and width >= WIDE_FIGURE_PX:
            img["classes"] = [*img.get("classes", []), "scroll-wide"]


# A printed line is a table row where two columns stand apart: a run of 2 or more spaces
# between two printed characters (a leading indent is not one), or a Markdown-style row.
_COLUMN_GAP = re.compile(r"\S {2,}\S")
_RULE = re.compile(r"^\s*[-=|+: ]{3,}\s*$")


def _is_table_line(line: str) -> bool:
    return bool(_COLUMN_GAP.search(line) or _RULE.match(line)
                or (line.lstrip().startswith("|") and line.count("|") >= 2))


def table_runs(text: str) -> list[tuple[bool, str]]:
    """``text`` cut into runs of lines, each ``(is_table, lines)``: two or more table lines
    in a row are a table, anything else (a status line, a sentence) is prose."""
    lines = text.split("\n")
    runs: list[tuple[bool, list[str]]] = []
    for line in lines:
        table = _is_table_line(line)
        if runs and runs[-1][0] == table:
            runs[-1][1].append(line)
        else:
            runs.append((table, [line]))
    merged: list[tuple[bool, list[str]]] = []
    for table, chunk in runs:
        table = table and len(chunk) >= 2
        if merged and merged[-1][0] == table:
            merged[-1][1].extend(chunk)
        else:
            merged.append((table, chunk))
    return [(table, "\n".join(chunk)) for table, chunk in merged]


def printed_tables_keep_their_rows(app, doctree, docname) -> None:
    """Split each printed output (stdout, text/plain) whose lines hold a table into blocks: the
    table's lines ``printed-table`` (on a phone they keep whole rows and scroll sideways in
    their box, tools/theme/course.css), the prose around them as it was (it wraps)."""
    for block in list(doctree.findall(nodes.literal_block)):
        classes = block.get("classes", [])
        if "output" not in classes or not {"stream", "text_plain"} & set(classes):
            continue
        if not any("cell_output" in (a.get("classes") or []) for a in _ancestors(block)):
            continue
        text = block.astext()
        if "\x1b" in text:  # coloured output: leave its escapes to the lexer, whole
            continue
        runs = [(t, chunk.strip("\n")) for t, chunk in table_runs(text) if chunk.strip()]
        if not any(t for t, _ in runs):
            continue
        parts = []
        for table, chunk in runs:
            part = nodes.literal_block(chunk, chunk)
            for key, value in block.attributes.items():
                if key not in ("ids", "names", "dupnames", "backrefs"):
                    part[key] = list(value) if isinstance(value, list) else value
            if table:
                part["classes"] = [*part["classes"], "printed-table"]
            parts.append(part)
        block.replace_self(parts)


# A table cell with more text than this is prose: on a phone it keeps a readable width.
PROSE_CELL_CHARS = 24


def prose_cells_keep_a_width(app, doctree, docname) -> None:
    """Mark a table cell of more than PROSE_CELL_CHARS characters ``prose-cell``."""
    for entry in doctree.findall(nodes.entry):
        if len(" ".join(entry.astext().split())) > PROSE_CELL_CHARS:
            entry["classes"] = [*entry.get("classes", []), "prose-cell"]


def _quotes():
    """book.quotes, imported without `import book`'s line about the simulator in the build's log
    (the role reads records; it runs no kernel), the environment left as it was."""
    if "book.quotes" not in sys.modules:
        was = os.environ.get("BOOK_QUIET")
        os.environ["BOOK_QUIET"] = "1"
        try:
            importlib.import_module("book.quotes")
        finally:
            if was is None:
                del os.environ["BOOK_QUIET"]
            else:
                os.environ["BOOK_QUIET"] = was
    return sys.modules["book.quotes"]


def measured_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """``{measured}`decode_peak fp8_decode_seamcost_h200 preload+pdl 1``` -> "83%", linked."""
    quotes = _quotes()
    try:
        q = quotes.quote(text)
    except (KeyError, ValueError) as e:
        msg = inliner.reporter.error(
            f"{{measured}}`{text}`: {e.args[0]} (book/quotes.py lists the families)", line=lineno)
        return [inliner.problematic(rawtext, rawtext, msg)], [msg]
    theme = inliner.document.settings.env.config.html_theme_options or {}
    repo_url, branch = theme.get("repository_url", ""), theme.get("repository_branch") or "main"
    shown = nodes.inline(q.text, q.text)
    if not repo_url:
        return [nodes.inline("", "", shown, classes=["measured"])], []
    return [nodes.reference(rawtext, "", shown, classes=["measured"], reftitle=q.where(),
                            refuri=f"{repo_url.rstrip('/')}/blob/{branch}/{q.path}")], []


def _ancestors(node):
    node = node.parent
    while node is not None:
        yield node
        node = node.parent


def setup(app):
    app.add_role("measured", measured_role)
    app.connect("doctree-read", add_outputs_note)
    app.connect("doctree-resolved", printed_links_stay_text)
    app.connect("doctree-resolved", wide_figures_scroll_on_phones)
    app.connect("doctree-resolved", printed_tables_keep_their_rows)
    app.connect("doctree-resolved", prose_cells_keep_a_width)
    app.connect("html-page-context", one_copy_of_each_script)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "env_version": 1}
