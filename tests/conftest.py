"""The suite's map and markers, and its shared fixtures: the built book, a local web server and
a real browser.

One folder per thing exercised (a new test goes in the folder of what it exercises; test file
names stay unique across folders, since pytest imports them by name):

- ``library/``: the ``book`` package: kernels, timing harness, models, tracer, exercises, the
  widgets' Python side (``decode_cases.py``: cases the decode GEMVs' tests share;
  ``capability_messages.json``: the capability checks' refusals, pinned).
- ``grader/``: ``autograder``: assign, check, grade, the sandbox, feedback, Gradescope
  (``grading_runs.py`` starts the long grading runs once for the folder, a lab's fixtures in
  one run; ``faults.py`` injects the failures of a grading machine where a child is started;
  ``docker_default.py`` makes Docker's default limits real for ``test_docker_default.py``).
- ``chapters/``: the chapters' code, exercises and GPU recordings (``test_record.py``,
  ``test_recorded_outputs.py``: a table that reads several runs names each, no output prints
  a path of the machine that ran it; ``test_glossary.py``: a bold term an earlier page already
  uses).
- ``built_book/``: the book built by ``make book`` in a clean copy, read as HTML and in chromium
  (every page of ``_toc.yml`` built, a Colab link, no request to another host, fits a phone).
- ``tooling/``: ``tools/`` (setup cell, Colab rehearsal, GPU lane, lint helper, the lab pages)
  and the house's rules: the structure map's (``test_structure.py``), CONTRIBUTING.md's paths
  and the packages' maps (``test_contributing.py``), every benchmark names its record
  (``test_benchmarks.py``), no duration asserted in the fast lane (``test_fast_lane.py``).
- ``repo.py``: ``ROOT``, ``FIXTURES`` (import these, never count ``parents[...]``) and
  ``ci_keeps``; this file: the fixtures below, the markers and the workers' units.
- ``fixtures/``: the submissions the grader's tests feed it, most folders with a README:
  ``submissions/`` (careless and hostile lab-2 files), ``threats/``, ``neighbours/`` (the
  resource families: storage, threads, a faked CUDA-init failure), ``multikernel/`` (honest
  multi-kernel solutions of labs 2-4 and a hostile one), ``container/`` (hostile lab-2 files
  for Gradescope's container: they read the seed, forge results and kill the grader, plant
  code, start threads without end, carry hidden cases out through /tmp and the proof's child,
  leave files and IPC objects behind; ``grader/test_docker_default.py`` grades them under
  Docker's default limits), ``sanitizer/``, ``lab5/`` (lab 5's cuBLAS-through-ctypes,
  float32-CUDA-core, missing-``cp.async``-wait and transposed-fragment files:
  ``test_lab5_tensor_core.py``), ``lab6/`` (lab 6's split-K without its reduction, weights
  read twice, cache by pointer, atomics and one-thread-per-output files:
  ``test_lab6_decode.py``), ``compile/`` (a kernel of host NumPy that runs in the simulator
  and no GPU could compile: ``test_compile_check.py``), and, derived from the masters by the lab modules' edits
  (``python -m tools.lab_fixtures --write``),
  ``bounds/`` (per lab, the master with a store past the end of ``out`` or a forgotten
  ``blockIdx``: ``test_bounds_grading.py``, ``test_guard_zones.py``), ``controls/`` (per lab,
  the "lesson not learned" control its rubric names: ``test_lesson_controls.py``) and
  ``hazards/`` (lab 6's split-K faults: a counter without an atomic, one never reset, one
  piece per thread, ``test_split_k_faults.py``; labs 2-5's result kept by shape and lab 2's
  read past ``x``, graded beside the bounds fixtures).

Markers, registered in pyproject.toml: ``slow`` (builds the site, executes a notebook, or runs
the grader on submissions: write ``@pytest.mark.slow``, or ``pytestmark = pytest.mark.slow``
when the whole file does), ``browser`` (playwright and Debian's chromium), ``gpu`` (needs a
CUDA GPU: skipped in the simulator, so CI never runs it; ``make test-gpu`` runs only those,
tools/gpu_tests.py, and its summary is committed under records/tests/ whenever kernels or the
grader change), ``extended`` (what ``make test`` leaves to ``make test-all``: long compile
checks, rehearsals of other machines, the later cases of a ``ci_keeps`` list). A test that asks
for the fixture ``built_book`` is ``slow`` and one that asks for ``browser`` (or ``site_page``)
is ``browser`` without writing it (``MARKED_BY_FIXTURE``). ``make test`` lints with ruff
(``[tool.ruff]`` in pyproject.toml) and runs the rest on two workers (pytest-xdist;
``TEST_WORKERS=0`` for one process): each test file stays on one worker, and so does each group
of ``SERIAL_UNITS``; files that share a session fixture go there together, and a long unit goes
in ``FIRST`` so that it starts early. ``pytest -m "not slow and not browser"`` is the fast lane
while you work; ``pytest tests/grader`` runs one folder.

Shared fixtures

The book is built ONCE per test session, from a clean copy of the repository, and shared by every
test that asks for it. Use these fixtures in your own tests rather than building again:

``built_book`` (session) -> BuiltBook
    Copies the tracked and untracked-but-not-ignored files (``git ls-files -co --exclude-standard``)
    to a temporary directory, reuses this checkout's ``.venv`` (symlink) and ``node_modules``
    (hard-linked copy), and runs ``make book`` there: notebooks execute (in Numba's CUDA simulator
    with no GPU) and any cell error fails the build. Fields: ``root`` (the copy), ``html``
    (its _build/html), ``seconds`` (build wall time), ``log`` (make's output), ``toc_files``
    (source paths listed in _toc.yml, e.g. "chapters/02_roofline.ipynb"), ``page(src)`` (the
    HTML path of a source path). A failed build fails the test that asked for it, with the tail
    of the log. To iterate on browser tests without rebuilding, point ``BOOK_PREBUILT`` at a
    tree whose ``_build/html`` is already built (e.g. ``BOOK_PREBUILT=. pytest tests/built_book/test_x.py``
    after ``make book``); CI never sets it.

``site_url`` (session) -> str
    Base URL, ending in "/", of a localhost HTTP server serving ``built_book.html``.

``browser`` (session) -> playwright Browser
    Debian's chromium (``$CHROMIUM``, default /usr/bin/chromium) driven by playwright, headless,
    with background networking off.

``site_page`` (function) -> SitePage
    A fresh browser page (its own context; ``viewport`` can be changed with
    ``site_page.page.set_viewport_size``) that records what the site asks for. Requests to any
    host but localhost are aborted, so a test never waits on the network, and recorded.
    ``site_page.goto("chapters/02_roofline.html")`` loads a page (path relative to the site
    root) and waits until the network is idle. Then:
    ``.page`` (playwright Page), ``.requests`` (URLs), ``.external`` (URLs not on localhost),
    ``.failed`` ("URL: reason" for failed requests and HTTP errors), ``.errors`` (uncaught page
    JS errors), ``.problems()`` (those three as lines), ``.assert_clean()`` (no external, failed
    or JS errors, with a message listing them).

Example::

    def test_my_widget(site_page):
        site_page.goto("chapters/02_roofline.html")
        site_page.page.locator(".my-widget input").fill("4096")
        site_page.assert_clean()
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from repo import ROOT

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # `from tools import ...` whatever the working directory
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
# Page errors to ignore: none (tools/sphinx_course.py keeps sphinx-thebe's snippet to one copy).
KNOWN_PAGE_ERRORS: tuple[str, ...] = ()
# Build timings measured during the session, printed at the end of the run (not asserted here:
# targets are reported from measurements, see README).
TIMINGS: dict[str, float] = {}


# Markers that follow from a fixture, so that no test can forget them: a test that asks for the
# built book (a clean copy and `make book`: minutes) is `slow`; one that asks for the browser
# (playwright and chromium) is `browser`. `pytest -m "not slow and not browser"` is the fast lane.
MARKED_BY_FIXTURE = {"built_book": "slow", "browser": "browser"}


@pytest.hookimpl(tryfirst=True)   # before `-m` selects on the markers added here
def pytest_collection_modifyitems(config, items):
    """Adds the markers MARKED_BY_FIXTURE names. Tests marked ``gpu`` need a CUDA GPU: skipped
    in Numba's simulator (CI, a laptop); `make test-gpu` (tools/gpu_tests.py) runs them on a GPU
    machine."""
    for item in items:
        for fixture, marker in MARKED_BY_FIXTURE.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(marker)
    marked = [item for item in items if item.get_closest_marker("gpu")]
    if not marked:
        return
    import book  # decides GPU or simulator (as every test module that imports it does)

    if book.gpu.SIMULATED:
        skip = pytest.mark.skip(reason="needs a CUDA GPU (marker gpu: `make test-gpu` on a GPU machine)")
        for item in marked:
            item.add_marker(skip)


# `make test` runs the suite on two workers (pytest-xdist, `pytest -n 2`: CI's two cores). They
# share it by work units, never test by test: a test file is one unit (its module fixtures run
# once), and each group of SERIAL_UNITS is one unit that one worker runs in order: the built
# book (a session fixture, built once, and the browser tests that read it) and the grader's
# tests that read the long runs of tests/grader/grading_runs.start_all or of its lab_run (each
# started once in the process that asks first; tests/grader/test_autograder.py checks that
# every file asking is listed here). Every other grader file is a unit of its own: a grading run is made safe beside
# another by the grader itself (its own folders, uids and process tree: test_neighbours.py),
# and the tests that read processes read only those of their own runs. The units of FIRST
# start first, in that order (the longest first, so that neither worker is left with a long
# one at the end); the other files follow in collection order.
SERIAL_UNITS = {
    "tests/built_book/": ("tests/built_book/",),
    "tests/grader/ (the runs of grading_runs.start_all)": (
        "tests/grader/test_autograder.py", "tests/grader/test_autograder_robustness.py",
        "tests/grader/test_lab_paths.py"),
    "tests/grader/ (the runs of grading_runs.lab_run)": (
        "tests/grader/test_bounds_grading.py", "tests/grader/test_split_k_faults.py",
        "tests/grader/test_lab5_tensor_core.py", "tests/grader/test_lab6_decode.py"),
}
FIRST = ("tests/built_book/", "tests/grader/ (the runs of grading_runs.start_all)",
         "tests/grader/ (the runs of grading_runs.lab_run)", "tests/grader/test_feedback.py",
         "tests/library/test_tensorcore.py", "tests/library/test_decode_mlp.py",
         "tests/grader/test_gradescope.py")


def work_unit(nodeid: str) -> str:
    """The unit of work a test belongs to: the group of SERIAL_UNITS its file is in, or its file."""
    path = nodeid.split("::", 1)[0]
    return next((unit for unit, paths in SERIAL_UNITS.items()
                 if any(path.startswith(p) for p in paths)), path)


@pytest.hookimpl(optionalhook=True)   # a hook of pytest-xdist's, called when it is there
def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") == "each":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class CourseUnits(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

        def _assign_work_unit(self, node):
            first = next((unit for unit in FIRST if unit in self.workqueue), None)
            if first:
                self.workqueue.move_to_end(first, last=False)
            super()._assign_work_unit(node)

    config.option.loadscopereorder = False   # not by count of tests: collection order
    return CourseUnits(config, log)


def pytest_sessionfinish(session):
    output = getattr(session.config, "workeroutput", None)   # on an xdist worker
    if output is not None and TIMINGS:
        output["book_timings"] = dict(TIMINGS)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    TIMINGS.update(getattr(node, "workeroutput", {}).get("book_timings", {}))


def pytest_terminal_summary(terminalreporter):
    if TIMINGS:
        terminalreporter.section("book build timings")
        for name, seconds in TIMINGS.items():
            terminalreporter.write_line(f"{name}: {seconds:.1f} s")


def repo_files(root: Path = ROOT) -> list[str]:
    """What a clean clone would hold, plus work not yet committed (but not ignored files)."""
    try:
        out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root,
                             check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):  # not a git checkout (e.g. a tarball)
        skip = {".git", ".venv", "_build", "node_modules", "site_assets", "__pycache__",
                ".pytest_cache", "build", "dist"}
        return [p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()
                and not skip.intersection(p.relative_to(root).parts)
                and not p.name.endswith(".egg-info")]
    return [f for f in out.split("\0") if f and (root / f).is_file()]


def copy_repo(dest: Path, root: Path = ROOT, with_env: bool = True) -> Path:
    """A clean copy of the checkout at ``dest``; ``with_env`` reuses .venv and node_modules."""
    for rel in repo_files(root):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, target)
    if not with_env:
        return dest
    venv = Path(sys.prefix)
    if (venv / "bin" / "python").exists():
        (dest / ".venv").symlink_to(venv)
    if (root / "node_modules").is_dir():
        # Hard links: `npm ci` in the copy (if the lockfile changed) cannot touch ours.
        subprocess.run(["cp", "-al", str(root / "node_modules"), str(dest / "node_modules")],
                       check=True)
    return dest


def toc_files(root: Path) -> list[str]:
    """Source files listed in _toc.yml, with their suffixes ("intro.md", "chapters/x.ipynb")."""
    from tools.execute import toc_sources

    return toc_sources(root)


@dataclass
class BuiltBook:
    root: Path
    html: Path
    seconds: float
    log: str
    toc_files: list[str] = field(default_factory=list)

    def page(self, src: str) -> Path:
        return self.html / (str(Path(src).with_suffix(".html")))


def run_make(root: Path, target: str = "book", timeout: int = 1500) -> tuple[int, float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(["make", target], cwd=root, capture_output=True, text=True,
                          timeout=timeout)
    return proc.returncode, time.perf_counter() - t0, proc.stdout + proc.stderr


@pytest.fixture(scope="session")
def built_book(tmp_path_factory) -> BuiltBook:
    prebuilt = os.environ.get("BOOK_PREBUILT")
    if prebuilt:
        root = Path(prebuilt).resolve()
        if not (root / "_build" / "html" / "index.html").is_file():
            pytest.fail(f"BOOK_PREBUILT={prebuilt}: no built book in {root}/_build/html "
                        "(run `make book` there first)", pytrace=False)
        return BuiltBook(root=root, html=root / "_build" / "html", seconds=float("nan"),
                         log="", toc_files=toc_files(root))
    if Path(sys.prefix) == ROOT / ".venv":
        # The copy shares this venv: make sure it matches our requirements first, so the copy's
        # `make book` finds it installed and never re-points the editable install at itself.
        rc, _, log = run_make(ROOT, "install")
        assert rc == 0, log[-3000:]
    root = copy_repo(tmp_path_factory.mktemp("clean") / "swiglu-kernels")
    rc, seconds, log = run_make(root)
    (root / "_build").mkdir(exist_ok=True)
    (root / "_build" / "make-book.log").write_text(log)
    if rc != 0:
        pytest.fail(f"`make book` failed in a clean copy ({root}); last lines:\n{log[-6000:]}",
                    pytrace=False)
    TIMINGS["fresh `make book` in a clean copy (venv and node_modules reused)"] = seconds
    return BuiltBook(root=root, html=root / "_build" / "html", seconds=seconds, log=log,
                     toc_files=toc_files(root))


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class _QuietServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # the browser closing a connection early is not a site error


@pytest.fixture(scope="session")
def site_url(built_book):
    handler = functools.partial(_QuietHandler, directory=str(built_book.html))
    server = _QuietServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/"
    server.shutdown()


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Debian's chromium is needed at {CHROMIUM}: as root, `apt-get update && "
                    "apt-get install -y chromium` (`make test` does this), or set CHROMIUM.",
                    pytrace=False)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


def is_local(url: str) -> bool:
    parts = urlsplit(url)
    if parts.scheme in ("data", "blob", "about"):
        return True
    return parts.hostname in ("127.0.0.1", "localhost")


class SitePage:
    def __init__(self, browser, base: str):
        self.base = base
        self.context = browser.new_context()
        self.page = self.context.new_page()
        self.requests: list[str] = []
        self.external: list[str] = []
        self.failed: list[str] = []
        self.errors: list[str] = []
        self._leaving = False
        self.context.route(lambda url: not is_local(url), self._block)
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("requestfailed", self._on_failed)
        self.page.on("response", lambda r: r.status >= 400
                     and self.failed.append(f"{r.url}: HTTP {r.status}"))
        self.page.on("pageerror", self._on_error)

    def _block(self, route):
        self.external.append(route.request.url)
        route.abort()

    def _on_failed(self, request):
        # Leaving a page aborts what it still had in flight: not a failure of the site.
        if self._leaving and "ERR_ABORTED" in (request.failure or ""):
            return
        if request.url not in self.external:
            self.failed.append(f"{request.url}: {request.failure}")

    def _on_error(self, exc):
        if not any(k in str(exc) for k in KNOWN_PAGE_ERRORS):
            self.errors.append(str(exc))

    def goto(self, path: str, **kw):
        kw.setdefault("wait_until", "networkidle")
        if self.page.url != "about:blank":
            self._leaving = True
            try:
                self.page.goto("about:blank")
            finally:
                self._leaving = False
        return self.page.goto(self.base + path.lstrip("/"), **kw)

    def problems(self) -> list[str]:
        """What ``assert_clean`` fails on: requests to other hosts, failed ones, JS errors."""
        return ([f"request to another host: {u}" for u in self.external]
                + [f"failed request: {f}" for f in self.failed]
                + [f"JavaScript error: {e}" for e in self.errors])

    def assert_clean(self, what: str = ""):
        problems = self.problems()
        assert not problems, f"{what or self.page.url}:\n" + "\n".join(problems)

    def close(self):
        self.context.close()


@pytest.fixture
def site_page(browser, site_url):
    sp = SitePage(browser, site_url)
    yield sp
    sp.close()
