"use strict";
window.anuvadDecodingView = function (api) {
  const { $, esc, short, maxWidth, colour, fmt, showTip, hideTip, state, SENT, MODEL } = api;
  const ROW = 24, NODE_H = 18, PAD = 16;
  let NODE_W = 92, COL = 112;
  const STATUS_NAME = { root: "start", kept: "kept", pruned: "pruned", finished: "finished" };
  let tree = null, pinned = null, shown = null;

  const traceOf = (s) => (SENT.length && SENT[s].beam_trace ? SENT[s].beam_trace : null);

  // The drawn tree of one sentence: the start, then every candidate of every traced hypothesis
  // in the column of the step after its parent's. Hypothesis nodes know their step record.
  function build(t) {
    const nodes = [], byId = new Map(), hypStep = new Map();
    t.steps.forEach((step, n) => step.forEach((h) => hypStep.set(h.id, { h: h, step: n })));
    const root = { col: 0, status: "root", id: 0, token: null, parent: null, path: false };
    const r0 = hypStep.get(0);
    if (r0) Object.assign(root, { piece: r0.h.piece, logprob: 0, score: 0, normalized: r0.h.normalized, hyp: r0.h });
    else root.piece = "<s>";
    nodes.push(root);
    byId.set(0, root);
    t.steps.forEach((step, n) => {
      const col = [];
      step.forEach((h, slot) => h.candidates.forEach((c) => {
        const node = { col: n + 1, status: c.status, id: c.id, piece: c.piece, token: c.token, logprob: c.logprob,
                       score: c.score, normalized: c.normalized, rank: c.rank, parentHyp: h, slot: slot, path: false };
        const next = c.id === null ? null : hypStep.get(c.id);
        if (next) node.hyp = next.h;
        col.push(node);
      }));
      const order = { kept: 0, finished: 1, pruned: 2 };
      const nextIndex = (x) => (x.hyp ? t.steps[n + 1].indexOf(x.hyp) : 0);
      col.sort((a, b) => order[a.status] - order[b.status] || nextIndex(a) - nextIndex(b) ||
                         a.slot - b.slot || a.rank - b.rank);
      col.forEach((x, i) => { x.row = i; nodes.push(x); if (x.id !== null) byId.set(x.id, x); });
    });
    root.row = 0;
    for (const x of nodes) x.parentNode = x.parentHyp ? byId.get(x.parentHyp.id) : null;
    // The output path: from the best finished hypothesis back to the start.
    let pathLength = 0;
    for (let x = t.n_best.length ? byId.get(t.n_best[0]) : null; x; x = x.parentNode) { x.path = true; ++pathLength; }
    return { nodes: nodes, byId: byId, pathLength: pathLength, columns: t.steps.length + 1 };
  }

  function nodeTitle(x) {
    if (x.status === "root") return "start (BOS)";
    return "“" + x.piece + "” (id " + x.token + ") — " + STATUS_NAME[x.status] + ", rank " + (x.rank + 1) +
           "\np = " + fmt(Math.exp(x.logprob)) + ", log p = " + x.logprob.toFixed(4) + "\nscore " + x.score.toFixed(4) +
           ", normalized " + x.normalized.toFixed(4);
  }

  function draw() {
    const svg = $("decoding"), t = traceOf(state.s);
    pinned = shown = null;
    if (!t || !t.steps.length) {
      tree = null;
      svg.innerHTML = "";
      svg.setAttribute("width", 0);
      svg.setAttribute("height", 0);
      $("decoding-detail").innerHTML = "";
      $("decoding-caption").innerHTML = '<span class="empty">' + (t ? "This sentence was not decoded (empty source)."
        : "No beam trace in this dump: translate with --html, or with --beam-trace and --attention.") + "</span>";
      return { nodes: 0, path: 0, steps: 0 };
    }
    tree = build(t);
    NODE_W = Math.max(40, Math.min(100, maxWidth(tree.nodes.map((x) => short(x.piece, 11)), 12) + 14));
    COL = NODE_W + 26;
    let rows = 1;
    for (const x of tree.nodes) rows = Math.max(rows, x.row + 1);
    const out = [], px = (x) => PAD + x.col * COL, py = (x) => PAD + x.row * ROW + NODE_H / 2;
    for (const x of tree.nodes) {
      if (!x.parentNode) continue;
      const p = x.parentNode, x1 = px(p) + NODE_W, y1 = py(p), x2 = px(x), y2 = py(x), mx = (x1 + x2) / 2;
      out.push('<path class="edge ' + x.status + (x.path ? " path" : "") + '" d="M' + x1 + "," + y1 + " C" + mx + "," +
               y1 + " " + mx + "," + y2 + " " + x2 + "," + y2 + '"/>');
    }
    tree.nodes.forEach((x, i) => {
      out.push('<g class="node ' + x.status + (x.path ? " path" : "") + '" data-n="' + i + '" data-status="' + x.status +
               '" tabindex="0" transform="translate(' + px(x) + "," + (py(x) - NODE_H / 2) + ')"><rect width="' + NODE_W +
               '" height="' + NODE_H + '" rx="4"/><text x="6" y="' + NODE_H / 2 + '" dominant-baseline="central">' +
               esc(short(x.piece, 11)) + "</text></g>");
    });
    for (let c = 0; c < tree.columns; ++c)
      out.push('<text class="axis" x="' + (PAD + c * COL) + '" y="' + (PAD + rows * ROW + 12) + '">step ' + c + "</text>");
    svg.setAttribute("width", PAD * 2 + tree.columns * COL);
    svg.setAttribute("height", PAD * 2 + rows * ROW + 16);
    svg.innerHTML = out.join("");
    const d = api.DATA.decoding;
    $("decoding-caption").textContent = (d.beam_size > 1 ? "Beam search, beam " + d.beam_size : "Greedy search") +
      " — steps left to right; each node is a candidate next token (top " + t.top + " per live hypothesis): " +
      "kept (blue), finished (green), pruned (grey); the output is outlined. Hover or click a node for the " +
      "step's candidates and its cross-attention (layer " + (Math.min(state.layer, MODEL.decoder_layers - 1) + 1) +
      ", average over heads).";
    select(tree.nodes[0], true);
    return { nodes: tree.nodes.length, path: tree.pathLength, steps: t.steps.length };
  }

  // The step a node stands for: its own expansion when it was expanded, else its parent's.
  function detail(x) {
    const hyp = x.hyp || x.parentHyp, src = SENT[state.s].src_tokens;
    const rows = hyp.candidates.map((c) =>
      '<tr class="' + c.status + (!x.hyp && c.rank === x.rank ? " hl" : "") + '"><td>' + (c.rank + 1) +
      '</td><td class="piece">' + esc(c.piece) + "</td><td>" + fmt(Math.exp(c.logprob)) + "</td><td>" +
      c.logprob.toFixed(3) + "</td><td>" + c.score.toFixed(3) + "</td><td>" + c.normalized.toFixed(3) +
      "</td><td>" + c.status + "</td></tr>").join("");
    const layer = Math.min(state.layer, hyp.cross_attention.length - 1);
    const cross = (hyp.cross_attention[layer] || []).map((w, j) =>
      '<span class="tok xa" style="background:' + colour(w) + (w > 0.55 ? ";color:#fff" : "") + '" title="' +
      esc(src[j] ? src[j].piece : "?") + ": " + fmt(w) + '">' + esc(src[j] ? src[j].piece : "?") + "</span>").join("");
    const head = x.hyp ? "Step " + x.col + ": the candidates of “" + esc(x.piece) + "”"
                       : "Step " + (x.col - 1) + ": “" + esc(x.piece) + "” is candidate " + (x.rank + 1) + " of “" +
                         esc(x.parentHyp.piece) + "”";
    $("decoding-detail").innerHTML = '<div class="dh">' + head + (x.path ? " <i>(on the output path)</i>" : "") +
      '</div><table><thead><tr><th>#</th><th>token</th><th>p</th><th>log p</th><th>score</th><th>normalized</th>' +
      "<th>status</th></tr></thead><tbody>" + rows + "</tbody></table>" +
      '<div class="dh">Cross-attention of this step (layer ' + (layer + 1) + ", average over heads)</div>" +
      '<div class="tokens xrow">' + cross + "</div>";
  }

  function select(x, pin) {
    if (!x) return;
    if (pin) {
      for (const g of $("decoding").querySelectorAll("g.node.pinned")) g.classList.remove("pinned");
      const g = $("decoding").querySelector('g.node[data-n="' + tree.nodes.indexOf(x) + '"]');
      if (g) g.classList.add("pinned");
      pinned = x;
    }
    if (shown !== x) { shown = x; detail(x); }
  }
  const nodeAt = (e) => {
    const g = e.target.closest && e.target.closest("g.node");
    return g && tree ? tree.nodes[+g.getAttribute("data-n")] : null;
  };
  const svg = $("decoding");
  svg.addEventListener("mouseover", (e) => {
    const x = nodeAt(e);
    if (!x) return;
    select(x, false);
    showTip(e, nodeTitle(x));
  });
  svg.addEventListener("mouseleave", () => { hideTip(); select(pinned, false); });
  svg.addEventListener("click", (e) => select(nodeAt(e), true));
  svg.addEventListener("keydown", (e) => {
    if (e.key === "Enter" || e.key === " ") { e.preventDefault(); select(nodeAt(e), true); }
  });

  // Part of the page's selftest: node count, output path = the dump's output tokens and
  // log-probabilities, hover and click. Returns false when no sentence has a trace.
  function selftest(must, tab, change) {
    const s = SENT.findIndex((x) => x.beam_trace && x.beam_trace.steps.length);
    if (s < 0) return false;
    change("sel-sentence", s);
    tab("decoding");
    const t = SENT[s].beam_trace;
    let candidates = 0;
    for (const step of t.steps) for (const h of step) candidates += h.candidates.length;
    const count = (sel) => document.querySelectorAll(sel).length;
    must(count("#decoding g.node") === 1 + candidates, "decoding: " + count("#decoding g.node") + " nodes");
    const path = tree.nodes.filter((x) => x.path).sort((a, b) => a.col - b.col), tgt = SENT[s].tgt_tokens;
    must(path.length === tgt.length + 1, "decoding: output path of " + path.length + " nodes");
    path.slice(1).forEach((x, i) => {
      must(x.token === tgt[i].id, "decoding: path token " + i);
      must(tgt[i].logprob === null || Math.abs(x.logprob - tgt[i].logprob) <= 1e-5 * Math.max(1, Math.abs(x.logprob)),
           "decoding: path log p " + i + " is not the word score");
    });
    const g = document.querySelector('#decoding g.node.pruned') || document.querySelector("#decoding g.node:last-of-type");
    g.dispatchEvent(new MouseEvent("mouseover", { bubbles: true, clientX: 30, clientY: 30 }));
    must(count("#decoding-detail tbody tr") > 0 && count("#decoding-detail .xa") === SENT[s].src_tokens.length,
         "decoding: hover shows the candidates and the cross-attention row");
    g.dispatchEvent(new MouseEvent("click", { bubbles: true }));
    must(g.classList.contains("pinned"), "decoding: click pins the node");
    return true;
  }

  return { draw: draw, selftest: selftest };
};
