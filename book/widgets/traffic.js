// Traffic explorer (book.widgets.traffic_explorer): T, h (and d), dtype in; transfers and bytes of
// each SwiGLU variant out, as a table and stacked bars. Draws by itself: no kernel needed.

// Each variant's traffic split into what it must read, round trips through memory that fusion
// removes, and the output it must write.
const PART_STYLE = [
  ["inputs", "inputs read", OI.blue],
  ["intermediate", "intermediates written and read back", OI.vermillion],
  ["output", "output written", OI.green],
];

function trafficRows(st) {
  const { T, h: H, d, elemBytes, fpe, scope } = st;
  const n = T * H;
  const rows = [];
  if (scope === "activation") {
    for (const [key, label, kernels] of [
      ["naive", "naive (silu, then multiply)", "2"],
      ["fused", "fused (one kernel)", "1"],
      ["epilogue", "epilogue-fused (in the up GEMM)", "0 extra"],
    ]) {
      const t = activationTraffic(T, H, elemBytes, key, fpe);
      const inputs = key === "epilogue" ? n : 2 * n; // up never leaves registers in the epilogue
      rows.push({ key, label, kernels, t, parts: { inputs, output: n, intermediate: t.transfers - inputs - n } });
    }
  } else {
    const x = T * d, w = d * H;
    for (const [key, label, kernels] of [
      ["naive", "2 GEMMs + naive SwiGLU", "4"],
      ["unfused", "2 GEMMs + fused SwiGLU", "3"],
      ["epilogue", "dual GEMM, SwiGLU in epilogue", "1"],
    ]) {
      const t = mlpUpTraffic(T, d, H, elemBytes, key, fpe);
      const inputs = key === "epilogue" ? x + 2 * w : 2 * (x + w);
      rows.push({ key, label, kernels, t, parts: { inputs, output: n, intermediate: t.transfers - inputs - n } });
    }
  }
  return rows;
}

