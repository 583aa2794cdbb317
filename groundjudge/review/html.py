"""Self-contained HTML pages (no network): the review queue, and the comparison of two runs.

The review page is a place to work: answers riskiest first (:func:`risk_key`), claims highlighted in place,
evidence on click, and for each claim a reviewer's decision (accept, or SUPPORTED / CONTRADICTED / UNSUPPORTED
with a note) made with the mouse or the keyboard, kept in the browser's localStorage under the run's identity
(:func:`run_identity`) and exported as JSONL (``groundjudge metrics --reviews``, ``groundjudge calibrate --reviews``).

The reports travel inside the page as JSON (escaped so that no text can end the script element: see
:func:`embed_json`); a small script builds the page with DOM calls (``textContent``, never ``innerHTML`` on data),
so nothing in an answer or a source can inject markup. Plots are inline SVG from :mod:`groundjudge.review.plots`.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

from groundjudge.models import AnswerReport
from groundjudge.review.metrics import Review, join_reviews, unsupported_rate
from groundjudge.review.plots import histogram_svg
from groundjudge.review.report import corrected_rows, finite_report, summarize, summary_rows

_CSS = """
body{font:15px/1.5 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d1d1f;background:#f6f6f4}
header{background:#20242b;color:#fff;padding:16px 24px}header h1{margin:0 0 8px;font-size:20px}
#summary{display:grid;grid-template-columns:repeat(auto-fill,minmax(260px,1fr));gap:4px 24px;font-size:13px}
#summary div span{opacity:.7}
#headgrid{display:flex;flex-wrap:wrap;gap:16px 32px;align-items:flex-start}#summary{flex:1 1 480px}
#distribution svg{border-radius:6px;display:block}
#bar{padding:8px 24px;background:#fff;border-bottom:1px solid #ddd;position:sticky;top:0;z-index:2;font-size:13px}
#queuebar{display:flex;flex-wrap:wrap;gap:6px 18px;align-items:center}#progress{font-weight:600}
#storage.warn{color:#c62828;font-weight:600}#help{color:#555;margin:4px 0}kbd{border:1px solid #bbb;
border-radius:3px;padding:0 4px;background:#f4f4f4;font-size:12px}
#filters label{margin-right:14px;cursor:pointer}
.risk{font-size:12px;color:#8a1c1c;background:#fdecea;border-radius:4px;padding:0 6px}
.claim.decided{text-decoration:underline 3px #1565c0;text-underline-offset:3px}
.claim.overridden{text-decoration-color:#6a1b9a}
#decide{border:1px solid #cfd8e3;background:#f3f7fb;border-radius:6px;padding:8px;margin-bottom:10px}
#decide button{margin:2px 4px 2px 0;font-size:13px;cursor:pointer}#decide button.on{outline:2px solid #1565c0}
#decide textarea{width:100%;box-sizing:border-box;min-height:48px;margin-top:6px;font:inherit;font-size:13px}
#decision-state{font-size:13px;margin-bottom:4px}
main{display:grid;grid-template-columns:minmax(0,3fr) minmax(320px,2fr);gap:20px;padding:20px 24px}
.answer{background:#fff;border:1px solid #ddd;border-radius:8px;padding:14px 16px;margin-bottom:16px}
.answer h2{font-size:15px;margin:0 0 6px;display:flex;flex-wrap:wrap;gap:4px 10px;align-items:center}
.badge{font-size:12px;font-weight:600;border-radius:4px;padding:1px 7px;color:#fff}
.PASS{background:#2e7d32}.WARN{background:#b26a00}.FAIL{background:#c62828}.NO_CLAIMS,.ERROR{background:#666}
.q{color:#555;font-style:italic;margin:4px 0}.text{white-space:pre-wrap}
.claim{cursor:pointer;border-radius:3px;padding:0 1px;border-bottom:2px solid;scroll-margin:150px 0 40px}
.claim.SUPPORTED{background:#e3f3e4;border-color:#2e7d32}.claim.CONTRADICTED{background:#fde2e2;border-color:#c62828}
.claim.UNSUPPORTED{background:#fff1d6;border-color:#b26a00}.claim.ERROR{background:#eee;border-color:#666}
.claim.selected{outline:2px solid #1565c0}.extra{margin-top:6px;font-size:13px}
#detail{position:sticky;top:110px;align-self:start;background:#fff;border:1px solid #ddd;border-radius:8px;
padding:14px 16px;max-height:calc(100vh - 130px);overflow:auto}
#detail h3{margin:0 0 8px;font-size:15px}#detail dl{display:grid;grid-template-columns:auto 1fr;gap:2px 12px;margin:0}
#detail dt{color:#666}.passage{white-space:pre-wrap;background:#fafafa;border:1px solid #eee;padding:8px;
font-size:13px;margin-top:6px}mark{background:#ffe066}.flag{color:#c62828;font-weight:600}
.hidden{display:none}.reasons{font-size:13px;color:#333;margin:2px 0 6px;padding-left:18px}
.conversation{margin:6px 0;font-size:13px}.msg{border-left:3px solid #ccc;padding:2px 8px;margin:4px 0;
white-space:pre-wrap}.msg .role{font-weight:600;color:#555;margin-right:6px}.msg.evidence{border-color:#2e7d32;
background:#f3faf3}.msg.answer-turn{border-color:#1565c0}.msg.cited{outline:2px solid #f9a825;background:#fff8e1}
.msg .part{border:1px dashed #bbb;padding:2px 6px;margin-top:3px}.msg .part.cited{outline:2px solid #f9a825}
"""

_JS = r"""
const data = JSON.parse(document.getElementById('gj-data').textContent);
const el = (tag, cls, text) => { const e = document.createElement(tag); if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text); return e; };
const fmt = x => (x === null || x === undefined) ? '-' : Number(x).toFixed(3);
const LABELS = ['SUPPORTED', 'CONTRADICTED', 'UNSUPPORTED'];
const STORE = 'groundjudge-review:' + data.run;
const items = [];  // every claim on the page, in page order: {rep, cv, node, key}
let current = -1; let decisions = {}; let storageOk = true;
try { decisions = JSON.parse(localStorage.getItem(STORE) || '{}') || {}; } catch (e) { storageOk = false; }
let reviewer = '';
try { reviewer = localStorage.getItem('groundjudge-reviewer') || ''; } catch (e) { storageOk = false; }
function save() {
  try { localStorage.setItem(STORE, JSON.stringify(decisions)); } catch (e) { storageOk = false; }
  progress();
}
function progress() {
  const decided = items.filter(it => decisions[it.key] && decisions[it.key].label).length;
  document.getElementById('progress').textContent = decided + ' of ' + items.length + ' claims decided';
  const st = document.getElementById('storage');
  st.textContent = storageOk ? 'decisions are kept in this browser (run ' + data.run + ')'
    : 'this browser will not keep decisions: export before closing';
  st.className = storageOk ? '' : 'warn';
}
function mark(it) {
  const d = decisions[it.key]; const on = !!(d && d.label);
  it.node.classList.toggle('decided', on); it.node.classList.toggle('overridden', on && d.label !== it.cv.label);
  if (on) it.node.dataset.review = d.label; else delete it.node.dataset.review;
}
function decide(label) {
  if (current < 0) return; const it = items[current];
  const d = decisions[it.key] || {note: ''};
  d.label = label; d.decided_at = new Date().toISOString(); if (reviewer) d.reviewer = reviewer; else delete d.reviewer;
  decisions[it.key] = d; save(); mark(it); decisionPanel(it);
}
function accept() { if (current >= 0 && LABELS.includes(items[current].cv.label)) decide(items[current].cv.label); }
function clearDecision() {
  if (current < 0) return; const it = items[current]; const d = decisions[it.key];
  if (d) { delete d.label; delete d.decided_at; if (!d.note) delete decisions[it.key]; }
  save(); mark(it); decisionPanel(it);
}
function decisionPanel(it) {
  const box = document.getElementById('decide'); if (!box) return; box.replaceChildren();
  const d = decisions[it.key] || {};
  const state = el('div', null, d.label ? 'Your verdict: ' + d.label + (d.label === it.cv.label ? ' (agrees)' : ' (groundjudge: ' + it.cv.label + ')')
    : 'Not decided yet (groundjudge: ' + it.cv.label + ')'); state.id = 'decision-state'; box.append(state);
  const acc = el('button', 'accept', 'Accept ' + it.cv.label + ' (a)'); acc.dataset.action = 'accept';
  acc.disabled = !LABELS.includes(it.cv.label); acc.onclick = accept; box.append(acc);
  LABELS.forEach((lab, i) => { const b = el('button', d.label === lab ? 'on' : null, (i + 1) + ' ' + lab);
    b.dataset.label = lab; b.onclick = () => decide(lab); box.append(b); });
  const clr = el('button', null, 'Clear'); clr.dataset.action = 'clear'; clr.onclick = clearDecision; box.append(clr);
  const note = el('textarea'); note.id = 'note'; note.placeholder = 'Note (n to type here, Esc to leave)';
  note.value = d.note || '';
  note.oninput = () => { const r = decisions[it.key] || {}; r.note = note.value; decisions[it.key] = r; save(); };
  box.append(note);
}
function select(i) {
  if (i < 0 || i >= items.length) return; current = i; const it = items[i];
  showClaim(it.rep, it.cv, it.node); it.node.scrollIntoView({block: 'nearest'});
}
function visible(i) { return !items[i].node.closest('.answer').classList.contains('hidden'); }
function move(step) {
  for (let i = current + step; i >= 0 && i < items.length; i += step) if (visible(i)) { select(i); return; }
}
function showClaim(rep, cv, node) {
  document.querySelectorAll('.claim.selected').forEach(n => n.classList.remove('selected'));
  if (node) { node.classList.add('selected'); current = Number(node.dataset.idx); }
  const d = document.getElementById('detail'); d.replaceChildren();
  d.append(el('h3', null, cv.claim.text));
  const box = el('div'); box.id = 'decide'; d.append(box);
  if (current >= 0) decisionPanel(items[current]);
  const dl = el('dl');
  const row = (k, v, cls) => { dl.append(el('dt', null, k)); dl.append(el('dd', cls, v)); };
  row('answer', rep.id); row('verdict', cv.label, 'verdict ' + cv.label); row('route', cv.route);
  if (cv.nli) { row('entailment', fmt(cv.nli.entailment)); row('contradiction', fmt(cv.nli.contradiction));
    if (cv.nli.supported != null) row('P(supported), verdict head', fmt(cv.nli.supported));
    row('passages scored', cv.nli.passages_scored + ' of ' + cv.nli.passages_total); }
  row('contradiction checked', cv.contradiction_checked ? 'yes' : 'no', cv.contradiction_checked ? null : 'flag');
  row('reason', cv.reason || '-'); row('flags', (cv.flags || []).join(', ') || '-', cv.flags.length ? 'flag' : null);
  if (cv.error) row('error', cv.error, 'flag');
  d.append(dl);
  const quotes = cv.quotes || [];
  const docs = [];
  if (!quotes.length && cv.nli && cv.nli.entailment_passage) {
    const p = cv.nli.entailment_passage; docs.push(p.doc);
    d.append(el('h4', null, 'Best NLI passage (' + docName(rep, p.doc) + ')'));
    d.append(passage(rep, p.doc, p.start, p.end, null, null));
  }
  quotes.forEach(q => {
    if (q.verified) docs.push(q.doc);
    d.append(el('h4', null, 'Evidence' + (q.verified ? ' (' + docName(rep, q.doc) + ')' : ' — not found in the sources')));
    if (q.verified) d.append(passage(rep, q.doc, Math.max(0, q.start - 300), q.end + 300, q.start, q.end));
    else d.append(el('div', 'passage flag', q.text));
  });
  citeMessages(rep, docs);
}
function docName(rep, doc) {
  const src = rep.sources && rep.sources[doc];
  if (!src) return 'document ' + (doc + 1);
  const where = src.message === null || src.message === undefined ? 'contexts[' + (src.part || 0) + ']'
    : 'messages[' + src.message + ']';
  return where + ', ' + src.role + (src.tool_name ? ' ' + src.tool_name : '') +
    (src.tool_call_id ? ' (' + src.tool_call_id + ')' : '') + (src.note ? ': ' + src.note : '');
}
function citeMessages(rep, docs) {
  document.querySelectorAll('.msg.cited, .part.cited').forEach(n => n.classList.remove('cited'));
  const card = document.getElementById('answer-' + rep.id); if (!card || !rep.sources) return;
  docs.forEach(doc => { const src = rep.sources[doc]; if (!src) return;
    card.querySelectorAll('.msg[data-msg="' + src.message + '"], .part[data-doc="' + doc + '"]')
      .forEach(n => n.classList.add('cited')); });
}
function conversation(rep) {
  const box = el('details', 'conversation'); box.open = true;
  box.append(el('summary', null, 'Conversation (' + rep.conversation.length + ' messages; evidence in green)'));
  rep.conversation.forEach((m, i) => {
    const cls = 'msg' + (m.evidence ? ' evidence' : '') + (m.answer ? ' answer-turn' : '');
    const n = el('div', cls); n.dataset.msg = String(i);
    n.append(el('span', 'role', '[' + i + '] ' + m.role + (m.tool_name ? ' ' + m.tool_name : '') +
      (m.answer ? ' (the answer judged)' : '')));
    n.append(document.createTextNode(m.text));
    (rep.sources || []).forEach((src, doc) => { if (src.message === i && src.part !== null && src.part !== undefined) {
      const p = el('div', 'part', rep.contexts[doc]); p.dataset.doc = String(doc); n.append(p); } });
    box.append(n);
  });
  return box;
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
function claimNode(rep, cv, text) {
  const n = el('span', 'claim ' + cv.label, text); n.dataset.label = cv.label; n.dataset.claim = cv.claim.id;
  n.title = cv.label + ': ' + cv.claim.text; n.dataset.idx = String(items.length);
  const it = {rep: rep, cv: cv, node: n, key: JSON.stringify([rep.id, cv.claim.id])}; items.push(it);
  n.onclick = () => select(Number(n.dataset.idx)); mark(it); return n;
}
function render() {
  const list = document.getElementById('answers');
  data.reports.forEach((rep, ri) => {
    const card = el('section', 'answer'); card.dataset.verdict = rep.verdict; card.id = 'answer-' + rep.id;
    card.dataset.errors = ' ' + rep.claims.map(c => c.error_type).filter(Boolean).join(' ') + ' ';
    const h = el('h2'); h.append(el('span', 'badge ' + rep.verdict, rep.verdict)); h.append(el('span', null, rep.id));
    const s = rep.scores;
    h.append(el('span', 'scores', 'combined ' + fmt(s.combined) + ' · claims ' + fmt(s.claims) + ' · coverage ' + fmt(s.coverage)));
    (data.risk[ri] || []).forEach(r => h.append(el('span', 'risk', r)));
    card.append(h);
    const why = rep.verdict_reasons || [];
    if (why.length) { const ul = el('ul', 'reasons'); ul.title = 'why ' + rep.verdict;
      why.forEach(r => ul.append(el('li', null, r))); card.append(ul); }
    if (rep.question) card.append(el('div', 'q', rep.question));
    if (rep.conversation) card.append(conversation(rep));
    const text = rep.answer || ''; const body = el('div', 'text');
    const spans = rep.claims.filter(c => c.claim.span).sort((a, b) => a.claim.span.start - b.claim.span.start);
    const placed = new Set(); let pos = 0;
    spans.forEach(cv => { const sp = cv.claim.span; if (sp.start < pos) return;
      body.append(document.createTextNode(text.slice(pos, sp.start)));
      body.append(claimNode(rep, cv, text.slice(sp.start, sp.end))); placed.add(cv); pos = sp.end; });
    body.append(document.createTextNode(text.slice(pos)));
    card.append(body);
    const rest = rep.claims.filter(c => !placed.has(c));
    if (rest.length) { const extra = el('div', 'extra', 'Claims: ');
      rest.forEach(cv => { extra.append(claimNode(rep, cv, cv.claim.text)); extra.append(document.createTextNode(' ')); });
      card.append(extra); }
    (rep.errors || []).forEach(e => card.append(el('div', 'flag', e)));
    list.append(card);
  });
  const verdicts = [...new Set(data.reports.map(r => r.verdict))];
  const f = document.getElementById('filters'); f.append(el('strong', null, 'Show: '));
  verdicts.forEach(v => { const lab = el('label'); const box = el('input'); box.type = 'checkbox'; box.checked = true;
    box.value = v; box.onchange = applyFilters; lab.append(box); lab.append(document.createTextNode(' ' + v + ' (' +
    data.reports.filter(r => r.verdict === v).length + ')')); f.append(lab); });
  const kinds = [...new Set(data.reports.flatMap(r => r.claims.map(c => c.error_type).filter(Boolean)))].sort();
  if (kinds.length) { const sel = el('select'); sel.id = 'error-type'; sel.onchange = applyFilters;
    sel.append(new Option('any kind of error', ''));
    kinds.forEach(k => sel.append(new Option(k + ' (' + data.reports.filter(r => r.claims.some(c =>
      c.error_type === k)).length + ')', k)));
    const lab = el('label', null, 'Error: '); lab.append(sel); f.append(lab); }
  const who = document.getElementById('reviewer'); who.value = reviewer;
  who.oninput = () => { reviewer = who.value.trim(); try { localStorage.setItem('groundjudge-reviewer', reviewer); }
    catch (e) { storageOk = false; progress(); } };
  document.getElementById('export').onclick = download;
  progress();
}
function applyFilters() {
  const on = new Set([...document.querySelectorAll('#filters input:checked')].map(b => b.value));
  const sel = document.getElementById('error-type'); const kind = sel ? sel.value : '';
  document.querySelectorAll('.answer').forEach(c => c.classList.toggle('hidden', !on.has(c.dataset.verdict) ||
    (kind !== '' && !c.dataset.errors.includes(' ' + kind + ' '))));
}
function exportJsonl() {
  return items.filter(it => decisions[it.key] && decisions[it.key].label).map(it => {
    const d = decisions[it.key];
    const line = {id: it.rep.id, claim_id: it.cv.claim.id, claim: it.cv.claim.text, label: d.label,
      groundjudge_label: it.cv.label, route: it.cv.route, note: d.note || ''};
    if (d.reviewer) line.reviewer = d.reviewer;
    line.decided_at = d.decided_at; line.run = data.run;
    return JSON.stringify(line) + '\n';
  }).join('');
}
function download() {
  const blob = new Blob([exportJsonl()], {type: 'application/x-ndjson'});
  const url = URL.createObjectURL(blob); const a = el('a'); a.href = url;
  a.download = 'groundjudge-reviews-' + data.run + '.jsonl'; document.body.append(a); a.click(); a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}
document.addEventListener('keydown', ev => {
  const t = ev.target;
  if (t && (t.tagName === 'TEXTAREA' || (t.tagName === 'INPUT' && t.type === 'text'))) {
    if (ev.key === 'Escape') t.blur(); return; }
  if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
  const k = ev.key;
  if (k === 'j' || k === 'ArrowDown' || k === 'ArrowRight') move(1);
  else if (k === 'k' || k === 'ArrowUp' || k === 'ArrowLeft') move(-1);
  else if (k === '1' || k === '2' || k === '3') decide(LABELS[Number(k) - 1]);
  else if (k === 'a') accept();
  else if (k === 'n') { const n = document.getElementById('note'); if (n) n.focus(); }
  else return;
  ev.preventDefault();
});
render();
window.groundjudgeReview = {run: data.run, exportJsonl: exportJsonl, download: download,
  current: () => current < 0 ? null : {id: items[current].rep.id, claim_id: items[current].cv.claim.id}};
const firstOpen = items.findIndex(it => !(decisions[it.key] && decisions[it.key].label));
if (items.length) select(firstOpen < 0 ? 0 : firstOpen);
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


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def risk_counts(r: AnswerReport) -> dict[str, int]:
    """What makes an answer worth a look: contradicted claims, unverified quotes, unchecked and conflicting claims."""
    return {
        "contradicted": sum(c.label == "CONTRADICTED" for c in r.claims),
        "unverified_quote": sum("unverified_quote" in c.flags for c in r.claims),
        "contradiction_unchecked": sum(not c.contradiction_checked for c in r.claims),
        "conflict": sum("conflict" in c.flags for c in r.claims),
        "error_claims": sum(c.label == "ERROR" for c in r.claims),
        "wrong_citation": sum(c.citation in ("OTHER_SUPPORTS", "NOT_SUPPORTED") for c in r.claims),
    }


def risk_key(r: AnswerReport) -> tuple[int, int, int, int, int, float, int, int]:
    """Sort key, riskiest first: flagged (or citing wrongly) before clean; ERROR/FAIL; two judges that disagree
    (README "Second judge"); a contradicted claim; most wrong citations (a claim whose cited sources do not support
    it); lowest combined score; then most unverified quotes; then most claims whose contradiction was not checked or
    that carry ``conflict``."""
    n = risk_counts(r)
    combined = r.scores.combined
    return (
        0 if r.flagged or n["wrong_citation"] else 1,
        0 if r.verdict in ("ERROR", "FAIL") else 1,
        0 if r.judges_disagree else 1,
        0 if n["contradicted"] else 1,
        -n["wrong_citation"],
        combined if combined is not None and math.isfinite(combined) else -1.0,
        -n["unverified_quote"],
        -(n["contradiction_unchecked"] + n["conflict"]),
    )


def risk_reasons(r: AnswerReport) -> list[str]:
    """Why an answer is where it is in the queue, in words (shown on its card)."""
    n = risk_counts(r)
    out: list[str] = []
    if r.verdict in ("ERROR", "FAIL"):
        out.append(r.verdict)
    if r.judges_disagree:
        out.append("judges disagree")
    words = {
        "contradicted": "contradicted",
        "error_claims": "claim errors",
        "unverified_quote": "unverified quotes",
        "contradiction_unchecked": "contradiction not checked",
        "conflict": "conflict",
        "wrong_citation": "wrong citations",
    }
    out.extend(f"{n[k]} {w}" for k, w in words.items() if n[k])
    if _finite(r.scores.combined) and r.scores.combined is not None and r.scores.combined < 0.5:
        out.append(f"combined {r.scores.combined:.2f}")
    return out


_THRESHOLD = re.compile(r"(support|contradict|unsupported)(>=|<=)(\S+)")


def local_thresholds(versions: dict[str, str]) -> dict[str, float]:
    """The local thresholds a report was decided with, from its versions' ``thresholds`` string
    (``support>=0.9 contradict>=never unsupported<=0.1``): those in force, by name; "never" ones are left out."""
    out = {}
    for name, _, value in _THRESHOLD.findall(versions.get("thresholds", "")):
        try:
            out[name] = float(value)
        except ValueError:  # "never": no claim is decided on that side
            continue
    return out


def disagrees(c: Any) -> bool:
    """The local model and the judge disagree on a judged claim: its NLI support (the entailment, or the verdict
    head's probability) is at least even odds and the judge did not find it SUPPORTED, or below even odds and the
    judge did."""
    if c.route != "judge" or c.nli is None or c.nli.error or c.label == "ERROR":
        return False
    return (c.nli.support >= 0.5) != (c.label == "SUPPORTED")


def threshold_margin(c: Any, thresholds: dict[str, float]) -> float | None:
    """How close a locally decided claim came to the other side: the distance of its support to the support and
    unsupported thresholds, and of its contradiction to the contradiction threshold (None: no such claim, or no
    threshold in force)."""
    if c.route != "nli" or c.nli is None or c.nli.error:
        return None
    gaps = [abs(c.nli.support - thresholds[k]) for k in ("support", "unsupported") if k in thresholds]
    if "contradict" in thresholds:
        gaps.append(abs(c.nli.contradiction - thresholds["contradict"]))
    return min(gaps, default=None)


def informative_counts(r: AnswerReport, label_share: dict[str, float]) -> dict[str, Any]:
    """What a reviewer's decisions on an answer would teach: its claims where the local model and the judge disagree
    (:func:`disagrees`), the locally decided claim nearest a local threshold (:func:`threshold_margin`), and its
    rarest claim label (``label_share``: each label's share of the run's claims)."""
    thresholds = local_thresholds(r.versions)
    margins = [(m, c) for c in r.claims if (m := threshold_margin(c, thresholds)) is not None]
    near = min(margins, key=lambda mc: mc[0], default=None)
    rare = min(r.claims, key=lambda c: label_share.get(c.label, 0.0), default=None)
    return {
        "disagree": sum(disagrees(c) for c in r.claims),
        "margin": None if near is None else near[0],
        "near": None if near is None else near[1],
        "rare": None if rare is None else rare.label,
        "rare_share": None if rare is None else label_share.get(rare.label, 0.0),
    }


def label_shares(reports: Sequence[AnswerReport]) -> dict[str, float]:
    """Each claim label's share of the claims of ``reports``."""
    counts = Counter(c.label for r in reports for c in r.claims)
    total = sum(counts.values())
    return {label: n / total for label, n in counts.items()}


def informative_key(r: AnswerReport, label_share: dict[str, float]) -> tuple[int, int, int, float, float]:
    """Sort key, most informative first (``report --html --order informative``): answers with a claim where two
    judges (README "Second judge") or the local model and the judge disagree, most claims two judges disagree on
    first, then most NLI / judge disagreements; then the locally decided claim nearest a local threshold; then the
    rarest claim label. Riskiest first is :func:`risk_key`."""
    n = informative_counts(r, label_share)
    judges = sum(bool(c.judges_disagree) for c in r.claims)
    return (
        0 if n["disagree"] or judges else 1,
        -judges,
        -n["disagree"],
        math.inf if n["margin"] is None else n["margin"],
        1.0 if n["rare_share"] is None else n["rare_share"],
    )


def informative_reasons(r: AnswerReport, label_share: dict[str, float]) -> list[str]:
    """Why an answer is where it is in the most-informative-first queue, in words (shown on its card)."""
    n = informative_counts(r, label_share)
    out: list[str] = []
    judges = sum(bool(c.judges_disagree) for c in r.claims)
    if judges:
        out.append(f"{judges} claim{'s' * (judges > 1)} the two judges disagree on")
    if n["disagree"]:
        out.append(f"{n['disagree']} NLI / judge disagreement{'s' * (n['disagree'] > 1)}")
    if n["margin"] is not None and n["margin"] < 0.1:
        out.append(f"decided locally {n['margin']:.2f} from a threshold")
    if n["rare_share"] is not None and n["rare_share"] < 0.1:
        out.append(f"rare label {n['rare']} ({100 * n['rare_share']:.0f}% of claims)")
    return out


ORDERS = ("risk", "informative")


def run_identity(reports: Sequence[AnswerReport]) -> str:
    """A short hash of the answer ids, claim ids and texts, and versions: the key reviews are stored under."""
    h = hashlib.sha256()
    for r in reports:
        item = [r.id, sorted(r.versions.items()), [(c.claim.id, c.claim.text) for c in r.claims]]
        h.update(json.dumps(item, ensure_ascii=True).encode("ascii") + b"\n")
    return h.hexdigest()[:16]


def score_histogram(reports: Sequence[AnswerReport]) -> str:
    """Inline SVG: the combined scores of ``reports``, stacked by verdict."""
    groups: dict[str, list[float | None]] = {}
    for v in ("PASS", "WARN", "FAIL", "NO_CLAIMS", "ERROR"):
        groups[v] = [r.scores.combined for r in reports if r.verdict == v]
    return histogram_svg(groups, title="combined score by verdict")


_HELP = (
    "<kbd>j</kbd>/<kbd>k</kbd> or arrows: next / previous claim · <kbd>1</kbd> SUPPORTED · <kbd>2</kbd> CONTRADICTED"
    " · <kbd>3</kbd> UNSUPPORTED · <kbd>a</kbd> accept groundjudge's verdict · <kbd>n</kbd> note (<kbd>Esc</kbd> to"
    " leave it) · decisions are saved in this browser; export them as JSONL for <code>groundjudge metrics --reviews"
    "</code>"
)


def decision_rows(reports: Sequence[AnswerReport], reviews: Sequence[Review] | None = None) -> list[tuple[str, str]]:
    """The page header's rows on decisions: how many more the claim-level corrected unsupported rate needs
    (labels: the rows' gold labels and ``reviews``, a previous export of decisions) and, with ``reviews``, how much
    those decisions moved it."""
    before = unsupported_rate(reports, "claim")
    matched = join_reviews(reports, reviews).matched if reviews else []
    after = unsupported_rate(reports, "claim", matched) if matched else before

    def said(c: Any) -> str:
        if c.value is None:
            return "no number"
        return f"{100 * c.value:.1f}% [{100 * c.lo:.1f}, {100 * c.hi:.1f}]"

    if after.needs is None:
        needed = f"none: the corrected rate is {said(after)}"
    elif after.needs["positives"] or after.needs["negatives"]:
        needed = (
            f"at least {after.needs['positives'] + after.needs['negatives']} ({after.needs['positives']} on claims "
            f"that are not supported, {after.needs['negatives']} on supported ones)"
        )
    else:
        needed = after.reason or "-"
    rows = [("decisions the corrected unsupported rate still needs", needed)]
    if reviews:
        used = len(matched)  # a decision on a claim with a gold label replaces it
        rows.append(
            (
                f"moved by {used} previous decision{'s' * (used != 1)} ({len(reviews) - used} match no claim here)",
                f"corrected rate {said(before)} -> {said(after)}; labels {before.positives} + {before.negatives} -> "
                f"{after.positives} + {after.negatives} (not supported + supported)",
            )
        )
    return rows


def render_html(
    reports: Iterable[AnswerReport],
    title: str = "groundjudge review",
    only_flagged: bool = False,
    order: str = "risk",
    reviews: Sequence[Review] | None = None,
) -> str:
    """The review page for ``reports`` as one HTML string: a queue, riskiest first (``order`` "risk":
    :func:`risk_key`) or most informative first ("informative": :func:`informative_key`). The header gives the
    summary with its intervals and how many decisions the corrected unsupported rate still needs; ``reviews`` (a
    previous export of decisions) count as labels there, and the header says how much they moved it."""
    if order not in ORDERS:
        raise ValueError(f"order must be one of {', '.join(ORDERS)}, not {order!r}")
    every = [finite_report(r) for r in reports]
    chosen = [r for r in every if r.flagged or not only_flagged]
    summary = summarize(chosen)  # in file order: "the first failed rows" are the file's
    if order == "risk":
        chosen.sort(key=risk_key)  # stable: equally risky answers keep their file order
        reasons = [risk_reasons(r) for r in chosen]
    else:
        shares = label_shares(every)
        chosen.sort(key=lambda r: informative_key(r, shares))
        reasons = [informative_reasons(r, shares) for r in chosen]
    payload: dict[str, Any] = {
        "reports": [r.model_dump(mode="json") for r in chosen],
        "risk": reasons,
        "order": order,
        "run": run_identity(chosen),
    }
    blob = embed_json(payload)
    head = summary_rows(summary) + decision_rows(every, reviews)
    rows = "".join(f"<div><span>{_text(name)}:</span> {_text(value)}</div>" for name, value in head)
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width,initial-scale=1'>"
        f"<title>{_text(title)}</title><style>{_CSS}</style></head><body>"
        f"<header><h1>{_text(title)}</h1><div id='headgrid'><div id='summary'>{rows}</div>"
        f"<div id='distribution'>{score_histogram(chosen)}</div></div></header>"
        "<div id='bar'><div id='queuebar'><span id='progress'></span><span id='storage'></span>"
        "<label>reviewer <input id='reviewer' type='text' size='14' autocomplete='off'></label>"
        "<button id='export' type='button'>Export decisions (JSONL)</button></div>"
        f"<div id='help'>{_HELP}</div><div id='filters'></div></div><main><div id='answers'></div>"
        "<aside id='detail'><p>Click a highlighted claim to see its verdict and evidence.</p></aside></main>"
        f"<script type='application/json' id='gj-data'>{blob}</script><script>{_JS}</script></body></html>"
    )


# -- static pages: comparison of two runs, reliability diagram --------------------------------------------------

_STATIC_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d1d1f;background:#f6f6f4}
header{background:#20242b;color:#fff;padding:14px 24px}header h1{margin:0 0 4px;font-size:19px}
header p{margin:0;opacity:.8;font-size:13px}section{background:#fff;border:1px solid #ddd;border-radius:8px;
margin:16px 24px;padding:12px 16px}h2{font-size:15px;margin:0 0 8px}table{border-collapse:collapse;font-size:13px}
th,td{border:1px solid #e2e2e2;padding:3px 8px;text-align:left;vertical-align:top}th{background:#f3f3f1}
td.num{text-align:right;font-variant-numeric:tabular-nums}.worse{color:#c62828;font-weight:600}
.diag{color:#888}.flip{font-weight:600;background:#fff4e5}.lab{font-size:12px;font-weight:600;border-radius:4px;
padding:0 6px;color:#fff}.SUPPORTED{background:#2e7d32}.CONTRADICTED{background:#c62828}
.UNSUPPORTED{background:#b26a00}.ERROR{background:#666}.changed td{background:#fffbe6}.none{color:#999}
.answer h3{font-size:14px;margin:12px 0 4px}.side td{width:50%}.verdict{font-weight:600}
"""


def _static_page(title: str, subtitle: str, body: str) -> str:
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width,initial-scale=1'>"
        f"<title>{_text(title)}</title><style>{_STATIC_CSS}</style></head><body>"
        f"<header><h1>{_text(title)}</h1><p>{_text(subtitle)}</p></header>{body}</body></html>"
    )


def _f(x: float | None, fmt: str = ".3f") -> str:
    return "-" if x is None or not math.isfinite(x) else format(x, fmt)


def _iv(m: dict[str, Any], side: str) -> str:
    """`` [lo, hi]`` of a run's mean in a compare result ("" when the result has none)."""
    ci = m.get(f"mean_{side}_ci")
    return "" if not ci or None in ci else f" <small>[{_f(ci[0])}, {_f(ci[1])}]</small>"


def _needs(m: dict[str, Any]) -> str:
    """How many paired answers would detect a metric's difference that was not significant ("" when not asked)."""
    n = m.get("answers_needed")
    return "" if n is None else f"needs {n} answers to detect it"


def render_compare_html(
    a: Sequence[AnswerReport],
    b: Sequence[AnswerReport],
    result: dict[str, Any],
    title: str = "groundjudge compare",
    names: tuple[str, str] = ("A", "B"),
    top: int = 30,
) -> str:
    """The comparison of run B with run A as one static HTML page (no script): paired differences with their
    bootstrap intervals (inline SVG and a table), the verdict flip table, and the claims that changed, side by side.

    ``result`` is :func:`groundjudge.review.compare.compare_runs` on the same runs.
    """
    from groundjudge.review.compare import LOWER_IS_BETTER, changed_claims, verdict_table
    from groundjudge.review.plots import Interval, interval_svg

    na, nb = (_text(n) for n in names)
    intervals = [
        Interval(
            name=name + (" (lower is better)" if name in LOWER_IS_BETTER else ""),
            estimate=m["diff"],
            lo=m["ci95"][0],
            hi=m["ci95"][1],
            bad=bool(m["b_worse"]),
            note="B worse" if m["b_worse"] else ("significant" if m["significant"] else ""),
        )
        for name, m in result["metrics"].items()
    ]
    rows = "".join(
        f"<tr><td>{_text(name)}</td><td class='num'>{m['n']}</td><td class='num'>{_f(m['mean_a'])}{_iv(m, 'a')}</td>"
        f"<td class='num'>{_f(m['mean_b'])}{_iv(m, 'b')}</td><td class='num'>{_f(m['diff'], '+.3f')}</td>"
        f"<td class='num'>[{_f(m['ci95'][0], '+.3f')}, {_f(m['ci95'][1], '+.3f')}]</td>"
        f"<td class='num'>{_f(m['p_value'], '.4f')}</td>"
        f"<td class='num'>{_f(m.get('min_detectable_diff'), '.3f')}</td>"
        f"<td class='{'worse' if m['b_worse'] else ''}'>"
        f"{'B worse' if m['b_worse'] else ('significant' if m['significant'] else '')}"
        f"{_text(_needs(m))}"
        "</td></tr>"
        for name, m in result["metrics"].items()
    )
    metrics = (
        f"<section id='differences'><h2>Paired differences, B - A ({result['paired']} paired answers; "
        f"A={na}, B={nb})</h2>{interval_svg(intervals)}<table id='metrics-table'><tr><th>metric</th><th>n</th>"
        f"<th>mean A</th><th>mean B</th><th>diff</th><th>95% bootstrap CI</th><th>permutation p</th>"
        f"<th>detectable at 80% power</th><th></th></tr>{rows}</table></section>"
    )
    corrected = result.get("corrected_unsupported_rate")
    if corrected is not None:
        cells = "".join(
            f"<tr><th>{side.upper()}</th><td>{_text(name)}</td><td>{_text(value)}</td></tr>"
            for side in ("a", "b")
            for name, value in corrected_rows(corrected[side])
        )
        paired = "the same labelled answers in both runs" if corrected["paired"] else "labels on different answers"
        metrics += (
            f"<section id='corrected'><h2>Unsupported rate, raw and corrected for the checker's error ({paired})"
            f"</h2><table>{cells}</table><p>B - A: raw {_f(corrected['raw_diff'], '+.3f')}, corrected "
            f"{_f(corrected['diff'], '+.3f')}</p></section>"
        )
    vt = verdict_table(a, b)
    head = "".join(f"<th>{_text(v)}</th>" for v in vt["labels"])
    body_rows = "".join(
        f"<tr><th>{_text(va)}</th>"
        + "".join(
            f"<td class='num {'diag' if i == j else ('flip' if n else '')}' data-a='{_text(va)}' "
            f"data-b='{_text(vb)}'>{n}</td>"
            for j, (vb, n) in enumerate(zip(vt["labels"], vt["counts"][i], strict=True))
        )
        + "</tr>"
        for i, va in enumerate(vt["labels"])
    )
    mc = result["mcnemar"]
    flips = (
        f"<section id='flips'><h2>Verdict flips (rows: A, columns: B)</h2><table id='flip-table'><tr><th>A \\ B</th>"
        f"{head}</tr>{body_rows}</table><p>PASS lost {mc['pass_lost']}, gained {mc['pass_gained']} "
        f"(exact McNemar p={_f(mc['p_value'], '.4f')}). "
        f"{'B is significantly worse than A.' if result['b_significantly_worse'] else 'B is not significantly worse than A.'}"
        "</p></section>"
    )

    def cell(side: dict[str, Any] | None) -> str:
        if side is None:
            return "<td class='none'>(no such claim)</td>"
        return (
            f"<td><span class='lab {_text(side['label'])}'>{_text(side['label'])}</span> "
            f"<small>{_text(side['route'])}</small> {_text(side['text'])}</td>"
        )

    answers = []
    for ch in changed_claims(a, b, top=top):
        claim_rows = "".join(
            f"<tr class='{'changed' if r['changed'] else 'same'}'>{cell(r['a'])}{cell(r['b'])}</tr>"
            for r in ch["claims"]
        )
        answers.append(
            f"<div class='answer' data-id='{_text(ch['id'])}'><h3>{_text(ch['id'])}: "
            f"<span class='verdict'>{_text(ch['verdict_a'])} → {_text(ch['verdict_b'])}</span>, combined "
            f"{_f(ch['combined_a'])} → {_f(ch['combined_b'])}</h3><table class='side'><tr><th>A: {na}</th>"
            f"<th>B: {nb}</th></tr>{claim_rows}</table></div>"
        )
    changed = (
        f"<section id='changed'><h2>Claims that changed, side by side (largest change first, at most {top})</h2>"
        + ("".join(answers) or "<p>No answer's verdict or claims changed.</p>")
        + "</section>"
    )
    subtitle = f"A: {names[0]} ({result['n_a']} answers) · B: {names[1]} ({result['n_b']} answers)"
    kinds = result.get("error_types") or {}
    errors = (
        "<section id='error-types'><h2>Kinds of error (claims not SUPPORTED)</h2><table id='error-type-table'>"
        "<tr><th>kind</th><th>A</th><th>B</th><th>B - A</th></tr>"
        + "".join(
            f"<tr><td>{_text(k)}</td><td class='num'>{v['a']}</td><td class='num'>{v['b']}</td>"
            f"<td class='num {'worse' if v['diff'] > 0 else ''}'>{v['diff']:+d}</td></tr>"
            for k, v in kinds.items()
        )
        + "</table></section>"
        if kinds
        else ""
    )
    return _static_page(title, subtitle, metrics + flips + errors + changed)


def render_reliability_html(
    bins: Sequence[Any], title: str = "groundjudge reliability", subtitle: str = "", ece: float | None = None
) -> str:
    """A reliability diagram page: the SVG (:func:`groundjudge.review.plots.reliability_svg`) and its numbers per bin."""
    from groundjudge.review.plots import reliability_svg

    rows = "".join(
        f"<tr><td>[{b.lo:.2f}, {b.hi:.2f}{']' if b.hi >= 1 else ')'}</td><td class='num'>{b.count}</td>"
        f"<td class='num'>{_f(b.mean_predicted)}</td><td class='num'>{_f(b.observed)}</td></tr>"
        for b in bins
    )
    body = (
        f"<section id='reliability'><h2>Predicted entailment vs observed share SUPPORTED"
        f"{'' if ece is None else f' (expected calibration error {ece:.3f})'}</h2>{reliability_svg(bins)}"
        "<table id='bins'><tr><th>predicted</th><th>claims</th><th>mean predicted</th><th>observed SUPPORTED</th></tr>"
        f"{rows}</table></section>"
    )
    return _static_page(title, subtitle, body)
