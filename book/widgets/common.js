// Shared front-end code for the course's widgets: the traffic and roofline formulas (mirroring
// book/traffic.py and book/roofline.py, checked against them by tests/built_book/test_widgets_browser.py),
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
// epilogue: applied in the epilogue of the GEMM that computes up (the Vizuara article's count): 2Th.
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

// The units of the quantities a reader reads and types: per kind, [symbol, size in the base
// unit, name, other spellings a reader may type (compared in lower case)]. The first units of
// bytes and time, largest first, are the ones numbers are shown in; the binary ones are only read.
const UNITS = {
  time: {
    noun: "a time",
    units: [
      ["s", 1, "seconds", ["sec", "secs", "second", "seconds"]],
      ["ms", 1e-3, "milliseconds", ["msec", "msecs", "millisecond", "milliseconds"]],
      ["µs", 1e-6, "microseconds", ["μs", "us", "usec", "usecs", "µsec", "μsec", "microsecond", "microseconds"]],
      ["ns", 1e-9, "nanoseconds", ["nsec", "nsecs", "nanosecond", "nanoseconds"]],
    ],
  },
  bytes: {
    noun: "a number of bytes",
    units: [
      ["TB", 1e12, "terabytes", ["t", "tbyte", "tbytes", "terabyte", "terabytes"]],
      ["GB", 1e9, "gigabytes", ["g", "gbyte", "gbytes", "gigabyte", "gigabytes"]],
      ["MB", 1e6, "megabytes", ["m", "mbyte", "mbytes", "megabyte", "megabytes"]],
      ["kB", 1e3, "kilobytes", ["k", "kbyte", "kbytes", "kilobyte", "kilobytes"]],
      ["B", 1, "bytes", ["byte", "bytes"]],
      ["TiB", 2 ** 40, "tebibytes", ["tebibyte", "tebibytes"]],
      ["GiB", 2 ** 30, "gibibytes", ["gibibyte", "gibibytes"]],
      ["MiB", 2 ** 20, "mebibytes", ["mebibyte", "mebibytes"]],
      ["KiB", 2 ** 10, "kibibytes", ["kibibyte", "kibibytes"]],
    ],
  },
  percent: { noun: "a percentage", units: [["%", 1, "percent", ["percent", "pct"]]] },
};
const shownUnits = (kind) => UNITS[kind].units.filter(([sym]) => !sym.includes("i")).map(([sym, size]) => [size, sym]);

const fmtBytes = (b) => withUnit(b, shownUnits("bytes"));
const fmtTime = (s) => withUnit(s, shownUnits("time"));
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
  // a dropdown's field is as wide as its longest option (up to the row), so no option is cut
  const cls = control.tagName === "SELECT" ? "swg-field swg-field-select" : "swg-field";
  const wrap = h("div", { class: cls }, h("label", { for: id, text: label }), control);
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

