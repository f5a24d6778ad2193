// Shared front-end code for the course's widgets: the traffic and roofline formulas (mirroring
// book/traffic.py and book/roofline.py, checked against them by tests/test_widgets_browser.py),
// number formatting, and a small log-log SVG chart. Python concatenates this file in front of each
// widget's own file to make one self-contained ES module: no imports, no network.

const SVG_NS = "http://www.w3.org/2000/svg";

// Okabe & Ito (2008) colour-blind-safe palette; "black" is drawn as currentColor so that dark
// themes stay readable.
const OI = {
  black: "currentColor",
  orange: "#E69F00",
  sky: "#56B4E9",
  green: "#009E73",
  yellow: "#F0E442",
  blue: "#0072B2",
  vermillion: "#D55E00",
  purple: "#CC79A7",
};

// ---------------------------------------------------------------- formulas (see book/traffic.py)

// Elementwise SwiGLU, out = silu(gate) * up, over T x h elements.
// naive: a silu kernel reads gate and writes tmp; a multiply kernel reads tmp and up, writes out.
// fused: one kernel reads gate and up and writes out.
// epilogue: applied in the epilogue of the GEMM that computes up (seed 000's count): 2Th.
function activationTraffic(T, h, elemBytes, variant, flopsPerElement) {
  const n = T * h;
  let breakdown;
  if (variant === "naive") {
    breakdown = [
      ["silu kernel: gate -> tmp", n, n],
      ["multiply kernel: tmp, up -> out", 2 * n, n],
    ];
  } else if (variant === "fused") {
    breakdown = [["fused kernel: gate, up -> out", 2 * n, n]];
  } else if (variant === "epilogue") {
    // in the up-projection GEMM's epilogue: up is in registers, gate is read, out written
    breakdown = [["GEMM epilogue: gate -> out", n, n]];
  } else {
    throw new Error(`unknown activation variant "${variant}": use "naive", "fused" or "epilogue"`);
  }
  return finishTraffic(breakdown, elemBytes, flopsPerElement * n);
}

// Gate and up projections (x[T,d] @ Wg[d,h], x @ Wu[d,h]) followed by the activation.
// unfused: two GEMMs each read x and a weight and write gate / up; then the fused activation.
// naive:   the same two GEMMs, then the two-kernel activation (not in book.traffic.mlp_up: it is
//          mlp_up("unfused") with the fused activation swapped for the naive one).
// epilogue: one dual GEMM reads x once and both weights, applies silu(g)*u in its epilogue and
//          writes only out.
function mlpUpTraffic(T, d, h, elemBytes, variant, flopsPerElement) {
  const x = T * d, w = d * h, o = T * h;
  const gemmFlops = 2 * 2 * T * d * h;
  let breakdown;
  if (variant === "epilogue") {
    breakdown = [["dual GEMM + SwiGLU epilogue: x, Wg, Wu -> out", x + 2 * w, o]];
  } else if (variant === "unfused" || variant === "naive") {
    breakdown = [
      ["GEMM: x, Wg -> gate", x + w, o],
      ["GEMM: x, Wu -> up", x + w, o],
    ];
    const act = activationTraffic(T, h, elemBytes, variant === "naive" ? "naive" : "fused", flopsPerElement);
    breakdown = breakdown.concat(act.breakdown);
  } else {
    throw new Error(`unknown MLP variant "${variant}": use "naive", "unfused" or "epilogue"`);
  }
  return finishTraffic(breakdown, elemBytes, gemmFlops + flopsPerElement * o);
}

function finishTraffic(breakdown, elemBytes, flops) {
  let transfers = 0;
  for (const [, r, w] of breakdown) transfers += r + w;
  const bytes = transfers * elemBytes;
  return { transfers, bytes, flops, intensity: flops / bytes, breakdown };
}

