"""The widgets in a real browser (Debian's chromium through playwright), with no kernel.

Two kinds of page:

- a standalone page made here: the widget's own ES module rendered against a minimal model that
  holds the widget's state and, like a static page, has no comm (its save_changes throws). Fast,
  and it needs nothing but the package.
- the same widgets embedded the way the built book embeds them (saved widget state, the real
  @jupyter-widgets/html-manager and anywidget served from site_assets/), over localhost.
- the built book itself (tests/conftest.py's fixtures): every explorer a chapter shows.

The tests drive each widget (select, type, slide) and check that (1) the drawing changes, (2) the
numbers it displays are the ones book.traffic and book.roofline compute in Python, (3) it reads
at a 375 px phone width (no chart text over another, over a data point or out of the picture; a
point's details shown on a tap), (4) its question names the unit it reads a bare number in, and
(5) it asks no other host for anything.
"""

from __future__ import annotations

import functools
import http.server
import json
import re
import shutil
import threading
from pathlib import Path

import pytest

import book  # noqa: F401
from book import roofline, specs, traffic, widgets
from book.widgets.traffic import mlp_counts
from repo import ROOT



@pytest.fixture
def chromium(browser):
    """Debian's chromium through playwright: tests/conftest.py's session-wide browser."""
    return browser


@pytest.fixture(autouse=True)
def _no_recorded_data(monkeypatch, tmp_path):
    # widgets built here start from no measurements unless a test passes data explicitly
    from book.widgets import _data

    monkeypatch.setattr(_data, "DATA_DIR", tmp_path)


# ---------------------------------------------------------------- the standalone page

