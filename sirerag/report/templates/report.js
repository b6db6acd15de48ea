/* sirerag inspect: page script. Corpus text is only ever written with textContent. */
(function () {
  "use strict";
  // The data is gzip-compressed JSON in base64 (sirerag/report/render.py); the overview and the trees are
  // plain HTML and need none of it.
  function unpack(text) {
    var bin = atob(text), bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).text().then(JSON.parse);
  }
  function fail(err) {
    var note = document.createElement("p");
    note.className = "note";
    note.textContent = "The report's data could not be read (" + err + "): the overview and the trees work, " +
      "full texts, the pool search and the entity graph need a browser with DecompressionStream " +
      "(Chrome 80, Firefox 113, Safari 16.4 or later).";
    document.querySelector("header").appendChild(note);
    document.body.dataset.ready = "error";
  }
  if (typeof DecompressionStream === "undefined") fail("no DecompressionStream");
  else unpack(document.getElementById("report-data").textContent).then(start).catch(fail);

  function start(D) {
    var E = D.entries;  // [kind, tree, level, text, children, passages, entity, propositions]
    var KIND = D.kinds, TREE = D.trees;
    // rows come without their empty trailing fields; an aggregate's text 0 means "its propositions, joined"
    E.forEach(function (e) {
      for (var f = e.length; f < 8; f++) e.push(f === 6 ? null : []);
      if (e[3] === 0) e[3] = e[7].map(function (p) { return D.props[p][0]; }).join(" ");
    });
    var EDGE = ["contains", "co-occurrence", "synonym", "co-occurrence + synonym"];
    var EDGE_COLOUR = ["#bab0ac", "#59a14f", "#b07aa1", "#edc948"];

    function el(tag, cls, text) {
      var node = document.createElement(tag);
      if (cls) node.className = cls;
      if (text !== undefined && text !== null) node.textContent = String(text);
      return node;
    }
    function title(d) { return d >= 0 && D.titles[d] ? D.titles[d] : ""; }
    function preview(text, n) {
      text = text.replace(/\s+/g, " ");
      return text.length > n ? text.slice(0, n - 1) + "\u2026" : text;
    }

    var docLeaves = {};
    E.forEach(function (e, i) {
      if (e[0] === 0) e[5].forEach(function (d) { (docLeaves[d] = docLeaves[d] || []).push(i); });
    });

    function entryLink(i, label) {
      var a = el("a", "", label);
      a.href = "#n" + i;
      a.addEventListener("click", function (ev) { ev.preventDefault(); reveal(i); });
      return a;
    }

    // The full view of one entry: text, passages, and for aggregates the propositions grouped by document.
    function describe(i, box, withHeader) {
      var e = E[i];
      box.textContent = "";
      if (withHeader) {
        var h = el("div", "");
        h.appendChild(el("span", "badge k-" + KIND[e[0]], KIND[e[0]] + " L" + e[2]));
        h.appendChild(document.createTextNode(" " + TREE[e[1]] + " tree "));
        if (e[6]) h.appendChild(el("b", "entity", e[6] + " "));
        h.appendChild(entryLink(i, "show in tree"));
        box.appendChild(h);
      }
      if (e[0] === 0 && e[5].length) box.appendChild(el("div", "", "passage: " + title(e[5][0])));
      box.appendChild(el("div", "text", e[3]));
      if (e[0] === 2 && e[7].length) {
        var groups = {}, order = [];
        e[7].forEach(function (p) {
          var d = D.props[p][1];
          if (!(d in groups)) { groups[d] = []; order.push(d); }
          groups[d].push(p);
        });
        var wrap = el("div", "props");
        wrap.appendChild(el("div", "hint", e[7].length + " propositions from " + order.length + " documents"));
        order.forEach(function (d) {
          wrap.appendChild(el("h4", "", title(d) || "(untitled document)"));
          var ul = el("ul", "");
          groups[d].forEach(function (p) {
            var li = el("li", "", D.props[p][0] + " ");
            if (D.props[p][2] >= 0) li.appendChild(entryLink(D.props[p][2], "leaf"));
            ul.appendChild(li);
          });
          wrap.appendChild(ul);
        });
        box.appendChild(wrap);
      } else if (e[0] !== 0 && e[5].length) {
        box.appendChild(el("div", "hint", e[5].length + " passages: " + e[5].slice(0, 12).map(title).join("; ") +
          (e[5].length > 12 ? "; \u2026" : "")));
      }
    }

    // A tree node is <details id="nPOS"> (or data-i="POS" where it repeats); its full view goes after the summary.
    function fill(details) {
      if (details.querySelector(":scope > .full")) return;
      var box = el("div", "full");
      details.querySelector(":scope > summary").after(box);
      describe(details.id ? +details.id.slice(1) : +details.dataset.i, box, false);
    }
    document.addEventListener("toggle", function (ev) {
      var t = ev.target;
      if (t.tagName === "DETAILS" && t.open && t.classList.contains("node")) fill(t);
    }, true);

    function reveal(i) {
      var node = document.getElementById("n" + i);
      if (!node) return;
      for (var p = node; p; p = p.parentElement) if (p.tagName === "DETAILS") p.open = true;
      fill(node);
      node.scrollIntoView({block: "start"});
      if (location.hash !== "#n" + i) history.replaceState(null, "", "#n" + i);
    }

    // Pool search: plain case-insensitive substring over every entry's text.
    var lowered = null, timer = null;
    var qBox = document.getElementById("pool-q"), results = document.getElementById("pool-results");
    function searchPool() {
      var q = qBox.value.trim().toLowerCase();
      results.textContent = "";
      if (!q) { document.getElementById("pool-count").textContent = ""; return; }
      lowered = lowered || E.map(function (e) { return e[3].toLowerCase(); });
      var n = 0;
      for (var i = 0; i < E.length; i++) {
        var at = lowered[i].indexOf(q);
        if (at < 0) continue;
        n++;
        if (n > 100) continue;
        var e = E[i], li = el("li", "");
        li.appendChild(el("span", "badge k-" + KIND[e[0]], KIND[e[0]] + " L" + e[2]));
        var from = Math.max(0, at - 60), text = e[3];
        li.appendChild(document.createTextNode(" " + (from ? "\u2026" : "") + text.slice(from, at)));
        li.appendChild(el("mark", "", text.slice(at, at + q.length)));
        li.appendChild(document.createTextNode(preview(text.slice(at + q.length), 100)));
        li.addEventListener("click", describe.bind(null, i, document.getElementById("detail"), true));
        results.appendChild(li);
      }
      document.getElementById("pool-count").textContent = n + " entries match" + (n > 100 ? " (first 100 shown)" : "");
    }
    qBox.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(searchPool, 200); });

    // Entity graph: a search box draws an entity's neighbourhood, at most D.maxNodes nodes.
    // G.edges is flat: edge k is G.edges[4k .. 4k+3] = [node, node, weight, kind].
    var G = D.graph, adj = null, names = null, cy = null;
    function edge(k) { return G.edges.slice(4 * k, 4 * k + 4); }
    function ready() {
      if (adj) return;
      var n = G.entities.length + G.passages.length;
      adj = new Array(n);
      for (var i = 0; i < n; i++) adj[i] = [];
      for (var k = 0; 4 * k < G.edges.length; k++) { adj[G.edges[4 * k]].push(k); adj[G.edges[4 * k + 1]].push(k); }
      names = G.entities.map(function (s) { return s.toLowerCase(); });
    }
    function nodeLabel(v) {
      return v < G.entities.length ? G.entities[v] : title(G.passages[v - G.entities.length]) || "passage";
    }
    function status(text) { document.getElementById("graph-status").textContent = text; }

    function draw(v) {
      ready();
      var ne = G.entities.length, cap = D.maxNodes, edges = adj[v].map(edge);
      edges.sort(function (a, b) { return b[2] - a[2]; });
      var passages = [], entities = [];
      edges.forEach(function (e) { var o = e[0] === v ? e[1] : e[0]; (o >= ne ? passages : entities).push(o); });
      var room = cap - 1, half = Math.ceil(room / 2);
      var takeP = Math.min(passages.length, Math.max(half, room - entities.length));
      var takeE = Math.min(entities.length, room - takeP);
      var chosen = [v].concat(passages.slice(0, takeP), entities.slice(0, takeE));
      var inSet = {};
      chosen.forEach(function (u) { inSet[u] = true; });
      var elements = chosen.map(function (u) {
        return {data: {id: "v" + u, v: u, label: preview(nodeLabel(u), 40), kind: u >= ne ? "passage" : "entity",
                       centre: u === v ? 1 : 0}};
      });
      chosen.forEach(function (u) {
        adj[u].forEach(function (k) {
          var e = edge(k);
          if (e[0] === u && inSet[e[1]]) elements.push({data: {id: "e" + k, source: "v" + e[0], target: "v" + e[1],
            kind: e[3], colour: EDGE_COLOUR[e[3]], width: Math.min(10, 1 + 2 * Math.log2(1 + e[2])), weight: e[2]}});
        });
      });
      if (cy) cy.destroy();
      cy = cytoscape({
        container: document.getElementById("cy"), elements: elements, wheelSensitivity: 0.3, maxZoom: 1.6,
        style: [
          {selector: "node", style: {"label": "data(label)", "font-size": 9, "width": 14, "height": 14,
            "background-color": "#4e79a7", "text-valign": "bottom", "color": "#333"}},
          {selector: "node[kind = 'passage']", style: {"shape": "round-rectangle", "background-color": "#e15759"}},
          {selector: "node[centre = 1]", style: {"width": 26, "height": 26, "font-size": 12, "font-weight": "bold"}},
          {selector: "edge", style: {"line-color": "data(colour)", "width": "data(width)", "curve-style": "haystack",
            "opacity": 0.8}}
        ],
        layout: {name: "cose", animate: false, randomize: true, idealEdgeLength: function () { return 90; },
                 nodeRepulsion: function () { return 400000; }, nodeOverlap: 20}
      });
      cy.on("tap", "node", function (ev) {
        var u = ev.target.data("v");
        if (u < ne) { document.getElementById("entity-q").value = G.entities[u]; draw(u); } else showPassage(u - ne);
      });
      var list = document.getElementById("graph-list");
      list.textContent = "";
      chosen.forEach(function (u) {
        var kind = u >= ne ? "passage" : "entity", li = el("li", "", kind + ": " + nodeLabel(u));
        li.dataset.kind = kind;
        li.addEventListener("click", function () {
          if (kind === "entity") { document.getElementById("entity-q").value = G.entities[u]; draw(u); }
          else showPassage(u - ne);
        });
        list.appendChild(li);
      });
      var box = document.getElementById("cy");
      box.dataset.nodes = chosen.length;
      box.dataset.passages = takeP;
      status(G.entities[v] + ": " + edges.length + " neighbours, " + chosen.length + " nodes drawn (" + takeP +
        " passages), " + (elements.length - chosen.length) + " edges");
    }
    function showPassage(p) {
      var d = G.passages[p], box = document.getElementById("graph-detail"), leaves = docLeaves[d] || [];
      box.textContent = "";
      box.appendChild(el("h4", "", title(d) || "(untitled passage)"));
      leaves.forEach(function (i) { var div = el("div", ""); describe(i, div, true); box.appendChild(div); });
    }
    function findEntity(q) {
      ready();
      q = q.trim().toLowerCase();
      var exact = names.indexOf(q);
      if (exact >= 0) return exact;
      for (var i = 0; i < names.length; i++) if (names[i].indexOf(q) >= 0) return i;
      return -1;
    }
    function drawByName(name) {
      var v = findEntity(name);
      if (v < 0) { status("no entity matches \u201c" + name + "\u201d"); return; }
      document.getElementById("entity-q").value = G.entities[v];
      try { draw(v); } catch (err) { status("could not draw the graph: " + err); }
    }
    if (G) {
      var eBox = document.getElementById("entity-q"), matches = document.getElementById("entity-matches");
      eBox.addEventListener("input", function () {
        ready();
        var q = eBox.value.trim().toLowerCase(), shown = 0;
        matches.textContent = "";
        if (q.length < 2) return;
        for (var i = 0; i < names.length && shown < 30; i++) {
          if (names[i].indexOf(q) < 0) continue;
          shown++;
          var b = el("button", "", G.entities[i]);
          b.type = "button";
          b.addEventListener("click", draw.bind(null, i));
          matches.appendChild(b);
        }
      });
      eBox.addEventListener("keydown", function (ev) { if (ev.key === "Enter") drawByName(eBox.value); });
      var shortcuts = document.getElementById("entity-shortcuts");
      D.entities.forEach(function (name) {
        var b = el("button", "", name);
        b.type = "button";
        b.addEventListener("click", drawByName.bind(null, name));
        shortcuts.appendChild(b);
      });
    }

    function route() {
      var h = decodeURIComponent(location.hash.slice(1));
      if (/^n\d+$/.test(h)) reveal(+h.slice(1));
      else if (G && h.indexOf("entity=") === 0) drawByName(h.slice(7));
    }
    window.addEventListener("hashchange", route);
    if (G && D.entities.length && location.hash.indexOf("#entity=") !== 0) drawByName(D.entities[0]);
    route();
    document.body.dataset.ready = "1";
  }
})();