// Traffic of a roofline-explorer variant key.
function variantTraffic(variant, T, h, d, elemBytes, flopsPerElement) {
  if (variant === "naive" || variant === "fused") {
    return activationTraffic(T, h, elemBytes, variant, flopsPerElement);
  }
  if (variant === "unfused" || variant === "epilogue") {
    return mlpUpTraffic(T, d, h, elemBytes, variant, flopsPerElement);
  }
  throw new Error(`unknown variant "${variant}"`);
}

// Roofline prediction (see book/roofline.py): the kernel takes as long as the slower of moving its
// bytes at peak bandwidth and doing its flops at peak compute.
function predict(traffic, bandwidth, peakFlops) {
  const memory_time_s = traffic.bytes / bandwidth;
  const compute_time_s = peakFlops ? traffic.flops / peakFlops : 0;
  const time_s = Math.max(memory_time_s, compute_time_s);
  const bound = compute_time_s > memory_time_s ? "compute" : "memory";
  return { time_s, memory_time_s, compute_time_s, bound };
}

// Launch-overhead model: t(n) = max(overhead, bytes / bandwidth).
function launchTime(bytes, overhead_s, bandwidth) {
  return Math.max(overhead_s, bytes / bandwidth);
}

// ---------------------------------------------------------------- formatting

function sig(x, digits = 3) {
  if (!isFinite(x)) return String(x);
  if (x === 0) return "0";
  const a = Math.abs(x);
  if (a >= 1e-3 && a < 1e6) {
    return String(Number(x.toPrecision(digits)));
  }
  return x.toExponential(digits - 1).replace("e+", "e");
}

function withUnit(x, units, digits = 3) {
  // units: [[scale, name], ...] from largest to smallest
  for (const [scale, name] of units) {
    if (Math.abs(x) >= scale) return `${sig(x / scale, digits)} ${name}`;
  }
  const [scale, name] = units[units.length - 1];
  return `${sig(x / scale, digits)} ${name}`;
}

