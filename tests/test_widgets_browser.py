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
at a 375 px phone width, and (4) it asks no other host for anything.
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

ROOT = Path(__file__).resolve().parent.parent


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
    # tensor cores; a bfloat16 GEMM's is the tensor cores (the ridge seed 000 quotes, 295)
    page = open_widget(widgets.roofline_explorer("H100-SXM", this_gpu=False, dtype="float16",
                                                 variant="fused"))
    fp32 = roofline.ridge_point("H100-SXM", "fp32")
    assert page.value("ridge") == pytest.approx(fp32, rel=1e-12)
    auto = page.q("precision").locator("option").first.text_content()
    assert "FP32 CUDA cores" in auto and "elementwise" in auto, auto
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
    text, ok = ask(page, 4 * T * h * 2)
    assert ok == "false" and "reads x once" in text
    assert ask(page, mlp)[1] == "true"


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
    text, ok = ask(page, 10 * t(1, 18944, "float32"))
    assert ok == "false" and "launch overhead" in text and "still sets the time" in text
    assert t(10, 18944, "float32") == 2e-5  # still overhead-bound at ten times the tokens
    assert ask(page, "20 µs")[1] == "true"
    page.select("dtype", "bfloat16")
    page.type("T", 8192)
    page.type("h", 14336)
    text, ok = ask(page, t(8192, 14336, "bfloat16"))
    assert ok == "false" and "stays put only while the overhead dominates" in text
    assert ask(page, t(81920, 14336, "bfloat16"))[1] == "true"


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
    assert ask(root, saved * 3)[1] == "false" and ask(root, saved)[1] == "true"


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
