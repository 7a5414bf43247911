// Answer explorer: filters over the index, a virtualized list, answers loaded by chunk on demand.
(function () {
  "use strict";
  var ROW = 56;            // px per list row (CSS .row height)
  var OVERSCAN = 6;        // rows drawn above and below the viewport
  var D = window.DAHL = window.DAHL || {};
  var idx = null, shown = new Int32Array(0), lowered = null, cursor = -1;
  var chunks = {}, waiting = {};

  function $(id) { return document.getElementById(id); }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function pct(x) { return x === null || x === undefined ? "—" : (100 * x).toFixed(1) + "%"; }
  function num(n) { return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ","); }  // 11815 -> "11,815"

  // ---- data files: <script> tags, since browsers block fetching file:// URLs
  D.chunk = function (k, rows) {
    chunks[k] = rows;
    (waiting[k] || []).forEach(function (f) { f(rows); });
    delete waiting[k];
  };
  function withChunk(k, f) {
    if (chunks[k]) { f(chunks[k]); return; }
    if (waiting[k]) { waiting[k].push(f); return; }
    waiting[k] = [f];
    var s = document.createElement("script");
    s.src = "data/answers-" + String(k).padStart(3, "0") + ".js";
    s.onerror = function () { $("detail").textContent = "Cannot load " + s.src + "."; };
    document.body.appendChild(s);
  }
  function withAnswer(i, f) {
    var k = Math.floor(i / idx.chunk_size);
    withChunk(k, function (rows) { f(rows[i - k * idx.chunk_size]); });
  }

  // ---- filters
  function fill(select, names) {
    names.forEach(function (n, code) {
      var o = el("option", null, n); o.value = String(code); select.appendChild(o);
    });
  }
  function applyFilters() {
    var c = idx.cols, n = idx.n;
    var m = $("f-model").value, cat = $("f-category").value, st = $("f-status").value, lab = $("f-label").value;
    var words = $("f-search").value.toLowerCase().split(/\s+/).filter(Boolean);
    if (words.length && !lowered) lowered = idx.questions.map(function (q) { return q.toLowerCase(); });
    var labCol = lab === "" ? null : c["n_" + idx.labels[+lab]];
    var out = new Int32Array(n), k = 0, claims = 0;
    for (var i = 0; i < n; i++) {
      if (m !== "" && c.m[i] !== +m) continue;
      if (cat !== "" && c.c[i] !== +cat) continue;
      if (st !== "" && c.s[i] !== +st) continue;
      if (labCol && labCol[i] === 0) continue;
      if (words.length) {
        var q = lowered[c.q[i]], hit = true;
        for (var w = 0; w < words.length && hit; w++) hit = q.indexOf(words[w]) >= 0;
        if (!hit) continue;
      }
      out[k++] = i;
      for (var l = 0; l < idx.labels.length; l++) claims += c["n_" + idx.labels[l]][i];
    }
    shown = out.subarray(0, k);
    $("count").textContent = num(k) + (k === 1 ? " answer · " : " answers · ") + num(claims) + (claims === 1 ? " claim" : " claims");
    $("spacer").style.height = (k * ROW) + "px";
    cursor = -1;
    $("list").scrollTop = 0;
    draw();
  }

  // ---- the virtualized list: only rows in view are in the DOM
  function draw() {
    var list = $("list"), spacer = $("spacer");
    var first = Math.max(0, Math.floor(list.scrollTop / ROW) - OVERSCAN);
    var last = Math.min(shown.length, Math.ceil((list.scrollTop + list.clientHeight) / ROW) + OVERSCAN);
    while (spacer.firstChild) spacer.removeChild(spacer.firstChild);
    var c = idx.cols;
    for (var p = first; p < last; p++) {
      var i = shown[p];
      var row = el("div", "row" + (p === cursor ? " current" : ""));
      row.id = "row-" + p;
      row.setAttribute("role", "option");
      row.setAttribute("aria-selected", p === cursor ? "true" : "false");
      row.dataset.pos = String(p);
      row.style.top = (p * ROW) + "px";
      row.appendChild(el("span", "q", idx.questions[c.q[i]]));
      var meta = el("span", "m");
      meta.appendChild(el("span", "model", idx.models[c.m[i]]));
      meta.appendChild(el("span", null, " · " + idx.categories[c.c[i]] + " · " + idx.statuses[c.s[i]] + " · "));
      ["supported", "unsupported", "irrelevant"].forEach(function (lab) {
        var badge = el("span", "lab " + lab, c["n_" + lab][i]);
        badge.title = c["n_" + lab][i] + " " + lab + " claims";
        meta.appendChild(badge);
      });
      if (c.p[i] !== null) meta.appendChild(el("span", "prec", pct(c.p[i])));
      row.appendChild(meta);
      spacer.appendChild(row);
    }
    if (p > first && D.firstRowsAt === undefined) D.firstRowsAt = performance.now();
    if (cursor >= 0) list.setAttribute("aria-activedescendant", "row-" + cursor);
    else list.removeAttribute("aria-activedescendant");
  }
  function select(p) {
    if (p < 0 || p >= shown.length) return;
    cursor = p;
    var list = $("list");
    if (p * ROW < list.scrollTop) list.scrollTop = p * ROW;
    else if ((p + 1) * ROW > list.scrollTop + list.clientHeight) list.scrollTop = (p + 1) * ROW - list.clientHeight;
    draw();
    open(shown[p]);
  }

  // ---- one answer
  function claimDetail(box, claim, n) {
    while (box.firstChild) box.removeChild(box.firstChild);
    box.appendChild(el("h4", null, "Claim " + (n + 1)));
    box.appendChild(el("p", "c-text", claim.t));
    var lab = el("p", "c-verdict");
    lab.appendChild(el("span", null, "Verdict: "));
    lab.appendChild(el("span", "c-label lab " + claim.l, claim.l));
    box.appendChild(lab);
    if (claim.r) box.appendChild(el("p", "c-reason", "Reason: " + claim.r));
    if (claim.raw) { box.appendChild(el("h5", null, "Checker's reply")); box.appendChild(el("pre", "c-raw", claim.raw)); }
    if (claim.err) box.appendChild(el("p", "c-error", "Error: " + claim.err));
    if (claim.ev && claim.ev.length) {
      box.appendChild(el("h5", null, "Evidence"));
      var ol = el("ol", "evidence");
      claim.ev.forEach(function (e) {
        var li = el("li");
        var head = [e.title, e.source, e.score === null || e.score === undefined ? null : "score " + e.score.toFixed(3)];
        li.appendChild(el("div", "ev-head", head.filter(Boolean).join(" · ")));
        li.appendChild(el("blockquote", null, e.text));
        ol.appendChild(li);
      });
      box.appendChild(ol);
    } else box.appendChild(el("p", "hint", "No evidence kept in this verdict."));
    box.hidden = false;
    if (box.scrollIntoView) box.scrollIntoView({ block: "nearest" });
  }
  function response(a, pick) {
    var div = el("div", "response");
    var spans = a.claims.map(function (c, n) { return [c, n]; }).filter(function (x) { return x[0].sp; });
    spans.sort(function (x, y) { return x[0].sp[0] - y[0].sp[0]; });
    var at = 0, text = a.response;
    spans.forEach(function (x) {
      var s = x[0].sp[0], e = x[0].sp[1];
      if (s < at || e > text.length || e <= s) return;  // overlapping or bad span: the claim list still has it
      div.appendChild(document.createTextNode(text.slice(at, s)));
      var mark = el("mark", "span lab " + x[0].l, text.slice(s, e));
      mark.tabIndex = 0;
      mark.setAttribute("role", "button");
      mark.setAttribute("aria-label", x[0].l + " claim " + (x[1] + 1));
      mark.addEventListener("click", function () { pick(x[1]); });
      mark.addEventListener("keydown", function (ev) { if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); pick(x[1]); } });
      div.appendChild(mark);
      at = e;
    });
    div.appendChild(document.createTextNode(text.slice(at)));
    return div;
  }
  function panel(a) {
    var sec = el("article", "answer");
    sec.dataset.id = a.id;
    var h = el("h3", null, a.model);
    sec.appendChild(h);
    var m = a.metrics || {};
    sec.appendChild(el("p", "a-meta", a.category + " · " + a.status + (a.reason ? " (" + a.reason + ")" : "") +
      " · DAHL precision " + pct(m.precision) + " · FActScore " + pct(m.factscore)));
    var box = el("div", "claim-detail");
    box.hidden = true;
    var buttons = [];
    function pick(n) {
      buttons.forEach(function (b, j) { b.setAttribute("aria-pressed", j === n ? "true" : "false"); });
      claimDetail(box, a.claims[n], n);
    }
    sec.appendChild(response(a, pick));
    if (a.claims.length && !a.claims.some(function (c) { return c.sp; }))
      sec.appendChild(el("p", "hint nospan", "These claims were given without their place in the response (no spans): their verdicts are in the list below."));
    sec.appendChild(box);
    if (a.claims.length) {
      sec.appendChild(el("h4", null, num(a.claims.length) + (a.claims.length === 1 ? " claim" : " claims")));
      var ol = el("ol", "claims");
      a.claims.forEach(function (c, n) {
        var li = el("li");
        var b = el("button", "claim lab " + c.l, c.t);
        b.type = "button";
        b.dataset.label = c.l;
        b.setAttribute("aria-pressed", "false");
        b.setAttribute("aria-label", c.l + ": " + c.t);
        b.addEventListener("click", function () { pick(n); });
        buttons.push(b);
        li.appendChild(b);
        ol.appendChild(li);
      });
      sec.appendChild(ol);
    }
    if (a.recall) {
      sec.appendChild(el("h4", null, "Reference facts · recall " + pct(a.recall.recall) + " · weighted " + pct(a.recall.recall_w)));
      var t = el("table", "facts");
      var hr = el("tr");
      ["Fact", "Weight", "Coverage"].forEach(function (x) { var th = el("th", null, x); th.scope = "col"; hr.appendChild(th); });
      t.appendChild(hr);
      a.recall.facts.forEach(function (f) {
        var tr = el("tr");
        tr.appendChild(el("td", null, f.t));
        tr.appendChild(el("td", "num", f.w.toFixed(2)));
        tr.appendChild(el("td", "cov " + f.l, f.l));
        t.appendChild(tr);
      });
      sec.appendChild(t);
    }
    return sec;
  }
  function open(i) {
    var detail = $("detail");
    withAnswer(i, function (a) {
      while (detail.firstChild) detail.removeChild(detail.firstChild);
      detail.appendChild(el("h2", "question", a.question));
      var pair = el("div", "pair");
      pair.appendChild(panel(a));
      detail.appendChild(pair);
      var other = $("f-compare").value;
      if (other === "" || +other === idx.cols.m[i]) return;
      var c = idx.cols, j = -1;
      for (var x = 0; x < idx.n && j < 0; x++) if (c.q[x] === c.q[i] && c.m[x] === +other) j = x;
      if (j < 0) { pair.appendChild(el("p", "hint", idx.models[+other] + " did not answer this question.")); return; }
      pair.classList.add("two");
      withAnswer(j, function (b) { pair.appendChild(panel(b)); });
    });
  }

  // ---- start
  D.index = function (data) {
    idx = data;
    fill($("f-model"), idx.models);
    fill($("f-compare"), idx.models);
    fill($("f-category"), idx.categories);
    fill($("f-status"), idx.statuses);
    fill($("f-label"), idx.labels);
    ["f-model", "f-category", "f-status", "f-label"].forEach(function (id) { $(id).addEventListener("change", applyFilters); });
    var timer = null;
    $("f-search").addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(applyFilters, 120); });
    $("f-compare").addEventListener("change", function () { if (cursor >= 0) open(shown[cursor]); });
    var list = $("list"), pending = false;
    list.addEventListener("scroll", function () {
      if (pending) return;
      pending = true;
      requestAnimationFrame(function () { pending = false; draw(); });
    });
    list.addEventListener("click", function (ev) {
      var row = ev.target.closest(".row");
      if (row) { list.focus(); select(+row.dataset.pos); }
    });
    list.addEventListener("keydown", function (ev) {
      var page = Math.max(1, Math.floor(list.clientHeight / ROW) - 1);
      var to = { ArrowDown: cursor + 1, ArrowUp: cursor - 1, PageDown: cursor + page, PageUp: cursor - page,
                 Home: 0, End: shown.length - 1 }[ev.key];
      if (ev.key === "Enter" && cursor >= 0) { ev.preventDefault(); open(shown[cursor]); return; }
      if (to === undefined) return;
      ev.preventDefault();
      select(Math.max(0, Math.min(shown.length - 1, to)));
    });
    window.addEventListener("resize", draw);
    applyFilters();
  };
})();
