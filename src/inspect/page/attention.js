"use strict";
(function () {
  const statusEl = document.getElementById("status");
  let failed = false;
  function fail(msg) {
    failed = true;
    statusEl.textContent = "error: " + msg;
    statusEl.className = "error";
  }
  window.onerror = function (msg, src, line) { fail(msg + (line ? " (line " + line + ")" : "")); };
  window.addEventListener("unhandledrejection", function (e) { fail(String(e.reason)); });

  const tParse = performance.now();
  const DATA = JSON.parse(document.getElementById("attention-data").textContent);
  statusEl.setAttribute("data-parse-ms", (performance.now() - tParse).toFixed(0));
  statusEl.setAttribute("data-script-start-ms", tParse.toFixed(0));
  const MODEL = DATA.model, SENT = DATA.sentences, NH = MODEL.n_heads;
  const KINDS = {
    cross: { field: "cross_attention", name: "cross-attention", layers: MODEL.decoder_layers,
             q: "tgt", k: "src" },
    encoder: { field: "encoder_self_attention", name: "encoder self-attention",
               layers: MODEL.encoder_layers, q: "src", k: "src" },
    decoder: { field: "decoder_self_attention", name: "decoder self-attention",
               layers: MODEL.decoder_layers, q: "tgt", k: "tgtin" },
  };
  const VIEWS = ["heatmap", "model", "head", "decoding"];
  const MIN_LINE = 0.005;  // head view: weights below this draw no line
  const state = { s: 0, kind: "cross", layer: 0, head: "avg", view: "heatmap", rows: "auto",
                  scale: "linear" };
  const $ = (id) => document.getElementById(id);
  const FONT = getComputedStyle(document.body).fontFamily;

  // --- helpers -------------------------------------------------------------------------------
  const ESC = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ESC[c]);
  function short(s, n) {
    const a = Array.from(s);
    return a.length > n ? a.slice(0, n - 1).join("") + "…" : s;
  }
  const measure = document.createElement("canvas").getContext("2d");
  function maxWidth(labels, px) {
    measure.font = px + "px " + FONT;
    let w = 0;
    for (const s of labels) w = Math.max(w, measure.measureText(s).width);
    return Math.ceil(w);
  }
  function clampInt(v, lo, hi, dflt) {
    const n = parseInt(v, 10);
    return Number.isFinite(n) ? Math.min(hi, Math.max(lo, n)) : dflt;
  }
  const isBad = (w) => w === null || w === undefined || w !== w;
  function fmt(w) {
    if (isBad(w)) return "not a number";
    return w === 0 ? "0" : w >= 0.001 ? w.toFixed(4) : w.toExponential(2);
  }
  // Colour scale (white → dark blue), 256 entries; magenta for weights that are not numbers.
  const STOPS = [[255, 255, 255], [198, 219, 239], [107, 174, 214], [33, 113, 181], [8, 48, 107]];
  const LUT = [], LUT_CSS = [];
  for (let i = 0; i < 256; ++i) {
    const x = (i / 255) * (STOPS.length - 1), k = Math.min(STOPS.length - 2, Math.floor(x)), f = x - k;
    const c = STOPS[k].map((a, n) => Math.round(a + (STOPS[k + 1][n] - a) * f));
    LUT.push(c);
    LUT_CSS.push("rgb(" + c.join(",") + ")");
  }
  const BAD_RGB = [224, 64, 160], BAD_CSS = "rgb(224,64,160)";
  let vmax = 1;  // the largest weight of what is drawn, for the "max" scale
  function setMax(matrices) {
    vmax = 0;
    if (state.scale === "max")
      for (const m of matrices) for (const row of m) for (const w of row) if (w > vmax) vmax = w;
    if (!(vmax > 0)) vmax = 1;
  }
  function level(w) {  // weight → 0..1 on the chosen scale
    const v = Math.min(1, Math.max(0, state.scale === "max" ? w / vmax : w));
    return state.scale === "sqrt" ? Math.sqrt(v) : v;
  }
  const legendValue = (t) => (state.scale === "sqrt" ? t * t : state.scale === "max" ? t * vmax : t);
  const colour = (w) => (isBad(w) ? BAD_CSS : LUT_CSS[Math.round(level(w) * 255)]);

  // --- data access ---------------------------------------------------------------------------
  const avgCache = new Map();
  function layerHeads(s, kind, layer) {
    const arr = SENT[s][KINDS[kind].field];
    return arr.length ? arr[layer] : null;
  }
  function average(heads) {
    const nq = heads[0].length, nk = nq ? heads[0][0].length : 0, out = [];
    for (let i = 0; i < nq; ++i) {
      const row = new Array(nk).fill(0);
      for (const h of heads) {
        const r = h[i];
        for (let j = 0; j < nk; ++j) row[j] += isBad(r[j]) ? NaN : r[j];
      }
      for (let j = 0; j < nk; ++j) row[j] /= heads.length;
      out.push(row);
    }
    return out;
  }
  /// The selected matrix [queries][keys], or null when the sentence has no attention.
  function matrix() {
    if (!SENT.length) return null;
    const heads = layerHeads(state.s, state.kind, state.layer);
    if (!heads) return null;
    if (state.head !== "avg") return heads[state.head];
    const key = state.s + "/" + state.kind + "/" + state.layer;
    if (!avgCache.has(key)) avgCache.set(key, average(heads));
    return avgCache.get(key);
  }
  const srcPieces = () => SENT[state.s].src_tokens.map((t) => t.piece);
  const inputPieces = () => SENT[state.s].decoder_inputs;
  const outputPieces = () => SENT[state.s].tgt_tokens.map((t) => t.piece);
  function rowMode() {
    return state.rows === "auto" ? (state.kind === "cross" ? "output" : "input") : state.rows;
  }
  function queryLabels() {
    if (KINDS[state.kind].q === "src") return srcPieces();
    return rowMode() === "output" ? outputPieces() : inputPieces();
  }
  const keyLabels = () => (KINDS[state.kind].k === "src" ? srcPieces() : inputPieces());
  function queryTitle() {
    if (KINDS[state.kind].q === "src") return "queries: source tokens";
    return rowMode() === "output" ? "queries: decoder steps, labelled by the predicted token"
                                  : "queries: decoder inputs (BOS, then the previous output)";
  }
  const keyTitle = () => (KINDS[state.kind].k === "src" ? "keys: source tokens (EOS last)"
                                                        : "keys: decoder inputs (BOS first)");
  function queryDesc(i) {
    if (KINDS[state.kind].q === "src") return "source token " + i + " “" + srcPieces()[i] + "”";
    return "decoder step " + i + ": input “" + inputPieces()[i] + "”, predicts “" + outputPieces()[i] + "”";
  }
  function keyDesc(j) {
    return KINDS[state.kind].k === "src" ? "source token " + j + " “" + srcPieces()[j] + "”"
                                         : "decoder input " + j + " “" + inputPieces()[j] + "”";
  }
  function selectionName() {
    const h = state.head === "avg" ? "average over heads" : "head " + (state.head + 1);
    return KINDS[state.kind].name + ", layer " + (state.layer + 1) + ", " + h;
  }

  // --- tooltip -------------------------------------------------------------------------------
  const tip = $("tooltip");
  function showTip(e, text) {
    tip.textContent = text;
    tip.hidden = false;
    const x = Math.min(e.clientX + 14, window.innerWidth - tip.offsetWidth - 4);
    const y = Math.min(e.clientY + 14, window.innerHeight - tip.offsetHeight - 4);
    tip.style.left = Math.max(0, x) + "px";
    tip.style.top = Math.max(0, y) + "px";
  }
  const hideTip = () => { tip.hidden = true; };

  // --- sentence information ------------------------------------------------------------------
  function drawInfo() {
    const el = $("sentence-info");
    if (!SENT.length) { el.innerHTML = '<div class="empty">The dump has no sentences.</div>'; return; }
    const s = SENT[state.s];
    const src = s.src_tokens.map((t) =>
      '<span class="tok" title="id ' + t.id + '">' + esc(t.piece) + "</span>").join("");
    const tgt = s.tgt_tokens.map((t) => {
      if (t.logprob === null) return '<span class="tok" title="id ' + t.id + '">' + esc(t.piece) + "</span>";
      const p = Math.exp(t.logprob);
      return '<span class="tok" lang="hi" style="background:rgba(29,95,165,' + (0.08 + 0.3 * p).toFixed(3) +
             ')" title="id ' + t.id + ", log p = " + t.logprob.toFixed(4) + " (p = " + p.toFixed(3) + ')">' +
             esc(t.piece) + "</span>";
    }).join("");
    el.innerHTML =
      '<div class="line"><b>Source</b><span lang="en">' + esc(s.source) + "</span></div>" +
      '<div class="line"><b>Translation</b><span lang="hi">' + esc(s.translation) + "</span>" +
      (s.score === null || s.score === undefined ? "" :
        '<span style="color:#777;font-size:12px">log p = ' + s.score.toFixed(3) + "</span>") + "</div>" +
      "<details" + (s.src_tokens.length + s.tgt_tokens.length <= 60 ? " open" : "") + "><summary>Tokens: " +
      s.src_tokens.length + " source (EOS included), " + s.tgt_tokens.length + " output</summary>" +
      '<div class="line"><b>Source tokens</b><span class="tokens">' + (src || "<i>none</i>") + "</span></div>" +
      '<div class="line"><b>Output tokens</b><span class="tokens">' + (tgt || "<i>none</i>") + "</span></div></details>";
  }

  // --- heatmap view --------------------------------------------------------------------------
  const heat = { m: null };
  function drawHeatmap() {
    const svg = $("heatmap"), m = matrix();
    heat.m = m;
    if (!m || !m.length || !m[0].length) {
      svg.innerHTML = "";
      svg.setAttribute("width", 0);
      svg.setAttribute("height", 0);
      $("heatmap-caption").innerHTML = '<span class="empty">No attention recorded for this sentence.</span>';
      return { cells: 0 };
    }
    const nq = m.length, nk = m[0].length;
    setMax([m]);
    const ql = queryLabels().map((x) => short(x, 18)), kl = keyLabels().map((x) => short(x, 18));
    const cell = Math.max(12, Math.min(30, Math.floor(760 / Math.max(nq, nk))));
    const fs = Math.min(13, cell - 2);
    const left = maxWidth(ql, fs) + 14, top = maxWidth(kl, fs) + 34;
    const gw = nk * cell, gh = nq * cell, lx = left + gw + 18;
    const out = [];
    out.push('<text class="axis" x="' + (left + gw / 2) + '" y="14" text-anchor="middle">' + esc(keyTitle()) + "</text>");
    for (let j = 0; j < nk; ++j)
      out.push('<text class="col-label" data-k="' + j + '" font-size="' + fs + '" dominant-baseline="central" transform="translate(' +
               (left + j * cell + cell / 2) + "," + (top - 6) + ') rotate(-90)">' + esc(kl[j]) + "</text>");
    for (let i = 0; i < nq; ++i)
      out.push('<text class="row-label" data-q="' + i + '" font-size="' + fs + '" x="' + (left - 6) + '" y="' +
               (top + i * cell + cell / 2) + '" text-anchor="end" dominant-baseline="central">' + esc(ql[i]) + "</text>");
    for (let i = 0; i < nq; ++i) {
      const row = m[i], y = top + i * cell;
      for (let j = 0; j < nk; ++j)
        out.push('<rect class="cell" data-q="' + i + '" data-k="' + j + '" x="' + (left + j * cell) + '" y="' + y +
                 '" width="' + cell + '" height="' + cell + '" fill="' + colour(row[j]) + '"/>');
    }
    out.push('<rect x="' + left + '" y="' + top + '" width="' + gw + '" height="' + gh + '" fill="none" stroke="#9a9a9a"/>');
    // Legend: the colour bar with the weights it stands for.
    const lh = Math.max(60, Math.min(220, gh)), stops = [];
    for (let n = 0; n <= 10; ++n) stops.push('<stop offset="' + n / 10 + '" stop-color="' + LUT_CSS[Math.round(n * 25.5)] + '"/>');
    out.push('<defs><linearGradient id="legend-gradient" x1="0" y1="1" x2="0" y2="0">' + stops.join("") + "</linearGradient></defs>");
    out.push('<rect x="' + lx + '" y="' + top + '" width="14" height="' + lh + '" fill="url(#legend-gradient)" stroke="#9a9a9a"/>');
    for (const t of [0, 0.5, 1]) {
      const w = legendValue(t);
      out.push('<text class="axis" x="' + (lx + 20) + '" y="' + (top + lh - t * lh) + '" dominant-baseline="central">' +
               (w === 0 || w === 1 ? w : +w.toPrecision(3)) + "</text>");
    }
    svg.setAttribute("width", lx + 60);
    svg.setAttribute("height", top + Math.max(gh, lh) + 10);
    svg.innerHTML = out.join("");
    $("heatmap-caption").textContent = selectionName() + " — rows: " + nq + " " + queryTitle().replace(/^queries: /, "") +
      "; columns: " + nk + " " + keyTitle().replace(/^keys: /, "") + ". Each row sums to 1. Hover a cell for its weight.";
    return { cells: nq * nk, rows: nq, cols: nk };
  }
  let hl = [];
  function clearHl() { for (const e of hl) e.classList.remove("hl"); hl = []; }
  $("heatmap").addEventListener("mousemove", (e) => {
    const t = e.target;
    if (!t.classList || !t.classList.contains("cell") || !heat.m) { hideTip(); clearHl(); return; }
    const i = +t.getAttribute("data-q"), j = +t.getAttribute("data-k");
    showTip(e, queryDesc(i) + "\n→ " + keyDesc(j) + "\nweight " + fmt(heat.m[i][j]));
    clearHl();
    const svg = $("heatmap");
    hl = [svg.querySelector('.row-label[data-q="' + i + '"]'), svg.querySelector('.col-label[data-k="' + j + '"]')].filter(Boolean);
    for (const el of hl) el.classList.add("hl");
  });
  $("heatmap").addEventListener("mouseleave", () => { hideTip(); clearHl(); });

  // --- model view: every layer × head of the chosen kind -------------------------------------
  function drawModel() {
    const box = $("model-view"), k = KINDS[state.kind];
    const arr = SENT.length ? SENT[state.s][k.field] : [];
    if (!arr.length) {
      box.style.gridTemplateColumns = "";
      box.innerHTML = '<div class="empty">No attention recorded for this sentence.</div>';
      $("model-caption").textContent = "";
      return { panels: 0 };
    }
    const nq = arr[0][0].length, nk = nq ? arr[0][0][0].length : 0;
    setMax([].concat(...arr));
    const scale = 110 / Math.max(nq, nk, 1);
    const cw = Math.max(2, Math.round(nk * scale)), ch = Math.max(2, Math.round(nq * scale));
    box.style.gridTemplateColumns = "auto repeat(" + NH + ", auto)";
    const frag = document.createDocumentFragment();
    const div = (cls, text) => { const d = document.createElement("div"); d.className = cls; d.textContent = text; return d; };
    frag.appendChild(div("col-head", ""));
    for (let h = 0; h < NH; ++h) frag.appendChild(div("col-head", "head " + (h + 1)));
    for (let l = 0; l < arr.length; ++l) {
      frag.appendChild(div("row-head", "layer " + (l + 1)));
      for (let h = 0; h < NH; ++h) {
        const p = document.createElement("div");
        p.className = "panel" + (l === state.layer && h === state.head ? " selected" : "");
        p.setAttribute("data-layer", l);
        p.setAttribute("data-head", h);
        p.title = "layer " + (l + 1) + ", head " + (h + 1) + ": click to open in the heatmap";
        const c = document.createElement("canvas");
        c.width = Math.max(1, nk);
        c.height = Math.max(1, nq);
        c.style.width = cw + "px";
        c.style.height = ch + "px";
        const ctx = c.getContext("2d"), img = ctx.createImageData(c.width, c.height), px = img.data;
        const m = arr[l][h];
        for (let i = 0; i < nq; ++i)
          for (let j = 0; j < nk; ++j) {
            const w = m[i][j], rgb = isBad(w) ? BAD_RGB : LUT[Math.round(level(w) * 255)], o = 4 * (i * nk + j);
            px[o] = rgb[0]; px[o + 1] = rgb[1]; px[o + 2] = rgb[2]; px[o + 3] = 255;
          }
        ctx.putImageData(img, 0, 0);
        p.appendChild(c);
        frag.appendChild(p);
      }
    }
    box.replaceChildren(frag);
    $("model-caption").textContent = k.name + ": " + arr.length + " layers × " + NH + " heads (" + nq +
      " queries × " + nk + " keys each" + (state.scale === "max" ? "; colours relative to the largest weight, " + fmt(vmax) : "") +
      "). Click a head to open it in the heatmap.";
    return { panels: arr.length * NH };
  }
  $("model-view").addEventListener("click", (e) => {
    const p = e.target.closest(".panel");
    if (!p) return;
    state.layer = +p.getAttribute("data-layer");
    state.head = +p.getAttribute("data-head");
    state.view = "heatmap";
    render();
  });

  // --- head view: queries and keys in two columns, one line per weight ------------------------
  const hv = { m: null };
  function drawHeadView() {
    const svg = $("headview"), m = matrix();
    hv.m = m;
    svg.classList.remove("focus");
    if (!m || !m.length || !m[0].length) {
      svg.innerHTML = "";
      svg.setAttribute("width", 0);
      svg.setAttribute("height", 0);
      $("head-caption").innerHTML = '<span class="empty">No attention recorded for this sentence.</span>';
      return { lines: 0 };
    }
    const nq = m.length, nk = m[0].length, fs = 13, rh = 20, top = 34, gap = 260;
    setMax([m]);
    const ql = queryLabels().map((x) => short(x, 24)), kl = keyLabels().map((x) => short(x, 24));
    const qhead = KINDS[state.kind].q === "src" ? "source (queries)"
                : rowMode() === "output" ? "target, predicted (queries)" : "decoder inputs (queries)";
    const khead = KINDS[state.kind].k === "src" ? "source (keys)" : "decoder inputs (keys)";
    const lw = Math.max(maxWidth(ql, fs), maxWidth([qhead], 12)) + 20;
    const rw = Math.max(maxWidth(kl, fs), maxWidth([khead], 12)) + 20;
    const x1 = lw, x2 = lw + gap, out = [];
    out.push('<text class="axis" x="' + (x1 - 8) + '" y="16" text-anchor="end">' + qhead + "</text>");
    out.push('<text class="axis" x="' + (x2 + 8) + '" y="16">' + khead + "</text>");
    for (let i = 0; i < nq; ++i) {
      const y = top + i * rh;
      out.push('<rect class="bar" data-side="q" data-i="' + i + '" x="0" y="' + (y - rh / 2 + 1) + '" width="' + (x1 - 4) + '" height="' + (rh - 2) + '"/>');
      out.push('<text class="tok-q" data-i="' + i + '" x="' + (x1 - 8) + '" y="' + y + '" font-size="' + fs +
               '" text-anchor="end" dominant-baseline="central">' + esc(ql[i]) + "</text>");
    }
    for (let j = 0; j < nk; ++j) {
      const y = top + j * rh;
      out.push('<rect class="bar" data-side="k" data-i="' + j + '" x="' + (x2 + 4) + '" y="' + (y - rh / 2 + 1) + '" width="' + (rw - 4) + '" height="' + (rh - 2) + '"/>');
      out.push('<text class="tok-k" data-i="' + j + '" x="' + (x2 + 8) + '" y="' + y + '" font-size="' + fs +
               '" dominant-baseline="central">' + esc(kl[j]) + "</text>");
    }
    let lines = 0;
    for (let i = 0; i < nq; ++i)
      for (let j = 0; j < nk; ++j) {
        const w = m[i][j];
        if (isBad(w) || w < MIN_LINE) continue;
        out.push('<line class="link q' + i + " k" + j + '" x1="' + (x1 - 2) + '" y1="' + (top + i * rh) + '" x2="' + (x2 + 2) +
                 '" y2="' + (top + j * rh) + '" stroke-opacity="' + level(w).toFixed(3) + '"/>');
        ++lines;
      }
    svg.setAttribute("width", x2 + rw + 10);
    svg.setAttribute("height", top + Math.max(nq, nk) * rh);
    svg.innerHTML = out.join("");
    $("head-caption").textContent = selectionName() + " — line opacity is the weight (weights below " +
      MIN_LINE + " are not drawn). Hover a token to see only its lines.";
    return { lines: lines };
  }
  function headFocus(e) {
    const t = e.target, svg = $("headview");
    const side = t.classList && (t.classList.contains("tok-q") ? "q" : t.classList.contains("tok-k") ? "k" : null);
    if (!side || !hv.m) return;
    const i = +t.getAttribute("data-i");
    headBlur();
    svg.classList.add("focus");
    t.classList.add("focused");
    for (const l of svg.querySelectorAll("line." + side + i)) l.classList.add("on");
    const other = side === "q" ? "k" : "q";
    for (const b of svg.querySelectorAll('rect.bar[data-side="' + other + '"]')) {
      const j = +b.getAttribute("data-i"), w = side === "q" ? hv.m[i][j] : hv.m[j][i];
      b.style.fillOpacity = isBad(w) ? 0 : (0.45 * level(w)).toFixed(3);
    }
    showTip(e, side === "q" ? queryDesc(i) : keyDesc(i));
  }
  function headBlur() {
    const svg = $("headview");
    svg.classList.remove("focus");
    for (const l of svg.querySelectorAll("line.on")) l.classList.remove("on");
    for (const t of svg.querySelectorAll("text.focused")) t.classList.remove("focused");
    for (const b of svg.querySelectorAll("rect.bar")) b.style.fillOpacity = "";
    hideTip();
  }
  $("headview").addEventListener("mouseover", headFocus);
  $("headview").addEventListener("mouseout", (e) => { if (e.target.tagName === "text") headBlur(); });

  // --- decoding view: the beam search tree (decoding.js) ---------------------------------------
  const decoding = window.anuvadDecodingView({ $, esc, short, maxWidth, colour, fmt, showTip, hideTip, state,
                                               SENT, MODEL, DATA });

  // --- controls, URL hash and rendering ------------------------------------------------------
  function fill(sel, options, value) {
    sel.innerHTML = options.map((o) => '<option value="' + esc(o[0]) + '">' + esc(o[1]) + "</option>").join("");
    sel.value = String(value);
  }
  function readHash() {
    const p = new URLSearchParams(location.hash.replace(/^#/, ""));
    if (p.has("s")) state.s = clampInt(p.get("s"), 0, Math.max(0, SENT.length - 1), 0);
    if (KINDS.hasOwnProperty(p.get("kind"))) state.kind = p.get("kind");
    if (p.has("layer")) state.layer = clampInt(p.get("layer"), 0, 1e9, 0);
    if (p.has("head")) state.head = p.get("head") === "avg" ? "avg" : clampInt(p.get("head"), 0, NH - 1, "avg");
    if (VIEWS.includes(p.get("view"))) state.view = p.get("view");
    if (["auto", "input", "output"].includes(p.get("rows"))) state.rows = p.get("rows");
    if (["linear", "max", "sqrt"].includes(p.get("scale"))) state.scale = p.get("scale");
  }
  function writeHash() {
    const h = "#s=" + state.s + "&kind=" + state.kind + "&layer=" + state.layer + "&head=" + state.head +
              "&view=" + state.view + "&rows=" + state.rows + "&scale=" + state.scale;
    if (location.hash !== h) { try { history.replaceState(null, "", h); } catch (e) { /* file: URL quirks */ } }
  }
  function syncControls() {
    const k = KINDS[state.kind];
    state.layer = Math.min(Math.max(0, state.layer), k.layers - 1);
    $("sel-sentence").value = String(state.s);
    $("sel-kind").value = state.kind;
    const layers = [];
    for (let l = 0; l < k.layers; ++l) layers.push([l, "layer " + (l + 1)]);
    fill($("sel-layer"), layers, state.layer);
    const heads = [["avg", "average over heads"]];
    for (let h = 0; h < NH; ++h) heads.push([h, "head " + (h + 1)]);
    fill($("sel-head"), heads, state.head);
    $("sel-rows").value = state.rows;
    $("sel-rows").disabled = state.kind === "encoder";
    $("sel-scale").value = state.scale;
    for (const b of document.querySelectorAll("#tabs button"))
      b.classList.toggle("active", b.getAttribute("data-view") === state.view);
    $("heatmap-view").hidden = state.view !== "heatmap";
    $("model-view-wrap").hidden = state.view !== "model";
    $("head-view").hidden = state.view !== "head";
    $("decoding-view").hidden = state.view !== "decoding";
  }
  let infoFor = -1;
  function render() {
    const t0 = performance.now();
    hideTip();
    syncControls();
    if (infoFor !== state.s) { drawInfo(); infoFor = state.s; }
    // Only the visible view is drawn; the others are redrawn when shown.
    const info = state.view === "heatmap" ? drawHeatmap() : state.view === "model" ? drawModel()
               : state.view === "head" ? drawHeadView() : decoding.draw();
    writeHash();
    const ms = performance.now() - t0;
    $("timing").textContent = "drawn in " + ms.toFixed(0) + " ms";
    statusEl.setAttribute("data-view", state.view);
    statusEl.setAttribute("data-draw-ms", ms.toFixed(1));
    for (const key of ["cells", "rows", "cols", "panels", "lines", "nodes", "path", "steps"])
      if (key in info) statusEl.setAttribute("data-" + key, info[key]); else statusEl.removeAttribute("data-" + key);
    if (!failed) statusEl.textContent = "ok";
  }

  fill($("sel-sentence"), SENT.map((s, n) => [n, (n + 1) + ". " + short(s.source, 70)]), 0);
  for (const id of ["sel-sentence", "sel-kind", "sel-layer", "sel-head", "sel-rows", "sel-scale"])
    $(id).addEventListener("change", () => {
      state.s = clampInt($("sel-sentence").value, 0, Math.max(0, SENT.length - 1), 0);
      state.kind = $("sel-kind").value;
      state.layer = clampInt($("sel-layer").value, 0, 1e9, 0);
      state.head = $("sel-head").value === "avg" ? "avg" : clampInt($("sel-head").value, 0, NH - 1, "avg");
      state.rows = $("sel-rows").value;
      state.scale = $("sel-scale").value;
      render();
    });
  for (const b of document.querySelectorAll("#tabs button"))
    b.addEventListener("click", () => { state.view = b.getAttribute("data-view"); render(); });
  window.addEventListener("hashchange", () => { readHash(); render(); });
  const d = DATA.decoding;
  $("model-summary").textContent = "model: " + MODEL.encoder_layers + " encoder + " + MODEL.decoder_layers +
    " decoder layers, " + NH + " heads, d_model " + MODEL.d_model + " · decoding: " +
    (d.beam_size > 1 ? "beam " + d.beam_size : "greedy") + " · " + SENT.length + " sentence(s)";
  // --- self-test (#selftest=1): drives the controls with real DOM events (browser test) ------
  function selftest() {
    const must = (cond, what) => { if (!cond) throw new Error("selftest: " + what); };
    const change = (id, v) => {
      $(id).value = String(v);
      $(id).dispatchEvent(new Event("change", { bubbles: true }));
    };
    const tab = (v) => document.querySelector('#tabs button[data-view="' + v + '"]').click();
    const count = (sel) => document.querySelectorAll(sel).length;
    const s = SENT.findIndex((x) => x.cross_attention.length > 0);
    if (s < 0) return "skipped (no sentence with attention)";
    change("sel-sentence", s);
    for (const kind of Object.keys(KINDS)) {
      change("sel-kind", kind);
      tab("model");
      const L = KINDS[kind].layers;
      must(count("#model-view .panel") === L * NH, kind + ": " + count("#model-view .panel") + " panels");
      document.querySelector('#model-view .panel[data-layer="' + (L - 1) + '"][data-head="' + (NH - 1) + '"]').click();
      must(!$("heatmap-view").hidden && $("model-view-wrap").hidden, kind + ": a click did not open the heatmap");
      must($("sel-layer").value === String(L - 1) && $("sel-head").value === String(NH - 1),
           kind + ": a click did not select its layer and head");
      const m = SENT[s][KINDS[kind].field][L - 1][NH - 1];
      must(count("#heatmap rect.cell") === m.length * m[0].length, kind + ": heatmap cells");
      const cell = document.querySelector('#heatmap rect.cell[data-q="0"][data-k="0"]');
      cell.dispatchEvent(new MouseEvent("mousemove", { bubbles: true, clientX: 20, clientY: 20 }));
      must(!tip.hidden && tip.textContent.includes("weight " + fmt(m[0][0])), kind + ": cell tooltip");
      $("heatmap").dispatchEvent(new MouseEvent("mouseleave"));
      change("sel-head", "avg");
      for (const row of matrix()) {
        const sum = row.reduce((a, b) => a + b, 0);
        must(Math.abs(sum - 1) < 1e-4, kind + ": an averaged row sums to " + sum);
      }
      tab("head");
      const tok = document.querySelector('#headview text.tok-q[data-i="0"]');
      tok.dispatchEvent(new MouseEvent("mouseover", { bubbles: true, clientX: 20, clientY: 20 }));
      const on = Array.from(document.querySelectorAll("#headview line.on"));
      must($("headview").classList.contains("focus"), kind + ": head view focus");
      must(on.length > 0 && on.length === count("#headview line.q0") && on.every((l) => l.classList.contains("q0")),
           kind + ": head view shows only the lines of the hovered token");
      const other = document.querySelector("#headview line.link:not(.q0)");
      must(!other || getComputedStyle(other).display === "none", kind + ": other lines hidden");
      tok.dispatchEvent(new MouseEvent("mouseout", { bubbles: true }));
      must(!$("headview").classList.contains("focus") && count("#headview line.on") === 0, kind + ": head view blur");
    }
    decoding.selftest(must, tab, change);
    return "passed";
  }

  const wantSelftest = /(^#|&)selftest=1(&|$)/.test(location.hash);
  readHash();
  render();
  statusEl.setAttribute("data-load-ms", performance.now().toFixed(0));
  if (wantSelftest) {
    try {
      statusEl.setAttribute("data-selftest", selftest());
    } catch (e) {
      statusEl.setAttribute("data-selftest", "failed");
      fail(e.message);
    }
  }
})();