// Turns a field on or off. Off, its input is disabled (skipped by Tab, refusing what is typed),
// not only greyed out: a field that looks off yet takes input that changes nothing misleads.
// `value`: the model's value, shown while off, in place of anything typed before.
function enableField(wrap, inp, on, value) {
  wrap.classList.toggle("swg-disabled", !on);
  if (!on && (inp.value !== String(value) || inp.getAttribute("aria-invalid"))) syncInput(inp, value);
  inp.disabled = !on;
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

// The font a chart's text is drawn in (the widget's stylesheet sets it on .swg), for measuring
// labels; "sans-serif" while the element is not in a document yet (no style to read).
function chartFont(el) {
  return (el && el.isConnected && getComputedStyle(el).fontFamily) || "sans-serif";
}

// Re-run draw() when the element's width changes (phone rotation, sidebar toggles), or its font
// does (a widget drawn before it was put in the page measured its labels in a stand-in font).
function onResize(el, draw) {
  if (typeof ResizeObserver === "undefined") return () => {};
  let last = "";
  const ro = new ResizeObserver(() => {
    const now = `${chartWidth(el)}|${chartFont(el)}`;
    if (now !== last) {
      last = now;
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

// ---------------------------------------------------------------- text in a chart

// Size (px; none: the chart's own, 12 or 13) and weight of a chart's text, by class. Set on each
// <text> as attributes, not in the stylesheet, so that the layout measures what is drawn.
const TEXT_STYLE = {
  "swg-tick": {},
  "swg-axis-label": { weight: 600 },
  "swg-small": { size: 11.5 },
  "swg-label": { size: 12.5, weight: 600 },
};

// Width, ascent and descent (px) of `text` in a font: the box chromium gives a <text> (getBBox)
// is the advance width by the font's ascent + descent, which is what a canvas measures.
let _measure = null;
function measureText(text, size, weight, family) {
  if (_measure === null) _measure = document.createElement("canvas").getContext("2d") || false;
  if (!_measure) return { w: 0.62 * size * text.length, asc: 0.95 * size, desc: 0.25 * size };
  _measure.font = `${weight} ${size}px ${family}`;
  const m = _measure.measureText(text);
  return { w: m.width, asc: m.fontBoundingBoxAscent ?? 0.95 * size, desc: m.fontBoundingBoxDescent ?? 0.25 * size };
}

// Corners of the box of text measured `mt`, drawn with its baseline at (x, y), anchored
// "start", "middle" or "end", rotated by `deg` about (x, y), grown by `pad` on every side.
function textQuad(mt, x, y, anchor = "start", deg = 0, pad = 0) {
  const u0 = (anchor === "end" ? -mt.w : anchor === "middle" ? -mt.w / 2 : 0) - pad, u1 = u0 + mt.w + 2 * pad;
  const v0 = -mt.asc - pad, v1 = mt.desc + pad;
  const r = (deg * Math.PI) / 180, c = Math.cos(r), sn = Math.sin(r);
  return [[u0, v0], [u1, v0], [u1, v1], [u0, v1]].map(([u, v]) => [x + u * c - v * sn, y + u * sn + v * c]);
}
const rectQuad = (x0, y0, x1, y1) => [[x0, y0], [x1, y0], [x1, y1], [x0, y1]];

// Whether two convex polygons overlap (separating axes; touching is not overlapping).
function quadsOverlap(a, b) {
  for (const poly of [a, b]) {
    for (let i = 0; i < poly.length; i++) {
      const [px, py] = poly[i], [qx, qy] = poly[(i + 1) % poly.length];
      const nx = qy - py, ny = px - qx;
      const span = (pts) => pts.reduce(([lo, hi], [x, y]) => [Math.min(lo, x * nx + y * ny), Math.max(hi, x * nx + y * ny)], [Infinity, -Infinity]);
      const [alo, ahi] = span(a), [blo, bhi] = span(b);
      if (ahi <= blo || bhi <= alo) return false;
    }
  }
  return true;
}

function insideQuad(q, x, y) {
  let sign = 0;
  for (let i = 0; i < q.length; i++) {
    const [ax, ay] = q[i], [bx, by] = q[(i + 1) % q.length];
    const cr = (bx - ax) * (y - ay) - (by - ay) * (x - ax);
    if (cr !== 0) {
      if (sign && Math.sign(cr) !== sign) return false;
      sign = Math.sign(cr);
    }
  }
  return true;
}

// Places a chart's labels where they are readable: each takes the first of its candidate places
// that lies inside the plot and clear of everything placed or drawn before it (other labels, data
// markers, the lines it would cross), trying shorter wordings of itself before giving up. On a
// phone a fixed place puts a roof's label on the measured points, or on another label.
function labeller(chart) {
  const taken = []; // boxes: placed labels and markers
  const dots = []; // points every 3 px along drawn lines
  const { m, iw, ih } = chart;
  const inPlot = (q) => q.every(([x, y]) => x >= m.left + 1 && x <= m.left + iw - 1 && y >= m.top + 1 && y <= m.top + ih - 1);
  const cost = (q) => taken.reduce((n, t) => n + (quadsOverlap(q, t) ? 100 : 0), 0) +
    dots.reduce((n, [x, y]) => n + (insideQuad(q, x, y) ? 1 : 0), 0);
  return {
    // a data marker of size r at (cx, cy) (no shape of marker() reaches past 1.3 r)
    marker(cx, cy, r) {
      this.box(cx - 1.3 * r, cy - 1.3 * r, cx + 1.3 * r, cy + 1.3 * r);
    },
    // a box (in px) that labels keep off
    box(x0, y0, x1, y1, pad = 1) {
      taken.push(rectQuad(x0 - pad, y0 - pad, x1 + pad, y1 + pad));
    },
    // a drawn polyline, in px, that labels do not cross
    line(pts) {
      for (let i = 1; i < pts.length; i++) {
        const [ax, ay] = pts[i - 1], [bx, by] = pts[i];
        const n = Math.max(1, Math.ceil(Math.hypot(bx - ax, by - ay) / 3));
        for (let k = 0; k <= n; k++) dots.push([ax + ((bx - ax) * k) / n, ay + ((by - ay) * k) / n]);
      }
    },
    // texts: wordings, longest first; places(mt) -> [{x, y, anchor, deg}] for a text measured mt.
    // required: draw it even where it collides (in its least crowded place); else it is left out.
    place({ texts, places, cls = "swg-small", required = false, attrs = {} }) {
      let best = null;
      search: for (const text of texts) {
        const mt = chart.measure(text, cls);
        for (const c of places(mt)) {
          const q = textQuad(mt, c.x, c.y, c.anchor, c.deg, 1);
          if (!inPlot(q)) continue;
          const k = cost(q);
          if (!best || k < best.k) best = { text, c, q, k };
          if (k === 0) break search;
        }
      }
      if (!best || (best.k > 0 && !required)) return null;
      taken.push(best.q);
      const { x, y, anchor = "start", deg = 0 } = best.c;
      const el = chart.text(cls, { x, y, "text-anchor": anchor, transform: deg ? `rotate(${deg} ${x} ${y})` : null, ...attrs }, best.text);
      chart.over.append(el);
      return el;
    },
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

// Creates an SVG log-log chart. opts: width, height, font (chartFont of the box it goes in),
// x: {domain, label, fmt}, y: {...}, title, desc. The margins are made to fit the tick labels
// (so "100µs" neither touches the axis title nor a "10000" at the right edge leaves the picture);
// chart.labels places labels inside the plot (labeller).
function logChart(opts) {
  const width = opts.width;
  const narrow = width < 480;
  const height = opts.height || Math.round(Math.max(narrow ? 330 : 300, Math.min(420, width * 0.62)));
  const base = narrow ? 12 : 13;
  const family = opts.font || "sans-serif";
  const measure = (text, cls = "swg-tick") => {
    const st = TEXT_STYLE[cls] || {};
    return measureText(String(text), st.size || base, st.weight || 400, family);
  };
  const text = (cls, attrs, str) => {
    const st = TEXT_STYLE[cls] || {};
    return s("text", { class: cls, "font-size": st.size, "font-weight": st.weight, ...attrs }, str);
  };
  const [x0, x1] = opts.x.domain.map(log10);
  const [y0, y1] = opts.y.domain.map(log10);
  const kx0 = Math.ceil(x0 - 1e-9), kx1 = Math.floor(x1 + 1e-9);
  const ky0 = Math.ceil(y0 - 1e-9), ky1 = Math.floor(y1 + 1e-9);
  const xLabels = [], yLabels = [];
  for (let k = kx0; k <= kx1; k++) xLabels.push([k, opts.x.fmt(Math.pow(10, k))]);
  for (let k = ky0; k <= ky1; k++) yLabels.push([k, opts.y.fmt(Math.pow(10, k))]);
  const tick = measure("0");
  // the y axis title, turned on its side: its ascent is to the left of x = titleX
  const yTitle = measure(opts.y.label, "swg-axis-label");
  const titleX = Math.ceil(yTitle.asc) + 1;
  const yw = Math.max(0, ...yLabels.map(([, t]) => measure(t).w));
  const lastW = xLabels.length ? measure(xLabels[xLabels.length - 1][1]).w : 0;
  const m = {
    left: Math.ceil(titleX + yTitle.desc + 6 + yw + 8),
    right: Math.max(narrow ? 14 : 20, Math.ceil(lastW / 2 + 3)),
    top: 14,
    bottom: narrow ? 54 : 58,
  };
  const iw = width - m.left - m.right;
  const ih = height - m.top - m.bottom;
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
    "font-size": base,
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
  // x ticks: every decade, labelled every `stepX` decades so that labels keep 12 px apart
  const xw = Math.max(0, ...xLabels.map(([, t]) => measure(t).w));
  const nx = Math.max(1, kx1 - kx0);
  const stepX = Math.max(1, Math.ceil((xw + 12) / (iw / nx)));
  // x labels start 2 px below the lowest y label, centred on the bottom edge (they meet at the corner)
  const xBase = m.top + ih + (tick.asc + tick.desc) / 2 + 2 + tick.asc;
  for (const [k, t] of xLabels) {
    const px = X(Math.pow(10, k));
    grid.append(s("line", { x1: px, x2: px, y1: m.top, y2: m.top + ih }));
    if ((k - kx0) % stepX === 0) {
      axes.append(s("line", { x1: px, x2: px, y1: m.top + ih, y2: m.top + ih + 5 }));
      axes.append(text("swg-tick", { x: px, y: xBase, "text-anchor": "middle" }, t));
    }
  }
  // y ticks: labels centred on their tick, 34 px apart at least
  const ny = Math.max(1, ky1 - ky0);
  const stepY = Math.max(1, Math.ceil(ny / Math.max(2, Math.floor(ih / 34))));
  for (const [k, t] of yLabels) {
    const py = Y(Math.pow(10, k));
    grid.append(s("line", { x1: m.left, x2: m.left + iw, y1: py, y2: py }));
    if ((k - ky0) % stepY === 0) {
      axes.append(s("line", { x1: m.left - 5, x2: m.left, y1: py, y2: py }));
      axes.append(text("swg-tick", { x: m.left - 8, y: py + (tick.asc - tick.desc) / 2, "text-anchor": "end" }, t));
    }
  }
  axes.append(s("rect", { x: m.left, y: m.top, width: iw, height: ih, fill: "none", class: "swg-frame" }));
  const xTitle = measure(opts.x.label, "swg-axis-label");
  axes.append(text("swg-axis-label", { x: m.left + iw / 2, y: height - 4 - xTitle.desc, "text-anchor": "middle" }, opts.x.label));
  axes.append(text("swg-axis-label", {
    x: 0,
    y: 0,
    transform: `translate(${titleX},${m.top + ih / 2}) rotate(-90)`,
    "text-anchor": "middle",
  }, opts.y.label));
  svg.append(grid, axes);
  const plot = s("g", { "clip-path": `url(#${clipId})` });
  svg.append(plot);
  const over = s("g");
  svg.append(over);
  const chart = { svg, plot, over, X, Y, m, iw, ih, width, height, measure, text };
  chart.labels = labeller(chart);
  return chart;
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

// Details of a chart's points for every pointer. A <title> tooltip shows only on hover (a tap on a
// phone shows nothing), so a click or tap on or near a point (a marker is small for a finger) or
// a point reached with Tab writes its details in a line under the chart. Returns { line, attach }:
// call attach(chart, points) after each drawing, points [{el, x, y, text, key}] (x, y: the
// marker's centre in chart units); the point shown stays shown, with its new text, while a
// point with its key is still drawn.
function pointDetails(testid = "point-detail") {
  const PROMPT = "Click or tap a point, or Tab to it, for its details.";
  const line = h("p", { class: "swg-detail", "data-testid": testid, "aria-live": "polite", text: PROMPT });
  let shown = null; // key of the point shown
  let points = [];
  function show(p) {
    shown = p ? p.key : null;
    for (const q of points) q.el.classList.toggle("swg-selected", q === p);
    line.textContent = p ? p.text : PROMPT;
    line.classList.toggle("swg-detail-on", Boolean(p));
  }
  function attach(chart, pts) {
    points = pts;
    const svg = chart.svg;
    // an image's parts are not announced nor focusable: a chart with points to pick is a group
    if (pts.length) svg.setAttribute("role", "group");
    for (const p of pts) {
      p.el.setAttribute("tabindex", "0");
      p.el.setAttribute("role", "button");
      p.el.setAttribute("aria-label", p.text);
      p.el.setAttribute("data-point", p.key);
      p.el.append(s("title", {}, p.text));
      p.el.addEventListener("focus", () => show(p));
      p.el.addEventListener("keydown", (e) => {
        if (e.key === "Enter" || e.key === " ") {
          e.preventDefault();
          show(p);
        }
      });
    }
    svg.addEventListener("click", (e) => {
      const hit = pts.find((p) => p.el === e.target || p.el.contains(e.target));
      if (hit) return show(hit);
      const ctm = svg.getScreenCTM();
      if (!ctm) return;
      const at = new DOMPoint(e.clientX, e.clientY).matrixTransform(ctm.inverse());
      let best = null, reach = 22 / (ctm.a || 1); // a fingertip, in chart units
      for (const p of pts) {
        const d = Math.hypot(p.x - at.x, p.y - at.y);
        if (d <= reach) [best, reach] = [p, d];
      }
      if (best) show(best);
    });
    show(pts.find((p) => p.key === shown) || null);
  }
  return { line, attach };
}

// Tick formatters for common axes.
function tickNumber(v) {
  const k = Math.round(log10(v));
  if (k >= -3 && k <= 4) return String(Number(v.toPrecision(1)));
  return `1e${k}`;
}

// ---------------------------------------------------------------- a question for the reader

// The unit a question of this kind asks for: the one its answer reads best in (µs for 1.76e-5 s,
// MB for 4.7e8 bytes), so that the reader types a plain number, never a power of ten.
function answerUnit(kind, truth) {
  const shown = UNITS[kind].units.filter(([sym]) => !sym.includes("i"));
  return shown.find(([, size]) => Math.abs(truth) >= size) || shown[shown.length - 1];
}

// What a reader typed, in the base unit of `kind` (seconds, bytes, percent): { value, bare }, or
// { error: "nan" } for no number, { error: "unit", typed } for a unit of something else.
// A bare number is read in `unit` ([symbol, size, ...] of UNITS: the unit the question names);
// a number with a unit in that unit, spelled as a reader would ("17.6us", "17.6 µs",
// "0.0176 ms", "17.6 microseconds", "1.2 GiB", "470MB", "5 %"). "1,234,567", "1.5e6",
// "1.5 × 10^6" and a decimal comma ("17,6") are numbers too.
function parseAnswer(text, kind, unit) {
  const t = String(text).trim()
    .replace(/[\u00a0\u2009\u202f]/g, " ")
    .replace(/_/g, "")
    .replace(/\s*[x×*·]\s*10\s*\^\s*([-+]?\d+)/, "e$1")
    .replace(/^[-+]?\d{1,3}(?:,\d{3})+(?![\d,])/, (m) => m.replace(/,/g, ""))
    .replace(/^([-+]?\d+),(\d+)(?![\d,])/, "$1.$2");
  const m = t.match(/^([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(.*)$/);
  if (!m) return { error: "nan" };
  const typed = m[2].trim();
  let size = unit[1];
  if (typed) {
    const low = typed.toLowerCase();
    const u = UNITS[kind].units.find(([sym, , , other]) => sym.toLowerCase() === low || other.includes(low));
    if (!u) return { error: "unit", typed };
    size = u[1];
  }
  const value = Number(m[1]) * size;
  return Number.isFinite(value) ? { value, bare: !typed } : { error: "nan" };
}

// How a quantity of each kind is written in a verdict (a spec's fmt may say otherwise).
const ANSWER_FMT = { time: fmtTime, bytes: fmtBytes, percent: (x) => `${sig(x)}%` };

// A question the widget asks about what it shows, checked here in the page (no kernel needed).
// spec() is called when the reader checks an answer, so the right answer always follows the
// widget's current state: { question, kind ("time", "bytes" or "percent": UNITS), truth (in
// seconds, bytes or percent), unit (optional: the symbol to ask in; default answerUnit), rel,
// fmt, mistakes: [[value, why]], explain }. The question names its unit, the answer field shows
// it, and a bare number is read in it: "17.6" to a question in µs is 17.6 µs, not 17.6 s.
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
  const label = f.querySelector("label");
  box.append(q, h("div", { class: "swg-quiz-row" }, f, btn), fb, reveal);
  let asked = "";

  // the spec with its unit ([symbol, size, name, spellings]) and formatter resolved
  function current() {
    const sp = spec();
    const units = UNITS[sp.kind].units;
    const unit = (sp.unit && units.find(([sym]) => sym === sp.unit)) || answerUnit(sp.kind, sp.truth);
    return { sp, unit, fmt: sp.fmt || ANSWER_FMT[sp.kind] };
  }

  // "a number of microseconds, like 1.5, or with its unit, like 1.5 µs, 0.0015 ms or 1.5e-6 s"
  function howToType(kind, unit) {
    const shown = UNITS[kind].units.filter(([sym]) => !sym.includes("i"));
    const at = shown.indexOf(unit);
    const others = [shown[at - 1], kind === "bytes" ? shown[shown.length - 1] : shown[0]]
      .filter((u) => u && u !== unit);
    const ex = [unit].concat(others.filter((u, i) => others.indexOf(u) === i))
      .map(([sym, size]) => `${sig((1.5 * unit[1]) / size, 2)}${sym === "%" ? "" : " "}${sym}`);
    const alts = ex.length > 1 ? `${ex.slice(0, -1).join(", ")} or ${ex[ex.length - 1]}` : ex[0];
    return `a number of ${unit[2]}, like 1.5, or with its unit, like ${alts}`;
  }

  function check() {
    const { sp, unit, fmt } = current();
    const close = (a, b) => Math.abs(a - b) <= (sp.abs || 0) + (sp.rel ?? 0.02) * Math.abs(b);
    const typed = inp.value;
    let ok = false, msg;
    const r = typed.trim() === "" ? null : parseAnswer(typed, sp.kind, unit);
    if (r === null) {
      msg = "Type your answer first.";
      ok = null;
    } else if (r.error === "unit") {
      const syms = UNITS[sp.kind].units.map(([sym]) => sym);
      msg = `"${r.typed}" is not a unit of ${sp.kind === "percent" ? "percentage" : sp.kind}: use ${syms.length > 1 ? `${syms.slice(0, -1).join(", ")} or ${syms[syms.length - 1]}` : syms[0]}, or type a bare number of ${unit[2]}.`;
    } else if (r.error) {
      msg = `"${typed}" is not ${UNITS[sp.kind].noun}: type ${howToType(sp.kind, unit)}.`;
    } else if (close(r.value, sp.truth)) {
      ok = true;
      msg = `Right: ${fmt(sp.truth)}. ${sp.explain || ""}`.trim();
    } else {
      const a = r.value;
      // the answer as the reader typed it: rounded for display, 2.5 bytes read as "3 bytes"
      const said = r.bare ? `${typed.trim()} ${unit[0]}` : typed.trim();
      const known = (sp.mistakes || []).find(([v]) => !close(v, sp.truth) && close(a, v));
      const side = a > sp.truth ? "too high" : "too low";
      // a bare number right in another unit: the arithmetic is done, only the unit is off
      const other = r.bare && UNITS[sp.kind].units.find(([, size]) => close(a * (size / unit[1]), sp.truth));
      if (other) msg = `Not yet: a bare number is read in ${unit[2]}, and ${said} is ${side}; in ${other[2]} it would be right: type it with its unit, like ${typed.trim()} ${other[0]}.`;
      else if (known) msg = `Not yet: ${said} is ${side}: ${known[1]}`;
      else if (a > 0 && sp.truth > 0) {
        const k = a > sp.truth ? a / sp.truth : sp.truth / a;
        // a near miss in percent ("2.3% too low"); a factor only where it says more than 1.x
        msg = k < 1.5 ? `Not yet: ${said} is ${sig((100 * Math.abs(a - sp.truth)) / sp.truth, 2)}% ${side}.`
          : `Not yet: ${said} is ${side}, by a factor of about ${sig(k, 2)}.`;
      } else msg = `Not yet: ${said} is ${side}.`;
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
    const { sp, fmt } = current();
    sol.textContent = `${fmt(sp.truth)}. ${sp.explain || ""}`.trim();
  });

  function refresh() {
    const { sp, unit } = current();
    // the unit in words, and for bytes how many (a decimal MB is not a MiB)
    const sym = unit[0];
    const words = sp.kind === "bytes" && unit[1] > 1 ? `${unit[2]} (${sym}, ${fmtInt(unit[1])} bytes)` : `${unit[2]} (${sym})`;
    const text = `${sp.question} Answer in ${words}.`;
    label.textContent = `Your answer (${sym})`;
    inp.placeholder = `e.g. 1.5${sym === "%" ? "" : " "}${sym}`;
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
