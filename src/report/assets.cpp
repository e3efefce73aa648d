#include "report/assets.h"

namespace kope::report {

const std::string_view k_error_hook_js = R"JS(
window.__kopeErrors = [];
window.addEventListener('error', function (e) {
  window.__kopeErrors.push('error: ' + (e.message || String(e)) + (e.lineno ? ' (line ' + e.lineno + ')' : ''));
});
window.addEventListener('unhandledrejection', function (e) {
  window.__kopeErrors.push('unhandled rejection: ' + String(e.reason));
});
(function () {
  var original = console.error;
  console.error = function () {
    window.__kopeErrors.push('console.error: ' + Array.prototype.join.call(arguments, ' '));
    return original.apply(console, arguments);
  };
})();
)JS";

const std::string_view k_report_css = R"CSS(
:root {
  --ink: #1b2430; --muted: #566273; --line: #d9dee5; --soft: #f4f6f9; --accent: #0b3d91;
  --mono: ui-monospace, "SFMono-Regular", "DejaVu Sans Mono", Menlo, Consolas, monospace;
}
* { box-sizing: border-box; }
html { font-size: 15px; }
body { margin: 0; color: var(--ink); background: #fff; line-height: 1.45;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", "DejaVu Sans", Arial, sans-serif; }
header.top { background: #13294b; color: #fff; padding: 18px 0 16px; }
header.top h1 { margin: 0 0 4px; font-size: 1.6rem; font-weight: 650; letter-spacing: .2px; }
header.top p { margin: 2px 0; color: #d6e0f0; }
header.top .runs-line span.swatch { border: 1px solid #fff; }
.wrap { max-width: 1180px; margin: 0 auto; padding: 0 24px; }
nav.toc { position: sticky; top: 0; z-index: 5; background: #fff; border-bottom: 1px solid var(--line); }
nav.toc ul { list-style: none; margin: 0 auto; padding: 8px 24px; max-width: 1180px; display: flex; flex-wrap: wrap; gap: 4px 18px; }
nav.toc a { color: var(--accent); text-decoration: none; font-weight: 550; }
nav.toc a:hover, nav.toc a:focus { text-decoration: underline; }
section { padding: 10px 0 18px; border-bottom: 1px solid var(--line); }
section > h2 { font-size: 1.3rem; margin: 14px 0 8px; }
h3 { font-size: 1.05rem; margin: 10px 0 4px; }
p.lead { color: var(--muted); margin: 0 0 10px; max-width: 900px; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(300px, 1fr)); gap: 12px; margin: 12px 0; }
.card { border: 1px solid var(--line); border-left: 6px solid var(--c, #0072B2); border-radius: 6px; padding: 10px 14px; background: #fff; }
.card h3 { margin: 0 0 6px; font-size: 1.05rem; }
.card dl { display: grid; grid-template-columns: minmax(0, 1fr) auto; gap: 2px 12px; margin: 0; }
.card dt { color: var(--muted); }
.card dd { margin: 0; font-weight: 600; font-variant-numeric: tabular-nums; text-align: right; white-space: nowrap; }
.big { font-size: 1.35rem; }
figure.chart { margin: 14px 0 20px; }
figure.chart figcaption h3 { margin: 0 0 2px; }
figure.chart figcaption p { margin: 0 0 6px; color: var(--muted); max-width: 980px; font-size: .93rem; }
.grid2 { display: grid; grid-template-columns: repeat(auto-fit, minmax(520px, 1fr)); gap: 8px 28px; }
.panels { display: flex; flex-wrap: wrap; gap: 8px; }
.panel { border: 1px solid var(--line); border-radius: 4px; background: #fff; }
.scroll { overflow-x: auto; }
svg { max-width: 100%; height: auto; display: block; }
svg text { font-family: inherit; font-size: 12px; fill: var(--ink); }
svg .tick { fill: var(--muted); font-size: 11px; font-variant-numeric: tabular-nums; }
svg .tick.small { font-size: 10px; }
svg .axis-label { fill: var(--muted); font-size: 12px; }
svg .row-label { font-size: 12px; }
svg .panel-title { font-weight: 650; font-size: 12px; }
svg .note { font-size: 11.5px; font-weight: 600; }
svg .value { font-size: 10.5px; fill: var(--muted); }
svg .empty-note { fill: var(--muted); font-style: italic; }
svg .grid { stroke: #e3e7ec; stroke-width: 1; }
svg .guide { stroke: #b9c1cc; stroke-width: 1; stroke-dasharray: 3 3; }
svg .axis-one { stroke: #4a5568; stroke-width: 1.4; }
svg .band { fill: #f5f7fa; }
svg .series { fill: none; stroke-width: 2.2; stroke-linejoin: round; }
svg .series.dashed { stroke-dasharray: 6 4; stroke-width: 1.8; }
svg .hollow { fill: #fff; stroke-width: 1.8; }
svg text.miss { font-size: 14px; font-weight: 700; }
svg .ci-band { fill: #13294b; opacity: .10; }
svg .estimate { stroke: #13294b; stroke-width: 1.5; stroke-dasharray: 4 3; }
svg .edge { fill: none; stroke: #8492a6; stroke-width: 1.6; }
svg .edge.dashed { stroke-dasharray: 5 4; }
svg .node { cursor: pointer; }
svg .node .shape { stroke: #1b2430; stroke-width: 1; }
svg .node:hover .shape, svg .node:focus .shape { stroke-width: 3; }
svg .node.selected .shape { stroke: #000; stroke-width: 3.5; }
svg .node:focus { outline: none; }
svg .best-ring { fill: none; stroke: #1b2430; stroke-width: 2.5; }
svg .node-label { font-size: 12px; font-weight: 700; pointer-events: none; }
ul.legend { list-style: none; display: flex; flex-wrap: wrap; gap: 4px 16px; margin: 4px 0 8px; padding: 0; font-size: .92rem; }
ul.legend li { display: flex; align-items: center; gap: 6px; }
.swatch { display: inline-block; width: 14px; height: 14px; border-radius: 3px; }
.swatch.round { border-radius: 50%; }
.swatch.ring { border-radius: 50%; border: 2.5px solid #1b2430; background: #fff; }
.swatch.dash { height: 0; width: 22px; border-top: 2px dashed #8492a6; border-radius: 0; }
.table-wrap { margin: 12px 0 18px; }
.table-head { display: flex; flex-wrap: wrap; align-items: baseline; gap: 4px 18px; }
.table-head h3 { margin: 0; }
.table-head label { font-size: .88rem; color: var(--muted); }
p.caption { color: var(--muted); margin: 2px 0 6px; font-size: .92rem; max-width: 980px; }
table.data { border-collapse: collapse; font-size: .9rem; font-variant-numeric: tabular-nums; }
table.data th, table.data td { padding: 4px 9px; border-bottom: 1px solid var(--line); white-space: nowrap; }
table.data td.wrap { white-space: normal; min-width: 16em; max-width: 32em; }
table.data th { background: var(--soft); text-align: left; position: sticky; top: 0; cursor: pointer; user-select: none; }
table.data th.num, table.data td.num { text-align: right; }
table.data th[aria-sort="ascending"]::after { content: " \25B2"; font-size: .7em; }
table.data th[aria-sort="descending"]::after { content: " \25BC"; font-size: .7em; }
table.data tbody tr:hover { background: #f0f5ff; }
.table-wrap .extra { display: none; }
.table-wrap.all-columns .extra { display: table-cell; }
td .run-dot { display: inline-block; width: 10px; height: 10px; border-radius: 50%; margin-right: 6px; vertical-align: baseline; }
.lineage-controls { display: flex; flex-wrap: wrap; gap: 8px 20px; align-items: center; margin: 8px 0; }
.lineage-controls select { font: inherit; padding: 3px 6px; }
.lineage-layout { display: grid; grid-template-columns: minmax(320px, 1fr) minmax(380px, 1.25fr); gap: 16px; align-items: start; }
@media (max-width: 1000px) { .lineage-layout { grid-template-columns: 1fr; } .grid2 { grid-template-columns: 1fr; } }
#lineage-trees { border: 1px solid var(--line); border-radius: 6px; padding: 8px; overflow-x: auto; min-height: 120px; }
#lineage-detail { border: 1px solid var(--line); border-radius: 6px; padding: 10px 14px; min-height: 120px; background: #fcfdff; }
#lineage-detail .hint { color: var(--muted); font-style: italic; }
#lineage-detail h4 { margin: 0 0 6px; font-size: 1.05rem; }
#lineage-detail dl { display: grid; grid-template-columns: max-content 1fr; gap: 3px 14px; margin: 6px 0; }
#lineage-detail dt { color: var(--muted); }
#lineage-detail dd { margin: 0; overflow-wrap: anywhere; }
.badge { display: inline-block; padding: 0 7px; border-radius: 10px; font-size: .82rem; font-weight: 600; margin-right: 4px; border: 1px solid var(--line); }
pre { font-family: var(--mono); font-size: .82rem; background: var(--soft); padding: 8px 10px; border-radius: 4px; overflow-x: auto; margin: 4px 0 10px; }
pre.journal { white-space: pre-wrap; }
pre.diff { max-height: 460px; overflow: auto; line-height: 1.35; padding: 6px 0; }
pre.diff span { display: block; padding: 0 10px; white-space: pre; }
pre.diff .add { background: #e3f5ea; color: #0b5a2c; }
pre.diff .del { background: #fde8e4; color: #8a1f0a; }
pre.diff .hunk { color: #5a3d99; background: #f0ecfa; }
.notes li { margin: 3px 0; }
footer { color: var(--muted); font-size: .88rem; padding: 14px 0 30px; }
#kope-selftest { font-family: var(--mono); white-space: pre-wrap; }
)CSS";

const std::string_view k_report_js = R"JS(
(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('kope-data').textContent);
  var each = function (list, fn) { Array.prototype.forEach.call(list, fn); };

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  // --- tables: sorting by the raw value of a column, column toggles ----------------------------
  function sortTable(table, index, th) {
    var ths = table.tHead.rows[0].cells;
    var asc = th.getAttribute('aria-sort') !== 'ascending';
    each(ths, function (h) { h.removeAttribute('aria-sort'); });
    th.setAttribute('aria-sort', asc ? 'ascending' : 'descending');
    var numeric = th.getAttribute('data-type') === 'num';
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = a.cells[index].getAttribute('data-v'), y = b.cells[index].getAttribute('data-v');
      var xe = x === null || x === '', ye = y === null || y === '';
      if (xe || ye) return xe === ye ? 0 : (xe ? 1 : -1);
      var c = numeric ? parseFloat(x) - parseFloat(y) : x.localeCompare(y);
      return asc ? c : -c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }
  each(document.querySelectorAll('table.sortable'), function (table) {
    each(table.tHead.rows[0].cells, function (th, i) {
      th.tabIndex = 0;
      th.addEventListener('click', function () { sortTable(table, i, th); });
      th.addEventListener('keydown', function (e) {
        if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); sortTable(table, i, th); }
      });
    });
  });
  each(document.querySelectorAll('input.show-all'), function (box) {
    box.addEventListener('change', function () {
      box.closest('.table-wrap').classList.toggle('all-columns', box.checked);
    });
  });

  // --- lineage ------------------------------------------------------------------------------
  var runSel = document.getElementById('lineage-run');
  var opSel = document.getElementById('lineage-op');
  var trees = document.getElementById('lineage-trees');
  var detail = document.getElementById('lineage-detail');

  function fx(v) { return v === null || v === undefined ? '-' : Number(v).toFixed(2) + 'x'; }
  function pct(v) { return v === null || v === undefined ? '-' : (100 * v).toFixed(1) + '%'; }
  function us(v) { return v === null || v === undefined ? '-' : Number(v).toFixed(2) + ' \u00b5s'; }
  function secs(v) { return Number(v || 0).toFixed(1) + ' s'; }

  function hint() {
    detail.textContent = '';
    detail.appendChild(el('p', 'hint', 'Select an attempt (click or Enter) to see its strategy, verdict, timings, journal and the diff to the kernel it began from.'));
  }

  function showTree() {
    if (!runSel || !opSel) return;
    var key = runSel.value + '/' + opSel.value;
    each(trees.querySelectorAll('.lineage-tree'), function (d) { d.hidden = d.getAttribute('data-key') !== key; });
    hint();
  }

  function field(dl, name, value) {
    if (value === null || value === undefined || value === '') return;
    dl.appendChild(el('dt', null, name));
    dl.appendChild(el('dd', null, value));
  }

  function renderDetail(key, k) {
    var info = data.lineage[key];
    var n = info && info.nodes[String(k)];
    detail.textContent = '';
    if (!n) { detail.appendChild(el('p', 'hint', 'No details for this attempt.')); return; }
    detail.appendChild(el('h4', null, 'Attempt ' + n.k + ' of ' + info.op + ' (' + info.run + ')'));
    var badges = el('div');
    [n.stage, n.verdict, n.verdict === 'correct' ? n.label : 'failed', n.best ? 'best kernel' : (n.improved ? 'new incumbent' : '')]
      .forEach(function (b) { if (b) badges.appendChild(el('span', 'badge', b)); });
    detail.appendChild(badges);
    var dl = el('dl');
    field(dl, 'Strategy', n.optimisation || '(not named)');
    field(dl, 'Began from', n.parent ? 'attempt ' + n.parent : (n.source_case ? 'memory case ' + n.source_case + ' (replay)' : 'nothing: a fresh draft'));
    field(dl, 'Verdict', n.verdict + (n.message ? ' \u2014 ' + n.message : ''));
    field(dl, 'First mismatch', n.first_mismatch);
    field(dl, 'Cases passed', n.cases_passed + ' of ' + n.cases_total);
    if (n.verdict === 'correct') {
      field(dl, 'Speedup', 'vs reference ' + fx(n.speedup_vs_reference) + ' \u00b7 vs library ' + fx(n.speedup_vs_library) +
        ' \u00b7 vs parent ' + fx(n.speedup_vs_parent) + ' \u00b7 vs incumbent ' + fx(n.speedup_vs_incumbent));
      field(dl, 'Roofline', pct(n.fraction_of_roofline));
    }
    var tiers = [];
    Object.keys(n.tier_tokens || {}).forEach(function (t) { tiers.push(t + ' ' + n.tier_tokens[t]); });
    field(dl, 'Tokens', n.tokens_prompt + ' prompt + ' + n.tokens_completion + ' completion' + (tiers.length ? ' (tiers: ' + tiers.join(', ') + ')' : ''));
    if (n.cost_usd) field(dl, 'Cost', '$' + Number(n.cost_usd).toFixed(4));
    field(dl, 'Time', 'model ' + secs(n.llm_seconds) + ', evaluation ' + secs(n.eval_seconds) + ', attempt ' + secs(n.wall_seconds));
    field(dl, 'Memory case', n.case_id);
    field(dl, 'Why notable', n.notable_reason);
    field(dl, 'Source', n.code_file);
    detail.appendChild(dl);
    if (n.timings && n.timings.length) {
      var t = el('table', 'data');
      var head = el('tr');
      ['timed case', 'median', '\u00b195% CI', 'reference', 'library', 'roofline'].forEach(function (h) { head.appendChild(el('th', 'num', h)); });
      var thead = el('thead'); thead.appendChild(head); t.appendChild(thead);
      var tb = el('tbody');
      n.timings.forEach(function (r) {
        var tr = el('tr');
        [r['case'], us(r.median_us), us(r.ci95_us), us(r.reference_us), us(r.library_us), pct(r.fraction_of_roofline)]
          .forEach(function (v) { tr.appendChild(el('td', 'num', v)); });
        tb.appendChild(tr);
      });
      t.appendChild(tb);
      detail.appendChild(el('h4', null, 'Timings'));
      detail.appendChild(t);
    }
    if (n.admission && n.admission.length) {
      var at = el('table', 'data');
      var ah = el('tr');
      ['memory item', 'tier', 'tokens', 'value', 'why admitted', 'score parts'].forEach(function (h) { ah.appendChild(el('th', null, h)); });
      var athead = el('thead'); athead.appendChild(ah); at.appendChild(athead);
      var ab = el('tbody');
      n.admission.forEach(function (r) {
        var parts = [];
        Object.keys(r.parts || {}).forEach(function (k) { parts.push(k + ' ' + Number(r.parts[k]).toFixed(2)); });
        var tr = el('tr');
        [r.id, r.tier + ' / ' + r.section, String(r.tokens), Number(r.value).toFixed(3), r.reason, parts.join(', ')]
          .forEach(function (v) { tr.appendChild(el('td', null, v)); });
        ab.appendChild(tr);
      });
      at.appendChild(ab);
      detail.appendChild(el('h4', null, 'Context admitted'));
      detail.appendChild(at);
    }
    if (n.journal) { detail.appendChild(el('h4', null, 'Journal')); detail.appendChild(el('pre', 'journal', n.journal)); }
    if (n.diagnostics) { detail.appendChild(el('h4', null, 'Diagnostics')); detail.appendChild(el('pre', 'journal', n.diagnostics)); }
    var d = n.diff || {};
    if (d.missing) {
      detail.appendChild(el('h4', null, 'Diff'));
      detail.appendChild(el('p', 'hint', d.missing));
    } else {
      detail.appendChild(el('h4', null, 'Diff to ' + d.against + ': +' + d.added + ' \u2212' + d.removed + (d.truncated ? ' (truncated)' : '')));
      var pre = el('pre', 'diff');
      (d.lines || []).forEach(function (l) {
        var cls = l[0] === '+' ? 'add' : l[0] === '-' ? 'del' : l[0] === '@' ? 'hunk' : '';
        pre.appendChild(el('span', cls, l[0] === '@' ? l[1] : l[0] + l[1]));
      });
      if (!d.lines || !d.lines.length) pre.appendChild(el('span', '', '(identical to its parent)'));
      detail.appendChild(pre);
    }
  }

  function selectNode(g) {
    var id = g.getAttribute('data-node');
    var cut = id.lastIndexOf('/');
    each(trees.querySelectorAll('.node.selected'), function (x) { x.classList.remove('selected'); });
    g.classList.add('selected');
    renderDetail(id.slice(0, cut), id.slice(cut + 1));
  }

  if (trees) {
    trees.addEventListener('click', function (e) {
      var g = e.target.closest ? e.target.closest('[data-node]') : null;
      if (g) selectNode(g);
    });
    trees.addEventListener('keydown', function (e) {
      if (e.key !== 'Enter' && e.key !== ' ') return;
      var g = e.target.closest ? e.target.closest('[data-node]') : null;
      if (g) { e.preventDefault(); selectNode(g); }
    });
    runSel.addEventListener('change', showTree);
    opSel.addEventListener('change', showTree);
    showTree();
  }

  // --- self-test (report.html#selftest) ------------------------------------------------------
  function selftest() {
    var result = { errors: [], charts: {}, missing_charts: [], empty_charts: [], lineage: null, sort: null };
    data.expected_charts.forEach(function (name) {
      var fig = document.querySelector('[data-chart="' + name + '"]');
      if (!fig) { result.missing_charts.push(name); return; }
      var marks = fig.querySelectorAll('.mark').length;
      result.charts[name] = marks;
      if (!marks || !fig.querySelector('svg')) result.empty_charts.push(name);
    });
    var node = trees && (trees.querySelector('.lineage-tree:not([hidden]) [data-node]') || trees.querySelector('[data-node]'));
    if (node) {
      var tree = node.closest('.lineage-tree');
      var parts = tree.getAttribute('data-key').split('/');
      runSel.value = parts[0];
      opSel.value = parts.slice(1).join('/');
      showTree();
      var target = node.querySelector('.shape') || node;
      var before = detail.textContent;
      target.dispatchEvent(new MouseEvent('click', { bubbles: true, cancelable: true, view: window }));
      result.lineage = { node: node.getAttribute('data-node'), selected: node.classList.contains('selected'),
                         changed: detail.textContent !== before, detail: detail.textContent.slice(0, 3000) };
    }
    var th = document.querySelector('#table-ops th[data-key="speedup_vs_reference"]');
    if (th) {
      th.dispatchEvent(new MouseEvent('click', { bubbles: true, cancelable: true, view: window }));
      var index = Array.prototype.indexOf.call(th.parentNode.cells, th);
      var values = [];
      each(th.closest('table').tBodies[0].rows, function (r) {
        var v = r.cells[index].getAttribute('data-v');
        if (v !== null && v !== '') values.push(parseFloat(v));
      });
      var ok = true;
      for (var i = 1; i < values.length; i++) if (values[i] < values[i - 1]) ok = false;
      result.sort = { column: 'speedup_vs_reference', values: values.length, ascending: ok, aria: th.getAttribute('aria-sort') };
    }
    result.errors = window.__kopeErrors.slice();
    var out = document.getElementById('kope-selftest');
    out.textContent = JSON.stringify(result);
    out.hidden = false;
  }
  if (location.hash === '#selftest') selftest();
})();
)JS";

}  // namespace kope::report