const fmtBytes = (b) => withUnit(b, [[1e12, "TB"], [1e9, "GB"], [1e6, "MB"], [1e3, "kB"], [1, "B"]]);
const fmtTime = (s) => withUnit(s, [[1, "s"], [1e-3, "ms"], [1e-6, "µs"], [1e-9, "ns"]]);
const fmtRate = (f) => withUnit(f, [[1e15, "PFLOP/s"], [1e12, "TFLOP/s"], [1e9, "GFLOP/s"], [1e6, "MFLOP/s"], [1, "FLOP/s"]]);
const fmtBandwidth = (b) => withUnit(b, [[1e12, "TB/s"], [1e9, "GB/s"], [1e6, "MB/s"], [1, "B/s"]]);
const fmtFlops = (f) => withUnit(f, [[1e15, "Pflop"], [1e12, "Tflop"], [1e9, "Gflop"], [1e6, "Mflop"], [1e3, "kflop"], [1, "flop"]]);
const fmtCount = (n) => withUnit(n, [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"], [1, ""]]).trim();
const fmtInt = (n) => Math.round(n).toLocaleString("en-US");

// ---------------------------------------------------------------- DOM helpers

function h(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "text") e.textContent = v;
    else if (k === "class") e.className = v;
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
}

function s(tag, attrs = {}, text) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

let _uid = 0;
function uid(prefix) {
  _uid += 1;
  return `${prefix}-${Math.random().toString(36).slice(2, 7)}-${_uid}`;
}

// A labelled form control; returns [wrapper, control].
function field(label, control, hint) {
  const id = control.id || uid("swg-in");
  control.id = id;
  const wrap = h("div", { class: "swg-field" }, h("label", { for: id, text: label }), control);
  if (hint) wrap.append(h("span", { class: "swg-hint", text: hint }));
  return wrap;
}

function select(options, value, testid) {
  const sel = h("select", { "data-testid": testid });
  for (const [v, label] of options) {
    const o = h("option", { value: v, text: label });
    if (v === value) o.selected = true;
    sel.append(o);
  }
  return sel;
}

// Positive whole-number input. onValid(n) is called with a valid value; invalid text leaves the
// model alone and shows why next to the field.
function intInput(name, value, testid, onValid, max = 1e9) {
  const inp = h("input", { type: "number", min: "1", step: "1", inputmode: "numeric", value: String(value), "data-testid": testid });
  const err = h("span", { class: "swg-error", role: "alert", "data-testid": `${testid}-error` });
  inp.addEventListener("input", () => {
    const n = Number(inp.value);
    if (inp.value.trim() === "" || !Number.isInteger(n) || n < 1 || n > max) {
      err.textContent = `${name} must be a whole number from 1 to ${fmtInt(max)}; keeping the last valid value.`;
      inp.setAttribute("aria-invalid", "true");
      return;
    }
    err.textContent = "";
    inp.removeAttribute("aria-invalid");
    onValid(n);
  });
  return [inp, err];
}

// Shows the model's value in an input (after a preset or a change from Python), clearing any
// complaint about what was typed there before.
function syncInput(inp, value) {
  inp.value = String(value);
  inp.removeAttribute("aria-invalid");
  const err = inp.parentElement && inp.parentElement.querySelector(".swg-error");
  if (err) err.textContent = "";
}

// Writes a state change to the model. On a static page there is no kernel (and no comm), so
// save_changes may throw: the front-end keeps working from the model's local state.
function setState(model, changes) {
  for (const [k, v] of Object.entries(changes)) model.set(k, v);
  try {
    model.save_changes();
  } catch (e) {
    /* static page: nothing to sync with */
  }
}

// Shows a value: a readable text plus the exact number in data-value (for tests and screen readers
// that want the raw figure).
function showValue(elem, text, raw) {
  elem.textContent = text;
  if (raw === undefined || raw === null) elem.removeAttribute("data-value");
  else elem.setAttribute("data-value", String(raw));
}

// A labelled list of read-outs: returns the container and, per key, the element that shows its
// value (data-testid = key, for the tests).
function readouts(items) {
  const out = {};
  const dl = h("div", { class: "swg-readout", "aria-live": "polite" });
  for (const [key, label] of items) {
    out[key] = h("span", { class: "swg-v", "data-testid": key });
    dl.append(h("div", { class: "swg-item" }, h("span", { class: "swg-k", text: label }), out[key]));
  }
  return { dl, out };
}

// Width available to a chart: the widget's own width, clamped so text stays readable on phones.
function chartWidth(el) {
  const w = el.getBoundingClientRect().width || el.clientWidth || 640;
  return Math.max(280, Math.min(760, Math.floor(w)));
}

// Re-run draw() when the element's width changes (phone rotation, sidebar toggles).
function onResize(el, draw) {
  if (typeof ResizeObserver === "undefined") return () => {};
  let last = -1;
  const ro = new ResizeObserver(() => {
    const w = chartWidth(el);
    if (w !== last) {
      last = w;
      draw();
    }
  });
  ro.observe(el);
  return () => ro.disconnect();
}

// Draws now, then again whenever one of `keys` changes in the model (and, given a chart box,
// when its width changes); returns anywidget's clean-up function.
function redrawOn(model, keys, draw, chartBox) {
  const handler = () => draw();
  for (const k of keys) model.on(`change:${k}`, handler);
  draw();
  const stop = chartBox ? onResize(chartBox, draw) : () => {};
  return () => {
    stop();
    for (const k of keys) model.off(`change:${k}`, handler);
  };
}

// ---------------------------------------------------------------- log-log chart

function log10(x) {
  return Math.log(x) / Math.LN10;
}

// Decades covering [lo, hi].
function decadeDomain(lo, hi) {
  return [Math.pow(10, Math.floor(log10(lo))), Math.pow(10, Math.ceil(log10(hi)))];
}

// Creates an SVG log-log chart. opts: width, height, x: {domain, label, fmt}, y: {...}, title, desc.
function logChart(opts) {
  const width = opts.width;
  const narrow = width < 480;
  const height = opts.height || Math.round(Math.max(narrow ? 330 : 300, Math.min(420, width * 0.62)));
  const m = { left: narrow ? 58 : 72, right: narrow ? 18 : 24, top: 14, bottom: narrow ? 54 : 58 };
  const iw = width - m.left - m.right;
  const ih = height - m.top - m.bottom;
  const [x0, x1] = opts.x.domain.map(log10);
  const [y0, y1] = opts.y.domain.map(log10);
  const X = (v) => m.left + ((log10(v) - x0) / (x1 - x0)) * iw;
  const Y = (v) => m.top + ih - ((log10(v) - y0) / (y1 - y0)) * ih;
  const titleId = uid("swg-title");
  const descId = uid("swg-desc");
  const svg = s("svg", {
    width,
    height,
    viewBox: `0 0 ${width} ${height}`,
    role: "img",
    "aria-labelledby": `${titleId} ${descId}`,
    class: "swg-chart",
    "font-size": narrow ? 12 : 13,
  });
  svg.append(s("title", { id: titleId }, opts.title));
  svg.append(s("desc", { id: descId }, opts.desc || ""));
  svg.setAttribute("aria-label", `${opts.title}. ${opts.desc || ""}`);
  const clipId = uid("swg-clip");
  const defs = s("defs");
  const clip = s("clipPath", { id: clipId });
  clip.append(s("rect", { x: m.left, y: m.top, width: iw, height: ih }));
  defs.append(clip);
  svg.append(defs);

  const grid = s("g", { class: "swg-grid", "aria-hidden": "true" });
  const axes = s("g", { class: "swg-axes", "aria-hidden": "true" });
  // x ticks: every decade, labelled every `stepX` decades so labels never overlap
  const nx = Math.max(1, Math.floor(x1 + 1e-9) - Math.ceil(x0 - 1e-9));
  const stepX = Math.max(1, Math.ceil(nx / Math.max(2, Math.floor(iw / (narrow ? 62 : 70)))));
  const kx0 = Math.ceil(x0 - 1e-9), kx1 = Math.floor(x1 + 1e-9);
  for (let k = kx0; k <= kx1; k++) {
    const v = Math.pow(10, k);
    const px = X(v);
    grid.append(s("line", { x1: px, x2: px, y1: m.top, y2: m.top + ih }));
    if ((k - kx0) % stepX === 0) {
      axes.append(s("line", { x1: px, x2: px, y1: m.top + ih, y2: m.top + ih + 5 }));
      axes.append(s("text", { x: px, y: m.top + ih + 18, "text-anchor": "middle" }, opts.x.fmt(v)));
    }
  }
  const ny = Math.max(1, Math.floor(y1 + 1e-9) - Math.ceil(y0 - 1e-9));
  const stepY = Math.max(1, Math.ceil(ny / Math.max(2, Math.floor(ih / 34))));
  const ky0 = Math.ceil(y0 - 1e-9), ky1 = Math.floor(y1 + 1e-9);
  for (let k = ky0; k <= ky1; k++) {
    const v = Math.pow(10, k);
    const py = Y(v);
    grid.append(s("line", { x1: m.left, x2: m.left + iw, y1: py, y2: py }));
    if ((k - ky0) % stepY === 0) {
      axes.append(s("line", { x1: m.left - 5, x2: m.left, y1: py, y2: py }));
      axes.append(s("text", { x: m.left - 8, y: py + 4, "text-anchor": "end" }, opts.y.fmt(v)));
    }
  }
  axes.append(s("rect", { x: m.left, y: m.top, width: iw, height: ih, fill: "none", class: "swg-frame" }));
  axes.append(s("text", { x: m.left + iw / 2, y: height - 10, "text-anchor": "middle", class: "swg-axis-label" }, opts.x.label));
  axes.append(
    s("text", {
      x: 0,
      y: 0,
      transform: `translate(${narrow ? 13 : 16},${m.top + ih / 2}) rotate(-90)`,
      "text-anchor": "middle",
      class: "swg-axis-label",
    }, opts.y.label),
  );
  svg.append(grid, axes);
  const plot = s("g", { "clip-path": `url(#${clipId})` });
  svg.append(plot);
  const over = s("g");
  svg.append(over);
  return { svg, plot, over, X, Y, m, iw, ih, width, height };
}

// SVG path through points [[x, y], ...] in data units (log scales applied).
function pathD(chart, pts) {
  return pts.map(([x, y], i) => `${i ? "L" : "M"}${chart.X(x).toFixed(2)},${chart.Y(y).toFixed(2)}`).join("");
}

// Marker shapes, so that series differ by more than colour.
function marker(shape, cx, cy, r, color) {
  if (shape === "square") return s("rect", { x: cx - r, y: cy - r, width: 2 * r, height: 2 * r, fill: color, stroke: "currentColor", "stroke-width": 0.8 });
  if (shape === "triangle") {
    const p = `${cx},${cy - r * 1.2} ${cx - r * 1.1},${cy + r * 0.8} ${cx + r * 1.1},${cy + r * 0.8}`;
    return s("polygon", { points: p, fill: color, stroke: "currentColor", "stroke-width": 0.8 });
  }
  if (shape === "diamond") {
    const p = `${cx},${cy - r * 1.3} ${cx - r * 1.1},${cy} ${cx},${cy + r * 1.3} ${cx + r * 1.1},${cy}`;
    return s("polygon", { points: p, fill: color, stroke: "currentColor", "stroke-width": 0.8 });
  }
  return s("circle", { cx, cy, r, fill: color, stroke: "currentColor", "stroke-width": 0.8 });
}

// A small legend row below a chart: items [{color, label, dash, shape}].
function legend(items) {
  const ul = h("ul", { class: "swg-legend" });
  for (const it of items) {
    const sw = s("svg", { width: 26, height: 12, "aria-hidden": "true" });
    if (it.shape) sw.append(marker(it.shape, 13, 6, 4.5, it.color));
    else sw.append(s("line", { x1: 1, x2: 25, y1: 6, y2: 6, stroke: it.color, "stroke-width": 3, "stroke-dasharray": it.dash || null }));
    ul.append(h("li", {}, sw, h("span", { text: it.label })));
  }
  return ul;
}

// Tick formatters for common axes.
function tickNumber(v) {
  const k = Math.round(log10(v));
  if (k >= -3 && k <= 4) return String(Number(v.toPrecision(1)));
  return `1e${k}`;
}

// ---------------------------------------------------------------- a question for the reader

// "1.5 MB" -> 1.5e6, "12 µs" -> 1.2e-5, "6.7%" -> 6.7, "1,234" -> 1234, "2e3" -> 2000; null when
// the text is no number. An SI prefix scales the number; a unit after it (B, s, %, flop/B) is
// read and dropped, so a reader may type the answer with or without its unit.
const SI_PREFIX = { "": 1, k: 1e3, K: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, m: 1e-3, u: 1e-6, "µ": 1e-6, n: 1e-9 };
function parseAnswer(text) {
  const t = String(text).trim().replace(/,/g, "").replace(/_/g, "");
  const m = t.match(/^([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(.*)$/);
  if (!m) return null;
  let rest = m[2].trim();
  let scale = 1;
  // a prefix only counts when a unit follows it ("5 ms", "2 GB"); a bare "m" or "k" is a prefix too
  const p = rest.match(/^([kKMGTPmuµn])(B|bytes?|s|flop\/?B?|FLOP\/s|TFLOP\/s|elements?)?$/);
  if (p && !/^(bytes?|s|elements?)$/.test(rest)) {
    scale = SI_PREFIX[p[1]];
    rest = p[2] || "";
  }
  if (rest && !/^(B|bytes?|s|sec|seconds?|%|x|×|times|flop\/B(yte)?|FLOP\/s|elements?|launches)$/i.test(rest)) return null;
  const v = Number(m[1]) * scale;
  return Number.isFinite(v) ? v : null;
}

// A question the widget asks about what it shows, checked here in the page (no kernel needed).
// spec() is called when the reader checks an answer, so the right answer always follows the
// widget's current state: { question, truth, unit, rel, fmt, mistakes: [[value, why]], explain }.
// Returns { box, refresh }: refresh() rewrites the question after a state change.
function quiz(spec, testid = "quiz") {
  const box = h("div", { class: "swg-quiz", "data-testid": testid });
  const q = h("p", { class: "swg-quiz-q", "data-testid": `${testid}-question` });
  const inp = h("input", { type: "text", inputmode: "decimal", autocomplete: "off", "data-testid": `${testid}-answer` });
  const btn = h("button", { type: "button", class: "swg-quiz-check", "data-testid": `${testid}-check`, text: "Check" });
  const fb = h("p", { class: "swg-quiz-feedback", role: "status", "aria-live": "polite", "data-testid": `${testid}-feedback` });
  // the answer is written into the fold only when the reader opens it
  const reveal = h("details", { class: "swg-quiz-reveal", "data-testid": `${testid}-reveal` });
  const sol = h("p", { "data-testid": `${testid}-solution` });
  reveal.append(h("summary", { text: "Show the answer" }), sol);
  const f = field("Your answer", inp);
  box.append(q, h("div", { class: "swg-quiz-row" }, f, btn), fb, reveal);
  let asked = "";

  function check() {
    const sp = spec();
    const unit = sp.unit ? ` ${sp.unit}` : "";
    const fmt = sp.fmt || ((x) => sig(x));
    const close = (a, b) => Math.abs(a - b) <= (sp.abs || 0) + (sp.rel ?? 0.02) * Math.abs(b);
    const a = parseAnswer(inp.value);
    let ok = false, msg;
    if (inp.value.trim() === "") {
      msg = "Type your answer first.";
      ok = null;
    } else if (a === null) {
      msg = `"${inp.value}" is not a number: type it like 1.5e6${unit ? ` or 1.5 M${sp.unit}` : ""}.`;
    } else if (close(a, sp.truth)) {
      ok = true;
      msg = `Right: ${fmt(sp.truth)}${unit}. ${sp.explain || ""}`.trim();
    } else {
      const known = (sp.mistakes || []).find(([v]) => !close(v, sp.truth) && close(a, v));
      const side = a > sp.truth ? "too high" : "too low";
      if (known) msg = `Not yet: ${fmt(a)}${unit} is ${side}: ${known[1]}`;
      else if (a > 0 && sp.truth > 0) {
        const r = a > sp.truth ? a / sp.truth : sp.truth / a;
        msg = `Not yet: ${fmt(a)}${unit} is ${side}, by a factor of about ${sig(r, 2)}.`;
      } else msg = `Not yet: ${fmt(a)}${unit} is ${side}.`;
    }
    fb.textContent = msg;
    fb.setAttribute("data-correct", ok === null ? "" : String(ok));
    box.classList.toggle("swg-quiz-right", ok === true);
    box.classList.toggle("swg-quiz-wrong", ok === false);
  }
  btn.addEventListener("click", check);
  inp.addEventListener("keydown", (e) => { if (e.key === "Enter") check(); });
  reveal.addEventListener("toggle", () => {
    if (!reveal.open) return;
    const sp = spec();
    sol.textContent = `${(sp.fmt || ((x) => sig(x)))(sp.truth)}${sp.unit ? ` ${sp.unit}` : ""}. ${sp.explain || ""}`.trim();
  });

  function refresh() {
    const text = spec().question;
    if (text === asked) return;
    // a new question: the old verdict and the revealed answer no longer apply
    asked = text;
    q.textContent = `Question: ${text}`;
    fb.textContent = "";
    fb.removeAttribute("data-correct");
    box.classList.remove("swg-quiz-right", "swg-quiz-wrong");
    reveal.open = false;
    sol.textContent = "";
  }
  return { box, refresh };
}
