"""A self-contained HTML review page (no network): answers with claims highlighted in place, evidence on click.

The reports travel inside the page as JSON (escaped so that no text can end the script element: see
:func:`embed_json`); a small script builds the page with DOM calls (``textContent``, never ``innerHTML`` on data),
so nothing in an answer or a source can inject markup.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from html import escape
from typing import Any

from groundjudge.models import AnswerReport
from groundjudge.report import finite_report, summarize, summary_rows

_CSS = """
body{font:15px/1.5 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d1d1f;background:#f6f6f4}
header{background:#20242b;color:#fff;padding:16px 24px}header h1{margin:0 0 8px;font-size:20px}
#summary{display:grid;grid-template-columns:repeat(auto-fill,minmax(260px,1fr));gap:4px 24px;font-size:13px}
#summary div span{opacity:.7}
#filters{padding:10px 24px;background:#fff;border-bottom:1px solid #ddd;position:sticky;top:0;z-index:2}
#filters label{margin-right:14px;cursor:pointer}
main{display:grid;grid-template-columns:minmax(0,3fr) minmax(320px,2fr);gap:20px;padding:20px 24px}
.answer{background:#fff;border:1px solid #ddd;border-radius:8px;padding:14px 16px;margin-bottom:16px}
.answer h2{font-size:15px;margin:0 0 6px;display:flex;gap:10px;align-items:center}
.badge{font-size:12px;font-weight:600;border-radius:4px;padding:1px 7px;color:#fff}
.PASS{background:#2e7d32}.WARN{background:#b26a00}.FAIL{background:#c62828}.NO_CLAIMS,.ERROR{background:#666}
.q{color:#555;font-style:italic;margin:4px 0}.text{white-space:pre-wrap}
.claim{cursor:pointer;border-radius:3px;padding:0 1px;border-bottom:2px solid}
.claim.SUPPORTED{background:#e3f3e4;border-color:#2e7d32}.claim.CONTRADICTED{background:#fde2e2;border-color:#c62828}
.claim.UNSUPPORTED{background:#fff1d6;border-color:#b26a00}.claim.ERROR{background:#eee;border-color:#666}
.claim.selected{outline:2px solid #1565c0}.extra{margin-top:6px;font-size:13px}
#detail{position:sticky;top:60px;align-self:start;background:#fff;border:1px solid #ddd;border-radius:8px;
padding:14px 16px;max-height:calc(100vh - 90px);overflow:auto}
#detail h3{margin:0 0 8px;font-size:15px}#detail dl{display:grid;grid-template-columns:auto 1fr;gap:2px 12px;margin:0}
#detail dt{color:#666}.passage{white-space:pre-wrap;background:#fafafa;border:1px solid #eee;padding:8px;
font-size:13px;margin-top:6px}mark{background:#ffe066}.flag{color:#c62828;font-weight:600}
.hidden{display:none}
"""

_JS = r"""
const data = JSON.parse(document.getElementById('gj-data').textContent);
const el = (tag, cls, text) => { const e = document.createElement(tag); if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text); return e; };
const fmt = x => (x === null || x === undefined) ? '-' : Number(x).toFixed(3);
function showClaim(rep, cv, node) {
  document.querySelectorAll('.claim.selected').forEach(n => n.classList.remove('selected'));
  if (node) node.classList.add('selected');
  const d = document.getElementById('detail'); d.replaceChildren();
  d.append(el('h3', null, cv.claim.text));
  const dl = el('dl');
  const row = (k, v, cls) => { dl.append(el('dt', null, k)); dl.append(el('dd', cls, v)); };
  row('answer', rep.id); row('verdict', cv.label, 'verdict ' + cv.label); row('route', cv.route);
  if (cv.nli) { row('entailment', fmt(cv.nli.entailment)); row('contradiction', fmt(cv.nli.contradiction));
    row('passages scored', cv.nli.passages_scored + ' of ' + cv.nli.passages_total); }
  row('reason', cv.reason || '-'); row('flags', (cv.flags || []).join(', ') || '-', cv.flags.length ? 'flag' : null);
  if (cv.error) row('error', cv.error, 'flag');
  d.append(dl);
  const quotes = cv.quotes || [];
  if (!quotes.length && cv.nli && cv.nli.entailment_passage) {
    const p = cv.nli.entailment_passage;
    d.append(el('h4', null, 'Best NLI passage (document ' + (p.doc + 1) + ')'));
    d.append(passage(rep, p.doc, p.start, p.end, null, null));
  }
  quotes.forEach(q => {
    d.append(el('h4', null, 'Evidence' + (q.verified ? ' (document ' + (q.doc + 1) + ')' : ' — not found in the sources')));
    if (q.verified) d.append(passage(rep, q.doc, Math.max(0, q.start - 300), q.end + 300, q.start, q.end));
    else d.append(el('div', 'passage flag', q.text));
  });
}
function passage(rep, doc, from, to, ms, me) {
  const text = rep.contexts[doc] || ''; const box = el('div', 'passage');
  from = Math.max(0, from); to = Math.min(text.length, to);
  if (ms === null) { box.textContent = text.slice(from, to); return box; }
  box.append(document.createTextNode((from > 0 ? '…' : '') + text.slice(from, ms)));
  box.append(el('mark', null, text.slice(ms, me)));
  box.append(document.createTextNode(text.slice(me, to) + (to < text.length ? '…' : '')));
  return box;
}
function render() {
  const list = document.getElementById('answers');
  data.reports.forEach(rep => {
    const card = el('section', 'answer'); card.dataset.verdict = rep.verdict; card.id = 'answer-' + rep.id;
    const h = el('h2'); h.append(el('span', 'badge ' + rep.verdict, rep.verdict)); h.append(el('span', null, rep.id));
    const s = rep.scores;
    h.append(el('span', 'scores', 'combined ' + fmt(s.combined) + ' · claims ' + fmt(s.claims) + ' · coverage ' + fmt(s.coverage)));
    card.append(h);
    if (rep.question) card.append(el('div', 'q', rep.question));
    const text = rep.answer || ''; const body = el('div', 'text');
    const spans = rep.claims.filter(c => c.claim.span).sort((a, b) => a.claim.span.start - b.claim.span.start);
    let pos = 0;
    spans.forEach(cv => { const sp = cv.claim.span; if (sp.start < pos) return;
      body.append(document.createTextNode(text.slice(pos, sp.start)));
      const n = el('span', 'claim ' + cv.label, text.slice(sp.start, sp.end)); n.dataset.label = cv.label;
      n.title = cv.label + ': ' + cv.claim.text; n.onclick = () => showClaim(rep, cv, n); body.append(n); pos = sp.end; });
    body.append(document.createTextNode(text.slice(pos)));
    card.append(body);
    const placed = new Set(); let last = -1;
    spans.forEach(cv => { if (cv.claim.span.start >= last) { placed.add(cv.claim.id); last = cv.claim.span.end; } });
    const rest = rep.claims.filter(c => !placed.has(c.claim.id));
    if (rest.length) { const extra = el('div', 'extra', 'Claims: ');
      rest.forEach(cv => { const n = el('span', 'claim ' + cv.label, cv.claim.text); n.dataset.label = cv.label;
        n.onclick = () => showClaim(rep, cv, n); extra.append(n); extra.append(document.createTextNode(' ')); });
      card.append(extra); }
    (rep.errors || []).forEach(e => card.append(el('div', 'flag', e)));
    list.append(card);
  });
  const verdicts = [...new Set(data.reports.map(r => r.verdict))];
  const f = document.getElementById('filters'); f.append(el('strong', null, 'Show: '));
  verdicts.forEach(v => { const lab = el('label'); const box = el('input'); box.type = 'checkbox'; box.checked = true;
    box.value = v; box.onchange = applyFilters; lab.append(box); lab.append(document.createTextNode(' ' + v + ' (' +
    data.reports.filter(r => r.verdict === v).length + ')')); f.append(lab); });
}
function applyFilters() {
  const on = new Set([...document.querySelectorAll('#filters input:checked')].map(b => b.value));
  document.querySelectorAll('.answer').forEach(c => c.classList.toggle('hidden', !on.has(c.dataset.verdict)));
}
render();
"""


# Inside <script> the HTML parser ends the element at "</script" and enters a double-escaped state at
# "<!--<script", whatever the JSON says; so the data carries no "<", ">" or "&" at all (JSON escapes instead),
# and is ASCII (lone surrogates and line separators as \u escapes), so no text can end or bend the element.
_JSON_ESCAPES = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026"}


def _text(value: str) -> str:
    """``value`` as HTML text that can be written as UTF-8 (a lone surrogate shows as its escape)."""
    return escape(value.encode("utf-8", "backslashreplace").decode("utf-8"))


def embed_json(data: Any) -> str:
    """``data`` as JSON safe to put between ``<script type="application/json">`` tags (strict: no NaN)."""
    return json.dumps(data, ensure_ascii=True, allow_nan=False).translate(_JSON_ESCAPES)


def render_html(reports: Iterable[AnswerReport], title: str = "groundjudge review", only_flagged: bool = False) -> str:
    """The review page for ``reports`` as one HTML string."""
    chosen = [finite_report(r) for r in reports if r.flagged or not only_flagged]
    summary = summarize(chosen)
    payload: dict[str, Any] = {"reports": [r.model_dump(mode="json") for r in chosen]}
    blob = embed_json(payload)
    rows = "".join(f"<div><span>{_text(name)}:</span> {_text(value)}</div>" for name, value in summary_rows(summary))
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width,initial-scale=1'>"
        f"<title>{_text(title)}</title><style>{_CSS}</style></head><body>"
        f"<header><h1>{_text(title)}</h1><div id='summary'>{rows}</div></header>"
        "<div id='filters'></div><main><div id='answers'></div>"
        "<aside id='detail'><p>Click a highlighted claim to see its verdict and evidence.</p></aside></main>"
        f"<script type='application/json' id='gj-data'>{blob}</script><script>{_JS}</script></body></html>"
    )
