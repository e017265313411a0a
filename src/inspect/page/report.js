"use strict";
(function () {
  const statusEl = document.getElementById("status");
  function fail(msg) {
    statusEl.textContent = "error: " + msg;
    statusEl.className = "error";
  }
  window.onerror = function (msg, src, line) { fail(msg + (line ? " (line " + line + ")" : "")); };

  const $ = (id) => document.getElementById(id);
  const DATA = JSON.parse($("report-data").textContent);
  const ALL = DATA.events;

  // --- the run shown: from the last start of a new run (later starts are resumes of it) -----
  let first = 0, earlierRuns = 0;
  ALL.forEach((e, i) => {
    if (e.event === "start" && !(e.resumed_from_step > 0)) {
      if (i > 0) ++earlierRuns;
      first = i;
    }
  });
  const EV = ALL.slice(first);
  const of = (kind) => EV.filter((e) => e.event === kind);
  const TRAIN = of("train"), VALID = of("valid"), STARTS = of("start"), ERRORS = of("error");
  const LAST = EV[EV.length - 1];
  const RESUMES = STARTS.filter((s) => s.resumed_from_step > 0).map((s) => s.resumed_from_step);
  const metricSeries = (name) =>
    VALID.filter((v) => name in v.metrics).map((v) => [v.step, v.metrics[name]]);

  // --- formatting ----------------------------------------------------------------------------
  const ESC = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ESC[c]);
  const isNum = (v) => typeof v === "number" && isFinite(v);
  function fmt(v) {
    if (v === null || v === undefined) return "—";
    if (typeof v !== "number") return String(v);
    if (!isFinite(v)) return String(v);
    if (v === 0) return "0";
    const a = Math.abs(v);
    if (a >= 1000) return String(Math.round(v));
    if (a < 0.01) return v.toExponential(2);
    return String(+v.toPrecision(4));
  }
  function fmtTick(v, step) {
    if (v === 0) return "0";
    const a = Math.abs(v);
    if (a >= 10000) return String(+(v / 1000).toFixed(step >= 1000 ? 0 : 1)) + "k";
    if (a < 0.01) return v.toExponential(1);
    const digits = Math.max(0, -Math.floor(Math.log10(step) + 1e-9));
    return v.toFixed(Math.min(6, digits));
  }
  function hms(s) {
    if (!isNum(s)) return "—";
    s = Math.round(s);
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
    const two = (n) => (n < 10 ? "0" : "") + n;
    return (h ? h + ":" + two(m) : String(m)) + ":" + two(sec);
  }
  function fmtValue(v) {
    if (Array.isArray(v)) return v.map(fmtValue).join(", ");
    if (v !== null && typeof v === "object") return JSON.stringify(v);
    return v === null ? "null" : v === undefined ? "—" : String(v);
  }
  function niceStep(range, n) {
    const raw = range / n, p = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / p;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
  }

  // --- charts --------------------------------------------------------------------------------
  const W = 640, H = 240, M = { l: 58, r: 16, t: 14, b: 34 };
  const PW = W - M.l - M.r, PH = H - M.t - M.b;
  const X_MAX = EV.reduce((m, e) => Math.max(m, isNum(e.step) ? e.step : isNum(e.steps) ? e.steps : 0,
                                             isNum(e.resumed_from_step) ? e.resumed_from_step : 0), 1);
  const sx = (x) => M.l + (x / X_MAX) * PW;
  const charts = {};

  function yRange(series, from0) {
    let lo = Infinity, hi = -Infinity;
    for (const s of series) for (const p of s.pts) if (isNum(p[1])) { lo = Math.min(lo, p[1]); hi = Math.max(hi, p[1]); }
    if (from0) lo = 0;
    if (!(hi > lo)) { const d = Math.abs(hi) * 0.1 || 1; lo = from0 ? 0 : lo - d; hi += d; }
    const pad = (hi - lo) * 0.06;
    return [from0 || lo >= 0 && lo - pad < 0 ? Math.max(0, lo - pad) : lo - pad, hi + pad];
  }
  function pathOf(pts, sy) {
    let d = "", pen = false, n = 0;
    for (const [x, y] of pts) {
      if (!isNum(y)) { pen = false; continue; }
      d += (pen ? "L" : "M") + sx(x).toFixed(1) + " " + sy(y).toFixed(1);
      pen = true;
      ++n;
    }
    return { d, n };
  }
  function axes(out, lo, hi) {
    const sy = (y) => M.t + PH - ((y - lo) / (hi - lo)) * PH;
    const ys = niceStep(hi - lo, 5), xs = niceStep(X_MAX, 8);
    for (let y = Math.ceil(lo / ys) * ys; y <= hi + 1e-12; y += ys) {
      out.push('<line class="grid" x1="' + M.l + '" x2="' + (W - M.r) + '" y1="' + sy(y) + '" y2="' + sy(y) + '"/>');
      out.push('<text x="' + (M.l - 6) + '" y="' + sy(y) + '" text-anchor="end" dominant-baseline="central">' +
               fmtTick(y, ys) + "</text>");
    }
    for (let x = 0; x <= X_MAX + 1e-9; x += xs)
      out.push('<text x="' + sx(x) + '" y="' + (H - M.b + 14) + '" text-anchor="middle">' + fmtTick(x, xs) + "</text>");
    out.push('<line class="axis-line" x1="' + M.l + '" x2="' + (W - M.r) + '" y1="' + (M.t + PH) + '" y2="' + (M.t + PH) + '"/>');
    out.push('<line class="axis-line" x1="' + M.l + '" x2="' + M.l + '" y1="' + M.t + '" y2="' + (M.t + PH) + '"/>');
    out.push('<text x="' + (M.l + PW / 2) + '" y="' + (H - 4) + '" text-anchor="middle">updates</text>');
    for (const r of RESUMES) {
      out.push('<line class="resume" data-step="' + r + '" x1="' + sx(r) + '" x2="' + sx(r) + '" y1="' + M.t + '" y2="' + (M.t + PH) + '"/>');
      out.push('<text class="resume-label" x="' + (sx(r) + 3) + '" y="' + (M.t + 9) + '">resumed</text>');
    }
    return sy;
  }
  /// The best point of `pts` (the first highest or lowest number), or null.
  function bestOf(pts, mode) {
    let best = null;
    for (const p of pts)
      if (isNum(p[1]) && (!best || (mode === "max" ? p[1] > best[1] : p[1] < best[1]))) best = p;
    return best;
  }
  function markBest(out, s, sy, nth) {
    const b = bestOf(s.pts, s.best);
    if (!b) return null;
    const x = sx(b[0]), y = sy(b[1]), label = "best " + s.label + " " + fmt(b[1]) + " (step " + b[0] + ")";
    out.push('<circle class="best ' + s.cls + '" data-step="' + b[0] + '" cx="' + x + '" cy="' + y + '" r="7"><title>' +
             esc(label) + "</title></circle>");
    const right = x > M.l + PW * 0.6, below = y < M.t + 16;  // labels of several series stack
    out.push('<text class="best-label" x="' + (right ? x - 10 : x + 10) + '" y="' + (below ? y + 16 + 14 * nth : y - 9 - 14 * nth) +
             '" text-anchor="' + (right ? "end" : "start") + '">' + esc(label) + "</text>");
    return b;
  }
  /// Draws the series ({cls, label, colour, pts: [[step, value]], markers, best: "min"|"max"})
  /// into svg#id; records what was drawn in charts[id] for the hover and the status.
  function chart(id, series, opts) {
    const svg = $(id), out = [], info = { series, points: {}, best: {} };
    svg.setAttribute("viewBox", "0 0 " + W + " " + H);
    const drawn = series.filter((s) => s.pts.some((p) => isNum(p[1])));
    $("legend-" + id.replace("chart-", "")).innerHTML = drawn.map((s) =>
      '<span><span class="key" style="background:' + s.colour + '"></span>' + esc(s.label) + "</span>").join("");
    charts[id] = info;
    if (!drawn.length) {
      svg.innerHTML = '<text class="empty" x="' + W / 2 + '" y="' + H / 2 + '" text-anchor="middle">' + esc(opts.empty) + "</text>";
      return info;
    }
    const [lo, hi] = yRange(drawn, opts.from0);
    const sy = axes(out, lo, hi);
    for (const s of drawn) {
      const p = pathOf(s.pts, sy);
      info.points[s.cls] = p.n;
      out.push('<path class="series ' + s.cls + '" data-points="' + p.n + '" d="' + p.d + '"/>');
      if (s.markers)
        for (const [x, y] of s.pts)
          if (isNum(y))
            out.push('<circle class="pt ' + s.cls + '" data-step="' + x + '" cx="' + sx(x).toFixed(1) + '" cy="' +
                     sy(y).toFixed(1) + '" r="3.2"><title>step ' + x + ": " + esc(s.label) + " " + fmt(y) + "</title></circle>");
    }
    let nth = 0;
    for (const s of drawn) if (s.best) { const b = markBest(out, s, sy, nth++); if (b) info.best[s.cls] = b[0]; }
    out.push('<line class="cursor" x1="0" x2="0" y1="' + M.t + '" y2="' + (M.t + PH) + '" visibility="hidden"/>');
    out.push('<rect class="hover" x="' + M.l + '" y="' + M.t + '" width="' + PW + '" height="' + PH + '" fill="transparent"/>');
    svg.innerHTML = out.join("");
    return info;
  }

  // --- hover: the values of every series at the nearest logged step -------------------------
  const tip = $("tooltip");
  function nearest(pts, step) {
    let best = null;
    for (const p of pts) if (isNum(p[1]) && (!best || Math.abs(p[0] - step) < Math.abs(best[0] - step))) best = p;
    return best;
  }
  function hover(id, e) {
    const svg = $(id), info = charts[id], box = svg.getBoundingClientRect();
    const step = ((e.clientX - box.left) * (W / box.width) - M.l) / PW * X_MAX;
    const lines = [];
    let at = null;
    for (const s of info.series) {
      const p = nearest(s.pts, step);
      if (!p) continue;
      if (at === null || Math.abs(p[0] - step) < Math.abs(at - step)) at = p[0];
      lines.push(s.label + ": " + fmt(p[1]) + " (step " + p[0] + ")");
    }
    if (at === null) return;
    const cursor = svg.querySelector("line.cursor");
    cursor.setAttribute("x1", sx(at));
    cursor.setAttribute("x2", sx(at));
    cursor.setAttribute("visibility", "visible");
    tip.textContent = lines.join("\n");
    tip.hidden = false;
    tip.style.left = Math.max(0, Math.min(e.clientX + 14, window.innerWidth - tip.offsetWidth - 4)) + "px";
    tip.style.top = Math.max(0, Math.min(e.clientY + 14, window.innerHeight - tip.offsetHeight - 4)) + "px";
  }
  function unhover(id) {
    tip.hidden = true;
    const cursor = $(id).querySelector("line.cursor");
    if (cursor) cursor.setAttribute("visibility", "hidden");
  }
  for (const id of ["chart-loss", "chart-quality", "chart-lr", "chart-speed"]) {
    $(id).addEventListener("mousemove", (e) => { if (charts[id].series.length) hover(id, e); });
    $(id).addEventListener("mouseleave", () => unhover(id));
  }

  // --- throughput between consecutive train events of one run segment -----------------------
  /// Target tokens per second of training alone over windows of about 1/80 of the train events:
  /// a window never spans a validation (nor the saving of best models after it) or a resume.
  function intervalSpeed() {
    const pts = [], every = Math.max(1, Math.round(TRAIN.length / 80));
    let prev = null, seen = 0;
    for (const e of EV) {
      if (e.event === "start" || e.event === "valid") { prev = null; seen = 0; }
      if (e.event !== "train" || (prev && ++seen < every)) continue;
      if (prev && isNum(e.tgt_tokens) && isNum(prev.tgt_tokens) && e.elapsed_s > prev.elapsed_s &&
          e.tgt_tokens >= prev.tgt_tokens)
        pts.push([e.step, (e.tgt_tokens - prev.tgt_tokens) / (e.elapsed_s - prev.elapsed_s)]);
      prev = e;
      seen = 0;
    }
    return pts;
  }

  function drawCharts() {
    const noTrain = "no \"train\" events in the log (--disp-freq 0?)";
    const loss = chart("chart-loss", [
      { cls: "train-loss", label: "training loss (label-smoothed)", colour: "var(--train)",
        pts: TRAIN.map((e) => [e.step, e.loss]) },
      { cls: "dev-ce", label: "dev cross-entropy", colour: "var(--dev)", markers: true, best: "min",
        pts: metricSeries("cross-entropy") },
    ], { empty: noTrain });
    const quality = chart("chart-quality", [
      { cls: "chrf", label: "chrF", colour: "var(--chrf)", markers: true, best: "max", pts: metricSeries("chrf") },
      { cls: "bleu", label: "BLEU", colour: "var(--bleu)", markers: true, best: "max", pts: metricSeries("bleu") },
    ], { from0: true, empty: VALID.length ? "no chrF or BLEU in the validations (--valid-metrics)"
                                          : "no validation in the log" });
    chart("chart-lr", [{ cls: "lr", label: "learning rate", colour: "var(--train)",
                         pts: TRAIN.map((e) => [e.step, e.learning_rate]) }], { from0: true, empty: noTrain });
    chart("chart-speed", [
      { cls: "speed", label: "mean since the run started", colour: "var(--train)",
        pts: TRAIN.map((e) => [e.step, e.tgt_tokens_per_s]) },
      { cls: "speed-interval", label: "recent updates, validations left out", colour: "var(--speed2)", pts: intervalSpeed() },
    ], { from0: true, empty: noTrain });
    return { loss, quality };
  }

  // --- tables --------------------------------------------------------------------------------
  /// A row of text cells: all <th> (header), all <td> (plain), or a <th> then <td>s.
  function addRow(table, cells, kind) {
    const tr = table.insertRow();
    cells.forEach((c, i) => {
      const td = document.createElement(kind === "header" || (kind !== "plain" && i === 0) ? "th" : "td");
      td.textContent = c;
      tr.appendChild(td);
    });
  }
  function lastOf(list, field) {
    for (let i = list.length - 1; i >= 0; --i) if (list[i][field] !== undefined) return list[i][field];
    return undefined;
  }
  function runState() {
    const step = lastOf(EV, "step");
    if (LAST.event === "error") return { text: "stopped by an error after step " + fmt(step), error: true };
    if (LAST.event !== "end") return { text: "in progress (no \"end\" event yet): step " + fmt(step) };
    if (LAST.interrupted) return { text: "interrupted at step " + LAST.steps + " (the same command resumes it)" };
    return { text: (LAST.early_stopped ? "stopped early" : "finished") + " at step " + LAST.steps };
  }
  function drawFinal(drawn) {
    const t = $("final"), end = LAST.event === "end" ? LAST : null, lastTrain = TRAIN[TRAIN.length - 1] || {};
    const v = VALID[VALID.length - 1];
    addRow(t, ["State", runState().text]);
    addRow(t, ["Updates", fmt(end ? end.steps : lastOf(EV, "step"))]);
    addRow(t, ["Epochs", fmt(end ? end.epochs : lastTrain.epoch)]);
    addRow(t, ["Elapsed", hms(end ? end.elapsed_s : lastOf(EV, "elapsed_s"))]);
    addRow(t, ["Throughput", fmt(end ? end.tgt_tokens_per_s : lastTrain.tgt_tokens_per_s) + " target tokens/s (mean)"]);
    if (lastTrain.tgt_tokens !== undefined) addRow(t, ["Target tokens", fmt(lastTrain.tgt_tokens)]);
    if (TRAIN.length) addRow(t, ["Last training loss", fmt(lastTrain.loss) + " (step " + lastTrain.step + ")"]);
    if (end && end.epoch_losses && end.epoch_losses.length)
      addRow(t, ["Epoch mean losses", (end.epoch_losses.length > 12 ? "… " : "") +
                 end.epoch_losses.slice(-12).map(fmt).join(", ") + " (" + end.epoch_losses.length + " epochs)"]);
    if (v) addRow(t, ["Last validation", "step " + v.step + ": " +
                      Object.keys(v.metrics).map((m) => m + " " + fmt(v.metrics[m])).join(", ")]);
    const best = (end && end.best) || (v && v.best) || {};
    const where = Object.assign({}, drawn.loss.best, drawn.quality.best);
    const bestStep = { "cross-entropy": where["dev-ce"], chrf: where.chrf, bleu: where.bleu };
    for (const m of Object.keys(best))
      addRow(t, ["Best " + m, fmt(best[m]) + (bestStep[m] !== undefined ? " (step " + bestStep[m] + ")" : "")]);
    if (v) addRow(t, ["Stalled validations", v.stalled + (v.early_stopping ? " of " + v.early_stopping + " (--early-stopping)" : "")]);
    if (end) addRow(t, ["Model written", end.model]);
  }
  function drawRuns() {
    const t = $("runs");
    addRow(t, ["start (UTC)", "from step", "parameters", "threads", "examples (train / dev)", "until"], "header");
    EV.forEach((s, i) => {
      if (s.event !== "start") return;
      let stop = "in progress";
      for (let j = i + 1; j < EV.length && EV[j].event !== "start"; ++j) {
        const e = EV[j];
        if (e.event === "end") stop = "step " + e.steps + (e.interrupted ? ", interrupted" : e.early_stopped ? ", early stop" : "");
        if (e.event === "error") stop = "error";
      }
      addRow(t, [fmtValue(s.time), String(s.resumed_from_step), fmt(s.parameters), fmt(s.threads),
                 fmt(s.train_examples) + " / " + fmt(s.valid_examples), stop], "plain");
    });
  }
  function drawConfig() {
    const box = $("config"), start = STARTS[STARTS.length - 1];
    if (!start) { box.textContent = "No \"start\" event in the log."; return; }
    const groups = { run: [] };
    for (const [k, v] of Object.entries(start.config)) {
      if (v !== null && typeof v === "object" && !Array.isArray(v)) groups[k] = Object.entries(v);
      else groups.run.push([k, v]);
    }
    for (const [name, rows] of Object.entries(groups)) {
      if (!rows.length) continue;
      const t = document.createElement("table");
      t.createCaption().textContent = name;
      for (const [k, v] of rows) addRow(t, [k, fmtValue(v)]);
      box.appendChild(t);
    }
  }
  function drawHeader() {
    $("log-name").textContent = DATA.log;
    const st = runState(), el = $("run-state");
    el.textContent = st.text;
    if (st.error) el.className = "error";
    const notes = [];
    if (earlierRuns) notes.push(["", "The log holds " + earlierRuns + " earlier run(s) started over; the page shows the last one."]);
    for (const e of ERRORS) notes.push(["error", "Error: " + e.message]);
    if (!VALID.length) notes.push(["", "No validation in the log (--no-valid, or none yet)."]);
    for (const [cls, text] of notes) {
      const d = document.createElement("div");
      d.className = cls;
      d.textContent = text;
      $("notes").appendChild(d);
    }
  }

  // --- self-test (#selftest=1): hover and path checks (browser test) ------------------------
  function selftest() {
    const must = (cond, what) => { if (!cond) throw new Error("selftest: " + what); };
    for (const p of document.querySelectorAll("path.series")) {
      const n = (p.getAttribute("d").match(/[ML]/g) || []).length;
      must(n === +p.getAttribute("data-points"), p.getAttribute("class") + ": " + n + " points drawn");
    }
    if (!TRAIN.length) return "passed (no train events)";
    const svg = $("chart-loss"), box = svg.getBoundingClientRect(), last = TRAIN[TRAIN.length - 1];
    const x = box.left + (sx(last.step) / W) * box.width, y = box.top + box.height / 2;
    svg.querySelector("rect.hover").dispatchEvent(new MouseEvent("mousemove", { bubbles: true, clientX: x, clientY: y }));
    must(!tip.hidden && tip.textContent.includes("(step " + last.step + ")"), "hover tooltip: " + tip.textContent);
    must(svg.querySelector("line.cursor").getAttribute("visibility") === "visible", "hover cursor");
    svg.dispatchEvent(new MouseEvent("mouseleave"));
    must(tip.hidden, "tooltip hidden after mouseleave");
    return "passed";
  }

  drawHeader();
  const drawn = drawCharts();
  drawFinal(drawn);
  drawRuns();
  drawConfig();
  if (!statusEl.classList.contains("error")) {
    statusEl.textContent = "ok";
    const set = (k, v) => statusEl.setAttribute("data-" + k, v === undefined ? "" : v);
    set("train-points", drawn.loss.points["train-loss"] || 0);
    set("valid-events", VALID.length);
    set("resumes", RESUMES.length);
    set("best-chrf-step", drawn.quality.best.chrf);
    set("best-bleu-step", drawn.quality.best.bleu);
    set("best-ce-step", drawn.loss.best["dev-ce"]);
    if (/(^#|&)selftest=1(&|$)/.test(location.hash)) {
      try {
        set("selftest", selftest());
      } catch (e) {
        set("selftest", "failed");
        fail(e.message);
      }
    }
  }
})();
