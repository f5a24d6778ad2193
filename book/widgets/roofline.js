// Roofline explorer (book.widgets.roofline_explorer). All data arrive as model state from Python;
// all drawing and arithmetic happen here, so the widget responds on a static page with no kernel.

const VARIANT_STYLE = {
  naive: { color: OI.vermillion, shape: "triangle" },
  fused: { color: OI.blue, shape: "circle" },
  unfused: { color: OI.orange, shape: "square" },
  epilogue: { color: OI.green, shape: "diamond" },
};
const OTHER_STYLE = { color: OI.purple, shape: "circle" };

function renderRoofline({ model, el }) {
  const get = (k) => model.get(k);
  const root = h("div", { class: "swg swg-roofline" });
  el.append(root);

  // ---- controls
  const gpus = get("gpus");
  const gpuSel = select(get("gpu_order").map((k) => [k, gpus[k].label]), get("gpu"), "gpu");
  const dtypeSel = select(Object.keys(get("dtypes")).map((k) => [k, k]), get("dtype"), "dtype");
  const variantSel = select(get("variants").map((v) => [v.key, v.label]), get("variant"), "variant");
  const precSel = select([], get("precision"), "precision");
  const presets = get("presets");
  const presetSel = select([["", "custom"]].concat(presets.map((p, i) => [String(i), p.label])), "", "preset");
  const [tIn, tErr] = intInput("T", get("T"), "T", (v) => setState(model, { T: v }));
  const [hIn, hErr] = intInput("h", get("h"), "h", (v) => setState(model, { h: v }));
  const [dIn, dErr] = intInput("d", get("d"), "d", (v) => setState(model, { d: v }));
  const dField = field("d (model width)", dIn, "used by the GEMM kernels only");
  dField.append(dErr);

  const controls = h(
    "div",
    { class: "swg-controls" },
    field("GPU", gpuSel),
    field("dtype", dtypeSel),
    field("kernel", variantSel),
    field("compute peak", precSel, "auto: the roof where the kernel's math runs"),
    field("shape preset", presetSel),
    (() => { const f = field("T (tokens)", tIn); f.append(tErr); return f; })(),
    (() => { const f = field("h (hidden)", hIn); f.append(hErr); return f; })(),
    dField,
  );
  root.append(controls);

  gpuSel.addEventListener("change", () => setState(model, { gpu: gpuSel.value }));
  dtypeSel.addEventListener("change", () => setState(model, { dtype: dtypeSel.value }));
  variantSel.addEventListener("change", () => setState(model, { variant: variantSel.value }));
  precSel.addEventListener("change", () => setState(model, { precision: precSel.value }));
  presetSel.addEventListener("change", () => {
    if (presetSel.value === "") return;
    const p = presets[Number(presetSel.value)];
    const ch = { T: p.T, h: p.h };
    if (p.d) ch.d = p.d;
    if (p.variant) ch.variant = p.variant;
    setState(model, ch);
  });

  // ---- readouts
  const { dl, out } = readouts([
    ["intensity", "arithmetic intensity"],
    ["ridge", "ridge point"],
    ["bound", "bound by"],
    ["time", "predicted time"],
    ["memory-time", "time to move the bytes"],
    ["compute-time", "time to do the flops"],
    ["measured", "measured"],
  ]);
  root.append(dl);
  const chartBox = h("div", { class: "swg-chart-box" });
  root.append(chartBox);
  const details = pointDetails();
  const note = h("p", { class: "swg-note", "data-testid": "note" });
  root.append(note);

  // The reader's question: the largest share of the compute peak this kernel can reach, which
  // takes the roofline (intensity against the ridge) to answer; computed by compute(), the
  // same arithmetic the readouts show.
  function question() {
    const { spec, traffic, precision, peak, pred, ridge } = compute();
    const vlabel = get("variants").find((v) => v.key === get("variant"))?.label || get("variant");
    const what = `${vlabel}, ${get("dtype")}, T = ${fmtInt(get("T"))}, h = ${fmtInt(get("h"))}` +
      (get("variants").find((v) => v.key === get("variant"))?.kind === "gemm" ? `, d = ${fmtInt(get("d"))}` : "");
    if (!peak) {
      return { question: `No compute peak is known for ${spec.label}. How long must the ${what} take at least, to move its bytes?`,
               kind: "time", truth: pred.memory_time_s, rel: 0.03, mistakes: [],
               explain: `bytes / bandwidth = ${fmtBytes(traffic.bytes)} / ${fmtBandwidth(spec.memory_bandwidth)}.` };
    }
    const share = 100 * Math.min(1, (traffic.intensity * spec.memory_bandwidth) / peak);
    return {
      question: `At most what percentage of the ${precision} peak (${fmtRate(peak)}) can the ${what} reach on ${spec.label}?`,
      kind: "percent", truth: share, rel: 0.05,
      mistakes: [
        [100, "that is the compute roof, reached only right of the ridge point; this kernel's intensity is below it."],
        [(100 * ridge) / traffic.intensity, "that is upside down: the share is intensity / ridge point."],
        [100 * traffic.intensity, "that is the intensity as a percentage; compare it with the ridge point."],
      ],
      explain: pred.bound === "memory"
        ? `Intensity ${sig(traffic.intensity)} flop/byte is below the ridge (${sig(ridge)}): the memory roof gives intensity × bandwidth = ${fmtRate(traffic.intensity * spec.memory_bandwidth)}: as a share of the peak, intensity / ridge.`
        : `Intensity ${sig(traffic.intensity)} flop/byte is above the ridge (${sig(ridge)}): compute-bound, the whole peak is in reach.`,
    };
  }
  const ask = quiz(question);
  root.append(ask.box);

  // d (the model width) enters only the GEMM kernels' traffic
  const isGemm = () => get("variants").find((v) => v.key === get("variant"))?.kind === "gemm";

  function currentSpec() {
    return gpus[get("gpu")] || gpus[get("gpu_order")[0]];
  }

  function syncControls() {
    const spec = currentSpec();
    gpuSel.value = get("gpu");
    dtypeSel.value = get("dtype");
    variantSel.value = get("variant");
    enableField(dField, dIn, isGemm(), get("d"));
    // compute peaks this GPU has
    precSel.replaceChildren();
    const auto = resolvePrecision("auto");
    const where = isGemm() ? `a ${get("dtype")} GEMM` : "elementwise math";
    // short enough for a phone's width; why "auto" picks that roof is the option's tooltip
    precSel.append(h("option", { value: "auto", text: `auto (${auto.label || auto.key})`, title: `the roof where ${where} runs` }));
    for (const [k, label, attr] of get("precisions")) {
      if (spec[attr]) precSel.append(h("option", { value: k, text: `${label}: ${fmtRate(spec[attr])}` }));
    }
    precSel.value = get("precision");
    if (precSel.value !== get("precision")) precSel.value = "auto";
    for (const [inp, key] of [[tIn, "T"], [hIn, "h"], [dIn, "d"]]) {
      if (Number(inp.value) !== get(key)) syncInput(inp, get(key));
    }
    const idx = presets.findIndex(
      (p) => p.T === get("T") && p.h === get("h") && (!p.d || p.d === get("d")) && (!p.variant || p.variant === get("variant")),
    );
    presetSel.value = idx < 0 ? "" : String(idx);
  }

  // "auto" -> the roof where the math runs (book.roofline.default_precision(dtype, kind)):
  // an elementwise kernel widens halves to float32 and computes on the FP32 CUDA cores in
  // every dtype; a GEMM in a half type runs on the tensor cores.
  function resolvePrecision(p) {
    const kind = get("variants").find((v) => v.key === get("variant"))?.kind || "elementwise";
    const key = p === "auto" ? (get("default_precisions")[kind] || {})[get("dtype")] || "fp32" : p;
    const row = get("precisions").find(([k]) => k === key) || [key, key, key];
    return { key, label: row[1], attr: row[2] };
  }

  function compute() {
    const spec = currentSpec();
    const elemBytes = get("dtypes")[get("dtype")];
    const traffic = variantTraffic(get("variant"), get("T"), get("h"), get("d"), elemBytes, get("flops_per_element"));
    // a peak this GPU lacks (TF32 on a T4) falls back to the dtype's default, as the menu shows
    let prec = resolvePrecision(get("precision"));
    if (!spec[prec.attr]) prec = resolvePrecision("auto");
    const precision = prec.key;
    const peak = spec[prec.attr] || null;
    const pred = predict(traffic, spec.memory_bandwidth, peak);
    const ridge = peak ? peak / spec.memory_bandwidth : null;
    return { spec, traffic, precision, peak, pred, ridge };
  }

  // Measured rows for this GPU and dtype.
  function visiblePoints(spec) {
    return get("points").filter((p) => p.gpu === spec.match && p.dtype === get("dtype"));
  }

  function draw() {
    syncControls();
    const r = compute();
    const { spec, traffic, pred, ridge, peak } = r;
    const vlabel = get("variants").find((v) => v.key === get("variant"))?.label || get("variant");

    showValue(out.intensity, `${sig(traffic.intensity)} flop/byte (${fmtFlops(traffic.flops)} / ${fmtBytes(traffic.bytes)})`, traffic.intensity);
    showValue(out.ridge, ridge ? `${sig(ridge)} flop/byte` : "unknown (no compute peak for this GPU)", ridge);
    showValue(out.bound, peak ? `${pred.bound} (${pred.bound === "memory" ? "intensity below" : "intensity above"} the ridge)` : "memory (compute peak unknown)", pred.bound);
    showValue(out.time, fmtTime(pred.time_s), pred.time_s);
    showValue(out["memory-time"], `${fmtTime(pred.memory_time_s)} at ${fmtBandwidth(spec.memory_bandwidth)}`, pred.memory_time_s);
    showValue(out["compute-time"], peak ? `${fmtTime(pred.compute_time_s)} at ${fmtRate(peak)}` : "unknown (no compute peak)", peak ? pred.compute_time_s : null);

    const pts = visiblePoints(spec);
    // the fastest measured kernel of this kind at exactly this shape, if any
    const same = pts
      .filter((p) => p.variant === get("variant") && p.T === get("T") && p.h === get("h") && (!p.d || p.d === get("d")))
      .sort((a, b) => a.seconds - b.seconds);
    if (same.length) {
      const best = same[0];
      const name = best.label.split(" ")[0];
      showValue(out.measured, `${fmtTime(best.seconds)} (${name}${same.length > 1 ? `, fastest of ${same.length}` : ""}; ${sig(best.seconds / pred.time_s, 2)}× the prediction)`, best.seconds);
    } else if (!get("points").length) {
      showValue(out.measured, "no measurements recorded", null);
    } else {
      showValue(out.measured, "not measured at this GPU, dtype, kernel and shape", null);
    }

    // ---- chart
    const peaks = get("precisions").filter(([, , a]) => spec[a]).map(([k, label, a]) => ({ key: k, label, value: spec[a] }));
    const xs = [traffic.intensity].concat(peaks.map((p) => p.value / spec.memory_bandwidth), pts.map((p) => p.flops / p.bytes));
    const xDom = decadeDomain(Math.min(...xs) / 3, Math.max(...xs) * 3);
    const ys = [spec.memory_bandwidth * xDom[0]].concat(peaks.map((p) => p.value), pts.map((p) => p.flops / p.seconds));
    const yDom = [decadeDomain(Math.max(Math.min(...ys), 1e6), 10)[0], Math.max(...ys) * 3];
    const title = `Roofline of ${spec.label}, ${get("dtype")}`;
    const desc =
      `Log-log plot of attainable performance in flop/s against arithmetic intensity in flop per byte. ` +
      `Memory roof ${fmtBandwidth(spec.memory_bandwidth)}` +
      (peak ? `, compute roof ${fmtRate(peak)} (${r.precision}), ridge point ${sig(ridge)} flop/byte. ` : ". ") +
      `${vlabel} with T=${get("T")}, h=${get("h")}${vlabel.includes("GEMM") ? `, d=${get("d")}` : ""}: ` +
      `intensity ${sig(traffic.intensity)} flop/byte, ${pred.bound}-bound, predicted ${fmtTime(pred.time_s)}. ` +
      (pts.length ? `${pts.length} measured points shown.` : "No measured points shown.");
    const chart = logChart({
      width: chartWidth(chartBox),
      font: chartFont(chartBox),
      x: { domain: xDom, label: "arithmetic intensity (flop/byte)", fmt: tickNumber },
      y: { domain: yDom, label: "performance (flop/s)", fmt: (v) => fmtRate(v).replace("FLOP/s", "").replace(" ", "") || "1" },
      title,
      desc,
    });
    chart.svg.setAttribute("data-testid", "chart");
    const [xa, xb] = xDom;
    const bw = spec.memory_bandwidth;
    const { X, Y, m, labels } = chart;
    const right = m.left + chart.iw, bottom = m.top + chart.ih;
    const px = (pts) => pts.map(([x, y]) => [X(x), Y(y)]);
    // other compute peaks (dashed)
    const others = new Map(); // value -> labels (FP16 and BF16 often share a peak)
    for (const p of peaks) {
      if (p.key === r.precision || p.value === peak) continue;
      const short = p.label.includes("tensor") ? p.label.replace(" tensor cores", "") : p.label;
      others.set(p.value, (others.get(p.value) || []).concat([short]));
    }
    for (const value of others.keys()) {
      const line = [[value / bw, value], [xb, value]];
      chart.plot.append(s("path", { d: pathD(chart, line), stroke: OI.purple, "stroke-width": 1.5, "stroke-dasharray": "6 4", fill: "none" }));
      labels.line(px(line));
    }
    // the roof for the chosen peak
    const roofPts = peak ? [[xa, bw * xa], [ridge, peak], [xb, peak]] : [[xa, bw * xa], [xb, bw * xb]];
    chart.plot.append(s("path", { d: pathD(chart, roofPts), stroke: "currentColor", "stroke-width": 2.5, fill: "none", "data-testid": "roof" }));
    labels.line(px(roofPts));
    if (peak) {
      chart.plot.append(s("line", { x1: X(ridge), x2: X(ridge), y1: Y(peak), y2: bottom, stroke: "currentColor", "stroke-dasharray": "2 3", "stroke-width": 1 }));
      labels.line([[X(ridge), Y(peak)], [X(ridge), bottom]]);
    }
    // measured points: those at the chosen shape stand out; other shapes stay as faint context
    const picks = [];
    const atShape = (p) => p.T === get("T") && p.h === get("h") && (!p.d || p.d === get("d"));
    for (const p of [...pts].sort((a, b) => atShape(a) - atShape(b))) {
      const ps = VARIANT_STYLE[p.variant] || OTHER_STYLE;
      const here = atShape(p);
      const cx = X(p.flops / p.bytes), cy = Y(p.flops / p.seconds), rad = here ? 5 : 3.5;
      const mk = marker(ps.shape, cx, cy, rad, ps.color);
      mk.setAttribute("fill-opacity", here ? "0.9" : "0.35");
      mk.setAttribute("stroke-opacity", here ? "1" : "0.35");
      mk.setAttribute("class", here ? "swg-measured swg-here" : "swg-measured");
      chart.plot.append(mk);
      labels.marker(cx, cy, rad);
      picks.push({ el: mk, x: cx, y: cy, key: `${p.source}|${p.label}|${p.seconds}`,
                   text: `measured: ${p.label}, ${fmtTime(p.seconds)}, ${fmtRate(p.flops / p.seconds)}, ${fmtBandwidth(p.bytes / p.seconds)} (${p.source})` });
    }
    // this kernel, at its predicted attainable performance
    const st = VARIANT_STYLE[get("variant")] || OTHER_STYLE;
    const perf = traffic.flops / pred.time_s;
    const kx = X(traffic.intensity), ky = Y(perf);
    chart.plot.append(s("line", { x1: kx, x2: kx, y1: ky, y2: bottom, stroke: st.color, "stroke-width": 1.5, "stroke-dasharray": "4 3" }));
    labels.line([[kx, ky], [kx, bottom]]);
    const km = marker(st.shape, kx, ky, 7, st.color);
    km.setAttribute("data-testid", "kernel-point");
    km.setAttribute("stroke-width", "1.5");
    chart.over.append(km);
    labels.marker(kx, ky, 7);
    const shape = `T = ${fmtInt(get("T"))}, h = ${fmtInt(get("h"))}${isGemm() ? `, d = ${fmtInt(get("d"))}` : ""}`;
    picks.push({ el: km, x: kx, y: ky, key: "kernel",
                 text: `predicted: ${vlabel}, ${get("dtype")}, ${shape}: ${fmtTime(pred.time_s)}, ${fmtRate(perf)} at ${sig(traffic.intensity)} flop/byte, ${pred.bound}-bound` });

    // labels, the most needed placed first: the chosen roof (its place is at the right edge, where
    // a compute-bound kernel's label would take it), the kernel's time, the ridge, the memory
    // roof, then the other peaks (left out where even their value alone finds no room).
    // A roof's label goes along its line, above or below it, from the right edge leftwards; the
    // chosen roof's, where its line is crowded (a kernel's marker on it), may reach left of the
    // ridge (an other peak's label there would float by a line that is not drawn).
    const roofPlaces = (value, x0, reach) => (mt) => {
      const on = [], past = [];
      for (let x = right - 4; x - mt.w >= m.left + 2; x -= 12) {
        (x - mt.w >= x0 + 4 || x === right - 4 ? on : past).push(
          { x, y: Y(value) - 3 - mt.desc, anchor: "end" }, { x, y: Y(value) + 3 + mt.asc, anchor: "end" });
      }
      return reach ? on.concat(past) : on;
    };
    if (peak) {
      labels.place({
        texts: [`${r.precision} roof ${fmtRate(peak)}`, `${r.precision} ${fmtRate(peak)}`, fmtRate(peak)],
        required: true,
        places: roofPlaces(peak, X(ridge), true),
      });
    }
    labels.place({
      texts: [`${fmtTime(pred.time_s)}, ${pred.bound}-bound`, fmtTime(pred.time_s)],
      cls: "swg-label",
      required: true,
      places: (mt) => {
        const out = [];
        for (const dy of [22, -12, 40, -30, 58, -48, 76, -66, 94]) {
          for (const [dx, anchor] of [[12, "start"], [-12, "end"]]) out.push({ x: kx + dx, y: ky + dy, anchor });
          if (dy === -12) for (const [dx, anchor] of [[14, "start"], [-14, "end"]]) out.push({ x: kx + dx, y: ky + (mt.asc - mt.desc) / 2, anchor });
        }
        return out;
      },
    });
    if (peak) {
      // the same three significant figures as the readout (295, not a rounded 300)
      labels.place({
        texts: [`ridge ${sig(ridge)}`],
        required: true,
        attrs: { "data-testid": "ridge-label" },
        places: (mt) => [0, 1, 2, 3, 4].flatMap((k) => [
          { x: X(ridge) + 4, y: bottom - 4 - mt.desc - 16 * k },
          { x: X(ridge) - 4, y: bottom - 4 - mt.desc - 16 * k, anchor: "end" },
        ]),
      });
    }
    // the memory roof's label runs along its slope, above it or else below
    const slopeEnd = peak ? Math.min(ridge, xb) : xb;
    const [p0x, p0y] = [X(xa), Y(bw * xa)], [p1x, p1y] = [X(slopeEnd), Y(bw * slopeEnd)];
    const len = Math.hypot(p1x - p0x, p1y - p0y), ux = (p1x - p0x) / len, uy = (p1y - p0y) / len;
    const slopeDeg = (Math.atan2(uy, ux) * 180) / Math.PI;
    labels.place({
      texts: [`memory ${fmtBandwidth(bw)}`, fmtBandwidth(bw)],
      required: true,
      places: (mt) => {
        const out = [];
        for (const off of [mt.desc + 3, -(mt.asc + 3)]) {
          for (let t = 4; t + mt.w <= len - 4; t += 8) out.push({ x: p0x + ux * t + uy * off, y: p0y + uy * t - ux * off, deg: slopeDeg });
        }
        return out;
      },
    });
    const unlabelled = []; // other peaks whose label found no room: the legend names them
    for (const [value, names] of [...others].sort((a, b) => b[0] - a[0])) {
      const short = `${names.map((n) => n.split(" ")[0]).join("/")} ${fmtRate(value)}`;
      const full = `${names.join("/")}${names.some((n) => !n.includes("CUDA")) ? " tensor" : ""} ${fmtRate(value)}`;
      if (!labels.place({ texts: [full, short, fmtRate(value)], places: roofPlaces(value, X(value / bw)) })) unlabelled.push(short);
    }
    details.attach(chart, picks);
    chartBox.replaceChildren(chart.svg, details.line);

    const items = [{ color: "currentColor", label: `roof: min(bandwidth × intensity, ${r.precision} peak)` }];
    if (others.size) items.push({ color: OI.purple, dash: "6 4", label: `other compute peaks${unlabelled.length ? ` (${unlabelled.join(", ")})` : ""}` });
    items.push({ color: st.color, shape: st.shape, label: `${vlabel} (predicted)` });
    const seen = new Set();
    for (const p of pts) {
      if (seen.has(p.variant)) continue;
      seen.add(p.variant);
      const ps = VARIANT_STYLE[p.variant] || OTHER_STYLE;
      items.push({ color: ps.color, shape: ps.shape, label: `measured: ${p.variant_label || p.variant}` });
    }
    chartBox.append(legend(items));

    note.replaceChildren();
    if (spec.source) {
      note.append(`${spec.label}: peaks from `, h("a", { href: spec.source, target: "_blank", rel: "noopener", text: spec.source_name || "the vendor datasheet" }), ". ");
    } else if (spec.note) {
      note.append(`${spec.note} `);
    }
    note.append(get("data_note"));
    if (pts.length) note.append(" Bold markers: measured at the chosen shape; faint: other shapes (click, tap or hover for details).");
    else if (get("points").length) note.append(` None of them were measured on ${spec.label} in ${get("dtype")}.`);
    ask.refresh();
  }

  return redrawOn(model, ["gpu", "dtype", "variant", "precision", "T", "h", "d", "points", "gpus"],
                  draw, chartBox);
}

export default { render: renderRoofline };
