// Launch-overhead explorer (book.widgets.launch_explorer): time of a fused SwiGLU against its size,
// t(n) = max(launch overhead, bytes / bandwidth), with both knobs adjustable. Draws by itself.

// How a measured point was timed (book/data rows via book/widgets/_data.py).
const HOW_STYLE = {
  python: { color: OI.vermillion, shape: "triangle", label: "measured: one launch from Python (host time)" },
  graph: { color: OI.green, shape: "square", label: "measured: CUDA graph replay, per SwiGLU" },
  gpu: { color: OI.purple, shape: "circle", label: "measured: GPU time, launches back to back" },
};

// Log-scale slider: position 0..1000 <-> value in [lo, hi].
function logSlider(lo, hi, value, testid, label) {
  const inp = h("input", { type: "range", min: "0", max: "1000", step: "1", "data-testid": testid, "aria-label": label });
  const toPos = (v) => Math.round(((log10(v) - log10(lo)) / (log10(hi) - log10(lo))) * 1000);
  const toVal = (p) => Math.pow(10, log10(lo) + (p / 1000) * (log10(hi) - log10(lo)));
  inp.value = String(toPos(value));
  return { inp, toPos, toVal };
}

function renderLaunch({ model, el }) {
  const get = (k) => model.get(k);
  const root = h("div", { class: "swg swg-launch" });
  el.append(root);

  const ov = logSlider(1e-7, 1e-3, get("overhead_s"), "overhead", "launch overhead");
  const bw = logSlider(1e10, 2e13, get("bandwidth"), "bandwidth", "memory bandwidth");
  const ovOut = h("output", { "data-testid": "overhead-value" });
  const bwOut = h("output", { "data-testid": "bandwidth-value" });
  const dtypeSel = select(Object.keys(get("dtypes")).map((k) => [k, k]), get("dtype"), "dtype");
  const [tIn, tErr] = intInput("T", get("T"), "T", (v) => setState(model, { T: v }));
  const [hIn, hErr] = intInput("h", get("h"), "h", (v) => setState(model, { h: v }));
  const ovField = field("launch overhead", ov.inp);
  ovField.append(ovOut);
  const bwField = field("bandwidth", bw.inp);
  bwField.append(bwOut);
  const presetSel = select([], "", "preset");
  // presets measured in the chosen dtype, plus the datasheet bandwidth
  function fillPresets() {
    presetSel.replaceChildren(h("option", { value: "", text: "choose…" }));
    get("presets").forEach((p, i) => {
      // the option shows the short text; its tooltip the measurement's full provenance
      if (!p.dtype || p.dtype === get("dtype")) presetSel.append(h("option", { value: String(i), text: p.short || p.label, title: p.label }));
    });
    presetSel.value = "";
  }
  const tf = field("T (tokens)", tIn); tf.append(tErr);
  const hf = field("h (hidden)", hIn); hf.append(hErr);
  root.append(h("div", { class: "swg-controls" }, ovField, bwField, field("set from", presetSel), field("dtype", dtypeSel), tf, hf));

  ov.inp.addEventListener("input", () => setState(model, { overhead_s: ov.toVal(Number(ov.inp.value)) }));
  bw.inp.addEventListener("input", () => setState(model, { bandwidth: bw.toVal(Number(bw.inp.value)) }));
  dtypeSel.addEventListener("change", () => setState(model, { dtype: dtypeSel.value }));
  presetSel.addEventListener("change", () => {
    if (presetSel.value === "") return;
    const p = get("presets")[Number(presetSel.value)];
    setState(model, { [p.kind === "overhead" ? "overhead_s" : "bandwidth"]: p.value });
    presetSel.value = "";
  });

  const { dl, out } = readouts([
    ["crossover", "overhead-bound below"],
    ["time", "predicted time at T × h"],
    ["regime", "regime"],
    ["effective", "effective bandwidth"],
  ]);
  root.append(dl);
  const chartBox = h("div", { class: "swg-chart-box" });
  const details = pointDetails();
  const note = h("p", { class: "swg-note", "data-testid": "note" });
  root.append(chartBox, note);

  // The reader's question: the time at ten times the tokens, from the same t(n) the curve draws:
  // ten times the work costs nothing extra while the launch overhead dominates, ten times the
  // time once the bytes do.
  function question() {
    const overhead = get("overhead_s"), band = get("bandwidth");
    const bytesOf = (n) => activationTraffic(1, n, get("dtypes")[get("dtype")], "fused", get("flops_per_element")).bytes;
    const n = get("T") * get("h"), big = 10 * n;
    const now = launchTime(bytesOf(n), overhead, band);
    const later = launchTime(bytesOf(big), overhead, band);
    const by = bytesOf(big) / band;
    return {
      question: `With the overhead and bandwidth set above, predict the time of one fused SwiGLU, ${get("dtype")}, at ten times the tokens: T = ${fmtInt(10 * get("T"))}, h = ${fmtInt(get("h"))}.`,
      kind: "time", truth: later, rel: 0.05,
      mistakes: [
        [10 * now, `ten times the work takes ten times as long only when the bytes dominate; here the launch overhead (${fmtTime(overhead)}) still sets the time.`],
        [now, `the time stays put only while the overhead dominates; at ten times the tokens the bytes take ${fmtTime(by)}.`],
      ],
      explain: `t = max(overhead, bytes / bandwidth) = max(${fmtTime(overhead)}, ${fmtBytes(bytesOf(big))} / ${fmtBandwidth(band)} = ${fmtTime(by)}): ${overhead >= by ? "overhead" : "bandwidth"}-bound.`,
    };
  }
  const ask = quiz(question);
  root.append(ask.box);

  function draw() {
    const overhead = get("overhead_s"), band = get("bandwidth");
    ov.inp.value = String(ov.toPos(overhead));
    bw.inp.value = String(bw.toPos(band));
    showValue(ovOut, fmtTime(overhead), overhead);
    showValue(bwOut, fmtBandwidth(band), band);
    ov.inp.setAttribute("aria-valuetext", fmtTime(overhead));
    bw.inp.setAttribute("aria-valuetext", fmtBandwidth(band));
    dtypeSel.value = get("dtype");
    fillPresets();
    for (const [inp, key] of [[tIn, "T"], [hIn, "h"]]) {
      if (Number(inp.value) !== get(key)) syncInput(inp, get(key));
    }
    const eb = get("dtypes")[get("dtype")];
    const perElem = activationTraffic(1, 1, eb, "fused", get("flops_per_element")).bytes; // bytes per output element
    const bytesOf = (n) => activationTraffic(1, n, eb, "fused", get("flops_per_element")).bytes;
    const nStar = (overhead * band) / perElem;
    showValue(out.crossover, `${fmtCount(nStar)} elements (${fmtBytes(nStar * perElem)} moved; T = ${sig(nStar / get("h"))} at h = ${fmtInt(get("h"))})`, nStar);
    const n = get("T") * get("h");
    const bytes = bytesOf(n);
    const t = launchTime(bytes, overhead, band);
    showValue(out.time, fmtTime(t), t);
    const over = overhead >= bytes / band;
    showValue(out.regime, over ? `overhead-bound: the data would move in ${fmtTime(bytes / band)}` : `bandwidth-bound: ${sig(bytes / band / overhead)}× the overhead`, over ? "overhead" : "bandwidth");
    showValue(out.effective, `${fmtBandwidth(bytes / t)} (${sig((100 * bytes) / t / band)}% of the bandwidth set)`, bytes / t);

    // ---- chart
    const pts = get("points").filter((p) => p.dtype === get("dtype"));
    const ns = [n, nStar].concat(pts.map((p) => p.elements));
    const xDom = decadeDomain(Math.min(1e2, ...ns) / 2, Math.max(1e9, ...ns) * 2);
    const ts = [overhead, bytesOf(xDom[1]) / band].concat(pts.map((p) => p.seconds));
    const yDom = decadeDomain(Math.min(...ts) / 2, Math.max(...ts) * 2);
    const chart = logChart({
      width: chartWidth(chartBox),
      font: chartFont(chartBox),
      x: { domain: xDom, label: "output elements n = T × h", fmt: (v) => fmtCount(v) },
      y: { domain: yDom, label: "time per SwiGLU", fmt: (v) => fmtTime(v).replace(" ", "") },
      title: `Launch overhead against size, fused SwiGLU, ${get("dtype")}`,
      desc:
        `Log-log plot of time against number of output elements. t(n) = max(${fmtTime(overhead)}, bytes / ${fmtBandwidth(band)}). ` +
        `Below ${fmtCount(nStar)} elements the launch overhead dominates. ` +
        `At T=${get("T")}, h=${get("h")}: ${fmtTime(t)}, ${over ? "overhead" : "bandwidth"}-bound. ` +
        (pts.length ? `${pts.length} measured points shown.` : "No measured points shown."),
    });
    chart.svg.setAttribute("data-testid", "chart");
    const [xa, xb] = xDom;
    const { X, Y, m, labels } = chart;
    const bottom = m.top + chart.ih;
    const px = (pts) => pts.map(([x, y]) => [X(x), Y(y)]);
    // overhead-bound region
    chart.plot.append(s("rect", { x: m.left, y: m.top, width: Math.max(0, X(Math.min(nStar, xb)) - m.left), height: chart.ih, fill: OI.orange, "fill-opacity": 0.12 }));
    const ovLine = [[xa, overhead], [xb, overhead]], bwLine = [[xa, bytesOf(xa) / band], [xb, bytesOf(xb) / band]];
    chart.plot.append(s("path", { d: pathD(chart, ovLine), stroke: OI.orange, "stroke-dasharray": "6 4", "stroke-width": 1.5, fill: "none" }));
    chart.plot.append(s("path", { d: pathD(chart, bwLine), stroke: OI.sky, "stroke-dasharray": "6 4", "stroke-width": 1.5, fill: "none" }));
    labels.line(px(ovLine));
    labels.line(px(bwLine));
    const curve = [];
    for (let k = 0; k <= 60; k++) {
      const v = Math.pow(10, log10(xa) + (k / 60) * (log10(xb) - log10(xa)));
      curve.push([v, launchTime(bytesOf(v), overhead, band)]);
    }
    curve.push([nStar, overhead]);
    curve.sort((a, b) => a[0] - b[0]);
    chart.plot.append(s("path", { d: pathD(chart, curve), stroke: "currentColor", "stroke-width": 2.5, fill: "none", "data-testid": "curve" }));
    labels.line(px(curve));
    const crossing = nStar > xa && nStar < xb;
    if (crossing) {
      chart.plot.append(s("line", { x1: X(nStar), x2: X(nStar), y1: m.top, y2: bottom, stroke: "currentColor", "stroke-dasharray": "2 3" }));
      labels.line([[X(nStar), m.top], [X(nStar), bottom]]);
    }
    const picks = [];
    for (const p of pts) {
      const st = HOW_STYLE[p.how] || HOW_STYLE.gpu;
      const cx = X(p.elements), cy = Y(p.seconds);
      const mk = marker(st.shape, cx, cy, 4.5, st.color);
      mk.setAttribute("class", "swg-measured");
      chart.plot.append(mk);
      labels.marker(cx, cy, 4.5);
      picks.push({ el: mk, x: cx, y: cy, key: `${p.source}|${p.label}|${p.how}|${p.seconds}`,
                   text: `measured: ${p.label}, ${fmtTime(p.seconds)}, ${st.label.replace(/^measured: /, "")} (${p.source})` });
    }
    const pm = marker("diamond", X(n), Y(t), 7, OI.blue);
    pm.setAttribute("data-testid", "probe");
    chart.over.append(pm);
    labels.marker(X(n), Y(t), 7);
    picks.push({ el: pm, x: X(n), y: Y(t), key: "probe",
                 text: `T × h chosen above: T = ${fmtInt(get("T"))}, h = ${fmtInt(get("h"))}, ${fmtCount(n)} elements, ${fmtBytes(bytes)}: ${fmtTime(t)}, ${over ? "overhead" : "bandwidth"}-bound` });
    // the regions' names, at the top of each (else at its foot) where they fit
    if (crossing) {
      const rows = (mt) => [m.top + 3 + mt.asc, bottom - 3 - mt.desc, m.top + 3 + mt.asc + 16, bottom - 3 - mt.desc - 16];
      labels.place({ texts: ["overhead-bound"], places: (mt) => rows(mt).map((y) => ({ x: X(nStar) - 4, y, anchor: "end" })) });
      labels.place({ texts: ["bandwidth-bound"], places: (mt) => rows(mt).map((y) => ({ x: X(nStar) + 4, y })) });
    }
    details.attach(chart, picks);
    chartBox.replaceChildren(chart.svg, details.line);
    const items = [
      { color: "currentColor", label: "t(n) = max(overhead, bytes / bandwidth)" },
      { color: OI.orange, dash: "6 4", label: "launch overhead" },
      { color: OI.sky, dash: "6 4", label: "bytes / bandwidth" },
      { color: OI.blue, shape: "diamond", label: "T × h chosen above" },
    ];
    for (const [how, st] of Object.entries(HOW_STYLE)) {
      if (pts.some((p) => p.how === how)) items.push({ color: st.color, shape: st.shape, label: st.label });
    }
    chartBox.append(legend(items));
    note.textContent = `Fused SwiGLU moves ${perElem} bytes per output element (read gate and up, write out). ${get("data_note")}`;
    ask.refresh();
  }

  return redrawOn(model, ["overhead_s", "bandwidth", "dtype", "T", "h", "points"], draw, chartBox);
}

export default { render: renderLaunch };