def standalone_html(widget) -> str:
    state = {k: v for k, v in widget.get_state().items()
             if not k.startswith("_") and k not in ("layout", "tabbable", "tooltip")}

    def js(o):
        return json.dumps(o).replace("</", "<\\/")

    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{{font-family:sans-serif;margin:8px;background:#fff;color:#222}}</style>
<style>{widget._css}</style></head><body><div id="root"></div>
<script type="module">
// The model a static page gives a widget: state in memory, no comm (save_changes throws).
class StaticModel {{
  constructor(state) {{ this.state = state; this.handlers = {{}}; }}
  get(k) {{ return this.state[k]; }}
  set(k, v) {{
    const old = JSON.stringify(this.state[k]);
    this.state[k] = v;
    if (old !== JSON.stringify(v)) for (const f of this.handlers["change:" + k] || []) f();
  }}
  on(e, f) {{ (this.handlers[e] = this.handlers[e] || []).push(f); }}
  off(e, f) {{ this.handlers[e] = (this.handlers[e] || []).filter((g) => g !== f); }}
  save_changes() {{ throw new Error("Syncing error: no comm channel defined"); }}
  send() {{}}
}}
window.__model = new StaticModel({js(state)});
try {{
  const url = URL.createObjectURL(new Blob([{js(widget._esm)}], {{ type: "text/javascript" }}));
  const mod = await import(url);
  await mod.default.render({{ model: window.__model, el: document.getElementById("root") }});
  window.__ready = true;
}} catch (e) {{ window.__error = String((e && e.stack) || e); }}
</script></body></html>"""


class WidgetPage:
    """A chromium page showing one widget, recording errors and every request it makes."""

    def __init__(self, browser, widget, width=820):
        self.page = browser.new_page(viewport={"width": width, "height": 1000})
        self.page.set_default_timeout(5000)
        self.errors, self.requests = [], []
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.set_content(standalone_html(widget))
        self.page.wait_for_function("window.__ready || window.__error")
        err = self.page.evaluate("window.__error")
        assert err is None, f"widget failed to render: {err}"

    def q(self, testid):
        return self.page.locator(f'[data-testid="{testid}"]')

    def value(self, testid):
        raw = self.q(testid).get_attribute("data-value")
        try:
            return float(raw)
        except (TypeError, ValueError):
            return raw

    def text(self, testid):
        return self.q(testid).inner_text()

    def select(self, testid, value):
        self.q(testid).select_option(value)

    def type(self, testid, value):
        self.q(testid).fill(str(value))

    def slide(self, testid, position):
        self.q(testid).evaluate(
            "(e, v) => { e.value = String(v); e.dispatchEvent(new Event('input', {bubbles: true})); }",
            position)

    def attr(self, selector, name):
        return self.page.locator(selector).first.get_attribute(name)

    def close(self):
        assert not self.errors, f"errors in the page: {self.errors}"
        outside = [u for u in self.requests if not u.startswith(("blob:", "data:", "about:"))]
        assert not outside, f"the widget made requests: {outside}"
        self.page.close()


@pytest.fixture
def open_widget(chromium):
    pages = []

    def _open(widget, width=820):
        p = WidgetPage(chromium, widget, width)
        pages.append(p)
        return p

    yield _open
    for p in pages:
        p.close()


_UNITS = {"s": 1, "ms": 1e-3, "µs": 1e-6, "ns": 1e-9, "B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9,
          "TB": 1e12}


def parse_quantity(text):
    """'421 µs' -> 4.21e-4; '1.41 GB' -> 1.41e9 (the first number and unit in the text)."""
    m = re.search(r"(-?[\d.]+(?:e-?\d+)?)\s*(TB|GB|MB|kB|B|ms|µs|ns|s)\b", text)
    assert m, f"no quantity in {text!r}"
    return float(m.group(1)) * _UNITS[m.group(2)]


# ---------------------------------------------------------------- roofline explorer

ROOFLINE_CASES = [
    # gpu, dtype, variant, precision, T, h, d
    ("H100-SXM", "float32", "fused", "auto", 8192, 14336, 4096),
    ("H100-SXM", "float16", "naive", "auto", 1, 18944, 4096),
    ("A100-80GB", "bfloat16", "epilogue", "auto", 2048, 8192, 4096),
    ("T4", "float32", "unfused", "tf32", 512, 14336, 4096),  # T4 has no TF32: falls back to auto
    ("L4", "float16", "epilogue", "fp32", 3, 11008, 2048),
    ("H200", "bfloat16", "unfused", "bf16", 4096, 12288, 3584),
]


def test_roofline_numbers_agree_with_python(open_widget):
    w = widgets.roofline_explorer("H100-SXM", this_gpu=False)
    page = open_widget(w)
    for gpu_key, dtype, variant, precision, T, h, d in ROOFLINE_CASES:
        page.select("gpu", gpu_key)
        page.select("dtype", dtype)
        page.select("variant", variant)
        options = page.q("precision").locator("option").evaluate_all("os => os.map(o => o.value)")
        if precision in options:
            page.select("precision", precision)
        else:  # the model keeps a peak this GPU lacks: both sides must fall back to "auto"
            page.page.evaluate(f"() => window.__model.set('precision', '{precision}')")
            assert page.q("precision").input_value() == "auto"
            w2 = widgets.roofline_explorer(gpu_key, dtype=dtype, variant=variant, T=T, h=h, d=d,
                                           precision=precision, this_gpu=False)
            assert w2.prediction() == roofline.predict(w2.traffic(), gpu_key)
            precision = "auto"
        page.type("T", T)
        page.type("h", h)
        if variant in ("unfused", "epilogue"):  # d is off (disabled) for the elementwise kernels
            page.type("d", d)
        t = (traffic.activation(T, h, dtype, variant) if variant in ("naive", "fused")
             else traffic.mlp_up(T, d, h, dtype, variant))
        pred = roofline.predict(t, gpu_key, None if precision == "auto" else precision)
        case = f"{gpu_key} {dtype} {variant} {precision} T={T} h={h} d={d}"
        assert page.value("intensity") == pytest.approx(t.intensity, rel=1e-12), case
        assert page.value("ridge") == pytest.approx(pred.ridge, rel=1e-12), case
        assert page.value("time") == pytest.approx(pred.time_s, rel=1e-12), case
        assert page.value("memory-time") == pytest.approx(pred.memory_time_s, rel=1e-12), case
        assert page.value("compute-time") == pytest.approx(pred.compute_time_s, rel=1e-12), case
        assert page.value("bound") == pred.bound, case
        # what a reader sees, to the three significant figures shown
        assert parse_quantity(page.text("time")) == pytest.approx(pred.time_s, rel=5e-3), case
        assert pred.bound in page.text("bound")
        assert f"{float(f'{t.intensity:.3g}'):g}" in page.text("intensity").replace(",", ""), case


def test_roofline_roof_is_where_the_math_runs_and_the_ridge_label_matches(open_widget):
    # an fp16 elementwise kernel computes on the FP32 CUDA cores: its roof is FP32, not the
    # tensor cores; a bfloat16 GEMM's is the tensor cores (the ridge the Vizuara article quotes, 295)
    page = open_widget(widgets.roofline_explorer("H100-SXM", this_gpu=False, dtype="float16",
                                                 variant="fused"))
    fp32 = roofline.ridge_point("H100-SXM", "fp32")
    assert page.value("ridge") == pytest.approx(fp32, rel=1e-12)
    first = page.q("precision").locator("option").first
    auto, why = first.text_content(), first.get_attribute("title")
    # the option names the roof; why auto picks it is its tooltip (short enough for a phone)
    assert "FP32 CUDA cores" in auto and "elementwise" in why, (auto, why)
    page.select("variant", "epilogue")
    page.select("dtype", "bfloat16")
    bf16 = roofline.ridge_point("H100-SXM", "bf16")
    assert page.value("ridge") == pytest.approx(bf16, rel=1e-12)
    assert "BF16 tensor cores" in page.q("precision").locator("option").first.text_content()
    # the chart's ridge label shows the readout's figure (295), not a rounder one (300)
    shown = page.page.locator('[data-testid="ridge-label"]').text_content()
    assert shown == f"ridge {float(f'{bf16:.3g}'):g}" == "ridge 295", shown
    assert f"{float(f'{bf16:.3g}'):g}" in page.text("ridge")


def test_roofline_responds_to_every_control(open_widget):
    w = widgets.roofline_explorer("H100-SXM", this_gpu=False)
    page = open_widget(w)

    def snapshot():
        return (page.attr('[data-testid="roof"]', "d"),
                page.attr('[data-testid="kernel-point"]', "cx") or page.attr('[data-testid="kernel-point"]', "points"),
                page.text("time"), page.attr('[data-testid="chart"]', "aria-label"))

    before = snapshot()
    page.select("gpu", "T4")
    after_gpu = snapshot()
    assert after_gpu[0] != before[0], "the roof did not move when the GPU changed"
    assert after_gpu[2] != before[2] and "T4" in after_gpu[3]
    page.type("T", 16)
    after_t = snapshot()
    assert after_t[2] != after_gpu[2], "the predicted time did not change with T"
    page.select("variant", "epilogue")
    after_v = snapshot()
    assert after_v[1] != after_t[1], "the kernel's point did not move to the GEMM's intensity"
    page.select("dtype", "float16")
    assert snapshot() != after_v
    page.select("preset", "3")  # 8192 x 14336
    assert page.q("T").input_value() == "8192" and page.q("h").input_value() == "14336"
    # a change made from Python (a kernel pushing new state in Jupyter) redraws too
    roof = page.attr('[data-testid="roof"]', "d")
    page.page.evaluate("() => { window.__model.set('gpu', 'H200'); window.__model.set('T', 64); }")
    assert page.attr('[data-testid="roof"]', "d") != roof
    assert page.q("gpu").input_value() == "H200" and page.q("T").input_value() == "64"


def test_roofline_measured_points_and_their_absence(open_widget):
    page = open_widget(widgets.roofline_explorer("H100-SXM", this_gpu=False))
    assert page.text("measured") == "no measurements recorded"
    assert page.page.locator(".swg-measured").count() == 0
    assert "No measurements recorded" in page.text("note")

    ds = {"provenance": {"gpu": "NVIDIA H100 80GB HBM3", "date": "2026-11-22"},
          "rows": [{"variant": "fused", "dtype": "float32", "shape": [8192, 14336], "seconds": 5.0e-4},
                   {"variant": "naive", "dtype": "float32", "shape": [8192, 14336], "seconds": 9.0e-4},
                   {"variant": "vec4", "dtype": "float32", "shape": [8192, 14336], "seconds": 4.5e-4},
                   {"variant": "fused", "dtype": "float16", "shape": [8192, 14336], "seconds": 2.6e-4}]}
    page = open_widget(widgets.roofline_explorer("H100-SXM", data=ds, this_gpu=False, T=8192, h=14336))
    assert page.page.locator(".swg-measured").count() == 3  # this GPU and float32
    assert page.value("measured") == pytest.approx(4.5e-4)  # the fastest fused kernel there
    assert "vec4, fastest of 2" in page.text("measured")
    page.select("dtype", "float16")
    assert page.page.locator(".swg-measured").count() == 1
    page.select("gpu", "A100-80GB")  # measured on an H100: not drawn on an A100's roofline
    assert page.page.locator(".swg-measured").count() == 0


def test_roofline_refuses_bad_sizes_with_a_message(open_widget):
    page = open_widget(widgets.roofline_explorer("H100-SXM", this_gpu=False))
    t0 = page.value("time")
    page.type("T", 0)
    assert "T must be a whole number" in page.text("T-error")
    assert page.value("time") == t0
    page.type("T", "2.5")
    assert "T must be a whole number" in page.text("T-error")
    page.type("T", 4)
    assert page.text("T-error") == "" and page.value("time") != t0


# ---------------------------------------------------------------- traffic explorer

TRAFFIC_CASES = [("activation", 4, 8, 4096, "float32"), ("activation", 1, 18944, 4096, "float16"),
                 ("activation", 8192, 14336, 4096, "bfloat16"), ("mlp", 2048, 8192, 4096, "float32"),
                 ("mlp", 1, 18944, 3584, "bfloat16"), ("mlp", 127, 129, 5, "float16")]


def test_traffic_numbers_agree_with_python(open_widget):
    page = open_widget(widgets.traffic_explorer())
    for scope, T, h, d, dtype in TRAFFIC_CASES:
        page.select("scope", scope)
        page.select("dtype", dtype)
        page.type("T", T)
        page.type("h", h)
        if scope == "mlp":  # d is off (disabled) for the activation alone
            page.type("d", d)
        variants = ("naive", "fused", "epilogue") if scope == "activation" else ("naive", "unfused", "epilogue")
        for v in variants:
            t = traffic.activation(T, h, dtype, v) if scope == "activation" else mlp_counts(T, d, h, dtype, v)
            case = f"{scope} {v} T={T} h={h} d={d} {dtype}"
            assert page.value(f"transfers-{v}") == t.transfers, case
            assert page.value(f"bytes-{v}") == t.bytes, case
            assert page.text(f"transfers-{v}") == f"{t.transfers:,}", case
            assert parse_quantity(page.text(f"bytes-{v}")) == pytest.approx(t.bytes, rel=5e-3), case


def test_traffic_responds(open_widget):
    page = open_widget(widgets.traffic_explorer(T=4, h=8))
    assert [page.value(f"transfers-{v}") for v in ("naive", "fused", "epilogue")] == [160, 96, 64]
    width_before = page.q("bar-fused").get_attribute("style")
    page.select("scope", "mlp")
    assert page.q("bar-unfused").count() == 1 and page.q("bar-fused").count() == 0
    page.type("d", 1)  # tiny weights: the intermediates dominate and the bars change
    page.select("scope", "activation")
    page.type("h", 16)
    assert page.value("transfers-naive") == 5 * 4 * 16
    page.select("dtype", "float16")
    assert page.value("bytes-fused") == 3 * 4 * 16 * 2
    page.select("scope", "mlp")
    assert page.q("bar-epilogue").get_attribute("style") != width_before


def test_d_is_off_where_it_counts_for_nothing(open_widget):
    # reader QA: in "activation alone" the d field looked greyed out yet took input that changed
    # nothing; it is disabled there (and for the roofline's elementwise kernels), on elsewhere
    page = open_widget(widgets.traffic_explorer(T=4, h=8, d=4096, scope="activation"))
    assert page.q("d").is_disabled() and not page.q("d").is_editable()
    assert "projections only" in page.q("d").locator("xpath=..").inner_text()
    page.select("scope", "mlp")
    assert page.q("d").is_enabled()
    page.type("d", 5)
    assert page.value("transfers-epilogue") == mlp_counts(4, 5, 8, "float32", "epilogue").transfers
    page.type("d", 0)  # refused, with a complaint; leaving the scope clears it and shows d = 5
    assert "d must be a whole number" in page.text("d-error")
    page.select("scope", "activation")
    assert page.q("d").is_disabled() and page.q("d").input_value() == "5"
    assert page.text("d-error") == ""

    page = open_widget(widgets.roofline_explorer("H100-SXM", this_gpu=False, variant="fused"))
    assert page.q("d").is_disabled()
    page.select("variant", "epilogue")
    assert page.q("d").is_enabled()
    page.select("variant", "naive")
    assert page.q("d").is_disabled()


# ---------------------------------------------------------------- launch explorer

def test_launch_numbers_agree_and_respond(open_widget):
    w = widgets.launch_explorer(overhead_s=2e-5, bandwidth=3.0e12, T=1, h=18944)
    page = open_widget(w)
    curve0 = page.attr('[data-testid="curve"]', "d")

    def check(dtype, T, h):
        ov, bw = page.value("overhead-value"), page.value("bandwidth-value")
        b = traffic.activation(T, h, dtype, "fused").bytes
        assert page.value("time") == pytest.approx(max(ov, b / bw), rel=1e-12)
        per = traffic.activation(1, 1, dtype, "fused").bytes
        assert page.value("crossover") == pytest.approx(ov * bw / per, rel=1e-12)
        assert page.value("regime") == ("overhead" if ov >= b / bw else "bandwidth")
        assert parse_quantity(page.text("time")) == pytest.approx(max(ov, b / bw), rel=5e-3)

    assert page.value("overhead-value") == pytest.approx(2e-5)
    check("float32", 1, 18944)
    assert page.value("regime") == "overhead"
    page.slide("overhead", 100)  # the slider is logarithmic: 1e-7 .. 1e-3 s
    assert page.value("overhead-value") == pytest.approx(10 ** (-7 + 0.1 * 4), rel=1e-9)
    curve1 = page.attr('[data-testid="curve"]', "d")
    assert curve1 != curve0, "the curve did not move when the overhead changed"
    check("float32", 1, 18944)
    page.slide("bandwidth", 200)
    assert page.attr('[data-testid="curve"]', "d") != curve1
    page.select("dtype", "bfloat16")
    page.type("T", 8192)
    page.type("h", 14336)
    check("bfloat16", 8192, 14336)
    assert page.value("regime") == "bandwidth"
    sheet = page.q("preset").locator("option", has_text="datasheet").get_attribute("value")
    page.select("preset", sheet)
    assert page.value("bandwidth-value") == specs.GPU_SPECS["H100-SXM"].memory_bandwidth


def test_launch_measured_points(open_widget):
    ds = {"provenance": {"gpu": "NVIDIA H100 80GB HBM3", "date": "2026-11-22"}, "rows": [
        {"kind": "kernel", "variant": "vec4", "dtype": "float32", "shape": [8192, 14336],
         "seconds": 5e-4, "bandwidth": 2.8e12},
        {"kind": "launch", "variant": "vec4_python_launch", "dtype": "float32", "shape": [1, 18944],
         "seconds": 3e-5},
        {"kind": "kernel", "variant": "vec4_graph", "dtype": "float32", "shape": [1, 18944],
         "seconds": 1.2e-6}]}
    page = open_widget(widgets.launch_explorer(data=ds))
    assert page.page.locator(".swg-measured").count() == 3
    assert page.value("overhead-value") == 3e-5 and page.value("bandwidth-value") == 2.8e12
    page.select("dtype", "float16")  # nothing measured in float16: only the datasheet preset
    assert page.page.locator(".swg-measured").count() == 0
    assert page.q("preset").locator("option").count() == 2
    page.select("dtype", "float32")
    graph = page.q("preset").locator("option", has_text="graph replay").get_attribute("value")
    page.select("preset", graph)  # the graph replay's time per SwiGLU as the overhead
    assert page.value("overhead-value") == 1.2e-6


# ---------------------------------------------------------------- the reader's question

def ask(root, answer):
    """Type `answer` into a widget's question, press Check; the feedback text and its verdict.

    ``root``: a WidgetPage or a locator of one widget on a page."""
    loc = root.q if isinstance(root, WidgetPage) else (lambda t: root.locator(f'[data-testid="{t}"]'))
    loc("quiz-answer").fill(str(answer))
    loc("quiz-check").click()
    fb = loc("quiz-feedback")
    return fb.inner_text(), fb.get_attribute("data-correct")


def test_traffic_question_right_and_wrong(open_widget):
    page = open_widget(widgets.traffic_explorer(T=4, h=8))
    naive, fused = (traffic.activation(4, 8, "float32", v) for v in ("naive", "fused"))
    assert "T = 4, h = 8, float32" in page.text("quiz-question")
    text, ok = ask(page, fused.bytes)
    assert ok == "false" and "Not yet" in text and "moves in all" in text
    text, ok = ask(page, naive.transfers - fused.transfers)
    assert ok == "false" and "counts transfers" in text
    text, ok = ask(page, "lots")
    assert ok == "false" and "not a number" in text
    saved = naive.bytes - fused.bytes
    assert ask(page, saved)[1] == "true"
    assert ask(page, f"{saved} B")[1] == "true"  # with its unit
    # the answer sits in a fold, written only when the reader opens it
    assert page.text("quiz-solution") == ""
    page.q("quiz-reveal").locator("summary").click()
    # the fold's "toggle" event is dispatched after the click returns (a queued task): wait
    # for the answer to be written rather than read at once (it read '' on the loaded CI box)
    page.page.wait_for_function(
        "document.querySelector('[data-testid=\"quiz-solution\"]').textContent.length > 0",
        timeout=10_000)
    assert f"{saved:,}" in page.text("quiz-solution")
    # another state: a new question, the old verdict cleared, the old answer now wrong
    page.select("dtype", "float16")
    assert page.text("quiz-feedback") == "" and "float16" in page.text("quiz-question")
    assert ask(page, saved)[1] == "false"
    half = traffic.activation(4, 8, "float16", "naive").bytes - \
        traffic.activation(4, 8, "float16", "fused").bytes
    assert ask(page, half)[1] == "true"
    page.select("scope", "mlp")
    T, d, h = 4, 4096, 8
    mlp = mlp_counts(T, d, h, "float16", "unfused").bytes - mlp_counts(T, d, h, "float16", "epilogue").bytes
    assert "dual GEMM" in page.text("quiz-question")
    text, ok = ask(page, f"{4 * T * h * 2} B")
    assert ok == "false" and "reads x once" in text
    assert ask(page, f"{mlp} B")[1] == "true"


def test_roofline_question_right_and_wrong(open_widget):
    page = open_widget(widgets.roofline_explorer("H100-SXM", dtype="float32", variant="fused",
                                                 T=8192, h=14336, this_gpu=False))
    t = traffic.activation(8192, 14336, "float32", "fused")
    pred = roofline.predict(t, "H100-SXM")
    share = 100 * t.flops / pred.time_s / specs.get("H100-SXM").peak(pred.precision)
    assert share < 5 and "fp32" in page.text("quiz-question")
    text, ok = ask(page, 100)
    assert ok == "false" and "compute roof" in text
    text, ok = ask(page, 100 / share * 100)
    assert ok == "false" and "upside down" in text
    text, ok = ask(page, f"{share:.3g}%")
    assert ok == "true" and "below the ridge" in text
    # a GEMM on the tensor cores, right of the ridge: the whole peak is in reach
    page.select("variant", "epilogue")
    page.select("dtype", "bfloat16")
    page.type("T", 4096)
    g = traffic.mlp_up(4096, 4096, 14336, "bfloat16", "epilogue")
    assert roofline.predict(g, "H100-SXM").bound == "compute"
    text, ok = ask(page, 100)
    assert ok == "true" and "compute-bound" in text


def test_launch_question_right_and_wrong(open_widget):
    page = open_widget(widgets.launch_explorer(overhead_s=2e-5, bandwidth=3.0e12, T=1, h=18944))

    def t(T, h, dtype):
        return max(2e-5, traffic.activation(T, h, dtype, "fused").bytes / 3.0e12)

    assert "T = 10, h = 18,944" in page.text("quiz-question")
    text, ok = ask(page, f"{10 * t(1, 18944, 'float32')} s")
    assert ok == "false" and "launch overhead" in text and "still sets the time" in text
    assert t(10, 18944, "float32") == 2e-5  # still overhead-bound at ten times the tokens
    assert ask(page, "20 µs")[1] == "true"
    page.select("dtype", "bfloat16")
    page.type("T", 8192)
    page.type("h", 14336)
    text, ok = ask(page, f"{t(8192, 14336, 'bfloat16')} s")
    assert ok == "false" and "stays put only while the overhead dominates" in text
    assert ask(page, f"{t(81920, 14336, 'bfloat16')} s")[1] == "true"


def test_launch_question_names_its_unit_and_reads_a_bare_number_in_it(open_widget):
    # reader QA: the question gave no unit and a bare 17.6 was read as 17.6 s, "too high by a
    # factor of about 1.0e6", while the answer shown was 17.6 µs
    page = open_widget(widgets.launch_explorer(overhead_s=17.6e-6, bandwidth=3.0e12, T=1, h=18944))
    question = page.text("quiz-question")
    assert question.endswith("Answer in microseconds (µs).") and "T = 10," in question
    assert "(µs)" in page.q("quiz").locator("label").inner_text()
    assert "µs" in page.q("quiz-answer").get_attribute("placeholder")
    for typed in ("17.6", "17.6us", "17.6 us", "17.6µs", "17.6 µs", "17.6 μs", "17.6 usec",
                  "17.6 microseconds", "0.0176 ms", "0.0176ms", "1.76e-5 s", "1.76e-5s",
                  "17600 ns", "17600ns", "17,6"):
        text, ok = ask(page, typed)
        assert ok == "true", (typed, text)
    text, ok = ask(page, "17.6 MB")
    assert ok == "false" and "not a unit of time" in text and "bare number of microseconds" in text
    text, ok = ask(page, "soon")
    assert ok == "false" and "not a time" in text and "microseconds" in text and "1.5e6" not in text
    text, ok = ask(page, "176")
    assert ok == "false" and "176 µs is too high" in text
    # bandwidth-bound at ten times the tokens: milliseconds fit, and a bare number is in ms
    page.select("dtype", "bfloat16")
    page.type("T", 8192)
    page.type("h", 14336)
    truth = traffic.activation(81920, 14336, "bfloat16", "fused").bytes / 3.0e12
    assert page.text("quiz-question").endswith("Answer in milliseconds (ms).")
    assert ask(page, f"{truth * 1e3:.4g}")[1] == "true"
    assert ask(page, f"{truth * 1e6:.4g} us")[1] == "true"


def test_a_wrong_answer_is_echoed_as_typed_and_a_near_miss_in_percent(open_widget):
    # reader QA: chapter 1's quiz echoed a typed 2.5 as "3 bytes is too low" (the display
    # format rounds), and a miss of a few percent read "too low, by a factor of about 1.0"
    page = open_widget(widgets.traffic_explorer(T=4, h=8))
    naive, fused = (traffic.activation(4, 8, "float32", v) for v in ("naive", "fused"))
    saved = naive.bytes - fused.bytes
    text, ok = ask(page, 2.5)
    assert ok == "false" and "2.5 B is too low" in text and "3 bytes" not in text, text
    near = round(saved * 0.9, 1)
    text, ok = ask(page, f"{near} bytes")
    assert ok == "false" and f"{near} bytes is 10% too low" in text and "factor" not in text, text
    text, ok = ask(page, saved * 3)
    assert ok == "false" and "too high, by a factor of about 3" in text, text


def test_traffic_question_reads_byte_units(open_widget):
    # chapter 3's state: hundreds of MB saved; the question asks in MB, decimal, and takes any
    # spelling of a byte unit (binary ones read as binary)
    page = open_widget(widgets.traffic_explorer(T=4096, h=14336, d=4096, scope="mlp", dtype="bfloat16"))
    saved = (mlp_counts(4096, 4096, 14336, "bfloat16", "unfused").bytes
             - mlp_counts(4096, 4096, 14336, "bfloat16", "epilogue").bytes)
    assert 1e8 < saved < 1e9
    assert page.text("quiz-question").endswith("Answer in megabytes (MB, 1,000,000 bytes).")
    assert "MB" in page.q("quiz-answer").get_attribute("placeholder")
    for typed in (f"{saved / 1e6:.4g}", f"{saved / 1e6:.4g} MB", f"{saved / 1e6:.4g}MB",
                  f"{saved / 1e6:.4g} mb", f"{saved / 1e6:.4g} megabytes", f"{saved / 1e3:.5g} kB",
                  f"{saved / 1e3:.5g} KB", f"{saved / 1e9:.4g} GB", f"{saved / 2**20:.4g} MiB",
                  f"{saved / 2**30:.4g} GiB", f"{saved / 2**10:.5g} KiB", f"{saved} B",
                  f"{saved} bytes", f"{saved:,} bytes", f"{saved / 1e6:.4g} M"):
        text, ok = ask(page, typed)
        assert ok == "true", (typed, text)
    text, ok = ask(page, f"{saved / 1e6:.4g} MiB")  # 4.9 % more than the MB figure
    assert ok == "false" and "too high" in text
    text, ok = ask(page, str(saved))  # a byte count, bare: read as MB, and said so
    assert ok == "false" and "read in megabytes" in text and "in bytes it would be right" in text
    text, ok = ask(page, "3 ms")
    assert ok == "false" and "not a unit of bytes" in text
    # chapter 1's hand count: 256 bytes, asked in bytes
    page.select("scope", "activation")
    page.type("T", 4)
    page.type("h", 8)
    page.select("dtype", "float32")
    assert page.text("quiz-question").endswith("Answer in bytes (B).")
    assert ask(page, "256")[1] == "true" and ask(page, "0.256 kB")[1] == "true"


def test_roofline_question_names_percent(open_widget):
    page = open_widget(widgets.roofline_explorer("H100-SXM", T=8192, h=14336, this_gpu=False))
    t = traffic.activation(8192, 14336, "float32", "fused")
    share = 100 * t.intensity * specs.get("H100-SXM").memory_bandwidth / specs.get("H100-SXM").peak("fp32")
    assert page.text("quiz-question").endswith("Answer in percent (%).")
    assert "%" in page.q("quiz-answer").get_attribute("placeholder")
    for typed in (f"{share:.3g}", f"{share:.3g}%", f"{share:.3g} %", f"{share:.3g} percent"):
        assert ask(page, typed)[1] == "true", typed
    text, ok = ask(page, "2 s")
    assert ok == "false" and "not a unit of percentage" in text


# ---------------------------------------------------------------- phone width, accessibility

@pytest.mark.parametrize("make", [lambda: widgets.roofline_explorer("H100-SXM", this_gpu=False),
                                  lambda: widgets.traffic_explorer(T=8192, h=14336, scope="mlp"),
                                  lambda: widgets.launch_explorer()],
                         ids=["roofline", "traffic", "launch"])
def test_readable_at_phone_width(open_widget, make):
    page = open_widget(make(), width=375)
    p = page.page
    assert p.evaluate("document.documentElement.scrollWidth") <= 375, "the page scrolls sideways"
    for box in p.locator("svg.swg-chart").all():
        assert box.bounding_box()["width"] <= 375 - 8
    sizes = p.evaluate("""() => [...document.querySelectorAll('.swg text, .swg .swg-v, .swg td, .swg label')]
        .map(e => parseFloat(getComputedStyle(e).fontSize))""")
    assert sizes and min(sizes) >= 11, f"text smaller than 11px: {min(sizes)}"
    labelled = p.evaluate("""() => [...document.querySelectorAll('svg.swg-chart, .swg-barlist')]
        .map(e => (e.getAttribute('aria-label') || '').length)""")
    assert labelled and min(labelled) > 40, "a chart has no useful text alternative"
    # every form control has a label
    unlabelled = p.evaluate("""() => [...document.querySelectorAll('.swg input, .swg select')]
        .filter(e => !e.getAttribute('aria-label') && !document.querySelector(`label[for="${e.id}"]`)).length""")
    assert unlabelled == 0


def test_okabe_ito_palette_only(open_widget):
    page = open_widget(widgets.roofline_explorer("H100-SXM", this_gpu=False, variant="naive"))
    okabe_ito = {"#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7",
                 "#000000", "currentColor", "none"}
    colours = page.page.evaluate("""() => [...document.querySelectorAll('svg.swg-chart [stroke], svg.swg-chart [fill]')]
        .flatMap(e => [e.getAttribute('stroke'), e.getAttribute('fill')]).filter(Boolean)""")
    assert set(colours) <= okabe_ito, set(colours) - okabe_ito


# ---------------------------------------------------------------- a point's details on a phone

def _h100_rows():
    """Measured rows like book/data's H100 results: elementwise kernels at the chapters' shapes,
    dual GEMMs a little under the fp32 roof (where its label used to sit on them), launches."""
    def gemm(shape, dtype, seconds, variant="numba_dual_gemm"):
        return {"kind": "gemm", "variant": variant, "dtype": dtype, "shape": shape, "seconds": seconds}

    def kernel(variant, shape, dtype, seconds, **kw):
        return {"kind": "kernel", "variant": variant, "dtype": dtype, "shape": shape, "seconds": seconds, **kw}

    return {"provenance": {"gpu": "NVIDIA H100 80GB HBM3", "date": "2026-11-22"}, "rows": [
        kernel("vec4", [8192, 14336], "float32", 4.5e-4, bandwidth=3.0e12),
        kernel("fused", [8192, 14336], "float32", 5.0e-4),
        kernel("naive", [8192, 14336], "float32", 9.0e-4),
        kernel("fused", [1, 18944], "float32", 2.2e-6),
        kernel("fused", [1, 1024], "float32", 2.0e-6),  # far from the rest: a point to tap
        kernel("fused", [1, 18944], "float16", 2.1e-6),
        kernel("naive", [1, 18944], "float16", 4.0e-6),
        kernel("vec4_graph", [1, 18944], "float32", 1.2e-6),
        kernel("fused", [2048, 8192], "bfloat16", 6.0e-5),
        gemm([2048, 4096, 8192], "float32", 6.45e-3),
        gemm([512, 4096, 14336], "float32", 2.9e-3),
        gemm([8192, 4096, 14336], "float32", 4.4e-2),
        gemm([2048, 4096, 8192], "float32", 7.1e-3, "numba_dual_gemm_identity"),
        gemm([2048, 4096, 8192], "bfloat16", 1.2e-3),
        gemm([2048, 4096, 8192], "float16", 1.3e-3, "unfused_gemm"),
        {"kind": "launch", "variant": "vec4_python_launch", "dtype": "float32", "shape": [1, 18944],
         "seconds": 1.76e-5},
    ]}


def _chart_data():
    """What the built book draws (book/data's recorded results), with _h100_rows beside them so
    that the crowded places exist even where nothing is recorded."""
    from book import data as book_data

    recorded = [book_data.load(slug) for slug in book_data.available()]
    return [_h100_rows()] + recorded


DETAIL_OF_POINT_JS = """(e) => [e.getAttribute('aria-label'), e.querySelector('title').textContent,
    e.getBoundingClientRect().x + e.getBoundingClientRect().width / 2,
    e.getBoundingClientRect().y + e.getBoundingClientRect().height / 2]"""


def _lone_point(page, selector):
    """A point of playwright `page` drawn at least 24 px from every other (a tap near it can mean
    only it): (its locator, its details, its centre in the viewport)."""
    i = page.evaluate("""(sel) => {
        const pts = [...document.querySelectorAll('[data-point]')].map(e => e.getBoundingClientRect())
            .map(r => [r.x + r.width / 2, r.y + r.height / 2]);
        const all = [...document.querySelectorAll('[data-point]')];
        return all.findIndex((e, i) => e.matches(sel) && pts.every((q, j) => j === i ||
            Math.hypot(q[0] - pts[i][0], q[1] - pts[i][1]) >= 24));
    }""", selector)
    assert i >= 0, f"no lone point matches {selector}"
    loc = page.locator("[data-point]").nth(i)
    loc.scroll_into_view_if_needed()  # a tap or a click lands only inside the viewport
    label, title, x, y = loc.evaluate(DETAIL_OF_POINT_JS)
    assert label == title, "the hover tooltip and the tapped details differ"
    return loc, label, (x, y)


@pytest.mark.parametrize("kind", ["roofline", "launch"])
def test_a_click_or_tap_on_a_point_shows_its_details(chromium, kind):
    # reader QA: a point's details were only a <title> tooltip, which a tap on a phone never shows
    make = {"roofline": lambda: widgets.roofline_explorer("H100-SXM", data=_h100_rows(), this_gpu=False,
                                                          dtype="float32", variant="epilogue",
                                                          T=2048, h=8192, d=4096),
            "launch": lambda: widgets.launch_explorer(data=_h100_rows(), T=1, h=18944)}[kind]
    page = WidgetPage(chromium, make(), width=375)
    detail = page.q("point-detail")
    assert detail.is_visible() and "tap" in detail.inner_text()
    assert page.page.locator(".swg-measured[data-point]").count() >= 3
    # a real click on a measured point writes what its tooltip holds, in the page
    loc, text, (x, y) = _lone_point(page.page, ".swg-measured")
    assert text.startswith("measured: ")
    page.page.mouse.click(x, y)
    assert detail.inner_text() == text and detail.is_visible()
    assert "swg-selected" in loc.get_attribute("class")
    # the widget's own point (the kernel's prediction, the size chosen)
    own = page.q("kernel-point" if kind == "roofline" else "probe")
    own.click()
    assert detail.inner_text() == own.get_attribute("aria-label")
    assert detail.inner_text().startswith("predicted: " if kind == "roofline" else "T × h chosen above")
    # a fingertip misses by a few px: the nearest point within reach is taken
    page.page.mouse.click(x + 9, y + 6)
    assert detail.inner_text() == text
    # from the keyboard: a point takes focus and shows its details
    own.focus()
    assert detail.inner_text() == own.get_attribute("aria-label")
    loc.focus()
    page.page.keyboard.press("Enter")
    assert detail.inner_text() == text
    # a redraw (another T) keeps the point shown while it is still drawn
    page.type("T", 3)
    assert detail.inner_text() == text
    page.close()

    # a tap on a touch screen, at a phone's width
    ctx = chromium.new_context(viewport={"width": 375, "height": 800}, has_touch=True, is_mobile=True)
    phone = ctx.new_page()
    phone.set_content(standalone_html(make()))
    phone.wait_for_function("window.__ready || window.__error")
    assert phone.evaluate("window.__error") is None
    loc, text, (x, y) = _lone_point(phone, ".swg-measured")
    phone.touchscreen.tap(x, y)
    assert phone.locator('[data-testid="point-detail"]').inner_text() == text
    ctx.close()


# ---------------------------------------------------------------- labels that do not collide

# Every text of a chart, as its box turned with it (a rotated label is a slanted box, not the
# upright box around it); problems: a text leaving the picture, two texts overlapping, a text
# over a data marker (one drawn inside the plot). Overlaps under half a pixel are allowed.
CHART_TEXT_PROBLEMS_JS = """(svg) => {
  const toScreen = (m) => ([x, y]) => { const p = new DOMPoint(x, y).matrixTransform(m); return [p.x, p.y]; };
  const corners = (x0, y0, x1, y1) => [[x0, y0], [x1, y0], [x1, y1], [x0, y1]];
  const overlap = (a, b) => {
    for (const poly of [a, b]) for (let i = 0; i < poly.length; i++) {
      const [px, py] = poly[i], [qx, qy] = poly[(i + 1) % poly.length];
      const l = Math.hypot(qx - px, qy - py);
      if (!l) continue;
      const nx = (qy - py) / l, ny = (px - qx) / l;
      const span = (q) => q.reduce(([lo, hi], [x, y]) => [Math.min(lo, x * nx + y * ny), Math.max(hi, x * nx + y * ny)], [Infinity, -Infinity]);
      const [alo, ahi] = span(a), [blo, bhi] = span(b);
      if (ahi <= blo + 0.5 || bhi <= alo + 0.5) return false;
    }
    return true;
  };
  const box = svg.getBoundingClientRect(), ctm = svg.getScreenCTM();
  const c = svg.querySelector('clipPath rect');
  const [c0, c1] = [[+c.getAttribute('x'), +c.getAttribute('y')],
    [+c.getAttribute('x') + +c.getAttribute('width'), +c.getAttribute('y') + +c.getAttribute('height')]].map(toScreen(ctm));
  const texts = [...svg.querySelectorAll('text')].filter((t) => t.textContent.trim()).map((t) => {
    const b = t.getBBox();
    return [t.textContent, corners(b.x, b.y, b.x + b.width, b.y + b.height).map(toScreen(t.getScreenCTM()))];
  });
  const marks = [...svg.querySelectorAll('.swg-measured, [data-testid=kernel-point], [data-testid=probe]')]
    .map((e) => [e.getAttribute('data-testid') || 'measured point', e.getBoundingClientRect()])
    .filter(([, r]) => { const x = r.x + r.width / 2, y = r.y + r.height / 2; return x >= c0[0] && x <= c1[0] && y >= c0[1] && y <= c1[1]; })
    .map(([n, r]) => [n, corners(r.left, r.top, r.right, r.bottom)]);
  const out = [];
  for (const [t, q] of texts) {
    if (q.some(([x, y]) => x < box.left - 0.5 || x > box.right + 0.5 || y < box.top - 0.5 || y > box.bottom + 0.5)) out.push(`"${t}" leaves the chart`);
  }
  for (let i = 0; i < texts.length; i++) {
    for (let j = i + 1; j < texts.length; j++) if (overlap(texts[i][1], texts[j][1])) out.push(`"${texts[i][0]}" overlaps "${texts[j][0]}"`);
    for (const [n, q] of marks) if (overlap(texts[i][1], q)) out.push(`"${texts[i][0]}" covers a ${n}`);
  }
  return [...new Set(out)];
}"""

# (name, widget, state set in the model): chapters 2 and 6 as published, the reader's reports,
# a compute-bound kernel on the tensor cores, a decode step, a GPU with fewer peaks, presets
LAYOUT_CASES = [
    ("chapter 2", "roofline", {}),
    ("RTX-3090 float16 dual GEMM", "roofline", {"gpu": "RTX-3090", "dtype": "float16", "variant": "epilogue"}),
    ("H100 bfloat16 dual GEMM, compute-bound", "roofline", {"dtype": "bfloat16", "variant": "epilogue", "T": 4096}),
    ("H100 float32 dual GEMM at the measured shape", "roofline", {"variant": "epilogue", "T": 2048, "h": 8192}),
    ("H100 float16 naive decode", "roofline", {"dtype": "float16", "variant": "naive", "T": 1, "h": 18944}),
    ("T4 float32 two GEMMs", "roofline", {"gpu": "T4", "variant": "unfused", "T": 512}),
    ("A100 bfloat16 fp32 peak", "roofline", {"gpu": "A100-80GB", "dtype": "bfloat16", "variant": "epilogue", "precision": "fp32"}),
    ("chapter 6", "launch", {}),
    ("launch: overhead 1 ms", "launch", {"overhead_s": 1e-3}),
    ("launch: overhead 100 ns, bandwidth 10 GB/s", "launch", {"overhead_s": 1e-7, "bandwidth": 1e10}),
    ("launch: bfloat16 prefill", "launch", {"dtype": "bfloat16", "T": 8192, "h": 14336}),
]


@pytest.mark.parametrize("width", [375, 1280])
def test_chart_texts_neither_overlap_nor_leave_the_chart(chromium, width):
    # reader QA: at 375 px the fp32 roof's label sat on the measured GEMMs and the "10000" tick
    # was cut off; RTX-3090 / float16 / epilogue overlapped labels at 375 and 1280; chapter 6's
    # "100µs" tick touched the axis title
    data = _chart_data()
    pages = {"roofline": WidgetPage(chromium, widgets.roofline_explorer(
                 "H100-SXM", dtype="float32", variant="fused", T=8192, h=14336, data=data, this_gpu=False), width),
             "launch": WidgetPage(chromium, widgets.launch_explorer(T=1, h=18944, dtype="float32", data=data), width)}
    start = {kind: p.page.evaluate("() => ({...window.__model.state})") for kind, p in pages.items()}
    problems = {}
    for name, kind, state in LAYOUT_CASES:
        page = pages[kind]
        page.page.evaluate("(s) => { for (const [k, v] of Object.entries(s)) window.__model.set(k, v); }",
                           {**start[kind], **state})
        svg = page.page.locator('svg[data-testid="chart"]')
        assert svg.locator(".swg-measured").count() > 0 or kind == "roofline" and "gpu" in state, name
        found = svg.evaluate(CHART_TEXT_PROBLEMS_JS)
        if found:
            problems[name] = found
        if kind == "roofline":  # every label the chart needs is there
            texts = svg.locator("text").all_text_contents()
            assert any("roof" in t or t.endswith("FLOP/s") for t in texts), (name, texts)
            assert any(t.endswith("B/s") for t in texts), (name, texts)
    for p in pages.values():
        p.close()
    assert not problems, f"at {width} px: {problems}"


# ---------------------------------------------------------------- the real static-page machinery

SITE_VENDOR = ROOT / "site_assets" / "vendor"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def static_site(tmp_path_factory):
    """A directory served on localhost with the book's vendored widget manager and a page that
    embeds all three widgets as saved state, the way a built book page does."""
    if not (SITE_VENDOR / "html-manager" / "embed-amd.js").exists():
        pytest.skip("site_assets/vendor is missing: run `make book` (npm ci + tools.site_assets)")
    from ipywidgets.embed import embed_data

    root = tmp_path_factory.mktemp("site")
    shutil.copytree(SITE_VENDOR, root / "vendor")
    ws = [widgets.roofline_explorer("H100-SXM", this_gpu=False), widgets.traffic_explorer(),
          widgets.launch_explorer()]
    data = embed_data(views=ws, drop_defaults=False)
    views = "\n".join(
        f'<div class="w" id="w{i}"><script type="application/vnd.jupyter.widget-view+json">'
        f"{json.dumps(v)}</script></div>" for i, v in enumerate(data["view_specs"]))
    state = json.dumps(data["manager_state"]).replace("</", "<\\/")
    (root / "index.html").write_text(f"""<!doctype html><html><head><meta charset="utf-8">
<script src="vendor/requirejs/require.js"></script>
<script src="vendor/widgets-config.js"></script>
<script src="vendor/html-manager/embed-amd.js"></script>
<script type="application/vnd.jupyter.widget-state+json">{state}</script>
</head><body>{views}</body></html>""", encoding="utf-8")
    handler = functools.partial(_Quiet, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/index.html"
    server.shutdown()


def test_widgets_respond_on_a_static_page_with_the_real_widget_manager(chromium, static_site):
    page = chromium.new_page(viewport={"width": 820, "height": 1000})
    requests, errors = [], []
    page.on("request", lambda r: requests.append(r.url))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(static_site)
    page.wait_for_selector('#w0 [data-testid="roof"]', timeout=30000)
    page.wait_for_selector('#w1 [data-testid="transfers-naive"]', timeout=30000)
    page.wait_for_selector('#w2 [data-testid="curve"]', timeout=30000)
    # roofline: change the GPU, the roof moves
    roof = page.locator('#w0 [data-testid="roof"]').get_attribute("d")
    page.locator('#w0 [data-testid="gpu"]').select_option("L4")
    assert page.locator('#w0 [data-testid="roof"]').get_attribute("d") != roof
    # traffic: change h, the counts follow book.traffic
    page.locator('#w1 [data-testid="h"]').fill("16")
    assert float(page.locator('#w1 [data-testid="transfers-fused"]').get_attribute("data-value")) == \
        traffic.activation(4, 16, "float32", "fused").transfers
    # launch: slide the overhead, the curve moves
    curve = page.locator('#w2 [data-testid="curve"]').get_attribute("d")
    page.locator('#w2 [data-testid="overhead"]').evaluate(
        "e => { e.value = '900'; e.dispatchEvent(new Event('input', {bubbles: true})); }")
    assert page.locator('#w2 [data-testid="curve"]').get_attribute("d") != curve
    # each widget's question is checked in the page, with no kernel
    for i in range(3):
        text, ok = ask(page.locator(f"#w{i}"), "1e30")
        assert ok == "false" and "too high" in text, (i, text)
    saved = traffic.activation(4, 16, "float32", "naive").bytes - \
        traffic.activation(4, 16, "float32", "fused").bytes
    assert ask(page.locator("#w1"), saved)[1] == "true"
    host = static_site.split("/index.html")[0]
    outside = [u for u in requests if not u.startswith((host, "blob:", "data:"))]
    assert not outside, f"requests to other hosts: {outside}"
    assert not errors, errors
    page.close()


# ---------------------------------------------------------------- the built book

def _explorer_pages(built_book) -> list[str]:
    """Built pages whose saved widget state holds a book.widgets explorer."""
    found = []
    for src in built_book.toc_files:
        html = built_book.page(src)
        if html.exists() and '"_anywidget_id": "book.widgets.' in html.read_text(encoding="utf-8"):
            found.append(str(Path(src).with_suffix(".html")))
    return found


def _check_roofline(page, root):
    def v(testid):
        return root.locator(f'[data-testid="{testid}"]')

    state = {k: v(k).input_value() for k in ("gpu", "dtype", "variant", "precision", "T", "h", "d")}
    T, h, d = int(state["T"]), int(state["h"]), int(state["d"])
    t = (traffic.activation(T, h, state["dtype"], state["variant"]) if state["variant"] in ("naive", "fused")
         else traffic.mlp_up(T, d, h, state["dtype"], state["variant"]))
    if not state["gpu"].startswith("this GPU"):
        pred = roofline.predict(t, state["gpu"], None if state["precision"] == "auto" else state["precision"])
        assert float(v("time").get_attribute("data-value")) == pytest.approx(pred.time_s, rel=1e-12), state
    assert float(v("intensity").get_attribute("data-value")) == pytest.approx(t.intensity, rel=1e-12)
    roof = v("roof").get_attribute("d")
    v("gpu").select_option("L4" if state["gpu"] != "L4" else "T4")
    assert v("roof").get_attribute("d") != roof, "the roofline did not redraw for another GPU"
    time_before = v("time").get_attribute("data-value")
    v("T").fill(str(T + 1000))
    assert v("time").get_attribute("data-value") != time_before


def _check_traffic(page, root):
    def v(testid):
        return root.locator(f'[data-testid="{testid}"]')

    v("scope").select_option("activation")
    v("h").fill("16")
    T, dtype = int(v("T").input_value()), v("dtype").input_value()
    for variant in ("naive", "fused", "epilogue"):
        t = traffic.activation(T, 16, dtype, variant)
        assert float(v(f"transfers-{variant}").get_attribute("data-value")) == t.transfers
        assert float(v(f"bytes-{variant}").get_attribute("data-value")) == t.bytes
    saved = traffic.activation(T, 16, dtype, "naive").bytes - traffic.activation(T, 16, dtype, "fused").bytes
    assert ask(root, f"{saved * 3} B")[1] == "false" and ask(root, f"{saved} B")[1] == "true"


def _check_launch(page, root):
    curve = root.locator('[data-testid="curve"]').get_attribute("d")
    slider = root.locator('[data-testid="overhead"]')
    new = "100" if slider.input_value() != "100" else "900"
    slider.evaluate("(e, v) => { e.value = v; e.dispatchEvent(new Event('input', {bubbles: true})); }", new)
    assert root.locator('[data-testid="curve"]').get_attribute("d") != curve


def test_explorers_respond_on_the_built_book(built_book, site_page):
    pages = _explorer_pages(built_book)
    assert pages, "no page of the built book shows a book.widgets explorer"
    seen = {}
    for path in pages:
        site_page.goto(path)
        page = site_page.page
        page.wait_for_selector(".swg", timeout=30_000)
        for kind, check in (("roofline", _check_roofline), ("traffic", _check_traffic),
                            ("launch", _check_launch)):
            roots = page.locator(f".swg-{kind}")
            for i in range(roots.count()):
                check(page, roots.nth(i))
                seen.setdefault(kind, []).append(path)
        assert "Error rendering" not in page.locator("article").inner_text(), path
        site_page.assert_clean(path)
    print(f"\n[widgets] explorers driven on the built book: {seen}")
    assert seen, f"explorer state saved on {pages} but none rendered"