function renderTraffic({ model, el }) {
  const get = (k) => model.get(k);
  const root = h("div", { class: "swg swg-traffic" });
  el.append(root);

  const [tIn, tErr] = intInput("T", get("T"), "T", (v) => setState(model, { T: v }));
  const [hIn, hErr] = intInput("h", get("h"), "h", (v) => setState(model, { h: v }));
  const [dIn, dErr] = intInput("d", get("d"), "d", (v) => setState(model, { d: v }));
  const dtypeSel = select(Object.keys(get("dtypes")).map((k) => [k, `${k} (${get("dtypes")[k]} B)`]), get("dtype"), "dtype");
  const scopeSel = select([["activation", "the activation alone"], ["mlp", "gate/up projections + activation"]], get("scope"), "scope");
  const tf = field("T (tokens)", tIn); tf.append(tErr);
  const hf = field("h (hidden)", hIn); hf.append(hErr);
  const df = field("d (model width)", dIn, "used by the projections only"); df.append(dErr);
  root.append(h("div", { class: "swg-controls" }, tf, hf, field("dtype", dtypeSel), field("count", scopeSel), df));
  dtypeSel.addEventListener("change", () => setState(model, { dtype: dtypeSel.value }));
  scopeSel.addEventListener("change", () => setState(model, { scope: scopeSel.value }));

  const table = h("table", { class: "swg-table", "data-testid": "table" });
  const caption = h("caption");
  table.append(caption);
  table.append(h("thead", {}, h("tr", {},
    h("th", { scope: "col", text: "variant" }),
    h("th", { scope: "col", class: "swg-wide-only", text: "kernels" }),
    h("th", { scope: "col", text: "transfers" }),
    h("th", { scope: "col", text: "per out" }),
    h("th", { scope: "col", text: "bytes" }),
    h("th", { scope: "col", text: "vs best" }),
  )));
  const tbody = h("tbody");
  table.append(tbody);
  const bars = h("div", { class: "swg-bars" });
  const note = h("p", { class: "swg-note", "data-testid": "note" });
  root.append(h("div", { class: "swg-table-wrap" }, table), bars, note);

  // The reader's question: the bytes that fusion saves at the state shown, from the same counts
  // as the table (activation: fused against the naive pair; MLP: the dual GEMM's epilogue
  // against two GEMMs and the fused activation).
  function question() {
    const st = { T: get("T"), h: get("h"), d: get("d"), elemBytes: get("dtypes")[get("dtype")], fpe: get("flops_per_element"), scope: get("scope") };
    const rows = Object.fromEntries(trafficRows(st).map((r) => [r.key, r]));
    const eb = st.elemBytes;
    const where = `T = ${fmtInt(st.T)}, h = ${fmtInt(st.h)}${st.scope === "mlp" ? `, d = ${fmtInt(st.d)}` : ""}, ${get("dtype")}`;
    const [slow, fast, text] = st.scope === "activation"
      ? [rows.naive, rows.fused, `How many bytes does the fused kernel save against the naive pair (silu, then multiply) at ${where}?`]
      : [rows.unfused, rows.epilogue, `How many bytes does the dual GEMM with SwiGLU in its epilogue save against two GEMMs and the fused SwiGLU at ${where}?`];
    const saved = slow.t.bytes - fast.t.bytes;
    const n = st.T * st.h;
    const mistakes = [
      [fast.t.bytes, `that is what the ${fast.key === "fused" ? "fused kernel" : "dual GEMM"} moves in all; the question asks for the difference.`],
      [slow.t.bytes, "that is what the slower design moves in all; subtract what the faster one moves."],
      [slow.t.transfers - fast.t.transfers, `that counts transfers; each moves ${eb} bytes.`],
    ];
    if (st.scope === "mlp") mistakes.push([4 * n * eb, "that is the gate and up tensors written and read back; the dual GEMM also reads x once instead of twice."]);
    const explain = st.scope === "activation"
      ? `The naive pair writes silu(gate) to a temporary and reads it back: 2 × T·h transfers of ${eb} bytes.`
      : `Gate and up are never written or read back (4 × T·h transfers) and x is read once, not twice (T·d more), ${eb} bytes each.`;
    // the rounded figure a reader works out, and the exact count
    const fmt = (x) => (Math.abs(x) < 1e3 ? `${fmtInt(x)} bytes` : `${fmtBytes(x)} (${fmtInt(x)} bytes)`);
    return { question: text, kind: "bytes", truth: saved, rel: 0.02, fmt, mistakes, explain };
  }
  const ask = quiz(question);
  root.append(ask.box);

  function draw() {
    dtypeSel.value = get("dtype");
    scopeSel.value = get("scope");
    for (const [inp, key] of [[tIn, "T"], [hIn, "h"], [dIn, "d"]]) {
      if (Number(inp.value) !== get(key)) syncInput(inp, get(key));
    }
    const scope = get("scope");
    // d sizes x and the weights: the activation alone has neither
    enableField(df, dIn, scope === "mlp", get("d"));
    const st = { T: get("T"), h: get("h"), d: get("d"), elemBytes: get("dtypes")[get("dtype")], fpe: get("flops_per_element"), scope };
    const rows = trafficRows(st);
    const n = st.T * st.h;
    const counted = rows;
    const best = Math.min(...counted.map((r) => r.t.bytes));
    const most = Math.max(...counted.map((r) => r.t.bytes));
    caption.textContent =
      scope === "activation"
        ? `SwiGLU activation out = silu(gate) * up, T=${fmtInt(st.T)}, h=${fmtInt(st.h)} (${fmtInt(n)} outputs), ${get("dtype")}`
        : `x[T, d] @ Wg, x @ Wu, then SwiGLU; T=${fmtInt(st.T)}, d=${fmtInt(st.d)}, h=${fmtInt(st.h)}, ${get("dtype")}`;
    tbody.replaceChildren();
    bars.replaceChildren();
    const barList = h("div", { class: "swg-barlist", role: "img" });
    const aria = [];
    for (const r of rows) {
      const tr = h("tr", { "data-variant": r.key });
      tr.append(h("th", { scope: "row", text: r.label }));
      const c1 = h("td", { class: "swg-wide-only", text: r.kernels });
      const c2 = h("td", { "data-testid": `transfers-${r.key}` });
      showValue(c2, fmtInt(r.t.transfers), r.t.transfers);
      const c3 = h("td", { "data-testid": `per-output-${r.key}` });
      showValue(c3, `${sig(r.t.transfers / n)} × T·h`, r.t.transfers / n);
      const c4 = h("td", { "data-testid": `bytes-${r.key}` });
      showValue(c4, fmtBytes(r.t.bytes), r.t.bytes);
      const c5 = h("td", { "data-testid": `ratio-${r.key}` });
      showValue(c5, `${sig(r.t.bytes / best)}×`, r.t.bytes / best);
      tr.append(c1, c2, c3, c4, c5);
      tbody.append(tr);

      // stacked bar, width proportional to bytes
      const bar = h("div", { class: "swg-bar", "data-testid": `bar-${r.key}`, style: `width:${((100 * r.t.bytes) / most).toFixed(3)}%` });
      for (const [part, , color] of PART_STYLE) {
        const v = r.parts[part];
        if (v <= 0) continue;
        bar.append(h("span", { style: `flex-grow:${v};background:${color}`, title: `${part}: ${fmtInt(v)} transfers` }));
      }
      barList.append(
        h("div", { class: "swg-bar-row" },
          h("div", { class: "swg-bar-label" }, h("span", { text: r.label }), h("b", { text: fmtBytes(r.t.bytes) })),
          h("div", { class: "swg-bar-track" }, bar)),
      );
      aria.push(`${r.label}: ${fmtInt(r.t.transfers)} transfers, ${fmtBytes(r.t.bytes)}`);
    }
    barList.setAttribute("aria-label", `Bytes moved by each variant. ${aria.join("; ")}.`);
    bars.append(barList, legend(PART_STYLE.map(([, label, color]) => ({ color, label }))));
    note.textContent =
      scope === "activation"
        ? "One transfer is one element loaded from or stored to GPU memory; bytes = transfers × the dtype's size. Epilogue-fused: the activation runs in the epilogue of the GEMM that computes up, so up is still in registers."
        : "Each operand read once and each output written once: the least traffic each variant can have. Weights dominate when T is small.";
    ask.refresh();
  }

  return redrawOn(model, ["T", "h", "d", "dtype", "scope"], draw);
}

export default { render: renderTraffic };
